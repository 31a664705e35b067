//! The shard: one core's share of the flows and everything they need.
//!
//! Inputs are `handle_*` (frames, timeouts) and application calls; outputs
//! are `poll_*` (frames, events, the next deadline). A frame goes Ethernet →
//! ARP | IPv4 → ICMP | TCP; TCP looks its flow up in the table (O(1)) and
//! hands the segment to the connection. Connections with something to send
//! wait in a FIFO "ready" queue; `poll_transmit` serves them round-robin, so
//! no path ever walks all connections.

use core::net::{Ipv4Addr, SocketAddrV4};
use std::collections::VecDeque;

use foldhash::fast::FixedState;
use hashbrown::HashMap;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol, Icmpv4DstUnreachable,
    Icmpv4Packet, Icmpv4Repr, IpProtocol, Ipv4Packet, Ipv4Repr, TcpPacket, TcpRepr,
};

use crate::api::{ConnectError, Event, FlowStats, Handle, ListenError, Listener, RecvError, SendError};
use crate::arp::{ArpCache, Lookup};
use crate::checksum;
use crate::config::Config;
use crate::counters::{Counters, Drop};
use crate::flow_table::{FlowTable, FourTuple};
use crate::pool::{BufferPool, Key, Slab, StoragePool};
use crate::tcp::State;
use crate::tcp::connection::{Action, Connection, Env, NEVER, Outcome};
use crate::tcp::isn::IsnGenerator;
use crate::tcp::segment::Segment;
use crate::tcp::seq::SeqNumber;
use crate::tcp::syn_cookie::{CookieOptions, SynCookies};
use crate::time::{Duration, Instant};
use crate::timer_wheel::TimerWheel;
use crate::wire::{self, ETHERNET_HEADER_LEN, Flags, IPV4_HEADER_LEN, TCP_OFFSET, TcpHeader};

mod held_acks;

use held_acks::HeldAck;

/// Timer id of the shard's own ARP maintenance; connection ids follow.
const ARP_TIMER: u32 = 0;
const FIRST_CONNECTION_TIMER: u32 = 1;

/// ICMP errors allowed per second (RFC 1812 §4.3.2.8 asks for a limit).
const ICMP_ERRORS_PER_SEC: u32 = 100;

/// Room for held ACKs made when the shard is: a receive batch's worth.
const HELD_ACKS: usize = 64;

/// A listening socket's state.
#[derive(Debug)]
struct ListenerState {
    port: u16,
    /// Established connections waiting for `accept`.
    backlog: VecDeque<Key>,
    backlog_limit: usize,
    /// Connections of this listener in SYN-RECEIVED.
    syn_queue: usize,
    /// An `Acceptable` event is outstanding.
    notified: bool,
}

/// A frame held until its next hop is resolved.
#[derive(Debug)]
struct PendingFrame {
    next_hop: Ipv4Addr,
    frame: Box<[u8]>,
    len: usize,
}

/// Where a reply to an incoming frame goes.
#[derive(Clone, Copy, Debug)]
struct Peer {
    mac: [u8; 6],
    ip: Ipv4Addr,
}

/// One core's TCP/IP stack.
#[derive(Debug)]
pub struct Shard {
    config: Config,
    /// The latest time the driver gave us.
    now: Instant,
    env: EnvBox,
    conns: Slab<Connection>,
    flows: FlowTable,
    listeners: Vec<Option<ListenerState>>,
    listener_ports: HashMap<u16, u32, FixedState>,
    timers: TimerWheel,
    /// Connections that may have something to send, served in turn.
    ready: VecDeque<Key>,
    /// Frames the shard itself originated (ARP, ICMP, RST, resolved pending frames).
    control: VecDeque<(Box<[u8]>, usize)>,
    frames: BufferPool,
    arp: ArpCache,
    pending: VecDeque<PendingFrame>,
    isn: IsnGenerator,
    cookies: SynCookies,
    next_port: u16,
    icmp_tokens: u32,
    icmp_refill: Instant,
    /// When the challenge-ACK budget is next refilled.
    challenge_refill: Instant,
    /// When the pools next free what the last interval did not need.
    pool_trim_at: Instant,
    /// Pure ACKs held back until the receive batch ends (at most one per
    /// connection; see `held_acks`).
    held: Vec<HeldAck>,
}

/// `Env` holds non-`Debug` internals; keep the shard's `Debug` short.
struct EnvBox(Env);

impl core::fmt::Debug for EnvBox {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Env").field("counters", &self.0.counters).finish_non_exhaustive()
    }
}

impl Shard {
    /// A shard with `config`. It starts by announcing itself with a
    /// gratuitous ARP, which the first `poll_transmit` returns.
    pub fn new(config: Config) -> Shard {
        let frame_len = config.max_frame_len();
        let limits = config.limits.clone();
        let env = Env {
            cfg: config.tcp.clone(),
            mss: config.mss(),
            rx_pool: BufferPool::new(config.tcp.rx_buffer, 4096, config.recycle),
            tx_pool: BufferPool::new(config.tcp.tx_buffer, 4096, config.recycle),
            counters: Counters::default(),
            events: VecDeque::with_capacity(256),
            reasm_pool: StoragePool::new(4096, config.recycle),
            sentq_pool: StoragePool::new(4096, config.recycle),
            time_wait: 0,
            max_time_wait: limits.max_time_wait,
            challenge_acks_left: config.tcp.challenge_acks_per_sec,
        };
        let (lo, hi) = config.tcp.ephemeral_ports;
        let mut shard = Shard {
            isn: IsnGenerator::new(config.secret),
            cookies: SynCookies::new(config.secret),
            flows: FlowTable::new(config.secret),
            env: EnvBox(env),
            now: Instant::ZERO,
            conns: Slab::new(),
            listeners: Vec::new(),
            listener_ports: HashMap::with_hasher(FixedState::with_seed(config.secret as u64)),
            timers: TimerWheel::new(Instant::ZERO),
            ready: VecDeque::with_capacity(256),
            control: VecDeque::with_capacity(limits.control_queue),
            frames: BufferPool::new(frame_len, limits.control_queue + limits.arp_pending, config.recycle),
            arp: ArpCache::new(limits.arp_cache),
            pending: VecDeque::with_capacity(limits.arp_pending),
            next_port: lo.min(hi),
            icmp_tokens: ICMP_ERRORS_PER_SEC,
            icmp_refill: Instant::ZERO,
            challenge_refill: Instant::ZERO,
            pool_trim_at: Instant::ZERO + crate::pool::TRIM_INTERVAL,
            held: Vec::with_capacity(HELD_ACKS),
            config,
        };
        shard.queue_arp(ArpOperation::Request, [0; 6], shard.config.ip, wire::BROADCAST_MAC);
        shard
    }

