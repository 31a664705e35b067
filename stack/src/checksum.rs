//! The Internet checksum (RFC 1071), fast.
//!
//! Every frame in and out is summed, so this is on the hot path. A plain
//! reference implementation lives beside the fast one; property tests and the
//! `checksum` bench compare them.
//!
//! The fast path relies on two properties from RFC 1071 §2:
//! - **Wider words.** Ones' complement addition of 32-bit (or 64-bit) words,
//!   folded to 16 bits at the end, equals the sum of the 16-bit words, because
//!   2^16 ≡ 1 (mod 2^16 − 1). We read 8 bytes at a time and add their two
//!   32-bit halves into a `u64`, deferring every carry to the final fold; the
//!   carry-free adds let the compiler vectorise the loop.
//! - **Byte order independence.** Summing words in host order yields the
//!   byte-swapped network-order sum, so one swap after folding replaces a
//!   swap per word.

use smoltcp::wire::Ipv4Address;

/// A running ones'-complement sum, not yet folded to 16 bits.
///
/// Bytes added with [`Sum::add_bytes`] are taken as starting at an even offset
/// of the summed data.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Sum(u64);

impl Sum {
    /// An empty sum.
    #[must_use]
    pub const fn new() -> Sum {
        Sum(0)
    }

    /// Adds `data`, in network byte order, taken to start at an even offset.
    #[must_use]
    #[inline]
    pub fn add_bytes(self, data: &[u8]) -> Sum {
        let folded = fold_u64(native_sum(data));
        // The words were read in host order; RFC 1071 §2(B): swapping the
        // folded sum gives the sum of the network-order words.
        let network = if cfg!(target_endian = "little") { folded.swap_bytes() } else { folded };
        // Each call adds at most 0xffff, so the u64 cannot overflow in practice
        // (that would take 2^48 calls on one sum).
        Sum(self.0 + u64::from(network))
    }

    /// Copies `src` into `dst` (of the same length) and adds the copied
    /// bytes: the sum is taken from `dst` right after the copy, while it is
    /// still in the L1 cache, so the source is read once. (A loop that
    /// copies and sums each word is turned back into a `memcpy` and a
    /// second pass by the compiler, and measured slower in the loopback
    /// benchmark.) The bytes are taken to start at an odd offset of the
    /// summed data when `odd` is set (the second part of a ring that wrapped
    /// after an odd count, say): RFC 1071 §2(B), a sum of bytes shifted by
    /// one is the byte-swapped sum.
    ///
    /// # Panics
    ///
    /// When the lengths differ (as `copy_from_slice`).
    #[must_use]
    #[inline]
    pub fn add_copy(self, dst: &mut [u8], src: &[u8], odd: bool) -> Sum {
        dst.copy_from_slice(src);
        let part = Sum::new().add_bytes(dst).fold();
        Sum(self.0 + u64::from(if odd { part.swap_bytes() } else { part }))
    }

    /// Adds another running sum (of bytes that follow at an even offset).
    #[must_use]
    #[inline]
    pub fn add_sum(self, other: Sum) -> Sum {
        Sum(self.0 + other.0)
    }

    /// Adds one 16-bit word given in host order.
    #[must_use]
    #[inline]
    pub fn add_u16(self, word: u16) -> Sum {
        Sum(self.0 + word as u64)
    }

    /// Folds the sum to 16 bits (ones' complement addition of the halves).
    #[must_use]
    #[inline]
    pub fn fold(self) -> u16 {
        fold_u64(self.0)
    }

    /// The value for a checksum field: the complement of the folded sum.
    #[must_use]
    #[inline]
    pub fn finish(self) -> u16 {
        !self.fold()
    }
}

