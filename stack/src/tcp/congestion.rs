//! Congestion control (RFC 5681) behind a trait.
//!
//! The connection owns loss detection and recovery (which segments to resend,
//! SACK and RACK, NewReno's partial ACKs); an algorithm only decides how the
//! congestion window and slow-start threshold move. [`Congestion`] holds one
//! of the algorithms inline, so a connection needs no allocation for it.

use crate::tcp::cubic::Cubic;
use crate::tcp::seq::SeqNumber;
use crate::time::{Duration, Instant};

/// What an algorithm learns from one ACK that acknowledged new data.
#[derive(Clone, Copy, Debug)]
pub struct AckSample {
    /// When the ACK arrived.
    pub now: Instant,
    /// Bytes newly acknowledged by this ACK, cumulatively or selectively.
    pub acked: u32,
    /// How many of the peer's ACKs this sample stands for: 1, or more when
    /// the shard coalesced the pure ACKs of one receive batch. Slow start
    /// grows by up to one MSS per ACK (RFC 3465, L = 1), so by up to this
    /// many here.
    pub acks: u32,
    /// Bytes in flight before this ACK.
    pub flight: u32,
    /// The sender's MSS.
    pub mss: u32,
    /// An RTT measured by this ACK, if it gave one.
    pub rtt: Option<Duration>,
    /// The smoothed RTT after this ACK.
    pub srtt: Option<Duration>,
    /// The windowed minimum RTT after this ACK.
    pub min_rtt: Option<Duration>,
    /// The sender did not fill its congestion window before this ACK
    /// (limited by the application or the peer's window): growth must not
    /// count this time (RFC 9438 §4.2, RFC 7661).
    pub app_limited: bool,
    /// The cumulative acknowledgment point after this ACK.
    pub ack: SeqNumber,
    /// The next sequence number to be sent; a round trip ends when `ack`
    /// passes the `snd_nxt` seen at its start (RFC 9406 §4.2).
    pub snd_nxt: SeqNumber,
}

/// What a congestion-control algorithm must answer.
pub trait CongestionControl {
    /// The congestion window in bytes.
    fn cwnd(&self) -> u32;
    /// The slow-start threshold in bytes (`u32::MAX` until the first loss).
    fn ssthresh(&self) -> u32;
    /// New data was acknowledged outside loss recovery.
    fn on_ack(&mut self, ack: &AckSample);
    /// Loss was detected (duplicate ACKs, SACK or RACK): recovery begins.
    fn on_congestion(&mut self, now: Instant, flight: u32, mss: u32);
    /// Recovery ended with everything outstanding at its start acknowledged.
    fn on_recovery_end(&mut self, now: Instant, flight: u32, mss: u32);
    /// The retransmission timer expired.
    fn on_timeout(&mut self, now: Instant, flight: u32, mss: u32);
    /// The last congestion event proved spurious (the "lost" data had
    /// arrived): restore the state from before it (RFC 9438 §4.9).
    fn on_spurious_congestion(&mut self, now: Instant);
    /// Sending resumes after an idle period longer than the RTO (RFC 5681
    /// §4.1, RFC 9438 §5.8).
    fn on_restart_after_idle(&mut self, now: Instant, idle: Duration, mss: u32);
    /// Sets cwnd and/or ssthresh from outside the algorithm's own rules: a
    /// larger initial window, an ssthresh remembered from the path (RFC
    /// 9040 §5), careful resume's jump and retreat (RFC 9959 §3.3, §3.5).
    /// Whatever stage of growth was under way ends and nothing before it
    /// can be undone: the next stage starts from these values.
    fn set_window(&mut self, cwnd: Option<u32>, ssthresh: Option<u32>);
}

/// An initial window of `segments` (RFC 6928's 10 keeps its 14,600-byte
/// cap; other counts are plain multiples of the MSS).
pub fn initial_window_of(mss: u32, segments: u32) -> u32 {
    if segments == 10 { initial_window(mss) } else { segments.max(1).saturating_mul(mss) }
}

/// The initial window of RFC 6928: min(10·MSS, max(2·MSS, 14600)).
pub fn initial_window(mss: u32) -> u32 {
    (10 * mss).min((2 * mss).max(14_600))
}

/// Which algorithm new connections use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Algorithm {
    /// CUBIC (RFC 9438) with HyStart++: the default, as in Linux.
    #[default]
    Cubic,
    /// Reno (RFC 5681).
    Reno,
}

