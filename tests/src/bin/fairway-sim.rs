//! `fairway-sim`: runs a named scenario on the simulated network and prints
//! its table. `cargo xtask sim` calls this.

use std::process::ExitCode;

use clap::Parser;
use fairway_tests::scenario;
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

// Counts every allocation, so the c100k scenario can attribute heap bytes
// to the server shard.
#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// Run a scenario on Fairway's deterministic simulated network.
///
/// Every run is a pure function of the scenario and the seed: the same
/// arguments print the same table. The last line is the verdict; the exit
/// status is non-zero when the scenario's own checks fail.
#[derive(Parser, Debug)]
#[command(name = "fairway-sim", version)]
struct Cli {
    /// Scenario to run (see --list).
    #[arg(long, default_value = "default")]
    scenario: String,
    /// Seed of the network's random streams (loss, reordering, ...).
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// List the scenarios and exit.
    #[arg(long)]
    list: bool,
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if cli.list {
        let width = scenario::SCENARIOS.iter().map(|(name, _)| name.len()).max().unwrap_or(0);
        for (name, what) in scenario::SCENARIOS {
            println!("{name:<width$}  {what}");
        }
        return ExitCode::SUCCESS;
    }
    let started = std::time::Instant::now();
    match scenario::run(&cli.scenario, cli.seed) {
        Ok(report) => {
            for line in &report.lines[..report.lines.len().saturating_sub(1)] {
                println!("{line}");
            }
            println!("(wall time {:.1} s)", started.elapsed().as_secs_f64());
            println!("{}", report.last_line());
            if report.ok { ExitCode::SUCCESS } else { ExitCode::FAILURE }
        }
        Err(e) => {
            eprintln!("fairway-sim: {e}");
            ExitCode::from(2)
        }
    }
}
