//! [`HttpApp`]: the HTTP/1.1 server as a [`runtime::App`] on one shard of the
//! userspace stack. Its shards share one [`ConnectionLimit`], the
//! server-wide cap on open connections.
//!
//! Each accepted connection gets an [`HttpConn`] from the app's pool, kept in
//! a slot indexed by [`Handle::index`] (dense, reused after close), and
//! returned to the pool when the connection ends: in steady state no request
//! and no connection allocates. The app drives each connection as the
//! [HTTP layer's contract](crate::http) says, over `Shard::recv` and
//! `Shard::send`, on the shard's events.
//!
//! # Timers
//!
//! Every connection has a deadline ([`HttpConn::deadline`]: header or idle
//! timeout), and it moves forward with every byte. Rather than re-filing a
//! timer per byte, the app keeps only the earliest deadline it has been
//! told of. When that time comes it sweeps the slots once, fires the
//! connections that are due and learns the true earliest deadline. A
//! deadline that moved later costs one sweep that finds nothing; the
//! timeouts are seconds long, so sweeps are rare. The loop sleeps at most
//! [`LoopConfig::max_sleep`](crate::runtime::LoopConfig::max_sleep), which
//! bounds how late a timeout fires.
//!
//! # Window control
//!
//! With [`with_window_control`](HttpApp::with_window_control) the app runs
//! the `--fairness` policy over its connections ([`WindowControl`]): each
//! connection's slot keeps what tells its direction, every turn runs the
//! stack's fairness driver when it is due, and the metrics show what the
//! policy saw and the caps in force.
//!
//! # Shutting down
//!
//! When the stop flag is raised the app stops listening (new connections are
//! refused by the stack), closes every connection between requests at once,
//! and lets the others finish what they started: each is closed as soon as
//! it is idle again. The app is finished when its last connection is gone
//! and the stack has delivered what was queued (every connection closed or
//! in TIME-WAIT), or when the grace period ends: then what is left is reset.

use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration as StdDuration;

use fairway_nic::steering::Fabric;
use fairway_stack::time::{Duration, Instant};
use fairway_stack::{Event, Handle, ListenError, Listener, RecvError, SendError, Shard};

use super::fairness::{FlowSense, WindowControl};
use crate::backend::connection_limit::ConnectionLimit;
use crate::http::{HttpConfig, HttpConn, Site};
use crate::metrics::{MetricsHub, PUBLISH_INTERVAL};
use crate::runtime::{self, LoopStats};
use crate::site::ShardSite;

/// A connection the app holds.
struct Active {
    handle: Handle,
    conn: HttpConn,
    sense: FlowSense,
}

/// How a connection's turn ended.
enum Next {
    /// It goes on.
    Keep,
    /// Everything it will send is queued: close (FIN after the data).
    Close,
    /// The transport failed: reset and forget it.
    Abort,
}

/// The HTTP server on one shard. See the [module docs](self).
pub struct HttpApp {
    port: u16,
    http: HttpConfig,
    site: ShardSite,
    hub: Arc<MetricsHub>,
    limit: Arc<ConnectionLimit>,
    stop: Arc<AtomicBool>,
    grace: Duration,
    steering: Option<(Arc<Fabric>, u16)>,
    window: Option<WindowControl>,

    listener: Option<Listener>,
    listen_error: Option<ListenError>,
    /// By `Handle::index`.
    slots: Vec<Option<Active>>,
    /// Connections ready for reuse, buffers and all.
    pool: Vec<HttpConn>,
    active: usize,
    /// The earliest deadline told of since the last sweep (may have moved
    /// later since).
    next_sweep: Option<Instant>,
    next_observe: Instant,
    /// Set when the stop flag was first seen: the end of the grace period.
    drain_until: Option<Instant>,
    finished: bool,

    accepted: u64,
    refused: u64,
}

impl HttpApp {
    /// The server on the shard whose site is `site`: HTTP as `http` says,
    /// connections counted against `limit`, shutting down gracefully within
    /// `grace` once `stop` is raised. It listens on port 80.
    #[must_use]
    pub fn new(
        site: ShardSite,
        http: HttpConfig,
        limit: Arc<ConnectionLimit>,
        stop: Arc<AtomicBool>,
        grace: StdDuration,
    ) -> HttpApp {
        let hub = Arc::clone(site.hub());
        HttpApp {
            port: 80,
            http,
            site,
            hub,
            limit,
            stop,
            grace: Duration::from_micros(u64::try_from(grace.as_micros()).unwrap_or(u64::MAX)),
            steering: None,
            window: None,
            listener: None,
            listen_error: None,
            slots: Vec::new(),
            pool: Vec::new(),
            active: 0,
            next_sweep: None,
            next_observe: Instant::ZERO,
            drain_until: None,
            finished: false,
            accepted: 0,
            refused: 0,
        }
    }

    /// Listens on `port` instead of 80.
    #[must_use]
    pub fn with_port(mut self, port: u16) -> HttpApp {
        self.port = port;
        self
    }

