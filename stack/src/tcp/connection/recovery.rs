//! Loss detection and recovery on the sent queue.
//!
//! Read first: RFC 6675 (SACK-based recovery: the scoreboard, IsLost,
//! pipe), RFC 8985 (RACK-TLP: time-based loss detection and tail-loss
//! probes), RFC 6582 (NewReno, for peers without SACK), RFC 2883 and RFC 3522
//! (detecting that a retransmission was not needed, to undo the window cut).
//!
//! Every ACK goes through [`Connection::on_ack_delivery`]: the cumulative ACK
//! and SACK blocks mark records delivered, the most recently sent delivered
//! record drives RACK and gives an RTT sample, then loss detection marks
//! records lost and the sender retransmits them as `pipe` allows.

use super::*;
use crate::tcp::sent_queue::Delivered;

/// RFC 6675's DupThresh.
const DUP_THRESH: u32 = 3;
/// The most RACK's reordering window may grow (in quarters of min-RTT).
const MAX_REO_WND_MULT: u8 = 16;
/// Loss recoveries without a D-SACK after which the reordering window
/// shrinks back (RFC 8985 §6.2 step 4).
const REO_WND_RESET_RECOVERIES: u8 = 16;
/// Worst-case delayed-ACK time a TLP allows for when one segment is in
/// flight (RFC 8985 §7.2).
const WC_DEL_ACK: Duration = Duration::from_millis(200);
/// The shortest probe timeout, as Linux.
const MIN_PTO: Duration = Duration::from_millis(10);
/// The shortest wait before treating suspected reneging as a timeout.
const MIN_RENEGING_WAIT: Duration = Duration::from_millis(10);

/// What one ACK delivered, summed over its cumulative part and SACK blocks.
#[derive(Clone, Copy, Debug, Default)]
pub(super) struct AckEffect {
    /// Bytes newly delivered.
    pub delivered: u32,
    /// An RTT sample this ACK gave.
    pub rtt: Option<Duration>,
}

fn merge(into: &mut Delivered, more: Delivered) {
    // "Newest": sent later, ties broken by the higher end (RFC 8985 §6.2).
    let newer = |a: (Instant, SeqNumber, bool), b: (Instant, SeqNumber, bool)| b.0 > a.0 || (b.0 == a.0 && b.1.gt(a.1));
    into.bytes += more.bytes;
    into.newest = match (into.newest, more.newest) {
        (Some(a), Some(b)) => Some(if newer(a, b) { b } else { a }),
        (None, b) => b,
        (a, None) => a,
    };
}

impl Connection {
    /// Bytes in flight (RFC 6675 pipe): sent, and neither delivered nor lost.
    pub(super) fn pipe(&self) -> u32 {
        self.sentq.pipe()
    }

    /// Processes what an ACK says about our data beyond the cumulative
    /// acknowledgment (already applied to the send ring by the caller, which
    /// passes the sent queue's `cumulative` result): SACK blocks, RACK,
    /// loss detection, recovery, undo.
    pub(super) fn on_ack_delivery(
        &mut self,
        now: Instant,
        seg: &Segment<'_>,
        cumulative: Delivered,
        env: &mut Env,
    ) -> AckEffect {
        let mut delivered = cumulative;
        if self.has(flag::SACK) {
            self.process_sack_blocks(now, seg, &mut delivered);
        }
        let rtt = self.rack_update(now, seg, &delivered, env);
        if self.has(flag::RTO_UNDO) && cumulative.bytes > 0 {
            self.check_spurious_timeout(now, seg);
        }
        self.detect_losses(now, env);
        AckEffect { delivered: delivered.bytes, rtt }
    }

