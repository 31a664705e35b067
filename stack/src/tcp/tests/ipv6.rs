//! IPv6 under TCP: the header and its extension headers (RFC 8200),
//! ICMPv6 (RFC 4443), Neighbor Discovery (RFC 4861) and duplicate address
//! detection (RFC 4862 §5.4).

use core::net::Ipv6Addr;

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    EthernetAddress, EthernetFrame, EthernetProtocol, Icmpv6DstUnreachable, Icmpv6Packet, Icmpv6ParamProblem,
    Icmpv6Repr, IpProtocol, Ipv6Packet, NdiscNeighborFlags, NdiscRepr, RawHardwareAddress,
};

use super::harness::*;
use crate::config::{Config, Ipv6Config, link_local, solicited_node};
use crate::counters::DropReason;
use crate::neighbor::NeighborState;
use crate::shard::AddressState;
use crate::time::{Duration, Instant};
use crate::wire::{self, ETHERNET_HEADER_LEN, IPV6_HEADER_LEN};
use crate::Shard;

const GLOBAL: Ipv6Addr = Ipv6Addr::new(0xfd77, 0, 0, 0, 0, 0, 0, 1);
const PEER: Ipv6Addr = Ipv6Addr::new(0xfd77, 0, 0, 0, 0, 0, 0, 2);
const ALL_NODES: Ipv6Addr = Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1);

/// A shard with IPv6 on (`fd77::1/64` and the link-local address), and
/// the frames it sent.
struct V6 {
    shard: Shard,
    now: Instant,
}

impl V6 {
    /// `dad_transmits` duplicate-detection probes per address; the frames
    /// the shard sends at start are returned beside it.
    fn new(dad_transmits: u8) -> (V6, Vec<Vec<u8>>) {
        let mut c: Config = config();
        c.ipv6 = Some(Ipv6Config { dad_transmits, ..Ipv6Config::new(vec![(GLOBAL, 64)]) });
        let mut v6 = V6 { shard: Shard::new(c), now: Instant::ZERO };
        let frames = v6.frames();
        (v6, frames)
    }

    /// Up, with every address in use.
    fn up() -> V6 {
        V6::new(0).0
    }

    fn frames(&mut self) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        let mut buf = vec![0u8; self.shard.config().max_frame_len()];
        while let Some(n) = self.shard.poll_transmit(self.now, &mut buf) {
            out.push(buf[..n].to_vec());
        }
        out
    }

    /// The IPv6 frames it sends (the ARP announcement left out).
    fn ipv6_frames(&mut self) -> Vec<Vec<u8>> {
        let frames = self.frames();
        frames.into_iter().filter(|f| ethertype(f) == EthernetProtocol::Ipv6).collect()
    }

    fn send(&mut self, frame: &[u8]) {
        self.shard.handle_frame(self.now, frame);
        self.shard.end_batch();
    }

    fn advance(&mut self, d: Duration) -> Vec<Vec<u8>> {
        let target = self.now + d;
        let mut out = Vec::new();
        while let Some(at) = self.shard.poll_timeout().filter(|&at| at <= target) {
            self.now = self.now.max(at);
            self.shard.handle_timeout(self.now);
            out.extend(self.frames());
        }
        self.now = target;
        out
    }

    fn state(&self, addr: Ipv6Addr) -> Option<AddressState> {
        self.shard.ipv6_addresses().find(|&(a, _)| a == addr).map(|(_, s)| s)
    }

    fn dropped(&self, reason: DropReason) -> u64 {
        self.shard.counters().dropped(reason)
    }
}

fn ethertype(frame: &[u8]) -> EthernetProtocol {
    EthernetFrame::new_checked(frame).unwrap().ethertype()
}

fn peer_link_local() -> Ipv6Addr {
    link_local(REMOTE_MAC)
}

/// An IPv6 frame from the peer's MAC to `dst_mac`: `src` → `dst` with
/// `hop_limit`, `next_header` and `payload` (extension headers included).
fn frame(dst_mac: [u8; 6], src: Ipv6Addr, dst: Ipv6Addr, hop_limit: u8, next: IpProtocol, payload: &[u8]) -> Vec<u8> {
    let mut f = vec![0u8; ETHERNET_HEADER_LEN + IPV6_HEADER_LEN + payload.len()];
    wire::emit_ethernet(&mut f, REMOTE_MAC, dst_mac, EthernetProtocol::Ipv6);
    wire::emit_ipv6(&mut f[ETHERNET_HEADER_LEN..], src, dst, next, payload.len(), hop_limit);
    f[ETHERNET_HEADER_LEN + IPV6_HEADER_LEN..].copy_from_slice(payload);
    f
}

/// ICMPv6 `repr` from `src` to `dst`, checksummed.
fn icmp(src: Ipv6Addr, dst: Ipv6Addr, repr: &Icmpv6Repr<'_>) -> Vec<u8> {
    let mut bytes = vec![0u8; repr.buffer_len()];
    repr.emit(&src, &dst, &mut Icmpv6Packet::new_unchecked(&mut bytes[..]), &ChecksumCapabilities::default());
    bytes
}

/// An echo request from `src` to `dst` (unicast to our MAC unless `dst`
/// is a group), behind the extension headers `ext` whose first is `first`.
fn echo_behind(src: Ipv6Addr, dst: Ipv6Addr, first: IpProtocol, ext: &[u8]) -> Vec<u8> {
    let echo = icmp(src, dst, &Icmpv6Repr::EchoRequest { ident: 7, seq_no: 9, data: b"ping" });
    let payload = [ext, &echo].concat();
    let mac = if dst.is_multicast() { wire::ipv6_multicast_mac(dst) } else { LOCAL_MAC };
    frame(mac, src, dst, 64, first, &payload)
}

fn echo(src: Ipv6Addr, dst: Ipv6Addr) -> Vec<u8> {
    echo_behind(src, dst, IpProtocol::Icmpv6, &[])
}

/// What one of the shard's IPv6 frames holds: its Ethernet destination,
/// the IPv6 header fields and the ICMPv6 message.
struct Out {
    dst_mac: [u8; 6],
    src: Ipv6Addr,
    dst: Ipv6Addr,
    hop_limit: u8,
    icmp: Vec<u8>,
}

impl Out {
    fn parse(frame: &[u8]) -> Out {
        let eth = EthernetFrame::new_checked(frame).unwrap();
        assert_eq!(eth.ethertype(), EthernetProtocol::Ipv6);
        assert_eq!(eth.src_addr().0, LOCAL_MAC);
        let ip = Ipv6Packet::new_checked(eth.payload()).unwrap();
        assert_eq!(ip.next_header(), IpProtocol::Icmpv6);
        Out {
            dst_mac: eth.dst_addr().0,
            src: ip.src_addr(),
            dst: ip.dst_addr(),
            hop_limit: ip.hop_limit(),
            icmp: ip.payload().to_vec(),
        }
    }

    /// The message, its checksum verified.
    fn repr(&self) -> Icmpv6Repr<'_> {
        let packet = Icmpv6Packet::new_checked(&self.icmp[..]).unwrap();
        Icmpv6Repr::parse(&self.src, &self.dst, &packet, &ChecksumCapabilities::default()).unwrap()
    }
}

#[track_caller]
fn one(frames: Vec<Vec<u8>>) -> Out {
    assert_eq!(frames.len(), 1, "{frames:?}");
    Out::parse(&frames[0])
}

// ---------------------------------------------------------------------------
// Addresses and duplicate address detection
// ---------------------------------------------------------------------------

