//! Request heads: httparse does the syntax; this file adds the limits and the
//! message-framing rules of RFC 9112 that decide where a body ends.
//!
//! - Request line longer than `max_request_line` → 414; head longer than
//!   `max_head`, or more than [`MAX_HEADERS`] field lines → 431; anything
//!   httparse rejects, or a target that is not origin-form or absolute-form
//!   → 400.
//! - RFC 9112 §6.3: `Transfer-Encoding` together with `Content-Length`, a
//!   `Transfer-Encoding` in HTTP/1.0, `chunked` anywhere but last (or
//!   twice), several different `Content-Length` values, or one that is not a
//!   number → 400. A coding other than `chunked` before it (`gzip, chunked`)
//!   → 501: this server decodes no other coding.
//! - RFC 9112 §3.2: an HTTP/1.1 request without `Host`, or with two → 400.
//! - RFC 9110 §2.5 and §15.6.6: `HTTP/1.x` with a minor version above 1 is
//!   read as HTTP/1.1 (the caller rewrites the digit, see
//!   [`Reject::NewerMinor`]); a major version other than 1 (`HTTP/2.0`, as
//!   in the HTTP/2 preface) → 505.
//! - A `Content-Length` over `max_body` → 413 before any of the body is read.
//!
//! Each of these answers and closes: after a framing error the next byte's
//! meaning is unknown.

use httparse::Header;

/// Field lines parsed per request; more is a 431.
pub(crate) const MAX_HEADERS: usize = 64;

/// The limits a head is held to.
#[derive(Clone, Copy, Debug)]
pub(crate) struct HeadLimits {
    pub max_request_line: usize,
    pub max_head: usize,
    pub max_body: u64,
}

/// Why a head is refused. Every refusal closes the connection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Reject {
    /// 400: malformed, or its framing cannot be trusted.
    BadRequest,
    /// 413: the declared body is over `max_body`.
    BodyTooLarge,
    /// 414: the request line is over `max_request_line`.
    UriTooLong,
    /// 431: the head is over `max_head`, or has too many field lines.
    HeadTooLarge,
    /// 501: a transfer coding other than chunked.
    NotImplemented,
    /// 505: an HTTP major version other than 1.
    VersionNotSupported,
    /// Not a refusal: the request line says `HTTP/1.x` with x above 1, at
    /// byte `at`. The caller makes that digit a `1` and parses again.
    NewerMinor { at: usize },
}

impl Reject {
    pub(crate) fn status(self) -> u16 {
        match self {
            Reject::BadRequest => 400,
            Reject::BodyTooLarge => 413,
            Reject::UriTooLong => 414,
            Reject::HeadTooLarge => 431,
            Reject::NotImplemented => 501,
            Reject::VersionNotSupported => 505,
            // Never answered: the caller parses again.
            Reject::NewerMinor { .. } => 400,
        }
    }
}

/// The methods this server routes on; any other is [`Method::Other`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Method {
    Get,
    Head,
    Post,
    Other,
}

/// How the request's body is delimited (RFC 9112 §6.3).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Framing {
    /// No body.
    None,
    /// Exactly this many bytes (`Content-Length`, never zero).
    Length(u64),
    /// `Transfer-Encoding: chunked`.
    Chunked,
}

/// A parsed request head. Borrows the input buffer.
#[derive(Debug)]
pub(crate) struct Request<'h, 'b> {
    pub method: Method,
    /// The method as sent.
    pub method_name: &'b str,
    /// The request target as sent.
    pub target: &'b str,
    /// The query, without its `?`.
    pub query: Option<&'b str>,
    /// The path, without query or fragment; always starts with `/`.
    pub path: &'b str,
    pub http10: bool,
    /// The connection stays open after this exchange (RFC 9112 §9.3).
    pub keep_alive: bool,
    pub framing: Framing,
    /// `Expect: 100-continue`.
    pub expect_continue: bool,
    /// Length of the head, including the blank line.
    pub head_len: usize,
    pub headers: &'h [Header<'b>],
}

