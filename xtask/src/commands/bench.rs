//! `cargo xtask bench`: the loopback benchmark binary, the criterion
//! micro-benchmarks, allocations per request (`alloc`), and the `nic` and
//! `http` benchmarks on the namespace testbed (root).

use std::ffi::OsString;
use std::time::Instant;

use super::seconds;
use crate::cargo::{Cargo, Invocation};
use crate::cli::{BenchArgs, BenchTarget};
use crate::commands::run;
use crate::error::Failure;
use crate::system;

/// Debian packages `bench loopback`, `bench micro` and `bench alloc`
/// need: none.
pub const PACKAGES: &[&str] = &[];

/// Debian packages `bench nic` needs: the AF_XDP build's, the testbed's
/// tools (curl among them), and nginx.
pub fn nic_packages() -> Vec<&'static str> {
    [system::AFXDP_BUILD_PACKAGES, system::TESTBED_PACKAGES, &[system::NGINX_PACKAGE]].concat()
}

/// Debian packages `bench http` needs: the AF_XDP build's (for the
/// server), the testbed's tools (curl among them), nginx, wrk and h2load.
pub fn http_packages() -> Vec<&'static str> {
    let load = [system::NGINX_PACKAGE, system::WRK_PACKAGE, system::H2LOAD_PACKAGE];
    [system::AFXDP_BUILD_PACKAGES, system::TESTBED_PACKAGES, &load].concat()
}

pub fn run(cargo: &Cargo, args: &BenchArgs) -> Result<(), Failure> {
    let asks_help = args.args.iter().any(|a| a == "-h" || a == "--help");
    match args.target {
        // The help needs the binary built, not the testbed's tools.
        BenchTarget::Nic if asks_help => system::ensure_debian_packages(system::AFXDP_BUILD_PACKAGES)?,
        BenchTarget::Http if asks_help => {}
        BenchTarget::Nic | BenchTarget::Http => {
            let name = if args.target == BenchTarget::Nic { "nic" } else { "http" };
            if !system::is_root() {
                return Err(Failure::failed(format!(
                    "cargo xtask bench {name} needs root (network namespaces, AF_XDP): \
                     run it as root, e.g. sudo -E cargo xtask bench {name}"
                )));
            }
            let packages = if args.target == BenchTarget::Nic { nic_packages() } else { http_packages() };
            system::ensure_debian_packages(&packages)?;
        }
        BenchTarget::Loopback | BenchTarget::Micro | BenchTarget::Alloc | BenchTarget::All => {
            system::ensure_debian_packages(PACKAGES)?
        }
    }
    for (name, invocation) in invocations(cargo, args, asks_help) {
        eprintln!("xtask bench {name}: $ {}", invocation.display());
        let start = Instant::now();
        invocation.run()?;
        eprintln!("xtask bench {name}: done in {}", seconds(start.elapsed()));
    }
    Ok(())
}

/// What to run for `args`, in order, each with the target's name.
/// `asks_help`: the user only wants the binary's help, so `http` need not
/// build the server first.
fn invocations(cargo: &Cargo, args: &BenchArgs, asks_help: bool) -> Vec<(&'static str, Invocation)> {
    match args.target {
        BenchTarget::Loopback => vec![("loopback", loopback(cargo, &args.args))],
        BenchTarget::Micro => vec![("micro", micro(cargo, &args.args))],
        BenchTarget::Nic => vec![("nic", nic(cargo, &args.args))],
        BenchTarget::Alloc => vec![("alloc", alloc(cargo, &args.args))],
        BenchTarget::Http if asks_help => vec![("http", http(cargo, &args.args))],
        // `cargo run` builds only the binary it runs: the other servers
        // `http` starts are built first.
        BenchTarget::Http => vec![
            ("http: the server", run::build(cargo, true)),
            ("http: the axum example", axum_example(cargo)),
            ("http: axum on tokio", axum_tokio(cargo)),
            ("http", http(cargo, &args.args)),
        ],
        BenchTarget::All => vec![("loopback", loopback(cargo, &[])), ("micro", micro(cargo, &[]))],
    }
}

/// `cargo run --release -p fairway-benches --bin loopback -- <args>`
fn loopback(cargo: &Cargo, args: &[OsString]) -> Invocation {
    cargo.run_release_bin("fairway-benches", None, "loopback", args)
}

/// `cargo run --release -p fairway-benches --features afxdp --bin nic -- <args>`
fn nic(cargo: &Cargo, args: &[OsString]) -> Invocation {
    cargo.run_release_bin("fairway-benches", Some("afxdp"), "nic", args)
}

/// `cargo run --release -p fairway-benches --bin http -- <args>`; it
/// finds the server [`run::build`] made beside itself, the axum example
/// in `examples/` there, and `axum_tokio` beside itself.
fn http(cargo: &Cargo, args: &[OsString]) -> Invocation {
    cargo.run_release_bin("fairway-benches", None, "http", args)
}

