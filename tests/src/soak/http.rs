//! The soak's HTTP/1.1 client: one kernel connection, requests written
//! whole, each response read and checked against what the built-in
//! endpoint must answer ([`Expect`]), byte for byte, as it arrives.
//!
//! A response that arrives whole but differs is [`Outcome::Wrong`]; one
//! that does not arrive (connect, reset, timeout, the connection ending
//! early) is [`Outcome::Error`], for the fault windows to explain or not.

use std::io::{self, Read, Write};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4, TcpStream};
use std::time::Duration;

use sha2::{Digest, Sha256};
use socket2::{Domain, Protocol, SockRef, Socket, Type};

use crate::apps::hex;
use fairway::http::pattern_byte;

/// The longest response head read.
const MAX_HEAD: usize = 16 * 1024;

/// Why an exchange did not end with the right answer.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// No complete answer: what happened.
    Error(String),
    /// A complete answer, and a wrong one: how.
    Wrong(String),
}

/// `Err(Outcome::Error)` from an I/O error.
fn io_error(what: &str) -> impl FnOnce(io::Error) -> Outcome + '_ {
    move |e| Outcome::Error(format!("{what}: {e}"))
}

/// What the answer must be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// 200 and exactly these bytes (`/plaintext`, `/json`, `/healthz`).
    Exact(&'static [u8]),
    /// `/bytes/N`: `status` (200, or 206 for a range) and bytes `from ..
    /// from + len` of the pattern (byte i is i mod 251).
    Pattern {
        /// 200 or 206.
        status: u16,
        /// The first byte's index.
        from: u64,
        /// How many.
        len: u64,
    },
    /// `/upload`: 200 and `"{len} {sha256}\n"` of the body sent.
    Upload {
        /// The body's length.
        len: u64,
        /// Its SHA-256, hex.
        sha256: String,
    },
    /// `/metrics`: 200 and any body, returned.
    Any,
}

/// A response's head.
#[derive(Clone, Debug, Default)]
pub struct Head {
    /// The status code.
    pub status: u16,
    /// `Content-Length`.
    pub length: Option<u64>,
    /// `Connection: close`.
    pub close: bool,
}

/// One client connection to the server.
pub struct Conn {
    stream: TcpStream,
    buf: Vec<u8>,
    /// Bytes of `buf` already consumed.
    at: usize,
    /// The connection ended (the server's FIN) while reading.
    ended: bool,
}

impl Conn {
    /// Connects to `server` (from `bind` when given: an address of this
    /// namespace other than its primary one), waiting at most `timeout`,
    /// with `io_timeout` on every read and write after.
    ///
    /// # Errors
    ///
    /// [`Outcome::Error`]: what connect said.
    pub fn connect(
        server: SocketAddrV4,
        bind: Option<Ipv4Addr>,
        timeout: Duration,
        io_timeout: Duration,
    ) -> Result<Conn, Outcome> {
        let socket = Socket::new(Domain::IPV4, Type::STREAM, Some(Protocol::TCP)).map_err(io_error("socket"))?;
        if let Some(ip) = bind {
            socket.bind(&SocketAddr::from((ip, 0)).into()).map_err(io_error("bind"))?;
        }
        socket.connect_timeout(&SocketAddr::V4(server).into(), timeout).map_err(io_error("connect"))?;
        let stream: TcpStream = socket.into();
        stream.set_nodelay(true).map_err(io_error("TCP_NODELAY"))?;
        stream.set_read_timeout(Some(io_timeout)).map_err(io_error("SO_RCVTIMEO"))?;
        stream.set_write_timeout(Some(io_timeout)).map_err(io_error("SO_SNDTIMEO"))?;
        Ok(Conn { stream, buf: Vec::with_capacity(64 * 1024), at: 0, ended: false })
    }

    /// Writes `bytes` whole.
    ///
    /// # Errors
    ///
    /// [`Outcome::Error`]: the write failed or timed out.
    pub fn send(&mut self, bytes: &[u8]) -> Result<(), Outcome> {
        self.stream.write_all(bytes).map_err(io_error("write"))
    }

    /// Reads more into the buffer; an error at the connection's end.
    fn fill(&mut self) -> Result<(), Outcome> {
        if self.at > 0 && self.at == self.buf.len() {
            self.buf.clear();
            self.at = 0;
        }
        let len = self.buf.len();
        self.buf.resize(len + 64 * 1024, 0);
        let n = self.stream.read(&mut self.buf[len..]);
        let n = match n {
            Ok(n) => n,
            Err(e) => {
                self.buf.truncate(len);
                return Err(io_error("read")(e));
            }
        };
        self.buf.truncate(len + n);
        if n == 0 {
            self.ended = true;
            return Err(Outcome::Error("the connection ended before the response did".to_owned()));
        }
        Ok(())
    }

