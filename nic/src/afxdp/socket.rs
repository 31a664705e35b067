//! [`AfXdp`]: one AF_XDP socket bound to one interface queue, as a
//! [`Device`] and a [`Wait`].

use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::time::{Duration, Instant};

use fairway_stack::ETHERNET_HEADER_LEN;

use super::config::{AfXdpConfig, BindMode, XdpMode};
use super::error::{AfXdpError, AfXdpWarning};
use super::program::{self, Attached, Registry};
use super::ring::{Consumer, Desc, Producer};
use super::rings::{Rings, Shape};
use super::stats::AfXdpStats;
use super::sys::{self, Mapping, NetnsId, RingKind};
use crate::{Device, Wait};

/// Where libxdp looks for the BPF filesystem unless `$LIBXDP_BPFFS` says
/// otherwise.
const DEFAULT_BPFFS: &str = "/sys/fs/bpf";

/// How long an open waits for a queue that a socket closed just before
/// still holds.
const QUEUE_RELEASE_WAIT: Duration = Duration::from_secs(1);

/// The headroom the kernel keeps at the start of every received frame
/// (`XDP_PACKET_HEADROOM`).
const XDP_HEADROOM: usize = 256;

/// Frames the kernel's copy-mode transmit path sends per wake-up unless
/// told otherwise (`TX_BATCH_SIZE` in `net/xdp/xsk.c`).
const KERNEL_TX_BATCH: u32 = 32;

/// Bytes before a transmit frame's data that hold its `xsk_tx_metadata`
/// (flags, then the checksum request's start and offset, then a launch
/// time the kernel reads only when asked to): the size of that structure
/// in Linux 6.15 and later, a multiple of 8 as the kernel requires.
pub(super) const TX_METADATA_LEN: u32 = 24;

/// The most UMEM frames one frame may span with multi-buffer: the kernel's
/// copy-mode transmit builds one fragment per descriptor after the first,
/// and an skb has at most 17 (`MAX_SKB_FRAGS`).
const MAX_PARTS: usize = 16;

/// One AF_XDP socket bound to one queue of one interface, with its own
/// UMEM: the [`Device`] a shard drives when it owns that queue.
///
/// Received frames are handed to the callback where the kernel put them in
/// the UMEM, and transmit buffers are UMEM frames, so nothing is copied
/// between the ring and the stack, and nothing is allocated per frame
/// (see the [module documentation](super) for the frame cycle).
///
/// Dropping it closes the socket and, when it was this process's last
/// socket on the interface, removes the XDP program (see
/// [`detach_all`](super::detach_all) for exits that skip drops). Drop it on
/// any thread: drop enters the network namespace the socket was opened in
/// for the time it needs.
pub struct AfXdp {
    /// `None` only while dropping.
    rings: Option<Rings>,
    interface: String,
    ifindex: u32,
    queue_id: u32,
    netns: NetnsId,
    netns_file: File,
    bind_mode: BindMode,
    xdp_mode: XdpMode,
    warnings: Vec<AfXdpWarning>,
    max_frame_len: usize,
    multi_buffer: bool,
    fd: RawFd,
}

impl AfXdp {
    /// Opens an AF_XDP socket on `config.queue_id` of `config.interface`,
    /// in the calling thread's network namespace, attaching libxdp's
    /// AF_XDP program to the interface unless a socket already did.
    ///
    /// Several sockets, on different queues of the same interface, can be
    /// open at once; each has its own UMEM.
    ///
    /// # Errors
    ///
    /// An [`AfXdpError`] that says what went wrong and what to do; each
    /// variant documents when it happens. The socket is fully set up or not
    /// at all: a failed open leaves no XDP program behind.
    pub fn open(config: &AfXdpConfig) -> Result<AfXdp, AfXdpError> {
        open(config)
    }

    /// The interface this socket is bound to.
    pub fn interface(&self) -> &str {
        &self.interface
    }

    /// The interface's index (in its network namespace).
    pub fn ifindex(&self) -> u32 {
        self.ifindex
    }

    /// The queue this socket is bound to.
    pub fn queue_id(&self) -> u32 {
        self.queue_id
    }

    /// The bind mode obtained: [`BindMode::Copy`] or [`BindMode::ZeroCopy`],
    /// never `Auto`.
    pub fn bind_mode(&self) -> BindMode {
        self.bind_mode
    }

