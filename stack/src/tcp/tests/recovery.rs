//! Loss detection and recovery, segment by segment: SACK's scoreboard and
//! DupThresh (RFC 6675), RACK's time-based detection and the tail-loss probe
//! (RFC 8985), NewReno for peers without SACK (RFC 6582), undoing a window cut
//! that a D-SACK (RFC 2883) or a timestamp echo (RFC 3522) shows was not
//! needed, and a receiver that reneges on its SACKs (RFC 2018 §8).
//!
//! Every path here has a 50 ms round trip: the handshake takes one and the
//! peer acknowledges each flight one round trip after it left. So SRTT and
//! min-RTT are 50 ms, the RTO is 250 ms (SRTT + the 200 ms minimum), RACK's
//! reordering window is min-RTT / 4 = 12.5 ms and a tail-loss probe waits
//! 2·SRTT = 100 ms. The peer announces a 1000-byte MSS and a 65,535-byte
//! window, so only cwnd (ten segments to start with) limits a flight.

use super::harness::*;
use crate::api::Event;
use crate::config::Config;
use crate::tcp::congestion::Algorithm;
use crate::time::Duration;

const RTT: Duration = Duration::from_millis(50);
const PEER_WINDOW: u16 = 65_535;
const PEER_TS: u32 = 5_000;
const MSS: usize = PEER_MSS as usize;
/// RFC 6928's initial window for a 1000-byte MSS: ten segments.
const IW: u32 = 10 * PEER_MSS as u32;

fn ms(millis: u64) -> Duration {
    Duration::from_millis(millis)
}

/// SACK on, timestamps off (so segments carry a full MSS), and `algorithm`.
fn cfg(algorithm: Algorithm) -> Config {
    let mut c = config();
    c.tcp.sack = true;
    c.tcp.congestion = algorithm;
    c
}

/// Our TSval at the test's current time.
fn our_ts(t: &T) -> u32 {
    (t.now.total_millis() as u32).wrapping_add(t.iss.rotate_left(13))
}

/// An established connection whose handshake took one RTT. The peer offers
/// SACK and timestamps when `config` turns them on.
fn connected(config: Config) -> T {
    let (sack, timestamps) = (config.tcp.sack, config.tcp.timestamps);
    let mut t = T::listening_with(config);
    let mut syn = t.seg_in().seq(IRS).no_ack().syn().mss(PEER_MSS).window(PEER_WINDOW);
    if sack {
        syn = syn.sack_permitted();
    }
    if timestamps {
        syn = syn.ts(PEER_TS, 0);
    }
    t.send(syn);
    t.iss = t.expected_iss(REMOTE_PORT);
    let synack = t.segments();
    assert_eq!(synack.len(), 1);
    t.advance(RTT);
    let mut ack = t.seg_in().window(PEER_WINDOW);
    if let Some((tsval, _)) = synack[0].timestamp {
        ack = ack.ts(PEER_TS + 1, tsval);
    }
    t.send(ack);
    assert!(matches!(t.event(), Some(Event::Acceptable(_))));
    t.handle = t.shard.accept(t.listener.unwrap());
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.srtt, flow.min_rtt, flow.cwnd), (Some(RTT), Some(RTT), IW));
    t
}

/// The sequence number of our first data byte.
fn first(t: &T) -> u32 {
    t.iss.wrapping_add(1)
}

/// The peer's ACK of our first `acked` data bytes, with SACK blocks given
/// as offsets into our data.
fn ack(t: &T, acked: usize, blocks: &[(usize, usize)]) -> Seg {
    let at = |offset: usize| first(t).wrapping_add(offset as u32);
    let blocks: Vec<(u32, u32)> = blocks.iter().map(|&(a, b)| (at(a), at(b))).collect();
    t.seg_in().ack(at(acked)).window(PEER_WINDOW).sack(&blocks)
}

/// Our segments carrying `queued[from..to]`, one MSS each; PSH on the one
/// that reaches the end of what is queued.
fn segs(t: &T, queued: &[u8], from: usize, to: usize) -> Vec<Seg> {
    (from..to)
        .step_by(MSS)
        .map(|a| {
            let b = (a + MSS).min(to);
            let seg = t.seg_out().seq(first(t).wrapping_add(a as u32)).data(&queued[a..b]);
            if b == queued.len() { seg.psh() } else { seg }
        })
        .collect()
}

fn payload(len: usize) -> Vec<u8> {
    (0..len).map(|i| (i % 251) as u8).collect()
}

