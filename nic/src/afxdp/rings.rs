//! [`Rings`]: the data path of one AF_XDP socket, over its UMEM and its
//! four rings.
//!
//! Every UMEM frame is in exactly one place at a time, which is what makes
//! the `unsafe` ring calls sound:
//!
//! ```text
//! receive side:  fill ring ─kernel─▶ RX ring ─receive()─▶ callback ─▶ fill ring
//!                                                         (or `refill`, if the ring had no room)
//! transmit side: `tx_free` ─transmit()─▶ callback ─▶ TX ring ─kernel─▶ completion ring ─▶ `tx_free`
//! ```
//!
//! The two sides never exchange frames. The receive side owns as many
//! frames as the fill ring has slots, so a frame taken off the RX ring
//! always has a fill-ring slot to go back to.

use std::io;
use std::os::fd::RawFd;
use std::time::Duration;

use xsk_rs::{CompQueue, FillQueue, FrameDesc, RxQueue, TxQueue, Umem};

use super::stats::{AfXdpStats, KernelXdpStats};
use super::sys::{self, Kick};

/// Frames moved per ring operation: the size of the scratch descriptor
/// arrays. Budgets above it are served in several rounds.
const BATCH: usize = 64;

/// Frames the kernel's copy-mode transmit path sends per `sendto` before it
/// answers `EAGAIN` (`TX_BATCH_SIZE` in `net/xdp/xsk.c`).
const KERNEL_TX_BATCH: usize = 32;

/// An Ethernet header: destination, source, EtherType.
const ETHERNET_HEADER_LEN: usize = 14;

/// The socket's rings and the UMEM they index, with the bookkeeping of
/// which frame is where.
pub(super) struct Rings {
    umem: Umem,
    fill: FillQueue,
    completion: CompQueue,
    tx: TxQueue,
    rx: RxQueue,
    fd: RawFd,
    /// Bytes per UMEM frame (a power of two).
    frame_size: usize,
    /// Bytes of UMEM.
    umem_len: usize,
    /// The length of every transmit buffer lent out.
    max_frame_len: usize,
    tx_ring_size: u32,
    need_wakeup: bool,
    zero_copy: bool,
    /// Scratch for descriptors taken off the RX ring.
    rx_batch: Vec<FrameDesc>,
    /// Scratch for descriptors taken off the completion ring.
    completed: Vec<FrameDesc>,
    /// Scratch for descriptors about to go on the TX ring.
    tx_batch: Vec<FrameDesc>,
    /// Transmit frames that are free; its capacity is every transmit frame.
    tx_free: Vec<FrameDesc>,
    /// Receive frames waiting for fill-ring room; its capacity is every
    /// receive frame.
    refill: Vec<FrameDesc>,
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
    pub(super) tx_ring_size: u32,
    pub(super) need_wakeup: bool,
    pub(super) zero_copy: bool,
}

