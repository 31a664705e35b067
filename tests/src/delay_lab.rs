//! The delay × size experiment (`cargo xtask lab delay`): how added network
//! delay slows HTTP downloads of each size, reproduced on the testbed.
//!
//! One of the studies behind Fairway measured it with `tc netem` on the
//! 100 Mbit/s link between a client and a web server: curl downloads of
//! 100 KB to 300 MB at 0 to 2,000 ms of added delay, 10 tries per cell at
//! 10 s intervals. Its headline: small files collapse under a little delay
//! (100 KB: 43.38 Mbit/s without, 20.02 at +5 ms; 250 KB: 65.37 → 35.56).
//!
//! Here one client namespace reaches the server through the link emulator
//! at 100 Mbit/s with the added delay on its link (half each way: the same
//! round trip as netem's delay on one interface), and kernel `curl`
//! downloads `/bytes/N` from nginx, from Fairway over AF_XDP and from
//! Fairway on kernel sockets, one server at a time, each on one core. Each
//! try is two downloads back to back, each on a new connection: the first,
//! and a repeat from the same client within a second of it (a returning
//! client, which a server that remembers its paths could start faster);
//! they are reported apart. Speed is size over curl's total time, in
//! Mbit/s; time to first byte is curl's `time_starttransfer`. A download
//! that does not finish within the per-cell bound is marked, not dropped.

use std::fmt::Write as _;
use std::path::Path;
use std::time::Duration;

use crate::fairness_testbed::{LabServer, Running};
use crate::plot::{self, Panel, Series};
use crate::stats::median;
use crate::testbed::{self, LinkParams, Testbed, TestbedConfig};

/// The study's added delays, milliseconds.
pub const STUDY_DELAYS_MS: [u64; 12] = [0, 5, 10, 20, 30, 40, 50, 100, 200, 500, 1_000, 2_000];
/// The study's file sizes, bytes.
pub const STUDY_SIZES: [u64; 13] = [
    100_000,
    250_000,
    500_000,
    1_000_000,
    2_000_000,
    3_000_000,
    5_000_000,
    10_000_000,
    30_000_000,
    50_000_000,
    100_000_000,
    200_000_000,
    300_000_000,
];
/// The study's headline cells: size, added delay (ms), its median speed
/// (Mbit/s).
pub const STUDY_HEADLINE: [(u64, u64, f64); 4] =
    [(100_000, 0, 43.38), (100_000, 5, 20.02), (250_000, 0, 65.37), (250_000, 5, 35.56)];
/// The link's rate, as the study's.
pub const LINK_BPS: u64 = 100_000_000;

/// What a run covers.
#[derive(Clone, Debug, PartialEq)]
pub struct DelayPlan {
    /// Added delays (the round trip grows by each).
    pub delays: Vec<Duration>,
    /// Download sizes, bytes.
    pub sizes: Vec<u64>,
    /// Tries per cell (each a first download and a repeat).
    pub tries: usize,
    /// Pause between two tries of a cell.
    pub interval: Duration,
    /// The servers, one after the other.
    pub servers: Vec<LabServer>,
    /// The longest a download may take before it is marked unfinished.
    pub bound: Duration,
    /// Fairway over AF_XDP runs once per `--fast-start` mode here (empty:
    /// once, with the server's default); each run is a row of its own.
    pub fast_start: Vec<&'static str>,
    /// The same for `--initial-window` (segments).
    pub initial_windows: Vec<u32>,
    /// The same for `--socket-buffer` (MiB).
    pub socket_buffers: Vec<u32>,
}

/// The fast-start modes the server takes.
pub const FAST_START_MODES: [&str; 3] = ["off", "path-memory", "careful-resume"];

/// One row of the report: a server, and for Fairway over AF_XDP the
/// `--fast-start` mode, `--initial-window` and `--socket-buffer` it ran
/// with (`None`: not given, the server's default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// Who serves.
    pub server: LabServer,
    /// `--fast-start`.
    pub fast_start: Option<&'static str>,
    /// `--initial-window`.
    pub initial_window: Option<u32>,
    /// `--socket-buffer`, MiB.
    pub socket_buffer: Option<u32>,
}

