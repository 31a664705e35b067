//! The endpoints: what each request is answered with.
//!
//! | path | methods | answer |
//! |---|---|---|
//! | `/plaintext` | GET, HEAD | `Hello, World!`, `text/plain` |
//! | `/json` | GET, HEAD | `{"message":"Hello, World!"}`, `application/json`, serialized per request |
//! | `/bytes/{n}` | GET, HEAD | n bytes of [`pattern_byte`](super::pattern_byte), `Range` honoured; 400 over `max_bytes`, 404 if n is not a number |
//! | `/upload` | POST | `<count> <sha256 hex>\n`, `text/plain` (the body is read by the connection) |
//! | `/metrics` | GET, HEAD | the [`Site`]'s Prometheus text |
//! | `/healthz` | GET, HEAD | `ok\n` |
//! | anything else | GET, HEAD | a static file when the site has a root, else 404 |
//!
//! A known path with another method gets 405 with `Allow`. Error answers
//! carry their reason phrase and a newline as a `text/plain` body.

use crate::http::Site;
use crate::http::body::Body;
use crate::http::json::Message;
use crate::http::parse::{Method, Request, decimal};
use crate::http::range::{self, RangeRequest};
use crate::http::response::{ByteWriter, Common, HeadWriter, MAX_INLINE_BODY, Persistence, reason};
use crate::http::static_files::OpenFile;

const TEXT_PLAIN: &str = "text/plain";
const PROMETHEUS_TEXT: &str = "text/plain; version=0.0.4; charset=utf-8";

/// Where a response is written, and what it says about the connection.
pub(crate) struct Ctx<'a> {
    /// Free space in the output window: at least a head and an inline body.
    pub out: &'a mut [u8],
    pub common: Common<'a>,
    pub persistence: Persistence,
    /// A HEAD request: the same head, no body.
    pub head_only: bool,
    /// The connection's text buffer (metrics are rendered into it).
    pub text: &'a mut Vec<u8>,
}

/// A response written into [`Ctx::out`].
#[derive(Debug)]
pub(crate) struct Answer {
    pub status: u16,
    /// Bytes written, or `None` if they did not fit (the connection closes).
    pub len: Option<usize>,
    /// The body still to produce.
    pub body: Body,
}

/// What a request head leads to.
pub(crate) enum Dispatch {
    /// Answered now.
    Answer(Answer),
    /// `/upload`: read the body, then [`upload_answer`].
    Upload,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Route<'b> {
    Plaintext,
    Json,
    Healthz,
    Metrics,
    Bytes(&'b str),
    Upload,
    Files(&'b str),
}

impl Route<'_> {
    fn of(path: &str) -> Route<'_> {
        match path {
            "/plaintext" => Route::Plaintext,
            "/json" => Route::Json,
            "/healthz" => Route::Healthz,
            "/metrics" => Route::Metrics,
            "/upload" => Route::Upload,
            _ => path.strip_prefix("/bytes/").map_or(Route::Files(path), Route::Bytes),
        }
    }

    fn allow(self) -> &'static str {
        match self {
            Route::Upload => "POST",
            _ => "GET, HEAD",
        }
    }

    fn accepts(self, method: Method) -> bool {
        match self {
            Route::Upload => method == Method::Post,
            _ => matches!(method, Method::Get | Method::Head),
        }
    }
}

