//! HyStart++ (RFC 9406): leaving slow start on a rise in delay, before the
//! overshoot that ends it with a burst of losses.
//!
//! This module owns only the exit decision and the growth limit of
//! Conservative Slow Start (CSS); the congestion window itself belongs to the
//! algorithm that embeds it ([`Cubic`](crate::tcp::cubic::Cubic)), which
//! consults HyStart++ only during the initial slow start (RFC 9406 §4.3).
//!
//! RFC 9406 §4.2 in brief: time is cut into rounds, a round ending when the
//! cumulative ACK reaches the `SND.NXT` recorded when it began. Each round
//! keeps the minimum of its RTT samples. Once a round has at least
//! [`N_RTT_SAMPLE`] samples and its minimum exceeds the previous round's by
//! `RttThresh`, slow start gives way to CSS, which grows the window
//! [`CSS_GROWTH_DIVISOR`] times more slowly. If the delay falls back below
//! the level that triggered CSS the exit was spurious and slow start resumes;
//! after [`CSS_ROUNDS`] rounds the sender enters congestion avoidance.

use crate::tcp::congestion::AckSample;
use crate::tcp::seq::SeqNumber;
use crate::time::Duration;

/// Lower bound of `RttThresh` (RFC 9406 §4.3: MIN_RTT_THRESH).
pub const MIN_RTT_THRESH: Duration = Duration::from_millis(4);
/// Upper bound of `RttThresh` (RFC 9406 §4.3: MAX_RTT_THRESH).
pub const MAX_RTT_THRESH: Duration = Duration::from_millis(16);
/// `RttThresh` is the previous round's minimum RTT divided by this, before
/// clamping (RFC 9406 §4.3: MIN_RTT_DIVISOR).
pub const MIN_RTT_DIVISOR: u32 = 8;
/// RTT samples a round needs before its minimum is trusted (RFC 9406 §4.3).
pub const N_RTT_SAMPLE: u8 = 8;
/// CSS grows the window this many times more slowly than slow start
/// (RFC 9406 §4.3).
pub const CSS_GROWTH_DIVISOR: u32 = 4;
/// Rounds spent in CSS, the partial round it began in included, before
/// entering congestion avoidance (RFC 9406 §4.3).
pub const CSS_ROUNDS: u8 = 5;

/// "Infinity" for the RTT fields, which hold microseconds in a `u32`.
const NO_RTT: u32 = u32::MAX;

/// Which part of slow start HyStart++ is in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Phase {
    /// Standard slow start, watching for a rise in delay.
    SlowStart,
    /// Conservative Slow Start: the delay rose; growth is divided by
    /// [`CSS_GROWTH_DIVISOR`] while HyStart++ checks whether the rise lasts.
    Conservative,
}

/// HyStart++ state for one connection.
///
/// RTTs are kept in microseconds in `u32`s (over an hour, far beyond any
/// RTT) so that the state stays at 20 bytes inside every connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HyStart {
    phase: Phase,
    /// `windowEnd`: the round ends when the cumulative ACK reaches it.
    /// `None` until the first ACK, which starts the first round.
    window_end: Option<SeqNumber>,
    /// `lastRoundMinRTT`, µs.
    last_round_min_rtt: u32,
    /// `currentRoundMinRTT`, µs.
    current_round_min_rtt: u32,
    /// `cssBaselineMinRtt`, µs: the round minimum that triggered CSS.
    css_baseline_min_rtt: u32,
    /// `rttSampleCount`, saturating: only "at least N_RTT_SAMPLE" matters.
    rtt_sample_count: u8,
    /// Rounds begun in CSS, the one it was entered in included.
    css_rounds: u8,
    /// Bytes of CSS growth not yet applied, below [`CSS_GROWTH_DIVISOR`],
    /// so that dividing small ACKs does not lose growth.
    css_remainder: u8,
}

impl Default for HyStart {
    fn default() -> HyStart {
        HyStart::new()
    }
}

impl HyStart {
    /// The state at the start of a connection: slow start, no round yet.
    pub const fn new() -> HyStart {
        HyStart {
            phase: Phase::SlowStart,
            window_end: None,
            last_round_min_rtt: NO_RTT,
            current_round_min_rtt: NO_RTT,
            css_baseline_min_rtt: NO_RTT,
            rtt_sample_count: 0,
            css_rounds: 0,
            css_remainder: 0,
        }
    }