impl Row {
    /// `server` with its defaults.
    #[must_use]
    pub fn plain(server: LabServer) -> Row {
        Row { server, fast_start: None, initial_window: None, socket_buffer: None }
    }

    /// `fairway/afxdp off, fast-start careful-resume, IW 32`, …
    #[must_use]
    pub fn label(&self) -> String {
        let mut label = self.server.label();
        if let Some(mode) = self.fast_start {
            label.push_str(&format!(", fast-start {mode}"));
        }
        if let Some(iw) = self.initial_window {
            label.push_str(&format!(", IW {iw}"));
        }
        if let Some(mib) = self.socket_buffer {
            label.push_str(&format!(", buffer {mib} MiB"));
        }
        label
    }

    /// The server flags of the row.
    fn flags(&self) -> Vec<String> {
        let mut flags = Vec::new();
        if let Some(mode) = self.fast_start {
            flags.extend(["--fast-start".to_owned(), mode.to_owned()]);
        }
        if let Some(iw) = self.initial_window {
            flags.extend(["--initial-window".to_owned(), iw.to_string()]);
        }
        if let Some(mib) = self.socket_buffer {
            flags.extend(["--socket-buffer".to_owned(), format!("{mib}MiB")]);
        }
        flags
    }

    /// Whether the server restarts before each try, so that a try's first
    /// download meets a server that remembers no path: Fairway over AF_XDP
    /// unless its fast start is off (without `--fast-start` it runs the
    /// server's default, careful resume).
    fn fresh_per_try(&self) -> bool {
        matches!(self.server, LabServer::Afxdp(_)) && self.fast_start != Some("off")
    }
}

impl DelayPlan {
    /// The default: the study's headline cells and enough around them to
    /// draw its curves, 3 tries, in well under 20 minutes: delays 0, 5, 20,
    /// 50, 100 and 200 ms; sizes 100 KB, 250 KB, 1 MB and 10 MB.
    #[must_use]
    pub fn default_subset() -> DelayPlan {
        DelayPlan {
            delays: [0, 5, 20, 50, 100, 200].map(Duration::from_millis).to_vec(),
            sizes: vec![100_000, 250_000, 1_000_000, 10_000_000],
            tries: 3,
            interval: Duration::ZERO,
            servers: servers(),
            bound: Duration::from_secs(60),
            fast_start: Vec::new(),
            initial_windows: Vec::new(),
            socket_buffers: Vec::new(),
        }
    }

    /// The study's whole grid: every delay and size, 10 tries at 10 s
    /// intervals (many hours).
    #[must_use]
    pub fn full() -> DelayPlan {
        DelayPlan {
            delays: STUDY_DELAYS_MS.map(Duration::from_millis).to_vec(),
            sizes: STUDY_SIZES.to_vec(),
            tries: 10,
            interval: Duration::from_secs(10),
            servers: servers(),
            bound: Duration::from_secs(600),
            fast_start: Vec::new(),
            initial_windows: Vec::new(),
            socket_buffers: Vec::new(),
        }
    }

    /// The report's rows, in the order they run: each server, Fairway over
    /// AF_XDP once per fast-start mode, initial window and socket buffer
    /// asked for.
    #[must_use]
    pub fn rows(&self) -> Vec<Row> {
        // Each setting asked for, or once the server's default (`None`).
        fn each<T: Copy>(asked: &[T]) -> Vec<Option<T>> {
            if asked.is_empty() { vec![None] } else { asked.iter().copied().map(Some).collect() }
        }
        let (modes, windows, buffers) =
            (each(&self.fast_start), each(&self.initial_windows), each(&self.socket_buffers));
        let mut rows = Vec::new();
        for &server in &self.servers {
            if matches!(server, LabServer::Afxdp(_)) {
                for &fast_start in &modes {
                    for &initial_window in &windows {
                        for &socket_buffer in &buffers {
                            rows.push(Row { server, fast_start, initial_window, socket_buffer });
                        }
                    }
                }
            } else {
                rows.push(Row::plain(server));
            }
        }
        rows
    }
}

