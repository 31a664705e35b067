//! Forged TCP frames: what an attacker on the simulated network sends, with
//! any addresses, flags and numbers it likes and correct IPv4 and TCP
//! checksums, built with `smoltcp::wire`.

use core::net::SocketAddrV4;

use fairway_stack::ETHERNET_HEADER_LEN;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol, IpProtocol, Ipv4Packet,
    Ipv4Repr, TcpControl, TcpPacket, TcpRepr, TcpSeqNumber, TcpTimestampRepr,
};

const IPV4_HEADER_LEN: usize = 20;

/// The flags a forged segment carries besides ACK.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Control {
    /// None.
    None,
    /// PSH.
    Psh,
    /// SYN.
    Syn,
    /// FIN.
    Fin,
    /// RST.
    Rst,
}

/// A TCP segment to forge, with its Ethernet and IPv4 envelope.
#[derive(Clone, Copy, Debug)]
pub struct Segment<'a> {
    /// Ethernet source: the attacker's own address.
    pub src_mac: [u8; 6],
    /// Ethernet destination: the victim's address.
    pub dst_mac: [u8; 6],
    /// The (spoofed) source address and port.
    pub src: SocketAddrV4,
    /// The victim's address and port.
    pub dst: SocketAddrV4,
    /// SYN, FIN, RST, PSH or none.
    pub control: Control,
    /// The sequence number.
    pub seq: u32,
    /// The acknowledgment number; `None` leaves the ACK flag clear.
    pub ack: Option<u32>,
    /// The advertised window.
    pub window: u16,
    /// The MSS option.
    pub mss: Option<u16>,
    /// The window-scale option.
    pub window_scale: Option<u8>,
    /// The SACK-permitted option.
    pub sack_permitted: bool,
    /// The timestamps option (TSval, TSecr).
    pub timestamp: Option<(u32, u32)>,
    /// SACK blocks (left edge, right edge), up to three.
    pub sack: [Option<(u32, u32)>; 3],
    /// The payload.
    pub payload: &'a [u8],
}

impl<'a> Segment<'a> {
    /// A segment from `src` to `dst` with no flags, no options and no payload.
    pub fn new(src_mac: [u8; 6], dst_mac: [u8; 6], src: SocketAddrV4, dst: SocketAddrV4) -> Segment<'a> {
        Segment {
            src_mac,
            dst_mac,
            src,
            dst,
            control: Control::None,
            seq: 0,
            ack: None,
            window: 0,
            mss: None,
            window_scale: None,
            sack_permitted: false,
            timestamp: None,
            sack: [None; 3],
            payload: &[],
        }
    }

    /// Writes the whole Ethernet frame into `out` (replacing its contents).
    pub fn write(&self, out: &mut Vec<u8>) {
        let tcp = TcpRepr {
            src_port: self.src.port(),
            dst_port: self.dst.port(),
            control: match self.control {
                Control::None => TcpControl::None,
                Control::Psh => TcpControl::Psh,
                Control::Syn => TcpControl::Syn,
                Control::Fin => TcpControl::Fin,
                Control::Rst => TcpControl::Rst,
            },
            seq_number: TcpSeqNumber(self.seq as i32),
            ack_number: self.ack.map(|a| TcpSeqNumber(a as i32)),
            window_len: self.window,
            window_scale: self.window_scale,
            max_seg_size: self.mss,
            sack_permitted: self.sack_permitted,
            sack_ranges: self.sack,
            timestamp: self.timestamp.map(|(tsval, tsecr)| TcpTimestampRepr { tsval, tsecr }),
            payload: self.payload,
        };
        let ip = Ipv4Repr {
            src_addr: *self.src.ip(),
            dst_addr: *self.dst.ip(),
            next_header: IpProtocol::Tcp,
            payload_len: tcp.buffer_len(),
            hop_limit: 64,
        };
        let tcp_start = ETHERNET_HEADER_LEN + IPV4_HEADER_LEN;
        out.clear();
        out.resize(tcp_start + tcp.buffer_len(), 0);
        let mut eth = EthernetFrame::new_unchecked(&mut out[..]);
        eth.set_dst_addr(EthernetAddress(self.dst_mac));
        eth.set_src_addr(EthernetAddress(self.src_mac));
        eth.set_ethertype(EthernetProtocol::Ipv4);
        let caps = ChecksumCapabilities::default();
        ip.emit(&mut Ipv4Packet::new_unchecked(&mut out[ETHERNET_HEADER_LEN..tcp_start]), &caps);
        let mut packet = TcpPacket::new_unchecked(&mut out[tcp_start..]);
        tcp.emit(&mut packet, &ip.src_addr.into(), &ip.dst_addr.into(), &caps);
    }
}

/// The ARP reply a host at `ip` with `mac` gives to `request`, if `request`
/// is an ARP request for `ip`.
pub fn arp_reply(request: &[u8], mac: [u8; 6], ip: core::net::Ipv4Addr) -> Option<Vec<u8>> {
    let eth = EthernetFrame::new_checked(request).ok()?;
    if eth.ethertype() != EthernetProtocol::Arp {
        return None;
    }
    let ArpRepr::EthernetIpv4 {
        operation: ArpOperation::Request,
        source_hardware_addr,
        source_protocol_addr,
        target_protocol_addr,
        ..
    } = ArpRepr::parse(&ArpPacket::new_checked(eth.payload()).ok()?).ok()?
    else {
        return None;
    };
    if target_protocol_addr != ip {
        return None;
    }
    let reply = ArpRepr::EthernetIpv4 {
        operation: ArpOperation::Reply,
        source_hardware_addr: EthernetAddress(mac),
        source_protocol_addr: ip,
        target_hardware_addr: source_hardware_addr,
        target_protocol_addr: source_protocol_addr,
    };
    let mut out = vec![0u8; ETHERNET_HEADER_LEN + reply.buffer_len()];
    let mut frame = EthernetFrame::new_unchecked(&mut out[..]);
    frame.set_dst_addr(source_hardware_addr);
    frame.set_src_addr(EthernetAddress(mac));
    frame.set_ethertype(EthernetProtocol::Arp);
    reply.emit(&mut ArpPacket::new_unchecked(&mut out[ETHERNET_HEADER_LEN..]));
    Some(out)
}

