//! SYN-RECEIVED: completing, repeating and failing passive handshakes.

use super::harness::*;
use crate::api::Event;
use crate::counters::DropReason;
use crate::time::Duration;

fn half_open() -> T {
    let mut t = T::listening();
    t.send(t.seg_in().seq(IRS).no_ack().syn().mss(PEER_MSS));
    t.iss = t.expected_iss(REMOTE_PORT);
    t.recv(&[t.seg_out().seq(t.iss).ack(IRS + 1).syn().mss(1460)]);
    t
}

#[test]
fn ack_completes_the_handshake_and_data_on_it_is_readable_after_accept() {
    let mut t = half_open();
    t.send(t.seg_in().data(b"GET /"));
    assert_eq!(t.event(), Some(Event::Acceptable(t.listener.unwrap())));
    t.handle = t.shard.accept(t.listener.unwrap());
    assert_eq!(t.event(), Some(Event::Readable(t.h())));
    assert_eq!(t.read_all(), b"GET /");
    assert_eq!(t.shard.accept(t.listener.unwrap()), None);
}

#[test]
fn retransmitted_syn_gets_the_same_syn_ack() {
    let mut t = half_open();
    t.send(t.seg_in().seq(IRS).no_ack().syn().mss(PEER_MSS));
    t.recv(&[t.seg_out().seq(t.iss).ack(IRS + 1).syn().mss(1460)]);
}

#[test]
fn syn_ack_is_retransmitted_with_backoff_then_given_up() {
    let mut t = half_open();
    t.advance(Duration::from_millis(999));
    t.recv_nothing();
    t.advance(Duration::from_millis(2));
    t.recv(&[t.seg_out().seq(t.iss).ack(IRS + 1).syn().mss(1460)]);
    t.advance(Duration::from_millis(1990));
    t.recv_nothing();
    t.advance(Duration::from_millis(20));
    t.recv(&[t.seg_out().seq(t.iss).ack(IRS + 1).syn().mss(1460)]);
    // synack_retries = 5 transmissions in all, then the half-open connection goes.
    t.advance(Duration::from_secs(4 + 8 + 16));
    assert_eq!(t.segments().len(), 3);
    assert_eq!(t.shard.connection_count(), 1);
    t.advance(Duration::from_secs(33));
    t.recv_nothing();
    assert_eq!(t.shard.connection_count(), 0);
    assert_eq!(t.events(), vec![]);
}

#[test]
fn rst_returns_to_listen_without_a_trace() {
    let mut t = half_open();
    t.send(t.seg_in().rst().no_ack());
    t.recv_nothing();
    assert_eq!(t.shard.connection_count(), 0);
    assert_eq!(t.events(), vec![]);
    // A fresh SYN from the same port starts over.
    t.send(t.seg_in().seq(IRS + 5000).no_ack().syn());
    assert_eq!(t.segments().len(), 1);
}

#[test]
fn unacceptable_ack_is_answered_with_rst() {
    let mut t = half_open();
    t.send(t.seg_in().ack(t.iss.wrapping_add(7)));
    t.recv(&[t.seg_out().seq(t.iss.wrapping_add(7)).no_ack().rst().window(0)]);
    assert_eq!(t.shard.counters().dropped(DropReason::TcpBadHandshake), 1);
    assert_eq!(t.shard.connection_count(), 1, "the half-open connection survives");
}

#[test]
fn full_accept_queue_ignores_the_ack_until_there_is_room() {
    let mut c = config();
    c.limits.accept_backlog = 1;
    let mut t = T::listening_with(c);
    let l = t.listener.unwrap();
    // First connection fills the queue.
    t.send(t.seg_in().src_port(40_000).seq(IRS).no_ack().syn());
    let iss0 = t.segments()[0].seq;
    t.send(t.seg_in().src_port(40_000).ack(iss0.wrapping_add(1)));
    // Second handshake cannot complete.
    t.send(t.seg_in().seq(IRS).no_ack().syn());
    t.iss = t.expected_iss(REMOTE_PORT);
    let _ = t.segments();
    t.send(t.seg_in());
    assert_eq!(t.shard.counters().dropped(DropReason::TcpAcceptQueueFull), 1);
    assert_eq!(t.events(), vec![Event::Acceptable(l)]);
    let first = t.shard.accept(l).unwrap();
    assert_eq!(t.shard.accept(l), None);
    // The peer retries its ACK; now there is room.
    t.send(t.seg_in());
    assert_eq!(t.events(), vec![Event::Acceptable(l)]);
    let second = t.shard.accept(l).unwrap();
    assert_ne!(first, second);
}
