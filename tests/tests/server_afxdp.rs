//! The `fairway` server's userspace backend over AF_XDP against kernel
//! clients, on testbeds these tests build and remove (root; `cargo xtask
//! test` runs them with the `afxdp` feature). The server runs through the
//! same code path as `fairway --backend afxdp`: flags parsed into a
//! `Config`, then `backend::userspace`. One test at a time.
#![cfg(all(target_os = "linux", feature = "afxdp"))]

use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use fairway_stack::DropReason;
use fairway_tests::apps::handler_app::test_app;
use fairway_tests::certificate::{KeyKind, self_signed_in};
use fairway_tests::http2::{check_http2, check_http2_defences};
use fairway_tests::platform::{
    Target, check_axum_example, check_axum_tower, check_curl_bytes, check_edges, check_handler_app,
    countdown_in_flight, garbage, gauge, header_timeout, keep_alive_load, request_in_flight, reset_mid_response,
    wait_for_gauge,
};
use fairway_tests::real_peers::python_concurrent;
use fairway_tests::served::{
    Root, Served, T, check_endpoints, check_graceful_shutdown, check_large_files, check_static_files, check_uploads,
    check_wrk, curl_body, python_held_connections,
};
use fairway_tests::testbed::{self, SERVER_IF, Testbed, TestbedConfig};

#[path = "../../server/examples/axum_app.rs"]
#[allow(dead_code)]
mod axum_app;

#[path = "../../server/examples/axum_tower.rs"]
#[allow(dead_code)]
mod axum_tower;

static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

/// Time a 1 GB download has (it takes a few seconds here).
const LARGE_TIMEOUT: Duration = Duration::from_secs(120);

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
    assert_eq!(ip, tb.server_prefix());
    let mut flags = vec!["--backend", "afxdp", "--iface", SERVER_IF, "--ip", ip];
    flags.extend_from_slice(extra);
    flags
}

#[test]
fn kernel_clients_get_every_endpoint_files_uploads_and_a_graceful_shutdown() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tb = testbed(2, 1);
    let root = Root::new("afxdp").with_large("large.bin", 1_000_000_000);
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
    requests += check_large_files(&tb, 1, &root, LARGE_TIMEOUT);
    requests += check_uploads(&tb, 1);
    let reports = check_graceful_shutdown(&tb, served);
    let [report] = reports.as_slice() else { panic!("one shard: {reports:?}") };
    // Plus the idle client's request and the download in flight; the
    // escape attempt and the 404 are answered too.
    assert_eq!(report.requests, requests + 2, "{report:?}");
    assert_eq!(report.refused, 0);
    assert!(report.counters.dropped(DropReason::TcpNoConnection) > 0, "the SYN after the stop found no listener");
    // The kernel finished every TCP checksum (transmit metadata, copy mode):
    // the shard left each segment's partial, resets and SYN-ACKs included.
    let c = &report.counters;
    assert!(c.segments_out > 100_000 && c.checksums_offloaded == c.segments_out, "{c:?}");
    // The XDP program was detached when the device was dropped.
    let link = testbed::exec(&tb.server_ns(), &["ip", "link", "show", SERVER_IF]).unwrap();
    assert!(!link.stdout_text().contains("xdp"), "{}", link.stdout_text());
}

/// Jumbo frames: with every link at MTU 9000 the server binds multi-buffer
/// AF_XDP (a 9014-byte frame is three 4096-byte UMEM frames), its stack
/// announces an MSS of 8960, the kernel's 9000-byte pings are answered, and a
/// 1 GB static file arrives byte-exact in about one frame per 8,948 bytes
/// (at MTU 1500 it would take six times as many). Two shards on two queues:
/// a jumbo frame that lands on the other shard's queue is steered whole.
#[test]
fn at_mtu_9000_a_1_gb_file_crosses_in_jumbo_frames_byte_exact_and_jumbo_pings_are_answered() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    testbed::require_root().unwrap_or_else(|e| panic!("{e}"));
    let tb = Testbed::up(TestbedConfig::new(prefix()).clients(1).queues(2).mtu(9000))
        .unwrap_or_else(|e| panic!("testbed up: {e}"));
    let root = Root::new("afxdp-jumbo").with_large("large.bin", 1_000_000_000);
    let root_arg = root.arg();
    let served =
        Served::start(&tb, &flags(&tb, "10.77.0.1/24", &["--queues", "2", "--shards", "2", "--root", &root_arg]));
    let server = tb.server_ip().to_string();
    let ping = testbed::exec(
        &tb.client_ns(0),
        &["ping", "-c", "3", "-s", "8972", "-M", "do", "-i", "0.2", "-W", "2", &server],
    )
    .unwrap();
    assert!(ping.success() && ping.stdout_text().contains("3 received"), "jumbo ping: {}", ping.stdout_text());
    assert!(!ping.stdout_text().contains("wrong data"), "{}", ping.stdout_text());
    check_large_files(&tb, 0, &root, LARGE_TIMEOUT);
    let reports = served.stop();
    assert_eq!(reports.len(), 2);
    let sum = |f: fn(&fairway::backend::ShardReport) -> u64| reports.iter().map(f).sum::<u64>();
    // Served::start's own reachability ping, and the three jumbo ones.
    assert!(sum(|r| r.counters.echo_replies) > 3, "{reports:?}");
    let most = 1_000_000_000 / 8_948 + 20_000;
    let frames_out = sum(|r| r.counters.frames_out);
    assert!(frames_out < most, "{frames_out} frames out: not jumbo segments");
    // Over an unaligned UMEM a frame of several UMEM frames carries its
    // checksum request too: every segment's checksum was left to the kernel.
    let (offloaded, segments) = (sum(|r| r.counters.checksums_offloaded), sum(|r| r.counters.segments_out));
    assert!(segments > 100_000 && offloaded == segments, "{offloaded} of {segments} segments offloaded");
}

