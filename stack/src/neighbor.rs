//! The neighbour cache of both IP families: which link address a next hop
//! has, learnt by ARP (RFC 826) for IPv4 and by Neighbor Discovery
//! (RFC 4861) for IPv6. One cache, generic over the address type:
//! [`ArpCache`] and [`NdpCache`] are the same mechanism.
//!
//! The cache is bounded; when full, the oldest entry goes. Its entries go
//! through RFC 4861 §7.3.2's states, for ARP as Linux does too:
//!
//! - INCOMPLETE: asked for, by a request to everyone, every
//!   [`NeighborCache::RETRY`], at most [`NeighborCache::MAX_ATTEMPTS`] times;
//!   frames wait meanwhile.
//! - REACHABLE for [`NeighborCache::REACHABLE`] after a confirmation: an
//!   answer to our request, or an upper layer's word that the neighbour
//!   acknowledged something we sent (TCP's forward progress, §7.3.1).
//! - STALE after that, or when the address was learnt without being
//!   confirmed: still used, and nothing is sent until it is.
//! - DELAY from the first use of a stale entry, for
//!   [`NeighborCache::DELAY_FIRST_PROBE`]: an upper layer may confirm it.
//! - PROBE after that: a request to the cached address itself, every
//!   [`NeighborCache::RETRY`], at most [`NeighborCache::MAX_UNICAST_PROBES`]
//!   times, the address still used; when none is answered, the address is
//!   forgotten and resolved afresh (INCOMPLETE).
//!
//! No state needs a timer: each is read from the times an entry holds when
//! the entry is used, so an entry nobody uses costs nothing.

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
    /// since it was learnt or changed.
    confirmed_at: Option<Instant>,
    /// When a stale entry was first used again (DELAY from then, PROBE
    /// from [`NeighborCache::DELAY_FIRST_PROBE`] after); `None` otherwise.
    used_stale_at: Option<Instant>,
    requested_at: Option<Instant>,
    /// Requests sent since the last answer: to everyone while INCOMPLETE,
    /// to the cached address while PROBE.
    attempts: u8,
    /// Configured by hand: never refreshed, never overwritten by ARP or
    /// Neighbor Discovery.
    permanent: bool,
}

impl Entry {
    const fn new(mac: Option<[u8; 6]>, confirmed_at: Option<Instant>) -> Entry {
        Entry { mac, confirmed_at, used_stale_at: None, requested_at: None, attempts: 0, permanent: false }
    }

    /// Whether it was confirmed less than [`NeighborCache::REACHABLE`]
    /// before `now`.
    fn is_reachable(&self, now: Instant) -> bool {
        self.confirmed_at.is_some_and(|t| now - t < REACHABLE)
    }
}

const REACHABLE: Duration = Duration::from_secs(60);

/// What a lookup found.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Lookup {
    /// Use this address.
    Hit([u8; 6]),
    /// Use this address, and send a request to it alone to confirm it
    /// (RFC 4861 §7.3.3's PROBE).
    HitProbe([u8; 6]),
    /// Unknown: send a request to everyone now and hold the frame.
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
    /// Known but not confirmed lately, and not used since.
    Stale,
    /// Used while stale less than [`NeighborCache::DELAY_FIRST_PROBE`] ago:
    /// waiting for an upper layer to confirm it.
    Delay,
    /// Being confirmed by requests to the cached address.
    Probe,
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
    /// Entries in DELAY or PROBE: while there are none, an upper layer's
    /// confirmation has nothing to do and is not looked up.
    unconfirmed: usize,
}

impl<A: Copy + Eq + Hash + Debug> NeighborCache<A> {
    /// How long a confirmation is trusted (RFC 4861's `ReachableTime`).
    pub const REACHABLE: Duration = REACHABLE;
    /// The least time between two requests for one address (RFC 4861's
    /// `RetransTimer`).
    pub const RETRY: Duration = Duration::from_secs(1);
    /// Unanswered requests to everyone before frames waiting for an address
    /// are dropped (`MAX_MULTICAST_SOLICIT`).
    pub const MAX_ATTEMPTS: u8 = 3;
    /// How long a stale entry in use waits for an upper layer's
    /// confirmation before it is probed (`DELAY_FIRST_PROBE_TIME`).
    pub const DELAY_FIRST_PROBE: Duration = Duration::from_secs(5);
    /// Unanswered probes of a cached address before it is forgotten
    /// (`MAX_UNICAST_SOLICIT`).
    pub const MAX_UNICAST_PROBES: u8 = 3;

