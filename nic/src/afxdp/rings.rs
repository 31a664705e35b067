//! [`Rings`]: the data path of one AF_XDP socket, over its UMEM and its
//! four rings.
//!
//! Every UMEM frame is in exactly one place at a time, which is what makes
//! the `unsafe` ring calls sound:
//!
//! ```text
//! receive side:  fill ring ─kernel─▶ RX ring ─receive()─▶ callback ─▶ fill ring
//!                                                         (or `refill`, if the ring had no room)
//! transmit side: free slot ─transmit()─▶ callback ─▶ TX ring ─kernel─▶ completion ring ─▶ free slot
//! ```
//!
//! The two sides never exchange frames. The receive side owns as many
//! frames as the fill ring has slots, so a frame taken off the RX ring
//! always has a fill-ring slot to go back to. The transmit side's frames
//! are grouped in slots ([`TxSlots`]) that each hold the largest frame; with
//! multi-buffer a slot is several neighbouring UMEM frames, and a received
//! frame may come in several parts ([`Chain`]).

use std::io;
use std::os::fd::{AsFd, AsRawFd, OwnedFd, RawFd};
use std::time::Duration;

use fairway_stack::ETHERNET_HEADER_LEN;

use super::chain::{Chain, Step};
use super::ring::{Consumer, Desc, Producer};
use super::socket::{Socket, TX_METADATA_LEN};
use super::stats::{AfXdpStats, KernelXdpStats};
use super::sys::{self, Kick, Mapping};
use super::tx_slots::{Cut, TxSlots};

/// Frames moved per ring operation: the size of the scratch descriptor
/// arrays. Budgets above it are served in several rounds.
const BATCH: usize = 64;

/// The UMEM's memory: received frames are read and transmit slots written
/// where they lie.
struct UmemArea {
    mapping: Mapping,
}

impl UmemArea {
    /// The `len` bytes at UMEM offset `offset`, to read.
    ///
    /// # Safety
    ///
    /// The range must be a received frame we hold (taken off the RX ring,
    /// not yet given back to the fill ring) for as long as the slice lives.
    unsafe fn slice(&self, offset: u64, len: usize) -> &[u8] {
        let offset = self.check(offset, len);
        // SAFETY: inside the UMEM mapping (checked), which lives as long as
        // the `Rings`; the kernel does not write the range meanwhile (this
        // function's contract).
        unsafe { std::slice::from_raw_parts(self.mapping.base().as_ptr().add(offset), len) }
    }

    /// The `len` bytes at UMEM offset `offset`, to write.
    ///
    /// # Safety
    ///
    /// The range must be a transmit slot (or part of one) that we hold: on
    /// no ring, and not lent out elsewhere, for as long as the slice lives.
    unsafe fn slice_mut(&mut self, offset: u64, len: usize) -> &mut [u8] {
        let offset = self.check(offset, len);
        // SAFETY: inside the UMEM mapping (checked), which lives as long as
        // the `Rings`; nothing else touches the range meanwhile (this
        // function's contract).
        unsafe { std::slice::from_raw_parts_mut(self.mapping.base().as_ptr().add(offset), len) }
    }

    fn check(&self, offset: u64, len: usize) -> usize {
        let (offset, size) = (offset as usize, self.mapping.len());
        assert!(offset <= size && len <= size - offset, "{offset} + {len} outside a {size}-byte UMEM");
        offset
    }
}

/// The socket's rings and the UMEM they index, with the bookkeeping of
/// which frame is where.
pub(super) struct Rings {
    fill: Producer<u64>,
    completion: Consumer<u64>,
    rx: Consumer<Desc>,
    tx_ring: Producer<Desc>,
    /// Closed after the rings are unmapped and before the UMEM is.
    fd: OwnedFd,
    area: UmemArea,
    /// Bytes per UMEM frame (a power of two).
    frame_size: usize,
    /// Bytes of UMEM.
    umem_len: usize,
    /// The length of every transmit buffer lent out.
    max_frame_len: usize,
    need_wakeup: bool,
    zero_copy: bool,
    /// Whether the UMEM is unaligned (see [`Shape::unaligned`]).
    unaligned: bool,
    kernel_busy_poll: bool,
    /// Frames the kernel's copy-mode transmit path sends per wake-up before
    /// it answers `EAGAIN`.
    kernel_tx_batch: usize,
    /// Whether TCP frames can go out with a checksum request in their
    /// transmit metadata (their slots keep room for it).
    checksum_requests: bool,
    /// Whether they do: the device was asked to finish checksums.
    tx_checksum_offload: bool,
    /// Scratch for descriptors taken off the RX ring.
    rx_batch: Vec<Desc>,
    /// Scratch for addresses taken off the completion ring.
    completed: Vec<u64>,
    /// Scratch for the frames of `rx_batch` going back to the fill ring.
    returned: Vec<u64>,
    /// Receive frames waiting for fill-ring room; its capacity is every
    /// receive frame.
    refill: Vec<u64>,
    /// A received frame in several parts, being put together.
    chain: Chain,
    /// The transmit slots: which are free, which the kernel still holds.
    slots: TxSlots,
    stats: AfXdpStats,
}

