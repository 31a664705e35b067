//! The shard: one core's share of the flows and everything they need.
//!
//! Inputs are `handle_*` (frames, timeouts) and application calls; outputs
//! are `poll_*` (frames, events, the next deadline). A frame goes Ethernet →
//! ARP | IPv4 → ICMP | TCP; TCP looks its flow up in the table (O(1)) and
//! hands the segment to the connection. Connections with something to send
//! wait in a FIFO "ready" queue; `poll_transmit` serves them round-robin, so
//! no path ever walks all connections.
//!
//! One `impl Shard` per layer, each in its own file: this one holds the
//! shard's state and the driver's entry points (`handle_frame`,
//! `handle_timeout`, `poll_timeout`); [`arp`] answers and resolves
//! neighbours, [`ipv4`] takes IPv4 and ICMP, [`tcp`] demultiplexes segments
//! to connections and listeners (SYN queue, SYN cookies), [`held_acks`]
//! coalesces a batch's pure ACKs, [`api`] is the application's side,
//! [`bookkeeping`] keeps timers and the ready queue, and [`transmit`]
//! writes the frames `poll_transmit` returns.

use core::net::Ipv4Addr;
use std::collections::VecDeque;

use foldhash::fast::FixedState;
use hashbrown::HashMap;
use smoltcp::wire::{ArpOperation, EthernetFrame, EthernetProtocol};

use crate::config::Config;
use crate::counters::{Counters, DropReason};
use crate::flow_table::{FlowTable, FourTuple};
use crate::neighbor::ArpCache;
use crate::pool::{BufferPool, Key, Slab, StoragePool};
use crate::tcp::connection::{Connection, Env};
use crate::tcp::isn::IsnGenerator;
use crate::tcp::syn_cookie::SynCookies;
use crate::time::{Duration, Instant};
use crate::timer_wheel::TimerWheel;
use crate::wire;

mod api;
mod arp;
mod bookkeeping;
mod held_acks;
mod ipv4;
mod ipv6;
mod ndp;
mod tcp;
mod transmit;

use held_acks::HeldAck;
pub use ipv6::AddressState;
use ipv6::Ipv6State;

/// Timer id of the shard's own ARP maintenance.
const ARP_TIMER: u32 = 0;
/// Timer id of Neighbor Discovery's (duplicate address detection); the
/// connections' ids follow.
const NDP_TIMER: u32 = 1;
const FIRST_CONNECTION_TIMER: u32 = 2;

/// ICMP errors allowed per second (RFC 1812 §4.3.2.8 asks for a limit).
const ICMP_ERRORS_PER_SEC: u32 = 100;

/// Room for held ACKs made when the shard is: a receive batch's worth.
const HELD_ACKS: usize = 64;

/// A listening socket's state.
#[derive(Debug)]
struct ListenerState {
    port: u16,
    /// Which families it takes: both when it listens on an unspecified
    /// address, else that of its address.
    families: ListenFamilies,
    /// Established connections waiting for `accept`.
    backlog: VecDeque<Key>,
    backlog_limit: usize,
    /// Connections of this listener in SYN-RECEIVED.
    syn_queue: usize,
    /// An `Acceptable` event is outstanding.
    notified: bool,
}

/// The families a listener takes connections of.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ListenFamilies {
    Both,
    Ipv4,
    Ipv6,
}

impl ListenFamilies {
    /// Whether a connection of `tuple`'s family is for it.
    fn take(self, tuple: &FourTuple) -> bool {
        match self {
            ListenFamilies::Both => true,
            ListenFamilies::Ipv4 => tuple.ipv4().is_some(),
            ListenFamilies::Ipv6 => tuple.ipv4().is_none(),
        }
    }
}

