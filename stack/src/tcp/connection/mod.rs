//! One TCP connection: the transmission control block and its state machine.
//!
//! Read first: RFC 9293 §3.10 (event processing; the structure of
//! [`Connection::on_segment`] follows its "SEGMENT ARRIVES" steps), RFC 6298
//! (the retransmission timer), RFC 5681 and RFC 6582 (congestion control,
//! fast retransmit and NewReno recovery).
//!
//! The connection never touches a frame or a clock. The shard hands it parsed
//! segments and the current time, and asks it to write its next segment's TCP
//! header and payload into a buffer; the connection reports what the shard
//! must do next (drop it from the flow table, release it, answer with RST)
//! through [`Outcome`].

pub(crate) mod fast_start;
mod input;
mod output;
mod recovery;
mod timers;
mod window;

use std::collections::VecDeque;

use crate::api::{ConnectionError, Event, FlowStats, Handle};
use crate::config::TcpConfig;
use crate::counters::{Counters, DropReason};
use crate::flow_table::FourTuple;
use crate::pool::{BufferPool, Key, StoragePool};
use crate::ring::Ring;
use crate::tcp::assembler::Assembler;
use crate::tcp::congestion::{AckSample, Congestion, CongestionControl};
use crate::tcp::rtt::{MinRtt, RttEstimator};
use crate::tcp::segment::Segment;
use crate::tcp::sent_queue::{Sent, SentQueue};
use crate::tcp::seq::SeqNumber;
use crate::tcp::syn_cookie::CookieOptions;
use crate::time::{Duration, Instant};
use crate::wire::{Flags, TCP_HEADER_LEN, TcpHeader};
use fast_start::FastStartState;
use timers::{StateTimer, Timer, TimerTable};

/// How long a connection in TIME-WAIT holds its four-tuple against an
/// active open of the same ([`Connection::reusable_time_wait`]).
pub const TIME_WAIT_REUSE_AFTER: Duration = Duration::from_secs(1);

/// RFC 9293 connection states (LISTEN belongs to listeners, not connections).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum State {
    /// No connection: failed, or finished while the application still holds it.
    Closed,
    /// Our SYN is out; waiting for the peer's.
    SynSent,
    /// Both SYNs seen; waiting for the ACK of ours.
    SynReceived,
    /// Data flows both ways.
    Established,
    /// We sent FIN; waiting for its ACK.
    FinWait1,
    /// Our FIN is acknowledged; waiting for the peer's.
    FinWait2,
    /// The peer sent FIN; we may still send.
    CloseWait,
    /// Both sent FIN; waiting for the ACK of ours.
    Closing,
    /// The peer closed first and we sent FIN; waiting for its ACK.
    LastAck,
    /// Both FINs acknowledged; absorbing stray segments for 2·MSL.
    TimeWait,
}

impl State {
    /// A state in which both SYNs have been acknowledged.
    pub fn is_synchronized(self) -> bool {
        !matches!(self, State::Closed | State::SynSent | State::SynReceived)
    }

    /// The peer's FIN has been received in this state.
    fn peer_finished(self) -> bool {
        matches!(self, State::CloseWait | State::Closing | State::LastAck | State::TimeWait)
    }
}

/// "No deadline".
pub(crate) const NEVER: Instant = Instant::from_micros(u64::MAX);

/// The MSS assumed when the peer sends no MSS option (RFC 9293 §3.7.1).
const DEFAULT_PEER_MSS: u16 = 536;

/// The smallest MSS a connection sends with, whatever the peer's SYN asks:
/// an MSS of 8 would have every byte cost a 54-byte header, a cheap way to
/// make a server burn its CPU and queues ("SACK Panic", CVE-2019-11479).
/// Linux's floor since then, `tcp_min_snd_mss`.
pub(crate) const MIN_PEER_MSS: u16 = 48;

/// The MSS a peer's SYN (or SYN-ACK) asks for, raised to [`MIN_PEER_MSS`],
/// and whether it had to be.
pub(crate) fn peer_mss(seg: &Segment<'_>) -> (u16, bool) {
    let asked = seg.mss.filter(|&m| m > 0).unwrap_or(DEFAULT_PEER_MSS);
    (asked.max(MIN_PEER_MSS), asked < MIN_PEER_MSS)
}

/// Largest window expressible without window scaling.
const MAX_UNSCALED_WINDOW: usize = u16::MAX as usize;

/// PAWS forgets TS.Recent after this long without a segment (RFC 7323 §5.5).
const PAWS_IDLE_MS: u32 = 24 * 24 * 3600 * 1000;

/// A time on a 32-bit millisecond clock (it wraps after 49 days), for stamps
/// that only ever take differences under that.
fn stamp_ms(now: Instant) -> u32 {
    now.total_millis() as u32
}

/// The largest window-scale shift (RFC 7323 §2.3).
const MAX_WINDOW_SHIFT: u8 = 14;

/// The smallest shift that lets a 16-bit window field describe `buffer`.
pub(crate) fn window_shift(buffer: usize) -> u8 {
    let mut shift = 0;
    while shift < MAX_WINDOW_SHIFT && (buffer >> shift) > MAX_UNSCALED_WINDOW {
        shift += 1;
    }
    shift
}

