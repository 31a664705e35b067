//! One hierarchical timer wheel for every timer in a shard.
//!
//! Entries are identified by a dense `u32` id (a connection's slab index, or a
//! few ids the shard reserves for itself); each id has at most one deadline,
//! and scheduling it again moves it. Insert, cancel and move are O(1); so is
//! [`TimerWheel::next_wakeup`], which reads occupancy bitmaps instead of
//! scanning entries.
//!
//! Deadlines are rounded *up* to the wheel's tick, so a timer never fires
//! early and fires at most one tick late.
//!
//! # Layout
//!
//! Time is counted in ticks since [`Instant::ZERO`]. There are [`LEVELS`]
//! levels of 64 slots; a slot of level `L` spans 64^L ticks, so level 0 has
//! one slot per tick and the wheel covers 64^6 ticks (2^42 µs, about 51 days).
//!
//! An entry expiring at tick `t` is placed by the highest bit in which `t`
//! differs from the wheel's current tick (`elapsed`): bits 0–5 put it in level
//! 0, bits 6–11 in level 1, and so on, in the slot given by `t`'s digit at that
//! level. Entries of level `L` therefore share every digit above `L` with
//! `elapsed` and have a larger digit at `L`, which gives two invariants:
//!
//! - every occupied slot of a level lies ahead of `elapsed`'s digit at that
//!   level, so the first occupied slot is the lowest set bit of the level's
//!   bitmap, and
//! - every entry of a lower level expires before every slot of a higher level
//!   begins.
//!
//! So the next event is the first occupied slot of the lowest non-empty level:
//! at level 0 that is an expiry, higher up the moment to *cascade* the slot,
//! re-placing its entries relative to the new `elapsed` (they land lower).
//! The wheel only ever advances `elapsed` to the next event or to a time
//! before it, which keeps both invariants.
//!
//! Deadlines beyond the wheel's span are clamped into the top level: into the
//! slot whose next turn is the farthest reachable (or earlier, if the deadline
//! itself comes earlier), and are re-placed when that slot is cascaded. Only
//! the top level wraps around, so only there can an occupied slot lie at or
//! behind `elapsed`'s digit; it then means the slot's next turn.
//!
//! Every id's node lives in one `Vec` indexed by id and is linked into an
//! intrusive doubly-linked list (a slot's, or the list of due ids), so moving a
//! timer touches a few words and steady state allocates nothing.

use crate::time::Instant;

/// Levels of the wheel.
const LEVELS: usize = 6;
/// log2 of the slots per level.
const SLOT_BITS: u32 = 6;
/// Slots per level: one bit each in a `u64` bitmap.
const SLOTS: usize = 1 << SLOT_BITS;
/// Microseconds per tick, as a shift.
const TICK_SHIFT: u32 = 6;
/// The list index of the due list, after the slot lists.
const DUE: u16 = (LEVELS * SLOTS) as u16;
/// The list index of an id without a deadline.
const UNSCHEDULED: u16 = u16::MAX;
/// The null link.
const NONE: u32 = u32::MAX;

/// One id's timer: its deadline and its links in the list it sits in.
#[derive(Clone, Copy, Debug)]
struct Node {
    /// The deadline as scheduled, in microseconds.
    at: u64,
    prev: u32,
    next: u32,
    /// Which list the node is in: `level * SLOTS + slot`, [`DUE`], or
    /// [`UNSCHEDULED`].
    list: u16,
}

impl Node {
    const UNSCHEDULED: Node = Node { at: 0, prev: NONE, next: NONE, list: UNSCHEDULED };

    /// The tick the deadline is rounded up to.
    fn tick(&self) -> u64 {
        self.at.div_ceil(1 << TICK_SHIFT)
    }
}

/// The next event of the wheel: a slot and the tick when it comes due.
#[derive(Clone, Copy, Debug)]
struct Expiration {
    level: usize,
    slot: usize,
    tick: u64,
}

