//! The server's own HTTP layer on a bare shard: [`HttpApp`] (the
//! connection host running the built-in endpoints, what `fairway --backend
//! afxdp|tap` runs on each shard) for tests and benchmarks that drive the
//! shards themselves (their device, their steering, their stack
//! configuration) instead of starting the server. Kernel clients get what
//! they get from the server: `/bytes/N`, `/upload`, `/plaintext`, 404s.
//!
//! [`HttpShard`] also watches what a test checks, and leaves it as an
//! [`HttpTally`] when its loop ends: the connections accepted, the most
//! open at once, each one's addresses (which shard a flow landed on), and
//! the requests answered.

use std::collections::HashSet;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use fairway::backend::connection_limit::ConnectionLimit;
use fairway::backend::userspace::HttpApp;
use fairway::http::HttpConfig;
use fairway::metrics::MetricsHub;
use fairway::runtime::{App, LoopStats};
use fairway::site::ShardSite;
use fairway_stack::time::Instant;
use fairway_stack::{Event, Handle, Shard};

use super::Leaves;

/// How long the app would drain on its own stop flag, which nobody raises:
/// the shard loop's stop ends it.
const GRACE: Duration = Duration::from_secs(1);

/// [`HttpApp`] on one shard, watched.
pub struct HttpShard {
    app: HttpApp,
    seen: HashSet<Handle>,
    peak_connections: usize,
    flows: Vec<(SocketAddr, SocketAddr)>,
}

/// What the server's HTTP layer did on a shard.
#[derive(Clone, Debug, Default)]
pub struct HttpTally {
    /// Requests answered, with any status.
    pub requests: u64,
    /// Connections accepted.
    pub accepted: u64,
    /// The most connections open at once (lingering ones included).
    pub peak_connections: usize,
    /// Every accepted connection as (local, remote) address, so a test can
    /// check which shard each landed on.
    pub flows: Vec<(SocketAddr, SocketAddr)>,
}

impl HttpShard {
    /// The server's HTTP layer listening on `port`, serving `/bytes/N` up
    /// to `max_bytes`, with no connection limit and no static files.
    ///
    /// # Panics
    ///
    /// Never: a site without a root opens no directory.
    #[must_use]
    pub fn new(port: u16, max_bytes: u64) -> HttpShard {
        let hub = Arc::new(MetricsHub::new(1, 0, "userspace"));
        let site = ShardSite::new(0, hub, None, 0).expect("a site without a root");
        let http = HttpConfig { max_bytes, ..HttpConfig::default() };
        let limit = Arc::new(ConnectionLimit::new(usize::MAX));
        let app = HttpApp::new(site, http, limit, Arc::new(AtomicBool::new(false)), GRACE).with_port(port);
        HttpShard { app, seen: HashSet::new(), peak_connections: 0, flows: Vec::new() }
    }

    /// What it has done so far.
    #[must_use]
    pub fn tally(&self) -> HttpTally {
        HttpTally {
            requests: self.app.site().metrics().requests(),
            accepted: self.app.accepted(),
            peak_connections: self.peak_connections,
            flows: self.flows.clone(),
        }
    }

    /// Records the connections the host took since the last look.
    fn watch(&mut self, shard: &Shard) {
        self.peak_connections = self.peak_connections.max(self.app.open_connections());
        for h in self.app.handles() {
            if self.seen.insert(h)
                && let Some(flow) = shard.flow(h)
            {
                self.flows.push((flow.local, flow.remote));
            }
        }
    }
}

impl Leaves for HttpShard {
    type Left = HttpTally;

    fn leave(self) -> HttpTally {
        self.tally()
    }
}

impl App for HttpShard {
    fn start(&mut self, shard: &mut Shard, now: Instant) {
        self.app.start(shard, now);
        if let Some(why) = self.app.listen_error() {
            panic!("the HTTP app cannot listen: {why}");
        }
    }

    fn on_event(&mut self, shard: &mut Shard, now: Instant, event: Event) {
        let accepting = matches!(event, Event::Acceptable(_));
        self.app.on_event(shard, now, event);
        if accepting {
            self.watch(shard);
        }
    }

    fn poll(&mut self, shard: &mut Shard, now: Instant) {
        self.app.poll(shard, now);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        self.app.poll_timeout()
    }

    fn after_turn(&mut self, shard: &mut Shard, now: Instant, stats: &LoopStats) {
        self.app.after_turn(shard, now, stats);
    }

    fn finished(&self) -> bool {
        self.app.finished()
    }
}