fn queue(t: &mut T, data: &[u8]) {
    assert_eq!(t.shard.send(t.h(), data), Ok(data.len()));
}

// ---------------------------------------------------------------------------
// SACK scoreboard and DupThresh (RFC 6675)
// ---------------------------------------------------------------------------

/// RFC 6675 §5.1: a SACK block claiming data beyond SND.NXT is bogus and
/// marks nothing. However often the peer repeats it, no record counts as
/// SACKed: no loss is inferred and pipe does not shrink to let new data out.
/// A block within what was sent then works as usual.
#[test]
fn a_sack_block_beyond_snd_nxt_is_ignored() {
    let mut t = connected(cfg(Algorithm::Cubic));
    let data = payload(15_000);
    queue(&mut t, &data);
    t.recv(&segs(&t, &data, 0, 10_000));
    t.advance(RTT);
    // Trimmed to what was sent, the block would SACK the nine segments
    // above the first: past DupThresh, and pipe down to one segment.
    for _ in 0..4 {
        t.send(ack(&t, 0, &[(1000, 10_001)]));
        t.recv_nothing();
    }
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.retransmits, flow.cwnd, flow.ssthresh), (0, IW, u32::MAX));
    assert_eq!(t.shard.counters().fast_recoveries, 0);
    // Three segments SACKed within SND.NXT: the first is lost. CUBIC's cut
    // to 7000 is filled by the retransmission and the six segments still in
    // flight, so no new data goes with it.
    t.send(ack(&t, 0, &[(1000, 4000)]));
    t.recv(&segs(&t, &data, 0, 1000));
    assert_eq!(t.shard.counters().fast_recoveries, 1);
}

/// RFC 6675 §5 with DupThresh = 3: before the path has shown reordering, a
/// hole is lost once three segments above it are SACKed and not before; it
/// is retransmitted exactly once and the window is cut once (Reno halves
/// the 4000 bytes outstanding, RFC 5681 (4); CUBIC takes β = 0.7 of cwnd,
/// RFC 9438 §4.6).
#[test]
fn three_sacked_segments_above_a_hole_retransmit_it_once() {
    for (algorithm, ssthresh) in [(Algorithm::Reno, 2000), (Algorithm::Cubic, 7000)] {
        let mut t = connected(cfg(algorithm));
        let data = payload(5000);
        queue(&mut t, &data);
        t.recv(&segs(&t, &data, 0, 5000));
        t.advance(RTT);
        t.send(ack(&t, 1000, &[(2000, 3000)]));
        t.send(ack(&t, 1000, &[(2000, 4000)]));
        t.recv_nothing();
        t.send(ack(&t, 1000, &[(2000, 5000)]));
        t.recv(&segs(&t, &data, 1000, 2000));
        // The same news again finds nothing more to resend.
        t.send(ack(&t, 1000, &[(2000, 5000)]));
        t.recv_nothing();
        t.advance(RTT);
        t.send(ack(&t, 5000, &[]));
        t.recv_nothing();
        let flow = t.shard.flow(t.h()).unwrap();
        assert_eq!((flow.retransmits, flow.timeouts, flow.ssthresh), (1, 0, ssthresh), "{algorithm:?}");
        assert_eq!(t.shard.counters().fast_recoveries, 1, "{algorithm:?}");
    }
}

/// RFC 6675 §5 step (4.2) with RFC 5681 (4): ssthresh = cwnd =
/// max(FlightSize / 2, 2·SMSS), FlightSize being the data sent and not
/// cumulatively acknowledged, SACKed data included. An ACK that SACKs most
/// of the window at once must not cut Reno below half of what is out.
#[test]
fn reno_halves_the_flight_size_sacked_data_included() {
    let mut t = connected(cfg(Algorithm::Reno));
    let data = payload(10_000);
    queue(&mut t, &data);
    t.recv(&segs(&t, &data, 0, 10_000));
    t.advance(RTT);
    t.send(ack(&t, 1000, &[(2000, 10_000)]));
    t.recv(&segs(&t, &data, 1000, 2000));
    // 9000 bytes beyond the cumulative ACK.
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.cwnd, flow.ssthresh), (4500, 4500));
}

// ---------------------------------------------------------------------------
// RACK (RFC 8985 §6)
// ---------------------------------------------------------------------------

