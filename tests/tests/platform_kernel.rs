//! The platform on the kernel backend, embedded as a user would
//! (`fairway::Server::builder()` on 127.0.0.1, a free port, two shards),
//! against Python and curl on this machine: a user's `Handler`
//! application, and the axum example on the async runtime. No root needed.

use std::time::{Duration, Instant};

use fairway::Server;
use fairway::config::Config;
use fairway_tests::apps::handler_app::test_app;
use fairway_tests::certificate::{KeyKind, self_signed_in};
use fairway_tests::http2::{check_http2, check_http2_defences};
use fairway_tests::platform::{
    Target, check_axum_example, check_axum_tower, check_curl_bytes, check_edges, check_handler_app,
    countdown_in_flight, garbage, gauge, header_timeout, keep_alive_load, request_in_flight, reset_mid_response,
    wait_for_gauge,
};

#[path = "../../server/examples/axum_app.rs"]
#[allow(dead_code)]
mod axum_app;

#[path = "../../server/examples/axum_tower.rs"]
#[allow(dead_code)]
mod axum_tower;

fn config(extra: &[&str]) -> Config {
    let args = ["fairway", "--listen", "127.0.0.1:0", "--shards", "2", "--log", "warn"].iter().chain(extra).copied();
    Config::load(args, None).unwrap()
}

#[test]
fn a_user_handler_answers_python_and_curl_on_kernel_sockets() {
    let server = Server::builder().config(config(&["--response-timeout", "1s"])).handler(test_app).spawn().unwrap();
    let target = Target::local(server.local_addr());
    let requests = check_handler_app(&target, Duration::from_secs(1));
    let requests = requests + check_curl_bytes(&target, &[0, 1, 100_000, 10_000_000]);
    let reports = server.shutdown().unwrap();
    assert_eq!(reports.len(), 2);
    let answered: u64 = reports.iter().map(|r| r.requests).sum();
    assert_eq!(answered, requests, "{reports:?}");
}

#[test]
fn the_edges_foreign_clients_found_are_answered_on_kernel_sockets() {
    let server = Server::builder().config(config(&["--body-timeout", "1s"])).spawn().unwrap();
    let answered = check_edges(&Target::local(server.local_addr()));
    let reports = server.shutdown().unwrap();
    let requests: u64 = reports.iter().map(|r| r.requests).sum();
    assert_eq!(requests, answered, "{reports:?}");
}

#[test]
fn the_axum_example_on_kernel_sockets_survives_load_resets_and_a_graceful_stop() {
    // One state shared by every shard's router, as the example's main does.
    let state = axum_app::AppState::default();
    let server = Server::builder()
        .config(config(&["--header-timeout", "1s"]))
        .axum(move || axum_app::app(state.clone()))
        .spawn()
        .unwrap();
    let target = Target::local(server.local_addr());
    check_axum_example(&target);

    // 10,000 requests over 256 connections at once: none is left waiting
    // (a lost wake-up stalls its connection until the client's timeout).
    let answered = keep_alive_load(&target, 256, 10_000, "/plaintext", b"Hello, World!", Duration::from_secs(60));
    assert_eq!(answered, Ok(10_000));

    // hyper's header timeout runs on the shard's timer.
    let (took, said) = header_timeout(&target, Duration::from_secs(10));
    assert!(took >= Duration::from_millis(900) && took < Duration::from_secs(5), "closed after {took:?} ({said})");

    // A peer that resets mid-response ends its task; garbage ends its own.
    assert!(reset_mid_response(&target, "/countdown/50").starts_with("HTTP/1.1 200"));
    let _ = garbage(&target);
    // Only each shard's accepting task is left, and none panicked.
    wait_for_gauge(&server, "fairway_tasks", 2);
    assert_eq!(gauge(&server, "fairway_task_panics_total"), 0);

    // A streamed answer in flight when the server stops is finished.
    let mut countdown = countdown_in_flight(&target, 20);
    std::thread::sleep(Duration::from_millis(500));
    let stopped = Instant::now();
    let reports = server.shutdown().unwrap();
    let took = stopped.elapsed();
    let out = countdown.wait_for_stdout("200", Duration::from_secs(10)).map(|()| countdown.kill());
    let text = out.map(|o| o.stdout_text()).unwrap_or_else(|e| panic!("{e}"));
    assert!(text.contains("1... liftoff!"), "the countdown in flight completed: {text}");
    assert!(took >= Duration::from_secs(1), "the stop waited for it: {took:?}");
    assert_eq!(reports.len(), 2);
}