/// Per-connection flags, packed in one word.
mod flag {
    /// The application closed its handle; nobody will read or write.
    pub const ORPHAN: u32 = 1 << 0;
    /// The application shut down sending: a FIN follows the queued data.
    pub const FIN_QUEUED: u32 = 1 << 1;
    /// An ACK must go out promptly.
    pub const ACK_NOW: u32 = 1 << 2;
    /// The connection sits in the shard's transmit queue.
    pub const IN_READY: u32 = 1 << 3;
    /// A `Readable` event is outstanding.
    pub const READ_NOTIFIED: u32 = 1 << 4;
    /// A `send` came up short: signal `Writable` when space frees.
    pub const WANT_WRITABLE: u32 = 1 << 5;
    /// Created by a listener.
    pub const PASSIVE: u32 = 1 << 6;
    /// The application holds a handle (accepted, or opened by `connect`).
    pub const ACCEPTED: u32 = 1 << 7;
    /// Waiting in a listener's accept queue.
    pub const IN_BACKLOG: u32 = 1 << 8;
    /// Resend the segment at SND.UNA now (fast retransmit, partial ACK).
    pub const FAST_REXMIT: u32 = 1 << 9;
    /// NewReno fast recovery is in progress.
    pub const RECOVERY: u32 = 1 << 10;
    /// A segment is being timed for an RTT sample.
    pub const RTT_TIMING: u32 = 1 << 11;
    /// Persist timer fired: send despite silly-window avoidance, one byte
    /// into a zero window.
    pub const FORCE: u32 = 1 << 12;
    /// Send a keep-alive probe.
    pub const KEEPALIVE_PROBE: u32 = 1 << 13;
    /// The peer's FIN sequence number is known (`rcv_fin` is valid).
    pub const RCV_FIN_KNOWN: u32 = 1 << 14;
    /// Counted in the shard's TIME-WAIT population.
    pub const IN_TIME_WAIT: u32 = 1 << 15;
    /// Counted in its listener's SYN queue.
    pub const IN_SYN_QUEUE: u32 = 1 << 16;
    /// Reordering was observed (RFC 8985's RACK.reordering_seen).
    pub const REORDERING_SEEN: u32 = 1 << 17;
    /// Our FIN has been acknowledged.
    pub const FIN_ACKED: u32 = 1 << 18;
    /// Window scaling agreed (RFC 7323 §2).
    pub const WSCALE: u32 = 1 << 19;
    /// Timestamps agreed (RFC 7323 §3).
    pub const TIMESTAMPS: u32 = 1 << 20;
    /// SACK agreed (RFC 2018).
    pub const SACK: u32 = 1 << 21;
    /// A D-SACK block (`dsack_*`) is to be reported (RFC 2883).
    pub const DSACK: u32 = 1 << 22;
    /// `recent_ooo` holds the start of the latest out-of-order arrival.
    pub const RECENT_OOO: u32 = 1 << 23;
    /// `ts_recent` holds a valid TS.Recent.
    pub const TS_RECENT: u32 = 1 << 24;
    /// The current recovery may still prove spurious (D-SACK undo).
    pub const UNDO_ARMED: u32 = 1 << 25;
    /// The last timeout may still prove spurious (Eifel, RFC 3522).
    pub const RTO_UNDO: u32 = 1 << 26;
    /// Send a tail-loss probe.
    pub const TLP_NOW: u32 = 1 << 27;
    /// A tail-loss probe is out; no other until an ACK.
    pub const TLP_OUT: u32 = 1 << 28;
    /// Data waits on the peer's window with nothing in flight; since
    /// `unacked_since` (which has no other use then).
    pub const PERSIST: u32 = 1 << 29;
    /// The shard holds a pure ACK of this connection back until its
    /// receive batch ends.
    pub const ACK_HELD: u32 = 1 << 30;
    /// What the connection learned about its path is in the path cache.
    pub const PATH_SAVED: u32 = 1 << 31;
}

/// What the shard must do after the connection handled an input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[must_use]
pub(crate) struct Outcome {
    pub action: Action,
    /// Answer the segment with an RST of this sequence number (and ACK, if set).
    pub reset: Option<(SeqNumber, Option<SeqNumber>)>,
}

/// The connection's fate after an input.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Action {
    /// Nothing changes for the shard.
    Keep,
    /// The connection is closed but the application still holds it: remove it
    /// from the flow table and keep the slot until `close`.
    Detach,
    /// Release the connection entirely.
    Remove,
    /// A SYN for this tuple should open a new connection in place of this
    /// TIME-WAIT one.
    Recycle,
}

impl Outcome {
    pub const KEEP: Outcome = Outcome { action: Action::Keep, reset: None };

    fn action(action: Action) -> Outcome {
        Outcome { action, reset: None }
    }

    fn reset(seq: SeqNumber, ack: Option<SeqNumber>) -> Outcome {
        Outcome { action: Action::Keep, reset: Some((seq, ack)) }
    }
}

/// The shard-wide things a connection touches while it works.
pub(crate) struct Env {
    pub cfg: TcpConfig,
    /// The MSS we announce.
    pub mss: u16,
    pub rx_pool: BufferPool,
    pub tx_pool: BufferPool,
    pub counters: Counters,
    pub events: crate::event_queue::EventQueue,
    /// Recycled reassembly storage.
    pub reasm_pool: StoragePool<Vec<(u32, u32)>>,
    /// Recycled sent-queue storage.
    pub sentq_pool: StoragePool<VecDeque<Sent>>,
    /// Connections in TIME-WAIT, and the most allowed.
    pub time_wait: usize,
    pub max_time_wait: usize,
    /// Challenge ACKs still allowed in the current second (RFC 5961 §7).
    pub challenge_acks_left: u32,
    /// What recent connections learned about their paths.
    pub paths: crate::tcp::path_cache::PathCache,
    /// What a fairness policy divides, bounding careful resume's jumps
    /// (see [`FastStartShares`]).
    pub shares: FastStartShares,
    /// Whether the device finishes checksums ([`crate::Config::tx_checksum_offload`]):
    /// payloads are then copied into frames without being summed.
    pub partial_checksums: bool,
}

/// The fair shares careful resume's jumps may take: the payload rate
/// (bytes per second) a fairness policy divides, among how many flows, and
/// how many jumps took a share since it last said so. Flows that join
/// together (a page's connections, a grid's clients) would each see the
/// share the policy last computed without the others and jump into the
/// same room; counting each jump as a flow gives the next one its share
/// beside it.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FastStartShares {
    /// `None`: no policy, no bound.
    pub capacity: Option<u64>,
    pub flows: u32,
    pub claimed: u32,
}

