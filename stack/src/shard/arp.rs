//! ARP: answers, requests, the cache's maintenance and the frames that
//! wait for a next hop to resolve.

use core::net::Ipv4Addr;

use smoltcp::wire::{ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetProtocol};

use crate::counters::DropReason;
use crate::neighbor::{ArpCache, Lookup};
use crate::time::Instant;
use crate::wire::{self, ETHERNET_HEADER_LEN};

use super::ipv4::is_unicast;
use super::{ARP_TIMER, PendingFrame, Shard};

impl Shard {
    pub(super) fn handle_arp(&mut self, now: Instant, bytes: &[u8]) {
        let Ok(packet) = ArpPacket::new_checked(bytes) else {
            return self.drop(DropReason::ArpMalformed);
        };
        let Ok(ArpRepr::EthernetIpv4 {
            operation,
            source_hardware_addr,
            source_protocol_addr,
            target_protocol_addr,
            ..
        }) = ArpRepr::parse(&packet)
        else {
            return self.drop(DropReason::ArpMalformed);
        };
        let (sha, spa) = (source_hardware_addr.0, source_protocol_addr);
        if spa == self.config.ip || !is_unicast(spa) || !EthernetAddress(sha).is_unicast() {
            return self.drop(DropReason::ArpMalformed);
        }
        // RFC 826: merge the sender if known; add it if we are the target.
        let for_us = target_protocol_addr == self.config.ip;
        let known = self.arp.contains(spa);
        if known || for_us {
            self.arp.update(now, spa, sha);
            self.flush_pending(spa.to_ipv6_mapped(), sha);
        }
        if for_us {
            if operation == ArpOperation::Request {
                self.queue_arp(ArpOperation::Reply, sha, spa, sha);
            }
        } else if !known {
            self.drop(DropReason::ArpNotForUs);
        }
    }

    /// Queues an ARP packet from us. A request with `target_ip` equal to our
    /// own address is a gratuitous announcement.
    pub(super) fn queue_arp(
        &mut self,
        operation: ArpOperation,
        target_mac: [u8; 6],
        target_ip: Ipv4Addr,
        dst: [u8; 6],
    ) {
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

    /// Holds `frame` until `next_hop` (IPv4-mapped for IPv4) resolves, by
    /// ARP or Neighbor Discovery.
    pub(super) fn hold_for_resolution(&mut self, next_hop: core::net::Ipv6Addr, frame: Box<[u8]>, len: usize) {
        if self.pending.len() >= self.config.limits.arp_pending
            && let Some(old) = self.pending.pop_front()
        {
            self.frames.give(old.frame);
            self.drop(DropReason::ArpUnresolved);
        }
        self.pending.push_back(PendingFrame { next_hop, frame, len });
        if self.timers.deadline(ARP_TIMER).is_none() {
            self.timers.schedule(ARP_TIMER, self.now + ArpCache::RETRY);
        }
    }

    /// Sends the frames that waited for `ip` (IPv4-mapped for IPv4).
    pub(super) fn flush_pending(&mut self, ip: core::net::Ipv6Addr, mac: [u8; 6]) {
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
                self.drop(DropReason::ControlQueueFull);
            }
        }
    }

    pub(super) fn on_arp_timer(&mut self, now: Instant) {
        let mut i = 0;
        while i < self.pending.len() {
            let hop = self.pending[i].next_hop;
            if self.gave_up(hop) {
                if let Some(p) = self.pending.remove(i) {
                    self.frames.give(p.frame);
                }
                self.drop(DropReason::ArpUnresolved);
                continue;
            }
            if self.resolve(now, hop) == Lookup::MissRequest {
                self.solicit(hop, None);
            }
            i += 1;
        }
        if !self.pending.is_empty() {
            self.timers.schedule(ARP_TIMER, now + ArpCache::RETRY);
        }
    }
}
