//! Congestion control (RFC 5681) behind a trait.
//!
//! The connection owns loss detection and recovery (which segments to resend,
//! NewReno's partial ACKs); an algorithm only decides how the congestion
//! window and slow-start threshold move.

use crate::time::Instant;

/// What a congestion-control algorithm must answer.
pub trait CongestionControl {
    /// The congestion window in bytes.
    fn cwnd(&self) -> u32;
    /// The slow-start threshold in bytes.
    fn ssthresh(&self) -> u32;
    /// `acked` new bytes were acknowledged outside loss recovery.
    fn on_ack(&mut self, now: Instant, acked: u32, mss: u32);
    /// Loss detected by duplicate ACKs: fast recovery begins.
    fn on_congestion(&mut self, now: Instant, flight: u32, mss: u32);
    /// Fast recovery ended with every byte outstanding at its start acknowledged.
    fn on_recovery_end(&mut self, now: Instant, flight: u32, mss: u32);
    /// The retransmission timer expired.
    fn on_timeout(&mut self, now: Instant, flight: u32, mss: u32);
}

/// The initial window of RFC 6928: min(10·MSS, max(2·MSS, 14600)).
pub fn initial_window(mss: u32) -> u32 {
    (10 * mss).min((2 * mss).max(14_600))
}

/// Reno (RFC 5681): slow start, then one MSS per RTT; halve on loss.
#[derive(Clone, Copy, Debug)]
pub struct Reno {
    cwnd: u32,
    ssthresh: u32,
    /// Bytes acknowledged since cwnd last grew in congestion avoidance.
    acked_in_avoidance: u32,
}

impl Reno {
    /// A window of [`initial_window`] and an unbounded threshold.
    pub fn new(mss: u32) -> Reno {
        Reno { cwnd: initial_window(mss), ssthresh: u32::MAX, acked_in_avoidance: 0 }
    }

    fn halve(flight: u32, mss: u32) -> u32 {
        // RFC 5681 (4): ssthresh = max(FlightSize / 2, 2*SMSS)
        (flight / 2).max(2 * mss)
    }
}

impl CongestionControl for Reno {
    fn cwnd(&self) -> u32 {
        self.cwnd
    }

    fn ssthresh(&self) -> u32 {
        self.ssthresh
    }

    fn on_ack(&mut self, _now: Instant, acked: u32, mss: u32) {
        if self.cwnd < self.ssthresh {
            // Slow start with appropriate byte counting, L = 1 SMSS (RFC 3465).
            self.cwnd = self.cwnd.saturating_add(acked.min(mss));
        } else {
            // Congestion avoidance: one SMSS per window of acknowledged bytes.
            self.acked_in_avoidance = self.acked_in_avoidance.saturating_add(acked);
            if self.acked_in_avoidance >= self.cwnd {
                self.acked_in_avoidance -= self.cwnd;
                self.cwnd = self.cwnd.saturating_add(mss);
            }
        }
    }

    fn on_congestion(&mut self, _now: Instant, flight: u32, mss: u32) {
        self.ssthresh = Self::halve(flight, mss);
        self.cwnd = self.ssthresh;
        self.acked_in_avoidance = 0;
    }

    fn on_recovery_end(&mut self, _now: Instant, flight: u32, mss: u32) {
        // RFC 6582 §3.2 step 3: min(ssthresh, FlightSize + SMSS) avoids a burst.
        self.cwnd = self.ssthresh.min(flight.saturating_add(mss)).max(mss);
    }

    fn on_timeout(&mut self, _now: Instant, flight: u32, mss: u32) {
        self.ssthresh = Self::halve(flight, mss);
        self.cwnd = mss; // the loss window
        self.acked_in_avoidance = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1460;
    const T: Instant = Instant::ZERO;

    #[test]
    fn initial_window_follows_rfc_6928() {
        assert_eq!(initial_window(1460), 14_600);
        assert_eq!(initial_window(536), 5_360);
        assert_eq!(initial_window(8960), 17_920);
    }

    #[test]
    fn slow_start_grows_one_mss_per_ack_then_avoidance_one_per_window() {
        let mut r = Reno::new(MSS);
        r.on_ack(T, MSS, MSS);
        assert_eq!(r.cwnd(), 11 * MSS);
        r.on_congestion(T, 20 * MSS, MSS);
        assert_eq!(r.ssthresh(), 10 * MSS);
        assert_eq!(r.cwnd(), 10 * MSS);
        for _ in 0..9 {
            r.on_ack(T, MSS, MSS);
        }
        assert_eq!(r.cwnd(), 10 * MSS);
        r.on_ack(T, MSS, MSS);
        assert_eq!(r.cwnd(), 11 * MSS);
    }

    #[test]
    fn timeout_collapses_to_one_segment_and_threshold_never_below_two() {
        let mut r = Reno::new(MSS);
        r.on_timeout(T, MSS, MSS);
        assert_eq!(r.cwnd(), MSS);
        assert_eq!(r.ssthresh(), 2 * MSS);
        r.on_recovery_end(T, 0, MSS);
        assert_eq!(r.cwnd(), MSS);
    }
}
