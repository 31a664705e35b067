//! Undoing the sender's offloads, so that what leaves the emulator is what a
//! real wire would carry: complete checksums, and frames no longer than the
//! MTU.
//!
//! A veth hands the peer's frames over before any checksum or segmentation
//! work is done: a kernel TCP sender with TSO on (the veth default) passes
//! 64 KB "super-frames" whose TCP checksum holds only the pseudo-header
//! sum. The receive socket asks for a `virtio_net_hdr` in front of every
//! frame ([`VnetHeader`]), which says where the checksum is to be finished
//! and how the frame is to be cut; `fairway_stack::finish_checksum` and [`Segmenter`]
//! then do in user space what the sending NIC would have done in hardware.

/// Bytes of the `virtio_net_hdr` (without `num_buffers`) a packet socket with
/// `PACKET_VNET_HDR` puts in front of every frame.
pub(crate) const VNET_HDR_LEN: usize = 10;

/// `VIRTIO_NET_HDR_F_NEEDS_CSUM`: the checksum at `csum_start + csum_offset`
/// holds the pseudo-header sum and still has to be finished.
const F_NEEDS_CSUM: u8 = 1;
/// `VIRTIO_NET_HDR_GSO_*`, with the ECN bit masked off.
const GSO_NONE: u8 = 0;
const GSO_TCPV4: u8 = 1;
const GSO_TCPV6: u8 = 4;
const GSO_UDP_L4: u8 = 5;
const GSO_ECN: u8 = 0x80;

const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;
const ETHERTYPE_VLAN: u16 = 0x8100;
const ETHERTYPE_QINQ: u16 = 0x88a8;
const PROTO_TCP: u8 = 6;
const PROTO_UDP: u8 = 17;

const TCP_FIN: u8 = 0x01;
const TCP_PSH: u8 = 0x08;
const TCP_CWR: u8 = 0x80;

/// The kernel's description of one received frame (`struct virtio_net_hdr`,
/// legacy layout: host byte order).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct VnetHeader {
    flags: u8,
    gso_type: u8,
    gso_size: u16,
    csum_start: u16,
    csum_offset: u16,
}

impl VnetHeader {
    pub(crate) fn parse(b: &[u8; VNET_HDR_LEN]) -> VnetHeader {
        let word = |i: usize| u16::from_ne_bytes([b[i], b[i + 1]]);
        VnetHeader { flags: b[0], gso_type: b[1], gso_size: word(4), csum_start: word(6), csum_offset: word(8) }
    }

    /// Where a partial checksum has to be finished: `(csum_start,
    /// csum_offset)`, both from the start of the frame.
    pub(crate) fn partial_checksum(&self) -> Option<(usize, usize)> {
        (self.flags & F_NEEDS_CSUM != 0).then_some((usize::from(self.csum_start), usize::from(self.csum_offset)))
    }

    /// Whether the frame is a super-frame to be cut into segments, and if
    /// so whether this module knows how: `Some(Ok(mss))` for TCP and UDP
    /// (`UDP_SEGMENT`) over IPv4 and IPv6, `Some(Err(()))` for anything
    /// else (e.g. UFO).
    pub(crate) fn gso(&self) -> Option<Result<usize, ()>> {
        match self.gso_type & !GSO_ECN {
            GSO_NONE => None,
            GSO_TCPV4 | GSO_TCPV6 | GSO_UDP_L4 if self.gso_size > 0 => Some(Ok(usize::from(self.gso_size))),
            _ => Some(Err(())),
        }
    }
}

/// Cuts one TCP or UDP super-frame into frames of at most `mss` payload
/// bytes, each with its own headers, lengths and checksums: what a NIC's
/// TSO (or the kernel's software GSO) would have put on the wire.
///
/// TCP segments get consecutive sequence numbers; FIN and PSH stay on the
/// last segment only and CWR on the first only (RFC 3168 §6.1.2); IPv4
/// identifications count up from the super-frame's, as Linux's TSO does.
/// IPv4 options and TCP options are copied to every segment. One VLAN tag
/// is allowed; IPv6 extension headers are not.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Segmenter {
    /// Offsets of the IP header, the transport header, and the payload.
    l3: usize,
    l4: usize,
    payload: usize,
    ipv4: bool,
    tcp: bool,
    mss: usize,
}

