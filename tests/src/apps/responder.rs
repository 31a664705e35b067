//! A minimal HTTP/1.1 responder on the stack, for kernel clients in the
//! real-peer tests (curl, Python), until the server's own HTTP layer exists.
//!
//! - `GET /bytes/N` (and `HEAD`): `N` bytes of [`pattern_byte`], with
//!   `Content-Length`; up to [`Responder::max_bytes`].
//! - `POST /upload` with `Content-Length`: answers `<bytes> <sha256 hex>\n`
//!   for the body it received.
//! - Anything else: 404; a request it cannot parse: 400 and close; headers
//!   over 16 KiB: 431 and close.
//!
//! Keep-alive and pipelining work (requests are answered in order); HTTP/1.0
//! or `Connection: close` closes after the response. Bodies are streamed as
//! the send buffer frees up, never built whole.

use std::collections::HashMap;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddrV4};

use fairway::runtime::App;
use fairway_stack::time::Instant;
use fairway_stack::{Event, Handle, Listener, Shard};
use sha2::{Digest, Sha256};

/// The largest request head accepted.
const MAX_HEAD: usize = 16 * 1024;

/// Byte `i` of every `/bytes/N` body: the server's pattern (`i mod 251`),
/// re-exported for the tests that check bodies with it.
pub use fairway::http::pattern_byte;

/// What a connection is doing.
enum Phase {
    /// Reading a request head.
    Head,
    /// Reading an upload body: bytes still to come, and the running digest.
    Upload { remaining: u64, received: u64, digest: Sha256 },
    /// Sending the body of `/bytes/N`: the next offset and the end.
    Bytes { next: u64, end: u64 },
}

struct Conn {
    input: Vec<u8>,
    output: Vec<u8>,
    phase: Phase,
    /// Close once the current response is out.
    close_after: bool,
    /// The peer sent FIN.
    peer_done: bool,
}

/// The responder: one listener, any number of connections.
pub struct Responder {
    port: u16,
    /// The largest `/bytes/N` served.
    pub max_bytes: u64,
    listener: Option<Listener>,
    conns: HashMap<Handle, Conn>,
    scratch: Vec<u8>,
    /// Requests answered, by any status.
    pub requests: u64,
    /// Connections accepted.
    pub accepted: u64,
    /// The most connections open at once.
    pub peak_connections: usize,
    /// Every accepted connection as (local, remote) address, so a test can
    /// check which shard each landed on.
    pub flows: Vec<(SocketAddrV4, SocketAddrV4)>,
}

impl Responder {
    /// A responder that will listen on `port` (any address).
    #[must_use]
    pub fn new(port: u16) -> Responder {
        Responder {
            port,
            max_bytes: 1 << 30,
            listener: None,
            conns: HashMap::new(),
            scratch: vec![0; 64 * 1024],
            requests: 0,
            accepted: 0,
            peak_connections: 0,
            flows: Vec::new(),
        }
    }

    fn on_readable(&mut self, shard: &mut Shard, h: Handle) {
        let Some(conn) = self.conns.get_mut(&h) else { return };
        loop {
            match shard.recv(h, &mut self.scratch) {
                Ok(0) => {
                    conn.peer_done = true;
                    break;
                }
                Ok(n) => conn.input.extend_from_slice(&self.scratch[..n]),
                Err(_) => break,
            }
        }
        self.advance(shard, h);
    }

