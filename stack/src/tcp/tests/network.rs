//! The layers under TCP: ARP, IPv4 validation, ICMP.

use core::net::{Ipv4Addr, SocketAddrV4};

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol, Icmpv4DstUnreachable,
    Icmpv4Packet, Icmpv4Repr, IpProtocol, Ipv4Packet, Ipv4Repr,
};

use super::harness::*;
use crate::counters::DropReason;
use crate::time::Duration;
use crate::wire::{self, ETHERNET_HEADER_LEN};

const OTHER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 3);
const OTHER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 3];

fn arp_frame(op: ArpOperation, sha: [u8; 6], spa: Ipv4Addr, tha: [u8; 6], tpa: Ipv4Addr, dst: [u8; 6]) -> Vec<u8> {
    let repr = ArpRepr::EthernetIpv4 {
        operation: op,
        source_hardware_addr: EthernetAddress(sha),
        source_protocol_addr: spa,
        target_hardware_addr: EthernetAddress(tha),
        target_protocol_addr: tpa,
    };
    let mut frame = vec![0u8; ETHERNET_HEADER_LEN + repr.buffer_len()];
    wire::emit_ethernet(&mut frame, sha, dst, EthernetProtocol::Arp);
    repr.emit(&mut ArpPacket::new_unchecked(&mut frame[ETHERNET_HEADER_LEN..]));
    frame
}

fn parse_arp(frame: &[u8]) -> (EthernetAddress, ArpRepr) {
    let eth = EthernetFrame::new_checked(frame).unwrap();
    assert_eq!(eth.ethertype(), EthernetProtocol::Arp);
    assert!(frame.len() >= 60, "padded to the Ethernet minimum");
    (eth.dst_addr(), ArpRepr::parse(&ArpPacket::new_checked(eth.payload()).unwrap()).unwrap())
}

/// An IPv4 frame from the peer with `payload` under `protocol`.
fn ip_frame(protocol: IpProtocol, payload: &[u8]) -> Vec<u8> {
    let mut frame = vec![0u8; 34 + payload.len()];
    wire::emit_ethernet(&mut frame, REMOTE_MAC, LOCAL_MAC, EthernetProtocol::Ipv4);
    wire::emit_ipv4(&mut frame[14..], REMOTE_IP, LOCAL_IP, protocol, payload.len());
    frame[34..].copy_from_slice(payload);
    frame
}

fn icmp_payload(repr: &Icmpv4Repr<'_>) -> Vec<u8> {
    let mut bytes = vec![0u8; repr.buffer_len()];
    repr.emit(&mut Icmpv4Packet::new_unchecked(&mut bytes[..]), &ChecksumCapabilities::default());
    bytes
}

/// Parses an ICMP frame we sent; checks both checksums.
fn parse_icmp(frame: &[u8]) -> (Ipv4Repr, Vec<u8>) {
    let eth = EthernetFrame::new_checked(frame).unwrap();
    assert_eq!(eth.dst_addr().0, REMOTE_MAC);
    let ip = Ipv4Packet::new_checked(eth.payload()).unwrap();
    let repr = Ipv4Repr::parse(&ip, &ChecksumCapabilities::default()).expect("valid IPv4");
    assert_eq!(repr.next_header, IpProtocol::Icmp);
    let icmp = Icmpv4Packet::new_checked(ip.payload()).unwrap();
    assert!(icmp.verify_checksum());
    (repr, ip.payload().to_vec())
}

#[test]
fn arp_request_for_us_is_answered_and_teaches_us_the_sender() {
    let mut t = T::bare(config());
    t.send_frame(&arp_frame(ArpOperation::Request, OTHER_MAC, OTHER_IP, [0; 6], LOCAL_IP, wire::BROADCAST_MAC));
    let frames = t.frames();
    assert_eq!(frames.len(), 1);
    let (dst, repr) = parse_arp(&frames[0]);
    assert_eq!(dst.0, OTHER_MAC);
    assert_eq!(
        repr,
        ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Reply,
            source_hardware_addr: EthernetAddress(LOCAL_MAC),
            source_protocol_addr: LOCAL_IP,
            target_hardware_addr: EthernetAddress(OTHER_MAC),
            target_protocol_addr: OTHER_IP,
        }
    );
    // We can now reach 10.0.0.3 without asking.
    t.shard.connect(t.now, SocketAddrV4::new(OTHER_IP, 80)).unwrap();
    let syn = t.frames();
    assert_eq!(syn.len(), 1);
    assert_eq!(&syn[0][..6], &OTHER_MAC);
}

