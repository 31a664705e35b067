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
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::time::Duration;

use fairway_stack::ETHERNET_HEADER_LEN;
use xsk_rs::{CompQueue, FillQueue, FrameDesc, RxQueue, TxQueue, Umem};

use super::chain::{Chain, Step};
use super::stats::{AfXdpStats, KernelXdpStats};
use super::sys::{self, Kick};
use super::tx_ring::{Desc, TxRing};
use super::tx_slots::TxSlots;

/// Frames moved per ring operation: the size of the scratch descriptor
/// arrays. Budgets above it are served in several rounds.
const BATCH: usize = 64;

/// The UMEM's memory, for writing frames into transmit slots in place.
struct UmemArea {
    base: NonNull<u8>,
    len: usize,
}

// SAFETY: the area is memory of the UMEM the `Rings` owns; which parts of
// it may be written is decided by the slot bookkeeping that moves with it.
unsafe impl Send for UmemArea {}

impl UmemArea {
    /// Where `umem` starts, from its first frame: xsk-rs maps a UMEM as one
    /// anonymous mapping of `len` bytes and puts frame `i`'s data at
    /// `i × frame_size` plus the headroom, so the first frame's data less
    /// its offset is the mapping's start.
    fn of(umem: &Umem, first: FrameDesc, len: usize) -> UmemArea {
        let mut first = first;
        let offset = first.addr();
        // SAFETY: `first` is a frame of this UMEM that is in no ring yet (the
        // caller has not handed out any frame); the view is dropped at once.
        let data = unsafe { umem.data_mut(&mut first) }.contents_mut().as_mut_ptr();
        let base = NonNull::new(data.wrapping_sub(offset)).expect("a mapping does not start at address 0");
        UmemArea { base, len }
    }

    /// The `len` bytes at UMEM offset `offset`.
    ///
    /// # Safety
    ///
    /// The range must be a transmit slot (or part of one) that we hold: on
    /// no ring, and not lent out elsewhere, for as long as the slice lives.
    unsafe fn slice_mut(&mut self, offset: u64, len: usize) -> &mut [u8] {
        let offset = offset as usize;
        assert!(offset <= self.len && len <= self.len - offset, "{offset} + {len} outside a {}-byte UMEM", self.len);
        // SAFETY: inside the UMEM mapping (checked above), which lives as
        // long as the `Rings`; nothing else touches the range meanwhile
        // (this function's contract). The pointer is derived from the
        // mapping's own through the first frame's data (see `of`).
        unsafe { std::slice::from_raw_parts_mut(self.base.as_ptr().add(offset), len) }
    }
}

/// The socket's rings and the UMEM they index, with the bookkeeping of
/// which frame is where.
pub(super) struct Rings {
    umem: Umem,
    fill: FillQueue,
    completion: CompQueue,
    /// xsk-rs's handle on the TX ring: it holds the socket; `tx_ring`
    /// produces.
    _tx: TxQueue,
    tx_ring: TxRing,
    rx: RxQueue,
    fd: RawFd,
    /// Bytes per UMEM frame (a power of two).
    frame_size: usize,
    /// Bytes of UMEM.
    umem_len: usize,
    /// The length of every transmit buffer lent out.
    max_frame_len: usize,
    need_wakeup: bool,
    zero_copy: bool,
    kernel_busy_poll: bool,
    /// Frames the kernel's copy-mode transmit path sends per wake-up before
    /// it answers `EAGAIN`.
    kernel_tx_batch: usize,
    /// Scratch for descriptors taken off the RX ring.
    rx_batch: Vec<FrameDesc>,
    /// Scratch for descriptors taken off the completion ring.
    completed: Vec<FrameDesc>,
    /// Receive frames waiting for fill-ring room; its capacity is every
    /// receive frame.
    refill: Vec<FrameDesc>,
    /// A received frame in several parts, being put together.
    chain: Chain,
    /// The transmit slots: which are free, which the kernel still holds.
    slots: TxSlots,
    area: UmemArea,
    stats: AfXdpStats,
}

/// Whether `desc` lies inside one frame of a UMEM of `umem_len` bytes cut
/// in `frame_size`-byte frames.
fn describes_frame(desc: &FrameDesc, frame_size: usize, umem_len: usize) -> bool {
    let addr = desc.addr();
    let frame_end = (addr & !(frame_size - 1)) + frame_size;
    addr < umem_len && desc.lengths().data() <= frame_end - addr
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
}

impl Shape {
    /// UMEM frames a transmit slot spans: enough for the largest frame.
    pub(super) fn frames_per_slot(&self) -> u32 {
        if self.multi_buffer { self.max_frame_len.div_ceil(self.frame_size).max(1) as u32 } else { 1 }
    }
}

impl Rings {
    /// Takes over a freshly created socket: hands its first
    /// `shape.rx_frames` frames to the fill ring and groups the rest into
    /// transmit slots. Every buffer it will ever need is allocated here.
    pub(super) fn new(
        (umem, frames): (Umem, Vec<FrameDesc>),
        (tx, rx, fill, completion): (TxQueue, RxQueue, FillQueue, CompQueue),
        tx_ring: TxRing,
        fd: RawFd,
        shape: Shape,
    ) -> Rings {
        let rx_frames = shape.rx_frames.min(frames.len());
        let umem_len = shape.frame_count * shape.frame_size;
        let area = UmemArea::of(&umem, frames[0], umem_len);
        let slots = TxSlots::new(rx_frames, frames.len() - rx_frames, shape.frame_size, shape.frames_per_slot());
        let mut rings = Rings {
            umem,
            fill,
            completion,
            _tx: tx,
            tx_ring,
            rx,
            fd,
            frame_size: shape.frame_size,
            umem_len,
            max_frame_len: shape.max_frame_len,
            need_wakeup: shape.need_wakeup,
            zero_copy: shape.zero_copy,
            kernel_busy_poll: shape.kernel_busy_poll,
            kernel_tx_batch: (shape.kernel_tx_batch as usize).max(1),
            rx_batch: vec![FrameDesc::default(); BATCH],
            completed: vec![FrameDesc::default(); BATCH],
            refill: Vec::with_capacity(rx_frames),
            chain: Chain::new(shape.max_frame_len),
            slots,
            area,
            stats: AfXdpStats::default(),
        };
        let rx = &frames[..rx_frames];
        // SAFETY: these frames belong to this UMEM and are in no ring yet;
        // they leave our hands until the RX ring gives them back.
        let given = unsafe { rings.fill.produce(rx) };
        if given == 0 {
            rings.refill.extend_from_slice(rx);
        }
        rings.wake_fill_if_asked();
        rings
    }

