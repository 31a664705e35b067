//! Named scenarios on the simulated network, as `cargo xtask sim` runs them.
//!
//! Each scenario builds a [`World`], runs it, and reports a table whose last
//! line is the one-line verdict the issue tracker and CI read.

use core::net::{Ipv4Addr, SocketAddrV4};
use std::fmt::Write as _;

use fairway_nic::sim::{LinkConfig, Side};
use fairway_stack::time::{Duration, Instant};
use fairway_stack::{Event, Handle, Listener, Shard};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::transfers::{Direction, Summary, TransferSpec, Transfers};
use crate::world::{Meter, SimApp, Stop, World};

/// The scenarios, with a line each for `--list`.
pub const SCENARIOS: &[(&str, &str)] = &[
    ("default", "100 concurrent 1 MB downloads over a 100 Mbit/s bottleneck, 10 ms RTT, 1 % loss"),
    (
        "integrity",
        "1,000 transfers of 1 B to 4 MB over a link with 5 % loss, 5 % reordering, 1 % duplication, 1 % corruption",
    ),
    ("clean", "one 100 MB download over a clean 1 Gbit/s, 1 ms RTT path"),
    ("c100k", "100,000 concurrent idle connections to one shard; stack bytes per idle connection"),
    ("c100k6", "the same over IPv6"),
    (
        "regression",
        "the regression table: one download per cell, 100 Mbit/s x RTT 10/50/200 ms x loss 0-5 %, \
         1 Gbit/s x 100 ms, heavy reordering",
    ),
    ("lossy", "goodput of the lossy 100 Mbit/s cells beside the Mathis bound for Reno"),
    ("syn-flood", "100,000 spoofed SYNs in 1 s while 100 legitimate clients each download 64 KiB"),
    (
        "blind-injection",
        "3,000 blind RSTs and 3,000 blind data segments (random sequence numbers) into 4 long transfers",
    ),
    (
        "attacks",
        "the known TCP resource attacks (SegmentSmack, SACK Panic, reneging, zero and tiny windows, ACK division, \
         optimistic and duplicate ACKs, RST/FIN storms, PAWS wrap) beside an honest run, 5 rounds, with CPU per frame",
    ),
];

/// What a scenario printed and whether it met its own checks.
#[derive(Clone, Debug)]
pub struct Report {
    /// The table, one line per row, ending with the verdict line.
    pub lines: Vec<String>,
    /// Every check held.
    pub ok: bool,
}

impl Report {
    /// The verdict: the last line.
    pub fn last_line(&self) -> &str {
        self.lines.last().map(String::as_str).unwrap_or("")
    }
}

/// Runs the scenario `name` with `seed`.
pub fn run(name: &str, seed: u64) -> Result<Report, String> {
    match name {
        "default" => Ok(default(seed)),
        "integrity" => Ok(integrity(seed, &IntegrityParams::issue())),
        "clean" => Ok(clean(seed)),
        "c100k" => c100k(seed, 100_000, read_net_heap_bytes),
        "c100k6" => c100k6(seed, 100_000, read_net_heap_bytes),
        "regression" => Ok(crate::regression::regression_report(seed)),
        "lossy" => Ok(crate::regression::lossy_report(seed)),
        "syn-flood" => {
            let r = crate::syn_flood::syn_flood(seed, &crate::syn_flood::SynFloodParams::issue(), read_net_heap_bytes);
            if r.peak_heap <= 0 {
                return Err("syn-flood needs the counting allocator: run it through the fairway-sim binary".into());
            }
            Ok(r.report())
        }
        "blind-injection" => {
            Ok(crate::blind_injection::blind_injection(seed, &crate::blind_injection::BlindParams::issue()).report())
        }
        "attacks" => Ok(crate::attacks::table(seed, 5, read_net_heap_bytes)),
        _ => Err(format!(
            "unknown scenario '{name}'; known: {}",
            SCENARIOS.iter().map(|(n, _)| *n).collect::<Vec<_>>().join(", ")
        )),
    }
}

/// The server's address in every scenario.
pub const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
/// The server's port.
pub const SERVER_PORT: u16 = 80;

/// A host's IPv6 address in the scenarios that speak IPv6: fd00::/64 and
/// its IPv4 address as the last 32 bits.
pub fn ipv6_of(ip: Ipv4Addr) -> core::net::Ipv6Addr {
    core::net::Ipv6Addr::from_bits(0xfd00_u128 << 112 | u128::from(ip.to_bits()))
}

/// The address of client `i`.
pub fn client_ip(i: usize) -> Ipv4Addr {
    Ipv4Addr::new(10, 1, (i / 250) as u8, (i % 250) as u8 + 1)
}

