//! One shard loop's turns and what follows each: the part of the loop that
//! is the same however it sleeps, in a `poll(2)` of its device's own
//! ([`run_with_clock`](super::run_with_clock)) or in the shard's tokio
//! reactor ([`drive`](super::driver::drive)).
//!
//! A [`Moderator`] runs a [turn](Moderator::turn) (receive a batch, fire
//! the due timers, hand the events to the application, let it act,
//! transmit a batch) and then says what comes next ([`Moderator::idle`],
//! [`Moderator::rest`]): another turn at once (there was work, or the
//! busy-poll window is open), a coalescing pause deaf to the device, or a
//! sleep until input or the next deadline. It keeps the loop's counts.

use std::time::Duration;

use fairway_stack::time::Instant;

use super::{AdaptiveBatch, AdaptiveSpin, App, LoopConfig, LoopStats, NetIo};

/// What the loop does once a turn found nothing to do and the busy-poll
/// window is closed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rest {
    /// A deadline is due already: turn again.
    Again,
    /// Interrupt coalescing: wait this long without listening to the
    /// device, so what arrives meanwhile is taken in one batch.
    Pause(Duration),
    /// Sleep until input arrives, or this long.
    Sleep(Duration),
}

/// The moderation state of one shard loop. See the [module
/// documentation](self).
#[derive(Debug)]
pub(crate) struct Moderator {
    tx_batch: usize,
    rx_batch: AdaptiveBatch,
    itr: Duration,
    max_sleep: Duration,
    pub(crate) stats: LoopStats,
    // Busy-polling: since when this stretch of idle turns (since the last
    // work or sleep) began, whether it spun, and since when the loop has
    // found nothing to do at all, across sleeps (the gaps the window
    // adapts to).
    spin: AdaptiveSpin,
    idle_since: Option<Instant>,
    spun: bool,
    quiet_since: Option<Instant>,
    // Coalescing: when the loop last woke, and whether it has worked since.
    woke_at: Instant,
    worked_since_wake: bool,
}

impl Moderator {
    /// The moderation `config` asks for, from `now`.
    pub(crate) fn new(config: &LoopConfig, now: Instant) -> Moderator {
        let stats = LoopStats {
            spin_window_ns: u64::try_from(config.busy_poll.as_nanos()).unwrap_or(u64::MAX),
            ..LoopStats::default()
        };
        Moderator {
            tx_batch: config.batch.max(1),
            rx_batch: AdaptiveBatch::new(config.batch, config.adaptive_batch),
            itr: config.itr,
            max_sleep: config.max_sleep,
            stats,
            spin: AdaptiveSpin::new(config.busy_poll, config.adaptive_busy_poll),
            idle_since: None,
            spun: false,
            quiet_since: None,
            woke_at: now,
            worked_since_wake: false,
        }
    }

    /// One turn at `now`: receive up to a batch, fire the transport's due
    /// timers, hand every event to `app`, let it act, transmit up to a
    /// batch. Returns whether it did anything.
    pub(crate) fn turn<T, N, A>(&mut self, transport: &mut T, net: &mut N, app: &mut A, now: Instant) -> bool
    where
        N: NetIo<T>,
        A: App<T, N::Event>,
    {
        self.stats.turns += 1;
        let budget = self.rx_batch.budget();
        let received = net.receive(transport, now, budget);
        self.rx_batch.record(received);
        self.stats.record_receive(budget, received);
        if net.poll_timeout(transport).is_some_and(|at| at <= now) {
            net.handle_timeout(transport, now);
        }
        let mut events = 0u64;
        while let Some(event) = net.poll_event(transport) {
            app.on_event(transport, now, event);
            events += 1;
        }
        app.poll(transport, now);
        let sent = net.transmit(transport, now, self.tx_batch);
        self.stats.frames_out += sent as u64;
        self.stats.events += events;
        app.after_turn(transport, now, &self.stats);
        received > 0 || sent > 0 || events > 0
    }

    /// After a turn at `now` that did work (`worked`) or not: whether the
    /// loop turns again at once (true: it worked, or the busy-poll window
    /// is open) or should rest ([`rest`](Self::rest)).
    pub(crate) fn turn_again(&mut self, worked: bool, now: Instant) -> bool {
        if worked {
            if self.spun {
                // Work found by spinning: busy-polling saved a wake-up.
                self.stats.busy_poll_hits += 1;
            }
            if let Some(quiet) = self.quiet_since.take() {
                self.spin.observe(now.saturating_since(quiet).into());
            }
            (self.idle_since, self.spun) = (None, false);
            self.worked_since_wake = true;
            return true;
        }
        self.quiet_since.get_or_insert(now);
        let idle = *self.idle_since.get_or_insert(now);
        if now.saturating_since(idle) < self.spin.window().into() {
            self.stats.busy_poll_turns += 1;
            self.spun = true;
            return true;
        }
        false
    }

    /// How the loop rests at `now` when its next deadline is `due` (the
    /// transport's or the application's, whichever is first; `None`: no
    /// deadline but [`LoopConfig::max_sleep`]). Counted as a sleep or a
    /// pause; the loop calls [`woke`](Self::woke) after it.
    pub(crate) fn rest(&mut self, now: Instant, due: Option<Instant>) -> Rest {
        let timeout = due.map_or(self.max_sleep, |at| Duration::from(at.saturating_since(now)).min(self.max_sleep));
        if timeout.is_zero() {
            return Rest::Again;
        }
        let coalesce_until = self.woke_at + self.itr.into();
        if self.worked_since_wake && !self.itr.is_zero() && now < coalesce_until {
            let pause = Duration::from(coalesce_until.saturating_since(now)).min(timeout);
            self.stats.itr_pauses += 1;
            self.stats.itr_paused_us += pause.as_micros() as u64;
            Rest::Pause(pause)
        } else {
            self.stats.sleeps += 1;
            Rest::Sleep(timeout)
        }
    }

    /// What a sleep and a wake-up cost the shard, measured: outside the
    /// latency mode, the busy-poll window is kept within it.
    pub(crate) fn set_wake_cost(&mut self, cost: Duration, latency: bool) {
        if !latency {
            self.spin.limit(cost);
        }
        self.stats.wake_cost_ns = u64::try_from(cost.as_nanos()).unwrap_or(u64::MAX);
        self.stats.spin_window_ns = u64::try_from(self.spin.max().as_nanos()).unwrap_or(u64::MAX);
    }

    /// The loop woke at `now` from a pause or a sleep.
    pub(crate) fn woke(&mut self, now: Instant) {
        self.woke_at = now;
        self.worked_since_wake = false;
        (self.idle_since, self.spun) = (None, false);
    }
}