    /// The configuration the shard was built with.
    pub fn config(&self) -> &Config {
        &self.config
    }

    /// The shard's counters.
    pub fn counters(&self) -> &Counters {
        &self.env.0.counters
    }

    /// Live connections, in every state (TIME-WAIT included).
    pub fn connection_count(&self) -> usize {
        self.conns.len()
    }

    /// Connections in TIME-WAIT.
    pub fn time_wait_count(&self) -> usize {
        self.env.0.time_wait
    }

    /// Records a neighbour for good, as `ip neigh add ... nud permanent` does.
    pub fn add_neighbor(&mut self, ip: Ipv4Addr, mac: [u8; 6]) {
        self.arp.insert_permanent(ip, mac);
    }

    // ---------------------------------------------------------------------
    // Driver: input
    // ---------------------------------------------------------------------

    /// Handles one received Ethernet frame (without FCS). Call
    /// [`Shard::poll_transmit`] and [`Shard::poll_event`] afterwards.
    ///
    /// The frames handed in before the next `poll_*`, `handle_timeout` or
    /// application call are a receive batch: an established connection's
    /// pure ACKs in it may be processed together when that call comes
    /// ([`TcpConfig::coalesce_acks`](crate::TcpConfig::coalesce_acks)).
    pub fn handle_frame(&mut self, now: Instant, frame: &[u8]) {
        self.advance(now);
        self.env.0.counters.frames_in += 1;
        let Ok(eth) = EthernetFrame::new_checked(frame) else {
            return self.drop(Drop::EthernetTruncated);
        };
        let dst = eth.dst_addr();
        if dst.0 != self.config.mac && !dst.is_broadcast() {
            return self.drop(Drop::EthernetNotForUs);
        }
        let src_mac = eth.src_addr().0;
        match eth.ethertype() {
            EthernetProtocol::Arp => self.handle_arp(now, eth.payload()),
            EthernetProtocol::Ipv4 if dst.is_broadcast() => self.drop(Drop::Ipv4NotForUs),
            EthernetProtocol::Ipv4 => self.handle_ipv4(now, src_mac, eth.payload()),
            _ => self.drop(Drop::EthernetUnknownType),
        }
    }

    /// Ends the receive batch: processes the pure ACKs that the frames
    /// since the last `poll_*`, `handle_timeout` or application call held
    /// back. Each of those calls does it first, so a driver need not; call
    /// it to read [`flow`](Self::flow) between frames and those calls.
    pub fn end_batch(&mut self) {
        self.release_held_acks();
    }

    /// Runs every timer that is due at `now`.
    pub fn handle_timeout(&mut self, now: Instant) {
        self.advance(now);
        self.release_held_acks();
        while let Some(id) = self.timers.pop_expired(now) {
            if id == ARP_TIMER {
                self.on_arp_timer(now);
                continue;
            }
            let Some(key) = self.conns.key_at(id - FIRST_CONNECTION_TIMER) else { continue };
            let Some(conn) = self.conns.get_mut(key) else { continue };
            conn.wheel_at = NEVER;
            let outcome = conn.on_timer(now, &mut self.env.0);
            self.apply(key, outcome, None);
        }
    }

    /// When to call [`Shard::handle_timeout`] next, if any timer is set. O(1).
    /// The wheel may ask for an early wake-up to move coarse timers down; that
    /// call then simply finds nothing due.
    #[must_use]
    pub fn poll_timeout(&self) -> Option<Instant> {
        self.timers.next_wakeup()
    }

    fn advance(&mut self, now: Instant) {
        if now > self.now {
            self.now = now;
        }
        if now >= self.challenge_refill {
            self.env.0.challenge_acks_left = self.config.tcp.challenge_acks_per_sec;
            self.challenge_refill = now + Duration::from_secs(1);
        }
        if now >= self.pool_trim_at {
            let env = &mut self.env.0;
            let buffers =
                env.rx_pool.trim() * env.rx_pool.buffer_size() + env.tx_pool.trim() * env.tx_pool.buffer_size();
            env.reasm_pool.trim();
            env.sentq_pool.trim();
            env.counters.pool_bytes_trimmed += buffers as u64;
            self.pool_trim_at = now + crate::pool::TRIM_INTERVAL;
        }
    }

    fn drop(&mut self, reason: Drop) {
        self.env.0.counters.drop(reason);
    }

    // ---------------------------------------------------------------------
    // Driver: output
    // ---------------------------------------------------------------------

    /// Writes the next frame to send into `buf` and returns its length, or
    /// `None` when nothing is left. `buf` must hold
    /// [`Config::max_frame_len`] bytes. Call until it returns `None` after
    /// every `handle_*` and application call.
    #[must_use]
    pub fn poll_transmit(&mut self, now: Instant, buf: &mut [u8]) -> Option<usize> {
        self.advance(now);
        self.release_held_acks();
        if let Some((frame, len)) = self.control.pop_front() {
            let n = len.min(buf.len());
            buf[..n].copy_from_slice(&frame[..n]);
            self.frames.give(frame);
            self.env.0.counters.frames_out += 1;
            return Some(n);
        }
        while let Some(key) = self.ready.pop_front() {
            if let Some(n) = self.transmit_connection(now, key, buf) {
                self.env.0.counters.frames_out += 1;
                return Some(n);
            }
        }
        None
    }

