//! Starting faster on a known path: path memory and careful resume.
//!
//! Read first: RFC 9040 §5 (temporal sharing: a new connection takes the
//! RTT, RTTVAR and ssthresh that recent connections to the host learned)
//! and RFC 9959, "Convergence of Congestion Control from Retained State"
//! (draft-ietf-tsvwg-careful-resume): §3 defines the phases followed here,
//! §4 the implementation notes.
//!
//! Every connection *observes* its path (RFC 9959 §3.1): the most data
//! acknowledged in one round trip (saved_cwnd) and the rate of that round,
//! beside the RTT estimates it keeps anyway. When it ends, a connection that
//! finished its handshake and had data acknowledged writes them to the
//! shard's [`PathCache`](crate::tcp::path_cache::PathCache) under its
//! peer's prefix. A SYN flood writes nothing; a peer writes only its own
//! prefix's entry.
//!
//! With [`FastStart::PathMemory`] a new connection to a remembered path
//! starts its RTT estimator from the path's SRTT and RTTVAR (so even the
//! SYN-ACK's RTO fits the path) and its ssthresh from the path's; cwnd
//! starts at the initial window as always.
//!
//! With [`FastStart::CarefulResume`] it does that and then runs careful
//! resume's phases:
//! - *Reconnaissance* (§3.2): a server's initial data is its SYN-ACK; the
//!   ACK of it, without a retransmission, confirms the path, and its RTT is
//!   the current RTT. The jump waits until the application has more to
//!   send than the initial window allows (§3.2 lets it be deferred so).
//!   No jump (normal CC from then on) when: the saved window is older than
//!   the lifetime or another connection uses it (§3.2), the handshake's RTT
//!   is at most half the saved min-RTT or over ten times it (§4.2.1), or
//!   over a quarter above it (a standing queue: our own, stricter rule,
//!   which §4.2.1 leaves to the design), or any loss was seen.
//! - *Unvalidated* (§3.3): PipeSize = flight_size; cwnd = jump_cwnd =
//!   saved_cwnd / 2, bounded by the flow's fairness share (rate × current
//!   RTT) when a policy gives one; everything sent is paced at jump_cwnd
//!   per current RTT (§4.3.2). It ends when the window is used up, when an
//!   ACK covers the first unvalidated byte, or after one RTT; then if
//!   flight_size < IW or ≤ PipeSize, cwnd = PipeSize (not below IW) and
//!   careful resume is over, else cwnd = flight_size and *Validating*.
//! - *Validating* (§3.4): normal CC; over when the last unvalidated byte is
//!   acknowledged.
//! - *Safe Retreat* (§3.5): loss (or an RTT over ten times the saved one,
//!   §3.3 "path change") in Unvalidated or Validating: the path's entry is
//!   deleted, cwnd = PipeSize / 2 (at least 2·MSS) and ssthresh likewise
//!   (≤ PipeSize × β with β = ½), cwnd does not grow until the last
//!   unvalidated byte is acknowledged; then normal CC.
//! - A retransmission timeout ends careful resume at once (§3.6).
//!
//! Beyond RFC 9959: a connection with no remembered path, on a shard whose
//! fairness policy gives a newcomer's share, takes that share as its saved
//! state: the policy has made room for it (every flow's window is capped
//! at its share, and the caps follow the number of flows), so the share's
//! rate times the handshake's RTT is a window the path can carry now. It
//! jumps there as careful resume would (Reconnaissance waits for data; no
//! jump after a loss; paced over one RTT; validated; safe retreat on loss
//! or on an RTT over ten times the handshake's), and a late download
//! reaches its share in about one round trip instead of slow start's
//! log₂(share × RTT / IW) of them.

use super::*;
use crate::config::FastStart;
use crate::tcp::congestion::initial_window_of;
use crate::tcp::path_cache::PathRecord;

