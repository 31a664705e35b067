//! A deterministic simulated Ethernet in virtual time.
//!
//! This module owns the in-memory backend of [`Device`](crate::Device): a
//! discrete-event network that the real stack runs over in tests and
//! benchmarks. Nothing here reads a clock, sleeps or spawns: time is a number
//! the driver moves forward, so a run is a pure function of its seed and its
//! inputs (same seed, same calls ⇒ bit-identical frames at identical times).
//!
//! # Topology
//!
//! A dumbbell generalised to any number of hosts: a switch on each [`Side`],
//! one bottleneck joining the two switches (a [`LinkConfig`] per direction),
//! and each host joined to its side's switch by an access uplink and downlink
//! (one [`LinkConfig`] for both, so each host has its own access delay).
//!
//! ```text
//!  host ─┐                                   ┌─ host
//!  host ─┼─ left switch ══ bottleneck ══ right switch ─┼─ host
//!  host ─┘        (left→right, right→left)   └─ host
//! ```
//!
//! Switches forward by destination MAC. A frame from a left host to a right
//! host takes three hops (uplink, bottleneck left→right, downlink); a frame
//! between two hosts on the same side takes two and never touches the
//! bottleneck. A frame addressed to its own sender comes back down its
//! downlink. A frame to a group address (broadcast, multicast) reaches
//! every host but its sender, crossing the bottleneck once. A frame to a
//! unicast MAC that no host registered, or shorter than an Ethernet header,
//! is counted in [`NetworkStats::unroutable`] and dropped when transmitted.
//!
//! # Links
//!
//! Each direction of each link is a FIFO serialiser with a drop-tail queue,
//! followed by seeded impairments and a propagation delay; [`LinkConfig`]
//! documents the order of the steps. Each link draws from its own random
//! stream (xoshiro256++, seeded from the network seed and the link's index),
//! so traffic on one link never changes what happens on another, and adding
//! a host changes no existing link's stream.
//!
//! # Driving it
//!
//! Each host is reached through [`Network::port`], a [`Port`] that implements
//! [`Device`](crate::Device). Frames transmitted through a port leave at
//! [`Network::now`]; [`Network::advance`] runs every event up to a time and
//! leaves arrived frames in receive queues. A driver alternates the two,
//! jumping time to whichever comes first: the network's
//! [`next_event`](Network::next_event) or the stacks' own timers.
//!
//! ```
//! use fairway_nic::Device;
//! use fairway_nic::sim::{LinkConfig, Network, Side};
//! use fairway_stack::time::{Duration, Instant};
//!
//! let bottleneck = LinkConfig::ideal().with_delay(Duration::from_millis(10)).with_bandwidth_mbps(100);
//! let mut net = Network::new(7, 1514, bottleneck, bottleneck);
//! let access = LinkConfig::ideal().with_delay(Duration::from_micros(50));
//! let a = net.add_host(Side::Left, [2, 0, 0, 0, 0, 1], access);
//! let b = net.add_host(Side::Right, [2, 0, 0, 0, 0, 2], access);
//!
//! // `a` sends one 100-byte frame to `b`.
//! let sent = net.port(a).transmit(1, |buf| {
//!     buf[..6].copy_from_slice(&[2, 0, 0, 0, 0, 2]); // destination
//!     buf[6..12].copy_from_slice(&[2, 0, 0, 0, 0, 1]); // source
//!     buf[12..14].copy_from_slice(&0x0800u16.to_be_bytes());
//!     buf[14..100].fill(0xab);
//!     Some(100)
//! });
//! assert_eq!(sent, 1);
//!
//! // Jump from event to event until the network is idle.
//! while let Some(t) = net.next_event() {
//!     net.advance(t);
//! }
//! // 50 µs + (8 µs of serialisation + 10 ms) + 50 µs.
//! assert_eq!(net.now(), Instant::from_micros(10_108));
//! let mut got = Vec::new();
//! net.port(b).receive(16, |frame| got.push(frame.len()));
//! assert_eq!(got, [100]);
//! ```
//!
//! # Memory
//!
//! Frame buffers (each `max_frame_len` bytes) come from a pool and go back to
//! it; the event heap, link queues and receive queues keep their capacity.
//! Once a workload has reached its peak number of frames in flight, nothing
//! allocates per frame; [`Network::reserve_frames`] reaches that state up
//! front. Receive queues are unbounded: a host that never drains keeps its
//! frames.

#![forbid(unsafe_code)]

mod frame_pool;
pub(crate) mod link;
mod link_config;
mod network;
mod port;
mod stats;
mod topology;

pub use link_config::LinkConfig;
pub use network::Network;
pub use port::Port;
pub use stats::{HostLinkStats, LinkStats, NetworkStats};
pub use topology::{HostId, LinkId, Side};
