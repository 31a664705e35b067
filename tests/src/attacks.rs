//! The TCP resource attacks that have hit real stacks, run against the
//! server on the simulated network.
//!
//! Four legitimate clients download 8 MB each over a 100 Mbit/s bottleneck
//! with a 20 ms round trip. An attacker host on the clients' side opens
//! four connections of its own to the same server with a TCP written here
//! ([`Attacker`]: it builds and parses frames with `smoltcp::wire` and keeps
//! whatever state the attack needs), asks for 4 MiB on each (or uploads
//! it), and misbehaves for two seconds while the legitimate downloads are in
//! full flight; after that it behaves, so that its own transfers can finish
//! and show that the server's state survived intact. The attacks:
//!
//! - **segment-smack** (CVE-2018-5390): an upload that leaves a hole at the
//!   receive point and sends one-byte segments at random non-adjacent
//!   offsets of the window, to fragment the reassembly queue and make every
//!   insertion expensive;
//! - **sack-panic** (CVE-2019-11477/11478/11479): a download with MSS 8 (the
//!   server raises it to 48), whose ACKs hold the first segment missing and
//!   carry SACK blocks at misaligned edges and random places of the window,
//!   to fragment the retransmission queue and make the scoreboard walk;
//! - **sack-reneging**: SACKs data, then discards it (RFC 2018 §8 lets a
//!   receiver do so; the sender must retransmit it);
//! - **zero-window**: a window of zero right after the request, for the
//!   whole attack (the persist timer must back off, the buffers stay
//!   bounded);
//! - **ack-division**: every segment acknowledged in up to 100 pieces, to
//!   grow the congestion window by an MSS per ACK (RFC 3465 counts bytes);
//! - **optimistic-ack**: besides the true ACKs, ACKs for data not yet sent;
//! - **tiny-window**: a window of one byte (no scaling);
//! - **dup-ack-flood**: twenty duplicate ACKs for every segment, on
//!   connections with and without SACK;
//! - **rst-fin-storm**: retransmitted FINs, RSTs in the window but not at
//!   RCV.NXT, SYNs on the established connection (all answered, RFC 5961
//!   challenge ACKs rate-limited), and RSTs to ports nobody listens on
//!   (never answered);
//! - **paws-wrap**: timestamps that cross 2^31 (and 2^32) during the
//!   connection, with old duplicates injected on either side of the wrap
//!   (RFC 7323 §5).
//!
//! The same run with the attacker behaving ([`Attack::Honest`]) is the
//! reference: the legitimate goodput under attack must stay ≥ 90 % of it.
//! The server's heap (when the process counts allocations) must stay under
//! a bound derived from its configuration: its fixed structures plus, per
//! connection, the state, both buffers, the reassembly blocks and the
//! retransmission records the buffers allow at the smallest MSS.
//! [`World::clock`] times the server's handling of the attacker's frames
//! apart from the others, for the CPU comparison (run it optimised:
//! `cargo xtask sim -- --scenario attacks`).

use core::net::{Ipv4Addr, SocketAddrV4};
use std::cell::RefCell;
use std::collections::{BTreeMap, VecDeque};
use std::rc::Rc;

use fairway_nic::sim::{LinkConfig, Side};
use fairway_stack::time::{Duration, Instant};
use fairway_stack::{Config, DropReason};
use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;
use sha2::{Digest, Sha256};

use crate::forge::{Control, Segment, arp_reply, parse_tcp};
use crate::scenario::{Report, SERVER_IP, SERVER_PORT, client_ip};
use crate::stats::median;
use crate::transfers::{Direction, Pattern, Summary, TransferSpec, Transfers, request_header};
use crate::world::{Clock, Meter, RawHost, SimApp, Stop, World};
use fairway::http::pattern_byte;

/// The attacker's address.
pub const ATTACKER_IP: Ipv4Addr = Ipv4Addr::new(10, 2, 0, 1);

/// The attacker's turns come this often while it floods.
const TICK: Duration = Duration::from_micros(100);

/// Room the heap bound leaves for the shard's fixed structures and the
/// application's maps (as in the SYN-flood scenario).
const FIXED_HEAP_ALLOWANCE: i64 = 2 << 20;

/// The c100k budget of stack state per connection.
const STATE_PER_CONNECTION: i64 = 1024;

/// The smallest MSS the stack accepts from a peer (`MIN_PEER_MSS`).
const SMALLEST_MSS: i64 = 48;

/// Bytes of one retransmission record (`sent_queue::Sent`).
const RECORD_BYTES: i64 = 24;

/// The ids of the attacker's transfers start here (the legitimate ones are 1..).
const FIRST_ATTACK_ID: u64 = 1_000;

/// One attack, or none.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attack {
    /// The attacker behaves: the reference run.
    Honest,
    /// Fragments the reassembly queue with one-byte segments.
    SegmentSmack,
    /// Fragments the retransmission queue with misaligned SACK blocks at MSS 48.
    SackPanic,
    /// SACKs data, then discards it.
    SackReneging,
    /// Keeps a zero window after its request.
    ZeroWindow,
    /// Acknowledges each segment in up to 100 pieces.
    AckDivision,
    /// Acknowledges data not yet sent.
    OptimisticAck,
    /// Offers a one-byte window.
    TinyWindow,
    /// Twenty duplicate ACKs per segment.
    DupAckFlood,
    /// FINs, in-window RSTs, SYNs and RSTs to closed ports.
    RstFinStorm,
    /// Timestamps across 2^31 and 2^32 with old duplicates injected.
    PawsWrap,
}

impl Attack {
    /// Every attack (not [`Attack::Honest`]).
    pub const ALL: [Attack; 10] = [
        Attack::SegmentSmack,
        Attack::SackPanic,
        Attack::SackReneging,
        Attack::ZeroWindow,
        Attack::AckDivision,
        Attack::OptimisticAck,
        Attack::TinyWindow,
        Attack::DupAckFlood,
        Attack::RstFinStorm,
        Attack::PawsWrap,
    ];

    /// The name used in reports and on the command line.
    pub fn name(self) -> &'static str {
        match self {
            Attack::Honest => "honest",
            Attack::SegmentSmack => "segment-smack",
            Attack::SackPanic => "sack-panic",
            Attack::SackReneging => "sack-reneging",
            Attack::ZeroWindow => "zero-window",
            Attack::AckDivision => "ack-division",
            Attack::OptimisticAck => "optimistic-ack",
            Attack::TinyWindow => "tiny-window",
            Attack::DupAckFlood => "dup-ack-flood",
            Attack::RstFinStorm => "rst-fin-storm",
            Attack::PawsWrap => "paws-wrap",
        }
    }

    /// The attack named `name`.
    pub fn from_name(name: &str) -> Option<Attack> {
        Attack::ALL.into_iter().chain([Attack::Honest]).find(|a| a.name() == name)
    }

    /// Whether the attacker's transfers are uploads.
    fn uploads(self) -> bool {
        self == Attack::SegmentSmack
    }
}

