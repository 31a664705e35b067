//! One kernel-backend shard: a mio `Poll`, this shard's `SO_REUSEPORT`
//! listener, and a pool of connection slots, each a socket and a reused
//! [`HttpConn`], driven by the sequence in the [HTTP module's
//! docs](crate::http).
//!
//! mio is edge-triggered: a readiness event comes once per change, so each
//! slot remembers whether its socket may still be readable or writable
//! (until a call says `WouldBlock`). That matters because the HTTP layer
//! stops reading while its output window is full: the bytes left in the
//! socket are read after the next flush, with no new event to say so.
//!
//! A connection that is done is not simply closed: closing a socket with
//! unread input makes the kernel send a reset, which can destroy the
//! response still on its way to the peer (a pipelined request behind a
//! `Connection: close`, a refused body). So it *lingers*: its write side is
//! shut (FIN after the response), what the peer still sends is read and
//! dropped, and the socket closes on the peer's EOF or after [`LINGER`].

use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration as StdDuration;

use fairway_stack::time::{Duration, Instant};
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Registry, Token};
use tracing::{debug, info, warn};

use super::deadlines::Deadlines;
use super::fairness::{Controller, FlowSense, Flows};
use crate::backend::connection_limit::ConnectionLimit;
use crate::clock;
use crate::http::{HttpConfig, HttpConn};
use crate::metrics::MetricsHub;
use crate::site::ShardSite;

/// The listener's token; a slot's token is its index.
const LISTENER: Token = Token(usize::MAX);

/// How long a finished connection waits for the peer's EOF.
const LINGER: Duration = Duration::from_secs(2);

/// Readiness events taken per poll.
const EVENTS: usize = 256;

/// What a shard is given to run.
pub(super) struct ShardParts {
    pub index: u16,
    pub listener: TcpListener,
    pub site: ShardSite,
    pub http: HttpConfig,
    pub limit: Arc<ConnectionLimit>,
    /// The longest poll, so the stop flag is seen within it.
    pub max_sleep: StdDuration,
    /// How long in-flight requests may take once the stop flag is up.
    pub grace: StdDuration,
    /// Window control over this shard's connections.
    pub fairness: Controller,
}

/// Where a slot's connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    /// Free, in the pool.
    Free,
    /// Serving HTTP.
    Open,
    /// Done: the write side is shut, input is dropped until EOF or `until`.
    Lingering { until: Instant },
}

/// A connection slot: the socket and the HTTP state, kept across
/// connections so that steady state allocates nothing.
struct Slot {
    conn: HttpConn,
    stream: Option<TcpStream>,
    phase: Phase,
    /// Not known to be drained since the last readable event.
    readable: bool,
    /// Not known to be full since the last writable event.
    writable: bool,
    /// The deadline armed in [`Deadlines`] for this slot.
    armed: Option<Instant>,
    /// Window control's state of the connection.
    sense: FlowSense,
}

/// What driving a connection came to.
enum Outcome {
    /// Still serving.
    Open,
    /// Done: everything due was sent; linger, then close.
    Done,
    /// The socket failed (reset by the peer, say): close at once.
    Failed,
}

/// Everything a shard owns but its `Poll` and event buffer (split off so
/// that events can be handled while iterating them).
struct State {
    index: u16,
    listener: Option<TcpListener>,
    /// The listener saw an error (out of file descriptors, say): try again
    /// when a slot frees up, since no new event may come for what waits.
    accept_stalled: bool,
    slots: Vec<Slot>,
    /// Free slots, reusable now.
    free: Vec<usize>,
    /// Slots freed this turn: reused only from the next, so that an event
    /// still queued for a closed socket cannot reach its successor.
    released: Vec<usize>,
    /// Slots not free.
    in_use: usize,
    deadlines: Deadlines,
    site: ShardSite,
    hub: Arc<MetricsHub>,
    http: HttpConfig,
    limit: Arc<ConnectionLimit>,
    /// Where lingering connections' input is read and dropped.
    scratch: Box<[u8]>,
    /// The stop flag was seen: no accepting, idle connections close.
    draining: bool,
    fairness: Controller,
}

