//! The raw system calls of this backend: the AF_XDP socket, its UMEM and
//! rings, interface lookups, wakeups and network namespaces. Every `unsafe`
//! block of the backend outside the libxdp calls and the rings is here.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::ptr::{self, NonNull};

/// `ETHTOOL_GCHANNELS` from `linux/ethtool.h` (libc does not have it).
const ETHTOOL_GCHANNELS: u32 = 0x3c;
/// `ETHTOOL_GTXCSUM`: whether any transmit checksum offload is on.
const ETHTOOL_GTXCSUM: u32 = 0x16;

/// `struct ethtool_value` from `linux/ethtool.h`.
#[repr(C)]
#[derive(Default)]
struct EthtoolValue {
    cmd: u32,
    data: u32,
}

/// `struct ethtool_channels` from `linux/ethtool.h`.
#[repr(C)]
#[derive(Default)]
struct EthtoolChannels {
    cmd: u32,
    max_rx: u32,
    max_tx: u32,
    max_other: u32,
    max_combined: u32,
    rx_count: u32,
    tx_count: u32,
    other_count: u32,
    combined_count: u32,
}

fn last_error() -> io::Error {
    io::Error::last_os_error()
}

/// A socket of `domain`, closed on drop.
fn socket(domain: libc::c_int, kind: libc::c_int) -> io::Result<OwnedFd> {
    // SAFETY: socket(2) takes no pointers; a non-negative result is a new
    // descriptor that nothing else owns.
    let fd = unsafe { libc::socket(domain, kind | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(last_error());
    }
    // SAFETY: `fd` was just returned by socket(2) and is owned by no one else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Creates and closes an AF_XDP socket: tells `EAFNOSUPPORT` (no AF_XDP in
/// the kernel) and `EPERM` (no CAP_NET_RAW) apart before any real work.
pub(super) fn probe_af_xdp() -> io::Result<()> {
    socket(libc::AF_XDP, libc::SOCK_RAW).map(drop)
}

/// The index of interface `name` in the calling thread's network namespace.
pub(super) fn interface_index(name: &str) -> io::Result<u32> {
    let name = CString::new(name).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    // SAFETY: `name` is a valid NUL-terminated string that outlives the call.
    let index = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if index == 0 { Err(last_error()) } else { Ok(index) }
}

/// An `ifreq` naming `name` (which the caller checked is shorter than
/// `IFNAMSIZ`), the rest zeroed.
fn ifreq(name: &str) -> libc::ifreq {
    // SAFETY: `ifreq` is plain old data (integers, arrays and a union of
    // those and a pointer); all-zero bytes are a valid value.
    let mut request: libc::ifreq = unsafe { mem::zeroed() };
    for (dst, src) in request.ifr_name.iter_mut().zip(name.bytes().take(libc::IFNAMSIZ - 1)) {
        *dst = src as libc::c_char;
    }
    request
}

/// How many queues an AF_XDP socket can bind to on `name`: the larger of
/// its receive and transmit queue counts, from ethtool's channel counts
/// (which, unlike sysfs, answer for the calling thread's namespace).
/// `None` when the driver does not report channels.
pub(super) fn queue_count(name: &str) -> io::Result<Option<u32>> {
    let fd = socket(libc::AF_INET, libc::SOCK_DGRAM)?;
    let mut channels = EthtoolChannels { cmd: ETHTOOL_GCHANNELS, ..EthtoolChannels::default() };
    let mut request = ifreq(name);
    request.ifr_ifru.ifru_data = ptr::from_mut(&mut channels).cast();
    // SAFETY: SIOCETHTOOL with ETHTOOL_GCHANNELS writes one
    // `ethtool_channels` through `ifru_data`, which points at ours; both it
    // and the `ifreq` outlive the call.
    let result = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCETHTOOL, &mut request) };
    if result < 0 {
        let error = last_error();
        return match error.raw_os_error() {
            Some(libc::EOPNOTSUPP) => Ok(None),
            _ => Err(error),
        };
    }
    let rx = channels.rx_count + channels.combined_count;
    let tx = channels.tx_count + channels.combined_count;
    Ok(Some(rx.max(tx)).filter(|&count| count > 0))
}

