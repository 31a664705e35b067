//! The host over the userspace stack, in memory and in virtual time: a
//! server shard with the HTTP service and a client shard, frames passed
//! between them, time jumping to the next deadline anyone has. What the
//! host owns is checked end to end: lingering close (an error answered
//! before the FIN, no reset), the one timer wheel (timeouts fire when due,
//! and the host says when), draining, and wakes.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration as StdDuration;

use fairway_stack::time::{Duration, Instant};
use fairway_stack::{Config, Handle, RecvError, Shard};

use super::wake::WakeQueue;
use super::*;
use crate::backend::connection_limit::ConnectionLimit;
use crate::http::{Handler, HttpConfig, HttpService, Router};
use crate::metrics::MetricsHub;
use crate::runtime::App;

const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

struct Pair<H: Handler = Router> {
    server: Shard,
    client: Shard,
    host: Host<Shard, HttpService<H>>,
    stop: Arc<AtomicBool>,
    now: Instant,
    stats: LoopStats,
    frame: Vec<u8>,
}

impl Pair {
    fn new(http: HttpConfig) -> Pair {
        Pair::serving(http, None, Config::new([0; 6], SERVER_IP, 24).tcp.tx_buffer)
    }

    /// A pair whose server serves the files under `root` with a send ring
    /// of `tx_buffer` bytes.
    fn serving(http: HttpConfig, root: Option<&std::path::Path>, tx_buffer: usize) -> Pair {
        let router = crate::http::builtin(&http);
        Pair::routing(http, root, tx_buffer, router)
    }

    /// A pair whose server answers with `router`.
    fn routing(http: HttpConfig, root: Option<&std::path::Path>, tx_buffer: usize, router: Router) -> Pair {
        let hub = Arc::new(MetricsHub::new(1, 4, "test"));
        let site = ShardSite::new(0, hub, root, 4).unwrap();
        Pair::handling(http, site, tx_buffer, router)
    }
}

impl<H: Handler> Pair<H> {
    /// A pair whose server answers with `handler`, on `site`.
    fn handling(http: HttpConfig, site: ShardSite, tx_buffer: usize, handler: H) -> Pair<H> {
        Pair::waking(http, site, tx_buffer, handler, WakeQueue::new(None))
    }

    /// The same, whose host queues its wakes on `wakes`.
    fn waking(http: HttpConfig, site: ShardSite, tx_buffer: usize, handler: H, wakes: Arc<WakeQueue>) -> Pair<H> {
        let mac = |ip: Ipv4Addr| {
            let [a, b, c, d] = ip.octets();
            [2, 0, a, b, c, d]
        };
        let mut config = Config::new(mac(SERVER_IP), SERVER_IP, 24);
        config.tcp.tx_buffer = tx_buffer;
        let mut server = Shard::new(config);
        let mut client = Shard::new(Config::new(mac(CLIENT_IP), CLIENT_IP, 24));
        server.add_neighbor(CLIENT_IP, mac(CLIENT_IP));
        client.add_neighbor(SERVER_IP, mac(SERVER_IP));
        let stop = Arc::new(AtomicBool::new(false));
        let mut host = Host::with_service(
            HttpService::with_handler(http, handler),
            site,
            Arc::new(ConnectionLimit::new(2)),
            Arc::clone(&stop),
            StdDuration::from_secs(5),
            wakes,
        );
        let now = Instant::from_secs(1);
        host.start(&mut server, now);
        Pair { server, client, host, stop, now, stats: LoopStats::default(), frame: vec![0; 2048] }
    }

    /// One turn at the current time: timers, frames both ways, the host.
    fn turn(&mut self) {
        let now = self.now;
        for shard in [&mut self.server, &mut self.client] {
            if shard.poll_timeout().is_some_and(|at| at <= now) {
                shard.handle_timeout(now);
            }
        }
        while let Some(n) = self.client.poll_transmit(now, &mut self.frame) {
            self.server.handle_frame(now, &self.frame[..n]);
        }
        while let Some(event) = self.server.poll_event() {
            self.host.on_event(&mut self.server, now, event);
        }
        self.host.poll(&mut self.server, now);
        while let Some(n) = self.server.poll_transmit(now, &mut self.frame) {
            self.client.handle_frame(now, &self.frame[..n]);
        }
        self.stats.turns += 1;
        self.host.after_turn(&mut self.server, now, &self.stats);
    }

