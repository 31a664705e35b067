//! The smoltcp half of the side-by-side in-memory loopback throughput benchmark.
//!
//! [`run`] moves `total_bytes` from a client TCP socket to a server TCP socket.
//! Each socket lives on its own smoltcp [`Interface`] (Ethernet medium, distinct
//! MAC and IPv4 addresses on one /24, ARP resolved by smoltcp in the normal
//! way).  The two interfaces are joined by an in-memory link with no delay and
//! no loss, and everything runs in the calling thread.
//!
//! # Configuration choices (aiming to give smoltcp its best honest setup)
//!
//! * **Device.**  The link is a pair of FIFO queues of preallocated frame
//!   buffers.  A transmitted frame takes a buffer from the sending lane's free
//!   list and a received frame hands it back, so no frame allocates in steady
//!   state (smoltcp's own `phy::Loopback` allocates a `Vec` per frame, which
//!   would handicap it).  Buffers are never zeroed on reuse.  The link never
//!   refuses a frame, so it is lossless.
//! * **MTU.**  [`LoopbackConfig::mtu`] is the IP MTU; the device reports an
//!   Ethernet MTU of `mtu + 14`, so smoltcp's MSS is `mtu - 40`.
//! * **Checksums.**  smoltcp's default [`ChecksumCapabilities`] are kept: IPv4
//!   and TCP checksums are computed on transmit and verified on receive.
//!   Fairway computes and verifies them too, so neither side gets a free pass.
//! * **TCP.**  smoltcp's defaults are kept (Nagle on, 10 ms delayed ACK that is
//!   forced out after one MSS of unacknowledged data, no congestion control
//!   because the `socket-tcp-reno`/`-cubic` features are off).  Turning
//!   delayed ACKs or Nagle off made no measurable difference here, because
//!   the receiver ACKs once per batch of frames anyway.  smoltcp advertises
//!   window scaling by itself when the receive buffer is 64 KiB or larger, so
//!   the window follows [`LoopbackConfig::socket_buffer`].
//! * **Polling.**  [`Interface::poll`] drains all received frames but emits at
//!   most one segment per socket.  After each `poll` the loop therefore calls
//!   [`Interface::poll_egress`] until it reports nothing sent, so a sender can
//!   put its whole usable window on the wire in one turn instead of one segment
//!   per loop iteration (about 40% faster at MTU 1500 than `poll` alone).
//!   This only uses smoltcp's public API.
//! * **Application.**  With [`Api::Copy`] the client writes with
//!   `send_slice` and the server reads with `recv_slice` into a `chunk`-byte
//!   buffer, i.e. one copy in and one copy out, like a socket `write`/`read`.
//!   With [`Api::InPlace`] the client writes the pattern straight into the
//!   send buffer with `send(|buf| ..)` and the server checks it where it lies
//!   with `recv(|buf| ..)`, at most `chunk` bytes a call.  Byte `i` of the stream is
//!   `(i % 251) as u8`; every received byte is compared against that pattern
//!   and a mismatch panics.
//!
//! # What is measured
//!
//! Setup (allocating buffers, building the interfaces) and the connection
//! establishment (ARP exchange and three-way handshake) happen before the clock
//! starts.  [`LoopbackResult::elapsed`] is the wall-clock time from the first
//! application write until the server has read and verified the last byte; the
//! connection is not closed inside the measured interval.
//! [`LoopbackResult::frames`] counts Ethernet frames sent in both directions
//! during that interval (data segments plus ACKs / window updates).
//!
//! The time handed to smoltcp is real elapsed time
//! (`Instant::from_micros(epoch.elapsed())`), read once per loop iteration.
//! Nothing inside the measured loop allocates; a test checks this with a
//! counting allocator.

use std::collections::VecDeque;
use std::time::{Duration, Instant as StdInstant};

