//! [`HttpConn`]: one connection's state machine. The contract it keeps (how a
//! driver calls it, and why) is written once, in the [module docs](super);
//! what it asks of the application, in the [handler docs](super::handler).
//!
//! Inside, a connection is an input buffer, an output window, the body of the
//! response being streamed (if any), and where it is in reading requests:
//!
//! ```text
//!   Head ──head: handler.request──▶ answered ──▶ Body (dropped) ──▶ Head
//!    │                 ├─read_body / collect_body──▶ Body (to the handler) ──▶ Answer ──body_end──▶ Head
//!    │                 └─defer──▶ Body (dropped) ──▶ Deferred ──resume (when woken)──▶ Head
//!   any refusal, Connection: close, EOF ──▶ Closing (flush, then close)
//! ```
//!
//! A request head is parsed only when the window has room for the largest
//! head and inline body ([`RESERVE`]) and no earlier response is still
//! streaming or waiting for its handler, which is what keeps pipelined
//! responses in order; a request body is read (dropped, or handed to the
//! handler) whatever the window holds, unless the handler holds it back.
//!
//! Every handler call is made under `catch_unwind`: a handler that panics
//! costs its connection a 500 (or a reset, once its head is out), never the
//! shard.

use std::net::SocketAddr;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::task::Waker;
use std::time::Duration as StdDuration;

use fairway_stack::time::{Duration, Instant};

use crate::http::body::Body;
use crate::http::chunked::{ChunkError, ChunkedDecoder};
use crate::http::handler::{Context, Exchange, Handler, Produce, Reply, ReplyKind, Request, Response, Shape};
use crate::http::input::Input;
use crate::http::parse::{self, Framing, Head, HeadLimits, MAX_HEADERS, Method, Reject};
use crate::http::response::{CONTINUE, Common, MAX_FIELD, MAX_INLINE_BODY, MAX_RESPONSE_HEAD, Persistence};
use crate::http::window::ByteWindow;
use crate::http::{HttpConfig, Site};

/// Window room needed before a request is answered: an interim 100, the
/// largest head and the largest inline body.
const RESERVE: usize = CONTINUE.len() + MAX_RESPONSE_HEAD + MAX_INLINE_BODY;

/// The smallest input buffer and output window, whatever the config says.
const MIN_INPUT: usize = 1024;
const MIN_OUTPUT: usize = 4096;

/// A chunk's size line as this layer writes it: eight hex digits (leading
/// zeros are allowed, RFC 9112 §7.1) and CRLF; and the CRLF after its data.
const CHUNK_HEAD: usize = 10;
const CHUNK_TAIL: usize = 2;
/// The last chunk and the end of the (empty) trailer section.
const LAST_CHUNK: &[u8] = b"0\r\n\r\n";

/// What a connection's calls need from around it: the shard's site, the
/// application, and the waker that has the connection driven again.
pub struct Env<'a> {
    /// The shard's date, files and metrics.
    pub site: &'a mut dyn Site,
    /// The application.
    pub handler: &'a mut dyn Handler,
    /// Wakes the connection (kept by handlers that answer later).
    pub waker: &'a Waker,
}

impl Env<'_> {
    /// The context of a handler call for exchange `id` of a connection
    /// with `peer`, and the handler to call.
    fn call(
        &mut self,
        id: Exchange,
        now: Instant,
        peer: Option<SocketAddr>,
        secure: bool,
    ) -> (Context<'_>, &mut dyn Handler) {
        let cx = Context { exchange: id, now, waker: self.waker, peer, secure, site: &mut *self.site, wake_at: None };
        (cx, &mut *self.handler)
    }
}

/// An exchange the handler has taken on, and what its answer will say.
#[derive(Clone, Copy, Debug)]
struct Pending {
    id: Exchange,
    /// When its request's first byte arrived.
    started: Instant,
    /// What its answer says about the connection and its body.
    shape: Shape,
    /// Its answer is due by then (503 after).
    due: Instant,
}

/// Where the connection is in reading requests.
#[derive(Debug)]
enum Reading {
    /// Waiting for (the rest of) a request head.
    Head,
    /// Reading a request's body into `sink`; `after` says what then.
    Body { framing: BodyFraming, sink: Sink, after: After, clock: BodyClock },
    /// A body for the handler is in (`status` 200) or was refused: its
    /// answer waits for window room and for the responses before it.
    Answer { pending: Pending, status: u16, collected: bool },
    /// The handler deferred its answer.
    Deferred { pending: Pending },
    /// No more requests are read; the connection closes once its output is
    /// flushed.
    Closing,
    /// The peer opened with HTTP/2's connection preface (prior knowledge,
    /// or after ALPN's `h2`): nothing here reads it; the driver hands the
    /// connection and its input ([`HttpConn::input_bytes`]) to an HTTP/2
    /// server ([`HttpConn::speaks_http2`]).
    Http2,
}

/// The first line of HTTP/2's connection preface (RFC 9113 §3.4), which no
/// HTTP/1 request starts with.
const HTTP2_PREFACE_LINE: &[u8] = b"PRI * HTTP/2.0\r\n";

/// How long a request body has had, against the body timeout: it must
/// come at `body_min_rate` on average after a start of `body_timeout`
/// (the slow-POST attack sends a byte a second, which no idle timeout
/// cuts). Time the handler holds the body back is not the peer's.
#[derive(Clone, Copy, Debug)]
struct BodyClock {
    since: Instant,
    got: u64,
    /// The handler has held the body back since then.
    held: Option<Instant>,
}

