//! Out-of-order reassembly bookkeeping with a bounded number of blocks.
//!
//! The assembler only tracks *which* bytes beyond the receive point have
//! arrived; the bytes themselves sit in the receive ring. Offsets are relative
//! to the receive point (RCV.NXT); [`Assembler::take_front`] advances it.
//!
//! Blocks are kept sorted and separated by at least one missing byte, so they
//! double as SACK blocks (RFC 2018). Their storage is attached on the first
//! out-of-order arrival and detached with the receive buffer, so idle and
//! in-order connections hold none, and a pool recycles it.
//!
//! When the limit is reached, what lies nearest the receive point wins: a
//! block below the highest one evicts it (that data is forgotten and will
//! be retransmitted), so data at RCV.NXT can always be taken in.

/// The default cap on out-of-order blocks per connection (128 KiB of
/// bookkeeping at most; see [`blocks_for_buffer`] for the usual limit).
pub const DEFAULT_MAX_BLOCKS: usize = 16 * 1024;

/// Receive-buffer bytes per block [`blocks_for_buffer`] allows.
pub const BUFFER_BYTES_PER_BLOCK: usize = 1024;

/// The block limit for a receive buffer of `capacity` bytes, under `cap`:
/// one block per KiB of buffer, at least 16.
///
/// A peer sending full-sized segments with every other one missing needs one
/// block per two segments, so this keeps every block a standard Ethernet MSS
/// can create, for 8 bytes per KiB of buffer; only a peer splitting its data
/// into small segments with gaps between them reaches the limit.
#[must_use]
pub fn blocks_for_buffer(capacity: usize, cap: usize) -> usize {
    (capacity / BUFFER_BYTES_PER_BLOCK).max(16).min(cap.max(1))
}

/// The segment would need more blocks than the limit and lies beyond all of
/// them.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooManyBlocks;

/// Tracks received ranges beyond the receive point.
#[derive(Clone, Debug, Default)]
pub struct Assembler {
    /// `(start, end)` ranges, ascending and pairwise non-adjacent.
    blocks: Vec<(u32, u32)>,
    limit: u32,
}

impl Assembler {
    /// No out-of-order data and no storage.
    #[must_use]
    pub const fn new() -> Assembler {
        Assembler { blocks: Vec::new(), limit: 0 }
    }

    /// Whether storage is attached.
    #[must_use]
    pub fn is_allocated(&self) -> bool {
        self.blocks.capacity() > 0
    }

    /// Attaches (cleared, possibly recycled) storage for at most `limit`
    /// blocks.
    pub fn attach(&mut self, mut storage: Vec<(u32, u32)>, limit: usize) {
        storage.clear();
        self.blocks = storage;
        self.limit = limit.clamp(1, u32::MAX as usize) as u32;
    }

    /// Takes the storage away (cleared), forgetting every block.
    pub fn detach(&mut self) -> Option<Vec<(u32, u32)>> {
        if !self.is_allocated() {
            return None;
        }
        let mut storage = core::mem::take(&mut self.blocks);
        storage.clear();
        self.limit = 0;
        Some(storage)
    }

    /// Records that bytes `[offset, offset + len)` have arrived, merging with
    /// overlapping or adjacent blocks. At the limit, a new block below the
    /// highest one evicts it; one beyond every block is refused, and then
    /// nothing changes. Without storage everything is refused: the caller
    /// attaches storage first (in-order data needs none: see the connection).
    ///
    /// An empty range changes nothing. A range reaching past `u32::MAX` is
    /// cut there (the caller bounds offsets by the receive window, far below).
    pub fn add(&mut self, offset: u32, len: u32) -> Result<(), TooManyBlocks> {
        if len == 0 {
            return Ok(());
        }
        if !self.is_allocated() {
            return Err(TooManyBlocks);
        }
        let (start, end) = (offset, offset.saturating_add(len));
        // Blocks `first..past` overlap or touch the new range: the first whose
        // end reaches `start`, up to the first that starts beyond `end`.
        let first = self.blocks.partition_point(|&(_, e)| e < start);
        let past = self.blocks.partition_point(|&(s, _)| s <= end);
        if first == past {
            if self.blocks.len() >= self.limit as usize {
                if first >= self.blocks.len() {
                    return Err(TooManyBlocks);
                }
                self.blocks.pop();
            }
            self.blocks.insert(first, (start, end));
        } else {
            let merged = (start.min(self.blocks[first].0), end.max(self.blocks[past - 1].1));
            self.blocks[first] = merged;
            self.blocks.drain(first + 1..past);
        }
        Ok(())
    }