/// Without multi-buffer (`--no-multi-buffer`, as when the kernel refuses
/// it) at MTU 9000 the server still works: its frames are one 4096-byte
/// UMEM frame at most, so its stack announces an MSS that fits, and a
/// download arrives byte-exact in segments of that size.
#[test]
fn at_mtu_9000_without_multi_buffer_the_server_falls_back_to_frames_of_one_umem_frame() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    testbed::require_root().unwrap_or_else(|e| panic!("{e}"));
    let tb = Testbed::up(TestbedConfig::new(prefix()).clients(1).queues(1).mtu(9000))
        .unwrap_or_else(|e| panic!("testbed up: {e}"));
    let served =
        Served::start(&tb, &flags(&tb, "10.77.0.1/24", &["--queues", "1", "--shards", "1", "--no-multi-buffer"]));
    let size = 100_000_000u64;
    let got = fairway_tests::real_peers::curl_sha256(&tb, 0, &format!("/bytes/{size}"), T).unwrap();
    assert_eq!(got, fairway_tests::real_peers::pattern_sha256(size));
    let reports = served.stop();
    let [report] = reports.as_slice() else { panic!("one shard: {reports:?}") };
    // 4096 − 256 = 3,840-byte frames: segments of 3,774 bytes with timestamps.
    let (fewest, most) = (size / 3_774, size / 3_774 + 20_000);
    let frames = report.counters.frames_out;
    assert!((fewest..most).contains(&frames), "{frames} frames out for {size} bytes: not 3,840-byte frames");
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

/// Steering off on a two-queue veth: each shard serves the connections its
/// own queue brings (ARP and ND alone reaching both, as one neighbour
/// table would), so both shards accept connections, and every one of 400
/// new connections is served. Without the neighbour
/// frames shard 1 could answer no SYN, and every connection on its queue
/// waited for a retransmission that landed on queue 0.
#[test]
fn two_shards_with_steering_off_each_serve_what_their_queue_brings() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tb = testbed(2, 2);
    let served =
        Served::start(&tb, &flags(&tb, "10.77.0.1/24", &["--queues", "2", "--shards", "2", "--steering", "off"]));
    assert_eq!(python_concurrent(&tb, 0, 200, 50_000, T), 200);
    assert_eq!(python_concurrent(&tb, 1, 200, 50_000, T), 200);
    let reports = served.stop();
    assert_eq!(reports.len(), 2);
    for report in &reports {
        assert!(report.accepted > 20, "shard {} accepted only {}: both must serve", report.index, report.accepted);
    }
    assert_eq!(reports.iter().map(|r| r.accepted).sum::<u64>(), 400);
    // The queues placed flows where the steering hash would not have.
    assert!(reports.iter().all(|r| r.counters.segments_not_owned > 0), "{reports:?}");
}

/// Every receive-path technique off (the ablation's conventional
/// baseline): nothing recycled (a buffer allocated per frame, per
/// connection buffer, per connection and per event), no steering, no busy
/// polling, no batching (one frame per turn). The server still answers
/// every endpoint, files byte-exact, uploads, and 200 concurrent clients,
/// and shuts down gracefully.
#[test]
fn with_every_receive_path_technique_off_kernel_clients_still_get_everything() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tb = testbed(2, 1);
    let root = Root::new("afxdp-all-off").with_large("large.bin", 100_000_000);
    let root_arg = root.arg();
    let off = [
        "--queues",
        "1",
        "--shards",
        "1",
        "--root",
        &root_arg,
        "--recycle",
        "none",
        "--steering",
        "off",
        "--busy-poll-us",
        "0",
        "--itr-us",
        "0",
        "--batch",
        "1",
        "--no-adaptive-batch",
        "--no-tx-checksum-offload",
    ];
    let served = Served::start(&tb, &flags(&tb, "10.77.0.1/24", &off));
    assert_eq!(served.config.recycle, fairway::config::Recycling::NONE);
    let mut requests = check_endpoints(&tb, 0);
    requests += check_static_files(&tb, 1, &root);
    requests += check_large_files(&tb, 1, &root, LARGE_TIMEOUT);
    requests += check_uploads(&tb, 1);
    assert_eq!(python_concurrent(&tb, 0, 200, 50_000, T), 200);
    requests += 200;
    let reports = check_graceful_shutdown(&tb, served);
    let [report] = reports.as_slice() else { panic!("one shard: {reports:?}") };
    assert!(report.requests >= requests, "{report:?}");
    assert_eq!(report.refused, 0);
    assert_eq!(report.counters.checksums_offloaded, 0, "every checksum computed in the shard");
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

/// A kernel client uploads without end; with `equal-rate` and a configured
/// capacity, `/metrics` shows the upload with a cap on the window the
/// server advertises, its RTTs and rate, and the policy in force.
#[test]
fn equal_rate_caps_a_running_uploads_window_in_metrics() {
    const UPLOADER: &str = r#"
import socket, sys
s = socket.create_connection((sys.argv[1], 80), timeout=60)
s.sendall(b"POST /upload HTTP/1.1\r\nHost: fairway\r\nContent-Length: 60000000000\r\n\r\n")
chunk = b"u" * 65536
print("uploading", flush=True)
while True:
    s.sendall(chunk)
"#;
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tb = testbed(2, 1);
    let served = Served::start(
        &tb,
        &flags(&tb, "10.77.0.1/24", &["--fairness", "equal-rate", "--capacity", "200mbit", "--max-body", "100gb"]),
    );
    let host = tb.server_ip().to_string();
    let mut uploader = testbed::spawn(&tb.client_ns(0), &["python3", "-u", "-c", UPLOADER, &host]).unwrap();
    uploader.wait_for_stdout("uploading", T).unwrap();
    let deadline = std::time::Instant::now() + T;
    let text = loop {
        let text = String::from_utf8(curl_body(&tb, 1, "/metrics", T).unwrap()).unwrap();
        let capped = text
            .lines()
            .any(|l| l.starts_with("fairway_fairness_flow_window_cap_bytes{") && l.contains("direction=\"upload\""));
        if capped || std::time::Instant::now() > deadline {
            break text;
        }
        std::thread::sleep(std::time::Duration::from_millis(500));
    };
    let output = uploader.kill();
    assert!(
        text.lines()
            .any(|l| l.starts_with("fairway_fairness_flow_window_cap_bytes{") && l.contains("direction=\"upload\"")),
        "no window cap on the upload: {text}\nuploader: {}",
        output.stderr_text()
    );
    assert!(text.contains("fairway_fairness_info{policy=\"equal-rate\",capacity_bits_per_second=\"200000000\"} 1"));
    assert!(text.contains("fairway_fairness_active_flows{shard=\"0\"} 1"), "{text}");
    assert!(text.contains("fairway_fairness_jain_index 1"), "{text}");
    for name in ["fairway_fairness_flow_srtt_seconds{", "fairway_fairness_flow_delivery_rate_bytes_per_second{"] {
        assert!(text.lines().any(|l| l.starts_with(name) && l.contains("direction=\"upload\"")), "{name}: {text}");
    }
    let reports = served.stop();
    assert_eq!(reports[0].refused, 0);
}

