//! End to end on the kernel backend: the real `fairway` binary on
//! 127.0.0.1 (a free port, two shards), driven by curl, a Python client,
//! wrk and plain sockets. Each test starts its own server and kills it when
//! done, also when it fails (see [`FairwayProcess`]).
//!
//! Needs `curl`, `python3` and `wrk` on the PATH; `cargo xtask test`
//! installs them.

mod support;

use std::io::{BufRead, BufReader, ErrorKind, Read, Write};
use std::net::TcpStream;
use std::path::Path;
use std::process::{Command, Output, Stdio};
use std::time::{Duration, Instant};

use fairway::http::pattern_byte;
use sha2::{Digest, Sha256};
use support::{FairwayProcess, TempDir};

// ---------------------------------------------------------------------------
// The server under test
// ---------------------------------------------------------------------------

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

fn pattern(n: u64) -> Vec<u8> {
    (0..n).map(pattern_byte).collect()
}

fn sha_hex(data: &[u8]) -> String {
    Sha256::digest(data).iter().map(|b| format!("{b:02x}")).collect()
}

/// Deterministic bytes that are not the `/bytes` pattern (xorshift).
fn noise(n: usize, seed: u64) -> Vec<u8> {
    let mut x = seed | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// Runs a tool that the test needs, with a clear failure if it is missing.
#[track_caller]
fn run(program: &str, args: &[&str]) -> Output {
    match Command::new(program).args(args).stdin(Stdio::null()).output() {
        Ok(out) => out,
        Err(e) if e.kind() == ErrorKind::NotFound => {
            panic!("`{program}` is not installed; run the tests through `cargo xtask test`, which installs it")
        }
        Err(e) => panic!("cannot run {program}: {e}"),
    }
}

/// An HTTP response as curl saw it.
#[derive(Debug)]
struct Response {
    status: u16,
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Response {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(k, _)| k.eq_ignore_ascii_case(name)).map(|(_, v)| v.as_str())
    }
}

/// `curl -sS -i ARGS`, parsed; interim (1xx) heads are skipped.
#[track_caller]
fn curl(args: &[&str]) -> Response {
    let out = run("curl", &[&["-sS", "-i", "--max-time", "30"], args].concat());
    assert!(out.status.success(), "curl {args:?} failed: {}", String::from_utf8_lossy(&out.stderr));
    let mut rest = out.stdout.as_slice();
    loop {
        let end = rest.windows(4).position(|w| w == b"\r\n\r\n").expect("a response head");
        let head = std::str::from_utf8(&rest[..end]).expect("an ASCII head");
        rest = &rest[end + 4..];
        let mut lines = head.split("\r\n");
        let status: u16 = lines.next().and_then(|l| l.split(' ').nth(1)).and_then(|s| s.parse().ok()).unwrap();
        if (100..200).contains(&status) {
            continue;
        }
        let headers =
            lines.filter_map(|l| l.split_once(':')).map(|(k, v)| (k.trim().to_owned(), v.trim().to_owned())).collect();
        return Response { status, headers, body: rest.to_vec() };
    }
}

/// Reads one response with a `Content-Length` body from a socket.
fn read_response(reader: &mut BufReader<&TcpStream>) -> std::io::Result<(u16, Vec<u8>)> {
    let mut line = String::new();
    if reader.read_line(&mut line)? == 0 {
        return Err(ErrorKind::UnexpectedEof.into());
    }
    let status = line.split(' ').nth(1).and_then(|s| s.parse().ok()).ok_or(ErrorKind::InvalidData)?;
    let mut length = 0usize;
    loop {
        line.clear();
        reader.read_line(&mut line)?;
        if line == "\r\n" || line.is_empty() {
            break;
        }
        if let Some((k, v)) = line.split_once(':')
            && k.eq_ignore_ascii_case("content-length")
        {
            length = v.trim().parse().map_err(|_| ErrorKind::InvalidData)?;
        }
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body)?;
    Ok((status, body))
}

/// Sends a GET on `stream` and reads its response.
#[track_caller]
fn get(stream: &TcpStream, path: &str) -> (u16, Vec<u8>) {
    (&*stream).write_all(format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes()).unwrap();
    read_response(&mut BufReader::new(stream)).unwrap()
}