/// The legitimate load, the attacker's connections and the attack's timing.
#[derive(Clone, Debug)]
pub struct AttackParams {
    /// The attack.
    pub attack: Attack,
    /// Legitimate downloads, one client host each.
    pub legitimate: usize,
    /// Bytes each downloads.
    pub size: u64,
    /// The attacker's connections.
    pub connections: usize,
    /// Bytes each of them transfers.
    pub attack_size: u64,
    /// When the misbehaviour starts.
    pub attack_start: Instant,
    /// How long it lasts.
    pub attack_duration: Duration,
    /// Forged packets per attacker turn ([`TICK`]) in the flooding attacks
    /// (segment-smack, rst-fin-storm, paws-wrap): 5 is 50,000 a second.
    pub per_tick: usize,
    /// The server's receive and send buffers.
    pub buffer: usize,
    /// The attacker's first local port; its connections take this one and
    /// the next. Rounds against one server need fresh ones, as a real
    /// client's ephemeral ports are: a reused 4-tuple meets its
    /// predecessor in TIME-WAIT, whose SYN is refused (answered with an
    /// ACK) when its sequence number is not above the old one.
    pub first_port: u16,
}

impl AttackParams {
    /// The issue's run of `attack`: 4 × 8 MB legitimate downloads, 4
    /// attacker connections of 4 MiB (so that, sharing the bottleneck with
    /// the others, they are still in flight when the attack ends), the attack from 40 ms (as soon as
    /// the attacker's data flows) for 2 s at
    /// 50,000 forged packets a second, 256 KiB server buffers.
    pub fn issue(attack: Attack) -> AttackParams {
        AttackParams {
            attack,
            legitimate: 4,
            size: 8_000_000,
            connections: 4,
            attack_size: 4 << 20,
            attack_start: Instant::from_millis(40),
            attack_duration: Duration::from_secs(2),
            per_tick: 5,
            buffer: 256 * 1024,
            first_port: 40_000,
        }
    }

    fn attack_end(&self) -> Instant {
        self.attack_start + self.attack_duration
    }
}

/// Where a scripted connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Phase {
    SynSent,
    Open,
    /// The transfer completed (all data and the server's FIN, or for an
    /// upload everything acknowledged and the server's FIN).
    Done,
    /// The server reset the connection.
    Reset,
}

/// What the attacker's connections ask of the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    /// The [`Transfers`] protocol of the simulated scenarios.
    Transfers,
    /// `GET /bytes/N` of the `fairway` server, N being the transfer's size;
    /// the body is [`pattern_byte`]s, after a `200` head.
    HttpBytes,
}

/// One connection of the attacker's TCP.
struct RawConn {
    id: u64,
    local: SocketAddrV4,
    phase: Phase,
    upload: bool,
    size: u64,
    /// What we send before any upload data.
    request: Vec<u8>,
    /// HTTP: the response head as received so far, and its length once
    /// complete; `None` for the [`Transfers`] protocol.
    http_head: Option<(Vec<u8>, Option<u64>)>,
    /// Negotiate SACK and window scaling.
    sack: bool,
    wscale: Option<u8>,
    mss: u16,
    ts_base: u32,
    // Sending: our stream is the request header, then (uploads) the data, then FIN.
    iss: u32,
    /// Stream offsets: acknowledged, next to send, highest sent.
    snd_una: u64,
    snd_nxt: u64,
    snd_max: u64,
    fin_acked: bool,
    peer_window: u64,
    peer_wscale: u8,
    last_progress: Instant,
    // Receiving.
    irs: u32,
    sack_ok: bool,
    /// Bytes received in order.
    rcv_nxt: u64,
    ooo: BTreeMap<u64, Vec<u8>>,
    fin_received: bool,
    ts_recent: u32,
    hash: Sha256,
    intact: bool,
    /// The last segments from the server, for a report of a connection
    /// that did not finish: when (ms), stream offset, length, control.
    recent: VecDeque<(u64, u64, usize, Control)>,
}

/// Segments [`RawConn::recent`] keeps.
const RECENT: usize = 6;

impl RawConn {
    fn stream_len(&self) -> u64 {
        self.request.len() as u64 + if self.upload { self.size } else { 0 }
    }

    /// Our stream's bytes at `offset..offset + out.len()`.
    fn fill(&self, offset: u64, out: &mut [u8]) {
        let request_len = self.request.len() as u64;
        for (i, byte) in out.iter_mut().enumerate() {
            let at = offset + i as u64;
            if at < request_len {
                *byte = self.request[at as usize];
            }
        }
        let data_from = request_len.saturating_sub(offset) as usize;
        if data_from < out.len() {
            Pattern::new(self.id).fill(offset + data_from as u64 - request_len, &mut out[data_from..]);
        }
    }

    /// Bytes of the response body received in order.
    fn body_received(&self) -> u64 {
        match &self.http_head {
            None => self.rcv_nxt,
            Some((_, head_len)) => head_len.map_or(0, |h| self.rcv_nxt.saturating_sub(h)),
        }
    }

    fn seq(&self, offset: u64) -> u32 {
        self.iss.wrapping_add(1).wrapping_add(offset as u32)
    }

    fn ack_number(&self) -> u32 {
        self.irs.wrapping_add(1).wrapping_add(self.rcv_nxt as u32).wrapping_add(u32::from(self.fin_received))
    }

    fn tsval(&self, now: Instant) -> u32 {
        self.ts_base.wrapping_add(now.total_millis() as u32)
    }

    /// The SACK blocks (sequence numbers) of what is held out of order, the
    /// one holding `latest` first (RFC 2018 §4).
    fn sack_blocks(&self, latest: Option<u64>) -> [Option<(u32, u32)>; 3] {
        let mut merged: Vec<(u64, u64)> = Vec::new();
        for (&start, data) in &self.ooo {
            let end = start + data.len() as u64;
            match merged.last_mut() {
                Some(last) if start <= last.1 => last.1 = last.1.max(end),
                _ => merged.push((start, end)),
            }
        }
        if let Some(i) = latest.and_then(|l| merged.iter().position(|&(s, e)| s <= l && l < e)) {
            let first = merged.remove(i);
            merged.insert(0, first);
        }
        let base = self.irs.wrapping_add(1);
        let mut blocks = [None; 3];
        for (slot, &(s, e)) in blocks.iter_mut().zip(&merged) {
            *slot = Some((base.wrapping_add(s as u32), base.wrapping_add(e as u32)));
        }
        blocks
    }

