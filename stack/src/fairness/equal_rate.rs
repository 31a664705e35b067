//! The `equal-rate` policy: each flow gets `capacity × weight / Σweights`.
//!
//! # The window
//!
//! A window-limited flow delivers `window / (min-RTT + queueing delay)`.
//! Giving flow *i* the window `share_i × (min-RTT_i + δ)`, with the same δ
//! for every flow, makes the queue settle at exactly δ once the shares add
//! up to the capacity, and then every flow delivers exactly its share,
//! whatever its RTT. A per-flow headroom (a percentage of each window)
//! would not: the queueing delay it creates is a larger part of a short
//! RTT than of a long one, and short flows would lose.
//!
//! δ is small ([`EqualRateConfig::min_queue_delay`]) unless the 2·MSS floor
//! forces more: a 4 ms flow whose share is 250 kB/s would need a window of
//! one kilobyte, so δ grows until the floor *is* that flow's share × (RTT +
//! δ), and every other flow's window grows with it.
//!
//! Downloads are paced at their share (wire bytes per second) with a cwnd
//! cap above the same window, so pacing sets the rate and the cap only
//! bounds a burst.
//!
//! # Feedback
//!
//! The capacity used is `capacity × scale`. The scale is pulled down when
//! ratio-RTT shows a standing queue well beyond δ (the capacity is
//! overestimated, or traffic we do not control shares the link) and let up
//! when the link is under-used without a queue. It changes at most once per
//! two of the longest SRTT among the flows, so every flow has seen the
//! previous step and its effect on the queue: a step down only drains the
//! queue it answers at the rate it frees, and a queue lengthens the round
//! trip that tells of it, so steps a min-RTT apart would pull the scale
//! down again and again while the first step's effect is still on its way.
//!
//! Below 1 the scale lets up at least `let_up` per
//! [`EqualRateConfig::let_up_time`], whatever the RTTs: a step per two
//! round trips of a 256 ms flow would hold the link a third empty for
//! seconds after a queue the short flows made, and the newcomer most of all
//! (it joins under the scale). Back at 1 the windows add up to the
//! capacity planned with, so nothing queues for the faster climb.
//!
//! The queue is *standing* when it never drained: each flow's lowest
//! queueing delay (SRTT − min-RTT) since the last step, and the median of
//! those over the flows. A window that opens sends a burst, and the burst a
//! passing queue; the lowest delay sees through it, a single SRTT does not.
//!
//! With a configured capacity and only uploads, the scale may rise above 1,
//! up to [`EqualRateConfig::max_scale`]: windows of exactly share × (RTT + δ)
//! deliver a little less than planned (a receiver's delayed ACKs, windows in
//! whole segments, a sender's bursts, coarse RTTs at a few milliseconds), and
//! only the aggregate shows it. Above 1 the scale rises only while the link
//! is under-used and no queue stands, and goes back to 1 at once when a
//! queue beyond δ stands: more than the capacity's worth of windows shows up
//! as a queue, the queue is the guard, and a queue above the δ the windows
//! were planned with costs the short-RTT flows most (a window of share ×
//! (RTT + δ) delivers share × (RTT + δ) / (RTT + queue)), so it must not
//! linger while the scale steps down.
//!
//! # Rate limit
//!
//! A flow's caps change at most once per two of its SRTTs; a new flow gets
//! its caps at once.

use foldhash::fast::FixedState;
use hashbrown::HashMap;

use super::{Capacity, CapacityEstimate, Caps, Direction, FlowSample, bytes_per_sec, wire_factor};
use crate::time::{Duration, Instant};

