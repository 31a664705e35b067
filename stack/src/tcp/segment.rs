//! An incoming TCP segment, as the state machine sees it.

use smoltcp::wire::{TcpControl, TcpPacket, TcpRepr};

use crate::tcp::seq::SeqNumber;
use crate::wire::Flags;

/// A parsed, checksum-verified incoming segment.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Segment<'a> {
    /// Source port.
    pub src_port: u16,
    /// Destination port.
    pub dst_port: u16,
    /// SEG.SEQ.
    pub seq: SeqNumber,
    /// SEG.ACK, when the ACK flag is set.
    pub ack: Option<SeqNumber>,
    /// Control flags.
    pub flags: Flags,
    /// SEG.WND, unscaled.
    pub window: u16,
    /// The MSS option, if present.
    pub mss: Option<u16>,
    /// The window-scale option, if present (clamped to 14).
    pub wscale: Option<u8>,
    /// The SACK-permitted option.
    pub sack_permitted: bool,
    /// The timestamps option: (TSval, TSecr).
    pub timestamp: Option<(u32, u32)>,
    /// SACK blocks (smoltcp parses at most three).
    pub sack: [Option<(SeqNumber, SeqNumber)>; 3],
    /// The data.
    pub payload: &'a [u8],
    /// How many of the peer's segments this one stands for: 1, or more for
    /// a pure ACK the shard kept in place of the earlier pure ACKs of its
    /// receive batch that it supersedes (see `Shard`'s ACK coalescing).
    pub acks: u32,
}

impl<'a> Segment<'a> {
    /// SEG.LEN: the data plus one for SYN and one for FIN.
    pub fn len(&self) -> u32 {
        self.payload.len() as u32 + self.flags.syn as u32 + self.flags.fin as u32
    }

    /// Zero sequence space.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// From smoltcp's parsed representation.
    pub fn from_repr(repr: &TcpRepr<'a>, psh: bool) -> Segment<'a> {
        let flags = Flags {
            syn: repr.control == TcpControl::Syn,
            fin: repr.control == TcpControl::Fin,
            rst: repr.control == TcpControl::Rst,
            psh: psh || repr.control == TcpControl::Psh,
        };
        Segment {
            src_port: repr.src_port,
            dst_port: repr.dst_port,
            seq: repr.seq_number.into(),
            ack: repr.ack_number.map(Into::into),
            flags,
            window: repr.window_len,
            mss: repr.max_seg_size,
            wscale: repr.window_scale,
            sack_permitted: repr.sack_permitted,
            timestamp: repr.timestamp.map(|t| (t.tsval, t.tsecr)),
            sack: repr.sack_ranges.map(|r| r.map(|(a, b)| (SeqNumber::new(a), SeqNumber::new(b)))),
            payload: repr.payload,
            acks: 1,
        }
    }

    /// What most segments of an established connection are, parsed
    /// without the general option walk of `TcpRepr::parse` (header
    /// prediction, with the options laid out as RFC 7323 Appendix A
    /// suggests): an ACK, perhaps with PSH or FIN, whose options are either
    /// none or exactly NOP, NOP, timestamps. `None` for anything else (SYN,
    /// RST, URG, ECN or NS flags, other options, a zero port), which
    /// `TcpRepr::parse` takes; where this returns a segment it is the one
    /// that path would give.
    ///
    /// `packet` has passed `TcpPacket::new_checked`; its checksum is not
    /// looked at.
    pub fn parse_predicted(packet: &TcpPacket<&'a [u8]>) -> Option<Segment<'a>> {
        let plain_ack = packet.ack()
            && !(packet.syn() || packet.rst() || packet.urg() || packet.ece() || packet.cwr() || packet.ns());
        if !plain_ack || packet.src_port() == 0 || packet.dst_port() == 0 {
            return None;
        }
        let timestamp = match packet.options() {
            [] => None,
            [1, 1, 8, 10, v0, v1, v2, v3, e0, e1, e2, e3] => {
                Some((u32::from_be_bytes([*v0, *v1, *v2, *v3]), u32::from_be_bytes([*e0, *e1, *e2, *e3])))
            }
            _ => return None,
        };
        Some(Segment {
            src_port: packet.src_port(),
            dst_port: packet.dst_port(),
            seq: packet.seq_number().into(),
            ack: Some(packet.ack_number().into()),
            flags: Flags { syn: false, fin: packet.fin(), rst: false, psh: packet.psh() },
            window: packet.window_len(),
            mss: None,
            wscale: None,
            sack_permitted: false,
            timestamp,
            sack: [None; 3],
            payload: packet.payload(),
            acks: 1,
        })
    }

    /// An acknowledgment and nothing else: no data, SYN, FIN or RST.
    pub fn is_pure_ack(&self) -> bool {
        self.ack.is_some() && self.payload.is_empty() && !self.flags.syn && !self.flags.fin && !self.flags.rst
    }

    /// The segment without its payload (a pure ACK has none), to keep past
    /// the frame it came in.
    pub fn without_payload(&self) -> Segment<'static> {
        debug_assert!(self.payload.is_empty(), "a segment kept without its data");
        Segment {
            src_port: self.src_port,
            dst_port: self.dst_port,
            seq: self.seq,
            ack: self.ack,
            flags: self.flags,
            window: self.window,
            mss: self.mss,
            wscale: self.wscale,
            sack_permitted: self.sack_permitted,
            timestamp: self.timestamp,
            sack: self.sack,
            payload: &[],
            acks: self.acks,
        }
    }
}

#[cfg(test)]
mod tests {
    use proptest::prelude::*;
    use smoltcp::phy::ChecksumCapabilities;
    use smoltcp::wire::{IpAddress, Ipv4Address, TcpPacket, TcpRepr};

