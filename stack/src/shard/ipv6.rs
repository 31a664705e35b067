//! IPv6 input (RFC 8200) and ICMPv6 (RFC 4443): the header checked, the
//! extension headers walked, echo answered, errors sent within the shared
//! ICMP rate limit. Neighbor Discovery is [`ndp`](super::ndp).
//!
//! Every view and emitter is `smoltcp::wire`'s; this file decides what a
//! packet means to us.

use core::net::Ipv6Addr;

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    EthernetProtocol, Icmpv6DstUnreachable, Icmpv6Packet, Icmpv6ParamProblem, Icmpv6Repr, IpProtocol, Ipv6ExtHeader,
    Ipv6OptionFailureType, Ipv6OptionRepr, Ipv6OptionsIterator, Ipv6Packet, Ipv6Repr, Ipv6RoutingHeader,
};

use crate::config::{Ipv6Config, link_local, solicited_node};
use crate::counters::DropReason;
use crate::flow_table::FourTuple;
use crate::neighbor::NdpCache;
use crate::tcp::seq::SeqNumber;
use crate::time::Instant;
use crate::wire::{self, DEFAULT_TTL, ETHERNET_HEADER_LEN, IPV6_HEADER_LEN};

use super::Shard;

/// The all-nodes multicast group (RFC 4291 §2.7.1).
pub(super) const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// The most extension headers a packet may carry before its upper layer:
/// more is an attack on the time it takes to walk them (RFC 8200 §4.1
/// expects a handful).
const MAX_EXTENSION_HEADERS: usize = 8;

/// The most of an offending packet an ICMPv6 error carries: what fits the
/// IPv6 minimum MTU (RFC 4443 §2.4 (c)).
const ERROR_PAYLOAD_MAX: usize = 1280 - IPV6_HEADER_LEN - 8;

/// Where one of our addresses stands (RFC 4862 §5.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AddressState {
    /// Duplicate address detection is probing: the address is not used
    /// yet, except to hear whether another node has it.
    Tentative,
    /// Ours: used and answered.
    Preferred,
    /// Another node has it: never used (RFC 4862 §5.4.5).
    Duplicate,
}

/// One of our IPv6 addresses.
#[derive(Clone, Copy, Debug)]
pub(super) struct OurAddress {
    pub(super) addr: Ipv6Addr,
    pub(super) prefix_len: u8,
    pub(super) state: AddressState,
    /// Duplicate-detection probes still to send.
    pub(super) probes_left: u8,
}

/// The most default routers remembered from advertisements.
pub(super) const MAX_ROUTERS: usize = 4;

/// The shard's IPv6 side: its addresses, its neighbours and its routers.
#[derive(Debug)]
pub(super) struct Ipv6State {
    pub(super) addresses: Vec<OurAddress>,
    pub(super) neighbors: NdpCache,
    /// The configured default router, which advertisements do not replace.
    pub(super) gateway: Option<Ipv6Addr>,
    /// Routers that advertised themselves, each until its lifetime ends
    /// (RFC 4861 §6.3.4's default router list), at most [`MAX_ROUTERS`].
    pub(super) routers: Vec<(Ipv6Addr, Instant)>,
    /// The link MTU a router advertised, when below ours.
    pub(super) link_mtu: Option<u32>,
}

impl Ipv6State {
    /// The link-local address of `mac` and the configured ones, each
    /// tentative until `config.dad_transmits` probes went unanswered.
    pub(super) fn new(config: &Ipv6Config, mac: [u8; 6], neighbors: usize) -> Ipv6State {
        let (state, probes_left) = match config.dad_transmits {
            0 => (AddressState::Preferred, 0),
            n => (AddressState::Tentative, n),
        };
        let mut addresses = vec![OurAddress { addr: link_local(mac), prefix_len: 64, state, probes_left }];
        for &(addr, prefix_len) in &config.addresses {
            if !addresses.iter().any(|a| a.addr == addr) {
                addresses.push(OurAddress { addr, prefix_len, state, probes_left });
            }
        }
        Ipv6State {
            addresses,
            neighbors: NdpCache::new(neighbors),
            gateway: config.gateway,
            routers: Vec::with_capacity(MAX_ROUTERS),
            link_mtu: None,
        }
    }

    /// Our address `addr`, in any state.
    pub(super) fn find(&self, addr: Ipv6Addr) -> Option<&OurAddress> {
        self.addresses.iter().find(|a| a.addr == addr)
    }

