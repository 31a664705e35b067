//! Segment arrival: RFC 9293 §3.10.7's steps, ACK processing, reassembly
//! and the FIN.

use super::*;
use crate::tcp::sent_queue::Delivered;

impl Connection {
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
    pub(super) fn on_segment_syn_sent(&mut self, now: Instant, seg: &Segment<'_>, env: &mut Env) -> Outcome {
        // First: the ACK.
        if let Some(ack) = seg.ack
            && (ack.le(self.iss) || ack.gt(self.snd_max))
        {
            env.counters.drop(DropReason::TcpBadHandshake);
            return if seg.flags.rst { Outcome::KEEP } else { Outcome::reset(ack, None) };
        }
        // Second: RST. Acceptable only with an acceptable ACK.
        if seg.flags.rst {
            if seg.ack.is_some() {
                return self.fail(ConnectionError::Refused, env);
            }
            env.counters.drop(DropReason::TcpBadHandshake);
            return Outcome::KEEP;
        }
        // Fourth: SYN.
        if !seg.flags.syn {
            env.counters.drop(DropReason::TcpBadHandshake);
            return Outcome::KEEP;
        }
        self.take_peer_syn(now, seg, env);
        if peer_mss(seg).1 {
            env.counters.mss_raised += 1;
        }
        match seg.ack {
            Some(ack) => {
                self.snd_una = ack;
                if self.has(flag::RTT_TIMING) && ack.ge(self.rtt_seq) {
                    let _ = self.take_rtt_sample(now, env);
                }
                self.timers[Timer::Retransmit] = NEVER;
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
    pub(super) fn establish(&mut self, now: Instant, env: &mut Env) {
        self.state = State::Established;
        self.retries = 0;
        self.cc = Congestion::new(env.cfg.congestion, self.mss());
        self.start_window(now, env);
        if let Some(ka) = env.cfg.keepalive {
            self.arm_state_timer(StateTimer::KeepAlive, now + ka.idle);
        }
        env.counters.established += 1;
        if self.tuple.ipv4().is_none() {
            env.counters.established_ipv6 += 1;
        }
        if !self.is_passive() {
            let h = self.handle();
            self.notify(env, Event::Connected(h));
        }
    }

    /// RFC 9293 §3.10.7.4: every state from SYN-RECEIVED on.
    pub(super) fn on_segment_synchronized(&mut self, now: Instant, seg: &Segment<'_>, env: &mut Env) -> Outcome {
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

        // RFC 7323 §5.3 R1: PAWS. An older timestamp marks an old duplicate.
        if !self.paws_ok(now, seg) {
            env.counters.drop(DropReason::TcpPaws);
            if !seg.flags.rst {
                self.answer_invalid(now, seg, env);
            }
            return Outcome::KEEP;
        }

        // First: is the sequence number acceptable?
        if !self.acceptable(seg) {
            env.counters.drop(DropReason::TcpOutOfWindow);
            if !seg.flags.rst {
                self.answer_invalid(now, seg, env);
                let end = seg.seq + seg.payload.len();
                if !seg.payload.is_empty() && end.le(self.rcv_nxt) {
                    // Wholly old data: a retransmission that was not needed
                    // (RFC 2883 §4.1).
                    self.note_duplicate(seg.seq, end);
                }
                if self.state == State::TimeWait && seg.flags.fin {
                    self.arm_state_timer(StateTimer::TimeWait, now + env.cfg.time_wait);
                }
            }
            return Outcome::KEEP;
        }

        // RFC 7323 §4.3 (and §5.3 R3): remember the timestamp to echo.
        self.update_ts_recent(now, seg);

        // Second: RST. RFC 5961 §3.2: only an RST at exactly RCV.NXT resets;
        // one elsewhere in the window may be a blind guess and draws a
        // (rate-limited) challenge ACK, which a real peer answers with an
        // exact RST.
        if seg.flags.rst {
            if seg.seq != self.rcv_nxt {
                env.counters.drop(DropReason::TcpRstNotExact);
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
            env.counters.drop(DropReason::TcpUnexpectedSyn);
            self.challenge_ack(env);
            return Outcome::KEEP;
        }

        // Fifth: the ACK field.
        let Some(ack) = seg.ack else {
            env.counters.drop(DropReason::TcpNoAck);
            return Outcome::KEEP;
        };
        if self.state == State::SynReceived {
            if ack.le(self.snd_una) || ack.gt(self.snd_max) {
                env.counters.drop(DropReason::TcpBadHandshake);
                return Outcome::reset(ack, None);
            }
            self.snd_wnd = self.peer_window(seg);
            self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
            self.snd_wl1 = seg.seq;
            self.snd_wl2 = ack;
            self.establish(now, env);
        }
        if ack.gt(self.snd_max) {
            // RFC 9293: an ACK for something not yet sent: ACK and drop
            // (RFC 5961 §5.2, throttled as its §7 asks).
            env.counters.drop(DropReason::TcpAckUnsent);
            self.answer_invalid(now, seg, env);
            return Outcome::KEEP;
        }
        if ack.lt(self.snd_una - self.max_snd_wnd) {
            // RFC 5961 §5.2: an ACK older than any window we could have been
            // given is a blind injection attempt, not a delayed duplicate.
            env.counters.drop(DropReason::TcpAckTooOld);
            self.challenge_ack(env);
            return Outcome::KEEP;
        }
        let fin_acked = self.process_ack(now, seg, ack, env);
        if fin_acked {
            match self.state {
                State::FinWait1 => {
                    self.state = State::FinWait2;
                    if self.is_orphan() {
                        self.arm_state_timer(StateTimer::FinWait2, now + env.cfg.fin_wait2_timeout);
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

    /// Answers an unacceptable segment (RFC 9293 §3.10.7.4: old, beyond the
    /// window or failing PAWS; or acknowledging what was never sent) with an
    /// ACK. A segment with data or FIN always gets it: its sender may be
    /// retransmitting because our ACK was lost; a SYN gets a challenge ACK.
    /// One with none of these (a pure ACK,
    /// a keep-alive probe) gets at most one per
    /// [`crate::TcpConfig::invalid_ack_interval`] on this connection, as
    /// Linux's `tcp_invalid_ratelimit` does: a peer repeating stale ACKs on
    /// purpose would otherwise have each one reflected, on the path the
    /// other flows' data takes (RFC 5961 §7 asks for such throttling).
    pub(super) fn answer_invalid(&mut self, now: Instant, seg: &Segment<'_>, env: &mut Env) {
        let ms = stamp_ms(now);
        let interval = env.cfg.invalid_ack_interval.total_millis().min(u64::from(u32::MAX / 2)) as u32;
        if seg.flags.syn {
            // RFC 5961 §4.2: a SYN, whatever its sequence number, draws a
            // challenge ACK, within the shard's budget.
            self.challenge_ack(env);
        } else if !seg.payload.is_empty() || seg.flags.fin {
            self.set(flag::ACK_NOW);
        } else if ms.wrapping_sub(self.invalid_ack_at) >= interval {
            self.invalid_ack_at = ms;
            self.set(flag::ACK_NOW);
        } else {
            env.counters.drop(DropReason::TcpInvalidAckLimit);
        }
    }

    /// Sends an ACK that a real peer answers usefully (RFC 5961 §7), within
    /// the shard's budget of challenge ACKs per second.
    pub(super) fn challenge_ack(&mut self, env: &mut Env) {
        if env.challenge_acks_left > 0 {
            env.challenge_acks_left -= 1;
            self.set(flag::ACK_NOW);
        } else {
            env.counters.drop(DropReason::TcpChallengeAckLimit);
        }
    }

    /// The window a segment offers, scaled (RFC 7323 §2.3: never in a SYN).
    pub(super) fn peer_window(&self, seg: &Segment<'_>) -> u32 {
        let shift = if self.has(flag::WSCALE) && !seg.flags.syn { self.snd_wscale } else { 0 };
        (seg.window as u32) << shift
    }

    /// RFC 7323 §5.3 R1: a segment whose TSval is older than TS.Recent is an
    /// old duplicate, unless TS.Recent itself is stale (idle beyond 24 days).
    ///
    /// With one allowance for reordering: a segment no older than the PAWS
    /// floor, TS.Recent as it was one to two receive RTTs ago, passes. On a
    /// path that delays some segments, a retransmission that fills the hole
    /// at RCV.NXT carries a newer TSval than originals still on their way, and
    /// the strict test would throw those away (Linux counts them as
    /// PAWSEstabRejected), turning reordering into loss. PAWS exists to
    /// reject segments from an earlier wrap of the sequence space (§5.1):
    /// in two RTTs a peer sends at most two windows, under 2^31 bytes, so a
    /// segment sent since the floor was current cannot be one.
    pub(super) fn paws_ok(&mut self, now: Instant, seg: &Segment<'_>) -> bool {
        let Some((tsval, _)) = seg.timestamp else { return true };
        if seg.flags.rst || !self.has(flag::TIMESTAMPS) || !self.has(flag::TS_RECENT) {
            return true;
        }
        if (tsval.wrapping_sub(self.ts_recent) as i32) >= 0 {
            return true;
        }
        if (tsval.wrapping_sub(self.ts_floor) as i32) >= 0 && self.state.is_synchronized() {
            return true;
        }
        if stamp_ms(now).wrapping_sub(self.ts_recent_at) > PAWS_IDLE_MS {
            self.clear(flag::TS_RECENT);
            return true;
        }
        false
    }

    /// Sets TS.Recent, and moves the PAWS floor on once per receive RTT: the
    /// value taken one RTT ago becomes the floor. Without an RTT estimate
    /// the floor is TS.Recent itself (strict PAWS).
    pub(super) fn set_ts_recent(&mut self, now: Instant, tsval: u32) {
        let ms = stamp_ms(now);
        if !self.has(flag::TS_RECENT) || self.rcv_rtt_us == 0 {
            self.ts_floor = tsval;
            self.ts_next_floor = tsval;
            self.ts_next_floor_at = ms;
        } else if u64::from(ms.wrapping_sub(self.ts_next_floor_at)) * 1000 >= u64::from(self.rcv_rtt_us) {
            self.ts_floor = self.ts_next_floor;
            self.ts_next_floor = tsval;
            self.ts_next_floor_at = ms;
        }
        self.ts_recent = tsval;
        self.ts_recent_at = ms;
        self.set(flag::TS_RECENT);
    }

    /// RFC 7323 §4.3: TS.Recent takes SEG.TSval when the segment covers
    /// Last.ACK.sent (so delayed ACKs echo the earliest unacknowledged one).
    fn update_ts_recent(&mut self, now: Instant, seg: &Segment<'_>) {
        let Some((tsval, _)) = seg.timestamp else { return };
        if !self.has(flag::TIMESTAMPS) {
            return;
        }
        let newer = !self.has(flag::TS_RECENT) || (tsval.wrapping_sub(self.ts_recent) as i32) >= 0;
        if newer && seg.seq.le(self.last_ack_sent) {
            self.set_ts_recent(now, tsval);
        }
    }

    /// An RTT from the echoed timestamp of an ACK that acknowledged new data
    /// (RFC 7323 §4.1), in our clock's 1 ms resolution.
    pub(super) fn ts_rtt(&self, now: Instant, seg: &Segment<'_>) -> Option<Duration> {
        let (_, tsecr) = seg.timestamp?;
        if !self.has(flag::TIMESTAMPS) || tsecr == 0 {
            return None;
        }
        let elapsed = self.ts_now(now).wrapping_sub(tsecr);
        // An echo from the future or from long ago is not a measurement.
        (elapsed < 1 << 30).then(|| Duration::from_millis(elapsed.max(1) as u64))
    }

    /// Whether the sender left cwnd unfilled when this ACK came, so that
    /// growth would be unearned (RFC 7661): more than a segment of it
    /// unused, and, in slow start, not even half of it in flight (Linux's
    /// `tcp_is_cwnd_limited` rule). A paced sender trails its window by a
    /// segment or two whenever an ACK arrives, and slow start doubles the
    /// window in a round, so requiring it full there would stall the very
    /// growth that fills it.
    fn window_unused(&self, flight: u32, mss: u32) -> bool {
        let cwnd = self.cc.cwnd();
        let slow_start = cwnd < self.cc.ssthresh();
        flight.saturating_add(mss) < cwnd && (!slow_start || flight.saturating_mul(2) <= cwnd)
    }

    /// RFC 9293's acceptability test for SEG.SEQ against our advertised window.
    pub(super) fn acceptable(&self, seg: &Segment<'_>) -> bool {
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
    pub(super) fn process_ack(&mut self, now: Instant, seg: &Segment<'_>, ack: SeqNumber, env: &mut Env) -> bool {
        let mss = self.mss();
        let flight = self.pipe();
        let mut fin_acked = false;
        let mut cumulative = Delivered::default();
        let mut data_acked = 0;
        let advanced = ack.gt(self.snd_una);

        if advanced {
            let mut una = self.snd_una;
            if una == self.iss {
                una += 1u32; // our SYN is acknowledged
            }
            let data_end = una + self.tx.len();
            data_acked = (ack.since(una) as usize).min(self.tx.len());
            self.tx.consume(data_acked);
            fin_acked = self.fin_outstanding() && ack.gt(data_end);
            if fin_acked {
                self.set(flag::FIN_ACKED);
            }
            cumulative = self.sentq.on_cumulative_ack(ack);
            if self.has(flag::RTT_TIMING) && ack.ge(self.rtt_seq) {
                // The handshake's sample: our SYN or SYN-ACK was timed.
                let _ = self.take_rtt_sample(now, env);
            }
            self.snd_una = ack;
            if self.snd_nxt.lt(ack) {
                self.snd_nxt = ack;
            }
            self.totals.bytes_acked += data_acked as u64;
            self.retries = 0;
            self.unacked_since = now;
            self.clear(flag::TLP_OUT);
        } else if self.duplicate_ack(seg, ack) && !self.has(flag::SACK) {
            self.on_duplicate_ack(now, env);
        }

        let effect = self.on_ack_delivery(now, seg, cumulative, env);
        if advanced {
            self.after_new_ack(now, data_acked as u32);
        }
        if effect.delivered > 0 && !self.has(flag::RECOVERY) && self.fast_start_allows_growth() {
            let sample = AckSample {
                now,
                acked: effect.delivered,
                acks: seg.acks,
                flight,
                mss,
                rtt: effect.rtt,
                srtt: self.rtt.srtt(),
                min_rtt: self.min_rtt.get(),
                app_limited: self.window_unused(flight, mss),
                // Rounds end on delivery, not on the cumulative ACK, which a
                // reordered segment can hold back for a round trip.
                ack: if self.fack.gt(ack) { self.fack } else { ack },
                snd_nxt: self.snd_max,
            };
            self.cc.on_ack(&sample);
        }
        self.fast_start_on_ack(now, effect.delivered, effect.rtt, env);
        if advanced {
            self.timers[Timer::Retransmit] = if self.outstanding() > 0 { now + self.rtt.rto() } else { NEVER };
            if self.has(flag::WANT_WRITABLE) && self.tx.free() > 0 {
                self.clear(flag::WANT_WRITABLE);
                let h = self.handle();
                self.notify(env, Event::Writable(h));
            }
            if self.tx.is_empty() {
                self.release_tx_ring(env);
            }
            // Not before the FIN is acknowledged too: when it rode the last
            // data segment and the peer took the data alone (a FIN out of
            // order may be dropped), its record is what the timer resends.
            if self.sentq.is_empty() {
                self.release_sentq(env);
            }
        }
        self.check_reneging(now);
        self.arm_tlp(now);

        // Window update (RFC 9293 §3.10.7.4): only from a segment newer than
        // the last one that set the window.
        if self.snd_wl1.lt(seg.seq) || (self.snd_wl1 == seg.seq && self.snd_wl2.le(ack)) {
            let window = self.peer_window(seg);
            let opened = self.snd_wnd == 0 && window > 0;
            self.snd_wnd = window;
            self.max_snd_wnd = self.max_snd_wnd.max(self.snd_wnd);
            self.snd_wl1 = seg.seq;
            self.snd_wl2 = ack;
            if self.snd_wnd == 0 && !self.has(flag::PERSIST) {
                // A live peer with a closed window is not a dead one (in
                // persist the time counts from when the window closed).
                self.unacked_since = now;
            }
            if opened && self.outstanding() == 0 {
                self.timers[Timer::Retransmit] = NEVER; // persist is over
            }
        }
        fin_acked
    }

    /// RFC 5681 §2: a duplicate ACK acknowledges nothing new, carries no
    /// data, SYN or FIN, repeats the window, and arrives while data is
    /// outstanding.
    fn duplicate_ack(&self, seg: &Segment<'_>, ack: SeqNumber) -> bool {
        ack == self.snd_una
            && seg.payload.is_empty()
            && !seg.flags.fin
            && self.peer_window(seg) == self.snd_wnd
            && self.snd_wnd > 0
            && self.outstanding() > 0
    }

    pub(super) fn take_rtt_sample(&mut self, now: Instant, env: &Env) -> Duration {
        let sample = now - self.rtt_start;
        self.rtt.sample(sample, env.cfg.min_rto, env.cfg.max_rto);
        self.min_rtt.update(now, sample);
        self.clear(flag::RTT_TIMING);
        sample
    }

    /// RFC 9293 steps six and seven: segment text and FIN.
    pub(super) fn process_text(&mut self, now: Instant, seg: &Segment<'_>, env: &mut Env) -> Outcome {
        let accepts_data = matches!(self.state, State::Established | State::FinWait1 | State::FinWait2);
        if !seg.payload.is_empty() {
            if !accepts_data {
                // The peer already sent FIN; data after it is bogus. ACK what we have.
                self.set(flag::ACK_NOW);
            } else if self.is_orphan() && seg.seq.since(self.rcv_nxt) as usize + seg.payload.len() > 0 {
                let new_data = (seg.seq + seg.payload.len()).gt(self.rcv_nxt);
                if new_data {
                    // Nobody will read it: reset, as Linux does.
                    env.counters.drop(DropReason::TcpDataAfterClose);
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

    pub(super) fn receive_data(&mut self, now: Instant, seg: &Segment<'_>, env: &mut Env) {
        let mut seq = seg.seq;
        let mut data = seg.payload;
        self.rcv_mss = self.rcv_mss.max(data.len().min(self.our_mss(env) as usize) as u16);
        self.measure_rcv_rtt(now, seg);
        // Trim what we already have.
        if seq.lt(self.rcv_nxt) {
            let dup = self.rcv_nxt.since(seq) as usize;
            // RFC 2883: report the duplicate, so the sender learns its
            // retransmission was unnecessary.
            self.note_duplicate(seq, if dup >= data.len() { seq + data.len() } else { self.rcv_nxt });
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
            env.counters.drop(DropReason::TcpOutOfWindow);
            self.set(flag::ACK_NOW);
            return;
        }
        let written = self.rx.write_at(offset, data);
        let had_gaps = !self.reasm.is_empty();
        let advanced = if offset == 0 && !had_gaps {
            // The common case: in order, nothing pending. No bookkeeping.
            written as u32
        } else {
            let (lo, hi) = (offset as u32, (offset + written) as u32);
            if self.reasm.covers(lo, hi) {
                self.note_duplicate(seq, seq + written);
            }
            if !self.reasm.is_allocated() {
                // Starts small; grows to the limit only when losses need it.
                let storage = env.reasm_pool.take(|| Vec::with_capacity(8));
                let limit = crate::tcp::assembler::blocks_for_buffer(self.rx.capacity(), env.cfg.reassembly_blocks);
                self.reasm.attach(storage, limit);
            }
            if self.reasm.add(lo, written as u32).is_err() {
                // Not acknowledged: the ACK would repeat the last one (the
                // blocks did not change), and a peer that fragments the
                // window on purpose ("SegmentSmack") would get an ACK back
                // for every byte it sends, on the path the other flows'
                // data takes.
                env.counters.drop(DropReason::TcpReassemblyFull);
                return;
            }
            if offset > 0 {
                self.recent_ooo = seq;
                self.set(flag::RECENT_OOO);
            }
            self.reasm.take_front()
        };
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
            if self.quick_acks > 0 {
                // Quick-ACK at the start: a sender in slow start grows by ACKs.
                self.quick_acks -= 1;
                self.set(flag::ACK_NOW);
            } else if delay == Duration::ZERO || self.unacked_rx >= 2 * self.rcv_mss as u32 {
                // RFC 5681 §4.2: an ACK for at least every second full-sized
                // segment (full-sized: the largest the peer has sent).
                self.set(flag::ACK_NOW);
            } else if self.timers[Timer::DelayedAck] == NEVER {
                self.timers[Timer::DelayedAck] = now + delay;
            }
        }
    }

    /// Receiver-side RTT (as Linux's tcp_rcv_rtt_measure_ts): new data that
    /// echoes one of our timestamps arrived about one round trip after we
    /// sent that timestamp. Lets a flow that only uploads to us have an RTT.
    fn measure_rcv_rtt(&mut self, now: Instant, seg: &Segment<'_>) {
        // One sample per echoed value: later segments echoing the same
        // timestamp were sent later, not delayed longer.
        let Some((_, tsecr)) = seg.timestamp else { return };
        if tsecr == self.rcv_rtt_last_tsecr {
            return;
        }
        let Some(sample) = self.ts_rtt(now, seg) else { return };
        self.rcv_rtt_last_tsecr = tsecr;
        let sample = sample.total_micros().min(u32::MAX as u64) as u32;
        self.rcv_rtt_us = if self.rcv_rtt_us == 0 {
            sample
        } else {
            // An EWMA with gain 1/8, as SRTT.
            ((7 * self.rcv_rtt_us as u64 + sample as u64) / 8) as u32
        };
    }

    /// The peer's FIN is next in sequence.
    pub(super) fn on_fin(&mut self, now: Instant, env: &mut Env) -> Outcome {
        self.rcv_nxt += 1u32;
        if self.outstanding() == 0 && self.tx.is_empty() {
            // The exchange is over (a client closing after its response):
            // the path is known now, before the close completes.
            self.remember_path(now, env);
        }
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

    pub(super) fn enter_time_wait(&mut self, now: Instant, env: &mut Env) -> Outcome {
        self.remember_path(now, env);
        // Nothing is left to send; what was received stays until read.
        self.release_tx(env);
        if self.rx.is_empty() {
            self.release_rx(env);
        }
        self.timers[Timer::Retransmit] = NEVER;
        self.state = State::TimeWait;
        if env.time_wait >= env.max_time_wait {
            // Too many already: skip TIME-WAIT, as Linux does past tcp_max_tw_buckets.
            return self.finish(env);
        }
        env.time_wait += 1;
        self.set(flag::IN_TIME_WAIT);
        self.arm_state_timer(StateTimer::TimeWait, now + env.cfg.time_wait);
        // The final ACK still has to go out.
        Outcome::KEEP
    }
}