/// One of the algorithms, held inline.
#[derive(Clone, Debug)]
pub enum Congestion {
    /// CUBIC.
    Cubic(Cubic),
    /// Reno.
    Reno(Reno),
}

impl Congestion {
    /// A fresh instance of `algorithm` for a connection with `mss`.
    pub fn new(algorithm: Algorithm, mss: u32) -> Congestion {
        match algorithm {
            Algorithm::Cubic => Congestion::Cubic(Cubic::new(mss)),
            Algorithm::Reno => Congestion::Reno(Reno::new(mss)),
        }
    }

    fn inner(&self) -> &dyn CongestionControl {
        match self {
            Congestion::Cubic(c) => c,
            Congestion::Reno(r) => r,
        }
    }

    fn inner_mut(&mut self) -> &mut dyn CongestionControl {
        match self {
            Congestion::Cubic(c) => c,
            Congestion::Reno(r) => r,
        }
    }
}

impl CongestionControl for Congestion {
    fn cwnd(&self) -> u32 {
        self.inner().cwnd()
    }
    fn ssthresh(&self) -> u32 {
        self.inner().ssthresh()
    }
    fn on_ack(&mut self, ack: &AckSample) {
        self.inner_mut().on_ack(ack)
    }
    fn on_congestion(&mut self, now: Instant, flight: u32, mss: u32) {
        self.inner_mut().on_congestion(now, flight, mss)
    }
    fn on_recovery_end(&mut self, now: Instant, flight: u32, mss: u32) {
        self.inner_mut().on_recovery_end(now, flight, mss)
    }
    fn on_timeout(&mut self, now: Instant, flight: u32, mss: u32) {
        self.inner_mut().on_timeout(now, flight, mss)
    }
    fn on_spurious_congestion(&mut self, now: Instant) {
        self.inner_mut().on_spurious_congestion(now)
    }
    fn on_restart_after_idle(&mut self, now: Instant, idle: Duration, mss: u32) {
        self.inner_mut().on_restart_after_idle(now, idle, mss)
    }
    fn set_window(&mut self, cwnd: Option<u32>, ssthresh: Option<u32>) {
        self.inner_mut().set_window(cwnd, ssthresh)
    }
}

/// Reno (RFC 5681): slow start, then one MSS per RTT; halve on loss.
#[derive(Clone, Copy, Debug)]
pub struct Reno {
    cwnd: u32,
    ssthresh: u32,
    /// Bytes acknowledged since cwnd last grew in congestion avoidance.
    acked_in_avoidance: u32,
    /// (cwnd, ssthresh) before the last congestion event, for undo.
    before_event: Option<(u32, u32)>,
}