/// Parameters of a bulk-transfer scenario.
#[derive(Clone, Debug)]
pub struct BulkParams {
    /// Bottleneck bandwidth, Mbit/s.
    pub bandwidth_mbps: u64,
    /// Round-trip propagation delay.
    pub rtt: Duration,
    /// Loss probability on each bottleneck direction.
    pub loss: f64,
    /// Drop-tail queue of the bottleneck, bytes.
    pub queue_bytes: usize,
    /// Client hosts.
    pub clients: usize,
    /// Transfers.
    pub flows: usize,
    /// Bytes per transfer.
    pub size: u64,
    /// IP MTU.
    pub mtu: usize,
    /// Per-connection buffers, bytes.
    pub buffer: usize,
}

/// Runs `p.flows` downloads of `p.size` bytes, all at once.
pub fn bulk(seed: u64, p: &BulkParams, label: &str) -> Report {
    let bottleneck = LinkConfig::ideal()
        .with_delay(Duration::from_micros(p.rtt.total_micros() / 2))
        .with_bandwidth_mbps(p.bandwidth_mbps)
        .with_queue_bytes(p.queue_bytes)
        .with_loss(p.loss);
    let mut world = World::new(seed, p.mtu, bottleneck, bottleneck);
    let mut server_cfg = world.config_for(SERVER_IP);
    server_cfg.tcp.tx_buffer = p.buffer;
    server_cfg.tcp.rx_buffer = p.buffer;
    let server = world.add_host(Side::Right, server_cfg, LinkConfig::ideal());
    let mut clients = Vec::new();
    for i in 0..p.clients {
        let mut cfg = world.config_for(client_ip(i));
        cfg.tcp.rx_buffer = p.buffer;
        cfg.tcp.tx_buffer = p.buffer;
        clients.push(world.add_host(Side::Left, cfg, LinkConfig::ideal()));
    }
    let specs = TransferSpec::downloads(p.flows, p.size, &clients);
    let mut app = Transfers::new(server, SocketAddrV4::new(SERVER_IP, SERVER_PORT), specs, p.flows);
    let stop = world.run(&mut app, Instant::from_secs(3600), 200_000_000);
    let summary = Summary::of(&app.results);
    let mut lines = Vec::new();
    lines.push(format!("scenario {label}, seed {seed}"));
    lines.push(format!(
        "path: {} Mbit/s bottleneck, RTT {}, loss {:.1} %, queue {} KB, MTU {}",
        p.bandwidth_mbps,
        p.rtt,
        p.loss * 100.0,
        p.queue_bytes / 1000,
        p.mtu
    ));
    lines.push(format!("{:<28}{:>14}", "metric", "value"));
    lines.push(format!("{:<28}{:>14}", "transfers", format!("{} x {} B", p.flows, p.size)));
    lines.push(format!("{:<28}{:>14}", "virtual time", summary.span.to_string()));
    for (q, name) in [(0.5, "completion p50"), (0.9, "completion p90"), (0.99, "completion p99")] {
        lines.push(format!("{:<28}{:>14}", name, summary.completion_quantile(q).to_string()));
    }
    push_shard_rows(&mut lines, &world, server);
    let stats = world.net.stats();
    lines.push(format!(
        "{:<28}{:>14}",
        "bottleneck drops (queue)",
        stats.right_to_left.queue_drops + stats.left_to_right.queue_drops
    ));
    lines.push(format!(
        "{:<28}{:>14}",
        "bottleneck losses (random)",
        stats.right_to_left.lost + stats.left_to_right.lost
    ));
    lines.push(format!("{:<28}{:>14}", "simulation steps", world.steps));
    let goodput = summary.goodput_mbps();
    let ok = stop == Stop::Done && summary.intact == summary.total;
    for f in app.results.iter().filter(|r| !r.intact()).take(5) {
        lines.push(format!("failed: {f:?}"));
    }
    if stop != Stop::Done {
        lines.push(format!("run stopped early: {stop:?}"));
    }
    lines.push(format!(
        "sim: {}/{} transfers intact, goodput {:.1} Mbit/s on a {} Mbit/s link ({:.0} %), p99 completion {} ms",
        summary.intact,
        summary.total,
        goodput,
        p.bandwidth_mbps,
        goodput / p.bandwidth_mbps as f64 * 100.0,
        summary.completion_quantile(0.99).total_millis()
    ));
    Report { lines, ok }
}

