//! The soak under faults (`cargo xtask soak`): the Fairway server over
//! AF_XDP on a testbed, a bounded mixed load whose every answer is
//! checked, faults on the load clients' links, `/healthz` probed every
//! second and `/metrics` scraped throughout; then the verdict.
//!
//! # The run
//!
//! 1. A testbed with three clients, each behind its own emulated link
//!    ([`LINK`]): client 0 probes, clients 1 and 2 carry the load. The
//!    server runs as a process of its own in the server namespace (so its
//!    RSS is its own), two shards on two queues, with short timeouts
//!    ([`SERVER_FLAGS`]) so what vanished peers leave is cleared within
//!    seconds.
//! 2. Warm-up: the load and one round of the faults ([`faults::round`]),
//!    so that the server's pools reach the sizes the soak needs; then the
//!    load stops and the server quiets down: the baseline (RSS,
//!    connections). The pools keep what they grew to, by design: a
//!    baseline taken before the faults would count that as growth.
//! 3. The faulted phase, the rest of `--minutes`: the load again, and the
//!    faults of [`faults::plan`] in turn on clients 1 and 2 (vanishing
//!    clients, flaps, 10 % loss bursts, reordering with duplication).
//! 4. The load stops; the server has until the timeouts that clear
//!    vanished peers have run ([`drain_limit`]) to get back to the
//!    baseline.
//!
//! # The verdict
//!
//! The soak fails when a request is answered wrongly; when a request
//! fails, or a probe, outside a fault window on its client's link (and
//! [`faults::GRACE`] after it); when the RSS ends more than
//! [`RSS_TOLERANCE`] above the baseline, or the connection counts
//! (the application's, and the stack's outside TIME-WAIT) above theirs;
//! when a [`BUG_DROPS`] counter or a [`BUG_COUNTERS`] counter moved; or when
//! the server did not stop cleanly.

pub mod faults;
pub mod http;
pub mod load;
pub mod vanish;

use std::ffi::OsString;
use std::fmt::Write as _;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};
use std::time::{Duration, Instant};

use faults::{Fault, FaultKind, Window};
use http::Expect;
use load::{Connections, Failure, Load, Prober, Probes, Tally, fetch};

use crate::platform::metric_samples;
use crate::testbed::{self, LinkParams, ServerProcess, Testbed, TestbedConfig};

/// Every client's link: 1 ms each way at 30 Mbit/s (the emulator's queue
/// the default, one round trip's worth and at least 64 KiB), which bounds
/// the load's bytes and the emulators' CPU.
pub const LINK: &str = "delay=1ms,rate=30mbit";
/// The probing client (its link is never faulted).
pub const PROBER: usize = 0;
/// The load clients.
pub const LOAD_CLIENTS: [usize; 2] = [1, 2];
/// The faulted phase's shortest length.
pub const MIN_FAULTED: Duration = Duration::from_secs(30);
/// No fault ends within this of the faulted phase's end.
pub const QUIET_END: Duration = Duration::from_secs(10);
/// How long a quiet server is given before its RSS is read, at the
/// baseline and at the end: two of the stack's pool-trim intervals (5 s),
/// after which its buffer pools hold only what the quiet needs.
pub const POOL_SETTLE: Duration = Duration::from_secs(11);

/// How far the RSS may end above its baseline.
pub const RSS_TOLERANCE: f64 = 0.05;

/// The server's flags beyond where it serves: two shards (so steering is
/// in play), and timeouts short enough that what a vanished peer leaves is
/// cleared within seconds: the user timeout (data never acknowledged),
/// idle keep-alive, the head and the body; and a TIME-WAIT of seconds, so
/// that the connections the load closed have left it before the RSS is
/// read (at 60 s, hundreds of them would still hold their slots at the
/// baseline, more or fewer at the end, as the load's last minute had it).
pub const SERVER_FLAGS: &[&str] = &[
    "--queues",
    "2",
    "--shards",
    "2",
    "--tcp-user-timeout",
    "10s",
    "--time-wait",
    "5s",
    "--idle-timeout",
    "5s",
    "--header-timeout",
    "5s",
    "--body-timeout",
    "5s",
    "--max-bytes",
    "64mb",
    "--log",
    "warn",
];

/// The seconds [`SERVER_FLAGS`] gives `flag`.
fn server_seconds(flag: &str) -> u64 {
    SERVER_FLAGS
        .windows(2)
        .find(|w| w[0] == flag)
        .and_then(|w| w[1].strip_suffix('s')?.parse().ok())
        .unwrap_or_else(|| panic!("{flag} in SERVER_FLAGS"))
}

