//! HTTP/2 for the built-in endpoints and `Handler` applications.
//!
//! [`AutoService`] is what a shard serving a [`Handler`] runs on its
//! connections: the HTTP/1.1 layer ([`HttpService`], sans-IO, no
//! allocation per request) for every connection that speaks HTTP/1.1, and,
//! for one that opens with HTTP/2's connection preface (prior knowledge on
//! a plain port, or ALPN's `h2` over TLS), hyper's HTTP/2 server in a task
//! of the shard's runtime, its streams answered by the same handler through
//! the [bridge](bridge): each request is served by a pooled HTTP/1.1
//! connection in memory, so everything a handler does (answer, stream,
//! defer, read or gather a body, the proxy's upstreams) works over HTTP/2
//! unchanged.
//!
//! ```text
//! connection ─▶ HttpConn: HTTP/1.1 ──────────────────────────────▶ Handler
//!                  └ preface ─▶ adopted by the async runtime ─▶ hyper h2 ─▶ bridge ─▶ Handler
//! ```
//!
//! The switch happens at the first bytes: the HTTP/1.1 layer sees the
//! preface (`PRI * HTTP/2.0`), stops, and hands the connection and the
//! bytes it read to the runtime ([`AsyncService::adopt`]), whose task for
//! HTTP/2 connections accepts it. Window control goes on acting on the TCP
//! connection below either.

mod bridge;

use std::net::SocketAddr;
use std::rc::Rc;

use fairway_stack::TRIM_INTERVAL;
use fairway_stack::time::Instant;

use self::bridge::{Bridge, BridgeService};
use crate::host::wake::WakeQueue;
use crate::host::{Cx, Next, Service, Transport};
use crate::http::{Handler, HttpConfig, HttpConn, HttpService};
use crate::metrics::ShardMetrics;
use crate::net::TcpListener;
use crate::rt::{AsyncService, AsyncSession, MainTask, Shared};
use crate::site::ShardSite;

/// HTTP/1.1 and HTTP/2 on a host's connections, answered by `H`. See the
/// [module documentation](self).
pub struct AutoService<H: Handler, X: Transport + 'static> {
    http: HttpService<H>,
    tasks: AsyncService<X>,
    bridge: Rc<Bridge>,
    http2: bool,
    trim_at: Instant,
    /// Connections that switched to HTTP/2 so far.
    http2_connections: u64,
}

/// A connection's session: its HTTP/1.1 state, and its place with the
/// runtime once it speaks HTTP/2.
pub struct AutoSession {
    conn: HttpConn,
    task: AsyncSession,
    peer: Option<SocketAddr>,
    http2: bool,
}

impl<H: Handler, X: Transport + 'static> AutoService<H, X> {
    /// HTTP as `http` says (HTTP/2 too unless `http.http2` is off),
    /// answered by `handler`, over `net` (the transport the host is
    /// given, shared with the shard's tasks), whose wake-ups go through
    /// `wakes` (the host's queue).
    pub fn new(http: HttpConfig, handler: H, net: &Shared<X>, wakes: std::sync::Arc<WakeQueue>) -> Self {
        let bridge = Bridge::new(&http, wakes);
        let accepting = Rc::clone(&bridge);
        let main: MainTask = Box::new(move || Box::pin(accept_http2(accepting)));
        let tasks = AsyncService::new(net, &http, main);
        let http2 = http.http2;
        AutoService {
            http: HttpService::with_handler(http, handler),
            tasks,
            bridge,
            http2,
            trim_at: Instant::ZERO,
            http2_connections: 0,
        }
    }

    /// The handler.
    #[must_use]
    pub fn handler(&self) -> &H {
        self.http.handler()
    }

    /// HTTP/2 streams being answered now.
    #[must_use]
    pub fn http2_streams(&self) -> usize {
        self.bridge.live()
    }

    /// If the connection turned out to speak HTTP/2, hands it to the
    /// runtime with what was read of it.
    fn switch(&mut self, s: &mut AutoSession, cx: &mut Cx<'_, Shared<X>>, next: Next) -> Next {
        if next != Next::Keep || !s.conn.speaks_http2() {
            return next;
        }
        s.http2 = true;
        self.http2_connections += 1;
        let peer = s.peer.unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], 0)));
        self.tasks.adopt(&mut s.task, cx, peer, s.conn.input_bytes())
    }
}

