//! Neither side of the loopback comparison allocates inside the measured
//! interval, so the figures compare protocol work, not allocators.
//!
//! A test without libtest's harness (`harness = false`): the allocation
//! counter is process-wide, and the harness's own threads (its main thread
//! waiting on the test, the output capture) could allocate inside the
//! measured interval; here the process has this one thread.

use fairway_benches::smoltcp_loopback::{Api, LoopbackConfig, LoopbackResult, Phase};
use fairway_benches::{fairway_loopback, smoltcp_loopback};
use stats_alloc::{INSTRUMENTED_SYSTEM, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

fn allocations() -> usize {
    let s = GLOBAL.stats();
    s.allocations + s.reallocations
}

fn main() {
    the_measured_transfers_allocate_nothing();
    println!("test the_measured_transfers_allocate_nothing ... ok");
}

fn the_measured_transfers_allocate_nothing() {
    let before = allocations();
    drop(std::hint::black_box(Box::new(1u8)));
    assert!(allocations() > before, "the counter counts");

    for (mtu, api) in [(1500, Api::Copy), (9000, Api::Copy), (1500, Api::InPlace), (9000, Api::InPlace)] {
        let config = LoopbackConfig { total_bytes: 8_000_000, mtu, socket_buffer: 256 * 1024, chunk: 64 * 1024, api };
        type Run<'a> = &'a dyn Fn(&LoopbackConfig, &mut dyn FnMut(Phase)) -> LoopbackResult;
        let runs: [(&str, Run); 2] = [
            ("smoltcp", &|c, p| smoltcp_loopback::run_probed(c, p)),
            ("fairway", &|c, p| fairway_loopback::run_probed(c, p)),
        ];
        for (name, run) in runs {
            let mut at_start = 0;
            let mut during = None;
            let result = run(&config, &mut |phase| match phase {
                Phase::TransferStart => at_start = allocations(),
                Phase::TransferEnd => during = Some(allocations() - at_start),
            });
            assert_eq!(result.bytes, config.total_bytes);
            assert_eq!(during, Some(0), "{name} allocated during the transfer at mtu {mtu}, {api:?}");
        }
    }
}