    /// The mode the XDP program runs in: [`XdpMode::Native`] or
    /// [`XdpMode::Generic`], never `Auto`.
    pub fn xdp_mode(&self) -> XdpMode {
        self.xdp_mode
    }

    /// Whether a frame may span several UMEM frames (the socket is bound
    /// with `XDP_USE_SG`): what lets it carry frames longer than one UMEM
    /// frame. Only asked for when the interface's MTU needs it.
    pub fn multi_buffer(&self) -> bool {
        self.multi_buffer
    }

    /// The most frames one wake-up of the kernel's transmit path sends. In
    /// copy mode the kernel sends 32 per `sendto` unless told it may send
    /// more (`XDP_MAX_TX_SKB_BUDGET`, Linux 6.17), which the socket asks for
    /// up to the TX ring's size; on an older kernel it stays 32
    /// ([`AfXdpWarning::TxBatchLimited`]). In zero-copy mode the driver
    /// takes the whole ring by itself.
    pub fn tx_batch(&self) -> u32 {
        self.rings.as_ref().map_or(KERNEL_TX_BATCH, Rings::kernel_tx_batch)
    }

    /// What works, but not as well as it could; for the runtime to log.
    pub fn warnings(&self) -> &[AfXdpWarning] {
        &self.warnings
    }

    /// The socket's counters. Reading the kernel's share costs one
    /// `getsockopt`.
    pub fn stats(&self) -> AfXdpStats {
        self.rings.as_ref().map(Rings::stats).unwrap_or_default()
    }
}

impl Device for AfXdp {
    fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }

    /// Yes in copy mode when [`AfXdpConfig::tx_checksum_offload`] asked for
    /// it, the interface's own transmit checksumming is on, and the kernel
    /// takes transmit metadata (Linux 6.11): each TCP frame then goes out with a request in its metadata, and the kernel
    /// hands the frame on as a partial-checksum skb (a veth peer's stack
    /// trusts it without summing; a real NIC finishes it in hardware, or
    /// the kernel in software). Otherwise [`AfXdpWarning::ChecksumOffloadUnavailable`]
    /// says why not.
    fn offload_tx_checksums(&mut self) -> bool {
        self.rings.as_mut().is_some_and(Rings::offload_tx_checksums)
    }

    fn receive<F: FnMut(&[u8])>(&mut self, budget: usize, on_frame: F) -> usize {
        match self.rings.as_mut() {
            Some(rings) => rings.receive(budget, on_frame),
            None => 0,
        }
    }

    fn transmit<F: FnMut(&mut [u8]) -> Option<usize>>(&mut self, budget: usize, fill: F) -> usize {
        match self.rings.as_mut() {
            Some(rings) => rings.transmit(budget, fill),
            None => 0,
        }
    }
}

impl Wait for AfXdp {
    /// Kicks the kernel if frames wait on the TX ring, then polls the socket
    /// for received frames; the poll is also what a zero-copy driver that
    /// asked for a fill-ring wakeup needs.
    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        match self.rings.as_mut() {
            Some(rings) => rings.wait(timeout),
            None => Ok(()),
        }
    }

    /// The socket: readable when frames have arrived (the kernel's XDP
    /// redirect signals it on every flush).
    fn wake_sources<'a>(&'a self, sources: &mut Vec<std::os::fd::BorrowedFd<'a>>) {
        if let Some(rings) = &self.rings {
            sources.push(rings.fd());
        }
    }

    /// The TX ring's frames handed to the kernel, and a fill-ring wake-up
    /// where the driver asked for one; false once frames are waiting.
    fn before_sleep(&mut self) -> io::Result<bool> {
        Ok(self.rings.as_mut().is_none_or(Rings::before_foreign_sleep))
    }
}

impl AsRawFd for AfXdp {
    /// The socket's descriptor, for a runtime that waits on several at
    /// once (it is readable when frames have arrived).
    fn as_raw_fd(&self) -> RawFd {
        self.fd
    }
}

impl std::fmt::Debug for AfXdp {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("AfXdp")
            .field("interface", &self.interface)
            .field("queue_id", &self.queue_id)
            .field("bind_mode", &self.bind_mode)
            .field("xdp_mode", &self.xdp_mode)
            .field("max_frame_len", &self.max_frame_len)
            .finish_non_exhaustive()
    }
}