/// nginx, Fairway over AF_XDP and Fairway on kernel sockets, no policy.
fn servers() -> Vec<LabServer> {
    vec![LabServer::Nginx, LabServer::Afxdp("off"), LabServer::Kernel("off")]
}

/// Which download of a try.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Visit {
    /// The try's first download.
    First,
    /// The same again at once, from the same client, on a new connection.
    Repeat,
}

impl Visit {
    /// Both, in the order they run.
    pub const BOTH: [Visit; 2] = [Visit::First, Visit::Repeat];

    fn name(self) -> &'static str {
        match self {
            Visit::First => "first",
            Visit::Repeat => "repeat",
        }
    }
}

/// One download's figures.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Download {
    /// Size over curl's total time, Mbit/s.
    pub mbps: f64,
    /// Time to the first byte of the body.
    pub ttfb: Duration,
}

/// Every try of one cell.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    /// Who served, and how.
    pub row: Row,
    /// The delay added to the round trip.
    pub delay: Duration,
    /// The download's size, bytes.
    pub size: u64,
    /// Which download of each try.
    pub visit: Visit,
    /// Each try: its figures, or why it has none (over the bound, failed).
    pub tries: Vec<Result<Download, String>>,
    /// Careful resume's jumps and safe retreats the server counted over
    /// the tries of this cell's size (first and repeat downloads together;
    /// kept on the repeat cell), when the server reports them.
    pub fast_start: Option<(u64, u64)>,
}

impl Cell {
    /// The median speed and its spread (min, max) over the finished tries.
    #[must_use]
    pub fn speed(&self) -> Option<(f64, f64, f64)> {
        let speeds: Vec<f64> = self.tries.iter().filter_map(|t| t.as_ref().ok()).map(|d| d.mbps).collect();
        if speeds.is_empty() {
            return None;
        }
        let min = speeds.iter().copied().fold(f64::INFINITY, f64::min);
        let max = speeds.iter().copied().fold(0.0, f64::max);
        Some((median(speeds), min, max))
    }

    /// The median time to first byte over the finished tries.
    #[must_use]
    pub fn ttfb(&self) -> Option<Duration> {
        let ttfbs: Vec<f64> = self.tries.iter().filter_map(|t| t.as_ref().ok()).map(|d| d.ttfb.as_secs_f64()).collect();
        (!ttfbs.is_empty()).then(|| Duration::from_secs_f64(median(ttfbs)))
    }

    /// Tries that did not finish.
    #[must_use]
    pub fn unfinished(&self) -> usize {
        self.tries.iter().filter(|t| t.is_err()).count()
    }
}

/// The testbed of one delay: one client, its link at [`LINK_BPS`] with
/// `delay` added to the round trip.
fn testbed_config(prefix: &str, delay: Duration) -> TestbedConfig {
    let link = LinkParams { delay: Some(delay / 2), rate_bps: Some(LINK_BPS), ..LinkParams::default() };
    TestbedConfig::new(prefix).clients(1).queues(1).link(0, link)
}

