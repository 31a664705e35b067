//! The per-core runtime: one loop per shard, run to completion, the same
//! for every backend.
//!
//! The loop is written over [`NetIo`], the I/O side of a shard: a NIC
//! queue under the userspace stack (any [`Device`] + [`Wait`], over a
//! [`Shard`]), or a kernel socket poller
//! ([`KernelPoll`](crate::backend::kernel::KernelPoll)). Each turn of
//! [`run`] reads the clock once, then
//!
//! 1. takes in up to a batch of input (frames into the shard, or readiness
//!    events from epoll),
//! 2. fires the transport's due timers,
//! 3. hands the events to the application, then lets it act
//!    ([`App::poll`]: the host's own timers, woken connections and tasks),
//! 4. transmits what the shard has to send, up to a batch,
//!
//! and when a turn found nothing to do it keeps polling for up to
//! [`LoopConfig::busy_poll`] (a window that closes while spinning does not
//! pay, [`AdaptiveSpin`]) before it sleeps on the device ([`NetIo::wait`])
//! until input arrives, the transport's next timer is due, or the
//! application's ([`App::poll_timeout`]: a connection's timeout, a task's
//! sleep), whichever comes first. Under load the loop wakes at most once
//! per [`LoopConfig::itr`] (interrupt coalescing), and its receive batches
//! grow and shrink with the load ([`AdaptiveBatch`]). The stop flag
//! (raised by SIGINT/SIGTERM through [`signals`], or by the caller) ends the
//! loop at the next turn, so the device and the shard are dropped normally:
//! an AF_XDP device detaches its XDP program then.
//!
//! A server shard runs the same turns as a task of its tokio runtime
//! ([`drive`], see [`driver`]): it sleeps in tokio's reactor, beside the
//! application's tasks, sockets and timers, instead of in a `poll(2)` of its
//! own. [`run`] remains for bare shards (tools, tests) that have no tokio.
//!
//! [`shards`] starts one such loop per core.

pub mod batch;
pub mod driver;
pub mod memory;
mod moderation;
mod park;
pub mod shards;
pub mod signals;
pub mod spin;

use std::ops::{Deref, DerefMut};
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use std::os::fd::BorrowedFd;

use fairway_nic::{Device, Wait};
use fairway_stack::time::Instant;
use fairway_stack::{Event, Shard};

use crate::clock::{Clock, WallClock};
pub use batch::AdaptiveBatch;
pub use driver::{drive, kick};
use moderation::{Moderator, Rest};
pub use spin::AdaptiveSpin;

/// What runs on a shard: the application side of the loop, acting through
/// `T` (the userspace stack's [`Shard`], or kernel sockets) on its events
/// `E`. The defaults are the stack's, so an application over a shard
/// writes `impl App for MyApp`.
pub trait App<T = Shard, E = Event> {
    /// Called once before the first turn (listen or connect here).
    fn start(&mut self, transport: &mut T, now: Instant) {
        let _ = (transport, now);
    }

    /// Called for every event the transport raises, in order.
    fn on_event(&mut self, transport: &mut T, now: Instant, event: E);

    /// Called once per turn after the events: send what is waiting, open
    /// what is due, fire the application's own timers.
    fn poll(&mut self, transport: &mut T, now: Instant) {
        let _ = (transport, now);
    }

    /// When the application next needs a turn of its own (a timeout of
    /// its connections, a woken task), if ever: the loop sleeps no longer.
    /// Asked only when the loop is about to sleep; a time in the past keeps
    /// it awake.
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    /// Called at the end of every turn with the loop's running counts: a
    /// place to publish metrics (at most now and then; it runs every turn).
    fn after_turn(&mut self, transport: &mut T, now: Instant, stats: &LoopStats) {
        let _ = (transport, now, stats);
    }

    /// The application has nothing more to do; the loop returns. A server
    /// never finishes; a client that fetched what it wanted does.
    fn finished(&self) -> bool {
        false
    }
}

/// The I/O side of a shard loop, for the transport `T` the application
/// acts through: a NIC queue under the userspace stack (every
/// [`Device`] + [`Wait`], over a [`Shard`] or anything that lends one:
/// [`AsShard`]), or a kernel socket poller
/// ([`crate::backend::kernel::KernelPoll`]). Inputs are `receive` and
/// `handle_timeout`, outputs `poll_event` and `transmit`, as in the stack.
pub trait NetIo<T> {
    /// What the application is told.
    type Event;

    /// Takes in up to `budget` units of input (frames, readiness) at
    /// `now`; returns how many.
    fn receive(&mut self, transport: &mut T, now: Instant, budget: usize) -> usize;

    /// Fires the transport's due timers.
    fn handle_timeout(&mut self, transport: &mut T, now: Instant);

    /// The next event for the application.
    fn poll_event(&mut self, transport: &mut T) -> Option<Self::Event>;

    /// Sends up to `budget` units of output; returns how many.
    fn transmit(&mut self, transport: &mut T, now: Instant, budget: usize) -> usize;

