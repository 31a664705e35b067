//! The chunked decoder, differentially: the same body decoded whole and in
//! pieces must give the same data, verdict and end.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    cuts: Vec<u16>,
    body: Vec<u8>,
}

fuzz_target!(|input: Input| {
    let cuts: Vec<usize> = input.cuts.iter().map(|&c| usize::from(c)).collect();
    fairway::http::fuzzing::chunked_split_invariance(&input.body, &cuts);
});
