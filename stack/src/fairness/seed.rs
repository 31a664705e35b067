//! The `seed` policy: the rule of the study Fairway grows from, where
//! Android terminals sharing a WLAN capped their windows from the number of
//! terminals and their RTT class, tightening as ratio-RTT rose.
//!
//! A flow's cap is looked up, not computed: the table of its RTT class
//! (min-RTT below [`SeedConfig::rtt_class_boundary`], or at or above it)
//! gives, for the number of active flows, a window in milliseconds of the
//! flow's equal share of the capacity; the tightening table then scales it
//! down by the flow's ratio-RTT. The rule knows two RTTs only, so within a
//! class the flows with the shorter RTT still get more; that coarseness is
//! what `equal-rate` removes. Downloads get the window as a cwnd cap.

use foldhash::fast::FixedState;
use hashbrown::HashMap;

use super::{Capacity, CapacityEstimate, Caps, Direction, FlowSample, bytes_per_sec, wire_factor};
use crate::time::{Duration, Instant};

/// The tables of [`Seed`].
#[derive(Clone, Debug, PartialEq)]
pub struct SeedConfig {
    /// Flows with a min-RTT below this are in the short class.
    pub rtt_class_boundary: Duration,
    /// Short class: the window for N = 1, 2, … active flows, in
    /// milliseconds of a flow's equal share (capacity / N); the last entry
    /// holds for more flows.
    pub short_rtt_ms: Vec<u32>,
    /// Long class, likewise.
    pub long_rtt_ms: Vec<u32>,
    /// (ratio-RTT bound, percent): the first row whose bound exceeds the
    /// flow's ratio-RTT scales its window; past the last row, the last
    /// percentage holds.
    pub tightening: Vec<(f64, u32)>,
    /// A flow's cap changes at most once per this many of its SRTTs.
    pub update_rtts: u32,
}

impl Default for SeedConfig {
    fn default() -> SeedConfig {
        SeedConfig {
            rtt_class_boundary: Duration::from_millis(100),
            short_rtt_ms: vec![60, 50, 45, 40, 35, 35, 30, 30, 30, 30],
            long_rtt_ms: vec![400, 350, 320, 300, 280, 270, 260, 250, 250, 250],
            tightening: vec![(1.25, 100), (1.5, 90), (2.0, 75), (3.0, 60), (f64::INFINITY, 50)],
            update_rtts: 2,
        }
    }
}

impl SeedConfig {
    /// The table entry for `flows` active flows in the class of `min_rtt`.
    pub fn window_ms(&self, flows: usize, min_rtt: Duration) -> u32 {
        let table = if min_rtt < self.rtt_class_boundary { &self.short_rtt_ms } else { &self.long_rtt_ms };
        let i = flows.max(1) - 1;
        table.get(i).or(table.last()).copied().unwrap_or(0)
    }

    /// The percentage the tightening table gives `ratio_rtt`.
    pub fn tightening_percent(&self, ratio_rtt: f64) -> u32 {
        self.tightening
            .iter()
            .find(|&&(bound, _)| ratio_rtt < bound)
            .or(self.tightening.last())
            .map_or(100, |&(_, percent)| percent)
    }
}

#[derive(Clone, Copy, Debug)]
struct FlowState {
    updated: Instant,
    caps: Caps,
}

/// The `seed` policy (see the [module documentation](self)).
#[derive(Clone, Debug)]
pub struct Seed {
    cfg: SeedConfig,
    flows: HashMap<u64, FlowState, FixedState>,
    estimate: CapacityEstimate,
}

impl Seed {
    /// The policy with `cfg`.
    pub fn new(cfg: SeedConfig) -> Seed {
        Seed { cfg, flows: HashMap::with_hasher(FixedState::default()), estimate: CapacityEstimate::default() }
    }

    /// The tables.
    pub fn config(&self) -> &SeedConfig {
        &self.cfg
    }