    /// Reports shard `index`'s steering counters from `fabric` in the
    /// metrics.
    #[must_use]
    pub fn with_steering(mut self, fabric: Arc<Fabric>, index: u16) -> HttpApp {
        self.steering = Some((fabric, index));
        self
    }

    /// Runs `window`'s fairness policy over the connections.
    #[must_use]
    pub fn with_window_control(mut self, window: WindowControl) -> HttpApp {
        self.window = Some(window);
        self
    }

    /// Window control, if the app runs it.
    #[must_use]
    pub fn window_control(&self) -> Option<&WindowControl> {
        self.window.as_ref()
    }

    /// The shard's site: its metrics and files.
    #[must_use]
    pub fn site(&self) -> &ShardSite {
        &self.site
    }

    /// Connections accepted (refused ones not included).
    #[must_use]
    pub fn accepted(&self) -> u64 {
        self.accepted
    }

    /// Connections refused by the server-wide limit.
    #[must_use]
    pub fn refused(&self) -> u64 {
        self.refused
    }

    /// Connections open now on this shard.
    #[must_use]
    pub fn open_connections(&self) -> usize {
        self.active
    }

    /// The connections the app holds, for monitoring.
    pub fn handles(&self) -> impl Iterator<Item = Handle> + '_ {
        self.slots.iter().flatten().map(|a| a.handle)
    }

    /// Why the app could not listen, if it could not (it is finished then).
    #[must_use]
    pub fn listen_error(&self) -> Option<ListenError> {
        self.listen_error
    }

    /// Whether the stop flag has been seen and the app is draining.
    #[must_use]
    pub fn draining(&self) -> bool {
        self.drain_until.is_some()
    }

    fn accept(&mut self, shard: &mut Shard, now: Instant, h: Handle) {
        if self.draining() || !self.limit.try_acquire() {
            shard.abort(h);
            self.refused += 1;
            self.site.metrics_mut().connection_refused();
            return;
        }
        let index = h.index() as usize;
        if index >= self.slots.len() {
            self.slots.resize_with(index + 1, || None);
        }
        if let Some(stale) = self.slots[index].take() {
            // A handle the stack no longer knows: it reused the slot.
            self.recycle(stale);
        }
        let mut conn = self.pool.pop().unwrap_or_else(|| HttpConn::new(&self.http));
        conn.reset(now);
        let mut sense = FlowSense::default();
        sense.reset();
        self.slots[index] = Some(Active { handle: h, conn, sense });
        self.active += 1;
        self.accepted += 1;
        self.site.metrics_mut().connection_opened();
        // Data may have come with the handshake's last ACK.
        self.service(shard, now, h);
    }

    /// Reads, answers and sends what `h` allows now.
    fn service(&mut self, shard: &mut Shard, now: Instant, h: Handle) {
        let index = h.index() as usize;
        let draining = self.draining();
        let Some(active) = self.slots.get_mut(index).and_then(Option::as_mut).filter(|a| a.handle == h) else {
            return;
        };
        active.sense.touch();
        let next = drive(shard, h, &mut active.conn, now, &mut self.site, draining);
        self.settle(shard, index, next);
    }

    /// Acts on how a connection's turn ended.
    fn settle(&mut self, shard: &mut Shard, index: usize, next: Next) {
        let Some(slot) = self.slots.get_mut(index) else { return };
        match next {
            Next::Keep => {
                if let Some(deadline) = slot.as_ref().and_then(|a| a.conn.deadline()) {
                    self.next_sweep = Some(self.next_sweep.map_or(deadline, |at| at.min(deadline)));
                }
            }
            Next::Close | Next::Abort => {
                let Some(mut active) = slot.take() else { return };
                if matches!(next, Next::Close) {
                    // Its caps stay while the stack drains it; the driver
                    // lets go once the stack does.
                    shard.close(active.handle);
                } else {
                    if let Some(window) = &mut self.window {
                        window.release(shard, active.handle, &mut active.sense);
                    }
                    shard.abort(active.handle);
                }
                self.recycle(active);
            }
        }
    }

    fn recycle(&mut self, active: Active) {
        self.pool.push(active.conn);
        self.active -= 1;
        self.limit.release();
        self.site.metrics_mut().connection_closed();
    }

    /// Fires every connection whose deadline has passed, and learns the
    /// earliest deadline left.
    fn sweep(&mut self, shard: &mut Shard, now: Instant) {
        self.next_sweep = None;
        let draining = self.draining();
        for index in 0..self.slots.len() {
            let Some(active) = self.slots[index].as_mut() else { continue };
            let next = match active.conn.deadline() {
                Some(at) if at <= now => {
                    active.conn.on_timeout(now, &mut self.site);
                    drive(shard, active.handle, &mut active.conn, now, &mut self.site, draining)
                }
                _ => Next::Keep,
            };
            self.settle(shard, index, next);
        }
    }

    /// The stop flag was seen: stop accepting, close the idle connections.
    fn begin_drain(&mut self, shard: &mut Shard, now: Instant) {
        self.drain_until = Some(now + self.grace);
        if let Some(listener) = self.listener.take() {
            shard.unlisten(listener);
        }
        for index in 0..self.slots.len() {
            if self.slots[index].as_ref().is_some_and(|a| a.conn.is_idle()) {
                self.settle(shard, index, Next::Close);
            }
        }
    }

    /// The grace period is over: reset what is left.
    fn abort_all(&mut self, shard: &mut Shard) {
        for index in 0..self.slots.len() {
            if self.slots[index].is_some() {
                self.settle(shard, index, Next::Abort);
            }
        }
    }

    fn observe(&mut self, shard: &Shard, now: Instant, stats: &LoopStats) {
        let metrics = self.site.metrics_mut();
        metrics.observe_stack(shard.counters());
        metrics.observe_loop(stats);
        if let Some((fabric, index)) = &self.steering {
            metrics.observe_steering(fabric.stats(*index).snapshot());
        }
        metrics.observe_flows(self.slots.iter().flatten().filter_map(|a| shard.flow(a.handle)));
        if let Some(window) = &self.window {
            window.observe(shard, metrics);
        }
        metrics.publish_if_due(&self.hub, now);
    }
}