/// A hierarchical timer wheel.
#[derive(Debug)]
pub struct TimerWheel {
    /// Per id; grown on demand.
    nodes: Vec<Node>,
    /// Heads of the slot lists (`level * SLOTS + slot`) and of the due list.
    heads: [u32; LEVELS * SLOTS + 1],
    /// The due list is FIFO: ids scheduled in the past queue behind the ones
    /// already due.
    due_tail: u32,
    /// Per level, which slots hold entries.
    occupied: [u64; LEVELS],
    /// The tick the wheel has advanced to: everything expiring at or before it
    /// is in the due list.
    elapsed: u64,
    /// The latest time the wheel was given.
    now: Instant,
    len: usize,
}

impl TimerWheel {
    /// The wheel's resolution.
    pub const TICK: crate::time::Duration = crate::time::Duration::from_micros(1 << TICK_SHIFT);

    /// An empty wheel whose clock starts at `now`.
    #[must_use]
    pub fn new(now: Instant) -> TimerWheel {
        TimerWheel {
            nodes: Vec::new(),
            heads: [NONE; LEVELS * SLOTS + 1],
            due_tail: NONE,
            occupied: [0; LEVELS],
            elapsed: now.total_micros() >> TICK_SHIFT,
            now,
            len: 0,
        }
    }

    /// Sets the deadline of `id` to `at`, replacing any earlier one.
    ///
    /// A deadline at or before the wheel's current time makes the id due at
    /// the next [`TimerWheel::pop_expired`].
    ///
    /// Ids index a vector, so keep them dense.
    ///
    /// # Panics
    ///
    /// When `id` is `u32::MAX`, which the wheel reserves as its null link.
    pub fn schedule(&mut self, id: u32, at: Instant) {
        assert!(id != NONE, "timer id u32::MAX is reserved");
        let index = id as usize;
        if index >= self.nodes.len() {
            self.nodes.resize(index + 1, Node::UNSCHEDULED);
        }
        if self.nodes[index].list == UNSCHEDULED {
            self.len += 1;
        } else {
            self.unlink(id);
        }
        self.nodes[index].at = at.total_micros();
        if at <= self.now {
            self.push_due(id);
        } else {
            // at > now >= elapsed * TICK, so the tick lies ahead of `elapsed`.
            let tick = self.nodes[index].tick();
            self.place(id, tick);
        }
    }

    /// Removes the deadline of `id`; returns whether it had one.
    pub fn cancel(&mut self, id: u32) -> bool {
        match self.nodes.get(id as usize) {
            Some(node) if node.list != UNSCHEDULED => {
                self.unlink(id);
                self.nodes[id as usize] = Node::UNSCHEDULED;
                self.len -= 1;
                true
            }
            _ => false,
        }
    }

    /// The deadline of `id`, as scheduled (not rounded).
    #[must_use]
    pub fn deadline(&self, id: u32) -> Option<Instant> {
        self.nodes.get(id as usize).filter(|node| node.list != UNSCHEDULED).map(|node| Instant::from_micros(node.at))
    }

    /// When [`TimerWheel::pop_expired`] should next be called: never later
    /// than the earliest firing time, possibly earlier (when entries of a
    /// coarse level must first move down). `None` when the wheel is empty.
    ///
    /// While ids are due (including ones scheduled in the past) this is the
    /// wheel's current time. Right after `pop_expired(now)` returned `None` it
    /// is later than `now`, so a driver that sleeps until it always progresses.
    #[must_use]
    pub fn next_wakeup(&self) -> Option<Instant> {
        if self.heads[DUE as usize] != NONE {
            return Some(self.now);
        }
        // The product saturates only for deadlines within a tick of the end
        // of time, which never fire anyway.
        self.next_expiration().map(|expiration| Instant::from_micros(expiration.tick.saturating_mul(1 << TICK_SHIFT)))
    }

