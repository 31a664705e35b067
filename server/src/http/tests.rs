//! Tests of the whole HTTP layer through [`HttpConn`]: bytes in, bytes out,
//! with a site whose date is fixed.

use std::path::{Path, PathBuf};
use std::time::Duration as StdDuration;

use fairway_stack::time::Instant;
use proptest::prelude::*;
use sha2::{Digest, Sha256};

use super::*;

pub(super) const DATE: &str = "Sun, 06 Nov 1994 08:49:37 GMT";

/// A site with a fixed date, canned metrics, and a record of every response,
/// serving the built-in endpoints.
pub(super) struct TestSite<H = Router> {
    parts: SiteParts,
    pub(super) app: H,
    waker: std::task::Waker,
}

/// What the site keeps of its own: files and the records of responses.
pub(super) struct SiteParts {
    pub(super) files: Option<StaticFiles>,
    pub(super) records: Vec<(u16, StdDuration)>,
}

impl<H> std::ops::Deref for TestSite<H> {
    type Target = SiteParts;
    fn deref(&self) -> &SiteParts {
        &self.parts
    }
}

impl<H> std::ops::DerefMut for TestSite<H> {
    fn deref_mut(&mut self) -> &mut SiteParts {
        &mut self.parts
    }
}

impl TestSite {
    fn new() -> TestSite {
        TestSite::with(builtin(&config()))
    }
}

impl<H: Handler> TestSite<H> {
    /// A site whose requests `app` answers, woken through `waker`.
    pub(super) fn with(app: H) -> TestSite<H> {
        TestSite { parts: SiteParts { files: None, records: Vec::new() }, app, waker: std::task::Waker::noop().clone() }
    }

    /// The same, with a waker of the test's.
    pub(super) fn with_waker(app: H, waker: std::task::Waker) -> TestSite<H> {
        TestSite { waker, ..TestSite::with(app) }
    }

    pub(super) fn statuses(&self) -> Vec<u16> {
        self.records.iter().map(|r| r.0).collect()
    }

    /// What a connection's calls need: this site and its handler.
    pub(super) fn env(&mut self) -> Env<'_> {
        Env { site: &mut self.parts, handler: &mut self.app, waker: &self.waker }
    }
}

impl Site for SiteParts {
    fn now_date(&self) -> &[u8] {
        DATE.as_bytes()
    }

    fn metrics(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"# TYPE requests counter\nrequests 7\n");
    }

    fn files(&mut self) -> Option<&mut StaticFiles> {
        self.files.as_mut()
    }

    fn record(&mut self, status: u16, latency: StdDuration) {
        self.records.push((status, latency));
    }
}

pub(super) fn config() -> HttpConfig {
    HttpConfig {
        max_request_line: 256,
        max_head: 1024,
        max_body: 10_000,
        max_bytes: 1 << 20,
        header_timeout: StdDuration::from_secs(10),
        idle_timeout: StdDuration::from_secs(60),
        response_timeout: StdDuration::from_secs(30),
        body_timeout: StdDuration::from_secs(20),
        body_min_rate: 500,
        max_collect: 64 * 1024,
        server_name: "fairway",
        output_window: 4096,
        http2: false,
        http2_max_streams: 128,
    }
}

pub(super) fn conn() -> HttpConn {
    conn_with(&config())
}

/// A fresh connection under `cfg`, accepted at time zero.
pub(super) fn conn_with(cfg: &HttpConfig) -> HttpConn {
    let mut c = HttpConn::new(cfg);
    c.reset(Instant::ZERO);
    c
}

/// Takes everything the connection has to send.
#[track_caller]
pub(super) fn drain<H: Handler>(c: &mut HttpConn, now: Instant, site: &mut TestSite<H>, out: &mut Vec<u8>) {
    loop {
        let bytes = c.output(now, &mut site.env());
        if bytes.is_empty() {
            break;
        }
        out.extend_from_slice(bytes);
        let n = bytes.len();
        c.consume(n);
    }
    assert!(!c.wants_output() || c.should_close(), "output() gave nothing yet more is wanted");
}

/// Feeds `input` at `now` (offering again what was refused after each
/// flush) and returns everything sent.
#[track_caller]
pub(super) fn feed<H: Handler>(c: &mut HttpConn, site: &mut TestSite<H>, input: &[u8], now: Instant) -> Vec<u8> {
    let mut out = Vec::new();
    let mut rest = input;
    loop {
        let n = c.on_input(rest, now, &mut site.env());
        rest = &rest[n..];
        let before = out.len();
        drain(c, now, site, &mut out);
        if rest.is_empty() {
            return out;
        }
        assert!(n > 0 || out.len() > before, "stuck with {} bytes unread", rest.len());
    }
}

/// One request, fed whole at time zero on a fresh connection.
fn once(site: &mut TestSite, input: &str) -> (Vec<u8>, HttpConn) {
    let mut c = conn();
    let out = feed(&mut c, site, input.as_bytes(), Instant::ZERO);
    (out, c)
}

#[derive(Debug)]
pub(super) struct Response {
    pub(super) status: u16,
    pub(super) headers: Vec<(String, String)>,
    pub(super) body: Vec<u8>,
}

