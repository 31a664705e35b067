//! Transfers over a hostile simulated link arrive byte-identical, and runs
//! are deterministic.

use fairway_tests::scenario::{self, IntegrityParams};

/// The issue's acceptance test: 1,000 transfers of 1 B to 4 MB, uploads and
/// downloads, over a link with 5 % loss, 5 % reordering, 1 % duplication and
/// 1 % corruption. Every transfer must finish (none hangs) with the SHA-256
/// of what was received equal to that of what was sent.
#[test]
fn a_thousand_transfers_over_a_hostile_link_arrive_intact() {
    let report = scenario::integrity(7, &IntegrityParams::issue());
    for line in &report.lines {
        println!("{line}");
    }
    assert!(report.ok, "{}", report.lines.join("\n"));
    assert!(report.last_line().starts_with("sim: 1000/1000 transfers intact"), "{}", report.last_line());
}

/// The same over IPv6: every host dual-stack, each transfer to the
/// server's IPv6 address (Neighbor Discovery across the hostile link too).
#[test]
fn a_thousand_transfers_over_ipv6_on_a_hostile_link_arrive_intact() {
    let report = scenario::integrity(7, &IntegrityParams { ipv6: true, ..IntegrityParams::issue() });
    for line in &report.lines {
        println!("{line}");
    }
    assert!(report.ok, "{}", report.lines.join("\n"));
    assert!(report.last_line().starts_with("sim: 1000/1000 transfers intact"), "{}", report.last_line());
}

/// With every shard leaving its TCP checksums partial for the (simulated)
/// NIC to finish, as over AF_XDP with checksum offload: data segments, the
/// handshake, ACKs and resets all carry the pseudo-header sum the NIC needs,
/// over both families, and the link's corruption is still caught.
#[test]
fn transfers_with_checksum_offload_arrive_intact_over_both_families() {
    for ipv6 in [false, true] {
        let p = IntegrityParams {
            transfers: 200,
            max_size: 1 << 20,
            concurrency: 20,
            checksum_offload: true,
            ipv6,
            ..IntegrityParams::issue()
        };
        let report = scenario::integrity(5, &p);
        assert!(report.ok, "IPv6 {ipv6}: {}", report.lines.join("\n"));
        assert!(report.last_line().starts_with("sim: 200/200 transfers intact"), "{}", report.last_line());
    }
}

#[test]
fn the_same_seed_gives_the_same_run_and_another_seed_another() {
    let p = IntegrityParams { transfers: 40, max_size: 200_000, concurrency: 10, ..IntegrityParams::issue() };
    let a = scenario::integrity(11, &p);
    let b = scenario::integrity(11, &p);
    let c = scenario::integrity(12, &p);
    assert!(a.ok && b.ok && c.ok);
    assert_eq!(a.lines, b.lines, "same seed, same table");
    assert_ne!(a.lines, c.lines, "another seed, another run");
}

#[test]
fn the_default_scenario_fills_the_bottleneck() {
    let report = scenario::default(1);
    assert!(report.ok, "{}", report.lines.join("\n"));
    let last = report.last_line();
    assert!(last.starts_with("sim: 100/100 transfers intact, goodput "), "{last}");
    // Loss-limited Reno with 100 flows still keeps a 100 Mbit/s link busy.
    let pct: f64 = last.split('(').nth(1).and_then(|s| s.split(' ').next()).and_then(|s| s.parse().ok()).unwrap();
    assert!(pct >= 70.0, "{last}");
}
