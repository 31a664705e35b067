//! The reverse proxy: a [`Handler`] that forwards the requests its routes
//! match to upstream HTTP/1.1 servers and streams their answers back, in
//! front of the built-in endpoints (or any handler) for the rest.
//!
//! ```text
//! client ─▶ shard: HttpConn ─▶ Proxy::request ── route ──▶ group ── balance ──▶ server
//!                                   │                                            │
//!            Handler::body ─────────┼──── request body (back-pressure) ─────────▶│ upstream socket
//!            Handler::resume ◀──────┼──── response head ◀────────────────────────│ (pooled: kernel
//!            Handler::produce ◀─────┴──── response body, read into the window ◀──│  socket or link)
//! ```
//!
//! Each shard has its own proxy: its own upstream connections, kept alive
//! in per-server pools (`keepalive` idle ones each), held by the shard's
//! [`Outbound`], whose readiness wakes the exchange waiting on them. An
//! upstream connection is a kernel socket in that epoll, or, on the
//! userspace backends for an upstream beyond the loopback, a link: a
//! connection of the shard's own stack through the NIC, whose bytes the
//! host moves ([`crate::outbound`]). Nothing is shared between shards but
//! the active health checks' verdicts.
//!
//! - **Streaming both ways.** A request body goes upstream as it arrives,
//!   through a bounded buffer ([`BODY_BUFFER`]); when the upstream does not
//!   take it, [`Handler::body`] takes less and the client's body waits. A
//!   response body is read straight into the client connection's output
//!   window (the send ring itself on the userspace stack) as it frees up.
//!   Neither is ever held whole.
//! - **Framing.** Each side's body is framed by its own connection: the
//!   request's by its length or chunked, as the client sent it (the server
//!   has already refused ambiguous framing: smuggling attempts never reach
//!   an upstream); the response's by its `Content-Length`, re-chunked for
//!   the client when it was chunked or ran to the upstream's close.
//! - **Fields** ([`forward`]): hop-by-hop fields dropped, `Via`,
//!   `Forwarded`, `X-Forwarded-For` and `X-Forwarded-Proto` added.
//! - **Failures.** A connection refused or reset before the response:
//!   502; no connection within `connect-timeout`, or no response within
//!   `first-byte-timeout` of the request's end: 504; each with a warning
//!   that names the group, the server and the reason. A response that
//!   stalls for `idle-timeout`, or whose upstream closes early, is cut: the
//!   client sees the connection close before the body's end, never a
//!   complete-looking answer. An idempotent request without a body whose
//!   pooled connection turns out closed is sent once more on a fresh one.
//! - **Balance and health.** Round-robin or least-connections within a
//!   group; a server failing `max-fails` times within `fail-timeout` is out
//!   of turn for `fail-timeout` (passive), and with `health-check` a
//!   thread asks each server every `health-interval` ([`health`]). When
//!   every server of a group is out of turn, they are tried anyway, in
//!   turn: a likely failure is better than a certain one.
//!
//! Window control applies to the client connections as to any other: a
//! download through the proxy is capped and paced like one the server
//! makes itself.
//!
//! Steady state allocates nothing per request: connections, buffers and
//! per-exchange state are reused.

mod forward;
pub mod health;
#[cfg(test)]
mod tests;

use std::io;
use std::sync::Arc;
use std::time::Duration;

use fairway_stack::time::Instant;
use mio::Token;
use tracing::warn;

use crate::config::{Balance, ProxyConfig};
use crate::http::chunked::ChunkedDecoder;
use crate::http::{Context, Exchange, ExchangeMap, Handler, Method, Produce, Reply, Request, Response};
use crate::outbound::Outbound;
use forward::{BadResponse, ReadHead, RequestBody, ResponseBody, read_response, write_request};
use health::HealthBoard;

/// The most request-body bytes queued for an upstream that has not taken
/// them yet: beyond, the client's body waits.
pub const BODY_BUFFER: usize = 64 * 1024;

/// Each upstream connection's input buffer: the largest response head, and
/// what a chunked body is decoded from.
pub const INPUT: usize = 16 * 1024;

/// What a shard's proxy did, for `/metrics` (`fairway_proxy_*`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ProxyCounters {
    /// Requests forwarded to an upstream.
    pub forwarded: u64,
    /// Upstream connections opened.
    pub connects: u64,
    /// Requests sent on a pooled (kept-alive) connection.
    pub reused: u64,
    /// Requests sent again: on a fresh connection after a pooled one
    /// turned out closed, or to the next server after one refused.
    pub retries: u64,
    /// Answered 502 (refused, reset, closed early, a bad response).
    pub bad_gateway: u64,
    /// Answered 504 (no connection or no response in time).
    pub gateway_timeout: u64,
    /// Responses cut after their head went out (the upstream closed or
    /// stalled mid-body).
    pub cut: u64,
}

