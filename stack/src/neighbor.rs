//! The neighbour cache of both IP families: which link address a next hop
//! has, learnt by ARP (RFC 826) for IPv4 and by Neighbor Discovery
//! (RFC 4861) for IPv6. One cache, generic over the address type:
//! [`ArpCache`] and [`NdpCache`] are the same mechanism.
//!
//! The cache is bounded; when full, the oldest entry goes. An entry is
//! trusted for [`NeighborCache::REACHABLE`] after its last confirmation;
//! after that it is still used, but each use may trigger a refresh request,
//! as Linux's STALE state does, so traffic never stalls on a routine
//! re-resolution.
//!
//! RFC 4861 §7.3.2's states are read with [`NeighborCache::state`]. DELAY
//! and PROBE are folded into STALE: a stale entry in use is refreshed at
//! once ([`Lookup::HitRefresh`]) and at most every [`NeighborCache::RETRY`]
//! after, until something confirms it.

use core::fmt::Debug;
use core::hash::Hash;
use core::net::{Ipv4Addr, Ipv6Addr};
use std::collections::VecDeque;

use foldhash::fast::FixedState;
use hashbrown::HashMap;

use crate::time::{Duration, Instant};

/// The IPv4 neighbour cache, filled by ARP.
pub type ArpCache = NeighborCache<Ipv4Addr>;

/// The IPv6 neighbour cache, filled by Neighbor Discovery.
pub type NdpCache = NeighborCache<Ipv6Addr>;

#[derive(Clone, Copy, Debug)]
struct Entry {
    mac: Option<[u8; 6]>,
    /// When `mac` was last confirmed reachable; `None` if it has not been
    /// since it was learnt or changed (RFC 4861's STALE).
    confirmed_at: Option<Instant>,
    requested_at: Option<Instant>,
    /// Requests sent since the last answer.
    attempts: u8,
    /// Configured by hand: never refreshed, never overwritten by ARP or
    /// Neighbor Discovery.
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

/// How far an entry's link address is trusted (RFC 4861 §7.3.2).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum NeighborState {
    /// Requested, no link address yet.
    Incomplete,
    /// Confirmed less than [`NeighborCache::REACHABLE`] ago.
    Reachable,
    /// Known but not confirmed lately: used, and refreshed when used.
    Stale,
    /// Configured by hand: always used, never refreshed or changed.
    Permanent,
}

/// The neighbour cache for addresses of type `A` ([`Ipv4Addr`] or
/// [`Ipv6Addr`]).
#[derive(Debug)]
pub struct NeighborCache<A> {
    entries: HashMap<A, Entry, FixedState>,
    /// Insertion order, for eviction; each cached address appears once.
    order: VecDeque<A>,
    capacity: usize,
}

impl<A: Copy + Eq + Hash + Debug> NeighborCache<A> {
    /// How long an answer is trusted without refresh.
    pub const REACHABLE: Duration = Duration::from_secs(60);
    /// The least time between two requests for one address.
    pub const RETRY: Duration = Duration::from_secs(1);
    /// Unanswered requests before frames waiting for an address are dropped.
    pub const MAX_ATTEMPTS: u8 = 3;

    /// An empty cache holding at most `capacity` entries.
    pub fn new(capacity: usize) -> NeighborCache<A> {
        NeighborCache {
            entries: HashMap::with_hasher(FixedState::with_seed(0x0a4b)),
            order: VecDeque::new(),
            capacity: capacity.max(1),
        }
    }

