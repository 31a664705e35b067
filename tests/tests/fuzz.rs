//! A shard under a barrage of random and mutated frames never panics, counts
//! what it drops, and keeps serving a live connection byte-exactly.

use core::net::{Ipv4Addr, Ipv6Addr};

use fairway_nic::sim::{LinkConfig, Side};
use fairway_stack::time::{Duration, Instant};
use fairway_stack::{DropReason, FlowStats, Ipv6Config, solicited_node};
use fairway_tests::reqresp::{Mode, RequestResponse, Workload};
use fairway_tests::scenario::{SERVER_IP, client_ip};
use fairway_tests::world::{Stop, World};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetFrame, EthernetProtocol, Icmpv4Packet, Icmpv4Repr,
    Icmpv6Packet, Icmpv6Repr, IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, NdiscRepr, RawHardwareAddress,
    TcpPacket,
};

const FRAMES: usize = 100_000;

/// The server's IPv6 address (beside its link-local one).
const SERVER_V6: Ipv6Addr = Ipv6Addr::new(0xfd77, 0, 0, 0, 0, 0, 0, 1);
/// The peer the IPv6 frames come from.
const PEER_V6: Ipv6Addr = Ipv6Addr::new(0xfd77, 0, 0, 0, 0, 0, 0, 2);

/// What the fuzzer knows about the live connection, so its frames can aim
/// at it.
#[derive(Clone, Copy)]
struct Target {
    server_mac: [u8; 6],
    client_mac: [u8; 6],
    client_ip: Ipv4Addr,
    client_port: u16,
}

struct Fuzzer {
    rng: Xoshiro256PlusPlus,
    target: Target,
    n: usize,
}

impl Fuzzer {
    fn frame(&mut self) -> Vec<u8> {
        self.n += 1;
        let kind = self.n % 12;
        let mut frame = match kind {
            0 => self.random_bytes(),
            1..=4 => self.tcp(false),
            5 => self.tcp(true),
            6 => self.ipv4_mangled(),
            7 => self.arp(),
            8 => self.icmp(),
            9 => self.syn_flood(),
            _ => self.ipv6(),
        };
        // A third of everything is further damaged: bytes flipped or cut.
        if self.rng.random_range(0..3) == 0 {
            self.mutate(&mut frame);
        }
        frame
    }

    fn random_bytes(&mut self) -> Vec<u8> {
        let len = self.rng.random_range(0..1600);
        let mut f: Vec<u8> = (0..len).map(|_| self.rng.random()).collect();
        if f.len() >= 14 && self.rng.random() {
            // Often addressed to us, so it gets past the Ethernet check.
            f[..6].copy_from_slice(&self.target.server_mac);
            f[12..14].copy_from_slice(&[0x08, 0x00]);
        }
        f
    }

    fn eth_ip(&mut self, protocol: IpProtocol, payload_len: usize) -> Vec<u8> {
        let mut f = vec![0u8; 34 + payload_len];
        let mut eth = EthernetFrame::new_unchecked(&mut f[..]);
        eth.set_dst_addr(EthernetAddress(self.target.server_mac));
        eth.set_src_addr(EthernetAddress(self.target.client_mac));
        eth.set_ethertype(EthernetProtocol::Ipv4);
        let src = if self.rng.random_range(0..4) == 0 {
            Ipv4Addr::from_bits(self.rng.random())
        } else {
            self.target.client_ip
        };
        let repr = Ipv4Repr { src_addr: src, dst_addr: SERVER_IP, next_header: protocol, payload_len, hop_limit: 64 };
        repr.emit(&mut Ipv4Packet::new_unchecked(&mut f[14..]), &ChecksumCapabilities::default());
        f
    }