    pub(super) fn decide(&mut self, now: Instant, capacity: Capacity, flows: &[FlowSample], out: &mut Vec<Caps>) {
        self.flows.retain(|id, _| flows.iter().any(|f| f.id == *id));
        let estimated = self.estimate.update(now, flows);
        let capacity = match capacity {
            Capacity::Configured(bps) => Some(bytes_per_sec(bps)),
            Capacity::Estimated => estimated,
        };
        let Some(capacity) = capacity else {
            out.extend(flows.iter().map(|_| Caps::NONE));
            return;
        };
        let n = flows.len();
        for f in flows {
            let due = self.flows.get(&f.id).is_none_or(|s| {
                now.saturating_since(s.updated) >= f.srtt.max(f.min_rtt).saturating_mul(self.cfg.update_rtts.into())
            });
            if due {
                let share = capacity / n as f64 / wire_factor(f.mss);
                let ms = f64::from(self.cfg.window_ms(n, f.min_rtt));
                let percent = f64::from(self.cfg.tightening_percent(f.ratio_rtt()));
                let window = (share * ms / 1000.0 * percent / 100.0) as u64;
                let window = window.clamp(u64::from(f.floor()), u64::from(u32::MAX)) as u32;
                let caps = match f.direction {
                    Direction::Upload => Caps { rcv_wnd: Some(window), ..Caps::NONE },
                    Direction::Download => Caps { cwnd: Some(window), ..Caps::NONE },
                };
                self.flows.insert(f.id, FlowState { updated: now, caps });
            }
            out.push(self.flows[&f.id].caps);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::tests::flow;
    use super::*;

    const C20: Capacity = Capacity::Configured(20_000_000);

    fn decide(p: &mut Seed, now_ms: u64, flows: &[FlowSample]) -> Vec<Caps> {
        let mut out = Vec::new();
        p.decide(Instant::from_millis(now_ms), C20, flows, &mut out);
        out
    }

    #[test]
    fn the_tables_are_looked_up_by_class_and_count() {
        let cfg = SeedConfig::default();
        assert_eq!(cfg.window_ms(1, Duration::from_millis(4)), 60);
        assert_eq!(cfg.window_ms(2, Duration::from_millis(99)), 50);
        assert_eq!(cfg.window_ms(2, Duration::from_millis(100)), 350);
        assert_eq!(cfg.window_ms(40, Duration::from_millis(256)), 250);
        assert_eq!(cfg.tightening_percent(1.0), 100);
        assert_eq!(cfg.tightening_percent(1.6), 75);
        assert_eq!(cfg.tightening_percent(100.0), 50);
    }

    #[test]
    fn caps_follow_the_rtt_class_and_direction() {
        let mut p = Seed::new(SeedConfig::default());
        let caps = decide(&mut p, 0, &[flow(1, Direction::Upload, 10, 10), flow(2, Direction::Download, 200, 200)]);
        let share = 20e6 / 8.0 / 2.0 / wire_factor(1448);
        assert_eq!(caps[0].rcv_wnd, Some((share * 0.050) as u32));
        assert_eq!(caps[1].cwnd, Some((share * 0.350) as u32));
        assert_eq!(caps[1].pacing, None);
    }

    #[test]
    fn rising_ratio_rtt_tightens_the_window() {
        let mut p = Seed::new(SeedConfig::default());
        let mut f = flow(1, Direction::Upload, 50, 50);
        let mut windows = Vec::new();
        for (i, srtt) in [50, 70, 90, 140, 200].into_iter().enumerate() {
            f.srtt = Duration::from_millis(srtt);
            windows.push(decide(&mut p, 1000 * i as u64, &[f])[0].rcv_wnd.unwrap());
        }
        assert!(windows.windows(2).all(|w| w[1] < w[0]), "{windows:?}");
        assert!(windows[4].abs_diff(windows[0] / 2) <= 1, "{windows:?}");
    }

    #[test]
    fn joining_flows_shrink_everyone_and_the_floor_holds() {
        let mut p = Seed::new(SeedConfig::default());
        let one = decide(&mut p, 0, &[flow(1, Direction::Upload, 4, 4)])[0].rcv_wnd.unwrap();
        let flows: Vec<_> = (1..=10).map(|i| flow(i, Direction::Upload, 4, 4)).collect();
        let ten = decide(&mut p, 100, &flows);
        assert!(ten[0].rcv_wnd.unwrap() < one / 5);
        assert!(ten.iter().all(|c| c.rcv_wnd.unwrap() >= 2896), "{ten:?}");
    }

    #[test]
    fn updates_wait_for_two_rtts() {
        let mut p = Seed::new(SeedConfig::default());
        let mut f = flow(1, Direction::Download, 40, 40);
        let first = decide(&mut p, 0, &[f])[0];
        f.srtt = Duration::from_millis(41);
        f.min_rtt = Duration::from_millis(20);
        assert_eq!(decide(&mut p, 81, &[f])[0], first, "81 ms < 2 × 41 ms");
        assert_ne!(decide(&mut p, 82, &[f])[0], first);
    }
}