    /// Looks up `addr` for a frame about to be sent at `now`, and records a
    /// request when the answer says one should go out.
    pub fn lookup(&mut self, now: Instant, addr: A) -> Lookup {
        let entry = match self.entries.get_mut(&addr) {
            Some(e) => e,
            None => {
                self.insert(
                    addr,
                    Entry { mac: None, confirmed_at: None, requested_at: Some(now), attempts: 1, permanent: false },
                );
                return Lookup::MissRequest;
            }
        };
        let may_request = entry.requested_at.is_none_or(|t| now - t >= Self::RETRY);
        match entry.mac {
            Some(mac) if entry.permanent => Lookup::Hit(mac),
            Some(mac) if Self::is_reachable(entry, now) || !may_request => Lookup::Hit(mac),
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

    /// The address cached for `addr`, without side effects.
    pub fn get(&self, addr: A) -> Option<[u8; 6]> {
        self.entries.get(&addr).and_then(|e| e.mac)
    }

    /// Whether `addr` has an entry (resolved or not): RFC 826's merge test.
    pub fn contains(&self, addr: A) -> bool {
        self.entries.contains_key(&addr)
    }

    /// How far the entry for `addr` is trusted at `now`; `None` without an
    /// entry.
    pub fn state(&self, now: Instant, addr: A) -> Option<NeighborState> {
        let entry = self.entries.get(&addr)?;
        Some(match entry.mac {
            _ if entry.permanent => NeighborState::Permanent,
            None => NeighborState::Incomplete,
            Some(_) if Self::is_reachable(entry, now) => NeighborState::Reachable,
            Some(_) => NeighborState::Stale,
        })
    }

    /// Records `addr` at `mac`, confirmed at `now`: an ARP reply or a
    /// request RFC 826 merges, or RFC 4861 §7.2.5's solicited advertisement
    /// with a target link-layer address. Leaves a permanent entry alone.
    pub fn update(&mut self, now: Instant, addr: A, mac: [u8; 6]) {
        let fresh =
            Entry { mac: Some(mac), confirmed_at: Some(now), requested_at: None, attempts: 0, permanent: false };
        match self.entries.get_mut(&addr) {
            Some(e) if e.permanent => {}
            Some(e) => *e = fresh,
            None => self.insert(addr, fresh),
        }
    }

    /// Records `addr` at `mac` without confirming that it is reachable.
    ///
    /// RFC 4861 §7.2.3 (a solicitation's source link-layer address) and
    /// §7.2.5 (an unsolicited advertisement, or one with the override flag):
    /// a new entry, or one whose address changes, becomes STALE, so its next
    /// use refreshes it; an entry already at `mac` keeps its state. A
    /// permanent entry is left alone.
    ///
    /// STALE has no timer here, so `now` is not read yet; it is taken so the
    /// updates read alike and a DELAY state (RFC 4861 §7.3.3) can come
    /// without changing the callers.
    pub fn update_stale(&mut self, _now: Instant, addr: A, mac: [u8; 6]) {
        let stale = Entry { mac: Some(mac), confirmed_at: None, requested_at: None, attempts: 0, permanent: false };
        match self.entries.get_mut(&addr) {
            Some(e) if e.permanent || e.mac == Some(mac) => {}
            Some(e) => *e = stale,
            None => self.insert(addr, stale),
        }
    }

    /// Marks the entry for `addr` REACHABLE at `now`, its address unchanged:
    /// RFC 4861 §7.2.5's solicited advertisement without a target
    /// link-layer address, or §7.3.1's confirmation from an upper layer.
    /// Returns whether `addr` has a link address to confirm; a permanent
    /// entry has one and stays as it is.
    pub fn confirm(&mut self, now: Instant, addr: A) -> bool {
        match self.entries.get_mut(&addr) {
            Some(e) if e.permanent => true,
            Some(e) if e.mac.is_some() => {
                e.confirmed_at = Some(now);
                e.requested_at = None;
                e.attempts = 0;
                true
            }
            _ => false,
        }
    }

    /// Records `addr` at `mac` for good, as `ip neigh add ... nud permanent`
    /// does: never refreshed and never changed by ARP or Neighbor Discovery.
    pub fn insert_permanent(&mut self, addr: A, mac: [u8; 6]) {
        let entry = Entry { mac: Some(mac), confirmed_at: None, requested_at: None, attempts: 0, permanent: true };
        match self.entries.get_mut(&addr) {
            Some(e) => *e = entry,
            None => self.insert(addr, entry),
        }
    }

    /// For an unresolved `addr`: whether its requests are used up.
    pub fn gave_up(&self, addr: A) -> bool {
        self.entries.get(&addr).is_some_and(|e| e.mac.is_none() && e.attempts >= Self::MAX_ATTEMPTS)
    }

    /// Entries held.
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    /// No entries.
    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn insert(&mut self, addr: A, entry: Entry) {
        if self.entries.len() >= self.capacity
            && let Some(oldest) = self.order.pop_front()
        {
            self.entries.remove(&oldest);
        }
        self.entries.insert(addr, entry);
        self.order.push_back(addr);
    }

    /// Whether `entry` was confirmed less than [`Self::REACHABLE`] before
    /// `now`.
    fn is_reachable(entry: &Entry, now: Instant) -> bool {
        entry.confirmed_at.is_some_and(|t| now - t < Self::REACHABLE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const A: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
    const B: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 3);
    const C: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 4);
    const MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];
    const OTHER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 9];

