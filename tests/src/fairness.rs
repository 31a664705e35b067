//! The fairness experiment on the simulated network: N clients with access
//! RTTs from 4 to 256 ms behind one drop-tail bottleneck, all uploading to
//! the server or all downloading from it, with a window-control policy on
//! the server's shard (`cargo xtask lab fairness`, and `tests/fairness.rs`).
//!
//! # A cell
//!
//! The server sits on the right of the dumbbell with an ideal access link;
//! client *i* sits on the left behind an access link whose one-way delay is
//! half its RTT, so the bottleneck (no propagation delay, a drop-tail queue
//! of [`Params::queue_ms`] of its capacity each way) is the one link they
//! share. RTTs are spread geometrically from 4 to 256 ms (N = 1: 256 ms).
//! Every flow is one endless connection; the senders (the clients for
//! uploads, the server for downloads) run the cell's congestion control,
//! and the clients are plain stacks with no caps. The server runs the
//! policy through a [`Driver`] with the bottleneck's capacity configured.
//!
//! Every flow but the longest-RTT one starts at once; that one joins at
//! [`Params::join_at`], and its convergence time is how long after its
//! `connect` its goodput over the last [`Params::convergence_window`] first
//! reaches 90 % of an equal share of what all flows delivered in the
//! measurement window. Goodput, Jain's index, utilisation and queueing
//! delay are measured over [`Params::measure`] after
//! [`Params::measure_from`].
//!
//! - **goodput**: bytes the receiving application read;
//! - **utilisation**: bytes the bottleneck's data direction carried (the
//!   whole frames: what a link's capacity counts) over its capacity;
//! - **queueing delay**: the mean over flows and samples (every
//!   [`Params::sample_every`]) of SRTT − min-RTT as the sender sees it;
//!   also the bottleneck queue itself, in milliseconds of its capacity.
//!
//! Each flow's goodput over time (every [`Params::trace_every`], from the
//! start) is kept too, for the charts [`write_charts`] draws.

use core::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::path::Path;
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use fairway_nic::sim::{LinkConfig, LinkId, Side};
use fairway_stack::Algorithm;
use fairway_stack::fairness::{Capacity, Direction, Driver, DriverConfig, Policy, jain_index};
use fairway_stack::time::{Duration, Instant};
use fairway_stack::{Event, Handle, Listener, RecvError, SendError, Shard};

use crate::plot::{self, Panel, Series};
use crate::scenario::{SERVER_IP, SERVER_PORT, client_ip};
use crate::world::{SimApp, Stop, World};

const MTU: usize = 1500;
const ID_LEN: usize = 8;
/// Buffers of the sending and receiving ends: more than the largest BDP
/// plus queue (100 Mbit/s × (256 ms + 100 ms) = 4.5 MB), so without a
/// policy nothing but congestion control limits a flow.
const BUFFER: usize = 8 * 1024 * 1024;
const SMALL_BUFFER: usize = 64 * 1024;

/// The shortest and longest RTT of the spread.
pub const MIN_RTT_MS: f64 = 4.0;
/// See [`MIN_RTT_MS`].
pub const MAX_RTT_MS: f64 = 256.0;

/// The timing of every cell.
#[derive(Clone, Copy, Debug)]
pub struct Params {
    /// When the longest-RTT flow connects.
    pub join_at: Duration,
    /// Start of the measurement window.
    pub measure_from: Duration,
    /// Length of the measurement window.
    pub measure: Duration,
    /// How often queueing delay and goodput are sampled.
    pub sample_every: Duration,
    /// The window goodput is averaged over for convergence.
    pub convergence_window: Duration,
    /// The interval of each flow's goodput-over-time trace (rounded up to
    /// a multiple of [`Params::sample_every`]).
    pub trace_every: Duration,
    /// The bottleneck's drop-tail queue, in milliseconds of its capacity.
    pub queue_ms: u64,
    /// Which family the flows speak.
    pub families: Families,
    /// How the server's connections start (the stack's default, `Off`,
    /// unless a test asks for careful resume).
    pub fast_start: fairway_stack::FastStart,
}

/// Which IP family the flows of a cell speak.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Families {
    /// Every flow over IPv4 (the hosts speak IPv4 only).
    Ipv4,
    /// Every flow over IPv6 (every host dual-stack).
    Ipv6,
    /// Even flows over IPv4, odd ones over IPv6.
    Mixed,
}

impl Families {
    /// Flow `i`'s server address.
    fn target(self, i: usize) -> SocketAddr {
        let v6 = match self {
            Families::Ipv4 => false,
            Families::Ipv6 => true,
            Families::Mixed => i % 2 == 1,
        };
        if v6 {
            SocketAddr::new(crate::scenario::ipv6_of(SERVER_IP).into(), SERVER_PORT)
        } else {
            SocketAddr::from(SocketAddrV4::new(SERVER_IP, SERVER_PORT))
        }
    }
}

impl Params {
    /// The lab's timing: the newcomer joins at 3 s; 20 s measured from 8 s.
    pub fn lab() -> Params {
        Params {
            join_at: Duration::from_secs(3),
            measure_from: Duration::from_secs(8),
            measure: Duration::from_secs(20),
            sample_every: Duration::from_millis(10),
            convergence_window: Duration::from_millis(500),
            trace_every: Duration::from_millis(500),
            queue_ms: 100,
            families: Families::Ipv4,
            fast_start: fairway_stack::FastStart::Off,
        }
    }

