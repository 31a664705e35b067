//! The reverse proxy end to end on the kernel backend: the real `fairway`
//! binary with `--upstream` in front of real upstream servers started by
//! the test: Python's `http.server`, and a scripted HTTP/1.1 server
//! ([`Upstream`]) that counts its connections, records the request heads
//! it is sent and misbehaves on purpose (slow, cut mid-response, chunked,
//! `Connection: close`). Clients are curl and raw sockets.
//!
//! Needs `curl` and `python3` on the PATH; `cargo xtask test` installs them.

mod support;

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use fairway::http::pattern_byte;
use sha2::{Digest, Sha256};
use support::{FairwayProcess, TempDir, total};

/// What a scripted upstream saw.
#[derive(Default)]
struct Seen {
    connections: AtomicUsize,
    requests: AtomicUsize,
    heads: Mutex<Vec<String>>,
}

/// A scripted HTTP/1.1 upstream on 127.0.0.1, one thread per connection,
/// keep-alive unless a route says otherwise. Routes:
/// `/hello` its name; `/echo` the request head it received as the body;
/// `/bytes?N` N pattern bytes; `/chunked?N` N pattern bytes in chunks;
/// `/upload` the body's length and SHA-256; `/slow` answers after 3 s;
/// `/cut` promises 1 MB, sends 1,000 bytes and closes; `/cut-chunked`
/// sends two chunks and closes; `/close` answers with
/// `Connection: close`; `/healthz` 200, or 503 when `sick`.
struct Upstream {
    addr: SocketAddr,
    seen: Arc<Seen>,
}

impl Upstream {
    fn start(name: &'static str, sick: bool) -> Upstream {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Seen::default());
        let shared = Arc::clone(&seen);
        std::thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(stream) = stream else { return };
                shared.connections.fetch_add(1, Ordering::SeqCst);
                let seen = Arc::clone(&shared);
                std::thread::spawn(move || serve(stream, name, sick, &seen));
            }
        });
        Upstream { addr, seen }
    }

    fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn connections(&self) -> usize {
        self.seen.connections.load(Ordering::SeqCst)
    }

    fn requests(&self) -> usize {
        self.seen.requests.load(Ordering::SeqCst)
    }
}

fn sha256(data: &[u8]) -> String {
    Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

fn pattern(n: usize) -> Vec<u8> {
    (0..n as u64).map(pattern_byte).collect()
}

/// One upstream connection: requests until the client closes.
fn serve(stream: TcpStream, name: &str, sick: bool, seen: &Seen) {
    let mut reader = BufReader::new(stream.try_clone().unwrap());
    let mut out = stream;
    loop {
        let mut head = String::new();
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) | Err(_) => return,
                Ok(_) => {}
            }
            head.push_str(&line);
            if line == "\r\n" {
                break;
            }
        }
        seen.requests.fetch_add(1, Ordering::SeqCst);
        seen.heads.lock().unwrap().push(head.clone());
        let target = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
        // The request body, as the proxy framed it.
        let body = read_body(&mut reader, &head);
        let (path, query) = target.split_once('?').unwrap_or((&target, ""));
        let n: usize = query.parse().unwrap_or(0);
        let is_head = head.starts_with("HEAD ");
        let reply = |out: &mut TcpStream, status: &str, extra: &str, body: &[u8]| {
            let head = format!(
                "HTTP/1.1 {status}\r\nContent-Length: {}\r\nKeep-Alive: timeout=5\r\nConnection: keep-alive, \
                 X-Private\r\nX-Private: secret\r\nX-Upstream: {name}\r\nServer: scripted\r\n{extra}\r\n",
                body.len()
            );
            let body = if is_head { &[][..] } else { body };
            out.write_all(head.as_bytes()).and_then(|()| out.write_all(body))
        };
        let sent = match path {
            "/hello" => reply(&mut out, "200 OK", "", name.as_bytes()),
            "/echo" => reply(&mut out, "200 OK", "", head.as_bytes()),
            "/bytes" => reply(&mut out, "200 OK", "", &pattern(n)),
            "/upload" => {
                let text = format!("{} {}", body.len(), sha256(&body));
                reply(&mut out, "200 OK", "", text.as_bytes())
            }
            "/chunked" => {
                let data = pattern(n);
                let mut wire = b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n".to_vec();
                for chunk in data.chunks(7_777) {
                    wire.extend_from_slice(format!("{:x};ext=1\r\n", chunk.len()).as_bytes());
                    wire.extend_from_slice(chunk);
                    wire.extend_from_slice(b"\r\n");
                }
                wire.extend_from_slice(b"0\r\nX-Trailer: t\r\n\r\n");
                out.write_all(&wire)
            }
            "/slow" => {
                std::thread::sleep(Duration::from_secs(3));
                reply(&mut out, "200 OK", "", b"late")
            }
            "/cut" => {
                let _ = out.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n");
                let _ = out.write_all(&pattern(1000));
                return;
            }
            "/cut-chunked" => {
                let _ =
                    out.write_all(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n5\r\nworld\r\n");
                return;
            }
            "/close" => {
                let _ = out.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok");
                return;
            }
            "/healthz" if sick => reply(&mut out, "503 Service Unavailable", "", b"sick"),
            "/healthz" => reply(&mut out, "200 OK", "", b"ok"),
            _ => reply(&mut out, "404 Not Found", "", b"no"),
        };
        if sent.is_err() {
            return;
        }
    }
}

