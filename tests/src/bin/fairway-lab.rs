//! `fairway-lab`: the experiments behind the benchmark tables: `fairness`,
//! the RTT-fairness grid on the simulated network, or with `--testbed` on
//! the real testbed; and `delay`, how added delay slows downloads of each
//! size, on the testbed. The testbed needs root and a build with the
//! `afxdp` feature (`cargo run --release -p fairway-tests --features afxdp
//! --bin fairway-lab -- delay`). `cargo xtask lab` calls this.
//!
//! The simulated grid also draws PNG charts next to its Markdown (J against
//! N; goodput over time in a few cells), unless `--no-plots`.

use std::path::{Path, PathBuf};
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use fairway_stack::Algorithm;
use fairway_tests::delay_lab::{self, DelayPlan};
use fairway_tests::fairness::{self, Cell, POLICIES, Params};
use fairway_tests::fairness_testbed::{self, Transfer};
use fairway_tests::plot;
use std::time::Duration;

/// Run one of Fairway's lab experiments and write its tables.
#[derive(Parser, Debug)]
#[command(name = "fairway-lab", version)]
struct Cli {
    #[command(subcommand)]
    experiment: Experiment,
}

#[derive(Subcommand, Debug)]
enum Experiment {
    /// N = 1…10 clients with RTTs from 4 to 256 ms behind one bottleneck,
    /// uploads and downloads, CUBIC and Reno senders, policies off / seed /
    /// equal-rate, on the simulated network (virtual time).
    Fairness {
        /// Seed of the network's random streams.
        #[arg(long, default_value_t = 1)]
        seed: u64,
        /// Only these client counts (comma-separated), e.g. 2,10.
        #[arg(long, value_delimiter = ',')]
        n: Vec<usize>,
        /// Only this bottleneck bandwidth, Mbit/s (20 or 100).
        #[arg(long)]
        bandwidth: Option<u64>,
        /// Worker threads (default: the machine's parallelism).
        #[arg(long)]
        threads: Option<usize>,
        /// Run on the real testbed instead (root; `afxdp` feature): the
        /// kernel's TCP in client namespaces (RTTs 4 to 256 ms) uploading
        /// with CUBIC and with BBR, and downloading, through one emulated
        /// 20 Mbit/s bottleneck (or --bandwidth), against nginx and Fairway
        /// (N = 1, 2, 4, 10 unless --n says otherwise).
        #[arg(long)]
        testbed: bool,
        /// With --testbed: the bottleneck's drop-tail queue, milliseconds
        /// at its rate.
        #[arg(long, default_value_t = 100)]
        queue_ms: u64,
        /// With --testbed: the servers, each `nginx`, `afxdp:POLICY` or
        /// `kernel:POLICY` [default: nginx,afxdp:off,afxdp:equal-rate,kernel:equal-rate].
        #[arg(long, value_delimiter = ',', value_parser = parse_server)]
        servers: Vec<fairness_testbed::LabServer>,
        /// With --testbed: only uploads (`up`) or only downloads (`down`).
        #[arg(long, value_parser = ["up", "down"])]
        way: Option<String>,
        /// With --testbed: how long each run lasts, seconds.
        #[arg(long, default_value_t = 20)]
        seconds: u64,
        /// With --testbed: the start of each run left out, seconds.
        #[arg(long, default_value_t = 7)]
        warmup: u64,
        /// With --testbed: when the longest-RTT client joins, seconds
        /// (its convergence time is measured from then).
        #[arg(long, default_value_t = 2)]
        join: u64,
        /// With --testbed: the Fairway servers' --initial-window.
        #[arg(long)]
        initial_window: Option<u32>,
        /// With --testbed: the Fairway servers' --fast-start.
        #[arg(long, value_parser = parse_fast_start)]
        fast_start: Option<&'static str>,
        /// Where the Markdown goes [default: benches/results/fairness-sim.md,
        /// or fairness-testbed.md with --testbed]. The simulated grid's PNG
        /// charts go beside it, named after it: fairness-sim-jain.png and
        /// fairness-sim-goodput-CELL.png.
        #[arg(long)]
        out: Option<PathBuf>,
        /// Draw no PNG charts (they need the font of the Debian package
        /// fonts-dejavu-core).
        #[arg(long)]
        no_plots: bool,
    },
    /// How added network delay slows HTTP downloads of each size, as one of
    /// Fairway's studies measured it (root; `afxdp` feature): kernel curl
    /// through a 100 Mbit/s emulated link, the delay added to the round
    /// trip, from nginx, Fairway over AF_XDP and Fairway on kernel sockets.
    /// By default delays 0, 5, 20, 50, 100 and 200 ms, sizes 100 KB, 250 KB,
    /// 1 MB and 10 MB, 3 tries (well under 20 minutes); --full runs the
    /// study's whole grid (0 to 2,000 ms, 100 KB to 300 MB, 10 tries 10 s
    /// apart: many hours).
    Delay {
        /// The study's whole grid.
        #[arg(long)]
        full: bool,
        /// Only these added delays, milliseconds (comma-separated).
        #[arg(long, value_delimiter = ',')]
        delays: Vec<u64>,
        /// Only these sizes, bytes (comma-separated).
        #[arg(long, value_delimiter = ',')]
        sizes: Vec<u64>,
        /// Tries per cell (each a first download and a repeat).
        #[arg(long)]
        tries: Option<usize>,
        /// The servers, each `nginx`, `afxdp:POLICY` or `kernel:POLICY`
        /// [default: nginx,afxdp:off,kernel:off].
        #[arg(long, value_delimiter = ',', value_parser = parse_server)]
        servers: Vec<fairness_testbed::LabServer>,
        /// The longest one download may take, seconds, before it is marked
        /// unfinished [default: 60; 600 with --full].
        #[arg(long)]
        bound: Option<u64>,
        /// Run Fairway over AF_XDP once per --fast-start mode (off,
        /// path-memory, careful-resume; comma-separated), each a row of
        /// its own; with a mode other than off the server restarts before
        /// each try, so that first downloads meet an empty path cache
        /// [default: the server's default, one row].
        #[arg(long, value_delimiter = ',', value_parser = parse_fast_start)]
        fast_start: Vec<&'static str>,
        /// Run Fairway over AF_XDP once per --initial-window (segments,
        /// comma-separated), each a row of its own [default: the server's].
        #[arg(long, value_delimiter = ',')]
        initial_window: Vec<u32>,
        /// Run Fairway over AF_XDP once per --socket-buffer (MiB,
        /// comma-separated: each connection's send and receive buffer, which
        /// bounds a flow's rate to the buffer over its RTT), each a row of
        /// its own [default: the server's, 1 MiB].
        #[arg(long, value_delimiter = ',', value_parser = clap::value_parser!(u32).range(1..=1024))]
        socket_buffer: Vec<u32>,
        /// Where the Markdown goes [default: benches/results/delay-DATE.md];
        /// the charts go beside it (`STEM-by-delay.png`, `STEM-by-size.png`).
        #[arg(long)]
        out: Option<PathBuf>,
        /// Draw no PNG charts.
        #[arg(long)]
        no_plots: bool,
    },
}

