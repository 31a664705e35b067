//! Each HTTP/2 stream served by the HTTP/1.1 layer, in memory: hyper's
//! HTTP/2 server (in a task of the shard) hands every request to the
//! [`Bridge`], which writes it as an HTTP/1.1 request into a pooled
//! [`HttpConn`] of its own, lets the shard's [`Handler`] answer it there
//! as on any connection (at once, streamed, deferred, reading or gathering
//! its body, with its waker and its timeouts), and hands the HTTP/1.1
//! response back to hyper as the stream's head and DATA frames.
//!
//! ```text
//! h2 task ── BridgeService::call ──▶ Exchange (request bytes) ──┐
//!                                                               ▼  driven by the host, each turn it is woken:
//!                       ResponseFuture ◀─ head ◀─ parse ◀── HttpConn ◀── Handler (site, waker, timers)
//!                       BridgeBody     ◀─ data ◀─ unframe ◀─┘
//! ```
//!
//! The two sides meet in the exchange table (shared by the shard's tasks
//! and its host on one thread): the task side starts exchanges and takes
//! their output, waking the exchange ([`TASK`]-tagged ids on the host's
//! wake queue) when it gave input or took output; the host side
//! ([`Bridge::drive`]) feeds the request to the connection, takes its
//! response, and wakes the task. Each exchange has a deadline on one timer
//! wheel (the connection's: a deferred answer's, a body's).
//!
//! Every virtual connection carries one request, `Connection: close`: its
//! response ends when the connection would close. What HTTP/1.1 says about
//! the connection (`Connection`, `Keep-Alive`, `Transfer-Encoding`) is not
//! passed on; `Expect` is HTTP/2's own business (hyper answers it), and a
//! request body without a declared length is framed chunked.

use std::cell::RefCell;
use std::future::Future;
use std::io::{self, Write as _};
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use fairway_stack::time::Instant;
use fairway_stack::{StoragePool, TimerWheel};
use hyper::body::{Body, Bytes, Frame, Incoming, SizeHint};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};

use crate::host::wake::{IdWaker, TASK, WakeQueue};
use crate::http::chunked::ChunkedDecoder;
use crate::http::handler::stream_index;
use crate::http::{Env, Handler, HttpConfig, HttpConn, Site};

/// The most response bytes an exchange holds for its task before the
/// connection's output waits (back-pressure from the HTTP/2 stream).
const MAX_BUFFERED: usize = 64 * 1024;

/// The most request-body bytes an exchange holds before it stops pulling
/// DATA frames (back-pressure onto HTTP/2's flow control).
const MAX_INPUT: usize = 32 * 1024;

/// The headers HTTP/1.1 uses for the connection, which are not the
/// stream's (RFC 9113 §8.2.2).
fn connection_specific(name: &str) -> bool {
    matches!(
        name,
        "connection" | "keep-alive" | "proxy-connection" | "transfer-encoding" | "upgrade" | "te" | "expect" | "host"
    )
}

/// How an exchange's response body is framed in its HTTP/1.1 form.
#[derive(Debug)]
enum Framing {
    /// No body (HEAD, 204, 304).
    None,
    Length(u64),
    Chunked(ChunkedDecoder),
    /// Until the connection closes.
    Close,
}

/// One HTTP/2 stream in the bridge.
struct Exchange {
    generation: u32,
    conn: HttpConn,
    /// The request as HTTP/1.1 bytes for `conn`, and how many it took.
    input: Vec<u8>,
    fed: usize,
    /// The request body still to be pulled, and whether it is framed
    /// chunked in `input`.
    body: Option<Incoming>,
    chunked: bool,
    /// The response's head so far, until it is whole.
    head: Vec<u8>,
    head_only: bool,
    /// The response, once its head is parsed, until the task takes it.
    response: Option<Response<BridgeBody>>,
    framing: Option<Framing>,
    /// Body bytes for the task, from `out_at`.
    out: Vec<u8>,
    out_at: usize,
    /// The body is complete; the connection failed or cut it.
    ended: bool,
    failed: bool,
    /// The connection is done with (closed); the task side is gone
    /// (response future and body dropped, or never made).
    conn_done: bool,
    task_gone: bool,
    /// The task waiting for the head or for body bytes.
    task: Option<Waker>,
}

