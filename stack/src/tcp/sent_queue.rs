//! The sender's record of what is in flight: one record per transmitted
//! segment, in sequence order, with its last transmission time and whether it
//! was SACKed, judged lost or retransmitted. It is the SACK scoreboard of
//! RFC 6675 and the per-segment state RACK-TLP (RFC 8985) needs.
//!
//! The bytes themselves stay in the connection's send ring; this only tracks
//! sequence ranges. Storage is attached on first use and detached when the
//! queue empties, like a [`crate::ring::Ring`], so idle connections hold none.
//!
//! # How it stays cheap
//!
//! The records cover `[SND.UNA, SND.MAX)` without gaps, so a sequence number
//! is found by binary search on its offset from the front. Whatever refers to
//! a record from outside is a position in the deque (shifted when records
//! leave the front); links stored inside records are offsets from the record
//! itself, which records leaving the front do not change. The per-ACK work
//! never scans the queue:
//!
//! - pipe, SACKed and lost bytes are counters (pipe is what remains of the
//!   span once SACKed and lost bytes are taken out);
//! - the records in flight (neither SACKed nor lost) form a doubly linked
//!   list in RACK's "sent after" order (transmission time, then end
//!   sequence), so RACK stops at the first record sent after the one most
//!   recently delivered, as Linux's `tsorted_sent_queue` does;
//! - a SACKed record's forward link skips over the SACKed records after it,
//!   so a duplicate SACK block costs a binary search and a hop or two;
//! - IsLost (RFC 6675 §4) only ever marks a prefix of the queue, so a
//!   boundary moves forward over the records it has judged;
//! - the first lost record is kept as a hint that moves forward as lost
//!   records are retransmitted.

use core::fmt;
use std::collections::VecDeque;

use crate::tcp::seq::SeqNumber;
use crate::time::{Duration, Instant};

/// The default, and largest, number of records a queue keeps
/// ([`SentQueue::with_max_records`]).
///
/// Links between records are 16-bit offsets, which bounds it. 2^15 records of
/// a full-sized segment each are over 40 MB in flight, beyond any send buffer
/// the stack uses: in practice only a peer forcing tiny segments reaches it,
/// and then memory stays at 24 bytes a record.
pub const MAX_RECORDS: usize = 1 << 15;

/// The record was selectively acknowledged.
const SACKED: u8 = 1 << 0;
/// The record is judged lost and has not been retransmitted since.
const LOST: u8 = 1 << 1;
/// The record was retransmitted at least once.
const RETRANSMITTED: u8 = 1 << 2;

/// "No record", for the ends of the transmission-time list.
const NIL: u16 = u16::MAX;

/// One transmitted segment.
#[derive(Clone, Copy)]
pub struct Sent {
    /// First sequence number.
    pub start: SeqNumber,
    /// One past the last sequence number.
    pub end: SeqNumber,
    /// When it was last (re)transmitted.
    pub sent_at: Instant,
    flags: u8,
    /// Links to other records, as offsets from this one (0: none). While the
    /// record is in flight they are its neighbours in the transmission-time
    /// list. Once it is SACKed, `next` is a skip pointer instead: every record
    /// strictly between this one and its target is SACKed as well, and the
    /// target is not beyond the last record (or, for the last record itself,
    /// one past it). A lost record uses neither.
    prev: i16,
    next: i16,
}

impl Sent {
    const fn new(start: SeqNumber, end: SeqNumber, sent_at: Instant) -> Sent {
        Sent { start, end, sent_at, flags: 0, prev: 0, next: 0 }
    }

    /// Bytes covered (never zero).
    #[must_use]
    #[inline]
    pub const fn bytes(&self) -> u32 {
        self.end.since(self.start)
    }

    /// Selectively acknowledged.
    #[must_use]
    #[inline]
    pub const fn is_sacked(&self) -> bool {
        self.flags & SACKED != 0
    }

    /// Judged lost and not retransmitted since.
    #[must_use]
    #[inline]
    pub const fn is_lost(&self) -> bool {
        self.flags & LOST != 0
    }

    /// Retransmitted at least once.
    #[must_use]
    #[inline]
    pub const fn is_retransmitted(&self) -> bool {
        self.flags & RETRANSMITTED != 0
    }

    /// Neither SACKed nor lost: counted in pipe, linked in the time list.
    #[inline]
    const fn in_flight(&self) -> bool {
        self.flags & (SACKED | LOST) == 0
    }

    /// RFC 8985 §6.2 RACK_sent_after: sent later, or at the same time and
    /// ending later.
    #[inline]
    fn sent_after(&self, other: &Sent) -> bool {
        sent_after(self.sent_at, self.end, other.sent_at, other.end)
    }

    /// Where the skip pointer of a SACKED record leads.
    #[inline]
    fn skip_target(&self, at: usize) -> usize {
        // A SACKed record's `next` is always positive; 1 is the safe reading
        // of anything else.
        at + self.next.max(1).unsigned_abs() as usize
    }
}

/// RFC 8985 §6.2 RACK_sent_after(t1, seq1, t2, seq2).
#[inline]
fn sent_after(t1: Instant, end1: SeqNumber, t2: Instant, end2: SeqNumber) -> bool {
    t1 > t2 || (t1 == t2 && end1.gt(end2))
}

/// The position `offset` records from `at`, if the link is set.
#[inline]
fn linked(at: usize, offset: i16) -> Option<usize> {
    (offset != 0).then(|| at.wrapping_add_signed(isize::from(offset)))
}

/// The link from `at` to `to`.
#[inline]
fn offset(at: usize, to: Option<usize>) -> i16 {
    // Positions are below MAX_RECORDS = 2^15, so the difference fits.
    to.map_or(0, |to| (to as isize - at as isize) as i16)
}

/// A position as stored in the scoreboard; positions never exceed
/// MAX_RECORDS.
#[inline]
fn short(at: usize) -> u16 {
    debug_assert!(at <= MAX_RECORDS);
    at as u16
}

impl PartialEq for Sent {
    /// Compares what a record says; the links are bookkeeping.
    fn eq(&self, other: &Sent) -> bool {
        (self.start, self.end, self.sent_at, self.flags) == (other.start, other.end, other.sent_at, other.flags)
    }
}

impl Eq for Sent {}

impl fmt::Debug for Sent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Sent")
            .field("start", &self.start)
            .field("end", &self.end)
            .field("sent_at", &self.sent_at)
            .field("sacked", &self.is_sacked())
            .field("lost", &self.is_lost())
            .field("retransmitted", &self.is_retransmitted())
            .finish()
    }
}

/// What an ACK newly delivered (cumulatively or selectively).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Delivered {
    /// Bytes newly delivered.
    pub bytes: u32,
    /// Of the newly delivered records, the one sent most recently (ties
    /// broken by the higher end sequence): `(sent_at, end, was_retransmitted)`.
    /// RACK takes its RACK.xmit_ts, RACK.end_seq and RTT from it.
    pub newest: Option<(Instant, SeqNumber, bool)>,
}

impl Delivered {
    /// Counts `[.., end)` sent at `sent_at` as newly delivered.
    fn add(&mut self, bytes: u32, sent_at: Instant, end: SeqNumber, retransmitted: bool) {
        self.bytes = self.bytes.saturating_add(bytes);
        if self.newest.is_none_or(|(t, e, _)| sent_after(sent_at, end, t, e)) {
            self.newest = Some((sent_at, end, retransmitted));
        }
    }
}

/// Counters and hints over the records; positions index the deque.
#[derive(Clone, Copy, Debug)]
struct Scoreboard {
    sacked_bytes: u32,
    lost_bytes: u32,
    /// SACKed bytes in records below `sack_hint`.
    sacked_bytes_below_hint: u32,
    /// The highest end of a SACKed record other than the last one; holds
    /// while there is such a record (the last one's end is read directly).
    highest_sacked_below_last: SeqNumber,
    /// SACKed records.
    sacked_count: u16,
    /// SACKed records below `sack_hint`.
    sacked_count_below_hint: u16,
    /// RFC 6675 IsLost boundary: every record below it is SACKed, lost or
    /// retransmitted, and none of them can become a candidate again.
    sack_hint: u16,
    /// No record below it is lost; while any is, between calls, the record
    /// it names is.
    lost_hint: u16,
    /// The transmission-time list of records in flight (NIL: empty).
    time_head: u16,
    time_tail: u16,
    max_records: u16,
}

impl Scoreboard {
    const fn new(max_records: u16) -> Scoreboard {
        Scoreboard {
            sacked_bytes: 0,
            lost_bytes: 0,
            sacked_bytes_below_hint: 0,
            highest_sacked_below_last: SeqNumber::new(0),
            sacked_count: 0,
            sacked_count_below_hint: 0,
            sack_hint: 0,
            lost_hint: 0,
            time_head: NIL,
            time_tail: NIL,
            max_records,
        }
    }

    /// Back to an empty queue's state.
    fn reset(&mut self) {
        *self = Scoreboard::new(self.max_records);
    }

    fn head(&self) -> Option<usize> {
        (self.time_head != NIL).then_some(usize::from(self.time_head))
    }

    fn tail(&self) -> Option<usize> {
        (self.time_tail != NIL).then_some(usize::from(self.time_tail))
    }

    fn set_head(&mut self, at: Option<usize>) {
        self.time_head = at.map_or(NIL, short);
    }

    fn set_tail(&mut self, at: Option<usize>) {
        self.time_tail = at.map_or(NIL, short);
    }

    /// Takes the record at `at` out of the transmission-time list.
    fn unlink(&mut self, q: &mut VecDeque<Sent>, at: usize) {
        let (prev, next) = (linked(at, q[at].prev), linked(at, q[at].next));
        match prev {
            Some(p) => q[p].next = offset(p, next),
            None => self.set_head(next),
        }
        match next {
            Some(n) => q[n].prev = offset(n, prev),
            None => self.set_tail(prev),
        }
        q[at].prev = 0;
        q[at].next = 0;
    }