    /// Whether `addr` is ours and in use.
    pub(super) fn is_preferred(&self, addr: Ipv6Addr) -> bool {
        self.find(addr).is_some_and(|a| a.state == AddressState::Preferred)
    }

    /// Whether a packet to `dst` is for us: a preferred address of ours,
    /// the all-nodes group, or the solicited-node group of any of ours
    /// (tentative ones included: duplicate detection listens there).
    fn accepts(&self, dst: Ipv6Addr) -> bool {
        dst == ALL_NODES
            || self.is_preferred(dst)
            || self.addresses.iter().any(|a| a.state != AddressState::Duplicate && solicited_node(a.addr) == dst)
    }

    /// Whether `mac` is an Ethernet multicast address we listen on.
    pub(super) fn listens_on(&self, mac: [u8; 6]) -> bool {
        mac == wire::ipv6_multicast_mac(ALL_NODES)
            || self
                .addresses
                .iter()
                .any(|a| a.state != AddressState::Duplicate && wire::ipv6_multicast_mac(solicited_node(a.addr)) == mac)
    }

    /// Our source for a packet to `dst` (RFC 6724's first rules, as far
    /// as they matter here): the link-local address for a link-local
    /// destination; else a preferred address on `dst`'s prefix, else any
    /// preferred address of wider scope, else the link-local one.
    pub(super) fn source_for(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        let preferred = || self.addresses.iter().filter(|a| a.state == AddressState::Preferred);
        let link_local = || preferred().find(|a| a.addr.is_unicast_link_local());
        if dst.is_unicast_link_local() || dst.is_multicast() && dst.segments()[0] & 0x000f <= 2 {
            return link_local().or_else(|| preferred().next()).map(|a| a.addr);
        }
        preferred()
            .find(|a| !a.addr.is_unicast_link_local() && same_prefix(a.addr, dst, a.prefix_len))
            .or_else(|| preferred().find(|a| !a.addr.is_unicast_link_local()))
            .or_else(link_local)
            .map(|a| a.addr)
    }
}

/// Whether `a` and `b` share their first `len` bits.
pub(super) fn same_prefix(a: Ipv6Addr, b: Ipv6Addr, len: u8) -> bool {
    let len = u32::from(len.min(128));
    let mask = if len == 0 { 0 } else { u128::MAX << (128 - len) };
    a.to_bits() & mask == b.to_bits() & mask
}

/// Where a reply to an incoming IPv6 packet goes, and how it came.
#[derive(Clone, Copy, Debug)]
pub(super) struct Peer6 {
    pub(super) mac: [u8; 6],
    pub(super) ip: Ipv6Addr,
    /// The packet's destination (ours, or a group).
    pub(super) dst: Ipv6Addr,
    /// The frame came to a multicast Ethernet address.
    pub(super) link_multicast: bool,
}

/// What the extension headers ask for.
enum Walk {
    /// Deliver the upper-layer payload at this offset to `protocol`.
    Deliver { protocol: IpProtocol, offset: usize, next_header_at: usize },
    /// Drop it, counted for `reason`, answering with a parameter problem
    /// `reason`, `pointer` when that is due.
    Refuse { reason: DropReason, problem: Option<(Icmpv6ParamProblem, u32)> },
}

