//! The sender's record of what is in flight: one record per transmitted
//! segment, in sequence order, with its last transmission time and whether it
//! was SACKed, judged lost or retransmitted. It is the SACK scoreboard of
//! RFC 6675 and the per-segment state RACK-TLP (RFC 8985) needs.
//!
//! The bytes themselves stay in the connection's send ring; this only tracks
//! sequence ranges. Storage is attached on first use and detached when the
//! queue empties, like a [`crate::ring::Ring`], so idle connections hold none.

use std::collections::VecDeque;

use crate::tcp::seq::SeqNumber;
use crate::time::{Duration, Instant};

/// One transmitted segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Sent {
    /// First sequence number.
    pub start: SeqNumber,
    /// One past the last sequence number.
    pub end: SeqNumber,
    /// When it was last (re)transmitted.
    pub sent_at: Instant,
    flags: u8,
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

/// The in-flight records of one connection.
#[derive(Debug, Default)]
pub struct SentQueue {
    _todo: (),
}

impl SentQueue {
    /// A queue without storage.
    pub const fn new() -> SentQueue {
        SentQueue { _todo: () }
    }

    /// Whether storage is attached.
    pub fn is_allocated(&self) -> bool {
        todo!()
    }

    /// Attaches (empty, possibly recycled) storage; the queue must have none.
    pub fn attach(&mut self, storage: VecDeque<Sent>) {
        let _ = storage;
        todo!()
    }

    /// Takes the storage away (cleared), leaving an empty queue without storage.
    pub fn detach(&mut self) -> Option<VecDeque<Sent>> {
        todo!()
    }

    /// Records held.
    pub fn len(&self) -> usize {
        todo!()
    }

    /// No records.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// A first transmission of `[start, end)` at `now`. `start` is the end of
    /// the last record (or the queue is empty).
    pub fn on_transmit(&mut self, start: SeqNumber, end: SeqNumber, now: Instant) {
        let _ = (start, end, now);
        todo!()
    }

    /// A retransmission, at `now`, of the record starting at `start` (a whole
    /// record, as returned by [`SentQueue::next_lost`] or
    /// [`SentQueue::last`]): it is in flight again and no longer lost.
    pub fn on_retransmit(&mut self, start: SeqNumber, now: Instant) {
        let _ = (start, now);
        todo!()
    }

    /// A cumulative ACK: drops everything below `ack` (trimming a record it
    /// splits) and reports what was newly delivered.
    pub fn on_cumulative_ack(&mut self, ack: SeqNumber) -> Delivered {
        let _ = ack;
        todo!()
    }

    /// A SACK block `[start, end)`: marks every record it covers entirely as
    /// SACKed and reports what was newly delivered. Blocks outside the queue
    /// are ignored.
    pub fn on_sack(&mut self, start: SeqNumber, end: SeqNumber) -> Delivered {
        let _ = (start, end);
        todo!()
    }

    /// RFC 6675 IsLost: marks lost every record neither SACKed nor lost with
    /// at least `dupthresh` SACKed records, or more than
    /// `(dupthresh - 1) * mss` SACKed bytes, above it. Returns the bytes
    /// newly marked.
    pub fn mark_lost_by_sack(&mut self, dupthresh: u32, mss: u32) -> u32 {
        let _ = (dupthresh, mss);
        todo!()
    }

    /// RFC 8985 §6.2 RACK_detect_loss: marks lost every record neither
    /// SACKed nor lost that was sent before the most recently delivered one
    /// (`rack_xmit`, ties by `end <= rack_end`) and whose
    /// `sent_at + rack_rtt + reo_wnd <= now`. Returns the bytes newly marked
    /// and, for candidates not yet old enough, the earliest time one will be.
    pub fn mark_lost_by_rack(
        &mut self,
        now: Instant,
        rack_xmit: Instant,
        rack_end: SeqNumber,
        rack_rtt: Duration,
        reo_wnd: Duration,
    ) -> (u32, Option<Instant>) {
        let _ = (now, rack_xmit, rack_end, rack_rtt, reo_wnd);
        todo!()
    }

    /// After a retransmission timeout (RFC 6675 §5.1): every record not
    /// SACKed is lost. Returns the bytes newly marked.
    pub fn mark_all_lost(&mut self) -> u32 {
        todo!()
    }

    /// NewReno (no SACK): marks the first record lost. Returns whether it
    /// was newly marked.
    pub fn mark_first_lost(&mut self) -> bool {
        todo!()
    }

    /// The first record marked lost and not retransmitted since: what to
    /// retransmit next.
    pub fn next_lost(&self) -> Option<(SeqNumber, SeqNumber)> {
        todo!()
    }

    /// The last record, for a tail-loss probe.
    pub fn last(&self) -> Option<(SeqNumber, SeqNumber)> {
        todo!()
    }

    /// RFC 6675 pipe: bytes sent and neither SACKed nor lost (a lost record
    /// counts again once retransmitted).
    pub fn pipe(&self) -> u32 {
        todo!()
    }

    /// Bytes SACKed.
    pub fn sacked_bytes(&self) -> u32 {
        todo!()
    }

    /// Bytes marked lost and not yet retransmitted.
    pub fn lost_bytes(&self) -> u32 {
        todo!()
    }

    /// The highest SACKed sequence number, if any record is SACKed.
    pub fn highest_sacked(&self) -> Option<SeqNumber> {
        todo!()
    }
}