fn push_shard_rows(lines: &mut Vec<String>, world: &World, server: usize) {
    let c = world.hosts[server].shard.counters();
    lines.push(format!("{:<28}{:>14}", "server segments out", c.segments_out));
    lines.push(format!("{:<28}{:>14}", "server retransmits", c.retransmits));
    lines.push(format!("{:<28}{:>14}", "server timeouts", c.timeouts));
    lines.push(format!("{:<28}{:>14}", "server drops (all reasons)", c.total_dropped()));
}

/// The default scenario of the issue: 100 concurrent 1 MB flows, 100 Mbit/s,
/// 10 ms RTT, 1 % loss.
pub fn default(seed: u64) -> Report {
    let p = BulkParams {
        bandwidth_mbps: 100,
        rtt: Duration::from_millis(10),
        loss: 0.01,
        queue_bytes: 250_000,
        clients: 10,
        flows: 100,
        size: 1_000_000,
        mtu: 1500,
        buffer: 64 * 1024,
    };
    bulk(seed, &p, "default")
}

/// One long flow on a clean path: how close a single connection gets to the link.
pub fn clean(seed: u64) -> Report {
    let p = BulkParams {
        bandwidth_mbps: 1000,
        rtt: Duration::from_millis(1),
        loss: 0.0,
        queue_bytes: 250_000,
        clients: 1,
        flows: 1,
        size: 100_000_000,
        mtu: 1500,
        buffer: 64 * 1024,
    };
    bulk(seed, &p, "clean")
}

/// Parameters of the integrity stress.
#[derive(Clone, Debug)]
pub struct IntegrityParams {
    /// Transfers.
    pub transfers: usize,
    /// Largest transfer.
    pub max_size: u64,
    /// Transfers in flight at once.
    pub concurrency: usize,
    /// Impairment probabilities on every bottleneck frame.
    pub loss: f64,
    /// Probability of reordering.
    pub reorder: f64,
    /// Probability of duplication.
    pub duplicate: f64,
    /// Probability of corruption.
    pub corrupt: f64,
    /// Every host speaks IPv6 too (its address [`ipv6_of`] its IPv4 one),
    /// and the transfers run over IPv6.
    pub ipv6: bool,
    /// Every host's shard leaves TCP checksums for its device to finish
    /// ([`fairway_stack::Config::tx_checksum_offload`]), and the simulated
    /// NIC finishes them before the link (which may then corrupt them).
    pub checksum_offload: bool,
}

impl IntegrityParams {
    /// The issue's figures: 1,000 transfers up to 4 MB; 5 % loss, 5 %
    /// reordering, 1 % duplication, 1 % corruption.
    pub fn issue() -> IntegrityParams {
        IntegrityParams {
            transfers: 1000,
            max_size: 4 << 20,
            concurrency: 50,
            loss: 0.05,
            reorder: 0.05,
            duplicate: 0.01,
            corrupt: 0.01,
            ipv6: false,
            checksum_offload: false,
        }
    }
}

/// Transfer sizes from 1 B to `max`, log-uniform so every order of
/// magnitude is exercised, always including both ends.
pub fn transfer_sizes(seed: u64, n: usize, max: u64) -> Vec<u64> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let ln_max = (max as f64).ln();
    (0..n)
        .map(|i| match i {
            0 => 1,
            1 => max,
            _ => ((rng.random::<f64>() * ln_max).exp() as u64).clamp(1, max),
        })
        .collect()
}