/// How long the server may take to clear what the faults left: the
/// longest chain of its timeouts a vanished peer can start (idle, then the
/// FIN never acknowledged: user timeout; a cut head or body, then the same),
/// and a margin for the shards' once-a-second metrics.
#[must_use]
pub fn drain_limit() -> Duration {
    let idle = server_seconds("--idle-timeout");
    let user = server_seconds("--tcp-user-timeout");
    let head_or_body = server_seconds("--header-timeout").max(server_seconds("--body-timeout"));
    Duration::from_secs(idle.max(head_or_body) + user + 10)
}

/// The most TIME-WAIT connections a quiet server may hold: the probes'
/// (a `/healthz` connection a second, a scrape's now and then) over
/// [`SERVER_FLAGS`]' TIME-WAIT, and the scrape that counts them.
fn probes_time_wait() -> f64 {
    (server_seconds("--time-wait") as f64 / load::PROBE_EVERY.as_secs_f64()).ceil() + 2.0
}

/// Drop reasons that mean a bug, not a peer's doing: the soak's path
/// damages no frame (the emulators corrupt nothing, the kernel peers send
/// correct ones, and fragments never), so a truncated, malformed or
/// mis-summed frame is our receive path's (UMEM offsets and lengths,
/// steering's copies) or the emulator's segmentation; and a kernel peer
/// never acknowledges data that was never sent, so `tcp_ack_unsent` is our
/// sequence bookkeeping gone wrong.
pub const BUG_DROPS: &[&str] = &[
    "ethernet_truncated",
    "ipv4_truncated",
    "ipv4_bad_version",
    "ipv4_bad_checksum",
    "ipv4_fragment",
    "tcp_truncated",
    "tcp_bad_checksum",
    "tcp_malformed",
    "tcp_ack_unsent",
];

/// Server counters that mean a bug: a handler that failed its request
/// (500: the built-in ones never should), a status outside 100..=599,
/// a task that panicked.
pub const BUG_COUNTERS: &[(&str, &str)] = &[
    ("fairway_http_responses_total", "code=\"500\""),
    ("fairway_http_responses_total", "code=\"other\""),
    ("fairway_task_panics_total", ""),
];

/// The flag that ends a soak early (see [`stop_on`]).
static STOP: OnceLock<Arc<AtomicBool>> = OnceLock::new();

/// Makes `flag` (one SIGINT and SIGTERM raise, say) end the soak early:
/// it stops the load and the faults, cleans up, and fails.
pub fn stop_on(flag: Arc<AtomicBool>) {
    let _ = STOP.set(flag);
}

fn interrupted() -> bool {
    STOP.get().is_some_and(|flag| flag.load(Ordering::Relaxed))
}

/// What to run.
#[derive(Clone, Debug)]
pub struct SoakConfig {
    /// The load's whole length, warm-up included.
    pub length: Duration,
    /// Seeds the faults' durations and the load's choices.
    pub seed: u64,
    /// The testbed's prefix.
    pub prefix: String,
    /// The command that serves as `fairway` does (flags follow it).
    pub server: Vec<OsString>,
    /// The link emulator (`None`: the testbed finds it).
    pub linkem: Option<PathBuf>,
}

/// A failure, and the fault that explains it if one does.
type Judged<'a> = (&'a Failure, Option<FaultKind>);

/// What a soak found.
#[derive(Debug, Default)]
pub struct Report {
    /// The load's requests, the warm-up's and the faulted phase's.
    pub tally: Tally,
    /// The prober's.
    pub probes: Probes,
    /// The faults as they were in force.
    pub windows: Vec<Window>,
    /// Connections vanished clients left.
    pub vanished: usize,
    /// RSS, KiB: at the baseline and at the end.
    pub rss: (u64, u64),
    /// Connections at the baseline and at the end.
    pub connections: (Connections, Connections),
    /// How long the server took to get back to the baseline.
    pub drained_in: Option<Duration>,
    /// Drop reasons that moved over the soak, with how much.
    pub drops: Vec<(String, f64)>,
    /// What failed, one line each.
    pub failures: Vec<String>,
    /// The lines of the report, before the last.
    pub lines: Vec<String>,
}

