//! The connection table: 4-tuple → connection key, O(1).
//!
//! A hash map keyed by a secret seed, so a peer choosing ports cannot aim its
//! flows at one bucket chain. Capacity grows with use and is kept, so steady
//! state inserts and removes allocate nothing.

use core::hash::{BuildHasher, Hash, Hasher};
use core::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

use foldhash::fast::FixedState;
use hashbrown::HashMap;

use crate::pool::Key;

/// A connection's identity, from our side, in either family: the
/// addresses are IPv6, an IPv4 connection's IPv4-mapped (`::ffff:a.b.c.d`),
/// so one table and one hash serve both.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FourTuple {
    /// Our address.
    pub local_ip: Ipv6Addr,
    /// The peer's address.
    pub remote_ip: Ipv6Addr,
    /// Our port.
    pub local_port: u16,
    /// The peer's port.
    pub remote_port: u16,
}

impl FourTuple {
    /// An IPv4 connection's tuple.
    #[inline]
    pub fn v4(local_ip: Ipv4Addr, remote_ip: Ipv4Addr, local_port: u16, remote_port: u16) -> FourTuple {
        FourTuple { local_ip: local_ip.to_ipv6_mapped(), remote_ip: remote_ip.to_ipv6_mapped(), local_port, remote_port }
    }

    /// The tuple of `local` and `remote`, both of one family (an IPv4
    /// address in IPv4-mapped form).
    pub fn new(local: SocketAddr, remote: SocketAddr) -> FourTuple {
        let mapped = |ip: IpAddr| match ip {
            IpAddr::V4(ip) => ip.to_ipv6_mapped(),
            IpAddr::V6(ip) => ip,
        };
        FourTuple {
            local_ip: mapped(local.ip()),
            remote_ip: mapped(remote.ip()),
            local_port: local.port(),
            remote_port: remote.port(),
        }
    }

    /// Our and the peer's IPv4 addresses, for an IPv4 connection.
    #[inline]
    pub fn ipv4(&self) -> Option<(Ipv4Addr, Ipv4Addr)> {
        Some((self.local_ip.to_ipv4_mapped()?, self.remote_ip.to_ipv4_mapped()?))
    }

    /// Our end as a socket address of its family.
    pub fn local(&self) -> SocketAddr {
        SocketAddr::new(self.local_ip.to_canonical(), self.local_port)
    }

    /// The peer's end as a socket address of its family.
    pub fn remote(&self) -> SocketAddr {
        SocketAddr::new(self.remote_ip.to_canonical(), self.remote_port)
    }
}

impl Hash for FourTuple {
    /// Three integer writes instead of four field hashes: this runs per
    /// frame.
    fn hash<H: Hasher>(&self, state: &mut H) {
        state.write_u128(self.local_ip.to_bits());
        state.write_u128(self.remote_ip.to_bits());
        state.write_u32((self.local_port as u32) << 16 | self.remote_port as u32);
    }
}

/// Maps 4-tuples to connection keys.
#[derive(Debug)]
pub struct FlowTable {
    map: HashMap<FourTuple, Key, FixedState>,
}

impl FlowTable {
    /// An empty table whose hash is keyed by `secret`.
    pub fn new(secret: u128) -> FlowTable {
        let seed = (secret as u64) ^ ((secret >> 64) as u64).rotate_left(17);
        FlowTable { map: HashMap::with_hasher(FixedState::with_seed(seed)) }
    }

    /// The connection for `tuple`.
    #[inline]
    pub fn get(&self, tuple: &FourTuple) -> Option<Key> {
        self.map.get(tuple).copied()
    }

    /// Adds a flow; returns the key it replaced, if any.
    pub fn insert(&mut self, tuple: FourTuple, key: Key) -> Option<Key> {
        self.map.insert(tuple, key)
    }

    /// Removes `tuple` if it maps to `key` (a stale removal must not drop a
    /// newer flow that reused the tuple).
    pub fn remove(&mut self, tuple: &FourTuple, key: Key) -> bool {
        if self.map.get(tuple) == Some(&key) {
            self.map.remove(tuple);
            true
        } else {
            false
        }
    }

    /// Whether `tuple` is in use.
    pub fn contains(&self, tuple: &FourTuple) -> bool {
        self.map.contains_key(tuple)
    }

    /// Flows in the table.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// No flows.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }

    /// Bytes of heap the table holds (buckets and control bytes).
    pub fn heap_bytes(&self) -> usize {
        let buckets = if self.map.capacity() == 0 { 0 } else { (self.map.capacity() * 8 / 7).next_power_of_two() };
        buckets * (core::mem::size_of::<(FourTuple, Key)>() + 1)
    }

    /// The hash a tuple gets in this table; exposed for benchmarks.
    pub fn hash_of(&self, tuple: &FourTuple) -> u64 {
        self.map.hasher().hash_one(tuple)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::pool::Slab;

    fn tuple(port: u16) -> FourTuple {
        FourTuple::v4(Ipv4Addr::new(10, 0, 0, 1), Ipv4Addr::new(10, 0, 0, 2), 80, port)
    }

    #[test]
    fn lookup_insert_remove() {
        let mut slab = Slab::new();
        let mut t = FlowTable::new(7);
        let a = slab.insert(());
        let b = slab.insert(());
        assert_eq!(t.insert(tuple(1), a), None);
        assert_eq!(t.insert(tuple(2), b), None);
        assert_eq!(t.get(&tuple(1)), Some(a));
        assert_eq!(t.get(&tuple(3)), None);
        assert!(!t.remove(&tuple(1), b), "a stale key must not remove a live flow");
        assert!(t.remove(&tuple(1), a));
        assert_eq!(t.get(&tuple(1)), None);
        assert_eq!(t.len(), 1);
    }

    #[test]
    fn different_secrets_hash_differently() {
        let a = FlowTable::new(1);
        let b = FlowTable::new(2);
        assert_ne!(a.hash_of(&tuple(1)), b.hash_of(&tuple(1)));
        assert_eq!(a.hash_of(&tuple(1)), FlowTable::new(1).hash_of(&tuple(1)));
    }
}