impl Drop for AfXdp {
    fn drop(&mut self) {
        // libxdp and the leftover check find the interface by index, which
        // means something only in the namespace the socket was opened in.
        let way_back = match sys::current_netns() {
            Ok((here, file)) if here != self.netns => sys::enter_netns(&self.netns_file).ok().map(|()| file),
            _ => None,
        };
        {
            let mut registry = program::registry();
            // Closing the socket takes it out of the program's socket map;
            // the program goes with this process's last socket on the
            // interface.
            drop(self.rings.take());
            registry.remove(self.netns, self.ifindex);
            program::remove_if_unused(&registry, self.netns, self.ifindex);
        }
        if let Some(file) = way_back {
            let _ = sys::enter_netns(&file);
        }
    }
}

/// Why one attempt at creating the UMEM and the socket failed.
enum CreateError {
    /// Mapping or registering the UMEM.
    Umem(io::Error),
    /// Creating, binding or attaching the socket.
    Socket(io::Error),
}

/// The socket's pieces from one successful attempt, dropped in this order:
/// the rings' mappings, then the socket, then the UMEM.
pub(super) struct Socket {
    pub(super) fill: Producer<u64>,
    pub(super) completion: Consumer<u64>,
    pub(super) rx: Consumer<Desc>,
    pub(super) tx: Producer<Desc>,
    pub(super) fd: OwnedFd,
    pub(super) umem: Mapping,
}

/// What one successful attempt made.
struct Created {
    socket: Socket,
    /// Whether the socket is bound with `XDP_USE_SG`.
    multi_buffer: bool,
    /// Whether the UMEM has room for transmit metadata before each frame
    /// (`Err`: why not).
    tx_metadata: Result<(), io::Error>,
    /// Whether the UMEM is unaligned.
    unaligned: bool,
}

fn errno(error: &io::Error) -> i32 {
    error.raw_os_error().unwrap_or(0)
}

/// What one attempt at a socket asks of the kernel.
#[derive(Clone, Copy, Debug)]
struct Attempt {
    bind_mode: BindMode,
    /// Bind with `XDP_USE_SG` (multi-buffer).
    sg: bool,
    /// Register the UMEM with room for transmit metadata, when the kernel
    /// knows how (`Created::tx_metadata` says).
    tx_metadata: bool,
    /// Register it unaligned (`XDP_UMEM_UNALIGNED_CHUNK_FLAG`), which is
    /// what lets a frame of several UMEM frames carry metadata (only for a
    /// copy-mode bind: a zero-copy driver would want each descriptor within
    /// DMA-contiguous pages).
    unaligned: bool,
}

/// Builds a fresh UMEM and socket bound to the queue as `attempt` says. A
/// fresh socket each time: a bound socket cannot be bound again.
fn create(config: &AfXdpConfig, ifindex: u32, attempt: Attempt) -> Result<Created, CreateError> {
    let Attempt { bind_mode, sg, tx_metadata, unaligned } = attempt;
    let fd = sys::xdp_socket().map_err(CreateError::Socket)?;
    let raw = fd.as_raw_fd();
    let len = config.frame_count as usize * config.frame_size as usize;
    let umem = sys::map_umem(len).map_err(CreateError::Umem)?;
    let plain = |umem: &Mapping| sys::register_umem(raw, umem, config.frame_size, 0, false).map_err(CreateError::Umem);
    let (tx_metadata, unaligned) = if tx_metadata && sg && !unaligned {
        // An aligned UMEM with metadata room wants every transmit
        // descriptor to start that far into its UMEM frame, and a frame's
        // continuation parts start at a UMEM frame's first byte.
        plain(&umem)?;
        let why = "frames span several UMEM frames (multi-buffer), which only an unaligned UMEM lets carry metadata, and that only in copy mode";
        (Err(io::Error::other(why)), false)
    } else if tx_metadata {
        match sys::register_umem(raw, &umem, config.frame_size, TX_METADATA_LEN, unaligned) {
            Ok(()) => (Ok(()), unaligned),
            // Before Linux 6.11 the kernel does not know the flag.
            Err(refusal) if errno(&refusal) == libc::EINVAL => {
                plain(&umem)?;
                (Err(refusal), false)
            }
            Err(error) => return Err(CreateError::Umem(error)),
        }
    } else {
        plain(&umem)?;
        (Err(io::Error::other("not asked for")), false)
    };
    let sizes = [
        (RingKind::Rx, config.rx_ring_size),
        (RingKind::Tx, config.tx_ring_size),
        (RingKind::Fill, config.fill_ring_size),
        (RingKind::Completion, config.completion_ring_size),
    ];
    for (which, entries) in sizes {
        sys::size_ring(raw, which, entries).map_err(CreateError::Socket)?;
    }
    let [rx, tx, fill, completion] = sys::ring_offsets(raw).map_err(CreateError::Socket)?;
    let socket = Socket {
        fill: Producer::map(raw, RingKind::Fill, fill, config.fill_ring_size).map_err(CreateError::Socket)?,
        completion: Consumer::map(raw, RingKind::Completion, completion, config.completion_ring_size)
            .map_err(CreateError::Socket)?,
        rx: Consumer::map(raw, RingKind::Rx, rx, config.rx_ring_size).map_err(CreateError::Socket)?,
        tx: Producer::map(raw, RingKind::Tx, tx, config.tx_ring_size).map_err(CreateError::Socket)?,
        fd,
        umem,
    };
    let mut flags = match bind_mode {
        BindMode::Auto => 0,
        BindMode::Copy => libc::XDP_COPY,
        BindMode::ZeroCopy => libc::XDP_ZEROCOPY,
    };
    if config.need_wakeup {
        flags |= libc::XDP_USE_NEED_WAKEUP;
    }
    if sg {
        flags |= libc::XDP_USE_SG;
    }
    sys::bind(raw, ifindex, config.queue_id, flags).map_err(CreateError::Socket)?;
    Ok(Created { socket, multi_buffer: sg, tx_metadata, unaligned })
}

