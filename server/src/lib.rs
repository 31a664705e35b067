//! The Fairway server's library: the per-core runtime that drives a shard of
//! the protocol engine over a NIC queue, and the applications it runs.
//!
//! - [`runtime`]: one loop per shard (receive a batch, run the stack, hand
//!   its events to the application, transmit a batch, service timers, sleep
//!   on the device when idle), shards pinned to cores, and a stop flag that
//!   SIGINT/SIGTERM raise so every loop returns and every device is dropped
//!   (which detaches AF_XDP programs).
//! - [`backend`]: where connections come from (kernel sockets, or the
//!   userspace stack), and `serve`, which runs the configured one.
//! - [`http`]: HTTP/1.1 as a sans-IO layer (bytes in, bytes out) that
//!   both backends drive.
//! - [`backend`]: the userspace stack (AF_XDP, TAP) under the HTTP layer.
//! - [`clock`]: the wall clock the runtime reads, as the stack's `Instant`.
//! - [`config`]: the command line and the TOML file, merged and validated.
//! - [`logging`]: `tracing` to standard error, filtered.
//! - [`metrics`]: per-shard counters and latency, merged and rendered as
//!   Prometheus text.
//! - [`site`]: what a shard's HTTP connections share (date, files,
//!   metrics).
#![deny(missing_docs)]

pub mod backend;
pub mod clock;
pub mod config;
pub mod host;
pub mod http;
pub mod logging;
pub mod metrics;
pub mod net;
pub mod rt;
pub mod runtime;
pub mod server;
pub mod site;

pub use server::{Builder, Server, ServerHandle};