    /// Gives `key` a transmit turn. Returns a frame length if one was written.
    fn transmit_connection(&mut self, now: Instant, key: Key, buf: &mut [u8]) -> Option<usize> {
        let conn = self.conns.get_mut(key)?;
        let remote = conn.tuple.remote_ip;
        let Some(next_hop) = route(&self.config, remote) else {
            conn.set_in_ready(false);
            self.env.0.counters.drop(Drop::NoRoute);
            return None;
        };
        let frame_len = self.config.max_frame_len().min(buf.len());
        let lookup = self.arp.lookup(now, next_hop);
        let (mac, refresh) = match lookup {
            Lookup::Hit(mac) => (Some(mac), false),
            Lookup::HitRefresh(mac) => (Some(mac), true),
            Lookup::MissRequest | Lookup::MissWait => (None, false),
        };
        let conn = self.conns.get_mut(key)?;
        let written = match mac {
            Some(mac) => write_segment(&self.config, &mut self.env.0, conn, now, mac, &mut buf[..frame_len]),
            None => {
                // Unresolved: hold one segment until ARP answers; the
                // connection's own timers cover anything after that.
                let mut held = self.frames.take();
                let n = write_segment(&self.config, &mut self.env.0, conn, now, [0; 6], &mut held[..frame_len]);
                conn.set_in_ready(false);
                match n {
                    Some(len) => self.hold_for_arp(next_hop, held, len),
                    None => self.frames.give(held),
                }
                self.sync_timer(key);
                if lookup == Lookup::MissRequest {
                    self.queue_arp(ArpOperation::Request, [0; 6], next_hop, wire::BROADCAST_MAC);
                    return self.poll_control(buf);
                }
                return None;
            }
        };
        if refresh {
            self.queue_arp(ArpOperation::Request, [0; 6], next_hop, wire::BROADCAST_MAC);
        }
        match written {
            Some(n) => {
                // Another turn later, after the others.
                self.ready.push_back(key);
                self.sync_timer(key);
                Some(n)
            }
            None => {
                if let Some(conn) = self.conns.get_mut(key) {
                    conn.set_in_ready(false);
                }
                self.sync_timer(key);
                None
            }
        }
    }

    fn poll_control(&mut self, buf: &mut [u8]) -> Option<usize> {
        let (frame, len) = self.control.pop_front()?;
        let n = len.min(buf.len());
        buf[..n].copy_from_slice(&frame[..n]);
        self.frames.give(frame);
        Some(n)
    }

    // ---------------------------------------------------------------------
    // Application: listeners
    // ---------------------------------------------------------------------

    /// Listens on `addr` (our address, or 0.0.0.0 for any of ours).
    pub fn listen(&mut self, addr: SocketAddrV4) -> Result<Listener, ListenError> {
        if !addr.ip().is_unspecified() && *addr.ip() != self.config.ip {
            return Err(ListenError::AddressNotAvailable);
        }
        if self.listener_ports.contains_key(&addr.port()) {
            return Err(ListenError::AddressInUse);
        }
        let slot = match self.listeners.iter().position(Option::is_none) {
            Some(i) => i,
            None if self.listeners.len() < self.config.limits.max_listeners => {
                self.listeners.push(None);
                self.listeners.len() - 1
            }
            None => return Err(ListenError::TooManyListeners),
        };
        let backlog_limit = self.config.limits.accept_backlog;
        self.listeners[slot] = Some(ListenerState {
            port: addr.port(),
            backlog: VecDeque::with_capacity(backlog_limit),
            backlog_limit,
            syn_queue: 0,
            notified: false,
        });
        self.listener_ports.insert(addr.port(), slot as u32);
        Ok(Listener(slot as u32))
    }

    /// Stops listening. Connections waiting in the accept queue are reset;
    /// half-open ones are dropped.
    pub fn unlisten(&mut self, listener: Listener) {
        let Some(state) = self.listeners.get_mut(listener.0 as usize).and_then(Option::take) else {
            return;
        };
        self.listener_ports.remove(&state.port);
        for key in state.backlog {
            if let Some(conn) = self.conns.get_mut(key) {
                let outcome = conn.abort_outcome(&mut self.env.0);
                self.apply(key, outcome, None);
            }
        }
    }

    /// Takes an established connection from the listener's accept queue.
    pub fn accept(&mut self, listener: Listener) -> Option<Handle> {
        loop {
            let state = self.listeners.get_mut(listener.0 as usize)?.as_mut()?;
            let Some(key) = state.backlog.pop_front() else {
                state.notified = false;
                return None;
            };
            if state.backlog.is_empty() {
                // Drained: the next arrival deserves a new event.
                state.notified = false;
            }
            let Some(conn) = self.conns.get_mut(key) else { continue };
            if conn.state == State::Closed {
                // Died before the application saw it.
                conn.set_in_backlog(false);
                self.remove_connection(key);
                continue;
            }
            conn.on_accepted(&mut self.env.0);
            return Some(Handle(key));
        }
    }

    // ---------------------------------------------------------------------
    // Application: connections
    // ---------------------------------------------------------------------

    /// Opens a connection to `to`. Completion is signalled by
    /// [`Event::Connected`] (or [`Event::Error`]).
    pub fn connect(&mut self, now: Instant, to: SocketAddrV4) -> Result<Handle, ConnectError> {
        self.advance(now);
        let ip = *to.ip();
        if to.port() == 0 || ip == self.config.ip || !is_unicast(ip) {
            return Err(ConnectError::InvalidAddress);
        }
        if route(&self.config, ip).is_none() {
            return Err(ConnectError::NoRoute);
        }
        if self.conns.len() >= self.config.limits.max_connections {
            return Err(ConnectError::TooManyConnections);
        }
        let tuple = self.pick_local_port(to).ok_or(ConnectError::NoPort)?;
        let iss = self.isn.isn(now, &tuple);
        let placeholder = Connection::connect(Key::default(), tuple, iss, now, &self.env.0);
        let key = self.conns.insert(placeholder);
        if let Some(conn) = self.conns.get_mut(key) {
            conn.key = key;
        }
        self.flows.insert(tuple, key);
        self.sync(key);
        Ok(Handle(key))
    }

    fn pick_local_port(&mut self, to: SocketAddrV4) -> Option<FourTuple> {
        let (lo, hi) = self.config.tcp.ephemeral_ports;
        let (lo, hi) = (lo.min(hi), lo.max(hi));
        let span = (hi - lo) as u32 + 1;
        for _ in 0..span {
            let port = self.next_port;
            self.next_port = if port >= hi || port < lo { lo } else { port + 1 };
            if port < lo || port > hi {
                continue;
            }
            let tuple =
                FourTuple { local_ip: self.config.ip, remote_ip: *to.ip(), local_port: port, remote_port: to.port() };
            let owned = self.config.steering.is_none_or(|s| s.owns(&tuple));
            if owned && !self.flows.contains(&tuple) && !self.listener_ports.contains_key(&port) {
                return Some(tuple);
            }
        }
        None
    }

