//! The regression table: one bulk download per cell over a dumbbell path,
//! each a deterministic run whose goodput is printed in a fixed format.
//!
//! `tests/snapshots/regression.txt` holds the table as it was last accepted
//! and `tests/tests/regression.rs` compares a fresh run with it line by line
//! (`FAIRWAY_UPDATE_SNAPSHOTS=1` rewrites it instead). The `regression`
//! scenario prints the table; the `lossy` scenario compares the lossy cells
//! with the Mathis et al. bound for Reno, each cell the mean of
//! [`LOSSY_SEEDS`] runs.
//!
//! # A cell
//!
//! One client downloads from the server over the bottleneck; the access
//! links are ideal. The bottleneck has the cell's bandwidth and a drop-tail
//! queue of one bandwidth-delay product each way, and the cell's random loss
//! and reordering on the data direction only (server to client), so that
//! the loss rate is exactly the one the Mathis bound takes. Both ends get
//! send and receive buffers of four BDPs (between 256 KiB and 16 MiB; the
//! 1 Gbit/s × 100 ms cell gets the 16 MiB, 1.3 BDP), so with window
//! scaling the receive window does not limit a flow. Everything else is
//! [`TcpConfig::default`](fairway_stack::TcpConfig), congestion control
//! included (its name heads the table).
//!
//! Goodput is measured over a fixed virtual duration, [`WINDOW`] (30 s),
//! from the moment the client's handshake completes: bytes the client
//! application read in that time, every one of them checked against what
//! the server sent. A fixed duration rather than a fixed size keeps slow
//! and fast cells comparable (a slow-start ramp weighs the same in each)
//! and bounds a cell's cost by its link's capacity. The simulation moves
//! about 0.7 GB of payload per second of wall time in release and 0.4 GB
//! in the dev profile. The table moves about 3.7 GB today, 3.4 GB of them
//! in the 1 Gbit/s cell (5 s in release on two threads, 9 s for the tests
//! in the dev profile); were every cell at line rate it would move about
//! 6 GB, some 15 s in the dev profile.
//!
//! Every figure in the table is deterministic: integers of bytes and
//! microseconds, formatted with fixed precision. The table changes when the
//! stack's behaviour does, which is its purpose: review the diff, then
//! rewrite the snapshot.

use core::net::SocketAddrV4;
use std::fmt::Write as _;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use fairway_nic::sim::{LinkConfig, Side};
use fairway_stack::TcpConfig;
use fairway_stack::time::{Duration, Instant};

use crate::scenario::{Report, SERVER_IP, SERVER_PORT, client_ip};
use crate::stream::{StreamResult, Streams};
use crate::world::{Stop, World};

/// How long goodput is measured, from the end of the handshake.
pub const WINDOW: Duration = Duration::from_secs(30);

/// The seed the snapshot is taken with.
pub const SNAPSHOT_SEED: u64 = 1;

/// The MSS the Mathis bound assumes: a 1500-byte MTU minus minimal IPv4 and
/// TCP headers (with timestamps a segment carries 12 bytes less, which only
/// makes the bound harder to reach).
pub const MSS: u32 = 1460;

/// The IP MTU of every cell.
const MTU: usize = 1500;

/// Loss rates of the 100 Mbit/s grid.
pub const GRID_LOSSES: [f64; 4] = [0.0, 0.001, 0.01, 0.05];
/// Round-trip times of the 100 Mbit/s grid, in milliseconds.
pub const GRID_RTTS_MS: [u64; 3] = [10, 50, 200];

/// The smallest and largest buffer a cell gets.
const MIN_BUFFER: usize = 256 * 1024;
const MAX_BUFFER: usize = 16 * 1024 * 1024;