#[test]
fn arp_for_another_host_is_not_answered() {
    let mut t = T::bare(config());
    t.send_frame(&arp_frame(
        ArpOperation::Request,
        OTHER_MAC,
        OTHER_IP,
        [0; 6],
        Ipv4Addr::new(10, 0, 0, 9),
        wire::BROADCAST_MAC,
    ));
    assert!(t.frames().is_empty());
    assert_eq!(t.shard.counters().dropped(DropReason::ArpNotForUs), 1);
    // Garbage and spoofs of our own address are counted too.
    t.send_frame(&arp_frame(ArpOperation::Request, OTHER_MAC, LOCAL_IP, [0; 6], LOCAL_IP, wire::BROADCAST_MAC));
    t.send_frame(&[0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 2, 0, 0, 0, 0, 3, 0x08, 0x06, 0, 1]);
    assert_eq!(t.shard.counters().dropped(DropReason::ArpMalformed), 2);
}

#[test]
fn an_unresolved_next_hop_holds_the_segment_until_arp_answers() {
    let mut t = T::bare(config());
    let h = t.shard.connect(t.now, SocketAddrV4::new(OTHER_IP, 80)).unwrap();
    let frames = t.frames();
    assert_eq!(frames.len(), 1, "only the ARP request goes out");
    let (dst, repr) = parse_arp(&frames[0]);
    assert_eq!(dst.0, wire::BROADCAST_MAC);
    let ArpRepr::EthernetIpv4 { operation, target_protocol_addr, .. } = repr else { unreachable!() };
    assert_eq!((operation, target_protocol_addr), (ArpOperation::Request, OTHER_IP));
    t.send_frame(&arp_frame(ArpOperation::Reply, OTHER_MAC, OTHER_IP, LOCAL_MAC, LOCAL_IP, LOCAL_MAC));
    let frames = t.frames();
    assert_eq!(frames.len(), 1, "the held SYN");
    let eth = EthernetFrame::new_checked(&frames[0][..]).unwrap();
    assert_eq!(eth.dst_addr().0, OTHER_MAC);
    assert_eq!(eth.ethertype(), EthernetProtocol::Ipv4);
    assert!(t.shard.flow(h).is_some());
}

#[test]
fn arp_gives_up_after_three_requests_and_drops_what_waited() {
    let mut t = T::bare(config());
    t.shard.connect(t.now, SocketAddrV4::new(OTHER_IP, 80)).unwrap();
    assert_eq!(t.frames().len(), 1);
    t.advance(Duration::from_millis(1001));
    assert_eq!(t.frames().len(), 1, "second request");
    t.advance(Duration::from_millis(1001));
    assert_eq!(t.frames().len(), 1, "third request");
    t.advance(Duration::from_millis(1001));
    // The SYN and its retransmission (RTO 1 s) waited; both are dropped.
    assert_eq!(t.shard.counters().dropped(DropReason::ArpUnresolved), 2);
}

#[test]
fn a_stale_neighbour_in_use_is_probed_with_an_arp_request_to_it_alone() {
    use crate::neighbor::{ArpCache, NeighborState};
    let mut t = T::bare(config());
    t.send_frame(&arp_frame(ArpOperation::Request, OTHER_MAC, OTHER_IP, [0; 6], LOCAL_IP, wire::BROADCAST_MAC));
    let _reply = t.frames();
    assert_eq!(t.shard.neighbor(t.now, OTHER_IP.into()), Some((OTHER_MAC, NeighborState::Reachable)));
    t.advance(ArpCache::REACHABLE);
    assert_eq!(t.shard.neighbor(t.now, OTHER_IP.into()), Some((OTHER_MAC, NeighborState::Stale)));
    // Used: the SYN goes to the cached address, nothing else yet (DELAY).
    t.shard.connect(t.now, SocketAddrV4::new(OTHER_IP, 80)).unwrap();
    let syn = t.frames();
    assert_eq!(syn.len(), 1);
    assert_eq!((&syn[0][..6], ethertype(&syn[0])), (&OTHER_MAC[..], EthernetProtocol::Ipv4));
    assert_eq!(t.shard.neighbor(t.now, OTHER_IP.into()), Some((OTHER_MAC, NeighborState::Delay)));
    t.advance(ArpCache::DELAY_FIRST_PROBE - Duration::from_millis(1));
    assert!(t.frames().iter().all(|f| ethertype(f) == EthernetProtocol::Ipv4), "no request during DELAY");
    // Unacknowledged: the next retransmission brings one request, to the
    // cached address rather than to everyone.
    t.advance(Duration::from_secs(4));
    let requests: Vec<_> = t.frames().into_iter().filter(|f| ethertype(f) == EthernetProtocol::Arp).collect();
    let [request] = requests.as_slice() else { panic!("{requests:?}") };
    let (dst, repr) = parse_arp(request);
    assert_eq!(dst.0, OTHER_MAC);
    let ArpRepr::EthernetIpv4 { operation, target_protocol_addr, .. } = repr else { unreachable!() };
    assert_eq!((operation, target_protocol_addr), (ArpOperation::Request, OTHER_IP));
    assert_eq!(t.shard.neighbor(t.now, OTHER_IP.into()), Some((OTHER_MAC, NeighborState::Probe)));
    // Its reply confirms it.
    t.send_frame(&arp_frame(ArpOperation::Reply, OTHER_MAC, OTHER_IP, LOCAL_MAC, LOCAL_IP, LOCAL_MAC));
    assert_eq!(t.shard.neighbor(t.now, OTHER_IP.into()), Some((OTHER_MAC, NeighborState::Reachable)));
}

