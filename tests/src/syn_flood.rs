//! A SYN flood (RFC 4987) against the server while legitimate clients
//! connect and download.
//!
//! An attacker host on the clients' side of the bottleneck sends spoofed
//! SYNs to the server's listening port: source addresses drawn at random
//! from 10.0.0.0/8 (never a real host's, never the subnet's network or
//! broadcast address), random source ports and initial sequence numbers,
//! half of them with the options a real stack offers (MSS, window scale,
//! SACK, timestamps) so SYN cookies have options to encode, and the
//! attacker's own MAC address: spoofing IP addresses, not the link. Nothing
//! ever answers the server's SYN-ACKs. The flood is sent in 1 ms batches
//! over `flood_duration`; meanwhile the legitimate clients start their
//! transfers one by one, every one of them inside the flood.
//!
//! What is checked:
//! - every legitimate transfer completes, SHA-256 intact, within `deadline`
//!   of the flood's start. Without a defence the SYN queue stays full of
//!   spoofed entries until their SYN-ACK retries run out (about 63 s), and a
//!   client that only gets in after that has been denied service; with SYN
//!   cookies it connects at once;
//! - the server never holds more connections than its SYN-queue limit plus
//!   the legitimate ones (sampled at every step);
//! - the server's heap stays under [`SynFloodResult::heap_bound`]: what the
//!   connections allowed above may need (1 KiB of state each, the c100k
//!   budget, plus the legitimate ones' buffers) and 2 MiB for the fixed
//!   structures, a few times less than the ~49 MB that keeping state for
//!   all 100,000 SYNs would take (489 B each, as c100k measures).

use core::net::{Ipv4Addr, SocketAddrV4};

use fairway_nic::sim::{LinkConfig, Side};
use fairway_stack::time::{Duration, Instant};
use fairway_stack::{DropReason, Shard};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

use crate::forge::{Control, Segment};
use crate::scenario::{Report, SERVER_IP, SERVER_PORT, client_ip};
use crate::transfers::{Summary, TransferSpec, Transfers};
use crate::world::{Meter, SimApp, Stop, World};

/// The attacker's own address.
pub const ATTACKER_IP: Ipv4Addr = Ipv4Addr::new(10, 2, 0, 1);

/// Batches of forged frames are sent this often.
const SLICE: Duration = Duration::from_millis(1);

/// Room the heap bound leaves for the shard's fixed structures (timer
/// wheel, pools, ARP cache, flow table growth) and the application's maps.
const FIXED_HEAP_ALLOWANCE: usize = 2 << 20;

/// The c100k budget of stack state per connection.
const STATE_PER_CONNECTION: usize = 1024;

/// The flood and the legitimate load.
#[derive(Clone, Debug)]
pub struct SynFloodParams {
    /// Spoofed SYNs sent.
    pub spoofed_syns: usize,
    /// When the flood starts.
    pub flood_start: Instant,
    /// How long it lasts.
    pub flood_duration: Duration,
    /// Legitimate transfers (one connection each).
    pub legitimate: usize,
    /// Hosts they come from.
    pub client_hosts: usize,
    /// Bytes each downloads.
    pub size: u64,
    /// The first legitimate transfer starts this long after the flood does.
    pub first_client_after: Duration,
    /// Time between two legitimate starts.
    pub client_spacing: Duration,
    /// Every legitimate transfer must be done this long after the flood starts.
    pub deadline: Duration,
    /// The server's SYN-queue limit (`Limits::syn_backlog`).
    pub syn_backlog: usize,
}

impl SynFloodParams {
    /// The issue's figures: 100,000 spoofed SYNs in 1 s; 100 clients each
    /// downloading 64 KiB, starting every 5 ms from 200 ms into the flood;
    /// all done within 10 s; the default SYN queue of 1,024.
    pub fn issue() -> SynFloodParams {
        SynFloodParams {
            spoofed_syns: 100_000,
            flood_start: Instant::from_millis(100),
            flood_duration: Duration::from_secs(1),
            legitimate: 100,
            client_hosts: 100,
            size: 64 * 1024,
            first_client_after: Duration::from_millis(200),
            client_spacing: Duration::from_millis(5),
            deadline: Duration::from_secs(10),
            syn_backlog: fairway_stack::Limits::default().syn_backlog,
        }
    }
}

