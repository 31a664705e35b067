//! Sequence numbers: 32-bit values compared modulo 2^32 (RFC 9293 §3.4).
//!
//! Raw `u32` comparisons are wrong across the wrap, so every sequence number
//! in the stack is a [`SeqNumber`] and every comparison goes through it.

use core::fmt;
use core::ops::{Add, AddAssign, Sub};

/// A TCP sequence (or acknowledgment) number.
#[derive(Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct SeqNumber(u32);

impl SeqNumber {
    /// Wraps a raw value.
    pub const fn new(raw: u32) -> SeqNumber {
        SeqNumber(raw)
    }

    /// The raw value, for the wire.
    pub const fn get(self) -> u32 {
        self.0
    }

    /// Signed distance `self - other`: positive when `self` is later.
    ///
    /// Meaningful while the two are less than 2^31 apart, which the window
    /// limits guarantee for any pair the stack compares.
    pub const fn distance(self, other: SeqNumber) -> i32 {
        self.0.wrapping_sub(other.0) as i32
    }

    /// `self` comes strictly before `other`.
    pub const fn lt(self, other: SeqNumber) -> bool {
        self.distance(other) < 0
    }

    /// `self` comes before `other` or is equal to it.
    pub const fn le(self, other: SeqNumber) -> bool {
        self.distance(other) <= 0
    }

    /// `self` comes strictly after `other`.
    pub const fn gt(self, other: SeqNumber) -> bool {
        self.distance(other) > 0
    }

    /// `self` comes after `other` or is equal to it.
    pub const fn ge(self, other: SeqNumber) -> bool {
        self.distance(other) >= 0
    }

    /// The later of the two.
    pub const fn max(self, other: SeqNumber) -> SeqNumber {
        if self.lt(other) { other } else { self }
    }

    /// The earlier of the two.
    pub const fn min(self, other: SeqNumber) -> SeqNumber {
        if self.lt(other) { self } else { other }
    }

    /// `start <= self < start + len`, modulo 2^32.
    pub const fn in_window(self, start: SeqNumber, len: u32) -> bool {
        self.0.wrapping_sub(start.0) < len
    }

    /// The number of bytes from `earlier` up to `self`; zero when `self` is
    /// not after `earlier`.
    pub const fn since(self, earlier: SeqNumber) -> u32 {
        let d = self.distance(earlier);
        if d > 0 { d as u32 } else { 0 }
    }
}

impl Add<u32> for SeqNumber {
    type Output = SeqNumber;
    fn add(self, rhs: u32) -> SeqNumber {
        SeqNumber(self.0.wrapping_add(rhs))
    }
}

impl Add<usize> for SeqNumber {
    type Output = SeqNumber;
    /// Lengths in the stack never exceed 2^31, so truncating is exact.
    fn add(self, rhs: usize) -> SeqNumber {
        SeqNumber(self.0.wrapping_add(rhs as u32))
    }
}

impl AddAssign<u32> for SeqNumber {
    fn add_assign(&mut self, rhs: u32) {
        *self = *self + rhs;
    }
}

impl AddAssign<usize> for SeqNumber {
    fn add_assign(&mut self, rhs: usize) {
        *self = *self + rhs;
    }
}

impl Sub<u32> for SeqNumber {
    type Output = SeqNumber;
    fn sub(self, rhs: u32) -> SeqNumber {
        SeqNumber(self.0.wrapping_sub(rhs))
    }
}

impl fmt::Debug for SeqNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl fmt::Display for SeqNumber {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.0)
    }
}

impl From<smoltcp::wire::TcpSeqNumber> for SeqNumber {
    fn from(value: smoltcp::wire::TcpSeqNumber) -> SeqNumber {
        SeqNumber(value.0 as u32)
    }
}

impl From<SeqNumber> for smoltcp::wire::TcpSeqNumber {
    fn from(value: SeqNumber) -> smoltcp::wire::TcpSeqNumber {
        smoltcp::wire::TcpSeqNumber(value.0 as i32)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn comparisons_hold_across_the_wrap() {
        let a = SeqNumber::new(u32::MAX - 10);
        let b = a + 20u32;
        assert_eq!(b.get(), 9);
        assert!(a.lt(b) && b.gt(a) && a.le(a) && a.ge(a));
        assert_eq!(b.distance(a), 20);
        assert_eq!(a.distance(b), -20);
        assert_eq!(b.since(a), 20);
        assert_eq!(a.since(b), 0);
        assert_eq!(a.max(b), b);
        assert_eq!(a.min(b), a);
        assert!((a + 5u32).in_window(a, 20));
        assert!(!b.in_window(a, 20));
        assert!(!(a - 1u32).in_window(a, 20));
    }

    proptest! {
        #[test]
        fn adding_a_positive_offset_moves_forward(raw: u32, off in 1u32..(1 << 31)) {
            let s = SeqNumber::new(raw);
            let t = s + off;
            prop_assert!(s.lt(t));
            prop_assert!(t.gt(s));
            prop_assert!(!t.lt(s));
            prop_assert_eq!(t.distance(s), off as i32);
            prop_assert_eq!(t.since(s), off);
            prop_assert_eq!(s.max(t), t);
            prop_assert_eq!(s.min(t), s);
        }

        #[test]
        fn in_window_matches_distance(raw: u32, start: u32, len in 0u32..(1 << 31)) {
            let s = SeqNumber::new(raw);
            let w = SeqNumber::new(start);
            let d = s.distance(w);
            prop_assert_eq!(s.in_window(w, len), d >= 0 && (d as u32) < len);
        }

        #[test]
        fn ordering_is_antisymmetric(a: u32, b: u32) {
            let (a, b) = (SeqNumber::new(a), SeqNumber::new(b));
            // Exactly 2^31 apart is the one ambiguous distance; skip it.
            prop_assume!(a.distance(b) != i32::MIN);
            prop_assert_eq!(a.lt(b), b.gt(a));
            prop_assert_eq!(a.le(b) && b.le(a), a == b);
        }

        #[test]
        fn wire_conversion_round_trips(raw: u32) {
            let s = SeqNumber::new(raw);
            let w: smoltcp::wire::TcpSeqNumber = s.into();
            prop_assert_eq!(SeqNumber::from(w), s);
        }
    }
}
