//! Counters: [`LinkStats`] per link direction, [`NetworkStats`] for the whole
//! network.

use core::ops::{Add, AddAssign};

/// What happened to the frames offered to one direction of one link.
///
/// Once the network is idle, `frames_delivered = frames_offered - queue_drops
/// - lost + duplicated`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// Frames offered to the link, dropped ones included.
    pub frames_offered: u64,
    /// Bytes of the frames offered.
    pub bytes_offered: u64,
    /// Frames that reached the far end, duplicates included.
    pub frames_delivered: u64,
    /// Bytes of the frames delivered.
    pub bytes_delivered: u64,
    /// Frames dropped because the queue was full (drop-tail).
    pub queue_drops: u64,
    /// Frames lost on the wire by the loss impairment.
    pub lost: u64,
    /// Frames given an extra reordering delay.
    pub reordered: u64,
    /// Extra copies created by the duplication impairment.
    pub duplicated: u64,
    /// Frames with one byte corrupted.
    pub corrupted: u64,
}

impl Add for LinkStats {
    type Output = LinkStats;
    fn add(self, rhs: LinkStats) -> LinkStats {
        LinkStats {
            frames_offered: self.frames_offered + rhs.frames_offered,
            bytes_offered: self.bytes_offered + rhs.bytes_offered,
            frames_delivered: self.frames_delivered + rhs.frames_delivered,
            bytes_delivered: self.bytes_delivered + rhs.bytes_delivered,
            queue_drops: self.queue_drops + rhs.queue_drops,
            lost: self.lost + rhs.lost,
            reordered: self.reordered + rhs.reordered,
            duplicated: self.duplicated + rhs.duplicated,
            corrupted: self.corrupted + rhs.corrupted,
        }
    }
}

impl AddAssign for LinkStats {
    fn add_assign(&mut self, rhs: LinkStats) {
        *self = *self + rhs;
    }
}

/// The access links of one host.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostLinkStats {
    /// Host → its switch.
    pub uplink: LinkStats,
    /// Its switch → host.
    pub downlink: LinkStats,
}

/// A snapshot of every counter in a [`Network`](super::Network).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct NetworkStats {
    /// The bottleneck, left switch → right switch.
    pub left_to_right: LinkStats,
    /// The bottleneck, right switch → left switch.
    pub right_to_left: LinkStats,
    /// Access links, indexed by [`HostId::index`](super::HostId::index).
    pub hosts: Vec<HostLinkStats>,
    /// The sum over every link. A frame is counted once per hop it takes.
    pub total: LinkStats,
    /// Frames dropped at transmit because they could not be routed: addressed
    /// to a unicast MAC no host registered, or shorter than an Ethernet
    /// header. They are counted on no link.
    pub unroutable: u64,
}