/// What a SYN flood run measured.
#[derive(Clone, Debug)]
pub struct SynFloodResult {
    /// The parameters.
    pub params: SynFloodParams,
    /// Legitimate transfers complete and intact.
    pub intact: usize,
    /// Why the run ended.
    pub stop: Stop,
    /// The most connections the server held at once.
    pub peak_connections: usize,
    /// The most it may hold: SYN-queue limit plus the legitimate ones.
    pub connection_bound: usize,
    /// The server's largest net heap bytes, sampled every millisecond (0
    /// when no counting allocator is installed).
    pub peak_heap: i64,
    /// The most it may use.
    pub heap_bound: i64,
    /// The report.
    pub lines: Vec<String>,
}

impl SynFloodResult {
    /// Every check held.
    pub fn ok(&self) -> bool {
        self.intact == self.params.legitimate
            && self.peak_connections <= self.connection_bound
            && self.peak_heap <= self.heap_bound
    }

    /// The report, verdict last.
    pub fn report(&self) -> Report {
        Report { lines: self.lines.clone(), ok: self.ok() }
    }
}

/// The legitimate workload, watched: the peak of the server's connection
/// table, and not done before the flood is over (so time keeps moving while
/// the attacker still sends).
struct Watched {
    transfers: Transfers,
    server: usize,
    peak_connections: usize,
    flood_over: bool,
}

impl SimApp for Watched {
    fn on_host(&mut self, host: usize, shard: &mut Shard, now: Instant) {
        self.transfers.on_host(host, shard, now);
        if host == self.server {
            self.peak_connections = self.peak_connections.max(shard.connection_count());
        }
    }

    fn done(&self) -> bool {
        self.flood_over && self.transfers.done()
    }

    fn next_wakeup(&self) -> Option<Instant> {
        self.transfers.next_wakeup()
    }
}

/// A random spoofed source: in 10.0.0.0/8, not a host of `world`, not the
/// subnet's network or broadcast address.
fn spoofed_source(rng: &mut Xoshiro256PlusPlus, world: &World) -> Ipv4Addr {
    loop {
        let ip = Ipv4Addr::from_bits(0x0a00_0000 | (rng.random::<u32>() & 0x00ff_ffff));
        let host_byte = ip.octets()[3];
        if host_byte != 0 && ip != Ipv4Addr::new(10, 255, 255, 255) && !world.hosts.iter().any(|h| h.ip == ip) {
            return ip;
        }
    }
}