    fn app_conn(conns: &mut Slab<Connection>, h: Handle) -> Option<&mut Connection> {
        conns.get_mut(h.0).filter(|c| c.is_accepted() && !c.is_orphan())
    }

    /// Queues data to send; returns how many bytes were taken.
    pub fn send(&mut self, h: Handle, data: &[u8]) -> Result<usize, SendError> {
        self.release_held_acks();
        let conn = Self::app_conn(&mut self.conns, h).ok_or(SendError::InvalidHandle)?;
        let r = conn.send(data, &mut self.env.0);
        self.sync(h.0);
        r
    }

    /// Lends the free space of the send ring to `fill`, which writes the
    /// bytes to send at its start and returns how many it wrote; those are
    /// queued, as by [`send`](Self::send), without a copy from a buffer of
    /// the caller's. The slice is the ring's first contiguous free part
    /// (call again for the rest when it wraps). With no room at all `fill`
    /// is not called and the answer is [`SendError::WouldBlock`]; a
    /// [`Event::Writable`] follows once room is made.
    pub fn send_with(&mut self, h: Handle, fill: impl FnOnce(&mut [u8]) -> usize) -> Result<usize, SendError> {
        self.release_held_acks();
        let conn = Self::app_conn(&mut self.conns, h).ok_or(SendError::InvalidHandle)?;
        let r = conn.send_with(&mut self.env.0, |first, _| fill(first));
        self.sync(h.0);
        r
    }

    /// Reads received data into `buf`. `Ok(0)` means the peer closed its side
    /// and everything has been read.
    pub fn recv(&mut self, h: Handle, buf: &mut [u8]) -> Result<usize, RecvError> {
        self.release_held_acks();
        let conn = Self::app_conn(&mut self.conns, h).ok_or(RecvError::InvalidHandle)?;
        let r = conn.recv(buf, &mut self.env.0);
        self.sync(h.0);
        r
    }

    /// Lends the received data at the front of the receive ring to `take`,
    /// which returns how many bytes it used; those are consumed, as by
    /// [`recv`](Self::recv), without a copy into a buffer of the caller's.
    /// The slice is the ring's first contiguous part (call again for the
    /// rest when it wraps). `Ok(0)` with nothing waiting means the peer
    /// closed its side and everything has been read; an empty `take` result
    /// with data waiting is `Ok(0)` too, so check what `take` saw.
    pub fn recv_with(&mut self, h: Handle, take: impl FnOnce(&[u8]) -> usize) -> Result<usize, RecvError> {
        self.release_held_acks();
        let conn = Self::app_conn(&mut self.conns, h).ok_or(RecvError::InvalidHandle)?;
        let r = conn.recv_with(&mut self.env.0, |first, _| take(first));
        self.sync(h.0);
        r
    }

    /// Shuts down the sending side: a FIN follows the queued data.
    pub fn shutdown(&mut self, h: Handle) {
        self.release_held_acks();
        if let Some(conn) = Self::app_conn(&mut self.conns, h) {
            conn.shutdown();
            self.sync(h.0);
        }
    }

    /// Closes the handle. Queued data is still delivered and the connection
    /// closes gracefully, unless received data was left unread: then it is
    /// reset (RFC 2525 §2.17). The handle is invalid afterwards.
    pub fn close(&mut self, h: Handle) {
        self.release_held_acks();
        let now = self.now;
        let Some(conn) = Self::app_conn(&mut self.conns, h) else { return };
        let outcome = conn.close(now, &mut self.env.0);
        self.apply(h.0, outcome, None);
    }

    /// Resets the connection at once and invalidates the handle.
    pub fn abort(&mut self, h: Handle) {
        self.release_held_acks();
        let Some(conn) = Self::app_conn(&mut self.conns, h) else { return };
        let outcome = conn.abort_outcome(&mut self.env.0);
        self.apply(h.0, outcome, None);
    }

    /// The next event for the application.
    pub fn poll_event(&mut self) -> Option<Event> {
        self.release_held_acks();
        self.env.0.events.pop_front()
    }

    /// Caps the window advertised to the peer (`None` lifts the cap): the
    /// receive-side hook of the window-control policy. The right edge
    /// already advertised is never moved back, so a lower cap takes effect
    /// as data arrives; the window never goes below 2·MSS.
    pub fn set_rcv_window_cap(&mut self, h: Handle, cap: Option<u32>) -> bool {
        self.release_held_acks();
        let Some(conn) = Self::app_conn(&mut self.conns, h) else { return false };
        conn.set_rcv_window_cap(cap);
        self.sync(h.0);
        true
    }

    /// Caps the congestion window (`None` lifts the cap): the send-side
    /// hook of the window-control policy. Never below 2·MSS.
    pub fn set_cwnd_cap(&mut self, h: Handle, cap: Option<u32>) -> bool {
        self.release_held_acks();
        let Some(conn) = Self::app_conn(&mut self.conns, h) else { return false };
        conn.set_cwnd_cap(cap);
        self.sync(h.0);
        true
    }

    /// Caps the pacing rate in bytes per second (`None` lifts the cap); a
    /// capped connection is paced even when pacing is off in the config.
    pub fn set_pacing_cap(&mut self, h: Handle, cap: Option<u64>) -> bool {
        self.release_held_acks();
        let Some(conn) = Self::app_conn(&mut self.conns, h) else { return false };
        conn.set_pacing_cap(cap);
        self.sync(h.0);
        true
    }

    /// The peer's end of a connection the application holds: what
    /// [`flow`](Self::flow) says of it, without the rest.
    pub fn peer(&self, h: Handle) -> Option<SocketAddrV4> {
        self.conns.get(h.0).filter(|c| c.is_accepted() && !c.is_orphan()).map(|c| c.tuple.remote())
    }

    /// Statistics of a connection the application holds. A pure ACK held
    /// back in the current receive batch is not in them yet
    /// ([`end_batch`](Self::end_batch)).
    pub fn flow(&self, h: Handle) -> Option<FlowStats> {
        self.conns.get(h.0).filter(|c| c.is_accepted() && !c.is_orphan()).map(Connection::stats)
    }

    // ---------------------------------------------------------------------
    // Connection bookkeeping
    // ---------------------------------------------------------------------

