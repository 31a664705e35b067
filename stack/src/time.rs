//! Time as the stack sees it: passed in by the driver, never read from a clock.
//!
//! Both types count microseconds in a `u64`, which keeps them at eight bytes
//! (they sit in every connection) and makes arithmetic exact.

use core::fmt;
use core::ops::{Add, AddAssign, Mul, Sub};

/// A point in time, in microseconds since an origin the driver chooses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Instant {
    micros: u64,
}

impl Instant {
    /// The driver's origin.
    pub const ZERO: Instant = Instant { micros: 0 };

    /// An instant `micros` microseconds after the origin.
    pub const fn from_micros(micros: u64) -> Instant {
        Instant { micros }
    }

    /// An instant `millis` milliseconds after the origin.
    pub const fn from_millis(millis: u64) -> Instant {
        Instant { micros: millis * 1_000 }
    }

    /// An instant `secs` seconds after the origin.
    pub const fn from_secs(secs: u64) -> Instant {
        Instant { micros: secs * 1_000_000 }
    }

    /// Microseconds since the origin.
    pub const fn total_micros(self) -> u64 {
        self.micros
    }

    /// Milliseconds since the origin, rounded down.
    pub const fn total_millis(self) -> u64 {
        self.micros / 1_000
    }

    /// The time from `earlier` to `self`, or zero when `earlier` is later.
    pub const fn saturating_since(self, earlier: Instant) -> Duration {
        Duration::from_micros(self.micros.saturating_sub(earlier.micros))
    }
}

impl fmt::Display for Instant {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{:06}s", self.micros / 1_000_000, self.micros % 1_000_000)
    }
}

/// A span of time in microseconds.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Duration {
    micros: u64,
}

impl Duration {
    /// No time at all.
    pub const ZERO: Duration = Duration { micros: 0 };
    /// The longest representable span; used as "never".
    pub const MAX: Duration = Duration { micros: u64::MAX };

    /// A span of `micros` microseconds.
    pub const fn from_micros(micros: u64) -> Duration {
        Duration { micros }
    }

    /// A span of `millis` milliseconds.
    pub const fn from_millis(millis: u64) -> Duration {
        Duration { micros: millis * 1_000 }
    }

    /// A span of `secs` seconds.
    pub const fn from_secs(secs: u64) -> Duration {
        Duration { micros: secs * 1_000_000 }
    }

    /// The span in microseconds.
    pub const fn total_micros(self) -> u64 {
        self.micros
    }

    /// The span in milliseconds, rounded down.
    pub const fn total_millis(self) -> u64 {
        self.micros / 1_000
    }

    /// The span in seconds as a float, for reports.
    pub fn as_secs_f64(self) -> f64 {
        self.micros as f64 / 1e6
    }

    /// `self - other`, or zero.
    pub const fn saturating_sub(self, other: Duration) -> Duration {
        Duration { micros: self.micros.saturating_sub(other.micros) }
    }

    /// `self * factor`, saturating at [`Duration::MAX`].
    pub const fn saturating_mul(self, factor: u64) -> Duration {
        Duration { micros: self.micros.saturating_mul(factor) }
    }
}

/// A std duration on this clock, saturating at about 584,000 years; sub-
/// microsecond parts are dropped.
impl From<core::time::Duration> for Duration {
    fn from(d: core::time::Duration) -> Duration {
        Duration::from_micros(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
    }
}

/// This clock's span as a std duration.
impl From<Duration> for core::time::Duration {
    fn from(d: Duration) -> core::time::Duration {
        core::time::Duration::from_micros(d.total_micros())
    }
}

impl fmt::Display for Duration {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.micros >= 1_000_000 {
            write!(f, "{:.3}s", self.as_secs_f64())
        } else if self.micros >= 1_000 {
            write!(f, "{:.3}ms", self.micros as f64 / 1e3)
        } else {
            write!(f, "{}µs", self.micros)
        }
    }
}

impl Add<Duration> for Instant {
    type Output = Instant;
    fn add(self, rhs: Duration) -> Instant {
        Instant { micros: self.micros.saturating_add(rhs.micros) }
    }
}

impl AddAssign<Duration> for Instant {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}

impl Sub<Duration> for Instant {
    type Output = Instant;
    fn sub(self, rhs: Duration) -> Instant {
        Instant { micros: self.micros.saturating_sub(rhs.micros) }
    }
}

impl Sub<Instant> for Instant {
    type Output = Duration;
    /// Saturates at zero: time never runs backwards inside the stack.
    fn sub(self, rhs: Instant) -> Duration {
        self.saturating_since(rhs)
    }
}

impl Add for Duration {
    type Output = Duration;
    fn add(self, rhs: Duration) -> Duration {
        Duration { micros: self.micros.saturating_add(rhs.micros) }
    }
}

impl AddAssign for Duration {
    fn add_assign(&mut self, rhs: Duration) {
        *self = *self + rhs;
    }
}

impl Sub for Duration {
    type Output = Duration;
    fn sub(self, rhs: Duration) -> Duration {
        self.saturating_sub(rhs)
    }
}

impl Mul<u32> for Duration {
    type Output = Duration;
    fn mul(self, rhs: u32) -> Duration {
        self.saturating_mul(rhs as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_saturates_instead_of_wrapping() {
        let t = Instant::from_millis(5);
        assert_eq!(t - Instant::from_millis(7), Duration::ZERO);
        assert_eq!(t - Duration::from_secs(1), Instant::ZERO);
        assert_eq!(Instant::from_micros(u64::MAX - 1) + Duration::from_secs(1), Instant::from_micros(u64::MAX));
        assert_eq!(Duration::from_millis(3) * 4, Duration::from_millis(12));
    }

    #[test]
    fn display_picks_a_readable_unit() {
        assert_eq!(Duration::from_micros(250).to_string(), "250µs");
        assert_eq!(Duration::from_micros(1_500).to_string(), "1.500ms");
        assert_eq!(Duration::from_millis(2_500).to_string(), "2.500s");
        assert_eq!(Instant::from_micros(1_000_001).to_string(), "1.000001s");
    }
}
