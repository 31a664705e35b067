//! RTT fairness on the real testbed: the kernel's own TCP in client
//! namespaces, uploading to a server or downloading from it through one
//! shared bottleneck. The server is Fairway over AF_XDP, Fairway on the
//! kernel backend, or nginx (plain kernel TCP: the uncontrolled baseline).
//!
//! Each client's own link carries only its access delay (half its RTT in
//! each direction); the bottleneck is one emulated link in front of the
//! server ([`TestbedConfig::server_link`]) that every flow crosses, with the
//! rate and a drop-tail queue.
//!
//! # A run
//!
//! Every client runs a small Python program (kernel sockets) that waits for
//! a common start, then connects and streams an endless `POST /upload`, or
//! reads an endless `GET /bytes/…`, while sampling its socket's
//! `TCP_INFO` every [`SAMPLE_EVERY`]: bytes acknowledged (uploads) or received
//! (downloads), SRTT and min-RTT. The last client (the longest RTT) may
//! start late ([`Experiment::join_at`]), to measure how fast a newcomer
//! gets its share. Uploaders pick their congestion control per socket
//! (`TCP_CONGESTION`, before connecting): the per-namespace
//! `net.ipv4.tcp_congestion_control` would do, but outside the initial
//! namespace it refuses algorithms missing from the host's
//! `tcp_allowed_congestion_control` (here `reno bbr`, not `cubic`), which
//! this must not change; root may pick any loaded one per socket. Downloads
//! are sent by the server: Fairway's own CUBIC over AF_XDP, the server
//! namespace's default (the host's) on the kernel backend and nginx.
//!
//! What is measured, over the steady part (from [`Experiment::warmup`] to
//! the end):
//! - **goodput** per flow: payload bytes over the span;
//! - **Jain's index** of the goodputs, and the highest over the lowest;
//! - **utilisation**: the wire bytes (each 1448-byte payload travels in a
//!   1514-byte frame) over the bottleneck's rate;
//! - **queueing delay** at the bottleneck: the mean of a ping every 100 ms
//!   from client 0 through the loaded link, minus the least of five pings
//!   before the transfers start; for uploads also the senders' own view,
//!   the mean of SRTT − min-RTT over flows and samples;
//! - **convergence**: how long after it starts the late flow's goodput over
//!   the last 500 ms first reaches 90 % of an equal share of what all flows
//!   delivered in the steady part.
//!
//! Everything here needs root and stays inside the testbed's namespaces.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fairway::config::Config;
use fairway_stack::fairness::{jain_index, wire_factor};

use crate::fairness::Chart;
use crate::nginx::{NginxConfig, SiteDir, bytes_path};
use crate::plot::{self, Panel, Series};
use crate::real_peers::HTTP_PORT;
use crate::served::{Served, curl_status};
use crate::testbed::{self, KernelAddress, LinkParams, ServerProcess, Spawned, Testbed, TestbedConfig};

/// The payload of a full segment with timestamps on a 1500-byte MTU.
const MSS: u32 = 1448;
/// How often a client samples its socket.
const SAMPLE_EVERY: Duration = Duration::from_millis(50);
/// The window a late flow's goodput is averaged over for convergence.
const CONVERGENCE_WINDOW: Duration = Duration::from_millis(500);
/// The ping probe's interval.
const PING_EVERY: Duration = Duration::from_millis(100);
/// The bottleneck's drop-tail queue, in time at its rate: as on the
/// simulated network ([`crate::fairness::Params::queue_ms`]).
pub const QUEUE: Duration = Duration::from_millis(100);

/// The bytes `queue` holds at `bps` (at least 16 full frames).
#[must_use]
pub fn queue_bytes(bps: u64, queue: Duration) -> u64 {
    ((bps as f64 / 8.0 * queue.as_secs_f64()) as u64).max(16 * 1514)
}

/// The length of the endless download.
const ENDLESS: u64 = 100_000_000_000;

/// Which way the data goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Transfer {
    /// Clients send to the server's `/upload`.
    Upload,
    /// Clients read from the server's `/bytes/…`.
    Download,
}

impl Transfer {
    /// `up` or `down`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Transfer::Upload => "up",
            Transfer::Download => "down",
        }
    }
}

/// The server the clients talk to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum LabServer {
    /// Fairway over AF_XDP (one shard) with this `--fairness` policy.
    Afxdp(&'static str),
    /// Fairway on the kernel backend (one shard) with this policy.
    Kernel(&'static str),
    /// nginx over the kernel stack, one worker: no policy at all.
    Nginx,
}

impl LabServer {
    /// Parses `afxdp:POLICY`, `kernel:POLICY` or `nginx`.
    #[must_use]
    pub fn parse(text: &str) -> Option<LabServer> {
        let policy = |p: &str| ["off", "seed", "equal-rate"].into_iter().find(|known| *known == p);
        match text.split_once(':') {
            Some(("afxdp", p)) => policy(p).map(LabServer::Afxdp),
            Some(("kernel", p)) => policy(p).map(LabServer::Kernel),
            None if text == "nginx" => Some(LabServer::Nginx),
            _ => None,
        }
    }

    /// `fairway/afxdp`, `fairway/kernel` or `nginx`.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            LabServer::Afxdp(_) => "fairway/afxdp",
            LabServer::Kernel(_) => "fairway/kernel",
            LabServer::Nginx => "nginx",
        }
    }

    /// `nginx`, `fairway/afxdp off`, …: the server and its policy.
    #[must_use]
    pub fn label(self) -> String {
        match self {
            LabServer::Nginx => "nginx".to_owned(),
            _ => format!("{} {}", self.name(), self.policy()),
        }
    }

    /// The label as a file-name part: `nginx`, `afxdp-off`, …
    #[must_use]
    pub fn slug(self) -> String {
        match self {
            LabServer::Afxdp(p) => format!("afxdp-{p}"),
            LabServer::Kernel(p) => format!("kernel-{p}"),
            LabServer::Nginx => "nginx".to_owned(),
        }
    }

    /// The window-control policy (`off` for nginx).
    #[must_use]
    pub fn policy(self) -> &'static str {
        match self {
            LabServer::Afxdp(p) | LabServer::Kernel(p) => p,
            LabServer::Nginx => "off",
        }
    }

    /// Who sends a download: the server's TCP.
    #[must_use]
    pub fn download_sender(self) -> &'static str {
        match self {
            LabServer::Afxdp(_) => "fairway cubic",
            LabServer::Kernel(_) | LabServer::Nginx => "kernel default",
        }
    }
}