impl<'b> Request<'_, 'b> {
    /// The first field line named `name` (case-insensitive).
    pub(crate) fn header(&self, name: &str) -> Option<&'b [u8]> {
        self.headers.iter().find(|h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value)
    }

    /// Every field line named `name`, in order.
    pub(crate) fn headers_named<'s>(&'s self, name: &'s str) -> impl Iterator<Item = &'b [u8]> + 's {
        self.headers.iter().filter(move |h| h.name.eq_ignore_ascii_case(name)).map(|h| h.value)
    }
}

/// What a buffer holds.
#[derive(Debug)]
pub(crate) enum Head<'h, 'b> {
    /// Not a whole head yet, and within the limits so far.
    Partial,
    Complete(Request<'h, 'b>),
}

/// Parses the head at the start of `buf`, using `headers` for its field lines.
pub(crate) fn parse_head<'h, 'b>(
    buf: &'b [u8],
    headers: &'h mut [Header<'b>],
    limits: &HeadLimits,
) -> Result<Head<'h, 'b>, Reject> {
    let mut req = httparse::Request::new(headers);
    let head_len = match req.parse(buf) {
        Ok(httparse::Status::Complete(len)) => len,
        Ok(httparse::Status::Partial) => {
            check_partial(buf, limits)?;
            return Ok(Head::Partial);
        }
        Err(httparse::Error::TooManyHeaders) => return Err(Reject::HeadTooLarge),
        Err(httparse::Error::Version) => {
            check_partial(buf, limits)?;
            return match version(buf) {
                Version::Partial => Ok(Head::Partial),
                Version::NewerMinor(at) => Err(Reject::NewerMinor { at }),
                Version::OtherMajor => Err(Reject::VersionNotSupported),
                Version::Malformed => Err(Reject::BadRequest),
            };
        }
        Err(_) => {
            // A line cut short by the limit is reported as a limit.
            check_partial(buf, limits)?;
            return Err(Reject::BadRequest);
        }
    };
    if request_line_len(buf).is_some_and(|len| len > limits.max_request_line) {
        return Err(Reject::UriTooLong);
    }
    if head_len > limits.max_head {
        return Err(Reject::HeadTooLarge);
    }
    let (Some(method), Some(target), Some(version)) = (req.method, req.path, req.version) else {
        return Err(Reject::BadRequest);
    };
    let method_name = method;
    let method = match method {
        "GET" => Method::Get,
        "HEAD" => Method::Head,
        "POST" => Method::Post,
        _ => Method::Other,
    };
    let (path, query) = origin_path(target).ok_or(Reject::BadRequest)?;
    let http10 = version == 0;
    let fields = read_fields(req.headers, http10)?;
    let framing = match (fields.chunked, fields.content_length) {
        (true, _) => Framing::Chunked,
        (false, None | Some(0)) => Framing::None,
        (false, Some(n)) if n > limits.max_body => return Err(Reject::BodyTooLarge),
        (false, Some(n)) => Framing::Length(n),
    };
    Ok(Head::Complete(Request {
        method,
        method_name,
        target,
        query,
        path,
        http10,
        keep_alive: !fields.close && (!http10 || fields.keep_alive),
        framing,
        expect_continue: fields.expect_continue && !http10,
        head_len,
        headers: req.headers,
    }))
}

/// The limits that an incomplete head can already break.
pub(crate) fn check_partial(buf: &[u8], limits: &HeadLimits) -> Result<(), Reject> {
    match request_line_len(buf) {
        Some(len) if len > limits.max_request_line => return Err(Reject::UriTooLong),
        None if buf.len() - leading_newlines(buf) > limits.max_request_line => return Err(Reject::UriTooLong),
        _ => {}
    }
    if buf.len() >= limits.max_head {
        return Err(Reject::HeadTooLarge);
    }
    Ok(())
}