    /// Takes in `data` at stream offset `offset` of the server's stream.
    fn take_in(&mut self, offset: u64, data: &[u8]) {
        let end = offset + data.len() as u64;
        if end <= self.rcv_nxt || data.is_empty() {
            return;
        }
        if offset > self.rcv_nxt {
            let keep = self.ooo.get(&offset).is_none_or(|held| held.len() < data.len());
            if keep {
                self.ooo.insert(offset, data.to_vec());
            }
            return;
        }
        self.deliver(&data[(self.rcv_nxt - offset) as usize..]);
        while let Some(entry) = self.ooo.first_entry() {
            if *entry.key() > self.rcv_nxt {
                break;
            }
            let (start, held) = entry.remove_entry();
            if start + held.len() as u64 > self.rcv_nxt {
                let from = (self.rcv_nxt - start) as usize;
                self.deliver(&held[from..]);
            }
        }
    }

    fn deliver(&mut self, mut data: &[u8]) {
        let mut body_at = self.rcv_nxt;
        if let Some((head, head_len)) = self.http_head.as_mut() {
            if head_len.is_none() {
                // The head first: up to its blank line, a 200.
                let take = data.len().min(4096usize.saturating_sub(head.len()));
                head.extend_from_slice(&data[..take]);
                match head.windows(4).position(|w| w == b"\r\n\r\n") {
                    Some(end) => {
                        let len = end as u64 + 4;
                        *head_len = Some(len);
                        let fresh = (len - self.rcv_nxt) as usize;
                        self.intact &= head.starts_with(b"HTTP/1.1 200 ");
                        head.truncate(len as usize);
                        self.rcv_nxt += fresh as u64;
                        data = &data[fresh..];
                    }
                    None if head.len() >= 4096 => {
                        self.intact = false;
                        self.rcv_nxt += data.len() as u64;
                        return;
                    }
                    None => {
                        self.rcv_nxt += data.len() as u64;
                        return;
                    }
                }
            }
            body_at = self.body_received();
        }
        let mut scratch = [0u8; 512];
        let matches = if self.http_head.is_some() {
            data.iter().enumerate().all(|(i, &b)| b == pattern_byte(body_at + i as u64))
        } else {
            Pattern::new(self.id).matches(body_at, data, &mut scratch)
        };
        if !matches || body_at + data.len() as u64 > self.size {
            self.intact = false;
        }
        self.hash.update(data);
        self.rcv_nxt += data.len() as u64;
    }
}

/// What the attacker counted.
#[derive(Clone, Copy, Debug, Default)]
pub struct AttackerCounts {
    /// Frames it sent in all.
    pub sent: u64,
    /// Of which sent only for the attack (beyond what an honest peer sends).
    pub forged: u64,
    /// Frames from the server during the attack.
    pub received_during_attack: u64,
    /// Of which data segments (payload, not a window probe of one byte).
    pub data_during_attack: u64,
    /// Frames from the server in all.
    pub received: u64,
    /// RSTs the server sent to the attacker.
    pub resets_received: u64,
}

/// The attacker: a host without a stack, running [`RawConn`]s.
pub struct Attacker {
    attack: Attack,
    ip: Ipv4Addr,
    mac: [u8; 6],
    server_mac: [u8; 6],
    server: SocketAddrV4,
    conns: Vec<RawConn>,
    start: Instant,
    end: Instant,
    per_tick: usize,
    next_tick: Option<Instant>,
    /// The window was reopened after a zero-window or tiny-window attack.
    reopened: bool,
    rng: Xoshiro256PlusPlus,
    frame: Vec<u8>,
    /// What it counted.
    pub counts: AttackerCounts,
}

