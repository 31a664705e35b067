//! Fairway's protocol engine: a sans-IO TCP/IPv4 stack.
//!
//! This first step holds the data structures the engine is built from.
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod checksum;
pub mod pool;
pub mod ring;
pub mod tcp;
pub mod time;
pub mod timer_wheel;