    /// Parses what can be parsed and sends what can be sent.
    fn advance(&mut self, shard: &mut Shard, h: Handle) {
        let max_bytes = self.max_bytes;
        let Some(conn) = self.conns.get_mut(&h) else { return };
        loop {
            // Out with what is queued before taking on more work.
            if !flush(shard, h, conn, &mut self.scratch) {
                return; // the send buffer is full; Writable brings us back
            }
            match &mut conn.phase {
                Phase::Head => {
                    if conn.close_after {
                        shard.close(h);
                        self.conns.remove(&h);
                        return;
                    }
                    match parse_head(&conn.input, max_bytes) {
                        Parsed::Partial if conn.input.len() > MAX_HEAD => {
                            respond(conn, 431, "request head too large\n", true);
                            conn.input.clear();
                            self.requests += 1;
                        }
                        Parsed::Partial => {
                            if conn.peer_done {
                                shard.close(h);
                                self.conns.remove(&h);
                            }
                            return;
                        }
                        Parsed::Bad => {
                            respond(conn, 400, "bad request\n", true);
                            conn.input.clear();
                            self.requests += 1;
                        }
                        Parsed::Request { head_len, request, close } => {
                            conn.input.drain(..head_len);
                            conn.close_after = close;
                            self.requests += 1;
                            start(conn, request);
                        }
                    }
                }
                Phase::Upload { remaining, received, digest } => {
                    let take = (*remaining).min(conn.input.len() as u64) as usize;
                    digest.update(&conn.input[..take]);
                    conn.input.drain(..take);
                    *remaining -= take as u64;
                    *received += take as u64;
                    if *remaining > 0 {
                        if conn.peer_done {
                            shard.close(h);
                            self.conns.remove(&h);
                        }
                        return;
                    }
                    let body = format!("{} {}\n", received, super::hex(&digest.clone().finalize()));
                    conn.phase = Phase::Head;
                    let close = conn.close_after;
                    respond(conn, 200, &body, close);
                }
                Phase::Bytes { .. } => return, // `flush` streams it
            }
        }
    }
}

/// A request the responder understands.
enum Request {
    Bytes { n: u64, head: bool },
    Upload { len: u64 },
    NotFound,
    TooBig,
}

enum Parsed {
    Partial,
    Bad,
    Request { head_len: usize, request: Request, close: bool },
}

fn parse_head(input: &[u8], max_bytes: u64) -> Parsed {
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut req = httparse::Request::new(&mut headers);
    let head_len = match req.parse(input) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => return Parsed::Partial,
        Err(_) => return Parsed::Bad,
    };
    let header = |name: &str| {
        req.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).and_then(|h| std::str::from_utf8(h.value).ok())
    };
    let http10 = req.version == Some(0);
    let connection = header("connection").map(str::to_ascii_lowercase);
    let close = match connection.as_deref() {
        Some("close") => true,
        Some("keep-alive") => false,
        _ => http10,
    };
    let (Some(method), Some(path)) = (req.method, req.path) else { return Parsed::Bad };
    let request = match (method, path.strip_prefix("/bytes/")) {
        ("GET" | "HEAD", Some(n)) => match n.parse::<u64>() {
            Ok(n) if n <= max_bytes => Request::Bytes { n, head: method == "HEAD" },
            Ok(_) => Request::TooBig,
            Err(_) => Request::NotFound,
        },
        ("POST", None) if path == "/upload" => {
            if header("transfer-encoding").is_some() {
                return Parsed::Bad; // chunked uploads are the real server's business
            }
            match header("content-length").map(str::trim).map(str::parse::<u64>) {
                Some(Ok(len)) => Request::Upload { len },
                _ => return Parsed::Bad,
            }
        }
        _ => Request::NotFound,
    };
    Parsed::Request { head_len, request, close }
}

fn start(conn: &mut Conn, request: Request) {
    let close = conn.close_after;
    match request {
        Request::Bytes { n, head } => {
            let connection = if close { "close" } else { "keep-alive" };
            let _ = write!(
                Writer(&mut conn.output),
                "HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {n}\r\n\
                 Connection: {connection}\r\n\r\n"
            );
            if !head {
                conn.phase = Phase::Bytes { next: 0, end: n };
            }
        }
        Request::Upload { len } => {
            conn.phase = Phase::Upload { remaining: len, received: 0, digest: Sha256::new() };
        }
        Request::NotFound => respond(conn, 404, "not found\n", close),
        Request::TooBig => respond(conn, 413, "too large\n", close),
    }
}

fn respond(conn: &mut Conn, status: u16, body: &str, close: bool) {
    let reason = match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        413 => "Content Too Large",
        431 => "Request Header Fields Too Large",
        _ => "Error",
    };
    conn.close_after |= close;
    let connection = if conn.close_after { "close" } else { "keep-alive" };
    let _ = write!(
        Writer(&mut conn.output),
        "HTTP/1.1 {status} {reason}\r\nContent-Type: text/plain\r\nContent-Length: {}\r\nConnection: {connection}\r\n\r\n{body}",
        body.len()
    );
}