/// The knobs of [`EqualRate`].
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EqualRateConfig {
    /// The common queueing delay δ each window includes, at least: the
    /// headroom that keeps the link busy.
    pub min_queue_delay: Duration,
    /// δ never exceeds this, even when the floor asks for more.
    pub max_queue_delay: Duration,
    /// A median queueing delay this far above δ is a standing queue.
    pub standing_queue: Duration,
    /// The scale's step down on a standing queue (0.9 = −10 %).
    pub pull_down: f64,
    /// The scale's step up when the link is under-used (1.05 = +5 %).
    pub let_up: f64,
    /// Below 1, the scale lets up by `let_up` at least once per this much
    /// time (in one step, compounded), however long the RTTs.
    pub let_up_time: Duration,
    /// The link is under-used when the flows deliver less than this
    /// fraction of the capacity.
    pub under_used: f64,
    /// The lowest scale.
    pub min_scale: f64,
    /// The highest scale with a configured capacity: above 1 the windows
    /// add up to more than the capacity, which makes up for what they
    /// deliver short of the plan; a standing queue brings it back down.
    pub max_scale: f64,
    /// The highest scale with an estimated capacity: how hard to probe for
    /// more than was measured.
    pub max_scale_estimated: f64,
    /// A download's cwnd cap is its window times this, plus 2·MSS (pacing
    /// sets its rate; the cap only bounds a burst, and must leave room for
    /// the ACKs a receiver delays).
    pub cwnd_headroom: f64,
    /// A flow's caps change at most once per this many of its SRTTs.
    pub update_rtts: u32,
    /// A flow counts as settled (for a scale above 1) this many of its
    /// SRTTs after it first delivered half an equal share.
    pub settle_rtts: u32,
    /// How an upload's gain moves (the delayed ACKs and segment rounding
    /// of a receiver make a window deliver a little less than planned, by
    /// an amount that depends on the flow): towards the mean of the
    /// uploads' delivery over share, by the square root of the error, each step within
    /// `[1 / gain_step, gain_step]`.
    pub gain_step: f64,
    /// The gain stays within `[1 / max_gain, max_gain]`.
    pub max_gain: f64,
    /// A gain changes at most this often (delivery rates are measured over
    /// about as long), and not in a flow's first `gain_after`.
    pub gain_interval: Duration,
    /// See `gain_interval`: a young flow is still ramping up.
    pub gain_after: Duration,
}

impl Default for EqualRateConfig {
    fn default() -> EqualRateConfig {
        EqualRateConfig {
            min_queue_delay: Duration::from_millis(2),
            max_queue_delay: Duration::from_millis(50),
            standing_queue: Duration::from_millis(10),
            pull_down: 0.9,
            let_up: 1.05,
            let_up_time: Duration::from_millis(100),
            under_used: 0.97,
            min_scale: 0.5,
            max_scale: 1.25,
            max_scale_estimated: 1.25,
            cwnd_headroom: 2.0,
            update_rtts: 2,
            settle_rtts: 4,
            gain_step: 1.25,
            max_gain: 4.0,
            gain_interval: Duration::from_millis(250),
            gain_after: Duration::from_secs(2),
        }
    }
}

#[derive(Clone, Copy, Debug)]
struct FlowState {
    joined: Instant,
    updated: Instant,
    gain_updated: Instant,
    /// The flow's correction: its window (and pacing rate) over the plan.
    gain: f64,
    caps: Caps,
    /// The lowest queueing delay seen since the scale's last step.
    queue_min: Duration,
    /// When the flow first delivered half an equal share: its ramp is
    /// over a few RTTs later.
    ramped: Option<Instant>,
}

/// The `equal-rate` policy (see the [module documentation](self)).
#[derive(Clone, Debug)]
pub struct EqualRate {
    cfg: EqualRateConfig,
    flows: HashMap<u64, FlowState, FixedState>,
    scale: f64,
    scale_updated: Option<Instant>,
    estimate: CapacityEstimate,
    /// Room for the queueing delays the median is taken of, kept so that
    /// deciding allocates nothing in steady state.
    delays: Vec<u64>,
}

impl EqualRate {
    /// The policy with `cfg`.
    pub fn new(cfg: EqualRateConfig) -> EqualRate {
        EqualRate {
            cfg,
            flows: HashMap::with_hasher(FixedState::default()),
            scale: 1.0,
            scale_updated: None,
            estimate: CapacityEstimate::default(),
            delays: Vec::new(),
        }
    }

    /// The configuration.
    pub fn config(&self) -> &EqualRateConfig {
        &self.cfg
    }

    /// The fraction of the capacity in force (see the module documentation).
    pub fn scale(&self) -> f64 {
        self.scale
    }