impl FastStartShares {
    /// The rate an equal share gives the next flow to join.
    pub fn newcomer(&self) -> Option<u64> {
        let among = u64::from(self.flows) + u64::from(self.claimed) + 1;
        self.capacity.map(|c| c / among)
    }

    /// What the next flow's share carries in `rtt`, bytes.
    pub fn window(&self, rtt: Duration) -> Option<u32> {
        let bytes = self.newcomer()?.saturating_mul(rtt.total_micros()) / 1_000_000;
        Some(bytes.min(u64::from(u32::MAX)) as u32)
    }

    /// A jump took a share.
    pub fn claim(&mut self) {
        if self.capacity.is_some() {
            self.claimed = self.claimed.saturating_add(1);
        }
    }
}

/// Per-connection traffic totals.
#[derive(Clone, Copy, Debug, Default)]
struct Totals {
    bytes_sent: u64,
    bytes_acked: u64,
    bytes_received: u64,
    retransmits: u32,
    timeouts: u32,
}

/// A transmission control block.
#[derive(Debug)]
pub(crate) struct Connection {
    pub key: Key,
    pub tuple: FourTuple,
    pub state: State,
    flags: u32,
    /// The listener that created this connection (passive opens).
    pub listener: u32,
    error: Option<ConnectionError>,
    /// Consecutive unanswered (re)transmissions: SYNs, SYN-ACKs, keep-alives.
    retries: u8,
    dupacks: u8,

    // Send sequence space (RFC 9293 §3.3.1).
    iss: SeqNumber,
    snd_una: SeqNumber,
    snd_nxt: SeqNumber,
    /// The highest sequence number sent (SND.NXT rewinds on timeout; this does not).
    snd_max: SeqNumber,
    snd_wl1: SeqNumber,
    snd_wl2: SeqNumber,
    snd_wnd: u32,
    max_snd_wnd: u32,
    snd_mss: u16,
    /// NewReno's `recover`: the highest sequence sent when recovery began.
    recover: SeqNumber,
    /// Window inflation during fast recovery (RFC 6582), on top of cwnd.
    inflation: u32,
    rtt_seq: SeqNumber,
    rtt_start: Instant,

    // Receive sequence space.
    irs: SeqNumber,
    rcv_nxt: SeqNumber,
    /// The right edge we advertised: RCV.NXT + RCV.WND as last sent.
    rcv_adv: SeqNumber,
    rcv_fin: SeqNumber,
    /// Bytes received in order since we last sent an ACK.
    unacked_rx: u32,
    /// The largest segment the peer has sent: "full-sized" for delayed ACKs.
    rcv_mss: u16,

    // Timers; the shard keeps the wheel at their minimum.
    timers: TimerTable,
    /// Whose [`Timer::State`] runs.
    state_timer: StateTimer,
    /// When the oldest unacknowledged data was sent (user timeout); in
    /// persist, when that began.
    unacked_since: Instant,
    /// When the peer last sent us anything (keep-alive).
    last_rx: Instant,

    rtt: RttEstimator,
    min_rtt: MinRtt,
    cc: Congestion,

    // RFC 7323 and RFC 2018 options.
    /// Shift applied to the peer's windows.
    snd_wscale: u8,
    /// Shift applied to the windows we advertise.
    rcv_wscale: u8,
    /// Segments still acknowledged at once (quick-ACK at the start).
    quick_acks: u8,
    /// TS.Recent: the peer's timestamp to echo.
    ts_recent: u32,
    /// Added to our millisecond clock, so TSvals do not reveal it.
    ts_offset: u32,
    /// When TS.Recent was last updated (PAWS forgets it after 24 days
    /// idle), by [`stamp_ms`].
    ts_recent_at: u32,
    /// PAWS's floor: TS.Recent as it was one to two receive RTTs ago (see
    /// [`Connection::paws_ok`]), and the value that becomes it next.
    ts_floor: u32,
    ts_next_floor: u32,
    /// When `ts_next_floor` was taken, by [`stamp_ms`].
    ts_next_floor_at: u32,
    /// When an ACK last answered an unacceptable segment without data, by
    /// [`stamp_ms`] ([`Connection::answer_invalid`]).
    invalid_ack_at: u32,
    /// Congestion events undone as spurious (a total, kept outside
    /// [`Totals`] so that neither struct carries padding).
    spurious: u32,
    /// The ACK number we last sent (RFC 7323 §4.3's Last.ACK.sent).
    last_ack_sent: SeqNumber,
    /// A D-SACK block to report.
    dsack_start: SeqNumber,
    dsack_end: SeqNumber,
    /// The start of the most recent out-of-order arrival: its block goes first.
    recent_ooo: SeqNumber,
    /// Receiver-side RTT (RFC 7323 echoes, as Linux's tcp_rcv_rtt), µs; 0 = none.
    rcv_rtt_us: u32,
    /// The echo the last receiver-side sample came from.
    rcv_rtt_last_tsecr: u32,

    // Caps set by the window-control policy (u32::MAX / u64::MAX: none).
    /// Upper bound on the window we advertise, bytes.
    rcv_wnd_cap: u32,
    /// Upper bound on the congestion window, bytes.
    cwnd_cap: u32,
    /// Upper bound on the pacing rate, bytes per second.
    pacing_cap: u64,
    /// Earliest time the pacer lets the next data segment go, in
    /// nanoseconds since the origin: spacings are rarely whole microseconds.
    pace_next_ns: u64,
    /// When data was last sent (restart after idle).
    last_tx: Instant,