/// RFC 8985 §6.2: once the path has reordered (a delivery below the highest
/// already delivered, or a D-SACK), DupThresh no longer condemns a hole:
/// RACK's timer does, RTT + reo_wnd after the hole was sent. reo_wnd is
/// min-RTT / 4, and each D-SACK widens it by another quarter (step 4).
#[test]
fn after_reordering_rack_waits_an_rtt_plus_the_reordering_window() {
    type Acks = &'static [(usize, &'static [(usize, usize)])];
    // The second segment arrives after the third.
    let late_delivery: Acks = &[(1000, &[(2000, 3000)]), (3000, &[]), (4000, &[])];
    // The network delivered the second segment twice.
    let duplicate: Acks = &[(4000, &[]), (4000, &[(1000, 2000)])];
    for (acks, reo_wnd) in [(late_delivery, Duration::from_micros(12_500)), (duplicate, ms(25))] {
        let mut t = connected(cfg(Algorithm::Cubic));
        let data = payload(9000);
        queue(&mut t, &data[..4000]);
        t.recv(&segs(&t, &data[..4000], 0, 4000));
        t.advance(RTT);
        for &(acked, blocks) in acks {
            t.send(ack(&t, acked, blocks));
        }
        t.recv_nothing();
        queue(&mut t, &data[4000..]);
        t.recv(&segs(&t, &data, 4000, 9000));
        t.advance(RTT);
        // The sixth segment is missing with three above it SACKed: enough
        // for DupThresh, but reordering has been seen.
        t.send(ack(&t, 5000, &[(6000, 9000)]));
        t.recv_nothing();
        t.advance(reo_wnd - ms(1));
        t.recv_nothing();
        t.advance(ms(2));
        t.recv(&segs(&t, &data, 5000, 6000));
        let flow = t.shard.flow(t.h()).unwrap();
        assert_eq!((flow.retransmits, flow.timeouts, flow.spurious), (1, 0, 0), "{reo_wnd:?}");
        assert_eq!(t.shard.counters().fast_recoveries, 1, "{reo_wnd:?}");
    }
}

/// RFC 8985 §6: RACK judges a retransmission like any segment, by the time
/// it was sent. When segments sent after it are SACKed and it is not, an RTT
/// later it is lost too and goes again: no need to wait for the RTO.
#[test]
fn a_lost_retransmission_is_detected_by_rack() {
    let mut t = connected(cfg(Algorithm::Cubic));
    let data = payload(11_000);
    queue(&mut t, &data[..8000]);
    t.recv(&segs(&t, &data[..8000], 0, 8000));
    t.advance(RTT);
    t.send(ack(&t, 1000, &[(2000, 5000)]));
    t.recv(&segs(&t, &data[..8000], 1000, 2000));
    // New data, sent after the retransmission: CUBIC's 7000 less the 4000
    // in pipe leaves room for three segments.
    t.advance(ms(10));
    queue(&mut t, &data[8000..]);
    t.recv(&segs(&t, &data, 8000, 11_000));
    // They arrive; the retransmission does not.
    t.advance(RTT);
    t.send(ack(&t, 1000, &[(2000, 11_000)]));
    t.recv(&segs(&t, &data, 1000, 2000));
    t.advance(RTT);
    t.send(ack(&t, 11_000, &[]));
    t.recv_nothing();
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.retransmits, flow.timeouts), (2, 0));
    assert_eq!(t.shard.counters().fast_recoveries, 1, "one episode");
}

// ---------------------------------------------------------------------------
// Tail-loss probes (RFC 8985 §7)
// ---------------------------------------------------------------------------

/// RFC 8985 §7.2–7.4: when the tail of a flight goes unacknowledged, a probe
/// goes out 2·SRTT after the last ACK (more than one segment is in flight,
/// so no delayed-ACK allowance), long before the RTO. With no new data it
/// is the last segment again. Its ACK reveals the hole, which RACK repairs.
#[test]
fn a_tail_loss_probe_resends_the_last_segment_and_its_ack_starts_recovery() {
    let mut t = connected(cfg(Algorithm::Cubic));
    let data = payload(3000);
    queue(&mut t, &data);
    t.recv(&segs(&t, &data, 0, 3000));
    t.advance(RTT);
    t.send(ack(&t, 1000, &[]));
    t.advance(ms(99));
    t.recv_nothing();
    t.advance(ms(2));
    t.recv(&segs(&t, &data, 2000, 3000));
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.retransmits, flow.timeouts, flow.cwnd), (1, 0, IW));
    t.advance(RTT);
    t.send(ack(&t, 1000, &[(2000, 3000)]));
    t.recv(&segs(&t, &data, 1000, 2000));
    assert_eq!(t.shard.counters().fast_recoveries, 1);
    t.advance(RTT);
    t.send(ack(&t, 3000, &[]));
    t.recv_nothing();
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.retransmits, flow.timeouts), (2, 0));
}

