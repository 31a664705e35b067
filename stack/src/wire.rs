//! Frame layout helpers over `smoltcp::wire`: the parsers and emitters are
//! smoltcp's; this module only fixes how Fairway lays frames out (no IP
//! options, DF set, TTL 64) and puts the fast checksum in place.

use core::net::Ipv4Addr;

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    EthernetAddress, EthernetFrame, EthernetProtocol, IpProtocol, Ipv4Packet, Ipv4Repr, TcpControl, TcpPacket, TcpRepr,
};

use crate::checksum;
use crate::tcp::seq::SeqNumber;

/// Bytes of an Ethernet II header.
pub const ETHERNET_HEADER_LEN: usize = 14;
/// Bytes of an IPv4 header without options.
pub const IPV4_HEADER_LEN: usize = 20;
/// Bytes of a TCP header without options.
pub const TCP_HEADER_LEN: usize = 20;
/// Where a TCP header starts in one of our frames.
pub const TCP_OFFSET: usize = ETHERNET_HEADER_LEN + IPV4_HEADER_LEN;
/// The broadcast MAC address.
pub const BROADCAST_MAC: [u8; 6] = [0xff; 6];
/// The TTL of packets we originate (RFC 1700's default, as Linux).
pub const DEFAULT_TTL: u8 = 64;

/// Writes an Ethernet header at the start of `frame`.
pub(crate) fn emit_ethernet(frame: &mut [u8], src: [u8; 6], dst: [u8; 6], ethertype: EthernetProtocol) {
    let mut eth = EthernetFrame::new_unchecked(frame);
    eth.set_src_addr(EthernetAddress(src));
    eth.set_dst_addr(EthernetAddress(dst));
    eth.set_ethertype(ethertype);
}

/// Writes an IPv4 header (no options, DF, TTL 64, header checksum filled) at
/// the start of `packet` for `payload_len` bytes of payload.
pub(crate) fn emit_ipv4(packet: &mut [u8], src: Ipv4Addr, dst: Ipv4Addr, protocol: IpProtocol, payload_len: usize) {
    let repr = Ipv4Repr { src_addr: src, dst_addr: dst, next_header: protocol, payload_len, hop_limit: DEFAULT_TTL };
    let mut ip = Ipv4Packet::new_unchecked(&mut packet[..IPV4_HEADER_LEN]);
    repr.emit(&mut ip, &ChecksumCapabilities::ignored());
    let sum = checksum::checksum(&packet[..IPV4_HEADER_LEN]);
    Ipv4Packet::new_unchecked(&mut packet[..IPV4_HEADER_LEN]).set_checksum(sum);
}

/// TCP flags as the stack uses them (smoltcp's `TcpControl` allows only one).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Flags {
    /// SYN.
    pub syn: bool,
    /// FIN.
    pub fin: bool,
    /// RST.
    pub rst: bool,
    /// PSH.
    pub psh: bool,
}

/// The header fields of a segment we send.
#[derive(Clone, Copy, Debug)]
pub(crate) struct TcpHeader {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: SeqNumber,
    pub ack: Option<SeqNumber>,
    pub flags: Flags,
    pub window: u16,
    pub mss: Option<u16>,
}

impl TcpHeader {
    fn repr(&self) -> TcpRepr<'static> {
        let control = if self.flags.syn {
            TcpControl::Syn
        } else if self.flags.rst {
            TcpControl::Rst
        } else if self.flags.fin {
            TcpControl::Fin
        } else if self.flags.psh {
            TcpControl::Psh
        } else {
            TcpControl::None
        };
        TcpRepr {
            src_port: self.src_port,
            dst_port: self.dst_port,
            control,
            seq_number: self.seq.into(),
            ack_number: self.ack.map(Into::into),
            window_len: self.window,
            window_scale: None,
            max_seg_size: self.mss,
            sack_permitted: false,
            sack_ranges: [None; 3],
            timestamp: None,
            payload: &[],
        }
    }

    /// Writes the header at the start of `segment` (checksum zero); returns its length.
    pub fn emit(&self, segment: &mut [u8]) -> usize {
        let repr = self.repr();
        let len = repr.header_len();
        let mut packet = TcpPacket::new_unchecked(&mut segment[..len]);
        repr.emit(
            &mut packet,
            &Ipv4Addr::UNSPECIFIED.into(),
            &Ipv4Addr::UNSPECIFIED.into(),
            &ChecksumCapabilities::ignored(),
        );
        // FIN and PSH together are common; smoltcp's control enum holds one.
        if self.flags.psh && (self.flags.fin || self.flags.syn) {
            packet.set_psh(true);
        }
        len
    }
}

/// Fills the checksum of the TCP segment `segment` (header and payload).
pub(crate) fn fill_tcp_checksum(segment: &mut [u8], src: Ipv4Addr, dst: Ipv4Addr) {
    let sum =
        checksum::pseudo_header(src, dst, IpProtocol::Tcp.into(), segment.len() as u16).add_bytes(segment).finish();
    TcpPacket::new_unchecked(segment).set_checksum(sum);
}

/// Whether the TCP segment's checksum (with the pseudo-header) is right.
pub(crate) fn tcp_checksum_ok(segment: &[u8], src: Ipv4Addr, dst: Ipv4Addr) -> bool {
    checksum::pseudo_header(src, dst, IpProtocol::Tcp.into(), segment.len() as u16).add_bytes(segment).fold() == 0xffff
}

/// Writes a whole TCP frame with an empty payload; returns its length.
#[allow(clippy::too_many_arguments)]
pub(crate) fn emit_tcp_frame(
    frame: &mut [u8],
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: Ipv4Addr,
    dst: Ipv4Addr,
    header: &TcpHeader,
) -> usize {
    emit_ethernet(frame, src_mac, dst_mac, EthernetProtocol::Ipv4);
    let tcp_len = header.emit(&mut frame[TCP_OFFSET..]);
    fill_tcp_checksum(&mut frame[TCP_OFFSET..TCP_OFFSET + tcp_len], src, dst);
    emit_ipv4(&mut frame[ETHERNET_HEADER_LEN..], src, dst, IpProtocol::Tcp, tcp_len);
    TCP_OFFSET + tcp_len
}
