//! The Fairway half of the side-by-side in-memory loopback benchmark: the same
//! transfer as [`crate::smoltcp_loopback`], between two Fairway shards.
//!
//! Setup mirrors the smoltcp half so the two figures compare like with like:
//! two shards with distinct MAC and IPv4 addresses on one /24, joined by an
//! in-memory link of two FIFO queues of recycled frame buffers (no delay, no
//! loss), ARP resolved the normal way, all in the calling thread. Checksums
//! are computed on transmit and verified on receive. The client writes with
//! `send` and the server reads with `recv` in `chunk`-byte pieces
//! ([`Api::Copy`]), or the client writes into the send ring with `send_with`
//! and the server checks the data in the receive ring with `recv_with`
//! ([`Api::InPlace`]); byte `i`
//! of the stream is `(i % 251) as u8` and every byte is checked. One chunk
//! goes through before the clock starts (Fairway attaches connection buffers
//! on first use, smoltcp allocates them with the socket); the clock then runs
//! from the next write to the last verified read. The time passed to the
//! shards is real elapsed time, read once per loop turn.
//!
//! One difference is inherent: Fairway's TCP (this issue) has no window
//! scaling yet, so its window is at most 64 KiB whatever the buffer size.

use std::collections::VecDeque;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4};
use std::time::Instant as StdInstant;

use fairway_stack::time::Instant;
use fairway_stack::{Config, Event, Handle, RecvError, SendError, Shard};

use crate::smoltcp_loopback::{Api, LoopbackConfig, LoopbackResult, Phase, STALL_LIMIT};

const SERVER_PORT: u16 = 5201;
const PATTERN_PERIOD: usize = 251;

/// One direction of the in-memory link: queued frames and spare buffers.
struct Lane {
    queue: VecDeque<(Vec<u8>, usize)>,
    free: Vec<Vec<u8>>,
    frame_len: usize,
}

impl Lane {
    fn new(frame_len: usize, frames: usize) -> Lane {
        Lane {
            queue: VecDeque::with_capacity(frames),
            free: (0..frames).map(|_| vec![0; frame_len]).collect(),
            frame_len,
        }
    }

    /// Moves everything `from` wants to send into this lane. Returns frames moved.
    fn fill_from(&mut self, from: &mut Shard, now: Instant) -> u64 {
        let mut n = 0;
        loop {
            let mut buf = self.free.pop().unwrap_or_else(|| vec![0; self.frame_len]);
            match from.poll_transmit(now, &mut buf) {
                Some(len) => {
                    self.queue.push_back((buf, len));
                    n += 1;
                }
                None => {
                    self.free.push(buf);
                    return n;
                }
            }
        }
    }

    /// Hands every queued frame to `to`.
    fn drain_into(&mut self, to: &mut Shard, now: Instant) {
        while let Some((buf, len)) = self.queue.pop_front() {
            to.handle_frame(now, &buf[..len]);
            self.free.push(buf);
        }
    }
}

/// Host `last` of the IPv6 subnet the shards share with `ipv6`: fd00::`last`.
fn ipv6_host(last: u8) -> Ipv6Addr {
    Ipv6Addr::new(0xfd00, 0, 0, 0, 0, 0, 0, u16::from(last))
}

fn shard(mac_last: u8, ip_last: u8, config: &LoopbackConfig, ipv6: bool) -> Shard {
    let mut c = Config::new([2, 0, 0, 0, 0, mac_last], Ipv4Addr::new(10, 0, 0, ip_last), 24);
    if ipv6 {
        let address = (ipv6_host(ip_last), 64);
        c.ipv6 = Some(fairway_stack::Ipv6Config { dad_transmits: 0, ..fairway_stack::Ipv6Config::new(vec![address]) });
    }
    c.mtu = config.mtu;
    c.tcp.rx_buffer = config.socket_buffer;
    c.tcp.tx_buffer = config.socket_buffer;
    c.secret = 0xbe4c_0000 + ip_last as u128;
    Shard::new(c)
}