impl Segmenter {
    /// Reads the headers of `frame`; `None` if they are not Ethernet (+ one
    /// VLAN tag) + IPv4/IPv6 + TCP/UDP, or if there is no payload to cut.
    pub(crate) fn new(frame: &[u8], mss: usize) -> Option<Segmenter> {
        let be16 = |i: usize| frame.get(i..i + 2).map(|b| u16::from_be_bytes([b[0], b[1]]));
        let (l3, ethertype) = match be16(12)? {
            ETHERTYPE_VLAN | ETHERTYPE_QINQ => (18, be16(16)?),
            ethertype => (14, ethertype),
        };
        let (ipv4, l4, proto) = match ethertype {
            ETHERTYPE_IPV4 => {
                let ihl = usize::from(frame.get(l3)? & 0x0f) * 4;
                (ihl >= 20).then_some(())?;
                (true, l3 + ihl, *frame.get(l3 + 9)?)
            }
            ETHERTYPE_IPV6 => (false, l3 + 40, *frame.get(l3 + 6)?),
            _ => return None,
        };
        let (tcp, payload) = match proto {
            PROTO_TCP => {
                let doff = usize::from(frame.get(l4 + 12)? >> 4) * 4;
                (doff >= 20).then_some(())?;
                (true, l4 + doff)
            }
            PROTO_UDP => (false, l4 + 8),
            _ => return None,
        };
        (mss > 0 && frame.len() > payload).then_some(Segmenter { l3, l4, payload, ipv4, tcp, mss })
    }

    /// How many frames `frame` is cut into.
    pub(crate) fn count(&self, frame: &[u8]) -> usize {
        (frame.len() - self.payload).div_ceil(self.mss)
    }

    /// The longest frame [`write`](Segmenter::write) produces.
    pub(crate) fn max_len(&self) -> usize {
        self.payload + self.mss
    }

    /// Writes segment `index` (below [`count`](Segmenter::count)) of `frame`
    /// into `out`, which must hold [`max_len`](Segmenter::max_len) bytes, and
    /// returns its length.
    pub(crate) fn write(&self, frame: &[u8], index: usize, out: &mut [u8]) -> usize {
        let start = self.payload + index * self.mss;
        let end = (start + self.mss).min(frame.len());
        let len = self.payload + (end - start);
        out[..self.payload].copy_from_slice(&frame[..self.payload]);
        out[self.payload..len].copy_from_slice(&frame[start..end]);
        let out = &mut out[..len];
        let put16 = |out: &mut [u8], at: usize, v: u16| out[at..at + 2].copy_from_slice(&v.to_be_bytes());
        let get16 = |out: &[u8], at: usize| u16::from_be_bytes([out[at], out[at + 1]]);

        let l3 = self.l3;
        let l4_len = len - self.l4;
        if self.ipv4 {
            put16(out, l3 + 2, (len - l3) as u16);
            let id = get16(out, l3 + 4).wrapping_add(index as u16);
            put16(out, l3 + 4, id);
            put16(out, l3 + 10, 0);
            let sum = !fold(sum_words(&out[l3..self.l4], 0));
            put16(out, l3 + 10, sum);
        } else {
            put16(out, l3 + 4, (len - l3 - 40) as u16);
        }

        let check_at = if self.tcp {
            let seq = u32::from_be_bytes(out[self.l4 + 4..self.l4 + 8].try_into().expect("4 bytes"));
            let seq = seq.wrapping_add((index * self.mss) as u32);
            out[self.l4 + 4..self.l4 + 8].copy_from_slice(&seq.to_be_bytes());
            let mut flags = out[self.l4 + 13];
            if end != frame.len() {
                flags &= !(TCP_FIN | TCP_PSH);
            }
            if index > 0 {
                flags &= !TCP_CWR;
            }
            out[self.l4 + 13] = flags;
            self.l4 + 16
        } else {
            put16(out, self.l4 + 4, l4_len as u16);
            self.l4 + 6
        };
        put16(out, check_at, 0);
        let proto = if self.tcp { PROTO_TCP } else { PROTO_UDP };
        // RFC 793 §3.1, RFC 8200 §8.1: the pseudo-header.
        let pseudo = if self.ipv4 {
            sum_words(&out[l3 + 12..l3 + 20], u64::from(proto) + l4_len as u64)
        } else {
            sum_words(&out[l3 + 8..l3 + 40], u64::from(proto) + l4_len as u64)
        };
        let sum = !fold(sum_words(&out[self.l4..], pseudo));
        put16(out, check_at, if sum == 0 && !self.tcp { 0xffff } else { sum });
        len
    }
}