/// Careful resume's phases (RFC 9959 §3), and `Normal` when it is not in
/// use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) enum Phase {
    /// Normal congestion control: careful resume is not (or no longer) used.
    #[default]
    Normal,
    /// The path is known and confirmed by the handshake; the jump waits
    /// for data.
    Reconnaissance,
    /// cwnd is jump_cwnd; the data sent is not yet validated.
    Unvalidated,
    /// Waiting for the unvalidated data's acknowledgment.
    Validating,
    /// The jump met congestion: draining at a reduced window.
    SafeRetreat,
}

/// The per-connection state: careful resume's and the path observation's.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct FastStartState {
    pub phase: Phase,
    /// The path's saved min-RTT, µs (saved_rtt); the handshake's once a
    /// jump from the fairness share is made.
    saved_rtt_us: u32,
    /// The jump's window comes from the fairness share, not from a saved
    /// path (none was known).
    from_share: bool,
    /// A jump was made on this connection.
    pub jumped: bool,
    /// PipeSize, bytes.
    pipe_size: u32,
    /// Unvalidated: the first byte sent in the phase; Validating and Safe
    /// Retreat: the end of the last one.
    mark: SeqNumber,
    /// When the Unvalidated phase began (µs, wrapping).
    entered_us: u32,
    /// The observation round under way: it ends when this is acknowledged.
    round_end: SeqNumber,
    /// When it began (µs, wrapping), and the bytes delivered in it.
    round_start_us: u32,
    round_bytes: u32,
    /// The most bytes delivered in one round, and that round's rate
    /// (bytes per second).
    best_window: u32,
    best_rate: u32,
}

/// The least rise in the RTT over the saved min-RTT that counts as a
/// standing queue (jitter below it is not one), µs.
const QUEUE_SLACK_US: u32 = 2_000;

fn stamp_us(now: Instant) -> u32 {
    now.total_micros() as u32
}

fn us(d: Duration) -> u32 {
    d.total_micros().min(u64::from(u32::MAX)) as u32
}

impl Connection {
    /// The initial window in bytes.
    fn iw(&self, env: &Env) -> u32 {
        initial_window_of(self.mss(), env.cfg.initial_window)
    }

    /// RFC 9040 §5: a new connection's RTT estimator starts from the
    /// path's SRTT and RTTVAR, if the path is known (before the SYN or
    /// SYN-ACK goes, so its RTO fits the path).
    pub(super) fn seed_rtt(&mut self, now: Instant, env: &Env) {
        if env.cfg.fast_start == FastStart::Off {
            return;
        }
        let Some(path) = env.paths.get(now, self.tuple.remote().ip()) else { return };
        self.rtt.seed(path.record.srtt, path.record.rttvar, env.cfg.min_rto, env.cfg.max_rto);
    }

    /// The handshake completed and the congestion controller is new: the
    /// initial window, the path's ssthresh (RFC 9040 §5), and whether
    /// careful resume may follow (RFC 9959 §3.2: not if the handshake
    /// needed a retransmission).
    pub(super) fn start_window(&mut self, now: Instant, env: &mut Env) {
        let lost = self.totals.retransmits > 0;
        self.fs = FastStartState { round_end: self.snd_max, round_start_us: stamp_us(now), ..FastStartState::default() };
        if env.cfg.initial_window != 10 {
            let iw = self.iw(env);
            self.cc.set_window(Some(iw), None);
        }
        if env.cfg.fast_start == FastStart::Off {
            return;
        }
        let Some(path) = env.paths.get(now, self.tuple.remote().ip()) else {
            // No saved state; the fairness policy's share may stand for it.
            if env.cfg.fast_start == FastStart::CarefulResume && !lost && env.shares.capacity.is_some() {
                self.fs.phase = Phase::Reconnaissance;
                self.fs.from_share = true;
            }
            return;
        };
        env.counters.path_memory_used += 1;
        if path.record.ssthresh != u32::MAX {
            self.cc.set_window(None, Some(path.record.ssthresh.max(2 * self.mss())));
        }
        if env.cfg.fast_start == FastStart::CarefulResume && !lost && path.record.window > 0 {
            self.fs.phase = Phase::Reconnaissance;
            self.fs.saved_rtt_us = us(path.record.min_rtt).max(1);
        }
    }

