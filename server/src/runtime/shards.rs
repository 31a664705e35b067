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

use fairway_nic::{Device, Wait};
use fairway_stack::Shard;

use super::{App, LoopConfig, LoopStats, run};

/// How one shard ended.
#[derive(Debug)]
pub struct ShardExit<A> {
    /// The shard's index.
    pub index: u16,
    /// What the loop did, or why it could not start or stopped early.
    pub result: io::Result<LoopStats>,
    /// The shard as it ended (counters, flows), if it was built.
    pub shard: Option<Shard>,
    /// The application as it ended (what a client fetched, say), if built.
    pub app: Option<A>,
}

/// Starts shard `index` on a new thread named `fairway-shard-{index}`,
/// pinned to core `index` when there is such a core and `pin` is set.
/// `build` runs on that thread and makes the shard, its device and its
/// application; an error from it ends the shard at once.
///
/// # Errors
///
/// When the thread cannot be spawned.
pub fn spawn<D, A, B>(
    index: u16,
    pin: bool,
    config: LoopConfig,
    stop: Arc<AtomicBool>,
    build: B,
) -> io::Result<JoinHandle<ShardExit<A>>>
where
    D: Device + Wait,
    A: App + Send + 'static,
    B: FnOnce() -> io::Result<(Shard, D, A)> + Send + 'static,
{
    std::thread::Builder::new().name(format!("fairway-shard-{index}")).spawn(move || {
        if pin {
            pin_to_core(usize::from(index));
        }
        let (mut shard, mut device, mut app) = match build() {
            Ok(parts) => parts,
            Err(err) => return ShardExit { index, result: Err(err), shard: None, app: None },
        };
        let result = run(&mut shard, &mut device, &mut app, &config, &stop);
        drop(device);
        ShardExit { index, result, shard: Some(shard), app: Some(app) }
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
pub fn join_all<A>(handles: Vec<JoinHandle<ShardExit<A>>>) -> Vec<ShardExit<A>> {
    handles.into_iter().map(|h| h.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))).collect()
}
