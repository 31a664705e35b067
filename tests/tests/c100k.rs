//! Idle connections cost at most 1 KiB of stack state each.

use fairway_tests::scenario;
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// `cargo xtask sim --scenario c100k` (and `c100k6`) runs the full
/// 100,000; this keeps the bound under test at a fifth of that, over IPv4
/// and then over IPv6 (one after the other: the allocator counts the whole
/// process).
#[test]
fn an_idle_connection_costs_at_most_a_kibibyte() {
    for (run, name) in [(scenario::c100k as Run, "c100k"), (scenario::c100k6, "c100k6")] {
        let report = run(1, 20_000, scenario::read_net_heap_bytes).expect("counting allocator installed");
        println!("{}", report.lines.join("\n"));
        assert!(report.ok, "{}", report.lines.join("\n"));
        let last = report.last_line();
        assert!(last.starts_with(&format!("{name}: 20000 connections established, ")), "{last}");
        let bytes: f64 =
            last.split(", ").nth(1).and_then(|s| s.split(' ').next()).and_then(|s| s.parse().ok()).unwrap();
        assert!(bytes > 100.0 && bytes <= 1024.0, "{last}");
    }
}

/// A scenario of idle connections.
type Run = fn(u64, usize, fn() -> i64) -> Result<scenario::Report, String>;
