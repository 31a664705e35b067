//! `fairway`: the server binary. Reads the configuration (flags and an
//! optional TOML file), sets up logging and the SIGINT/SIGTERM stop flag,
//! and serves with the configured backend until stopped.
//!
//! Exit status: 0 after a graceful stop, 1 when the server cannot start or
//! fails while serving (one line on standard error says why), 2 for a bad
//! configuration.

use std::process::ExitCode;

use fairway::config::Config;

fn main() -> ExitCode {
    let config = Config::from_env().unwrap_or_else(|e| e.exit());
    fairway::run_binary(config)
}
