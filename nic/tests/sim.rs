//! Behaviour of the simulated network through its public API: timing
//! arithmetic, queueing, impairments, routing and determinism.

use fairway_nic::Device;
use fairway_nic::sim::{HostId, LinkConfig, LinkId, Network, Side};
use fairway_stack::time::{Duration, Instant};

const MAX_FRAME: usize = 1514;
const BROADCAST: [u8; 6] = [0xff; 6];

fn mac(i: u8) -> [u8; 6] {
    [0x02, 0, 0, 0, 0, i]
}

/// Frame `seq` from `src` to `dst`, `len` bytes: header, the sequence
/// number three times (so that a one-byte corruption cannot hide which frame
/// it was), then bytes derived from it, so any frame can be rebuilt.
fn write_frame(buf: &mut [u8], dst: [u8; 6], src: [u8; 6], seq: u32, len: usize) -> usize {
    assert!(len >= 26);
    buf[..6].copy_from_slice(&dst);
    buf[6..12].copy_from_slice(&src);
    buf[12..14].copy_from_slice(&0x88b5u16.to_be_bytes()); // local experimental
    for copy in buf[14..26].chunks_exact_mut(4) {
        copy.copy_from_slice(&seq.to_be_bytes());
    }
    for (i, b) in buf[26..len].iter_mut().enumerate() {
        *b = (seq as usize).wrapping_mul(31).wrapping_add(i) as u8;
    }
    len
}

fn expected_frame(dst: [u8; 6], src: [u8; 6], seq: u32, len: usize) -> Vec<u8> {
    let mut buf = vec![0; len];
    write_frame(&mut buf, dst, src, seq, len);
    buf
}

/// The sequence number of a frame built by [`write_frame`], by majority of
/// its three copies.
fn seq_of(frame: &[u8]) -> u32 {
    let copy = |i: usize| u32::from_be_bytes(frame[14 + 4 * i..18 + 4 * i].try_into().unwrap());
    if copy(0) == copy(1) || copy(0) == copy(2) { copy(0) } else { copy(1) }
}

