//! RTT-aware window control: the policies that keep flows with very
//! different round-trip times fair, from the server's side alone.
//!
//! A sender is limited by min(cwnd, rwnd), so a receiver that advertises
//! `rwnd = share × RTT` sets an uploader's rate whatever congestion control
//! it runs, and a sender that caps its own cwnd and pacing rate sets a
//! download's. A [`Policy`] sees a [`FlowSample`] of every active flow
//! (min-RTT, SRTT and their ratio — the queueing signal of the seed study —,
//! delivery rate, direction, weight) and the bottleneck's capacity, and
//! returns one [`Caps`] per flow. The [`Driver`] reads the flows of a
//! [`Shard`](crate::Shard) and applies what a policy decided; like the rest
//! of the stack it is sans-IO: time is passed in.
//!
//! The policies:
//! - [`Policy::Off`]: plain TCP, no caps (the baseline);
//! - [`Policy::Seed`]: the seed study's table-driven rule ([`seed`]);
//! - [`Policy::EqualRate`]: a continuous equal (or weighted) share of the
//!   capacity for each flow ([`equal_rate`]).
//!
//! Fairness is judged with [`jain_index`].

pub mod driver;
pub mod equal_rate;
pub mod seed;

use crate::time::{Duration, Instant};

pub use driver::{Driver, DriverConfig};
pub use equal_rate::{EqualRate, EqualRateConfig};
pub use seed::{Seed, SeedConfig};

/// Which way a flow's data goes, seen from the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Direction {
    /// The peer sends, we receive: controlled through the window we advertise.
    Upload,
    /// We send: controlled through our cwnd and pacing rate.
    Download,
}

/// What a policy knows about one active flow.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FlowSample {
    /// Stable while the flow lives; never reused for another flow while a
    /// policy may still hold state about this one.
    pub id: u64,
    /// Upload or download.
    pub direction: Direction,
    /// The queue-free round trip (windowed minimum).
    pub min_rtt: Duration,
    /// The smoothed round trip now (for uploads, the receiver-side estimate).
    pub srtt: Duration,
    /// Payload bytes per second recently delivered (0 until measured).
    pub delivery_rate: f64,
    /// The flow's maximum segment size, bytes.
    pub mss: u32,
    /// Relative weight of the flow's share (1.0 for an equal share).
    pub weight: f64,
}

impl FlowSample {
    /// ratio-RTT = SRTT / min-RTT: 1 on an empty path, growing with the
    /// standing queue the flow sees.
    pub fn ratio_rtt(&self) -> f64 {
        self.srtt.total_micros() as f64 / self.min_rtt.total_micros().max(1) as f64
    }

    /// The smallest window any policy sets: 2·MSS, so a flow never stalls.
    pub fn floor(&self) -> u32 {
        2 * self.mss
    }
}

/// The bottleneck's capacity as a policy sees it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Capacity {
    /// Configured, in bits per second on the wire (`--capacity 100mbit`).
    Configured(u64),
    /// Estimated from the aggregate delivery rate.
    Estimated,
}

/// Per-flow caps a policy asks for; `None` means uncapped.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Caps {
    /// The cap on the window we advertise (uploads), bytes.
    pub rcv_wnd: Option<u32>,
    /// The cap on our congestion window (downloads), bytes.
    pub cwnd: Option<u32>,
    /// The cap on our pacing rate (downloads), wire bytes per second.
    pub pacing: Option<u64>,
}

impl Caps {
    /// No cap at all.
    pub const NONE: Caps = Caps { rcv_wnd: None, cwnd: None, pacing: None };
}

/// Per-segment bytes on the wire beyond the payload: Ethernet (14), IPv4
/// (20) and TCP with timestamps (32). Capacities and pacing rates count wire
/// bytes; windows and delivery rates count payload.
pub const WIRE_OVERHEAD: u32 = 14 + 20 + 32;

/// Wire bytes per payload byte for segments of `mss`.
pub fn wire_factor(mss: u32) -> f64 {
    f64::from(mss + WIRE_OVERHEAD) / f64::from(mss.max(1))
}

/// A window-control policy. Call [`decide`](Policy::decide) with every
/// active flow, as often as convenient: the policies keep their own rate
/// limits and return the caps in force (unchanged ones included).
#[derive(Clone, Debug)]
pub enum Policy {
    /// No caps: plain TCP.
    Off,
    /// The seed study's table-driven rule.
    Seed(Seed),
    /// Equal (or weighted) shares of the capacity.
    EqualRate(EqualRate),
}

impl Policy {
    /// The policy named `name` (`off`, `seed`, `equal-rate`) with its
    /// default configuration.
    pub fn from_name(name: &str) -> Option<Policy> {
        match name {
            "off" => Some(Policy::Off),
            "seed" => Some(Policy::Seed(Seed::new(SeedConfig::default()))),
            "equal-rate" => Some(Policy::EqualRate(EqualRate::new(EqualRateConfig::default()))),
            _ => None,
        }
    }