    /// A TCP segment, usually on the live tuple, with random sequence and
    /// acknowledgment numbers (out of window nearly always), any flag
    /// combination, window, options and payload; checksums correct unless
    /// `bad_offset` asks for a random data offset.
    fn tcp(&mut self, bad_offset: bool) -> Vec<u8> {
        let payload_len = if self.rng.random() { 0 } else { self.rng.random_range(0..1400) };
        let options_len = 4 * self.rng.random_range(0..5usize);
        let tcp_len = 20 + options_len + payload_len;
        let mut f = self.eth_ip(IpProtocol::Tcp, tcp_len);
        let src_ip = Ipv4Packet::new_unchecked(&f[14..]).src_addr();
        for b in &mut f[34..] {
            *b = self.rng.random();
        }
        let live = self.rng.random_range(0..4) != 0;
        let mut tcp = TcpPacket::new_unchecked(&mut f[34..]);
        tcp.set_src_port(if live { self.target.client_port } else { self.rng.random() });
        tcp.set_dst_port(if live || self.rng.random() { 80 } else { self.rng.random() });
        tcp.set_header_len(if bad_offset { self.rng.random_range(0..16u8) * 4 } else { (20 + options_len) as u8 });
        // Every flag combination, in turn.
        let flags = (self.n / 10) as u8;
        let raw = tcp.into_inner();
        raw[13] = flags;
        let mut tcp = TcpPacket::new_unchecked(raw);
        tcp.fill_checksum(&src_ip.into(), &SERVER_IP.into());
        f
    }

    fn ipv4_mangled(&mut self) -> Vec<u8> {
        let mut f = self.tcp(false);
        match self.rng.random_range(0..5) {
            0 => f[14] = 0x40 | self.rng.random_range(0..16u8), // IHL
            1 => f[16..18].copy_from_slice(&self.rng.random::<u16>().to_be_bytes()), // total length
            2 => f[20] = self.rng.random(),                     // flags and fragment offset
            3 => f[23] = self.rng.random(),                     // protocol
            _ => f[14] = self.rng.random(),                     // version
        }
        if self.rng.random() {
            let mut ip = Ipv4Packet::new_unchecked(&mut f[14..]);
            if (ip.header_len() as usize) >= 20 && (ip.header_len() as usize) <= ip.as_ref().len() {
                ip.fill_checksum();
            }
        }
        f
    }

    fn arp(&mut self) -> Vec<u8> {
        let repr = ArpRepr::EthernetIpv4 {
            operation: if self.rng.random() { ArpOperation::Request } else { ArpOperation::Reply },
            source_hardware_addr: EthernetAddress(self.rng.random()),
            source_protocol_addr: Ipv4Addr::from_bits(self.rng.random()),
            target_hardware_addr: EthernetAddress(self.rng.random()),
            target_protocol_addr: if self.rng.random() { SERVER_IP } else { Ipv4Addr::from_bits(self.rng.random()) },
        };
        let mut f = vec![0u8; 14 + repr.buffer_len()];
        let mut eth = EthernetFrame::new_unchecked(&mut f[..]);
        eth.set_dst_addr(EthernetAddress::BROADCAST);
        eth.set_src_addr(EthernetAddress(self.rng.random()));
        eth.set_ethertype(EthernetProtocol::Arp);
        repr.emit(&mut ArpPacket::new_unchecked(&mut f[14..]));
        f
    }

    fn icmp(&mut self) -> Vec<u8> {
        let data: Vec<u8> = (0..self.rng.random_range(0..1400)).map(|_| self.rng.random()).collect();
        let repr = Icmpv4Repr::EchoRequest { ident: self.rng.random(), seq_no: self.rng.random(), data: &data };
        let mut f = self.eth_ip(IpProtocol::Icmp, repr.buffer_len());
        repr.emit(&mut Icmpv4Packet::new_unchecked(&mut f[34..]), &ChecksumCapabilities::default());
        if self.rng.random() {
            f[34] = self.rng.random(); // another ICMP type
        }
        f
    }

    fn syn_flood(&mut self) -> Vec<u8> {
        let mut f = self.eth_ip(IpProtocol::Tcp, 20);
        let src_ip = Ipv4Packet::new_unchecked(&f[14..]).src_addr();
        let mut tcp = TcpPacket::new_unchecked(&mut f[34..]);
        tcp.set_src_port(self.rng.random_range(1..u16::MAX));
        tcp.set_dst_port(80);
        tcp.set_seq_number(smoltcp::wire::TcpSeqNumber(self.rng.random()));
        tcp.set_header_len(20);
        tcp.set_syn(true);
        tcp.set_window_len(self.rng.random());
        tcp.fill_checksum(&src_ip.into(), &SERVER_IP.into());
        f
    }

