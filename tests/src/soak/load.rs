//! The soak's load: closed-loop client threads in the load clients'
//! namespaces, each paced so that the whole stays bounded in rate, every
//! answer checked (see [`super::http`]), and the prober on the probing
//! client: `/healthz` every second on a fresh connection, `/metrics`
//! every few seconds.
//!
//! Per load client, one thread of each [`Worker`]: two keep-alive
//! connections of small requests, short connections (`Connection:
//! close`), uploads (`Content-Length` and chunked), large downloads (some
//! with a `Range`, some reset by the client mid-body: SO_LINGER 0), and
//! pipelined batches.

use std::net::SocketAddrV4;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use super::http::{Conn, Expect, Outcome, get, post_upload, upload_body, upload_expect};
use crate::testbed;

/// How long a connect may take: SYN retransmissions at 1 and 3 s get
/// through a link that was down for a few seconds.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long any read or write may wait.
pub const IO_TIMEOUT: Duration = Duration::from_secs(15);

/// The kinds of client thread.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Worker {
    /// Small requests in turn on one keep-alive connection, every 25 ms.
    KeepAlive,
    /// One request per connection, `Connection: close`, every 100 ms.
    Short,
    /// `POST /upload` of up to 1 MiB, a quarter of them chunked, every 200 ms.
    Upload,
    /// `GET /bytes/N` of 1 to 8 MiB, a quarter with a `Range`, a fifth
    /// reset by the client a third of the way in, every 300 ms.
    Download,
    /// Batches of 8 pipelined small requests, every 100 ms.
    Pipelined,
}

impl Worker {
    /// The threads each load client runs.
    pub const PER_CLIENT: [Worker; 6] =
        [Worker::KeepAlive, Worker::KeepAlive, Worker::Short, Worker::Upload, Worker::Download, Worker::Pipelined];

    /// Its name in the report.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Worker::KeepAlive => "keep-alive",
            Worker::Short => "short",
            Worker::Upload => "upload",
            Worker::Download => "download",
            Worker::Pipelined => "pipelined",
        }
    }

    fn pace(self) -> Duration {
        Duration::from_millis(match self {
            Worker::KeepAlive => 25,
            Worker::Short | Worker::Pipelined => 100,
            Worker::Upload => 200,
            Worker::Download => 300,
        })
    }
}

/// A request that did not get its right answer.
#[derive(Clone, Debug)]
pub struct Failure {
    /// The thread's kind (or `healthz`, `metrics` for the prober).
    pub worker: &'static str,
    /// The client it ran on.
    pub client: usize,
    /// When the request began (its connect, if it needed one).
    pub start: Instant,
    /// When it failed.
    pub end: Instant,
    /// What happened.
    pub what: String,
}

/// What the clients saw.
#[derive(Debug, Default)]
pub struct Tally {
    /// Requests made (each pipelined one counts; the client's own resets
    /// do not).
    pub requests: u64,
    /// Requests per worker kind.
    pub by_worker: std::collections::BTreeMap<&'static str, u64>,
    /// Answers that came whole and wrong.
    pub wrong: Vec<Failure>,
    /// Requests without a complete answer.
    pub errors: Vec<Failure>,
    /// Downloads the client reset mid-body on purpose (their bytes up to
    /// there checked).
    pub resets: u64,
}

impl Tally {
    fn record(&mut self, worker: Worker, client: usize, start: Instant, outcome: Result<(), Outcome>) {
        self.requests += 1;
        *self.by_worker.entry(worker.name()).or_default() += 1;
        let failure = |what| Failure { worker: worker.name(), client, start, end: Instant::now(), what };
        match outcome {
            Ok(()) => {}
            Err(Outcome::Wrong(what)) => self.wrong.push(failure(what)),
            Err(Outcome::Error(what)) => self.errors.push(failure(what)),
        }
    }

    /// Adds `other` to this tally.
    pub fn merge(&mut self, other: Tally) {
        self.requests += other.requests;
        for (k, v) in other.by_worker {
            *self.by_worker.entry(k).or_default() += v;
        }
        self.wrong.extend(other.wrong);
        self.errors.extend(other.errors);
        self.resets += other.resets;
    }
}

/// Where a thread runs and what it shares.
#[derive(Clone)]
struct Ctx {
    server: SocketAddrV4,
    client: usize,
    ns: String,
    stop: Arc<AtomicBool>,
    tally: Arc<Mutex<Tally>>,
}