/// Runs `plan` on fresh testbeds under `prefix` (one per delay), telling
/// `progress` what it does.
///
/// # Errors
///
/// A testbed or a server that does not start.
pub fn run(plan: &DelayPlan, prefix: &str, progress: &dyn Fn(&str)) -> Result<Vec<Cell>, String> {
    testbed::require_root().map_err(|e| e.to_string())?;
    let mut cells = Vec::new();
    for &delay in &plan.delays {
        let tb = Testbed::up(testbed_config(prefix, delay)).map_err(|e| format!("testbed up: {e}"))?;
        for row in plan.rows() {
            progress(&format!("+{} ms: {}", delay.as_millis(), row.label()));
            let start = || Running::start_serving(&tb, row.server, None, &plan.sizes, &row.flags());
            let mut running = Some(start()?);
            for &size in &plan.sizes {
                // Each try: a first download, then its repeat at once.
                let mut first = Vec::with_capacity(plan.tries);
                let mut repeat = Vec::with_capacity(plan.tries);
                let mut counted: Option<(u64, u64)> = None;
                for n in 0..plan.tries {
                    if n > 0 {
                        std::thread::sleep(plan.interval);
                    }
                    if row.fresh_per_try() && (n > 0 || size != plan.sizes[0]) {
                        // A server that remembers nothing for the first download.
                        if let Some(old) = running.take() {
                            old.stop();
                        }
                        running = Some(start()?);
                    }
                    first.push(download(&tb, size, plan.bound));
                    repeat.push(download(&tb, size, plan.bound));
                    if row.fresh_per_try()
                        && let Some(now) = fast_start_counts(&tb)
                    {
                        let (j, r) = counted.unwrap_or_default();
                        counted = Some((j + now.0, r + now.1));
                    }
                }
                for (visit, tries) in [(Visit::First, first), (Visit::Repeat, repeat)] {
                    let fast_start = counted.filter(|_| visit == Visit::Repeat);
                    cells.push(Cell { row, delay, size, visit, tries, fast_start });
                }
            }
            if let Some(running) = running {
                running.stop();
            }
        }
    }
    Ok(cells)
}

