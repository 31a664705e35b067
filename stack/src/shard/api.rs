//! The application's side: listeners, connections and their events.

use core::net::{IpAddr, Ipv4Addr, SocketAddr, SocketAddrV4};
use std::collections::VecDeque;

use crate::api::{ConnectError, Event, FlowStats, Handle, ListenError, Listener, RecvError, SendError};
use crate::flow_table::FourTuple;
use crate::pool::{Key, Slab};
use crate::tcp::connection::Connection;
use crate::tcp::{SeqNumber, State};
use crate::time::Instant;

use super::ipv4::is_unicast;
use super::transmit::route;
use super::{ListenFamilies, ListenerState, Shard};

impl Shard {
    /// Listens on `addr`'s port: at the unspecified address of either
    /// family (`0.0.0.0`, `[::]`) for every address of ours, of both
    /// families; at one of our IPv6 addresses for IPv6 only; at our IPv4
    /// address (or its IPv4-mapped form) for IPv4 only.
    pub fn listen(&mut self, addr: impl Into<SocketAddr>) -> Result<Listener, ListenError> {
        let addr = addr.into();
        let families = match addr.ip() {
            ip if ip.is_unspecified() => Some(ListenFamilies::Both),
            IpAddr::V4(ip) => (ip == self.config.ip).then_some(ListenFamilies::Ipv4),
            IpAddr::V6(ip) if ip.to_ipv4_mapped().is_some() => {
                (ip.to_ipv4_mapped() == Some(self.config.ip)).then_some(ListenFamilies::Ipv4)
            }
            IpAddr::V6(ip) => {
                self.ipv6.as_ref().is_some_and(|v6| v6.find(ip).is_some()).then_some(ListenFamilies::Ipv6)
            }
        };
        let Some(families) = families else {
            return Err(ListenError::AddressNotAvailable);
        };
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
            families,
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

    /// Opens a connection to `to`, of either family (an IPv4-mapped
    /// address is its IPv4 address; an IPv6 one needs IPv6 on, and goes
    /// from our address that suits it). Completion is signalled by
    /// [`Event::Connected`] (or [`Event::Error`]).
    pub fn connect(&mut self, now: Instant, to: impl Into<SocketAddr>) -> Result<Handle, ConnectError> {
        self.advance(now);
        let (local, remote) = match to.into() {
            SocketAddr::V6(to) if to.ip().to_ipv4_mapped().is_none() => {
                let ip = *to.ip();
                let ours = self.ipv6.as_ref().is_some_and(|v6| v6.find(ip).is_some());
                if to.port() == 0 || ip.is_multicast() || ip.is_unspecified() || ip.is_loopback() || ours {
                    return Err(ConnectError::InvalidAddress);
                }
                let source = self.ipv6.as_ref().and_then(|v6| v6.source_for(ip));
                let (Some(source), Some(_)) = (source, self.next_hop(ip)) else {
                    return Err(ConnectError::NoRoute);
                };
                (source, SocketAddr::V6(to))
            }
            to => {
                let to = match to {
                    SocketAddr::V4(to) => to,
                    SocketAddr::V6(to) => {
                        SocketAddrV4::new(to.ip().to_ipv4_mapped().unwrap_or(Ipv4Addr::UNSPECIFIED), to.port())
                    }
                };
                let ip = *to.ip();
                if to.port() == 0 || ip == self.config.ip || !is_unicast(ip) {
                    return Err(ConnectError::InvalidAddress);
                }
                if route(&self.config, ip).is_none() {
                    return Err(ConnectError::NoRoute);
                }
                (self.config.ip.to_ipv6_mapped(), SocketAddr::V4(to))
            }
        };
        if self.conns.len() >= self.config.limits.max_connections {
            return Err(ConnectError::TooManyConnections);
        }
        let (tuple, least_iss) = self.pick_local_port(now, local, remote).ok_or(ConnectError::NoPort)?;
        let iss = self.isn.isn(now, &tuple);
        let iss = match least_iss {
            Some(least) if iss.lt(least) => least,
            _ => iss,
        };
        let key = self.insert_connection(Connection::connect(Key::default(), tuple, iss, now, &self.env.0));
        self.sync(key);
        Ok(Handle(key))
    }

    /// A free local port at our address `local` (IPv4-mapped for IPv4)
    /// for a connection to `to`, whose flow this shard owns: one no
    /// connection uses, or one whose connection is in TIME-WAIT and may
    /// be taken over ([`Connection::reusable_time_wait`]), which is then
    /// removed, with the least ISS its successor may start from. Without
    /// the latter, a shard opening connections to one peer faster than
    /// its ports leave TIME-WAIT (16,384 ports per 60 s: 273 a second)
    /// would run out.
    pub(super) fn pick_local_port(
        &mut self,
        now: Instant,
        local: core::net::Ipv6Addr,
        to: SocketAddr,
    ) -> Option<(FourTuple, Option<SeqNumber>)> {
        let (lo, hi) = self.config.tcp.ephemeral_ports;
        let (lo, hi) = (lo.min(hi), lo.max(hi));
        let span = (hi - lo) as u32 + 1;
        for _ in 0..span {
            let port = self.next_port;
            self.next_port = if port >= hi || port < lo { lo } else { port + 1 };
            if port < lo || port > hi {
                continue;
            }
            let tuple = FourTuple::new(SocketAddr::new(local.to_canonical(), port), to);
            let owned = self.config.steering.is_none_or(|s| s.owns(&tuple));
            if !owned || self.listener_ports.contains_key(&port) {
                continue;
            }
            let Some(key) = self.flows.get(&tuple) else { return Some((tuple, None)) };
            let time_wait = self.config.tcp.time_wait;
            if let Some(least) = self.conns.get(key).and_then(|c| c.reusable_time_wait(now, time_wait)) {
                self.remove_connection(key);
                self.env.0.counters.time_wait_reused += 1;
                return Some((tuple, Some(least)));
            }
        }
        None
    }

    pub(super) fn app_conn(conns: &mut Slab<Connection>, h: Handle) -> Option<&mut Connection> {
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

    /// The connection behind `h`, for tests that look inside.
    #[cfg(test)]
    pub(crate) fn connection_for_tests(&self, h: Handle) -> &crate::tcp::connection::Connection {
        self.conns.get(h.0).expect("a live connection")
    }

    /// What the shard remembers about its peers' paths
    /// ([`TcpConfig::fast_start`](crate::TcpConfig::fast_start)).
    pub fn paths(&self) -> &crate::tcp::path_cache::PathCache {
        &self.env.0.paths
    }

    /// The payload rate, bytes per second, a fairness policy divides
    /// equally among `flows` active flows (`None`: no policy, no bound):
    /// careful resume's jump is at most a newcomer's share of it times the
    /// new flow's RTT, so a new download reaches its share in about one RTT
    /// and no more. Each jump counts as one more flow until the next call,
    /// so flows that join together share the room instead of each taking
    /// all of it ([`crate::fairness::Driver`] keeps this current).
    pub fn set_fast_start_share(&mut self, capacity: Option<u64>, flows: u32) {
        self.env.0.shares = crate::tcp::connection::FastStartShares { capacity, flows, claimed: 0 };
    }

    /// Jumps that took a fairness share since the last
    /// [`set_fast_start_share`](Self::set_fast_start_share): flows the
    /// policy has not counted yet, whose neighbours still have the room
    /// they took (run the policy now).
    pub fn fast_start_claims(&self) -> u32 {
        self.env.0.shares.claimed
    }

    /// The share a flow joining now would jump to, per second.
    #[cfg(test)]
    pub(crate) fn fast_start_share(&self) -> Option<u64> {
        self.env.0.shares.newcomer()
    }

    /// The peer's end of a connection the application holds: what
    /// [`flow`](Self::flow) says of it, without the rest.
    pub fn peer(&self, h: Handle) -> Option<SocketAddr> {
        self.conns.get(h.0).filter(|c| c.is_accepted() && !c.is_orphan()).map(|c| c.tuple.remote())
    }

    /// Statistics of a connection the application holds. A pure ACK held
    /// back in the current receive batch is not in them yet
    /// ([`end_batch`](Self::end_batch)).
    pub fn flow(&self, h: Handle) -> Option<FlowStats> {
        self.conns.get(h.0).filter(|c| c.is_accepted() && !c.is_orphan()).map(Connection::stats)
    }
}
