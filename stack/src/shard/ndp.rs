//! Neighbor Discovery (RFC 4861) and duplicate address detection (RFC
//! 4862 §5.4): solicitations for our addresses answered, advertisements
//! and solicitations recorded in the neighbour cache, and our addresses
//! probed before they are used.

use core::net::Ipv6Addr;

use smoltcp::wire::{EthernetAddress, Icmpv6Repr, NdiscNeighborFlags, NdiscRepr, RawHardwareAddress};

use crate::config::solicited_node;
use crate::counters::DropReason;
use crate::time::{Duration, Instant};
use crate::wire::{self, NDP_HOP_LIMIT};

use super::ipv6::{ALL_NODES, AddressState, MAX_ROUTERS, Peer6};
use super::{NDP_TIMER, Shard};

/// Time between duplicate-detection probes (RFC 4861 §10 `RetransTimer`).
const RETRANS_TIMER: Duration = Duration::from_secs(1);

impl Shard {
    /// A Neighbor Discovery message (RFC 4861 §7), after the ICMPv6
    /// checksum held.
    pub(super) fn handle_ndisc(&mut self, now: Instant, peer: Peer6, hop_limit: u8, code: u8, ndisc: NdiscRepr<'_>) {
        // §7.1.1 and §7.1.2: only from the link itself.
        if hop_limit != NDP_HOP_LIMIT || code != 0 {
            return self.drop(DropReason::NdpInvalid);
        }
        match ndisc {
            NdiscRepr::NeighborSolicit { target_addr, lladdr } => self.on_solicit(peer, target_addr, lladdr),
            NdiscRepr::NeighborAdvert { flags, target_addr, lladdr } => {
                self.on_advert(now, peer, flags, target_addr, lladdr);
            }
            NdiscRepr::RouterAdvert { router_lifetime, lladdr, mtu, .. } => {
                let lifetime = Duration::from_micros(router_lifetime.total_micros());
                self.on_router_advert(now, peer, lifetime, lladdr, mtu);
            }
            _ => self.drop(DropReason::Icmpv6Ignored),
        }
    }

    /// RFC 4861 §7.2.3 (and RFC 4862 §5.4.3 for a tentative target).
    fn on_solicit(&mut self, peer: Peer6, target: Ipv6Addr, lladdr: Option<RawHardwareAddress>) {
        let from_dad = peer.ip.is_unspecified();
        // §7.1.1: a probe from `::` goes to the solicited-node group and
        // carries no link-layer address.
        if target.is_multicast() || (from_dad && (peer.dst != solicited_node(target) || lladdr.is_some())) {
            return self.drop(DropReason::NdpInvalid);
        }
        let Ok(mac) = link_address(lladdr) else {
            return self.drop(DropReason::NdpInvalid);
        };
        let Some(v6) = &mut self.ipv6 else { return };
        let Some(ours) = v6.addresses.iter_mut().find(|a| a.addr == target) else {
            return self.drop(DropReason::NdpNotForUs);
        };
        match ours.state {
            AddressState::Duplicate => return self.drop(DropReason::NdpNotForUs),
            AddressState::Tentative if from_dad => {
                // Another node probes for the same address: it is taken.
                ours.state = AddressState::Duplicate;
                self.env.0.counters.duplicate_addresses += 1;
                return self.drop(DropReason::NdpInvalid);
            }
            AddressState::Tentative => return self.drop(DropReason::NdpNotForUs),
            AddressState::Preferred => {}
        }
        if let Some(mac) = mac {
            v6.neighbors.update_stale(peer.ip, mac);
            self.flush_pending(peer.ip, mac);
        }
        // The answer: to the asker, or to all nodes when it has no address
        // yet (then unsolicited, §7.2.4).
        let (dst, dst_mac, solicited) = if from_dad {
            (ALL_NODES, wire::ipv6_multicast_mac(ALL_NODES), false)
        } else {
            (peer.ip, mac.unwrap_or(peer.mac), true)
        };
        let mut flags = NdiscNeighborFlags::OVERRIDE;
        flags.set(NdiscNeighborFlags::SOLICITED, solicited);
        let our_mac = RawHardwareAddress::from(EthernetAddress(self.config.mac));
        let advert = Icmpv6Repr::Ndisc(NdiscRepr::NeighborAdvert { flags, target_addr: target, lladdr: Some(our_mac) });
        if self.queue_icmpv6(dst_mac, target, dst, NDP_HOP_LIMIT, &advert) {
            self.env.0.counters.neighbor_adverts += 1;
        }
    }