impl BodyClock {
    fn new(now: Instant) -> BodyClock {
        BodyClock { since: now, got: 0, held: None }
    }
}

#[derive(Debug)]
enum BodyFraming {
    Length { remaining: u64 },
    Chunked { decoder: ChunkedDecoder, seen: u64 },
}

/// Where a request body goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Sink {
    /// Nowhere: its request was answered, or will be without it.
    Drop,
    /// To [`Handler::body`], piece by piece.
    Stream,
    /// Into the connection's collection buffer, for [`Handler::body_end`].
    Collect,
}

/// What follows a request body.
#[derive(Clone, Copy, Debug)]
enum After {
    /// The next request (this one was answered).
    Head,
    /// [`Handler::body_end`].
    Answer(Pending),
    /// Waiting for [`Handler::resume`].
    Defer(Pending),
}

/// One HTTP/1.1 connection, transport-agnostic, reused across connections.
/// See the [module docs](super) for the calling sequence.
pub struct HttpConn {
    limits: HeadLimits,
    header_timeout: Duration,
    idle_timeout: Duration,
    response_timeout: Duration,
    body_timeout: Duration,
    body_min_rate: u64,
    max_collect: usize,
    server: &'static [u8],

    input: Input,
    out: ByteWindow,
    /// The rest of the response being streamed into `out`.
    body: Body,
    /// Bodies rendered or copied for streaming (the metrics text).
    text: Vec<u8>,
    /// A request body gathered for [`Handler::body_end`].
    collected: Vec<u8>,
    /// This request's `Date`, copied from the site so the site can be
    /// borrowed mutably while the head is written.
    date: [u8; MAX_FIELD],
    date_len: usize,

    reading: Reading,
    /// The exchange the handler holds (deferred, reading, streaming), if any.
    held: Option<Exchange>,
    /// Exchanges that ended before the handler finished them: it is told
    /// at the next call that has it.
    to_cancel: Option<Exchange>,
    /// A handler asked to be called again then ([`Context::wake_at`]).
    wake_at: Option<Instant>,
    /// The connection's slot (exchange ids) and peer.
    slot: u32,
    seq: u32,
    peer: Option<SocketAddr>,
    /// The connection speaks TLS.
    secure: bool,
    /// The last head parse found only part of a head: the header timeout runs.
    awaiting_head: bool,
    /// Work is waiting for window room (see [`wants_output`](Self::wants_output)).
    blocked: bool,
    /// The peer shut its write side.
    eof: bool,
    /// Closed without flushing (idle, or a response that cannot be completed).
    aborted: bool,
    /// The transport lends its send ring: bodies that need no framing are
    /// written there by [`body_into`](Self::body_into), not through `out`.
    in_place: bool,
    /// The latest time any call was given, and the last time the peer sent
    /// bytes or took some (the idle timeout runs from there).
    last_now: Instant,
    last_progress: Instant,
    /// HTTP/2's preface is looked for before the first head
    /// ([`accept_http2`](Self::accept_http2)).
    http2: bool,
    /// No head has been read on this connection yet.
    first_head: bool,
}

/// The room an answer is written in: the window's free space (at least
/// [`RESERVE`]) after the `at` bytes already written there (an interim
/// 100), and the connection's text buffer for bodies too large for it. A
/// macro rather than a method, so that it borrows only those fields of the
/// connection: the collected body and the peer stay usable beside it.
macro_rules! answer_room {
    ($conn:ident, $at:expr, $shape:expr) => {
        Response {
            out: &mut $conn.out.spare(RESERVE)[$at..],
            common: Common { server: $conn.server, date: &$conn.date[..$conn.date_len] },
            shape: $shape,
            text: &mut $conn.text,
            body: &mut $conn.body,
        }
    };
}

/// The earlier of two optional times.
fn earliest(a: Option<Instant>, b: Option<Instant>) -> Option<Instant> {
    match (a, b) {
        (Some(a), Some(b)) => Some(a.min(b)),
        (a, b) => a.or(b),
    }
}

impl HttpConn {
    /// A connection with its buffers allocated, as if [`reset`](Self::reset)
    /// at time zero.
    #[must_use]
    pub fn new(cfg: &HttpConfig) -> HttpConn {
        HttpConn {
            limits: HeadLimits {
                max_request_line: cfg.max_request_line,
                max_head: cfg.max_head,
                max_body: cfg.max_body,
            },
            header_timeout: cfg.header_timeout.into(),
            idle_timeout: cfg.idle_timeout.into(),
            response_timeout: cfg.response_timeout.into(),
            body_timeout: cfg.body_timeout.into(),
            body_min_rate: cfg.body_min_rate,
            max_collect: cfg.max_collect,
            server: cfg.server_name.as_bytes(),
            input: Input::new(cfg.max_head.max(MIN_INPUT)),
            out: ByteWindow::new(cfg.output_window.max(MIN_OUTPUT)),
            body: Body::None,
            text: Vec::new(),
            collected: Vec::new(),
            date: [0; MAX_FIELD],
            date_len: 0,
            reading: Reading::Head,
            held: None,
            to_cancel: None,
            wake_at: None,
            slot: 0,
            seq: 0,
            peer: None,
            secure: false,
            awaiting_head: false,
            blocked: false,
            eof: false,
            aborted: false,
            in_place: false,
            last_now: Instant::ZERO,
            last_progress: Instant::ZERO,
            http2: false,
            first_head: true,
        }
    }