/// Adds to the shard's proxy counters, when its site keeps them.
fn count(cx: &mut Context<'_>, add: impl FnOnce(&mut ProxyCounters)) {
    if let Some(counters) = cx.site.proxy_counters() {
        add(counters);
    }
}

/// A shard's reverse proxy. See the [module documentation](self).
pub struct Proxy {
    config: Arc<ProxyConfig>,
    /// What answers the requests no route matches.
    fallback: Box<dyn Handler>,
    groups: Vec<GroupState>,
    /// Upstream connections, by index; an entry's buffers outlive its
    /// socket and serve the next one.
    conns: Vec<Upstream>,
    free: Vec<usize>,
    /// Tokens of sockets closed where the epoll was out of reach (a
    /// cancelled exchange's), freed at the next chance.
    forgotten: Vec<Token>,
    exchanges: ExchangeMap<Forward>,
    health: Option<Arc<HealthBoard>>,
    /// Whether this shard has warned that it cannot open connections.
    warned_outbound: bool,
}

struct GroupState {
    /// The next server in turn.
    next: usize,
    servers: Vec<ServerState>,
}

#[derive(Default)]
struct ServerState {
    /// Idle keep-alive connections, most recent last.
    idle: Vec<usize>,
    /// Requests in progress on it from this shard.
    active: u32,
    /// Failures since `first_fail`.
    fails: u32,
    first_fail: Option<Instant>,
    /// Out of turn until then.
    down_until: Option<Instant>,
}

/// What an upstream connection is.
enum Stream {
    /// A kernel socket in the shard's epoll: an upstream on this host, or
    /// any on the kernel backend.
    Kernel(mio::net::TcpStream),
    /// A link: a connection of the shard's own stack, through the NIC.
    Link,
}

impl Stream {
    fn read(&mut self, token: Token, outbound: &mut Outbound, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Kernel(stream) => outbound.read_socket(token, stream, buf),
            Stream::Link => outbound.read(token, buf),
        }
    }

    fn write(&mut self, token: Token, outbound: &mut Outbound, data: &[u8]) -> io::Result<usize> {
        match self {
            Stream::Kernel(stream) => outbound.write_socket(token, stream, data),
            Stream::Link => outbound.write(token, data),
        }
    }

    /// Whether it is established; `Err` when it could not be.
    fn connected(&mut self, token: Token, outbound: &Outbound) -> Result<bool, Failure> {
        match self {
            Stream::Kernel(stream) => {
                match stream.take_error() {
                    Ok(Some(e)) | Err(e) => return Err(Failure::Connect(e.kind())),
                    Ok(None) => {}
                }
                match stream.peer_addr() {
                    Ok(_) => Ok(true),
                    Err(e) if e.kind() == io::ErrorKind::NotConnected => Ok(false),
                    Err(e) => Err(Failure::Connect(e.kind())),
                }
            }
            Stream::Link => outbound.link_state(token).map_err(Failure::Connect),
        }
    }
}

/// One upstream connection (or the buffers of a closed one).
struct Upstream {
    stream: Option<Stream>,
    token: Token,
    connected: bool,
    /// The upstream has closed its side.
    eof: bool,
    /// What goes upstream; `out[sent..]` is still to write.
    out: Vec<u8>,
    sent: usize,
    /// What came back, `input[taken..filled]` not yet used: a buffer of
    /// [`INPUT`] bytes made once (reads go into it without clearing it).
    input: Box<[u8]>,
    filled: usize,
    taken: usize,
    /// When it went back to the pool.
    idle_since: Instant,
}

/// An exchange the proxy has taken on.
struct Forward {
    conn: usize,
    group: usize,
    server: usize,
    /// The connection came from the pool.
    reused: bool,
    /// Sent once more on a fresh connection already.
    retried: bool,
    /// Servers given up on for it, unreachable.
    tried: usize,
    /// May be sent again (RFC 9110 §9.2.2) and has no body.
    retryable: bool,
    head_only: bool,
    request_body: RequestBody,
    /// The request body is all queued.
    body_done: bool,
    /// What failed while the body was being taken, answered at its end.
    failed: Option<Failure>,
    phase: Phase,
    decoder: ChunkedDecoder,
    /// When the current wait fails.
    deadline: Instant,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Connecting or sending the request, then waiting for the head.
    Request,
    /// Streaming the response body.
    Body { body: ResponseBody, remaining: u64, reusable: bool },
    /// The response broke after some of its body went to the client: it
    /// is cut at the next call.
    Broken,
}

