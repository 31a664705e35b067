//! RFC 7323 (window scaling, timestamps, PAWS), RFC 2018/2883 (SACK and
//! D-SACK generation), quick-ACK, and the window-control hooks.

use core::net::SocketAddrV4;

use super::harness::*;
use crate::api::Event;
use crate::config::Config;
use crate::counters::DropReason;
use crate::time::Duration;

/// A receive buffer whose scale shift is 2 (65535 << 2 = 262140).
const BIG_RX: usize = 262_140;
const OUR_SHIFT: u8 = 2;
const PEER_SHIFT: u8 = 7;
const PEER_TS: u32 = 5_000;

fn cfg() -> Config {
    let mut c = config();
    c.tcp.window_scaling = true;
    c.tcp.timestamps = true;
    c.tcp.sack = true;
    c.tcp.rx_buffer = BIG_RX;
    c
}

/// Our TSval at the test's current time.
fn our_ts(t: &T) -> u32 {
    (t.now.total_millis() as u32).wrapping_add(t.iss.wrapping_add(0).rotate_left(13))
}

/// An established connection with a peer that offered window scale 7,
/// SACK and timestamps, and sends a window field of 100 (12,800 bytes).
fn negotiated(config: Config) -> T {
    let mut t = T::listening_with(config);
    t.send(
        t.seg_in()
            .seq(IRS)
            .no_ack()
            .syn()
            .mss(PEER_MSS)
            .window(65535)
            .wscale(PEER_SHIFT)
            .sack_permitted()
            .ts(PEER_TS, 0),
    );
    t.iss = t.expected_iss(REMOTE_PORT);
    let synack = t.segments();
    assert_eq!(synack.len(), 1);
    t.send(t.seg_in().window(100).ts(PEER_TS + 1, our_ts(&t)));
    assert!(matches!(t.event(), Some(Event::Acceptable(_))));
    t.handle = t.shard.accept(t.listener.unwrap());
    t
}

#[test]
fn options_are_negotiated_in_the_handshake() {
    let mut t = T::listening_with(cfg());
    t.send(
        t.seg_in()
            .seq(IRS)
            .no_ack()
            .syn()
            .mss(PEER_MSS)
            .window(65535)
            .wscale(PEER_SHIFT)
            .sack_permitted()
            .ts(PEER_TS, 0),
    );
    t.iss = t.expected_iss(REMOTE_PORT);
    // The SYN-ACK's window is never scaled (RFC 7323 §2.2).
    t.recv(&[t
        .seg_out()
        .seq(t.iss)
        .ack(IRS + 1)
        .syn()
        .mss(1460)
        .window(65535)
        .wscale(OUR_SHIFT)
        .sack_permitted()
        .ts(our_ts(&t), PEER_TS)]);
    t.send(t.seg_in().window(100).ts(PEER_TS + 1, our_ts(&t)));
    t.handle = t.shard.accept(t.listener.unwrap());
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!(flow.window_scaling, Some((PEER_SHIFT, OUR_SHIFT)));
    assert!(flow.timestamps && flow.sack);
    assert_eq!(flow.snd_wnd, 100 << PEER_SHIFT);
}

#[test]
fn nothing_is_used_that_the_peer_did_not_offer() {
    let mut t = T::listening_with(cfg());
    t.send(t.seg_in().seq(IRS).no_ack().syn().mss(PEER_MSS));
    t.iss = t.expected_iss(REMOTE_PORT);
    t.recv(&[t.seg_out().seq(t.iss).ack(IRS + 1).syn().mss(1460).window(65535)]);
    t.send(t.seg_in().window(100));
    t.handle = t.shard.accept(t.listener.unwrap());
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.window_scaling, flow.timestamps, flow.sack), (None, false, false));
    assert_eq!(flow.snd_wnd, 100, "an unscaled window");
}

#[test]
fn an_active_open_offers_everything_and_keeps_what_the_syn_ack_confirms() {
    let mut t = T::bare(cfg());
    t.handle = Some(t.shard.connect(t.now, SocketAddrV4::new(REMOTE_IP, 80)).unwrap());
    let syn = t.segments().remove(0);
    t.iss = syn.seq;
    assert_eq!(syn.wscale, Some(OUR_SHIFT));
    assert!(syn.sack_permitted);
    assert_eq!(syn.timestamp, Some((our_ts(&t), 0)));
    // The peer only does timestamps.
    t.send(t.seg_in().src_port(80).dst_port(49152).seq(IRS).syn().mss(PEER_MSS).window(1000).ts(77, our_ts(&t)));
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.window_scaling, flow.timestamps, flow.sack), (None, true, false));
    let ack = t.segments().remove(0);
    assert_eq!(ack.timestamp, Some((our_ts(&t), 77)));
    assert_eq!(ack.window, 65535, "no scaling: the window field saturates");
}

