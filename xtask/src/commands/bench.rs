//! `cargo xtask bench`: the loopback benchmark binary and the criterion
//! micro-benchmarks.

use std::ffi::OsString;
use std::time::Instant;

use super::seconds;
use crate::cargo::{Cargo, Invocation};
use crate::cli::{BenchArgs, BenchTarget};
use crate::error::Failure;
use crate::system;

/// Debian packages `bench` needs: none yet. The AF_XDP work will add
/// `clang llvm libelf-dev zlib1g-dev libpcap-dev m4 gcc-multilib pkg-config`
/// (and wrk, nginx, curl for the kernel-peer figures).
pub const PACKAGES: &[&str] = &[];

pub fn run(cargo: &Cargo, args: &BenchArgs) -> Result<(), Failure> {
    system::ensure_debian_packages(PACKAGES)?;
    for (name, invocation) in invocations(cargo, args) {
        eprintln!("xtask bench {name}: $ {}", invocation.display());
        let start = Instant::now();
        invocation.run()?;
        eprintln!("xtask bench {name}: done in {}", seconds(start.elapsed()));
    }
    Ok(())
}

/// What to run for `args`, in order, each with the target's name.
fn invocations(cargo: &Cargo, args: &BenchArgs) -> Vec<(&'static str, Invocation)> {
    match args.target {
        BenchTarget::Loopback => vec![("loopback", loopback(cargo, &args.args))],
        BenchTarget::Micro => vec![("micro", micro(cargo, &args.args))],
        BenchTarget::All => vec![("loopback", loopback(cargo, &[])), ("micro", micro(cargo, &[]))],
    }
}

/// `cargo run --release -p fairway-benches --bin loopback -- <args>`
fn loopback(cargo: &Cargo, args: &[OsString]) -> Invocation {
    let mut line: Vec<OsString> = ["run", "--release", "-p", "fairway-benches", "--bin", "loopback", "--"]
        .into_iter()
        .map(OsString::from)
        .collect();
    line.extend_from_slice(args);
    cargo.command(line)
}

/// `cargo bench -p fairway-benches <args>`
fn micro(cargo: &Cargo, args: &[OsString]) -> Invocation {
    let mut line: Vec<OsString> = ["bench", "-p", "fairway-benches"].into_iter().map(OsString::from).collect();
    line.extend_from_slice(args);
    cargo.command(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn lines(target: BenchTarget, args: &[&str]) -> Vec<(&'static str, String)> {
        let cargo = Cargo::new("cargo", "/ws");
        let args = BenchArgs { target, args: args.iter().map(OsString::from).collect() };
        invocations(&cargo, &args).into_iter().map(|(name, invocation)| (name, invocation.display())).collect()
    }

    #[test]
    fn loopback_passes_arguments_to_the_binary() {
        assert_eq!(
            lines(BenchTarget::Loopback, &["--seconds", "5"]),
            [("loopback", "cargo run --release -p fairway-benches --bin loopback -- --seconds 5".to_owned())]
        );
    }

    #[test]
    fn micro_passes_arguments_to_cargo_bench() {
        assert_eq!(
            lines(BenchTarget::Micro, &["--", "--save-baseline", "x"]),
            [("micro", "cargo bench -p fairway-benches -- --save-baseline x".to_owned())]
        );
    }

    #[test]
    fn all_runs_loopback_then_micro() {
        assert_eq!(
            lines(BenchTarget::All, &[]),
            [
                ("loopback", "cargo run --release -p fairway-benches --bin loopback --".to_owned()),
                ("micro", "cargo bench -p fairway-benches".to_owned()),
            ]
        );
    }
}
