//! The server-wide connection limit (`--max-connections`), shared by every
//! shard: a count of open connections that a shard takes a place in before
//! serving a new one, and gives back when it closes.

use std::sync::atomic::{AtomicUsize, Ordering};

/// How many connections are open, server-wide, and how many may be.
#[derive(Debug)]
pub struct ConnectionLimit {
    open: AtomicUsize,
    max: usize,
}

impl ConnectionLimit {
    /// A limit of `max` open connections.
    #[must_use]
    pub fn new(max: usize) -> ConnectionLimit {
        ConnectionLimit { open: AtomicUsize::new(0), max }
    }

    /// Takes a place for a new connection; false when all are taken (the
    /// connection is to be refused).
    #[must_use]
    pub fn try_acquire(&self) -> bool {
        // Relaxed: the count guards no other memory.
        self.open.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| (n < self.max).then_some(n + 1)).is_ok()
    }

    /// Gives back a place taken by [`try_acquire`](Self::try_acquire).
    pub fn release(&self) {
        let _ = self.open.fetch_update(Ordering::Relaxed, Ordering::Relaxed, |n| n.checked_sub(1));
    }

    /// Connections open now.
    #[must_use]
    pub fn open(&self) -> usize {
        self.open.load(Ordering::Relaxed)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn places_are_taken_up_to_the_limit_and_given_back() {
        let limit = ConnectionLimit::new(2);
        assert!(limit.try_acquire() && limit.try_acquire());
        assert!(!limit.try_acquire(), "a third is refused");
        assert_eq!(limit.open(), 2, "a refusal takes no place");
        limit.release();
        assert!(limit.try_acquire());
        limit.release();
        limit.release();
        limit.release(); // one too many: the count stays at zero
        assert_eq!(limit.open(), 0);
    }

    #[test]
    fn shards_racing_never_exceed_the_limit() {
        let limit = std::sync::Arc::new(ConnectionLimit::new(100));
        let taken: usize = (0..4)
            .map(|_| {
                let limit = std::sync::Arc::clone(&limit);
                std::thread::spawn(move || (0..1000).filter(|_| limit.try_acquire()).count())
            })
            .collect::<Vec<_>>()
            .into_iter()
            .map(|h| h.join().unwrap())
            .sum();
        assert_eq!((taken, limit.open()), (100, 100));
    }
}
