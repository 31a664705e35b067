//! The `fairway` server's userspace backend over AF_XDP against kernel
//! clients, on testbeds these tests build and remove (root; `cargo xtask
//! test` runs them with the `afxdp` feature). The server runs through the
//! same code path as `fairway --backend afxdp`: flags parsed into a
//! `Config`, then `backend::userspace`. One test at a time.
#![cfg(all(target_os = "linux", feature = "afxdp"))]

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};

use fairway_stack::Drop;
use fairway_tests::real_peers::python_concurrent;
use fairway_tests::served::{
    Root, Served, T, check_endpoints, check_graceful_shutdown, check_static_files, check_uploads,
    python_held_connections,
};
use fairway_tests::testbed::{self, SERVER_IF, Testbed, TestbedConfig};

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn prefix() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("sx{}_{}", std::process::id() % 100_000, NEXT.fetch_add(1, Ordering::Relaxed))
}

fn testbed(clients: usize, queues: usize) -> Testbed {
    testbed::require_root().unwrap_or_else(|e| panic!("{e}"));
    Testbed::up(TestbedConfig::new(prefix()).clients(clients).queues(queues))
        .unwrap_or_else(|e| panic!("testbed up: {e}"))
}

fn flags<'a>(tb: &Testbed, ip: &'a str, extra: &[&'a str]) -> Vec<&'a str> {
    assert_eq!(ip, format!("{}/{}", tb.server_ip(), tb.prefix_len()));
    let mut flags = vec!["--backend", "afxdp", "--iface", SERVER_IF, "--ip", ip];
    flags.extend_from_slice(extra);
    flags
}

#[test]
fn kernel_clients_get_every_endpoint_files_uploads_and_a_graceful_shutdown() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tb = testbed(2, 1);
    let root = Root::new("afxdp");
    let root_arg = root.arg();
    let served = Served::start(
        &tb,
        &flags(
            &tb,
            "10.77.0.1/24",
            &["--queues", "1", "--shards", "1", "--root", &root_arg, "--shutdown-grace", "15s"],
        ),
    );
    let mut requests = check_endpoints(&tb, 0);
    requests += check_static_files(&tb, 1, &root);
    requests += check_uploads(&tb, 1);
    let reports = check_graceful_shutdown(&tb, served);
    let [report] = reports.as_slice() else { panic!("one shard: {reports:?}") };
    // Plus the idle client's request and the download in flight; the
    // escape attempt and the 404 are answered too.
    assert_eq!(report.requests, requests + 2, "{report:?}");
    assert_eq!(report.refused, 0);
    assert!(report.counters.dropped(Drop::TcpNoConnection) > 0, "the SYN after the stop found no listener");
    // The XDP program was detached when the device was dropped.
    let link = testbed::exec(&tb.server_ns(), &["ip", "link", "show", SERVER_IF]).unwrap();
    assert!(!link.stdout_text().contains("xdp"), "{}", link.stdout_text());
}

#[test]
fn two_shards_on_a_two_queue_veth_both_serve() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tb = testbed(2, 2);
    let served = Served::start(&tb, &flags(&tb, "10.77.0.1/24", &["--queues", "2", "--shards", "2"]));
    assert_eq!(python_concurrent(&tb, 0, 200, 50_000, T), 200);
    assert_eq!(python_concurrent(&tb, 1, 200, 50_000, T), 200);
    let reports = served.stop();
    assert_eq!(reports.len(), 2);
    for report in &reports {
        assert!(report.accepted > 20, "shard {} accepted only {}: both must serve", report.index, report.accepted);
        assert_eq!(report.requests, report.accepted, "one request per connection");
    }
    assert_eq!(reports.iter().map(|r| r.accepted).sum::<u64>(), 400);
}

#[test]
fn the_connection_limit_refuses_what_is_beyond_it() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tb = testbed(1, 1);
    let served = Served::start(&tb, &flags(&tb, "10.77.0.1/24", &["--max-connections", "50"]));
    // 200 connections held open at once: the first 50 are served, the
    // rest reset.
    assert_eq!(python_held_connections(&tb, 0, 200), (50, 150));
    let reports = served.stop();
    assert_eq!((reports[0].accepted, reports[0].refused), (50, 150));
}