/// RFC 8985 §7.3: the probe carries new data when some is queued and the
/// peer's window allows it, cwnd notwithstanding; that is no retransmission.
#[test]
fn a_tail_loss_probe_sends_new_data_when_there_is_some() {
    let mut t = connected(cfg(Algorithm::Cubic));
    let data = payload(11_000);
    queue(&mut t, &data);
    t.recv(&segs(&t, &data, 0, 10_000));
    t.advance(ms(99));
    t.recv_nothing();
    t.advance(ms(2));
    t.recv(&segs(&t, &data, 10_000, 11_000));
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.retransmits, flow.timeouts), (0, 0));
    // The probe's ACK: everything arrived but the tenth segment.
    t.advance(RTT);
    t.send(ack(&t, 9000, &[(10_000, 11_000)]));
    t.recv(&segs(&t, &data, 9000, 10_000));
    assert_eq!(t.shard.counters().fast_recoveries, 1);
    t.advance(RTT);
    t.send(ack(&t, 11_000, &[]));
    t.recv_nothing();
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.retransmits, flow.timeouts), (1, 0));
}

/// RFC 8985 §7.2: with one segment in flight the probe also waits out the
/// peer's worst-case delayed ACK: 2·SRTT + 200 ms. (A 500 ms minimum RTO
/// keeps the RTO, at 550 ms, out of its way.)
#[test]
fn with_one_segment_in_flight_the_probe_allows_for_a_delayed_ack() {
    let mut c = cfg(Algorithm::Cubic);
    c.tcp.min_rto = ms(500);
    let mut t = connected(c);
    assert_eq!(t.shard.flow(t.h()).unwrap().rto, ms(550));
    let data = payload(500);
    queue(&mut t, &data);
    t.recv(&segs(&t, &data, 0, 500));
    t.advance(ms(299));
    t.recv_nothing();
    t.advance(ms(2));
    t.recv(&segs(&t, &data, 0, 500));
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.retransmits, flow.timeouts, flow.cwnd), (1, 0, IW));
    t.send(ack(&t, 500, &[]));
    t.recv_nothing();
}

/// RFC 8985 §7.2: a PTO that would expire after the RTO is cut to expire
/// with it, and the probe goes in the RTO's place (§7.3 re-arms the RTO from
/// it). With one segment in flight and the 200 ms minimum RTO this is the
/// common case: 2·50 + 200 ms > 250 ms.
#[test]
fn a_probe_due_after_the_rto_goes_out_in_its_place() {
    let mut t = connected(cfg(Algorithm::Cubic));
    assert_eq!(t.shard.flow(t.h()).unwrap().rto, ms(250));
    let data = payload(500);
    queue(&mut t, &data);
    t.recv(&segs(&t, &data, 0, 500));
    t.advance(ms(249));
    t.recv_nothing();
    t.advance(ms(2));
    t.recv(&segs(&t, &data, 0, 500));
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.retransmits, flow.timeouts, flow.cwnd), (1, 0, IW));
}

// ---------------------------------------------------------------------------
// Undoing a cut that was not needed (RFC 2883, RFC 3522)
// ---------------------------------------------------------------------------

/// RFC 2883 §4: a D-SACK (the first block, covered by the cumulative ACK)
/// that reports the only retransmission of a recovery shows the original had
/// arrived after all: the window cut is undone (cwnd and ssthresh as before
/// it) and counted as spurious.
#[test]
fn a_dsack_for_the_only_retransmission_undoes_the_window_cut() {
    for (algorithm, cut) in [(Algorithm::Reno, 2000), (Algorithm::Cubic, 7000)] {
        let mut t = connected(cfg(algorithm));
        let data = payload(5000);
        queue(&mut t, &data);
        t.recv(&segs(&t, &data, 0, 5000));
        t.advance(RTT);
        t.send(ack(&t, 1000, &[(2000, 5000)]));
        t.recv(&segs(&t, &data, 1000, 2000));
        let flow = t.shard.flow(t.h()).unwrap();
        assert_eq!((flow.cwnd, flow.ssthresh, flow.spurious), (cut, cut, 0), "{algorithm:?}");
        // The original was only delayed: it fills the hole, and then the
        // retransmission arrives as a duplicate.
        t.advance(ms(5));
        t.send(ack(&t, 5000, &[]));
        t.send(ack(&t, 5000, &[(1000, 2000)]));
        t.recv_nothing();
        let flow = t.shard.flow(t.h()).unwrap();
        assert_eq!((flow.cwnd, flow.ssthresh, flow.spurious), (IW, u32::MAX, 1), "{algorithm:?}");
    }
}

