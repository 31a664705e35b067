//! The platform against real clients: a user's `Handler` application
//! ([`test_app`](crate::apps::handler_app::test_app)) and the axum example,
//! served on any backend, checked by Python and curl from a [`Target`]:
//! this machine's loopback (the kernel backend, no root needed) or a
//! testbed client namespace (AF_XDP, TAP).
//!
//! Every check runs the client to completion within a bound and returns
//! what it saw, or why it failed, in one line.

use std::net::SocketAddr;
use std::time::Duration;

use fairway::ServerHandle;

use crate::real_peers::pattern_sha256;
use crate::testbed::{self, ExecOutput, Testbed};

/// Where the clients run, and the server they talk to.
#[derive(Clone, Debug)]
pub struct Target {
    ns: Option<String>,
    host: String,
    port: u16,
}

impl Target {
    /// Clients on this machine, for a server at `addr`.
    #[must_use]
    pub fn local(addr: SocketAddr) -> Target {
        Target { ns: None, host: addr.ip().to_string(), port: addr.port() }
    }

    /// Clients in `tb`'s client namespace `client`, for the server on port
    /// 80 of the testbed's server address.
    #[must_use]
    pub fn testbed(tb: &Testbed, client: usize) -> Target {
        Target::testbed_port(tb, client, 80)
    }

    /// The same, for the server's `port` (443, say).
    #[must_use]
    pub fn testbed_port(tb: &Testbed, client: usize, port: u16) -> Target {
        Target { ns: Some(tb.client_ns(client)), host: tb.server_ip().to_string(), port }
    }

    /// `http://host:port{path}`.
    #[must_use]
    pub fn url(&self, path: &str) -> String {
        format!("http://{}:{}{path}", self.host, self.port)
    }

    /// Runs `cmd` where the clients run, for at most `timeout`.
    ///
    /// # Panics
    ///
    /// When it cannot be started or does not end in time.
    #[must_use]
    pub fn run(&self, cmd: &[&str], timeout: Duration) -> ExecOutput {
        let spawned = match &self.ns {
            Some(ns) => testbed::spawn(ns, cmd),
            None => testbed::spawn_here(cmd),
        };
        spawned.and_then(|s| s.wait_timeout(timeout)).unwrap_or_else(|e| panic!("{}: {e}", cmd.join(" ")))
    }

    /// Runs a Python `script` with the server's host and port first among
    /// its arguments; its standard output, or why it failed.
    ///
    /// # Errors
    ///
    /// The script exited with an error: its standard error.
    pub fn python(&self, script: &str, args: &[&str], timeout: Duration) -> Result<String, String> {
        let port = self.port.to_string();
        let mut cmd = vec!["python3", "-c", script, &self.host, &port];
        cmd.extend_from_slice(args);
        let out = self.run(&cmd, timeout);
        if out.success() { Ok(out.stdout_text()) } else { Err(format!("{}{}", out.stdout_text(), out.stderr_text())) }
    }
}

/// The Python helpers every check script starts with: one request on a
/// socket, its response parsed (Content-Length, chunked, or to the close).
const PRELUDE: &str = r#"
import hashlib, socket, sys, time
HOST, PORT = sys.argv[1], int(sys.argv[2])
ARGS = sys.argv[3:]

def connect(timeout=30):
    return socket.create_connection((HOST, PORT), timeout=timeout)

