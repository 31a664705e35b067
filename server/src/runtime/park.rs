//! How a shard loop driven by its tokio runtime ([`drive`](super::drive))
//! sleeps: in tokio's reactor, beside everything else the shard's tasks
//! wait on (their sockets, their timers), so one `epoll_wait` serves them
//! all and whichever is first wakes the thread.
//!
//! The loop's own wake-ups are registered once with that reactor
//! ([`AsyncFd`], edge-triggered): its device's [wake
//! sources](fairway_nic::Wait::wake_sources) (the NIC queue, the steering
//! inbox's eventfd, the outbound sockets' epoll; a kernel shard's epoll),
//! and a [`TimerFd`] for its next deadline: tokio's timers tick in
//! milliseconds, a pacer's next frame or a coalescing pause is microseconds
//! away. A task that queued output on the shard wakes the loop through its
//! [`LoopSignal`].
//!
//! Edge-triggered readiness is cleared when it is seen, before the turn
//! that takes the input: what arrives after that signals again, so nothing
//! is lost between a turn that found nothing and the sleep after it.

use std::cell::{Cell, RefCell};
use std::future::poll_fn;
use std::io;
use std::os::fd::{BorrowedFd, OwnedFd};
use std::task::{Poll, Waker};
use std::time::Duration;

use fairway_nic::{TimerFd, thread_cpu_time};
use tokio::io::Interest;
use tokio::io::unix::AsyncFd;

use crate::clock;
use fairway_stack::time::Instant;

/// Why a sleep ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Woke {
    /// A wake source turned readable.
    Input,
    /// The deadline passed.
    Deadline,
    /// A task asked for a turn.
    Kicked,
}

/// The loop's registrations with its runtime's reactor. Drop it before the
/// device whose descriptors it holds.
#[derive(Debug)]
pub(crate) struct Park {
    sources: Vec<AsyncFd<OwnedFd>>,
    timer: AsyncFd<TimerFd>,
    /// When the timer is set to expire, while it has not.
    armed: Option<Instant>,
}

impl Park {
    /// Registers duplicates of `sources` (the same open files: the same
    /// readiness) and a deadline timer with the current runtime's reactor.
    ///
    /// # Errors
    ///
    /// No tokio runtime with I/O enabled, or `dup` / `epoll_ctl` /
    /// `timerfd_create` failed.
    pub(crate) fn new(sources: &[BorrowedFd<'_>]) -> io::Result<Park> {
        let sources = sources.iter().map(|fd| register(fd.try_clone_to_owned()?)).collect::<io::Result<Vec<_>>>()?;
        let timer = register(TimerFd::new()?)?;
        Ok(Park { sources, timer, armed: None })
    }

    /// Sleeps until a wake source is readable, `signal` is raised, or
    /// `timeout` has passed.
    ///
    /// # Errors
    ///
    /// What the reactor or the timer reported.
    pub(crate) async fn sleep(&mut self, timeout: Duration, signal: &LoopSignal) -> io::Result<Woke> {
        self.arm(timeout)?;
        let Park { sources, timer, armed } = self;
        poll_fn(|cx| {
            if signal.sleep(cx.waker()) {
                return Poll::Ready(Ok(Woke::Kicked));
            }
            for source in sources.iter() {
                if let Poll::Ready(ready) = source.poll_read_ready(cx) {
                    ready?.clear_ready();
                    return Poll::Ready(Ok(Woke::Input));
                }
            }
            poll_timer(timer, armed, cx)
        })
        .await
        .inspect(|_| signal.awake())
    }

    /// Waits `duration` without listening to the device or the tasks:
    /// interrupt coalescing's pause.
    ///
    /// # Errors
    ///
    /// What the reactor or the timer reported.
    pub(crate) async fn pause(&mut self, duration: Duration) -> io::Result<()> {
        self.arm(duration)?;
        let Park { timer, armed, .. } = self;
        poll_fn(|cx| poll_timer(timer, armed, cx)).await.map(|_| ())
    }

    /// What a sleep and a wake-up cost this thread, in CPU time (the
    /// syscalls, the reactor's turn, the switches out and back; not the
    /// time slept): the median of a few timer sleeps of a microsecond.
    /// What busy polling is weighed against: spinning through a gap costs
    /// the gap, sleeping through it costs this.
    ///
    /// # Errors
    ///
    /// What the reactor or the timer reported.
    pub(crate) async fn wake_cost(&mut self) -> io::Result<Duration> {
        let mut costs = [Duration::ZERO; 15];
        for cost in &mut costs {
            let before = thread_cpu_time();
            self.pause(Duration::from_micros(1)).await?;
            *cost = thread_cpu_time().saturating_sub(before);
        }
        costs.sort_unstable();
        Ok(costs[costs.len() / 2])
    }

    /// Sets the timer to `timeout` from now, unless it is set for that
    /// very time already (the next deadline is often the same one, sleep
    /// after sleep).
    fn arm(&mut self, timeout: Duration) -> io::Result<()> {
        let at = clock::now() + timeout.into();
        if self.armed != Some(at) {
            self.timer.get_ref().set(timeout)?;
            self.armed = Some(at);
        }
        Ok(())
    }
}

/// Registers `fd` with the current runtime's reactor for readability.
///
/// tokio deprecated this constructor because a `T` whose `as_raw_fd` could
/// change, or close, under the registration would make it unsound; the
/// descriptors here are owned by the `AsyncFd` itself (an `OwnedFd`, a
/// `TimerFd`), so neither can happen.
#[allow(deprecated)]
fn register<T: std::os::fd::AsRawFd>(fd: T) -> io::Result<AsyncFd<T>> {
    AsyncFd::with_interest(fd, Interest::READABLE)
}

/// Ready once the timer has expired (and reads it back), clearing
/// readiness left from an expiry already read.
fn poll_timer(
    timer: &AsyncFd<TimerFd>,
    armed: &mut Option<Instant>,
    cx: &mut std::task::Context<'_>,
) -> Poll<io::Result<Woke>> {
    loop {
        let mut ready = std::task::ready!(timer.poll_read_ready(cx))?;
        let expired = ready.get_inner().clear();
        ready.clear_ready();
        if expired {
            *armed = None;
            return Poll::Ready(Ok(Woke::Deadline));
        }
    }
}

/// How the tasks of a shard reach its sleeping loop.
#[derive(Debug, Default)]
pub(crate) struct LoopSignal {
    kicked: Cell<bool>,
    /// The loop's waker while it sleeps.
    waker: RefCell<Option<Waker>>,
}

impl LoopSignal {
    pub(crate) fn kick(&self) {
        self.kicked.set(true);
        if let Some(waker) = self.waker.borrow_mut().take() {
            waker.wake();
        }
    }

    /// The loop is about to sleep with `waker`: returns true if a kick came
    /// since its last turn (then it must not).
    pub(crate) fn sleep(&self, waker: &Waker) -> bool {
        if self.kicked.get() {
            return true;
        }
        let mut slot = self.waker.borrow_mut();
        if !slot.as_ref().is_some_and(|w| w.will_wake(waker)) {
            *slot = Some(waker.clone());
        }
        false
    }

    /// The loop woke: kicks need not wake it.
    pub(crate) fn awake(&self) {
        self.waker.borrow_mut().take();
    }

    /// A turn begins: it sees whatever the kicks were for.
    pub(crate) fn turned(&self) {
        self.kicked.set(false);
    }
}