    /// A shorter run for the tests: 10 s measured from 6 s.
    pub fn quick() -> Params {
        Params { measure_from: Duration::from_secs(6), measure: Duration::from_secs(10), ..Params::lab() }
    }
}

/// One cell of the grid.
#[derive(Clone, Debug)]
pub struct Cell {
    /// Bottleneck bandwidth, Mbit/s.
    pub bandwidth_mbps: u64,
    /// Number of clients (one flow each).
    pub n: usize,
    /// Uploads or downloads.
    pub direction: Direction,
    /// The senders' congestion control.
    pub cc: Algorithm,
    /// `off`, `seed` or `equal-rate`.
    pub policy: &'static str,
}

impl Cell {
    /// "20M N=4 up cubic equal-rate"
    pub fn name(&self) -> String {
        format!(
            "{}M N={} {} {} {}",
            self.bandwidth_mbps,
            self.n,
            dir_name(self.direction),
            cc_name(self.cc),
            self.policy
        )
    }

    /// "20M-N4-up-cubic-equal-rate": [`Cell::name`] for a file name.
    pub fn slug(&self) -> String {
        self.name().replace("N=", "N").replace(' ', "-")
    }
}

/// "up" / "down".
pub fn dir_name(d: Direction) -> &'static str {
    match d {
        Direction::Upload => "up",
        Direction::Download => "down",
    }
}

/// "cubic" / "reno".
pub fn cc_name(cc: Algorithm) -> &'static str {
    match cc {
        Algorithm::Cubic => "cubic",
        Algorithm::Reno => "reno",
    }
}

/// The access RTTs of `n` clients: geometric from 4 to 256 ms (256 ms alone).
pub fn rtts(n: usize) -> Vec<Duration> {
    if n <= 1 {
        return vec![Duration::from_millis(MAX_RTT_MS as u64)];
    }
    (0..n)
        .map(|i| {
            let ms = MIN_RTT_MS * (MAX_RTT_MS / MIN_RTT_MS).powf(i as f64 / (n - 1) as f64);
            Duration::from_micros((ms * 1000.0).round() as u64)
        })
        .collect()
}

/// What a cell measured.
#[derive(Clone, Debug)]
pub struct CellResult {
    /// The cell.
    pub cell: Cell,
    /// Each flow's RTT, in client order (the last one joined late).
    pub rtts: Vec<Duration>,
    /// Each flow's goodput in the measurement window, Mbit/s.
    pub goodput_mbps: Vec<f64>,
    /// Each flow's goodput over time: `(seconds, Mbit/s)`, the goodput
    /// over each [`Params::trace_every`] at the interval's midpoint, from
    /// the flow's start to the end of the run.
    pub goodput_trace: Vec<Vec<(f64, f64)>>,
    /// Jain's index over the goodputs.
    pub jain: f64,
    /// Bottleneck bytes over capacity in the window, percent.
    pub utilisation: f64,
    /// Mean SRTT − min-RTT at the senders, ms.
    pub queueing_delay_ms: f64,
    /// Mean bottleneck queue, ms of its capacity.
    pub bottleneck_queue_ms: f64,
    /// Time from the late flow's connect to 90 % of its share, if reached.
    pub convergence: Option<Duration>,
    /// Packets the bottleneck dropped (both directions).
    pub drops: u64,
    /// Errors of any flow.
    pub errors: Vec<String>,
    /// Why the run ended.
    pub stop: Stop,
}

impl CellResult {
    /// Sum of goodputs, Mbit/s.
    pub fn total_goodput_mbps(&self) -> f64 {
        self.goodput_mbps.iter().sum()
    }
}

/// One flow, both ends.
struct Flow {
    client: usize,
    start: Instant,
    /// The server's address this flow connects to.
    target: SocketAddr,
    client_handle: Option<Handle>,
    server_handle: Option<Handle>,
    connected_at: Option<Instant>,
    /// Bytes the receiving application read.
    delivered: u64,
    error: Option<String>,
}

/// The server's view of a connection before its flow id arrived.
struct Pending {
    id: [u8; ID_LEN],
    len: usize,
}

/// The application: endless uploads or downloads, the policy on the server.
pub struct FairnessApp {
    server: usize,
    direction: Direction,
    flows: Vec<Flow>,
    listener: Option<Listener>,
    pending: Vec<(Handle, Pending)>,
    /// The policy's driver on the server's shard.
    pub driver: Driver,
    /// A capacity change the server applies at a time (for the tests).
    pub capacity_change: Option<(Instant, Capacity)>,
    buf: Vec<u8>,
    last_now: Instant,
}

impl FairnessApp {
    /// Flows from `clients` (host index, start time) in `direction`, under
    /// `driver` on the server host `server`.
    pub fn new(server: usize, direction: Direction, clients: &[(usize, Instant)], driver: Driver) -> FairnessApp {
        let flows = clients
            .iter()
            .map(|&(client, start)| Flow {
                client,
                start,
                target: Families::Ipv4.target(0),
                client_handle: None,
                server_handle: None,
                connected_at: None,
                delivered: 0,
                error: None,
            })
            .collect();
        FairnessApp {
            server,
            direction,
            flows,
            listener: None,
            pending: Vec::new(),
            driver,
            capacity_change: None,
            buf: vec![0; 64 * 1024],
            last_now: Instant::ZERO,
        }
    }

    /// The flows over `families` (over IPv4 until told).
    #[must_use]
    pub fn over(mut self, families: Families) -> FairnessApp {
        for (i, flow) in self.flows.iter_mut().enumerate() {
            flow.target = families.target(i);
        }
        self
    }

