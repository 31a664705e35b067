//! `cargo xtask test`: formatting, lints and the workspace's tests, in that
//! order, stopping at the first failure.

use std::ffi::OsString;
use std::time::Instant;

use super::seconds;
use crate::cargo::{Cargo, Invocation};
use crate::cli::TestArgs;
use crate::commands::testbed::{self, LINKEM_ENV};
use crate::error::Failure;
use crate::system;

/// Debian packages the tests need: what the AF_XDP backend needs to build
/// (the workspace is checked and tested with every feature on), the
/// kernel-side tools of the real-peer tests, wrk, which the server's
/// end-to-end tests drive, nginx, which the reverse proxy's tests put
/// behind it, the font the lab's chart tests draw with, PostgreSQL, the
/// axum_postgres example's database, and Chromium, the browser of the
/// HTTP/2 page test (about 20 s to install: 124 MB).
pub fn packages() -> Vec<&'static str> {
    let extra = [
        system::WRK_PACKAGE,
        system::NGINX_PACKAGE,
        system::FONT_PACKAGE,
        system::POSTGRES_PACKAGE,
        system::CHROMIUM_PACKAGE,
    ];
    [system::AFXDP_BUILD_PACKAGES, system::TESTBED_PACKAGES, &extra].concat()
}

/// The crate holding the heavy simulated-network tests, left out by `--quick`.
const HEAVY_TESTS_PACKAGE: &str = "fairway-tests";

/// The server's end-to-end tests, run again with every receive-path
/// technique off (`fairway::config::all_off`: nothing recycled, no
/// steering, no interrupt moderation), which must change nothing they see.
/// Selected from the whole workspace, as step 4 builds it: naming the
/// packages instead unifies their dependencies' features differently, and
/// rebuilt half the workspace (100 s of a cold run) for the same tests.
const ALL_OFF_TESTS: [&str; 14] = [
    "test",
    "--workspace",
    "--all-features",
    "--test",
    "kernel_e2e",
    "--test",
    "kernel_tls",
    "--test",
    "proxy",
    "--test",
    "server_afxdp",
    "--test",
    "server_tap",
    "--quiet",
];

/// What the servers of [`ALL_OFF_TESTS`] read (`fairway::config::ALL_OFF_ENV`).
const ALL_OFF_ENV: &str = "FAIRWAY_TEST_ALL_OFF";

/// One named step of the run.
#[derive(Debug)]
struct Step {
    name: &'static str,
    invocation: Invocation,
}

fn steps(cargo: &Cargo, args: &TestArgs) -> Vec<Step> {
    let mut test: Vec<OsString> = vec!["test".into(), "--workspace".into(), "--all-features".into()];
    if args.quick {
        test.extend(["--exclude".into(), HEAVY_TESTS_PACKAGE.into()]);
    }
    test.extend(args.extra.iter().cloned());
    // The real-peer tests run the link emulator as a separate process.
    let linkem = testbed::linkem_path(cargo);
    let all_off = cargo.command(ALL_OFF_TESTS).env(ALL_OFF_ENV, "1").env(LINKEM_ENV, &linkem.to_string_lossy());
    let mut steps = vec![
        Step { name: "fmt", invocation: cargo.command(["fmt", "--all", "--", "--check"]) },
        Step {
            name: "clippy",
            invocation: cargo.command([
                "clippy",
                "--workspace",
                "--all-targets",
                "--all-features",
                "--",
                "-D",
                "warnings",
            ]),
        },
        Step { name: "linkem", invocation: testbed::build_linkem(cargo) },
        Step { name: "test", invocation: cargo.command(test).env(LINKEM_ENV, &linkem.to_string_lossy()) },
    ];
    if !args.quick {
        steps.push(Step { name: "all-off", invocation: all_off });
    }
    steps
}

pub fn run(cargo: &Cargo, args: &TestArgs) -> Result<(), Failure> {
    system::ensure_debian_packages(&packages())?;
    system::ensure_python_packages(system::PYTHON_TEST_PACKAGES)?;
    let steps = steps(cargo, args);
    let total = steps.len();
    let start = Instant::now();
    for (index, step) in steps.iter().enumerate() {
        let number = index + 1;
        eprintln!("xtask test: [{number}/{total}] {}: $ {}", step.name, step.invocation.display());
        let step_start = Instant::now();
        let result = step.invocation.run();
        let elapsed = seconds(step_start.elapsed());
        match result {
            Ok(()) => eprintln!("xtask test: [{number}/{total}] {} passed in {elapsed}", step.name),
            Err(failure) => {
                return Err(Failure::Failed {
                    message: format!(
                        "xtask test: step {number}/{total} `{}` failed after {elapsed}: {failure}",
                        step.name
                    ),
                    code: failure.exit_code(),
                });
            }
        }
    }
    eprintln!("xtask test: all {total} steps passed in {}", seconds(start.elapsed()));
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli;

    fn lines(args: &TestArgs) -> Vec<(&'static str, String)> {
        let cargo = Cargo::new("/some/toolchain/cargo", "/ws");
        steps(&cargo, args).into_iter().map(|step| (step.name, step.invocation.display())).collect()
    }

    #[test]
    fn packages_include_wrk_the_font_postgres_chromium_and_the_testbed_tools() {
        let packages = packages();
        let extra = ["wrk", "nginx", "fonts-dejavu-core", "postgresql", "chromium"];
        for package in system::AFXDP_BUILD_PACKAGES.iter().chain(system::TESTBED_PACKAGES).chain(&extra) {
            assert!(packages.contains(package), "{package} missing from {packages:?}");
        }
    }

    #[test]
    fn default_steps() {
        assert_eq!(
            lines(&TestArgs::default()),
            [
                ("fmt", "cargo fmt --all -- --check".to_owned()),
                ("clippy", "cargo clippy --workspace --all-targets --all-features -- -D warnings".to_owned()),
                ("linkem", "cargo build --release -p fairway-nic --bin fairway-linkem".to_owned()),
                ("test", "cargo test --workspace --all-features".to_owned()),
                ("all-off", ALL_OFF_LINE.to_owned()),
            ]
        );
    }

    const ALL_OFF_LINE: &str = "cargo test --workspace --all-features --test kernel_e2e --test kernel_tls --test \
                                proxy --test server_afxdp --test server_tap --quiet";

    #[test]
    fn quick_and_extra_arguments_change_only_the_test_step() {
        let args = TestArgs { quick: true, extra: vec!["tcp::".into(), "--".into(), "--nocapture".into()] };
        let lines = lines(&args);
        assert_eq!(lines[0].1, "cargo fmt --all -- --check");
        assert_eq!(lines[1].1, "cargo clippy --workspace --all-targets --all-features -- -D warnings");
        assert_eq!(lines[3].1, "cargo test --workspace --all-features --exclude fairway-tests tcp:: -- --nocapture");
        assert_eq!(lines.len(), 4, "--quick leaves out the all-off pass");
    }

    #[test]
    fn help_describes_the_steps_as_run() {
        // A long step wraps onto lines indented under its command.
        let help = cli::help(Some(cli::Topic::Test)).replace("\n           ", " ");
        for (name, line) in lines(&TestArgs::default()) {
            assert!(help.contains(&format!("{name:<8}{line}")), "help lacks {line:?}");
        }
        assert!(help.contains("cargo test --workspace --all-features --exclude fairway-tests"));
    }
}
