//! Fairway over AF_XDP against the Linux kernel's TCP, on testbeds these
//! tests build and remove (root; `cargo xtask test` runs them with the
//! `afxdp` feature). One test at a time: they share two cores with the
//! kernel peers they drive.
#![cfg(all(target_os = "linux", feature = "afxdp"))]

use std::net::{SocketAddr, SocketAddrV4};
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use fairway_nic::afxdp::{AfXdp, AfXdpConfig};
use fairway_nic::pcap::Pcap;
use fairway_nic::steering::{Owner, Steered, classify};
use fairway_nic::{Device, Wait};
use fairway_stack::steering::owner;
use fairway_stack::{DropReason, Shard};
use fairway_tests::apps::fetcher::Fetcher;
use fairway_tests::apps::http_shard::HttpShard;
use fairway_tests::real_peers::{
    HTTP_PORT, Shards, curl_sha256, parse_mac, pattern_sha256, python_concurrent, python_upload, shard_config,
    wait_until_reachable,
};
use fairway_tests::testbed::{self, LinkParams, SERVER_IF, Testbed, TestbedConfig};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn prefix() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("fx{}_{}", std::process::id() % 100_000, NEXT.fetch_add(1, Ordering::Relaxed))
}

fn testbed(config: TestbedConfig) -> Testbed {
    testbed::require_root().unwrap_or_else(|e| panic!("{e}"));
    Testbed::up(config).unwrap_or_else(|e| panic!("testbed up: {e}"))
}

fn open(queue: u32) -> std::io::Result<AfXdp> {
    AfXdp::open(&AfXdpConfig::new(SERVER_IF, queue)).map_err(|e| std::io::Error::other(e.to_string()))
}

/// The server's HTTP layer on `count` shards, one per queue of `fw0`.
fn serve(tb: &Testbed, count: u16) -> Shards<HttpShard> {
    let (mac, ip, len) = (parse_mac(&tb.server_mac()), tb.server_ip(), tb.prefix_len());
    let shards = Shards::start(&tb.server_ns(), count, move |index, fabric| {
        let device = Steered::new(open(u32::from(index))?, fabric.unwrap_or_else(single), index);
        Ok((Shard::new(shard_config(mac, ip, len, index, count)), device, HttpShard::new(HTTP_PORT, 1 << 30)))
    })
    .unwrap();
    wait_until_reachable(tb, 0, Duration::from_secs(10));
    assert!(!shards.any_finished(), "a shard stopped at start");
    shards
}

/// A fabric of one shard: `Steered` then only passes frames through.
fn single() -> std::sync::Arc<fairway_nic::steering::Fabric> {
    fairway_nic::steering::Fabric::new(1, 1, 64).unwrap()
}

const T: Duration = Duration::from_secs(60);

#[test]
fn kernel_clients_download_upload_ping_and_resolve_fairway() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tb = testbed(TestbedConfig::new(prefix()).clients(2).queues(1));
    let server = serve(&tb, 1);
    for size in [1u64, 1448, 65_536, 1 << 20, 10 << 20, 100_000_000] {
        let got = curl_sha256(&tb, 0, &format!("/bytes/{size}"), T).unwrap();
        assert_eq!(got, pattern_sha256(size), "download of {size} bytes");
    }
    for size in [0u64, 1, 100_000, 5 << 20] {
        python_upload(&tb, 1, size, T).unwrap_or_else(|e| panic!("upload of {size} bytes: {e}"));
    }
    let ping = testbed::exec(&tb.client_ns(1), &["ping", "-c", "3", "-i", "0.2", "-W", "2", "10.77.0.1"]).unwrap();
    assert!(ping.stdout_text().contains("3 received"), "{}", ping.stdout_text());
    // The kernel learned Fairway's MAC through ARP.
    let neigh = testbed::exec(&tb.client_ns(1), &["ip", "neigh", "show", "10.77.0.1"]).unwrap();
    assert!(neigh.stdout_text().contains(&tb.server_mac()), "{}", neigh.stdout_text());
    let exit = server.stop().remove(0);
    let stats = exit.result.unwrap();
    let app = exit.app.unwrap();
    let shard = exit.shard.unwrap();
    assert_eq!(app.requests, 10);
    assert!(stats.frames_out >= 100_000_000 / 1448, "{stats:?}");
    assert_eq!(shard.counters().dropped(DropReason::TcpNoConnection), 0, "{}", shard.counters());
    assert!(shard.counters().echo_replies >= 3);
}

