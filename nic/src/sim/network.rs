//! [`Network`]: the hosts, switches and links of the dumbbell, and the event
//! loop that moves frames between them in virtual time.

use std::collections::VecDeque;

use fairway_stack::ETHERNET_HEADER_LEN;
use fairway_stack::time::Instant;

use super::frame_pool::{BROADCAST, FrameMeta, FramePool};
use super::link::Arrival;
use super::link::{LinkEnd, LinkState};
use super::link_config::LinkConfig;
use super::port::Port;
use super::stats::{HostLinkStats, LinkStats, NetworkStats};
use super::topology::{HostId, LinkId, Side};
use crate::deadline_queue::DeadlineQueue;

/// Larger buffers are a configuration bug, and the serialiser's arithmetic
/// relies on frame lengths staying below this.
const MAX_FRAME_LEN_LIMIT: usize = 1 << 24;

#[derive(Debug)]
struct Host {
    side: Side,
    mac: [u8; 6],
    uplink: u32,
    downlink: u32,
    /// Frames that have arrived, oldest first, waiting for `receive`.
    rx: VecDeque<u32>,
}

/// A deterministic simulated Ethernet: hosts on two sides of one shared
/// bottleneck, in virtual time. See the [module documentation](super) for the
/// model and the driving loop.
#[derive(Debug)]
pub struct Network {
    now: u64,
    max_frame_len: usize,
    seed: u64,
    /// Indexed as [`LinkId::index`] describes.
    links: Vec<LinkState>,
    hosts: Vec<Host>,
    /// Host indices per side, in the order they were added.
    side_hosts: [Vec<u32>; 2],
    pool: FramePool,
    events: DeadlineQueue<Arrival>,
    unroutable: u64,
}

impl Network {
    /// An empty network at time zero whose frames are at most
    /// `max_frame_len` bytes (Ethernet header included, no FCS; 1514 for a
    /// 1500-byte MTU), with a bottleneck configured by `left_to_right` and
    /// `right_to_left`. Every random draw derives from `seed`.
    ///
    /// # Panics
    ///
    /// If `max_frame_len` is shorter than an Ethernet header or 16 MiB or
    /// more, or if a configuration has a probability outside `[0, 1]`.
    #[track_caller]
    pub fn new(seed: u64, max_frame_len: usize, left_to_right: LinkConfig, right_to_left: LinkConfig) -> Network {
        assert!(
            (ETHERNET_HEADER_LEN..MAX_FRAME_LEN_LIMIT).contains(&max_frame_len),
            "max_frame_len {max_frame_len} is outside [{ETHERNET_HEADER_LEN}, {MAX_FRAME_LEN_LIMIT})"
        );
        let links = vec![
            LinkState::new(left_to_right, LinkEnd::Switch { side: Side::Right, from_bottleneck: true }, seed, 0),
            LinkState::new(right_to_left, LinkEnd::Switch { side: Side::Left, from_bottleneck: true }, seed, 1),
        ];
        Network {
            now: 0,
            max_frame_len,
            seed,
            links,
            hosts: Vec::new(),
            side_hosts: [Vec::new(), Vec::new()],
            pool: FramePool::new(max_frame_len),
            events: DeadlineQueue::default(),
            unroutable: 0,
        }
    }

    /// Adds a host on `side` with address `mac`, joined to that side's switch
    /// by an uplink and a downlink that both follow `access`.
    ///
    /// # Panics
    ///
    /// If another host already has `mac`, if `mac` is a group (multicast or
    /// broadcast) address, or if `access` has a probability outside `[0, 1]`.
    #[track_caller]
    pub fn add_host(&mut self, side: Side, mac: [u8; 6], access: LinkConfig) -> HostId {
        assert!(mac[0] & 1 == 0, "host MAC {mac:02x?} is a group address");
        assert!(self.host_by_mac(&mac).is_none(), "host MAC {mac:02x?} is already taken");
        let id = HostId(u32::try_from(self.hosts.len()).expect("fewer than 2^31 hosts"));
        let uplink = LinkId::Uplink(id).index();
        let downlink = LinkId::Downlink(id).index();
        debug_assert_eq!(uplink, self.links.len());
        self.links.push(LinkState::new(
            access,
            LinkEnd::Switch { side, from_bottleneck: false },
            self.seed,
            uplink as u64,
        ));
        self.links.push(LinkState::new(access, LinkEnd::Host(id.0), self.seed, downlink as u64));
        self.hosts.push(Host { side, mac, uplink: uplink as u32, downlink: downlink as u32, rx: VecDeque::new() });
        self.side_hosts[side.index()].push(id.0);
        id
    }

