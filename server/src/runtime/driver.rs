//! The shard loop as a task of the shard's tokio runtime: [`drive`].
//!
//! Every server shard's thread runs a tokio current-thread runtime that
//! takes `!Send` tasks (a `LocalRuntime`: time and I/O drivers on); the
//! loop is one task among the
//! application's, the same turns as the blocking [`run`](super::run)
//! (the [`Moderator`] is shared), so inside the application's handlers and
//! tasks tokio works as it does anywhere: `tokio::spawn`, `spawn_local`,
//! `spawn_blocking`, `tokio::time`, `tokio::net`, `tokio::sync`.
//!
//! ```text
//! shard thread: tokio current-thread runtime (LocalRuntime)
//!   ├─ the loop (this task): turn ─▶ yield to the tasks it woke ─▶ turn ...
//!   │     idle, busy-poll window closed: sleep in tokio's reactor until
//!   │     the NIC queue, the steering eventfd, the next deadline (timerfd)
//!   │     or a task's kick
//!   └─ the application's tasks: hyper/axum connections, tokio::spawn,
//!      tokio::time, tokio::net clients — on the shard that owns them
//! ```
//!
//! After a turn that did work the loop yields once, so the tasks that turn
//! woke (a request arrived for them) run before its next turn transmits
//! what they wrote; while it busy-polls it yields between polls, so tasks
//! keep running. When it sleeps, it sleeps where tokio does (see
//! [`park`](super::park)): one `epoll_wait` for the shard's queue and for
//! every socket and timer of the application, so the shard idles at no
//! CPU, and any of them wakes it. A task that queues output on the shard's
//! transport while the loop sleeps calls [`kick`], so the loop turns and
//! transmits it.

use std::cell::RefCell;
use std::future::poll_fn;
use std::io;
use std::rc::Rc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Poll;

use super::moderation::{Moderator, Rest};
use super::park::{LoopSignal, Park};
use super::{App, LoopConfig, LoopStats, NetIo};
use crate::clock;

thread_local! {
    /// The loop of this thread's shard, while it runs.
    static LOOP: RefCell<Option<Rc<LoopSignal>>> = const { RefCell::new(None) };
}

/// Has this thread's shard loop turn again soon: what a task calls after
/// it queued output on the shard's transport (or read input, which may
/// open the receive window), so the loop transmits it even if it was
/// asleep. Free when the loop is awake; nothing off a shard's thread.
pub fn kick() {
    LOOP.with(|l| {
        if let Some(signal) = l.borrow().as_ref() {
            signal.kick();
        }
    });
}

/// Makes `signal` this thread's loop while it lives.
struct Installed;

impl Installed {
    fn new(signal: &Rc<LoopSignal>) -> Installed {
        LOOP.with(|l| *l.borrow_mut() = Some(Rc::clone(signal)));
        Installed
    }
}

impl Drop for Installed {
    fn drop(&mut self) {
        LOOP.with(|l| l.borrow_mut().take());
    }
}

/// Lets the runtime poll every other ready task of the shard once, then
/// returns: a self-wake puts the loop at the back of the runtime's queue,
/// behind the tasks its turn woke, without a syscall.
async fn yield_to_tasks() {
    let mut yielded = false;
    poll_fn(|cx| {
        if yielded {
            return Poll::Ready(());
        }
        yielded = true;
        cx.waker().wake_by_ref();
        Poll::Pending
    })
    .await;
}

/// Runs `app` on `transport` over `net` until `stop` is raised or the
/// application finishes, as [`run`](super::run) does, but as a task of the
/// current tokio runtime, where `!Send` tasks may be spawned (a
/// `LocalRuntime`, or a `LocalSet`): it sleeps in the runtime's
/// reactor, so the tasks of the application and the shard share the
/// thread (see the [module documentation](self)).
///
/// # Errors
///
/// No tokio runtime with I/O enabled, or what the reactor or the device
/// reported (the loop stops then).
pub async fn drive<T, N, A>(
    transport: &mut T,
    net: &mut N,
    app: &mut A,
    config: &LoopConfig,
    stop: &AtomicBool,
) -> io::Result<LoopStats>
where
    N: NetIo<T>,
    A: App<T, N::Event>,
{
    let mut sources = Vec::new();
    net.wake_sources(&mut sources);
    let mut park = Park::new(&sources)?;
    drop(sources);
    let signal = Rc::new(LoopSignal::default());
    let _installed = Installed::new(&signal);
    let mut m = Moderator::new(config, clock::now());
    if !config.busy_poll.is_zero() {
        m.set_wake_cost(park.wake_cost().await?, config.latency);
    }
    app.start(transport, clock::now());
    while !stop.load(Ordering::Relaxed) && !app.finished() {
        signal.turned();
        let now = clock::now();
        let worked = m.turn(transport, net, app, now);
        if m.turn_again(worked, now) {
            yield_to_tasks().await;
            continue;
        }
        let now = clock::now();
        let due = [net.poll_timeout(transport), app.poll_timeout()].into_iter().flatten().min();
        match m.rest(now, due) {
            Rest::Again => {
                yield_to_tasks().await;
                continue;
            }
            Rest::Pause(pause) => park.pause(pause).await?,
            Rest::Sleep(timeout) => {
                if net.before_sleep()? {
                    park.sleep(timeout, &signal).await?;
                    net.after_sleep();
                }
            }
        }
        m.woke(clock::now());
    }
    Ok(m.stats)
}
