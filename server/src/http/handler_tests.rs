//! The [`Handler`] API through [`HttpConn`], bytes in, bytes out: streamed
//! responses (chunked, sized, close-delimited), streamed and collected
//! request bodies with back-pressure, deferred answers and their timeout,
//! panics, bad headers, cancellation, and the [`Router`].

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::task::{Wake, Waker};

use fairway_stack::time::Instant;

use super::tests::{TestSite, config, conn, conn_with, drain, feed, one, responses};
use super::*;

/// What the demo handler is asked for, by path.
#[derive(Default)]
struct Demo {
    /// At most this much body per `body` call (none: all of it).
    take_limit: Option<usize>,
    /// Streams in progress: bytes still to produce, and produced so far.
    streams: ExchangeMap<(u64, u64)>,
    /// Body bytes each upload took.
    taken: ExchangeMap<u64>,
    /// `body` calls made.
    body_calls: usize,
    /// Deferred answers may be given now.
    ready: bool,
    resumes: usize,
    cancelled: Vec<Exchange>,
    /// Wakers kept by deferred exchanges.
    wakers: Vec<Waker>,
    /// When each `/after` exchange may answer.
    due: ExchangeMap<Instant>,
}

impl Handler for Demo {
    fn request(&mut self, cx: &mut Context<'_>, req: &Request<'_>, res: Response<'_>) -> Reply {
        let n = req.query().and_then(|q| q.strip_prefix("n=")).and_then(|n| n.parse().ok()).unwrap_or(100_000u64);
        match req.path() {
            "/stream" => {
                self.streams.insert(cx.exchange(), (n, 0));
                res.status(200).header("Content-Type", b"application/octet-stream").stream(None)
            }
            "/sized" => {
                self.streams.insert(cx.exchange(), (n, 0));
                res.status(200).stream(Some(n))
            }
            "/short" => {
                // Promises more than it will produce.
                self.streams.insert(cx.exchange(), (10, 0));
                res.status(200).stream(Some(20))
            }
            "/echo" => {
                self.taken.insert(cx.exchange(), 0);
                res.read_body()
            }
            "/collect" => res.collect_body(),
            "/later" => {
                self.wakers.push(cx.waker().clone());
                res.defer()
            }
            "/after" => {
                // Answers 5 ms later, on the connection's own timer.
                let due = cx.now() + fairway_stack::time::Duration::from_millis(5);
                self.due.insert(cx.exchange(), due);
                cx.wake_at(due);
                res.defer()
            }
            "/peer" => {
                let peer = cx.peer().map(|p| p.to_string()).unwrap_or_default();
                res.text(200, &peer)
            }
            "/panic" => panic!("a handler bug"),
            "/panic-body" => res.read_body(),
            "/panic-stream" => res.status(200).stream(None),
            "/bad-header" => res.status(200).header("X-Split", b"a\r\nInjected: yes").body(b"no"),
            "/framing-header" => res.status(200).header("Content-Length", b"3").body(b"no"),
            "/close" => res.status(200).header("Connection", b"close").body(b"bye"),
            _ => res.error(404),
        }
    }

    fn body(&mut self, cx: &mut Context<'_>, data: &[u8]) -> usize {
        self.body_calls += 1;
        let Some(taken) = self.taken.get_mut(cx.exchange()) else { panic!("a body bug") };
        let n = self.take_limit.map_or(data.len(), |limit| limit.min(data.len()));
        *taken += n as u64;
        n
    }

    fn body_end(&mut self, cx: &mut Context<'_>, body: &[u8], res: Response<'_>) -> Reply {
        match self.taken.remove(cx.exchange()) {
            Some(count) => res.text(200, &format!("took {count}")),
            None => res.status(200).body(body),
        }
    }

    fn produce(&mut self, cx: &mut Context<'_>, out: &mut [u8]) -> Produce {
        let Some((left, done)) = self.streams.get_mut(cx.exchange()) else { panic!("a stream bug") };
        // At most 3000 bytes a call: several calls per window.
        let n = out.len().min(3000).min(*left as usize);
        for (i, b) in out[..n].iter_mut().enumerate() {
            *b = pattern_byte(*done + i as u64);
        }
        *left -= n as u64;
        *done += n as u64;
        if *left == 0 { Produce::End(n) } else { Produce::Data(n) }
    }