    /// Puts the record at `at` into the transmission-time list, in
    /// RACK_sent_after order. It has just been (re)transmitted, so it
    /// normally goes last; it walks back only past records sent in the same
    /// microsecond with higher ends (or if time ran backwards).
    fn link(&mut self, q: &mut VecDeque<Sent>, at: usize) {
        let mut before = self.tail();
        while let Some(b) = before
            && q[b].sent_after(&q[at])
        {
            tick();
            before = linked(b, q[b].prev);
        }
        let after = match before {
            Some(b) => linked(b, q[b].next),
            None => self.head(),
        };
        q[at].prev = offset(at, before);
        q[at].next = offset(at, after);
        match before {
            Some(b) => q[b].next = offset(b, Some(at)),
            None => self.set_head(Some(at)),
        }
        match after {
            Some(a) => q[a].prev = offset(a, Some(at)),
            None => self.set_tail(Some(at)),
        }
    }

    /// Marks the in-flight record at `at` lost.
    fn mark_lost(&mut self, q: &mut VecDeque<Sent>, at: usize) {
        debug_assert!(q[at].in_flight());
        self.unlink(q, at);
        q[at].flags |= LOST;
        self.note_lost(at, q[at].bytes());
    }

    /// Counts `bytes` newly lost at `at`, keeping the hint at the lowest.
    fn note_lost(&mut self, at: usize, bytes: u32) {
        let at = short(at);
        self.lost_hint = if self.lost_bytes == 0 { at } else { self.lost_hint.min(at) };
        self.lost_bytes += bytes;
    }

    /// Moves the lost hint forward to the first lost record, past records
    /// retransmitted, SACKed or acknowledged since it was set.
    fn settle_lost_hint(&mut self, q: &VecDeque<Sent>) {
        if self.lost_bytes == 0 {
            return;
        }
        let mut at = usize::from(self.lost_hint);
        while at < q.len() && !q[at].is_lost() {
            tick();
            at += 1;
        }
        debug_assert!(at < q.len(), "lost bytes without a lost record");
        self.lost_hint = short(at);
    }

    /// SACKed records other than the last one.
    fn sacked_below_last(&self, q: &VecDeque<Sent>) -> u16 {
        self.sacked_count - u16::from(q.back().is_some_and(Sent::is_sacked))
    }

    /// Marks the record at `at`, not SACKed yet, SACKed.
    fn mark_sacked(&mut self, q: &mut VecDeque<Sent>, at: usize) {
        let r = q[at];
        debug_assert!(!r.is_sacked());
        if r.is_lost() {
            self.lost_bytes -= r.bytes();
        } else {
            self.unlink(q, at);
        }
        if at + 1 < q.len() && (self.sacked_below_last(q) == 0 || r.end.gt(self.highest_sacked_below_last)) {
            self.highest_sacked_below_last = r.end;
        }
        q[at].flags = (r.flags & !LOST) | SACKED;
        q[at].prev = 0;
        q[at].next = 1;
        self.sacked_bytes += r.bytes();
        self.sacked_count += 1;
        if at < usize::from(self.sack_hint) {
            self.sacked_bytes_below_hint += r.bytes();
            self.sacked_count_below_hint += 1;
        }
    }

    /// The first record at or after `at` that is not SACKed (`q.len()` if
    /// none), following skip pointers and pointing every SACKed record on
    /// the way straight at the answer (path compression).
    fn find_unsacked(&mut self, q: &mut VecDeque<Sent>, at: usize) -> usize {
        let len = q.len();
        let mut found = at;
        while found < len && q[found].is_sacked() {
            tick();
            found = q[found].skip_target(found);
        }
        // Never point past the last record: if it is later un-SACKed (the
        // record cap), a pointer over it would hide it.
        self.point_skips(q, at, found.min(len.saturating_sub(1)));
        found
    }

    /// Points the SACKed records on the skip path from `from` at `target`,
    /// which every record between them and it is SACKed up to.
    fn point_skips(&mut self, q: &mut VecDeque<Sent>, from: usize, target: usize) {
        let mut at = from;
        while at < target && q[at].is_sacked() {
            tick();
            let next = q[at].skip_target(at);
            q[at].next = offset(at, Some(target));
            at = next;
        }
    }

    /// Drops the record at the front, already unlinked and accounted for.
    fn pop_front(&mut self, q: &mut VecDeque<Sent>) {
        q.pop_front();
        for end in [&mut self.time_head, &mut self.time_tail] {
            if *end != NIL {
                *end -= 1;
            }
        }
        self.sack_hint = self.sack_hint.saturating_sub(1);
        self.lost_hint = self.lost_hint.saturating_sub(1);
    }

    /// The record cap is reached: `[last.end, end)` joins the last record,
    /// which takes `now` as its transmission time. Coarser but safe: a
    /// SACKed last record is treated as reneged (RFC 2018 §8 lets a receiver
    /// renege, so a sender must cope with it anyway), a lost one stays lost
    /// and the new bytes go with its retransmission.
    fn extend_last(&mut self, q: &mut VecDeque<Sent>, end: SeqNumber, now: Instant) {
        let at = q.len() - 1;
        let r = q[at];
        if r.is_sacked() {
            self.sacked_bytes -= r.bytes();
            self.sacked_count -= 1;
            if at < usize::from(self.sack_hint) {
                // The record can be judged by IsLost again: back up to it.
                self.sacked_bytes_below_hint -= r.bytes();
                self.sacked_count_below_hint -= 1;
                self.sack_hint = short(at);
            }
            q[at].flags &= !SACKED;
        } else if r.is_lost() {
            self.lost_bytes += end.since(r.end);
        } else {
            self.unlink(q, at);
        }
        q[at].end = end;
        q[at].sent_at = now;
        if q[at].in_flight() {
            self.link(q, at);
        }
    }
}

/// Counts steps of the loops whose cost the tests bound.
#[inline(always)]
fn tick() {
    #[cfg(test)]
    tests::STEPS.with(|steps| steps.set(steps.get() + 1));
}

/// The in-flight records of one connection.
///
/// 64 bytes inline (the deque's header and the scoreboard); each record
/// takes 24 bytes of the attached storage.
#[derive(Debug)]
pub struct SentQueue {
    records: Option<VecDeque<Sent>>,
    board: Scoreboard,
}

impl Default for SentQueue {
    fn default() -> SentQueue {
        SentQueue::new()
    }
}

impl SentQueue {
    /// A queue without storage.
    #[must_use]
    pub const fn new() -> SentQueue {
        SentQueue::with_max_records(MAX_RECORDS)
    }

    /// A queue without storage that keeps at most `max_records` records
    /// (clamped to `1..=MAX_RECORDS`). Beyond that a transmission extends
    /// the last record instead of adding one, which bounds the memory a peer
    /// can make us spend by forcing tiny segments; detection then works on
    /// coarser records.
    #[must_use]
    pub const fn with_max_records(max_records: usize) -> SentQueue {
        let max = if max_records == 0 {
            1
        } else if max_records > MAX_RECORDS {
            MAX_RECORDS
        } else {
            max_records
        };
        SentQueue { records: None, board: Scoreboard::new(max as u16) }
    }

    /// The most records kept.
    #[must_use]
    pub const fn max_records(&self) -> usize {
        self.board.max_records as usize
    }

    /// Whether storage is attached.
    #[must_use]
    pub fn is_allocated(&self) -> bool {
        self.records.is_some()
    }

    /// Attaches (empty, possibly recycled) storage; the queue must have none.
    ///
    /// Records left in `storage` are discarded.
    ///
    /// # Panics
    ///
    /// When storage is already attached (its records would be lost).
    pub fn attach(&mut self, mut storage: VecDeque<Sent>) {
        assert!(self.records.is_none(), "sent queue already has storage");
        debug_assert!(storage.is_empty(), "attached storage holds records");
        storage.clear();
        self.board.reset();
        self.records = Some(storage);
    }

    /// Takes the storage away (cleared), leaving an empty queue without storage.
    ///
    /// The storage keeps its capacity, so a pool that hands it out again
    /// makes steady state allocation-free.
    pub fn detach(&mut self) -> Option<VecDeque<Sent>> {
        self.board.reset();
        let mut storage = self.records.take()?;
        storage.clear();
        Some(storage)
    }

    /// Records held.
    #[must_use]
    pub fn len(&self) -> usize {
        self.records.as_ref().map_or(0, VecDeque::len)
    }

    /// No records.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The records, in sequence order (for tests and diagnostics).
    pub fn iter(&self) -> impl DoubleEndedIterator<Item = &Sent> {
        self.records.iter().flatten()
    }

    /// A first transmission of `[start, end)` at `now`. `start` is the end of
    /// the last record (or the queue is empty).
    ///
    /// Call it only with storage attached (in release builds, storage is
    /// allocated if it is not). An empty range is ignored. Should `start`
    /// not be the end of the last record, the record starts there anyway, so
    /// the queue never has gaps or overlaps.
    ///
    /// O(1), amortized over the deque's growth.
    pub fn on_transmit(&mut self, start: SeqNumber, end: SeqNumber, now: Instant) {
        debug_assert!(self.records.is_some(), "on_transmit without storage");
        let q = self.records.get_or_insert_with(VecDeque::new);
        let b = &mut self.board;
        let start = match q.back() {
            Some(last) => {
                debug_assert_eq!(start, last.end, "transmission does not continue the sent queue");
                last.end
            }
            None => start,
        };
        if !end.gt(start) {
            return;
        }
        if let Some(first) = q.front() {
            debug_assert!(end.gt(first.start), "2^31 bytes or more in flight");
        }
        if q.len() >= usize::from(b.max_records) {
            b.extend_last(q, end, now);
            return;
        }
        if let Some(last) = q.back()
            && last.is_sacked()
        {
            // The last record stops being last: it now bounds the others.
            b.highest_sacked_below_last = last.end;
        }
        q.push_back(Sent::new(start, end, now));
        b.link(q, q.len() - 1);
    }

