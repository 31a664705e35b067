//! What the proxy writes and reads on the way through: the request head it
//! sends upstream (hop-by-hop fields removed, the forwarding fields added)
//! and the response head it reads back and answers the client with.
//!
//! RFC 9110 §7.6.1: `Connection`, the fields it lists, and `Keep-Alive`,
//! `Proxy-Connection`, `TE`, `Transfer-Encoding` and `Upgrade` are the
//! connection's own and are not forwarded; the proxy frames each side's
//! body itself. §7.6.3: each hop adds itself to `Via`. RFC 7239:
//! `Forwarded` gains `for=` the client and `proto=` its scheme; the de facto
//! `X-Forwarded-For` and `X-Forwarded-Proto` are kept in step with it.

use std::net::SocketAddr;

use crate::http::parse::decimal;
use crate::http::{Request, Response};

/// How the proxy calls itself in `Via`.
pub(crate) const VIA_NAME: &[u8] = b"fairway";

/// The most header fields an upstream response head may have.
pub(crate) const MAX_RESPONSE_HEADERS: usize = 96;

/// Whether `name` is a field of the connection rather than the message
/// (RFC 9110 §7.6.1), or one the proxy writes itself (the framing, the
/// forwarding fields, `Expect`, which the server already answered).
fn own_field(name: &[u8]) -> bool {
    const FIELDS: [&[u8]; 11] = [
        b"connection",
        b"keep-alive",
        b"proxy-connection",
        b"te",
        b"transfer-encoding",
        b"upgrade",
        b"trailer",
        b"content-length",
        b"expect",
        b"x-forwarded-proto",
        b"via",
    ];
    FIELDS.iter().any(|f| f.eq_ignore_ascii_case(name))
}

/// Whether a field named `name` is listed in the `Connection` values
/// `connection` (so it is hop-by-hop too).
fn listed(connection: &[&[u8]], name: &[u8]) -> bool {
    connection.iter().any(|v| v.split(|&b| b == b',').any(|token| token.trim_ascii().eq_ignore_ascii_case(name)))
}

/// The request body's framing as the proxy sends it upstream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RequestBody {
    /// None.
    Empty,
    /// Exactly this many bytes.
    Length(u64),
    /// Chunked (the client's was; its length is not known).
    Chunked,
}

/// Appends the head of `req` as it goes upstream to `out`: the request line
/// (always HTTP/1.1), the end-to-end fields, then `Via`, `Forwarded`,
/// `X-Forwarded-For`, `X-Forwarded-Proto` with the client `peer` and
/// `proto` added, the body's framing, and `Host` from `authority` when the
/// client sent none (HTTP/1.0).
pub(crate) fn write_request(
    out: &mut Vec<u8>,
    req: &Request<'_>,
    peer: Option<SocketAddr>,
    proto: &str,
    body: RequestBody,
    authority: &str,
) {
    let put = |out: &mut Vec<u8>, parts: &[&[u8]]| parts.iter().for_each(|p| out.extend_from_slice(p));
    put(out, &[req.method_name().as_bytes(), b" ", req.target().as_bytes(), b" HTTP/1.1\r\n"]);
    let mut connection: [&[u8]; 8] = [b""; 8];
    for (slot, value) in connection.iter_mut().zip(req.headers_named("connection")) {
        *slot = value;
    }
    let mut host = false;
    let (mut forwarded, mut xff, mut via) = (None, None, None);
    for (name, value) in req.headers() {
        let n = name.as_bytes();
        if own_field(n) || listed(&connection, n) {
            if n.eq_ignore_ascii_case(b"via") {
                via = Some(value);
            }
            continue;
        }
        if n.eq_ignore_ascii_case(b"forwarded") {
            forwarded = Some(value);
            continue;
        }
        if n.eq_ignore_ascii_case(b"x-forwarded-for") {
            xff = Some(value);
            continue;
        }
        host |= n.eq_ignore_ascii_case(b"host");
        put(out, &[n, b": ", value, b"\r\n"]);
    }
    if !host {
        put(out, &[b"Host: ", authority.as_bytes(), b"\r\n"]);
    }
    let version: &[u8] = if req.is_http10() { b"1.0 " } else { b"1.1 " };
    let joined = |out: &mut Vec<u8>, name: &[u8], earlier: Option<&[u8]>| {
        put(out, &[name, b": "]);
        if let Some(e) = earlier {
            put(out, &[e, b", "]);
        }
    };
    joined(out, b"Via", via);
    put(out, &[version, VIA_NAME, b"\r\n"]);
    let mut ip = [0u8; 48];
    let ip = peer.map_or(&b"unknown"[..], |p| format_ip(&mut ip, p));
    joined(out, b"Forwarded", forwarded);
    let quoted = peer.is_some_and(|p| p.is_ipv6());
    put(out, &[b"for=", if quoted { b"\"[" } else { b"" }, ip, if quoted { b"]\"" } else { b"" }]);
    put(out, &[b";proto=", proto.as_bytes(), b"\r\n"]);
    joined(out, b"X-Forwarded-For", xff);
    put(out, &[ip, b"\r\nX-Forwarded-Proto: ", proto.as_bytes(), b"\r\n"]);
    match body {
        RequestBody::Empty => {}
        RequestBody::Length(n) => {
            let mut digits = itoa::Buffer::new();
            put(out, &[b"Content-Length: ", digits.format(n).as_bytes(), b"\r\n"]);
        }
        RequestBody::Chunked => put(out, &[b"Transfer-Encoding: chunked\r\n"]),
    }
    out.extend_from_slice(b"\r\n");
}