#[test]
fn a_short_wrk_run_over_afxdp() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tb = testbed(1, 1);
    let served = Served::start(&tb, &flags(&tb, "10.77.0.1/24", &[]));
    check_wrk(&tb, 0);
    let reports = served.stop();
    assert!(reports[0].requests > 2000, "{reports:?}");
}

/// A user's `Handler` application over AF_XDP: streams both ways,
/// deferred answers (one woken from another thread, through the shard's
/// eventfd), the response timeout, a pipeline, a panic, the limits.
#[test]
fn a_user_handler_over_afxdp() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tb = testbed(1, 1);
    let served =
        Served::start_with(&tb, &flags(&tb, "10.77.0.1/24", &["--response-timeout", "1s"]), |b| b.handler(test_app));
    let target = Target::testbed(&tb, 0);
    let requests = check_handler_app(&target, Duration::from_secs(1)) + check_curl_bytes(&target, &[1, 3_000_000]);
    let reports = served.stop();
    assert_eq!(reports[0].requests, requests, "{reports:?}");
}

/// Issue 37: HTTP/2 for a `Handler` over AF_XDP with two shards, with prior
/// knowledge on port 80 and by ALPN on 443: everything a client does, then
/// HTTP/2's own attacks over TLS.
#[test]
fn http2_for_a_handler_over_afxdp_with_prior_knowledge_and_tls_and_its_defences() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tb = testbed(1, 2);
    let dir = std::env::temp_dir().join(format!("fairway-afxdp-h2-{}", std::process::id()));
    let (cert, key) = tls_certificate(&dir);
    let extra = ["--queues", "2", "--response-timeout", "1s", "--tls-cert", &cert, "--tls-key", &key];
    let served = Served::start_with(&tb, &flags(&tb, "10.77.0.1/24", &extra), |b| b.handler(test_app));
    let plain = Target::testbed(&tb, 0);
    let tls = Target::testbed_port(&tb, 0, 443);
    let ca = std::path::Path::new(&cert);
    check_http2(&plain, None, Duration::from_secs(1));
    check_http2(&tls, Some(ca), Duration::from_secs(1));
    check_http2_defences(&tls, Some(ca), 128);
    assert!(gauge(served.handle(), "fairway_http2_streams_total") >= 2 * 120);
    let reports = served.stop();
    assert_eq!(reports.len(), 2);
    let _ = std::fs::remove_dir_all(dir);
}

/// The edges foreign clients found (issue 12) over AF_XDP: oversized heads
/// answered 431 before the close (they were bare resets), 414, 501, 505,
/// HTTP/1.2 as 1.1, and a slow body's 408.
#[test]
fn the_edges_foreign_clients_found_are_answered_over_afxdp() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tb = testbed(1, 1);
    let served = Served::start(&tb, &flags(&tb, "10.77.0.1/24", &["--body-timeout", "1s"]));
    let answered = check_edges(&Target::testbed(&tb, 0));
    let reports = served.stop();
    assert_eq!(reports[0].requests, answered, "{reports:?}");
}

/// The axum example on the async runtime over AF_XDP: its routes to curl
/// and Python, 10,000 requests over 256 connections, hyper's header
/// timeout, a peer's reset mid-response, garbage, and a graceful stop that
/// finishes the answer in flight.
#[test]
fn the_axum_example_over_afxdp() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tb = testbed(1, 1);
    let state = axum_app::AppState::default();
    let served = Served::start_with(&tb, &flags(&tb, "10.77.0.1/24", &["--header-timeout", "1s"]), |b| {
        b.axum(move || axum_app::app(state.clone()))
    });
    let target = Target::testbed(&tb, 0);
    check_axum_example(&target);
    assert_eq!(curl_body(&tb, 0, "/hello/curl", T).unwrap(), b"Hello, curl! (greeting 2)\n");
    let answered = keep_alive_load(&target, 256, 10_000, "/plaintext", b"Hello, World!", Duration::from_secs(60));
    assert_eq!(answered, Ok(10_000));
    let (took, said) = header_timeout(&target, Duration::from_secs(10));
    assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(5), "closed after {took:?} ({said})");
    assert!(reset_mid_response(&target, "/countdown/50").starts_with("HTTP/1.1 200"));
    let _ = garbage(&target);
    wait_for_gauge(served.handle(), "fairway_tasks", 1);
    assert_eq!(gauge(served.handle(), "fairway_task_panics_total"), 0);

    let mut countdown = countdown_in_flight(&target, 20);
    std::thread::sleep(Duration::from_millis(500));
    let reports = served.stop();
    countdown.wait_for_stdout("200", Duration::from_secs(10)).unwrap();
    let text = countdown.kill().stdout_text();
    assert!(text.contains("1... liftoff!"), "the countdown in flight completed: {text}");
    assert_eq!(reports.len(), 1);
}

