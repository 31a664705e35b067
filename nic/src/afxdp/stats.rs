//! [`AfXdpStats`]: what one AF_XDP socket has done, counted by us and by
//! the kernel.

/// Counters of one [`AfXdp`](super::AfXdp) socket, from
/// [`AfXdp::stats`](super::AfXdp::stats).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct AfXdpStats {
    /// Frames handed to the receive callback.
    pub rx_frames: u64,
    /// Bytes of those frames.
    pub rx_bytes: u64,
    /// Frames put on the TX ring.
    pub tx_frames: u64,
    /// Bytes of those frames.
    pub tx_bytes: u64,
    /// Frames shorter than an Ethernet header that the transmit callback
    /// produced: counted and dropped (a caller bug).
    pub tx_runts: u64,
    /// Transmit calls cut short because the TX ring had no free slot.
    pub tx_ring_full: u64,
    /// Transmit calls cut short because every transmit frame was in flight
    /// (the kernel had not completed them yet).
    pub tx_frames_exhausted: u64,
    /// `sendto` calls made to wake the kernel's transmit path.
    pub tx_wakeups: u64,
    /// `recvfrom` calls made because the fill ring asked for a wakeup.
    pub rx_wakeups: u64,
    /// `recvfrom` calls made to busy-poll the driver after an empty
    /// receive ([`AfXdpConfig::kernel_busy_poll`](super::AfXdpConfig::kernel_busy_poll)).
    pub rx_busy_polls: u64,
    /// RX descriptors that did not describe a frame of this socket's UMEM
    /// (not expected from a correct kernel): dropped.
    pub rx_invalid_descs: u64,
    /// Frames that came in several parts (multi-buffer) and were put
    /// together for the callback; also counted in `rx_frames`.
    pub rx_chained: u64,
    /// Multi-buffer frames dropped because a part could not be used (it
    /// lay outside the UMEM, or the parts ran past the largest frame),
    /// counted once per frame.
    pub rx_malformed_chains: u64,
    /// Frames sent as several descriptors (multi-buffer); also counted in
    /// `tx_frames`.
    pub tx_chained: u64,
    /// Frames sent with a checksum request in their transmit metadata
    /// (the kernel finished their TCP checksum); also counted in
    /// `tx_frames`.
    pub tx_checksum_offloaded: u64,
    /// Completion-ring addresses that were no descriptor of ours in flight
    /// (not expected from a correct kernel): ignored.
    pub tx_foreign_completions: u64,
    /// The kernel's own counters (`XDP_STATISTICS`), `None` if reading them
    /// failed.
    pub kernel: Option<KernelXdpStats>,
}

/// The kernel's counters for one AF_XDP socket (`getsockopt(SOL_XDP,
/// XDP_STATISTICS)`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct KernelXdpStats {
    /// Frames dropped for other reasons than the two below.
    pub rx_dropped: u64,
    /// Frames dropped because the RX ring was full: the socket is not
    /// drained fast enough.
    pub rx_ring_full: u64,
    /// Times the kernel found the fill ring empty: received frames were
    /// not given back fast enough.
    pub rx_fill_ring_empty: u64,
    /// Invalid descriptors on the fill ring.
    pub rx_invalid_descs: u64,
    /// Invalid descriptors on the TX ring.
    pub tx_invalid_descs: u64,
    /// Times the kernel found the TX ring empty when asked to send.
    pub tx_ring_empty: u64,
}
