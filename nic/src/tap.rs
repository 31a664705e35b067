//! [`Tap`]: a [`Device`] over a Linux TAP interface.
//!
//! This module owns the TAP backend: one file descriptor on `/dev/net/tun`
//! attached to a TAP interface (`IFF_TAP | IFF_NO_PI`: whole Ethernet frames,
//! no packet-information prefix), the two buffers frames move through, and
//! the counters of what happened to them. It is the kernel-facing backend
//! that runs everywhere (no XDP, no special NIC): slower than AF_XDP, since
//! every frame costs a system call and a copy, but the same [`Device`]
//! contract, so the runtime and the tests drive it like any other.
//!
//! # Frames
//!
//! The descriptor is non-blocking. `receive` reads one frame per `read(2)`
//! into one receive buffer and lends it to the callback; the buffer is large
//! enough for any frame a TAP can carry, so a frame longer than
//! [`max_frame_len`](Device::max_frame_len) is seen whole, counted and
//! dropped rather than truncated. `transmit` lends one transmit buffer to
//! `fill` and writes each frame with `write(2)` as soon as it is filled.
//!
//! # A full kernel queue
//!
//! If `write(2)` says `EAGAIN` after `fill` produced a frame, the frame has
//! already been accepted (the contract promises a caller never loses a frame
//! it produced), so the device keeps it in its one transmit buffer and ends
//! the batch. Until that frame is written, the device has no free transmit
//! buffer: the next `transmit` writes it first and calls `fill` only once it
//! is gone, and [`Wait::wait`] also waits for the descriptor to become
//! writable and writes it then. [`TapStats::tx_deferred`] counts such frames.
//! This is rare: the kernel's send buffer for a TAP is large unless someone
//! lowered it.
//!
//! # Namespaces and permissions
//!
//! A TAP lives in the network namespace of the thread that opened
//! `/dev/net/tun`; once open, the descriptor works from any thread. Creating
//! a TAP, or attaching to one the caller does not own, needs `CAP_NET_ADMIN`;
//! [`TapError`] says what went wrong and what to do about it.

use std::ffi::{CString, c_char, c_short};
use std::fs::OpenOptions;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd, RawFd};
use std::os::unix::fs::OpenOptionsExt;
use std::time::Duration;

use fairway_stack::ETHERNET_HEADER_LEN;

use crate::{Device, Wait};

#[cfg(test)]
mod tests;

/// The character device every TUN/TAP interface is opened through.
const TUN_PATH: &str = "/dev/net/tun";

/// The longest frame a TAP can hand over: the largest MTU Linux allows
/// (`ETH_MAX_MTU`), an Ethernet header and one VLAN tag. Also the upper limit
/// of [`TapConfig::max_frame_len`].
pub const MAX_TAP_FRAME_LEN: usize = 65_535 + ETHERNET_HEADER_LEN + 4;

/// Longest interface name, without its terminating NUL (`IFNAMSIZ - 1`).
const MAX_NAME_LEN: usize = libc::IFNAMSIZ - 1;

/// Why a TAP could not be opened.
///
/// Every variant displays as one line that says what failed and what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TapError {
    /// The kernel offers no TUN/TAP driver: `/dev/net/tun` does not exist,
    /// or nothing answers behind it.
    #[error("TAP unavailable: {detail}; load the tun module (modprobe tun)")]
    Unavailable {
        /// What was found instead of a working `/dev/net/tun`.
        detail: &'static str,
    },
    /// The name cannot be an interface name. Checked before any system call.
    #[error("invalid TAP interface name {name:?}: {reason}")]
    InvalidName {
        /// The name as given.
        name: String,
        /// Which rule it breaks.
        reason: &'static str,
    },
    /// The kernel refused for lack of privilege: this user may not open
    /// `/dev/net/tun` (`EACCES`), or creating the TAP, or attaching to one
    /// owned by another user, needs `CAP_NET_ADMIN` (`EPERM` on
    /// `TUNSETIFF`).
    #[error("permission denied {what} for TAP `{name}`: {hint}")]
    PermissionDenied {
        /// The interface name asked for.
        name: String,
        /// The step that was refused.
        what: &'static str,
        /// What to do about it.
        hint: &'static str,
    },
    /// The kernel refused with `EBUSY`: another descriptor (usually another
    /// process) is already attached to this single-queue TAP.
    #[error(
        "TAP `{name}` is busy: another process is attached to it; stop that process, \
         or open a different interface"
    )]
    Busy {
        /// The interface name asked for.
        name: String,
    },
    /// An interface of that name exists but cannot be attached as asked: it
    /// is a TUN device or another kind of interface, or a TAP created with
    /// the other multi-queue setting.
    #[error(
        "interface `{name}` exists but is not a {wanted} TAP (it is a TUN device, another kind of \
         interface, or a TAP with the other multi-queue setting); pick another name, or match its settings"
    )]
    NotATap {
        /// The interface name asked for.
        name: String,
        /// `"single-queue"` or `"multi-queue"`: what was asked for.
        wanted: &'static str,
    },
    /// The [`TapConfig`] asks for something impossible.
    #[error("invalid TAP configuration: {0}")]
    InvalidConfig(String),
    /// Any other failure of a system call while opening.
    #[error("TAP `{name}`: {what} failed: {cause}; {hint}")]
    Os {
        /// The interface name asked for.
        name: String,
        /// The step that failed, e.g. `"TUNSETIFF"`.
        what: &'static str,
        /// What the kernel said.
        cause: io::Error,
        /// What to try.
        hint: &'static str,
    },
}