impl Report {
    /// Errors the faults explain, and of the errors and failed probes,
    /// those they explain by kind.
    fn explained(&self) -> (Vec<Judged<'_>>, Vec<Judged<'_>>) {
        let judge = |f: &'_ Failure| faults::explains(&self.windows, f.client, f.start, f.end);
        (
            self.tally.errors.iter().map(|f| (f, judge(f))).collect(),
            self.probes.failures.iter().map(|f| (f, judge(f))).collect(),
        )
    }

    /// `soak: N requests, W wrong, E errors (F explained by faults), RSS
    /// baseline B MiB → end A MiB`
    #[must_use]
    pub fn last_line(&self) -> String {
        let (errors, _) = self.explained();
        let explained = errors.iter().filter(|(_, k)| k.is_some()).count();
        let mib = |kib: u64| kib as f64 / 1024.0;
        format!(
            "soak: {} requests, {} wrong, {} errors ({explained} explained by faults), RSS baseline {:.1} MiB → end {:.1} MiB",
            self.tally.requests,
            self.tally.wrong.len(),
            self.tally.errors.len(),
            mib(self.rss.0),
            mib(self.rss.1),
        )
    }

    /// Whether it passed.
    #[must_use]
    pub fn passed(&self) -> bool {
        self.failures.is_empty()
    }

    /// Judges what was seen: fills [`failures`](Self::failures) and the
    /// report's lines.
    fn judge(&mut self, started: Instant) {
        let (errors, probe_failures) = self.explained();
        let mut lines = Vec::new();
        let mut failures = Vec::new();
        let at = |t: Instant| t.saturating_duration_since(started).as_secs_f64();
        let mut by_worker = String::new();
        for (worker, n) in &self.tally.by_worker {
            let _ = write!(by_worker, " {worker} {n},");
        }
        lines.push(format!(
            "load:{} {} downloads reset by the client on purpose",
            by_worker.trim_end_matches(','),
            self.tally.resets
        ));
        for kind in FaultKind::ALL {
            let windows = self.windows.iter().filter(|w| w.kind == kind).count();
            let caused = errors.iter().filter(|(_, k)| *k == Some(kind)).count();
            let probes = probe_failures.iter().filter(|(_, k)| *k == Some(kind)).count();
            let extra = if kind == FaultKind::Vanish {
                format!(", {} connections left to the server", self.vanished)
            } else {
                format!(": {caused} errors, {probes} failed probes explained")
            };
            lines.push(format!("faults: {windows} × {}{extra}", kind.name()));
        }
        lines.push(format!(
            "probes: {} /healthz, {} /metrics, {} failed; most connections seen: {} (application), {} (stack, outside TIME-WAIT)",
            self.probes.healthz,
            self.probes.scrapes,
            self.probes.failures.len(),
            self.probes.max_connections.0,
            self.probes.max_connections.1
        ));
        let (base, end) = self.connections;
        lines.push(format!(
            "connections: baseline {} / {} / {}, end {} / {} / {} (application / stack outside TIME-WAIT / in TIME-WAIT){}",
            base.app,
            base.stack,
            base.time_wait,
            end.app,
            end.stack,
            end.time_wait,
            self.drained_in.map_or(String::new(), |d| format!(", back within {:.1} s of the load's end", d.as_secs_f64()))
        ));
        if let Some((low, high)) = self.probes.rss_range {
            lines.push(format!(
                "RSS over the soak: {:.1} to {:.1} MiB; baseline {:.1}, end {:.1}",
                low as f64 / 1024.0,
                high as f64 / 1024.0,
                self.rss.0 as f64 / 1024.0,
                self.rss.1 as f64 / 1024.0
            ));
        }
        if !self.drops.is_empty() {
            let list: Vec<String> = self.drops.iter().map(|(r, n)| format!("{r} {n}")).collect();
            lines.push(format!("drops over the soak: {}", list.join(", ")));
        }

        for f in &self.tally.wrong {
            failures.push(format!(
                "wrong answer: {} on client {} at {:.1} s: {}",
                f.worker,
                f.client,
                at(f.end),
                f.what
            ));
        }
        for (f, kind) in &errors {
            match kind {
                Some(kind) => lines.push(format!(
                    "error explained by a {}: {} on client {} at {:.1} s: {}",
                    kind.name(),
                    f.worker,
                    f.client,
                    at(f.end),
                    f.what
                )),
                None => failures.push(format!(
                    "unexplained error: {} on client {}, {:.1} s to {:.1} s: {}",
                    f.worker,
                    f.client,
                    at(f.start),
                    at(f.end),
                    f.what
                )),
            }
        }
        for (f, kind) in &probe_failures {
            if kind.is_none() {
                failures.push(format!(
                    "{} probe failed outside a fault window at {:.1} s: {}",
                    f.worker,
                    at(f.start),
                    f.what
                ));
            }
        }
        let (base, end) = self.rss;
        if base == 0 || end as f64 > base as f64 * (1.0 + RSS_TOLERANCE) {
            failures.push(format!(
                "RSS: {:.1} MiB at the end, more than {:.0} % above the baseline {:.1} MiB",
                end as f64 / 1024.0,
                RSS_TOLERANCE * 100.0,
                base as f64 / 1024.0
            ));
        }
        let (base_conns, end_conns) = self.connections;
        if !end_conns.open_at_most(&base_conns) {
            failures.push(format!(
                "connections: {} (application) / {} (stack) {:.0} s after the load, baseline {} / {}",
                end_conns.app,
                end_conns.stack,
                drain_limit().as_secs_f64(),
                base_conns.app,
                base_conns.stack
            ));
        }
        if end_conns.time_wait > probes_time_wait() {
            failures.push(format!(
                "TIME-WAIT: {} connections at the end, more than the probes' own {} ({}s of them)",
                end_conns.time_wait,
                probes_time_wait(),
                server_seconds("--time-wait")
            ));
        }
        for (reason, n) in &self.drops {
            if BUG_DROPS.contains(&reason.as_str())
                || BUG_COUNTERS.iter().any(|(name, l)| reason == &counter_key(name, l))
            {
                failures.push(format!("a bug's counter moved: {reason} by {n}"));
            }
        }
        self.lines.extend(lines);
        self.failures.extend(failures);
    }
}