    /// The caps for `flows`, appended to `out` in order.
    pub(super) fn decide(&mut self, now: Instant, capacity: Capacity, flows: &[FlowSample], out: &mut Vec<Caps>) {
        self.flows.retain(|id, _| flows.iter().any(|f| f.id == *id));
        let estimated = self.estimate.update(now, flows);
        let (base, max_scale, configured) = match capacity {
            Capacity::Configured(bps) => (Some(bytes_per_sec(bps)), self.cfg.max_scale, true),
            Capacity::Estimated => (estimated, self.cfg.max_scale_estimated, false),
        };
        let Some(base) = base.filter(|_| !flows.is_empty()) else {
            out.extend(flows.iter().map(|_| Caps::NONE));
            return;
        };
        for f in flows {
            let queue = f.srtt.saturating_sub(f.min_rtt);
            self.flows.entry(f.id).and_modify(|s| s.queue_min = s.queue_min.min(queue)).or_insert(FlowState {
                joined: now,
                updated: now,
                gain_updated: now,
                gain: 1.0,
                caps: Caps::NONE,
                queue_min: queue,
                ramped: None,
            });
        }
        self.adjust_scale(now, base, max_scale, configured, flows);
        let capacity = base * self.scale;
        let total_weight: f64 = flows.iter().map(|f| f.weight.max(0.0)).sum::<f64>().max(f64::MIN_POSITIVE);
        // Payload bytes per second of each flow's share.
        let share = |f: &FlowSample| capacity * f.weight.max(0.0) / total_weight / wire_factor(f.mss);
        let delta = self.common_delay(flows, share);
        // Delivery over share, for the uploads measured past their ramp:
        // the gains pull each towards the mean (the scale, not the gains,
        // sets the total). Downloads need none: pacing sets their rates.
        let norm = |f: &FlowSample| f.delivery_rate / share(f).max(1.0);
        let mature = |f: &FlowSample| {
            f.direction == Direction::Upload
                && f.delivery_rate > 0.0
                && self.flows.get(&f.id).is_some_and(|s| now.saturating_since(s.joined) >= self.cfg.gain_after)
        };
        let count = flows.iter().filter(|f| mature(f)).count();
        let mean = flows.iter().filter(|f| mature(f)).map(norm).sum::<f64>() / count.max(1) as f64;
        for f in flows {
            let Some(state) = self.flows.get_mut(&f.id) else {
                out.push(Caps::NONE);
                continue;
            };
            let new = state.caps == Caps::NONE;
            let due = new
                || now.saturating_since(state.updated)
                    >= f.srtt.max(f.min_rtt).saturating_mul(self.cfg.update_rtts.into());
            if !due {
                out.push(state.caps);
                continue;
            }
            if count > 1
                && f.direction == Direction::Upload
                && f.delivery_rate > 0.0
                && now.saturating_since(state.joined) >= self.cfg.gain_after
                && now.saturating_since(state.gain_updated) >= self.cfg.gain_interval
            {
                let step = (mean / norm(f)).sqrt().clamp(1.0 / self.cfg.gain_step, self.cfg.gain_step);
                state.gain = (state.gain * step).clamp(1.0 / self.cfg.max_gain, self.cfg.max_gain);
                state.gain_updated = now;
            }
            state.updated = now;
            state.caps = caps_for(&self.cfg, f, share(f) * state.gain, delta);
            out.push(state.caps);
        }
    }

    /// δ: the common queueing delay in every window (module documentation).
    fn common_delay(&self, flows: &[FlowSample], share: impl Fn(&FlowSample) -> f64) -> Duration {
        let needed = flows
            .iter()
            .map(|f| {
                let s = share(f).max(1.0);
                let floor_time = f64::from(f.floor()) / s;
                (floor_time * 1e6) as u64
            })
            .zip(flows)
            .map(|(floor_us, f)| floor_us.saturating_sub(f.min_rtt.total_micros()))
            .max()
            .unwrap_or(0);
        Duration::from_micros(needed.max(self.cfg.min_queue_delay.total_micros()))
            .min(self.cfg.max_queue_delay.max(self.cfg.min_queue_delay))
    }