/// How to open a [`Tap`]: the interface name and options.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TapConfig {
    /// The interface to attach to, or to create if none of that name
    /// exists. At most 15 bytes; `%d` (once) lets the kernel pick a free
    /// number, e.g. `tap%d`.
    pub name: String,
    /// The largest frame, Ethernet header included, FCS excluded: the length
    /// of every transmit buffer. `None` takes the interface's MTU plus 14.
    /// Received frames longer than this are counted in
    /// [`TapStats::rx_oversize`] and dropped. At most [`MAX_TAP_FRAME_LEN`].
    pub max_frame_len: Option<usize>,
    /// Open one queue of a multi-queue TAP (`IFF_MULTI_QUEUE`): each
    /// [`Tap`] opened with the same name is one more queue, and the kernel
    /// spreads the frames it sends over them by flow. A TAP is created
    /// single- or multi-queue, and attaching asks for the same kind.
    pub multi_queue: bool,
}

impl TapConfig {
    /// A single-queue TAP named `name`, with frames as long as its MTU
    /// allows.
    pub fn new(name: impl Into<String>) -> TapConfig {
        TapConfig { name: name.into(), max_frame_len: None, multi_queue: false }
    }

    /// Sets the largest frame (see [`TapConfig::max_frame_len`]).
    pub fn with_max_frame_len(mut self, max_frame_len: usize) -> TapConfig {
        self.max_frame_len = Some(max_frame_len);
        self
    }

    /// Opens one queue of a multi-queue TAP (see [`TapConfig::multi_queue`]).
    pub fn with_multi_queue(mut self, multi_queue: bool) -> TapConfig {
        self.multi_queue = multi_queue;
        self
    }
}

/// What happened to the frames that went through a [`Tap`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TapStats {
    /// Frames handed to the receive callback.
    pub rx_frames: u64,
    /// Bytes of those frames.
    pub rx_bytes: u64,
    /// Frames written to the kernel.
    pub tx_frames: u64,
    /// Bytes of those frames.
    pub tx_bytes: u64,
    /// Received frames longer than `max_frame_len`, dropped.
    pub rx_oversize: u64,
    /// Received frames shorter than an Ethernet header, dropped (the kernel
    /// should never send one).
    pub rx_runts: u64,
    /// `read(2)` failures other than "nothing to read", e.g. the interface
    /// was deleted. Each ends a receive batch.
    pub rx_errors: u64,
    /// Frames from `fill` shorter than an Ethernet header (a caller bug),
    /// dropped without a write.
    pub tx_runts: u64,
    /// Frames the kernel refused (`write(2)` failed other than with
    /// `EAGAIN`, or wrote part of the frame), dropped.
    pub tx_errors: u64,
    /// Frames that met `EAGAIN` and were kept to be written later.
    pub tx_deferred: u64,
}