/// [`create`], retried for up to a second while the queue is busy. A socket
/// closed just before on this queue (an earlier attempt, or a socket the
/// program dropped) keeps the queue until the kernel's deferred release
/// runs, which `bind` reports as `EBUSY`.
fn create_when_free(config: &AfXdpConfig, ifindex: u32, attempt: Attempt) -> Result<Created, CreateError> {
    let deadline = Instant::now() + QUEUE_RELEASE_WAIT;
    let mut pause = Duration::from_millis(1);
    loop {
        match create(config, ifindex, attempt) {
            Err(CreateError::Socket(source)) if errno(&source) == libc::EBUSY && Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            result => return result,
        }
    }
}

/// Replaces `created`, a copy-mode socket with multi-buffer frames over an
/// aligned UMEM (no room for transmit metadata), with one over an unaligned
/// UMEM that has it, bound in copy mode and put in the program's socket map
/// in its place; where the kernel will not, with one like `created` again.
fn with_room_for_metadata(config: &AfXdpConfig, ifindex: u32, created: Created) -> Result<Created, CreateError> {
    // The aligned set-up again, whose `tx_metadata` says why it has no room.
    let plain = Attempt { bind_mode: config.bind_mode, sg: true, tx_metadata: true, unaligned: false };
    // The queue takes one socket: this one goes first.
    drop(created);
    let attempt = Attempt { bind_mode: BindMode::Copy, sg: true, tx_metadata: true, unaligned: true };
    let again = match create_when_free(config, ifindex, attempt) {
        Ok(better) if better.tx_metadata.is_ok() => Ok(better),
        Ok(not_better) => {
            drop(not_better);
            create_when_free(config, ifindex, plain)
        }
        Err(_) => create_when_free(config, ifindex, plain),
    }?;
    program::insert_socket(ifindex, config.queue_id, again.socket.fd.as_raw_fd()).map_err(CreateError::Socket)?;
    Ok(again)
}

/// After a failed open: removes the program if this open attached it
/// (nothing of ours was there before and no socket of ours uses the
/// interface), so a failure leaves the interface as it found it.
fn clean_up_failure(attached: Attached, registry: &Registry, netns: NetnsId, ifindex: u32) {
    if !matches!(attached, Attached::Xsk { .. }) {
        program::remove_if_unused(registry, netns, ifindex);
    }
}