    /// Pulls the scale down on a standing queue, lets it up on an idle
    /// link, and brings it back towards 1 from above once a queue stands.
    /// With an estimated capacity the scale probes above 1 as before: the
    /// estimate only grows by what the probe delivers.
    fn adjust_scale(&mut self, now: Instant, base: f64, max_scale: f64, configured: bool, flows: &[FlowSample]) {
        let longest = flows.iter().map(|f| f.srtt.max(f.min_rtt)).max().unwrap_or(Duration::ZERO);
        let since = self.scale_updated.map(|at| now.saturating_since(at));
        if since.is_some_and(|since| since < longest.saturating_mul(2)) {
            return;
        }
        self.delays.clear();
        self.delays.extend(flows.iter().filter_map(|f| self.flows.get(&f.id)).map(|s| s.queue_min.total_micros()));
        let Some(queue) = median(&mut self.delays) else { return };
        for s in self.flows.values_mut() {
            s.queue_min = Duration::MAX;
        }
        let delivered: f64 = flows.iter().map(|f| f.delivery_rate * wire_factor(f.mss)).sum();
        // Above 1 only for uploads, whose windows bound the excess (a
        // download paced above the link queues without bound), and only on
        // what settled flows deliver: a flow still ramping up under-uses
        // the link for reasons no scale would fix, and a window raised
        // under a slow start is overshot at once. A flow is settled
        // `settle_rtts` of its SRTTs after it first delivered half an
        // equal share (and `gain_after` after it joined).
        let half = base * self.scale / flows.len() as f64 / 2.0;
        let cfg = self.cfg;
        let mut settled = true;
        for f in flows {
            let Some(s) = self.flows.get_mut(&f.id) else { continue };
            if s.ramped.is_none() && f.delivery_rate * wire_factor(f.mss) >= half {
                s.ramped = Some(now);
            }
            settled &= f.direction == Direction::Upload
                && now.saturating_since(s.joined) >= cfg.gain_after
                && s.ramped.is_some_and(|at| now.saturating_since(at) >= f.srtt.saturating_mul(cfg.settle_rtts.into()));
        }
        let ceiling = if settled || !configured { max_scale } else { max_scale.min(1.0) };
        let share = |f: &FlowSample| base * self.scale / flows.len() as f64 / wire_factor(f.mss);
        let delta = self.common_delay(flows, share);
        let scale = if queue > delta + self.cfg.standing_queue {
            self.scale * self.cfg.pull_down
        } else if queue > delta && self.scale > 1.0 {
            // Above 1 the windows outgrew the link: back to the plan.
            1.0
        } else if queue <= delta && delivered < self.cfg.under_used * base && self.scale < ceiling {
            let up = if self.scale < 1.0 {
                // Back towards the plan: `let_up` per `let_up_time` at least.
                let periods = since.map_or(0.0, |s| s.as_secs_f64() / self.cfg.let_up_time.as_secs_f64().max(1e-6));
                (self.scale * self.cfg.let_up.powf(periods.clamp(1.0, 20.0))).min(1.0)
            } else {
                self.scale * self.cfg.let_up
            };
            up.min(ceiling)
        } else {
            self.scale
        };
        self.scale = scale.clamp(self.cfg.min_scale, max_scale.max(self.cfg.min_scale));
        self.scale_updated = Some(now);
    }
}

/// The caps of flow `f` for a payload rate of `share` and a common queue `delta`.
fn caps_for(cfg: &EqualRateConfig, f: &FlowSample, share: f64, delta: Duration) -> Caps {
    let rtt = (f.min_rtt + delta).as_secs_f64();
    let window = ((share * rtt) as u64).clamp(u64::from(f.floor()), u64::from(u32::MAX)) as u32;
    match f.direction {
        Direction::Upload => {
            // Whole segments: the sender holds back a partial one
            // (silly-window avoidance), so a fraction would be lost.
            let mss = f.mss.max(1);
            Caps { rcv_wnd: Some(window.div_ceil(mss).saturating_mul(mss)), cwnd: None, pacing: None }
        }
        Direction::Download => {
            let cwnd = (f64::from(window) * cfg.cwnd_headroom) as u64 + u64::from(f.floor());
            Caps {
                rcv_wnd: None,
                cwnd: Some(cwnd.clamp(u64::from(f.floor()), u64::from(u32::MAX)) as u32),
                pacing: Some(((share * wire_factor(f.mss)) as u64).max(1)),
            }
        }
    }
}

/// The median of `delays` (sorted in place), in microseconds.
fn median(delays: &mut [u64]) -> Option<Duration> {
    if delays.is_empty() {
        return None;
    }
    delays.sort_unstable();
    Some(Duration::from_micros(delays[delays.len() / 2]))
}

#[cfg(test)]
mod tests {
    use super::super::tests::flow;
    use super::super::{Policy, wire_factor};
    use super::*;

    const C20: Capacity = Capacity::Configured(20_000_000);
    const C100: Capacity = Capacity::Configured(100_000_000);