    /// Bytes each flow's receiver has read so far.
    pub fn delivered(&self) -> Vec<u64> {
        self.flows.iter().map(|f| f.delivered).collect()
    }

    /// The flow's handle on its sending side: (host, handle).
    pub fn sender(&self, flow: usize) -> Option<(usize, Handle)> {
        let f = &self.flows[flow];
        match self.direction {
            Direction::Upload => f.client_handle.filter(|_| f.connected_at.is_some()).map(|h| (f.client, h)),
            Direction::Download => f.server_handle.map(|h| (self.server, h)),
        }
    }

    /// The server's handle of a flow, once its id arrived.
    pub fn server_handle(&self, flow: usize) -> Option<Handle> {
        self.flows[flow].server_handle
    }

    /// Errors so far, one line each.
    pub fn errors(&self) -> Vec<String> {
        self.flows.iter().enumerate().filter_map(|(i, f)| f.error.as_ref().map(|e| format!("flow {i}: {e}"))).collect()
    }

    fn fail(&mut self, flow: usize, why: String) {
        self.flows[flow].error.get_or_insert(why);
    }

    fn on_server(&mut self, shard: &mut Shard, now: Instant) {
        let l = match self.listener {
            Some(l) => l,
            None => {
                let addr = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, SERVER_PORT);
                *self.listener.insert(shard.listen(addr).expect("listen"))
            }
        };
        while let Some(event) = shard.poll_event() {
            match event {
                Event::Acceptable(_) => {
                    while let Some(h) = shard.accept(l) {
                        self.pending.push((h, Pending { id: [0; ID_LEN], len: 0 }));
                        self.on_server_conn(shard, h, now);
                    }
                }
                Event::Readable(h) | Event::Writable(h) | Event::HangUp(h) => self.on_server_conn(shard, h, now),
                Event::Error(h, e) => {
                    if let Some(i) = self.flows.iter().position(|f| f.server_handle == Some(h)) {
                        self.fail(i, format!("server: {e}"));
                    }
                    shard.close(h);
                }
                Event::Connected(_) => {}
            }
        }
        if let Some((at, capacity)) = self.capacity_change
            && now >= at
        {
            self.driver.set_capacity(capacity);
            self.capacity_change = None;
        }
        if now >= self.driver.poll_at() {
            self.driver.run(now, shard);
        }
    }

    fn on_server_conn(&mut self, shard: &mut Shard, h: Handle, now: Instant) {
        if let Some(p) = self.pending.iter().position(|(ph, _)| *ph == h) {
            let (_, pending) = &mut self.pending[p];
            while pending.len < ID_LEN {
                match shard.recv(h, &mut pending.id[pending.len..]) {
                    Ok(0) | Err(_) => return,
                    Ok(n) => pending.len += n,
                }
            }
            let id = u64::from_be_bytes(pending.id) as usize;
            self.pending.swap_remove(p);
            if id >= self.flows.len() {
                shard.abort(h);
                return;
            }
            self.flows[id].server_handle = Some(h);
            self.driver.track(now, h, self.direction, 1.0);
        }
        let Some(flow) = self.flows.iter().position(|f| f.server_handle == Some(h)) else { return };
        match self.direction {
            Direction::Upload => self.drain(flow, shard, h),
            Direction::Download => self.fill(flow, shard, h),
        }
    }

    fn on_client(&mut self, host: usize, shard: &mut Shard, now: Instant) {
        for i in 0..self.flows.len() {
            let f = &self.flows[i];
            if f.client == host && f.client_handle.is_none() && f.error.is_none() && now >= f.start {
                match shard.connect(now, f.target) {
                    Ok(h) => self.flows[i].client_handle = Some(h),
                    Err(e) => self.fail(i, format!("connect: {e}")),
                }
            }
        }
        while let Some(event) = shard.poll_event() {
            let (Event::Connected(h) | Event::Readable(h) | Event::Writable(h) | Event::HangUp(h) | Event::Error(h, _)) =
                event
            else {
                continue;
            };
            let Some(flow) = self.flows.iter().position(|f| f.client == host && f.client_handle == Some(h)) else {
                continue;
            };
            match event {
                Event::Connected(_) => {
                    self.flows[flow].connected_at = Some(now);
                    if shard.send(h, &(flow as u64).to_be_bytes()) != Ok(ID_LEN) {
                        self.fail(flow, "the id did not fit".into());
                    }
                    if self.direction == Direction::Upload {
                        self.fill(flow, shard, h);
                    }
                }
                Event::Error(_, e) => self.fail(flow, format!("client: {e}")),
                _ => match self.direction {
                    Direction::Upload => self.fill(flow, shard, h),
                    Direction::Download => self.drain(flow, shard, h),
                },
            }
        }
    }

    /// Sends as much as the send buffer takes.
    fn fill(&mut self, flow: usize, shard: &mut Shard, h: Handle) {
        loop {
            match shard.send(h, &self.buf) {
                Ok(n) if n == self.buf.len() => {}
                Ok(_) | Err(SendError::WouldBlock) => return,
                Err(e) => return self.fail(flow, format!("send: {e}")),
            }
        }
    }

    /// Reads everything waiting.
    fn drain(&mut self, flow: usize, shard: &mut Shard, h: Handle) {
        loop {
            match shard.recv(h, &mut self.buf) {
                Ok(0) => return self.fail(flow, "the stream ended".into()),
                Ok(n) => self.flows[flow].delivered += n as u64,
                Err(RecvError::WouldBlock) => return,
                Err(e) => return self.fail(flow, format!("recv: {e}")),
            }
        }
    }
}

