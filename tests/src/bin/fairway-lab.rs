//! `fairway-lab`: the experiments behind the benchmark tables. For now one:
//! `fairness`, the RTT-fairness grid on the simulated network. `cargo xtask
//! lab` calls this.

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
        /// Where the Markdown goes.
        #[arg(long, default_value = "benches/results/fairness-sim.md")]
        out: PathBuf,
    },
}

fn main() -> ExitCode {
    match Cli::parse().experiment {
        Experiment::Fairness { seed, n, bandwidth, threads, out } => {
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
            print!("{text}");
            if let Some(dir) = out.parent().filter(|d| !d.as_os_str().is_empty())
                && let Err(e) = std::fs::create_dir_all(dir)
            {
                eprintln!("fairway-lab: creating {}: {e}", dir.display());
                return ExitCode::FAILURE;
            }
            if let Err(e) = std::fs::write(&out, &text) {
                eprintln!("fairway-lab: writing {}: {e}", out.display());
                return ExitCode::FAILURE;
            }
            eprintln!("fairway-lab: wrote {}", out.display());
            ExitCode::SUCCESS
        }
    }
}
