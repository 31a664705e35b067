//! The axum example on the simulated network, in virtual time: the server
//! is the async runtime on Fairway's own host over a simulated shard, its
//! tasks on a tokio runtime whose clock is paused and moved with the
//! network's; the client a plain stack app on another host of the network.
//! Nothing sleeps: a countdown of 100 ms steps (`tokio::time::sleep`) and
//! hyper's header timeout run in virtual time, so a run takes virtual
//! seconds and wall milliseconds, and two runs with one seed are the same.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration as StdDuration;

use fairway::backend::connection_limit::ConnectionLimit;
use fairway::host::Host;
use fairway::host::wake::WakeQueue;
use fairway::http::HttpConfig;
use fairway::metrics::MetricsHub;
use fairway::rt::{AsyncService, Shared};
use fairway::runtime::{App as _, LoopStats};
use fairway::site::ShardSite;
use fairway_nic::sim::{LinkConfig, Side};
use fairway_stack::time::{Duration, Instant};
use fairway_stack::{Event, Handle, RecvError, Shard};
use fairway_tests::world::{SimApp, Stop, World};

#[path = "../../server/examples/axum_app.rs"]
#[allow(dead_code)]
mod axum_app;

/// How often the server's host gets a turn while exchanges are open: tokio's
/// timers (the countdown's, hyper's) are not in the host's deadlines, so the
/// network visits it at least this often, as a real loop's sleep would end
/// for them.
const TOKIO_TICK: Duration = Duration::from_millis(1);

const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

/// One request on a connection of its own, sent at `at`.
struct Exchange {
    at: Instant,
    request: Vec<u8>,
    handle: Option<Handle>,
    sent: usize,
    response: Vec<u8>,
    /// When the server's FIN (or a reset) ended it.
    ended: Option<Instant>,
}

/// The server host (the example's router on the async runtime) and a
/// client host making `exchanges`.
struct Sim {
    /// The server's shard lives in the world; during its turn it is swapped
    /// into the cell its tasks share.
    shared: Shared<Shard>,
    host: Host<Shared<Shard>, AsyncService<Shard>>,
    started: bool,
    stats: LoopStats,
    exchanges: Vec<Exchange>,
    /// The server's tasks: a current-thread runtime with its clock paused,
    /// and the `LocalSet` they run in.
    runtime: tokio::runtime::Runtime,
    local: tokio::task::LocalSet,
    /// tokio's time at the network's zero.
    zero: tokio::time::Instant,
    /// The network's time at the last turn.
    last: Instant,
}

impl Sim {
    fn new(world: &World, http: HttpConfig, requests: Vec<(u64, Vec<u8>)>) -> Sim {
        let runtime = tokio::runtime::Builder::new_current_thread().enable_time().start_paused(true).build().unwrap();
        let zero = runtime.block_on(async { tokio::time::Instant::now() });
        let shared = Shared::new(Shard::new(world.config_for(SERVER_IP)));
        let wakes = WakeQueue::new(None);
        let state = axum_app::AppState::default();
        let main: fairway::rt::MainTask = Box::new(move || Box::pin(fairway::rt::axum(axum_app::app(state))));
        let service = AsyncService::new(&shared, &http, main);
        let hub = Arc::new(MetricsHub::new(1, 4, "sim"));
        let site = ShardSite::new(0, hub, None, 4).unwrap();
        let limit = Arc::new(ConnectionLimit::new(100));
        let stop = Arc::new(AtomicBool::new(false));
        let host = Host::with_service(service, site, limit, stop, StdDuration::from_secs(5), wakes);
        let exchanges = requests
            .into_iter()
            .map(|(ms, request)| Exchange {
                at: Instant::from_millis(ms),
                request,
                handle: None,
                sent: 0,
                response: Vec::new(),
                ended: None,
            })
            .collect();
        Sim {
            shared,
            host,
            started: false,
            stats: LoopStats::default(),
            exchanges,
            runtime,
            local: tokio::task::LocalSet::new(),
            zero,
            last: Instant::ZERO,
        }
    }

    /// A turn of the server at `now`: tokio's clock is moved to it (firing
    /// the tasks' timers that are due), the host takes the shard's events,
    /// the tasks they woke run, and the host takes what the tasks did.
    fn serve(&mut self, shard: &mut Shard, now: Instant) {
        std::mem::swap(shard, &mut *self.shared.borrow_mut());
        self.last = now;
        let Sim { shared, host, started, stats, runtime, local, zero, .. } = self;
        local.block_on(runtime, async {
            let at = *zero + StdDuration::from(now.saturating_since(Instant::ZERO));
            let behind = at.saturating_duration_since(tokio::time::Instant::now());
            if !behind.is_zero() {
                tokio::time::advance(behind).await;
            }
            if !*started {
                host.start(shared, now);
                *started = true;
            }
            for _ in 0..2 {
                loop {
                    let event = shared.borrow_mut().poll_event();
                    let Some(event) = event else { break };
                    host.on_event(shared, now, event);
                }
                host.poll(shared, now);
                stats.turns += 1;
                host.after_turn(shared, now, stats);
                // The tasks woken so far run (each a few polls deep).
                for _ in 0..8 {
                    tokio::task::yield_now().await;
                }
            }
        });
        std::mem::swap(shard, &mut *self.shared.borrow_mut());
    }