    /// Puts the connection's deadline in the wheel and, if it has something to
    /// send, in the ready queue.
    fn sync(&mut self, key: Key) {
        self.sync_timer(key);
        if let Some(conn) = self.conns.get_mut(key)
            && !conn.in_ready()
            && conn.wants_tx()
        {
            conn.set_in_ready(true);
            self.ready.push_back(key);
        }
    }

    fn sync_timer(&mut self, key: Key) {
        let Some(conn) = self.conns.get_mut(key) else { return };
        let at = conn.next_deadline(&self.env.0.cfg);
        if at != conn.wheel_at {
            conn.wheel_at = at;
            let id = key.index() + FIRST_CONNECTION_TIMER;
            if at == NEVER {
                self.timers.cancel(id);
            } else {
                self.timers.schedule(id, at);
            }
        }
    }

    /// Carries out what a connection asked for.
    fn apply(&mut self, key: Key, outcome: Outcome, peer: Option<Peer>) {
        if let Some((seq, ack)) = outcome.reset
            && let Some(conn) = self.conns.get(key)
        {
            let header = conn.reset_header(seq, ack);
            let remote = conn.tuple.remote_ip;
            let mac = peer.map(|p| p.mac).or_else(|| route(&self.config, remote).and_then(|hop| self.arp.get(hop)));
            if let Some(mac) = mac {
                self.queue_tcp_control(mac, remote, &header);
            }
        }
        match outcome.action {
            Action::Keep => self.sync(key),
            Action::Detach => {
                if let Some(conn) = self.conns.get(key) {
                    let tuple = conn.tuple;
                    self.flows.remove(&tuple, key);
                }
                self.leave_syn_queue(key);
                self.sync(key);
            }
            Action::Remove | Action::Recycle => self.remove_connection(key),
        }
    }

    fn leave_syn_queue(&mut self, key: Key) {
        let Some(conn) = self.conns.get_mut(key) else { return };
        if conn.take_syn_queue_slot()
            && let Some(Some(l)) = self.listeners.get_mut(conn.listener as usize)
        {
            l.syn_queue = l.syn_queue.saturating_sub(1);
        }
    }

    fn remove_connection(&mut self, key: Key) {
        self.leave_syn_queue(key);
        let Some(mut conn) = self.conns.remove(key) else { return };
        if conn.ack_held() {
            // Its ACK has nobody to go to now.
            self.held.retain(|h| h.key() != key);
        }
        conn.on_removed(&mut self.env.0);
        self.flows.remove(&conn.tuple, key);
        if conn.wheel_at != NEVER {
            self.timers.cancel(key.index() + FIRST_CONNECTION_TIMER);
        }
    }

    // ---------------------------------------------------------------------
    // IPv4
    // ---------------------------------------------------------------------

    fn handle_ipv4(&mut self, now: Instant, src_mac: [u8; 6], bytes: &[u8]) {
        let Ok(ip) = Ipv4Packet::new_checked(bytes) else {
            let reason =
                if bytes.first().is_some_and(|b| b >> 4 != 4) { Drop::Ipv4BadVersion } else { Drop::Ipv4Truncated };
            return self.drop(reason);
        };
        if ip.version() != 4 {
            return self.drop(Drop::Ipv4BadVersion);
        }
        let header_len = ip.header_len() as usize;
        if checksum::Sum::new().add_bytes(&bytes[..header_len]).fold() != 0xffff {
            return self.drop(Drop::Ipv4BadChecksum);
        }
        if header_len != IPV4_HEADER_LEN {
            return self.drop(Drop::Ipv4Options);
        }
        if ip.more_frags() || ip.frag_offset() != 0 {
            return self.drop(Drop::Ipv4Fragment);
        }
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        if dst != self.config.ip {
            return self.drop(Drop::Ipv4NotForUs);
        }
        if !is_unicast(src) || src == self.config.ip || src.is_loopback() {
            return self.drop(Drop::Ipv4BadSource);
        }
        // Ethernet pads short frames: the IP total length says where data ends.
        let packet = &bytes[..ip.total_len() as usize];
        let payload = &packet[header_len..];
        let peer = Peer { mac: src_mac, ip: src };
        match ip.next_header() {
            IpProtocol::Tcp => self.handle_tcp(now, peer, dst, payload),
            IpProtocol::Icmp => self.handle_icmp(peer, packet, payload),
            IpProtocol::Udp => {
                self.drop(Drop::UdpNoPort);
                self.send_unreachable(peer, Icmpv4DstUnreachable::PortUnreachable, packet);
            }
            _ => {
                self.drop(Drop::Ipv4UnknownProtocol);
                self.send_unreachable(peer, Icmpv4DstUnreachable::ProtoUnreachable, packet);
            }
        }
    }

    // ---------------------------------------------------------------------
    // TCP
    // ---------------------------------------------------------------------

    fn handle_tcp(&mut self, now: Instant, peer: Peer, local_ip: Ipv4Addr, bytes: &[u8]) {
        let Ok(packet) = TcpPacket::new_checked(bytes) else {
            return self.drop(Drop::TcpTruncated);
        };
        if !wire::tcp_checksum_ok(bytes, peer.ip, local_ip) {
            return self.drop(Drop::TcpBadChecksum);
        }
        let caps = ChecksumCapabilities::ignored();
        let Ok(repr) = TcpRepr::parse(&packet, &peer.ip.into(), &local_ip.into(), &caps) else {
            return self.drop(Drop::TcpMalformed);
        };
        let seg = Segment::from_repr(&repr, packet.psh());
        let tuple = FourTuple { local_ip, remote_ip: peer.ip, local_port: seg.dst_port, remote_port: seg.src_port };
        match self.flows.get(&tuple) {
            Some(key) => self.segment_for_connection(now, peer, key, tuple, &seg),
            None => self.segment_without_connection(now, peer, tuple, &seg),
        }
    }

    fn segment_for_connection(&mut self, now: Instant, peer: Peer, key: Key, tuple: FourTuple, seg: &Segment<'_>) {
        if let Some(conn) = self.conns.get(key) {
            if self.should_hold(conn.state, seg) {
                return self.hold_ack(now, peer, key, seg);
            }
            if conn.ack_held() {
                // In order: the held ACK came first.
                self.release_held_ack(key);
            }
        }
        self.deliver_segment(now, peer, key, tuple, seg);
    }

