//! A link emulator for real interfaces: the simulated network's link model
//! (`sim`), driven by the wall clock, between two Linux interfaces.
//!
//! This kernel has no netem, so the testbed puts [`Emulator`] (through the
//! `fairway-linkem` binary) between a client's veth and the rest of the
//! testbed. It owns two raw `AF_PACKET` sockets per direction, the frame
//! buffers in flight, and the timing of their departure.
//!
//! # The model
//!
//! The emulator is a wire with a bump in it, between interfaces A and B: every
//! frame that arrives on A leaves by B and vice versa, whatever its
//! destination MAC or EtherType, unchanged unless an impairment says
//! otherwise. Each direction is one [`LinkConfig`](crate::sim::LinkConfig)
//! and runs the very code of the simulated network's links
//! (`sim::link::LinkModel`), so the semantics are the simulator's, step by
//! step:
//!
//! 1. **Queue.** While earlier frames are being "serialised", a frame waits
//!    in a FIFO; when the bytes waiting plus this frame would exceed the
//!    queue limit, it is dropped (drop-tail). The frame being serialised
//!    does not count as waiting.
//! 2. **Serialisation** at the configured rate: `len × 8 / rate` per frame,
//!    `len` being the Ethernet frame without preamble, FCS or inter-frame
//!    gap (as in the simulator), kept exact between back-to-back frames.
//! 3. **Impairments**, drawn from the direction's own seeded xoshiro256++
//!    stream in a fixed order: loss, corruption (one byte), duplication,
//!    reordering (an extra delay uniform in `(0, reorder-delay]`, so later
//!    frames overtake; it does not hold up the link).
//! 4. **Propagation**: the frame leaves B `delay` after its serialisation
//!    ends.
//!
//! Time is `CLOCK_MONOTONIC` in whole microseconds. A frame enters the model
//! at its kernel receive time stamp (`SO_TIMESTAMPNS`), not at the time the
//! worker got round to reading it, so the worker's own wake-up latency does
//! not add to the delay (as long as it is shorter than the delay). The
//! stamps are `CLOCK_REALTIME`; the offset between the two clocks is read
//! with the real-time reading bracketed by two monotonic ones, and used only
//! from a tight bracket, since an interrupt between two plain readings would
//! make a whole batch of frames leave early.
//!
//! A frame never leaves before its time: every error is lateness. This
//! matters to whoever measures minimum RTTs through the emulator (Fairway's
//! window policy does).
//!
//! # Threads and timing
//!
//! One thread per direction. Each reads frames in batches (`recvmmsg`),
//! copies each into a recycled buffer (allocated at peaks only), asks the
//! model when it leaves, and keeps it in a deadline queue (a FIFO, since
//! departure times only grow without reordering, plus a heap for the frames
//! that overtake). Then it sends whatever is due (`sendmmsg`) and sleeps in
//! `ppoll` on its receive socket with a nanosecond timeout until the next
//! departure (timer slack 1 ns); the last [`EmulatorConfig::spin`] (50 µs by
//! default) before a departure it spins on the clock instead. With nothing
//! in flight it sleeps until a frame arrives: an idle emulator uses no CPU.
//!
//! The threads run under `SCHED_FIFO`
//! ([`EmulatorConfig::realtime_priority`], 10 by default): on a machine
//! busy with builds, benchmarks or the server under test, an ordinary
//! thread's wake-up waits behind other work for milliseconds, and every
//! frame it carries is late by as much. They sleep whenever nothing is due,
//! and the kernel's real-time throttling bounds them anyway.
//!
//! The cost is CPU at high frame rates: at a saturated 100 Mbit/s (8 300
//! full-size frames per second), the emulator uses about two thirds of a
//! core with the default spin, half a core without (much of it the
//! receiving namespace's network stack, which runs inside `sendmmsg` on a
//! veth). `README.md` next to this file has the figures.
//!
//! # Offloads
//!
//! A veth passes its peer's frames before the work a NIC would do: with TSO
//! and checksum offload on (the default), a kernel TCP sender hands over
//! 64 KB super-frames with unfinished checksums. The receive socket asks for
//! each frame's `virtio_net_hdr`; the emulator finishes partial checksums
//! and cuts TCP and UDP super-frames into MTU-size frames (with their own
//! sequence numbers, lengths and checksums) before they reach the model, so
//! the link sees, queues, loses and delays the frames a real wire would
//! carry, and what leaves is correct for any receiver (the kernel, or
//! Fairway over AF_XDP, which sees no checksum offload). No `ethtool` is
//! needed on either side; frames that cannot be cut, or exceed the egress
//! MTU, are counted ([`DirectionStats::oversized`]) and dropped.
//!
//! # Errors and counters
//!
//! [`Emulator::start`] fails with one line that says what to do: not root,
//! no such interface, interface down, the same interface twice. Later, an
//! interface going down is a warning (frames flow again when it is back up)
//! and an interface deleted ends its direction with an error. Every frame is
//! counted where it ended ([`DirectionStats`]): forwarded, dropped by the
//! queue, lost, oversized, without a buffer, refused by the egress
//! interface, or dropped by the kernel before the emulator could read it.
//!
//! The command line, the measured accuracy and how it was measured are in
//! `README.md` next to this file.

mod config;
mod emulator;
mod frame_slab;
pub(crate) mod offload;
pub(crate) mod packet_socket;
mod stats;
mod sys;
pub mod units;
mod worker;

pub use config::{EmulatorConfig, default_queue_bytes};
pub use emulator::{Emulator, LinkemError, Report};
pub use stats::DirectionStats;
pub use sys::ShutdownSignals;