    /// Makes this a fresh connection accepted at `now`, keeping its buffers.
    /// Call [`finish`](Self::finish) first if it served one before.
    pub fn reset(&mut self, now: Instant) {
        self.input.reset();
        self.out.clear();
        self.body = Body::None;
        self.text.clear();
        self.collected.clear();
        self.reading = Reading::Head;
        self.held = None;
        self.to_cancel = None;
        self.wake_at = None;
        self.awaiting_head = false;
        self.blocked = false;
        self.eof = false;
        self.aborted = false;
        self.last_now = now;
        self.last_progress = now;
        self.first_head = true;
    }

    /// Says whether a connection that opens with HTTP/2's preface is handed
    /// over ([`speaks_http2`](Self::speaks_http2)) rather than refused
    /// (505, as HTTP/2.0 is not HTTP/1.x): set when the driver has an
    /// HTTP/2 server to hand it to. Kept across connections, as
    /// [`set_in_place`](Self::set_in_place) is.
    pub fn accept_http2(&mut self, accept: bool) {
        self.http2 = accept;
    }

    /// The peer opened with HTTP/2's preface: hand the connection, with
    /// [`input_bytes`](Self::input_bytes), to an HTTP/2 server. Nothing
    /// more is read or written here.
    #[must_use]
    pub fn speaks_http2(&self) -> bool {
        matches!(self.reading, Reading::Http2)
    }

    /// The bytes read from the peer and not yet taken: for a connection
    /// that [`speaks_http2`](Self::speaks_http2), its preface and whatever
    /// followed it.
    #[must_use]
    pub fn input_bytes(&self) -> &[u8] {
        self.input.filled()
    }

    /// Says whether the transport lends its send ring (once, when the
    /// session is made: it outlives its connections)
    /// ([`Transport::SENDS_IN_PLACE`](crate::host::Transport::SENDS_IN_PLACE)):
    /// then file, pattern and copied bodies are left for
    /// [`body_into`](Self::body_into) to write there, one copy from their
    /// source to the ring, instead of passing through the output window.
    pub fn set_in_place(&mut self, in_place: bool) {
        self.in_place = in_place;
    }

    /// Whether the next bytes to send are body bytes that
    /// [`body_into`](Self::body_into) writes: the output window is empty
    /// (the head is out) and the body needs no framing.
    #[must_use]
    pub fn body_in_place(&self) -> bool {
        self.in_place && !self.aborted && self.out.is_empty() && self.body.is_some() && !self.body.is_produced()
    }

    /// Writes the next body bytes into `room` (the transport's send ring)
    /// and returns the count; 0 once the body is done, or when it cannot be
    /// completed (the connection then closes, as from the window). Call
    /// only while [`body_in_place`](Self::body_in_place), after
    /// [`output`](Self::output) in the same turn.
    pub fn body_into(&mut self, room: &mut [u8]) -> usize {
        match self.body.fill(room, &self.text) {
            Ok(n) => {
                if n > 0 {
                    self.last_progress = self.last_now;
                }
                n
            }
            Err(_) => {
                // As in `stream_body`: the head promised a length the body
                // cannot keep; the peer learns of it from the close.
                self.body = Body::None;
                self.close_reading();
                0
            }
        }
    }

    /// Names the connection for its exchanges (its host slot) and says who
    /// the peer is; both reach handlers through their [`Context`].
    pub fn attach(&mut self, slot: u32, peer: Option<SocketAddr>) {
        self.slot = slot;
        self.peer = peer;
        self.secure = false;
    }

    /// Says the connection speaks TLS (after [`attach`](Self::attach));
    /// handlers see it through [`Context::is_secure`].
    pub fn set_secure(&mut self, secure: bool) {
        self.secure = secure;
    }

    /// The connection is gone: tells `handler` of the exchange it still
    /// held, if any, so it can let go of it.
    pub fn finish(&mut self, handler: &mut dyn Handler) {
        for ex in [self.to_cancel.take(), self.held.take()].into_iter().flatten() {
            let _ = catch_unwind(AssertUnwindSafe(|| handler.cancel(ex)));
        }
    }

    /// Whether the driver should read from the peer: the connection still
    /// reads requests and has room for more bytes.
    #[must_use]
    pub fn wants_input(&self) -> bool {
        !self.aborted
            && !self.eof
            && !matches!(self.reading, Reading::Closing | Reading::Http2)
            && !self.input.is_full()
    }

    /// Where to read the peer's bytes; then call [`on_recv`](Self::on_recv).
    /// Empty when [`wants_input`](Self::wants_input) is false.
    pub fn recv_buf(&mut self) -> &mut [u8] {
        if self.wants_input() { self.input.spare() } else { &mut [] }
    }

    /// `n` bytes were read into [`recv_buf`](Self::recv_buf) at `now`:
    /// parses every complete request, answers it, queues responses in order.
    pub fn on_recv(&mut self, n: usize, now: Instant, env: &mut Env<'_>) {
        self.last_now = now;
        if n == 0 || !self.wants_input() {
            return;
        }
        self.input.commit(n, now);
        self.last_progress = now;
        self.advance(now, env);
    }

