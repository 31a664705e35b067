//! CUBIC (RFC 9438) with HyStart++ (RFC 9406) for leaving slow start.

use crate::tcp::congestion::{AckSample, CongestionControl};
use crate::time::{Duration, Instant};

/// CUBIC congestion control.
#[derive(Clone, Debug)]
pub struct Cubic {
    _todo: (),
}

impl Cubic {
    /// A fresh instance with the initial window of RFC 6928.
    pub fn new(mss: u32) -> Cubic {
        let _ = mss;
        todo!()
    }
}

impl CongestionControl for Cubic {
    fn cwnd(&self) -> u32 {
        todo!()
    }
    fn ssthresh(&self) -> u32 {
        todo!()
    }
    fn on_ack(&mut self, ack: &AckSample) {
        let _ = ack;
        todo!()
    }
    fn on_congestion(&mut self, now: Instant, flight: u32, mss: u32) {
        let _ = (now, flight, mss);
        todo!()
    }
    fn on_recovery_end(&mut self, now: Instant, flight: u32, mss: u32) {
        let _ = (now, flight, mss);
        todo!()
    }
    fn on_timeout(&mut self, now: Instant, flight: u32, mss: u32) {
        let _ = (now, flight, mss);
        todo!()
    }
    fn on_spurious_congestion(&mut self, now: Instant) {
        let _ = now;
        todo!()
    }
    fn on_restart_after_idle(&mut self, now: Instant, idle: Duration, mss: u32) {
        let _ = (now, idle, mss);
        todo!()
    }
}