/// Empty lines before a request line are ignored (RFC 9112 §2.2).
fn leading_newlines(buf: &[u8]) -> usize {
    buf.iter().take_while(|&&b| b == b'\r' || b == b'\n').count()
}

/// What a request line's version says, when httparse refused it.
#[derive(Debug, PartialEq, Eq)]
enum Version {
    /// Not all of it is here yet.
    Partial,
    /// `HTTP/1.x`, x above 1: its minor digit is at this offset.
    NewerMinor(usize),
    /// `HTTP/y.x`, y not 1.
    OtherMajor,
    /// Not `HTTP/DIGIT.DIGIT` (RFC 9112 §2.3).
    Malformed,
}

/// Reads the version at the end of the request line at the start of
/// `buf`: after the line's second space, up to its end.
fn version(buf: &[u8]) -> Version {
    let start = leading_newlines(buf);
    let line = &buf[start..];
    let (line, ended) = match line.iter().position(|&b| b == b'\n') {
        Some(lf) => (line[..lf].strip_suffix(b"\r").unwrap_or(&line[..lf]), true),
        None => (line, false),
    };
    let mut spaces = line.iter().enumerate().filter(|&(_, &b)| b == b' ').map(|(i, _)| i);
    let (Some(_), Some(second)) = (spaces.next(), spaces.next()) else {
        return if ended { Version::Malformed } else { Version::Partial };
    };
    let token = &line[second + 1..];
    const SHAPE: &[u8] = b"HTTP/0.0";
    let fits =
        |t: &[u8]| t.iter().zip(SHAPE).all(|(&b, &want)| if want == b'0' { b.is_ascii_digit() } else { b == want });
    if !fits(token) || token.len() > SHAPE.len() {
        return Version::Malformed;
    }
    if token.len() < SHAPE.len() || !ended {
        // A digit may still be followed by more than a line end.
        return if ended { Version::Malformed } else { Version::Partial };
    }
    match (token[5], token[7]) {
        (b'1', b'2'..=b'9') => Version::NewerMinor(start + second + 1 + 7),
        (b'1', _) => Version::Malformed,
        _ => Version::OtherMajor,
    }
}

/// The request line's length without its line ending, once it has one.
fn request_line_len(buf: &[u8]) -> Option<usize> {
    let start = leading_newlines(buf);
    let line = &buf[start..];
    let lf = line.iter().position(|&b| b == b'\n')?;
    Some(if lf > 0 && line[lf - 1] == b'\r' { lf - 1 } else { lf })
}

/// The path and the query of an origin-form (`/a/b?q`) or absolute-form
/// (`http://host/a/b?q`) target, without the `?` or a fragment.
fn origin_path(target: &str) -> Option<(&str, Option<&str>)> {
    // Origin form, the usual one, needs no search for a scheme.
    let target = if target.starts_with('/') {
        target
    } else {
        match target.split_once("://") {
            Some((scheme, rest)) if scheme.eq_ignore_ascii_case("http") || scheme.eq_ignore_ascii_case("https") => {
                match rest.find('/') {
                    Some(slash) => &rest[slash..],
                    None => "/",
                }
            }
            _ => return None,
        }
    };
    let end = target.find(['?', '#']).unwrap_or(target.len());
    let (path, rest) = target.split_at(end);
    let query = rest.strip_prefix('?').map(|q| q.split_once('#').map_or(q, |(q, _)| q));
    Some((path, query))
}

/// What the field lines say about framing and the connection.
#[derive(Default)]
struct Fields {
    content_length: Option<u64>,
    chunked: bool,
    close: bool,
    keep_alive: bool,
    expect_continue: bool,
}

