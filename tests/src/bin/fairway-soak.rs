//! `fairway-soak`: the soak under faults (`cargo xtask soak` runs it; root,
//! and a build with the `afxdp` feature). See `fairway_tests::soak`.
//!
//! `fairway-soak [--minutes N] [--seed N] [--prefix P]` runs it and ends
//! with one line, `soak: N requests, W wrong, E errors (F explained by
//! faults), RSS baseline B MiB → end A MiB`, after the criteria that
//! failed; exit status 0 when every one held, 1 when one did not, 2 when
//! the soak could not run.
//!
//! `fairway-soak serve FLAGS...` is the server it soaks: what the
//! `fairway` binary does with the same flags (`fairway::run_binary`), in a
//! process of its own so that its memory is its own.

use std::process::ExitCode;

use clap::{Parser, Subcommand};

/// The soak under faults.
#[derive(Parser, Debug)]
#[command(name = "fairway-soak", version)]
struct Cli {
    /// How long the load lasts, minutes (the warm-up's round of faults
    /// included; the server's drain after it comes on top).
    #[arg(long, default_value_t = 30.0)]
    minutes: f64,
    /// Seeds the faults' durations and the load's choices.
    #[arg(long, default_value_t = 1)]
    seed: u64,
    /// The testbed's prefix.
    #[arg(long, default_value = "fsoak")]
    prefix: String,
    #[command(subcommand)]
    serve: Option<Serve>,
}

#[derive(Subcommand, Debug)]
enum Serve {
    /// Serve as `fairway FLAGS...` does (the soak starts it so).
    Serve {
        /// The `fairway` binary's flags.
        #[arg(trailing_var_arg = true, allow_hyphen_values = true)]
        flags: Vec<String>,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if let Some(Serve::Serve { flags }) = cli.serve {
        return serve(&flags);
    }
    #[cfg(target_os = "linux")]
    {
        soak(&cli)
    }
    #[cfg(not(target_os = "linux"))]
    {
        eprintln!("fairway-soak: the testbed is Linux only");
        ExitCode::from(2)
    }
}

#[cfg(target_os = "linux")]
fn soak(cli: &Cli) -> ExitCode {
    use fairway_tests::soak::{self, SoakConfig};
    use std::time::Duration;

    if !(cli.minutes.is_finite() && cli.minutes > 0.0) {
        eprintln!("fairway-soak: --minutes must be more than 0");
        return ExitCode::from(2);
    }
    match fairway::runtime::signals::stop_on_signals() {
        Ok(flag) => soak::stop_on(flag),
        Err(e) => {
            eprintln!("fairway-soak: cannot handle SIGINT/SIGTERM: {e}");
            return ExitCode::from(2);
        }
    }
    let exe = match std::env::current_exe() {
        Ok(exe) => exe,
        Err(e) => {
            eprintln!("fairway-soak: where am I? {e}");
            return ExitCode::from(2);
        }
    };
    let config = SoakConfig {
        length: Duration::from_secs_f64(cli.minutes * 60.0),
        seed: cli.seed,
        prefix: cli.prefix.clone(),
        server: vec![exe.into_os_string(), "serve".into()],
        linkem: None,
    };
    match soak::run(&config) {
        Ok(report) => {
            for line in &report.lines {
                println!("{line}");
            }
            for failure in &report.failures {
                println!("FAIL: {failure}");
            }
            println!("{}", report.last_line());
            if report.passed() { ExitCode::SUCCESS } else { ExitCode::FAILURE }
        }
        Err(e) => {
            eprintln!("fairway-soak: {e}");
            ExitCode::from(2)
        }
    }
}

/// The `fairway` binary's `main`, with `flags`.
fn serve(flags: &[String]) -> ExitCode {
    let args = std::iter::once("fairway").chain(flags.iter().map(String::as_str));
    let config = fairway::config::Config::load(args, None).unwrap_or_else(|e| e.exit());
    fairway::run_binary(config)
}