    /// Feeds `data` (copied into the input buffer) and returns how much was
    /// taken: less than `data.len()` when the input buffer is full because
    /// the output window is, or the handler holds its body back (offer the
    /// rest again after a flush or a wake). Once the connection reads no
    /// more requests, all of `data` is taken and dropped. Never panics.
    pub fn on_input(&mut self, data: &[u8], now: Instant, env: &mut Env<'_>) -> usize {
        let mut taken = 0;
        while taken < data.len() {
            if self.aborted || self.eof || matches!(self.reading, Reading::Closing) {
                return data.len();
            }
            let spare = self.recv_buf();
            let n = spare.len().min(data.len() - taken);
            if n == 0 {
                break;
            }
            spare[..n].copy_from_slice(&data[taken..taken + n]);
            self.on_recv(n, now, env);
            taken += n;
        }
        taken
    }

    /// The peer shut its write side: requests already in are answered, and
    /// the connection closes once they are flushed.
    pub fn on_eof(&mut self, now: Instant) {
        self.last_now = now;
        self.eof = true;
        if self.input.is_empty() && matches!(self.reading, Reading::Head | Reading::Body { .. }) {
            self.close_reading();
        }
    }

    /// Bytes to send next; empty when there are none. May answer requests
    /// that were waiting for window room (or for their handler), so it
    /// takes the environment and the time.
    pub fn output(&mut self, now: Instant, env: &mut Env<'_>) -> &[u8] {
        self.last_now = now;
        self.advance(now, env);
        if self.aborted { &[] } else { self.out.filled() }
    }

    /// What [`output`](Self::output) returned last and is not consumed
    /// yet, without driving the connection again.
    #[must_use]
    pub fn queued_output(&self) -> &[u8] {
        if self.aborted { &[] } else { self.out.filled() }
    }

    /// The transport accepted the first `n` bytes of [`output`](Self::output).
    pub fn consume(&mut self, n: usize) {
        if n > 0 {
            self.out.consume(n);
            self.last_progress = self.last_now;
        }
    }

    /// Whether [`output`](Self::output) has, or may produce, bytes to send.
    #[must_use]
    pub fn wants_output(&self) -> bool {
        !self.aborted && (!self.out.is_empty() || self.body.is_some() || self.blocked)
    }

    /// No request in progress: nothing buffered from the peer, nothing
    /// queued or waiting to be sent, and the connection is between
    /// requests. A server shutting down closes such connections at once
    /// and lets the others finish.
    #[must_use]
    pub fn is_idle(&self) -> bool {
        !self.aborted && matches!(self.reading, Reading::Head) && self.input.is_empty() && !self.wants_output()
    }

    /// The connection closes after its queued output is flushed (an error,
    /// `Connection: close`, HTTP/1.0, the peer's EOF), or at once.
    #[must_use]
    pub fn close_after_flush(&self) -> bool {
        self.aborted || matches!(self.reading, Reading::Closing)
    }

    /// Close the transport now: everything that will be sent has been.
    #[must_use]
    pub fn should_close(&self) -> bool {
        self.aborted || (matches!(self.reading, Reading::Closing) && !self.wants_output())
    }

    /// When to call [`on_timeout`](Self::on_timeout): the header timeout of
    /// a head in progress, a deferred answer's due time, a time its handler
    /// asked to be called again, or the idle timeout.
    #[must_use]
    pub fn deadline(&self) -> Option<Instant> {
        if self.aborted {
            return None;
        }
        let mut at = self.last_progress + self.idle_timeout;
        if let Some(header) = self.header_deadline() {
            at = at.min(header);
        }
        if let Some(body) = self.body_deadline() {
            at = at.min(body);
        }
        if let Reading::Deferred { pending } = &self.reading {
            at = at.min(pending.due);
        }
        if let Some(wake) = self.wake_at {
            at = at.min(wake);
        }
        Some(at)
    }

    /// When a body still arriving is cut: `body_timeout` after it began,
    /// plus a second per `body_min_rate` bytes it brought. Not while the
    /// handler holds it back, nor while input waits to be read.
    fn body_deadline(&self) -> Option<Instant> {
        let Reading::Body { clock, .. } = &self.reading else { return None };
        if clock.held.is_some() || !self.input.is_empty() {
            return None;
        }
        let earned = match self.body_min_rate {
            0 => 0,
            rate => clock.got.saturating_mul(1_000_000) / rate,
        };
        Some(clock.since + self.body_timeout + Duration::from_micros(earned))
    }

    fn header_deadline(&self) -> Option<Instant> {
        if !self.awaiting_head || !matches!(self.reading, Reading::Head) {
            return None;
        }
        self.input.first_arrival().map(|first| first + self.header_timeout)
    }

    /// A deadline passed: a head that took too long is answered 408, an
    /// answer the handler did not give in time 503 (and the connection
    /// closes after either); an idle connection closes silently.
    pub fn on_timeout(&mut self, now: Instant, env: &mut Env<'_>) {
        self.last_now = now;
        self.flush_cancel(env.handler);
        if self.aborted {
            return;
        }
        if self.wake_at.is_some_and(|at| at <= now) {
            // The handler's own timer: the drive that follows calls it.
            self.wake_at = None;
        }
        let room = !self.body.is_some() && self.out.room() >= RESERVE;
        if let Some(deadline) = self.header_deadline()
            && now >= deadline
            && room
        {
            let started = self.input.first_arrival().unwrap_or(now);
            self.input.clear();
            self.awaiting_head = false;
            self.refuse(408, started, now, env.site);
            return;
        }
        if let Some(deadline) = self.body_deadline()
            && now >= deadline
        {
            match self.reading {
                // Answered already: nobody waits for a 408.
                Reading::Body { after: After::Head, .. } => self.close_reading(),
                Reading::Body { after: After::Answer(pending) | After::Defer(pending), .. } if room => {
                    self.to_cancel = self.held.take();
                    self.flush_cancel(env.handler);
                    self.input.clear();
                    self.refuse(408, pending.started, now, env.site);
                }
                _ => self.abort(),
            }
            return;
        }
        if let Reading::Deferred { pending } = self.reading
            && now >= pending.due
            && room
        {
            self.to_cancel = self.held.take();
            self.flush_cancel(env.handler);
            self.input.clear();
            self.refuse(503, pending.started, now, env.site);
            return;
        }
        if now >= self.last_progress + self.idle_timeout {
            self.abort();
        }
    }

