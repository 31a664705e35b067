//! [`PacketSocket`]: raw `AF_PACKET` sockets bound to one interface, with
//! batched receive ([`RxBatch`], `recvmmsg`) and send ([`TxBatch`],
//! `sendmmsg`).
//!
//! Each direction of the emulator has a receiver on its ingress interface
//! and a sender on its egress interface:
//!
//! - The **receiver** (`ETH_P_ALL`) sees every frame arriving on its
//!   interface, in promiscuous mode (a wire forwards frames whatever their
//!   destination MAC; veth needs no promiscuity, real NICs do), but not the
//!   frames sent out of it (`PACKET_IGNORE_OUTGOING`), so the emulator never
//!   hears its own transmissions or the local kernel's. It asks for a
//!   `virtio_net_hdr` in front of each frame (`PACKET_VNET_HDR`, see
//!   [`offload`](super::offload)) and for the kernel's receive time stamp
//!   (`SO_TIMESTAMPNS`), so that the time a frame waited in the socket does
//!   not count as delay. It is bound with its protocol only once every
//!   option is set, so it never sees a frame of another interface.
//! - The **sender** has protocol 0: it receives nothing, and its frames
//!   leave by the interface's normal transmit path.

use std::ffi::{CString, c_int, c_void};
use std::io;
use std::mem::{size_of, zeroed};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr;

use super::offload::{VNET_HDR_LEN, VnetHeader};

/// Receive regions are this long: the largest GSO super-frame Linux builds
/// without BIG TCP (64 KiB), with headers and a VLAN tag to spare. Larger
/// frames arrive truncated and are dropped.
pub(crate) const MAX_RX_FRAME: usize = 65_536 + 256;

/// Room for the control messages of one received frame (one
/// `SCM_TIMESTAMPNS` needs 32 bytes).
const CONTROL_LEN: usize = 64;

/// A raw packet socket bound to one interface.
#[derive(Debug)]
pub(crate) struct PacketSocket {
    fd: OwnedFd,
}

impl PacketSocket {
    /// A receiver of every frame arriving on interface `ifindex` (see the
    /// module documentation), with a kernel buffer of `rcvbuf` bytes.
    ///
    /// # Errors
    ///
    /// `EPERM` without `CAP_NET_RAW`; anything else the kernel refused.
    pub(crate) fn receiver(ifindex: u32, rcvbuf: usize) -> io::Result<PacketSocket> {
        let socket = PacketSocket::open()?;
        socket.set(libc::SOL_PACKET, libc::PACKET_IGNORE_OUTGOING, 1)?;
        socket.set(libc::SOL_PACKET, libc::PACKET_VNET_HDR, 1)?;
        socket.set(libc::SOL_SOCKET, libc::SO_TIMESTAMPNS, 1)?;
        let rcvbuf = c_int::try_from(rcvbuf).unwrap_or(c_int::MAX);
        // FORCE (root) goes past net.core.rmem_max; fall back on the capped
        // option if not allowed.
        socket
            .set(libc::SOL_SOCKET, libc::SO_RCVBUFFORCE, rcvbuf)
            .or_else(|_| socket.set(libc::SOL_SOCKET, libc::SO_RCVBUF, rcvbuf))?;
        // SAFETY: `packet_mreq` is plain data; all-zero is a valid value.
        let mut mreq: libc::packet_mreq = unsafe { zeroed() };
        mreq.mr_ifindex = ifindex as c_int;
        mreq.mr_type = libc::PACKET_MR_PROMISC as u16;
        // Dropped with the socket, so promiscuity never outlives us.
        socket.set_raw(libc::SOL_PACKET, libc::PACKET_ADD_MEMBERSHIP, &mreq)?;
        socket.bind(ifindex, libc::ETH_P_ALL as u16)?;
        Ok(socket)
    }

    /// A sender on interface `ifindex`, with a kernel buffer of `sndbuf`
    /// bytes.
    ///
    /// # Errors
    ///
    /// `EPERM` without `CAP_NET_RAW`; anything else the kernel refused.
    pub(crate) fn sender(ifindex: u32, sndbuf: usize) -> io::Result<PacketSocket> {
        let socket = PacketSocket::open()?;
        let sndbuf = c_int::try_from(sndbuf).unwrap_or(c_int::MAX);
        socket
            .set(libc::SOL_SOCKET, libc::SO_SNDBUFFORCE, sndbuf)
            .or_else(|_| socket.set(libc::SOL_SOCKET, libc::SO_SNDBUF, sndbuf))?;
        socket.bind(ifindex, 0)?;
        Ok(socket)
    }

