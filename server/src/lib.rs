//! Fairway: the server built on Fairway's userspace TCP/IP stack, and the
//! library that runs your application on it.
//!
//! ```text
//! userspace conn (Shard + Handle) ─┐                      ┌─▶ HTTP/1.1 (sans-IO) ─▶ Handler (sync, per core)
//! kernel conn (mio stream) ────────┴─ Transport ─▶ Host ───┤     └ HTTP/2 (hyper, bridged) ─▶ the same Handler
//!                          slots, one timer wheel, linger, └─▶ tokio tasks ─▶ hyper / axum / tonic (h1 + h2)
//!                          draining, limit, fairness sensing
//! every shard's thread: a tokio current-thread runtime + LocalSet; the shard loop is one of its tasks
//! ```
//!
//! - [`Server`]: embedding: [`Server::builder`] starts a server with your
//!   application (a [`Handler`](http::Handler), an async task, an axum
//!   `Router`) on every shard and returns a [`ServerHandle`].
//! - [`runtime`]: one loop per shard (receive a batch, run the stack or
//!   poll the kernel's sockets, hand the events to the application, transmit
//!   a batch, sleep until the next deadline, the application's included),
//!   run as a task of the shard's tokio runtime and sleeping in its reactor
//!   ([`runtime::drive`]), shards pinned to cores, and the stop flag
//!   SIGINT/SIGTERM raise.
//! - [`host`]: the connection host, one for every backend, over the
//!   [`Transport`](host::Transport) seam: pooled per-connection state, the
//!   drive, one timer wheel for every deadline, lingering close, draining,
//!   the connection limit, window control's sensing.
//! - [`backend`]: where connections come from (kernel sockets, or the
//!   userspace stack over AF_XDP or TAP), and `serve`, which runs the
//!   configured one.
//! - [`http`]: HTTP/1.1 as a sans-IO layer (bytes in, bytes out), the
//!   [`Handler`](http::Handler) API, a [`Router`](http::Router), the
//!   built-in endpoints, and HTTP/2 for them ([`http::h2`]).
//! - [`rt`] and [`net`]: a thin layer over the shard's tokio runtime and
//!   the shard's TCP streams, for hyper 1.x, axum and whatever runs on
//!   tokio.
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