/// Why an exchange failed upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Failure {
    Connect(io::ErrorKind),
    ConnectTimeout,
    FirstByteTimeout,
    /// Closed before the response was complete.
    Closed,
    Io(io::ErrorKind),
    Bad(BadResponse),
    IdleTimeout,
}

impl Failure {
    fn status(self) -> u16 {
        match self {
            Failure::ConnectTimeout | Failure::FirstByteTimeout | Failure::IdleTimeout => 504,
            _ => 502,
        }
    }

    /// A failure of the connection before anything came back, which a
    /// fresh connection may not have.
    fn stale(self) -> bool {
        matches!(self, Failure::Closed | Failure::Io(_))
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Connect(kind) => write!(f, "cannot connect: {kind}"),
            Failure::ConnectTimeout => f.write_str("no connection within connect-timeout"),
            Failure::FirstByteTimeout => f.write_str("no response within first-byte-timeout"),
            Failure::Closed => f.write_str("it closed the connection before the response's end"),
            Failure::Io(kind) => write!(f, "the connection failed: {kind}"),
            Failure::Bad(bad) => write!(f, "it sent {}", bad.describe()),
            Failure::IdleTimeout => f.write_str("the response stalled for idle-timeout"),
        }
    }
}

impl Proxy {
    /// A shard's proxy for `config`, with `fallback` answering what no
    /// route matches, and `health` the active checks' verdicts (when any
    /// group has them: [`health::start`]).
    #[must_use]
    pub fn new(config: Arc<ProxyConfig>, fallback: Box<dyn Handler>, health: Option<Arc<HealthBoard>>) -> Proxy {
        let groups = config
            .groups
            .iter()
            .map(|g| GroupState { next: 0, servers: g.servers.iter().map(|_| ServerState::default()).collect() })
            .collect();
        Proxy {
            config,
            fallback,
            groups,
            conns: Vec::new(),
            free: Vec::new(),
            forgotten: Vec::new(),
            exchanges: ExchangeMap::default(),
            health,
            warned_outbound: false,
        }
    }

    /// The server of group `g` to send to now.
    fn pick(&mut self, g: usize, now: Instant) -> usize {
        self.pick_except(g, now, usize::MAX)
    }

    /// The server of group `g` to send to now, other than `except` while
    /// another is in turn.
    fn pick_except(&mut self, g: usize, now: Instant, except: usize) -> usize {
        let group = &mut self.groups[g];
        let n = group.servers.len();
        let health = self.health.as_deref();
        let up = |s: usize, state: &ServerState| {
            s != except && state.down_until.is_none_or(|t| t <= now) && health.is_none_or(|h| h.healthy(g, s))
        };
        let start = group.next % n;
        let mut order = (0..n).map(|i| (start + i) % n);
        let chosen = match self.config.groups[g].balance {
            Balance::RoundRobin => order.find(|&s| up(s, &group.servers[s])),
            Balance::LeastConnections => {
                order.filter(|&s| up(s, &group.servers[s])).min_by_key(|&s| group.servers[s].active)
            }
        };
        let s = chosen.unwrap_or(start);
        group.next = s + 1;
        s
    }

    /// A connection to server `s` of group `g`: an idle pooled one that is
    /// still open, else a new one (connecting). Whether it was pooled.
    fn acquire(&mut self, g: usize, s: usize, now: Instant, outbound: &mut Outbound) -> Result<(usize, bool), Failure> {
        let idle_timeout = self.config.groups[g].idle_timeout;
        while let Some(c) = self.groups[g].servers[s].idle.pop() {
            let up = &self.conns[c];
            if outbound.hung_up(up.token) || after(up.idle_since, idle_timeout) <= now {
                self.close(c, outbound);
                continue;
            }
            return Ok((c, true));
        }
        self.connect(g, s, outbound).map(|c| (c, false))
    }

    /// Starts a new connection to server `s` of group `g`: a link through
    /// the NIC where the shard's host opens them and the server is not on
    /// the loopback, a kernel socket otherwise.
    fn connect(&mut self, g: usize, s: usize, outbound: &mut Outbound) -> Result<usize, Failure> {
        let addr = self.config.groups[g].servers[s].addr;
        let (stream, token) = if outbound.through_nic(addr) {
            let token = outbound.connect_link(addr).map_err(|e| Failure::Connect(e.kind()))?;
            (Stream::Link, token)
        } else {
            let mut stream = mio::net::TcpStream::connect(addr).map_err(|e| Failure::Connect(e.kind()))?;
            let _ = stream.set_nodelay(true);
            let token = outbound.register(&mut stream).map_err(|e| Failure::Connect(e.kind()))?;
            (Stream::Kernel(stream), token)
        };
        let c = self.free.pop().unwrap_or_else(|| {
            self.conns.push(Upstream {
                stream: None,
                token,
                connected: false,
                eof: false,
                out: Vec::with_capacity(INPUT),
                sent: 0,
                input: vec![0; INPUT].into_boxed_slice(),
                filled: 0,
                taken: 0,
                idle_since: Instant::ZERO,
            });
            self.conns.len() - 1
        });
        let up = &mut self.conns[c];
        up.stream = Some(stream);
        (up.token, up.connected, up.eof) = (token, false, false);
        up.out.clear();
        (up.sent, up.taken, up.filled) = (0, 0, 0);
        Ok(c)
    }

