//! [`Producer`] and [`Consumer`]: our side of the four rings of an AF_XDP
//! socket (fill and TX we produce on; RX and completion we consume from).
//!
//! Each is the kernel's single-producer, single-consumer ring in memory the
//! socket maps: the producer writes entries at its index and publishes them
//! with a release store of the new index; the consumer learns how far the
//! producer got from an acquire load, reads the entries, and hands the
//! slots back with a release store of its own index. The indices run freely
//! and wrap; a slot is `index & mask`.
//!
//! The logic works on any memory laid out like the mapping, which is how
//! the tests below drive it without a kernel.

use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};

use super::sys::{self, RingOffsets};

/// One TX or RX descriptor as the kernel lays it out (`struct xdp_desc`).
pub(super) type Desc = libc::xdp_desc;

/// The memory of one ring: its two indices, its flags and its entries.
struct RingMemory<T> {
    producer: NonNull<AtomicU32>,
    consumer: NonNull<AtomicU32>,
    flags: NonNull<AtomicU32>,
    entries: NonNull<T>,
    /// Entries (a power of two) and that less one.
    size: u32,
    mask: u32,
    /// The mapping to remove on drop (`None` when the memory is not ours).
    mapping: Option<sys::Mapping>,
}

impl<T: Copy> RingMemory<T> {
    /// Maps ring `which` of the AF_XDP socket `fd` (`size` entries), where
    /// `offsets` say its fields lie.
    fn map(fd: RawFd, which: sys::RingKind, offsets: RingOffsets, size: u32) -> io::Result<RingMemory<T>> {
        let mapping = sys::map_ring(fd, which, offsets.desc, size as usize * size_of::<T>())?;
        let (producer, consumer) = (mapping.at(offsets.producer).cast(), mapping.at(offsets.consumer).cast());
        let (flags, entries) = (mapping.at(offsets.flags).cast(), mapping.at(offsets.desc).cast());
        // SAFETY: the offsets are the kernel's own for this ring, inside the
        // mapping, and aligned as the kernel lays the ring out (indices and
        // flags on their own cache lines, entries 8-byte aligned); the
        // mapping lives as long as the ring, in `mapping`, and only the
        // kernel (the other side) writes the ring besides us.
        Ok(unsafe { RingMemory::from_raw(producer, consumer, flags, entries, size, Some(mapping)) })
    }

    /// A ring over memory laid out as the kernel lays out a ring.
    ///
    /// # Safety
    ///
    /// Each pointer must be valid and aligned for its type (`entries` for
    /// `size` entries) for as long as the ring lives, and nothing but the
    /// ring's other side may write them meanwhile. `size` is a power of
    /// two.
    unsafe fn from_raw(
        producer: NonNull<AtomicU32>,
        consumer: NonNull<AtomicU32>,
        flags: NonNull<AtomicU32>,
        entries: NonNull<T>,
        size: u32,
        mapping: Option<sys::Mapping>,
    ) -> RingMemory<T> {
        debug_assert!(size.is_power_of_two());
        RingMemory { producer, consumer, flags, entries, size, mask: size - 1, mapping }
    }

    fn producer(&self) -> &AtomicU32 {
        // SAFETY: valid for the ring's life (`from_raw`'s contract).
        unsafe { self.producer.as_ref() }
    }

    fn consumer(&self) -> &AtomicU32 {
        // SAFETY: valid for the ring's life (`from_raw`'s contract).
        unsafe { self.consumer.as_ref() }
    }

    /// Whether the kernel asked to be woken (`XDP_RING_NEED_WAKEUP`, with
    /// the need_wakeup bind flag).
    fn needs_wakeup(&self) -> bool {
        // SAFETY: valid for the ring's life (`from_raw`'s contract).
        unsafe { self.flags.as_ref() }.load(Ordering::Relaxed) & libc::XDP_RING_NEED_WAKEUP != 0
    }
}

impl<T> Drop for RingMemory<T> {
    fn drop(&mut self) {
        // Unmapped by `Mapping`'s own drop; said here so the order is plain:
        // nothing touches the ring after this.
        drop(self.mapping.take());
    }
}

// SAFETY: a ring side is the only user of its side of the ring and owns its
// mapping; moving it to another thread moves that sole access with it. The
// kernel side is synchronised through the atomics, whatever thread we are
// on.
unsafe impl<T: Send> Send for RingMemory<T> {}

