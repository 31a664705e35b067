//! [`Wait`]: sleeping until a device has frames, for drivers that do not
//! busy-poll forever.

use std::io;
use std::time::Duration;

/// A device the driver can sleep on when it has nothing to do.
///
/// A shard loop that found nothing to receive and nothing to send calls
/// [`Wait::wait`] with the time until its next timer. The simulated network
/// has no such method: virtual time jumps instead.
pub trait Wait {
    /// Blocks until the device may have frames to receive, or `timeout`
    /// passes (`None`: no limit), or a signal arrives. Wakes the kernel
    /// first if the device needs it (AF_XDP's need_wakeup). A spurious
    /// return is allowed; the caller just polls again.
    ///
    /// # Errors
    ///
    /// What the underlying `poll(2)` reported, other than `EINTR` (a signal
    /// ends the wait without an error, so the caller can check for
    /// shutdown).
    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()>;
}
