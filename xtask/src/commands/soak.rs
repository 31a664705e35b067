//! `cargo xtask soak [--minutes N] [ARGS...]`: the soak under faults, as
//! root: installs what the AF_XDP build and the testbed need, builds the
//! link emulator, and runs fairway-soak (the fairway-tests crate's
//! `soak` module) with the user's arguments. Its last line is the
//! verdict; xtask adds nothing after it and exits with its status.
//!
//! Ctrl-C reaches fairway-soak, which stops its load and faults, takes
//! its testbed down and fails; xtask outlives the signal to wait for that.

use std::sync::Arc;
use std::sync::atomic::AtomicBool;

use crate::cargo::{Cargo, Invocation};
use crate::cli::PassThrough;
use crate::commands::testbed::{LINKEM_ENV, build_linkem, linkem_path};
use crate::error::Failure;
use crate::system;

/// Debian packages the soak needs: the AF_XDP build's and the testbed's.
pub fn packages() -> Vec<&'static str> {
    [system::AFXDP_BUILD_PACKAGES, system::TESTBED_PACKAGES].concat()
}

pub fn run(cargo: &Cargo, args: &PassThrough) -> Result<(), Failure> {
    let asks_help = args.args.iter().any(|a| a == "-h" || a == "--help");
    if !asks_help {
        if !system::is_root() {
            return Err(Failure::failed(
                "cargo xtask soak needs root (network namespaces, AF_XDP): run it as root, e.g. sudo -E cargo xtask soak",
            ));
        }
        system::ensure_debian_packages(&packages())?;
    }
    let build = build_linkem(cargo);
    eprintln!("xtask soak: $ {}", build.display());
    build.run()?;
    let soak = fairway_soak(cargo, &args.args).env(LINKEM_ENV, &linkem_path(cargo).to_string_lossy());
    eprintln!("xtask soak: $ {}", soak.display());
    // Outlive Ctrl-C: fairway-soak gets it too, and cleans up.
    let interrupted = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&interrupted))
            .map_err(|e| Failure::failed(format!("xtask soak: cannot handle signal {signal}: {e}")))?;
    }
    match soak.run() {
        Err(Failure::Failed { code, .. }) if !asks_help => Err(Failure::Reported { code }),
        other => other,
    }
}

/// `cargo run --release -p fairway-tests --features afxdp --bin fairway-soak -- <args>`
pub fn fairway_soak(cargo: &Cargo, args: &[std::ffi::OsString]) -> Invocation {
    cargo.run_release_bin("fairway-tests", Some("afxdp"), "fairway-soak", args)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::ffi::OsString;

    #[test]
    fn arguments_follow_the_separator_with_afxdp() {
        let cargo = Cargo::new("cargo", "/ws");
        let args: Vec<OsString> = ["--minutes", "2"].map(OsString::from).to_vec();
        assert_eq!(
            fairway_soak(&cargo, &args).display(),
            "cargo run --release -p fairway-tests --features afxdp --bin fairway-soak -- --minutes 2"
        );
        for package in system::AFXDP_BUILD_PACKAGES.iter().chain(system::TESTBED_PACKAGES) {
            assert!(packages().contains(package), "{package}");
        }
    }
}