/// `peer`'s address as text in `buf`, without a heap allocation.
fn format_ip(buf: &mut [u8; 48], peer: SocketAddr) -> &[u8] {
    use std::io::Write;
    let mut w = std::io::Cursor::new(&mut buf[..]);
    let _ = write!(w, "{}", peer.ip());
    let n = usize::try_from(w.position()).unwrap_or(0);
    &buf[..n]
}

/// How an upstream response's body ends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ResponseBody {
    /// It has none (HEAD, 1xx, 204, 304).
    Empty,
    /// After this many bytes.
    Length(u64),
    /// At its last chunk.
    Chunked,
    /// When the upstream closes the connection.
    Close,
}

/// An upstream response head, read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ResponseHead {
    pub status: u16,
    /// Its length in the input.
    pub len: usize,
    pub body: ResponseBody,
    /// The upstream keeps the connection open after the body.
    pub reusable: bool,
}

/// Why an upstream response cannot be forwarded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum BadResponse {
    /// Not HTTP/1.x, or malformed.
    Malformed,
    /// Its head does not fit the connection's buffer.
    TooLarge,
    /// Two different lengths, or an unparseable one.
    Length,
    /// A protocol switch nobody asked for.
    Switch,
}

impl BadResponse {
    pub(crate) fn describe(self) -> &'static str {
        match self {
            BadResponse::Malformed => "a malformed response head",
            BadResponse::TooLarge => "a response head too large",
            BadResponse::Length => "a response with conflicting or invalid Content-Length",
            BadResponse::Switch => "a 101 Switching Protocols it was not asked for",
        }
    }
}

