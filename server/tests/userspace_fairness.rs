//! Window control on the userspace backend: the server's [`HttpApp`] on one
//! shard with a [`WindowControl`], a client shard uploading to `/upload` on
//! one connection and downloading `/bytes/{n}` on another, their frames
//! passed in memory in virtual time.
//!
//! With `equal-rate` and a configured capacity the upload's advertised
//! window and the download's pacing rate are capped (as the server's stack
//! shows them), and `/metrics`' fairness series say so; with `off` the same
//! two flows are counted and nothing is capped. With `--weight` for the
//! client's address its flows carry that weight into the policy.

mod support;

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration as StdDuration;
use support::series;

use fairway::backend::connection_limit::ConnectionLimit;
use fairway::backend::fairness::{ShareBoard, policy_for};
use fairway::backend::userspace::{HttpApp, WindowControl};
use fairway::config::{ClientWeights, Fairness};
use fairway::http::HttpConfig;
use fairway::metrics::MetricsHub;
use fairway::runtime::{App, LoopStats};
use fairway::site::ShardSite;
use fairway_stack::time::{Duration, Instant};
use fairway_stack::{Config, FastStart, FlowStats, Handle, RecvError, Shard};

const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const SERVER_MAC: [u8; 6] = [2, 0, 10, 0, 0, 1];
const CLIENT_MAC: [u8; 6] = [2, 0, 10, 0, 0, 2];

/// More than either transfer moves in the test: both are still running
/// when it looks.
const TRANSFER: u64 = 1 << 29;
const CAPACITY: u64 = 100_000_000;
/// Virtual time per turn: the round trip is a turn or two.
const TURN_US: u64 = 500;

struct Pair {
    server: Shard,
    client: Shard,
    app: HttpApp,
    hub: Arc<MetricsHub>,
    upload: Handle,
    download: Handle,
    /// The upload's head and body still to send.
    head: &'static [u8],
    body_left: u64,
    downloaded: u64,
    now: Instant,
    frame: [u8; 2048],
    chunk: Vec<u8>,
    stats: LoopStats,
}

impl Pair {
    fn new(fairness: Fairness, capacity: Option<u64>) -> Pair {
        Pair::weighted(fairness, capacity, ClientWeights::default(), Arc::new(ShareBoard::new(1)))
    }

    /// The pair with the server's window control weighting clients as
    /// `weights` says and sharing `capacity` through `board` as shard 0.
    fn weighted(fairness: Fairness, capacity: Option<u64>, weights: ClientWeights, board: Arc<ShareBoard>) -> Pair {
        Pair::configured(fairness, capacity, weights, board, Config::new(SERVER_MAC, SERVER_IP, 24))
    }

    /// The pair with the server's stack configured as `server`.
    fn configured(
        fairness: Fairness,
        capacity: Option<u64>,
        weights: ClientWeights,
        board: Arc<ShareBoard>,
        server: Config,
    ) -> Pair {
        let mut server = Shard::new(server);
        let mut client = Shard::new(Config::new(CLIENT_MAC, CLIENT_IP, 24));
        server.add_neighbor(CLIENT_IP, CLIENT_MAC);
        client.add_neighbor(SERVER_IP, SERVER_MAC);
        let policy = policy_for(fairness);
        let hub = Arc::new(MetricsHub::new(1, 8, "afxdp").with_fairness(policy.name(), capacity));
        let site = ShardSite::new(0, Arc::clone(&hub), None, 8).unwrap();
        let window = WindowControl::new(policy, capacity, board, 0).with_weights(weights);
        let app = HttpApp::new(
            site,
            HttpConfig { max_body: TRANSFER, ..HttpConfig::default() },
            Arc::new(ConnectionLimit::new(100)),
            Arc::new(AtomicBool::new(false)),
            StdDuration::from_secs(5),
        )
        .with_window_control(window);
        let now = Instant::from_secs(1);
        let to = SocketAddrV4::new(SERVER_IP, 80);
        let upload = client.connect(now, to).unwrap();
        let download = client.connect(now, to).unwrap();
        let head = format!("POST /upload HTTP/1.1\r\nHost: fairway\r\nContent-Length: {TRANSFER}\r\n\r\n");
        let mut pair = Pair {
            server,
            client,
            app,
            hub,
            upload,
            download,
            head: Box::leak(head.into_boxed_str()).as_bytes(),
            body_left: TRANSFER,
            downloaded: 0,
            now,
            frame: [0; 2048],
            chunk: vec![0x5a; 64 * 1024],
            stats: LoopStats::default(),
        };
        pair.app.start(&mut pair.server, now);
        pair
    }

