//! TCP (RFC 9293) and its extensions.
//!
//! - [`connection`]: the transmission control block and state machine;
//! - [`seq`]: sequence-number arithmetic;
//! - [`rtt`]: RFC 6298 estimation and the windowed minimum RTT;
//! - [`congestion`]: congestion control behind a trait (Reno);
//! - [`assembler`]: out-of-order reassembly bookkeeping;
//! - [`isn`]: RFC 6528 initial sequence numbers.

pub mod assembler;
pub mod congestion;
pub(crate) mod connection;
pub mod isn;
pub mod rtt;
pub mod segment;
pub mod seq;

pub use connection::State;
pub use seq::SeqNumber;

#[cfg(test)]
mod tests;