    /// Reconnaissance → Unvalidated, when the application has more to send
    /// than cwnd allows and the path is still what it was (RFC 9959 §3.2,
    /// §4.2.1). Called before a data segment is sized.
    pub(super) fn maybe_jump(&mut self, now: Instant, env: &mut Env) {
        if self.fs.phase != Phase::Reconnaissance {
            return;
        }
        let unsent = (self.tx.len() as u32).saturating_sub(self.snd_nxt.since(self.data_start()));
        if self.pipe().saturating_add(unsent) <= self.cwnd() {
            return; // the normal window suffices (yet)
        }
        self.fs.phase = Phase::Normal;
        let saved = self.fs.saved_rtt_us;
        let (Some(min_rtt), Some(srtt)) = (self.min_rtt.get(), self.rtt.srtt()) else { return };
        // §3.2 "Detected congestion": any loss ends careful resume.
        if self.totals.retransmits > 0 || self.has(flag::RECOVERY) {
            return;
        }
        if self.fs.from_share {
            self.jump_to_share(now, min_rtt, srtt, env);
            return;
        }
        // §3.2 "Minimum RTT too small" and §4.2.1: under half the saved RTT
        // the saved window would send faster than the path was seen to
        // carry; over ten times it, the path has changed.
        if us(min_rtt) <= saved / 2 || us(srtt) as u64 > 10 * saved as u64 {
            return;
        }
        // §4.2.1 leaves to the design whether a rise in the RTT should stop
        // careful resume; here it does when the handshake's RTT is more
        // than a quarter (and 2 ms) above the saved min-RTT: a standing
        // queue that was not there, someone else now using the path, into
        // which a jump would only add loss (the simulated test
        // `careful_resume_into_a_link_that_has_since_become_congested...`
        // measured twice slow start's drops without this check). This is
        // the queueing signal (ratio-RTT) the fairness policies use.
        if us(min_rtt) > saved.saturating_add((saved / 4).max(QUEUE_SLACK_US)) {
            return;
        }
        let addr = self.tuple.remote().ip();
        let Some(path) = env.paths.get(now, addr) else { return };
        // §3.3: jump_cwnd ≤ saved_cwnd / 2; and no more than the flow's
        // fair share would carry in the current RTT.
        let mut jump = path.record.window / 2;
        if let Some(share) = env.shares.window(srtt) {
            jump = jump.min(share);
        }
        if jump <= self.cc.cwnd() || env.paths.claim_window(now, addr).is_none() {
            return;
        }
        self.enter_unvalidated(now, jump, env);
    }

    /// The jump of a connection with no saved path: to the fairness share's
    /// rate times the RTT, unless the policy is gone or that is no more
    /// than cwnd already (a short path's share may be under the initial
    /// window). The handshake's RTT stands for the saved one from here on
    /// (a path change is an RTT over ten times it).
    fn jump_to_share(&mut self, now: Instant, min_rtt: Duration, srtt: Duration, env: &mut Env) {
        let Some(jump) = env.shares.window(srtt) else { return };
        if jump <= self.cc.cwnd() {
            return;
        }
        self.fs.saved_rtt_us = us(min_rtt).max(1);
        self.enter_unvalidated(now, jump, env);
    }

    /// §3.3 "Initialising PipeSize", "Setting the jump_cwnd".
    fn enter_unvalidated(&mut self, now: Instant, jump: u32, env: &mut Env) {
        self.fs.pipe_size = self.pipe();
        self.fs.mark = self.snd_nxt;
        self.fs.entered_us = stamp_us(now);
        self.fs.phase = Phase::Unvalidated;
        self.fs.jumped = true;
        self.cc.set_window(Some(jump), None);
        env.counters.fast_start_jumps += 1;
        env.shares.claim();
    }