/// Parses an Ethernet frame carrying a TCP segment (with `smoltcp::wire`,
/// checksums verified) into the segment that would forge it; `None` for
/// anything else or a bad checksum.
pub fn parse_tcp(frame: &[u8]) -> Option<Segment<'_>> {
    let eth = EthernetFrame::new_checked(frame).ok()?;
    if eth.ethertype() != EthernetProtocol::Ipv4 {
        return None;
    }
    let ip = Ipv4Packet::new_checked(&frame[ETHERNET_HEADER_LEN..]).ok()?;
    if ip.next_header() != IpProtocol::Tcp || !ip.verify_checksum() {
        return None;
    }
    let (src_ip, dst_ip) = (ip.src_addr(), ip.dst_addr());
    let tcp_start = ETHERNET_HEADER_LEN + usize::from(ip.header_len());
    let tcp_end = ETHERNET_HEADER_LEN + usize::from(ip.total_len());
    let packet = TcpPacket::new_checked(frame.get(tcp_start..tcp_end)?).ok()?;
    let tcp = TcpRepr::parse(&packet, &src_ip.into(), &dst_ip.into(), &ChecksumCapabilities::default()).ok()?;
    Some(Segment {
        src_mac: eth.src_addr().0,
        dst_mac: eth.dst_addr().0,
        src: SocketAddrV4::new(src_ip, tcp.src_port),
        dst: SocketAddrV4::new(dst_ip, tcp.dst_port),
        control: match tcp.control {
            TcpControl::Syn => Control::Syn,
            TcpControl::Fin => Control::Fin,
            TcpControl::Rst => Control::Rst,
            TcpControl::Psh => Control::Psh,
            TcpControl::None => Control::None,
        },
        seq: tcp.seq_number.0 as u32,
        ack: tcp.ack_number.map(|a| a.0 as u32),
        window: tcp.window_len,
        mss: tcp.max_seg_size,
        window_scale: tcp.window_scale,
        sack_permitted: tcp.sack_permitted,
        timestamp: tcp.timestamp.map(|t| (t.tsval, t.tsecr)),
        sack: tcp.sack_ranges,
        payload: tcp.payload,
    })
}

#[cfg(test)]
mod tests {
    use core::net::Ipv4Addr;

    use smoltcp::wire::{IpAddress, Ipv4Packet, TcpPacket};

    use super::*;

    #[test]
    fn a_forged_segment_parses_with_valid_checksums() {
        let src = SocketAddrV4::new(Ipv4Addr::new(10, 9, 8, 7), 4321);
        let dst = SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 80);
        let payload = [0xabu8; 100];
        let seg = Segment {
            control: Control::Psh,
            seq: 0xdead_beef,
            ack: Some(7),
            window: 1000,
            payload: &payload,
            ..Segment::new([2, 0, 0, 0, 0, 9], [2, 0, 10, 0, 0, 1], src, dst)
        };
        let mut frame = Vec::new();
        seg.write(&mut frame);
        let eth = EthernetFrame::new_checked(&frame[..]).expect("ethernet");
        assert_eq!(eth.src_addr(), EthernetAddress([2, 0, 0, 0, 0, 9]));
        let ip = Ipv4Packet::new_checked(eth.payload()).expect("ipv4");
        assert!(ip.verify_checksum());
        assert_eq!(ip.src_addr(), *src.ip());
        let tcp = TcpPacket::new_checked(ip.payload()).expect("tcp");
        assert!(tcp.verify_checksum(&IpAddress::from(*src.ip()), &IpAddress::from(*dst.ip())));
        assert_eq!((tcp.src_port(), tcp.dst_port()), (4321, 80));
        assert_eq!(tcp.seq_number(), TcpSeqNumber(0xdead_beef_u32 as i32));
        assert!(tcp.ack() && tcp.psh() && !tcp.syn());
        assert_eq!(tcp.payload(), &payload[..]);

        let parsed = parse_tcp(&frame).expect("parses back");
        assert_eq!((parsed.src, parsed.dst, parsed.seq, parsed.ack), (src, dst, 0xdead_beef, Some(7)));
        assert_eq!((parsed.control, parsed.window, parsed.payload), (Control::Psh, 1000, &payload[..]));

        let syn = Segment { control: Control::Syn, mss: Some(1460), window_scale: Some(7), ..seg };
        let syn = Segment { sack_permitted: true, timestamp: Some((1, 0)), ack: None, payload: &[], ..syn };
        syn.write(&mut frame);
        let ip = Ipv4Packet::new_checked(&frame[14..]).expect("ipv4");
        let tcp = TcpPacket::new_checked(ip.payload()).expect("tcp");
        assert!(tcp.syn() && !tcp.ack());
        assert!(tcp.verify_checksum(&IpAddress::from(*src.ip()), &IpAddress::from(*dst.ip())));
    }
}
