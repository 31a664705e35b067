//! The connection host: everything between a backend's connections and the
//! application that serves them, written once for every backend.
//!
//! ```text
//! userspace conn (Shard + Handle) ─┐                   ┌─▶ HTTP/1.1 + Handler   (crate::http)
//! kernel conn (mio stream) ────────┴─ Transport ─▶ Host ┤
//!                                                       └─▶ async executor       (crate::rt)
//! ```
//!
//! A [`Host`] is a [`runtime::App`](crate::runtime::App) over any
//! [`Transport`]. It owns, per shard:
//!
//! - **the connection slots**, by the transport's dense index, each with its
//!   [`Service`]'s session (an `HttpConn`, say) taken from a pool and given
//!   back, so steady state allocates nothing, and a [`Waker`] made once per
//!   slot, which a handler keeps to be driven again later;
//! - **the drive**: a connection's event hands it to the service, which
//!   reads and writes as far as the transport allows and says how it went
//!   ([`Next`]);
//! - **one timer mechanism**: the stack's [`TimerWheel`], one entry per
//!   slot (the session's deadline while it is open, the end of its linger
//!   after), whose next expiry the loop's sleep includes
//!   ([`crate::runtime::App::poll_timeout`]), so a
//!   timeout fires on time;
//! - **lingering close**: a connection the service is done with has its
//!   sending side shut (FIN after the response) and its input read and
//!   dropped until the peer's FIN, [`LINGER_TIME`] or [`LINGER_BYTES`],
//!   and only then is closed: closing with unread input resets it, and a
//!   reset can destroy the answer on its way (a 431 to an oversized head, a
//!   response behind `Connection: close` with a pipelined request after it);
//! - **the connection limit** (shared by every shard) and the metrics of
//!   connections opened, closed and refused;
//! - **draining**: once the stop flag is up, pending connections are taken,
//!   the listener closed, idle connections closed, busy ones given until
//!   the grace period's end, then reset;
//! - **window control's sensing** ([`Windows`]), the backend's own acting.
//!
//! The service never sees a slot, a timer or a listener; the transport
//! never sees HTTP.

mod links;
#[cfg(test)]
mod tests;
mod transport;
pub mod wake;

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::task::Waker;

use fairway_nic::steering::Fabric;
use fairway_stack::TimerWheel;
use fairway_stack::time::{Duration, Instant};
use fairway_stack::{StoragePool, TRIM_INTERVAL};
use tracing::info;

pub use transport::{ConnIo, HostEvent, Transport, TransportError, send_slices};
use wake::{IdWaker, TASK, WakeQueue};

use crate::backend::connection_limit::ConnectionLimit;
use crate::metrics::{MetricsHub, PUBLISH_INTERVAL, ShardMetrics};
use crate::runtime::{App, LoopStats};
use crate::site::ShardSite;

/// How long a finished connection waits for the peer's FIN.
pub const LINGER_TIME: Duration = Duration::from_secs(2);

/// How much input a finished connection reads and drops before it gives
/// up on the peer's FIN and closes (a reset, if more is coming).
pub const LINGER_BYTES: usize = 1 << 20;

/// Where lingering input is read and dropped, and what a transport without
/// a ring of its own reads into first.
const SCRATCH: usize = 16 * 1024;

/// How a service's turn with a connection ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Next {
    /// It goes on.
    Keep,
    /// Everything it will send is queued: linger, then close.
    Close,
    /// The transport failed, or the service gives up: reset it now.
    Abort,
}

/// What a service is given for one connection's turn.
pub struct Cx<'a, T: Transport> {
    /// The backend's connections.
    pub transport: &'a mut T,
    /// This one.
    pub conn: T::Conn,
    /// The loop's time.
    pub now: Instant,
    /// What the shard's connections share (date, files, metrics).
    pub site: &'a mut ShardSite,
    /// Wakes this connection's slot: the host drives it again soon after.
    pub waker: &'a Waker,
    /// Its slot's index (dense, reused after it closes).
    pub slot: u32,
    /// The server is shutting down: a connection between requests closes.
    pub draining: bool,
    /// Room for a transport's [`recv_with`](Transport::recv_with).
    pub scratch: &'a mut [u8],
}