    /// When the transport's next timer is due.
    fn poll_timeout(&self, transport: &T) -> Option<Instant>;

    /// Sleeps until input may be there, or `timeout`, or a signal.
    ///
    /// # Errors
    ///
    /// What the underlying poll reported (the loop stops then).
    fn wait(&mut self, timeout: Duration) -> std::io::Result<()>;

    /// For a loop that sleeps in its shard's reactor ([`drive`]) instead of
    /// [`wait`](Self::wait): the descriptors whose readability ends the
    /// sleep, registered once, edge-triggered (see [`Wait::wake_sources`]).
    fn wake_sources<'a>(&'a self, sources: &mut Vec<BorrowedFd<'a>>);

    /// What `wait` does before it sleeps, for such a loop (see
    /// [`Wait::before_sleep`]): false when there is input already.
    ///
    /// # Errors
    ///
    /// What the device reported (the loop stops then).
    fn before_sleep(&mut self) -> std::io::Result<bool>;

    /// What `wait` does after it woke, for such a loop.
    fn after_sleep(&mut self);
}

/// Something that lends a [`Shard`]: the shard itself, or a shard shared
/// with the tasks of an async executor.
pub trait AsShard {
    /// The shard, to act on.
    fn shard_mut(&mut self) -> impl DerefMut<Target = Shard> + '_;
    /// The shard, to look at.
    fn shard_ref(&self) -> impl Deref<Target = Shard> + '_;
}

impl AsShard for Shard {
    fn shard_mut(&mut self) -> impl DerefMut<Target = Shard> + '_ {
        self
    }
    fn shard_ref(&self) -> impl Deref<Target = Shard> + '_ {
        self
    }
}

impl<D: Device + Wait, T: AsShard> NetIo<T> for D {
    type Event = Event;

    fn receive(&mut self, transport: &mut T, now: Instant, budget: usize) -> usize {
        let mut shard = transport.shard_mut();
        Device::receive(self, budget, |frame| shard.handle_frame(now, frame))
    }

    fn handle_timeout(&mut self, transport: &mut T, now: Instant) {
        transport.shard_mut().handle_timeout(now);
    }

    fn poll_event(&mut self, transport: &mut T) -> Option<Event> {
        transport.shard_mut().poll_event()
    }

    fn transmit(&mut self, transport: &mut T, now: Instant, budget: usize) -> usize {
        let mut shard = transport.shard_mut();
        Device::transmit(self, budget, |buf| shard.poll_transmit(now, buf))
    }

    fn poll_timeout(&self, transport: &T) -> Option<Instant> {
        transport.shard_ref().poll_timeout()
    }

    fn wait(&mut self, timeout: Duration) -> std::io::Result<()> {
        Wait::wait(self, Some(timeout))
    }

    fn wake_sources<'a>(&'a self, sources: &mut Vec<BorrowedFd<'a>>) {
        Wait::wake_sources(self, sources);
    }

    fn before_sleep(&mut self) -> std::io::Result<bool> {
        Wait::before_sleep(self)
    }

    fn after_sleep(&mut self) {
        Wait::after_sleep(self);
    }
}

/// How a shard loop runs. Every moderation technique can be turned off on
/// its own, so that its effect can be measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopConfig {
    /// The most frames received, and the most sent, per turn.
    pub batch: usize,
    /// Adapt the receive budget to the load (see [`AdaptiveBatch`]): start
    /// at [`batch::ADAPTIVE_START`], double when a receive fills it, halve
    /// when one leaves it less than half used, never above `batch`. When
    /// false every turn asks for `batch` frames.
    pub adaptive_batch: bool,
    /// How long an idle loop keeps polling before it sleeps on the device.
    /// Zero sleeps at once.
    pub busy_poll: Duration,
    /// Adapt busy polling to the load (see [`AdaptiveSpin`]): spin only
    /// while at least three in four of the recent idle gaps were shorter
    /// than `busy_poll`. When false every idle stretch spins the whole
    /// `busy_poll`.
    pub adaptive_busy_poll: bool,
    /// Interrupt coalescing: the least time between two wake-ups while the
    /// loop has work. When the loop is about to sleep and it did work since
    /// it last woke less than `itr` ago, it pauses without listening to the
    /// device until `itr` has passed (or a timer is due), so frames that
    /// arrive meanwhile are handled in one batch. Zero is off.
    pub itr: Duration,
    /// The longest sleep, even with no timer due (so a stop request is seen
    /// within it even if no signal interrupts the sleep).
    pub max_sleep: Duration,
    /// Spend CPU for latency: spin the whole `busy_poll` window whenever
    /// most idle gaps are shorter than it. Off (the default), a shard
    /// driven by its tokio runtime ([`drive`]) spins at most what a sleep
    /// and a wake-up cost it, measured at its start: only through gaps that
    /// spinning handles for less CPU than sleeping would.
    pub latency: bool,
}

