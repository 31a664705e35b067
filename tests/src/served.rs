//! Fairway's own server (the userspace backend of the `fairway` crate, the
//! code `fairway --backend afxdp|tap` runs) on a [`testbed`](crate::testbed),
//! and the kernel clients that check it: curl and Python in the client
//! namespaces.
//!
//! [`Served::start`] builds a [`Config`] from command-line flags, exactly as
//! the binary does, and starts the shards from a thread inside the server
//! namespace (the shard threads inherit it); [`Served::stop`] raises the
//! stop flag, as SIGINT would, and waits for the graceful shutdown.
//!
//! Everything here needs root and stays inside the testbed's namespaces.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fairway::backend::ShardReport;
use fairway::config::Config;
use fairway::{Builder, Server, ServerHandle};
use sha2::{Digest, Sha256};

use crate::apps::hex;
use crate::real_peers::{HTTP_PORT, wait_until_reachable};
use crate::testbed::{self, Testbed};

/// A running server.
pub struct Served {
    stop: Arc<AtomicBool>,
    handle: ServerHandle,
    /// The configuration it runs with.
    pub config: Config,
}

impl Served {
    /// Starts the server in `tb`'s server namespace with `flags` (as on
    /// the command line, without the program name), and waits until client
    /// 0 can ping it.
    ///
    /// # Panics
    ///
    /// When the flags do not parse or the server does not start.
    #[must_use]
    pub fn start(tb: &Testbed, flags: &[&str]) -> Served {
        Served::start_with(tb, flags, |builder| builder)
    }

    /// [`Served::start`] with the application `app` sets on the builder
    /// (a handler, an axum router...).
    ///
    /// # Panics
    ///
    /// As [`Served::start`].
    ///
    /// With `FAIRWAY_TEST_ALL_OFF` set, every receive-path technique the
    /// flags leave alone is switched off ([`fairway::config::all_off`]).
    #[must_use]
    pub fn start_with(tb: &Testbed, flags: &[&str], app: impl FnOnce(Builder) -> Builder) -> Served {
        let flags = fairway::config::all_off_if_asked(flags);
        let args = std::iter::once("fairway").chain(flags.iter().map(String::as_str));
        let config = Config::load(args, None).unwrap_or_else(|e| panic!("flags {flags:?}: {e}"));
        let stop = Arc::new(AtomicBool::new(false));
        let builder = app(Server::builder().config(config.clone()).stop_flag(Arc::clone(&stop)));
        let handle = testbed::in_netns(&tb.server_ns(), || builder.spawn())
            .unwrap_or_else(|e| panic!("entering {}: {e}", tb.server_ns()))
            .unwrap_or_else(|e| panic!("starting the server: {e}"));
        std::thread::sleep(Duration::from_millis(100));
        assert!(!handle.is_finished(), "the server stopped at start");
        wait_until_reachable(tb, 0, Duration::from_secs(10));
        Served { stop, handle, config }
    }

    /// The running server.
    #[must_use]
    pub fn handle(&self) -> &ServerHandle {
        &self.handle
    }

    /// Raises the stop flag (what SIGINT does) without waiting.
    pub fn raise_stop(&self) {
        self.stop.store(true, Ordering::Relaxed);
    }

    /// Whether every shard has ended.
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.handle.is_finished()
    }

    /// Raises the stop flag and waits for the server to end. Returns each
    /// shard's report.
    ///
    /// # Panics
    ///
    /// When a shard failed.
    #[must_use]
    pub fn stop(self) -> Vec<ShardReport> {
        self.raise_stop();
        self.handle.wait().unwrap_or_else(|e| panic!("the server failed: {e}"))
    }

    /// Waits for the server to end (after [`raise_stop`](Self::raise_stop)).
    ///
    /// # Errors
    ///
    /// What a shard failed with.
    pub fn wait(self) -> std::io::Result<Vec<ShardReport>> {
        self.handle.wait()
    }
}