    /// If a block starts at offset 0, removes it, moves the receive point past
    /// it (every other block's offset drops by its length) and returns its
    /// length; otherwise returns 0.
    pub fn take_front(&mut self) -> u32 {
        match self.blocks.first() {
            Some(&(0, taken)) => {
                self.blocks.remove(0);
                // Every remaining block starts past a gap after `taken`: no underflow.
                for block in &mut self.blocks {
                    block.0 -= taken;
                    block.1 -= taken;
                }
                taken
            }
            _ => 0,
        }
    }

    /// Whether one block holds all of `[start, end)` (an empty range is
    /// held when some block starts at or before it and ends at or after it).
    ///
    /// O(log blocks).
    #[must_use]
    pub fn covers(&self, start: u32, end: u32) -> bool {
        let at = self.blocks.partition_point(|&(_, e)| e < end);
        self.blocks.get(at).is_some_and(|&(s, e)| s <= start && end <= e)
    }

    /// The block holding byte `offset`, if any.
    ///
    /// O(log blocks).
    #[must_use]
    pub fn block_at(&self, offset: u32) -> Option<(u32, u32)> {
        let at = self.blocks.partition_point(|&(_, e)| e <= offset);
        self.blocks.get(at).copied().filter(|&(s, _)| s <= offset)
    }

