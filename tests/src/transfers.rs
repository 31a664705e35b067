//! Bulk transfers between clients and a server, with end-to-end integrity
//! checks: each side hashes the byte stream it sent or received (SHA-256)
//! and a transfer only counts when the two hashes agree.
//!
//! The wire protocol is minimal: the client opens a connection and sends a
//! 16-byte header (transfer id, size, and whether it uploads or downloads).
//! An upload continues with `size` bytes and a FIN; the server reads to the
//! end and closes. A download ends the client's side after the header; the
//! server answers with `size` bytes and closes. The bytes follow a pattern
//! derived from the transfer id, so both ends can produce and check them.

use core::net::{SocketAddr, SocketAddrV4};
use std::collections::HashMap;

use fairway_stack::time::{Duration, Instant};
use fairway_stack::{Event, Handle, Listener, RecvError, SendError, Shard};
use sha2::{Digest, Sha256};

use crate::world::SimApp;

/// Which way the data flows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Direction {
    /// Client to server.
    Upload,
    /// Server to client.
    Download,
}

/// One transfer to run.
#[derive(Clone, Copy, Debug)]
pub struct TransferSpec {
    /// Unique id; seeds the data pattern.
    pub id: u64,
    /// Bytes of data.
    pub size: u64,
    /// Which way they flow.
    pub direction: Direction,
    /// The client host (index into the world's hosts).
    pub client: usize,
}

impl TransferSpec {
    /// `count` downloads of `size` bytes, ids from 1, spread over `clients`
    /// in turn.
    pub fn downloads(count: usize, size: u64, clients: &[usize]) -> Vec<TransferSpec> {
        (0..count)
            .map(|i| TransferSpec {
                id: i as u64 + 1,
                size,
                direction: Direction::Download,
                client: clients[i % clients.len()],
            })
            .collect()
    }
}

/// What happened to a transfer.
#[derive(Clone, Debug)]
pub struct TransferResult {
    /// The spec it ran.
    pub spec: TransferSpec,
    /// When its connection was opened.
    pub started: Option<Instant>,
    /// When the receiving side read the last byte and the end of stream.
    pub finished: Option<Instant>,
    /// The sender's hash of what it sent.
    pub sent: Option<[u8; 32]>,
    /// The receiver's hash of what it received.
    pub received: Option<[u8; 32]>,
    /// Bytes the receiver got.
    pub received_bytes: u64,
    /// A failure, if any.
    pub error: Option<String>,
}

impl TransferResult {
    /// Complete, with the receiver's bytes identical to the sender's.
    pub fn intact(&self) -> bool {
        self.error.is_none()
            && self.finished.is_some()
            && self.received_bytes == self.spec.size
            && self.sent.is_some()
            && self.sent == self.received
    }

    /// Time from open to the last byte received.
    pub fn completion(&self) -> Option<Duration> {
        Some(self.finished? - self.started?)
    }
}

/// The data pattern of a transfer: 8-byte blocks of a counter-mode mix of
/// the id, so any range can be produced independently.
#[derive(Clone, Copy, Debug)]
pub struct Pattern {
    id: u64,
}

impl Pattern {
    /// The pattern of transfer `id`.
    pub fn new(id: u64) -> Pattern {
        Pattern { id }
    }

    /// Writes the bytes at `offset..offset + out.len()`.
    pub fn fill(&self, offset: u64, out: &mut [u8]) {
        let key = self.id.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let block = |index: u64| splitmix64(key ^ index).to_le_bytes();
        // A partial first block, whole blocks, then a partial last block.
        let start = (offset % 8) as usize;
        let head = ((8 - start) % 8).min(out.len());
        if head > 0 {
            out[..head].copy_from_slice(&block(offset / 8)[start..start + head]);
        }
        let mut index = (offset + head as u64) / 8;
        let mut blocks = out[head..].chunks_exact_mut(8);
        for chunk in &mut blocks {
            chunk.copy_from_slice(&block(index));
            index += 1;
        }
        let tail = blocks.into_remainder();
        let n = tail.len();
        tail.copy_from_slice(&block(index)[..n]);
    }

    /// Whether `data` is exactly the bytes at `offset..offset + data.len()`;
    /// `scratch` (any non-zero length) holds the expected bytes piecewise.
    pub fn matches(&self, offset: u64, data: &[u8], scratch: &mut [u8]) -> bool {
        let step = scratch.len().max(1);
        data.chunks(step).enumerate().all(|(i, piece)| {
            let expected = &mut scratch[..piece.len()];
            self.fill(offset + (i * step) as u64, expected);
            expected == piece
        })
    }
}