    /// Stops reading requests; what is queued is still flushed. An exchange
    /// the handler was reading or deferring ends unanswered.
    fn close_reading(&mut self) {
        if matches!(
            self.reading,
            Reading::Body { after: After::Answer(_) | After::Defer(_), .. }
                | Reading::Answer { .. }
                | Reading::Deferred { .. }
        ) {
            self.to_cancel = self.held.take().or(self.to_cancel);
        }
        self.reading = Reading::Closing;
        self.input.clear();
        self.awaiting_head = false;
    }

    /// Closes without flushing.
    fn abort(&mut self) {
        self.aborted = true;
        self.body = Body::None;
        self.out.clear();
        self.close_reading();
        self.to_cancel = self.held.take().or(self.to_cancel);
    }

    /// Tells the handler of an exchange that ended without it.
    fn flush_cancel(&mut self, handler: &mut dyn Handler) {
        if let Some(ex) = self.to_cancel.take() {
            let _ = catch_unwind(AssertUnwindSafe(|| handler.cancel(ex)));
        }
    }

    /// Does everything the buffered input, the window's room and the
    /// handler allow.
    fn advance(&mut self, now: Instant, env: &mut Env<'_>) {
        self.flush_cancel(env.handler);
        self.blocked = false;
        loop {
            if self.aborted {
                return;
            }
            self.stream_body(now, env);
            match self.reading {
                Reading::Closing => {
                    self.input.clear();
                    return;
                }
                Reading::Http2 => return,
                Reading::Head => {
                    self.awaiting_head = false;
                    self.skip_empty_lines();
                    if self.input.is_empty() {
                        if self.eof {
                            self.close_reading();
                        }
                        return;
                    }
                    if self.http2 && self.first_head {
                        let input = self.input.filled();
                        let seen = input.len().min(HTTP2_PREFACE_LINE.len());
                        if input[..seen] == HTTP2_PREFACE_LINE[..seen] {
                            if seen == HTTP2_PREFACE_LINE.len() {
                                self.reading = Reading::Http2;
                                return;
                            }
                            // The preface so far: the rest decides (under
                            // the header timeout, as a head would be).
                            self.awaiting_head = !self.eof;
                            if self.eof {
                                self.close_reading();
                            }
                            return;
                        }
                    }
                    if self.body.is_some() || self.out.room() < RESERVE {
                        self.blocked = true;
                        return;
                    }
                    if !self.read_head(now, env) {
                        if self.eof {
                            self.close_reading(); // this head will never be whole
                        } else {
                            self.awaiting_head = true;
                        }
                        return;
                    }
                }
                Reading::Body { .. } => {
                    if !self.read_body(now, env) {
                        if self.eof && self.input.is_empty() {
                            self.close_reading();
                        }
                        return;
                    }
                }
                Reading::Answer { pending, status, collected } => {
                    if self.body.is_some() || self.out.room() < RESERVE {
                        self.blocked = true;
                        return;
                    }
                    self.answer_body(pending, status, collected, now, env);
                }
                Reading::Deferred { pending } => {
                    if self.body.is_some() || self.out.room() < RESERVE {
                        self.blocked = true;
                        return;
                    }
                    if !self.resume(pending, now, env) {
                        return;
                    }
                }
            }
        }
    }

    /// Moves as much of the streamed body into the window as fits.
    fn stream_body(&mut self, now: Instant, env: &mut Env<'_>) {
        if !self.body.is_some() {
            return;
        }
        if self.body.is_produced() {
            self.produce(now, env);
            return;
        }
        let half = self.out.capacity() / 2;
        let spare = self.out.spare(half);
        if spare.is_empty() {
            return;
        }
        if self.in_place && self.body.remaining().is_none_or(|rest| rest > spare.len() as u64) {
            // `body_into` writes it straight into the transport's ring. A
            // body that fits beside its head whole goes with it: one send
            // for a small answer is cheaper than a second call.
            return;
        }
        match self.body.fill(spare, &self.text) {
            Ok(n) => self.out.commit(n),
            Err(_) => {
                // The head promised a length the body cannot keep: the peer
                // learns of it from the close, after what was sent.
                self.body = Body::None;
                self.close_reading();
            }
        }
    }