/// The slots as window control sees them: open connections only.
struct OpenSlots<'a>(&'a mut [Slot]);

impl Flows for OpenSlots<'_> {
    fn slots(&self) -> usize {
        self.0.len()
    }

    fn flow(&mut self, i: usize) -> Option<(&TcpStream, &mut FlowSense)> {
        let Slot { stream, phase, sense, .. } = self.0.get_mut(i)?;
        match (phase, stream) {
            (Phase::Open, Some(stream)) => Some((stream, sense)),
            _ => None,
        }
    }
}

/// Runs shard `parts.index` until `stop` is raised and its connections are
/// done (or the grace period is over).
///
/// # Errors
///
/// The poll fails.
pub(super) fn run(parts: ShardParts, stop: &AtomicBool) -> io::Result<()> {
    let mut poll = Poll::new()?;
    let mut events = Events::with_capacity(EVENTS);
    let mut listener = parts.listener;
    poll.registry().register(&mut listener, LISTENER, Interest::READABLE)?;
    let hub = Arc::clone(parts.site.hub());
    let mut state = State {
        index: parts.index,
        listener: Some(listener),
        accept_stalled: false,
        slots: Vec::new(),
        free: Vec::new(),
        released: Vec::new(),
        in_use: 0,
        deadlines: Deadlines::default(),
        site: parts.site,
        hub,
        http: parts.http,
        limit: parts.limit,
        scratch: vec![0; 16 * 1024].into_boxed_slice(),
        draining: false,
        fairness: parts.fairness,
    };
    let grace = Duration::from_micros(u64::try_from(parts.grace.as_micros()).unwrap_or(u64::MAX));
    let mut drain_until = None;
    loop {
        let now = clock::now();
        if drain_until.is_none() && stop.load(Ordering::Relaxed) {
            drain_until = Some(now + grace);
            state.start_draining(poll.registry(), now);
        }
        if let Some(until) = drain_until
            && (state.in_use == 0 || now >= until)
        {
            break;
        }
        let fairness = (state.in_use > 0).then(|| state.fairness.next_run());
        let wake = [state.deadlines.next(), drain_until, fairness].into_iter().flatten().min();
        let timeout = wake.map_or(parts.max_sleep, |at| clock::until(at).min(parts.max_sleep));
        match poll.poll(&mut events, Some(timeout)) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
        let now = clock::now();
        state.site.tick();
        for event in events.iter() {
            state.on_event(poll.registry(), event, now);
        }
        state.fire_deadlines(poll.registry(), now);
        if now >= state.fairness.next_run() {
            state.fairness.run(now, &mut OpenSlots(&mut state.slots), state.site.metrics_mut());
        }
        state.free.append(&mut state.released);
        if state.accept_stalled && !state.free.is_empty() {
            state.accept_stalled = false;
            state.accept(poll.registry(), now);
        }
        state.site.metrics_mut().publish_if_due(&state.hub, now);
    }
    let cut = state.in_use;
    for i in 0..state.slots.len() {
        if state.slots[i].phase != Phase::Free {
            state.release(poll.registry(), i);
        }
    }
    if cut > 0 {
        info!(shard = state.index, "{cut} connection(s) still busy at the end of the grace period were closed");
    }
    state.hub.publish(state.site.metrics());
    Ok(())
}

impl State {
    fn on_event(&mut self, registry: &Registry, event: &mio::event::Event, now: Instant) {
        if event.token() == LISTENER {
            self.accept(registry, now);
            return;
        }
        let i = event.token().0;
        let Some(slot) = self.slots.get_mut(i) else { return };
        if slot.phase == Phase::Free {
            return;
        }
        // Errors and hang-ups show up as readiness: the next call says what.
        slot.readable |= event.is_readable() || event.is_read_closed() || event.is_error();
        slot.writable |= event.is_writable() || event.is_write_closed() || event.is_error();
        self.drive(registry, i, now);
    }