impl Attacker {
    /// An attacker for `p` at `ip` (MAC `mac`), connecting to `server`
    /// (whose MAC is `server_mac`) with `request`.
    pub fn new(
        seed: u64,
        p: &AttackParams,
        (ip, mac): (Ipv4Addr, [u8; 6]),
        (server, server_mac): (SocketAddrV4, [u8; 6]),
        request: &Request,
    ) -> Attacker {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed ^ 0xa77a_c4e5);
        let conns = (0..p.connections)
            .map(|i| {
                let (sack, wscale, mss, ts_base) = match p.attack {
                    Attack::SackPanic => (true, Some(7), 8, rng.random()),
                    Attack::TinyWindow => (true, None, 1460, rng.random()),
                    Attack::DupAckFlood => (i % 2 == 0, Some(7), 1460, rng.random()),
                    // Half cross 2^31, half 2^32, 300 ms into the attack.
                    Attack::PawsWrap => {
                        let wrap: u32 = if i % 2 == 0 { 1 << 31 } else { 0 };
                        let at = (p.attack_start.total_millis() + 300) as u32;
                        (true, Some(7), 1460, wrap.wrapping_sub(at))
                    }
                    _ => (true, Some(7), 1460, rng.random()),
                };
                let id = FIRST_ATTACK_ID + i as u64;
                let direction = if p.attack.uploads() { Direction::Upload } else { Direction::Download };
                let (request, http_head) = match request {
                    Request::Transfers => (request_header(id, p.attack_size, direction).to_vec(), None),
                    Request::HttpBytes => (
                        format!("GET /bytes/{} HTTP/1.1\r\nHost: {server}\r\nConnection: close\r\n\r\n", p.attack_size)
                            .into_bytes(),
                        Some((Vec::new(), None)),
                    ),
                };
                RawConn {
                    id,
                    local: SocketAddrV4::new(ip, p.first_port + i as u16),
                    phase: Phase::SynSent,
                    upload: p.attack.uploads(),
                    size: p.attack_size,
                    request,
                    http_head,
                    sack,
                    wscale,
                    mss,
                    ts_base,
                    iss: rng.random(),
                    snd_una: 0,
                    snd_nxt: 0,
                    snd_max: 0,
                    fin_acked: false,
                    peer_window: 0,
                    peer_wscale: 0,
                    last_progress: Instant::ZERO,
                    irs: 0,
                    sack_ok: false,
                    rcv_nxt: 0,
                    ooo: BTreeMap::new(),
                    fin_received: false,
                    ts_recent: 0,
                    hash: Sha256::new(),
                    intact: true,
                    recent: VecDeque::with_capacity(RECENT),
                }
            })
            .collect();
        Attacker {
            attack: p.attack,
            ip,
            mac,
            server_mac,
            server,
            conns,
            start: p.attack_start,
            end: p.attack_end(),
            per_tick: p.per_tick,
            next_tick: Some(Instant::ZERO),
            reopened: false,
            rng,
            frame: Vec::with_capacity(1600),
            counts: AttackerCounts::default(),
        }
    }

    /// Every connection finished its transfer or was reset.
    pub fn done(&self) -> bool {
        self.conns.iter().all(|c| matches!(c.phase, Phase::Done | Phase::Reset))
    }

    /// One line per connection that did not complete intact.
    #[must_use]
    pub fn unfinished(&self) -> Vec<String> {
        self.conns
            .iter()
            .filter(|c| c.phase != Phase::Done || !c.intact)
            .map(|c| {
                format!(
                    "attacker connection {} ({}): {:?}, intact {}, received {} (+{} held), sent {}/{} acked {}, fin {}, \
                     last progress at {} ms; the last segments from the server (ms, offset, length, control): {:?}",
                    c.id,
                    c.local,
                    c.phase,
                    c.intact,
                    c.rcv_nxt,
                    c.ooo.len(),
                    c.snd_nxt,
                    c.stream_len(),
                    c.snd_una,
                    c.fin_received,
                    c.last_progress.total_millis(),
                    c.recent
                )
            })
            .collect()
    }

    /// Transfers that completed intact, of all.
    pub fn intact(&self) -> (usize, usize) {
        (self.conns.iter().filter(|c| c.phase == Phase::Done && c.intact).count(), self.conns.len())
    }

    /// The hash of the upload of connection `i` as the server should have
    /// received it.
    fn upload_hash(&self, i: usize) -> [u8; 32] {
        let c = &self.conns[i];
        let mut hash = Sha256::new();
        let mut buf = vec![0u8; 4096];
        let mut at = 0;
        while at < c.size {
            let n = ((c.size - at) as usize).min(buf.len());
            Pattern::new(c.id).fill(at, &mut buf[..n]);
            hash.update(&buf[..n]);
            at += n as u64;
        }
        hash.finalize().into()
    }

    fn active(&self, now: Instant) -> bool {
        self.start <= now && now < self.end
    }

    fn base(&self, c: &RawConn) -> Segment<'static> {
        Segment::new(self.mac, self.server_mac, c.local, self.server)
    }

    fn emit(&mut self, segment: &Segment<'_>, out: &mut Vec<Vec<u8>>, forged: bool) {
        segment.write(&mut self.frame);
        out.push(self.frame.clone());
        self.counts.sent += 1;
        self.counts.forged += u64::from(forged);
    }

    /// The window connection `i` offers now.
    fn window(&self, i: usize, now: Instant) -> u16 {
        let c = &self.conns[i];
        match self.attack {
            Attack::ZeroWindow if self.active(now) && c.rcv_nxt > 0 => 0,
            Attack::TinyWindow if self.active(now) => 1,
            _ => u16::MAX,
        }
    }

    /// A pure ACK (with SACK blocks and timestamps) of connection `i`.
    fn ack_segment(&self, i: usize, now: Instant, latest: Option<u64>) -> Segment<'static> {
        let c = &self.conns[i];
        // Past our FIN once it was sent.
        let fin_sent = c.snd_nxt == c.stream_len() && c.snd_max > c.stream_len();
        Segment {
            seq: c.seq(c.snd_nxt + u64::from(fin_sent)),
            ack: Some(c.ack_number()),
            window: self.window(i, now),
            timestamp: Some((c.tsval(now), c.ts_recent)),
            sack: if c.sack_ok { c.sack_blocks(latest) } else { [None; 3] },
            ..self.base(c)
        }
    }

    /// Sends what the window allows of connection `i`'s stream (from
    /// `snd_nxt`), then its FIN; an ACK alone when `force` and nothing else
    /// went out.
    fn pump(&mut self, i: usize, now: Instant, force: bool, latest: Option<u64>, out: &mut Vec<Vec<u8>>) {
        let mut sent_any = false;
        let mut payload = [0u8; 1000];
        loop {
            let c = &self.conns[i];
            let len = c.stream_len();
            let right = c.snd_una + c.peer_window;
            if c.snd_nxt >= len || c.snd_nxt >= right {
                break;
            }
            // The segment-smack upload holds its in-order data back during
            // the attack (only the header goes).
            if self.attack == Attack::SegmentSmack && self.active(now) && c.snd_nxt >= c.request.len() as u64 {
                break;
            }
            let n = (len - c.snd_nxt).min(right - c.snd_nxt).min(payload.len() as u64) as usize;
            c.fill(c.snd_nxt, &mut payload[..n]);
            let seg = Segment { control: Control::Psh, payload: &payload[..n], ..self.ack_segment(i, now, latest) };
            seg.write(&mut self.frame);
            out.push(self.frame.clone());
            self.counts.sent += 1;
            let c = &mut self.conns[i];
            c.snd_nxt += n as u64;
            c.snd_max = c.snd_max.max(c.snd_nxt);
            sent_any = true;
        }
        let c = &self.conns[i];
        let fin_due = c.snd_nxt == c.stream_len() && c.snd_max == c.stream_len() && !c.fin_acked;
        if fin_due && !(self.attack == Attack::SegmentSmack && self.active(now)) {
            let seg = Segment { control: Control::Fin, ..self.ack_segment(i, now, latest) };
            self.emit(&seg, out, false);
            self.conns[i].snd_max += 1;
            sent_any = true;
        }
        if force && !sent_any {
            let seg = self.ack_segment(i, now, latest);
            self.emit(&seg, out, false);
        }
    }

    fn on_segment(&mut self, now: Instant, s: Segment<'_>, out: &mut Vec<Vec<u8>>) {
        let Some(i) = self.conns.iter().position(|c| c.local == s.dst) else { return };
        self.counts.received += 1;
        let active = self.active(now);
        if active {
            self.counts.received_during_attack += 1;
            self.counts.data_during_attack += u64::from(s.payload.len() > 1);
        }
        if s.control == Control::Rst {
            self.counts.resets_received += 1;
            // After the end, an RST answers the attack's own leftovers (an
            // ACK or a FIN for a connection the server has closed).
            if self.conns[i].phase != Phase::Done {
                self.conns[i].phase = Phase::Reset;
            }
            return;
        }
        let c = &mut self.conns[i];
        if let Some((tsval, _)) = s.timestamp {
            c.ts_recent = tsval;
        }
        if c.phase == Phase::SynSent {
            if s.control != Control::Syn || s.ack != Some(c.iss.wrapping_add(1)) {
                return;
            }
            c.irs = s.seq;
            c.phase = Phase::Open;
            c.sack_ok = c.sack && s.sack_permitted;
            c.peer_wscale = if c.wscale.is_some() { s.window_scale.unwrap_or(0) } else { 0 };
            c.peer_window = u64::from(s.window);
            c.last_progress = now;
            self.pump(i, now, true, None, out);
            return;
        }
        if c.phase == Phase::Done && (!s.payload.is_empty() || s.control == Control::Fin) {
            // A retransmission after the end: our last ACK was lost.
            let seg = self.ack_segment(i, now, None);
            self.emit(&seg, out, false);
            return;
        }
        if c.phase != Phase::Open {
            return;
        }
        if let Some(ack) = s.ack {
            let acked = u64::from(ack.wrapping_sub(c.seq(c.snd_una)));
            if acked > 0 && c.snd_una + acked <= c.snd_max {
                c.snd_una += acked;
                c.last_progress = now;
                if c.snd_una > c.stream_len() {
                    c.fin_acked = true;
                    c.snd_una = c.stream_len();
                }
                c.snd_nxt = c.snd_nxt.max(c.snd_una);
            }
            c.peer_window = u64::from(s.window) << c.peer_wscale;
        }
        let offset = u64::from(s.seq.wrapping_sub(c.irs.wrapping_add(1)));
        let len = s.payload.len() as u64;
        if c.recent.len() == RECENT {
            c.recent.pop_front();
        }
        c.recent.push_back((now.total_millis(), offset, s.payload.len(), s.control));
        // A wrapped offset is old data from before the receive point.
        let sane = offset < 1 << 31;
        let mut latest = None;
        if sane && len > 0 {
            let window_end = match self.attack {
                Attack::ZeroWindow | Attack::TinyWindow if active => c.rcv_nxt + u64::from(self.window(i, now)),
                _ => u64::MAX,
            };
            let c = &mut self.conns[i];
            let held_back = match self.attack {
                // The first segment "lost" for the whole attack.
                Attack::SackPanic => active && offset <= c.rcv_nxt,
                // Every eighth new segment dropped, to make holes to SACK across.
                Attack::SackReneging => active && (offset / 1000) % 8 == 3 && offset >= c.rcv_nxt,
                _ => false,
            };
            if !held_back {
                let fits = (window_end.saturating_sub(offset) as usize).min(s.payload.len());
                if offset < window_end {
                    c.take_in(offset, &s.payload[..fits]);
                }
            }
            latest = Some(offset);
        }
        let c = &mut self.conns[i];
        if sane && s.control == Control::Fin && offset + len == c.rcv_nxt && !c.fin_received {
            c.fin_received = true;
        }
        let wants_ack = len > 0 || s.control == Control::Fin;
        if wants_ack {
            self.answer(i, now, offset, len, latest, out);
        } else {
            self.pump(i, now, false, None, out);
        }
        let c = &mut self.conns[i];
        let sent_all = !c.upload || c.fin_acked;
        if c.fin_received && sent_all && c.ooo.is_empty() {
            c.phase = Phase::Done;
            if c.upload {
                // The server's data on an upload is its FIN only.
                c.intact = c.rcv_nxt == 0;
            } else {
                c.intact &= c.body_received() == c.size;
            }
        }
    }

    /// Acknowledges a segment of `len` bytes at `offset`, the way the attack
    /// wants.
    fn answer(&mut self, i: usize, now: Instant, offset: u64, len: u64, latest: Option<u64>, out: &mut Vec<Vec<u8>>) {
        let active = self.active(now);
        match self.attack {
            Attack::SackPanic if active && self.conns[i].sack_ok => {
                // The true blocks, then blocks with misaligned edges at
                // random places of what was sent.
                let c = &self.conns[i];
                let base = c.irs.wrapping_add(1);
                let mut sack = c.sack_blocks(latest);
                let span = (c.rcv_nxt + c.ooo.keys().last().map_or(0, |&k| k + 1)).max(offset + len).max(2);
                for slot in sack.iter_mut().skip(1) {
                    let a = self.rng.random_range(1..span);
                    let b = (a + self.rng.random_range(1..100u64)).min(span);
                    *slot = Some((base.wrapping_add(a as u32), base.wrapping_add(b as u32)));
                }
                let first = (latest.unwrap_or(offset) + 1, offset + len.saturating_sub(1));
                if first.0 < first.1 {
                    sack[0] = Some((base.wrapping_add(first.0 as u32), base.wrapping_add(first.1 as u32)));
                }
                let seg = Segment { sack, ..self.ack_segment(i, now, latest) };
                self.emit(&seg, out, true);
            }
            Attack::SackReneging if active => {
                self.pump(i, now, true, latest, out);
                // What was just SACKed is forgotten.
                self.conns[i].ooo.clear();
            }
            Attack::AckDivision if active && len > 0 => {
                let c = &self.conns[i];
                let pieces = len.min(100);
                let top = c.ack_number();
                let from = top.wrapping_sub(len as u32);
                for k in 1..pieces {
                    let ack = from.wrapping_add((len * k / pieces) as u32);
                    let seg = Segment { ack: Some(ack), ..self.ack_segment(i, now, latest) };
                    self.emit(&seg, out, true);
                }
                self.pump(i, now, true, latest, out);
            }
            Attack::OptimisticAck if active => {
                self.pump(i, now, true, latest, out);
                let c = &self.conns[i];
                let ahead = c.ack_number().wrapping_add(1 << 20);
                let seg = Segment { ack: Some(ahead), ..self.ack_segment(i, now, latest) };
                self.emit(&seg, out, true);
            }
            Attack::DupAckFlood if active => {
                self.pump(i, now, true, latest, out);
                let seg = self.ack_segment(i, now, latest);
                for _ in 0..20 {
                    self.emit(&seg, out, true);
                }
            }
            _ => self.pump(i, now, true, latest, out),
        }
    }

    /// The attacker's timed work: retransmissions, the floods, reopening a
    /// closed window.
    fn on_tick(&mut self, now: Instant, out: &mut Vec<Vec<u8>>) {
        for i in 0..self.conns.len() {
            let c = &mut self.conns[i];
            if c.phase == Phase::SynSent
                && (c.last_progress == Instant::ZERO || now - c.last_progress >= Duration::from_secs(1))
            {
                c.last_progress = now;
                let seg = Segment {
                    control: Control::Syn,
                    seq: c.iss,
                    window: u16::MAX,
                    mss: Some(c.mss),
                    window_scale: c.wscale,
                    sack_permitted: c.sack,
                    timestamp: Some((c.tsval(now), 0)),
                    ..Segment::new(self.mac, self.server_mac, c.local, self.server)
                };
                self.emit(&seg, out, false);
                continue;
            }
            if c.phase != Phase::Open {
                continue;
            }
            // Go back to the first unacknowledged byte after 300 ms without
            // progress (also a window probe).
            let outstanding = c.snd_una < c.snd_max || c.snd_nxt < c.stream_len();
            if outstanding && now - c.last_progress >= Duration::from_millis(300) {
                c.last_progress = now;
                c.snd_nxt = c.snd_una;
                if c.snd_max > c.stream_len() && !c.fin_acked {
                    c.snd_max = c.stream_len();
                }
                if c.peer_window == 0 {
                    c.peer_window = 1;
                }
                self.pump(i, now, false, None, out);
            }
        }
        if !self.reopened && now >= self.end && matches!(self.attack, Attack::ZeroWindow | Attack::TinyWindow) {
            self.reopened = true;
            for i in 0..self.conns.len() {
                if self.conns[i].phase == Phase::Open {
                    self.pump(i, now, true, None, out);
                }
            }
        }
        if self.active(now) {
            for _ in 0..self.per_tick {
                self.flood(now, out);
            }
        }
    }

    /// One forged packet of a flooding attack.
    fn flood(&mut self, now: Instant, out: &mut Vec<Vec<u8>>) {
        let open = self.conns.iter().filter(|c| c.phase == Phase::Open).count();
        if open == 0 {
            return;
        }
        let pick = self.rng.random_range(0..open);
        let Some(i) = (0..self.conns.len()).filter(|&i| self.conns[i].phase == Phase::Open).nth(pick) else { return };
        match self.attack {
            Attack::SegmentSmack => {
                let c = &self.conns[i];
                // Non-adjacent single bytes past a one-byte hole at the
                // receive point, anywhere in the window.
                let window = c.peer_window.max(4);
                let at = c.snd_una + 1 + 2 * self.rng.random_range(0..window / 2);
                if at >= c.stream_len() {
                    return;
                }
                let mut byte = [0u8; 1];
                c.fill(at, &mut byte);
                let seg = Segment {
                    seq: c.seq(at),
                    ack: Some(c.ack_number()),
                    window: u16::MAX,
                    timestamp: Some((c.tsval(now), c.ts_recent)),
                    payload: &byte,
                    ..self.base(c)
                };
                self.emit(&seg, out, true);
            }
            Attack::RstFinStorm => {
                let c = &self.conns[i];
                let kind = self.rng.random_range(0..4u8);
                let ack = self.ack_segment(i, now, None);
                let seg = match kind {
                    // Our FIN again (its sequence number is the last of the stream).
                    0 => Segment { control: Control::Fin, seq: c.seq(c.stream_len()), ..ack },
                    // An RST inside the window, not at RCV.NXT.
                    1 => Segment {
                        control: Control::Rst,
                        seq: c.seq(c.snd_max).wrapping_add(self.rng.random_range(1..30_000)),
                        ..ack
                    },
                    // A SYN on the established connection.
                    2 => Segment { control: Control::Syn, ack: None, seq: c.iss.wrapping_add(7), ..ack },
                    // An RST to a port nobody listens on.
                    _ => {
                        let port = self.rng.random_range(1..u16::MAX).max(2);
                        let port = if port == SERVER_PORT { port + 1 } else { port };
                        Segment {
                            control: Control::Rst,
                            dst: SocketAddrV4::new(*self.server.ip(), port),
                            seq: self.rng.random(),
                            ..ack
                        }
                    }
                };
                self.emit(&seg, out, true);
            }
            Attack::PawsWrap => {
                let c = &self.conns[i];
                // An old duplicate of our last ACK: its TSval from before
                // the wrap, or half the number space away.
                let tsval = if self.rng.random() {
                    c.tsval(now).wrapping_sub(self.rng.random_range(1_000..100_000))
                } else {
                    c.tsval(now).wrapping_add((1 << 31) + self.rng.random_range(1..1_000))
                };
                let seg = Segment { timestamp: Some((tsval, c.ts_recent)), ..self.ack_segment(i, now, None) };
                self.emit(&seg, out, true);
            }
            _ => {}
        }
    }
}

