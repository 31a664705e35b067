//! The remaining system calls of the emulator: precise sleeping (`ppoll`
//! with a `timespec`, one-nanosecond timer slack), the wake-up event that
//! stops the workers, and the signals that stop the program.

use std::io;
use std::mem::zeroed;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;
use std::time::Duration;

/// Asks the kernel to fire this thread's timers within 1 ns of their
/// deadline instead of the default 50 µs (`PR_SET_TIMERSLACK`), so that
/// `ppoll` returns when asked. Applies to the calling thread only.
pub(crate) fn set_timer_slack_1ns() -> io::Result<()> {
    // SAFETY: plain prctl with integer arguments.
    let r = unsafe { libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0) };
    if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
}

/// Gives the calling thread real-time priority `priority` (1..=99) under
/// `SCHED_FIFO`: it then runs as soon as its timer fires, ahead of every
/// ordinary thread, instead of waiting behind whatever else the machine is
/// busy with. The kernel's real-time throttling (95 % of each second by
/// default) still bounds it.
pub(crate) fn set_fifo_priority(priority: u8) -> io::Result<()> {
    let param = libc::sched_param { sched_priority: libc::c_int::from(priority) };
    // SAFETY: `param` is a live sched_param; pthread_self is always valid.
    let r = unsafe { libc::pthread_setschedparam(libc::pthread_self(), libc::SCHED_FIFO, &param) };
    if r != 0 { Err(io::Error::from_raw_os_error(r)) } else { Ok(()) }
}

/// Waits until one of `fds` is readable or `timeout` has passed (`None`:
/// no limit), with nanosecond resolution. Returns which descriptors are
/// readable; none after a timeout or a signal.
pub(crate) fn wait_readable<const N: usize>(fds: [RawFd; N], timeout: Option<Duration>) -> io::Result<[bool; N]> {
    let mut pollfds = fds.map(|fd| libc::pollfd { fd, events: libc::POLLIN, revents: 0 });
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
    });
    let ts_ptr = ts.as_ref().map_or(ptr::null(), ptr::from_ref);
    // SAFETY: `pollfds` is a live array of N pollfds; `ts_ptr` is null or
    // points at a live timespec; no signal mask is passed.
    let r = unsafe { libc::ppoll(pollfds.as_mut_ptr(), N as libc::nfds_t, ts_ptr, ptr::null()) };
    if r < 0 {
        let err = io::Error::last_os_error();
        return if err.kind() == io::ErrorKind::Interrupted { Ok([false; N]) } else { Err(err) };
    }
    // POLLERR and POLLHUP count as readable: the next read reports them.
    Ok(pollfds.map(|p| p.revents != 0))
}

/// An `eventfd` that wakes every thread waiting on it, once written.
#[derive(Debug)]
pub(crate) struct Waker {
    fd: OwnedFd,
}

impl Waker {
    pub(crate) fn new() -> io::Result<Waker> {
        // SAFETY: plain system call; the result is checked before use.
        let fd = unsafe { libc::eventfd(0, libc::EFD_CLOEXEC | libc::EFD_NONBLOCK) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by eventfd(2) and nothing else owns it.
        Ok(Waker { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Makes the descriptor readable for good (nobody reads it).
    pub(crate) fn wake(&self) -> io::Result<()> {
        let one = 1u64.to_ne_bytes();
        // SAFETY: writes 8 bytes from a live buffer of 8 bytes.
        let r = unsafe { libc::write(self.fd.as_raw_fd(), one.as_ptr().cast(), one.len()) };
        if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
    }
}

impl AsRawFd for Waker {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// SIGINT and SIGTERM (and SIGHUP, when asked for), blocked in the calling
/// thread (and so in every thread it spawns afterwards) and received
/// synchronously with [`ShutdownSignals::wait`], so no handler ever runs.
///
/// Create it on the main thread before starting anything else.
#[derive(Debug)]
pub struct ShutdownSignals {
    set: libc::sigset_t,
}

impl ShutdownSignals {
    /// Blocks SIGINT and SIGTERM in the calling thread, and SIGHUP too if
    /// `hangup` (the emulator's "reload" signal; otherwise SIGHUP keeps its
    /// default action).
    ///
    /// # Errors
    ///
    /// What `pthread_sigmask` reported (nothing in practice).
    pub fn block(hangup: bool) -> io::Result<ShutdownSignals> {
        // SAFETY: `set` is initialised by sigemptyset before any other use;
        // the functions get valid pointers to it.
        unsafe {
            let mut set: libc::sigset_t = zeroed();
            libc::sigemptyset(&mut set);
            libc::sigaddset(&mut set, libc::SIGINT);
            libc::sigaddset(&mut set, libc::SIGTERM);
            if hangup {
                libc::sigaddset(&mut set, libc::SIGHUP);
            }
            let r = libc::pthread_sigmask(libc::SIG_BLOCK, &set, ptr::null_mut());
            if r != 0 {
                return Err(io::Error::from_raw_os_error(r));
            }
            Ok(ShutdownSignals { set })
        }
    }

    /// Waits up to `timeout` for one of the signals; returns its name
    /// (`SIGINT`, `SIGTERM`, `SIGHUP`) if one arrived.
    ///
    /// # Errors
    ///
    /// What `sigtimedwait` reported, timeouts and interruptions excepted.
    pub fn wait(&self, timeout: Duration) -> io::Result<Option<&'static str>> {
        let ts = libc::timespec {
            tv_sec: timeout.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: libc::c_long::from(timeout.subsec_nanos() as i32),
        };
        // SAFETY: `self.set` is an initialised signal set, `ts` a live
        // timespec; no siginfo is asked for.
        let r = unsafe { libc::sigtimedwait(&self.set, ptr::null_mut(), &ts) };
        if r < 0 {
            let err = io::Error::last_os_error();
            return match err.raw_os_error() {
                Some(libc::EAGAIN) | Some(libc::EINTR) => Ok(None),
                _ => Err(err),
            };
        }
        Ok(Some(match r {
            libc::SIGINT => "SIGINT",
            libc::SIGHUP => "SIGHUP",
            _ => "SIGTERM",
        }))
    }
}