/// Careful resume's jumps and retreats so far, from the server's
/// `/metrics` (summed over shards). The shards publish their counters once
/// a second: this waits for that, and asks twice (the first request may be
/// what wakes the shard to publish).
fn fast_start_counts(tb: &Testbed) -> Option<(u64, u64)> {
    let url = format!("http://{}/metrics", tb.server_ip());
    std::thread::sleep(Duration::from_millis(1100));
    let fetch = || {
        testbed::exec_timeout(&tb.client_ns(0), &["curl", "-s", "--max-time", "5", &url], Duration::from_secs(10)).ok()
    };
    fetch()?;
    std::thread::sleep(Duration::from_millis(50));
    let text = fetch()?.stdout_text();
    let sum = |name: &str| -> u64 {
        text.lines()
            .filter(|l| l.starts_with(name) && l[name.len()..].starts_with(['{', ' ']))
            .filter_map(|l| l.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64
    };
    Some((sum("fairway_tcp_fast_start_jumps_total"), sum("fairway_tcp_fast_start_retreats_total")))
}

/// One download of `size` bytes by kernel curl in the client namespace.
fn download(tb: &Testbed, size: u64, bound: Duration) -> Result<Download, String> {
    let url = format!("http://{}/bytes/{size}", tb.server_ip());
    let max_time = format!("{:.3}", bound.as_secs_f64());
    let line = [
        "curl",
        "-s",
        "-o",
        "/dev/null",
        "--max-time",
        &max_time,
        "-w",
        "%{http_code} %{size_download} %{time_starttransfer} %{time_total}",
        &url,
    ];
    let out =
        testbed::exec_timeout(&tb.client_ns(0), &line, bound + Duration::from_secs(5)).map_err(|e| e.to_string())?;
    let text = out.stdout_text();
    let words: Vec<&str> = text.split_whitespace().collect();
    let [code, got, ttfb, total] = words.as_slice() else {
        return Err(format!("curl said {text:?}"));
    };
    if !out.success() {
        // curl's exit status 28: the time ran out.
        return Err(if out.status.code() == Some(28) { "over the bound".to_owned() } else { format!("curl: {text}") });
    }
    let (got, ttfb, total): (u64, f64, f64) = match (got.parse(), ttfb.parse(), total.parse()) {
        (Ok(g), Ok(f), Ok(t)) => (g, f, t),
        _ => return Err(format!("curl said {text:?}")),
    };
    if *code != "200" || got != size || total <= 0.0 {
        return Err(format!("status {code}, {got} of {size} bytes"));
    }
    Ok(Download { mbps: size as f64 * 8.0 / total / 1e6, ttfb: Duration::from_secs_f64(ttfb) })
}

/// `100 KB`, `1 MB`, `300 MB`.
#[must_use]
pub fn size_label(size: u64) -> String {
    if size >= 1_000_000 { format!("{} MB", size / 1_000_000) } else { format!("{} KB", size / 1_000) }
}

/// The Markdown: per server and visit, speeds (median [min–max]) by size
/// and delay, then times to first byte, then the study's headline cells
/// beside ours.
#[must_use]
pub fn report(plan: &DelayPlan, cells: &[Cell]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "Kernel curl downloads of /bytes/N over a {} Mbit/s link, the added delay in the round trip; {} \
         tries per cell{}; speed = size / curl's total time; medians [min–max], Mbit/s. `first` is a try's \
         first download, `repeat` the same at once on a new connection. A cell with downloads over the {} s \
         bound says how many.\n",
        LINK_BPS / 1_000_000,
        plan.tries,
        if plan.interval.is_zero() { String::new() } else { format!(" {} s apart", plan.interval.as_secs()) },
        plan.bound.as_secs()
    );
    let find = |row, delay, size, visit| find(cells, row, delay, size, visit);
    let rows = plan.rows();
    if rows.len() > plan.servers.len() {
        side_by_side(&mut out, plan, &rows, cells);
    }
    for &server in &rows {
        for visit in Visit::BOTH {
            let _ = writeln!(out, "### {}, {} downloads: speed\n", server.label(), visit.name());
            let mut header = "| size |".to_owned();
            let mut rule = "|---|".to_owned();
            for delay in &plan.delays {
                let _ = write!(header, " +{} ms |", delay.as_millis());
                rule.push_str("--:|");
            }
            let _ = writeln!(out, "{header}\n{rule}");
            for &size in &plan.sizes {
                let mut row = format!("| {} |", size_label(size));
                for &delay in &plan.delays {
                    let cell = find(server, delay, size, visit);
                    let text = match cell.and_then(|c| c.speed().map(|s| (s, c.unfinished()))) {
                        Some(((m, lo, hi), 0)) => format!("{m:.1} [{lo:.1}–{hi:.1}]"),
                        Some(((m, lo, hi), n)) => format!("{m:.1} [{lo:.1}–{hi:.1}], {n} unfinished"),
                        None => "unfinished".to_owned(),
                    };
                    let _ = write!(row, " {text} |");
                }
                let _ = writeln!(out, "{row}");
            }
            let _ = writeln!(out, "\nTime to first byte, median, ms:\n\n{header}\n{rule}");
            for &size in &plan.sizes {
                let mut row = format!("| {} |", size_label(size));
                for &delay in &plan.delays {
                    let ttfb = find(server, delay, size, visit).and_then(Cell::ttfb);
                    let text = ttfb.map_or("—".to_owned(), |t| format!("{:.1}", t.as_secs_f64() * 1e3));
                    let _ = write!(row, " {text} |");
                }
                let _ = writeln!(out, "{row}");
            }
            out.push('\n');
        }
    }
    let _ = writeln!(out, "### The study's headline cells beside ours (first downloads)\n");
    let mut header = "| size | added delay | the study |".to_owned();
    let mut rule = "|---|--:|--:|".to_owned();
    for server in &rows {
        let _ = write!(header, " {} |", server.label());
        rule.push_str("--:|");
    }
    let _ = writeln!(out, "{header}\n{rule}");
    for (size, delay_ms, theirs) in STUDY_HEADLINE {
        let delay = Duration::from_millis(delay_ms);
        let mut row = format!("| {} | +{delay_ms} ms | {theirs:.2} |", size_label(size));
        for &server in &rows {
            let ours = find(server, delay, size, Visit::First).and_then(Cell::speed);
            let _ = write!(row, " {} |", ours.map_or("not run".to_owned(), |(m, _, _)| format!("{m:.2}")));
        }
        let _ = writeln!(out, "{row}");
    }
    out
}