/// RFC 2883 §4: the first SACK block is a D-SACK when the cumulative ACK
/// *of the same segment* covers it (or the second block does). An old ACK
/// that arrives late carries ordinary SACK blocks below today's SND.UNA:
/// stale news, not a duplicate, and no reason to undo the cut for a loss
/// that was real.
#[test]
fn a_late_ack_is_not_mistaken_for_a_dsack() {
    let mut t = connected(cfg(Algorithm::Reno));
    let data = payload(5000);
    queue(&mut t, &data);
    t.recv(&segs(&t, &data, 0, 5000));
    t.advance(RTT);
    // The peer sends three ACKs; the network holds back the second.
    let late = ack(&t, 1000, &[(2000, 4000)]);
    t.send(ack(&t, 1000, &[(2000, 3000)]));
    t.send(ack(&t, 1000, &[(2000, 5000)]));
    t.recv(&segs(&t, &data, 1000, 2000));
    // The retransmission fills the hole a round trip later: the loss was real.
    t.advance(RTT);
    t.send(ack(&t, 5000, &[]));
    let before = t.shard.flow(t.h()).unwrap();
    assert_eq!((before.ssthresh, before.spurious), (2000, 0));
    t.send(late);
    t.recv_nothing();
    let after = t.shard.flow(t.h()).unwrap();
    assert_eq!((after.cwnd, after.ssthresh, after.spurious), (before.cwnd, 2000, 0));
}

/// RFC 3522 (Eifel): the first ACK of new data after a timeout tells by its
/// timestamp echo which transmission arrived. An echo older than the
/// retransmission's TSval means the original did: the timeout was spurious,
/// and the window comes back. An echo of the retransmission's own TSval
/// means it was needed: the window stays collapsed (RFC 5681 §3.1: one
/// segment, ssthresh = max(988 / 2, 2·SMSS)), then grows by slow start.
#[test]
fn a_timestamp_echo_tells_a_spurious_timeout_from_a_real_one() {
    for echo_original in [true, false] {
        let mut c = config();
        c.tcp.timestamps = true;
        c.tcp.congestion = Algorithm::Reno;
        let mut t = connected(c);
        // RFC 6691: the timestamp option comes out of the MSS.
        let data = payload(988);
        queue(&mut t, &data);
        let original = our_ts(&t);
        t.recv(&[segs(&t, &data, 0, 988).remove(0).ts(original, PEER_TS + 1)]);
        t.advance(ms(249));
        t.recv_nothing();
        // Just past the deadline's timer tick, within the same millisecond.
        t.advance(Duration::from_micros(1_100));
        let retransmission = our_ts(&t);
        assert_ne!(retransmission, original);
        t.recv(&[segs(&t, &data, 0, 988).remove(0).ts(retransmission, PEER_TS + 1)]);
        let flow = t.shard.flow(t.h()).unwrap();
        assert_eq!((flow.cwnd, flow.ssthresh, flow.timeouts), (1000, 2000, 1));
        t.advance(ms(10));
        let echo = if echo_original { original } else { retransmission };
        t.send(ack(&t, 988, &[]).ts(PEER_TS + 2, echo));
        t.recv_nothing();
        let flow = t.shard.flow(t.h()).unwrap();
        let expected = if echo_original { (IW, u32::MAX, 1) } else { (1988, 2000, 0) };
        assert_eq!((flow.cwnd, flow.ssthresh, flow.spurious), expected, "echo of the original: {echo_original}");
    }
}