impl RawHost for Attacker {
    fn on_frames(&mut self, now: Instant, frames: &[Vec<u8>], out: &mut Vec<Vec<u8>>) {
        for frame in frames {
            if let Some(reply) = arp_reply(frame, self.mac, self.ip) {
                out.push(reply);
            } else if let Some(segment) = parse_tcp(frame) {
                self.on_segment(now, segment, out);
            }
        }
        if self.next_tick.is_some_and(|t| t <= now) {
            self.on_tick(now, out);
            let mut next = now + TICK;
            // Between the attack and the end, a turn every 10 ms is enough
            // for the retransmission timer.
            if now >= self.end {
                next = now + Duration::from_millis(10);
            } else if now < self.start {
                next = next.min(self.start);
            }
            self.next_tick = (!self.done()).then_some(next);
        }
    }

    fn next_wakeup(&self) -> Option<Instant> {
        self.next_tick
    }
}

/// What an attack run measured.
#[derive(Clone, Debug)]
pub struct AttackResult {
    /// The parameters.
    pub params: AttackParams,
    /// Why the run ended.
    pub stop: Stop,
    /// Legitimate downloads intact, of all.
    pub intact: (usize, usize),
    /// The attacker's transfers intact, of all.
    pub attacker_intact: (usize, usize),
    /// Legitimate goodput: their bytes over the time from the first start
    /// to the last finish, in Mbit/s.
    pub goodput_mbps: f64,
    /// The server's largest net heap bytes (0 when not counted).
    pub peak_heap: i64,
    /// The bound on it.
    pub heap_bound: i64,
    /// What the attacker counted.
    pub attacker: AttackerCounts,
    /// The server's drops during the run, per reason (only reasons that moved).
    pub drops: Vec<(DropReason, u64)>,
    /// The server's counters of note.
    pub server_resets_sent: u64,
    /// Retransmissions by the server.
    pub server_retransmits: u64,
    /// SACK reneging detected by the server.
    pub server_reneging: u64,
    /// Connections the server still holds at the end (all transfers done).
    pub server_connections_left: usize,
    /// The clock on the server.
    pub clock: Clock,
    /// The report.
    pub lines: Vec<String>,
}

