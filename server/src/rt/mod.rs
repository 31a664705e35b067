//! The per-core async runtime: a thin layer over the tokio runtime every
//! shard runs (a current-thread runtime and a `LocalSet`, see
//! [`crate::runtime::driver`]), for applications written with `async`
//! (hyper, axum, tonic, or hand-written protocols over [`crate::net`]).
//!
//! ```text
//! shard loop ─▶ host ─▶ AsyncService ─▶ tokio tasks ─▶ TcpStream ─▶ the shard's transport
//!   events ────────────▶ wake exactly the tasks waiting on that connection
//!   tasks' writes ─────▶ kick the loop, which transmits them
//! ```
//!
//! Every shard runs its own instance of the application (the main task
//! its factory makes on the shard's thread), so tasks never cross cores
//! and need not be `Send`. Inside them tokio works unchanged:
//! `tokio::spawn` and `tokio::task::spawn_local` (both run on this
//! shard), `spawn_blocking`, `tokio::time`, `tokio::net` (kernel sockets,
//! for clients of databases and other services), `tokio::sync`. What this
//! module adds is what only the shard knows:
//!
//! - [`spawn`]: `spawn_local`, with the task kept among the server's, so
//!   a draining shard waits for it (within the grace period) and counts it
//!   in `/metrics` if it panics;
//! - [`now`]: the shard loop's time (the stack's clock);
//! - [`draining`]: ready once the server is stopping, so connections can
//!   finish gracefully;
//! - [`serve_http1`], [`serve`]: hyper 1.x's HTTP/1 server on a
//!   [`crate::net::TcpStream`], with tokio's timer, the configured header
//!   timeout and a graceful shutdown; and [`axum()`] (feature `axum`): an
//!   axum `Router` served that way;
//! - [`AsyncService`]: the runtime as a host service (what the backends
//!   and [`Server`](crate::Server) put on each shard).
//!
//! [`sleep`], [`sleep_until`] and [`Timer`] are tokio's (`tokio::time` and
//! hyper-util's `TokioTimer`), kept here under the names they had when this
//! runtime had an executor of its own.

pub(crate) mod reactor;

use std::future::{Future, poll_fn};
use std::net::SocketAddr;
use std::pin::pin;
use std::task::Poll;

use fairway_stack::time::Instant;
use hyper::body::{Body, Incoming};
use hyper::service::HttpService;

pub use hyper_util::rt::TokioTimer as Timer;
pub use reactor::{AsyncService, AsyncSession, MainTask, Shared};
pub use tokio::time::{Sleep, sleep, sleep_until};

use crate::net::{TcpListener, TcpStream};

/// Adds `task` to the shard whose thread calls, as
/// `tokio::task::spawn_local` does, and keeps it among the server's tasks:
/// a draining shard waits for it within the grace period, aborts it at the
/// end, and counts it if it panics.
///
/// # Panics
///
/// Called outside a Fairway shard's thread (a task, or a handler).
pub fn spawn(task: impl Future<Output = ()> + 'static) {
    reactor::current().expect("fairway::rt::spawn outside a Fairway shard's thread").spawn(Box::pin(task));
}

/// The shard's time (the loop's clock, read once per turn).
///
/// # Panics
///
/// Called outside a Fairway shard's thread.
#[must_use]
pub fn now() -> Instant {
    reactor::current().expect("fairway::rt::now outside a Fairway shard's thread").now()
}

/// Ready once the server begins to shut down (SIGINT, SIGTERM, or a
/// [`ServerHandle::shutdown`](crate::ServerHandle::shutdown)): finish what
/// is in progress, accept no more.
pub async fn draining() {
    poll_fn(|cx| match reactor::current() {
        Some(rt) => rt.poll_draining(cx),
        None => Poll::Ready(()),
    })
    .await;
}

/// Serves HTTP/1.1 on `stream` with hyper until the connection ends, with
/// the shard's [`Timer`], the server's header timeout, and a graceful
/// shutdown once the server [drains](draining) (the request in progress is
/// answered, then the connection closes).
///
/// # Errors
///
/// What hyper reports for the connection (a malformed request, a timeout,
/// a reset).
pub async fn serve_http1<S, B>(stream: TcpStream, service: S) -> Result<(), hyper::Error>
where
    S: HttpService<Incoming, ResBody = B>,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let header_timeout = reactor::current().map(|rt| rt.header_timeout());
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(Timer::new()).keep_alive(true).header_read_timeout(header_timeout);
    let mut conn = pin!(builder.serve_connection(stream, service));
    let mut drain = pin!(draining());
    let mut told = false;
    poll_fn(|cx| {
        if !told && drain.as_mut().poll(cx).is_ready() {
            told = true;
            conn.as_mut().graceful_shutdown();
        }
        conn.as_mut().poll(cx)
    })
    .await
}

/// Accepts the shard's connections until the server drains, serving each
/// with hyper ([`serve_http1`]) in a task of its own, with the service
/// `make` returns for its peer.
pub async fn serve<F, S, B>(mut make: F)
where
    F: FnMut(SocketAddr) -> S,
    S: HttpService<Incoming, ResBody = B> + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let listener = match TcpListener::shard() {
        Ok(listener) => listener,
        Err(e) => {
            tracing::error!("fairway::rt::serve: {e}");
            return;
        }
    };
    while let Ok((stream, peer)) = listener.accept().await {
        let service = make(peer);
        spawn(async move {
            if let Err(e) = serve_http1(stream, service).await {
                tracing::debug!(%peer, "connection: {e}");
            }
        });
    }
}

/// Serves an axum `Router` on the shard's connections ([`serve`] with
/// hyper-util's tower adapter): the main task of an axum application.
#[cfg(feature = "axum")]
pub async fn axum(router: ::axum::Router) {
    serve(move |_| hyper_util::service::TowerToHyperService::new(router.clone())).await;
}