/// RFC 3522 §3.2: RetransmitTS is the TSval of the *first* retransmission.
/// After a second timeout, an echo of the first retransmission's TSval shows
/// that it arrived and the original did not: the timeouts were real and
/// nothing is undone.
#[test]
fn after_two_timeouts_an_echo_of_the_first_retransmission_undoes_nothing() {
    let mut c = config();
    c.tcp.timestamps = true;
    let mut t = connected(c);
    let data = payload(988);
    queue(&mut t, &data);
    assert_eq!(t.segments().len(), 1);
    t.advance(ms(249));
    t.recv_nothing();
    t.advance(Duration::from_micros(1_100));
    let first_retransmission = our_ts(&t);
    t.recv(&[segs(&t, &data, 0, 988).remove(0).ts(first_retransmission, PEER_TS + 1)]);
    // The RTO doubled to 500 ms.
    t.advance(ms(499));
    t.recv_nothing();
    t.advance(ms(1));
    assert_eq!(t.segments().len(), 1);
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.timeouts, flow.ssthresh), (2, 7000));
    t.advance(ms(10));
    t.send(ack(&t, 988, &[]).ts(PEER_TS + 2, first_retransmission));
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.spurious, flow.ssthresh), (0, 7000));
}

// ---------------------------------------------------------------------------
// Reneging (RFC 2018 §8)
// ---------------------------------------------------------------------------

/// RFC 2018 §8: a receiver may discard data it has SACKed. When its
/// cumulative ACK stops at the start of a SACKed record it has: rather than
/// a whole RTO, the timer is brought forward to max(SRTT / 2, 10 ms); then
/// no SACK mark is trusted and the data goes again in sequence order, as
/// the collapsed window allows.
#[test]
fn after_reneging_the_sacked_data_goes_again_half_an_rtt_later() {
    let mut t = connected(cfg(Algorithm::Reno));
    let data = payload(4000);
    queue(&mut t, &data);
    t.recv(&segs(&t, &data, 0, 4000));
    t.advance(RTT);
    t.send(ack(&t, 0, &[(1000, 4000)]));
    t.recv(&segs(&t, &data, 0, 1000));
    // The retransmission arrived, but the receiver threw away what it had
    // SACKed: the ACK stops at the second segment and reports nothing above.
    t.advance(RTT);
    t.send(ack(&t, 1000, &[]));
    t.recv_nothing();
    // SRTT / 2 = 25 ms, where the RTO is 250 ms.
    t.advance(ms(24));
    t.recv_nothing();
    t.advance(ms(2));
    t.recv(&segs(&t, &data, 1000, 2000));
    assert_eq!(t.shard.counters().sack_reneging, 1);
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.timeouts, flow.cwnd), (1, 1000));
    // Slow start: two segments for the next ACK.
    t.advance(RTT);
    t.send(ack(&t, 2000, &[]));
    t.recv(&segs(&t, &data, 2000, 4000));
    t.advance(RTT);
    t.send(ack(&t, 4000, &[]));
    t.recv_nothing();
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.retransmits, flow.timeouts), (4, 1));
}

// ---------------------------------------------------------------------------
// NewReno without SACK (RFC 6582)
// ---------------------------------------------------------------------------

/// RFC 5681 §3.2 and RFC 6582: the third duplicate ACK resends the first
/// segment and sets cwnd = ssthresh + 3·SMSS; every further duplicate
/// inflates cwnd by one SMSS, so new data goes out once cwnd exceeds what is
/// in flight. The ACK that reaches `recover` (SND.NXT when recovery began)
/// ends recovery: the inflation is gone and a duplicate no longer adds to it.
#[test]
fn newreno_inflates_on_further_duplicates_and_ends_at_recover() {
    let mut c = config();
    c.tcp.congestion = Algorithm::Reno;
    let mut t = connected(c);
    let data = payload(12_000);
    queue(&mut t, &data);
    t.recv(&segs(&t, &data, 0, 10_000));
    t.advance(RTT);
    for _ in 0..2 {
        t.send(ack(&t, 0, &[]));
        t.recv_nothing();
    }
    t.send(ack(&t, 0, &[]));
    t.recv(&segs(&t, &data, 0, 1000));
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.cwnd, flow.ssthresh), (8000, 5000));
    // Ten segments are in flight: the fourth and fifth duplicates bring
    // cwnd up to them, the sixth and seventh past them.
    for _ in 0..2 {
        t.send(ack(&t, 0, &[]));
        t.recv_nothing();
    }
    t.send(ack(&t, 0, &[]));
    t.recv(&segs(&t, &data, 10_000, 11_000));
    t.send(ack(&t, 0, &[]));
    t.recv(&segs(&t, &data, 11_000, 12_000));
    assert_eq!(t.shard.flow(t.h()).unwrap().cwnd, 12_000);
    // The retransmission arrived: everything up to `recover` is acknowledged.
    t.advance(RTT);
    t.send(ack(&t, 10_000, &[]));
    t.recv_nothing();
    // RFC 6582 §3.2 step 3: min(ssthresh, FlightSize + SMSS) = 3000; this
    // ACK then counts in slow start (cwnd < ssthresh): one SMSS more.
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.cwnd, flow.ssthresh), (4000, 5000));
    t.send(ack(&t, 10_000, &[]));
    t.recv_nothing();
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.cwnd, flow.retransmits, flow.timeouts), (4000, 1, 0));
    assert_eq!(t.shard.counters().fast_recoveries, 1);
}

