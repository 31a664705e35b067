//! [`FrameSlab`]: the frame buffers of one direction, recycled through a free
//! list so that the steady state allocates nothing.

/// Buffers added at a time when the slab runs out (and allocated up front).
const CHUNK_SLOTS: usize = 1024;

/// Fixed-size buffers named by `u32` ids, allocated a chunk at a time on
/// first need (never moved, never freed while the slab lives) up to a limit.
///
/// A released id goes on a LIFO free list: the most recently used buffer is
/// the one most likely still in cache.
pub(crate) struct FrameSlab {
    slot_len: usize,
    max_slots: usize,
    chunks: Vec<Box<[u8]>>,
    free: Vec<u32>,
}

impl FrameSlab {
    /// A slab of buffers of `slot_len` bytes, at most `max_bytes` in all
    /// (but at least one chunk), with the first chunk allocated.
    pub(crate) fn new(slot_len: usize, max_bytes: usize) -> FrameSlab {
        let max_slots = (max_bytes / slot_len).clamp(CHUNK_SLOTS, u32::MAX as usize);
        let mut slab = FrameSlab { slot_len, max_slots, chunks: Vec::new(), free: Vec::new() };
        slab.grow();
        slab
    }

    /// Takes a buffer, or `None` when all `max_bytes` are in use.
    pub(crate) fn take(&mut self) -> Option<u32> {
        if self.free.is_empty() && self.chunks.len() * CHUNK_SLOTS < self.max_slots {
            self.grow();
        }
        self.free.pop()
    }

    pub(crate) fn release(&mut self, id: u32) {
        debug_assert!(!self.free.contains(&id), "slot {id} released twice");
        self.free.push(id);
    }

    /// Buffers currently taken.
    #[cfg(test)]
    pub(crate) fn in_use(&self) -> usize {
        self.chunks.len() * CHUNK_SLOTS - self.free.len()
    }

    /// The whole buffer `id`.
    pub(crate) fn slot_mut(&mut self, id: u32) -> &mut [u8] {
        let (chunk, at) = self.locate(id);
        &mut self.chunks[chunk][at..at + self.slot_len]
    }

    /// The whole buffer `id`.
    pub(crate) fn slot(&self, id: u32) -> &[u8] {
        let (chunk, at) = self.locate(id);
        &self.chunks[chunk][at..at + self.slot_len]
    }

    /// Two distinct buffers at once, to copy one into the other.
    pub(crate) fn pair_mut(&mut self, from: u32, to: u32) -> (&[u8], &mut [u8]) {
        assert_ne!(from, to);
        let ((cf, af), (ct, at)) = (self.locate(from), self.locate(to));
        let len = self.slot_len;
        if cf == ct {
            let chunk = &mut self.chunks[cf];
            if af < at {
                let (lo, hi) = chunk.split_at_mut(at);
                (&lo[af..af + len], &mut hi[..len])
            } else {
                let (lo, hi) = chunk.split_at_mut(af);
                (&hi[..len], &mut lo[at..at + len])
            }
        } else if cf < ct {
            let (lo, hi) = self.chunks.split_at_mut(ct);
            (&lo[cf][af..af + len], &mut hi[0][at..at + len])
        } else {
            let (lo, hi) = self.chunks.split_at_mut(cf);
            (&hi[0][af..af + len], &mut lo[ct][at..at + len])
        }
    }

    fn locate(&self, id: u32) -> (usize, usize) {
        let id = id as usize;
        (id / CHUNK_SLOTS, id % CHUNK_SLOTS * self.slot_len)
    }

    fn grow(&mut self) {
        let first = self.chunks.len() * CHUNK_SLOTS;
        self.chunks.push(vec![0; CHUNK_SLOTS * self.slot_len].into_boxed_slice());
        self.free.reserve(CHUNK_SLOTS);
        // Reversed, so that ids are handed out in increasing order.
        self.free.extend((first..first + CHUNK_SLOTS).rev().map(|id| id as u32));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grows_by_chunks_up_to_the_limit_and_recycles() {
        let mut slab = FrameSlab::new(64, 64 * CHUNK_SLOTS * 2);
        let ids: Vec<u32> = (0..2 * CHUNK_SLOTS).map(|_| slab.take().unwrap()).collect();
        assert_eq!(ids[0], 0);
        assert_eq!(slab.in_use(), 2 * CHUNK_SLOTS);
        assert_eq!(slab.take(), None);
        slab.slot_mut(ids[5])[..3].copy_from_slice(b"abc");
        let (from, to) = slab.pair_mut(ids[5], ids[CHUNK_SLOTS + 1]);
        to[..3].copy_from_slice(&from[..3]);
        assert_eq!(&slab.slot(ids[CHUNK_SLOTS + 1])[..3], b"abc");
        let (from, to) = slab.pair_mut(ids[CHUNK_SLOTS + 1], ids[2]);
        to[..3].copy_from_slice(&from[..3]);
        assert_eq!(&slab.slot(ids[2])[..3], b"abc");
        slab.release(ids[7]);
        assert_eq!(slab.take(), Some(ids[7]));
    }
}