impl SimApp for FairnessApp {
    fn on_host(&mut self, host: usize, shard: &mut Shard, now: Instant) {
        self.last_now = self.last_now.max(now);
        if host == self.server {
            self.on_server(shard, now);
        } else {
            self.on_client(host, shard, now);
        }
    }

    fn done(&self) -> bool {
        false
    }

    fn next_wakeup(&self) -> Option<Instant> {
        let starts = self.flows.iter().filter(|f| f.client_handle.is_none()).map(|f| f.start);
        let change = self.capacity_change.map(|(at, _)| at);
        starts.chain(change).chain(Some(self.driver.poll_at())).filter(|&t| t > self.last_now).min()
    }
}

/// A world with the cell's topology: the server is host 0, clients 1..=n.
pub fn build_world(seed: u64, cell: &Cell, params: &Params) -> (World, Vec<Duration>) {
    let bps = cell.bandwidth_mbps * 1_000_000;
    let queue = (bps / 8 * params.queue_ms / 1000) as usize;
    let bottleneck = LinkConfig::ideal().with_bandwidth_bps(bps).with_queue_bytes(queue);
    let mut world = World::new(seed, MTU, bottleneck, bottleneck);
    let (server_tx, server_rx, client_tx, client_rx) = match cell.direction {
        Direction::Upload => (SMALL_BUFFER, BUFFER, BUFFER, SMALL_BUFFER),
        Direction::Download => (BUFFER, SMALL_BUFFER, SMALL_BUFFER, BUFFER),
    };
    let dual = |mut cfg: fairway_stack::Config| {
        if params.families != Families::Ipv4 {
            let ip6 = crate::scenario::ipv6_of(cfg.ip);
            cfg.ipv6 =
                Some(fairway_stack::Ipv6Config { dad_transmits: 0, ..fairway_stack::Ipv6Config::new(vec![(ip6, 64)]) });
        }
        cfg
    };
    let mut cfg = dual(world.config_for(SERVER_IP));
    cfg.tcp.congestion = cell.cc;
    cfg.tcp.tx_buffer = server_tx;
    cfg.tcp.rx_buffer = server_rx;
    cfg.tcp.fast_start = params.fast_start;
    world.add_host(Side::Right, cfg, LinkConfig::ideal());
    let rtts = rtts(cell.n);
    for (i, rtt) in rtts.iter().enumerate() {
        let mut cfg = dual(world.config_for(client_ip(i)));
        cfg.tcp.congestion = cell.cc;
        cfg.tcp.tx_buffer = client_tx;
        cfg.tcp.rx_buffer = client_rx;
        let access = LinkConfig::ideal().with_delay(Duration::from_micros(rtt.total_micros() / 2));
        world.add_host(Side::Left, cfg, access);
    }
    (world, rtts)
}

/// Runs one cell.
pub fn run_cell(seed: u64, cell: &Cell, params: &Params) -> CellResult {
    let (mut world, rtts) = build_world(seed, cell, params);
    let bps = cell.bandwidth_mbps * 1_000_000;
    let policy = Policy::from_name(cell.policy).unwrap_or_else(|| panic!("unknown policy {}", cell.policy));
    let driver = Driver::new(policy, DriverConfig::new(Capacity::Configured(bps)));
    let join = Instant::ZERO + params.join_at;
    let clients: Vec<(usize, Instant)> =
        (0..cell.n).map(|i| (i + 1, if i + 1 == cell.n { join } else { Instant::ZERO })).collect();
    let mut app = FairnessApp::new(0, cell.direction, &clients, driver).over(params.families);
    let data_link = LinkId::Bottleneck {
        from: match cell.direction {
            Direction::Upload => Side::Left,
            Direction::Download => Side::Right,
        },
    };

    let start = Instant::ZERO + params.measure_from;
    let end = start + params.measure;
    let late = cell.n - 1;
    // The late flow's delivered bytes at each sample since it joined.
    let mut late_trace: Vec<(Instant, u64)> = Vec::new();
    let mut at_start = (Vec::new(), 0u64);
    let (mut delay_sum, mut delay_n) = (0.0f64, 0u64);
    let (mut queue_sum, mut queue_n) = (0.0f64, 0u64);
    let mut goodput_trace: Vec<Vec<(f64, f64)>> = vec![Vec::new(); cell.n];
    let mut traced = (Instant::ZERO, vec![0u64; cell.n]);
    let mut stop = Stop::TimeLimit;
    let mut t = Instant::ZERO;
    while t < end {
        t += params.sample_every;
        stop = world.run(&mut app, t, u64::MAX);
        if !matches!(stop, Stop::TimeLimit | Stop::Idle) {
            break;
        }
        if t.saturating_since(traced.0) >= params.trace_every {
            let delivered = app.delivered();
            let secs = t.saturating_since(traced.0).as_secs_f64();
            let mid = (traced.0.total_micros() + t.total_micros()) as f64 / 2e6;
            for (f, trace) in goodput_trace.iter_mut().enumerate() {
                if t > clients[f].1 {
                    trace.push((mid, (delivered[f] - traced.1[f]) as f64 * 8.0 / secs / 1e6));
                }
            }
            traced = (t, delivered);
        }
        if t >= join {
            late_trace.push((t, app.delivered()[late]));
        }
        if t == start || (t > start && at_start.0.is_empty()) {
            at_start = (app.delivered(), world.net.link_stats(data_link).bytes_delivered);
        }
        if t > start {
            for f in 0..cell.n {
                let Some((host, h)) = app.sender(f) else { continue };
                let Some(s) = world.hosts[host].shard.flow(h) else { continue };
                if let (Some(srtt), Some(min)) = (s.srtt, s.min_rtt) {
                    delay_sum += srtt.saturating_sub(min).as_secs_f64() * 1000.0;
                    delay_n += 1;
                }
            }
            let queued = world.net.queued_bytes(data_link) as f64;
            queue_sum += queued * 8.0 / bps as f64 * 1000.0;
            queue_n += 1;
        }
    }
    let secs = params.measure.as_secs_f64();
    let delivered = app.delivered();
    let goodput_mbps: Vec<f64> = delivered
        .iter()
        .zip(at_start.0.iter().chain(std::iter::repeat(&0)))
        .map(|(&now, &then)| (now - then) as f64 * 8.0 / secs / 1e6)
        .collect();
    let wire = world.net.link_stats(data_link).bytes_delivered - at_start.1;
    let utilisation = wire as f64 * 8.0 / secs / bps as f64 * 100.0;
    let share_bytes_per_sec = goodput_mbps.iter().sum::<f64>() * 1e6 / 8.0 / cell.n as f64;
    let convergence =
        convergence_time(&late_trace, join, params.sample_every, params.convergence_window, 0.9 * share_bytes_per_sec);
    let stats = world.net.stats();
    CellResult {
        cell: cell.clone(),
        rtts,
        jain: jain_index(&goodput_mbps),
        goodput_mbps,
        goodput_trace,
        utilisation,
        queueing_delay_ms: if delay_n > 0 { delay_sum / delay_n as f64 } else { 0.0 },
        bottleneck_queue_ms: if queue_n > 0 { queue_sum / queue_n as f64 } else { 0.0 },
        convergence,
        drops: stats.left_to_right.queue_drops + stats.right_to_left.queue_drops,
        errors: app.errors(),
        stop,
    }
}

