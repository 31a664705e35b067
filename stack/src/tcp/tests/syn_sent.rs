//! SYN-SENT: active opens (RFC 9293 §3.10.7.3), simultaneous open.

use core::net::{IpAddr, Ipv6Addr, SocketAddr, SocketAddrV4};

use super::harness::*;
use crate::api::{ConnectError, ConnectionError, Event, RecvError};
use crate::tcp::State;
use crate::time::Duration;

/// Connects to the peer's port 80 and checks the SYN; our port is the first
/// ephemeral one.
fn syn_sent() -> (T, Seg) {
    let mut t = T::bare(config());
    t.handle = Some(t.shard.connect(t.now, SocketAddrV4::new(REMOTE_IP, 80)).unwrap());
    let segs = t.segments();
    assert_eq!(segs.len(), 1);
    let syn = segs[0].clone();
    assert!(syn.syn && syn.ack.is_none() && syn.mss == Some(1460));
    assert_eq!((syn.src_port, syn.dst_port), (49152, 80));
    assert_eq!(syn.window, RX_BUFFER as u16);
    t.iss = syn.seq;
    (t, syn)
}

/// A segment from the peer's port 80 to our ephemeral port.
fn from_peer(t: &T) -> Seg {
    t.seg_in().src_port(80).dst_port(49152)
}

fn to_peer(t: &T) -> Seg {
    t.seg_out().src_port(49152).dst_port(80)
}

#[test]
fn syn_ack_completes_the_open() {
    let (mut t, _) = syn_sent();
    t.send(from_peer(&t).seq(IRS).syn().mss(PEER_MSS));
    t.recv(&[to_peer(&t)]);
    assert_eq!(t.event(), Some(Event::Connected(t.h())));
    assert_eq!(t.shard.flow(t.h()).unwrap().state, State::Established);
    assert!(t.shard.flow(t.h()).unwrap().srtt.is_some(), "the handshake gives an RTT sample");
}

#[test]
fn data_queued_before_the_handshake_goes_out_after_it() {
    let (mut t, _) = syn_sent();
    assert_eq!(t.shard.send(t.h(), b"early"), Ok(5));
    t.recv_nothing();
    t.send(from_peer(&t).seq(IRS).syn().mss(PEER_MSS));
    t.recv(&[to_peer(&t).data(b"early").psh()]);
}

#[test]
fn syn_ack_with_a_bad_ack_is_reset() {
    let (mut t, _) = syn_sent();
    t.send(from_peer(&t).seq(IRS).syn().ack(t.iss.wrapping_add(9)));
    t.recv(&[to_peer(&t).seq(t.iss.wrapping_add(9)).no_ack().rst().window(0)]);
    assert_eq!(t.shard.flow(t.h()).unwrap().state, State::SynSent);
}

#[test]
fn rst_with_acceptable_ack_refuses_the_connection() {
    let (mut t, _) = syn_sent();
    t.send(from_peer(&t).seq(0).rst());
    t.recv_nothing();
    assert_eq!(t.event(), Some(Event::Error(t.h(), ConnectionError::Refused)));
    let mut buf = [0; 4];
    assert_eq!(t.shard.recv(t.h(), &mut buf), Err(RecvError::Connection(ConnectionError::Refused)));
    t.shard.close(t.h());
    assert_eq!(t.shard.connection_count(), 0);
}

#[test]
fn rst_without_ack_is_ignored() {
    let (mut t, _) = syn_sent();
    t.send(from_peer(&t).seq(IRS).rst().no_ack());
    t.recv_nothing();
    assert_eq!(t.event(), None);
    assert_eq!(t.shard.flow(t.h()).unwrap().state, State::SynSent);
}

#[test]
fn simultaneous_open_goes_through_syn_received() {
    let (mut t, _) = syn_sent();
    t.send(from_peer(&t).seq(IRS).syn().no_ack().mss(PEER_MSS));
    t.recv(&[to_peer(&t).seq(t.iss).syn().mss(1460)]);
    assert_eq!(t.shard.flow(t.h()).unwrap().state, State::SynReceived);
    assert_eq!(t.event(), None);
    // The peer's SYN-ACK acknowledges our SYN (RFC 9293 figure 7).
    t.send(from_peer(&t).seq(IRS).syn().mss(PEER_MSS));
    assert_eq!(t.shard.flow(t.h()).unwrap().state, State::Established);
    assert_eq!(t.event(), Some(Event::Connected(t.h())));
    t.recv_nothing();
}

