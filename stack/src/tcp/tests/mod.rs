//! Segment-level tests, grouped by RFC 9293 state: feed segments, assert
//! exactly the segments that come back.

mod harness;

mod closed;
mod closing;
mod established;
mod fairness;
mod fast_start;
mod in_place;
mod ipv6;
mod listen;
mod network;
mod options;
mod recovery;
mod syn_received;
mod syn_sent;
mod timers;