/// A TAP interface as a [`Device`] and a [`Wait`].
///
/// See the [module documentation](self) for how frames move. Dropping the
/// `Tap` closes the descriptor; a transient TAP (one this `Tap` created)
/// disappears with it, a persistent one stays.
///
/// ```no_run
/// use std::time::Duration;
///
/// use fairway_nic::tap::Tap;
/// use fairway_nic::{Device, Wait};
///
/// let mut tap = Tap::open("tap0")?;
/// println!("{} has MAC {:02x?}", tap.name(), tap.mac_address()?);
/// loop {
///     tap.wait(Some(Duration::from_millis(10)))?;
///     tap.receive(32, |frame| println!("{} bytes", frame.len()));
/// }
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
pub struct Tap {
    fd: OwnedFd,
    name: String,
    max_frame_len: usize,
    /// One frame at a time, [`MAX_TAP_FRAME_LEN`] bytes (or more), so that a
    /// frame is never truncated, whatever `max_frame_len` says.
    rx_buf: Box<[u8]>,
    /// `max_frame_len` bytes, lent to `fill`.
    tx_buf: Box<[u8]>,
    /// The length of a frame in `tx_buf` that `fill` produced but the kernel
    /// has not taken yet (`EAGAIN`).
    tx_held: Option<usize>,
    stats: TapStats,
    /// The errno of the last `read(2)` or `write(2)` failure.
    last_errno: Option<i32>,
}

/// What became of one `write(2)`.
enum Written {
    /// The kernel took the frame.
    Sent,
    /// `EAGAIN`: try again later.
    WouldBlock,
    /// Any other failure: the frame is dropped (and counted).
    Failed,
}

impl Tap {
    /// Opens the TAP interface `name` (creating a transient one if none of
    /// that name exists), non-blocking, with frames as long as its MTU
    /// allows. Shorthand for [`Tap::open_with`]`(TapConfig::new(name))`.
    ///
    /// # Errors
    ///
    /// See [`TapError`]: no TUN driver, an invalid name, no permission, a
    /// TAP already in use, an interface of that name that is not a TAP.
    pub fn open(name: &str) -> Result<Tap, TapError> {
        Tap::open_with(&TapConfig::new(name))
    }

    /// Opens a TAP as `config` says. The interface is looked up (or created)
    /// in the calling thread's network namespace.
    ///
    /// # Errors
    ///
    /// As [`Tap::open`], and [`TapError::InvalidConfig`] for a
    /// `max_frame_len` outside `[14, MAX_TAP_FRAME_LEN]`.
    pub fn open_with(config: &TapConfig) -> Result<Tap, TapError> {
        let name = &config.name;
        let c_name = interface_name(name)?;
        if let Some(len) = config.max_frame_len
            && !(ETHERNET_HEADER_LEN..=MAX_TAP_FRAME_LEN).contains(&len)
        {
            return Err(TapError::InvalidConfig(format!(
                "max_frame_len {len} is outside [{ETHERNET_HEADER_LEN}, {MAX_TAP_FRAME_LEN}]"
            )));
        }

        let file = OpenOptions::new().read(true).write(true).custom_flags(libc::O_NONBLOCK).open(TUN_PATH).map_err(
            |e| match e.raw_os_error() {
                Some(libc::ENOENT) => TapError::Unavailable { detail: "/dev/net/tun does not exist" },
                Some(libc::ENODEV | libc::ENXIO) => {
                    TapError::Unavailable { detail: "/dev/net/tun exists but no driver answers behind it" }
                }
                Some(libc::EACCES | libc::EPERM) => TapError::PermissionDenied {
                    name: name.clone(),
                    what: "opening /dev/net/tun",
                    hint: "run as root, or let this user read and write /dev/net/tun",
                },
                _ => TapError::Os {
                    name: name.clone(),
                    what: "opening /dev/net/tun",
                    cause: e,
                    hint: "check that /dev/net/tun is the TUN/TAP character device (10, 200)",
                },
            },
        )?;
        let fd = OwnedFd::from(file);

        let mut ifr = zeroed_ifreq();
        ifr.ifr_name = c_name;
        let mut flags = libc::IFF_TAP | libc::IFF_NO_PI;
        if config.multi_queue {
            flags |= libc::IFF_MULTI_QUEUE;
        }
        // The flags are a short in `struct ifreq`; all of them fit.
        ifr.ifr_ifru.ifru_flags = flags as c_short;
        // SAFETY: `fd` is an open descriptor on /dev/net/tun; TUNSETIFF reads
        // and writes one `struct ifreq`, and `ifr` is one we own for the
        // duration of the call.
        let rc = unsafe { libc::ioctl(fd.as_raw_fd(), libc::TUNSETIFF, &mut ifr) };
        if rc < 0 {
            return Err(tunsetiff_error(name, config.multi_queue, io::Error::last_os_error()));
        }
        // The kernel wrote back the name it used (it expands `%d`).
        let name = name_from_ifreq(&ifr.ifr_name);

        let max_frame_len = match config.max_frame_len {
            Some(len) => len,
            None => {
                let mtu = crate::interface::mtu(&name).map_err(|cause| TapError::Os {
                    name: name.clone(),
                    what: "reading the interface MTU (SIOCGIFMTU)",
                    cause,
                    hint: "set the frame length explicitly with TapConfig::with_max_frame_len",
                })?;
                (mtu + ETHERNET_HEADER_LEN).min(MAX_TAP_FRAME_LEN)
            }
        };
        Ok(Tap::from_fd(fd, name, max_frame_len))
    }