/// The IPv4 pseudo-header sum for TCP or UDP (RFC 9293 §3.1).
#[must_use]
#[inline]
pub fn pseudo_header(src: Ipv4Address, dst: Ipv4Address, protocol: u8, length: u16) -> Sum {
    let [s0, s1, s2, s3] = src.octets();
    let [d0, d1, d2, d3] = dst.octets();
    // RFC 9293 §3.1: source address, destination address, a zero byte and the
    // protocol, and the TCP length, as 16-bit words.
    Sum::new()
        .add_u16(u16::from_be_bytes([s0, s1]))
        .add_u16(u16::from_be_bytes([s2, s3]))
        .add_u16(u16::from_be_bytes([d0, d1]))
        .add_u16(u16::from_be_bytes([d2, d3]))
        .add_u16(u16::from(protocol))
        .add_u16(length)
}

/// The IPv6 pseudo-header sum for TCP, UDP or ICMPv6 (RFC 8200 §8.1):
/// the addresses, the upper-layer length and the next header.
#[must_use]
#[inline]
pub fn pseudo_header_v6(src: core::net::Ipv6Addr, dst: core::net::Ipv6Addr, protocol: u8, length: u32) -> Sum {
    Sum::new()
        .add_bytes(&src.octets())
        .add_bytes(&dst.octets())
        .add_u16((length >> 16) as u16)
        .add_u16(length as u16)
        .add_u16(u16::from(protocol))
}

/// The checksum field value for `data`: `!fold(sum(data))`.
#[must_use]
#[inline]
pub fn checksum(data: &[u8]) -> u16 {
    Sum::new().add_bytes(data).finish()
}

/// A plain, obviously correct RFC 1071 sum, folded and complemented. For tests
/// and benchmarks only.
#[must_use]
pub fn reference(data: &[u8]) -> u16 {
    let (pairs, odd) = data.as_chunks::<2>();
    let mut sum: u64 = 0;
    for pair in pairs {
        sum += u64::from(u16::from_be_bytes(*pair));
    }
    // An odd final byte is the high byte of a word padded with zero.
    if let [last] = odd {
        sum += u64::from(*last) << 8;
    }
    // End-around carry, one 16-bit step at a time.
    while sum > 0xffff {
        sum = (sum & 0xffff) + (sum >> 16);
    }
    !(sum as u16)
}

/// Input is summed in segments of this many bytes, each folded before the
/// next, so the accumulators cannot overflow: a 32-byte block adds less than
/// 2^34 to each, and a segment holds 2^25 blocks. Real frames are one segment.
const SEGMENT: usize = 1 << 30;

/// The sum of `data` as host-order words, with carries still pending. The
/// result is congruent, modulo 2^16 − 1, to the sum of its host-order 16-bit
/// words, and is zero only when every byte is.
#[inline]
fn native_sum(data: &[u8]) -> u64 {
    if data.len() <= SEGMENT {
        return fold_to_u32(segment_sum(data));
    }
    data.chunks(SEGMENT).map(|segment| fold_to_u32(segment_sum(segment))).sum()
}

/// The carry-deferred sum of at most [`SEGMENT`] bytes.
#[inline]
fn segment_sum(data: &[u8]) -> u64 {
    let (blocks, rest) = data.as_chunks::<32>();
    // Two independent accumulators shorten the dependency chain for inputs
    // too short to vectorise well (headers).
    let (mut even, mut odd) = (0u64, 0u64);
    for block in blocks {
        let (words, _) = block.as_chunks::<8>();
        even += halves(words[0]) + halves(words[2]);
        odd += halves(words[1]) + halves(words[3]);
    }
    let mut acc = even + odd;
    let (words, tail) = rest.as_chunks::<8>();
    for word in words {
        acc += halves(*word);
    }
    if !tail.is_empty() {
        // Zero padding after the data leaves the sum unchanged, and the tail
        // starts at a multiple of 8 so its words keep their alignment.
        let mut padded = [0u8; 8];
        padded[..tail.len()].copy_from_slice(tail);
        acc += halves(padded);
    }
    acc
}

/// The two 32-bit halves of a host-order 8-byte word, added without carry
/// loss (the result is below 2^33).
#[inline(always)]
fn halves(word: [u8; 8]) -> u64 {
    let word = u64::from_ne_bytes(word);
    (word & 0xffff_ffff) + (word >> 32)
}