    /// Closes connection `c` and frees its entry.
    fn close(&mut self, c: usize, outbound: &mut Outbound) {
        let up = &mut self.conns[c];
        match up.stream.take() {
            Some(Stream::Kernel(mut stream)) => outbound.deregister(&mut stream, up.token),
            Some(Stream::Link) => outbound.close_link(up.token),
            None => return,
        }
        self.free.push(c);
    }

    /// Frees what cancelled exchanges left.
    fn tidy(&mut self, outbound: &mut Outbound) {
        for token in self.forgotten.drain(..) {
            outbound.forget(token);
        }
    }

    /// The exchange `ex` is over: its connection goes back to the pool
    /// when it can carry another request, else it is closed.
    fn finish(&mut self, ex: Exchange, reusable: bool, now: Instant, outbound: &mut Outbound) {
        let Some(f) = self.exchanges.remove(ex) else { return };
        let keepalive = self.config.groups[f.group].keepalive;
        let server = &mut self.groups[f.group].servers[f.server];
        server.active = server.active.saturating_sub(1);
        let up = &mut self.conns[f.conn];
        let clean = up.taken == up.filled && up.sent == up.out.len() && !up.eof;
        if reusable && clean && server.idle.len() < keepalive {
            outbound.unwatch(up.token);
            up.out.clear();
            (up.sent, up.taken, up.filled, up.idle_since) = (0, 0, 0, now);
            server.idle.push(f.conn);
        } else {
            self.close(f.conn, outbound);
        }
    }

    /// Counts a failure of server `s` of group `g` toward putting it out
    /// of turn, and says what failed and what the client gets.
    fn failed(&mut self, g: usize, s: usize, failure: Failure, now: Instant) {
        let status = failure.status();
        let answer = if status == 502 { "502 to the client" } else { "504 to the client" };
        self.count_failure(g, s, failure, now, answer);
    }

    /// [`failed`](Self::failed), saying `then` for what follows.
    fn count_failure(&mut self, g: usize, s: usize, failure: Failure, now: Instant, then: &str) {
        let group = &self.config.groups[g];
        let server = &mut self.groups[g].servers[s];
        if server.first_fail.is_none_or(|t| after(t, group.fail_timeout) <= now) {
            (server.fails, server.first_fail) = (0, Some(now));
        }
        server.fails += 1;
        let url = &group.servers[s].url;
        warn!(upstream = %group.name, server = %url, "{then}: {failure}");
        if server.fails >= group.max_fails && server.down_until.is_none_or(|t| t <= now) {
            server.down_until = Some(after(now, group.fail_timeout));
            let out = group.fail_timeout;
            warn!(upstream = %group.name, server = %url, "out of turn for {out:?} after {} failure(s)", server.fails);
        }
    }

    /// Ends `ex` after `failure`: counted, said, its connection closed.
    fn end_failed(&mut self, ex: Exchange, failure: Failure, now: Instant, outbound: Option<&mut Outbound>) {
        let Some(f) = self.exchanges.get_mut(ex) else { return };
        let (g, s) = (f.group, f.server);
        self.failed(g, s, failure, now);
        if let Some(outbound) = outbound {
            self.finish(ex, false, now, outbound);
        }
    }