    /// A `Tap` over any descriptor that reads and writes whole frames and is
    /// non-blocking (the tests use a `SOCK_SEQPACKET` socket pair).
    fn from_fd(fd: OwnedFd, name: String, max_frame_len: usize) -> Tap {
        Tap {
            fd,
            name,
            max_frame_len,
            rx_buf: vec![0; MAX_TAP_FRAME_LEN.max(max_frame_len)].into_boxed_slice(),
            tx_buf: vec![0; max_frame_len].into_boxed_slice(),
            tx_held: None,
            stats: TapStats::default(),
            last_errno: None,
        }
    }

    /// The interface's name, as the kernel reported it (a `%d` in the
    /// requested name is replaced by the number it picked).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The interface's current MAC address: the kernel side's, the one it
    /// puts in the frames it sends. The stack picks its own address.
    ///
    /// # Errors
    ///
    /// What `ioctl(SIOCGIFHWADDR)` reported, e.g. the interface was deleted.
    pub fn mac_address(&self) -> io::Result<[u8; 6]> {
        crate::interface::mac_address_on(self.fd.as_fd(), &self.name)
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> TapStats {
        self.stats
    }

    /// The last `read(2)` or `write(2)` failure the counters recorded, if
    /// any: what to look at when [`TapStats::rx_errors`] or
    /// [`TapStats::tx_errors`] grows.
    pub fn last_error(&self) -> Option<io::Error> {
        self.last_errno.map(io::Error::from_raw_os_error)
    }

    /// Whether a transmitted frame is still waiting for the kernel to take
    /// it (see the [module documentation](self)).
    pub fn has_pending_tx(&self) -> bool {
        self.tx_held.is_some()
    }

    /// Writes the frame still waiting for the kernel, if any. Returns
    /// whether none is left waiting. `transmit` and `wait` do this
    /// themselves; a driver that has nothing more to send may call it.
    pub fn flush_pending_tx(&mut self) -> bool {
        let Some(len) = self.tx_held else {
            return true;
        };
        match self.write_frame(len) {
            Written::WouldBlock => false,
            Written::Sent | Written::Failed => {
                self.tx_held = None;
                true
            }
        }
    }

    /// Writes the first `len` bytes of the transmit buffer as one frame.
    fn write_frame(&mut self, len: usize) -> Written {
        loop {
            // SAFETY: `tx_buf` is valid for `len <= tx_buf.len()` bytes of
            // reads for the duration of the call; the descriptor is ours.
            let n = unsafe { libc::write(self.fd.as_raw_fd(), self.tx_buf.as_ptr().cast(), len) };
            if n >= 0 {
                if n as usize == len {
                    self.stats.tx_frames += 1;
                    self.stats.tx_bytes += len as u64;
                    return Written::Sent;
                }
                // A TAP takes a frame whole or not at all; anything else
                // left a broken frame behind.
                self.stats.tx_errors += 1;
                self.last_errno = Some(libc::EIO);
                return Written::Failed;
            }
            match errno() {
                libc::EINTR => continue,
                libc::EAGAIN => return Written::WouldBlock,
                e => {
                    self.stats.tx_errors += 1;
                    self.last_errno = Some(e);
                    return Written::Failed;
                }
            }
        }
    }
}

impl core::fmt::Debug for Tap {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Tap")
            .field("name", &self.name)
            .field("fd", &self.fd.as_raw_fd())
            .field("max_frame_len", &self.max_frame_len)
            .field("pending_tx", &self.tx_held.is_some())
            .field("stats", &self.stats)
            .finish()
    }
}