    /// The part of slow start HyStart++ is in.
    pub const fn phase(&self) -> Phase {
        self.phase
    }

    /// Feeds one ACK received in slow start: tracks rounds and RTT samples,
    /// and moves between slow start and CSS.
    ///
    /// Returns `true` when CSS has run its [`CSS_ROUNDS`] rounds: the caller
    /// must leave slow start by setting ssthresh to cwnd (RFC 9406 §4.2),
    /// and this ACK then belongs to congestion avoidance. (Fed again, it
    /// answers `true` at each later round end: CSS is over.)
    #[must_use]
    pub fn on_ack(&mut self, ack: &AckSample) -> bool {
        if self.window_end.is_none_or(|end| ack.ack.ge(end)) {
            if self.phase == Phase::Conservative {
                if self.css_rounds >= CSS_ROUNDS {
                    return true;
                }
                self.css_rounds += 1;
            }
            // RFC 9406 §4.2: at the start of each round.
            self.window_end = Some(ack.snd_nxt);
            self.last_round_min_rtt = self.current_round_min_rtt;
            self.current_round_min_rtt = NO_RTT;
            self.rtt_sample_count = 0;
        }

        let Some(rtt) = ack.rtt else { return false };
        let rtt = micros(rtt);
        self.current_round_min_rtt = self.current_round_min_rtt.min(rtt);
        self.rtt_sample_count = self.rtt_sample_count.saturating_add(1);
        if self.rtt_sample_count < N_RTT_SAMPLE {
            return false;
        }
        match self.phase {
            Phase::SlowStart => {
                if self.last_round_min_rtt == NO_RTT {
                    return false; // no previous round to compare with
                }
                let thresh =
                    (self.last_round_min_rtt / MIN_RTT_DIVISOR).clamp(micros(MIN_RTT_THRESH), micros(MAX_RTT_THRESH));
                if self.current_round_min_rtt >= self.last_round_min_rtt.saturating_add(thresh) {
                    self.phase = Phase::Conservative;
                    self.css_baseline_min_rtt = self.current_round_min_rtt;
                    // The partial round CSS starts in counts towards CSS_ROUNDS.
                    self.css_rounds = 1;
                }
            }
            Phase::Conservative => {
                if self.current_round_min_rtt < self.css_baseline_min_rtt {
                    // The delay fell back: the rise was not our queue
                    // (RFC 9406 §4.2), so the exit was spurious.
                    self.phase = Phase::SlowStart;
                    self.css_baseline_min_rtt = NO_RTT;
                    self.css_rounds = 0;
                }
            }
        }
        false
    }

    /// How much an ACK of `acked` bytes may grow the window: `min(acked,
    /// L·mss)` (RFC 9406 §4.2), divided by [`CSS_GROWTH_DIVISOR`] during
    /// CSS. L = 1, the byte counting of RFC 3465 that the rest of the stack
    /// uses (RFC 9406 would allow up to 8 for an unpaced sender); `most` is
    /// L·mss for every ACK the sample stands for.
    pub fn increase(&mut self, acked: u32, most: u32) -> u32 {
        let inc = acked.min(most);
        match self.phase {
            Phase::SlowStart => inc,
            Phase::Conservative => {
                let total = inc as u64 + self.css_remainder as u64;
                self.css_remainder = (total % CSS_GROWTH_DIVISOR as u64) as u8;
                (total / CSS_GROWTH_DIVISOR as u64) as u32
            }
        }
    }
}