#[test]
fn a_thousand_concurrent_kernel_connections() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tb = testbed(TestbedConfig::new(prefix()).clients(1).queues(1));
    let server = serve(&tb, 1);
    assert_eq!(python_concurrent(&tb, 0, 1000, 2000, T), 1000);
    let app = server.stop().remove(0).app.unwrap();
    assert_eq!(app.accepted, 1000);
    assert!(app.peak_connections >= 1000, "all open at once: peak {}", app.peak_connections);
}

#[test]
fn through_the_link_emulator_at_50_ms_and_1_percent_loss_every_byte_arrives() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let link = LinkParams::parse_list("delay=25ms,loss=1%").unwrap();
    let tb = testbed(TestbedConfig::new(prefix()).clients(1).queues(1).link(0, link));
    let server = serve(&tb, 1);
    for size in [100_000u64, 4 << 20] {
        assert_eq!(curl_sha256(&tb, 0, &format!("/bytes/{size}"), T).unwrap(), pattern_sha256(size));
    }
    python_upload(&tb, 0, 2 << 20, T).unwrap();
    let exit = server.stop().remove(0);
    let shard = exit.shard.unwrap();
    // 1 % loss each way over several thousand segments: recovery was needed.
    assert!(shard.counters().retransmits > 0, "{}", shard.counters());
    assert_eq!(exit.app.unwrap().requests, 3);
}

#[test]
fn fairway_downloads_from_a_kernel_http_server() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tb = testbed(TestbedConfig::new(prefix()).clients(1).queues(1));
    let dir = std::env::temp_dir().join(format!("fairway-fetch-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join("payload.bin");
    let data: Vec<u8> = (0..20_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8).collect();
    std::fs::write(&file, &data).unwrap();
    let expected = fairway_tests::apps::hex(&<sha2::Sha256 as sha2::Digest>::digest(&data));
    let client_ip = tb.client_ip(0);
    let mut http = testbed::spawn(
        &tb.client_ns(0),
        &[
            "python3",
            "-u",
            "-m",
            "http.server",
            "8000",
            "--bind",
            &client_ip.to_string(),
            "--directory",
            dir.to_str().unwrap(),
        ],
    )
    .unwrap();
    http.wait_for_stdout("Serving HTTP", Duration::from_secs(10)).unwrap();
    let (mac, ip, len) = (parse_mac(&tb.server_mac()), tb.server_ip(), tb.prefix_len());
    let fetch = Shards::start(&tb.server_ns(), 1, move |_, _| {
        let fetcher = Fetcher::new(SocketAddrV4::new(client_ip, 8000), "/payload.bin");
        Ok((Shard::new(shard_config(mac, ip, len, 0, 1)), open(0)?, fetcher))
    })
    .unwrap();
    let started = std::time::Instant::now();
    while !fetch.any_finished() && started.elapsed() < T {
        std::thread::sleep(Duration::from_millis(20));
    }
    let exit = fetch.stop().remove(0);
    exit.result.unwrap();
    let fetched = exit.app.unwrap().outcome.expect("the fetch finished").unwrap();
    assert_eq!((fetched.status, fetched.body_len, fetched.sha256), (200, data.len() as u64, expected));
    drop(http);
    let _ = std::fs::remove_dir_all(&dir);
}

/// What a shard was handed after steering: every TCP/UDP/ICMP frame, and
/// those among them that the steering hash gives to another shard.
#[derive(Default)]
struct Handed {
    flow_frames: AtomicU64,
    foreign: AtomicU64,
}

/// A shard's device seen from the shard: counts what [`Steered`] hands over
/// and checks each frame's owner with the steering rule itself.
struct Witness<D> {
    inner: D,
    index: u16,
    count: u16,
    handed: Arc<Handed>,
}

impl<D: Device> Device for Witness<D> {
    fn max_frame_len(&self) -> usize {
        self.inner.max_frame_len()
    }

    fn receive<F: FnMut(&[u8])>(&mut self, budget: usize, mut on_frame: F) -> usize {
        let (index, count, handed) = (self.index, self.count, &self.handed);
        self.inner.receive(budget, |frame| {
            if let Owner::Shard(owner) = classify(frame, count) {
                handed.flow_frames.fetch_add(1, Ordering::Relaxed);
                if owner != index {
                    handed.foreign.fetch_add(1, Ordering::Relaxed);
                }
            }
            on_frame(frame);
        })
    }

    fn transmit<F: FnMut(&mut [u8]) -> Option<usize>>(&mut self, budget: usize, fill: F) -> usize {
        self.inner.transmit(budget, fill)
    }
}

impl<D: Wait> Wait for Witness<D> {
    fn wait(&mut self, timeout: Option<Duration>) -> std::io::Result<()> {
        self.inner.wait(timeout)
    }
}

#[test]
fn two_shards_on_a_two_queue_veth_share_the_flows_without_mixing_them() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tb = testbed(TestbedConfig::new(prefix()).clients(2).queues(2));
    let handed: Arc<[Arc<Handed>; 2]> = Arc::default();
    let (mac, ip, len) = (parse_mac(&tb.server_mac()), tb.server_ip(), tb.prefix_len());
    let witnesses = Arc::clone(&handed);
    let server = Shards::start(&tb.server_ns(), 2, move |index, fabric| {
        let steered = Steered::new(open(u32::from(index))?, fabric.expect("two shards share a fabric"), index);
        let device = Witness { inner: steered, index, count: 2, handed: Arc::clone(&witnesses[usize::from(index)]) };
        Ok((Shard::new(shard_config(mac, ip, len, index, 2)), device, HttpShard::new(HTTP_PORT, 1 << 30)))
    })
    .unwrap();
    wait_until_reachable(&tb, 0, Duration::from_secs(10));
    assert!(!server.any_finished(), "a shard stopped at start");
    assert_eq!(python_concurrent(&tb, 0, 200, 50_000, T), 200);
    assert_eq!(python_concurrent(&tb, 1, 200, 50_000, T), 200);
    let steered: Vec<_> = (0..2).map(|i| server.steering(i)).collect();
    let exits = server.stop();
    let mut accepted = 0;
    for exit in exits {
        let index = exit.index;
        exit.result.unwrap();
        let app = exit.app.unwrap();
        assert!(app.accepted > 20, "shard {index} accepted only {}: flows must spread", app.accepted);
        accepted += app.accepted;
        // Every connection a shard accepted is one the steering hash gives it.
        for flow in &app.flows {
            let (SocketAddr::V4(local), SocketAddr::V4(remote)) = flow else { panic!("an IPv6 flow: {flow:?}") };
            assert_eq!(owner((*local.ip(), local.port()), (*remote.ip(), remote.port()), 2), index);
        }
        // Every frame of a flow that the shard handled is one of its own.
        let seen = &handed[usize::from(index)];
        let (frames, foreign) = (seen.flow_frames.load(Ordering::Relaxed), seen.foreign.load(Ordering::Relaxed));
        assert!(frames > 1_000, "shard {index} handled only {frames} frames of flows");
        assert_eq!(foreign, 0, "shard {index} handled {foreign} of {frames} frames owned by the other shard");
    }
    assert_eq!(accepted, 400);
    // The kernel's queue choice is not ours: frames did need moving.
    assert!(steered.iter().map(|s| s.steered_out).sum::<u64>() > 0, "{steered:?}");
    assert!(steered.iter().all(|s| s.inbox_full == 0 && s.pool_empty == 0), "{steered:?}");
}

