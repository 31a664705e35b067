//! Frame layout helpers over `smoltcp::wire`: the parsers and emitters are
//! smoltcp's; this module only fixes how Fairway lays frames out (no IP
//! options, DF set, TTL 64) and puts the fast checksum in place.

use core::net::{Ipv4Addr, Ipv6Addr};

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    EthernetAddress, EthernetFrame, EthernetProtocol, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr,
    TcpOption, TcpPacket,
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
/// Bytes of an IPv6 header (extension headers are headers of their own).
pub const IPV6_HEADER_LEN: usize = 40;
/// The hop limit Neighbor Discovery sends with and requires (RFC 4861 §6.1).
pub const NDP_HOP_LIMIT: u8 = 255;
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

/// Writes an IPv6 header at the start of `packet` for `payload_len` bytes
/// of payload (no extension headers).
pub(crate) fn emit_ipv6(
    packet: &mut [u8],
    src: Ipv6Addr,
    dst: Ipv6Addr,
    protocol: IpProtocol,
    payload_len: usize,
    hop_limit: u8,
) {
    let repr = Ipv6Repr { src_addr: src, dst_addr: dst, next_header: protocol, payload_len, hop_limit };
    repr.emit(&mut Ipv6Packet::new_unchecked(&mut packet[..IPV6_HEADER_LEN]));
}

/// The Ethernet address an IPv6 multicast group maps to: 33:33 and the
/// group's last 32 bits (RFC 2464 §7).
pub fn ipv6_multicast_mac(group: Ipv6Addr) -> [u8; 6] {
    let o = group.octets();
    [0x33, 0x33, o[12], o[13], o[14], o[15]]
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

/// The most SACK blocks a segment carries: 4 fit in the 40 option bytes,
/// 3 beside a timestamp (RFC 2018 §3).
pub const MAX_SACK_BLOCKS: usize = 4;

/// The header fields of a segment we send.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct TcpHeader {
    pub src_port: u16,
    pub dst_port: u16,
    pub seq: SeqNumber,
    pub ack: Option<SeqNumber>,
    pub flags: Flags,
    pub window: u16,
    /// MSS option (SYN only).
    pub mss: Option<u16>,
    /// Window-scale option (SYN only).
    pub wscale: Option<u8>,
    /// SACK-permitted option (SYN only).
    pub sack_permitted: bool,
    /// Timestamps option: (TSval, TSecr).
    pub timestamp: Option<(u32, u32)>,
    /// SACK blocks, the first `sack_len` used.
    pub sack: [(u32, u32); MAX_SACK_BLOCKS],
    pub sack_len: u8,
}

impl TcpHeader {
    /// Bytes of options, padded to a multiple of 4.
    fn options_len(&self) -> usize {
        let mut len = 0;
        if self.mss.is_some() {
            len += 4;
        }
        if self.sack_permitted || self.timestamp.is_some() {
            // SACK-permitted + timestamps share 12 bytes (or NOP NOP + one).
            len += match (self.sack_permitted, self.timestamp.is_some()) {
                (true, true) => 12,
                (true, false) => 4,
                (false, _) => 12,
            };
        }
        if self.wscale.is_some() {
            len += 4;
        }
        if self.sack_len > 0 {
            len += 4 + 8 * self.sack_len as usize;
        }
        len
    }