fn ethertype(frame: &[u8]) -> EthernetProtocol {
    EthernetFrame::new_checked(frame).unwrap().ethertype()
}

#[test]
fn echo_request_gets_an_echo_reply_with_the_same_data() {
    let mut t = T::bare(config());
    let request = Icmpv4Repr::EchoRequest { ident: 7, seq_no: 3, data: b"fairway ping" };
    t.send_frame(&ip_frame(IpProtocol::Icmp, &icmp_payload(&request)));
    let frames = t.frames();
    assert_eq!(frames.len(), 1);
    let (ip, icmp) = parse_icmp(&frames[0]);
    assert_eq!((ip.src_addr, ip.dst_addr), (LOCAL_IP, REMOTE_IP));
    let reply =
        Icmpv4Repr::parse(&Icmpv4Packet::new_checked(&icmp[..]).unwrap(), &ChecksumCapabilities::default()).unwrap();
    assert_eq!(reply, Icmpv4Repr::EchoReply { ident: 7, seq_no: 3, data: b"fairway ping" });
    assert_eq!(t.shard.counters().echo_replies, 1);
}

#[test]
fn udp_gets_port_unreachable_and_other_protocols_protocol_unreachable() {
    let mut t = T::bare(config());
    let udp = [0x13, 0x88, 0x00, 0x35, 0x00, 0x0c, 0x00, 0x00, b'a', b'b', b'c', b'd'];
    t.send_frame(&ip_frame(IpProtocol::Udp, &udp));
    t.send_frame(&ip_frame(IpProtocol::Unknown(200), b"whatever"));
    let frames = t.frames();
    assert_eq!(frames.len(), 2);
    let (_, icmp) = parse_icmp(&frames[0]);
    let repr =
        Icmpv4Repr::parse(&Icmpv4Packet::new_checked(&icmp[..]).unwrap(), &ChecksumCapabilities::default()).unwrap();
    let Icmpv4Repr::DstUnreachable { reason, header, data } = repr else { panic!("{repr:?}") };
    assert_eq!(reason, Icmpv4DstUnreachable::PortUnreachable);
    assert_eq!((header.src_addr, header.dst_addr, header.next_header), (REMOTE_IP, LOCAL_IP, IpProtocol::Udp));
    assert_eq!(data, &udp[..8], "the first 8 bytes of the datagram");
    let (_, icmp) = parse_icmp(&frames[1]);
    assert_eq!(icmp[0..2], [3, 2], "destination unreachable, protocol unreachable");
    assert_eq!(t.shard.counters().dropped(DropReason::UdpNoPort), 1);
    assert_eq!(t.shard.counters().dropped(DropReason::Ipv4UnknownProtocol), 1);
}

#[test]
fn icmp_errors_are_rate_limited() {
    let mut t = T::bare(config());
    for _ in 0..150 {
        t.send_frame(&ip_frame(IpProtocol::Unknown(200), b"x"));
        let _ = t.frames();
    }
    assert_eq!(t.shard.counters().unreachables_sent, 100);
    assert_eq!(t.shard.counters().dropped(DropReason::IcmpSuppressed), 50);
    t.advance(Duration::from_secs(1));
    t.send_frame(&ip_frame(IpProtocol::Unknown(200), b"x"));
    assert_eq!(t.frames().len(), 1);
}

