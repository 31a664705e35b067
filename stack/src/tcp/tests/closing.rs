//! FIN-WAIT-1, FIN-WAIT-2, CLOSE-WAIT, CLOSING, LAST-ACK, TIME-WAIT: every
//! way a connection ends.

use super::harness::*;
use crate::api::{Event, RecvError, SendError};
use crate::counters::DropReason;
use crate::tcp::State;
use crate::time::Duration;

fn state(t: &T) -> State {
    t.shard.flow(t.h()).unwrap().state
}

#[test]
fn passive_close_close_wait_then_last_ack() {
    let mut t = T::established();
    t.send(t.seg_in().data(b"bye").fin());
    // The FIN takes a sequence number but no buffer: the right edge stays put.
    t.recv(&[t.seg_out().ack(IRS + 5).window(RX_BUFFER as u16 - 4)]);
    assert_eq!(t.events(), vec![Event::Readable(t.h()), Event::HangUp(t.h())]);
    assert_eq!(state(&t), State::CloseWait);
    let mut buf = [0u8; 16];
    assert_eq!(t.shard.recv(t.h(), &mut buf), Ok(3));
    assert_eq!(t.shard.recv(t.h(), &mut buf), Ok(0), "end of stream");
    // We can still send in CLOSE-WAIT.
    assert_eq!(t.shard.send(t.h(), b"ok"), Ok(2));
    t.shard.close(t.h());
    t.recv(&[t.seg_out().ack(IRS + 5).data(b"ok").fin().psh().window(RX_BUFFER as u16 - 4)]);
    assert_eq!(t.shard.connection_count(), 1);
    t.send(t.seg_in().seq(IRS + 5).ack(t.iss.wrapping_add(4)));
    assert_eq!(t.shard.connection_count(), 0, "LAST-ACK ends without TIME-WAIT");
    t.recv_nothing();
}

#[test]
fn active_close_goes_through_fin_wait_and_time_wait() {
    let mut t = T::established();
    let h = t.h();
    t.shard.shutdown(h);
    t.recv(&[t.seg_out().fin()]);
    assert_eq!(state(&t), State::FinWait1);
    t.send(t.seg_in().ack(t.iss.wrapping_add(2)));
    assert_eq!(state(&t), State::FinWait2);
    // Half-closed: we still receive.
    t.send(t.seg_in().ack(t.iss.wrapping_add(2)).data(b"tail"));
    t.send(t.seg_in().seq(IRS + 5).ack(t.iss.wrapping_add(2)).fin());
    t.recv(&[t.seg_out().seq(t.iss.wrapping_add(2)).ack(IRS + 6).window(RX_BUFFER as u16 - 5)]);
    assert_eq!(state(&t), State::TimeWait);
    assert_eq!(t.read_all(), b"tail");
    assert_eq!(t.shard.time_wait_count(), 1);
    t.shard.close(h);
    t.advance(Duration::from_secs(59));
    assert_eq!(t.shard.connection_count(), 1);
    t.advance(Duration::from_secs(2));
    assert_eq!(t.shard.connection_count(), 0);
    assert_eq!(t.shard.time_wait_count(), 0);
}

#[test]
fn half_closed_data_is_readable_before_end_of_stream() {
    let mut t = T::established();
    t.shard.shutdown(t.h());
    let _ = t.segments();
    t.send(t.seg_in().data(b"tail").fin());
    assert_eq!(t.read_all(), b"tail");
    let mut buf = [0u8; 4];
    assert_eq!(t.shard.recv(t.h(), &mut buf), Ok(0));
    assert_eq!(t.shard.send(t.h(), b"x"), Err(SendError::Shutdown));
}

#[test]
fn simultaneous_close_goes_through_closing() {
    let mut t = T::established();
    t.shard.shutdown(t.h());
    t.recv(&[t.seg_out().fin()]);
    // The peer's FIN crosses ours: it does not acknowledge our FIN.
    t.send(t.seg_in().fin());
    t.recv(&[t.seg_out().seq(t.iss.wrapping_add(2)).ack(IRS + 2).window(RX_BUFFER as u16 - 1)]);
    assert_eq!(state(&t), State::Closing);
    t.send(t.seg_in().seq(IRS + 2).ack(t.iss.wrapping_add(2)));
    assert_eq!(state(&t), State::TimeWait);
}