/// Whether interface `name` computes transmit checksums itself (ethtool's
/// `tx-checksumming`, on for a veth and for almost every NIC unless turned
/// off): where it does not, the kernel computes a partial checksum in
/// software before the frame leaves.
pub(super) fn tx_checksumming(name: &str) -> io::Result<bool> {
    let fd = socket(libc::AF_INET, libc::SOCK_DGRAM)?;
    let mut value = EthtoolValue { cmd: ETHTOOL_GTXCSUM, data: 0 };
    let mut request = ifreq(name);
    request.ifr_ifru.ifru_data = ptr::from_mut(&mut value).cast();
    // SAFETY: SIOCETHTOOL with ETHTOOL_GTXCSUM writes one `ethtool_value`
    // through `ifru_data`, which points at ours; both outlive the call.
    let result = unsafe { libc::ioctl(fd.as_raw_fd(), libc::SIOCETHTOOL, &mut request) };
    if result < 0 {
        return Err(last_error());
    }
    Ok(value.data != 0)
}

/// Whether the bound AF_XDP socket `fd` runs in zero-copy mode
/// (`XDP_OPTIONS_ZEROCOPY`).
pub(super) fn is_zero_copy(fd: RawFd) -> io::Result<bool> {
    let mut options = libc::xdp_options { flags: 0 };
    let mut len = mem::size_of::<libc::xdp_options>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `options`, which we
    // own and which outlives the call.
    let result =
        unsafe { libc::getsockopt(fd, libc::SOL_XDP, libc::XDP_OPTIONS, ptr::from_mut(&mut options).cast(), &mut len) };
    if result < 0 {
        return Err(last_error());
    }
    Ok(options.flags & libc::XDP_OPTIONS_ZEROCOPY != 0)
}

/// What one TX kick achieved.
pub(super) enum Kick {
    /// The kernel took everything on the TX ring.
    Done,
    /// The kernel sent a batch and more remains (`EAGAIN`), or it is short
    /// of completion slots: kick again after reaping.
    Again,
    /// The kernel could not send now (`ENOBUFS`, `EBUSY`, `ENETDOWN`, ...);
    /// the frames stay on the ring for the next kick.
    Stop,
}

/// Wakes the kernel to send what is on the TX ring: `sendto` with no data,
/// as the AF_XDP documentation prescribes.
pub(super) fn kick_tx(fd: RawFd) -> Kick {
    // SAFETY: a zero-length sendto with null buffer and address reads no
    // memory; it only makes the kernel process the socket's TX ring.
    let result = unsafe { libc::sendto(fd, ptr::null(), 0, libc::MSG_DONTWAIT, ptr::null(), 0) };
    if result >= 0 {
        return Kick::Done;
    }
    match io::Error::last_os_error().raw_os_error() {
        Some(libc::EAGAIN | libc::EINTR) => Kick::Again,
        _ => Kick::Stop,
    }
}

/// Wakes the driver to refill from the fill ring (zero-copy drivers that
/// flagged need_wakeup on it): `recvfrom` with no buffer.
pub(super) fn wake_rx(fd: RawFd) {
    // SAFETY: a zero-length recvfrom with null buffer and address writes no
    // memory; it only wakes the driver's receive path. The result is not
    // needed: an error leaves the next poll to do the same.
    unsafe {
        libc::recvfrom(fd, ptr::null_mut(), 0, libc::MSG_DONTWAIT, ptr::null_mut(), ptr::null_mut());
    }
}

/// Identifies a network namespace: the device and inode of its nsfs file.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct NetnsId {
    dev: u64,
    ino: u64,
}