fn url(tb: &Testbed, path: &str) -> String {
    format!("http://{}:{HTTP_PORT}{path}", tb.server_ip())
}

/// `curl` from client `client`: the body, or why it failed (a status of 400
/// or more is a failure).
pub fn curl_body(tb: &Testbed, client: usize, path: &str, timeout: Duration) -> Result<Vec<u8>, String> {
    let url = url(tb, path);
    let secs = timeout.as_secs().max(1).to_string();
    let out = testbed::exec_timeout(
        &tb.client_ns(client),
        &["curl", "-sS", "-f", "--path-as-is", "--max-time", &secs, &url],
        timeout + Duration::from_secs(5),
    )
    .map_err(|e| e.to_string())?;
    if out.success() { Ok(out.stdout) } else { Err(format!("curl {url}: {}", out.stderr_text().trim())) }
}

/// A short, bounded `wrk` run from client `client` against `/plaintext`
/// (16 connections, 2 s): no socket errors, only 2xx, and a sane rate.
/// Returns the requests per second wrk measured.
pub fn check_wrk(tb: &Testbed, client: usize) -> f64 {
    check_wrk_at(tb, client, &url(tb, "/plaintext"))
}

/// [`check_wrk`] against `url`.
///
/// # Panics
///
/// As [`check_wrk`].
pub fn check_wrk_at(tb: &Testbed, client: usize, url: &str) -> f64 {
    let out = testbed::exec_timeout(
        &tb.client_ns(client),
        &["wrk", "-t1", "-c16", "-d2s", "--timeout", "2s", url],
        Duration::from_secs(30),
    )
    .unwrap_or_else(|e| panic!("wrk (cargo xtask test installs it): {e}"));
    let report = out.stdout_text();
    assert!(out.success(), "wrk failed: {}\n{report}", out.stderr_text());
    assert!(!report.contains("Non-2xx"), "{report}");
    assert!(!report.contains("Socket errors"), "{report}");
    let rate: f64 = report
        .lines()
        .find_map(|l| l.strip_prefix("Requests/sec:"))
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or_else(|| panic!("no Requests/sec in {report}"));
    assert!(rate > 1000.0, "{rate} req/s is far too slow:\n{report}");
    rate
}

/// `curl` from client `client`: the response's status code (0 when no
/// response came).
#[must_use]
pub fn curl_status(tb: &Testbed, client: usize, path: &str, timeout: Duration) -> u16 {
    let url = url(tb, path);
    let secs = timeout.as_secs().max(1).to_string();
    let out = testbed::exec_timeout(
        &tb.client_ns(client),
        &["curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}", "--path-as-is", "--max-time", &secs, &url],
        timeout + Duration::from_secs(5),
    )
    .unwrap();
    out.stdout_text().trim().parse().unwrap_or(0)
}