/// Issue 37: an ordinary axum application, unchanged, over AF_XDP:
/// tower-http's middleware and tokio in its handlers, its `tokio::net`
/// client reaching an echo service on the server namespace's loopback
/// through the kernel while its clients come through the NIC; two shards,
/// under load, a panic that costs only its connection, and a request in
/// flight that a graceful stop lets finish.
#[test]
fn an_ordinary_axum_application_with_tower_http_and_tokio_over_afxdp() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tb = testbed(1, 2);
    let echo = testbed::in_netns(&tb.server_ns(), axum_tower::echo_service).unwrap().unwrap();
    let state = axum_tower::TowerState::new(echo);
    let served = Served::start_with(&tb, &flags(&tb, "10.77.0.1/24", &["--queues", "2"]), |b| {
        b.axum(move || axum_tower::app(state.clone()))
    });
    let target = Target::testbed(&tb, 0);
    check_axum_tower(&target);
    wait_for_gauge(served.handle(), "fairway_task_panics_total", 1);
    let answered = keep_alive_load(&target, 256, 10_000, "/spawned", b"10! = 3628800\n", Duration::from_secs(60));
    assert_eq!(answered, Ok(10_000));
    let upstream = b"upstream said: ping from a handler\n";
    assert_eq!(keep_alive_load(&target, 64, 2_000, "/upstream", upstream, Duration::from_secs(60)), Ok(2_000));
    wait_for_gauge(served.handle(), "fairway_tasks", 2);

    // (Within the example's two-second request timeout.)
    let slow = request_in_flight(&target, "/sleep/1200");
    std::thread::sleep(Duration::from_millis(600));
    let reports = served.stop();
    let text = slow.wait_timeout(Duration::from_secs(10)).unwrap().stdout_text();
    assert!(text.starts_with("200 slept 12"), "the request in flight was answered: {text}");
    assert_eq!(reports.len(), 2);
}

/// Issue 12: the attack that cost the most in the simulated network (ACK
/// division: the highest CPU per attacking frame and the lowest goodput
/// left to the others) over AF_XDP, from a raw-socket attacker in a client
/// namespace, beside kernel curl clients sharing a 100 Mbit/s link to the
/// server. Two honest and two attacking rounds, alternating. Checked: every
/// download intact (the legitimate ones and, once it behaves, the
/// attacker's), no connection left, and the server's resident memory after
/// an attacking round within its four connections' buffers of the honest
/// rounds'. Printed (timings are for benchmarks, not assertions here): the
/// legitimate goodput against the honest rounds', the shard's CPU per
/// received frame, and its extra CPU per forged frame.
#[test]
fn the_worst_tcp_attack_over_afxdp_leaves_downloads_intact_and_memory_bounded() {
    use fairway_tests::attack_testbed::{LiveRound, live_attack};
    use fairway_tests::attacks::Attack;
    use fairway_tests::testbed::LinkParams;

    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    testbed::require_root().unwrap_or_else(|e| panic!("{e}"));
    let link = LinkParams::parse_list("rate=100mbit,delay=5ms").expect("link");
    let tb = Testbed::up(TestbedConfig::new(prefix()).clients(2).queues(1).server_link(link))
        .unwrap_or_else(|e| panic!("testbed up: {e}"));
    let socket_buffer = 1u64 << 20;
    let served = Served::start(
        &tb,
        &flags(
            &tb,
            "10.77.0.1/24",
            &["--queues", "1", "--shards", "1", "--busy-poll-us", "0", "--socket-buffer", "1MiB"],
        ),
    );
    let mut rounds: Vec<LiveRound> = Vec::new();
    for round in 0..2u64 {
        for attack in [Attack::Honest, Attack::AckDivision] {
            rounds.push(live_attack(&tb, served.handle(), attack, round + 1, 2, 20_000_000));
        }
    }
    assert_eq!(served.stop().len(), 1);
    for r in &rounds {
        println!(
            "{:<14} legitimate {}/{} at {:6.1} Mbit/s in {:.1} s, attacker {}/{} in {:.1} s ({} frames, {} forged, \
             {} dropped by its port), shard CPU {:5.2} µs/frame over {} frames ({:.2} s; the attacker's {:.2} s, \
             the link emulators' {:.2} s; machine {:.0} % busy), RSS {} MiB, {} connections left",
            r.attack.name(),
            r.legitimate_intact.0,
            r.legitimate_intact.1,
            r.goodput_mbps,
            r.download_time.as_secs_f64(),
            r.attacker_intact.0,
            r.attacker_intact.1,
            r.attacker_time.as_secs_f64(),
            r.attacker_sent,
            r.forged,
            r.port_dropped,
            r.cpu_per_frame_us(),
            r.frames_in,
            r.shard_cpu.as_secs_f64(),
            r.attacker_cpu.as_secs_f64(),
            r.linkem_cpu.as_secs_f64(),
            r.machine_busy * 100.0,
            r.rss_after >> 20,
            r.connections_after
        );
    }
    let of = |attack: Attack| rounds.iter().filter(move |r| r.attack == attack);
    let goodput = |attack: Attack| of(attack).map(|r| r.goodput_mbps).sum::<f64>() / 2.0;
    let cpu = |attack: Attack| of(attack).map(LiveRound::cpu_per_frame_us).sum::<f64>() / 2.0;
    // The shard's extra CPU time in an attacking round over the honest
    // round before it, per forged frame, against an honest round's CPU per
    // frame received.
    let marginal: Vec<f64> = rounds
        .chunks(2)
        .map(|pair| {
            let extra = pair[1].shard_cpu.as_secs_f64() - pair[0].shard_cpu.as_secs_f64();
            extra * 1e6 / pair[1].forged.max(1) as f64 / pair[0].cpu_per_frame_us()
        })
        .collect();
    println!(
        "ack-division over AF_XDP: legitimate goodput {:.3} of the honest rounds', shard CPU per frame {:.2}× theirs, \
         extra shard CPU per forged frame {:.2}× and {:.2}× an honest frame's",
        goodput(Attack::AckDivision) / goodput(Attack::Honest),
        cpu(Attack::AckDivision) / cpu(Attack::Honest),
        marginal[0],
        marginal[1]
    );
    for r in &rounds {
        assert_eq!(r.legitimate_intact.0, r.legitimate_intact.1, "{r:?}");
        assert_eq!(r.attacker_intact.0, r.attacker_intact.1, "{}\n{r:?}", r.attacker_unfinished.join("\n"));
        assert_eq!(r.connections_after, 0, "{r:?}");
    }
    assert!(of(Attack::AckDivision).all(|r| r.forged > 10_000), "the attack was sent");
    let honest_rss = of(Attack::Honest).map(|r| r.rss_after).max().unwrap_or(0);
    let bound = honest_rss + 4 * 2 * socket_buffer + (8 << 20);
    for r in of(Attack::AckDivision) {
        assert!(r.rss_after <= bound, "RSS {} B after the attack, over {bound} B", r.rss_after);
    }
    tb.down().unwrap_or_else(|e| panic!("testbed down: {e}"));
}

