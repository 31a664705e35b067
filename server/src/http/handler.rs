//! The [`Handler`] API: an application's answer to HTTP requests, per
//! core, run to completion, with no heap allocation per request.
//!
//! A shard's connections share one handler (`&mut self`: no locks, no
//! `Send`). For each request the connection calls [`Handler::request`] with
//! the parsed head; the handler answers through the [`Response`] it is
//! given, which says what happens next:
//!
//! | the handler calls | what follows |
//! |---|---|
//! | `res.text(..)`, `res.status(..)…body(..)` | the answer is queued now; a request body is read and dropped |
//! | `res.status(..)…stream(len)` | the head is queued now; the body comes from [`Handler::produce`] as the window frees up (chunked when the length is unknown) |
//! | `res.read_body()` | the body is streamed to [`Handler::body`], then [`Handler::body_end`] answers |
//! | `res.collect_body()` | the body is gathered (up to [`HttpConfig::max_collect`](super::HttpConfig::max_collect), 413 beyond) and handed whole to [`Handler::body_end`] |
//! | `res.defer()` | nothing yet: the connection waits until the handler's [waker](Context::waker) is woken (or the time it gave [`Context::wake_at`]), then calls [`Handler::resume`] (and again each time, until it answers); a request body is read and dropped meanwhile |
//!
//! Responses stay in request order: while an exchange is deferred,
//! streaming or reading its body, the requests pipelined behind it wait.
//! A deferred answer not given within `response_timeout` is answered 503
//! (and the connection closed); [`Handler::cancel`] tells the handler that
//! an exchange it knows of ended unanswered (timeout, or the connection
//! went away). A handler that panics gets that connection a 500 (or, once
//! its head is out, a reset) and nothing else: the shard keeps serving.
//!
//! # State between calls
//!
//! Calls for one exchange share its [`Exchange`] id (`cx.exchange()`); a
//! handler that needs state across them keeps it in an [`ExchangeMap`],
//! which reuses its room, so steady state allocates nothing.

use std::net::SocketAddr;
use std::task::Waker;

use fairway_stack::time::Instant;

use crate::http::Site;
use crate::http::body::Body;
use crate::http::parse;
use crate::http::response::{ByteWriter, Common, HeadWriter, Persistence, reason};

/// An application's answer to requests. See the [module documentation](self).
pub trait Handler {
    /// A request's head has arrived: answer it, begin streaming, ask for
    /// its body, or defer.
    fn request(&mut self, cx: &mut Context<'_>, req: &Request<'_>, res: Response<'_>) -> Reply;

    /// Bytes of the request body, in order, after `res.read_body()`.
    /// Returns how many it took; taking fewer stops reading (back-pressure)
    /// until the [waker](Context::waker) is woken.
    fn body(&mut self, cx: &mut Context<'_>, data: &[u8]) -> usize {
        let _ = cx;
        data.len()
    }

    /// The request body is complete (`body` is all of it after
    /// `res.collect_body()`, empty after `res.read_body()`): answer, or
    /// defer. Asking for the body again is a 500.
    fn body_end(&mut self, cx: &mut Context<'_>, body: &[u8], res: Response<'_>) -> Reply {
        let _ = (cx, body);
        res.error(500)
    }

    /// Room for more of a streamed body: write into `out` and say how
    /// much, and whether that was the end. May be called when nothing is
    /// ready (answer [`Produce::Pending`] and wake the waker later).
    fn produce(&mut self, cx: &mut Context<'_>, out: &mut [u8]) -> Produce {
        let _ = (cx, out);
        Produce::End(0)
    }

    /// A deferred exchange may answer now (its waker was woken, or the
    /// connection had an event): answer, or defer again.
    fn resume(&mut self, cx: &mut Context<'_>, res: Response<'_>) -> Reply {
        let _ = cx;
        res.defer()
    }

    /// An exchange the handler deferred, streams or reads ended without
    /// completing (timeout, or the connection closed): drop its state.
    fn cancel(&mut self, exchange: Exchange) {
        let _ = exchange;
    }
}

impl<H: Handler + ?Sized> Handler for Box<H> {
    fn request(&mut self, cx: &mut Context<'_>, req: &Request<'_>, res: Response<'_>) -> Reply {
        (**self).request(cx, req, res)
    }
    fn body(&mut self, cx: &mut Context<'_>, data: &[u8]) -> usize {
        (**self).body(cx, data)
    }
    fn body_end(&mut self, cx: &mut Context<'_>, body: &[u8], res: Response<'_>) -> Reply {
        (**self).body_end(cx, body, res)
    }
    fn produce(&mut self, cx: &mut Context<'_>, out: &mut [u8]) -> Produce {
        (**self).produce(cx, out)
    }
    fn resume(&mut self, cx: &mut Context<'_>, res: Response<'_>) -> Reply {
        (**self).resume(cx, res)
    }
    fn cancel(&mut self, exchange: Exchange) {
        (**self).cancel(exchange);
    }
}

/// What [`Handler::produce`] did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Produce {
    /// Wrote this many bytes; more to come.
    Data(usize),
    /// Wrote this many bytes, the last of the body.
    End(usize),
    /// Nothing ready: wake the [waker](Context::waker) when there is.
    Pending,
    /// The body cannot be finished (its source failed: an upstream that
    /// closed or stalled mid-response): what was produced is sent, then
    /// the connection is closed without ending the body (a chunked body
    /// gets no last chunk), so the client sees it cut, never complete.
    Cut,
}

