//! The driver's output: frames for `poll_transmit`, from the control
//! queue (ARP, ICMP, RSTs) and then the connections that have something
//! to send, in turn.

use core::net::{Ipv4Addr, Ipv6Addr};

use smoltcp::wire::{ArpOperation, EthernetProtocol, IpProtocol};

use crate::checksum;
use crate::config::Config;
use crate::counters::DropReason;
use crate::neighbor::Lookup;
use crate::pool::Key;
use crate::tcp::connection::{Connection, Env};
use crate::time::Instant;
use crate::wire::{self, ETHERNET_HEADER_LEN, IPV6_HEADER_LEN, TCP_OFFSET};

use super::Shard;
use super::ipv6::same_prefix;

impl Shard {
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
    pub(super) fn transmit_connection(&mut self, now: Instant, key: Key, buf: &mut [u8]) -> Option<usize> {
        let remote = self.conns.get(key)?.tuple.remote_ip;
        // IPv4 first, the way it went before IPv6: this runs per segment.
        let hop = match remote.to_ipv4_mapped() {
            Some(remote) => route(&self.config, remote).map(|hop| (hop.to_ipv6_mapped(), self.arp.lookup(now, hop))),
            None => self.next_hop6(remote).map(|hop| (hop, self.resolve(now, hop))),
        };
        let Some((next_hop, lookup)) = hop else {
            if let Some(conn) = self.conns.get_mut(key) {
                conn.set_in_ready(false);
            }
            self.env.0.counters.drop(DropReason::NoRoute);
            return None;
        };
        let frame_len = self.config.max_frame_len().min(buf.len());
        let (mac, probe) = match lookup {
            Lookup::Hit(mac) => (Some(mac), false),
            Lookup::HitProbe(mac) => (Some(mac), true),
            Lookup::MissRequest | Lookup::MissWait => (None, false),
        };
        let conn = self.conns.get_mut(key)?;
        let written = match mac {
            Some(mac) => write_segment(&self.config, &mut self.env.0, conn, now, mac, &mut buf[..frame_len]),
            None => {
                // Unresolved: hold one segment until the neighbour answers;
                // the connection's own timers cover anything after that.
                let mut held = self.frames.take();
                let n = write_segment(&self.config, &mut self.env.0, conn, now, [0; 6], &mut held[..frame_len]);
                conn.set_in_ready(false);
                match n {
                    Some(len) => self.hold_for_resolution(next_hop, held, len),
                    None => self.frames.give(held),
                }
                self.sync_timer(key);
                if lookup == Lookup::MissRequest {
                    self.solicit(next_hop, None);
                    return self.poll_control(buf);
                }
                return None;
            }
        };
        if probe && let Some(mac) = mac {
            self.solicit(next_hop, Some(mac));
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

    /// The next hop towards `dst` (IPv4-mapped for IPv4): itself when on a
    /// subnet of ours (for IPv6: one of our prefixes, or link-local), else
    /// the gateway, or for IPv6 the default router.
    #[inline]
    pub(super) fn next_hop(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        if let Some(dst) = dst.to_ipv4_mapped() {
            return route(&self.config, dst).map(|hop| hop.to_ipv6_mapped());
        }
        self.next_hop6(dst)
    }

    /// [`next_hop`](Self::next_hop) of an IPv6 destination.
    fn next_hop6(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        let v6 = self.ipv6.as_ref()?;
        let on_link =
            dst.is_unicast_link_local() || v6.addresses.iter().any(|a| same_prefix(a.addr, dst, a.prefix_len));
        if on_link { Some(dst) } else { self.ipv6_default_router() }
    }

    /// The link address cached for neighbour `hop`, without side effects.
    pub(super) fn neighbor_mac(&self, hop: Ipv6Addr) -> Option<[u8; 6]> {
        match hop.to_ipv4_mapped() {
            Some(hop) => self.arp.get(hop),
            None => self.ipv6.as_ref()?.neighbors.get(hop),
        }
    }

    /// Looks `hop` up for a frame about to go (ARP's cache or Neighbor
    /// Discovery's).
    #[inline]
    pub(super) fn resolve(&mut self, now: Instant, hop: Ipv6Addr) -> Lookup {
        match (hop.to_ipv4_mapped(), &mut self.ipv6) {
            (Some(hop), _) => self.arp.lookup(now, hop),
            (None, Some(v6)) => v6.neighbors.lookup(now, hop),
            (None, None) => Lookup::MissWait,
        }
    }

    /// For an unresolved `hop`: whether its requests are used up.
    pub(super) fn gave_up(&self, hop: Ipv6Addr) -> bool {
        match hop.to_ipv4_mapped() {
            Some(hop) => self.arp.gave_up(hop),
            None => self.ipv6.as_ref().is_none_or(|v6| v6.neighbors.gave_up(hop)),
        }
    }

    /// Asks for `hop`'s link address: an ARP request, or a Neighbor
    /// Solicitation with ours (RFC 4861 §7.2.2). To everyone (the broadcast
    /// address, or the solicited-node group), or, to confirm the address
    /// `cached` for it, to that address alone (RFC 4861 §7.3.3's probe; as
    /// Linux does for ARP too).
    pub(super) fn solicit(&mut self, hop: Ipv6Addr, cached: Option<[u8; 6]>) {
        match hop.to_ipv4_mapped() {
            Some(hop) => {
                let dst = cached.unwrap_or(wire::BROADCAST_MAC);
                self.queue_arp(ArpOperation::Request, cached.unwrap_or([0; 6]), hop, dst);
            }
            None => self.solicit_neighbor(hop, cached),
        }
    }

    /// Whether a neighbour entry of either family waits for an upper
    /// layer's confirmation (DELAY or PROBE).
    #[inline]
    pub(super) fn neighbors_await_confirmation(&self) -> bool {
        self.arp.awaits_confirmation() || self.ipv6.as_ref().is_some_and(|v6| v6.neighbors.awaits_confirmation())
    }

    /// An upper layer's word that `remote` acknowledged something we sent
    /// (RFC 4861 §7.3.1): its next hop's entry is confirmed.
    pub(super) fn confirm_neighbor(&mut self, now: Instant, remote: Ipv6Addr) {
        match remote.to_ipv4_mapped() {
            Some(remote) => {
                if let Some(hop) = route(&self.config, remote) {
                    let _ = self.arp.confirm(now, hop);
                }
            }
            None => {
                if let Some(hop) = self.next_hop6(remote)
                    && let Some(v6) = &mut self.ipv6
                {
                    let _ = v6.neighbors.confirm(now, hop);
                }
            }
        }
    }

    pub(super) fn poll_control(&mut self, buf: &mut [u8]) -> Option<usize> {
        let (frame, len) = self.control.pop_front()?;
        let n = len.min(buf.len());
        buf[..n].copy_from_slice(&frame[..n]);
        self.frames.give(frame);
        Some(n)
    }

    /// Fills a pooled frame with `fill` and queues it; counts a drop when the
    /// control queue is full.
    pub(super) fn push_control(&mut self, fill: impl FnOnce(&mut [u8]) -> usize) -> bool {
        if self.control.len() >= self.config.limits.control_queue {
            self.drop(DropReason::ControlQueueFull);
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
pub(super) fn write_segment(
    config: &Config,
    env: &mut Env,
    conn: &mut Connection,
    now: Instant,
    dst_mac: [u8; 6],
    frame: &mut [u8],
) -> Option<usize> {
    let (local, remote) = (conn.tuple.local_ip, conn.tuple.remote_ip);
    let v4 = conn.tuple.ipv4();
    let offset = if v4.is_some() { TCP_OFFSET } else { ETHERNET_HEADER_LEN + IPV6_HEADER_LEN };
    let emitted = conn.emit(now, env, &mut frame[offset..])?;
    let tcp_len = emitted.len;
    // The payload was summed as it was copied in: only the header is read.
    let segment = &mut frame[offset..offset + tcp_len];
    let pseudo = match v4 {
        Some((local, remote)) => checksum::pseudo_header(local, remote, IpProtocol::Tcp.into(), tcp_len as u16),
        None => checksum::pseudo_header_v6(local, remote, IpProtocol::Tcp.into(), tcp_len as u32),
    };
    let checksum = if config.tx_checksum_offload {
        // The device sums the header and payload in.
        env.counters.checksums_offloaded += 1;
        pseudo.fold()
    } else {
        pseudo.add_bytes(&segment[..emitted.header_len]).add_sum(emitted.payload_sum).finish()
    };
    wire::set_tcp_checksum(segment, checksum);
    match v4 {
        Some((local, remote)) => {
            wire::emit_ipv4(&mut frame[ETHERNET_HEADER_LEN..], local, remote, IpProtocol::Tcp, tcp_len);
            wire::emit_ethernet(frame, config.mac, dst_mac, EthernetProtocol::Ipv4);
        }
        None => wire::emit_tcp_headers(frame, config.mac, dst_mac, local, remote, tcp_len),
    }
    Some(offset + tcp_len)
}

/// The next hop towards `dst`: itself when on our subnet, else the gateway.
pub(super) fn route(config: &Config, dst: Ipv4Addr) -> Option<Ipv4Addr> {
    let bits = config.prefix_len.min(32) as u32;
    let mask = if bits == 0 { 0 } else { u32::MAX << (32 - bits) };
    if dst.to_bits() & mask == config.ip.to_bits() & mask { Some(dst) } else { config.gateway }
}