/// The first time after `join` at which the bytes delivered over the last
/// `window` reach `rate` × `window`, as time since `join`. `trace` holds
/// samples taken every `every` from `join` on.
fn convergence_time(
    trace: &[(Instant, u64)],
    join: Instant,
    every: Duration,
    window: Duration,
    rate: f64,
) -> Option<Duration> {
    let k = (window.total_micros() / every.total_micros().max(1)) as usize;
    let need = rate * window.as_secs_f64();
    (k..trace.len()).find(|&j| (trace[j].1 - trace[j - k].1) as f64 >= need).map(|j| trace[j].0.saturating_since(join))
}

/// Runs each cell on up to `threads` threads; results in order.
pub fn run_cells(seed: u64, cells: &[Cell], params: &Params, threads: usize) -> Vec<CellResult> {
    let next = AtomicUsize::new(0);
    let results: Mutex<Vec<Option<CellResult>>> = Mutex::new(vec![None; cells.len()]);
    std::thread::scope(|s| {
        for _ in 0..threads.clamp(1, cells.len().max(1)) {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(cell) = cells.get(i) else { break };
                    let r = run_cell(seed, cell, params);
                    results.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(r);
                }
            });
        }
    });
    let results = results.into_inner().unwrap_or_else(|e| e.into_inner());
    results.into_iter().map(|r| r.expect("every cell ran: a worker panicked")).collect()
}

/// The policies, in table order.
pub const POLICIES: [&str; 3] = ["off", "seed", "equal-rate"];

/// The full grid: 20 and 100 Mbit/s × N = 1…10 × up/down × CUBIC/Reno × policies.
pub fn grid() -> Vec<Cell> {
    let mut cells = Vec::new();
    for bandwidth_mbps in [20, 100] {
        for direction in [Direction::Upload, Direction::Download] {
            for cc in [Algorithm::Cubic, Algorithm::Reno] {
                for n in 1..=10 {
                    for policy in POLICIES {
                        cells.push(Cell { bandwidth_mbps, n, direction, cc, policy });
                    }
                }
            }
        }
    }
    cells
}

/// A PNG chart beside the Markdown report, for its links.
#[derive(Clone, Debug, PartialEq)]
pub struct Chart {
    /// The file name, in the report's directory.
    pub file: String,
    /// What it shows, for the link's text.
    pub caption: String,
    /// Shown in the page, rather than as a link in the list below.
    pub inline: bool,
}

/// The Markdown lines that show `charts`: a "Charts" section with the
/// inline ones, then `intro` and a list linking the others (nothing
/// without charts).
#[must_use]
pub fn chart_lines(charts: &[Chart], intro: &str) -> Vec<String> {
    if charts.is_empty() {
        return Vec::new();
    }
    let mut lines = vec![String::new(), "## Charts".to_owned()];
    for chart in charts.iter().filter(|c| c.inline) {
        lines.push(String::new());
        lines.push(format!("![{}]({})", chart.caption, chart.file));
    }
    let linked: Vec<&Chart> = charts.iter().filter(|c| !c.inline).collect();
    if !linked.is_empty() {
        lines.push(String::new());
        lines.push(intro.to_owned());
        lines.push(String::new());
        lines.extend(linked.iter().map(|c| format!("- [{}]({})", c.caption, c.file)));
    }
    lines
}