/// The calling thread's network namespace: its identity, and a handle to
/// come back to it.
pub(super) fn current_netns() -> io::Result<(NetnsId, File)> {
    let file = File::open("/proc/thread-self/ns/net")?;
    let meta = file.metadata()?;
    Ok((NetnsId { dev: meta.dev(), ino: meta.ino() }, file))
}

/// Moves the calling thread into the network namespace `ns` (a file from
/// [`current_netns`]).
pub(super) fn enter_netns(ns: &File) -> io::Result<()> {
    // SAFETY: setns takes a descriptor we keep open for the call and a
    // flag; it changes only the calling thread's network namespace.
    let result = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
    if result < 0 { Err(last_error()) } else { Ok(()) }
}

/// `SO_BUSY_POLL`, `SO_PREFER_BUSY_POLL` and `SO_BUSY_POLL_BUDGET` from
/// `asm-generic/socket.h` (the libc crate lacks the last two on Linux).
const SO_BUSY_POLL: libc::c_int = 46;
const SO_PREFER_BUSY_POLL: libc::c_int = 69;
const SO_BUSY_POLL_BUDGET: libc::c_int = 70;

/// `XDP_MAX_TX_SKB_BUDGET` from `linux/if_xdp.h` (Linux 6.17; the libc
/// crate lacks it).
const XDP_MAX_TX_SKB_BUDGET: libc::c_int = 9;

