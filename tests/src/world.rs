//! A simulated world: shards on hosts of a [`Network`], driven in virtual
//! time the way a real runtime drives them.
//!
//! Each step jumps to the earliest of the network's next event and the
//! shards' next deadlines, delivers arrived frames, runs due timers, lets the
//! application act on each host, and transmits what the shards produced.
//! Nothing sleeps; a run is a pure function of its seed.

use core::net::Ipv4Addr;
use std::cell::RefCell;
use std::rc::Rc;

use fairway_nic::Device;
use fairway_nic::sim::{HostId, LinkConfig, Network, Side};
use fairway_stack::time::Instant;
use fairway_stack::{Config, Shard};

/// What runs on the hosts: called once per host per step, after the host's
/// frames and timers were handled and before its output is sent.
pub trait SimApp {
    /// Acts on `host`'s events and drives its shard.
    fn on_host(&mut self, host: usize, shard: &mut Shard, now: Instant);
    /// Whether the run is complete.
    fn done(&self) -> bool;
    /// The next time the application wants to act without any event (for
    /// example, to start a transfer on schedule).
    fn next_wakeup(&self) -> Option<Instant> {
        None
    }
}

/// A host without a stack of its own (see [`World::add_raw_host`]): an
/// attacker or a scripted peer that reads and writes whole frames.
pub trait RawHost {
    /// Handles the frames that arrived for the host since its last turn (all
    /// of them, oldest first) and pushes onto `out` the frames it sends.
    fn on_frames(&mut self, now: Instant, frames: &[Vec<u8>], out: &mut Vec<Vec<u8>>);
    /// The next time it wants a turn without any frame arriving.
    fn next_wakeup(&self) -> Option<Instant>;
}

/// A shared handle on a raw host, so that the caller can read its state
/// while the world drives it.
pub type SharedRawHost = Rc<RefCell<dyn RawHost>>;

/// A host: a shard behind a port of the network.
pub struct Host {
    /// The stack.
    pub shard: Shard,
    /// The network port.
    pub id: HostId,
    /// Its address.
    pub ip: Ipv4Addr,
    /// Set for a host whose frames bypass its shard.
    raw: Option<SharedRawHost>,
    /// Whether its shard leaves TCP checksums partial
    /// ([`Config::tx_checksum_offload`]), for its port to finish as a NIC
    /// with the offload would.
    finishes_checksums: bool,
}

/// Why [`World::run`] returned.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stop {
    /// The application said it is done.
    Done,
    /// Nothing will ever happen again: no frame in flight, no timer set.
    Idle,
    /// The virtual-time limit was reached.
    TimeLimit,
    /// The step limit was reached (a livelock guard).
    StepLimit,
}

/// Counts the heap bytes one host's calls allocate (net of frees), through
/// a reader of the process's allocation counters.
#[derive(Clone, Copy, Debug)]
pub struct Meter {
    /// The host whose calls are measured.
    pub host: usize,
    /// Reads the process's net heap bytes.
    pub read: fn() -> i64,
    /// Net bytes allocated during the host's calls so far.
    pub bytes: i64,
}

/// Wall-clock time one host spends: in its whole turns (frames, timers, the
/// application, transmission), and in handling the frames from one MAC
/// address apart from all others.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    /// The host measured.
    pub host: usize,
    /// Frames from this source address are timed apart.
    pub from: [u8; 6],
    /// Time in the host's turns.
    pub turns: std::time::Duration,
    /// Frames from `from` handled, and the time their handling took.
    pub from_frames: (u64, std::time::Duration),
    /// The same for every other frame.
    pub other_frames: (u64, std::time::Duration),
}

impl Clock {
    /// A clock on `host`, timing frames from `from` apart.
    pub fn new(host: usize, from: [u8; 6]) -> Clock {
        let zero = (0, std::time::Duration::ZERO);
        Clock { host, from, turns: std::time::Duration::ZERO, from_frames: zero, other_frames: zero }
    }
}

/// A frame observer (see [`World::tap`]).
pub type Tap = Box<dyn FnMut(usize, Instant, &[u8])>;

