//! The Internet checksum: the fast implementation against the plain reference
//! one, and a TCP segment checksum against smoltcp's, over frame-sized inputs.

use std::hint::black_box;

use criterion::{BenchmarkId, Criterion, Throughput, criterion_group, criterion_main};
use fairway_stack::checksum::{self, pseudo_header};
use smoltcp::wire::{IpAddress, Ipv4Address, TcpPacket};

/// A minimum frame, a standard MTU, a jumbo frame and the largest IPv4 datagram.
const SIZES: [usize; 4] = [64, 1500, 9000, 65535];

/// Deterministic, irregular bytes (a multiplicative hash of the index).
fn data(len: usize) -> Vec<u8> {
    (0..len as u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect()
}

fn sum(c: &mut Criterion) {
    let mut group = c.benchmark_group("checksum");
    for size in SIZES {
        let data = data(size);
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::new("fast", size), &data, |b, data| {
            b.iter(|| checksum::checksum(black_box(data)))
        });
        group.bench_with_input(BenchmarkId::new("reference", size), &data, |b, data| {
            b.iter(|| checksum::reference(black_box(data)))
        });
    }
    group.finish();
}

/// A whole TCP segment (pseudo-header plus bytes), as the transmit path
/// computes it, next to smoltcp's `fill_checksum`.
fn tcp_segment(c: &mut Criterion) {
    let (src, dst) = (Ipv4Address::new(10, 0, 0, 1), Ipv4Address::new(10, 0, 0, 2));
    let mut group = c.benchmark_group("tcp_checksum");
    for size in SIZES {
        let mut segment = data(size);
        segment[12] = 5 << 4; // data offset: a 20-byte header
        segment[16..18].fill(0);
        group.throughput(Throughput::Bytes(size as u64));
        group.bench_with_input(BenchmarkId::new("fairway", size), &segment, |b, segment| {
            b.iter(|| {
                let segment = black_box(segment.as_slice());
                pseudo_header(src, dst, 6, segment.len() as u16).add_bytes(segment).finish()
            })
        });
        group.bench_function(BenchmarkId::new("smoltcp", size), |b| {
            let (src, dst) = (IpAddress::Ipv4(src), IpAddress::Ipv4(dst));
            b.iter(|| {
                let mut packet = TcpPacket::new_unchecked(black_box(segment.as_mut_slice()));
                packet.fill_checksum(&src, &dst);
                packet.checksum()
            })
        });
    }
    group.finish();
}

criterion_group!(benches, sum, tcp_segment);
criterion_main!(benches);