#[test]
fn malformed_ipv4_is_counted_by_reason() {
    let mut t = T::bare(config());
    let good = ip_frame(IpProtocol::Unknown(200), b"12345678");
    let mut bad_sum = good.clone();
    bad_sum[24] ^= 0x55;
    t.send_frame(&bad_sum);
    let mut fragment = good.clone();
    fragment[20] = 0x20; // more fragments
    refill_ip_checksum(&mut fragment);
    t.send_frame(&fragment);
    let mut options = vec![0u8; good.len() + 4];
    options[..14].copy_from_slice(&good[..14]);
    options[14] = 0x46; // IHL 6
    options[15..34].copy_from_slice(&good[15..34]);
    options[34..38].copy_from_slice(&[1, 1, 1, 0]); // NOPs and end of options
    options[38..].copy_from_slice(&good[34..]);
    options[16..18].copy_from_slice(&((good.len() - 14 + 4) as u16).to_be_bytes());
    refill_ip_checksum(&mut options);
    t.send_frame(&options);
    let mut elsewhere = good.clone();
    elsewhere[30..34].copy_from_slice(&[10, 0, 0, 77]);
    refill_ip_checksum(&mut elsewhere);
    t.send_frame(&elsewhere);
    let mut spoofed = good.clone();
    spoofed[26..30].copy_from_slice(&LOCAL_IP.octets());
    refill_ip_checksum(&mut spoofed);
    t.send_frame(&spoofed);
    let mut v6 = good.clone();
    v6[14] = 0x65;
    t.send_frame(&v6);
    t.send_frame(&good[..20]);
    let mut long = good.clone();
    long[16..18].copy_from_slice(&2000u16.to_be_bytes());
    refill_ip_checksum(&mut long);
    t.send_frame(&long);

    let c = t.shard.counters();
    assert_eq!(c.dropped(DropReason::Ipv4BadChecksum), 1);
    assert_eq!(c.dropped(DropReason::Ipv4Fragment), 1);
    assert_eq!(c.dropped(DropReason::Ipv4Options), 1);
    assert_eq!(c.dropped(DropReason::Ipv4NotForUs), 1);
    assert_eq!(c.dropped(DropReason::Ipv4BadSource), 1);
    assert_eq!(c.dropped(DropReason::Ipv4BadVersion), 1);
    assert_eq!(c.dropped(DropReason::Ipv4Truncated), 2);
    assert!(t.frames().is_empty(), "nothing is answered");
}

#[test]
fn frames_for_other_macs_and_unknown_types_are_counted() {
    let mut t = T::bare(config());
    let mut other = ip_frame(IpProtocol::Tcp, &[0; 20]);
    other[..6].copy_from_slice(&OTHER_MAC);
    t.send_frame(&other);
    let mut ipv6 = ip_frame(IpProtocol::Tcp, &[0; 20]);
    ipv6[12..14].copy_from_slice(&[0x86, 0xdd]);
    t.send_frame(&ipv6);
    t.send_frame(&[1, 2, 3]);
    let c = t.shard.counters();
    assert_eq!(c.dropped(DropReason::EthernetNotForUs), 1);
    assert_eq!(c.dropped(DropReason::EthernetUnknownType), 1);
    assert_eq!(c.dropped(DropReason::EthernetTruncated), 1);
}

#[test]
fn tcp_with_a_bad_checksum_or_header_is_dropped() {
    let mut t = T::listening();
    let mut frame = build_frame(&t.seg_in().seq(IRS).no_ack().syn(), REMOTE_IP, LOCAL_IP);
    frame[40] ^= 1;
    t.send_frame(&frame);
    let mut frame = build_frame(&t.seg_in().seq(IRS).no_ack().syn(), REMOTE_IP, LOCAL_IP);
    frame[46] = 0x20; // data offset 2 words: shorter than a header
    t.send_frame(&frame);
    let mut frame = build_frame(&t.seg_in().seq(IRS).no_ack().syn().src_port(0), REMOTE_IP, LOCAL_IP);
    frame[34..36].copy_from_slice(&[0, 0]);
    t.send_frame(&frame);
    let c = t.shard.counters();
    assert_eq!(c.dropped(DropReason::TcpBadChecksum), 1);
    assert_eq!(c.dropped(DropReason::TcpTruncated), 1);
    assert_eq!(c.dropped(DropReason::TcpMalformed), 1, "port 0");
    assert!(t.frames().is_empty());
    assert_eq!(t.shard.connection_count(), 0);
}

fn refill_ip_checksum(frame: &mut [u8]) {
    let ihl = ((frame[14] & 0x0f) as usize) * 4;
    frame[24..26].copy_from_slice(&[0, 0]);
    let sum = crate::checksum::checksum(&frame[14..14 + ihl]);
    frame[24..26].copy_from_slice(&sum.to_be_bytes());
}
