//! [`EventQueue`]: the pending frame arrivals, earliest first.

use std::cmp::Ordering;
use std::collections::BinaryHeap;

/// Frame `frame` reaches the far end of link `link` at `at` (microseconds).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Event {
    pub(crate) at: u64,
    /// Order of scheduling: among events at the same microsecond, the one
    /// scheduled first runs first. This tie-break, and nothing else, makes a
    /// run a pure function of its seed and inputs.
    seq: u64,
    pub(crate) frame: u32,
    pub(crate) link: u32,
}

impl Event {
    fn key(&self) -> (u64, u64) {
        (self.at, self.seq)
    }
}

impl PartialEq for Event {
    fn eq(&self, other: &Event) -> bool {
        self.key() == other.key()
    }
}

impl Eq for Event {}

impl PartialOrd for Event {
    fn partial_cmp(&self, other: &Event) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Event {
    /// Reversed, so that `BinaryHeap` (a max-heap) pops the earliest event.
    fn cmp(&self, other: &Event) -> Ordering {
        other.key().cmp(&self.key())
    }
}

/// A binary heap of [`Event`]s; its capacity is kept once grown.
#[derive(Debug, Default)]
pub(crate) struct EventQueue {
    heap: BinaryHeap<Event>,
    next_seq: u64,
}

impl EventQueue {
    pub(crate) fn reserve(&mut self, events: usize) {
        self.heap.reserve(events.saturating_sub(self.heap.len()));
    }

    pub(crate) fn push(&mut self, at: u64, frame: u32, link: u32) {
        let seq = self.next_seq;
        self.next_seq += 1;
        self.heap.push(Event { at, seq, frame, link });
    }

    /// The time of the earliest event.
    pub(crate) fn peek_time(&self) -> Option<u64> {
        self.heap.peek().map(|e| e.at)
    }

    /// Removes and returns the earliest event if it is due at or before `to`.
    pub(crate) fn pop_due(&mut self, to: u64) -> Option<Event> {
        if self.heap.peek()?.at <= to { self.heap.pop() } else { None }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn earliest_first_and_ties_in_scheduling_order() {
        let mut q = EventQueue::default();
        for (at, frame) in [(5, 0), (3, 1), (5, 2), (3, 3), (4, 4), (5, 5)] {
            q.push(at, frame, 0);
        }
        assert_eq!(q.peek_time(), Some(3));
        assert!(q.pop_due(2).is_none());
        let mut order = Vec::new();
        while let Some(e) = q.pop_due(5) {
            order.push(e.frame);
        }
        assert_eq!(order, [1, 3, 4, 0, 2, 5]);
        assert_eq!(q.peek_time(), None);
    }
}
