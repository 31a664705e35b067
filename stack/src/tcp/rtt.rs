//! Round-trip time estimation: RFC 6298's smoothed estimator and the RTO,
//! plus a windowed minimum (the queue-free path delay the fairness policy
//! needs).

use crate::time::{Duration, Instant};

/// RFC 6298 state: SRTT, RTTVAR and the retransmission timeout.
///
/// Times are kept in microseconds in `u32`s (over an hour), which keeps the
/// estimator at 16 bytes inside every connection.
#[derive(Clone, Copy, Debug)]
pub struct RttEstimator {
    srtt: u32,
    rttvar: u32,
    rto: u32,
    /// Doublings applied to `rto` by consecutive timeouts.
    backoff: u8,
    has_sample: bool,
}

impl RttEstimator {
    /// No sample yet: the RTO is `initial`.
    pub fn new(initial: Duration) -> RttEstimator {
        RttEstimator { srtt: 0, rttvar: 0, rto: clamp_us(initial), backoff: 0, has_sample: false }
    }

    /// Feeds one RTT measurement (RFC 6298 §2.2–2.3) and recomputes the RTO:
    /// `SRTT + max(4·RTTVAR, min_rto)`, at most `max_rto`. A new sample also
    /// ends any backoff.
    ///
    /// `min_rto` takes the place of RFC 6298's clock granularity G, as in
    /// Linux (whose RTTVAR never drops below rto_min), rather than bounding
    /// the sum: with a sample on every ACK RTTVAR decays to almost nothing on
    /// a steady path, and an RTO of max(SRTT + 4·RTTVAR, 200 ms) would then
    /// sit a hair above the RTT on a 200 ms path and fire before any
    /// retransmission could be acknowledged.
    pub fn sample(&mut self, rtt: Duration, min_rto: Duration, max_rto: Duration) {
        let r = clamp_us(rtt).max(1);
        if self.has_sample {
            // RTTVAR <- 3/4 RTTVAR + 1/4 |SRTT - R'|; SRTT <- 7/8 SRTT + 1/8 R'
            let err = self.srtt.abs_diff(r);
            self.rttvar = ((3 * self.rttvar as u64 + err as u64) / 4) as u32;
            self.srtt = ((7 * self.srtt as u64 + r as u64) / 8) as u32;
        } else {
            self.srtt = r;
            self.rttvar = r / 2;
            self.has_sample = true;
        }
        self.backoff = 0;
        self.set_rto(min_rto, max_rto);
    }

    /// Starts from a path's remembered estimates (RFC 9040 §5, temporal
    /// sharing: the new connection takes the old RTT and RTTVAR) instead of
    /// no sample: the RTO is computed from them at once, and the first
    /// real sample smooths into them.
    pub fn seed(&mut self, srtt: Duration, rttvar: Duration, min_rto: Duration, max_rto: Duration) {
        self.srtt = clamp_us(srtt).max(1);
        self.rttvar = clamp_us(rttvar);
        self.has_sample = true;
        self.backoff = 0;
        self.set_rto(min_rto, max_rto);
    }

    /// RTO = SRTT + max(4·RTTVAR, min_rto), at most `max_rto`.
    fn set_rto(&mut self, min_rto: Duration, max_rto: Duration) {
        let rto = self.srtt as u64 + (4 * self.rttvar as u64).max(clamp_us(min_rto) as u64);
        self.rto = (rto.min(u32::MAX as u64) as u32).min(clamp_us(max_rto));
    }

    /// Doubles the RTO after a timeout (RFC 6298 §5.5), up to `max_rto`.
    pub fn back_off(&mut self, max_rto: Duration) {
        self.backoff = self.backoff.saturating_add(1);
        self.rto = self.rto.saturating_mul(2).min(clamp_us(max_rto));
    }

    /// The current retransmission timeout.
    pub fn rto(&self) -> Duration {
        Duration::from_micros(self.rto as u64)
    }

    /// The smoothed RTT, once there is a sample.
    pub fn srtt(&self) -> Option<Duration> {
        self.has_sample.then(|| Duration::from_micros(self.srtt as u64))
    }

    /// The RTT variation, once there is a sample.
    pub fn rttvar(&self) -> Option<Duration> {
        self.has_sample.then(|| Duration::from_micros(self.rttvar as u64))
    }

    /// Consecutive timeouts since the last sample.
    pub fn backoff(&self) -> u8 {
        self.backoff
    }
}

fn clamp_us(d: Duration) -> u32 {
    d.total_micros().min(u32::MAX as u64) as u32
}

/// The minimum RTT over a sliding time window.
///
/// Keeps the best, second-best and third-best samples from successive parts
/// of the window (the scheme of Kathleen Nichols' windowed min-max filter),
/// so the minimum can rise when the path changes without storing every
/// sample.
#[derive(Clone, Copy, Debug, Default)]
pub struct MinRtt {
    samples: [(u32, u32); 3], // (µs, at: ms since origin, truncated)
    valid: bool,
}

impl MinRtt {
    /// How long a minimum is remembered.
    pub const WINDOW: Duration = Duration::from_secs(300);