impl Ctx {
    fn record(&self, worker: Worker, start: Instant, outcome: Result<(), Outcome>) {
        self.tally.lock().unwrap_or_else(PoisonError::into_inner).record(worker, self.client, start, outcome);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Sleeps `d`, or less if stopped meanwhile.
    fn pause(&self, d: Duration) {
        let until = Instant::now() + d;
        while !self.stopped() && Instant::now() < until {
            std::thread::sleep((until - Instant::now()).min(Duration::from_millis(50)));
        }
    }

    fn connect(&self) -> Result<Conn, Outcome> {
        Conn::connect(self.server, None, CONNECT_TIMEOUT, IO_TIMEOUT)
    }
}

/// The running client threads.
pub struct Load {
    stop: Arc<AtomicBool>,
    tally: Arc<Mutex<Tally>>,
    threads: Vec<JoinHandle<()>>,
}

impl Load {
    /// Starts [`Worker::PER_CLIENT`] in each of `clients` (client number,
    /// namespace) against `server`, seeded by `seed`.
    #[must_use]
    pub fn start(server: SocketAddrV4, clients: &[(usize, String)], seed: u64) -> Load {
        let stop = Arc::new(AtomicBool::new(false));
        let tally = Arc::new(Mutex::new(Tally::default()));
        let mut threads = Vec::new();
        for (client, ns) in clients {
            for (n, &worker) in Worker::PER_CLIENT.iter().enumerate() {
                let ctx =
                    Ctx { server, client: *client, ns: ns.clone(), stop: Arc::clone(&stop), tally: Arc::clone(&tally) };
                let seed = seed ^ ((*client as u64) << 32 | n as u64);
                let name = format!("soak {} c{client}", worker.name());
                let thread =
                    std::thread::Builder::new().name(name).spawn(move || run(&ctx, worker, seed)).expect("a thread");
                threads.push(thread);
            }
        }
        Load { stop, tally, threads }
    }