    /// The current virtual time.
    pub fn now(&self) -> Instant {
        Instant::from_micros(self.now)
    }

    /// The time of the earliest pending event, or `None` when no frame is in
    /// flight. Events include a frame reaching a switch, so a frame may take
    /// several events (one per hop) to land in a receive queue; the time
    /// returned is never earlier than [`now`](Network::now).
    pub fn next_event(&self) -> Option<Instant> {
        self.events.next_at().map(Instant::from_micros)
    }

    /// Runs every event due at or before `to`, in time order (ties in the
    /// order they were scheduled), then sets the clock to `to`. Frames that
    /// reach a host wait in its receive queue. Time never moves backwards:
    /// `to` earlier than [`now`](Network::now) runs nothing and leaves the
    /// clock alone.
    pub fn advance(&mut self, to: Instant) {
        let to = to.total_micros();
        if to < self.now {
            return;
        }
        while let Some(event) = self.events.pop_due(to) {
            self.now = event.at;
            self.arrive(event.item.frame, event.item.link);
        }
        self.now = to;
    }

    /// Whether `host` has received frames waiting for
    /// [`Device::receive`](crate::Device::receive).
    pub fn has_pending_rx(&self, host: HostId) -> bool {
        !self.hosts[host.index()].rx.is_empty()
    }

    /// How many received frames `host` has waiting.
    pub fn pending_rx(&self, host: HostId) -> usize {
        self.hosts[host.index()].rx.len()
    }