    /// The pacing rate careful resume (RFC 9959 §4.3.2: jump_cwnd per
    /// current RTT) or a larger initial window (the same over the
    /// handshake's RTT, until data is first acknowledged) asks for. The
    /// RTT is this connection's own lowest sample (the handshake's, at
    /// first), not the SRTT a remembered path seeded.
    pub(super) fn fast_start_pacing(&self, env: &Env) -> Option<u64> {
        let paced = match self.fs.phase {
            Phase::Unvalidated => true,
            _ => env.cfg.initial_window > 10 && self.totals.bytes_acked == 0,
        };
        let srtt = self.min_rtt.get().or(self.rtt.srtt()).filter(|_| paced)?;
        // The pacer counts whole frames: the window's payload plus each
        // segment's headers.
        let mss = u64::from(self.mss());
        let wire = u64::from(self.cwnd()) * (mss + u64::from(crate::fairness::WIRE_OVERHEAD)) / mss.max(1);
        Some(wire * 1_000_000 / srtt.total_micros().max(1))
    }

    /// Whether the congestion controller may grow cwnd on this ACK (not in
    /// Safe Retreat, RFC 9959 §3.5 "Maintaining CWND").
    pub(super) fn fast_start_allows_growth(&self) -> bool {
        self.fs.phase != Phase::SafeRetreat
    }

    /// After an ACK: the observation round, PipeSize, and careful resume's
    /// transitions (RFC 9959 §3.3–3.5).
    pub(super) fn fast_start_on_ack(&mut self, now: Instant, delivered: u32, rtt: Option<Duration>, env: &mut Env) {
        self.observe_round(now, delivered);
        match self.fs.phase {
            Phase::Normal | Phase::Reconnaissance => {}
            Phase::Unvalidated | Phase::Validating => {
                self.fs.pipe_size = self.fs.pipe_size.saturating_add(delivered);
                // §3.3 "Confirming the path during transmission": an RTT
                // over ten times the saved one is a path change.
                if rtt.is_some_and(|r| us(r) as u64 > 10 * self.fs.saved_rtt_us as u64) {
                    self.safe_retreat(env);
                } else if self.fs.phase == Phase::Unvalidated {
                    self.check_unvalidated(now, env);
                } else if self.snd_una.ge(self.fs.mark) {
                    // §3.4: the last unvalidated byte is acknowledged.
                    self.fs.phase = Phase::Normal;
                }
            }
            Phase::SafeRetreat => {
                self.fs.pipe_size = self.fs.pipe_size.saturating_add(delivered);
                if self.snd_una.ge(self.fs.mark) {
                    // §3.5: back to normal CC with ssthresh ≤ PipeSize × β
                    // (β = ½); cwnd stays where the retreat left it.
                    let ssthresh = (self.fs.pipe_size / 2).max(2 * self.mss()).min(self.cc.ssthresh());
                    self.cc.set_window(None, Some(ssthresh));
                    self.fs.phase = Phase::Normal;
                }
            }
        }
    }

    /// After a data segment went out: the Unvalidated phase may be over
    /// (RFC 9959 §3.3 "Completed sending all unvalidated packets").
    pub(super) fn fast_start_on_send(&mut self, now: Instant, env: &mut Env) {
        if self.fs.phase == Phase::Unvalidated {
            self.check_unvalidated(now, env);
        }
    }

    /// RFC 9959 §3.3: the events that end the Unvalidated phase, and
    /// "Check flight_size".
    fn check_unvalidated(&mut self, now: Instant, env: &mut Env) {
        let flight = self.pipe();
        let used_up = self.cwnd().saturating_sub(flight) < self.mss();
        let first_acked = self.snd_una.gt(self.fs.mark) || self.fack.gt(self.fs.mark);
        let srtt = self.rtt.srtt().map_or(u32::MAX, us);
        let rtt_over = stamp_us(now).wrapping_sub(self.fs.entered_us) > srtt;
        if !(used_up || first_acked || rtt_over) {
            return;
        }
        let iw = self.iw(env);
        if flight < iw || flight <= self.fs.pipe_size {
            // Rate-limited: the jump was not used; what was is validated.
            self.cc.set_window(Some(self.fs.pipe_size.max(iw)), None);
            self.fs.phase = Phase::Normal;
        } else {
            self.cc.set_window(Some(flight), None);
            self.fs.mark = self.snd_max;
            self.fs.phase = Phase::Validating;
        }
    }