fn open(config: &AfXdpConfig) -> Result<AfXdp, AfXdpError> {
    config.check().map_err(AfXdpError::InvalidConfig)?;
    let interface = config.interface.clone();
    let os = |action: &'static str| {
        let interface = interface.clone();
        move |source: io::Error| AfXdpError::Os { action, interface, source }
    };

    let ifindex = sys::interface_index(&interface).map_err(|source| match source.raw_os_error() {
        Some(libc::ENODEV | libc::ENXIO) => AfXdpError::NoSuchInterface { interface: interface.clone() },
        _ => os("looking up the interface")(source),
    })?;
    let queue_count = sys::queue_count(&interface).map_err(os("reading the interface's queue count"))?;
    if let Some(queue_count) = queue_count
        && config.queue_id >= queue_count
    {
        return Err(AfXdpError::QueueOutOfRange { interface, queue_id: config.queue_id, queue_count });
    }
    sys::probe_af_xdp().map_err(|source| match source.raw_os_error() {
        Some(libc::EAFNOSUPPORT) => AfXdpError::NoXdpSockets,
        Some(libc::EPERM | libc::EACCES) => AfXdpError::PermissionDenied { action: "create an AF_XDP socket" },
        _ => os("creating an AF_XDP socket")(source),
    })?;
    let mtu = crate::interface::mtu(&interface).map_err(os("reading the interface's MTU"))?;
    let mtu = u32::try_from(mtu).unwrap_or(u32::MAX);
    let (netns, netns_file) = sys::current_netns().map_err(os("identifying the network namespace"))?;

    let mut warnings = Vec::new();
    let bpffs = std::env::var("LIBXDP_BPFFS").unwrap_or_else(|_| DEFAULT_BPFFS.to_owned());
    let bpffs_mounted = sys::is_bpffs_mounted(&bpffs);
    if !bpffs_mounted {
        warnings.push(AfXdpWarning::NoBpffs { path: bpffs });
    }

    // Held until the socket is registered: another thread's open or close
    // on the same interface must not attach or detach the program meanwhile.
    let mut registry = program::registry();
    let attached = program::inspect(ifindex).map_err(os("listing the interface's XDP programs"))?;
    // A socket joins the program already there, in that program's mode.
    let modes: &[XdpMode] = match (attached, config.xdp_mode) {
        (Attached::Xsk { mode: Some(mode), .. }, requested) if requested == XdpMode::Auto || requested == mode => {
            if mode == XdpMode::Native {
                &[XdpMode::Native]
            } else {
                &[XdpMode::Generic]
            }
        }
        (Attached::Xsk { mode: Some(mode), .. }, requested) => {
            return Err(AfXdpError::XdpModeConflict { interface, attached: mode, requested });
        }
        (_, XdpMode::Auto) => &[XdpMode::Native, XdpMode::Generic],
        (_, XdpMode::Native) => &[XdpMode::Native],
        (_, XdpMode::Generic) => &[XdpMode::Generic],
    };

    // A frame longer than one UMEM frame holds on receive needs multi-buffer:
    // a program the driver lets see such frames (loaded with the frags
    // flag), and a socket bound with XDP_USE_SG to take them in several
    // parts.
    let wire_frame_len = mtu as usize + ETHERNET_HEADER_LEN;
    let jumbo = wire_frame_len > config.frame_size as usize - XDP_HEADROOM;
    let sg = jumbo && config.multi_buffer;
    let mut sg_refused = None;
    let mut native_refused = None;
    let mut result = Err((io::Error::other("no XDP mode was tried"), config.xdp_mode));
    for (i, &mode) in modes.iter().enumerate() {
        let mut attempt = || {
            if attached == Attached::Nothing {
                program::attach_xsk(ifindex, mode, queue_count.unwrap_or(1), jumbo).map_err(CreateError::Socket)?;
            }
            let wanted =
                Attempt { bind_mode: config.bind_mode, sg, tx_metadata: config.tx_checksum_offload, unaligned: false };
            let created = match create_when_free(config, ifindex, wanted) {
                // Kernels before 6.6 do not know the flag; a zero-copy
                // driver may not take several buffers per frame.
                Err(CreateError::Socket(source)) if sg && matches!(errno(&source), libc::EINVAL | libc::EOPNOTSUPP) => {
                    let created = create_when_free(config, ifindex, Attempt { sg: false, ..wanted })?;
                    sg_refused = Some(source);
                    created
                }
                other => other?,
            };
            program::insert_socket(ifindex, config.queue_id, created.socket.fd.as_raw_fd())
                .map_err(CreateError::Socket)?;
            Ok(created)
        };
        match attempt() {
            Ok(created) => {
                result = Ok((created, mode));
                break;
            }
            Err(CreateError::Umem(source)) => {
                clean_up_failure(attached, &registry, netns, ifindex);
                return Err(match errno(&source) {
                    libc::ENOBUFS | libc::ENOMEM | libc::EAGAIN => AfXdpError::UmemRegistration {
                        bytes: config.frame_count as usize * config.frame_size as usize,
                        source,
                    },
                    libc::EPERM | libc::EACCES => AfXdpError::PermissionDenied { action: "register the UMEM" },
                    _ => os("creating the UMEM")(source),
                });
            }
            Err(CreateError::Socket(source)) => {
                // Whatever this attempt attached goes before the next one.
                clean_up_failure(attached, &registry, netns, ifindex);
                // Forced zero-copy and "not supported": the bind or the attach?
                // A copy-mode socket in the same XDP mode tells them apart.
                if config.bind_mode == BindMode::ZeroCopy
                    && errno(&source) == libc::EOPNOTSUPP
                    && let Ok(probe) = create_when_free(
                        config,
                        ifindex,
                        Attempt { bind_mode: BindMode::Copy, sg: false, tx_metadata: false, unaligned: false },
                    )
                {
                    drop(probe);
                    clean_up_failure(attached, &registry, netns, ifindex);
                    return Err(AfXdpError::ZeroCopyUnsupported { interface });
                }
                // Only a refused attach is worth another XDP mode.
                let hopeless = matches!(errno(&source), libc::EPERM | libc::EACCES | libc::ENODEV | libc::EBUSY);
                if i + 1 < modes.len() && !hopeless {
                    native_refused = Some(source);
                    continue;
                }
                result = Err((source, mode));
                break;
            }
        }
    }
    let (created, mode) = match result {
        Ok(found) => found,
        Err((source, mode)) => {
            clean_up_failure(attached, &registry, netns, ifindex);
            return Err(classify(config, source, mode, attached));
        }
    };

    let zero_copy = match sys::is_zero_copy(created.socket.fd.as_raw_fd()) {
        Ok(zero_copy) => zero_copy,
        Err(source) => {
            drop(created);
            clean_up_failure(attached, &registry, netns, ifindex);
            return Err(os("reading the socket's bind mode")(source));
        }
    };
    // Multi-buffer frames in copy mode: a socket over an unaligned UMEM
    // can carry the checksum request where the aligned one could not.
    let tx_checksumming = sys::tx_checksumming(&interface);
    let created = if created.multi_buffer
        && created.tx_metadata.is_err()
        && !zero_copy
        && config.tx_checksum_offload
        && tx_checksumming.as_ref().is_ok_and(|&on| on)
    {
        match with_room_for_metadata(config, ifindex, created) {
            Ok(created) => created,
            Err(CreateError::Umem(source) | CreateError::Socket(source)) => {
                clean_up_failure(attached, &registry, netns, ifindex);
                return Err(classify(config, source, mode, attached));
            }
        }
    } else {
        created
    };
    let (xdp_mode, dispatcher) = match program::inspect(ifindex) {
        Ok(Attached::Xsk { mode: Some(obtained), dispatcher }) => (obtained, dispatcher),
        _ => (mode, true),
    };
    if bpffs_mounted && !dispatcher {
        warnings.push(AfXdpWarning::NoDispatcher);
    }
    if let (Some(reason), XdpMode::Generic) = (native_refused, xdp_mode) {
        warnings.push(AfXdpWarning::GenericXdpFallback { reason: reason.to_string() });
    }

    let Created { socket, multi_buffer, tx_metadata, unaligned } = created;
    let fd = socket.fd.as_raw_fd();
    // In copy mode the kernel finishes a checksum the metadata asks for in
    // any driver's stead; a zero-copy driver does it only if it says so
    // (netdev `xsk-features`), which is not read here.
    // With the interface's own transmit checksumming off, the kernel
    // would finish each request in software, a pass of its own over the
    // frame: the shard's, fused with its copy, costs less.
    let checksum_requests = match (tx_metadata, zero_copy) {
        (Ok(()), false) if tx_checksumming.as_ref().is_ok_and(|&on| on) => true,
        (Ok(()), false) => {
            warnings.push(AfXdpWarning::ChecksumOffloadUnavailable {
                reason: match tx_checksumming {
                    Ok(_) => format!(
                        "{interface} has transmit checksumming off (`ethtool -K {interface} tx on` turns it on), so the kernel would compute each checksum in a pass of its own"
                    ),
                    Err(e) => format!("reading {interface}'s transmit checksumming: {e}"),
                },
            });
            false
        }
        (Ok(()), true) => {
            warnings.push(AfXdpWarning::ChecksumOffloadUnavailable {
                reason: "in zero-copy mode the driver's own support is not probed".to_owned(),
            });
            false
        }
        (Err(refusal), _) if config.tx_checksum_offload => {
            warnings.push(AfXdpWarning::ChecksumOffloadUnavailable {
                reason: format!("the kernel refused transmit metadata (XDP_UMEM_TX_METADATA_LEN): {refusal}"),
            });
            false
        }
        (Err(_), _) => false,
    };
    // Transmit frames start after their metadata, in the slot's first UMEM
    // frame; received ones after the kernel's headroom.
    let tx_headroom = if checksum_requests { TX_METADATA_LEN as usize } else { 0 };
    let data_capacity = config.frame_size as usize - XDP_HEADROOM.max(tx_headroom);
    let max_frame_len = if multi_buffer {
        wire_frame_len.min(MAX_PARTS * (config.frame_size as usize - tx_headroom))
    } else {
        data_capacity.min(wire_frame_len)
    };
    if max_frame_len < wire_frame_len {
        let reason = match (sg_refused, multi_buffer) {
            (Some(refusal), _) => format!("the kernel refused multi-buffer AF_XDP (XDP_USE_SG): {refusal}"),
            (None, false) => "multi-buffer AF_XDP is off".to_owned(),
            (None, true) => format!("a frame takes at most {MAX_PARTS} UMEM frames"),
        };
        warnings.push(AfXdpWarning::FramesLimited { mtu, max_frame_len, reason });
    }
    let kernel_busy_poll = match config.kernel_busy_poll {
        Some(poll) => {
            let timeout_us = u32::try_from(poll.timeout.as_micros()).unwrap_or(u32::MAX);
            match sys::prefer_busy_poll(fd, timeout_us, poll.budget) {
                Ok(()) => true,
                Err(refusal) => {
                    warnings.push(AfXdpWarning::KernelBusyPollRefused { reason: refusal.to_string() });
                    false
                }
            }
        }
        None => false,
    };
    // Copy mode: one wake-up sends the whole ring rather than 32 frames
    // (`kick_tx` otherwise makes a `sendto` per 32 frames of a burst).
    let tx_batch = if zero_copy {
        config.tx_ring_size
    } else {
        match sys::set_tx_budget(fd, config.tx_ring_size) {
            Ok(()) => config.tx_ring_size,
            Err(refusal) => {
                warnings.push(AfXdpWarning::TxBatchLimited { frames: KERNEL_TX_BATCH, reason: refusal.to_string() });
                KERNEL_TX_BATCH
            }
        }
    };
    let shape = Shape {
        frame_size: config.frame_size as usize,
        frame_count: config.frame_count as usize,
        rx_frames: config.rx_frames() as usize,
        max_frame_len,
        multi_buffer,
        need_wakeup: config.need_wakeup,
        zero_copy,
        kernel_busy_poll,
        kernel_tx_batch: tx_batch,
        checksum_requests,
        unaligned,
    };
    let rings = Rings::new(socket, shape);
    registry.add(netns, ifindex);
    drop(registry);

    Ok(AfXdp {
        rings: Some(rings),
        interface,
        ifindex,
        queue_id: config.queue_id,
        netns,
        netns_file,
        bind_mode: if zero_copy { BindMode::ZeroCopy } else { BindMode::Copy },
        xdp_mode,
        warnings,
        max_frame_len,
        multi_buffer,
        fd,
    })
}

/// Turns the errno of the last failed attempt into an error that says what
/// to do.
fn classify(config: &AfXdpConfig, source: io::Error, mode: XdpMode, attached: Attached) -> AfXdpError {
    let interface = config.interface.clone();
    match errno(&source) {
        libc::EPERM | libc::EACCES => {
            AfXdpError::PermissionDenied { action: "bind an AF_XDP socket and attach its XDP program" }
        }
        libc::ENODEV | libc::ENXIO => AfXdpError::NoSuchInterface { interface },
        libc::EBUSY | libc::EEXIST if attached == Attached::Other => {
            AfXdpError::ForeignXdpProgram { interface, source }
        }
        libc::EBUSY => AfXdpError::QueueBusy { interface, queue_id: config.queue_id },
        libc::EOPNOTSUPP | libc::EEXIST | libc::ERANGE | libc::EINVAL => {
            AfXdpError::XdpAttachRefused { interface, mode, source }
        }
        _ => AfXdpError::Os { action: "creating the AF_XDP socket and attaching its XDP program", interface, source },
    }
}