    /// The client's side of a turn: push the upload, read the download.
    fn client_turn(&mut self) {
        let c = &mut self.client;
        while let Some(_event) = c.poll_event() {}
        while !self.head.is_empty() {
            match c.send(self.upload, self.head) {
                Ok(n) if n > 0 => self.head = &self.head[n..],
                _ => break,
            }
        }
        while self.head.is_empty() && self.body_left > 0 {
            let len = self.chunk.len().min(usize::try_from(self.body_left).unwrap_or(usize::MAX));
            match c.send(self.upload, &self.chunk[..len]) {
                Ok(n) if n > 0 => self.body_left -= n as u64,
                _ => break,
            }
        }
        if self.downloaded == 0 {
            let _ =
                c.send(self.download, format!("GET /bytes/{TRANSFER} HTTP/1.1\r\nHost: fairway\r\n\r\n").as_bytes());
            self.downloaded = 1;
        }
        loop {
            match c.recv(self.download, &mut self.chunk) {
                Ok(n) if n > 0 => self.downloaded += n as u64,
                Ok(_) | Err(RecvError::WouldBlock) => break,
                Err(e) => panic!("download: {e}"),
            }
        }
    }

    /// Runs for `span` of virtual time.
    fn run(&mut self, span: Duration) {
        let end = self.now + span;
        while self.now < end {
            self.now += Duration::from_micros(TURN_US);
            let now = self.now;
            for shard in [&mut self.server, &mut self.client] {
                if shard.poll_timeout().is_some_and(|at| at <= now) {
                    shard.handle_timeout(now);
                }
            }
            self.client_turn();
            while let Some(n) = self.client.poll_transmit(now, &mut self.frame) {
                self.server.handle_frame(now, &self.frame[..n]);
            }
            while let Some(event) = self.server.poll_event() {
                self.app.on_event(&mut self.server, now, event);
            }
            self.app.poll(&mut self.server, now);
            self.stats.turns += 1;
            self.app.after_turn(&mut self.server, now, &self.stats);
            while let Some(n) = self.server.poll_transmit(now, &mut self.frame) {
                self.client.handle_frame(now, &self.frame[..n]);
            }
        }
    }

    /// The server's view of the client connection `client_end`.
    #[track_caller]
    fn server_flow(&self, client_end: Handle) -> FlowStats {
        let local = self.client.flow(client_end).expect("the client's connection").local;
        self.app
            .handles()
            .filter_map(|h| self.server.flow(h))
            .find(|f| f.remote == local)
            .expect("the server holds the connection")
    }

    fn metrics(&self) -> String {
        let mut out = Vec::new();
        self.hub.render(&mut out);
        String::from_utf8(out).unwrap()
    }
}

#[test]
fn equal_rate_caps_an_uploads_window_and_a_downloads_pacing_rate() {
    let mut pair = Pair::new(Fairness::EqualRate, Some(CAPACITY));
    pair.run(Duration::from_millis(2_500));
    assert!(pair.body_left < TRANSFER && pair.downloaded > 1 << 20, "both transfers under way");
    assert_eq!(pair.app.window_control().map(WindowControl::tracked), Some(2), "two flows under control");

    let up = pair.server_flow(pair.upload);
    let down = pair.server_flow(pair.download);
    let window = up.rcv_wnd_cap.expect("the upload's advertised window is capped");
    assert!(window >= 2 * u32::from(up.mss), "never below 2·MSS: {window}");
    let pacing = down.pacing_cap.expect("the download's pacing rate is capped");
    assert!(pacing <= CAPACITY / 8, "at most the whole link: {pacing}");
    assert_eq!((up.pacing_cap, down.rcv_wnd_cap), (None, None), "each flow is capped its own way");

    let text = pair.metrics();
    assert!(text.contains("fairway_fairness_info{policy=\"equal-rate\",capacity_bits_per_second=\"100000000\"} 1"));
    assert_eq!(series(&text, "fairway_fairness_active_flows"), [("{shard=\"0\"}", 2.0)], "{text}");
    let windows = series(&text, "fairway_fairness_flow_window_cap_bytes");
    assert!(windows.len() == 1 && windows[0].0.contains("direction=\"upload\""), "{text}");
    let paces = series(&text, "fairway_fairness_flow_pacing_cap_bytes_per_second");
    assert!(paces.len() == 1 && paces[0].0.contains("direction=\"download\""), "{text}");
    assert_eq!(series(&text, "fairway_fairness_flow_srtt_seconds").len(), 2, "{text}");
    assert_eq!(series(&text, "fairway_fairness_flow_min_rtt_seconds").len(), 2, "{text}");
    assert_eq!(series(&text, "fairway_fairness_flow_weight").iter().map(|&(_, w)| w).collect::<Vec<_>>(), [1.0, 1.0]);
    let rates = series(&text, "fairway_fairness_flow_delivery_rate_bytes_per_second");
    assert!(rates.len() == 2 && rates.iter().all(|&(_, r)| r > 0.0), "{text}");
    let j = series(&text, "fairway_fairness_jain_index");
    assert!(j.len() == 1 && j[0].1 > 0.5 && j[0].1 <= 1.0, "{text}");
}