/// `cargo build --release -p fairway --features afxdp --example
/// axum_app`: the axum example `http` serves over AF_XDP and kernel
/// sockets.
fn axum_example(cargo: &Cargo) -> Invocation {
    cargo.command(["build", "--release", "-p", "fairway", "--features", "afxdp", "--example", "axum_app"])
}

/// `cargo build --release -p fairway-benches --bin axum_tokio`: the same
/// router on tokio, which `http` compares the example with.
fn axum_tokio(cargo: &Cargo) -> Invocation {
    cargo.command(["build", "--release", "-p", "fairway-benches", "--bin", "axum_tokio"])
}

/// `cargo run --release -p fairway-benches --bin axum_alloc -- <args>`
fn alloc(cargo: &Cargo, args: &[OsString]) -> Invocation {
    cargo.run_release_bin("fairway-benches", None, "axum_alloc", args)
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
        let asks_help = args.args.iter().any(|a| a == "--help");
        invocations(&cargo, &args, asks_help)
            .into_iter()
            .map(|(name, invocation)| (name, invocation.display()))
            .collect()
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
    fn nic_runs_the_binary_with_the_afxdp_feature() {
        assert_eq!(
            lines(BenchTarget::Nic, &["--rounds", "3", "--skip-bulk"]),
            [(
                "nic",
                "cargo run --release -p fairway-benches --features afxdp --bin nic -- --rounds 3 --skip-bulk"
                    .to_owned()
            )]
        );
    }

    #[test]
    fn nic_needs_afxdp_testbed_and_nginx_packages() {
        let packages = nic_packages();
        for package in system::AFXDP_BUILD_PACKAGES.iter().chain(system::TESTBED_PACKAGES).chain(&["nginx"]) {
            assert!(packages.contains(package), "{package} missing from {packages:?}");
        }
    }

    #[test]
    fn help_names_the_nic_command_line() {
        let help = crate::cli::help(Some(crate::cli::Topic::Bench));
        // The help breaks the command line over two lines.
        let joined = help.split_whitespace().collect::<Vec<_>>().join(" ").replace(" \\ ", " ");
        let cargo = Cargo::new("cargo", "/ws");
        let line = nic(&cargo, &[]).display();
        assert!(joined.contains(line.trim_end_matches(" --")), "help lacks {line:?}");
        assert!(help.contains("Not nic"), "the help says whether all runs nic");
    }

    #[test]
    fn http_builds_the_servers_then_runs_the_binary() {
        assert_eq!(
            lines(BenchTarget::Http, &["--duration", "5"]),
            [
                ("http: the server", "cargo build --release -p fairway --features afxdp".to_owned()),
                (
                    "http: the axum example",
                    "cargo build --release -p fairway --features afxdp --example axum_app".to_owned()
                ),
                ("http: axum on tokio", "cargo build --release -p fairway-benches --bin axum_tokio".to_owned()),
                ("http", "cargo run --release -p fairway-benches --bin http -- --duration 5".to_owned()),
            ]
        );
        // Its help needs no server.
        assert_eq!(
            lines(BenchTarget::Http, &["--help"]),
            [("http", "cargo run --release -p fairway-benches --bin http -- --help".to_owned())]
        );
    }

    #[test]
    fn http_needs_afxdp_testbed_nginx_wrk_and_h2load_packages() {
        let packages = http_packages();
        let load = ["nginx", "wrk", "curl", "nghttp2-client"];
        for package in system::AFXDP_BUILD_PACKAGES.iter().chain(system::TESTBED_PACKAGES).chain(&load) {
            assert!(packages.contains(package), "{package} missing from {packages:?}");
        }
    }

    #[test]
    fn help_names_the_http_command_lines() {
        let help = crate::cli::help(Some(crate::cli::Topic::Bench));
        let cargo = Cargo::new("cargo", "/ws");
        assert!(help.contains(&run::build(&cargo, true).display()));
        assert!(help.contains(&axum_tokio(&cargo).display()));
        // The help breaks the example's command line over two lines.
        let joined = help.split_whitespace().collect::<Vec<_>>().join(" ").replace(" \\ ", " ");
        assert!(joined.contains(&axum_example(&cargo).display()), "help lacks the axum example's build");
        assert!(help.contains(&format!("{} [ARGS...]", http(&cargo, &[]).display())));
        assert!(help.contains("Not nic or http"));
    }

    #[test]
    fn alloc_runs_the_binary_and_needs_no_packages() {
        assert_eq!(
            lines(BenchTarget::Alloc, &["--requests", "5000"]),
            [("alloc", "cargo run --release -p fairway-benches --bin axum_alloc -- --requests 5000".to_owned())]
        );
        let help = crate::cli::help(Some(crate::cli::Topic::Bench));
        let joined = help.split_whitespace().collect::<Vec<_>>().join(" ").replace(" \\ ", " ");
        let cargo = Cargo::new("cargo", "/ws");
        assert!(joined.contains(&format!("{} [ARGS...]", alloc(&cargo, &[]).display())), "{help}");
        assert!(PACKAGES.is_empty());
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