    fn decide(p: &mut EqualRate, now_ms: u64, capacity: Capacity, flows: &[FlowSample]) -> Vec<Caps> {
        let mut out = Vec::new();
        p.decide(Instant::from_millis(now_ms), capacity, flows, &mut out);
        out
    }

    fn rate(window: u32, min_rtt_ms: u64, queue: Duration) -> f64 {
        f64::from(window) / (Duration::from_millis(min_rtt_ms) + queue).as_secs_f64()
    }

    /// Upload windows are whole segments: within one MSS of the plan.
    fn assert_near(window: u32, planned: f64) {
        assert!((f64::from(window) - planned).abs() <= 1448.0, "window {window}, planned {planned}");
        assert_eq!(window % 1448, 0);
    }

    #[test]
    fn windows_give_equal_rates_at_the_common_queue() {
        let mut p = EqualRate::new(EqualRateConfig::default());
        let rtts = [4, 16, 64, 256];
        let flows: Vec<_> = rtts.iter().enumerate().map(|(i, &r)| flow(i as u64, Direction::Upload, r, r)).collect();
        let caps = decide(&mut p, 0, C100, &flows);
        let delta = p.cfg.min_queue_delay;
        let share = 100e6 / 8.0 / 4.0 / wire_factor(1448);
        for (c, r) in caps.iter().zip(rtts) {
            assert_near(c.rcv_wnd.unwrap(), share * (Duration::from_millis(r) + delta).as_secs_f64());
            assert_eq!((c.cwnd, c.pacing), (None, None));
        }
        let long = rate(caps[3].rcv_wnd.unwrap(), 256, delta);
        assert!((long / share - 1.0).abs() < 0.01, "{long} vs {share}");
    }

    #[test]
    fn the_floor_raises_the_common_queue_for_everyone() {
        // 10 flows on 20 Mbit/s: the 4 ms flow's share × RTT is under 2·MSS.
        let mut p = EqualRate::new(EqualRateConfig::default());
        let flows: Vec<_> =
            (0..10).map(|i| flow(i, Direction::Upload, 4 * (1 << (i % 7)), 4 * (1 << (i % 7)))).collect();
        let caps = decide(&mut p, 0, C20, &flows);
        assert_eq!(caps[0].rcv_wnd, Some(2896), "the short flow sits on the floor");
        let share = 20e6 / 8.0 / 10.0 / wire_factor(1448);
        let delta = Duration::from_micros((2896.0 / share * 1e6) as u64 - 4000);
        for (c, f) in caps.iter().zip(&flows) {
            assert_near(c.rcv_wnd.unwrap(), share * (f.min_rtt + delta).as_secs_f64());
        }
    }

    #[test]
    fn no_window_goes_below_two_segments() {
        let cfg = EqualRateConfig {
            max_queue_delay: Duration::from_millis(1),
            min_queue_delay: Duration::from_millis(1),
            ..EqualRateConfig::default()
        };
        let mut p = EqualRate::new(cfg);
        let flows: Vec<_> = (0..50).map(|i| flow(i, Direction::Upload, 1, 1)).collect();
        for c in decide(&mut p, 0, Capacity::Configured(1_000_000), &flows) {
            assert_eq!(c.rcv_wnd, Some(2896));
        }
    }

    #[test]
    fn downloads_are_paced_at_their_share() {
        let mut p = EqualRate::new(EqualRateConfig::default());
        let flows = [flow(1, Direction::Download, 10, 10), flow(2, Direction::Download, 200, 200)];
        let caps = decide(&mut p, 0, C100, &flows);
        for c in &caps {
            assert_eq!(c.pacing, Some(6_250_000));
            assert_eq!(c.rcv_wnd, None);
        }
        assert!(caps[1].cwnd.unwrap() > 10 * caps[0].cwnd.unwrap());
    }

    #[test]
    fn weights_split_the_capacity() {
        let mut p = EqualRate::new(EqualRateConfig::default());
        let mut heavy = flow(1, Direction::Download, 50, 50);
        heavy.weight = 3.0;
        let caps = decide(&mut p, 0, C100, &[heavy, flow(2, Direction::Download, 50, 50)]);
        assert_eq!(caps[0].pacing, Some(9_375_000));
        assert_eq!(caps[1].pacing, Some(3_125_000));
    }