    // Loss detection (RFC 6675, RFC 8985).
    /// What is in flight, per segment.
    sentq: SentQueue,
    /// RACK.xmit_ts and RACK.end_seq: the most recently sent delivered segment.
    rack_xmit: Instant,
    rack_end: SeqNumber,
    /// RACK.rtt, µs.
    rack_rtt_us: u32,
    /// The highest sequence delivered (cumulatively or selectively).
    fack: SeqNumber,
    /// RACK's reordering window in quarters of min-RTT.
    reo_wnd_mult: u8,
    recoveries_since_dsack: u8,
    /// Retransmissions in the current recovery not yet reported as duplicates.
    undo_retrans: u16,
    /// Our TSval when the last timeout's retransmission went out.
    rto_ts: u32,

    tx: Ring,
    rx: Ring,
    reasm: Assembler,
    totals: Totals,
    /// Path observation and careful resume.
    fs: FastStartState,
}

impl Connection {
    fn new(key: Key, tuple: FourTuple, iss: SeqNumber, now: Instant, env: &Env) -> Connection {
        Connection {
            key,
            tuple,
            state: State::Closed,
            flags: 0,
            listener: u32::MAX,
            error: None,
            retries: 0,
            dupacks: 0,
            iss,
            snd_una: iss,
            snd_nxt: iss,
            snd_max: iss,
            snd_wl1: SeqNumber::default(),
            snd_wl2: iss,
            snd_wnd: 0,
            max_snd_wnd: 0,
            snd_mss: DEFAULT_PEER_MSS.min(mss_for(&tuple, env)),
            recover: iss,
            inflation: 0,
            rtt_seq: iss,
            rtt_start: now,
            irs: SeqNumber::default(),
            rcv_nxt: SeqNumber::default(),
            rcv_adv: SeqNumber::default(),
            rcv_fin: SeqNumber::default(),
            unacked_rx: 0,
            rcv_mss: DEFAULT_PEER_MSS.min(mss_for(&tuple, env)),
            timers: TimerTable::new(),
            state_timer: StateTimer::Off,
            unacked_since: now,
            last_rx: now,
            rtt: RttEstimator::new(env.cfg.initial_rto),
            min_rtt: MinRtt::default(),
            cc: Congestion::new(env.cfg.congestion, u32::from(mss_for(&tuple, env))),
            snd_wscale: 0,
            rcv_wscale: 0,
            quick_acks: env.cfg.quick_acks,
            ts_recent: 0,
            ts_offset: iss.get().rotate_left(13),
            ts_recent_at: stamp_ms(now),
            ts_floor: 0,
            ts_next_floor: 0,
            ts_next_floor_at: stamp_ms(now),
            invalid_ack_at: stamp_ms(now).wrapping_sub(env.cfg.invalid_ack_interval.total_millis() as u32),
            spurious: 0,
            last_ack_sent: SeqNumber::default(),
            dsack_start: SeqNumber::default(),
            dsack_end: SeqNumber::default(),
            recent_ooo: SeqNumber::default(),
            rcv_rtt_us: 0,
            rcv_rtt_last_tsecr: 0,
            rcv_wnd_cap: u32::MAX,
            cwnd_cap: u32::MAX,
            pacing_cap: u64::MAX,
            pace_next_ns: now.total_micros().saturating_mul(1000),
            last_tx: now,
            sentq: SentQueue::new(),
            rack_xmit: Instant::ZERO,
            rack_end: iss,
            rack_rtt_us: 0,
            fack: iss,
            reo_wnd_mult: 1,
            recoveries_since_dsack: 0,
            undo_retrans: 0,
            rto_ts: 0,
            tx: Ring::new(),
            rx: Ring::new(),
            reasm: Assembler::new(),
            totals: Totals::default(),
            fs: FastStartState::default(),
        }
    }

    /// An active open: SYN-SENT, with the SYN due.
    pub fn connect(key: Key, tuple: FourTuple, iss: SeqNumber, now: Instant, env: &Env) -> Connection {
        let mut c = Connection::new(key, tuple, iss, now, env);
        c.state = State::SynSent;
        c.flags |= flag::ACCEPTED;
        c.seed_rtt(now, env);
        c
    }

    /// A passive open from a listener's SYN: SYN-RECEIVED, with the SYN-ACK due.
    pub fn accept_syn(
        key: Key,
        tuple: FourTuple,
        iss: SeqNumber,
        listener: u32,
        seg: &Segment<'_>,
        now: Instant,
        env: &Env,
    ) -> Connection {
        let mut c = Connection::new(key, tuple, iss, now, env);
        c.state = State::SynReceived;
        c.flags |= flag::PASSIVE;
        c.listener = listener;
        c.take_peer_syn(now, seg, env);
        c.seed_rtt(now, env);
        c
    }

    /// A connection restored from a SYN cookie by the ACK `seg` that
    /// completes the handshake (RFC 4987 §3.6): ESTABLISHED at once, with
    /// the MSS and options the cookie carried.
    pub fn from_cookie(
        key: Key,
        tuple: FourTuple,
        listener: u32,
        seg: &Segment<'_>,
        options: CookieOptions,
        now: Instant,
        env: &mut Env,
    ) -> Connection {
        let ack = seg.ack.unwrap_or_default();
        let mut c = Connection::new(key, tuple, ack - 1u32, now, env);
        c.flags |= flag::PASSIVE;
        c.listener = listener;
        c.irs = seg.seq - 1u32;
        c.rcv_nxt = seg.seq;
        // The window the cookie SYN-ACK offered, unscaled.
        c.rcv_adv = seg.seq + env.cfg.rx_buffer.min(MAX_UNSCALED_WINDOW);
        c.snd_una = ack;
        c.snd_nxt = ack;
        c.snd_max = ack;
        c.snd_mss = options.mss.min(c.our_mss(env));
        if let (Some(shift), true) = (options.wscale, env.cfg.window_scaling) {
            c.set(flag::WSCALE);
            c.snd_wscale = shift.min(MAX_WINDOW_SHIFT);
            c.rcv_wscale = window_shift(env.cfg.rx_buffer);
        }
        if let (Some((tsval, _)), true) = (seg.timestamp, env.cfg.timestamps) {
            c.set(flag::TIMESTAMPS);
            c.set_ts_recent(now, tsval);
        }
        if options.sack && env.cfg.sack {
            c.set(flag::SACK);
        }
        c.snd_wnd = c.peer_window(seg);
        c.max_snd_wnd = c.snd_wnd;
        c.snd_wl1 = seg.seq;
        c.snd_wl2 = ack;
        c.establish(now, env);
        c
    }