impl Shard {
    pub(super) fn handle_ipv6(&mut self, now: Instant, src_mac: [u8; 6], link_multicast: bool, bytes: &[u8]) {
        let Some(v6) = &self.ipv6 else {
            return self.drop(DropReason::EthernetUnknownType);
        };
        let Ok(ip) = Ipv6Packet::new_checked(bytes) else {
            let reason = if bytes.first().is_some_and(|b| b >> 4 != 6) {
                DropReason::Ipv6BadVersion
            } else {
                DropReason::Ipv6Truncated
            };
            return self.drop(reason);
        };
        if ip.version() != 6 {
            return self.drop(DropReason::Ipv6BadVersion);
        }
        let (src, dst) = (ip.src_addr(), ip.dst_addr());
        if !v6.accepts(dst) {
            return self.drop(DropReason::Ipv6NotForUs);
        }
        if src.is_multicast() || v6.find(src).is_some_and(|a| a.state != AddressState::Duplicate) {
            return self.drop(DropReason::Ipv6BadSource);
        }
        // Ethernet pads short frames: the payload length says where data ends.
        let packet = &bytes[..IPV6_HEADER_LEN + usize::from(ip.payload_len())];
        let peer = Peer6 { mac: src_mac, ip: src, dst, link_multicast };
        match walk(packet, ip.next_header(), dst.is_multicast()) {
            Walk::Refuse { reason, problem } => {
                self.drop(reason);
                if let Some((code, pointer)) = problem {
                    self.send_icmpv6_error(peer, packet, |header, data| Icmpv6Repr::ParamProblem {
                        reason: code,
                        pointer,
                        header,
                        data,
                    });
                }
            }
            Walk::Deliver { protocol, offset, next_header_at } => {
                let payload = &packet[offset..];
                if src.is_unspecified() && protocol != IpProtocol::Icmpv6 {
                    // Only duplicate address detection sends from `::`.
                    return self.drop(DropReason::Ipv6BadSource);
                }
                match protocol {
                    IpProtocol::Icmpv6 => self.handle_icmpv6(now, peer, ip.hop_limit(), packet, payload),
                    IpProtocol::Tcp if dst.is_multicast() => self.drop(DropReason::Ipv6NotForUs),
                    IpProtocol::Tcp => self.handle_tcp(now, peer.mac, dst, src, payload),
                    IpProtocol::Udp => {
                        self.drop(DropReason::UdpNoPort);
                        let reason = Icmpv6DstUnreachable::PortUnreachable;
                        self.send_icmpv6_error(peer, packet, |header, data| Icmpv6Repr::DstUnreachable {
                            reason,
                            header,
                            data,
                        });
                    }
                    IpProtocol::Ipv6NoNxt => self.drop(DropReason::Ipv6NoNextHeader),
                    _ => {
                        self.drop(DropReason::Ipv6UnknownProtocol);
                        let pointer = u32::try_from(next_header_at).unwrap_or(u32::MAX);
                        self.send_icmpv6_error(peer, packet, |header, data| Icmpv6Repr::ParamProblem {
                            reason: Icmpv6ParamProblem::UnrecognizedNxtHdr,
                            pointer,
                            header,
                            data,
                        });
                    }
                }
            }
        }
    }

    fn handle_icmpv6(&mut self, now: Instant, peer: Peer6, hop_limit: u8, packet: &[u8], bytes: &[u8]) {
        let Ok(icmp) = Icmpv6Packet::new_checked(bytes) else {
            return self.drop(DropReason::Icmpv6Malformed);
        };
        let Ok(repr) = Icmpv6Repr::parse(&peer.ip, &peer.dst, &icmp, &ChecksumCapabilities::default()) else {
            return self.drop(DropReason::Icmpv6Malformed);
        };
        match repr {
            Icmpv6Repr::EchoRequest { ident, seq_no, data } => {
                if peer.ip.is_unspecified() {
                    return self.drop(DropReason::Ipv6BadSource);
                }
                if packet.len() > self.config.mtu {
                    return self.drop(DropReason::Icmpv6Ignored);
                }
                let reply = Icmpv6Repr::EchoReply { ident, seq_no, data };
                let src = if peer.dst.is_multicast() { self.v6_source(peer.ip) } else { Some(peer.dst) };
                if let Some(src) = src
                    && self.queue_icmpv6(peer.mac, src, peer.ip, DEFAULT_TTL, &reply)
                {
                    self.env.0.counters.echo_replies += 1;
                }
            }
            Icmpv6Repr::Ndisc(ndisc) => self.handle_ndisc(now, peer, hop_limit, icmp.msg_code(), ndisc),
            Icmpv6Repr::PktTooBig { mtu, header, data } => self.on_packet_too_big(mtu, header, data),
            _ => self.drop(DropReason::Icmpv6Ignored),
        }
    }

    /// RFC 8201: a router could not forward a packet of ours at `mtu`
    /// bytes. The TCP connection it came from (by the ports and sequence
    /// number the message quotes) sends smaller segments from now on.
    fn on_packet_too_big(&mut self, mtu: u32, header: Ipv6Repr, data: &[u8]) {
        let (Some(ports), Some(seq)) = (data.get(..4), data.get(4..8)) else {
            return self.drop(DropReason::Icmpv6Ignored);
        };
        let ours = self.ipv6.as_ref().is_some_and(|v6| v6.is_preferred(header.src_addr));
        if header.next_header != IpProtocol::Tcp || !ours {
            return self.drop(DropReason::Icmpv6Ignored);
        }
        let tuple = FourTuple {
            local_ip: header.src_addr,
            remote_ip: header.dst_addr,
            local_port: u16::from_be_bytes([ports[0], ports[1]]),
            remote_port: u16::from_be_bytes([ports[2], ports[3]]),
        };
        let seq = SeqNumber::new(u32::from_be_bytes([seq[0], seq[1], seq[2], seq[3]]));
        let Some(key) = self.flows.get(&tuple) else { return self.drop(DropReason::Icmpv6Ignored) };
        let changed = self.conns.get_mut(key).is_some_and(|conn| conn.on_packet_too_big(seq, mtu));
        if !changed {
            return self.drop(DropReason::Icmpv6Ignored);
        }
        self.env.0.counters.path_mtu_updates += 1;
        self.sync(key);
    }

