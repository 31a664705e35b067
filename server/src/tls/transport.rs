//! [`Tls`]: a transport that speaks TLS on the connections of some
//! listeners of the transport under it, and passes the others through.
//!
//! The contract stays the host's (edge-triggered, `WouldBlock` only when
//! the transport under it said so, `Ok(0)` at the peer's end):
//!
//! - `recv` first sends what the session has queued (handshake messages,
//!   tickets, alerts, records not yet taken), then hands out decrypted
//!   plaintext, reading and decrypting ciphertext from below until there
//!   is some, or below says `WouldBlock`. The peer's `close_notify`, or its
//!   FIN without one, is `Ok(0)` (HTTP's own framing tells a cut response
//!   from a whole one).
//! - `send` encrypts at most [`CHUNK`] bytes a call, and only when what it
//!   encrypted before has gone below: a connection holds at most one
//!   chunk's records beyond what the transport under it took.
//! - `shutdown` queues `close_notify` and shuts the connection below once
//!   it has gone; `close` sends what it can first.
//!
//! A peer that breaks the protocol (garbage, an oversized message, an ALPN
//! the server does not speak, a renegotiation, a bad record) gets rustls's
//! alert and then a FIN: to the layer above, its input has ended, and the
//! host closes the connection as any other, lingering so that no reset
//! overtakes the alert.

use std::io::{self, IoSlice, Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;

use std::collections::VecDeque;

use fairway_stack::time::{Duration, Instant};
use fairway_stack::{Counters, TimerWheel};
use rustls::{HandshakeKind, ServerConfig, ServerConnection};

use super::TlsKeys;
use crate::host::{ConnIo, HostEvent, Layered, Transport, TransportError, send_slices};
use crate::metrics::ShardMetrics;
use crate::runtime::AsShard;

/// The most plaintext one `send` encrypts: one record's worth.
pub const CHUNK: usize = 16 * 1024;

/// A fatal `decode_error` alert record, unencrypted.
const DECODE_ERROR: [u8; 7] = [21, 3, 3, 0, 2, 2, 50];

/// What a shard's TLS did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TlsCounters {
    /// Handshakes completed.
    pub handshakes: u64,
    /// Of those, resumed sessions (a ticket or a session id).
    pub resumed: u64,
    /// Connections failed by a TLS error of the peer's (an alert sent).
    pub errors: u64,
    /// Handshakes not finished within the handshake timeout: closed.
    pub handshake_timeouts: u64,
    /// Handshakes cut short to make room for a new one: the shard had as
    /// many in progress as it allows, and this was the oldest.
    pub handshakes_evicted: u64,
}

/// One TLS connection's state.
struct Session<C> {
    conn: C,
    tls: ServerConnection,
    /// The handshake was counted.
    counted: bool,
    /// The connection below reached its end (FIN).
    eof: bool,
    /// `shutdown` was asked: the connection below is shut once the
    /// session's output is gone.
    closing: bool,
    /// The connection below was shut.
    shut: bool,
    /// Something of the session's went below.
    wrote: bool,
    /// The peer broke the protocol: the alert went, then the FIN; what
    /// still comes is passed up raw, for the host's lingering close to
    /// drop.
    failed: bool,
}

/// TLS over the connections that transport `T` accepts on the TLS ports;
/// the others pass through untouched. The host's contract holds for both:
/// `WouldBlock` only when `T` said it, `Ok(0)` at the peer's end (its
/// `close_notify`, or its FIN without one); at most one record's worth of
/// a connection's output waits beyond what `T` took.
pub struct Tls<T: Transport> {
    inner: T,
    keys: Arc<TlsKeys>,
    /// The config new sessions get, and its generation in `keys`.
    config: (u64, Arc<ServerConfig>),
    /// Ports whose connections speak TLS.
    tls_ports: Vec<u16>,
    /// The listeners on them.
    tls_listeners: Vec<T::Listener>,
    /// By the connection's index: its session, if it speaks TLS.
    sessions: Vec<Option<Box<Session<T::Conn>>>>,
    counters: TlsCounters,
    /// How long a handshake may take, and how many may be in progress at
    /// once on this shard.
    handshake_timeout: Duration,
    max_handshaking: usize,
    /// Handshakes in progress, oldest first (some may have ended since:
    /// they are skipped), and their count.
    handshaking: VecDeque<T::Conn>,
    handshaking_now: usize,
    /// Sessions accepted since the last `expire`, whose deadline it sets
    /// (the transport learns the time there).
    unstamped: Vec<T::Conn>,
    /// Each handshaking session's deadline, by connection index.
    deadlines: TimerWheel,
    /// Connections cut (timed out or evicted) for the host to close.
    cut: Vec<T::Conn>,
}