    /// Advances the wheel's clock to `now` and removes and returns one id
    /// whose deadline has passed, or `None` when none is left.
    ///
    /// Call it in a loop until `None`. An id due at `now` is returned exactly
    /// once per loop unless the caller schedules it again at or before `now`;
    /// ids rescheduled later than `now` from inside the loop wait for a later
    /// call. A `now` earlier than a previous one is taken as the previous one.
    pub fn pop_expired(&mut self, now: Instant) -> Option<u32> {
        if now > self.now {
            self.now = now;
        }
        let now_tick = self.now.total_micros() >> TICK_SHIFT;
        loop {
            if let Some(id) = self.pop_due() {
                return Some(id);
            }
            match self.next_expiration() {
                Some(expiration) if expiration.tick <= now_tick => {
                    self.elapsed = expiration.tick;
                    self.expire_slot(expiration.level, expiration.slot);
                }
                _ => {
                    // Nothing comes due before `now_tick`, so jumping there
                    // keeps every entry ahead of `elapsed` in its slot.
                    self.elapsed = now_tick;
                    return None;
                }
            }
        }
    }

    /// The number of scheduled ids.
    #[must_use]
    pub fn len(&self) -> usize {
        self.len
    }

    /// No id is scheduled.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The wheel's clock: the latest time given to [`TimerWheel::new`] or
    /// [`TimerWheel::pop_expired`].
    #[must_use]
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Puts `id` in the slot for expiry `tick`, which lies after `elapsed`.
    fn place(&mut self, id: u32, tick: u64) {
        debug_assert!(tick > self.elapsed);
        let (level, slot) = self.slot_for(tick);
        self.push_front((level * SLOTS + slot) as u16, id);
        self.occupied[level] |= 1 << slot;
    }

    /// The level and slot for an entry expiring at `tick` (after `elapsed`).
    fn slot_for(&self, tick: u64) -> (usize, usize) {
        let differing = self.elapsed ^ tick;
        if differing >> (LEVELS as u32 * SLOT_BITS) == 0 {
            // The highest differing bit picks the level; `| (SLOTS - 1)` maps
            // differences in the lowest digit to level 0.
            let high_bit = 63 - (differing | (SLOTS as u64 - 1)).leading_zeros();
            let level = (high_bit / SLOT_BITS) as usize;
            let slot = (tick >> (level as u32 * SLOT_BITS)) as usize & (SLOTS - 1);
            return (level, slot);
        }
        // Beyond the wheel's span: the top level's slot whose next turn is
        // the latest reachable one (the slot `elapsed` is in, one revolution
        // on), unless the deadline comes before that turn.
        let top_shift = (LEVELS as u32 - 1) * SLOT_BITS;
        let horizon = (self.elapsed >> top_shift << top_shift) + (1 << (top_shift + SLOT_BITS));
        let slot = (tick.min(horizon) >> top_shift) as usize & (SLOTS - 1);
        (LEVELS - 1, slot)
    }

    /// The first occupied slot of the lowest non-empty level and the tick
    /// when it comes due. O(1): at most [`LEVELS`] bitmap reads.
    fn next_expiration(&self) -> Option<Expiration> {
        let level = self.occupied.iter().position(|&bitmap| bitmap != 0)?;
        let bitmap = self.occupied[level];
        let shift = level as u32 * SLOT_BITS;
        let current = (self.elapsed >> shift) as usize & (SLOTS - 1);
        // Slots strictly after `elapsed`'s digit come this revolution; only
        // the top level can hold slots at or behind it (clamped far entries),
        // whose turn is the next revolution.
        let ahead = bitmap & ((u64::MAX << current) << 1);
        debug_assert!(level == LEVELS - 1 || ahead == bitmap, "lower levels never wrap");
        let slot = if ahead != 0 { ahead.trailing_zeros() } else { bitmap.trailing_zeros() } as usize;
        let revolution = 1u64 << (shift + SLOT_BITS);
        let mut tick = (self.elapsed & !(revolution - 1)) + ((slot as u64) << shift);
        if slot <= current {
            tick += revolution;
        }
        // Time only moves forward; an event at or before `elapsed` would make
        // pop_expired spin.
        debug_assert!(tick > self.elapsed, "next event {tick} not after elapsed {}", self.elapsed);
        Some(Expiration { level, slot, tick })
    }