    /// Our source address for a packet to `dst`, if one is in use.
    fn v6_source(&self, dst: Ipv6Addr) -> Option<Ipv6Addr> {
        self.ipv6.as_ref().and_then(|v6| v6.source_for(dst))
    }

    /// An ICMPv6 error about `packet`, built by `make` from the offending
    /// header and as much of the rest as fits the minimum MTU; within the
    /// ICMP rate limit, and never where RFC 4443 §2.4 (e) forbids it: about
    /// an error, to a multicast destination or link-layer multicast (but a
    /// parameter problem about an unrecognized option), or from a source
    /// that is not one node.
    fn send_icmpv6_error<'p>(
        &mut self,
        peer: Peer6,
        packet: &'p [u8],
        make: impl FnOnce(Ipv6Repr, &'p [u8]) -> Icmpv6Repr<'p>,
    ) {
        let Ok(ip) = Ipv6Packet::new_checked(packet) else { return };
        let header = Ipv6Repr {
            src_addr: ip.src_addr(),
            dst_addr: ip.dst_addr(),
            next_header: ip.next_header(),
            payload_len: usize::from(ip.payload_len()),
            hop_limit: ip.hop_limit(),
        };
        let data = &packet[IPV6_HEADER_LEN..];
        let data = &data[..data.len().min(ERROR_PAYLOAD_MAX)];
        let repr = make(header, data);
        let option_problem =
            matches!(repr, Icmpv6Repr::ParamProblem { reason: Icmpv6ParamProblem::UnrecognizedOption, .. });
        let about_an_error = is_icmpv6_error(packet);
        let to_a_group = (peer.dst.is_multicast() || peer.link_multicast) && !option_problem;
        if about_an_error || to_a_group || peer.ip.is_unspecified() || !self.icmp_error_allowed() {
            return self.drop(DropReason::IcmpSuppressed);
        }
        let Some(src) = self.v6_source(peer.ip) else { return };
        if self.queue_icmpv6(peer.mac, src, peer.ip, DEFAULT_TTL, &repr) {
            match repr {
                Icmpv6Repr::ParamProblem { .. } => self.env.0.counters.param_problems_sent += 1,
                _ => self.env.0.counters.unreachables_sent += 1,
            }
        }
    }

    /// Queues an ICMPv6 message from `src` to `dst` at `dst_mac`.
    pub(super) fn queue_icmpv6(
        &mut self,
        dst_mac: [u8; 6],
        src: Ipv6Addr,
        dst: Ipv6Addr,
        hop_limit: u8,
        repr: &Icmpv6Repr<'_>,
    ) -> bool {
        let our_mac = self.config.mac;
        let icmp_len = repr.buffer_len();
        let start = ETHERNET_HEADER_LEN + IPV6_HEADER_LEN;
        let total = start + icmp_len;
        if total > self.config.max_frame_len() {
            return false;
        }
        self.push_control(|frame| {
            wire::emit_ethernet(frame, our_mac, dst_mac, EthernetProtocol::Ipv6);
            let mut icmp = Icmpv6Packet::new_unchecked(&mut frame[start..total]);
            repr.emit(&src, &dst, &mut icmp, &ChecksumCapabilities::default());
            wire::emit_ipv6(&mut frame[ETHERNET_HEADER_LEN..], src, dst, IpProtocol::Icmpv6, icmp_len, hop_limit);
            total
        })
    }
}

