//! The SACK scoreboard (`fairway_stack::tcp::sent_queue::SentQueue`)
//! against a reference model written for this target: a `Vec` of records
//! with three flags, raw `u32` sequence numbers with wrapping compares, and
//! a full scan for every question. After every operation the queue must
//! hold the same records (start, end, transmission time, flags), report the
//! same pipe, SACKed and lost bytes, the same next lost and last record and
//! highest SACKed byte, and each call must answer what the model answers
//! (bytes delivered and the newest record delivered, bytes marked lost, the
//! RACK timer). The queue's records must cover `[SND.UNA, SND.MAX)` without
//! gaps, none empty, none SACKed and lost at once, no more than its cap.
//!
//! The fuzzer picks the initial sequence number (often just below 2^32, so
//! the span wraps), the record cap (small ones force the last record to
//! grow), and a sequence of transmissions, retransmissions, cumulative
//! ACKs and SACK blocks at record edges, a few bytes off them, below
//! SND.UNA, beyond SND.MAX or anywhere, the loss detectors (RFC 6675
//! IsLost, RACK, an RTO, NewReno's first segment), reneging and recycling of
//! the storage; the clock steps by microseconds, now and then backwards.
#![no_main]

use std::collections::VecDeque;

use arbitrary::Arbitrary;
use fairway_stack::tcp::sent_queue::{Delivered, MAX_RECORDS, SentQueue};
use fairway_stack::tcp::seq::SeqNumber;
use fairway_stack::time::{Duration, Instant};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    isn: u32,
    /// Start within 64 KiB below 2^32, so the sequence space wraps.
    near_wrap: bool,
    /// The record cap: 1 to 31 (0 clamps to 1), anything higher the default.
    cap: u8,
    ops: Vec<Op>,
}

#[derive(Arbitrary, Debug)]
enum Op {
    /// A first transmission of `len` bytes (0: nothing) at the clock plus
    /// `dt` µs.
    Transmit {
        len: u16,
        dt: i8,
    },
    Retransmit {
        pick: Pick,
        dt: i8,
    },
    CumulativeAck(Point),
    Sack(Point, Point),
    /// An ACK's SACK blocks, applied in turn, as a connection does.
    SackBlocks(Vec<(Point, Point)>),
    LostBySack {
        dupthresh: u8,
        mss: u16,
    },
    /// RACK with the newest delivered record (`xmit: None`) or a record's
    /// transmission time, `rtt` and `reo` µs, the clock moved by `dt` µs.
    LostByRack {
        xmit: Option<u16>,
        end: Point,
        rtt: u8,
        reo: u8,
        dt: u8,
    },
    AllLost,
    FirstLost,
    Reneging,
    /// Takes the storage away and attaches it (or a fresh one) again: the
    /// queue forgets every record.
    Recycle {
        fresh: bool,
    },
}

/// Which record a retransmission names.
#[derive(Arbitrary, Debug)]
enum Pick {
    NextLost,
    Last,
    /// The record at this index (modulo their number).
    Record(u16),
    /// Any sequence number (usually no record's start: ignored).
    Raw(u32),
}

/// A sequence number for an ACK or a SACK edge.
#[derive(Arbitrary, Debug)]
enum Point {
    /// A record's start (or SND.MAX, one past the last index), moved by
    /// `delta` bytes.
    Edge {
        index: u16,
        delta: i8,
    },
    /// SND.UNA plus `delta` (negative: below it).
    Una(i16),
    /// SND.MAX plus `delta` (positive: beyond what was sent).
    Max(i16),
    Raw(u32),
}

// ---------------------------------------------------------------------------
// The model
// ---------------------------------------------------------------------------

/// Sequence-space order of RFC 9293 §3.4: `a` before `b`.
fn before(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) < 0
}

/// `a` after `b`. Exactly 2^31 apart the order is undefined (RFC 1982
/// §3.2); there, as with the stack's `SeqNumber`, neither is after the
/// other (and each is before the other). The first version of this model
/// read `after(a, b)` as `before(b, a)` and disagreed with the queue on an
/// ACK 2^31 past SND.UNA, which a connection never passes on.
fn after(a: u32, b: u32) -> bool {
    (a.wrapping_sub(b) as i32) > 0
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Record {
    start: u32,
    end: u32,
    /// µs.
    sent_at: u64,
    sacked: bool,
    lost: bool,
    retransmitted: bool,
}

impl Record {
    fn bytes(&self) -> u32 {
        self.end.wrapping_sub(self.start)
    }

    fn in_flight(&self) -> bool {
        !self.sacked && !self.lost
    }
}

/// RFC 8985 §6.2 RACK_sent_after(t1, seq1, t2, seq2).
fn sent_after(t1: u64, end1: u32, t2: u64, end2: u32) -> bool {
    t1 > t2 || (t1 == t2 && after(end1, end2))
}

/// What a call delivered: bytes, and the newest record `(sent_at, end,
/// retransmitted)`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Delivery {
    bytes: u32,
    newest: Option<(u64, u32, bool)>,
}