    /// Reads one response head.
    ///
    /// # Errors
    ///
    /// [`Outcome::Error`] when it does not come; [`Outcome::Wrong`] when
    /// it does not parse.
    pub fn head(&mut self) -> Result<Head, Outcome> {
        loop {
            let mut headers = [httparse::EMPTY_HEADER; 32];
            let mut response = httparse::Response::new(&mut headers);
            match response.parse(&self.buf[self.at..]) {
                Ok(httparse::Status::Complete(len)) => {
                    let mut head = Head { status: response.code.unwrap_or(0), ..Head::default() };
                    for h in response.headers.iter() {
                        if h.name.eq_ignore_ascii_case("content-length") {
                            let value = std::str::from_utf8(h.value).ok().and_then(|v| v.trim().parse().ok());
                            head.length =
                                Some(value.ok_or_else(|| Outcome::Wrong(format!("Content-Length {:?}", h.value)))?);
                        } else if h.name.eq_ignore_ascii_case("connection") {
                            head.close = h.value.eq_ignore_ascii_case(b"close");
                        }
                    }
                    self.at += len;
                    return Ok(head);
                }
                Ok(httparse::Status::Partial) if self.buf.len() - self.at < MAX_HEAD => self.fill()?,
                Ok(httparse::Status::Partial) => return Err(Outcome::Wrong("a head over 16 KiB".to_owned())),
                Err(e) => return Err(Outcome::Wrong(format!("a head that does not parse: {e}"))),
            }
        }
    }

    /// Hands the next `len` body bytes to `take` as they arrive, at most
    /// `limit` of them (fewer: the rest is left unread).
    fn body(
        &mut self,
        len: u64,
        limit: u64,
        mut take: impl FnMut(&[u8]) -> Result<(), Outcome>,
    ) -> Result<(), Outcome> {
        let mut left = len.min(limit);
        while left > 0 {
            if self.at == self.buf.len() {
                self.fill()?;
            }
            let n = (self.buf.len() - self.at).min(usize::try_from(left).unwrap_or(usize::MAX));
            take(&self.buf[self.at..self.at + n])?;
            self.at += n;
            left -= n as u64;
        }
        Ok(())
    }

    /// Reads one response and checks it against `expect`. Returns its
    /// head, and the body for [`Expect::Any`].
    ///
    /// # Errors
    ///
    /// See [`Outcome`]. A status of 408 on an upload (the server's body
    /// timeout: the body did not come in time) is an error, not a wrong
    /// answer.
    pub fn response(&mut self, expect: &Expect) -> Result<(Head, Vec<u8>), Outcome> {
        self.response_limited(expect, u64::MAX)
    }

    /// [`response`](Self::response), reading at most `limit` body bytes
    /// (all checked).
    ///
    /// # Errors
    ///
    /// See [`response`](Self::response).
    pub fn response_limited(&mut self, expect: &Expect, limit: u64) -> Result<(Head, Vec<u8>), Outcome> {
        let head = self.head()?;
        let want = match expect {
            Expect::Pattern { status, .. } => *status,
            _ => 200,
        };
        if head.status != want {
            let is_timeout = head.status == 408 && matches!(expect, Expect::Upload { .. });
            let why = format!("status {} where {want} was due", head.status);
            return Err(if is_timeout { Outcome::Error(why) } else { Outcome::Wrong(why) });
        }
        let Some(len) = head.length else { return Err(Outcome::Wrong("no Content-Length".to_owned())) };
        let mut kept = Vec::new();
        match expect {
            Expect::Exact(body) => {
                if len != body.len() as u64 {
                    return Err(Outcome::Wrong(format!("{len} bytes where {} were due", body.len())));
                }
                self.body(len, limit, |piece| {
                    kept.extend_from_slice(piece);
                    Ok(())
                })?;
                if kept != *body {
                    return Err(Outcome::Wrong(format!("body {:?}", String::from_utf8_lossy(&kept))));
                }
            }
            Expect::Pattern { from, len: want_len, .. } => {
                if len != *want_len {
                    return Err(Outcome::Wrong(format!("{len} bytes where {want_len} were due")));
                }
                let mut at = *from;
                self.body(len, limit, |piece| {
                    for &b in piece {
                        if b != pattern_byte(at) {
                            return Err(Outcome::Wrong(format!("byte {at} is {b}, not {}", pattern_byte(at))));
                        }
                        at += 1;
                    }
                    Ok(())
                })?;
            }
            Expect::Upload { len: sent, sha256 } => {
                self.body(len, limit, |piece| {
                    kept.extend_from_slice(piece);
                    Ok(())
                })?;
                let want = format!("{sent} {sha256}\n");
                if kept != want.as_bytes() {
                    return Err(Outcome::Wrong(format!("{:?} where {want:?} was due", String::from_utf8_lossy(&kept))));
                }
            }
            Expect::Any => self.body(len, limit, |piece| {
                kept.extend_from_slice(piece);
                Ok(())
            })?,
        }
        Ok((head, kept))
    }

    /// Resets the connection (SO_LINGER 0, then close): the client gives
    /// up mid-response and says so with an RST.
    pub fn reset(self) {
        let _ = SockRef::from(&self.stream).set_linger(Some(Duration::ZERO));
    }

    /// The connection for what this module does not do.
    #[must_use]
    pub fn stream(&self) -> &TcpStream {
        &self.stream
    }
}

