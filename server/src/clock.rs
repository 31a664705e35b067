//! The runtime's clock: microseconds since the process started, as the
//! stack's [`Instant`]. The stack itself never reads a clock; the runtime
//! reads this one once per loop turn and passes it in.
//!
//! The loop reads time through the [`Clock`] trait so that tests can drive
//! it in virtual time; [`WallClock`] is the real one.

use std::sync::OnceLock;

use fairway_stack::time::Instant;

/// The moment everything is measured from: the first call in the process.
fn origin() -> std::time::Instant {
    static ORIGIN: OnceLock<std::time::Instant> = OnceLock::new();
    *ORIGIN.get_or_init(std::time::Instant::now)
}

/// Now, on the stack's clock (monotonic; the same origin on every thread).
#[must_use]
pub fn now() -> Instant {
    Instant::ZERO + origin().elapsed().into()
}

/// A std instant on the stack's clock (the origin if it is before it).
#[must_use]
pub fn from_std(at: std::time::Instant) -> Instant {
    Instant::ZERO + at.saturating_duration_since(origin()).into()
}

/// An instant on the stack's clock as a std instant (the inverse of
/// [`from_std`]).
#[must_use]
pub fn to_std(at: Instant) -> std::time::Instant {
    origin() + std::time::Duration::from(at.saturating_since(Instant::ZERO))
}

/// How long from now until `deadline`, as a std duration (zero if past).
#[must_use]
pub fn until(deadline: Instant) -> std::time::Duration {
    deadline.saturating_since(now()).into()
}

/// Where a shard loop reads the time, and how it pauses without waiting on
/// its device (interrupt coalescing).
pub trait Clock {
    /// Now, on the stack's clock.
    fn now(&self) -> Instant;
    /// Sleeps for `duration`, deaf to the device: frames that arrive
    /// meanwhile wait in its queue.
    fn pause(&mut self, duration: std::time::Duration);
}

/// The process's monotonic clock ([`now`]) and `thread::sleep`.
#[derive(Clone, Copy, Debug, Default)]
pub struct WallClock;

impl Clock for WallClock {
    fn now(&self) -> Instant {
        now()
    }
    fn pause(&mut self, duration: std::time::Duration) {
        std::thread::sleep(duration);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_clock_moves_forward_and_is_shared_by_threads() {
        let a = now();
        std::thread::sleep(std::time::Duration::from_millis(2));
        let b = std::thread::spawn(now).join().unwrap();
        assert!(b.saturating_since(a).total_micros() >= 2_000);
        assert_eq!(until(a), std::time::Duration::ZERO);
        assert_eq!(from_std(to_std(b)), b, "the two clocks map onto each other");
    }
}