    /// An IPv6 packet behind a random chain of extension headers (options
    /// with random contents, routing headers with any type and segments
    /// left, fragments, Hop-by-Hop anywhere), carrying an echo request, a
    /// neighbour solicitation, UDP, TCP or an unknown protocol, to one of
    /// our addresses or groups or elsewhere, sometimes from `::`, with a
    /// payload length that is sometimes wrong.
    fn ipv6(&mut self) -> Vec<u8> {
        let group = solicited_node(SERVER_V6);
        let dst = match self.rng.random_range(0..4) {
            0 => group,
            1 => Ipv6Addr::new(0xff02, 0, 0, 0, 0, 0, 0, 1),
            2 => Ipv6Addr::from_bits(self.rng.random()),
            _ => SERVER_V6,
        };
        let src = if self.rng.random_range(0..8) == 0 { Ipv6Addr::UNSPECIFIED } else { PEER_V6 };
        let data: Vec<u8> = (0..self.rng.random_range(0..64)).map(|_| self.rng.random()).collect();
        let (mut upper, protocol) = match self.rng.random_range(0..5) {
            0 => (
                self.icmpv6(src, dst, &Icmpv6Repr::EchoRequest { ident: 1, seq_no: 2, data: &data }),
                IpProtocol::Icmpv6,
            ),
            1 => {
                let lladdr = self
                    .rng
                    .random::<bool>()
                    .then(|| RawHardwareAddress::from(EthernetAddress(self.target.client_mac)));
                let ns = NdiscRepr::NeighborSolicit { target_addr: SERVER_V6, lladdr };
                (self.icmpv6(src, dst, &Icmpv6Repr::Ndisc(ns)), IpProtocol::Icmpv6)
            }
            2 => ([&[0x30, 0x39, 0, 53, 0, 8, 0, 0][..], &data].concat(), IpProtocol::Udp),
            3 => (data.clone(), IpProtocol::Tcp),
            _ => (data.clone(), IpProtocol::Unknown(self.rng.random_range(140..=252))),
        };
        // The chain, built back to front: each header names the next.
        let mut next = protocol;
        for _ in 0..self.rng.random_range(0..4) {
            let kind = [IpProtocol::HopByHop, IpProtocol::Ipv6Opts, IpProtocol::Ipv6Route, IpProtocol::Ipv6Frag]
                [self.rng.random_range(0..4)];
            let units = if kind == IpProtocol::Ipv6Frag { 0 } else { self.rng.random_range(0..3usize) };
            let mut header = vec![0u8; (units + 1) * 8];
            for b in &mut header[2..] {
                *b = if self.rng.random() { 0 } else { self.rng.random() };
            }
            header[0] = u8::from(next);
            header[1] = if kind == IpProtocol::Ipv6Frag { 0 } else { units as u8 };
            upper = [header, upper].concat();
            next = kind;
        }
        let hop_limit = if self.rng.random() { 255 } else { self.rng.random() };
        let repr = Ipv6Repr { src_addr: src, dst_addr: dst, next_header: next, payload_len: upper.len(), hop_limit };
        let mut f = vec![0u8; 14 + 40 + upper.len()];
        let dst_mac = if dst.is_multicast() {
            let o = dst.octets();
            [0x33, 0x33, o[12], o[13], o[14], o[15]]
        } else {
            self.target.server_mac
        };
        let mut eth = EthernetFrame::new_unchecked(&mut f[..]);
        eth.set_dst_addr(EthernetAddress(dst_mac));
        eth.set_src_addr(EthernetAddress(self.target.client_mac));
        eth.set_ethertype(EthernetProtocol::Ipv6);
        repr.emit(&mut Ipv6Packet::new_unchecked(&mut f[14..54]));
        f[54..].copy_from_slice(&upper);
        if self.rng.random_range(0..8) == 0 {
            // A payload length that does not match.
            f[18..20].copy_from_slice(&self.rng.random::<u16>().to_be_bytes());
        }
        f
    }

