//! Zero heap allocations per request in steady state on the userspace
//! backend: the server's [`HttpApp`] on one shard, a hand-written client on
//! another, their frames passed from one to the other in memory, in virtual
//! time, counted by a global allocator.
//!
//! Two keep-alive connections ask for `/plaintext`: one a request at a time,
//! the other sixteen pipelined. After a warm-up (pools, buffers and the
//! stack's queues reach their steady size) 10,000 more requests must
//! allocate nothing: not the stack, not the app, not the HTTP layer, not the
//! metrics, which publish every virtual second.
//!
//! The same again with window control on (`equal-rate`, a configured
//! capacity): the app senses its connections and runs the fairness driver
//! every few milliseconds, and that allocates nothing either.
//!
//! A test without libtest's harness (`harness = false`): the process has one
//! thread, so every allocation counted is the code under test's.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration as StdDuration;

use fairway::backend::connection_limit::ConnectionLimit;
use fairway::backend::fairness::{ShareBoard, policy_for};
use fairway::backend::userspace::{HttpApp, WindowControl};
use fairway::config::{ClientWeights, Fairness};
use fairway::http::HttpConfig;
use fairway::metrics::MetricsHub;
use fairway::runtime::{App, LoopStats};
use fairway::site::ShardSite;
use fairway_stack::time::{Duration, Instant};
use fairway_stack::{Config, Event, Handle, Shard};
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const SERVER_MAC: [u8; 6] = [2, 0, 10, 0, 0, 1];
const CLIENT_MAC: [u8; 6] = [2, 0, 10, 0, 0, 2];

const REQUEST: &[u8] = b"GET /plaintext HTTP/1.1\r\nHost: fairway\r\nAccept: text/plain\r\n\r\n";
const BODY: &[u8] = b"Hello, World!";

/// Virtual time per turn: long enough that the measured requests span
/// several of the metrics' publishing intervals.
const TURN_US: u64 = 400;

/// One client connection: how many requests it keeps in flight, and the
/// responses it has read, checked one by one in a fixed buffer.
struct ClientConn {
    handle: Option<Handle>,
    depth: usize,
    in_flight: usize,
    /// Requests still to send, all told.
    to_send: u64,
    /// Bytes of a request written only in part.
    partial: usize,
    input: [u8; 8192],
    len: usize,
    responses: u64,
}

impl ClientConn {
    fn new(depth: usize) -> ClientConn {
        ClientConn { handle: None, depth, in_flight: 0, to_send: 0, partial: 0, input: [0; 8192], len: 0, responses: 0 }
    }

    fn send(&mut self, shard: &mut Shard) {
        let Some(h) = self.handle else { return };
        while self.partial > 0 || (self.in_flight < self.depth && self.to_send > 0) {
            if self.partial == 0 {
                self.in_flight += 1;
                self.to_send -= 1;
            }
            let rest = &REQUEST[self.partial..];
            match shard.send(h, rest) {
                Ok(n) if n == rest.len() => self.partial = 0,
                Ok(n) => {
                    self.partial += n;
                    return;
                }
                Err(e) => panic!("client send: {e}"),
            }
        }
    }

    fn read(&mut self, shard: &mut Shard) {
        let Some(h) = self.handle else { return };
        loop {
            match shard.recv(h, &mut self.input[self.len..]) {
                Ok(0) => panic!("the server closed a keep-alive connection"),
                Ok(n) => self.len += n,
                Err(fairway_stack::RecvError::WouldBlock) => break,
                Err(e) => panic!("client recv: {e}"),
            }
            while let Some(used) = one_response(&self.input[..self.len]) {
                self.input.copy_within(used..self.len, 0);
                self.len -= used;
                self.responses += 1;
                self.in_flight -= 1;
            }
        }
        self.send(shard);
    }
}

/// The length of the `/plaintext` response at the front of `input`, once it
/// is whole; checks it on the way.
fn one_response(input: &[u8]) -> Option<usize> {
    let head = input.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    assert!(input.starts_with(b"HTTP/1.1 200 OK\r\n"), "{:?}", String::from_utf8_lossy(input));
    let text = std::str::from_utf8(&input[..head]).expect("an ASCII head");
    assert!(text.contains("\r\nContent-Length: 13\r\n") && text.contains("\r\nServer: fairway\r\n"), "{text}");
    let end = head + BODY.len();
    if input.len() < end {
        return None;
    }
    assert_eq!(&input[head..end], BODY);
    Some(end)
}

struct Pair {
    server: Shard,
    client: Shard,
    app: HttpApp,
    conns: [ClientConn; 2],
    now: Instant,
    frame: [u8; 2048],
    stats: LoopStats,
}