#[test]
fn windows_are_scaled_both_ways() {
    let mut t = negotiated(cfg());
    t.send(t.seg_in().window(7).ts(PEER_TS + 2, our_ts(&t)).data(&[1; 1000]));
    t.advance(Duration::from_millis(50));
    let ack = t.segments().remove(0);
    assert_eq!(ack.ack, Some(IRS + 1001));
    // The right edge stayed where the handshake put it: 262140 bytes.
    assert_eq!(ack.window as u32, (BIG_RX as u32 - 1000) >> OUR_SHIFT);
    assert_eq!(t.shard.flow(t.h()).unwrap().snd_wnd, 7 << PEER_SHIFT);
}

#[test]
fn a_lowered_cap_never_moves_the_advertised_right_edge_back() {
    let mut t = negotiated(cfg());
    let h = t.h();
    // The SYN-ACK promised an unscaled 65535 bytes.
    let mut edge = IRS + 1 + 65535;
    t.shard.set_rcv_window_cap(h, Some(4000));
    let mut seq = IRS + 1;
    for i in 0..100u32 {
        t.send(t.seg_in().seq(seq).ts(PEER_TS + 2 + i, our_ts(&t)).data(&[2; 1000]));
        seq += 1000;
        assert_eq!(t.read_all().len(), 1000);
        t.advance(Duration::from_millis(50));
        for ack in t.segments() {
            let right = ack.ack.unwrap() + ((ack.window as u32) << OUR_SHIFT);
            assert!(right.wrapping_sub(edge) as i32 >= 0, "right edge moved back: {right} < {edge}");
            edge = right;
        }
    }
    // Once data has caught up with the old edge, the cap holds (in units of
    // the scale, rounded up so the edge never retreats).
    let window = t.shard.flow(h).unwrap().rcv_wnd;
    assert!(window <= 4000 + (1 << OUR_SHIFT), "{window}");
    assert_eq!(t.shard.flow(h).unwrap().rcv_wnd_cap, Some(4000));
}

#[test]
fn the_cap_never_goes_below_two_segments() {
    let mut t = negotiated(cfg());
    t.shard.set_rcv_window_cap(t.h(), Some(10));
    let mut seq = IRS + 1;
    for i in 0..300u32 {
        t.send(t.seg_in().seq(seq).ts(PEER_TS + 2 + i, our_ts(&t)).data(&[3; 1000]));
        seq += 1000;
        t.read_all();
    }
    t.advance(Duration::from_millis(50));
    assert!(t.shard.flow(t.h()).unwrap().rcv_wnd >= 2 * 1460);
}

#[test]
fn every_segment_echoes_ts_recent_and_rst_carries_no_timestamp() {
    let mut t = negotiated(cfg());
    t.advance(Duration::from_millis(3));
    t.send(t.seg_in().ts(PEER_TS + 9, our_ts(&t)).data(b"ping"));
    assert_eq!(t.read_all(), b"ping");
    assert_eq!(t.shard.send(t.h(), b"pong"), Ok(4));
    let reply = t.segments().remove(0);
    assert_eq!(reply.timestamp, Some((our_ts(&t), PEER_TS + 9)));
    t.shard.abort(t.h());
    let rst = t.segments().remove(0);
    assert!(rst.rst);
    assert_eq!(rst.timestamp, None);
}

#[test]
fn paws_drops_an_old_duplicate() {
    let mut t = negotiated(cfg());
    t.send(t.seg_in().ts(PEER_TS + 10, our_ts(&t)).data(b"new"));
    assert_eq!(t.read_all(), b"new");
    let _ = t.segments();
    // An old segment (older TSval) with otherwise acceptable numbers.
    t.send(t.seg_in().seq(IRS + 4).ts(PEER_TS + 5, our_ts(&t)).data(b"old"));
    assert_eq!(t.read_all(), b"", "dropped");
    assert_eq!(t.shard.counters().dropped(DropReason::TcpPaws), 1);
    let ack = t.segments().remove(0);
    assert_eq!(ack.ack, Some(IRS + 4));
}

