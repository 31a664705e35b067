//! The per-core runtime: one loop per shard, run to completion.
//!
//! Each turn of [`run`] reads the clock once, then
//!
//! 1. receives up to a batch of frames from the device into the shard,
//! 2. fires the shard's due timers,
//! 3. hands the shard's events to the application, then lets it act
//!    ([`App::poll`]),
//! 4. transmits what the shard has to send, up to a batch,
//!
//! and when a turn found nothing to do it keeps polling for up to
//! [`LoopConfig::busy_poll`] before it sleeps on the device ([`Wait`]) until
//! frames arrive or the shard's next timer is due. The stop flag (raised by
//! SIGINT/SIGTERM through [`signals`], or by the caller) ends the loop at the
//! next turn, so the device and the shard are dropped normally: an AF_XDP
//! device detaches its XDP program then.
//!
//! [`shards`] starts one such loop per core.

pub mod shards;
pub mod signals;

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fairway_nic::{Device, Wait};
use fairway_stack::time::Instant;
use fairway_stack::{Event, Shard};

use crate::clock;

/// What runs on a shard: the application side of the stack's API.
pub trait App {
    /// Called once before the first turn (listen or connect here).
    fn start(&mut self, shard: &mut Shard, now: Instant) {
        let _ = (shard, now);
    }

    /// Called for every event the shard raises, in order.
    fn on_event(&mut self, shard: &mut Shard, now: Instant, event: Event);

    /// Called once per turn after the events: send what is waiting, open
    /// what is due.
    fn poll(&mut self, shard: &mut Shard, now: Instant) {
        let _ = (shard, now);
    }

    /// The application has nothing more to do; the loop returns. A server
    /// never finishes; a client that fetched what it wanted does.
    fn finished(&self) -> bool {
        false
    }
}

/// How a shard loop runs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LoopConfig {
    /// The most frames received, and the most sent, per turn.
    pub batch: usize,
    /// How long an idle loop keeps polling before it sleeps on the device.
    /// Zero sleeps at once.
    pub busy_poll: Duration,
    /// The longest sleep, even with no timer due (so a stop request is seen
    /// within it even if no signal interrupts the sleep).
    pub max_sleep: Duration,
}

impl Default for LoopConfig {
    fn default() -> LoopConfig {
        LoopConfig { batch: 64, busy_poll: Duration::from_micros(50), max_sleep: Duration::from_millis(100) }
    }
}

/// What a shard loop did.
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
}

/// Runs `app` on `shard` over `device` until `stop` is raised or the
/// application finishes.
///
/// # Errors
///
/// What the device's [`Wait::wait`] reported (the loop stops then).
pub fn run<D, A>(
    shard: &mut Shard,
    device: &mut D,
    app: &mut A,
    config: &LoopConfig,
    stop: &AtomicBool,
) -> std::io::Result<LoopStats>
where
    D: Device + Wait,
    A: App,
{
    let batch = config.batch.max(1);
    let mut stats = LoopStats::default();
    app.start(shard, clock::now());
    let mut idle_since: Option<std::time::Instant> = None;
    while !stop.load(Ordering::Relaxed) && !app.finished() {
        stats.turns += 1;
        let now = clock::now();
        let received = device.receive(batch, |frame| shard.handle_frame(now, frame));
        if shard.poll_timeout().is_some_and(|at| at <= now) {
            shard.handle_timeout(now);
        }
        let mut events = 0u64;
        while let Some(event) = shard.poll_event() {
            app.on_event(shard, now, event);
            events += 1;
        }
        app.poll(shard, now);
        let sent = device.transmit(batch, |buf| shard.poll_transmit(now, buf));
        stats.frames_in += received as u64;
        stats.frames_out += sent as u64;
        stats.events += events;

        if received > 0 || sent > 0 || events > 0 {
            idle_since = None;
            continue;
        }
        let idle = *idle_since.get_or_insert_with(std::time::Instant::now);
        if idle.elapsed() < config.busy_poll {
            continue;
        }
        let timeout = shard.poll_timeout().map_or(config.max_sleep, |at| clock::until(at).min(config.max_sleep));
        if timeout.is_zero() {
            continue;
        }
        stats.sleeps += 1;
        device.wait(Some(timeout))?;
        idle_since = None;
    }
    Ok(stats)
}

#[cfg(test)]
mod tests;