#[test]
fn the_link_local_address_is_formed_from_the_mac() {
    // RFC 4291 appendix A: the universal/local bit flipped, ff:fe inserted.
    let mac = [0x00, 0x1a, 0x2b, 0x3c, 0x4d, 0x5e];
    assert_eq!(link_local(mac), "fe80::21a:2bff:fe3c:4d5e".parse::<Ipv6Addr>().unwrap());
    assert_eq!(solicited_node(link_local(mac)), "ff02::1:ff3c:4d5e".parse::<Ipv6Addr>().unwrap());
    assert_eq!(wire::ipv6_multicast_mac(solicited_node(GLOBAL)), [0x33, 0x33, 0xff, 0, 0, 1]);
}

#[test]
fn every_address_is_probed_from_the_unspecified_address_before_it_is_used() {
    let (mut v6, frames) = V6::new(1);
    let probes: Vec<Out> =
        frames.iter().filter(|f| ethertype(f) == EthernetProtocol::Ipv6).map(|f| Out::parse(f)).collect();
    assert_eq!(frames.len(), 3, "the ARP announcement and one probe per address");
    let mut targets = Vec::new();
    for probe in &probes {
        let Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target_addr, lladdr }) = probe.repr() else {
            panic!("not a solicitation");
        };
        assert_eq!((probe.src, probe.dst, probe.hop_limit), (Ipv6Addr::UNSPECIFIED, solicited_node(target_addr), 255));
        assert_eq!(probe.dst_mac, wire::ipv6_multicast_mac(solicited_node(target_addr)));
        assert_eq!(lladdr, None, "a probe carries no link-layer address (RFC 4862 §5.4.2)");
        targets.push(target_addr);
    }
    assert_eq!(targets, [link_local(LOCAL_MAC), GLOBAL]);
    assert_eq!(v6.state(GLOBAL), Some(AddressState::Tentative));
    assert_eq!(v6.shard.counters().neighbor_solicits, 2);
    // Tentative: not answered yet.
    v6.send(&echo(PEER, GLOBAL));
    assert!(v6.ipv6_frames().is_empty());
    assert_eq!(v6.dropped(DropReason::Ipv6NotForUs), 1);
    // No answer within RetransTimer: ours.
    let later = v6.advance(Duration::from_millis(1_001));
    assert!(later.is_empty(), "one probe each: {later:?}");
    assert_eq!(v6.state(GLOBAL), Some(AddressState::Preferred));
    assert_eq!(v6.state(link_local(LOCAL_MAC)), Some(AddressState::Preferred));
    v6.send(&echo(PEER, GLOBAL));
    assert!(matches!(one(v6.ipv6_frames()).repr(), Icmpv6Repr::EchoReply { .. }));
}

#[test]
fn several_probes_go_a_retransmission_interval_apart() {
    let (mut v6, frames) = V6::new(3);
    assert_eq!(frames.len(), 3);
    assert_eq!(v6.advance(Duration::from_millis(1_000)).len(), 2);
    assert_eq!(v6.state(GLOBAL), Some(AddressState::Tentative));
    assert_eq!(v6.advance(Duration::from_millis(1_000)).len(), 2);
    assert_eq!(v6.state(GLOBAL), Some(AddressState::Tentative));
    assert!(v6.advance(Duration::from_millis(1_000)).is_empty());
    assert_eq!(v6.state(GLOBAL), Some(AddressState::Preferred));
    assert_eq!(v6.shard.counters().neighbor_solicits, 6);
}

#[test]
fn another_nodes_probe_for_a_tentative_address_means_it_is_taken() {
    let (mut v6, _) = V6::new(1);
    let group = solicited_node(GLOBAL);
    let probe = NdiscRepr::NeighborSolicit { target_addr: GLOBAL, lladdr: None };
    let payload = icmp(Ipv6Addr::UNSPECIFIED, group, &Icmpv6Repr::Ndisc(probe));
    v6.send(&frame(wire::ipv6_multicast_mac(group), Ipv6Addr::UNSPECIFIED, group, 255, IpProtocol::Icmpv6, &payload));
    assert_eq!(v6.state(GLOBAL), Some(AddressState::Duplicate));
    assert_eq!(v6.shard.counters().duplicate_addresses, 1);
    assert!(v6.ipv6_frames().is_empty(), "nothing answers for a duplicate");
    let _ = v6.advance(Duration::from_secs(2));
    assert_eq!(v6.state(GLOBAL), Some(AddressState::Duplicate), "never used");
    assert_eq!(v6.state(link_local(LOCAL_MAC)), Some(AddressState::Preferred), "the others are");
    v6.send(&echo(PEER, GLOBAL));
    assert!(v6.ipv6_frames().is_empty());
}

#[test]
fn an_advertisement_of_a_tentative_address_means_it_is_taken() {
    let (mut v6, _) = V6::new(1);
    let advert = NdiscRepr::NeighborAdvert {
        flags: NdiscNeighborFlags::OVERRIDE,
        target_addr: GLOBAL,
        lladdr: Some(RawHardwareAddress::from(EthernetAddress(REMOTE_MAC))),
    };
    let payload = icmp(PEER, ALL_NODES, &Icmpv6Repr::Ndisc(advert));
    v6.send(&frame(wire::ipv6_multicast_mac(ALL_NODES), PEER, ALL_NODES, 255, IpProtocol::Icmpv6, &payload));
    assert_eq!(v6.state(GLOBAL), Some(AddressState::Duplicate));
    assert_eq!(v6.shard.counters().duplicate_addresses, 1);
}

// ---------------------------------------------------------------------------
// Neighbor Discovery
// ---------------------------------------------------------------------------

fn solicitation(src: Ipv6Addr, target: Ipv6Addr, hop_limit: u8, lladdr: Option<[u8; 6]>) -> Vec<u8> {
    let group = solicited_node(target);
    let ns = NdiscRepr::NeighborSolicit {
        target_addr: target,
        lladdr: lladdr.map(|mac| RawHardwareAddress::from(EthernetAddress(mac))),
    };
    let payload = icmp(src, group, &Icmpv6Repr::Ndisc(ns));
    frame(wire::ipv6_multicast_mac(group), src, group, hop_limit, IpProtocol::Icmpv6, &payload)
}

#[test]
fn a_solicitation_for_our_address_gets_a_solicited_advertisement() {
    let mut v6 = V6::up();
    let asker = peer_link_local();
    v6.send(&solicitation(asker, GLOBAL, 255, Some(REMOTE_MAC)));
    let out = one(v6.ipv6_frames());
    assert_eq!((out.dst_mac, out.src, out.dst, out.hop_limit), (REMOTE_MAC, GLOBAL, asker, 255));
    let Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert { flags, target_addr, lladdr }) = out.repr() else {
        panic!("not an advertisement");
    };
    assert_eq!(flags, NdiscNeighborFlags::SOLICITED | NdiscNeighborFlags::OVERRIDE);
    assert_eq!(target_addr, GLOBAL);
    assert_eq!(lladdr, Some(RawHardwareAddress::from(EthernetAddress(LOCAL_MAC))));
    assert_eq!(v6.shard.counters().neighbor_adverts, 1);
    // The asker is recorded, to be confirmed before it is trusted (§7.2.3).
    assert_eq!(v6.shard.neighbor(v6.now, asker.into()), Some((REMOTE_MAC, NeighborState::Stale)));
    // The link-local address answers too.
    v6.send(&solicitation(asker, link_local(LOCAL_MAC), 255, Some(REMOTE_MAC)));
    assert_eq!(one(v6.ipv6_frames()).src, link_local(LOCAL_MAC));
}