    #[test]
    fn a_joining_flow_gets_caps_at_once_and_others_follow_within_two_rtts() {
        let mut p = EqualRate::new(EqualRateConfig::default());
        let a = flow(1, Direction::Download, 100, 100);
        let first = decide(&mut p, 0, C100, &[a])[0];
        assert_eq!(first.pacing, Some(12_500_000));
        let b = flow(2, Direction::Download, 10, 10);
        let caps = decide(&mut p, 50, C100, &[a, b]);
        assert_eq!(caps[1].pacing, Some(6_250_000), "the newcomer gets its share at once");
        assert_eq!(caps[0], first, "the incumbent waits for its slot (2 × 100 ms)");
        let caps = decide(&mut p, 199, C100, &[a, b]);
        assert_eq!(caps[0], first);
        let caps = decide(&mut p, 200, C100, &[a, b]);
        assert_eq!(caps[0].pacing, Some(6_250_000));
    }

    #[test]
    fn a_leaving_flow_frees_its_share() {
        let mut p = EqualRate::new(EqualRateConfig::default());
        let flows = [flow(1, Direction::Download, 20, 20), flow(2, Direction::Download, 20, 20)];
        assert_eq!(decide(&mut p, 0, C100, &flows)[0].pacing, Some(6_250_000));
        assert_eq!(decide(&mut p, 40, C100, &flows[..1])[0].pacing, Some(12_500_000));
        // Forgotten: if it comes back, it is new again and gets caps at once.
        assert_eq!(decide(&mut p, 41, C100, &flows)[1].pacing, Some(6_250_000));
    }

    #[test]
    fn updates_wait_for_two_rtts() {
        let mut p = EqualRate::new(EqualRateConfig::default());
        let f = flow(1, Direction::Upload, 30, 30);
        let before = decide(&mut p, 0, C100, &[f])[0];
        let lower = decide(&mut p, 59, C20, &[f])[0];
        assert_eq!(lower, before, "59 ms < 2 × 30 ms");
        let lower = decide(&mut p, 60, C20, &[f])[0];
        assert!(lower.rcv_wnd < before.rcv_wnd);
    }

    #[test]
    fn a_slow_upload_gets_a_larger_window_once_past_its_ramp() {
        let mut p = EqualRate::new(EqualRateConfig::default());
        let mut flows = [flow(1, Direction::Upload, 4, 4), flow(2, Direction::Upload, 64, 64)];
        let first = decide(&mut p, 0, C20, &flows);
        // The short flow delivers half of what the long one does.
        let share = 20e6 / 8.0 / 2.0 / wire_factor(1448);
        flows[0].delivery_rate = 0.6 * share;
        flows[1].delivery_rate = 1.2 * share;
        let young = decide(&mut p, 1000, C20, &flows);
        assert_eq!(young, first, "no correction in the first 2 s");
        let mut caps = young;
        for t in 0..8 {
            caps = decide(&mut p, 2000 + 300 * t, C20, &flows);
        }
        assert!(caps[0].rcv_wnd.unwrap() > first[0].rcv_wnd.unwrap() * 3 / 2, "{caps:?} vs {first:?}");
        assert!(caps[1].rcv_wnd < first[1].rcv_wnd);
    }

    #[test]
    fn rising_ratio_rtt_pulls_the_scale_down_and_an_idle_link_lets_it_up() {
        let mut p = EqualRate::new(EqualRateConfig::default());
        let mut flows = [flow(1, Direction::Upload, 10, 10), flow(2, Direction::Upload, 40, 40)];
        for f in &mut flows {
            f.delivery_rate = 6.0e6;
        }
        let full = decide(&mut p, 0, C100, &flows)[0].rcv_wnd.unwrap();
        assert_eq!(p.scale(), 1.0);
        // The queue stands at 40 ms: ratio-RTT 5 and 2. Steps wait for two
        // of the longest SRTT (160 ms), the queue included.
        flows[0].srtt = Duration::from_millis(50);
        flows[1].srtt = Duration::from_millis(80);
        let mut t = 0;
        for _ in 0..3 {
            t += 160;
            decide(&mut p, t, C100, &flows);
            decide(&mut p, t + 80, C100, &flows);
        }
        assert!((p.scale() - 0.729).abs() < 1e-9, "three steps down: {}", p.scale());
        t += 100;
        let tightened = decide(&mut p, t, C100, &flows)[0].rcv_wnd.unwrap();
        assert!(tightened < full * 3 / 4, "{tightened} vs {full}");
        assert!((p.scale() - 0.729).abs() < 1e-9, "no step 100 ms after the last: {}", p.scale());
        // The queue drains and the flows deliver little: let up 5 % per
        // `let_up_time` (the first step comes 180 ms after the last), 5 % a
        // step 80 ms apart, up to 1 in six.
        for f in &mut flows {
            f.srtt = f.min_rtt;
            f.delivery_rate = 1.0e6;
        }
        for _ in 0..5 {
            t += 80;
            decide(&mut p, t, C100, &flows);
        }
        assert!((p.scale() - 0.729 * 1.05f64.powf(5.8)).abs() < 1e-9, "{}", p.scale());
        decide(&mut p, t + 80, C100, &flows);
        assert_eq!(p.scale(), 1.0);
    }

