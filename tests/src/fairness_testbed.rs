//! RTT fairness on the real testbed: kernel TCP senders in client
//! namespaces uploading to Fairway through one shared bottleneck.
//!
//! Each client's own link carries only its access delay (half its RTT in
//! each direction); the bottleneck is one emulated link in front of the
//! server ([`TestbedConfig::server_link`]) that every flow crosses, with the
//! rate and a drop-tail queue. Each uploader picks its congestion control
//! per socket (`TCP_CONGESTION`, before connecting): the per-namespace
//! `net.ipv4.tcp_congestion_control` would do, but outside the initial
//! namespace it refuses algorithms missing from the host's
//! `tcp_allowed_congestion_control` (here `reno bbr`, not `cubic`), which
//! this must not change; root may pick any loaded one per socket. Each
//! client streams an
//! endless `POST /upload` for a bounded time while sampling its socket's
//! `tcpi_bytes_acked`; a flow's goodput is the bytes acknowledged over the
//! steady part (after a warm-up) divided by that span.
//!
//! Everything here needs root and stays inside the testbed's namespaces.

use std::time::Duration;

use fairway_stack::fairness::jain_index;

use crate::real_peers::HTTP_PORT;
use crate::served::Served;
use crate::testbed::{self, LinkParams, SERVER_IF, Testbed, TestbedConfig};

/// The experiment: who uploads, through what.
#[derive(Debug, Clone)]
pub struct Experiment {
    /// Each client's round-trip time added by its access link (the link
    /// emulator delays each direction by half).
    pub rtts: Vec<Duration>,
    /// Each client's kernel congestion control (`cubic`, `bbr`, `reno`).
    pub congestion_control: &'static str,
    /// The shared bottleneck's rate, bits per second.
    pub bottleneck_bps: u64,
    /// The bottleneck's drop-tail queue, bytes.
    pub queue_bytes: u64,
    /// How long every upload runs.
    pub duration: Duration,
    /// The start of each upload left out of its goodput.
    pub warmup: Duration,
}

impl Experiment {
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
}

/// One flow's outcome.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowGoodput {
    /// The client.
    pub client: usize,
    /// Its access RTT.
    pub rtt: Duration,
    /// Bytes acknowledged over the steady part.
    pub bytes: u64,
    /// The steady part's length, seconds.
    pub seconds: f64,
    /// The kernel's smoothed RTT at the end, as `tcpi_rtt` reports it.
    pub srtt: Duration,
}

impl FlowGoodput {
    /// Goodput, bits per second.
    #[must_use]
    pub fn bits_per_second(&self) -> f64 {
        if self.seconds > 0.0 { self.bytes as f64 * 8.0 / self.seconds } else { 0.0 }
    }
}

/// Every flow of one run.
#[derive(Debug, Clone, PartialEq)]
pub struct Outcome {
    /// By client.
    pub flows: Vec<FlowGoodput>,
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

    /// The sum of the goodputs over the bottleneck's rate.
    #[must_use]
    pub fn utilisation(&self, bottleneck_bps: u64) -> f64 {
        self.rates().iter().sum::<f64>() / bottleneck_bps as f64
    }

    /// One line per flow, then Jain's index.
    #[must_use]
    pub fn describe(&self) -> String {
        let mut text = String::new();
        for f in &self.flows {
            text.push_str(&format!(
                "client {} RTT {:?}: {:.2} Mbit/s ({} B in {:.1} s, srtt {:?})\n",
                f.client,
                f.rtt,
                f.bits_per_second() / 1e6,
                f.bytes,
                f.seconds,
                f.srtt
            ));
        }
        text.push_str(&format!("J = {:.4}, max/min = {:.2}", self.jain(), self.max_min_ratio()));
        text
    }
}

/// The uploader: an endless `POST /upload` for `duration` seconds with the
/// congestion control named by its last argument, a sender
/// thread writing while the main thread samples `tcpi_bytes_acked` (offset
/// 120 of `struct tcp_info`) and `tcpi_rtt` (offset 68) every 50 ms. It
/// prints `ready`, waits until the file named by its fourth argument exists
/// (so that every upload starts at once), then prints `t acked srtt_us` per
/// sample.
const UPLOADER: &str = r#"
import os, socket, struct, sys, threading, time
host, port, duration, go, cc = sys.argv[1], int(sys.argv[2]), float(sys.argv[3]), sys.argv[4], sys.argv[5]
s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, cc.encode())
s.settimeout(duration + 30)
s.connect((host, port))
got = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_CONGESTION, 16).rstrip(b"\0").decode()
if got != cc:
    sys.exit(f"congestion control {got}, not {cc}")
s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
print("ready", flush=True)
while not os.path.exists(go):
    time.sleep(0.001)
s.sendall(b"POST /upload HTTP/1.1\r\nHost: fairway\r\nContent-Length: 100000000000\r\n\r\n")
def send():
    chunk = b"u" * 65536
    try:
        while True:
            s.sendall(chunk)
    except OSError:
        pass
