//! SIGINT and SIGTERM as a stop flag.
//!
//! The shard loops check the flag every turn and sleep at most
//! [`super::LoopConfig::max_sleep`], so a signal ends them within that time
//! and every device is dropped on the way out. A second signal while the
//! loops are stopping terminates the process at once, as users expect of a
//! second Ctrl-C.

use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

/// Registers SIGINT and SIGTERM: the first raises the returned flag, the
/// second (of either) exits the process with status 130.
///
/// # Errors
///
/// When a handler cannot be installed.
pub fn stop_on_signals() -> io::Result<Arc<AtomicBool>> {
    let stop = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        // Order matters: the conditional exit is registered first, so it
        // sees the flag as the previous signal left it.
        signal_hook::flag::register_conditional_shutdown(signal, 130, Arc::clone(&stop))?;
        signal_hook::flag::register(signal, Arc::clone(&stop))?;
    }
    Ok(stop)
}