    fn client(&mut self, shard: &mut Shard, now: Instant) {
        while let Some(event) = shard.poll_event() {
            if let Event::Error(h, _) = event
                && let Some(x) = self.exchanges.iter_mut().find(|x| x.handle == Some(h))
            {
                x.ended.get_or_insert(now);
            }
        }
        for x in &mut self.exchanges {
            let h = match x.handle {
                Some(h) => h,
                None if now >= x.at => {
                    let h = shard.connect(now, SocketAddrV4::new(SERVER_IP, 80)).unwrap();
                    x.handle = Some(h);
                    h
                }
                None => continue,
            };
            if x.ended.is_some() {
                continue;
            }
            if x.sent < x.request.len() {
                x.sent += shard.send(h, &x.request[x.sent..]).unwrap_or(0);
            }
            let mut buf = [0u8; 8192];
            loop {
                match shard.recv(h, &mut buf) {
                    Ok(0) => {
                        x.ended = Some(now);
                        shard.close(h);
                        break;
                    }
                    Ok(n) => x.response.extend_from_slice(&buf[..n]),
                    Err(RecvError::WouldBlock) => break,
                    Err(_) => {
                        x.ended = Some(now);
                        break;
                    }
                }
            }
        }
    }
}

impl SimApp for Sim {
    fn on_host(&mut self, host: usize, shard: &mut Shard, now: Instant) {
        if host == 0 { self.serve(shard, now) } else { self.client(shard, now) }
    }

    fn done(&self) -> bool {
        self.exchanges.iter().all(|x| x.ended.is_some())
    }

    fn next_wakeup(&self) -> Option<Instant> {
        let starts = self.exchanges.iter().filter(|x| x.handle.is_none()).map(|x| x.at);
        let tick = self.exchanges.iter().any(|x| x.ended.is_none()).then_some(self.last + TOKIO_TICK);
        starts.chain(self.host.poll_timeout()).chain(tick).min()
    }
}

fn get(path: &str) -> Vec<u8> {
    format!("GET {path} HTTP/1.1\r\nHost: sim\r\nConnection: close\r\n\r\n").into_bytes()
}

/// Runs `requests` (each at its millisecond) against the example; returns
/// each exchange's response and when it ended, and the virtual time spent.
/// Checks that every task but the accepting one ended, none by a panic.
fn run(seed: u64, requests: Vec<(u64, Vec<u8>)>) -> (Vec<(String, Duration)>, Instant) {
    let path = LinkConfig::ideal().with_delay(Duration::from_millis(5)).with_bandwidth_mbps(100);
    let mut world = World::new(seed, 1500, path, path);
    world.add_host(Side::Right, world.config_for(SERVER_IP), LinkConfig::ideal());
    world.add_host(Side::Left, world.config_for(CLIENT_IP), LinkConfig::ideal());
    let http = HttpConfig { header_timeout: StdDuration::from_secs(2), ..HttpConfig::default() };
    let mut sim = Sim::new(&world, http, requests);
    let stop = world.run(&mut sim, Instant::from_secs(60), 1_000_000);
    assert_eq!(stop, Stop::Done, "every exchange ended");
    let service = sim.host.service();
    assert_eq!((service.tasks(), service.panicked()), (1, 0), "only the accepting task is left");
    let results = sim
        .exchanges
        .iter()
        .map(|x| (String::from_utf8_lossy(&x.response).into_owned(), x.ended.unwrap().saturating_since(x.at)))
        .collect();
    (results, world.now())
}

fn body(response: &str) -> &str {
    response.split_once("\r\n\r\n").map_or("", |(_, body)| body)
}

#[test]
fn the_axum_example_answers_on_the_simulated_network_in_virtual_time() {
    let order = br#"{"item":"tea","quantity":3}"#;
    let mut post = format!(
        "POST /orders HTTP/1.1\r\nHost: sim\r\nContent-Type: application/json\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        order.len()
    )
    .into_bytes();
    post.extend_from_slice(order);
    let requests = vec![
        (0, get("/hello/sim")),
        (1, post),
        (50, get("/countdown/3")),
        (400, get("/stats")),
        // Never finishes its head: hyper's header timeout (2 s, virtual).
        (10, b"GET /plaintext HTTP/1.1\r\nHost: si".to_vec()),
        // No HTTP at all.
        (20, (0..=255u8).cycle().take(4096).collect()),
    ];
    let wall = std::time::Instant::now();
    let (results, ended) = run(7, requests.clone());
    let wall = wall.elapsed();
    assert!(results[0].0.starts_with("HTTP/1.1 200 OK\r\n") && body(&results[0].0) == "Hello, sim! (greeting 1)\n");
    assert!(results[1].0.starts_with("HTTP/1.1 201 Created\r\n"), "{}", results[1].0);
    assert!(body(&results[1].0).contains(r#""total_cents":750"#), "{}", results[1].0);
    // Chunked: the three lines, each 100 ms of virtual time apart.
    let countdown = &results[2];
    assert!(countdown.0.contains("3...\n") && countdown.0.contains("1... liftoff!\n"), "{}", countdown.0);
    assert!(countdown.1 >= Duration::from_millis(300), "three 100 ms sleeps took {}", countdown.1);
    assert!(countdown.1 < Duration::from_millis(400), "and not much more: {}", countdown.1);
    assert!(body(&results[3].0).contains(r#""orders":1"#), "{}", results[3].0);
    let slow = &results[4];
    assert!(
        slow.1 >= Duration::from_secs(2) && slow.1 < Duration::from_millis(2100),
        "the header timeout fired after {} (virtual)",
        slow.1
    );
    assert!(results[5].0.is_empty() || results[5].0.starts_with("HTTP/1.1 400"), "garbage: {:?}", results[5].0);
    assert!(ended >= Instant::from_secs(2), "the run spans virtual seconds");
    assert!(wall < std::time::Duration::from_secs(20), "in {wall:?} of wall time");

    // The same seed, the same run.
    let (again, ended_again) = run(7, requests);
    let times = |r: &[(String, Duration)]| r.iter().map(|x| x.1).collect::<Vec<_>>();
    assert_eq!(times(&again), times(&results));
    assert_eq!(ended_again, ended);
}