    /// Records the peer's SYN: IRS, its MSS and window, and which options
    /// both ends use (RFC 7323, RFC 2018). A passive open answers with what
    /// the peer offered; an active open keeps what the SYN-ACK confirmed
    /// (a SYN-ACK only carries options our SYN offered).
    fn take_peer_syn(&mut self, now: Instant, seg: &Segment<'_>, env: &Env) {
        self.irs = seg.seq;
        self.rcv_nxt = seg.seq + 1u32;
        self.rcv_adv = self.rcv_nxt;
        // RFC 9293 §3.7.1: send at most the peer's MSS (536 without the
        // option; never less than MIN_PEER_MSS), and never more than our
        // own link allows.
        self.snd_mss = peer_mss(seg).0.min(self.our_mss(env));
        // The window in a SYN is never scaled (RFC 7323 §2.2).
        self.snd_wnd = seg.window as u32;
        self.max_snd_wnd = self.snd_wnd;
        self.snd_wl1 = seg.seq;
        self.snd_wl2 = seg.ack.unwrap_or(self.iss);
        let cfg = &env.cfg;
        match seg.wscale {
            Some(shift) if cfg.window_scaling => {
                self.set(flag::WSCALE);
                self.snd_wscale = shift.min(MAX_WINDOW_SHIFT);
                self.rcv_wscale = window_shift(cfg.rx_buffer);
            }
            _ => {
                self.clear(flag::WSCALE);
                self.snd_wscale = 0;
                self.rcv_wscale = 0;
            }
        }
        match seg.timestamp {
            Some((tsval, _)) if cfg.timestamps => {
                self.set(flag::TIMESTAMPS);
                self.set_ts_recent(now, tsval);
            }
            _ => self.clear(flag::TIMESTAMPS | flag::TS_RECENT),
        }
        if cfg.sack && seg.sack_permitted {
            self.set(flag::SACK);
        } else {
            self.clear(flag::SACK);
        }
    }

    /// Our timestamp clock: milliseconds plus a per-connection offset
    /// (RFC 7323 §5.4 allows 1 ms to 1 s per tick; 1 ms as Linux).
    fn ts_now(&self, now: Instant) -> u32 {
        (now.total_millis() as u32).wrapping_add(self.ts_offset)
    }

    // ---------------------------------------------------------------------
    // Flags and small queries
    // ---------------------------------------------------------------------

    fn has(&self, f: u32) -> bool {
        self.flags & f != 0
    }

    /// Every flag of `f` is set.
    fn has_all(&self, f: u32) -> bool {
        self.flags & f == f
    }

    fn set(&mut self, f: u32) {
        self.flags |= f;
    }

    fn clear(&mut self, f: u32) {
        self.flags &= !f;
    }

    pub fn handle(&self) -> Handle {
        Handle(self.key)
    }

    pub fn is_orphan(&self) -> bool {
        self.has(flag::ORPHAN)
    }

    pub fn is_passive(&self) -> bool {
        self.has(flag::PASSIVE)
    }

    pub fn is_accepted(&self) -> bool {
        self.has(flag::ACCEPTED)
    }

    pub fn in_backlog(&self) -> bool {
        self.has(flag::IN_BACKLOG)
    }

    pub fn set_in_backlog(&mut self, on: bool) {
        if on { self.set(flag::IN_BACKLOG) } else { self.clear(flag::IN_BACKLOG) }
    }

    pub fn in_ready(&self) -> bool {
        self.has(flag::IN_READY)
    }

    /// Whether the shard holds a pure ACK of this connection back.
    pub fn ack_held(&self) -> bool {
        self.has(flag::ACK_HELD)
    }

    pub fn set_ack_held(&mut self, on: bool) {
        if on { self.set(flag::ACK_HELD) } else { self.clear(flag::ACK_HELD) }
    }

    pub fn set_in_ready(&mut self, on: bool) {
        if on { self.set(flag::IN_READY) } else { self.clear(flag::IN_READY) }
    }

    /// Marks the connection as counted in its listener's SYN queue.
    pub fn set_syn_queue_slot(&mut self) {
        self.set(flag::IN_SYN_QUEUE);
    }

    /// Clears the SYN-queue mark; returns whether it was set.
    pub fn take_syn_queue_slot(&mut self) -> bool {
        let had = self.has(flag::IN_SYN_QUEUE);
        self.clear(flag::IN_SYN_QUEUE);
        had
    }

    fn mss(&self) -> u32 {
        self.snd_mss as u32
    }

    /// The usable congestion window: cwnd plus fast-recovery inflation,
    /// within the policy's cap.
    fn cwnd(&self) -> u32 {
        self.cc.cwnd().saturating_add(self.inflation).min(self.cwnd_cap)
    }

    /// Sets or clears the cap on the window we advertise (bytes). Applied
    /// without moving an advertised right edge back; never below 2·MSS.
    pub fn set_rcv_window_cap(&mut self, cap: Option<u32>) {
        self.rcv_wnd_cap = cap.unwrap_or(u32::MAX);
    }

    /// Sets or clears the cap on the congestion window (bytes; at least 2·MSS).
    pub fn set_cwnd_cap(&mut self, cap: Option<u32>) {
        self.cwnd_cap = cap.map_or(u32::MAX, |c| c.max(2 * self.mss()));
    }

