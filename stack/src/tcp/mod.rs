//! TCP (RFC 9293) and its extensions.
//!
//! - [`connection`]: the transmission control block and state machine;
//! - [`seq`]: sequence-number arithmetic;
//! - [`rtt`]: RFC 6298 estimation and the windowed minimum RTT;
//! - [`congestion`]: congestion control behind a trait; [`cubic`]: CUBIC and HyStart++, the default;
//! - [`assembler`]: out-of-order reassembly bookkeeping;
//! - [`sent_queue`]: what is in flight: the SACK scoreboard and RACK's per-segment state;
//! - [`path_cache`]: what recent connections learned about a path (RFC 9040, careful resume);
//! - [`isn`]: RFC 6528 initial sequence numbers; [`syn_cookie`]: stateless SYN-ACKs under a SYN flood.

pub mod assembler;
pub mod congestion;
pub(crate) mod connection;
pub mod cubic;
pub mod hystart;
pub mod isn;
pub mod path_cache;
pub mod rtt;
pub mod segment;
pub mod sent_queue;
pub mod seq;
pub mod syn_cookie;

pub use connection::State;
pub use seq::SeqNumber;

#[cfg(test)]
mod tests;