/// One request-response exchange: its connection's slot and its number on
/// that connection. Ids are reused, but never while the exchange lives.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Exchange {
    slot: u32,
    seq: u32,
}

impl Exchange {
    pub(crate) fn new(slot: u32, seq: u32) -> Exchange {
        Exchange { slot, seq }
    }

    /// A small number, dense over the shard's connections and HTTP/2
    /// streams (HTTP/1 connections even, streams odd): at most one
    /// exchange of a connection, or of a stream, is in a handler's hands
    /// at a time.
    #[must_use]
    pub fn index(self) -> usize {
        self.slot as usize
    }
}

/// The exchange index of the HTTP/1 connection in host slot `slot`.
pub(crate) fn connection_index(slot: u32) -> u32 {
    slot.wrapping_mul(2)
}

/// The exchange index of HTTP/2 stream `i` of the bridge.
pub(crate) fn stream_index(i: u32) -> u32 {
    i.wrapping_mul(2) | 1
}

/// Per-exchange state for a handler, indexed by [`Exchange`]: a vector
/// that keeps its room, so steady state allocates nothing.
#[derive(Debug)]
pub struct ExchangeMap<T> {
    entries: Vec<Option<(Exchange, T)>>,
}

impl<T> Default for ExchangeMap<T> {
    fn default() -> ExchangeMap<T> {
        ExchangeMap { entries: Vec::new() }
    }
}

impl<T> ExchangeMap<T> {
    /// Keeps `value` for `ex` (replacing what an earlier exchange left).
    pub fn insert(&mut self, ex: Exchange, value: T) {
        let i = ex.index();
        if i >= self.entries.len() {
            self.entries.resize_with(i + 1, || None);
        }
        self.entries[i] = Some((ex, value));
    }

    /// The state of `ex`, if it has one.
    pub fn get_mut(&mut self, ex: Exchange) -> Option<&mut T> {
        match self.entries.get_mut(ex.index()) {
            Some(Some((at, value))) if *at == ex => Some(value),
            _ => None,
        }
    }

    /// Takes the state of `ex` out.
    pub fn remove(&mut self, ex: Exchange) -> Option<T> {
        let entry = self.entries.get_mut(ex.index())?;
        match entry {
            Some((at, _)) if *at == ex => entry.take().map(|(_, value)| value),
            _ => None,
        }
    }
}

/// What a handler call may use besides the request: the exchange's id and
/// waker, the time, the peer, and what the shard's connections share.
pub struct Context<'a> {
    pub(crate) exchange: Exchange,
    pub(crate) now: Instant,
    pub(crate) waker: &'a Waker,
    pub(crate) peer: Option<SocketAddr>,
    pub(crate) secure: bool,
    pub(crate) site: &'a mut dyn Site,
    pub(crate) wake_at: Option<Instant>,
}