/// A frame held until its next hop (IPv4-mapped for IPv4) is resolved.
#[derive(Debug)]
struct PendingFrame {
    next_hop: core::net::Ipv6Addr,
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
    /// Our IPv6 addresses and neighbours, when IPv6 is on.
    ipv6: Option<Ipv6State>,
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
            rx_pool: BufferPool::new(config.tcp.rx_buffer, 4096, config.recycle.buffers),
            tx_pool: BufferPool::new(config.tcp.tx_buffer, 4096, config.recycle.buffers),
            counters: Counters::default(),
            events: crate::event_queue::EventQueue::new(256, config.recycle.events),
            reasm_pool: StoragePool::new(4096, config.recycle.buffers),
            sentq_pool: StoragePool::new(4096, config.recycle.buffers),
            time_wait: 0,
            max_time_wait: limits.max_time_wait,
            challenge_acks_left: config.tcp.challenge_acks_per_sec,
            // Allocated once, here, and only when something uses it.
            paths: crate::tcp::path_cache::PathCache::new(
                match config.tcp.fast_start {
                    crate::config::FastStart::Off => {
                        crate::tcp::path_cache::PathMemoryConfig { capacity: 0, ..config.tcp.path_memory }
                    }
                    _ => config.tcp.path_memory,
                },
                config.secret,
            ),
            shares: crate::tcp::connection::FastStartShares::default(),
            partial_checksums: config.tx_checksum_offload,
        };
        let (lo, hi) = config.tcp.ephemeral_ports;
        let mut shard = Shard {
            isn: IsnGenerator::new(config.secret),
            cookies: SynCookies::new(config.secret),
            flows: FlowTable::new(config.secret),
            env: EnvBox(env),
            now: Instant::ZERO,
            conns: Slab::with_recycling(config.recycle.handles),
            listeners: Vec::new(),
            listener_ports: HashMap::with_hasher(FixedState::with_seed(config.secret as u64)),
            timers: TimerWheel::new(Instant::ZERO),
            ready: VecDeque::with_capacity(256),
            control: VecDeque::with_capacity(limits.control_queue),
            frames: BufferPool::new(frame_len, limits.control_queue + limits.arp_pending, config.recycle.buffers),
            arp: ArpCache::new(limits.arp_cache),
            pending: VecDeque::with_capacity(limits.arp_pending),
            next_port: lo.min(hi),
            icmp_tokens: ICMP_ERRORS_PER_SEC,
            icmp_refill: Instant::ZERO,
            challenge_refill: Instant::ZERO,
            pool_trim_at: Instant::ZERO + crate::pool::TRIM_INTERVAL,
            held: Vec::with_capacity(HELD_ACKS),
            ipv6: config.ipv6.as_ref().map(|v6| Ipv6State::new(v6, config.mac, limits.arp_cache)),
            config,
        };
        shard.queue_arp(ArpOperation::Request, [0; 6], shard.config.ip, wire::BROADCAST_MAC);
        shard.start_dad();
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

    /// Our IPv6 addresses (the link-local one first) and where each
    /// stands; none when IPv6 is off.
    pub fn ipv6_addresses(&self) -> impl Iterator<Item = (core::net::Ipv6Addr, AddressState)> + '_ {
        self.ipv6.iter().flat_map(|v6| v6.addresses.iter().map(|a| (a.addr, a.state)))
    }

    /// The IPv6 default router: the configured one, else the first router
    /// whose advertisement is still in force.
    pub fn ipv6_default_router(&self) -> Option<core::net::Ipv6Addr> {
        let v6 = self.ipv6.as_ref()?;
        v6.gateway.or_else(|| v6.routers.iter().find(|&&(_, until)| until > self.now).map(|&(r, _)| r))
    }

    /// The link MTU a router advertised (RFC 4861 §6.3.4), when below ours.
    pub fn ipv6_link_mtu(&self) -> Option<u32> {
        self.ipv6.as_ref()?.link_mtu
    }

    /// A neighbour's link address and state, for tests.
    #[cfg(test)]
    pub(crate) fn neighbor(
        &self,
        now: Instant,
        addr: core::net::IpAddr,
    ) -> Option<([u8; 6], crate::neighbor::NeighborState)> {
        match addr {
            core::net::IpAddr::V4(addr) => Some((self.arp.get(addr)?, self.arp.state(now, addr)?)),
            core::net::IpAddr::V6(addr) => {
                let neighbors = &self.ipv6.as_ref()?.neighbors;
                Some((neighbors.get(addr)?, neighbors.state(now, addr)?))
            }
        }
    }

    /// IPv6 neighbours cached, for tests.
    #[cfg(test)]
    pub(crate) fn ipv6_neighbor_count(&self) -> usize {
        self.ipv6.as_ref().map_or(0, |v6| v6.neighbors.len())
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
            return self.drop(DropReason::EthernetTruncated);
        };
        let dst = eth.dst_addr();
        let group = dst.is_multicast() && self.ipv6.as_ref().is_some_and(|v6| v6.listens_on(dst.0));
        if dst.0 != self.config.mac && !dst.is_broadcast() && !group {
            return self.drop(DropReason::EthernetNotForUs);
        }
        let src_mac = eth.src_addr().0;
        match eth.ethertype() {
            EthernetProtocol::Arp => self.handle_arp(now, eth.payload()),
            EthernetProtocol::Ipv4 if dst.is_broadcast() || group => self.drop(DropReason::Ipv4NotForUs),
            EthernetProtocol::Ipv4 => self.handle_ipv4(now, src_mac, eth.payload()),
            EthernetProtocol::Ipv6 => self.handle_ipv6(now, src_mac, dst.is_multicast(), eth.payload()),
            _ => self.drop(DropReason::EthernetUnknownType),
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
            if id == NDP_TIMER {
                self.on_ndp_timer(now);
                continue;
            }
            let Some(key) = self.conns.key_at(id - FIRST_CONNECTION_TIMER) else { continue };
            let Some(conn) = self.conns.get_mut(key) else { continue };
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

    fn drop(&mut self, reason: DropReason) {
        self.env.0.counters.drop(reason);
    }
}