    fn resume(&mut self, cx: &mut Context<'_>, res: Response<'_>) -> Reply {
        self.resumes += 1;
        if let Some(&mut due) = self.due.get_mut(cx.exchange()) {
            return if cx.now() >= due { res.text(200, "after") } else { res.defer() };
        }
        if self.ready { res.text(200, "later") } else { res.defer() }
    }

    fn cancel(&mut self, exchange: Exchange) {
        self.cancelled.push(exchange);
    }
}

fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes()
}

fn demo() -> (HttpConn, TestSite<Demo>) {
    (conn(), TestSite::with(Demo::default()))
}

fn pattern(n: u64) -> Vec<u8> {
    (0..n).map(pattern_byte).collect()
}

// ---------------------------------------------------------------------------
// Streamed responses

#[test]
fn a_stream_of_unknown_length_is_chunked_and_one_of_known_length_is_not() {
    let (mut c, mut site) = demo();
    let mut input = get("/stream?n=100000");
    input.extend(get("/sized?n=5000"));
    input.extend(get("/stream?n=0"));
    let out = feed(&mut c, &mut site, &input, Instant::ZERO);
    let all = responses(&out, &[]);
    assert_eq!(all.len(), 3);
    assert_eq!((all[0].header("Transfer-Encoding"), all[0].header("Content-Length")), (Some("chunked"), None));
    assert_eq!(all[0].body, pattern(100_000));
    assert_eq!((all[1].header("Transfer-Encoding"), all[1].header("Content-Length")), (None, Some("5000")));
    assert_eq!(all[1].body, pattern(5000));
    assert_eq!(all[2].body, b"", "an empty chunked body is the last chunk alone");
    assert!(!c.close_after_flush() && c.is_idle(), "keep-alive goes on");
    assert_eq!(site.statuses(), [200, 200, 200]);
}

#[test]
fn an_http10_stream_ends_with_the_connection_and_head_gets_no_body() {
    let (mut c, mut site) = demo();
    let out = feed(&mut c, &mut site, b"GET /stream?n=7000 HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", Instant::ZERO);
    let r = one(&out);
    assert_eq!((r.header("Transfer-Encoding"), r.header("Connection")), (None, Some("close")));
    assert_eq!(r.body, pattern(7000));
    assert!(c.should_close());

    let (mut c, mut site) = demo();
    let out = feed(&mut c, &mut site, b"HEAD /stream HTTP/1.1\r\nHost: x\r\n\r\n", Instant::ZERO);
    let r = &responses(&out, &[true])[0];
    assert_eq!(r.header("Transfer-Encoding"), Some("chunked"));
    assert!(out.ends_with(b"\r\n\r\n"), "the head alone");
    assert!(c.is_idle());
}

#[test]
fn a_stream_that_ends_short_of_its_length_closes_the_connection() {
    let (mut c, mut site) = demo();
    let out = feed(&mut c, &mut site, &get("/short"), Instant::ZERO);
    assert!(out.starts_with(b"HTTP/1.1 200 OK\r\n") && out.ends_with(&pattern(10)), "what it made is sent");
    assert!(c.should_close(), "the peer learns of the short body from the close");
}

// ---------------------------------------------------------------------------
// Request bodies

#[test]
fn a_streamed_body_reaches_the_handler_which_may_hold_it_back() {
    let (mut c, mut site) = demo();
    site.app.take_limit = Some(1000);
    let body = vec![b'x'; 10_000];
    let mut input = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 10000\r\n\r\n".to_vec();
    input.extend(&body);
    // The handler takes 1000 bytes a call and then waits to be woken: the
    // connection stops reading (its input fills), and each wake (what the
    // host does: drive it again) lets it take 1000 more.
    let mut out = Vec::new();
    let mut rest = &input[..];
    for _ in 0..100 {
        let n = c.on_input(rest, Instant::ZERO, &mut site.env());
        rest = &rest[n..];
        drain(&mut c, Instant::ZERO, &mut site, &mut out);
        if !out.is_empty() {
            break;
        }
    }
    assert!(rest.is_empty());
    assert_eq!(String::from_utf8(one(&out).body).unwrap(), "took 10000");
    assert!(site.app.body_calls >= 10, "{} calls", site.app.body_calls);

    // Chunked, whole.
    let (mut c, mut site) = demo();
    let input =
        b"POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
    let out = feed(&mut c, &mut site, input, Instant::ZERO);
    assert_eq!(String::from_utf8(one(&out).body).unwrap(), "took 11");
}

