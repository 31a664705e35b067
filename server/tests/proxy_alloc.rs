//! Zero heap allocations per proxied request in steady state: keep-alive
//! requests through one `HttpConn` answered by the reverse proxy from a
//! pooled upstream connection, counted by a global allocator.
//!
//! A test without libtest's harness (`harness = false`): the process has one
//! thread, which is also the upstream (a blocking socket it answers from a
//! fixed buffer), so every allocation counted is the proxy's, the HTTP
//! layer's or this file's.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::task::Waker;

use fairway::config::Config;
use fairway::http::{Env, HttpConfig, HttpConn, builtin};
use fairway::outbound::Outbound;
use fairway::proxy::Proxy;
use fairway_stack::time::Instant;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, StatsAlloc};

mod support;

use support::CountingSite;

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

const REQUEST: &[u8] = b"GET /plaintext HTTP/1.1\r\nHost: bench\r\nAccept: text/plain\r\n\r\n";
const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!";

struct Rig {
    conn: HttpConn,
    site: CountingSite,
    proxy: Proxy,
    listener: TcpListener,
    upstream: Option<TcpStream>,
    head: [u8; 4096],
    now: Instant,
}

impl Rig {
    /// One request through the proxy: the client's in, the upstream's
    /// answer, the response out. Returns the response's length.
    fn request(&mut self) -> usize {
        self.now += fairway_stack::time::Duration::from_micros(100);
        let r = REQUEST;
        self.conn.recv_buf()[..r.len()].copy_from_slice(r);
        let env = &mut Env { site: &mut self.site, handler: &mut self.proxy, waker: Waker::noop() };
        self.conn.on_recv(r.len(), self.now, env);
        let mut sent = self.flush();
        // The upstream's side: the request head in, the answer out.
        if self.upstream.is_none() {
            self.upstream = Some(self.listener.accept().unwrap().0);
        }
        let upstream = self.upstream.as_mut().unwrap();
        let mut len = 0;
        while !self.head[..len].ends_with(b"\r\n\r\n") {
            len += upstream.read(&mut self.head[len..]).unwrap();
        }
        upstream.write_all(RESPONSE).unwrap();
        // Until the answer has come through (its readiness dispatched and
        // the deferred exchange resumed, as the shard's loop does).
        while sent == 0 {
            self.site.outbound.as_mut().expect("an outbound epoll").dispatch();
            sent = self.flush();
        }
        sent
    }

    fn flush(&mut self) -> usize {
        let mut sent = 0;
        loop {
            let env = &mut Env { site: &mut self.site, handler: &mut self.proxy, waker: Waker::noop() };
            let out = self.conn.output(self.now, env);
            if out.is_empty() {
                return sent;
            }
            assert!(sent > 0 || out.starts_with(b"HTTP/1.1 200 OK\r\n"), "{}", String::from_utf8_lossy(out));
            let n = out.len();
            self.conn.consume(n);
            sent += n;
        }
    }
}

fn main() {
    steady_state_proxied_requests_allocate_nothing();
    println!("test steady_state_proxied_requests_allocate_nothing ... ok");
}

fn steady_state_proxied_requests_allocate_nothing() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let upstream = format!("app=http://{}", listener.local_addr().unwrap());
    let args = ["fairway", "--upstream", &upstream, "--log", "warn"];
    let config = Config::load(args, None).unwrap();
    let proxy = Proxy::new(Arc::clone(config.proxy.as_ref().unwrap()), Box::new(builtin(&HttpConfig::default())), None);
    let now = Instant::from_secs(1);
    let mut rig = Rig {
        conn: HttpConn::new(&HttpConfig::default()),
        site: CountingSite::new(Some(Outbound::new().unwrap())),
        proxy,
        listener,
        upstream: None,
        head: [0; 4096],
        now,
    };
    rig.conn.reset(now);
    let warm: usize = (0..100).map(|_| rig.request()).sum();
    assert_eq!((rig.site.ok, rig.site.other), (100, 0));

    let region = Region::new(GLOBAL);
    let bytes: usize = (0..10_000).map(|_| rig.request()).sum();
    let stats = region.change();

    assert_eq!((rig.site.ok, rig.site.other), (10_100, 0));
    assert_eq!(bytes, warm / 100 * 10_000, "every response the same length");
    assert_eq!(rig.site.outbound.as_ref().map(Outbound::open), Some(1), "one upstream connection, reused");
    assert_eq!(
        (stats.allocations, stats.reallocations, stats.deallocations),
        (0, 0, 0),
        "allocations while proxying 10,000 keep-alive requests: {stats:?}"
    );
}
