//! [`Pcap`]: a [`Device`] that records every frame of the device it wraps to
//! a pcap file.
//!
//! This module owns the capture: the pcap format, the buffered writer, and
//! what happens when writing fails. The wrapper is itself a `Device` (and a
//! [`Wait`] when the inner device is one), so a runtime drives
//! `Pcap<Tap>` or `Pcap<Port>` exactly as it drives the bare device.
//!
//! # Format
//!
//! Classic pcap, as `tcpdump -w` writes it and as tcpdump, Wireshark and
//! every libpcap reader read it: a 24-byte file header (little-endian,
//! version 2.4, `LINKTYPE_ETHERNET`, snapshot length = the device's
//! `max_frame_len`) and a 16-byte header before each frame. Timestamps are
//! the wall clock (`SystemTime`) when the wrapper saw the frame, to the
//! nanosecond (the `0xa1b23c4d` magic). The format is small and frozen, so
//! it is written here by hand: a crate such as `pcap-file` would bring a
//! dependency, its own error type and its own buffering for what is a
//! dozen lines of header layout.
//!
//! # What is recorded
//!
//! Received frames as they are handed to the caller, transmitted frames as
//! `fill` wrote them, in the order the wrapper saw them. A transmitted frame
//! is recorded when the device accepts it, so a frame the device loses
//! later (a full queue, a refused write) is in the capture, as it would be
//! in tcpdump on the sending host. Classic pcap has no direction field:
//! tell received from transmitted frames by their addresses.
//!
//! # Cost and failure
//!
//! Records go through a 64 KiB [`BufWriter`]: one clock read and two copies
//! into its buffer per frame, no allocation. [`Pcap::flush`] pushes the
//! buffer out; so do [`Pcap::into_inner`] and dropping the wrapper. A write
//! error never takes the data path down: the first one is counted and kept
//! ([`Pcap::error`]), the capture stops (the bytes still buffered are
//! discarded, the writer is not touched again), and frames keep flowing
//! through the device untouched.

use std::fs::File;
use std::io::{self, BufWriter, Write};
use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use crate::{Device, Wait};

#[cfg(test)]
mod tests;

/// The magic number of a classic pcap file with nanosecond timestamps.
pub const PCAP_MAGIC_NANOS: u32 = 0xa1b2_3c4d;

/// `LINKTYPE_ETHERNET`: frames start at the destination MAC address.
pub const LINKTYPE_ETHERNET: u32 = 1;

/// The largest snapshot length readers accept without complaint
/// (Wireshark's limit); longer frames are recorded truncated to it.
const MAX_SNAPLEN: usize = 262_144;

/// Bytes of the buffer between the data path and the writer.
const BUFFER_CAPACITY: usize = 64 * 1024;

/// Counters of a [`Pcap`] capture.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PcapStats {
    /// Received frames recorded.
    pub frames_received: u64,
    /// Transmitted frames recorded.
    pub frames_transmitted: u64,
    /// Frame bytes recorded (record headers and the file header excluded).
    pub bytes: u64,
    /// Frames that went through the device but not into the capture,
    /// because it had stopped (or the frame was the one being written when
    /// it failed).
    pub frames_missed: u64,
    /// Write (or flush) errors: the first one stops the capture, so this is
    /// 0 or 1.
    pub write_errors: u64,
}

/// A device whose frames, both ways, are also written to a pcap file.
///
/// See the [module documentation](self) for the format and the failure
/// model. `W` is where the file goes: a [`File`] by default
/// ([`Pcap::create`]), or any writer ([`Pcap::new`]).
pub struct Pcap<D, W: Write = File> {
    device: D,
    capture: Capture<W>,
}

impl<D: Device> Pcap<D, File> {
    /// Wraps `device`, capturing to a new file at `path` (truncated if it
    /// exists).
    ///
    /// # Errors
    ///
    /// When the file cannot be created; the message names the path.
    pub fn create(device: D, path: impl AsRef<Path>) -> io::Result<Pcap<D, File>> {
        let path = path.as_ref();
        let file = File::create(path)
            .map_err(|e| io::Error::new(e.kind(), format!("cannot create pcap file {}: {e}", path.display())))?;
        Ok(Pcap::new(device, file))
    }
}

