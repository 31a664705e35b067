//! The real-peer tests' applications against each other, in one process:
//! the server's HTTP layer on one shard, the fetcher on another, joined by a socket
//! pair and driven by the server's runtime in wall-clock time.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fairway::http::pattern_byte;
use fairway::runtime::LoopConfig;
use fairway::runtime::shards::{join_all, spawn, spawn_with};
use fairway_nic::socket_pair::socket_pair;
use fairway_stack::{Config, Shard};
use fairway_tests::apps::Leaves;
use fairway_tests::apps::fetcher::{FetchError, Fetched, Fetcher};
use fairway_tests::apps::hex;
use fairway_tests::apps::http_shard::HttpShard;
use sha2::{Digest, Sha256};

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const SERVER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const CLIENT_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];

fn shard(mac: [u8; 6], ip: Ipv4Addr, peer: (Ipv4Addr, [u8; 6])) -> Shard {
    let mut config = Config::new(mac, ip, 24);
    config.tcp.rx_buffer = 256 * 1024;
    config.tcp.tx_buffer = 256 * 1024;
    let mut shard = Shard::new(config);
    shard.add_neighbor(peer.0, peer.1);
    shard
}

/// One fetch of `path` from the server's HTTP layer; its request count.
fn fetch(path: &str) -> (Result<Fetched, FetchError>, u64) {
    let (server_end, client_end) = socket_pair().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let config = LoopConfig::default();
    // The server's HTTP layer stays on its thread; its tally comes back.
    let server = spawn_with(
        0,
        false,
        config,
        stop.clone(),
        move || Ok((shard(SERVER_MAC, SERVER, (CLIENT, CLIENT_MAC)), server_end, HttpShard::new(80, 1 << 30))),
        |_, result, parts: Option<(Shard, HttpShard)>| (result, parts.map(|(_, app)| app.leave())),
    )
    .unwrap();
    let path = path.to_owned();
    let client_stop = Arc::new(AtomicBool::new(false));
    let client = spawn(1, false, config, client_stop.clone(), move || {
        let fetcher = Fetcher::new(SocketAddrV4::new(SERVER, 80), &path);
        Ok((shard(CLIENT_MAC, CLIENT, (SERVER, SERVER_MAC)), client_end, fetcher))
    })
    .unwrap();
    // The fetch ends by itself; the watchdog only bounds a hang.
    std::thread::spawn(move || {
        std::thread::sleep(Duration::from_secs(60));
        client_stop.store(true, Ordering::Relaxed);
    });
    let client = join_all(vec![client]).remove(0);
    stop.store(true, Ordering::Relaxed);
    let (result, tally) = server.join().unwrap();
    result.unwrap();
    client.result.unwrap();
    let outcome = client.app.unwrap().outcome.expect("the fetch did not finish within 60 s");
    (outcome, tally.unwrap().requests)
}

fn pattern_sha256(n: u64) -> String {
    let mut digest = Sha256::new();
    let body: Vec<u8> = (0..n).map(pattern_byte).collect();
    digest.update(&body);
    hex(&digest.finalize())
}

#[test]
fn a_megabyte_download_arrives_intact() {
    let (outcome, requests) = fetch("/bytes/1048576");
    let fetched = outcome.unwrap();
    assert_eq!(fetched, Fetched { status: 200, body_len: 1 << 20, sha256: pattern_sha256(1 << 20) });
    assert_eq!(requests, 1);
}

#[test]
fn an_empty_body_and_an_unknown_path() {
    let (outcome, _) = fetch("/bytes/0");
    assert_eq!(outcome.unwrap(), Fetched { status: 200, body_len: 0, sha256: pattern_sha256(0) });
    let (outcome, _) = fetch("/nothing/here");
    let fetched = outcome.unwrap();
    assert_eq!((fetched.status, fetched.body_len), (404, 10));
}

#[test]
fn a_fetch_without_a_route_fails_cleanly() {
    let (end, _other) = socket_pair().unwrap();
    let handle = spawn(0, false, LoopConfig::default(), Arc::new(AtomicBool::new(false)), move || {
        // 192.168.9.9 is outside the /24 and there is no gateway.
        Ok((shard(CLIENT_MAC, CLIENT, (SERVER, SERVER_MAC)), end, Fetcher::new("192.168.9.9:80".parse().unwrap(), "/")))
    })
    .unwrap();
    let exit = join_all(vec![handle]).remove(0);
    assert!(matches!(exit.app.unwrap().outcome, Some(Err(FetchError::Connect(_)))));
}