#[test]
fn a_probe_from_a_node_without_an_address_is_answered_to_all_nodes() {
    let mut v6 = V6::up();
    v6.send(&solicitation(Ipv6Addr::UNSPECIFIED, GLOBAL, 255, None));
    let out = one(v6.ipv6_frames());
    assert_eq!((out.dst_mac, out.dst), (wire::ipv6_multicast_mac(ALL_NODES), ALL_NODES));
    let Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert { flags, .. }) = out.repr() else { panic!() };
    assert_eq!(flags, NdiscNeighborFlags::OVERRIDE, "not solicited: nobody asked from an address");
    assert_eq!(v6.state(GLOBAL), Some(AddressState::Preferred), "ours already: the prober's is the duplicate");
}

#[test]
fn neighbor_discovery_from_beyond_the_link_or_about_others_is_refused() {
    let mut v6 = V6::up();
    // Routed: the hop limit is no longer 255 (RFC 4861 §7.1.1).
    v6.send(&solicitation(peer_link_local(), GLOBAL, 64, Some(REMOTE_MAC)));
    assert_eq!(v6.dropped(DropReason::NdpInvalid), 1);
    // Another node's address.
    v6.send(&solicitation(peer_link_local(), PEER, 255, Some(REMOTE_MAC)));
    assert_eq!(v6.dropped(DropReason::EthernetNotForUs), 1, "its solicited-node group is not one we listen on");
    // A probe from `::` with a link-layer address.
    v6.send(&solicitation(Ipv6Addr::UNSPECIFIED, GLOBAL, 255, Some(REMOTE_MAC)));
    assert_eq!(v6.dropped(DropReason::NdpInvalid), 2);
    assert!(v6.ipv6_frames().is_empty());
    assert_eq!(v6.shard.neighbor(v6.now, peer_link_local().into()), None);
}

#[test]
fn an_advertisement_updates_a_neighbour_we_know_and_only_that() {
    let mut v6 = V6::up();
    let peer = peer_link_local();
    let advert = |flags, mac: [u8; 6]| {
        let na = NdiscRepr::NeighborAdvert {
            flags,
            target_addr: peer,
            lladdr: Some(RawHardwareAddress::from(EthernetAddress(mac))),
        };
        frame(LOCAL_MAC, peer, GLOBAL, 255, IpProtocol::Icmpv6, &icmp(peer, GLOBAL, &Icmpv6Repr::Ndisc(na)))
    };
    // Unknown neighbour: silently discarded (§7.2.5).
    v6.send(&advert(NdiscNeighborFlags::SOLICITED, REMOTE_MAC));
    assert_eq!(v6.dropped(DropReason::NdpNotForUs), 1);
    assert_eq!(v6.shard.neighbor(v6.now, peer.into()), None);
    // Known (from its solicitation): a solicited advertisement confirms it.
    v6.send(&solicitation(peer, GLOBAL, 255, Some(REMOTE_MAC)));
    let _ = v6.ipv6_frames();
    v6.send(&advert(NdiscNeighborFlags::SOLICITED, REMOTE_MAC));
    assert_eq!(v6.shard.neighbor(v6.now, peer.into()), Some((REMOTE_MAC, NeighborState::Reachable)));
    // Another address without override, solicited or not: the one we have
    // is kept, but doubted (§7.2.5: REACHABLE becomes STALE).
    let moved = [2, 0, 0, 0, 0, 9];
    v6.send(&advert(NdiscNeighborFlags::empty(), moved));
    assert_eq!(v6.shard.neighbor(v6.now, peer.into()), Some((REMOTE_MAC, NeighborState::Stale)));
    v6.send(&advert(NdiscNeighborFlags::SOLICITED, REMOTE_MAC));
    assert_eq!(v6.shard.neighbor(v6.now, peer.into()), Some((REMOTE_MAC, NeighborState::Reachable)));
    v6.send(&advert(NdiscNeighborFlags::SOLICITED, moved));
    assert_eq!(v6.shard.neighbor(v6.now, peer.into()), Some((REMOTE_MAC, NeighborState::Stale)));
    // With override it moves, to be confirmed.
    v6.send(&advert(NdiscNeighborFlags::OVERRIDE, moved));
    assert_eq!(v6.shard.neighbor(v6.now, peer.into()), Some((moved, NeighborState::Stale)));
    // Solicited, to a group: invalid.
    let na = NdiscRepr::NeighborAdvert { flags: NdiscNeighborFlags::SOLICITED, target_addr: peer, lladdr: None };
    let payload = icmp(peer, ALL_NODES, &Icmpv6Repr::Ndisc(na));
    v6.send(&frame(wire::ipv6_multicast_mac(ALL_NODES), peer, ALL_NODES, 255, IpProtocol::Icmpv6, &payload));
    assert_eq!(v6.dropped(DropReason::NdpInvalid), 1);
    assert!(v6.ipv6_frames().is_empty(), "advertisements are never answered");
}

// ---------------------------------------------------------------------------
// Echo and the header
// ---------------------------------------------------------------------------

#[test]
fn echo_is_answered_from_the_address_it_was_sent_to() {
    let mut v6 = V6::up();
    v6.send(&echo(PEER, GLOBAL));
    let out = one(v6.ipv6_frames());
    assert_eq!((out.dst_mac, out.src, out.dst), (REMOTE_MAC, GLOBAL, PEER));
    assert_eq!(out.repr(), Icmpv6Repr::EchoReply { ident: 7, seq_no: 9, data: b"ping" });
    // To all nodes: answered from a unicast address of ours.
    v6.send(&echo(peer_link_local(), ALL_NODES));
    let out = one(v6.ipv6_frames());
    assert_eq!((out.src, out.dst), (link_local(LOCAL_MAC), peer_link_local()));
    assert_eq!(v6.shard.counters().echo_replies, 2);
}

#[test]
fn ipv6_is_dropped_when_it_is_off_and_malformed_headers_are_counted() {
    let mut off = T::bare(config());
    off.send_frame(&echo(PEER, GLOBAL));
    assert_eq!(off.shard.counters().dropped(DropReason::EthernetUnknownType), 1);

    let mut v6 = V6::up();
    let good = echo(PEER, GLOBAL);
    v6.send(&good[..ETHERNET_HEADER_LEN + 30]);
    assert_eq!(v6.dropped(DropReason::Ipv6Truncated), 1);
    let mut bad = good.clone();
    bad[ETHERNET_HEADER_LEN] = 0x45;
    v6.send(&bad);
    assert_eq!(v6.dropped(DropReason::Ipv6BadVersion), 1);
    let mut long = good.clone();
    long[ETHERNET_HEADER_LEN + 5] += 8; // a payload length beyond the frame
    v6.send(&long);
    assert_eq!(v6.dropped(DropReason::Ipv6Truncated), 2);
    let mut corrupt = good.clone();
    *corrupt.last_mut().unwrap() ^= 1;
    v6.send(&corrupt);
    assert_eq!(v6.dropped(DropReason::Icmpv6Malformed), 1);
    // From one of our own addresses, or from a group.
    v6.send(&echo(GLOBAL, GLOBAL));
    v6.send(&echo(ALL_NODES, GLOBAL));
    assert_eq!(v6.dropped(DropReason::Ipv6BadSource), 2);
    // Another group's Ethernet address.
    v6.send(&echo(PEER, Ipv6Addr::new(0xff02, 0, 0, 0, 0, 1, 0xff00, 9)));
    assert_eq!(v6.dropped(DropReason::EthernetNotForUs), 1);
    // Ethernet padding after the packet is not part of it.
    let mut padded = good.clone();
    padded.extend_from_slice(&[0; 6]);
    v6.send(&padded);
    assert_eq!(one(v6.ipv6_frames()).repr(), Icmpv6Repr::EchoReply { ident: 7, seq_no: 9, data: b"ping" });
    assert!(v6.ipv6_frames().is_empty());
}

// ---------------------------------------------------------------------------
// Extension headers (RFC 8200 §4)
// ---------------------------------------------------------------------------