impl Delivery {
    fn add(&mut self, bytes: u32, sent_at: u64, end: u32, retransmitted: bool) {
        self.bytes += bytes;
        if self.newest.is_none_or(|(t, e, _)| sent_after(sent_at, end, t, e)) {
            self.newest = Some((sent_at, end, retransmitted));
        }
    }

    fn of(d: Delivered) -> Delivery {
        Delivery { bytes: d.bytes, newest: d.newest.map(|(t, e, r)| (t.total_micros(), e.get(), r)) }
    }
}

struct Model {
    records: Vec<Record>,
    cap: usize,
}

impl Model {
    fn transmit(&mut self, start: u32, end: u32, now: u64) {
        if !after(end, start) {
            return;
        }
        if self.records.len() >= self.cap {
            // The cap: the last record grows and is sent now; a SACK on it
            // is dropped, a loss mark stays (its retransmission carries
            // the new bytes).
            let last = self.records.last_mut().expect("a cap of at least one");
            last.end = end;
            last.sent_at = now;
            last.sacked = false;
        } else {
            self.records.push(Record { start, end, sent_at: now, sacked: false, lost: false, retransmitted: false });
        }
    }

    fn retransmit(&mut self, start: u32, now: u64) {
        if let Some(r) = self.records.iter_mut().find(|r| r.start == start) {
            r.sent_at = now;
            r.lost = false;
            r.retransmitted = true;
        }
    }

    fn cumulative_ack(&mut self, ack: u32) -> Delivery {
        let mut d = Delivery::default();
        let mut gone = 0;
        for r in &mut self.records {
            if !after(ack, r.start) {
                break;
            }
            if !after(r.end, ack) {
                if !r.sacked {
                    d.add(r.bytes(), r.sent_at, r.end, r.retransmitted);
                }
                gone += 1;
            } else {
                if !r.sacked {
                    d.add(ack.wrapping_sub(r.start), r.sent_at, ack, r.retransmitted);
                }
                r.start = ack;
                break;
            }
        }
        self.records.drain(..gone);
        d
    }

    fn sack(&mut self, start: u32, end: u32) -> Delivery {
        let mut d = Delivery::default();
        let (Some(first), Some(last)) = (self.records.first(), self.records.last()) else { return d };
        if !after(end, start) || !after(end, first.start) || after(end, last.end) {
            return d;
        }
        for r in &mut self.records {
            if !r.sacked && !before(r.start, start) && !after(r.end, end) {
                r.sacked = true;
                r.lost = false;
                d.add(r.bytes(), r.sent_at, r.end, r.retransmitted);
            }
        }
        d
    }

    /// RFC 6675 IsLost over every record, from the top down.
    fn lost_by_sack(&mut self, dupthresh: u32, mss: u32) -> u32 {
        let limit = u64::from(dupthresh.saturating_sub(1)) * u64::from(mss);
        let (mut count, mut bytes, mut marked) = (0u64, 0u64, 0);
        for r in self.records.iter_mut().rev() {
            if r.sacked {
                count += 1;
                bytes += u64::from(r.bytes());
            } else if !r.lost && !r.retransmitted && (count >= u64::from(dupthresh) || bytes > limit) {
                r.lost = true;
                marked += r.bytes();
            }
        }
        marked
    }

    fn lost_by_rack(&mut self, now: u64, xmit: u64, end: u32, rtt: u64, reo: u64) -> (u32, Option<u64>) {
        let (mut marked, mut timer) = (0, None::<u64>);
        for r in self.records.iter_mut().filter(|r| r.in_flight() && !sent_after(r.sent_at, r.end, xmit, end)) {
            let deadline = r.sent_at + rtt + reo;
            if deadline <= now {
                r.lost = true;
                marked += r.bytes();
            } else {
                timer = Some(timer.map_or(deadline, |t| t.min(deadline)));
            }
        }
        (marked, timer)
    }