    /// RFC 4861 §7.2.5 (and RFC 4862 §5.4.4 for a tentative target).
    fn on_advert(
        &mut self,
        now: Instant,
        peer: Peer6,
        flags: NdiscNeighborFlags,
        target: Ipv6Addr,
        lladdr: Option<RawHardwareAddress>,
    ) {
        // §7.1.2: never about a group, and a solicited one never to a group.
        if target.is_multicast() || (peer.dst.is_multicast() && flags.contains(NdiscNeighborFlags::SOLICITED)) {
            return self.drop(DropReason::NdpInvalid);
        }
        let Ok(mac) = link_address(lladdr) else {
            return self.drop(DropReason::NdpInvalid);
        };
        let Some(v6) = &mut self.ipv6 else { return };
        if let Some(ours) = v6.addresses.iter_mut().find(|a| a.addr == target) {
            if ours.state == AddressState::Tentative {
                ours.state = AddressState::Duplicate;
                self.env.0.counters.duplicate_addresses += 1;
            }
            // Another node claims an address of ours: nothing to record.
            return self.drop(DropReason::NdpInvalid);
        }
        if !v6.neighbors.contains(target) {
            // §7.2.5: an advertisement for no entry is silently discarded.
            return self.drop(DropReason::NdpNotForUs);
        }
        let solicited = flags.contains(NdiscNeighborFlags::SOLICITED);
        let override_ = flags.contains(NdiscNeighborFlags::OVERRIDE);
        match (v6.neighbors.get(target), mac) {
            // INCOMPLETE: the address it gives, confirmed if we asked.
            (None, Some(mac)) if solicited => v6.neighbors.update(now, target, mac),
            (None, Some(mac)) => v6.neighbors.update_stale(target, mac),
            // Nothing to resolve it with.
            (None, None) => {}
            // Another address, not to override ours: doubt the one we have.
            (Some(old), Some(new)) if new != old && !override_ => v6.neighbors.make_stale(now, target),
            (Some(old), lladdr) => {
                let mac = lladdr.unwrap_or(old);
                if solicited {
                    v6.neighbors.update(now, target, mac);
                } else {
                    v6.neighbors.update_stale(target, mac);
                }
            }
        }
        // What waited for the neighbour goes to the address it has now.
        if let Some(mac) = v6.neighbors.get(target) {
            self.flush_pending(target, mac);
        }
    }

    /// RFC 4861 §6.1.2 and §6.3.4: a router on the link offers itself as
    /// a default router for `lifetime` (none: it withdraws), tells its
    /// link address, and perhaps the link's MTU.
    fn on_router_advert(
        &mut self,
        now: Instant,
        peer: Peer6,
        lifetime: Duration,
        lladdr: Option<RawHardwareAddress>,
        mtu: Option<u32>,
    ) {
        if !peer.ip.is_unicast_link_local() {
            return self.drop(DropReason::NdpInvalid);
        }
        let Ok(mac) = link_address(lladdr) else {
            return self.drop(DropReason::NdpInvalid);
        };
        let our_mtu = self.config.mtu;
        let Some(v6) = &mut self.ipv6 else { return };
        if v6.gateway.is_some() {
            // A configured gateway is not replaced by what the link says.
            return self.drop(DropReason::Icmpv6Ignored);
        }
        let router = peer.ip;
        v6.routers.retain(|&(r, until)| r != router && until > now);
        if lifetime > Duration::ZERO && v6.routers.len() < MAX_ROUTERS {
            v6.routers.push((router, now + lifetime));
        }
        if let Some(mac) = mac {
            v6.neighbors.update_stale(router, mac);
        }
        // RFC 4861 §6.3.4: an MTU below the minimum, or above what the link
        // takes, is ignored.
        if let Some(mtu) = mtu.filter(|&m| (1280..=our_mtu as u32).contains(&m)) {
            v6.link_mtu = Some(mtu);
        }
    }