    /// Loss detected (recovery begins): in Unvalidated or Validating, the
    /// jump is to blame (RFC 9959 §3.3, §3.4 "Detected congestion"); in
    /// Reconnaissance, careful resume is off (§3.2).
    pub(super) fn fast_start_on_congestion(&mut self, env: &mut Env) {
        match self.fs.phase {
            Phase::Reconnaissance => self.fs.phase = Phase::Normal,
            Phase::Unvalidated | Phase::Validating => self.safe_retreat(env),
            Phase::Normal | Phase::SafeRetreat => {}
        }
    }

    /// RFC 9959 §3.5, on entry to Safe Retreat.
    fn safe_retreat(&mut self, env: &mut Env) {
        env.paths.remove(self.tuple.remote().ip());
        let cwnd = (self.fs.pipe_size / 2).max(2 * self.mss());
        self.cc.set_window(Some(cwnd), Some(cwnd));
        self.fs.mark = self.snd_max;
        self.fs.phase = Phase::SafeRetreat;
        env.counters.fast_start_retreats += 1;
    }

    /// A retransmission timeout: persistent congestion ends careful resume
    /// (RFC 9959 §3.6).
    pub(super) fn fast_start_on_timeout(&mut self) {
        self.fs.phase = Phase::Normal;
    }

    /// RFC 9959 §3.1: the data acknowledged per round trip. A round ends
    /// when what was sent at its start is acknowledged.
    fn observe_round(&mut self, now: Instant, delivered: u32) {
        self.fs.round_bytes = self.fs.round_bytes.saturating_add(delivered);
        let acked = if self.fack.gt(self.snd_una) { self.fack } else { self.snd_una };
        if acked.lt(self.fs.round_end) {
            return;
        }
        let elapsed = stamp_us(now).wrapping_sub(self.fs.round_start_us).max(1);
        if self.fs.round_bytes > self.fs.best_window {
            self.fs.best_window = self.fs.round_bytes;
            let rate = u64::from(self.fs.round_bytes) * 1_000_000 / u64::from(elapsed);
            self.fs.best_rate = rate.min(u64::from(u32::MAX)) as u32;
        }
        self.fs.round_end = self.snd_max;
        self.fs.round_start_us = stamp_us(now);
        self.fs.round_bytes = 0;
    }

    /// Writes what this connection learned to the path cache, if it is a
    /// validated one: past the handshake, with data acknowledged and an RTT
    /// measured. A window under 4 × IW is not saved (RFC 9959 §3.1).
    ///
    /// The window saved is the path's capacity without its queue: the best
    /// round's rate times the min-RTT, at most the bytes that round
    /// delivered. A round at the end of slow start delivers the link's rate
    /// over an RTT stretched by the queue it built, which §4.1 warns
    /// against saving (a CWND overshoot).
    /// Once per connection: at the first of the peer's FIN after the
    /// exchange, TIME-WAIT, or removal.
    pub(super) fn remember_path(&mut self, now: Instant, env: &mut Env) {
        if env.cfg.fast_start == FastStart::Off || self.totals.bytes_acked == 0 || self.has(flag::PATH_SAVED) {
            return;
        }
        let (Some(srtt), Some(rttvar), Some(min_rtt)) = (self.rtt.srtt(), self.rtt.rttvar(), self.min_rtt.get()) else {
            return;
        };
        let bdp = u64::from(self.fs.best_rate) * min_rtt.total_micros() / 1_000_000;
        let capacity = bdp.min(u64::from(self.fs.best_window)) as u32;
        let window = if capacity >= 4 * self.iw(env) { capacity } else { 0 };
        let record = PathRecord {
            min_rtt,
            srtt,
            rttvar,
            window,
            delivery_rate: if window > 0 { u64::from(self.fs.best_rate) } else { 0 },
            cwnd: self.cc.cwnd(),
            ssthresh: self.cc.ssthresh(),
        };
        env.paths.update(now, self.tuple.remote().ip(), record);
        self.set(flag::PATH_SAVED);
        env.counters.path_memory_updates += 1;
    }

    /// The careful-resume phase, for tests.
    #[cfg(test)]
    pub(crate) fn fast_start_phase(&self) -> Phase {
        self.fs.phase
    }
}
