//! What the benchmark binaries report over their rounds: the tests
//! crate's, which the scenarios share.

pub use fairway_tests::stats::median;