    /// A retransmission, at `now`, of the record starting at `start` (a whole
    /// record, as returned by [`SentQueue::next_lost`] or
    /// [`SentQueue::last`]): it is in flight again and no longer lost.
    ///
    /// It takes `now` as its transmission time and moves to the end of
    /// RACK's time order (RFC 8985 §6.1). A SACKed record stays SACKed. A
    /// `start` that begins no record is ignored.
    ///
    /// O(log n) to find the record.
    pub fn on_retransmit(&mut self, start: SeqNumber, now: Instant) {
        let Some(q) = self.records.as_mut() else { return };
        let Some(first) = q.front().map(|r| r.start) else { return };
        let Ok(offset) = u32::try_from(start.distance(first)) else { return };
        let at = q.partition_point(|r| r.start.since(first) < offset);
        if q.get(at).is_none_or(|r| r.start != start) {
            return;
        }
        let b = &mut self.board;
        let r = q[at];
        if r.in_flight() {
            b.unlink(q, at);
        } else if r.is_lost() {
            b.lost_bytes -= r.bytes();
        }
        q[at].sent_at = now;
        q[at].flags = (r.flags & !LOST) | RETRANSMITTED;
        if !r.is_sacked() {
            b.link(q, at);
        }
        b.settle_lost_hint(q);
    }

    /// A cumulative ACK: drops everything below `ack` (trimming a record it
    /// splits) and reports what was newly delivered.
    ///
    /// Bytes already SACKed are not delivered again. The part of a split
    /// record counts as delivered with `ack` as its end. An `ack` not after
    /// the front acknowledges nothing; one beyond the last record drops all.
    ///
    /// O(records dropped).
    pub fn on_cumulative_ack(&mut self, ack: SeqNumber) -> Delivered {
        let mut delivered = Delivered::default();
        let Some(q) = self.records.as_mut() else { return delivered };
        let b = &mut self.board;
        while let Some(&r) = q.front() {
            tick();
            // Positive and below 2^31 for the first record; for the next
            // ones `ack` has already passed their start, so no wrap either.
            let Ok(acked) = u32::try_from(ack.distance(r.start)) else { break };
            if acked == 0 {
                break;
            }
            let part = acked.min(r.bytes());
            // The front record is below the IsLost boundary unless it is at it.
            let below_hint = b.sack_hint > 0;
            if r.is_sacked() {
                b.sacked_bytes -= part;
                if below_hint {
                    b.sacked_bytes_below_hint -= part;
                }
            } else {
                let end = if part < r.bytes() { ack } else { r.end };
                delivered.add(part, r.sent_at, end, r.is_retransmitted());
                if r.is_lost() {
                    b.lost_bytes -= part;
                }
            }
            if part < r.bytes() {
                q[0].start = ack;
                break;
            }
            if r.is_sacked() {
                b.sacked_count -= 1;
                if below_hint {
                    b.sacked_count_below_hint -= 1;
                }
            } else if !r.is_lost() {
                b.unlink(q, 0);
            }
            b.pop_front(q);
        }
        if q.is_empty() {
            b.reset();
        } else {
            b.settle_lost_hint(q);
        }
        delivered
    }

    /// A SACK block `[start, end)`: marks every record it covers entirely as
    /// SACKed and reports what was newly delivered. Blocks outside the queue
    /// are ignored.
    ///
    /// A record the block covers only in part stays unmarked (conservative:
    /// RFC 6675 counts SACKed segments). A block that is empty or inverted,
    /// or that ends beyond the last record (it claims data never sent), is
    /// ignored as a whole; one that starts before the front counts from the
    /// front. A SACKed record is no longer lost.
    ///
    /// O(log n + records newly marked), amortized: already-SACKed runs are
    /// skipped by pointer, so repeated blocks cost next to nothing.
    pub fn on_sack(&mut self, start: SeqNumber, end: SeqNumber) -> Delivered {
        let mut delivered = Delivered::default();
        let Some(q) = self.records.as_mut() else { return delivered };
        let (Some(first), Some(last)) = (q.front(), q.back()) else { return delivered };
        let (base, top) = (first.start, last.end);
        if !end.gt(start) || !end.gt(base) || end.gt(top) {
            return delivered;
        }
        // Offsets from the front. `end` is inside the queue and `start` less
        // than 2^31 before it, so a negative distance is a start before the front.
        let from = u32::try_from(start.distance(base)).unwrap_or(0);
        let to = end.since(base);
        let b = &mut self.board;
        let mut at = q.partition_point(|r| r.start.since(base) < from);
        at = b.find_unsacked(q, at);
        let first_marked = at;
        while at < q.len() && q[at].end.since(base) <= to {
            tick();
            let r = q[at];
            b.mark_sacked(q, at);
            delivered.add(r.bytes(), r.sent_at, r.end, r.is_retransmitted());
            let next = b.find_unsacked(q, at + 1);
            // Chain the marked records; `point_skips` below shortcuts them.
            q[at].next = offset(at, Some(next.min(q.len() - 1).max(at + 1)));
            at = next;
        }
        if delivered.bytes > 0 {
            b.point_skips(q, first_marked, at.min(q.len() - 1));
            b.settle_lost_hint(q);
        }
        delivered
    }

    /// RFC 6675 IsLost: marks lost every record neither SACKed nor lost with
    /// at least `dupthresh` SACKed records, or more than
    /// `(dupthresh - 1) * mss` SACKed bytes, above it. Returns the bytes
    /// newly marked.
    ///
    /// Records already retransmitted are left alone: IsLost judges them by
    /// the same SACKs that condemned the original, so re-marking them would
    /// retransmit them on every ACK. RFC 6675's NextSeg excludes them through
    /// HighRxt; a lost retransmission is RACK's or the RTO's to detect.
    ///
    /// Amortized O(1) a record over the queue's life: the records judged lost
    /// form a prefix, so a boundary moves forward over them.
    pub fn mark_lost_by_sack(&mut self, dupthresh: u32, mss: u32) -> u32 {
        let Some(q) = self.records.as_mut() else { return 0 };
        let b = &mut self.board;
        let bytes_limit = u64::from(dupthresh.saturating_sub(1)) * u64::from(mss);
        let mut marked = 0;
        while let Some(&r) = q.get(usize::from(b.sack_hint)) {
            tick();
            let at = usize::from(b.sack_hint);
            if r.is_sacked() {
                b.sacked_bytes_below_hint += r.bytes();
                b.sacked_count_below_hint += 1;
            } else if !r.is_lost() && !r.is_retransmitted() {
                let count_above = u32::from(b.sacked_count - b.sacked_count_below_hint);
                let bytes_above = u64::from(b.sacked_bytes - b.sacked_bytes_below_hint);
                if count_above < dupthresh && bytes_above <= bytes_limit {
                    break;
                }
                b.mark_lost(q, at);
                marked += r.bytes();
            }
            b.sack_hint += 1;
        }
        b.settle_lost_hint(q);
        marked
    }

    /// RFC 8985 §6.2 RACK_detect_loss: marks lost every record neither
    /// SACKed nor lost that was sent before the most recently delivered one
    /// (`rack_xmit`, ties by `end <= rack_end`) and whose
    /// `sent_at + rack_rtt + reo_wnd <= now`. Returns the bytes newly marked
    /// and, for candidates not yet old enough, the earliest time one will be.
    ///
    /// The earliest time is the one to arm the RACK reorder timer with.
    /// RFC 8985 §6.2 arms it for the latest pending deadline instead; the
    /// earliest makes the timer fire as soon as the first candidate is old
    /// enough, and the call made then reports the next deadline.
    ///
    /// O(1 + records marked): the records in flight are kept in
    /// RACK_sent_after order, so the candidates are a prefix of it and the
    /// deadlines grow along it.
    pub fn mark_lost_by_rack(
        &mut self,
        now: Instant,
        rack_xmit: Instant,
        rack_end: SeqNumber,
        rack_rtt: Duration,
        reo_wnd: Duration,
    ) -> (u32, Option<Instant>) {
        let Some(q) = self.records.as_mut() else { return (0, None) };
        let b = &mut self.board;
        let mut marked = 0;
        let mut timer = None;
        while let Some(at) = b.head() {
            tick();
            let r = q[at];
            if sent_after(r.sent_at, r.end, rack_xmit, rack_end) {
                break;
            }
            let deadline = r.sent_at + rack_rtt + reo_wnd;
            if deadline > now {
                timer = Some(deadline);
                break;
            }
            b.mark_lost(q, at);
            marked += r.bytes();
        }
        b.settle_lost_hint(q);
        (marked, timer)
    }

    /// The path's MTU shrank (RFC 8201 §5.4, RFC 1191 §6.5; Linux's
    /// `tcp_simple_retransmit`): every record in flight neither SACKed nor
    /// lost that is longer than `max_payload` was dropped on the way, and is
    /// lost. Returns the bytes newly marked.
    ///
    /// O(records in flight).
    pub fn mark_lost_longer_than(&mut self, max_payload: u32) -> u32 {
        let Some(q) = self.records.as_mut() else { return 0 };
        let b = &mut self.board;
        let mut marked = 0;
        let mut next = b.head();
        while let Some(at) = next {
            tick();
            next = linked(at, q[at].next);
            let r = q[at];
            if r.bytes() > max_payload && !r.is_lost() && !r.is_sacked() {
                b.mark_lost(q, at);
                marked += r.bytes();
            }
        }
        b.settle_lost_hint(q);
        marked
    }

