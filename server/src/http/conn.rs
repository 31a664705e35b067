//! [`HttpConn`]: one connection's state machine. The contract it keeps (how a
//! driver calls it, and why) is written once, in the [module docs](super).
//!
//! Inside, a connection is an input buffer, an output window, the body of the
//! response being streamed (if any), and where it is in reading requests:
//!
//! ```text
//!   Head ──head──▶ (answered now) ──no body──▶ Head
//!    │                   └──body──▶ Body (read and dropped) ──▶ Head
//!    └──/upload──▶ Body (hashed) ──▶ Answer (waits for window room) ──▶ Head
//!   any refusal, Connection: close, EOF ──▶ Closing (flush, then close)
//! ```
//!
//! A request head is parsed only when the window has room for the largest
//! head and inline body ([`RESERVE`]) and no earlier response is still
//! streaming, which is what keeps pipelined responses in order; a request
//! body is read (dropped or hashed) whatever the window holds.

use std::time::Duration as StdDuration;

use fairway_stack::time::{Duration, Instant};
use sha2::{Digest, Sha256};

use crate::http::body::Body;
use crate::http::chunked::{ChunkError, ChunkedDecoder};
use crate::http::input::Input;
use crate::http::parse::{self, Framing, Head, HeadLimits, MAX_HEADERS, Method};
use crate::http::response::{CONTINUE, Common, MAX_FIELD, MAX_INLINE_BODY, MAX_RESPONSE_HEAD, Persistence};
use crate::http::routes::{self, Answer, Ctx, Dispatch};
use crate::http::window::ByteWindow;
use crate::http::{HttpConfig, Site};

/// Window room needed before a request is answered: an interim 100, the
/// largest head and the largest inline body.
const RESERVE: usize = CONTINUE.len() + MAX_RESPONSE_HEAD + MAX_INLINE_BODY;

/// The smallest input buffer and output window, whatever the config says.
const MIN_INPUT: usize = 1024;
const MIN_OUTPUT: usize = 4096;

/// Where the connection is in reading requests.
#[derive(Debug)]
enum Reading {
    /// Waiting for (the rest of) a request head.
    Head,
    /// Reading a request's body: an upload's is hashed, any other's dropped
    /// (its request was answered when its head arrived).
    Body { framing: BodyFraming, upload: Option<Upload> },
    /// An upload's body is in (`status` 200) or was refused: its answer
    /// waits for window room and for the responses before it.
    Answer { status: u16, upload: Upload },
    /// No more requests are read; the connection closes once its output is
    /// flushed.
    Closing,
}

#[derive(Debug)]
enum BodyFraming {
    Length { remaining: u64 },
    Chunked { decoder: ChunkedDecoder, seen: u64 },
}

/// An `/upload` in progress; the digest is the connection's.
#[derive(Clone, Copy, Debug)]
struct Upload {
    /// When its request's first byte arrived.
    started: Instant,
    persistence: Persistence,
    count: u64,
}

/// One HTTP/1.1 connection, transport-agnostic, reused across connections.
/// See the [module docs](super) for the calling sequence.
pub struct HttpConn {
    limits: HeadLimits,
    max_bytes: u64,
    header_timeout: Duration,
    idle_timeout: Duration,
    server: &'static [u8],

    input: Input,
    out: ByteWindow,
    /// The rest of the response being streamed into `out`.
    body: Body,
    /// The `/metrics` text, rendered here and streamed from here.
    text: Vec<u8>,
    /// This request's `Date`, copied from the site so the site can be
    /// borrowed mutably while the head is written.
    date: [u8; MAX_FIELD],
    date_len: usize,
    sha: Sha256,

    reading: Reading,
    /// The last head parse found only part of a head: the header timeout runs.
    awaiting_head: bool,
    /// Work is waiting for window room (see [`wants_output`](Self::wants_output)).
    blocked: bool,
    /// The peer shut its write side.
    eof: bool,
    /// Closed without flushing (idle, or a response that cannot be completed).
    aborted: bool,
    /// The latest time any call was given, and the last time the peer sent
    /// bytes or took some (the idle timeout runs from there).
    last_now: Instant,
    last_progress: Instant,
}

