//! [`Driver`]: applies a [`Policy`] to the flows of a [`Shard`].
//!
//! The application tells the driver which of its connections to control
//! ([`track`](Driver::track), with the direction and a weight); the driver
//! turns each one's [`FlowStats`] into a [`FlowSample`] (keeping the
//! delivery rate and, for uploads, the receiver-side RTT's minimum, which
//! the stack does not), asks the policy, and sets the caps that changed.
//! Sans-IO like the shard: call [`run`](Driver::run) at or after
//! [`poll_at`](Driver::poll_at) with the current time.

use super::{Capacity, CapacityEstimate, Caps, Direction, FlowSample, Policy, bytes_per_sec, wire_factor};
use crate::api::{FlowStats, Handle};
use crate::shard::Shard;
use crate::time::{Duration, Instant};

/// How a [`Driver`] runs.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DriverConfig {
    /// The bottleneck's capacity, configured or estimated.
    pub capacity: Capacity,
    /// How often the driver wants to run. The policies rate-limit each
    /// flow themselves; this only bounds how late a due update happens.
    pub interval: Duration,
    /// A flow that delivered nothing for this long (and joined earlier)
    /// is not active: it holds no share.
    pub idle_after: Duration,
    /// The shortest interval a delivery rate is measured over (a flow's
    /// SRTT is used when longer).
    pub rate_interval: Duration,
}

impl DriverConfig {
    /// Defaults for `capacity`: run every 5 ms, idle after 1 s, rates over
    /// at least 100 ms.
    pub fn new(capacity: Capacity) -> DriverConfig {
        DriverConfig {
            capacity,
            interval: Duration::from_millis(5),
            idle_after: Duration::from_secs(1),
            rate_interval: Duration::from_millis(100),
        }
    }
}

/// One controlled connection.
#[derive(Clone, Copy, Debug)]
struct Tracked {
    handle: Handle,
    id: u64,
    direction: Direction,
    weight: f64,
    joined: Instant,
    /// Delivered bytes and when, at the start of the current rate interval.
    mark_bytes: u64,
    mark_at: Instant,
    /// Payload bytes per second over the last complete interval.
    rate: f64,
    last_progress: Instant,
    /// Lowest receiver-side RTT seen (uploads).
    min_rcv_rtt: Option<Duration>,
    applied: Caps,
    sample: Option<FlowSample>,
}

/// Applies a [`Policy`] to a shard's flows (see the [module documentation](self)).
#[derive(Debug)]
pub struct Driver {
    policy: Policy,
    cfg: DriverConfig,
    tracked: Vec<Tracked>,
    next_id: u64,
    next_run: Instant,
    samples: Vec<FlowSample>,
    /// For each sample, its entry in `tracked`.
    owners: Vec<usize>,
    caps: Vec<Caps>,
    /// The bottleneck's capacity as measured, when it is not configured.
    estimate: CapacityEstimate,
}

impl Driver {
    /// A driver applying `policy` as `cfg` says.
    pub fn new(policy: Policy, cfg: DriverConfig) -> Driver {
        Driver {
            policy,
            cfg,
            tracked: Vec::new(),
            next_id: 1,
            next_run: Instant::ZERO,
            samples: Vec::new(),
            owners: Vec::new(),
            caps: Vec::new(),
            estimate: CapacityEstimate::default(),
        }
    }

    /// Changes the capacity the policy divides, from the next run on.
    pub fn set_capacity(&mut self, capacity: Capacity) {
        self.cfg.capacity = capacity;
    }

    /// The policy.
    pub fn policy(&self) -> &Policy {
        &self.policy
    }

    /// Puts connection `h` under control from `now`; `weight` scales its
    /// share (1.0 for an equal one). Tracking a handle again updates it.
    pub fn track(&mut self, now: Instant, h: Handle, direction: Direction, weight: f64) {
        if let Some(t) = self.tracked.iter_mut().find(|t| t.handle == h) {
            t.direction = direction;
            t.weight = weight;
            return;
        }
        self.tracked.push(Tracked {
            handle: h,
            id: self.next_id,
            direction,
            weight,
            joined: now,
            mark_bytes: 0,
            mark_at: now,
            rate: 0.0,
            last_progress: now,
            min_rcv_rtt: None,
            applied: Caps::NONE,
            sample: None,
        });
        self.next_id += 1;
        // A newcomer gets its caps at the next run, not an interval later.
        self.next_run = self.next_run.min(now);
    }

    /// Releases `h` from control and lifts its caps.
    pub fn untrack(&mut self, shard: &mut Shard, h: Handle) {
        if let Some(i) = self.tracked.iter().position(|t| t.handle == h) {
            let t = self.tracked.swap_remove(i);
            apply(shard, h, t.applied, Caps::NONE);
        }
    }

    /// Controlled connections.
    pub fn len(&self) -> usize {
        self.tracked.len()
    }

    /// Whether no connection is controlled.
    pub fn is_empty(&self) -> bool {
        self.tracked.is_empty()
    }