/// An exchange's waker, kept for the slot's next exchanges.
struct SlotWaker {
    mark: Arc<IdWaker>,
    waker: Waker,
}

/// The exchange table. See the [module documentation](self).
pub(crate) struct Bridge {
    table: RefCell<Table>,
}

struct Table {
    http: HttpConfig,
    slots: Vec<Option<Exchange>>,
    generations: Vec<u32>,
    wakers: Vec<SlotWaker>,
    free: Vec<u32>,
    /// Slots to drive on the next turn.
    ready: Vec<u32>,
    wakes: Arc<WakeQueue>,
    conns: StoragePool<HttpConn>,
    timers: TimerWheel,
    /// Exchanges started so far.
    started: u64,
}

/// An exchange as the task side names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Id {
    slot: u32,
    generation: u32,
}

impl Table {
    fn get(&mut self, id: Id) -> Option<&mut Exchange> {
        self.slots.get_mut(id.slot as usize)?.as_mut().filter(|x| x.generation == id.generation)
    }

    /// Has slot `slot` driven on the next turn (through the host's wake
    /// queue, so a sleeping loop wakes for it).
    fn wake(&self, slot: u32) {
        if let Some(w) = self.wakers.get(slot as usize) {
            w.waker.wake_by_ref();
        }
    }
}

impl Bridge {
    /// A bridge whose exchanges' connections are configured by `http` and
    /// whose wake-ups go through `wakes` (the host's queue).
    pub(crate) fn new(http: &HttpConfig, wakes: Arc<WakeQueue>) -> Rc<Bridge> {
        Rc::new(Bridge {
            table: RefCell::new(Table {
                http: http.clone(),
                slots: Vec::new(),
                generations: Vec::new(),
                wakers: Vec::new(),
                free: Vec::new(),
                ready: Vec::new(),
                wakes,
                conns: StoragePool::new(usize::MAX, true),
                timers: TimerWheel::new(Instant::ZERO),
                started: 0,
            }),
        })
    }

    /// Starts an exchange for `req` from `peer` (over TLS if `secure`).
    fn start(&self, req: Request<Incoming>, peer: SocketAddr, secure: bool, now: Instant) -> Id {
        let mut t = self.table.borrow_mut();
        t.started += 1;
        let slot = match t.free.pop() {
            Some(slot) => slot,
            None => {
                let slot = t.slots.len() as u32;
                t.slots.push(None);
                t.generations.push(0);
                let (mark, waker) = IdWaker::new(&t.wakes, TASK | slot);
                t.wakers.push(SlotWaker { mark, waker });
                slot
            }
        };
        let i = slot as usize;
        t.generations[i] = t.generations[i].wrapping_add(1);
        let generation = t.generations[i];
        let http = t.http.clone();
        let mut conn = t.conns.take(|| HttpConn::new(&http));
        conn.reset(now);
        conn.attach(stream_index(slot), Some(peer));
        conn.set_secure(secure);
        let (parts, body) = req.into_parts();
        let head_only = parts.method == hyper::Method::HEAD;
        let mut input = Vec::new();
        let declared = body.size_hint().exact();
        let has_body = !body.is_end_stream();
        write_head(&mut input, &parts, has_body, declared);
        let chunked = has_body && !parts.headers.contains_key(hyper::header::CONTENT_LENGTH);
        t.slots[i] = Some(Exchange {
            generation,
            conn,
            input,
            fed: 0,
            body: has_body.then_some(body),
            chunked,
            head: Vec::new(),
            head_only,
            response: None,
            framing: None,
            out: Vec::new(),
            out_at: 0,
            ended: false,
            failed: false,
            conn_done: false,
            task_gone: false,
            task: None,
        });
        t.ready.push(slot);
        t.wake(slot);
        Id { slot, generation }
    }

    /// Slot `slot`'s waker was woken (the id without [`TASK`]).
    pub(crate) fn woken(&self, slot: u32) {
        let mut t = self.table.borrow_mut();
        if t.wakers.get(slot as usize).is_some_and(|w| w.mark.take()) {
            t.ready.push(slot);
        }
    }