/// A counter's name in the report: `name{labels}`.
fn counter_key(name: &str, labels: &str) -> String {
    if labels.is_empty() { name.to_owned() } else { format!("{name}{{{labels}}}") }
}

/// The counters the soak compares from its start to its end: every drop
/// reason (summed over shards) and [`BUG_COUNTERS`].
fn counters(text: &str) -> Vec<(String, f64)> {
    let mut out: Vec<(String, f64)> = Vec::new();
    for (labels, v) in metric_samples(text, "fairway_drops_total") {
        let Some(reason) = labels.split("reason=\"").nth(1).and_then(|r| r.split('"').next()) else { continue };
        match out.iter_mut().find(|(r, _)| r == reason) {
            Some((_, n)) => *n += v,
            None => out.push((reason.to_owned(), v)),
        }
    }
    for (name, want) in BUG_COUNTERS {
        let v: f64 =
            metric_samples(text, name).iter().filter(|(l, _)| want.is_empty() || l == want).map(|(_, v)| v).sum();
        out.push((counter_key(name, want), v));
    }
    out
}

/// The `fairway` binary under soak, with how long it has to stop
/// gracefully after SIGTERM.
struct Soaked {
    process: ServerProcess,
}

/// How long the server has to finish its graceful stop.
const STOP_GRACE: Duration = Duration::from_secs(20);

