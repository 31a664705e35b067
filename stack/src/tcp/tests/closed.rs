//! CLOSED: no connection and no listener (RFC 9293 §3.10.7.1).

use super::harness::*;
use crate::counters::DropReason;

#[test]
fn syn_to_a_closed_port_is_refused_with_rst_ack() {
    let mut t = T::bare(config());
    t.send(t.seg_in().seq(IRS).no_ack().syn().data(b"x"));
    // <SEQ=0><ACK=SEG.SEQ+SEG.LEN><CTL=RST,ACK>: SYN and one byte.
    t.recv(&[t.seg_out().seq(0).ack(IRS + 2).rst().window(0)]);
    assert_eq!(t.shard.counters().dropped(DropReason::TcpNoConnection), 1);
}

#[test]
fn ack_to_a_closed_port_gets_rst_from_its_ack_number() {
    let mut t = T::bare(config());
    t.send(t.seg_in().seq(IRS).ack(777).data(b"hello"));
    // <SEQ=SEG.ACK><CTL=RST>
    t.recv(&[t.seg_out().seq(777).no_ack().rst().window(0)]);
}

#[test]
fn rst_to_a_closed_port_is_dropped_silently() {
    let mut t = T::bare(config());
    t.send(t.seg_in().seq(IRS).rst().no_ack());
    t.send(t.seg_in().seq(IRS).rst().ack(5));
    t.recv_nothing();
    assert_eq!(t.shard.counters().dropped(DropReason::TcpNoConnection), 2);
    assert_eq!(t.shard.counters().resets_sent, 0);
}

#[test]
fn syn_ack_to_a_listening_port_without_connection_is_reset() {
    let mut t = T::listening();
    t.send(t.seg_in().seq(IRS).syn().ack(4242));
    t.recv(&[t.seg_out().seq(4242).no_ack().rst().window(0)]);
    assert_eq!(t.shard.connection_count(), 0);
}