    /// Turns until `done`, jumping to the next deadline between turns (the
    /// host's included, as the loop's sleep does), or a millisecond on
    /// (what `done` queued goes out then). Panics past `limit`.
    fn run_until(&mut self, limit: Instant, mut done: impl FnMut(&mut Self) -> bool) {
        loop {
            self.turn();
            if done(self) {
                return;
            }
            let next = [self.server.poll_timeout(), self.client.poll_timeout(), self.host.poll_timeout()]
                .into_iter()
                .flatten()
                .fold(self.now + Duration::from_millis(1), Instant::min);
            self.now = next.max(self.now + Duration::from_micros(1));
            assert!(self.now <= limit, "not done by {limit}");
        }
    }

    fn connect(&mut self) -> Handle {
        let h = self.client.connect(self.now, SocketAddrV4::new(SERVER_IP, 80)).unwrap();
        let until = self.now + Duration::from_secs(1);
        self.run_until(until, |p| p.client.flow(h).is_some_and(|f| f.state.is_synchronized()));
        h
    }

    /// Reads what the client has; `Ok(0)` means the server's FIN.
    fn read(&mut self, h: Handle, into: &mut Vec<u8>) -> Result<usize, RecvError> {
        let mut buf = [0u8; 4096];
        let mut total = 0;
        loop {
            match self.client.recv(h, &mut buf) {
                Ok(0) if total == 0 => return Ok(0),
                Ok(0) | Err(RecvError::WouldBlock) if total > 0 => return Ok(total),
                Ok(n) => {
                    into.extend_from_slice(&buf[..n]);
                    total += n;
                }
                Err(e) => return Err(e),
            }
        }
    }
}

#[test]
fn an_oversized_head_gets_its_431_before_the_fin_and_no_reset() {
    let mut p = Pair::new(HttpConfig::default());
    let h = p.connect();
    let mut head = b"GET / HTTP/1.1\r\nHost: x\r\nX-Big: ".to_vec();
    head.extend(std::iter::repeat_n(b'a', 20_000));
    head.extend(b"\r\n\r\n");
    let mut sent = 0;
    let mut got = Vec::new();
    let mut fin = false;
    let limit = p.now + Duration::from_secs(5);
    p.run_until(limit, |p| {
        if sent < head.len() {
            sent += p.client.send(h, &head[sent..]).unwrap_or(0);
        }
        match p.read(h, &mut got) {
            Ok(0) => fin = true,
            Ok(_) | Err(RecvError::WouldBlock) => {}
            Err(e) => panic!("the client's connection failed ({e}) after {:?}", String::from_utf8_lossy(&got)),
        }
        fin
    });
    let text = String::from_utf8_lossy(&got);
    assert!(text.starts_with("HTTP/1.1 431 "), "{text}");
    assert!(text.contains("Connection: close"), "{text}");
    assert_eq!(p.host.open_connections(), 1, "lingering until the client closes");
    p.client.close(h);
    let limit = p.now + Duration::from_secs(1);
    p.run_until(limit, |p| p.host.open_connections() == 0);
}

#[test]
fn the_sessions_a_burst_left_are_freed_after_a_quiet_trim_interval() {
    let mut p = Pair::new(HttpConfig::default());
    let (a, b) = (p.connect(), p.connect());
    let limit = p.now + Duration::from_secs(1);
    p.run_until(limit, |p| p.host.open_connections() == 2);
    for h in [a, b] {
        p.client.close(h);
    }
    let limit = p.now + Duration::from_secs(1);
    p.run_until(limit, |p| p.host.open_connections() == 0);
    assert_eq!(p.host.pool.free_count(), 2, "both sessions pooled for the next connections");
    // One connection at a time needs one session: the other is freed once
    // a whole interval went without it, the last one after an idle one.
    let h = p.connect();
    p.client.close(h);
    let limit = p.now + TRIM_INTERVAL * 3;
    p.run_until(limit, |p| p.host.pool.free_count() == 0);
    assert!(p.host.poll_timeout().is_none(), "an empty pool wakes no one");
}