    /// When an exchange next needs a turn of its own (a deadline), or now
    /// if one is ready.
    pub(crate) fn poll_timeout(&self) -> Option<Instant> {
        let t = self.table.borrow();
        if t.ready.is_empty() { t.timers.next_wakeup() } else { Some(Instant::ZERO) }
    }

    /// Exchanges started so far.
    pub(crate) fn started(&self) -> u64 {
        self.table.borrow().started
    }

    /// Exchanges in progress.
    pub(crate) fn live(&self) -> usize {
        let t = self.table.borrow();
        t.slots.len() - t.free.len()
    }

    /// Drives every exchange that was woken or whose deadline passed, with
    /// the shard's `handler` and `site`.
    pub(crate) fn drive(&self, now: Instant, handler: &mut dyn Handler, site: &mut dyn Site) {
        let mut t = self.table.borrow_mut();
        let t = &mut *t;
        while let Some(slot) = t.timers.pop_expired(now) {
            let Some(x) = t.slots.get_mut(slot as usize).and_then(Option::as_mut) else { continue };
            if !x.conn_done && x.conn.deadline().is_some_and(|at| at <= now) {
                let mut env = Env { site: &mut *site, handler: &mut *handler, waker: &t.wakers[slot as usize].waker };
                x.conn.on_timeout(now, &mut env);
            }
            t.ready.push(slot);
        }
        let mut ready = std::mem::take(&mut t.ready);
        ready.sort_unstable();
        ready.dedup();
        for &slot in &ready {
            let i = slot as usize;
            let Some(x) = t.slots.get_mut(i).and_then(Option::as_mut) else { continue };
            let waker = &t.wakers[i].waker;
            let mut env = Env { site: &mut *site, handler: &mut *handler, waker };
            drive_one(x, now, &mut env);
            if x.conn_done {
                t.timers.cancel(slot);
            } else if let Some(at) = x.conn.deadline()
                && t.timers.deadline(slot).is_none_or(|armed| at < armed)
            {
                t.timers.schedule(slot, at);
            }
            if x.conn_done && x.task_gone {
                let mut x = t.slots[i].take().expect("the exchange just driven");
                x.conn.finish(handler);
                t.conns.give(x.conn);
                t.free.push(slot);
            }
        }
        ready.clear();
        t.ready = ready;
    }

    /// Frees the pooled connections a whole trim interval did not need.
    pub(crate) fn trim(&self) -> usize {
        self.table.borrow_mut().conns.trim()
    }

    /// The task side is done with exchange `id` (its future or body was
    /// dropped): the exchange ends once its connection is done.
    fn let_go(&self, id: Id) {
        let mut t = self.table.borrow_mut();
        if let Some(x) = t.get(id) {
            x.task_gone = true;
            x.task = None;
            t.ready.push(id.slot);
            t.wake(id.slot);
        }
    }
}