/// SplitMix64's finaliser: a good 64-bit mix.
pub fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Bytes of the header a client opens a transfer with.
pub const HEADER_LEN: usize = 16;
const DOWNLOAD_BIT: u64 = 1 << 63;

/// The header that opens transfer `id` of `size` bytes going `direction`.
pub fn request_header(id: u64, size: u64, direction: Direction) -> [u8; HEADER_LEN] {
    let mut header = [0u8; HEADER_LEN];
    header[..8].copy_from_slice(&id.to_be_bytes());
    let flag = if direction == Direction::Download { DOWNLOAD_BIT } else { 0 };
    header[8..].copy_from_slice(&(size | flag).to_be_bytes());
    header
}
const CHUNK: usize = 64 * 1024;
/// How much of the pattern a sender produces per `send` attempt.
const FILL_PIECE: usize = 4096;

/// The sending half of a transfer.
struct Sender {
    pattern: Pattern,
    size: u64,
    sent: u64,
    hash: Sha256,
    header: [u8; HEADER_LEN],
    header_sent: usize,
    /// Send the header only (a download request).
    header_only: bool,
    done: bool,
}

impl Sender {
    fn pump(&mut self, shard: &mut Shard, h: Handle, buf: &mut [u8]) -> Result<(), SendError> {
        while self.header_sent < HEADER_LEN {
            match shard.send(h, &self.header[self.header_sent..]) {
                Ok(n) => self.header_sent += n,
                Err(SendError::WouldBlock) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        if self.header_only {
            if !self.done {
                self.done = true;
                shard.shutdown(h);
            }
            return Ok(());
        }
        // Produce the pattern a piece at a time: the send buffer usually has
        // room for a segment or two only, and generating a whole chunk that
        // `send` then declines dominated the simulation's run time.
        let piece = buf.len().min(FILL_PIECE);
        while self.sent < self.size {
            let n = ((self.size - self.sent) as usize).min(piece);
            self.pattern.fill(self.sent, &mut buf[..n]);
            match shard.send(h, &buf[..n]) {
                Ok(k) => {
                    self.hash.update(&buf[..k]);
                    self.sent += k as u64;
                    if k < n {
                        return Ok(());
                    }
                }
                Err(SendError::WouldBlock) => return Ok(()),
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// The receiving half.
struct Receiver {
    received: u64,
    hash: Sha256,
}

/// Client-side state of one connection.
struct ClientConn {
    index: usize,
    sender: Sender,
    receiver: Option<Receiver>,
}

/// Server-side state of one connection.
struct ServerConn {
    header: [u8; HEADER_LEN],
    header_len: usize,
    index: Option<usize>,
    sender: Option<Sender>,
    receiver: Option<Receiver>,
    closed: bool,
}

/// Runs a list of transfers against one server, at most `concurrency` at a time.
pub struct Transfers {
    server: usize,
    server_addr: SocketAddr,
    listener: Option<Listener>,
    specs: Vec<TransferSpec>,
    /// Results, in spec order.
    pub results: Vec<TransferResult>,
    next: usize,
    active: usize,
    concurrency: usize,
    by_id: HashMap<u64, usize>,
    clients: HashMap<(usize, Handle), ClientConn>,
    servers: HashMap<Handle, ServerConn>,
    buf: Vec<u8>,
    finished: usize,
    /// When transfer `i` may start: `first_start + i × spacing`.
    first_start: Instant,
    spacing: Duration,
    /// The latest time the application ran, so wake-ups stay in the future.
    last_now: Instant,
    /// `Event::Error` seen on any host: connections that failed (reset,
    /// refused, timed out).
    pub connection_errors: u64,
    /// Uploads the server received to the end for ids no spec names (a
    /// scripted peer's): (id, bytes, SHA-256 of them).
    pub unlisted_uploads: Vec<(u64, u64, [u8; 32])>,
}

impl Transfers {
    /// Transfers between the clients named in `specs` and the server host at
    /// `server_addr` (of either family).
    pub fn new(
        server: usize,
        server_addr: impl Into<SocketAddr>,
        specs: Vec<TransferSpec>,
        concurrency: usize,
    ) -> Transfers {
        let server_addr = server_addr.into();
        let results = specs
            .iter()
            .map(|&spec| TransferResult {
                spec,
                started: None,
                finished: None,
                sent: None,
                received: None,
                received_bytes: 0,
                error: None,
            })
            .collect();
        let by_id = specs.iter().enumerate().map(|(i, s)| (s.id, i)).collect();
        Transfers {
            server,
            server_addr,
            listener: None,
            specs,
            results,
            next: 0,
            active: 0,
            concurrency: concurrency.max(1),
            by_id,
            clients: HashMap::new(),
            servers: HashMap::new(),
            buf: vec![0; CHUNK],
            finished: 0,
            first_start: Instant::ZERO,
            spacing: Duration::ZERO,
            last_now: Instant::ZERO,
            connection_errors: 0,
            unlisted_uploads: Vec::new(),
        }
    }

    /// Starts transfer `i` no earlier than `first + i × spacing` (and, as
    /// always, in order and within the concurrency limit).
    pub fn with_schedule(mut self, first: Instant, spacing: Duration) -> Transfers {
        self.first_start = first;
        self.spacing = spacing;
        self
    }

    fn start_time(&self, index: usize) -> Instant {
        self.first_start + self.spacing.saturating_mul(index as u64)
    }

    /// The server's handles of the connections it has accepted and not yet
    /// closed, in no particular order.
    pub fn server_connections(&self) -> impl Iterator<Item = Handle> + '_ {
        self.servers.keys().copied()
    }

    /// Transfers that finished (intact or not).
    pub fn finished(&self) -> usize {
        self.finished
    }

    fn start_transfers(&mut self, host: usize, shard: &mut Shard, now: Instant) {
        while self.active < self.concurrency
            && self.next < self.specs.len()
            && self.specs[self.next].client == host
            && now >= self.start_time(self.next)
        {
            let index = self.next;
            let spec = self.specs[index];
            self.next += 1;
            match shard.connect(now, self.server_addr) {
                Ok(h) => {
                    self.active += 1;
                    self.results[index].started = Some(now);
                    let header = request_header(spec.id, spec.size, spec.direction);
                    let upload = spec.direction == Direction::Upload;
                    let sender = Sender {
                        pattern: Pattern::new(spec.id),
                        size: spec.size,
                        sent: 0,
                        hash: Sha256::new(),
                        header,
                        header_sent: 0,
                        header_only: !upload,
                        done: false,
                    };
                    let receiver = (!upload).then(|| Receiver { received: 0, hash: Sha256::new() });
                    self.clients.insert((host, h), ClientConn { index, sender, receiver });
                }
                Err(e) => {
                    self.results[index].error = Some(format!("connect: {e}"));
                    self.finished += 1;
                }
            }
        }
    }

    fn finish(&mut self, index: usize, now: Instant, received: Receiver) {
        let r = &mut self.results[index];
        r.finished = Some(now);
        r.received_bytes = received.received;
        r.received = Some(received.hash.finalize().into());
        self.finished += 1;
    }

    fn fail(&mut self, index: usize, why: String) {
        if self.results[index].error.is_none() && self.results[index].finished.is_none() {
            self.results[index].error = Some(why);
            self.finished += 1;
        }
    }

    fn on_client_event(&mut self, host: usize, shard: &mut Shard, now: Instant, h: Handle) {
        let Some(mut conn) = self.clients.remove(&(host, h)) else { return };
        let mut keep = true;
        if let Err(e) = conn.sender.pump(shard, h, &mut self.buf) {
            self.fail(conn.index, format!("client send: {e}"));
            keep = false;
        }
        let upload = self.specs[conn.index].direction == Direction::Upload;
        if keep && upload && conn.sender.sent == conn.sender.size && !conn.sender.done {
            conn.sender.done = true;
            self.results[conn.index].sent = Some(conn.sender.hash.clone().finalize().into());
            shard.shutdown(h);
        }
        // Read whatever arrived: data (downloads) or the end of stream.
        loop {
            match shard.recv(h, &mut self.buf) {
                Ok(0) => {
                    if let Some(rx) = conn.receiver.take() {
                        self.finish(conn.index, now, rx);
                    }
                    keep = false;
                    break;
                }
                Ok(n) => match conn.receiver.as_mut() {
                    Some(rx) => {
                        rx.hash.update(&self.buf[..n]);
                        rx.received += n as u64;
                    }
                    None => {
                        self.fail(conn.index, "client got data on an upload".into());
                    }
                },
                Err(RecvError::WouldBlock) => break,
                Err(e) => {
                    self.fail(conn.index, format!("client recv: {e}"));
                    keep = false;
                    break;
                }
            }
        }
        if keep {
            self.clients.insert((host, h), conn);
        } else {
            shard.close(h);
            self.active -= 1;
        }
    }

    fn on_server_event(&mut self, shard: &mut Shard, now: Instant, h: Handle) {
        let Some(mut conn) = self.servers.remove(&h) else { return };
        loop {
            if conn.header_len < HEADER_LEN {
                match shard.recv(h, &mut conn.header[conn.header_len..]) {
                    Ok(0) => {
                        conn.closed = true;
                        break;
                    }
                    Ok(n) => conn.header_len += n,
                    Err(RecvError::WouldBlock) => break,
                    Err(_) => {
                        conn.closed = true;
                        break;
                    }
                }
                if conn.header_len == HEADER_LEN {
                    let id = u64::from_be_bytes(conn.header[..8].try_into().unwrap_or_default());
                    let word = u64::from_be_bytes(conn.header[8..].try_into().unwrap_or_default());
                    conn.index = self.by_id.get(&id).copied();
                    let size = word & !DOWNLOAD_BIT;
                    if word & DOWNLOAD_BIT != 0 {
                        conn.sender = Some(Sender {
                            pattern: Pattern::new(id),
                            size,
                            sent: 0,
                            hash: Sha256::new(),
                            header: [0; HEADER_LEN],
                            header_sent: HEADER_LEN,
                            header_only: false,
                            done: false,
                        });
                    } else {
                        conn.receiver = Some(Receiver { received: 0, hash: Sha256::new() });
                    }
                }
                continue;
            }
            match shard.recv(h, &mut self.buf) {
                Ok(0) => {
                    match (conn.receiver.take(), conn.index) {
                        // Upload complete: compare with the client's hash.
                        (Some(rx), Some(index)) => self.finish(index, now, rx),
                        (Some(rx), None) => {
                            let id = u64::from_be_bytes(conn.header[..8].try_into().unwrap_or_default());
                            self.unlisted_uploads.push((id, rx.received, rx.hash.finalize().into()));
                        }
                        (None, _) => {}
                    }
                    conn.closed = true;
                    break;
                }
                Ok(n) => {
                    if let Some(rx) = conn.receiver.as_mut() {
                        rx.hash.update(&self.buf[..n]);
                        rx.received += n as u64;
                    }
                }
                Err(RecvError::WouldBlock) => break,
                Err(e) => {
                    if let Some(index) = conn.index {
                        self.fail(index, format!("server recv: {e}"));
                    }
                    conn.closed = true;
                    conn.sender = None;
                    break;
                }
            }
        }
        if let Some(tx) = conn.sender.as_mut() {
            match tx.pump(shard, h, &mut self.buf) {
                Ok(()) if tx.sent == tx.size => {
                    if let Some(index) = conn.index {
                        self.results[index].sent = Some(tx.hash.clone().finalize().into());
                    }
                    conn.sender = None;
                    shard.close(h);
                    return;
                }
                Ok(()) => {}
                Err(e) => {
                    if let Some(index) = conn.index {
                        self.fail(index, format!("server send: {e}"));
                    }
                    shard.close(h);
                    return;
                }
            }
        }
        if conn.closed && conn.sender.is_none() {
            shard.close(h);
            return;
        }
        self.servers.insert(h, conn);
    }
}

impl SimApp for Transfers {
    fn on_host(&mut self, host: usize, shard: &mut Shard, now: Instant) {
        self.last_now = self.last_now.max(now);
        if host == self.server {
            let l = match self.listener {
                Some(l) => l,
                None => {
                    let l = shard.listen(SocketAddrV4::new(core::net::Ipv4Addr::UNSPECIFIED, self.server_addr.port()));
                    let l = l.unwrap_or_else(|e| panic!("listen: {e}"));
                    self.listener = Some(l);
                    l
                }
            };
            while let Some(event) = shard.poll_event() {
                match event {
                    Event::Acceptable(_) => {
                        while let Some(h) = shard.accept(l) {
                            let conn = ServerConn {
                                header: [0; HEADER_LEN],
                                header_len: 0,
                                index: None,
                                sender: None,
                                receiver: None,
                                closed: false,
                            };
                            self.servers.insert(h, conn);
                            self.on_server_event(shard, now, h);
                        }
                    }
                    Event::Error(h, _) => {
                        self.connection_errors += 1;
                        self.on_server_event(shard, now, h);
                    }
                    Event::Readable(h) | Event::Writable(h) | Event::HangUp(h) => {
                        self.on_server_event(shard, now, h);
                    }
                    Event::Connected(_) => {}
                }
            }
            return;
        }
        self.start_transfers(host, shard, now);
        while let Some(event) = shard.poll_event() {
            match event {
                Event::Error(h, _) => {
                    self.connection_errors += 1;
                    self.on_client_event(host, shard, now, h);
                }
                Event::Connected(h) | Event::Readable(h) | Event::Writable(h) | Event::HangUp(h) => {
                    self.on_client_event(host, shard, now, h)
                }
                Event::Acceptable(_) => {}
            }
        }
        self.start_transfers(host, shard, now);
    }

    fn done(&self) -> bool {
        self.finished == self.specs.len()
    }

    fn next_wakeup(&self) -> Option<Instant> {
        // Only a start still ahead needs a wake-up; one already due waits
        // for a slot, and freeing a slot is itself a visit.
        let at = (self.next < self.specs.len()).then(|| self.start_time(self.next))?;
        (at > self.last_now).then_some(at)
    }
}

/// A summary of a set of transfers.
#[derive(Clone, Debug)]
pub struct Summary {
    /// Transfers run.
    pub total: usize,
    /// Transfers complete and byte-identical.
    pub intact: usize,
    /// Payload bytes delivered intact.
    pub bytes: u64,
    /// From the first open to the last completion.
    pub span: Duration,
    /// Completion times, sorted.
    pub completions: Vec<Duration>,
}

impl Summary {
    /// Summarises `results`.
    pub fn of(results: &[TransferResult]) -> Summary {
        let intact: Vec<_> = results.iter().filter(|r| r.intact()).collect();
        let first = results.iter().filter_map(|r| r.started).min();
        let last = results.iter().filter_map(|r| r.finished).max();
        let span = match (first, last) {
            (Some(a), Some(b)) => b - a,
            _ => Duration::ZERO,
        };
        let mut completions: Vec<Duration> = intact.iter().filter_map(|r| r.completion()).collect();
        completions.sort();
        Summary {
            total: results.len(),
            intact: intact.len(),
            bytes: intact.iter().map(|r| r.spec.size).sum(),
            span,
            completions,
        }
    }

    /// Goodput over the whole run, in Mbit/s.
    pub fn goodput_mbps(&self) -> f64 {
        if self.span == Duration::ZERO {
            return 0.0;
        }
        self.bytes as f64 * 8.0 / self.span.as_secs_f64() / 1e6
    }

    /// The `q`-quantile of completion times (nearest rank).
    pub fn completion_quantile(&self, q: f64) -> Duration {
        if self.completions.is_empty() {
            return Duration::ZERO;
        }
        let rank = ((q * self.completions.len() as f64).ceil() as usize).clamp(1, self.completions.len());
        self.completions[rank - 1]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pattern_ranges_agree_with_the_whole() {
        let p = Pattern::new(42);
        let mut whole = vec![0u8; 1000];
        p.fill(0, &mut whole);
        for (start, len) in [(0, 1), (3, 17), (8, 8), (999, 1), (123, 500)] {
            let mut part = vec![0u8; len];
            p.fill(start as u64, &mut part);
            assert_eq!(part, whole[start..start + len]);
        }
        let mut other = vec![0u8; 1000];
        Pattern::new(43).fill(0, &mut other);
        assert_ne!(whole, other);
    }

    #[test]
    fn pattern_bytes_follow_their_definition() {
        // Byte `at` is byte `at % 8` of the little-endian mix of block `at / 8`.
        let p = Pattern::new(7);
        let key = 7u64.wrapping_mul(0x9e37_79b9_7f4a_7c15);
        for offset in [0u64, 1, 5, 8, 13, 1 << 40] {
            let mut got = vec![0u8; 45];
            p.fill(offset, &mut got);
            for (i, &b) in got.iter().enumerate() {
                let at = offset + i as u64;
                assert_eq!(b, splitmix64(key ^ (at / 8)).to_le_bytes()[(at % 8) as usize], "byte {at}");
            }
        }
    }

    #[test]
    fn matches_finds_any_changed_byte() {
        let p = Pattern::new(9);
        let mut data = vec![0u8; 3000];
        p.fill(77, &mut data);
        let mut scratch = [0u8; 256];
        assert!(p.matches(77, &data, &mut scratch));
        assert!(!p.matches(78, &data, &mut scratch));
        data[2999] ^= 1;
        assert!(!p.matches(77, &data, &mut scratch));
    }

    #[test]
    fn quantiles_use_the_nearest_rank() {
        let s = Summary {
            total: 4,
            intact: 4,
            bytes: 0,
            span: Duration::ZERO,
            completions: (1..=4).map(Duration::from_millis).collect(),
        };
        assert_eq!(s.completion_quantile(0.5), Duration::from_millis(2));
        assert_eq!(s.completion_quantile(0.99), Duration::from_millis(4));
    }
}