/// An options header (Hop-by-Hop or Destination) naming `next`, holding
/// `options` (padded to 8 bytes with PadN).
fn options_header(next: IpProtocol, options: &[u8]) -> Vec<u8> {
    let mut h = vec![u8::from(next), 0];
    h.extend_from_slice(options);
    let pad = (8 - h.len() % 8) % 8;
    match pad {
        0 => {}
        1 => h.push(0),
        n => h.extend([1, (n - 2) as u8].iter().chain(core::iter::repeat_n(&0, n - 2))),
    }
    h[1] = (h.len() / 8 - 1) as u8;
    h
}

/// The parameter problem the shard sent: its code and pointer.
#[track_caller]
fn param_problem(v6: &mut V6) -> (Icmpv6ParamProblem, u32) {
    let out = one(v6.ipv6_frames());
    assert_eq!(out.dst, PEER);
    match out.repr() {
        Icmpv6Repr::ParamProblem { reason, pointer, header, .. } => {
            assert_eq!((header.src_addr, header.dst_addr), (PEER, GLOBAL), "about the packet sent");
            (reason, pointer)
        }
        other => panic!("{other:?}"),
    }
}

#[test]
fn padding_and_options_to_skip_are_passed_over() {
    let mut v6 = V6::up();
    // Hop-by-Hop with PadN, then Destination Options with an unknown
    // option whose type says "skip" (high bits 00).
    let dest = options_header(IpProtocol::Icmpv6, &[0x1e, 2, 0xaa, 0xbb]);
    let hbh = options_header(IpProtocol::Ipv6Opts, &[1, 2, 0, 0]);
    v6.send(&echo_behind(PEER, GLOBAL, IpProtocol::HopByHop, &[hbh, dest].concat()));
    assert!(matches!(one(v6.ipv6_frames()).repr(), Icmpv6Repr::EchoReply { .. }));
}

#[test]
fn an_unknown_option_is_discarded_as_its_type_says() {
    let mut v6 = V6::up();
    // 01: discard silently.
    v6.send(&echo_behind(PEER, GLOBAL, IpProtocol::Ipv6Opts, &options_header(IpProtocol::Icmpv6, &[0x5e, 0])));
    assert!(v6.ipv6_frames().is_empty());
    // 10: discard and point at it (the option starts after 2 header bytes).
    v6.send(&echo_behind(PEER, GLOBAL, IpProtocol::Ipv6Opts, &options_header(IpProtocol::Icmpv6, &[1, 0, 0x9e, 0])));
    assert_eq!(param_problem(&mut v6), (Icmpv6ParamProblem::UnrecognizedOption, 40 + 4));
    // 11: the same, but not about a packet to a group.
    let group_echo = echo_behind(PEER, ALL_NODES, IpProtocol::Ipv6Opts, &options_header(IpProtocol::Icmpv6, &[0xde, 0]));
    v6.send(&group_echo);
    assert!(v6.ipv6_frames().is_empty());
    assert_eq!(v6.dropped(DropReason::Ipv6BadExtension), 3);
    assert_eq!(v6.shard.counters().param_problems_sent, 1);
}

#[test]
fn a_routing_header_with_segments_left_is_refused_and_one_without_passed_over() {
    let mut v6 = V6::up();
    // Type 0 (RFC 5095), one segment left, one address.
    let mut type0 = vec![u8::from(IpProtocol::Icmpv6), 2, 0, 1, 0, 0, 0, 0];
    type0.extend_from_slice(&PEER.octets());
    v6.send(&echo_behind(PEER, GLOBAL, IpProtocol::Ipv6Route, &type0));
    assert_eq!(param_problem(&mut v6), (Icmpv6ParamProblem::ErroneousHdrField, 40 + 2));
    type0[3] = 0;
    v6.send(&echo_behind(PEER, GLOBAL, IpProtocol::Ipv6Route, &type0));
    assert!(matches!(one(v6.ipv6_frames()).repr(), Icmpv6Repr::EchoReply { .. }));
}

#[test]
fn fragments_are_counted_and_dropped() {
    let mut v6 = V6::up();
    let fragment = [u8::from(IpProtocol::Icmpv6), 0, 0, 1, 0, 0, 0, 42];
    v6.send(&echo_behind(PEER, GLOBAL, IpProtocol::Ipv6Frag, &fragment));
    assert_eq!(v6.dropped(DropReason::Ipv6Fragment), 1);
    assert!(v6.ipv6_frames().is_empty());
}

#[test]
fn hop_by_hop_anywhere_but_first_and_unknown_next_headers_get_parameter_problems() {
    let mut v6 = V6::up();
    // Destination Options, then Hop-by-Hop: pointer at the field naming it.
    let hbh = options_header(IpProtocol::Icmpv6, &[]);
    let dest = options_header(IpProtocol::HopByHop, &[]);
    v6.send(&echo_behind(PEER, GLOBAL, IpProtocol::Ipv6Opts, &[dest, hbh].concat()));
    assert_eq!(param_problem(&mut v6), (Icmpv6ParamProblem::UnrecognizedNxtHdr, 40));
    // A next header nobody knows, named by the fixed header (byte 6).
    v6.send(&frame(LOCAL_MAC, PEER, GLOBAL, 64, IpProtocol::Unknown(253), b"data"));
    assert_eq!(param_problem(&mut v6), (Icmpv6ParamProblem::UnrecognizedNxtHdr, 6));
    assert_eq!(v6.dropped(DropReason::Ipv6UnknownProtocol), 1);
    // An extension header longer than the packet.
    let mut short = options_header(IpProtocol::Icmpv6, &[]);
    short[1] = 9;
    v6.send(&frame(LOCAL_MAC, PEER, GLOBAL, 64, IpProtocol::Ipv6Opts, &short));
    assert_eq!(param_problem(&mut v6), (Icmpv6ParamProblem::ErroneousHdrField, 41));
    // No next header: nothing to do and nothing said.
    v6.send(&frame(LOCAL_MAC, PEER, GLOBAL, 64, IpProtocol::Ipv6NoNxt, &[]));
    assert_eq!(v6.dropped(DropReason::Ipv6NoNextHeader), 1);
    assert!(v6.ipv6_frames().is_empty());
}

#[test]
fn udp_gets_port_unreachable_but_not_about_a_group_and_tcp_to_a_group_is_dropped() {
    let mut v6 = V6::up();
    let udp = [0x30, 0x39, 0x00, 0x35, 0x00, 0x08, 0x00, 0x00];
    v6.send(&frame(LOCAL_MAC, PEER, GLOBAL, 64, IpProtocol::Udp, &udp));
    let out = one(v6.ipv6_frames());
    let Icmpv6Repr::DstUnreachable { reason, header, data } = out.repr() else { panic!() };
    assert_eq!(reason, Icmpv6DstUnreachable::PortUnreachable);
    assert_eq!((header.src_addr, header.next_header, data), (PEER, IpProtocol::Udp, &udp[..]));
    assert_eq!(v6.shard.counters().unreachables_sent, 1);
    let to_all = frame(wire::ipv6_multicast_mac(ALL_NODES), PEER, ALL_NODES, 64, IpProtocol::Udp, &udp);
    v6.send(&to_all);
    assert!(v6.ipv6_frames().is_empty());
    assert_eq!(v6.dropped(DropReason::IcmpSuppressed), 1);
    v6.send(&frame(wire::ipv6_multicast_mac(ALL_NODES), PEER, ALL_NODES, 64, IpProtocol::Tcp, &[0; 20]));
    assert_eq!(v6.dropped(DropReason::Ipv6NotForUs), 1);
    v6.send(&frame(LOCAL_MAC, PEER, GLOBAL, 64, IpProtocol::Tcp, &[0; 20]));
    assert_eq!(v6.dropped(DropReason::TcpTruncated), 1, "a data offset of 0");
    assert!(v6.ipv6_frames().is_empty());
}

