//! Blind injection (RFC 5961) into long transfers.
//!
//! An attacker host knows the 4-tuple of every connection (it can see them
//! on the wire, or guess them) but not their sequence numbers. While the
//! transfers run it sends, in 1 ms batches, forged RSTs with random
//! sequence numbers (half of them also carrying a random ACK) and forged
//! data segments with random sequence and acknowledgment numbers, random
//! windows and 1 to 1,200 random bytes, all with valid checksums and the
//! attacker's own MAC address. Each is aimed at a random connection, at
//! either end: towards the server as if from the client, or towards the
//! client as if from the server.
//!
//! The attacker has a host on each side of the bottleneck and sends from
//! the victim's side, so no forged frame waits in (or is dropped by) the
//! bottleneck queue: every one reaches its victim and must be counted there.
//!
//! What is checked: no connection fails (no `Event::Error`, no reset), every
//! transfer arrives SHA-256 intact, and the victims count at least as many
//! drops as segments were forged: out of the window, an RST not at RCV.NXT
//! or an ACK outside [SND.UNA − MAX.SND.WND, SND.NXT] (both answered with
//! a rate-limited challenge ACK), and so on. Random numbers land in a
//! window of `w` bytes with probability w / 2^32, so with 1 MiB buffers a
//! few thousand segments make only a handful of in-window hits: the RFC
//! 5961 paths are exercised now and then, the out-of-window path always. The attack ends before the
//! first transfer can finish (64 MB need 5 s at 100 Mbit/s), so it always
//! hits connections in full flight.

use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};

use fairway_nic::sim::{LinkConfig, Side};
use fairway_stack::DropReason;
use fairway_stack::time::{Duration, Instant};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::forge::{Control, Segment};
use crate::scenario::{Report, SERVER_IP, SERVER_PORT, client_ip};
use crate::transfers::{Direction, Summary, TransferSpec, Transfers};
use crate::world::{Stop, World};

/// The attacker's own addresses: its host on the clients' side, and the one
/// on the server's side.
pub const ATTACKER_IPS: [Ipv4Addr; 2] = [Ipv4Addr::new(10, 2, 0, 1), Ipv4Addr::new(10, 2, 0, 2)];

/// Batches of forged frames are sent this often.
const SLICE: Duration = Duration::from_millis(1);

/// The drop reasons a blind segment is expected to land in.
pub const BLIND_REASONS: [DropReason; 6] = [
    DropReason::TcpOutOfWindow,
    DropReason::TcpRstNotExact,
    DropReason::TcpAckTooOld,
    DropReason::TcpAckUnsent,
    DropReason::TcpPaws,
    DropReason::TcpChallengeAckLimit,
];

/// The transfers and the attack.
#[derive(Clone, Debug)]
pub struct BlindParams {
    /// Transfers, alternately downloads and uploads, one per client host.
    pub transfers: usize,
    /// Bytes per transfer.
    pub size: u64,
    /// Forged RSTs.
    pub rsts: usize,
    /// Forged data segments.
    pub data: usize,
    /// How long the attack lasts, from the moment every connection is up.
    pub attack_duration: Duration,
    /// Send and receive buffers of both ends.
    pub buffer: usize,
}

impl BlindParams {
    /// 4 transfers of 16 MB (2 each way) over 100 Mbit/s × 20 ms; 3,000
    /// forged RSTs and 3,000 forged data segments over 2 s; 1 MiB buffers.
    pub fn issue() -> BlindParams {
        BlindParams {
            transfers: 4,
            size: 16_000_000,
            rsts: 3000,
            data: 3000,
            attack_duration: Duration::from_secs(2),
            buffer: 1 << 20,
        }
    }
}

/// What a blind-injection run measured.
#[derive(Clone, Debug)]
pub struct BlindResult {
    /// The parameters.
    pub params: BlindParams,
    /// Transfers complete and intact.
    pub intact: usize,
    /// `Event::Error` on any host.
    pub connection_errors: u64,
    /// Transfers already finished when the attack ended (0: it hit them all
    /// in flight).
    pub finished_before_attack_ended: usize,
    /// Forged segments sent.
    pub forged: usize,
    /// Drops the victims counted during and after the attack, all reasons.
    pub drops: u64,
    /// The same, per reason in [`BLIND_REASONS`].
    pub blind_drops: Vec<(DropReason, u64)>,
    /// Why the run ended.
    pub stop: Stop,
    /// The report.
    pub lines: Vec<String>,
}

