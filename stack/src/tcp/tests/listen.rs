//! LISTEN: passive opens (RFC 9293 §3.10.7.2) and the SYN queue.

use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4};

use super::harness::*;
use crate::api::{Event, ListenError};
use crate::counters::DropReason;
use crate::tcp::State;

#[test]
fn syn_gets_syn_ack_with_our_mss_and_window() {
    let mut t = T::listening();
    t.send(t.seg_in().seq(IRS).no_ack().syn().mss(PEER_MSS));
    t.iss = t.expected_iss(REMOTE_PORT);
    t.recv(&[t.seg_out().seq(t.iss).ack(IRS + 1).syn().mss(1460)]);
    assert_eq!(t.shard.connection_count(), 1);
    assert_eq!(t.event(), None, "no event before the handshake completes");
}

#[test]
fn mss_is_the_smaller_of_ours_and_the_peers_and_536_without_option() {
    let mut t = T::listening();
    t.send(t.seg_in().seq(IRS).no_ack().syn());
    t.iss = t.expected_iss(REMOTE_PORT);
    t.recv(&[t.seg_out().seq(t.iss).ack(IRS + 1).syn().mss(1460)]);
    t.send(t.seg_in());
    t.handle = t.shard.accept(t.listener.unwrap());
    assert_eq!(t.shard.flow(t.h()).unwrap().mss, 536);

    let mut t = T::established();
    assert_eq!(t.shard.flow(t.h()).unwrap().mss, PEER_MSS);
    assert_eq!(t.shard.flow(t.h()).unwrap().state, State::Established);
    let _ = t.events();
}

#[test]
fn listen_validates_address_and_port() {
    let mut t = T::listening();
    assert_eq!(t.shard.listen(SocketAddrV4::new(LOCAL_IP, LOCAL_PORT)), Err(ListenError::AddressInUse));
    assert_eq!(
        t.shard.listen(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 9), 81)),
        Err(ListenError::AddressNotAvailable)
    );
    assert!(t.shard.listen(SocketAddrV4::new(LOCAL_IP, 81)).is_ok());
}

#[test]
fn without_cookies_the_syn_queue_limit_drops_further_syns() {
    let mut c = config();
    c.limits.syn_backlog = 2;
    c.tcp.syn_cookies = false;
    let mut t = T::listening_with(c);
    for port in 0..3 {
        t.send(t.seg_in().src_port(40_000 + port).seq(IRS).no_ack().syn());
    }
    assert_eq!(t.segments().len(), 2);
    assert_eq!(t.shard.counters().dropped(DropReason::TcpSynQueueFull), 1);
    assert_eq!(t.shard.connection_count(), 2);
}

#[test]
fn connection_limit_bounds_the_shard() {
    let mut c = config();
    c.limits.max_connections = 1;
    let mut t = T::listening_with(c);
    t.send(t.seg_in().src_port(40_000).seq(IRS).no_ack().syn());
    t.send(t.seg_in().src_port(40_001).seq(IRS).no_ack().syn());
    assert_eq!(t.segments().len(), 1);
    assert_eq!(t.shard.counters().dropped(DropReason::TcpConnectionLimit), 1);
}

#[test]
fn unlisten_resets_queued_connections_and_frees_the_port() {
    let mut t = T::listening();
    t.send(t.seg_in().seq(IRS).no_ack().syn());
    t.iss = t.expected_iss(REMOTE_PORT);
    let _ = t.segments();
    t.send(t.seg_in());
    assert_eq!(t.event(), Some(Event::Acceptable(t.listener.unwrap())));
    t.shard.unlisten(t.listener.unwrap());
    t.recv(&[t.seg_out().rst().window(0)]);
    assert_eq!(t.shard.connection_count(), 0);
    assert!(t.shard.listen(SocketAddrV4::new(LOCAL_IP, LOCAL_PORT)).is_ok());
}

// --- SYN cookies (RFC 4987) -------------------------------------------------

fn flooded() -> T {
    let mut c = config();
    c.limits.syn_backlog = 1;
    let mut t = T::listening_with(c);
    // One half-open connection fills the SYN queue.
    t.send(t.seg_in().src_port(40_000).seq(IRS).no_ack().syn());
    assert_eq!(t.segments().len(), 1);
    t
}