    /// Hands `seg` to connection `key` now, and acts on the outcome.
    fn deliver_segment(&mut self, now: Instant, peer: Peer, key: Key, tuple: FourTuple, seg: &Segment<'_>) {
        let Some(conn) = self.conns.get_mut(key) else {
            // Cannot happen while the table and slab agree; recover anyway.
            self.flows.remove(&tuple, key);
            return self.segment_without_connection(now, peer, tuple, seg);
        };
        // A handshake may only complete if the accept queue has room; if not,
        // ignore the ACK and let the peer retry (as Linux does).
        if conn.state == State::SynReceived
            && conn.is_passive()
            && seg.ack.is_some()
            && !seg.flags.rst
            && !seg.flags.syn
            && self
                .listeners
                .get(conn.listener as usize)
                .and_then(Option::as_ref)
                .is_some_and(|l| l.backlog.len() >= l.backlog_limit)
        {
            return self.drop(Drop::TcpAcceptQueueFull);
        }
        let outcome = conn.on_segment(now, seg, &mut self.env.0);
        if outcome.action == Action::Recycle {
            self.remove_connection(key);
            return self.segment_without_connection(now, peer, tuple, seg);
        }
        let handshake_done = self.conns.get(key).map(|c| {
            (
                c.is_passive() && c.state != State::SynReceived,
                // Closing clears ACCEPTED (the handle is dead to the
                // application), so an orphan must not be queued again.
                c.state != State::Closed && !c.in_backlog() && !c.is_accepted() && !c.is_orphan(),
            )
        });
        if let Some((true, needs_accept)) = handshake_done {
            self.leave_syn_queue(key);
            if needs_accept {
                self.enqueue_accept(key);
            }
        }
        self.apply(key, outcome, Some(peer));
    }

    fn enqueue_accept(&mut self, key: Key) {
        let Some(conn) = self.conns.get_mut(key) else { return };
        let Some(Some(l)) = self.listeners.get_mut(conn.listener as usize) else { return };
        conn.set_in_backlog(true);
        l.backlog.push_back(key);
        if !l.notified {
            l.notified = true;
            let listener = Listener(conn.listener);
            self.env.0.events.push_back(Event::Acceptable(listener));
        }
    }

    fn segment_without_connection(&mut self, now: Instant, peer: Peer, tuple: FourTuple, seg: &Segment<'_>) {
        if seg.flags.rst {
            return self.drop(Drop::TcpNoConnection);
        }
        if let Some(&l) = self.listener_ports.get(&tuple.local_port) {
            if seg.flags.syn && seg.ack.is_none() {
                return self.open_passive(now, peer, tuple, l, seg);
            }
            if self.accept_cookie(now, tuple, l, seg) {
                return;
            }
        }
        self.drop(Drop::TcpNoConnection);
        // RFC 9293 §3.10.7.1: the RST takes its sequence number from the ACK
        // field, or acknowledges the segment if it had none.
        let (seq, ack) = match seg.ack {
            Some(ack) => (ack, None),
            None => (SeqNumber::new(0), Some(seg.seq + seg.len())),
        };
        let header = TcpHeader {
            src_port: tuple.local_port,
            dst_port: tuple.remote_port,
            seq,
            ack,
            flags: Flags { rst: true, ..Flags::default() },
            ..TcpHeader::default()
        };
        self.queue_tcp_control(peer.mac, peer.ip, &header);
    }

    fn open_passive(&mut self, now: Instant, peer: Peer, tuple: FourTuple, listener: u32, seg: &Segment<'_>) {
        // Nothing to answer through: a spoofed or misrouted SYN.
        if route(&self.config, peer.ip).is_none() {
            return self.drop(Drop::NoRoute);
        }
        let Some(Some(l)) = self.listeners.get_mut(listener as usize) else { return };
        if l.syn_queue >= self.config.limits.syn_backlog {
            if self.config.tcp.syn_cookies {
                return self.send_cookie(now, peer, tuple, seg);
            }
            return self.drop(Drop::TcpSynQueueFull);
        }
        if self.conns.len() >= self.config.limits.max_connections {
            return self.drop(Drop::TcpConnectionLimit);
        }
        l.syn_queue += 1;
        if crate::tcp::connection::peer_mss(seg).1 {
            self.env.0.counters.mss_raised += 1;
        }
        let iss = self.isn.isn(now, &tuple);
        let mut conn = Connection::accept_syn(Key::default(), tuple, iss, listener, seg, now, &self.env.0);
        conn.set_syn_queue_slot();
        let key = self.conns.insert(conn);
        if let Some(conn) = self.conns.get_mut(key) {
            conn.key = key;
        }
        self.flows.insert(tuple, key);
        self.env.0.counters.segments_in += 1;
        self.sync(key);
    }

    /// Answers a SYN with a SYN cookie and keeps nothing (RFC 4987 §3.6).
    /// The SYN-ACK goes back to the link-layer sender, like an RST: a
    /// stateless reply must not make state in the ARP cache either.
    fn send_cookie(&mut self, now: Instant, peer: Peer, tuple: FourTuple, seg: &Segment<'_>) {
        let cfg = &self.config.tcp;
        let our_mss = self.env.0.mss;
        let offered = seg.mss.filter(|&m| m > 0).unwrap_or(536).min(our_mss);
        let (iss, _) = self.cookies.isn(now, &tuple, seg.seq, offered);
        // Window scale and SACK survive only in the timestamp's low bits.
        let timestamps = cfg.timestamps && seg.timestamp.is_some();
        let wscale = (timestamps && cfg.window_scaling).then_some(seg.wscale).flatten();
        let sack = timestamps && cfg.sack && seg.sack_permitted;
        let timestamp = seg.timestamp.filter(|_| timestamps).map(|(tsval, _)| {
            let ts_now = (now.total_millis() as u32).wrapping_add(iss.get().rotate_left(13));
            (SynCookies::encode_ts(ts_now, wscale, sack), tsval)
        });
        let header = TcpHeader {
            src_port: tuple.local_port,
            dst_port: tuple.remote_port,
            seq: iss,
            ack: Some(seg.seq + 1u32),
            flags: Flags { syn: true, ..Flags::default() },
            window: cfg.rx_buffer.min(u16::MAX as usize) as u16,
            mss: Some(our_mss),
            wscale: wscale.map(|_| crate::tcp::connection::window_shift(cfg.rx_buffer)),
            sack_permitted: sack,
            timestamp,
            ..TcpHeader::default()
        };
        let (local, our_mac) = (self.config.ip, self.config.mac);
        if self.push_control(|frame| wire::emit_tcp_frame(frame, our_mac, peer.mac, local, peer.ip, &header)) {
            self.env.0.counters.syn_cookies_sent += 1;
            self.env.0.counters.segments_out += 1;
        }
    }