impl Context<'_> {
    /// This exchange.
    #[must_use]
    pub fn exchange(&self) -> Exchange {
        self.exchange
    }

    /// Wakes this exchange's connection: keep a clone to answer a deferred
    /// exchange, resume a stream, or take more body later. Waking from
    /// another thread works too (it ends the shard's sleep).
    #[must_use]
    pub fn waker(&self) -> &Waker {
        self.waker
    }

    /// The loop's time (the stack's clock).
    #[must_use]
    pub fn now(&self) -> Instant {
        self.now
    }

    /// Has this exchange's connection driven again at `at` (on the
    /// shard's timer wheel): a deferred answer, a stream or a held-back
    /// body gets its call then, as if the waker were woken.
    pub fn wake_at(&mut self, at: Instant) {
        self.wake_at = Some(self.wake_at.map_or(at, |w| w.min(at)));
    }

    /// [`wake_at`](Self::wake_at) `after` from now.
    pub fn wake_after(&mut self, after: std::time::Duration) {
        self.wake_at(self.now + after.into());
    }

    /// The client's address, where the backend knows it.
    #[must_use]
    pub fn peer(&self) -> Option<SocketAddr> {
        self.peer
    }

    /// Whether the client's connection speaks TLS (HTTPS).
    #[must_use]
    pub fn is_secure(&self) -> bool {
        self.secure
    }

    /// The shard's date, files and metrics.
    pub fn site(&mut self) -> &mut dyn Site {
        self.site
    }
}

/// A request method.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Method {
    /// `GET`
    Get,
    /// `HEAD`: answered as `GET` without the body.
    Head,
    /// `POST`
    Post,
    /// `PUT`
    Put,
    /// `DELETE`
    Delete,
    /// `PATCH`
    Patch,
    /// `OPTIONS`
    Options,
    /// Any other (see [`Request::method_name`]).
    Other,
}

impl Method {
    /// The method a name stands for (case-sensitive, as RFC 9110 §9.1 says).
    #[must_use]
    pub fn from_name(name: &str) -> Method {
        match name {
            "GET" => Method::Get,
            "HEAD" => Method::Head,
            "POST" => Method::Post,
            "PUT" => Method::Put,
            "DELETE" => Method::Delete,
            "PATCH" => Method::Patch,
            "OPTIONS" => Method::Options,
            _ => Method::Other,
        }
    }

    /// Its name, for an `Allow` header.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Method::Get => "GET",
            Method::Head => "HEAD",
            Method::Post => "POST",
            Method::Put => "PUT",
            Method::Delete => "DELETE",
            Method::Patch => "PATCH",
            Method::Options => "OPTIONS",
            Method::Other => "",
        }
    }
}

/// A parsed request head, borrowed from the connection's input.
#[derive(Clone, Copy)]
pub struct Request<'r> {
    pub(crate) head: &'r parse::Request<'r, 'r>,
}

impl<'r> Request<'r> {
    /// The method.
    #[must_use]
    pub fn method(&self) -> Method {
        Method::from_name(self.head.method_name)
    }

    /// The method as sent.
    #[must_use]
    pub fn method_name(&self) -> &'r str {
        self.head.method_name
    }

    /// The path, without query or fragment; always starts with `/`, not
    /// percent-decoded.
    #[must_use]
    pub fn path(&self) -> &'r str {
        self.head.path
    }

    /// The query, without the `?`, if there is one.
    #[must_use]
    pub fn query(&self) -> Option<&'r str> {
        self.head.query
    }

    /// The request target as sent.
    #[must_use]
    pub fn target(&self) -> &'r str {
        self.head.target
    }

    /// An HTTP/1.0 request.
    #[must_use]
    pub fn is_http10(&self) -> bool {
        self.head.http10
    }

    /// The first header named `name` (case-insensitive).
    #[must_use]
    pub fn header(&self, name: &str) -> Option<&'r [u8]> {
        self.head.header(name)
    }

    /// Every header, in order: (name, value).
    pub fn headers(&self) -> impl Iterator<Item = (&'r str, &'r [u8])> + 'r {
        self.head.headers.iter().map(|h| (h.name, h.value))
    }

    /// Every header named `name`, in order.
    pub fn headers_named<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'r [u8]> + 's {
        self.head.headers_named(name)
    }

    /// The body's declared length: `Some(0)` for none, `None` when chunked.
    #[must_use]
    pub fn content_length(&self) -> Option<u64> {
        match self.head.framing {
            parse::Framing::None => Some(0),
            parse::Framing::Length(n) => Some(n),
            parse::Framing::Chunked => None,
        }
    }

    /// Whether a body follows the head.
    #[must_use]
    pub fn has_body(&self) -> bool {
        self.head.framing != parse::Framing::None
    }
}