/// The value of the field `name` in `head`.
fn field<'h>(head: &'h str, name: &str) -> Option<&'h str> {
    head.lines().find_map(|l| l.split_once(':').filter(|(n, _)| n.eq_ignore_ascii_case(name)).map(|(_, v)| v.trim()))
}

/// The body after `head` on `reader`: its `Content-Length`, or chunked.
fn read_body(reader: &mut impl BufRead, head: &str) -> Vec<u8> {
    let mut body = Vec::new();
    if let Some(len) = field(head, "content-length") {
        body.resize(len.parse().unwrap(), 0);
        reader.read_exact(&mut body).unwrap();
    } else if field(head, "transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        loop {
            let mut size = String::new();
            reader.read_line(&mut size).unwrap();
            let n = usize::from_str_radix(size.trim(), 16).unwrap();
            let mut chunk = vec![0; n + 2];
            reader.read_exact(&mut chunk).unwrap();
            if n == 0 {
                break;
            }
            body.extend_from_slice(&chunk[..n]);
        }
    }
    body
}

/// One request on `stream` (keep-alive): status, head and body.
fn exchange(stream: &mut TcpStream, request: &str) -> (u16, String, Vec<u8>) {
    stream.write_all(request.as_bytes()).unwrap();
    read_response(stream, request.starts_with("HEAD"))
}

fn read_response(stream: &mut TcpStream, head_only: bool) -> (u16, String, Vec<u8>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        assert_eq!(stream.read(&mut byte).unwrap(), 1, "closed within a head: {}", String::from_utf8_lossy(&head));
        head.push(byte[0]);
    }
    let head = String::from_utf8(head).unwrap();
    let status = head[9..12].parse().unwrap();
    // One byte at a time: what follows the body on the connection stays
    // for the next response.
    let body = if head_only { Vec::new() } else { read_body(&mut BufReader::with_capacity(1, stream), &head) };
    (status, head, body)
}

fn get(path: &str) -> String {
    format!("GET {path} HTTP/1.1\r\nHost: app.test\r\n\r\n")
}

fn curl(args: &[&str]) -> std::process::Output {
    match Command::new("curl").args(["-sS", "--max-time", "20"]).args(args).output() {
        Ok(out) => out,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            panic!("`curl` is not installed; run the tests through `cargo xtask test`, which installs it")
        }
        Err(e) => panic!("cannot run curl: {e}"),
    }
}

