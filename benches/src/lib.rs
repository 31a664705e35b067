//! Benchmark support.
#![deny(missing_docs)]

pub mod smoltcp_loopback;
