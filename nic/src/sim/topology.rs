//! Names for the parts of the dumbbell: [`Side`], [`HostId`], [`LinkId`].

/// One end of the dumbbell. Each side has a switch; the bottleneck joins the
/// two switches.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Side {
    /// The left switch and its hosts.
    Left,
    /// The right switch and its hosts.
    Right,
}

impl Side {
    /// The opposite side.
    pub const fn other(self) -> Side {
        match self {
            Side::Left => Side::Right,
            Side::Right => Side::Left,
        }
    }

    pub(crate) const fn index(self) -> usize {
        match self {
            Side::Left => 0,
            Side::Right => 1,
        }
    }
}

/// A host of a [`Network`](super::Network), as returned by
/// [`add_host`](super::Network::add_host). Hosts are numbered from zero in the
/// order they were added.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct HostId(pub(crate) u32);

impl HostId {
    /// The host's number: 0 for the first host added, 1 for the next, …
    pub const fn index(self) -> usize {
        self.0 as usize
    }
}

/// One direction of one link, for reading its counters or changing its
/// configuration.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum LinkId {
    /// The bottleneck direction leaving the switch on side `from`.
    Bottleneck {
        /// The side whose switch sends on this direction.
        from: Side,
    },
    /// A host → its switch.
    Uplink(HostId),
    /// Its switch → a host.
    Downlink(HostId),
}

impl LinkId {
    /// The link's index in the network: the bottleneck directions are 0
    /// (left → right) and 1, then each host's uplink and downlink in the order
    /// hosts were added. The index also selects the link's random stream.
    pub(crate) fn index(self) -> usize {
        match self {
            LinkId::Bottleneck { from } => from.index(),
            LinkId::Uplink(h) => 2 + 2 * h.index(),
            LinkId::Downlink(h) => 3 + 2 * h.index(),
        }
    }
}