    /// Moves `ex`'s request along: finishes connecting, writes what is
    /// queued, reads what came back. `Err` when the connection failed.
    fn advance(&mut self, ex: Exchange, now: Instant, outbound: &mut Outbound) -> Result<(), Failure> {
        let Some(f) = self.exchanges.get_mut(ex) else { return Ok(()) };
        let up = &mut self.conns[f.conn];
        let Some(stream) = &mut up.stream else { return Err(Failure::Closed) };
        if !up.connected {
            if !stream.connected(up.token, outbound)? {
                return if now >= f.deadline { Err(Failure::ConnectTimeout) } else { Ok(()) };
            }
            up.connected = true;
            if f.body_done {
                f.deadline = after(now, self.config.groups[f.group].first_byte_timeout);
            }
        }
        while up.sent < up.out.len() {
            match stream.write(up.token, outbound, &up.out[up.sent..]) {
                Ok(0) => return Err(Failure::Closed),
                Ok(n) => up.sent += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Failure::Io(e.kind())),
            }
        }
        // A request with a body cannot be sent again: its queue is
        // emptied as it goes; one without keeps its head for a retry.
        if up.sent == up.out.len() && f.request_body != RequestBody::Empty {
            up.out.clear();
            up.sent = 0;
        }
        if f.phase == Phase::Request {
            fill(up, outbound)?;
        }
        Ok(())
    }

    /// [`advance`](Self::advance) with the site's outbound sockets.
    fn advance_in(&mut self, ex: Exchange, cx: &mut Context<'_>) -> Result<(), Failure> {
        let now = cx.now();
        match cx.site.outbound() {
            Some(outbound) => self.advance(ex, now, outbound),
            None => Err(Failure::Closed),
        }
    }

    /// Answers `ex` from its upstream when the response head is in;
    /// defers while it is not; answers the failure when there was one.
    fn answer(&mut self, cx: &mut Context<'_>, mut res: Response<'_>) -> Reply {
        let (ex, now) = (cx.exchange(), cx.now());
        loop {
            let step = self.advance_in(ex, cx);
            let Some(f) = self.exchanges.get_mut(ex) else { return res.error(502) };
            // A failure met while the body was taken is final: some of it
            // is gone.
            let (stepped, failure) = (step.is_err(), step.err().or(f.failed.take()));
            let up = &mut self.conns[f.conn];
            if let Some(failure) = failure {
                let retry = failure.stale() && f.reused && f.retryable && !f.retried && up.filled == 0;
                // A pooled connection the upstream had closed: once more,
                // on a fresh one.
                let server = f.server;
                if retry && self.retry(ex, cx, server).is_ok() {
                    count(cx, |c| (c.retries, c.connects) = (c.retries + 1, c.connects + 1));
                    continue;
                }
                let unreachable = stepped && matches!(failure, Failure::Connect(_) | Failure::ConnectTimeout);
                if unreachable && self.next_server(ex, cx, failure) {
                    count(cx, |c| (c.retries, c.connects) = (c.retries + 1, c.connects + 1));
                    continue;
                }
                return self.fail(ex, cx, failure, res);
            }
            let full = up.filled == up.input.len();
            if up.taken < up.filled {
                match read_response(&up.input[up.taken..up.filled], f.head_only, full, res) {
                    ReadHead::Bad(bad, back) => return self.fail(ex, cx, Failure::Bad(bad), back),
                    ReadHead::Answered(head, reply) => {
                        up.taken += head.len;
                        let (g, s) = (f.group, f.server);
                        let remaining = match head.body {
                            ResponseBody::Length(n) => n,
                            _ => 0,
                        };
                        if matches!(head.body, ResponseBody::Empty | ResponseBody::Length(0)) {
                            if let Some(outbound) = cx.site.outbound() {
                                self.finish(ex, head.reusable, now, outbound);
                            }
                        } else {
                            f.phase = Phase::Body { body: head.body, remaining, reusable: head.reusable };
                            f.decoder = ChunkedDecoder::default();
                            f.deadline = after(now, self.config.groups[g].idle_timeout);
                        }
                        let server = &mut self.groups[g].servers[s];
                        (server.fails, server.down_until) = (0, None);
                        return reply;
                    }
                    ReadHead::Incomplete(back) => res = back,
                }
            }
            if up.eof {
                return self.fail(ex, cx, Failure::Closed, res);
            }
            if now >= f.deadline {
                let failure = if up.connected { Failure::FirstByteTimeout } else { Failure::ConnectTimeout };
                return self.fail(ex, cx, failure, res);
            }
            cx.wake_at(f.deadline);
            return res.defer();
        }
    }

    /// After a failure to connect to `ex`'s server: when the group has a
    /// server not tried yet for it, counts the failure and sends the
    /// request there (nothing of it reached the first). Whether it did.
    fn next_server(&mut self, ex: Exchange, cx: &mut Context<'_>, failure: Failure) -> bool {
        let now = cx.now;
        let Some(f) = self.exchanges.get_mut(ex) else { return false };
        let (g, s, tried) = (f.group, f.server, f.tried);
        if tried + 1 >= self.config.groups[g].servers.len() {
            return false;
        }
        self.count_failure(g, s, failure, now, "trying the next server");
        let next = self.pick_except(g, now, s);
        if next == s || self.retry(ex, cx, next).is_err() {
            return false;
        }
        let servers = &mut self.groups[g].servers;
        servers[s].active = servers[s].active.saturating_sub(1);
        servers[next].active += 1;
        if let Some(f) = self.exchanges.get_mut(ex) {
            (f.server, f.tried) = (next, tried + 1);
        }
        true
    }

    /// Sends `ex`'s request (its head, kept) again on a fresh connection
    /// to server `s` of its group.
    fn retry(&mut self, ex: Exchange, cx: &mut Context<'_>, s: usize) -> Result<(), Failure> {
        let (waker, now) = (cx.waker, cx.now);
        let outbound = cx.site.outbound().ok_or(Failure::Closed)?;
        let f = self.exchanges.get_mut(ex).ok_or(Failure::Closed)?;
        let (old, g) = (f.conn, f.group);
        let fresh = self.connect(g, s, outbound)?;
        let head = std::mem::take(&mut self.conns[old].out);
        let up = &mut self.conns[fresh];
        let spare = std::mem::replace(&mut up.out, head);
        up.sent = 0;
        outbound.watch(up.token, waker);
        self.conns[old].out = spare;
        self.close(old, outbound);
        let f = self.exchanges.get_mut(ex).ok_or(Failure::Closed)?;
        (f.conn, f.reused, f.retried) = (fresh, false, true);
        f.deadline = after(now, self.config.groups[g].connect_timeout);
        Ok(())
    }

    /// Ends `ex` with `failure`'s status, a warning and the connection
    /// closed.
    fn fail(&mut self, ex: Exchange, cx: &mut Context<'_>, failure: Failure, res: Response<'_>) -> Reply {
        let now = cx.now();
        self.end_failed(ex, failure, now, cx.site.outbound());
        let status = failure.status();
        count(cx, |c| if status == 504 { c.gateway_timeout += 1 } else { c.bad_gateway += 1 });
        res.error(status)
    }

    /// Takes the request `req` on, to group `g`.
    fn forward(&mut self, cx: &mut Context<'_>, req: &Request<'_>, res: Response<'_>, g: usize) -> Reply {
        let (now, waker, peer) = (cx.now(), cx.waker, cx.peer);
        let proto = if cx.secure { "https" } else { "http" };
        let Some(outbound) = cx.site.outbound() else {
            if !std::mem::replace(&mut self.warned_outbound, true) {
                warn!("this shard cannot open upstream connections (its site has no outbound epoll): 502");
            }
            return res.error(502);
        };
        self.tidy(outbound);
        let s = self.pick(g, now);
        let (conn, reused) = match self.acquire(g, s, now, outbound) {
            Ok(c) => c,
            Err(failure) => {
                self.failed(g, s, failure, now);
                count(cx, |c| c.bad_gateway += 1);
                return res.error(failure.status());
            }
        };

        let request_body = match req.content_length() {
            Some(0) => RequestBody::Empty,
            Some(n) => RequestBody::Length(n),
            None => RequestBody::Chunked,
        };
        let method = req.method();
        let retryable = request_body == RequestBody::Empty
            && matches!(method, Method::Get | Method::Head | Method::Options | Method::Put | Method::Delete);
        let group = &self.config.groups[g];
        let up = &mut self.conns[conn];
        let authority = group.servers[s].url.split_once("://").map_or("", |(_, a)| a.trim_end_matches('/'));
        write_request(&mut up.out, req, peer, proto, request_body, authority);
        outbound.watch(up.token, waker);
        self.groups[g].servers[s].active += 1;
        let wait = if up.connected { group.first_byte_timeout } else { group.connect_timeout };
        let f = Forward {
            conn,
            group: g,
            server: s,
            reused,
            retried: false,
            tried: 0,
            retryable,
            head_only: method == Method::Head,
            request_body,
            body_done: request_body == RequestBody::Empty,
            failed: None,
            phase: Phase::Request,
            decoder: ChunkedDecoder::default(),
            deadline: after(now, wait),
        };
        let ex = cx.exchange();
        self.exchanges.insert(ex, f);
        count(cx, |c| {
            c.forwarded += 1;
            if reused { c.reused += 1 } else { c.connects += 1 }
        });
        if request_body == RequestBody::Empty {
            return self.answer(cx, res);
        }
        if let Err(failure) = self.advance_in(ex, cx)
            && let Some(f) = self.exchanges.get_mut(ex)
        {
            f.failed = Some(failure);
        }
        cx.wake_at(after(now, wait));
        res.read_body()
    }

    /// Streams the response body of `ex` into `out`.
    fn stream(&mut self, ex: Exchange, now: Instant, out: &mut [u8], outbound: &mut Outbound) -> Streamed {
        let Some(f) = self.exchanges.get_mut(ex) else { return Streamed::Failed(Failure::Closed) };
        let (body, remaining, reusable) = match f.phase {
            Phase::Body { body, remaining, reusable } => (body, remaining, reusable),
            Phase::Broken => return Streamed::Broken,
            Phase::Request => return Streamed::Pending,
        };
        let up = &mut self.conns[f.conn];
        let mut n = 0;
        let mut failure = None;
        let ended = match body {
            ResponseBody::Length(_) | ResponseBody::Close => {
                let want = match body {
                    ResponseBody::Length(_) => out.len().min(usize::try_from(remaining).unwrap_or(usize::MAX)),
                    _ => out.len(),
                };
                if up.taken < up.filled {
                    n = want.min(up.filled - up.taken);
                    out[..n].copy_from_slice(&up.input[up.taken..up.taken + n]);
                    up.taken += n;
                } else if let Some(stream) = &mut up.stream {
                    // Straight into the client's window.
                    loop {
                        match stream.read(up.token, outbound, &mut out[..want]) {
                            Ok(0) => up.eof = true,
                            Ok(k) => n = k,
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
                            Err(e) => failure = Some(Failure::Io(e.kind())),
                        }
                        break;
                    }
                }
                if let ResponseBody::Length(_) = body {
                    let left = remaining - n as u64;
                    f.phase = Phase::Body { body, remaining: left, reusable };
                    if up.eof && left > 0 {
                        failure = failure.or(Some(Failure::Closed));
                    }
                    left == 0
                } else {
                    up.eof
                }
            }
            ResponseBody::Chunked => {
                if up.taken == up.filled
                    && let Err(e) = fill(up, outbound)
                {
                    failure = Some(e);
                }
                let taken = f.decoder.decode_taking(&up.input[up.taken..up.filled], |data| {
                    let k = data.len().min(out.len() - n);
                    out[n..n + k].copy_from_slice(&data[..k]);
                    n += k;
                    k
                });
                match taken {
                    Ok(used) => up.taken += used,
                    Err(_) => failure = Some(Failure::Bad(BadResponse::Malformed)),
                }
                let done = f.decoder.is_done();
                if up.eof && !done && up.taken == up.filled {
                    failure = failure.or(Some(Failure::Closed));
                }
                done
            }
            ResponseBody::Empty => true,
        };
        if ended {
            return Streamed::End(n, reusable && body != ResponseBody::Close);
        }
        if let Some(failure) = failure {
            if n > 0 {
                // What came before the failure goes out first.
                f.phase = Phase::Broken;
                let (g, s) = (f.group, f.server);
                self.failed(g, s, failure, now);
                return Streamed::Data(n);
            }
            return Streamed::Failed(failure);
        }
        if n > 0 {
            f.deadline = after(now, self.config.groups[f.group].idle_timeout);
            return Streamed::Data(n);
        }
        if now >= f.deadline {
            return Streamed::Failed(Failure::IdleTimeout);
        }
        Streamed::Waiting(f.deadline)
    }
}