    /// An unbound socket of protocol 0: it receives nothing until bound.
    /// Good for the interface ioctls, and the first check of permissions.
    pub(crate) fn open() -> io::Result<PacketSocket> {
        // SAFETY: plain system call; the result is checked before use.
        let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC, 0) };
        if fd < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: `fd` was just returned by socket(2) and nothing else owns it.
        Ok(PacketSocket { fd: unsafe { OwnedFd::from_raw_fd(fd) } })
    }

    fn bind(&self, ifindex: u32, protocol: u16) -> io::Result<()> {
        // SAFETY: `sockaddr_ll` is plain data; all-zero is a valid value.
        let mut addr: libc::sockaddr_ll = unsafe { zeroed() };
        addr.sll_family = libc::AF_PACKET as u16;
        addr.sll_protocol = protocol.to_be();
        addr.sll_ifindex = ifindex as c_int;
        // SAFETY: `addr` is a valid `sockaddr_ll` and the length says so.
        let r = unsafe {
            libc::bind(
                self.fd.as_raw_fd(),
                ptr::from_ref(&addr).cast::<libc::sockaddr>(),
                size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
    }

    fn set(&self, level: c_int, name: c_int, value: c_int) -> io::Result<()> {
        self.set_raw(level, name, &value)
    }

    fn set_raw<T>(&self, level: c_int, name: c_int, value: &T) -> io::Result<()> {
        // SAFETY: `value` points to a live `T` of the length passed.
        let r = unsafe {
            libc::setsockopt(
                self.fd.as_raw_fd(),
                level,
                name,
                ptr::from_ref(value).cast::<c_void>(),
                size_of::<T>() as libc::socklen_t,
            )
        };
        if r < 0 { Err(io::Error::last_os_error()) } else { Ok(()) }
    }

    /// Frames the kernel dropped because this socket's buffer was full,
    /// since the previous call (`PACKET_STATISTICS` resets on read).
    pub(crate) fn take_kernel_drops(&self) -> io::Result<u64> {
        // SAFETY: plain data; all-zero is a valid value.
        let mut stats: libc::tpacket_stats = unsafe { zeroed() };
        let mut len = size_of::<libc::tpacket_stats>() as libc::socklen_t;
        // SAFETY: `stats` and `len` are live and `len` is `stats`' size.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                ptr::from_mut(&mut stats).cast::<c_void>(),
                &mut len,
            )
        };
        if r < 0 { Err(io::Error::last_os_error()) } else { Ok(u64::from(stats.tp_drops)) }
    }
}

impl AsRawFd for PacketSocket {
    fn as_raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }
}

/// One received frame's description; its bytes are in
/// [`RxBatch::frame_mut`].
#[derive(Clone, Copy, Debug)]
pub(crate) struct RxFrame {
    /// Bytes of the frame received (at most [`MAX_RX_FRAME`]).
    pub(crate) len: usize,
    /// The frame was longer than [`MAX_RX_FRAME`] and was cut.
    pub(crate) truncated: bool,
    pub(crate) vnet: VnetHeader,
    /// The kernel's receive time stamp, `CLOCK_REALTIME` nanoseconds.
    pub(crate) stamp_ns: Option<i128>,
}

/// The buffers of one `recvmmsg`: per frame, a `virtio_net_hdr`, a region of
/// [`MAX_RX_FRAME`] bytes and room for control messages. Allocated once.
/// Holds raw pointers between calls, so it lives on its worker's thread.
pub(crate) struct RxBatch {
    regions: Box<[u8]>,
    vnet: Vec<[u8; VNET_HDR_LEN]>,
    control: Vec<[u64; CONTROL_LEN / 8]>,
    iovs: Vec<[libc::iovec; 2]>,
    hdrs: Vec<libc::mmsghdr>,
    frames: Vec<RxFrame>,
}

impl RxBatch {
    pub(crate) fn new(capacity: usize) -> RxBatch {
        let empty_iov = libc::iovec { iov_base: ptr::null_mut(), iov_len: 0 };
        RxBatch {
            // Untouched pages of a large zeroed allocation are never faulted
            // in, so a batch of small frames costs a page or two per region.
            regions: vec![0; capacity * MAX_RX_FRAME].into_boxed_slice(),
            vnet: vec![[0; VNET_HDR_LEN]; capacity],
            control: vec![[0; CONTROL_LEN / 8]; capacity],
            iovs: vec![[empty_iov; 2]; capacity],
            // SAFETY: `mmsghdr` is plain data (null pointers, zero lengths).
            hdrs: (0..capacity).map(|_| unsafe { zeroed() }).collect(),
            frames: Vec::with_capacity(capacity),
        }
    }

