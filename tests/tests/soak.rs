//! The soak under faults, short: `fairway-soak --minutes 2` (what `cargo
//! xtask soak --minutes 2` runs) on a testbed of its own, as root; `cargo
//! xtask test` runs it with the `afxdp` feature. It must pass, and its
//! last line must be the verdict in its fixed form.
#![cfg(all(target_os = "linux", feature = "afxdp"))]

use std::process::Command;

use fairway_tests::testbed;

#[test]
fn two_minutes_under_faults() {
    testbed::require_root().unwrap_or_else(|e| panic!("{e}"));
    let prefix = format!("sk{}", std::process::id() % 100_000);
    let out = Command::new(env!("CARGO_BIN_EXE_fairway-soak"))
        .args(["--minutes", "2", "--prefix", &prefix])
        .output()
        .expect("fairway-soak runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let report = format!("{stdout}\n{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the soak failed ({}):\n{report}", out.status);
    let last = stdout.lines().last().unwrap_or_default();
    println!("{last}");
    let (requests, rest) = last
        .strip_prefix("soak: ")
        .and_then(|l| l.split_once(" requests, 0 wrong, "))
        .unwrap_or_else(|| panic!("the last line: {last:?}"));
    assert!(requests.parse::<u64>().is_ok_and(|n| n > 1000), "{last}");
    assert!(rest.contains(" explained by faults), RSS baseline ") && rest.ends_with(" MiB"), "{last}");
}