    /// Empties a slot whose time (`elapsed`) has come: entries expiring now
    /// become due, the rest move to lower levels.
    fn expire_slot(&mut self, level: usize, slot: usize) {
        let list = level * SLOTS + slot;
        let mut id = self.heads[list];
        self.heads[list] = NONE;
        self.occupied[level] &= !(1 << slot);
        while id != NONE {
            let node = self.nodes[id as usize];
            let tick = node.tick();
            if tick <= self.elapsed {
                self.push_due(id);
            } else {
                // Re-placing may push onto this very list (a clamped entry
                // still beyond the span); `next` was read first, so the walk
                // stays on the detached chain.
                self.place(id, tick);
            }
            id = node.next;
        }
    }

    fn push_front(&mut self, list: u16, id: u32) {
        let head = self.heads[list as usize];
        if head != NONE {
            self.nodes[head as usize].prev = id;
        }
        let node = &mut self.nodes[id as usize];
        node.prev = NONE;
        node.next = head;
        node.list = list;
        self.heads[list as usize] = id;
    }

    fn push_due(&mut self, id: u32) {
        let tail = self.due_tail;
        let node = &mut self.nodes[id as usize];
        node.prev = tail;
        node.next = NONE;
        node.list = DUE;
        if tail == NONE {
            self.heads[DUE as usize] = id;
        } else {
            self.nodes[tail as usize].next = id;
        }
        self.due_tail = id;
    }

    /// Takes the first due id off the due list and forgets its deadline.
    fn pop_due(&mut self) -> Option<u32> {
        let id = self.heads[DUE as usize];
        if id == NONE {
            return None;
        }
        self.unlink(id);
        self.nodes[id as usize] = Node::UNSCHEDULED;
        self.len -= 1;
        Some(id)
    }