impl Pair {
    fn new(fairness: Option<Fairness>) -> Pair {
        let mut server = Shard::new(Config::new(SERVER_MAC, SERVER_IP, 24));
        let mut client = Shard::new(Config::new(CLIENT_MAC, CLIENT_IP, 24));
        server.add_neighbor(CLIENT_IP, CLIENT_MAC);
        client.add_neighbor(SERVER_IP, SERVER_MAC);
        let hub = Arc::new(MetricsHub::new(1, 8, "afxdp"));
        let site = ShardSite::new(0, hub, None, 8).unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let mut app = HttpApp::new(
            site,
            HttpConfig::default(),
            Arc::new(ConnectionLimit::new(100)),
            stop,
            StdDuration::from_secs(5),
        );
        if let Some(fairness) = fairness {
            let board = Arc::new(ShareBoard::new(1));
            // Weighted clients too: the lookup is a scan, no allocation.
            let weights = ["10.0.0.0/24=0.5", "10.0.0.2=2"].map(|w| w.parse().unwrap());
            let window = WindowControl::new(policy_for(fairness), Some(100_000_000), board, 0)
                .with_weights(ClientWeights::new(weights.to_vec()).unwrap());
            app = app.with_window_control(window);
        }
        let mut pair = Pair {
            server,
            client,
            app,
            conns: [ClientConn::new(1), ClientConn::new(16)],
            now: Instant::from_secs(1),
            frame: [0; 2048],
            stats: LoopStats::default(),
        };
        pair.app.start(&mut pair.server, pair.now);
        for conn in &mut pair.conns {
            conn.handle = Some(pair.client.connect(pair.now, SocketAddrV4::new(SERVER_IP, 80)).unwrap());
        }
        pair
    }

    fn responses(&self) -> u64 {
        self.conns.iter().map(|c| c.responses).sum()
    }

    /// Each connection asks for `per_conn` more requests; runs until all
    /// are answered.
    fn run(&mut self, per_conn: u64) {
        let target = self.responses() + per_conn * self.conns.len() as u64;
        for conn in &mut self.conns {
            conn.to_send += per_conn;
            conn.send(&mut self.client);
        }
        let mut idle_turns = 0;
        while self.responses() < target {
            self.now += Duration::from_micros(TURN_US);
            let now = self.now;
            for shard in [&mut self.server, &mut self.client] {
                if shard.poll_timeout().is_some_and(|at| at <= now) {
                    shard.handle_timeout(now);
                }
            }
            let mut moved = 0;
            while let Some(n) = self.client.poll_transmit(now, &mut self.frame) {
                self.server.handle_frame(now, &self.frame[..n]);
                moved += 1;
            }
            while let Some(event) = self.server.poll_event() {
                self.app.on_event(&mut self.server, now, event);
            }
            self.app.poll(&mut self.server, now);
            while let Some(n) = self.server.poll_transmit(now, &mut self.frame) {
                self.client.handle_frame(now, &self.frame[..n]);
                moved += 1;
            }
            self.stats.turns += 1;
            self.app.after_turn(&mut self.server, now, &self.stats);
            while let Some(event) = self.client.poll_event() {
                match event {
                    Event::Connected(h) | Event::Readable(h) | Event::Writable(h) => {
                        let conn = self.conns.iter_mut().find(|c| c.handle == Some(h)).expect("a client handle");
                        conn.read(&mut self.client);
                    }
                    other => panic!("client event {other:?}"),
                }
            }
            idle_turns = if moved == 0 { idle_turns + 1 } else { 0 };
            // Far more idle turns than any timer needs: a livelock.
            assert!(idle_turns < 10_000, "stuck at {} of {target} responses", self.responses());
        }
    }
}

fn main() {
    steady_state_keep_alive_requests_on_the_stack_allocate_nothing(None);
    println!("test steady_state_keep_alive_requests_on_the_stack_allocate_nothing ... ok");
    steady_state_keep_alive_requests_on_the_stack_allocate_nothing(Some(Fairness::EqualRate));
    println!("test steady_state_keep_alive_requests_on_the_stack_allocate_nothing (equal-rate) ... ok");
}

fn steady_state_keep_alive_requests_on_the_stack_allocate_nothing(fairness: Option<Fairness>) {
    let mut pair = Pair::new(fairness);
    pair.run(1_000);
    assert_eq!(pair.responses(), 2_000);
    assert_eq!(pair.app.accepted(), 2);
    let warm = pair.now;

    let region = Region::new(GLOBAL);
    pair.run(5_000);
    let stats = region.change();

    assert_eq!(pair.responses(), 12_000);
    let metrics = pair.app.site().metrics();
    assert_eq!((metrics.requests(), metrics.responses(200)), (12_000, 12_000));
    assert_eq!((pair.app.accepted(), pair.app.open_connections()), (2, 2));
    if fairness.is_some() {
        // The responses outweigh the requests more than twice: both
        // connections are downloads under the driver's control.
        assert_eq!(pair.app.window_control().map(WindowControl::tracked), Some(2), "window control ran over them");
    }
    let span = pair.now.saturating_since(warm);
    assert!(span.total_micros() > 1_000_000, "metrics were published in the window: it spans {span}");
    assert_eq!(
        (stats.allocations, stats.reallocations, stats.deallocations),
        (0, 0, 0),
        "allocations while serving 10,000 keep-alive requests on the stack: {stats:?}"
    );
}
