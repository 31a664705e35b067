//! The input side of a connection: bytes read from the peer and not yet
//! parsed, and when they arrived.
//!
//! Arrival times serve two clocks: the header timeout runs from the first
//! byte of a head, and a response's latency from the first byte of its
//! request. A pipelined request's first byte may have come several reads
//! ago, so the last few reads are remembered by where they end; when more
//! reads than that are waiting, the newest ones are merged into the one
//! before them, which can only make a request look older than it is.

use fairway_stack::time::Instant;

use crate::http::window::ByteWindow;

/// Reads remembered separately.
const READS: usize = 8;

pub(crate) struct Input {
    window: ByteWindow,
    /// Bytes ever added and taken, counted from the connection's start.
    received: u64,
    consumed: u64,
    /// (where a read ended in `received` terms, when it arrived), oldest
    /// first, in a ring starting at `first`.
    reads: [(u64, Instant); READS],
    first: usize,
    count: usize,
}

impl Input {
    pub(crate) fn new(capacity: usize) -> Input {
        Input {
            window: ByteWindow::new(capacity),
            received: 0,
            consumed: 0,
            reads: [(0, Instant::ZERO); READS],
            first: 0,
            count: 0,
        }
    }

    /// Empty, for a new connection.
    pub(crate) fn reset(&mut self) {
        self.clear();
        self.received = 0;
        self.consumed = 0;
    }

    pub(crate) fn filled(&self) -> &[u8] {
        self.window.filled()
    }

    /// The same bytes, to change in place.
    pub(crate) fn filled_mut(&mut self) -> &mut [u8] {
        self.window.filled_mut()
    }

    pub(crate) fn len(&self) -> usize {
        self.window.len()
    }

    pub(crate) fn is_empty(&self) -> bool {
        self.window.is_empty()
    }

    /// No room to read into until something is parsed.
    pub(crate) fn is_full(&self) -> bool {
        self.window.room() == 0
    }

    /// Space to read into; compacts when less than half the buffer is free
    /// at the end.
    pub(crate) fn spare(&mut self) -> &mut [u8] {
        let half = self.window.capacity() / 2;
        self.window.spare(half)
    }

    /// `n` bytes were read into [`spare`](Self::spare) at `now`.
    pub(crate) fn commit(&mut self, n: usize, now: Instant) {
        let n = n.min(self.window.room());
        if n == 0 {
            return;
        }
        self.window.commit(n);
        self.received += n as u64;
        let last = (self.first + self.count + READS - 1) % READS;
        if self.count > 0 && (self.count == READS || self.reads[last].1 == now) {
            self.reads[last].0 = self.received;
        } else {
            self.reads[(self.first + self.count) % READS] = (self.received, now);
            self.count += 1;
        }
    }

    /// Takes `n` parsed bytes from the front.
    pub(crate) fn consume(&mut self, n: usize) {
        let n = n.min(self.window.len());
        self.window.consume(n);
        self.consumed += n as u64;
        while self.count > 0 && self.reads[self.first].0 <= self.consumed {
            self.first = (self.first + 1) % READS;
            self.count -= 1;
        }
    }

    /// Drops everything buffered.
    pub(crate) fn clear(&mut self) {
        let len = self.window.len();
        self.consume(len);
        self.window.clear();
        self.count = 0;
    }

    /// When the first unparsed byte arrived.
    pub(crate) fn first_arrival(&self) -> Option<Instant> {
        (self.count > 0).then(|| self.reads[self.first].1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn read(input: &mut Input, bytes: &[u8], at: u64) {
        input.spare()[..bytes.len()].copy_from_slice(bytes);
        input.commit(bytes.len(), Instant::from_millis(at));
    }

    #[test]
    fn the_first_unparsed_byte_keeps_its_arrival_time() {
        let mut input = Input::new(64);
        assert_eq!(input.first_arrival(), None);
        read(&mut input, b"aaaa", 1);
        read(&mut input, b"bbbb", 2);
        read(&mut input, b"cc", 2); // same instant: merged
        input.consume(3);
        assert_eq!(input.first_arrival(), Some(Instant::from_millis(1)));
        input.consume(1);
        assert_eq!(input.first_arrival(), Some(Instant::from_millis(2)));
        input.consume(6);
        assert_eq!(input.first_arrival(), None);
        assert!(input.is_empty());
    }

    #[test]
    fn many_reads_merge_into_the_newest_remembered_one() {
        let mut input = Input::new(64);
        for t in 0..20 {
            read(&mut input, b"x", t);
        }
        input.consume(7);
        assert_eq!(input.first_arrival(), Some(Instant::from_millis(7)));
        input.consume(1);
        // Reads 8..20 were merged into read 7's entry.
        assert_eq!(input.first_arrival(), Some(Instant::from_millis(7)));
        input.clear();
        assert_eq!((input.first_arrival(), input.len()), (None, 0));
        read(&mut input, b"y", 30);
        assert_eq!(input.first_arrival(), Some(Instant::from_millis(30)));
    }
}