/// Draws the grid's charts into `dir`, their names starting with `stem`
/// (`fairness-sim` gives `fairness-sim-jain.png`, and
/// `fairness-sim-goodput-<cell>.png`):
///
/// - Jain's index against N, a line per policy, a panel per bandwidth,
///   direction and sender;
/// - each flow's goodput over time in a few cells: the largest N, then
///   N = 2, at the lowest bandwidth, uploads and CUBIC where present
///   (every policy at the largest N, off and equal-rate at N = 2).
pub fn write_charts(dir: &Path, stem: &str, params: &Params, results: &[CellResult]) -> Result<Vec<Chart>, String> {
    let mut charts = Vec::new();
    let panels = jain_panels(results);
    if panels.iter().any(|p| !p.series.is_empty()) {
        let file = format!("{stem}-jain.png");
        let title = format!(
            "Jain's index of goodputs against N (RTTs {MIN_RTT_MS}–{MAX_RTT_MS} ms, {} s measured)",
            params.measure.as_secs_f64()
        );
        plot::jain_against_n_panels(&dir.join(&file), &title, &panels)?;
        charts.push(Chart { file, caption: "Jain's index against N, a line per policy".into(), inline: true });
    }
    for r in goodput_cells(results) {
        let file = format!("{stem}-goodput-{}.png", r.cell.slug());
        let title = format!(
            "Goodput per flow: {} Mbit/s, N = {}, {}, {}, policy {} ({} s bins)",
            r.cell.bandwidth_mbps,
            r.cell.n,
            if r.cell.direction == Direction::Upload { "uploads" } else { "downloads" },
            cc_name(r.cell.cc),
            r.cell.policy,
            params.trace_every.as_secs_f64(),
        );
        plot::goodput_over_time(&dir.join(&file), &title, &goodput_series(r, params))?;
        charts.push(Chart { file, caption: r.cell.name(), inline: false });
    }
    Ok(charts)
}

/// A panel per (bandwidth, direction, sender) in table order, a series
/// per policy: (N, J).
fn jain_panels(results: &[CellResult]) -> Vec<Panel> {
    let mut panels: Vec<((u64, Direction, Algorithm), Panel)> = Vec::new();
    for r in results {
        let key = (r.cell.bandwidth_mbps, r.cell.direction, r.cell.cc);
        if !panels.iter().any(|(k, _)| *k == key) {
            let title = format!(
                "{} Mbit/s, {}, {}",
                r.cell.bandwidth_mbps,
                if r.cell.direction == Direction::Upload { "uploads" } else { "downloads" },
                cc_name(r.cell.cc)
            );
            panels.push((key, Panel { title, series: Vec::new() }));
        }
    }
    for (key, panel) in &mut panels {
        for policy in POLICIES {
            let points: Vec<(f64, f64)> = results
                .iter()
                .filter(|r| (r.cell.bandwidth_mbps, r.cell.direction, r.cell.cc) == *key && r.cell.policy == policy)
                .map(|r| (r.cell.n as f64, r.jain))
                .collect();
            if !points.is_empty() {
                panel.series.push(Series::new(policy, points));
            }
        }
    }
    panels.into_iter().map(|(_, p)| p).collect()
}

/// The cells whose goodput over time is drawn; see [`write_charts`].
fn goodput_cells(results: &[CellResult]) -> Vec<&CellResult> {
    let Some(bandwidth) = results.iter().map(|r| r.cell.bandwidth_mbps).min() else { return Vec::new() };
    let at = |r: &&CellResult| r.cell.bandwidth_mbps == bandwidth;
    let direction = if results.iter().filter(at).any(|r| r.cell.direction == Direction::Upload) {
        Direction::Upload
    } else {
        Direction::Download
    };
    let cc = if results.iter().filter(at).any(|r| r.cell.cc == Algorithm::Cubic) {
        Algorithm::Cubic
    } else {
        Algorithm::Reno
    };
    let rows: Vec<&CellResult> =
        results.iter().filter(at).filter(|r| r.cell.direction == direction && r.cell.cc == cc).collect();
    let Some(largest) = rows.iter().map(|r| r.cell.n).max() else { return Vec::new() };
    let mut picks: Vec<(usize, &str)> = POLICIES.iter().map(|&p| (largest, p)).collect();
    if largest != 2 {
        picks.extend([(2, "off"), (2, "equal-rate")]);
    }
    picks.into_iter().filter_map(|(n, p)| rows.iter().copied().find(|r| r.cell.n == n && r.cell.policy == p)).collect()
}

/// A series per flow, labelled by its RTT (the late one says so).
fn goodput_series(r: &CellResult, params: &Params) -> Vec<Series> {
    let late = r.rtts.len().saturating_sub(1);
    r.rtts
        .iter()
        .zip(&r.goodput_trace)
        .enumerate()
        .map(|(i, (rtt, trace))| {
            let ms = rtt.total_micros() as f64 / 1000.0;
            let mut label = if ms < 10.0 { format!("{ms:.1} ms") } else { format!("{ms:.0} ms") };
            if i == late && r.cell.n > 1 {
                label.push_str(&format!(", joins at {} s", params.join_at.as_secs_f64()));
            }
            Series::new(label, trace.clone())
        })
        .collect()
}