/// Whether `desc` lies inside one frame of a UMEM of `umem_len` bytes cut
/// in `frame_size`-byte frames.
fn describes_frame(desc: &Desc, frame_size: usize, umem_len: usize) -> bool {
    let addr = desc.addr as usize;
    let frame_end = (addr & !(frame_size - 1)) + frame_size;
    addr < umem_len && desc.len as usize <= frame_end - addr
}

/// Fills `meta` (the [`TX_METADATA_LEN`] bytes before a transmit frame) with
/// an `xsk_tx_metadata` that asks the kernel to finish the checksum whose
/// sum starts `start` bytes into the frame and goes `offset` bytes after
/// that.
fn write_checksum_request(meta: &mut [u8], start: u16, offset: u16) {
    meta.fill(0);
    meta[..8].copy_from_slice(&u64::from(libc::XDP_TXMD_FLAGS_CHECKSUM).to_ne_bytes());
    meta[8..10].copy_from_slice(&start.to_ne_bytes());
    meta[10..12].copy_from_slice(&offset.to_ne_bytes());
}

/// A received descriptor of an unaligned UMEM with its address made plain:
/// the kernel puts the data's offset from the buffer it filled in the top
/// 16 bits (`XSK_UNALIGNED_BUF_OFFSET_SHIFT`).
fn unaligned_to_plain(desc: Desc) -> Desc {
    let base = desc.addr & libc::XSK_UNALIGNED_BUF_ADDR_MASK;
    let offset = desc.addr >> libc::XSK_UNALIGNED_BUF_OFFSET_SHIFT;
    Desc { addr: base.wrapping_add(offset), ..desc }
}

/// The UMEM frame a descriptor's address lies in: what goes back on the
/// fill ring.
fn frame_of(addr: u64, frame_size: usize) -> u64 {
    addr & !(frame_size as u64 - 1)
}

/// The sizes and modes [`Rings::new`] needs besides the queues.
pub(super) struct Shape {
    pub(super) frame_size: usize,
    pub(super) frame_count: usize,
    /// Of those frames, how many serve the receive side.
    pub(super) rx_frames: usize,
    pub(super) max_frame_len: usize,
    /// Whether the socket is bound with `XDP_USE_SG`: a frame may span
    /// several UMEM frames.
    pub(super) multi_buffer: bool,
    pub(super) need_wakeup: bool,
    pub(super) zero_copy: bool,
    /// Whether the socket busy-polls the driver (`SO_PREFER_BUSY_POLL` is
    /// set): an empty receive then drives the driver's receive processing.
    pub(super) kernel_busy_poll: bool,
    /// Frames one wake-up of the kernel's copy-mode transmit path sends.
    pub(super) kernel_tx_batch: u32,
    /// Whether transmit slots keep room for metadata before each frame, so
    /// that TCP frames can go out with a checksum request.
    pub(super) checksum_requests: bool,
    /// Whether the UMEM is unaligned: received addresses carry their
    /// data's offset in their top bits, and a frame is cut into descriptors
    /// every UMEM frame's worth less the metadata room.
    pub(super) unaligned: bool,
}

impl Shape {
    /// Bytes before a transmit frame's data in its slot: room for the
    /// transmit metadata.
    pub(super) fn tx_headroom(&self) -> usize {
        if self.checksum_requests { TX_METADATA_LEN as usize } else { 0 }
    }