    /// Asks the handler for more of a streamed body, framing it as chunks
    /// when its length is unknown.
    fn produce(&mut self, now: Instant, env: &mut Env<'_>) {
        let Body::Produced { remaining, chunked, done } = self.body else { return };
        let Some(id) = self.held else {
            self.body = Body::None;
            return;
        };
        let half = self.out.capacity() / 2;
        let spare = self.out.spare(half);
        if done {
            // Only the last chunk is left to write.
            if spare.len() >= LAST_CHUNK.len() {
                spare[..LAST_CHUNK.len()].copy_from_slice(LAST_CHUNK);
                self.out.commit(LAST_CHUNK.len());
                self.body = Body::None;
                self.held = None;
            }
            return;
        }
        let (head, tail) = if chunked { (CHUNK_HEAD, CHUNK_TAIL) } else { (0, 0) };
        if spare.len() <= head + tail {
            return;
        }
        let mut room = spare.len() - head - tail;
        if let Some(r) = remaining {
            room = room.min(usize::try_from(r).unwrap_or(usize::MAX));
        }
        let (mut cx, handler) = env.call(id, now, self.peer, self.secure);
        let dst = &mut spare[head..head + room];
        let produced = catch_unwind(AssertUnwindSafe(|| handler.produce(&mut cx, dst)));
        self.wake_at = earliest(self.wake_at, cx.wake_at);
        let (n, end) = match produced {
            Ok(Produce::Pending) => return,
            Ok(Produce::Cut) => {
                self.body = Body::None;
                self.held = None;
                self.close_reading();
                return;
            }
            Ok(Produce::Data(n)) => (n.min(room), false),
            Ok(Produce::End(n)) => (n.min(room), true),
            Err(_) => {
                // Its head is out: the peer learns of it from the reset.
                self.held = None;
                self.abort();
                return;
            }
        };
        if chunked && n > 0 {
            let mut size = [0u8; CHUNK_HEAD];
            for (i, digit) in size[..8].iter_mut().enumerate() {
                *digit = b"0123456789abcdef"[(n >> (28 - 4 * i)) & 0xf];
            }
            size[8..].copy_from_slice(b"\r\n");
            spare[..CHUNK_HEAD].copy_from_slice(&size);
            spare[CHUNK_HEAD + n..CHUNK_HEAD + n + CHUNK_TAIL].copy_from_slice(b"\r\n");
            self.out.commit(CHUNK_HEAD + n + CHUNK_TAIL);
        } else if !chunked {
            self.out.commit(n);
        }
        if n > 0 {
            self.last_progress = now;
        }
        let remaining = remaining.map(|r| r - n as u64);
        match (end || remaining == Some(0), remaining) {
            (false, _) => self.body = Body::Produced { remaining, chunked, done: false },
            (true, Some(r)) if r > 0 => {
                // It ended short of the length its head promised.
                self.body = Body::None;
                self.held = None;
                self.close_reading();
            }
            (true, _) if chunked => {
                self.body = Body::Produced { remaining, chunked, done: true };
                self.produce(now, env);
            }
            (true, _) => {
                self.body = Body::None;
                self.held = None;
            }
        }
    }

    /// RFC 9112 §2.2: empty lines before a request line are ignored. They
    /// are dropped here so a stray CRLF after a body starts no head timer.
    fn skip_empty_lines(&mut self) {
        let n = self.input.filled().iter().take_while(|&&b| b == b'\r' || b == b'\n').count();
        self.input.consume(n);
    }

    /// Parses the head at the front of the input and hands it to the
    /// handler. Returns false when the head is not whole yet.
    fn read_head(&mut self, now: Instant, env: &mut Env<'_>) -> bool {
        let started = self.input.first_arrival().unwrap_or(now);
        self.copy_date(env.site);
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let req = match parse::parse_head(self.input.filled(), &mut headers, &self.limits) {
            Ok(Head::Partial) => return false,
            Ok(Head::Complete(req)) => req,
            Err(Reject::NewerMinor { at }) => {
                // HTTP/1.2 and later 1.x are read as 1.1 (RFC 9110 §2.5).
                self.input.filled_mut()[at] = b'1';
                return self.read_head(now, env);
            }
            Err(reject) => {
                self.input.clear();
                self.refuse(reject.status(), started, now, env.site);
                return true;
            }
        };
        let persistence = match (req.keep_alive, req.http10) {
            (false, _) => Persistence::Close,
            (true, true) => Persistence::KeepAlive,
            (true, false) => Persistence::Default,
        };
        let (framing, head_len, http10) = (req.framing, req.head_len, req.http10);
        let head_only = req.method == Method::Head;
        let mut at = 0;
        if req.expect_continue && framing != Framing::None {
            // Sent whether or not the body has started to arrive (RFC 9110
            // §10.1.1 lets a server omit it then, not requires it), so the
            // output does not depend on how the input was split.
            let spare = self.out.spare(RESERVE);
            spare[..CONTINUE.len()].copy_from_slice(CONTINUE);
            at = CONTINUE.len();
        }
        self.first_head = false;
        self.seq = self.seq.wrapping_add(1);
        let id = Exchange::new(self.slot, self.seq);
        let shape = Shape { persistence, head_only, http10 };
        let pending = Pending { id, started, shape, due: now + self.response_timeout };
        let res = answer_room!(self, at, shape);
        let (mut cx, handler) = env.call(id, now, self.peer, self.secure);
        let reply = catch_unwind(AssertUnwindSafe(|| handler.request(&mut cx, &Request { head: &req }, res)));
        self.wake_at = earliest(self.wake_at, cx.wake_at);
        // The 100 goes out only if the body is wanted: a body the handler
        // would gather whole and whose declared length is over the limit is
        // answered 413 at once (RFC 9110 §10.1.1: a final status instead of
        // 100), as is a handler's panic, and the body is not invited.
        let refused_at_once = match &reply {
            Ok(Reply(ReplyKind::Collect)) => matches!(framing, Framing::Length(n) if n > self.max_collect as u64),
            Ok(_) => false,
            Err(_) => true,
        };
        if !refused_at_once {
            self.out.commit(at);
        }
        self.input.consume(head_len);
        let framing = match framing {
            Framing::None => BodyFraming::Length { remaining: 0 },
            Framing::Length(n) => BodyFraming::Length { remaining: n },
            Framing::Chunked => BodyFraming::Chunked { decoder: ChunkedDecoder::default(), seen: 0 },
        };
        let Ok(Reply(reply)) = reply else {
            self.input.clear();
            self.refuse(500, started, now, env.site);
            return true;
        };
        match reply {
            ReplyKind::Answer { .. } => {
                if !self.apply(Reply(reply), pending, now, env.site) {
                    return true;
                }
                if matches!(self.reading, Reading::Closing) {
                    // Its body, if any, need not be read: nothing follows.
                    return true;
                }
                // No body to drop (the usual request): on to the next head.
                if !matches!(framing, BodyFraming::Length { remaining: 0 }) {
                    self.reading =
                        Reading::Body { framing, sink: Sink::Drop, after: After::Head, clock: BodyClock::new(now) };
                }
            }
            ReplyKind::ReadBody | ReplyKind::Collect => {
                let sink = if matches!(reply, ReplyKind::Collect) { Sink::Collect } else { Sink::Stream };
                if sink == Sink::Collect
                    && matches!(framing, BodyFraming::Length { remaining } if remaining > self.max_collect as u64)
                {
                    self.input.clear();
                    self.refuse_exchange(id, 413, started, now, env);
                    return true;
                }
                self.collected.clear();
                self.held = Some(id);
                self.reading =
                    Reading::Body { framing, sink, after: After::Answer(pending), clock: BodyClock::new(now) };
            }
            ReplyKind::Defer => {
                self.held = Some(id);
                self.reading = Reading::Body {
                    framing,
                    sink: Sink::Drop,
                    after: After::Defer(pending),
                    clock: BodyClock::new(now),
                };
            }
        }
        true
    }