/// One path and its impairments.
#[derive(Clone, Debug, PartialEq)]
pub struct Cell {
    /// A short unique name: bandwidth / RTT / loss [/ reordering].
    pub name: String,
    /// Bottleneck bandwidth, Mbit/s.
    pub bandwidth_mbps: u64,
    /// Round-trip propagation delay (no queueing).
    pub rtt: Duration,
    /// Random loss on the data direction.
    pub loss: f64,
    /// Fraction of data frames delayed by up to one RTT (uniformly), so
    /// that later frames overtake them.
    pub reorder: f64,
    /// Send and receive buffers of both ends, bytes.
    pub buffer: usize,
    /// Drop-tail queue of each bottleneck direction, bytes.
    pub queue_bytes: usize,
}

impl Cell {
    /// A cell with a one-BDP queue and buffers of four BDPs.
    pub fn new(bandwidth_mbps: u64, rtt_ms: u64, loss: f64) -> Cell {
        let rtt = Duration::from_millis(rtt_ms);
        let bdp = (bandwidth_mbps * 1_000_000 / 8 * rtt_ms / 1000) as usize;
        let bandwidth = if bandwidth_mbps.is_multiple_of(1000) {
            format!("{}G", bandwidth_mbps / 1000)
        } else {
            format!("{bandwidth_mbps}M")
        };
        Cell {
            name: format!("{bandwidth}/{rtt_ms}ms/{}%", percent(loss)),
            bandwidth_mbps,
            rtt,
            loss,
            reorder: 0.0,
            buffer: (4 * bdp).next_power_of_two().clamp(MIN_BUFFER, MAX_BUFFER),
            queue_bytes: bdp,
        }
    }

    /// The same cell with a fraction `p` of data frames reordered.
    pub fn with_reorder(mut self, p: f64) -> Cell {
        self.reorder = p;
        self.name = format!("{}/reorder{}%", self.name, percent(p));
        self
    }

    /// The bandwidth-delay product, bytes.
    pub fn bdp(&self) -> u64 {
        self.bandwidth_mbps * 1_000_000 / 8 * self.rtt.total_micros() / 1_000_000
    }
}