/// Many transfers of random sizes, both directions, over a hostile link.
pub fn integrity(seed: u64, p: &IntegrityParams) -> Report {
    let link = LinkConfig::ideal()
        .with_delay(Duration::from_millis(2))
        .with_bandwidth_mbps(1000)
        .with_queue_bytes(1_000_000)
        .with_loss(p.loss)
        .with_reorder(p.reorder, Duration::from_millis(3))
        .with_duplicate(p.duplicate)
        .with_corrupt(p.corrupt);
    let mut world = World::new(seed, 1500, link, link);
    let dual = |mut cfg: fairway_stack::Config| {
        cfg.tx_checksum_offload = p.checksum_offload;
        if p.ipv6 {
            let ip6 = ipv6_of(cfg.ip);
            cfg.ipv6 =
                Some(fairway_stack::Ipv6Config { dad_transmits: 0, ..fairway_stack::Ipv6Config::new(vec![(ip6, 64)]) });
        }
        cfg
    };
    let server = world.add_host(Side::Right, dual(world.config_for(SERVER_IP)), LinkConfig::ideal());
    let clients: Vec<usize> = (0..4)
        .map(|i| {
            let mut cfg = dual(world.config_for(client_ip(i)));
            cfg.tcp.ephemeral_ports = (10_000, 60_000);
            world.add_host(Side::Left, cfg, LinkConfig::ideal().with_delay(Duration::from_micros(100 * i as u64)))
        })
        .collect();
    let sizes = transfer_sizes(seed, p.transfers, p.max_size);
    let specs = sizes
        .iter()
        .enumerate()
        .map(|(i, &size)| TransferSpec {
            id: i as u64 + 1,
            size,
            direction: if i % 2 == 0 { Direction::Download } else { Direction::Upload },
            client: clients[i % clients.len()],
        })
        .collect();
    let target = if p.ipv6 {
        core::net::SocketAddr::new(ipv6_of(SERVER_IP).into(), SERVER_PORT)
    } else {
        core::net::SocketAddr::from(SocketAddrV4::new(SERVER_IP, SERVER_PORT))
    };
    let mut app = Transfers::new(server, target, specs, p.concurrency);
    let stop = world.run(&mut app, Instant::from_secs(4 * 3600), 500_000_000);
    let summary = Summary::of(&app.results);
    let mut lines = vec![
        format!("scenario integrity, seed {seed}"),
        format!(
            "link: 1000 Mbit/s, RTT 4 ms, loss {:.0} %, reorder {:.0} %, duplicate {:.0} %, corrupt {:.0} %",
            p.loss * 100.0,
            p.reorder * 100.0,
            p.duplicate * 100.0,
            p.corrupt * 100.0
        ),
        format!("{:<28}{:>14}", "transfers", p.transfers),
        format!("{:<28}{:>14}", "bytes", summary.bytes),
        format!("{:<28}{:>14}", "virtual time", summary.span.to_string()),
        format!("{:<28}{:>14}", "completion p99", summary.completion_quantile(0.99).to_string()),
    ];
    push_shard_rows(&mut lines, &world, server);
    let stats = world.net.stats();
    lines.push(format!("{:<28}{:>14}", "frames corrupted", stats.total.corrupted));
    lines.push(format!("{:<28}{:>14}", "frames duplicated", stats.total.duplicated));
    lines.push(format!("{:<28}{:>14}", "frames reordered", stats.total.reordered));
    lines.push(format!("{:<28}{:>14}", "frames lost", stats.total.lost));
    let failures: Vec<_> = app.results.iter().filter(|r| !r.intact()).take(5).collect();
    for f in &failures {
        lines.push(format!("failed: {:?}", f));
    }
    if stop != Stop::Done {
        lines.push(format!("run stopped early: {stop:?}"));
    }
    let ok = stop == Stop::Done && summary.intact == summary.total;
    lines.push(format!(
        "sim: {}/{} transfers intact, goodput {:.1} Mbit/s on a 1000 Mbit/s link ({:.1} %), p99 completion {} ms",
        summary.intact,
        summary.total,
        summary.goodput_mbps(),
        summary.goodput_mbps() / 10.0,
        summary.completion_quantile(0.99).total_millis()
    ));
    Report { lines, ok }
}

/// Reads the process's net heap bytes from the counting allocator, if the
/// binary installed `stats_alloc::INSTRUMENTED_SYSTEM` as its global allocator.
pub fn read_net_heap_bytes() -> i64 {
    let s = stats_alloc::INSTRUMENTED_SYSTEM.stats();
    s.bytes_allocated as i64 - s.bytes_deallocated as i64 + s.bytes_reallocated as i64
}

/// Clients that each open their share of `total` connections and hold them.
struct ManyIdle {
    server: usize,
    listener: Option<Listener>,
    per_client: usize,
    clients: usize,
    /// Connections opened by each client.
    opened: Vec<usize>,
    /// Connections each client saw complete.
    connected: Vec<usize>,
    accepted: Vec<Handle>,
    failures: usize,
    /// The server's address, of the family the run speaks.
    target: core::net::SocketAddr,
}

impl SimApp for ManyIdle {
    fn on_host(&mut self, host: usize, shard: &mut Shard, now: Instant) {
        if host == self.server {
            let l = *self.listener.get_or_insert_with(|| {
                shard.listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, SERVER_PORT)).expect("listen")
            });
            while let Some(event) = shard.poll_event() {
                if let Event::Acceptable(_) = event {
                    while let Some(h) = shard.accept(l) {
                        self.accepted.push(h);
                    }
                } else if let Event::Error(..) = event {
                    self.failures += 1;
                }
            }
            return;
        }
        let c = host - 1;
        while let Some(event) = shard.poll_event() {
            match event {
                Event::Connected(_) => self.connected[c] += 1,
                Event::Error(..) => self.failures += 1,
                _ => {}
            }
        }
        // One connection first, so ARP is resolved before the flood.
        let target = if self.connected[c] == 0 { 1 } else { self.per_client };
        while self.opened[c] < target {
            match shard.connect(now, self.target) {
                Ok(_) => self.opened[c] += 1,
                Err(_) => {
                    self.failures += 1;
                    break;
                }
            }
        }
    }

    fn done(&self) -> bool {
        self.accepted.len() == self.per_client * self.clients
            && self.connected.iter().sum::<usize>() == self.accepted.len()
    }
}