/// `GET path` with the `Host` header, and `Connection: close` when asked,
/// and more header lines.
#[must_use]
pub fn get(path: &str, close: bool, extra: &str) -> Vec<u8> {
    let connection = if close { "Connection: close\r\n" } else { "" };
    format!("GET {path} HTTP/1.1\r\nHost: fairway\r\n{connection}{extra}\r\n").into_bytes()
}

/// `n` bytes of upload body number `k`: neither the pattern the server
/// produces nor the same from one upload to the next.
#[must_use]
pub fn upload_body(k: u64, n: usize) -> Vec<u8> {
    (0..n as u64).map(|i| (i.wrapping_add(k).wrapping_mul(2_654_435_761) >> 13) as u8).collect()
}

/// `POST /upload` carrying `body`: with `Content-Length`, or chunked in
/// pieces of `chunk` bytes.
#[must_use]
pub fn post_upload(body: &[u8], chunk: Option<usize>) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 256);
    out.extend_from_slice(b"POST /upload HTTP/1.1\r\nHost: fairway\r\n");
    match chunk {
        None => {
            out.extend_from_slice(format!("Content-Length: {}\r\n\r\n", body.len()).as_bytes());
            out.extend_from_slice(body);
        }
        Some(size) => {
            out.extend_from_slice(b"Transfer-Encoding: chunked\r\n\r\n");
            for piece in body.chunks(size.max(1)) {
                out.extend_from_slice(format!("{:x}\r\n", piece.len()).as_bytes());
                out.extend_from_slice(piece);
                out.extend_from_slice(b"\r\n");
            }
            out.extend_from_slice(b"0\r\n\r\n");
        }
    }
    out
}

/// What `/upload` must answer for `body`.
#[must_use]
pub fn upload_expect(body: &[u8]) -> Expect {
    Expect::Upload { len: body.len() as u64, sha256: hex(&Sha256::digest(body)) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::net::TcpListener;

    /// A server on loopback that answers each connection with `reply`.
    fn serve(reply: Vec<u8>) -> SocketAddrV4 {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let SocketAddr::V4(addr) = listener.local_addr().unwrap() else { unreachable!() };
        std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut request = [0u8; 4096];
            let _ = s.read(&mut request);
            let _ = s.write_all(&reply);
        });
        addr
    }

    fn exchange(reply: &[u8], expect: &Expect) -> Result<(Head, Vec<u8>), Outcome> {
        let addr = serve(reply.to_vec());
        let mut conn = Conn::connect(addr, None, Duration::from_secs(5), Duration::from_secs(5))?;
        conn.send(&get("/x", false, ""))?;
        conn.response(expect)
    }

    #[test]
    fn right_wrong_and_missing_answers() {
        let hello = Expect::Exact(b"Hello, World!");
        assert!(exchange(b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, World!", &hello).is_ok());
        let wrong = exchange(b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, world!", &hello);
        assert!(matches!(wrong, Err(Outcome::Wrong(_))), "{wrong:?}");
        let status = exchange(b"HTTP/1.1 500 Oops\r\nContent-Length: 0\r\n\r\n", &hello);
        assert!(matches!(status, Err(Outcome::Wrong(_))), "{status:?}");
        let short = exchange(b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello", &hello);
        assert!(matches!(short, Err(Outcome::Error(_))), "{short:?}");

        let pattern: Vec<u8> = (0..300u64).map(pattern_byte).collect();
        let mut reply = b"HTTP/1.1 206 Partial Content\r\nContent-Length: 200\r\n\r\n".to_vec();
        reply.extend_from_slice(&pattern[100..300]);
        assert!(exchange(&reply, &Expect::Pattern { status: 206, from: 100, len: 200 }).is_ok());
        let off = exchange(&reply, &Expect::Pattern { status: 206, from: 101, len: 200 });
        assert!(matches!(off, Err(Outcome::Wrong(_))), "{off:?}");

        let body = upload_body(3, 1000);
        let Expect::Upload { sha256, .. } = upload_expect(&body) else { unreachable!() };
        let answer = format!("1000 {sha256}\n");
        let reply = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n{answer}", answer.len());
        assert!(exchange(reply.as_bytes(), &upload_expect(&body)).is_ok());
        let timeout = exchange(b"HTTP/1.1 408 Request Timeout\r\nContent-Length: 0\r\n\r\n", &upload_expect(&body));
        assert!(matches!(timeout, Err(Outcome::Error(_))), "{timeout:?}");
    }

    #[test]
    fn chunked_uploads_frame_their_pieces() {
        let req = post_upload(b"abcde", Some(2));
        assert!(
            req.ends_with(b"\r\n\r\n2\r\nab\r\n2\r\ncd\r\n1\r\ne\r\n0\r\n\r\n"),
            "{}",
            String::from_utf8_lossy(&req)
        );
        assert!(post_upload(b"abc", None).ends_with(b"Content-Length: 3\r\n\r\nabc"));
        assert_ne!(upload_body(1, 64), upload_body(2, 64));
    }
}