use fairway_stack::ETHERNET_HEADER_LEN;
use smoltcp::iface::{Config, Interface, PollResult, SocketHandle, SocketSet};
use smoltcp::phy::{self, ChecksumCapabilities, Device, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;
use smoltcp::wire::{EthernetAddress, IpAddress, IpCidr, Ipv4Address};

/// Parameters of one loopback transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopbackConfig {
    /// Bytes moved from the client to the server.
    pub total_bytes: usize,
    /// IP MTU of the link, e.g. 1500 or 9000 (the Ethernet frame adds 14).
    pub mtu: usize,
    /// Size of each socket's receive buffer and of each socket's transmit
    /// buffer.
    pub socket_buffer: usize,
    /// Size of each application write and read.
    pub chunk: usize,
    /// How the application hands data to the stack and takes it back.
    pub api: Api,
}

/// How the benchmark's application writes and reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Api {
    /// Through a buffer of its own, like a socket `write`/`read`: smoltcp's
    /// `send_slice`/`recv_slice`, Fairway's `send`/`recv`.
    Copy,
    /// In the stack's rings: the writer produces its bytes straight into the
    /// send ring and the reader checks them where they were received.
    /// smoltcp's `send`/`recv` closures, Fairway's `send_with`/`recv_with`.
    InPlace,
}

impl Api {
    /// The name `--api` takes.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Api::Copy => "copy",
            Api::InPlace => "in-place",
        }
    }
}

/// Outcome of one loopback transfer.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoopbackResult {
    /// Bytes received and verified by the server (equals `total_bytes`).
    pub bytes: usize,
    /// Wall-clock time of the transfer, handshake excluded.
    pub elapsed: Duration,
    /// Ethernet frames sent in both directions during the transfer.
    pub frames: u64,
}

impl LoopbackResult {
    /// Goodput in Gbit/s (10^9 bits of application payload per second).
    pub fn gbit_per_s(&self) -> f64 {
        let secs = self.elapsed.as_secs_f64();
        if secs == 0.0 {
            return f64::INFINITY;
        }
        self.bytes as f64 * 8.0 / secs / 1e9
    }
}

/// Runs one bulk transfer of `total_bytes` from a client socket to a server
/// socket on two smoltcp Interfaces (Ethernet medium, distinct MACs and IPs on
/// one /24, ARP resolved normally) joined by an in-memory, zero-delay, lossless
/// link, in the calling thread. Verifies every received byte (byte `i` is
/// `(i % 251) as u8`) and panics on corruption.
///
/// # Panics
///
/// Panics on corrupted data, if the connection cannot be established, if no
/// progress is made for [`STALL_LIMIT`] loop iterations, or on an invalid
/// configuration (`mtu` outside `576..=65521`, zero `chunk`, zero or
/// over-1-GiB `socket_buffer`).
pub fn run(config: &LoopbackConfig) -> LoopbackResult {
    run_probed(config, |_| {})
}

/// The loop gives up if this many consecutive iterations move no byte.
pub const STALL_LIMIT: u64 = 1_000_000;

const SERVER_PORT: u16 = 5201;
const CLIENT_PORT: u16 = 49152;
const CLIENT_IP: Ipv4Address = Ipv4Address::new(10, 0, 0, 1);
const SERVER_IP: Ipv4Address = Ipv4Address::new(10, 0, 0, 2);
const CLIENT_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x01]);
const SERVER_MAC: EthernetAddress = EthernetAddress([0x02, 0, 0, 0, 0, 0x02]);
/// IPv4 header plus TCP header without options.
const TCP_IP_HEADERS: usize = 40;
const PATTERN_PERIOD: usize = 251;
/// Upper bound on `poll_egress` calls after one `poll`.  Each call sends at
/// most one segment; anything beyond the bound goes out on the next loop
/// iteration (256 KiB windows need about 180 calls at MTU 1500).
const MAX_EGRESS_PER_POLL: usize = 1 << 16;

