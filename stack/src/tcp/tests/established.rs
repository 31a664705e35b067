//! ESTABLISHED: data transfer, acknowledgment, windows, loss recovery and
//! the checks of RFC 9293 §3.10.7.4.

use super::harness::*;
use crate::api::{ConnectionError, Event, RecvError, SendError};
use crate::counters::DropReason;
use crate::tcp::congestion::Algorithm;
use crate::time::Duration;

#[test]
fn data_is_acknowledged_after_the_delayed_ack_timeout() {
    let mut t = T::established();
    t.send(t.seg_in().data(b"hello").psh());
    t.recv_nothing();
    assert_eq!(t.event(), Some(Event::Readable(t.h())));
    t.advance(Duration::from_millis(39));
    t.recv_nothing();
    t.advance(Duration::from_millis(2));
    t.recv(&[t.seg_out().ack(IRS + 6).window(RX_BUFFER as u16 - 5)]);
    assert_eq!(t.read_all(), b"hello");
    // Reading five bytes is below the silly-window step: no window update.
    t.recv_nothing();
}

#[test]
fn every_second_full_segment_is_acknowledged_at_once() {
    let mut t = T::established();
    let data = [7u8; 1000];
    t.send(t.seg_in().data(&data));
    t.recv_nothing();
    t.send(t.seg_in().seq(IRS + 1001).data(&data));
    t.recv(&[t.seg_out().ack(IRS + 2001).window(RX_BUFFER as u16 - 2000)]);
    assert_eq!(t.events(), vec![Event::Readable(t.h())], "one coalesced Readable");
}

#[test]
fn a_reply_carries_the_pending_ack() {
    let mut t = T::established();
    t.send(t.seg_in().data(b"ping"));
    assert_eq!(t.read_all(), b"ping");
    assert_eq!(t.shard.send(t.h(), b"pong"), Ok(4));
    // Four bytes read do not move the right edge (silly-window avoidance).
    t.recv(&[t.seg_out().ack(IRS + 5).data(b"pong").psh().window(RX_BUFFER as u16 - 4)]);
    t.advance(Duration::from_millis(100));
    t.recv_nothing();
}

#[test]
fn out_of_order_data_is_acknowledged_at_once_and_reassembled() {
    let mut t = T::established();
    t.send(t.seg_in().seq(IRS + 101).data(&[2u8; 100]));
    t.recv(&[t.seg_out().ack(IRS + 1)]);
    assert_eq!(t.event(), None, "nothing readable yet");
    t.send(t.seg_in().seq(IRS + 1).data(&[1u8; 100]));
    t.recv(&[t.seg_out().ack(IRS + 201).window(RX_BUFFER as u16 - 200)]);
    let mut expected = vec![1u8; 100];
    expected.extend_from_slice(&[2u8; 100]);
    assert_eq!(t.read_all(), expected);
}

#[test]
fn one_byte_segments_that_fragment_the_window_are_bounded_and_not_answered_beyond_the_limit() {
    // "SegmentSmack" (CVE-2018-5390): single bytes with a gap between each.
    // The receive buffer allows 16 blocks; the 17th beyond them all is
    // dropped and counted, with no ACK (it would repeat the last one); the
    // byte at RCV.NXT still goes in, evicting the highest block (forgotten,
    // to be retransmitted), and everything is delivered once the gaps are
    // filled.
    let mut t = T::established();
    let blocks = crate::tcp::assembler::blocks_for_buffer(RX_BUFFER, usize::MAX) as u32;
    for k in 1..=blocks {
        t.send(t.seg_in().seq(IRS + 1 + 2 * k).data(&[k as u8]));
        t.recv(&[t.seg_out().ack(IRS + 1)]);
    }
    t.send(t.seg_in().seq(IRS + 1 + 2 * (blocks + 1)).data(&[0xee]));
    t.recv_nothing();
    assert_eq!(t.shard.counters().dropped(DropReason::TcpReassemblyFull), 1);
    t.send(t.seg_in().data(&[0]));
    t.recv(&[t.seg_out().ack(IRS + 2).window(RX_BUFFER as u16 - 1)]);
    let mut expected = vec![0u8];
    for k in 1..=blocks {
        t.send(t.seg_in().seq(IRS + 2 * k).data(&[0xff]));
        expected.extend([0xff, k as u8]);
    }
    t.send(t.seg_in().seq(IRS + 1 + 2 * blocks).data(&[blocks as u8]));
    assert_eq!(t.read_all(), expected);
}