impl AttackResult {
    /// Drops counted for `reason`.
    pub fn dropped(&self, reason: DropReason) -> u64 {
        self.drops.iter().find(|(r, _)| *r == reason).map_or(0, |&(_, n)| n)
    }

    /// Mean wall time the server spent per frame from the attacker and per
    /// other frame, in nanoseconds.
    pub fn ns_per_frame(&self) -> (f64, f64) {
        let mean = |(n, t): (u64, std::time::Duration)| if n == 0 { 0.0 } else { t.as_nanos() as f64 / n as f64 };
        (mean(self.clock.from_frames), mean(self.clock.other_frames))
    }
}

/// The heap a server with `config` may use for `connections` connections.
pub fn heap_bound(config: &Config, connections: usize) -> i64 {
    let (rx, tx) = (config.tcp.rx_buffer as i64, config.tcp.tx_buffer as i64);
    let blocks = fairway_stack::tcp::assembler::blocks_for_buffer(config.tcp.rx_buffer, config.tcp.reassembly_blocks);
    let records = tx / SMALLEST_MSS + 1;
    let per_connection = STATE_PER_CONNECTION + rx + tx + blocks as i64 * 8 + records * RECORD_BYTES;
    FIXED_HEAP_ALLOWANCE + connections as i64 * per_connection
}

/// The legitimate downloads and the attacker, watched.
struct Run {
    transfers: Transfers,
    attacker: Rc<RefCell<Attacker>>,
}

impl SimApp for Run {
    fn on_host(&mut self, host: usize, shard: &mut fairway_stack::Shard, now: Instant) {
        self.transfers.on_host(host, shard, now);
    }

    fn done(&self) -> bool {
        self.transfers.done() && self.attacker.borrow().done()
    }

    fn next_wakeup(&self) -> Option<Instant> {
        self.transfers.next_wakeup()
    }
}

/// Drives an application past its end.
struct Linger<'a, A>(&'a mut A);

impl<A: SimApp> SimApp for Linger<'_, A> {
    fn on_host(&mut self, host: usize, shard: &mut fairway_stack::Shard, now: Instant) {
        self.0.on_host(host, shard, now);
    }

    fn done(&self) -> bool {
        false
    }
}