fn micros(d: StdDuration) -> Duration {
    Duration::from_micros(u64::try_from(d.as_micros()).unwrap_or(u64::MAX))
}

fn std_duration(d: Duration) -> StdDuration {
    StdDuration::from_micros(d.total_micros())
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
            max_bytes: cfg.max_bytes,
            header_timeout: micros(cfg.header_timeout),
            idle_timeout: micros(cfg.idle_timeout),
            server: cfg.server_name.as_bytes(),
            input: Input::new(cfg.max_head.max(MIN_INPUT)),
            out: ByteWindow::new(cfg.output_window.max(MIN_OUTPUT)),
            body: Body::None,
            text: Vec::new(),
            date: [0; MAX_FIELD],
            date_len: 0,
            sha: Sha256::new(),
            reading: Reading::Head,
            awaiting_head: false,
            blocked: false,
            eof: false,
            aborted: false,
            last_now: Instant::ZERO,
            last_progress: Instant::ZERO,
        }
    }

    /// Makes this a fresh connection accepted at `now`, keeping its buffers.
    pub fn reset(&mut self, now: Instant) {
        self.input.reset();
        self.out.clear();
        self.body = Body::None;
        self.text.clear();
        self.reading = Reading::Head;
        self.awaiting_head = false;
        self.blocked = false;
        self.eof = false;
        self.aborted = false;
        self.last_now = now;
        self.last_progress = now;
    }

    /// Whether the driver should read from the peer: the connection still
    /// reads requests and has room for more bytes.
    #[must_use]
    pub fn wants_input(&self) -> bool {
        !self.aborted && !self.eof && !matches!(self.reading, Reading::Closing) && !self.input.is_full()
    }

    /// Where to read the peer's bytes; then call [`on_recv`](Self::on_recv).
    /// Empty when [`wants_input`](Self::wants_input) is false.
    pub fn recv_buf(&mut self) -> &mut [u8] {
        if self.wants_input() { self.input.spare() } else { &mut [] }
    }

    /// `n` bytes were read into [`recv_buf`](Self::recv_buf) at `now`:
    /// parses every complete request, answers it, queues responses in order.
    pub fn on_recv(&mut self, n: usize, now: Instant, site: &mut dyn Site) {
        self.last_now = now;
        if n == 0 || !self.wants_input() {
            return;
        }
        self.input.commit(n, now);
        self.last_progress = now;
        self.advance(now, site);
    }

    /// [`recv_buf`](Self::recv_buf) and [`on_recv`](Self::on_recv) in one,
    /// copying from `data`. Returns how many bytes were taken: fewer than
    /// `data.len()` when the input buffer is full because the output window
    /// is (offer the rest again after a flush). Once the connection reads no
    /// more requests, all of `data` is taken and dropped. Never panics.
    pub fn on_input(&mut self, data: &[u8], now: Instant, site: &mut dyn Site) -> usize {
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
            self.on_recv(n, now, site);
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
    /// that were waiting for window room, so it takes the site and the time.
    pub fn output(&mut self, now: Instant, site: &mut dyn Site) -> &[u8] {
        self.last_now = now;
        self.advance(now, site);
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
    /// a head in progress, or the idle timeout.
    #[must_use]
    pub fn deadline(&self) -> Option<Instant> {
        if self.aborted {
            return None;
        }
        let idle = self.last_progress + self.idle_timeout;
        Some(self.header_deadline().map_or(idle, |header| header.min(idle)))
    }

    fn header_deadline(&self) -> Option<Instant> {
        if !self.awaiting_head || !matches!(self.reading, Reading::Head) {
            return None;
        }
        self.input.first_arrival().map(|first| first + self.header_timeout)
    }

    /// A deadline passed: a head that took too long is answered 408 (and the
    /// connection closes after it); an idle connection closes silently.
    pub fn on_timeout(&mut self, now: Instant, site: &mut dyn Site) {
        self.last_now = now;
        if self.aborted {
            return;
        }
        if let Some(deadline) = self.header_deadline()
            && now >= deadline
            && !self.body.is_some()
            && self.out.room() >= RESERVE
        {
            let started = self.input.first_arrival().unwrap_or(now);
            self.input.clear();
            self.awaiting_head = false;
            self.refuse(408, started, now, site);
            return;
        }
        if now >= self.last_progress + self.idle_timeout {
            self.abort();
        }
    }

    /// Stops reading requests; what is queued is still flushed.
    fn close_reading(&mut self) {
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
    }

    /// Does everything the buffered input and the window's room allow.
    fn advance(&mut self, now: Instant, site: &mut dyn Site) {
        self.blocked = false;
        loop {
            if self.aborted {
                return;
            }
            self.stream_body();
            match self.reading {
                Reading::Closing => {
                    self.input.clear();
                    return;
                }
                Reading::Head => {
                    self.awaiting_head = false;
                    self.skip_empty_lines();
                    if self.input.is_empty() {
                        if self.eof {
                            self.close_reading();
                        }
                        return;
                    }
                    if self.body.is_some() || self.out.room() < RESERVE {
                        self.blocked = true;
                        return;
                    }
                    if !self.read_head(now, site) {
                        if self.eof {
                            self.close_reading(); // this head will never be whole
                        } else {
                            self.awaiting_head = true;
                        }
                        return;
                    }
                }
                Reading::Body { .. } => {
                    if !self.read_body() {
                        if self.eof {
                            self.close_reading();
                        }
                        return;
                    }
                }
                Reading::Answer { status, upload } => {
                    if self.body.is_some() || self.out.room() < RESERVE {
                        self.blocked = true;
                        return;
                    }
                    self.answer_upload(status, upload, now, site);
                }
            }
        }
    }

    /// Moves as much of the streamed body into the window as fits.
    fn stream_body(&mut self) {
        if !self.body.is_some() {
            return;
        }
        let half = self.out.capacity() / 2;
        let spare = self.out.spare(half);
        if spare.is_empty() {
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

    /// RFC 9112 §2.2: empty lines before a request line are ignored. They
    /// are dropped here so a stray CRLF after a body starts no head timer.
    fn skip_empty_lines(&mut self) {
        let n = self.input.filled().iter().take_while(|&&b| b == b'\r' || b == b'\n').count();
        self.input.consume(n);
    }

    /// Parses the head at the front of the input and answers it (all but an
    /// upload). Returns false when the head is not whole yet.
    fn read_head(&mut self, now: Instant, site: &mut dyn Site) -> bool {
        let started = self.input.first_arrival().unwrap_or(now);
        self.copy_date(site);
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let req = match parse::parse_head(self.input.filled(), &mut headers, &self.limits) {
            Ok(Head::Partial) => return false,
            Ok(Head::Complete(req)) => req,
            Err(reject) => {
                self.input.clear();
                self.refuse(reject.status(), started, now, site);
                return true;
            }
        };
        let persistence = match (req.keep_alive, req.http10) {
            (false, _) => Persistence::Close,
            (true, true) => Persistence::KeepAlive,
            (true, false) => Persistence::Default,
        };
        let (framing, head_len) = (req.framing, req.head_len);
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
        let ctx = Ctx {
            out: &mut self.out.spare(RESERVE)[at..],
            common: Common { server: self.server, date: &self.date[..self.date_len] },
            persistence,
            head_only,
            text: &mut self.text,
        };
        let dispatch = routes::dispatch(&req, ctx, site, self.max_bytes);
        self.out.commit(at);
        self.input.consume(head_len);
        let upload = match dispatch {
            Dispatch::Upload => {
                Digest::reset(&mut self.sha);
                Some(Upload { started, persistence, count: 0 })
            }
            Dispatch::Answer(answer) => {
                if !self.queue(answer, started, now, site) {
                    return true;
                }
                if persistence == Persistence::Close {
                    // Its body, if any, need not be read: nothing follows.
                    self.close_reading();
                    return true;
                }
                None
            }
        };
        let framing = match framing {
            Framing::None => BodyFraming::Length { remaining: 0 },
            Framing::Length(n) => BodyFraming::Length { remaining: n },
            Framing::Chunked => BodyFraming::Chunked { decoder: ChunkedDecoder::default(), seen: 0 },
        };
        self.reading = Reading::Body { framing, upload };
        true
    }

    /// Reads what the input holds of a request body. Returns false when it
    /// needs more input.
    fn read_body(&mut self) -> bool {
        let Reading::Body { framing, upload } = &mut self.reading else { return false };
        let max_body = self.limits.max_body;
        let sha = &mut self.sha;
        let input = &mut self.input;
        // Some(status) once the body is done (200) or refused.
        let outcome = match framing {
            BodyFraming::Length { remaining: 0 } => Some(200),
            BodyFraming::Length { remaining } => {
                if input.is_empty() {
                    return false;
                }
                let take = input.len().min(usize::try_from(*remaining).unwrap_or(usize::MAX));
                if let Some(upload) = upload {
                    sha.update(&input.filled()[..take]);
                    upload.count += take as u64;
                }
                input.consume(take);
                *remaining -= take as u64;
                (*remaining == 0).then_some(200)
            }
            BodyFraming::Chunked { decoder, seen } => {
                if decoder.is_done() {
                    Some(200)
                } else if input.is_empty() {
                    return false;
                } else {
                    let hashing = upload.is_some();
                    let result = decoder.decode(input.filled(), |data| {
                        *seen += data.len() as u64;
                        if hashing {
                            sha.update(data);
                        }
                    });
                    if let Some(upload) = upload {
                        upload.count = *seen;
                    }
                    match result {
                        Err(ChunkError::Malformed | ChunkError::SizeLineTooLong | ChunkError::TrailersTooLarge) => {
                            Some(400)
                        }
                        Ok(_) if *seen > max_body => Some(413),
                        Ok(used) => {
                            input.consume(used);
                            decoder.is_done().then_some(200)
                        }
                    }
                }
            }
        };
        let Some(status) = outcome else { return true };
        match (*upload, status) {
            (Some(upload), _) => self.reading = Reading::Answer { status, upload },
            (None, 200) => self.reading = Reading::Head,
            // A dropped body that breaks its framing: its request is
            // answered already, so the connection just closes.
            (None, _) => self.close_reading(),
        }
        true
    }

    /// Queues an upload's answer, or its refusal.
    fn answer_upload(&mut self, status: u16, upload: Upload, now: Instant, site: &mut dyn Site) {
        if status != 200 {
            self.input.clear();
            self.refuse(status, upload.started, now, site);
            return;
        }
        self.copy_date(site);
        let digest = self.sha.finalize_reset();
        let ctx = Ctx {
            out: self.out.spare(RESERVE),
            common: Common { server: self.server, date: &self.date[..self.date_len] },
            persistence: upload.persistence,
            head_only: false,
            text: &mut self.text,
        };
        let answer = routes::upload_answer(ctx, upload.count, digest.as_slice());
        if self.queue(answer, upload.started, now, site) && upload.persistence != Persistence::Close {
            self.reading = Reading::Head;
        } else {
            self.close_reading();
        }
    }

    /// Answers `status` and closes after it: the input cannot be trusted.
    fn refuse(&mut self, status: u16, started: Instant, now: Instant, site: &mut dyn Site) {
        self.copy_date(site);
        let ctx = Ctx {
            out: self.out.spare(RESERVE),
            common: Common { server: self.server, date: &self.date[..self.date_len] },
            persistence: Persistence::Close,
            head_only: false,
            text: &mut self.text,
        };
        let answer = routes::error(ctx, status);
        self.queue(answer, started, now, site);
        self.close_reading();
    }

    /// Commits an answer written into the window and records it. Returns
    /// false (and aborts) if it did not fit, which the reserve rules out.
    fn queue(&mut self, answer: Answer, started: Instant, now: Instant, site: &mut dyn Site) -> bool {
        let Some(len) = answer.len else {
            self.abort();
            return false;
        };
        self.out.commit(len);
        self.body = answer.body;
        site.record(answer.status, std_duration(now - started));
        true
    }

    fn copy_date(&mut self, site: &dyn Site) {
        let date = site.now_date();
        let len = date.len().min(MAX_FIELD);
        self.date[..len].copy_from_slice(&date[..len]);
        self.date_len = len;
    }
}