    /// RFC 2018 / RFC 6675: mark SACKed records; RFC 2883: spot D-SACKs.
    fn process_sack_blocks(&mut self, now: Instant, seg: &Segment<'_>, delivered: &mut Delivered) {
        let blocks = seg.sack;
        for (i, block) in blocks.iter().enumerate() {
            let Some((start, end)) = *block else { continue };
            if !start.lt(end) {
                continue;
            }
            // RFC 2883 §4: the first block reports a duplicate when it lies
            // below this segment's cumulative ACK or inside the second block.
            // Not below SND.UNA: an ACK the network delayed carries SACK
            // blocks a later ACK has since covered, and they are no duplicates.
            let inside_second = blocks.get(1).copied().flatten().is_some_and(|(s, e)| s.le(start) && end.le(e));
            let below_ack = seg.ack.is_some_and(|ack| end.le(ack));
            if i == 0 && (below_ack || inside_second) {
                self.on_dsack(now);
                continue;
            }
            // RFC 6675 §5.1 / RFC 5961 spirit: nothing beyond what we sent.
            if end.gt(self.snd_max) {
                continue;
            }
            merge(delivered, self.sentq.on_sack(start, end));
        }
    }

    /// A D-SACK arrived: some segment reached the peer twice, so the
    /// network reorders or our retransmission was unnecessary.
    fn on_dsack(&mut self, now: Instant) {
        // RFC 8985 §6.2 step 4: widen the reordering window.
        self.reo_wnd_mult = (self.reo_wnd_mult + 1).min(MAX_REO_WND_MULT);
        self.recoveries_since_dsack = 0;
        self.set(flag::REORDERING_SEEN);
        // Undo (as Linux's tcp_try_undo_dsack): once every retransmission
        // of the episode is reported as a duplicate, the cut was spurious.
        if self.has(flag::UNDO_ARMED) && self.undo_retrans > 0 {
            self.undo_retrans -= 1;
            if self.undo_retrans == 0 {
                self.clear(flag::UNDO_ARMED | flag::RECOVERY);
                self.cc.on_spurious_congestion(now);
                self.spurious += 1;
            }
        }
    }

    /// RFC 3522 (Eifel) with timestamps: if the first ACK after a timeout
    /// echoes a timestamp older than our retransmission's, the original
    /// arrived and the timeout was spurious.
    fn check_spurious_timeout(&mut self, now: Instant, seg: &Segment<'_>) {
        self.clear(flag::RTO_UNDO);
        if let Some((_, tsecr)) = seg.timestamp
            && self.has(flag::TIMESTAMPS)
            && tsecr != 0
            && (tsecr.wrapping_sub(self.rto_ts) as i32) < 0
        {
            self.cc.on_spurious_congestion(now);
            self.spurious += 1;
        }
    }

    /// RFC 8985 §6.2 steps 1–2: the most recently sent delivered record sets
    /// RACK's reference point and, if it was not retransmitted, gives an RTT
    /// sample (RFC 6298 per ACK, as Linux; Karn's rule for retransmissions,
    /// whose RTT comes from the timestamp echo instead).
    fn rack_update(&mut self, now: Instant, seg: &Segment<'_>, delivered: &Delivered, env: &Env) -> Option<Duration> {
        let (sent_at, end, retransmitted) = delivered.newest?;
        let sample = now - sent_at;
        let rtt = if !retransmitted { Some(sample) } else { self.ts_rtt(now, seg) };
        if let Some(rtt) = rtt {
            self.rtt.sample(rtt, env.cfg.min_rto, env.cfg.max_rto);
            self.min_rtt.update(now, rtt);
        }
        // A retransmission acknowledged sooner than a round trip was most
        // likely the original's delivery: not a RACK sample (§6.2 step 2).
        let too_soon = retransmitted && self.min_rtt.get().is_some_and(|min| sample < min);
        if !too_soon {
            self.rack_rtt_us = sample.total_micros().min(u32::MAX as u64) as u32;
            if sent_at > self.rack_xmit || (sent_at == self.rack_xmit && end.gt(self.rack_end)) {
                self.rack_xmit = sent_at;
                self.rack_end = end;
            }
        }
        // Delivery below the highest delivered sequence: reordering.
        if end.lt(self.fack) {
            self.set(flag::REORDERING_SEEN);
        } else {
            self.fack = end;
        }
        rtt
    }

    /// RFC 8985 §6.2 step 4: the reordering window.
    fn reo_wnd(&self) -> Duration {
        if !self.has(flag::REORDERING_SEEN) && self.has(flag::RECOVERY) {
            return Duration::ZERO;
        }
        let quarter = self.min_rtt.get().unwrap_or(Duration::ZERO).total_micros() / 4;
        let wnd = Duration::from_micros(quarter * self.reo_wnd_mult.max(1) as u64);
        match self.rtt.srtt() {
            Some(srtt) => wnd.min(srtt),
            None => wnd,
        }
    }

