//! A byte ring over a pooled buffer: a connection's send or receive queue.
//!
//! A ring starts without storage (an idle connection costs no buffer); the
//! owner attaches a buffer from a [`crate::pool::BufferPool`] on first use and
//! detaches it when the connection closes.
//!
//! The receive side writes out-of-order data into the free space beyond the
//! queued bytes ([`Ring::write_at`]) and makes it readable with
//! [`Ring::commit`] once it is contiguous.
//!
//! Indices are `u32` to keep the ring at 24 bytes (two sit in every
//! connection); storage is therefore limited to `u32::MAX` bytes.

use crate::checksum::Sum;

/// A fixed-capacity byte ring.
#[derive(Debug, Default)]
pub struct Ring {
    storage: Option<Box<[u8]>>,
    /// Where the queued bytes start; below the capacity (0 when it is 0).
    head: u32,
    /// Bytes queued; at most the capacity.
    len: u32,
}

impl Ring {
    /// A ring without storage: capacity 0.
    #[must_use]
    pub const fn new() -> Ring {
        Ring { storage: None, head: 0, len: 0 }
    }

    /// Whether storage is attached.
    #[must_use]
    pub fn is_allocated(&self) -> bool {
        self.storage.is_some()
    }

    /// Attaches storage; the ring must have none.
    ///
    /// # Panics
    ///
    /// When storage is already attached (it would be lost with its data), or
    /// the buffer is longer than `u32::MAX` bytes.
    pub fn attach(&mut self, storage: Box<[u8]>) {
        assert!(self.storage.is_none(), "ring already has storage");
        assert!(u32::try_from(storage.len()).is_ok(), "ring storage over u32::MAX bytes");
        self.storage = Some(storage);
        self.head = 0;
        self.len = 0;
    }

    /// Takes the storage away, leaving an empty ring without storage.
    pub fn detach(&mut self) -> Option<Box<[u8]>> {
        self.head = 0;
        self.len = 0;
        self.storage.take()
    }

    /// Storage size in bytes.
    #[must_use]
    #[inline]
    pub fn capacity(&self) -> usize {
        self.storage.as_ref().map_or(0, |storage| storage.len())
    }

    /// Bytes queued.
    #[must_use]
    #[inline]
    pub fn len(&self) -> usize {
        self.len as usize
    }

    /// Nothing queued.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Free bytes: `capacity() - len()`.
    #[must_use]
    #[inline]
    pub fn free(&self) -> usize {
        self.capacity() - self.len()
    }

    /// Appends as much of `data` as fits; returns the count appended.
    pub fn push(&mut self, data: &[u8]) -> usize {
        let n = self.write_at(0, data);
        self.commit(n);
        n
    }

    /// Moves up to `out.len()` bytes from the front into `out`; returns the count.
    pub fn pop(&mut self, out: &mut [u8]) -> usize {
        let n = self.copy_out(0, out);
        self.consume(n);
        n
    }

    /// Drops `n` bytes from the front (`n <= len()`).
    ///
    /// A larger `n` trips a debug assertion and drops everything queued.
    pub fn consume(&mut self, n: usize) {
        debug_assert!(n <= self.len(), "consume {n} of {} queued bytes", self.len());
        let n = n.min(self.len());
        // The head is not reset when the ring empties: bytes written with
        // `write_at` beyond the queue must stay where they are.
        self.head = self.wrap(self.head as usize + n) as u32;
        self.len -= n as u32;
    }

    /// Up to `max` queued bytes starting `offset` bytes after the front, as
    /// one or two slices (two when they wrap).
    ///
    /// The second slice is empty unless the first one is not.
    #[must_use]
    pub fn peek(&self, offset: usize, max: usize) -> (&[u8], &[u8]) {
        let Some(storage) = self.storage.as_deref() else {
            return (&[], &[]);
        };
        let n = self.len().saturating_sub(offset).min(max);
        if n == 0 {
            return (&[], &[]);
        }
        // offset < len <= capacity, so one subtraction wraps it.
        let start = self.wrap(self.head as usize + offset);
        let first = n.min(storage.len() - start);
        (&storage[start..start + first], &storage[..n - first])
    }