class Reader:
    def __init__(self, s):
        self.s, self.buf = s, b""
    def more(self):
        chunk = self.s.recv(1 << 20)
        if not chunk:
            raise EOFError("closed by the server")
        self.buf += chunk
    def line(self):
        while b"\r\n" not in self.buf:
            self.more()
        line, _, self.buf = self.buf.partition(b"\r\n")
        return line
    def take(self, n):
        while len(self.buf) < n:
            self.more()
        data, self.buf = self.buf[:n], self.buf[n:]
        return data
    def response(self, head_only=False):
        status = int(self.line().split(b" ")[1])
        headers = {}
        while True:
            line = self.line()
            if not line:
                break
            name, _, value = line.partition(b":")
            headers[name.strip().lower().decode()] = value.strip().decode()
        if head_only or status in (204, 304):
            return status, headers, b""
        if "content-length" in headers:
            return status, headers, self.take(int(headers["content-length"]))
        if headers.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                size = int(self.line().split(b";")[0], 16)
                if size == 0:
                    while self.line():
                        pass
                    return status, headers, body
                body += self.take(size)
                self.take(2)
        body = self.buf
        try:
            while True:
                self.more()
        except EOFError:
            pass
        return status, headers, self.buf

def request(method, path, body=b"", headers=(), timeout=30):
    s = connect(timeout)
    head = f"{method} {path} HTTP/1.1\r\nHost: fairway\r\nConnection: close\r\n"
    for h in headers:
        head += h + "\r\n"
    if body:
        head += f"Content-Length: {len(body)}\r\n"
    s.sendall(head.encode() + b"\r\n" + body)
    r = Reader(s).response(method == "HEAD")
    s.close()
    return r

def pattern(n):
    return bytes(i % 251 for i in range(n))

def until_close(s):
    """Everything the server sends until it closes (or resets) the connection."""
    got = b""
    try:
        while True:
            chunk = s.recv(4096)
            if not chunk:
                break
            got += chunk
    except ConnectionResetError:
        pass
    return got

def expect(what, got, want):
    if got != want:
        sys.exit(f"{what}: got {got!r}, want {want!r}")
"#;

/// Runs the prelude and `body`.
pub(crate) fn python(target: &Target, body: &str, args: &[&str], timeout: Duration) -> Result<String, String> {
    target.python(&format!("{PRELUDE}\n{body}"), args, timeout)
}