/// Runs the flood; `heap` reads the process's net heap bytes (see
/// [`crate::scenario::read_net_heap_bytes`]).
pub fn syn_flood(seed: u64, p: &SynFloodParams, heap: fn() -> i64) -> SynFloodResult {
    let bottleneck =
        LinkConfig::ideal().with_delay(Duration::from_millis(5)).with_bandwidth_mbps(1000).with_queue_bytes(1_000_000);
    let mut world = World::new(seed, 1500, bottleneck, bottleneck);
    let mut server_cfg = world.config_for(SERVER_IP);
    server_cfg.limits.syn_backlog = p.syn_backlog;
    let (rx_buffer, tx_buffer) = (server_cfg.tcp.rx_buffer, server_cfg.tcp.tx_buffer);
    let before = heap();
    let server = world.add_host(Side::Right, server_cfg, LinkConfig::ideal());
    let created = heap() - before;
    let access = LinkConfig::ideal().with_delay(Duration::from_micros(100));
    let clients: Vec<usize> =
        (0..p.client_hosts).map(|i| world.add_host(Side::Left, world.config_for(client_ip(i)), access)).collect();
    let attacker = world.add_host(Side::Left, world.config_for(ATTACKER_IP), access);
    let attacker_mac = World::mac_of(ATTACKER_IP);
    let server_mac = World::mac_of(SERVER_IP);

    let specs = TransferSpec::downloads(p.legitimate, p.size, &clients);
    let transfers = Transfers::new(server, SocketAddrV4::new(SERVER_IP, SERVER_PORT), specs, p.legitimate)
        .with_schedule(p.flood_start + p.first_client_after, p.client_spacing);
    let mut app = Watched { transfers, server, peak_connections: 0, flood_over: false };
    world.meter = Some(Meter { host: server, read: heap, bytes: created });
    let mut peak_heap = created;
    let mut sample_heap = |world: &World| {
        if let Some(m) = world.meter {
            peak_heap = peak_heap.max(m.bytes);
        }
    };

    // Before the flood: the server listens, ARP settles.
    const MAX_STEPS: u64 = 100_000_000;
    world.run(&mut app, p.flood_start, MAX_STEPS);
    sample_heap(&world);

    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0x5f10_0d00);
    let slices = (p.flood_duration.total_micros() / SLICE.total_micros()).max(1) as usize;
    let mut frame = Vec::with_capacity(128);
    let mut sent = 0;
    let mut refused = 0;
    for slice in 0..slices {
        // An even share per slice, the remainder spread over the first ones.
        let n = p.spoofed_syns / slices + usize::from(slice < p.spoofed_syns % slices);
        for _ in 0..n {
            let src = SocketAddrV4::new(spoofed_source(&mut rng, &world), rng.random_range(1024..=u16::MAX));
            let full_options = rng.random::<bool>();
            let syn = Segment {
                control: Control::Syn,
                seq: rng.random(),
                window: 64_240,
                mss: Some(1460),
                window_scale: full_options.then_some(7),
                sack_permitted: full_options,
                timestamp: full_options.then(|| (rng.random(), 0)),
                ..Segment::new(attacker_mac, server_mac, src, SocketAddrV4::new(SERVER_IP, SERVER_PORT))
            };
            syn.write(&mut frame);
            if world.transmit_raw(attacker, &frame) {
                sent += 1;
            } else {
                refused += 1;
            }
        }
        let until = p.flood_start + SLICE.saturating_mul(slice as u64 + 1);
        world.run(&mut app, until, MAX_STEPS);
        sample_heap(&world);
    }
    app.flood_over = true;

    // The legitimate transfers finish, or the deadline passes.
    let deadline = p.flood_start + p.deadline;
    let mut stop = Stop::TimeLimit;
    while world.now() < deadline {
        let until = (world.now() + Duration::from_millis(10)).min(deadline);
        stop = world.run(&mut app, until, MAX_STEPS);
        sample_heap(&world);
        if stop != Stop::TimeLimit {
            break;
        }
    }

    let summary = Summary::of(&app.transfers.results);
    let shard = &world.hosts[server].shard;
    let c = shard.counters();
    let connection_bound = p.syn_backlog + p.legitimate;
    let heap_bound = (FIXED_HEAP_ALLOWANCE
        + connection_bound * STATE_PER_CONNECTION
        + p.legitimate * (rx_buffer + tx_buffer)) as i64;
    let net = world.net.stats();
    let attacker_rx = net.hosts[world.hosts[attacker].id.index()].downlink.frames_delivered;
    let row = |name: &str, value: String| format!("{name:<44}{value:>16}");
    let mut lines = vec![
        format!("scenario syn-flood, seed {seed}"),
        format!(
            "{} spoofed SYNs in {} from {} ms; {} clients each download {} B, starting every {} from {} ms",
            p.spoofed_syns,
            p.flood_duration,
            p.flood_start.total_millis(),
            p.legitimate,
            p.size,
            p.client_spacing,
            (p.flood_start + p.first_client_after).total_millis()
        ),
        "path: 1000 Mbit/s bottleneck, RTT 10 ms, queue 1 MB; the attacker shares the clients' side".to_string(),
        row("spoofed SYNs sent", sent.to_string()),
        row("legitimate transfers intact", format!("{}/{}", summary.intact, summary.total)),
        row("legitimate completion p50", summary.completion_quantile(0.5).to_string()),
        row("legitimate completion p99", summary.completion_quantile(0.99).to_string()),
        row("legitimate connection errors", app.transfers.connection_errors.to_string()),
        row("server connections, peak", format!("{} (bound {connection_bound})", app.peak_connections)),
        row("server connections at the end", shard.connection_count().to_string()),
        row("server heap bytes, peak", format!("{peak_heap} (bound {heap_bound})")),
        row("server connections established", c.established.to_string()),
        row("server SYNs refused: SYN queue full", c.dropped(DropReason::TcpSynQueueFull).to_string()),
        row("server SYNs refused: connection limit", c.dropped(DropReason::TcpConnectionLimit).to_string()),
        row("server SYN cookies sent", c.syn_cookies_sent.to_string()),
        row("server connections restored from a cookie", c.syn_cookies_accepted.to_string()),
        row("server segments out", c.segments_out.to_string()),
        row("server retransmits", c.retransmits.to_string()),
        row("frames the attacker received (SYN-ACKs)", attacker_rx.to_string()),
        row("bottleneck queue drops", (net.left_to_right.queue_drops + net.right_to_left.queue_drops).to_string()),
    ];
    if refused > 0 {
        lines.push(row("forged frames the network refused", refused.to_string()));
    }
    for (reason, n) in c.drops().filter(|&(_, n)| n > 0) {
        lines.push(row(&format!("server drops: {}", reason.label()), n.to_string()));
    }
    for f in app.transfers.results.iter().filter(|r| !r.intact()).take(5) {
        lines.push(format!("failed: {f:?}"));
    }
    if stop != Stop::Done {
        lines.push(format!("legitimate transfers not all done {} after the flood started ({stop:?})", p.deadline));
    }
    lines.push(format!(
        "syn-flood: {}/{} legitimate transfers intact during {} spoofed SYNs; peak {} connections (bound {}), \
         peak server heap {:.1} MB (bound {:.1} MB)",
        summary.intact,
        summary.total,
        sent,
        app.peak_connections,
        connection_bound,
        peak_heap as f64 / 1e6,
        heap_bound as f64 / 1e6
    ));
    SynFloodResult {
        params: p.clone(),
        intact: summary.intact,
        stop,
        peak_connections: app.peak_connections,
        connection_bound,
        peak_heap,
        heap_bound,
        lines,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn no_heap() -> i64 {
        0
    }

    /// The harness itself: with a flood the SYN queue absorbs (or none),
    /// every legitimate client gets through and state stays in bounds.
    #[test]
    fn a_flood_the_syn_queue_absorbs_denies_nothing() {
        for spoofed_syns in [0, 500] {
            let p = SynFloodParams { spoofed_syns, legitimate: 20, ..SynFloodParams::issue() };
            let r = syn_flood(3, &p, no_heap);
            assert!(r.ok(), "{}", r.lines.join("\n"));
            assert_eq!(r.intact, 20);
            assert!(r.peak_connections >= spoofed_syns, "{}", r.lines.join("\n"));
            let verdict = format!("syn-flood: 20/20 legitimate transfers intact during {spoofed_syns} ");
            assert!(r.report().last_line().starts_with(&verdict), "{}", r.report().last_line());
        }
    }

    #[test]
    fn spoofed_sources_avoid_real_hosts_and_special_addresses() {
        let mut world = World::new(1, 1500, LinkConfig::ideal(), LinkConfig::ideal());
        world.add_host(Side::Right, world.config_for(SERVER_IP), LinkConfig::ideal());
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(5);
        for _ in 0..10_000 {
            let ip = spoofed_source(&mut rng, &world);
            assert_eq!(ip.octets()[0], 10);
            assert_ne!(ip, SERVER_IP);
            assert_ne!(ip.octets()[3], 0);
        }
    }
}