    /// The policy's name, as [`from_name`](Policy::from_name) takes it.
    pub fn name(&self) -> &'static str {
        match self {
            Policy::Off => "off",
            Policy::Seed(_) => "seed",
            Policy::EqualRate(_) => "equal-rate",
        }
    }

    /// The caps for `flows` at `now`, one per flow in the same order, into
    /// `out` (cleared first). Flows absent from `flows` are forgotten.
    pub fn decide(&mut self, now: Instant, capacity: Capacity, flows: &[FlowSample], out: &mut Vec<Caps>) {
        out.clear();
        match self {
            Policy::Off => out.extend(flows.iter().map(|_| Caps::NONE)),
            Policy::Seed(p) => p.decide(now, capacity, flows, out),
            Policy::EqualRate(p) => p.decide(now, capacity, flows, out),
        }
    }
}

/// Jain's fairness index J = (Σx)² / (n·Σx²): 1 when every `x` is equal,
/// 1/n when one takes everything. An empty or all-zero input is fair (1).
pub fn jain_index(xs: &[f64]) -> f64 {
    let sum: f64 = xs.iter().sum();
    let squares: f64 = xs.iter().map(|x| x * x).sum();
    if xs.is_empty() || squares == 0.0 {
        return 1.0;
    }
    sum * sum / (xs.len() as f64 * squares)
}

/// Bytes per second on the wire, from bits per second.
pub(crate) fn bytes_per_sec(bits_per_sec: u64) -> f64 {
    bits_per_sec as f64 / 8.0
}

/// Tracks the bottleneck's capacity from the aggregate delivery rate: the
/// highest aggregate seen recently, in wire bytes per second.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CapacityEstimate {
    best: f64,
    at: Option<Instant>,
}

impl CapacityEstimate {
    /// How long a maximum is trusted before a lower aggregate replaces it.
    const WINDOW: Duration = Duration::from_secs(10);

    /// Wire bytes per second the bottleneck carries, once anything was measured.
    pub(crate) fn update(&mut self, now: Instant, flows: &[FlowSample]) -> Option<f64> {
        let aggregate: f64 = flows.iter().map(|f| f.delivery_rate * wire_factor(f.mss)).sum();
        let stale = self.at.is_none_or(|at| now.saturating_since(at) > Self::WINDOW);
        if aggregate > self.best || stale {
            self.best = aggregate;
            self.at = Some(now);
        }
        (self.best > 0.0).then_some(self.best)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    /// A flow for the policy tests: 1448-byte MSS, weight 1.
    pub(crate) fn flow(id: u64, direction: Direction, min_rtt_ms: u64, srtt_ms: u64) -> FlowSample {
        FlowSample {
            id,
            direction,
            min_rtt: Duration::from_millis(min_rtt_ms),
            srtt: Duration::from_millis(srtt_ms),
            delivery_rate: 0.0,
            mss: 1448,
            weight: 1.0,
        }
    }

    #[test]
    fn jain_index_of_equal_and_unequal_shares() {
        assert_eq!(jain_index(&[5.0, 5.0, 5.0]), 1.0);
        assert!((jain_index(&[1.0, 0.0, 0.0, 0.0]) - 0.25).abs() < 1e-12);
        assert!((jain_index(&[1.0, 2.0]) - 0.9).abs() < 1e-12);
        assert_eq!(jain_index(&[]), 1.0);
        assert_eq!(jain_index(&[0.0, 0.0]), 1.0);
    }

    #[test]
    fn ratio_rtt_and_floor() {
        let f = flow(1, Direction::Upload, 4, 12);
        assert!((f.ratio_rtt() - 3.0).abs() < 1e-12);
        assert_eq!(f.floor(), 2896);
    }

    #[test]
    fn off_caps_nothing() {
        let mut p = Policy::from_name("off").unwrap();
        let mut out = Vec::new();
        let flows = [flow(1, Direction::Upload, 4, 40), flow(2, Direction::Download, 256, 300)];
        p.decide(Instant::ZERO, Capacity::Configured(20_000_000), &flows, &mut out);
        assert_eq!(out, [Caps::NONE, Caps::NONE]);
    }

    #[test]
    fn names_round_trip() {
        for name in ["off", "seed", "equal-rate"] {
            assert_eq!(Policy::from_name(name).unwrap().name(), name);
        }
        assert!(Policy::from_name("bbr").is_none());
    }

    #[test]
    fn capacity_estimate_follows_the_aggregate() {
        let mut est = CapacityEstimate::default();
        let mut f = flow(1, Direction::Upload, 10, 10);
        assert_eq!(est.update(Instant::ZERO, &[f]), None);
        f.delivery_rate = 1_000_000.0;
        let got = est.update(Instant::from_secs(1), &[f]).unwrap();
        assert!((got - 1_000_000.0 * wire_factor(1448)).abs() < 1e-6);
        f.delivery_rate = 500_000.0;
        assert_eq!(est.update(Instant::from_secs(2), &[f]), Some(got), "a maximum holds for a while");
        let later = est.update(Instant::from_secs(12), &[f]).unwrap();
        assert!(later < got, "and then gives way");
    }
}
