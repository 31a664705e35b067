//! `cargo xtask lab`: builds and runs fairway-lab, the experiments behind
//! the benchmark tables (`lab fairness`: the RTT-fairness grid on the
//! simulated network), with the user's arguments. The working directory is
//! the workspace root, so results land in `benches/results/`.

use std::ffi::OsString;

use crate::cargo::{Cargo, Invocation};
use crate::cli::PassThrough;
use crate::error::Failure;
use crate::system;

/// Debian packages `lab` needs: none (the simulated network is pure Rust).
pub const PACKAGES: &[&str] = &[];

pub fn run(cargo: &Cargo, args: &PassThrough) -> Result<(), Failure> {
    system::ensure_debian_packages(PACKAGES)?;
    let lab = fairway_lab(cargo, &args.args);
    eprintln!("xtask lab: $ {}", lab.display());
    lab.run()
}

/// `cargo run --release -p fairway-tests --bin fairway-lab -- <args>`
pub fn fairway_lab(cargo: &Cargo, args: &[OsString]) -> Invocation {
    cargo.run_release_bin("fairway-tests", None, "fairway-lab", args)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_follow_the_separator() {
        let cargo = Cargo::new("cargo", "/ws");
        let args: Vec<OsString> = ["fairness", "--n", "2,10"].map(OsString::from).to_vec();
        assert_eq!(
            fairway_lab(&cargo, &args).display(),
            "cargo run --release -p fairway-tests --bin fairway-lab -- fairness --n 2,10"
        );
    }
}
