//! Path memory (RFC 9040 §5) and careful resume (RFC 9959): what a
//! connection leaves in the path cache, and how the next one to the same
//! path starts. A small peer below acknowledges our data one RTT after it
//! was sent (SACK for what arrives out of order) and may lose segments.

use std::collections::VecDeque;

use super::harness::*;
use crate::config::{Config, FastStart};
use crate::tcp::connection::fast_start::Phase;
use crate::time::{Duration, Instant};

/// The shift the peer's SYN offers: windows of up to 8 MB.
const PEER_WSCALE: u8 = 7;
/// What the application downloads unless a test says otherwise.
const BIG: usize = 1_000_000;

fn config(mode: FastStart) -> Config {
    let mut c = super::harness::config();
    c.tcp.window_scaling = true;
    c.tcp.sack = true;
    c.tcp.tx_buffer = 2 << 20;
    c.tcp.fast_start = mode;
    c
}

/// The peer: a receiver at the far end of a path of `rtt` (all of it on
/// the way out; its ACKs arrive at once).
struct Peer {
    rtt: Duration,
    port: u16,
    /// Our segments on their way, with when they left.
    wire: VecDeque<(Instant, u32, u32)>,
    rcv_nxt: u32,
    /// Received beyond a gap.
    ooo: Vec<(u32, u32)>,
    /// Data segments we sent, with when (the test's clock, 1 ms steps).
    sent: Vec<(Instant, u32)>,
}

impl Peer {
    /// Opens a connection from `port` to the listener: SYN, SYN-ACK one RTT
    /// later acknowledged.
    fn connect(t: &mut T, port: u16, rtt: Duration) -> Peer {
        t.send(t.seg_in().src_port(port).seq(IRS).no_ack().syn().mss(PEER_MSS).window(65535).wscale(PEER_WSCALE).sack_permitted());
        t.iss = t.expected_iss(port);
        let synacks = t.segments().into_iter().filter(|s| s.dst_port == port && s.syn).count();
        assert_eq!(synacks, 1);
        t.advance(rtt);
        t.send(t.seg_in().src_port(port).window(u16::MAX));
        t.events();
        t.handle = t.shard.accept(t.listener.unwrap());
        assert!(t.handle.is_some());
        Peer { rtt, port, wire: VecDeque::new(), rcv_nxt: t.iss.wrapping_add(1), ooo: Vec::new(), sent: Vec::new() }
    }

    /// Runs the path for `span` in 1 ms steps: the application keeps the
    /// send buffer full until `total` bytes are written; segments that
    /// `lose` picks vanish.
    fn run(&mut self, t: &mut T, total: usize, written: &mut usize, span: Duration, lose: &mut dyn FnMut(u32) -> bool) {
        let until = t.now + span;
        let chunk = vec![7u8; 64 * 1024];
        while t.now < until {
            while *written < total {
                match t.shard.send(t.h(), &chunk[..(total - *written).min(chunk.len())]) {
                    Ok(n) if n > 0 => *written += n,
                    _ => break,
                }
            }
            for seg in t.segments() {
                if seg.dst_port != self.port || seg.payload.is_empty() {
                    continue;
                }
                let end = seg.seq.wrapping_add(seg.payload.len() as u32);
                self.sent.push((t.now, seg.seq));
                if !lose(seg.seq) {
                    self.wire.push_back((t.now, seg.seq, end));
                }
            }
            // An ACK for every segment that arrived.
            while self.wire.front().is_some_and(|&(at, _, _)| at + self.rtt <= t.now) {
                let (_, start, end) = self.wire.pop_front().unwrap();
                self.receive(start, end);
                let ack = self.ack(t);
                t.send(ack);
            }
            t.advance(Duration::from_millis(1));
        }
    }