    /// Feeds a sample taken at `now`.
    pub fn update(&mut self, now: Instant, rtt: Duration) {
        let r = clamp_us(rtt).max(1);
        let t = now.total_millis() as u32;
        let win = Self::WINDOW.total_millis() as u32;
        if !self.valid || r <= self.samples[0].0 || t.wrapping_sub(self.samples[2].1) > win {
            // A new overall minimum, or the whole window has expired.
            self.samples = [(r, t); 3];
            self.valid = true;
            return;
        }
        if r <= self.samples[1].0 {
            self.samples[1] = (r, t);
            self.samples[2] = (r, t);
        } else if r <= self.samples[2].0 {
            self.samples[2] = (r, t);
        }
        // Age out the best sample when it leaves the window; the others step up.
        let age = t.wrapping_sub(self.samples[0].1);
        if age > win {
            self.samples[0] = self.samples[1];
            self.samples[1] = self.samples[2];
            self.samples[2] = (r, t);
            if t.wrapping_sub(self.samples[0].1) > win {
                self.samples[0] = self.samples[1];
                self.samples[1] = self.samples[2];
            }
        } else if self.samples[1].1 == self.samples[0].1 && age > win / 4 {
            // A quarter of the window passed without a second choice: take this one.
            self.samples[1] = (r, t);
            self.samples[2] = (r, t);
        } else if self.samples[2].1 == self.samples[1].1 && age > win / 2 {
            self.samples[2] = (r, t);
        }
    }

    /// The windowed minimum, once there is a sample.
    pub fn get(&self) -> Option<Duration> {
        self.valid.then(|| Duration::from_micros(self.samples[0].0 as u64))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_millis(100);
    const MAX: Duration = Duration::from_secs(60);

    #[test]
    fn first_sample_sets_srtt_and_half_variance() {
        let mut e = RttEstimator::new(Duration::from_secs(1));
        assert_eq!(e.rto(), Duration::from_secs(1));
        assert_eq!(e.srtt(), None);
        e.sample(Duration::from_millis(100), MIN, MAX);
        assert_eq!(e.srtt(), Some(Duration::from_millis(100)));
        assert_eq!(e.rttvar(), Some(Duration::from_millis(50)));
        // RTO = 100 + 4 * 50 = 300 ms
        assert_eq!(e.rto(), Duration::from_millis(300));
    }

    #[test]
    fn later_samples_smooth_with_alpha_and_beta() {
        let mut e = RttEstimator::new(Duration::from_secs(1));
        e.sample(Duration::from_millis(100), MIN, MAX);
        e.sample(Duration::from_millis(180), MIN, MAX);
        // RTTVAR = 3/4*50 + 1/4*|100-180| = 57.5; SRTT = 7/8*100 + 1/8*180 = 110
        assert_eq!(e.srtt(), Some(Duration::from_millis(110)));
        assert_eq!(e.rttvar(), Some(Duration::from_micros(57_500)));
        assert_eq!(e.rto(), Duration::from_millis(340));
    }

    #[test]
    fn min_rto_is_added_to_srtt_not_a_floor_on_the_sum() {
        // A steady 200 ms path: RTTVAR decays towards zero.
        let mut e = RttEstimator::new(Duration::from_secs(1));
        for _ in 0..200 {
            e.sample(Duration::from_millis(200), Duration::from_millis(200), MAX);
        }
        assert!(e.rttvar().unwrap() < Duration::from_millis(1));
        assert_eq!(e.rto(), Duration::from_millis(400));
        // A noisy path: 4·RTTVAR dominates.
        e.sample(Duration::from_millis(600), Duration::from_millis(200), MAX);
        assert_eq!(e.rto(), e.srtt().unwrap() + e.rttvar().unwrap() * 4);
    }

    #[test]
    fn a_seeded_estimator_has_an_rto_at_once_and_smooths_the_next_sample_into_it() {
        let mut e = RttEstimator::new(Duration::from_secs(1));
        e.seed(Duration::from_millis(50), Duration::from_millis(10), MIN, MAX);
        assert_eq!(e.srtt(), Some(Duration::from_millis(50)));
        assert_eq!(e.rto(), Duration::from_millis(150));
        e.sample(Duration::from_millis(58), MIN, MAX);
        assert_eq!(e.srtt(), Some(Duration::from_millis(51)));
    }

    #[test]
    fn rto_respects_floor_and_backoff_ceiling() {
        let mut e = RttEstimator::new(Duration::from_secs(1));
        e.sample(Duration::from_micros(50), MIN, MAX);
        assert_eq!(e.rto(), MIN + Duration::from_micros(50));
        for _ in 0..20 {
            e.back_off(MAX);
        }
        assert_eq!(e.rto(), MAX);
        assert_eq!(e.backoff(), 20);
        e.sample(Duration::from_micros(50), MIN, MAX);
        assert_eq!(e.backoff(), 0);
        assert!(e.rto() < MIN + Duration::from_micros(100), "{:?}", e.rto());
    }

    #[test]
    fn min_rtt_tracks_the_minimum_and_forgets_it_after_the_window() {
        let mut m = MinRtt::default();
        assert_eq!(m.get(), None);
        let t0 = Instant::from_secs(10);
        m.update(t0, Duration::from_millis(50));
        m.update(t0 + Duration::from_secs(1), Duration::from_millis(80));
        m.update(t0 + Duration::from_secs(2), Duration::from_millis(40));
        assert_eq!(m.get(), Some(Duration::from_millis(40)));
        m.update(t0 + Duration::from_secs(100), Duration::from_millis(70));
        assert_eq!(m.get(), Some(Duration::from_millis(40)));
        // Long after the window, the path got slower: the minimum follows.
        let later = t0 + MinRtt::WINDOW + Duration::from_secs(200);
        m.update(later, Duration::from_millis(90));
        m.update(later + Duration::from_secs(1), Duration::from_millis(95));
        assert!(m.get().unwrap() >= Duration::from_millis(70), "{:?}", m.get());
    }
}