impl Response {
    pub(super) fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// Splits a byte stream into responses; `head_only[i]` says whether the
/// i-th final response answers a HEAD (so has no body). Checks what every
/// response carries: Server and Date.
#[track_caller]
pub(super) fn responses(bytes: &[u8], head_only: &[bool]) -> Vec<Response> {
    let mut rest = bytes;
    let mut all = Vec::new();
    let mut finals = 0;
    while !rest.is_empty() {
        let end = rest.windows(4).position(|w| w == b"\r\n\r\n").expect("a whole head") + 4;
        let head = std::str::from_utf8(&rest[..end]).expect("an ASCII head");
        rest = &rest[end..];
        let mut lines = head.split("\r\n");
        let status_line = lines.next().unwrap();
        assert!(status_line.starts_with("HTTP/1.1 "), "{status_line}");
        let status: u16 = status_line[9..12].parse().unwrap();
        let headers: Vec<(String, String)> = lines
            .filter(|l| !l.is_empty())
            .map(|l| {
                let (n, v) = l.split_once(": ").unwrap();
                (n.to_string(), v.to_string())
            })
            .collect();
        let mut r = Response { status, headers, body: Vec::new() };
        if status == 100 {
            assert_eq!(head, "HTTP/1.1 100 Continue\r\n\r\n");
            all.push(r);
            continue;
        }
        assert_eq!(r.header("Server"), Some("fairway"), "{head}");
        assert_eq!(r.header("Date"), Some(DATE), "{head}");
        let skip_body = head_only.get(finals).copied().unwrap_or(false) || status == 304;
        finals += 1;
        if skip_body {
        } else if let Some(len) = r.header("Content-Length") {
            let len: usize = len.parse().unwrap();
            r.body = rest[..len].to_vec();
            rest = &rest[len..];
        } else if r.header("Transfer-Encoding") == Some("chunked") {
            let mut decoder = crate::http::chunked::ChunkedDecoder::default();
            let mut body = Vec::new();
            let used = decoder.decode(rest, |d| body.extend_from_slice(d)).expect("chunked framing");
            assert!(decoder.is_done(), "the chunked body ends: {}", String::from_utf8_lossy(rest));
            r.body = body;
            rest = &rest[used..];
        } else {
            // Delimited by the close.
            r.body = rest.to_vec();
            rest = &[];
        }
        all.push(r);
    }
    all
}

#[track_caller]
pub(super) fn one(bytes: &[u8]) -> Response {
    let mut all = responses(bytes, &[]);
    assert_eq!(all.len(), 1, "{}", String::from_utf8_lossy(bytes));
    all.remove(0)
}

fn pattern(range: std::ops::Range<u64>) -> Vec<u8> {
    range.map(pattern_byte).collect()
}

fn sha_hex(data: &[u8]) -> String {
    Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

// ---------------------------------------------------------------------------
// The endpoints

#[test]
fn plaintext_and_json_are_byte_exact() {
    let mut site = TestSite::new();
    let (out, c) = once(&mut site, "GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!(
            "HTTP/1.1 200 OK\r\nServer: fairway\r\nDate: {DATE}\r\nContent-Type: text/plain\r\n\
             Content-Length: 13\r\n\r\nHello, World!"
        )
    );
    assert!(!c.close_after_flush() && !c.should_close() && c.wants_input());
    let (out, _) = once(&mut site, "GET /json HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(
        String::from_utf8(out).unwrap(),
        format!(
            "HTTP/1.1 200 OK\r\nServer: fairway\r\nDate: {DATE}\r\nContent-Type: application/json\r\n\
             Content-Length: 27\r\n\r\n{{\"message\":\"Hello, World!\"}}"
        )
    );
    assert_eq!(site.statuses(), [200, 200]);
}

#[test]
fn healthz_and_metrics() {
    let mut site = TestSite::new();
    let r = one(&once(&mut site, "GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").0);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"ok\n"[..]));
    let r = one(&once(&mut site, "GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n").0);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Content-Type"), Some("text/plain; version=0.0.4; charset=utf-8"));
    assert_eq!(r.body, b"# TYPE requests counter\nrequests 7\n");
}

#[test]
fn bytes_whole_and_streamed_through_a_small_window() {
    let mut site = TestSite::new();
    let r = one(&once(&mut site, "GET /bytes/1000 HTTP/1.1\r\nHost: x\r\n\r\n").0);
    assert_eq!((r.status, r.header("Content-Type")), (200, Some("application/octet-stream")));
    assert_eq!(r.header("Accept-Ranges"), Some("bytes"));
    assert_eq!(r.body, pattern(0..1000));
    // 250 times the window.
    let r = one(&once(&mut site, "GET /bytes/1000000 HTTP/1.1\r\nHost: x\r\n\r\n").0);
    assert_eq!(r.body.len(), 1_000_000);
    assert!(r.body == pattern(0..1_000_000));
    let r = one(&once(&mut site, "GET /bytes/0 HTTP/1.1\r\nHost: x\r\n\r\n").0);
    assert_eq!((r.status, r.body.len()), (200, 0));
}

#[test]
fn bytes_ranges() {
    let mut site = TestSite::new();
    let get = |site: &mut TestSite, range: &str| {
        one(&once(site, &format!("GET /bytes/1000 HTTP/1.1\r\nHost: x\r\nRange: {range}\r\n\r\n")).0)
    };
    let r = get(&mut site, "bytes=10-19");
    assert_eq!((r.status, r.header("Content-Range")), (206, Some("bytes 10-19/1000")));
    assert_eq!(r.body, pattern(10..20));
    let r = get(&mut site, "bytes=-5");
    assert_eq!((r.status, r.header("Content-Range")), (206, Some("bytes 995-999/1000")));
    assert_eq!(r.body, pattern(995..1000));
    let r = get(&mut site, "bytes=990-");
    assert_eq!((r.status, r.body), (206, pattern(990..1000)));
    let r = get(&mut site, "bytes=1000-");
    assert_eq!((r.status, r.header("Content-Range")), (416, Some("bytes */1000")));
    // Several ranges are not served as ranges: the whole thing.
    let r = get(&mut site, "bytes=0-1,5-6");
    assert_eq!((r.status, r.body.len()), (200, 1000));
}