impl BlindResult {
    /// Every check held.
    pub fn ok(&self) -> bool {
        self.intact == self.params.transfers
            && self.connection_errors == 0
            && self.finished_before_attack_ended == 0
            && self.drops >= self.forged as u64
    }

    /// The report, verdict last.
    pub fn report(&self) -> Report {
        Report { lines: self.lines.clone(), ok: self.ok() }
    }
}

/// Every host's drop counters, summed per reason.
fn drops_by_reason(world: &World) -> Vec<u64> {
    DropReason::ALL.iter().map(|&r| world.hosts.iter().map(|h| h.shard.counters().dropped(r)).sum()).collect()
}

/// Runs the transfers and the attack.
pub fn blind_injection(seed: u64, p: &BlindParams) -> BlindResult {
    let bottleneck =
        LinkConfig::ideal().with_delay(Duration::from_millis(10)).with_bandwidth_mbps(100).with_queue_bytes(250_000);
    let mut world = World::new(seed, 1500, bottleneck, bottleneck);
    let with_buffers = |mut cfg: fairway_stack::Config| {
        cfg.tcp.rx_buffer = p.buffer;
        cfg.tcp.tx_buffer = p.buffer;
        cfg
    };
    let server = world.add_host(Side::Right, with_buffers(world.config_for(SERVER_IP)), LinkConfig::ideal());
    let access = LinkConfig::ideal().with_delay(Duration::from_micros(100));
    let clients: Vec<usize> = (0..p.transfers)
        .map(|i| world.add_host(Side::Left, with_buffers(world.config_for(client_ip(i))), access))
        .collect();
    // `attackers[0]` reaches the clients, `attackers[1]` the server, neither
    // through the bottleneck.
    let attackers = [
        world.add_host(Side::Left, world.config_for(ATTACKER_IPS[0]), access),
        world.add_host(Side::Right, world.config_for(ATTACKER_IPS[1]), access),
    ];
    let specs = (0..p.transfers)
        .map(|i| TransferSpec {
            id: i as u64 + 1,
            size: p.size,
            direction: if i % 2 == 0 { Direction::Download } else { Direction::Upload },
            client: clients[i],
        })
        .collect();
    let mut app = Transfers::new(server, SocketAddrV4::new(SERVER_IP, SERVER_PORT), specs, p.transfers);
    const MAX_STEPS: u64 = 200_000_000;

    // Until every connection is up: the attacker learns the 4-tuples.
    let setup_limit = Instant::from_secs(30);
    while app.server_connections().count() < p.transfers && world.now() < setup_limit {
        let until = world.now() + SLICE;
        world.run(&mut app, until, MAX_STEPS);
    }
    let shard = &world.hosts[server].shard;
    // The flows are IPv4 (the frames forged below are).
    let mut tuples: Vec<(SocketAddrV4, SocketAddrV4)> = app
        .server_connections()
        .filter_map(|h| shard.flow(h))
        .filter_map(|f| match (f.local, f.remote) {
            (SocketAddr::V4(local), SocketAddr::V4(remote)) => Some((local, remote)),
            _ => None,
        })
        .collect();
    tuples.sort();
    let attack_start = world.now();
    let before = drops_by_reason(&world);

    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0xb11d_0000);
    let slices = (p.attack_duration.total_micros() / SLICE.total_micros()).max(1) as usize;
    let total = p.rsts + p.data;
    let (mut rsts, mut data, mut refused) = (0, 0, 0);
    let mut frame = Vec::with_capacity(1600);
    let mut payload = vec![0u8; 1200];
    if !tuples.is_empty() {
        for slice in 0..slices {
            let n = total / slices + usize::from(slice < total % slices);
            for _ in 0..n {
                let (server_end, client_end) = tuples[rng.random_range(0..tuples.len())];
                // Towards the server as if from the client, or the other way.
                let to_server = rng.random::<bool>();
                let (src, dst) = if to_server { (client_end, server_end) } else { (server_end, client_end) };
                let side = usize::from(to_server);
                let base = Segment::new(World::mac_of(ATTACKER_IPS[side]), World::mac_of(*dst.ip()), src, dst);
                // RSTs and data segments alternate while both remain.
                let rst = data >= p.data || (rsts < p.rsts && (rsts + data) % 2 == 0);
                let segment = if rst {
                    rsts += 1;
                    Segment {
                        control: Control::Rst,
                        seq: rng.random(),
                        ack: rng.random::<bool>().then(|| rng.random()),
                        ..base
                    }
                } else {
                    data += 1;
                    let len = rng.random_range(1..=payload.len());
                    rng.fill(&mut payload[..len]);
                    Segment {
                        control: if rng.random() { Control::Psh } else { Control::None },
                        seq: rng.random(),
                        ack: Some(rng.random()),
                        window: rng.random(),
                        payload: &payload[..len],
                        ..base
                    }
                };
                segment.write(&mut frame);
                if !world.transmit_raw(attackers[side], &frame) {
                    refused += 1;
                }
            }
            let until = attack_start + SLICE.saturating_mul(slice as u64 + 1);
            world.run(&mut app, until, MAX_STEPS);
        }
    }
    let finished_before_attack_ended = app.finished();
    let attack_end = world.now();

    let stop = world.run(&mut app, Instant::from_secs(3600), MAX_STEPS);
    let after = drops_by_reason(&world);
    let delta: Vec<(DropReason, u64)> =
        DropReason::ALL.iter().zip(after.iter().zip(&before)).map(|(&r, (a, b))| (r, a - b)).collect();
    let drops: u64 = delta.iter().map(|&(_, n)| n).sum();
    let blind_drops: Vec<(DropReason, u64)> =
        BLIND_REASONS.iter().map(|&r| (r, delta.iter().find(|(d, _)| *d == r).map_or(0, |&(_, n)| n))).collect();
    let summary = Summary::of(&app.results);
    let forged = rsts + data - refused;

    let row = |name: &str, value: String| format!("{name:<44}{value:>16}");
    let mut lines = vec![
        format!("scenario blind-injection, seed {seed}"),
        format!(
            "{} transfers of {} B (downloads and uploads alternately) over 100 Mbit/s, RTT 20 ms, buffers {} KiB",
            p.transfers,
            p.size,
            p.buffer / 1024
        ),
        format!(
            "attack from {} to {}: {} RSTs and {} data segments with random sequence numbers",
            attack_start, attack_end, rsts, data
        ),
        row("transfers intact", format!("{}/{}", summary.intact, summary.total)),
        row("transfers finished before the attack ended", finished_before_attack_ended.to_string()),
        row("connection errors (Event::Error)", app.connection_errors.to_string()),
        row("virtual time", world.now().to_string()),
        row("forged segments sent", forged.to_string()),
        row("drops counted by the victims (all reasons)", drops.to_string()),
    ];
    for (reason, n) in delta.iter().filter(|&&(r, n)| n > 0 || BLIND_REASONS.contains(&r)) {
        lines.push(row(&format!("  {}", reason.label()), n.to_string()));
    }
    let server_counters = world.hosts[server].shard.counters();
    lines.push(row("server resets sent", server_counters.resets_sent.to_string()));
    lines.push(row("server retransmits", server_counters.retransmits.to_string()));
    if refused > 0 {
        lines.push(row("forged frames the network refused", refused.to_string()));
    }
    for f in app.results.iter().filter(|r| !r.intact()).take(5) {
        lines.push(format!("failed: {f:?}"));
    }
    if stop != Stop::Done {
        lines.push(format!("run stopped early: {stop:?}"));
    }
    let reasons: Vec<String> = blind_drops.iter().map(|(r, n)| format!("{} {n}", r.label())).collect();
    lines.push(format!(
        "blind-injection: {}/{} transfers intact, {} connection errors; {forged} forged segments, {drops} drops \
         counted ({})",
        summary.intact,
        summary.total,
        app.connection_errors,
        reasons.join(", ")
    ));
    BlindResult {
        params: p.clone(),
        intact: summary.intact,
        connection_errors: app.connection_errors,
        finished_before_attack_ended,
        forged,
        drops,
        blind_drops,
        stop,
        lines,
    }
}
