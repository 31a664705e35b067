//! `cargo xtask sim`: builds and runs fairway-sim, the simulated-network
//! scenario runner, with the user's arguments.

use std::ffi::OsString;

use crate::cargo::{Cargo, Invocation};
use crate::cli::PassThrough;
use crate::error::Failure;
use crate::system;

/// Debian packages `sim` needs: none (the simulated network is pure Rust).
/// The AF_XDP work will add `clang llvm libelf-dev zlib1g-dev libpcap-dev m4
/// gcc-multilib pkg-config` to the commands that build the nic crate with
/// AF_XDP support.
pub const PACKAGES: &[&str] = &[];

pub fn run(cargo: &Cargo, args: &PassThrough) -> Result<(), Failure> {
    system::ensure_debian_packages(PACKAGES)?;
    let sim = fairway_sim(cargo, &args.args);
    eprintln!("xtask sim: $ {}", sim.display());
    sim.run()
}

/// `cargo run --release -p fairway-tests --bin fairway-sim -- <args>`
pub fn fairway_sim(cargo: &Cargo, args: &[OsString]) -> Invocation {
    cargo.run_release_bin("fairway-tests", None, "fairway-sim", args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_follow_the_separator() {
        let cargo = Cargo::new("cargo", "/ws");
        let args: Vec<OsString> = ["--scenario", "c100k", "--seed", "7"].map(OsString::from).to_vec();
        assert_eq!(
            fairway_sim(&cargo, &args).display(),
            "cargo run --release -p fairway-tests --bin fairway-sim -- --scenario c100k --seed 7"
        );
        assert_eq!(fairway_sim(&cargo, &[]).display(), "cargo run --release -p fairway-tests --bin fairway-sim --");
    }
}