#[test]
fn an_error_is_not_answered_with_an_error() {
    let mut v6 = V6::up();
    // A destination-unreachable about some packet of ours, behind an
    // option that asks for a parameter problem: dropped, not answered.
    let inner = frame(LOCAL_MAC, GLOBAL, PEER, 64, IpProtocol::Udp, &[0; 8]);
    let unreachable = Icmpv6Repr::DstUnreachable {
        reason: Icmpv6DstUnreachable::PortUnreachable,
        header: smoltcp::wire::Ipv6Repr {
            src_addr: GLOBAL,
            dst_addr: PEER,
            next_header: IpProtocol::Udp,
            payload_len: 8,
            hop_limit: 64,
        },
        data: &inner[ETHERNET_HEADER_LEN + IPV6_HEADER_LEN..],
    };
    v6.send(&frame(LOCAL_MAC, PEER, GLOBAL, 64, IpProtocol::Icmpv6, &icmp(PEER, GLOBAL, &unreachable)));
    assert_eq!(v6.dropped(DropReason::Icmpv6Ignored), 1);
    assert!(v6.ipv6_frames().is_empty());
}

// ---------------------------------------------------------------------------
// Router advertisements (RFC 4861 §6.3.4)
// ---------------------------------------------------------------------------

fn router_advert(src: Ipv6Addr, hop_limit: u8, lifetime_s: u64, mtu: Option<u32>) -> Vec<u8> {
    let ra = NdiscRepr::RouterAdvert {
        hop_limit: 64,
        flags: smoltcp::wire::NdiscRouterFlags::empty(),
        router_lifetime: smoltcp::time::Duration::from_secs(lifetime_s),
        reachable_time: smoltcp::time::Duration::ZERO,
        retrans_time: smoltcp::time::Duration::ZERO,
        lladdr: Some(RawHardwareAddress::from(EthernetAddress(REMOTE_MAC))),
        mtu,
        prefix_info: None,
    };
    let payload = icmp(src, ALL_NODES, &Icmpv6Repr::Ndisc(ra));
    frame(wire::ipv6_multicast_mac(ALL_NODES), src, ALL_NODES, hop_limit, IpProtocol::Icmpv6, &payload)
}

#[test]
fn a_router_advertisement_offers_a_default_router_for_its_lifetime() {
    let mut v6 = V6::up();
    assert_eq!(v6.shard.ipv6_default_router(), None);
    let router = peer_link_local();
    v6.send(&router_advert(router, 255, 1800, Some(1400)));
    assert_eq!(v6.shard.ipv6_default_router(), Some(router));
    assert_eq!(v6.shard.ipv6_link_mtu(), Some(1400));
    assert_eq!(v6.shard.neighbor(v6.now, router.into()), Some((REMOTE_MAC, NeighborState::Stale)));
    assert!(v6.ipv6_frames().is_empty(), "advertisements are not answered");
    // A lifetime of zero withdraws it.
    v6.send(&router_advert(router, 255, 0, None));
    assert_eq!(v6.shard.ipv6_default_router(), None);
    // A lifetime runs out.
    v6.send(&router_advert(router, 255, 10, None));
    assert_eq!(v6.shard.ipv6_default_router(), Some(router));
    let _ = v6.advance(Duration::from_secs(11));
    v6.send(&echo(PEER, GLOBAL)); // the shard learns the time from a frame
    assert_eq!(v6.shard.ipv6_default_router(), None);
}

#[test]
fn only_a_link_local_router_on_the_link_counts_and_a_configured_gateway_wins() {
    let mut v6 = V6::up();
    v6.send(&router_advert(PEER, 255, 1800, None));
    v6.send(&router_advert(peer_link_local(), 64, 1800, None));
    assert_eq!(v6.dropped(DropReason::NdpInvalid), 2);
    assert_eq!(v6.shard.ipv6_default_router(), None);
    // An MTU below IPv6's minimum is ignored.
    v6.send(&router_advert(peer_link_local(), 255, 1800, Some(1000)));
    assert_eq!(v6.shard.ipv6_link_mtu(), None);

    let mut c: Config = config();
    let gateway = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 0x99);
    c.ipv6 = Some(Ipv6Config { dad_transmits: 0, gateway: Some(gateway), ..Ipv6Config::new(vec![(GLOBAL, 64)]) });
    let mut v6 = V6 { shard: Shard::new(c), now: Instant::ZERO };
    v6.send(&router_advert(peer_link_local(), 255, 1800, None));
    assert_eq!(v6.shard.ipv6_default_router(), Some(gateway));
    assert_eq!(v6.dropped(DropReason::Icmpv6Ignored), 1, "the advertisement is not used");
    assert_eq!(v6.shard.neighbor(v6.now, peer_link_local().into()), None);
}

// ---------------------------------------------------------------------------
// TCP over IPv6
// ---------------------------------------------------------------------------

/// A TCP segment from the peer (`PEER`, port 5000) to `GLOBAL:port`.
fn tcp6(port: u16, control: smoltcp::wire::TcpControl, seq: u32, ack: Option<u32>, payload: &[u8]) -> Vec<u8> {
    let repr = smoltcp::wire::TcpRepr {
        src_port: 5000,
        dst_port: port,
        control,
        seq_number: smoltcp::wire::TcpSeqNumber(seq as i32),
        ack_number: ack.map(|a| smoltcp::wire::TcpSeqNumber(a as i32)),
        window_len: 65535,
        window_scale: None,
        max_seg_size: (control == smoltcp::wire::TcpControl::Syn).then_some(1440),
        sack_permitted: false,
        sack_ranges: [None; 3],
        timestamp: None,
        payload,
    };
    let mut bytes = vec![0u8; repr.buffer_len()];
    let mut packet = smoltcp::wire::TcpPacket::new_unchecked(&mut bytes[..]);
    repr.emit(&mut packet, &PEER.into(), &GLOBAL.into(), &ChecksumCapabilities::default());
    frame(LOCAL_MAC, PEER, GLOBAL, 64, IpProtocol::Tcp, &bytes)
}

/// What a TCP frame of ours holds: its Ethernet destination, addresses,
/// flags, sequence numbers, MSS option and payload; the checksum checked.
#[derive(Debug)]
struct Tcp6 {
    dst_mac: [u8; 6],
    src: Ipv6Addr,
    dst: Ipv6Addr,
    syn: bool,
    rst: bool,
    seq: u32,
    ack: Option<u32>,
    mss: Option<u16>,
    payload: Vec<u8>,
}

fn parse_tcp6(frame: &[u8]) -> Tcp6 {
    let eth = EthernetFrame::new_checked(frame).unwrap();
    assert_eq!(eth.ethertype(), EthernetProtocol::Ipv6);
    let ip = Ipv6Packet::new_checked(eth.payload()).unwrap();
    assert_eq!(ip.next_header(), IpProtocol::Tcp);
    let (src, dst) = (ip.src_addr(), ip.dst_addr());
    let packet = smoltcp::wire::TcpPacket::new_checked(ip.payload()).unwrap();
    assert!(packet.verify_checksum(&src.into(), &dst.into()), "a bad TCP checksum");
    let repr = smoltcp::wire::TcpRepr::parse(&packet, &src.into(), &dst.into(), &ChecksumCapabilities::default())
        .unwrap();
    Tcp6 {
        dst_mac: eth.dst_addr().0,
        src,
        dst,
        syn: repr.control == smoltcp::wire::TcpControl::Syn,
        rst: repr.control == smoltcp::wire::TcpControl::Rst,
        seq: repr.seq_number.0 as u32,
        ack: repr.ack_number.map(|a| a.0 as u32),
        mss: repr.max_seg_size,
        payload: repr.payload.to_vec(),
    }
}