#[test]
fn stale_pure_acks_are_answered_once_per_interval_and_data_always() {
    // A keep-alive-style probe (one below RCV.NXT, no data) is answered...
    let mut t = T::established();
    t.send(t.seg_in().seq(IRS));
    t.recv(&[t.seg_out().ack(IRS + 1)]);
    // ...but a stream of them, or of pure ACKs beyond the window, only once
    // per `invalid_ack_interval` (500 ms), counted.
    for _ in 0..3 {
        t.send(t.seg_in().seq(IRS));
        t.send(t.seg_in().seq(IRS + 1 + 100_000));
    }
    t.recv_nothing();
    assert_eq!(t.shard.counters().dropped(DropReason::TcpInvalidAckLimit), 6);
    // Data out of the window always is: its sender may have lost our ACK.
    t.send(t.seg_in().seq(IRS + 1 + 100_000).data(b"x"));
    t.recv(&[t.seg_out().ack(IRS + 1)]);
    t.advance(Duration::from_millis(500));
    t.send(t.seg_in().seq(IRS));
    t.recv(&[t.seg_out().ack(IRS + 1)]);
}

#[test]
fn overlapping_and_duplicate_segments_deliver_each_byte_once() {
    let mut t = T::established();
    t.send(t.seg_in().data(b"abcdef"));
    t.send(t.seg_in().seq(IRS + 4).data(b"defghi"));
    t.send(t.seg_in().data(b"abc"));
    // The pure duplicate is acknowledged at once.
    t.recv(&[t.seg_out().ack(IRS + 10).window(RX_BUFFER as u16 - 9)]);
    assert_eq!(t.read_all(), b"abcdefghi");
}

#[test]
fn sending_segments_by_the_peers_mss_with_push_on_the_last() {
    let mut t = T::established();
    let data: Vec<u8> = (0..2500u32).map(|i| i as u8).collect();
    assert_eq!(t.shard.send(t.h(), &data), Ok(2500));
    let s = t.iss.wrapping_add(1);
    t.recv(&[
        t.seg_out().data(&data[..1000]),
        t.seg_out().seq(s + 1000).data(&data[1000..2000]),
        t.seg_out().seq(s + 2000).data(&data[2000..]).psh(),
    ]);
    t.send(t.seg_in().ack(s + 2500));
    t.recv_nothing();
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.bytes_sent, flow.bytes_acked, flow.send_queue), (2500, 2500, 0));
}

#[test]
fn the_peers_window_limits_what_is_sent_and_silly_windows_wait() {
    let mut t = T::established();
    let s = t.iss.wrapping_add(1);
    t.send(t.seg_in().window(1500));
    assert_eq!(t.shard.send(t.h(), &[9u8; 2500]), Ok(2500));
    // 1000 fit; the remaining 500 of window is a silly window (< 8192 / 2).
    t.recv(&[t.seg_out().data(&[9u8; 1000])]);
    t.send(t.seg_in().ack(s + 1000).window(1500));
    t.recv(&[t.seg_out().seq(s + 1000).data(&[9u8; 1000]), t.seg_out().seq(s + 2000).data(&[9u8; 500]).psh()]);
}

#[test]
fn a_zero_window_is_probed_with_backoff_until_it_opens() {
    let mut t = T::established();
    let s = t.iss.wrapping_add(1);
    t.send(t.seg_in().window(0));
    assert_eq!(t.shard.send(t.h(), b"0123456789"), Ok(10));
    t.recv_nothing();
    // Persist timer: the RTO, 200 ms after a handshake RTT near zero. The
    // probe, as Linux sends it, repeats an old sequence number so the peer
    // answers with its window and no data is risked.
    let probe = t.seg_out().seq(t.iss);
    t.advance(Duration::from_millis(199));
    t.recv_nothing();
    t.advance(Duration::from_millis(2));
    t.recv_one(&probe);
    t.send(t.seg_in().window(0)); // still closed
    // The next probe waits twice as long.
    t.advance(Duration::from_millis(398));
    t.recv_nothing();
    t.advance(Duration::from_millis(4));
    t.recv_one(&probe);
    t.send(t.seg_in().window(4000));
    t.recv(&[t.seg_out().data(b"0123456789").psh()]);
    t.send(t.seg_in().ack(s + 10).window(4000));
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.timeouts, flow.retransmits), (0, 0), "probing a closed window is neither");
    assert!(flow.cwnd >= 10_000, "cwnd untouched by probes: {}", flow.cwnd);
}

