//! One HTTP connection (`HttpConn` with the built-in endpoints) driven by
//! any sequence of inputs split anywhere, partial flushes, time steps,
//! timeouts and an EOF: nothing panics, every response starts with a
//! status line, and the output always drains.
#![no_main]

use std::task::Waker;
use std::time::Duration;

use arbitrary::Arbitrary;
use fairway::http::{Env, HttpConfig, HttpConn, Router, Site, StaticFiles, builtin};
use fairway_stack::time::{Duration as StackDuration, Instant};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
enum Op {
    Input(Vec<u8>),
    /// Takes up to this many bytes of output.
    Flush(u16),
    Advance(u16),
    Timeout,
    Eof,
}

struct FuzzSite;

impl Site for FuzzSite {
    fn now_date(&self) -> &[u8] {
        b"Tue, 01 Dec 2026 00:00:00 GMT"
    }

    fn metrics(&mut self, out: &mut Vec<u8>) {
        out.extend_from_slice(b"fairway_info 1\n");
    }

    fn files(&mut self) -> Option<&mut StaticFiles> {
        None
    }

    fn record(&mut self, status: u16, _latency: Duration) {
        assert!((100..600).contains(&status), "{status}");
    }
}

fn config() -> HttpConfig {
    HttpConfig {
        max_request_line: 512,
        max_head: 2048,
        max_body: 1 << 16,
        max_bytes: 1 << 16,
        header_timeout: Duration::from_secs(2),
        idle_timeout: Duration::from_secs(5),
        response_timeout: Duration::from_secs(3),
        body_timeout: Duration::from_secs(2),
        body_min_rate: 100,
        max_collect: 4096,
        output_window: 4096,
        ..HttpConfig::default()
    }
}

fn flush(conn: &mut HttpConn, now: Instant, env: &mut Env<'_>, limit: usize, out: &mut Vec<u8>) {
    let data = conn.output(now, env);
    let n = data.len().min(limit);
    out.extend_from_slice(&data[..n]);
    conn.consume(n);
}

fuzz_target!(|ops: Vec<Op>| {
    let cfg = config();
    let mut handler: Router = builtin(&cfg);
    let mut site = FuzzSite;
    let waker = Waker::noop();
    let mut conn = HttpConn::new(&cfg);
    let mut now = Instant::from_secs(1);
    conn.reset(now);
    let mut out = Vec::new();
    for op in ops.into_iter().take(64) {
        let mut env = Env { site: &mut site, handler: &mut handler, waker };
        match op {
            Op::Input(data) => {
                let mut rest = &data[..];
                // Back-pressure: what it does not take now is offered after a flush.
                for _ in 0..64 {
                    if rest.is_empty() {
                        break;
                    }
                    let n = conn.on_input(rest, now, &mut env);
                    rest = &rest[n..];
                    flush(&mut conn, now, &mut env, usize::MAX, &mut out);
                }
            }
            Op::Flush(limit) => flush(&mut conn, now, &mut env, usize::from(limit), &mut out),
            Op::Advance(ms) => now = now + StackDuration::from_millis(u64::from(ms)),
            Op::Timeout => {
                if conn.deadline().is_some_and(|at| at <= now) {
                    conn.on_timeout(now, &mut env);
                }
            }
            Op::Eof => conn.on_eof(now),
        }
    }
    // Whatever is left drains: a streamed body ends within its length.
    let mut env = Env { site: &mut site, handler: &mut handler, waker };
    for _ in 0..1024 {
        let before = out.len();
        flush(&mut conn, now, &mut env, usize::MAX, &mut out);
        if out.len() == before {
            break;
        }
    }
    if !out.is_empty() {
        assert!(out.starts_with(b"HTTP/1."), "{:?}", String::from_utf8_lossy(&out[..out.len().min(64)]));
    }
    conn.finish(&mut handler);
});