impl Soaked {
    fn start(tb: &Testbed, config: &SoakConfig) -> Result<Soaked, String> {
        let mut argv: Vec<OsString> = config.server.clone();
        argv.extend(tb.afxdp_flags().into_iter().map(OsString::from));
        argv.extend(SERVER_FLAGS.iter().map(OsString::from));
        let process = ServerProcess::spawn(&tb.server_ns(), &argv, STOP_GRACE)
            .map_err(|e| format!("starting the server: {e}"))?;
        let mut server = Soaked { process };
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if !server.process.is_running() {
                let out = server.process.stop().map(|out| out.status.to_string()).unwrap_or_default();
                return Err(format!("the server exited at start ({out}): {}", server.process.complaints()));
            }
            if scrape(tb).is_ok() {
                return Ok(server);
            }
            if Instant::now() > deadline {
                return Err("the server did not answer /metrics within 30 s".to_owned());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }

    fn id(&self) -> u32 {
        self.process.id().unwrap_or(0)
    }

    /// VmRSS, KiB.
    fn rss_kib(&self) -> Option<u64> {
        crate::stats::rss_kib(self.id())
    }

    /// SIGTERM, and its graceful stop: why it failed, if it did.
    fn stop(mut self) -> Result<(), String> {
        let out = self.process.stop().ok_or("the server was already stopped")?;
        if out.success() {
            Ok(())
        } else {
            let stderr = out.stderr_text();
            let tail: Vec<&str> = stderr.lines().rev().take(5).collect();
            Err(format!(
                "the server's exit: {}: {}",
                out.status,
                tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
            ))
        }
    }
}

/// `/metrics` from the probing client.
fn scrape(tb: &Testbed) -> Result<String, String> {
    let server = server_addr(tb);
    testbed::in_netns(&tb.client_ns(PROBER), || fetch(server, "/metrics", &Expect::Any, Duration::from_secs(5)))
        .map_err(|e| e.to_string())?
}

fn server_addr(tb: &Testbed) -> SocketAddrV4 {
    SocketAddrV4::new(tb.server_ip(), crate::real_peers::HTTP_PORT)
}

/// The address the `k`-th vanishing client uses: host 100 + k of the
/// subnet (hosts 100 to 199, then round again: by then the first ones'
/// connections are long gone).
fn vanish_address(tb: &Testbed, k: usize) -> Ipv4Addr {
    let [a, b, c, _] = tb.server_ip().octets();
    Ipv4Addr::new(a, b, c, 100 + (k % 100) as u8)
}

/// Waits until the server is back at or below `baseline` connections on
/// two scrapes in a row, at most `limit`: how long it took, and the
/// counts last seen.
fn wait_for_baseline(tb: &Testbed, baseline: &Connections, limit: Duration) -> (Option<Duration>, Connections) {
    let started = Instant::now();
    let mut calm = 0;
    let mut last = Connections::UNKNOWN;
    while started.elapsed() < limit && !interrupted() {
        if let Ok(text) = scrape(tb) {
            last = load::connections(&text);
            calm = if last.open_at_most(baseline) { calm + 1 } else { 0 };
            if calm == 2 {
                return (Some(started.elapsed()), last);
            }
        }
        std::thread::sleep(Duration::from_millis(500));
    }
    (None, last)
}

/// The quiet point after the warm-up: once only the scrapes' connections
/// are open and [`POOL_SETTLE`] has passed, the RSS, and the fewest
/// connections over a few scrapes (a probe may be in flight during one).
fn quiet_baseline(tb: &Testbed, server: &Soaked) -> Result<(Connections, u64), String> {
    // At rest, only the scrape's own connection is open.
    let scrape_only = Connections { app: 1.0, stack: 1.0, time_wait: f64::INFINITY };
    let (_, _) = wait_for_baseline(tb, &scrape_only, drain_limit());
    std::thread::sleep(POOL_SETTLE);
    let rss = server.rss_kib().unwrap_or(0);
    let mut best = Connections { app: f64::INFINITY, stack: f64::INFINITY, time_wait: f64::INFINITY };
    for _ in 0..4 {
        best = best.min(load::connections(&scrape(tb)?));
        std::thread::sleep(Duration::from_millis(600));
    }
    Ok((best, rss))
}

/// Sleeps until `until`, waking early if interrupted; false if it was.
fn sleep_until(until: Instant) -> bool {
    while Instant::now() < until {
        if interrupted() {
            return false;
        }
        std::thread::sleep((until - Instant::now()).min(Duration::from_millis(100)));
    }
    !interrupted()
}

/// Applies `fault` to `tb` and lifts it: the window it was in force.
fn apply(tb: &Testbed, fault: &Fault, vanished: &mut usize, k: usize) -> Result<Window, String> {
    let port = format!("c{}", fault.client);
    let start = Instant::now();
    let lift_at = start + fault.duration;
    let err = |e: testbed::TestbedError| e.to_string();
    match fault.kind {
        FaultKind::Flap => {
            tb.set_link_up(&port, false).map_err(err)?;
            sleep_until(lift_at);
            tb.set_link_up(&port, true).map_err(err)?;
        }
        FaultKind::LossBurst | FaultKind::ReorderDuplicate => {
            let options =
                if fault.kind == FaultKind::LossBurst { faults::LOSS_BURST } else { faults::REORDER_DUPLICATE };
            tb.reconfigure_link(&port, options).map_err(err)?;
            sleep_until(lift_at);
            tb.reconfigure_link(&port, "").map_err(err)?;
        }
        FaultKind::Vanish => {
            *vanished += vanish::vanish(tb, fault.client, vanish_address(tb, k), server_addr(tb))?;
        }
    }
    Ok(Window { kind: fault.kind, client: fault.client, start, end: Instant::now() })
}

/// Applies `plan`, timed from `from`, recording each window in `report`
/// (`k`: how many vanishing clients came before).
fn run_faults(tb: &Testbed, plan: &[Fault], from: Instant, report: &mut Report, k: usize) {
    for (n, fault) in plan.iter().enumerate() {
        if !sleep_until(from + fault.at) {
            break;
        }
        match apply(tb, fault, &mut report.vanished, k + n) {
            Ok(window) => report.windows.push(window),
            Err(e) => report.failures.push(format!("applying a {}: {e}", fault.kind.name())),
        }
    }
}

/// Runs the soak `config` describes.
///
/// # Errors
///
/// When the testbed or the server cannot be started (nothing was judged).
pub fn run(config: &SoakConfig) -> Result<Report, String> {
    testbed::require_root().map_err(|e| e.to_string())?;
    let link = LinkParams::parse_list(LINK).map_err(|e| e.to_string())?;
    let mut tb_config = TestbedConfig::new(config.prefix.clone()).clients(3).queues(2);
    for client in 0..3 {
        tb_config = tb_config.link(client, link.clone());
    }
    if let Some(linkem) = &config.linkem {
        tb_config = tb_config.linkem(linkem.clone());
    }
    let tb = Testbed::up(tb_config).map_err(|e| format!("testbed up: {e}"))?;
    let server = Soaked::start(&tb, config)?;
    let started = Instant::now();
    let mut report = Report::default();
    let first = scrape(&tb)?;
    let prober = Prober::start(server_addr(&tb), PROBER, tb.client_ns(PROBER), server.id());
    let clients: Vec<(usize, String)> = LOAD_CLIENTS.iter().map(|&c| (c, tb.client_ns(c))).collect();

    let (first_round, warm_up) = faults::round(&LOAD_CLIENTS, config.seed);
    let faulted = config.length.checked_sub(warm_up).filter(|d| *d >= MIN_FAULTED).ok_or_else(|| {
        format!(
            "the soak lasts {:?}: at least {:?} (a round of faults, then {MIN_FAULTED:?})",
            config.length,
            warm_up + MIN_FAULTED
        )
    })?;
    eprintln!("soak: warm-up, {} s: the load and a round of faults", warm_up.as_secs());
    let warm = Load::start(server_addr(&tb), &clients, config.seed);
    run_faults(&tb, &first_round, started, &mut report, 0);
    sleep_until(started + warm_up);
    report.tally.merge(warm.stop());
    let (baseline, rss) = quiet_baseline(&tb, &server)?;
    report.rss.0 = rss;

    let plan = faults::plan(faulted, &LOAD_CLIENTS, QUIET_END, config.seed.wrapping_add(1), usize::MAX);
    eprintln!(
        "soak: baseline RSS {:.1} MiB; {} s of load and {} faults",
        report.rss.0 as f64 / 1024.0,
        faulted.as_secs(),
        plan.len()
    );
    let phase = Instant::now();
    let load = Load::start(server_addr(&tb), &clients, config.seed.wrapping_add(1));
    run_faults(&tb, &plan, phase, &mut report, first_round.len());
    sleep_until(phase + faulted);
    report.tally.merge(load.stop());
    let load_end = Instant::now();

    eprintln!("soak: load over; the server has {} s to get back to its baseline", drain_limit().as_secs());
    let (drained, mut end) = wait_for_baseline(&tb, &baseline, drain_limit());
    report.drained_in = drained.map(|_| load_end.elapsed());
    std::thread::sleep(POOL_SETTLE);
    report.rss.1 = server.rss_kib().unwrap_or(u64::MAX);
    let last = scrape(&tb);
    // TIME-WAIT as it is after the settle, the RSS's moment.
    end.time_wait = last.as_deref().map_or(f64::NAN, |text| load::connections(text).time_wait);
    report.connections = (baseline, end);
    report.probes = prober.stop();
    match last {
        Ok(last) => {
            let before = counters(&first);
            for (key, now) in counters(&last) {
                let was = before.iter().find(|(k, _)| *k == key).map_or(0.0, |(_, v)| *v);
                if now != was {
                    report.drops.push((key, now - was));
                }
            }
        }
        Err(e) => report.failures.push(format!("the last /metrics scrape failed: {e}")),
    }
    if let Err(e) = server.stop() {
        report.failures.push(e);
    }
    if interrupted() {
        report.failures.push("interrupted (SIGINT or SIGTERM)".to_owned());
    }
    report.judge(started);
    if let Err(e) = tb.down() {
        report.failures.push(format!("testbed down: {e}"));
    }
    Ok(report)
}
