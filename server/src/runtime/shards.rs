//! One shard loop per core.
//!
//! Each shard runs on its own thread, pinned to its own core when the
//! machine has enough. Everything a shard owns (its device, its `Shard`,
//! its application) is built *on* that thread by the caller's factory: an
//! AF_XDP socket's rings are not meant to cross threads, and a test that
//! enters a network namespace does so per thread.

use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::thread::JoinHandle;

use fairway_stack::Shard;

use super::{App, LoopConfig, LoopStats, NetIo, drive, run};

/// How one shard ended.
#[derive(Debug)]
pub struct ShardExit<A, T = Shard> {
    /// The shard's index.
    pub index: u16,
    /// What the loop did, or why it could not start or stopped early.
    pub result: io::Result<LoopStats>,
    /// The shard's transport as it ended (the stack's counters and flows),
    /// if it was built.
    pub shard: Option<T>,
    /// The application as it ended (what a client fetched, say), if built.
    pub app: Option<A>,
}

/// Starts shard `index` on a new thread named `fairway-shard-{index}`,
/// pinned to core `index` when there is such a core and `pin` is set.
/// `build` runs on that thread and makes the shard's transport (a
/// `Shard`, say), its I/O (the shard's device) and its application; an
/// error from it ends the shard at once.
///
/// # Errors
///
/// When the thread cannot be spawned.
pub fn spawn<T, N, A, B>(
    index: u16,
    pin: bool,
    config: LoopConfig,
    stop: Arc<AtomicBool>,
    build: B,
) -> io::Result<JoinHandle<ShardExit<A, T>>>
where
    T: Send + 'static,
    N: NetIo<T>,
    A: App<T, N::Event> + Send + 'static,
    B: FnOnce() -> io::Result<(T, N, A)> + Send + 'static,
{
    spawn_with(index, pin, config, stop, build, |index, result, parts| {
        let (shard, app) = parts.map_or((None, None), |(t, a)| (Some(t), Some(a)));
        ShardExit { index, result, shard, app }
    })
}

/// [`spawn`], with the shard's end told by `finish` on the shard's thread:
/// the shard's index, how its loop ended, and its transport and
/// application (if `build` made them), dropped there. So a transport or
/// application that cannot leave its thread (an async executor's tasks)
/// can still report.
///
/// # Errors
///
/// When the thread cannot be spawned.
pub fn spawn_with<T, N, A, B, F, X>(
    index: u16,
    pin: bool,
    config: LoopConfig,
    stop: Arc<AtomicBool>,
    build: B,
    finish: F,
) -> io::Result<JoinHandle<X>>
where
    N: NetIo<T>,
    A: App<T, N::Event>,
    B: FnOnce() -> io::Result<(T, N, A)> + Send + 'static,
    F: FnOnce(u16, io::Result<LoopStats>, Option<(T, A)>) -> X + Send + 'static,
    X: Send + 'static,
{
    shard_thread(index, pin, move || {
        let (mut transport, mut net, mut app) = match build() {
            Ok(parts) => parts,
            Err(err) => return finish(index, Err(err), None),
        };
        let result = run(&mut transport, &mut net, &mut app, &config, &stop);
        // The device goes first: an AF_XDP device detaches its program.
        drop(net);
        finish(index, result, Some((transport, app)))
    })
}

/// [`spawn_with`] for a server shard: the thread runs a tokio
/// current-thread runtime that takes `!Send` tasks (a `LocalRuntime`: time
/// and I/O on), `build` runs inside it (so what it makes may register with
/// the runtime's reactor and spawn tasks), and the loop is
/// [`drive`](super::drive), spawned as a local task among the
/// application's: a task, not the runtime's `block_on` future, because a
/// task the reactor wakes is queued on the spot, while waking `block_on`'s
/// future writes the runtime's eventfd (a syscall, and a spurious turn of
/// its `epoll_wait`) on every wake-up. The application's tasks still alive
/// when the loop ends are dropped after `finish` has run, with the runtime.
///
/// # Errors
///
/// When the thread cannot be spawned. A runtime that cannot be built ends
/// the shard at once with that error.
pub fn spawn_async_with<T, N, A, B, F, X>(
    index: u16,
    pin: bool,
    config: LoopConfig,
    stop: Arc<AtomicBool>,
    build: B,
    finish: F,
) -> io::Result<JoinHandle<X>>
where
    N: NetIo<T>,
    A: App<T, N::Event>,
    B: FnOnce() -> io::Result<(T, N, A)> + Send + 'static,
    F: FnOnce(u16, io::Result<LoopStats>, Option<(T, A)>) -> X + Send + 'static,
    X: Send + 'static,
{
    shard_thread(index, pin, move || {
        let options = tokio::runtime::LocalOptions::default();
        let runtime = match tokio::runtime::Builder::new_current_thread().enable_all().build_local(options) {
            Ok(runtime) => runtime,
            Err(e) => {
                let e = io::Error::new(e.kind(), format!("shard {index}: cannot start its tokio runtime: {e}"));
                return finish(index, Err(e), None);
            }
        };
        let shard = runtime.spawn_local(async move {
            let (mut transport, mut net, mut app) = match build() {
                Ok(parts) => parts,
                Err(err) => return finish(index, Err(err), None),
            };
            let result = drive(&mut transport, &mut net, &mut app, &config, &stop).await;
            // The device goes first: an AF_XDP device detaches its program.
            drop(net);
            finish(index, result, Some((transport, app)))
        });
        match runtime.block_on(shard) {
            Ok(report) => report,
            // The loop panicked: the thread's panic, as on any thread.
            Err(e) => match e.try_into_panic() {
                Ok(panic) => std::panic::resume_unwind(panic),
                Err(e) => panic!("shard {index}: its loop was cancelled: {e}"),
            },
        }
    })
}

/// Starts shard `index`'s thread, `fairway-shard-{index}`, pinned to core
/// `index` when `pin` is set and there is such a core, running `body`.
fn shard_thread<X: Send + 'static>(
    index: u16,
    pin: bool,
    body: impl FnOnce() -> X + Send + 'static,
) -> io::Result<JoinHandle<X>> {
    std::thread::Builder::new().name(format!("fairway-shard-{index}")).spawn(move || {
        if pin {
            pin_to_core(usize::from(index));
        }
        body()
    })
}

/// Pins the calling thread to core `index`, if the machine has it.
/// Returns whether it did.
pub fn pin_to_core(index: usize) -> bool {
    core_affinity::get_core_ids().and_then(|ids| ids.into_iter().nth(index)).is_some_and(core_affinity::set_for_current)
}

/// Joins every shard, in order.
///
/// # Panics
///
/// Re-raises a shard thread's panic.
pub fn join_all<A, T>(handles: Vec<JoinHandle<ShardExit<A, T>>>) -> Vec<ShardExit<A, T>> {
    handles.into_iter().map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
}