fn main() -> ExitCode {
    match Cli::parse().experiment {
        Experiment::Delay {
            full,
            delays,
            sizes,
            tries,
            servers,
            bound,
            fast_start,
            initial_window,
            socket_buffer,
            out,
            no_plots,
        } => {
            let mut plan = if full { DelayPlan::full() } else { DelayPlan::default_subset() };
            if !delays.is_empty() {
                plan.delays = delays.into_iter().map(Duration::from_millis).collect();
            }
            if !sizes.is_empty() {
                plan.sizes = sizes;
            }
            if let Some(tries) = tries {
                plan.tries = tries.max(1);
            }
            if !servers.is_empty() {
                plan.servers = servers;
            }
            if let Some(bound) = bound {
                plan.bound = Duration::from_secs(bound.max(1));
            }
            plan.fast_start = fast_start;
            plan.initial_windows = initial_window;
            plan.socket_buffers = socket_buffer;
            let out = out.unwrap_or_else(|| PathBuf::from(format!("benches/results/delay-{}.md", today())));
            if !no_plots && let Err(why) = plot::check_font() {
                eprintln!("fairway-lab: {why} (or pass --no-plots)");
                return ExitCode::from(2);
            }
            match delay_lab_run(&plan, (!no_plots).then_some(out.as_path())) {
                Ok(text) => write_out(&out, &text),
                Err(why) => {
                    eprintln!("fairway-lab: {why}");
                    ExitCode::from(2)
                }
            }
        }
        Experiment::Fairness {
            testbed: true,
            n,
            bandwidth,
            queue_ms,
            servers,
            way,
            seconds,
            warmup,
            join,
            initial_window,
            fast_start,
            out,
            no_plots,
            ..
        } => {
            let out = out.unwrap_or_else(|| PathBuf::from("benches/results/fairness-testbed.md"));
            let plan = fairness_testbed::GridPlan {
                ns: if n.is_empty() { vec![1, 2, 4, 10] } else { n },
                transfers: match way.as_deref() {
                    Some("up") => vec![Transfer::Upload],
                    Some("down") => vec![Transfer::Download],
                    _ => vec![Transfer::Upload, Transfer::Download],
                },
                senders: fairness_testbed::GRID_SENDERS.to_vec(),
                servers: if servers.is_empty() { fairness_testbed::GRID_SERVERS.to_vec() } else { servers },
                bottleneck_bps: bandwidth.unwrap_or(20) * 1_000_000,
                queue: Duration::from_millis(queue_ms),
                duration: Duration::from_secs(seconds),
                warmup: Duration::from_secs(warmup),
                join_at: Duration::from_secs(join),
                server_flags: initial_window
                    .map(|iw| ["--initial-window".to_owned(), iw.to_string()])
                    .into_iter()
                    .flatten()
                    .chain(fast_start.map(|m| ["--fast-start".to_owned(), m.to_owned()]).into_iter().flatten())
                    .collect(),
            };
            if !no_plots && let Err(why) = plot::check_font() {
                eprintln!("fairway-lab: {why} (or pass --no-plots)");
                return ExitCode::from(2);
            }
            match testbed_grid(&plan, (!no_plots).then_some(out.as_path())) {
                Ok(text) => write_out(&out, &text),
                Err(why) => {
                    eprintln!("fairway-lab: {why}");
                    ExitCode::from(2)
                }
            }
        }
        Experiment::Fairness { seed, n, bandwidth, threads, out, no_plots, .. } => {
            let out = out.unwrap_or_else(|| PathBuf::from("benches/results/fairness-sim.md"));
            let cells: Vec<Cell> = fairness::grid()
                .into_iter()
                .filter(|c| n.is_empty() || n.contains(&c.n))
                .filter(|c| bandwidth.is_none_or(|b| c.bandwidth_mbps == b))
                .collect();
            if cells.is_empty() {
                eprintln!("fairway-lab: no cell matches");
                return ExitCode::from(2);
            }
            // Before two minutes of work, not after.
            if !no_plots && let Err(why) = plot::check_font() {
                eprintln!("fairway-lab: {why} (or pass --no-plots)");
                return ExitCode::from(2);
            }
            let threads = threads.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()));
            let params = Params::lab();
            eprintln!(
                "fairway-lab fairness: {} cells ({} policies × up/down × {:?}/{:?}) on {threads} threads",
                cells.len(),
                POLICIES.len(),
                Algorithm::Cubic,
                Algorithm::Reno
            );
            let started = std::time::Instant::now();
            let results = fairness::run_cells(seed, &cells, &params, threads);
            let charts = if no_plots {
                Ok(Vec::new())
            } else {
                beside(&out).and_then(|(dir, stem)| fairness::write_charts(dir, &stem, &params, &results))
            };
            let mut lines = fairness::report(seed, &params, &results, charts.as_deref().unwrap_or_default());
            let verdict = lines.pop().unwrap_or_default();
            lines.push(format!("(wall time {:.1} s)", started.elapsed().as_secs_f64()));
            lines.push(String::new());
            lines.push(verdict);
            let text = lines.join("\n") + "\n";
            let written = write_out(&out, &text);
            match charts {
                Ok(charts) => {
                    for chart in charts {
                        eprintln!("fairway-lab: wrote {}", out.with_file_name(&chart.file).display());
                    }
                    written
                }
                // The tables are written all the same: the run is not lost.
                Err(why) => {
                    eprintln!("fairway-lab: no charts: {why}");
                    ExitCode::FAILURE
                }
            }
        }
    }
}