    fn receive(&mut self, start: u32, end: u32) {
        if start == self.rcv_nxt {
            self.rcv_nxt = end;
            // Fill from what waited.
            while let Some(i) = self.ooo.iter().position(|&(s, _)| s == self.rcv_nxt) {
                self.rcv_nxt = self.ooo.remove(i).1;
            }
        } else if start.wrapping_sub(self.rcv_nxt) < 1 << 30 {
            self.ooo.push((start, end));
        }
        self.ooo.retain(|&(s, _)| s.wrapping_sub(self.rcv_nxt) < 1 << 30);
    }

    fn ack(&self, t: &T) -> Seg {
        // SACK blocks: runs of out-of-order segments, latest first.
        let mut blocks: Vec<(u32, u32)> = Vec::new();
        let mut ooo = self.ooo.clone();
        ooo.sort_by_key(|&(s, _)| s.wrapping_sub(self.rcv_nxt));
        for (s, e) in ooo {
            match blocks.last_mut() {
                Some(last) if last.1 == s => last.1 = e,
                _ => blocks.push((s, e)),
            }
        }
        blocks.reverse();
        blocks.truncate(4);
        t.seg_in().src_port(self.port).ack(self.rcv_nxt).window(u16::MAX).sack(&blocks)
    }

    /// The peer closes after its download: its FIN; ours, acknowledged.
    fn finish(&self, t: &mut T) {
        t.send(t.seg_in().src_port(self.port).ack(self.rcv_nxt).window(u16::MAX).fin());
        t.shard.close(t.h());
        t.segments();
        t.advance(self.rtt);
        t.send(t.seg_in().src_port(self.port).seq(IRS + 2).ack(self.rcv_nxt.wrapping_add(1)).window(u16::MAX));
        t.segments();
    }

    /// Data segments sent in `[from, to)`.
    fn sent_between(&self, from: Instant, to: Instant) -> usize {
        self.sent.iter().filter(|&&(at, _)| at >= from && at < to).count()
    }
}

/// A whole download of `total` bytes over `rtt` from `port`, then the
/// peer's close: the path is remembered.
fn download(t: &mut T, port: u16, rtt: Duration, total: usize, lose: &mut dyn FnMut(u32) -> bool) -> Peer {
    let mut peer = Peer::connect(t, port, rtt);
    let mut written = 0;
    for _ in 0..200 {
        peer.run(t, total, &mut written, rtt, lose);
        let flow = t.shard.flow(t.h()).unwrap();
        if written == total && flow.bytes_acked == total as u64 {
            break;
        }
    }
    assert_eq!(t.shard.flow(t.h()).unwrap().bytes_acked, total as u64, "the download finished");
    peer.finish(t);
    peer
}

fn never(_: u32) -> bool {
    false
}

/// A shard in `mode` that has seen one 1 MB download over `rtt` from
/// REMOTE_IP (port 40000), with the first segment lost if `lossy`.
fn after_one_download(mode: FastStart, rtt: Duration, lossy: bool) -> T {
    let mut t = T::listening_with(config(mode));
    let mut first = true;
    let mut lose = |_seq: u32| {
        let lost = lossy && first;
        first = false;
        lost
    };
    download(&mut t, 40000, rtt, BIG, &mut lose);
    t
}

fn phase(t: &T) -> Phase {
    t.shard.connection_for_tests(t.h()).fast_start_phase()
}

// -------------------------------------------------------------------------
// The path cache: what is written, and by whom
// -------------------------------------------------------------------------

#[test]
fn a_download_leaves_its_path_in_the_cache_keyed_by_the_prefix() {
    let rtt = Duration::from_millis(40);
    let t = after_one_download(FastStart::PathMemory, rtt, false);
    assert_eq!(t.shard.counters().path_memory_updates, 1);
    // The path is the host (an IPv4 /32 by default): not its neighbours.
    let neighbour = core::net::IpAddr::V4(core::net::Ipv4Addr::new(10, 0, 0, 77));
    assert!(t.shard.paths().get(t.now, neighbour).is_none());
    let entry = t.shard.paths().get(t.now, core::net::IpAddr::V4(REMOTE_IP)).expect("the host is known");
    assert!(entry.record.min_rtt >= rtt && entry.record.min_rtt <= rtt + Duration::from_millis(2));
    assert!(entry.record.window >= 4 * 10 * u32::from(PEER_MSS), "{entry:?}");
    assert!(entry.record.delivery_rate > 0);
    let elsewhere = core::net::IpAddr::V4(core::net::Ipv4Addr::new(10, 0, 1, 2));
    assert!(t.shard.paths().get(t.now, elsewhere).is_none());
}