/// A probability as a percentage without trailing zeros: 0.001 → "0.1".
fn percent(p: f64) -> String {
    let s = format!("{:.2}", p * 100.0);
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

/// The 12 cells of the 100 Mbit/s grid: RTT 10/50/200 ms × loss 0/0.1/1/5 %.
pub fn grid() -> Vec<Cell> {
    GRID_RTTS_MS.iter().flat_map(|&rtt| GRID_LOSSES.iter().map(move |&loss| Cell::new(100, rtt, loss))).collect()
}

/// A long fat pipe: 1 Gbit/s × 100 ms, 16 MiB buffers (the acceptance
/// test wants ≥ 90 % of the link; it needs window scaling).
pub fn long_fat_pipe() -> Cell {
    let cell = Cell::new(1000, 100, 0.0);
    debug_assert_eq!(cell.buffer, MAX_BUFFER);
    cell
}

/// Round-trip times of the reordering cells, in milliseconds. The same
/// acceptance holds on both: at 10 ms the loss-free baseline fills the link
/// even for a NewReno sender without SACK, so the ratio measures reordering
/// alone; 50 ms displaces frames five times as far in time.
pub const REORDER_RTTS_MS: [u64; 2] = [10, 50];

/// Heavy reordering: a quarter of the data frames delayed by up to one RTT
/// on the grid's 100 Mbit/s paths of [`REORDER_RTTS_MS`], each paired with
/// the grid's loss-free cell of the same RTT, its baseline:
/// `(reordered, baseline)`.
pub fn reordering_pairs() -> Vec<(Cell, Cell)> {
    REORDER_RTTS_MS
        .iter()
        .map(|&rtt| {
            let baseline = Cell::new(100, rtt, 0.0);
            (baseline.clone().with_reorder(0.25), baseline)
        })
        .collect()
}

/// Every cell of the table, in table order.
pub fn cells() -> Vec<Cell> {
    let mut cells = grid();
    cells.push(long_fat_pipe());
    cells.extend(reordering_pairs().into_iter().map(|(reordered, _)| reordered));
    cells
}

/// What one cell measured.
#[derive(Clone, Debug)]
pub struct CellResult {
    /// The cell.
    pub cell: Cell,
    /// The seed it ran with.
    pub seed: u64,
    /// The flow.
    pub stream: StreamResult,
    /// Why the run stopped.
    pub stop: Stop,
    /// Data frames lost by the bottleneck's random loss.
    pub lost: u64,
    /// Frames dropped by the bottleneck's queue, both directions.
    pub queue_drops: u64,
    /// Data frames reordered.
    pub reordered: u64,
}

impl CellResult {
    /// Goodput over the window, Mbit/s (0 if the flow never got there).
    pub fn goodput_mbps(&self) -> f64 {
        self.stream.bytes_in_window.unwrap_or(0) as f64 * 8.0 / WINDOW.as_secs_f64() / 1e6
    }

    /// Goodput as a percentage of the bottleneck's bandwidth.
    pub fn link_percent(&self) -> f64 {
        self.goodput_mbps() / self.cell.bandwidth_mbps as f64 * 100.0
    }

    /// Measured to the end of the window, every byte as sent.
    pub fn intact(&self) -> bool {
        self.stream.intact()
    }

    /// Retransmission timeouts of the server's side of the flow, if known.
    pub fn timeouts(&self) -> Option<u32> {
        self.stream.server_flow.map(|f| f.timeouts)
    }

    /// Segments the server sent again, if known.
    pub fn retransmits(&self) -> Option<u32> {
        self.stream.server_flow.map(|f| f.retransmits)
    }
}

/// Runs one cell.
pub fn run_cell(seed: u64, cell: &Cell) -> CellResult {
    let half = Duration::from_micros(cell.rtt.total_micros() / 2);
    let base = LinkConfig::ideal()
        .with_delay(half)
        .with_bandwidth_mbps(cell.bandwidth_mbps)
        .with_queue_bytes(cell.queue_bytes);
    let data = base.with_loss(cell.loss).with_reorder(cell.reorder, cell.rtt);
    // Clients are on the left: data flows right to left.
    let mut world = World::new(seed, MTU, base, data);
    let mut server_cfg = world.config_for(SERVER_IP);
    server_cfg.tcp.tx_buffer = cell.buffer;
    server_cfg.tcp.rx_buffer = cell.buffer;
    let server = world.add_host(Side::Right, server_cfg, LinkConfig::ideal());
    let mut client_cfg = world.config_for(client_ip(0));
    client_cfg.tcp.tx_buffer = cell.buffer;
    client_cfg.tcp.rx_buffer = cell.buffer;
    let client = world.add_host(Side::Left, client_cfg, LinkConfig::ideal());
    let mut app = Streams::new(server, SocketAddrV4::new(SERVER_IP, SERVER_PORT), &[client], WINDOW);
    // Handshake retries (the SYN-ACK can be lost) plus the window, with room.
    let stop = world.run(&mut app, Instant::from_secs(300), 500_000_000);
    let stats = world.net.stats();
    let stream = app.results.swap_remove(0);
    CellResult {
        cell: cell.clone(),
        seed,
        stream,
        stop,
        lost: stats.right_to_left.lost,
        queue_drops: stats.right_to_left.queue_drops + stats.left_to_right.queue_drops,
        reordered: stats.right_to_left.reordered,
    }
}

/// Runs `cells` with `seed` on up to `threads` threads, results in order.
pub fn run_cells(seed: u64, cells: &[Cell], threads: usize) -> Vec<CellResult> {
    let jobs: Vec<(u64, Cell)> = cells.iter().map(|c| (seed, c.clone())).collect();
    run_jobs(&jobs, threads)
}

/// Runs each `(seed, cell)` on up to `threads` threads (each run is
/// independent and deterministic, so the results do not depend on the
/// threads), results in order.
pub fn run_jobs(jobs: &[(u64, Cell)], threads: usize) -> Vec<CellResult> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<CellResult>>> = Mutex::new(vec![None; jobs.len()]);
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, jobs.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some((seed, cell)) = jobs.get(i) else { break };
                    let r = run_cell(*seed, cell);
                    results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.into_iter().map(|r| r.expect("every cell ran: a worker panicked")).collect()
}