#[test]
fn a_connection_over_ipv6_resolves_its_peer_and_carries_data_both_ways() {
    use crate::api::Event;
    use core::net::{SocketAddr, SocketAddrV6};
    use smoltcp::wire::TcpControl;

    let mut v6 = V6::up();
    let listener = v6.shard.listen(SocketAddr::from(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 80, 0, 0))).unwrap();
    v6.send(&tcp6(80, TcpControl::Syn, 1000, None, &[]));
    // The peer is not known yet: a solicitation goes out, the SYN-ACK waits.
    let out = one(v6.ipv6_frames());
    let Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target_addr, lladdr }) = out.repr() else { panic!() };
    assert_eq!((target_addr, out.src, out.dst), (PEER, GLOBAL, solicited_node(PEER)));
    assert_eq!(lladdr, Some(RawHardwareAddress::from(EthernetAddress(LOCAL_MAC))));
    v6.send(&peer_answers_solicitation());
    let frames = v6.frames();
    assert_eq!(frames.len(), 1);
    let syn_ack = parse_tcp6(&frames[0]);
    assert!(syn_ack.syn && syn_ack.ack == Some(1001), "{syn_ack:?}");
    assert_eq!((syn_ack.dst_mac, syn_ack.src, syn_ack.dst), (REMOTE_MAC, GLOBAL, PEER));
    assert_eq!(syn_ack.mss, Some(1440), "the IPv6 header is 20 bytes longer");
    let iss = syn_ack.seq;
    v6.send(&tcp6(80, TcpControl::None, 1001, Some(iss + 1), b"hello"));
    let h = v6.shard.accept(listener).expect("established");
    assert_eq!((v6.shard.counters().established, v6.shard.counters().established_ipv6), (1, 1));
    let flow = v6.shard.flow(h).unwrap();
    assert_eq!(flow.remote, SocketAddr::from(SocketAddrV6::new(PEER, 5000, 0, 0)));
    assert_eq!(flow.local, SocketAddr::from(SocketAddrV6::new(GLOBAL, 80, 0, 0)));
    assert_eq!(flow.mss, 1440);
    let mut buf = [0u8; 16];
    assert_eq!(v6.shard.recv(h, &mut buf), Ok(5));
    assert_eq!(&buf[..5], b"hello");
    assert_eq!(v6.shard.send(h, b"world"), Ok(5));
    let out: Vec<Tcp6> = v6.frames().iter().map(|f| parse_tcp6(f)).collect();
    let data = out.iter().find(|s| !s.payload.is_empty()).expect("the data");
    assert_eq!((data.payload.as_slice(), data.seq, data.ack), (&b"world"[..], iss + 1, Some(1006)));
    while let Some(event) = v6.shard.poll_event() {
        assert!(!matches!(event, Event::Error(..)), "{event:?}");
    }
    // A closed port answers with an RST over IPv6.
    v6.send(&tcp6(81, TcpControl::Syn, 7, None, &[]));
    let rst = parse_tcp6(&one_frame(v6.frames()));
    assert!(rst.rst && rst.ack == Some(8), "{rst:?}");
    assert_eq!(v6.dropped(DropReason::TcpNoConnection), 1);
}

#[track_caller]
fn one_frame(frames: Vec<Vec<u8>>) -> Vec<u8> {
    assert_eq!(frames.len(), 1, "{frames:?}");
    frames.into_iter().next().unwrap()
}

#[test]
fn an_active_open_over_ipv6_resolves_its_peer_or_goes_through_the_router() {
    use crate::api::{ConnectError, Event};
    use core::net::{SocketAddr, SocketAddrV6};
    use smoltcp::wire::TcpControl;

    let mut v6 = V6::up();
    let to = SocketAddr::from(SocketAddrV6::new(PEER, 5000, 0, 0));
    let h = v6.shard.connect(v6.now, to).unwrap();
    let out = one(v6.ipv6_frames());
    let Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target_addr, .. }) = out.repr() else { panic!() };
    assert_eq!(target_addr, PEER);
    v6.send(&peer_answers_solicitation());
    let syn = parse_tcp6(&one_frame(v6.frames()));
    assert!(syn.syn && syn.ack.is_none() && syn.mss == Some(1440), "{syn:?}");
    assert_eq!((syn.dst_mac, syn.src, syn.dst), (REMOTE_MAC, GLOBAL, PEER));
    // The peer's SYN-ACK, from port 5000 to ours.
    let port = v6.shard.flow(h).unwrap().local.port();
    let repr = smoltcp::wire::TcpRepr {
        src_port: 5000,
        dst_port: port,
        control: TcpControl::Syn,
        seq_number: smoltcp::wire::TcpSeqNumber(300),
        ack_number: Some(smoltcp::wire::TcpSeqNumber((syn.seq + 1) as i32)),
        window_len: 65535,
        window_scale: None,
        max_seg_size: Some(1440),
        sack_permitted: false,
        sack_ranges: [None; 3],
        timestamp: None,
        payload: &[],
    };
    let mut bytes = vec![0u8; repr.buffer_len()];
    repr.emit(
        &mut smoltcp::wire::TcpPacket::new_unchecked(&mut bytes[..]),
        &PEER.into(),
        &GLOBAL.into(),
        &ChecksumCapabilities::default(),
    );
    v6.send(&frame(LOCAL_MAC, PEER, GLOBAL, 64, IpProtocol::Tcp, &bytes));
    assert_eq!(v6.shard.poll_event(), Some(Event::Connected(h)));
    let ack = parse_tcp6(&one_frame(v6.frames()));
    assert_eq!(ack.ack, Some(301));

    // Off-link: no route without a router; through the advertised one.
    let far = SocketAddr::from(SocketAddrV6::new("2001:db8::7".parse().unwrap(), 80, 0, 0));
    assert_eq!(v6.shard.connect(v6.now, far), Err(ConnectError::NoRoute));
    let router = peer_link_local();
    v6.send(&router_advert(router, 255, 1800, None));
    let h = v6.shard.connect(v6.now, far).unwrap();
    // The SYN goes at once to the MAC the advertisement gave (and a
    // solicitation confirms it, the entry being unconfirmed).
    let frames = v6.frames();
    let tcp: Vec<Tcp6> =
        frames.iter().filter(|f| Ipv6Packet::new_checked(&f[14..]).unwrap().next_header() == IpProtocol::Tcp).map(|f| parse_tcp6(f)).collect();
    let [syn] = tcp.as_slice() else { panic!("{tcp:?}") };
    assert_eq!((syn.dst_mac, syn.dst), (REMOTE_MAC, "2001:db8::7".parse::<Ipv6Addr>().unwrap()), "to the router's MAC");
    assert_eq!(syn.src, GLOBAL, "from an address of global scope");
    assert_eq!(frames.len(), 1, "the router's entry waits in DELAY: nothing else goes yet");
    assert_eq!(v6.shard.neighbor(v6.now, router.into()), Some((REMOTE_MAC, NeighborState::Delay)));
    assert!(v6.shard.flow(h).is_some());
    // Our own addresses and groups are refused.
    for bad in [GLOBAL, ALL_NODES] {
        let to = SocketAddr::from(SocketAddrV6::new(bad, 80, 0, 0));
        assert_eq!(v6.shard.connect(v6.now, to), Err(ConnectError::InvalidAddress));
    }
}