    fn wake_fill_if_asked(&mut self) {
        if self.need_wakeup && self.fill.needs_wakeup() {
            self.stats.rx_wakeups += 1;
            sys::wake_rx(self.fd);
        }
    }

    /// Gives the frames in `refill` back to the fill ring if it has room.
    fn flush_refill(&mut self) {
        if self.refill.is_empty() {
            return;
        }
        // SAFETY: `refill` holds receive frames of this UMEM that came off
        // the RX ring and are in no ring now.
        let given = unsafe { self.fill.produce(&self.refill) };
        if given > 0 {
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
            // SAFETY: the RX ring only carries frames of this UMEM, which
            // is the one it was created with; consume overwrites the
            // scratch descriptors.
            let taken = unsafe { self.rx.consume(&mut self.rx_batch[..want]) };
            if taken == 0 {
                break;
            }
            let mut kept = 0;
            for i in 0..taken {
                let desc = self.rx_batch[i];
                let ours = desc.addr() < self.umem_len;
                if ours {
                    // Any frame of ours goes back to the fill ring, used or not.
                    self.rx_batch[kept] = desc;
                    kept += 1;
                }
                let part = if ours && describes_frame(&desc, self.frame_size, self.umem_len) {
                    // SAFETY: the kernel handed this frame over on the RX
                    // ring and we give it back to the fill ring only below,
                    // after the callback's borrow has ended, so nothing
                    // writes it meanwhile; `describes_frame` checked it lies
                    // in the UMEM.
                    Some(unsafe { self.umem.data(&desc) }.contents())
                } else {
                    // Not ours, or not inside one frame: not expected from a
                    // correct kernel.
                    self.stats.rx_invalid_descs += 1;
                    None
                };
                let more = desc.options() & libc::XDP_PKT_CONTD != 0;
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
            // SAFETY: these frames came off this socket's RX ring, belong
            // to this UMEM, and no borrow of them is left.
            let given = unsafe { self.fill.produce(&self.rx_batch[..kept]) };
            if given == 0 && kept > 0 {
                self.refill.extend_from_slice(&self.rx_batch[..kept]);
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
                sys::wake_rx(self.fd);
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
            // SAFETY: the completion ring only carries addresses of this
            // UMEM that we put on the TX ring; consume overwrites the scratch.
            let done = unsafe { self.completion.consume(&mut self.completed[..want]) };
            for desc in &self.completed[..done] {
                if !self.slots.complete(desc.addr() as u64) {
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
            match sys::kick_tx(self.fd) {
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
            let written = {
                // SAFETY: the slot came off the free list, so none of its
                // frames is on a ring or lent out: nothing reads or writes
                // these bytes until its descriptors go on the TX ring below.
                // A slot spans at least `max` bytes.
                let buf = unsafe { self.area.slice_mut(self.slots.addr(slot), max) };
                fill(buf).map(|len| {
                    debug_assert!(len <= max, "Device::transmit: fill returned {len} bytes for a {max}-byte buffer");
                    len.min(max)
                })
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
                    let parts = self.slots.send(slot, len);
                    if parts.len() > 1 {
                        self.stats.tx_chained += 1;
                    }
                    for (addr, len, options) in parts {
                        self.tx_ring.write(Desc { addr, len, options });
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
        let queued = self.tx_ring.queued() as usize;
        if queued > 0 {
            self.kick_tx(queued);
        }
        if self.rx.nb_avail(1) > 0 {
            return Ok(());
        }
        let timeout_ms = match timeout {
            None => -1,
            // Rounded up, so that a sub-millisecond wait does not spin.
            Some(t) => i32::try_from(t.as_micros().div_ceil(1000)).unwrap_or(i32::MAX),
        };
        // poll(2) on the socket: returns on received frames, and in
        // zero-copy mode wakes a driver that asked for it on the fill ring.
        // EINTR comes back as Ok(false).
        self.rx.poll(timeout_ms).map(drop)
    }

    /// Frames one wake-up of the kernel's copy-mode transmit path sends.
    pub(super) fn kernel_tx_batch(&self) -> u32 {
        self.kernel_tx_batch as u32
    }

    pub(super) fn stats(&self) -> AfXdpStats {
        let kernel = self.rx.fd().xdp_statistics().ok().map(|k| KernelXdpStats {
            rx_dropped: k.rx_dropped(),
            rx_ring_full: k.rx_ring_full(),
            rx_fill_ring_empty: k.rx_fill_ring_empty_descs(),
            rx_invalid_descs: k.rx_invalid_descs(),
            tx_invalid_descs: k.tx_invalid_descs(),
            tx_ring_empty: k.tx_ring_empty_descs(),
        });
        AfXdpStats { kernel, ..self.stats }
    }
}