    /// No blocks held.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.blocks.is_empty()
    }

    /// The blocks as `(start, end)` offsets, ascending.
    pub fn blocks(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.blocks.iter().copied()
    }

    /// Forgets every block (the storage stays).
    pub fn clear(&mut self) {
        self.blocks.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const MAX_BLOCKS: usize = 8;

    fn blocks(assembler: &Assembler) -> Vec<(u32, u32)> {
        assembler.blocks().collect()
    }

    fn assembler() -> Assembler {
        let mut a = Assembler::new();
        a.attach(Vec::with_capacity(MAX_BLOCKS), MAX_BLOCKS);
        a
    }

    #[test]
    fn in_order_data() {
        let mut assembler = assembler();
        assert!(assembler.is_empty());
        assert_eq!(assembler.take_front(), 0);
        assembler.add(0, 100).unwrap();
        assert_eq!(assembler.take_front(), 100);
        assert!(assembler.is_empty());
    }

    #[test]
    fn merges_overlapping_and_adjacent() {
        let mut assembler = assembler();
        assembler.add(10, 5).unwrap();
        assembler.add(30, 5).unwrap();
        assert_eq!(blocks(&assembler), [(10, 15), (30, 35)]);
        assembler.add(15, 3).unwrap(); // adjacent after
        assembler.add(7, 3).unwrap(); // adjacent before
        assert_eq!(blocks(&assembler), [(7, 18), (30, 35)]);
        assembler.add(12, 20).unwrap(); // bridges both
        assert_eq!(blocks(&assembler), [(7, 35)]);
        assembler.add(8, 2).unwrap(); // inside
        assert_eq!(blocks(&assembler), [(7, 35)]);
        assembler.add(0, 0).unwrap(); // empty: nothing
        assert_eq!(assembler.take_front(), 0);
        assembler.add(0, 7).unwrap();
        assert_eq!(assembler.take_front(), 35);
        assert!(assembler.is_empty());
    }

    #[test]
    fn take_front_shifts_the_rest() {
        let mut assembler = assembler();
        assembler.add(0, 10).unwrap();
        assembler.add(20, 5).unwrap();
        assembler.add(40, 5).unwrap();
        assert_eq!(assembler.take_front(), 10);
        assert_eq!(blocks(&assembler), [(10, 15), (30, 35)]);
        assert_eq!(assembler.take_front(), 0);
    }

    #[test]
    fn at_the_limit_the_nearest_data_wins() {
        let mut assembler = assembler();
        for i in 0..MAX_BLOCKS as u32 {
            assembler.add(10 + i * 10, 5).unwrap();
        }
        let before = blocks(&assembler);
        // Beyond every block: refused, nothing changes.
        assert_eq!(assembler.add(1_000, 3), Err(TooManyBlocks));
        assert_eq!(blocks(&assembler), before);
        // Below the highest: it evicts the highest block.
        assembler.add(0, 3).unwrap();
        assert_eq!(blocks(&assembler).len(), MAX_BLOCKS);
        assert_eq!(blocks(&assembler)[0], (0, 3));
        assert!(!blocks(&assembler).contains(&(80, 85)));
        // In-order data always gets in, and merging frees room.
        assert_eq!(assembler.take_front(), 3);
        assembler.add(12, 3).unwrap();
        assert_eq!(blocks(&assembler).len(), MAX_BLOCKS - 1);
    }

    #[test]
    fn without_storage_nothing_fits_and_detach_recycles() {
        let mut a = Assembler::new();
        assert!(!a.is_allocated());
        assert_eq!(a.add(5, 5), Err(TooManyBlocks));
        a.attach(Vec::with_capacity(4), 4);
        a.add(5, 5).unwrap();
        let storage = a.detach().unwrap();
        assert!(storage.is_empty() && storage.capacity() >= 4);
        assert!(a.is_empty() && !a.is_allocated());
    }

    #[test]
    fn ranges_past_u32_max_are_cut() {
        let mut assembler = assembler();
        assembler.add(u32::MAX - 5, 100).unwrap();
        assert_eq!(blocks(&assembler), [(u32::MAX - 5, u32::MAX)]);
    }

    #[test]
    fn the_limit_follows_the_receive_buffer() {
        // Every other full-sized segment missing from a full buffer.
        for capacity in [64 * 1024, 4 << 20, 16 << 20] {
            let worst = capacity / (2 * 1460) + 1;
            assert!(blocks_for_buffer(capacity, DEFAULT_MAX_BLOCKS) >= worst, "{capacity}");
        }
        assert_eq!(blocks_for_buffer(0, DEFAULT_MAX_BLOCKS), 16);
        assert_eq!(blocks_for_buffer(1 << 30, DEFAULT_MAX_BLOCKS), DEFAULT_MAX_BLOCKS);
        assert_eq!(blocks_for_buffer(1 << 20, 100), 100);
        assert_eq!(blocks_for_buffer(1 << 20, 0), 1);
    }

    #[test]
    fn covers_needs_one_block_holding_the_whole_range() {
        let mut assembler = assembler();
        assembler.add(10, 10).unwrap();
        assembler.add(30, 10).unwrap();
        assert!(assembler.covers(10, 20) && assembler.covers(12, 18) && assembler.covers(30, 40));
        assert!(!assembler.covers(15, 35), "spans a gap");
        assert!(!assembler.covers(5, 15) && !assembler.covers(35, 45) && !assembler.covers(0, 1));
    }

    #[test]
    fn clear_forgets_everything() {
        let mut assembler = assembler();
        assembler.add(5, 5).unwrap();
        assembler.clear();
        assert!(assembler.is_empty());
        assert_eq!(blocks(&assembler), []);
    }

    /// Received offsets, as the model sees them.
    const WINDOW: usize = 512;

    /// The maximal runs of set bits, as `(start, end)`.
    fn runs(received: &[bool]) -> Vec<(u32, u32)> {
        let mut runs = Vec::new();
        let mut i = 0;
        while i < received.len() {
            if received[i] {
                let start = i;
                while i < received.len() && received[i] {
                    i += 1;
                }
                runs.push((start as u32, i as u32));
            } else {
                i += 1;
            }
        }
        runs
    }

    #[derive(Clone, Debug)]
    enum Op {
        Add(u32, u32),
        TakeFront,
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            6 => (0u32..400, 0u32..48).prop_map(|(offset, len)| Op::Add(offset, len)),
            1 => (0u32..8, 1u32..48).prop_map(|(offset, len)| Op::Add(offset, len)),
            2 => Just(Op::TakeFront),
        ]
    }

    proptest! {
        #[test]
        fn matches_bitset_model(ops in proptest::collection::vec(op(), 1..200)) {
            let mut assembler = assembler();
            let mut received = vec![false; WINDOW];
            for op in ops {
                match op {
                    Op::Add(offset, len) => {
                        let mut next = received.clone();
                        next[offset as usize..(offset + len) as usize].fill(true);
                        let result = assembler.add(offset, len);
                        if runs(&next).len() <= MAX_BLOCKS {
                            prop_assert_eq!(result, Ok(()));
                            received = next;
                        } else if runs(&received).last().is_some_and(|&(s, _)| offset < s) {
                            // The highest block makes way for the lower one.
                            prop_assert_eq!(result, Ok(()));
                            let &(s, e) = runs(&received).last().unwrap();
                            next[s as usize..e as usize].fill(false);
                            next[offset as usize..(offset + len) as usize].fill(true);
                            received = next;
                        } else {
                            prop_assert_eq!(result, Err(TooManyBlocks));
                        }
                    }
                    Op::TakeFront => {
                        let prefix = received.iter().take_while(|&&r| r).count();
                        prop_assert_eq!(assembler.take_front() as usize, prefix);
                        received.drain(..prefix);
                        received.resize(WINDOW, false);
                    }
                }
                prop_assert_eq!(blocks(&assembler), runs(&received));
                prop_assert_eq!(assembler.is_empty(), !received.contains(&true));
                for offset in [0, 5, 47, 100, 399] {
                    let run = runs(&received).into_iter().find(|&(s, e)| s <= offset && offset < e);
                    prop_assert_eq!(assembler.block_at(offset), run, "block_at({})", offset);
                }
                for (start, end) in [(0, 1), (3, 40), (100, 101), (200, 260), (7, 7)] {
                    let held = runs(&received).iter().any(|&(s, e)| s <= start && end <= e);
                    prop_assert_eq!(assembler.covers(start, end), held, "covers({}, {})", start, end);
                }
            }
        }
    }
}