#[track_caller]
fn send(net: &mut Network, from: HostId, dst: [u8; 6], seq: u32, len: usize) {
    let src = net.host_mac(from);
    let sent = net.port(from).transmit(1, |buf| Some(write_frame(buf, dst, src, seq, len)));
    assert_eq!(sent, 1);
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Delivery {
    at: Instant,
    host: usize,
    frame: Vec<u8>,
}

/// Collects what has already arrived, then runs the network until idle,
/// collecting after each step.
fn drain(net: &mut Network) -> Vec<Delivery> {
    let mut log = Vec::new();
    collect(net, &mut log);
    while let Some(t) = net.next_event() {
        net.advance(t);
        collect(net, &mut log);
    }
    log
}

fn collect(net: &mut Network, log: &mut Vec<Delivery>) {
    let at = net.now();
    for host in net.hosts() {
        net.port(host).receive(usize::MAX, |f| log.push(Delivery { at, host: host.index(), frame: f.to_vec() }));
    }
}

fn micros(us: u64) -> Instant {
    Instant::from_micros(us)
}

/// Two hosts on each side; access links ideal unless given.
fn dumbbell(seed: u64, bottleneck: LinkConfig, access: LinkConfig) -> (Network, [HostId; 4]) {
    let mut net = Network::new(seed, MAX_FRAME, bottleneck, bottleneck);
    let l0 = net.add_host(Side::Left, mac(0), access);
    let l1 = net.add_host(Side::Left, mac(1), access);
    let r0 = net.add_host(Side::Right, mac(2), access);
    let r1 = net.add_host(Side::Right, mac(3), access);
    (net, [l0, l1, r0, r1])
}

/// RFC 1071 one's-complement sum, folded and complemented.
fn internet_checksum(data: &[u8]) -> u16 {
    let mut sum: u32 = 0;
    for chunk in data.chunks(2) {
        let word = if chunk.len() == 2 { u16::from_be_bytes([chunk[0], chunk[1]]) } else { u16::from(chunk[0]) << 8 };
        sum += u32::from(word);
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

// ---- timing arithmetic ----

#[test]
fn three_hops_add_serialisation_and_delay_exactly() {
    let access = LinkConfig::ideal().with_bandwidth_mbps(100).with_delay(Duration::from_millis(1));
    let bottleneck = LinkConfig::ideal().with_bandwidth_mbps(10).with_delay(Duration::from_millis(5));
    let (mut net, [l0, _, r0, _]) = dumbbell(1, bottleneck, access);
    net.advance(micros(1_000)); // start from a non-zero time

    send(&mut net, l0, mac(2), 0, 1500);
    // Uplink: 1500 B at 100 Mbit/s is 120 µs, then 1 ms.
    assert_eq!(net.next_event(), Some(micros(1_000 + 120 + 1_000)));
    net.advance(micros(2_120));
    // Bottleneck: 1200 µs at 10 Mbit/s, then 5 ms.
    assert_eq!(net.next_event(), Some(micros(2_120 + 1_200 + 5_000)));
    net.advance(micros(8_320));
    // Downlink: 120 µs, then 1 ms.
    assert_eq!(net.next_event(), Some(micros(8_320 + 120 + 1_000)));
    net.advance(micros(9_439));
    assert!(!net.has_pending_rx(r0));
    net.advance(micros(9_440));
    assert!(net.has_pending_rx(r0));
    assert_eq!(net.next_event(), None);
    let mut got = Vec::new();
    net.port(r0).receive(8, |f| got.push(f.to_vec()));
    assert_eq!(got, [expected_frame(mac(2), mac(0), 0, 1500)]);
}

#[test]
fn back_to_back_frames_wait_for_the_serialiser() {
    let access = LinkConfig::ideal().with_bandwidth_mbps(100).with_delay(Duration::from_micros(7));
    let mut net = Network::new(1, MAX_FRAME, LinkConfig::ideal(), LinkConfig::ideal());
    let a = net.add_host(Side::Left, mac(0), access);
    net.add_host(Side::Left, mac(1), LinkConfig::ideal());
    for seq in 0..3 {
        send(&mut net, a, mac(1), seq, 1500);
    }
    let log = drain(&mut net);
    let times: Vec<_> = log.iter().map(|d| (d.at, seq_of(&d.frame))).collect();
    assert_eq!(times, [(micros(127), 0), (micros(247), 1), (micros(367), 2)]);
}

#[test]
fn fractional_serialisation_times_do_not_drift() {
    // 64 B at 1 Gbit/s is 0.512 µs: frame k is on the wire at ⌈0.512 k⌉ µs.
    let access = LinkConfig::ideal().with_bandwidth_bps(1_000_000_000);
    let mut net = Network::new(1, MAX_FRAME, LinkConfig::ideal(), LinkConfig::ideal());
    let a = net.add_host(Side::Left, mac(0), access);
    net.add_host(Side::Left, mac(1), LinkConfig::ideal());
    for seq in 0..1000 {
        send(&mut net, a, mac(1), seq, 64);
    }
    let log = drain(&mut net);
    assert_eq!(log.len(), 1000);
    for d in &log {
        let k = u64::from(seq_of(&d.frame)) + 1;
        assert_eq!(d.at, micros((k * 512).div_ceil(1000)), "frame {k}");
    }
    assert_eq!(log.last().unwrap().at, micros(512));
}

#[test]
fn an_idle_link_starts_serialising_at_once() {
    let access = LinkConfig::ideal().with_bandwidth_mbps(100);
    let mut net = Network::new(1, MAX_FRAME, LinkConfig::ideal(), LinkConfig::ideal());
    let a = net.add_host(Side::Left, mac(0), access);
    let b = net.add_host(Side::Left, mac(1), LinkConfig::ideal());
    send(&mut net, a, mac(1), 0, 1500);
    net.advance(micros(500)); // the link has long been idle
    assert_eq!(net.port(b).receive(8, |_| ()), 1);
    send(&mut net, a, mac(1), 1, 1500);
    let log = drain(&mut net);
    assert_eq!(log.iter().map(|d| d.at).collect::<Vec<_>>(), [micros(500 + 120)]);
}

#[test]
fn time_never_moves_backwards() {
    let (mut net, [l0, _, r0, _]) =
        dumbbell(1, LinkConfig::ideal().with_delay(Duration::from_millis(1)), LinkConfig::ideal());
    net.advance(micros(5_000));
    send(&mut net, l0, mac(2), 0, 100);
    net.advance(micros(10));
    assert_eq!(net.now(), micros(5_000));
    assert_eq!(net.next_event(), Some(micros(5_000)), "the uplink is ideal: the frame is at the switch now");
    net.advance(micros(5_000));
    assert_eq!(net.next_event(), Some(micros(6_000)));
    net.advance(micros(7_000));
    assert_eq!(net.now(), micros(7_000));
    assert!(net.has_pending_rx(r0));
}

// ---- drop-tail queue ----

#[test]
fn drop_tail_drops_when_the_queue_is_full_and_not_before() {
    let access = LinkConfig::ideal().with_bandwidth_mbps(100).with_queue_bytes(3000);
    let mut net = Network::new(1, MAX_FRAME, LinkConfig::ideal(), LinkConfig::ideal());
    let a = net.add_host(Side::Left, mac(0), access);
    net.add_host(Side::Left, mac(1), LinkConfig::ideal());
    let uplink = LinkId::Uplink(a);

    // One on the wire, two waiting (exactly 3000 B), then drops.
    send(&mut net, a, mac(1), 0, 1500);
    assert_eq!(net.queued_bytes(uplink), 0);
    send(&mut net, a, mac(1), 1, 1500);
    send(&mut net, a, mac(1), 2, 1500);
    assert_eq!(net.queued_bytes(uplink), 3000);
    assert_eq!(net.link_stats(uplink).queue_drops, 0);
    send(&mut net, a, mac(1), 3, 1500);
    assert_eq!(net.link_stats(uplink).queue_drops, 1);
    send(&mut net, a, mac(1), 4, 60); // even a small frame does not fit
    assert_eq!(net.link_stats(uplink).queue_drops, 2);

    // At 120 µs frame 1 starts: 1500 B of room again, no more.
    net.advance(micros(119));
    assert_eq!(net.queued_bytes(uplink), 3000);
    send(&mut net, a, mac(1), 5, 60);
    assert_eq!(net.link_stats(uplink).queue_drops, 3);
    net.advance(micros(120));
    assert_eq!(net.queued_bytes(uplink), 1500);
    send(&mut net, a, mac(1), 6, 1500);
    assert_eq!(net.link_stats(uplink).queue_drops, 3);
    send(&mut net, a, mac(1), 7, 60);
    assert_eq!(net.link_stats(uplink).queue_drops, 4);

    let seqs: Vec<_> = drain(&mut net).iter().map(|d| seq_of(&d.frame)).collect();
    assert_eq!(seqs, [0, 1, 2, 6]);
    let stats = net.link_stats(uplink);
    assert_eq!((stats.frames_offered, stats.frames_delivered, stats.queue_drops), (8, 4, 4));
}

#[test]
fn a_zero_byte_queue_only_takes_frames_when_the_link_is_idle() {
    let access = LinkConfig::ideal().with_bandwidth_mbps(100).with_queue_bytes(0);
    let mut net = Network::new(1, MAX_FRAME, LinkConfig::ideal(), LinkConfig::ideal());
    let a = net.add_host(Side::Left, mac(0), access);
    net.add_host(Side::Left, mac(1), LinkConfig::ideal());
    for seq in 0..10 {
        send(&mut net, a, mac(1), seq, 1500);
        net.advance(net.now() + Duration::from_micros(60));
    }
    let seqs: Vec<_> = drain(&mut net).iter().map(|d| seq_of(&d.frame)).collect();
    assert_eq!(seqs, [0, 2, 4, 6, 8]);
}

#[test]
fn the_bottleneck_queue_builds_from_many_senders() {
    // Four hosts at 100 Mbit/s into a 100 Mbit/s bottleneck with room for
    // ten frames: a synchronised burst of 4 × 10 frames overflows it.
    let bottleneck = LinkConfig::ideal().with_bandwidth_mbps(100).with_queue_bytes(15_000);
    let access = LinkConfig::ideal().with_bandwidth_mbps(100);
    let mut net = Network::new(1, MAX_FRAME, bottleneck, bottleneck);
    let senders: Vec<_> = (0..4).map(|i| net.add_host(Side::Left, mac(i), access)).collect();
    let sink = net.add_host(Side::Right, mac(9), LinkConfig::ideal());
    for seq in 0..10 {
        for &s in &senders {
            send(&mut net, s, mac(9), seq, 1500);
        }
    }
    let log = drain(&mut net);
    let l2r = net.link_stats(LinkId::Bottleneck { from: Side::Left });
    assert_eq!(l2r.frames_offered, 40);
    assert_eq!(l2r.frames_delivered as usize, log.len());
    assert_eq!(l2r.queue_drops + l2r.frames_delivered, 40);
    assert!(l2r.queue_drops > 0);
    assert!(log.iter().all(|d| d.host == sink.index()));
    // Delivered back to back: one frame every 120 µs once the queue builds.
    for pair in log.windows(2) {
        assert_eq!(pair[1].at - pair[0].at, Duration::from_micros(120));
    }
}

// ---- impairments ----

/// Sends `n` frames `l0 → l1` over an impaired uplink, one every 10 µs, and
/// returns the log and the uplink's counters.
fn impaired_run(seed: u64, config: LinkConfig, n: u32) -> (Vec<Delivery>, fairway_nic::sim::LinkStats) {
    let mut net = Network::new(seed, MAX_FRAME, LinkConfig::ideal(), LinkConfig::ideal());
    let a = net.add_host(Side::Left, mac(0), config);
    net.add_host(Side::Left, mac(1), LinkConfig::ideal());
    let mut log = Vec::new();
    for seq in 0..n {
        send(&mut net, a, mac(1), seq, 64 + (seq as usize % 1400));
        net.advance(net.now() + Duration::from_micros(10));
        collect(&mut net, &mut log);
    }
    log.extend(drain(&mut net));
    (log, net.link_stats(LinkId::Uplink(a)))
}

#[track_caller]
fn assert_near(what: &str, got: u64, expected: f64, tolerance: f64) {
    let (lo, hi) = (expected * (1.0 - tolerance), expected * (1.0 + tolerance));
    assert!((lo..=hi).contains(&(got as f64)), "{what}: {got} outside [{lo:.0}, {hi:.0}]");
}

#[test]
fn impairment_rates_match_their_configuration() {
    let n = 100_000;
    let config = LinkConfig::ideal()
        .with_delay(Duration::from_micros(100))
        .with_loss(0.1)
        .with_duplicate(0.05)
        .with_corrupt(0.02)
        .with_reorder(0.1, Duration::from_micros(300));
    let (log, stats) = impaired_run(42, config, n);
    // Bands of ±10 % are more than ten standard deviations wide at these
    // counts; the seed is fixed, so this never flakes.
    assert_near("lost", stats.lost, 0.1 * f64::from(n), 0.1);
    let survivors = f64::from(n) * 0.9;
    assert_near("duplicated", stats.duplicated, 0.05 * survivors, 0.1);
    assert_near("corrupted", stats.corrupted, 0.02 * survivors, 0.1);
    assert_near("reordered", stats.reordered, 0.1 * survivors, 0.1);
    assert_eq!(stats.frames_offered, u64::from(n));
    assert_eq!(stats.frames_delivered, stats.frames_offered - stats.lost + stats.duplicated);
    assert_eq!(log.len() as u64, stats.frames_delivered);

    // Every received frame is intact or differs from what was sent in
    // exactly one byte; duplicates of a corrupted frame carry the same bytes.
    let mut corrupted = 0;
    let mut seen = std::collections::HashMap::new();
    for d in &log {
        let seq = seq_of(&d.frame);
        let sent = expected_frame(mac(1), mac(0), seq, 64 + (seq as usize % 1400));
        let diff = sent.iter().zip(&d.frame).filter(|(a, b)| a != b).count();
        assert!(diff <= 1);
        if let Some(first) = seen.insert(seq, d.frame.clone()) {
            assert_eq!(first, d.frame, "a duplicate differs from its original");
        } else if diff == 1 {
            corrupted += 1;
        }
    }
    assert_eq!(corrupted, stats.corrupted);
}

#[test]
fn corruption_changes_exactly_one_byte_and_the_checksum_sees_it() {
    let (log, stats) = impaired_run(3, LinkConfig::ideal().with_corrupt(1.0), 5_000);
    assert_eq!(stats.corrupted, 5_000);
    assert_eq!(log.len(), 5_000);
    for (seq, d) in log.iter().enumerate() {
        let sent = expected_frame(mac(1), mac(0), seq as u32, 64 + (seq % 1400));
        assert_eq!(d.frame.len(), sent.len());
        let diff = sent.iter().zip(&d.frame).filter(|(a, b)| a != b).count();
        assert_eq!(diff, 1, "frame {seq}");
        assert_ne!(internet_checksum(&sent), internet_checksum(&d.frame), "frame {seq}");
    }
}

#[test]
fn duplication_delivers_an_extra_copy() {
    let (log, stats) =
        impaired_run(3, LinkConfig::ideal().with_delay(Duration::from_micros(5)).with_duplicate(1.0), 100);
    assert_eq!(stats.duplicated, 100);
    assert_eq!(log.len(), 200);
    for (i, pair) in log.chunks(2).enumerate() {
        assert_eq!(pair[0], pair[1]);
        assert_eq!(seq_of(&pair[0].frame), i as u32);
    }
}

#[test]
fn loss_of_one_drops_everything() {
    let (log, stats) = impaired_run(3, LinkConfig::ideal().with_loss(1.0), 100);
    assert!(log.is_empty());
    assert_eq!(stats.lost, 100);
    assert_eq!(stats.frames_delivered, 0);
}

#[test]
fn reordering_lets_later_frames_overtake() {
    let config =
        LinkConfig::ideal().with_delay(Duration::from_micros(50)).with_reorder(0.3, Duration::from_micros(500));
    let (log, stats) = impaired_run(9, config, 2_000);
    let seqs: Vec<_> = log.iter().map(|d| seq_of(&d.frame)).collect();
    let inversions = seqs.windows(2).filter(|w| w[0] > w[1]).count();
    assert!(inversions > 100, "only {inversions} inversions");
    assert_near("reordered", stats.reordered, 600.0, 0.2);
    let mut sorted = seqs.clone();
    sorted.sort_unstable();
    assert_eq!(sorted, (0..2_000).collect::<Vec<_>>(), "every frame arrives exactly once");
    // A reordered frame is late by at most the configured extra delay.
    for d in &log {
        let sent_at = 10 * u64::from(seq_of(&d.frame));
        let late = d.at.total_micros() - sent_at;
        assert!((50..=550).contains(&late), "latency {late}");
    }
}

#[test]
fn without_reordering_a_path_is_fifo() {
    let access = LinkConfig::ideal().with_bandwidth_mbps(1000).with_delay(Duration::from_micros(30)).with_loss(0.2);
    let bottleneck =
        LinkConfig::ideal().with_bandwidth_mbps(50).with_delay(Duration::from_millis(2)).with_duplicate(0.1);
    let (mut net, [l0, _, r0, _]) = dumbbell(5, bottleneck, access);
    for seq in 0..500 {
        send(&mut net, l0, mac(2), seq, 200 + (seq as usize * 7) % 1300);
    }
    let log = drain(&mut net);
    assert!(log.iter().all(|d| d.host == r0.index()));
    let seqs: Vec<_> = log.iter().map(|d| seq_of(&d.frame)).collect();
    assert!(seqs.windows(2).all(|w| w[0] <= w[1]), "{seqs:?}");
}

// ---- routing ----

#[test]
fn broadcast_reaches_every_other_host_once() {
    let mut net = Network::new(1, MAX_FRAME, LinkConfig::ideal(), LinkConfig::ideal());
    let left: Vec<_> = (0..3).map(|i| net.add_host(Side::Left, mac(i), LinkConfig::ideal())).collect();
    let _right: Vec<_> = (3..5).map(|i| net.add_host(Side::Right, mac(i), LinkConfig::ideal())).collect();
    send(&mut net, left[1], BROADCAST, 7, 60);
    let mut hosts: Vec<_> = drain(&mut net).iter().map(|d| (d.host, seq_of(&d.frame))).collect();
    hosts.sort_unstable();
    assert_eq!(hosts, [(0, 7), (2, 7), (3, 7), (4, 7)]);
    assert_eq!(net.link_stats(LinkId::Bottleneck { from: Side::Left }).frames_offered, 1, "crosses once");
    assert_eq!(net.link_stats(LinkId::Bottleneck { from: Side::Right }).frames_offered, 0);

    // Multicast floods the same way; here from the right.
    let right4 = net.hosts().nth(4).unwrap();
    send(&mut net, right4, [0x01, 0x00, 0x5e, 0, 0, 1], 8, 60);
    let mut hosts: Vec<_> = drain(&mut net).iter().map(|d| d.host).collect();
    hosts.sort_unstable();
    assert_eq!(hosts, [0, 1, 2, 3]);
}

#[test]
fn broadcast_with_nobody_across_stays_on_its_side() {
    let mut net = Network::new(1, MAX_FRAME, LinkConfig::ideal(), LinkConfig::ideal());
    let a = net.add_host(Side::Left, mac(0), LinkConfig::ideal());
    send(&mut net, a, BROADCAST, 0, 60);
    assert!(drain(&mut net).is_empty());
    assert_eq!(net.stats().total.frames_offered, 1, "only the uplink");
}

#[test]
fn same_side_traffic_bypasses_the_bottleneck() {
    let bottleneck = LinkConfig::ideal().with_delay(Duration::from_secs(1)).with_bandwidth_mbps(1);
    let access = LinkConfig::ideal().with_delay(Duration::from_micros(100));
    let (mut net, [l0, l1, r0, r1]) = dumbbell(1, bottleneck, access);
    send(&mut net, l0, mac(1), 0, 1500);
    send(&mut net, r1, mac(2), 1, 1500);
    let log = drain(&mut net);
    assert_eq!(
        log.iter().map(|d| (d.at, d.host)).collect::<Vec<_>>(),
        [(micros(200), l1.index()), (micros(200), r0.index())]
    );
    let stats = net.stats();
    assert_eq!(stats.left_to_right.frames_offered + stats.right_to_left.frames_offered, 0);
    assert_eq!(stats.hosts[l0.index()].uplink.frames_delivered, 1);
    assert_eq!(stats.hosts[l1.index()].downlink.frames_delivered, 1);
}

#[test]
fn unroutable_frames_are_counted_and_dropped() {
    let (mut net, [l0, ..]) = dumbbell(1, LinkConfig::ideal(), LinkConfig::ideal());
    send(&mut net, l0, mac(77), 0, 100);
    let sent = net.port(l0).transmit(1, |buf| {
        buf[..6].copy_from_slice(&mac(2));
        Some(13) // shorter than an Ethernet header
    });
    assert_eq!(sent, 1);
    assert_eq!(net.next_event(), None);
    assert!(drain(&mut net).is_empty());
    let stats = net.stats();
    assert_eq!(stats.unroutable, 2);
    assert_eq!(stats.total.frames_offered, 0);
}

// ---- the Device contract ----

#[test]
fn receive_respects_the_budget_oldest_first() {
    let (mut net, [l0, l1, ..]) = dumbbell(1, LinkConfig::ideal(), LinkConfig::ideal());
    for seq in 0..5 {
        send(&mut net, l0, mac(1), seq, 100);
    }
    net.advance(micros(0));
    assert_eq!(net.pending_rx(l1), 5);
    let mut seqs = Vec::new();
    assert_eq!(net.port(l1).receive(2, |f| seqs.push(seq_of(f))), 2);
    assert_eq!(seqs, [0, 1]);
    assert_eq!(net.port(l1).receive(0, |_| unreachable!()), 0);
    assert_eq!(net.port(l1).receive(10, |f| seqs.push(seq_of(f))), 3);
    assert_eq!(seqs, [0, 1, 2, 3, 4]);
    assert!(!net.has_pending_rx(l1));
    assert_eq!(net.port(l1).receive(10, |_| unreachable!()), 0);
}

#[test]
fn transmit_stops_at_the_budget_or_at_none() {
    let (mut net, [l0, l1, ..]) = dumbbell(1, LinkConfig::ideal(), LinkConfig::ideal());
    let mut port = net.port(l0);
    assert_eq!(port.max_frame_len(), MAX_FRAME);
    let mut calls = 0;
    let sent = port.transmit(4, |buf| {
        assert_eq!(buf.len(), MAX_FRAME);
        calls += 1;
        Some(write_frame(buf, mac(1), mac(0), calls, 100))
    });
    assert_eq!((sent, calls), (4, 4));
    let mut calls = 0;
    let sent = port.transmit(10, |buf| {
        calls += 1;
        (calls <= 2).then(|| write_frame(buf, mac(1), mac(0), 10 + calls, 100))
    });
    assert_eq!((sent, calls), (2, 3));
    assert_eq!(port.transmit(0, |_| unreachable!()), 0);
    net.advance(micros(0));
    assert_eq!(net.pending_rx(l1), 6);
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "fill returned")]
fn an_oversized_fill_is_a_bug() {
    let (mut net, [l0, ..]) = dumbbell(1, LinkConfig::ideal(), LinkConfig::ideal());
    net.port(l0).transmit(1, |buf| Some(buf.len() + 1));
}

#[test]
#[should_panic(expected = "outside [0, 1]")]
fn a_probability_above_one_is_rejected() {
    let _ = LinkConfig::ideal().with_loss(1.5);
}

#[test]
#[should_panic(expected = "already taken")]
fn macs_are_unique() {
    let (mut net, _) = dumbbell(1, LinkConfig::ideal(), LinkConfig::ideal());
    net.add_host(Side::Right, mac(0), LinkConfig::ideal());
}

// ---- determinism ----

/// Every host sends to a peer across and one beside it, plus broadcasts,
/// over impaired, bandwidth-limited links with queues.
fn busy_scenario(seed: u64) -> (Vec<Delivery>, fairway_nic::sim::NetworkStats) {
    let bottleneck = LinkConfig::ideal()
        .with_bandwidth_mbps(20)
        .with_delay(Duration::from_millis(3))
        .with_queue_bytes(20_000)
        .with_loss(0.02)
        .with_reorder(0.05, Duration::from_micros(800))
        .with_duplicate(0.02)
        .with_corrupt(0.02);
    let access = LinkConfig::ideal().with_bandwidth_mbps(100).with_delay(Duration::from_micros(200)).with_loss(0.01);
    let (mut net, hosts) = dumbbell(seed, bottleneck, access);
    let mut log = Vec::new();
    for round in 0..400u32 {
        for (i, &h) in hosts.iter().enumerate() {
            let across = mac(((i + 2) % 4) as u8);
            let beside = mac((i ^ 1) as u8);
            send(&mut net, h, across, round, 100 + (round as usize * 13 + i * 101) % 1400);
            if round % 3 == 0 {
                send(&mut net, h, beside, round, 300);
            }
            if round % 50 == 0 {
                send(&mut net, h, BROADCAST, round, 60);
            }
        }
        net.advance(net.now() + Duration::from_micros(150));
        collect(&mut net, &mut log);
    }
    log.extend(drain(&mut net));
    (log, net.stats())
}

#[test]
fn the_same_seed_gives_identical_runs() {
    let (log_a, stats_a) = busy_scenario(1234);
    let (log_b, stats_b) = busy_scenario(1234);
    assert!(log_a.len() > 1000);
    assert!(stats_a.total.queue_drops > 0 && stats_a.total.lost > 0 && stats_a.total.reordered > 0);
    assert_eq!(stats_a, stats_b);
    assert!(log_a == log_b, "delivery logs differ");
}

#[test]
fn different_seeds_give_different_runs() {
    let (log_a, stats_a) = busy_scenario(1234);
    let (log_b, stats_b) = busy_scenario(1235);
    assert_ne!(stats_a, stats_b);
    assert!(log_a != log_b);
}

#[test]
fn traffic_on_one_link_does_not_perturb_another() {
    let lossy = LinkConfig::ideal().with_loss(0.3).with_corrupt(0.1).with_reorder(0.2, Duration::from_micros(40));
    let run = |with_other_traffic: bool| {
        let mut net = Network::new(77, MAX_FRAME, LinkConfig::ideal(), LinkConfig::ideal());
        let a = net.add_host(Side::Left, mac(0), lossy);
        let b = net.add_host(Side::Left, mac(1), LinkConfig::ideal());
        let c = net.add_host(Side::Left, mac(2), lossy);
        net.add_host(Side::Left, mac(3), lossy);
        let mut log = Vec::new();
        for seq in 0..1_000 {
            send(&mut net, a, mac(1), seq, 200);
            if with_other_traffic {
                send(&mut net, c, mac(3), seq, 300);
            }
            net.advance(net.now() + Duration::from_micros(5));
            collect(&mut net, &mut log);
        }
        log.extend(drain(&mut net));
        log.retain(|d| d.host == b.index());
        log
    };
    assert_eq!(run(false), run(true));
}

#[test]
fn counters_balance_once_idle() {
    let (_, stats) = busy_scenario(99);
    let links = [stats.left_to_right, stats.right_to_left]
        .into_iter()
        .chain(stats.hosts.iter().flat_map(|h| [h.uplink, h.downlink]));
    for l in links {
        assert_eq!(l.frames_delivered, l.frames_offered - l.queue_drops - l.lost + l.duplicated, "{l:?}");
    }
}