/// IPv6 beside IPv4 (`--ip fd77::1/64`): the server's addresses come up
/// after duplicate address detection, the kernel resolves Fairway by
/// Neighbor Discovery and its `ping -6` is answered, at the global and the
/// link-local address; kernel curl downloads over IPv6 arrive byte-exact
/// (Fairway resolving the client by Neighbor Discovery in turn), up to
/// 1 GB; Python uploads, 1,000 connections at once and wrk work over IPv6;
/// IPv4 and IPv6 clients are served at the same time by the same two
/// shards, which steer each IPv6 flow to its owner.
#[test]
fn the_kernel_resolves_fairway_over_ipv6_pings_it_and_downloads_byte_exact() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    testbed::require_root().unwrap_or_else(|e| panic!("{e}"));
    let tb = Testbed::up(TestbedConfig::new(prefix()).clients(2).queues(2).ipv6(true))
        .unwrap_or_else(|e| panic!("testbed up: {e}"));
    let flags: Vec<String> =
        [tb.afxdp_flags(), ["--queues", "2", "--shards", "2"].map(str::to_owned).to_vec()].concat();
    let served = Served::start(&tb, &flags.iter().map(String::as_str).collect::<Vec<_>>());
    fairway_tests::served::check_ipv6_neighbour_and_ping(&tb, 0, tb.server_mac());
    // HTTP over IPv6: bodies byte-exact, from one byte to 20 MB.
    for size in [1u64, 1439, 1440, 1441, 1 << 20, 20 << 20, 1_000_000_000] {
        let got = fairway_tests::real_peers::curl6_sha256(&tb, 0, &format!("/bytes/{size}"), LARGE_TIMEOUT);
        assert_eq!(got.unwrap(), fairway_tests::real_peers::pattern_sha256(size), "/bytes/{size} over IPv6");
    }
    let (v4, v6) = (tb.server_ip().to_string(), tb.server_ip6().to_string());
    for size in [0u64, 100_000, 3 << 20] {
        fairway_tests::real_peers::python_upload_to(&tb, 1, &format!("[{v6}]"), size, T)
            .unwrap_or_else(|e| panic!("upload of {size} bytes over IPv6: {e}"));
    }
    assert_eq!(fairway_tests::real_peers::python_concurrent_to(&tb, 0, &v6, 1000, 1000, T), 1000);
    fairway_tests::served::check_wrk_at(&tb, 1, &format!("http://[{v6}]/plaintext"));
    // Both families at once, from both clients.
    std::thread::scope(|s| {
        let (tb, v4, v6) = (&tb, &v4, &v6);
        let ipv4 = s.spawn(move || fairway_tests::real_peers::python_concurrent_to(tb, 0, v4, 200, 50_000, T));
        let ipv6 = s.spawn(move || fairway_tests::real_peers::python_concurrent_to(tb, 1, v6, 200, 50_000, T));
        assert_eq!((ipv4.join().unwrap(), ipv6.join().unwrap()), (200, 200));
    });
    check_endpoints(&tb, 0);
    // /metrics says so too (a shard publishes at most once a second).
    let advertised = || {
        let text = String::from_utf8(curl_body(&tb, 0, "/metrics", T).unwrap()).unwrap();
        fairway_tests::platform::metric_samples(&text, "fairway_ipv6_neighbor_advertisements_total")
            .iter()
            .map(|(_, v)| v)
            .sum::<f64>()
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while advertised() < 1.0 {
        assert!(std::time::Instant::now() < deadline, "no advertisement in /metrics");
        std::thread::sleep(Duration::from_millis(200));
    }
    let reports = served.stop();
    assert_eq!(reports.len(), 2);
    let sum = |f: fn(&fairway::backend::ShardReport) -> u64| reports.iter().map(f).sum::<u64>();
    assert!(sum(|r| r.counters.neighbor_adverts) >= 1, "{reports:?}");
    assert!(sum(|r| r.counters.neighbor_solicits) >= 4, "each shard probes both addresses: {reports:?}");
    assert_eq!(sum(|r| r.counters.duplicate_addresses), 0, "{reports:?}");
    let (all, ipv6) = (sum(|r| r.counters.established), sum(|r| r.counters.established_ipv6));
    assert!(ipv6 >= 1000 && ipv6 < all, "{ipv6} of {all} connections over IPv6");
    // Every segment of every flow, IPv6 ones included, reached the shard
    // that owns it. (Segments with no connection are not the measure: a
    // client's retransmission after the server's close has none either.)
    assert_eq!(sum(|r| r.counters.segments_not_owned), 0, "{reports:?}");
}

/// A self-signed RSA certificate for `localhost` and its key in `dir`.
fn tls_certificate(dir: &std::path::Path) -> (String, String) {
    let (cert, key) = self_signed_in(dir, KeyKind::Rsa2048, "DNS:localhost").unwrap_or_else(|e| panic!("{e}"));
    (cert.display().to_string(), key.display().to_string())
}

/// Python's HTTPS client: keep-alive, an upload, ALPN, resumption.
const PYTHON_TLS_CLIENT: &str = include_str!("../../server/tests/support/tls_client.py");

