//! `fairway-lab`: the experiments behind the benchmark tables. For now one:
//! `fairness`, the RTT-fairness grid on the simulated network, or with
//! `--testbed` on the real testbed (root, and a build with the `afxdp`
//! feature: `cargo run --release -p fairway-tests --features afxdp --bin
//! fairway-lab -- fairness --testbed`). `cargo xtask lab` calls this.

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Parser, Subcommand};
use fairway_stack::config::Algorithm;
use fairway_tests::fairness::{self, Cell, POLICIES, Params};

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
        /// Run on the real testbed instead: kernel CUBIC and BBR uploaders
        /// (N = 2 and 4 unless --n says otherwise; RTTs 4 to 256 ms) through
        /// one emulated 20 Mbit/s bottleneck (or --bandwidth) to Fairway
        /// over AF_XDP, policies off and equal-rate. Root; `afxdp` feature.
        #[arg(long)]
        testbed: bool,
        /// With --testbed: how long each upload runs, seconds.
        #[arg(long, default_value_t = 20)]
        seconds: u64,
        /// With --testbed: the start of each upload left out, seconds.
        #[arg(long, default_value_t = 6)]
        warmup: u64,
        /// Where the Markdown goes [default: benches/results/fairness-sim.md,
        /// or fairness-testbed.md with --testbed].
        #[arg(long)]
        out: Option<PathBuf>,
    },
}

fn main() -> ExitCode {
    match Cli::parse().experiment {
        Experiment::Fairness { testbed: true, n, bandwidth, seconds, warmup, out, .. } => {
            let out = out.unwrap_or_else(|| PathBuf::from("benches/results/fairness-testbed.md"));
            let n = if n.is_empty() { vec![2, 4] } else { n };
            let bps = bandwidth.unwrap_or(20) * 1_000_000;
            match testbed_grid(&n, bps, seconds, warmup) {
                Ok(text) => write_out(&out, &text),
                Err(why) => {
                    eprintln!("fairway-lab: {why}");
                    ExitCode::from(2)
                }
            }
        }
        Experiment::Fairness { seed, n, bandwidth, threads, out, .. } => {
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
            let mut lines = fairness::report(seed, &params, &results);
            let verdict = lines.pop().unwrap_or_default();
            lines.push(format!("(wall time {:.1} s)", started.elapsed().as_secs_f64()));
            lines.push(String::new());
            lines.push(verdict);
            let text = lines.join("\n") + "\n";
            write_out(&out, &text)
        }
    }
}

/// The testbed grid, one cell after another, as Markdown.
#[cfg(target_os = "linux")]
fn testbed_grid(n: &[usize], bps: u64, seconds: u64, warmup: u64) -> Result<String, String> {
    use fairway_tests::fairness_testbed;
    use std::time::Duration;
    if !cfg!(feature = "afxdp") {
        return Err("--testbed needs a build with the afxdp feature (--features afxdp)".to_owned());
    }
    fairway_tests::testbed::require_root().map_err(|e| e.to_string())?;
    if warmup >= seconds {
        return Err(format!("--warmup {warmup} leaves nothing of --seconds {seconds}"));
    }
    let cells = fairness_testbed::grid(n, bps, Duration::from_secs(seconds), Duration::from_secs(warmup));
    eprintln!("fairway-lab fairness --testbed: {} cells of {seconds} s", cells.len());
    let started = std::time::Instant::now();
    let mut results = Vec::new();
    for (i, cell) in cells.into_iter().enumerate() {
        let prefix = format!("fl{}_{i}", std::process::id() % 100_000);
        let outcome = fairness_testbed::run_on_fresh_testbed(&prefix, &cell.experiment, cell.policy);
        match &outcome {
            Ok(o) => eprintln!(
                "{} {} N={}: {}",
                cell.policy,
                cell.experiment.congestion_control,
                o.flows.len(),
                o.describe()
            ),
            Err(e) => eprintln!("{} {}: failed: {e}", cell.policy, cell.experiment.congestion_control),
        }
        results.push((cell, outcome));
    }
    let mut lines = vec![
        format!(
            "# RTT fairness on the testbed: kernel uploaders to Fairway over AF_XDP, {} Mbit/s bottleneck",
            bps / 1_000_000
        ),
        String::new(),
        format!("Each upload {seconds} s, goodput from bytes acknowledged after the first {warmup} s."),
        String::new(),
    ];
    lines.extend(fairness_testbed::report(&results));
    lines.push(format!("(wall time {:.1} s)", started.elapsed().as_secs_f64()));
    Ok(lines.join("\n") + "\n")
}

#[cfg(not(target_os = "linux"))]
fn testbed_grid(_: &[usize], _: u64, _: u64, _: u64) -> Result<String, String> {
    Err("--testbed needs Linux".to_owned())
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
