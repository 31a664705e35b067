//! Fairway against the Linux kernel's own TCP, on a [`testbed`](crate::testbed):
//! the server side (shards running the server's HTTP layer or the fetcher of [`crate::apps`] over
//! AF_XDP or TAP in the server namespace) and the kernel side (curl and
//! Python in the client namespaces), for the real-peer tests.
//!
//! Everything here needs root and stays inside the testbed's namespaces.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use fairway::runtime::shards::{ShardExit, join_all, spawn_with};
use fairway::runtime::{App, LoopConfig, LoopStats};
use fairway_nic::steering::{Fabric, SteeringCounts};
use fairway_nic::{Device, Wait};
use fairway_stack::steering::Steering;
use fairway_stack::{Config, Shard};
use sha2::{Digest, Sha256};

use fairway::http::pattern_byte;

use crate::apps::{Leaves, hex};
use crate::testbed::{self, Testbed};

/// The port the server's HTTP layer listens on.
pub const HTTP_PORT: u16 = 80;

/// Parses `02:00:0a:4d:00:01`.
///
/// # Panics
///
/// On anything else: the testbed's addresses are well formed.
#[must_use]
pub fn parse_mac(text: &str) -> [u8; 6] {
    let bytes: Vec<u8> = text.split(':').map(|b| u8::from_str_radix(b, 16).expect("a hex MAC byte")).collect();
    bytes.try_into().expect("six MAC bytes")
}

/// The stack configuration of shard `index` of `count` serving as `ip`.
#[must_use]
pub fn shard_config(mac: [u8; 6], ip: Ipv4Addr, prefix_len: u8, index: u16, count: u16) -> Config {
    let mut config = Config::new(mac, ip, prefix_len);
    config.tcp.rx_buffer = 1 << 20;
    config.tcp.tx_buffer = 1 << 20;
    config.secret = u128::from(std::process::id()) << 64 | u128::from(index);
    if count > 1 {
        config.steering = Some(Steering { index, count });
    }
    config
}

/// Shards running an application in the server namespace until stopped;
/// each leaves what the application [`Leaves`].
pub struct Shards<A: Leaves> {
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<ShardExit<A::Left>>>,
    /// The steering fabric, when there are several shards.
    pub fabric: Option<Arc<Fabric>>,
}

impl<A: App + Leaves + 'static> Shards<A> {
    /// Starts `count` shards. Shard `i` is built on its own thread, inside
    /// `ns`, by `build(i, fabric)`.
    ///
    /// # Errors
    ///
    /// When a thread cannot be spawned or the fabric cannot be made.
    pub fn start<D, B>(ns: &str, count: u16, build: B) -> io::Result<Shards<A>>
    where
        D: Device + Wait,
        B: Fn(u16, Option<Arc<Fabric>>) -> io::Result<(Shard, D, A)> + Send + Sync + 'static,
    {
        let stop = Arc::new(AtomicBool::new(false));
        let fabric = if count > 1 { Some(Fabric::new(usize::from(count), 1024, 2048)?) } else { None };
        let build = Arc::new(build);
        let mut handles = Vec::new();
        let config = LoopConfig { max_sleep: Duration::from_millis(20), ..LoopConfig::default() };
        for index in 0..count {
            let (ns, build, fabric) = (ns.to_owned(), Arc::clone(&build), fabric.clone());
            let build = move || {
                let _inside = testbed::enter(&ns).map_err(|e| io::Error::other(e.to_string()))?;
                build(index, fabric)
            };
            handles.push(spawn_with(index, count > 1, config, Arc::clone(&stop), build, leave)?);
        }
        Ok(Shards { stop, handles, fabric })
    }

    /// Whether any shard has ended (for instance because it could not open
    /// its device).
    #[must_use]
    pub fn any_finished(&self) -> bool {
        self.handles.iter().any(JoinHandle::is_finished)
    }

    /// Stops every shard and returns how each ended.
    #[must_use]
    pub fn stop(self) -> Vec<ShardExit<A::Left>> {
        self.stop.store(true, Ordering::Relaxed);
        join_all(self.handles)
    }

    /// The steering counters of shard `index` (zero without a fabric).
    #[must_use]
    pub fn steering(&self, index: u16) -> SteeringCounts {
        self.fabric.as_ref().map_or_else(SteeringCounts::default, |f| f.stats(index).snapshot())
    }
}

