//! Careful resume (RFC 9959) on the simulated network: a client that comes
//! back to its path, idle or since become congested.
//!
//! A 20 Mbit/s bottleneck with a 40 ms round trip and a 50 KB drop-tail
//! queue. Client A (10.1.0.1) downloads 2 MB alone: the server remembers
//! its path and the window it carried. Then client B, of another /24 (so it
//! starts from scratch), starts a download: 12 MB that fill the link, or
//! 1 KB that leave it idle; while it runs, A downloads 1 MB again. The
//! bottleneck's drops and A's second download are compared between slow
//! start and careful resume, one run each, same seed.
//!
//! Without the stack's standing-queue check (no jump when the handshake's
//! RTT is over a quarter above the saved one), the congested return
//! jumped into B's queue and doubled the drops after it (38 against slow
//! start's 19) for a slower download (2.51 s against 2.30 s).

use core::net::{Ipv4Addr, SocketAddrV4};

use fairway_nic::sim::{LinkConfig, Side};
use fairway_stack::FastStart;
use fairway_stack::time::{Duration, Instant};
use fairway_tests::scenario::{SERVER_IP, SERVER_PORT};
use fairway_tests::transfers::{Direction, TransferSpec, Transfers};
use fairway_tests::world::{Stop, World};

struct Outcome {
    /// Bottleneck drops before the returning download starts.
    drops_before: u64,
    queue_drops: u64,
    retransmits: u64,
    jumps: u64,
    retreats: u64,
    /// The returning download's completion time.
    returning: Duration,
}

fn run(mode: FastStart, competitor: u64) -> Outcome {
    let bottleneck =
        LinkConfig::ideal().with_delay(Duration::from_millis(20)).with_bandwidth_mbps(20).with_queue_bytes(50_000);
    let mut world = World::new(7, 1500, bottleneck, bottleneck);
    let mut server_cfg = world.config_for(SERVER_IP);
    server_cfg.tcp.tx_buffer = 1 << 20;
    server_cfg.tcp.fast_start = mode;
    let server = world.add_host(Side::Right, server_cfg, LinkConfig::ideal());
    let client = |world: &mut World, ip: Ipv4Addr| {
        let mut cfg = world.config_for(ip);
        cfg.tcp.rx_buffer = 1 << 20;
        world.add_host(Side::Left, cfg, LinkConfig::ideal())
    };
    let a = client(&mut world, Ipv4Addr::new(10, 1, 0, 1));
    let b = client(&mut world, Ipv4Addr::new(10, 2, 0, 1));
    let spec = |id, size, client| TransferSpec { id, size, direction: Direction::Download, client };
    // A alone at 0 s; B from 2.5 s (about 5 s of data); A again at 5 s.
    let specs = vec![spec(1, 2_000_000, a), spec(2, competitor, b), spec(3, 1_000_000, a)];
    let mut app = Transfers::new(server, SocketAddrV4::new(SERVER_IP, SERVER_PORT), specs, 3)
        .with_schedule(Instant::ZERO, Duration::from_millis(2500));
    let drops = |world: &World| {
        let stats = world.net.stats();
        stats.right_to_left.queue_drops + stats.left_to_right.queue_drops
    };
    assert_eq!(world.run(&mut app, Instant::from_millis(4999), 50_000_000), Stop::TimeLimit);
    let drops_before = drops(&world);
    let stop = world.run(&mut app, Instant::from_secs(120), 50_000_000);
    assert_eq!(stop, Stop::Done, "{mode:?}");
    assert!(app.results.iter().all(|r| r.intact()), "{mode:?}: {:?}", app.results);
    let counters = world.hosts[server].shard.counters().clone();
    Outcome {
        drops_before,
        queue_drops: drops(&world),
        retransmits: counters.retransmits,
        jumps: counters.fast_start_jumps,
        retreats: counters.fast_start_retreats,
        returning: app.results[2].completion().expect("finished"),
    }
}

#[test]
fn careful_resume_into_a_link_that_has_since_become_congested_loses_no_more_than_slow_start() {
    let slow_start = run(FastStart::Off, 12_000_000);
    let resumed = run(FastStart::CarefulResume, 12_000_000);
    report("congested", &slow_start, &resumed);
    assert_eq!(slow_start.jumps, 0);
    assert_eq!(resumed.drops_before, slow_start.drops_before, "the same run up to the return");
    assert!(
        resumed.queue_drops <= slow_start.queue_drops,
        "careful resume dropped {} at the bottleneck, slow start {}",
        resumed.queue_drops,
        slow_start.queue_drops
    );
    assert!(resumed.returning <= slow_start.returning + Duration::from_millis(50));
}

#[test]
fn careful_resume_onto_its_idle_path_finishes_sooner_without_loss() {
    let slow_start = run(FastStart::Off, 1_000);
    let resumed = run(FastStart::CarefulResume, 1_000);
    report("idle", &slow_start, &resumed);
    assert_eq!((resumed.jumps, resumed.retreats), (1, 0));
    assert_eq!(resumed.queue_drops - resumed.drops_before, 0, "no drop after the return");
    assert!(
        resumed.returning.total_micros() * 10 < slow_start.returning.total_micros() * 9,
        "at least 10 % sooner: {} against {}",
        resumed.returning,
        slow_start.returning
    );
}

fn report(what: &str, slow_start: &Outcome, resumed: &Outcome) {
    eprintln!(
        "{what}: slow start: {} drops ({} before the return), {} retransmits, returning download {}; careful \
         resume: {} drops ({} before), {} retransmits, {} jumps, {} retreats, returning download {}",
        slow_start.queue_drops,
        slow_start.drops_before,
        slow_start.retransmits,
        slow_start.returning,
        resumed.queue_drops,
        resumed.drops_before,
        resumed.retransmits,
        resumed.jumps,
        resumed.retreats,
        resumed.returning,
    );
}