/// Shards on a simulated network.
pub struct World {
    /// The network.
    pub net: Network,
    /// The hosts, in the order they were added.
    pub hosts: Vec<Host>,
    /// Steps taken so far.
    pub steps: u64,
    /// Heap accounting for one host, if set.
    pub meter: Option<Meter>,
    /// Sees every frame a host's shard transmits: (host, time, frame).
    pub tap: Option<Tap>,
    /// Wall-clock time one host spends, if set.
    pub clock: Option<Clock>,
    mtu: usize,
    /// Frames a raw host received this turn, and the ones it sends.
    raw_in: Vec<Vec<u8>>,
    raw_out: Vec<Vec<u8>>,
}

impl World {
    /// An empty world: a dumbbell whose bottleneck has `left_to_right` and
    /// `right_to_left` links, carrying IP packets of up to `mtu` bytes.
    pub fn new(seed: u64, mtu: usize, left_to_right: LinkConfig, right_to_left: LinkConfig) -> World {
        World {
            net: Network::new(seed, mtu + 14, left_to_right, right_to_left),
            hosts: Vec::new(),
            steps: 0,
            meter: None,
            tap: None,
            clock: None,
            mtu,
            raw_in: Vec::new(),
            raw_out: Vec::new(),
        }
    }

    /// The MAC address the world gives `ip`.
    pub fn mac_of(ip: Ipv4Addr) -> [u8; 6] {
        let o = ip.octets();
        [0x02, 0x00, o[0], o[1], o[2], o[3]]
    }

    /// A configuration for a host at `ip` on the world's 10.0.0.0/8 subnet,
    /// with a secret derived from the address.
    pub fn config_for(&self, ip: Ipv4Addr) -> Config {
        let mut c = Config::new(World::mac_of(ip), ip, 8);
        c.mtu = self.mtu;
        c.secret = 0xfa17_0000_0000 ^ ip.to_bits() as u128;
        c
    }

    /// Adds a host with `config` on `side`, reached through `access`.
    pub fn add_host(&mut self, side: Side, config: Config, access: LinkConfig) -> usize {
        let (ip, finishes_checksums) = (config.ip, config.tx_checksum_offload);
        let id = self.net.add_host(side, config.mac, access);
        self.hosts.push(Host { shard: Shard::new(config), id, ip, raw: None, finishes_checksums });
        self.hosts.len() - 1
    }

    /// Adds a host at `ip` on `side` whose frames go to `raw` instead of a
    /// stack: the application is never called for it, and its shard (kept
    /// so that host indices stay uniform) sees nothing.
    pub fn add_raw_host(&mut self, side: Side, ip: Ipv4Addr, access: LinkConfig, raw: SharedRawHost) -> usize {
        let config = self.config_for(ip);
        let host = self.add_host(side, config, access);
        self.hosts[host].raw = Some(raw);
        host
    }

    /// The current virtual time.
    pub fn now(&self) -> Instant {
        self.net.now()
    }

    /// Puts `frame` on `host`'s uplink at the current time, as raw bytes
    /// that never pass through the host's shard: what an attacker or a
    /// packet generator on that host sends. Returns `false` (and sends
    /// nothing) when the frame is longer than the network carries.
    pub fn transmit_raw(&mut self, host: usize, frame: &[u8]) -> bool {
        let mut port = self.net.port(self.hosts[host].id);
        let mut pending = Some(frame);
        let sent = port.transmit(1, |buf| {
            let frame = pending.take().filter(|f| f.len() <= buf.len())?;
            buf[..frame.len()].copy_from_slice(frame);
            Some(frame.len())
        });
        sent == 1
    }

    /// Runs until the application is done, nothing is left to do, `until`
    /// passes, or `max_steps` steps were taken.
    pub fn run(&mut self, app: &mut impl SimApp, until: Instant, max_steps: u64) -> Stop {
        // Let every host act once at the start (listen, first connects).
        let now = self.now();
        self.visit_all(app, now);
        let mut steps = 0u64;
        loop {
            if app.done() {
                return Stop::Done;
            }
            if steps >= max_steps {
                return Stop::StepLimit;
            }
            let Some(next) = self.next_time(app) else {
                return Stop::Idle;
            };
            if next > until {
                self.net.advance(until);
                return Stop::TimeLimit;
            }
            let now = next.max(self.now());
            self.net.advance(now);
            self.visit_all(app, now);
            steps += 1;
            self.steps += 1;
        }
    }