/// Whether the server ended `stream` without answering: EOF or a reset,
/// and no byte of a response.
fn ended_unanswered(mut stream: &TcpStream) -> bool {
    let mut buf = [0u8; 64];
    match stream.read(&mut buf) {
        Ok(0) => true,
        Ok(_) => false,
        Err(e) => matches!(e.kind(), ErrorKind::ConnectionReset | ErrorKind::ConnectionAborted | ErrorKind::BrokenPipe),
    }
}

/// The value of a metric line (`name{labels} value`) summed over the
/// lines whose start is `prefix`.
fn metric(text: &str, prefix: &str) -> f64 {
    text.lines().filter(|l| l.starts_with(prefix)).filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok()).sum()
}

// ---------------------------------------------------------------------------
// Tests
// ---------------------------------------------------------------------------

#[test]
fn curl_plaintext_json_and_bytes() {
    let server = FairwayProcess::start(&[]);
    let r = curl(&[&server.url("/plaintext")]);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"Hello, World!"[..]));
    assert_eq!(r.header("Content-Type"), Some("text/plain"));
    assert_eq!(r.header("Server"), Some("fairway"));
    assert!(r.header("Date").is_some_and(|d| d.ends_with(" GMT")), "{r:?}");

    let r = curl(&[&server.url("/json")]);
    assert_eq!((r.status, r.body.as_slice()), (200, &br#"{"message":"Hello, World!"}"#[..]));
    assert_eq!(r.header("Content-Type"), Some("application/json"));

    // Larger than any buffer on the way, and not a multiple of anything.
    let n = 5_000_003;
    let r = curl(&[&server.url(&format!("/bytes/{n}"))]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Content-Length"), Some(n.to_string().as_str()));
    assert_eq!(sha_hex(&r.body), sha_hex(&pattern(n)), "the /bytes body is the pattern");

    let r = curl(&["-r", "1000-1999", &server.url("/bytes/1000000")]);
    assert_eq!(r.status, 206);
    assert_eq!(r.body, pattern(2000)[1000..]);

    let r = curl(&["-I", &server.url("/plaintext")]);
    assert_eq!((r.status, r.header("Content-Length"), r.body.len()), (200, Some("13"), 0));
}

#[test]
fn listening_on_the_ipv6_unspecified_address_serves_both_families() {
    let server = FairwayProcess::start_on("[::]:0", &[]);
    assert!(server.addr.is_ipv6(), "{}", server.addr);
    let port = server.addr.port();
    for url in [format!("http://127.0.0.1:{port}/plaintext"), format!("http://[::1]:{port}/plaintext")] {
        let r = curl(&[&url]);
        assert_eq!((r.status, r.body.as_slice()), (200, &b"Hello, World!"[..]), "{url}");
    }
    // An IPv6-only address takes IPv6 alone.
    let v6 = FairwayProcess::start_on("[::1]:0", &[]);
    let r = curl(&[&format!("http://[::1]:{}/json", v6.addr.port())]);
    assert_eq!(r.status, 200);
    assert!(std::net::TcpStream::connect(("127.0.0.1", v6.addr.port())).is_err(), "IPv4 reached [::1]");
}

/// A Python client: 16 requests on one connection, one at a time and then
/// pipelined in a single write; prints `path status length sha256` per
/// response, in the order read, then `alive` if the connection still
/// serves a request after them.
const PY_CLIENT: &str = r#"
import hashlib, socket, sys
host, port, mode, paths = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
s = socket.create_connection((host, port))
s.settimeout(20)
f = s.makefile("rb")
def request(p):
    return ("GET %s HTTP/1.1\r\nHost: test\r\n\r\n" % p).encode()
def response():
    line = f.readline()
    if not line:
        sys.exit("the connection closed before a response")
    status = int(line.split(b" ")[1])
    length = 0
    while True:
        h = f.readline()
        if h in (b"\r\n", b""):
            break
        k, v = h.split(b":", 1)
        if k.strip().lower() == b"content-length":
            length = int(v)
    body = f.read(length)
    if len(body) != length:
        sys.exit("short body: %d of %d" % (len(body), length))
    return status, body
if mode == "pipeline":
    s.sendall(b"".join(request(p) for p in paths))
    results = [response() for p in paths]
else:
    results = []
    for p in paths:
        s.sendall(request(p))
        results.append(response())
for p, (status, body) in zip(paths, results):
    print(p, status, len(body), hashlib.sha256(body).hexdigest())
s.sendall(request("/healthz"))
if response() == (200, b"ok\n"):
    print("alive")
"#;

#[test]
fn python_keep_alive_and_pipelining() {
    let server = FairwayProcess::start(&[]);
    let paths = [
        "/plaintext",
        "/json",
        "/bytes/1",
        "/bytes/100000",
        "/plaintext",
        "/no-such-path",
        "/bytes/0",
        "/json",
        "/bytes/70000",
        "/healthz",
        "/bytes/12345",
        "/plaintext",
        "/bytes/1000000",
        "/json",
        "/bytes/33",
        "/plaintext",
    ];
    assert_eq!(paths.len(), 16);
    let expected: Vec<String> = paths
        .iter()
        .map(|p| {
            let (status, body) = match *p {
                "/plaintext" => (200, b"Hello, World!".to_vec()),
                "/json" => (200, br#"{"message":"Hello, World!"}"#.to_vec()),
                "/healthz" => (200, b"ok\n".to_vec()),
                "/no-such-path" => (404, b"Not Found\n".to_vec()),
                bytes => (200, pattern(bytes["/bytes/".len()..].parse().unwrap())),
            };
            format!("{p} {status} {} {}", body.len(), sha_hex(&body))
        })
        .chain(["alive".to_owned()])
        .collect();
    let port = server.addr.port().to_string();
    for mode in ["keep-alive", "pipeline"] {
        let out = run("python3", &[&["-c", PY_CLIENT, "127.0.0.1", &port, mode], &paths[..]].concat());
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{mode}: {}\n{stdout}", String::from_utf8_lossy(&out.stderr));
        assert_eq!(stdout.lines().collect::<Vec<_>>(), expected, "{mode}: responses, in request order");
    }
}

#[test]
fn static_files_byte_exact_and_304() {
    let root = TempDir::new("static");
    let big = noise(3 * 1024 * 1024 + 17, 7);
    std::fs::write(root.0.join("big.bin"), &big).unwrap();
    std::fs::create_dir(root.0.join("docs")).unwrap();
    std::fs::write(root.0.join("docs/page.html"), b"<h1>hi</h1>\n").unwrap();
    let server = FairwayProcess::start(&["--root", root.0.to_str().unwrap()]);

    let r = curl(&[&server.url("/big.bin")]);
    assert_eq!(r.status, 200);
    assert_eq!(r.header("Content-Type"), Some("application/octet-stream"));
    assert!(r.body == big, "the 3 MB file comes back byte for byte ({} bytes)", r.body.len());
    let etag = r.header("ETag").expect("an ETag").to_owned();
    assert!(r.header("Last-Modified").is_some());

    let r = curl(&["-H", &format!("If-None-Match: {etag}"), &server.url("/big.bin")]);
    assert_eq!((r.status, r.body.len()), (304, 0));
    assert_eq!(r.header("ETag"), Some(etag.as_str()));
    let r = curl(&["-H", "If-None-Match: \"something-else\"", &server.url("/big.bin")]);
    assert_eq!((r.status, r.body.len()), (200, big.len()));

    let r = curl(&[&server.url("/docs/page.html")]);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"<h1>hi</h1>\n"[..]));
    assert_eq!(r.header("Content-Type"), Some("text/html; charset=utf-8"));

    // No way out of the root.
    let r = curl(&["--path-as-is", &server.url("/docs/../../etc/passwd")]);
    assert!(matches!(r.status, 400 | 403 | 404), "{}", r.status);
    assert_eq!(curl(&[&server.url("/missing.txt")]).status, 404);
}

#[test]
fn uploads_answer_count_and_sha256() {
    let dir = TempDir::new("upload");
    let data = noise(5 * 1024 * 1024 + 3, 11);
    let file = dir.0.join("data.bin");
    std::fs::write(&file, &data).unwrap();
    let server = FairwayProcess::start(&[]);
    let expected = format!("{} {}\n", data.len(), sha_hex(&data));
    let at_file = format!("@{}", file.display());

    let r = curl(&["--data-binary", &at_file, &server.url("/upload")]);
    assert_eq!((r.status, String::from_utf8_lossy(&r.body)), (200, expected.as_str().into()));

    let r = curl(&["-H", "Transfer-Encoding: chunked", "--data-binary", &at_file, &server.url("/upload")]);
    assert_eq!((r.status, String::from_utf8_lossy(&r.body)), (200, expected.as_str().into()), "chunked");

    let r = curl(&["--data-binary", "", &server.url("/upload")]);
    assert_eq!(String::from_utf8_lossy(&r.body), format!("0 {}\n", sha_hex(b"")));
}

#[test]
fn metrics_and_healthz() {
    let server = FairwayProcess::start(&[]);
    let r = curl(&[&server.url("/healthz")]);
    assert_eq!((r.status, r.body.as_slice()), (200, &b"ok\n"[..]));
    for _ in 0..5 {
        assert_eq!(curl(&[&server.url("/plaintext")]).status, 200);
    }
    assert_eq!(curl(&[&server.url("/nope")]).status, 404);
    let held = server.connect();
    assert_eq!(get(&held, "/plaintext").0, 200);

    let r = curl(&[&server.url("/metrics")]);
    assert_eq!(r.status, 200);
    let text = String::from_utf8(r.body).unwrap();
    assert!(text.contains("fairway_info{version=\"0.1.0\",backend=\"kernel\"} 1"), "{text}");
    // The scraping shard shows itself as of now, the other as of its last
    // publication (up to a second ago): only the families are certain yet
    // (not a 200's line: every earlier connection may have gone to the
    // other shard, one time in 2^7).
    assert!(text.contains("fairway_http_requests_total "), "{text}");
    assert!(text.contains("fairway_http_responses_total counter"), "{text}");
    assert!(text.contains("fairway_active_connections{shard=\"0\"}"), "{text}");
    assert!(text.contains("fairway_active_connections{shard=\"1\"}"), "{text}");
    assert!(text.contains("fairway_refused_connections_total{shard=\"1\"}"), "{text}");
    assert!(text.contains("fairway_http_request_duration_seconds_count"), "{text}");

    // After a publication interval every shard's counts are in.
    std::thread::sleep(Duration::from_millis(1200));
    let text = String::from_utf8(curl(&[&server.url("/metrics")]).body).unwrap();
    // healthz, 5 plaintext, the 404, the held one's, the first scrape (this
    // scrape is counted once it is answered).
    assert_eq!(metric(&text, "fairway_http_requests_total"), 9.0, "{text}");
    assert_eq!(metric(&text, "fairway_http_responses_total{code=\"200\"}"), 8.0, "{text}");
    assert_eq!(metric(&text, "fairway_http_responses_total{code=\"404\"}"), 1.0, "{text}");
    assert_eq!(metric(&text, "fairway_refused_connections_total"), 0.0, "{text}");
    // The held connection and the scrape's own.
    assert_eq!(metric(&text, "fairway_active_connections"), 2.0, "{text}");
}

#[test]
fn wrk_short_run() {
    let server = FairwayProcess::start(&[]);
    let url = server.url("/plaintext");
    let out = run("wrk", &["-t1", "-c16", "-d2s", "--timeout", "2s", &url]);
    let report = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "wrk failed: {}\n{report}", String::from_utf8_lossy(&out.stderr));
    assert!(!report.contains("Non-2xx"), "{report}");
    assert!(!report.contains("Socket errors"), "{report}");
    let rate: f64 = report
        .lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Requests/sec in {report}"));
    assert!(rate > 1000.0, "{rate} req/s is far too slow:\n{report}");
}

