//! When each request is due and which connection carries it: request `k`
//! is due `k / rate` seconds after the start, on connection `k mod C`.
//! Fixed in advance, whatever the server does: that is what makes the
//! load open-loop.

use std::time::Duration;

/// A constant-rate schedule spread round-robin over the connections.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Schedule {
    rate: f64,
    connections: usize,
}

impl Schedule {
    /// `rate` requests per second over `connections` connections.
    ///
    /// # Errors
    ///
    /// A rate that is not a positive number, or no connections.
    pub fn new(rate: f64, connections: usize) -> Result<Schedule, String> {
        if !(rate.is_finite() && rate > 0.0) {
            return Err(format!("rate {rate}: must be a positive number of requests per second"));
        }
        if connections == 0 {
            return Err("needs at least one connection".into());
        }
        Ok(Schedule { rate, connections })
    }

    /// Requests per second.
    #[must_use]
    pub fn rate(&self) -> f64 {
        self.rate
    }

    /// When request `k` is due, from the start.
    #[must_use]
    pub fn due(&self, k: u64) -> Duration {
        // Computed from k each time, not by adding intervals: no drift.
        Duration::from_secs_f64(k as f64 / self.rate)
    }

    /// The connection request `k` goes out on.
    #[must_use]
    pub fn connection(&self, k: u64) -> usize {
        (k % self.connections as u64) as usize
    }

    /// How many requests are due in `[0, span)`: the first request not
    /// due before `span`.
    #[must_use]
    pub fn count_before(&self, span: Duration) -> u64 {
        let mut k = (span.as_secs_f64() * self.rate).floor() as u64;
        // Floating point may land one off either way; settle on the exact
        // boundary as `due` computes it.
        while k > 0 && self.due(k - 1) >= span {
            k -= 1;
        }
        while self.due(k) < span {
            k += 1;
        }
        k
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_are_evenly_spaced_at_the_rate() {
        let s = Schedule::new(1000.0, 4).unwrap();
        assert_eq!(s.due(0), Duration::ZERO);
        assert_eq!(s.due(1), Duration::from_millis(1));
        assert_eq!(s.due(1500), Duration::from_millis(1500));
        let fast = Schedule::new(88_000.0, 256).unwrap();
        // No drift after a long run: the millionth request is due at
        // exactly 1e6 / 88000 s (to the nanosecond).
        let expected = 1e6 / 88_000.0;
        assert!((fast.due(1_000_000).as_secs_f64() - expected).abs() < 1e-9);
        // Gaps never shrink or grow by more than rounding.
        for k in 0..10_000 {
            let gap = fast.due(k + 1) - fast.due(k);
            assert!(gap.as_nanos().abs_diff(11_364) <= 1, "gap {gap:?} at {k}");
        }
    }

    #[test]
    fn requests_go_round_robin_over_the_connections() {
        let s = Schedule::new(100.0, 3).unwrap();
        let conns: Vec<usize> = (0..7).map(|k| s.connection(k)).collect();
        assert_eq!(conns, [0, 1, 2, 0, 1, 2, 0]);
        // Each connection's own requests are C intervals apart.
        assert_eq!(s.due(4) - s.due(1), Duration::from_millis(30));
    }

    #[test]
    fn counting_the_requests_of_a_span() {
        let s = Schedule::new(1000.0, 1).unwrap();
        assert_eq!(s.count_before(Duration::ZERO), 0);
        // Due at 0, 1, ..., 999 ms: 1000 before the end of the second.
        assert_eq!(s.count_before(Duration::from_secs(1)), 1000);
        assert_eq!(s.count_before(Duration::from_micros(1500)), 2);
        let odd = Schedule::new(3.0, 1).unwrap();
        for span_ms in 0..3000 {
            let span = Duration::from_millis(span_ms);
            let n = odd.count_before(span);
            assert!(n == 0 || odd.due(n - 1) < span, "{span:?}");
            assert!(odd.due(n) >= span, "{span:?}");
        }
    }

    #[test]
    fn nonsense_schedules_are_refused() {
        assert!(Schedule::new(0.0, 1).is_err());
        assert!(Schedule::new(-5.0, 1).is_err());
        assert!(Schedule::new(f64::NAN, 1).is_err());
        assert!(Schedule::new(f64::INFINITY, 1).is_err());
        assert!(Schedule::new(10.0, 0).is_err());
    }
}
