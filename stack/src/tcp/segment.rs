//! An incoming TCP segment, as the state machine sees it.

use smoltcp::wire::{TcpControl, TcpRepr};

use crate::tcp::seq::SeqNumber;
use crate::wire::Flags;

/// A parsed, checksum-verified incoming segment.
#[derive(Clone, Copy, Debug)]
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