/// What one [`Proxy::stream`] call did.
enum Streamed {
    Data(usize),
    /// The body's end, after these bytes; whether the connection can be
    /// pooled.
    End(usize, bool),
    /// Nothing yet.
    Waiting(Instant),
    /// The phase has no body yet.
    Pending,
    /// It failed, with nothing copied.
    Failed(Failure),
    /// It failed earlier (counted then), after some of the body.
    Broken,
}

/// Reads what the upstream sent into `up.input` (as far as it holds),
/// noting its close.
fn fill(up: &mut Upstream, outbound: &mut Outbound) -> Result<(), Failure> {
    let Some(stream) = &mut up.stream else { return Err(Failure::Closed) };
    if up.taken == up.filled {
        (up.taken, up.filled) = (0, 0);
    }
    while !up.eof && up.filled < up.input.len() {
        match stream.read(up.token, outbound, &mut up.input[up.filled..]) {
            Ok(0) => up.eof = true,
            Ok(n) => up.filled += n,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(Failure::Io(e.kind())),
        }
    }
    Ok(())
}

impl Handler for Proxy {
    fn request(&mut self, cx: &mut Context<'_>, req: &Request<'_>, res: Response<'_>) -> Reply {
        match self.config.route(req.header("host"), req.path()) {
            Some(g) => self.forward(cx, req, res, g),
            None => self.fallback.request(cx, req, res),
        }
    }

