//! Path memory: what recent connections learned about a path, for the next
//! connection to the same place (RFC 9040 §5, temporal sharing; and the
//! saved parameters of careful resume, RFC 9959, formerly
//! draft-ietf-tsvwg-careful-resume, §3.1 "Observing").
//!
//! One cache per shard, keyed by the peer's address prefix: by default the
//! host for IPv4 (a /32) and its /64 for IPv6, which is one host or one
//! link. A wider IPv4 prefix (a /24: the hosts behind one access link
//! share a bottleneck more often than not) is an option, not the default:
//! clients of one /24 behind very different paths would seed each other's
//! RTT (the testbed's clients, 4 and 256 ms apart in one /24, did: a
//! seeded SRTT a sixtieth of the path's made the server's first RTO
//! spurious, and equal-rate's uploads went uneven in 2 runs of 5). It
//! holds, per prefix, the
//! connection's RTT estimates (min-RTT, SRTT, RTTVAR), the window it used
//! in one round trip and the rate it delivered at, and the cwnd and
//! ssthresh it ended with.
//!
//! Bounded and allocation-free after [`PathCache::new`]: a set-associative
//! table of fixed capacity. A prefix hashes (keyed by the shard's secret, so
//! a peer cannot aim at a set) to one set of [`WAYS`] slots; a new prefix
//! takes an empty or expired slot of its set, else the least recently
//! updated one. Entries older than the configured lifetime are never
//! returned. The full prefix is stored, so no two prefixes ever share an
//! entry: a peer can only write its own prefix's, and only from a
//! connection that finished its handshake and had data acknowledged (the
//! connection checks that before it calls [`PathCache::update`]).

use core::hash::BuildHasher;
use core::net::IpAddr;

use foldhash::fast::FixedState;

use crate::time::{Duration, Instant};

/// Slots per set.
pub const WAYS: usize = 4;

/// How the path cache is sized and keyed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathMemoryConfig {
    /// Entries per shard, rounded up to a multiple of [`WAYS`]; 0 keeps
    /// nothing.
    pub capacity: usize,
    /// How long an entry may be used after it was last updated (careful
    /// resume's Lifetime, RFC 9959 §4.3.1).
    pub lifetime: Duration,
    /// The IPv4 prefix length that makes a path (32: the host).
    pub ipv4_prefix: u8,
    /// The IPv6 prefix length that makes a path (64: a /64).
    pub ipv6_prefix: u8,
}

impl Default for PathMemoryConfig {
    fn default() -> PathMemoryConfig {
        PathMemoryConfig { capacity: 1024, lifetime: Duration::from_secs(600), ipv4_prefix: 32, ipv6_prefix: 64 }
    }
}

/// A path: a peer's address with the host bits cleared, and the length
/// kept (IPv4 prefixes are stored IPv4-mapped).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub struct PathKey {
    prefix: [u8; 16],
    /// Prefix length in the 128-bit space, plus one (0: the empty slot).
    len: u8,
}

impl PathKey {
    /// The path of `addr` under `cfg`'s prefix lengths.
    pub fn of(addr: IpAddr, cfg: &PathMemoryConfig) -> PathKey {
        let (octets, bits) = match addr {
            IpAddr::V4(v4) => (v4.to_ipv6_mapped().octets(), 96 + u32::from(cfg.ipv4_prefix.min(32))),
            IpAddr::V6(v6) => match v6.to_ipv4_mapped() {
                Some(v4) => (v4.to_ipv6_mapped().octets(), 96 + u32::from(cfg.ipv4_prefix.min(32))),
                None => (v6.octets(), u32::from(cfg.ipv6_prefix.min(128))),
            },
        };
        let mask = u128::MAX.checked_shl(128 - bits).unwrap_or(0);
        PathKey { prefix: (u128::from_be_bytes(octets) & mask).to_be_bytes(), len: bits as u8 + 1 }
    }
}