/// One integer socket option at `level` (`SOL_SOCKET`, `SOL_XDP`).
fn set_option(fd: RawFd, level: libc::c_int, option: libc::c_int, value: libc::c_int) -> io::Result<()> {
    // SAFETY: setsockopt reads `size_of::<c_int>()` bytes from `value`,
    // which lives for the call.
    let result = unsafe {
        libc::setsockopt(
            fd,
            level,
            option,
            ptr::from_ref(&value).cast(),
            mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if result < 0 { Err(last_error()) } else { Ok(()) }
}

/// One `SOL_SOCKET` integer option.
fn set_socket_option(fd: RawFd, option: libc::c_int, value: libc::c_int) -> io::Result<()> {
    set_option(fd, libc::SOL_SOCKET, option, value)
}

/// Lets one wake-up of a copy-mode socket's transmit path send up to
/// `frames` frames (`XDP_MAX_TX_SKB_BUDGET`, at most the TX ring's size);
/// without it the kernel sends 32 (`TX_BATCH_SIZE`) and answers `EAGAIN`.
/// Kernels before 6.17 say `ENOPROTOOPT`.
pub(super) fn set_tx_budget(fd: RawFd, frames: u32) -> io::Result<()> {
    let frames = libc::c_int::try_from(frames).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    set_option(fd, libc::SOL_XDP, XDP_MAX_TX_SKB_BUDGET, frames)
}

/// Asks the kernel to let the socket's thread drive the driver's receive
/// processing (NAPI) while it busy-polls: prefer busy polling, for
/// `timeout_us` per blocking call, `budget` packets per round.
pub(super) fn prefer_busy_poll(fd: RawFd, timeout_us: u32, budget: u16) -> io::Result<()> {
    set_socket_option(fd, SO_PREFER_BUSY_POLL, 1)?;
    set_socket_option(fd, SO_BUSY_POLL, libc::c_int::try_from(timeout_us).unwrap_or(libc::c_int::MAX))?;
    set_socket_option(fd, SO_BUSY_POLL_BUDGET, libc::c_int::from(budget))
}

/// A memory mapping (a ring of a socket, or the UMEM), removed on drop.
pub(super) struct Mapping {
    addr: NonNull<u8>,
    len: usize,
}

// SAFETY: the mapping is plain memory owned by whoever holds the `Mapping`;
// moving it to another thread moves that ownership.
unsafe impl Send for Mapping {}

impl Mapping {
    /// The address `offset` bytes into the mapping. `offset` must lie in it.
    pub(super) fn at(&self, offset: u64) -> NonNull<u8> {
        let offset = usize::try_from(offset).unwrap_or(usize::MAX);
        assert!(offset < self.len, "offset {offset} outside a {}-byte mapping", self.len);
        // SAFETY: `offset` is inside the mapping (checked), so the result
        // stays in the same allocation and is not null.
        unsafe { self.addr.add(offset) }
    }

    /// Where the mapping starts.
    pub(super) fn base(&self) -> NonNull<u8> {
        self.addr
    }

    /// Its length in bytes.
    pub(super) fn len(&self) -> usize {
        self.len
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `addr` and `len` are those of a mapping we made and own;
        // its users (the ring, the UMEM's frames) are gone once this runs.
        unsafe { libc::munmap(self.addr.as_ptr().cast(), self.len) };
    }
}

/// `mmap(2)` of `len` bytes with `flags`, of `fd` at `offset` (or anonymous).
fn map(len: usize, flags: libc::c_int, fd: RawFd, offset: libc::off_t) -> io::Result<Mapping> {
    // SAFETY: a fresh mapping at an address the kernel picks; for a socket's
    // ring the kernel checks the length against the ring. Nothing else owns
    // the new mapping.
    let addr = unsafe { libc::mmap(ptr::null_mut(), len, libc::PROT_READ | libc::PROT_WRITE, flags, fd, offset) };
    if addr == libc::MAP_FAILED {
        return Err(last_error());
    }
    let addr = NonNull::new(addr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
    Ok(Mapping { addr, len })
}

/// A new AF_XDP socket.
pub(super) fn xdp_socket() -> io::Result<OwnedFd> {
    socket(libc::AF_XDP, libc::SOCK_RAW)
}

/// Anonymous, zeroed memory for a UMEM of `len` bytes (page-aligned, as
/// registration requires).
pub(super) fn map_umem(len: usize) -> io::Result<Mapping> {
    map(len, libc::MAP_PRIVATE | libc::MAP_ANONYMOUS | libc::MAP_POPULATE, -1, 0)
}

/// Registers `area` as the UMEM of the AF_XDP socket `fd`, cut in
/// `frame_size`-byte frames with no headroom. With `tx_metadata_len` > 0,
/// that many bytes before a transmit descriptor's address hold its
/// `xsk_tx_metadata` (`XDP_UMEM_TX_METADATA_LEN`, Linux 6.11; older kernels
/// say `EINVAL`). With `unaligned`, descriptors may start anywhere in the
/// UMEM (`XDP_UMEM_UNALIGNED_CHUNK_FLAG`), and received ones carry their
/// data's offset in the address's top 16 bits.
pub(super) fn register_umem(
    fd: RawFd,
    area: &Mapping,
    frame_size: u32,
    tx_metadata_len: u32,
    unaligned: bool,
) -> io::Result<()> {
    let mut flags = if tx_metadata_len > 0 { libc::XDP_UMEM_TX_METADATA_LEN } else { 0 };
    if unaligned {
        flags |= libc::XDP_UMEM_UNALIGNED_CHUNK_FLAG;
    }
    let registration = libc::xdp_umem_reg {
        addr: area.base().as_ptr() as u64,
        len: area.len() as u64,
        chunk_size: frame_size,
        headroom: 0,
        flags,
        tx_metadata_len,
    };
    // Without metadata or flags, the layout every AF_XDP kernel knows.
    let len = if flags != 0 { mem::size_of::<libc::xdp_umem_reg>() } else { mem::size_of::<libc::xdp_umem_reg_v1>() };
    // SAFETY: setsockopt reads `len` bytes (at most the struct's size) from
    // `registration`, which lives for the call; the kernel pins the area,
    // which `area` keeps mapped for the socket's life.
    let result = unsafe {
        libc::setsockopt(fd, libc::SOL_XDP, libc::XDP_UMEM_REG, ptr::from_ref(&registration).cast(), len as u32)
    };
    if result < 0 { Err(last_error()) } else { Ok(()) }
}

/// Which of the socket's four rings.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum RingKind {
    Rx,
    Tx,
    Fill,
    Completion,
}

impl RingKind {
    /// The socket option that sizes the ring.
    fn size_option(self) -> libc::c_int {
        match self {
            RingKind::Rx => libc::XDP_RX_RING,
            RingKind::Tx => libc::XDP_TX_RING,
            RingKind::Fill => libc::XDP_UMEM_FILL_RING,
            RingKind::Completion => libc::XDP_UMEM_COMPLETION_RING,
        }
    }

    /// The `mmap` offset that selects the ring.
    fn page_offset(self) -> libc::off_t {
        match self {
            RingKind::Rx => libc::XDP_PGOFF_RX_RING,
            RingKind::Tx => libc::XDP_PGOFF_TX_RING,
            RingKind::Fill => libc::XDP_UMEM_PGOFF_FILL_RING as libc::off_t,
            RingKind::Completion => libc::XDP_UMEM_PGOFF_COMPLETION_RING as libc::off_t,
        }
    }
}

/// Gives ring `which` of the AF_XDP socket `fd` `entries` entries (a power
/// of two).
pub(super) fn size_ring(fd: RawFd, which: RingKind, entries: u32) -> io::Result<()> {
    let entries = libc::c_int::try_from(entries).map_err(|_| io::Error::from_raw_os_error(libc::EINVAL))?;
    set_option(fd, libc::SOL_XDP, which.size_option(), entries)
}

/// Where a ring's fields lie in its mapping (`struct xdp_ring_offset`).
#[derive(Clone, Copy, Debug)]
pub(super) struct RingOffsets {
    pub(super) producer: u64,
    pub(super) consumer: u64,
    pub(super) desc: u64,
    pub(super) flags: u64,
}

/// Where each ring's fields lie, as `XDP_MMAP_OFFSETS` says, in the order
/// RX, TX, fill, completion.
pub(super) fn ring_offsets(fd: RawFd) -> io::Result<[RingOffsets; 4]> {
    // SAFETY: `xdp_mmap_offsets` is plain integers; all-zero is valid.
    let mut offsets: libc::xdp_mmap_offsets = unsafe { mem::zeroed() };
    let mut len = mem::size_of::<libc::xdp_mmap_offsets>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `offsets`, which we
    // own and which outlives the call.
    let result = unsafe {
        libc::getsockopt(fd, libc::SOL_XDP, libc::XDP_MMAP_OFFSETS, ptr::from_mut(&mut offsets).cast(), &mut len)
    };
    if result < 0 {
        return Err(last_error());
    }
    if len as usize != mem::size_of::<libc::xdp_mmap_offsets>() {
        // A kernel from before the flags field (4.x): too old for what this
        // backend needs (need_wakeup, multi-buffer).
        return Err(io::Error::new(io::ErrorKind::Unsupported, "the kernel's XDP ring offsets lack the flags field"));
    }
    let of = |r: libc::xdp_ring_offset| RingOffsets {
        producer: r.producer,
        consumer: r.consumer,
        desc: r.desc,
        flags: r.flags,
    };
    Ok([of(offsets.rx), of(offsets.tx), of(offsets.fr), of(offsets.cr)])
}

/// Maps ring `which` of the AF_XDP socket `fd`: its indices and flags, and
/// `entries_len` bytes of entries from `desc_offset` on.
pub(super) fn map_ring(fd: RawFd, which: RingKind, desc_offset: u64, entries_len: usize) -> io::Result<Mapping> {
    let len = usize::try_from(desc_offset).unwrap_or(usize::MAX).saturating_add(entries_len);
    map(len, libc::MAP_SHARED | libc::MAP_POPULATE, fd, which.page_offset())
}

/// Binds the AF_XDP socket `fd` to queue `queue_id` of interface `ifindex`,
/// with `flags` (`XDP_COPY`, `XDP_ZEROCOPY`, `XDP_USE_NEED_WAKEUP`,
/// `XDP_USE_SG`).
pub(super) fn bind(fd: RawFd, ifindex: u32, queue_id: u32, flags: u16) -> io::Result<()> {
    let address = libc::sockaddr_xdp {
        sxdp_family: libc::AF_XDP as u16,
        sxdp_flags: flags,
        sxdp_ifindex: ifindex,
        sxdp_queue_id: queue_id,
        sxdp_shared_umem_fd: 0,
    };
    // SAFETY: bind reads `size_of::<sockaddr_xdp>()` bytes from `address`,
    // which lives for the call.
    let result = unsafe {
        libc::bind(fd, ptr::from_ref(&address).cast(), mem::size_of::<libc::sockaddr_xdp>() as libc::socklen_t)
    };
    if result < 0 { Err(last_error()) } else { Ok(()) }
}

/// The kernel's counters of the AF_XDP socket `fd` (`XDP_STATISTICS`).
pub(super) fn statistics(fd: RawFd) -> io::Result<libc::xdp_statistics> {
    // SAFETY: `xdp_statistics` is plain integers; all-zero is valid.
    let mut stats: libc::xdp_statistics = unsafe { mem::zeroed() };
    let mut len = mem::size_of::<libc::xdp_statistics>() as libc::socklen_t;
    // SAFETY: getsockopt writes at most `len` bytes into `stats`, which we
    // own and which outlives the call (an older kernel writes fewer; the
    // rest stays zero).
    let result = unsafe {
        libc::getsockopt(fd, libc::SOL_XDP, libc::XDP_STATISTICS, ptr::from_mut(&mut stats).cast(), &mut len)
    };
    if result < 0 { Err(last_error()) } else { Ok(stats) }
}

/// Waits up to `timeout_ms` (-1: forever) for `fd` to become readable;
/// also what wakes a zero-copy driver that asked for it on the fill ring.
/// An interrupted wait returns `Ok` (the caller's loop looks again).
pub(super) fn poll_readable(fd: RawFd, timeout_ms: i32) -> io::Result<()> {
    let mut pollfd = libc::pollfd { fd, events: libc::POLLIN, revents: 0 };
    // SAFETY: poll reads and writes the one `pollfd` we own for the call.
    let result = unsafe { libc::poll(&mut pollfd, 1, timeout_ms) };
    if result < 0 {
        let error = last_error();
        if error.raw_os_error() == Some(libc::EINTR) {
            return Ok(());
        }
        return Err(error);
    }
    Ok(())
}

/// Whether a BPF filesystem is mounted at `path`, from the calling thread's
/// mount table (a thread may have a mount namespace of its own).
pub(super) fn is_bpffs_mounted(path: &str) -> bool {
    let Ok(mounts) = std::fs::read_to_string("/proc/thread-self/mounts") else {
        return false;
    };
    let path = path.trim_end_matches('/');
    mounts.lines().any(|line| {
        let mut fields = line.split_ascii_whitespace();
        let (_source, target, kind) = (fields.next(), fields.next(), fields.next());
        target == Some(path) && kind == Some("bpf")
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_is_found_and_has_an_mtu() {
        let index = interface_index("lo").expect("every namespace has lo");
        assert!(index > 0);
    }

    #[test]
    fn a_missing_interface_is_enodev() {
        let error = interface_index("fwx-nothing").unwrap_err();
        assert_eq!(error.raw_os_error(), Some(libc::ENODEV));
    }

    #[test]
    fn the_namespace_of_a_thread_is_stable() {
        let (a, _) = current_netns().expect("procfs is mounted");
        let (b, _) = current_netns().expect("procfs is mounted");
        assert_eq!(a, b);
    }
}