    /// Marks lost records (SACK's DupThresh and RACK) and starts recovery
    /// if that found anything. Also arms RACK's reordering timer.
    pub(super) fn detect_losses(&mut self, now: Instant, env: &mut Env) {
        if self.sentq.is_empty() {
            self.timers[Timer::Reorder] = NEVER;
            return;
        }
        let mut lost = 0;
        // RFC 6675's DupThresh is a count, blind to reordering; once the
        // path has shown reordering, RACK's time-based window decides alone
        // (RFC 8985 §6, as Linux).
        if self.has(flag::SACK) && !self.has(flag::REORDERING_SEEN) {
            lost += self.sentq.mark_lost_by_sack(DUP_THRESH, self.mss());
        }
        // RFC 8985 §4: RACK needs SACK. With cumulative ACKs alone, the
        // newest delivered segment after a partial ACK is the retransmission,
        // and everything sent before it would look lost (go-back-N).
        if self.has(flag::SACK) && self.rack_xmit != Instant::ZERO {
            let rtt = Duration::from_micros(self.rack_rtt_us as u64);
            let (more, pending) = self.sentq.mark_lost_by_rack(now, self.rack_xmit, self.rack_end, rtt, self.reo_wnd());
            lost += more;
            self.timers[Timer::Reorder] = pending.unwrap_or(NEVER);
        }
        if lost > 0 {
            // RFC 6675 §5 step 4.2: FlightSize, SACKed data included.
            self.enter_recovery(now, self.outstanding(), env);
        }
    }

    /// Loss found outside recovery: cut the window once per episode.
    fn enter_recovery(&mut self, now: Instant, in_flight: u32, env: &mut Env) {
        if self.has(flag::RECOVERY) {
            return;
        }
        self.set(flag::RECOVERY | flag::FAST_REXMIT | flag::UNDO_ARMED);
        self.clear(flag::TLP_OUT);
        self.timers[Timer::TailLossProbe] = NEVER;
        self.recover = self.snd_max;
        self.undo_retrans = 0;
        self.cc.on_congestion(now, in_flight, self.mss());
        self.fast_start_on_congestion(env);
        self.recoveries_since_dsack = self.recoveries_since_dsack.saturating_add(1);
        if self.recoveries_since_dsack >= REO_WND_RESET_RECOVERIES {
            self.reo_wnd_mult = 1;
            self.recoveries_since_dsack = 0;
        }
        env.counters.fast_recoveries += 1;
    }

    /// NewReno (RFC 6582) for peers without SACK: the third duplicate ACK
    /// marks the first record lost and starts recovery; further duplicates
    /// inflate the window by a segment each.
    pub(super) fn on_duplicate_ack(&mut self, now: Instant, env: &mut Env) {
        let mss = self.mss();
        self.dupacks = self.dupacks.saturating_add(1);
        if self.has(flag::RECOVERY) {
            self.inflation = self.inflation.saturating_add(mss);
        } else if self.dupacks == DUP_THRESH as u8 && (self.snd_una - 1u32).ge(self.recover) {
            self.sentq.mark_first_lost();
            self.enter_recovery(now, self.outstanding(), env);
            self.inflation = DUP_THRESH * mss;
        }
    }

    /// After new data was acknowledged: leave recovery when everything
    /// outstanding at its start is acknowledged, or (without SACK) resend the
    /// next hole on a partial ACK (RFC 6582 §3.2).
    pub(super) fn after_new_ack(&mut self, now: Instant, acked: u32) {
        self.dupacks = 0;
        if !self.has(flag::RECOVERY) {
            return;
        }
        if self.snd_una.ge(self.recover) {
            self.clear(flag::RECOVERY | flag::FAST_REXMIT);
            self.inflation = 0;
            self.cc.on_recovery_end(now, self.pipe(), self.mss());
        } else if !self.has(flag::SACK) {
            self.sentq.mark_first_lost();
            self.set(flag::FAST_REXMIT);
            self.inflation = (self.inflation + self.mss()).saturating_sub(acked);
        }
    }

