//! Benchmark support.
//!
//! - [`fairway_loopback`]: a bulk transfer between two Fairway shards;
//! - [`smoltcp_loopback`]: the same transfer between two smoltcp sockets;
//! - [`udp_frames`]: prebuilt UDP frames for packet-rate measurements;
//! - [`nic`] (feature `afxdp`): packet rates and a bulk download on the
//!   namespace testbed;
//! - [`http`]: wrk against Fairway (AF_XDP and kernel backends) and nginx
//!   on the namespace testbed;
//! - [`ablation`]: the receive-path ablation's variants, gains and tables;
//! - [`stats`]: medians over rounds;
//! - [`cli`]: value parsers the benchmark binaries' command lines share.
#![deny(missing_docs)]

pub mod ablation;
pub mod cli;
pub mod fairway_loopback;
pub mod http;
#[cfg(feature = "afxdp")]
pub mod nic;
pub mod smoltcp_loopback;
pub mod stats;
pub mod udp_frames;