    fn body(&mut self, cx: &mut Context<'_>, data: &[u8]) -> usize {
        let ex = cx.exchange();
        let Some(f) = self.exchanges.get_mut(ex) else { return self.fallback.body(cx, data) };
        if f.failed.is_some() {
            return data.len(); // dropped: the failure is answered at the body's end
        }
        let step = self.advance_in(ex, cx);
        if let Err(failure @ (Failure::Connect(_) | Failure::ConnectTimeout)) = step
            && self.next_server(ex, cx, failure)
        {
            count(cx, |c| (c.retries, c.connects) = (c.retries + 1, c.connects + 1));
            return 0; // nothing was sent: the body waits for the next server
        }
        let Some(f) = self.exchanges.get_mut(ex) else { return data.len() };
        if let Err(failure) = step {
            f.failed = Some(failure);
            return data.len();
        }
        let up = &mut self.conns[f.conn];
        let queued = up.out.len() - up.sent;
        if queued >= BODY_BUFFER || !up.connected {
            return 0; // the upstream's writability wakes the exchange
        }
        let take = data.len().min(BODY_BUFFER - queued);
        if f.request_body == RequestBody::Chunked {
            let mut digits = [0u8; 16];
            up.out.extend_from_slice(hex(&mut digits, take));
            up.out.extend_from_slice(b"\r\n");
            up.out.extend_from_slice(&data[..take]);
            up.out.extend_from_slice(b"\r\n");
        } else {
            up.out.extend_from_slice(&data[..take]);
        }
        if let Err(failure) = self.advance_in(ex, cx)
            && let Some(f) = self.exchanges.get_mut(ex)
        {
            f.failed = Some(failure);
        }
        take
    }

