//! Fairway over TAP against the Linux kernel's TCP, on testbeds these tests
//! build and remove (root). One test at a time.
#![cfg(target_os = "linux")]

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fairway_nic::tap::Tap;
use fairway_stack::{DropReason, Shard};
use fairway_tests::apps::http_shard::HttpShard;
use fairway_tests::real_peers::{
    HTTP_PORT, Shards, curl_sha256, parse_mac, pattern_sha256, python_concurrent, python_upload, shard_config,
    wait_until_reachable,
};
use fairway_tests::testbed::{self, TAP_IF, Testbed, TestbedConfig};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn prefix() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("ft{}_{}", std::process::id() % 100_000, NEXT.fetch_add(1, Ordering::Relaxed))
}

const T: Duration = Duration::from_secs(60);

fn serve(tb: &Testbed) -> Shards<HttpShard> {
    // Over TAP the stack has its own MAC: the bridge keeps fwtap0's.
    let (mac, ip, len) = (parse_mac(&tb.tap_stack_mac()), tb.server_ip(), tb.prefix_len());
    let shards = Shards::start(&tb.server_ns(), 1, move |_, _| {
        let tap = Tap::open(TAP_IF).map_err(|e| std::io::Error::other(e.to_string()))?;
        Ok((Shard::new(shard_config(mac, ip, len, 0, 1)), tap, HttpShard::new(HTTP_PORT, 1 << 30)))
    })
    .unwrap();
    wait_until_reachable(tb, 0, Duration::from_secs(10));
    shards
}

#[test]
fn kernel_clients_download_upload_and_ping_over_tap() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    testbed::require_root().unwrap_or_else(|e| panic!("{e}"));
    let tb = Testbed::up(TestbedConfig::new(prefix()).clients(2).queues(1)).unwrap();
    let server = serve(&tb);
    for size in [1u64, 1448, 65_536, 1 << 20, 20 << 20] {
        assert_eq!(curl_sha256(&tb, 0, &format!("/bytes/{size}"), T).unwrap(), pattern_sha256(size));
    }
    for size in [0u64, 100_000, 3 << 20] {
        python_upload(&tb, 1, size, T).unwrap_or_else(|e| panic!("upload of {size} bytes: {e}"));
    }
    let ping = testbed::exec(&tb.client_ns(1), &["ping", "-c", "3", "-i", "0.2", "-W", "2", "10.77.0.1"]).unwrap();
    assert!(ping.stdout_text().contains("3 received"), "{}", ping.stdout_text());
    let neigh = testbed::exec(&tb.client_ns(1), &["ip", "neigh", "show", "10.77.0.1"]).unwrap();
    assert!(neigh.stdout_text().contains(&tb.tap_stack_mac()), "{}", neigh.stdout_text());
    let exit = server.stop().remove(0);
    exit.result.unwrap();
    assert_eq!(exit.app.unwrap().requests, 8);
    assert_eq!(exit.shard.unwrap().counters().dropped(DropReason::TcpNoConnection), 0);
}

#[test]
fn a_thousand_concurrent_kernel_connections_over_tap() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    testbed::require_root().unwrap_or_else(|e| panic!("{e}"));
    let tb = Testbed::up(TestbedConfig::new(prefix()).clients(1).queues(1)).unwrap();
    let server = serve(&tb);
    assert_eq!(python_concurrent(&tb, 0, 1000, 2000, T), 1000);
    let app = server.stop().remove(0).app.unwrap();
    assert!(app.peak_connections >= 1000, "peak {}", app.peak_connections);
}