impl<T: Transport> std::fmt::Debug for Tls<T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Tls").field("tls_ports", &self.tls_ports).field("counters", &self.counters).finish()
    }
}

impl<T: Transport> Tls<T>
where
    T::Listener: PartialEq,
{
    /// TLS with `keys` on the connections `inner` accepts on `tls_ports`.
    pub fn new(inner: T, keys: Arc<TlsKeys>, tls_ports: &[u16]) -> Tls<T> {
        let config = keys.current();
        Tls {
            inner,
            keys,
            config,
            tls_ports: tls_ports.to_vec(),
            tls_listeners: Vec::new(),
            sessions: Vec::new(),
            counters: TlsCounters::default(),
            handshake_timeout: crate::config::HANDSHAKE_TIMEOUT.into(),
            max_handshaking: usize::MAX,
            handshaking: VecDeque::new(),
            handshaking_now: 0,
            unstamped: Vec::new(),
            deadlines: TimerWheel::new(Instant::ZERO),
            cut: Vec::new(),
        }
    }

    /// Closes a connection whose handshake has not finished `timeout`
    /// after it was accepted (a `close_notify` alert first), and lets at
    /// most `max_handshaking` handshakes be in progress at once: a new one
    /// beyond that cuts the oldest short. So stalled handshakes (the TLS
    /// form of slowloris) neither last nor hold more than their share of
    /// the connection limit.
    #[must_use]
    pub fn with_handshake_limits(mut self, timeout: std::time::Duration, max_handshaking: usize) -> Tls<T> {
        self.handshake_timeout = timeout.into();
        self.max_handshaking = max_handshaking.max(1);
        self
    }

    /// Handshakes in progress on this shard.
    #[must_use]
    pub fn handshakes_in_progress(&self) -> usize {
        self.handshaking_now
    }

    /// The transport under it.
    pub fn inner(&self) -> &T {
        &self.inner
    }

    /// The transport under it, mutably (what it does to a TLS connection's
    /// bytes bypasses the session).
    pub fn inner_mut(&mut self) -> &mut T {
        &mut self.inner
    }

    /// What its TLS did.
    pub fn tls_counters(&self) -> TlsCounters {
        self.counters
    }

    /// Whether `conn` speaks TLS.
    pub fn is_tls(&self, conn: T::Conn) -> bool {
        self.session(conn).is_some()
    }

    /// The protocol ALPN chose on `conn`, if it speaks TLS and chose one.
    pub fn alpn(&self, conn: T::Conn) -> Option<&[u8]> {
        self.session(conn)?.tls.alpn_protocol()
    }

    /// How `conn`'s handshake went, if it speaks TLS and is done.
    pub fn handshake_kind(&self, conn: T::Conn) -> Option<HandshakeKind> {
        self.session(conn)?.tls.handshake_kind()
    }

    fn session(&self, conn: T::Conn) -> Option<&Session<T::Conn>> {
        self.sessions.get(T::index(conn))?.as_deref().filter(|s| s.conn == conn)
    }

    /// A new session for `conn`, with the config of now.
    fn open_session(&mut self, conn: T::Conn) -> Result<(), rustls::Error> {
        if !self.keys.is_current(self.config.0) {
            self.config = self.keys.current();
        }
        let tls = ServerConnection::new(Arc::clone(&self.config.1))?;
        let i = T::index(conn);
        if i >= self.sessions.len() {
            self.sessions.resize_with(i + 1, || None);
        }
        if self.handshaking_now >= self.max_handshaking {
            self.evict_oldest();
        }
        self.sessions[i] = Some(Box::new(Session {
            conn,
            tls,
            counted: false,
            eof: false,
            closing: false,
            shut: false,
            wrote: false,
            failed: false,
        }));
        self.handshaking.push_back(conn);
        self.handshaking_now += 1;
        self.unstamped.push(conn);
        Ok(())
    }

    /// Forgets `conn`'s session, if it has one.
    fn end_session(&mut self, conn: T::Conn) {
        if let Some(slot) = self.sessions.get_mut(T::index(conn))
            && slot.as_ref().is_some_and(|s| s.conn == conn)
        {
            if slot.as_ref().is_some_and(|s| !s.counted && !s.failed) {
                self.handshaking_now -= 1;
            }
            *slot = None;
            self.deadlines.cancel(T::index(conn) as u32);
        }
    }

    /// Cuts the oldest handshake still in progress, to make room.
    fn evict_oldest(&mut self) {
        while let Some(conn) = self.handshaking.pop_front() {
            if self.cut_handshake(conn) {
                self.counters.handshakes_evicted += 1;
                return;
            }
        }
    }

    /// Ends `conn`'s handshake if it is still in progress: a `close_notify`
    /// alert goes out, and the connection is handed to the host (through
    /// [`Transport::expire`]) to close. Returns whether it was.
    fn cut_handshake(&mut self, conn: T::Conn) -> bool {
        let Tls { inner, sessions, .. } = self;
        let Some(session) = session_mut::<T>(sessions, conn) else { return false };
        if session.counted || session.failed {
            return false;
        }
        session.tls.send_close_notify();
        session.failed = true;
        session.closing = true;
        let _ = flush(inner, session);
        self.handshaking_now -= 1;
        self.deadlines.cancel(T::index(conn) as u32);
        self.cut.push(conn);
        true
    }
}