/// A download that careful resume jumps to its share is under control at
/// once: the policy counts it (and caps it and its neighbours) within a
/// few milliseconds of the jump, not once it has had 64 KB acknowledged
/// and the next look at the connections (every 100 ms) has come.
#[test]
fn a_download_that_jumps_to_its_share_is_under_control_at_once() {
    let mut config = Config::new(SERVER_MAC, SERVER_IP, 24);
    config.tcp.fast_start = FastStart::CarefulResume;
    // 10 Gbit/s: a share times the ~1 ms round trip is above the initial window.
    let capacity = Some(10_000_000_000);
    let mut pair =
        Pair::configured(Fairness::EqualRate, capacity, ClientWeights::default(), Arc::new(ShareBoard::new(1)), config);
    let jumped = |pair: &Pair| pair.server.counters().fast_start_jumps > 0;
    while !jumped(&pair) {
        assert!(pair.now < Instant::from_secs(2), "no jump");
        pair.run(Duration::from_micros(TURN_US));
    }
    let down = pair.server_flow(pair.download);
    assert!(down.fast_start_jump, "{down:?}");
    pair.run(Duration::from_millis(6));
    let tracked = pair.app.window_control().map(WindowControl::tracked).unwrap();
    assert!(tracked >= 1, "the jumping download is a flow");
    assert!(pair.server_flow(pair.download).pacing_cap.is_some(), "and has its caps");
}

#[test]
fn off_counts_the_flows_and_caps_none() {
    let mut pair = Pair::new(Fairness::Off, None);
    pair.run(Duration::from_millis(2_500));
    assert!(pair.body_left < TRANSFER && pair.downloaded > 1 << 20, "both transfers under way");
    for h in [pair.upload, pair.download] {
        let f = pair.server_flow(h);
        assert_eq!((f.rcv_wnd_cap, f.cwnd_cap, f.pacing_cap), (None, None, None), "{f:?}");
    }
    let text = pair.metrics();
    assert!(text.contains("fairway_fairness_info{policy=\"off\",capacity_bits_per_second=\"estimated\"} 1"));
    assert_eq!(series(&text, "fairway_fairness_active_flows"), [("{shard=\"0\"}", 2.0)], "{text}");
    assert!(series(&text, "fairway_fairness_flow_window_cap_bytes").is_empty(), "{text}");
    assert!(series(&text, "fairway_fairness_flow_pacing_cap_bytes_per_second").is_empty(), "{text}");
    assert_eq!(series(&text, "fairway_fairness_flow_delivery_rate_bytes_per_second").len(), 2, "{text}");
}

#[test]
fn a_clients_weight_reaches_the_policy() {
    // The client, 10.0.0.2, is in both prefixes: the longer one decides.
    let weights = ["10.0.0.0/24=0.5", "10.0.0.2=3"].map(|w| w.parse().unwrap());
    let weights = ClientWeights::new(weights.to_vec()).unwrap();
    let board = Arc::new(ShareBoard::new(2));
    let mut pair = Pair::weighted(Fairness::EqualRate, Some(CAPACITY), weights, Arc::clone(&board));
    pair.run(Duration::from_millis(2_500));
    assert_eq!(pair.app.window_control().map(WindowControl::tracked), Some(2), "two flows under control");

    let text = pair.metrics();
    let weights = series(&text, "fairway_fairness_flow_weight");
    assert_eq!(weights.len(), 2, "{text}");
    for (labels, w) in weights {
        assert!(labels.contains("remote=\"10.0.0.2:"), "{labels}");
        assert_eq!(w, 3.0, "{labels}");
    }
    // Shard 0 published its flows' weights, 3 + 3, to share the capacity
    // by: another shard with as much gets half.
    assert_eq!(board.share(1, 6.0, CAPACITY), CAPACITY / 2);
}