#[test]
fn the_connection_limit_refuses_the_fifth() {
    let server = FairwayProcess::start(&["--max-connections", "4"]);
    let held: Vec<TcpStream> = (0..4).map(|_| server.connect()).collect();
    for stream in &held {
        assert_eq!(get(stream, "/plaintext").0, 200, "each of the first four is served");
    }
    let fifth = server.connect();
    let _ = (&fifth).write_all(b"GET /plaintext HTTP/1.1\r\nHost: test\r\n\r\n");
    assert!(ended_unanswered(&fifth), "the fifth is closed without an answer");

    // A place frees up when one of the four goes; the other three stay.
    let mut held = held;
    drop(held.remove(0));
    let deadline = Instant::now() + Duration::from_secs(5);
    let fourth = loop {
        let s = server.connect();
        match get_or_refused(&s, "/plaintext") {
            Some(200) => break s,
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(50)),
            other => panic!("no place freed up: {other:?}"),
        }
    };
    // The refusal is counted (the refusing shard publishes within a second).
    // Asked on the fourth connection: a fifth would be refused.
    let deadline = Instant::now() + Duration::from_secs(3);
    loop {
        let (status, body) = get(&fourth, "/metrics");
        let text = String::from_utf8(body).unwrap();
        if status == 200 && metric(&text, "fairway_refused_connections_total") >= 1.0 {
            break;
        }
        assert!(Instant::now() < deadline, "no refusal counted:\n{text}");
        std::thread::sleep(Duration::from_millis(100));
    }
    assert_eq!(held.len(), 3);
}