/// Runs `p` once; `heap` reads the process's net heap bytes (see
/// [`crate::scenario::read_net_heap_bytes`]).
pub fn attack(seed: u64, p: &AttackParams, heap: fn() -> i64) -> AttackResult {
    let bottleneck =
        LinkConfig::ideal().with_delay(Duration::from_millis(10)).with_bandwidth_mbps(100).with_queue_bytes(250_000);
    let mut world = World::new(seed, 1500, bottleneck, bottleneck);
    let mut server_cfg = world.config_for(SERVER_IP);
    server_cfg.tcp.rx_buffer = p.buffer;
    server_cfg.tcp.tx_buffer = p.buffer;
    let bound = heap_bound(&server_cfg, p.legitimate + p.connections);
    let before = heap();
    let server = world.add_host(Side::Right, server_cfg, LinkConfig::ideal());
    let created = heap() - before;
    let access = LinkConfig::ideal().with_delay(Duration::from_micros(100));
    let clients: Vec<usize> = (0..p.legitimate)
        .map(|i| {
            let mut cfg = world.config_for(client_ip(i));
            cfg.tcp.rx_buffer = 1 << 20;
            world.add_host(Side::Left, cfg, access)
        })
        .collect();
    let server_addr = SocketAddrV4::new(SERVER_IP, SERVER_PORT);
    let attacker = Rc::new(RefCell::new(Attacker::new(
        seed,
        p,
        (ATTACKER_IP, World::mac_of(ATTACKER_IP)),
        (server_addr, World::mac_of(SERVER_IP)),
        &Request::Transfers,
    )));
    world.add_raw_host(Side::Left, ATTACKER_IP, access, attacker.clone());
    // The simulated network's frames are allocated during the server's
    // turns (when it transmits): reserve them up front, so that only the
    // server's own memory is counted. A 250 KB queue of the smallest frames
    // and a bottleneck's worth in flight each way fit.
    world.net.reserve_frames(16_384);
    world.meter = Some(Meter { host: server, read: heap, bytes: created });
    world.clock = Some(Clock::new(server, World::mac_of(ATTACKER_IP)));

    let specs = TransferSpec::downloads(p.legitimate, p.size, &clients);
    let transfers = Transfers::new(server, server_addr, specs, p.legitimate);
    let mut app = Run { transfers, attacker: attacker.clone() };
    let drops_before: Vec<u64> =
        DropReason::ALL.iter().map(|&r| world.hosts[server].shard.counters().dropped(r)).collect();

    const MAX_STEPS: u64 = 100_000_000;
    const SLICE: Duration = Duration::from_millis(10);
    let limit = Instant::from_secs(120);
    let mut peak_heap = created;
    let stop = loop {
        let until = world.now() + SLICE;
        let stop = world.run(&mut app, until, MAX_STEPS);
        if let Some(m) = world.meter {
            peak_heap = peak_heap.max(m.bytes);
        }
        match stop {
            Stop::TimeLimit if world.now() < limit => continue,
            other => break other,
        }
    };
    // The last ACKs of the server's FINs are still on their way.
    let linger_until = world.now() + Duration::from_secs(1);
    world.run(&mut Linger(&mut app), linger_until, MAX_STEPS);

    let shard = &world.hosts[server].shard;
    let counters = shard.counters();
    let drops: Vec<(DropReason, u64)> = DropReason::ALL
        .iter()
        .zip(&drops_before)
        .map(|(&r, &b)| (r, counters.dropped(r) - b))
        .filter(|&(_, n)| n > 0)
        .collect();
    let summary = Summary::of(&app.transfers.results);
    let first = app.transfers.results.iter().filter_map(|r| r.started).min().unwrap_or(Instant::ZERO);
    let last = app.transfers.results.iter().filter_map(|r| r.finished).max().unwrap_or(first);
    let span = (last - first).total_micros().max(1) as f64;
    let bytes: u64 = app.transfers.results.iter().filter(|r| r.intact()).map(|r| r.received_bytes).sum();
    let goodput_mbps = bytes as f64 * 8.0 / span;

    let a = attacker.borrow();
    let mut attacker_intact = a.intact();
    if p.attack.uploads() {
        // An upload is intact when the server read exactly what was sent.
        let got = &app.transfers.unlisted_uploads;
        let ok = (0..a.conns.len())
            .filter(|&i| {
                let c = &a.conns[i];
                let expected = a.upload_hash(i);
                c.phase == Phase::Done && got.iter().any(|&(id, n, h)| id == c.id && n == c.size && h == expected)
            })
            .count();
        attacker_intact = (ok, a.conns.len());
    }
    let clock = world.clock.unwrap_or(Clock::new(server, [0; 6]));
    let result = AttackResult {
        params: p.clone(),
        stop,
        intact: (summary.intact, summary.total),
        attacker_intact,
        goodput_mbps,
        peak_heap,
        heap_bound: bound,
        attacker: a.counts,
        drops,
        server_resets_sent: counters.resets_sent,
        server_retransmits: counters.retransmits,
        server_reneging: counters.sack_reneging,
        server_connections_left: shard.connection_count(),
        clock,
        lines: Vec::new(),
    };
    let mut lines = describe(seed, &result);
    let at = lines.len() - 1;
    lines.splice(at..at, a.unfinished());
    drop(a);
    AttackResult { lines, ..result }
}

fn describe(seed: u64, r: &AttackResult) -> Vec<String> {
    let p = &r.params;
    let row = |name: &str, value: String| format!("{name:<48}{value:>16}");
    let (attack_ns, other_ns) = r.ns_per_frame();
    let mut lines = vec![
        format!("attack {}, seed {seed}", p.attack.name()),
        format!(
            "{} legitimate downloads of {} B over 100 Mbit/s, RTT 20 ms; {} attacker connections of {} B; \
             attack {}..{}; server buffers {} KiB",
            p.legitimate,
            p.size,
            p.connections,
            p.attack_size,
            p.attack_start,
            p.attack_end(),
            p.buffer / 1024
        ),
        row("legitimate downloads intact", format!("{}/{}", r.intact.0, r.intact.1)),
        row("attacker's transfers intact", format!("{}/{}", r.attacker_intact.0, r.attacker_intact.1)),
        row("legitimate goodput (Mbit/s)", format!("{:.1}", r.goodput_mbps)),
        row("server peak heap (B)", r.peak_heap.to_string()),
        row("server heap bound (B)", r.heap_bound.to_string()),
        row("attacker frames sent / forged", format!("{} / {}", r.attacker.sent, r.attacker.forged)),
        row(
            "server frames to attacker (during attack)",
            format!("{} ({})", r.attacker.received, r.attacker.received_during_attack),
        ),
        row("server resets sent / retransmits", format!("{} / {}", r.server_resets_sent, r.server_retransmits)),
        row("server SACK reneging detected", r.server_reneging.to_string()),
        row("server connections left", r.server_connections_left.to_string()),
        row("server ns per attacker frame / other frame", format!("{attack_ns:.0} / {other_ns:.0}")),
    ];
    for &(reason, n) in &r.drops {
        lines.push(row(&format!("  drop {}", reason.label()), n.to_string()));
    }
    if r.stop != Stop::Done {
        lines.push(format!("run stopped early: {:?}", r.stop));
    }
    lines.push(format!(
        "attack {}: legitimate {}/{} intact at {:.1} Mbit/s, attacker {}/{} intact, heap {} of {} B, {} forged",
        p.attack.name(),
        r.intact.0,
        r.intact.1,
        r.goodput_mbps,
        r.attacker_intact.0,
        r.attacker_intact.1,
        r.peak_heap,
        r.heap_bound,
        r.attacker.forged
    ));
    lines
}