    /// RFC 2018 §8: a receiver may discard data it has SACKed. When its
    /// cumulative ACK stops at a record it SACKed, it has; the SACKed data
    /// behind will never be acknowledged unless it is sent again. Rather
    /// than wait a whole RTO, the timer is brought forward to half an RTT
    /// (as Linux does), giving a reordered ACK time to clear it up.
    pub(super) fn check_reneging(&mut self, now: Instant) {
        if self.sentq.front_is_sacked() {
            let srtt = self.rtt.srtt().unwrap_or(MIN_RENEGING_WAIT);
            let half = Duration::from_micros(srtt.total_micros() / 2);
            self.timers[Timer::Retransmit] = self.timers[Timer::Retransmit].min(now + half.max(MIN_RENEGING_WAIT));
        }
    }

    /// RFC 8985 §7.2: arm the tail-loss probe after sending or on an ACK,
    /// when data is in flight and no recovery is under way.
    pub(super) fn arm_tlp(&mut self, now: Instant) {
        // Not during recovery, fast or after a timeout (RFC 8985 §7.2): the
        // outstanding data is already being repaired.
        let recovering = self.has(flag::RECOVERY) || self.snd_una.lt(self.recover);
        if !self.has(flag::SACK) || recovering || self.has(flag::TLP_OUT) || self.outstanding() == 0 {
            self.timers[Timer::TailLossProbe] = NEVER;
            return;
        }
        let Some(srtt) = self.rtt.srtt() else {
            self.timers[Timer::TailLossProbe] = NEVER;
            return;
        };
        let mut pto = srtt * 2;
        if self.pipe() <= self.mss() {
            pto += WC_DEL_ACK;
        }
        self.timers[Timer::TailLossProbe] = (now + pto.max(MIN_PTO)).min(self.timers[Timer::Retransmit]);
    }

    /// The probe timer fired: send a probe (new data, or the last segment
    /// again) to draw an ACK that reveals a tail loss (RFC 8985 §7.3).
    ///
    /// The probe goes in place of a retransmission timeout due at the same
    /// time (the PTO is capped at the RTO, §7.2): the RTO restarts from the
    /// probe, as after any transmission.
    pub(super) fn on_tlp(&mut self, now: Instant) {
        self.timers[Timer::TailLossProbe] = NEVER;
        if self.outstanding() > 0 && !self.has(flag::RECOVERY | flag::TLP_OUT) {
            self.set(flag::TLP_NOW);
            self.timers[Timer::Retransmit] = now + self.rtt.rto();
        }
    }

    /// The retransmission timer fired with data outstanding (RFC 6298 §5.4–5.6,
    /// RFC 5681 §3.1, RFC 6675 §5.1): everything not SACKed is lost, the
    /// window collapses, the timer backs off. If the peer reneged, SACKed
    /// data counts as lost too (RFC 2018 §8).
    pub(super) fn on_retransmission_timeout(&mut self, now: Instant, env: &mut Env) {
        let mss = self.mss();
        if self.sentq.front_is_sacked() {
            self.sentq.on_reneging();
            env.counters.sack_reneging += 1;
        } else {
            self.sentq.mark_all_lost();
        }
        self.cc.on_timeout(now, self.outstanding(), mss);
        self.fast_start_on_timeout();
        self.clear(flag::RECOVERY | flag::FAST_REXMIT | flag::TLP_NOW | flag::TLP_OUT | flag::UNDO_ARMED);
        if !self.has(flag::RTO_UNDO) {
            // RFC 3522 §3.2: the first retransmission's timestamp; a repeated
            // timeout (no new ACK since) keeps it.
            self.set(flag::RTO_UNDO);
            self.rto_ts = self.ts_now(now);
        }
        self.inflation = 0;
        self.dupacks = 0;
        self.recover = self.snd_max;
        self.timers[Timer::TailLossProbe] = NEVER;
        self.timers[Timer::Reorder] = NEVER;
        self.rtt.back_off(env.cfg.max_rto);
        self.timers[Timer::Retransmit] = now + self.rtt.rto();
        env.counters.timeouts += 1;
        self.totals.timeouts += 1;
    }
}