/// Writes the HTTP/1.1 form of a request head into `out`.
fn write_head(out: &mut Vec<u8>, parts: &hyper::http::request::Parts, has_body: bool, declared: Option<u64>) {
    out.extend_from_slice(parts.method.as_str().as_bytes());
    out.push(b' ');
    let target = parts.uri.path_and_query().map_or("/", |p| p.as_str());
    out.extend_from_slice(if target.is_empty() { b"/" } else { target.as_bytes() });
    out.extend_from_slice(b" HTTP/1.1\r\nHost: ");
    match parts.uri.authority() {
        Some(authority) => out.extend_from_slice(authority.as_str().as_bytes()),
        None => {
            out.extend_from_slice(parts.headers.get(hyper::header::HOST).map_or(b"localhost", HeaderValue::as_bytes))
        }
    }
    out.extend_from_slice(b"\r\n");
    let mut cookies = 0;
    for (name, value) in &parts.headers {
        let name = name.as_str();
        if connection_specific(name) {
            continue;
        }
        if name == "cookie" {
            // HTTP/2 may split cookies (RFC 9113 §8.2.3): one line again.
            cookies += 1;
            continue;
        }
        out.extend_from_slice(name.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(value.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    if cookies > 0 {
        out.extend_from_slice(b"cookie: ");
        for (n, value) in parts.headers.get_all(hyper::header::COOKIE).iter().enumerate() {
            if n > 0 {
                out.extend_from_slice(b"; ");
            }
            out.extend_from_slice(value.as_bytes());
        }
        out.extend_from_slice(b"\r\n");
    }
    if has_body && !parts.headers.contains_key(hyper::header::CONTENT_LENGTH) {
        match declared {
            Some(len) => {
                out.extend_from_slice(b"content-length: ");
                out.extend_from_slice(itoa::Buffer::new().format(len).as_bytes());
                out.extend_from_slice(b"\r\n");
            }
            None => out.extend_from_slice(b"transfer-encoding: chunked\r\n"),
        }
    }
    out.extend_from_slice(b"connection: close\r\n\r\n");
}

/// One turn of an exchange: pull the request body, feed the connection,
/// take its output, wake the task if there is news for it.
fn drive_one(x: &mut Exchange, now: Instant, env: &mut Env<'_>) {
    if x.task_gone && !x.conn_done {
        // Nobody will read the answer (the stream was reset): the
        // connection ends here, and its handler is told.
        x.conn_done = true;
        return;
    }
    pull_body(x, env.waker);
    if x.fed < x.input.len() {
        let taken = x.conn.on_input(&x.input[x.fed..], now, env);
        x.fed += taken;
        if x.fed == x.input.len() {
            x.input.clear();
            x.fed = 0;
        }
    }
    let mut news = false;
    loop {
        if x.framing.is_some() && x.out.len() - x.out_at >= MAX_BUFFERED {
            // The task takes what is there first (and wakes this then).
            break;
        }
        if x.conn.output(now, env).is_empty() {
            break;
        }
        let used = take_output(x);
        news |= used > 0;
        if used == 0 {
            break;
        }
    }
    if x.conn.should_close() && !x.conn_done {
        x.conn_done = true;
        let complete = match &x.framing {
            Some(Framing::None | Framing::Close) => true,
            Some(Framing::Length(left)) => *left == 0,
            Some(Framing::Chunked(d)) => d.is_done(),
            None => false,
        };
        if complete {
            x.ended = true;
        } else {
            x.failed = true;
        }
        news = true;
    }
    // A body that waited for room in `input` can come in now.
    if x.body.is_some() && x.input.is_empty() {
        pull_body(x, env.waker);
        if x.fed < x.input.len() {
            env.waker.wake_by_ref();
        }
    }
    if news && let Some(task) = x.task.take() {
        task.wake();
    }
}

/// Takes request-body frames from the stream into `input`, framed chunked
/// when it has no declared length, while there is room; polled with the
/// exchange's waker, so a frame that arrives later drives it again.
fn pull_body(x: &mut Exchange, waker: &Waker) {
    let mut cx = Context::from_waker(waker);
    while let Some(body) = x.body.as_mut() {
        if x.input.len() - x.fed >= MAX_INPUT {
            return;
        }
        match Pin::new(body).poll_frame(&mut cx) {
            Poll::Ready(Some(Ok(frame))) => {
                if let Ok(data) = frame.into_data()
                    && !data.is_empty()
                {
                    if x.chunked {
                        let _ = write!(x.input, "{:x}\r\n", data.len());
                        x.input.extend_from_slice(&data);
                        x.input.extend_from_slice(b"\r\n");
                    } else {
                        x.input.extend_from_slice(&data);
                    }
                }
            }
            Poll::Ready(None) => {
                if x.chunked {
                    x.input.extend_from_slice(b"0\r\n\r\n");
                }
                x.body = None;
            }
            Poll::Ready(Some(Err(_))) => {
                // The client cut the body (a reset stream): the request
                // is never whole, and the connection ends unanswered.
                x.body = None;
                x.task_gone = true;
            }
            Poll::Pending => return,
        }
    }
}

/// Takes what the connection has queued for the response: head bytes
/// until it is whole and parsed, then body bytes unframed into `out`, as
/// far as there is room. Returns how many it took (consumed from the
/// connection).
fn take_output(x: &mut Exchange) -> usize {
    let mut used = 0;
    loop {
        let took = if x.framing.is_none() { take_head(x) } else { take_body(x) };
        used += took;
        let full = x.framing.is_some() && x.out.len() - x.out_at >= MAX_BUFFERED;
        if took == 0 || full || x.conn.queued_output().is_empty() {
            return used;
        }
    }
}

/// Head bytes: gathered until `\r\n\r\n`, then parsed into the response.
fn take_head(x: &mut Exchange) -> usize {
    let Exchange { conn, head, .. } = x;
    let out = conn.queued_output();
    let avail = out.len();
    let start = head.len();
    // The end of the head, in what was gathered and what is new.
    let search_from = start.saturating_sub(3);
    head.extend_from_slice(out);
    let end = head[search_from..].windows(4).position(|w| w == b"\r\n\r\n").map(|p| search_from + p + 4);
    let Some(end) = end else {
        conn.consume(avail);
        return avail;
    };
    let took = end - start;
    head.truncate(end);
    conn.consume(took);
    let mut headers = [httparse::EMPTY_HEADER; 64];
    let mut parsed = httparse::Response::new(&mut headers);
    let status = match parsed.parse(&head[..]) {
        Ok(httparse::Status::Complete(_)) => parsed.code.unwrap_or(500),
        _ => {
            x.failed = true;
            x.framing = Some(Framing::None);
            x.head.clear();
            return took;
        }
    };
    if (100..200).contains(&status) {
        // An interim response (none is asked for: `Expect` is not passed
        // on): dropped, the final one follows.
        x.head.clear();
        return took;
    }
    let mut builder =
        Response::builder().status(StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR));
    let mut length = None;
    let mut chunked = false;
    for h in parsed.headers.iter() {
        let lower = h.name.to_ascii_lowercase();
        if lower == "transfer-encoding" {
            chunked = h.value.split(|&b| b == b',').any(|c| c.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            continue;
        }
        if lower == "content-length" {
            length = std::str::from_utf8(h.value).ok().and_then(|v| v.trim().parse::<u64>().ok());
        }
        if connection_specific(&lower) {
            continue;
        }
        if let (Ok(name), Ok(value)) = (HeaderName::from_bytes(lower.as_bytes()), HeaderValue::from_bytes(h.value)) {
            builder = builder.header(name, value);
        }
    }
    let framing = if x.head_only || matches!(status, 204 | 304) {
        Framing::None
    } else if chunked {
        Framing::Chunked(ChunkedDecoder::default())
    } else if let Some(len) = length {
        Framing::Length(len)
    } else {
        Framing::Close
    };
    x.framing = Some(framing);
    x.head.clear();
    x.response = builder.body(BridgeBody { bridge: None, id: None, exact: length.filter(|_| !chunked) }).ok();
    if x.response.is_none() {
        x.failed = true;
    }
    took
}

/// Body bytes: unframed from the connection's output into `out`, at most
/// what fits under [`MAX_BUFFERED`].
fn take_body(x: &mut Exchange) -> usize {
    let Exchange { conn, framing, out, out_at, .. } = x;
    if *out_at > 0 && *out_at == out.len() {
        out.clear();
        *out_at = 0;
    }
    let room = MAX_BUFFERED.saturating_sub(out.len() - *out_at);
    let bytes = conn.queued_output();
    let avail = match framing {
        // Nothing of it is kept: all of it can go.
        Some(Framing::None) => bytes.len(),
        _ => bytes.len().min(room),
    };
    if avail == 0 {
        return 0;
    }
    let took = match framing {
        Some(Framing::None) => avail,
        Some(Framing::Length(left)) => {
            let n = (*left).min(avail as u64) as usize;
            out.extend_from_slice(&bytes[..n]);
            *left -= n as u64;
            // Bytes past the declared length would be a second response:
            // none comes on a `Connection: close` exchange; drop them.
            avail
        }
        Some(Framing::Chunked(decoder)) => match decoder.decode_taking(&bytes[..avail], |d| {
            out.extend_from_slice(d);
            d.len()
        }) {
            Ok(n) if decoder.is_done() => avail.max(n),
            Ok(n) => n,
            Err(_) => avail,
        },
        Some(Framing::Close) => {
            out.extend_from_slice(&bytes[..avail]);
            avail
        }
        None => 0,
    };
    conn.consume(took);
    took
}

/// hyper's service for one HTTP/2 connection: each request becomes an
/// exchange of the shard's bridge.
#[derive(Clone)]
pub(crate) struct BridgeService {
    pub(crate) bridge: Rc<Bridge>,
    pub(crate) peer: SocketAddr,
    pub(crate) secure: bool,
}

impl hyper::service::Service<Request<Incoming>> for BridgeService {
    type Response = Response<BridgeBody>;
    type Error = io::Error;
    type Future = ResponseFuture;

    fn call(&self, req: Request<Incoming>) -> ResponseFuture {
        let now = crate::rt::now();
        let id = self.bridge.start(req, self.peer, self.secure, now);
        ResponseFuture { bridge: Rc::clone(&self.bridge), id, taken: false }
    }
}

/// The response head of an exchange, once the handler's answer is parsed.
pub(crate) struct ResponseFuture {
    bridge: Rc<Bridge>,
    id: Id,
    taken: bool,
}

impl Future for ResponseFuture {
    type Output = io::Result<Response<BridgeBody>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let id = self.id;
        let mut t = self.bridge.table.borrow_mut();
        let Some(x) = t.get(id) else { return Poll::Ready(Err(io::ErrorKind::ConnectionAborted.into())) };
        if let Some(mut response) = x.response.take() {
            let body = response.body_mut();
            body.bridge = Some(Rc::clone(&self.bridge));
            body.id = Some(id);
            drop(t);
            self.taken = true;
            return Poll::Ready(Ok(response));
        }
        if x.failed {
            return Poll::Ready(Err(io::Error::other("the request could not be answered")));
        }
        if !x.task.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            x.task = Some(cx.waker().clone());
        }
        Poll::Pending
    }
}

impl Drop for ResponseFuture {
    fn drop(&mut self) {
        if !self.taken {
            self.bridge.let_go(self.id);
        }
    }
}

/// A response body: the exchange's output, as DATA frames.
pub(crate) struct BridgeBody {
    bridge: Option<Rc<Bridge>>,
    id: Option<Id>,
    /// The declared length, for the stream's `content-length`.
    exact: Option<u64>,
}

impl Body for BridgeBody {
    type Data = Bytes;
    type Error = io::Error;

    fn poll_frame(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<io::Result<Frame<Bytes>>>> {
        let (Some(bridge), Some(id)) = (self.bridge.as_ref(), self.id) else { return Poll::Ready(None) };
        let mut t = bridge.table.borrow_mut();
        let Some(x) = t.get(id) else { return Poll::Ready(None) };
        if x.out_at < x.out.len() {
            let data = Bytes::copy_from_slice(&x.out[x.out_at..]);
            let was_full = x.out.len() - x.out_at >= MAX_BUFFERED;
            x.out.clear();
            x.out_at = 0;
            if was_full || !x.conn_done {
                // Room again: the connection may go on.
                t.ready.push(id.slot);
                t.wake(id.slot);
            }
            return Poll::Ready(Some(Ok(Frame::data(data))));
        }
        if x.ended {
            return Poll::Ready(None);
        }
        if x.failed {
            return Poll::Ready(Some(Err(io::Error::other("the response was cut"))));
        }
        if !x.task.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
            x.task = Some(cx.waker().clone());
        }
        Poll::Pending
    }

    fn is_end_stream(&self) -> bool {
        let (Some(bridge), Some(id)) = (self.bridge.as_ref(), self.id) else { return true };
        let mut t = bridge.table.borrow_mut();
        t.get(id).is_none_or(|x| x.ended && x.out_at == x.out.len())
    }

    fn size_hint(&self) -> SizeHint {
        self.exact.map_or_else(SizeHint::default, SizeHint::with_exact)
    }
}

impl Drop for BridgeBody {
    fn drop(&mut self) {
        if let (Some(bridge), Some(id)) = (self.bridge.take(), self.id) {
            bridge.let_go(id);
        }
    }
}
