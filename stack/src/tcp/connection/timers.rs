//! The connection's timers: retransmission and persist, delayed ACK,
//! TIME-WAIT, FIN-WAIT-2, keep-alive and the user timeout.

use core::ops::{Index, IndexMut};

use super::*;

/// A connection's timers, by name. Each is a deadline in the
/// [`TimerTable`], [`NEVER`] when it is not running; the user timeout is
/// not one of them (it runs from `unacked_since`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Timer {
    /// Retransmission, or persist when nothing is in flight (RFC 6298,
    /// RFC 9293 §3.8.6.1).
    Retransmit,
    /// The delayed ACK (RFC 9293 §3.8.6.3).
    DelayedAck,
    /// The one [`StateTimer`] running: TIME-WAIT, FIN-WAIT-2 or
    /// keep-alive.
    State,
    /// The pacer lets held data go.
    Pacing,
    /// RACK's reordering window has passed for some segment (RFC 8985).
    Reorder,
    /// The tail-loss probe (RFC 8985 §7).
    TailLossProbe,
}

impl Timer {
    /// How many there are.
    const COUNT: usize = 6;
}

/// Every [`Timer`]'s deadline; the shard keeps its timer wheel at
/// [`next_timeout`](Self::next_timeout) (with the user timeout).
#[derive(Clone, Copy, Debug)]
pub(crate) struct TimerTable([Instant; Timer::COUNT]);

impl TimerTable {
    /// No timer running.
    pub(crate) const fn new() -> TimerTable {
        TimerTable([NEVER; Timer::COUNT])
    }

    /// The earliest deadline ([`NEVER`] when none runs).
    pub(crate) fn next_timeout(&self) -> Instant {
        self.0.iter().copied().fold(NEVER, Instant::min)
    }
}

impl Index<Timer> for TimerTable {
    type Output = Instant;

    fn index(&self, timer: Timer) -> &Instant {
        &self.0[timer as usize]
    }
}

impl IndexMut<Timer> for TimerTable {
    fn index_mut(&mut self, timer: Timer) -> &mut Instant {
        &mut self.0[timer as usize]
    }
}

/// The one timer a connection's state holds besides retransmission: its
/// TIME-WAIT, its FIN-WAIT-2 timeout, or keep-alive. No connection needs
/// two of them at once (TIME-WAIT and FIN-WAIT-2 are states of their own,
/// keep-alive runs in ESTABLISHED and CLOSE-WAIT), so they share one
/// deadline ([`Timer::State`]); this says whose it is, in a byte the
/// control block had spare.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum StateTimer {
    /// None running.
    Off,
    /// 2 MSL in TIME-WAIT (RFC 9293 §3.4.2): the connection is finished
    /// when it fires.
    TimeWait,
    /// An orphan's wait in FIN-WAIT-2 for the peer's FIN (Linux's
    /// `tcp_fin_timeout`): the connection is removed when it fires.
    FinWait2,
    /// Keep-alive (RFC 9293 §3.8.4): the end of the idle time, or the
    /// next probe.
    KeepAlive,
}

impl Connection {
    // ---------------------------------------------------------------------
    // Timers
    // ---------------------------------------------------------------------

    /// Sets the state's timer to fire at `at`, in place of whichever ran.
    pub(super) fn arm_state_timer(&mut self, timer: StateTimer, at: Instant) {
        self.state_timer = timer;
        self.timers[Timer::State] = if timer == StateTimer::Off { NEVER } else { at };
    }

    /// Handles every deadline that has passed.
    pub fn on_timer(&mut self, now: Instant, env: &mut Env) -> Outcome {
        if now >= self.timers[Timer::State] {
            let fired = self.state_timer;
            self.arm_state_timer(StateTimer::Off, NEVER);
            // A timer outlives the state that set it (keep-alive's, when
            // the application closes): then it is only cleared.
            match (fired, self.state) {
                (StateTimer::TimeWait, State::TimeWait) => return self.finish(env),
                (StateTimer::FinWait2, State::FinWait2) => return self.remove(env),
                (StateTimer::KeepAlive, State::Established | State::CloseWait) => {
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
        // A peer may keep its window closed for ever and answer every probe
        // (RFC 9293 §3.8.6.1): a connection the application holds stays
        // open, for the application to judge. One it has closed would hold
        // its buffers for nobody, so after the user timeout in persist it
        // is given up (RFC 6429; Linux's orphan retries).
        if self.has_all(flag::ORPHAN | flag::PERSIST) && now >= self.unacked_since + env.cfg.user_timeout {
            env.counters.orphans_given_up += 1;
            return self.fail(ConnectionError::TimedOut, env);
        }
        if now >= self.timers[Timer::Reorder] {
            // RACK's reordering window has passed for some segment.
            self.timers[Timer::Reorder] = NEVER;
            self.detect_losses(now, env);
        }
        if now >= self.timers[Timer::TailLossProbe] {
            self.on_tlp(now);
        }
        if now >= self.timers[Timer::Pacing] {
            // The pacer lets held data go; the shard offers a turn after this.
            self.timers[Timer::Pacing] = NEVER;
        }
        if now >= self.timers[Timer::DelayedAck] {
            self.timers[Timer::DelayedAck] = NEVER;
            self.set(flag::ACK_NOW);
        }
        if now >= self.timers[Timer::Retransmit] {
            self.timers[Timer::Retransmit] = NEVER;
            return self.on_rto(now, env);
        }
        self.arm_keepalive(now, env);
        Outcome::KEEP
    }

    pub(super) fn on_rto(&mut self, now: Instant, env: &mut Env) -> Outcome {
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
                // Data out and the window closed: the peer is alive but full.
                // Probe instead of collapsing the window.
                self.set(flag::FORCE);
                self.rtt.back_off(max_rto);
                self.timers[Timer::Retransmit] = now + self.rtt.rto();
            }
            _ if self.outstanding() > 0 => self.on_retransmission_timeout(now, env),
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

    pub(super) fn arm_keepalive(&mut self, now: Instant, env: &Env) {
        if let Some(ka) = env.cfg.keepalive
            && matches!(self.state, State::Established | State::CloseWait)
            && self.state_timer == StateTimer::Off
        {
            let _ = now;
            self.arm_state_timer(StateTimer::KeepAlive, self.last_rx + ka.idle);
        }
    }

    pub(super) fn on_keepalive(&mut self, now: Instant, env: &mut Env) -> Option<Outcome> {
        let ka = env.cfg.keepalive?;
        let idle = now - self.last_rx;
        if idle < ka.idle {
            self.arm_state_timer(StateTimer::KeepAlive, self.last_rx + ka.idle);
            self.retries = 0;
            return None;
        }
        let probes_sent = ((idle - ka.idle).total_micros() / ka.interval.total_micros().max(1)) as u8;
        if probes_sent >= ka.probes {
            return Some(self.fail(ConnectionError::TimedOut, env));
        }
        self.set(flag::KEEPALIVE_PROBE);
        self.arm_state_timer(StateTimer::KeepAlive, now + ka.interval);
        None
    }
}