/// Threads for a table: the machine's parallelism.
pub fn default_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// The table's heading lines.
pub fn table_heading(seed: u64) -> Vec<String> {
    let tcp = TcpConfig::default();
    vec![
        format!(
            "regression table, seed {seed}: one download per cell, goodput over {} s after the handshake, \
             congestion control {:?}, window scaling {}, timestamps {}, SACK {}, pacing {}",
            WINDOW.total_millis() / 1000,
            tcp.congestion,
            on_off(tcp.window_scaling),
            on_off(tcp.timestamps),
            on_off(tcp.sack),
            on_off(tcp.pacing),
        ),
        "path: bottleneck queue 1 BDP each way, buffers 4 BDP (256 KiB..16 MiB), loss and reordering on the data \
         direction only, MTU 1500"
            .to_string(),
        format!(
            "{:<26}{:>9}{:>8}{:>11}{:>11}{:>8}{:>8}{:>9}{:>10}  {}",
            "cell", "buffer", "queue", "goodput", "of link", "retx", "RTOs", "lost", "q-drops", "data"
        ),
        format!("{:<26}{:>9}{:>8}{:>11}{:>11}", "", "KiB", "KB", "Mbit/s", "%"),
    ]
}

fn on_off(on: bool) -> &'static str {
    if on { "on" } else { "off" }
}

fn or_dash(v: Option<u32>) -> String {
    v.map_or_else(|| "-".to_string(), |v| v.to_string())
}

/// One row of the table.
pub fn table_row(r: &CellResult) -> String {
    let data = match (&r.stream.error, r.stop) {
        (Some(e), _) => format!("FAILED: {e}"),
        (None, _) if r.stream.bytes_in_window.is_none() => format!("NOT MEASURED (run stopped: {:?})", r.stop),
        (None, _) => "intact".to_string(),
    };
    format!(
        "{:<26}{:>9}{:>8}{:>11.2}{:>11.1}{:>8}{:>8}{:>9}{:>10}  {}",
        r.cell.name,
        r.cell.buffer / 1024,
        r.cell.queue_bytes / 1000,
        r.goodput_mbps(),
        r.link_percent(),
        or_dash(r.retransmits()),
        or_dash(r.timeouts()),
        r.lost,
        r.queue_drops,
        data
    )
}

/// Finds the result of the cell named `name`.
pub fn find<'a>(results: &'a [CellResult], name: &str) -> Option<&'a CellResult> {
    results.iter().find(|r| r.cell.name == name)
}

/// How one reordering cell compares with its baseline.
#[derive(Clone, Debug)]
pub struct Reordering {
    /// The reordering cell's round-trip time.
    pub rtt: Duration,
    /// Goodput with reordering, Mbit/s.
    pub with_mbps: f64,
    /// Goodput of the same path without, Mbit/s.
    pub without_mbps: f64,
    /// The first as a percentage of the second (target ≥ 50).
    pub percent: f64,
    /// Retransmission timeouts with reordering (target 0).
    pub timeouts: Option<u32>,
}

impl Reordering {
    /// The targets hold: no RTO, at least half the goodput.
    pub fn met(&self) -> bool {
        self.timeouts == Some(0) && self.percent >= 50.0
    }

    /// A line for reports.
    pub fn describe(&self) -> String {
        format!(
            "reordering at {} ms: {:.2} Mbit/s with, {:.2} Mbit/s without ({:.1} %), {} RTOs",
            self.rtt.total_millis(),
            self.with_mbps,
            self.without_mbps,
            self.percent,
            or_dash(self.timeouts)
        )
    }
}

