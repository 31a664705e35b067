//! [`TxRing`]: the producer side of the socket's TX ring, driven here
//! rather than through xsk-rs.
//!
//! xsk-rs can only put descriptors on the ring that point where it placed
//! each frame's data, after the XDP headroom. A frame that spans several
//! UMEM frames (multi-buffer) is written in one go across neighbouring
//! frames, and its continuation descriptors must point at a frame's first
//! byte, which xsk-rs cannot express. So the socket maps the TX ring a
//! second time and produces on it itself; xsk-rs's own handle on the ring is
//! kept (it owns the socket) but never produces.
//!
//! The ring is the kernel's single-producer, single-consumer ring: we write
//! descriptors at `producer`, publish them with a release store of the new
//! producer index, and learn how far the kernel has read from an acquire
//! load of `consumer`. The indices run freely and wrap; a slot is
//! `index & mask`.
//!
//! The logic works on any memory laid out like the mapping, which is how
//! the tests below drive it without a kernel.

use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use super::sys;

/// One descriptor as the kernel reads it (`struct xdp_desc`).
pub(super) type Desc = libc::xdp_desc;

/// The producer side of an AF_XDP TX ring.
pub(super) struct TxRing {
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    descs: NonNull<Desc>,
    /// Ring entries (a power of two) and that less one.
    size: u32,
    mask: u32,
    /// The next index we write: descriptors up to here are written, those
    /// from `published` on not yet visible to the kernel.
    next: u32,
    /// The producer index the kernel has seen.
    published: u32,
    /// The consumer index as last read.
    consumed: u32,
    /// The mapping to remove on drop (`None` when the memory is not ours).
    mapping: Option<sys::Mapping>,
}

// SAFETY: a `TxRing` is the only producer of its ring and owns its mapping;
// moving it to another thread moves that sole access with it. The kernel
// side is synchronised through the atomics, whatever thread we are on.
unsafe impl Send for TxRing {}

impl TxRing {
    /// Maps the TX ring of the bound AF_XDP socket `fd`, which has `size`
    /// entries, and takes over producing on it from where the kernel's
    /// indices stand.
    pub(super) fn map(fd: RawFd, size: u32) -> io::Result<TxRing> {
        let (mapping, offsets) = sys::map_tx_ring(fd, size, size_of::<Desc>())?;
        let (producer, consumer) = (mapping.at(offsets.producer).cast(), mapping.at(offsets.consumer).cast());
        let (flags, descs) = (mapping.at(offsets.flags).cast(), mapping.at(offsets.desc).cast());
        // SAFETY: the offsets are the kernel's own for this ring, inside the
        // mapping, and aligned as the kernel lays the ring out (indices and
        // flags on their own cache lines, descriptors 8-byte aligned); the
        // mapping lives as long as the `TxRing`, in `mapping`, and only the
        // kernel (the consumer) writes the ring besides us.
        Ok(unsafe { TxRing::from_raw(producer, consumer, flags, descs, size, Some(mapping)) })
    }

    /// A ring over memory laid out as the kernel lays out a TX ring.
    ///
    /// # Safety
    ///
    /// Each pointer must be valid and aligned for its type (`descs` for
    /// `size` descriptors) for as long as the ring lives, and nothing but
    /// the ring's consumer may write them meanwhile. `size` is a power of
    /// two.
    unsafe fn from_raw(
        producer: NonNull<AtomicU32>,
        consumer: NonNull<AtomicU32>,
        flags: NonNull<AtomicU32>,
        descs: NonNull<Desc>,
        size: u32,
        mapping: Option<sys::Mapping>,
    ) -> TxRing {
        debug_assert!(size.is_power_of_two());
        // SAFETY: valid and aligned, per this function's contract.
        let (next, consumed) =
            unsafe { (producer.as_ref().load(Ordering::Relaxed), consumer.as_ref().load(Ordering::Acquire)) };
        TxRing { producer, consumer, flags, descs, size, mask: size - 1, next, published: next, consumed, mapping }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: valid for the ring's life (`from_raw`'s contract).
        unsafe { self.consumer.as_ref() }
    }

    /// Slots free for writing, re-reading the kernel's progress only when
    /// fewer than `want` seem free.
    pub(super) fn free(&mut self, want: u32) -> u32 {
        let free = self.size - self.next.wrapping_sub(self.consumed);
        if free >= want {
            return free;
        }
        self.consumed = self.consumer().load(Ordering::Acquire);
        self.size - self.next.wrapping_sub(self.consumed)
    }

    /// Writes one descriptor into the next slot, for [`TxRing::publish`] to
    /// hand over. The caller has checked [`TxRing::free`].
    pub(super) fn write(&mut self, desc: Desc) {
        debug_assert!(self.next.wrapping_sub(self.consumed) < self.size, "TxRing::write with no free slot");
        let slot = (self.next & self.mask) as usize;
        // SAFETY: `slot` is below `size`, so inside the descriptor array;
        // the slot is between the consumer and the producer's end, so the
        // kernel does not read it until `publish`.
        unsafe { self.descs.add(slot).write(desc) };
        self.next = self.next.wrapping_add(1);
    }

    /// Hands every written descriptor to the kernel. Returns how many.
    pub(super) fn publish(&mut self) -> u32 {
        let count = self.next.wrapping_sub(self.published);
        if count > 0 {
            // SAFETY: valid for the ring's life; the release store makes the
            // descriptors written before it visible to the kernel first.
            unsafe { self.producer.as_ref() }.store(self.next, Ordering::Release);
            self.published = self.next;
        }
        count
    }

    /// Descriptors published that the kernel has not taken yet.
    pub(super) fn queued(&mut self) -> u32 {
        self.consumed = self.consumer().load(Ordering::Acquire);
        self.published.wrapping_sub(self.consumed)
    }

    /// Whether the kernel asked for a `sendto` to go on
    /// (`XDP_RING_NEED_WAKEUP`, with the need_wakeup bind flag).
    pub(super) fn needs_wakeup(&self) -> bool {
        // SAFETY: valid for the ring's life.
        unsafe { self.flags.as_ref() }.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }
}