    /// After a retransmission timeout (RFC 6675 §5.1): every record not
    /// SACKed is lost. Returns the bytes newly marked.
    ///
    /// O(records in flight).
    pub fn mark_all_lost(&mut self) -> u32 {
        let Some(q) = self.records.as_mut() else { return 0 };
        let b = &mut self.board;
        let mut marked = 0;
        let mut lowest = usize::MAX;
        let mut next = b.head();
        while let Some(at) = next {
            tick();
            next = linked(at, q[at].next);
            q[at].flags |= LOST;
            q[at].prev = 0;
            q[at].next = 0;
            marked += q[at].bytes();
            lowest = lowest.min(at);
        }
        b.set_head(None);
        b.set_tail(None);
        if marked > 0 {
            b.note_lost(lowest, marked);
        }
        marked
    }

    /// The receiver reneged (RFC 2018 §8): it dropped data it had SACKed,
    /// so no SACK mark can be trusted. Every record becomes lost, SACKed
    /// ones included, for retransmission in sequence order. Returns the
    /// bytes newly marked.
    ///
    /// O(records).
    pub fn on_reneging(&mut self) -> u32 {
        let Some(q) = self.records.as_mut() else { return 0 };
        let (Some(first), Some(last)) = (q.front(), q.back()) else { return 0 };
        let span = last.end.since(first.start);
        let b = &mut self.board;
        let newly = span - b.lost_bytes;
        for r in q.iter_mut() {
            tick();
            r.flags = (r.flags & !SACKED) | LOST;
            r.prev = 0;
            r.next = 0;
        }
        // No SACKed record, none in flight: an empty board with every byte lost.
        b.reset();
        b.note_lost(0, span);
        newly
    }

    /// Whether the first record is SACKed: the receiver's cumulative ACK
    /// stops at data it has SACKed, which only a reneging receiver does.
    #[must_use]
    pub fn front_is_sacked(&self) -> bool {
        self.records.as_ref().and_then(VecDeque::front).is_some_and(Sent::is_sacked)
    }

    /// NewReno (no SACK): marks the first record lost. Returns whether it
    /// was newly marked.
    ///
    /// A SACKed or already lost first record is left as it is; one already
    /// retransmitted is marked again (RFC 6582: a partial ACK retransmits the
    /// first unacknowledged segment).
    pub fn mark_first_lost(&mut self) -> bool {
        let Some(q) = self.records.as_mut() else { return false };
        if !q.front().is_some_and(Sent::in_flight) {
            return false;
        }
        self.board.mark_lost(q, 0);
        true
    }

    /// The first record marked lost and not retransmitted since: what to
    /// retransmit next.
    ///
    /// O(1).
    #[must_use]
    pub fn next_lost(&self) -> Option<(SeqNumber, SeqNumber)> {
        if self.board.lost_bytes == 0 {
            return None;
        }
        let r = self.records.as_ref()?.get(usize::from(self.board.lost_hint))?;
        debug_assert!(r.is_lost());
        Some((r.start, r.end))
    }

    /// The last record, for a tail-loss probe.
    #[must_use]
    pub fn last(&self) -> Option<(SeqNumber, SeqNumber)> {
        self.records.as_ref()?.back().map(|r| (r.start, r.end))
    }

    /// RFC 6675 pipe: bytes sent and neither SACKed nor lost (a lost record
    /// counts again once retransmitted).
    #[must_use]
    pub fn pipe(&self) -> u32 {
        let Some(q) = self.records.as_ref() else { return 0 };
        let (Some(first), Some(last)) = (q.front(), q.back()) else { return 0 };
        last.end.since(first.start).saturating_sub(self.board.sacked_bytes).saturating_sub(self.board.lost_bytes)
    }

    /// Bytes SACKed.
    #[must_use]
    pub fn sacked_bytes(&self) -> u32 {
        self.board.sacked_bytes
    }

    /// Bytes marked lost and not yet retransmitted.
    #[must_use]
    pub fn lost_bytes(&self) -> u32 {
        self.board.lost_bytes
    }

    /// The highest SACKed sequence number, if any record is SACKed.
    #[must_use]
    pub fn highest_sacked(&self) -> Option<SeqNumber> {
        if self.board.sacked_count == 0 {
            return None;
        }
        let last = self.records.as_ref()?.back()?;
        Some(if last.is_sacked() { last.end } else { self.board.highest_sacked_below_last })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::cell::Cell;
    use proptest::prelude::*;

    thread_local! {
        /// Loop steps taken by the queue on this thread ([`tick`]).
        pub(super) static STEPS: Cell<u64> = const { Cell::new(0) };
    }

    /// Steps `f` takes.
    fn steps(f: impl FnOnce()) -> u64 {
        let before = STEPS.with(Cell::get);
        f();
        STEPS.with(Cell::get) - before
    }

    fn seq(raw: u32) -> SeqNumber {
        SeqNumber::new(raw)
    }

    fn ms(millis: u64) -> Instant {
        Instant::from_millis(millis)
    }

    /// A queue with storage and segments of `lens` bytes from `start`, the
    /// i-th sent at i+1 ms.
    fn sent(start: u32, lens: &[u32]) -> SentQueue {
        let mut q = SentQueue::new();
        q.attach(VecDeque::new());
        let mut at = seq(start);
        for (i, &len) in lens.iter().enumerate() {
            q.on_transmit(at, at + len, ms(i as u64 + 1));
            at += len;
        }
        check(&q);
        q
    }

    /// `(start, end)` of record `i`.
    fn rec(q: &SentQueue, i: usize) -> (SeqNumber, SeqNumber) {
        let r = q.iter().nth(i).expect("no such record");
        (r.start, r.end)
    }

    fn flags(q: &SentQueue) -> Vec<&'static str> {
        q.iter()
            .map(|r| match (r.is_sacked(), r.is_lost()) {
                (true, _) => "S",
                (_, true) => "L",
                _ => "-",
            })
            .collect()
    }

    /// Checks every internal invariant against a recount.
    #[track_caller]
    fn check(q: &SentQueue) {
        let b = &q.board;
        let Some(d) = q.records.as_ref() else {
            assert_eq!((b.sacked_bytes, b.lost_bytes, b.sacked_count, b.time_head), (0, 0, 0, NIL));
            return;
        };
        assert!(d.len() <= q.max_records());
        let (mut sacked, mut lost, mut count, mut in_flight, mut pipe) = (0, 0, 0, 0, 0);
        for (i, r) in d.iter().enumerate() {
            assert!(r.bytes() > 0, "empty record {i}");
            assert!(!(r.is_sacked() && r.is_lost()), "record {i} SACKed and lost");
            if i > 0 {
                assert_eq!(r.start, d[i - 1].end, "gap before record {i}");
            }
            if r.is_sacked() {
                sacked += r.bytes();
                count += 1;
                let target = r.skip_target(i);
                assert!(target < d.len() || (target == d.len() && i + 1 == d.len()), "skip past the end at {i}");
                assert!(
                    d.range(i + 1..target.min(d.len())).all(Sent::is_sacked),
                    "skip over an unSACKed record at {i}"
                );
            } else if r.is_lost() {
                lost += r.bytes();
            } else {
                in_flight += 1;
                pipe += r.bytes();
            }
        }
        assert_eq!((b.sacked_bytes, b.lost_bytes, u32::from(b.sacked_count)), (sacked, lost, count));
        assert_eq!(q.pipe(), pipe);
        // The time list holds exactly the records in flight, in order.
        let (mut walked, mut prev, mut at) = (0, None, b.head());
        while let Some(i) = at {
            assert!(d[i].in_flight(), "record {i} in the time list");
            assert_eq!(linked(i, d[i].prev), prev, "broken back link at {i}");
            if let Some(p) = prev {
                assert!(d[i].sent_after(&d[p]), "time list out of order at {i}");
            }
            walked += 1;
            prev = Some(i);
            at = linked(i, d[i].next);
        }
        assert_eq!(b.tail(), prev);
        assert_eq!(walked, in_flight);
        // IsLost boundary.
        let hint = usize::from(b.sack_hint);
        assert!(hint <= d.len());
        assert!(d.range(..hint).all(|r| r.is_sacked() || r.is_lost() || r.is_retransmitted()));
        let below: Vec<_> = d.range(..hint).filter(|r| r.is_sacked()).collect();
        assert_eq!(usize::from(b.sacked_count_below_hint), below.len());
        assert_eq!(b.sacked_bytes_below_hint, below.iter().map(|r| r.bytes()).sum::<u32>());
        // Lost hint.
        let first_lost = d.iter().position(Sent::is_lost);
        if lost > 0 {
            assert_eq!(Some(usize::from(b.lost_hint)), first_lost);
        }
        assert_eq!(q.next_lost(), first_lost.map(|i| (d[i].start, d[i].end)));
        assert_eq!(q.highest_sacked(), d.iter().rev().find(|r| r.is_sacked()).map(|r| r.end));
    }

    #[test]
    fn records_and_queue_stay_small() {
        assert_eq!(size_of::<Sent>(), 24);
        assert!(size_of::<SentQueue>() <= 64, "SentQueue is {} bytes", size_of::<SentQueue>());
    }

    #[test]
    fn a_new_queue_is_empty_and_holds_no_storage() {
        const Q: SentQueue = SentQueue::new();
        let mut q = Q;
        assert!(!q.is_allocated());
        assert!(q.is_empty());
        assert_eq!((q.len(), q.pipe(), q.sacked_bytes(), q.lost_bytes()), (0, 0, 0, 0));
        assert_eq!((q.next_lost(), q.last(), q.highest_sacked()), (None, None, None));
        assert_eq!(q.max_records(), MAX_RECORDS);
        assert_eq!(q.detach(), None);
        assert_eq!(SentQueue::default().max_records(), MAX_RECORDS);
    }