#[test]
fn fin_with_the_ack_of_our_fin_goes_straight_to_time_wait() {
    let mut t = T::established();
    t.shard.shutdown(t.h());
    let _ = t.segments();
    t.send(t.seg_in().ack(t.iss.wrapping_add(2)).fin());
    t.recv(&[t.seg_out().seq(t.iss.wrapping_add(2)).ack(IRS + 2).window(RX_BUFFER as u16 - 1)]);
    assert_eq!(state(&t), State::TimeWait);
}

#[test]
fn time_wait_acknowledges_a_retransmitted_fin_and_restarts() {
    let mut t = T::established();
    t.shard.shutdown(t.h());
    let _ = t.segments();
    t.send(t.seg_in().ack(t.iss.wrapping_add(2)).fin());
    let final_ack = t.seg_out().seq(t.iss.wrapping_add(2)).ack(IRS + 2).window(RX_BUFFER as u16 - 1);
    t.recv_one(&final_ack);
    t.advance(Duration::from_secs(30));
    t.send(t.seg_in().ack(t.iss.wrapping_add(2)).fin());
    t.recv(&[final_ack]);
    t.advance(Duration::from_secs(59));
    assert_eq!(state(&t), State::TimeWait, "the 2·MSL timer restarted");
}

#[test]
fn a_new_syn_with_a_higher_sequence_recycles_time_wait() {
    let mut t = T::established();
    t.shard.shutdown(t.h());
    let _ = t.segments();
    t.send(t.seg_in().ack(t.iss.wrapping_add(2)).fin());
    let _ = t.segments();
    t.shard.close(t.h());
    t.advance(Duration::from_secs(1));
    t.send(t.seg_in().seq(IRS + 100_000).no_ack().syn());
    let iss = t.expected_iss(REMOTE_PORT);
    t.recv(&[t.seg_out().seq(iss).ack(IRS + 100_001).syn().mss(1460)]);
    assert_eq!(t.shard.time_wait_count(), 0);
    assert_eq!(t.shard.connection_count(), 1);
}

#[test]
fn an_old_syn_in_time_wait_is_only_acknowledged() {
    let mut t = T::established();
    t.shard.shutdown(t.h());
    let _ = t.segments();
    t.send(t.seg_in().ack(t.iss.wrapping_add(2)).fin());
    let _ = t.segments();
    t.send(t.seg_in().seq(IRS).no_ack().syn());
    t.recv(&[t.seg_out().seq(t.iss.wrapping_add(2)).ack(IRS + 2).window(RX_BUFFER as u16 - 1)]);
    assert_eq!(state(&t), State::TimeWait);
}

#[test]
fn closing_with_unread_data_resets() {
    let mut t = T::established();
    t.send(t.seg_in().data(b"unread"));
    t.shard.close(t.h());
    t.recv(&[t.seg_out().rst().ack(IRS + 7).window(0)]);
    assert_eq!(t.shard.connection_count(), 0);
}

#[test]
fn data_after_close_is_answered_with_rst() {
    let mut t = T::established();
    t.shard.close(t.h());
    t.recv(&[t.seg_out().fin()]);
    t.send(t.seg_in().ack(t.iss.wrapping_add(2)).data(b"late"));
    t.recv(&[t.seg_out().seq(t.iss.wrapping_add(2)).rst().window(0)]);
    assert_eq!(t.shard.counters().dropped(DropReason::TcpDataAfterClose), 1);
    assert_eq!(t.shard.connection_count(), 0);
}

#[test]
fn an_orphan_in_fin_wait_2_is_dropped_after_its_timeout() {
    let mut t = T::established();
    t.shard.close(t.h());
    let _ = t.segments();
    t.send(t.seg_in().ack(t.iss.wrapping_add(2)));
    t.advance(Duration::from_secs(59));
    assert_eq!(t.shard.connection_count(), 1);
    t.advance(Duration::from_secs(2));
    assert_eq!(t.shard.connection_count(), 0);
}