fn read_fields(headers: &[Header<'_>], http10: bool) -> Result<Fields, Reject> {
    let mut f = Fields::default();
    let mut hosts = 0;
    // Whether a Transfer-Encoding line was seen, whether its latest coding
    // was chunked, and whether any other coding was.
    let mut te_seen = false;
    let mut chunked_last = false;
    let mut other_coding = false;
    for h in headers {
        let name = h.name;
        if name.eq_ignore_ascii_case("content-length") {
            // An empty value is no length at all: refused, not read as none.
            if list(h.value).next().is_none() {
                return Err(Reject::BadRequest);
            }
            for item in list(h.value) {
                let n = decimal(item).ok_or(Reject::BadRequest)?;
                if f.content_length.is_some_and(|m| m != n) {
                    return Err(Reject::BadRequest);
                }
                f.content_length = Some(n);
            }
        } else if name.eq_ignore_ascii_case("transfer-encoding") {
            te_seen = true;
            for coding in list(h.value) {
                if chunked_last {
                    return Err(Reject::BadRequest); // something after chunked
                }
                chunked_last = coding.eq_ignore_ascii_case(b"chunked");
                other_coding |= !chunked_last;
            }
        } else if name.eq_ignore_ascii_case("connection") {
            for option in list(h.value) {
                f.close |= option.eq_ignore_ascii_case(b"close");
                f.keep_alive |= option.eq_ignore_ascii_case(b"keep-alive");
            }
        } else if name.eq_ignore_ascii_case("host") {
            hosts += 1;
        } else if name.eq_ignore_ascii_case("expect") {
            f.expect_continue |= h.value.trim_ascii().eq_ignore_ascii_case(b"100-continue");
        }
    }
    if hosts > 1 || (hosts == 0 && !http10) {
        return Err(Reject::BadRequest);
    }
    if te_seen {
        if http10 || f.content_length.is_some() || !chunked_last {
            return Err(Reject::BadRequest);
        }
        if other_coding {
            return Err(Reject::NotImplemented);
        }
        f.chunked = true;
    }
    Ok(f)
}

/// The non-empty items of a comma-separated field value, trimmed.
fn list(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|&b| b == b',').map(<[u8]>::trim_ascii).filter(|item| !item.is_empty())
}