    fn all_lost(&mut self) -> u32 {
        let mut marked = 0;
        for r in self.records.iter_mut().filter(|r| r.in_flight()) {
            r.lost = true;
            marked += r.bytes();
        }
        marked
    }

    fn reneging(&mut self) -> u32 {
        let mut marked = 0;
        for r in &mut self.records {
            if !r.lost {
                marked += r.bytes();
            }
            r.sacked = false;
            r.lost = true;
        }
        marked
    }

    fn first_lost(&mut self) -> bool {
        match self.records.first_mut() {
            Some(r) if r.in_flight() => {
                r.lost = true;
                true
            }
            _ => false,
        }
    }
}

// ---------------------------------------------------------------------------
// The run
// ---------------------------------------------------------------------------

/// Time starts here, so that steps backwards never reach zero.
const EPOCH: u64 = 1 << 32;

fn seq(raw: u32) -> SeqNumber {
    SeqNumber::new(raw)
}

fn at(micros: u64) -> Instant {
    Instant::from_micros(micros)
}

fn step(now: u64, dt: i8) -> u64 {
    now.saturating_add_signed(i64::from(dt))
}

/// The sequence number `point` names, given the model's records and
/// SND.MAX.
fn resolve(point: &Point, model: &Model, snd_max: u32) -> u32 {
    let una = model.records.first().map_or(snd_max, |r| r.start);
    match *point {
        Point::Edge { index, delta } => {
            let i = usize::from(index) % (model.records.len() + 1);
            let edge = model.records.get(i).map_or(snd_max, |r| r.start);
            edge.wrapping_add_signed(i32::from(delta))
        }
        Point::Una(delta) => una.wrapping_add_signed(i32::from(delta)),
        Point::Max(delta) => snd_max.wrapping_add_signed(i32::from(delta)),
        Point::Raw(raw) => raw,
    }
}

/// RACK's state after a delivery: the newest record delivered so far.
fn track(rack: &mut Option<(u64, u32)>, d: &Delivery) {
    if let Some((t, e, _)) = d.newest
        && rack.is_none_or(|(rt, re)| sent_after(t, e, rt, re))
    {
        *rack = Some((t, e));
    }
}

/// The queue against the model, and the queue's own invariants, in one
/// pass over the records.
fn compare(q: &SentQueue, model: &Model, snd_max: u32) {
    assert_eq!(q.len(), model.records.len(), "the number of records");
    let (mut pipe, mut sacked, mut lost) = (0, 0, 0);
    let (mut next_lost, mut highest) = (None, None);
    let mut prev_end = None;
    for (i, (r, m)) in q.iter().zip(&model.records).enumerate() {
        let got = Record {
            start: r.start.get(),
            end: r.end.get(),
            sent_at: r.sent_at.total_micros(),
            sacked: r.is_sacked(),
            lost: r.is_lost(),
            retransmitted: r.is_retransmitted(),
        };
        assert_eq!(&got, m, "record {i}");
        assert!(got.bytes() > 0, "record {i} is empty");
        assert!(!(got.sacked && got.lost), "record {i} SACKed and lost");
        if let Some(end) = prev_end {
            assert_eq!(got.start, end, "a gap or overlap before record {i}");
        }
        prev_end = Some(got.end);
        if m.sacked {
            sacked += m.bytes();
            highest = Some(seq(m.end));
        } else if m.lost {
            lost += m.bytes();
            next_lost = next_lost.or(Some((seq(m.start), seq(m.end))));
        } else {
            pipe += m.bytes();
        }
    }
    if let Some(end) = prev_end {
        assert_eq!(end, snd_max, "the records end short of SND.MAX");
    }
    assert!(q.len() <= q.max_records(), "over the record cap");
    assert_eq!(q.is_empty(), model.records.is_empty());
    assert_eq!(q.pipe(), pipe, "pipe");
    assert_eq!(q.sacked_bytes(), sacked, "SACKed bytes");
    assert_eq!(q.lost_bytes(), lost, "lost bytes");
    assert_eq!(q.next_lost(), next_lost, "next lost");
    assert_eq!(q.last(), model.records.last().map(|r| (seq(r.start), seq(r.end))), "last");
    assert_eq!(q.highest_sacked(), highest, "highest SACKed");
    assert_eq!(q.front_is_sacked(), model.records.first().is_some_and(|r| r.sacked), "front SACKed");
}