/// The peer's answer to our solicitation for it: solicited, with its MAC.
fn peer_answers_solicitation() -> Vec<u8> {
    let na = NdiscRepr::NeighborAdvert {
        flags: NdiscNeighborFlags::SOLICITED | NdiscNeighborFlags::OVERRIDE,
        target_addr: PEER,
        lladdr: Some(RawHardwareAddress::from(EthernetAddress(REMOTE_MAC))),
    };
    frame(LOCAL_MAC, PEER, GLOBAL, 255, IpProtocol::Icmpv6, &icmp(PEER, GLOBAL, &Icmpv6Repr::Ndisc(na)))
}

/// A connection from the peer's port 5000 to our port 80 over IPv6,
/// accepted: its handle and our ISS.
fn established6(v6: &mut V6) -> (crate::api::Handle, u32) {
    use core::net::{SocketAddr, SocketAddrV6};
    let any = SocketAddr::from(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 80, 0, 0));
    let listener = v6.shard.listen(any).unwrap();
    v6.send(&tcp6(80, smoltcp::wire::TcpControl::Syn, 1000, None, &[]));
    let _solicitation = v6.frames();
    v6.send(&peer_answers_solicitation());
    let iss = parse_tcp6(&one_frame(v6.frames())).seq;
    v6.send(&tcp6(80, smoltcp::wire::TcpControl::None, 1001, Some(iss + 1), &[]));
    (v6.shard.accept(listener).expect("established"), iss)
}

/// A Packet Too Big from a router on the way, quoting our segment at
/// `seq` from port 80 to the peer's 5000.
fn packet_too_big(mtu: u32, seq: u32) -> Vec<u8> {
    let quoted = [&80u16.to_be_bytes()[..], &5000u16.to_be_bytes(), &seq.to_be_bytes(), &[0; 12]].concat();
    let header = smoltcp::wire::Ipv6Repr {
        src_addr: GLOBAL,
        dst_addr: PEER,
        next_header: IpProtocol::Tcp,
        payload_len: 1460,
        hop_limit: 64,
    };
    let router = Ipv6Addr::new(0xfd77, 0, 0, 0, 0, 0, 0, 0xfe);
    let ptb = Icmpv6Repr::PktTooBig { mtu, header, data: &quoted };
    frame(LOCAL_MAC, router, GLOBAL, 64, IpProtocol::Icmpv6, &icmp(router, GLOBAL, &ptb))
}

#[test]
fn a_packet_too_big_shrinks_the_segments_and_sends_the_data_again() {
    let mut v6 = V6::up();
    let (h, iss) = established6(&mut v6);
    assert_eq!(v6.shard.send(h, &[7u8; 3000]), Ok(3000));
    let sent: Vec<Tcp6> = v6.frames().iter().map(|f| parse_tcp6(f)).collect();
    assert_eq!(sent.iter().map(|s| s.payload.len()).collect::<Vec<_>>(), [1440, 1440, 120]);
    // Quoting a sequence number not in flight: a blind guess, ignored.
    v6.send(&packet_too_big(1280, iss.wrapping_add(90_000)));
    assert_eq!(v6.shard.counters().path_mtu_updates, 0);
    assert!(v6.frames().is_empty());
    // Quoting the first segment: smaller segments, and the two segments too
    // big sent again at once, at the new size; the 120 bytes that got
    // through are not. Not congestion: the window is kept, no timeout.
    let cwnd = v6.shard.flow(h).unwrap().cwnd;
    v6.send(&packet_too_big(1280, iss + 1));
    assert_eq!(v6.shard.counters().path_mtu_updates, 1);
    assert_eq!(v6.shard.flow(h).unwrap().mss, 1220);
    let again: Vec<Tcp6> = v6.frames().iter().map(|f| parse_tcp6(f)).collect();
    let sent: Vec<(u32, usize)> = again.iter().map(|s| (s.seq - iss, s.payload.len())).collect();
    assert_eq!(sent, [(1, 1220), (1441, 1220)], "each dropped segment's first 1,220 bytes, at once");
    assert_eq!(v6.shard.flow(h).unwrap().cwnd, cwnd);
    assert_eq!(v6.shard.counters().timeouts, 0);
    // What is left of each (220 bytes) goes once the peer's ACKs, or the
    // timer, show it missing: here the peer has the first part only.
    v6.send(&tcp6(80, smoltcp::wire::TcpControl::None, 1001, Some(iss + 1221), &[]));
    let later: Vec<Tcp6> = v6.advance(Duration::from_secs(3)).iter().map(|f| parse_tcp6(f)).collect();
    assert!(later.iter().any(|s| (s.seq - iss, s.payload.len()) == (1221, 220)), "{later:?}");
    assert!(later.iter().all(|s| s.payload.len() <= 1220), "{later:?}");
    // An MTU below IPv6's minimum counts as the minimum; a larger one is
    // no news.
    v6.send(&packet_too_big(600, iss + 1));
    v6.send(&packet_too_big(1400, iss + 1));
    assert_eq!(v6.shard.flow(h).unwrap().mss, 1220);
}

#[test]
fn a_chain_of_extension_headers_past_the_bound_is_dropped_without_a_word() {
    let mut v6 = V6::up();
    // Eight Destination Options headers pass; nine do not.
    let chain = |n: usize| {
        let mut ext = Vec::new();
        for i in 0..n {
            let next = if i + 1 == n { IpProtocol::Icmpv6 } else { IpProtocol::Ipv6Opts };
            ext.extend(options_header(next, &[]));
        }
        echo_behind(PEER, GLOBAL, IpProtocol::Ipv6Opts, &ext)
    };
    v6.send(&chain(8));
    assert!(matches!(one(v6.ipv6_frames()).repr(), Icmpv6Repr::EchoReply { .. }));
    v6.send(&chain(9));
    assert!(v6.ipv6_frames().is_empty());
    assert_eq!(v6.dropped(DropReason::Ipv6BadExtension), 1);
    // A fragment header in front of a TCP segment: counted and dropped.
    let fragment = [u8::from(IpProtocol::Tcp), 0, 0, 1, 0, 0, 0, 42];
    v6.send(&frame(LOCAL_MAC, PEER, GLOBAL, 64, IpProtocol::Ipv6Frag, &[&fragment[..], &[0; 20]].concat()));
    assert_eq!(v6.dropped(DropReason::Ipv6Fragment), 1);
}

#[test]
fn no_peer_grows_the_neighbour_cache_past_its_bound() {
    let mut c: Config = config();
    c.limits.arp_cache = 16;
    c.ipv6 = Some(Ipv6Config { dad_transmits: 0, ..Ipv6Config::new(vec![(GLOBAL, 64)]) });
    let mut v6 = V6 { shard: Shard::new(c), now: Instant::ZERO };
    // A thousand solicitations from a thousand sources, each recorded.
    for i in 0..1000u16 {
        let src = Ipv6Addr::new(0xfd77, 0, 0, 0, 0, 0, 1, i);
        v6.send(&solicitation(src, GLOBAL, 255, Some([2, 0, 0, 0, (i >> 8) as u8, i as u8])));
        assert_eq!(v6.ipv6_frames().len(), 1, "answered");
    }
    assert_eq!(v6.shard.counters().neighbor_adverts, 1000, "each answered");
    assert!(v6.shard.ipv6_neighbor_count() <= 16, "{}", v6.shard.ipv6_neighbor_count());
    let newest = Ipv6Addr::new(0xfd77, 0, 0, 0, 0, 0, 1, 999);
    assert!(v6.shard.neighbor(v6.now, newest.into()).is_some(), "the newest kept, the oldest gone");
    assert_eq!(v6.shard.neighbor(v6.now, Ipv6Addr::new(0xfd77, 0, 0, 0, 0, 0, 1, 0).into()), None);
}

