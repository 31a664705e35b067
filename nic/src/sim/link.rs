//! One direction of one link: [`LinkModel`], its serialiser, drop-tail
//! queue, impairments and counters as a pure function of offer times, and
//! [`LinkState`], that model placed in the simulated network.
//!
//! The model reads no clock: the simulated network drives it in virtual
//! time, and the link emulator (`crate::linkem`) drives the very same code
//! with `CLOCK_MONOTONIC`.

use std::collections::VecDeque;
use std::ops::{Deref, DerefMut};

use rand::distr::{Bernoulli, Distribution};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::frame_pool::FramePool;
use super::link_config::LinkConfig;
use super::stats::LinkStats;
use super::topology::Side;
use crate::deadline_queue::DeadlineQueue;

/// Frame `frame` reaches the far end of link `link`: what a link
/// schedules in the network's queue of arrivals.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Arrival {
    pub(crate) frame: u32,
    pub(crate) link: u32,
}

/// Bandwidths above this are clamped, which keeps the serialiser's
/// arithmetic inside a `u64`.
const MAX_BANDWIDTH_BPS: u64 = 1_000_000_000_000_000_000;

/// Where a link delivers its frames.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum LinkEnd {
    /// Into a switch: from a host's uplink, or from the bottleneck.
    Switch { side: Side, from_bottleneck: bool },
    /// Into a host's receive queue.
    Host(u32),
}

/// The configured impairments, as ready-to-sample distributions; `None` when
/// the probability is zero, so an ideal link draws no random numbers at all.
#[derive(Clone, Copy, Debug)]
struct Impairments {
    loss: Option<Bernoulli>,
    corrupt: Option<Bernoulli>,
    duplicate: Option<Bernoulli>,
    /// The probability, and the largest extra delay in microseconds (≥ 1).
    reorder: Option<(Bernoulli, u64)>,
}

impl Impairments {
    fn new(config: &LinkConfig) -> Option<Impairments> {
        let bernoulli = |p: f64| (p > 0.0).then(|| Bernoulli::new(p).expect("validated probability"));
        let reorder_delay = config.reorder_delay.total_micros();
        let imp = Impairments {
            loss: bernoulli(config.loss),
            corrupt: bernoulli(config.corrupt),
            duplicate: bernoulli(config.duplicate),
            reorder: bernoulli(config.reorder).filter(|_| reorder_delay > 0).map(|b| (b, reorder_delay)),
        };
        let any = imp.loss.is_some() || imp.corrupt.is_some() || imp.duplicate.is_some() || imp.reorder.is_some();
        any.then_some(imp)
    }
}

/// What a link does with one frame offered to it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Verdict {
    /// The queue was full: dropped before using the link.
    QueueDrop,
    /// Serialised, then lost on the wire.
    Lost,
    /// The frame reaches the far end at `at` (microseconds); `copy_at` is
    /// when its duplicate does, if it got one.
    Deliver { at: u64, copy_at: Option<u64> },
}

/// One direction of a link in the simulated network: the model and where it
/// delivers. Dereferences to its [`LinkModel`].
#[derive(Debug)]
pub(crate) struct LinkState {
    model: LinkModel,
    end: LinkEnd,
}

impl Deref for LinkState {
    type Target = LinkModel;
    fn deref(&self) -> &LinkModel {
        &self.model
    }
}

impl DerefMut for LinkState {
    fn deref_mut(&mut self) -> &mut LinkModel {
        &mut self.model
    }
}

impl LinkState {
    #[track_caller]
    pub(crate) fn new(config: LinkConfig, end: LinkEnd, seed: u64, index: u64) -> LinkState {
        LinkState { model: LinkModel::new(config, seed, index), end }
    }

    pub(crate) fn end(&self) -> LinkEnd {
        self.end
    }

