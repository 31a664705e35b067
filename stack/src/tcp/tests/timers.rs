//! Timers that end connections: the user timeout and keep-alive.

use super::harness::*;
use crate::api::{ConnectionError, Event};
use crate::config::KeepAlive;
use crate::time::Duration;

#[test]
fn unacknowledged_data_times_out_after_the_user_timeout() {
    let mut c = config();
    c.tcp.user_timeout = Duration::from_secs(10);
    let mut t = T::established_with(c);
    assert_eq!(t.shard.send(t.h(), b"lost"), Ok(4));
    let first = t.segments();
    assert_eq!(first.len(), 1);
    t.advance(Duration::from_millis(9_990));
    assert!(t.segments().len() >= 4, "retransmissions with backoff: 0.2, 0.6, 1.4, 3.0, 6.2 s");
    assert_eq!(t.event(), None);
    t.advance(Duration::from_millis(20));
    assert_eq!(t.event(), Some(Event::Error(t.h(), ConnectionError::TimedOut)));
    t.recv_nothing();
}

#[test]
fn an_ack_of_progress_restarts_the_user_timeout() {
    let mut c = config();
    c.tcp.user_timeout = Duration::from_secs(10);
    let mut t = T::established_with(c);
    assert_eq!(t.shard.send(t.h(), &[1u8; 2000]), Ok(2000));
    let _ = t.segments();
    t.advance(Duration::from_secs(8));
    t.send(t.seg_in().ack(t.iss.wrapping_add(1001)));
    t.advance(Duration::from_secs(8));
    assert_eq!(t.event(), None, "16 s since the first send, but only 8 since progress");
}

#[test]
fn keepalive_probes_an_idle_peer_and_gives_up() {
    let mut c = config();
    c.tcp.keepalive = Some(KeepAlive { idle: Duration::from_secs(10), interval: Duration::from_secs(2), probes: 3 });
    let mut t = T::established_with(c);
    let probe = t.seg_out().seq(t.iss); // SND.NXT - 1
    t.advance(Duration::from_millis(9_900));
    t.recv_nothing();
    t.advance(Duration::from_millis(200));
    t.recv_one(&probe);
    // The peer answers: the idle clock restarts.
    t.send(t.seg_in());
    t.advance(Duration::from_millis(9_800));
    t.recv_nothing();
    t.advance(Duration::from_millis(300));
    t.recv_one(&probe);
    t.advance(Duration::from_secs(2));
    t.recv_one(&probe);
    t.advance(Duration::from_secs(2));
    t.recv_one(&probe);
    assert_eq!(t.event(), None);
    t.advance(Duration::from_secs(2));
    assert_eq!(t.event(), Some(Event::Error(t.h(), ConnectionError::TimedOut)));
}

#[test]
fn keepalive_is_off_by_default() {
    let mut t = T::established();
    t.advance(Duration::from_secs(3 * 3600));
    t.recv_nothing();
    assert!(t.shard.flow(t.h()).is_some());
    assert_eq!(t.event(), None);
}

#[test]
fn delayed_ack_can_be_turned_off() {
    let mut c = config();
    c.tcp.delayed_ack = Duration::ZERO;
    let mut t = T::established_with(c);
    t.send(t.seg_in().data(b"x"));
    t.recv(&[t.seg_out().ack(IRS + 2).window(RX_BUFFER as u16 - 1)]);
}

#[test]
fn a_keepalive_deadline_left_from_established_does_not_end_a_held_half_close() {
    // The application half-closes (it still holds the connection and
    // reads); the peer acknowledges our FIN and keeps its side open. The
    // keep-alive deadline armed in ESTABLISHED passes in FIN-WAIT-2: that
    // is no FIN-WAIT-2 timeout (only an orphan has one), so the connection
    // stays, and still receives.
    let mut c = config();
    c.tcp.keepalive = Some(KeepAlive { idle: Duration::from_secs(10), interval: Duration::from_secs(2), probes: 3 });
    let mut t = T::established_with(c);
    t.shard.shutdown(t.h());
    t.recv(&[t.seg_out().fin()]);
    t.send(t.seg_in().ack(t.iss.wrapping_add(2)));
    t.advance(Duration::from_secs(11));
    assert_eq!(t.shard.connection_count(), 1, "removed by keep-alive's deadline");
    assert_eq!(t.event(), None);
    t.send(t.seg_in().ack(t.iss.wrapping_add(2)).data(b"late"));
    assert_eq!(t.read_all(), b"late");
}
