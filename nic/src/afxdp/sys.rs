//! The raw system calls this backend makes beside xsk-rs: interface
//! lookups, the AF_XDP probe, wakeups and network namespaces. Every
//! `unsafe` block of the backend outside the libxdp calls is here.

use std::ffi::CString;
use std::fs::File;
use std::io;
use std::mem;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::fs::MetadataExt;
use std::ptr::{self, NonNull};

/// `ETHTOOL_GCHANNELS` from `linux/ethtool.h` (libc does not have it).
const ETHTOOL_GCHANNELS: u32 = 0x3c;

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

/// A shared memory mapping of a socket's ring, removed on drop.
pub(super) struct Mapping {
    addr: NonNull<u8>,
    len: usize,
}

impl Mapping {
    /// The address `offset` bytes into the mapping. `offset` must lie in it.
    pub(super) fn at(&self, offset: u64) -> NonNull<u8> {
        let offset = usize::try_from(offset).unwrap_or(usize::MAX);
        assert!(offset < self.len, "offset {offset} outside a {}-byte mapping", self.len);
        // SAFETY: `offset` is inside the mapping (checked), so the result
        // stays in the same allocation and is not null.
        unsafe { self.addr.add(offset) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: `addr` and `len` are those of a mapping we made and own;
        // its users (the ring) are gone once this runs.
        unsafe { libc::munmap(self.addr.as_ptr().cast(), self.len) };
    }
}

/// Where a ring's fields lie in its mapping (`struct xdp_ring_offset`).
#[derive(Clone, Copy, Debug)]
pub(super) struct RingOffsets {
    pub(super) producer: u64,
    pub(super) consumer: u64,
    pub(super) desc: u64,
    pub(super) flags: u64,
}

/// Maps the TX ring of the bound AF_XDP socket `fd` (`size` descriptors of
/// `desc_size` bytes), as `XDP_MMAP_OFFSETS` lays it out.
pub(super) fn map_tx_ring(fd: RawFd, size: u32, desc_size: usize) -> io::Result<(Mapping, RingOffsets)> {
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
        // A kernel from before the flags field (4.x): not one AF_XDP
        // multi-buffer runs on anyway.
        return Err(io::Error::new(io::ErrorKind::Unsupported, "the kernel's XDP ring offsets lack the flags field"));
    }
    let tx = offsets.tx;
    let map_len = usize::try_from(tx.desc).unwrap_or(usize::MAX).saturating_add(size as usize * desc_size);
    // SAFETY: a fresh shared mapping of the socket's TX ring at the offset
    // the AF_XDP ABI gives it; the kernel checks the length against the
    // ring. Nothing else owns the new mapping.
    let addr = unsafe {
        libc::mmap(
            ptr::null_mut(),
            map_len,
            libc::PROT_READ | libc::PROT_WRITE,
            libc::MAP_SHARED | libc::MAP_POPULATE,
            fd,
            libc::XDP_PGOFF_TX_RING,
        )
    };
    if addr == libc::MAP_FAILED {
        return Err(last_error());
    }
    let addr = NonNull::new(addr.cast::<u8>()).ok_or_else(|| io::Error::other("mmap returned null"))?;
    let offsets = RingOffsets { producer: tx.producer, consumer: tx.consumer, desc: tx.desc, flags: tx.flags };
    Ok((Mapping { addr, len: map_len }, offsets))
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