    /// Copies queued bytes starting `offset` after the front into `out`;
    /// returns the count copied (bounded by what is queued).
    pub fn copy_out(&self, offset: usize, out: &mut [u8]) -> usize {
        let (first, second) = self.peek(offset, out.len());
        out[..first.len()].copy_from_slice(first);
        out[first.len()..first.len() + second.len()].copy_from_slice(second);
        first.len() + second.len()
    }

    /// [`copy_out`](Ring::copy_out), adding the bytes copied to `sum` (see
    /// [`Sum::add_copy`]: the ring is read once); `out` is taken to start at
    /// an even offset of the summed data.
    pub fn copy_out_summed(&self, offset: usize, out: &mut [u8], sum: Sum) -> (usize, Sum) {
        let (first, second) = self.peek(offset, out.len());
        let (a, b) = (first.len(), second.len());
        let sum = sum.add_copy(&mut out[..a], first, false).add_copy(&mut out[a..a + b], second, a % 2 == 1);
        (a + b, sum)
    }

    /// Writes `data` into free space starting `offset` bytes after the end of
    /// the queued bytes, without queuing it; returns the count written
    /// (bounded by the free space).
    pub fn write_at(&mut self, offset: usize, data: &[u8]) -> usize {
        let free = self.free();
        let n = free.saturating_sub(offset).min(data.len());
        if n == 0 {
            return 0;
        }
        // head < capacity and len + offset < capacity, so the sum is below
        // twice the capacity.
        let start = self.wrap(self.head as usize + self.len() + offset);
        let Some(storage) = self.storage.as_deref_mut() else {
            return 0;
        };
        let first = n.min(storage.len() - start);
        storage[start..start + first].copy_from_slice(&data[..first]);
        storage[..n - first].copy_from_slice(&data[first..n]);
        n
    }

    /// The free space right after the queued bytes, as one or two mutable
    /// slices (two when it wraps), for the owner to write into in place and
    /// then [`commit`](Ring::commit) what it wrote, first slice first.
    ///
    /// The second slice is empty unless the first one is not.
    pub fn spare_mut(&mut self) -> (&mut [u8], &mut [u8]) {
        let free = self.free();
        if free == 0 {
            return (&mut [], &mut []);
        }
        let start = self.wrap(self.head as usize + self.len());
        let Some(storage) = self.storage.as_deref_mut() else {
            return (&mut [], &mut []);
        };
        let first = free.min(storage.len() - start);
        let (front, back) = storage.split_at_mut(start);
        (&mut back[..first], &mut front[..free - first])
    }

    /// Queues `n` bytes previously written with [`Ring::write_at`] at offset 0.
    ///
    /// An `n` beyond the free space trips a debug assertion and fills the ring.
    pub fn commit(&mut self, n: usize) {
        debug_assert!(n <= self.free(), "commit {n} with {} bytes free", self.free());
        self.len += n.min(self.free()) as u32;
    }