    fn icmpv6(&mut self, src: Ipv6Addr, dst: Ipv6Addr, repr: &Icmpv6Repr<'_>) -> Vec<u8> {
        let mut bytes = vec![0u8; repr.buffer_len()];
        repr.emit(&src, &dst, &mut Icmpv6Packet::new_unchecked(&mut bytes[..]), &ChecksumCapabilities::default());
        bytes
    }

    fn mutate(&mut self, frame: &mut Vec<u8>) {
        if frame.is_empty() {
            return;
        }
        if self.rng.random() {
            let len = self.rng.random_range(0..frame.len());
            frame.truncate(len);
        } else {
            for _ in 0..self.rng.random_range(1..4) {
                let i = self.rng.random_range(0..frame.len());
                frame[i] ^= self.rng.random_range(1..=255u8);
            }
        }
    }
}

#[test]
fn random_and_mutated_frames_never_panic_and_the_live_connection_survives() {
    let link = LinkConfig::ideal().with_delay(Duration::from_micros(200)).with_bandwidth_mbps(1000);
    let mut world = World::new(3, 1500, link, link);
    let mut server_cfg = world.config_for(SERVER_IP);
    server_cfg.limits.syn_backlog = 256;
    // With the path cache and careful resume on, as the server runs them.
    server_cfg.tcp.fast_start = fairway_stack::FastStart::CarefulResume;
    server_cfg.ipv6 = Some(Ipv6Config { dad_transmits: 0, ..Ipv6Config::new(vec![(SERVER_V6, 64)]) });
    let server = world.add_host(Side::Right, server_cfg, LinkConfig::ideal());
    let client = world.add_host(Side::Left, world.config_for(client_ip(0)), LinkConfig::ideal());
    let mut app = RequestResponse::new(
        2,
        server,
        SERVER_IP,
        Workload { mode: Mode::KeepAlive, conns_per_client: 1, request_len: 300, response_len: 5000, target: 10 },
    );
    let until = Instant::from_secs(3600);
    assert_eq!(world.run(&mut app, until, 1_000_000), Stop::Done);

    let live = app.client_handles(client).next().expect("a live connection");
    let flow: FlowStats = world.hosts[client].shard.flow(live).expect("live flow");
    let target = Target {
        server_mac: World::mac_of(SERVER_IP),
        client_mac: World::mac_of(client_ip(0)),
        client_ip: client_ip(0),
        client_port: flow.local.port(),
    };
    let mut fuzzer = Fuzzer { rng: Xoshiro256PlusPlus::seed_from_u64(99), target, n: 0 };

    // Interleave the barrage with live traffic: a batch of junk, then a
    // stretch of normal operation.
    let mut sent = 0;
    while sent < FRAMES {
        let now = world.now();
        for _ in 0..100 {
            let frame = fuzzer.frame();
            world.hosts[server].shard.handle_frame(now, &frame);
            sent += 1;
        }
        app.target += 1;
        let stop = world.run(&mut app, until, 1_000_000);
        assert_eq!(stop, Stop::Done, "the live connection stalled after {sent} junk frames");
    }

    assert_eq!(app.errors, 0, "every response byte-exact, no connection failed");
    assert_eq!(app.completed, 10 + (FRAMES / 100) as u64);
    assert_eq!(app.client_handles(client).next(), Some(live), "still the same connection");
    let counters = world.hosts[server].shard.counters().clone();
    println!("{counters}");
    assert!(counters.frames_in >= FRAMES as u64);
    for reason in [
        DropReason::EthernetTruncated,
        DropReason::TcpBadChecksum,
        DropReason::TcpTruncated,
        DropReason::TcpOutOfWindow,
        DropReason::Ipv4BadChecksum,
        DropReason::Ipv6Truncated,
        DropReason::Ipv6BadExtension,
        DropReason::Ipv6Fragment,
        DropReason::Ipv6UnknownProtocol,
        DropReason::Icmpv6Malformed,
        DropReason::NdpInvalid,
    ] {
        assert!(counters.dropped(reason) > 0, "{} never counted", reason.label());
    }
    assert!(counters.neighbor_adverts > 0 && counters.param_problems_sent > 0, "{counters}");
    // The SYN flood is bounded by the SYN queue.
    assert!(
        world.hosts[server].shard.connection_count() <= 256 + 1,
        "{}",
        world.hosts[server].shard.connection_count()
    );
}