    /// Offers frame `id` to the link at `now`, and schedules its arrival at
    /// the far end as link `index`, unless it is dropped or lost.
    pub(crate) fn offer(
        &mut self,
        now: u64,
        id: u32,
        index: u32,
        pool: &mut FramePool,
        events: &mut DeadlineQueue<Arrival>,
    ) {
        match self.model.transmit(now, pool.frame_mut(id)) {
            Verdict::QueueDrop | Verdict::Lost => pool.release(id),
            Verdict::Deliver { at, copy_at } => {
                // The copy is taken after any corruption, so it carries the
                // same bytes; the original is scheduled first.
                let copy = copy_at.map(|at| (at, pool.duplicate(id)));
                events.push(at, Arrival { frame: id, link: index });
                if let Some((at, copy)) = copy {
                    events.push(at, Arrival { frame: copy, link: index });
                }
            }
        }
    }
}

/// One direction of a link as a pure function of the frames offered to it
/// and when: see [`LinkConfig`] for the steps a frame goes through.
///
/// Offer times must not go backwards. Times are whole microseconds from
/// any origin.
#[derive(Debug)]
pub(crate) struct LinkModel {
    config: LinkConfig,
    delay: u64,
    bps: u64,
    queue_limit: usize,
    impairments: Option<Impairments>,
    rng: Xoshiro256PlusPlus,
    /// When the frame being serialised is fully on the wire: whole
    /// microseconds plus `busy_frac / bps` of one. Kept exact so that
    /// back-to-back small frames on a fast link do not drift.
    busy_us: u64,
    busy_frac: u64,
    /// Frames waiting to be serialised, as (first microsecond at or after
    /// which their serialisation has started, length), in FIFO order.
    backlog: VecDeque<(u64, u32)>,
    backlog_bytes: usize,
    pub(crate) stats: LinkStats,
}

impl LinkModel {
    /// A link configured by `config`, whose random stream is a function of
    /// `seed` and `index` only.
    #[track_caller]
    pub(crate) fn new(config: LinkConfig, seed: u64, index: u64) -> LinkModel {
        let mut link = LinkModel {
            config,
            delay: 0,
            bps: 0,
            queue_limit: usize::MAX,
            impairments: None,
            rng: link_rng(seed, index),
            busy_us: 0,
            busy_frac: 0,
            backlog: VecDeque::new(),
            backlog_bytes: 0,
            stats: LinkStats::default(),
        };
        link.configure(config);
        link
    }

    pub(crate) fn config(&self) -> LinkConfig {
        self.config
    }

    /// Applies a new configuration from now on. Frames already on the wire
    /// keep their arrival times; the RNG stream continues.
    #[track_caller]
    pub(crate) fn configure(&mut self, config: LinkConfig) {
        config.validate();
        self.config = config;
        self.delay = config.delay.total_micros();
        let bps = config.bandwidth_bps.min(MAX_BANDWIDTH_BPS);
        if bps != self.bps && self.busy_frac > 0 {
            // The fraction is in units of the old bandwidth; finish the
            // current frame at the next whole microsecond instead.
            self.busy_us += 1;
            self.busy_frac = 0;
        }
        self.bps = bps;
        self.queue_limit = config.queue_bytes.unwrap_or(usize::MAX);
        self.impairments = Impairments::new(&config);
    }

    /// Makes room for `frames` frames waiting in the queue.
    pub(crate) fn reserve(&mut self, frames: usize) {
        self.backlog.reserve(frames.saturating_sub(self.backlog.len()));
    }

    /// Bytes waiting to be serialised at `now` (the frame being serialised
    /// excluded).
    pub(crate) fn queued_bytes(&self, now: u64) -> usize {
        let started: usize =
            self.backlog.iter().take_while(|&&(start, _)| start <= now).map(|&(_, len)| len as usize).sum();
        self.backlog_bytes - started
    }