#[test]
fn syn_is_retransmitted_with_backoff_and_the_open_times_out() {
    let (mut t, syn) = syn_sent();
    t.advance(Duration::from_millis(1001));
    t.recv_one(&syn);
    t.advance(Duration::from_millis(2001));
    t.recv_one(&syn);
    t.advance(Duration::from_secs(4 + 8 + 16) + Duration::from_millis(10));
    t.recv(&[syn.clone(), syn.clone(), syn.clone()]);
    t.advance(Duration::from_secs(32));
    t.recv_one(&syn);
    assert_eq!(t.event(), None, "six retransmissions, as Linux: about 127 s");
    t.advance(Duration::from_secs(64));
    t.recv_nothing();
    assert_eq!(t.event(), Some(Event::Error(t.h(), ConnectionError::TimedOut)));
}

#[test]
fn connect_rejects_impossible_peers() {
    let mut t = T::bare(config());
    let now = t.now;
    assert_eq!(t.shard.connect(now, SocketAddrV4::new(REMOTE_IP, 0)), Err(ConnectError::InvalidAddress));
    assert_eq!(t.shard.connect(now, SocketAddrV4::new(LOCAL_IP, 80)), Err(ConnectError::InvalidAddress));
    assert_eq!(
        t.shard.connect(now, SocketAddrV4::new(core::net::Ipv4Addr::BROADCAST, 80)),
        Err(ConnectError::InvalidAddress)
    );
    assert_eq!(
        t.shard.connect(now, SocketAddrV4::new(core::net::Ipv4Addr::new(192, 168, 1, 1), 80)),
        Err(ConnectError::NoRoute)
    );
}

#[test]
fn ephemeral_ports_run_out_cleanly() {
    let mut c = config();
    c.tcp.ephemeral_ports = (50_000, 50_002);
    let mut t = T::bare(c);
    let to = SocketAddrV4::new(REMOTE_IP, 80);
    for _ in 0..3 {
        t.shard.connect(t.now, to).unwrap();
    }
    assert_eq!(t.shard.connect(t.now, to), Err(ConnectError::NoPort));
    // Another destination port is another set of tuples.
    assert!(t.shard.connect(t.now, SocketAddrV4::new(REMOTE_IP, 81)).is_ok());
}

/// With several shards on one interface, a shard opens connections only on
/// ports whose flows the steering hash gives to it, so their replies are
/// steered back to it.
#[test]
fn with_steering_connect_picks_ports_this_shard_owns() {
    use crate::steering::{Steering, owner};
    for index in 0..4 {
        let mut c = config();
        c.steering = Some(Steering { index, count: 4 });
        let mut t = T::bare(c);
        let peer = SocketAddrV4::new(REMOTE_IP, 80);
        for _ in 0..50 {
            let h = t.shard.connect(t.now, peer).unwrap();
            let SocketAddr::V4(local) = t.shard.flow(h).unwrap().local else { panic!("not IPv4") };
            assert_eq!(owner((*local.ip(), local.port()), (REMOTE_IP, 80), 4), index);
        }
        // Four shards share the range: about a quarter of it is this one's,
        // and skipped ports are not lost (they are other shards').
        let syns = t.segments();
        assert_eq!(syns.len(), 50);
        assert!(syns.windows(2).all(|w| w[0].src_port < w[1].src_port));
    }
}

