//! [`FramePool`]: every frame buffer of the network, recycled through a free
//! list so the steady state allocates nothing.

/// Where a frame is going, fixed when its host transmits it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FrameMeta {
    /// Bytes of the frame at the start of its buffer.
    pub(crate) len: u32,
    /// The transmitting host's index.
    pub(crate) src: u32,
    /// The destination host's index, or [`BROADCAST`].
    pub(crate) dst: u32,
}

/// [`FrameMeta::dst`] of a frame to every other host.
pub(crate) const BROADCAST: u32 = u32::MAX;

/// The fewest buffers the pool adds when it runs out.
const MIN_GROWTH: usize = 16;

/// A slab of fixed-size buffers named by `u32` ids.
///
/// Buffers are allocated on first need, half the pool's size at a time, and
/// never freed while the network lives: a released id goes on a LIFO free list (the most recently used
/// buffer is the one most likely still in cache) and is handed out again.
/// Every buffer keeps its full length, so taking one costs no memset.
pub(crate) struct FramePool {
    buf_len: usize,
    bufs: Vec<Box<[u8]>>,
    meta: Vec<FrameMeta>,
    free: Vec<u32>,
}

impl FramePool {
    pub(crate) fn new(buf_len: usize) -> FramePool {
        FramePool { buf_len, bufs: Vec::new(), meta: Vec::new(), free: Vec::new() }
    }

    /// Makes sure `frames` buffers exist, so that that many frames can be in
    /// flight without allocating.
    pub(crate) fn reserve(&mut self, frames: usize) {
        let missing = frames.saturating_sub(self.bufs.len());
        self.bufs.reserve(missing);
        self.meta.reserve(missing);
        self.free.reserve(frames.saturating_sub(self.free.len()));
        for _ in 0..missing {
            let id = self.grow();
            self.free.push(id);
        }
    }

    /// Takes a buffer: a recycled one if any, a new one otherwise.
    pub(crate) fn take(&mut self) -> u32 {
        if let Some(id) = self.free.pop() {
            return id;
        }
        // Grow by half at once (like `Vec`), so that the pool warms up in a
        // few steps and a workload whose peak wanders a little above the one
        // it warmed up on still finds a spare buffer.
        let extra = (self.bufs.len() / 2).max(MIN_GROWTH);
        self.reserve(self.bufs.len() + extra);
        self.free.pop().expect("just reserved")
    }

    /// Returns a buffer to the free list.
    pub(crate) fn release(&mut self, id: u32) {
        self.free.push(id);
    }

    /// A new buffer that holds the same frame as `id`.
    pub(crate) fn duplicate(&mut self, id: u32) -> u32 {
        let copy = self.take();
        let meta = self.meta[id as usize];
        let len = meta.len as usize;
        let (src, dst) = pair_mut(&mut self.bufs, id as usize, copy as usize);
        dst[..len].copy_from_slice(&src[..len]);
        self.meta[copy as usize] = meta;
        copy
    }

    pub(crate) fn meta(&self, id: u32) -> FrameMeta {
        self.meta[id as usize]
    }

    pub(crate) fn set_meta(&mut self, id: u32, meta: FrameMeta) {
        self.meta[id as usize] = meta;
    }

    /// The frame in buffer `id`.
    pub(crate) fn frame(&self, id: u32) -> &[u8] {
        &self.bufs[id as usize][..self.meta[id as usize].len as usize]
    }

    /// The frame in buffer `id`, writable.
    pub(crate) fn frame_mut(&mut self, id: u32) -> &mut [u8] {
        let len = self.meta[id as usize].len as usize;
        &mut self.bufs[id as usize][..len]
    }

    /// The whole buffer `id`, whatever the frame's length.
    pub(crate) fn buffer(&self, id: u32) -> &[u8] {
        &self.bufs[id as usize]
    }

    /// The whole buffer `id`, for a transmitter to fill.
    pub(crate) fn buffer_mut(&mut self, id: u32) -> &mut [u8] {
        &mut self.bufs[id as usize]
    }

    fn grow(&mut self) -> u32 {
        let id = u32::try_from(self.bufs.len()).expect("more than 2^32 frames in flight");
        self.bufs.push(vec![0; self.buf_len].into_boxed_slice());
        self.meta.push(FrameMeta::default());
        id
    }
}

impl core::fmt::Debug for FramePool {
    /// A summary: the buffers themselves are kilobytes each.
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("FramePool")
            .field("buf_len", &self.buf_len)
            .field("buffers", &self.bufs.len())
            .field("free", &self.free.len())
            .finish()
    }
}

/// Two distinct elements of a slice, the first shared and the second mutable.
fn pair_mut<T>(slice: &mut [T], a: usize, b: usize) -> (&T, &mut T) {
    assert_ne!(a, b);
    if a < b {
        let (head, tail) = slice.split_at_mut(b);
        (&head[a], &mut tail[0])
    } else {
        let (head, tail) = slice.split_at_mut(a);
        (&tail[0], &mut head[b])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn buffers_are_recycled_and_duplicates_copy_the_frame() {
        let mut pool = FramePool::new(64);
        let a = pool.take();
        pool.buffer_mut(a)[..4].copy_from_slice(b"abcd");
        pool.set_meta(a, FrameMeta { len: 4, src: 1, dst: BROADCAST });
        let b = pool.duplicate(a);
        assert_ne!(a, b);
        assert_eq!(pool.frame(b), b"abcd");
        assert_eq!(pool.meta(b).dst, BROADCAST);
        pool.release(b);
        assert_eq!(pool.take(), b, "the most recently freed buffer comes back first");
        assert_eq!(pool.buffer(a).len(), 64);
        assert_eq!(pool.bufs.len(), MIN_GROWTH, "grown a batch at a time");
    }
}