    /// How a frame longer than one descriptor is cut.
    pub(super) fn cut(&self) -> Cut {
        if self.unaligned { Cut::Every((self.frame_size - self.tx_headroom()) as u64) } else { Cut::AtFrames }
    }

    /// UMEM frames a transmit slot spans: enough for the largest frame.
    pub(super) fn frames_per_slot(&self) -> u32 {
        if self.multi_buffer {
            (self.tx_headroom() + self.max_frame_len).div_ceil(self.frame_size).max(1) as u32
        } else {
            1
        }
    }
}

impl Rings {
    /// Takes over a freshly created socket: hands its first
    /// `shape.rx_frames` frames to the fill ring and groups the rest into
    /// transmit slots. Every buffer it will ever need is allocated here.
    pub(super) fn new(socket: Socket, shape: Shape) -> Rings {
        let Socket { fill, completion, rx, tx, fd, umem } = socket;
        let frame_count = shape.frame_count;
        let rx_frames = shape.rx_frames.min(frame_count);
        let umem_len = frame_count * shape.frame_size;
        let slots = TxSlots::new(
            rx_frames,
            frame_count - rx_frames,
            shape.frame_size,
            shape.frames_per_slot(),
            (shape.tx_headroom(), shape.cut()),
        );
        let mut rings = Rings {
            fill,
            completion,
            rx,
            tx_ring: tx,
            fd,
            area: UmemArea { mapping: umem },
            frame_size: shape.frame_size,
            umem_len,
            max_frame_len: shape.max_frame_len,
            need_wakeup: shape.need_wakeup,
            zero_copy: shape.zero_copy,
            unaligned: shape.unaligned,
            kernel_busy_poll: shape.kernel_busy_poll,
            kernel_tx_batch: (shape.kernel_tx_batch as usize).max(1),
            checksum_requests: shape.checksum_requests,
            tx_checksum_offload: false,
            rx_batch: vec![Desc { addr: 0, len: 0, options: 0 }; BATCH],
            completed: vec![0; BATCH],
            returned: vec![0; BATCH],
            refill: Vec::with_capacity(rx_frames),
            chain: Chain::new(shape.max_frame_len),
            slots,
            stats: AfXdpStats::default(),
        };
        // The receive side's frames, in order, to the fill ring (it has a
        // slot for each: `AfXdpConfig::check` sees to that).
        rings.refill.extend((0..rx_frames).map(|i| (i * shape.frame_size) as u64));
        rings.flush_refill();
        rings.wake_fill_if_asked();
        rings
    }

    /// From now on, TCP frames go out asking the kernel to finish their
    /// checksum, if their slots have room for the request; returns whether.
    pub(super) fn offload_tx_checksums(&mut self) -> bool {
        self.tx_checksum_offload = self.checksum_requests;
        self.tx_checksum_offload
    }