/// The experiment: who transfers, which way, through what.
#[derive(Debug, Clone)]
pub struct Experiment {
    /// Each client's round-trip time added by its access link (the link
    /// emulator delays each direction by half).
    pub rtts: Vec<Duration>,
    /// Which way the data goes.
    pub transfer: Transfer,
    /// The uploaders' kernel congestion control (`cubic`, `bbr`, `reno`);
    /// downloads are sent by the server, whatever this says.
    pub congestion_control: &'static str,
    /// The shared bottleneck's rate, bits per second.
    pub bottleneck_bps: u64,
    /// The bottleneck's drop-tail queue, bytes.
    pub queue_bytes: u64,
    /// How long the run lasts, from the common start.
    pub duration: Duration,
    /// The start of the run left out of the goodputs.
    pub warmup: Duration,
    /// When the last client starts (the others start at once); `None`:
    /// with the others. Must be before `warmup`.
    pub join_at: Option<Duration>,
    /// More flags for a Fairway server (`--initial-window 32`, …).
    pub server_flags: Vec<String>,
}

impl Experiment {
    /// Uploads from clients at `rtts` with `congestion_control` through a
    /// `bottleneck_bps` link with a drop-tail queue of [`QUEUE`] of its
    /// rate; 20 s, the first 6 measured out, all starting at once.
    #[must_use]
    pub fn uploads(rtts: Vec<Duration>, congestion_control: &'static str, bottleneck_bps: u64) -> Experiment {
        Experiment {
            rtts,
            transfer: Transfer::Upload,
            congestion_control,
            bottleneck_bps,
            queue_bytes: queue_bytes(bottleneck_bps, QUEUE),
            duration: Duration::from_secs(20),
            warmup: Duration::from_secs(6),
            join_at: None,
            server_flags: Vec::new(),
        }
    }

    /// The testbed for it under `prefix`: one client per RTT, one queue
    /// (one shard), the bottleneck in front of the server.
    #[must_use]
    pub fn testbed_config(&self, prefix: &str) -> TestbedConfig {
        let bottleneck = LinkParams {
            rate_bps: Some(self.bottleneck_bps),
            queue_bytes: Some(self.queue_bytes),
            ..LinkParams::default()
        };
        let mut config = TestbedConfig::new(prefix).clients(self.rtts.len()).queues(1).server_link(bottleneck);
        for (i, rtt) in self.rtts.iter().enumerate() {
            config = config.link(i, LinkParams::with_delay(*rtt / 2));
        }
        config
    }

    /// When client `i` starts.
    fn start_of(&self, i: usize) -> Duration {
        match self.join_at {
            Some(at) if i + 1 == self.rtts.len() && i > 0 => at,
            _ => Duration::ZERO,
        }
    }
}

/// One `TCP_INFO` sample of a client's socket.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample {
    /// Seconds since the common start.
    pub t: f64,
    /// Bytes acknowledged (uploads) or received (downloads) so far.
    pub bytes: u64,
    /// `tcpi_rtt`, microseconds.
    pub srtt_us: u32,
    /// `tcpi_min_rtt`, microseconds.
    pub min_rtt_us: u32,
    /// `tcpi_total_retrans`: segments the client retransmitted so far.
    pub retransmits: u32,
}

/// One flow's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowGoodput {
    /// The client.
    pub client: usize,
    /// Its access RTT.
    pub rtt: Duration,
    /// When it started, after the common start.
    pub started: Duration,
    /// Bytes moved over the steady part.
    pub bytes: u64,
    /// The steady part's length, seconds.
    pub seconds: f64,
    /// Every sample.
    pub samples: Vec<Sample>,
}

impl FlowGoodput {
    /// Goodput over the steady part, bits per second.
    #[must_use]
    pub fn bits_per_second(&self) -> f64 {
        if self.seconds > 0.0 { self.bytes as f64 * 8.0 / self.seconds } else { 0.0 }
    }

    /// Goodput over time: `(seconds since the common start, Mbit/s over
    /// the previous `window`)`, one point per sample.
    #[must_use]
    pub fn goodput_series(&self, window: Duration) -> Vec<(f64, f64)> {
        let w = window.as_secs_f64();
        let mut from = 0;
        let mut points = Vec::with_capacity(self.samples.len());
        for s in &self.samples {
            while self.samples[from].t < s.t - w - 1e-9 {
                from += 1;
            }
            let first = &self.samples[from];
            if s.t - first.t >= w * 0.5 {
                points.push((s.t, (s.bytes - first.bytes) as f64 * 8.0 / (s.t - first.t) / 1e6));
            }
        }
        points
    }
}

/// Every flow of one run, and what was measured across them.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// By client.
    pub flows: Vec<FlowGoodput>,
    /// The mean queueing delay at the bottleneck from the ping probe, ms.
    pub ping_queue_ms: Option<f64>,
    /// For uploads: the mean of the senders' SRTT − min-RTT, ms.
    pub sender_queue_ms: Option<f64>,
    /// How long after it started the late flow reached 90 % of its share
    /// (`None`: no late flow, or it never did).
    pub convergence: Option<Duration>,
    /// Whether there was a late flow.
    pub had_late_flow: bool,
    /// Fairway over AF_XDP: careful resume's jumps and safe retreats in
    /// the run, from the server's counters (`None` for other servers).
    pub fast_start: Option<(u64, u64)>,
}

impl Outcome {
    /// Jain's index of the goodputs.
    #[must_use]
    pub fn jain(&self) -> f64 {
        jain_index(&self.rates())
    }

    /// The goodputs, bits per second.
    #[must_use]
    pub fn rates(&self) -> Vec<f64> {
        self.flows.iter().map(FlowGoodput::bits_per_second).collect()
    }

    /// The highest goodput over the lowest (infinite when one flow got
    /// nothing).
    #[must_use]
    pub fn max_min_ratio(&self) -> f64 {
        let rates = self.rates();
        let max = rates.iter().copied().fold(0.0, f64::max);
        let min = rates.iter().copied().fold(f64::INFINITY, f64::min);
        if min > 0.0 { max / min } else { f64::INFINITY }
    }

    /// The wire bytes of the goodputs over the bottleneck's rate.
    #[must_use]
    pub fn utilisation(&self, bottleneck_bps: u64) -> f64 {
        self.rates().iter().sum::<f64>() * wire_factor(MSS) / bottleneck_bps as f64
    }