/// The user application's routes from `target`: streams both ways (a
/// chunked download, a body the handler holds back), a gathered body and
/// its limit, deferred answers (on the connection's timer, and woken from
/// another thread), the response timeout, a pipeline through all of them
/// in order, a handler's panic (500, and the server goes on), and the
/// limits as for every other answer (431, 404, 405). Returns how many
/// requests it made.
///
/// # Panics
///
/// On any wrong answer.
pub fn check_handler_app(target: &Target, response_timeout: Duration) -> u64 {
    const CHECKS: &str = r#"
import hashlib
timeout_s = float(ARGS[0])
n = 0
st, h, b = request("GET", "/plaintext"); expect("plaintext", (st, b), (200, b"Hello, World!")); n += 1
st, h, b = request("GET", "/stream?n=3000000")
expect("stream", (st, h.get("transfer-encoding"), len(b)), (200, "chunked", 3000000))
expect("stream bytes", hashlib.sha256(b).hexdigest(), hashlib.sha256(pattern(3000000)).hexdigest()); n += 1
body = bytes((i * 7) % 256 for i in range(5000000))
st, h, b = request("POST", "/sink", body)
expect("sink", (st, b.decode()), (200, f"5000000 {hashlib.sha256(body).hexdigest()}\n")); n += 1
# The same, chunked, in pieces of odd sizes.
s = connect(); s.sendall(b"POST /sink HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n")
sent = b""
for size in (1, 1000, 70000, 333, 200000):
    piece = bytes((i * 13) % 256 for i in range(size)); sent += piece
    s.sendall(f"{size:x}\r\n".encode() + piece + b"\r\n")
s.sendall(b"0\r\n\r\n")
st, h, b = Reader(s).response(); s.close()
expect("chunked sink", (st, b.decode()), (200, f"{len(sent)} {hashlib.sha256(sent).hexdigest()}\n")); n += 1
body = bytes(range(256)) * 40
st, h, b = request("POST", "/echo", body); expect("echo", (st, b), (200, body)); n += 1
st, h, b = request("POST", "/echo", b"x" * 70000); expect("echo over its limit", st, 413); n += 1
# Declared over the limit with Expect: 100-continue: 413 at once, no 100
# inviting the body (RFC 9110 s10.1.1), and the connection closes.
s = connect(); s.sendall(b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5000000\r\nExpect: 100-continue\r\n\r\n")
s.settimeout(5); first = until_close(s)
expect("413 before any 100", first[:13], b"HTTP/1.1 413 "); n += 1
t = time.monotonic(); st, h, b = request("GET", "/later?ms=200"); took = time.monotonic() - t
expect("later", (st, b), (200, b"waited 200 ms\n"))
if not 0.19 <= took < 5: sys.exit(f"a 200 ms deferred answer took {took:.3f} s")
n += 1
st, h, b = request("GET", "/woken?ms=100"); expect("woken from another thread", (st, b), (200, b"woken\n")); n += 1
t = time.monotonic(); st, h, b = request("GET", "/never"); took = time.monotonic() - t
expect("never", (st, h.get("connection")), (503, "close"))
if not timeout_s * 0.9 <= took < timeout_s + 5: sys.exit(f"the response timeout of {timeout_s} s came after {took:.3f} s")
n += 1
# A pipeline: the deferred answer holds the others back, all in order.
s = connect()
s.sendall(b"GET /later?ms=50 HTTP/1.1\r\nHost: x\r\n\r\nGET /plaintext HTTP/1.1\r\nHost: x\r\n\r\n"
          b"GET /stream?n=1000 HTTP/1.1\r\nHost: x\r\n\r\nPOST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 5\r\n\r\nhello"
          b"GET /json HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
r = Reader(s)
got = [r.response() for _ in range(5)]
s.close()
expect("pipeline", [(st, b) for st, h, b in got], [(200, b"waited 50 ms\n"), (200, b"Hello, World!"), (200, pattern(1000)),
       (200, b"hello"), (200, b'{"message":"Hello, World!"}')])
n += 5
st, h, b = request("GET", "/panic"); expect("a handler's panic", (st, h.get("connection")), (500, "close")); n += 1
st, h, b = request("GET", "/plaintext"); expect("after the panic", st, 200); n += 1
st, h, b = request("GET", "/", headers=["X-Big: " + "a" * 20000]); expect("an oversized head", st, 431); n += 1
st, h, b = request("GET", "/nope"); expect("no such route", st, 404); n += 1
st, h, b = request("DELETE", "/plaintext"); expect("another method", (st, h.get("allow")), (405, "GET, HEAD")); n += 1
print(n)
"#;
    let secs = response_timeout.as_secs_f64().to_string();
    let out =
        python(target, CHECKS, &[&secs], Duration::from_secs(120)).unwrap_or_else(|e| panic!("the handler app: {e}"));
    out.trim().parse().unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The axum example's routes from `target`: a path parameter, JSON in and
/// out (and a refused order), the shared state, a streamed body timed by
/// the shard's clock. Returns how many requests it made.
///
/// # Panics
///
/// On any wrong answer.
pub fn check_axum_example(target: &Target) -> u64 {
    const CHECKS: &str = r#"
import json
st, h, b = request("GET", "/hello/fairway"); expect("hello", (st, b.startswith(b"Hello, fairway! (greeting ")), (200, True))
st, h, b = request("POST", "/orders", json.dumps({"item": "tea", "quantity": 3}).encode(), ["Content-Type: application/json"])
r = json.loads(b); expect("order", (st, r["item"], r["quantity"], r["total_cents"]), (201, "tea", 3, 750))
st, h, b = request("POST", "/orders", b'{"item":"","quantity":0}', ["Content-Type: application/json"]); expect("a bad order", st, 422)
st, h, b = request("POST", "/orders", b"not json", ["Content-Type: application/json"]); expect("not JSON", st // 100, 4)
st, h, b = request("GET", "/stats"); s = json.loads(b)
if st != 200 or s["orders"] < 1 or s["greetings"] < 1: sys.exit(f"stats {st} {s}")
t = time.monotonic(); st, h, b = request("GET", "/countdown/3"); took = time.monotonic() - t
expect("countdown", (st, h.get("transfer-encoding"), b), (200, "chunked", b"3...\n2...\n1... liftoff!\n"))
if not 0.29 <= took < 5: sys.exit(f"three 100 ms steps took {took:.3f} s")
st, h, b = request("GET", "/plaintext"); expect("plaintext", (st, b), (200, b"Hello, World!"))
st, h, b = request("GET", "/nope"); expect("no such route", st, 404)
print(8)
"#;
    let out = python(target, CHECKS, &[], Duration::from_secs(60)).unwrap_or_else(|e| panic!("the axum example: {e}"));
    out.trim().parse().unwrap_or_else(|e| panic!("{e}: {out}"))
}

/// The axum_tower example (server/examples/axum_tower.rs) from `target`:
/// tower-http's middleware (a 408 from `TimeoutLayer` after two seconds, a 500
/// from `CatchPanicLayer`, CORS headers, gzip on request) and handlers on
/// tokio: timers (`sleep`, `interval`), `tokio::spawn`, `spawn_local`,
/// `spawn_blocking`, a `tokio::net` client of the echo service, and tokio's
/// mutex across requests. A panic in a route without the middleware costs
/// its connection and nothing else.
///
/// # Panics
///
/// On any wrong answer.
pub fn check_axum_tower(target: &Target) {
    const CHECKS: &str = r#"
import gzip
t = time.monotonic(); st, h, b = request("GET", "/sleep/120"); took = time.monotonic() - t
expect("sleep", (st, b.startswith(b"slept 12")), (200, True))
if not 0.119 <= took < 5: sys.exit(f"a 120 ms sleep took {took:.3f} s")
t = time.monotonic(); st, h, b = request("GET", "/too-slow"); took = time.monotonic() - t
expect("TimeoutLayer", st, 408)
if not 1.99 <= took < 3.9: sys.exit(f"the 2 s timeout answered after {took:.3f} s")
st, h, b = request("GET", "/spawned"); expect("tokio::spawn", (st, b), (200, b"10! = 3628800\n"))
st, h, b = request("GET", "/local"); expect("spawn_local", (st, b), (200, b"from a local task (1 refs)\n"))
squares = sum(x * x for x in range(2000000)) % 2**64
st, h, b = request("GET", "/blocking"); expect("spawn_blocking", (st, b), (200, b"sum of squares below 2000000: %d\n" % squares))
t = time.monotonic(); st, h, b = request("GET", "/ticks/4"); took = time.monotonic() - t
expect("interval", (st, h.get("transfer-encoding"), b), (200, "chunked", b"tick 1\ntick 2\ntick 3\ntick 4\n"))
if not 0.029 <= took < 5: sys.exit(f"four ticks 10 ms apart took {took:.3f} s")
st, h, b = request("GET", "/upstream"); expect("tokio::net", (st, b), (200, b"upstream said: ping from a handler\n"))
first = int(request("GET", "/count")[2]); second = int(request("GET", "/count")[2])
expect("tokio::sync::Mutex", second, first + 1)
st, h, b = request("GET", "/panic"); expect("CatchPanicLayer", st, 500)
st, h, b = request("OPTIONS", "/count", headers=["Origin: https://example.org", "Access-Control-Request-Method: GET"])
expect("CORS preflight", (st, h.get("access-control-allow-origin")), (200, "*"))
st, h, b = request("GET", "/big", headers=["Accept-Encoding: gzip"])
text = b"all work and no play makes a dull server\n" * 1600
expect("gzip", (st, h.get("content-encoding"), gzip.decompress(b)), (200, "gzip", text))
st, h, b = request("GET", "/big"); expect("identity", (st, h.get("content-encoding"), b), (200, None, text))
# A panic with no middleware to catch it: that connection ends unanswered,
# and the next one is served.
s = connect(); s.sendall(b"GET /panic-raw HTTP/1.1\r\nHost: fairway\r\n\r\n"); got = until_close(s)
expect("an uncaught panic", got, b"")
st, h, b = request("GET", "/healthz"); expect("after the panic", (st, b), (200, b"ok\n"))
print("checked")
"#;
    let out = python(target, CHECKS, &[], Duration::from_secs(60)).unwrap_or_else(|e| panic!("axum_tower: {e}"));
    assert_eq!(out.trim(), "checked", "axum_tower: the script ended early");
}

/// A request for `path` in flight (Python, one connection) while the test
/// stops the server: its output says `200` and the body once answered.
#[must_use]
pub fn request_in_flight(target: &Target, path: &str) -> testbed::Spawned {
    const SLOW: &str = r#"
st, h, b = request("GET", ARGS[0], timeout=60)
print(st, b.decode().strip(), flush=True)
"#;
    spawn_python(target, SLOW, &[path])
}

/// Starts the prelude and `body` in the background, unbuffered.
fn spawn_python(target: &Target, body: &str, args: &[&str]) -> testbed::Spawned {
    let script = format!("{PRELUDE}\n{body}");
    let port = target.port.to_string();
    let mut cmd = vec!["python3", "-u", "-c", &script, &target.host, &port];
    cmd.extend_from_slice(args);
    match &target.ns {
        Some(ns) => testbed::spawn(ns, &cmd),
        None => testbed::spawn_here(&cmd),
    }
    .unwrap_or_else(|e| panic!("{e}"))
}

/// `connections` keep-alive connections at once (Python asyncio), each
/// making requests for `path` one after another until `total` have been
/// answered in all, every answer checked against `body`. Returns how many
/// were answered, or why the client failed (a stall shows as its timeout).
///
/// # Errors
///
/// The client failed or timed out.
pub fn keep_alive_load(
    target: &Target,
    connections: usize,
    total: usize,
    path: &str,
    body: &[u8],
    timeout: Duration,
) -> Result<u64, String> {
    const LOAD: &str = r#"
import asyncio, sys
host, port, conns, total, path, want, limit = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4]), sys.argv[5], sys.argv[6].encode(), float(sys.argv[7])
done = 0
async def one(share):
    global done
    r, w = await asyncio.open_connection(host, port)
    req = f"GET {path} HTTP/1.1\r\nHost: fairway\r\n\r\n".encode()
    for _ in range(share):
        w.write(req)
        head = await r.readuntil(b"\r\n\r\n")
        status = head.split(b" ", 2)[1]
        length = next(int(l.split(b":")[1]) for l in head.split(b"\r\n") if l.lower().startswith(b"content-length:"))
        body = await r.readexactly(length)
        if status != b"200" or body != want:
            raise SystemExit(f"response {done}: {status} {body[:60]!r}")
        done += 1
    w.close()
async def main():
    shares = [total // conns + (1 if i < total % conns else 0) for i in range(conns)]
    await asyncio.wait_for(asyncio.gather(*(one(s) for s in shares)), limit)
try:
    asyncio.run(main())
except asyncio.TimeoutError:
    sys.exit(f"stalled: {done} of {total} answered in {limit} s")
print(done)
"#;
    let body = std::str::from_utf8(body).map_err(|e| e.to_string())?;
    let (conns, total, limit) = (connections.to_string(), total.to_string(), timeout.as_secs_f64().to_string());
    let out = target.python(LOAD, &[&conns, &total, path, body, &limit], timeout + Duration::from_secs(10))?;
    out.trim().parse().map_err(|e| format!("{e}: {out}"))
}

/// Sends the start of a request head and waits: how long until the server
/// closes the connection (its header timeout), and what it said.
///
/// # Panics
///
/// When the client fails, or the server never closes within `wait`.
#[must_use]
pub fn header_timeout(target: &Target, wait: Duration) -> (Duration, String) {
    const SLOW: &str = r#"
s = connect(float(ARGS[0]))
s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: fair")
t = time.monotonic()
got = until_close(s)
print(f"{time.monotonic() - t:.3f} {got[:12].decode(errors='replace')!r}")
"#;
    let secs = wait.as_secs_f64().to_string();
    let out = python(target, SLOW, &[&secs], wait + Duration::from_secs(10)).unwrap_or_else(|e| panic!("{e}"));
    let (took, said) = out.trim().split_once(' ').unwrap_or_else(|| panic!("{out}"));
    (Duration::from_secs_f64(took.parse().unwrap()), said.to_owned())
}

/// Starts a request for `path`, reads the first bytes of its answer, then
/// resets the connection (a zero linger time). Returns what it read.
///
/// # Panics
///
/// When the client fails.
#[must_use]
pub fn reset_mid_response(target: &Target, path: &str) -> String {
    const RESET: &str = r#"
import struct
s = connect()
s.sendall(f"GET {ARGS[0]} HTTP/1.1\r\nHost: fairway\r\n\r\n".encode())
got = s.recv(256)
s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
s.close()
print(got[:12].decode(errors="replace"))
"#;
    python(target, RESET, &[path], Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}")).trim().to_owned()
}

/// A streamed answer in flight while the server is stopped: starts
/// `/countdown/N` and returns the client, which prints the body it got and
/// how long it took once the answer ends.
///
/// # Panics
///
/// When it cannot be started.
#[must_use]
pub fn countdown_in_flight(target: &Target, from: u32) -> testbed::Spawned {
    const COUNTDOWN: &str = r#"
t = time.monotonic()
st, h, b = request("GET", f"/countdown/{ARGS[0]}")
print(st, repr(b), f"{time.monotonic() - t:.3f}", flush=True)
"#;
    spawn_python(target, COUNTDOWN, &[&from.to_string()])
}

/// `/bytes/N` by curl, its SHA-256 checked: a foreign client on the same
/// server. Returns the requests made.
///
/// # Panics
///
/// When curl fails or the bytes differ.
pub fn check_curl_bytes(target: &Target, sizes: &[u64]) -> u64 {
    for &size in sizes {
        let url = target.url(&format!("/bytes/{size}"));
        let out = target.run(
            &["bash", "-o", "pipefail", "-c", &format!("curl -sS -f --max-time 60 '{url}' | sha256sum")],
            Duration::from_secs(70),
        );
        assert!(out.success(), "curl {url}: {}", out.stderr_text());
        let sha = out.stdout_text().split_whitespace().next().map(str::to_owned);
        assert_eq!(sha, Some(pattern_sha256(size)), "{url}");
    }
    sizes.len() as u64
}

/// The sum over shards of the per-shard metric `name`, as a scrape of
/// `server` would show it.
///
/// # Panics
///
/// When the server has ended.
#[must_use]
pub fn gauge(server: &ServerHandle, name: &str) -> u64 {
    let mut text = Vec::new();
    server.metrics().expect("running").render(&mut text);
    metric_samples(&String::from_utf8(text).unwrap(), name).iter().map(|(_, v)| *v as u64).sum()
}

/// The samples of metric `name` in Prometheus text `text`: each one's
/// labels as written (`shard="0",reason="x"`, empty without labels) and
/// its value. Comments and other metrics (`name_total` for `name`) are
/// left out.
#[must_use]
pub fn metric_samples(text: &str, name: &str) -> Vec<(String, f64)> {
    text.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| {
            let rest = l.strip_prefix(name)?;
            let (labels, value) = match rest.strip_prefix('{') {
                Some(rest) => rest.split_once("} ")?,
                None => ("", rest.strip_prefix(' ')?),
            };
            Some((labels.to_owned(), value.trim().parse().ok()?))
        })
        .collect()
}

/// Waits (at most 10 s) until [`gauge`] shows `want` for `name`: shards
/// publish once a second.
///
/// # Panics
///
/// When it does not.
#[track_caller]
pub fn wait_for_gauge(server: &ServerHandle, name: &str, want: u64) {
    let started = std::time::Instant::now();
    while gauge(server, name) != want {
        assert!(started.elapsed() < Duration::from_secs(10), "{name} stays at {}, not {want}", gauge(server, name));
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Sends bytes that are no HTTP at all on one connection and prints what
/// came back (the server's 400, or nothing before its close).
///
/// # Panics
///
/// When the client fails.
#[must_use]
pub fn garbage(target: &Target) -> String {
    const GARBAGE: &str = r#"
s = connect()
s.sendall(bytes(range(256)) * 40)
got = until_close(s)
print(got[:12].decode(errors="replace"))
"#;
    python(target, GARBAGE, &[], Duration::from_secs(30)).unwrap_or_else(|e| panic!("{e}")).trim().to_owned()
}

/// The edges foreign clients found (issue 12), against a server started
/// with `--body-timeout 1s` and the default head limits: a 17 KB and a
/// 100 KB header line each get their 431 before the connection ends (no
/// bare reset), a 10 KB request line its 414; `HTTP/1.2` is answered as
/// 1.1, `HTTP/2.0` gets 505, a lower-case method 501; a body trickling
/// in at a byte every 250 ms gets 408 about a second after it began.
/// Returns how many responses the server sent.
///
/// # Panics
///
/// On any wrong answer.
pub fn check_edges(target: &Target) -> u64 {
    const EDGES: &str = r#"
def ask(raw):
    s = connect()
    s.sendall(raw)
    return until_close(s)[:13].decode(errors="replace")

def line(n):
    return b"GET /plaintext HTTP/1.1\r\nHost: fairway\r\nX-Big: " + b"a" * n + b"\r\n\r\n"

print("17k", ask(line(17_000)))
print("100k", ask(line(100_000)))
print("uri", ask(b"GET /" + b"a" * 10_000 + b" HTTP/1.1\r\nHost: fairway\r\n\r\n"))
print("1.2", ask(b"GET /plaintext HTTP/1.2\r\nHost: fairway\r\nConnection: close\r\n\r\n"))
print("2.0", ask(b"GET /plaintext HTTP/2.0\r\nHost: fairway\r\n\r\n"))
print("get", ask(b"get /plaintext HTTP/1.1\r\nHost: fairway\r\nConnection: close\r\n\r\n"))

s = connect()
s.sendall(b"POST /upload HTTP/1.1\r\nHost: fairway\r\nContent-Length: 1000\r\n\r\n")
t = time.monotonic()
s.settimeout(0.25)
got = b""
while not got and time.monotonic() - t < 20:
    try:
        s.sendall(b"a")
        got = s.recv(4096)
    except socket.timeout:
        pass
took = time.monotonic() - t
s.settimeout(10)
print("slow", f"{took:.3f}", (got + until_close(s))[:13].decode(errors="replace"))
"#;
    let out = python(target, EDGES, &[], Duration::from_secs(90)).unwrap_or_else(|e| panic!("{e}"));
    let said: Vec<(&str, &str)> = out.lines().filter_map(|l| l.split_once(' ')).collect();
    let status = |case: &str| said.iter().find(|(c, _)| *c == case).map(|&(_, s)| s).unwrap_or("");
    for (case, want) in [
        ("17k", "HTTP/1.1 431 "),
        ("100k", "HTTP/1.1 431 "),
        ("uri", "HTTP/1.1 414 "),
        ("1.2", "HTTP/1.1 200 "),
        ("2.0", "HTTP/1.1 505 "),
        ("get", "HTTP/1.1 501 "),
    ] {
        assert_eq!(status(case), want, "{case}:\n{out}");
    }
    let (took, answer) = status("slow").split_once(' ').unwrap_or_else(|| panic!("{out}"));
    let took: f64 = took.parse().unwrap_or_else(|_| panic!("{out}"));
    assert_eq!(answer, "HTTP/1.1 408 ", "the slow body:\n{out}");
    assert!((0.9..5.0).contains(&took), "the slow body was cut after {took} s");
    // One request per line the script printed, each answered.
    said.len() as u64
}