    fn body_end(&mut self, cx: &mut Context<'_>, body: &[u8], res: Response<'_>) -> Reply {
        let ex = cx.exchange();
        let Some(f) = self.exchanges.get_mut(ex) else { return self.fallback.body_end(cx, body, res) };
        let up = &mut self.conns[f.conn];
        if f.request_body == RequestBody::Chunked {
            up.out.extend_from_slice(b"0\r\n\r\n");
        }
        f.body_done = true;
        if up.connected {
            f.deadline = after(cx.now(), self.config.groups[f.group].first_byte_timeout);
        }
        self.answer(cx, res)
    }

    fn resume(&mut self, cx: &mut Context<'_>, res: Response<'_>) -> Reply {
        if self.exchanges.get_mut(cx.exchange()).is_none() {
            return self.fallback.resume(cx, res);
        }
        self.answer(cx, res)
    }

    fn produce(&mut self, cx: &mut Context<'_>, out: &mut [u8]) -> Produce {
        let (ex, now) = (cx.exchange(), cx.now());
        if self.exchanges.get_mut(ex).is_none() {
            return self.fallback.produce(cx, out);
        }
        let Some(outbound) = cx.site.outbound() else { return Produce::Cut };
        match self.stream(ex, now, out, outbound) {
            Streamed::Data(n) => Produce::Data(n),
            Streamed::End(n, reusable) => {
                if let Some(outbound) = cx.site.outbound() {
                    self.finish(ex, reusable, now, outbound);
                }
                Produce::End(n)
            }
            Streamed::Waiting(deadline) => {
                cx.wake_at(deadline);
                Produce::Pending
            }
            Streamed::Pending => Produce::Pending,
            // The response is broken: the client sees it cut.
            Streamed::Failed(failure) => {
                self.end_failed(ex, failure, now, cx.site.outbound());
                count(cx, |c| c.cut += 1);
                Produce::Cut
            }
            Streamed::Broken => {
                if let Some(outbound) = cx.site.outbound() {
                    self.finish(ex, false, now, outbound);
                }
                count(cx, |c| c.cut += 1);
                Produce::Cut
            }
        }
    }

    fn cancel(&mut self, exchange: Exchange) {
        let Some(f) = self.exchanges.remove(exchange) else { return self.fallback.cancel(exchange) };
        let server = &mut self.groups[f.group].servers[f.server];
        server.active = server.active.saturating_sub(1);
        // Mid-exchange, the connection cannot carry another request:
        // closed now (which takes it out of the epoll), its token freed
        // when the epoll is next at hand.
        let up = &mut self.conns[f.conn];
        if up.stream.take().is_some() {
            self.forgotten.push(up.token);
            self.free.push(f.conn);
        }
    }
}

/// `d` after `at`, on the loop's clock.
fn after(at: Instant, d: Duration) -> Instant {
    at + fairway_stack::time::Duration::from(d)
}

/// `n` in lower-case hex, in `buf`.
fn hex(buf: &mut [u8; 16], mut n: usize) -> &[u8] {
    let mut at = buf.len();
    loop {
        at -= 1;
        buf[at] = b"0123456789abcdef"[n & 0xf];
        n >>= 4;
        if n == 0 {
            return &buf[at..];
        }
    }
}