#[test]
fn off_remembers_nothing() {
    let t = after_one_download(FastStart::Off, Duration::from_millis(40), false);
    assert!(t.shard.paths().is_empty());
    assert_eq!(t.shard.counters().path_memory_updates, 0);
}

#[test]
fn only_a_connection_that_had_data_acknowledged_writes_its_path() {
    let mut t = T::listening_with(config(FastStart::CarefulResume));
    // A flood of SYNs never completed.
    for port in 1000..1100 {
        t.send(t.seg_in().src_port(port).seq(IRS).no_ack().syn().mss(PEER_MSS));
    }
    t.segments();
    // Connections that complete the handshake but carry no data of ours,
    // closed or reset.
    let peer = Peer::connect(&mut t, 41000, Duration::from_millis(10));
    peer.finish(&mut t);
    Peer::connect(&mut t, 41001, Duration::from_millis(10));
    t.send(t.seg_in().src_port(41001).rst());
    t.advance(Duration::from_secs(200));
    assert!(t.shard.paths().is_empty(), "{:?}", t.shard.paths());
    assert_eq!(t.shard.counters().path_memory_updates, 0);
}

// -------------------------------------------------------------------------
// Path memory: the RTT estimator and ssthresh
// -------------------------------------------------------------------------

#[test]
fn a_connection_to_a_known_path_starts_from_its_rtt_and_ssthresh() {
    let rtt = Duration::from_millis(40);
    let mut t = after_one_download(FastStart::PathMemory, rtt, true);
    let saved = t.shard.paths().get(t.now, REMOTE_IP.into()).unwrap().record;
    assert_ne!(saved.ssthresh, u32::MAX, "the loss left an ssthresh");
    // The next SYN-ACK's RTO already fits the path: it goes again well
    // before the 1 s of a path never seen.
    t.send(t.seg_in().src_port(40001).seq(IRS).no_ack().syn().mss(PEER_MSS).window(65535).wscale(PEER_WSCALE));
    assert_eq!(t.segments().len(), 1);
    t.advance(Duration::from_millis(500));
    let again = t.segments();
    assert!(again.len() == 1 && again[0].syn, "the SYN-ACK again within 500 ms: {again:?}");
    // The next connection, with the handshake at the path's RTT.
    let _peer = Peer::connect(&mut t, 40002, rtt);
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!(flow.ssthresh, saved.ssthresh);
    assert_eq!(flow.cwnd, 10 * u32::from(PEER_MSS), "path memory never starts above the initial window");
    let srtt = flow.srtt.unwrap();
    assert!(srtt.total_micros().abs_diff(saved.srtt.total_micros()) < 5_000, "{srtt:?} vs {:?}", saved.srtt);
    assert_eq!(t.shard.counters().path_memory_used, 1, "the handshake that completed");
}

#[test]
fn an_old_entry_is_not_used() {
    let rtt = Duration::from_millis(40);
    let mut t = after_one_download(FastStart::CarefulResume, rtt, true);
    t.advance(Duration::from_secs(601));
    let mut peer = Peer::connect(&mut t, 40001, rtt);
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!(flow.ssthresh, u32::MAX);
    let mut written = 0;
    peer.run(&mut t, BIG, &mut written, Duration::from_millis(5), &mut never);
    assert_eq!(t.shard.counters().fast_start_jumps, 0);
    assert_eq!(t.shard.counters().path_memory_used, 0);
}

// -------------------------------------------------------------------------
// Careful resume
// -------------------------------------------------------------------------