    /// One line per flow, then the figures.
    #[must_use]
    pub fn describe(&self) -> String {
        let mut text = String::new();
        for f in &self.flows {
            let last = f.samples.last();
            text.push_str(&format!(
                "client {} RTT {:?} (from {:?}): {:.2} Mbit/s ({} B in {:.1} s, srtt {} µs, min-RTT {} µs, {} retransmitted)\n",
                f.client,
                f.rtt,
                f.started,
                f.bits_per_second() / 1e6,
                f.bytes,
                f.seconds,
                last.map_or(0, |s| s.srtt_us),
                last.map_or(0, |s| s.min_rtt_us),
                last.map_or(0, |s| s.retransmits),
            ));
        }
        text.push_str(&format!(
            "J = {:.4}, max/min = {:.2}, queue {} ms (ping), {} ms (senders), late flow converged in {}",
            self.jain(),
            self.max_min_ratio(),
            ms_or_dash(self.ping_queue_ms),
            ms_or_dash(self.sender_queue_ms),
            self.convergence_text()
        ));
        text
    }

    /// The convergence time in seconds, `never`, or `—` without a late flow.
    #[must_use]
    pub fn convergence_text(&self) -> String {
        match (self.had_late_flow, self.convergence) {
            (false, _) => "—".to_owned(),
            (true, None) => "never".to_owned(),
            (true, Some(c)) => format!("{:.2} s", c.as_secs_f64()),
        }
    }
}

fn ms_or_dash(ms: Option<f64>) -> String {
    ms.map_or_else(|| "—".to_owned(), |v| format!("{v:.1}"))
}

/// The client: waits for the file named by its fourth argument (the common
/// start), sleeps its delay, connects with the congestion control its fifth
/// argument names (`-` for the default), then streams an endless
/// `POST /upload` (`up`) or reads `GET` of the path in its last argument
/// (`down`), a second thread moving the data while the main one samples
/// `TCP_INFO` every [`SAMPLE_EVERY`] (its last argument) until the run's end: `tcpi_rtt` (offset 68),
/// `tcpi_total_retrans` (100), `tcpi_bytes_acked` (120),
/// `tcpi_bytes_received` (128), `tcpi_min_rtt` (148). Prints `ready`
/// first, then `t bytes srtt_us min_rtt_us retransmits` per sample, `t`
/// from the common start.
const CLIENT: &str = r#"
import os, socket, struct, sys, threading, time
host, port, duration, go, cc, mode, delay, path, every = sys.argv[1:10]
port, duration, delay, every = int(port), float(duration), float(delay), float(every)
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.001)
start = time.monotonic()
time.sleep(delay)
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
if cc != "-":
    s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
s.settimeout(duration + 30)
s.connect((host, port))
if cc != "-":
    got = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()
    if got != cc:
        sys.exit(f"congestion control {got}, not {cc}")
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
if mode == "up":
    s.sendall(b"POST /upload HTTP/1.1\r\nHost: fairway\r\nContent-Length: 100000000000\r\n\r\n")
    def move():
        chunk = b"u" * 65536
        try:
            while True:
                s.sendall(chunk)
        except OSError:
            pass
    at = 120
else:
    s.sendall(f"GET {path} HTTP/1.1\r\nHost: fairway\r\n\r\n".encode())
    def move():
        buf = bytearray(1 << 20)
        try:
            while s.recv_into(buf):
                pass
        except OSError:
            pass
    at = 128
threading.Thread(target=move, daemon=True).start()
while True:
    info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
    moved = struct.unpack_from("Q", info, at)[0]
    srtt = struct.unpack_from("I", info, 68)[0]
    min_rtt = struct.unpack_from("I", info, 148)[0]
    retrans = struct.unpack_from("I", info, 100)[0]
    t = time.monotonic() - start
    print(f"{t:.4f} {moved} {srtt} {min_rtt} {retrans}", flush=True)
    if t >= duration:
        break
    time.sleep(every)
os._exit(0)
"#;

/// Runs `exp` on `tb` (built from [`Experiment::testbed_config`], with a
/// server already started): starts every client at the common start (the
/// late one later) and measures each, with the ping probe from client 0.
///
/// # Errors
///
/// When a client cannot be started or fails.
pub fn run_clients(tb: &Testbed, exp: &Experiment) -> Result<Outcome, String> {
    if exp.join_at.is_some_and(|j| j >= exp.warmup) {
        return Err("the late flow must join before the warm-up ends".to_owned());
    }
    let host = tb.server_ip().to_string();
    let port = HTTP_PORT.to_string();
    let secs = format!("{:.3}", exp.duration.as_secs_f64());
    let go = std::env::temp_dir().join(format!("fairway-fairness-go-{}", tb.prefix()));
    let _ = std::fs::remove_file(&go);
    let go_arg = go.display().to_string();
    let path = bytes_path(ENDLESS);
    let every = format!("{:.3}", SAMPLE_EVERY.as_secs_f64());
    let base_ms = ping_base(tb, &host)?;
    let mut clients = Vec::new();
    for client in 0..exp.rtts.len() {
        let delay = format!("{:.3}", exp.start_of(client).as_secs_f64());
        let cc = match exp.transfer {
            Transfer::Upload => exp.congestion_control,
            Transfer::Download => "-",
        };
        let cmd = [
            "python3",
            "-u",
            "-c",
            CLIENT,
            &host,
            &port,
            &secs,
            &go_arg,
            cc,
            exp.transfer.name(),
            &delay,
            &path,
            &every,
        ];
        let mut c = testbed::spawn(&tb.client_ns(client), &cmd).map_err(|e| e.to_string())?;
        c.wait_for_stdout("ready", Duration::from_secs(20)).map_err(|e| format!("client {client}: {e}"))?;
        clients.push(c);
    }
    std::fs::write(&go, b"go").map_err(|e| format!("writing {go_arg}: {e}"))?;
    let probe = ping_probe(tb, &host, exp.duration)?;
    let started = Instant::now();
    while started.elapsed() < Duration::from_millis(500) && clients.iter_mut().any(|c| c.try_wait().is_none()) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_file(&go);
    let mut flows = Vec::new();
    for (client, c) in clients.into_iter().enumerate() {
        let out =
            c.wait_timeout(exp.duration + Duration::from_secs(30)).map_err(|e| format!("client {client}: {e}"))?;
        if !out.success() {
            return Err(format!("client {client} failed: {}", out.stderr_text()));
        }
        let samples = parse_samples(&out.stdout_text());
        flows.push(steady_goodput(client, exp, samples)?);
    }
    let pings = probe.wait_timeout(Duration::from_secs(10)).map_err(|e| format!("ping: {e}"))?;
    let ping_queue_ms = mean_queue_ms(&parse_pings(&pings.stdout_text()), exp.warmup, base_ms);
    let sender_queue_ms = match exp.transfer {
        Transfer::Upload => sender_queue_ms(&flows, exp.warmup.as_secs_f64()),
        Transfer::Download => None,
    };
    let late = exp.join_at.is_some() && flows.len() > 1;
    let convergence = if late { convergence(&flows, exp) } else { None };
    Ok(Outcome { flows, ping_queue_ms, sender_queue_ms, convergence, had_late_flow: late, fast_start: None })
}