#[test]
fn a_collected_body_arrives_whole_and_one_over_the_limit_is_413() {
    let (mut c, mut site) = demo();
    let input =
        b"POST /collect HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
    let out = feed(&mut c, &mut site, input, Instant::ZERO);
    assert_eq!(one(&out).body, b"abcde");
    assert!(c.is_idle());

    let (mut c, mut site) = demo();
    let too_big = config().max_collect + 1;
    let input = format!("POST /collect HTTP/1.1\r\nHost: x\r\nContent-Length: {too_big}\r\n\r\n");
    let out = feed(&mut c, &mut site, input.as_bytes(), Instant::ZERO);
    assert_eq!(one(&out).status, 413, "refused from its declared length, before the body");
    assert!(c.should_close());

    let (mut c, mut site) = demo();
    let mut input = b"POST /collect HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
    for _ in 0..=config().max_collect / 1000 {
        input.extend(format!("3e8\r\n{}\r\n", "y".repeat(1000)).as_bytes());
    }
    input.extend(b"0\r\n\r\n");
    let out = feed(&mut c, &mut site, &input, Instant::ZERO);
    assert_eq!(one(&out).status, 413, "a chunked body is refused once it grows past the limit");
}

#[test]
fn a_body_too_large_to_gather_is_refused_before_any_100_continue() {
    // Under --max-body, over --max-collect: the handler's choice decides.
    let limits = HttpConfig { max_collect: 100, ..config() };
    let (mut c, mut site) = (conn_with(&limits), TestSite::with(Demo::default()));
    let too_big = 5000;
    assert!(too_big < limits.max_body && too_big > limits.max_collect as u64);
    let head =
        format!("POST /collect HTTP/1.1\r\nHost: x\r\nContent-Length: {too_big}\r\nExpect: 100-continue\r\n\r\n");
    let out = feed(&mut c, &mut site, head.as_bytes(), Instant::ZERO);
    assert!(out.starts_with(b"HTTP/1.1 413 "), "413 first, no 100: {}", String::from_utf8_lossy(&out));
    assert_eq!(one(&out).status, 413);
    assert!(c.should_close(), "the body it did not invite is not read");
    // One within the limit is invited.
    let (mut c, mut site) = demo();
    let head = "POST /collect HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\nExpect: 100-continue\r\n\r\n";
    let out = feed(&mut c, &mut site, head.as_bytes(), Instant::ZERO);
    assert_eq!(out, b"HTTP/1.1 100 Continue\r\n\r\n");
    let out = feed(&mut c, &mut site, b"hello", Instant::ZERO);
    assert_eq!(one(&out).body, b"hello");
}