/// RFC 6582 §3.2 step 3: a partial ACK resends the first unacknowledged
/// segment, and only that. Without SACK the sender cannot know whether the
/// data above that hole arrived (RACK needs SACK, RFC 8985 §4), so it must
/// not be declared lost wholesale.
#[test]
fn without_sack_a_partial_ack_resends_only_the_next_hole() {
    let mut c = config();
    c.tcp.congestion = Algorithm::Reno;
    let mut t = connected(c);
    let data = payload(10_000);
    queue(&mut t, &data);
    t.recv(&segs(&t, &data, 0, 10_000));
    // The first and third segments are lost: eight duplicate ACKs.
    t.advance(RTT);
    for _ in 0..2 {
        t.send(ack(&t, 0, &[]));
    }
    t.send(ack(&t, 0, &[]));
    t.recv(&segs(&t, &data, 0, 1000));
    for _ in 0..5 {
        t.send(ack(&t, 0, &[]));
        t.recv_nothing();
    }
    t.advance(RTT);
    t.send(ack(&t, 2000, &[]));
    t.recv(&segs(&t, &data, 2000, 3000));
    t.advance(RTT);
    t.send(ack(&t, 10_000, &[]));
    t.recv_nothing();
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.retransmits, flow.timeouts), (2, 0));
}

/// A peer may drop a FIN that arrives out of order (RFC 9293 §3.10.7.4
/// processes it in sequence only) and keep just the data, SACKing it. Once
/// the hole below is repaired its ACK covers the data but not the FIN: the
/// FIN is still outstanding and must go again when the timer says so, or
/// the connection waits in LAST-ACK for ever while the peer waits for the
/// end of the stream.
#[test]
fn a_fin_the_peer_dropped_out_of_order_goes_again() {
    let mut t = connected(cfg(Algorithm::Cubic));
    let data = payload(5000);
    queue(&mut t, &data);
    t.shard.close(t.h());
    let sent = t.segments();
    assert_eq!(sent.len(), 5);
    assert!(sent[4].fin && sent[4].seq == first(&t).wrapping_add(4000), "the FIN rides the last segment");
    t.advance(RTT);
    // The second segment is lost; the peer SACKs the data above it but not
    // the FIN that came with the last.
    t.send(ack(&t, 1000, &[(2000, 3000)]));
    t.send(ack(&t, 1000, &[(2000, 4000)]));
    t.send(ack(&t, 1000, &[(2000, 5000)]));
    // (The last record, its FIN unSACKed, does not count towards DupThresh:
    // RACK or the timer finds the hole.)
    let mut repair = t.segments();
    while repair.is_empty() {
        t.advance(ms(10));
        repair = t.segments();
    }
    assert_eq!(repair[0], segs(&t, &data, 1000, 2000)[0], "{repair:?}");
    t.advance(RTT);
    // The hole repaired: every data byte acknowledged, the FIN not.
    t.send(ack(&t, 5000, &[]));
    let fin_at = first(&t).wrapping_add(5000);
    let mut resent = t.segments();
    for _ in 0..40 {
        if resent.iter().any(|s| s.fin) {
            break;
        }
        t.advance(ms(100));
        resent.extend(t.segments());
    }
    let fins: Vec<_> = resent.iter().filter(|s| s.fin).collect();
    assert!(!fins.is_empty(), "no FIN within 4 s of the ACK: {resent:?}");
    assert!(fins.iter().all(|s| s.seq == fin_at && s.payload.is_empty()), "{fins:?}");
    // Once it is acknowledged nothing more goes (FIN-WAIT-2 waits for the
    // peer's FIN).
    t.send(ack(&t, 5001, &[]));
    t.advance(Duration::from_secs(5));
    assert_eq!(t.segments(), vec![]);
}

// ---------------------------------------------------------------------------
// The pure ACKs of one receive batch (TcpConfig::coalesce_acks)
// ---------------------------------------------------------------------------