    /// Receives as many frames as are waiting, up to the batch's capacity,
    /// without blocking. Returns how many (0 when none was waiting).
    ///
    /// # Errors
    ///
    /// What `recvmmsg` reported for the first frame, `EAGAIN` excepted.
    pub(crate) fn receive(&mut self, socket: &PacketSocket) -> io::Result<usize> {
        let capacity = self.hdrs.len();
        let regions = self.regions.as_mut_ptr();
        for i in 0..capacity {
            self.iovs[i] = [
                libc::iovec { iov_base: self.vnet[i].as_mut_ptr().cast(), iov_len: VNET_HDR_LEN },
                // SAFETY: region `i` lies inside `regions` (capacity regions
                // of MAX_RX_FRAME bytes).
                libc::iovec { iov_base: unsafe { regions.add(i * MAX_RX_FRAME) }.cast(), iov_len: MAX_RX_FRAME },
            ];
            let hdr = &mut self.hdrs[i].msg_hdr;
            hdr.msg_name = ptr::null_mut();
            hdr.msg_namelen = 0;
            hdr.msg_iov = self.iovs[i].as_mut_ptr();
            hdr.msg_iovlen = 2;
            hdr.msg_control = self.control[i].as_mut_ptr().cast();
            hdr.msg_controllen = CONTROL_LEN as _;
            hdr.msg_flags = 0;
            self.hdrs[i].msg_len = 0;
        }
        // SAFETY: every header points at buffers owned by `self`, alive and
        // not otherwise borrowed for the duration of the call; the lengths
        // are those of the buffers.
        let n = unsafe {
            libc::recvmmsg(
                socket.as_raw_fd(),
                self.hdrs.as_mut_ptr(),
                capacity as _,
                libc::MSG_DONTWAIT,
                ptr::null_mut(),
            )
        };
        if n < 0 {
            let err = io::Error::last_os_error();
            return if err.kind() == io::ErrorKind::WouldBlock { Ok(0) } else { Err(err) };
        }
        let n = n as usize;
        self.frames.clear();
        for i in 0..n {
            let hdr = &self.hdrs[i];
            self.frames.push(RxFrame {
                len: (hdr.msg_len as usize).saturating_sub(VNET_HDR_LEN).min(MAX_RX_FRAME),
                truncated: hdr.msg_hdr.msg_flags & libc::MSG_TRUNC != 0,
                vnet: VnetHeader::parse(&self.vnet[i]),
                stamp_ns: timestamp(&hdr.msg_hdr),
            });
        }
        Ok(n)
    }

    /// Frame `i` of the last [`receive`](RxBatch::receive).
    pub(crate) fn frame(&self, i: usize) -> RxFrame {
        self.frames[i]
    }

    /// The bytes of frame `i` of the last [`receive`](RxBatch::receive).
    pub(crate) fn frame_mut(&mut self, i: usize) -> &mut [u8] {
        let len = self.frames[i].len;
        &mut self.regions[i * MAX_RX_FRAME..i * MAX_RX_FRAME + len]
    }
}

/// The `SCM_TIMESTAMPNS` of a received message, in nanoseconds.
fn timestamp(hdr: &libc::msghdr) -> Option<i128> {
    // SAFETY: `hdr` was filled by recvmmsg: its control buffer is alive and
    // `msg_controllen` says how much of it holds control messages; the
    // CMSG_* macros stay within that.
    unsafe {
        let mut cmsg = libc::CMSG_FIRSTHDR(hdr);
        while !cmsg.is_null() {
            if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS {
                let ts = ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::timespec>());
                let ns = i128::from(ts.tv_sec) * 1_000_000_000 + i128::from(ts.tv_nsec);
                return (ns > 0).then_some(ns);
            }
            cmsg = libc::CMSG_NXTHDR(hdr, cmsg);
        }
    }
    None
}

/// What became of one frame handed to [`TxBatch::send`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TxOutcome {
    Sent,
    /// Refused with this `errno`.
    Failed(i32),
}

/// The headers of one `sendmmsg`. Allocated once; holds raw pointers
/// between calls, so it lives on its worker's thread.
pub(crate) struct TxBatch {
    iovs: Vec<libc::iovec>,
    hdrs: Vec<libc::mmsghdr>,
}

impl TxBatch {
    pub(crate) fn new(capacity: usize) -> TxBatch {
        TxBatch {
            iovs: vec![libc::iovec { iov_base: ptr::null_mut(), iov_len: 0 }; capacity],
            // SAFETY: `mmsghdr` is plain data (null pointers, zero lengths).
            hdrs: (0..capacity).map(|_| unsafe { zeroed() }).collect(),
        }
    }