#[test]
fn careful_resume_jumps_to_half_the_saved_window_paced_over_one_rtt_then_validates() {
    let rtt = Duration::from_millis(50);
    let mut t = after_one_download(FastStart::CarefulResume, rtt, false);
    let saved = t.shard.paths().get(t.now, REMOTE_IP.into()).unwrap().record;
    let mut peer = Peer::connect(&mut t, 40001, rtt);
    assert_eq!(phase(&t), Phase::Reconnaissance);
    let start = t.now;
    let mut written = 0;
    peer.run(&mut t, BIG, &mut written, Duration::from_millis(1), &mut never);
    assert_eq!(phase(&t), Phase::Unvalidated);
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!(flow.cwnd, saved.window / 2, "jump_cwnd = saved_cwnd / 2");
    assert_eq!(t.shard.counters().fast_start_jumps, 1);
    // Paced over one RTT: a fifth of the jump in the first fifth of it.
    let jump_segments = (saved.window / 2).div_ceil(u32::from(PEER_MSS)) as usize;
    peer.run(&mut t, BIG, &mut written, rtt - Duration::from_millis(1), &mut never);
    let early = peer.sent_between(start, start + Duration::from_micros(rtt.total_micros() / 5));
    assert!(early <= jump_segments / 5 + 2, "{early} of {jump_segments} in the first fifth of the RTT");
    let whole = peer.sent_between(start, start + rtt);
    assert!(whole + 2 >= jump_segments, "{whole} of {jump_segments} within the RTT");
    // Validating, then normal once the unvalidated data is acknowledged.
    peer.run(&mut t, BIG, &mut written, rtt, &mut never);
    assert_ne!(phase(&t), Phase::Unvalidated);
    peer.run(&mut t, BIG, &mut written, rtt * 2, &mut never);
    assert_eq!(phase(&t), Phase::Normal);
    assert_eq!(t.shard.counters().fast_start_retreats, 0);
    // One connection at a time: another one now does not jump.
    let mut other = Peer::connect(&mut t, 40002, rtt);
    let mut w = 0;
    other.run(&mut t, BIG, &mut w, Duration::from_millis(2), &mut never);
    assert_eq!(t.shard.counters().fast_start_jumps, 1);
}

#[test]
fn the_jump_is_bounded_by_the_flows_fair_share() {
    let rtt = Duration::from_millis(50);
    let mut t = after_one_download(FastStart::CarefulResume, rtt, false);
    // 1 MB/s of payload: 50 kB in an RTT, below half the saved window.
    t.shard.set_fast_start_share(Some(1_000_000), 0);
    let mut peer = Peer::connect(&mut t, 40001, rtt);
    let mut written = 0;
    peer.run(&mut t, BIG, &mut written, Duration::from_millis(1), &mut never);
    let flow = t.shard.flow(t.h()).unwrap();
    let srtt = flow.srtt.unwrap().total_micros();
    assert_eq!(u64::from(flow.cwnd), 1_000_000 * srtt / 1_000_000);
    assert_eq!(phase(&t), Phase::Unvalidated);
}

#[test]
fn a_loss_in_the_unvalidated_phase_retreats_to_half_the_pipe_and_forgets_the_path() {
    let rtt = Duration::from_millis(50);
    let mut t = after_one_download(FastStart::CarefulResume, rtt, false);
    let mut peer = Peer::connect(&mut t, 40001, rtt);
    let mut written = 0;
    // The fifth segment of the jump is lost.
    let mut n = 0;
    let mut lose = |_seq: u32| {
        n += 1;
        n == 5
    };
    peer.run(&mut t, BIG, &mut written, rtt + Duration::from_millis(10), &mut lose);
    assert_eq!(t.shard.counters().fast_start_retreats, 1);
    assert_eq!(phase(&t), Phase::SafeRetreat);
    let flow = t.shard.flow(t.h()).unwrap();
    // cwnd is half of what had been acknowledged when the loss showed (a
    // handful of segments), far below the jump, and it does not grow.
    let retreat_cwnd = flow.cwnd;
    assert!(retreat_cwnd <= 4 * u32::from(PEER_MSS), "{retreat_cwnd}");
    assert_eq!(flow.ssthresh, retreat_cwnd);
    assert!(t.shard.paths().get(t.now, REMOTE_IP.into()).is_none(), "the saved parameters are deleted");
    // Once the jump's data is all acknowledged: normal CC, ssthresh ≤ PipeSize / 2.
    for _ in 0..20 {
        peer.run(&mut t, BIG, &mut written, rtt, &mut never);
        if phase(&t) == Phase::Normal {
            break;
        }
        assert!(t.shard.flow(t.h()).unwrap().cwnd <= retreat_cwnd, "no growth in Safe Retreat");
    }
    assert_eq!(phase(&t), Phase::Normal);
}