    /// Acts on a reply that answers (or defers) `pending`. Returns false
    /// when the connection can no longer go on (the answer did not fit).
    fn apply(&mut self, reply: Reply, pending: Pending, now: Instant, site: &mut dyn Site) -> bool {
        match reply.0 {
            ReplyKind::Answer { status, len: Some(len), close, streams } => {
                self.out.commit(len);
                self.held = streams.then_some(pending.id);
                site.record(status, StdDuration::from(now - pending.started));
                // Answered: nothing of it is left to cancel.
                self.reading = Reading::Head;
                if close || pending.shape.persistence == Persistence::Close {
                    self.close_reading();
                }
                true
            }
            ReplyKind::Answer { len: None, .. } => {
                // A head over its room, or a header the server refuses.
                self.body = Body::None;
                self.held = None;
                self.input.clear();
                self.refuse(500, pending.started, now, site);
                true
            }
            ReplyKind::Defer => {
                self.held = Some(pending.id);
                self.reading = Reading::Deferred { pending };
                true
            }
            ReplyKind::ReadBody | ReplyKind::Collect => {
                // The body was read already: a handler bug.
                self.to_cancel = Some(pending.id);
                self.held = None;
                self.input.clear();
                self.refuse(500, pending.started, now, site);
                true
            }
        }
    }