/// `--servers`' parser.
fn parse_fast_start(text: &str) -> Result<&'static str, String> {
    delay_lab::FAST_START_MODES
        .into_iter()
        .find(|m| *m == text)
        .ok_or_else(|| format!("{text:?} is not one of {}", delay_lab::FAST_START_MODES.join(", ")))
}

fn parse_server(text: &str) -> Result<fairness_testbed::LabServer, String> {
    fairness_testbed::LabServer::parse(text)
        .ok_or_else(|| format!("{text:?} is not nginx, afxdp:POLICY or kernel:POLICY (POLICY: off, seed, equal-rate)"))
}

/// The testbed grid, one cell after another, as Markdown; with `charts_beside`
/// (the Markdown's path), its charts written next to it.
#[cfg(target_os = "linux")]
fn testbed_grid(plan: &fairness_testbed::GridPlan, charts_beside: Option<&Path>) -> Result<String, String> {
    if !cfg!(feature = "afxdp") && plan.servers.iter().any(|s| matches!(s, fairness_testbed::LabServer::Afxdp(_))) {
        return Err("Fairway over AF_XDP needs a build with the afxdp feature (--features afxdp)".to_owned());
    }
    fairway_tests::testbed::require_root().map_err(|e| e.to_string())?;
    if plan.join_at >= plan.warmup || plan.warmup >= plan.duration {
        return Err(format!(
            "need --join ({}) < --warmup ({}) < --seconds ({})",
            plan.join_at.as_secs(),
            plan.warmup.as_secs(),
            plan.duration.as_secs()
        ));
    }
    let cells = plan.cells();
    eprintln!("fairway-lab fairness --testbed: {} cells of {} s", cells.len(), plan.duration.as_secs());
    let started = std::time::Instant::now();
    let mut results = Vec::new();
    for (i, cell) in cells.into_iter().enumerate() {
        let prefix = format!("fl{}_{i}", std::process::id() % 100_000);
        let e = &cell.experiment;
        let what = format!("N={}", cell.columns().join(" "));
        let outcome = fairness_testbed::run_on_fresh_testbed(&prefix, e, cell.server);
        match &outcome {
            Ok(o) => {
                eprintln!("{what}:\n{}\nutilisation {:.1} %", o.describe(), o.utilisation(e.bottleneck_bps) * 100.0)
            }
            Err(why) => eprintln!("{what}: failed: {why}"),
        }
        results.push((cell, outcome));
    }
    let host_cc = std::fs::read_to_string("/proc/sys/net/ipv4/tcp_congestion_control").unwrap_or_default();
    let mut lines = vec![
        format!(
            "# RTT fairness on the testbed: kernel TCP clients, {} Mbit/s bottleneck",
            plan.bottleneck_bps / 1_000_000
        ),
        String::new(),
        format!(
            "Measured {} (`cargo xtask lab fairness --testbed`). Clients at RTTs spread from 4 to 256 ms \
             share one emulated bottleneck ({} Mbit/s, {} ms drop-tail queue) in front of the server. \
             Each run lasts {} s; the longest-RTT client joins {} s after the others; goodputs are \
             measured after the first {} s. Uploads: kernel senders with the named congestion control; \
             downloads: sent by the server (Fairway's CUBIC over AF_XDP, the kernel's default `{}` on \
             the kernel backend and nginx). Utilisation counts wire bytes; the ping queue is a ping \
             every 100 ms from the 4-ms client less its idle RTT; SRTT − min-RTT is the uploaders' own \
             view; join is how long the late client took to reach 90 % of an equal share, with \
             careful resume's jumps (j) and safe retreats (r) in the run when Fairway made any.",
            today(),
            plan.bottleneck_bps / 1_000_000,
            plan.queue.as_millis(),
            plan.duration.as_secs(),
            plan.join_at.as_secs(),
            plan.warmup.as_secs(),
            host_cc.trim()
        ),
        String::new(),
    ];
    lines.extend(fairness_testbed::report(&results));
    lines.push(format!("(wall time {:.1} s)", started.elapsed().as_secs_f64()));
    if let Some(out) = charts_beside {
        // The tables are kept whatever happens to the charts.
        match beside(out).and_then(|(dir, stem)| fairness_testbed::write_charts(dir, &stem, &results)) {
            Ok(charts) => {
                for chart in &charts {
                    eprintln!("fairway-lab: wrote {}", out.with_file_name(&chart.file).display());
                }
                lines.extend(fairness_testbed::chart_lines(&charts));
            }
            Err(why) => eprintln!("fairway-lab: no charts: {why}"),
        }
    }
    if let Some(verdict) = fairness_testbed::verdict(&results) {
        lines.push(String::new());
        lines.push(verdict);
    }
    Ok(lines.join("\n") + "\n")
}