/// `conn`'s session in `sessions`, if it speaks TLS.
fn session_mut<T: Transport>(
    sessions: &mut [Option<Box<Session<T::Conn>>>],
    conn: T::Conn,
) -> Option<&mut Session<T::Conn>> {
    sessions.get_mut(T::index(conn)).and_then(Option::as_deref_mut).filter(|s| s.conn == conn)
}

/// Sends what `session` has queued, as far as `inner` takes it; then, if
/// it is closing and nothing is left, shuts the connection below.
fn flush<T: Transport>(inner: &mut T, session: &mut Session<T::Conn>) -> Result<(), TransportError> {
    while session.tls.wants_write() {
        match session.tls.write_tls(&mut ConnIo { t: inner, conn: session.conn }) {
            Ok(n) => session.wrote |= n > 0,
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
            Err(_) => return Err(TransportError::Failed),
        }
    }
    if session.closing && !session.shut && !session.tls.wants_write() {
        inner.shutdown(session.conn);
        session.shut = true;
    }
    Ok(())
}

/// Plaintext from `session` into `buf`, reading and decrypting from below
/// until there is some or below says `WouldBlock`.
fn recv<T: Transport>(
    inner: &mut T,
    session: &mut Session<T::Conn>,
    counters: &mut TlsCounters,
    buf: &mut [u8],
) -> Result<usize, TransportError> {
    if session.failed {
        flush(inner, session)?;
        return inner.recv(session.conn, buf);
    }
    loop {
        flush(inner, session)?;
        match session.tls.reader().read(buf) {
            Ok(n) => return Ok(n),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => {}
            // The FIN below came without a close_notify: an end all the same.
            Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return Ok(0),
            Err(_) => return Err(TransportError::Failed),
        }
        if session.eof {
            return Ok(0);
        }
        match session.tls.read_tls(&mut ConnIo { t: inner, conn: session.conn }) {
            Ok(0) => session.eof = true,
            Ok(_) => {}
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Err(TransportError::WouldBlock),
            Err(_) => return Err(TransportError::Failed),
        }
        if let Err(e) = session.tls.process_new_packets() {
            tracing::debug!("TLS: {e}");
            counters.errors += 1;
            // The alert rustls queued goes out, then the FIN; to the layer
            // above this is the end of the input, so the host closes the
            // connection as it closes any other: lingering, so that no
            // reset overtakes the alert.
            session.failed = true;
            session.closing = true;
            if !session.wrote && !session.tls.wants_write() {
                // rustls refuses some first flights without an alert (a
                // handshake message over its 64 KiB): decode_error (RFC
                // 8446 §6.2), in the clear, as nothing was encrypted yet.
                let _ = inner.send(session.conn, &DECODE_ERROR);
            }
            flush(inner, session)?;
            return Ok(0);
        }
        if !session.counted && !session.tls.is_handshaking() {
            session.counted = true;
            counters.handshakes += 1;
            if session.tls.handshake_kind() == Some(HandshakeKind::Resumed) {
                counters.resumed += 1;
            }
        }
    }
}

