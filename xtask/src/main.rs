//! `cargo xtask`: Fairway's set-up and orchestration (run, test, sim, bench,
//! testbed, lab, fuzz, soak).
//!
//! std only but for signal-hook (so that `run` can clean up after Ctrl-C),
//! so that it builds in seconds. Layout: `cli` parses the command
//! line and holds the help texts, `cargo` runs cargo from the workspace root,
//! `system` ensures Debian packages, `commands` holds one module per
//! subcommand.

mod cargo;
mod cli;
mod commands;
mod error;
mod shell;
mod system;

use std::process::ExitCode;

use cargo::Cargo;
use cli::Command;
use commands::{bench, fuzz, lab, run, sim, soak, test, testbed};

fn main() -> ExitCode {
    let result = cli::parse(std::env::args_os().skip(1)).and_then(|command| dispatch(&command));
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(failure) => {
            if !matches!(failure, error::Failure::Reported { .. }) {
                eprintln!("error: {failure}");
            }
            ExitCode::from(failure.exit_code())
        }
    }
}

fn dispatch(command: &Command) -> Result<(), error::Failure> {
    let cargo = Cargo::from_env();
    match command {
        Command::Help(topic) => {
            print!("{}", cli::help(*topic));
            Ok(())
        }
        Command::Test(args) => test::run(&cargo, args),
        Command::Sim(args) => sim::run(&cargo, args),
        Command::Bench(args) => bench::run(&cargo, args),
        Command::Run(args) => run::run(&cargo, args),
        Command::Testbed(args) => testbed::run(&cargo, args),
        Command::Lab(args) => lab::run(&cargo, args),
        Command::Fuzz(args) => fuzz::run(&cargo, args),
        Command::Soak(args) => soak::run(&cargo, args),
    }
}