impl<D: Device, W: Write> Pcap<D, W> {
    /// Wraps `device`, capturing to `writer`. The file header is written
    /// (into the buffer) at once.
    pub fn new(device: D, writer: W) -> Pcap<D, W> {
        let snaplen = device.max_frame_len().min(MAX_SNAPLEN);
        let mut capture = Capture {
            sink: Sink::Open(BufWriter::with_capacity(BUFFER_CAPACITY, writer)),
            snaplen,
            stats: PcapStats::default(),
            error: None,
        };
        capture.write_file_header();
        Pcap { device, capture }
    }
}

impl<D, W: Write> Pcap<D, W> {
    /// The wrapped device.
    pub fn get_ref(&self) -> &D {
        &self.device
    }

    /// The wrapped device, mutably (frames sent or received through it
    /// directly are not captured).
    pub fn get_mut(&mut self) -> &mut D {
        &mut self.device
    }

    /// Flushes the capture and returns the device.
    pub fn into_inner(self) -> D {
        self.into_parts().0
    }

    /// Flushes the capture (unless it had stopped) and returns the device
    /// and the writer.
    pub fn into_parts(self) -> (D, W) {
        let Pcap { device, mut capture } = self;
        let writer = capture.finish();
        (device, writer)
    }

    /// Pushes every buffered record to the writer, and flushes it.
    ///
    /// # Errors
    ///
    /// The error that stopped the capture, now or earlier.
    pub fn flush(&mut self) -> io::Result<()> {
        self.capture.flush()
    }

    /// A snapshot of the counters.
    pub fn stats(&self) -> PcapStats {
        self.capture.stats
    }

    /// The write error that stopped the capture, if one did.
    pub fn error(&self) -> Option<&io::Error> {
        self.capture.error.as_ref()
    }

    /// Whether frames are still being recorded.
    pub fn is_capturing(&self) -> bool {
        matches!(self.capture.sink, Sink::Open(_))
    }
}

impl<D: core::fmt::Debug, W: Write> core::fmt::Debug for Pcap<D, W> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Pcap")
            .field("device", &self.device)
            .field("capturing", &self.is_capturing())
            .field("stats", &self.capture.stats)
            .field("error", &self.capture.error)
            .finish()
    }
}

impl<D: Device, W: Write> Device for Pcap<D, W> {
    fn max_frame_len(&self) -> usize {
        self.device.max_frame_len()
    }

    fn receive<F: FnMut(&[u8])>(&mut self, budget: usize, mut on_frame: F) -> usize {
        let capture = &mut self.capture;
        self.device.receive(budget, |frame| {
            capture.record(frame, Direction::Received);
            on_frame(frame);
        })
    }

    fn transmit<F: FnMut(&mut [u8]) -> Option<usize>>(&mut self, budget: usize, mut fill: F) -> usize {
        let capture = &mut self.capture;
        self.device.transmit(budget, |buf| {
            let len = fill(buf)?;
            // An overlong length is the device's to catch (it panics in
            // debug builds); record what it will send.
            capture.record(&buf[..len.min(buf.len())], Direction::Transmitted);
            Some(len)
        })
    }

    /// As the wrapped device: the capture then shows transmitted TCP frames
    /// with the partial checksums the device finishes (as a capture on a
    /// Linux host with offloads does).
    fn offload_tx_checksums(&mut self) -> bool {
        self.device.offload_tx_checksums()
    }
}

impl<D: Wait, W: Write> Wait for Pcap<D, W> {
    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        self.device.wait(timeout)
    }
    #[cfg(unix)]
    fn wake_sources<'a>(&'a self, sources: &mut Vec<std::os::fd::BorrowedFd<'a>>) {
        self.device.wake_sources(sources);
    }
    fn before_sleep(&mut self) -> io::Result<bool> {
        self.device.before_sleep()
    }
    fn after_sleep(&mut self) {
        self.device.after_sleep();
    }
}

#[cfg(unix)]
impl<D: std::os::fd::AsRawFd, W: Write> std::os::fd::AsRawFd for Pcap<D, W> {
    fn as_raw_fd(&self) -> std::os::fd::RawFd {
        self.device.as_raw_fd()
    }
}

#[derive(Clone, Copy)]
enum Direction {
    Received,
    Transmitted,
}