#[test]
fn no_jump_when_the_handshake_rtt_disagrees_with_the_saved_one() {
    for (rtt_now, why) in
        [(20, "at most half the saved RTT"), (600, "over ten times it"), (70, "a standing queue: over a quarter above it")]
    {
        let mut t = after_one_download(FastStart::CarefulResume, Duration::from_millis(50), false);
        let mut peer = Peer::connect(&mut t, 40001, Duration::from_millis(rtt_now));
        let mut written = 0;
        peer.run(&mut t, BIG, &mut written, Duration::from_millis(2), &mut never);
        assert_eq!(t.shard.counters().fast_start_jumps, 0, "{why}");
        assert_eq!(phase(&t), Phase::Normal);
        assert_eq!(t.shard.flow(t.h()).unwrap().cwnd, 10 * u32::from(PEER_MSS));
    }
}

#[test]
fn an_rtt_far_above_the_saved_one_during_the_jump_retreats() {
    let mut t = after_one_download(FastStart::CarefulResume, Duration::from_millis(10), false);
    let mut peer = Peer::connect(&mut t, 40001, Duration::from_millis(10));
    let mut written = 0;
    peer.run(&mut t, BIG, &mut written, Duration::from_millis(1), &mut never);
    assert_eq!(phase(&t), Phase::Unvalidated);
    // The path changed: the data's round trip is now 150 ms, over ten
    // times the saved one (and inside the RTO, which the handshake's
    // 10 ms put at 210 ms).
    peer.rtt = Duration::from_millis(150);
    peer.run(&mut t, BIG, &mut written, Duration::from_millis(160), &mut never);
    assert_eq!(t.shard.counters().fast_start_retreats, 1);
    assert_eq!(t.shard.counters().timeouts, 0);
    assert!(t.shard.paths().get(t.now, REMOTE_IP.into()).is_none());
}

// -------------------------------------------------------------------------
// A first connection under a fairness policy: the share as saved state
// -------------------------------------------------------------------------

/// A shard in careful-resume mode that has seen no connection, whose
/// fairness policy gives a newcomer `share` bytes per second (`None`: no
/// policy).
fn fresh_with_share(share: Option<u64>) -> T {
    let mut t = T::listening_with(config(FastStart::CarefulResume));
    t.shard.set_fast_start_share(share, 0);
    t
}