/// Python from client `client`: `rounds` rounds of `depth` pipelined
/// requests (`/plaintext` and `/json` in turn) on one keep-alive
/// connection, every response checked (status, `Server`, `Date`, body).
/// Returns the responses read, or why it failed.
pub fn python_pipelined(
    tb: &Testbed,
    client: usize,
    rounds: u32,
    depth: u32,
    timeout: Duration,
) -> Result<u64, String> {
    const SCRIPT: &str = r#"
import socket, sys
host, rounds, depth, timeout = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
paths = ["/plaintext", "/json"]
bodies = [b"Hello, World!", b'{"message":"Hello, World!"}']
batch = b"".join(f"GET {paths[i % 2]} HTTP/1.1\r\nHost: fairway\r\n\r\n".encode() for i in range(depth))
s = socket.create_connection((host, 80), timeout=timeout)
buf = b""
def more():
    global buf
    chunk = s.recv(65536)
    if not chunk:
        sys.exit(f"the server closed the connection after {total} responses")
    buf += chunk
total = 0
for r in range(rounds):
    s.sendall(batch)
    for i in range(depth):
        while b"\r\n\r\n" not in buf:
            more()
        head, _, buf = buf.partition(b"\r\n\r\n")
        lines = head.split(b"\r\n")
        if lines[0] != b"HTTP/1.1 200 OK":
            sys.exit(f"status line {lines[0]!r}")
        headers = {}
        for line in lines[1:]:
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()
        if headers.get(b"server") != b"fairway" or not headers.get(b"date", b"").endswith(b" GMT"):
            sys.exit(f"headers {headers!r}")
        n = int(headers[b"content-length"])
        while len(buf) < n:
            more()
        body, buf = buf[:n], buf[n:]
        if body != bodies[i % 2]:
            sys.exit(f"response {total}: body {body!r}")
        total += 1
print(total)
"#;
    let host = tb.server_ip().to_string();
    let (rounds, depth, secs) = (rounds.to_string(), depth.to_string(), timeout.as_secs().max(1).to_string());
    let out = testbed::exec_timeout(
        &tb.client_ns(client),
        &["python3", "-c", SCRIPT, &host, &rounds, &depth, &secs],
        timeout + Duration::from_secs(5),
    )
    .map_err(|e| e.to_string())?;
    if !out.success() {
        return Err(out.stderr_text());
    }
    out.stdout_text().trim().parse().map_err(|e| format!("{e}: {}", out.stdout_text()))
}

/// SHA-256 of `data`, hex.
#[must_use]
pub fn sha256_hex(data: &[u8]) -> String {
    hex(&Sha256::digest(data))
}

/// The lengths of [`Root`]'s `sizes/` files.
pub const BOUNDARY_SIZES: [usize; 8] = [0, 1, 1447, 1448, 1449, (1 << 20) - 1, 1 << 20, (1 << 20) + 1];

/// A directory of files to serve, removed on drop.
pub struct Root {
    dir: std::path::PathBuf,
    /// Each file: its URL path and its content.
    pub files: Vec<(String, Vec<u8>)>,
    /// Files too large to keep in memory: URL path, length and SHA-256.
    pub large: Vec<(String, u64, String)>,
}