/// Our producer side of a ring (fill: UMEM addresses; TX: descriptors).
pub(super) struct Producer<T> {
    ring: RingMemory<T>,
    /// The next index we write: entries up to here are written, those from
    /// `published` on not yet visible to the kernel.
    next: u32,
    /// The producer index the kernel has seen.
    published: u32,
    /// The consumer index as last read.
    consumed: u32,
}

impl<T: Copy> Producer<T> {
    /// Maps ring `which` of the AF_XDP socket `fd` and takes over producing
    /// on it from where the kernel's indices stand.
    pub(super) fn map(fd: RawFd, which: sys::RingKind, offsets: RingOffsets, size: u32) -> io::Result<Producer<T>> {
        Ok(Producer::over(RingMemory::map(fd, which, offsets, size)?))
    }

    fn over(ring: RingMemory<T>) -> Producer<T> {
        let next = ring.producer().load(Ordering::Relaxed);
        let consumed = ring.consumer().load(Ordering::Acquire);
        Producer { ring, next, published: next, consumed }
    }

    /// Slots free for writing, re-reading the kernel's progress only when
    /// fewer than `want` seem free.
    pub(super) fn free(&mut self, want: u32) -> u32 {
        let free = self.ring.size - self.next.wrapping_sub(self.consumed);
        if free >= want {
            return free;
        }
        self.consumed = self.ring.consumer().load(Ordering::Acquire);
        self.ring.size - self.next.wrapping_sub(self.consumed)
    }

    /// Writes one entry into the next slot, for [`Producer::publish`] to
    /// hand over. The caller has checked [`Producer::free`].
    pub(super) fn write(&mut self, entry: T) {
        debug_assert!(self.next.wrapping_sub(self.consumed) < self.ring.size, "Producer::write with no free slot");
        let slot = (self.next & self.ring.mask) as usize;
        // SAFETY: `slot` is below `size`, so inside the entry array; the
        // slot is between the consumer and the producer's end, so the
        // kernel does not read it until `publish`.
        unsafe { self.ring.entries.add(slot).write(entry) };
        self.next = self.next.wrapping_add(1);
    }

    /// Writes all of `entries` and publishes them, if there is room for
    /// all; returns how many were written (all or none).
    pub(super) fn produce(&mut self, entries: &[T]) -> usize {
        let n = u32::try_from(entries.len()).unwrap_or(u32::MAX);
        if n == 0 || self.free(n) < n {
            return 0;
        }
        for &entry in entries {
            self.write(entry);
        }
        self.publish();
        entries.len()
    }

    /// Hands every written entry to the kernel. Returns how many.
    pub(super) fn publish(&mut self) -> u32 {
        let count = self.next.wrapping_sub(self.published);
        if count > 0 {
            // The release store makes the entries written before it visible
            // to the kernel first.
            self.ring.producer().store(self.next, Ordering::Release);
            self.published = self.next;
        }
        count
    }

    /// Entries published that the kernel has not taken yet.
    pub(super) fn queued(&mut self) -> u32 {
        self.consumed = self.ring.consumer().load(Ordering::Acquire);
        self.published.wrapping_sub(self.consumed)
    }

    /// Whether the kernel asked for a wake-up to go on (`sendto` for TX,
    /// `recvfrom` or `poll` for fill).
    pub(super) fn needs_wakeup(&self) -> bool {
        self.ring.needs_wakeup()
    }
}

/// Our consumer side of a ring (RX: descriptors; completion: UMEM
/// addresses).
pub(super) struct Consumer<T> {
    ring: RingMemory<T>,
    /// The next index we read.
    next: u32,
    /// The producer index as last read.
    produced: u32,
}

impl<T: Copy> Consumer<T> {
    /// Maps ring `which` of the AF_XDP socket `fd` and takes over consuming
    /// from it from where the kernel's indices stand.
    pub(super) fn map(fd: RawFd, which: sys::RingKind, offsets: RingOffsets, size: u32) -> io::Result<Consumer<T>> {
        Ok(Consumer::over(RingMemory::map(fd, which, offsets, size)?))
    }

    fn over(ring: RingMemory<T>) -> Consumer<T> {
        let next = ring.consumer().load(Ordering::Relaxed);
        let produced = ring.producer().load(Ordering::Acquire);
        Consumer { ring, next, produced }
    }

