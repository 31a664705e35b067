//! How fast frames move through the simulated network. Ignored by default:
//! it measures, it asserts nothing about time. Run it in release mode:
//!
//! ```text
//! cargo test --release -p fairway-nic --test throughput -- --ignored --nocapture
//! ```

use std::time::Instant as WallClock;

use fairway_nic::Device;
use fairway_nic::sim::{HostId, LinkConfig, Network, Side};
use fairway_stack::time::Duration;

const BATCH: usize = 32;

fn mac(i: u8) -> [u8; 6] {
    [0x02, 0, 0, 0, 0, i]
}

/// Sends `frames` frames `a → b` in batches, with the network advanced to
/// each event, and returns how many arrived and the wall-clock seconds.
fn pump(net: &mut Network, a: HostId, b: HostId, frames: usize, len: usize) -> (usize, f64) {
    let dst = net.host_mac(b);
    let start = WallClock::now();
    let (mut sent, mut received) = (0, 0);
    while sent < frames {
        sent += net.port(a).transmit(BATCH.min(frames - sent), |buf| {
            buf[..6].copy_from_slice(&dst);
            Some(len)
        });
        // Let time run one batch's worth of serialisation, then drain.
        net.advance(net.now() + Duration::from_micros(40));
        received += net.port(b).receive(usize::MAX, |f| {
            std::hint::black_box(f);
        });
    }
    while let Some(t) = net.next_event() {
        net.advance(t);
        received += net.port(b).receive(usize::MAX, |f| {
            std::hint::black_box(f);
        });
    }
    (received, start.elapsed().as_secs_f64())
}

fn report(what: &str, hops: usize, received: usize, secs: f64) {
    let fps = received as f64 / secs;
    let ns_per_hop = secs * 1e9 / (received * hops) as f64;
    println!(
        "{what}: {received} frames in {secs:.3} s = {:.2} M frames/s end to end, {ns_per_hop:.1} ns per hop",
        fps / 1e6
    );
}

#[test]
#[ignore = "measurement; run in release with --ignored --nocapture"]
fn frames_per_second() {
    let n = 5_000_000;

    // Two hops: uplink → downlink on one side, 10 Gbit/s, 10 µs each.
    let access = LinkConfig::ideal().with_bandwidth_bps(10_000_000_000).with_delay(Duration::from_micros(10));
    let mut net = Network::new(1, 1514, LinkConfig::ideal(), LinkConfig::ideal());
    let a = net.add_host(Side::Left, mac(1), access);
    let b = net.add_host(Side::Left, mac(2), access);
    let (received, secs) = pump(&mut net, a, b, n, 1514);
    report("2 hops, 1514 B, 10 Gbit/s + 10 µs per hop", 2, received, secs);

    let mut net = Network::new(1, 1514, LinkConfig::ideal(), LinkConfig::ideal());
    let a = net.add_host(Side::Left, mac(1), LinkConfig::ideal());
    let b = net.add_host(Side::Left, mac(2), LinkConfig::ideal());
    let (received, secs) = pump(&mut net, a, b, n, 64);
    report("2 hops, 64 B, ideal links", 2, received, secs);

    // Three hops across an impaired bottleneck.
    let bottleneck = LinkConfig::ideal()
        .with_bandwidth_bps(10_000_000_000)
        .with_delay(Duration::from_millis(1))
        .with_loss(0.01)
        .with_reorder(0.01, Duration::from_micros(100))
        .with_duplicate(0.01)
        .with_corrupt(0.01);
    let mut net = Network::new(1, 1514, bottleneck, bottleneck);
    let a = net.add_host(Side::Left, mac(1), access);
    let b = net.add_host(Side::Right, mac(2), access);
    let (received, secs) = pump(&mut net, a, b, n, 1514);
    report("3 hops, 1514 B, impaired 1 ms bottleneck", 3, received, secs);
}
