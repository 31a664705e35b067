//! [`DeadlineQueue`]: the frames of one direction waiting for their
//! departure time, earliest first.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

/// Frame buffer `slot` (`len` bytes) leaves at `at` (microseconds).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Departure {
    pub(crate) at: u64,
    /// Order of scheduling: among frames due at the same microsecond, the
    /// one scheduled first leaves first (as in the simulator).
    seq: u64,
    pub(crate) slot: u32,
    pub(crate) len: u32,
}

impl Departure {
    fn key(&self) -> (u64, u64) {
        (self.at, self.seq)
    }
}

impl PartialOrd for Departure {
    fn partial_cmp(&self, other: &Departure) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Departure {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest.
    fn cmp(&self, other: &Departure) -> Ordering {
        other.key().cmp(&self.key())
    }
}

/// Departures in time order: a FIFO for the common case, a heap for the
/// rest.
///
/// Without reordering, departure times only grow (a FIFO serialiser, then a
/// constant delay), so every frame joins the back of the FIFO at O(1). A
/// frame due before the FIFO's last one (a frame overtaking a reordered
/// one) goes to the binary heap instead; the earliest of the two heads
/// leaves first. Capacity is kept once grown.
#[derive(Debug, Default)]
pub(crate) struct DeadlineQueue {
    fifo: VecDeque<Departure>,
    heap: BinaryHeap<Departure>,
    next_seq: u64,
}

impl DeadlineQueue {
    pub(crate) fn push(&mut self, at: u64, slot: u32, len: u32) {
        let departure = Departure { at, seq: self.next_seq, slot, len };
        self.next_seq += 1;
        match self.fifo.back() {
            Some(last) if last.at > at => self.heap.push(departure),
            _ => self.fifo.push_back(departure),
        }
    }

    /// The earliest departure time.
    pub(crate) fn next_at(&self) -> Option<u64> {
        match (self.fifo.front(), self.heap.peek()) {
            (Some(f), Some(h)) => Some(f.at.min(h.at)),
            (f, h) => f.or(h).map(|d| d.at),
        }
    }

    /// Removes and returns the earliest departure if it is due at or before
    /// `now`.
    pub(crate) fn pop_due(&mut self, now: u64) -> Option<Departure> {
        let from_heap = match (self.fifo.front(), self.heap.peek()) {
            (Some(f), Some(h)) => h.key() < f.key(),
            (None, Some(_)) => true,
            (_, None) => false,
        };
        if from_heap {
            if self.heap.peek()?.at <= now { self.heap.pop() } else { None }
        } else if self.fifo.front()?.at <= now {
            self.fifo.pop_front()
        } else {
            None
        }
    }

    pub(crate) fn len(&self) -> usize {
        self.fifo.len() + self.heap.len()
    }

    /// Removes every departure, due or not.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = Departure> + '_ {
        self.fifo.drain(..).chain(self.heap.drain())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    proptest! {
        #[test]
        fn pops_in_time_then_scheduling_order(ats in proptest::collection::vec(0u64..50, 0..200), now in 0u64..60) {
            let mut q = DeadlineQueue::default();
            for (i, &at) in ats.iter().enumerate() {
                q.push(at, i as u32, 0);
            }
            let mut expected: Vec<(u64, u32)> = ats.iter().enumerate().map(|(i, &at)| (at, i as u32)).collect();
            expected.sort();
            prop_assert_eq!(q.next_at(), expected.first().map(|e| e.0));
            let mut popped = Vec::new();
            while let Some(d) = q.pop_due(now) {
                popped.push((d.at, d.slot));
            }
            let due: Vec<(u64, u32)> = expected.iter().copied().filter(|&(at, _)| at <= now).collect();
            prop_assert_eq!(&popped, &due);
            prop_assert_eq!(q.len(), ats.len() - due.len());
            prop_assert_eq!(q.drain().count(), ats.len() - due.len());
        }
    }
}