impl std::fmt::Debug for Request<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Request").field("method", &self.method_name()).field("target", &self.target()).finish()
    }
}

/// What a handler call did; made only by [`Response`] and [`Head`], so
/// every call answers exactly one way.
#[must_use = "a handler returns its reply"]
#[derive(Debug)]
pub struct Reply(pub(crate) ReplyKind);

impl Reply {
    /// Whether the handler is called again for this exchange (its body is
    /// read, its answer deferred or streamed).
    pub(crate) fn holds(&self) -> bool {
        !matches!(self.0, ReplyKind::Answer { streams: false, .. })
    }
}

#[derive(Debug)]
pub(crate) enum ReplyKind {
    /// A head (and maybe an inline body) was written: `len` bytes of the
    /// response's room (`None`: it did not fit, or a header was bad); the
    /// rest of the body to come is in the response's body slot, made by
    /// the handler's `produce` when it `streams`.
    Answer {
        status: u16,
        len: Option<usize>,
        close: bool,
        streams: bool,
    },
    ReadBody,
    Collect,
    Defer,
}

/// What an answer's head says about the connection and its body, from its
/// request.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Shape {
    pub persistence: Persistence,
    /// A HEAD request: the same head, no body.
    pub head_only: bool,
    /// An HTTP/1.0 request: no chunked bodies.
    pub http10: bool,
}

impl Shape {
    /// An answer the server gives and closes after (an error).
    pub(crate) const REFUSAL: Shape = Shape { persistence: Persistence::Close, head_only: false, http10: false };
}

/// Where a handler writes its answer: the connection's output window. See
/// the [module documentation](self).
pub struct Response<'a> {
    pub(crate) out: &'a mut [u8],
    pub(crate) common: Common<'a>,
    pub(crate) shape: Shape,
    pub(crate) text: &'a mut Vec<u8>,
    /// Where the rest of the body goes: the connection's, so it is not
    /// moved through the handler's return.
    pub(crate) body: &'a mut Body,
}

impl<'a> Response<'a> {
    /// Begins the answer: the status line, `Server` and `Date`.
    #[inline]
    pub fn status(self, status: u16) -> Head<'a> {
        let Response { out, common, shape, text, body } = self;
        Head {
            w: HeadWriter::start(out, status, common),
            status,
            persistence: shape.persistence,
            head_only: shape.head_only,
            http10: shape.http10,
            text,
            slot: body,
            length_written: false,
            bad: false,
        }
    }

    /// `status` with a `text/plain; charset=utf-8` body.
    #[inline]
    pub fn text(self, status: u16, body: &str) -> Reply {
        self.status(status).header("Content-Type", b"text/plain; charset=utf-8").body(body.as_bytes())
    }

    /// `status` with an `application/json` body (already serialized).
    pub fn json(self, status: u16, body: &[u8]) -> Reply {
        self.status(status).header("Content-Type", b"application/json").body(body)
    }

    /// `status` with its reason phrase and a newline as a `text/plain`
    /// body: how the server answers errors.
    #[inline]
    pub fn error(self, status: u16) -> Reply {
        let mut text = [0u8; 48];
        let mut w = ByteWriter::new(&mut text);
        w.put(reason(status).as_bytes());
        w.put(b"\n");
        let len = w.len();
        self.status(status).trusted_header("Content-Type", b"text/plain").body(&text[..len])
    }

    /// Streams the request body to [`Handler::body`], then asks
    /// [`Handler::body_end`]. A request without a body goes to `body_end`
    /// at once.
    pub fn read_body(self) -> Reply {
        Reply(ReplyKind::ReadBody)
    }

    /// Gathers the request body and hands it whole to
    /// [`Handler::body_end`]; 413 when it is over `max_collect`.
    pub fn collect_body(self) -> Reply {
        Reply(ReplyKind::Collect)
    }

    /// Answers later: see [`Handler::resume`].
    pub fn defer(self) -> Reply {
        Reply(ReplyKind::Defer)
    }
}

