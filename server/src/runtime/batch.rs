//! Bounded adaptive receive batches (after IX, OSDI 2014).
//!
//! A small batch keeps latency low at light load: the first frames of a
//! burst are answered before the rest are even read. A large batch
//! amortises the per-turn work (timers, events, a transmit kick) under load.
//! So the receive budget starts small, doubles each time a receive fills it
//! (more is waiting), halves each time a receive leaves it less than half
//! used, and never leaves `[min(ADAPTIVE_START, max), max]`.

/// The budget an adaptive loop starts at, and the least it falls to.
pub const ADAPTIVE_START: usize = 8;

/// The receive budget of one shard loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdaptiveBatch {
    budget: usize,
    floor: usize,
    max: usize,
}

impl AdaptiveBatch {
    /// A budget bounded by `max` (at least 1); fixed at `max` when
    /// `adaptive` is false.
    #[must_use]
    pub fn new(max: usize, adaptive: bool) -> AdaptiveBatch {
        let max = max.max(1);
        let floor = if adaptive { ADAPTIVE_START.min(max) } else { max };
        AdaptiveBatch { budget: floor, floor, max }
    }

    /// How many frames to ask the device for this turn.
    #[must_use]
    pub fn budget(&self) -> usize {
        self.budget
    }

    /// A receive with the current budget handed over `received` frames.
    pub fn record(&mut self, received: usize) {
        if received >= self.budget {
            self.budget = (self.budget * 2).min(self.max);
        } else if received < self.budget / 2 {
            self.budget = (self.budget / 2).max(self.floor);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn doubles_while_batches_fill_up_to_the_bound() {
        let mut b = AdaptiveBatch::new(100, true);
        let mut seen = vec![b.budget()];
        for _ in 0..6 {
            b.record(b.budget());
            seen.push(b.budget());
        }
        assert_eq!(seen, [8, 16, 32, 64, 100, 100, 100]);
    }

    #[test]
    fn halves_when_less_than_half_used_down_to_the_start() {
        let mut b = AdaptiveBatch::new(64, true);
        for _ in 0..3 {
            b.record(b.budget());
        }
        assert_eq!(b.budget(), 64);
        b.record(32); // exactly half: keep
        assert_eq!(b.budget(), 64);
        b.record(31);
        assert_eq!(b.budget(), 32);
        b.record(0);
        b.record(0);
        b.record(0);
        assert_eq!(b.budget(), 8);
    }

    #[test]
    fn fixed_when_adaptivity_is_off_and_bounded_below_by_one() {
        let mut b = AdaptiveBatch::new(64, false);
        b.record(0);
        assert_eq!(b.budget(), 64);
        b.record(64);
        assert_eq!(b.budget(), 64);
        assert_eq!(AdaptiveBatch::new(0, true).budget(), 1);
        assert_eq!(AdaptiveBatch::new(4, true).budget(), 4);
    }
}
