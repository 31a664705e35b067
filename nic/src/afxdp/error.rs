//! [`AfXdpError`]: why an AF_XDP socket could not be opened, and
//! [`AfXdpWarning`]: what works, but not as well as it could.

use std::io;

use super::config::XdpMode;

/// Why [`AfXdp::open`](super::AfXdp::open) or
/// [`detach_all`](super::detach_all) failed. Each message says what is
/// wrong and what to do, in one line.
#[derive(Debug, thiserror::Error)]
pub enum AfXdpError {
    /// The configuration cannot work (a ring size that is not a power of
    /// two, a frame size the kernel refuses, ...). Holds what is wrong.
    #[error("invalid AF_XDP configuration: {0}")]
    InvalidConfig(String),

    /// No interface of that name in the calling thread's network namespace.
    #[error(
        "no network interface named {interface:?} in this network namespace: check `ip link`, or open the socket from a thread inside the interface's namespace"
    )]
    NoSuchInterface {
        /// The name asked for.
        interface: String,
    },

    /// The queue id is not below the interface's number of queues.
    #[error(
        "queue {queue_id} does not exist on {interface}, which has {queue_count} queue(s): use a queue id below {queue_count}, or add queues (`ethtool -L {interface} combined N`)"
    )]
    QueueOutOfRange {
        /// The interface.
        interface: String,
        /// The queue asked for.
        queue_id: u32,
        /// How many queues the interface has.
        queue_count: u32,
    },

    /// The process lacks a capability for one step (`EPERM`/`EACCES`).
    #[error(
        "not permitted to {action}: AF_XDP needs CAP_NET_RAW, CAP_NET_ADMIN and CAP_BPF; run as root (or grant those capabilities)"
    )]
    PermissionDenied {
        /// The step that was refused.
        action: &'static str,
    },

    /// `socket(AF_XDP)` failed with `EAFNOSUPPORT`: the kernel was built
    /// without `CONFIG_XDP_SOCKETS`.
    #[error(
        "this kernel has no AF_XDP sockets (socket(AF_XDP) failed with EAFNOSUPPORT): use a kernel built with CONFIG_XDP_SOCKETS=y, or the TAP backend"
    )]
    NoXdpSockets,

    /// The kernel refused to attach the XDP program in this mode (the
    /// driver has no native XDP, or the MTU is too large for it, ...).
    #[error(
        "the kernel refused to attach the AF_XDP program to {interface} in {mode} XDP mode ({source}): try XdpMode::Generic{hint}",
        hint = if *mode == XdpMode::Generic { " with a smaller MTU, or check `dmesg`" } else { "" }
    )]
    XdpAttachRefused {
        /// The interface.
        interface: String,
        /// The mode that was refused.
        mode: XdpMode,
        /// What the kernel said.
        source: io::Error,
    },

    /// The AF_XDP program is already attached to the interface (by another
    /// socket, possibly of another process) in a different mode from the
    /// one forced by the configuration.
    #[error(
        "the AF_XDP program is already attached to {interface} in {attached} mode, and {requested} mode was asked for: use XdpMode::Auto, or remove it first (`ip link set dev {interface} xdp off`, or afxdp::detach_all)"
    )]
    XdpModeConflict {
        /// The interface.
        interface: String,
        /// The mode the attached program runs in.
        attached: XdpMode,
        /// The mode the configuration forces.
        requested: XdpMode,
    },

    /// Another XDP program, not libxdp's AF_XDP program, is attached and
    /// cannot be shared.
    #[error(
        "another XDP program is attached to {interface} and cannot share it: remove it (`ip link set dev {interface} xdp off`) or load it through libxdp's dispatcher ({source})"
    )]
    ForeignXdpProgram {
        /// The interface.
        interface: String,
        /// What the kernel said.
        source: io::Error,
    },

    /// [`BindMode::ZeroCopy`](super::BindMode::ZeroCopy) was forced and the
    /// driver has no zero-copy support (copy mode works).
    #[error(
        "{interface} cannot do zero-copy AF_XDP (its driver lacks support; copy mode works): use BindMode::Auto or BindMode::Copy"
    )]
    ZeroCopyUnsupported {
        /// The interface.
        interface: String,
    },

    /// The queue is already bound by another AF_XDP socket (`EBUSY`, still
    /// after a second of retries: the kernel releases the queue of a closed
    /// socket a little after the close).
    #[error(
        "queue {queue_id} of {interface} already has an AF_XDP socket bound to it: close that socket (another process?) or use another queue"
    )]
    QueueBusy {
        /// The interface.
        interface: String,
        /// The queue.
        queue_id: u32,
    },

    /// The kernel would not register (pin) the UMEM, usually the
    /// locked-memory limit.
    #[error(
        "could not register the {bytes}-byte UMEM ({source}): raise RLIMIT_MEMLOCK (`ulimit -l unlimited`, LimitMEMLOCK=infinity under systemd) or use fewer or smaller frames"
    )]
    UmemRegistration {
        /// The UMEM's size.
        bytes: usize,
        /// What the kernel said.
        source: io::Error,
    },

    /// Any other failure of a system call, with the step it broke.
    #[error("{action} failed on {interface}: {source}")]
    Os {
        /// The step that failed.
        action: &'static str,
        /// The interface.
        interface: String,
        /// What the kernel said.
        source: io::Error,
    },
}