/// The delay experiment as Markdown; with `charts_beside` (the Markdown's
/// path), its charts written next to it.
#[cfg(target_os = "linux")]
fn delay_lab_run(plan: &DelayPlan, charts_beside: Option<&Path>) -> Result<String, String> {
    if !cfg!(feature = "afxdp") && plan.servers.iter().any(|s| matches!(s, fairness_testbed::LabServer::Afxdp(_))) {
        return Err("Fairway over AF_XDP needs a build with the afxdp feature (--features afxdp)".to_owned());
    }
    let downloads = plan.delays.len() * plan.rows().len() * plan.sizes.len() * plan.tries * 2;
    eprintln!("fairway-lab delay: {downloads} downloads");
    let started = std::time::Instant::now();
    let prefix = format!("fd{}", std::process::id() % 100_000);
    let cells = delay_lab::run(plan, &prefix, &|what| eprintln!("fairway-lab delay: {what}"))?;
    let mut text = format!(
        "# Downloads under added delay: the study's experiment on the testbed\n\nMeasured {} (`cargo xtask lab \
         delay`).\n\n",
        today()
    );
    text.push_str(&delay_lab::report(plan, &cells));
    if let Some(out) = charts_beside {
        std::fs::create_dir_all(out.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new(".")))
            .map_err(|e| e.to_string())?;
        match delay_lab::write_charts(out, plan, &cells) {
            Ok(files) => {
                text.push_str("\nCharts (first downloads): ");
                text.push_str(&files.iter().map(|f| format!("`{f}`")).collect::<Vec<_>>().join(", "));
                text.push('\n');
            }
            Err(why) => eprintln!("fairway-lab: no charts: {why}"),
        }
    }
    text.push_str(&format!("\n(wall time {:.1} s)\n", started.elapsed().as_secs_f64()));
    text.push_str(&format!("\n{}\n", delay_lab::closing_line(plan, &cells)));
    Ok(text)
}

