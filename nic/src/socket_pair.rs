//! Two devices joined by a Unix datagram socket pair: one datagram per
//! frame, real file descriptors to sleep on, no privileges needed.
//!
//! For tests and demos of the runtime in wall-clock time within one process
//! (the simulated network is for virtual time). Like a wire without a
//! queue of its own: when the socket buffer is full a frame is lost, and
//! counted.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use crate::{Device, Wait};

/// The largest frame carried: Ethernet at a 1500-byte IP MTU.
const MAX_FRAME: usize = 1514;

/// One end of the pair.
#[derive(Debug)]
pub struct SocketPairEnd {
    socket: UnixDatagram,
    buf: Box<[u8]>,
    lost: u64,
}

/// Makes the two ends.
///
/// # Errors
///
/// When the sockets cannot be created (out of descriptors).
pub fn socket_pair() -> io::Result<(SocketPairEnd, SocketPairEnd)> {
    let (a, b) = UnixDatagram::pair()?;
    let end = |socket: UnixDatagram| -> io::Result<SocketPairEnd> {
        socket.set_nonblocking(true)?;
        Ok(SocketPairEnd { socket, buf: vec![0; MAX_FRAME].into_boxed_slice(), lost: 0 })
    };
    Ok((end(a)?, end(b)?))
}

impl SocketPairEnd {
    /// Frames lost because the socket buffer was full.
    #[must_use]
    pub fn lost(&self) -> u64 {
        self.lost
    }
}

impl Device for SocketPairEnd {
    fn max_frame_len(&self) -> usize {
        MAX_FRAME
    }

    fn receive<F: FnMut(&[u8])>(&mut self, budget: usize, mut on_frame: F) -> usize {
        let mut handed = 0;
        while handed < budget {
            match self.socket.recv(&mut self.buf) {
                Ok(len) => on_frame(&self.buf[..len]),
                Err(_) => break, // WouldBlock: nothing more
            }
            handed += 1;
        }
        handed
    }

    fn transmit<F: FnMut(&mut [u8]) -> Option<usize>>(&mut self, budget: usize, mut fill: F) -> usize {
        let mut sent = 0;
        while sent < budget {
            let Some(len) = fill(&mut self.buf) else { break };
            debug_assert!(len <= self.buf.len(), "fill returned {len} bytes for a {MAX_FRAME}-byte buffer");
            let len = len.min(self.buf.len());
            if len < 14 || self.socket.send(&self.buf[..len]).is_err() {
                self.lost += 1;
            }
            sent += 1;
        }
        sent
    }
}

impl Wait for SocketPairEnd {
    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let mut fd = libc::pollfd { fd: self.socket.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        let ts = timeout.map(|t| libc::timespec {
            tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
            tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
        });
        let ts_ptr = ts.as_ref().map_or(core::ptr::null(), |t| t as *const libc::timespec);
        // SAFETY: one live pollfd and a timespec that outlives the call (or
        // null); no signal mask.
        let r = unsafe { libc::ppoll(&mut fd, 1, ts_ptr, core::ptr::null()) };
        if r < 0 {
            let err = io::Error::last_os_error();
            if err.kind() != io::ErrorKind::Interrupted {
                return Err(err);
            }
        }
        Ok(())
    }

    fn wake_sources<'a>(&'a self, sources: &mut Vec<std::os::fd::BorrowedFd<'a>>) {
        sources.push(std::os::fd::AsFd::as_fd(&self.socket));
    }
}

impl AsRawFd for SocketPairEnd {
    fn as_raw_fd(&self) -> RawFd {
        self.socket.as_raw_fd()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_cross_and_wait_wakes() {
        let (mut a, mut b) = socket_pair().unwrap();
        let frame: Vec<u8> = (0..100u8).collect();
        assert_eq!(
            a.transmit(2, |buf| Some({
                buf[..100].copy_from_slice(&frame);
                100
            })),
            2
        );
        b.wait(Some(Duration::from_secs(5))).unwrap();
        let mut got = Vec::new();
        assert_eq!(b.receive(8, |f| got.push(f.to_vec())), 2);
        assert_eq!(got, vec![frame.clone(), frame]);
        let started = std::time::Instant::now();
        b.wait(Some(Duration::from_millis(20))).unwrap();
        assert!(started.elapsed() >= Duration::from_millis(15), "nothing to read: waits out the timeout");
        assert_eq!(a.transmit(1, |_| Some(3)), 1);
        assert_eq!(a.lost(), 1, "a runt is counted, not sent");
    }
}
