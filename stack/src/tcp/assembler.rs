//! Out-of-order reassembly bookkeeping with a bounded number of blocks.
//!
//! The assembler only tracks *which* bytes beyond the receive point have
//! arrived; the bytes themselves sit in the receive ring. Offsets are relative
//! to the receive point (RCV.NXT); [`Assembler::take_front`] advances it.
//!
//! Blocks are kept inline, sorted, and separated by at least one missing
//! byte, so the struct never allocates and the blocks double as SACK blocks
//! (RFC 2018).

/// The most out-of-order blocks kept per connection. A segment that would need
/// more is dropped (the peer retransmits it).
pub const MAX_BLOCKS: usize = 8;

/// The segment would need more than [`MAX_BLOCKS`] blocks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooManyBlocks;

/// A received range `[start, end)`, never empty.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Block {
    start: u32,
    end: u32,
}

/// Tracks received ranges beyond the receive point.
#[derive(Clone, Debug, Default)]
pub struct Assembler {
    /// The first `count` are in use, ascending and pairwise non-adjacent.
    blocks: [Block; MAX_BLOCKS],
    count: u8,
}

impl Assembler {
    /// No out-of-order data.
    #[must_use]
    pub const fn new() -> Assembler {
        Assembler { blocks: [Block { start: 0, end: 0 }; MAX_BLOCKS], count: 0 }
    }

    /// Records that bytes `[offset, offset + len)` have arrived, merging with
    /// overlapping or adjacent blocks. On error nothing changes.
    ///
    /// An empty range changes nothing. A range reaching past `u32::MAX` is
    /// cut there (the caller bounds offsets by the receive window, far below).
    pub fn add(&mut self, offset: u32, len: u32) -> Result<(), TooManyBlocks> {
        if len == 0 {
            return Ok(());
        }
        let (start, end) = (offset, offset.saturating_add(len));
        let count = self.count as usize;
        let used = &self.blocks[..count];
        // Blocks `first..past` overlap or touch the new range: the first whose
        // end reaches `start`, up to the first that starts beyond `end`.
        let first = used.partition_point(|block| block.end < start);
        let past = used.partition_point(|block| block.start <= end);
        if first == past {
            if count == MAX_BLOCKS {
                return Err(TooManyBlocks);
            }
            self.blocks.copy_within(first..count, first + 1);
            self.blocks[first] = Block { start, end };
            self.count += 1;
        } else {
            let merged = Block { start: start.min(used[first].start), end: end.max(used[past - 1].end) };
            self.blocks[first] = merged;
            self.blocks.copy_within(past..count, first + 1);
            self.count -= (past - first - 1) as u8;
        }
        Ok(())
    }

    /// If a block starts at offset 0, removes it, moves the receive point past
    /// it (every other block's offset drops by its length) and returns its
    /// length; otherwise returns 0.
    pub fn take_front(&mut self) -> u32 {
        let count = self.count as usize;
        if count == 0 || self.blocks[0].start != 0 {
            return 0;
        }
        let taken = self.blocks[0].end;
        self.blocks.copy_within(1..count, 0);
        self.count -= 1;
        // Every remaining block starts past a gap after `taken`: no underflow.
        for block in &mut self.blocks[..count - 1] {
            block.start -= taken;
            block.end -= taken;
        }
        taken
    }

    /// No blocks held.
    #[must_use]
    pub fn is_empty(&self) -> bool {
        self.count == 0
    }

    /// The blocks as `(start, end)` offsets, ascending.
    pub fn blocks(&self) -> impl Iterator<Item = (u32, u32)> + '_ {
        self.blocks[..self.count as usize].iter().map(|block| (block.start, block.end))
    }

    /// Forgets every block.
    pub fn clear(&mut self) {
        self.count = 0;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn blocks(assembler: &Assembler) -> Vec<(u32, u32)> {
        assembler.blocks().collect()
    }

    #[test]
    fn in_order_data() {
        let mut assembler = Assembler::new();
        assert!(assembler.is_empty());
        assert_eq!(assembler.take_front(), 0);
        assembler.add(0, 100).unwrap();
        assert_eq!(assembler.take_front(), 100);
        assert!(assembler.is_empty());
    }

    #[test]
    fn merges_overlapping_and_adjacent() {
        let mut assembler = Assembler::new();
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
        let mut assembler = Assembler::new();
        assembler.add(0, 10).unwrap();
        assembler.add(20, 5).unwrap();
        assembler.add(40, 5).unwrap();
        assert_eq!(assembler.take_front(), 10);
        assert_eq!(blocks(&assembler), [(10, 15), (30, 35)]);
        assert_eq!(assembler.take_front(), 0);
    }

    #[test]
    fn too_many_blocks_changes_nothing() {
        let mut assembler = Assembler::new();
        for i in 0..MAX_BLOCKS as u32 {
            assembler.add(10 + i * 10, 5).unwrap();
        }
        let before = blocks(&assembler);
        assert_eq!(assembler.add(0, 3), Err(TooManyBlocks));
        assert_eq!(assembler.add(1_000, 3), Err(TooManyBlocks));
        assert_eq!(assembler.add(16, 2), Err(TooManyBlocks));
        assert_eq!(blocks(&assembler), before);
        // Merging still works when full, and frees room.
        assembler.add(15, 5).unwrap();
        assert_eq!(blocks(&assembler).len(), MAX_BLOCKS - 1);
        assembler.add(0, 3).unwrap();
        assert_eq!(blocks(&assembler).len(), MAX_BLOCKS);
    }

    #[test]
    fn ranges_past_u32_max_are_cut() {
        let mut assembler = Assembler::new();
        assembler.add(u32::MAX - 5, 100).unwrap();
        assert_eq!(blocks(&assembler), [(u32::MAX - 5, u32::MAX)]);
    }

    #[test]
    fn clear_forgets_everything() {
        let mut assembler = Assembler::new();
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
            let mut assembler = Assembler::new();
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
            }
        }
    }
}