    /// An ACK for a listening port without a connection: the end of a cookie
    /// handshake, if the cookie checks out. Returns whether it was one.
    fn accept_cookie(&mut self, now: Instant, tuple: FourTuple, listener: u32, seg: &Segment<'_>) -> bool {
        let Some(ack) = seg.ack else { return false };
        if seg.flags.syn || !self.config.tcp.syn_cookies {
            return false;
        }
        let Some(mss) = self.cookies.check(now, &tuple, seg.seq - 1u32, ack - 1u32) else { return false };
        let (wscale, sack) = match seg.timestamp {
            Some((_, tsecr)) if self.config.tcp.timestamps => SynCookies::decode_ts(tsecr),
            _ => (None, false),
        };
        let Some(Some(l)) = self.listeners.get(listener as usize) else { return false };
        if l.backlog.len() >= l.backlog_limit {
            self.drop(Drop::TcpAcceptQueueFull);
            return true;
        }
        if self.conns.len() >= self.config.limits.max_connections {
            self.drop(Drop::TcpConnectionLimit);
            return true;
        }
        let options = CookieOptions { mss, wscale, sack };
        let conn = Connection::from_cookie(Key::default(), tuple, listener, seg, options, now, &mut self.env.0);
        let key = self.conns.insert(conn);
        if let Some(conn) = self.conns.get_mut(key) {
            conn.key = key;
        }
        self.flows.insert(tuple, key);
        self.env.0.counters.syn_cookies_accepted += 1;
        self.enqueue_accept(key);
        // The ACK may carry data (or a FIN): process it as any segment.
        if let Some(conn) = self.conns.get_mut(key) {
            let outcome = conn.on_segment(now, seg, &mut self.env.0);
            self.apply(key, outcome, None);
        }
        true
    }

    /// Queues a TCP segment without payload (RST) that belongs to no live
    /// connection's send path.
    fn queue_tcp_control(&mut self, mac: [u8; 6], remote: Ipv4Addr, header: &TcpHeader) {
        let local = self.config.ip;
        let our_mac = self.config.mac;
        if self.push_control(|frame| wire::emit_tcp_frame(frame, our_mac, mac, local, remote, header)) {
            self.env.0.counters.resets_sent += 1;
            self.env.0.counters.segments_out += 1;
        }
    }

    // ---------------------------------------------------------------------
    // ICMP
    // ---------------------------------------------------------------------

    fn handle_icmp(&mut self, peer: Peer, packet: &[u8], bytes: &[u8]) {
        let Ok(icmp) = Icmpv4Packet::new_checked(bytes) else {
            return self.drop(Drop::IcmpMalformed);
        };
        if checksum::Sum::new().add_bytes(bytes).fold() != 0xffff {
            return self.drop(Drop::IcmpMalformed);
        }
        let Ok(repr) = Icmpv4Repr::parse(&icmp, &ChecksumCapabilities::ignored()) else {
            return self.drop(Drop::IcmpMalformed);
        };
        let Icmpv4Repr::EchoRequest { ident, seq_no, data } = repr else {
            return self.drop(Drop::IcmpIgnored);
        };
        if packet.len() > self.config.mtu {
            return self.drop(Drop::IcmpIgnored);
        }
        let reply = Icmpv4Repr::EchoReply { ident, seq_no, data };
        if self.queue_icmp(peer, &reply) {
            self.env.0.counters.echo_replies += 1;
        }
    }

    /// RFC 1122 §3.2.2.1 / §4.1.3.1: tell the sender nobody takes this.
    fn send_unreachable(&mut self, peer: Peer, reason: Icmpv4DstUnreachable, packet: &[u8]) {
        if !self.icmp_error_allowed() {
            return self.drop(Drop::IcmpSuppressed);
        }
        let Ok(ip) = Ipv4Packet::new_checked(packet) else { return };
        let Ok(header) = Ipv4Repr::parse(&ip, &ChecksumCapabilities::ignored()) else { return };
        // The offending header and the first 8 bytes of its payload.
        let payload = &packet[ip.header_len() as usize..];
        let data = &payload[..payload.len().min(8)];
        let header = Ipv4Repr { payload_len: data.len(), ..header };
        let repr = Icmpv4Repr::DstUnreachable { reason, header, data };
        if self.queue_icmp(peer, &repr) {
            self.env.0.counters.unreachables_sent += 1;
        }
    }

    fn icmp_error_allowed(&mut self) -> bool {
        let now = self.now;
        if now >= self.icmp_refill {
            self.icmp_tokens = ICMP_ERRORS_PER_SEC;
            self.icmp_refill = now + Duration::from_secs(1);
        }
        if self.icmp_tokens == 0 {
            return false;
        }
        self.icmp_tokens -= 1;
        true
    }

    fn queue_icmp(&mut self, peer: Peer, repr: &Icmpv4Repr<'_>) -> bool {
        let (our_mac, our_ip) = (self.config.mac, self.config.ip);
        let icmp_len = repr.buffer_len();
        let total = TCP_OFFSET + icmp_len;
        if total > self.config.max_frame_len() {
            return false;
        }
        self.push_control(|frame| {
            wire::emit_ethernet(frame, our_mac, peer.mac, EthernetProtocol::Ipv4);
            let icmp_bytes = &mut frame[TCP_OFFSET..total];
            let mut packet = Icmpv4Packet::new_unchecked(&mut *icmp_bytes);
            repr.emit(&mut packet, &ChecksumCapabilities::default());
            packet.set_checksum(0);
            let sum = checksum::checksum(icmp_bytes);
            Icmpv4Packet::new_unchecked(&mut *icmp_bytes).set_checksum(sum);
            wire::emit_ipv4(&mut frame[ETHERNET_HEADER_LEN..], our_ip, peer.ip, IpProtocol::Icmp, icmp_len);
            total
        })
    }

    // ---------------------------------------------------------------------
    // ARP
    // ---------------------------------------------------------------------