/// Folds to at most 33 bits; keeps the value's residue modulo 2^16 − 1.
#[inline]
fn fold_to_u32(sum: u64) -> u64 {
    (sum & 0xffff_ffff) + (sum >> 32)
}

/// Ones' complement fold of a 64-bit sum to 16 bits.
#[inline]
fn fold_u64(sum: u64) -> u16 {
    let mut sum = fold_to_u32(sum); // < 2^33
    sum = (sum & 0xffff) + (sum >> 16); // < 0x3_0000
    sum = (sum & 0xffff) + (sum >> 16); // <= 0x1_0001
    sum = (sum & 0xffff) + (sum >> 16); // <= 0xffff
    sum as u16
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use smoltcp::wire::{IpAddress, TcpPacket};

    /// The folded sum of `data` by the reference implementation.
    fn reference_fold(data: &[u8]) -> u16 {
        !reference(data)
    }

    #[test]
    fn rfc1071_example() {
        // RFC 1071 §3: bytes 00 01 f2 03 f4 f5 f6 f7 sum to 0xddf2.
        let data = [0x00, 0x01, 0xf2, 0x03, 0xf4, 0xf5, 0xf6, 0xf7];
        assert_eq!(Sum::new().add_bytes(&data).fold(), 0xddf2);
        assert_eq!(checksum(&data), !0xddf2);
        assert_eq!(reference(&data), !0xddf2);
    }

    #[test]
    fn ipv4_header_vector() {
        // A captured IPv4 header whose checksum field holds 0xb861.
        let mut header = [
            0x45, 0x00, 0x00, 0x73, 0x00, 0x00, 0x40, 0x00, 0x40, 0x11, 0x00, 0x00, 0xc0, 0xa8, 0x00, 0x01, 0xc0, 0xa8,
            0x00, 0xc7,
        ];
        assert_eq!(checksum(&header), 0xb861);
        header[10..12].copy_from_slice(&0xb861u16.to_be_bytes());
        assert_eq!(Sum::new().add_bytes(&header).fold(), 0xffff);
        assert_eq!(checksum(&header), 0);
    }

    #[test]
    fn empty_and_zero_inputs() {
        assert_eq!(Sum::new().fold(), 0);
        assert_eq!(checksum(&[]), 0xffff);
        assert_eq!(reference(&[]), 0xffff);
        assert_eq!(checksum(&[0; 37]), 0xffff);
    }

    #[test]
    fn odd_tail_is_a_high_byte() {
        assert_eq!(Sum::new().add_bytes(&[0xab]).fold(), 0xab00);
        assert_eq!(Sum::new().add_bytes(&[0x12, 0x34, 0xab]).fold(), 0x1234 + 0xab00);
        for len in 0..=80 {
            let data: Vec<u8> = (0..len).map(|i| (i * 37 + 11) as u8).collect();
            assert_eq!(checksum(&data), reference(&data), "length {len}");
        }
    }

    #[test]
    fn carries_wrap_around() {
        // All-ones words stress every carry: the sum of n words of 0xffff is
        // 0xffff for any n > 0.
        for len in [2, 8, 32, 33, 1500, 65535] {
            let data = vec![0xff; len];
            assert_eq!(checksum(&data), reference(&data), "length {len}");
        }
        assert_eq!(Sum::new().add_bytes(&[0xff; 64]).fold(), 0xffff);
        assert_eq!(Sum::new().add_u16(0xffff).add_u16(0x0001).fold(), 0x0001);
    }

    #[test]
    fn add_u16_matches_bytes() {
        let word = 0xbeefu16;
        assert_eq!(Sum::new().add_u16(word).fold(), Sum::new().add_bytes(&word.to_be_bytes()).fold());
    }

    #[test]
    fn fold_of_large_sums() {
        assert_eq!(Sum(u64::MAX).fold(), 0xffff);
        assert_eq!(Sum(0x1_0000).fold(), 1);
        assert_eq!(Sum(0xffff_0001).fold(), 1);
        assert_eq!(Sum(0x0001_0000_0000_0000).fold(), 1);
    }

    #[test]
    fn pseudo_header_words() {
        let src = Ipv4Address::new(10, 0, 0, 1);
        let dst = Ipv4Address::new(192, 168, 1, 2);
        let bytes = [10, 0, 0, 1, 192, 168, 1, 2, 0, 6, 0x05, 0xdc];
        assert_eq!(pseudo_header(src, dst, 6, 1500).fold(), Sum::new().add_bytes(&bytes).fold());
    }

    proptest! {
        #[test]
        fn fast_equals_reference(data in proptest::collection::vec(any::<u8>(), 0..10_000), skip in 0usize..8) {
            // `skip` moves the start off any alignment the allocator gave us.
            let data = data.get(skip..).unwrap_or_default();
            prop_assert_eq!(checksum(data), reference(data));
        }

        #[test]
        fn split_at_even_offset_equals_whole(
            data in proptest::collection::vec(any::<u8>(), 0..10_000),
            split in any::<proptest::sample::Index>(),
        ) {
            let at = split.index(data.len() / 2 + 1) * 2;
            let (head, tail) = data.split_at(at);
            let parts = Sum::new().add_bytes(head).add_bytes(tail).fold();
            prop_assert_eq!(parts, Sum::new().add_bytes(&data).fold());
            prop_assert_eq!(parts, reference_fold(&data));
        }

        #[test]
        fn a_copy_sums_what_it_copies_at_either_parity(
            data in proptest::collection::vec(any::<u8>(), 0..5_000),
            split in any::<proptest::sample::Index>(),
        ) {
            // Two parts at any split, as a ring that wrapped hands them over.
            let at = split.index(data.len() + 1);
            let (head, tail) = data.split_at(at);
            let mut copy = vec![0u8; data.len()];
            let (to_head, to_tail) = copy.split_at_mut(at);
            let sum = Sum::new().add_copy(to_head, head, false).add_copy(to_tail, tail, at % 2 == 1);
            prop_assert_eq!(&copy, &data);
            prop_assert_eq!(sum.fold(), reference_fold(&data));
        }

        #[test]
        fn filled_checksum_verifies(
            mut data in proptest::collection::vec(any::<u8>(), 2..4_000),
            field in any::<proptest::sample::Index>(),
        ) {
            let at = field.index(data.len() / 2) * 2;
            data[at..at + 2].fill(0);
            let value = checksum(&data);
            data[at..at + 2].copy_from_slice(&value.to_be_bytes());
            prop_assert_eq!(Sum::new().add_bytes(&data).fold(), 0xffff);
            prop_assert_eq!(reference(&data), 0);
        }

        #[test]
        fn tcp_checksum_matches_smoltcp(
            src in any::<[u8; 4]>(),
            dst in any::<[u8; 4]>(),
            segment in proptest::collection::vec(any::<u8>(), 20..3_000),
        ) {
            let (src, dst) = (Ipv4Address::from(src), Ipv4Address::from(dst));
            let mut buffer = segment;
            let length = buffer.len() as u16;
            let mut packet = TcpPacket::new_unchecked(&mut buffer[..]);
            packet.set_header_len(20);
            packet.fill_checksum(&IpAddress::Ipv4(src), &IpAddress::Ipv4(dst));
            let expected = packet.checksum();

            // Ours: pseudo-header plus the segment with its field zeroed.
            let mut zeroed = buffer.clone();
            zeroed[16..18].fill(0);
            let ours = pseudo_header(src, dst, 6, length).add_bytes(&zeroed).finish();
            prop_assert_eq!(ours, expected);
            // And the filled segment verifies.
            prop_assert_eq!(pseudo_header(src, dst, 6, length).add_bytes(&buffer).fold(), 0xffff);
        }
    }
}