    /// The [`Device`](crate::Device) through which `host` receives and
    /// transmits.
    pub fn port(&mut self, host: HostId) -> Port<'_> {
        assert!(host.index() < self.hosts.len(), "{host:?} is not a host of this network");
        Port::new(self, host.0)
    }

    /// The largest frame the network carries.
    pub fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }

    /// How many hosts have been added.
    pub fn host_count(&self) -> usize {
        self.hosts.len()
    }

    /// Every host, in the order they were added.
    pub fn hosts(&self) -> impl ExactSizeIterator<Item = HostId> + use<> {
        (0..self.hosts.len() as u32).map(HostId)
    }

    /// The address `host` registered.
    pub fn host_mac(&self, host: HostId) -> [u8; 6] {
        self.hosts[host.index()].mac
    }

    /// The side `host` was added on.
    pub fn host_side(&self, host: HostId) -> Side {
        self.hosts[host.index()].side
    }

    /// The configuration of `link`.
    pub fn link_config(&self, link: LinkId) -> LinkConfig {
        self.link(link).config()
    }

    /// Reconfigures `link` from now on (to model a route change or a loss
    /// burst). Frames already on the wire keep their arrival times; frames
    /// already queued keep their place.
    ///
    /// # Panics
    ///
    /// If `config` has a probability outside `[0, 1]`.
    #[track_caller]
    pub fn set_link_config(&mut self, link: LinkId, config: LinkConfig) {
        let index = self.link_index(link);
        self.links[index].configure(config);
    }

    /// The counters of `link`.
    pub fn link_stats(&self, link: LinkId) -> LinkStats {
        self.link(link).stats
    }

    /// Bytes waiting in `link`'s queue now, the frame being serialised
    /// excluded.
    pub fn queued_bytes(&self, link: LinkId) -> usize {
        self.link(link).queued_bytes(self.now)
    }

    /// A snapshot of every counter.
    pub fn stats(&self) -> NetworkStats {
        let total = self.links.iter().fold(LinkStats::default(), |sum, l| sum + l.stats);
        let hosts = self
            .hosts
            .iter()
            .map(|h| HostLinkStats {
                uplink: self.links[h.uplink as usize].stats,
                downlink: self.links[h.downlink as usize].stats,
            })
            .collect();
        NetworkStats {
            left_to_right: self.links[LinkId::Bottleneck { from: Side::Left }.index()].stats,
            right_to_left: self.links[LinkId::Bottleneck { from: Side::Right }.index()].stats,
            hosts,
            total,
            unroutable: self.unroutable,
        }
    }

    /// Pre-allocates room for `frames` frames in the network at once
    /// (buffers, event queue), and as many waiting in each link's queue and
    /// each host's receive queue, so that a workload that stays under that
    /// never allocates, even the first time it peaks. Call it after adding
    /// the hosts. Costs `max_frame_len` bytes per frame, plus 16 per frame
    /// per link.
    pub fn reserve_frames(&mut self, frames: usize) {
        self.pool.reserve(frames);
        self.events.reserve(frames);
        for link in &mut self.links {
            link.reserve(frames);
        }
        for host in &mut self.hosts {
            host.rx.reserve(frames.saturating_sub(host.rx.len()));
        }
    }

    fn link(&self, link: LinkId) -> &LinkState {
        &self.links[self.link_index(link)]
    }

    #[track_caller]
    fn link_index(&self, link: LinkId) -> usize {
        let index = link.index();
        assert!(index < self.links.len(), "{link:?} is not a link of this network");
        index
    }

    fn host_by_mac(&self, mac: &[u8]) -> Option<u32> {
        // A linear scan beats hashing for the handful of hosts a test has.
        self.hosts.iter().position(|h| h.mac == *mac).map(|i| i as u32)
    }

    // ---- the data path, called by `Port` and by `advance` ----

    /// A buffer for `host` to fill.
    pub(super) fn take_buffer(&mut self) -> (u32, &mut [u8]) {
        let id = self.pool.take();
        (id, self.pool.buffer_mut(id))
    }

    /// Returns a buffer `fill` declined to use.
    pub(super) fn return_buffer(&mut self, id: u32) {
        self.pool.release(id);
    }

    /// Host `src` transmits the first `len` bytes of buffer `id` at `now`.
    pub(super) fn inject(&mut self, src: u32, id: u32, len: usize) {
        let frame = &self.pool.buffer(id)[..len];
        let dst = if len < ETHERNET_HEADER_LEN {
            None
        } else if frame[0] & 1 == 1 {
            Some(BROADCAST)
        } else {
            self.host_by_mac(&frame[..6])
        };
        let Some(dst) = dst else {
            self.unroutable += 1;
            self.pool.release(id);
            return;
        };
        self.pool.set_meta(id, FrameMeta { len: len as u32, src, dst });
        self.send(self.hosts[src as usize].uplink, id);
    }

    /// Hands received frames of `host` to `on_frame`; see
    /// [`Device::receive`](crate::Device::receive).
    pub(super) fn deliver_rx<F: FnMut(&[u8])>(&mut self, host: u32, budget: usize, mut on_frame: F) -> usize {
        let rx = &mut self.hosts[host as usize].rx;
        let mut handed = 0;
        while handed < budget {
            let Some(id) = rx.pop_front() else { break };
            on_frame(self.pool.frame(id));
            self.pool.release(id);
            handed += 1;
        }
        handed
    }

    /// Offers frame `id` to link `link` at the current time.
    fn send(&mut self, link: u32, id: u32) {
        self.links[link as usize].offer(self.now, id, link, &mut self.pool, &mut self.events);
    }

    /// Frame `id` has reached the far end of `link`.
    fn arrive(&mut self, id: u32, link: u32) {
        let state = &mut self.links[link as usize];
        let len = self.pool.meta(id).len;
        state.stats.frames_delivered += 1;
        state.stats.bytes_delivered += u64::from(len);
        match state.end() {
            LinkEnd::Host(host) => self.hosts[host as usize].rx.push_back(id),
            LinkEnd::Switch { side, from_bottleneck } => self.switch(side, from_bottleneck, id),
        }
    }

    /// The switch on `side` forwards frame `id`, which came from a host's
    /// uplink or, if `from_bottleneck`, from the other switch.
    fn switch(&mut self, side: Side, from_bottleneck: bool, id: u32) {
        let meta = self.pool.meta(id);
        let bottleneck = LinkId::Bottleneck { from: side }.index() as u32;
        if meta.dst != BROADCAST {
            let dst = &self.hosts[meta.dst as usize];
            if dst.side == side {
                self.send(dst.downlink, id);
            } else {
                debug_assert!(!from_bottleneck, "a unicast frame crossed the bottleneck to the wrong side");
                self.send(bottleneck, id);
            }
            return;
        }

        // Flood: every other host on this side, and the other switch unless
        // the frame came from there or nobody is listening there. The last
        // recipient gets the original buffer, the others copies.
        let cross = !from_bottleneck && !self.side_hosts[side.other().index()].is_empty();
        let local = &self.side_hosts[side.index()];
        let recipients = local.iter().filter(|&&h| h != meta.src).count() + usize::from(cross);
        if recipients == 0 {
            self.pool.release(id);
            return;
        }
        let mut remaining = recipients;
        let mut forward = |net: &mut Network, link: u32| {
            remaining -= 1;
            let frame = if remaining == 0 { id } else { net.pool.duplicate(id) };
            net.send(link, frame);
        };
        for i in 0..self.side_hosts[side.index()].len() {
            let host = self.side_hosts[side.index()][i];
            if host != meta.src {
                let downlink = self.hosts[host as usize].downlink;
                forward(self, downlink);
            }
        }
        if cross {
            forward(self, bottleneck);
        }
    }
}