    /// When [`run`](Driver::run) wants to be called next.
    pub fn poll_at(&self) -> Instant {
        self.next_run
    }

    /// Each controlled flow's latest sample (`None` while it is not active)
    /// and the caps in force, for monitoring.
    pub fn flows(&self) -> impl Iterator<Item = (Handle, Option<FlowSample>, Caps)> + '_ {
        self.tracked.iter().map(|t| (t.handle, t.sample, t.applied))
    }

    /// Reads every controlled flow of `shard`, asks the policy, and sets
    /// the caps that changed. Connections the shard no longer has are
    /// forgotten.
    pub fn run(&mut self, now: Instant, shard: &mut Shard) {
        self.next_run = now + self.cfg.interval;
        self.samples.clear();
        self.owners.clear();
        let cfg = self.cfg;
        self.tracked.retain_mut(|t| {
            let Some(stats) = shard.flow(t.handle) else { return false };
            t.sample = observe(t, &stats, now, &cfg);
            true
        });
        for (i, t) in self.tracked.iter().enumerate() {
            if let Some(s) = t.sample {
                self.samples.push(s);
                self.owners.push(i);
            }
        }
        self.policy.decide(now, self.cfg.capacity, &self.samples, &mut self.caps);
        let flows = self.samples.len().try_into().unwrap_or(u32::MAX);
        shard.set_fast_start_share(self.shared_capacity(now), flows);
        for (&i, &caps) in self.owners.iter().zip(&self.caps) {
            let t = &mut self.tracked[i];
            apply(shard, t.handle, t.applied, caps);
            t.applied = caps;
        }
        // Inactive flows hold no share: lift their caps so they can restart.
        for t in self.tracked.iter_mut().filter(|t| t.sample.is_none()) {
            apply(shard, t.handle, t.applied, Caps::NONE);
            t.applied = Caps::NONE;
        }
    }
}

impl Driver {
    /// The payload rate (bytes per second) the policy divides among the
    /// active flows, of which careful resume's jump may take a newcomer's
    /// share (see [`Shard::set_fast_start_share`]). None without a policy
    /// or before the capacity is known.
    fn shared_capacity(&mut self, now: Instant) -> Option<u64> {
        if matches!(self.policy, Policy::Off) {
            return None;
        }
        let wire = match self.cfg.capacity {
            Capacity::Configured(bps) => bytes_per_sec(bps),
            Capacity::Estimated => self.estimate.update(now, &self.samples)?,
        };
        Some((wire / wire_factor(DEFAULT_MSS)) as u64)
    }
}

/// The MSS a flow not yet seen is assumed to have (Ethernet, timestamps).
const DEFAULT_MSS: u32 = 1448;

/// Updates `t` from `stats` and returns its sample, if the flow is active
/// and has an RTT.
fn observe(t: &mut Tracked, stats: &FlowStats, now: Instant, cfg: &DriverConfig) -> Option<FlowSample> {
    let delivered = match t.direction {
        Direction::Upload => stats.bytes_received,
        Direction::Download => stats.bytes_acked,
    };
    if delivered > t.mark_bytes {
        t.last_progress = now;
    }
    let span = now.saturating_since(t.mark_at);
    if span >= cfg.rate_interval.max(stats.srtt.unwrap_or(Duration::ZERO)) {
        t.rate = delivered.saturating_sub(t.mark_bytes) as f64 / span.as_secs_f64();
        t.mark_bytes = delivered;
        t.mark_at = now;
    }
    let (srtt, min_rtt) = match t.direction {
        Direction::Upload => {
            // The receiver's own estimate; the handshake's sample bounds the minimum.
            if let Some(r) = stats.rcv_rtt {
                t.min_rcv_rtt = Some(t.min_rcv_rtt.map_or(r, |m| m.min(r)));
            }
            let min = match (stats.min_rtt, t.min_rcv_rtt) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            };
            (stats.rcv_rtt.or(stats.srtt).or(min), min)
        }
        Direction::Download => (stats.srtt, stats.min_rtt),
    };
    let active =
        now.saturating_since(t.last_progress) < cfg.idle_after || now.saturating_since(t.joined) < cfg.idle_after;
    let (srtt, min_rtt) = (srtt?, min_rtt?);
    active.then_some(FlowSample {
        id: t.id,
        direction: t.direction,
        min_rtt,
        srtt: srtt.max(min_rtt),
        delivery_rate: t.rate,
        mss: u32::from(stats.mss),
        weight: t.weight,
    })
}

/// Sets on `shard` whichever of `new` differs from `old`.
fn apply(shard: &mut Shard, h: Handle, old: Caps, new: Caps) {
    if old.rcv_wnd != new.rcv_wnd {
        shard.set_rcv_window_cap(h, new.rcv_wnd);
    }
    if old.cwnd != new.cwnd {
        shard.set_cwnd_cap(h, new.cwnd);
    }
    if old.pacing != new.pacing {
        shard.set_pacing_cap(h, new.pacing);
    }
}