threading.Thread(target=send, daemon=True).start()
start = time.monotonic()
while True:
    info = s.getsockopt(socket.IPPROTO_TCP, socket.TCP_INFO, 232)
    acked = struct.unpack_from("Q", info, 120)[0]
    srtt = struct.unpack_from("I", info, 68)[0]
    t = time.monotonic() - start
    print(f"{t:.4f} {acked} {srtt}", flush=True)
    if t >= duration:
        break
    time.sleep(0.05)
os._exit(0)
"#;

/// Runs `exp` on `tb` (built from [`Experiment::testbed_config`], with the
/// server already started): starts every upload at once, each with the
/// experiment's congestion control, and measures each.
///
/// # Errors
///
/// When a client cannot be configured or an uploader fails.
pub fn run_uploads(tb: &Testbed, exp: &Experiment) -> Result<Outcome, String> {
    let host = tb.server_ip().to_string();
    let port = HTTP_PORT.to_string();
    let secs = format!("{:.3}", exp.duration.as_secs_f64());
    let go = std::env::temp_dir().join(format!("fairway-fairness-go-{}", tb.prefix()));
    let _ = std::fs::remove_file(&go);
    let go_arg = go.display().to_string();
    let mut uploaders = Vec::new();
    for client in 0..exp.rtts.len() {
        let cmd = ["python3", "-u", "-c", UPLOADER, &host, &port, &secs, &go_arg, exp.congestion_control];
        let mut up = testbed::spawn(&tb.client_ns(client), &cmd).map_err(|e| e.to_string())?;
        up.wait_for_stdout("ready", Duration::from_secs(20)).map_err(|e| format!("client {client}: {e}"))?;
        uploaders.push(up);
    }
    std::fs::write(&go, b"go").map_err(|e| format!("writing {go_arg}: {e}"))?;
    let started = std::time::Instant::now();
    while started.elapsed() < Duration::from_millis(500) && uploaders.iter_mut().any(|u| u.try_wait().is_none()) {
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = std::fs::remove_file(&go);
    let mut flows = Vec::new();
    for (client, up) in uploaders.into_iter().enumerate() {
        let out =
            up.wait_timeout(exp.duration + Duration::from_secs(30)).map_err(|e| format!("client {client}: {e}"))?;
        if !out.success() {
            return Err(format!("client {client}'s uploader failed: {}", out.stderr_text()));
        }
        let samples = parse_samples(&out.stdout_text());
        flows.push(goodput(client, exp.rtts[client], &samples, exp.warmup.as_secs_f64())?);
    }
    Ok(Outcome { flows })
}

/// One whole run on a fresh testbed under `prefix`: the testbed up,
/// Fairway over AF_XDP (one shard) started with `--fairness policy` and the
/// bottleneck's rate as `--capacity`, the uploads, the server stopped and
/// the testbed removed. Needs a build with the `afxdp` feature.
///
/// # Errors
///
/// When the testbed cannot be built or an uploader fails.
///
/// # Panics
///
/// When the server does not start (see [`Served::start`]).
pub fn run_on_fresh_testbed(prefix: &str, exp: &Experiment, policy: &str) -> Result<Outcome, String> {
    testbed::require_root().map_err(|e| e.to_string())?;
    let tb = Testbed::up(exp.testbed_config(prefix)).map_err(|e| format!("testbed up: {e}"))?;
    let ip = format!("{}/{}", tb.server_ip(), tb.prefix_len());
    let capacity = format!("{}bit", exp.bottleneck_bps);
    let flags = [
        "--backend",
        "afxdp",
        "--iface",
        SERVER_IF,
        "--ip",
        &ip,
        "--queues",
        "1",
        "--shards",
        "1",
        "--fairness",
        policy,
        "--capacity",
        &capacity,
        "--max-body",
        "100gb",
    ];
    let served = Served::start(&tb, &flags);
    let outcome = run_uploads(&tb, exp);
    let _ = served.stop();
    outcome
}

/// The policies the testbed grid compares.
pub const GRID_POLICIES: [&str; 2] = ["off", "equal-rate"];
/// The kernel senders the testbed grid runs.
pub const GRID_SENDERS: [&str; 2] = ["cubic", "bbr"];

/// One cell of the testbed grid.
#[derive(Debug, Clone)]
pub struct GridCell {
    /// The experiment.
    pub experiment: Experiment,
    /// The server's `--fairness`.
    pub policy: &'static str,
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

/// The testbed grid: for each `n`, clients at [`grid_rtts`], CUBIC then BBR senders, `off` then `equal-rate`, through a
/// `bottleneck_bps` link with a 40 ms drop-tail queue.
#[must_use]
pub fn grid(ns: &[usize], bottleneck_bps: u64, duration: Duration, warmup: Duration) -> Vec<GridCell> {
    let mut cells = Vec::new();
    for &n in ns {
        for congestion_control in GRID_SENDERS {
            for policy in GRID_POLICIES {
                let experiment = Experiment {
                    rtts: grid_rtts(n),
                    congestion_control,
                    bottleneck_bps,
                    queue_bytes: (bottleneck_bps / 8 / 25).max(16 * 1514),
                    duration,
                    warmup,
                };
                cells.push(GridCell { experiment, policy });
            }
        }
    }
    cells
}

/// The Markdown table of `results` (a cell and what it measured, or why it
/// failed).
#[must_use]
pub fn report(results: &[(GridCell, Result<Outcome, String>)]) -> Vec<String> {
    let mut lines = vec![
        "| N | RTTs (ms) | senders | policy | goodput per flow (Mbit/s) | J | max/min | utilisation |".to_owned(),
        "|---|---|---|---|---|---|---|---|".to_owned(),
    ];
    for (cell, result) in results {
        let e = &cell.experiment;
        let rtts: Vec<String> = e.rtts.iter().map(|r| format!("{:.0}", r.as_secs_f64() * 1e3)).collect();
        let head = format!("| {} | {} | {} | {} |", e.rtts.len(), rtts.join(", "), e.congestion_control, cell.policy);
        lines.push(match result {
            Ok(o) => {
                let rates: Vec<String> = o.rates().iter().map(|r| format!("{:.2}", r / 1e6)).collect();
                format!(
                    "{head} {} | {:.3} | {:.2} | {:.1} % |",
                    rates.join(" / "),
                    o.jain(),
                    o.max_min_ratio(),
                    o.utilisation(e.bottleneck_bps) * 100.0
                )
            }
            Err(why) => format!("{head} failed: {} | | | |", why.lines().next().unwrap_or("").replace('|', "/")),
        });
    }
    lines
}

/// `(t, acked, srtt_us)` samples from the uploader's output.
fn parse_samples(text: &str) -> Vec<(f64, u64, u64)> {
    text.lines()
        .filter_map(|line| {
            let mut w = line.split_whitespace();
            Some((w.next()?.parse().ok()?, w.next()?.parse().ok()?, w.next()?.parse().ok()?))
        })
        .collect()
}

/// The goodput from the first sample at or after `warmup` to the last.
fn goodput(client: usize, rtt: Duration, samples: &[(f64, u64, u64)], warmup: f64) -> Result<FlowGoodput, String> {
    let first = samples.iter().find(|s| s.0 >= warmup).ok_or_else(|| format!("client {client}: no steady samples"))?;
    let last = samples.last().expect("there is a first");
    Ok(FlowGoodput {
        client,
        rtt,
        bytes: last.1.saturating_sub(first.1),
        seconds: last.0 - first.0,
        srtt: Duration::from_micros(last.2),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn goodput_over_the_steady_part() {
        let samples = parse_samples("0.0 0 100\n1.0 1000 100\nnoise\n2.0 3000 200\n3.0 5000 300\n");
        assert_eq!(samples.len(), 4);
        let g = goodput(1, Duration::from_millis(4), &samples, 1.0).unwrap();
        assert_eq!((g.bytes, g.seconds, g.srtt), (4000, 2.0, Duration::from_micros(300)));
        assert!((g.bits_per_second() - 16_000.0).abs() < 1e-9);
        assert!(goodput(0, Duration::ZERO, &samples, 9.0).is_err());
        let outcome = Outcome { flows: vec![g.clone(), FlowGoodput { bytes: 2000, ..g }] };
        assert!((outcome.max_min_ratio() - 2.0).abs() < 1e-9);
        assert!(outcome.jain() < 1.0 && outcome.jain() > 0.8);
    }

    #[test]
    fn one_client_per_rtt_behind_the_shared_bottleneck() {
        let exp = Experiment {
            rtts: vec![Duration::from_millis(4), Duration::from_millis(256)],
            congestion_control: "cubic",
            bottleneck_bps: 20_000_000,
            queue_bytes: 100_000,
            duration: Duration::from_secs(20),
            warmup: Duration::from_secs(5),
        };
        let c = exp.testbed_config("fx");
        assert_eq!(c.clients, 2);
        assert_eq!(c.link_of(1).unwrap().delay, Some(Duration::from_millis(128)));
        assert_eq!(c.server_link.as_ref().unwrap().rate_bps, Some(20_000_000));
        assert!(c.validate().is_ok());
        let ms = |n| grid_rtts(n).iter().map(|r| (r.as_secs_f64() * 1e3).round() as u64).collect::<Vec<_>>();
        assert_eq!(ms(2), [4, 256]);
        assert_eq!(ms(4), [4, 16, 64, 256]);
        assert_eq!(grid(&[2, 4], 20_000_000, Duration::from_secs(20), Duration::from_secs(6)).len(), 8);
    }
}
