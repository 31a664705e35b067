//! What the server's integration tests share: the real `fairway` binary
//! started on the kernel backend ([`FairwayProcess`]), reading `/metrics`
//! ([`series`], [`total`]), a directory of their own ([`TempDir`]), and the
//! allocation tests' site ([`CountingSite`]).

#![allow(dead_code, reason = "each test binary uses part of it")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex, mpsc};
use std::time::{Duration, Instant};

/// A running `fairway`; killed on drop unless it has exited.
pub struct FairwayProcess {
    child: Child,
    pub addr: SocketAddr,
    /// Where it serves HTTPS, if it said so (`--tls-cert`).
    pub tls_addr: Option<SocketAddr>,
    /// Everything it wrote to standard error so far.
    log: Arc<Mutex<String>>,
}

impl FairwayProcess {
    /// Starts `fairway --backend kernel --listen 127.0.0.1:0 --shards 2
    /// --log info` plus `extra`, and waits for the address it serves on.
    #[track_caller]
    pub fn start(extra: &[&str]) -> FairwayProcess {
        FairwayProcess::start_on("127.0.0.1:0", extra)
    }

    /// [`start`](Self::start) listening on `listen`.
    #[track_caller]
    pub fn start_on(listen: &str, extra: &[&str]) -> FairwayProcess {
        // With FAIRWAY_TEST_ALL_OFF set, steering and moderation off.
        // Two shards unless `extra` says how many.
        let shards: &[&str] = if extra.contains(&"--shards") { &[] } else { &["--shards", "2"] };
        let mut child = Command::new(env!("CARGO_BIN_EXE_fairway"))
            .args(fairway::config::all_off_if_asked(
                &[&["--backend", "kernel", "--listen", listen, "--log", "info"], shards, extra].concat(),
            ))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .expect("cannot start fairway");
        let stderr = child.stderr.take().expect("stderr is piped");
        let log = Arc::new(Mutex::new(String::new()));
        let (tx, rx) = mpsc::channel();
        let sink = Arc::clone(&log);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                for scheme in ["http", "https"] {
                    let said = format!("serving on {scheme}://");
                    if let Some(at) = line.find(&said) {
                        let addr = line[at + said.len()..].split_whitespace().next().unwrap_or_default();
                        let _ = tx.send((scheme, addr.parse::<SocketAddr>()));
                    }
                }
                let mut log = sink.lock().unwrap();
                log.push_str(&line);
                log.push('\n');
            }
        });
        let mut server = FairwayProcess { child, addr: SocketAddr::from(([127, 0, 0, 1], 0)), tls_addr: None, log };
        let tls = extra.contains(&"--tls-cert");
        let plain = !extra.contains(&"--tls-only");
        while (plain && server.addr.port() == 0) || (tls && server.tls_addr.is_none()) {
            match rx.recv_timeout(Duration::from_secs(20)) {
                Ok(("http", Ok(addr))) => server.addr = addr,
                Ok((_, Ok(addr))) => server.tls_addr = Some(addr),
                other => panic!("fairway did not say where it serves ({other:?}); its log:\n{}", server.log()),
            }
        }
        server
    }

    /// Its process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// What it wrote to standard error so far.
    pub fn log(&self) -> String {
        self.log.lock().unwrap().clone()
    }

    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    pub fn connect(&self) -> TcpStream {
        let s = TcpStream::connect(self.addr).expect("connect to fairway");
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        s
    }

    /// `/metrics`' text, on a connection of its own.
    pub fn scrape(&self) -> String {
        let mut s = TcpStream::connect(self.addr).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        s.write_all(b"GET /metrics HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n").unwrap();
        let mut text = String::new();
        s.read_to_string(&mut text).unwrap();
        text.split_once("\r\n\r\n").map(|(_, body)| body.to_owned()).unwrap_or_default()
    }

    /// Scrapes `/metrics` until metric `name` totals at least `least`
    /// (shards publish once a second), at most 5 s; the total last seen.
    pub fn wait_total(&self, name: &str, least: f64) -> f64 {
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            let seen = total(&self.scrape(), name);
            if seen >= least || Instant::now() > deadline {
                return seen;
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// SIGTERM, as a service manager stops it.
    pub fn terminate(&self) {
        let status = Command::new("kill").args(["-TERM", &self.child.id().to_string()]).status().unwrap();
        assert!(status.success(), "kill -TERM failed");
    }

    /// Whether the process is still running.
    pub fn is_running(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    /// Waits at most `limit` for the process to exit.
    pub fn wait_exit(&mut self, limit: Duration) -> Option<ExitStatus> {
        let start = Instant::now();
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return Some(status);
            }
            if start.elapsed() > limit {
                return None;
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

impl Drop for FairwayProcess {
    fn drop(&mut self) {
        if self.child.try_wait().ok().flatten().is_none() {
            let _ = self.child.kill();
            let _ = self.child.wait();
        }
    }
}

/// The samples of metric `name` (any labels) in Prometheus text `text`:
/// each one's labels as written (`{shard="0"}`, empty without labels) and
/// its value. Other metrics whose names start with `name` are left out.
pub fn series<'t>(text: &'t str, name: &str) -> Vec<(&'t str, f64)> {
    text.lines()
        .filter_map(|line| {
            let rest = line.strip_prefix(name)?;
            let (labels, value) = rest.rsplit_once(' ')?;
            (labels.is_empty() || labels.starts_with('{')).then_some((labels, value.parse().ok()?))
        })
        .collect()
}

/// The sum of metric `name`'s samples.
pub fn total(text: &str, name: &str) -> f64 {
    series(text, name).iter().map(|(_, v)| v).sum()
}

/// A directory under the system's temp dir for one test (`name`), made
/// empty, removed on drop.
pub struct TempDir(pub PathBuf);

impl TempDir {
    pub fn new(name: &str) -> TempDir {
        let path = std::env::temp_dir().join(format!("fairway-test-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path).unwrap();
        TempDir(path)
    }

    /// `name` inside it.
    pub fn path(&self, name: &str) -> PathBuf {
        self.0.join(name)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// What a shard's site keeps for the allocation tests' connections: a date
/// cache, the responses counted, and the outbound epoll when the proxy
/// needs one. Allocates nothing per call.
pub struct CountingSite {
    pub date: fairway::http::DateCache,
    pub outbound: Option<fairway::outbound::Outbound>,
    /// 200 responses, and the others.
    pub ok: u64,
    pub other: u64,
}

impl CountingSite {
    pub fn new(outbound: Option<fairway::outbound::Outbound>) -> CountingSite {
        CountingSite { date: fairway::http::DateCache::new(1_700_000_000), outbound, ok: 0, other: 0 }
    }
}

impl fairway::http::Site for CountingSite {
    fn now_date(&self) -> &[u8] {
        self.date.as_bytes()
    }

    fn metrics(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"unused 0\n");
    }

    fn files(&mut self) -> Option<&mut fairway::http::StaticFiles> {
        None
    }

    fn record(&mut self, status: u16, _latency: Duration) {
        if status == 200 { self.ok += 1 } else { self.other += 1 }
    }

    fn outbound(&mut self) -> Option<&mut fairway::outbound::Outbound> {
        self.outbound.as_mut()
    }
}
