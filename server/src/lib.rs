//! Fairway: the server built on Fairway's userspace TCP/IP stack, and the
//! library that runs your application on it.
//!
//! ```text
//! userspace conn (Shard + Handle) ─┐                      ┌─▶ HTTP/1.1 (sans-IO) ─▶ Handler (sync, per core)
//! kernel conn (mio stream) ────────┴─ Transport ─▶ Host ───┤     built-in endpoints, your handlers, a Router
//!                          slots, one timer wheel, linger, └─▶ per-core async executor ─▶ hyper / axum
//!                          draining, limit, fairness sensing
//! ```
//!
//! - [`Server`]: embedding: [`Server::builder`] starts a server with your
//!   application (a [`Handler`](http::Handler), an async task, an axum
//!   `Router`) on every shard and returns a [`ServerHandle`].
//! - [`runtime`]: one loop per shard (receive a batch, run the stack or
//!   poll the kernel's sockets, hand the events to the application, transmit
//!   a batch, sleep on the device until the next deadline, the
//!   application's included), shards pinned to cores, and the stop flag
//!   SIGINT/SIGTERM raise.
//! - [`host`]: the connection host, one for every backend, over the
//!   [`Transport`](host::Transport) seam: pooled per-connection state, the
//!   drive, one timer wheel for every deadline, lingering close, draining,
//!   the connection limit, window control's sensing.
//! - [`backend`]: where connections come from (kernel sockets, or the
//!   userspace stack over AF_XDP or TAP), and `serve`, which runs the
//!   configured one.
//! - [`http`]: HTTP/1.1 as a sans-IO layer (bytes in, bytes out), the
//!   [`Handler`](http::Handler) API, a [`Router`](http::Router), and the
//!   built-in endpoints.
//! - [`rt`] and [`net`]: the per-core async runtime and its TCP streams,
//!   for hyper 1.x and axum.
//! - [`clock`]: the wall clock the runtime reads, as the stack's `Instant`.
//! - [`config`]: the command line and the TOML file, merged and validated.
//! - [`logging`]: `tracing` to standard error, filtered.
//! - [`metrics`]: per-shard counters and latency, merged and rendered as
//!   Prometheus text.
//! - [`site`]: what a shard's HTTP connections share (date, files,
//!   metrics).
//! - [`tls`]: TLS termination (rustls) as a transport over any backend's.
#![deny(missing_docs)]

pub mod backend;
pub mod clock;
pub mod config;
pub mod host;
pub mod http;
pub mod logging;
pub mod metrics;
pub mod net;
pub mod outbound;
pub mod proxy;
pub mod readiness;
pub mod rt;
pub mod runtime;
pub mod server;
pub mod site;
pub mod tls;

pub use server::{Builder, Server, ServerHandle, run_binary};