/// Points at which [`run_probed`] calls its probe.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Phase {
    /// Right before the clock starts.
    TransferStart,
    /// Right after the clock stops.
    TransferEnd,
}

/// [`run`], calling `probe` right before the clock starts and right after it
/// stops (tests use it to count allocations inside the measured interval).
pub fn run_probed(config: &LoopbackConfig, mut probe: impl FnMut(Phase)) -> LoopbackResult {
    assert!(
        (576..=65535 - ETHERNET_HEADER_LEN).contains(&config.mtu),
        "mtu {} outside 576..={}",
        config.mtu,
        65535 - ETHERNET_HEADER_LEN
    );
    assert!(config.chunk > 0, "chunk must be positive");
    assert!(config.socket_buffer > 0 && config.socket_buffer <= 1 << 30, "socket_buffer must be in 1..=1 GiB");

    let epoch = StdInstant::now();
    let now = || Instant::from_micros(i64::try_from(epoch.elapsed().as_micros()).unwrap_or(i64::MAX));

    let mut link = Link::new(config);

    let mut client_iface = new_interface(&mut link, End::Client, now());
    let mut server_iface = new_interface(&mut link, End::Server, now());

    let mut client_sockets = SocketSet::new(Vec::with_capacity(1));
    let mut server_sockets = SocketSet::new(Vec::with_capacity(1));
    let client = client_sockets.add(new_socket(config.socket_buffer));
    let server = server_sockets.add(new_socket(config.socket_buffer));

    server_sockets.get_mut::<tcp::Socket>(server).listen(SERVER_PORT).expect("listen");
    client_sockets
        .get_mut::<tcp::Socket>(client)
        .connect(client_iface.context(), (IpAddress::Ipv4(SERVER_IP), SERVER_PORT), CLIENT_PORT)
        .expect("connect");

    // Connection establishment: ARP, then SYN / SYN-ACK / ACK.  Not timed.
    let mut handshake_iterations = 0u64;
    loop {
        let t = now();
        poll_end(&mut client_iface, &mut link, End::Client, &mut client_sockets, t);
        poll_end(&mut server_iface, &mut link, End::Server, &mut server_sockets, t);
        let established =
            |sockets: &SocketSet<'_>, h: SocketHandle| sockets.get::<tcp::Socket>(h).state() == tcp::State::Established;
        if established(&client_sockets, client) && established(&server_sockets, server) {
            break;
        }
        handshake_iterations += 1;
        assert!(
            handshake_iterations < STALL_LIMIT,
            "smoltcp loopback: connection not established after {STALL_LIMIT} iterations \
             (client {}, server {})",
            client_sockets.get::<tcp::Socket>(client).state(),
            server_sockets.get::<tcp::Socket>(server).state(),
        );
    }

    // Application-side state, all allocated before the clock starts.
    let pattern: Vec<u8> = (0..PATTERN_PERIOD + config.chunk).map(|i| (i % PATTERN_PERIOD) as u8).collect();
    let mut read_buf = vec![0u8; config.chunk];
    let total = config.total_bytes;
    let mut sent = 0usize;
    let mut received = 0usize;
    let mut stalled = 0u64;

    probe(Phase::TransferStart);
    let frames_before = link.frames_sent();
    let start = StdInstant::now();

    while received < total {
        // Client application: write as much as the socket accepts.
        let sock = client_sockets.get_mut::<tcp::Socket>(client);
        let sent_before = sent;
        while sent < total {
            let n = config.chunk.min(total - sent);
            let off = sent % PATTERN_PERIOD;
            let accepted = match config.api {
                Api::Copy => sock.send_slice(&pattern[off..off + n]).expect("send_slice"),
                Api::InPlace => sock
                    .send(|room| {
                        let k = room.len().min(n);
                        room[..k].copy_from_slice(&pattern[off..off + k]);
                        (k, k)
                    })
                    .expect("send"),
            };
            if accepted == 0 {
                break;
            }
            sent += accepted;
        }

        let t = now();
        poll_end(&mut client_iface, &mut link, End::Client, &mut client_sockets, t);
        poll_end(&mut server_iface, &mut link, End::Server, &mut server_sockets, t);

        // Server application: read and verify everything available.
        let sock = server_sockets.get_mut::<tcp::Socket>(server);
        let received_before = received;
        loop {
            let off = received % PATTERN_PERIOD;
            let n = match config.api {
                Api::Copy => {
                    let n = sock.recv_slice(&mut read_buf).expect("recv_slice");
                    if read_buf[..n] != pattern[off..off + n] {
                        report_corruption(received, &read_buf[..n], &pattern[off..off + n]);
                    }
                    n
                }
                Api::InPlace => sock
                    .recv(|data| {
                        let n = data.len().min(read_buf.len());
                        if data[..n] != pattern[off..off + n] {
                            report_corruption(received, &data[..n], &pattern[off..off + n]);
                        }
                        (n, n)
                    })
                    .expect("recv"),
            };
            if n == 0 {
                break;
            }
            received += n;
            assert!(received <= total, "smoltcp loopback: received {received} bytes, more than the {total} sent");
        }

        if sent == sent_before && received == received_before {
            stalled += 1;
            if stalled >= STALL_LIMIT {
                let c = client_sockets.get::<tcp::Socket>(client);
                let s = server_sockets.get::<tcp::Socket>(server);
                panic!(
                    "smoltcp loopback: no progress for {STALL_LIMIT} iterations \
                     (sent {sent}, received {received} of {total}; client {} send_queue {}, \
                     server {} recv_queue {})",
                    c.state(),
                    c.send_queue(),
                    s.state(),
                    s.recv_queue(),
                );
            }
        } else {
            stalled = 0;
        }
    }

    let elapsed = start.elapsed();
    let frames = link.frames_sent() - frames_before;
    probe(Phase::TransferEnd);

    LoopbackResult { bytes: received, elapsed, frames }
}