impl Rings {
    /// Takes over a freshly created socket: hands its first
    /// `shape.rx_frames` frames to the fill ring and keeps the rest as free
    /// transmit frames. Every buffer it will ever need is allocated here.
    pub(super) fn new(
        (umem, frames): (Umem, Vec<FrameDesc>),
        (tx, rx, fill, completion): (TxQueue, RxQueue, FillQueue, CompQueue),
        fd: RawFd,
        shape: Shape,
    ) -> Rings {
        let rx_frames = shape.rx_frames.min(frames.len());
        let mut rings = Rings {
            umem,
            fill,
            completion,
            tx,
            rx,
            fd,
            frame_size: shape.frame_size,
            umem_len: shape.frame_count * shape.frame_size,
            max_frame_len: shape.max_frame_len,
            tx_ring_size: shape.tx_ring_size,
            need_wakeup: shape.need_wakeup,
            zero_copy: shape.zero_copy,
            rx_batch: vec![FrameDesc::default(); BATCH],
            completed: vec![FrameDesc::default(); BATCH],
            tx_batch: Vec::with_capacity(BATCH),
            tx_free: Vec::with_capacity(frames.len() - rx_frames),
            refill: Vec::with_capacity(rx_frames),
            stats: AfXdpStats::default(),
        };
        let (rx, tx) = frames.split_at(rx_frames);
        rings.tx_free.extend_from_slice(tx);
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
                if desc.addr() >= self.umem_len {
                    // Not ours: it must not go back to the fill ring.
                    self.stats.rx_invalid_descs += 1;
                    continue;
                }
                self.rx_batch[kept] = desc;
                kept += 1;
                if !describes_frame(&desc, self.frame_size, self.umem_len) {
                    self.stats.rx_invalid_descs += 1;
                    continue;
                }
                // SAFETY: the kernel handed this frame over on the RX ring
                // and we give it back to the fill ring only below, after
                // the callback's borrow has ended, so nothing writes it
                // meanwhile; `describes_frame` checked it lies in the UMEM.
                let data = unsafe { self.umem.data(&desc) };
                let frame = data.contents();
                self.stats.rx_frames += 1;
                self.stats.rx_bytes += frame.len() as u64;
                on_frame(frame);
                handed += 1;
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
            self.wake_fill_if_asked();
        }
        handed
    }

    /// Takes back the frames the kernel has finished sending.
    fn reap_completions(&mut self) {
        loop {
            let want = (self.tx_free.capacity() - self.tx_free.len()).min(BATCH);
            if want == 0 {
                return;
            }
            // SAFETY: the completion ring only carries frames of this UMEM
            // that we put on the TX ring; consume overwrites the scratch.
            let done = unsafe { self.completion.consume(&mut self.completed[..want]) };
            self.tx_free.extend_from_slice(&self.completed[..done]);
            if done < want {
                return;
            }
        }
    }

    fn tx_needs_kick(&self) -> bool {
        if self.need_wakeup {
            self.tx.needs_wakeup()
        } else {
            // Without need_wakeup a zero-copy driver polls the ring by itself;
            // copy mode sends only from a syscall.
            !self.zero_copy
        }
    }

    /// Wakes the kernel to send what is on the TX ring. Copy mode sends a
    /// bounded batch per call and says `EAGAIN` while more remains, so this
    /// kicks until the ring is drained, a bounded number of times.
    fn kick_tx(&mut self, queued: usize) {
        if !self.tx_needs_kick() {
            return;
        }
        for _ in 0..queued / KERNEL_TX_BATCH + 2 {
            self.stats.tx_wakeups += 1;
            match sys::kick_tx(self.fd) {
                Kick::Done | Kick::Stop => return,
                Kick::Again => self.reap_completions(),
            }
        }
    }

    /// Frames on the TX ring that the kernel has not taken yet.
    fn tx_queued(&mut self) -> usize {
        (self.tx_ring_size - self.tx.nb_free_exact()) as usize
    }

    pub(super) fn transmit<F: FnMut(&mut [u8]) -> Option<usize>>(&mut self, budget: usize, mut fill: F) -> usize {
        if budget == 0 {
            return 0;
        }
        self.reap_completions();
        let max = self.max_frame_len;
        let mut accepted = 0;
        let mut finished = false;
        while accepted < budget && !finished {
            let want = (budget - accepted).min(BATCH);
            let room = (self.tx.nb_free(want as u32) as usize).min(want);
            if room == 0 {
                self.stats.tx_ring_full += 1;
                break;
            }
            if self.tx_free.is_empty() {
                self.reap_completions();
                if self.tx_free.is_empty() {
                    self.stats.tx_frames_exhausted += 1;
                    break;
                }
            }
            let limit = room.min(self.tx_free.len());
            self.tx_batch.clear();
            let mut batch_bytes = 0;
            for _ in 0..limit {
                let Some(mut desc) = self.tx_free.pop() else { break };
                let written = {
                    // SAFETY: `desc` came off the free list, so it is in no
                    // ring: neither the kernel nor another borrow touches
                    // the frame until it goes on the TX ring below.
                    let mut data = unsafe { self.umem.data_mut(&mut desc) };
                    data.cursor().set_pos(max);
                    let written = fill(&mut data.contents_mut()[..max]).map(|len| {
                        debug_assert!(
                            len <= max,
                            "Device::transmit: fill returned {len} bytes for a {max}-byte buffer"
                        );
                        len.min(max)
                    });
                    data.cursor().set_pos(written.unwrap_or(0));
                    written
                };
                match written {
                    None => {
                        self.tx_free.push(desc);
                        finished = true;
                        break;
                    }
                    Some(len) if len < ETHERNET_HEADER_LEN => {
                        self.tx_free.push(desc);
                        self.stats.tx_runts += 1;
                        accepted += 1;
                    }
                    Some(len) => {
                        self.tx_batch.push(desc);
                        batch_bytes += len as u64;
                        accepted += 1;
                    }
                }
            }
            if self.tx_batch.is_empty() {
                continue;
            }
            // SAFETY: every frame in `tx_batch` belongs to this UMEM and came
            // off the free list, so it is in no ring; it stays out of the
            // free list until the completion ring returns it.
            let sent = unsafe { self.tx.produce(&self.tx_batch) };
            if sent == 0 {
                // Cannot happen (`room` was counted first); never lose the frames.
                self.tx_free.extend_from_slice(&self.tx_batch);
                self.stats.tx_ring_full += 1;
                break;
            }
            self.stats.tx_frames += sent as u64;
            self.stats.tx_bytes += batch_bytes;
        }
        // Also what an earlier kick left on the ring (ENOBUFS, or more than
        // the kick loop's bound).
        let queued = self.tx_queued();
        if queued > 0 {
            self.kick_tx(queued);
        }
        accepted
    }

    pub(super) fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let queued = self.tx_queued();
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