    #[test]
    fn a_queue_without_storage_behaves_as_empty() {
        let mut q = SentQueue::new();
        q.on_retransmit(seq(5), ms(1));
        assert_eq!(q.on_cumulative_ack(seq(100)), Delivered::default());
        assert_eq!(q.on_sack(seq(0), seq(100)), Delivered::default());
        assert_eq!(q.mark_lost_by_sack(3, 1000), 0);
        assert_eq!(q.mark_lost_by_rack(ms(9), ms(9), seq(9), Duration::ZERO, Duration::ZERO), (0, None));
        assert_eq!(q.mark_all_lost(), 0);
        assert!(!q.mark_first_lost());
        assert_eq!((q.len(), q.pipe(), q.next_lost(), q.last()), (0, 0, None, None));
        assert_eq!(q.iter().count(), 0);
        check(&q);
    }

    #[test]
    fn transmissions_append_records_and_empty_ranges_are_ignored() {
        let mut q = sent(1000, &[100, 200]);
        q.on_transmit(seq(1300), seq(1300), ms(5));
        assert_eq!(q.len(), 2);
        q.on_transmit(seq(1300), seq(1350), ms(5));
        assert_eq!(q.len(), 3);
        assert_eq!(q.last(), Some((seq(1300), seq(1350))));
        assert_eq!(q.pipe(), 350);
        assert_eq!(q.iter().map(|r| r.sent_at).collect::<Vec<_>>(), [ms(1), ms(2), ms(5)]);
        assert!(q.iter().all(|r| !r.is_sacked() && !r.is_lost() && !r.is_retransmitted()));
        check(&q);
    }

    #[test]
    fn sequence_numbers_wrap() {
        let start = u32::MAX - 1_499;
        let mut q = sent(start, &[1000, 1000, 1000, 1000]);
        assert_eq!(rec(&q, 1), (seq(start + 1000), seq(500)));
        assert_eq!(q.pipe(), 4000);
        // A block across the wrap covering records 1 and 2.
        let d = q.on_sack(seq(start + 1000), seq(1500));
        assert_eq!(d.bytes, 2000);
        assert_eq!(d.newest, Some((ms(3), seq(1500), false)));
        assert_eq!(q.highest_sacked(), Some(seq(1500)));
        assert_eq!(q.mark_lost_by_sack(2, 1000), 1000);
        assert_eq!(q.next_lost(), Some((seq(start), seq(start + 1000))));
        q.on_retransmit(seq(start), ms(10));
        assert_eq!(q.next_lost(), None);
        check(&q);
        // A cumulative ACK across the wrap, splitting the last record.
        let d = q.on_cumulative_ack(seq(2000));
        assert_eq!(d.bytes, 1000 + 500);
        assert_eq!(d.newest, Some((ms(10), seq(start + 1000), true)));
        assert_eq!(rec(&q, 0), (seq(2000), seq(2500)));
        assert_eq!((q.pipe(), q.sacked_bytes(), q.highest_sacked()), (500, 0, None));
        check(&q);
    }

    #[test]
    fn a_cumulative_ack_trims_the_record_it_splits() {
        let mut q = sent(0, &[100, 100, 100]);
        let d = q.on_cumulative_ack(seq(150));
        assert_eq!(d, Delivered { bytes: 150, newest: Some((ms(2), seq(150), false)) });
        assert_eq!(q.len(), 2);
        assert_eq!(rec(&q, 0), (seq(150), seq(200)));
        assert_eq!(q.pipe(), 150);
        check(&q);
        // Trimming a lost record takes the acknowledged part out of lost bytes.
        assert!(q.mark_first_lost());
        assert_eq!(q.on_cumulative_ack(seq(170)).bytes, 20);
        assert_eq!((q.lost_bytes(), q.next_lost()), (30, Some((seq(170), seq(200)))));
        check(&q);
        // Trimming a SACKed record delivers nothing new.
        let _ = q.on_sack(seq(200), seq(300));
        assert_eq!(q.on_cumulative_ack(seq(250)), Delivered { bytes: 30, newest: Some((ms(2), seq(200), false)) });
        assert_eq!((q.sacked_bytes(), q.pipe(), q.len()), (50, 0, 1));
        check(&q);
        assert_eq!(q.on_cumulative_ack(seq(300)), Delivered::default());
        assert!(q.is_empty() && q.is_allocated());
        check(&q);
    }

    #[test]
    fn a_cumulative_ack_reports_unsacked_bytes_and_the_newest_record() {
        let mut q = sent(0, &[100, 100, 100, 100]);
        let _ = q.on_sack(seq(100), seq(200));
        assert!(q.mark_first_lost());
        q.on_retransmit(seq(0), ms(9));
        let d = q.on_cumulative_ack(seq(300));
        // Record 1 was SACKed; record 0, retransmitted at 9 ms, is newest.
        assert_eq!(d, Delivered { bytes: 200, newest: Some((ms(9), seq(100), true)) });
        check(&q);
        // Same transmission time: the higher end wins.
        let mut q = SentQueue::new();
        q.attach(VecDeque::new());
        for i in 0..3 {
            q.on_transmit(seq(i * 10), seq(i * 10 + 10), ms(1));
        }
        assert_eq!(q.on_cumulative_ack(seq(30)).newest, Some((ms(1), seq(30), false)));
    }

    #[test]
    fn acks_not_after_the_front_acknowledge_nothing() {
        let mut q = sent(5000, &[100, 100]);
        for ack in [0, 1000, (1 << 31) - 1, 1 << 31] {
            let ack = seq(5000) - ack;
            assert_eq!(q.on_cumulative_ack(ack), Delivered::default(), "ack {ack}");
        }
        assert_eq!(q.len(), 2);
        // Beyond the last record (say, the ACK of our FIN): everything goes.
        assert_eq!(q.on_cumulative_ack(seq(5201)).bytes, 200);
        assert!(q.is_empty());
        check(&q);
    }

    #[test]
    fn a_sack_block_marks_only_records_it_covers_entirely() {
        let mut q = sent(0, &[100, 100, 100, 100]);
        // [150, 350) covers record 2 only.
        let d = q.on_sack(seq(150), seq(350));
        assert_eq!(d, Delivered { bytes: 100, newest: Some((ms(3), seq(300), false)) });
        assert_eq!(flags(&q), ["-", "-", "S", "-"]);
        // Exact edges count.
        assert_eq!(q.on_sack(seq(100), seq(200)).bytes, 100);
        assert_eq!(flags(&q), ["-", "S", "S", "-"]);
        // A block around SACKed records marks only the new ones.
        let d = q.on_sack(seq(0), seq(400));
        assert_eq!(d, Delivered { bytes: 200, newest: Some((ms(4), seq(400), false)) });
        assert_eq!((q.sacked_bytes(), q.pipe()), (400, 0));
        check(&q);
    }

    #[test]
    fn duplicate_and_garbage_sack_blocks_are_harmless() {
        let base = seq(u32::MAX - 150);
        let mut q = sent(base.get(), &[100, 100, 100]);
        let top = base + 300u32;
        let half = 1u32 << 31;
        let blocks = [
            (top, top + 100u32),                   // past the end
            (top - 50u32, top + 50u32),            // partly past the end
            (base - 500u32, base),                 // before the front
            (base + 200u32, base + 100u32),        // inverted
            (base + 100u32, base + 100u32),        // empty
            (base - half + 10u32, base + 100u32),  // 2^31 and more: inverted in sequence space
            (base + 100u32, base + 100u32 + half), // ditto, the other way
            (top, base),                           // the complement of the queue
            (seq(0), seq(u32::MAX)),
            (seq(u32::MAX), seq(0)),
        ];
        for (start, end) in blocks {
            assert_eq!(q.on_sack(start, end), Delivered::default(), "[{start}, {end})");
            check(&q);
        }
        assert_eq!(flags(&q), ["-", "-", "-"]);
        // A block starting before the front counts from the front.
        assert_eq!(q.on_sack(base - 1000u32, base + 100u32).bytes, 100);
        // Duplicates deliver nothing, in any order.
        assert_eq!(q.on_sack(base - 1000u32, top).bytes, 200);
        for _ in 0..3 {
            assert_eq!(q.on_sack(base, base + 100u32), Delivered::default());
            assert_eq!(q.on_sack(base - 1000u32, top), Delivered::default());
        }
        assert_eq!(q.sacked_bytes(), 300);
        check(&q);
    }

    #[test]
    fn a_smaller_path_mtu_loses_only_the_records_too_long_for_it() {
        let mut q = sent(0, &[1440, 120, 1440, 1000, 1440]);
        let _ = q.on_sack(seq(1560), seq(3000)); // the third got through
        assert_eq!(q.mark_lost_longer_than(1220), 2 * 1440);
        assert_eq!(q.lost_bytes(), 2 * 1440);
        assert_eq!(q.next_lost(), Some((seq(0), seq(1440))));
        assert_eq!((q.sacked_bytes(), q.pipe()), (1440, 120 + 1000));
        check(&q);
        // Again: nothing new.
        assert_eq!(q.mark_lost_longer_than(1220), 0);
        check(&q);
    }

    #[test]
    fn a_sacked_record_is_no_longer_lost() {
        let mut q = sent(0, &[100, 100, 100]);
        assert_eq!(q.mark_all_lost(), 300);
        assert_eq!(q.on_sack(seq(0), seq(100)).bytes, 100);
        assert_eq!((q.lost_bytes(), q.sacked_bytes(), q.pipe()), (200, 100, 0));
        assert_eq!(q.next_lost(), Some((seq(100), seq(200))));
        check(&q);
    }

