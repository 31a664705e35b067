//! [`DeadlineQueue`]: items waiting for their time, earliest first, shared
//! by the simulated network (frame arrivals) and the link emulator (frame
//! departures).
//!
//! Among items due at the same microsecond, the one pushed first comes out
//! first. That tie-break, and nothing else, makes a simulated run a pure
//! function of its seed and inputs, and keeps an emulated link's frames in
//! order.
//!
//! A FIFO serves the common case and a heap the rest: without reordering,
//! times only grow (a FIFO serialiser, then a constant delay), so every
//! item joins the back of the FIFO at O(1); one due before the FIFO's last
//! (a reordered frame overtaking, or another link's earlier arrival) goes
//! to the binary heap, and the earlier of the two heads comes out first.
//! Capacity is kept once grown.

use std::cmp::Ordering;
use std::collections::{BinaryHeap, VecDeque};

/// `item`, due at `at` (microseconds).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Due<T> {
    pub(crate) at: u64,
    /// Order of pushing: the tie-break among items due at once.
    seq: u64,
    pub(crate) item: T,
}

impl<T> Due<T> {
    fn key(&self) -> (u64, u64) {
        (self.at, self.seq)
    }
}

impl<T> PartialEq for Due<T> {
    fn eq(&self, other: &Due<T>) -> bool {
        self.key() == other.key()
    }
}

impl<T> Eq for Due<T> {}

impl<T> PartialOrd for Due<T> {
    fn partial_cmp(&self, other: &Due<T>) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl<T> Ord for Due<T> {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest.
    fn cmp(&self, other: &Due<T>) -> Ordering {
        other.key().cmp(&self.key())
    }
}

/// Items in time order, then in the order they were pushed.
#[derive(Debug)]
pub(crate) struct DeadlineQueue<T> {
    fifo: VecDeque<Due<T>>,
    heap: BinaryHeap<Due<T>>,
    next_seq: u64,
}

impl<T> Default for DeadlineQueue<T> {
    fn default() -> DeadlineQueue<T> {
        DeadlineQueue { fifo: VecDeque::new(), heap: BinaryHeap::new(), next_seq: 0 }
    }
}

impl<T> DeadlineQueue<T> {
    /// Makes room for `items` in all, so that pushing that many allocates
    /// nothing.
    pub(crate) fn reserve(&mut self, items: usize) {
        self.fifo.reserve(items.saturating_sub(self.fifo.len()));
        self.heap.reserve(items.saturating_sub(self.heap.len()));
    }

    pub(crate) fn push(&mut self, at: u64, item: T) {
        let due = Due { at, seq: self.next_seq, item };
        self.next_seq += 1;
        match self.fifo.back() {
            Some(last) if last.at > at => self.heap.push(due),
            _ => self.fifo.push_back(due),
        }
    }

    /// The earliest time any item is due.
    pub(crate) fn next_at(&self) -> Option<u64> {
        match (self.fifo.front(), self.heap.peek()) {
            (Some(f), Some(h)) => Some(f.at.min(h.at)),
            (f, h) => f.or(h).map(|d| d.at),
        }
    }

    /// Removes and returns the earliest item if it is due at or before
    /// `now`.
    pub(crate) fn pop_due(&mut self, now: u64) -> Option<Due<T>> {
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

    /// Removes every item, due or not.
    pub(crate) fn drain(&mut self) -> impl Iterator<Item = Due<T>> + '_ {
        self.fifo.drain(..).chain(self.heap.drain())
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;

    use super::*;

    #[test]
    fn earliest_first_and_ties_in_pushing_order() {
        let mut q = DeadlineQueue::default();
        for (at, item) in [(5, 0), (3, 1), (5, 2), (3, 3), (4, 4), (5, 5)] {
            q.push(at, item);
        }
        assert_eq!(q.next_at(), Some(3));
        assert!(q.pop_due(2).is_none());
        let mut order = Vec::new();
        while let Some(d) = q.pop_due(5) {
            order.push(d.item);
        }
        assert_eq!(order, [1, 3, 4, 0, 2, 5]);
        assert_eq!(q.next_at(), None);
    }

    proptest! {
        #[test]
        fn pops_in_time_then_pushing_order(ats in proptest::collection::vec(0u64..50, 0..200), now in 0u64..60) {
            let mut q = DeadlineQueue::default();
            for (i, &at) in ats.iter().enumerate() {
                q.push(at, i as u32);
            }
            let mut expected: Vec<(u64, u32)> = ats.iter().enumerate().map(|(i, &at)| (at, i as u32)).collect();
            expected.sort();
            prop_assert_eq!(q.next_at(), expected.first().map(|e| e.0));
            let mut popped = Vec::new();
            while let Some(d) = q.pop_due(now) {
                popped.push((d.at, d.item));
            }
            let due: Vec<(u64, u32)> = expected.iter().copied().filter(|&(at, _)| at <= now).collect();
            prop_assert_eq!(&popped, &due);
            prop_assert_eq!(q.len(), ats.len() - due.len());
            prop_assert_eq!(q.drain().count(), ats.len() - due.len());
        }
    }
}