    /// Offers `frame` to the link at `now` and says what becomes of it. The
    /// corruption impairment changes `frame` in place; a duplicate is the
    /// caller's to make, after this returns.
    ///
    /// # Panics
    ///
    /// If `frame` is 16 MiB or longer (the serialiser's arithmetic needs
    /// less).
    pub(crate) fn transmit(&mut self, now: u64, frame: &mut [u8]) -> Verdict {
        let len = u32::try_from(frame.len()).ok().filter(|&len| len < 1 << 24).expect("frame shorter than 16 MiB");
        self.stats.frames_offered += 1;
        self.stats.bytes_offered += u64::from(len);

        let Some(on_wire) = self.serialise(now, len) else {
            self.stats.queue_drops += 1;
            return Verdict::QueueDrop;
        };
        let arrival = on_wire.saturating_add(self.delay);
        let Some(imp) = self.impairments else {
            return Verdict::Deliver { at: arrival, copy_at: None };
        };

        // The draws happen in a fixed order, each only when its impairment is
        // configured, so a run depends on nothing but the seed and the inputs.
        if imp.loss.is_some_and(|d| d.sample(&mut self.rng)) {
            self.stats.lost += 1;
            return Verdict::Lost;
        }
        if imp.corrupt.is_some_and(|d| d.sample(&mut self.rng)) && !frame.is_empty() {
            let at = self.rng.random_range(0..frame.len());
            frame[at] ^= self.rng.random_range(1..=u8::MAX);
            self.stats.corrupted += 1;
        }
        let copy = imp.duplicate.is_some_and(|d| d.sample(&mut self.rng));
        let mut original_arrival = arrival;
        if let Some((d, max_extra)) = imp.reorder
            && d.sample(&mut self.rng)
        {
            original_arrival = arrival.saturating_add(self.rng.random_range(1..=max_extra));
            self.stats.reordered += 1;
        }
        if copy {
            self.stats.duplicated += 1;
        }
        Verdict::Deliver { at: original_arrival, copy_at: copy.then_some(arrival) }
    }

    /// Puts `len` bytes on the serialiser at `now`. Returns the first whole
    /// microsecond at which the frame is entirely on the wire, or `None` when
    /// the queue has no room for it.
    fn serialise(&mut self, now: u64, len: u32) -> Option<u64> {
        if self.bps == 0 {
            return Some(now);
        }
        while let Some(&(start, queued)) = self.backlog.front()
            && start <= now
        {
            self.backlog.pop_front();
            self.backlog_bytes -= queued as usize;
        }
        let busy = self.busy_us > now || (self.busy_us == now && self.busy_frac > 0);
        let (start_us, start_frac) = if busy { (self.busy_us, self.busy_frac) } else { (now, 0) };
        if busy {
            if self.backlog_bytes.saturating_add(len as usize) > self.queue_limit {
                return None;
            }
            self.backlog.push_back((start_us + u64::from(start_frac > 0), len));
            self.backlog_bytes += len as usize;
        }
        // In units of 1/bps µs; fits a u64: len < 2^24 (checked by the
        // network) and bps ≤ 10^18.
        let total = start_frac + u64::from(len) * 8 * 1_000_000;
        self.busy_us = start_us.saturating_add(total / self.bps);
        self.busy_frac = total % self.bps;
        Some(self.busy_us + u64::from(self.busy_frac > 0))
    }
}

/// The link's own random stream, a function of the network seed and the
/// link's index only, so traffic on one link never perturbs another's draws.
pub(crate) fn link_rng(seed: u64, index: u64) -> Xoshiro256PlusPlus {
    let base = splitmix64(seed) ^ splitmix64(index.wrapping_add(0x5EED));
    let mut state = base;
    let mut bytes = [0u8; 32];
    for chunk in bytes.chunks_exact_mut(8) {
        state = state.wrapping_add(0x9E37_79B9_7F4A_7C15);
        chunk.copy_from_slice(&splitmix64(state).to_le_bytes());
    }
    Xoshiro256PlusPlus::from_seed(bytes)
}