#[test]
fn a_closed_handle_is_invalid_even_while_the_connection_lingers() {
    let mut t = T::established();
    let h = t.h();
    t.shard.close(h);
    assert_eq!(t.shard.connection_count(), 1);
    let mut buf = [0u8; 4];
    assert_eq!(t.shard.recv(h, &mut buf), Err(RecvError::InvalidHandle));
    assert_eq!(t.shard.send(h, b"x"), Err(SendError::InvalidHandle));
    assert!(t.shard.flow(h).is_none());
}

#[test]
fn a_stale_handle_never_reaches_the_connection_that_reuses_its_slot() {
    let mut t = T::established();
    let old = t.h();
    t.shard.abort(old);
    let _ = t.segments();
    assert_eq!(t.shard.connection_count(), 0);
    t.handshake_from(REMOTE_PORT + 1);
    let new = t.h();
    assert_eq!(old.index(), new.index(), "the slot is reused");
    assert_ne!(old, new);
    assert_eq!(t.shard.send(old, b"x"), Err(SendError::InvalidHandle));
    assert!(t.shard.flow(new).is_some());
}

#[test]
fn many_time_wait_connections_are_capped() {
    let mut c = config();
    c.limits.max_time_wait = 1;
    let mut t = T::listening_with(c);
    for port in [REMOTE_PORT, REMOTE_PORT + 1] {
        let _ = t.events();
        t.handshake_from(port);
        t.shard.shutdown(t.h());
        let _ = t.segments();
        t.send(t.seg_in().src_port(port).ack(t.iss.wrapping_add(2)).fin());
        let _ = t.segments();
        t.shard.close(t.h());
    }
    assert_eq!(t.shard.time_wait_count(), 1);
    assert_eq!(t.shard.connection_count(), 1, "the second skipped TIME-WAIT");
}

#[test]
fn data_arriving_with_the_fin_that_ends_fin_wait_2_stays_readable() {
    let mut t = T::established();
    t.shard.shutdown(t.h());
    let _ = t.segments();
    t.send(t.seg_in().ack(t.iss.wrapping_add(2)));
    t.send(t.seg_in().ack(t.iss.wrapping_add(2)).data(b"last words").fin());
    assert_eq!(state(&t), State::TimeWait);
    assert_eq!(t.read_all(), b"last words", "TIME-WAIT must not discard unread data");
    let mut buf = [0u8; 4];
    assert_eq!(t.shard.recv(t.h(), &mut buf), Ok(0));
}

#[test]
fn acknowledging_data_in_fin_wait_2_sends_no_second_fin() {
    let mut t = T::established();
    t.shard.shutdown(t.h());
    t.recv(&[t.seg_out().fin()]);
    t.send(t.seg_in().ack(t.iss.wrapping_add(2)));
    assert_eq!(state(&t), State::FinWait2);
    t.send(t.seg_in().ack(t.iss.wrapping_add(2)).data(&[3u8; 1000]));
    t.send(t.seg_in().seq(IRS + 1001).ack(t.iss.wrapping_add(2)).data(&[3u8; 1000]));
    t.recv(&[t.seg_out().seq(t.iss.wrapping_add(2)).ack(IRS + 2001).window(RX_BUFFER as u16 - 2000)]);
    t.advance(Duration::from_secs(1));
    t.recv_nothing();
    assert_eq!(t.shard.flow(t.h()).unwrap().send_queue, 0);
}

/// A connection the application accepted and closed is not offered again:
/// segments that arrive while it closes (the ACK of our FIN, the peer's
/// FIN) must not put it back in the listener's accept queue, where a second
/// `accept` would return a handle the application already let go of.
#[test]
fn a_closed_connection_is_never_accepted_twice() {
    let mut t = T::established();
    let l = t.listener.unwrap();
    t.shard.close(t.h());
    t.recv(&[t.seg_out().fin()]);
    t.send(t.seg_in().ack(t.iss.wrapping_add(2)));
    t.send(t.seg_in().ack(t.iss.wrapping_add(2)).fin());
    t.recv(&[t.seg_out().seq(t.iss.wrapping_add(2)).ack(IRS + 2).window(RX_BUFFER as u16 - 1)]);
    assert_eq!(t.events(), vec![]);
    assert_eq!(t.shard.accept(l), None);
}