    const A6: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 2);
    const B6: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 3);
    const C6: Ipv6Addr = Ipv6Addr::new(0xfe80, 0, 0, 0, 0, 0, 0, 4);

    // ---- What ArpCache always did (IPv4) ----

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

    // ---- Both families ----

    #[test]
    fn full_ipv6_cache_evicts_the_oldest_entry() {
        let mut c = NdpCache::new(2);
        let t = Instant::from_secs(1);
        c.update(t, A6, MAC);
        c.update_stale(t, B6, MAC);
        c.update_stale(t, A6, OTHER_MAC); // a change is not a new entry
        c.confirm(t, A6);
        assert_eq!(c.lookup(t, C6), Lookup::MissRequest);
        assert_eq!(c.len(), 2);
        assert!(!c.contains(A6));
        assert!(c.contains(B6) && c.contains(C6));
    }

    #[test]
    fn update_stale_and_lookups_count_against_the_ipv4_bound() {
        let mut c = ArpCache::new(2);
        let t = Instant::from_secs(1);
        c.update_stale(t, A, MAC);
        assert_eq!(c.lookup(t, B), Lookup::MissRequest);
        c.update_stale(t, C, MAC);
        assert_eq!(c.len(), 2);
        assert!(!c.contains(A));
        assert!(c.contains(B) && c.contains(C));
    }

    #[test]
    fn a_cache_of_capacity_zero_still_holds_one_entry() {
        let mut c = NdpCache::new(0);
        let t = Instant::from_secs(1);
        assert!(c.is_empty());
        c.update(t, A6, MAC);
        c.update(t, B6, MAC);
        assert_eq!(c.len(), 1);
        assert!(c.contains(B6));
    }

    // ---- state(): RFC 4861 §7.3.2 ----

    #[test]
    fn state_follows_an_entry_through_its_lifetime() {
        let mut c = NdpCache::new(4);
        let t = Instant::from_secs(1);
        assert_eq!(c.state(t, A6), None);
        assert_eq!(c.lookup(t, A6), Lookup::MissRequest);
        assert_eq!(c.state(t, A6), Some(NeighborState::Incomplete));
        let answered = t + Duration::from_millis(5);
        c.update(answered, A6, MAC);
        assert_eq!(c.state(answered, A6), Some(NeighborState::Reachable));
        let last_reachable = answered + NdpCache::REACHABLE - Duration::from_micros(1);
        assert_eq!(c.state(last_reachable, A6), Some(NeighborState::Reachable));
        let stale = answered + NdpCache::REACHABLE;
        assert_eq!(c.state(stale, A6), Some(NeighborState::Stale));
        // Refreshing is not confirming: the entry stays stale until an answer.
        assert_eq!(c.lookup(stale, A6), Lookup::HitRefresh(MAC));
        assert_eq!(c.state(stale, A6), Some(NeighborState::Stale));
        c.update(stale + Duration::from_millis(5), A6, MAC);
        assert_eq!(c.state(stale + Duration::from_millis(5), A6), Some(NeighborState::Reachable));
    }

    #[test]
    fn state_of_ipv4_entries_matches_what_lookup_does() {
        let mut c = ArpCache::new(4);
        let t = Instant::from_secs(1);
        assert_eq!(c.lookup(t, A), Lookup::MissRequest);
        assert_eq!(c.state(t, A), Some(NeighborState::Incomplete));
        c.update(t, A, MAC);
        assert_eq!(c.state(t, A), Some(NeighborState::Reachable));
        assert_eq!(c.lookup(t, A), Lookup::Hit(MAC));
        let stale = t + ArpCache::REACHABLE;
        assert_eq!(c.state(stale, A), Some(NeighborState::Stale));
        assert_eq!(c.lookup(stale, A), Lookup::HitRefresh(MAC));
    }

    #[test]
    fn permanent_entries_are_always_permanent() {
        let mut c = NdpCache::new(4);
        c.insert_permanent(A6, MAC);
        assert_eq!(c.state(Instant::ZERO, A6), Some(NeighborState::Permanent));
        assert_eq!(c.state(Instant::from_secs(100_000), A6), Some(NeighborState::Permanent));
    }

    // ---- update_stale(): RFC 4861 §7.2.3 and §7.2.5 ----

    #[test]
    fn update_stale_creates_a_stale_entry_that_the_next_use_refreshes() {
        let mut c = NdpCache::new(4);
        let t = Instant::from_secs(1);
        c.update_stale(t, A6, MAC);
        assert_eq!(c.get(A6), Some(MAC));
        assert_eq!(c.state(t, A6), Some(NeighborState::Stale));
        assert_eq!(c.lookup(t, A6), Lookup::HitRefresh(MAC));
        // The refresh is out: the next uses wait for it, as for any stale entry.
        assert_eq!(c.lookup(t + Duration::from_millis(1), A6), Lookup::Hit(MAC));
        assert_eq!(c.lookup(t + NdpCache::RETRY, A6), Lookup::HitRefresh(MAC));
    }

    #[test]
    fn update_stale_with_a_new_address_makes_a_reachable_entry_stale() {
        let mut c = NdpCache::new(4);
        let t = Instant::from_secs(1);
        c.update(t, A6, MAC);
        c.update_stale(t, A6, OTHER_MAC);
        assert_eq!(c.get(A6), Some(OTHER_MAC));
        assert_eq!(c.state(t, A6), Some(NeighborState::Stale));
        assert_eq!(c.lookup(t, A6), Lookup::HitRefresh(OTHER_MAC));
    }

    #[test]
    fn update_stale_with_the_same_address_keeps_the_state() {
        let mut c = NdpCache::new(4);
        let t = Instant::from_secs(1);
        c.update(t, A6, MAC);
        c.update_stale(t + Duration::from_secs(1), A6, MAC);
        assert_eq!(c.state(t + Duration::from_secs(1), A6), Some(NeighborState::Reachable));
        assert_eq!(c.lookup(t + Duration::from_secs(1), A6), Lookup::Hit(MAC));
        // Nor does it confirm a stale one.
        let stale = t + NdpCache::REACHABLE;
        c.update_stale(stale, A6, MAC);
        assert_eq!(c.state(stale, A6), Some(NeighborState::Stale));
    }

    #[test]
    fn update_stale_resolves_an_incomplete_entry() {
        let mut c = NdpCache::new(4);
        let t = Instant::from_secs(1);
        for i in 0..u32::from(NdpCache::MAX_ATTEMPTS) {
            assert_eq!(c.lookup(t + NdpCache::RETRY * i, A6), Lookup::MissRequest);
        }
        assert!(c.gave_up(A6));
        let learnt = t + NdpCache::RETRY * 3;
        c.update_stale(learnt, A6, MAC);
        assert!(!c.gave_up(A6));
        assert_eq!(c.state(learnt, A6), Some(NeighborState::Stale));
        assert_eq!(c.lookup(learnt, A6), Lookup::HitRefresh(MAC));
    }

    #[test]
    fn permanent_entries_ignore_update_stale() {
        let mut c = NdpCache::new(4);
        let t = Instant::from_secs(1);
        c.insert_permanent(A6, MAC);
        c.update_stale(t, A6, OTHER_MAC);
        assert_eq!(c.get(A6), Some(MAC));
        assert_eq!(c.state(t, A6), Some(NeighborState::Permanent));
        assert_eq!(c.lookup(t, A6), Lookup::Hit(MAC));

        let mut c = ArpCache::new(4);
        c.insert_permanent(A, MAC);
        c.update_stale(t, A, OTHER_MAC);
        assert_eq!(c.get(A), Some(MAC));
        assert_eq!(c.state(t, A), Some(NeighborState::Permanent));
    }

    // ---- confirm(): RFC 4861 §7.2.5 and §7.3.1 ----

    #[test]
    fn confirm_makes_a_stale_entry_reachable_without_changing_it() {
        let mut c = NdpCache::new(4);
        let t = Instant::from_secs(1);
        c.update_stale(t, A6, MAC);
        assert_eq!(c.lookup(t, A6), Lookup::HitRefresh(MAC));
        let answered = t + Duration::from_millis(5);
        assert!(c.confirm(answered, A6));
        assert_eq!(c.get(A6), Some(MAC));
        assert_eq!(c.state(answered, A6), Some(NeighborState::Reachable));
        assert_eq!(c.lookup(answered, A6), Lookup::Hit(MAC));
        // Reachable for REACHABLE from the confirmation, then stale again.
        let stale = answered + NdpCache::REACHABLE;
        assert_eq!(c.state(stale - Duration::from_micros(1), A6), Some(NeighborState::Reachable));
        assert_eq!(c.state(stale, A6), Some(NeighborState::Stale));
        assert_eq!(c.lookup(stale, A6), Lookup::HitRefresh(MAC));
    }

    #[test]
    fn confirm_extends_a_reachable_entry() {
        let mut c = ArpCache::new(4);
        let t = Instant::from_secs(1);
        c.update(t, A, MAC);
        let later = t + Duration::from_secs(30);
        assert!(c.confirm(later, A));
        assert_eq!(c.state(t + ArpCache::REACHABLE, A), Some(NeighborState::Reachable));
        assert_eq!(c.lookup(t + ArpCache::REACHABLE, A), Lookup::Hit(MAC));
        assert_eq!(c.state(later + ArpCache::REACHABLE, A), Some(NeighborState::Stale));
    }

    #[test]
    fn confirm_needs_a_link_address() {
        let mut c = NdpCache::new(4);
        let t = Instant::from_secs(1);
        assert!(!c.confirm(t, A6));
        assert!(!c.contains(A6));
        assert_eq!(c.lookup(t, A6), Lookup::MissRequest);
        assert!(!c.confirm(t, A6));
        assert_eq!(c.state(t, A6), Some(NeighborState::Incomplete));
        assert_eq!(c.get(A6), None);
        assert_eq!(c.lookup(t + Duration::from_millis(1), A6), Lookup::MissWait);
    }

    #[test]
    fn confirm_leaves_a_permanent_entry_permanent() {
        let mut c = NdpCache::new(4);
        let t = Instant::from_secs(1);
        c.insert_permanent(A6, MAC);
        assert!(c.confirm(t, A6));
        assert_eq!(c.state(t, A6), Some(NeighborState::Permanent));
        assert_eq!(c.get(A6), Some(MAC));
    }
}