#[cold]
#[inline(never)]
fn report_corruption(stream_offset: usize, got: &[u8], want: &[u8]) -> ! {
    let i = got.iter().zip(want).position(|(g, w)| g != w).unwrap_or(0);
    panic!(
        "smoltcp loopback: corrupted byte at stream offset {}: got {:#04x}, expected {:#04x}",
        stream_offset + i,
        got[i],
        want[i]
    );
}

/// Polls one interface: drains its received frames, then emits segments until
/// smoltcp has nothing more to send.
fn poll_end(iface: &mut Interface, link: &mut Link, end: End, sockets: &mut SocketSet<'_>, t: Instant) {
    let mut port = link.port(end);
    iface.poll(t, &mut port, sockets);
    // Bounded so that a misbehaving stack cannot spin here forever; the
    // caller's stall check then reports it.
    for _ in 0..MAX_EGRESS_PER_POLL {
        if iface.poll_egress(t, &mut port, sockets) == PollResult::None {
            break;
        }
    }
}

fn new_interface(link: &mut Link, end: End, t: Instant) -> Interface {
    let (mac, ip, seed) = match end {
        End::Client => (CLIENT_MAC, CLIENT_IP, 0x5eed_0001),
        End::Server => (SERVER_MAC, SERVER_IP, 0x5eed_0002),
    };
    let mut config = Config::new(mac.into());
    config.random_seed = seed;
    let mut iface = Interface::new(config, &mut link.port(end), t);
    iface.update_ip_addrs(|addrs| {
        addrs.push(IpCidr::new(IpAddress::Ipv4(ip), 24)).expect("address table full");
    });
    iface
}

fn new_socket(buffer: usize) -> tcp::Socket<'static> {
    tcp::Socket::new(tcp::SocketBuffer::new(vec![0; buffer]), tcp::SocketBuffer::new(vec![0; buffer]))
}

/// Which end of the link a device belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum End {
    Client,
    Server,
}