/// Routes a request and answers it (all but `/upload`, whose answer waits
/// for its body).
pub(crate) fn dispatch(req: &Request<'_, '_>, ctx: Ctx<'_>, site: &mut dyn Site, max_bytes: u64) -> Dispatch {
    let route = Route::of(req.path);
    if matches!(route, Route::Files(_)) && site.files().is_none() {
        return Dispatch::Answer(error(ctx, 404));
    }
    if !route.accepts(req.method) {
        let allow = route.allow();
        return Dispatch::Answer(plain(ctx, 405, TEXT_PLAIN, reason_body(405).as_bytes(), |h| {
            h.header("Allow", allow.as_bytes());
        }));
    }
    Dispatch::Answer(match route {
        Route::Plaintext => plain(ctx, 200, TEXT_PLAIN, b"Hello, World!", |_| {}),
        Route::Json => {
            let mut body = [0u8; MAX_INLINE_BODY];
            let mut w = ByteWriter::new(&mut body);
            Message { message: "Hello, World!" }.write_json(&mut w);
            let len = w.len();
            plain(ctx, 200, "application/json", &body[..len], |_| {})
        }
        Route::Healthz => plain(ctx, 200, TEXT_PLAIN, b"ok\n", |_| {}),
        Route::Metrics => metrics(ctx, site),
        Route::Bytes(n) => bytes(req, ctx, n, max_bytes),
        Route::Upload => return Dispatch::Upload,
        Route::Files(path) => match site.files().map(|files| files.open(path)) {
            Some(Ok(file)) => static_file(req, ctx, file),
            Some(Err(e)) => error(ctx, e.status()),
            None => error(ctx, 404),
        },
    })
}

/// The answer to `/upload`: `<count> <sha256 hex>\n`.
pub(crate) fn upload_answer(ctx: Ctx<'_>, count: u64, sha256: &[u8]) -> Answer {
    let mut body = [0u8; MAX_INLINE_BODY];
    let mut w = ByteWriter::new(&mut body);
    w.put_u64(count);
    w.put(b" ");
    for b in sha256 {
        w.put(&[b"0123456789abcdef"[usize::from(b >> 4)], b"0123456789abcdef"[usize::from(b & 0xf)]]);
    }
    w.put(b"\n");
    let len = w.len();
    plain(ctx, 200, TEXT_PLAIN, &body[..len], |_| {})
}

/// An error answer: the reason phrase as a `text/plain` body.
pub(crate) fn error(ctx: Ctx<'_>, status: u16) -> Answer {
    plain(ctx, status, TEXT_PLAIN, reason_body(status).as_bytes(), |_| {})
}

/// `reason` and a newline, in a fixed buffer.
fn reason_body(status: u16) -> ReasonBody {
    let mut body = ReasonBody { bytes: [0; 48], len: 0 };
    let mut w = ByteWriter::new(&mut body.bytes);
    w.put(reason(status).as_bytes());
    w.put(b"\n");
    body.len = w.len();
    body
}

struct ReasonBody {
    bytes: [u8; 48],
    len: usize,
}

impl ReasonBody {
    fn as_bytes(&self) -> &[u8] {
        &self.bytes[..self.len]
    }
}