/// Encrypts up to [`CHUNK`] bytes of `data` for `session`, if what it
/// encrypted before has gone.
fn send<T: Transport>(inner: &mut T, session: &mut Session<T::Conn>, data: &[u8]) -> Result<usize, TransportError> {
    if session.failed || session.closing {
        return Err(TransportError::Failed);
    }
    flush(inner, session)?;
    if session.tls.wants_write() {
        return Err(TransportError::WouldBlock);
    }
    let n = session.tls.writer().write(&data[..data.len().min(CHUNK)]).map_err(|_| TransportError::Failed)?;
    flush(inner, session)?;
    Ok(n)
}

impl<T: Transport> Transport for Tls<T>
where
    T::Listener: PartialEq,
{
    type Conn = T::Conn;
    type Listener = T::Listener;
    type Event = T::Event;

    fn index(conn: T::Conn) -> usize {
        T::index(conn)
    }

    fn classify(event: T::Event) -> HostEvent<T::Conn, T::Listener> {
        T::classify(event)
    }

    fn why_failed(event: T::Event) -> std::io::ErrorKind {
        T::why_failed(event)
    }

    /// A plain connection (an upstream's): no session is made for it.
    fn connect(&mut self, now: fairway_stack::time::Instant, to: SocketAddr) -> Result<T::Conn, std::io::ErrorKind> {
        let conn = self.inner.connect(now, to)?;
        // A name reused from a TLS connection must not find its session.
        self.end_session(conn);
        Ok(conn)
    }

    fn listen(&mut self, port: u16) -> Result<T::Listener, String> {
        let listener = self.inner.listen(port)?;
        if self.tls_ports.contains(&port) {
            self.tls_listeners.push(listener);
        }
        Ok(listener)
    }

    fn unlisten(&mut self, listener: T::Listener) {
        self.tls_listeners.retain(|&l| l != listener);
        self.inner.unlisten(listener);
    }

    fn accept(&mut self, listener: T::Listener) -> Option<(T::Conn, SocketAddr)> {
        loop {
            let (conn, peer) = self.inner.accept(listener)?;
            if !self.tls_listeners.contains(&listener) {
                // A name reused from a TLS connection must not find its session.
                self.end_session(conn);
                return Some((conn, peer));
            }
            match self.open_session(conn) {
                Ok(()) => return Some((conn, peer)),
                Err(e) => {
                    tracing::warn!("TLS session: {e}");
                    self.inner.abort(conn);
                }
            }
        }
    }

    fn is_secure(&self, conn: T::Conn) -> bool {
        self.is_tls(conn)
    }

    fn recv(&mut self, conn: T::Conn, buf: &mut [u8]) -> Result<usize, TransportError> {
        let Tls { inner, sessions, counters, handshaking_now, deadlines, .. } = self;
        match session_mut::<T>(sessions, conn) {
            Some(session) => {
                let was_handshaking = !session.counted && !session.failed;
                let result = recv(inner, session, counters, buf);
                if was_handshaking && (session.counted || session.failed) {
                    // Done (or failed): no longer the handshake timeout's.
                    *handshaking_now -= 1;
                    deadlines.cancel(T::index(conn) as u32);
                }
                result
            }
            None => inner.recv(conn, buf),
        }
    }

    fn recv_with(
        &mut self,
        conn: T::Conn,
        scratch: &mut [u8],
        take: &mut dyn FnMut(&[u8]) -> usize,
    ) -> Result<usize, TransportError> {
        if self.session(conn).is_none() {
            return self.inner.recv_with(conn, scratch, take);
        }
        let n = self.recv(conn, scratch)?;
        Ok(take(&scratch[..n]).min(n))
    }

    fn send(&mut self, conn: T::Conn, data: &[u8]) -> Result<usize, TransportError> {
        let Tls { inner, sessions, .. } = self;
        match session_mut::<T>(sessions, conn) {
            Some(session) => send(inner, session, data),
            None => inner.send(conn, data),
        }
    }

    const SENDS_IN_PLACE: bool = T::SENDS_IN_PLACE;

    /// A plain connection lends the ring below; a TLS one has `fill` write
    /// into a chunk of plaintext that is then encrypted, which is still
    /// one copy fewer than a buffer of the caller's.
    fn send_with(&mut self, conn: T::Conn, fill: &mut dyn FnMut(&mut [u8]) -> usize) -> Result<usize, TransportError> {
        let Tls { inner, sessions, .. } = self;
        let Some(session) = session_mut::<T>(sessions, conn) else {
            return inner.send_with(conn, fill);
        };
        if session.failed || session.closing {
            return Err(TransportError::Failed);
        }
        flush(inner, session)?;
        if session.tls.wants_write() {
            return Err(TransportError::WouldBlock);
        }
        let mut chunk = [0u8; CHUNK];
        let n = fill(&mut chunk).min(CHUNK);
        if n > 0 {
            session.tls.writer().write_all(&chunk[..n]).map_err(|_| TransportError::Failed)?;
            flush(inner, session)?;
        }
        Ok(n)
    }

    fn send_vectored(&mut self, conn: T::Conn, data: &[IoSlice<'_>]) -> Result<usize, TransportError> {
        if self.session(conn).is_none() {
            return self.inner.send_vectored(conn, data);
        }
        // Slice by slice: each `send` encrypts only once what went before
        // has gone below, so this stops where the connection below fills.
        send_slices(self, conn, data)
    }

    fn shutdown(&mut self, conn: T::Conn) {
        let Tls { inner, sessions, .. } = self;
        match session_mut::<T>(sessions, conn) {
            Some(session) => {
                if !session.closing {
                    session.closing = true;
                    session.tls.send_close_notify();
                }
                let _ = flush(inner, session);
            }
            None => inner.shutdown(conn),
        }
    }

    fn close(&mut self, conn: T::Conn) {
        let Tls { inner, sessions, .. } = self;
        if let Some(session) = session_mut::<T>(sessions, conn) {
            let _ = flush(inner, session);
        }
        self.end_session(conn);
        self.inner.close(conn);
    }

    fn abort(&mut self, conn: T::Conn) {
        self.end_session(conn);
        self.inner.abort(conn);
    }

    fn delivered(&self) -> bool {
        self.inner.delivered()
    }

    fn counters(&self) -> Option<Counters> {
        self.inner.counters()
    }

    fn next_expiry(&self) -> Option<Instant> {
        if !self.cut.is_empty() || !self.unstamped.is_empty() {
            return Some(Instant::ZERO);
        }
        [self.deadlines.next_wakeup(), self.inner.next_expiry()].into_iter().flatten().min()
    }

    fn expire(&mut self, now: Instant, expired: &mut dyn FnMut(T::Conn)) {
        // The handshakes accepted since the last call start their clocks.
        for conn in std::mem::take(&mut self.unstamped) {
            if self.session(conn).is_some_and(|s| !s.counted && !s.failed) {
                self.deadlines.schedule(T::index(conn) as u32, now + self.handshake_timeout);
            }
        }
        while let Some(index) = self.deadlines.pop_expired(now) {
            let conn = self.sessions.get(index as usize).and_then(Option::as_ref).map(|s| s.conn);
            if let Some(conn) = conn
                && self.cut_handshake(conn)
            {
                self.counters.handshake_timeouts += 1;
            }
        }
        // What finished since is dropped from the oldest-first list.
        while self.handshaking.front().is_some_and(|&c| self.session(c).is_none_or(|s| s.counted || s.failed)) {
            self.handshaking.pop_front();
        }
        for conn in self.cut.drain(..) {
            expired(conn);
        }
        self.inner.expire(now, expired);
    }

    fn observe(&self, metrics: &mut ShardMetrics, conns: &mut dyn Iterator<Item = T::Conn>) {
        self.inner.observe(metrics, conns);
        metrics.observe_tls(self.counters);
    }
}

impl<T: Transport + AsShard> AsShard for Tls<T> {
    fn shard_mut(&mut self) -> impl std::ops::DerefMut<Target = fairway_stack::Shard> + '_ {
        self.inner.shard_mut()
    }
    fn shard_ref(&self) -> impl std::ops::Deref<Target = fairway_stack::Shard> + '_ {
        self.inner.shard_ref()
    }
}

impl<T: Transport> Layered for Tls<T>
where
    T::Listener: PartialEq,
{
    type Below = T;

    fn below(&self) -> impl std::ops::Deref<Target = T> + '_ {
        &self.inner
    }
    fn below_mut(&mut self) -> impl std::ops::DerefMut<Target = T> + '_ {
        &mut self.inner
    }
}