    /// Writes the header at the start of `segment` (checksum zero); returns its
    /// length. Fields go through smoltcp's `TcpPacket` setters and options
    /// through its `TcpOption` emitter, laid out as Linux does (each option
    /// 4-byte aligned with NOPs).
    pub fn emit(&self, segment: &mut [u8]) -> usize {
        let len = TCP_HEADER_LEN + self.options_len();
        let mut packet = TcpPacket::new_unchecked(&mut segment[..len]);
        packet.set_src_port(self.src_port);
        packet.set_dst_port(self.dst_port);
        packet.set_seq_number(self.seq.into());
        packet.set_ack_number(self.ack.unwrap_or_default().into());
        packet.set_header_len(len as u8);
        packet.clear_flags();
        packet.set_syn(self.flags.syn);
        packet.set_fin(self.flags.fin);
        packet.set_rst(self.flags.rst);
        packet.set_psh(self.flags.psh);
        packet.set_ack(self.ack.is_some());
        packet.set_window_len(self.window);
        packet.set_urgent_at(0);
        packet.set_checksum(0);
        let mut options = packet.options_mut();
        if let Some(mss) = self.mss {
            options = TcpOption::MaxSegmentSize(mss).emit(options);
        }
        match (self.sack_permitted, self.timestamp) {
            (true, Some((tsval, tsecr))) => {
                options = TcpOption::SackPermitted.emit(options);
                options = TcpOption::TimeStamp { tsval, tsecr }.emit(options);
            }
            (true, None) => {
                options = TcpOption::NoOperation.emit(options);
                options = TcpOption::NoOperation.emit(options);
                options = TcpOption::SackPermitted.emit(options);
            }
            (false, Some((tsval, tsecr))) => {
                options = TcpOption::NoOperation.emit(options);
                options = TcpOption::NoOperation.emit(options);
                options = TcpOption::TimeStamp { tsval, tsecr }.emit(options);
            }
            (false, None) => {}
        }
        if let Some(shift) = self.wscale {
            options = TcpOption::NoOperation.emit(options);
            options = TcpOption::WindowScale(shift).emit(options);
        }
        if self.sack_len > 0 {
            options = TcpOption::NoOperation.emit(options);
            options = TcpOption::NoOperation.emit(options);
            // smoltcp's SackRange holds three blocks; the raw form carries
            // the fourth RFC 2018 allows without timestamps.
            let mut raw = [0u8; 8 * MAX_SACK_BLOCKS];
            let n = self.sack_len as usize;
            for (i, &(left, right)) in self.sack[..n].iter().enumerate() {
                raw[8 * i..8 * i + 4].copy_from_slice(&left.to_be_bytes());
                raw[8 * i + 4..8 * i + 8].copy_from_slice(&right.to_be_bytes());
            }
            options = TcpOption::Unknown { kind: SACK_OPTION_KIND, data: &raw[..8 * n] }.emit(options);
        }
        debug_assert!(options.is_empty(), "options length miscounted");
        len
    }
}

/// The SACK option's kind (RFC 2018).
const SACK_OPTION_KIND: u8 = 5;

/// The TCP pseudo-header sum of a `len`-byte segment from `src` to `dst`,
/// of either family (IPv4 addresses IPv4-mapped, as in a
/// [`FourTuple`](crate::flow_table::FourTuple)).
#[inline]
pub(crate) fn tcp_pseudo_header(src: Ipv6Addr, dst: Ipv6Addr, len: usize) -> checksum::Sum {
    match (src.to_ipv4_mapped(), dst.to_ipv4_mapped()) {
        (Some(src), Some(dst)) => checksum::pseudo_header(src, dst, IpProtocol::Tcp.into(), len as u16),
        _ => checksum::pseudo_header_v6(src, dst, IpProtocol::Tcp.into(), len as u32),
    }
}

/// Where the TCP header starts in one of our frames to `dst` (IPv4-mapped
/// for IPv4): after the IPv4 or the IPv6 header.
#[inline]
pub(crate) fn tcp_offset(dst: Ipv6Addr) -> usize {
    if dst.to_ipv4_mapped().is_some() { TCP_OFFSET } else { ETHERNET_HEADER_LEN + IPV6_HEADER_LEN }
}

/// Writes the Ethernet and IP headers of a frame carrying a `tcp_len`-byte
/// TCP segment from `src` to `dst`, of either family.
#[inline]
pub(crate) fn emit_tcp_headers(
    frame: &mut [u8],
    src_mac: [u8; 6],
    dst_mac: [u8; 6],
    src: Ipv6Addr,
    dst: Ipv6Addr,
    tcp_len: usize,
) {
    match (src.to_ipv4_mapped(), dst.to_ipv4_mapped()) {
        (Some(src), Some(dst)) => {
            emit_ipv4(&mut frame[ETHERNET_HEADER_LEN..], src, dst, IpProtocol::Tcp, tcp_len);
            emit_ethernet(frame, src_mac, dst_mac, EthernetProtocol::Ipv4);
        }
        _ => {
            emit_ipv6(&mut frame[ETHERNET_HEADER_LEN..], src, dst, IpProtocol::Tcp, tcp_len, DEFAULT_TTL);
            emit_ethernet(frame, src_mac, dst_mac, EthernetProtocol::Ipv6);
        }
    }
}