    pub(crate) fn capacity(&self) -> usize {
        self.hdrs.len()
    }

    /// Sends `frames` (at most [`capacity`](TxBatch::capacity)) in order,
    /// with as few `sendmmsg` calls as the kernel allows, and reports each
    /// frame's outcome to `outcome` in order. A refused frame is skipped, not
    /// retried: a wire does not retry either.
    pub(crate) fn send<'a>(
        &mut self,
        socket: &PacketSocket,
        frames: impl IntoIterator<Item = &'a [u8]>,
        mut outcome: impl FnMut(TxOutcome),
    ) {
        let mut n = 0;
        for frame in frames {
            assert!(n < self.hdrs.len(), "more frames than the batch holds");
            // The kernel only reads through this pointer.
            self.iovs[n] = libc::iovec { iov_base: frame.as_ptr().cast_mut().cast(), iov_len: frame.len() };
            n += 1;
        }
        for i in 0..n {
            let hdr = &mut self.hdrs[i].msg_hdr;
            hdr.msg_name = ptr::null_mut();
            hdr.msg_namelen = 0;
            hdr.msg_iov = &mut self.iovs[i];
            hdr.msg_iovlen = 1;
            hdr.msg_control = ptr::null_mut();
            hdr.msg_controllen = 0;
            hdr.msg_flags = 0;
        }
        let mut done = 0;
        while done < n {
            // SAFETY: headers `done..n` point at iovecs of `self`, which
            // point at the frames borrowed for this call; the kernel only
            // reads them.
            let r = unsafe {
                libc::sendmmsg(socket.as_raw_fd(), self.hdrs[done..].as_mut_ptr(), (n - done) as _, libc::MSG_DONTWAIT)
            };
            if r < 0 {
                // The first remaining frame was refused: skip it.
                let errno = io::Error::last_os_error().raw_os_error().unwrap_or(0);
                outcome(TxOutcome::Failed(errno));
                done += 1;
            } else {
                for _ in 0..r {
                    outcome(TxOutcome::Sent);
                }
                done += r as usize;
            }
        }
    }
}

/// An interface of this network namespace, as found by its name.
#[derive(Clone, Debug)]
pub(crate) struct Interface {
    pub(crate) name: String,
    pub(crate) index: u32,
    pub(crate) up: bool,
    pub(crate) mtu: usize,
}

impl Interface {
    /// Whether an interface with this index still exists.
    pub(crate) fn exists(index: u32) -> bool {
        let mut name = [0 as libc::c_char; libc::IF_NAMESIZE];
        // SAFETY: `name` has the IF_NAMESIZE bytes if_indextoname writes.
        !unsafe { libc::if_indextoname(index, name.as_mut_ptr()) }.is_null()
    }

    /// Looks `name` up; `Ok(None)` if there is no such interface. `socket`
    /// is any socket, for the ioctls.
    pub(crate) fn find(name: &str, socket: &PacketSocket) -> io::Result<Option<Interface>> {
        let Ok(c_name) = CString::new(name) else { return Ok(None) };
        if name.is_empty() || name.len() >= libc::IFNAMSIZ {
            return Ok(None);
        }
        // SAFETY: `c_name` is a NUL-terminated string.
        let index = unsafe { libc::if_nametoindex(c_name.as_ptr()) };
        if index == 0 {
            return Ok(None);
        }
        // SAFETY: plain data; all-zero is a valid value.
        let mut req: libc::ifreq = unsafe { zeroed() };
        for (dst, &src) in req.ifr_name.iter_mut().zip(c_name.as_bytes()) {
            *dst = src as libc::c_char;
        }
        // SAFETY: `req` is a live `ifreq` naming the interface, which is what
        // SIOCGIFFLAGS reads and writes.
        if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFFLAGS, &mut req) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: SIOCGIFFLAGS filled the `ifru_flags` member.
        let flags = unsafe { req.ifr_ifru.ifru_flags };
        // SAFETY: as above, for SIOCGIFMTU.
        if unsafe { libc::ioctl(socket.as_raw_fd(), libc::SIOCGIFMTU, &mut req) } < 0 {
            return Err(io::Error::last_os_error());
        }
        // SAFETY: SIOCGIFMTU filled the `ifru_mtu` member.
        let mtu = unsafe { req.ifr_ifru.ifru_mtu };
        Ok(Some(Interface {
            name: name.to_owned(),
            index,
            up: flags & libc::IFF_UP as libc::c_short != 0,
            mtu: usize::try_from(mtu).unwrap_or(0),
        }))
    }
}
