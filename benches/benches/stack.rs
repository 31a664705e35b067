//! Stack micro-benchmarks: one data segment in and its ACK out on an
//! established connection, and connection-table lookups at 1k, 100k and 1M
//! connections.

use std::hint::black_box;
use std::net::{Ipv4Addr, SocketAddrV4};

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use fairway_stack::flow_table::{FlowTable, FourTuple};
use fairway_stack::pool::Slab;
use fairway_stack::time::{Duration, Instant};
use fairway_stack::{Config, Event, Shard};
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    EthernetAddress, EthernetFrame, EthernetProtocol, IpProtocol, Ipv4Packet, Ipv4Repr, TcpControl, TcpPacket, TcpRepr,
    TcpSeqNumber,
};

const OUR_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const PEER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
const OUR_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);

/// Writes a peer's TCP frame into `frame`; returns its length.
fn peer_frame(frame: &mut [u8], seq: u32, ack: Option<u32>, control: TcpControl, payload: &[u8]) -> usize {
    let repr = TcpRepr {
        src_port: 40_000,
        dst_port: 80,
        control,
        seq_number: TcpSeqNumber(seq as i32),
        ack_number: ack.map(|a| TcpSeqNumber(a as i32)),
        window_len: 65_535,
        window_scale: None,
        max_seg_size: (control == TcpControl::Syn).then_some(1460),
        sack_permitted: false,
        sack_ranges: [None; 3],
        timestamp: None,
        payload,
    };
    let tcp_len = repr.buffer_len();
    let mut eth = EthernetFrame::new_unchecked(&mut frame[..]);
    eth.set_dst_addr(EthernetAddress(OUR_MAC));
    eth.set_src_addr(EthernetAddress(PEER_MAC));
    eth.set_ethertype(EthernetProtocol::Ipv4);
    let ip = Ipv4Repr {
        src_addr: PEER_IP,
        dst_addr: OUR_IP,
        next_header: IpProtocol::Tcp,
        payload_len: tcp_len,
        hop_limit: 64,
    };
    let caps = ChecksumCapabilities::default();
    ip.emit(&mut Ipv4Packet::new_unchecked(&mut frame[14..34]), &caps);
    repr.emit(&mut TcpPacket::new_unchecked(&mut frame[34..34 + tcp_len]), &PEER_IP.into(), &OUR_IP.into(), &caps);
    34 + tcp_len
}

/// A shard with one established passive connection; returns it, the peer's
/// next sequence number and our ISS + 1.
fn established() -> (Shard, fairway_stack::Handle, u32, u32) {
    let mut config = Config::new(OUR_MAC, OUR_IP, 24);
    config.tcp.delayed_ack = Duration::ZERO; // an ACK for every segment
    let mut shard = Shard::new(config);
    shard.add_neighbor(PEER_IP, PEER_MAC);
    let listener = shard.listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80)).unwrap();
    let now = Instant::from_secs(1);
    let mut frame = vec![0u8; 1514];
    let mut out = vec![0u8; 1514];
    while shard.poll_transmit(now, &mut out).is_some() {}
    let irs = 7_000_000u32;
    let n = peer_frame(&mut frame, irs, None, TcpControl::Syn, &[]);
    shard.handle_frame(now, &frame[..n]);
    let len = shard.poll_transmit(now, &mut out).expect("SYN-ACK");
    let synack = TcpPacket::new_checked(&out[34..len]).unwrap();
    let iss = synack.seq_number().0 as u32;
    let n = peer_frame(&mut frame, irs + 1, Some(iss + 1), TcpControl::None, &[]);
    shard.handle_frame(now, &frame[..n]);
    assert_eq!(shard.poll_event(), Some(Event::Acceptable(listener)));
    let h = shard.accept(listener).unwrap();
    (shard, h, irs + 1, iss + 1)
}

fn segment_in_ack_out(c: &mut Criterion) {
    let mut group = c.benchmark_group("segment");
    for size in [64usize, 1460] {
        let (mut shard, h, mut seq, ack) = established();
        let payload = vec![0x5a; size];
        let mut frame = vec![0u8; 1514];
        let mut out = vec![0u8; 1514];
        let mut app = vec![0u8; 2048];
        let now = Instant::from_secs(2);
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_function(BenchmarkId::new("in_ack_out", size), |b| {
            b.iter(|| {
                let n = peer_frame(&mut frame, seq, Some(ack), TcpControl::Psh, &payload);
                shard.handle_frame(now, black_box(&frame[..n]));
                seq = seq.wrapping_add(size as u32);
                black_box(shard.recv(h, &mut app).unwrap());
                let ack_len = shard.poll_transmit(now, &mut out).expect("an ACK");
                black_box(&out[..ack_len]);
                while shard.poll_event().is_some() {}
            })
        });
    }
    group.finish();
}

fn tuple(i: u32) -> FourTuple {
    FourTuple::v4(OUR_IP, Ipv4Addr::from_bits(0x0a00_0000 | ((i >> 16) + 2)), 80, (i & 0xffff) as u16)
}

fn flow_table_lookup(c: &mut Criterion) {
    let mut group = c.benchmark_group("flow_table_lookup");
    for n in [1_000u32, 100_000, 1_000_000] {
        let mut slab = Slab::new();
        let mut table = FlowTable::new(0x5eed);
        for i in 0..n {
            table.insert(tuple(i), slab.insert(()));
        }
        // Look up in a scattered order, as arriving frames would.
        let probes: Vec<FourTuple> = (0..4096u32).map(|k| tuple(k.wrapping_mul(2_654_435_761) % n)).collect();
        group.throughput(Throughput::Elements(probes.len() as u64));
        group.bench_function(BenchmarkId::from_parameter(n), |b| {
            b.iter(|| {
                for t in &probes {
                    black_box(table.get(black_box(t)));
                }
            })
        });
    }
    group.finish();
}

criterion_group!(benches, segment_in_ack_out, flow_table_lookup);
criterion_main!(benches);