/// What one connection learned about its path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathRecord {
    /// The lowest RTT seen.
    pub min_rtt: Duration,
    /// The smoothed RTT at the end.
    pub srtt: Duration,
    /// The RTT variation at the end.
    pub rttvar: Duration,
    /// The most data acknowledged in one round trip, bytes: careful
    /// resume's saved_cwnd (RFC 9959 §3.1). 0 when the connection never
    /// used enough of a window to say (under 4 × IW, which §3.1 lets a
    /// sender leave unsaved).
    pub window: u32,
    /// The payload rate of that round trip, bytes per second.
    pub delivery_rate: u64,
    /// The congestion window at the end, bytes.
    pub cwnd: u32,
    /// The slow-start threshold at the end (`u32::MAX`: no loss seen).
    pub ssthresh: u32,
}

/// A cached path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PathEntry {
    /// The latest record.
    pub record: PathRecord,
    /// When the record was written.
    pub updated: Instant,
    /// When `record.window` was measured (a later connection that moved
    /// too little to measure one keeps the earlier window).
    pub window_at: Instant,
    /// A connection is resuming from `record.window` now: careful resume
    /// lets only one use it at a time (RFC 9959 §3.2, "Using saved_cwnd").
    pub window_in_use: bool,
}

#[derive(Clone, Copy, Debug, Default)]
struct Slot {
    key: PathKey,
    entry: Option<PathEntry>,
}

/// The per-shard path cache (see the [module documentation](self)).
#[derive(Clone, Debug)]
pub struct PathCache {
    cfg: PathMemoryConfig,
    slots: Vec<Slot>,
    hasher: FixedState,
}

impl PathCache {
    /// An empty cache, its storage allocated here once.
    pub fn new(cfg: PathMemoryConfig, secret: u128) -> PathCache {
        let sets = cfg.capacity.div_ceil(WAYS);
        PathCache {
            cfg,
            slots: vec![Slot::default(); sets * WAYS],
            hasher: FixedState::with_seed((secret >> 64) as u64 ^ 0x9a7b_3c1d_5e2f_4a60),
        }
    }

    /// How it is sized and keyed.
    pub fn config(&self) -> &PathMemoryConfig {
        &self.cfg
    }

    /// The most entries it holds.
    pub fn capacity(&self) -> usize {
        self.slots.len()
    }

    /// Entries held now, expired ones included until they are replaced.
    pub fn len(&self) -> usize {
        self.slots.iter().filter(|s| s.entry.is_some()).count()
    }