    #[test]
    fn is_lost_counts_sacked_records_above() {
        let mut q = sent(0, &[100; 6]);
        let _ = q.on_sack(seq(200), seq(300));
        let _ = q.on_sack(seq(400), seq(500));
        // Two SACKed records above 0, 1 and 3: not enough for DupThresh 3.
        assert_eq!(q.mark_lost_by_sack(3, 1000), 0);
        let _ = q.on_sack(seq(500), seq(600));
        // Three above 0 and 1; two above 3.
        assert_eq!(q.mark_lost_by_sack(3, 1000), 200);
        assert_eq!(flags(&q), ["L", "L", "S", "-", "S", "S"]);
        assert_eq!(q.pipe(), 100);
        check(&q);
    }

    #[test]
    fn is_lost_counts_sacked_bytes_above() {
        // (DupThresh - 1) * MSS = 2000: a single SACKed record of 2000 bytes
        // is not more than that, one of 2001 is.
        let mut q = sent(0, &[1000, 2000]);
        let _ = q.on_sack(seq(1000), seq(3000));
        assert_eq!(q.mark_lost_by_sack(3, 1000), 0);
        let mut q = sent(0, &[1000, 2001]);
        let _ = q.on_sack(seq(1000), seq(3001));
        assert_eq!(q.mark_lost_by_sack(3, 1000), 1000);
        check(&q);
    }

    #[test]
    fn is_lost_spares_retransmissions_and_only_moves_forward() {
        let mut q = sent(0, &[100; 8]);
        let _ = q.on_sack(seq(400), seq(700));
        assert_eq!(q.mark_lost_by_sack(3, 100), 400);
        for _ in 0..4 {
            let (start, _) = q.next_lost().unwrap();
            q.on_retransmit(start, ms(20));
        }
        assert_eq!(q.pipe(), 500);
        // Still three SACKed records above the retransmissions: not lost again.
        assert_eq!(q.mark_lost_by_sack(3, 100), 0);
        let _ = q.on_sack(seq(700), seq(800));
        assert_eq!(q.mark_lost_by_sack(3, 100), 0);
        assert_eq!(q.lost_bytes(), 0);
        // RACK may still find a retransmission lost.
        assert_eq!(q.mark_lost_by_rack(ms(40), ms(30), seq(800), Duration::ZERO, Duration::ZERO).0, 400);
        check(&q);
    }

    #[test]
    fn a_retransmission_puts_a_lost_record_back_in_flight() {
        let mut q = sent(0, &[100, 100, 100]);
        assert!(q.mark_first_lost());
        assert_eq!((q.pipe(), q.lost_bytes()), (200, 100));
        q.on_retransmit(seq(0), ms(10));
        assert_eq!((q.pipe(), q.lost_bytes(), q.next_lost()), (300, 0, None));
        let r = q.iter().next().unwrap();
        assert!(r.is_retransmitted() && !r.is_lost() && r.sent_at == ms(10));
        check(&q);
        // Unknown starts are ignored.
        for start in [50, 300, 1 << 31, u32::MAX] {
            q.on_retransmit(seq(start), ms(11));
        }
        assert!(q.iter().skip(1).all(|r| !r.is_retransmitted()));
        // A tail-loss probe retransmits the last record while in flight.
        q.on_retransmit(seq(200), ms(12));
        assert_eq!(q.pipe(), 300);
        let order: Vec<_> = {
            let d = q.records.as_ref().unwrap();
            let mut at = q.board.head();
            core::iter::from_fn(|| {
                let i = at?;
                at = linked(i, d[i].next);
                Some(d[i].start.get())
            })
            .collect()
        };
        assert_eq!(order, [100, 0, 200]);
        check(&q);
    }

    #[test]
    fn reneging_forgets_every_sack_and_resends_from_the_front() {
        let mut q = sent(0, &[100, 100, 100, 100]);
        assert!(!q.front_is_sacked());
        q.on_sack(seq(0), seq(100));
        q.on_sack(seq(200), seq(300));
        assert!(q.front_is_sacked());
        assert_eq!(q.mark_lost_by_sack(1, 100), 100);
        assert_eq!(flags(&q), ["S", "L", "S", "-"]);
        // 300 bytes were SACKed or in flight; the lost one stays lost.
        assert_eq!(q.on_reneging(), 300);
        assert_eq!(flags(&q), ["L", "L", "L", "L"]);
        assert_eq!((q.pipe(), q.sacked_bytes(), q.lost_bytes(), q.highest_sacked()), (0, 0, 400, None));
        assert_eq!(q.next_lost(), Some((seq(0), seq(100))));
        check(&q);
        // Retransmission goes in sequence order, and SACKs count again.
        q.on_retransmit(seq(0), ms(5));
        assert_eq!(q.next_lost(), Some((seq(100), seq(200))));
        q.on_sack(seq(200), seq(300));
        assert_eq!(flags(&q), ["-", "L", "S", "L"]);
        check(&q);
        assert_eq!(SentQueue::new().on_reneging(), 0);
    }

    #[test]
    fn rack_follows_transmission_order_not_sequence_order() {
        let mut q = sent(0, &[100; 5]); // sent at 1..=5 ms
        assert!(q.mark_first_lost());
        q.on_retransmit(seq(0), ms(6));
        // Record 4 (sent at 5 ms) is delivered: 1, 2 and 3 were sent before
        // it, the retransmission of 0 after.
        let d = q.on_sack(seq(400), seq(500));
        let (xmit, end, _) = d.newest.unwrap();
        let rtt = Duration::from_millis(3);
        assert_eq!(q.mark_lost_by_rack(ms(6), xmit, end, rtt, Duration::ZERO), (200, Some(ms(7))));
        assert_eq!(flags(&q), ["-", "L", "L", "-", "S"]);
        assert_eq!(q.mark_lost_by_rack(ms(7), xmit, end, rtt, Duration::ZERO), (100, None));
        // Now the retransmission is delivered by a SACK: nothing before it is left.
        let d = q.on_sack(seq(0), seq(100));
        assert_eq!(d.newest, Some((ms(6), seq(100), true)));
        assert_eq!(q.mark_lost_by_rack(ms(20), ms(6), seq(100), rtt, Duration::ZERO), (0, None));
        check(&q);
    }

    #[test]
    fn rack_reports_the_earliest_pending_deadline() {
        let mut q = sent(0, &[100; 4]); // sent at 1..=4 ms
        let _ = q.on_sack(seq(300), seq(400));
        let rtt = Duration::from_millis(2);
        let reo = Duration::from_millis(1);
        // Deadlines: 4, 5 and 6 ms.
        assert_eq!(q.mark_lost_by_rack(ms(3), ms(4), seq(400), rtt, reo), (0, Some(ms(4))));
        assert_eq!(q.mark_lost_by_rack(ms(4), ms(4), seq(400), rtt, reo), (100, Some(ms(5))));
        assert_eq!(q.mark_lost_by_rack(ms(9), ms(4), seq(400), rtt, reo), (200, None));
        assert_eq!(q.lost_bytes(), 300);
        check(&q);
    }

    #[test]
    fn rack_breaks_transmission_time_ties_by_end_sequence() {
        let mut q = SentQueue::new();
        q.attach(VecDeque::new());
        // One burst at 1 ms, then a retransmission of record 1 in a later
        // burst at 2 ms, after a new record 3: same time, lower end.
        for i in 0..3 {
            q.on_transmit(seq(i * 100), seq(i * 100 + 100), ms(1));
        }
        assert!(q.mark_lost_by_rack(ms(1), ms(1), seq(200), Duration::ZERO, Duration::ZERO).0 == 200);
        q.on_transmit(seq(300), seq(400), ms(2));
        q.on_retransmit(seq(100), ms(2));
        check(&q);
        // Record 3 delivered at (2 ms, 400): the retransmission (2 ms, 200)
        // counts as sent before it; record 2 (1 ms, 300) as well.
        let _ = q.on_sack(seq(300), seq(400));
        let rtt = Duration::from_millis(1);
        assert_eq!(q.mark_lost_by_rack(ms(3), ms(2), seq(400), rtt, Duration::ZERO), (200, None));
        assert_eq!(flags(&q), ["L", "L", "L", "S"]);
        check(&q);
    }

    #[test]
    fn a_timeout_marks_everything_not_sacked_lost() {
        let mut q = sent(0, &[100; 4]);
        let _ = q.on_sack(seq(200), seq(300));
        q.on_retransmit(seq(100), ms(9));
        assert_eq!(q.mark_all_lost(), 300);
        assert_eq!(flags(&q), ["L", "L", "S", "L"]);
        assert_eq!((q.pipe(), q.next_lost()), (0, Some((seq(0), seq(100)))));
        assert_eq!(q.mark_all_lost(), 0);
        check(&q);
    }

    #[test]
    fn newreno_marks_the_first_record() {
        let mut q = sent(0, &[100, 100]);
        assert!(q.mark_first_lost());
        assert!(!q.mark_first_lost());
        q.on_retransmit(seq(0), ms(5));
        // A partial ACK: the new first record.
        let _ = q.on_cumulative_ack(seq(100));
        assert!(q.mark_first_lost());
        assert_eq!(q.next_lost(), Some((seq(100), seq(200))));
        q.on_retransmit(seq(100), ms(6));
        // A retransmitted first record can be marked again.
        assert!(q.mark_first_lost());
        let mut q = sent(0, &[100, 100]);
        let _ = q.on_sack(seq(0), seq(100));
        assert!(!q.mark_first_lost());
        check(&q);
    }

