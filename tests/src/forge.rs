//! Forged TCP frames: what an attacker on the simulated network sends, with
//! any addresses, flags and numbers it likes and correct IPv4 and TCP
//! checksums, built with `smoltcp::wire`.

use core::net::SocketAddrV4;

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    EthernetAddress, EthernetFrame, EthernetProtocol, IpProtocol, Ipv4Packet, Ipv4Repr, TcpControl, TcpPacket, TcpRepr,
    TcpSeqNumber, TcpTimestampRepr,
};

const ETHERNET_HEADER_LEN: usize = 14;
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
            sack_ranges: [None; 3],
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

        let syn = Segment { control: Control::Syn, mss: Some(1460), window_scale: Some(7), ..seg };
        let syn = Segment { sack_permitted: true, timestamp: Some((1, 0)), ack: None, payload: &[], ..syn };
        syn.write(&mut frame);
        let ip = Ipv4Packet::new_checked(&frame[14..]).expect("ipv4");
        let tcp = TcpPacket::new_checked(ip.payload()).expect("tcp");
        assert!(tcp.syn() && !tcp.ack());
        assert!(tcp.verify_checksum(&IpAddress::from(*src.ip()), &IpAddress::from(*dst.ip())));
    }
}