impl Drop for TxRing {
    fn drop(&mut self) {
        // Unmapped by `Mapping`'s own drop; said here so the order is plain:
        // nothing touches the ring after this.
        drop(self.mapping.take());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory laid out like a mapped ring, with the kernel's side: a
    /// consumer that takes what was published.
    struct FakeRing {
        producer: Box<AtomicU32>,
        consumer: Box<AtomicU32>,
        flags: Box<AtomicU32>,
        descs: Vec<Desc>,
    }

    impl FakeRing {
        fn new(size: u32, start: u32) -> FakeRing {
            let empty = Desc { addr: 0, len: 0, options: 0 };
            FakeRing {
                producer: Box::new(AtomicU32::new(start)),
                consumer: Box::new(AtomicU32::new(start)),
                flags: Box::new(AtomicU32::new(0)),
                descs: vec![empty; size as usize],
            }
        }

        fn ring(&mut self) -> TxRing {
            let size = self.descs.len() as u32;
            // SAFETY: the boxes and the vector outlive the ring in every test,
            // and only the test's consumer writes them meanwhile.
            unsafe {
                TxRing::from_raw(
                    NonNull::from(&*self.producer),
                    NonNull::from(&*self.consumer),
                    NonNull::from(&*self.flags),
                    NonNull::new(self.descs.as_mut_ptr()).expect("a vector's pointer"),
                    size,
                    None,
                )
            }
        }

        /// The kernel's side: takes up to `n` published descriptors.
        fn consume(&self, n: u32) -> Vec<(u64, u32, u32)> {
            let (producer, consumer) = (self.producer.load(Ordering::Acquire), self.consumer.load(Ordering::Relaxed));
            let take = producer.wrapping_sub(consumer).min(n);
            let mask = self.descs.len() as u32 - 1;
            let taken = (0..take)
                .map(|i| {
                    let d = self.descs[(consumer.wrapping_add(i) & mask) as usize];
                    (d.addr, d.len, d.options)
                })
                .collect();
            self.consumer.store(consumer.wrapping_add(take), Ordering::Release);
            taken
        }
    }

    fn desc(addr: u64, len: u32, options: u32) -> Desc {
        Desc { addr, len, options }
    }

    #[test]
    fn written_descriptors_reach_the_consumer_only_when_published() {
        let mut fake = FakeRing::new(8, 0);
        let mut ring = fake.ring();
        assert_eq!(ring.free(1), 8);
        ring.write(desc(0, 100, libc::XDP_PKT_CONTD));
        ring.write(desc(4096, 50, 0));
        assert!(fake.consume(8).is_empty(), "nothing is visible before publish");
        assert_eq!(ring.publish(), 2);
        assert_eq!(ring.publish(), 0, "publishing again hands over nothing new");
        assert_eq!(ring.queued(), 2);
        assert_eq!(fake.consume(8), vec![(0, 100, libc::XDP_PKT_CONTD), (4096, 50, 0)]);
        assert_eq!(ring.queued(), 0);
    }

    #[test]
    fn a_full_ring_frees_slots_as_the_consumer_takes_them() {
        let mut fake = FakeRing::new(4, 0);
        let mut ring = fake.ring();
        for i in 0..4 {
            ring.write(desc(i * 2048, 60, 0));
        }
        ring.publish();
        assert_eq!(ring.free(1), 0, "four of four slots in use");
        fake.consume(3);
        assert_eq!(ring.free(1), 3, "free re-reads the consumer when it looks short");
        assert_eq!(ring.queued(), 1);
    }

    #[test]
    fn indices_wrap_around_u32_and_the_ring() {
        // Start just below the wrap of the free-running indices.
        let mut fake = FakeRing::new(4, u32::MAX - 1);
        let mut ring = fake.ring();
        let mut sent = Vec::new();
        for round in 0..5u64 {
            assert_eq!(ring.free(3), 4);
            for i in 0..3 {
                let d = (round * 10 + i, 64 + i as u32, 0);
                ring.write(desc(d.0, d.1, d.2));
                sent.push(d);
            }
            ring.publish();
            let taken = fake.consume(3);
            assert_eq!(taken, sent[sent.len() - 3..], "round {round}");
        }
        assert_eq!(ring.queued(), 0);
    }

    #[test]
    fn the_wakeup_flag_is_read_from_the_ring() {
        let mut fake = FakeRing::new(2, 0);
        let ring = fake.ring();
        assert!(!ring.needs_wakeup());
        fake.flags.store(libc::XDP_RING_NEED_WAKEUP, Ordering::Relaxed);
        assert!(ring.needs_wakeup());
    }
}
