//! `Range` values against lengths: a part served lies inside the file.
#![no_main]

use arbitrary::Arbitrary;
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    len: u64,
    value: Vec<u8>,
}

fuzz_target!(|input: Input| fairway::http::fuzzing::range_within(&input.value, input.len));