/// Sends queued output, then the `/bytes` body; returns whether everything
/// due went out.
fn flush(shard: &mut Shard, h: Handle, conn: &mut Conn, scratch: &mut [u8]) -> bool {
    while !conn.output.is_empty() {
        match shard.send(h, &conn.output) {
            Ok(0) | Err(_) => return false,
            Ok(n) => {
                conn.output.drain(..n);
            }
        }
    }
    if let Phase::Bytes { next, end } = &mut conn.phase {
        while *next < *end {
            let len = ((*end - *next) as usize).min(scratch.len());
            for (i, b) in scratch[..len].iter_mut().enumerate() {
                *b = pattern_byte(*next + i as u64);
            }
            match shard.send(h, &scratch[..len]) {
                Ok(0) | Err(_) => return false,
                Ok(n) => *next += n as u64,
            }
        }
        conn.phase = Phase::Head;
    }
    true
}

/// `fmt::Write` into a byte vector.
struct Writer<'a>(&'a mut Vec<u8>);

impl std::fmt::Write for Writer<'_> {
    fn write_str(&mut self, s: &str) -> std::fmt::Result {
        self.0.extend_from_slice(s.as_bytes());
        Ok(())
    }
}

impl App for Responder {
    fn start(&mut self, shard: &mut Shard, _: Instant) {
        let addr = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, self.port);
        self.listener = Some(shard.listen(addr).unwrap_or_else(|e| panic!("listen on {addr}: {e}")));
    }

    fn on_event(&mut self, shard: &mut Shard, _: Instant, event: Event) {
        match event {
            Event::Acceptable(l) => {
                while let Some(h) = shard.accept(l) {
                    self.accepted += 1;
                    let conn = Conn {
                        input: Vec::new(),
                        output: Vec::new(),
                        phase: Phase::Head,
                        close_after: false,
                        peer_done: false,
                    };
                    self.conns.insert(h, conn);
                    self.peak_connections = self.peak_connections.max(self.conns.len());
                    if let Some(flow) = shard.flow(h) {
                        self.flows.push((flow.local, flow.remote));
                    }
                    // Data may have come with the handshake's last ACK.
                    self.on_readable(shard, h);
                }
            }
            Event::Readable(h) | Event::HangUp(h) => self.on_readable(shard, h),
            Event::Writable(h) => self.advance(shard, h),
            Event::Error(h, _) => {
                shard.close(h);
                self.conns.remove(&h);
            }
            Event::Connected(_) => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(s: &str) -> Parsed {
        parse_head(s.as_bytes(), 1000)
    }

    #[test]
    fn heads_are_routed() {
        assert!(matches!(
            parse("GET /bytes/10 HTTP/1.1\r\nHost: x\r\n\r\n"),
            Parsed::Request { request: Request::Bytes { n: 10, head: false }, close: false, .. }
        ));
        assert!(matches!(
            parse("HEAD /bytes/10 HTTP/1.0\r\n\r\n"),
            Parsed::Request { request: Request::Bytes { head: true, .. }, close: true, .. }
        ));
        assert!(matches!(parse("GET /bytes/1001 HTTP/1.1\r\n\r\n"), Parsed::Request { request: Request::TooBig, .. }));
        assert!(matches!(
            parse("POST /upload HTTP/1.1\r\nContent-Length: 5\r\nConnection: close\r\n\r\n"),
            Parsed::Request { request: Request::Upload { len: 5 }, close: true, .. }
        ));
        assert!(matches!(parse("POST /upload HTTP/1.1\r\n\r\n"), Parsed::Bad));
        assert!(matches!(parse("GET / HTTP/1.1\r\n\r\n"), Parsed::Request { request: Request::NotFound, .. }));
        assert!(matches!(parse("GET /bytes/1 HTTP/1.1\r\nHost"), Parsed::Partial));
        assert!(matches!(parse("\0\0\0 garbage\r\n\r\n"), Parsed::Bad));
    }

    #[test]
    fn the_pattern_repeats_every_251_bytes() {
        assert_eq!((pattern_byte(0), pattern_byte(250), pattern_byte(251), pattern_byte(252)), (0, 250, 0, 1));
    }
}