    /// A Neighbor Solicitation for `target` from the address of ours that
    /// suits it, with our link address (RFC 4861 §7.2.2): to its
    /// solicited-node group, or to `target` itself at `cached`, the address
    /// we have for it, to confirm that (§7.3.3's probe).
    pub(super) fn solicit_neighbor(&mut self, target: Ipv6Addr, cached: Option<[u8; 6]>) {
        let Some(src) = self.ipv6.as_ref().and_then(|v6| v6.source_for(target)) else { return };
        let (dst, dst_mac) = match cached {
            Some(mac) => (target, mac),
            None => (solicited_node(target), wire::ipv6_multicast_mac(solicited_node(target))),
        };
        let lladdr = Some(RawHardwareAddress::from(EthernetAddress(self.config.mac)));
        let ns = Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target_addr: target, lladdr });
        if self.queue_icmpv6(dst_mac, src, dst, NDP_HOP_LIMIT, &ns) {
            self.env.0.counters.neighbor_solicits += 1;
        }
    }

    /// Starts duplicate address detection for every tentative address.
    pub(super) fn start_dad(&mut self) {
        self.send_dad_probes();
    }

    /// The NDP timer: the next round of duplicate-detection probes, and
    /// tentative addresses whose probes went unanswered taken into use.
    pub(super) fn on_ndp_timer(&mut self, _now: Instant) {
        if let Some(v6) = &mut self.ipv6 {
            for address in &mut v6.addresses {
                if address.state == AddressState::Tentative && address.probes_left == 0 {
                    address.state = AddressState::Preferred;
                }
            }
        }
        self.send_dad_probes();
    }

    /// One probe for each tentative address with probes left (RFC 4862
    /// §5.4.2: from `::` to its solicited-node group, no link-layer
    /// address), and the timer for the next round.
    fn send_dad_probes(&mut self) {
        let Some(v6) = &mut self.ipv6 else { return };
        let mut targets = Vec::new();
        let mut waiting = false;
        for address in &mut v6.addresses {
            if address.state == AddressState::Tentative {
                waiting = true;
                if address.probes_left > 0 {
                    address.probes_left -= 1;
                    targets.push(address.addr);
                }
            }
        }
        for target in targets {
            let group = solicited_node(target);
            let probe = Icmpv6Repr::Ndisc(NdiscRepr::NeighborSolicit { target_addr: target, lladdr: None });
            let mac = wire::ipv6_multicast_mac(group);
            if self.queue_icmpv6(mac, Ipv6Addr::UNSPECIFIED, group, NDP_HOP_LIMIT, &probe) {
                self.env.0.counters.neighbor_solicits += 1;
            }
        }
        if waiting {
            self.timers.schedule(NDP_TIMER, self.now + RETRANS_TIMER);
        }
    }
}

/// The Ethernet address a link-layer address option gives, if there is
/// one; `Err` when it is not an Ethernet unicast address (the message is
/// invalid then).
fn link_address(lladdr: Option<RawHardwareAddress>) -> Result<Option<[u8; 6]>, ()> {
    let Some(lladdr) = lladdr else { return Ok(None) };
    let bytes: [u8; 6] = lladdr.as_bytes().try_into().map_err(|_| ())?;
    if EthernetAddress(bytes).is_unicast() { Ok(Some(bytes)) } else { Err(()) }
}