/// The Markdown tables of a grid's results, then the verdict line, with
/// links to `charts` (in the same directory) after the introduction.
pub fn report(seed: u64, params: &Params, results: &[CellResult], charts: &[Chart]) -> Vec<String> {
    let mut lines = vec![
        format!("# Fairness on the simulated network (seed {seed})"),
        String::new(),
        format!(
            "N clients, access RTTs geometric from {MIN_RTT_MS} to {MAX_RTT_MS} ms (N = 1: {MAX_RTT_MS} ms), one drop-tail \
             bottleneck (queue {} ms of its capacity); the longest-RTT flow joins at {} s; measured over {} s from {} s. \
             J = Jain's index of goodputs, U = bottleneck bytes / capacity, Q = mean SRTT − min-RTT at the senders, \
             conv = the late flow's time to 90 % of its share (goodput over {} ms).",
            params.queue_ms,
            params.join_at.as_secs_f64(),
            params.measure.as_secs_f64(),
            params.measure_from.as_secs_f64(),
            params.convergence_window.total_millis(),
        ),
    ];
    lines.extend(chart_lines(
        charts,
        &format!(
            "Each flow's goodput over time (every {} s; the {MAX_RTT_MS} ms flow joins at {} s):",
            params.trace_every.as_secs_f64(),
            params.join_at.as_secs_f64()
        ),
    ));
    let mut groups: Vec<(u64, Direction, Algorithm)> = Vec::new();
    for r in results {
        let key = (r.cell.bandwidth_mbps, r.cell.direction, r.cell.cc);
        if !groups.contains(&key) {
            groups.push(key);
        }
    }
    for (bw, dir, cc) in groups {
        lines.push(String::new());
        lines.push(format!(
            "## {bw} Mbit/s, {}, sim {} senders",
            if dir == Direction::Upload { "uploads" } else { "downloads" },
            cc_name(cc)
        ));
        lines.push(String::new());
        let mut head = "| N |".to_string();
        let mut rule = "|--:|".to_string();
        for p in POLICIES {
            head.push_str(&format!(" J {p} | U % | Q ms | conv s |"));
            rule.push_str("--:|--:|--:|--:|");
        }
        lines.push(head);
        lines.push(rule);
        let mut ns: Vec<usize> = results
            .iter()
            .filter(|r| (r.cell.bandwidth_mbps, r.cell.direction, r.cell.cc) == (bw, dir, cc))
            .map(|r| r.cell.n)
            .collect();
        ns.dedup();
        for n in ns {
            let mut row = format!("| {n} |");
            for p in POLICIES {
                match results.iter().find(|r| {
                    (r.cell.bandwidth_mbps, r.cell.direction, r.cell.cc, r.cell.n, r.cell.policy) == (bw, dir, cc, n, p)
                }) {
                    Some(r) => row.push_str(&format!(
                        " {:.3} | {:.1} | {:.1} | {} |",
                        r.jain,
                        r.utilisation,
                        r.queueing_delay_ms,
                        r.convergence.map_or("—".into(), |c| format!("{:.2}", c.as_secs_f64()))
                    )),
                    None => row.push_str(" | | | |"),
                }
            }
            lines.push(row);
        }
    }
    lines.push(String::new());
    lines.push("## Per-flow goodput, Mbit/s (flows in RTT order, 4 ms first; the last one joined late)".into());
    lines.push(String::new());
    lines.push("| cell | goodputs | total |".into());
    lines.push("|---|---|--:|".into());
    for r in results.iter().filter(|r| r.cell.n == 10 || r.cell.n == 2) {
        let flows: Vec<String> = r.goodput_mbps.iter().map(|g| format!("{g:.2}")).collect();
        lines.push(format!("| {} | {} | {:.2} |", r.cell.name(), flows.join(" "), r.total_goodput_mbps()));
    }
    let errors: Vec<String> =
        results.iter().flat_map(|r| r.errors.iter().map(move |e| format!("{}: {e}", r.cell.name()))).collect();
    if !errors.is_empty() {
        lines.push(String::new());
        lines.push(format!("{} flow errors:", errors.len()));
        lines.extend(errors.into_iter().take(20));
    }
    lines.push(String::new());
    lines.push(verdict(results));
    lines
}