    /// Accepts every connection waiting on the listener.
    fn accept(&mut self, registry: &Registry, now: Instant) {
        loop {
            let Some(listener) = &self.listener else { return };
            match listener.accept() {
                Ok((stream, peer)) => self.admit(registry, stream, peer, now),
                Err(e) if e.kind() == ErrorKind::WouldBlock => return,
                Err(e) if matches!(e.kind(), ErrorKind::Interrupted | ErrorKind::ConnectionAborted) => {}
                Err(e) => {
                    warn!(shard = self.index, "accept: {e}");
                    self.accept_stalled = true;
                    return;
                }
            }
        }
    }

    /// Serves a new connection, or refuses it beyond the connection limit.
    fn admit(&mut self, registry: &Registry, mut stream: TcpStream, peer: SocketAddr, now: Instant) {
        if !self.limit.try_acquire() {
            // Closed at once: the peer sees its connection end unanswered.
            self.site.metrics_mut().connection_refused();
            return;
        }
        if let Err(e) = stream.set_nodelay(true) {
            debug!(shard = self.index, "TCP_NODELAY: {e}");
        }
        let i = match self.free.pop() {
            Some(i) => i,
            None => {
                self.slots.push(Slot {
                    conn: HttpConn::new(&self.http),
                    stream: None,
                    phase: Phase::Free,
                    readable: false,
                    writable: false,
                    armed: None,
                    sense: FlowSense::default(),
                });
                self.slots.len() - 1
            }
        };
        if let Err(e) = registry.register(&mut stream, Token(i), Interest::READABLE | Interest::WRITABLE) {
            warn!(shard = self.index, "registering a connection: {e}");
            self.limit.release();
            self.free.push(i);
            return;
        }
        let slot = &mut self.slots[i];
        slot.conn.reset(now);
        slot.sense.reset(peer.ip());
        slot.stream = Some(stream);
        slot.phase = Phase::Open;
        // The request is often in already: read before waiting for an event.
        slot.readable = true;
        slot.writable = true;
        self.in_use += 1;
        self.site.metrics_mut().connection_opened();
        self.drive(registry, i, now);
    }

    /// Does all a slot's readiness allows, then closes it, lingers or arms
    /// its deadline.
    fn drive(&mut self, registry: &Registry, i: usize, now: Instant) {
        match self.slots[i].phase {
            Phase::Free => {}
            Phase::Open => {
                self.slots[i].sense.touch();
                let outcome = serve(&mut self.slots[i], &mut self.site, now);
                self.settle(registry, i, outcome, now);
            }
            Phase::Lingering { .. } => {
                if drop_input(&mut self.slots[i], &mut self.scratch) {
                    self.release(registry, i);
                }
            }
        }
    }

    fn settle(&mut self, registry: &Registry, i: usize, outcome: Outcome, now: Instant) {
        match outcome {
            Outcome::Failed => self.release(registry, i),
            Outcome::Done => self.linger(registry, i, now),
            Outcome::Open if self.draining && self.slots[i].conn.is_idle() => self.linger(registry, i, now),
            Outcome::Open => {
                let slot = &mut self.slots[i];
                self.deadlines.arm(&mut slot.armed, i, slot.conn.deadline());
            }
        }
    }

    /// Shuts the write side (FIN after what was sent) and waits for the
    /// peer's EOF, dropping its input.
    fn linger(&mut self, registry: &Registry, i: usize, now: Instant) {
        let slot = &mut self.slots[i];
        let Some(stream) = &slot.stream else { return };
        if stream.shutdown(Shutdown::Write).is_err() {
            self.release(registry, i);
            return;
        }
        let until = now + LINGER;
        slot.phase = Phase::Lingering { until };
        if drop_input(slot, &mut self.scratch) {
            self.release(registry, i);
        } else {
            self.deadlines.arm(&mut slot.armed, i, Some(until));
        }
    }