#[test]
fn unacknowledged_data_is_retransmitted_with_exponential_backoff() {
    let mut t = T::established();
    assert_eq!(t.shard.send(t.h(), b"data"), Ok(4));
    let seg = t.seg_out().data(b"data").psh();
    t.recv_one(&seg);
    // RTO = SRTT + 200 ms, the handshake's RTT being next to nothing.
    t.advance(Duration::from_millis(199));
    t.recv_nothing();
    t.advance(Duration::from_millis(2));
    t.recv_one(&seg);
    // The RTO doubled: the next one is due 400 ms later.
    t.advance(Duration::from_millis(398));
    t.recv_nothing();
    t.advance(Duration::from_millis(3));
    t.recv_one(&seg);
    t.send(t.seg_in().ack(t.iss.wrapping_add(5)));
    t.advance(Duration::from_secs(5));
    t.recv_nothing();
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.retransmits, flow.timeouts), (2, 2));
    // RFC 5681: the loss window is one segment; slow start then adds the 4 bytes acknowledged.
    assert_eq!(flow.cwnd, 1004);
}

#[test]
fn three_duplicate_acks_trigger_exactly_one_fast_retransmit() {
    // Reno halves the 4000 bytes outstanding at the third duplicate
    // (RFC 5681 §3.2); CUBIC takes β = 0.7 of its 10-segment window
    // (RFC 9438 §4.6). The retransmissions are the same.
    for (algorithm, ssthresh) in [(Algorithm::Reno, 2000), (Algorithm::Cubic, 7000)] {
        let mut c = config();
        c.tcp.congestion = algorithm;
        let mut t = T::established_with(c);
        let s = t.iss.wrapping_add(1);
        let data: Vec<u8> = (0..5000u32).map(|i| (i % 251) as u8).collect();
        assert_eq!(t.shard.send(t.h(), &data), Ok(5000));
        assert_eq!(t.segments().len(), 5);
        t.send(t.seg_in().ack(s + 1000));
        for _ in 0..2 {
            t.send(t.seg_in().ack(s + 1000));
            t.recv_nothing();
        }
        t.send(t.seg_in().ack(s + 1000));
        t.recv(&[t.seg_out().seq(s + 1000).data(&data[1000..2000])]);
        t.send(t.seg_in().ack(s + 1000));
        t.send(t.seg_in().ack(s + 1000));
        t.recv_nothing();
        // A partial ACK resends the next hole (RFC 6582).
        t.send(t.seg_in().ack(s + 2000));
        t.recv(&[t.seg_out().seq(s + 2000).data(&data[2000..3000])]);
        t.send(t.seg_in().ack(s + 5000));
        t.recv_nothing();
        let flow = t.shard.flow(t.h()).unwrap();
        assert_eq!((flow.retransmits, flow.timeouts), (2, 0), "{algorithm:?}");
        assert_eq!(flow.ssthresh, ssthresh, "{algorithm:?}");
    }
}

#[test]
fn a_segment_outside_the_window_is_answered_with_an_ack() {
    let mut t = T::established();
    t.send(t.seg_in().seq(IRS + 1 + 50_000).data(b"far"));
    t.recv(&[t.seg_out()]);
    assert_eq!(t.shard.counters().dropped(DropReason::TcpOutOfWindow), 1);
}

#[test]
fn an_ack_of_unsent_data_is_answered_and_dropped() {
    let mut t = T::established();
    t.send(t.seg_in().ack(t.iss.wrapping_add(1000)).data(b"x"));
    t.recv(&[t.seg_out()]);
    assert_eq!(t.shard.counters().dropped(DropReason::TcpAckUnsent), 1);
    assert_eq!(t.event(), None, "the data was dropped with it");
}

#[test]
fn a_segment_without_ack_is_dropped() {
    let mut t = T::established();
    t.send(t.seg_in().no_ack().data(b"x"));
    t.recv_nothing();
    assert_eq!(t.shard.counters().dropped(DropReason::TcpNoAck), 1);
}

#[test]
fn data_beyond_the_buffer_is_cut_and_the_window_closes() {
    let mut t = T::established();
    t.send(t.seg_in().data(&[5u8; RX_BUFFER + 500]));
    t.recv(&[t.seg_out().ack(IRS + 1 + RX_BUFFER as u32).window(0)]);
    assert_eq!(t.read_all().len(), RX_BUFFER);
    // Reading it all reopens the window with an update.
    t.recv(&[t.seg_out().ack(IRS + 1 + RX_BUFFER as u32)]);
}

