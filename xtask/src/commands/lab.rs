//! `cargo xtask lab`: builds and runs fairway-lab, the experiments behind
//! the benchmark tables (`lab fairness`: the RTT-fairness grid on the
//! simulated network; `lab fairness --testbed`: the same with kernel TCP
//! clients on the namespace testbed; `lab delay`: downloads of each size
//! under added delay, on the testbed; the testbed ones as root, built with
//! the `afxdp` feature), with the user's arguments; and `lab ablation`,
//! the receive-path ablation, which builds the server and runs the
//! `ablation` binary of fairway-benches (it measures with `bench http`'s
//! machinery). The working directory is
//! the workspace root, so results land in `benches/results/`: Markdown
//! tables, and PNG charts.

use std::ffi::OsString;

use crate::cargo::{Cargo, Invocation};
use crate::cli::PassThrough;
use crate::error::Failure;
use crate::system;

/// Debian packages `lab` needs on the simulated network: the charts' font,
/// unless `--no-plots` (the simulation itself is pure Rust).
pub fn packages(args: &[OsString]) -> &'static [&'static str] {
    if args.iter().any(|a| a == "--no-plots") { &[] } else { &[system::FONT_PACKAGE] }
}

/// Debian packages the testbed's experiments need: the AF_XDP build's, the
/// testbed's tools (ping and Python among them), nginx, and the charts'
/// font.
pub fn testbed_packages() -> Vec<&'static str> {
    [system::AFXDP_BUILD_PACKAGES, system::TESTBED_PACKAGES, &[system::NGINX_PACKAGE, system::FONT_PACKAGE]].concat()
}

pub fn run(cargo: &Cargo, args: &PassThrough) -> Result<(), Failure> {
    let asks_help = args.args.iter().any(|a| a == "-h" || a == "--help");
    if on_testbed(&args.args) && !asks_help {
        if !system::is_root() {
            return Err(Failure::failed(
                "cargo xtask lab on the testbed (fairness --testbed, delay) needs root (network namespaces, \
                 AF_XDP): run it as root, e.g. sudo -E cargo xtask lab delay",
            ));
        }
        system::ensure_debian_packages(&testbed_packages())?;
    } else if !asks_help {
        system::ensure_debian_packages(packages(&args.args))?;
    }
    if is_ablation(&args.args) {
        // The help needs only the ablation binary; a run needs the server.
        let mut steps = Vec::new();
        if !asks_help {
            steps.push(super::run::build(cargo, true));
        }
        steps.push(ablation(cargo, &args.args[1..]));
        for step in steps {
            eprintln!("xtask lab: $ {}", step.display());
            step.run()?;
        }
        return Ok(());
    }
    let lab = fairway_lab(cargo, &args.args);
    eprintln!("xtask lab: $ {}", lab.display());
    lab.run()
}

/// Whether the experiment is `ablation`.
fn is_ablation(args: &[OsString]) -> bool {
    args.first().is_some_and(|a| a == "ablation")
}

/// `cargo run --release -p fairway-benches --bin ablation -- <args>`; it
/// finds the server [`super::run::build`] made beside itself.
pub fn ablation(cargo: &Cargo, args: &[OsString]) -> Invocation {
    cargo.run_release_bin("fairway-benches", None, "ablation", args)
}

/// Whether the arguments ask for the testbed: `fairness --testbed`, or
/// `delay` and `ablation`, which run only there.
fn on_testbed(args: &[OsString]) -> bool {
    args.iter().any(|a| a == "--testbed") || args.first().is_some_and(|a| a == "delay" || a == "ablation")
}

/// `cargo run --release -p fairway-tests [--features afxdp] --bin
/// fairway-lab -- <args>`: the testbed needs Fairway over AF_XDP.
pub fn fairway_lab(cargo: &Cargo, args: &[OsString]) -> Invocation {
    let features = on_testbed(args).then_some("afxdp");
    cargo.run_release_bin("fairway-tests", features, "fairway-lab", args)
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

    #[test]
    fn the_testbed_is_built_with_afxdp_and_needs_nginx() {
        let cargo = Cargo::new("cargo", "/ws");
        let args: Vec<OsString> = ["fairness", "--testbed", "--n", "10"].map(OsString::from).to_vec();
        assert_eq!(
            fairway_lab(&cargo, &args).display(),
            "cargo run --release -p fairway-tests --features afxdp --bin fairway-lab -- fairness --testbed --n 10"
        );
        let packages = testbed_packages();
        for package in system::AFXDP_BUILD_PACKAGES.iter().chain(system::TESTBED_PACKAGES).chain(&["nginx"]) {
            assert!(packages.contains(package), "{package} missing from {packages:?}");
        }
    }

    #[test]
    fn the_delay_lab_runs_on_the_testbed() {
        let cargo = Cargo::new("cargo", "/ws");
        let args: Vec<OsString> = ["delay", "--tries", "1"].map(OsString::from).to_vec();
        assert!(on_testbed(&args));
        assert_eq!(
            fairway_lab(&cargo, &args).display(),
            "cargo run --release -p fairway-tests --features afxdp --bin fairway-lab -- delay --tries 1"
        );
        assert!(testbed_packages().contains(&system::FONT_PACKAGE));
    }

    #[test]
    fn the_ablation_runs_the_benches_binary_on_the_testbed() {
        let cargo = Cargo::new("cargo", "/ws");
        let args: Vec<OsString> = ["ablation", "--rounds", "1"].map(OsString::from).to_vec();
        assert!(on_testbed(&args) && is_ablation(&args));
        assert_eq!(
            ablation(&cargo, &args[1..]).display(),
            "cargo run --release -p fairway-benches --bin ablation -- --rounds 1"
        );
        assert!(!is_ablation(&["delay"].map(OsString::from)));
    }

    #[test]
    fn the_simulated_grid_needs_the_font_unless_no_charts() {
        let args = |list: &[&str]| list.iter().map(OsString::from).collect::<Vec<_>>();
        assert_eq!(packages(&args(&["fairness"])), ["fonts-dejavu-core"]);
        assert_eq!(packages(&args(&["fairness", "--n", "2,10"])), ["fonts-dejavu-core"]);
        assert!(packages(&args(&["fairness", "--no-plots"])).is_empty());
    }
}
