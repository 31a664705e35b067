//! HTTP/1.1 as a sans-IO layer: bytes in, bytes out, and the application
//! API on top of it.
//!
//! No sockets, no clock (time is passed in), no threads, and no heap
//! allocation per request in steady state: a connection's buffers are
//! allocated once by [`HttpConn::new`] and reused by [`HttpConn::reset`].
//! Every backend drives it the same way, through the [host](crate::host)
//! and [`HttpService`].
//!
//! What it owns:
//!
//! - [`HttpConn`]: one connection's state machine: keep-alive (HTTP/1.1 by
//!   default, HTTP/1.0 on `Connection: keep-alive`), pipelining (responses
//!   strictly in request order; a request whose body is still arriving, or
//!   whose answer is deferred or streaming, holds back the ones behind
//!   it), `Content-Length` and chunked request bodies, `Expect:
//!   100-continue`, `HEAD`, and the limits: 414, 431, 400, 413, 501 (a
//!   method no route knows, a transfer coding other than chunked), 505 (an
//!   HTTP major version other than 1; a newer HTTP/1.x is read as 1.1),
//!   408 on a head that takes longer than `header_timeout` from its first
//!   byte or a body slower than `body_timeout` and `body_min_rate` allow,
//!   503 on an answer deferred past `response_timeout`, a silent close
//!   after `idle_timeout`.
//! - [`Handler`]: what answers requests (see [`handler`]): at once,
//!   streamed, after reading the body, or later; a [`Router`] composes
//!   handlers by method and path.
//! - the built-in endpoints ([`builtin`](mod@builtin)): `/plaintext`, `/json`,
//!   `/bytes/{n}`, `/upload`, `/metrics`, `/healthz`, static files
//!   ([`StaticFiles`]) and the index at `/`, each a handler.
//! - [`date`]: HTTP dates, and the per-second [`DateCache`] a runtime keeps
//!   for [`Site::now_date`].
//!
//! # Driving a connection
//!
//! Each call takes the time and an [`Env`]: the shard's [`Site`], the
//! [`Handler`], and the waker that has the connection driven again.
//!
//! ```text
//! accepted:   conn.reset(now); conn.attach(slot, peer)   (a pooled HttpConn)
//! readable:   while conn.wants_input():
//!                 n = transport.recv(conn.recv_buf())   (0 = peer's FIN: conn.on_eof(now); break)
//!                 conn.on_recv(n, now, env)
//! then flush: loop:
//!                 out = conn.output(now, env);   if out is empty: break
//!                 n = transport.send(out);       conn.consume(n);  if n < out.len(): break
//!             if conn.should_close(): close the transport (the response is out; FIN)
//! writable,   flush again; then, if conn.wants_input(), read again: requests
//! or woken:   held back by a full output window (or by their handler) go on
//! timer:      at conn.deadline(): conn.on_timeout(now, env), then flush
//! closed:     conn.finish(handler): the handler lets go of what it held
//! ```
//!
//! [`HttpConn::on_input`] copies from a slice instead of
//! `recv_buf`/`on_recv`, for transports that hand out their own buffers, and
//! for tests.
//!
//! # Changes from the contract first agreed (issue 5)
//!
//! - `output(now, env)` and `on_timeout(now, env)` take what they need:
//!   `output` may answer requests that were waiting for window room (so it
//!   needs the site and the time for their latency), and a 408 needs the
//!   `Date`.
//! - `on_input` returns how many bytes it took: with the output window full
//!   and the input buffer full, it takes no more (backpressure); the rest
//!   must be offered again after a flush. `recv_buf` / `on_recv` read in
//!   place without the copy.
//! - `should_close()` (= `close_after_flush() && !wants_output()`) and
//!   `wants_input()` say when to close and when to read.
//! - [`HttpConfig::output_window`] sizes the output window.
//!
//! # Decisions
//!
//! - **Latency** passed to [`Site::record`] runs from the arrival of the
//!   request's first byte (the `now` of the call that delivered it) to the
//!   response's head being queued in the output window, for every final
//!   response (not for a silent close). An upload's includes reading its
//!   body. Queued, not written: this layer cannot see the transport send.
//! - `/bytes/{n}` over `max_bytes` is **400** (the request is well formed
//!   and small; 413 is about request content) and the connection stays open;
//!   a non-numeric n is 404.
//! - A request is handed to its handler as soon as its head is parsed. One
//!   the handler answers then has the body it carries read and dropped
//!   before the next request is looked at; one whose handler reads the body
//!   (`/upload`) is answered when the body is complete.
//! - Every 400/413/414/431/501 (but a method's, which leaves the request
//!   framed) and 505, and every 408, closes the connection after the
//!   response; a body that trickles in after its request was answered is
//!   cut at the same deadline without another answer; an idle connection (no request started, or a peer that stopped
//!   reading or sending a body) is closed silently after `idle_timeout`.
//! - HTTP/1.1 requests need exactly one `Host` (RFC 9112 §3.2).
//! - `100 Continue` goes to every HTTP/1.1 request with `Expect:
//!   100-continue` and a body, just before its final response (an upload's
//!   comes when its body is complete), even when some of the body has
//!   already arrived (RFC 9110 §10.1.1 allows omitting it then; sending it
//!   always keeps the output independent of how the input was split). A
//!   head refused outright (413 and the like) gets no 100; nor does one
//!   whose handler gathers the body (`collect_body`) when its declared
//!   `Content-Length` is over `max_collect` (413 at once, and the
//!   connection closes), nor one whose handler panicked (500).
//! - A body that is read and dropped (its request was answered already)
//!   and breaks its framing (a bad chunk, over `max_body`) cannot be
//!   answered again: the connection closes after what is queued.
//! - The peer's EOF: complete requests already in are answered; a head or
//!   body it cuts short gets no response; the connection closes once the
//!   output is flushed. After a connection stops reading (any close),
//!   [`HttpConn::on_input`] takes and drops whatever it is offered.
//! - Empty lines before a request line (RFC 9112 §2.2) are dropped as they
//!   arrive and start no header timer.
//! - A head is parsed only when no earlier response is still streaming and
//!   the window has room for a head and an inline body; the header timeout
//!   runs only while a partial head is waiting for more bytes, from the
//!   arrival of its first byte (so a head that arrived long ago behind a
//!   response the peer was slow to read can time out soon after).
//! - A static file that cannot be read to the end once its head is out
//!   (it shrank) ends the connection after what was sent.

