//! A SYN flood does not deny service to legitimate clients, and the server's
//! state stays bounded (RFC 4987: SYN queue limit, then SYN cookies).
//!
//! This file holds a single test so that no other test's allocations are
//! counted against the server's heap.

use fairway_tests::scenario;
use fairway_tests::syn_flood::{SynFloodParams, syn_flood};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// Issue 3: 100,000 spoofed SYNs in 1 s while 100 legitimate clients each
/// download 64 KiB. Every legitimate transfer completes intact (within 10 s
/// of the flood's start), the server never holds more connections than its
/// SYN-queue limit plus the legitimate ones, and its heap stays under the
/// bound documented in `fairway_tests::syn_flood`.
#[test]
fn a_syn_flood_neither_denies_service_nor_grows_the_server() {
    let p = SynFloodParams::issue();
    let r = syn_flood(1, &p, scenario::read_net_heap_bytes);
    let text = r.lines.join("\n");
    println!("{text}");
    assert!(r.peak_heap > 0, "the counting allocator is not installed");
    assert!(
        r.peak_connections <= r.connection_bound,
        "the server held {} connections, more than its SYN queue ({}) plus the {} legitimate ones\n{text}",
        r.peak_connections,
        p.syn_backlog,
        p.legitimate
    );
    assert!(r.peak_heap <= r.heap_bound, "server heap {} B above the bound {} B\n{text}", r.peak_heap, r.heap_bound);
    assert_eq!(
        r.intact, p.legitimate,
        "legitimate transfers intact within {} of the flood's start\n{text}",
        p.deadline
    );
    assert!(r.ok());
}