    /// An empty cache holding at most `capacity` entries.
    pub fn new(capacity: usize) -> NeighborCache<A> {
        NeighborCache {
            entries: HashMap::with_hasher(FixedState::with_seed(0x0a4b)),
            order: VecDeque::new(),
            capacity: capacity.max(1),
            unconfirmed: 0,
        }
    }

    /// Looks up `addr` for a frame about to be sent at `now`, moves its
    /// entry on through the states, and records a request when the answer
    /// says one should go out.
    pub fn lookup(&mut self, now: Instant, addr: A) -> Lookup {
        let Some(entry) = self.entries.get_mut(&addr) else {
            let asked = Entry { requested_at: Some(now), attempts: 1, ..Entry::new(None, None) };
            self.insert(addr, asked);
            return Lookup::MissRequest;
        };
        let may_request = entry.requested_at.is_none_or(|t| now - t >= Self::RETRY);
        let Some(mac) = entry.mac else {
            if !may_request {
                return Lookup::MissWait;
            }
            entry.requested_at = Some(now);
            entry.attempts = entry.attempts.saturating_add(1);
            return Lookup::MissRequest;
        };
        if entry.permanent || entry.is_reachable(now) {
            return Lookup::Hit(mac);
        }
        match entry.used_stale_at {
            None => {
                // STALE → DELAY.
                entry.used_stale_at = Some(now);
                self.unconfirmed += 1;
                Lookup::Hit(mac)
            }
            Some(t) if now - t < Self::DELAY_FIRST_PROBE || !may_request => Lookup::Hit(mac),
            Some(_) if entry.attempts < Self::MAX_UNICAST_PROBES => {
                entry.requested_at = Some(now);
                entry.attempts += 1;
                Lookup::HitProbe(mac)
            }
            Some(_) => {
                // The last probe went unanswered too: forget the address
                // and ask everyone (§7.3.3).
                *entry = Entry { requested_at: Some(now), attempts: 1, ..Entry::new(None, None) };
                self.unconfirmed -= 1;
                Lookup::MissRequest
            }
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
            Some(_) if entry.is_reachable(now) => NeighborState::Reachable,
            Some(_) => match entry.used_stale_at {
                None => NeighborState::Stale,
                Some(t) if now - t < Self::DELAY_FIRST_PROBE => NeighborState::Delay,
                Some(_) => NeighborState::Probe,
            },
        })
    }

    /// Records `addr` at `mac`, confirmed at `now`: an ARP reply or a
    /// request RFC 826 merges, or RFC 4861 §7.2.5's solicited advertisement
    /// with a target link-layer address. Leaves a permanent entry alone.
    pub fn update(&mut self, now: Instant, addr: A, mac: [u8; 6]) {
        self.set(addr, Entry::new(Some(mac), Some(now)));
    }

    /// Records `addr` at `mac` without confirming that it is reachable.
    ///
    /// RFC 4861 §7.2.3 (a solicitation's source link-layer address) and
    /// §7.2.5 (an unsolicited advertisement, or one with the override flag):
    /// a new entry, or one whose address changes, becomes STALE, so its next
    /// use starts its confirmation; an entry already at `mac` keeps its
    /// state. A permanent entry is left alone.
    pub fn update_stale(&mut self, addr: A, mac: [u8; 6]) {
        if self.get(addr) != Some(mac) {
            self.set(addr, Entry::new(Some(mac), None));
        }
    }

    /// Makes a REACHABLE entry for `addr` STALE, its address unchanged:
    /// RFC 4861 §7.2.5's solicited advertisement of another address without
    /// the override flag. Other states are left as they are.
    pub fn make_stale(&mut self, now: Instant, addr: A) {
        if let Some(e) = self.entries.get_mut(&addr)
            && !e.permanent
            && e.is_reachable(now)
        {
            e.confirmed_at = None;
        }
    }

    /// Marks the entry for `addr` REACHABLE at `now`, its address unchanged:
    /// RFC 4861 §7.2.5's solicited advertisement without a target
    /// link-layer address, or §7.3.1's confirmation from an upper layer.
    /// Returns whether `addr` has a link address to confirm; a permanent
    /// entry has one and stays as it is.
    pub fn confirm(&mut self, now: Instant, addr: A) -> bool {
        match self.entries.get(&addr) {
            Some(e) if e.permanent => true,
            Some(&Entry { mac: Some(mac), .. }) => {
                self.set(addr, Entry::new(Some(mac), Some(now)));
                true
            }
            _ => false,
        }
    }

    /// Whether some entry waits for a confirmation (DELAY or PROBE): an
    /// upper layer that sees forward progress need look nothing up
    /// otherwise.
    pub fn awaits_confirmation(&self) -> bool {
        self.unconfirmed > 0
    }

    /// Records `addr` at `mac` for good, as `ip neigh add ... nud permanent`
    /// does: never refreshed and never changed by ARP or Neighbor Discovery.
    pub fn insert_permanent(&mut self, addr: A, mac: [u8; 6]) {
        self.replace(addr, Entry { permanent: true, ..Entry::new(Some(mac), None) });
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

    /// Puts `entry` in the place of `addr`'s, unless that one is permanent.
    fn set(&mut self, addr: A, entry: Entry) {
        if !self.entries.get(&addr).is_some_and(|e| e.permanent) {
            self.replace(addr, entry);
        }
    }

    /// Puts `entry` in the place of `addr`'s, whatever that one is, keeping
    /// the count of entries that wait for a confirmation.
    fn replace(&mut self, addr: A, entry: Entry) {
        match self.entries.get_mut(&addr) {
            Some(e) => {
                if e.used_stale_at.is_some() {
                    self.unconfirmed -= 1;
                }
                *e = entry;
            }
            None => self.insert(addr, entry),
        }
    }

    /// Adds an entry for an address that has none, evicting the oldest
    /// when full.
    fn insert(&mut self, addr: A, entry: Entry) {
        debug_assert!(entry.used_stale_at.is_none());
        if self.entries.len() >= self.capacity
            && let Some(oldest) = self.order.pop_front()
            && let Some(evicted) = self.entries.remove(&oldest)
            && evicted.used_stale_at.is_some()
        {
            self.unconfirmed -= 1;
        }
        self.entries.insert(addr, entry);
        self.order.push_back(addr);
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
    fn a_stale_entry_in_use_waits_then_is_probed_alone_then_forgotten() {
        let mut c = ArpCache::new(4);
        let t = Instant::from_secs(1);
        c.update(t, A, MAC);
        // STALE, then DELAY from its first use: used, nothing sent.
        let stale = t + ArpCache::REACHABLE;
        assert_eq!(c.state(stale, A), Some(NeighborState::Stale));
        assert!(!c.awaits_confirmation());
        assert_eq!(c.lookup(stale, A), Lookup::Hit(MAC));
        assert_eq!(c.state(stale, A), Some(NeighborState::Delay));
        assert!(c.awaits_confirmation());
        let last_delay = stale + ArpCache::DELAY_FIRST_PROBE - Duration::from_micros(1);
        assert_eq!(c.lookup(last_delay, A), Lookup::Hit(MAC));
        // PROBE: a request to the cached address every RETRY, the address
        // still used in between.
        let probe = stale + ArpCache::DELAY_FIRST_PROBE;
        assert_eq!(c.state(probe, A), Some(NeighborState::Probe));
        for i in 0..u32::from(ArpCache::MAX_UNICAST_PROBES) {
            let at = probe + ArpCache::RETRY * i;
            assert_eq!(c.lookup(at, A), Lookup::HitProbe(MAC), "probe {i}");
            assert_eq!(c.lookup(at + Duration::from_millis(500), A), Lookup::Hit(MAC));
        }
        // None answered: the address is forgotten and asked for afresh.
        let forgotten = probe + ArpCache::RETRY * u32::from(ArpCache::MAX_UNICAST_PROBES);
        assert_eq!(c.lookup(forgotten, A), Lookup::MissRequest);
        assert_eq!(c.get(A), None);
        assert_eq!(c.state(forgotten, A), Some(NeighborState::Incomplete));
        assert!(!c.awaits_confirmation());
    }

    #[test]
    fn a_probe_answered_or_a_confirmation_makes_the_entry_reachable_again() {
        let mut c = NdpCache::new(4);
        let t = Instant::from_secs(1);
        c.update_stale(A6, MAC);
        c.update_stale(B6, MAC);
        assert_eq!(c.lookup(t, A6), Lookup::Hit(MAC));
        assert_eq!(c.lookup(t, B6), Lookup::Hit(MAC));
        // A: an upper layer confirms it during DELAY.
        assert!(c.confirm(t + Duration::from_secs(1), A6));
        assert_eq!(c.state(t + Duration::from_secs(1), A6), Some(NeighborState::Reachable));
        assert!(c.awaits_confirmation(), "B still waits");
        // B: probed, and the answer confirms it.
        let probe = t + NdpCache::DELAY_FIRST_PROBE;
        assert_eq!(c.lookup(probe, B6), Lookup::HitProbe(MAC));
        c.update(probe + Duration::from_millis(2), B6, MAC);
        assert_eq!(c.state(probe + Duration::from_millis(2), B6), Some(NeighborState::Reachable));
        assert_eq!(c.lookup(probe + NdpCache::RETRY * 2, B6), Lookup::Hit(MAC));
        assert!(!c.awaits_confirmation());
    }

    #[test]
    fn evicting_or_replacing_a_waiting_entry_stops_the_wait() {
        let mut c = NdpCache::new(2);
        let t = Instant::from_secs(1);
        c.update_stale(A6, MAC);
        c.update_stale(B6, MAC);
        assert_eq!(c.lookup(t, A6), Lookup::Hit(MAC));
        assert_eq!(c.lookup(t, B6), Lookup::Hit(MAC));
        // A new address for B: STALE again, no longer waiting.
        c.update_stale(B6, OTHER_MAC);
        assert_eq!(c.state(t, B6), Some(NeighborState::Stale));
        assert!(c.awaits_confirmation(), "A still waits");
        // A is the oldest: a third neighbour evicts it.
        assert_eq!(c.lookup(t, C6), Lookup::MissRequest);
        assert!(!c.contains(A6));
        assert!(!c.awaits_confirmation());
        // A permanent entry in place of a waiting one.
        assert_eq!(c.lookup(t, B6), Lookup::Hit(OTHER_MAC));
        assert!(c.awaits_confirmation());
        c.insert_permanent(B6, MAC);
        assert!(!c.awaits_confirmation());
        assert_eq!(c.lookup(t + Duration::from_secs(100), B6), Lookup::Hit(MAC));
    }

    #[test]
    fn make_stale_doubts_only_a_reachable_entry() {
        let mut c = NdpCache::new(4);
        let t = Instant::from_secs(1);
        c.update(t, A6, MAC);
        c.make_stale(t, A6);
        assert_eq!(c.state(t, A6), Some(NeighborState::Stale));
        assert_eq!(c.get(A6), Some(MAC));
        assert_eq!(c.lookup(t, A6), Lookup::Hit(MAC));
        c.make_stale(t, A6);
        assert_eq!(c.state(t, A6), Some(NeighborState::Delay), "DELAY stays DELAY");
        c.insert_permanent(B6, MAC);
        c.make_stale(t, B6);
        assert_eq!(c.state(t, B6), Some(NeighborState::Permanent));
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
        c.update_stale(B6, MAC);
        c.update_stale(A6, OTHER_MAC); // a change is not a new entry
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
        c.update_stale(A, MAC);
        assert_eq!(c.lookup(t, B), Lookup::MissRequest);
        c.update_stale(C, MAC);
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
        // Used: DELAY, then PROBE; only an answer confirms it.
        assert_eq!(c.lookup(stale, A6), Lookup::Hit(MAC));
        assert_eq!(c.state(stale, A6), Some(NeighborState::Delay));
        let probe = stale + NdpCache::DELAY_FIRST_PROBE;
        assert_eq!(c.lookup(probe, A6), Lookup::HitProbe(MAC));
        assert_eq!(c.state(probe, A6), Some(NeighborState::Probe));
        c.update(probe + Duration::from_millis(5), A6, MAC);
        assert_eq!(c.state(probe + Duration::from_millis(5), A6), Some(NeighborState::Reachable));
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
        assert_eq!(c.lookup(stale, A), Lookup::Hit(MAC));
        assert_eq!(c.state(stale, A), Some(NeighborState::Delay));
        let probe = stale + ArpCache::DELAY_FIRST_PROBE;
        assert_eq!(c.lookup(probe, A), Lookup::HitProbe(MAC));
        assert_eq!(c.state(probe, A), Some(NeighborState::Probe));
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
    fn update_stale_creates_a_stale_entry_that_the_next_use_delays() {
        let mut c = NdpCache::new(4);
        let t = Instant::from_secs(1);
        c.update_stale(A6, MAC);
        assert_eq!(c.get(A6), Some(MAC));
        assert_eq!(c.state(t, A6), Some(NeighborState::Stale));
        assert_eq!(c.lookup(t, A6), Lookup::Hit(MAC));
        assert_eq!(c.state(t, A6), Some(NeighborState::Delay));
        assert_eq!(c.lookup(t + NdpCache::DELAY_FIRST_PROBE, A6), Lookup::HitProbe(MAC));
    }

    #[test]
    fn update_stale_with_a_new_address_makes_a_reachable_entry_stale() {
        let mut c = NdpCache::new(4);
        let t = Instant::from_secs(1);
        c.update(t, A6, MAC);
        c.update_stale(A6, OTHER_MAC);
        assert_eq!(c.get(A6), Some(OTHER_MAC));
        assert_eq!(c.state(t, A6), Some(NeighborState::Stale));
        assert_eq!(c.lookup(t, A6), Lookup::Hit(OTHER_MAC));
        assert_eq!(c.state(t, A6), Some(NeighborState::Delay));
    }

    #[test]
    fn update_stale_with_the_same_address_keeps_the_state() {
        let mut c = NdpCache::new(4);
        let t = Instant::from_secs(1);
        c.update(t, A6, MAC);
        c.update_stale(A6, MAC);
        assert_eq!(c.state(t + Duration::from_secs(1), A6), Some(NeighborState::Reachable));
        assert_eq!(c.lookup(t + Duration::from_secs(1), A6), Lookup::Hit(MAC));
        // Nor does it confirm a stale one.
        let stale = t + NdpCache::REACHABLE;
        c.update_stale(A6, MAC);
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
        c.update_stale(A6, MAC);
        assert!(!c.gave_up(A6));
        assert_eq!(c.state(learnt, A6), Some(NeighborState::Stale));
        assert_eq!(c.lookup(learnt, A6), Lookup::Hit(MAC));
        assert_eq!(c.state(learnt, A6), Some(NeighborState::Delay));
    }

    #[test]
    fn permanent_entries_ignore_update_stale() {
        let mut c = NdpCache::new(4);
        let t = Instant::from_secs(1);
        c.insert_permanent(A6, MAC);
        c.update_stale(A6, OTHER_MAC);
        assert_eq!(c.get(A6), Some(MAC));
        assert_eq!(c.state(t, A6), Some(NeighborState::Permanent));
        assert_eq!(c.lookup(t, A6), Lookup::Hit(MAC));

        let mut c = ArpCache::new(4);
        c.insert_permanent(A, MAC);
        c.update_stale(A, OTHER_MAC);
        assert_eq!(c.get(A), Some(MAC));
        assert_eq!(c.state(t, A), Some(NeighborState::Permanent));
    }

    // ---- confirm(): RFC 4861 §7.2.5 and §7.3.1 ----

    #[test]
    fn confirm_makes_a_stale_entry_reachable_without_changing_it() {
        let mut c = NdpCache::new(4);
        let t = Instant::from_secs(1);
        c.update_stale(A6, MAC);
        assert_eq!(c.lookup(t, A6), Lookup::Hit(MAC));
        assert!(c.awaits_confirmation());
        let answered = t + Duration::from_millis(5);
        assert!(c.confirm(answered, A6));
        assert_eq!(c.get(A6), Some(MAC));
        assert_eq!(c.state(answered, A6), Some(NeighborState::Reachable));
        assert_eq!(c.lookup(answered, A6), Lookup::Hit(MAC));
        // Reachable for REACHABLE from the confirmation, then stale again.
        let stale = answered + NdpCache::REACHABLE;
        assert_eq!(c.state(stale - Duration::from_micros(1), A6), Some(NeighborState::Reachable));
        assert_eq!(c.state(stale, A6), Some(NeighborState::Stale));
        assert!(!c.awaits_confirmation());
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
