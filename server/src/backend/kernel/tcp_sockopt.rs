//! The kernel TCP socket options the server's kernel backend senses and
//! acts through for window control: `TCP_INFO` (what a connection's RTTs,
//! segment sizes and byte counts are), `TCP_WINDOW_CLAMP` (the largest
//! window the kernel advertises to the peer) and `SO_MAX_PACING_RATE` (the
//! fastest the kernel sends). See `man 7 tcp` and `man 7 socket`.
//!
//! They live beside the window control that uses them (packet I/O, in
//! `fairway-nic`, knows nothing of TCP socket options). Each call below is
//! one `getsockopt(2)` or `setsockopt(2)` on a descriptor the caller
//! borrows, the only `unsafe` it holds.

use std::io;
use std::mem::size_of;
use std::os::fd::{AsRawFd, BorrowedFd};

/// `SO_MAX_PACING_RATE` (asm-generic/socket.h; every architecture Fairway
/// builds for uses the generic value).
const SO_MAX_PACING_RATE: libc::c_int = 47;

/// A `SO_MAX_PACING_RATE` that means no limit (`~0UL`).
pub const UNLIMITED_PACING: u64 = u64::MAX;

/// The largest window TCP can advertise (`U16_MAX << TCP_MAX_WSCALE`):
/// setting `TCP_WINDOW_CLAMP` to this lifts a clamp (0 is refused on an
/// open connection), and the kernel's receive-buffer autotuning then moves
/// the clamp as it would have without one.
pub const MAX_WINDOW_CLAMP: u32 = 65_535 << 14;

/// The `TCP_INFO` fields window control reads. Times are microseconds, 0
/// while unmeasured; rates are bytes per second.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TcpInfo {
    /// Smoothed RTT of our sending (`tcpi_rtt`).
    pub rtt_us: u32,
    /// Windowed minimum RTT (`tcpi_min_rtt`); `u32::MAX` before any sample.
    pub min_rtt_us: u32,
    /// The receiver-side RTT estimate (`tcpi_rcv_rtt`), for a connection
    /// that mostly receives.
    pub rcv_rtt_us: u32,
    /// The segment size we send (`tcpi_snd_mss`).
    pub snd_mss: u32,
    /// The segment size the peer sends, as estimated (`tcpi_rcv_mss`).
    pub rcv_mss: u32,
    /// Bytes the peer acknowledged (`tcpi_bytes_acked`).
    pub bytes_acked: u64,
    /// Bytes received in order (`tcpi_bytes_received`).
    pub bytes_received: u64,
    /// The kernel's latest delivery-rate sample (`tcpi_delivery_rate`).
    pub delivery_rate: u64,
    /// The pacing rate in force (`tcpi_pacing_rate`).
    pub pacing_rate: u64,
    /// The `SO_MAX_PACING_RATE` in force (`tcpi_max_pacing_rate`):
    /// [`UNLIMITED_PACING`] when none.
    pub max_pacing_rate: u64,
    /// The window we last advertised (`tcpi_rcv_wnd`, Linux 6.2 on; 0 on
    /// older kernels).
    pub rcv_wnd: u32,
}

/// Reads `TCP_INFO` of the TCP socket `fd`. Fields a kernel too old to
/// report them read as 0.
///
/// # Errors
///
/// `fd` is not a TCP socket.
pub fn tcp_info(fd: BorrowedFd<'_>) -> io::Result<TcpInfo> {
    // SAFETY: `tcp_info` is plain old data, for which all zeros is a value.
    let mut raw: libc::tcp_info = unsafe { std::mem::zeroed() };
    let mut len = socklen::<libc::tcp_info>();
    // SAFETY: `raw` is valid for writes of `len` bytes and outlives the
    // call; the kernel writes at most `len` bytes and updates `len`.
    let rc = unsafe {
        libc::getsockopt(fd.as_raw_fd(), libc::IPPROTO_TCP, libc::TCP_INFO, (&raw mut raw).cast(), &raw mut len)
    };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(TcpInfo {
        rtt_us: raw.tcpi_rtt,
        min_rtt_us: raw.tcpi_min_rtt,
        rcv_rtt_us: raw.tcpi_rcv_rtt,
        snd_mss: raw.tcpi_snd_mss,
        rcv_mss: raw.tcpi_rcv_mss,
        bytes_acked: raw.tcpi_bytes_acked,
        bytes_received: raw.tcpi_bytes_received,
        delivery_rate: raw.tcpi_delivery_rate,
        pacing_rate: raw.tcpi_pacing_rate,
        max_pacing_rate: raw.tcpi_max_pacing_rate,
        rcv_wnd: raw.tcpi_rcv_wnd,
    })
}