/// Issue 37: an ordinary axum application, unchanged: tower-http's
/// middleware and tokio in its handlers (timers, spawns, a `tokio::net`
/// client, tokio's mutex), under load too, with a panic that costs only its
/// connection and a request in flight that a graceful stop lets finish.
#[test]
fn an_ordinary_axum_application_with_tower_http_and_tokio_on_kernel_sockets() {
    let state = axum_tower::TowerState::new(axum_tower::echo_service().unwrap());
    let server = Server::builder().config(config(&[])).axum(move || axum_tower::app(state.clone())).spawn().unwrap();
    let target = Target::local(server.local_addr());
    check_axum_tower(&target);
    // The uncaught panic ended its connection's task, and only that.
    wait_for_gauge(&server, "fairway_task_panics_total", 1);
    let answered = keep_alive_load(&target, 256, 10_000, "/spawned", b"10! = 3628800\n", Duration::from_secs(60));
    assert_eq!(answered, Ok(10_000));
    let answered = keep_alive_load(
        &target,
        64,
        2_000,
        "/upstream",
        b"upstream said: ping from a handler\n",
        Duration::from_secs(60),
    );
    assert_eq!(answered, Ok(2_000));
    wait_for_gauge(&server, "fairway_tasks", 2);

    // (Within the example's two-second request timeout.)
    let slow = request_in_flight(&target, "/sleep/1200");
    std::thread::sleep(Duration::from_millis(600));
    let reports = server.shutdown().unwrap();
    let text = slow.wait_timeout(Duration::from_secs(10)).unwrap().stdout_text();
    assert!(text.starts_with("200 slept 12"), "the request in flight was answered: {text}");
    assert_eq!(reports.len(), 2);
}

/// The resident memory of this process (the server's, embedded), in KiB.
fn resident_kib() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// Issue 37: HTTP/2 for a `Handler` (and the built-in endpoints it mounts)
/// on kernel sockets, with prior knowledge on the plain port and by ALPN
/// over TLS: everything a client does, then HTTP/2's own attacks, after
/// which the server has kept its memory (within 64 MiB of before) and
/// counted what it served.
#[test]
fn http2_for_a_handler_with_prior_knowledge_and_over_tls_and_its_defences_on_kernel_sockets() {
    let (dir, cert, key) = tls_files("h2");
    let flags = ["--response-timeout", "1s", "--tls-cert", &cert, "--tls-key", &key, "--tls-listen", "127.0.0.1:0"];
    let server = Server::builder().config(config(&flags)).handler(test_app).spawn().unwrap();
    let plain = Target::local(server.local_addr());
    let tls = Target::local(server.tls_local_addr().expect("an HTTPS address"));
    let ca = std::path::Path::new(&cert);
    check_http2(&plain, None, Duration::from_secs(1));
    check_http2(&tls, Some(ca), Duration::from_secs(1));
    let before = resident_kib();
    check_http2_defences(&plain, None, 128);
    check_http2_defences(&tls, Some(ca), 128);
    let after = resident_kib();
    assert!(after < before + 64 * 1024, "resident memory {before} KiB before the attacks, {after} KiB after");
    assert!(gauge(&server, "fairway_http2_connections_total") >= 4);
    assert!(gauge(&server, "fairway_http2_streams_total") >= 2 * 120);
    // HTTP/1.1 beside it, unchanged.
    let requests = check_curl_bytes(&plain, &[0, 100_000]);
    assert_eq!(requests, 2);
    server.shutdown().unwrap();
    let _ = std::fs::remove_dir_all(dir);
}

/// The same attacks on an async application (hyper-util's automatic server
/// in front of the axum example): it defends itself the same way.
#[test]
fn http2_for_an_axum_application_and_its_defences_on_kernel_sockets() {
    let state = axum_app::AppState::default();
    let server = Server::builder().config(config(&[])).axum(move || axum_app::app(state.clone())).spawn().unwrap();
    let target = Target::local(server.local_addr());
    let before = resident_kib();
    check_http2_defences(&target, None, 128);
    assert!(resident_kib() < before + 64 * 1024);
    server.shutdown().unwrap();
}

/// A self-signed ECDSA certificate for `localhost` and its key in a
/// directory of its own: (directory, cert, key).
fn tls_files(name: &str) -> (std::path::PathBuf, String, String) {
    let dir = std::env::temp_dir().join(format!("fairway-platform-tls-{name}-{}", std::process::id()));
    let (cert, key) = self_signed_in(&dir, KeyKind::EcdsaP256, "DNS:localhost").unwrap_or_else(|e| panic!("{e}"));
    (dir, cert.display().to_string(), key.display().to_string())
}