#[test]
fn a_full_syn_queue_answers_with_a_cookie_that_completes_the_handshake() {
    let mut t = flooded();
    t.send(t.seg_in().seq(IRS).no_ack().syn().mss(1300));
    let synack = t.segments().remove(0);
    assert!(synack.syn && synack.ack == Some(IRS + 1));
    assert_eq!(synack.mss, Some(1460));
    assert_eq!(t.shard.connection_count(), 1, "no state for the cookie");
    assert_eq!(t.shard.counters().syn_cookies_sent, 1);
    t.iss = synack.seq;
    t.send(t.seg_in().data(b"hello"));
    assert_eq!(t.event(), Some(Event::Acceptable(t.listener.unwrap())));
    t.handle = t.shard.accept(t.listener.unwrap());
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!(flow.state, State::Established);
    assert_eq!(flow.mss, 1300, "the MSS survived the round trip in the cookie");
    assert_eq!(t.read_all(), b"hello");
    assert_eq!(t.shard.counters().syn_cookies_accepted, 1);
}

#[test]
fn a_cookie_keeps_window_scale_and_sack_in_the_timestamp() {
    let mut c = config();
    c.limits.syn_backlog = 1;
    c.tcp.window_scaling = true;
    c.tcp.timestamps = true;
    c.tcp.sack = true;
    c.tcp.rx_buffer = 262_140;
    let mut t = T::listening_with(c);
    t.send(t.seg_in().src_port(40_000).seq(IRS).no_ack().syn());
    let _ = t.segments();
    t.send(t.seg_in().seq(IRS).no_ack().syn().mss(1000).wscale(6).sack_permitted().ts(900, 0));
    let synack = t.segments().remove(0);
    assert_eq!(synack.wscale, Some(2));
    assert!(synack.sack_permitted);
    let (tsval, tsecr) = synack.timestamp.unwrap();
    assert_eq!(tsecr, 900);
    t.iss = synack.seq;
    t.send(t.seg_in().window(10).ts(901, tsval));
    t.handle = t.shard.accept(t.listener.unwrap());
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!(flow.window_scaling, Some((6, 2)));
    assert!(flow.sack && flow.timestamps);
    assert_eq!(flow.snd_wnd, 10 << 6);
    assert_eq!(flow.mss, 536, "1000 rounds down to the cookie table's 536");
}

#[test]
fn a_forged_cookie_is_answered_with_rst() {
    let mut t = flooded();
    t.send(t.seg_in().seq(IRS).ack(123_456).data(b"guess"));
    t.recv(&[t.seg_out().seq(123_456).no_ack().rst().window(0)]);
    assert_eq!(t.shard.connection_count(), 1);
    assert_eq!(t.shard.counters().syn_cookies_accepted, 0);
}

#[test]
fn a_tiny_mss_is_raised_to_the_floor_and_counted() {
    // CVE-2019-11479: a SYN asking for 8-byte segments would have every
    // byte sent cost a header. We send 48 at least, as Linux does.
    let mut t = T::listening();
    t.send(t.seg_in().seq(IRS).no_ack().syn().mss(8));
    t.iss = t.expected_iss(REMOTE_PORT);
    t.recv(&[t.seg_out().seq(t.iss).ack(IRS + 1).syn().mss(1460)]);
    t.send(t.seg_in());
    t.handle = t.shard.accept(t.listener.unwrap());
    assert_eq!(t.shard.flow(t.h()).unwrap().mss, 48);
    assert_eq!(t.shard.counters().mss_raised, 1);
    let _ = t.events();
    let data = [7u8; 100];
    assert_eq!(t.shard.send(t.h(), &data), Ok(100));
    let s = t.iss.wrapping_add(1);
    t.recv(&[
        t.seg_out().data(&data[..48]),
        t.seg_out().seq(s + 48).data(&data[48..96]),
        t.seg_out().seq(s + 96).data(&data[96..]).psh(),
    ]);
    // At the floor itself nothing is raised.
    let mut t = T::listening();
    t.send(t.seg_in().seq(IRS).no_ack().syn().mss(48));
    assert_eq!(t.shard.counters().mss_raised, 0);
}