/// Adds `data` as big-endian 16-bit words (a last odd byte padded with
/// zero) to `acc`, without folding: a `u64` holds the sum of any frame.
fn sum_words(data: &[u8], mut acc: u64) -> u64 {
    let mut words = data.chunks_exact(2);
    for w in &mut words {
        acc += u64::from(u16::from_be_bytes([w[0], w[1]]));
    }
    if let [last] = words.remainder() {
        acc += u64::from(*last) << 8;
    }
    acc
}

/// Folds a sum into 16 bits, end-around carry included (RFC 1071).
fn fold(mut acc: u64) -> u16 {
    while acc > 0xffff {
        acc = (acc & 0xffff) + (acc >> 16);
    }
    acc as u16
}

#[cfg(test)]
mod tests {
    use smoltcp::wire::{EthernetFrame, IpAddress, Ipv4Packet, TcpPacket, UdpPacket};

    use super::*;

    const MAC: [u8; 12] = [2, 0, 0, 0, 0, 2, 2, 0, 0, 0, 0, 1];

    /// An Ethernet + IPv4 + TCP (12 bytes of options) super-frame with
    /// `payload` bytes, FIN|PSH|CWR|ACK set, the TCP checksum left partial
    /// (the pseudo-header sum, as a TSO sender leaves it).
    fn tcp4_superframe(payload: usize) -> Vec<u8> {
        let mut f = MAC.to_vec();
        f.extend_from_slice(&ETHERTYPE_IPV4.to_be_bytes());
        let ip_len = (20 + 32 + payload) as u16;
        f.extend_from_slice(&[0x45, 0, (ip_len >> 8) as u8, ip_len as u8, 0x12, 0x34, 0x40, 0, 64, PROTO_TCP, 0, 0]);
        f.extend_from_slice(&[10, 77, 0, 10, 10, 77, 0, 1]);
        f.extend_from_slice(&[0x9c, 0x40, 0, 80, 0xff, 0xff, 0xfc, 0x00, 0, 0, 0, 1, 0x80, 0x80 | 0x10 | 0x08 | 0x01]);
        f.extend_from_slice(&[1, 0, 0, 0, 0, 0, 1, 1, 8, 10, 0, 0, 0, 1, 0, 0, 0, 2]);
        f.extend((0..payload).map(|i| (i * 7 + 3) as u8));
        let pseudo = fold(sum_words(&f[26..34], u64::from(PROTO_TCP) + (32 + payload) as u64));
        f[50..52].copy_from_slice(&pseudo.to_be_bytes());
        f
    }

    fn segments(frame: &[u8], mss: usize) -> Vec<Vec<u8>> {
        let seg = Segmenter::new(frame, mss).expect("a TCP/UDP frame");
        (0..seg.count(frame))
            .map(|i| {
                let mut out = vec![0; seg.max_len()];
                let len = seg.write(frame, i, &mut out);
                out.truncate(len);
                out
            })
            .collect()
    }

    #[test]
    fn partial_checksum_is_completed_as_the_kernel_would() {
        let mut frame = tcp4_superframe(333);
        assert!(fairway_stack::finish_checksum(&mut frame, 34, 16));
        let ip = Ipv4Packet::new_checked(&frame[14..]).unwrap();
        let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
        assert!(tcp.verify_checksum(&IpAddress::from(ip.src_addr()), &IpAddress::from(ip.dst_addr())));
        // A field past the end is refused.
        assert!(!fairway_stack::finish_checksum(&mut frame, 34, 400));
    }

