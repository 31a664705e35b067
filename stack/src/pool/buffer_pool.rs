//! A pool of equal-sized byte buffers (connection rings, queued frames).
//!
//! Returned buffers go on a bounded free list, most recently returned first
//! (its memory is the likeliest to be cached). The bound caps what an idle
//! shard keeps after a burst of connections, and [`BufferPool::trim`] frees
//! what a whole interval did not need, so that after the burst the memory
//! goes back. Big buffers give back their pages even when kept: see
//! [`LARGE_BUFFER`].

/// Buffers at least this big are swapped for fresh ones at every
/// `BufferPool::trim` (the stack's socket buffers), the kept ones too. Allocators map a block this
/// size on its own (glibc above its mmap threshold, which the server pins
/// at this value), and a fresh mapping holds no resident page until it is
/// written: a kept socket buffer that a download once filled would
/// otherwise pin a whole buffer of RAM for the quiet requests that reuse
/// it and touch a page or two. The swap costs an unmap and a map per kept
/// buffer per interval, and page faults as the next user writes it.
pub const LARGE_BUFFER: usize = 256 << 10;

/// Hands out buffers of one size and takes them back for reuse.
#[derive(Debug)]
pub struct BufferPool {
    size: usize,
    max_free: usize,
    recycle: bool,
    free: Vec<Box<[u8]>>,
    /// The fewest buffers waiting since the last [`BufferPool::trim`]: that
    /// many were not needed in the interval.
    low_water: usize,
    allocations: u64,
    refreshes: u64,
}

impl BufferPool {
    /// A pool of `size`-byte buffers that keeps at most `max_free` returned
    /// buffers. With `recycle` off every `take` allocates and every `give`
    /// frees (the ablation baseline).
    #[must_use]
    pub fn new(size: usize, max_free: usize, recycle: bool) -> BufferPool {
        BufferPool { size, max_free, recycle, free: Vec::new(), low_water: 0, allocations: 0, refreshes: 0 }
    }

    /// The size of every buffer.
    #[must_use]
    pub fn buffer_size(&self) -> usize {
        self.size
    }

    /// A buffer of `buffer_size()` bytes: a recycled one when available
    /// (contents unspecified), else a fresh zeroed one.
    #[must_use]
    pub fn take(&mut self) -> Box<[u8]> {
        match self.free.pop() {
            Some(buffer) => {
                self.low_water = self.low_water.min(self.free.len());
                buffer
            }
            None => {
                self.low_water = 0;
                self.allocate()
            }
        }
    }

    /// Frees the buffers that waited unused since the previous call (the
    /// fewest that were waiting at any time in between; the longest-waiting
    /// first) and returns how many. Called at a fixed interval, it lets a
    /// pool shrink back to what its load needs: a buffer survives only if
    /// some moment of the last interval had all the others in use. Kept
    /// buffers of [`LARGE_BUFFER`] or more are then replaced by fresh ones
    /// (counted by [`BufferPool::refreshes`]).
    pub fn trim(&mut self) -> usize {
        let n = self.low_water.min(self.free.len());
        self.free.drain(..n);
        if self.size >= LARGE_BUFFER {
            let kept = self.free.len();
            // All the old ones go before the new ones come: the swap never
            // holds more than the pool did.
            self.free.clear();
            self.free.extend((0..kept).map(|_| zeroed(self.size)));
            self.refreshes += kept as u64;
        }
        self.low_water = self.free.len();
        n
    }

    /// Returns a buffer taken from this pool.
    ///
    /// A buffer of another size is freed rather than pooled (and trips a
    /// debug assertion): handing it out again would break `take`'s promise.
    pub fn give(&mut self, buffer: Box<[u8]>) {
        debug_assert_eq!(buffer.len(), self.size, "buffer from another pool");
        if self.recycle && self.free.len() < self.max_free && buffer.len() == self.size {
            self.free.push(buffer);
        }
    }

    /// Allocates buffers until `count` wait for reuse (bounded by
    /// `max_free`), so a warmed-up shard allocates nothing on its first
    /// connections. Does nothing with recycling off.
    pub fn prefill(&mut self, count: usize) {
        if !self.recycle {
            return;
        }
        let target = count.min(self.max_free);
        self.free.reserve(target.saturating_sub(self.free.len()));
        while self.free.len() < target {
            let buffer = self.allocate();
            self.free.push(buffer);
        }
    }

    /// Buffers waiting for reuse.
    #[must_use]
    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    /// Buffers allocated fresh so far (not recycled).
    #[must_use]
    pub fn allocations(&self) -> u64 {
        self.allocations
    }

    /// Kept buffers that [`BufferPool::trim`] swapped for fresh ones so far
    /// (see [`LARGE_BUFFER`]); not counted in [`BufferPool::allocations`].
    #[must_use]
    pub fn refreshes(&self) -> u64 {
        self.refreshes
    }

    /// Bytes of heap held by buffers waiting for reuse.
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        self.free.len() * self.size
    }

    fn allocate(&mut self) -> Box<[u8]> {
        self.allocations += 1;
        zeroed(self.size)
    }
}