#[test]
fn a_body_cut_by_the_peer_cancels_its_exchange() {
    let (mut c, mut site) = demo();
    feed(&mut c, &mut site, b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\nabc", Instant::ZERO);
    c.on_eof(Instant::ZERO);
    let mut out = Vec::new();
    drain(&mut c, Instant::ZERO, &mut site, &mut out);
    assert!(out.is_empty() && c.should_close());
    assert_eq!(site.app.cancelled.len(), 1, "the handler is told");
}

// ---------------------------------------------------------------------------
// Deferred answers

/// Counts its wakes.
struct CountingWaker(AtomicUsize);

impl Wake for CountingWaker {
    fn wake(self: Arc<Self>) {
        self.0.fetch_add(1, Ordering::SeqCst);
    }
}

#[test]
fn a_deferred_answer_comes_when_resumed_and_keeps_its_place() {
    let count = Arc::new(CountingWaker(AtomicUsize::new(0)));
    let mut site = TestSite::with_waker(Demo::default(), Waker::from(Arc::clone(&count)));
    let mut c = conn();
    let mut input = get("/later");
    input.extend(get("/sized?n=3"));
    let out = feed(&mut c, &mut site, &input, Instant::ZERO);
    assert!(out.is_empty(), "nothing until the handler answers: {}", String::from_utf8_lossy(&out));
    assert!(!c.is_idle() && c.deadline().is_some());
    // The handler kept the connection's waker.
    site.app.wakers.pop().expect("a waker").wake();
    assert_eq!(count.0.load(Ordering::SeqCst), 1);
    site.app.ready = true;
    let mut out = Vec::new();
    drain(&mut c, Instant::ZERO, &mut site, &mut out);
    let all = responses(&out, &[]);
    assert_eq!(all.iter().map(|r| r.body.clone()).collect::<Vec<_>>(), [b"later".to_vec(), pattern(3)]);
    assert!(site.app.resumes >= 2 && site.app.cancelled.is_empty());
}

#[test]
fn a_handler_may_ask_to_be_called_again_at_a_time_of_its_choosing() {
    let (mut c, mut site) = demo();
    let t0 = Instant::from_secs(1);
    c.reset(t0);
    assert!(feed(&mut c, &mut site, &get("/after"), t0).is_empty());
    let due = t0 + fairway_stack::time::Duration::from_millis(5);
    assert_eq!(c.deadline(), Some(due), "the connection's deadline is the handler's");
    c.on_timeout(due, &mut site.env());
    let mut out = Vec::new();
    drain(&mut c, due, &mut site, &mut out);
    assert_eq!(one(&out).body, b"after");
    assert!(c.deadline().is_some_and(|d| d > due), "back to the idle timeout");
}

#[test]
fn a_deferred_answer_that_never_comes_is_a_503_at_the_response_timeout() {
    let (mut c, mut site) = demo();
    feed(&mut c, &mut site, &get("/later"), Instant::ZERO);
    let due = c.deadline().unwrap();
    assert_eq!(due, Instant::ZERO + fairway_stack::time::Duration::from(config().response_timeout));
    c.on_timeout(due, &mut site.env());
    let mut out = Vec::new();
    drain(&mut c, due, &mut site, &mut out);
    assert_eq!(one(&out).status, 503);
    assert!(c.should_close());
    assert_eq!(site.app.cancelled.len(), 1);
}

// ---------------------------------------------------------------------------
// What handlers get wrong

#[test]
fn a_panic_costs_its_connection_a_500_and_nothing_else() {
    for path in ["/panic", "/panic-body"] {
        let (mut c, mut site) = demo();
        let input = format!("POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi");
        let out = feed(&mut c, &mut site, input.as_bytes(), Instant::ZERO);
        let r = one(&out);
        assert_eq!((r.status, r.header("Connection")), (500, Some("close")), "{path}");
        assert!(c.should_close());
        // The same connection state serves the next connection.
        c.finish(&mut site.app);
        c.reset(Instant::ZERO);
        assert_eq!(one(&feed(&mut c, &mut site, &get("/sized?n=2"), Instant::ZERO)).body, pattern(2));
    }
    // Once a head is out, a panic can only reset the connection.
    let (mut c, mut site) = demo();
    let out = feed(&mut c, &mut site, &get("/panic-stream"), Instant::ZERO);
    assert!(out.is_empty(), "the connection is reset, its queued head dropped: {}", String::from_utf8_lossy(&out));
    assert!(c.should_close() && site.statuses() == [200], "the head was queued (and counted) before the panic");
}

#[test]
fn a_header_the_server_cannot_send_makes_a_500() {
    for path in ["/bad-header", "/framing-header"] {
        let (mut c, mut site) = demo();
        let out = feed(&mut c, &mut site, &get(path), Instant::ZERO);
        assert_eq!(one(&out).status, 500, "{path}");
        assert!(!String::from_utf8_lossy(&out).contains("Injected"));
    }
    let (mut c, mut site) = demo();
    let r = one(&feed(&mut c, &mut site, &get("/close"), Instant::ZERO));
    assert_eq!((r.header("Connection"), r.body.as_slice()), (Some("close"), &b"bye"[..]));
    assert!(c.should_close(), "a handler's Connection: close closes");
}

#[test]
fn handlers_see_the_peer_and_the_exchange() {
    let (mut c, mut site) = demo();
    c.attach(7, Some("10.0.0.2:5555".parse().unwrap()));
    assert_eq!(one(&feed(&mut c, &mut site, &get("/peer"), Instant::ZERO)).body, b"10.0.0.2:5555");
    feed(&mut c, &mut site, &get("/later"), Instant::ZERO);
    c.finish(&mut site.app);
    let [ex] = site.app.cancelled[..] else { panic!("one cancel: {:?}", site.app.cancelled) };
    assert_eq!(ex.index(), 7, "an exchange is named by its connection's slot");
}

// ---------------------------------------------------------------------------
// The router

fn router() -> Router {
    Router::new()
        .route(Method::Get, "/a", handler_fn(|_, _, res| res.text(200, "a")))
        .about("the letter a")
        .route(Method::Post | Method::Put, "/a", handler_fn(|_, req, res| res.text(201, req.method_name())))
        .prefix(Method::Get, "/files/", handler_fn(|_, req, res| res.text(200, req.path())))
        .route(Method::Post, "/demo", Demo::default())
        .prefix(Methods::ANY, "/dav/", handler_fn(|_, req, res| res.text(207, req.method_name())))
        .with_index("a test router")
}

#[test]
fn routes_go_by_method_and_path_and_wrong_methods_get_405_with_allow() {
    let mut site = TestSite::with(router());
    let mut c = conn();
    let mut ask = |input: &str| one(&feed(&mut c, &mut site, input.as_bytes(), Instant::ZERO));
    assert_eq!(ask("GET /a HTTP/1.1\r\nHost: x\r\n\r\n").body, b"a");
    let put = ask("PUT /a HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    assert_eq!((put.status, put.body.as_slice()), (201, &b"PUT"[..]));
    let r = ask("DELETE /a HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!((r.status, r.header("Allow")), (405, Some("GET, HEAD, POST, PUT")));
    assert_eq!(ask("GET /files/x/y HTTP/1.1\r\nHost: x\r\n\r\n").body, b"/files/x/y");
    assert_eq!(ask("GET /nope HTTP/1.1\r\nHost: x\r\n\r\n").status, 404);
    // A method without a name here is 501 (RFC 9110 §9.1), on a known path
    // or not, unless a route for any method takes it.
    assert_eq!(ask("LOCK /a HTTP/1.1\r\nHost: x\r\n\r\n").status, 501);
    assert_eq!(ask("LOCK /nope HTTP/1.1\r\nHost: x\r\n\r\n").status, 501);
    let dav = ask("PROPFIND /dav/x HTTP/1.1\r\nHost: x\r\n\r\n");
    assert_eq!((dav.status, dav.body.as_slice()), (207, &b"PROPFIND"[..]));
    // The same exchange's later calls reach the handler that took it.
    let echo = ask("POST /demo HTTP/1.1\r\nHost: x\r\nContent-Length: 0\r\n\r\n");
    assert_eq!(echo.status, 404, "the demo answers its own paths only");
    let index = ask("GET / HTTP/1.1\r\nHost: x\r\n\r\n");
    let text = String::from_utf8(index.body).unwrap();
    assert!(text.starts_with("a test router\n\n"), "{text}");
    assert!(text.contains("GET, HEAD   /a") && text.contains("the letter a") && text.contains("/files/*"), "{text}");
}

#[test]
fn the_builtin_index_lists_the_endpoints() {
    let mut site = TestSite::with(builtin(&config()));
    let mut c = conn();
    let r = one(&feed(&mut c, &mut site, &get("/"), Instant::ZERO));
    let text = String::from_utf8(r.body).unwrap();
    assert_eq!(r.status, 200);
    for path in ["/plaintext", "/json", "/bytes/*", "/upload", "/metrics", "/healthz"] {
        assert!(text.contains(path), "{path} missing from the index:\n{text}");
    }
    // Each line describes its own route: the description given right after
    // the fallback is the fallback's, not the last route's.
    let about = |path: &str| {
        let line = text.lines().find(|l| l.split_whitespace().any(|w| w == path)).unwrap_or_else(|| panic!("{path}"));
        line.split_once(path).map_or("", |(_, rest)| rest.trim()).to_owned()
    };
    assert_eq!(about("/healthz"), "ok", "{text}");
    assert_eq!(about("/*"), "static files, when the server has a root (--root)", "{text}");
    assert_eq!(about("/plaintext"), "Hello, World! (text/plain)", "{text}");
}

#[test]
fn about_describes_what_was_added_just_before_it() {
    let noop = || handler_fn(|_, _, res| res.text(200, "x"));
    let router = Router::new()
        .route(Method::Get, "/a", noop())
        .about("a")
        .fallback(noop())
        .about("the rest")
        .route(Method::Get, "/b", noop())
        .about("b")
        .with_index("t");
    let mut site = TestSite::with(router);
    let mut c = conn();
    let text = String::from_utf8(one(&feed(&mut c, &mut site, &get("/"), Instant::ZERO)).body).unwrap();
    let lines: Vec<&str> = text.lines().skip(2).map(str::trim_end).collect();
    assert_eq!(lines.len(), 3, "{text}");
    assert!(lines[0].ends_with("/a              a"), "{text}");
    assert!(lines[1].ends_with("/b              b"), "{text}");
    assert!(lines[2].ends_with("/*              the rest"), "{text}");
}