/// Waits for `what` to hold, up to 10 s.
#[track_caller]
fn eventually(what: &str, mut check: impl FnMut() -> bool) {
    let until = Instant::now() + Duration::from_secs(10);
    while !check() {
        assert!(Instant::now() < until, "{what}: not within 10 s");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn forwards_requests_and_responses_without_the_connections_own_fields() {
    let up = Upstream::start("one", false);
    let fw = FairwayProcess::start(&["--upstream", &format!("app={}", up.url())]);
    let mut client = fw.connect();
    let request = "GET /echo?x=1 HTTP/1.1\r\nHost: app.test\r\nConnection: keep-alive, X-Hop\r\nX-Hop: 1\r\n\
                   Keep-Alive: 5\r\nTE: trailers\r\nX-Forwarded-For: 10.1.2.3\r\nVia: 1.1 edge\r\nX-End: kept\r\n\r\n";
    let (status, head, body) = exchange(&mut client, request);
    assert_eq!(status, 200, "{head}");
    let sent = String::from_utf8(body).unwrap();
    assert!(sent.starts_with("GET /echo?x=1 HTTP/1.1\r\n"), "{sent}");
    for kept in ["Host: app.test", "X-End: kept", "Via: 1.1 edge, 1.1 fairway", "X-Forwarded-For: 10.1.2.3, 127.0.0.1"]
    {
        assert!(sent.contains(kept), "upstream lacks {kept:?}:\n{sent}");
    }
    assert!(sent.contains("Forwarded: for=127.0.0.1;proto=http") && sent.contains("X-Forwarded-Proto: http"), "{sent}");
    for dropped in ["X-Hop", "Keep-Alive", "TE:", "Connection"] {
        assert!(!sent.contains(dropped), "hop-by-hop {dropped:?} reached the upstream:\n{sent}");
    }
    // And back: the upstream's connection fields stay behind; the server
    // writes its own Server and Date.
    assert!(head.contains("X-Upstream: one") && head.contains("Via: 1.1 fairway"), "{head}");
    for dropped in ["Keep-Alive", "X-Private", "scripted"] {
        assert!(!head.contains(dropped), "hop-by-hop {dropped:?} reached the client:\n{head}");
    }
    // A 404 is the upstream's answer, passed through.
    let (status, _, body) = exchange(&mut client, &get("/nothing"));
    assert_eq!((status, body.as_slice()), (404, &b"no"[..]));
}

#[test]
fn bodies_stream_both_ways_byte_exact() {
    let up = Upstream::start("one", false);
    let fw = FairwayProcess::start(&["--upstream", &format!("app={}", up.url())]);
    let dir = TempDir::new("proxy-bodies");
    // Downloads: a length, chunked, and HEAD.
    for path in ["/bytes?3000001", "/chunked?1000003", "/chunked?0", "/bytes?0"] {
        let out = curl(&["-f", &fw.url(path)]);
        assert!(out.status.success(), "{path}: {}", String::from_utf8_lossy(&out.stderr));
        let n: usize = path.split('?').nth(1).unwrap().parse().unwrap();
        assert!(out.stdout == pattern(n), "{path}: {} bytes, not the {n} sent", out.stdout.len());
    }
    let out = curl(&["-I", &fw.url("/bytes?12345")]);
    let head = String::from_utf8_lossy(&out.stdout).to_lowercase();
    assert!(head.contains("content-length: 12345"), "{head}");
    // Uploads: with a length (curl sends Expect: 100-continue above 1 MB),
    // and chunked.
    let data: Vec<u8> = (0..5_000_017u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    let file = dir.path("upload.bin");
    std::fs::write(&file, &data).unwrap();
    let expected = format!("{} {}", data.len(), sha256(&data));
    let at = format!("@{}", file.display());
    for extra in [&[][..], &["-H", "Transfer-Encoding: chunked"][..]] {
        let out = curl(&[&["-f", "--data-binary", &at], extra, &[&fw.url("/upload")]].concat());
        assert!(out.status.success(), "{extra:?}: {}\n{}", String::from_utf8_lossy(&out.stderr), fw.log());
        assert_eq!(String::from_utf8_lossy(&out.stdout), expected, "{extra:?}");
    }
}

#[test]
fn upstream_connections_are_kept_alive_and_reused() {
    let up = Upstream::start("one", false);
    let upstream = format!("app={}", up.url());
    let fw = FairwayProcess::start(&["--upstream", &upstream, "--route", "/metrics=builtin"]);
    let mut client = fw.connect();
    for _ in 0..50 {
        assert_eq!(exchange(&mut client, &get("/hello")).0, 200);
    }
    assert_eq!((up.requests(), up.connections()), (50, 1), "one client connection, one upstream connection");
    // New client connections each time: each shard keeps its own pool.
    for _ in 0..40 {
        let mut c = fw.connect();
        assert_eq!(exchange(&mut c, "GET /hello HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").0, 200);
    }
    assert!(up.connections() <= 3, "{} upstream connections for 90 requests on 2 shards", up.connections());
    // /metrics stays the server's own, and counts the same (the other
    // shard's figures are up to a second old).
    fw.wait_total("fairway_proxy_forwarded_total", 90.0);
    let text = fw.scrape();
    let (connects, reused) =
        (total(&text, "fairway_proxy_upstream_connects_total"), total(&text, "fairway_proxy_reused_total"));
    assert_eq!(connects, up.connections() as f64, "{text}");
    assert_eq!((total(&text, "fairway_proxy_forwarded_total"), connects + reused), (90.0, 90.0));
    // An upstream that closes after its answer is not reused.
    let before = up.connections();
    for _ in 0..3 {
        let (status, _, body) = exchange(&mut client, &get("/close"));
        assert_eq!((status, body.as_slice()), (200, &b"ok"[..]));
    }
    assert!(up.connections() >= before + 2, "closed connections are not pooled");
}

#[test]
fn a_burst_leaves_its_upstream_connections_pooled_for_the_next() {
    // 80 requests in flight at once (`/slow` holds each 3 s) need 80
    // upstream connections, about 40 on each of the 2 shards: more than
    // the 32 idle ones a shard kept before the pool's default became 256,
    // when each burst after the first opened the difference anew.
    let up = Upstream::start("one", false);
    let upstream = format!("app={}", up.url());
    let fw = FairwayProcess::start(&["--upstream", &upstream]);
    let mut clients: Vec<TcpStream> = (0..80).map(|_| fw.connect()).collect();
    let mut after_first = 0;
    for round in 0..2 {
        for c in &mut clients {
            c.write_all(get("/slow").as_bytes()).unwrap();
        }
        for c in &mut clients {
            assert_eq!(read_response(c, false).0, 200);
        }
        if round == 0 {
            after_first = up.connections();
        }
    }
    assert_eq!(after_first, 80, "one upstream connection per request in flight");
    assert_eq!((up.requests(), up.connections()), (160, 80), "the second burst opened none");
}

#[test]
fn a_pooled_connection_the_upstream_closed_is_retried_on_a_fresh_one() {
    // A raw upstream that answers one request per connection with
    // keep-alive, then closes without saying so.
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    std::thread::spawn(move || {
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            count.fetch_add(1, Ordering::SeqCst);
            let mut buf = [0u8; 4096];
            let _ = stream.read(&mut buf);
            let _ = stream.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok");
            std::thread::sleep(Duration::from_millis(50));
        }
    });
    let fw = FairwayProcess::start(&["--upstream", &format!("app=http://{addr}")]);
    let mut client = fw.connect();
    for i in 0..5 {
        let (status, _, body) = exchange(&mut client, &get("/"));
        assert_eq!((status, body.as_slice()), (200, &b"ok"[..]), "request {i}");
        std::thread::sleep(Duration::from_millis(150)); // the upstream has closed its side
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 5);
    // What a failure logs ("502 to the client: ..."), not "502" alone: the
    // log names ports, and one may hold those digits.
    assert!(!fw.log().contains("to the client"), "{}", fw.log());
}

#[test]
fn upstream_failures_are_answered_502_or_504_and_logged() {
    let up = Upstream::start("one", false);
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap(); // nobody listens now
    let dir = TempDir::new("proxy-failures");
    let config = dir.path("fairway.toml");
    let text = format!(
        "[upstream.app]\nservers = [\"{}\"]\nfirst-byte-timeout = \"1s\"\nidle-timeout = \"1s\"\n\n\
         [upstream.gone]\nservers = [\"http://{closed}\"]\n\n[[route]]\npath = \"/gone/\"\nupstream = \"gone\"\n\n[[route]]\npath = \"/metrics\"\nupstream = \"builtin\"\n\n\
         [[route]]\nupstream = \"app\"\n",
        up.url()
    );
    std::fs::write(&config, text).unwrap();
    let fw = FairwayProcess::start(&["--config", config.to_str().unwrap()]);
    let mut client = fw.connect();
    assert_eq!(exchange(&mut client, &get("/gone/x")).0, 502, "refused");
    let started = Instant::now();
    assert_eq!(exchange(&mut client, &get("/slow")).0, 504, "no first byte in time");
    assert!(started.elapsed() < Duration::from_millis(2900), "answered at the timeout, not the upstream's reply");
    assert_eq!(exchange(&mut client, &get("/hello")).0, 200, "and the connection goes on");
    let log = fw.log();
    assert!(log.contains("upstream=gone") && log.contains("502 to the client: cannot connect"), "{log}");
    assert!(log.contains("upstream=app") && log.contains("no response within first-byte-timeout"), "{log}");

    // Cut mid-response: the client sees the connection close before the
    // promised length, or without the last chunk; never a hang.
    for path in ["/cut", "/cut-chunked"] {
        let mut c = fw.connect();
        c.write_all(get(path).as_bytes()).unwrap();
        let mut got = Vec::new();
        let started = Instant::now();
        let read = c.read_to_end(&mut got);
        assert!(read.is_ok() && started.elapsed() < Duration::from_secs(5), "{path}: {read:?}");
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 200"), "{path}: {text}");
        if path == "/cut" {
            assert!(got.len() < 1_000_000, "{path}: a short body, then the close");
        } else {
            assert!(text.contains("hello") && !text.ends_with("0\r\n\r\n"), "{path}: no last chunk: {text:?}");
        }
    }
    let out = curl(&[&fw.url("/cut"), "-o", "/dev/null"]);
    assert_eq!(out.status.code(), Some(18), "curl: transfer closed with data outstanding");
    // Each shard's figures are as of its last publication (≤ 1 s).
    for (name, least) in [
        ("fairway_proxy_cut_total", 3.0),
        ("fairway_proxy_bad_gateway_total", 1.0),
        ("fairway_proxy_gateway_timeout_total", 1.0),
    ] {
        fw.wait_total(name, least);
    }
    let text = fw.scrape();
    assert_eq!(total(&text, "fairway_proxy_bad_gateway_total"), 1.0, "{text}");
    assert_eq!(total(&text, "fairway_proxy_gateway_timeout_total"), 1.0, "{text}");
}

#[test]
fn smuggling_attempts_never_reach_the_upstream() {
    let up = Upstream::start("one", false);
    let fw = FairwayProcess::start(&["--upstream", &format!("app={}", up.url())]);
    for attack in [
        "POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n0\r\n\r\nGET /hello HTTP/1.1\r\nHost: t\r\n\r\n",
        "POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 5\r\nContent-Length: 6\r\n\r\nhello!",
        "POST /upload HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: gzip, chunked, identity\r\n\r\n",
    ] {
        let mut c = fw.connect();
        c.write_all(attack.as_bytes()).unwrap();
        let mut got = Vec::new();
        let _ = c.read_to_end(&mut got);
        let text = String::from_utf8_lossy(&got);
        assert!(text.starts_with("HTTP/1.1 400"), "{attack:?} → {text}");
    }
    assert_eq!(up.requests(), 0, "nothing reached the upstream");
}

#[test]
fn a_group_spreads_requests_and_skips_servers_that_fail() {
    let (a, b) = (Upstream::start("a", false), Upstream::start("b", false));
    let fw =
        FairwayProcess::start(&["--upstream", &format!("app={}", a.url()), "--upstream", &format!("app={}", b.url())]);
    let mut client = fw.connect();
    for _ in 0..20 {
        assert_eq!(exchange(&mut client, &get("/hello")).0, 200);
    }
    assert_eq!((a.requests(), b.requests()), (10, 10), "round-robin over one client connection (one shard)");

    // Passive health: a server that refuses is skipped, and the request
    // that found it down goes to the next.
    let closed = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
    let fw = FairwayProcess::start(&[
        "--upstream",
        &format!("app=http://{closed}"),
        "--upstream",
        &format!("app={}", a.url()),
    ]);
    let mut client = fw.connect();
    let before = a.requests();
    for i in 0..10 {
        let (status, _, body) = exchange(&mut client, &get("/hello"));
        assert_eq!((status, body.as_slice()), (200, &b"a"[..]), "request {i}");
    }
    assert_eq!(a.requests() - before, 10);
    let log = fw.log();
    assert!(log.contains("trying the next server: cannot connect") && log.contains("out of turn for 10s"), "{log}");
}

#[test]
fn an_active_health_check_takes_a_sick_server_out_of_turn() {
    let (well, sick) = (Upstream::start("well", false), Upstream::start("sick", true));
    let dir = TempDir::new("proxy-health");
    let config = dir.path("fairway.toml");
    let text = format!(
        "[upstream.app]\nservers = [\"{}\", \"{}\"]\nhealth-check = \"/healthz\"\nhealth-interval = \"200ms\"\n",
        sick.url(),
        well.url()
    );
    std::fs::write(&config, text).unwrap();
    let fw = FairwayProcess::start(&["--config", config.to_str().unwrap()]);
    eventually("the sick server is found out", || fw.log().contains("health check /healthz failed: it answered 503"));
    let mut client = fw.connect();
    let before = sick.requests();
    for _ in 0..10 {
        let (status, _, body) = exchange(&mut client, &get("/hello"));
        assert_eq!((status, body.as_slice()), (200, &b"well"[..]));
    }
    let checks = sick.seen.heads.lock().unwrap().iter().skip(before).filter(|h| !h.contains("/healthz")).count();
    assert_eq!(checks, 0, "no request went to the sick server");
}

#[test]
fn python_http_server_behind_the_proxy() {
    let dir = TempDir::new("proxy-python");
    let data: Vec<u8> = (0..2_345_678u32).map(|i| (i.wrapping_mul(40_503) >> 7) as u8).collect();
    std::fs::write(dir.path("data.bin"), &data).unwrap();
    let mut python = Python::serve(&dir);
    let fw = FairwayProcess::start(&["--upstream", &format!("app=http://{}", python.addr)]);
    let out = curl(&["-f", &fw.url("/data.bin")]);
    assert!(out.status.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.stdout == data, "{} bytes back, not the {} served", out.stdout.len(), data.len());
    let out = curl(&["-s", "-o", "/dev/null", "-w", "%{http_code}", &fw.url("/missing")]);
    assert_eq!(String::from_utf8_lossy(&out.stdout), "404");
    let out = curl(&["-f", &fw.url("/")]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("data.bin"), "the directory listing");
    python.stop();
}

/// `python3 -m http.server` on a free port of 127.0.0.1, serving `dir`.
struct Python {
    child: Child,
    addr: SocketAddr,
}

impl Python {
    fn serve(dir: &TempDir) -> Python {
        let spawned = Command::new("python3")
            .args(["-u", "-m", "http.server", "0", "--bind", "127.0.0.1", "--directory"])
            .arg(dir.path(""))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn();
        let mut child = match spawned {
            Ok(child) => child,
            Err(e) if e.kind() == ErrorKind::NotFound => {
                panic!("`python3` is not installed; run the tests through `cargo xtask test`, which installs it")
            }
            Err(e) => panic!("cannot run python3: {e}"),
        };
        let mut line = String::new();
        BufReader::new(child.stdout.take().unwrap()).read_line(&mut line).unwrap();
        // "Serving HTTP on 127.0.0.1 port 40123 (http://127.0.0.1:40123/) ..."
        let port = line.split(" port ").nth(1).and_then(|r| r.split_whitespace().next()).and_then(|p| p.parse().ok());
        let port: u16 = port.unwrap_or_else(|| panic!("python3 did not say its port: {line:?}"));
        Python { child, addr: SocketAddr::from(([127, 0, 0, 1], port)) }
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Python {
    fn drop(&mut self) {
        self.stop();
    }
}

#[test]
fn https_clients_are_forwarded_as_https() {
    let up = Upstream::start("one", false);
    let dir = TempDir::new("proxy-tls");
    let (cert, key) = (dir.path("c.crt"), dir.path("c.key"));
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    let (cert, key) = (cert.to_str().unwrap(), key.to_str().unwrap());
    let upstream = format!("app={}", up.url());
    let tls = ["--tls-cert", cert, "--tls-key", key, "--tls-listen", "127.0.0.1:0", "--upstream", &upstream];
    let fw = FairwayProcess::start(&tls);
    let port = fw.tls_addr.expect("an HTTPS address").port();
    let resolve = format!("localhost:{port}:127.0.0.1");
    let out = curl(&["-f", "--cacert", cert, "--resolve", &resolve, &format!("https://localhost:{port}/echo")]);
    let sent = String::from_utf8_lossy(&out.stdout);
    assert!(sent.contains("X-Forwarded-Proto: https") && sent.contains(";proto=https"), "{sent}");
    let out = curl(&["-f", &fw.url("/echo")]);
    assert!(String::from_utf8_lossy(&out.stdout).contains("X-Forwarded-Proto: http\r\n"));
    // A 3 MB download through TLS and the proxy, byte-exact.
    let out =
        curl(&["-f", "--cacert", cert, "--resolve", &resolve, &format!("https://localhost:{port}/bytes?3000000")]);
    assert!(out.stdout == pattern(3_000_000), "{} bytes", out.stdout.len());
}