impl Device for Tap {
    fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }

    fn receive<F: FnMut(&[u8])>(&mut self, budget: usize, mut on_frame: F) -> usize {
        let mut handed = 0;
        while handed < budget {
            // SAFETY: `rx_buf` is valid for `rx_buf.len()` bytes of writes
            // for the duration of the call; the descriptor is ours.
            let n = unsafe { libc::read(self.fd.as_raw_fd(), self.rx_buf.as_mut_ptr().cast(), self.rx_buf.len()) };
            if n < 0 {
                match errno() {
                    libc::EINTR => continue,
                    libc::EAGAIN => break,
                    e => {
                        self.stats.rx_errors += 1;
                        self.last_errno = Some(e);
                        break;
                    }
                }
            }
            let len = n as usize;
            if len == 0 {
                // End of file: not a TAP's way, but never spin on it.
                break;
            }
            // A dropped frame does not count against the budget; the loop
            // still ends, as the kernel's queue for the TAP is bounded.
            if len > self.max_frame_len {
                self.stats.rx_oversize += 1;
                continue;
            }
            if len < ETHERNET_HEADER_LEN {
                self.stats.rx_runts += 1;
                continue;
            }
            self.stats.rx_frames += 1;
            self.stats.rx_bytes += len as u64;
            on_frame(&self.rx_buf[..len]);
            handed += 1;
        }
        handed
    }

    fn transmit<F: FnMut(&mut [u8]) -> Option<usize>>(&mut self, budget: usize, mut fill: F) -> usize {
        if budget == 0 || !self.flush_pending_tx() {
            return 0;
        }
        let mut sent = 0;
        while sent < budget {
            let capacity = self.tx_buf.len();
            let Some(len) = fill(&mut self.tx_buf) else {
                break;
            };
            debug_assert!(len <= capacity, "Device::transmit: fill returned {len} bytes for a {capacity}-byte buffer");
            let len = len.min(capacity);
            // The frame is accepted from here on, whatever becomes of it.
            sent += 1;
            if len < ETHERNET_HEADER_LEN {
                self.stats.tx_runts += 1;
                continue;
            }
            match self.write_frame(len) {
                Written::Sent | Written::Failed => {}
                Written::WouldBlock => {
                    self.tx_held = Some(len);
                    self.stats.tx_deferred += 1;
                    break;
                }
            }
        }
        sent
    }
}

impl Wait for Tap {
    /// Sleeps until a frame can be read (or, while a transmitted frame waits
    /// for the kernel, until it can be written, which it then is).
    ///
    /// # Errors
    ///
    /// What `ppoll(2)` reported, and an error when the descriptor reports
    /// `POLLERR`, `POLLHUP` or `POLLNVAL`: the interface was deleted (or,
    /// for a multi-queue TAP, this queue detached), so no frame will come.
    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let held = !self.flush_pending_tx();
        let mut pfd = libc::pollfd {
            fd: self.fd.as_raw_fd(),
            events: if held { libc::POLLIN | libc::POLLOUT } else { libc::POLLIN },
            revents: 0,
        };
        let ts = timeout.map(|d| libc::timespec {
            tv_sec: d.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: d.subsec_nanos().into(),
        });
        let ts_ptr = ts.as_ref().map_or(core::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: `pfd` is one valid `pollfd` and `ts_ptr` is null or points
        // to a `timespec` that outlives the call; a null signal mask keeps
        // the thread's own.
        let rc = unsafe { libc::ppoll(&mut pfd, 1, ts_ptr, core::ptr::null()) };
        if rc < 0 {
            let e = io::Error::last_os_error();
            return if e.raw_os_error() == Some(libc::EINTR) { Ok(()) } else { Err(e) };
        }
        if pfd.revents & (libc::POLLERR | libc::POLLHUP | libc::POLLNVAL) != 0 {
            return Err(io::Error::new(
                io::ErrorKind::NotConnected,
                format!("TAP `{}`: the interface is gone (deleted, or this queue detached); reopen it", self.name),
            ));
        }
        if pfd.revents & libc::POLLOUT != 0 {
            self.flush_pending_tx();
        }
        Ok(())
    }