#[test]
fn bytes_limits_and_non_numbers() {
    let mut site = TestSite::new();
    let (out, c) = once(&mut site, "GET /bytes/1048577 HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!(one(&out).status, 400);
    assert!(!c.close_after_flush(), "a refused size is no framing error");
    for path in ["/bytes/abc", "/bytes/", "/bytes/-1", "/bytes/1x"] {
        let r = one(&once(&mut site, &format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n")).0);
        assert_eq!(r.status, 404, "{path}");
    }
}

#[test]
fn upload_answers_count_and_digest() {
    let mut site = TestSite::new();
    let body = b"some bytes to hash\x00\xff";
    let mut req = format!("POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
    req.extend_from_slice(body);
    let mut c = conn();
    let r = one(&feed(&mut c, &mut site, &req, Instant::ZERO));
    assert_eq!((r.status, r.header("Content-Type")), (200, Some("text/plain")));
    assert_eq!(String::from_utf8(r.body).unwrap(), format!("{} {}\n", body.len(), sha_hex(body)));
    // An empty upload, and the same connection again.
    let out = feed(&mut c, &mut site, b"POST /upload HTTP/1.1\r\nHost: x\r\n\r\n", Instant::ZERO);
    assert_eq!(String::from_utf8(one(&out).body).unwrap(), format!("0 {}\n", sha_hex(b"")));
}

#[test]
fn chunked_upload_with_extensions_and_trailers() {
    let mut site = TestSite::new();
    let req = "POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n\
               5\r\nhello\r\n1;ext=1\r\n \r\nb\r\nchunked now\r\n0\r\nX-Trailer: yes\r\n\r\n\
               GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n";
    let (out, _) = once(&mut site, req);
    let all = responses(&out, &[]);
    assert_eq!(all.len(), 2);
    assert_eq!(String::from_utf8(all[0].body.clone()).unwrap(), format!("17 {}\n", sha_hex(b"hello chunked now")));
    assert_eq!(all[1].body, b"Hello, World!");
}

#[test]
fn bad_chunk_sizes_are_400_and_close() {
    for body in ["x\r\n", "5\r\nhelloX\r\n", "10000000000000000\r\n", "-1\r\n", "5\nhello\r\n0\r\n\r\n"] {
        let mut site = TestSite::new();
        let req = format!("POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n{body}");
        let (out, c) = once(&mut site, &req);
        let r = one(&out);
        assert_eq!((r.status, r.header("Connection")), (400, Some("close")), "{body:?}");
        assert!(c.should_close(), "{body:?}");
    }
}

#[test]
fn unknown_paths_and_wrong_methods() {
    let mut site = TestSite::new();
    let r = one(&once(&mut site, "GET /nope HTTP/1.1\r\nHost: x\r\n\r\n").0);
    assert_eq!((r.status, r.body.as_slice()), (404, &b"Not Found\n"[..]));
    for (req, allow) in [
        ("POST /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", "GET, HEAD"),
        ("DELETE /json HTTP/1.1\r\nHost: x\r\n\r\n", "GET, HEAD"),
        ("PUT /bytes/5 HTTP/1.1\r\nHost: x\r\n\r\n", "GET, HEAD"),
        ("GET /upload HTTP/1.1\r\nHost: x\r\n\r\n", "POST"),
        ("HEAD /upload HTTP/1.1\r\nHost: x\r\n\r\n", "POST"),
    ] {
        let (out, c) = once(&mut site, req);
        let r = &responses(&out, &[req.starts_with("HEAD")])[0];
        assert_eq!((r.status, r.header("Allow")), (405, Some(allow)), "{req}");
        assert!(!c.close_after_flush());
    }
    // A 405 to a request with a body: the body is read and dropped, and the
    // next request is answered.
    let (out, _) = once(
        &mut site,
        "POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhelloGET /json HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert_eq!(responses(&out, &[]).iter().map(|r| r.status).collect::<Vec<_>>(), [405, 200]);
}

#[test]
fn http_1_2_is_read_as_1_1_and_http_2_0_is_505() {
    let mut site = TestSite::new();
    let (out, c) = once(&mut site, "GET /plaintext HTTP/1.2\r\nHost: x\r\n\r\n");
    let r = one(&out);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"Hello, World!"[..]));
    assert!(out.starts_with(b"HTTP/1.1 200 "), "answered as 1.1");
    assert!(!c.close_after_flush(), "persistent, as 1.1");
    for req in ["GET /plaintext HTTP/2.0\r\nHost: x\r\n\r\n", "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"] {
        let (out, c) = once(&mut site, req);
        assert_eq!(one(&out).status, 505, "{req}");
        assert!(c.close_after_flush(), "{req}");
    }
}

#[test]
fn a_method_without_a_name_here_is_not_implemented() {
    // RFC 9110 §9.1: 501 for an unrecognised method, whatever the path;
    // method names are case-sensitive, so `get` is one.
    let mut site = TestSite::new();
    for req in [
        "get /plaintext HTTP/1.1\r\nHost: x\r\n\r\n",
        "BREW /plaintext HTTP/1.1\r\nHost: x\r\n\r\n",
        "PROPFIND /nope HTTP/1.1\r\nHost: x\r\n\r\n",
        "TRACE / HTTP/1.1\r\nHost: x\r\n\r\n",
    ] {
        let (out, c) = once(&mut site, req);
        let r = one(&out);
        assert_eq!((r.status, r.body.as_slice()), (501, &b"Not Implemented\n"[..]), "{req}");
        assert!(!c.close_after_flush(), "{req}");
    }
}

#[test]
fn head_has_the_headers_of_get_and_no_body() {
    for path in ["/plaintext", "/json", "/bytes/100", "/metrics", "/healthz", "/nope"] {
        let mut site = TestSite::new();
        let get = once(&mut site, &format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n")).0;
        let head = once(&mut site, &format!("HEAD {path} HTTP/1.1\r\nHost: x\r\n\r\n")).0;
        let get_head_len = get.windows(4).position(|w| w == b"\r\n\r\n").unwrap() + 4;
        assert_eq!(head, &get[..get_head_len], "{path}");
    }
}

// ---------------------------------------------------------------------------
// Connection management

#[test]
fn keep_alive_by_version_and_connection() {
    let mut site = TestSite::new();
    let (out, c) = once(&mut site, "GET /plaintext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    assert_eq!(one(&out).header("Connection"), Some("close"));
    assert!(c.close_after_flush() && c.should_close() && !c.wants_input());

    let (out, c) = once(&mut site, "GET /plaintext HTTP/1.0\r\n\r\n");
    assert_eq!(one(&out).header("Connection"), Some("close"));
    assert!(c.should_close());

    let (out, c) = once(&mut site, "GET /plaintext HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    assert_eq!(one(&out).header("Connection"), Some("keep-alive"));
    assert!(!c.close_after_flush() && c.wants_input());

    // Requests pipelined behind a close are not answered.
    let (out, c) = once(
        &mut site,
        "GET /json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n",
    );
    assert_eq!(one(&out).header("Content-Type"), Some("application/json"));
    assert!(c.should_close());
}

#[test]
fn pipelined_responses_come_in_request_order() {
    let mut site = TestSite::new();
    let mut req = b"GET /bytes/20000 HTTP/1.1\r\nHost: x\r\n\r\n\
                    GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n\
                    POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 3\r\n\r\nabc\
                    HEAD /json HTTP/1.1\r\nHost: x\r\n\r\n\
                    GET /nope HTTP/1.1\r\nHost: x\r\n\r\n\
                    POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n2\r\nde\r\n0\r\n\r\n"
        .to_vec();
    req.extend_from_slice(b"GET /json HTTP/1.1\r\nHost: x\r\n\r\n");
    let (out, c) = once(&mut site, std::str::from_utf8(&req).unwrap());
    let all = responses(&out, &[false, false, false, true, false, false, false]);
    let statuses: Vec<u16> = all.iter().map(|r| r.status).collect();
    assert_eq!(statuses, [200, 200, 200, 200, 404, 200, 200]);
    assert_eq!(all[0].body, pattern(0..20_000));
    assert_eq!(all[1].body, b"Hello, World!");
    assert_eq!(String::from_utf8(all[2].body.clone()).unwrap(), format!("3 {}\n", sha_hex(b"abc")));
    assert_eq!((all[3].header("Content-Length"), all[3].body.len()), (Some("27"), 0));
    assert_eq!(String::from_utf8(all[5].body.clone()).unwrap(), format!("2 {}\n", sha_hex(b"de")));
    assert_eq!(all[6].header("Content-Type"), Some("application/json"));
    assert_eq!(site.statuses(), statuses);
    assert!(!c.close_after_flush());
}

#[test]
fn a_full_window_holds_back_input() {
    let mut site = TestSite::new();
    let mut c = conn();
    let req = b"GET /bytes/100000 HTTP/1.1\r\nHost: x\r\n\r\n".repeat(100);
    // Nothing is drained: the window fills, then the input buffer does.
    let taken = c.on_input(&req, Instant::ZERO, &mut site.env());
    assert!(taken < req.len(), "took all {taken}");
    assert!(!c.wants_input() && c.wants_output());
    assert_eq!(c.on_input(&req[taken..], Instant::ZERO, &mut site.env()), 0);
    let mut out = Vec::new();
    drain(&mut c, Instant::ZERO, &mut site, &mut out);
    out.extend(feed(&mut c, &mut site, &req[taken..], Instant::ZERO));
    let all = responses(&out, &[]);
    assert_eq!(all.len(), 100);
    assert!(all.iter().all(|r| r.status == 200 && r.body.len() == 100_000));
}

#[test]
fn eof_answers_what_came_and_then_closes() {
    let mut site = TestSite::new();
    let mut c = conn();
    let input = b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\nGET /json HTTP/1.1\r\nHost: x\r\n\r\nGET /hal";
    assert_eq!(c.on_input(input, Instant::ZERO, &mut site.env()), input.len());
    c.on_eof(Instant::ZERO);
    assert!(!c.wants_input());
    let mut out = Vec::new();
    drain(&mut c, Instant::ZERO, &mut site, &mut out);
    assert_eq!(responses(&out, &[]).len(), 2);
    assert!(c.should_close());

    // An idle keep-alive connection closes at once.
    let mut c = conn();
    c.on_eof(Instant::ZERO);
    assert!(c.should_close());
}

#[test]
fn expect_100_continue() {
    let mut site = TestSite::new();
    let mut c = conn();
    let head = b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n";
    let out = feed(&mut c, &mut site, head, Instant::ZERO);
    assert_eq!(out, b"HTTP/1.1 100 Continue\r\n\r\n");
    assert!(site.records.is_empty(), "an interim response is not a final one");
    let out = feed(&mut c, &mut site, b"hello", Instant::ZERO);
    assert_eq!(String::from_utf8(one(&out).body).unwrap(), format!("5 {}\n", sha_hex(b"hello")));
    // No body, no 100; HTTP/1.0 never gets one.
    let (out, _) = once(&mut site, "POST /upload HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n\r\n");
    assert_eq!(one(&out).status, 200);
    let (out, _) = once(&mut site, "POST /upload HTTP/1.0\r\nContent-Length: 1\r\nExpect: 100-continue\r\n\r\nz");
    assert_eq!(one(&out).status, 200);
}

#[test]
fn latency_runs_from_the_first_byte() {
    let mut site = TestSite::new();
    let mut c = conn();
    feed(&mut c, &mut site, b"GET /plain", Instant::from_millis(1000));
    feed(&mut c, &mut site, b"text HTTP/1.1\r\nHost: x\r\n\r\nGET /js", Instant::from_millis(3500));
    feed(&mut c, &mut site, b"on HTTP/1.1\r\nHost: x\r\n\r\n", Instant::from_millis(4000));
    assert_eq!(site.records, [(200, StdDuration::from_millis(2500)), (200, StdDuration::from_millis(500))]);
}

// ---------------------------------------------------------------------------
// What a peer must not get away with

/// Checks that `input` is refused with `status` and the connection closes.
#[track_caller]
fn refused(input: &[u8], status: u16) {
    let mut site = TestSite::new();
    let mut c = conn();
    let out = feed(&mut c, &mut site, input, Instant::ZERO);
    let r = one(&out);
    assert_eq!((r.status, r.header("Connection")), (status, Some("close")), "{}", String::from_utf8_lossy(input));
    assert!(c.should_close() && !c.wants_input());
    assert_eq!(site.statuses(), [status]);
}

#[test]
fn over_long_request_lines_are_414() {
    let long = format!("GET /{} HTTP/1.1\r\nHost: x\r\n\r\n", "a".repeat(300));
    refused(long.as_bytes(), 414);
    // Before the line ends.
    refused(&long.as_bytes()[..280], 414);
}

#[test]
fn over_large_heads_are_431() {
    let big = format!("GET / HTTP/1.1\r\nHost: x\r\n{}\r\n", "X-Filler: 0123456789012345678901\r\n".repeat(40));
    refused(big.as_bytes(), 431);
    refused(&big.as_bytes()[..1100], 431);
}

#[test]
fn malformed_heads_are_400() {
    for bad in [
        &b"GET / HTTP/1.1\r\n\r\n"[..], // no Host
        b"GET /plaintext HTTP/1.1x\r\nHost: x\r\n\r\n",
        b"\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n", // TLS
        b"GET / HTTP/1.1\r\nHost: x\r\nBad Header: y\r\n\r\n",
        b"GET /plaintext HTTP/1.1\r\nHost: x\r\nContent-Length: 1x\r\n\r\n",
    ] {
        refused(bad, 400);
    }
    // Another major version is not a malformed request: 505 (RFC 9110 §15.6.6).
    refused(b"GET /plaintext HTTP/9.9\r\nHost: x\r\n\r\n", 505);
}

#[test]
fn framing_conflicts_are_400() {
    refused(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n", 400);
    refused(b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n", 400);
    refused(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!", 400);
    refused(b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501);
}

#[test]
fn over_large_bodies_are_413() {
    refused(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 10001\r\n\r\n", 413);
    let mut chunked = b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..11 {
        chunked.extend_from_slice(b"3e8\r\n");
        chunked.extend_from_slice(&[b'z'; 1000]);
        chunked.extend_from_slice(b"\r\n");
    }
    refused(&chunked, 413);
}

#[test]
fn slowloris_gets_408_after_the_header_timeout() {
    let mut site = TestSite::new();
    let mut c = conn();
    let t = Instant::from_secs;
    feed(&mut c, &mut site, b"GET /plaintext HT", t(1));
    assert_eq!(c.deadline(), Some(t(11)), "from the head's first byte");
    feed(&mut c, &mut site, b"TP/1.1\r\nHo", t(5));
    assert_eq!(c.deadline(), Some(t(11)));
    c.on_timeout(t(10), &mut site.env());
    assert!(!c.wants_output(), "early: nothing");
    c.on_timeout(t(11), &mut site.env());
    let mut out = Vec::new();
    drain(&mut c, t(11), &mut site, &mut out);
    let r = one(&out);
    assert_eq!((r.status, r.header("Connection")), (408, Some("close")));
    assert!(c.should_close());
    assert_eq!(site.records, [(408, StdDuration::from_secs(10))]);
}

#[test]
fn a_body_that_trickles_in_gets_408_after_the_body_timeout() {
    // The slow POST: a byte a second keeps the idle timeout from ever
    // firing; the body timeout (20 s, and a second more per 500 bytes)
    // does.
    let mut site = TestSite::new();
    let mut c = conn();
    let t = Instant::from_secs;
    feed(&mut c, &mut site, b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n", t(1));
    for second in 2..=20 {
        assert!(feed(&mut c, &mut site, b"a", t(second)).is_empty());
        assert!(c.deadline().is_some_and(|at| at > t(second)), "at {second} s: {:?}", c.deadline());
    }
    // 19 bytes earned 38 ms beyond the 20 s from the body's start.
    let due = t(21) + fairway_stack::time::Duration::from_millis(38);
    assert_eq!(c.deadline(), Some(due));
    c.on_timeout(due - fairway_stack::time::Duration::from_millis(1), &mut site.env());
    assert!(!c.wants_output(), "early: nothing");
    c.on_timeout(due, &mut site.env());
    let mut out = Vec::new();
    drain(&mut c, due, &mut site, &mut out);
    let r = one(&out);
    assert_eq!((r.status, r.header("Connection")), (408, Some("close")));
    assert!(c.should_close());
    assert_eq!(site.records[0].0, 408);
}

#[test]
fn a_body_at_the_minimum_rate_is_never_cut() {
    // 600 bytes a second for 60 s: past the 20 s, each second earns 1.2.
    let mut site = TestSite::new();
    let mut c = conn_with(&HttpConfig { max_body: 100_000, ..config() });
    let t = Instant::from_secs;
    feed(&mut c, &mut site, b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 36000\r\n\r\n", t(0));
    let mut out = Vec::new();
    for second in 1..=60 {
        let now = t(second);
        if c.deadline().is_some_and(|at| at <= now) {
            c.on_timeout(now, &mut site.env());
        }
        out.extend(feed(&mut c, &mut site, &[b'z'; 600], now));
    }
    let r = one(&out);
    assert_eq!(r.status, 200, "{r:?}");
}

#[test]
fn with_no_minimum_rate_the_whole_body_has_the_body_timeout() {
    let mut site = TestSite::new();
    let mut c = conn_with(&HttpConfig { body_min_rate: 0, max_body: 100_000, ..config() });
    let t = Instant::from_secs;
    feed(&mut c, &mut site, b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 100000\r\n\r\n", t(0));
    feed(&mut c, &mut site, &[b'z'; 9000], t(1));
    assert_eq!(c.deadline(), Some(t(20)), "what came earns nothing");
    c.on_timeout(t(20), &mut site.env());
    let mut out = Vec::new();
    drain(&mut c, t(20), &mut site, &mut out);
    assert_eq!(one(&out).status, 408);
}

#[test]
fn a_dropped_body_that_trickles_in_is_closed_without_another_answer() {
    // /plaintext is answered at once; the body it carries is read and
    // dropped, and a trickle of it closes the connection silently.
    let mut site = TestSite::new();
    let mut c = conn();
    let t = Instant::from_secs;
    let out = feed(&mut c, &mut site, b"GET /plaintext HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n", t(0));
    assert_eq!(one(&out).status, 200);
    let due = c.deadline().unwrap();
    assert_eq!(due, t(20));
    c.on_timeout(due, &mut site.env());
    let mut out = Vec::new();
    drain(&mut c, due, &mut site, &mut out);
    assert!(out.is_empty(), "{}", String::from_utf8_lossy(&out));
    assert!(c.should_close());
}

#[test]
fn idle_means_nothing_in_progress() {
    let mut site = TestSite::new();
    let mut c = conn();
    assert!(c.is_idle(), "a fresh connection");
    c.on_input(b"GET /plaintext HTTP/1.1\r\nHo", Instant::ZERO, &mut site.env());
    assert!(!c.is_idle(), "a head partly read");
    c.on_input(b"st: x\r\n\r\n", Instant::ZERO, &mut site.env());
    assert!(!c.is_idle(), "a response queued");
    let mut out = Vec::new();
    drain(&mut c, Instant::ZERO, &mut site, &mut out);
    assert!(c.is_idle(), "the response is out");
    c.on_input(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nab", Instant::ZERO, &mut site.env());
    drain(&mut c, Instant::ZERO, &mut site, &mut out);
    assert!(!c.is_idle(), "a body partly read");
    c.on_input(b"cde", Instant::ZERO, &mut site.env());
    drain(&mut c, Instant::ZERO, &mut site, &mut out);
    assert!(c.is_idle(), "the upload is answered");
    c.on_eof(Instant::ZERO);
    assert!(!c.is_idle() && c.should_close(), "closing is not idle");
}

#[test]
fn idle_connections_close_silently() {
    let mut site = TestSite::new();
    let mut c = conn();
    let t = Instant::from_secs;
    assert_eq!(c.deadline(), Some(t(60)));
    feed(&mut c, &mut site, b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", t(30));
    assert_eq!(c.deadline(), Some(t(90)), "from the last exchange");
    c.on_timeout(t(89), &mut site.env());
    assert!(!c.should_close());
    c.on_timeout(t(90), &mut site.env());
    assert!(c.should_close() && !c.wants_output() && c.deadline().is_none());
    assert!(c.output(t(90), &mut site.env()).is_empty());
    assert_eq!(site.statuses(), [200], "no response to an idle close");

    // A stray CRLF between requests starts no header timer.
    let mut c = conn();
    feed(&mut c, &mut site, b"\r\n", t(0));
    assert_eq!(c.deadline(), Some(t(60)));

    // A peer that stops reading is idle too.
    let mut c = conn();
    c.on_input(b"GET /bytes/100000 HTTP/1.1\r\nHost: x\r\n\r\n", t(0), &mut site.env());
    c.on_timeout(t(60), &mut site.env());
    assert!(c.should_close());
}

#[test]
fn a_reset_connection_is_new() {
    let mut site = TestSite::new();
    let mut c = conn();
    c.on_input(
        b"GET /bytes/100000 HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\nGET /",
        Instant::ZERO,
        &mut site.env(),
    );
    c.reset(Instant::from_secs(5));
    assert!(!c.wants_output() && !c.close_after_flush() && c.wants_input());
    assert_eq!(c.deadline(), Some(Instant::from_secs(65)));
    let out = feed(&mut c, &mut site, b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n", Instant::from_secs(5));
    assert_eq!(one(&out).body, b"Hello, World!");
}

// ---------------------------------------------------------------------------
// Static files

/// A directory under the system's temp dir, removed when dropped.
struct TempDir(PathBuf);

impl TempDir {
    fn new(name: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!("fairway-http-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    fn write(&self, rel: &str, data: &[u8]) {
        let path = self.0.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, data).unwrap();
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A site rooted at `<tmp>/root`, with `<tmp>/outside/secret.txt` beside it.
fn file_site(name: &str) -> (TempDir, TestSite) {
    let tmp = TempDir::new(name);
    tmp.write("root/index.html", b"<h1>home</h1>");
    tmp.write("root/docs/a.txt", b"text file");
    tmp.write("root/style.css", b"body{}");
    tmp.write("root/big.bin", &pattern(0..300_000));
    tmp.write("outside/secret.txt", b"secret");
    std::os::unix::fs::symlink(tmp.0.join("outside/secret.txt"), tmp.0.join("root/leak.txt")).unwrap();
    std::os::unix::fs::symlink(Path::new("../outside"), tmp.0.join("root/out")).unwrap();
    std::os::unix::fs::symlink(Path::new("docs/a.txt"), tmp.0.join("root/inside.txt")).unwrap();
    let files = StaticFiles::new(tmp.0.join("root")).unwrap();
    let mut site = TestSite::new();
    site.files = Some(files);
    (tmp, site)
}

fn get(site: &mut TestSite, path: &str, extra: &str) -> Response {
    one(&once(site, &format!("GET {path} HTTP/1.1\r\nHost: x\r\n{extra}\r\n")).0)
}

#[test]
fn static_files_are_served_with_type_and_validators() {
    let (_tmp, mut site) = file_site("serve");
    let r = get(&mut site, "/", "");
    assert_eq!(
        (r.status, r.header("Content-Type"), r.body.as_slice()),
        (200, Some("text/html; charset=utf-8"), &b"<h1>home</h1>"[..])
    );
    let r = get(&mut site, "/docs/a.txt?v=1", "");
    assert_eq!(
        (r.status, r.header("Content-Type"), r.body.as_slice()),
        (200, Some("text/plain; charset=utf-8"), &b"text file"[..])
    );
    assert!(r.header("ETag").is_some_and(|e| e.starts_with('"') && e.ends_with('"')));
    assert_eq!(r.header("Last-Modified").map(str::len), Some(29));
    assert_eq!(get(&mut site, "/style%2ecss", "").header("Content-Type"), Some("text/css; charset=utf-8"));
    assert_eq!(get(&mut site, "/inside.txt", "").body, b"text file", "a symlink that stays inside is fine");
    assert_eq!(get(&mut site, "/missing.txt", "").status, 404);
    assert_eq!(get(&mut site, "/docs", "").status, 404, "no index.html, no listing");
    // Larger than the window: streamed.
    let r = get(&mut site, "/big.bin", "");
    assert!(r.status == 200 && r.body == pattern(0..300_000));
}

#[test]
fn static_files_refuse_to_climb() {
    let (_tmp, mut site) = file_site("climb");
    for (path, status) in [
        ("/../outside/secret.txt", 400),
        ("/docs/../../outside/secret.txt", 400),
        ("/%2e%2e/outside/secret.txt", 400),
        ("/%2E%2e/outside/secret.txt", 400),
        ("/docs/..%2f..%2foutside/secret.txt", 400),
        ("/a%00b", 400),
        ("/%zz", 400),
        ("/leak.txt", 403),
        ("/out/secret.txt", 403),
    ] {
        let r = get(&mut site, path, "");
        assert_eq!(r.status, status, "{path}");
        assert!(!r.body.windows(6).any(|w| w == b"secret"), "{path}");
    }
}

#[test]
fn static_files_conditional_and_ranged() {
    let (_tmp, mut site) = file_site("cond");
    let first = get(&mut site, "/docs/a.txt", "");
    let etag = first.header("ETag").unwrap().to_string();
    let last_modified = first.header("Last-Modified").unwrap().to_string();
    let r = get(&mut site, "/docs/a.txt", &format!("If-None-Match: \"other\", {etag}\r\n"));
    assert_eq!((r.status, r.header("ETag"), r.body.len()), (304, Some(etag.as_str()), 0));
    assert_eq!(get(&mut site, "/docs/a.txt", "If-None-Match: \"other\"\r\n").status, 200);
    let r = get(&mut site, "/docs/a.txt", &format!("If-Modified-Since: {last_modified}\r\n"));
    assert_eq!(r.status, 304);
    let r = get(&mut site, "/big.bin", "Range: bytes=100000-100009\r\n");
    assert_eq!((r.status, r.header("Content-Range")), (206, Some("bytes 100000-100009/300000")));
    assert_eq!(r.body, pattern(100_000..100_010));
    let r = get(&mut site, "/big.bin", "Range: bytes=-100000\r\n");
    assert!(r.status == 206 && r.body == pattern(200_000..300_000));
    assert_eq!(get(&mut site, "/docs/a.txt", "Range: bytes=9-\r\n").status, 416);
    // If-Range that names another version: the whole file.
    let r = get(&mut site, "/docs/a.txt", "Range: bytes=0-3\r\nIf-Range: \"old\"\r\n");
    assert_eq!((r.status, r.body.as_slice()), (200, &b"text file"[..]));
    let r = get(&mut site, "/docs/a.txt", &format!("Range: bytes=0-3\r\nIf-Range: {etag}\r\n"));
    assert_eq!((r.status, r.body.as_slice()), (206, &b"text"[..]));
    // HEAD: the same head, no body.
    let head = once(&mut site, "HEAD /big.bin HTTP/1.1\r\nHost: x\r\n\r\n").0;
    let r = &responses(&head, &[true])[0];
    assert_eq!((r.status, r.header("Content-Length")), (200, Some("300000")));
}

// ---------------------------------------------------------------------------
// Properties

/// A pipelined stream using every endpoint, body framing and 100-continue.
fn pipelined_stream() -> Vec<u8> {
    let mut s = Vec::new();
    s.extend_from_slice(b"GET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n");
    s.extend_from_slice(b"GET /json HTTP/1.1\r\nHost: x\r\n\r\n");
    s.extend_from_slice(b"\r\nGET /bytes/9000 HTTP/1.1\r\nHost: x\r\nRange: bytes=1-8500\r\n\r\n");
    s.extend_from_slice(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 11\r\n\r\nhello world");
    s.extend_from_slice(
        b"POST /upload HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n\
          4;x=y\r\nwiki\r\n5\r\npedia\r\n0\r\nT: v\r\n\r\n",
    );
    s.extend_from_slice(b"HEAD /bytes/5 HTTP/1.1\r\nHost: x\r\n\r\n");
    s.extend_from_slice(b"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n");
    s.extend_from_slice(b"POST /json HTTP/1.1\r\nHost: x\r\nContent-Length: 4\r\n\r\nbody");
    s.extend_from_slice(b"GET /metrics HTTP/1.0\r\nConnection: keep-alive\r\n\r\n");
    s.extend_from_slice(b"GET /bytes/50000 HTTP/1.1\r\nHost: x\r\n\r\n");
    s.extend_from_slice(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n");
    s
}

/// Feeds `stream` in pieces of the given sizes (cycled), draining after each.
fn feed_split(stream: &[u8], sizes: &[usize]) -> (Vec<u8>, Vec<u16>, bool) {
    let mut site = TestSite::new();
    let mut c = conn();
    let mut out = Vec::new();
    let mut at = 0;
    for size in sizes.iter().cycle() {
        if at >= stream.len() {
            break;
        }
        let end = (at + size).min(stream.len());
        out.extend(feed(&mut c, &mut site, &stream[at..end], Instant::ZERO));
        at = end;
    }
    (out, site.statuses(), c.should_close())
}

#[test]
fn the_pipelined_stream_is_answered_whole() {
    let stream = pipelined_stream();
    let (out, statuses, closed) = feed_split(&stream, &[stream.len()]);
    assert_eq!(statuses, [200, 200, 206, 200, 200, 200, 404, 405, 200, 200, 200]);
    let all = responses(&out, &[false, false, false, false, false, true]);
    assert_eq!(all.len(), 12, "eleven final responses and one 100");
    assert_eq!(all[4].status, 100);
    assert_eq!(String::from_utf8(all[5].body.clone()).unwrap(), format!("9 {}\n", sha_hex(b"wikipedia")));
    assert!(closed);
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn any_split_gives_the_same_bytes(sizes in prop::collection::vec(1usize..200, 1..40)) {
        let stream = pipelined_stream();
        let whole = feed_split(&stream, &[stream.len()]);
        let split = feed_split(&stream, &sizes);
        prop_assert!(whole.0 == split.0, "output differs");
        prop_assert_eq!(whole.1, split.1);
        prop_assert_eq!(whole.2, split.2);
    }

    #[test]
    fn any_bytes_never_panic(
        prefix in prop::sample::select(vec![
            &b""[..],
            b"GET /plaintext HTTP/1.1\r\nHost: x\r\n",
            b"POST /upload HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
            b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 30\r\n\r\n",
            b"GET /bytes/100000 HTTP/1.1\r\nHost: x\r\nRange: ",
        ]),
        noise in prop::collection::vec(any::<u8>(), 0..3000),
        step in 1usize..500,
    ) {
        let mut site = TestSite::new();
        let mut c = conn();
        let mut input = prefix.to_vec();
        input.extend_from_slice(&noise);
        let mut out = Vec::new();
        for piece in input.chunks(step) {
            out.extend(feed(&mut c, &mut site, piece, Instant::ZERO));
        }
        c.on_timeout(Instant::from_secs(11), &mut site.env());
        drain(&mut c, Instant::from_secs(11), &mut site, &mut out);
        c.on_eof(Instant::from_secs(11));
        drain(&mut c, Instant::from_secs(11), &mut site, &mut out);
        prop_assert!(out.is_empty() || out.starts_with(b"HTTP/1.1 "));
    }
}

#[test]
fn idle_only_between_requests_with_nothing_to_send() {
    let mut site = TestSite::new();
    let mut c = conn();
    assert!(c.is_idle(), "a fresh connection");
    // Part of a head: a request is in progress.
    assert_eq!(c.on_input(b"GET /plaintext HTTP/1.1\r\nHo", Instant::ZERO, &mut site.env()), 27);
    assert!(!c.is_idle());
    // The rest: answered, but not sent yet.
    c.on_input(b"st: x\r\n\r\n", Instant::ZERO, &mut site.env());
    assert!(!c.is_idle() && c.wants_output());
    let mut out = Vec::new();
    drain(&mut c, Instant::ZERO, &mut site, &mut out);
    assert!(c.is_idle(), "answered and flushed");
    // An upload whose body is still arriving is in progress.
    c.on_input(b"POST /upload HTTP/1.1\r\nHost: x\r\nContent-Length: 10\r\n\r\n12345", Instant::ZERO, &mut site.env());
    drain(&mut c, Instant::ZERO, &mut site, &mut out);
    assert!(!c.is_idle());
    // Closing connections are never idle: they are ending on their own.
    let (_, closing) = once(&mut site, "GET /plaintext HTTP/1.0\r\n\r\n");
    assert!(closing.should_close() && !closing.is_idle());
}