/// `fairness: J=… with equal-rate vs J=… off, utilisation U %, N=10, RTT 4–256 ms, sim CUBIC senders`:
/// the N = 10 CUBIC upload cells (the lowest bandwidth present).
pub fn verdict(results: &[CellResult]) -> String {
    let pick = |p: &str| {
        results
            .iter()
            .filter(|r| r.cell.n == 10 && r.cell.cc == Algorithm::Cubic && r.cell.direction == Direction::Upload)
            .filter(|r| r.cell.policy == p)
            .min_by_key(|r| r.cell.bandwidth_mbps)
    };
    match (pick("equal-rate"), pick("off")) {
        (Some(eq), Some(off)) => format!(
            "fairness: J={:.3} with equal-rate vs J={:.3} off, utilisation {:.1} %, N=10, RTT 4–256 ms, sim CUBIC senders",
            eq.jain, off.jain, eq.utilisation
        ),
        _ => "fairness: the N=10 CUBIC upload cells were not run".to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A result with made-up numbers: J falls with N unless the policy is
    /// equal-rate; each flow's trace is flat at its goodput.
    fn fake(bandwidth_mbps: u64, n: usize, direction: Direction, cc: Algorithm, policy: &'static str) -> CellResult {
        let cell = Cell { bandwidth_mbps, n, direction, cc, policy };
        let goodput_mbps: Vec<f64> = (0..n)
            .map(|i| if policy == "equal-rate" { 1.0 } else { 1.0 + i as f64 })
            .map(|g| g * bandwidth_mbps as f64 / 20.0)
            .collect();
        let goodput_trace =
            goodput_mbps.iter().map(|&g| (0..56).map(|k| (k as f64 * 0.5 + 0.25, g)).collect()).collect();
        CellResult {
            cell,
            rtts: rtts(n),
            jain: jain_index(&goodput_mbps),
            goodput_mbps,
            goodput_trace,
            utilisation: 100.0,
            queueing_delay_ms: 10.0,
            bottleneck_queue_ms: 10.0,
            convergence: None,
            drops: 0,
            errors: Vec::new(),
            stop: Stop::TimeLimit,
        }
    }

    fn fake_grid(filter: impl Fn(&Cell) -> bool) -> Vec<CellResult> {
        grid()
            .into_iter()
            .filter(|c| filter(c))
            .map(|c| fake(c.bandwidth_mbps, c.n, c.direction, c.cc, c.policy))
            .collect()
    }

    fn names(results: &[&CellResult]) -> Vec<String> {
        results.iter().map(|r| r.cell.name()).collect()
    }

    #[test]
    fn goodput_charts_of_the_full_grid() {
        let results = fake_grid(|_| true);
        assert_eq!(
            names(&goodput_cells(&results)),
            [
                "20M N=10 up cubic off",
                "20M N=10 up cubic seed",
                "20M N=10 up cubic equal-rate",
                "20M N=2 up cubic off",
                "20M N=2 up cubic equal-rate",
            ]
        );
    }

    #[test]
    fn goodput_charts_of_a_filtered_grid() {
        // `--bandwidth 100 --n 2`: no N = 2 pair on top of the largest N.
        let results = fake_grid(|c| c.bandwidth_mbps == 100 && c.n == 2);
        assert_eq!(
            names(&goodput_cells(&results)),
            ["100M N=2 up cubic off", "100M N=2 up cubic seed", "100M N=2 up cubic equal-rate"]
        );
        let downloads = fake_grid(|c| c.direction == Direction::Download && c.cc == Algorithm::Reno && c.n == 4);
        assert_eq!(names(&goodput_cells(&downloads))[0], "20M N=4 down reno off");
        assert!(goodput_cells(&[]).is_empty());
    }

    #[test]
    fn a_jain_panel_per_bandwidth_direction_and_sender() {
        let panels = jain_panels(&fake_grid(|_| true));
        assert_eq!(panels.len(), 8);
        assert_eq!(panels[0].title, "20 Mbit/s, uploads, cubic");
        assert_eq!(panels[7].title, "100 Mbit/s, downloads, reno");
        for panel in &panels {
            let labels: Vec<&str> = panel.series.iter().map(|s| s.label.as_str()).collect();
            assert_eq!(labels, POLICIES);
            for series in &panel.series {
                let ns: Vec<f64> = series.points.iter().map(|p| p.0).collect();
                assert_eq!(ns, (1..=10).map(f64::from).collect::<Vec<_>>());
            }
        }
        let eq = &panels[0].series[2];
        assert!(eq.points.iter().all(|&(_, j)| (j - 1.0).abs() < 1e-12));
    }

    #[test]
    fn goodput_labels_are_rtts_and_the_late_flow_says_so() {
        let r = fake(20, 10, Direction::Upload, Algorithm::Cubic, "off");
        let labels: Vec<String> = goodput_series(&r, &Params::lab()).into_iter().map(|s| s.label).collect();
        assert_eq!(labels[0], "4.0 ms");
        assert_eq!(labels[1], "6.3 ms");
        assert_eq!(labels[2], "10 ms");
        assert_eq!(labels[9], "256 ms, joins at 3 s");
        let lone = fake(20, 1, Direction::Upload, Algorithm::Cubic, "off");
        assert_eq!(goodput_series(&lone, &Params::lab())[0].label, "256 ms");
    }

    #[test]
    fn charts_are_written_and_linked_from_the_report() {
        let dir = std::env::temp_dir().join(format!("fairway-fairness-charts-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("scratch directory");
        let params = Params::lab();
        let results = fake_grid(|c| c.bandwidth_mbps == 20 && (c.n == 2 || c.n == 10));
        let charts = write_charts(&dir, "lab", &params, &results).expect("charts");
        let files: Vec<&str> = charts.iter().map(|c| c.file.as_str()).collect();
        assert_eq!(
            files,
            [
                "lab-jain.png",
                "lab-goodput-20M-N10-up-cubic-off.png",
                "lab-goodput-20M-N10-up-cubic-seed.png",
                "lab-goodput-20M-N10-up-cubic-equal-rate.png",
                "lab-goodput-20M-N2-up-cubic-off.png",
                "lab-goodput-20M-N2-up-cubic-equal-rate.png",
            ]
        );
        for file in &files {
            let bytes = std::fs::read(dir.join(file)).expect("written");
            assert!(bytes.starts_with(b"\x89PNG\r\n\x1a\n"), "{file} is not a PNG");
        }
        let page = report(1, &params, &results, &charts);
        assert!(page.contains(&"![Jain's index against N, a line per policy](lab-jain.png)".to_string()));
        assert!(page.contains(&"- [20M N=2 up cubic off](lab-goodput-20M-N2-up-cubic-off.png)".to_string()));
        // Without charts the page has no chart section.
        assert!(!report(1, &params, &results, &[]).iter().any(|l| l.contains("## Charts")));
        let _ = std::fs::remove_dir_all(&dir);
    }
}
