//! Zero heap allocations per proxied request in steady state: keep-alive
//! requests through one `HttpConn` answered by the reverse proxy from a
//! pooled upstream connection, counted by a global allocator; the upstream
//! connection a kernel socket, then a link (as the userspace backends reach
//! an upstream through the NIC, the host's part played here).
//!
//! A test without libtest's harness (`harness = false`): the process has one
//! thread, which is also the upstream (a blocking socket, or the link's
//! connection, that it answers from a fixed buffer), so every allocation
//! counted is the proxy's, the HTTP layer's, the link's or this file's.

use std::io::{self, Read, Write};
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
    upstream: Upstream,
    now: Instant,
}

/// The upstream, and how the proxy reaches it.
enum Upstream {
    /// A kernel socket: the listener, the accepted connection, and where
    /// its request heads are read.
    Socket(TcpListener, Option<TcpStream>, [u8; 4096]),
    /// A link, whose token once the proxy asked for it.
    Link(LinkPeer, Option<mio::Token>),
}

/// The far end of a link: it takes request heads and answers each.
struct LinkPeer {
    head: [u8; 4096],
    len: usize,
    /// How much of the answer is still to give.
    answer: usize,
}

impl Write for LinkPeer {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.head[self.len..self.len + data.len()].copy_from_slice(data);
        self.len += data.len();
        if self.head[..self.len].ends_with(b"\r\n\r\n") {
            (self.len, self.answer) = (0, RESPONSE.len());
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for LinkPeer {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = buf.len().min(self.answer);
        if n == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        let at = RESPONSE.len() - self.answer;
        buf[..n].copy_from_slice(&RESPONSE[at..at + n]);
        self.answer -= n;
        Ok(n)
    }
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
        if let Upstream::Socket(listener, stream, head) = &mut self.upstream {
            // The upstream's side: the request head in, the answer out.
            let stream = stream.get_or_insert_with(|| listener.accept().unwrap().0);
            let mut len = 0;
            while !head[..len].ends_with(b"\r\n\r\n") {
                len += stream.read(&mut head[len..]).unwrap();
            }
            stream.write_all(RESPONSE).unwrap();
        }
        // Until the answer has come through (its readiness dispatched, or
        // the link served as the host does, and the deferred exchange
        // resumed, as the shard's loop does).
        for _ in 0..1000 {
            if sent > 0 {
                return sent;
            }
            let outbound = self.site.outbound.as_mut().expect("an outbound epoll");
            outbound.dispatch();
            if let Upstream::Link(peer, token) = &mut self.upstream {
                // Opened once, then what was written sent and the answer
                // received, as at the connection's events.
                while let Some((t, _)) = outbound.take_connect() {
                    *token = Some(t);
                }
                while outbound.take_dirty().is_some() {}
                outbound.pump(token.expect("a link"), peer).unwrap();
            }
            sent = self.flush();
        }
        panic!("no answer through the proxy");
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
    steady_state_proxied_requests_allocate_nothing(false);
    println!("test steady_state_proxied_requests_allocate_nothing ... ok");
    steady_state_proxied_requests_allocate_nothing(true);
    println!("test steady_state_proxied_requests_through_a_link_allocate_nothing ... ok");
}

fn steady_state_proxied_requests_allocate_nothing(link: bool) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    // A link is for an upstream beyond this host: any address but the
    // loopback's.
    let at = if link { "10.0.0.2:8000".parse().unwrap() } else { listener.local_addr().unwrap() };
    let upstream = format!("app=http://{at}");
    let args = ["fairway", "--upstream", &upstream, "--log", "warn"];
    let config = Config::load(args, None).unwrap();
    let proxy = Proxy::new(Arc::clone(config.proxy.as_ref().unwrap()), Box::new(builtin(&HttpConfig::default())), None);
    let now = Instant::from_secs(1);
    let (outbound, upstream) = if link {
        let peer = LinkPeer { head: [0; 4096], len: 0, answer: 0 };
        (Outbound::new().unwrap().with_links(), Upstream::Link(peer, None))
    } else {
        (Outbound::new().unwrap(), Upstream::Socket(listener, None, [0; 4096]))
    };
    let mut rig = Rig {
        conn: HttpConn::new(&HttpConfig::default()),
        site: CountingSite::new(Some(outbound)),
        proxy,
        upstream,
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