    /// Entries ready to read, re-reading the kernel's progress only when
    /// fewer than `want` seem ready.
    pub(super) fn available(&mut self, want: u32) -> u32 {
        let ready = self.produced.wrapping_sub(self.next);
        if ready >= want {
            return ready;
        }
        self.produced = self.ring.producer().load(Ordering::Acquire);
        self.produced.wrapping_sub(self.next)
    }

    /// Copies up to `out.len()` entries into `out` and hands their slots
    /// back to the kernel; returns how many.
    pub(super) fn consume(&mut self, out: &mut [T]) -> usize {
        let want = u32::try_from(out.len()).unwrap_or(u32::MAX);
        let n = self.available(want).min(want);
        for (i, entry) in out.iter_mut().take(n as usize).enumerate() {
            let slot = (self.next.wrapping_add(i as u32) & self.ring.mask) as usize;
            // SAFETY: `slot` is below `size`; the entry lies between our
            // index and the producer's published one, so the kernel wrote it
            // before its release store (read through the acquire load in
            // `available`) and does not touch it until we release it below.
            *entry = unsafe { self.ring.entries.add(slot).read() };
        }
        if n > 0 {
            self.next = self.next.wrapping_add(n);
            // The release store hands the slots back after we read them.
            self.ring.consumer().store(self.next, Ordering::Release);
        }
        n as usize
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Memory laid out like a mapped ring, with the kernel's side: a
    /// consumer that takes what was published, or a producer that adds.
    struct FakeRing<T> {
        producer: Box<AtomicU32>,
        consumer: Box<AtomicU32>,
        flags: Box<AtomicU32>,
        entries: Vec<T>,
    }

    impl<T: Copy> FakeRing<T> {
        fn new(size: u32, start: u32, empty: T) -> FakeRing<T> {
            FakeRing {
                producer: Box::new(AtomicU32::new(start)),
                consumer: Box::new(AtomicU32::new(start)),
                flags: Box::new(AtomicU32::new(0)),
                entries: vec![empty; size as usize],
            }
        }

        fn memory(&mut self) -> RingMemory<T> {
            let size = self.entries.len() as u32;
            // SAFETY: the boxes and the vector outlive the ring in every test,
            // and only the test's kernel side writes them meanwhile.
            unsafe {
                RingMemory::from_raw(
                    NonNull::from(&*self.producer),
                    NonNull::from(&*self.consumer),
                    NonNull::from(&*self.flags),
                    NonNull::new(self.entries.as_mut_ptr()).expect("a vector's pointer"),
                    size,
                    None,
                )
            }
        }

        fn producer(&mut self) -> Producer<T> {
            Producer::over(self.memory())
        }

        fn consumer(&mut self) -> Consumer<T> {
            Consumer::over(self.memory())
        }

        fn mask(&self) -> u32 {
            self.entries.len() as u32 - 1
        }

        /// The kernel as consumer: takes up to `n` published entries.
        fn take(&self, n: u32) -> Vec<T> {
            let (producer, consumer) = (self.producer.load(Ordering::Acquire), self.consumer.load(Ordering::Relaxed));
            let take = producer.wrapping_sub(consumer).min(n);
            let taken = (0..take).map(|i| self.entries[(consumer.wrapping_add(i) & self.mask()) as usize]).collect();
            self.consumer.store(consumer.wrapping_add(take), Ordering::Release);
            taken
        }

        /// The kernel as producer: adds `items` if they fit; returns whether
        /// they did.
        fn add(&mut self, items: &[T]) -> bool {
            let (producer, consumer) = (self.producer.load(Ordering::Relaxed), self.consumer.load(Ordering::Acquire));
            if self.entries.len() as u32 - producer.wrapping_sub(consumer) < items.len() as u32 {
                return false;
            }
            for (i, &item) in items.iter().enumerate() {
                let slot = (producer.wrapping_add(i as u32) & self.mask()) as usize;
                self.entries[slot] = item;
            }
            self.producer.store(producer.wrapping_add(items.len() as u32), Ordering::Release);
            true
        }
    }

    fn desc(addr: u64, len: u32, options: u32) -> Desc {
        Desc { addr, len, options }
    }

    fn parts(descs: Vec<Desc>) -> Vec<(u64, u32, u32)> {
        descs.into_iter().map(|d| (d.addr, d.len, d.options)).collect()
    }

    fn empty_desc() -> Desc {
        desc(0, 0, 0)
    }

    #[test]
    fn written_entries_reach_the_consumer_only_when_published() {
        let mut fake = FakeRing::new(8, 0, empty_desc());
        let mut ring = fake.producer();
        assert_eq!(ring.free(1), 8);
        ring.write(desc(0, 100, libc::XDP_PKT_CONTD));
        ring.write(desc(4096, 50, 0));
        assert!(fake.take(8).is_empty(), "nothing is visible before publish");
        assert_eq!(ring.publish(), 2);
        assert_eq!(ring.publish(), 0, "publishing again hands over nothing new");
        assert_eq!(ring.queued(), 2);
        assert_eq!(parts(fake.take(8)), vec![(0, 100, libc::XDP_PKT_CONTD), (4096, 50, 0)]);
        assert_eq!(ring.queued(), 0);
    }

    #[test]
    fn a_full_ring_frees_slots_as_the_consumer_takes_them() {
        let mut fake = FakeRing::new(4, 0, empty_desc());
        let mut ring = fake.producer();
        for i in 0..4 {
            ring.write(desc(i * 2048, 60, 0));
        }
        ring.publish();
        assert_eq!(ring.free(1), 0, "four of four slots in use");
        fake.take(3);
        assert_eq!(ring.free(1), 3, "free re-reads the consumer when it looks short");
        assert_eq!(ring.queued(), 1);
    }

    #[test]
    fn produce_writes_all_or_nothing() {
        let mut fake = FakeRing::new(4, 0, 0u64);
        let mut ring = fake.producer();
        assert_eq!(ring.produce(&[1, 2, 3]), 3);
        assert_eq!(ring.produce(&[4, 5]), 0, "two do not fit in the one free slot");
        assert_eq!(ring.produce(&[]), 0);
        assert_eq!(fake.take(8), vec![1, 2, 3]);
        assert_eq!(ring.produce(&[4, 5]), 2);
        assert_eq!(fake.take(8), vec![4, 5]);
    }

    #[test]
    fn indices_wrap_around_u32_and_the_ring() {
        // Start just below the wrap of the free-running indices.
        let mut fake = FakeRing::new(4, u32::MAX - 1, empty_desc());
        let mut ring = fake.producer();
        let mut sent = Vec::new();
        for round in 0..5u64 {
            assert_eq!(ring.free(3), 4);
            for i in 0..3 {
                let d = (round * 10 + i, 64 + i as u32, 0);
                ring.write(desc(d.0, d.1, d.2));
                sent.push(d);
            }
            ring.publish();
            let taken = parts(fake.take(3));
            assert_eq!(taken, sent[sent.len() - 3..], "round {round}");
        }
        assert_eq!(ring.queued(), 0);
    }

    #[test]
    fn the_consumer_reads_what_was_produced_and_hands_the_slots_back() {
        let mut fake = FakeRing::new(4, u32::MAX - 2, 0u64);
        let mut ring = fake.consumer();
        let mut out = [0u64; 8];
        assert_eq!(ring.consume(&mut out), 0, "nothing produced yet");
        let mut expected = Vec::new();
        let mut got = Vec::new();
        for round in 0..6u64 {
            let items: Vec<u64> = (0..3).map(|i| round * 100 + i).collect();
            assert!(fake.add(&items), "round {round}: room, because the consumer handed slots back");
            expected.extend_from_slice(&items);
            // Read in two steps: a short read leaves the rest for the next.
            let n = ring.consume(&mut out[..2]);
            got.extend_from_slice(&out[..n]);
            let n = ring.consume(&mut out);
            got.extend_from_slice(&out[..n]);
        }
        assert_eq!(got, expected);
        assert!(fake.add(&[1, 2, 3, 4]), "every slot is free again");
        assert!(!fake.add(&[5]), "and then none");
        assert_eq!(ring.available(1), 4);
    }

    #[test]
    fn the_wakeup_flag_is_read_from_the_ring() {
        let mut fake = FakeRing::new(2, 0, empty_desc());
        let ring = fake.producer();
        assert!(!ring.needs_wakeup());
        fake.flags.store(libc::XDP_RING_NEED_WAKEUP, Ordering::Relaxed);
        assert!(ring.needs_wakeup());
    }
}
