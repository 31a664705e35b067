//! Fairway's protocol engine: a sans-IO TCP/IP stack, IPv4 and IPv6.
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
//!
//! # What the crate offers
//!
//! - [`Shard`], built from a [`Config`] ([`TcpConfig`], [`Limits`],
//!   [`KeepAlive`], the congestion [`Algorithm`]); its application API
//!   speaks in [`Listener`]s, [`Handle`]s and [`Event`]s, with the errors
//!   [`ListenError`], [`ConnectError`], [`SendError`], [`RecvError`] and
//!   [`ConnectionError`]; [`FlowStats`] and [`State`] describe a
//!   connection, [`Counters`] and [`DropReason`] the shard. Addresses are
//!   `SocketAddr`s of either family (IPv6 with [`Config::ipv6`]:
//!   [`Ipv6Config`], Neighbor Discovery, ICMPv6): a listener on an
//!   unspecified address takes its port on every address of ours, of both
//!   families, one on an address of ours that family only; an IPv4-mapped
//!   address stands for its IPv4 address.
//! - [`time`]: the stack's clock types, passed in by the driver.
//! - [`fairness`]: the RTT-aware window-control policies.
//! - [`steering`]: which shard owns a flow.
//! - What the server builds on beside the shard: [`TimerWheel`] (its one
//!   timer mechanism), [`StoragePool`] with [`TRIM_INTERVAL`] and
//!   [`LARGE_BUFFER`], and [`ETHERNET_HEADER_LEN`].
//!
//! The rest (checksums, the flow table, the neighbour cache, pools, rings,
//! the TCP machinery, wire helpers) is internal. The `internals` feature
//! makes those modules public for the micro-benchmarks, the fuzz targets and
//! tests that reach inside; applications do not need it.
#![forbid(unsafe_code)]
#![deny(missing_docs)]
// Without `internals` the parts of the internals' API that only the
// benchmarks, fuzz targets and tests call look unused from here.
#![cfg_attr(not(feature = "internals"), allow(dead_code, unused_imports))]

/// A module that is public with the `internals` feature (for the
/// micro-benchmarks, the fuzz targets and tests that reach inside) and
/// private to the crate otherwise.
macro_rules! internal {
    ($($name:ident),* $(,)?) => {$(
        #[cfg(feature = "internals")]
        pub mod $name;
        #[cfg(not(feature = "internals"))]
        pub(crate) mod $name;
    )*};
}

mod api;
mod config;
mod counters;
mod event_queue;
pub mod fairness;
mod shard;
pub mod steering;
pub mod time;

internal!(checksum, flow_table, neighbor, pool, ring, tcp, timer_wheel, wire);

pub use api::{ConnectError, ConnectionError, Event, FlowStats, Handle, ListenError, Listener, RecvError, SendError};
pub use config::{
    Config, FastStart, Ipv6Config, KeepAlive, Limits, PathMemoryConfig, Recycle, TcpConfig, link_local, solicited_node,
};
pub use counters::{Counters, DropReason};
pub use pool::{LARGE_BUFFER, StoragePool, TRIM_INTERVAL};
pub use shard::{AddressState as Ipv6AddressState, Shard};
pub use tcp::State;
pub use tcp::congestion::Algorithm;
pub use timer_wheel::TimerWheel;
pub use wire::{ETHERNET_HEADER_LEN, finish_checksum, finish_partial_checksum, partial_checksum};