/// The main task of a shard's HTTP/2 side: every adopted connection gets a
/// task of its own running hyper's HTTP/2 server over the bridge.
async fn accept_http2(bridge: Rc<Bridge>) {
    let Ok(listener) = TcpListener::shard() else { return };
    while let Ok((stream, peer)) = listener.accept().await {
        let service = BridgeService { bridge: Rc::clone(&bridge), peer, secure: stream.is_secure() };
        crate::rt::spawn(async move {
            if let Err(e) = crate::rt::serve_http2(stream, service).await {
                tracing::debug!(%peer, "HTTP/2 connection: {e}");
            }
        });
    }
}

impl<H: Handler, X: Transport + 'static> Service<Shared<X>> for AutoService<H, X> {
    type Session = AutoSession;

    fn session(&mut self) -> AutoSession {
        let mut conn = Service::<Shared<X>>::session(&mut self.http);
        conn.accept_http2(self.http2);
        AutoSession { conn, task: AsyncSession::default(), peer: None, http2: false }
    }

    fn open(&mut self, s: &mut AutoSession, cx: &mut Cx<'_, Shared<X>>, peer: SocketAddr) -> Next {
        s.http2 = false;
        s.peer = Some(peer);
        let next = self.http.open(&mut s.conn, cx, peer);
        self.switch(s, cx, next)
    }

    fn drive(&mut self, s: &mut AutoSession, cx: &mut Cx<'_, Shared<X>>) -> Next {
        if s.http2 {
            return self.tasks.drive(&mut s.task, cx);
        }
        let next = self.http.drive(&mut s.conn, cx);
        self.switch(s, cx, next)
    }

    fn timeout(&mut self, s: &mut AutoSession, cx: &mut Cx<'_, Shared<X>>) -> Next {
        if s.http2 {
            return self.tasks.timeout(&mut s.task, cx);
        }
        let next = self.http.timeout(&mut s.conn, cx);
        self.switch(s, cx, next)
    }

    fn deadline(&self, s: &AutoSession) -> Option<Instant> {
        if s.http2 {
            Service::<Shared<X>>::deadline(&self.tasks, &s.task)
        } else {
            Service::<Shared<X>>::deadline(&self.http, &s.conn)
        }
    }

    fn is_idle(&self, s: &AutoSession) -> bool {
        if s.http2 {
            Service::<Shared<X>>::is_idle(&self.tasks, &s.task)
        } else {
            Service::<Shared<X>>::is_idle(&self.http, &s.conn)
        }
    }

    fn closed(&mut self, s: &mut AutoSession) {
        if s.http2 {
            Service::<Shared<X>>::closed(&mut self.tasks, &mut s.task);
        } else {
            Service::<Shared<X>>::closed(&mut self.http, &mut s.conn);
        }
    }

    fn poll(&mut self, transport: &mut Shared<X>, site: &mut ShardSite, now: Instant) {
        self.tasks.poll(transport, site, now);
        self.bridge.drive(now, self.http.handler_mut(), site);
        if now >= self.trim_at {
            self.trim_at = now + TRIM_INTERVAL;
            if self.bridge.trim() > 0 {
                crate::runtime::memory::release_freed_memory();
            }
        }
    }

    fn woken(&mut self, task: u32) {
        self.bridge.woken(task);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        [Service::<Shared<X>>::poll_timeout(&self.tasks), self.bridge.poll_timeout()].into_iter().flatten().min()
    }

    fn begin_drain(&mut self) {
        Service::<Shared<X>>::begin_drain(&mut self.tasks);
    }

    fn busy(&self) -> bool {
        Service::<Shared<X>>::busy(&self.tasks)
    }

    fn end(&mut self) {
        Service::<Shared<X>>::end(&mut self.tasks);
    }

    fn observe(&self, metrics: &mut ShardMetrics) {
        Service::<Shared<X>>::observe(&self.tasks, metrics);
        metrics.observe_http2(self.http2_connections, self.bridge.started());
    }
}