    /// `index` reduced into the storage, for any `index` below twice the
    /// capacity (cheaper than `%`).
    #[inline]
    fn wrap(&self, index: usize) -> usize {
        let capacity = self.capacity();
        if index >= capacity { index - capacity } else { index }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::VecDeque;

    fn ring(capacity: usize) -> Ring {
        let mut ring = Ring::new();
        // Non-zero fill: recycled storage holds old bytes.
        ring.attach(vec![0xee; capacity].into_boxed_slice());
        ring
    }

    fn peeked(ring: &Ring, offset: usize, max: usize) -> Vec<u8> {
        let (a, b) = ring.peek(offset, max);
        [a, b].concat()
    }

    #[test]
    fn without_storage_everything_is_empty() {
        let mut ring = Ring::new();
        assert!(!ring.is_allocated());
        assert_eq!((ring.capacity(), ring.len(), ring.free()), (0, 0, 0));
        assert_eq!(ring.push(b"abc"), 0);
        assert_eq!(ring.write_at(0, b"abc"), 0);
        assert_eq!(ring.pop(&mut [0; 4]), 0);
        assert_eq!(ring.copy_out(0, &mut [0; 4]), 0);
        assert_eq!(ring.peek(0, 10), (&[][..], &[][..]));
        ring.consume(0);
        ring.commit(0);
        assert_eq!(ring.detach(), None);
    }

    #[test]
    fn attach_and_detach() {
        let mut ring = ring(8);
        assert!(ring.is_allocated());
        assert_eq!(ring.capacity(), 8);
        assert_eq!(ring.push(b"hello"), 5);
        let storage = ring.detach().unwrap();
        assert_eq!(storage.len(), 8);
        assert_eq!((ring.capacity(), ring.len()), (0, 0));
        ring.attach(storage);
        assert!(ring.is_empty());
    }

    #[test]
    #[should_panic(expected = "already has storage")]
    fn attach_twice_panics() {
        let mut ring = ring(4);
        ring.attach(vec![0; 4].into_boxed_slice());
    }

    #[test]
    fn push_pop_wraps() {
        let mut ring = ring(8);
        assert_eq!(ring.push(b"abcdef"), 6);
        let mut out = [0; 4];
        assert_eq!(ring.pop(&mut out), 4);
        assert_eq!(&out, b"abcd");
        assert_eq!(ring.push(b"ghijklmn"), 6, "bounded by free space");
        assert_eq!(ring.len(), 8);
        assert_eq!(ring.free(), 0);
        assert_eq!(ring.peek(0, 100), (&b"efgh"[..], &b"ijkl"[..]));
        assert_eq!(ring.peek(5, 100), (&b"jkl"[..], &b""[..]));
        assert_eq!(ring.peek(1, 2), (&b"fg"[..], &b""[..]));
        assert_eq!(ring.peek(8, 100), (&b""[..], &b""[..]));
        let mut out = [0; 10];
        assert_eq!(ring.copy_out(2, &mut out), 6);
        assert_eq!(&out[..6], b"ghijkl");
        ring.consume(3);
        assert_eq!(peeked(&ring, 0, 100), b"hijkl");
    }

    #[test]
    fn out_of_order_write_then_commit() {
        let mut ring = ring(10);
        ring.push(b"0123456");
        ring.consume(7);
        // Segment 2 arrives first, then segment 1; both wrap the storage end.
        assert_eq!(ring.write_at(3, b"defgh"), 5);
        assert!(ring.is_empty(), "write_at queues nothing");
        assert_eq!(ring.write_at(0, b"abc"), 3);
        ring.commit(8);
        assert_eq!(peeked(&ring, 0, 100), b"abcdefgh");
        // Bounded by free space past the offset.
        assert_eq!(ring.write_at(1, b"xyz"), 1);
        assert_eq!(ring.write_at(2, b"xyz"), 0);
        assert_eq!(ring.write_at(50, b"xyz"), 0);
    }

    #[test]
    fn spare_space_wraps_in_two_slices() {
        let mut ring = ring(10);
        assert_eq!(ring.spare_mut().0.len(), 10);
        ring.push(b"0123456");
        ring.consume(5);
        // Queued "56" at 5..7: free is 7..10 then 0..5.
        let (first, second) = ring.spare_mut();
        assert_eq!((first.len(), second.len()), (3, 5));
        first.copy_from_slice(b"abc");
        second[..2].copy_from_slice(b"de");
        ring.commit(5);
        assert_eq!(peeked(&ring, 0, 100), b"56abcde");
        ring.push(b"xyz");
        assert_eq!(ring.spare_mut(), (&mut [][..], &mut [][..]), "a full ring has no spare room");
        assert_eq!(Ring::new().spare_mut().0.len(), 0);
    }

    #[derive(Clone, Debug)]
    enum Op {
        Push(Vec<u8>),
        Pop(usize),
        Consume(usize),
        Peek(usize, usize),
        CopyOut(usize, usize),
        WriteAt(usize, Vec<u8>),
        Commit(usize),
        FillSpare(Vec<u8>),
    }

    fn op() -> impl Strategy<Value = Op> {
        let bytes = || proptest::collection::vec(any::<u8>(), 0..40);
        prop_oneof![
            3 => bytes().prop_map(Op::Push),
            2 => (0usize..40).prop_map(Op::Pop),
            2 => (0usize..40).prop_map(Op::Consume),
            2 => (0usize..40, 0usize..40).prop_map(|(o, m)| Op::Peek(o, m)),
            1 => (0usize..40, 0usize..40).prop_map(|(o, m)| Op::CopyOut(o, m)),
            3 => (0usize..40, bytes()).prop_map(|(o, d)| Op::WriteAt(o, d)),
            2 => (0usize..40).prop_map(Op::Commit),
            2 => bytes().prop_map(Op::FillSpare),
        ]
    }

    proptest! {
        #[test]
        fn matches_vecdeque_model(capacity in 1usize..48, ops in proptest::collection::vec(op(), 1..200)) {
            let mut ring = ring(capacity);
            let mut queue: VecDeque<u8> = VecDeque::new();
            // The free space after the queue: bytes written by `write_at`,
            // `None` where nothing was written since it became free.
            let mut beyond: VecDeque<Option<u8>> = vec![None; capacity].into();
            for op in ops {
                match op {
                    Op::Push(data) => {
                        let n = ring.push(&data);
                        prop_assert_eq!(n, data.len().min(capacity - queue.len()));
                        queue.extend(&data[..n]);
                        beyond.drain(..n);
                    }
                    Op::Pop(max) => {
                        let mut out = vec![0; max];
                        let n = ring.pop(&mut out);
                        let expected: Vec<u8> = queue.drain(..max.min(queue.len())).collect();
                        prop_assert_eq!(&out[..n], &expected[..]);
                        beyond.extend(std::iter::repeat_n(None, n));
                    }
                    Op::Consume(n) => {
                        let n = n.min(queue.len());
                        ring.consume(n);
                        queue.drain(..n);
                        beyond.extend(std::iter::repeat_n(None, n));
                    }
                    Op::Peek(offset, max) => {
                        let (first, second) = ring.peek(offset, max);
                        prop_assert!(!first.is_empty() || second.is_empty());
                        let expected: Vec<u8> = queue.iter().skip(offset).take(max).copied().collect();
                        prop_assert_eq!([first, second].concat(), expected);
                    }
                    Op::CopyOut(offset, max) => {
                        let mut out = vec![0; max];
                        let n = ring.copy_out(offset, &mut out);
                        let expected: Vec<u8> = queue.iter().skip(offset).take(max).copied().collect();
                        prop_assert_eq!(&out[..n], &expected[..]);
                        let mut summed = vec![0; max];
                        let (m, sum) = ring.copy_out_summed(offset, &mut summed, Sum::new());
                        prop_assert_eq!(&summed[..m], &expected[..]);
                        prop_assert_eq!(sum.fold(), Sum::new().add_bytes(&expected).fold());
                    }
                    Op::FillSpare(data) => {
                        // As `send_with` writes: into the spare slices in
                        // order, then commit.
                        let (first, second) = ring.spare_mut();
                        prop_assert_eq!(first.len() + second.len(), capacity - queue.len());
                        prop_assert!(!first.is_empty() || second.is_empty());
                        let a = first.len().min(data.len());
                        first[..a].copy_from_slice(&data[..a]);
                        let b = second.len().min(data.len() - a);
                        second[..b].copy_from_slice(&data[a..a + b]);
                        ring.commit(a + b);
                        queue.extend(&data[..a + b]);
                        beyond.drain(..a + b);
                    }
                    Op::WriteAt(offset, data) => {
                        let n = ring.write_at(offset, &data);
                        prop_assert_eq!(n, beyond.len().saturating_sub(offset).min(data.len()));
                        for (i, &byte) in data[..n].iter().enumerate() {
                            beyond[offset + i] = Some(byte);
                        }
                    }
                    Op::Commit(n) => {
                        // Like the receive path: only commit bytes written.
                        let n = n.min(beyond.iter().take_while(|b| b.is_some()).count());
                        ring.commit(n);
                        queue.extend(beyond.drain(..n).flatten());
                    }
                }
                prop_assert_eq!(beyond.len(), capacity - queue.len());
                prop_assert_eq!(ring.len(), queue.len());
                prop_assert_eq!(ring.free(), capacity - queue.len());
                prop_assert_eq!(ring.capacity(), capacity);
            }
        }
    }
}
