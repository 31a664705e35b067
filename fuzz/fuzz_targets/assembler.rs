//! The reassembly bookkeeping against a byte map of what arrived: blocks
//! stay ordered, apart and within the limit; they hold only bytes that
//! arrived; a range accepted is held; a refusal changes nothing; taking
//! the front moves the receive point by the first block.
#![no_main]

use arbitrary::Arbitrary;
use fairway_stack::tcp::assembler::Assembler;
use libfuzzer_sys::fuzz_target;

const SPAN: usize = 8192;

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

fuzz_target!(|input: Input| {
    let mut a = Assembler::new();
    let limit = usize::from(input.limit % 8) + 1;
    a.attach(Vec::new(), limit);
    // Bytes beyond the receive point that have arrived.
    let mut arrived = vec![false; 2 * SPAN];
    for op in input.ops.into_iter().take(256) {
        let before: Vec<(u32, u32)> = a.blocks().collect();
        match op {
            Op::Add { offset, len } => {
                let (offset, len) = (usize::from(offset) % SPAN, usize::from(len) % SPAN);
                let result = a.add(offset as u32, len as u32);
                match result {
                    Ok(()) => {
                        arrived[offset..offset + len].iter_mut().for_each(|b| *b = true);
                        assert!(len == 0 || a.covers(offset as u32, (offset + len) as u32), "{offset}+{len}");
                    }
                    Err(_) => assert_eq!(a.blocks().collect::<Vec<_>>(), before, "a refusal changes nothing"),
                }
            }
            Op::TakeFront => {
                let n = a.take_front() as usize;
                let first = before.first().copied();
                match first {
                    Some((0, end)) => assert_eq!(n, end as usize),
                    _ => assert_eq!(n, 0),
                }
                assert!(arrived[..n].iter().all(|&b| b), "took bytes that never came");
                arrived.drain(..n);
                arrived.resize(2 * SPAN, false);
            }
            Op::Clear => {
                a.clear();
                arrived.iter_mut().for_each(|b| *b = false);
            }
        }
        let blocks: Vec<(u32, u32)> = a.blocks().collect();
        assert!(blocks.len() <= limit, "{} blocks over {limit}", blocks.len());
        for w in blocks.windows(2) {
            assert!(w[0].1 < w[1].0, "blocks out of order or touching: {blocks:?}");
        }
        for &(s, e) in &blocks {
            assert!(s < e, "an empty block: {blocks:?}");
            assert!(arrived[s as usize..e as usize].iter().all(|&b| b), "a block holds bytes that never came");
        }
    }
});