/// What runs on each connection of a [`Host`]: the HTTP layer with a
/// handler, or the async executor's reactor.
pub trait Service<T: Transport> {
    /// A connection's state, pooled by the host.
    type Session;

    /// A new session, for the pool (called only when it is empty).
    fn session(&mut self) -> Self::Session;

    /// A connection from `peer` was admitted into `s`; it may have input
    /// already. Drive it as far as it goes.
    fn open(&mut self, s: &mut Self::Session, cx: &mut Cx<'_, T>, peer: SocketAddr) -> Next;

    /// The connection had an event, or its slot was woken: drive it.
    fn drive(&mut self, s: &mut Self::Session, cx: &mut Cx<'_, T>) -> Next;

    /// Its [`deadline`](Self::deadline) has passed (or passed it by): act
    /// on what is due, then drive it.
    fn timeout(&mut self, s: &mut Self::Session, cx: &mut Cx<'_, T>) -> Next;

    /// When to call [`timeout`](Self::timeout).
    fn deadline(&self, s: &Self::Session) -> Option<Instant>;

    /// Nothing in progress: a draining server closes it now.
    fn is_idle(&self, s: &Self::Session) -> bool;

    /// The connection is gone (closed, reset or cut); the session goes
    /// back to the pool.
    fn closed(&mut self, s: &mut Self::Session) {
        let _ = s;
    }

    /// Once per loop turn, after the events: the service's own work.
    fn poll(&mut self, transport: &mut T, site: &mut ShardSite, now: Instant) {
        let _ = (transport, site, now);
    }

    /// A task id (without [`TASK`]) was woken.
    fn woken(&mut self, task: u32) {
        let _ = task;
    }

    /// When the service next needs a turn, if it has work of its own.
    fn poll_timeout(&self) -> Option<Instant> {
        None
    }

    /// The server began to drain.
    fn begin_drain(&mut self) {}

    /// Work remains that is not a connection's (tasks still running): a
    /// draining shard waits for it within the grace period.
    fn busy(&self) -> bool {
        false
    }

    /// The grace period is over: drop whatever work is left.
    fn end(&mut self) {}

    /// Adds the service's own counts to the shard's metrics.
    fn observe(&self, metrics: &mut ShardMetrics) {
        let _ = metrics;
    }
}

/// Window control over a host's connections: sensing what flows they
/// carry and acting through the backend. `()` is none.
pub trait Windows<T: Transport> {
    /// Its state of one connection, kept beside the slot.
    type Sense: Default;

    /// A connection from `peer` was admitted.
    fn opened(&mut self, sense: &mut Self::Sense, peer: SocketAddr);

    /// The connection did I/O.
    fn touch(sense: &mut Self::Sense);

    /// When [`run`](Self::run) is next due.
    fn next_run(&self) -> Instant;

    /// Senses the open connections (`conns[i]` is slot `i`'s, if open, and
    /// `senses[i]` its state) and runs the policy, when due.
    fn run(
        &mut self,
        now: Instant,
        transport: &mut T,
        conns: &[Option<T::Conn>],
        senses: &mut [Self::Sense],
        metrics: &mut ShardMetrics,
    );

    /// The connection is about to be reset: let go of it now (a closed one
    /// is let go once the backend no longer shows it).
    fn release(&mut self, transport: &mut T, conn: T::Conn, sense: &mut Self::Sense);

    /// Adds what the policy sees to the metrics.
    fn observe(&self, transport: &T, metrics: &mut ShardMetrics);
}

impl<T: Transport> Windows<T> for () {
    type Sense = ();
    fn opened(&mut self, (): &mut (), _: SocketAddr) {}
    fn touch((): &mut ()) {}
    fn next_run(&self) -> Instant {
        Instant::from_micros(u64::MAX)
    }
    fn run(&mut self, _: Instant, _: &mut T, _: &[Option<T::Conn>], _: &mut [()], _: &mut ShardMetrics) {}
    fn release(&mut self, _: &mut T, _: T::Conn, (): &mut ()) {}
    fn observe(&self, _: &T, _: &mut ShardMetrics) {}
}

/// A transport over another: TLS over a backend's connections, a
/// transport shared with async tasks. Its connections are those of the one
/// below, by the same names.
pub trait Layered: Transport {
    /// The transport below.
    type Below: Transport<Conn = Self::Conn>;

    /// The transport below, to look at.
    fn below(&self) -> impl std::ops::Deref<Target = Self::Below> + '_;

    /// The transport below, to act on.
    fn below_mut(&mut self) -> impl std::ops::DerefMut<Target = Self::Below> + '_;
}

/// Window control `W` of the transport below a [`Layered`] one: it senses
/// and acts on the TCP flows there, whatever the layer does with them.
#[derive(Debug)]
pub struct Beneath<W>(pub W);

impl<L: Layered, W: Windows<L::Below>> Windows<L> for Beneath<W> {
    type Sense = W::Sense;

    fn opened(&mut self, sense: &mut W::Sense, peer: SocketAddr) {
        self.0.opened(sense, peer);
    }
    fn touch(sense: &mut W::Sense) {
        W::touch(sense);
    }
    fn next_run(&self) -> Instant {
        self.0.next_run()
    }
    fn run(
        &mut self,
        now: Instant,
        transport: &mut L,
        conns: &[Option<L::Conn>],
        senses: &mut [W::Sense],
        metrics: &mut ShardMetrics,
    ) {
        self.0.run(now, &mut transport.below_mut(), conns, senses, metrics);
    }
    fn release(&mut self, transport: &mut L, conn: L::Conn, sense: &mut W::Sense) {
        self.0.release(&mut transport.below_mut(), conn, sense);
    }
    fn observe(&self, transport: &L, metrics: &mut ShardMetrics) {
        self.0.observe(&transport.below(), metrics);
    }
}

/// Where a slot's connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Served.
    Open,
    /// Done: its sending side is shut; input is dropped until the peer's
    /// FIN, `until`, or [`LINGER_BYTES`].
    Lingering { until: Instant, dropped: usize },
}

struct Slot<C, S> {
    conn: C,
    phase: Phase,
    session: S,
}

/// A slot's waker, made once and kept while the host lives.
struct SlotWaker {
    mark: Arc<IdWaker>,
    waker: Waker,
}

/// The host of one shard's connections. See the [module
/// documentation](self).
pub struct Host<T: Transport, S: Service<T>, W: Windows<T> = ()> {
    /// The ports it listens on, each once (a plain one and a TLS one,
    /// say); the transport knows what each is.
    ports: Vec<u16>,
    /// One per port while listening; none once draining.
    listeners: Vec<T::Listener>,
    listen_error: Option<String>,
    service: S,
    site: ShardSite,
    hub: Arc<MetricsHub>,
    limit: Arc<ConnectionLimit>,
    stop: Arc<AtomicBool>,
    grace: Duration,
    window: Option<W>,
    steering: Option<(Arc<Fabric>, u16)>,

    slots: Vec<Option<Slot<T::Conn, S::Session>>>,
    /// Slot `i`'s connection while it is open (window control's view).
    open: Vec<Option<T::Conn>>,
    senses: Vec<W::Sense>,
    wakers: Vec<SlotWaker>,
    /// Sessions of closed connections, for the next ones; what a whole
    /// trim interval did not need is freed.
    pool: StoragePool<S::Session>,
    /// When the sessions are next trimmed.
    trim_at: Instant,
    timers: TimerWheel,
    wakes: Arc<WakeQueue>,
    woken: Vec<u32>,
    scratch: Box<[u8]>,

    active: usize,
    drain_until: Option<Instant>,
    finished: bool,
    next_observe: Instant,
    /// The stack's `pool_bytes_trimmed` when last seen: when it moves (or
    /// sessions were trimmed), the allocator is asked to hand the freed
    /// memory back.
    pool_bytes_trimmed: u64,
    accepted: u64,
    refused: u64,
    /// The transport's connections the service opened through the site's
    /// outbound links.
    links: links::Links<T::Conn>,
    /// When the transport's own deadlines are next due (TLS handshakes),
    /// as it said at the end of the last turn.
    expiry: Option<Instant>,
    /// The connections it cut, to close (room kept).
    expired: Vec<T::Conn>,
}

impl<T: Transport, S: Service<T>, W: Windows<T>> Host<T, S, W> {
    /// A host running `service` on its shard's connections, whose site is
    /// `site`; connections counted against `limit`; shutting down within
    /// `grace` once `stop` is raised. It listens on port 80 (see
    /// [`with_port`](Self::with_port)) and wakes its loop through `wakes`.
    #[must_use]
    pub fn with_service(
        service: S,
        site: ShardSite,
        limit: Arc<ConnectionLimit>,
        stop: Arc<AtomicBool>,
        grace: std::time::Duration,
        wakes: Arc<WakeQueue>,
    ) -> Host<T, S, W> {
        let hub = Arc::clone(site.hub());
        Host {
            ports: vec![80],
            listeners: Vec::new(),
            listen_error: None,
            service,
            site,
            hub,
            limit,
            stop,
            grace: grace.into(),
            window: None,
            steering: None,
            slots: Vec::new(),
            open: Vec::new(),
            senses: Vec::new(),
            wakers: Vec::new(),
            pool: StoragePool::new(usize::MAX, true),
            trim_at: Instant::ZERO + TRIM_INTERVAL,
            timers: TimerWheel::new(Instant::ZERO),
            wakes,
            woken: Vec::with_capacity(64),
            scratch: vec![0; SCRATCH].into_boxed_slice(),
            active: 0,
            drain_until: None,
            finished: false,
            next_observe: Instant::ZERO,
            pool_bytes_trimmed: 0,
            accepted: 0,
            refused: 0,
            links: links::Links::default(),
            expiry: None,
            expired: Vec::new(),
        }
    }

    /// Listens on `port` instead of 80 (backends with a listener of their
    /// own ignore it).
    #[must_use]
    pub fn with_port(self, port: u16) -> Self {
        self.with_ports(&[port])
    }

    /// Listens on each of `ports` instead of 80: a plain port and a TLS
    /// one, say, whose connections the transport tells apart. Repeats are
    /// listened on once.
    #[must_use]
    pub fn with_ports(mut self, ports: &[u16]) -> Self {
        self.ports.clear();
        for &port in ports {
            if !self.ports.contains(&port) {
                self.ports.push(port);
            }
        }
        self
    }

    /// Reports shard `index`'s steering counters from `fabric` in the
    /// metrics.
    #[must_use]
    pub fn with_steering(mut self, fabric: Arc<Fabric>, index: u16) -> Self {
        self.steering = Some((fabric, index));
        self
    }

    /// Runs window control over the connections.
    #[must_use]
    pub fn with_window_control(mut self, window: W) -> Self {
        self.window = Some(window);
        self
    }

    /// Window control, if the host runs it.
    #[must_use]
    pub fn window_control(&self) -> Option<&W> {
        self.window.as_ref()
    }

    /// The service.
    #[must_use]
    pub fn service(&self) -> &S {
        &self.service
    }

    /// The service, mutably.
    pub fn service_mut(&mut self) -> &mut S {
        &mut self.service
    }

    /// The shard's site: its metrics and files.
    #[must_use]
    pub fn site(&self) -> &ShardSite {
        &self.site
    }

    /// The queue this host's wakers push to.
    #[must_use]
    pub fn wakes(&self) -> &Arc<WakeQueue> {
        &self.wakes
    }

    /// Connections accepted (refused ones not included).
    #[must_use]
    pub fn accepted(&self) -> u64 {
        self.accepted
    }

    /// Connections refused (the server-wide limit, or draining).
    #[must_use]
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Connections held now, lingering ones included.
    #[must_use]
    pub fn open_connections(&self) -> usize {
        self.active
    }

    /// The connections served now (not lingering), for monitoring.
    pub fn handles(&self) -> impl Iterator<Item = T::Conn> + '_ {
        self.open.iter().flatten().copied()
    }

    /// Why the host could not listen, if it could not (it is finished then).
    #[must_use]
    pub fn listen_error(&self) -> Option<&str> {
        self.listen_error.as_deref()
    }

    /// Whether the stop flag has been seen and the host is draining.
    #[must_use]
    pub fn draining(&self) -> bool {
        self.drain_until.is_some()
    }

    /// Accepts everything the listener has.
    fn accept_all(&mut self, t: &mut T, now: Instant, listener: T::Listener) {
        while let Some((conn, peer)) = t.accept(listener) {
            self.admit(t, now, conn, peer);
        }
    }

    /// Serves a new connection, or refuses it (the limit, or draining).
    fn admit(&mut self, t: &mut T, now: Instant, conn: T::Conn, peer: SocketAddr) {
        if self.listeners.is_empty() || !self.limit.try_acquire() {
            t.abort(conn);
            self.refused += 1;
            self.site.metrics_mut().connection_refused();
            return;
        }
        let i = T::index(conn);
        self.grow(i);
        if self.slots[i].is_some() {
            // A name the backend no longer knows: it reused the slot.
            self.release(i);
        }
        let Host { pool, service, .. } = self;
        let session = pool.take(|| service.session());
        self.slots[i] = Some(Slot { conn, phase: Phase::Open, session });
        self.open[i] = Some(conn);
        if let Some(window) = &mut self.window {
            window.opened(&mut self.senses[i], peer);
        }
        self.active += 1;
        self.accepted += 1;
        self.site.metrics_mut().connection_opened();
        let next = self.with_cx(t, i, now, |service, session, cx| service.open(session, cx, peer));
        self.settle(t, i, now, next);
    }

    /// Makes room for slot `i` and its waker.
    fn grow(&mut self, i: usize) {
        if i >= self.slots.len() {
            self.slots.resize_with(i + 1, || None);
            self.open.resize(i + 1, None);
            self.senses.resize_with(i + 1, W::Sense::default);
        }
        while self.wakers.len() <= i {
            let (mark, waker) = IdWaker::new(&self.wakes, self.wakers.len() as u32);
            self.wakers.push(SlotWaker { mark, waker });
        }
    }

    /// Runs `f` on slot `i`'s session with the connection's context. The
    /// slot must be open.
    fn with_cx<R>(
        &mut self,
        t: &mut T,
        i: usize,
        now: Instant,
        f: impl FnOnce(&mut S, &mut S::Session, &mut Cx<'_, T>) -> R,
    ) -> R {
        let draining = self.drain_until.is_some();
        let Host { slots, service, site, wakers, scratch, .. } = self;
        let slot = slots[i].as_mut().expect("an occupied slot");
        let mut cx =
            Cx { transport: t, conn: slot.conn, now, site, waker: &wakers[i].waker, slot: i as u32, draining, scratch };
        f(service, &mut slot.session, &mut cx)
    }

    /// Slot `i` if it holds `conn`.
    fn slot_of(&self, conn: T::Conn) -> Option<usize> {
        let i = T::index(conn);
        self.slots.get(i)?.as_ref().filter(|s| s.conn == conn).map(|_| i)
    }

    /// Drives slot `i` after an event or a wake.
    fn drive(&mut self, t: &mut T, i: usize, now: Instant) {
        let Some(slot) = self.slots.get(i).and_then(Option::as_ref) else { return };
        match slot.phase {
            Phase::Open => {
                if self.window.is_some() {
                    W::touch(&mut self.senses[i]);
                }
                let next = self.with_cx(t, i, now, |service, session, cx| service.drive(session, cx));
                self.settle(t, i, now, next);
            }
            Phase::Lingering { .. } => self.drop_input(t, i),
        }
    }

    /// Acts on how slot `i`'s turn ended.
    fn settle(&mut self, t: &mut T, i: usize, now: Instant, next: Next) {
        let Some(slot) = self.slots[i].as_ref() else { return };
        match next {
            // A deadline that moves later (the usual case: every exchange
            // pushes the idle timeout back) leaves the timer where it is:
            // it fires early, the service finds nothing due, and the
            // settle after it arms the deadline of then. So a busy
            // connection touches the wheel about once per timeout, not once
            // per request.
            Next::Keep => match self.service.deadline(&slot.session) {
                Some(at) if self.timers.deadline(i as u32).is_none_or(|armed| at < armed) => {
                    self.timers.schedule(i as u32, at);
                }
                Some(_) | None => {}
            },
            Next::Close => self.linger(t, i, now),
            Next::Abort => {
                let conn = slot.conn;
                if let Some(window) = &mut self.window {
                    window.release(t, conn, &mut self.senses[i]);
                }
                t.abort(conn);
                self.release(i);
            }
        }
    }

    /// Shuts slot `i`'s sending side and drops its input until the peer's
    /// FIN or the linger's end.
    fn linger(&mut self, t: &mut T, i: usize, now: Instant) {
        let Some(slot) = self.slots[i].as_mut() else { return };
        t.shutdown(slot.conn);
        let until = now + LINGER_TIME;
        slot.phase = Phase::Lingering { until, dropped: 0 };
        self.open[i] = None;
        self.timers.schedule(i as u32, until);
        self.drop_input(t, i);
    }

    /// Reads and drops a lingering slot's input; closes it at the peer's
    /// FIN, an error, or [`LINGER_BYTES`].
    fn drop_input(&mut self, t: &mut T, i: usize) {
        let Some(slot) = self.slots[i].as_mut() else { return };
        let Phase::Lingering { dropped, .. } = &mut slot.phase else { return };
        loop {
            match t.recv(slot.conn, &mut self.scratch) {
                Ok(0) | Err(TransportError::Failed) => break,
                Ok(n) => {
                    *dropped += n;
                    if *dropped > LINGER_BYTES {
                        break;
                    }
                }
                Err(TransportError::WouldBlock) => return,
            }
        }
        t.close(slot.conn);
        self.release(i);
    }

    /// Empties slot `i`: its session back to the pool, its place in the
    /// limit given back. The transport is done with the connection.
    fn release(&mut self, i: usize) {
        let Some(mut slot) = self.slots[i].take() else { return };
        self.service.closed(&mut slot.session);
        self.pool.give(slot.session);
        self.open[i] = None;
        self.timers.cancel(i as u32);
        self.active -= 1;
        self.limit.release();
        self.site.metrics_mut().connection_closed();
    }

    /// Handles every slot whose timer is due.
    fn fire_timers(&mut self, t: &mut T, now: Instant) {
        while let Some(id) = self.timers.pop_expired(now) {
            let i = id as usize;
            let Some(slot) = self.slots.get(i).and_then(Option::as_ref) else { continue };
            match slot.phase {
                Phase::Open => {
                    let next = self.with_cx(t, i, now, |service, session, cx| service.timeout(session, cx));
                    self.settle(t, i, now, next);
                }
                Phase::Lingering { until, .. } if until <= now => {
                    t.close(slot.conn);
                    self.release(i);
                }
                Phase::Lingering { until, .. } => self.timers.schedule(id, until),
            }
        }
    }

    /// Drives every woken slot, and hands woken tasks to the service.
    fn run_wakes(&mut self, t: &mut T, now: Instant) {
        let mut woken = std::mem::take(&mut self.woken);
        self.wakes.drain_into(&mut woken);
        for &id in &woken {
            if id & TASK != 0 {
                self.service.woken(id & !TASK);
            } else if self.wakers.get(id as usize).is_some_and(|w| w.mark.take()) {
                self.drive(t, id as usize, now);
            }
        }
        woken.clear();
        self.woken = woken;
    }

    /// The stop flag was seen: take what the listeners have, stop
    /// listening, close the idle connections.
    fn begin_drain(&mut self, t: &mut T, now: Instant) {
        for listener in self.listeners.clone() {
            self.accept_all(t, now, listener);
            t.unlisten(listener);
        }
        self.listeners.clear();
        self.drain_until = Some(now + self.grace);
        self.service.begin_drain();
        for i in 0..self.slots.len() {
            let idle =
                self.slots[i].as_ref().is_some_and(|s| s.phase == Phase::Open && self.service.is_idle(&s.session));
            if idle {
                self.linger(t, i, now);
            }
        }
    }

    /// Closes the connections the transport cut (a TLS handshake that did
    /// not finish in time): their alert is queued, their slot given back.
    fn close_expired(&mut self, t: &mut T, now: Instant) {
        let mut expired = std::mem::take(&mut self.expired);
        t.expire(now, &mut |conn| expired.push(conn));
        for conn in expired.drain(..) {
            if let Some(i) = self.slot_of(conn) {
                if let Some(window) = &mut self.window {
                    window.release(t, conn, &mut self.senses[i]);
                }
                t.close(conn);
                self.release(i);
            }
        }
        self.expired = expired;
    }

    /// Opens, closes and pumps the links as the service asked.
    fn serve_links(&mut self, t: &mut T, now: Instant) {
        if let Some(out) = self.site.outbound_mut() {
            links::serve(t, out, &mut self.links, now);
        }
    }

    /// The grace period is over: reset what is left.
    fn abort_all(&mut self, t: &mut T) {
        self.service.end();
        if let Some(out) = self.site.outbound_mut() {
            out.close_links();
            while let Some(token) = out.take_close() {
                if let Some(conn) = self.links.remove::<T>(token) {
                    t.abort(conn);
                }
            }
        }
        let mut cut = 0;
        for i in 0..self.slots.len() {
            if let Some(slot) = &self.slots[i] {
                let conn = slot.conn;
                if let Some(window) = &mut self.window {
                    window.release(t, conn, &mut self.senses[i]);
                }
                t.abort(conn);
                self.release(i);
                cut += 1;
            }
        }
        if cut > 0 {
            info!(
                shard = self.site.metrics().shard(),
                "{cut} connection(s) still busy at the end of the grace period were closed"
            );
        }
    }

    /// Every [`TRIM_INTERVAL`]: frees the sessions the interval did not
    /// need, and when that or the stack's own trim freed something, asks
    /// the allocator to return the pages.
    fn trim(&mut self, t: &T, now: Instant) {
        self.trim_at = now + TRIM_INTERVAL;
        let sessions = self.pool.trim();
        let stack = t.counters().map_or(0, |c| c.pool_bytes_trimmed);
        if sessions > 0 || stack > self.pool_bytes_trimmed {
            self.pool_bytes_trimmed = stack;
            crate::runtime::memory::release_freed_memory();
        }
    }

    fn observe(&mut self, t: &T, stats: &LoopStats) {
        let metrics = self.site.metrics_mut();
        t.observe(metrics, &mut self.slots.iter().flatten().map(|s| s.conn));
        metrics.observe_loop(stats);
        if let Some((fabric, index)) = &self.steering {
            metrics.observe_steering(fabric.stats(*index).snapshot());
        }
        if let Some(window) = &self.window {
            window.observe(t, metrics);
        }
        self.service.observe(metrics);
    }
}

impl<T: Transport, S: Service<T>, W: Windows<T>> App<T, T::Event> for Host<T, S, W> {
    fn start(&mut self, t: &mut T, now: Instant) {
        self.timers = TimerWheel::new(now);
        for &port in &self.ports {
            match t.listen(port) {
                Ok(listener) => self.listeners.push(listener),
                Err(e) => {
                    tracing::error!(port, "cannot listen: {e}");
                    self.listen_error = Some(e);
                    self.finished = true;
                    break;
                }
            }
        }
    }

    fn on_event(&mut self, t: &mut T, now: Instant, event: T::Event) {
        // The loop runs: what this event wakes needs no notification, even
        // when the last turn said it might sleep and then did not.
        self.wakes.awake();
        match T::classify(event) {
            HostEvent::Acceptable(listener) => self.accept_all(t, now, listener),
            HostEvent::Ready(conn) => {
                if let Some(i) = self.slot_of(conn) {
                    self.drive(t, i, now);
                } else if let Some(token) = self.links.token_of(conn, T::index(conn))
                    && let Some(out) = self.site.outbound_mut()
                {
                    links::pump(t, out, &mut self.links, token, conn);
                }
            }
            HostEvent::Failed(conn) => match self.slot_of(conn) {
                Some(i) => {
                    t.close(conn);
                    self.release(i);
                }
                None => {
                    if let Some(token) = self.links.token_of(conn, T::index(conn)) {
                        self.links.remove::<T>(token);
                        if let Some(out) = self.site.outbound_mut() {
                            out.link_failed(token, T::why_failed(event));
                        }
                    }
                    t.close(conn);
                }
            },
            HostEvent::Other => {}
        }
    }

    fn poll(&mut self, t: &mut T, now: Instant) {
        if self.drain_until.is_none() && self.stop.load(Ordering::Relaxed) {
            self.begin_drain(t, now);
        }
        if t.next_expiry().is_some_and(|at| at <= now) {
            self.close_expired(t, now);
        }
        // Awake before the outbound sockets' readiness wakes their
        // exchanges (and for the drives of what was woken).
        self.wakes.awake();
        self.site.dispatch_outbound();
        self.serve_links(t, now);
        self.run_wakes(t, now);
        self.fire_timers(t, now);
        self.service.poll(t, &mut self.site, now);
        // What the drives asked of the links goes out in this turn.
        self.serve_links(t, now);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        if !self.wakes.about_to_sleep() || self.site.links_pending() {
            return Some(Instant::ZERO);
        }
        let window = self.window.as_ref().filter(|_| self.active > 0).map(W::next_run);
        // Pooled sessions are freed on time even when nothing else happens.
        let trim = (self.pool.free_count() > 0).then_some(self.trim_at);
        [self.timers.next_wakeup(), self.service.poll_timeout(), self.drain_until, window, trim, self.expiry]
            .into_iter()
            .flatten()
            .min()
    }

    fn after_turn(&mut self, t: &mut T, now: Instant, stats: &LoopStats) {
        self.expiry = t.next_expiry();
        self.site.tick();
        if let Some(window) = &mut self.window {
            window.run(now, t, &self.open, &mut self.senses, self.site.metrics_mut());
        }
        if now >= self.trim_at {
            self.trim(t, now);
        }
        if now >= self.next_observe {
            self.observe(t, stats);
            self.next_observe = now + Duration::from(PUBLISH_INTERVAL);
        }
        self.site.metrics_mut().publish_if_due(&self.hub, now);
        if let Some(until) = self.drain_until {
            if now >= until && (self.active > 0 || self.service.busy()) {
                // Their resets go out on the next turn, which then finishes.
                self.abort_all(t);
                self.drain_until = Some(now);
            } else if self.active == 0 && !self.service.busy() && self.links.any() {
                // Nothing left to serve: the links (idle upstream
                // connections) close, and their FINs go out before the end.
                if let Some(out) = self.site.outbound_mut() {
                    out.close_links();
                }
                self.serve_links(t, now);
            } else if self.active == 0 && !self.service.busy() && (now >= until || t.delivered()) {
                self.finished = true;
                self.observe(t, stats);
                self.hub.publish(self.site.metrics());
            }
        }
    }

    fn finished(&self) -> bool {
        self.finished
    }
}
