//! A shard's connection deadlines: a min-heap of `(when, slot)` with lazy
//! deletion.
//!
//! Each slot remembers the one deadline it has *armed*. A deadline that
//! moves later (the usual case: every exchange pushes the idle timeout
//! back) is not touched: the armed entry fires early, the caller finds
//! nothing due and arms the new one. A deadline that moves earlier (a
//! header timeout starting) pushes a new entry and the old one becomes
//! stale, recognised on pop because it is no longer the slot's armed
//! time. So the heap holds a few entries per slot, whatever the churn of
//! connections through the slot, and a slot costs O(log n) per firing.

use std::cmp::Reverse;
use std::collections::BinaryHeap;

use fairway_stack::time::Instant;

/// The deadlines of one shard's slots.
#[derive(Debug, Default)]
pub(super) struct Deadlines {
    heap: BinaryHeap<Reverse<(Instant, usize)>>,
}

impl Deadlines {
    /// Makes sure slot `slot` is woken at or before `at`; `armed` is the
    /// slot's armed time, updated here.
    pub(super) fn arm(&mut self, armed: &mut Option<Instant>, slot: usize, at: Option<Instant>) {
        let Some(at) = at else { return };
        if armed.is_none_or(|armed| at < armed) {
            self.heap.push(Reverse((at, slot)));
            *armed = Some(at);
        }
    }

    /// The earliest entry, possibly stale (waking for it is harmless).
    pub(super) fn next(&self) -> Option<Instant> {
        self.heap.peek().map(|Reverse((at, _))| *at)
    }

    /// Takes the earliest entry due at `now`: `(when, slot)`. The caller
    /// drops it unless `when` is the slot's armed time, and otherwise
    /// disarms the slot before handling it.
    pub(super) fn pop_due(&mut self, now: Instant) -> Option<(Instant, usize)> {
        if self.next()? > now {
            return None;
        }
        self.heap.pop().map(|Reverse(entry)| entry)
    }

    /// Entries held, stale ones included.
    #[cfg(test)]
    pub(super) fn len(&self) -> usize {
        self.heap.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Pops everything due at `now` the way the shard does: only armed
    /// entries count.
    fn fire(d: &mut Deadlines, armed: &mut [Option<Instant>], now: Instant) -> Vec<usize> {
        let mut fired = Vec::new();
        while let Some((at, slot)) = d.pop_due(now) {
            if armed[slot] == Some(at) {
                armed[slot] = None;
                fired.push(slot);
            }
        }
        fired
    }

    #[test]
    fn earlier_deadlines_replace_later_ones_and_later_ones_wait() {
        let t = Instant::from_secs;
        let mut d = Deadlines::default();
        let mut armed = [None; 3];
        d.arm(&mut armed[0], 0, Some(t(60)));
        d.arm(&mut armed[1], 1, Some(t(10)));
        d.arm(&mut armed[0], 0, Some(t(5))); // a header timeout starts
        d.arm(&mut armed[1], 1, Some(t(70))); // pushed back: nothing added
        d.arm(&mut armed[2], 2, None);
        assert_eq!((d.len(), d.next()), (3, Some(t(5))));
        assert_eq!(fire(&mut d, &mut armed, t(4)), Vec::<usize>::new());
        assert_eq!(fire(&mut d, &mut armed, t(10)), [0, 1]);
        // Slot 0's stale entry at 60 s is dropped when it comes up.
        assert_eq!(fire(&mut d, &mut armed, t(100)), Vec::<usize>::new());
        assert_eq!(d.len(), 0);
    }

    #[test]
    fn a_reused_slot_keeps_one_entry() {
        let t = Instant::from_secs;
        let mut d = Deadlines::default();
        let mut armed = [None];
        // A thousand short connections through one slot, each armed for
        // 60 s after it opened: the first entry covers them all.
        for i in 0..1000 {
            d.arm(&mut armed[0], 0, Some(t(60 + i)));
        }
        assert_eq!(d.len(), 1);
    }
}
