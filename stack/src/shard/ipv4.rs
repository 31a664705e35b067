//! IPv4 input and ICMP: echo, destination unreachable, the error rate
//! limit.

use core::net::Ipv4Addr;

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    EthernetProtocol, Icmpv4DstUnreachable, Icmpv4Packet, Icmpv4Repr, IpProtocol, Ipv4Packet, Ipv4Repr,
};

use crate::checksum;
use crate::counters::DropReason;
use crate::time::{Duration, Instant};
use crate::wire::{self, ETHERNET_HEADER_LEN, IPV4_HEADER_LEN, TCP_OFFSET};

use super::{ICMP_ERRORS_PER_SEC, Peer, Shard};

impl Shard {
    pub(super) fn handle_ipv4(&mut self, now: Instant, src_mac: [u8; 6], bytes: &[u8]) {
        let Ok(ip) = Ipv4Packet::new_checked(bytes) else {
            let reason = if bytes.first().is_some_and(|b| b >> 4 != 4) {
                DropReason::Ipv4BadVersion
            } else {
                DropReason::Ipv4Truncated
            };
            return self.drop(reason);
        };
        if ip.version() != 4 {
            return self.drop(DropReason::Ipv4BadVersion);
        }
        let header_len = ip.header_len() as usize;
        if checksum::Sum::new().add_bytes(&bytes[..header_len]).fold() != 0xffff {
            return self.drop(DropReason::Ipv4BadChecksum);
        }
        if header_len != IPV4_HEADER_LEN {
            return self.drop(DropReason::Ipv4Options);
        }
        if ip.more_frags() || ip.frag_offset() != 0 {
            return self.drop(DropReason::Ipv4Fragment);
        }
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        if dst != self.config.ip {
            return self.drop(DropReason::Ipv4NotForUs);
        }
        if !is_unicast(src) || src == self.config.ip || src.is_loopback() {
            return self.drop(DropReason::Ipv4BadSource);
        }
        // Ethernet pads short frames: the IP total length says where data ends.
        let packet = &bytes[..ip.total_len() as usize];
        let payload = &packet[header_len..];
        let peer = Peer { mac: src_mac, ip: src };
        match ip.next_header() {
            IpProtocol::Tcp => self.handle_tcp(now, src_mac, dst.to_ipv6_mapped(), src.to_ipv6_mapped(), payload),
            IpProtocol::Icmp => self.handle_icmp(peer, packet, payload),
            IpProtocol::Udp => {
                self.drop(DropReason::UdpNoPort);
                self.send_unreachable(peer, Icmpv4DstUnreachable::PortUnreachable, packet);
            }
            _ => {
                self.drop(DropReason::Ipv4UnknownProtocol);
                self.send_unreachable(peer, Icmpv4DstUnreachable::ProtoUnreachable, packet);
            }
        }
    }

    pub(super) fn handle_icmp(&mut self, peer: Peer, packet: &[u8], bytes: &[u8]) {
        let Ok(icmp) = Icmpv4Packet::new_checked(bytes) else {
            return self.drop(DropReason::IcmpMalformed);
        };
        if checksum::Sum::new().add_bytes(bytes).fold() != 0xffff {
            return self.drop(DropReason::IcmpMalformed);
        }
        let Ok(repr) = Icmpv4Repr::parse(&icmp, &ChecksumCapabilities::ignored()) else {
            return self.drop(DropReason::IcmpMalformed);
        };
        let Icmpv4Repr::EchoRequest { ident, seq_no, data } = repr else {
            return self.drop(DropReason::IcmpIgnored);
        };
        if packet.len() > self.config.mtu {
            return self.drop(DropReason::IcmpIgnored);
        }
        let reply = Icmpv4Repr::EchoReply { ident, seq_no, data };
        if self.queue_icmp(peer, &reply) {
            self.env.0.counters.echo_replies += 1;
        }
    }

    /// RFC 1122 §3.2.2.1 / §4.1.3.1: tell the sender nobody takes this.
    pub(super) fn send_unreachable(&mut self, peer: Peer, reason: Icmpv4DstUnreachable, packet: &[u8]) {
        if !self.icmp_error_allowed() {
            return self.drop(DropReason::IcmpSuppressed);
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

    pub(super) fn icmp_error_allowed(&mut self) -> bool {
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

    pub(super) fn queue_icmp(&mut self, peer: Peer, repr: &Icmpv4Repr<'_>) -> bool {
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
}

/// A plausible unicast host address.
pub(super) fn is_unicast(ip: Ipv4Addr) -> bool {
    !(ip.is_unspecified() || ip.is_broadcast() || ip.is_multicast() || ip.octets()[0] >= 240)
}