    /// The path to the peer takes packets of `mtu` bytes at most (an ICMPv6
    /// Packet Too Big about the segment at `seq`, RFC 8201 §4): segments
    /// shrink to fit, and the segments in flight longer than that go again
    /// at once at the new size, without a cut in the window or a timer
    /// back-off. Ignored unless `seq` is in flight (a blind sender cannot
    /// guess it) and the MTU is news.
    /// Returns whether it changed anything.
    pub fn on_packet_too_big(&mut self, seq: SeqNumber, mtu: u32) -> bool {
        let in_flight = self.outstanding() > 0 && seq.since(self.snd_una) < self.snd_nxt.since(self.snd_una);
        // IPv6 links carry 1,280 bytes at least (RFC 8200 §5); 60 bytes
        // of IPv6 and TCP headers.
        let mss = (mtu.max(1280) - 60).min(u32::from(u16::MAX)) as u16;
        if !in_flight || mss >= self.snd_mss {
            return false;
        }
        self.snd_mss = mss;
        // RFC 8201 §5.4 and RFC 1191 §6.5: the segments too big for the
        // path were dropped by a router, not by congestion. They go again
        // at once, cut to the new size; the window and the timer stay as
        // they are (Linux's tcp_simple_retransmit).
        let max_payload = u32::from(mss).saturating_sub(self.options_len() as u32).max(1);
        if self.sentq.mark_lost_longer_than(max_payload) > 0 {
            self.set(flag::FAST_REXMIT);
        }
        true
    }

    /// Sets or clears the cap on the pacing rate (bytes per second).
    pub fn set_pacing_cap(&mut self, cap: Option<u64>) {
        self.pacing_cap = cap.map_or(u64::MAX, |c| c.max(1));
    }

    /// The oldest sequence number not yet acknowledged: when it moves, the
    /// peer acknowledged something new (forward progress, RFC 4861 §7.3.1).
    pub(crate) fn snd_una(&self) -> SeqNumber {
        self.snd_una
    }

    /// Bytes outstanding up to the highest sequence sent.
    fn outstanding(&self) -> u32 {
        self.snd_max.since(self.snd_una)
    }

    /// The sequence number of the first byte in the send ring.
    fn data_start(&self) -> SeqNumber {
        if self.snd_una == self.iss { self.iss + 1u32 } else { self.snd_una }
    }

    /// The sequence number our FIN takes (meaningful once FIN is queued and
    /// until it is acknowledged).
    fn fin_seq(&self) -> SeqNumber {
        self.data_start() + self.tx.len()
    }

    /// A FIN is queued and not yet acknowledged.
    fn fin_outstanding(&self) -> bool {
        self.flags & (flag::FIN_QUEUED | flag::FIN_ACKED) == flag::FIN_QUEUED
    }

    /// Data or a FIN not yet sent.
    fn has_unsent(&self) -> bool {
        let sent = self.snd_nxt.since(self.data_start()) as usize;
        sent < self.tx.len() || (self.fin_outstanding() && self.snd_nxt.le(self.fin_seq()))
    }

    /// Whether the shard should offer this connection a transmit turn.
    pub fn wants_tx(&self) -> bool {
        match self.state {
            State::Closed => false,
            State::SynSent | State::SynReceived => self.snd_nxt == self.iss || self.has(flag::ACK_NOW),
            _ => {
                self.has(flag::ACK_NOW | flag::FAST_REXMIT | flag::FORCE | flag::KEEPALIVE_PROBE | flag::TLP_NOW)
                    || self.has_unsent()
                    || self.sentq.lost_bytes() > 0
            }
        }
    }

    /// The earliest of the connection's deadlines.
    pub fn next_deadline(&self, cfg: &TcpConfig) -> Instant {
        let mut at = self.timers.next_timeout();
        if self.outstanding() > 0 && self.state.is_synchronized() {
            at = at.min(self.unacked_since + cfg.user_timeout);
        }
        if self.has_all(flag::ORPHAN | flag::PERSIST) {
            at = at.min(self.unacked_since + cfg.user_timeout);
        }
        at
    }

    fn notify(&mut self, env: &mut Env, event: Event) {
        if self.has(flag::ACCEPTED) && !self.has(flag::ORPHAN) {
            env.events.push_back(event);
        }
    }

    fn notify_readable(&mut self, env: &mut Env) {
        if !self.has(flag::READ_NOTIFIED) && self.has(flag::ACCEPTED) && !self.has(flag::ORPHAN) {
            self.set(flag::READ_NOTIFIED);
            env.events.push_back(Event::Readable(self.handle()));
        }
    }

    // ---------------------------------------------------------------------
    // Application calls
    // ---------------------------------------------------------------------

    /// The application took this connection from the accept queue.
    pub fn on_accepted(&mut self, env: &mut Env) {
        self.set(flag::ACCEPTED);
        self.clear(flag::IN_BACKLOG);
        if !self.rx.is_empty() {
            self.notify_readable(env);
        }
        if self.state.peer_finished() {
            let h = self.handle();
            self.notify(env, Event::HangUp(h));
        }
    }

    /// Queues data to send: copies as much of `data` as fits.
    pub fn send(&mut self, data: &[u8], env: &mut Env) -> Result<usize, crate::api::SendError> {
        if data.is_empty() {
            return self.check_sendable().map(|()| 0);
        }
        self.send_with(env, |first, second| {
            let a = first.len().min(data.len());
            first[..a].copy_from_slice(&data[..a]);
            let b = second.len().min(data.len() - a);
            second[..b].copy_from_slice(&data[a..a + b]);
            a + b
        })
    }