#[test]
fn paws_lets_segments_reordered_within_a_round_trip_through() {
    // Every segment acknowledged at once, so each moves TS.Recent.
    let mut c = cfg();
    c.tcp.delayed_ack = Duration::ZERO;
    let mut t = negotiated(c);
    // The peer's clock ticks once a millisecond from PEER_TS; it echoes what
    // we sent 10 ms before, so the receive RTT is 10 ms.
    let peer_ts = |t: &T| PEER_TS + t.now.total_millis() as u32;
    let send_in_order = |t: &mut T, offset: u32| {
        let echo = our_ts(t);
        t.advance(Duration::from_millis(10));
        t.send(t.seg_in().seq(IRS + 1 + offset).ts(peer_ts(t), echo).data(&[7; 100]));
    };
    for offset in [0, 100, 200, 300] {
        send_in_order(&mut t, offset);
        t.advance(Duration::from_millis(5));
    }
    assert_eq!(t.shard.flow(t.h()).unwrap().rcv_rtt, Some(Duration::from_millis(10)));
    let recent = peer_ts(&t) - 5;
    let _ = t.segments();
    // A segment sent 10 ms before the latest in-order one, overtaken by it
    // (a hole at 401..501 before it): within the allowance, kept and SACKed.
    t.send(t.seg_in().seq(IRS + 501).ts(recent - 10, our_ts(&t)).data(&[7; 100]));
    assert_eq!(t.shard.counters().dropped(DropReason::TcpPaws), 0);
    assert_eq!(t.segments().remove(0).sack, vec![(IRS + 501, IRS + 601)]);
    // One sent over two round trips before it: an old duplicate, as strict
    // PAWS has it.
    t.send(t.seg_in().seq(IRS + 701).ts(recent - 40, our_ts(&t)).data(&[7; 100]));
    assert_eq!(t.shard.counters().dropped(DropReason::TcpPaws), 1);
    assert_eq!(t.segments().remove(0).sack, vec![(IRS + 501, IRS + 601)]);
}

#[test]
fn ts_recent_is_the_earliest_unacknowledged_timestamp() {
    let mut t = negotiated(cfg());
    // Two segments before our delayed ACK: RFC 7323 §4.3 echoes the first.
    t.send(t.seg_in().ts(PEER_TS + 20, our_ts(&t)).data(&[4; 100]));
    t.send(t.seg_in().seq(IRS + 101).ts(PEER_TS + 21, our_ts(&t)).data(&[4; 100]));
    t.advance(Duration::from_millis(50));
    let ack = t.segments().remove(0);
    assert_eq!(ack.ack, Some(IRS + 201));
    assert_eq!(ack.timestamp.unwrap().1, PEER_TS + 20);
}

#[test]
fn the_mss_leaves_room_for_the_timestamp() {
    let mut t = negotiated(cfg());
    assert_eq!(t.shard.send(t.h(), &[5; 2000]), Ok(2000));
    let segs = t.segments();
    // RFC 6691: 1000 - 12 bytes of timestamp option.
    assert_eq!(segs.iter().map(|s| s.payload.len()).collect::<Vec<_>>(), [988, 988, 24]);
}

#[test]
fn sack_blocks_report_out_of_order_data_most_recent_first() {
    let mut t = negotiated(cfg());
    let ts = our_ts(&t);
    t.send(t.seg_in().seq(IRS + 1001).ts(PEER_TS + 2, ts).data(&[6; 500]));
    assert_eq!(t.segments()[0].sack, vec![(IRS + 1001, IRS + 1501)]);
    t.send(t.seg_in().seq(IRS + 3001).ts(PEER_TS + 3, ts).data(&[6; 500]));
    assert_eq!(t.segments()[0].sack, vec![(IRS + 3001, IRS + 3501), (IRS + 1001, IRS + 1501)]);
    // Filling the first hole leaves one block.
    t.send(t.seg_in().ts(PEER_TS + 4, ts).data(&[6; 1000]));
    let ack = t.segments().remove(0);
    assert_eq!(ack.ack, Some(IRS + 1501));
    assert_eq!(ack.sack, vec![(IRS + 3001, IRS + 3501)]);
}