    /// A 4 ms and a 256 ms download: after a queue the short one made, the
    /// scale comes back to 1 within about a second, not at 5 % per 512 ms
    /// (two of the long flow's round trips), which would take seconds.
    #[test]
    fn below_one_the_scale_lets_up_by_time_not_by_round_trips() {
        let mut p = EqualRate::new(EqualRateConfig::default());
        let mut flows = [flow(1, Direction::Download, 4, 4), flow(2, Direction::Download, 256, 256)];
        decide(&mut p, 0, C20, &flows);
        flows[0].srtt = Duration::from_millis(34);
        flows[1].srtt = Duration::from_millis(286);
        let mut t = 0;
        for _ in 0..3 {
            t += 572;
            decide(&mut p, t, C20, &flows);
        }
        assert!((p.scale() - 0.729).abs() < 1e-9, "{}", p.scale());
        // The queue drains; the flows deliver what the scale lets them.
        flows[0].srtt = flows[0].min_rtt;
        flows[1].srtt = flows[1].min_rtt;
        for f in &mut flows {
            f.delivery_rate = 0.729 * 20e6 / 8.0 / 2.0 / wire_factor(1448);
        }
        t += 512;
        decide(&mut p, t, C20, &flows);
        let first = p.scale();
        assert!((first - 0.729 * 1.05f64.powf(5.12)).abs() < 1e-6, "one step of 512 ms: {first}");
        t += 512;
        decide(&mut p, t, C20, &flows);
        assert_eq!(p.scale(), 1.0, "back to the plan, and no further");
        for _ in 0..10 {
            t += 512;
            decide(&mut p, t, C20, &flows);
        }
        assert_eq!(p.scale(), 1.0, "downloads never above 1");
    }

    /// Two settled uploads (past `gain_after`) delivering `fraction` of
    /// 100 Mbit/s between them, with no queue.
    fn settled_uploads(p: &mut EqualRate, fraction: f64) -> ([FlowSample; 2], u64) {
        let mut flows = [flow(1, Direction::Upload, 10, 10), flow(2, Direction::Upload, 40, 40)];
        decide(p, 0, C100, &flows);
        for f in &mut flows {
            f.delivery_rate = fraction * 100e6 / 8.0 / 2.0 / wire_factor(1448);
        }
        (flows, 2000)
    }

    #[test]
    fn an_under_used_link_without_a_queue_lets_the_scale_above_one_up_to_its_bound() {
        let mut p = EqualRate::new(EqualRateConfig::default());
        let (flows, mut t) = settled_uploads(&mut p, 0.85);
        let planned = decide(&mut p, t, C100, &flows)[0].rcv_wnd.unwrap();
        for _ in 0..3 {
            t += 80;
            decide(&mut p, t, C100, &flows);
        }
        assert!(p.scale() > 1.1, "{}", p.scale());
        t += 80;
        assert!(decide(&mut p, t, C100, &flows)[0].rcv_wnd.unwrap() > planned);
        for _ in 0..50 {
            t += 80;
            decide(&mut p, t, C100, &flows);
        }
        assert_eq!(p.scale(), p.cfg.max_scale, "never past the bound");
    }

    #[test]
    fn a_used_link_or_a_young_flow_keeps_the_scale_at_one() {
        let mut p = EqualRate::new(EqualRateConfig::default());
        let (flows, t) = settled_uploads(&mut p, 0.98);
        for i in 0..10 {
            decide(&mut p, t + 80 * i, C100, &flows);
        }
        assert_eq!(p.scale(), 1.0, "the link is used");
        let mut p = EqualRate::new(EqualRateConfig::default());
        let (flows, _) = settled_uploads(&mut p, 0.85);
        for i in 0..10 {
            decide(&mut p, 80 * i, C100, &flows);
        }
        assert_eq!(p.scale(), 1.0, "the flows are still ramping up");
    }