/// A fresh zeroed buffer. For large sizes it comes straight from the
/// allocator's zeroed pages, so it costs no more than an uninitialised one
/// (and holds no resident page until written).
fn zeroed(size: usize) -> Box<[u8]> {
    vec![0; size].into_boxed_slice()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fresh_buffers_are_zeroed_and_sized() {
        let mut pool = BufferPool::new(4096, 8, true);
        assert_eq!(pool.buffer_size(), 4096);
        let buffer = pool.take();
        assert_eq!(buffer.len(), 4096);
        assert!(buffer.iter().all(|&b| b == 0));
        assert_eq!(pool.allocations(), 1);
        assert_eq!(pool.free_count(), 0);
        assert_eq!(pool.heap_bytes(), 0);
    }

    #[test]
    fn recycles_most_recent_first() {
        let mut pool = BufferPool::new(16, 8, true);
        let mut a = pool.take();
        let mut b = pool.take();
        a[0] = 1;
        b[0] = 2;
        pool.give(a);
        pool.give(b);
        assert_eq!(pool.free_count(), 2);
        assert_eq!(pool.heap_bytes(), 32);
        assert_eq!(pool.take()[0], 2);
        assert_eq!(pool.take()[0], 1);
        assert_eq!(pool.allocations(), 2);
        assert_eq!(pool.free_count(), 0);
    }

    #[test]
    fn trim_frees_what_an_interval_did_not_need() {
        let mut pool = BufferPool::new(8, 16, true);
        let burst: Vec<_> = (0..10).map(|_| pool.take()).collect();
        burst.into_iter().for_each(|b| pool.give(b));
        // The interval of the burst needed every buffer.
        assert_eq!(pool.trim(), 0);
        // Then a load of 3 at a time: 7 were never needed.
        for _ in 0..5 {
            let held: Vec<_> = (0..3).map(|_| pool.take()).collect();
            held.into_iter().for_each(|b| pool.give(b));
        }
        assert_eq!(pool.trim(), 7);
        assert_eq!(pool.free_count(), 3);
        // Idle: the rest go one interval later, and nothing was allocated since the burst.
        assert_eq!(pool.trim(), 3);
        assert_eq!((pool.free_count(), pool.allocations()), (0, 10));
    }

    #[test]
    fn trim_swaps_kept_large_buffers_for_fresh_zeroed_ones() {
        let mut pool = BufferPool::new(LARGE_BUFFER, 8, true);
        let mut burst: Vec<_> = (0..3).map(|_| pool.take()).collect();
        burst.iter_mut().for_each(|b| b.fill(0xA5));
        burst.into_iter().for_each(|b| pool.give(b));
        // The interval needed all three: they stay, but fresh.
        assert_eq!(pool.trim(), 0);
        assert_eq!((pool.free_count(), pool.refreshes(), pool.allocations()), (3, 3, 3));
        let buffer = pool.take();
        assert_eq!(buffer.len(), LARGE_BUFFER);
        assert!(buffer.iter().all(|&b| b == 0), "a swapped buffer is a fresh one");
        pool.give(buffer);
        // That interval needed one: the other two go, the one is swapped;
        // unneeded for a whole interval, it goes too.
        assert_eq!(pool.trim(), 2);
        assert_eq!((pool.free_count(), pool.refreshes()), (1, 4));
        assert_eq!(pool.trim(), 1);
        assert_eq!((pool.free_count(), pool.refreshes(), pool.allocations()), (0, 4, 3));
    }

    #[test]
    fn trim_keeps_small_buffers_as_they_are() {
        let mut pool = BufferPool::new(LARGE_BUFFER - 1, 8, true);
        let mut buffer = pool.take();
        buffer[0] = 7;
        pool.give(buffer);
        assert_eq!(pool.trim(), 0);
        assert_eq!(pool.refreshes(), 0);
        assert_eq!(pool.take()[0], 7);
    }

    #[test]
    fn steady_state_allocates_nothing() {
        let mut pool = BufferPool::new(64, 4, true);
        for _ in 0..1_000 {
            let held: Vec<_> = (0..4).map(|_| pool.take()).collect();
            held.into_iter().for_each(|buffer| pool.give(buffer));
        }
        assert_eq!(pool.allocations(), 4);
    }

    #[test]
    fn free_list_is_bounded() {
        let mut pool = BufferPool::new(8, 2, true);
        let buffers: Vec<_> = (0..5).map(|_| pool.take()).collect();
        buffers.into_iter().for_each(|buffer| pool.give(buffer));
        assert_eq!(pool.free_count(), 2);
        assert_eq!(pool.heap_bytes(), 16);
    }

    #[test]
    fn without_recycling_every_take_allocates() {
        let mut pool = BufferPool::new(8, 100, false);
        for _ in 0..10 {
            let buffer = pool.take();
            pool.give(buffer);
            assert_eq!(pool.free_count(), 0);
        }
        assert_eq!(pool.allocations(), 10);
        pool.prefill(5);
        assert_eq!(pool.free_count(), 0);
    }

    #[test]
    fn prefill_warms_up_to_the_bound() {
        let mut pool = BufferPool::new(32, 3, true);
        pool.prefill(10);
        assert_eq!(pool.free_count(), 3);
        assert_eq!(pool.allocations(), 3);
        let _taken = (pool.take(), pool.take(), pool.take());
        assert_eq!(pool.allocations(), 3);
    }

    #[test]
    fn zero_sized_buffers() {
        let mut pool = BufferPool::new(0, 4, true);
        let buffer = pool.take();
        assert!(buffer.is_empty());
        pool.give(buffer);
        assert_eq!(pool.free_count(), 1);
        assert_eq!(pool.heap_bytes(), 0);
    }
}