#[test]
fn https_over_afxdp_for_curl_python_and_openssl_with_resumption_and_a_gigabyte_byte_exact() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tb = testbed(1, 2);
    let dir = std::env::temp_dir().join(format!("fairway-afxdp-tls-{}", std::process::id()));
    let (cert, key) = tls_certificate(&dir);
    let extra = ["--queues", "2", "--shards", "2", "--tls-cert", &cert, "--tls-key", &key, "--handshake-timeout", "2s"];
    let served = Served::start(&tb, &flags(&tb, "10.77.0.1/24", &extra));
    let ns = tb.client_ns(0);
    let server = tb.server_ip().to_string();
    let resolve = format!("localhost:443:{server}");
    let curl = |args: &[&str]| {
        let base = ["curl", "-sS", "--max-time", "120", "--cacert", &cert, "--resolve", &resolve];
        testbed::exec_timeout(&ns, &[&base[..], args].concat(), Duration::from_secs(130)).unwrap()
    };
    for version in [&["--tlsv1.3"][..], &["--tlsv1.2", "--tls-max", "1.2"]] {
        // h2 when the client offers it (curl does), http/1.1 otherwise.
        for (alpn, protocol) in [(&[][..], "h2"), (&["--http1.1"][..], "http/1.1")] {
            let out = curl(&[version, alpn, &["-v", "https://localhost/plaintext"]].concat());
            assert!(out.success(), "{version:?} {alpn:?}: {}", out.stderr_text());
            assert_eq!(out.stdout_text(), "Hello, World!");
            let accepted = format!("ALPN: server accepted {protocol}");
            assert!(out.stderr_text().contains(&accepted), "{}", out.stderr_text());
        }
    }
    // Stalled handshakes (5 bytes of a ClientHello, then nothing) are
    // closed at the handshake timeout, on both shards.
    const STALLED: &str = r#"
import selectors, socket, sys, time
sel, opened, took = selectors.DefaultSelector(), {}, []
for i in range(50):
    s = socket.create_connection((sys.argv[1], 443)); s.sendall(b"\x16\x03\x01\x02\x00"); s.setblocking(False)
    opened[i] = time.monotonic(); sel.register(s, selectors.EVENT_READ, i)
end = time.monotonic() + 20
while len(took) < 50 and time.monotonic() < end:
    for key, _ in sel.select(timeout=1):
        try:
            if key.fileobj.recv(4096): continue
        except BlockingIOError: continue
        except OSError: pass
        took.append(time.monotonic() - opened[key.data]); sel.unregister(key.fileobj)