#[test]
fn a_pcap_of_a_download_shows_the_handshake() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tb = testbed(TestbedConfig::new(prefix()).clients(1).queues(1));
    let path: PathBuf = std::env::temp_dir().join(format!("fairway-{}.pcap", tb.prefix()));
    let (mac, ip, len) = (parse_mac(&tb.server_mac()), tb.server_ip(), tb.prefix_len());
    let capture = path.clone();
    let server = Shards::start(&tb.server_ns(), 1, move |_, _| {
        let device = Pcap::create(open(0)?, &capture)?;
        Ok((Shard::new(shard_config(mac, ip, len, 0, 1)), device, HttpShard::new(HTTP_PORT, 1 << 30)))
    })
    .unwrap();
    wait_until_reachable(&tb, 0, Duration::from_secs(10));
    assert_eq!(curl_sha256(&tb, 0, "/bytes/5000", T).unwrap(), pattern_sha256(5000));
    server.stop().remove(0).result.unwrap();
    let out = std::process::Command::new("tcpdump").args(["-r"]).arg(&path).args(["-nn", "tcp"]).output().unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "tcpdump -r failed: {}", String::from_utf8_lossy(&out.stderr));
    let syn = text.lines().position(|l| l.contains("> 10.77.0.1.80:") && l.contains("Flags [S]"));
    let synack = text.lines().position(|l| l.contains("10.77.0.1.80 >") && l.contains("Flags [S.]"));
    assert!(matches!((syn, synack), (Some(a), Some(b)) if a < b), "no SYN then SYN-ACK in:\n{text}");
    let _ = std::fs::remove_file(&path);
}
