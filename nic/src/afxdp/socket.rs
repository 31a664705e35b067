//! [`AfXdp`]: one AF_XDP socket bound to one interface queue, as a
//! [`Device`] and a [`Wait`].

use std::fs::File;
use std::io;
use std::num::NonZeroU32;
use std::os::fd::{AsRawFd, RawFd};
use std::time::{Duration, Instant};

use fairway_stack::ETHERNET_HEADER_LEN;
use xsk_rs::config::{BindFlags, FrameSize, LibxdpFlags, QueueSize, SocketConfig, UmemConfig, XdpFlags};
use xsk_rs::{CompQueue, FillQueue, FrameDesc, RxQueue, Socket, TxQueue, Umem};

use super::config::{AfXdpConfig, BindMode, XdpMode};
use super::error::{AfXdpError, AfXdpWarning};
use super::program::attach_xsk_with_frags;
use super::program::{self, Attached, Registry};
use super::rings::{Rings, Shape};
use super::stats::AfXdpStats;
use super::sys::{self, NetnsId};
use super::tx_ring::TxRing;
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
            // Closing the socket is when libxdp drops its reference to the
            // program, and detaches it if the count says it was the last.
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

/// The socket's pieces from one successful attempt.
struct Created {
    umem: Umem,
    frames: Vec<FrameDesc>,
    socket: (TxQueue, RxQueue, FillQueue, CompQueue),
    /// Our own producer on the socket's TX ring.
    tx_ring: TxRing,
    /// Bytes of a frame one UMEM frame holds on receive (after the headroom).
    data_capacity: usize,
    /// Whether the socket is bound with `XDP_USE_SG`.
    multi_buffer: bool,
}