/// What [`read_response`] found.
pub(crate) enum ReadHead<'a> {
    /// The head is not all there yet: `res` is given back.
    Incomplete(Response<'a>),
    /// It cannot be forwarded: `res` is given back, untouched, for the
    /// error answer.
    Bad(BadResponse, Response<'a>),
    /// The client was answered with it.
    Answered(ResponseHead, crate::http::Reply),
}

/// Reads the response head at the start of `input` (after any 1xx interim
/// responses, which are skipped: their length is counted in the head's)
/// and, when it is complete, answers `res` with it: its status and
/// end-to-end fields, `Via` with the proxy added, and the body to be
/// streamed. `head_only`: the request was HEAD. `full`: `input` is as
/// large as it can grow.
pub(crate) fn read_response<'a>(input: &[u8], head_only: bool, full: bool, res: Response<'a>) -> ReadHead<'a> {
    let mut at = 0;
    loop {
        let mut fields = [httparse::EMPTY_HEADER; MAX_RESPONSE_HEADERS];
        let mut parsed = httparse::Response::new(&mut fields);
        let len = match parsed.parse(&input[at..]) {
            Ok(httparse::Status::Complete(len)) => len,
            Ok(httparse::Status::Partial) if full => return ReadHead::Bad(BadResponse::TooLarge, res),
            Ok(httparse::Status::Partial) => return ReadHead::Incomplete(res),
            Err(httparse::Error::TooManyHeaders) => return ReadHead::Bad(BadResponse::TooLarge, res),
            Err(_) => return ReadHead::Bad(BadResponse::Malformed, res),
        };
        let status = parsed.code.unwrap_or(0);
        match status {
            101 => return ReadHead::Bad(BadResponse::Switch, res),
            100..=199 => {
                at += len;
                continue;
            }
            200..=999 => {}
            _ => return ReadHead::Bad(BadResponse::Malformed, res),
        }
        let http10 = parsed.version == Some(0);
        let mut connection: [&[u8]; 8] = [b""; 8];
        for (slot, h) in
            connection.iter_mut().zip(parsed.headers.iter().filter(|h| h.name.eq_ignore_ascii_case("connection")))
        {
            *slot = h.value;
        }
        let close =
            connection.iter().any(|v| v.split(|&b| b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(b"close")));
        let keep_alive = connection
            .iter()
            .any(|v| v.split(|&b| b == b',').any(|t| t.trim_ascii().eq_ignore_ascii_case(b"keep-alive")));
        let (mut length, mut chunked, mut encoded) = (None::<u64>, false, false);
        for h in parsed.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                match decimal(h.value.trim_ascii()) {
                    Some(n) if length.is_none_or(|l| l == n) => length = Some(n),
                    _ => return ReadHead::Bad(BadResponse::Length, res),
                }
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                encoded = true;
                chunked = h
                    .value
                    .rsplit(|&b| b == b',')
                    .next()
                    .is_some_and(|c| c.trim_ascii().eq_ignore_ascii_case(b"chunked"));
            }
        }
        let body = if head_only || matches!(status, 204 | 304) {
            ResponseBody::Empty
        } else if encoded {
            // RFC 9112 §6.3: Transfer-Encoding wins over Content-Length; a
            // final coding other than chunked runs to the close.
            if chunked { ResponseBody::Chunked } else { ResponseBody::Close }
        } else {
            length.map_or(ResponseBody::Close, ResponseBody::Length)
        };
        let reusable =
            !close && (!http10 || keep_alive) && body != ResponseBody::Close && !(encoded && length.is_some());
        let mut head = res.status(status);
        let mut via = None;
        for h in parsed.headers.iter() {
            let n = h.name.as_bytes();
            if n.eq_ignore_ascii_case(b"via") {
                via = Some(h.value);
                continue;
            }
            if own_field(n)
                || listed(&connection, n)
                || n.eq_ignore_ascii_case(b"date")
                || n.eq_ignore_ascii_case(b"server")
            {
                continue;
            }
            head = head.header(h.name, h.value);
        }
        let mut value = [0u8; 256];
        let mut w = 0;
        for part in [
            via.unwrap_or(b""),
            if via.is_some() { b", " } else { b"" },
            if http10 { b"1.0 " } else { b"1.1 " },
            VIA_NAME,
        ] {
            let end = (w + part.len()).min(value.len());
            value[w..end].copy_from_slice(&part[..end - w]);
            w = end;
        }
        head = head.header("Via", &value[..w]);
        let reply = match body {
            // A HEAD answer says the length the GET would have.
            ResponseBody::Empty if head_only => head.stream(length),
            ResponseBody::Empty => head.stream(Some(0)),
            ResponseBody::Length(n) => head.stream(Some(n)),
            ResponseBody::Chunked | ResponseBody::Close => head.stream(None),
        };
        return ReadHead::Answered(ResponseHead { status, len: at + len, body, reusable }, reply);
    }
}