impl Root {
    /// A fresh directory named after `tag` with a text file, an HTML page,
    /// a 3 MB binary in a subdirectory (larger than any buffer on the way,
    /// so it is streamed), and in `sizes/` files whose lengths sit on the
    /// boundaries a body crosses on the way out: empty, one byte, a
    /// segment's payload at MTU 1500 with timestamps (1,448) and one either
    /// side, and the server's default send ring (1 MiB) and one either
    /// side.
    ///
    /// # Panics
    ///
    /// When the files cannot be written.
    #[must_use]
    pub fn new(tag: &str) -> Root {
        let dir = std::env::temp_dir().join(format!("fairway-root-{tag}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("data")).unwrap();
        let blob: Vec<u8> = (0..3_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
        std::fs::create_dir_all(dir.join("sizes")).unwrap();
        let mut files = vec![
            ("/hello.txt".to_owned(), b"hello from the root\n".to_vec()),
            ("/index.html".to_owned(), b"<!doctype html><title>fairway</title><p>static</p>\n".to_vec()),
            ("/data/blob.bin".to_owned(), blob.clone()),
        ];
        for size in BOUNDARY_SIZES {
            let content = blob.iter().cycle().skip(size % 7).take(size).copied().collect();
            files.push((format!("/sizes/{size}.bin"), content));
        }
        for (path, content) in &files {
            std::fs::write(dir.join(&path[1..]), content).unwrap();
        }
        Root { dir, files, large: Vec::new() }
    }

    /// Adds `name` (a file name, at the top of the root) of `size` bytes,
    /// written a MiB at a time with content that repeats no short period
    /// (so a misplaced segment cannot go unseen), and remembers its SHA-256
    /// instead of its content.
    ///
    /// # Panics
    ///
    /// When the file cannot be written.
    #[must_use]
    pub fn with_large(mut self, name: &str, size: u64) -> Root {
        use std::io::Write;
        let mut file = std::io::BufWriter::new(std::fs::File::create(self.dir.join(name)).unwrap());
        let mut digest = Sha256::new();
        let mut block = vec![0u8; 1 << 20];
        let mut at = 0u64;
        while at < size {
            let len = (size - at).min(block.len() as u64) as usize;
            // Each 1 MiB block its own: the block number seeds the hash.
            let seed = (at >> 20) as u32;
            for (i, b) in block[..len].iter_mut().enumerate() {
                *b = ((i as u32 ^ seed.wrapping_mul(0x9e37_79b9)).wrapping_mul(2_654_435_761) >> 13) as u8;
            }
            file.write_all(&block[..len]).unwrap();
            digest.update(&block[..len]);
            at += len as u64;
        }
        file.flush().unwrap();
        self.large.push((format!("/{name}"), size, hex(&digest.finalize())));
        self
    }

    /// The directory.
    #[must_use]
    pub fn path(&self) -> &Path {
        &self.dir
    }

    /// The directory as a string, for `--root`.
    #[must_use]
    pub fn arg(&self) -> String {
        self.dir.display().to_string()
    }
}

impl Drop for Root {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// How long `f` took, and what it returned.
pub fn timed<T>(f: impl FnOnce() -> T) -> (Duration, T) {
    let started = Instant::now();
    let value = f();
    (started.elapsed(), value)
}

/// The timeout of one client command.
pub const T: Duration = Duration::from_secs(60);

/// `/plaintext` and `/json` byte for byte, `/bytes/N` by SHA-256, and 50
/// rounds of 16 pipelined requests on one keep-alive connection, all from
/// client `client`. Returns how many requests it made.
///
/// # Panics
///
/// On any wrong answer.
pub fn check_endpoints(tb: &Testbed, client: usize) -> u64 {
    assert_eq!(curl_body(tb, client, "/plaintext", T).unwrap(), b"Hello, World!");
    assert_eq!(curl_body(tb, client, "/json", T).unwrap(), br#"{"message":"Hello, World!"}"#);
    assert_eq!(curl_body(tb, client, "/healthz", T).map(|b| !b.is_empty()), Ok(true));
    let sizes = [0u64, 1, 1448, 65_536, 1 << 20, 30_000_000];
    for size in sizes {
        let got = crate::real_peers::curl_sha256(tb, client, &format!("/bytes/{size}"), T).unwrap();
        assert_eq!(got, crate::real_peers::pattern_sha256(size), "/bytes/{size}");
    }
    assert_eq!(curl_status(tb, client, "/no/such/thing", T), 404);
    let pipelined = python_pipelined(tb, client, 50, 16, T).unwrap_or_else(|e| panic!("pipelined: {e}"));
    assert_eq!(pipelined, 800);
    4 + sizes.len() as u64 + pipelined
}

/// Every file of `root`, byte for byte, and a path that tries to leave the
/// root, from client `client`. Returns how many requests it made.
///
/// # Panics
///
/// On any wrong answer.
pub fn check_static_files(tb: &Testbed, client: usize, root: &Root) -> u64 {
    for (path, content) in &root.files {
        let got = curl_body(tb, client, path, T).unwrap_or_else(|e| panic!("{path}: {e}"));
        assert_eq!(got.len(), content.len(), "{path}");
        assert_eq!(sha256_hex(&got), sha256_hex(content), "{path}");
    }
    let escape = curl_status(tb, client, "/../../../../etc/passwd", T);
    assert!(escape == 400 || escape == 404, "a path out of the root: {escape}");
    root.files.len() as u64 + 1
}

/// Every large file of `root` ([`Root::with_large`]), by SHA-256 of what
/// curl received on client `client`, each within `timeout`. Returns how
/// many requests it made.
///
/// # Panics
///
/// On a wrong or missing answer.
pub fn check_large_files(tb: &Testbed, client: usize, root: &Root, timeout: Duration) -> u64 {
    for (path, size, sha) in &root.large {
        let got = crate::real_peers::curl_sha256(tb, client, path, timeout)
            .unwrap_or_else(|e| panic!("{path} ({size} bytes): {e}"));
        assert_eq!(&got, sha, "{path} ({size} bytes) arrived altered");
    }
    root.large.len() as u64
}

/// Uploads of several sizes from client `client`, each answered with its
/// length and SHA-256. Returns how many it made.
///
/// # Panics
///
/// On any wrong answer.
pub fn check_uploads(tb: &Testbed, client: usize) -> u64 {
    let sizes = [0u64, 1, 100_000, 5 << 20];
    for size in sizes {
        crate::real_peers::python_upload(tb, client, size, T).unwrap_or_else(|e| panic!("upload of {size}: {e}"));
    }
    sizes.len() as u64
}

/// A client that opens a keep-alive connection, makes one request, then
/// waits for the server to close it and prints `closed`.
///
/// # Panics
///
/// When it cannot be started.
#[must_use]
pub fn idle_keep_alive(tb: &Testbed, client: usize) -> testbed::Spawned {
    const SCRIPT: &str = r#"
import socket, sys, time
s = socket.create_connection((sys.argv[1], 80), timeout=120)
s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: fairway\r\n\r\n")
data = b""
while not data.endswith(b"Hello, World!"):
    data += s.recv(4096)
print("answered", flush=True)
rest = s.recv(4096)
print("closed" if rest == b"" else f"got {rest!r}", flush=True)
"#;
    let host = tb.server_ip().to_string();
    let mut idle = testbed::spawn(&tb.client_ns(client), &["python3", "-u", "-c", SCRIPT, &host]).unwrap();
    idle.wait_for_stdout("answered", T).unwrap();
    idle
}

/// Graceful shutdown with a download in flight: client 0 downloads 30 MB at
/// 5 MB/s while client 1 holds an idle keep-alive connection; the stop flag
/// is raised a second in, when most of the body has not left the server
/// (the client's socket buffer holds at most ~6 MB). The download must
/// complete byte for byte, so the server must keep sending for seconds after
/// the stop; the idle connection must be closed at once; a new connection
/// must be refused (RST); and the server must return within its grace
/// period. Returns the shard reports.
///
/// # Panics
///
/// On any of those failing.
pub fn check_graceful_shutdown(tb: &Testbed, served: Served) -> Vec<ShardReport> {
    const SIZE: u64 = 30_000_000;
    let grace = served.config.shutdown_grace;
    let idle = idle_keep_alive(tb, 1);
    let script =
        format!("curl -sS -f --limit-rate 5M --max-time 60 '{}' | sha256sum", url(tb, &format!("/bytes/{SIZE}")));
    let mut download = testbed::spawn(&tb.client_ns(0), &["bash", "-o", "pipefail", "-c", &script]).unwrap();
    std::thread::sleep(Duration::from_secs(1));
    if download.try_wait().is_some() {
        let out = download.kill();
        panic!("the download must still be in flight: {} {}", out.stdout_text(), out.stderr_text());
    }

    served.raise_stop();
    let stopped = Instant::now();
    std::thread::sleep(Duration::from_millis(300));
    let (took, refused) = timed(|| curl_status(tb, 1, "/plaintext", Duration::from_secs(3)));
    assert_eq!(refused, 0, "a new connection after the stop");
    assert!(took < Duration::from_secs(2), "refused at once (RST), not timed out: {took:?}");
    let idle = idle.wait_timeout(Duration::from_secs(5)).expect("the idle connection is closed");
    assert_eq!(idle.stdout_text().lines().last(), Some("closed"), "{}", idle.stdout_text());

    let waiter = std::thread::spawn(move || {
        let reports = served.wait();
        (stopped.elapsed(), reports)
    });
    let download = download.wait_timeout(T).expect("the download ends");
    assert!(download.success(), "the download failed: {}", download.stderr_text());
    let sha = download.stdout_text().split_whitespace().next().map(str::to_owned);
    assert_eq!(sha, Some(crate::real_peers::pattern_sha256(SIZE)), "the download in flight completed byte for byte");
    let (took, reports) = waiter.join().unwrap();
    let reports = reports.unwrap_or_else(|e| panic!("the server failed: {e}"));
    assert!(took < grace, "the server returned {took:?} after the stop; the grace period is {grace:?}");
    // 30 MB at 5 MB/s, a second in, less ~6 MB of socket buffer: the server
    // had more than two seconds of sending left when it was stopped.
    assert!(took > Duration::from_secs(2), "it returned after {took:?}, before the download could have finished");
    reports
}

/// Python from client `client`: opens `n` connections one after another
/// and holds them all (a reset may come before `connect` returns), then sends a `/plaintext` request on each. Returns
/// how many were answered and how many the server reset.
///
/// # Panics
///
/// When the client fails otherwise.
#[must_use]
pub fn python_held_connections(tb: &Testbed, client: usize, n: usize) -> (usize, usize) {
    const SCRIPT: &str = r#"
import resource, socket, sys, time
host, n = sys.argv[1], int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_NOFILE, (n + 256, n + 256))
ok = reset = 0
socks = []
for _ in range(n):
    try:
        socks.append(socket.create_connection((host, 80), timeout=20))
    except ConnectionResetError:
        reset += 1  # the reset came before connect(2) returned
time.sleep(0.5)
for s in socks:
    try:
        s.sendall(b"GET /plaintext HTTP/1.1\r\nHost: fairway\r\n\r\n")
        data = b""
        while not data.endswith(b"Hello, World!"):
            chunk = s.recv(4096)
            if not chunk:
                raise ConnectionResetError("closed")
            data += chunk
        ok += 1
    except (ConnectionResetError, BrokenPipeError):
        reset += 1
print(ok, reset)
"#;
    let host = tb.server_ip().to_string();
    let out =
        testbed::exec_timeout(&tb.client_ns(client), &["python3", "-c", SCRIPT, &host, &n.to_string()], T).unwrap();
    assert!(out.success(), "the Python client failed: {}", out.stderr_text());
    let text = out.stdout_text();
    let mut words = text.split_whitespace().map(|w| w.parse::<usize>().unwrap());
    (words.next().unwrap(), words.next().unwrap())
}

/// From client `client` of a testbed with IPv6: Fairway's IPv6 address
/// answers `ping -6` (once its duplicate address detection is over,
/// within 10 s), the kernel's neighbour entry for it is Fairway's MAC
/// `mac` (learnt by Neighbor Discovery), and its link-local address,
/// formed from that MAC, answers too.
///
/// # Panics
///
/// When any of that does not hold.
pub fn check_ipv6_neighbour_and_ping(tb: &Testbed, client: usize, mac: String) {
    let ns = tb.client_ns(client);
    let server = tb.server_ip6().to_string();
    let ping = |target: &str, count: &str| {
        testbed::exec_timeout(
            &ns,
            &["ping", "-6", "-n", "-c", count, "-i", "0.2", "-W", "2", "-I", testbed::CLIENT_IF, target],
            Duration::from_secs(20),
        )
        .unwrap_or_else(|e| panic!("ping -6 {target}: {e}"))
    };
    let deadline = Instant::now() + Duration::from_secs(10);
    while !ping(&server, "1").success() {
        assert!(Instant::now() < deadline, "fd77::1 never answered ping -6");
        std::thread::sleep(Duration::from_millis(200));
    }
    let out = ping(&server, "3");
    assert!(out.stdout_text().contains("3 received"), "{}", out.stdout_text());
    let neigh = testbed::exec(&ns, &["ip", "-6", "neigh", "show", &server]).unwrap();
    assert!(neigh.stdout_text().contains(&mac.to_lowercase()), "{} is not at {mac}", neigh.stdout_text());
    let link_local = fairway_stack::link_local(crate::real_peers::parse_mac(&mac)).to_string();
    let out = ping(&link_local, "2");
    assert!(out.stdout_text().contains("2 received"), "{link_local}: {}", out.stdout_text());
}
