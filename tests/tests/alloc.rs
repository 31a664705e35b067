//! Zero heap allocations per request in steady state: a request/response
//! workload on the simulated network, counted by a global allocator.
//!
//! With a part of the server's recycling off (`Recycle`), the same workload
//! allocates per request: the switch really is off.
//!
//! A test without libtest's harness (`harness = false`): the allocation
//! counter is process-wide, and neither another test nor the harness's own
//! threads may allocate inside the measured interval.

use fairway_nic::sim::{LinkConfig, Side};
use fairway_stack::Recycle;
use fairway_stack::time::{Duration, Instant};
use fairway_tests::reqresp::{Mode, RequestResponse, Workload};
use fairway_tests::scenario::{SERVER_IP, client_ip};
use fairway_tests::world::{Stop, World};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

fn world(time_wait: Duration, recycle: Recycle) -> World {
    let link = LinkConfig::ideal().with_delay(Duration::from_micros(100)).with_bandwidth_mbps(1000);
    let mut world = World::new(5, 1500, link, link);
    let mut server = world.config_for(SERVER_IP);
    server.tcp.time_wait = time_wait;
    server.recycle = recycle;
    // The path cache is read and written on every connection and must
    // allocate nothing either (it is allocated with the shard).
    server.tcp.fast_start = fairway_stack::FastStart::CarefulResume;
    world.add_host(Side::Right, server, LinkConfig::ideal());
    for i in 0..2 {
        let mut client = world.config_for(client_ip(i));
        client.tcp.time_wait = time_wait;
        world.add_host(Side::Left, client, LinkConfig::ideal());
    }
    world.net.reserve_frames(4096);
    world
}

/// Runs `warmup` requests, then `measured` more, and returns the allocations
/// made during the measured ones.
fn allocations_in_steady_state(mode: Mode, warmup: u64, measured: u64) -> (stats_alloc::Stats, u64) {
    allocations_recycling(Recycle::ALL, mode, warmup, measured)
}

/// [`allocations_in_steady_state`] with the server recycling only what
/// `recycle` says (the clients recycle everything).
fn allocations_recycling(recycle: Recycle, mode: Mode, warmup: u64, measured: u64) -> (stats_alloc::Stats, u64) {
    let mut world = world(Duration::from_millis(100), recycle);
    let mut app = RequestResponse::new(
        3,
        0,
        SERVER_IP,
        Workload { mode, conns_per_client: 8, request_len: 200, response_len: 3000, target: warmup },
    );
    let until = Instant::from_secs(3600);
    assert_eq!(world.run(&mut app, until, 50_000_000), Stop::Done);
    let warm = world.now();
    app.target += measured;
    let region = Region::new(GLOBAL);
    let stop = world.run(&mut app, until, 50_000_000);
    let stats = region.change();
    assert_eq!(stop, Stop::Done);
    assert_eq!(app.errors, 0);
    println!("{mode:?}, {recycle:?}: warm-up {warmup} requests in {warm}, then {measured} in {}", world.now() - warm);
    (stats, app.completed)
}

fn main() {
    steady_state_request_response_allocates_nothing();
    println!("test steady_state_request_response_allocates_nothing ... ok");
    each_part_of_recycling_switched_off_allocates_per_use();
    println!("test each_part_of_recycling_switched_off_allocates_per_use ... ok");
}

/// Each of the server's pools switched off alone allocates per use, in
/// the workload where its part is used per request: the event queue and
/// the buffers on keep-alive connections (a request's data comes and goes,
/// each wakes the application), the connection slots on a connection per
/// request. Everything off allocates on both.
fn each_part_of_recycling_switched_off_allocates_per_use() {
    let only_off = |f: fn(&mut Recycle)| {
        let mut r = Recycle::ALL;
        f(&mut r);
        r
    };
    let cases = [
        ("events", only_off(|r| r.events = false), Mode::KeepAlive),
        ("buffers", only_off(|r| r.buffers = false), Mode::KeepAlive),
        ("handles", only_off(|r| r.handles = false), Mode::ConnectionPerRequest),
        ("every part", Recycle::NONE, Mode::KeepAlive),
        ("every part", Recycle::NONE, Mode::ConnectionPerRequest),
    ];
    let measured = 2_000;
    for (name, recycle, mode) in cases {
        // As above: a connection per request warms up over several
        // TIME-WAIT periods, so that connections close as fast as they open.
        let warmup = if mode == Mode::KeepAlive { 1_000 } else { 30_000 };
        let (stats, done) = allocations_recycling(recycle, mode, warmup, measured);
        assert_eq!(done, warmup + measured);
        println!("  {name} off, {mode:?}: {} allocations for {measured} requests", stats.allocations);
        // At least one per request: what recycling saves is per use, not
        // a one-off growth of some table.
        assert!(stats.allocations >= measured as usize, "{name} off, {mode:?}: {stats:?}");
        assert!(stats.deallocations >= measured as usize, "{name} off, {mode:?}: freed per use too: {stats:?}");
    }
}

fn steady_state_request_response_allocates_nothing() {
    // Keep-alive: the same connections serve request after request.
    let (stats, done) = allocations_in_steady_state(Mode::KeepAlive, 2_000, 20_000);
    assert_eq!(done, 22_000);
    assert_eq!((stats.allocations, stats.reallocations), (0, 0), "keep-alive: {stats:?}");

    // A connection per request: slots, buffers, flow-table entries and
    // TIME-WAIT all recycle. The warm-up spans several TIME-WAIT periods so
    // the TIME-WAIT population has reached its steady size.
    let (stats, done) = allocations_in_steady_state(Mode::ConnectionPerRequest, 30_000, 10_000);
    assert_eq!(done, 40_000);
    assert_eq!((stats.allocations, stats.reallocations), (0, 0), "connection per request: {stats:?}");
}