/// A connection with a first flight of ten segments out of `len` bytes
/// queued, one RTT later: the peer's ACKs are due.
fn flight_out(config: Config, len: usize) -> (T, Vec<u8>) {
    let mut t = connected(config);
    let data = payload(len);
    queue(&mut t, &data);
    t.recv(&segs(&t, &data, 0, 10_000));
    t.advance(RTT);
    (t, data)
}

/// What a flight's first three ACKs leave: cwnd, bytes acknowledged, the
/// segments sent after them and how many ACKs the shard coalesced; fed as
/// one receive batch or one by one.
fn after_three_acks(config: Config, batched: bool) -> (u32, u64, Vec<Seg>, u64) {
    let (mut t, _) = flight_out(config, 16_000);
    let acks = [ack(&t, 1000, &[]), ack(&t, 2000, &[]), ack(&t, 3000, &[])];
    if batched {
        t.send_batch(acks);
    } else {
        for a in acks {
            t.send(a);
        }
    }
    let flow = t.shard.flow(t.h()).unwrap();
    (flow.cwnd, flow.bytes_acked, t.segments(), t.shard.counters().acks_coalesced)
}

/// Three ACKs of one flight in one batch: the last stands for all three,
/// and leaves the connection where three separate ones would have: the same
/// bytes acknowledged, slow start's one MSS per ACK, the same next segments.
#[test]
fn the_pure_acks_of_one_batch_are_processed_as_one_with_the_same_result() {
    let (cwnd, acked, sent, coalesced) = after_three_acks(cfg(Algorithm::Cubic), true);
    assert_eq!(coalesced, 2, "the first two were superseded");
    assert_eq!((cwnd, acked), (IW + 3 * PEER_MSS as u32, 3000));
    let separately = after_three_acks(cfg(Algorithm::Cubic), false);
    assert_eq!(separately, (cwnd, acked, sent.clone(), 0));
    assert_eq!(sent.len(), 6, "three segments' room freed, three more of cwnd's growth");
    // Reno's slow start too.
    let (reno, _, _, _) = after_three_acks(cfg(Algorithm::Reno), true);
    assert_eq!(reno, IW + 3 * PEER_MSS as u32);
    // Off: each ACK on its own, to the same end.
    let mut off = cfg(Algorithm::Cubic);
    off.tcp.coalesce_acks = false;
    assert_eq!(after_three_acks(off, true), (cwnd, acked, sent, 0));
}

/// Duplicate ACKs are never merged: three in one batch still make the
/// third one's fast retransmit (RFC 5681 §3.2), without SACK.
#[test]
fn three_duplicate_acks_in_one_batch_still_retransmit() {
    let mut c = config();
    c.tcp.congestion = Algorithm::Reno;
    let (mut t, data) = flight_out(c, 12_000);
    t.send_batch([ack(&t, 0, &[]), ack(&t, 0, &[]), ack(&t, 0, &[])]);
    t.recv(&segs(&t, &data, 0, 1000));
    assert_eq!(t.shard.counters().acks_coalesced, 0);
}

/// ACKs with SACK blocks are never merged: each one's blocks reach the
/// scoreboard, and the third SACKed segment marks the first lost (RFC
/// 6675's DupThresh) as it would one ACK at a time.
#[test]
fn sack_blocks_of_one_batch_all_reach_the_scoreboard() {
    let (mut t, data) = flight_out(cfg(Algorithm::Cubic), 12_000);
    t.send_batch([ack(&t, 0, &[(1000, 2000)]), ack(&t, 0, &[(1000, 3000)]), ack(&t, 0, &[(1000, 4000)])]);
    let sent = t.segments();
    assert_eq!(sent.first(), segs(&t, &data, 0, 1000).first(), "the first segment resent: {sent:?}");
    assert_eq!(t.shard.counters().acks_coalesced, 0);
}

/// A segment with data after a held ACK of the same connection: the ACK
/// goes first, then the segment, as they came.
#[test]
fn a_segment_with_data_releases_the_held_ack_first() {
    let (mut t, _) = flight_out(cfg(Algorithm::Cubic), 12_000);
    t.send_batch([ack(&t, 1000, &[]), ack(&t, 2000, &[]).data(b"hello")]);
    assert_eq!(t.shard.counters().acks_coalesced, 0);
    assert_eq!(t.shard.flow(t.h()).unwrap().bytes_acked, 2000);
    assert_eq!(t.read_all(), b"hello");
}