/// Compares a reordering cell with its baseline.
pub fn compare_reordering(reordered: &CellResult, baseline: &CellResult) -> Reordering {
    Reordering {
        rtt: reordered.cell.rtt,
        with_mbps: reordered.goodput_mbps(),
        without_mbps: baseline.goodput_mbps(),
        percent: reordering_ratio_percent(reordered, baseline),
        timeouts: reordered.timeouts(),
    }
}

/// The acceptance figures the table carries.
#[derive(Clone, Debug)]
pub struct Acceptance {
    /// Goodput of the 1 Gbit/s × 100 ms cell as a percentage of the link
    /// (target ≥ 90).
    pub long_fat_pipe_percent: f64,
    /// Each reordering cell against its baseline.
    pub reordering: Vec<Reordering>,
}

impl Acceptance {
    /// The targets hold.
    pub fn met(&self) -> bool {
        self.long_fat_pipe_percent >= 90.0 && self.reordering.iter().all(Reordering::met)
    }
}

/// Reads the acceptance figures from a full table's results.
pub fn acceptance(results: &[CellResult]) -> Option<Acceptance> {
    let lfp = find(results, &long_fat_pipe().name)?;
    let reordering = reordering_pairs()
        .iter()
        .map(|(reordered, baseline)| {
            Some(compare_reordering(find(results, &reordered.name)?, find(results, &baseline.name)?))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Acceptance { long_fat_pipe_percent: lfp.link_percent(), reordering })
}

/// Goodput with reordering as a percentage of goodput without.
pub fn reordering_ratio_percent(reordered: &CellResult, baseline: &CellResult) -> f64 {
    if baseline.goodput_mbps() == 0.0 {
        return 0.0;
    }
    reordered.goodput_mbps() / baseline.goodput_mbps() * 100.0
}

/// The whole table from results of [`cells`], heading and verdict included:
/// exactly what the snapshot holds.
pub fn table(seed: u64, results: &[CellResult]) -> Report {
    let mut lines = table_heading(seed);
    lines.extend(results.iter().map(table_row));
    let intact = results.iter().filter(|r| r.intact()).count();
    let mut verdict = format!("regression: {} cells, {intact} intact", results.len());
    if let Some(a) = acceptance(results) {
        let _ = write!(verdict, "; 1 Gbit/s x 100 ms reaches {:.1} % of the link (target 90)", a.long_fat_pipe_percent);
        for r in &a.reordering {
            let _ = write!(
                verdict,
                "; reordering at {} ms keeps {:.1} % of the goodput (target 50) with {} RTOs (target 0)",
                r.rtt.total_millis(),
                r.percent,
                or_dash(r.timeouts)
            );
        }
    }
    lines.push(verdict);
    Report { lines, ok: intact == results.len() }
}

/// The `regression` scenario: runs every cell and prints the table.
pub fn regression_report(seed: u64) -> Report {
    let results = run_cells(seed, &cells(), default_threads());
    table(seed, &results)
}

/// The Mathis et al. bound for Reno, MSS / RTT × 1.22 / √p, in Mbit/s, and
/// whether it was capped at the link rate.
pub fn mathis_bound_mbps(bandwidth_mbps: u64, rtt: Duration, loss: f64) -> (f64, bool) {
    let bound = MSS as f64 * 8.0 / rtt.as_secs_f64() * 1.22 / loss.sqrt() / 1e6;
    if bound >= bandwidth_mbps as f64 { (bandwidth_mbps as f64, true) } else { (bound, false) }
}

/// Runs per lossy cell in the `lossy` comparison: seeds `seed` to
/// `seed + LOSSY_SEEDS - 1`. One 30 s run at 200 ms and 0.1 % loss sees
/// about ten losses, too few for a steady state: across seeds such a cell
/// ranges from 1.2 to 2.4 times the bound, and the mean over the grid by
/// ±8 points. The mean of five runs per cell is steadier.
pub const LOSSY_SEEDS: u64 = 5;

/// The lossy cells of the grid: every RTT with loss > 0.
pub fn lossy_cells() -> Vec<Cell> {
    grid().into_iter().filter(|c| c.loss > 0.0).collect()
}

/// The runs of the `lossy` comparison for `seed`: each lossy cell with
/// [`LOSSY_SEEDS`] seeds.
pub fn lossy_jobs(seed: u64) -> Vec<(u64, Cell)> {
    lossy_cells().into_iter().flat_map(|c| (seed..seed + LOSSY_SEEDS).map(move |s| (s, c.clone()))).collect()
}

/// The `lossy` report from runs of the lossy cells (any seeds; each cell's
/// runs are averaged).
pub fn lossy_table(seed: u64, results: &[CellResult]) -> Report {
    let tcp = TcpConfig::default();
    let mut lines = vec![
        format!(
            "scenario lossy, seeds {seed}..{}: one download per run over a 100 Mbit/s bottleneck, random loss on \
             the data direction, goodput over {} s after the handshake, the mean of {LOSSY_SEEDS} runs per cell; \
             congestion control {:?}, SACK {}",
            seed + LOSSY_SEEDS - 1,
            WINDOW.total_millis() / 1000,
            tcp.congestion,
            on_off(tcp.sack)
        ),
        format!(
            "Mathis bound for Reno: MSS / RTT x 1.22 / sqrt(p), MSS {MSS} B, RTT the path's base RTT, capped at the \
             link rate (100 Mbit/s; a capped bound is marked *)"
        ),
        format!(
            "{:<8}{:>8}{:>17}{:>17}{:>16}{:>16}{:>8}{:>8}  {}",
            "RTT", "loss", "fairway Mbit/s", "(min..max)", "Mathis Mbit/s", "fairway/bound", "retx", "RTOs", "data"
        ),
    ];
    let mut ratios = Vec::new();
    for cell in lossy_cells() {
        let runs: Vec<&CellResult> = results.iter().filter(|r| r.cell == cell).collect();
        if runs.is_empty() {
            continue;
        }
        let goodputs: Vec<f64> = runs.iter().map(|r| r.goodput_mbps()).collect();
        let mean = goodputs.iter().sum::<f64>() / goodputs.len() as f64;
        let min = goodputs.iter().copied().fold(f64::INFINITY, f64::min);
        let max = goodputs.iter().copied().fold(0.0, f64::max);
        let (bound, capped) = mathis_bound_mbps(cell.bandwidth_mbps, cell.rtt, cell.loss);
        let ratio = mean / bound * 100.0;
        ratios.push(ratio);
        let total = |f: fn(&CellResult) -> Option<u32>| {
            runs.iter().map(|r| f(r)).sum::<Option<u32>>().map_or_else(|| "-".to_string(), |n| n.to_string())
        };
        lines.push(format!(
            "{:<8}{:>8}{:>17.2}{:>17}{:>15.2}{}{:>15.1}%{:>8}{:>8}  {}",
            format!("{} ms", cell.rtt.total_millis()),
            format!("{} %", percent(cell.loss)),
            mean,
            format!("({min:.2}..{max:.2})"),
            bound,
            if capped { "*" } else { " " },
            ratio,
            total(CellResult::retransmits),
            total(CellResult::timeouts),
            if runs.iter().all(|r| r.intact()) { "intact" } else { "FAILED" },
        ));
    }
    let mean = if ratios.is_empty() { 0.0 } else { ratios.iter().sum::<f64>() / ratios.len() as f64 };
    let intact = results.iter().all(CellResult::intact);
    if !intact {
        lines.push("some streams failed: see the data column".to_string());
    }
    lines.push("(retx and RTOs: totals over the runs of a cell)".to_string());
    lines.push(format!("lossy: fairway reaches {mean:.1} % of the Mathis bound on average over the lossy cells"));
    Report { lines, ok: intact && mean >= 100.0 }
}

/// The `lossy` scenario.
pub fn lossy_report(seed: u64) -> Report {
    let results = run_jobs(&lossy_jobs(seed), default_threads());
    lossy_table(seed, &results)
}

/// The mean ratio, in percent, that a `lossy` verdict line reports.
pub fn parse_lossy_verdict(line: &str) -> Option<f64> {
    line.strip_prefix("lossy: fairway reaches ")?.split(' ').next()?.parse().ok()
}

/// A line-by-line comparison of a snapshot with a fresh table: `None` when
/// they agree, else a readable list of the lines that differ.
pub fn diff_lines(expected: &str, actual: &str) -> Option<String> {
    let expected: Vec<&str> = expected.lines().collect();
    let actual: Vec<&str> = actual.lines().collect();
    let mut out = String::new();
    for i in 0..expected.len().max(actual.len()) {
        let (e, a) = (expected.get(i), actual.get(i));
        if e == a {
            continue;
        }
        let _ = writeln!(out, "line {}:", i + 1);
        match e {
            Some(e) => {
                let _ = writeln!(out, "  - {e}");
            }
            None => out.push_str("  - (no line)\n"),
        }
        match a {
            Some(a) => {
                let _ = writeln!(out, "  + {a}");
            }
            None => out.push_str("  + (no line)\n"),
        }
    }
    (!out.is_empty()).then_some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_grid_has_twelve_cells_with_unique_names() {
        let cells = cells();
        assert_eq!(grid().len(), 12);
        assert_eq!(cells.len(), 15);
        assert_eq!(lossy_cells().len(), 9);
        let mut names: Vec<_> = cells.iter().map(|c| c.name.as_str()).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), cells.len());
        assert_eq!(cells[1].name, "100M/10ms/0.1%");
        assert_eq!(long_fat_pipe().name, "1G/100ms/0%");
        let pairs = reordering_pairs();
        assert_eq!(pairs[1].0.name, "100M/50ms/0%/reorder25%");
        assert_eq!(pairs[1].1.name, "100M/50ms/0%");
        assert!(pairs.iter().all(|(_, baseline)| grid().contains(baseline)));
    }

    #[test]
    fn buffers_and_queues_follow_the_bdp() {
        let c = Cell::new(100, 50, 0.0);
        assert_eq!(c.bdp(), 625_000);
        assert_eq!(c.queue_bytes, 625_000);
        assert_eq!(c.buffer, 4 << 20);
        assert_eq!(Cell::new(100, 10, 0.0).buffer, 512 << 10);
        assert_eq!(long_fat_pipe().buffer, 16 << 20);
        assert_eq!(long_fat_pipe().queue_bytes, 12_500_000);
    }

    #[test]
    fn the_mathis_bound() {
        // 1460 B / 10 ms × 1.22 / √0.01 = 14.25 Mbit/s.
        let (b, capped) = mathis_bound_mbps(100, Duration::from_millis(10), 0.01);
        assert!((b - 14.2496).abs() < 1e-3 && !capped, "{b}");
        let (b, capped) = mathis_bound_mbps(100, Duration::from_millis(1), 0.0001);
        assert!(b == 100.0 && capped);
    }

    #[test]
    fn percentages_print_without_trailing_zeros() {
        assert_eq!(percent(0.0), "0");
        assert_eq!(percent(0.001), "0.1");
        assert_eq!(percent(0.05), "5");
        assert_eq!(percent(0.25), "25");
    }

    #[test]
    fn diffs_name_the_lines_that_differ() {
        assert_eq!(diff_lines("a\nb\n", "a\nb"), None);
        let d = diff_lines("a\nb\nc", "a\nB").expect("a difference");
        assert_eq!(d, "line 2:\n  - b\n  + B\nline 3:\n  - c\n  + (no line)\n");
    }

    #[test]
    fn the_lossy_verdict_parses() {
        let line = "lossy: fairway reaches 87.5 % of the Mathis bound on average over the lossy cells";
        assert_eq!(parse_lossy_verdict(line), Some(87.5));
    }
}