/// A response whose body is written with its head.
fn plain(
    ctx: Ctx<'_>,
    status: u16,
    content_type: &str,
    body: &[u8],
    extra: impl FnOnce(&mut HeadWriter<'_>),
) -> Answer {
    let mut h = HeadWriter::start(ctx.out, status, ctx.common);
    h.header("Content-Type", content_type.as_bytes());
    h.header_u64("Content-Length", body.len() as u64);
    extra(&mut h);
    let mut w = h.end(ctx.persistence);
    if !ctx.head_only {
        w.put(body);
    }
    Answer { status, len: w.finish(), body: Body::None }
}

fn metrics(ctx: Ctx<'_>, site: &mut dyn Site) -> Answer {
    ctx.text.clear();
    site.metrics(ctx.text);
    let len = ctx.text.len();
    let mut h = HeadWriter::start(ctx.out, 200, ctx.common);
    h.header("Content-Type", PROMETHEUS_TEXT.as_bytes());
    h.header_u64("Content-Length", len as u64);
    let w = h.end(ctx.persistence);
    let body = if ctx.head_only || len == 0 { Body::None } else { Body::Text { next: 0, end: len } };
    Answer { status: 200, len: w.finish(), body }
}

fn bytes(req: &Request<'_, '_>, ctx: Ctx<'_>, n: &str, max_bytes: u64) -> Answer {
    if n.is_empty() || !n.bytes().all(|b| b.is_ascii_digit()) {
        return error(ctx, 404); // not a number: no such resource
    }
    // A number over the cap (or over u64): a request this server refuses.
    let Some(n) = decimal(n.as_bytes()).filter(|&n| n <= max_bytes) else { return error(ctx, 400) };
    let range = range::resolve(req.header("range"), n);
    let (answer, span) = ranged(ctx, range, n, "application/octet-stream", |_| {});
    Answer { body: span.map_or(Body::None, |(next, end)| Body::Pattern { next, end }), ..answer }
}

fn static_file(req: &Request<'_, '_>, ctx: Ctx<'_>, file: OpenFile) -> Answer {
    let etag = file.etag();
    let last_modified = file.last_modified();
    let validators = |h: &mut HeadWriter<'_>| {
        h.header("ETag", etag.as_bytes());
        h.header("Last-Modified", &last_modified);
    };
    if file.not_modified(req.headers_named("if-none-match"), req.header("if-modified-since")) {
        // RFC 9110 §15.4.5: the validators a 200 would carry, no content.
        let mut h = HeadWriter::start(ctx.out, 304, ctx.common);
        validators(&mut h);
        let w = h.end(ctx.persistence);
        return Answer { status: 304, len: w.finish(), body: Body::None };
    }
    let range = if file.range_applies(req.header("if-range")) {
        range::resolve(req.header("range"), file.len())
    } else {
        RangeRequest::Full
    };
    let (answer, span) = ranged(ctx, range, file.len(), file.content_type(), validators);
    Answer { body: span.map_or(Body::None, |(next, end)| Body::File { file, next, end }), ..answer }
}

/// The head of a 200, 206 or 416 for a representation of `len` bytes, and
/// the span of it to send (none for HEAD, 416 or an empty span).
fn ranged(
    ctx: Ctx<'_>,
    range: RangeRequest,
    len: u64,
    content_type: &str,
    validators: impl FnOnce(&mut HeadWriter<'_>),
) -> (Answer, Option<(u64, u64)>) {
    let (status, start, end) = match range {
        RangeRequest::Full => (200, 0, len),
        RangeRequest::Part { start, end } => (206, start, end),
        RangeRequest::Unsatisfiable => {
            let answer = plain(ctx, 416, TEXT_PLAIN, reason_body(416).as_bytes(), |h| h.unsatisfied_range(len));
            return (answer, None);
        }
    };
    let mut h = HeadWriter::start(ctx.out, status, ctx.common);
    h.header("Content-Type", content_type.as_bytes());
    h.header_u64("Content-Length", end - start);
    if status == 206 {
        h.content_range(start, end, len);
    }
    h.header("Accept-Ranges", b"bytes");
    validators(&mut h);
    let w = h.end(ctx.persistence);
    let span = (!ctx.head_only && start < end).then_some((start, end));
    (Answer { status, len: w.finish(), body: Body::None }, span)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_route() {
        assert_eq!(Route::of("/plaintext"), Route::Plaintext);
        assert_eq!(Route::of("/bytes/12"), Route::Bytes("12"));
        assert_eq!(Route::of("/bytes/"), Route::Bytes(""));
        assert_eq!(Route::of("/bytes"), Route::Files("/bytes"));
        assert_eq!(Route::of("/plaintext/"), Route::Files("/plaintext/"));
        assert!(Route::Upload.accepts(Method::Post) && !Route::Upload.accepts(Method::Get));
        assert!(Route::Json.accepts(Method::Head) && !Route::Json.accepts(Method::Post));
        assert!(!Route::Files("/").accepts(Method::Other));
    }

    #[test]
    fn reason_bodies_fit() {
        for status in [200, 206, 304, 400, 403, 404, 405, 408, 413, 414, 416, 431, 500, 501] {
            assert_eq!(reason_body(status).as_bytes(), format!("{}\n", reason(status)).as_bytes());
        }
    }
}