#[test]
fn a_first_connection_jumps_to_its_fair_share_paced_over_one_rtt_and_validates_it() {
    let rtt = Duration::from_millis(50);
    // 1 MB/s of payload: 50 kB in an RTT, 35 segments against IW's 10.
    let mut t = fresh_with_share(Some(1_000_000));
    let mut peer = Peer::connect(&mut t, 40001, rtt);
    assert!(t.shard.paths().get(t.now, REMOTE_IP.into()).is_none(), "no saved path");
    let start = t.now;
    let mut written = 0;
    peer.run(&mut t, BIG, &mut written, Duration::from_millis(1), &mut never);
    let flow = t.shard.flow(t.h()).unwrap();
    let srtt = flow.srtt.unwrap().total_micros();
    assert_eq!(u64::from(flow.cwnd), 1_000_000 * srtt / 1_000_000);
    assert_eq!((phase(&t), t.shard.counters().fast_start_jumps), (Phase::Unvalidated, 1));
    // Paced: a fifth of the jump in the first fifth of the RTT, all of it
    // within the RTT.
    let jump_segments = flow.cwnd.div_ceil(u32::from(PEER_MSS)) as usize;
    peer.run(&mut t, BIG, &mut written, rtt - Duration::from_millis(1), &mut never);
    let early = peer.sent_between(start, start + Duration::from_micros(rtt.total_micros() / 5));
    assert!(early <= jump_segments / 5 + 2, "{early} of {jump_segments} in the first fifth of the RTT");
    assert!(peer.sent_between(start, start + rtt) + 2 >= jump_segments);
    // Validated: normal congestion control, no retreat.
    peer.run(&mut t, BIG, &mut written, rtt * 3, &mut never);
    assert_eq!(phase(&t), Phase::Normal);
    assert_eq!(t.shard.counters().fast_start_retreats, 0);
}

/// Flows that join together share the room: each jump counts as one more
/// flow until the policy next says how many there are, so a second
/// newcomer jumps to a third of the capacity, not to the half the first took.
#[test]
fn newcomers_that_join_together_share_the_room() {
    let rtt = Duration::from_millis(50);
    // 2 MB/s of payload among one active flow: a newcomer's share is 1 MB/s.
    let mut t = T::listening_with(config(FastStart::CarefulResume));
    t.shard.set_fast_start_share(Some(2_000_000), 1);
    let mut first = Peer::connect(&mut t, 40001, rtt);
    let mut written = 0;
    first.run(&mut t, BIG, &mut written, Duration::from_millis(1), &mut never);
    let a = t.shard.flow(t.h()).unwrap();
    assert_eq!(u64::from(a.cwnd), 1_000_000 * a.srtt.unwrap().total_micros() / 1_000_000);
    let mut second = Peer::connect(&mut t, 40002, rtt);
    let mut written = 0;
    second.run(&mut t, BIG, &mut written, Duration::from_millis(1), &mut never);
    let b = t.shard.flow(t.h()).unwrap();
    assert_eq!(u64::from(b.cwnd), 2_000_000 / 3 * b.srtt.unwrap().total_micros() / 1_000_000);
    assert_eq!(t.shard.counters().fast_start_jumps, 2);
    // The policy's next word starts the count again.
    t.shard.set_fast_start_share(Some(2_000_000), 3);
    assert_eq!(t.shard.fast_start_share(), Some(500_000));
}

#[test]
fn without_a_share_or_when_the_share_is_under_the_initial_window_a_first_connection_starts_at_iw() {
    let iw = 10 * u32::from(PEER_MSS);
    // No policy: nothing stands for the missing path.
    let mut t = fresh_with_share(None);
    let mut peer = Peer::connect(&mut t, 40001, Duration::from_millis(50));
    let mut written = 0;
    peer.run(&mut t, BIG, &mut written, Duration::from_millis(1), &mut never);
    assert_eq!((t.shard.flow(t.h()).unwrap().cwnd, phase(&t)), (iw, Phase::Normal));
    // A short path: 1 MB/s for 5 ms is 5 kB, less than IW.
    let mut t = fresh_with_share(Some(1_000_000));
    let mut peer = Peer::connect(&mut t, 40001, Duration::from_millis(5));
    let mut written = 0;
    peer.run(&mut t, BIG, &mut written, Duration::from_millis(1), &mut never);
    assert_eq!((t.shard.flow(t.h()).unwrap().cwnd, phase(&t)), (iw, Phase::Normal));
    assert_eq!(t.shard.counters().fast_start_jumps, 0);
    // Path memory alone never jumps.
    let mut t = T::listening_with(config(FastStart::PathMemory));
    t.shard.set_fast_start_share(Some(1_000_000), 0);
    let mut peer = Peer::connect(&mut t, 40001, Duration::from_millis(50));
    let mut written = 0;
    peer.run(&mut t, BIG, &mut written, Duration::from_millis(1), &mut never);
    assert_eq!(t.shard.flow(t.h()).unwrap().cwnd, iw);
}