#[test]
fn the_axum_example_is_served_over_tls_on_kernel_sockets() {
    let (dir, cert, key) = tls_files("axum");
    let state = axum_app::AppState::default();
    let flags = ["--tls-cert", &cert, "--tls-key", &key, "--tls-listen", "127.0.0.1:0", "--tls-only"];
    let server = Server::builder().config(config(&flags)).axum(move || axum_app::app(state.clone())).spawn().unwrap();
    let port = server.tls_local_addr().expect("an HTTPS address").port();
    let curl = |path: &str| {
        let out = std::process::Command::new("curl")
            .args(["-sS", "--max-time", "20", "--cacert", &cert, "--resolve", &format!("localhost:{port}:127.0.0.1")])
            .arg(format!("https://localhost:{port}{path}"))
            .output()
            .expect("curl is installed");
        assert!(out.status.success(), "{path}: {}", String::from_utf8_lossy(&out.stderr));
        String::from_utf8(out.stdout).unwrap()
    };
    assert!(curl("/hello/fairway").starts_with("Hello, fairway! (greeting "));
    assert_eq!(curl("/plaintext"), "Hello, World!");
    // A streamed (chunked) body, each chunk a TLS record of its own.
    assert_eq!(curl("/countdown/3"), "3...\n2...\n1... liftoff!\n");
    let reports = server.shutdown().unwrap();
    assert!(reports.iter().map(|r| r.accepted).sum::<u64>() >= 3, "{reports:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Holds a request body back at its first piece until a timer thread wakes
/// it 200 ms later (as a handler waiting on an upstream does), then takes
/// it all and answers with its length.
#[derive(Default)]
struct Hesitant {
    held: bool,
    released: std::sync::Arc<std::sync::atomic::AtomicBool>,
    taken: usize,
}

impl fairway::http::Handler for Hesitant {
    fn request(
        &mut self,
        _: &mut fairway::http::Context<'_>,
        _: &fairway::http::Request<'_>,
        res: fairway::http::Response<'_>,
    ) -> fairway::http::Reply {
        (self.held, self.taken) = (false, 0);
        self.released.store(false, std::sync::atomic::Ordering::SeqCst);
        res.read_body()
    }

    fn body(&mut self, cx: &mut fairway::http::Context<'_>, data: &[u8]) -> usize {
        if !self.held {
            self.held = true;
            let (waker, released) = (cx.waker().clone(), std::sync::Arc::clone(&self.released));
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(200));
                released.store(true, std::sync::atomic::Ordering::SeqCst);
                waker.wake();
            });
        }
        if !self.released.load(std::sync::atomic::Ordering::SeqCst) {
            return 0;
        }
        self.taken += data.len();
        data.len()
    }

    fn body_end(
        &mut self,
        _: &mut fairway::http::Context<'_>,
        _: &[u8],
        res: fairway::http::Response<'_>,
    ) -> fairway::http::Reply {
        res.text(200, &self.taken.to_string())
    }
}

#[test]
fn a_body_held_back_while_the_rest_arrives_is_read_on_once_taken() {
    // While the handler holds the body back, all the rest of it reaches the
    // socket. Woken, the handler takes the full input buffer; no event will
    // say the socket has more, so the connection must read on by itself.
    use std::io::{Read, Write};
    let server = Server::builder().config(config(&[])).handler(Hesitant::default).spawn().unwrap();
    let mut client = std::net::TcpStream::connect(server.local_addr()).unwrap();
    client.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let len = 300_000;
    let mut request = format!("POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: {len}\r\n\r\n").into_bytes();
    request.resize(request.len() + len, b'b');
    client.write_all(&request).unwrap();
    let started = Instant::now();
    let mut got = Vec::new();
    let mut buf = [0u8; 4096];
    while !got.ends_with(len.to_string().as_bytes()) {
        match client.read(&mut buf) {
            Ok(n) if n > 0 => got.extend_from_slice(&buf[..n]),
            other => panic!("no answer after {:?} ({other:?}): {}", started.elapsed(), String::from_utf8_lossy(&got)),
        }
    }
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200 "));
    server.shutdown().unwrap();
}

#[test]
fn the_axum_example_behind_the_reverse_proxy_on_kernel_sockets() {
    // The application on one server, Fairway's proxy in front of it: every
    // check of the example passes through (JSON both ways, a streamed
    // chunked answer at its pace, errors), and so does load.
    let state = axum_app::AppState::default();
    let app = Server::builder().config(config(&[])).axum(move || axum_app::app(state.clone())).spawn().unwrap();
    let upstream = format!("app=http://{}", app.local_addr());
    let proxy = Server::builder().config(config(&["--upstream", &upstream])).spawn().unwrap();
    let target = Target::local(proxy.local_addr());
    check_axum_example(&target);
    let answered = keep_alive_load(&target, 64, 4_000, "/plaintext", b"Hello, World!", Duration::from_secs(60));
    assert_eq!(answered, Ok(4_000));
    let reports = proxy.shutdown().unwrap();
    let proxied: u64 = reports.iter().map(|r| r.requests).sum();
    assert!(proxied >= 4_000 + 8, "{reports:?}");
    app.shutdown().unwrap();
}
