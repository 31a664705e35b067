//! Which shard owns a flow: a symmetric hash of the 4-tuple.
//!
//! Every frame of a TCP flow must reach the one shard that holds its
//! connection. Hardware queues (RSS on a NIC, the transmit hash of a veth
//! peer) place flows with hashes we cannot reproduce, so the runtime moves
//! frames that land on the wrong queue to their owner, and the owner is
//! decided here. The hash is symmetric (both directions of a flow give the
//! same owner) and deterministic, so a shard that opens a connection can pick
//! a local port whose flow it will own ([`crate::Config::steering`]).

use core::net::{Ipv4Addr, Ipv6Addr};

use crate::flow_table::FourTuple;

/// This shard's place among the shards that share an interface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Steering {
    /// This shard's index, below `count`.
    pub index: u16,
    /// How many shards share the interface (at least 1).
    pub count: u16,
}

impl Steering {
    /// Whether this shard owns the flow `tuple`.
    #[must_use]
    pub fn owns(&self, tuple: &FourTuple) -> bool {
        owner_of_tuple(tuple, self.count) == self.index
    }
}

/// The shard, out of `count`, that owns the flow between `a` and `b`
/// (addresses and ports); `owner(a, b) == owner(b, a)`. With `count` 0 or 1
/// it is shard 0.
#[must_use]
pub fn owner(a: (Ipv4Addr, u16), b: (Ipv4Addr, u16), count: u16) -> u16 {
    if count <= 1 {
        return 0;
    }
    let key = |(ip, port): (Ipv4Addr, u16)| (u64::from(u32::from(ip)) << 16) | u64::from(port);
    pick(key(a), key(b), count)
}

/// [`owner`] for an IPv6 flow.
#[must_use]
pub fn owner6(a: (Ipv6Addr, u16), b: (Ipv6Addr, u16), count: u16) -> u16 {
    if count <= 1 {
        return 0;
    }
    let key = |(ip, port): (Ipv6Addr, u16)| {
        let bits = ip.to_bits();
        mix(bits as u64 ^ mix((bits >> 64) as u64)) ^ u64::from(port)
    };
    pick(key(a), key(b), count)
}

/// The shard of the flow between endpoints keyed `x` and `y`, the same
/// whichever way round.
fn pick(x: u64, y: u64, count: u16) -> u16 {
    let (lo, hi) = if x <= y { (x, y) } else { (y, x) };
    let h = mix(lo ^ mix(hi));
    // Multiply-shift maps the hash onto 0..count without a division's bias
    // towards low indices.
    ((u128::from(h) * u128::from(count)) >> 64) as u16
}

/// [`owner`] of a connection's 4-tuple.
#[must_use]
pub fn owner_of_tuple(tuple: &FourTuple, count: u16) -> u16 {
    match tuple.ipv4() {
        Some((local, remote)) => owner((local, tuple.local_port), (remote, tuple.remote_port), count),
        None => owner6((tuple.local_ip, tuple.local_port), (tuple.remote_ip, tuple.remote_port), count),
    }
}

/// A 64-bit finaliser (splitmix64's): every input bit moves every output bit.
const fn mix(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn both_directions_of_an_ipv6_flow_have_the_same_owner(a: u128, pa: u16, b: u128, pb: u16, count in 1u16..64) {
            let (a, b) = ((Ipv6Addr::from_bits(a), pa), (Ipv6Addr::from_bits(b), pb));
            let o = owner6(a, b, count);
            prop_assert!(o < count);
            prop_assert_eq!(o, owner6(b, a, count));
            let tuple = FourTuple { local_ip: a.0, local_port: a.1, remote_ip: b.0, remote_port: b.1 };
            prop_assert_eq!(owner_of_tuple(&tuple, count), o);
        }

        #[test]
        fn both_directions_have_the_same_owner(a: u32, pa: u16, b: u32, pb: u16, count in 1u16..64) {
            let (a, b) = ((Ipv4Addr::from(a), pa), (Ipv4Addr::from(b), pb));
            let o = owner(a, b, count);
            prop_assert!(o < count);
            prop_assert_eq!(o, owner(b, a, count));
        }
    }

    #[test]
    fn ports_spread_evenly_over_the_shards() {
        let server = (Ipv4Addr::new(10, 77, 0, 1), 80);
        let client = Ipv4Addr::new(10, 77, 0, 10);
        for count in [2u16, 3, 4, 8] {
            let mut per_shard = vec![0u32; count as usize];
            for port in 32768..=60999 {
                per_shard[owner(server, (client, port), count) as usize] += 1;
            }
            let expected = (60999 - 32768 + 1) as f64 / count as f64;
            for n in per_shard {
                assert!((n as f64 - expected).abs() < expected * 0.05, "{count} shards: {n} vs {expected}");
            }
        }
    }

    #[test]
    fn one_shard_owns_everything() {
        let a = (Ipv4Addr::new(1, 2, 3, 4), 5);
        let b = (Ipv4Addr::new(6, 7, 8, 9), 10);
        assert_eq!((owner(a, b, 0), owner(a, b, 1)), (0, 0));
        let s = Steering { index: 0, count: 1 };
        let tuple = FourTuple::v4(a.0, b.0, a.1, b.1);
        assert!(s.owns(&tuple));
    }
}