fuzz_target!(|input: Input| {
    let cap = if input.cap < 32 { usize::from(input.cap) } else { MAX_RECORDS };
    let mut q = SentQueue::with_max_records(cap);
    q.attach(VecDeque::new());
    let mut model = Model { records: Vec::new(), cap: cap.clamp(1, MAX_RECORDS) };
    assert_eq!(q.max_records(), model.cap);
    let isn = if input.near_wrap { u32::MAX - (input.isn & 0xffff) } else { input.isn };
    let mut snd_max = isn;
    let mut now = EPOCH;
    // RACK's newest delivered record, as the connection keeps it.
    let mut rack: Option<(u64, u32)> = None;
    for op in input.ops.iter().take(256) {
        match op {
            Op::Transmit { len, dt } => {
                now = step(now, *dt);
                let end = snd_max.wrapping_add(u32::from(*len));
                q.on_transmit(seq(snd_max), seq(end), at(now));
                model.transmit(snd_max, end, now);
                snd_max = end;
            }
            Op::Retransmit { pick, dt } => {
                now = step(now, *dt);
                let start = match pick {
                    Pick::NextLost => q.next_lost().map(|(s, _)| s.get()),
                    Pick::Last => q.last().map(|(s, _)| s.get()),
                    Pick::Record(i) => {
                        (!model.records.is_empty()).then(|| model.records[usize::from(*i) % model.records.len()].start)
                    }
                    Pick::Raw(raw) => Some(*raw),
                };
                if let Some(start) = start {
                    q.on_retransmit(seq(start), at(now));
                    model.retransmit(start, now);
                }
            }
            Op::CumulativeAck(p) => {
                let ack = resolve(p, &model, snd_max);
                let d = Delivery::of(q.on_cumulative_ack(seq(ack)));
                assert_eq!(d, model.cumulative_ack(ack), "cumulative ACK {ack}");
                track(&mut rack, &d);
            }
            Op::Sack(a, b) => {
                let (start, end) = (resolve(a, &model, snd_max), resolve(b, &model, snd_max));
                let d = Delivery::of(q.on_sack(seq(start), seq(end)));
                assert_eq!(d, model.sack(start, end), "SACK block [{start}, {end})");
                track(&mut rack, &d);
            }
            Op::SackBlocks(blocks) => {
                for (a, b) in blocks.iter().take(4) {
                    let (start, end) = (resolve(a, &model, snd_max), resolve(b, &model, snd_max));
                    let d = Delivery::of(q.on_sack(seq(start), seq(end)));
                    assert_eq!(d, model.sack(start, end), "SACK block [{start}, {end})");
                    track(&mut rack, &d);
                }
            }
            Op::LostBySack { dupthresh, mss } => {
                let (dupthresh, mss) = (u32::from(*dupthresh % 8), u32::from(*mss));
                assert_eq!(q.mark_lost_by_sack(dupthresh, mss), model.lost_by_sack(dupthresh, mss), "IsLost");
            }
            Op::LostByRack { xmit, end, rtt, reo, dt } => {
                now += u64::from(*dt);
                let (xmit, end) = match (xmit, rack) {
                    (Some(i), _) if !model.records.is_empty() => {
                        let r = model.records[usize::from(*i) % model.records.len()];
                        (r.sent_at, resolve(end, &model, snd_max))
                    }
                    (_, Some(state)) => state,
                    _ => (now, resolve(end, &model, snd_max)),
                };
                let (rtt, reo) = (u64::from(*rtt), u64::from(*reo));
                let (marked, timer) = q.mark_lost_by_rack(
                    at(now),
                    at(xmit),
                    seq(end),
                    Duration::from_micros(rtt),
                    Duration::from_micros(reo),
                );
                assert_eq!(
                    (marked, timer.map(Instant::total_micros)),
                    model.lost_by_rack(now, xmit, end, rtt, reo),
                    "RACK"
                );
            }
            Op::AllLost => assert_eq!(q.mark_all_lost(), model.all_lost(), "RTO"),
            Op::FirstLost => assert_eq!(q.mark_first_lost(), model.first_lost(), "first lost"),
            Op::Reneging => assert_eq!(q.on_reneging(), model.reneging(), "reneging"),
            Op::Recycle { fresh } => {
                let storage = q.detach();
                assert!(storage.as_ref().is_some_and(VecDeque::is_empty), "detached storage holds records");
                assert!(!q.is_allocated() && q.is_empty());
                q.attach(if *fresh { VecDeque::new() } else { storage.unwrap_or_default() });
                model.records.clear();
            }
        }
        compare(&q, &model, snd_max);
    }
});
