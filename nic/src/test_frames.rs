//! Frames for the nic tests, one set for all of them: ARP replies and ICMP
//! echo messages built with smoltcp's emitters, and what a frame a test
//! received holds. The TAP and pcap unit tests use it as a module of the
//! crate; the AF_XDP integration tests include this file by path.

#![allow(dead_code, reason = "each test binary uses part of it")]

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol, EthernetRepr, Icmpv4Packet,
    Icmpv4Repr, IpProtocol, Ipv4Address, Ipv4Packet, Ipv4Repr,
};

/// One end of an exchange: its MAC and IPv4 address.
pub type Endpoint = (EthernetAddress, Ipv4Address);

/// An ARP reply from `from`, telling `to` where `from`'s address is.
pub fn arp_reply(from: Endpoint, to: Endpoint) -> Vec<u8> {
    let eth = EthernetRepr { src_addr: from.0, dst_addr: to.0, ethertype: EthernetProtocol::Arp };
    let arp = ArpRepr::EthernetIpv4 {
        operation: ArpOperation::Reply,
        source_hardware_addr: from.0,
        source_protocol_addr: from.1,
        target_hardware_addr: to.0,
        target_protocol_addr: to.1,
    };
    let mut frame = vec![0; eth.buffer_len() + arp.buffer_len()];
    let mut view = EthernetFrame::new_unchecked(&mut frame[..]);
    eth.emit(&mut view);
    arp.emit(&mut ArpPacket::new_unchecked(view.payload_mut()));
    frame
}

/// `message` (an echo request or reply) from `from` to `to`, in an IPv4
/// packet in an Ethernet frame, checksums filled in.
pub fn icmp(from: Endpoint, to: Endpoint, message: &Icmpv4Repr<'_>) -> Vec<u8> {
    let caps = ChecksumCapabilities::default();
    let ip = Ipv4Repr {
        src_addr: from.1,
        dst_addr: to.1,
        next_header: IpProtocol::Icmp,
        payload_len: message.buffer_len(),
        hop_limit: 64,
    };
    let eth = EthernetRepr { src_addr: from.0, dst_addr: to.0, ethertype: EthernetProtocol::Ipv4 };
    let mut frame = vec![0; eth.buffer_len() + ip.buffer_len() + message.buffer_len()];
    let mut view = EthernetFrame::new_unchecked(&mut frame[..]);
    eth.emit(&mut view);
    let mut packet = Ipv4Packet::new_unchecked(view.payload_mut());
    ip.emit(&mut packet, &caps);
    message.emit(&mut Icmpv4Packet::new_unchecked(packet.payload_mut()), &caps);
    frame
}

/// What a received frame holds, as far as the tests care.
#[derive(Debug, PartialEq)]
pub enum Seen {
    /// An ARP request.
    ArpRequest { dst: EthernetAddress, sender_mac: EthernetAddress, sender_ip: Ipv4Address, target_ip: Ipv4Address },
    /// An ICMP echo request.
    EchoRequest {
        src: EthernetAddress,
        dst: EthernetAddress,
        ip_src: Ipv4Address,
        ip_dst: Ipv4Address,
        ident: u16,
        seq_no: u16,
        data: Vec<u8>,
    },
    /// A UDP datagram.
    Udp { ip_dst: Ipv4Address },
    /// Anything else, or nothing that parses.
    Other,
}

/// Parses `frame` with smoltcp's views; never panics.
pub fn classify(frame: &[u8]) -> Seen {
    let caps = ChecksumCapabilities::default();
    let Ok(eth) = EthernetFrame::new_checked(frame) else { return Seen::Other };
    match eth.ethertype() {
        EthernetProtocol::Arp => {
            let Ok(packet) = ArpPacket::new_checked(eth.payload()) else { return Seen::Other };
            match ArpRepr::parse(&packet) {
                Ok(ArpRepr::EthernetIpv4 {
                    operation: ArpOperation::Request,
                    source_hardware_addr,
                    source_protocol_addr,
                    target_protocol_addr,
                    ..
                }) => Seen::ArpRequest {
                    dst: eth.dst_addr(),
                    sender_mac: source_hardware_addr,
                    sender_ip: source_protocol_addr,
                    target_ip: target_protocol_addr,
                },
                _ => Seen::Other,
            }
        }
        EthernetProtocol::Ipv4 => {
            let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else { return Seen::Other };
            let Ok(ip_repr) = Ipv4Repr::parse(&ip, &caps) else { return Seen::Other };
            match ip_repr.next_header {
                IpProtocol::Udp => Seen::Udp { ip_dst: ip_repr.dst_addr },
                IpProtocol::Icmp => {
                    let Ok(message) = Icmpv4Packet::new_checked(ip.payload()) else { return Seen::Other };
                    match Icmpv4Repr::parse(&message, &caps) {
                        Ok(Icmpv4Repr::EchoRequest { ident, seq_no, data }) => Seen::EchoRequest {
                            src: eth.src_addr(),
                            dst: eth.dst_addr(),
                            ip_src: ip_repr.src_addr,
                            ip_dst: ip_repr.dst_addr,
                            ident,
                            seq_no,
                            data: data.to_vec(),
                        },
                        _ => Seen::Other,
                    }
                }
                _ => Seen::Other,
            }
        }
        _ => Seen::Other,
    }
}