    use super::Segment;

    /// The prediction for `bytes`, or `None` where they are no TCP header
    /// at all (which `handle_tcp` drops before).
    fn predicted(bytes: &[u8]) -> Option<Segment<'_>> {
        Segment::parse_predicted(&TcpPacket::new_checked(bytes).ok()?)
    }

    /// What the general path makes of `bytes`: smoltcp's parse, or `None`
    /// where it refuses the segment.
    fn general(bytes: &[u8]) -> Option<Segment<'_>> {
        let packet = TcpPacket::new_checked(bytes).ok()?;
        let (src, dst) = (IpAddress::Ipv4(Ipv4Address::new(10, 0, 0, 1)), IpAddress::Ipv4(Ipv4Address::new(10, 0, 0, 2)));
        let repr = TcpRepr::parse(&packet, &src, &dst, &ChecksumCapabilities::ignored()).ok()?;
        Some(Segment::from_repr(&repr, packet.psh()))
    }

    /// A header of `header_len` bytes (options from `options`, padded with
    /// zeros, which end the option list) and then `payload`.
    fn segment(fields: [u8; 20], header_len: usize, options: &[u8], payload: &[u8]) -> Vec<u8> {
        let mut bytes = fields.to_vec();
        bytes[12] = (bytes[12] & 0x0f) | ((header_len / 4) as u8) << 4;
        bytes.resize(header_len.max(20), 0);
        let room = header_len.saturating_sub(20).min(options.len());
        bytes[20..20 + room].copy_from_slice(&options[..room]);
        bytes.extend_from_slice(payload);
        bytes
    }

    #[test]
    fn an_ack_with_timestamps_and_data_is_predicted() {
        let mut fields = [0u8; 20];
        fields[..4].copy_from_slice(&[0x1f, 0x90, 0xc3, 0x50]);
        fields[4..8].copy_from_slice(&1000u32.to_be_bytes());
        fields[8..12].copy_from_slice(&2000u32.to_be_bytes());
        fields[13] = 0x18; // ACK, PSH
        fields[14..16].copy_from_slice(&512u16.to_be_bytes());
        let options = [1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9];
        let bytes = segment(fields, 32, &options, b"hello");
        let seg = predicted(&bytes).expect("predicted");
        assert_eq!(Some(seg), general(&bytes));
        assert_eq!((seg.timestamp, seg.payload, seg.window), (Some((7, 9)), &b"hello"[..], 512));
        assert!(seg.flags.psh && !seg.flags.fin);
    }

    #[test]
    fn syn_rst_sack_and_other_layouts_take_the_general_path() {
        let mut fields = [0u8; 20];
        fields[..4].copy_from_slice(&[0, 80, 0, 81]);
        let ts = [1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9];
        for flags in [0x02, 0x12, 0x04, 0x14, 0x30, 0x50, 0x90, 0x08, 0x00] {
            fields[13] = flags; // SYN, SYN-ACK, RST, RST-ACK, ACK+URG, ECE, CWR, PSH alone, none
            assert_eq!(predicted(&segment(fields, 32, &ts, &[])), None, "flags {flags:#04x}");
        }
        fields[13] = 0x10;
        let sack = [1, 1, 5, 10, 0, 0, 0, 1, 0, 0, 0, 2];
        assert_eq!(predicted(&segment(fields, 32, &sack, &[])), None, "a SACK block");
        let ts_then_sack = [1, 1, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9, 1, 1, 5, 10, 0, 0, 0, 1, 0, 0, 0, 2];
        assert_eq!(predicted(&segment(fields, 44, &ts_then_sack, &[])), None, "timestamps and SACK");
        assert_eq!(predicted(&segment(fields, 24, &[2, 4, 5, 180], &[])), None, "an MSS option");
        let ended = [1, 0, 8, 10, 0, 0, 0, 7, 0, 0, 0, 9];
        assert_eq!(predicted(&segment(fields, 32, &ended, &[])), None, "an end of options first");
        assert_eq!(general(&segment(fields, 32, &ended, &[])).map(|s| s.timestamp), Some(None), "no timestamps then");
        fields[0..2].copy_from_slice(&[0, 0]);
        assert_eq!(predicted(&segment(fields, 20, &[], &[])), None, "source port 0");
        assert_eq!(general(&segment(fields, 20, &[], &[])), None, "which the general path refuses too");
        // The prediction's own layouts, for contrast: taken.
        fields[0..2].copy_from_slice(&[0, 80]);
        assert!(predicted(&segment(fields, 20, &[], &[])).is_some());
        fields[13] = 0x11; // FIN-ACK
        assert!(predicted(&segment(fields, 32, &ts, &[])).is_some_and(|s| s.flags.fin));
    }

    proptest! {
        /// Wherever the prediction gives a segment, it is the general path's.
        /// Headers are random, with the prediction's layout made likely: a
        /// header length of 20 or 32, the NOP, NOP, timestamps prefix, and
        /// flags from a small set.
        #[test]
        fn a_predicted_segment_is_the_one_the_general_parse_gives(
            mut fields in proptest::array::uniform20(any::<u8>()),
            header_len in prop_oneof![2 => Just(20usize), 4 => Just(32), 1 => Just(24), 1 => Just(44), 1 => Just(60)],
            timestamp_layout in proptest::bool::weighted(0.8),
            flags in prop_oneof![Just(0x10u8), Just(0x18), Just(0x11), Just(0x19), any::<u8>()],
            mut options in proptest::collection::vec(any::<u8>(), 40),
            payload in proptest::collection::vec(any::<u8>(), 0..64),
            truncate in prop_oneof![3 => Just(0usize), 1 => 1usize..4],
            reserved in proptest::bool::weighted(0.1),
        ) {
            fields[13] = flags;
            // Mostly clear reserved bits, so the prediction is tried often.
            fields[12] &= if reserved { 0x0f } else { 0 };
            if timestamp_layout {
                options[..4].copy_from_slice(&[1, 1, 8, 10]);
            }
            let mut bytes = segment(fields, header_len, &options, &payload);
            if truncate > 0 {
                bytes.truncate(bytes.len().saturating_sub(payload.len() + truncate));
            }
            match predicted(&bytes) {
                Some(predicted) => prop_assert_eq!(Some(predicted), general(&bytes)),
                // Not predicted: the general path alone decides.
                None => prop_assume!(false),
            }
        }
    }
}