/// The least RTT of five pings from client 0 over the idle link, ms.
fn ping_base(tb: &Testbed, host: &str) -> Result<f64, String> {
    let out =
        testbed::exec(&tb.client_ns(0), &["ping", "-n", "-c", "5", "-i", "0.1", host]).map_err(|e| e.to_string())?;
    let times: Vec<f64> = parse_pings(&out.stdout_text()).into_iter().map(|(_, ms)| ms).collect();
    times.into_iter().reduce(f64::min).ok_or_else(|| format!("no ping answered before the run: {}", out.stdout_text()))
}

/// A ping every [`PING_EVERY`] from client 0 for `duration`.
fn ping_probe(tb: &Testbed, host: &str, duration: Duration) -> Result<Spawned, String> {
    let interval = format!("{:.3}", PING_EVERY.as_secs_f64());
    let deadline = duration.as_secs().max(1).to_string();
    testbed::spawn(&tb.client_ns(0), &["ping", "-n", "-i", &interval, "-w", &deadline, host]).map_err(|e| e.to_string())
}

/// `(icmp_seq, ms)` of each answered ping in `ping`'s output.
fn parse_pings(text: &str) -> Vec<(u64, f64)> {
    text.lines()
        .filter_map(|line| {
            let seq = line.split("icmp_seq=").nth(1)?.split_whitespace().next()?.parse().ok()?;
            let ms = line.split("time=").nth(1)?.split_whitespace().next()?.parse().ok()?;
            Some((seq, ms))
        })
        .collect()
}

/// The mean of the pings sent after `warmup` (ping numbers them from 1,
/// one per [`PING_EVERY`]), less `base_ms`.
fn mean_queue_ms(pings: &[(u64, f64)], warmup: Duration, base_ms: f64) -> Option<f64> {
    let steady: Vec<f64> = pings
        .iter()
        .filter(|(seq, _)| (*seq - 1) as f64 * PING_EVERY.as_secs_f64() >= warmup.as_secs_f64())
        .map(|(_, ms)| (ms - base_ms).max(0.0))
        .collect();
    (!steady.is_empty()).then(|| steady.iter().sum::<f64>() / steady.len() as f64)
}

/// The mean over flows and steady samples of SRTT − min-RTT, ms.
fn sender_queue_ms(flows: &[FlowGoodput], warmup: f64) -> Option<f64> {
    let delays: Vec<f64> = flows
        .iter()
        .flat_map(|f| f.samples.iter().filter(|s| s.t >= warmup && s.min_rtt_us > 0))
        .map(|s| f64::from(s.srtt_us.saturating_sub(s.min_rtt_us)) / 1e3)
        .collect();
    (!delays.is_empty()).then(|| delays.iter().sum::<f64>() / delays.len() as f64)
}

/// How long after it started the late (last) flow's goodput over the last
/// [`CONVERGENCE_WINDOW`] first reached 90 % of an equal share of what all
/// flows delivered in the steady part.
fn convergence(flows: &[FlowGoodput], exp: &Experiment) -> Option<Duration> {
    let total: f64 = flows.iter().map(FlowGoodput::bits_per_second).sum();
    let target = 0.9 * total / flows.len() as f64 / 1e6;
    let late = flows.last()?;
    let start = exp.start_of(late.client).as_secs_f64();
    late.goodput_series(CONVERGENCE_WINDOW)
        .into_iter()
        .find(|&(t, mbps)| t - start >= CONVERGENCE_WINDOW.as_secs_f64() && mbps >= target)
        .map(|(t, _)| Duration::from_secs_f64(t - start))
}

/// `(t, bytes, srtt_us, min_rtt_us, retransmits)` samples from a client's output.
fn parse_samples(text: &str) -> Vec<Sample> {
    text.lines()
        .filter_map(|line| {
            let mut w = line.split_whitespace();
            Some(Sample {
                t: w.next()?.parse().ok()?,
                bytes: w.next()?.parse().ok()?,
                srtt_us: w.next()?.parse().ok()?,
                min_rtt_us: w.next()?.parse().ok()?,
                retransmits: w.next()?.parse().ok()?,
            })
        })
        .collect()
}

/// The goodput from the first sample at or after the warm-up to the last.
fn steady_goodput(client: usize, exp: &Experiment, samples: Vec<Sample>) -> Result<FlowGoodput, String> {
    let warmup = exp.warmup.as_secs_f64();
    let first = samples.iter().find(|s| s.t >= warmup).ok_or_else(|| format!("client {client}: no steady samples"))?;
    let last = samples.last().expect("there is a first");
    Ok(FlowGoodput {
        client,
        rtt: exp.rtts[client],
        started: exp.start_of(client),
        bytes: last.bytes.saturating_sub(first.bytes),
        seconds: last.t - first.t,
        samples,
    })
}

/// A server running on a testbed.
pub(crate) enum Running {
    Fairway(Box<Served>),
    Kernel { stop: Arc<AtomicBool>, thread: JoinHandle<std::io::Result<()>>, _address: KernelAddress },
    Nginx { nginx: ServerProcess, _site: SiteDir, _address: KernelAddress },
}

impl Running {
    /// Starts `server` in `tb`'s server namespace, sharing `bottleneck_bps`
    /// (its `--capacity`), and waits until client 0 gets an HTTP answer.
    /// nginx serves one endless (sparse) body.
    fn start(tb: &Testbed, server: LabServer, bottleneck_bps: u64, flags: &[String]) -> Result<Running, String> {
        Running::start_serving(tb, server, Some(bottleneck_bps), &[ENDLESS], flags)
    }

