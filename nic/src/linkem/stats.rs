//! [`DirectionStats`]: what happened to the frames of one direction, and
//! the atomics a worker publishes them through.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};

use crate::sim::LinkStats;

/// Counters of one direction of the emulator.
///
/// Every frame read from the ingress interface ends in exactly one place.
/// Super-frames count as the segments they were cut into:
/// `received - segmented + segments = link.frames_offered + oversized +
/// no_buffer`. Once the emulator has stopped, every frame offered to the
/// link model, and every duplicate it made, is accounted for:
/// `link.frames_offered + link.duplicated = link.queue_drops + link.lost +
/// link.frames_delivered + send_errors + in_flight`. (A duplicate that finds
/// no free buffer is not made; it counts in `no_buffer` instead, on the
/// left of the first equation and missing from the right of the second.)
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct DirectionStats {
    /// Frames read from the ingress interface.
    pub received: u64,
    /// Bytes of those frames.
    pub received_bytes: u64,
    /// Received frames whose partial checksum (left for the NIC by the
    /// sender's kernel) was completed here.
    pub checksums_completed: u64,
    /// GSO super-frames (TSO, GRO) cut here into wire-size frames.
    pub segmented: u64,
    /// Frames those super-frames were cut into.
    pub segments: u64,
    /// What the link model did: frames and bytes offered to it, dropped by
    /// the full queue, lost, reordered, duplicated, corrupted; and
    /// delivered, that is sent out of the egress interface.
    pub link: LinkStats,
    /// Frames dropped because they do not fit the egress MTU, were
    /// truncated on receive, or are super-frames of a kind this emulator
    /// cannot cut.
    pub oversized: u64,
    /// Frames dropped because the direction's frame buffers were all in use
    /// ([`EmulatorConfig::max_buffer_bytes`](super::EmulatorConfig::max_buffer_bytes)).
    pub no_buffer: u64,
    /// Frames the egress interface refused (`ENOBUFS`, `ENETDOWN`, ...).
    pub send_errors: u64,
    /// Frames the kernel dropped before the emulator could read them, its
    /// socket buffer being full: the emulator is not keeping up.
    pub kernel_drops: u64,
    /// Frames still waiting when the emulator stopped (discarded).
    pub in_flight: u64,
    /// How late frames left compared to their departure time, in
    /// microseconds: the sum (for the mean), the largest, and how many were
    /// more than 100 µs late.
    pub late_us_total: u64,
    /// The largest lateness, in microseconds.
    pub late_us_max: u64,
    /// Frames that left more than 100 µs after their departure time.
    pub late_over_100us: u64,
}

impl DirectionStats {
    const FIELDS: usize = 22;

    fn to_array(self) -> [u64; DirectionStats::FIELDS] {
        let l = self.link;
        [
            self.received,
            self.received_bytes,
            self.checksums_completed,
            self.segmented,
            self.segments,
            l.frames_offered,
            l.bytes_offered,
            l.frames_delivered,
            l.bytes_delivered,
            l.queue_drops,
            l.lost,
            l.reordered,
            l.duplicated,
            l.corrupted,
            self.oversized,
            self.no_buffer,
            self.send_errors,
            self.kernel_drops,
            self.in_flight,
            self.late_us_total,
            self.late_us_max,
            self.late_over_100us,
        ]
    }

    fn from_array(a: [u64; DirectionStats::FIELDS]) -> DirectionStats {
        DirectionStats {
            received: a[0],
            received_bytes: a[1],
            checksums_completed: a[2],
            segmented: a[3],
            segments: a[4],
            link: LinkStats {
                frames_offered: a[5],
                bytes_offered: a[6],
                frames_delivered: a[7],
                bytes_delivered: a[8],
                queue_drops: a[9],
                lost: a[10],
                reordered: a[11],
                duplicated: a[12],
                corrupted: a[13],
            },
            oversized: a[14],
            no_buffer: a[15],
            send_errors: a[16],
            kernel_drops: a[17],
            in_flight: a[18],
            late_us_total: a[19],
            late_us_max: a[20],
            late_over_100us: a[21],
        }
    }

    /// Frames sent out of the egress interface.
    pub fn forwarded(&self) -> u64 {
        self.link.frames_delivered
    }

    /// Frames dropped for any reason.
    pub fn dropped(&self) -> u64 {
        self.link.queue_drops + self.link.lost + self.oversized + self.no_buffer + self.send_errors + self.kernel_drops
    }
}

impl fmt::Display for DirectionStats {
    /// One line of `key=value` pairs, easy to read and to split.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let l = &self.link;
        let late_mean =
            if l.frames_delivered > 0 { self.late_us_total as f64 / l.frames_delivered as f64 } else { 0.0 };
        write!(
            f,
            "received={} forwarded={} forwarded_bytes={} queue_drops={} lost={} reordered={} duplicated={} \
             corrupted={} oversized={} no_buffer={} send_errors={} kernel_drops={} in_flight={} \
             checksums_completed={} segmented={} segments={} late_us_mean={:.1} late_us_max={} late_over_100us={}",
            self.received,
            l.frames_delivered,
            l.bytes_delivered,
            l.queue_drops,
            l.lost,
            l.reordered,
            l.duplicated,
            l.corrupted,
            self.oversized,
            self.no_buffer,
            self.send_errors,
            self.kernel_drops,
            self.in_flight,
            self.checksums_completed,
            self.segmented,
            self.segments,
            late_mean,
            self.late_us_max,
            self.late_over_100us,
        )
    }
}

/// A worker's counters as seen from other threads: stored whole after each
/// round of work, read field by field (a snapshot may mix two rounds,
/// which is fine for monitoring).
#[derive(Debug, Default)]
pub(crate) struct SharedStats {
    fields: [AtomicU64; DirectionStats::FIELDS],
}

impl SharedStats {
    pub(crate) fn publish(&self, stats: &DirectionStats) {
        for (slot, value) in self.fields.iter().zip(stats.to_array()) {
            slot.store(value, Ordering::Relaxed);
        }
    }

    pub(crate) fn snapshot(&self) -> DirectionStats {
        DirectionStats::from_array(self.fields.each_ref().map(|f| f.load(Ordering::Relaxed)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn publish_and_snapshot_round_trip_every_field() {
        let mut values = [0u64; DirectionStats::FIELDS];
        for (i, v) in values.iter_mut().enumerate() {
            *v = i as u64 * 1000 + 7;
        }
        let stats = DirectionStats::from_array(values);
        let shared = SharedStats::default();
        shared.publish(&stats);
        assert_eq!(shared.snapshot(), stats);
        assert_eq!(stats.to_array(), values);
    }

    #[test]
    fn displays_as_key_value_pairs() {
        let mut s = DirectionStats::default();
        s.link.frames_delivered = 3;
        s.late_us_total = 30;
        let line = s.to_string();
        assert!(line.starts_with("received=0 forwarded=3 "), "{line}");
        assert!(line.contains(" late_us_mean=10.0 "), "{line}");
        assert!(line.split(' ').all(|kv| kv.split_once('=').is_some()));
    }
}