/// Something that does not stop the socket from working, reported by
/// [`AfXdp::warnings`](super::AfXdp::warnings) for the runtime to log.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum AfXdpWarning {
    /// No BPF filesystem is mounted where libxdp looks (`/sys/fs/bpf`, or
    /// `$LIBXDP_BPFFS`). libxdp then attaches the AF_XDP program without its
    /// multi-program dispatcher, so no other XDP program can share the
    /// interface.
    #[error(
        "no BPF filesystem at {path}: libxdp attaches the AF_XDP program without its dispatcher (no other XDP program can share the interface); mount one with `mount -t bpf bpf {path}`"
    )]
    NoBpffs {
        /// Where libxdp looked.
        path: String,
    },

    /// A BPF filesystem is mounted, but libxdp still attached the AF_XDP
    /// program alone: the kernel refused its dispatcher (it needs
    /// `BPF_PROG_TYPE_EXT` programs, which some kernels or sandboxes do not
    /// permit; libxdp's own messages say why). No other XDP program can
    /// share the interface.
    #[error(
        "libxdp could not use its dispatcher (see its messages above) and attached the AF_XDP program alone: no other XDP program can share the interface"
    )]
    NoDispatcher,

    /// [`XdpMode::Auto`] could not attach in native mode and fell back to
    /// generic mode, which is slower.
    #[error("native XDP refused ({reason}); running in generic XDP mode, which is slower")]
    GenericXdpFallback {
        /// What the kernel said about native mode.
        reason: String,
    },

    /// The interface's MTU allows longer frames than the socket carries:
    /// without multi-buffer (off, or refused by the kernel or driver) a
    /// frame must fit one UMEM frame. Longer frames the interface receives
    /// are dropped by the kernel; a TCP stack on the socket should announce
    /// an MSS that fits `max_frame_len`.
    #[error(
        "frames are limited to {max_frame_len} bytes, less than the interface's MTU of {mtu} allows ({reason}): longer frames are dropped; lower the MTU, or use 4096-byte UMEM frames"
    )]
    FramesLimited {
        /// The interface's MTU.
        mtu: u32,
        /// The longest frame the socket carries, Ethernet header included.
        max_frame_len: usize,
        /// Why: multi-buffer off, refused (with what the kernel said), or
        /// more parts than a frame may have.
        reason: String,
    },

    /// [`AfXdpConfig::kernel_busy_poll`](super::AfXdpConfig::kernel_busy_poll)
    /// was asked for, but the kernel refused the socket options: the
    /// driver's receive processing stays in softirqs.
    #[error("busy polling the driver refused ({reason}): its receive processing stays in softirqs")]
    KernelBusyPollRefused {
        /// What the kernel said.
        reason: String,
    },

    /// The kernel refused to let one wake-up of the copy-mode transmit path
    /// send more than its default batch (`XDP_MAX_TX_SKB_BUDGET`, which
    /// Linux 6.17 added): a burst of frames then takes a `sendto` per
    /// `frames` frames.
    #[error(
        "the kernel sends at most {frames} frames per transmit wake-up ({reason}; XDP_MAX_TX_SKB_BUDGET needs Linux 6.17): bursts take more system calls"
    )]
    TxBatchLimited {
        /// Frames per wake-up.
        frames: u32,
        /// What the kernel said.
        reason: String,
    },
    /// [`AfXdpConfig::tx_checksum_offload`](super::AfXdpConfig::tx_checksum_offload)
    /// asked the kernel to finish TCP checksums, and it will not: the stack
    /// computes them (one more pass over each payload byte, on the server
    /// and, through a veth, on the peer that verifies them).
    #[error("the kernel does not finish TCP checksums for this socket ({reason}): the stack computes them")]
    ChecksumOffloadUnavailable {
        /// Why not.
        reason: String,
    },
}
