//! [`TimerFd`]: a deadline as a descriptor (`timerfd_create(2)`), for a
//! driver that sleeps in a reactor of its own and wants to be woken at a
//! time finer than the reactor's own timers (tokio's tick is a
//! millisecond; a pacer's next frame or a coalescing pause is microseconds
//! away).

use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::time::Duration;

/// A one-shot timer on `CLOCK_MONOTONIC` whose descriptor turns readable
/// when it expires. Non-blocking, closed on exec.
#[derive(Debug)]
pub struct TimerFd {
    fd: OwnedFd,
}

impl TimerFd {
    /// A disarmed timer.
    ///
    /// # Errors
    ///
    /// What `timerfd_create(2)` reported (out of descriptors).
    pub fn new() -> io::Result<TimerFd> {
        // SAFETY: no pointers; a non-negative result is a new descriptor
        // that nothing else owns.
        let fd = unsafe { libc::timerfd_create(libc::CLOCK_MONOTONIC, libc::TFD_NONBLOCK | libc::TFD_CLOEXEC) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just created and is owned by nobody else.
        Ok(TimerFd { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    /// Expires `after` from now (a zero duration: at once), replacing any
    /// earlier setting.
    ///
    /// # Errors
    ///
    /// What `timerfd_settime(2)` reported.
    pub fn set(&self, after: Duration) -> io::Result<()> {
        // A zero value would disarm it: the smallest wait stands for "now".
        let after = after.max(Duration::from_nanos(1));
        self.settime(libc::timespec {
            tv_sec: after.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: libc::c_long::from(after.subsec_nanos() as i32),
        })
    }

    /// Stops it: it will not expire.
    ///
    /// # Errors
    ///
    /// What `timerfd_settime(2)` reported.
    pub fn disarm(&self) -> io::Result<()> {
        self.settime(libc::timespec { tv_sec: 0, tv_nsec: 0 })
    }

    /// Reads the expiry count back to zero, so the descriptor is no longer
    /// readable; returns whether it had expired.
    pub fn clear(&self) -> bool {
        let mut expirations: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from a non-blocking timerfd
        // we own; EAGAIN (not expired) is the common, harmless case.
        let n = unsafe { libc::read(self.fd.as_raw_fd(), (&raw mut expirations).cast(), 8) };
        n == 8
    }

    fn settime(&self, value: libc::timespec) -> io::Result<()> {
        let spec = libc::itimerspec { it_interval: libc::timespec { tv_sec: 0, tv_nsec: 0 }, it_value: value };
        // SAFETY: `spec` is a live itimerspec for the call; the old value
        // is not asked for (null).
        let r = unsafe { libc::timerfd_settime(self.fd.as_raw_fd(), 0, &spec, core::ptr::null_mut()) };
        if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
    }
}

/// The CPU time the calling thread has used (`CLOCK_THREAD_CPUTIME_ID`):
/// user and system time, not the time it slept. What a driver measures
/// the cost of its own sleep and wake-up with.
#[must_use]
pub fn thread_cpu_time() -> Duration {
    let mut ts = libc::timespec { tv_sec: 0, tv_nsec: 0 };
    // SAFETY: `ts` is a live timespec for the call to fill.
    let r = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if r != 0 {
        return Duration::ZERO;
    }
    Duration::new(u64::try_from(ts.tv_sec).unwrap_or(0), u32::try_from(ts.tv_nsec).unwrap_or(0))
}

impl AsRawFd for TimerFd {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn readable(fd: RawFd, timeout_ms: i32) -> bool {
        let mut pfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
        // SAFETY: one live pollfd for the call.
        let r = unsafe { libc::poll(&mut pfd, 1, timeout_ms) };
        r == 1 && pfd.revents & libc::POLLIN != 0
    }

    #[test]
    fn it_expires_once_after_its_time_and_clears() {
        let t = TimerFd::new().unwrap();
        assert!(!readable(t.as_raw_fd(), 0), "disarmed");
        let start = std::time::Instant::now();
        t.set(Duration::from_micros(300)).unwrap();
        assert!(readable(t.as_raw_fd(), 1000));
        assert!(start.elapsed() >= Duration::from_micros(300));
        assert!(t.clear());
        assert!(!readable(t.as_raw_fd(), 0), "cleared");
        assert!(!t.clear());
    }

    #[test]
    fn the_threads_cpu_time_grows_with_work_and_not_with_sleep() {
        let a = thread_cpu_time();
        std::thread::sleep(Duration::from_millis(30));
        let b = thread_cpu_time();
        assert!(b - a < Duration::from_millis(10), "sleeping is not CPU time: {:?}", b - a);
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_millis(20) {
            x = std::hint::black_box(x.wrapping_add(1));
        }
        assert!(thread_cpu_time() - b >= Duration::from_millis(10), "spinning is");
    }

    #[test]
    fn a_new_setting_replaces_the_old_and_disarm_stops_it() {
        let t = TimerFd::new().unwrap();
        t.set(Duration::from_millis(1)).unwrap();
        t.set(Duration::from_secs(60)).unwrap();
        assert!(!readable(t.as_raw_fd(), 20), "moved later");
        t.set(Duration::ZERO).unwrap();
        assert!(readable(t.as_raw_fd(), 100), "zero: at once");
        t.clear();
        t.set(Duration::from_millis(1)).unwrap();
        t.disarm().unwrap();
        assert!(!readable(t.as_raw_fd(), 20), "disarmed");
    }
}