    #[test]
    fn next_lost_walks_lost_records_in_sequence_order() {
        let mut q = sent(0, &[100; 6]);
        let _ = q.on_sack(seq(300), seq(400));
        assert_eq!(q.mark_all_lost(), 500);
        let mut order = Vec::new();
        while let Some((start, _)) = q.next_lost() {
            order.push(start.get());
            q.on_retransmit(start, ms(10));
            check(&q);
        }
        assert_eq!(order, [0, 100, 200, 400, 500]);
        // Marks below the hint move it back.
        let _ = q.mark_lost_by_rack(ms(20), ms(10), seq(600), Duration::ZERO, Duration::ZERO);
        assert_eq!(q.next_lost(), Some((seq(0), seq(100))));
        check(&q);
    }

    #[test]
    fn storage_is_reused_without_reallocation() {
        let mut q = SentQueue::new();
        q.attach(VecDeque::with_capacity(64));
        let mut at = seq(7);
        for i in 0..50 {
            q.on_transmit(at, at + 10u32, ms(i));
            at += 10u32;
        }
        let _ = q.on_sack(at - 100u32, at);
        assert!(q.mark_first_lost());
        let storage = q.detach().unwrap();
        assert!(storage.is_empty() && storage.capacity() >= 64);
        assert!(!q.is_allocated());
        assert_eq!((q.pipe(), q.sacked_bytes(), q.lost_bytes(), q.highest_sacked()), (0, 0, 0, None));
        check(&q);
        let (capacity, pointer) = (storage.capacity(), storage.as_slices().0.as_ptr());
        q.attach(storage);
        for i in 0..50 {
            q.on_transmit(at, at + 10u32, ms(100 + i));
            at += 10u32;
        }
        check(&q);
        let storage = q.detach().unwrap();
        assert_eq!((storage.capacity(), storage.as_slices().0.as_ptr()), (capacity, pointer));
    }

    #[test]
    #[should_panic(expected = "already has storage")]
    fn attaching_twice_panics() {
        let mut q = SentQueue::new();
        q.attach(VecDeque::new());
        q.attach(VecDeque::new());
    }

    #[test]
    fn the_record_cap_extends_the_last_record() {
        let mut q = SentQueue::with_max_records(3);
        q.attach(VecDeque::new());
        for i in 0..5u32 {
            q.on_transmit(seq(i * 10), seq(i * 10 + 10), ms(u64::from(i)));
            check(&q);
        }
        assert_eq!(q.len(), 3);
        assert_eq!(q.last(), Some((seq(20), seq(50))));
        assert_eq!(q.iter().last().unwrap().sent_at, ms(4));
        assert_eq!(q.pipe(), 50);
        // A SACKed last record extended is SACKed no more (a renege).
        let _ = q.on_sack(seq(0), seq(10));
        let _ = q.on_sack(seq(20), seq(50));
        assert_eq!(q.highest_sacked(), Some(seq(50)));
        q.on_transmit(seq(50), seq(60), ms(5));
        assert_eq!((q.sacked_bytes(), q.pipe(), q.highest_sacked()), (10, 50, Some(seq(10))));
        check(&q);
        // A lost last record extended stays lost, with the new bytes.
        assert_eq!(q.mark_all_lost(), 50);
        q.on_transmit(seq(60), seq(70), ms(6));
        assert_eq!((q.lost_bytes(), q.pipe(), q.next_lost()), (60, 0, Some((seq(10), seq(20)))));
        check(&q);
        assert_eq!(SentQueue::with_max_records(0).max_records(), 1);
        assert_eq!(SentQueue::with_max_records(usize::MAX).max_records(), MAX_RECORDS);
    }

    #[test]
    fn duplicate_sack_blocks_cost_a_few_steps() {
        let n = 20_000u32;
        let mut q = sent(u32::MAX - 5000, &vec![10; n as usize]);
        let base = q.iter().next().unwrap().start;
        // Every other record, then the whole range, in blocks.
        let marking = steps(|| {
            for i in (1..n).step_by(2) {
                let _ = q.on_sack(base + i * 10, base + (i + 1) * 10);
            }
            let _ = q.on_sack(base + 10u32, base + n * 10);
        });
        assert!(marking < 10 * u64::from(n), "{marking} steps to mark {n} records");
        check(&q);
        for (start, end) in [(10, n * 10), (5000, 6000), (10, 20), (n * 5, n * 10)] {
            let cost = steps(|| {
                for _ in 0..100 {
                    assert_eq!(q.on_sack(base + start, base + end).bytes, 0);
                }
            });
            assert!(cost <= 100 * 4, "{cost} steps for 100 duplicate blocks [{start}, {end})");
        }
    }

    #[test]
    fn loss_detection_costs_do_not_grow_with_the_scoreboard() {
        let n = 10_000u32;
        let mut q = sent(0, &vec![10; n as usize]);
        // A SACK for every other record, IsLost after each: the boundary walks
        // the queue once.
        let cost = steps(|| {
            for i in (1..n).step_by(2) {
                let _ = q.on_sack(seq(i * 10), seq(i * 10 + 10));
                let _ = q.mark_lost_by_sack(3, 10);
            }
        });
        assert!(cost < 10 * u64::from(n), "{cost} steps");
        // Every unSACKed record with three SACKed ones above it.
        assert_eq!(q.lost_bytes(), (n / 2 - 2) * 10);
        check(&q);
        // RACK with nothing in flight but SACKed and lost records: one step.
        let cost = steps(|| {
            let _ = q.mark_lost_by_rack(ms(1 << 20), ms(1 << 20), seq(n * 10), Duration::ZERO, Duration::ZERO);
        });
        assert!(cost <= 3 * 2, "{cost} steps");
        // Retransmitting every lost record in order walks the queue once.
        let cost = steps(|| {
            while let Some((start, _)) = q.next_lost() {
                q.on_retransmit(start, ms(1 << 21));
            }
        });
        assert!(cost < 4 * u64::from(n), "{cost} steps");
        check(&q);
    }

    // A naive model: a Vec of records, full scans for everything.

    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    struct Model {
        start: SeqNumber,
        end: SeqNumber,
        sent_at: Instant,
        sacked: bool,
        lost: bool,
        retransmitted: bool,
    }

    fn newest(d: &mut Delivered, bytes: u32, sent_at: Instant, end: SeqNumber, retransmitted: bool) {
        d.bytes += bytes;
        let newer = match d.newest {
            None => true,
            Some((t, e, _)) => sent_at > t || (sent_at == t && end.gt(e)),
        };
        if newer {
            d.newest = Some((sent_at, end, retransmitted));
        }
    }

    struct Naive {
        records: Vec<Model>,
        cap: usize,
    }

    impl Naive {
        fn transmit(&mut self, start: SeqNumber, end: SeqNumber, now: Instant) {
            if !end.gt(start) {
                return;
            }
            if self.records.len() >= self.cap {
                let last = self.records.last_mut().unwrap();
                last.end = end;
                last.sent_at = now;
                last.sacked = false;
                return;
            }
            self.records.push(Model { start, end, sent_at: now, sacked: false, lost: false, retransmitted: false });
        }

        fn retransmit(&mut self, start: SeqNumber, now: Instant) {
            if let Some(r) = self.records.iter_mut().find(|r| r.start == start) {
                r.sent_at = now;
                r.retransmitted = true;
                r.lost = false;
            }
        }

        fn cumulative_ack(&mut self, ack: SeqNumber) -> Delivered {
            let mut d = Delivered::default();
            if !self.records.first().is_some_and(|r| ack.gt(r.start)) {
                return d;
            }
            for r in &mut self.records {
                if r.end.le(ack) {
                    if !r.sacked {
                        newest(&mut d, r.end.since(r.start), r.sent_at, r.end, r.retransmitted);
                    }
                } else if r.start.lt(ack) {
                    if !r.sacked {
                        newest(&mut d, ack.since(r.start), r.sent_at, ack, r.retransmitted);
                    }
                    r.start = ack;
                }
            }
            self.records.retain(|r| r.end.gt(ack));
            d
        }

        fn sack(&mut self, start: SeqNumber, end: SeqNumber) -> Delivered {
            let mut d = Delivered::default();
            if !end.gt(start) || self.records.last().is_none_or(|r| end.gt(r.end)) {
                return d;
            }
            for r in &mut self.records {
                if !r.sacked && r.start.ge(start) && r.end.le(end) {
                    r.sacked = true;
                    r.lost = false;
                    newest(&mut d, r.end.since(r.start), r.sent_at, r.end, r.retransmitted);
                }
            }
            d
        }

        fn lost_by_sack(&mut self, dupthresh: u32, mss: u32) -> u32 {
            let mut marked = 0;
            for i in 0..self.records.len() {
                let r = self.records[i];
                if r.sacked || r.lost || r.retransmitted {
                    continue;
                }
                let above: Vec<_> = self.records[i + 1..].iter().filter(|r| r.sacked).collect();
                let bytes: u64 = above.iter().map(|r| u64::from(r.end.since(r.start))).sum();
                if above.len() as u64 >= u64::from(dupthresh)
                    || bytes > u64::from(dupthresh.saturating_sub(1)) * u64::from(mss)
                {
                    self.records[i].lost = true;
                    marked += r.end.since(r.start);
                }
            }
            marked
        }

        fn lost_by_rack(
            &mut self,
            now: Instant,
            xmit: Instant,
            end: SeqNumber,
            rtt: Duration,
            reo: Duration,
        ) -> (u32, Option<Instant>) {
            let (mut marked, mut timer) = (0, None::<Instant>);
            for r in &mut self.records {
                let before = r.sent_at < xmit || (r.sent_at == xmit && r.end.le(end));
                if r.sacked || r.lost || !before {
                    continue;
                }
                let deadline = r.sent_at + rtt + reo;
                if deadline <= now {
                    r.lost = true;
                    marked += r.end.since(r.start);
                } else {
                    timer = Some(timer.map_or(deadline, |t| t.min(deadline)));
                }
            }
            (marked, timer)
        }