/// Opens `total` connections to one shard and measures what the shard holds
/// per idle connection, by the heap bytes allocated during its calls.
pub fn c100k(seed: u64, total: usize, heap: fn() -> i64) -> Result<Report, String> {
    idle_connections(seed, total, heap, false)
}

/// [`c100k`] over IPv6: every host dual-stack, the connections to the
/// server's IPv6 address.
///
/// # Errors
///
/// As [`c100k`].
pub fn c100k6(seed: u64, total: usize, heap: fn() -> i64) -> Result<Report, String> {
    idle_connections(seed, total, heap, true)
}

/// `total` idle connections to one shard, over IPv6 when `ipv6`.
fn idle_connections(seed: u64, total: usize, heap: fn() -> i64, ipv6: bool) -> Result<Report, String> {
    let name = if ipv6 { "c100k6" } else { "c100k" };
    let dual = |mut cfg: fairway_stack::Config| {
        if ipv6 {
            let ip6 = ipv6_of(cfg.ip);
            cfg.ipv6 =
                Some(fairway_stack::Ipv6Config { dad_transmits: 0, ..fairway_stack::Ipv6Config::new(vec![(ip6, 64)]) });
        }
        cfg
    };
    let target = if ipv6 {
        core::net::SocketAddr::new(ipv6_of(SERVER_IP).into(), SERVER_PORT)
    } else {
        core::net::SocketAddr::from(SocketAddrV4::new(SERVER_IP, SERVER_PORT))
    };
    let clients = total.div_ceil(50_000).max(2);
    let per_client = total / clients;
    let total = per_client * clients;
    let mut world = World::new(seed, 1500, LinkConfig::ideal(), LinkConfig::ideal());
    let mut cfg = dual(world.config_for(SERVER_IP));
    cfg.limits.syn_backlog = total;
    cfg.limits.accept_backlog = total;
    let before = heap();
    let server = world.add_host(Side::Right, cfg, LinkConfig::ideal());
    let created = heap() - before;
    for i in 0..clients {
        let mut cfg = dual(world.config_for(client_ip(i)));
        cfg.tcp.ephemeral_ports = (1024, 65535);
        world.add_host(Side::Left, cfg, LinkConfig::ideal().with_delay(Duration::from_micros(50)));
    }
    let mut app = ManyIdle {
        server,
        listener: None,
        per_client,
        clients,
        opened: vec![0; clients],
        connected: vec![0; clients],
        accepted: Vec::with_capacity(total),
        failures: 0,
        target,
    };
    world.meter = Some(Meter { host: server, read: heap, bytes: created });
    let stop = world.run(&mut app, Instant::from_secs(600), 10_000_000);
    let bytes = world.meter.map(|m| m.bytes).unwrap_or(0);
    if bytes <= 0 {
        return Err(format!("{name} needs the counting allocator: run it through the fairway-sim binary"));
    }
    let shard = &world.hosts[server].shard;
    let established = app.accepted.len();
    let per_conn = bytes as f64 / established.max(1) as f64;
    let mut lines = vec![format!("scenario {name}, seed {seed}")];
    let _ = write!(lines.last_mut().unwrap(), ", {clients} clients x {per_client} connections");
    lines.push(format!("{:<36}{:>14}", "connections accepted by the server", established));
    lines.push(format!("{:<36}{:>14}", "server connection table", shard.connection_count()));
    lines.push(format!("{:<36}{:>14}", "server heap bytes (net)", bytes));
    lines.push(format!("{:<36}{:>14}", "virtual time", world.now().to_string()));
    lines.push(format!("{:<36}{:>14}", "failures", app.failures));
    lines.push(format!("{:<36}{:>14}", "server drops (all reasons)", shard.counters().total_dropped()));
    let ok = stop == Stop::Done && established == total && app.failures == 0 && per_conn <= 1024.0;
    if stop != Stop::Done {
        lines.push(format!("run stopped early: {stop:?}"));
    }
    lines.push(format!(
        "{name}: {established} connections established, {:.0} bytes of stack state per idle connection",
        per_conn
    ));
    Ok(Report { lines, ok })
}