/// The errno inside one of xsk-rs's errors, or the error's text.
fn io_error_of(error: &(dyn std::error::Error + 'static)) -> io::Error {
    match error.source().and_then(|s| s.downcast_ref::<io::Error>()) {
        Some(inner) => match inner.raw_os_error() {
            Some(errno) => io::Error::from_raw_os_error(errno),
            None => io::Error::other(inner.to_string()),
        },
        None => io::Error::other(error.to_string()),
    }
}

fn errno(error: &io::Error) -> i32 {
    error.raw_os_error().unwrap_or(0)
}

/// Builds a fresh UMEM and socket with these modes. A fresh UMEM each time:
/// after a failed attach, libxdp leaves the UMEM's socket bound, and a bound
/// socket cannot be bound again.
fn create(config: &AfXdpConfig, bind_mode: BindMode, xdp_mode: XdpMode, sg: bool) -> Result<Created, CreateError> {
    let invalid = |what: String| CreateError::Umem(io::Error::new(io::ErrorKind::InvalidInput, what));
    let queue = |size: u32| QueueSize::new(size).map_err(|e| invalid(e.to_string()));
    let umem_config = UmemConfig::builder()
        .frame_size(FrameSize::new(config.frame_size).map_err(|e| invalid(e.to_string()))?)
        .fill_queue_size(queue(config.fill_ring_size)?)
        .comp_queue_size(queue(config.completion_ring_size)?)
        .frame_headroom(0)
        .build()
        .map_err(|e| invalid(e.to_string()))?;
    let frame_count = NonZeroU32::new(config.frame_count).ok_or_else(|| invalid("frame_count is 0".into()))?;
    let (umem, frames) = Umem::new(umem_config, frame_count, false).map_err(|e| CreateError::Umem(io_error_of(&e)))?;

    let mut bind_flags = match bind_mode {
        BindMode::Auto => BindFlags::empty(),
        BindMode::Copy => BindFlags::XDP_COPY,
        BindMode::ZeroCopy => BindFlags::XDP_ZEROCOPY,
    };
    if config.need_wakeup {
        bind_flags |= BindFlags::XDP_USE_NEED_WAKEUP;
    }
    if sg {
        bind_flags |= BindFlags::XDP_USE_SG;
    }
    let xdp_flags = match xdp_mode {
        // libxdp reads "no flag" as native; say it.
        XdpMode::Auto | XdpMode::Native => XdpFlags::XDP_FLAGS_DRV_MODE,
        XdpMode::Generic => XdpFlags::XDP_FLAGS_SKB_MODE,
    };
    let socket_config = SocketConfig::builder()
        .rx_queue_size(queue(config.rx_ring_size).map_err(|_| invalid("rx_ring_size".into()))?)
        .tx_queue_size(queue(config.tx_ring_size).map_err(|_| invalid("tx_ring_size".into()))?)
        .libxdp_flags(LibxdpFlags::empty())
        .xdp_flags(xdp_flags)
        .bind_flags(bind_flags)
        .build();
    let interface = config.interface.parse().map_err(|_| invalid("interface name has a NUL".into()))?;
    // SAFETY: the UMEM was created just above and no other socket uses it,
    // so the shared-UMEM case the contract constrains does not arise.
    let (tx, rx, rings) = unsafe { Socket::new(socket_config, &umem, &interface, config.queue_id) }
        .map_err(|e| CreateError::Socket(io_error_of(&e)))?;
    let Some((fill, completion)) = rings else {
        return Err(CreateError::Socket(io::Error::other("libxdp returned no fill and completion rings")));
    };
    let tx_ring = TxRing::map(tx.fd().as_raw_fd(), config.tx_ring_size).map_err(CreateError::Socket)?;
    Ok(Created {
        umem,
        frames,
        socket: (tx, rx, fill, completion),
        tx_ring,
        data_capacity: umem_config.mtu() as usize,
        multi_buffer: sg,
    })
}

/// [`create`], retried for up to a second while the queue is busy. A socket
/// closed just before on this queue (an earlier attempt, or a socket the
/// program dropped) keeps the queue until the kernel's deferred release
/// runs, which `bind` reports as `EBUSY`.
fn create_when_free(
    config: &AfXdpConfig,
    bind_mode: BindMode,
    xdp_mode: XdpMode,
    sg: bool,
) -> Result<Created, CreateError> {
    let deadline = Instant::now() + QUEUE_RELEASE_WAIT;
    let mut pause = Duration::from_millis(1);
    loop {
        match create(config, bind_mode, xdp_mode, sg) {
            Err(CreateError::Socket(source)) if errno(&source) == libc::EBUSY && Instant::now() < deadline => {
                std::thread::sleep(pause);
                pause = (pause * 2).min(Duration::from_millis(50));
            }
            result => return result,
        }
    }
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
    // a program the driver lets see such frames (attached here, before
    // libxdp would attach its own without the flag), and a socket bound
    // with XDP_USE_SG to take them in several parts.
    let wire_frame_len = mtu as usize + ETHERNET_HEADER_LEN;
    let jumbo = wire_frame_len > config.frame_size as usize - XDP_HEADROOM;
    let sg = jumbo && config.multi_buffer;
    let mut sg_refused = None;
    let mut native_refused = None;
    let mut result = Err((io::Error::other("no XDP mode was tried"), config.xdp_mode));
    for (i, &mode) in modes.iter().enumerate() {
        let mut attempt = || {
            if jumbo && attached == Attached::Nothing {
                attach_xsk_with_frags(ifindex, mode, queue_count.unwrap_or(1)).map_err(CreateError::Socket)?;
            }
            match create_when_free(config, config.bind_mode, mode, sg) {
                // Kernels before 6.6 do not know the flag; a zero-copy
                // driver may not take several buffers per frame.
                Err(CreateError::Socket(source)) if sg && matches!(errno(&source), libc::EINVAL | libc::EOPNOTSUPP) => {
                    let created = create_when_free(config, config.bind_mode, mode, false)?;
                    sg_refused = Some(source);
                    Ok(created)
                }
                other => other,
            }
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
                    && let Ok(probe) = create_when_free(config, BindMode::Copy, mode, false)
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

    let zero_copy = match sys::is_zero_copy(created.socket.0.fd().as_raw_fd()) {
        Ok(zero_copy) => zero_copy,
        Err(source) => {
            drop(created);
            clean_up_failure(attached, &registry, netns, ifindex);
            return Err(os("reading the socket's bind mode")(source));
        }
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

    let Created { umem, frames, socket, tx_ring, data_capacity, multi_buffer } = created;
    let fd = socket.0.fd().as_raw_fd();
    let max_frame_len = if multi_buffer {
        wire_frame_len.min(MAX_PARTS * config.frame_size as usize)
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
    };
    let rings = Rings::new((umem, frames), socket, tx_ring, fd, shape);
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