    /// [`start`](Self::start) with `--capacity` only if `capacity_bps` is
    /// given, nginx serving a body of each of `sizes` at
    /// [`bytes_path`](crate::nginx::bytes_path) (Fairway serves any), and
    /// `extra` flags for a Fairway server (nginx ignores them).
    pub(crate) fn start_serving(
        tb: &Testbed,
        server: LabServer,
        capacity_bps: Option<u64>,
        sizes: &[u64],
        extra: &[String],
    ) -> Result<Running, String> {
        let placed = tb.afxdp_flags();
        let capacity = capacity_bps.map(|bps| format!("{bps}bit"));
        let listen = format!("{}:{HTTP_PORT}", tb.server_ip());
        // One shard, the policy, the bottleneck as the capacity, and no
        // limit the endless transfers could reach.
        let common = |policy| {
            let mut flags = vec!["--shards", "1", "--fairness", policy, "--max-body", "100gb", "--max-bytes", "100gb"];
            if let Some(capacity) = &capacity {
                flags.extend(["--capacity", capacity.as_str()]);
            }
            flags.extend(extra.iter().map(String::as_str));
            flags
        };
        let running = match server {
            LabServer::Afxdp(policy) => {
                let mut own: Vec<&str> = placed.iter().map(String::as_str).collect();
                own.extend(["--queues", "1"]);
                Running::Fairway(Box::new(Served::start(tb, &[own.as_slice(), &common(policy)].concat())))
            }
            LabServer::Kernel(policy) => {
                let address = KernelAddress::add(tb).map_err(|e| e.to_string())?;
                let own = ["fairway", "--backend", "kernel", "--listen", &listen];
                let args = [own.as_slice(), &common(policy)].concat();
                let config = Config::load(args, None).map_err(|e| format!("kernel backend flags: {e}"))?;
                let stop = Arc::new(AtomicBool::new(false));
                let flag = Arc::clone(&stop);
                // Threads inherit the namespace of the thread that starts them.
                let thread = testbed::in_netns(&tb.server_ns(), move || {
                    std::thread::spawn(move || fairway::backend::kernel::serve(&config, flag))
                })
                .map_err(|e| e.to_string())?;
                Running::Kernel { stop, thread, _address: address }
            }
            LabServer::Nginx => {
                let address = KernelAddress::add(tb).map_err(|e| e.to_string())?;
                let addr = listen.parse().map_err(|e| format!("{listen}: {e}"))?;
                let mut site = SiteDir::new(&NginxConfig::baseline(addr)).map_err(|e| format!("nginx site: {e}"))?;
                for &n in sizes {
                    site = site.with_sparse(&bytes_path(n), n).map_err(|e| format!("nginx site: {e}"))?;
                }
                let nginx = site.start(&tb.server_ns()).map_err(|e| format!("starting nginx: {e}"))?;
                Running::Nginx { nginx, _site: site, _address: address }
            }
        };
        let deadline = Instant::now() + Duration::from_secs(15);
        while curl_status(tb, 0, "/healthz", Duration::from_secs(2)) == 0 {
            if Instant::now() > deadline {
                let why = match &running {
                    Running::Nginx { nginx, .. } => nginx.complaints(),
                    _ => String::new(),
                };
                running.stop();
                return Err(format!("{} does not answer HTTP {why}", server.name()));
            }
            std::thread::sleep(Duration::from_millis(200));
        }
        Ok(running)
    }

    /// Stops the server; for Fairway over AF_XDP, careful resume's jumps
    /// and safe retreats over its shards.
    pub(crate) fn stop(self) -> Option<(u64, u64)> {
        match self {
            Running::Fairway(served) => {
                let reports = served.stop();
                let sum = |f: fn(&fairway::backend::ShardReport) -> u64| reports.iter().map(f).sum();
                Some((sum(|r| r.counters.fast_start_jumps), sum(|r| r.counters.fast_start_retreats)))
            }
            Running::Kernel { stop, thread, .. } => {
                stop.store(true, Ordering::Relaxed);
                let _ = thread.join();
                None
            }
            Running::Nginx { mut nginx, .. } => {
                drop(nginx.stop());
                None
            }
        }
    }
}

/// One whole run on a fresh testbed under `prefix`: the testbed up, the
/// server started (with the bottleneck's rate as `--capacity`), the
/// clients, the server stopped and the testbed removed. Fairway over
/// AF_XDP needs a build with the `afxdp` feature.
///
/// # Errors
///
/// When the testbed or the server cannot be started or a client fails.
///
/// # Panics
///
/// When Fairway over AF_XDP does not start (see [`Served::start`]).
pub fn run_on_fresh_testbed(prefix: &str, exp: &Experiment, server: LabServer) -> Result<Outcome, String> {
    testbed::require_root().map_err(|e| e.to_string())?;
    let tb = Testbed::up(exp.testbed_config(prefix)).map_err(|e| format!("testbed up: {e}"))?;
    let running = Running::start(&tb, server, exp.bottleneck_bps, &exp.server_flags)?;
    let outcome = run_clients(&tb, exp);
    let fast_start = running.stop();
    outcome.map(|o| Outcome { fast_start, ..o })
}

/// The kernel senders the testbed grid's uploads run.
pub const GRID_SENDERS: [&str; 2] = ["cubic", "bbr"];
/// The servers the testbed grid compares by default.
pub const GRID_SERVERS: [LabServer; 4] =
    [LabServer::Nginx, LabServer::Afxdp("off"), LabServer::Afxdp("equal-rate"), LabServer::Kernel("equal-rate")];

/// One cell of the testbed grid.
#[derive(Debug, Clone)]
pub struct GridCell {
    /// The experiment.
    pub experiment: Experiment,
    /// The server.
    pub server: LabServer,
}

impl GridCell {
    /// What the cell is, as the table's first columns: N, way, senders,
    /// server, policy.
    #[must_use]
    pub fn columns(&self) -> [String; 5] {
        [
            self.experiment.rtts.len().to_string(),
            self.experiment.transfer.name().to_owned(),
            self.senders(),
            self.server.name().to_owned(),
            self.server.policy().to_owned(),
        ]
    }

    /// Who sends: the uploaders' congestion control, or the server's.
    #[must_use]
    pub fn senders(&self) -> String {
        match self.experiment.transfer {
            Transfer::Upload => format!("kernel {}", self.experiment.congestion_control),
            Transfer::Download => self.server.download_sender().to_owned(),
        }
    }
}

/// The access RTTs of `n` clients, as on the simulated network
/// ([`crate::fairness::rtts`]): geometric from 4 to 256 ms (4 and 256 for
/// two, 4, 16, 64 and 256 for four; 256 alone).
#[must_use]
pub fn grid_rtts(n: usize) -> Vec<Duration> {
    if n <= 1 {
        return vec![Duration::from_millis(256)];
    }
    (0..n).map(|i| Duration::from_secs_f64(0.004 * 64f64.powf(i as f64 / (n - 1) as f64))).collect()
}