#[test]
fn rst_at_rcv_nxt_resets_the_connection() {
    let mut t = T::established();
    t.send(t.seg_in().rst().no_ack());
    t.recv_nothing();
    assert_eq!(t.event(), Some(Event::Error(t.h(), ConnectionError::Reset)));
    let mut buf = [0u8; 8];
    assert_eq!(t.shard.recv(t.h(), &mut buf), Err(RecvError::Connection(ConnectionError::Reset)));
    assert_eq!(t.shard.send(t.h(), b"x"), Err(SendError::Connection(ConnectionError::Reset)));
    // Segments for the tuple now meet no connection.
    t.send(t.seg_in().data(b"x"));
    t.recv(&[t.seg_out().rst().no_ack().seq(t.iss.wrapping_add(1)).window(0)]);
    t.shard.close(t.h());
    assert_eq!(t.shard.connection_count(), 0);
    assert_eq!(t.shard.send(t.h(), b"x"), Err(SendError::InvalidHandle));
}

#[test]
fn rst_in_the_window_but_not_at_rcv_nxt_gets_a_challenge_ack() {
    let mut t = T::established();
    t.send(t.seg_in().seq(IRS + 10).rst().no_ack());
    t.recv(&[t.seg_out()]);
    assert_eq!(t.event(), None);
    assert_eq!(t.shard.counters().dropped(DropReason::TcpRstNotExact), 1);
    // The real peer answers the challenge with an exact RST.
    t.send(t.seg_in().rst().no_ack());
    assert_eq!(t.event(), Some(Event::Error(t.h(), ConnectionError::Reset)));
}

#[test]
fn challenge_acks_are_rate_limited() {
    let mut c = config();
    c.tcp.challenge_acks_per_sec = 3;
    let mut t = T::established_with(c);
    for _ in 0..5 {
        t.send(t.seg_in().seq(IRS + 10).rst().no_ack());
    }
    assert_eq!(t.segments().len(), 1, "flags coalesce into one ACK per poll");
    for _ in 0..5 {
        t.send(t.seg_in().seq(IRS + 10).rst().no_ack());
        let _ = t.segments();
    }
    assert_eq!(t.shard.counters().dropped(DropReason::TcpChallengeAckLimit), 7);
    t.advance(Duration::from_secs(1));
    t.send(t.seg_in().seq(IRS + 10).rst().no_ack());
    t.recv(&[t.seg_out()]);
}

#[test]
fn an_ack_older_than_the_largest_window_is_dropped() {
    let mut t = T::established();
    // RFC 5961 §5.2: acceptable ACKs lie in [SND.UNA - MAX.SND.WND, SND.NXT].
    t.send(t.seg_in().ack(t.iss.wrapping_sub(9000)).data(b"injected"));
    t.recv(&[t.seg_out()]);
    assert_eq!(t.shard.counters().dropped(DropReason::TcpAckTooOld), 1);
    assert_eq!(t.event(), None, "the data was not taken");
    // An old but plausible ACK still carries data.
    t.send(t.seg_in().ack(t.iss.wrapping_sub(100)).data(b"fine"));
    assert_eq!(t.event(), Some(Event::Readable(t.h())));
}

#[test]
fn rst_outside_the_window_is_ignored() {
    let mut t = T::established();
    t.send(t.seg_in().seq(IRS + 100_000).rst().no_ack());
    t.recv_nothing();
    assert_eq!(t.event(), None);
    assert!(t.shard.flow(t.h()).is_some());
}

#[test]
fn syn_in_a_synchronized_state_gets_a_challenge_ack() {
    let mut t = T::established();
    t.send(t.seg_in().seq(IRS + 5).syn().no_ack());
    t.recv(&[t.seg_out()]);
    assert_eq!(t.shard.counters().dropped(DropReason::TcpUnexpectedSyn), 1);
    assert_eq!(t.event(), None);
}

#[test]
fn a_full_send_buffer_blocks_and_signals_writable_when_acked() {
    let mut t = T::established();
    let cap = 4 * RX_BUFFER;
    assert_eq!(t.shard.send(t.h(), &vec![1u8; cap + 100]), Ok(cap));
    assert_eq!(t.shard.send(t.h(), b"more"), Err(SendError::WouldBlock));
    let sent = t.segments().len();
    assert!(sent > 0);
    t.send(t.seg_in().ack(t.iss.wrapping_add(1001)));
    assert_eq!(t.event(), Some(Event::Writable(t.h())));
    assert_eq!(t.shard.send(t.h(), b"more"), Ok(4));
}