#[test]
fn four_sack_blocks_fit_without_timestamps_three_with() {
    for (timestamps, expected) in [(false, 4), (true, 3)] {
        let mut c = cfg();
        c.tcp.timestamps = timestamps;
        let mut t = negotiated(c);
        for i in 0..5u32 {
            let ts = our_ts(&t);
            t.send(t.seg_in().seq(IRS + 1001 + 2000 * i).ts(PEER_TS + 2 + i, ts).data(&[7; 100]));
        }
        let last = t.segments().pop().unwrap();
        assert_eq!(last.sack.len(), expected);
        assert_eq!(last.sack[0], (IRS + 9001, IRS + 9101), "the most recent first");
    }
}

#[test]
fn a_duplicate_is_reported_with_a_dsack_block() {
    let mut t = negotiated(cfg());
    let ts = our_ts(&t);
    t.send(t.seg_in().ts(PEER_TS + 2, ts).data(&[8; 100]));
    t.advance(Duration::from_millis(50));
    let _ = t.segments();
    t.send(t.seg_in().ts(PEER_TS + 3, ts).data(&[8; 100]));
    let ack = t.segments().remove(0);
    assert_eq!(ack.ack, Some(IRS + 101));
    assert_eq!(ack.sack, vec![(IRS + 1, IRS + 101)], "RFC 2883: a block below the ACK");
}

#[test]
fn quick_acks_at_the_start_then_delayed_acks() {
    let mut c = cfg();
    c.tcp.quick_acks = 2;
    let mut t = negotiated(c);
    let mut seq = IRS + 1;
    for expect_ack in [true, true, false] {
        t.send(t.seg_in().seq(seq).ts(PEER_TS + 2, our_ts(&t)).data(&[9; 100]));
        seq += 100;
        assert_eq!(!t.segments().is_empty(), expect_ack);
    }
}

#[test]
fn the_receiver_measures_the_rtt_from_echoes() {
    let mut t = negotiated(cfg());
    let synack_ts = our_ts(&t);
    t.advance(Duration::from_millis(30));
    t.send(t.seg_in().ts(PEER_TS + 2, synack_ts).data(&[1; 10]));
    t.advance(Duration::from_millis(41));
    let ack = t.segments().remove(0);
    let echoed = ack.timestamp.unwrap().0;
    // The next data echoes our ACK's timestamp 30 ms after we sent it.
    t.advance(Duration::from_millis(30));
    t.send(t.seg_in().seq(IRS + 11).ts(PEER_TS + 3, echoed).data(&[1; 10]));
    let rcv_rtt = t.shard.flow(t.h()).unwrap().rcv_rtt.unwrap();
    assert!(rcv_rtt >= Duration::from_millis(29) && rcv_rtt <= Duration::from_millis(31), "{rcv_rtt:?}");
}

#[test]
fn after_a_retransmission_the_echo_still_measures_the_rtt() {
    let mut t = negotiated(cfg());
    assert_eq!(t.shard.send(t.h(), b"x"), Ok(1));
    let _ = t.segments();
    let before = t.shard.flow(t.h()).unwrap().srtt;
    t.advance(Duration::from_secs(1));
    let rexmit = t.segments().pop().unwrap();
    let tsval = rexmit.timestamp.unwrap().0;
    t.advance(Duration::from_millis(80));
    t.send(t.seg_in().ack(t.iss.wrapping_add(2)).ts(PEER_TS + 3, tsval));
    let after = t.shard.flow(t.h()).unwrap().srtt;
    assert_ne!(before, after, "Karn's rule forbids a timed sample; the echo gives one");
    assert!(t.shard.flow(t.h()).unwrap().min_rtt.unwrap() <= Duration::from_millis(81));
}

#[test]
fn a_cwnd_cap_limits_what_is_in_flight() {
    let mut t = negotiated(cfg());
    t.shard.set_cwnd_cap(t.h(), Some(3000));
    assert_eq!(t.shard.send(t.h(), &[2; 10_000]), Ok(10_000));
    let sent: usize = t.segments().iter().map(|s| s.payload.len()).sum();
    assert!((2 * 988..=3000).contains(&sent), "{sent}");
    assert_eq!(t.shard.flow(t.h()).unwrap().cwnd_cap, Some(3000));
}