/// Runs one bulk transfer between two Fairway shards (see the module docs).
///
/// # Panics
///
/// Panics on corrupted data, if the connection cannot be established, or if
/// no progress is made for [`STALL_LIMIT`] loop turns.
pub fn run(config: &LoopbackConfig) -> LoopbackResult {
    run_probed(config, |_| {})
}

/// [`run`] over IPv6: both shards dual-stack, the connection between their
/// IPv6 addresses (Neighbor Discovery resolving them in the set-up).
///
/// # Panics
///
/// As [`run`].
pub fn run_ipv6(config: &LoopbackConfig) -> LoopbackResult {
    run_family(config, true, |_| {})
}

/// [`run`], calling `probe` right before the clock starts and right after it
/// stops.
pub fn run_probed(config: &LoopbackConfig, probe: impl FnMut(Phase)) -> LoopbackResult {
    run_family(config, false, probe)
}

fn run_family(config: &LoopbackConfig, ipv6: bool, mut probe: impl FnMut(Phase)) -> LoopbackResult {
    assert!(config.chunk > 0, "chunk must be positive");
    let mut client = shard(1, 1, config, ipv6);
    let mut server = shard(2, 2, config, ipv6);
    let frame_len = client.config().max_frame_len();
    let frames = 2 * config.socket_buffer / config.mtu.saturating_sub(40).max(1) + 64;
    let mut to_server = Lane::new(frame_len, frames);
    let mut to_client = Lane::new(frame_len, frames);
    let epoch = StdInstant::now();
    let clock = || Instant::from_micros(epoch.elapsed().as_micros() as u64);

    // Set-up, outside the measured interval: listen, connect, handshake.
    let listener = server.listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, SERVER_PORT)).expect("listen");
    let to = if ipv6 {
        SocketAddr::new(ipv6_host(2).into(), SERVER_PORT)
    } else {
        SocketAddr::from(SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), SERVER_PORT))
    };
    let c = client.connect(clock(), to).expect("connect");
    let mut s: Option<Handle> = None;
    let mut connected = false;
    for _ in 0..1000 {
        let now = clock();
        to_server.fill_from(&mut client, now);
        to_server.drain_into(&mut server, now);
        to_client.fill_from(&mut server, now);
        to_client.drain_into(&mut client, now);
        while let Some(e) = server.poll_event() {
            if let Event::Acceptable(_) = e {
                s = server.accept(listener);
            }
        }
        while let Some(e) = client.poll_event() {
            connected |= e == Event::Connected(c);
        }
        if connected && s.is_some() {
            break;
        }
    }
    let s = s.expect("the handshake did not complete");
    assert!(connected, "the client never saw the connection open");

    // The same pattern source as the smoltcp half: slices of a precomputed
    // buffer, compared with one memcmp per read.
    let pattern: Vec<u8> = (0..PATTERN_PERIOD + config.chunk).map(|i| (i % PATTERN_PERIOD) as u8).collect();
    let mut pair = Pair {
        client,
        server,
        c,
        s,
        to_server,
        to_client,
        clock: &clock,
        pattern,
        inbox: vec![0u8; config.chunk],
        api: config.api,
    };
    // Warm-up, unmeasured: one chunk through, so the connection's buffers are
    // allocated (Fairway attaches them on first use; smoltcp's sockets get
    // theirs up front).
    let warmup = config.chunk.min(config.total_bytes.max(1));
    pair.transfer(0, warmup, config.chunk);

    probe(Phase::TransferStart);
    let start = StdInstant::now();
    let frames = pair.transfer(warmup, config.total_bytes, config.chunk);
    let elapsed = start.elapsed();
    probe(Phase::TransferEnd);
    LoopbackResult { bytes: config.total_bytes, elapsed, frames }
}

/// The two shards and their link, mid-transfer.
struct Pair<'a, C: Fn() -> Instant> {
    client: Shard,
    server: Shard,
    c: Handle,
    s: Handle,
    to_server: Lane,
    to_client: Lane,
    clock: &'a C,
    pattern: Vec<u8>,
    inbox: Vec<u8>,
    api: Api,
}