    pub(super) fn fd(&self) -> std::os::fd::BorrowedFd<'_> {
        self.fd.as_fd()
    }

    fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    fn wake_fill_if_asked(&mut self) {
        if self.need_wakeup && self.fill.needs_wakeup() {
            self.stats.rx_wakeups += 1;
            sys::wake_rx(self.raw_fd());
        }
    }

    /// Gives the frames in `refill` back to the fill ring if it has room.
    fn flush_refill(&mut self) {
        if self.refill.is_empty() {
            return;
        }
        // `refill` holds receive frames of this UMEM that came off the RX
        // ring (or were never handed out) and are in no ring now.
        if self.fill.produce(&self.refill) > 0 {
            self.refill.clear();
        }
    }

    pub(super) fn receive<F: FnMut(&[u8])>(&mut self, budget: usize, mut on_frame: F) -> usize {
        if budget == 0 {
            return 0;
        }
        self.flush_refill();
        let mut handed = 0;
        while handed < budget {
            let want = (budget - handed).min(BATCH);
            let taken = self.rx.consume(&mut self.rx_batch[..want]);
            if taken == 0 {
                break;
            }
            let mut kept = 0;
            for i in 0..taken {
                let desc = self.rx_batch[i];
                let desc = if self.unaligned { unaligned_to_plain(desc) } else { desc };
                let ours = (desc.addr as usize) < self.umem_len;
                if ours {
                    // Any frame of ours goes back to the fill ring, used or not.
                    self.returned[kept] = frame_of(desc.addr, self.frame_size);
                    kept += 1;
                }
                let part = if ours && describes_frame(&desc, self.frame_size, self.umem_len) {
                    // SAFETY: the kernel handed this frame over on the RX
                    // ring and we give it back to the fill ring only below,
                    // after the callback's borrow has ended, so nothing
                    // writes it meanwhile; `describes_frame` checked it lies
                    // in the UMEM.
                    Some(unsafe { self.area.slice(desc.addr, desc.len as usize) })
                } else {
                    // Not ours, or not inside one frame: not expected from a
                    // correct kernel.
                    self.stats.rx_invalid_descs += 1;
                    None
                };
                let more = desc.options & libc::XDP_PKT_CONTD != 0;
                let frame = match self.chain.push(part, more) {
                    Step::Whole => part,
                    Step::Assembled => {
                        self.stats.rx_chained += 1;
                        Some(self.chain.frame())
                    }
                    Step::Malformed => {
                        self.stats.rx_malformed_chains += 1;
                        None
                    }
                    Step::Pending | Step::Invalid => None,
                };
                if let Some(frame) = frame {
                    self.stats.rx_frames += 1;
                    self.stats.rx_bytes += frame.len() as u64;
                    on_frame(frame);
                    handed += 1;
                }
            }
            // These frames came off this socket's RX ring, belong to this
            // UMEM, and no borrow of them is left.
            let given = self.fill.produce(&self.returned[..kept]);
            if given == 0 && kept > 0 {
                self.refill.extend_from_slice(&self.returned[..kept]);
            }
            if taken < want {
                break;
            }
        }
        if handed == 0 {
            if self.kernel_busy_poll {
                // One round of the driver's receive processing on this
                // thread (the socket prefers busy polling); what it brings
                // is on the RX ring for the next call.
                self.stats.rx_busy_polls += 1;
                sys::wake_rx(self.raw_fd());
            } else {
                self.wake_fill_if_asked();
            }
        }
        handed
    }

    /// Takes back the transmit slots the kernel has finished sending.
    fn reap_completions(&mut self) {
        loop {
            let want = self.slots.in_flight().min(BATCH);
            if want == 0 {
                return;
            }
            let done = self.completion.consume(&mut self.completed[..want]);
            for &addr in &self.completed[..done] {
                if !self.slots.complete(addr) {
                    self.stats.tx_foreign_completions += 1;
                }
            }
            if done < want {
                return;
            }
        }
    }

    fn tx_needs_kick(&self) -> bool {
        if self.need_wakeup {
            self.tx_ring.needs_wakeup()
        } else {
            // Without need_wakeup a zero-copy driver polls the ring by itself;
            // copy mode sends only from a syscall.
            !self.zero_copy
        }
    }

    /// Wakes the kernel to send what is on the TX ring. Copy mode sends a
    /// bounded batch per call (`kernel_tx_batch`: the whole ring where the
    /// kernel lets us say so) and says `EAGAIN` while more remains, so this
    /// kicks until the ring is drained, a bounded number of times.
    fn kick_tx(&mut self, queued: usize) {
        if !self.tx_needs_kick() {
            return;
        }
        for _ in 0..queued / self.kernel_tx_batch + 2 {
            self.stats.tx_wakeups += 1;
            match sys::kick_tx(self.raw_fd()) {
                Kick::Done | Kick::Stop => return,
                Kick::Again => self.reap_completions(),
            }
        }
    }

    pub(super) fn transmit<F: FnMut(&mut [u8]) -> Option<usize>>(&mut self, budget: usize, mut fill: F) -> usize {
        if budget == 0 {
            return 0;
        }
        self.reap_completions();
        let max = self.max_frame_len;
        let per_frame = self.slots.frames_per_slot();
        let mut accepted = 0;
        while accepted < budget {
            if self.tx_ring.free(per_frame) < per_frame {
                self.stats.tx_ring_full += 1;
                break;
            }
            let Some(slot) = self.slots.take().or_else(|| {
                self.reap_completions();
                self.slots.take()
            }) else {
                self.stats.tx_frames_exhausted += 1;
                break;
            };
            let data = self.slots.addr(slot);
            let (written, checksum) = {
                // SAFETY: the slot came off the free list, so none of its
                // frames is on a ring or lent out: nothing reads or writes
                // these bytes until its descriptors go on the TX ring below.
                // A slot spans at least `max` bytes after its headroom.
                let buf = unsafe { self.area.slice_mut(data, max) };
                match fill(buf) {
                    None => (None, None),
                    Some(len) => {
                        debug_assert!(
                            len <= max,
                            "Device::transmit: fill returned {len} bytes for a {max}-byte buffer"
                        );
                        let len = len.min(max);
                        let partial =
                            if self.tx_checksum_offload { fairway_stack::partial_checksum(&buf[..len]) } else { None };
                        (Some(len), partial)
                    }
                }
            };
            match written {
                None => {
                    self.slots.put_back(slot);
                    break;
                }
                Some(len) if len < ETHERNET_HEADER_LEN => {
                    self.slots.put_back(slot);
                    self.stats.tx_runts += 1;
                    accepted += 1;
                }
                Some(len) => {
                    let mut first_options = 0;
                    if let Some((start, offset)) = checksum {
                        let at = data - u64::from(TX_METADATA_LEN);
                        // SAFETY: the metadata room before the frame is part
                        // of the same slot, held as above.
                        let meta = unsafe { self.area.slice_mut(at, TX_METADATA_LEN as usize) };
                        write_checksum_request(meta, start, offset);
                        first_options = libc::XDP_TX_METADATA;
                        self.stats.tx_checksum_offloaded += 1;
                    }
                    let parts = self.slots.send(slot, len);
                    if parts.len() > 1 {
                        self.stats.tx_chained += 1;
                    }
                    for (addr, len, options) in parts {
                        self.tx_ring.write(Desc { addr, len, options: options | first_options });
                        first_options = 0;
                    }
                    self.stats.tx_frames += 1;
                    self.stats.tx_bytes += len as u64;
                    accepted += 1;
                    if accepted % BATCH == 0 {
                        // A zero-copy driver may start on these meanwhile.
                        self.tx_ring.publish();
                    }
                }
            }
        }
        self.tx_ring.publish();
        // Also what an earlier kick left on the ring (ENOBUFS, or more than
        // the kick loop's bound).
        let queued = self.tx_ring.queued() as usize;
        if queued > 0 {
            self.kick_tx(queued);
        }
        accepted
    }

    pub(super) fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        if !self.before_sleep() {
            return Ok(());
        }
        let timeout_ms = match timeout {
            None => -1,
            // Rounded up, so that a sub-millisecond wait does not spin.
            Some(t) => i32::try_from(t.as_micros().div_ceil(1000)).unwrap_or(i32::MAX),
        };
        // poll(2) on the socket: returns on received frames, and in
        // zero-copy mode wakes a driver that asked for it on the fill ring.
        sys::poll_readable(self.raw_fd(), timeout_ms)
    }

    /// What [`wait`](Self::wait) does before its poll: frames left on the
    /// TX ring go to the kernel, and a zero-copy driver that asked for a
    /// fill-ring wake-up gets it (the poll would give it one). Returns
    /// whether the socket may be slept on (no frame received yet).
    pub(super) fn before_sleep(&mut self) -> bool {
        let queued = self.tx_ring.queued() as usize;
        if queued > 0 {
            self.kick_tx(queued);
        }
        self.rx.available(1) == 0
    }

    /// Before a sleep in a reactor of the caller's: as
    /// [`before_sleep`](Self::before_sleep), and since no poll of ours
    /// follows, the fill ring's wake-up is asked for here.
    pub(super) fn before_foreign_sleep(&mut self) -> bool {
        let may_sleep = self.before_sleep();
        if may_sleep {
            self.wake_fill_if_asked();
        }
        may_sleep
    }

    /// Frames one wake-up of the kernel's copy-mode transmit path sends.
    pub(super) fn kernel_tx_batch(&self) -> u32 {
        self.kernel_tx_batch as u32
    }

    pub(super) fn stats(&self) -> AfXdpStats {
        let kernel = sys::statistics(self.raw_fd()).ok().map(|k| KernelXdpStats {
            rx_dropped: k.rx_dropped,
            rx_ring_full: k.rx_ring_full,
            rx_fill_ring_empty: k.rx_fill_ring_empty_descs,
            rx_invalid_descs: k.rx_invalid_descs,
            tx_invalid_descs: k.tx_invalid_descs,
            tx_ring_empty: k.tx_ring_empty_descs,
        });
        AfXdpStats { kernel, ..self.stats }
    }
}