    /// The TAP's descriptor: readable when a frame came.
    fn wake_sources<'a>(&'a self, sources: &mut Vec<BorrowedFd<'a>>) {
        sources.push(self.fd.as_fd());
    }

    /// False while a frame waits for room in the kernel's queue: the next
    /// turn's transmit retries it rather than a writability wait, since
    /// that queue drains at once into the kernel's own stack.
    fn before_sleep(&mut self) -> io::Result<bool> {
        Ok(self.flush_pending_tx())
    }
}

impl AsRawFd for Tap {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

impl AsFd for Tap {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Checks `name` against the kernel's rules for interface names
/// (`dev_valid_name`, and `%d` as `dev_alloc_name` takes it) and turns it
/// into the NUL-terminated array `struct ifreq` holds.
fn interface_name(name: &str) -> Result<[c_char; libc::IFNAMSIZ], TapError> {
    let invalid = |reason| Err(TapError::InvalidName { name: name.to_owned(), reason });
    if name.is_empty() {
        return invalid("it is empty (use e.g. `tap0`, or `tap%d` to let the kernel pick a number)");
    }
    if name.len() > MAX_NAME_LEN {
        return invalid("interface names are at most 15 bytes long");
    }
    if name == "." || name == ".." {
        return invalid("`.` and `..` are not interface names");
    }
    if name.bytes().any(|b| b == b'/' || b == b':' || b == 0 || b.is_ascii_whitespace()) {
        return invalid("interface names may not contain `/`, `:`, NUL or whitespace");
    }
    if let Some(i) = name.find('%')
        && (!name[i + 1..].starts_with('d') || name[i + 1..].contains('%'))
    {
        return invalid("`%` may appear once, as `%d` (the kernel replaces it with a free number)");
    }
    let mut out = [0 as c_char; libc::IFNAMSIZ];
    for (o, b) in out.iter_mut().zip(name.bytes()) {
        *o = b as c_char;
    }
    Ok(out)
}

/// The name in a `struct ifreq`, up to its NUL.
fn name_from_ifreq(raw: &[c_char; libc::IFNAMSIZ]) -> String {
    let bytes: Vec<u8> = raw.iter().take_while(|&&c| c != 0).map(|&c| c as u8).collect();
    String::from_utf8_lossy(&bytes).into_owned()
}

/// Turns a TUNSETIFF failure into the error that says what to do.
fn tunsetiff_error(name: &str, multi_queue: bool, cause: io::Error) -> TapError {
    let name = name.to_owned();
    match cause.raw_os_error() {
        Some(libc::EPERM | libc::EACCES) => TapError::PermissionDenied {
            hint: if name.contains('%') {
                "creating a TAP needs CAP_NET_ADMIN; run as root, or give the program the capability \
                 (setcap cap_net_admin+ep PROGRAM)"
            } else {
                "creating a TAP, or attaching to one another user owns, needs CAP_NET_ADMIN; run as root, \
                 give the program the capability (setcap cap_net_admin+ep PROGRAM), or attach to a \
                 persistent TAP this user owns (ip tuntap add dev NAME mode tap user USER)"
            },
            name,
            what: "attaching to the interface (TUNSETIFF)",
        },
        Some(libc::EBUSY) => TapError::Busy { name },
        Some(libc::EINVAL) if interface_exists(&name) => {
            TapError::NotATap { name, wanted: if multi_queue { "multi-queue" } else { "single-queue" } }
        }
        Some(libc::E2BIG) => TapError::Os {
            name,
            what: "TUNSETIFF (attaching one more queue)",
            cause,
            hint: "the multi-queue TAP has as many queues as it can take; close some",
        },
        _ => TapError::Os {
            name,
            what: "TUNSETIFF",
            cause,
            hint: "check the name and that the kernel supports TAP (CONFIG_TUN)",
        },
    }
}

/// Whether an interface called `name` exists in this thread's namespace.
fn interface_exists(name: &str) -> bool {
    let Ok(c) = CString::new(name) else {
        return false;
    };
    // SAFETY: `c` is a NUL-terminated string that outlives the call.
    unsafe { libc::if_nametoindex(c.as_ptr()) != 0 }
}

fn zeroed_ifreq() -> libc::ifreq {
    // SAFETY: `struct ifreq` is plain data (a name array and a union of
    // integers, addresses and a pointer); all zeroes is a valid value of
    // each, the pointer being null.
    unsafe { core::mem::zeroed() }
}

fn errno() -> i32 {
    io::Error::last_os_error().raw_os_error().unwrap_or(0)
}