#[test]
fn the_window_update_rule_ignores_older_segments() {
    let mut t = T::established();
    t.send(t.seg_in().window(0));
    assert_eq!(t.shard.flow(t.h()).unwrap().snd_wnd, 0);
    // Same SEQ, same ACK: SND.WL2 <= SEG.ACK, so it updates.
    t.send(t.seg_in().data(b"a").window(5000));
    assert_eq!(t.shard.flow(t.h()).unwrap().snd_wnd, 5000);
    t.send(t.seg_in().seq(IRS + 2).window(0));
    assert_eq!(t.shard.flow(t.h()).unwrap().snd_wnd, 0);
    // A reordered older segment (SEG.SEQ < SND.WL1) must not reopen it.
    t.send(t.seg_in().data(b"ab").window(7000));
    assert_eq!(t.shard.flow(t.h()).unwrap().snd_wnd, 0);
}

#[test]
fn slow_start_grows_a_window_more_than_half_used_and_not_one_half_used() {
    // IW10 of 1000-byte segments. A paced or ACK-clocked sender trails its
    // window when ACKs come; slow start still counts a window more than
    // half in flight as used (RFC 7661, as Linux's tcp_is_cwnd_limited).
    for (sent, grown) in [(7000usize, 11_000u32), (5000, 10_000)] {
        let mut t = T::established();
        let s = t.iss.wrapping_add(1);
        assert_eq!(t.shard.flow(t.h()).unwrap().cwnd, 10_000);
        let data = vec![7u8; sent];
        assert_eq!(t.shard.send(t.h(), &data), Ok(sent));
        assert_eq!(t.segments().len(), sent / 1000);
        t.send(t.seg_in().ack(s + 2000));
        assert_eq!(t.shard.flow(t.h()).unwrap().cwnd, grown, "{sent} bytes in flight");
    }
}

#[test]
fn a_window_shut_for_ever_holds_a_connection_only_while_the_application_does() {
    // A held connection: probed, never given up (RFC 9293 §3.8.6.1).
    let mut t = T::established();
    t.send(t.seg_in().window(0));
    assert_eq!(t.shard.send(t.h(), b"0123456789"), Ok(10));
    for _ in 0..360 {
        t.advance(Duration::from_secs(10));
        let _ = t.frames();
        t.send(t.seg_in().window(0));
    }
    assert_eq!(t.shard.connection_count(), 1, "an hour of probes answered: still open");
    // Closed by the application with the data still waiting: given up
    // after the user timeout (300 s) in persist, probes answered or not.
    let mut t = T::established();
    t.send(t.seg_in().window(0));
    assert_eq!(t.shard.send(t.h(), b"0123456789"), Ok(10));
    t.shard.close(t.h());
    let _ = t.frames();
    for _ in 0..29 {
        t.advance(Duration::from_secs(10));
        let _ = t.frames();
        t.send(t.seg_in().window(0));
    }
    assert_eq!(t.shard.connection_count(), 1, "within the user timeout");
    t.advance(Duration::from_secs(11));
    assert_eq!(t.shard.connection_count(), 0, "given up after it");
    assert_eq!(t.shard.counters().orphans_given_up, 1);
}

#[test]
fn acks_divided_into_single_bytes_grow_the_window_by_bytes_not_by_acks() {
    // ACK division (Savage et al., 1999): a receiver that acknowledges a
    // segment a byte at a time would, with per-ACK growth, open the
    // window by an MSS per byte. Growth counts bytes acknowledged
    // (RFC 3465), so a thousand one-byte ACKs open it by a thousand bytes.
    let mut t = T::established();
    let s = t.iss.wrapping_add(1);
    assert_eq!(t.shard.send(t.h(), &[1u8; 10_000]), Ok(10_000));
    let _ = t.frames();
    let before = t.shard.flow(t.h()).unwrap().cwnd;
    for n in 1..=1000u32 {
        t.send(t.seg_in().ack(s + n));
    }
    let _ = t.frames();
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!(flow.bytes_acked, 1000);
    assert!(flow.cwnd <= before + 1000, "cwnd {before} -> {} on 1,000 one-byte ACKs", flow.cwnd);
    assert_eq!(flow.retransmits, 0, "a partial ACK is no duplicate: no fast retransmit");
}
