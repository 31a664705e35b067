//! The reassembly bookkeeping (`fairway_stack::tcp::assembler`) against a
//! reference model: a bitmap of the bytes held beyond the receive point,
//! whose runs are the blocks. Adding a range sets its bits; when that would
//! make more runs than the limit, a range beyond every run is refused (the
//! bitmap stays as it was) and any other evicts the highest run (RFC 2018's
//! receiver may forget out-of-order data; what lies nearest RCV.NXT wins).
//! Taking the front removes a run at offset 0 and shifts the rest down.
//!
//! After every operation the assembler's blocks must be the model's runs,
//! in order; `add` must accept or refuse as the model does; `take_front`
//! must return the model's length; `covers` and `block_at` must answer for
//! the range just added as the model does.
#![no_main]

use arbitrary::Arbitrary;
use fairway_stack::tcp::assembler::Assembler;
use libfuzzer_sys::fuzz_target;

/// Offsets and lengths are taken modulo this; the bitmap spans twice it.
const SPAN: usize = 2048;
const WORDS: usize = 2 * SPAN / 64;

#[derive(Arbitrary, Debug)]
enum Op {
    Add { offset: u16, len: u16 },
    TakeFront,
    Clear,
}

#[derive(Arbitrary, Debug)]
struct Input {
    limit: u8,
    ops: Vec<Op>,
}

/// The bytes held, one bit each, from the receive point.
#[derive(Clone, PartialEq, Eq)]
struct Held([u64; WORDS]);

impl Held {
    fn bit(&self, at: usize) -> bool {
        at < 2 * SPAN && self.0[at / 64] & (1 << (at % 64)) != 0
    }

    /// Sets (or clears) the bits of `[start, end)`.
    fn fill(&mut self, start: usize, end: usize, on: bool) {
        let mut at = start;
        while at < end {
            let (word, bit) = (at / 64, at % 64);
            let n = (64 - bit).min(end - at);
            let mask = if n == 64 { u64::MAX } else { ((1u64 << n) - 1) << bit };
            if on {
                self.0[word] |= mask;
            } else {
                self.0[word] &= !mask;
            }
            at += n;
        }
    }

    /// The first offset at or after `at` whose bit is `on` (2 * SPAN if none).
    fn find(&self, mut at: usize, on: bool) -> usize {
        while at < 2 * SPAN {
            let word = if on { self.0[at / 64] } else { !self.0[at / 64] } >> (at % 64);
            if word != 0 {
                return (at + word.trailing_zeros() as usize).min(2 * SPAN);
            }
            at = (at / 64 + 1) * 64;
        }
        2 * SPAN
    }

    /// The runs of set bits, as `(start, end)`.
    fn runs(&self) -> Vec<(u32, u32)> {
        let mut runs = Vec::new();
        let mut at = self.find(0, true);
        while at < 2 * SPAN {
            let end = self.find(at, false);
            runs.push((at as u32, end as u32));
            at = self.find(end, true);
        }
        runs
    }

    /// Drops the first `n` offsets: bit `i + n` becomes bit `i`.
    fn shift_down(&mut self, n: usize) {
        let (words, bits) = (n / 64, n % 64);
        for i in 0..WORDS {
            let lo = self.0.get(i + words).copied().unwrap_or(0);
            let hi = self.0.get(i + words + 1).copied().unwrap_or(0);
            self.0[i] = if bits == 0 { lo } else { (lo >> bits) | (hi << (64 - bits)) };
        }
    }
}

/// The model's answer to `add` of `[start, end)` given the bitmap and its
/// runs: the bitmap and runs after it, or a refusal.
fn model_add(
    held: &Held,
    runs: &[(u32, u32)],
    limit: usize,
    start: usize,
    end: usize,
) -> Option<(Held, Vec<(u32, u32)>)> {
    let mut after = held.clone();
    after.fill(start, end, true);
    let after_runs = after.runs();
    if after_runs.len() <= limit {
        return Some((after, after_runs));
    }
    // One run too many, so the range touches none: refused beyond every
    // run, else the highest goes.
    let &(top_start, top_end) = runs.last().expect("runs at the limit");
    if start as u32 > top_end {
        return None;
    }
    after.fill(top_start as usize, top_end as usize, false);
    let runs = after.runs();
    Some((after, runs))
}

fuzz_target!(|input: Input| {
    let limit = usize::from(input.limit % 8) + 1;
    let mut a = Assembler::new();
    a.attach(Vec::with_capacity(limit), limit);
    assert!(a.is_allocated());
    let mut held = Held([0; WORDS]);
    let mut runs = Vec::new();
    for op in input.ops.into_iter().take(256) {
        match op {
            Op::Add { offset, len } => {
                let (start, len) = (usize::from(offset) % SPAN, usize::from(len) % SPAN);
                let end = start + len;
                let result = a.add(start as u32, len as u32);
                let expected = if len == 0 {
                    Some((held.clone(), runs.clone()))
                } else {
                    model_add(&held, &runs, limit, start, end)
                };
                assert_eq!(result.is_ok(), expected.is_some(), "add {start}+{len}: {result:?}");
                if let Some(next) = expected {
                    (held, runs) = next;
                }
                let covered = runs.iter().any(|&(s, e)| s as usize <= start && end <= e as usize);
                assert_eq!(a.covers(start as u32, end as u32), covered, "covers {start}..{end}");
                let block = runs.iter().copied().find(|&(s, e)| s as usize <= start && start < e as usize);
                assert_eq!(a.block_at(start as u32), block, "block at {start}");
            }
            Op::TakeFront => {
                let n = a.take_front() as usize;
                let expected = if held.bit(0) { held.find(0, false) } else { 0 };
                assert_eq!(n, expected, "take_front");
                held.shift_down(n);
                runs = held.runs();
            }
            Op::Clear => {
                a.clear();
                held = Held([0; WORDS]);
                runs.clear();
            }
        }
        let blocks: Vec<(u32, u32)> = a.blocks().collect();
        assert_eq!(blocks, runs, "the blocks");
        assert_eq!(a.is_empty(), blocks.is_empty());
        assert!(blocks.len() <= limit, "{} blocks over {limit}", blocks.len());
    }
});