    /// Unlinks a scheduled `id` from its list, keeping bitmaps and the due
    /// tail in step. The node's own fields are left for the caller.
    fn unlink(&mut self, id: u32) {
        let Node { prev, next, list, .. } = self.nodes[id as usize];
        debug_assert!(list != UNSCHEDULED);
        if prev == NONE {
            self.heads[list as usize] = next;
        } else {
            self.nodes[prev as usize].next = next;
        }
        if next == NONE {
            if list == DUE {
                self.due_tail = prev;
            }
        } else {
            self.nodes[next as usize].prev = prev;
        }
        if list != DUE && self.heads[list as usize] == NONE {
            let (level, slot) = (list as usize / SLOTS, list as usize % SLOTS);
            self.occupied[level] &= !(1 << slot);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::time::Duration;
    use proptest::prelude::*;
    use std::collections::{BTreeMap, BTreeSet};

    const TICK: u64 = TimerWheel::TICK.total_micros();
    /// Ticks the wheel spans before clamping.
    const SPAN_TICKS: u64 = 1 << (LEVELS as u32 * SLOT_BITS);

    fn at(micros: u64) -> Instant {
        Instant::from_micros(micros)
    }

    /// The time a deadline fires at: rounded up to the tick.
    fn rounded(deadline: u64) -> u64 {
        deadline.div_ceil(TICK) * TICK
    }

    /// Pops everything due at `now`.
    fn drain(wheel: &mut TimerWheel, now: Instant) -> Vec<u32> {
        std::iter::from_fn(|| wheel.pop_expired(now)).collect()
    }

    /// Drives the wheel the way a runtime would: jump to each wakeup and pop
    /// everything; returns `(id, time popped)` until `limit` or empty.
    ///
    /// Each id costs at most one wakeup per level, so far more wakeups than
    /// that means the wheel stopped making progress: fail instead of hanging.
    #[track_caller]
    fn run_until(wheel: &mut TimerWheel, limit: Instant) -> Vec<(u32, Instant)> {
        let mut fired = Vec::new();
        let mut budget = 100 + 10 * LEVELS * wheel.len();
        while let Some(wakeup) = wheel.next_wakeup() {
            if wakeup > limit {
                break;
            }
            budget = budget.checked_sub(1).expect("livelock: the wheel stopped making progress");
            let now = wakeup.max(wheel.now());
            fired.extend(drain(wheel, now).into_iter().map(|id| (id, now)));
        }
        fired
    }

    #[test]
    fn empty_wheel() {
        let mut wheel = TimerWheel::new(at(1_000));
        assert!(wheel.is_empty());
        assert_eq!(wheel.next_wakeup(), None);
        assert_eq!(wheel.pop_expired(at(1_000_000)), None);
        assert!(!wheel.cancel(3));
        assert_eq!(wheel.deadline(3), None);
        assert_eq!(wheel.now(), at(1_000_000));
    }

    #[test]
    fn fires_at_the_rounded_deadline_never_early() {
        let mut wheel = TimerWheel::new(at(0));
        wheel.schedule(7, at(1_000));
        let fire = rounded(1_000);
        assert_eq!(fire, 1_024);
        assert_eq!(wheel.next_wakeup(), Some(at(fire)));
        assert_eq!(wheel.pop_expired(at(999)), None);
        assert_eq!(wheel.pop_expired(at(1_000)), None, "rounded up: due at 1024");
        assert_eq!(wheel.pop_expired(at(fire - 1)), None);
        assert_eq!(wheel.pop_expired(at(fire)), Some(7));
        assert_eq!(wheel.pop_expired(at(fire)), None);
        assert!(wheel.is_empty());
    }

    #[test]
    fn never_early_at_most_one_tick_late() {
        let deadlines = [1, 63, 64, 65, 4_095, 4_096, 4_097, 262_143, 1_000_000, 77_777_777, 3_000_000_000];
        let start = 12_345;
        let mut wheel = TimerWheel::new(at(start));
        for (id, &d) in deadlines.iter().enumerate() {
            wheel.schedule(id as u32, at(start + d));
        }
        let fired = run_until(&mut wheel, at(u64::MAX / 2));
        assert_eq!(fired.len(), deadlines.len());
        for (id, when) in fired {
            let deadline = start + deadlines[id as usize];
            assert!(when.total_micros() >= deadline, "id {id} early");
            assert!(when.total_micros() < deadline + TICK, "id {id} late: {when}");
        }
    }

    #[test]
    fn schedule_in_the_past_is_due_at_the_next_pop() {
        let mut wheel = TimerWheel::new(at(10_000));
        wheel.schedule(1, at(5_000));
        wheel.schedule(2, at(10_000));
        assert_eq!(wheel.next_wakeup(), Some(at(10_000)));
        assert_eq!(wheel.pop_expired(at(10_000)), Some(1));
        assert_eq!(wheel.pop_expired(at(10_000)), Some(2));
        assert_eq!(wheel.pop_expired(at(10_000)), None);
        // Mid-tick "now": a deadline just before it is due even though its
        // rounded tick lies ahead.
        assert_eq!(wheel.pop_expired(at(10_030)), None);
        wheel.schedule(3, at(10_020));
        assert_eq!(wheel.pop_expired(at(10_030)), Some(3));
    }

    #[test]
    fn cancel_and_reschedule() {
        let mut wheel = TimerWheel::new(at(0));
        wheel.schedule(1, at(500));
        wheel.schedule(2, at(700));
        assert_eq!(wheel.len(), 2);
        assert!(wheel.cancel(1));
        assert!(!wheel.cancel(1));
        assert_eq!(wheel.len(), 1);
        assert_eq!(wheel.deadline(1), None);
        // Moving a deadline later or earlier replaces it.
        wheel.schedule(2, at(90_000));
        assert_eq!(wheel.deadline(2), Some(at(90_000)));
        assert_eq!(wheel.len(), 1);
        assert_eq!(drain(&mut wheel, at(1_000)), Vec::<u32>::new());
        wheel.schedule(2, at(1_500));
        assert_eq!(wheel.next_wakeup(), Some(at(rounded(1_500))));
        assert_eq!(drain(&mut wheel, at(2_000)), vec![2]);
        assert_eq!(wheel.next_wakeup(), None);
    }

    #[test]
    fn cancel_every_kind_of_entry() {
        let mut wheel = TimerWheel::new(at(1 << 20));
        let now = wheel.now().total_micros();
        let offsets = [0, 10, 5_000, 1 << 20, 1 << 30, 1 << 41, 1 << 50];
        for (id, &offset) in offsets.iter().enumerate() {
            wheel.schedule(id as u32, at(now + offset));
        }
        for id in 0..offsets.len() as u32 {
            assert!(wheel.cancel(id));
        }
        assert!(wheel.is_empty());
        assert_eq!(wheel.occupied, [0; LEVELS]);
        assert_eq!(wheel.next_wakeup(), None);
        assert_eq!(wheel.pop_expired(at(u64::MAX / 2)), None);
    }

    #[test]
    fn rescheduled_from_the_loop_waits_for_a_later_advance() {
        let mut wheel = TimerWheel::new(at(0));
        for id in 0..100 {
            wheel.schedule(id, at(u64::from(id) * 10));
        }
        let now = at(5_000);
        let mut fired = Vec::new();
        while let Some(id) = wheel.pop_expired(now) {
            fired.push(id);
            // A periodic timer: immediately re-armed for later.
            wheel.schedule(id, now + Duration::from_micros(1));
        }
        fired.sort_unstable();
        assert_eq!(fired, (0..100).collect::<Vec<_>>());
        assert_eq!(wheel.len(), 100);
        // Re-armed for 5001, rounded up to 5056.
        assert_eq!(drain(&mut wheel, at(rounded(5_001) - 1)), Vec::<u32>::new());
        assert_eq!(drain(&mut wheel, at(rounded(5_001))).len(), 100);
    }

    #[test]
    fn far_deadlines_are_clamped_and_recascaded() {
        let start = 987_654_321;
        let mut wheel = TimerWheel::new(at(start));
        let span = SPAN_TICKS * TICK;
        let deadlines = [span - 1, span, span + 1, 3 * span + 12_345, 40 * span + 7];
        for (id, &d) in deadlines.iter().enumerate() {
            wheel.schedule(id as u32, at(start + d));
        }
        let fired = run_until(&mut wheel, at(u64::MAX / 2));
        assert_eq!(fired.len(), deadlines.len());
        for (id, when) in fired {
            let deadline = start + deadlines[id as usize];
            assert!(when.total_micros() >= deadline, "id {id} early");
            assert!(when.total_micros() < deadline + TICK, "id {id} late");
        }
    }

    #[test]
    fn far_deadline_waits_for_the_farthest_turn() {
        // Top-level digit 10; a deadline many revolutions out whose own digit
        // (15) is just ahead. It must not be cascaded at that digit's turn
        // this revolution, only at the last turn the wheel can express: the
        // slot `elapsed` is in, one revolution on.
        let top_slot = SPAN_TICKS / SLOTS as u64;
        let start = 10 * top_slot * TICK;
        let mut wheel = TimerWheel::new(at(start));
        wheel.schedule(1, at(start + 100 * SPAN_TICKS * TICK + 5 * top_slot * TICK));
        assert_eq!(wheel.next_wakeup(), Some(at(start + SPAN_TICKS * TICK)));
    }

    #[test]
    fn far_deadline_from_the_last_tick_of_a_revolution() {
        // `elapsed` on the top level's last digit: no slot lies ahead in this
        // revolution, so a far entry must wrap to the next.
        let start = (SPAN_TICKS - 1) * TICK;
        let mut wheel = TimerWheel::new(at(start));
        wheel.schedule(1, at(start + 5 * SPAN_TICKS * TICK));
        wheel.schedule(2, at(start + SPAN_TICKS * TICK / 2));
        wheel.schedule(3, at(start + 1));
        let wakeup = wheel.next_wakeup().unwrap();
        assert!(wakeup > at(start) && wakeup <= at(rounded(start + 1)));
        let fired = run_until(&mut wheel, at(u64::MAX / 2));
        let ids: Vec<u32> = fired.iter().map(|&(id, _)| id).collect();
        assert_eq!(ids, vec![3, 2, 1]);
        assert_eq!(fired[2].1, at(rounded(start + 5 * SPAN_TICKS * TICK)));
    }

    #[test]
    fn deadline_at_the_end_of_time_never_fires() {
        let mut wheel = TimerWheel::new(at(0));
        wheel.schedule(0, Instant::from_micros(u64::MAX));
        assert!(wheel.next_wakeup().is_some());
        assert_eq!(wheel.pop_expired(Instant::from_micros(u64::MAX - 1)), None);
        assert_eq!(wheel.pop_expired(Instant::from_micros(u64::MAX)), None);
        assert_eq!(wheel.deadline(0), Some(Instant::from_micros(u64::MAX)));
    }

    #[test]
    fn next_wakeup_bounds_every_firing_time() {
        let mut wheel = TimerWheel::new(at(0));
        let mut x = 0x2545_f491_4f6c_dd1du64;
        let mut deadlines = BTreeMap::new();
        for id in 0..2_000u32 {
            // xorshift: a spread of magnitudes from microseconds to days.
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let deadline = x % (1 << (x % 38 + 1));
            wheel.schedule(id, at(deadline));
            deadlines.insert(id, deadline);
        }
        let mut wakeups = 0;
        while let Some(wakeup) = wheel.next_wakeup() {
            let earliest = deadlines.values().map(|&d| rounded(d)).min().unwrap();
            assert!(wakeup.total_micros() <= earliest);
            for id in drain(&mut wheel, wakeup) {
                let deadline = deadlines.remove(&id).unwrap();
                assert!(deadline <= wakeup.total_micros());
                assert!(wakeup.total_micros() < deadline + TICK);
            }
            wakeups += 1;
            assert!(wakeups <= LEVELS * 2_000, "livelock");
        }
        assert!(deadlines.is_empty());
    }

    #[test]
    fn many_ids() {
        const N: u32 = 200_000;
        let mut wheel = TimerWheel::new(at(0));
        for id in 0..N {
            // Spread over ~10 s with collisions in every slot.
            wheel.schedule(id, at(u64::from(id.wrapping_mul(2_654_435_761) % 10_000_000)));
        }
        assert_eq!(wheel.len(), N as usize);
        for id in (0..N).step_by(2) {
            assert!(wheel.cancel(id));
        }
        let mut seen = vec![false; N as usize];
        let mut now = 0;
        while now <= 10_000_000 {
            now += 1_000;
            for id in drain(&mut wheel, at(now)) {
                let deadline = u64::from(id.wrapping_mul(2_654_435_761) % 10_000_000);
                assert!(deadline <= now && !seen[id as usize] && id % 2 == 1);
                seen[id as usize] = true;
            }
        }
        assert!(wheel.is_empty());
        assert_eq!(seen.iter().filter(|&&s| s).count(), N as usize / 2);
    }

    #[test]
    fn steady_state_does_not_grow() {
        let mut wheel = TimerWheel::new(at(0));
        wheel.schedule(999, at(1));
        let capacity = wheel.nodes.capacity();
        for round in 0..10_000u64 {
            wheel.schedule((round % 1_000) as u32, at(round * 100 + 5_000));
            let _ = wheel.pop_expired(at(round * 100));
        }
        assert_eq!(wheel.nodes.capacity(), capacity);
    }

    /// Operations for the model test. Times are offsets from the wheel's
    /// current time, drawn across every level and beyond the span.
    #[derive(Clone, Debug)]
    enum Op {
        Schedule {
            id: u32,
            offset: i64,
        },
        Cancel {
            id: u32,
        },
        /// Advance and pop everything; `rearm` re-schedules each popped id
        /// that far after `now` from inside the loop.
        Drain {
            advance: u64,
            rearm: Option<u64>,
        },
        /// Advance and pop at most `max` ids (at least one call, so the
        /// wheel's clock follows the model's).
        PopSome {
            advance: u64,
            max: usize,
        },
    }

    fn magnitude() -> impl Strategy<Value = u64> {
        prop_oneof![
            4 => 0u64..300,
            3 => 0u64..100_000,
            2 => 0u64..50_000_000,
            1 => 0u64..(1 << 41),
            1 => 0u64..(1 << 45),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        const IDS: u32 = 24;
        prop_oneof![
            5 => (0..IDS, magnitude(), any::<bool>())
                .prop_map(|(id, m, past)| Op::Schedule { id, offset: if past { -((m % 1_000) as i64) } else { m as i64 } }),
            1 => (0..IDS).prop_map(|id| Op::Cancel { id }),
            3 => (magnitude(), proptest::option::weighted(0.2, 1u64..5_000))
                .prop_map(|(advance, rearm)| Op::Drain { advance, rearm }),
            1 => (magnitude(), 1usize..4).prop_map(|(advance, max)| Op::PopSome { advance, max }),
        ]
    }

    /// What the wheel should hold: per id, its deadline and whether it was
    /// already due when scheduled (in the past).
    #[derive(Default)]
    struct Model {
        timers: BTreeMap<u32, (u64, bool)>,
    }

    impl Model {
        fn due(&self, now: u64) -> BTreeSet<u32> {
            self.timers
                .iter()
                .filter(|&(_, &(deadline, past))| past || rounded(deadline) <= now)
                .map(|(&id, _)| id)
                .collect()
        }

        /// The earliest time any id fires, given the wheel's clock.
        fn earliest_firing(&self, now: u64) -> Option<u64> {
            self.timers.values().map(|&(deadline, past)| if past { now } else { rounded(deadline).max(now) }).min()
        }
    }

    fn check_against_model(start: u64, ops: Vec<Op>) -> Result<(), TestCaseError> {
        let mut wheel = TimerWheel::new(at(start));
        let mut model = Model::default();
        let mut now = start;
        for op in ops {
            match op {
                Op::Schedule { id, offset } => {
                    let deadline = now.saturating_add_signed(offset);
                    wheel.schedule(id, at(deadline));
                    model.timers.insert(id, (deadline, deadline <= now));
                }
                Op::Cancel { id } => {
                    prop_assert_eq!(wheel.cancel(id), model.timers.remove(&id).is_some());
                }
                Op::Drain { advance, rearm } => {
                    now += advance;
                    let expected = model.due(now);
                    let mut fired = BTreeSet::new();
                    while let Some(id) = wheel.pop_expired(at(now)) {
                        prop_assert!(fired.insert(id), "id {} popped twice in one advance", id);
                        prop_assert!(model.timers.remove(&id).is_some());
                        if let Some(later) = rearm {
                            wheel.schedule(id, at(now + later));
                            model.timers.insert(id, (now + later, false));
                        }
                    }
                    prop_assert_eq!(&fired, &expected, "at {}", now);
                    // Progress: once drained, the next wakeup is in the future.
                    if let Some(wakeup) = wheel.next_wakeup() {
                        prop_assert!(wakeup > at(now));
                    }
                }
                Op::PopSome { advance, max } => {
                    now += advance;
                    let due = model.due(now);
                    for _ in 0..max {
                        let Some(id) = wheel.pop_expired(at(now)) else {
                            prop_assert!(model.due(now).is_empty());
                            break;
                        };
                        prop_assert!(due.contains(&id), "{} popped before its deadline", id);
                        model.timers.remove(&id);
                    }
                }
            }
            prop_assert_eq!(wheel.len(), model.timers.len());
            for (&id, &(deadline, _)) in &model.timers {
                prop_assert_eq!(wheel.deadline(id), Some(at(deadline)));
            }
            match (wheel.next_wakeup(), model.earliest_firing(now)) {
                (None, None) => {}
                (Some(wakeup), Some(earliest)) => prop_assert!(wakeup.total_micros() <= earliest),
                (wakeup, earliest) => {
                    prop_assert!(false, "wakeup {:?} vs model {:?}", wakeup, earliest)
                }
            }
        }
        // Everything left fires, each at its rounded deadline (or at once if
        // it was scheduled in the past), as a driver following next_wakeup
        // would see.
        let fired = run_until(&mut wheel, at(u64::MAX / 2));
        for (id, when) in fired {
            let Some((deadline, past)) = model.timers.remove(&id) else {
                return Err(TestCaseError::fail(format!("{id} fired but was not scheduled")));
            };
            if past {
                prop_assert_eq!(when, at(now));
            } else {
                prop_assert_eq!(when, at(rounded(deadline).max(now)), "id {}", id);
            }
        }
        prop_assert!(model.timers.is_empty());
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(512))]

        #[test]
        fn matches_model(
            start in prop_oneof![0u64..1_000, 0u64..(1 << 44), Just((SPAN_TICKS - 1) * TICK + 17)],
            ops in proptest::collection::vec(op(), 1..200),
        ) {
            check_against_model(start, ops)?;
        }
    }
}