/// Walks the extension headers of `packet` (RFC 8200 §4) from the fixed
/// header's `first` next header to the upper layer.
fn walk(packet: &[u8], first: IpProtocol, to_group: bool) -> Walk {
    let mut next = first;
    // Where the field naming `next` sits, for a parameter problem's pointer.
    let mut next_header_at = 6;
    let mut offset = IPV6_HEADER_LEN;
    let bad = |at: usize| Walk::Refuse {
        reason: DropReason::Ipv6BadExtension,
        problem: Some((Icmpv6ParamProblem::ErroneousHdrField, u32::try_from(at).unwrap_or(u32::MAX))),
    };
    for _ in 0..=MAX_EXTENSION_HEADERS {
        match next {
            IpProtocol::HopByHop | IpProtocol::Ipv6Opts | IpProtocol::Ipv6Route => {
                if next == IpProtocol::HopByHop && offset != IPV6_HEADER_LEN {
                    // Only right after the fixed header (RFC 8200 §4.3).
                    return Walk::Refuse {
                        reason: DropReason::Ipv6BadExtension,
                        problem: Some((Icmpv6ParamProblem::UnrecognizedNxtHdr, next_header_at as u32)),
                    };
                }
                let Ok(ext) = Ipv6ExtHeader::new_checked(&packet[offset..]) else {
                    // Its length runs past the packet: point at the length.
                    return bad(offset + 1);
                };
                let len = (usize::from(ext.header_len()) + 1) * 8;
                let data = ext.payload();
                let refused = if next == IpProtocol::Ipv6Route {
                    routing(data, offset + 2)
                } else {
                    options(data, offset + 2, to_group)
                };
                if let Some(refused) = refused {
                    return refused;
                }
                next_header_at = offset;
                next = ext.next_header();
                offset += len;
            }
            IpProtocol::Ipv6Frag => {
                return Walk::Refuse { reason: DropReason::Ipv6Fragment, problem: None };
            }
            protocol => return Walk::Deliver { protocol, offset, next_header_at },
        }
    }
    // Past the bound: dropped without a word.
    Walk::Refuse { reason: DropReason::Ipv6BadExtension, problem: None }
}

/// A routing header whose data (from its type on) starts at `at` in the
/// packet (RFC 8200 §4.4). We forward nothing, so a header with segments
/// left is refused with a pointer at its type, whatever the type (type 0,
/// deprecated by RFC 5095, included); one whose segments are used up is
/// passed over.
fn routing(data: &[u8], at: usize) -> Option<Walk> {
    let Ok(header) = Ipv6RoutingHeader::new_checked(data) else {
        return Some(Walk::Refuse {
            reason: DropReason::Ipv6BadExtension,
            problem: Some((Icmpv6ParamProblem::ErroneousHdrField, u32::try_from(at).unwrap_or(u32::MAX))),
        });
    };
    (header.segments_left() != 0).then(|| Walk::Refuse {
        reason: DropReason::Ipv6BadExtension,
        problem: Some((Icmpv6ParamProblem::ErroneousHdrField, u32::try_from(at).unwrap_or(u32::MAX))),
    })
}

/// The options of a Hop-by-Hop or Destination Options header, whose data
/// starts at `at` in the packet (RFC 8200 §4.2): padding and known options
/// pass, an unknown one is skipped or refused as its type's two high bits
/// say.
fn options(data: &[u8], at: usize, to_group: bool) -> Option<Walk> {
    let mut position = at;
    for option in Ipv6OptionsIterator::new(data) {
        let Ok(option) = option else {
            return Some(Walk::Refuse {
                reason: DropReason::Ipv6BadExtension,
                problem: Some((Icmpv6ParamProblem::ErroneousHdrField, u32::try_from(position).unwrap_or(u32::MAX))),
            });
        };
        if let Ipv6OptionRepr::Unknown { type_, .. } = option {
            let pointer = Some((Icmpv6ParamProblem::UnrecognizedOption, u32::try_from(position).unwrap_or(u32::MAX)));
            match Ipv6OptionFailureType::from(type_) {
                Ipv6OptionFailureType::Skip => {}
                Ipv6OptionFailureType::Discard => {
                    return Some(Walk::Refuse { reason: DropReason::Ipv6BadExtension, problem: None });
                }
                Ipv6OptionFailureType::DiscardSendAll => {
                    return Some(Walk::Refuse { reason: DropReason::Ipv6BadExtension, problem: pointer });
                }
                Ipv6OptionFailureType::DiscardSendUnicast => {
                    let problem = if to_group { None } else { pointer };
                    return Some(Walk::Refuse { reason: DropReason::Ipv6BadExtension, problem });
                }
            }
        }
        position += option.buffer_len();
    }
    None
}

/// Whether `packet` is an ICMPv6 error message (type below 128, RFC 4443
/// §2.1), looking past no extension headers: one behind them is not
/// answered anyway, as it never reaches an upper layer that errs.
fn is_icmpv6_error(packet: &[u8]) -> bool {
    Ipv6Packet::new_checked(packet).is_ok_and(|ip| {
        ip.next_header() == IpProtocol::Icmpv6 && ip.payload().first().is_some_and(|&message| message < 128)
    })
}
