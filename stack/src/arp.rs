//! ARP (RFC 826): the neighbour cache and the frames waiting for it.
//!
//! The cache is bounded; when full, the oldest entry goes. An entry is
//! trusted for [`ArpCache::REACHABLE`] after its last confirmation; after that
//! it is still used, but each use may trigger a refresh request, as Linux's
//! STALE state does, so traffic never stalls on a routine re-resolution.

use core::net::Ipv4Addr;
use std::collections::VecDeque;

use foldhash::fast::FixedState;
use hashbrown::HashMap;

use crate::time::{Duration, Instant};

#[derive(Clone, Copy, Debug)]
struct Entry {
    mac: Option<[u8; 6]>,
    confirmed_at: Instant,
    requested_at: Option<Instant>,
    /// Requests sent since the last answer.
    attempts: u8,
    /// Configured by hand: never refreshed, never overwritten by ARP.
    permanent: bool,
}

/// What a lookup found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Use this address.
    Hit([u8; 6]),
    /// Use this address, and send a request to refresh it.
    HitRefresh([u8; 6]),
    /// Unknown: send a request now and hold the frame.
    MissRequest,
    /// Unknown and a request is already out: hold the frame.
    MissWait,
}

/// The neighbour cache.
#[derive(Debug)]
pub struct ArpCache {
    entries: HashMap<Ipv4Addr, Entry, FixedState>,
    /// Insertion order, for eviction; each cached address appears once.
    order: VecDeque<Ipv4Addr>,
    capacity: usize,
}

impl ArpCache {
    /// How long an answer is trusted without refresh.
    pub const REACHABLE: Duration = Duration::from_secs(60);
    /// The least time between two requests for one address.
    pub const RETRY: Duration = Duration::from_secs(1);
    /// Unanswered requests before frames waiting for an address are dropped.
    pub const MAX_ATTEMPTS: u8 = 3;

    /// An empty cache holding at most `capacity` entries.
    pub fn new(capacity: usize) -> ArpCache {
        ArpCache {
            entries: HashMap::with_hasher(FixedState::with_seed(0x0a4b)),
            order: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Looks up `ip` for a frame about to be sent at `now`, and records a
    /// request when the answer says one should go out.
    pub fn lookup(&mut self, now: Instant, ip: Ipv4Addr) -> Lookup {
        let entry = match self.entries.get_mut(&ip) {
            Some(e) => e,
            None => {
                self.insert(
                    ip,
                    Entry { mac: None, confirmed_at: now, requested_at: Some(now), attempts: 1, permanent: false },
                );
                return Lookup::MissRequest;
            }
        };
        let may_request = entry.requested_at.is_none_or(|t| now - t >= Self::RETRY);
        match entry.mac {
            Some(mac) if entry.permanent => Lookup::Hit(mac),
            Some(mac) if now - entry.confirmed_at < Self::REACHABLE || !may_request => Lookup::Hit(mac),
            Some(mac) => {
                entry.requested_at = Some(now);
                entry.attempts = entry.attempts.saturating_add(1);
                Lookup::HitRefresh(mac)
            }
            None if may_request => {
                entry.requested_at = Some(now);
                entry.attempts = entry.attempts.saturating_add(1);
                Lookup::MissRequest
            }
            None => Lookup::MissWait,
        }
    }

    /// The address cached for `ip`, without side effects.
    pub fn get(&self, ip: Ipv4Addr) -> Option<[u8; 6]> {
        self.entries.get(&ip).and_then(|e| e.mac)
    }

    /// Whether `ip` has an entry (resolved or not): RFC 826's merge test.
    pub fn contains(&self, ip: Ipv4Addr) -> bool {
        self.entries.contains_key(&ip)
    }

    /// Records `ip` at `mac`, confirmed at `now`.
    pub fn update(&mut self, now: Instant, ip: Ipv4Addr, mac: [u8; 6]) {
        let fresh = Entry { mac: Some(mac), confirmed_at: now, requested_at: None, attempts: 0, permanent: false };
        match self.entries.get_mut(&ip) {
            Some(e) if e.permanent => {}
            Some(e) => *e = fresh,
            None => self.insert(ip, fresh),
        }
    }

    /// Records `ip` at `mac` for good, as `ip neigh add ... nud permanent`
    /// does: never refreshed and never changed by ARP traffic.
    pub fn insert_permanent(&mut self, ip: Ipv4Addr, mac: [u8; 6]) {
        let entry =
            Entry { mac: Some(mac), confirmed_at: Instant::ZERO, requested_at: None, attempts: 0, permanent: true };
        match self.entries.get_mut(&ip) {
            Some(e) => *e = entry,
            None => self.insert(ip, entry),
        }
    }

    /// For an unresolved `ip`: whether its requests are used up.
    pub fn gave_up(&self, ip: Ipv4Addr) -> bool {
        self.entries.get(&ip).is_some_and(|e| e.mac.is_none() && e.attempts >= Self::MAX_ATTEMPTS)
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn insert(&mut self, ip: Ipv4Addr, entry: Entry) {
        if self.entries.len() >= self.capacity
            && let Some(oldest) = self.order.pop_front()
        {
            self.entries.remove(&oldest);
        }
        self.entries.insert(ip, entry);
        self.order.push_back(ip);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 3);
    const C: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 4);
    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];

    #[test]
    fn miss_requests_once_per_retry_interval() {
        let mut c = ArpCache::new(4);
        let t = Instant::from_secs(1);
        assert_eq!(c.lookup(t, A), Lookup::MissRequest);
        assert_eq!(c.lookup(t + Duration::from_millis(10), A), Lookup::MissWait);
        assert_eq!(c.lookup(t + ArpCache::RETRY, A), Lookup::MissRequest);
        assert!(!c.gave_up(A));
        assert_eq!(c.lookup(t + ArpCache::RETRY * 2, A), Lookup::MissRequest);
        assert!(c.gave_up(A));
        c.update(t + ArpCache::RETRY * 3, A, MAC);
        assert!(!c.gave_up(A));
        assert_eq!(c.lookup(t + ArpCache::RETRY * 3, A), Lookup::Hit(MAC));
    }

    #[test]
    fn stale_entries_are_used_while_refreshed() {
        let mut c = ArpCache::new(4);
        let t = Instant::from_secs(1);
        c.update(t, A, MAC);
        let stale = t + ArpCache::REACHABLE;
        assert_eq!(c.lookup(stale, A), Lookup::HitRefresh(MAC));
        assert_eq!(c.lookup(stale + Duration::from_millis(1), A), Lookup::Hit(MAC));
        assert_eq!(c.lookup(stale + ArpCache::RETRY, A), Lookup::HitRefresh(MAC));
    }

    #[test]
    fn permanent_entries_never_go_stale_or_change() {
        let mut c = ArpCache::new(4);
        c.insert_permanent(A, MAC);
        let much_later = Instant::from_secs(100_000);
        assert_eq!(c.lookup(much_later, A), Lookup::Hit(MAC));
        c.update(much_later, A, [2, 0, 0, 0, 0, 9]);
        assert_eq!(c.get(A), Some(MAC));
    }

    #[test]
    fn full_cache_evicts_the_oldest_entry() {
        let mut c = ArpCache::new(2);
        let t = Instant::from_secs(1);
        c.update(t, A, MAC);
        c.update(t, B, MAC);
        c.update(t, A, [2, 0, 0, 0, 0, 9]); // an update is not a new entry
        c.update(t, C, MAC);
        assert_eq!(c.len(), 2);
        assert!(!c.contains(A));
        assert!(c.contains(B) && c.contains(C));
    }
}