/// The lab's last line: `delay: 100 KB at +5 ms: fairway X Mbit/s vs nginx
/// Y Mbit/s (R ×), repeat connections`, for Fairway over AF_XDP as the
/// server runs by default (else the first of its rows, named), or what is
/// missing for it.
#[must_use]
pub fn closing_line(plan: &DelayPlan, cells: &[Cell]) -> String {
    let (size, delay) = (100_000, Duration::from_millis(5));
    let head = "delay: 100 KB at +5 ms:";
    let rows = plan.rows();
    let afxdp = |r: &&Row| matches!(r.server, LabServer::Afxdp(_));
    let ours = rows.iter().filter(afxdp).find(|r| r.flags().is_empty()).or_else(|| rows.iter().find(afxdp));
    let median = |row: Row| find(cells, row, delay, size, Visit::Repeat).and_then(Cell::speed).map(|(m, _, _)| m);
    let nginx = median(Row::plain(LabServer::Nginx));
    match (ours.copied().and_then(median), nginx) {
        (Some(f), Some(n)) => {
            let name = ours.filter(|r| !r.flags().is_empty()).map_or("fairway".to_owned(), Row::label);
            format!("{head} {name} {f:.1} Mbit/s vs nginx {n:.1} Mbit/s ({:.2} ×), repeat connections", f / n)
        }
        _ => format!("{head} no figure (needs Fairway over AF_XDP and nginx at 100 KB and +5 ms), repeat connections"),
    }
}

/// One panel per server of first downloads' median speeds: a line per
/// item of `lines` (labelled by `label`), a point per item of `points`,
/// `at` telling the cell's delay and size and the point's x.
fn panels<L, P>(
    plan: &DelayPlan,
    cells: &[Cell],
    lines: &[L],
    points: &[P],
    label: impl Fn(&L) -> String,
    at: impl Fn(&L, &P) -> (Duration, u64, f64),
) -> Vec<Panel> {
    let speed = |server, (delay, size, x)| {
        let (median, _, _) = find(cells, server, delay, size, Visit::First)?.speed()?;
        Some((x, median))
    };
    plan.rows()
        .iter()
        .map(|&server| Panel {
            title: server.label(),
            series: lines
                .iter()
                .map(|line| {
                    let points = points.iter().filter_map(|point| speed(server, at(line, point))).collect();
                    Series::new(label(line), points)
                })
                .collect(),
        })
        .collect()
}

/// The cell of `row`, `delay`, `size` and `visit`, if it ran.
fn find(cells: &[Cell], row: Row, delay: Duration, size: u64, visit: Visit) -> Option<&Cell> {
    cells.iter().find(|c| c.row == row && c.delay == delay && c.size == size && c.visit == visit)
}

/// One table of every row's first and repeat medians per cell, and what
/// careful resume did (jumps / safe retreats over the cell's tries).
fn side_by_side(out: &mut String, plan: &DelayPlan, rows: &[Row], cells: &[Cell]) {
    let _ = writeln!(out, "### Side by side: median Mbit/s, first / repeat downloads\n");
    let mut header = "| size | added delay |".to_owned();
    let mut rule = "|---|--:|".to_owned();
    for row in rows {
        let _ = write!(header, " {} |", row.label());
        rule.push_str("--:|");
    }
    let _ = writeln!(out, "{header}\n{rule}");
    for &size in &plan.sizes {
        for &delay in &plan.delays {
            let mut line = format!("| {} | +{} ms |", size_label(size), delay.as_millis());
            for &row in rows {
                let median = |visit| {
                    find(cells, row, delay, size, visit)
                        .and_then(Cell::speed)
                        .map_or("—".to_owned(), |(m, _, _)| format!("{m:.1}"))
                };
                let _ = write!(line, " {} / {}", median(Visit::First), median(Visit::Repeat));
                if let Some((jumps, retreats)) = find(cells, row, delay, size, Visit::Repeat)
                    .and_then(|c| c.fast_start)
                    .filter(|_| row.fast_start.is_some())
                {
                    let _ = write!(line, " ({jumps} j, {retreats} r)");
                }
                line.push_str(" |");
            }
            let _ = writeln!(out, "{line}");
        }
    }
    let _ = writeln!(
        out,
        "\n(n j, m r): careful resume's jumps and safe retreats the server counted over the cell's tries, first and \
         repeat downloads together (read from /metrics a second after each try). A server with fast start on \
         (path-memory or careful-resume) restarts before each try, so that the first download meets an empty path \
         cache.\n"
    );
}