pub mod builtin;
pub mod date;
pub mod h2;
pub mod handler;
pub mod router;
pub mod static_files;

mod body;
pub(crate) mod chunked;
mod conn;
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub mod fuzzing;
mod input;
mod json;
pub(crate) mod parse;
mod range;
mod response;
mod service;
mod window;

#[cfg(test)]
mod handler_tests;
#[cfg(test)]
mod tests;

use std::time::Duration;

pub use body::pattern_byte;
pub use builtin::builtin;
pub use conn::{Env, HttpConn};
pub use date::DateCache;
#[cfg(test)]
pub(crate) use handler::test_response;
pub use handler::{Context, Exchange, ExchangeMap, Handler, Head, Method, Produce, Reply, Request, Response};
pub use router::{FnHandler, Methods, Router, handler_fn};
pub use service::HttpService;
#[cfg(test)]
pub(crate) use service::TURN_BYTES;
pub use static_files::StaticFiles;

/// How the HTTP layer behaves; one per server, from the CLI or TOML.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpConfig {
    /// The longest request line (method, target, version); longer → 414.
    pub max_request_line: usize,
    /// The longest request head, request line included; longer → 431.
    /// A connection's input buffer is this large (at least 1 KiB).
    pub max_head: usize,
    /// The largest request body (`Content-Length` or chunked); larger → 413.
    pub max_body: u64,
    /// The largest `/bytes/{n}`; larger → 400.
    pub max_bytes: u64,
    /// A request head must arrive within this time from its first byte;
    /// later → 408 and close (slowloris).
    pub header_timeout: Duration,
    /// A connection with nothing in progress for this long is closed
    /// without a response; so is one whose peer stops reading or stops
    /// sending a body for this long.
    pub idle_timeout: Duration,
    /// A deferred answer ([`Handler`]) must come within this time of its
    /// request's head; later → 503 and close.
    pub response_timeout: Duration,
    /// A request body has this long from its start, plus a second for
    /// every `body_min_rate` bytes it brings; later → 408 and close (the
    /// slow-POST attack). Time its handler holds it back does not count.
    pub body_timeout: Duration,
    /// The average rate, bytes a second, that earns a body more time
    /// beyond `body_timeout`; 0: the whole body within `body_timeout`.
    pub body_min_rate: u64,
    /// The largest request body a handler may gather whole
    /// (`collect_body`); larger → 413.
    pub max_collect: usize,
    /// The `Server` header's value (printable ASCII; cut to 64 bytes).
    pub server_name: &'static str,
    /// The output window: responses are written into it and bodies streamed
    /// through it. Memory per connection is about `max_head +
    /// output_window` (at least 4 KiB).
    pub output_window: usize,
    /// HTTP/2 beside HTTP/1.1: by ALPN (`h2`) over TLS, and with prior
    /// knowledge (the connection preface) on a plain port.
    pub http2: bool,
    /// The most streams an HTTP/2 client may have open on one connection
    /// (`SETTINGS_MAX_CONCURRENT_STREAMS`); more are refused.
    pub http2_max_streams: u32,
}

impl Default for HttpConfig {
    fn default() -> HttpConfig {
        HttpConfig {
            max_request_line: 8 * 1024,
            max_head: 16 * 1024,
            max_body: 64 * 1024 * 1024,
            max_bytes: 1 << 30,
            header_timeout: Duration::from_secs(10),
            idle_timeout: Duration::from_secs(60),
            response_timeout: Duration::from_secs(30),
            body_timeout: Duration::from_secs(20),
            body_min_rate: 500,
            max_collect: 64 * 1024,
            server_name: "fairway",
            output_window: 32 * 1024,
            http2: true,
            http2_max_streams: 128,
        }
    }
}

/// What the HTTP layer needs from the server around it.
pub trait Site {
    /// The current `Date` value (an IMF-fixdate), cached and updated once
    /// a second by the runtime (see [`DateCache`]).
    fn now_date(&self) -> &[u8];

    /// Appends the Prometheus text for `GET /metrics` to `out` (cleared by
    /// the caller; its capacity is reused).
    fn metrics(&mut self, out: &mut Vec<u8>);

    /// The static files, when the server has a root (`--root`).
    fn files(&mut self) -> Option<&mut StaticFiles>;

    /// One final response was queued: its status, and the time from its
    /// request's first byte.
    fn record(&mut self, status: u16, latency: Duration);

    /// The shard's outbound sockets (upstream connections), when it may
    /// open any ([`crate::site::ShardSite::with_outbound`]).
    fn outbound(&mut self) -> Option<&mut crate::outbound::Outbound> {
        None
    }

    /// The shard's reverse-proxy counters, where it keeps them (for
    /// `/metrics`).
    fn proxy_counters(&mut self) -> Option<&mut crate::proxy::ProxyCounters> {
        None
    }
}
