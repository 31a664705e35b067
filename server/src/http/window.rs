//! A fixed byte buffer with a filled region in the middle: bytes are added
//! at the end and taken from the front. Both sides of a connection use one
//! (requests in, responses out); each is allocated once and reused.

pub(crate) struct ByteWindow {
    buf: Box<[u8]>,
    start: usize,
    end: usize,
}

impl ByteWindow {
    pub(crate) fn new(capacity: usize) -> ByteWindow {
        ByteWindow { buf: vec![0; capacity].into_boxed_slice(), start: 0, end: 0 }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.buf.len()
    }

    /// The bytes added and not yet taken.
    pub(crate) fn filled(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// The same bytes, to change in place.
    pub(crate) fn filled_mut(&mut self) -> &mut [u8] {
        &mut self.buf[self.start..self.end]
    }

    pub(crate) fn len(&self) -> usize {
        self.end - self.start
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.start == self.end
    }

    /// How much [`spare`](Self::spare) can offer once it compacts.
    pub(crate) fn room(&self) -> usize {
        self.buf.len() - self.len()
    }

    /// Takes `n` bytes from the front (at most what is there).
    pub(crate) fn consume(&mut self, n: usize) {
        self.start += n.min(self.len());
        if self.start == self.end {
            self.start = 0;
            self.end = 0;
        }
    }

    pub(crate) fn clear(&mut self) {
        self.start = 0;
        self.end = 0;
    }

    /// The free space after the filled bytes, moving them to the front first
    /// when less than `want` is free there (so at most one copy of the
    /// filled bytes per `want` added).
    pub(crate) fn spare(&mut self, want: usize) -> &mut [u8] {
        if self.buf.len() - self.end < want && self.start > 0 {
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
        }
        &mut self.buf[self.end..]
    }

    /// `n` bytes were written at the start of [`spare`](Self::spare).
    pub(crate) fn commit(&mut self, n: usize) {
        self.end = (self.end + n).min(self.buf.len());
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bytes_in_at_the_end_out_at_the_front() {
        let mut w = ByteWindow::new(8);
        w.spare(1)[..5].copy_from_slice(b"hello");
        w.commit(5);
        w.consume(3);
        assert_eq!((w.filled(), w.room()), (&b"lo"[..], 6));
        assert_eq!(w.spare(1).len(), 3, "enough at the end: no copy");
        assert_eq!(w.spare(4).len(), 6, "compacted");
        assert_eq!(w.filled(), b"lo");
        w.consume(100);
        assert!(w.is_empty());
        assert_eq!(w.spare(0).len(), 8);
        w.commit(100);
        assert_eq!(w.len(), 8);
    }
}