print(len(took), f"{min(took):.3f}", f"{max(took):.3f}")
"#;
    let out =
        testbed::exec_timeout(&ns, &["python3", "-c", STALLED, &tb.server_ip().to_string()], Duration::from_secs(40))
            .unwrap();
    let said = out.stdout_text();
    let fields: Vec<&str> = said.split_whitespace().collect();
    assert_eq!(fields.first(), Some(&"50"), "every stalled handshake was closed: {said}{}", out.stderr_text());
    let (first, last): (f64, f64) = (fields[1].parse().unwrap(), fields[2].parse().unwrap());
    assert!(first >= 1.5 && last <= 3.0, "closed {first}..{last} s after opening, at a 2 s timeout");
    // Plain HTTP beside it, on port 80.
    assert_eq!(curl(&[&format!("http://{server}/plaintext")]).stdout_text(), "Hello, World!");
    // An upload with its SHA-256; a gigabyte byte-exact.
    let upload = dir.join("upload.bin");
    let data: Vec<u8> = (0..5_000_011u64).map(|i| (i * 13 % 241) as u8).collect();
    std::fs::write(&upload, &data).unwrap();
    let at = format!("@{}", upload.display());
    let digest: String = <sha2::Sha256 as sha2::Digest>::digest(&data).iter().map(|b| format!("{b:02x}")).collect();
    for alpn in ["--http2", "--http1.1"] {
        let out = curl(&[alpn, "--data-binary", &at, "https://localhost/upload"]);
        assert_eq!(out.stdout_text(), format!("{} {digest}\n", data.len()), "{alpn}");
    }
    // A gigabyte over HTTP/1.1, a hundred megabytes over HTTP/2.
    for (alpn, n) in [("--http1.1", 1_000_000_000u64), ("--http2", 100_000_000)] {
        let script = format!(
            "curl -sS -f {alpn} --max-time 120 --cacert {cert} --resolve {resolve} https://localhost/bytes/{n} | \
             sha256sum; exit ${{PIPESTATUS[0]}}"
        );
        let out =
            testbed::exec_timeout(&ns, &["bash", "-c", &script], LARGE_TIMEOUT + Duration::from_secs(10)).unwrap();
        assert!(out.success(), "{}", out.stderr_text());
        let got = out.stdout_text().split_whitespace().next().unwrap_or_default().to_owned();
        assert_eq!(got, fairway_tests::real_peers::pattern_sha256(n), "{n} bytes over TLS {alpn} byte-exact");
    }
    // Python: keep-alive, ALPN, resumption with both versions.
    let out = testbed::exec_timeout(
        &ns,
        &["python3", "-c", PYTHON_TLS_CLIENT, &server, "443", &cert],
        Duration::from_secs(60),
    )
    .unwrap();
    assert!(out.success(), "{}{}", out.stdout_text(), out.stderr_text());
    let said = out.stdout_text();
    assert!(said.contains("TLSv1_3 resumed") && said.contains("TLSv1_2 resumed"), "{said}");
    // openssl s_client: ALPN and verification, then the session resumed
    // by a second connection (the first reads the response, and with it
    // TLS 1.3's tickets).
    let session = dir.join("session.pem");
    let s_client = |resume: &str| {
        let script = format!(
            "printf 'GET /plaintext HTTP/1.1\\r\\nHost: localhost\\r\\nConnection: close\\r\\n\\r\\n' | \
             openssl s_client -connect {server}:443 -servername localhost -CAfile {cert} -alpn http/1.1 -ign_eof \
             {resume} {}",
            session.display()
        );
        testbed::exec_timeout(&ns, &["bash", "-c", &script], Duration::from_secs(60)).unwrap().stdout_text()
    };
    let said = s_client("-sess_out");
    assert!(said.contains("ALPN protocol: http/1.1") && said.contains("Verify return code: 0 (ok)"), "{said}");
    assert!(said.contains("New, TLSv1.3") && said.contains("Hello, World!"), "{said}");
    let said = s_client("-sess_in");
    assert!(said.contains("Reused, TLSv1.3") && said.contains("Hello, World!"), "{said}");
    // Plain HTTP to the TLS port: an alert record, then the end, and the
    // server goes on.
    let garbage = format!(
        "import socket\ns = socket.create_connection(('{server}', 443), timeout=10)\n\
         s.sendall(b'GET / HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n')\nreply = b''\nwhile True:\n    \
         c = s.recv(4096)\n    if not c: break\n    reply += c\nprint(reply[:1].hex(), len(reply))\n"
    );
    let out = testbed::exec_timeout(&ns, &["python3", "-c", &garbage], Duration::from_secs(30)).unwrap();
    assert!(out.success() && out.stdout_text().starts_with("15 "), "{}{}", out.stdout_text(), out.stderr_text());
    assert_eq!(curl(&["https://localhost/plaintext"]).stdout_text(), "Hello, World!");
    let reports = served.stop();
    assert!(reports.iter().map(|r| r.requests).sum::<u64>() >= 12, "{reports:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn the_axum_example_over_tls_on_afxdp() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tb = testbed(1, 1);
    let dir = std::env::temp_dir().join(format!("fairway-afxdp-axum-tls-{}", std::process::id()));
    let (cert, key) = tls_certificate(&dir);
    let state = axum_app::AppState::default();
    let extra = ["--tls-cert", cert.as_str(), "--tls-key", key.as_str()];
    let served =
        Served::start_with(&tb, &flags(&tb, "10.77.0.1/24", &extra), |b| b.axum(move || axum_app::app(state.clone())));
    // Where it says it serves: port 80 and 443 of --ip.
    let at = |port: u16| std::net::SocketAddr::from((tb.server_ip(), port));
    assert_eq!((served.handle().local_addr(), served.handle().tls_local_addr()), (at(80), Some(at(443))));
    let resolve = format!("localhost:443:{}", tb.server_ip());
    let curl = |path: &str| {
        let url = format!("https://localhost{path}");
        let line = ["curl", "-sS", "--max-time", "20", "--cacert", &cert, "--resolve", &resolve, &url];
        let out = testbed::exec_timeout(&tb.client_ns(0), &line, Duration::from_secs(30)).unwrap();
        assert!(out.success(), "{path}: {}", out.stderr_text());
        out.stdout_text()
    };
    assert!(curl("/hello/fairway").starts_with("Hello, fairway! (greeting "));
    assert_eq!(curl("/countdown/3"), "3...\n2...\n1... liftoff!\n");
    // Plain HTTP beside it, the same application.
    assert_eq!(curl_body(&tb, 0, "/plaintext", T).unwrap(), b"Hello, World!");
    let reports = served.stop();
    assert!(reports.iter().map(|r| r.accepted).sum::<u64>() >= 3, "{reports:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// The reverse proxy over AF_XDP: kernel clients reach the userspace
/// stack, whose shards reach their upstreams through kernel sockets on the
/// server namespace's loopback: the built-in server on kernel sockets
/// (generated bytes, uploads with their SHA-256) and `python3 -m
/// http.server` (a file), routed by path prefix, and nginx (a file), routed
/// by host.
#[test]
fn the_reverse_proxy_over_afxdp_reaches_kernel_upstreams_byte_exact() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tb = testbed(2, 1);
    // The built-in server, on the server namespace's loopback.
    let kernel_flags = ["fairway", "--listen", "127.0.0.1:9081", "--shards", "1", "--log", "warn"];
    let upstream_config = fairway::config::Config::load(kernel_flags, None).unwrap();
    let upstream = testbed::in_netns(&tb.server_ns(), || fairway::Server::builder().config(upstream_config).spawn())
        .unwrap()
        .unwrap();
    // Python's, serving a file under /py/.
    let dir = std::env::temp_dir().join(format!("fairway-proxy-afxdp-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("py")).unwrap();
    let data: Vec<u8> = (0..3_000_017u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
    std::fs::write(dir.join("py").join("data.bin"), &data).unwrap();
    let dir_arg = dir.display().to_string();
    let python = ["python3", "-u", "-m", "http.server", "9082", "--bind", "127.0.0.1", "--directory", &dir_arg];
    let mut python = testbed::spawn(&tb.server_ns(), &python).unwrap();
    python.wait_for_stdout("Serving HTTP", T).unwrap();
    // nginx, serving 4 MB of the pattern at /bytes/4000000.
    let nginx_site = fairway_tests::nginx::SiteDir::create(4_000_000, "127.0.0.1:9083".parse().unwrap()).unwrap();
    let nginx = nginx_site.start(&tb.server_ns()).unwrap();

    let served = Served::start(
        &tb,
        &flags(
            &tb,
            "10.77.0.1/24",
            &[
                "--upstream",
                "app=http://127.0.0.1:9081",
                "--upstream",
                "py=http://127.0.0.1:9082",
                "--upstream",
                "ng=http://127.0.0.1:9083",
                "--route",
                "/py/=py",
                "--route",
                "nginx.test/=ng",
                "--route",
                "/=app",
            ],
        ),
    );
    let file = curl_body(&tb, 0, "/py/data.bin", T).unwrap_or_else(|e| panic!("the file through the proxy: {e}"));
    assert!(file == data, "{} bytes back, not the {} served", file.len(), data.len());
    for n in [0u64, 1, 1460, 100_000, 20_000_000] {
        let body = curl_body(&tb, 1, &format!("/bytes/{n}"), T).unwrap_or_else(|e| panic!("/bytes/{n}: {e}"));
        assert!(body.len() as u64 == n && body.iter().zip(0..).all(|(&b, i)| b == fairway::http::pattern_byte(i)));
    }
    // Uploads of up to 5 MB, their SHA-256 checked, through the proxy.
    check_uploads(&tb, 1);
    let url = format!("http://{}/bytes/4000000", tb.server_ip());
    let curl = ["curl", "-sS", "-f", "--max-time", "30", "-H", "Host: nginx.test", &url];
    let out = testbed::exec_timeout(&tb.client_ns(0), &curl, T).unwrap();
    assert!(out.success(), "nginx through the proxy: {}", String::from_utf8_lossy(&out.stderr));
    let from_nginx = out.stdout;
    assert!(
        from_nginx.len() == 4_000_000 && from_nginx.iter().zip(0..).all(|(&b, i)| b == fairway::http::pattern_byte(i))
    );
    let reports = served.stop();
    assert_eq!(reports.iter().map(|r| r.requests).sum::<u64>(), 1 + 5 + 4 + 1, "{reports:?}");
    drop(nginx);
    upstream.shutdown().unwrap();
    drop(python);
    let _ = std::fs::remove_dir_all(&dir);
}

/// The reverse proxy over AF_XDP with its upstreams beyond the NIC, in a
/// client's namespace: each shard reaches them through its own stack (the
/// interface has no kernel address to reach them by), on ports the shard
/// owns, so their answers are steered back to it. The built-in server on
/// kernel sockets (generated bytes, uploads with their SHA-256) and `python3
/// -m http.server` (a file), both in client 1's namespace, asked from
/// client 0's; `/metrics`, routed to the proxy's own endpoints, shows the
/// upstream connections kept alive and reused.
#[test]
fn the_reverse_proxy_over_afxdp_reaches_upstreams_through_the_nic_byte_exact() {
    let _one = ONE_AT_A_TIME.lock().unwrap_or_else(|p| p.into_inner());
    let tb = testbed(2, 2);
    let upstream_ip = tb.client_ip(1);
    let listen = format!("{upstream_ip}:9081");
    let kernel_flags = ["fairway", "--listen", &listen, "--shards", "1", "--log", "warn"];
    let upstream_config = fairway::config::Config::load(kernel_flags, None).unwrap();
    let upstream = testbed::in_netns(&tb.client_ns(1), || fairway::Server::builder().config(upstream_config).spawn())
        .unwrap()
        .unwrap();
    let dir = std::env::temp_dir().join(format!("fairway-proxy-nic-{}", std::process::id()));
    std::fs::create_dir_all(dir.join("py")).unwrap();
    let data: Vec<u8> = (0..3_000_017u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8).collect();
    std::fs::write(dir.join("py").join("data.bin"), &data).unwrap();
    let (dir_arg, bind) = (dir.display().to_string(), upstream_ip.to_string());
    let python = ["python3", "-u", "-m", "http.server", "9082", "--bind", &bind, "--directory", &dir_arg];
    let mut python = testbed::spawn(&tb.client_ns(1), &python).unwrap();
    python.wait_for_stdout("Serving HTTP", T).unwrap();

    let (app, py) = (format!("app=http://{upstream_ip}:9081"), format!("py=http://{upstream_ip}:9082"));
    let routes = ["--route", "/py/=py", "--route", "/metrics=builtin", "--route", "/=app"];
    let served = Served::start(
        &tb,
        &flags(
            &tb,
            "10.77.0.1/24",
            &[&["--upstream", &app, "--upstream", &py, "--queues", "2", "--shards", "2"][..], &routes].concat(),
        ),
    );
    let file = curl_body(&tb, 0, "/py/data.bin", T).unwrap_or_else(|e| panic!("the file through the proxy: {e}"));
    assert!(file == data, "{} bytes back, not the {} served", file.len(), data.len());
    for n in [0u64, 1, 1460, 100_000, 20_000_000] {
        let body = curl_body(&tb, 0, &format!("/bytes/{n}"), T).unwrap_or_else(|e| panic!("/bytes/{n}: {e}"));
        assert!(body.len() as u64 == n && body.iter().zip(0..).all(|(&b, i)| b == fairway::http::pattern_byte(i)));
    }
    check_uploads(&tb, 0);
    // Ten requests on one client connection: after the first, each finds
    // the upstream connection its shard pooled.
    let url = format!("http://{}/plaintext", tb.server_ip());
    let mut curl = vec!["curl", "-sS", "-f", "--max-time", "30"];
    curl.extend(std::iter::repeat_n(url.as_str(), 10));
    let out = testbed::exec_timeout(&tb.client_ns(0), &curl, T).unwrap();
    assert!(out.success() && out.stdout_text() == "Hello, World!".repeat(10), "{}", out.stderr_text());
    let total = |name: &str| {
        let text = String::from_utf8(curl_body(&tb, 0, "/metrics", T).unwrap()).unwrap();
        fairway_tests::platform::metric_samples(&text, name).iter().map(|(_, v)| v).sum::<f64>()
    };
    // A shard publishes at most once a second.
    let forwarded = 1 + 5 + 4 + 10;
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    while total("fairway_proxy_forwarded_total") < f64::from(forwarded) {
        assert!(std::time::Instant::now() < deadline, "{} forwarded", total("fairway_proxy_forwarded_total"));
        std::thread::sleep(Duration::from_millis(200));
    }
    let (connects, reused) = (total("fairway_proxy_upstream_connects_total"), total("fairway_proxy_reused_total"));
    assert!(reused >= 9.0 && connects + reused == f64::from(forwarded), "{connects} connects, {reused} reused");
    assert_eq!(total("fairway_proxy_bad_gateway_total") + total("fairway_proxy_gateway_timeout_total"), 0.0);
    let reports = served.stop();
    assert_eq!(reports.len(), 2);
    upstream.shutdown().unwrap();
    drop(python);
    let _ = std::fs::remove_dir_all(&dir);
}