/// The window clamp of `fd` (`TCP_WINDOW_CLAMP`), bytes.
///
/// # Errors
///
/// `fd` is not a TCP socket.
pub fn window_clamp(fd: BorrowedFd<'_>) -> io::Result<u32> {
    let v: libc::c_int = get(fd, libc::IPPROTO_TCP, libc::TCP_WINDOW_CLAMP)?;
    Ok(u32::try_from(v).unwrap_or(0))
}

/// Sets the window clamp of `fd` to `bytes` (the kernel raises it to half
/// its smallest receive buffer, about 2.3 kB; [`MAX_WINDOW_CLAMP`] lifts it).
///
/// # Errors
///
/// `fd` is not a TCP socket, or `bytes` is 0 on an open connection.
pub fn set_window_clamp(fd: BorrowedFd<'_>, bytes: u32) -> io::Result<()> {
    let v = libc::c_int::try_from(bytes).unwrap_or(libc::c_int::MAX);
    set(fd, libc::IPPROTO_TCP, libc::TCP_WINDOW_CLAMP, &v)
}

/// Sets `SO_MAX_PACING_RATE` of `fd` to `bytes_per_sec` ([`UNLIMITED_PACING`]
/// lifts it). TCP paces by itself once a limit is set (Linux 4.13 on), so
/// the limit holds without the `fq` qdisc.
///
/// # Errors
///
/// `fd` is not a socket.
pub fn set_max_pacing_rate(fd: BorrowedFd<'_>, bytes_per_sec: u64) -> io::Result<()> {
    // A 64-bit value: the kernel takes it whole (Linux 4.19 on) where a
    // 32-bit one would stop at 4 GB/s.
    set(fd, libc::SOL_SOCKET, SO_MAX_PACING_RATE, &bytes_per_sec)
}

fn socklen<T>() -> libc::socklen_t {
    libc::socklen_t::try_from(size_of::<T>()).unwrap_or(libc::socklen_t::MAX)
}

fn get(fd: BorrowedFd<'_>, level: libc::c_int, name: libc::c_int) -> io::Result<libc::c_int> {
    let mut v: libc::c_int = 0;
    let mut len = socklen::<libc::c_int>();
    // SAFETY: `v` is valid for writes of `len` bytes during the call.
    let rc = unsafe { libc::getsockopt(fd.as_raw_fd(), level, name, (&raw mut v).cast(), &raw mut len) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(v)
}

fn set<T>(fd: BorrowedFd<'_>, level: libc::c_int, name: libc::c_int, v: &T) -> io::Result<()> {
    // SAFETY: `v` is valid for reads of `size_of::<T>()` bytes during the call.
    let rc = unsafe { libc::setsockopt(fd.as_raw_fd(), level, name, (v as *const T).cast(), socklen::<T>()) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::net::{TcpListener, TcpStream};
    use std::os::fd::AsFd;

    use super::*;

    fn pair() -> (TcpStream, TcpStream) {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, server)
    }

    #[test]
    fn tcp_info_counts_bytes_both_ways() {
        let (mut client, mut server) = pair();
        client.write_all(&[7; 10_000]).unwrap();
        let mut buf = vec![0; 10_000];
        server.read_exact(&mut buf).unwrap();
        server.write_all(&[1; 3_000]).unwrap();
        client.read_exact(&mut buf[..3_000]).unwrap();
        let info = tcp_info(server.as_fd()).unwrap();
        assert_eq!(info.bytes_received, 10_000);
        // The client's ACK of the last bytes may still be on its way.
        assert!(info.bytes_acked <= 3_000, "{info:?}");
        assert!(info.snd_mss > 0 && info.rcv_mss > 0, "{info:?}");
        assert_eq!(info.max_pacing_rate, UNLIMITED_PACING);
    }

    #[test]
    fn window_clamp_and_pacing_rate_are_set_and_lifted() {
        let (_client, server) = pair();
        set_window_clamp(server.as_fd(), 100_000).unwrap();
        assert_eq!(window_clamp(server.as_fd()).unwrap(), 100_000);
        set_window_clamp(server.as_fd(), 1).unwrap();
        let floor = window_clamp(server.as_fd()).unwrap();
        assert!(floor > 1 && floor < 8192, "raised to the kernel's minimum: {floor}");
        set_window_clamp(server.as_fd(), MAX_WINDOW_CLAMP).unwrap();
        assert_eq!(window_clamp(server.as_fd()).unwrap(), MAX_WINDOW_CLAMP);

        set_max_pacing_rate(server.as_fd(), 2_500_000).unwrap();
        assert_eq!(tcp_info(server.as_fd()).unwrap().max_pacing_rate, 2_500_000);
        set_max_pacing_rate(server.as_fd(), 5_000_000_000).unwrap();
        assert_eq!(tcp_info(server.as_fd()).unwrap().max_pacing_rate, 5_000_000_000, "64 bits");
        set_max_pacing_rate(server.as_fd(), UNLIMITED_PACING).unwrap();
        assert_eq!(tcp_info(server.as_fd()).unwrap().max_pacing_rate, UNLIMITED_PACING);
    }
}
