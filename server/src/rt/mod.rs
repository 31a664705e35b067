//! The per-core async runtime: a thin layer over the tokio runtime every
//! shard runs (a current-thread `LocalRuntime`, see
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
//! - [`serve_connection`], [`serve`]: hyper 1.x's server on a
//!   [`crate::net::TcpStream`], HTTP/1.1 and HTTP/2 (hyper-util's automatic
//!   one: prior knowledge on a plain port, ALPN's `h2` over TLS), with
//!   tokio's timer, the configured header timeout, HTTP/2's limits and a
//!   graceful shutdown; [`serve_http1`] for HTTP/1.1 alone; [`LocalExec`],
//!   hyper's executor on a shard; and [`axum()`] (feature `axum`): an
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
use std::pin::{Pin, pin};
use std::task::Poll;

use fairway_stack::time::Instant;
use hyper::body::{Body, Incoming};
use hyper::service::{HttpService, Service};
use hyper::{Request, Response};

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

/// hyper's executor on a shard: `spawn_local`, so what it runs (an HTTP/2
/// connection's streams) stays on the shard and need not be `Send`. Give
/// it to hyper's (or hyper-util's) HTTP/2 builder.
#[derive(Clone, Copy, Debug, Default)]
pub struct LocalExec;

impl<F: Future + 'static> hyper::rt::Executor<F> for LocalExec {
    fn execute(&self, fut: F) {
        tokio::task::spawn_local(async move {
            fut.await;
        });
    }
}

/// The receive window of an HTTP/2 stream, and of a whole connection (what
/// one client's uploads may have in flight before the server reads them).
const HTTP2_STREAM_WINDOW: u32 = 256 * 1024;
const HTTP2_CONNECTION_WINDOW: u32 = 1024 * 1024;

/// Clients that reset this many streams the server has not answered yet,
/// without waiting, get a GOAWAY: the rapid-reset attack (CVE-2023-44487).
const HTTP2_MAX_PENDING_RESETS: usize = 20;

/// Serves `stream` with hyper until the connection ends: HTTP/1.1, or
/// HTTP/2 when the client opens with its preface (prior knowledge, or after
/// TLS's ALPN chose `h2`), as the server's configuration allows; with
/// tokio's timer, the server's header timeout, HTTP/2's limits
/// (concurrent streams, the header list's size, rapid resets), and a
/// graceful shutdown once the server [drains](draining): the requests in
/// progress are answered (HTTP/2: GOAWAY, then the open streams finish),
/// then the connection closes.
///
/// # Errors
///
/// What hyper reports for the connection (a malformed request, a timeout,
/// a reset, a protocol error).
pub async fn serve_connection<S, B>(
    stream: TcpStream,
    service: S,
) -> Result<(), Box<dyn std::error::Error + Send + Sync>>
where
    S: Service<Request<Incoming>, Response = Response<B>> + 'static,
    S::Future: 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B: Body + 'static,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let limits = limits();
    let mut builder = hyper_util::server::conn::auto::Builder::new(LocalExec);
    builder.http1().timer(Timer::new()).keep_alive(true).header_read_timeout(limits.header_timeout);
    let builder = match limits.http2 {
        Some((streams, header_list)) => {
            http2_limits!(builder.http2(), streams, header_list);
            builder
        }
        None => builder.http1_only(),
    };
    until_drained(builder.serve_connection(stream, service), |conn| conn.graceful_shutdown()).await
}

/// Serves HTTP/1.1 only on `stream` with hyper until the connection ends,
/// as [`serve_connection`] does it.
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
    let mut builder = hyper::server::conn::http1::Builder::new();
    builder.timer(Timer::new()).keep_alive(true).header_read_timeout(limits().header_timeout);
    until_drained(builder.serve_connection(stream, service), |conn| conn.graceful_shutdown()).await
}

/// Serves HTTP/2 only on `stream` (the connection preface comes first),
/// with [`serve_connection`]'s limits: what the shard runs for a `Handler`
/// application's HTTP/2 connections ([`crate::http::h2`]).
pub(crate) async fn serve_http2<S, B>(stream: TcpStream, service: S) -> Result<(), hyper::Error>
where
    S: Service<Request<Incoming>, Response = Response<B>> + 'static,
    S::Future: 'static,
    B: Body + 'static,
    S::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
    B::Error: Into<Box<dyn std::error::Error + Send + Sync>>,
{
    let (streams, header_list) = limits().http2.unwrap_or((100, 16 * 1024));
    let mut builder = hyper::server::conn::http2::Builder::new(LocalExec);
    http2_limits!(builder, streams, header_list);
    until_drained(builder.serve_connection(stream, service), |conn| conn.graceful_shutdown()).await
}

/// HTTP/2's settings and defences on a builder (hyper's, or hyper-util's
/// automatic one's HTTP/2 half: the same methods on two types): the
/// shard's timer, at most `streams` concurrent streams, header lists of
/// at most `header_list` bytes, rapid resets refused, and the windows.
macro_rules! http2_limits {
    ($builder:expr, $streams:expr, $header_list:expr) => {
        $builder
            .timer(Timer::new())
            .max_concurrent_streams($streams)
            .max_header_list_size($header_list)
            .max_pending_accept_reset_streams(HTTP2_MAX_PENDING_RESETS)
            .initial_stream_window_size(HTTP2_STREAM_WINDOW)
            .initial_connection_window_size(HTTP2_CONNECTION_WINDOW)
    };
}
use http2_limits;

/// Runs a hyper connection to its end, asking it to shut down gracefully
/// (`shutdown`: hyper's `graceful_shutdown`) once the server drains: the
/// requests in progress are answered, then it closes.
async fn until_drained<C: Future>(conn: C, mut shutdown: impl FnMut(Pin<&mut C>)) -> C::Output {
    let mut conn = pin!(conn);
    let mut drain = pin!(draining());
    let mut told = false;
    poll_fn(|cx| {
        if !told && drain.as_mut().poll(cx).is_ready() {
            told = true;
            shutdown(conn.as_mut());
        }
        conn.as_mut().poll(cx)
    })
    .await
}

/// The shard's serving limits (the defaults off a shard's thread).
fn limits() -> reactor::ServeLimits {
    reactor::current().map_or_else(
        || reactor::ServeLimits { header_timeout: std::time::Duration::from_secs(10), http2: Some((128, 16 * 1024)) },
        |rt| rt.limits(),
    )
}

/// Accepts the shard's connections until the server drains, serving each
/// with hyper ([`serve_connection`]: HTTP/1.1 and HTTP/2) in a task of its
/// own, with the service `make` returns for its peer.
pub async fn serve<F, S, B>(mut make: F)
where
    F: FnMut(SocketAddr) -> S,
    S: Service<Request<Incoming>, Response = Response<B>> + 'static,
    S::Future: 'static,
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
            if let Err(e) = serve_connection(stream, service).await {
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