/// A shard's end, on its thread: what its application leaves.
fn leave<A: Leaves>(index: u16, result: io::Result<LoopStats>, parts: Option<(Shard, A)>) -> ShardExit<A::Left> {
    let (shard, app) = parts.map_or((None, None), |(shard, app)| (Some(shard), Some(app.leave())));
    ShardExit { index, result, shard, app }
}

/// Waits until `client` can ping the server (the shards are up and
/// answering ARP and ICMP). Panics after `timeout`.
pub fn wait_until_reachable(tb: &Testbed, client: usize, timeout: Duration) {
    let started = std::time::Instant::now();
    let target = tb.server_ip().to_string();
    loop {
        let out = testbed::exec(&tb.client_ns(client), &["ping", "-c", "1", "-W", "1", &target]).unwrap();
        if out.success() {
            return;
        }
        assert!(started.elapsed() < timeout, "the server did not answer pings within {timeout:?}");
    }
}

/// SHA-256 of the first `n` bytes of the server's pattern, hex.
#[must_use]
pub fn pattern_sha256(n: u64) -> String {
    let mut digest = Sha256::new();
    let mut chunk = vec![0u8; 1 << 16];
    let mut at = 0u64;
    while at < n {
        let len = (n - at).min(chunk.len() as u64) as usize;
        for (i, b) in chunk[..len].iter_mut().enumerate() {
            *b = pattern_byte(at + i as u64);
        }
        digest.update(&chunk[..len]);
        at += len as u64;
    }
    hex(&digest.finalize())
}

/// `curl` from client `client`: the body's SHA-256, or why it failed.
pub fn curl_sha256(tb: &Testbed, client: usize, path: &str, timeout: Duration) -> Result<String, String> {
    curl_url_sha256(tb, client, &format!("http://{}:{HTTP_PORT}{path}", tb.server_ip()), timeout)
}

/// [`curl_sha256`] of `path` at Fairway's IPv6 address (a testbed with
/// [`TestbedConfig::ipv6`](crate::testbed::TestbedConfig::ipv6)).
///
/// # Errors
///
/// As [`curl_sha256`].
pub fn curl6_sha256(tb: &Testbed, client: usize, path: &str, timeout: Duration) -> Result<String, String> {
    curl_url_sha256(tb, client, &format!("http://[{}]:{HTTP_PORT}{path}", tb.server_ip6()), timeout)
}

fn curl_url_sha256(tb: &Testbed, client: usize, url: &str, timeout: Duration) -> Result<String, String> {
    let script =
        format!("curl -sS -f --max-time {} '{url}' | sha256sum; exit ${{PIPESTATUS[0]}}", timeout.as_secs().max(1));
    let out = testbed::exec_timeout(&tb.client_ns(client), &["bash", "-c", &script], timeout + Duration::from_secs(5))
        .map_err(|e| e.to_string())?;
    if !out.success() {
        return Err(format!("curl {url} failed: {}", out.stderr_text().trim()));
    }
    out.stdout_text().split_whitespace().next().map(str::to_owned).ok_or_else(|| "no sha256sum output".to_owned())
}

/// Python's `urllib` uploads `n` random bytes from client `client` to
/// `/upload`; returns `Ok` when the server's answer names the right length
/// and digest.
pub fn python_upload(tb: &Testbed, client: usize, n: u64, timeout: Duration) -> Result<(), String> {
    python_upload_to(tb, client, &tb.server_ip().to_string(), n, timeout)
}

