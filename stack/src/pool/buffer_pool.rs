//! A pool of equal-sized byte buffers (connection rings, queued frames).
//!
//! Returned buffers go on a bounded free list, most recently returned first
//! (its memory is the likeliest to be cached). The bound caps what an idle
//! shard keeps after a burst of connections.

/// Hands out buffers of one size and takes them back for reuse.
#[derive(Debug)]
pub struct BufferPool {
    size: usize,
    max_free: usize,
    recycle: bool,
    free: Vec<Box<[u8]>>,
    allocations: u64,
}

impl BufferPool {
    /// A pool of `size`-byte buffers that keeps at most `max_free` returned
    /// buffers. With `recycle` off every `take` allocates and every `give`
    /// frees (the ablation baseline).
    #[must_use]
    pub fn new(size: usize, max_free: usize, recycle: bool) -> BufferPool {
        BufferPool { size, max_free, recycle, free: Vec::new(), allocations: 0 }
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
            Some(buffer) => buffer,
            None => self.allocate(),
        }
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

    /// Bytes of heap held by buffers waiting for reuse.
    #[must_use]
    pub fn heap_bytes(&self) -> usize {
        self.free.len() * self.size
    }

    fn allocate(&mut self) -> Box<[u8]> {
        self.allocations += 1;
        // Zeroed allocation comes straight from the allocator's zeroed pages
        // for large sizes, so it costs no more than an uninitialised one.
        vec![0; self.size].into_boxed_slice()
    }
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