    /// The earliest time anything happens: a frame hop, a shard deadline or
    /// an application wake-up.
    fn next_time(&self, app: &impl SimApp) -> Option<Instant> {
        let shards = self.hosts.iter().filter_map(|h| match &h.raw {
            None => h.shard.poll_timeout(),
            Some(raw) => raw.borrow().next_wakeup(),
        });
        self.net.next_event().into_iter().chain(shards).chain(app.next_wakeup()).min()
    }

    fn visit_all(&mut self, app: &mut impl SimApp, now: Instant) {
        for i in 0..self.hosts.len() {
            if let Some(raw) = self.hosts[i].raw.clone() {
                self.visit_raw(i, &raw, now);
                continue;
            }
            let mut clock = self.clock.filter(|c| c.host == i);
            let started = clock.map(|_| std::time::Instant::now());
            let metered = self.meter.filter(|m| m.host == i).map(|m| (m.read)());
            let host = &mut self.hosts[i];
            let mut port = self.net.port(host.id);
            let shard = &mut host.shard;
            match clock.as_mut() {
                None => port.receive(usize::MAX, |frame| shard.handle_frame(now, frame)),
                Some(clock) => port.receive(usize::MAX, |frame| {
                    let t = std::time::Instant::now();
                    shard.handle_frame(now, frame);
                    let class = if frame.get(6..12) == Some(&clock.from[..]) {
                        &mut clock.from_frames
                    } else {
                        &mut clock.other_frames
                    };
                    class.0 += 1;
                    class.1 += t.elapsed();
                }),
            };
            if shard.poll_timeout().is_some_and(|t| t <= now) {
                shard.handle_timeout(now);
            }
            app.on_host(i, shard, now);
            let finish = host.finishes_checksums;
            match self.tap.as_mut() {
                None if !finish => port.transmit(usize::MAX, |buf| shard.poll_transmit(now, buf)),
                mut tap => port.transmit(usize::MAX, |buf| {
                    let len = shard.poll_transmit(now, buf)?;
                    if finish {
                        fairway_stack::finish_partial_checksum(&mut buf[..len]);
                    }
                    if let Some(tap) = tap.as_mut() {
                        tap(i, now, &buf[..len]);
                    }
                    Some(len)
                }),
            };
            if let (Some(before), Some(meter)) = (metered, self.meter.as_mut()) {
                meter.bytes += (meter.read)() - before;
            }
            if let (Some(started), Some(mut clock)) = (started, clock) {
                clock.turns += started.elapsed();
                self.clock = Some(clock);
            }
        }
    }

    fn visit_raw(&mut self, i: usize, raw: &SharedRawHost, now: Instant) {
        let mut port = self.net.port(self.hosts[i].id);
        raw_turn(&mut *raw.borrow_mut(), &mut port, now, &mut self.raw_in, &mut self.raw_out);
    }
}

/// One turn of a raw host on `device` (a port of the simulated network, or
/// a real one): hands it every frame that arrived, if any did or its
/// wake-up is due, and sends what it returns (a frame longer than the
/// device carries is dropped). `frames` and `out` are scratch kept between
/// turns.
pub fn raw_turn(
    raw: &mut dyn RawHost,
    device: &mut impl Device,
    now: Instant,
    frames: &mut Vec<Vec<u8>>,
    out: &mut Vec<Vec<u8>>,
) {
    frames.clear();
    device.receive(usize::MAX, |frame| frames.push(frame.to_vec()));
    if !frames.is_empty() || raw.next_wakeup().is_some_and(|t| t <= now) {
        raw.on_frames(now, frames, out);
    }
    let mut pending = out.drain(..);
    let mut next = pending.next();
    device.transmit(usize::MAX, |buf| {
        while let Some(frame) = next.take() {
            next = pending.next();
            if frame.len() <= buf.len() {
                buf[..frame.len()].copy_from_slice(&frame);
                return Some(frame.len());
            }
        }
        None
    });
}