/// A response head being written (after [`Response::status`]): headers,
/// then the body one of four ways.
pub struct Head<'a> {
    w: HeadWriter<'a>,
    status: u16,
    persistence: Persistence,
    head_only: bool,
    http10: bool,
    text: &'a mut Vec<u8>,
    slot: &'a mut Body,
    length_written: bool,
    bad: bool,
}

impl<'a> Head<'a> {
    /// Adds a header. The server writes `Content-Length` and
    /// `Transfer-Encoding` itself (from the body); `Connection: close`
    /// closes the connection after this response. A name that is not a
    /// token, a value with a CR, LF or NUL, or a framing header makes the
    /// answer a 500.
    #[must_use]
    #[inline]
    pub fn header(mut self, name: &str, value: &[u8]) -> Head<'a> {
        let token = !name.is_empty() && name.bytes().all(|b| TOKEN[usize::from(b)]);
        let clean = !value.iter().any(|&b| b == b'\r' || b == b'\n' || b == 0);
        if !token || !clean {
            self.bad = true;
            return self;
        }
        // Only names of these lengths can be the ones the server owns.
        match name.len() {
            10 if name.eq_ignore_ascii_case("connection") => {
                if value.split(|&b| b == b',').any(|o| o.trim_ascii().eq_ignore_ascii_case(b"close")) {
                    self.persistence = Persistence::Close;
                }
            }
            14 | 17
                if name.eq_ignore_ascii_case("content-length") || name.eq_ignore_ascii_case("transfer-encoding") =>
            {
                self.bad = true;
            }
            _ => self.w.header(name, value),
        }
        self
    }

    /// A header the server itself writes, known to be valid (the built-in
    /// endpoints' `Content-Type`, `ETag`, ...): no checks.
    #[must_use]
    #[inline]
    pub(crate) fn trusted_header(mut self, name: &str, value: &[u8]) -> Head<'a> {
        self.w.header(name, value);
        self
    }

    /// Adds a header whose value is a number.
    #[must_use]
    pub fn header_u64(self, name: &str, value: u64) -> Head<'a> {
        let mut digits = itoa::Buffer::new();
        let text = digits.format(value);
        self.header(name, text.as_bytes())
    }

    /// The whole body: copied into the window with the head when it fits,
    /// else into the connection's text buffer (whose room is reused).
    #[inline]
    pub fn body(mut self, body: &[u8]) -> Reply {
        self.content_length(body.len() as u64);
        let Head { w, status, persistence, head_only, text, slot, bad, .. } = self;
        let mut w = w.end(persistence);
        let mut tail = Body::None;
        if !head_only {
            if w.room() >= body.len() {
                w.put(body);
            } else {
                text.clear();
                text.extend_from_slice(body);
                tail = Body::Text { next: 0, end: body.len() };
            }
        }
        answer(slot, status, if bad { None } else { w.finish() }, tail, persistence)
    }

    /// A body that lives as long as the program: sent from where it is.
    pub fn static_body(mut self, body: &'static [u8]) -> Reply {
        self.content_length(body.len() as u64);
        let Head { w, status, persistence, head_only, slot, bad, .. } = self;
        let w = w.end(persistence);
        let tail = if head_only || body.is_empty() { Body::None } else { Body::Static { bytes: body, next: 0 } };
        answer(slot, status, if bad { None } else { w.finish() }, tail, persistence)
    }

    /// A body rendered by `render` into the connection's text buffer
    /// (cleared first; its room is reused).
    #[inline]
    pub fn body_with(mut self, render: impl FnOnce(&mut Vec<u8>)) -> Reply {
        self.text.clear();
        render(self.text);
        let len = self.text.len();
        self.content_length(len as u64);
        let Head { w, status, persistence, head_only, slot, bad, .. } = self;
        let w = w.end(persistence);
        let tail = if head_only || len == 0 { Body::None } else { Body::Text { next: 0, end: len } };
        answer(slot, status, if bad { None } else { w.finish() }, tail, persistence)
    }

    /// A body that [`Handler::produce`] writes as the window frees up:
    /// exactly `len` bytes, or, when the length is unknown, chunked
    /// (HTTP/1.1) or ended by closing the connection (HTTP/1.0). A HEAD
    /// request gets the head alone and no `produce` calls.
    pub fn stream(mut self, len: Option<u64>) -> Reply {
        let chunked = match len {
            Some(n) => {
                self.content_length(n);
                false
            }
            None if self.http10 => {
                self.persistence = Persistence::Close;
                false
            }
            None => {
                self.w.header("Transfer-Encoding", b"chunked");
                true
            }
        };
        let Head { w, status, persistence, head_only, slot, bad, .. } = self;
        let w = w.end(persistence);
        let tail = match len {
            _ if head_only => Body::None,
            Some(0) => Body::None,
            remaining => Body::Produced { remaining, chunked, done: false },
        };
        answer(slot, status, if bad { None } else { w.finish() }, tail, persistence)
    }

    /// Writes `Content-Length` once, unless the status forbids a body
    /// length (1xx, 204, 304: RFC 9110 §8.6).
    #[inline]
    pub(crate) fn content_length(&mut self, len: u64) {
        if !self.length_written && !matches!(self.status, 100..=199 | 204 | 304) {
            self.w.header_u64("Content-Length", len);
        }
        self.length_written = true;
    }

    /// The head so far, for the built-in endpoints' own bodies.
    pub(crate) fn writer(&mut self) -> &mut HeadWriter<'a> {
        &mut self.w
    }

    /// Ends the head with `tail` to follow (the built-in endpoints' bodies:
    /// files, generated bytes).
    #[inline]
    pub(crate) fn finish_with(self, tail: Body) -> Reply {
        let Head { w, status, persistence, head_only, slot, bad, .. } = self;
        let w = w.end(persistence);
        let tail = if head_only { Body::None } else { tail };
        answer(slot, status, if bad { None } else { w.finish() }, tail, persistence)
    }
}