impl Default for LoopConfig {
    fn default() -> LoopConfig {
        LoopConfig {
            batch: 64,
            adaptive_batch: true,
            busy_poll: Duration::from_micros(50),
            adaptive_busy_poll: true,
            itr: Duration::ZERO,
            max_sleep: Duration::from_millis(100),
            latency: false,
        }
    }
}

/// How many buckets [`LoopStats::batch_histogram`] has.
pub const BATCH_BUCKETS: usize = 12;

/// What a shard loop did. Each moderation technique has counts that show
/// its effect: sleeps and pauses (wake-ups) for coalescing, spinning turns
/// and their hits for busy-polling, batch sizes for adaptive batching.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LoopStats {
    /// Turns of the loop.
    pub turns: u64,
    /// Frames received into the shard.
    pub frames_in: u64,
    /// Frames the shard sent.
    pub frames_out: u64,
    /// Events handed to the application.
    pub events: u64,
    /// Times the loop slept on the device.
    pub sleeps: u64,
    /// Times the loop paused for the coalescing interval instead
    /// ([`LoopConfig::itr`]).
    pub itr_pauses: u64,
    /// Microseconds spent in those pauses.
    pub itr_paused_us: u64,
    /// Idle turns spent busy-polling.
    pub busy_poll_turns: u64,
    /// Times busy-polling found work before the loop slept (each is a
    /// wake-up saved).
    pub busy_poll_hits: u64,
    /// Receives that handed over at least one frame.
    pub rx_batches: u64,
    /// Receives that filled their budget.
    pub rx_batches_full: u64,
    /// The receive budgets of every turn, added up (mean: `/ turns`).
    pub rx_budget_total: u64,
    /// Non-empty receives by size: bucket `i` counts batches of
    /// `2^i ..= 2^(i+1) - 1` frames; the last bucket has no upper bound.
    pub batch_histogram: [u64; BATCH_BUCKETS],
    /// What a sleep and a wake-up cost the shard's thread in CPU time,
    /// nanoseconds, as measured at its start (0: not measured).
    pub wake_cost_ns: u64,
    /// The busy-poll window it spins at most, nanoseconds.
    pub spin_window_ns: u64,
}

impl LoopStats {
    /// Times the loop woke from a sleep or a coalescing pause.
    #[must_use]
    pub fn wakeups(&self) -> u64 {
        self.sleeps + self.itr_pauses
    }

    /// Mean frames per non-empty receive.
    #[must_use]
    pub fn mean_batch(&self) -> f64 {
        if self.rx_batches == 0 { 0.0 } else { self.frames_in as f64 / self.rx_batches as f64 }
    }

    /// The histogram bucket of a batch of `frames` (at least 1).
    #[must_use]
    pub fn batch_bucket(frames: usize) -> usize {
        (frames.max(1).ilog2() as usize).min(BATCH_BUCKETS - 1)
    }

    pub(crate) fn record_receive(&mut self, budget: usize, received: usize) {
        self.rx_budget_total += budget as u64;
        self.frames_in += received as u64;
        if received > 0 {
            self.rx_batches += 1;
            self.batch_histogram[LoopStats::batch_bucket(received)] += 1;
        }
        if received >= budget {
            self.rx_batches_full += 1;
        }
    }
}

/// Runs `app` on `transport` over `net` (a shard over its device, say)
/// until `stop` is raised or the application finishes, on the wall clock.
///
/// # Errors
///
/// What the device's [`NetIo::wait`] reported (the loop stops then).
pub fn run<T, N, A>(
    transport: &mut T,
    net: &mut N,
    app: &mut A,
    config: &LoopConfig,
    stop: &AtomicBool,
) -> std::io::Result<LoopStats>
where
    N: NetIo<T>,
    A: App<T, N::Event>,
{
    run_with_clock(transport, net, app, config, stop, &mut WallClock)
}

/// [`run`] on any [`Clock`]: tests drive the loop in virtual time with it.
///
/// # Errors
///
/// What the device's [`NetIo::wait`] reported (the loop stops then).
pub fn run_with_clock<T, N, A, C>(
    transport: &mut T,
    net: &mut N,
    app: &mut A,
    config: &LoopConfig,
    stop: &AtomicBool,
    clock: &mut C,
) -> std::io::Result<LoopStats>
where
    N: NetIo<T>,
    A: App<T, N::Event>,
    C: Clock,
{
    let mut m = Moderator::new(config, clock.now());
    app.start(transport, clock.now());
    while !stop.load(Ordering::Relaxed) && !app.finished() {
        let now = clock.now();
        let worked = m.turn(transport, net, app, now);
        if m.turn_again(worked, now) {
            continue;
        }
        let now = clock.now();
        let due = [net.poll_timeout(transport), app.poll_timeout()].into_iter().flatten().min();
        match m.rest(now, due) {
            Rest::Again => continue,
            Rest::Pause(pause) => clock.pause(pause),
            Rest::Sleep(timeout) => net.wait(timeout)?,
        }
        m.woke(clock.now());
    }
    Ok(m.stats)
}

#[cfg(test)]
mod moderation_tests;
#[cfg(test)]
mod tests;
