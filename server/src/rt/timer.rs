//! Time for tasks, on the shard's clock: [`Sleep`] (and [`sleep`],
//! [`sleep_until`]), and [`Timer`], hyper's `rt::Timer` made of them.
//!
//! A sleep takes a place in the reactor's timer wheel when first polled
//! and gives it back when it ends or is dropped; the loop's sleep includes
//! the wheel's next expiry, so a sleep ends within the wheel's tick (64
//! µs) of its deadline, not at the loop's next `max_sleep`. The clock is
//! the loop's, so in a test that drives the loop in virtual time, sleeps
//! (and hyper's header timeout) run in virtual time too.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use fairway_stack::time::Instant;

use super::reactor::current;
use crate::clock;

/// When a sleep ends: fixed at its first poll for a relative one, so it
/// counts from when the task awaits it.
#[derive(Clone, Copy, Debug)]
enum Deadline {
    After(Duration),
    At(Instant),
}

/// A future that is ready at its deadline. `Send` and `Sync` (it holds only
/// numbers; the wheel is the shard's), as hyper's timer asks, but polled
/// only on the shard that made it.
#[derive(Debug)]
pub struct Sleep {
    deadline: Deadline,
    timer: Option<(u32, u32)>,
}

/// Sleeps for `duration` from the first poll.
#[must_use]
pub fn sleep(duration: Duration) -> Sleep {
    Sleep { deadline: Deadline::After(duration), timer: None }
}

/// Sleeps until `deadline` (on the stack's clock).
#[must_use]
pub fn sleep_until(deadline: Instant) -> Sleep {
    Sleep { deadline: Deadline::At(deadline), timer: None }
}

impl Sleep {
    /// Its deadline, once known.
    #[must_use]
    pub fn deadline(&self) -> Option<Instant> {
        match self.deadline {
            Deadline::At(at) => Some(at),
            Deadline::After(_) => None,
        }
    }

    /// Moves the deadline.
    pub fn reset(&mut self, deadline: Instant) {
        self.deadline = Deadline::At(deadline);
    }
}

impl Future for Sleep {
    type Output = ();

    /// # Panics
    ///
    /// Polled outside a task of a Fairway shard.
    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let rt = current().expect("fairway::rt::sleep is polled outside a Fairway shard's task");
        let now = rt.now();
        let at = match self.deadline {
            Deadline::At(at) => at,
            Deadline::After(d) => {
                let at = now + d.into();
                self.deadline = Deadline::At(at);
                at
            }
        };
        if now >= at {
            if let Some(timer) = self.timer.take() {
                rt.cancel_sleep(timer);
            }
            return Poll::Ready(());
        }
        let this = &mut *self;
        rt.sleep(&mut this.timer, at, cx);
        Poll::Pending
    }
}

impl Drop for Sleep {
    fn drop(&mut self) {
        if let (Some(timer), Some(rt)) = (self.timer.take(), current()) {
            rt.cancel_sleep(timer);
        }
    }
}

/// hyper's [`Timer`](hyper::rt::Timer) on the shard's clock: give it to
/// `hyper::server::conn::http1::Builder::timer` to have header timeouts
/// and keep-alive timers run on Fairway's wheel.
#[derive(Clone, Copy, Debug, Default)]
pub struct Timer;

impl hyper::rt::Sleep for Sleep {}

impl hyper::rt::Timer for Timer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(sleep(duration))
    }

    fn sleep_until(&self, deadline: std::time::Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(sleep_until(clock::from_std(deadline)))
    }

    /// The shard's time, so that deadlines hyper computes from it are on
    /// the same clock as its sleeps (virtual in simulations).
    fn now(&self) -> std::time::Instant {
        current().map_or_else(std::time::Instant::now, |rt| clock::to_std(rt.now()))
    }

    fn reset(&self, sleep: &mut Pin<Box<dyn hyper::rt::Sleep>>, new_deadline: std::time::Instant) {
        match sleep.as_mut().downcast_mut_pin::<Sleep>() {
            Some(mut ours) => ours.as_mut().get_mut().reset(clock::from_std(new_deadline)),
            None => *sleep = self.sleep_until(new_deadline),
        }
    }
}
