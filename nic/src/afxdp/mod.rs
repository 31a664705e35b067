//! The AF_XDP backend: [`AfXdp`], a [`Device`](crate::Device) and
//! [`Wait`](crate::Wait) over one AF_XDP socket bound to one queue of one
//! interface (Linux, feature `afxdp`).
//!
//! This module owns the socket, its UMEM and rings (set up with the raw
//! AF_XDP system calls, `sys.rs` and `ring.rs`), the XDP program that steers
//! the queue's frames to it (libxdp's, attached through libxdp), and the
//! cleanup of that program.
//!
//! # Frames
//!
//! Each socket has one UMEM of [`AfXdpConfig::frame_count`] frames, split
//! once between the two directions and then only recycled:
//!
//! - receive: frames sit on the fill ring until the kernel writes a packet
//!   into one and puts it on the RX ring; [`Device::receive`] hands the
//!   frame to the callback where it lies in the UMEM (no copy into the
//!   stack) and puts it back on the fill ring when the callback returns;
//! - transmit: [`Device::transmit`] lends the callback a free UMEM frame to
//!   write the packet into, produces the filled frames to the TX ring in
//!   one batch, wakes the kernel if it asked for it (`sendto`, need_wakeup),
//!   and takes frames back from the completion ring on the next call.
//!
//! Nothing is allocated per frame.
//!
//! # Frames longer than a UMEM frame (multi-buffer)
//!
//! A UMEM frame holds its size less the kernel's 256-byte headroom. When the
//! interface's MTU allows longer frames (jumbo frames on a veth or a NIC
//! set to MTU 9000), the socket binds with `XDP_USE_SG` and attaches the
//! XDP program as one that handles multi-buffer frames. A received frame
//! then comes as several descriptors, which are put together in one
//! buffer before the callback sees it (a frame that fits one UMEM frame is
//! still handed over where it lies). Each transmit buffer spans enough
//! neighbouring UMEM frames for the longest frame, and goes out as one
//! descriptor per UMEM frame it touches. [`AfXdp::multi_buffer`] says
//! whether this is on. Where the kernel or driver refuses it, or with
//! [`AfXdpConfig::multi_buffer`] off, frames keep to one UMEM frame
//! ([`AfXdpWarning::FramesLimited`]), and the kernel drops longer ones.
//!
//! [`Device::receive`]: crate::Device::receive
//! [`Device::transmit`]: crate::Device::transmit
//!
//! # Transmit checksum offload
//!
//! With [`AfXdpConfig::tx_checksum_offload`] (the default) the UMEM is
//! registered with room for transmit metadata (`XDP_UMEM_TX_METADATA_LEN`,
//! Linux 6.11) and each transmit frame starts 24 (`TX_METADATA_LEN`)
//! bytes into its slot. Once asked through
//! [`Device::offload_tx_checksums`](crate::Device::offload_tx_checksums),
//! every TCP frame goes out with an `xsk_tx_metadata` checksum request at
//! [`fairway_stack::partial_checksum`]'s offsets (option `XDP_TX_METADATA`):
//! in copy mode the kernel builds a partial-checksum skb, which the
//! interface finishes (a NIC in hardware; a veth leaves it to the peer's
//! stack, which trusts it). The offload is declined, with
//! [`AfXdpWarning::ChecksumOffloadUnavailable`], on an older kernel, in
//! zero-copy mode (the driver's own support is not probed), and on an
//! interface whose transmit checksumming is off (the kernel would then
//! compute each checksum in a separate pass, dearer than the stack's sum
//! fused with its copy).
//!
//! Frames of several UMEM frames (multi-buffer) need one more step: an
//! aligned UMEM with metadata room wants every descriptor, continuation
//! parts too, to start that far into its UMEM frame, which a frame written
//! in one piece across neighbouring UMEM frames cannot do. So once a
//! multi-buffer socket is found to run in copy mode, it is replaced by one
//! over an unaligned UMEM (`XDP_UMEM_UNALIGNED_CHUNK_FLAG`, bound in copy
//! mode), where descriptors may start anywhere: a frame is cut every UMEM
//! frame less 24 bytes, and received addresses carry their data's offset in
//! their top bits. (In zero-copy mode a descriptor would also have to stay
//! within DMA-contiguous pages, so there the aligned UMEM stays.)
//!
//! # Modes
//!
//! [`BindMode`] picks copy or zero-copy and [`XdpMode`] native or generic
//! XDP; `Auto` (the default for both) takes the fast one when the driver
//! has it and falls back otherwise. [`AfXdp::bind_mode`] and
//! [`AfXdp::xdp_mode`] report what was obtained. A veth has native XDP but
//! no zero-copy, so it runs native and copy.
//!
//! # Queues and namespaces
//!
//! One socket serves one (interface, queue). Open one per queue, from the
//! shard that owns it; several sockets on queues of one interface work at
//! once, each with its own UMEM. The first one attaches libxdp's default
//! AF_XDP program; the others join it. libxdp runs it under its
//! multi-program dispatcher when a BPF filesystem is mounted at
//! `/sys/fs/bpf` and the kernel permits the dispatcher's extension
//! programs, and alone otherwise (reported as [`AfXdpWarning::NoBpffs`] or
//! [`AfXdpWarning::NoDispatcher`]); both work the same for AF_XDP.
//!
//! The interface is looked up in the calling thread's network namespace:
//! to drive an interface of another namespace, open the socket from a
//! thread that entered it with `setns(2)` (or run the process inside it).
//!
//! # Leaving no XDP program behind
//!
//! An XDP program outlives the process that attached it, and keeps
//! steering the queue's frames away from the kernel. So:
//!
//! - dropping the last [`AfXdp`] of this process on an interface removes
//!   the program (this process counts its sockets per interface; the
//!   reference count libxdp keeps in the program for its own socket set-up
//!   is not used). An interface is assumed to belong to one process: AF_XDP
//!   sockets of another process on it would stop receiving.
//! - [`detach_all`] removes it whatever the count says, for exits that skip
//!   the drops.
//!
//! A runtime wires the exits like this:
//!
//! - **Return (normal exit)**: the shard loops return, the sockets drop,
//!   the program goes.
//! - **SIGINT / SIGTERM**: the signal handler only sets a shutdown flag
//!   (`signal_hook::flag::register`); each shard loop checks it between
//!   iterations and returns, so its sockets drop as above. A signal wakes
//!   only the thread it is delivered to, so shard loops must call
//!   [`Wait::wait`](crate::Wait::wait) with a bounded timeout (100 ms is
//!   plenty) to notice the flag. If a second signal arrives before the
//!   loops are done, call `detach_all` for each interface, then exit.
//! - **Panic**: with `panic = "unwind"` (the default) a panicking shard
//!   thread unwinds and drops its sockets. The runtime then sets the
//!   shutdown flag so that the other shards return too (a panic hook can
//!   set it). A build with `panic = "abort"` runs no drops, so its panic
//!   hook calls `detach_all`:
//!
//!   ```no_run
//!   let interface = String::from("eth0");
//!   let previous = std::panic::take_hook();
//!   std::panic::set_hook(Box::new(move |info| {
//!       let _ = fairway_nic::afxdp::detach_all(&interface);
//!       previous(info);
//!   }));
//!   ```
//!
//!   (A hook that detaches also stops the other shards' sockets, so
//!   install it only where any panic ends the process.)
//! - **SIGKILL, power loss**: nothing runs. Call `detach_all` at start-up,
//!   before opening sockets, to clear what the previous run left.
//!
//! `detach_all`, like `open` and drop, works in the calling thread's
//! network namespace.

mod chain;
mod config;
mod error;
mod program;
mod ring;
mod rings;
mod socket;
mod stats;
mod sys;
mod tx_slots;

pub use config::{AfXdpConfig, BindMode, KernelBusyPoll, XdpMode};
pub use error::{AfXdpError, AfXdpWarning};
pub use program::detach_all;
pub use socket::AfXdp;
pub use stats::{AfXdpStats, KernelXdpStats};