/// A frame buffer of the link's maximum frame size; `len` bytes are in use.
struct Frame {
    buf: Box<[u8]>,
    len: usize,
}

/// One direction of the link: frames in flight plus the free buffers of the
/// sender.  A receiver returns each buffer to the lane it came from.
struct Lane {
    queue: VecDeque<Frame>,
    free: Vec<Frame>,
    frame_size: usize,
    frames_sent: u64,
}

impl Lane {
    fn new(frame_size: usize, frames: usize) -> Self {
        Self {
            queue: VecDeque::with_capacity(frames),
            free: (0..frames).map(|_| Frame { buf: vec![0; frame_size].into_boxed_slice(), len: 0 }).collect(),
            frame_size,
            frames_sent: 0,
        }
    }
}

/// The in-memory link: lane 0 carries client-to-server frames, lane 1
/// server-to-client frames.
struct Link {
    lanes: [Lane; 2],
    caps: DeviceCapabilities,
}

impl Link {
    fn new(config: &LoopbackConfig) -> Self {
        let frame_size = config.mtu + ETHERNET_HEADER_LEN;
        // Preallocate twice a full window of full-size segments plus slack, so
        // the steady state never allocates.  A lane still allocates a buffer if
        // its free list ever runs dry, so the link never drops a frame.
        let mss = config.mtu - TCP_IP_HEADERS;
        let frames = 2 * config.socket_buffer.div_ceil(mss) + 64;
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ethernet;
        caps.max_transmission_unit = frame_size;
        caps.max_burst_size = None;
        caps.checksum = ChecksumCapabilities::default();
        Self { lanes: [Lane::new(frame_size, frames), Lane::new(frame_size, frames)], caps }
    }

    fn port(&mut self, end: End) -> Port<'_> {
        let [to_server, to_client] = &mut self.lanes;
        let (rx, tx) = match end {
            End::Client => (to_client, to_server),
            End::Server => (to_server, to_client),
        };
        Port { rx, tx, caps: &self.caps }
    }

    fn frames_sent(&self) -> u64 {
        self.lanes.iter().map(|l| l.frames_sent).sum()
    }
}

/// One end's view of the link; implements [`Device`].
struct Port<'a> {
    rx: &'a mut Lane,
    tx: &'a mut Lane,
    caps: &'a DeviceCapabilities,
}

impl Device for Port<'_> {
    type RxToken<'b>
        = RxToken<'b>
    where
        Self: 'b;
    type TxToken<'b>
        = TxToken<'b>
    where
        Self: 'b;

    fn receive(&mut self, _timestamp: Instant) -> Option<(RxToken<'_>, TxToken<'_>)> {
        if self.rx.queue.is_empty() {
            return None;
        }
        Some((RxToken { lane: self.rx }, TxToken { lane: self.tx }))
    }

    fn transmit(&mut self, _timestamp: Instant) -> Option<TxToken<'_>> {
        Some(TxToken { lane: self.tx })
    }

    fn capabilities(&self) -> DeviceCapabilities {
        self.caps.clone()
    }
}

/// Receives the frame at the head of a lane and recycles its buffer.
struct RxToken<'a> {
    lane: &'a mut Lane,
}

impl phy::RxToken for RxToken<'_> {
    fn consume<R, F>(self, f: F) -> R
    where
        F: FnOnce(&[u8]) -> R,
    {
        let frame = self.lane.queue.pop_front().expect("receive() checked that a frame is queued");
        let result = f(&frame.buf[..frame.len]);
        self.lane.free.push(frame);
        result
    }
}

/// Fills a recycled buffer and queues it on a lane.
struct TxToken<'a> {
    lane: &'a mut Lane,
}

