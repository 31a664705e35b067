//! Prebuilt UDP frames for the packet-rate benchmark (`nic`): Ethernet,
//! IPv4 and UDP with correct checksums, built with `smoltcp::wire`, the
//! shortest an Ethernet carries unless asked for longer.

use std::net::SocketAddrV4;

use fairway_stack::ETHERNET_HEADER_LEN;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    EthernetAddress, EthernetFrame, EthernetProtocol, IpProtocol, Ipv4Packet, Ipv4Repr, UdpPacket, UdpRepr,
};

const IPV4_HEADER_LEN: usize = 20;
const UDP_HEADER_LEN: usize = 8;

/// Ethernet, IPv4 and UDP headers: the shortest frame [`UdpFrame`] builds.
pub const HEADERS_LEN: usize = ETHERNET_HEADER_LEN + IPV4_HEADER_LEN + UDP_HEADER_LEN;

/// The shortest Ethernet frame without its 4-byte FCS: a "64-byte frame"
/// on the wire, the size packet rates are quoted for.
pub const MIN_FRAME_LEN: usize = 60;

/// One UDP datagram in its IPv4 and Ethernet envelope.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UdpFrame {
    /// Ethernet source.
    pub src_mac: [u8; 6],
    /// Ethernet destination.
    pub dst_mac: [u8; 6],
    /// IPv4 source address and UDP source port.
    pub src: SocketAddrV4,
    /// IPv4 destination address and UDP destination port.
    pub dst: SocketAddrV4,
    /// The frame's length without FCS; the payload (zeros) fills what the
    /// headers leave. Never less than [`HEADERS_LEN`].
    pub len: usize,
}

impl UdpFrame {
    /// A [`MIN_FRAME_LEN`]-byte frame from `src` to `dst`.
    #[must_use]
    pub fn new(src_mac: [u8; 6], dst_mac: [u8; 6], src: SocketAddrV4, dst: SocketAddrV4) -> UdpFrame {
        UdpFrame { src_mac, dst_mac, src, dst, len: MIN_FRAME_LEN }
    }

    /// The whole Ethernet frame.
    #[must_use]
    pub fn build(&self) -> Vec<u8> {
        let len = self.len.max(HEADERS_LEN);
        let payload_len = len - HEADERS_LEN;
        let udp = UdpRepr { src_port: self.src.port(), dst_port: self.dst.port() };
        let ip = Ipv4Repr {
            src_addr: *self.src.ip(),
            dst_addr: *self.dst.ip(),
            next_header: IpProtocol::Udp,
            payload_len: UDP_HEADER_LEN + payload_len,
            hop_limit: 64,
        };
        let mut out = vec![0; len];
        let mut eth = EthernetFrame::new_unchecked(&mut out[..]);
        eth.set_dst_addr(EthernetAddress(self.dst_mac));
        eth.set_src_addr(EthernetAddress(self.src_mac));
        eth.set_ethertype(EthernetProtocol::Ipv4);
        let caps = ChecksumCapabilities::default();
        let udp_start = ETHERNET_HEADER_LEN + IPV4_HEADER_LEN;
        ip.emit(&mut Ipv4Packet::new_unchecked(&mut out[ETHERNET_HEADER_LEN..udp_start]), &caps);
        udp.emit(
            &mut UdpPacket::new_unchecked(&mut out[udp_start..]),
            &(*self.src.ip()).into(),
            &(*self.dst.ip()).into(),
            payload_len,
            |payload| payload.fill(0),
            &caps,
        );
        out
    }
}