/// What the testbed grid runs.
#[derive(Debug, Clone)]
pub struct GridPlan {
    /// Client counts.
    pub ns: Vec<usize>,
    /// Which ways.
    pub transfers: Vec<Transfer>,
    /// The uploaders' congestion controls.
    pub senders: Vec<&'static str>,
    /// The servers.
    pub servers: Vec<LabServer>,
    /// The bottleneck, bits per second.
    pub bottleneck_bps: u64,
    /// Its drop-tail queue, in time at that rate.
    pub queue: Duration,
    /// Each run's length.
    pub duration: Duration,
    /// Each run's warm-up.
    pub warmup: Duration,
    /// When the longest-RTT flow joins.
    pub join_at: Duration,
    /// More flags for the Fairway servers.
    pub server_flags: Vec<String>,
}

impl GridPlan {
    /// The cells: for each `n`, uploads with each sender and downloads,
    /// each against every server.
    #[must_use]
    pub fn cells(&self) -> Vec<GridCell> {
        let mut cells = Vec::new();
        for &n in &self.ns {
            for &transfer in &self.transfers {
                let senders: &[&'static str] = match transfer {
                    Transfer::Upload => &self.senders,
                    Transfer::Download => &["-"],
                };
                for &congestion_control in senders {
                    for &server in &self.servers {
                        let mut experiment = Experiment::uploads(grid_rtts(n), congestion_control, self.bottleneck_bps);
                        experiment.transfer = transfer;
                        experiment.queue_bytes = queue_bytes(self.bottleneck_bps, self.queue);
                        experiment.duration = self.duration;
                        experiment.warmup = self.warmup;
                        experiment.join_at = (n > 1).then_some(self.join_at);
                        experiment.server_flags.clone_from(&self.server_flags);
                        cells.push(GridCell { experiment, server });
                    }
                }
            }
        }
        cells
    }
}

/// The Markdown table of `results` (a cell and what it measured, or why it
/// failed).
#[must_use]
pub fn report(results: &[(GridCell, Result<Outcome, String>)]) -> Vec<String> {
    let mut lines = vec![
        "| N | way | senders | server | policy | goodput per flow (Mbit/s) | J | max/min | utilisation | queue, ping (ms) | SRTT − min-RTT (ms) | join → 90 % (s) |".to_owned(),
        "|---|---|---|---|---|---|---|---|---|---|---|---|".to_owned(),
    ];
    for (cell, result) in results {
        let e = &cell.experiment;
        let head = format!("| {} |", cell.columns().join(" | "));
        lines.push(match result {
            Ok(o) => {
                let rates: Vec<String> = o.rates().iter().map(|r| format!("{:.2}", r / 1e6)).collect();
                format!(
                    "{head} {} | {:.3} | {:.2} | {:.1} % | {} | {} | {}{} |",
                    rates.join(" / "),
                    o.jain(),
                    o.max_min_ratio(),
                    o.utilisation(e.bottleneck_bps) * 100.0,
                    ms_or_dash(o.ping_queue_ms),
                    ms_or_dash(o.sender_queue_ms),
                    o.convergence_text().trim_end_matches(" s"),
                    fast_start_text(o.fast_start),
                )
            }
            Err(why) => format!("{head} failed: {} | | | | | | |", why.lines().next().unwrap_or("").replace('|', "/")),
        });
    }
    lines
}

/// Careful resume's jumps and retreats over the whole run, when there
/// were any: ` (1 j)`, ` (1 j, 1 r)`.
fn fast_start_text(counts: Option<(u64, u64)>) -> String {
    match counts {
        Some((0, 0)) | None => String::new(),
        Some((j, 0)) => format!(" ({j} j)"),
        Some((j, r)) => format!(" ({j} j, {r} r)"),
    }
}

/// The summary line: Jain's index with `equal-rate` and with `off` (both
/// Fairway over AF_XDP) and the utilisation with `equal-rate`, for kernel
/// CUBIC uploaders at the largest N measured.
#[must_use]
pub fn verdict(results: &[(GridCell, Result<Outcome, String>)]) -> Option<String> {
    let cubic_up =
        |c: &GridCell| c.experiment.transfer == Transfer::Upload && c.experiment.congestion_control == "cubic";
    let n = results.iter().filter(|(c, r)| cubic_up(c) && r.is_ok()).map(|(c, _)| c.experiment.rtts.len()).max()?;
    let find = |server: LabServer| {
        results.iter().find_map(|(c, r)| match r {
            Ok(o) if cubic_up(c) && c.server == server && c.experiment.rtts.len() == n => Some((c, o)),
            _ => None,
        })
    };
    let (cell, equal) = find(LabServer::Afxdp("equal-rate"))?;
    let (_, off) = find(LabServer::Afxdp("off"))?;
    Some(format!(
        "fairness: J={:.3} with equal-rate vs J={:.3} off, utilisation {:.1} %, N={n}, RTT 4–256 ms, kernel CUBIC senders",
        equal.jain(),
        off.jain(),
        equal.utilisation(cell.experiment.bottleneck_bps) * 100.0
    ))
}

/// The panel of a cell in the J-against-N chart: uploads per sender, and
/// downloads.
fn panel_title(cell: &GridCell) -> String {
    match cell.experiment.transfer {
        Transfer::Upload => format!("uploads, kernel {}", cell.experiment.congestion_control),
        Transfer::Download => "downloads (server sends)".to_owned(),
    }
}

/// The charts of a grid, written to `dir` with names starting `stem`:
/// Jain's index against N (a panel per way and sender, a line per server
/// and policy), and each flow's goodput over time in the largest-N CUBIC
/// upload cells, one chart per server.
///
/// # Errors
///
/// When a chart cannot be drawn or written.
pub fn write_charts(
    dir: &Path,
    stem: &str,
    results: &[(GridCell, Result<Outcome, String>)],
) -> Result<Vec<Chart>, String> {
    let done: Vec<(&GridCell, &Outcome)> =
        results.iter().filter_map(|(c, r)| r.as_ref().ok().map(|o| (c, o))).collect();
    let mut charts = Vec::new();
    let mut panels: Vec<Panel> = Vec::new();
    for (cell, outcome) in &done {
        let title = panel_title(cell);
        let at = match panels.iter().position(|p| p.title == title) {
            Some(at) => at,
            None => {
                panels.push(Panel { title, series: Vec::new() });
                panels.len() - 1
            }
        };
        let label = cell.server.label();
        let point = (cell.experiment.rtts.len() as f64, outcome.jain());
        match panels[at].series.iter_mut().find(|s| s.label == label) {
            Some(series) => series.points.push(point),
            None => panels[at].series.push(Series::new(label, vec![point])),
        }
    }
    if !panels.is_empty() {
        let file = format!("{stem}-jain.png");
        plot::jain_against_n_panels(
            &dir.join(&file),
            "Testbed: Jain's index of goodputs against N (RTTs 4–256 ms)",
            &panels,
        )?;
        charts.push(Chart {
            file,
            caption: "Jain's index against N, a line per server and policy".into(),
            inline: true,
        });
    }
    let cubic_up =
        |c: &GridCell| c.experiment.transfer == Transfer::Upload && c.experiment.congestion_control == "cubic";
    let largest = done.iter().filter(|(c, _)| cubic_up(c)).map(|(c, _)| c.experiment.rtts.len()).max();
    for (cell, outcome) in done.iter().filter(|(c, _)| cubic_up(c) && Some(c.experiment.rtts.len()) == largest) {
        let n = cell.experiment.rtts.len();
        let file = format!("{stem}-goodput-N{n}-up-cubic-{}.png", cell.server.slug());
        let title = format!(
            "Testbed goodput per flow: N = {n}, kernel CUBIC uploads, {} ({} ms averages)",
            cell.server.label(),
            CONVERGENCE_WINDOW.as_millis()
        );
        let series: Vec<Series> = outcome
            .flows
            .iter()
            .map(|f| Series::new(format!("{:.0} ms", f.rtt.as_secs_f64() * 1e3), f.goodput_series(CONVERGENCE_WINDOW)))
            .collect();
        plot::goodput_over_time(&dir.join(&file), &title, &series)?;
        charts.push(Chart { file, caption: format!("N={n} up kernel cubic, {}", cell.server.label()), inline: false });
    }
    Ok(charts)
}