/// The study's two kinds of chart, for every server side by side: speed
/// against delay (one line per size) and speed against size (one line per
/// delay), first downloads. Written beside `markdown` as
/// `<stem>-by-delay.png` and `<stem>-by-size.png`; returns their names.
///
/// # Errors
///
/// A chart could not be drawn.
pub fn write_charts(markdown: &Path, plan: &DelayPlan, cells: &[Cell]) -> Result<Vec<String>, String> {
    let stem = markdown.file_stem().map(|s| s.to_string_lossy().into_owned()).unwrap_or_else(|| "delay".into());
    let by_delay = panels(
        plan,
        cells,
        &plan.sizes,
        &plan.delays,
        |&size| size_label(size),
        |&size, &delay| (delay, size, delay.as_millis() as f64),
    );
    let by_size = panels(
        plan,
        cells,
        &plan.delays,
        &plan.sizes,
        |d| format!("+{} ms", d.as_millis()),
        |&delay, &size| (delay, size, (size as f64).log10()),
    );
    let dir = markdown.parent().unwrap_or(Path::new("."));
    let files = [format!("{stem}-by-delay.png"), format!("{stem}-by-size.png")];
    plot::speed_panels(
        &dir.join(&files[0]),
        "Download speed against added delay, one line per size",
        "added delay, ms",
        &by_delay,
    )?;
    plot::speed_panels(
        &dir.join(&files[1]),
        "Download speed against size, one line per added delay",
        "size, log10 bytes",
        &by_size,
    )?;
    Ok(files.to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cell(server: LabServer, delay_ms: u64, size: u64, visit: Visit, speeds: &[f64]) -> Cell {
        let row = Row::plain(server);
        let tries =
            speeds
                .iter()
                .map(|&s| {
                    if s > 0.0 { Ok(Download { mbps: s, ttfb: Duration::from_millis(3) }) } else { Err("over".into()) }
                })
                .collect();
        Cell { row, delay: Duration::from_millis(delay_ms), size, visit, tries, fast_start: None }
    }

    #[test]
    fn the_default_covers_the_studys_headline_cells_and_the_full_grid_is_the_studys() {
        let plan = DelayPlan::default_subset();
        for (size, delay, _) in STUDY_HEADLINE {
            assert!(plan.sizes.contains(&size) && plan.delays.contains(&Duration::from_millis(delay)));
        }
        let full = DelayPlan::full();
        assert_eq!((full.delays.len(), full.sizes.len(), full.tries), (12, 13, 10));
        assert_eq!(full.interval, Duration::from_secs(10));
        assert_eq!(size_label(100_000), "100 KB");
        assert_eq!(size_label(300_000_000), "300 MB");
    }

    #[test]
    fn fast_start_modes_make_rows_of_fairway_over_afxdp_alone() {
        let plan = DelayPlan {
            servers: vec![LabServer::Nginx, LabServer::Afxdp("off"), LabServer::Kernel("off")],
            fast_start: vec!["off", "careful-resume"],
            initial_windows: vec![10, 32],
            ..DelayPlan::default_subset()
        };
        let rows = plan.rows();
        assert_eq!(rows.len(), 1 + 4 + 1);
        assert_eq!(rows[0], Row::plain(LabServer::Nginx));
        assert_eq!(rows[4].label(), "fairway/afxdp off, fast-start careful-resume, IW 32");
        assert_eq!(rows[4].flags(), ["--fast-start", "careful-resume", "--initial-window", "32"]);
        assert!(rows[4].fresh_per_try() && !rows[1].fresh_per_try());
        // The server's default is careful resume: a plain row starts afresh too.
        assert!(Row::plain(LabServer::Afxdp("off")).fresh_per_try());
        assert!(!Row::plain(LabServer::Kernel("off")).fresh_per_try() && !rows[0].fresh_per_try());
        assert_eq!(rows[5], Row::plain(LabServer::Kernel("off")));
        assert_eq!(DelayPlan::default_subset().rows().len(), 3);
    }

    #[test]
    fn socket_buffers_make_rows_of_fairway_over_afxdp_alone() {
        let plan = DelayPlan {
            servers: vec![LabServer::Nginx, LabServer::Afxdp("off")],
            initial_windows: vec![32],
            socket_buffers: vec![1, 4],
            ..DelayPlan::default_subset()
        };
        let rows = plan.rows();
        assert_eq!(rows.len(), 1 + 2);
        assert_eq!(rows[0], Row::plain(LabServer::Nginx));
        assert_eq!(rows[2].label(), "fairway/afxdp off, IW 32, buffer 4 MiB");
        assert_eq!(rows[2].flags(), ["--initial-window", "32", "--socket-buffer", "4MiB"]);
        assert_eq!(rows[1].flags(), ["--initial-window", "32", "--socket-buffer", "1MiB"]);
    }

    #[test]
    fn the_last_line_compares_repeat_downloads_of_100_kb_at_5_ms() {
        let plan = DelayPlan::default_subset();
        let cells = vec![
            cell(LabServer::Nginx, 5, 100_000, Visit::Repeat, &[28.0, 30.0, 29.0]),
            cell(LabServer::Afxdp("off"), 5, 100_000, Visit::Repeat, &[38.0, 40.0, 39.0]),
            cell(LabServer::Afxdp("off"), 5, 100_000, Visit::First, &[10.0]),
        ];
        assert_eq!(
            closing_line(&plan, &cells),
            "delay: 100 KB at +5 ms: fairway 39.0 Mbit/s vs nginx 29.0 Mbit/s (1.34 ×), repeat connections"
        );
    }

    #[test]
    fn cells_report_medians_spreads_and_what_did_not_finish() {
        let c = cell(LabServer::Nginx, 5, 100_000, Visit::First, &[20.0, 30.0, 0.0, 25.0]);
        assert_eq!(c.speed(), Some((25.0, 20.0, 30.0)));
        assert_eq!(c.unfinished(), 1);
        let plan = DelayPlan {
            delays: vec![Duration::ZERO, Duration::from_millis(5)],
            sizes: vec![100_000],
            servers: vec![LabServer::Nginx],
            ..DelayPlan::default_subset()
        };
        let cells = vec![
            cell(LabServer::Nginx, 0, 100_000, Visit::First, &[40.0, 42.0, 44.0]),
            c,
            cell(LabServer::Nginx, 0, 100_000, Visit::Repeat, &[0.0, 0.0]),
        ];
        let text = report(&plan, &cells);
        assert!(text.contains("| 100 KB | 42.0 [40.0–44.0] | 25.0 [20.0–30.0], 1 unfinished |"), "{text}");
        assert!(
            closing_line(&plan, &cells)
                .ends_with("no figure (needs Fairway over AF_XDP and nginx at 100 KB and +5 ms), repeat connections")
        );
        assert!(text.contains("| 100 KB | +5 ms | 20.02 | 25.00 |"), "{text}");
        assert!(text.contains("### nginx, repeat downloads: speed"), "{text}");
        assert!(text.contains("| 100 KB | unfinished |"), "{text}");
    }
}