#[cfg(not(target_os = "linux"))]
fn delay_lab_run(_: &DelayPlan, _: Option<&Path>) -> Result<String, String> {
    Err("the delay lab needs Linux".to_owned())
}

#[cfg(not(target_os = "linux"))]
fn testbed_grid(_: &fairness_testbed::GridPlan, _: Option<&Path>) -> Result<String, String> {
    Err("--testbed needs Linux".to_owned())
}

/// Today's date (UTC), `YYYY-MM-DD`, as `date` tells it.
fn today() -> String {
    std::process::Command::new("date")
        .args(["-u", "+%F"])
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_default()
}

/// Where charts beside the Markdown file `out` go: its directory (made if
/// missing) and its file stem, which starts their names.
fn beside(out: &Path) -> Result<(&Path, std::borrow::Cow<'_, str>), String> {
    let dir = out.parent().filter(|d| !d.as_os_str().is_empty()).unwrap_or(Path::new("."));
    std::fs::create_dir_all(dir).map_err(|e| format!("creating {}: {e}", dir.display()))?;
    Ok((dir, out.file_stem().map_or("fairness".into(), |s| s.to_string_lossy())))
}

/// Prints `text` and writes it to `out`.
fn write_out(out: &std::path::Path, text: &str) -> ExitCode {
    {
        {
            print!("{text}");
            if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty())
                && let Err(e) = std::fs::create_dir_all(dir)
            {
                eprintln!("fairway-lab: creating {}: {e}", dir.display());
                return ExitCode::FAILURE;
            }
            if let Err(e) = std::fs::write(out, text) {
                eprintln!("fairway-lab: writing {}: {e}", out.display());
                return ExitCode::FAILURE;
            }
            eprintln!("fairway-lab: wrote {}", out.display());
            ExitCode::SUCCESS
        }
    }
}