    /// Whether it holds nothing.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    fn set(&self, key: &PathKey) -> core::ops::Range<usize> {
        let sets = self.slots.len() / WAYS;
        let set = (self.hasher.hash_one(key) % sets as u64) as usize;
        set * WAYS..(set + 1) * WAYS
    }

    fn fresh(&self, now: Instant, entry: &PathEntry) -> bool {
        now.saturating_since(entry.updated) <= self.cfg.lifetime
    }

    fn find(&self, now: Instant, key: &PathKey) -> Option<usize> {
        if self.slots.is_empty() {
            return None;
        }
        self.set(key).find(|&i| self.slots[i].key == *key && self.slots[i].entry.is_some_and(|e| self.fresh(now, &e)))
    }

    /// What is known about `addr`'s path, if it is recent.
    pub fn get(&self, now: Instant, addr: IpAddr) -> Option<PathEntry> {
        let key = PathKey::of(addr, &self.cfg);
        self.find(now, &key).and_then(|i| self.slots[i].entry)
    }

    /// Records what a connection to `addr` learned. An observation without
    /// a window keeps the window an earlier one measured (and its age).
    pub fn update(&mut self, now: Instant, addr: IpAddr, record: PathRecord) {
        if self.slots.is_empty() {
            return;
        }
        let key = PathKey::of(addr, &self.cfg);
        let i = match self.find(now, &key) {
            Some(i) => i,
            None => self.victim(now, &key),
        };
        let slot = &mut self.slots[i];
        let old = if slot.key == key { slot.entry } else { None };
        let mut entry = PathEntry { record, updated: now, window_at: now, window_in_use: false };
        if record.window == 0
            && let Some(old) = old
        {
            entry.record.window = old.record.window;
            entry.record.delivery_rate = old.record.delivery_rate;
            entry.window_at = old.window_at;
            entry.window_in_use = old.window_in_use;
        }
        *slot = Slot { key, entry: Some(entry) };
    }

    /// The slot a new key takes in its set: the slot the key had, an empty
    /// or expired one, else the least recently updated.
    fn victim(&self, now: Instant, key: &PathKey) -> usize {
        let set = self.set(key);
        if let Some(i) = set.clone().find(|&i| self.slots[i].key == *key) {
            return i;
        }
        set.min_by_key(|&i| match self.slots[i].entry {
            None => (0, Instant::ZERO),
            Some(e) if !self.fresh(now, &e) => (1, e.updated),
            Some(e) => (2, e.updated),
        })
        .unwrap_or(0)
    }

    /// Takes `addr`'s saved window for one connection's careful resume:
    /// `None` if there is none, it is older than the lifetime, or another
    /// connection is using it (RFC 9959 §3.2). The next update of the path
    /// gives it back.
    pub fn claim_window(&mut self, now: Instant, addr: IpAddr) -> Option<PathEntry> {
        let key = PathKey::of(addr, &self.cfg);
        let i = self.find(now, &key)?;
        let lifetime = self.cfg.lifetime;
        let entry = self.slots[i].entry.as_mut()?;
        if entry.window_in_use || entry.record.window == 0 || now.saturating_since(entry.window_at) > lifetime {
            return None;
        }
        entry.window_in_use = true;
        Some(*entry)
    }

    /// Forgets `addr`'s path (careful resume's Safe Retreat, RFC 9959
    /// §3.5: the saved parameters proved wrong).
    pub fn remove(&mut self, addr: IpAddr) {
        if self.slots.is_empty() {
            return;
        }
        let key = PathKey::of(addr, &self.cfg);
        for i in self.set(&key) {
            if self.slots[i].key == key {
                self.slots[i] = Slot::default();
            }
        }
    }

    /// Forgets every path (after a configuration change, RFC 9959 §4.3.1).
    pub fn clear(&mut self) {
        self.slots.fill(Slot::default());
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::{Ipv4Addr, Ipv6Addr};

    fn record(ms: u64) -> PathRecord {
        PathRecord {
            min_rtt: Duration::from_millis(ms),
            srtt: Duration::from_millis(ms + 1),
            rttvar: Duration::from_millis(1),
            window: 100_000,
            delivery_rate: 10_000_000,
            cwnd: 120_000,
            ssthresh: u32::MAX,
        }
    }

    fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
        IpAddr::V4(Ipv4Addr::new(a, b, c, d))
    }

    /// Paths of /24s and /64s, the widest the tests look at.
    fn subnets() -> PathMemoryConfig {
        PathMemoryConfig { ipv4_prefix: 24, ..PathMemoryConfig::default() }
    }

    fn cache(capacity: usize) -> PathCache {
        PathCache::new(PathMemoryConfig { capacity, ..subnets() }, 42)
    }

    #[test]
    fn keys_are_the_prefix_of_the_address() {
        // By default an IPv4 path is its host.
        let host4 = PathMemoryConfig::default();
        assert_ne!(PathKey::of(v4(10, 1, 2, 3), &host4), PathKey::of(v4(10, 1, 2, 4), &host4));
        let cfg = subnets();
        assert_eq!(PathKey::of(v4(10, 1, 2, 3), &cfg), PathKey::of(v4(10, 1, 2, 200), &cfg));
        assert_ne!(PathKey::of(v4(10, 1, 2, 3), &cfg), PathKey::of(v4(10, 1, 3, 3), &cfg));
        // An IPv4-mapped IPv6 address is the IPv4 address.
        let mapped = IpAddr::V6(Ipv4Addr::new(10, 1, 2, 9).to_ipv6_mapped());
        assert_eq!(PathKey::of(mapped, &cfg), PathKey::of(v4(10, 1, 2, 3), &cfg));
        let a: Ipv6Addr = "2001:db8:1:2::1".parse().unwrap();
        let b: Ipv6Addr = "2001:db8:1:2:ffff::9".parse().unwrap();
        let c: Ipv6Addr = "2001:db8:1:3::1".parse().unwrap();
        assert_eq!(PathKey::of(IpAddr::V6(a), &cfg), PathKey::of(IpAddr::V6(b), &cfg));
        assert_ne!(PathKey::of(IpAddr::V6(a), &cfg), PathKey::of(IpAddr::V6(c), &cfg));
        // Other lengths, as configured; /32 and /128 are single hosts.
        let host = PathMemoryConfig { ipv4_prefix: 32, ipv6_prefix: 128, ..cfg };
        assert_ne!(PathKey::of(v4(10, 1, 2, 3), &host), PathKey::of(v4(10, 1, 2, 4), &host));
        let wide = PathMemoryConfig { ipv4_prefix: 16, ..cfg };
        assert_eq!(PathKey::of(v4(10, 1, 2, 3), &wide), PathKey::of(v4(10, 1, 200, 4), &wide));
        // A /0 is one path for everyone of the family, but never the empty slot.
        let all = PathMemoryConfig { ipv4_prefix: 0, ..cfg };
        assert_ne!(PathKey::of(v4(1, 2, 3, 4), &all), PathKey::default());
    }

    #[test]
    fn a_path_is_found_by_any_address_of_its_prefix_and_no_other() {
        let mut c = cache(64);
        let t = Instant::from_secs(1);
        c.update(t, v4(10, 0, 0, 1), record(20));
        assert_eq!(c.get(t, v4(10, 0, 0, 77)).map(|e| e.record), Some(record(20)));
        assert_eq!(c.get(t, v4(10, 0, 1, 1)), None);
    }

    #[test]
    fn a_peer_writes_only_its_own_prefix() {
        let mut c = cache(8);
        let t = Instant::from_secs(1);
        c.update(t, v4(10, 0, 0, 1), record(20));
        // Many other prefixes, some into the same set: none changes 10.0.0/24's record.
        for i in 0..3u8 {
            c.update(t, v4(192, 168, i, 1), record(500));
        }
        assert_eq!(c.get(t, v4(10, 0, 0, 1)).map(|e| e.record.min_rtt), Some(Duration::from_millis(20)));
    }

    #[test]
    fn the_cache_never_grows_past_its_bound_and_evicts_the_oldest() {
        let mut c = cache(16);
        assert_eq!(c.capacity(), 16);
        let slots_before = c.slots.capacity();
        for i in 0..200u16 {
            c.update(Instant::from_secs(u64::from(i)), v4(10, (i >> 8) as u8, i as u8, 1), record(10));
            assert!(c.len() <= 16);
        }
        assert_eq!(c.len(), 16);
        assert_eq!(c.slots.capacity(), slots_before, "no reallocation");
        // The newest is there; the oldest went.
        let now = Instant::from_secs(200);
        assert!(c.get(now, v4(10, 0, 199, 1)).is_some());
        assert!(c.get(now, v4(10, 0, 0, 1)).is_none());
    }

    #[test]
    fn a_full_set_gives_up_its_least_recently_updated_entry() {
        let mut c = cache(64);
        // Five prefixes of one set (of four slots).
        let first = v4(10, 0, 0, 1);
        let set = c.set(&PathKey::of(first, c.config()));
        let same_set: Vec<IpAddr> = (0..=255u8)
            .flat_map(|b| (0..=255u8).map(move |d| v4(10, b, d, 1)))
            .filter(|&a| c.set(&PathKey::of(a, c.config())) == set)
            .take(WAYS + 1)
            .collect();
        assert_eq!(same_set.len(), WAYS + 1);
        for (i, &addr) in same_set[..WAYS].iter().enumerate() {
            c.update(Instant::from_secs(i as u64), addr, record(10));
        }
        // Refresh the first: the second is now the least recently updated.
        c.update(Instant::from_secs(10), same_set[0], record(10));
        c.update(Instant::from_secs(11), same_set[WAYS], record(10));
        let now = Instant::from_secs(12);
        assert!(c.get(now, same_set[1]).is_none());
        for &kept in [same_set[0], same_set[2], same_set[3], same_set[WAYS]].iter() {
            assert!(c.get(now, kept).is_some(), "{kept}");
        }
    }

    #[test]
    fn entries_age_out() {
        let mut c = cache(64);
        let t = Instant::from_secs(10);
        c.update(t, v4(10, 0, 0, 1), record(20));
        let lifetime = c.config().lifetime;
        assert!(c.get(t + lifetime, v4(10, 0, 0, 1)).is_some());
        assert!(c.get(t + lifetime + Duration::from_secs(1), v4(10, 0, 0, 1)).is_none());
        assert!(c.claim_window(t + lifetime + Duration::from_secs(1), v4(10, 0, 0, 1)).is_none());
    }

    #[test]
    fn a_window_serves_one_connection_at_a_time_and_comes_back_with_the_next_update() {
        let mut c = cache(64);
        let t = Instant::from_secs(10);
        c.update(t, v4(10, 0, 0, 1), record(20));
        assert!(c.claim_window(t, v4(10, 0, 0, 2)).is_some());
        assert!(c.claim_window(t, v4(10, 0, 0, 3)).is_none(), "one user at a time");
        c.update(t + Duration::from_secs(1), v4(10, 0, 0, 2), record(21));
        assert!(c.claim_window(t, v4(10, 0, 0, 3)).is_some());
    }

    #[test]
    fn an_update_without_a_window_keeps_the_measured_one_and_its_age() {
        let mut c = cache(64);
        let t = Instant::from_secs(10);
        c.update(t, v4(10, 0, 0, 1), record(20));
        let small = PathRecord { window: 0, delivery_rate: 0, ..record(30) };
        c.update(t + Duration::from_secs(5), v4(10, 0, 0, 1), small);
        let e = c.get(t + Duration::from_secs(5), v4(10, 0, 0, 1)).unwrap();
        assert_eq!(e.record.min_rtt, Duration::from_millis(30));
        assert_eq!(e.record.window, 100_000);
        assert_eq!(e.window_at, t);
        // The window expires on its own age.
        let lifetime = c.config().lifetime;
        assert!(c.claim_window(t + lifetime + Duration::from_secs(2), v4(10, 0, 0, 1)).is_none());
    }

    proptest::proptest! {
        /// Whatever peers do, in any order at any time: the cache stays
        /// within its bound, and what it returns for an address is what
        /// was last written for that address's prefix.
        #[test]
        fn any_sequence_of_operations_keeps_the_bound_and_the_keys(
            ops in proptest::collection::vec((0u8..4, 0u32..64, 0u64..2_000, 0u32..1_000_000), 1..400)
        ) {
            let mut c = cache(16);
            let mut last = std::collections::HashMap::new();
            for (op, host, secs, window) in ops {
                // 8 prefixes of 8 hosts each; some IPv6.
                let addr = if host % 5 == 0 {
                    IpAddr::V6(Ipv6Addr::new(0x2001, 0xdb8, 0, (host / 8) as u16, 0, 0, 0, host as u16))
                } else {
                    v4(10, 0, (host / 8) as u8, host as u8)
                };
                let now = Instant::from_secs(secs);
                let key = PathKey::of(addr, c.config());
                match op {
                    0 | 1 => {
                        let r = PathRecord { window, ..record(u64::from(host) + 1) };
                        c.update(now, addr, r);
                        last.insert(key, r.min_rtt);
                    }
                    2 => {
                        let _ = c.claim_window(now, addr);
                    }
                    _ => {
                        c.remove(addr);
                        last.remove(&key);
                    }
                }
                proptest::prop_assert!(c.len() <= c.capacity());
                if let Some(e) = c.get(now, addr) {
                    proptest::prop_assert_eq!(Some(&e.record.min_rtt), last.get(&key));
                }
            }
        }
    }

    #[test]
    fn removal_and_a_zero_capacity() {
        let mut c = cache(64);
        let t = Instant::from_secs(10);
        c.update(t, v4(10, 0, 0, 1), record(20));
        c.remove(v4(10, 0, 0, 9));
        assert!(c.get(t, v4(10, 0, 0, 1)).is_none());
        let mut none = cache(0);
        none.update(t, v4(10, 0, 0, 1), record(20));
        assert!(none.get(t, v4(10, 0, 0, 1)).is_none());
        assert!(none.claim_window(t, v4(10, 0, 0, 1)).is_none());
        none.remove(v4(10, 0, 0, 1));
        assert_eq!(none.capacity(), 0);
    }
}
