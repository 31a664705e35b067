//! Zero heap allocations per request in steady state for the HTTP layer:
//! keep-alive `/plaintext`, `/json` and `/bytes/1000` through one pooled
//! `HttpConn`, counted by a global allocator.
//!
//! A test without libtest's harness (`harness = false`): the process has one
//! thread, so every allocation counted is the HTTP layer's or this file's.

use std::task::Waker;

use fairway::http::{Env, HttpConfig, HttpConn, Router, builtin};
use fairway_stack::time::Instant;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

mod support;

use support::CountingSite;

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

const REQUESTS: [&[u8]; 3] = [
    b"GET /plaintext HTTP/1.1\r\nHost: bench\r\nAccept: text/plain\r\n\r\n",
    b"GET /json HTTP/1.1\r\nHost: bench\r\nAccept: application/json\r\n\r\n",
    b"GET /bytes/1000 HTTP/1.1\r\nHost: bench\r\n\r\n",
];

/// Runs `rounds` rounds of the three requests: one at a time through
/// `recv_buf`/`on_recv`, then the three pipelined through `on_input`.
/// Returns the bytes sent.
fn run(conn: &mut HttpConn, site: &mut CountingSite, app: &mut Router, now: &mut Instant, rounds: u64) -> u64 {
    let mut pipelined = [0u8; 512];
    let mut len = 0;
    for r in REQUESTS {
        pipelined[len..len + r.len()].copy_from_slice(r);
        len += r.len();
    }
    let mut sent = 0;
    for _ in 0..rounds {
        for r in REQUESTS {
            *now += fairway_stack::time::Duration::from_micros(100);
            site.date.update(1_700_000_000 + now.total_micros() / 1_000_000);
            conn.recv_buf()[..r.len()].copy_from_slice(r);
            conn.on_recv(r.len(), *now, &mut Env { site, handler: app, waker: Waker::noop() });
            sent += flush(conn, site, app, *now);
        }
        assert_eq!(conn.on_input(&pipelined[..len], *now, &mut Env { site, handler: app, waker: Waker::noop() }), len);
        sent += flush(conn, site, app, *now);
    }
    sent
}

fn flush(conn: &mut HttpConn, site: &mut CountingSite, app: &mut Router, now: Instant) -> u64 {
    let mut sent = 0;
    loop {
        let out = conn.output(now, &mut Env { site, handler: app, waker: Waker::noop() });
        if out.is_empty() {
            return sent;
        }
        // A transport that takes at most 1400 bytes a call.
        let n = out.len().min(1400);
        assert!(sent > 0 || out.starts_with(b"HTTP/1.1 200 OK\r\n"));
        conn.consume(n);
        sent += n as u64;
    }
}

fn main() {
    steady_state_keep_alive_requests_allocate_nothing();
    println!("test steady_state_keep_alive_requests_allocate_nothing ... ok");
}

fn steady_state_keep_alive_requests_allocate_nothing() {
    let mut conn = HttpConn::new(&HttpConfig::default());
    let mut site = CountingSite::new(None);
    let mut now = Instant::from_secs(1);
    conn.reset(now);

    // The built-in endpoints, as a handler under their router, as the server runs them.
    let mut app = builtin(&HttpConfig::default());
    let warm_bytes = run(&mut conn, &mut site, &mut app, &mut now, 100);
    assert_eq!((site.ok, site.other), (600, 0));

    // 10,002 requests: 1,667 rounds of six.
    let region = Region::new(GLOBAL);
    let bytes = run(&mut conn, &mut site, &mut app, &mut now, 1_667);
    let stats = region.change();

    assert_eq!((site.ok, site.other), (600 + 10_002, 0));
    // Every response has the same length (the date's is fixed), so the
    // bytes sent are exactly the warm-up's per round.
    assert_eq!(bytes, warm_bytes / 100 * 1_667);
    assert!(!conn.close_after_flush() && conn.wants_input());
    assert_eq!(
        (stats.allocations, stats.reallocations, stats.deallocations),
        (0, 0, 0),
        "allocations while serving 10,002 keep-alive requests: {stats:?}"
    );
}