impl<C: Fn() -> Instant> Pair<'_, C> {
    /// Moves stream bytes `from..from + len` from client to server, checking
    /// each; returns the frames sent.
    fn transfer(&mut self, from: usize, len: usize, chunk: usize) -> u64 {
        let end = from + len;
        let (mut written, mut read) = (from, from);
        let mut frames = 0u64;
        let mut idle_turns = 0u64;
        while read < end {
            let now = (self.clock)();
            let before = (written, read);
            // The client writes as much as the send buffer takes.
            while written < end {
                let n = (end - written).min(chunk);
                let off = written % PATTERN_PERIOD;
                let pattern = &self.pattern[off..off + n];
                let sent = match self.api {
                    Api::Copy => self.client.send(self.c, pattern),
                    Api::InPlace => self.client.send_with(self.c, |room| {
                        let k = room.len().min(n);
                        room[..k].copy_from_slice(&pattern[..k]);
                        k
                    }),
                };
                match sent {
                    Ok(k) => written += k,
                    Err(SendError::WouldBlock) => break,
                    Err(e) => panic!("client send: {e}"),
                }
            }
            frames += self.to_server.fill_from(&mut self.client, now);
            self.to_server.drain_into(&mut self.server, now);
            // The server reads and checks everything that arrived.
            loop {
                let want = (end - read).min(self.inbox.len());
                if want == 0 {
                    break;
                }
                let off = read % PATTERN_PERIOD;
                let pattern = &self.pattern[off..];
                let got = match self.api {
                    Api::Copy => self.server.recv(self.s, &mut self.inbox[..want]).inspect(|&n| {
                        check(&self.inbox[..n], pattern, read);
                    }),
                    Api::InPlace => self.server.recv_with(self.s, |data| {
                        let n = data.len().min(want);
                        check(&data[..n], pattern, read);
                        n
                    }),
                };
                match got {
                    Ok(0) => panic!("unexpected end of stream after {read} bytes"),
                    Ok(n) => read += n,
                    Err(RecvError::WouldBlock) => break,
                    Err(e) => panic!("server recv: {e}"),
                }
            }
            frames += self.to_client.fill_from(&mut self.server, now);
            self.to_client.drain_into(&mut self.client, now);
            for shard in [&mut self.client, &mut self.server] {
                if shard.poll_timeout().is_some_and(|t| t <= now) {
                    shard.handle_timeout(now);
                }
                while shard.poll_event().is_some() {}
            }
            if (written, read) == before {
                idle_turns += 1;
                assert!(idle_turns < STALL_LIMIT, "no progress for {STALL_LIMIT} turns at {read} bytes");
            } else {
                idle_turns = 0;
            }
        }
        frames
    }
}

/// Panics at the first byte of `got` that differs from `pattern`, naming its
/// stream offset (`got` starts at `at`).
fn check(got: &[u8], pattern: &[u8], at: usize) {
    if got != &pattern[..got.len()] {
        let i = got.iter().zip(pattern).position(|(a, b)| a != b);
        panic!("corrupted byte at offset {}", at + i.unwrap_or(0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_transfer_completes_and_verifies() {
        for api in [Api::Copy, Api::InPlace] {
            for mtu in [1500, 9000] {
                let config =
                    LoopbackConfig { total_bytes: 3_000_001, mtu, socket_buffer: 256 * 1024, chunk: 64 * 1024, api };
                let r = run(&config);
                assert_eq!(r.bytes, 3_000_001);
                assert!(r.frames > 3_000_001 / mtu as u64, "{r:?}");
                // Over IPv6 too: every byte checked, in smaller segments.
                let r6 = run_ipv6(&config);
                assert_eq!(r6.bytes, 3_000_001);
                assert!(r6.frames >= r.frames, "IPv6's MSS is 20 bytes less: {r6:?} against {r:?}");
            }
        }
    }
}