    #[test]
    fn tcp_over_ipv4_is_cut_like_tso() {
        let frame = tcp4_superframe(3000);
        let segs = segments(&frame, 1448);
        assert_eq!(segs.iter().map(Vec::len).collect::<Vec<_>>(), [66 + 1448, 66 + 1448, 66 + 104]);
        let mut payload = Vec::new();
        for (i, seg) in segs.iter().enumerate() {
            let eth = EthernetFrame::new_checked(&seg[..]).unwrap();
            let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
            assert!(ip.verify_checksum());
            assert_eq!(usize::from(ip.total_len()), seg.len() - 14);
            assert_eq!(ip.ident(), 0x1234 + i as u16);
            let tcp = TcpPacket::new_checked(ip.payload()).unwrap();
            assert!(tcp.verify_checksum(&IpAddress::from(ip.src_addr()), &IpAddress::from(ip.dst_addr())));
            // Sequence numbers wrap: the super-frame starts 1024 below 2^32.
            assert_eq!(tcp.seq_number().0 as u32, 0xffff_fc00u32.wrapping_add(1448 * i as u32));
            assert_eq!(tcp.fin(), i == 2);
            assert_eq!(tcp.psh(), i == 2);
            assert_eq!(tcp.cwr(), i == 0);
            assert!(tcp.ack());
            assert_eq!(tcp.options(), &frame[54..66]);
            payload.extend_from_slice(tcp.payload());
        }
        assert_eq!(payload, &frame[66..]);
    }

    #[test]
    fn udp_segments_carry_their_own_length_and_checksum() {
        // IPv6 + UDP, 2500 bytes cut at 1000.
        let mut f = MAC.to_vec();
        f.extend_from_slice(&ETHERTYPE_IPV6.to_be_bytes());
        f.extend_from_slice(&[0x60, 0, 0, 0, 0x09, 0xcc, PROTO_UDP, 64]);
        f.extend((0..32).map(|i| i as u8 + 1));
        f.extend_from_slice(&[0x30, 0x39, 0x01, 0xbb, 0x09, 0xcc, 0, 0]);
        f.extend((0..2500).map(|i| (i % 251) as u8));
        let segs = segments(&f, 1000);
        assert_eq!(segs.len(), 3);
        for seg in &segs {
            let udp_len = seg.len() - 54;
            assert_eq!(usize::from(u16::from_be_bytes([seg[18], seg[19]])), udp_len, "IPv6 payload length");
            let udp = UdpPacket::new_checked(&seg[54..]).unwrap();
            assert_eq!(usize::from(udp.len()), udp_len);
            // Reference: the whole pseudo-header and datagram sum to 0xffff.
            let sum = sum_words(&seg[22..54], u64::from(PROTO_UDP) + udp_len as u64);
            assert_eq!(fold(sum_words(&seg[54..], sum)), 0xffff);
        }
    }

    #[test]
    fn vlan_tags_are_skipped_and_other_frames_refused() {
        let plain = tcp4_superframe(2000);
        let mut tagged = plain[..12].to_vec();
        tagged.extend_from_slice(&[0x81, 0x00, 0x00, 0x07]);
        tagged.extend_from_slice(&plain[12..]);
        let segs = segments(&tagged, 1000);
        assert_eq!(segs.len(), 2);
        assert_eq!(&segs[1][..16], &tagged[..16]);
        let ip = Ipv4Packet::new_checked(&segs[1][18..]).unwrap();
        assert!(ip.verify_checksum());

        let mut arp = plain.clone();
        arp[12..14].copy_from_slice(&0x0806u16.to_be_bytes());
        assert_eq!(Segmenter::new(&arp, 1000), None);
        let mut icmp = plain.clone();
        icmp[23] = 1;
        assert_eq!(Segmenter::new(&icmp, 1000), None);
        assert_eq!(Segmenter::new(&plain[..66], 1000), None, "no payload");
        assert_eq!(Segmenter::new(&plain[..40], 1000), None, "truncated headers");
    }

    #[test]
    fn vnet_header_fields() {
        let mut raw = [0u8; VNET_HDR_LEN];
        raw[0] = F_NEEDS_CSUM;
        raw[1] = GSO_TCPV4 | GSO_ECN;
        raw[4..6].copy_from_slice(&1448u16.to_ne_bytes());
        raw[6..8].copy_from_slice(&34u16.to_ne_bytes());
        raw[8..10].copy_from_slice(&16u16.to_ne_bytes());
        let h = VnetHeader::parse(&raw);
        assert_eq!(h.partial_checksum(), Some((34, 16)));
        assert_eq!(h.gso(), Some(Ok(1448)));
        raw[1] = 3; // UFO
        assert_eq!(VnetHeader::parse(&raw).gso(), Some(Err(())));
        assert_eq!(VnetHeader::parse(&[0; VNET_HDR_LEN]).gso(), None);
        assert_eq!(VnetHeader::parse(&[0; VNET_HDR_LEN]).partial_checksum(), None);
    }
}
