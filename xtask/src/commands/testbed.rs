//! `cargo xtask testbed up|down|status`: the developer's long-lived
//! namespace testbed. The work is done by the `fairway-testbed` binary of
//! the fairway-tests crate (the same code the integration tests use); this
//! command installs what it needs, builds `fairway-linkem` when a link is
//! emulated, and runs it.

use std::ffi::{OsStr, OsString};
use std::path::PathBuf;

use crate::cargo::{Cargo, Invocation};
use crate::cli::{TestbedAction, TestbedArgs};
use crate::error::Failure;
use crate::system;

/// The variable through which fairway-testbed learns where the emulator is.
pub const LINKEM_ENV: &str = "FAIRWAY_LINKEM";

/// fairway-testbed options that put a client, or the server, behind the link emulator.
const LINK_OPTIONS: &[&str] =
    &["--delay", "--rate", "--queue", "--loss", "--reorder", "--reorder-delay", "--seed", "--link", "--server-link"];

/// Debian packages the testbed drives (ip, ethtool, sysctl, tcpdump, ...).
pub fn packages() -> &'static [&'static str] {
    system::TESTBED_PACKAGES
}

pub fn run(cargo: &Cargo, args: &TestbedArgs) -> Result<(), Failure> {
    let asks_help = args.args.iter().any(|a| a == "-h" || a == "--help");
    if !asks_help && !system::is_root() {
        return Err(Failure::failed(format!(
            "cargo xtask testbed needs root (CAP_NET_ADMIN): run it as root, e.g. sudo -E cargo xtask testbed {}",
            args.action.name()
        )));
    }
    if !asks_help {
        system::ensure_debian_packages(packages())?;
    }
    let mut testbed = fairway_testbed(cargo, args);
    if !asks_help && needs_linkem_build(args, std::env::var_os(LINKEM_ENV).as_deref()) {
        let build = build_linkem(cargo);
        eprintln!("xtask testbed: $ {}", build.display());
        build.run()?;
        let linkem = linkem_path(cargo);
        testbed = testbed.env(LINKEM_ENV, &linkem.to_string_lossy());
        eprintln!("xtask testbed: {LINKEM_ENV}={}", linkem.display());
    }
    eprintln!("xtask testbed: $ {}", testbed.display());
    testbed.run()
}

/// `cargo run --release -p fairway-tests --bin fairway-testbed -- ACTION <args>`
pub fn fairway_testbed(cargo: &Cargo, args: &TestbedArgs) -> Invocation {
    let mut line = vec![args.action.name().into()];
    line.extend_from_slice(&args.args);
    cargo.run_release_bin("fairway-tests", None, "fairway-testbed", &line)
}

/// `cargo build --release -p fairway-nic --bin fairway-linkem`
pub fn build_linkem(cargo: &Cargo) -> Invocation {
    cargo.command(["build", "--release", "-p", "fairway-nic", "--bin", "fairway-linkem"])
}

/// Where [`build_linkem`] puts the binary.
pub fn linkem_path(cargo: &Cargo) -> PathBuf {
    cargo.target_dir().join("release").join("fairway-linkem")
}

/// Whether `up` will emulate a link and nobody said which emulator to use
/// (`$FAIRWAY_LINKEM` or `--linkem`): then xtask builds it.
fn needs_linkem_build(args: &TestbedArgs, env: Option<&OsStr>) -> bool {
    if args.action != TestbedAction::Up || env.is_some_and(|v| !v.is_empty()) {
        return false;
    }
    let option = |arg: &OsString| arg.to_str().map(|a| a.split_once('=').map_or(a, |(name, _)| name).to_owned());
    let options: Vec<String> = args.args.iter().filter_map(option).collect();
    !options.iter().any(|o| o == "--linkem") && options.iter().any(|o| LINK_OPTIONS.contains(&o.as_str()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(args: &[&str]) -> TestbedArgs {
        TestbedArgs { action: TestbedAction::Up, args: args.iter().map(OsString::from).collect() }
    }

    #[test]
    fn command_lines() {
        let cargo = Cargo::new("cargo", "/ws");
        assert_eq!(
            fairway_testbed(&cargo, &up(&["--clients", "3"])).display(),
            "cargo run --release -p fairway-tests --bin fairway-testbed -- up --clients 3"
        );
        let down = TestbedArgs { action: TestbedAction::Down, args: vec![] };
        assert_eq!(
            fairway_testbed(&cargo, &down).display(),
            "cargo run --release -p fairway-tests --bin fairway-testbed -- down"
        );
        assert_eq!(build_linkem(&cargo).display(), "cargo build --release -p fairway-nic --bin fairway-linkem");
    }

    #[test]
    fn the_emulator_is_built_only_when_a_link_is_emulated() {
        assert!(!needs_linkem_build(&up(&[]), None));
        assert!(!needs_linkem_build(&up(&["--clients", "3", "--queues", "2"]), None));
        assert!(needs_linkem_build(&up(&["--delay", "5ms"]), None));
        assert!(needs_linkem_build(&up(&["--link=1:loss=1%"]), None));
        assert!(needs_linkem_build(&up(&["--server-link", "rate=20mbit"]), None));
        assert!(needs_linkem_build(&up(&["--delay", "5ms"]), Some(OsStr::new(""))));
        assert!(!needs_linkem_build(&up(&["--delay", "5ms"]), Some(OsStr::new("/x/fairway-linkem"))));
        assert!(!needs_linkem_build(&up(&["--delay", "5ms", "--linkem", "/x"]), None));
        let status = TestbedArgs { action: TestbedAction::Status, args: vec!["--delay".into()] };
        assert!(!needs_linkem_build(&status, None));
    }

    #[test]
    fn help_names_the_commands_it_runs() {
        let help = crate::cli::help(Some(crate::cli::Topic::Testbed));
        let cargo = Cargo::new("cargo", "/ws");
        assert!(help.contains(&build_linkem(&cargo).display()));
        assert!(help.contains("cargo run --release -p fairway-tests --bin fairway-testbed -- ACTION [ARGS]"));
    }
}