/// `count` frames like `template`, one per flow: source ports count up
/// from the template's, wrapping past 65535 to 1 (port 0 means "none").
#[must_use]
pub fn flows(template: &UdpFrame, count: usize) -> Vec<Vec<u8>> {
    let first = u32::from(template.src.port().max(1));
    (0..count as u32)
        .map(|i| {
            let port = ((first - 1 + i) % u32::from(u16::MAX)) as u16 + 1;
            let src = SocketAddrV4::new(*template.src.ip(), port);
            UdpFrame { src, ..*template }.build()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use smoltcp::wire::IpAddress;

    use super::*;

    fn template() -> UdpFrame {
        UdpFrame::new(
            [2, 0, 0, 0, 0, 0x63],
            [2, 0, 10, 77, 0, 1],
            SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 99), 40_000),
            SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 1), 9),
        )
    }

    /// Parses `frame` with checksums verified: (source port, payload length).
    #[track_caller]
    fn parse(frame: &[u8], t: &UdpFrame) -> (u16, usize) {
        let eth = EthernetFrame::new_checked(frame).unwrap();
        assert_eq!(eth.dst_addr(), EthernetAddress(t.dst_mac));
        assert_eq!(eth.src_addr(), EthernetAddress(t.src_mac));
        assert_eq!(eth.ethertype(), EthernetProtocol::Ipv4);
        let caps = ChecksumCapabilities::default();
        let ip_packet = Ipv4Packet::new_checked(eth.payload()).unwrap();
        let ip = Ipv4Repr::parse(&ip_packet, &caps).unwrap();
        assert_eq!((ip.src_addr, ip.dst_addr, ip.next_header), (*t.src.ip(), *t.dst.ip(), IpProtocol::Udp));
        let udp_packet = UdpPacket::new_checked(ip_packet.payload()).unwrap();
        let (src, dst) = (IpAddress::from(ip.src_addr), IpAddress::from(ip.dst_addr));
        let udp = UdpRepr::parse(&udp_packet, &src, &dst, &caps).unwrap();
        assert_eq!(udp.dst_port, t.dst.port());
        (udp.src_port, udp_packet.payload().len())
    }

    #[test]
    fn a_minimum_frame_is_60_bytes_with_valid_checksums() {
        let t = template();
        let frame = t.build();
        assert_eq!(frame.len(), MIN_FRAME_LEN);
        assert_eq!(parse(&frame, &t), (40_000, MIN_FRAME_LEN - HEADERS_LEN));
    }

    #[test]
    fn longer_frames_carry_a_longer_payload_and_shorter_ones_are_headers_only() {
        let t = UdpFrame { len: 1514, ..template() };
        assert_eq!(parse(&t.build(), &t), (40_000, 1514 - HEADERS_LEN));
        let t = UdpFrame { len: 10, ..template() };
        assert_eq!(t.build().len(), HEADERS_LEN);
        assert_eq!(parse(&t.build(), &t), (40_000, 0));
    }

    #[test]
    fn flows_differ_only_in_the_source_port_and_wrap_past_65535() {
        let t = UdpFrame { src: SocketAddrV4::new(*template().src.ip(), 65_534), ..template() };
        let frames = flows(&t, 4);
        let ports: Vec<u16> = frames.iter().map(|f| parse(f, &t).0).collect();
        assert_eq!(ports, [65_534, 65_535, 1, 2]);
        assert!(flows(&t, 0).is_empty());
        let from_zero = UdpFrame { src: SocketAddrV4::new(*t.src.ip(), 0), ..t };
        assert_eq!(parse(&flows(&from_zero, 1)[0], &from_zero).0, 1);
    }

    #[test]
    fn the_stack_drops_them_as_udp_to_a_closed_port() {
        use fairway_stack::time::Instant;
        use fairway_stack::{Config, DropReason, Shard};
        let t = template();
        let mut shard = Shard::new(Config::new(t.dst_mac, *t.dst.ip(), 24));
        for frame in flows(&t, 100) {
            shard.handle_frame(Instant::from_micros(1), &frame);
        }
        assert_eq!(shard.counters().frames_in, 100);
        assert_eq!(shard.counters().dropped(DropReason::UdpNoPort), 100, "{}", shard.counters());
    }
}
