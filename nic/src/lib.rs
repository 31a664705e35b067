//! Fairway's packet I/O: everything that moves Ethernet frames in and out of
//! the protocol engine.
//!
//! - [`Device`] is the one interface the runtime drives: batched receive and
//!   transmit of whole Ethernet frames through buffers the device owns and
//!   recycles. Its contract is written once, on the trait; every backend
//!   follows it.
//! - [`sim`] is the in-memory backend: a deterministic discrete-event network
//!   in virtual time (delay, bandwidth, drop-tail queues, seeded loss,
//!   reordering, duplication and corruption; any number of hosts behind one
//!   shared bottleneck). Tests and benchmarks run the real stack over it.
//! - [`tap`] (Linux) is the kernel-facing backend that needs no special NIC:
//!   a TAP interface, one `read(2)` or `write(2)` per frame.
//! - [`interface`] (Linux) asks the kernel about an interface (its MAC)
//!   from the calling thread's network namespace.
//! - [`fresh_frames`] wraps any device and, for the receive-path ablation,
//!   copies every frame through a buffer allocated for it alone (as a
//!   kernel's `sk_buff`), instead of using the device's recycled buffers.
//! - [`pcap`] wraps any device and records every frame it receives and
//!   transmits to a pcap file that tcpdump and Wireshark read.
//! - [`linkem`] (Linux) is the link emulator behind `fairway-linkem`: the
//!   simulator's link model (delay, rate, drop-tail queue, loss, reordering)
//!   driven by the wall clock between two real interfaces, since this
//!   kernel has no netem.
//!
//! `afxdp` (Linux, feature `afxdp`) is the AF_XDP backend, one socket per NIC queue.
#![deny(missing_docs)]

#[cfg(all(target_os = "linux", feature = "afxdp"))]
pub mod afxdp;
mod deadline_queue;
mod device;
pub mod fresh_frames;
#[cfg(target_os = "linux")]
pub mod interface;
#[cfg(target_os = "linux")]
pub mod linkem;
#[cfg(target_os = "linux")]
pub mod packet_port;
pub mod pcap;
pub mod sim;
#[cfg(unix)]
pub mod socket_pair;
pub mod steering;
#[cfg(target_os = "linux")]
pub mod tap;
#[cfg(test)]
mod test_frames;
#[cfg(target_os = "linux")]
mod timer_fd;
mod wait;

pub use device::Device;
#[cfg(target_os = "linux")]
pub use timer_fd::{TimerFd, thread_cpu_time};
pub use wait::Wait;