/// The SplitMix64 output function (Steele, Lea, Flood 2014): a bijective
/// 64-bit mixer.
fn splitmix64(x: u64) -> u64 {
    let mut z = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use fairway_stack::time::Duration;
    use proptest::prelude::*;
    use rand::Rng;

    use super::*;
    use crate::sim::frame_pool::FrameMeta;

    fn frame(pool: &mut FramePool, len: u32) -> u32 {
        let id = pool.take();
        pool.set_meta(id, FrameMeta { len, src: 0, dst: 1 });
        id
    }

    /// The reference model of a serialiser with a drop-tail queue, in exact
    /// rational time: ticks of 1/bps µs, in `u128`.
    fn reference(bps: u64, delay: u64, limit: usize, offers: &[(u64, u32)]) -> Vec<Option<u64>> {
        let bps = u128::from(bps);
        let mut busy_until = 0u128;
        let mut admitted: Vec<(u128, u32)> = Vec::new(); // (start, len)
        offers
            .iter()
            .map(|&(at, len)| {
                let now = u128::from(at) * bps;
                let start = busy_until.max(now);
                let waiting: usize = admitted.iter().filter(|&&(s, _)| s > now).map(|&(_, l)| l as usize).sum();
                if start > now && waiting + len as usize > limit {
                    return None;
                }
                admitted.push((start, len));
                busy_until = start + u128::from(len) * 8 * 1_000_000;
                Some(busy_until.div_ceil(bps) as u64 + delay)
            })
            .collect()
    }

    proptest! {
        #[test]
        fn serialiser_matches_exact_arithmetic(
            bps in prop_oneof![Just(1_000_000_000u64), Just(100_000_000), Just(3_000_001), 1u64..20_000_000_000],
            delay in 0u64..5_000,
            limit in prop_oneof![Just(usize::MAX), 0usize..20_000],
            offers in proptest::collection::vec((0u64..200, 14u32..9_000), 1..60),
        ) {
            let config = LinkConfig::ideal()
                .with_bandwidth_bps(bps)
                .with_delay(Duration::from_micros(delay));
            let config = if limit == usize::MAX { config } else { config.with_queue_bytes(limit) };
            let mut link = LinkState::new(config, LinkEnd::Host(1), 0, 0);
            let mut pool = FramePool::new(9_000);
            let mut events = DeadlineQueue::default();
            // Offer times are gaps from the previous offer.
            let mut now = 0;
            let offers: Vec<(u64, u32)> = offers.iter().map(|&(gap, len)| { now += gap; (now, len) }).collect();
            let expected = reference(bps, delay, limit, &offers);
            for (i, &(at, len)) in offers.iter().enumerate() {
                let id = frame(&mut pool, len);
                let before = link.stats.queue_drops;
                link.offer(at, id, 0, &mut pool, &mut events);
                let dropped = link.stats.queue_drops > before;
                prop_assert_eq!(dropped, expected[i].is_none(), "offer {} at {} of {} B", i, at, len);
            }
            let mut arrivals = Vec::new();
            while let Some(e) = events.pop_due(u64::MAX) {
                arrivals.push(e.at);
            }
            let expected: Vec<u64> = expected.into_iter().flatten().collect();
            prop_assert_eq!(arrivals, expected);
        }
    }

    #[test]
    fn a_bandwidth_change_mid_frame_rounds_up_and_keeps_going() {
        let config = LinkConfig::ideal().with_bandwidth_bps(3_000_000);
        let mut link = LinkState::new(config, LinkEnd::Host(1), 0, 0);
        let mut pool = FramePool::new(1514);
        let mut events = DeadlineQueue::default();
        let id = frame(&mut pool, 100); // 800 bits at 3 Mbit/s: 266.67 µs
        link.offer(0, id, 0, &mut pool, &mut events);
        link.configure(config.with_bandwidth_mbps(8));
        let id = frame(&mut pool, 100); // 100 µs at 8 Mbit/s, from 267
        link.offer(10, id, 0, &mut pool, &mut events);
        assert_eq!(events.pop_due(u64::MAX).map(|e| e.at), Some(267));
        assert_eq!(events.pop_due(u64::MAX).map(|e| e.at), Some(367));
    }

    #[test]
    fn each_link_and_seed_has_its_own_stream() {
        let first = |seed, index| link_rng(seed, index).next_u64();
        let draws = [first(1, 0), first(1, 1), first(2, 0), first(2, 1), first(0, 0)];
        for (i, a) in draws.iter().enumerate() {
            for b in &draws[i + 1..] {
                assert_ne!(a, b);
            }
        }
        assert_eq!(first(1, 1), first(1, 1));
    }
}