/// Where a device finishes the TCP checksum of `frame` that a shard with
/// [`Config::tx_checksum_offload`](crate::Config::tx_checksum_offload)
/// left partial: `(start, offset)`, the sum running from `start` bytes into
/// the frame to its end and the result going `offset` bytes after `start`
/// (the fields of Linux's `CHECKSUM_PARTIAL` and of AF_XDP's transmit
/// metadata). `None` for a frame that is not TCP over IPv4 or IPv6 (ARP,
/// ICMP, Neighbor Discovery: the shard completes those), or too short.
pub fn partial_checksum(frame: &[u8]) -> Option<(u16, u16)> {
    const CHECKSUM_OFFSET: u16 = 16;
    let ethertype = u16::from_be_bytes([*frame.get(12)?, *frame.get(13)?]);
    let start = match ethertype {
        0x0800 => {
            let ip = frame.get(ETHERNET_HEADER_LEN..)?;
            let header_len = usize::from(ip.first()? & 0x0f) * 4;
            (*ip.get(9)? == u8::from(IpProtocol::Tcp) && header_len >= 20).then_some(ETHERNET_HEADER_LEN + header_len)?
        }
        0x86dd => {
            let ip = frame.get(ETHERNET_HEADER_LEN..)?;
            (*ip.get(6)? == u8::from(IpProtocol::Tcp)).then_some(ETHERNET_HEADER_LEN + 40)?
        }
        _ => return None,
    };
    // The checksum field must lie in the frame.
    (frame.len() >= start + usize::from(CHECKSUM_OFFSET) + 2).then_some((start as u16, CHECKSUM_OFFSET))
}

/// Finishes in software the checksum a shard with
/// [`Config::tx_checksum_offload`](crate::Config::tx_checksum_offload) left
/// partial in `frame`, as a NIC would: sums from the start
/// [`partial_checksum`] gives to the frame's end (the field holds the
/// pseudo-header sum) and writes the complement. Returns `false`, leaving the
/// frame alone, for a frame with no partial checksum (not TCP). For devices
/// without the offload that still want the shard's partial frames (a
/// simulated network's NIC, tests).
pub fn finish_partial_checksum(frame: &mut [u8]) -> bool {
    partial_checksum(frame).is_some_and(|(start, offset)| finish_checksum(frame, start.into(), offset.into()))
}

/// Finishes a partial checksum as the kernel's `skb_checksum_help` does:
/// the ones'-complement sum of everything from `start` to the end of the
/// frame (the field `offset` bytes after `start` holds the pseudo-header
/// sum), complemented, a zero result sent as 0xffff (RFC 768: zero means
/// "no checksum" in UDP). Returns `false`, leaving the frame alone, if the
/// field lies outside the frame. What a NIC does for a frame marked
/// `CHECKSUM_PARTIAL` (a `virtio_net_hdr`'s `csum_start` and `csum_offset`).
pub fn finish_checksum(frame: &mut [u8], start: usize, offset: usize) -> bool {
    let field = start.saturating_add(offset);
    if field.saturating_add(2) > frame.len() {
        return false;
    }
    let sum = checksum::Sum::new().add_bytes(&frame[start..]).finish();
    frame[field..field + 2].copy_from_slice(&(if sum == 0 { 0xffff } else { sum }).to_be_bytes());
    true
}

/// Fills the checksum of the TCP segment `segment` (header and payload).
pub(crate) fn fill_tcp_checksum(segment: &mut [u8], src: Ipv6Addr, dst: Ipv6Addr) {
    let sum = tcp_pseudo_header(src, dst, segment.len()).add_bytes(segment).finish();
    TcpPacket::new_unchecked(segment).set_checksum(sum);
}

/// Puts `checksum` in the TCP segment's checksum field.
pub(crate) fn set_tcp_checksum(segment: &mut [u8], checksum: u16) {
    TcpPacket::new_unchecked(segment).set_checksum(checksum);
}

/// [`tcp_checksum_ok`] for IPv4, as the receive path calls it per segment.
#[inline]
pub(crate) fn tcp_checksum_ok_v4(segment: &[u8], src: Ipv4Addr, dst: Ipv4Addr) -> bool {
    checksum::pseudo_header(src, dst, IpProtocol::Tcp.into(), segment.len() as u16).add_bytes(segment).fold() == 0xffff
}

/// Whether the TCP segment's checksum (with the pseudo-header) is right.
pub(crate) fn tcp_checksum_ok(segment: &[u8], src: Ipv6Addr, dst: Ipv6Addr) -> bool {
    tcp_pseudo_header(src, dst, segment.len()).add_bytes(segment).fold() == 0xffff
}