/// Where records go.
enum Sink<W: Write> {
    /// Capturing.
    Open(BufWriter<W>),
    /// Stopped by a write error; the writer is kept only to be handed back.
    Failed(W),
    /// Handed back by [`Capture::finish`].
    Taken,
}

/// The writing half of a [`Pcap`], apart so that the wrapper itself has no
/// `Drop` and can be taken apart.
struct Capture<W: Write> {
    sink: Sink<W>,
    snaplen: usize,
    stats: PcapStats,
    error: Option<io::Error>,
}

impl<W: Write> Capture<W> {
    fn write_file_header(&mut self) {
        let mut header = [0u8; 24];
        header[0..4].copy_from_slice(&PCAP_MAGIC_NANOS.to_le_bytes());
        header[4..6].copy_from_slice(&2u16.to_le_bytes()); // version 2.4
        header[6..8].copy_from_slice(&4u16.to_le_bytes());
        // 8..16: time zone offset and accuracy, both zero.
        header[16..20].copy_from_slice(&(self.snaplen as u32).to_le_bytes());
        header[20..24].copy_from_slice(&LINKTYPE_ETHERNET.to_le_bytes());
        if let Sink::Open(out) = &mut self.sink
            && let Err(e) = out.write_all(&header)
        {
            self.fail(e);
        }
    }

    fn record(&mut self, frame: &[u8], direction: Direction) {
        let Sink::Open(out) = &mut self.sink else {
            self.stats.frames_missed += 1;
            return;
        };
        // Before 1970 only with a badly set clock; record time zero then.
        let now = SystemTime::now().duration_since(UNIX_EPOCH).unwrap_or_default();
        let captured = frame.len().min(self.snaplen);
        let mut header = [0u8; 16];
        // pcap seconds are 32 bits: they wrap in 2106.
        header[0..4].copy_from_slice(&(now.as_secs() as u32).to_le_bytes());
        header[4..8].copy_from_slice(&now.subsec_nanos().to_le_bytes());
        header[8..12].copy_from_slice(&(captured as u32).to_le_bytes());
        header[12..16].copy_from_slice(&u32::try_from(frame.len()).unwrap_or(u32::MAX).to_le_bytes());
        if let Err(e) = out.write_all(&header).and_then(|()| out.write_all(&frame[..captured])) {
            self.stats.frames_missed += 1;
            self.fail(e);
            return;
        }
        match direction {
            Direction::Received => self.stats.frames_received += 1,
            Direction::Transmitted => self.stats.frames_transmitted += 1,
        }
        self.stats.bytes += captured as u64;
    }

    fn flush(&mut self) -> io::Result<()> {
        if let Sink::Open(out) = &mut self.sink
            && let Err(e) = out.flush()
        {
            self.fail(e);
        }
        match &self.error {
            None => Ok(()),
            Some(e) => Err(io::Error::new(e.kind(), format!("pcap capture stopped: {e}"))),
        }
    }

    /// Stops the capture after a write error: the buffered bytes are
    /// dropped (writing them later would leave a gap in the file, not a
    /// clean end), and the writer is not used again.
    fn fail(&mut self, error: io::Error) {
        self.stats.write_errors += 1;
        self.error.get_or_insert(error);
        if let Sink::Open(out) = core::mem::replace(&mut self.sink, Sink::Taken) {
            let (writer, _unwritten) = out.into_parts();
            self.sink = Sink::Failed(writer);
        }
    }

    /// Flushes (if still capturing) and hands the writer back.
    fn finish(&mut self) -> W {
        if let Sink::Open(out) = &mut self.sink
            && let Err(e) = out.flush()
        {
            self.fail(e);
        }
        match core::mem::replace(&mut self.sink, Sink::Taken) {
            Sink::Open(out) => out.into_parts().0,
            Sink::Failed(writer) => writer,
            Sink::Taken => unreachable!("a capture is finished once, by into_parts"),
        }
    }
}

impl<W: Write> Drop for Capture<W> {
    fn drop(&mut self) {
        if let Sink::Open(out) = &mut self.sink
            && let Err(e) = out.flush()
        {
            // Nobody is left to tell; `fail` also keeps BufWriter's own drop
            // from trying again.
            self.fail(e);
        }
    }
}