    #[test]
    fn downloads_never_take_the_scale_above_one() {
        let mut p = EqualRate::new(EqualRateConfig::default());
        let mut flows = [flow(1, Direction::Download, 10, 10), flow(2, Direction::Download, 40, 40)];
        decide(&mut p, 0, C100, &flows);
        for f in &mut flows {
            f.delivery_rate = 0.8 * 100e6 / 8.0 / 2.0 / wire_factor(1448);
        }
        for i in 0..20 {
            decide(&mut p, 2000 + 80 * i, C100, &flows);
        }
        assert_eq!(p.scale(), 1.0);
    }

    #[test]
    fn a_standing_queue_brings_the_scale_back_to_one_and_below() {
        let mut p = EqualRate::new(EqualRateConfig::default());
        let (mut flows, mut t) = settled_uploads(&mut p, 0.85);
        for _ in 0..10 {
            t += 80;
            decide(&mut p, t, C100, &flows);
        }
        let high = p.scale();
        assert!(high > 1.2, "{high}");
        // A queue of 5 ms stands (beyond δ = 2 ms, short of δ + 10 ms): back
        // to 1 at once, and not below 1 for that.
        flows[0].srtt = Duration::from_millis(15);
        flows[1].srtt = Duration::from_millis(45);
        t += 90;
        decide(&mut p, t, C100, &flows);
        assert_eq!(p.scale(), 1.0);
        for _ in 0..20 {
            t += 90;
            decide(&mut p, t, C100, &flows);
        }
        assert_eq!(p.scale(), 1.0);
        // A queue of 20 ms pulls it under 1.
        flows[0].srtt = Duration::from_millis(30);
        flows[1].srtt = Duration::from_millis(60);
        t += 120;
        decide(&mut p, t, C100, &flows);
        assert!((p.scale() - 0.9).abs() < 1e-9, "{}", p.scale());
    }

    #[test]
    fn a_passing_burst_is_not_a_standing_queue() {
        let mut p = EqualRate::new(EqualRateConfig::default());
        let (mut flows, t) = settled_uploads(&mut p, 0.98);
        decide(&mut p, t, C100, &flows);
        // The sample the step is decided on sees 30 ms of queue; the others
        // since the last step saw none.
        // (Only the last comes two of the longest SRTT after the last step.)
        for (at, queue) in [(20, 0), (40, 0), (60, 0), (150, 30)] {
            flows[0].srtt = Duration::from_millis(10 + queue);
            flows[1].srtt = Duration::from_millis(40 + queue);
            decide(&mut p, t + at, C100, &flows);
        }
        assert_eq!(p.scale_updated, Some(Instant::from_millis(t + 150)), "a step was decided");
        assert_eq!(p.scale(), 1.0);
    }

    #[test]
    fn an_estimated_capacity_is_still_probed_above_it_by_downloads() {
        let mut p = EqualRate::new(EqualRateConfig::default());
        let mut flows = [flow(1, Direction::Download, 10, 10), flow(2, Direction::Download, 40, 40)];
        for f in &mut flows {
            f.delivery_rate = 1_000_000.0;
        }
        decide(&mut p, 0, Capacity::Estimated, &flows);
        // Delivery falls below the estimate without a queue: probe up.
        for f in &mut flows {
            f.delivery_rate = 800_000.0;
        }
        for i in 1..10 {
            decide(&mut p, 80 * i, Capacity::Estimated, &flows);
        }
        assert!(p.scale() > 1.1, "{}", p.scale());
    }

    #[test]
    fn an_estimated_capacity_follows_delivery() {
        let mut p = Policy::EqualRate(EqualRate::new(EqualRateConfig::default()));
        let mut f = flow(1, Direction::Download, 20, 20);
        let mut out = Vec::new();
        p.decide(Instant::ZERO, Capacity::Estimated, &[f], &mut out);
        assert_eq!(out, [Caps::NONE], "nothing measured yet");
        f.delivery_rate = 1_000_000.0;
        p.decide(Instant::from_millis(100), Capacity::Estimated, &[f], &mut out);
        let pacing = out[0].pacing.unwrap() as f64;
        assert!((pacing / (1e6 * wire_factor(1448)) - 1.0).abs() < 0.01, "{pacing}");
    }
}
