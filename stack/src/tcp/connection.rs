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

use std::collections::VecDeque;

use crate::api::{ConnectionError, Event, FlowStats, Handle};
use crate::config::TcpConfig;
use crate::counters::{Counters, Drop};
use crate::flow_table::FourTuple;
use crate::pool::{BufferPool, Key};
use crate::ring::Ring;
use crate::tcp::assembler::Assembler;
use crate::tcp::congestion::{AckSample, Congestion, CongestionControl};
use crate::tcp::rtt::{MinRtt, RttEstimator};
use crate::tcp::segment::Segment;
use crate::tcp::seq::SeqNumber;
use crate::time::{Duration, Instant};
use crate::wire::{Flags, TcpHeader};

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

/// Largest window expressible without window scaling.
const MAX_UNSCALED_WINDOW: usize = u16::MAX as usize;

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
    /// A zero-window probe byte is outstanding.
    pub const PROBING: u32 = 1 << 17;
    /// Our FIN has been acknowledged.
    pub const FIN_ACKED: u32 = 1 << 18;
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
    pub events: VecDeque<Event>,
    /// Connections in TIME-WAIT, and the most allowed.
    pub time_wait: usize,
    pub max_time_wait: usize,
    /// Challenge ACKs still allowed in the current second (RFC 5961 §7).
    pub challenge_acks_left: u32,
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

    // Timers, as deadlines; the shard keeps the wheel at their minimum.
    /// Retransmission, or persist when nothing is in flight.
    rto_at: Instant,
    delack_at: Instant,
    /// TIME-WAIT, FIN-WAIT-2 and keep-alive deadline.
    linger_at: Instant,
    /// When the oldest unacknowledged data was sent (user timeout).
    unacked_since: Instant,
    /// When the peer last sent us anything (keep-alive).
    last_rx: Instant,
    /// The deadline currently in the shard's timer wheel.
    pub wheel_at: Instant,

    rtt: RttEstimator,
    min_rtt: MinRtt,
    cc: Congestion,

    tx: Ring,
    rx: Ring,
    reasm: Assembler,
    totals: Totals,
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
            snd_mss: DEFAULT_PEER_MSS.min(env.mss),
            recover: iss,
            inflation: 0,
            rtt_seq: iss,
            rtt_start: now,
            irs: SeqNumber::default(),
            rcv_nxt: SeqNumber::default(),
            rcv_adv: SeqNumber::default(),
            rcv_fin: SeqNumber::default(),
            unacked_rx: 0,
            rto_at: NEVER,
            delack_at: NEVER,
            linger_at: NEVER,
            unacked_since: now,
            last_rx: now,
            wheel_at: NEVER,
            rtt: RttEstimator::new(env.cfg.initial_rto),
            min_rtt: MinRtt::default(),
            cc: Congestion::new(env.cfg.congestion, env.mss as u32),
            tx: Ring::new(),
            rx: Ring::new(),
            reasm: Assembler::new(),
            totals: Totals::default(),
        }
    }

    /// An active open: SYN-SENT, with the SYN due.
    pub fn connect(key: Key, tuple: FourTuple, iss: SeqNumber, now: Instant, env: &Env) -> Connection {
        let mut c = Connection::new(key, tuple, iss, now, env);
        c.state = State::SynSent;
        c.flags |= flag::ACCEPTED;
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
        c.take_peer_syn(seg, env.mss);
        c
    }

    /// Records the peer's SYN: IRS, its MSS and window.
    fn take_peer_syn(&mut self, seg: &Segment<'_>, our_mss: u16) {
        self.irs = seg.seq;
        self.rcv_nxt = seg.seq + 1u32;
        self.rcv_adv = self.rcv_nxt;
        // RFC 9293 §3.7.1: send at most the peer's MSS (536 without the
        // option), and never more than our own link allows.
        let peer_mss = seg.mss.filter(|&m| m > 0).unwrap_or(DEFAULT_PEER_MSS);
        self.snd_mss = peer_mss.min(our_mss);
        self.snd_wnd = seg.window as u32;
        self.max_snd_wnd = self.snd_wnd;
        self.snd_wl1 = seg.seq;
        self.snd_wl2 = seg.ack.unwrap_or(self.iss);
    }

    // ---------------------------------------------------------------------
    // Flags and small queries
    // ---------------------------------------------------------------------

    fn has(&self, f: u32) -> bool {
        self.flags & f != 0
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

    /// The usable congestion window: cwnd plus fast-recovery inflation.
    fn cwnd(&self) -> u32 {
        self.cc.cwnd().saturating_add(self.inflation)
    }

    /// Bytes sent and not yet acknowledged (by SND.NXT, which a timeout rewinds).
    fn in_flight(&self) -> u32 {
        self.snd_nxt.since(self.snd_una)
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
            _ => self.has(flag::ACK_NOW | flag::FAST_REXMIT | flag::FORCE | flag::KEEPALIVE_PROBE) || self.has_unsent(),
        }
    }

    /// The earliest of the connection's deadlines.
    pub fn next_deadline(&self, cfg: &TcpConfig) -> Instant {
        let mut at = self.rto_at.min(self.delack_at).min(self.linger_at);
        if self.outstanding() > 0 && self.state.is_synchronized() {
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

    /// Queues application data; returns how much fit.
    pub fn send(&mut self, data: &[u8], env: &mut Env) -> Result<usize, crate::api::SendError> {
        use crate::api::SendError;
        if let Some(e) = self.error {
            return Err(SendError::Connection(e));
        }
        if self.has(flag::FIN_QUEUED) {
            return Err(SendError::Shutdown);
        }
        match self.state {
            State::SynSent | State::SynReceived | State::Established | State::CloseWait => {}
            _ => return Err(SendError::Shutdown),
        }
        if data.is_empty() {
            return Ok(0);
        }
        if !self.tx.is_allocated() {
            self.tx.attach(env.tx_pool.take());
        }
        let n = self.tx.push(data);
        if n < data.len() {
            self.set(flag::WANT_WRITABLE);
        }
        if n == 0 {
            return Err(SendError::WouldBlock);
        }
        self.totals.bytes_sent += n as u64;
        Ok(n)
    }

    /// Reads in-order data; `Ok(0)` is end of stream.
    pub fn recv(&mut self, buf: &mut [u8], env: &mut Env) -> Result<usize, crate::api::RecvError> {
        use crate::api::RecvError;
        self.clear(flag::READ_NOTIFIED);
        if let Some(e) = self.error {
            return Err(RecvError::Connection(e));
        }
        if self.rx.is_empty() {
            return if self.state.peer_finished() { Ok(0) } else { Err(RecvError::WouldBlock) };
        }
        let before = self.advertisable_window(env);
        let n = self.rx.pop(buf);
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
                self.linger_at = now + env.cfg.fin_wait2_timeout;
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

    // ---------------------------------------------------------------------
    // Segment arrival (RFC 9293 §3.10.7)
    // ---------------------------------------------------------------------

    /// Handles a segment addressed to this connection.
    pub fn on_segment(&mut self, now: Instant, seg: &Segment<'_>, env: &mut Env) -> Outcome {
        env.counters.segments_in += 1;
        self.last_rx = now;
        match self.state {
            State::Closed => Outcome::KEEP,
            State::SynSent => self.on_segment_syn_sent(now, seg, env),
            _ => self.on_segment_synchronized(now, seg, env),
        }
    }

    /// RFC 9293 §3.10.7.3: SYN-SENT.
    fn on_segment_syn_sent(&mut self, now: Instant, seg: &Segment<'_>, env: &mut Env) -> Outcome {
        // First: the ACK.
        if let Some(ack) = seg.ack
            && (ack.le(self.iss) || ack.gt(self.snd_max))
        {
            env.counters.drop(Drop::TcpBadHandshake);
            return if seg.flags.rst { Outcome::KEEP } else { Outcome::reset(ack, None) };
        }
        // Second: RST. Acceptable only with an acceptable ACK.
        if seg.flags.rst {
            if seg.ack.is_some() {
                return self.fail(ConnectionError::Refused, env);
            }
            env.counters.drop(Drop::TcpBadHandshake);
            return Outcome::KEEP;
        }
        // Fourth: SYN.
        if !seg.flags.syn {
            env.counters.drop(Drop::TcpBadHandshake);
            return Outcome::KEEP;
        }
        self.take_peer_syn(seg, env.mss);
        match seg.ack {
            Some(ack) => {
                self.snd_una = ack;
                if self.has(flag::RTT_TIMING) && ack.ge(self.rtt_seq) {
                    let _ = self.take_rtt_sample(now, env);
                }
                self.rto_at = NEVER;
                self.establish(now, env);
                self.set(flag::ACK_NOW);
                // Data on a SYN-ACK is rare but legal.
                if !seg.payload.is_empty() || seg.flags.fin {
                    let mut rest = *seg;
                    rest.seq = seg.seq + 1u32;
                    rest.flags.syn = false;
                    return self.process_text(now, &rest, env);
                }
                Outcome::KEEP
            }
            None => {
                // Simultaneous open: answer with SYN-ACK from the same ISS.
                self.state = State::SynReceived;
                self.snd_nxt = self.iss;
                Outcome::KEEP
            }
        }
    }

    /// The handshake completed. The ACK of our SYN is processed by the caller
    /// (which takes the RTT sample if the SYN was not retransmitted).
    fn establish(&mut self, now: Instant, env: &mut Env) {
        self.state = State::Established;
        self.retries = 0;
        self.cc = Congestion::new(env.cfg.congestion, self.mss());
        if let Some(ka) = env.cfg.keepalive {
            self.linger_at = now + ka.idle;
        }
        env.counters.established += 1;
        if !self.is_passive() {
            let h = self.handle();
            self.notify(env, Event::Connected(h));
        }
    }

    /// RFC 9293 §3.10.7.4: every state from SYN-RECEIVED on.
    fn on_segment_synchronized(&mut self, now: Instant, seg: &Segment<'_>, env: &mut Env) -> Outcome {
        // The peer's SYN again while we are in SYN-RECEIVED.
        if self.state == State::SynReceived && seg.flags.syn && !seg.flags.rst && seg.seq == self.irs {
            match seg.ack {
                // Simultaneous open (RFC 9293 figure 7): the peer's SYN-ACK
                // acknowledges our SYN; its own SYN is old news.
                Some(ack) if ack.gt(self.snd_una) && ack.le(self.snd_max) => {
                    let mut rest = *seg;
                    rest.flags.syn = false;
                    rest.seq = self.irs + 1u32;
                    return self.on_segment_synchronized(now, &rest, env);
                }
                // A retransmitted SYN: our SYN-ACK was lost; send it again.
                None => self.snd_nxt = self.iss,
                Some(_) => {}
            }
            return Outcome::KEEP;
        }
        // A new SYN for a tuple in TIME-WAIT with a higher sequence number
        // opens a new incarnation (as Linux does; RFC 9293 §3.6.1).
        if self.state == State::TimeWait && seg.flags.syn && seg.ack.is_none() && seg.seq.gt(self.rcv_nxt) {
            return Outcome::action(Action::Recycle);
        }

        // First: is the sequence number acceptable?
        if !self.acceptable(seg) {
            env.counters.drop(Drop::TcpOutOfWindow);
            if !seg.flags.rst {
                self.set(flag::ACK_NOW);
                if self.state == State::TimeWait && seg.flags.fin {
                    self.linger_at = now + env.cfg.time_wait;
                }
            }
            return Outcome::KEEP;
        }

        // Second: RST. RFC 5961 §3.2: only an RST at exactly RCV.NXT resets;
        // one elsewhere in the window may be a blind guess and draws a
        // (rate-limited) challenge ACK, which a real peer answers with an
        // exact RST.
        if seg.flags.rst {
            if seg.seq != self.rcv_nxt {
                env.counters.drop(Drop::TcpRstNotExact);
                self.challenge_ack(env);
                return Outcome::KEEP;
            }
            return match self.state {
                State::SynReceived if self.is_passive() => self.remove(env),
                State::SynReceived => self.fail(ConnectionError::Refused, env),
                State::Established | State::FinWait1 | State::FinWait2 | State::CloseWait => {
                    self.fail(ConnectionError::Reset, env)
                }
                _ => self.remove(env),
            };
        }

        // Fourth: SYN in a synchronized state: challenge ACK (RFC 5961 §4.2).
        if seg.flags.syn {
            env.counters.drop(Drop::TcpUnexpectedSyn);
            self.challenge_ack(env);
            return Outcome::KEEP;
        }

        // Fifth: the ACK field.
        let Some(ack) = seg.ack else {
            env.counters.drop(Drop::TcpNoAck);
            return Outcome::KEEP;
        };
        if self.state == State::SynReceived {
            if ack.le(self.snd_una) || ack.gt(self.snd_max) {
                env.counters.drop(Drop::TcpBadHandshake);
                return Outcome::reset(ack, None);
            }
            self.snd_wnd = seg.window as u32;
            self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
            self.snd_wl1 = seg.seq;
            self.snd_wl2 = ack;
            self.establish(now, env);
        }
        if ack.gt(self.snd_max) {
            // RFC 9293: an ACK for something not yet sent: ACK and drop.
            env.counters.drop(Drop::TcpAckUnsent);
            self.set(flag::ACK_NOW);
            return Outcome::KEEP;
        }
        if ack.lt(self.snd_una - self.max_snd_wnd) {
            // RFC 5961 §5.2: an ACK older than any window we could have been
            // given is a blind injection attempt, not a delayed duplicate.
            env.counters.drop(Drop::TcpAckTooOld);
            self.challenge_ack(env);
            return Outcome::KEEP;
        }
        let fin_acked = self.process_ack(now, seg, ack, env);
        if fin_acked {
            match self.state {
                State::FinWait1 => {
                    self.state = State::FinWait2;
                    if self.is_orphan() {
                        self.linger_at = now + env.cfg.fin_wait2_timeout;
                    }
                }
                State::Closing => return self.enter_time_wait(now, env),
                State::LastAck => return self.remove(env),
                _ => {}
            }
        }
        if self.state == State::TimeWait {
            return Outcome::KEEP;
        }

        // Sixth and seventh: the text and FIN.
        self.process_text(now, seg, env)
    }

    /// Sends an ACK that a real peer answers usefully (RFC 5961 §7), within
    /// the shard's budget of challenge ACKs per second.
    fn challenge_ack(&mut self, env: &mut Env) {
        if env.challenge_acks_left > 0 {
            env.challenge_acks_left -= 1;
            self.set(flag::ACK_NOW);
        } else {
            env.counters.drop(Drop::TcpChallengeAckLimit);
        }
    }

    /// RFC 9293's acceptability test for SEG.SEQ against our advertised window.
    fn acceptable(&self, seg: &Segment<'_>) -> bool {
        let wnd = self.rcv_adv.since(self.rcv_nxt);
        let len = seg.len();
        match (len, wnd) {
            (0, 0) => seg.seq == self.rcv_nxt,
            (0, _) => seg.seq.in_window(self.rcv_nxt, wnd),
            (_, 0) => false,
            (_, _) => seg.seq.in_window(self.rcv_nxt, wnd) || (seg.seq + (len - 1)).in_window(self.rcv_nxt, wnd),
        }
    }

    /// ACK processing; returns whether our FIN is now acknowledged.
    fn process_ack(&mut self, now: Instant, seg: &Segment<'_>, ack: SeqNumber, env: &mut Env) -> bool {
        let mss = self.mss();
        let acked = ack.since(self.snd_una);
        let mut fin_acked = false;

        if acked == 0 {
            // RFC 5681 §2: a duplicate ACK carries no data, no SYN/FIN, the same
            // window, and arrives while data is outstanding.
            let duplicate = ack == self.snd_una
                && seg.payload.is_empty()
                && !seg.flags.fin
                && seg.window as u32 == self.snd_wnd
                && self.snd_wnd > 0
                && self.outstanding() > 0;
            if duplicate {
                self.on_duplicate_ack(now, env);
            }
        } else if ack.gt(self.snd_una) {
            let mut una = self.snd_una;
            if una == self.iss {
                una += 1u32; // our SYN is acknowledged
            }
            let data_end = una + self.tx.len();
            let data_acked = (ack.since(una) as usize).min(self.tx.len());
            self.tx.consume(data_acked);
            fin_acked = self.fin_outstanding() && ack.gt(data_end);
            if fin_acked {
                self.set(flag::FIN_ACKED);
            }
            self.snd_una = ack;
            if self.snd_nxt.lt(ack) {
                self.snd_nxt = ack;
            }
            self.totals.bytes_acked += data_acked as u64;
            let rtt = if self.has(flag::RTT_TIMING) && ack.ge(self.rtt_seq) {
                Some(self.take_rtt_sample(now, env))
            } else {
                None
            };
            self.retries = 0;
            self.unacked_since = now;
            let flight = acked + self.outstanding();
            self.on_new_ack(now, ack, data_acked as u32, flight, mss, rtt);
            self.rto_at = if self.outstanding() > 0 { now + self.rtt.rto() } else { NEVER };
            if self.has(flag::WANT_WRITABLE) && self.tx.free() > 0 {
                self.clear(flag::WANT_WRITABLE);
                let h = self.handle();
                self.notify(env, Event::Writable(h));
            }
            if self.tx.is_empty() {
                self.release_tx(env);
            }
        }

        // Window update (RFC 9293 §3.10.7.4): only from a segment newer than
        // the last one that set the window.
        if self.snd_wl1.lt(seg.seq) || (self.snd_wl1 == seg.seq && self.snd_wl2.le(ack)) {
            let opened = self.snd_wnd == 0 && seg.window > 0;
            self.snd_wnd = seg.window as u32;
            self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
            self.snd_wl1 = seg.seq;
            self.snd_wl2 = ack;
            if self.snd_wnd == 0 {
                // A live peer with a closed window is not a dead one.
                self.unacked_since = now;
            }
            if opened {
                if self.has(flag::PROBING) {
                    // The closed window most likely dropped the probe byte:
                    // send it again with what follows, now.
                    self.clear(flag::PROBING);
                    self.snd_nxt = self.snd_una;
                }
                if self.outstanding() == 0 {
                    self.rto_at = NEVER; // persist is over
                }
            }
        }
        fin_acked
    }

    /// New data acknowledged: congestion control and NewReno (RFC 6582 §3.2).
    /// `flight` is what was outstanding before this ACK.
    fn on_new_ack(&mut self, now: Instant, ack: SeqNumber, acked: u32, flight: u32, mss: u32, rtt: Option<Duration>) {
        if self.has(flag::RECOVERY) {
            if ack.ge(self.recover) {
                // Full acknowledgment: leave recovery.
                self.clear(flag::RECOVERY);
                self.inflation = 0;
                self.dupacks = 0;
                self.cc.on_recovery_end(now, self.outstanding(), mss);
            } else {
                // Partial acknowledgment: resend the next hole, deflate.
                self.set(flag::FAST_REXMIT);
                self.inflation = (self.inflation + mss).saturating_sub(acked);
            }
        } else {
            self.dupacks = 0;
            let sample = AckSample {
                now,
                acked,
                flight,
                mss,
                rtt,
                srtt: self.rtt.srtt(),
                min_rtt: self.min_rtt.get(),
                // Not filling the window: growth would be unearned (RFC 7661).
                app_limited: flight.saturating_add(mss) < self.cc.cwnd(),
                ack,
                snd_nxt: self.snd_nxt,
            };
            self.cc.on_ack(&sample);
        }
    }

    fn on_duplicate_ack(&mut self, now: Instant, _env: &mut Env) {
        let mss = self.mss();
        self.dupacks = self.dupacks.saturating_add(1);
        if self.has(flag::RECOVERY) {
            // Each further duplicate means a segment left the network.
            self.inflation = self.inflation.saturating_add(mss);
        } else if self.dupacks == 3 && (self.snd_una - 1u32).ge(self.recover) {
            // Fast retransmit (RFC 5681 §3.2), unless this loss belongs to an
            // episode already handled (RFC 6582 §3.2 step 1).
            self.recover = self.snd_max;
            self.cc.on_congestion(now, self.outstanding(), mss);
            self.inflation = 3 * mss;
            self.set(flag::RECOVERY | flag::FAST_REXMIT);
            // Karn: an ACK may now be for the original or the retransmission.
            self.clear(flag::RTT_TIMING);
        }
    }

    fn take_rtt_sample(&mut self, now: Instant, env: &Env) -> Duration {
        let sample = now - self.rtt_start;
        self.rtt.sample(sample, env.cfg.min_rto, env.cfg.max_rto);
        self.min_rtt.update(now, sample);
        self.clear(flag::RTT_TIMING);
        sample
    }

    /// RFC 9293 steps six and seven: segment text and FIN.
    fn process_text(&mut self, now: Instant, seg: &Segment<'_>, env: &mut Env) -> Outcome {
        let accepts_data = matches!(self.state, State::Established | State::FinWait1 | State::FinWait2);
        if !seg.payload.is_empty() {
            if !accepts_data {
                // The peer already sent FIN; data after it is bogus. ACK what we have.
                self.set(flag::ACK_NOW);
            } else if self.is_orphan() && seg.seq.since(self.rcv_nxt) as usize + seg.payload.len() > 0 {
                let new_data = (seg.seq + seg.payload.len()).gt(self.rcv_nxt);
                if new_data {
                    // Nobody will read it: reset, as Linux does.
                    env.counters.drop(Drop::TcpDataAfterClose);
                    let mut out = self.abort_outcome(env);
                    out.action = Action::Remove;
                    return out;
                }
                self.set(flag::ACK_NOW);
            } else {
                self.receive_data(now, seg, env);
            }
        }

        if seg.flags.fin && !self.has(flag::RCV_FIN_KNOWN) {
            self.rcv_fin = seg.seq + seg.payload.len();
            self.set(flag::RCV_FIN_KNOWN);
        }
        if self.has(flag::RCV_FIN_KNOWN) && self.rcv_fin == self.rcv_nxt && !self.state.peer_finished() {
            return self.on_fin(now, env);
        }
        if seg.flags.fin && self.state.peer_finished() {
            // A retransmitted FIN: our ACK of it was lost.
            self.set(flag::ACK_NOW);
        }
        Outcome::KEEP
    }

    fn receive_data(&mut self, now: Instant, seg: &Segment<'_>, env: &mut Env) {
        let mut seq = seg.seq;
        let mut data = seg.payload;
        // Trim what we already have.
        if seq.lt(self.rcv_nxt) {
            let dup = self.rcv_nxt.since(seq) as usize;
            if dup >= data.len() {
                self.set(flag::ACK_NOW); // a pure duplicate: our ACK was probably lost
                return;
            }
            data = &data[dup..];
            seq = self.rcv_nxt;
        }
        if !self.rx.is_allocated() {
            self.rx.attach(env.rx_pool.take());
        }
        let offset = seq.since(self.rcv_nxt) as usize;
        if offset >= self.rx.free() {
            env.counters.drop(Drop::TcpOutOfWindow);
            self.set(flag::ACK_NOW);
            return;
        }
        let written = self.rx.write_at(offset, data);
        let had_gaps = !self.reasm.is_empty();
        if self.reasm.add(offset as u32, written as u32).is_err() {
            env.counters.drop(Drop::TcpReassemblyFull);
            self.set(flag::ACK_NOW);
            return;
        }
        let advanced = self.reasm.take_front();
        if advanced > 0 {
            self.rx.commit(advanced as usize);
            self.rcv_nxt += advanced;
            self.totals.bytes_received += advanced as u64;
            self.notify_readable(env);
        }
        if offset > 0 || had_gaps {
            // RFC 5681 §4.2: ACK out-of-order data and gap fills at once.
            self.set(flag::ACK_NOW);
        } else {
            self.unacked_rx = self.unacked_rx.saturating_add(advanced);
            let delay = env.cfg.delayed_ack;
            // "Every second full-sized segment": the peer's segments are at most SND.MSS.
            if delay == Duration::ZERO || self.unacked_rx >= 2 * self.mss() {
                self.set(flag::ACK_NOW);
            } else if self.delack_at == NEVER {
                self.delack_at = now + delay;
            }
        }
    }

    /// The peer's FIN is next in sequence.
    fn on_fin(&mut self, now: Instant, env: &mut Env) -> Outcome {
        self.rcv_nxt += 1u32;
        self.set(flag::ACK_NOW);
        let h = self.handle();
        self.notify(env, Event::HangUp(h));
        match self.state {
            State::SynReceived | State::Established => self.state = State::CloseWait,
            State::FinWait1 => {
                if self.has(flag::FIN_ACKED) {
                    return self.enter_time_wait(now, env);
                }
                self.state = State::Closing;
            }
            State::FinWait2 => return self.enter_time_wait(now, env),
            _ => {}
        }
        Outcome::KEEP
    }

    fn enter_time_wait(&mut self, now: Instant, env: &mut Env) -> Outcome {
        // Nothing is left to send; what was received stays until read.
        self.release_tx(env);
        if self.rx.is_empty() {
            self.release_rx(env);
        }
        self.rto_at = NEVER;
        self.state = State::TimeWait;
        if env.time_wait >= env.max_time_wait {
            // Too many already: skip TIME-WAIT, as Linux does past tcp_max_tw_buckets.
            return self.finish(env);
        }
        env.time_wait += 1;
        self.set(flag::IN_TIME_WAIT);
        self.linger_at = now + env.cfg.time_wait;
        // The final ACK still has to go out.
        Outcome::KEEP
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

    /// Called by the shard when the connection leaves for good.
    pub fn on_removed(&mut self, env: &mut Env) {
        if self.has(flag::IN_TIME_WAIT) {
            self.clear(flag::IN_TIME_WAIT);
            env.time_wait -= 1;
        }
        self.release_buffers(env);
    }

    fn release_tx(&mut self, env: &mut Env) {
        if let Some(buf) = self.tx.detach() {
            env.tx_pool.give(buf);
        }
    }

    fn release_rx(&mut self, env: &mut Env) {
        if let Some(buf) = self.rx.detach() {
            env.rx_pool.give(buf);
        }
        self.reasm.clear();
    }

    fn release_buffers(&mut self, env: &mut Env) {
        self.release_tx(env);
        self.release_rx(env);
    }

    // ---------------------------------------------------------------------
    // Timers
    // ---------------------------------------------------------------------

    /// Handles every deadline that has passed.
    pub fn on_timer(&mut self, now: Instant, env: &mut Env) -> Outcome {
        if now >= self.linger_at {
            self.linger_at = NEVER;
            match self.state {
                State::TimeWait => return self.finish(env),
                State::FinWait2 => return self.remove(env),
                State::Established | State::CloseWait => {
                    if let Some(out) = self.on_keepalive(now, env) {
                        return out;
                    }
                }
                _ => {}
            }
        }
        if self.outstanding() > 0 && self.state.is_synchronized() && now >= self.unacked_since + env.cfg.user_timeout {
            return self.fail(ConnectionError::TimedOut, env);
        }
        if now >= self.delack_at {
            self.delack_at = NEVER;
            self.set(flag::ACK_NOW);
        }
        if now >= self.rto_at {
            self.rto_at = NEVER;
            return self.on_rto(now, env);
        }
        self.arm_keepalive(now, env);
        Outcome::KEEP
    }

    fn on_rto(&mut self, now: Instant, env: &mut Env) -> Outcome {
        let max_rto = env.cfg.max_rto;
        match self.state {
            State::SynSent | State::SynReceived => {
                let limit = if self.state == State::SynSent { env.cfg.syn_retries } else { env.cfg.synack_retries };
                // `limit` counts retransmissions, as Linux's tcp_syn_retries.
                self.retries = self.retries.saturating_add(1);
                if self.retries > limit {
                    return if self.is_passive() && self.state == State::SynReceived {
                        self.remove(env)
                    } else {
                        self.fail(ConnectionError::TimedOut, env)
                    };
                }
                self.rtt.back_off(max_rto);
                self.clear(flag::RTT_TIMING);
                self.snd_nxt = self.iss; // resend the SYN (or SYN-ACK)
                env.counters.timeouts += 1;
                self.totals.timeouts += 1;
            }
            State::Closed | State::TimeWait => {}
            _ if self.outstanding() > 0 && self.snd_wnd == 0 => {
                // A zero-window probe went unanswered: probe again, later.
                // The peer's window is closed, not the network congested.
                self.snd_nxt = self.snd_una;
                self.set(flag::FORCE);
                self.rtt.back_off(max_rto);
                self.rto_at = now + self.rtt.rto();
            }
            _ if self.outstanding() > 0 => {
                // RFC 6298 §5.4–5.6 and RFC 5681 §3.1: back off, collapse the
                // window, go back to SND.UNA.
                let mss = self.mss();
                self.cc.on_timeout(now, self.outstanding(), mss);
                self.clear(flag::RECOVERY | flag::FAST_REXMIT | flag::RTT_TIMING);
                self.inflation = 0;
                self.dupacks = 0;
                self.recover = self.snd_max;
                self.snd_nxt = self.snd_una;
                self.rtt.back_off(max_rto);
                self.rto_at = now + self.rtt.rto();
                env.counters.timeouts += 1;
                self.totals.timeouts += 1;
            }
            _ if self.has_unsent() => {
                // Persist: probe the zero window, or override silly-window
                // avoidance (RFC 9293 §3.8.6.1).
                self.set(flag::FORCE);
                self.rtt.back_off(max_rto);
            }
            _ => {}
        }
        Outcome::KEEP
    }

    fn arm_keepalive(&mut self, now: Instant, env: &Env) {
        if let Some(ka) = env.cfg.keepalive
            && matches!(self.state, State::Established | State::CloseWait)
            && self.linger_at == NEVER
        {
            let _ = now;
            self.linger_at = self.last_rx + ka.idle;
        }
    }

    fn on_keepalive(&mut self, now: Instant, env: &mut Env) -> Option<Outcome> {
        let ka = env.cfg.keepalive?;
        let idle = now - self.last_rx;
        if idle < ka.idle {
            self.linger_at = self.last_rx + ka.idle;
            self.retries = 0;
            return None;
        }
        let probes_sent = ((idle - ka.idle).total_micros() / ka.interval.total_micros().max(1)) as u8;
        if probes_sent >= ka.probes {
            return Some(self.fail(ConnectionError::TimedOut, env));
        }
        self.set(flag::KEEPALIVE_PROBE);
        self.linger_at = now + ka.interval;
        None
    }

    // ---------------------------------------------------------------------
    // Transmission
    // ---------------------------------------------------------------------

    /// The window we can offer now: free receive space (the whole buffer if
    /// none is attached yet), bounded by what 16 bits express.
    fn advertisable_window(&self, env: &Env) -> usize {
        let capacity = if self.rx.is_allocated() { self.rx.capacity() } else { env.cfg.rx_buffer };
        (capacity - self.rx.len()).min(MAX_UNSCALED_WINDOW)
    }

    /// Receiver silly-window avoidance step: min(RCV.BUFF / 2, MSS).
    fn window_step(&self, env: &Env) -> usize {
        (env.cfg.rx_buffer / 2).min(env.mss as usize).max(1)
    }

    /// The window to put in an outgoing segment. Moves the advertised right
    /// edge forward only in steps that avoid silly windows, and never back
    /// (RFC 9293 §3.8.6.2.2, §3.10.7.4).
    fn window_to_advertise(&mut self, env: &Env) -> u16 {
        let new_edge = self.rcv_nxt + self.advertisable_window(env);
        if self.rcv_adv.lt(self.rcv_nxt) {
            self.rcv_adv = self.rcv_nxt;
        }
        if new_edge.gt(self.rcv_adv) && new_edge.since(self.rcv_adv) as usize >= self.window_step(env) {
            self.rcv_adv = new_edge;
        }
        self.rcv_adv.since(self.rcv_nxt).min(u16::MAX as u32) as u16
    }

    /// Writes the next segment's TCP header and payload into `out` (which
    /// holds at least a header and one MSS); returns its length, or `None`
    /// when there is nothing to send.
    pub fn emit(&mut self, now: Instant, env: &mut Env, out: &mut [u8]) -> Option<usize> {
        let len = match self.state {
            State::Closed => return None,
            State::SynSent | State::SynReceived => {
                if self.snd_nxt == self.iss {
                    self.emit_syn(now, env, out)
                } else if self.has(flag::ACK_NOW) && self.state == State::SynReceived {
                    self.emit_ack(self.snd_nxt, env, out)
                } else {
                    self.clear(flag::ACK_NOW);
                    return None;
                }
            }
            _ => self.emit_synchronized(now, env, out)?,
        };
        env.counters.segments_out += 1;
        Some(len)
    }

    fn emit_syn(&mut self, now: Instant, env: &mut Env, out: &mut [u8]) -> usize {
        let synack = self.state == State::SynReceived;
        let header = TcpHeader {
            src_port: self.tuple.local_port,
            dst_port: self.tuple.remote_port,
            seq: self.iss,
            ack: synack.then_some(self.rcv_nxt),
            flags: Flags { syn: true, ..Flags::default() },
            window: self.window_to_advertise(env),
            mss: Some(env.mss),
        };
        let len = header.emit(out);
        self.snd_nxt = self.iss + 1u32;
        self.snd_max = self.snd_max.max(self.snd_nxt);
        if self.retries == 0 && !self.has(flag::RTT_TIMING) {
            self.set(flag::RTT_TIMING);
            self.rtt_seq = self.snd_nxt;
            self.rtt_start = now;
        } else if self.retries > 0 {
            env.counters.retransmits += 1;
            self.totals.retransmits += 1;
        }
        if self.rto_at == NEVER {
            self.rto_at = now + self.rtt.rto();
        }
        self.clear(flag::ACK_NOW);
        self.unacked_rx = 0;
        self.delack_at = NEVER;
        len
    }

    fn emit_ack(&mut self, seq: SeqNumber, env: &mut Env, out: &mut [u8]) -> usize {
        let header = TcpHeader {
            src_port: self.tuple.local_port,
            dst_port: self.tuple.remote_port,
            seq,
            ack: Some(self.rcv_nxt),
            flags: Flags::default(),
            window: self.window_to_advertise(env),
            mss: None,
        };
        self.clear(flag::ACK_NOW);
        self.unacked_rx = 0;
        self.delack_at = NEVER;
        header.emit(out)
    }

    fn emit_synchronized(&mut self, now: Instant, env: &mut Env, out: &mut [u8]) -> Option<usize> {
        if self.state == State::TimeWait {
            return self.has(flag::ACK_NOW).then(|| self.emit_ack(self.snd_nxt, env, out));
        }
        if self.has(flag::KEEPALIVE_PROBE) {
            self.clear(flag::KEEPALIVE_PROBE);
            // RFC 9293 §3.8.4: SEG.SEQ = SND.NXT - 1 draws an ACK without data.
            return Some(self.emit_ack(self.snd_una - 1u32, env, out));
        }

        let mss = self.mss() as usize;
        let fast = self.has(flag::FAST_REXMIT);
        let force = self.has(flag::FORCE);
        let seq = if fast { self.snd_una } else { self.snd_nxt };
        let start = self.data_start();
        let offset = seq.since(start) as usize;
        let queued = self.tx.len();
        let avail = queued.saturating_sub(offset);
        let header_room = out.len().saturating_sub(crate::wire::TCP_HEADER_LEN);
        let max_seg = mss.min(header_room);

        let len = if fast {
            avail.min(max_seg)
        } else {
            let window = self.snd_wnd.min(self.cwnd()) as usize;
            let usable = window.saturating_sub(self.in_flight() as usize);
            let mut len = avail.min(max_seg).min(usable);
            if len < avail && len < max_seg && !force && (len as u32) < self.max_snd_wnd / 2 {
                // Sender silly-window avoidance (RFC 9293 §3.8.6.2.1): wait for
                // a full segment or half the peer's largest window.
                len = 0;
            }
            if env.cfg.nagle && len < max_seg && len == avail && self.in_flight() > 0 && !force {
                len = 0; // Nagle: one small segment in flight at a time
            }
            if force && len == 0 && avail > 0 && self.snd_wnd == 0 {
                len = 1; // zero-window probe (RFC 9293 §3.8.6.1)
                self.set(flag::PROBING);
            }
            len
        };
        if force {
            self.clear(flag::FORCE);
        }
        let fin_due = self.fin_outstanding() && seq + len == self.fin_seq() && offset + len == queued;
        let send_fin = fin_due && (len > 0 || fast || self.snd_nxt.le(self.fin_seq()));
        if len == 0 && !send_fin {
            if avail > 0 && self.outstanding() == 0 && self.rto_at == NEVER {
                // Blocked by the window with nothing in flight: persist.
                self.rto_at = now + self.rtt.rto();
            }
            if fast {
                self.clear(flag::FAST_REXMIT);
            }
            return self.has(flag::ACK_NOW).then(|| self.emit_ack(self.snd_nxt, env, out));
        }
        let header = TcpHeader {
            src_port: self.tuple.local_port,
            dst_port: self.tuple.remote_port,
            seq,
            ack: Some(self.rcv_nxt),
            flags: Flags { fin: send_fin, psh: len > 0 && offset + len == queued, ..Flags::default() },
            window: self.window_to_advertise(env),
            mss: None,
        };
        let hlen = header.emit(out);
        let copied = self.tx.copy_out(offset, &mut out[hlen..hlen + len]);
        debug_assert_eq!(copied, len);

        let end = seq + len + send_fin as usize;
        let retransmission = seq.lt(self.snd_max);
        if retransmission {
            env.counters.retransmits += 1;
            self.totals.retransmits += 1;
        }
        if fast {
            self.clear(flag::FAST_REXMIT);
        } else {
            self.snd_nxt = end;
        }
        if self.outstanding() == 0 {
            self.unacked_since = now;
        }
        if end.gt(self.snd_max) {
            if !retransmission && !self.has(flag::RTT_TIMING) {
                self.set(flag::RTT_TIMING);
                self.rtt_seq = end;
                self.rtt_start = now;
            }
            self.snd_max = end;
        }
        if self.rto_at == NEVER || retransmission && fast {
            self.rto_at = now + self.rtt.rto();
        }
        if send_fin {
            match self.state {
                State::Established => self.state = State::FinWait1,
                State::CloseWait => self.state = State::LastAck,
                _ => {}
            }
        }
        self.clear(flag::ACK_NOW);
        self.unacked_rx = 0;
        self.delack_at = NEVER;
        Some(hlen + len)
    }

    /// The header of an RST that aborts this connection.
    pub fn reset_header(&self, seq: SeqNumber, ack: Option<SeqNumber>) -> TcpHeader {
        TcpHeader {
            src_port: self.tuple.local_port,
            dst_port: self.tuple.remote_port,
            seq,
            ack,
            flags: Flags { rst: true, ..Flags::default() },
            window: 0,
            mss: None,
        }
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
            send_queue: self.tx.len(),
            recv_queue: self.rx.len(),
        }
    }
}

#[cfg(test)]
mod size {
    /// The control block is most of an idle connection's cost (the budget is
    /// 1 KiB per idle connection, slab, flow table and timer included); keep
    /// it within six cache lines.
    #[test]
    fn a_control_block_fits_in_six_cache_lines() {
        let size = core::mem::size_of::<super::Connection>();
        assert!(size <= 6 * 64, "Connection grew to {size} bytes");
    }
}
