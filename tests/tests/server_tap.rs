//! The `fairway` server's userspace backend over TAP against kernel
//! clients, on testbeds these tests build and remove (root). The server
//! runs through the same code path as `fairway --backend tap`. One test at
//! a time.
#![cfg(target_os = "linux")]

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use std::time::Duration;

use fairway_tests::apps::handler_app::test_app;
use fairway_tests::platform::{Target, check_curl_bytes, check_edges, check_handler_app};
use fairway_tests::served::{
    Root, Served, check_endpoints, check_graceful_shutdown, check_large_files, check_static_files, check_uploads,
    check_wrk,
};
use fairway_tests::testbed::{self, LinkParams, TAP_IF, Testbed, TestbedConfig};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn prefix() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("st{}_{}", std::process::id() % 100_000, NEXT.fetch_add(1, Ordering::Relaxed))
}

/// A testbed with `clients` clients and one queue (root), and the server's
/// `--ip` on it.
fn testbed(clients: usize) -> (Testbed, String) {
    testbed::require_root().unwrap_or_else(|e| panic!("{e}"));
    let tb = Testbed::up(TestbedConfig::new(prefix()).clients(clients).queues(1)).unwrap();
    let ip = tb.server_prefix();
    (tb, ip)
}

#[test]
fn kernel_clients_get_every_endpoint_files_uploads_and_a_graceful_shutdown_over_tap() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let (tb, ip) = testbed(2);
    let root = Root::new("tap").with_large("large.bin", 1_000_000_000);
    let root_arg = root.arg();
    let served = Served::start(
        &tb,
        &["--backend", "tap", "--tap-name", TAP_IF, "--ip", &ip, "--root", &root_arg, "--shutdown-grace", "15s"],
    );
    // The stack answers ARP with its own MAC, not the TAP's (the bridge's).
    let neigh = testbed::exec(&tb.client_ns(0), &["ip", "neigh", "show", &tb.server_ip().to_string()]).unwrap();
    assert!(neigh.stdout_text().contains(&tb.tap_stack_mac()), "{}", neigh.stdout_text());
    let mut requests = check_endpoints(&tb, 0);
    requests += check_static_files(&tb, 1, &root);
    requests += check_large_files(&tb, 1, &root, Duration::from_secs(180));
    requests += check_uploads(&tb, 1);
    let reports = check_graceful_shutdown(&tb, served);
    let [report] = reports.as_slice() else { panic!("one shard: {reports:?}") };
    assert_eq!(report.requests, requests + 2, "{report:?}");
    assert_eq!(report.refused, 0);
}

#[test]
fn a_short_wrk_run_over_tap() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let (tb, ip) = testbed(1);
    let served = Served::start(&tb, &["--backend", "tap", "--tap-name", TAP_IF, "--ip", &ip]);
    check_wrk(&tb, 0);
    let reports = served.stop();
    assert!(reports[0].requests > 2000, "{reports:?}");
}

/// A user's `Handler` application over TAP (see the AF_XDP test of the
/// same name).
/// The edges foreign clients found (issue 12) over TAP (see the AF_XDP
/// test of the same name).
#[test]
fn the_edges_foreign_clients_found_are_answered_over_tap() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let (tb, ip) = testbed(1);
    let served = Served::start(&tb, &["--backend", "tap", "--tap-name", TAP_IF, "--ip", &ip, "--body-timeout", "1s"]);
    let answered = check_edges(&Target::testbed(&tb, 0));
    let reports = served.stop();
    assert_eq!(reports[0].requests, answered, "{reports:?}");
}

#[test]
fn a_user_handler_over_tap() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let (tb, ip) = testbed(1);
    let flags = ["--backend", "tap", "--tap-name", TAP_IF, "--ip", &ip, "--response-timeout", "1s"];
    let served = Served::start_with(&tb, &flags, |b| b.handler(test_app));
    let target = Target::testbed(&tb, 0);
    let requests = check_handler_app(&target, Duration::from_secs(1)) + check_curl_bytes(&target, &[1, 3_000_000]);
    let reports = served.stop();
    assert_eq!(reports[0].requests, requests, "{reports:?}");
}

/// IPv6 over TAP, with the client behind the link emulator (which passes
/// IPv6 and its multicast as any frame): as over AF_XDP, the kernel
/// resolves the stack by Neighbor Discovery and its `ping -6` is answered;
/// curl, Python and wrk over IPv6.
#[test]
fn the_kernel_resolves_fairway_over_ipv6_through_the_tap_and_the_link_emulator() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    testbed::require_root().unwrap_or_else(|e| panic!("{e}"));
    let link = LinkParams::parse_list("delay=5ms").unwrap();
    let tb = Testbed::up(TestbedConfig::new(prefix()).clients(1).queues(1).ipv6(true).link(0, link))
        .unwrap_or_else(|e| panic!("testbed up: {e}"));
    let ip6 = tb.server_prefix6();
    let served = Served::start(&tb, &["--backend", "tap", "--ip", &tb.server_prefix(), "--ip", &ip6, "--shards", "1"]);
    fairway_tests::served::check_ipv6_neighbour_and_ping(&tb, 0, tb.tap_stack_mac());
    let size = 4 << 20;
    let got =
        fairway_tests::real_peers::curl6_sha256(&tb, 0, &format!("/bytes/{size}"), Duration::from_secs(60)).unwrap();
    assert_eq!(got, fairway_tests::real_peers::pattern_sha256(size), "/bytes/{size} over IPv6");
    let v6 = tb.server_ip6().to_string();
    fairway_tests::real_peers::python_upload_to(&tb, 0, &format!("[{v6}]"), 1 << 20, Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("upload over IPv6: {e}"));
    fairway_tests::served::check_wrk_at(&tb, 0, &format!("http://[{v6}]/plaintext"));
    let reports = served.stop();
    assert!(reports.iter().map(|r| r.counters.echo_replies).sum::<u64>() >= 3, "{reports:?}");
}