    /// Stops the threads (each finishes its exchange in flight, bounded
    /// by the timeouts) and returns what they saw.
    #[must_use]
    pub fn stop(self) -> Tally {
        self.stop.store(true, Ordering::Relaxed);
        for thread in self.threads {
            let _ = thread.join();
        }
        std::mem::take(&mut *self.tally.lock().unwrap_or_else(PoisonError::into_inner))
    }
}

fn run(ctx: &Ctx, worker: Worker, seed: u64) {
    let _in_ns = match testbed::enter(&ctx.ns) {
        Ok(guard) => guard,
        Err(e) => {
            ctx.record(worker, Instant::now(), Err(Outcome::Error(format!("entering {}: {e}", ctx.ns))));
            return;
        }
    };
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut conn: Option<Conn> = None;
    let mut uploads = seed.wrapping_mul(1_000_003);
    while !ctx.stopped() {
        let start = Instant::now();
        match worker {
            Worker::Short => {
                let (request, expect) = small_request(&mut rng, true);
                let outcome = ctx.connect().and_then(|mut c| {
                    c.send(&request)?;
                    c.response(&expect).map(drop)
                });
                ctx.record(worker, start, outcome);
            }
            Worker::KeepAlive | Worker::Upload | Worker::Download => {
                let (request, expect, cut) = match worker {
                    Worker::KeepAlive => {
                        let (r, e) = small_request(&mut rng, false);
                        (r, e, None)
                    }
                    Worker::Upload => {
                        uploads += 1;
                        let body = upload_body(uploads, rng.random_range(0..=1usize << 20));
                        let chunk = rng.random_ratio(1, 4).then(|| rng.random_range(1..=65_536));
                        (post_upload(&body, chunk), upload_expect(&body), None)
                    }
                    _ => {
                        let (r, e) = download_request(&mut rng);
                        let cut = rng.random_ratio(1, 5).then_some(());
                        (r, e, cut)
                    }
                };
                let mut c = match conn.take().map_or_else(|| ctx.connect(), Ok) {
                    Ok(c) => c,
                    Err(e) => {
                        ctx.record(worker, start, Err(e));
                        ctx.pause(worker.pace());
                        continue;
                    }
                };
                let sent = c.send(&request);
                match (sent, cut, &expect) {
                    (Ok(()), Some(()), Expect::Pattern { len, .. }) => {
                        // Read and check a third, then reset.
                        match c.response_limited(&expect, len / 3) {
                            Ok(_) => {
                                c.reset();
                                ctx.tally.lock().unwrap_or_else(PoisonError::into_inner).resets += 1;
                            }
                            Err(e) => ctx.record(worker, start, Err(e)),
                        }
                    }
                    (Ok(()), _, _) => match c.response(&expect) {
                        Ok((head, _)) => {
                            ctx.record(worker, start, Ok(()));
                            if !head.close {
                                conn = Some(c);
                            }
                        }
                        Err(e) => ctx.record(worker, start, Err(e)),
                    },
                    (Err(e), _, _) => ctx.record(worker, start, Err(e)),
                }
            }
            Worker::Pipelined => {
                let batch: Vec<(Vec<u8>, Expect)> = (0..8).map(|_| small_request(&mut rng, false)).collect();
                let mut c = match conn.take().map_or_else(|| ctx.connect(), Ok) {
                    Ok(c) => c,
                    Err(e) => {
                        for _ in &batch {
                            ctx.record(worker, start, Err(e.clone()));
                        }
                        ctx.pause(worker.pace());
                        continue;
                    }
                };
                let all: Vec<u8> = batch.iter().flat_map(|(r, _)| r.iter().copied()).collect();
                let mut failed = c.send(&all).err();
                for (_, expect) in &batch {
                    let outcome = match &failed {
                        Some(e) => Err(e.clone()),
                        None => c.response(expect).map(drop),
                    };
                    if let Err(e) = &outcome {
                        failed = Some(e.clone());
                    }
                    ctx.record(worker, start, outcome);
                }
                if failed.is_none() {
                    conn = Some(c);
                }
            }
        }
        ctx.pause(worker.pace());
    }
}

/// One of the small requests: `/plaintext`, `/json`, `/bytes/N` of up to
/// 32 KiB, or a range of one.
fn small_request(rng: &mut Xoshiro256PlusPlus, close: bool) -> (Vec<u8>, Expect) {
    match rng.random_range(0..4u8) {
        0 => (get("/plaintext", close, ""), Expect::Exact(b"Hello, World!")),
        1 => (get("/json", close, ""), Expect::Exact(br#"{"message":"Hello, World!"}"#)),
        2 => {
            let n = rng.random_range(0..=32_768u64);
            (get(&format!("/bytes/{n}"), close, ""), Expect::Pattern { status: 200, from: 0, len: n })
        }
        _ => ranged(rng, 32_768, close),
    }
}

/// `GET /bytes/N` of 1 to 8 MiB, a quarter of them with a `Range`.
fn download_request(rng: &mut Xoshiro256PlusPlus) -> (Vec<u8>, Expect) {
    if rng.random_ratio(1, 4) {
        return ranged(rng, 8 << 20, false);
    }
    let n = rng.random_range(1u64 << 20..=8 << 20);
    (get(&format!("/bytes/{n}"), false, ""), Expect::Pattern { status: 200, from: 0, len: n })
}

/// `GET /bytes/N` with `Range: bytes=A-B` inside it: 206 and bytes A to B.
fn ranged(rng: &mut Xoshiro256PlusPlus, max: u64, close: bool) -> (Vec<u8>, Expect) {
    let n = rng.random_range(2..=max);
    let from = rng.random_range(0..n - 1);
    let to = rng.random_range(from..n);
    let request = get(&format!("/bytes/{n}"), close, &format!("Range: bytes={from}-{to}\r\n"));
    (request, Expect::Pattern { status: 206, from, len: to - from + 1 })
}

/// What the prober saw: probes made, and those that failed.
#[derive(Debug, Default)]
pub struct Probes {
    /// `/healthz` probes.
    pub healthz: u64,
    /// `/metrics` scrapes.
    pub scrapes: u64,
    /// The ones that failed (`worker` says which).
    pub failures: Vec<Failure>,
    /// The most connections a scrape showed: the application's, the stack's
    /// outside TIME-WAIT.
    pub max_connections: (f64, f64),
    /// The server's RSS at each scrape, KiB: the lowest and the highest.
    pub rss_range: Option<(u64, u64)>,
}

/// The prober: `/healthz` every second and `/metrics` every five, each on a
/// connection of its own, from client `client` (namespace `ns`).
pub struct Prober {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Probes>,
}

/// How long a probe may take, connect included.
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
/// Between two `/healthz` probes.
pub const PROBE_EVERY: Duration = Duration::from_secs(1);
/// `/metrics` every this many probes.
const SCRAPE_EVERY: u64 = 5;
/// A progress line (RSS, connections) on stderr every this many scrapes.
const PROGRESS_EVERY: u64 = 6;

impl Prober {
    /// Starts probing `server` from `client` in namespace `ns`; with each
    /// scrape, reads the RSS of process `server_pid`.
    #[must_use]
    pub fn start(server: SocketAddrV4, client: usize, ns: String, server_pid: u32) -> Prober {
        let stop = Arc::new(AtomicBool::new(false));
        let flag = Arc::clone(&stop);
        let thread = std::thread::spawn(move || {
            let mut probes = Probes::default();
            let _in_ns = match testbed::enter(&ns) {
                Ok(guard) => guard,
                Err(e) => {
                    let now = Instant::now();
                    probes.failures.push(Failure {
                        worker: "healthz",
                        client,
                        start: now,
                        end: now,
                        what: e.to_string(),
                    });
                    return probes;
                }
            };
            let started = Instant::now();
            let mut next = started;
            while !flag.load(Ordering::Relaxed) {
                let start = Instant::now();
                probes.healthz += 1;
                if let Err(what) = fetch(server, "/healthz", &Expect::Exact(b"ok\n"), PROBE_TIMEOUT) {
                    probes.failures.push(Failure { worker: "healthz", client, start, end: Instant::now(), what });
                }
                if probes.healthz % SCRAPE_EVERY == 0 {
                    let start = Instant::now();
                    probes.scrapes += 1;
                    if let Some(rss) = crate::stats::rss_kib(server_pid) {
                        let (low, high) = probes.rss_range.unwrap_or((rss, rss));
                        probes.rss_range = Some((low.min(rss), high.max(rss)));
                    }
                    match fetch(server, "/metrics", &Expect::Any, Duration::from_secs(5)) {
                        Ok(text) => {
                            let c = connections(&text);
                            if probes.scrapes % PROGRESS_EVERY == 0 {
                                let rss = crate::stats::rss_kib(server_pid).map_or(0.0, |k| k as f64 / 1024.0);
                                let t = started.elapsed().as_secs();
                                eprintln!(
                                    "soak: {t} s: RSS {rss:.1} MiB, connections {} / {} (+{} in TIME-WAIT)",
                                    c.app, c.stack, c.time_wait
                                );
                            }
                            probes.max_connections.0 = probes.max_connections.0.max(c.app);
                            probes.max_connections.1 = probes.max_connections.1.max(c.stack);
                        }
                        Err(what) => {
                            probes.failures.push(Failure {
                                worker: "metrics",
                                client,
                                start,
                                end: Instant::now(),
                                what,
                            });
                        }
                    }
                }
                next += PROBE_EVERY;
                let now = Instant::now();
                if next > now {
                    std::thread::sleep(next - now);
                } else {
                    next = now;
                }
            }
            probes
        });
        Prober { stop, thread }
    }

    /// Stops it and returns what it saw.
    #[must_use]
    pub fn stop(self) -> Probes {
        self.stop.store(true, Ordering::Relaxed);
        self.thread.join().unwrap_or_default()
    }
}

/// One `GET path` on a connection of its own, checked against `expect`:
/// the body, or why it failed. The calling thread must be in a client
/// namespace.
///
/// # Errors
///
/// What went wrong, in one line.
pub fn fetch(server: SocketAddrV4, path: &str, expect: &Expect, timeout: Duration) -> Result<String, String> {
    let describe = |e: Outcome| match e {
        Outcome::Error(e) => e,
        Outcome::Wrong(e) => format!("wrong: {e}"),
    };
    let mut conn = Conn::connect(server, None, timeout, timeout).map_err(describe)?;
    conn.send(&get(path, true, "")).map_err(describe)?;
    let (_, body) = conn.response(expect).map_err(describe)?;
    Ok(String::from_utf8_lossy(&body).into_owned())
}

/// Connections in a scrape, over every shard.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Connections {
    /// The application's (`fairway_active_connections`).
    pub app: f64,
    /// The stack's outside TIME-WAIT (`fairway_tcp_connections` less
    /// `fairway_tcp_time_wait_connections`).
    pub stack: f64,
    /// The stack's in TIME-WAIT.
    pub time_wait: f64,
}

impl Connections {
    /// Unknown (no scrape yet).
    pub const UNKNOWN: Connections = Connections { app: f64::NAN, stack: f64::NAN, time_wait: f64::NAN };

    /// Whether the connections outside TIME-WAIT are at most `other`'s.
    #[must_use]
    pub fn open_at_most(&self, other: &Connections) -> bool {
        self.app <= other.app && self.stack <= other.stack
    }

    /// The fewest of each.
    #[must_use]
    pub fn min(self, other: Connections) -> Connections {
        Connections {
            app: self.app.min(other.app),
            stack: self.stack.min(other.stack),
            time_wait: self.time_wait.min(other.time_wait),
        }
    }
}

/// The connections a `/metrics` scrape shows.
#[must_use]
pub fn connections(text: &str) -> Connections {
    let sum = |name| crate::platform::metric_samples(text, name).iter().map(|(_, v)| v).sum::<f64>();
    let time_wait = sum("fairway_tcp_time_wait_connections");
    Connections { app: sum("fairway_active_connections"), stack: sum("fairway_tcp_connections") - time_wait, time_wait }
}