    /// Closes a slot's socket and returns the slot to the pool.
    fn release(&mut self, registry: &Registry, i: usize) {
        let slot = &mut self.slots[i];
        if let Some(mut stream) = slot.stream.take() {
            let _ = registry.deregister(&mut stream);
        }
        slot.phase = Phase::Free;
        slot.readable = false;
        slot.writable = false;
        // `armed` stays: its entry is still in the heap, and the slot's
        // next connection relies on it (see `Deadlines`).
        self.in_use -= 1;
        self.limit.release();
        self.site.metrics_mut().connection_closed();
        self.released.push(i);
    }

    /// Handles every armed deadline that is due.
    fn fire_deadlines(&mut self, registry: &Registry, now: Instant) {
        while let Some((at, i)) = self.deadlines.pop_due(now) {
            let slot = &mut self.slots[i];
            if slot.armed != Some(at) {
                continue; // stale: an earlier deadline replaced it
            }
            slot.armed = None;
            match slot.phase {
                Phase::Free => {}
                Phase::Open => {
                    if slot.conn.deadline().is_some_and(|d| d <= now) {
                        slot.conn.on_timeout(now, &mut self.site);
                    }
                    // Flushes a 408, closes an idle connection, or arms
                    // the deadline that replaced this one.
                    self.drive(registry, i, now);
                }
                Phase::Lingering { until } if until <= now => self.release(registry, i),
                Phase::Lingering { until } => self.deadlines.arm(&mut slot.armed, i, Some(until)),
            }
        }
    }

    /// Stops accepting (closing this shard's listener, so the kernel sends
    /// new connections to shards still listening, or refuses them once all
    /// have stopped) and closes the connections with nothing in progress.
    /// Connections the kernel has already established are taken first:
    /// closing the listener would reset them, requests and all.
    fn start_draining(&mut self, registry: &Registry, now: Instant) {
        self.accept(registry, now);
        self.draining = true;
        if let Some(mut listener) = self.listener.take() {
            let _ = registry.deregister(&mut listener);
        }
        for i in 0..self.slots.len() {
            if self.slots[i].phase == Phase::Open && self.slots[i].conn.is_idle() {
                self.linger(registry, i, now);
            }
        }
    }
}

/// Reads, answers and flushes as far as the socket allows.
fn serve(slot: &mut Slot, site: &mut ShardSite, now: Instant) -> Outcome {
    let Some(stream) = &mut slot.stream else { return Outcome::Failed };
    let conn = &mut slot.conn;
    loop {
        while slot.readable && conn.wants_input() {
            match stream.read(conn.recv_buf()) {
                Ok(0) => {
                    slot.readable = false;
                    conn.on_eof(now);
                }
                Ok(n) => conn.on_recv(n, now, site),
                Err(e) if e.kind() == ErrorKind::WouldBlock => slot.readable = false,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Outcome::Failed,
            }
        }
        while slot.writable {
            let out = conn.output(now, site);
            if out.is_empty() {
                break;
            }
            match stream.write(out) {
                Ok(0) => return Outcome::Failed,
                Ok(n) => conn.consume(n),
                Err(e) if e.kind() == ErrorKind::WouldBlock => slot.writable = false,
                Err(e) if e.kind() == ErrorKind::Interrupted => {}
                Err(_) => return Outcome::Failed,
            }
        }
        if conn.should_close() {
            return Outcome::Done;
        }
        // The flush made room for input that waited in the socket.
        if !(slot.readable && conn.wants_input()) {
            return Outcome::Open;
        }
    }
}

/// Reads and drops a lingering connection's input. Returns true when the
/// socket is finished with (EOF or an error).
fn drop_input(slot: &mut Slot, scratch: &mut [u8]) -> bool {
    let Some(stream) = &mut slot.stream else { return true };
    loop {
        match stream.read(scratch) {
            Ok(0) => return true,
            Ok(_) => {}
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                slot.readable = false;
                return false;
            }
            Err(e) if e.kind() == ErrorKind::Interrupted => {}
            Err(_) => return true,
        }
    }
}