/// Like [`get`], but `None` when the server ends the connection unanswered.
fn get_or_refused(stream: &TcpStream, path: &str) -> Option<u16> {
    let _ = (&*stream).write_all(format!("GET {path} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes());
    read_response(&mut BufReader::new(stream)).ok().map(|(status, _)| status)
}

/// A connection closed with unread input makes the kernel send a reset,
/// which can destroy the response before the peer reads it. The server
/// lingers instead: this response arrives whole and then a clean EOF.
#[test]
fn a_closing_connection_delivers_its_response_despite_unread_input() {
    let server = FairwayProcess::start(&["--max-body", "1MiB"]);

    // `Connection: close`, followed in the same write by far more than the
    // server reads ahead (its input buffer is 16 KiB).
    let stream = server.connect();
    let mut burst = b"GET /bytes/300000 HTTP/1.1\r\nHost: test\r\nConnection: close\r\n\r\n".to_vec();
    burst.extend(std::iter::repeat_n(b'x', 512 * 1024));
    let writer = {
        let stream = stream.try_clone().unwrap();
        // Ends when the server stops reading and closes.
        std::thread::spawn(move || (&stream).write_all(&burst).is_ok())
    };
    std::thread::sleep(Duration::from_millis(200)); // the client is slow to read
    let (status, body) = read_response(&mut BufReader::new(&stream)).expect("the response, whole");
    assert_eq!((status, body.len()), (200, 300_000));
    assert!(body == pattern(300_000));
    let mut rest = Vec::new();
    (&stream).read_to_end(&mut rest).expect("a clean EOF, not a reset");
    assert!(rest.is_empty());
    assert!(writer.join().unwrap(), "the server read and dropped the rest of the input");

    // A body over --max-body: 413 at once, while the client is still sending.
    let stream = server.connect();
    (&stream).write_all(b"POST /upload HTTP/1.1\r\nHost: test\r\nContent-Length: 10000000\r\n\r\n").unwrap();
    let writer = {
        let stream = stream.try_clone().unwrap();
        std::thread::spawn(move || {
            let chunk = [b'y'; 64 * 1024];
            for _ in 0..16 {
                if (&stream).write_all(&chunk).is_err() {
                    break;
                }
            }
        })
    };
    let mut all = Vec::new();
    (&stream).read_to_end(&mut all).expect("a clean EOF after the 413");
    let text = String::from_utf8_lossy(&all);
    assert!(text.starts_with("HTTP/1.1 413 "), "{text}");
    assert!(text.contains("Connection: close"), "{text}");
    writer.join().unwrap();
}

#[test]
fn slowloris_gets_408() {
    let server = FairwayProcess::start(&["--header-timeout", "1s"]);
    let stream = server.connect();
    let start = Instant::now();
    (&stream).write_all(b"GET /plaintext HTTP/1.1\r\nHost: test\r\n").unwrap();
    // Trickling more of the head does not extend its time.
    for _ in 0..3 {
        std::thread::sleep(Duration::from_millis(200));
        (&stream).write_all(b"X-Slow: 1\r\n").unwrap();
    }
    let mut all = Vec::new();
    (&stream).read_to_end(&mut all).expect("the server closes after its answer");
    let elapsed = start.elapsed();
    let text = String::from_utf8_lossy(&all);
    assert!(text.starts_with("HTTP/1.1 408 "), "{text}");
    assert!(text.contains("Connection: close"), "{text}");
    assert!(elapsed >= Duration::from_millis(900) && elapsed < Duration::from_secs(4), "{elapsed:?}");
}

#[test]
fn graceful_shutdown_lets_a_download_finish() {
    let mut server = FairwayProcess::start(&["--shutdown-grace", "10s"]);
    let idle = server.connect();
    assert_eq!(get(&idle, "/plaintext").0, 200);

    let n: usize = 64 << 20;
    let download = server.connect();
    (&download).write_all(format!("GET /bytes/{n} HTTP/1.1\r\nHost: test\r\n\r\n").as_bytes()).unwrap();
    let mut reader = BufReader::with_capacity(1 << 16, &download);
    let mut head = Vec::new();
    while !head.ends_with(b"\r\n\r\n") {
        let mut byte = [0u8];
        reader.read_exact(&mut byte).unwrap();
        head.push(byte[0]);
    }
    assert!(head.starts_with(b"HTTP/1.1 200 "), "{}", String::from_utf8_lossy(&head));
    let mut body = vec![0u8; n];
    reader.read_exact(&mut body[..1 << 20]).unwrap();

    // The download is in flight (the client reads no more for now).
    let signalled = Instant::now();
    server.terminate();

    // The idle keep-alive connection is closed at once.
    assert!(ended_unanswered(&idle), "the idle connection is closed");
    // New connections are refused once every shard has stopped accepting.
    let deadline = signalled + Duration::from_secs(3);
    loop {
        match TcpStream::connect(server.addr) {
            Err(e) if e.kind() == ErrorKind::ConnectionRefused => break,
            other => {
                assert!(Instant::now() < deadline, "still accepting after SIGTERM: {other:?}");
                std::thread::sleep(Duration::from_millis(20));
            }
        }
    }
    assert!(server.is_running(), "exited with a download in flight:\n{}", server.log());

    // The rest of the download arrives, whole and right.
    std::thread::sleep(Duration::from_millis(300));
    reader.read_exact(&mut body[1 << 20..]).expect("the download completes after SIGTERM");
    assert!(sha_hex(&body) == sha_hex(&pattern(n as u64)), "the download's bytes are the pattern");
    let mut rest = Vec::new();
    reader.read_to_end(&mut rest).expect("the server closes the connection after the response");
    assert!(rest.is_empty(), "nothing after the response");
    drop(reader);
    drop(download);
    let done = Instant::now();

    let status =
        server.wait_exit(Duration::from_secs(10)).unwrap_or_else(|| panic!("still running:\n{}", server.log()));
    assert!(status.success(), "exit status {status:?}:\n{}", server.log());
    assert!(signalled.elapsed() < Duration::from_secs(10), "within the grace period");
    // Once nothing is in flight it returns, without waiting out the grace.
    assert!(done.elapsed() < Duration::from_secs(2), "{:?} after the last connection", done.elapsed());
}

#[test]
fn a_busy_port_is_one_clear_line_and_a_failure() {
    let server = FairwayProcess::start(&[]);
    let out = Command::new(env!("CARGO_BIN_EXE_fairway"))
        .args(["--listen", &server.addr.to_string(), "--shards", "2", "--log", "warn"])
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(stderr.trim_end().lines().count(), 1, "{stderr}");
    assert!(stderr.contains(&format!("cannot listen on {}", server.addr)), "{stderr}");
    assert!(stderr.contains("Address already in use"), "{stderr}");
    // The running server was not joined nor disturbed.
    assert_eq!(curl(&[&server.url("/plaintext")]).status, 200);
}

#[test]
fn a_missing_root_is_refused_before_serving() {
    let dir = TempDir::new("no-root");
    let missing: &Path = &dir.0.join("missing");
    let out = Command::new(env!("CARGO_BIN_EXE_fairway"))
        .args(["--listen", "127.0.0.1:0", "--root", missing.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", String::from_utf8_lossy(&out.stderr));
    assert!(String::from_utf8_lossy(&out.stderr).contains("not a directory"));
}
