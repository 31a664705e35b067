//! [`WindowControl`]: one shard's window control on the userspace stack,
//! the stack's [`Driver`] fed with the flows the server's connections
//! carry.
//!
//! # Which connections are flows, and which way
//!
//! By the byte counters of the stack's `FlowStats`, with the rules the
//! kernel backend uses ([`crate::backend::fairness`]), not by the HTTP
//! request: the counters say where the bytes go whatever was asked (an
//! upload's body, a large `/bytes/{n}` or static file, or a keep-alive
//! connection that uploads, then downloads), and need no hook in the HTTP
//! layer. Every [`SENSE_INTERVAL`] the connections that did I/O since the
//! last look are read once: over that interval, one direction carrying more
//! than `DOMINANCE` times the other decides it, anything else keeps the
//! last verdict. A connection is handed to the [`Driver`] once it has moved
//! `BULK_BYTES` its way (scrapes and small requests hold no share), and
//! handed again, as a new flow, if its direction turns. A download that
//! careful resume jumped to its share is handed over at once: the shard
//! reports the share taken ([`Shard::fast_start_claims`]), the connections
//! are looked at and the policy runs in the same turn, so the flows already
//! there give up the room the jump takes before its round trip is out.
//!
//! The driver then measures each flow's delivery rate and RTTs, runs the
//! policy at its own cadence ([`DriverConfig`]'s 5 ms; each policy changes
//! a flow's caps at most once per two of its RTTs), sets the caps through
//! the shard (the advertised window for uploads, cwnd and pacing rate for
//! downloads), and lifts the caps of a flow idle for a second. A closed
//! connection leaves the driver at its next run (the stack no longer shows
//! it to the application); its caps stay on while the stack drains what
//! was queued. An aborted one is released at once.
//!
//! # Capacity
//!
//! As on the kernel backend: a configured `--capacity` is divided among
//! the shards by their active flows' weights through a [`ShareBoard`] (a
//! shard sees the others as of their last run). Without one each shard's
//! policy estimates its own part from its flows' aggregate delivery rate,
//! which keeps a shard's flows fair among themselves but does not balance
//! shards against each other.
//!
//! # Weights
//!
//! A flow's weight is its client's ([`ClientWeights`], `--weight`), looked
//! up by the connection's peer address when the flow is handed to the
//! driver: a scan of the few configured prefixes, no allocation.
//!
//! Steady state allocates nothing: the driver's and the policy's tables
//! keep their room, and the per-connection state lives in the app's slot.

use std::net::SocketAddr;
use std::sync::Arc;

use fairway_stack::fairness::{Capacity, Direction, Driver, DriverConfig, Policy};
use fairway_stack::time::{Duration, Instant};
use fairway_stack::{Handle, Shard};

use crate::backend::fairness::{BULK_BYTES, ShareBoard, classify};
use crate::config::ClientWeights;
use crate::host::Windows;
use crate::metrics::{FairFlow, ShardMetrics};

/// How often the connections that did I/O are read to tell their direction.
pub const SENSE_INTERVAL: Duration = Duration::from_millis(100);

/// Window control's state of one connection, kept in the app's slot.
#[derive(Clone, Copy, Debug, Default)]
pub struct StackFlowState {
    /// Did I/O since the last look.
    touched: bool,
    /// The direction the driver has it under, if it does.
    tracked: Option<Direction>,
    /// The last verdict.
    direction: Option<Direction>,
    /// The counters at the last look.
    mark_received: u64,
    mark_acked: u64,
}

impl StackFlowState {
    /// A new connection in the slot: forget the last one.
    pub(super) fn reset(&mut self) {
        *self = StackFlowState { touched: true, ..StackFlowState::default() };
    }

    /// The connection did I/O.
    pub(super) fn touch(&mut self) {
        self.touched = true;
    }
}

/// One shard's window control: the stack's fairness [`Driver`] fed with
/// the flows the connections carry, told apart by their byte counters.
#[derive(Debug)]
pub struct WindowControl {
    driver: Driver,
    /// Bits per second shared among every shard, if configured.
    capacity: Option<u64>,
    board: Arc<ShareBoard>,
    shard: usize,
    weights: ClientWeights,
    next_sense: Instant,
}

impl WindowControl {
    /// Window control for shard `shard` with `policy`, sharing `capacity`
    /// (bits per second; `None`: each shard estimates its part) with the
    /// other shards through `board`.
    #[must_use]
    pub fn new(policy: Policy, capacity: Option<u64>, board: Arc<ShareBoard>, shard: u16) -> WindowControl {
        let start = capacity.map_or(Capacity::Estimated, Capacity::Configured);
        WindowControl {
            driver: Driver::new(policy, DriverConfig::new(start)),
            capacity,
            board,
            shard: usize::from(shard),
            weights: ClientWeights::default(),
            next_sense: Instant::ZERO,
        }
    }

    /// Gives each flow its client's weight from `weights` (without, every
    /// flow weighs 1).
    #[must_use]
    pub fn with_weights(mut self, weights: ClientWeights) -> WindowControl {
        self.weights = weights;
        self
    }