impl Reno {
    /// A window of [`initial_window`] and an unbounded threshold.
    pub fn new(mss: u32) -> Reno {
        Reno { cwnd: initial_window(mss), ssthresh: u32::MAX, acked_in_avoidance: 0, before_event: None }
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

    fn on_ack(&mut self, ack: &AckSample) {
        if ack.app_limited {
            return; // RFC 7661: do not grow a window that is not being used
        }
        if self.cwnd < self.ssthresh {
            // Slow start with appropriate byte counting, L = 1 SMSS (RFC 3465)
            // for each of the ACKs this one stands for.
            self.cwnd = self.cwnd.saturating_add(ack.acked.min(ack.mss.saturating_mul(ack.acks.max(1))));
        } else {
            // Congestion avoidance: one SMSS per window of acknowledged bytes.
            self.acked_in_avoidance = self.acked_in_avoidance.saturating_add(ack.acked);
            if self.acked_in_avoidance >= self.cwnd {
                self.acked_in_avoidance -= self.cwnd;
                self.cwnd = self.cwnd.saturating_add(ack.mss);
            }
        }
    }

    fn on_congestion(&mut self, _now: Instant, flight: u32, mss: u32) {
        self.before_event = Some((self.cwnd, self.ssthresh));
        self.ssthresh = Self::halve(flight, mss);
        self.cwnd = self.ssthresh;
        self.acked_in_avoidance = 0;
    }

    fn on_recovery_end(&mut self, _now: Instant, flight: u32, mss: u32) {
        // RFC 6582 §3.2 step 3: min(ssthresh, FlightSize + SMSS) avoids a burst.
        self.cwnd = self.ssthresh.min(flight.saturating_add(mss)).max(mss);
    }

    fn on_timeout(&mut self, _now: Instant, flight: u32, mss: u32) {
        self.before_event = Some((self.cwnd, self.ssthresh));
        self.ssthresh = Self::halve(flight, mss);
        self.cwnd = mss; // the loss window
        self.acked_in_avoidance = 0;
    }

    fn on_spurious_congestion(&mut self, _now: Instant) {
        if let Some((cwnd, ssthresh)) = self.before_event.take() {
            self.cwnd = self.cwnd.max(cwnd);
            self.ssthresh = ssthresh;
        }
    }

    fn on_restart_after_idle(&mut self, _now: Instant, _idle: Duration, mss: u32) {
        // RFC 5681 §4.1: the restart window is min(IW, cwnd).
        self.cwnd = self.cwnd.min(initial_window(mss));
    }

    fn set_window(&mut self, cwnd: Option<u32>, ssthresh: Option<u32>) {
        self.cwnd = cwnd.unwrap_or(self.cwnd).max(1);
        self.ssthresh = ssthresh.unwrap_or(self.ssthresh).max(1);
        self.acked_in_avoidance = 0;
        self.before_event = None;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1460;
    const T: Instant = Instant::ZERO;

    fn ack(acked: u32) -> AckSample {
        AckSample {
            now: T,
            acked,
            acks: 1,
            flight: 20 * MSS,
            mss: MSS,
            rtt: None,
            srtt: None,
            min_rtt: None,
            app_limited: false,
            ack: SeqNumber::new(0),
            snd_nxt: SeqNumber::new(0),
        }
    }

    #[test]
    fn initial_window_follows_rfc_6928() {
        assert_eq!(initial_window(1460), 14_600);
        assert_eq!(initial_window(536), 5_360);
        assert_eq!(initial_window(8960), 17_920);
    }

    #[test]
    fn slow_start_grows_one_mss_per_ack_then_avoidance_one_per_window() {
        let mut r = Reno::new(MSS);
        r.on_ack(&ack(MSS));
        assert_eq!(r.cwnd(), 11 * MSS);
        r.on_congestion(T, 20 * MSS, MSS);
        assert_eq!(r.ssthresh(), 10 * MSS);
        assert_eq!(r.cwnd(), 10 * MSS);
        for _ in 0..9 {
            r.on_ack(&ack(MSS));
        }
        assert_eq!(r.cwnd(), 10 * MSS);
        r.on_ack(&ack(MSS));
        assert_eq!(r.cwnd(), 11 * MSS);
    }

    #[test]
    fn an_application_limited_sender_does_not_grow() {
        let mut r = Reno::new(MSS);
        r.on_ack(&AckSample { app_limited: true, ..ack(MSS) });
        assert_eq!(r.cwnd(), 10 * MSS);
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

    #[test]
    fn a_spurious_event_is_undone() {
        let mut r = Reno::new(MSS);
        r.on_congestion(T, 20 * MSS, MSS);
        r.on_spurious_congestion(T);
        assert_eq!((r.cwnd(), r.ssthresh()), (10 * MSS, u32::MAX));
    }

    #[test]
    fn restart_after_idle_caps_at_the_initial_window() {
        let mut r = Reno::new(MSS);
        for _ in 0..50 {
            r.on_ack(&ack(MSS));
        }
        r.on_restart_after_idle(T, Duration::from_secs(5), MSS);
        assert_eq!(r.cwnd(), initial_window(MSS));
    }

    #[test]
    fn set_window_overrides_and_forgets_the_undo_state() {
        let mut r = Reno::new(MSS);
        r.on_congestion(T, 20 * MSS, MSS);
        r.set_window(Some(4 * MSS), Some(3 * MSS));
        assert_eq!((r.cwnd(), r.ssthresh()), (4 * MSS, 3 * MSS));
        r.on_spurious_congestion(T);
        assert_eq!((r.cwnd(), r.ssthresh()), (4 * MSS, 3 * MSS));
        assert_eq!(initial_window_of(MSS, 10), initial_window(MSS));
        assert_eq!(initial_window_of(MSS, 32), 32 * MSS);
    }

    #[test]
    fn the_enum_delegates() {
        let mut c = Congestion::new(Algorithm::Reno, MSS);
        c.on_ack(&ack(MSS));
        assert_eq!(c.cwnd(), 11 * MSS);
    }
}
