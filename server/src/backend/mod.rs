//! Where the server's connections come from: the kernel's TCP ([`kernel`],
//! mio and `SO_REUSEPORT`), or the userspace stack over AF_XDP or TAP
//! ([`userspace`]).
//! [`serve`] runs the one the configuration names until the stop flag goes
//! up and the connections in flight are done.

pub mod connection_limit;
pub mod fairness;
pub mod kernel;
#[cfg(unix)]
pub mod userspace;

use std::io;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::config::{Backend, Config};

/// Serves with `config.backend` until `stop` is raised (SIGINT/SIGTERM, see
/// [`crate::runtime::signals::stop_on_signals`]) and in-flight requests are
/// done or `config.shutdown_grace` has passed.
///
/// # Errors
///
/// The backend cannot start (address in use, no permission, no such
/// interface) or fails while serving; one line that says why.
pub fn serve(config: &Config, stop: Arc<AtomicBool>) -> io::Result<()> {
    match config.backend {
        Backend::Kernel => kernel::serve(config, stop),
        Backend::Afxdp | Backend::Tap => userspace::serve(config, stop),
    }
}