    /// The policy in force.
    #[must_use]
    pub fn policy(&self) -> &Policy {
        self.driver.policy()
    }

    /// Connections under the driver's control.
    #[must_use]
    pub fn tracked(&self) -> usize {
        self.driver.len()
    }

    /// Whether the connections should be looked at now ([`sense`](Self::sense)
    /// each touched one, then [`sensed`](Self::sensed)).
    pub(super) fn sense_due(&self, now: Instant) -> bool {
        now >= self.next_sense
    }

    /// The look at the connections is over.
    pub(super) fn sensed(&mut self, now: Instant) {
        self.next_sense = now + SENSE_INTERVAL;
    }

    /// Looks at connection `h` if it did I/O: tells its direction and puts
    /// it under control once it is a flow.
    pub(super) fn sense(&mut self, now: Instant, shard: &mut Shard, h: Handle, s: &mut StackFlowState) {
        if !std::mem::take(&mut s.touched) {
            return;
        }
        let Some(stats) = shard.flow(h) else { return };
        let (received, acked) = (stats.bytes_received, stats.bytes_acked);
        let (d_received, d_acked) = (received.saturating_sub(s.mark_received), acked.saturating_sub(s.mark_acked));
        (s.mark_received, s.mark_acked) = (received, acked);
        // Careful resume's jump says "download" before any byte is
        // acknowledged, and takes a share at once: its neighbours must
        // give theirs up now, not a round trip and a look later.
        let jumped = stats.fast_start_jump && s.tracked.is_none();
        s.direction = if jumped { Some(Direction::Download) } else { classify(d_received, d_acked, s.direction) };
        let Some(direction) = s.direction else { return };
        let moved = match direction {
            Direction::Upload => received,
            Direction::Download => acked,
        };
        if s.tracked == Some(direction) || (moved < BULK_BYTES && !jumped) {
            return;
        }
        if s.tracked.is_some() {
            // It turned: a new flow as far as the policy knows.
            self.driver.untrack(shard, h);
        }
        let weight = self.weights.weight_of(stats.remote.ip());
        self.driver.track(now, h, direction, weight.get());
        s.tracked = Some(direction);
    }

    /// Connection `h` was reset: releases it now.
    pub(super) fn release(&mut self, shard: &mut Shard, h: Handle, s: &mut StackFlowState) {
        if s.tracked.take().is_some() {
            self.driver.untrack(shard, h);
        }
    }

    /// Runs the driver if it is due (or `now`): its part of the capacity,
    /// the policy, the caps that changed.
    pub(super) fn run_if_due(&mut self, now: Instant, shard: &mut Shard, at_once: bool) {
        if now < self.driver.poll_at() && !at_once {
            return;
        }
        if let Some(bps) = self.capacity {
            // The active weight as of the last run: one interval stale.
            let weight: f64 = self.driver.flows().filter_map(|(_, sample, _)| sample).map(|f| f.weight.max(0.0)).sum();
            self.driver.set_capacity(Capacity::Configured(self.board.share(self.shard, weight, bps)));
        }
        self.driver.run(now, shard);
    }

    /// Reports the active flows, their RTTs, rates and the caps in force
    /// (as the stack holds them) to `metrics`.
    pub(super) fn observe(&self, shard: &Shard, metrics: &mut ShardMetrics) {
        metrics.observe_fairness(self.driver.flows().filter_map(|(h, sample, _)| {
            let (sample, stats) = (sample?, shard.flow(h)?);
            Some(FairFlow {
                local: stats.local,
                remote: stats.remote,
                direction: sample.direction,
                srtt: sample.srtt,
                min_rtt: sample.min_rtt,
                delivery_rate: sample.delivery_rate,
                window_cap: stats.rcv_wnd_cap,
                pacing_cap: stats.pacing_cap,
                weight: sample.weight,
            })
        }));
    }
}

impl Windows<Shard> for WindowControl {
    type Sense = StackFlowState;

    fn opened(&mut self, sense: &mut StackFlowState, _peer: SocketAddr) {
        sense.reset();
    }

    fn touch(sense: &mut StackFlowState) {
        sense.touch();
    }

    fn next_run(&self) -> Instant {
        self.next_sense.min(self.driver.poll_at())
    }

    fn run(
        &mut self,
        now: Instant,
        shard: &mut Shard,
        conns: &[Option<Handle>],
        senses: &mut [StackFlowState],
        _: &mut ShardMetrics,
    ) {
        // A jump took a share the policy has not given out yet.
        let claimed = shard.fast_start_claims() > 0;
        if self.sense_due(now) || claimed {
            for (h, sense) in conns.iter().zip(senses.iter_mut()) {
                if let Some(h) = h {
                    self.sense(now, shard, *h, sense);
                }
            }
            self.sensed(now);
        }
        self.run_if_due(now, shard, claimed);
    }

    fn release(&mut self, shard: &mut Shard, h: Handle, sense: &mut StackFlowState) {
        WindowControl::release(self, shard, h, sense);
    }

    fn observe(&self, shard: &Shard, metrics: &mut ShardMetrics) {
        WindowControl::observe(self, shard, metrics);
    }
}
