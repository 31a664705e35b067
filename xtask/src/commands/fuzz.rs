//! `cargo xtask fuzz [TARGET...] [--seconds N | --runs N]`: the
//! coverage-guided fuzz targets in `fuzz/` (libFuzzer, through cargo-fuzz
//! on the nightly toolchain). Installs what is missing (the nightly
//! toolchain through rustup, cargo-fuzz from crates.io), then runs each
//! target on its corpus in `fuzz/corpus/TARGET` (grown as it finds new
//! paths) and prints one line per target: executions, coverage, corpus
//! size. A crash stops the run; libFuzzer leaves the input in
//! `fuzz/artifacts/TARGET/`, and `cargo +nightly fuzz run TARGET FILE`
//! replays it.
//!
//! Targets build with `-s none` (safe Rust needs no AddressSanitizer; it
//! would cost half the speed) and with debug assertions and overflow
//! checks, so an arithmetic overflow is a crash too.

use std::process::Stdio;
use std::time::Instant;

use crate::cargo::{Cargo, Invocation};
use crate::cli::FuzzArgs;
use crate::error::Failure;

/// Every target, in the order a whole run takes them.
pub const TARGETS: &[&str] =
    &["http_head", "range", "chunked", "http_conn", "assembler", "sent_queue", "config", "shard_frames"];

pub fn run(cargo: &Cargo, args: &FuzzArgs) -> Result<(), Failure> {
    let targets: Vec<&str> = if args.targets.is_empty() {
        TARGETS.to_vec()
    } else {
        for t in &args.targets {
            if !TARGETS.contains(&t.as_str()) {
                return Err(Failure::usage_of(
                    "fuzz",
                    format!("no fuzz target `{t}` (the targets: {})", TARGETS.join(", ")),
                ));
            }
        }
        args.targets.iter().map(String::as_str).collect()
    };
    ensure_nightly()?;
    ensure_cargo_fuzz(cargo)?;
    let dir = cargo.root().join("fuzz");
    let mut lines = Vec::new();
    for target in targets {
        let corpus = format!("corpus/{target}");
        std::fs::create_dir_all(dir.join(&corpus))
            .map_err(|e| Failure::failed(format!("creating fuzz/{corpus}: {e}")))?;
        let fuzz = fuzz_run(target, &corpus, args).in_dir(&dir);
        eprintln!("xtask fuzz: $ {}", fuzz.display());
        let started = Instant::now();
        let out = fuzz
            .to_command()
            .stdin(Stdio::null())
            .output()
            .map_err(|e| Failure::failed(format!("could not start `{}`: {e}", fuzz.display())))?;
        let log = String::from_utf8_lossy(&out.stderr);
        let summary = summary(target, &log, started.elapsed().as_secs_f64());
        if !out.status.success() {
            let tail: Vec<&str> = log.lines().rev().take(40).collect();
            let tail: Vec<&str> = tail.into_iter().rev().collect();
            eprintln!("{}", tail.join("\n"));
            return Err(Failure::failed(format!(
                "fuzz target {target} failed ({}): the input is in fuzz/artifacts/{target}/; \
                 replay it with `cd fuzz && cargo +nightly fuzz run -s none -a -O {target} FILE`",
                crate::cargo::describe(out.status)
            )));
        }
        println!("{summary}");
        lines.push(summary);
    }
    println!("fuzz: {} target(s), 0 crashes", lines.len());
    Ok(())
}

/// `cargo +nightly fuzz run -s none -a -O TARGET CORPUS -- -runs=N|-max_total_time=S`
pub fn fuzz_run(target: &str, corpus: &str, args: &FuzzArgs) -> Invocation {
    let budget = match (args.runs, args.seconds) {
        (Some(runs), _) => format!("-runs={runs}"),
        (None, seconds) => format!("-max_total_time={}", seconds.unwrap_or(DEFAULT_SECONDS)),
    };
    Invocation::new(
        "cargo",
        ["+nightly", "fuzz", "run", "-s", "none", "-a", "-O", target, corpus, "--", &budget, "-print_final_stats=1"],
    )
}