impl HttpApp {
    /// Window control's turn: looks at the connections that did I/O when
    /// that is due, and runs the policy when that is.
    fn control_windows(&mut self, shard: &mut Shard, now: Instant) {
        let Some(window) = &mut self.window else { return };
        if window.sense_due(now) {
            for active in self.slots.iter_mut().flatten() {
                window.sense(now, shard, active.handle, &mut active.sense);
            }
            window.sensed(now);
        }
        window.run_if_due(now, shard);
    }
}

/// Drives one connection as far as it goes now: read while it wants input,
/// flush, and again while either made progress (a flush can free room for
/// requests held back).
fn drive(shard: &mut Shard, h: Handle, conn: &mut HttpConn, now: Instant, site: &mut dyn Site, draining: bool) -> Next {
    loop {
        let mut progress = false;
        while conn.wants_input() {
            match shard.recv(h, conn.recv_buf()) {
                Ok(0) => {
                    conn.on_eof(now);
                    break;
                }
                Ok(n) => {
                    conn.on_recv(n, now, site);
                    progress = true;
                }
                Err(RecvError::WouldBlock) => break,
                Err(_) => return Next::Abort,
            }
        }
        loop {
            let out = conn.output(now, site);
            if out.is_empty() {
                break;
            }
            let len = out.len();
            match shard.send(h, out) {
                Ok(n) => {
                    conn.consume(n);
                    progress |= n > 0;
                    if n < len {
                        break;
                    }
                }
                Err(SendError::WouldBlock) => break,
                Err(_) => return Next::Abort,
            }
        }
        if conn.should_close() || (draining && conn.is_idle()) {
            return Next::Close;
        }
        if !progress {
            return Next::Keep;
        }
    }
}

impl runtime::App for HttpApp {
    fn start(&mut self, shard: &mut Shard, _: Instant) {
        match shard.listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, self.port)) {
            Ok(listener) => self.listener = Some(listener),
            Err(e) => {
                tracing::error!(port = self.port, "cannot listen: {e}");
                self.listen_error = Some(e);
                self.finished = true;
            }
        }
    }

    fn on_event(&mut self, shard: &mut Shard, now: Instant, event: Event) {
        match event {
            Event::Acceptable(listener) => {
                while let Some(h) = shard.accept(listener) {
                    self.accept(shard, now, h);
                }
            }
            Event::Readable(h) | Event::Writable(h) | Event::HangUp(h) => self.service(shard, now, h),
            Event::Error(h, _) => {
                let index = h.index() as usize;
                if self.slots.get(index).and_then(Option::as_ref).is_some_and(|a| a.handle == h) {
                    self.settle(shard, index, Next::Close);
                } else {
                    shard.close(h);
                }
            }
            Event::Connected(_) => {}
        }
    }

    fn poll(&mut self, shard: &mut Shard, now: Instant) {
        if self.drain_until.is_none() && self.stop.load(Ordering::Relaxed) {
            self.begin_drain(shard, now);
        }
        if self.next_sweep.is_some_and(|at| at <= now) {
            self.sweep(shard, now);
        }
    }

    fn after_turn(&mut self, shard: &mut Shard, now: Instant, stats: &LoopStats) {
        self.site.tick();
        self.control_windows(shard, now);
        if now >= self.next_observe {
            self.observe(shard, now, stats);
            self.next_observe = now + Duration::from_micros(PUBLISH_INTERVAL.as_micros() as u64);
        }
        if let Some(until) = self.drain_until {
            if now >= until && self.active > 0 {
                // Their resets go out on the next turn, which then finishes.
                self.abort_all(shard);
            } else if self.active == 0 && (now >= until || shard.connection_count() == shard.time_wait_count()) {
                self.finished = true;
                self.observe(shard, now, stats);
            }
        }
    }

    fn finished(&self) -> bool {
        self.finished
    }
}