#[test]
fn an_ipv6_destination_has_no_route_and_an_ipv4_mapped_one_is_ipv4() {
    let mut t = T::bare(config());
    let v6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::new(0xfd77, 0, 0, 0, 0, 0, 0, 2)), 80);
    assert_eq!(t.shard.connect(t.now, v6), Err(ConnectError::NoRoute));
    assert!(t.segments().is_empty());
    assert_eq!(t.shard.connection_count(), 0);
    let mapped = SocketAddr::new(IpAddr::V6(REMOTE_IP.to_ipv6_mapped()), 80);
    let h = t.shard.connect(t.now, mapped).unwrap();
    let syn = t.segments();
    assert_eq!(syn.len(), 1);
    assert!(syn[0].syn && syn[0].dst_port == 80);
    assert_eq!(t.shard.flow(h).unwrap().remote, SocketAddr::from(SocketAddrV4::new(REMOTE_IP, 80)));
}

/// Opens a connection from our only ephemeral port to the peer's port 80
/// (timestamps agreed when `timestamps`), sends a byte, closes first and
/// ends in TIME-WAIT: the SYN's sequence number, and the one after our FIN.
fn closed_into_time_wait(t: &mut T, timestamps: bool) -> (u32, u32) {
    let h = t.shard.connect(t.now, SocketAddrV4::new(REMOTE_IP, 80)).unwrap();
    t.handle = Some(h);
    let syn = t.segments().remove(0);
    t.iss = syn.seq;
    let ours = syn.timestamp.map(|(tsval, _)| tsval);
    assert_eq!(ours.is_some(), timestamps);
    let peer = |t: &T| t.seg_in().src_port(80).dst_port(syn.src_port);
    let mut syn_ack = peer(t).seq(IRS).syn().mss(PEER_MSS);
    if let Some(tsval) = ours {
        syn_ack = syn_ack.ts(7_000, tsval);
    }
    t.send(syn_ack);
    assert_eq!(t.shard.send(h, b"x"), Ok(1));
    t.shard.close(h);
    let out = t.segments();
    let fin = out.iter().find(|s| s.fin).unwrap_or_else(|| panic!("our FIN in {out:?}"));
    let after_fin = fin.seq.wrapping_add(1 + fin.payload.len() as u32);
    let mut fin_ack = peer(t).seq(IRS + 1).ack(after_fin).fin();
    if let Some((tsval, _)) = fin.timestamp {
        fin_ack = fin_ack.ts(7_001, tsval);
    }
    t.send(fin_ack);
    let _ = t.segments();
    assert_eq!(t.shard.time_wait_count(), 1);
    (syn.seq, after_fin)
}

/// As Linux's tcp_tw_reuse: an active open may take over a four-tuple in
/// TIME-WAIT once it has waited a second and timestamps were on, starting
/// its sequence numbers beyond the old incarnation's; a younger one, or
/// one without timestamps, keeps its tuple for the whole TIME-WAIT.
#[test]
fn an_active_open_takes_over_a_time_wait_a_second_old_with_timestamps() {
    let mut c = config();
    c.tcp.ephemeral_ports = (50_000, 50_000);
    c.tcp.timestamps = true;
    let mut t = T::bare(c.clone());
    let to = SocketAddrV4::new(REMOTE_IP, 80);
    let (_, after_fin) = closed_into_time_wait(&mut t, true);
    assert_eq!(t.shard.connect(t.now, to), Err(ConnectError::NoPort), "too young");
    t.advance(Duration::from_secs(1));
    let h = t.shard.connect(t.now, to).expect("the TIME-WAIT tuple, taken over");
    assert_eq!((t.shard.time_wait_count(), t.shard.counters().time_wait_reused), (0, 1));
    let syn = t.segments().remove(0);
    assert!(syn.syn && syn.dst_port == 80 && t.shard.flow(h).is_some());
    let beyond = syn.seq.wrapping_sub(after_fin) as i32;
    assert!(beyond >= 65_536, "the new ISS {} is {beyond} past the old FIN", syn.seq);

    // Without timestamps the tuple stays taken for the whole TIME-WAIT.
    c.tcp.timestamps = false;
    let mut t = T::bare(c);
    let _ = closed_into_time_wait(&mut t, false);
    t.advance(Duration::from_secs(5));
    assert_eq!(t.shard.connect(t.now, to), Err(ConnectError::NoPort));
    assert_eq!((t.shard.time_wait_count(), t.shard.counters().time_wait_reused), (1, 0));
}