/// Seconds per target when neither `--seconds` nor `--runs` is given.
pub const DEFAULT_SECONDS: u64 = 60;

/// `fuzz: TARGET N executions in S s, cov C, ft F, corpus K` from
/// libFuzzer's log.
fn summary(target: &str, log: &str, took: f64) -> String {
    let stat = |name: &str| {
        log.lines()
            .find_map(|l| l.strip_prefix(&format!("stat::{name}:")))
            .map_or_else(|| "?".to_owned(), |v| v.trim().to_owned())
    };
    // The last status line: `#N DONE cov: C ft: F corp: K/SIZE ...`.
    let last = log.lines().rev().find(|l| l.starts_with('#') && l.contains(" cov: ")).unwrap_or("");
    let field = |name: &str| {
        last.split_whitespace().skip_while(|w| *w != name).nth(1).map_or_else(|| "?".to_owned(), str::to_owned)
    };
    format!(
        "fuzz: {target} {} executions in {took:.0} s, cov {}, ft {}, corpus {}",
        stat("number_of_executed_units"),
        field("cov:"),
        field("ft:"),
        field("corp:")
    )
}

fn ensure_nightly() -> Result<(), Failure> {
    let list = std::process::Command::new("rustup").args(["toolchain", "list"]).output();
    match list {
        Ok(out) if String::from_utf8_lossy(&out.stdout).lines().any(|l| l.starts_with("nightly")) => Ok(()),
        Ok(_) => {
            eprintln!("xtask fuzz: installing the nightly toolchain (cargo-fuzz needs it)");
            Invocation::new("rustup", ["toolchain", "install", "nightly", "--profile", "minimal"]).run()
        }
        Err(e) => {
            Err(Failure::failed(format!("cargo xtask fuzz needs rustup to find or install the nightly toolchain: {e}")))
        }
    }
}

fn ensure_cargo_fuzz(cargo: &Cargo) -> Result<(), Failure> {
    let found = std::process::Command::new("cargo")
        .args(["+nightly", "fuzz", "--version"])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if found {
        return Ok(());
    }
    eprintln!("xtask fuzz: installing cargo-fuzz from crates.io");
    cargo.command(["install", "cargo-fuzz", "--locked"]).run()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_runs_or_seconds() {
        let runs = FuzzArgs { runs: Some(10_000_000), ..FuzzArgs::default() };
        assert_eq!(
            fuzz_run("range", "corpus/range", &runs).display(),
            "cargo +nightly fuzz run -s none -a -O range corpus/range -- -runs=10000000 -print_final_stats=1"
        );
        let default = FuzzArgs::default();
        assert!(fuzz_run("range", "corpus/range", &default).display().contains("-max_total_time=60 "));
    }

    #[test]
    fn every_target_is_a_binary_of_the_fuzz_crate_and_in_the_help() {
        let manifest = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../fuzz/Cargo.toml"))
            .expect("fuzz/Cargo.toml");
        let mut bins: Vec<&str> = manifest
            .lines()
            .filter_map(|l| l.strip_prefix("name = \""))
            .filter_map(|l| l.strip_suffix('"'))
            .filter(|name| *name != "fairway-fuzz")
            .collect();
        let mut targets = TARGETS.to_vec();
        targets.sort_unstable();
        bins.sort_unstable();
        assert_eq!(targets, bins, "TARGETS against fuzz/Cargo.toml's [[bin]]s");
        for target in TARGETS {
            assert!(
                crate::cli::FUZZ_HELP.lines().any(|l| l.trim_start().starts_with(&format!("{target} "))),
                "{target} is not in cargo xtask fuzz --help"
            );
        }
    }

    #[test]
    fn the_summary_reads_libfuzzers_log() {
        let log = "#1 INITED cov: 2 ft: 2 corp: 1/1b\n#4096 DONE   cov: 367 ft: 1424 corp: 421/67Kb lim: 4096\n\
                   stat::number_of_executed_units: 1017746\nstat::peak_rss_mb: 51\n";
        assert_eq!(
            summary("http_conn", log, 21.2),
            "fuzz: http_conn 1017746 executions in 21 s, cov 367, ft 1424, corpus 421/67Kb"
        );
    }
}