        fn all_lost(&mut self) -> u32 {
            let mut marked = 0;
            for r in self.records.iter_mut().filter(|r| !r.sacked && !r.lost) {
                r.lost = true;
                marked += r.end.since(r.start);
            }
            marked
        }

        fn reneging(&mut self) -> u32 {
            let mut marked = 0;
            for r in self.records.iter_mut() {
                if !r.lost {
                    marked += r.end.since(r.start);
                }
                r.sacked = false;
                r.lost = true;
            }
            marked
        }

        fn first_lost(&mut self) -> bool {
            match self.records.first_mut() {
                Some(r) if !r.sacked && !r.lost => {
                    r.lost = true;
                    true
                }
                _ => false,
            }
        }

        fn sum(&self, f: impl Fn(&Model) -> bool) -> u32 {
            self.records.iter().filter(|r| f(r)).map(|r| r.end.since(r.start)).sum()
        }
    }

    #[derive(Clone, Debug)]
    enum Op {
        /// `dt` is in µs; negative now and then, which the queue must survive.
        Transmit {
            len: u32,
            dt: i64,
        },
        Retransmit {
            pick: Pick,
            dt: i64,
        },
        CumulativeAck(Point),
        Sack(Point, Point),
        LostBySack {
            dupthresh: u32,
            mss: u32,
        },
        LostByRack {
            xmit: Option<prop::sample::Index>,
            end: Point,
            rtt: u64,
            reo: u64,
            dt: u64,
        },
        AllLost,
        FirstLost,
        Reneging,
    }

    /// Which record to retransmit.
    #[derive(Clone, Debug)]
    enum Pick {
        NextLost,
        Last,
        Any(prop::sample::Index),
        Raw(u32),
    }

    /// A sequence number: near a record boundary, or anything at all.
    #[derive(Clone, Debug)]
    enum Point {
        Boundary(prop::sample::Index, i32),
        Raw(u32),
    }

    fn point() -> impl Strategy<Value = Point> {
        prop_oneof![
            6 => (any::<prop::sample::Index>(), prop_oneof![3 => Just(0), 1 => -60i32..60]).prop_map(|(i, d)| Point::Boundary(i, d)),
            1 => any::<u32>().prop_map(Point::Raw),
        ]
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (prop_oneof![1 => Just(0u32), 8 => 1u32..200, 1 => 1000u32..5000], prop_oneof![9 => 0i64..3, 1 => -3i64..0])
                .prop_map(|(len, dt)| Op::Transmit { len, dt }),
            3 => (prop_oneof![
                Just(Pick::NextLost),
                Just(Pick::Last),
                any::<prop::sample::Index>().prop_map(Pick::Any),
                any::<u32>().prop_map(Pick::Raw),
            ], prop_oneof![9 => 0i64..3, 1 => -3i64..0])
                .prop_map(|(pick, dt)| Op::Retransmit { pick, dt }),
            2 => point().prop_map(Op::CumulativeAck),
            6 => (point(), point()).prop_map(|(a, b)| Op::Sack(a, b)),
            2 => (0u32..5, prop_oneof![Just(0u32), 1u32..300]).prop_map(|(dupthresh, mss)| Op::LostBySack { dupthresh, mss }),
            3 => (proptest::option::of(any::<prop::sample::Index>()), point(), 0u64..6, 0u64..3, 0u64..4)
                .prop_map(|(xmit, end, rtt, reo, dt)| Op::LostByRack { xmit, end, rtt, reo, dt }),
            1 => Just(Op::AllLost),
            1 => Just(Op::FirstLost),
            1 => Just(Op::Reneging),
        ]
    }

    /// The clock after `dt` µs, which may be negative.
    fn tick_clock(now: Instant, dt: i64) -> Instant {
        let d = Duration::from_micros(dt.unsigned_abs());
        if dt < 0 { now - d } else { now + d }
    }

    /// The sequence number a point stands for, given the model's records.
    fn resolve(point: &Point, naive: &Naive, next: SeqNumber) -> SeqNumber {
        match *point {
            Point::Raw(raw) => seq(raw),
            Point::Boundary(index, delta) => {
                let bounds: Vec<SeqNumber> =
                    naive.records.iter().map(|r| r.start).chain(core::iter::once(next)).collect();
                let at = bounds[index.index(bounds.len())];
                if delta >= 0 { at + delta as u32 } else { at - delta.unsigned_abs() }
            }
        }
    }

    fn compare(q: &SentQueue, naive: &Naive) -> Result<(), TestCaseError> {
        let got: Vec<Model> = q
            .iter()
            .map(|r| Model {
                start: r.start,
                end: r.end,
                sent_at: r.sent_at,
                sacked: r.is_sacked(),
                lost: r.is_lost(),
                retransmitted: r.is_retransmitted(),
            })
            .collect();
        prop_assert_eq!(&got, &naive.records);
        prop_assert_eq!(q.pipe(), naive.sum(|r| !r.sacked && !r.lost));
        prop_assert_eq!(q.sacked_bytes(), naive.sum(|r| r.sacked));
        prop_assert_eq!(q.lost_bytes(), naive.sum(|r| r.lost));
        prop_assert_eq!(q.next_lost(), naive.records.iter().find(|r| r.lost).map(|r| (r.start, r.end)));
        prop_assert_eq!(q.last(), naive.records.last().map(|r| (r.start, r.end)));
        prop_assert_eq!(q.highest_sacked(), naive.records.iter().rev().find(|r| r.sacked).map(|r| r.end));
        prop_assert_eq!(q.len(), naive.records.len());
        check(q);
        Ok(())
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn matches_a_naive_model(
            isn in prop_oneof![any::<u32>(), (u32::MAX - 3000)..=u32::MAX],
            cap in prop_oneof![Just(MAX_RECORDS), 1usize..12],
            ops in proptest::collection::vec(op(), 1..250),
        ) {
            let mut q = SentQueue::with_max_records(cap);
            q.attach(VecDeque::new());
            let mut naive = Naive { records: Vec::new(), cap };
            let mut next = seq(isn);
            let mut now = Instant::from_millis(1);
            // RACK's state, as the connection would keep it.
            let mut rack: Option<(Instant, SeqNumber)> = None;
            let track = |rack: &mut Option<(Instant, SeqNumber)>, d: &Delivered| {
                if let Some((t, e, _)) = d.newest
                    && rack.is_none_or(|(rt, re)| sent_after(t, e, rt, re))
                {
                    *rack = Some((t, e));
                }
            };
            for op in &ops {
                match op {
                    Op::Transmit { len, dt } => {
                        now = tick_clock(now, *dt);
                        q.on_transmit(next, next + *len, now);
                        naive.transmit(next, next + *len, now);
                        next += *len;
                    }
                    Op::Retransmit { pick, dt } => {
                        now = tick_clock(now, *dt);
                        let start = match pick {
                            Pick::NextLost => q.next_lost().map(|(s, _)| s),
                            Pick::Last => q.last().map(|(s, _)| s),
                            Pick::Any(i) => (!naive.records.is_empty())
                                .then(|| naive.records[i.index(naive.records.len())].start),
                            Pick::Raw(raw) => Some(seq(*raw)),
                        };
                        if let Some(start) = start {
                            q.on_retransmit(start, now);
                            naive.retransmit(start, now);
                        }
                    }
                    Op::CumulativeAck(p) => {
                        let ack = resolve(p, &naive, next);
                        let d = q.on_cumulative_ack(ack);
                        prop_assert_eq!(d, naive.cumulative_ack(ack), "ack {}", ack);
                        track(&mut rack, &d);
                    }
                    Op::Sack(a, b) => {
                        let (start, end) = (resolve(a, &naive, next), resolve(b, &naive, next));
                        let d = q.on_sack(start, end);
                        prop_assert_eq!(d, naive.sack(start, end), "block [{}, {})", start, end);
                        track(&mut rack, &d);
                    }
                    Op::LostBySack { dupthresh, mss } => {
                        prop_assert_eq!(q.mark_lost_by_sack(*dupthresh, *mss), naive.lost_by_sack(*dupthresh, *mss));
                    }
                    Op::LostByRack { xmit, end, rtt, reo, dt } => {
                        now += Duration::from_micros(*dt);
                        let (xmit, end) = match (xmit, rack) {
                            (Some(i), _) if !naive.records.is_empty() => {
                                let r = naive.records[i.index(naive.records.len())];
                                (r.sent_at, resolve(end, &naive, next))
                            }
                            (_, Some(state)) => state,
                            _ => (now, resolve(end, &naive, next)),
                        };
                        let (rtt, reo) = (Duration::from_micros(*rtt), Duration::from_micros(*reo));
                        prop_assert_eq!(
                            q.mark_lost_by_rack(now, xmit, end, rtt, reo),
                            naive.lost_by_rack(now, xmit, end, rtt, reo)
                        );
                    }
                    Op::AllLost => prop_assert_eq!(q.mark_all_lost(), naive.all_lost()),
                    Op::FirstLost => prop_assert_eq!(q.mark_first_lost(), naive.first_lost()),
                    Op::Reneging => {
                        prop_assert_eq!(q.front_is_sacked(), naive.records.first().is_some_and(|r| r.sacked));
                        prop_assert_eq!(q.on_reneging(), naive.reneging());
                    }
                }
                compare(&q, &naive)?;
                if q.is_empty() && naive.records.is_empty() {
                    // Recycle the storage as the connection does.
                    let storage = q.detach().unwrap();
                    q.attach(storage);
                }
            }
        }
    }
}