#[test]
fn a_loss_in_a_jump_to_the_share_retreats() {
    let rtt = Duration::from_millis(50);
    let mut t = fresh_with_share(Some(1_000_000));
    let mut peer = Peer::connect(&mut t, 40001, rtt);
    let mut written = 0;
    let mut n = 0;
    let mut lose = |_seq: u32| {
        n += 1;
        n == 12 // within the jump, beyond the initial window
    };
    // Paced, the twelfth segment leaves about a third of an RTT in; the
    // peer's SACKs of those after it show the loss an RTT later.
    peer.run(&mut t, BIG, &mut written, rtt * 2, &mut lose);
    assert_eq!(t.shard.counters().fast_start_retreats, 1);
    assert_eq!(phase(&t), Phase::SafeRetreat);
    // Half of what was delivered when the loss showed: a few segments, a
    // fraction of the 50 kB jump, and ssthresh with it.
    let flow = t.shard.flow(t.h()).unwrap();
    assert!(flow.cwnd <= 8 * u32::from(PEER_MSS) && flow.cwnd < 50_000 / 5, "{}", flow.cwnd);
    assert_eq!(flow.ssthresh, flow.cwnd);
}

#[test]
fn a_handshake_that_needed_a_retransmission_does_not_jump_to_the_share() {
    let rtt = Duration::from_millis(50);
    let mut t = fresh_with_share(Some(1_000_000));
    // The SYN-ACK is lost once: its retransmission is what the peer acknowledges.
    let port = 40001;
    t.send(t.seg_in().src_port(port).seq(IRS).no_ack().syn().mss(PEER_MSS).window(65535).wscale(PEER_WSCALE).sack_permitted());
    t.iss = t.expected_iss(port);
    let _ = t.segments();
    t.advance(Duration::from_secs(1) + Duration::from_millis(10));
    let again = t.segments().into_iter().filter(|s| s.dst_port == port && s.syn).count();
    assert_eq!(again, 1, "the SYN-ACK went again");
    t.advance(rtt);
    t.send(t.seg_in().src_port(port).window(u16::MAX));
    t.events();
    t.handle = t.shard.accept(t.listener.unwrap());
    let mut peer = Peer { rtt, port, wire: VecDeque::new(), rcv_nxt: t.iss.wrapping_add(1), ooo: Vec::new(), sent: Vec::new() };
    let mut written = 0;
    peer.run(&mut t, BIG, &mut written, Duration::from_millis(1), &mut never);
    assert_eq!(t.shard.counters().fast_start_jumps, 0);
    assert_eq!(t.shard.flow(t.h()).unwrap().cwnd, 10 * u32::from(PEER_MSS));
}

// -------------------------------------------------------------------------
// A larger initial window
// -------------------------------------------------------------------------

#[test]
fn a_larger_initial_window_is_paced_over_the_handshake_rtt() {
    let rtt = Duration::from_millis(20);
    let mut c = config(FastStart::Off);
    c.tcp.initial_window = 32;
    let mut t = T::listening_with(c);
    let mut peer = Peer::connect(&mut t, 40000, rtt);
    assert_eq!(t.shard.flow(t.h()).unwrap().cwnd, 32 * u32::from(PEER_MSS));
    let start = t.now;
    let mut written = 0;
    peer.run(&mut t, BIG, &mut written, rtt, &mut never);
    let early = peer.sent_between(start, start + Duration::from_micros(rtt.total_micros() / 4));
    assert!((6..=10).contains(&early), "{early} of 32 in the first quarter of the RTT");
    assert!(peer.sent_between(start, start + rtt) >= 30);
    // The default stays RFC 6928's.
    let mut t = T::listening_with(config(FastStart::Off));
    Peer::connect(&mut t, 40000, rtt);
    assert_eq!(t.shard.flow(t.h()).unwrap().cwnd, 10 * u32::from(PEER_MSS));
}