#[test]
fn a_lingering_connection_is_closed_at_the_end_of_the_linger() {
    let mut p = Pair::new(HttpConfig::default());
    let h = p.connect();
    p.client.send(h, b"GET /plaintext HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let limit = p.now + Duration::from_secs(1);
    p.run_until(limit, |p| matches!(p.read(h, &mut got), Ok(0)));
    assert!(String::from_utf8_lossy(&got).ends_with("Hello, World!"));
    // The client never closes: the host lets go after LINGER_TIME.
    let lingering_since = p.now;
    let limit = p.now + LINGER_TIME + Duration::from_secs(1);
    p.run_until(limit, |p| p.host.open_connections() == 0);
    let waited = p.now.saturating_since(lingering_since);
    assert!(waited <= LINGER_TIME + TimerWheel::TICK, "closed {waited} after the response");
}

#[test]
fn a_timeout_fires_when_due_and_the_host_says_when() {
    let http = HttpConfig { header_timeout: StdDuration::from_millis(300), ..HttpConfig::default() };
    let mut p = Pair::new(http);
    let h = p.connect();
    p.client.send(h, b"GET /plaintext HTTP/1.1\r\nHo").unwrap();
    p.turn();
    let started = p.now;
    let due = p.host.poll_timeout().expect("a deadline");
    let header = Duration::from_millis(300);
    assert!(due <= started + header + TimerWheel::TICK && due >= started, "the host wakes the loop for it: {due}");
    let mut got = Vec::new();
    let limit = started + Duration::from_secs(2);
    p.run_until(limit, |p| {
        let _ = p.read(h, &mut got);
        !got.is_empty()
    });
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 408 "));
    let took = p.now.saturating_since(started);
    assert!(took >= header && took <= header + Duration::from_millis(1), "408 after {took}, due after {header}");
}

#[test]
fn draining_closes_idle_connections_and_lets_busy_ones_finish() {
    let mut p = Pair::new(HttpConfig::default());
    let idle = p.connect();
    let busy = p.connect();
    p.client.send(busy, b"GET /bytes/3000000 HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    p.turn();
    p.stop.store(true, Ordering::Relaxed);
    let (mut idle_got, mut busy_got) = (Vec::new(), Vec::new());
    let mut idle_closed = false;
    let limit = p.now + Duration::from_secs(4);
    p.run_until(limit, |p| {
        idle_closed |= matches!(p.read(idle, &mut idle_got), Ok(0));
        let _ = p.read(busy, &mut busy_got);
        p.host.draining() && idle_closed && busy_got.len() > 3_000_000
    });
    assert!(idle_got.is_empty(), "the idle connection was closed without a word");
    let third = p.client.connect(p.now, SocketAddrV4::new(SERVER_IP, 80)).unwrap();
    let until = p.now + Duration::from_millis(100);
    p.run_until(until + Duration::from_millis(1), |p| p.now >= until);
    assert!(
        p.client.flow(third).is_none_or(|f| !f.state.is_synchronized()),
        "a connection after the stop is refused: {:?}",
        p.client.flow(third).map(|f| f.state)
    );
    p.client.close(idle);
    p.client.close(busy);
    let limit = p.now + Duration::from_secs(5);
    p.run_until(limit, |p| p.host.finished());
    assert_eq!(p.host.accepted(), 2, "nothing accepted while draining");
}

#[test]
fn a_woken_slot_is_driven_again() {
    let mut p = Pair::new(HttpConfig::default());
    let h = p.connect();
    p.turn();
    let slot = h.index() as usize;
    // A wake for a live slot drives it: nothing to do, and nothing breaks.
    p.host.wakers[slot].waker.wake_by_ref();
    assert!(p.host.wakes().is_pending());
    assert_eq!(p.host.poll_timeout(), Some(Instant::ZERO), "a pending wake keeps the loop awake");
    p.turn();
    assert!(!p.host.wakes().is_pending());
    p.client.send(h, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let limit = p.now + Duration::from_secs(1);
    p.run_until(limit, |p| {
        let _ = p.read(h, &mut got);
        got.ends_with(b"ok\n")
    });
}

/// Defers each request and wakes itself at once, as a handler whose
/// answer is ready by its next drive does; answers then.
struct WakesItself;

impl crate::http::Handler for WakesItself {
    fn request(
        &mut self,
        cx: &mut crate::http::Context<'_>,
        _: &crate::http::Request<'_>,
        res: crate::http::Response<'_>,
    ) -> crate::http::Reply {
        cx.waker().wake_by_ref();
        res.defer()
    }

    fn resume(&mut self, _: &mut crate::http::Context<'_>, res: crate::http::Response<'_>) -> crate::http::Reply {
        res.text(200, "woke")
    }
}

#[test]
fn wakes_the_shard_makes_in_a_turn_cost_no_notification() {
    // The loop asks the host when to wake (which marks it about to sleep)
    // after every idle turn, as `run_until` does, and often does not sleep.
    // A wake made while the next turn handles its events is the shard's
    // own: queued, with no eventfd write to end a sleep nobody is in.
    let notified = Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let count = Arc::clone(&notified);
    let wakes = WakeQueue::new(Some(Box::new(move || {
        count.fetch_add(1, Ordering::Relaxed);
    })));
    let hub = Arc::new(MetricsHub::new(1, 4, "test"));
    let site = ShardSite::new(0, hub, None, 4).unwrap();
    let tx_buffer = Config::new([0; 6], SERVER_IP, 24).tcp.tx_buffer;
    let mut p = Pair::waking(HttpConfig::default(), site, tx_buffer, WakesItself, wakes);
    let h = p.connect();
    let mut got = Vec::new();
    for _ in 0..3 {
        got.clear();
        p.client.send(h, b"GET / HTTP/1.1\r\nHost: x\r\n\r\n").unwrap();
        // The loop asked before this turn too.
        let _ = p.host.poll_timeout();
        let limit = p.now + Duration::from_secs(1);
        p.run_until(limit, |p| {
            let _ = p.read(h, &mut got);
            got.ends_with(b"woke")
        });
    }
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200 "));
    assert_eq!(notified.load(Ordering::Relaxed), 0, "the shard's own wakes notified");
}

/// Holds a request body back at its first piece (0 taken) until the test
/// wakes it, as a handler waiting on another socket does; then takes all.
#[derive(Default)]
struct Hesitant {
    waker: std::sync::Arc<std::sync::Mutex<Option<std::task::Waker>>>,
    held: bool,
    taken: usize,
}

impl crate::http::Handler for Hesitant {
    fn request(
        &mut self,
        _: &mut crate::http::Context<'_>,
        _: &crate::http::Request<'_>,
        res: crate::http::Response<'_>,
    ) -> crate::http::Reply {
        res.read_body()
    }

    fn body(&mut self, cx: &mut crate::http::Context<'_>, data: &[u8]) -> usize {
        if !self.held {
            self.held = true;
            *self.waker.lock().unwrap() = Some(cx.waker().clone());
        }
        if self.waker.lock().unwrap().is_some() {
            return 0; // until the test takes the waker and wakes it
        }
        self.taken += data.len();
        data.len()
    }

    fn body_end(
        &mut self,
        _: &mut crate::http::Context<'_>,
        _: &[u8],
        res: crate::http::Response<'_>,
    ) -> crate::http::Reply {
        res.text(200, &self.taken.to_string())
    }
}

#[test]
fn a_body_held_back_until_all_of_it_has_arrived_is_read_on_once_taken() {
    // While the handler holds the body back, the rest of it arrives and
    // its events find the input full. Woken, the handler takes the input:
    // no event will say the socket has more, so the drive must read on.
    let hesitant = Hesitant::default();
    let waker = std::sync::Arc::clone(&hesitant.waker);
    let router = Router::new().route(crate::http::Method::Post, "/slow", hesitant);
    let mut p = Pair::routing(HttpConfig::default(), None, Config::new([0; 6], SERVER_IP, 24).tcp.tx_buffer, router);
    let h = p.connect();
    let len = 100_000;
    let mut request = format!("POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: {len}\r\n\r\n").into_bytes();
    request.resize(request.len() + len, b'b');
    // As much as the windows let through arrives meanwhile.
    let mut sent = 0;
    let (until, limit) = (p.now + Duration::from_millis(200), p.now + Duration::from_secs(5));
    p.run_until(limit, |p| {
        if sent < request.len() {
            sent += p.client.send(h, &request[sent..]).unwrap_or(0);
        }
        p.now >= until
    });
    let held = waker.lock().unwrap().take().expect("the handler held the body back");
    held.wake();
    let mut got = Vec::new();
    let limit = p.now + Duration::from_secs(5);
    p.run_until(limit, |p| {
        if sent < request.len() {
            sent += p.client.send(h, &request[sent..]).unwrap_or(0);
        }
        let _ = p.read(h, &mut got);
        got.ends_with(len.to_string().as_bytes())
    });
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 200 "));
}

/// The body of the one response at the start of `bytes` (by its
/// `Content-Length`), and the bytes after it.
fn split_response(bytes: &[u8]) -> Option<(&[u8], &[u8])> {
    let end = bytes.windows(4).position(|w| w == b"\r\n\r\n")? + 4;
    let head = std::str::from_utf8(&bytes[..end]).ok()?;
    let len: usize = head
        .lines()
        .find_map(|line| line.strip_prefix("Content-Length: ").or_else(|| line.strip_prefix("content-length: ")))?
        .trim()
        .parse()
        .ok()?;
    let rest = bytes.get(end..)?;
    (rest.len() >= len).then(|| rest.split_at(len))
}

#[test]
fn static_files_on_ring_and_segment_boundaries_arrive_byte_exact_from_the_send_ring() {
    // A 16 KiB send ring, so every body wraps it many times; files at the
    // lengths where a copy into the ring or out of it turns a corner.
    let ring = 16 * 1024;
    let dir = std::env::temp_dir().join(format!("fairway-host-in-place-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let sizes = [0usize, 1, 1447, 1448, 1449, 1460, ring - 1, ring, ring + 1, 3 * ring + 5, 1 << 20];
    let content = |size: usize| -> Vec<u8> { (0..size).map(|i| (i * 7 + size) as u8).collect() };
    for size in sizes {
        std::fs::write(dir.join(format!("{size}.bin")), content(size)).unwrap();
    }
    let mut p = Pair::serving(HttpConfig::default(), Some(&dir), ring);
    let h = p.connect();
    // One request at a time, then all of them pipelined on the same
    // connection: each body follows its head straight from the ring.
    let mut requests = Vec::new();
    for size in sizes {
        requests.push(format!("GET /{size}.bin HTTP/1.1\r\nHost: x\r\n\r\n").into_bytes());
    }
    let check = |p: &mut Pair, batch: &[Vec<u8>], batch_sizes: &[usize]| {
        for request in batch {
            let mut sent = 0;
            while sent < request.len() {
                sent += p.client.send(h, &request[sent..]).unwrap();
            }
        }
        let mut got = Vec::new();
        let limit = p.now + Duration::from_secs(30);
        let total: usize = batch_sizes.iter().sum();
        p.run_until(limit, |p| {
            let _ = p.read(h, &mut got);
            got.len() >= total && {
                let mut rest = &got[..];
                batch_sizes.iter().all(|_| match split_response(rest) {
                    Some((_, after)) => {
                        rest = after;
                        true
                    }
                    None => false,
                })
            }
        });
        let mut rest = &got[..];
        for &size in batch_sizes {
            let (body, after) = split_response(rest).unwrap();
            assert!(body == content(size), "{size}-byte file: {} bytes differ", body.len());
            rest = after;
        }
        assert!(rest.is_empty(), "{} bytes after the last response", rest.len());
    };
    for (request, &size) in requests.iter().zip(&sizes) {
        check(&mut p, std::slice::from_ref(request), &[size]);
    }
    check(&mut p, &requests, &sizes);
    let _ = std::fs::remove_dir_all(&dir);
}

/// Connections whose peers read everything at once: `send` never says
/// `WouldBlock`, as a kernel socket on loopback often does not.
#[derive(Default)]
struct Bottomless {
    /// Per connection: the request not yet read, and the bytes sent.
    conns: Vec<(Vec<u8>, usize)>,
    backlog: Vec<u32>,
}

impl Transport for Bottomless {
    type Conn = u32;
    type Listener = ();
    type Event = u32;

    fn index(conn: u32) -> usize {
        conn as usize
    }

    fn classify(conn: u32) -> HostEvent<u32, ()> {
        HostEvent::Ready(conn)
    }

    fn listen(&mut self, _: u16) -> Result<(), String> {
        Ok(())
    }

    fn unlisten(&mut self, (): ()) {}

    fn accept(&mut self, (): ()) -> Option<(u32, std::net::SocketAddr)> {
        Some((self.backlog.pop()?, std::net::SocketAddr::from((CLIENT_IP, 4000))))
    }

    fn recv(&mut self, conn: u32, buf: &mut [u8]) -> Result<usize, TransportError> {
        let input = &mut self.conns[conn as usize].0;
        if input.is_empty() {
            return Err(TransportError::WouldBlock);
        }
        let n = input.len().min(buf.len());
        buf[..n].copy_from_slice(&input[..n]);
        input.drain(..n);
        Ok(n)
    }

    fn send(&mut self, conn: u32, data: &[u8]) -> Result<usize, TransportError> {
        self.conns[conn as usize].1 += data.len();
        Ok(data.len())
    }

    fn shutdown(&mut self, _: u32) {}

    fn close(&mut self, _: u32) {}

    fn abort(&mut self, _: u32) {}
}

#[test]
fn a_connection_that_never_blocks_shares_its_shard() {
    let hub = Arc::new(MetricsHub::new(1, 4, "test"));
    let mut host: Host<Bottomless, HttpService<Router>> = Host::with_service(
        HttpService::new(HttpConfig::default()),
        ShardSite::new(0, hub, None, 4).unwrap(),
        Arc::new(ConnectionLimit::new(2)),
        Arc::new(AtomicBool::new(false)),
        StdDuration::from_secs(5),
        WakeQueue::new(None),
    );
    let request = b"GET /bytes/1000000000 HTTP/1.1\r\nHost: x\r\n\r\n".to_vec();
    let mut t = Bottomless { conns: vec![(request.clone(), 0), (request, 0)], backlog: vec![1, 0] };
    let now = Instant::from_secs(1);
    host.start(&mut t, now);
    // Both are admitted and served; a gigabyte each, and neither may take
    // the turn for itself.
    host.accept_all(&mut t, now, ());
    // A turn's budget, plus the output window it may have begun; twice for
    // a connection driven both by an event and by its own wake.
    let turn_bound = 2 * (crate::http::TURN_BYTES + HttpConfig::default().output_window);
    assert!(t.conns.iter().all(|&(_, sent)| sent > 0 && sent <= turn_bound), "{:?}", t.conns);
    for turn in 1..=20 {
        // An event for the second, as the kernel would send for its ACKs;
        // the first has only its own wake.
        let before: Vec<usize> = t.conns.iter().map(|c| c.1).collect();
        host.on_event(&mut t, now, 1);
        host.poll(&mut t, now);
        for (i, (&(_, sent), was)) in t.conns.iter().zip(before).enumerate() {
            assert!(sent > was, "turn {turn}: connection {i} was not served");
            assert!(sent - was <= turn_bound, "turn {turn}: connection {i} sent {} bytes", sent - was);
        }
        assert_eq!(host.poll_timeout(), Some(Instant::ZERO), "a connection with more to send keeps the loop awake");
    }
}

/// Everything `from` has to read now, appended to `into`.
fn drain(shard: &mut Shard, from: Handle, into: &mut Vec<u8>) {
    let mut buf = [0u8; 8192];
    while let Ok(n @ 1..) = shard.recv(from, &mut buf) {
        into.extend_from_slice(&buf[..n]);
    }
}

/// The reverse proxy with its upstream reached through the server's own
/// stack (a link), not a kernel socket: the client shard is the upstream
/// too, listening on 10.0.0.2:8000, and the test answers as it.
#[test]
fn an_upstream_reached_through_the_stack_streams_both_ways_is_reused_and_a_refusal_is_a_502() {
    let flags = ["fairway", "--upstream", "app=http://10.0.0.2:8000", "--upstream", "gone=http://10.0.0.2:8001"];
    let routes = ["--route", "/gone=gone", "--route", "/=app"];
    let config = crate::config::Config::load(flags.into_iter().chain(routes), None).unwrap();
    let proxy_config = Arc::clone(config.proxy.as_ref().unwrap());
    let proxy = crate::proxy::Proxy::new(proxy_config, Box::new(crate::http::builtin(&HttpConfig::default())), None);
    let hub = Arc::new(MetricsHub::new(1, 4, "test"));
    let site = ShardSite::new(0, hub, None, 4).unwrap().with_outbound_links().unwrap();
    let tx_buffer = Config::new([0; 6], SERVER_IP, 24).tcp.tx_buffer;
    let mut p = Pair::handling(HttpConfig::default(), site, tx_buffer, proxy);
    let listener = p.client.listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 8000)).unwrap();
    let h = p.connect();

    // A download larger than a link holds (LINK_INPUT), and then an upload
    // larger than its output: both byte-exact, on one upstream connection.
    let body: Vec<u8> = (0..2_000_000u32).map(|i| (i % 251) as u8).collect();
    let mut upload = format!("POST /up HTTP/1.1\r\nHost: site\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
    upload.extend_from_slice(&body);
    let exchanges: [(&[u8], Vec<u8>); 2] = [
        (b"GET /file HTTP/1.1\r\nHost: site\r\n\r\n", {
            let mut r = format!("HTTP/1.1 200 OK\r\nContent-Length: {}\r\n\r\n", body.len()).into_bytes();
            r.extend_from_slice(&body);
            r
        }),
        (&upload, b"HTTP/1.1 201 Created\r\nContent-Length: 2\r\n\r\nok".to_vec()),
    ];
    let mut upstream: Option<Handle> = None;
    for (i, (request, response)) in exchanges.iter().enumerate() {
        let (mut sent, mut answered) = (0, 0);
        let (mut seen, mut got) = (Vec::new(), Vec::new());
        let limit = p.now + Duration::from_secs(10);
        p.run_until(limit, |p| {
            if sent < request.len() {
                sent += p.client.send(h, &request[sent..]).unwrap_or(0);
            }
            if let Some(conn) = p.client.accept(listener) {
                assert!(upstream.is_none(), "exchange {i}: a second upstream connection, not the pooled one");
                upstream = Some(conn);
            }
            let Some(up) = upstream else { return false };
            drain(&mut p.client, up, &mut seen);
            let head_end = seen.windows(4).position(|w| w == b"\r\n\r\n").map(|at| at + 4);
            let whole = head_end.is_some_and(|end| seen.len() - end >= request.len() - head_end_of(request));
            if whole && answered < response.len() {
                answered += p.client.send(up, &response[answered..]).unwrap_or(0);
            }
            let _ = p.read(h, &mut got);
            split_response(&got).is_some()
        });
        let text = String::from_utf8_lossy(&seen[..head_end_of(&seen)]).into_owned();
        let line = String::from_utf8_lossy(&request[..request.iter().position(|&b| b == b'\r').unwrap()]).into_owned();
        assert!(text.starts_with(&format!("{line}\r\n")), "exchange {i}: the upstream saw {text}");
        assert!(text.contains("X-Forwarded-For: 10.0.0.2\r\n"), "exchange {i}: {text}");
        assert!(seen[head_end_of(&seen)..] == request[head_end_of(request)..], "exchange {i}: the body upstream");
        let (got_body, _) = split_response(&got).expect("a whole response");
        let (want_body, _) = split_response(response).unwrap();
        assert!(got_body == want_body, "exchange {i}: the body at the client, {} bytes", got_body.len());
    }
    let counters = *p.host.site.metrics_mut().proxy_mut();
    assert_eq!((counters.forwarded, counters.connects, counters.reused), (2, 1, 1), "{counters:?}");

    // Nothing listens on 8001: the client shard refuses, the client gets 502.
    p.client.send(h, b"GET /gone/x HTTP/1.1\r\nHost: site\r\n\r\n").unwrap();
    let mut got = Vec::new();
    let limit = p.now + Duration::from_secs(5);
    p.run_until(limit, |p| {
        let _ = p.read(h, &mut got);
        split_response(&got).is_some()
    });
    assert!(String::from_utf8_lossy(&got).starts_with("HTTP/1.1 502 "), "{}", String::from_utf8_lossy(&got));
    assert_eq!(p.host.site.metrics_mut().proxy_mut().bad_gateway, 1);

    // Draining closes the pooled link too: the upstream sees its FIN.
    p.stop.store(true, Ordering::Relaxed);
    p.client.close(h);
    let up = upstream.unwrap();
    let mut rest = Vec::new();
    let limit = p.now + Duration::from_secs(5);
    p.run_until(limit, |p| matches!(p.client.recv(up, &mut [0u8; 64]), Ok(0)) && p.host.finished());
    drain(&mut p.client, up, &mut rest);
    assert!(rest.is_empty(), "nothing after the FIN");
}

/// Where `message`'s head ends (after its blank line), or its length.
fn head_end_of(message: &[u8]) -> usize {
    message.windows(4).position(|w| w == b"\r\n\r\n").map_or(message.len(), |at| at + 4)
}
