//! Benchmark support: the two halves of the in-memory loopback comparison.
//!
//! - [`fairway_loopback`]: a bulk transfer between two Fairway shards;
//! - [`smoltcp_loopback`]: the same transfer between two smoltcp sockets.
#![deny(missing_docs)]

pub mod fairway_loopback;
pub mod smoltcp_loopback;
