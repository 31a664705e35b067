//! Fairway's protocol engine: a sans-IO TCP/IPv4 stack.
//!
//! A [`Shard`] owns one share of the flows and everything they need. The
//! driver feeds it frames and the current time (`handle_*`) and takes frames
//! and deadlines back (`poll_*`); the application uses an epoll-style API on
//! the same shard. Nothing here reads a clock, sleeps, spawns or does I/O, so
//! every behaviour is reproducible in tests.
//!
//! ```
//! use fairway_stack::{Config, Shard, time::Instant};
//! use std::net::{Ipv4Addr, SocketAddrV4};
//!
//! let mut shard = Shard::new(Config::new([2, 0, 0, 0, 0, 1], Ipv4Addr::new(10, 0, 0, 1), 24));
//! let listener = shard.listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80)).unwrap();
//! let mut frame = vec![0; shard.config().max_frame_len()];
//! // The first frame out is the gratuitous ARP announcing us.
//! let len = shard.poll_transmit(Instant::ZERO, &mut frame).unwrap();
//! assert_eq!(&frame[12..14], &[0x08, 0x06]);
//! # let _ = (listener, len);
//! ```
#![forbid(unsafe_code)]
#![deny(missing_docs)]

pub mod api;
pub mod arp;
pub mod checksum;
pub mod config;
pub mod counters;
pub mod fairness;
pub mod flow_table;
pub mod pool;
pub mod ring;
mod shard;
pub mod steering;
pub mod tcp;
pub mod time;
pub mod timer_wheel;
pub mod wire;

pub use api::{ConnectError, ConnectionError, Event, FlowStats, Handle, ListenError, Listener, RecvError, SendError};
pub use config::{Config, KeepAlive, Limits, TcpConfig};
pub use counters::{Counters, DropReason};
pub use shard::Shard;
pub use wire::ETHERNET_HEADER_LEN;