/// Writes a whole TCP frame with an empty payload from `src` to `dst` (of
/// either family, IPv4 addresses IPv4-mapped); returns its length. With
/// `partial`, the checksum field holds only the pseudo-header sum, for the
/// device to finish ([`crate::Config::tx_checksum_offload`]).
pub(crate) fn emit_tcp_frame(
    frame: &mut [u8],
    (src_mac, dst_mac): ([u8; 6], [u8; 6]),
    src: Ipv6Addr,
    dst: Ipv6Addr,
    header: &TcpHeader,
    partial: bool,
) -> usize {
    let offset = tcp_offset(dst);
    let tcp_len = header.emit(&mut frame[offset..]);
    let segment = &mut frame[offset..offset + tcp_len];
    if partial {
        set_tcp_checksum(segment, tcp_pseudo_header(src, dst, tcp_len).fold());
    } else {
        fill_tcp_checksum(segment, src, dst);
    }
    emit_tcp_headers(frame, src_mac, dst_mac, src, dst, tcp_len);
    offset + tcp_len
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn v4(last: u8) -> Ipv6Addr {
        Ipv4Addr::new(10, 0, 0, last).to_ipv6_mapped()
    }

    /// A TCP frame with `payload`, from `src` to `dst`, its checksum
    /// complete or left partial.
    fn frame(src: Ipv6Addr, dst: Ipv6Addr, payload: &[u8], partial: bool) -> Vec<u8> {
        let mut frame = vec![0u8; 1600];
        let header = TcpHeader {
            src_port: 80,
            dst_port: 40000,
            seq: SeqNumber::new(7),
            ack: Some(SeqNumber::new(9)),
            window: 512,
            timestamp: Some((1, 2)),
            flags: Flags { psh: true, ..Flags::default() },
            ..TcpHeader::default()
        };
        let offset = tcp_offset(dst);
        let len = emit_tcp_frame(&mut frame, ([2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2]), src, dst, &header, partial);
        let header_len = len - offset;
        // Append the payload after the header and redo the checksum and the
        // IP header for the longer segment.
        frame[len..len + payload.len()].copy_from_slice(payload);
        let tcp_len = header_len + payload.len();
        let segment = &mut frame[offset..offset + tcp_len];
        if partial {
            set_tcp_checksum(segment, tcp_pseudo_header(src, dst, tcp_len).fold());
        } else {
            set_tcp_checksum(segment, 0);
            fill_tcp_checksum(segment, src, dst);
        }
        emit_tcp_headers(&mut frame, [2, 0, 0, 0, 0, 1], [2, 0, 0, 0, 0, 2], src, dst, tcp_len);
        frame.truncate(offset + tcp_len);
        frame
    }

    #[test]
    fn the_partial_checksum_is_found_in_tcp_frames_of_both_families_only() {
        let v4_frame = frame(v4(1), v4(2), b"hello", true);
        assert_eq!(partial_checksum(&v4_frame), Some((34, 16)));
        let (a, b) = ("2001:db8::1".parse().unwrap(), "2001:db8::2".parse().unwrap());
        let v6_frame = frame(a, b, b"hello", true);
        assert_eq!(partial_checksum(&v6_frame), Some((54, 16)));
        // Not TCP: an ICMP packet (protocol 1) in the same IPv4 frame.
        let mut icmp = v4_frame.clone();
        icmp[ETHERNET_HEADER_LEN + 9] = 1;
        assert_eq!(partial_checksum(&icmp), None);
        // ARP; and frames cut short before the checksum field.
        let mut arp = v4_frame.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(partial_checksum(&arp), None);
        assert_eq!(partial_checksum(&v4_frame[..34 + 17]), None);
        assert_eq!(partial_checksum(&v4_frame[..10]), None);
        assert_eq!(partial_checksum(&[]), None);
    }

    #[test]
    fn finishing_leaves_a_frame_without_a_partial_checksum_alone() {
        let mut arp = frame(v4(1), v4(2), b"", true);
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        let before = arp.clone();
        assert!(!finish_partial_checksum(&mut arp));
        assert_eq!(arp, before);
    }

    proptest! {
        /// A partial frame finished as a NIC does is byte for byte the frame
        /// the shard writes when it sums everything itself, for any payload
        /// (odd lengths too) and either family.
        #[test]
        fn a_finished_partial_frame_is_the_complete_frame(
            payload in proptest::collection::vec(any::<u8>(), 0..1400),
            six in any::<bool>(),
            host in 1u8..255,
        ) {
            let (src, dst) = if six {
                (format!("2001:db8::{host:x}").parse().unwrap(), "2001:db8::ffff".parse().unwrap())
            } else {
                (v4(host), v4(0))
            };
            let complete = frame(src, dst, &payload, false);
            let mut partial = frame(src, dst, &payload, true);
            prop_assert_ne!(&partial, &complete, "the partial field differs before finishing");
            prop_assert!(finish_partial_checksum(&mut partial));
            // A zero checksum goes out as 0xffff, as the kernel sends it.
            let offset = tcp_offset(dst);
            let mut expected = complete.clone();
            if expected[offset + 16..offset + 18] == [0, 0] {
                expected[offset + 16..offset + 18].copy_from_slice(&[0xff, 0xff]);
            }
            prop_assert_eq!(&partial, &expected);
            prop_assert!(tcp_checksum_ok(&partial[offset..], src, dst));
        }
    }
}