    fn handle_arp(&mut self, now: Instant, bytes: &[u8]) {
        let Ok(packet) = ArpPacket::new_checked(bytes) else {
            return self.drop(Drop::ArpMalformed);
        };
        let Ok(ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr,
            source_protocol_addr,
            target_protocol_addr,
            ..
        }) = ArpRepr::parse(&packet)
        else {
            return self.drop(Drop::ArpMalformed);
        };
        let (sha, spa) = (source_hardware_addr.0, source_protocol_addr);
        if spa == self.config.ip || !is_unicast(spa) || !EthernetAddress(sha).is_unicast() {
            return self.drop(Drop::ArpMalformed);
        }
        // RFC 826: merge the sender if known; add it if we are the target.
        let for_us = target_protocol_addr == self.config.ip;
        let known = self.arp.contains(spa);
        if known || for_us {
            self.arp.update(now, spa, sha);
            self.flush_pending(spa, sha);
        }
        if for_us {
            if operation == ArpOperation::Request {
                self.queue_arp(ArpOperation::Reply, sha, spa, sha);
            }
        } else if !known {
            self.drop(Drop::ArpNotForUs);
        }
    }

    /// Queues an ARP packet from us. A request with `target_ip` equal to our
    /// own address is a gratuitous announcement.
    fn queue_arp(&mut self, operation: ArpOperation, target_mac: [u8; 6], target_ip: Ipv4Addr, dst: [u8; 6]) {
        let repr = ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr: EthernetAddress(self.config.mac),
            source_protocol_addr: self.config.ip,
            target_hardware_addr: EthernetAddress(target_mac),
            target_protocol_addr: target_ip,
        };
        let our_mac = self.config.mac;
        let queued = self.push_control(|frame| {
            wire::emit_ethernet(frame, our_mac, dst, EthernetProtocol::Arp);
            let len = repr.buffer_len();
            repr.emit(&mut ArpPacket::new_unchecked(&mut frame[ETHERNET_HEADER_LEN..ETHERNET_HEADER_LEN + len]));
            // Pad to the Ethernet minimum.
            let end = (ETHERNET_HEADER_LEN + len).max(60);
            frame[ETHERNET_HEADER_LEN + len..end].fill(0);
            end
        });
        if queued {
            match operation {
                ArpOperation::Request => self.env.0.counters.arp_requests += 1,
                _ => self.env.0.counters.arp_replies += 1,
            }
        }
    }

    fn hold_for_arp(&mut self, next_hop: Ipv4Addr, frame: Box<[u8]>, len: usize) {
        if self.pending.len() >= self.config.limits.arp_pending
            && let Some(old) = self.pending.pop_front()
        {
            self.frames.give(old.frame);
            self.drop(Drop::ArpUnresolved);
        }
        self.pending.push_back(PendingFrame { next_hop, frame, len });
        if self.timers.deadline(ARP_TIMER).is_none() {
            self.timers.schedule(ARP_TIMER, self.now + ArpCache::RETRY);
        }
    }

    /// Sends the frames that waited for `ip`.
    fn flush_pending(&mut self, ip: Ipv4Addr, mac: [u8; 6]) {
        let mut i = 0;
        while i < self.pending.len() {
            if self.pending[i].next_hop != ip {
                i += 1;
                continue;
            }
            let Some(mut p) = self.pending.remove(i) else { break };
            p.frame[..6].copy_from_slice(&mac);
            if self.control.len() < self.config.limits.control_queue {
                self.control.push_back((p.frame, p.len));
            } else {
                self.frames.give(p.frame);
                self.drop(Drop::ControlQueueFull);
            }
        }
    }

    fn on_arp_timer(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.pending.len() {
            let hop = self.pending[i].next_hop;
            if self.arp.gave_up(hop) {
                if let Some(p) = self.pending.remove(i) {
                    self.frames.give(p.frame);
                }
                self.drop(Drop::ArpUnresolved);
                continue;
            }
            if self.arp.lookup(now, hop) == Lookup::MissRequest {
                self.queue_arp(ArpOperation::Request, [0; 6], hop, wire::BROADCAST_MAC);
            }
            i += 1;
        }
        if !self.pending.is_empty() {
            self.timers.schedule(ARP_TIMER, now + ArpCache::RETRY);
        }
    }

    /// Fills a pooled frame with `fill` and queues it; counts a drop when the
    /// control queue is full.
    fn push_control(&mut self, fill: impl FnOnce(&mut [u8]) -> usize) -> bool {
        if self.control.len() >= self.config.limits.control_queue {
            self.drop(Drop::ControlQueueFull);
            return false;
        }
        let mut frame = self.frames.take();
        let len = fill(&mut frame);
        self.control.push_back((frame, len));
        true
    }
}

/// Writes a whole TCP frame for `conn` into `frame`; `None` if the connection
/// has nothing to send.
fn write_segment(
    config: &Config,
    env: &mut Env,
    conn: &mut Connection,
    now: Instant,
    dst_mac: [u8; 6],
    frame: &mut [u8],
) -> Option<usize> {
    let emitted = conn.emit(now, env, &mut frame[TCP_OFFSET..])?;
    let tcp_len = emitted.len;
    let (local, remote) = (conn.tuple.local_ip, conn.tuple.remote_ip);
    // The payload was summed as it was copied in: only the header is read.
    let segment = &mut frame[TCP_OFFSET..TCP_OFFSET + tcp_len];
    let sum = checksum::pseudo_header(local, remote, IpProtocol::Tcp.into(), tcp_len as u16)
        .add_bytes(&segment[..emitted.header_len])
        .add_sum(emitted.payload_sum);
    wire::set_tcp_checksum(segment, sum.finish());
    wire::emit_ipv4(&mut frame[ETHERNET_HEADER_LEN..], local, remote, IpProtocol::Tcp, tcp_len);
    wire::emit_ethernet(frame, config.mac, dst_mac, EthernetProtocol::Ipv4);
    Some(TCP_OFFSET + tcp_len)
}

/// The next hop towards `dst`: itself when on our subnet, else the gateway.
fn route(config: &Config, dst: Ipv4Addr) -> Option<Ipv4Addr> {
    let bits = config.prefix_len.min(32) as u32;
    let mask = if bits == 0 { 0 } else { u32::MAX << (32 - bits) };
    if dst.to_bits() & mask == config.ip.to_bits() & mask { Some(dst) } else { config.gateway }
}

/// A plausible unicast host address.
fn is_unicast(ip: Ipv4Addr) -> bool {
    !(ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() || ip.octets()[0] >= 240)
}