    /// Reads what the input holds of a request body. Returns false when it
    /// needs more input (or the handler holds the rest back).
    fn read_body(&mut self, now: Instant, env: &mut Env<'_>) -> bool {
        let Reading::Body { framing, sink, after, clock } = &mut self.reading else { return false };
        let (sink, after) = (*sink, *after);
        if sink == Sink::Drop && matches!(framing, BodyFraming::Length { remaining: 0 }) {
            // Nothing to read, nobody to tell: what follows the body, now.
            self.reading = match after {
                After::Head => Reading::Head,
                After::Answer(pending) => Reading::Answer { pending, status: 200, collected: false },
                After::Defer(pending) => Reading::Deferred { pending },
            };
            return true;
        }
        let id = match after {
            After::Answer(p) | After::Defer(p) => p.id,
            After::Head => Exchange::new(self.slot, self.seq),
        };
        let max_body = self.limits.max_body;
        let max_collect = self.max_collect;
        let input = &mut self.input;
        let collected = &mut self.collected;
        let (mut cx, handler) = env.call(id, now, self.peer, self.secure);
        let mut over = false;
        let mut panicked = false;
        let mut held_back = false;
        // Hands one piece of body to the sink; returns how much it took.
        let mut take = |data: &[u8]| -> usize {
            match sink {
                Sink::Drop => data.len(),
                Sink::Collect => {
                    if collected.len() + data.len() > max_collect {
                        over = true;
                    } else {
                        collected.extend_from_slice(data);
                    }
                    data.len()
                }
                Sink::Stream => {
                    if panicked || data.is_empty() {
                        return data.len();
                    }
                    match catch_unwind(AssertUnwindSafe(|| handler.body(&mut cx, data))) {
                        Ok(n) => {
                            let n = n.min(data.len());
                            held_back |= n < data.len();
                            n
                        }
                        Err(_) => {
                            panicked = true;
                            data.len()
                        }
                    }
                }
            }
        };
        // Some(status) once the body is done (200) or refused.
        let outcome = match framing {
            BodyFraming::Length { remaining: 0 } => Some(200),
            BodyFraming::Length { remaining } => {
                if input.is_empty() {
                    return false;
                }
                let offer = input.len().min(usize::try_from(*remaining).unwrap_or(usize::MAX));
                let used = take(&input.filled()[..offer]);
                input.consume(used);
                *remaining -= used as u64;
                clock.got += used as u64;
                (*remaining == 0).then_some(200)
            }
            BodyFraming::Chunked { decoder, seen } => {
                if decoder.is_done() {
                    Some(200)
                } else if input.is_empty() {
                    return false;
                } else {
                    let result = decoder.decode_taking(input.filled(), |data| {
                        let used = take(data);
                        *seen += used as u64;
                        used
                    });
                    match result {
                        Err(ChunkError::Malformed | ChunkError::SizeLineTooLong | ChunkError::TrailersTooLarge) => {
                            Some(400)
                        }
                        Ok(_) if *seen > max_body => Some(413),
                        Ok(used) => {
                            input.consume(used);
                            clock.got += used as u64;
                            decoder.is_done().then_some(200)
                        }
                    }
                }
            }
        };
        if held_back {
            clock.held.get_or_insert(now);
        } else if let Some(held) = clock.held.take() {
            clock.since += now - held;
        }
        let wake = cx.wake_at;
        let outcome = match outcome {
            _ if panicked => Some(500),
            _ if over => Some(413),
            outcome => outcome,
        };
        self.wake_at = earliest(self.wake_at, wake);
        let Some(status) = outcome else {
            if held_back {
                // The handler wakes the connection when it takes more.
                return false;
            }
            return true;
        };
        if panicked {
            // No cancel for a handler that panicked: it is not called again
            // for this exchange.
            self.held = None;
        }
        match (after, status) {
            (After::Head, 200) => self.reading = Reading::Head,
            // A dropped body that breaks its framing: its request is
            // answered already, so the connection just closes.
            (After::Head, _) => self.close_reading(),
            (After::Answer(pending), _) => {
                self.reading = Reading::Answer { pending, status, collected: sink == Sink::Collect };
            }
            (After::Defer(pending), 200) => self.reading = Reading::Deferred { pending },
            (After::Defer(pending), _) => self.reading = Reading::Answer { pending, status, collected: false },
        }
        true
    }

    /// Asks the handler to answer a request whose body is in, or refuses it.
    fn answer_body(&mut self, pending: Pending, status: u16, collected: bool, now: Instant, env: &mut Env<'_>) {
        if status != 200 {
            self.input.clear();
            self.refuse_exchange(pending.id, status, pending.started, now, env);
            return;
        }
        self.copy_date(env.site);
        let res = answer_room!(self, 0, pending.shape);
        let body = if collected { &self.collected[..] } else { &[] };
        let (mut cx, handler) = env.call(pending.id, now, self.peer, self.secure);
        let reply = catch_unwind(AssertUnwindSafe(|| handler.body_end(&mut cx, body, res)));
        self.wake_at = earliest(self.wake_at, cx.wake_at);
        self.held = None;
        match reply {
            Ok(reply) => {
                self.apply(reply, pending, now, env.site);
            }
            Err(_) => {
                self.input.clear();
                self.refuse(500, pending.started, now, env.site);
            }
        }
    }

    /// Asks the handler of a deferred exchange to answer. Returns whether it
    /// did (or failed): false while it still defers.
    fn resume(&mut self, pending: Pending, now: Instant, env: &mut Env<'_>) -> bool {
        self.copy_date(env.site);
        let res = answer_room!(self, 0, pending.shape);
        let (mut cx, handler) = env.call(pending.id, now, self.peer, self.secure);
        let reply = catch_unwind(AssertUnwindSafe(|| handler.resume(&mut cx, res)));
        self.wake_at = earliest(self.wake_at, cx.wake_at);
        match reply {
            Ok(Reply(ReplyKind::Defer)) => false,
            Ok(reply) => {
                self.apply(reply, pending, now, env.site);
                true
            }
            Err(_) => {
                self.held = None;
                self.input.clear();
                self.refuse(500, pending.started, now, env.site);
                true
            }
        }
    }

    /// Refuses an exchange the handler holds: it is told, then `status` is
    /// answered and the connection closes.
    fn refuse_exchange(&mut self, id: Exchange, status: u16, started: Instant, now: Instant, env: &mut Env<'_>) {
        if self.held == Some(id) {
            self.held = None;
            let _ = catch_unwind(AssertUnwindSafe(|| env.handler.cancel(id)));
        }
        self.refuse(status, started, now, env.site);
    }

    /// Answers `status` and closes after it: the input cannot be trusted.
    fn refuse(&mut self, status: u16, started: Instant, now: Instant, site: &mut dyn Site) {
        self.copy_date(site);
        let res = answer_room!(self, 0, Shape::REFUSAL);
        match res.error(status).0 {
            ReplyKind::Answer { status, len: Some(len), .. } => {
                self.out.commit(len);
                site.record(status, StdDuration::from(now - started));
                self.close_reading();
            }
            // The reserve rules this out.
            _ => self.abort(),
        }
    }

    fn copy_date(&mut self, site: &dyn Site) {
        let date = site.now_date();
        let len = date.len().min(MAX_FIELD);
        self.date[..len].copy_from_slice(&date[..len]);
        self.date_len = len;
    }
}