#[test]
fn a_pacing_cap_spreads_segments_out() {
    let mut t = negotiated(cfg());
    // 100 kB/s: a 988-byte segment with its 52 bytes of headers every 10.4 ms.
    t.shard.set_pacing_cap(t.h(), Some(100_000));
    assert_eq!(t.shard.send(t.h(), &[3; 4000]), Ok(4000));
    let mut times = Vec::new();
    for _ in 0..60 {
        for _ in t.segments() {
            times.push(t.now);
        }
        t.advance(Duration::from_millis(1));
    }
    assert_eq!(times.len(), 5);
    for w in times.windows(2) {
        let gap = w[1] - w[0];
        assert!(gap >= Duration::from_millis(9) && gap <= Duration::from_millis(12), "{gap:?}");
    }
}

#[test]
fn the_pacer_spreads_a_window_over_the_rtt() {
    // The handshake takes 50 ms, so SRTT = 50 ms; cwnd is the initial ten
    // segments of 1000 bytes. Paced at 150 % of cwnd / SRTT = 300 kB/s, a
    // 988-byte segment with its 52 bytes of headers leaves every 3.47 ms;
    // unpaced, the same five segments leave at once.
    for pacing in [true, false] {
        let mut c = cfg();
        c.tcp.pacing = pacing;
        let mut t = T::listening_with(c);
        t.send(t.seg_in().seq(IRS).no_ack().syn().mss(PEER_MSS).window(65535).ts(PEER_TS, 0));
        t.iss = t.expected_iss(REMOTE_PORT);
        let synack = t.segments().remove(0);
        t.advance(Duration::from_millis(50));
        t.send(t.seg_in().window(65535).ts(PEER_TS + 1, synack.timestamp.unwrap().0));
        t.handle = t.shard.accept(t.listener.unwrap());
        assert_eq!(t.shard.flow(t.h()).unwrap().srtt, Some(Duration::from_millis(50)));
        assert_eq!(t.shard.send(t.h(), &[3; 4000]), Ok(4000));
        let mut times = Vec::new();
        for _ in 0..40 {
            for _ in t.segments() {
                times.push(t.now);
            }
            t.advance(Duration::from_micros(500));
        }
        assert_eq!(times.len(), 5, "pacing {pacing}");
        let gaps: Vec<Duration> = times.windows(2).map(|w| w[1] - w[0]).collect();
        if pacing {
            // The idle connection's one segment of credit lets the second
            // follow the first almost at once; the rest keep the rate.
            for gap in &gaps[1..] {
                assert!(*gap >= Duration::from_millis(3) && *gap <= Duration::from_millis(4), "{gaps:?}");
            }
        } else {
            assert!(gaps.iter().all(|g| *g == Duration::ZERO), "{gaps:?}");
        }
    }
}

#[test]
fn the_window_restarts_from_the_initial_window_after_idle() {
    let mut c = cfg();
    c.tcp.delayed_ack = Duration::ZERO;
    let mut t = negotiated(c);
    let mut una = t.iss.wrapping_add(1);
    // Grow cwnd with a few round trips.
    for _ in 0..4 {
        let _ = t.shard.send(t.h(), &[4; 16_000]);
        for s in t.segments() {
            una = s.seq.wrapping_add(s.payload.len() as u32);
        }
        t.send(t.seg_in().ack(una).window(1000).ts(PEER_TS + 2, our_ts(&t)));
    }
    let grown = t.shard.flow(t.h()).unwrap().cwnd;
    assert!(grown > 10 * 1000, "{grown}");
    t.advance(Duration::from_secs(5));
    t.send(t.seg_in().ack(t.iss.wrapping_add(1) + t.shard.flow(t.h()).unwrap().bytes_sent as u32).window(1000));
    assert!(t.shard.send(t.h(), &[4; 100]).is_ok());
    let _ = t.segments();
    assert!(t.shard.flow(t.h()).unwrap().cwnd <= 10 * 1000, "RFC 5681 §4.1");
}

#[test]
fn sack_blocks_from_the_peer_do_not_disturb_a_receiver() {
    // A pure receiver ignores SACK information about data it never sent.
    let mut t = negotiated(cfg());
    t.send(t.seg_in().ts(PEER_TS + 2, our_ts(&t)).sack(&[(5, 10), (t.iss, t.iss.wrapping_add(100))]).data(b"ok"));
    assert_eq!(t.read_all(), b"ok");
}