/// Runs `attack` and the honest reference with the same seed and judges the
/// attack: everything intact, the server's heap under its bound, the
/// legitimate goodput ≥ 90 % of the reference's, no connection left behind.
pub fn judge(seed: u64, kind: Attack, heap: fn() -> i64) -> Report {
    let reference = attack(seed, &AttackParams::issue(Attack::Honest), heap);
    let under = attack(seed, &AttackParams::issue(kind), heap);
    judge_against(&reference, &under)
}

/// Judges the run `under` attack against the honest `reference` (see [`judge`]).
pub fn judge_against(reference: &AttackResult, under: &AttackResult) -> Report {
    let ratio = under.goodput_mbps / reference.goodput_mbps.max(f64::MIN_POSITIVE);
    let mut lines = under.lines.clone();
    let mut failures = Vec::new();
    if under.intact.0 != under.intact.1 {
        failures.push("legitimate downloads not all intact".to_string());
    }
    if under.attacker_intact.0 != under.attacker_intact.1 {
        failures.push("the attacker's own transfers did not all complete intact".to_string());
    }
    if ratio < 0.9 {
        failures.push(format!("legitimate goodput {ratio:.3} of the reference's, under 0.9"));
    }
    if under.peak_heap > under.heap_bound {
        failures.push(format!("server heap {} B over its bound {} B", under.peak_heap, under.heap_bound));
    }
    if under.server_connections_left != 0 {
        failures.push(format!("the server still holds {} connections", under.server_connections_left));
    }
    if under.stop != Stop::Done {
        failures.push(format!("the run did not finish: {:?}", under.stop));
    }
    lines.insert(
        lines.len() - 1,
        format!("{:<48}{:>16}", "goodput against the honest reference", format!("{ratio:.3}")),
    );
    for f in &failures {
        lines.insert(lines.len() - 1, format!("FAILED: {f}"));
    }
    let ok = failures.is_empty();
    Report { lines, ok }
}

/// Every attack beside the honest reference, `rounds` times in turn: the
/// scenario's table. The criteria are [`judge_against`]'s; the CPU columns
/// are wall time measured in the run (medians over the rounds, with the
/// spread), so run it optimised.
pub fn table(seed: u64, rounds: usize, heap: fn() -> i64) -> Report {
    let rounds = rounds.max(1);
    let mut runs: Vec<Vec<AttackResult>> = vec![Vec::new(); Attack::ALL.len()];
    let mut references = Vec::new();
    let mut ok = true;
    let mut failures = Vec::new();
    for _ in 0..rounds {
        let reference = attack(seed, &AttackParams::issue(Attack::Honest), heap);
        for (i, kind) in Attack::ALL.into_iter().enumerate() {
            let under = attack(seed, &AttackParams::issue(kind), heap);
            let verdict = judge_against(&reference, &under);
            if !verdict.ok && runs[i].is_empty() {
                ok = false;
                failures.extend(
                    verdict.lines.iter().filter(|l| l.starts_with("FAILED")).map(|l| format!("{}: {l}", kind.name())),
                );
            }
            runs[i].push(under);
        }
        references.push(reference);
    }
    let mut lines = vec![
        format!("scenario attacks, seed {seed}: {rounds} rounds, each attack beside the honest reference"),
        "legitimate: 4 × 8 MB downloads over 100 Mbit/s, RTT 20 ms; attacker: 4 connections of 4 MiB, attack 2 s"
            .to_string(),
        "ns/frame: the server's handle_frame per attacker frame and per other frame (the legitimate clients' ACKs)"
            .to_string(),
        "turns: the server's whole turns (frames, timers, application, transmit) against the reference's".to_string(),
        String::new(),
        format!(
            "{:<16}{:>9}{:>11}{:>10}{:>22}{:>10}{:>8}{:>16}",
            "attack", "goodput", "heap MiB", "forged", "ns/attack frame", "ns/other", "ratio", "turns"
        ),
    ];
    let reference_turns = {
        let t: Vec<f64> = references.iter().map(|r| r.clock.turns.as_nanos() as f64).collect();
        median(t)
    };
    let reference_goodput = references[0].goodput_mbps;
    for (kind, results) in Attack::ALL.into_iter().zip(&runs) {
        let first = &results[0];
        let attack_ns: Vec<f64> = results.iter().map(|r| r.ns_per_frame().0).collect();
        let other_ns: Vec<f64> = results.iter().map(|r| r.ns_per_frame().1).collect();
        let ratios: Vec<f64> =
            results.iter().map(|r| r.ns_per_frame().0 / r.ns_per_frame().1.max(f64::MIN_POSITIVE)).collect();
        let turns: Vec<f64> = results.iter().map(|r| r.clock.turns.as_nanos() as f64).collect();
        let spread = |v: &[f64]| {
            let (lo, hi) = v.iter().fold((f64::MAX, f64::MIN), |(lo, hi), &x| (lo.min(x), hi.max(x)));
            format!("{:.0} ({:.0}–{:.0})", median(v.to_vec()), lo, hi)
        };
        lines.push(format!(
            "{:<16}{:>9.3}{:>11}{:>10}{:>22}{:>10.0}{:>8.2}{:>15.2}×",
            kind.name(),
            first.goodput_mbps / reference_goodput,
            format!("{:.1}/{:.1}", first.peak_heap as f64 / 1048576.0, first.heap_bound as f64 / 1048576.0),
            first.attacker.forged,
            spread(&attack_ns),
            median(other_ns),
            median(ratios),
            median(turns) / reference_turns.max(1.0),
        ));
    }
    lines.extend(failures.iter().cloned());
    let worst = runs
        .iter()
        .map(|r| {
            let ratios: Vec<f64> =
                r.iter().map(|x| x.ns_per_frame().0 / x.ns_per_frame().1.max(f64::MIN_POSITIVE)).collect();
            median(ratios)
        })
        .fold(0.0, f64::max);
    lines.push(format!(
        "attacks: {} of {} within the criteria; worst CPU per attacking frame {worst:.2}× an ordinary one",
        Attack::ALL.len()
            - failures
                .iter()
                .map(|f| f.split(':').next().unwrap_or(""))
                .collect::<std::collections::BTreeSet<_>>()
                .len(),
        Attack::ALL.len()
    ));
    Report { lines, ok }
}
