//! [`Wait`]: sleeping until a device has frames, for drivers that do not
//! busy-poll forever: in a `poll(2)` of the device's own ([`Wait::wait`]),
//! or in a reactor the driver already sleeps in (tokio's epoll), through
//! [`Wait::wake_sources`], [`Wait::before_sleep`] and [`Wait::after_sleep`].

use std::io;
use std::time::Duration;

#[cfg(unix)]
use std::os::fd::BorrowedFd;

/// A device the driver can sleep on when it has nothing to do.
///
/// A shard loop that found nothing to receive and nothing to send either
/// calls [`Wait::wait`] with the time until its next timer, or, when it
/// sleeps in a reactor of its own (a tokio runtime's, say, so that other
/// work on the thread wakes it too), registers the device's
/// [`wake_sources`](Wait::wake_sources) there once, and around each sleep
/// calls [`before_sleep`](Wait::before_sleep) and
/// [`after_sleep`](Wait::after_sleep): together they do what `wait` does.
/// The simulated network has no such method: virtual time jumps instead.
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

    /// The descriptors whose readability means the device may have work,
    /// for a driver that sleeps in a reactor of its own, borrowed from the
    /// device (the driver registers duplicates). Edge-triggered there: a
    /// descriptor reports each new arrival, so the driver may clear what it
    /// saw before it receives. None by default: such a device can only be
    /// slept on with [`wait`](Self::wait).
    #[cfg(unix)]
    fn wake_sources<'a>(&'a self, sources: &mut Vec<BorrowedFd<'a>>) {
        let _ = sources;
    }

    /// What [`wait`](Self::wait) does before it sleeps, for a driver that
    /// sleeps elsewhere: hand the kernel what waits to be sent, wake it
    /// where the device needs that. Returns whether the device may be
    /// slept on now (false: input is there already, or output is held
    /// back that a turn must retry).
    ///
    /// # Errors
    ///
    /// What the kick reported (the driver stops then).
    fn before_sleep(&mut self) -> io::Result<bool> {
        Ok(true)
    }

    /// What [`wait`](Self::wait) does after its poll, for a driver that
    /// slept elsewhere (drain an eventfd that woke it).
    fn after_sleep(&mut self) {}
}
