//! [`PacketPort`]: a [`Device`] on a raw `AF_PACKET` socket pair bound to
//! one interface, the link emulator's sockets: it receives every frame
//! arriving on the interface whatever its destination MAC (promiscuous, not
//! the frames sent out of it) and sends frames out of it as they are.
//!
//! It is for peers that speak their own TCP from a network namespace of the
//! testbed, beside (not through) that namespace's kernel: an attacker, a
//! scripted peer. The local kernel still sees the same frames; a peer that
//! uses an address the kernel does not own is left alone by it. Partial
//! checksums left by a local sender are completed; super-frames (GSO) are
//! dropped and counted, since no peer of this kind asks for them.

use std::io;
use std::os::fd::{AsRawFd, RawFd};

use crate::Device;
use crate::linkem::packet_socket::{Interface, PacketSocket, RxBatch, TxBatch, TxOutcome};

/// Frames per receive or send system call.
const BATCH: usize = 32;

/// Kernel buffer of each socket.
const SOCKET_BUFFER: usize = 4 << 20;

/// A raw port on one interface.
pub struct PacketPort {
    rx: PacketSocket,
    tx: PacketSocket,
    rx_batch: RxBatch,
    /// Received frames not handed over yet: `(next, count)` of `rx_batch`.
    pending: (usize, usize),
    tx_batch: TxBatch,
    /// One buffer of `max_frame_len` per frame of a send batch, and the
    /// lengths of the frames filled in so far.
    tx_buffers: Vec<Vec<u8>>,
    tx_lens: Vec<usize>,
    max_frame_len: usize,
    /// Frames dropped: truncated, super-frames, refused by the kernel.
    pub dropped: u64,
}

impl PacketPort {
    /// Opens a port on interface `name` of this thread's network namespace.
    ///
    /// # Errors
    ///
    /// No such interface, or the sockets could not be opened (`EPERM`
    /// without `CAP_NET_RAW`).
    pub fn open(name: &str) -> io::Result<PacketPort> {
        let probe = PacketSocket::open()?;
        let interface = Interface::find(name, &probe)?
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no interface {name}")))?;
        Ok(PacketPort {
            rx: PacketSocket::receiver(interface.index, SOCKET_BUFFER)?,
            tx: PacketSocket::sender(interface.index, SOCKET_BUFFER)?,
            rx_batch: RxBatch::new(BATCH),
            pending: (0, 0),
            tx_batch: TxBatch::new(BATCH),
            tx_buffers: vec![vec![0; interface.mtu + 14]; BATCH],
            tx_lens: Vec::with_capacity(BATCH),
            max_frame_len: interface.mtu + 14,
            dropped: 0,
        })
    }

    /// The descriptor that becomes readable when a frame arrives (for
    /// `poll`).
    pub fn receive_fd(&self) -> RawFd {
        self.rx.as_raw_fd()
    }

    fn flush(&mut self) {
        let mut refused = 0;
        let frames = self.tx_buffers.iter().zip(&self.tx_lens).map(|(buf, &len)| &buf[..len]);
        self.tx_batch.send(&self.tx, frames, |outcome| refused += u64::from(outcome != TxOutcome::Sent));
        self.dropped += refused;
        self.tx_lens.clear();
    }
}

impl Device for PacketPort {
    fn max_frame_len(&self) -> usize {
        self.max_frame_len
    }

    fn receive<F: FnMut(&[u8])>(&mut self, budget: usize, mut on_frame: F) -> usize {
        let mut handed = 0;
        while handed < budget {
            if self.pending.0 == self.pending.1 {
                match self.rx_batch.receive(&self.rx) {
                    Ok(0) | Err(_) => break,
                    Ok(n) => self.pending = (0, n),
                }
            }
            let i = self.pending.0;
            self.pending.0 += 1;
            let frame = self.rx_batch.frame(i);
            if frame.truncated || frame.vnet.gso().is_some() {
                self.dropped += 1;
                continue;
            }
            let bytes = self.rx_batch.frame_mut(i);
            if let Some((start, offset)) = frame.vnet.partial_checksum()
                && !fairway_stack::finish_checksum(bytes, start, offset)
            {
                self.dropped += 1;
                continue;
            }
            on_frame(bytes);
            handed += 1;
        }
        handed
    }

    fn transmit<F: FnMut(&mut [u8]) -> Option<usize>>(&mut self, budget: usize, mut fill: F) -> usize {
        let mut sent = 0;
        while sent < budget {
            let buf = &mut self.tx_buffers[self.tx_lens.len()];
            let Some(len) = fill(buf) else { break };
            let len = len.min(buf.len());
            if len >= 14 {
                self.tx_lens.push(len);
                sent += 1;
            } else {
                self.dropped += 1;
            }
            if self.tx_lens.len() == self.tx_buffers.len() {
                self.flush();
            }
        }
        self.flush();
        sent
    }
}