/// A duration in whole microseconds, saturating at [`NO_RTT`] − 1 so that a
/// real sample is never mistaken for "infinity".
fn micros(d: Duration) -> u32 {
    d.total_micros().min(NO_RTT as u64 - 1) as u32
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Instant;

    const MSS: u32 = 1000;

    /// An ACK that ends no round (unless it is the first) with an RTT sample.
    fn ack(seq: u32, snd_nxt: u32, rtt_ms: u64) -> AckSample {
        AckSample {
            now: Instant::ZERO,
            acked: MSS,
            acks: 1,
            flight: 10 * MSS,
            mss: MSS,
            rtt: Some(Duration::from_millis(rtt_ms)),
            srtt: None,
            min_rtt: None,
            app_limited: false,
            ack: SeqNumber::new(seq),
            snd_nxt: SeqNumber::new(snd_nxt),
        }
    }

    /// Runs one round of `n` ACKs, all with `rtt_ms`; the first ACK ends the
    /// previous round. Returns whether any ACK asked to leave slow start.
    fn round(h: &mut HyStart, start: u32, n: u32, rtt_ms: u64) -> bool {
        let mut exit = false;
        for i in 0..n {
            let seq = start + i * MSS;
            exit |= h.on_ack(&ack(seq, start + n * MSS, rtt_ms));
        }
        exit
    }

    #[test]
    fn flat_rtts_stay_in_slow_start() {
        let mut h = HyStart::new();
        for r in 0..20 {
            assert!(!round(&mut h, r * 100 * MSS, 100, 50));
        }
        assert_eq!(h.phase(), Phase::SlowStart);
    }

    #[test]
    fn a_round_needs_eight_samples_to_judge() {
        let mut h = HyStart::new();
        round(&mut h, 0, 20, 50);
        // Seven samples at a much higher RTT: not enough to decide.
        for i in 0..7 {
            assert!(!h.on_ack(&ack((20 + i) * MSS, 40 * MSS, 90)));
        }
        assert_eq!(h.phase(), Phase::SlowStart);
        // Eight are.
        assert!(!h.on_ack(&ack(27 * MSS, 40 * MSS, 90)));
        assert_eq!(h.phase(), Phase::Conservative);
    }

    #[test]
    fn the_threshold_is_an_eighth_of_the_last_minimum_clamped() {
        // 80 ms / 8 = 10 ms: +9 ms stays, +10 ms leaves.
        let mut h = HyStart::new();
        round(&mut h, 0, 10, 80);
        round(&mut h, 10 * MSS, 10, 89);
        assert_eq!(h.phase(), Phase::SlowStart);
        let mut h = HyStart::new();
        round(&mut h, 0, 10, 80);
        round(&mut h, 10 * MSS, 10, 90);
        assert_eq!(h.phase(), Phase::Conservative);
        // 10 ms / 8 is below the 4 ms floor: +3 ms stays.
        let mut h = HyStart::new();
        round(&mut h, 0, 10, 10);
        round(&mut h, 10 * MSS, 10, 13);
        assert_eq!(h.phase(), Phase::SlowStart);
        // 400 ms / 8 = 50 ms is above the 16 ms ceiling: +16 ms leaves.
        let mut h = HyStart::new();
        round(&mut h, 0, 10, 400);
        round(&mut h, 10 * MSS, 10, 416);
        assert_eq!(h.phase(), Phase::Conservative);
    }

    #[test]
    fn css_lasts_five_rounds_counting_the_partial_one() {
        let mut h = HyStart::new();
        round(&mut h, 0, 10, 50);
        round(&mut h, 10 * MSS, 10, 70); // enters CSS: round 1
        assert_eq!(h.phase(), Phase::Conservative);
        for r in 2..=5 {
            assert!(!round(&mut h, r * 10 * MSS, 10, 70), "round {r}");
        }
        // The ACK ending the fifth CSS round leaves slow start.
        assert!(h.on_ack(&ack(60 * MSS, 70 * MSS, 70)));
    }

    #[test]
    fn a_falling_rtt_in_css_resumes_slow_start() {
        let mut h = HyStart::new();
        round(&mut h, 0, 10, 50);
        round(&mut h, 10 * MSS, 10, 70);
        assert_eq!(h.phase(), Phase::Conservative);
        round(&mut h, 20 * MSS, 10, 60);
        assert_eq!(h.phase(), Phase::SlowStart);
    }

    #[test]
    fn css_divides_growth_without_losing_bytes() {
        let mut h = HyStart::new();
        assert_eq!(h.increase(3 * MSS, MSS), MSS, "L = 1 MSS");
        round(&mut h, 0, 10, 50);
        round(&mut h, 10 * MSS, 10, 70);
        assert_eq!(h.increase(MSS, MSS), MSS / 4);
        // 3 + 3 + 3 + 3 bytes acknowledged grow the window by 3 in total.
        let grown: u32 = (0..4).map(|_| h.increase(3, MSS)).sum();
        assert_eq!(grown, 3);
    }

    #[test]
    fn acks_without_samples_only_track_rounds() {
        let mut h = HyStart::new();
        for i in 0..100 {
            let mut a = ack(i * MSS, (i + 5) * MSS, 50);
            a.rtt = None;
            assert!(!h.on_ack(&a));
        }
        assert_eq!(h.phase(), Phase::SlowStart);
        assert_eq!(h.current_round_min_rtt, NO_RTT);
    }
}
