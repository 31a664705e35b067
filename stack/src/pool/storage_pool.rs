//! A pool of growable collections that connections attach only while they
//! need them: the sent queue's records, the assembler's blocks (and, in
//! the server, its connections' HTTP sessions).
//!
//! Unlike [`super::BufferPool`]'s fixed-size buffers, these keep whatever
//! capacity their last user grew them to, which is the point: a recycled
//! sent queue already has room for a full window. The free list itself is
//! grown when a collection is created, never when one is given back, so
//! returning storage on the hot path cannot reallocate.

/// Hands out collections of type `T` and takes them back for reuse.
#[derive(Debug)]
pub struct StoragePool<T> {
    free: Vec<T>,
    /// As [`super::BufferPool`]'s: the fewest waiting since the last trim.
    low_water: usize,
    max_free: usize,
    recycle: bool,
    created: usize,
}

impl<T> StoragePool<T> {
    /// A pool that keeps at most `max_free` returned collections. With
    /// `recycle` off nothing is kept (the ablation baseline).
    #[must_use]
    pub const fn new(max_free: usize, recycle: bool) -> StoragePool<T> {
        StoragePool { free: Vec::new(), low_water: 0, max_free, recycle, created: 0 }
    }

    /// A recycled collection (empty, with its capacity), or a new one from
    /// `fresh`.
    pub fn take(&mut self, fresh: impl FnOnce() -> T) -> T {
        if let Some(storage) = self.free.pop() {
            self.low_water = self.low_water.min(self.free.len());
            return storage;
        }
        self.low_water = 0;
        self.created = self.created.saturating_add(1);
        if self.recycle {
            // Room on the free list for every collection that may come back.
            let target = self.created.min(self.max_free);
            self.free.reserve(target.saturating_sub(self.free.len()));
        }
        fresh()
    }

    /// Takes back a collection (the caller has emptied it). Beyond
    /// `max_free` waiting, or with recycling off, it is dropped.
    pub fn give(&mut self, storage: T) {
        if self.recycle && self.free.len() < self.max_free {
            self.free.push(storage);
        }
    }

    /// Frees the collections that waited unused since the previous call, as
    /// the stack's buffer pool does, and returns how many. The free
    /// list keeps its own capacity, so giving back never reallocates.
    pub fn trim(&mut self) -> usize {
        let n = self.low_water.min(self.free.len());
        self.free.drain(..n);
        self.low_water = self.free.len();
        n
    }

    /// Collections waiting for reuse.
    #[must_use]
    pub fn free_count(&self) -> usize {
        self.free.len()
    }

    /// Collections created so far (not recycled).
    #[must_use]
    pub fn created(&self) -> usize {
        self.created
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn storage_comes_back_with_its_capacity() {
        let mut pool = StoragePool::new(8, true);
        let mut v: Vec<u32> = pool.take(Vec::new);
        v.extend(0..100);
        v.clear();
        pool.give(v);
        let v = pool.take(Vec::new);
        assert!(v.is_empty() && v.capacity() >= 100);
        assert_eq!((pool.created(), pool.free_count()), (1, 0));
    }

    #[test]
    fn trim_frees_what_an_interval_did_not_need() {
        let mut pool = StoragePool::new(8, true);
        let held: Vec<Vec<u8>> = (0..4).map(|_| pool.take(Vec::new)).collect();
        held.into_iter().for_each(|v| pool.give(v));
        assert_eq!(pool.trim(), 0, "the interval needed all four");
        let one: Vec<u8> = pool.take(Vec::new);
        pool.give(one);
        assert_eq!(pool.trim(), 3);
        assert_eq!(pool.trim(), 1, "idle for a whole interval");
        assert_eq!((pool.free_count(), pool.created()), (0, 4));
    }

    #[test]
    fn giving_back_never_grows_the_free_list() {
        let mut pool = StoragePool::new(64, true);
        let taken: Vec<Vec<u8>> = (0..40).map(|_| pool.take(Vec::new)).collect();
        let capacity = pool.free.capacity();
        assert!(capacity >= 40);
        for v in taken {
            pool.give(v);
        }
        assert_eq!((pool.free.capacity(), pool.free_count()), (capacity, 40));
    }

    #[test]
    fn the_free_list_is_bounded_and_recycling_can_be_off() {
        let mut pool = StoragePool::new(2, true);
        let taken: Vec<Vec<u8>> = (0..5).map(|_| pool.take(Vec::new)).collect();
        taken.into_iter().for_each(|v| pool.give(v));
        assert_eq!(pool.free_count(), 2);

        let mut off = StoragePool::new(2, false);
        let v: Vec<u8> = off.take(Vec::new);
        off.give(v);
        assert_eq!((off.free_count(), off.created()), (0, 1));
        let _: Vec<u8> = off.take(Vec::new);
        assert_eq!(off.created(), 2);
    }
}