/// The bytes of an RFC 9110 token (`tchar`): a header name is one or more.
static TOKEN: [bool; 256] = {
    let mut table = [false; 256];
    let mut b = 0;
    while b < 256 {
        let c = b as u8;
        table[b] = c.is_ascii_alphanumeric()
            || matches!(
                c,
                b'!' | b'#' | b'$' | b'%' | b'&' | b'\'' | b'*' | b'+' | b'-' | b'.' | b'^' | b'_' | b'`' | b'|' | b'~'
            );
        b += 1;
    }
    table
};

/// Puts `tail` in the connection's body slot and says what was written.
#[inline]
fn answer(slot: &mut Body, status: u16, len: Option<usize>, tail: Body, persistence: Persistence) -> Reply {
    let streams = matches!(tail, Body::Produced { .. });
    *slot = tail;
    Reply(ReplyKind::Answer { status, len, close: persistence == Persistence::Close, streams })
}

/// Runs `f` with a [`Response`] over a buffer of its own (a keep-alive
/// GET's shape) and returns what `f` returned and the head it wrote, when
/// its reply answered.
#[cfg(test)]
pub(crate) fn test_response<R>(f: impl FnOnce(Response<'_>) -> (R, Option<Reply>)) -> (R, Vec<u8>) {
    let mut out = vec![0u8; 16 * 1024];
    let (mut text, mut body) = (Vec::new(), Body::None);
    let res = Response {
        out: &mut out,
        common: Common { server: b"fairway", date: b"Thu, 01 Jan 1970 00:00:00 GMT" },
        shape: Shape { persistence: Persistence::Default, head_only: false, http10: false },
        text: &mut text,
        body: &mut body,
    };
    let (found, reply) = f(res);
    let len = match reply {
        Some(Reply(ReplyKind::Answer { len: Some(n), .. })) => n,
        _ => 0,
    };
    out.truncate(len);
    (found, out)
}