/// [`python_upload`] to `host` (an IPv4 address, or an IPv6 one in
/// brackets as URLs write it).
///
/// # Errors
///
/// As [`python_upload`].
pub fn python_upload_to(tb: &Testbed, client: usize, host: &str, n: u64, timeout: Duration) -> Result<(), String> {
    const SCRIPT: &str = r#"
import hashlib, os, sys, urllib.request
url, n, timeout = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
data = os.urandom(n)
req = urllib.request.Request(url, data=data, method="POST",
                             headers={"Content-Type": "application/octet-stream"})
got = urllib.request.urlopen(req, timeout=timeout).read().decode()
want = f"{n} {hashlib.sha256(data).hexdigest()}\n"
if got != want:
    sys.exit(f"upload answer {got!r}, expected {want!r}")
"#;
    let url = format!("http://{host}:{HTTP_PORT}/upload");
    let (n, secs) = (n.to_string(), timeout.as_secs().max(1).to_string());
    let out = testbed::exec_timeout(
        &tb.client_ns(client),
        &["python3", "-c", SCRIPT, &url, &n, &secs],
        timeout + Duration::from_secs(5),
    )
    .map_err(|e| e.to_string())?;
    if out.success() { Ok(()) } else { Err(out.stderr_text()) }
}

/// `connections` kernel connections from client `client`, all open at once
/// (a barrier holds every request until the last connection is up), each
/// `GET /bytes/{size}` checked byte for byte. Returns how many succeeded.
pub fn python_concurrent(tb: &Testbed, client: usize, connections: usize, size: u64, timeout: Duration) -> usize {
    python_concurrent_to(tb, client, &tb.server_ip().to_string(), connections, size, timeout)
}

/// [`python_concurrent`] to `host` (an address of either family, without
/// brackets).
///
/// # Panics
///
/// As [`python_concurrent`].
pub fn python_concurrent_to(
    tb: &Testbed,
    client: usize,
    host: &str,
    connections: usize,
    size: u64,
    timeout: Duration,
) -> usize {
    const SCRIPT: &str = r#"
import asyncio, resource, sys
host, n, size, timeout = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), float(sys.argv[4])
resource.setrlimit(resource.RLIMIT_NOFILE, (n + 256, n + 256))
expected = bytes(i % 251 for i in range(size))
async def one(barrier):
    reader, writer = await asyncio.open_connection(host, 80)
    await barrier.wait()
    writer.write(f"GET /bytes/{size} HTTP/1.1\r\nHost: fairway\r\nConnection: close\r\n\r\n".encode())
    await writer.drain()
    data = await reader.read()
    writer.close()
    head, _, body = data.partition(b"\r\n\r\n")
    return head.startswith(b"HTTP/1.1 200") and body == expected
async def main():
    barrier = asyncio.Barrier(n)
    results = await asyncio.wait_for(
        asyncio.gather(*(one(barrier) for _ in range(n)), return_exceptions=True), timeout)
    errors = [r for r in results if isinstance(r, BaseException)]
    if errors:
        print(f"{len(errors)} failed, first: {errors[0]!r}", file=sys.stderr)
    print(sum(1 for r in results if r is True))
asyncio.run(main())
"#;
    let (n, size, secs) = (connections.to_string(), size.to_string(), timeout.as_secs().max(1).to_string());
    let out = testbed::exec_timeout(
        &tb.client_ns(client),
        &["python3", "-c", SCRIPT, host, &n, &size, &secs],
        timeout + Duration::from_secs(10),
    )
    .unwrap();
    assert!(out.success(), "the Python client failed: {}", out.stderr_text());
    let ok = out.stdout_text().trim().parse().unwrap_or(0);
    if ok != connections {
        eprintln!("python_concurrent: {ok}/{connections} ok; stderr: {}", out.stderr_text());
    }
    ok
}

/// The server's address as its HTTP layer listens on it.
#[must_use]
pub fn server_addr(tb: &Testbed) -> SocketAddrV4 {
    SocketAddrV4::new(tb.server_ip(), HTTP_PORT)
}