impl phy::TxToken for TxToken<'_> {
    fn consume<R, F>(self, len: usize, f: F) -> R
    where
        F: FnOnce(&mut [u8]) -> R,
    {
        let lane = self.lane;
        assert!(len <= lane.frame_size, "frame of {len} bytes exceeds the link's {} byte frames", lane.frame_size);
        let mut frame =
            lane.free.pop().unwrap_or_else(|| Frame { buf: vec![0; lane.frame_size].into_boxed_slice(), len: 0 });
        frame.len = len;
        let result = f(&mut frame.buf[..len]);
        lane.queue.push_back(frame);
        lane.frames_sent += 1;
        result
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(total_bytes: usize, mtu: usize) -> LoopbackConfig {
        LoopbackConfig { total_bytes, mtu, socket_buffer: 256 * 1024, chunk: 64 * 1024, api: Api::Copy }
    }

    fn check(result: &LoopbackResult, cfg: &LoopbackConfig) {
        assert_eq!(result.bytes, cfg.total_bytes);
        let mss = (cfg.mtu - TCP_IP_HEADERS) as u64;
        let min_data_frames = (cfg.total_bytes as u64).div_ceil(mss);
        assert!(
            result.frames >= min_data_frames,
            "{} frames cannot carry {} bytes at MSS {mss}",
            result.frames,
            cfg.total_bytes
        );
        assert!(result.gbit_per_s() > 0.0);
    }

    #[test]
    fn one_megabyte_at_mtu_1500() {
        let cfg = config(1_000_000, 1500);
        check(&run(&cfg), &cfg);
    }

    #[test]
    fn jumbo_mtu_9000() {
        let cfg = config(4_000_000, 9000);
        check(&run(&cfg), &cfg);
    }

    #[test]
    fn small_buffers_odd_sizes() {
        // No window scaling (buffer below 64 KiB), chunks and total not
        // multiples of the MSS or of the pattern period.
        let cfg = LoopbackConfig {
            total_bytes: 777_777,
            mtu: 1500,
            socket_buffer: 8 * 1024 + 3,
            chunk: 1000,
            api: Api::InPlace,
        };
        check(&run(&cfg), &cfg);
    }

    #[test]
    fn tiny_transfer() {
        for total in [0, 1, 250, 251, 252] {
            let cfg = config(total, 1500);
            assert_eq!(run(&cfg).bytes, total);
        }
    }

    #[test]
    fn corruption_is_detected() {
        let got = [1u8, 2, 3];
        let want = [1u8, 2, 4];
        let err = std::panic::catch_unwind(|| report_corruption(10, &got, &want)).expect_err("must panic");
        let msg = err.downcast_ref::<String>().expect("string panic");
        assert!(msg.contains("stream offset 12"), "{msg}");
    }

    /// Release-mode throughput report:
    /// `cargo test --release -p fairway-benches smoltcp -- --ignored --nocapture`
    #[test]
    #[ignore = "throughput measurement; run in release mode"]
    fn throughput_report() {
        const RUNS: usize = 5;
        let total = 1 << 30;
        for mtu in [1500, 9000] {
            let cfg = LoopbackConfig {
                total_bytes: total,
                mtu,
                socket_buffer: 256 * 1024,
                chunk: 64 * 1024,
                api: Api::InPlace,
            };
            let mut rates = Vec::with_capacity(RUNS);
            for _ in 0..RUNS {
                let r = run(&cfg);
                println!(
                    "smoltcp loopback mtu {mtu:>5} buf {} KiB chunk {} KiB: {:>7.3} Gbit/s \
                     ({} bytes in {:?}, {} frames)",
                    cfg.socket_buffer / 1024,
                    cfg.chunk / 1024,
                    r.gbit_per_s(),
                    r.bytes,
                    r.elapsed,
                    r.frames
                );
                rates.push(r.gbit_per_s());
            }
            rates.sort_by(f64::total_cmp);
            println!(
                "smoltcp loopback mtu {mtu:>5}: median {:.3} Gbit/s of {RUNS} runs (min {:.3}, max {:.3})",
                rates[RUNS / 2],
                rates[0],
                rates[RUNS - 1]
            );
        }
    }
}