/// A `1*DIGIT` that fits in a u64.
pub(crate) fn decimal(text: &[u8]) -> Option<u64> {
    if text.is_empty() {
        return None;
    }
    text.iter().try_fold(0u64, |n, &b| {
        if b.is_ascii_digit() { n.checked_mul(10)?.checked_add(u64::from(b - b'0')) } else { None }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIMITS: HeadLimits = HeadLimits { max_request_line: 64, max_head: 256, max_body: 1000 };

    /// Method, path, keep-alive, framing, expect-continue.
    type Parsed = (Method, String, bool, Framing, bool);

    fn parse(text: &str) -> Result<Option<Parsed>, Reject> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        match parse_head(text.as_bytes(), &mut headers, &LIMITS)? {
            Head::Partial => Ok(None),
            Head::Complete(r) => {
                assert_eq!(r.head_len, text.len(), "the test heads end where the text does");
                Ok(Some((r.method, r.path.to_string(), r.keep_alive, r.framing, r.expect_continue)))
            }
        }
    }

    fn framing(extra: &str) -> Result<Framing, Reject> {
        parse(&format!("POST /upload HTTP/1.1\r\nHost: x\r\n{extra}\r\n")).map(|r| r.unwrap().3)
    }

    #[test]
    fn versions_other_than_1_0_and_1_1() {
        // A newer 1.x is read as 1.1 once the caller rewrites its digit.
        let text = "GET / HTTP/1.2\r\nHost: x\r\n\r\n";
        let at = match parse(text) {
            Err(Reject::NewerMinor { at }) => at,
            other => panic!("{other:?}"),
        };
        assert_eq!(&text[at..=at], "2");
        let mut fixed = text.as_bytes().to_vec();
        fixed[at] = b'1';
        assert!(parse(std::str::from_utf8(&fixed).unwrap()).unwrap().unwrap().2, "keep-alive, as 1.1");
        // Empty lines first move the digit.
        assert!(matches!(parse("\r\nGET / HTTP/1.9\r\nHost: x\r\n\r\n"), Err(Reject::NewerMinor { at: 15 })));
        for other_major in ["HTTP/2.0", "HTTP/3.0", "HTTP/0.9"] {
            let text = format!("GET / {other_major}\r\nHost: x\r\n\r\n");
            assert_eq!(parse(&text), Err(Reject::VersionNotSupported), "{other_major}");
        }
        assert_eq!(parse("PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"), Err(Reject::VersionNotSupported), "the HTTP/2 preface");
        for malformed in ["HTTP/1.10", "HTTP/11", "HTTP/a.1", "http/1.1", "HTTP/1.", "HTTP/1.1 x"] {
            let text = format!("GET / {malformed}\r\nHost: x\r\n\r\n");
            assert_eq!(parse(&text), Err(Reject::BadRequest), "{malformed}");
        }
        // Not all there yet: wait for the rest.
        for partial in ["GET / HTTP/1.2", "GET / HTTP/2.0"] {
            assert_eq!(parse(partial), Ok(None), "{partial}");
        }
        assert_eq!(Reject::VersionNotSupported.status(), 505);
    }

    #[test]
    fn a_plain_get_and_its_defaults() {
        assert_eq!(
            parse("GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n"),
            Ok(Some((Method::Get, "/plaintext".into(), true, Framing::None, false)))
        );
        assert_eq!(parse("GET /a?b=c#d HTTP/1.1\r\nHost: x\r\n\r\n").unwrap().unwrap().1, "/a");
        assert_eq!(parse("GET http://h:80/x/y?z HTTP/1.1\r\nHost: h\r\n\r\n").unwrap().unwrap().1, "/x/y");
        assert_eq!(parse("GET HTTP://h HTTP/1.1\r\nHost: h\r\n\r\n").unwrap().unwrap().1, "/");
        assert_eq!(parse("\r\n\r\nHEAD / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap().unwrap().0, Method::Head);
        assert_eq!(parse("DELETE / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap().unwrap().0, Method::Other);
        assert_eq!(parse("GET / HTTP/1.1\nHost: x\n\n").unwrap().unwrap().0, Method::Get);
    }

    #[test]
    fn keep_alive_follows_version_and_connection() {
        let ka = |text: &str| parse(text).unwrap().unwrap().2;
        assert!(ka("GET / HTTP/1.1\r\nHost: x\r\n\r\n"));
        assert!(!ka("GET / HTTP/1.1\r\nHost: x\r\nConnection: Close\r\n\r\n"));
        assert!(!ka("GET / HTTP/1.1\r\nHost: x\r\nConnection: keep-alive, close\r\n\r\n"));
        assert!(!ka("GET / HTTP/1.0\r\n\r\n"));
        assert!(ka("GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n"));
        assert!(!ka("GET / HTTP/1.0\r\nConnection: keep-alive\r\nConnection: close\r\n\r\n"));
    }

    #[test]
    fn partial_heads_are_held_to_the_limits() {
        assert_eq!(parse("GET /plaintext HTTP/1.1\r\nHost"), Ok(None));
        assert_eq!(parse(""), Ok(None));
        let long_target = format!("GET /{} HTTP/1.1", "a".repeat(60));
        assert_eq!(parse(&long_target), Err(Reject::UriTooLong));
        assert_eq!(parse(&format!("{long_target}\r\nHost: x\r\n\r\n")), Err(Reject::UriTooLong));
        let many = "X-A: b\r\n".repeat(40);
        assert_eq!(parse(&format!("GET / HTTP/1.1\r\n{many}")), Err(Reject::HeadTooLarge));
        assert_eq!(parse(&format!("GET / HTTP/1.1\r\nHost: x\r\n{many}\r\n")), Err(Reject::HeadTooLarge));
        let mut headers = [httparse::EMPTY_HEADER; 2];
        let text = b"GET / HTTP/1.1\r\nA: b\r\nC: d\r\nE: f\r\n\r\n";
        assert_eq!(parse_head(text, &mut headers, &LIMITS).unwrap_err(), Reject::HeadTooLarge);
    }

    #[test]
    fn malformed_heads_are_bad_requests() {
        for bad in [
            "GET / HTTP/1.1\r\n\r\n",                       // no Host
            "GET / HTTP/1.1\r\nHost: a\r\nHost: b\r\n\r\n", // two
            "GET x HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET * HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET  / HTTP/1.1\r\nHost: x\r\n\r\n",
            "GET / HTTP/1.1\r\nHost : x\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\n folded\r\n\r\n",
            "\0\0\0 garbage\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: -1\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 99999999999999999999999\r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: \r\n\r\n",
            "GET / HTTP/1.1\r\nHost: x\r\nContent-Length: 0x10\r\n\r\n",
        ] {
            assert_eq!(parse(bad), Err(Reject::BadRequest), "{bad:?}");
        }
    }

    #[test]
    fn framing_rules() {
        assert_eq!(framing(""), Ok(Framing::None));
        assert_eq!(framing("Content-Length: 0\r\n"), Ok(Framing::None));
        assert_eq!(framing("Content-Length: 12\r\n"), Ok(Framing::Length(12)));
        assert_eq!(framing("Content-Length: 12\r\nContent-Length: 12\r\n"), Ok(Framing::Length(12)));
        assert_eq!(framing("Content-Length: 12, 12\r\n"), Ok(Framing::Length(12)));
        assert_eq!(framing("Content-Length: 12\r\nContent-Length: 13\r\n"), Err(Reject::BadRequest));
        assert_eq!(framing("Content-Length: 12, 13\r\n"), Err(Reject::BadRequest));
        assert_eq!(framing("Content-Length: 1001\r\n"), Err(Reject::BodyTooLarge));
        assert_eq!(framing("Transfer-Encoding: chunked\r\n"), Ok(Framing::Chunked));
        assert_eq!(framing("Transfer-Encoding: CHUNKED\r\n"), Ok(Framing::Chunked));
        assert_eq!(framing("Transfer-Encoding: chunked\r\nContent-Length: 5\r\n"), Err(Reject::BadRequest));
        assert_eq!(framing("Content-Length: 5\r\nTransfer-Encoding: chunked\r\n"), Err(Reject::BadRequest));
        assert_eq!(framing("Transfer-Encoding: chunked, gzip\r\n"), Err(Reject::BadRequest));
        assert_eq!(framing("Transfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n"), Err(Reject::BadRequest));
        assert_eq!(framing("Transfer-Encoding: gzip\r\n"), Err(Reject::BadRequest));
        assert_eq!(framing("Transfer-Encoding: \r\n"), Err(Reject::BadRequest));
        assert_eq!(framing("Transfer-Encoding: gzip, chunked\r\n"), Err(Reject::NotImplemented));
        assert_eq!(framing("Transfer-Encoding: gzip\r\nTransfer-Encoding: chunked\r\n"), Err(Reject::NotImplemented));
        assert_eq!(
            parse("POST / HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n").map(|r| r.map(|r| r.3)),
            Err(Reject::BadRequest)
        );
    }

    #[test]
    fn expect_continue_is_an_http11_thing() {
        assert!(parse("POST / HTTP/1.1\r\nHost: x\r\nExpect: 100-Continue\r\n\r\n").unwrap().unwrap().4);
        assert!(!parse("POST / HTTP/1.0\r\nExpect: 100-continue\r\n\r\n").unwrap().unwrap().4);
    }

    #[test]
    fn decimals() {
        assert_eq!(decimal(b"0"), Some(0));
        assert_eq!(decimal(b"18446744073709551615"), Some(u64::MAX));
        assert_eq!(decimal(b"18446744073709551616"), None);
        assert_eq!(decimal(b""), None);
        assert_eq!(decimal(b"+1"), None);
    }
}