#[test]
fn listening_on_the_ipv6_unspecified_address_takes_ipv4_peers() {
    // `[::]:80` is "any of our addresses": with IPv4 only so far, the IPv4
    // one. The connection's ends are told as the family they are.
    let mut t = T::bare(config());
    let any6 = SocketAddr::new(IpAddr::V6(Ipv6Addr::UNSPECIFIED), LOCAL_PORT);
    t.listener = Some(t.shard.listen(any6).unwrap());
    assert_eq!(t.shard.listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, LOCAL_PORT)), Err(ListenError::AddressInUse));
    t.handshake();
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!(flow.local, SocketAddr::from(SocketAddrV4::new(LOCAL_IP, LOCAL_PORT)));
    assert_eq!(flow.remote, SocketAddr::from(SocketAddrV4::new(REMOTE_IP, REMOTE_PORT)));
    assert_eq!(t.shard.peer(t.h()), Some(flow.remote));
}

#[test]
fn an_ipv6_address_is_not_ours_but_our_ipv4_mapped_one_is() {
    let mut t = T::bare(config());
    let global = SocketAddr::new(IpAddr::V6(Ipv6Addr::new(0xfd77, 0, 0, 0, 0, 0, 0, 1)), 81);
    assert_eq!(t.shard.listen(global), Err(ListenError::AddressNotAvailable));
    let loopback = SocketAddr::new(IpAddr::V6(Ipv6Addr::LOCALHOST), 81);
    assert_eq!(t.shard.listen(loopback), Err(ListenError::AddressNotAvailable));
    let other_mapped = SocketAddr::new(IpAddr::V6(Ipv4Addr::new(10, 0, 0, 9).to_ipv6_mapped()), 81);
    assert_eq!(t.shard.listen(other_mapped), Err(ListenError::AddressNotAvailable));
    let mapped = SocketAddr::new(IpAddr::V6(LOCAL_IP.to_ipv6_mapped()), 81);
    assert!(t.shard.listen(mapped).is_ok());
    // The same port again, by its IPv4 name.
    assert_eq!(t.shard.listen(SocketAddrV4::new(LOCAL_IP, 81)), Err(ListenError::AddressInUse));
}

/// Without software steering (`--steering off`) a shard gets whatever its
/// queue brings: a passive flow that another shard owns by the steering
/// hash is served where it arrives, exactly as one it owns, and each of
/// its segments is counted as not owned (the owned flow's are not).
#[test]
fn a_passive_flow_another_shard_owns_is_served_where_it_arrives() {
    use crate::steering::{Steering, owner};
    let mut c = config();
    c.steering = Some(Steering { index: 0, count: 2 });
    let port_of = |shard| (49152..=u16::MAX).find(|&p| owner((REMOTE_IP, p), (LOCAL_IP, LOCAL_PORT), 2) == shard);
    let (theirs, ours) = (port_of(1).unwrap(), port_of(0).unwrap());
    let mut t = T::listening_with(c);
    t.handshake_from(theirs);
    t.send(t.seg_in().src_port(theirs).data(b"GET /"));
    let mut buf = [0u8; 16];
    assert_eq!(t.shard.recv(t.h(), &mut buf), Ok(5));
    assert_eq!(&buf[..5], b"GET /");
    // The SYN, the handshake's ACK and the request.
    assert_eq!(t.shard.counters().segments_not_owned, 3);
    while t.event().is_some() {}
    t.handshake_from(ours);
    t.send(t.seg_in().src_port(ours).data(b"GET /"));
    assert_eq!(t.shard.counters().segments_not_owned, 3);
}

/// With nothing recycled (the ablation's baseline: boxed connection state,
/// boxed events, buffers allocated per use) a connection sends exactly the
/// segments it sends with everything recycled.
#[test]
fn with_nothing_recycled_a_connection_is_served_the_same() {
    let run = |recycle| {
        let mut c = config();
        c.recycle = recycle;
        let mut t = T::established_with(c);
        t.send(t.seg_in().data(b"ping"));
        assert_eq!(t.event(), Some(Event::Readable(t.h())));
        let mut buf = [0u8; 16];
        assert_eq!(t.shard.recv(t.h(), &mut buf), Ok(4));
        assert_eq!(t.shard.send(t.h(), b"pong"), Ok(4));
        let mut segments = t.segments();
        t.shard.close(t.h());
        segments.extend(t.segments());
        segments
    };
    let recycled = run(crate::config::Recycle::ALL);
    assert!(recycled.iter().any(|s| s.payload == b"pong") && recycled.last().is_some_and(|s| s.fin), "{recycled:?}");
    assert_eq!(run(crate::config::Recycle::NONE), recycled);
}