    /// Lends the send ring's free space to `fill` as the ring holds it (one
    /// slice, or two when it wraps); `fill` writes the bytes to send there,
    /// the first slice first, and returns how many it wrote (at most both
    /// lengths), which are queued. With no room at all `fill` is not called
    /// and the answer is `WouldBlock`; a full ring asks for a `Writable`
    /// event.
    pub fn send_with(
        &mut self,
        env: &mut Env,
        fill: impl FnOnce(&mut [u8], &mut [u8]) -> usize,
    ) -> Result<usize, crate::api::SendError> {
        use crate::api::SendError;
        self.check_sendable()?;
        if !self.tx.is_allocated() {
            self.tx.attach(env.tx_pool.take());
        }
        let free = self.tx.free();
        if free == 0 {
            self.set(flag::WANT_WRITABLE);
            return Err(SendError::WouldBlock);
        }
        let (first, second) = self.tx.spare_mut();
        let n = fill(first, second).min(free);
        self.tx.commit(n);
        if self.tx.free() == 0 {
            self.set(flag::WANT_WRITABLE);
        }
        self.totals.bytes_sent += n as u64;
        Ok(n)
    }

    /// Whether the application may still queue data.
    fn check_sendable(&self) -> Result<(), crate::api::SendError> {
        use crate::api::SendError;
        if let Some(e) = self.error {
            return Err(SendError::Connection(e));
        }
        if self.has(flag::FIN_QUEUED) {
            return Err(SendError::Shutdown);
        }
        match self.state {
            State::SynSent | State::SynReceived | State::Established | State::CloseWait => Ok(()),
            _ => Err(SendError::Shutdown),
        }
    }

    /// Reads in-order data; `Ok(0)` is end of stream.
    pub fn recv(&mut self, buf: &mut [u8], env: &mut Env) -> Result<usize, crate::api::RecvError> {
        self.recv_with(env, |first, second| {
            let a = first.len().min(buf.len());
            buf[..a].copy_from_slice(&first[..a]);
            let b = second.len().min(buf.len() - a);
            buf[a..a + b].copy_from_slice(&second[..b]);
            a + b
        })
    }

    /// Lends the in-order data to `take` as the ring holds it (one slice,
    /// or two when it wraps) and consumes what it says it used (at most
    /// both lengths); `Ok(0)` with nothing waiting is end of stream.
    pub fn recv_with(
        &mut self,
        env: &mut Env,
        take: impl FnOnce(&[u8], &[u8]) -> usize,
    ) -> Result<usize, crate::api::RecvError> {
        use crate::api::RecvError;
        self.clear(flag::READ_NOTIFIED);
        if let Some(e) = self.error {
            return Err(RecvError::Connection(e));
        }
        if self.rx.is_empty() {
            return if self.state.peer_finished() { Ok(0) } else { Err(RecvError::WouldBlock) };
        }
        let before = self.advertisable_window(env);
        let (first, second) = self.rx.peek(0, usize::MAX);
        let n = take(first, second).min(first.len() + second.len());
        self.rx.consume(n);
        if self.rx.is_empty() && self.reasm.is_empty() {
            self.release_rx(env);
        }
        // Tell the peer about the space we freed if the window grew enough to
        // matter (RFC 9293 §3.8.6.2.2), e.g. after advertising zero.
        let advertised = self.rcv_adv.since(self.rcv_nxt) as usize;
        let now_possible = self.advertisable_window(env);
        if now_possible > before
            && now_possible >= advertised + self.window_step(env)
            && now_possible >= 2 * advertised
            && self.state.is_synchronized()
        {
            self.set(flag::ACK_NOW);
        }
        Ok(n)
    }

    /// The application shuts down sending: FIN after the queued data.
    pub fn shutdown(&mut self) {
        if matches!(self.state, State::SynSent | State::SynReceived | State::Established | State::CloseWait) {
            self.set(flag::FIN_QUEUED);
        }
    }

    /// The application closes its handle. Returns what the shard must do.
    pub fn close(&mut self, now: Instant, env: &mut Env) -> Outcome {
        self.set(flag::ORPHAN);
        self.clear(flag::ACCEPTED);
        let unread = !self.rx.is_empty();
        match self.state {
            State::Closed | State::SynSent => Outcome::action(Action::Remove),
            State::SynReceived | State::Established | State::CloseWait | State::FinWait1 | State::FinWait2
                if unread =>
            {
                // RFC 2525 §2.17: closing with unread data resets the connection.
                self.abort_outcome(env)
            }
            State::Closing | State::LastAck | State::TimeWait if unread => {
                // The peer is done sending; nobody will read what is left.
                self.release_rx(env);
                Outcome::KEEP
            }
            State::SynReceived | State::Established | State::CloseWait => {
                self.shutdown();
                Outcome::KEEP
            }
            State::FinWait2 => {
                self.arm_state_timer(StateTimer::FinWait2, now + env.cfg.fin_wait2_timeout);
                Outcome::KEEP
            }
            State::FinWait1 | State::Closing | State::LastAck | State::TimeWait => Outcome::KEEP,
        }
    }

    /// The RST that aborts this connection, if one is due, and its removal.
    pub fn abort_outcome(&mut self, env: &mut Env) -> Outcome {
        let reset = match self.state {
            State::SynReceived | State::Established | State::FinWait1 | State::FinWait2 | State::CloseWait => {
                Some((self.snd_nxt, Some(self.rcv_nxt)))
            }
            _ => None,
        };
        self.release_buffers(env);
        Outcome { action: Action::Remove, reset }
    }

    /// The connection is over without error. Unread data stays readable
    /// while the application holds the handle.
    fn finish(&mut self, env: &mut Env) -> Outcome {
        self.state = State::Closed;
        self.release_tx(env);
        let outcome = self.close_outcome();
        if outcome.action == Action::Remove || self.rx.is_empty() {
            self.release_rx(env);
        }
        outcome
    }

    /// The connection failed.
    fn fail(&mut self, err: ConnectionError, env: &mut Env) -> Outcome {
        self.error = Some(err);
        let h = self.handle();
        self.notify(env, Event::Error(h, err));
        self.state = State::Closed;
        self.release_buffers(env);
        self.close_outcome()
    }

