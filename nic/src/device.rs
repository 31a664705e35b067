//! The [`Device`] trait: the contract every packet I/O backend follows.

/// A source and sink of Ethernet frames, driven in batches by one shard.
///
/// This is the whole interface between the runtime and a NIC queue, be it an
/// AF_XDP socket, a TAP device or a port of the simulated network
/// ([`crate::sim::Port`]). The contract below holds for every backend.
///
/// # Frames
///
/// A frame is an Ethernet II frame starting at the destination MAC address,
/// without preamble or FCS, and at most [`max_frame_len`](Device::max_frame_len)
/// bytes long. Devices do not pad short frames. A frame shorter than an
/// Ethernet header (14 bytes) that is handed to `transmit` is a caller bug; a
/// device counts it and drops it, it never panics.
///
/// # Buffers
///
/// The device owns every buffer. Neither method allocates per frame: received
/// frames are lent to the caller for the duration of one callback, and
/// transmit buffers are lent to the caller for the duration of one `fill`
/// call. After the callback returns, the device may reuse the buffer at once,
/// so a caller that needs the bytes later copies them.
///
/// # Batching and back-pressure
///
/// Both methods take a `budget`: the most frames the caller is willing to
/// handle in this call. They never block and never sleep. A device may hand
/// over or accept fewer frames than the budget (nothing has arrived, the
/// transmit ring is full); the return value says how many it did. A budget of
/// zero does nothing and returns zero.
///
/// # Delivery
///
/// A frame accepted by `transmit` is on its way; like a wire, the device may
/// still lose it later (a full queue, a simulated impairment) without telling
/// the caller. Received frames come out oldest first.
pub trait Device {
    /// The largest frame this device carries, Ethernet header included, FCS
    /// excluded. Every transmit buffer is exactly this long.
    fn max_frame_len(&self) -> usize;

    /// Hands up to `budget` received frames, oldest first, to `on_frame`, one
    /// call per frame. The slice is the frame and nothing else; its buffer
    /// returns to the device when the call returns. Returns how many frames
    /// were handed over: fewer than `budget` means the receive queue is now
    /// empty.
    fn receive<F: FnMut(&[u8])>(&mut self, budget: usize, on_frame: F) -> usize;

    /// Offers up to `budget` transmit buffers, one at a time, to `fill`.
    ///
    /// Each buffer is [`max_frame_len`](Device::max_frame_len) bytes long and
    /// holds unspecified bytes (typically an earlier frame). `fill` writes one
    /// frame at the start of the buffer and returns `Some(len)`, or returns
    /// `None` when it has nothing more to send, which ends the batch and hands
    /// that buffer back unsent. Returning a length greater than the buffer is
    /// a bug: debug builds panic, release builds clamp the length to the
    /// buffer.
    ///
    /// Returns how many frames were sent. `fill` is not called again once it
    /// returns `None`, nor when the device has no free transmit buffer, so a
    /// caller never loses a frame it produced.
    fn transmit<F: FnMut(&mut [u8]) -> Option<usize>>(&mut self, budget: usize, fill: F) -> usize;

    /// Asks the device to finish the TCP checksums of the frames it sends
    /// from now on; returns whether it will. If it will, every TCP segment
    /// in a frame `fill` writes afterwards must carry in its checksum field
    /// only the pseudo-header sum (folded, not complemented: what Linux
    /// calls `CHECKSUM_PARTIAL`; a shard with
    /// [`fairway_stack::Config::tx_checksum_offload`] does this), and the
    /// device completes it at [`fairway_stack::partial_checksum`]'s offsets
    /// before the frame leaves. Until asked, and where it answers `false`
    /// (the default), frames leave as written and must be complete.
    fn offload_tx_checksums(&mut self) -> bool {
        false
    }
}