#[test]
fn a_full_syn_queue_answers_ipv6_with_cookies_that_complete_the_handshake() {
    use core::net::{SocketAddr, SocketAddrV6};
    use smoltcp::wire::TcpControl;

    let mut c: Config = config();
    c.limits.syn_backlog = 0;
    c.ipv6 = Some(Ipv6Config { dad_transmits: 0, ..Ipv6Config::new(vec![(GLOBAL, 64)]) });
    let mut v6 = V6 { shard: Shard::new(c), now: Instant::ZERO };
    let _announcement = v6.frames();
    let any = SocketAddr::from(SocketAddrV6::new(Ipv6Addr::UNSPECIFIED, 80, 0, 0));
    let listener = v6.shard.listen(any).unwrap();
    // The cookie goes back to the link-layer sender: no resolution first.
    v6.send(&tcp6(80, TcpControl::Syn, 1000, None, &[]));
    let syn_ack = parse_tcp6(&one_frame(v6.frames()));
    assert!(syn_ack.syn && syn_ack.ack == Some(1001), "{syn_ack:?}");
    assert_eq!((syn_ack.dst_mac, syn_ack.src, syn_ack.dst), (REMOTE_MAC, GLOBAL, PEER));
    assert_eq!(syn_ack.mss, Some(1440), "the IPv6 MSS");
    assert_eq!(v6.shard.counters().syn_cookies_sent, 1);
    assert_eq!(v6.shard.connection_count(), 0, "nothing kept");
    // The ACK that returns the cookie makes the connection, keyed by the
    // IPv6 4-tuple; a cookie for another port does not.
    v6.send(&tcp6(81, TcpControl::None, 1001, Some(syn_ack.seq + 1), &[]));
    assert_eq!(v6.shard.counters().syn_cookies_accepted, 0);
    let _rst = v6.frames();
    v6.send(&tcp6(80, TcpControl::None, 1001, Some(syn_ack.seq + 1), b"hi"));
    assert_eq!(v6.shard.counters().syn_cookies_accepted, 1);
    let h = v6.shard.accept(listener).expect("restored from the cookie");
    assert_eq!(v6.shard.flow(h).unwrap().remote, SocketAddr::from(SocketAddrV6::new(PEER, 5000, 0, 0)));
    assert_eq!(v6.shard.flow(h).unwrap().mss, 1440);
    let mut buf = [0u8; 4];
    assert_eq!(v6.shard.recv(h, &mut buf), Ok(2));
}

#[test]
fn a_listener_on_one_familys_address_takes_that_family_only() {
    use core::net::{SocketAddr, SocketAddrV6};
    use smoltcp::wire::TcpControl;

    let mut v6 = V6::up();
    // IPv6 only on port 80 (our IPv6 address); IPv4 only on port 81.
    let only6 = v6.shard.listen(SocketAddr::from(SocketAddrV6::new(GLOBAL, 80, 0, 0))).unwrap();
    let _only4 = v6.shard.listen(core::net::SocketAddrV4::new(LOCAL_IP, 81)).unwrap();
    v6.send(&tcp6(80, TcpControl::Syn, 1000, None, &[]));
    let _solicitation = v6.frames();
    v6.send(&peer_answers_solicitation());
    let syn_ack = parse_tcp6(&one_frame(v6.frames()));
    assert!(syn_ack.syn, "{syn_ack:?}");
    v6.send(&tcp6(80, TcpControl::None, 1001, Some(syn_ack.seq + 1), &[]));
    assert!(v6.shard.accept(only6).is_some());
    // IPv6 to the IPv4-only port: nobody listens.
    v6.send(&tcp6(81, TcpControl::Syn, 5000, None, &[]));
    let rst = parse_tcp6(&one_frame(v6.frames()));
    assert!(rst.rst && rst.ack == Some(5001), "{rst:?}");
    assert_eq!(v6.dropped(DropReason::TcpNoConnection), 1);
}

#[test]
fn a_neighbour_in_use_is_confirmed_by_tcp_progress_or_else_probed_alone_then_forgotten() {
    use crate::neighbor::NdpCache;
    let mut v6 = V6::up();
    let (h, iss) = established6(&mut v6);
    assert_eq!(v6.shard.neighbor(v6.now, PEER.into()), Some((REMOTE_MAC, NeighborState::Reachable)));
    let _ = v6.advance(NdpCache::REACHABLE);
    assert_eq!(v6.shard.neighbor(v6.now, PEER.into()), Some((REMOTE_MAC, NeighborState::Stale)));

    // Used while stale: the data goes at once, nothing else (DELAY) ...
    assert_eq!(v6.shard.send(h, b"one"), Ok(3));
    let sent = parse_tcp6(&one_frame(v6.frames()));
    assert_eq!((sent.payload.as_slice(), sent.dst_mac), (&b"one"[..], REMOTE_MAC));
    assert_eq!(v6.shard.neighbor(v6.now, PEER.into()), Some((REMOTE_MAC, NeighborState::Delay)));
    // ... and the peer's ACK of it confirms the neighbour (§7.3.1).
    v6.send(&tcp6(80, smoltcp::wire::TcpControl::None, 1001, Some(iss + 4), &[]));
    assert_eq!(v6.shard.neighbor(v6.now, PEER.into()), Some((REMOTE_MAC, NeighborState::Reachable)));
    assert!(v6.ipv6_frames().is_empty(), "no solicitation was needed");

    // Stale again and used, but nothing acknowledged: after the delay the
    // retransmissions bring a solicitation to the cached address alone.
    let _ = v6.advance(NdpCache::REACHABLE);
    assert_eq!(v6.shard.send(h, b"two"), Ok(3));
    let _data = v6.frames();
    let during_delay = v6.advance(NdpCache::DELAY_FIRST_PROBE - Duration::from_millis(1));
    assert!(during_delay.iter().all(|f| Ipv6Packet::new_checked(&f[14..]).unwrap().next_header() == IpProtocol::Tcp));
    let is_ndp = |f: &Vec<u8>| Ipv6Packet::new_checked(&f[14..]).unwrap().next_header() == IpProtocol::Icmpv6;
    let after = v6.advance(Duration::from_secs(4));
    let probes: Vec<Out> = after.iter().filter(|f| is_ndp(f)).map(|f| Out::parse(f)).collect();
    let [probe] = probes.as_slice() else { panic!("one probe: {} NDP frames", probes.len()) };
    let Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target_addr, lladdr }) = probe.repr() else { panic!() };
    assert_eq!((target_addr, probe.dst, probe.dst_mac), (PEER, PEER, REMOTE_MAC), "unicast, to what we have");
    assert_eq!(lladdr, Some(RawHardwareAddress::from(EthernetAddress(LOCAL_MAC))));
    assert_eq!(v6.shard.neighbor(v6.now, PEER.into()), Some((REMOTE_MAC, NeighborState::Probe)));
    // Unanswered, every probe: the address is forgotten and the next
    // segment waits for a solicitation to the group.
    let rest = v6.advance(Duration::from_secs(60));
    let solicitations: Vec<Out> = rest.iter().filter(|f| is_ndp(f)).map(|f| Out::parse(f)).collect();
    let unicast = solicitations.iter().filter(|o| o.dst == PEER).count();
    assert_eq!(unicast, usize::from(NdpCache::MAX_UNICAST_PROBES) - 1, "the other probes");
    assert!(solicitations.iter().any(|o| o.dst == solicited_node(PEER)), "resolved afresh");
    let state = v6.shard.neighbor(v6.now, PEER.into());
    assert!(state.is_none(), "no address while incomplete: {state:?}");
    // The peer answers the group's solicitation: the connection goes on.
    v6.send(&peer_answers_solicitation());
    assert_eq!(v6.shard.neighbor(v6.now, PEER.into()), Some((REMOTE_MAC, NeighborState::Reachable)));
}