    /// Remove, unless the application still holds a handle to find out why.
    fn close_outcome(&self) -> Outcome {
        if self.has(flag::ACCEPTED) && !self.has(flag::ORPHAN) {
            Outcome::action(Action::Detach)
        } else {
            Outcome::action(Action::Remove)
        }
    }

    fn remove(&mut self, env: &mut Env) -> Outcome {
        self.state = State::Closed;
        self.release_buffers(env);
        Outcome::action(Action::Remove)
    }

    /// Whether an active open of the same four-tuple may take this
    /// connection's place now, and the least ISS it may start from: when
    /// it is in TIME-WAIT, let go by the application, had timestamps
    /// agreed, and has waited [`TIME_WAIT_REUSE_AFTER`] (as Linux's
    /// `tcp_tw_reuse`). The peer's segments of this incarnation are then
    /// long gone or stopped by sequence and timestamps; the new one starts
    /// beyond everything this one sent.
    pub fn reusable_time_wait(&self, now: Instant, time_wait: Duration) -> Option<SeqNumber> {
        let waited = self.timers[Timer::State] + TIME_WAIT_REUSE_AFTER <= now + time_wait;
        let reusable = self.state == State::TimeWait && !self.is_accepted() && self.has(flag::TIMESTAMPS) && waited;
        reusable.then(|| self.snd_nxt + (u32::from(u16::MAX) + 2))
    }

    /// Called by the shard when the connection leaves for good.
    pub fn on_removed(&mut self, now: Instant, env: &mut Env) {
        self.remember_path(now, env);
        if self.has(flag::IN_TIME_WAIT) {
            self.clear(flag::IN_TIME_WAIT);
            env.time_wait -= 1;
        }
        self.release_buffers(env);
    }

    /// Returns the send ring and the sent queue's storage to their pools:
    /// the connection will send nothing more.
    fn release_tx(&mut self, env: &mut Env) {
        self.release_tx_ring(env);
        self.release_sentq(env);
    }

    /// Returns the send ring to the pool, once every byte in it is acknowledged.
    fn release_tx_ring(&mut self, env: &mut Env) {
        if let Some(buf) = self.tx.detach() {
            env.tx_pool.give(buf);
        }
    }

    /// Returns the sent queue's storage to the pool, once nothing is in flight.
    fn release_sentq(&mut self, env: &mut Env) {
        if let Some(storage) = self.sentq.detach() {
            env.sentq_pool.give(storage);
        }
    }

    fn release_rx(&mut self, env: &mut Env) {
        if let Some(buf) = self.rx.detach() {
            env.rx_pool.give(buf);
        }
        if let Some(storage) = self.reasm.detach() {
            env.reasm_pool.give(storage);
        }
    }

    fn release_buffers(&mut self, env: &mut Env) {
        self.release_tx(env);
        self.release_rx(env);
    }

    // ---------------------------------------------------------------------
    // Introspection
    // ---------------------------------------------------------------------

    /// A statistics snapshot.
    pub fn stats(&self) -> FlowStats {
        FlowStats {
            local: self.tuple.local(),
            remote: self.tuple.remote(),
            state: self.state,
            srtt: self.rtt.srtt(),
            rttvar: self.rtt.rttvar(),
            min_rtt: self.min_rtt.get(),
            rto: self.rtt.rto(),
            cwnd: self.cwnd(),
            ssthresh: self.cc.ssthresh(),
            snd_wnd: self.snd_wnd,
            rcv_wnd: self.rcv_adv.since(self.rcv_nxt),
            mss: self.snd_mss,
            bytes_sent: self.totals.bytes_sent,
            bytes_acked: self.totals.bytes_acked,
            bytes_received: self.totals.bytes_received,
            retransmits: self.totals.retransmits,
            timeouts: self.totals.timeouts,
            spurious: self.spurious,
            send_queue: self.tx.len(),
            recv_queue: self.rx.len(),
            rcv_rtt: (self.rcv_rtt_us > 0).then(|| Duration::from_micros(self.rcv_rtt_us as u64)),
            rcv_wnd_cap: (self.rcv_wnd_cap != u32::MAX).then_some(self.rcv_wnd_cap),
            cwnd_cap: (self.cwnd_cap != u32::MAX).then_some(self.cwnd_cap),
            pacing_cap: (self.pacing_cap != u64::MAX).then_some(self.pacing_cap),
            fast_start_jump: self.fs.jumped,
            window_scaling: self.has(flag::WSCALE).then_some((self.snd_wscale, self.rcv_wscale)),
            timestamps: self.has(flag::TIMESTAMPS),
            sack: self.has(flag::SACK),
        }
    }
}

/// The MSS we announce and send at most on a connection of `tuple`'s
/// family: the shard's (the link MTU less minimal IPv4 and TCP headers),
/// 20 bytes less over IPv6, whose header is that much longer.
#[inline]
pub(crate) fn mss_for(tuple: &FourTuple, env: &Env) -> u16 {
    if tuple.ipv4().is_some() { env.mss } else { env.mss.saturating_sub(20) }
}

impl Connection {
    /// [`mss_for`] this connection.
    #[inline]
    pub(crate) fn our_mss(&self, env: &Env) -> u16 {
        mss_for(&self.tuple, env)
    }
}

#[cfg(test)]
mod size {
    /// The control block is most of an idle connection's cost (the budget is
    /// 1 KiB per idle connection, slab, flow table and timer included, which
    /// `tests/tests/c100k.rs` holds it to); keep it within eleven cache
    /// lines. It was ten until the 4-tuple took IPv6 addresses (24 bytes
    /// more; the copy of the timer wheel's deadline went, 8 bytes less).
    #[test]
    fn a_control_block_fits_in_eleven_cache_lines() {
        let size = core::mem::size_of::<super::Connection>();
        assert!(size <= 11 * 64, "Connection grew to {size} bytes");
    }
}