/// The Markdown lines that show `charts` (see [`crate::fairness::chart_lines`]).
#[must_use]
pub fn chart_lines(charts: &[Chart]) -> Vec<String> {
    crate::fairness::chart_lines(charts, "Each flow's goodput over time (the 256 ms flow joins late):")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(points: &[(f64, u64)]) -> Vec<Sample> {
        points.iter().map(|&(t, bytes)| Sample { t, bytes, srtt_us: 5000, min_rtt_us: 4000, retransmits: 0 }).collect()
    }

    #[test]
    fn goodput_over_the_steady_part() {
        let parsed = parse_samples("0.0 0 100 90 0\n1.0 1000 100 90 0\nnoise\n2.0 3000 200 90 1\n3.0 5000 300 90 2\n");
        assert_eq!(parsed.len(), 4);
        assert_eq!(parsed[3], Sample { t: 3.0, bytes: 5000, srtt_us: 300, min_rtt_us: 90, retransmits: 2 });
        let mut exp = Experiment::uploads(vec![Duration::from_millis(4); 2], "cubic", 20_000_000);
        exp.warmup = Duration::from_secs(1);
        let g = steady_goodput(1, &exp, parsed.clone()).unwrap();
        assert_eq!((g.bytes, g.seconds), (4000, 2.0));
        assert!((g.bits_per_second() - 16_000.0).abs() < 1e-9);
        exp.warmup = Duration::from_secs(9);
        assert!(steady_goodput(0, &exp, parsed).is_err());
        let outcome = Outcome {
            flows: vec![g.clone(), FlowGoodput { bytes: 2000, ..g }],
            ping_queue_ms: None,
            sender_queue_ms: None,
            convergence: None,
            had_late_flow: false,
            fast_start: None,
        };
        assert!((outcome.max_min_ratio() - 2.0).abs() < 1e-9);
        assert!(outcome.jain() < 1.0 && outcome.jain() > 0.8);
        // 24 kbit/s of payload is 24 × 1514 / 1448 kbit/s on the wire.
        assert!((outcome.utilisation(24_000 * 1514 / 1448) - 1.0).abs() < 1e-3);
    }

    #[test]
    fn the_ping_probe_measures_the_queue_after_the_warmup() {
        let text = "PING 10.77.0.1 (10.77.0.1) 56(84) bytes of data.\n\
                    64 bytes from 10.77.0.1: icmp_seq=1 ttl=64 time=4.10 ms\n\
                    64 bytes from 10.77.0.1: icmp_seq=11 ttl=64 time=24.1 ms\n\
                    64 bytes from 10.77.0.1: icmp_seq=12 ttl=64 time=14.1 ms\n\
                    \n--- 10.77.0.1 ping statistics ---\n";
        let pings = parse_pings(text);
        assert_eq!(pings, [(1, 4.10), (11, 24.1), (12, 14.1)]);
        // Pings 11 and 12 were sent 1.0 and 1.1 s in: 20 and 10 ms queued.
        let q = mean_queue_ms(&pings, Duration::from_secs(1), 4.1).unwrap();
        assert!((q - 15.0).abs() < 1e-9, "{q}");
        assert_eq!(mean_queue_ms(&pings, Duration::from_secs(5), 4.1), None);
    }

    #[test]
    fn a_late_flow_converges_when_its_recent_goodput_reaches_90_percent_of_a_share() {
        let mut exp = Experiment::uploads(vec![Duration::from_millis(4), Duration::from_millis(256)], "cubic", 1);
        exp.join_at = Some(Duration::from_secs(1));
        exp.warmup = Duration::from_secs(2);
        exp.duration = Duration::from_secs(4);
        // The early flow: 1 MB/s throughout. The late one from 1 s: nothing
        // for 1 s, then 1 MB/s.
        let early: Vec<(f64, u64)> = (0..=80).map(|i| (f64::from(i) * 0.05, i as u64 * 50_000)).collect();
        let late: Vec<(f64, u64)> =
            (20..=80).map(|i| (f64::from(i) * 0.05, if i <= 40 { 0 } else { (i as u64 - 40) * 50_000 })).collect();
        let flows =
            vec![steady_goodput(0, &exp, samples(&early)).unwrap(), steady_goodput(1, &exp, samples(&late)).unwrap()];
        assert_eq!(flows[1].started, Duration::from_secs(1));
        // Share: (8 + 8) Mbit/s / 2 = 8 Mbit/s, 90 % of it 7.2 Mbit/s. Over
        // the last 500 ms the late flow first has that at 2.45 s: 9 of its
        // 10 intervals at 1 MB/s.
        let c = convergence(&flows, &exp).unwrap();
        assert!((c.as_secs_f64() - 1.45).abs() < 1e-6, "{c:?}");
        let series = flows[0].goodput_series(CONVERGENCE_WINDOW);
        assert!(series.iter().all(|&(_, mbps)| (mbps - 8.0).abs() < 1e-6), "{series:?}");
    }

    #[test]
    fn one_client_per_rtt_behind_the_shared_bottleneck() {
        let exp = Experiment::uploads(vec![Duration::from_millis(4), Duration::from_millis(256)], "cubic", 20_000_000);
        let c = exp.testbed_config("fx");
        assert_eq!(c.clients, 2);
        assert_eq!(c.link_of(1).unwrap().delay, Some(Duration::from_millis(128)));
        assert_eq!(c.server_link.as_ref().unwrap().rate_bps, Some(20_000_000));
        assert_eq!(c.server_link.as_ref().unwrap().queue_bytes, Some(250_000));
        assert_eq!(queue_bytes(1_000_000, Duration::from_millis(40)), 16 * 1514);
        assert!(c.validate().is_ok());
        let ms = |n| grid_rtts(n).iter().map(|r| (r.as_secs_f64() * 1e3).round() as u64).collect::<Vec<_>>();
        assert_eq!(ms(2), [4, 256]);
        assert_eq!(ms(4), [4, 16, 64, 256]);
        let plan = GridPlan {
            ns: vec![1, 4],
            transfers: vec![Transfer::Upload, Transfer::Download],
            senders: GRID_SENDERS.to_vec(),
            servers: GRID_SERVERS.to_vec(),
            bottleneck_bps: 20_000_000,
            queue: Duration::from_millis(40),
            duration: Duration::from_secs(20),
            warmup: Duration::from_secs(6),
            join_at: Duration::from_secs(2),
            server_flags: Vec::new(),
        };
        let cells = plan.cells();
        // Per N: (2 senders up + 1 down) × 4 servers.
        assert_eq!(cells.len(), 2 * 3 * 4);
        assert!(cells.iter().all(|c| c.experiment.join_at.is_some() == (c.experiment.rtts.len() > 1)));
        assert!(cells.iter().all(|c| c.experiment.queue_bytes == 100_000));
        assert_eq!(cells[0].senders(), "kernel cubic");
        assert_eq!(cells[0].columns(), ["1", "up", "kernel cubic", "nginx", "off"].map(String::from));
        let down = cells.iter().find(|c| c.experiment.transfer == Transfer::Download).unwrap();
        assert_eq!(down.senders(), "kernel default");
    }

    #[test]
    fn charts_of_a_grid_are_written_and_listed() {
        if plot::check_font().is_err() {
            eprintln!("skipped: no font for the charts (fonts-dejavu-core; xtask test installs it)");
            return;
        }
        let dir = std::env::temp_dir().join(format!("fairway-testbed-charts-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let plan = GridPlan {
            ns: vec![2, 4],
            transfers: vec![Transfer::Upload, Transfer::Download],
            senders: vec!["cubic"],
            servers: vec![LabServer::Nginx, LabServer::Afxdp("equal-rate")],
            bottleneck_bps: 20_000_000,
            queue: QUEUE,
            duration: Duration::from_secs(4),
            warmup: Duration::from_secs(2),
            join_at: Duration::from_secs(1),
            server_flags: Vec::new(),
        };
        let results: Vec<(GridCell, Result<Outcome, String>)> = plan
            .cells()
            .into_iter()
            .map(|cell| {
                let flows = (0..cell.experiment.rtts.len())
                    .map(|i| {
                        let points: Vec<(f64, u64)> =
                            (0..=80).map(|k| (f64::from(k) * 0.05, k as u64 * (i as u64 + 1) * 10_000)).collect();
                        steady_goodput(i, &cell.experiment, samples(&points)).unwrap()
                    })
                    .collect();
                let outcome = Outcome {
                    flows,
                    ping_queue_ms: Some(1.0),
                    sender_queue_ms: None,
                    convergence: None,
                    had_late_flow: true,
                    fast_start: None,
                };
                (cell, Ok(outcome))
            })
            .collect();
        let charts = write_charts(&dir, "tb", &results).unwrap();
        let files: Vec<&str> = charts.iter().map(|c| c.file.as_str()).collect();
        assert_eq!(
            files,
            ["tb-jain.png", "tb-goodput-N4-up-cubic-nginx.png", "tb-goodput-N4-up-cubic-afxdp-equal-rate.png"]
        );
        for file in &files {
            let bytes = std::fs::read(dir.join(file)).unwrap();
            assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "{file} is not a PNG");
        }
        let lines = chart_lines(&charts);
        assert!(lines.contains(&"![Jain's index against N, a line per server and policy](tb-jain.png)".to_owned()));
        assert!(lines.contains(&"- [N=4 up kernel cubic, nginx](tb-goodput-N4-up-cubic-nginx.png)".to_owned()));
        assert!(chart_lines(&[]).is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_join_column_says_what_careful_resume_did() {
        assert_eq!(fast_start_text(None), "");
        assert_eq!(fast_start_text(Some((0, 0))), "");
        assert_eq!(fast_start_text(Some((1, 0))), " (1 j)");
        assert_eq!(fast_start_text(Some((2, 1))), " (2 j, 1 r)");
        let exp = Experiment {
            transfer: Transfer::Download,
            join_at: Some(Duration::from_secs(2)),
            ..Experiment::uploads(vec![Duration::from_millis(4), Duration::from_millis(256)], "cubic", 20_000_000)
        };
        let flow = |client| FlowGoodput {
            client,
            rtt: exp.rtts[client],
            started: exp.start_of(client),
            bytes: 1_000_000,
            seconds: 1.0,
            samples: Vec::new(),
        };
        let outcome = Outcome {
            flows: vec![flow(0), flow(1)],
            ping_queue_ms: Some(1.0),
            sender_queue_ms: None,
            convergence: Some(Duration::from_millis(1980)),
            had_late_flow: true,
            fast_start: Some((1, 0)),
        };
        let cell = GridCell { experiment: exp, server: LabServer::Afxdp("equal-rate") };
        let lines = report(&[(cell, Ok(outcome))]);
        assert!(lines[2].ends_with("| 1.98 (1 j) |"), "{}", lines[2]);
    }

    #[test]
    fn servers_parse_from_their_names() {
        assert_eq!(LabServer::parse("afxdp:equal-rate"), Some(LabServer::Afxdp("equal-rate")));
        assert_eq!(LabServer::parse("kernel:seed"), Some(LabServer::Kernel("seed")));
        assert_eq!(LabServer::parse("nginx"), Some(LabServer::Nginx));
        assert_eq!(LabServer::parse("kernel:fast"), None);
        assert_eq!(LabServer::parse("apache"), None);
        assert_eq!(LabServer::Kernel("off").policy(), "off");
        assert_eq!(LabServer::Nginx.policy(), "off");
        assert_eq!(LabServer::Afxdp("off").label(), "fairway/afxdp off");
        assert_eq!(LabServer::Kernel("equal-rate").slug(), "kernel-equal-rate");
    }
}
