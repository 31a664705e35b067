//! Transmission: which segment goes next, and writing it.

use super::*;
use crate::checksum::Sum;

/// What a frame carries below the TCP header: IPv4 and Ethernet.
const LOWER_HEADERS: usize = crate::wire::IPV4_HEADER_LEN + crate::wire::ETHERNET_HEADER_LEN;

/// `t` in nanoseconds since the origin.
fn nanos(t: Instant) -> u64 {
    t.total_micros().saturating_mul(1000)
}

/// A segment [`Connection::emit`] wrote: its length, and the sum of the
/// bytes after its header, taken as they were copied from the send ring (so
/// the checksum does not read the ring again).
#[derive(Clone, Copy, Debug)]
pub struct Emitted {
    pub len: usize,
    pub header_len: usize,
    pub payload_sum: Sum,
}

impl Emitted {
    fn header_only(len: usize) -> Emitted {
        Emitted { len, header_len: len, payload_sum: Sum::new() }
    }
}

impl Connection {
    /// Writes the next segment's TCP header and payload into `out` (which
    /// holds at least a full header and one MSS); returns its length, or
    /// `None` when there is nothing to send.
    pub fn emit(&mut self, now: Instant, env: &mut Env, out: &mut [u8]) -> Option<Emitted> {
        let emitted = match self.state {
            State::Closed => return None,
            State::SynSent | State::SynReceived => Emitted::header_only(if self.snd_nxt == self.iss {
                self.emit_syn(now, env, out)
            } else if self.has(flag::ACK_NOW) && self.state == State::SynReceived {
                self.emit_ack(now, self.snd_nxt, env, out)
            } else {
                self.clear(flag::ACK_NOW);
                return None;
            }),
            _ => self.emit_synchronized(now, env, out)?,
        };
        env.counters.segments_out += 1;
        Some(emitted)
    }

    /// A header for this connection with the ACK, window, timestamp and SACK
    /// blocks filled in; records what the ACK said.
    fn header(&mut self, now: Instant, env: &Env, seq: SeqNumber, flags: Flags) -> TcpHeader {
        let mut header = TcpHeader {
            src_port: self.tuple.local_port,
            dst_port: self.tuple.remote_port,
            seq,
            ack: Some(self.rcv_nxt),
            flags,
            window: self.window_to_advertise(env, false),
            ..TcpHeader::default()
        };
        if self.has(flag::TIMESTAMPS) {
            header.timestamp = Some((self.ts_now(now), self.ts_recent));
        }
        self.add_sack_blocks(&mut header);
        self.acked_now();
        header
    }

    /// Bytes of options the next non-SYN segment carries: timestamps, and
    /// SACK blocks while there is something to report.
    pub(super) fn options_len(&self) -> usize {
        let timestamps = if self.has(flag::TIMESTAMPS) { 12 } else { 0 };
        let blocks = self.sack_block_count(timestamps > 0);
        timestamps + if blocks > 0 { 4 + 8 * blocks } else { 0 }
    }

    /// Everything an ACK going out settles.
    fn acked_now(&mut self) {
        self.last_ack_sent = self.rcv_nxt;
        self.clear(flag::ACK_NOW);
        self.unacked_rx = 0;
        self.timers[Timer::DelayedAck] = NEVER;
    }

    pub(super) fn emit_syn(&mut self, now: Instant, env: &mut Env, out: &mut [u8]) -> usize {
        let cfg = &env.cfg;
        let synack = self.state == State::SynReceived;
        // An active open offers what is configured; a SYN-ACK echoes only
        // what the peer's SYN offered (RFC 7323 §2.2, §3.2; RFC 2018 §2).
        let (wscale, sack, timestamps) = if synack {
            (self.has(flag::WSCALE), self.has(flag::SACK), self.has(flag::TIMESTAMPS))
        } else {
            (cfg.window_scaling, cfg.sack, cfg.timestamps)
        };
        let header = TcpHeader {
            src_port: self.tuple.local_port,
            dst_port: self.tuple.remote_port,
            seq: self.iss,
            ack: synack.then_some(self.rcv_nxt),
            flags: Flags { syn: true, ..Flags::default() },
            window: self.window_to_advertise(env, true),
            mss: Some(self.our_mss(env)),
            wscale: wscale.then_some(window_shift(cfg.rx_buffer)),
            sack_permitted: sack,
            timestamp: timestamps.then(|| (self.ts_now(now), if synack { self.ts_recent } else { 0 })),
            ..TcpHeader::default()
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
        if self.timers[Timer::Retransmit] == NEVER {
            self.timers[Timer::Retransmit] = now + self.rtt.rto();
        }
        self.acked_now();
        len
    }

    pub(super) fn emit_ack(&mut self, now: Instant, seq: SeqNumber, env: &mut Env, out: &mut [u8]) -> usize {
        self.header(now, env, seq, Flags::default()).emit(out)
    }

    /// The pacing rate in bytes per second, if the connection is paced:
    /// gain × cwnd / SRTT when pacing is on, bounded by the policy's cap.
    fn pacing_rate(&self, env: &Env) -> Option<u64> {
        let own = match self.rtt.srtt() {
            Some(srtt) if env.cfg.pacing => {
                let cwnd = self.cwnd() as u64;
                let rate = cwnd * 1_000_000 / srtt.total_micros().max(1);
                Some(rate * env.cfg.pacing_gain_percent as u64 / 100)
            }
            _ => None,
        };
        // Careful resume's jump and a larger initial window go at their own
        // (lower) rate.
        let own = self.fast_start_pacing(env).or(own);
        match (own, self.pacing_cap) {
            (own, u64::MAX) => own,
            (Some(own), cap) => Some(own.min(cap)),
            (None, cap) => Some(cap),
        }
        .map(|rate| rate.max(1))
    }

    pub(super) fn emit_synchronized(&mut self, now: Instant, env: &mut Env, out: &mut [u8]) -> Option<Emitted> {
        if self.state == State::TimeWait {
            return self.has(flag::ACK_NOW).then(|| Emitted::header_only(self.emit_ack(now, self.snd_nxt, env, out)));
        }
        if self.has(flag::KEEPALIVE_PROBE) {
            self.clear(flag::KEEPALIVE_PROBE);
            // RFC 9293 §3.8.4: SEG.SEQ = SND.NXT - 1 draws an ACK without data.
            return Some(Emitted::header_only(self.emit_ack(now, self.snd_una - 1u32, env, out)));
        }
        if self.has(flag::FORCE) && self.snd_wnd == 0 {
            // Zero-window probe (RFC 9293 §3.8.6.1), as Linux sends it: an
            // old sequence number draws an ACK that carries the window, and
            // no data is put at risk in a window the peer has closed.
            self.clear(flag::FORCE);
            self.timers[Timer::Retransmit] = now + self.rtt.rto(); // the next probe, backed off
            return Some(Emitted::header_only(self.emit_ack(now, self.snd_una - 1u32, env, out)));
        }

        self.maybe_jump(now, env);
        // RFC 6691: the options a segment carries come out of the MSS.
        let options = self.options_len();
        let eff_mss = (self.mss() as usize).saturating_sub(options).max(1);
        let max_seg = eff_mss.min(out.len().saturating_sub(TCP_HEADER_LEN + options));
        let paced = self.pacing_rate(env);
        let fast = self.has(flag::FAST_REXMIT);
        let pacing_blocked = paced.is_some() && self.pace_next_ns > nanos(now) && !fast;

        // First, lost data (RFC 6675 §5 NextSeg rule 1): the first
        // retransmission of a recovery goes at once, the rest as pipe allows.
        if let Some((start, end)) = self.sentq.next_lost()
            && !pacing_blocked
        {
            let room = self.cwnd().saturating_sub(self.pipe()) as usize;
            if fast || room >= end.since(start).min(max_seg as u32) as usize {
                self.clear(flag::FAST_REXMIT);
                return Some(self.emit_retransmission(now, env, out, start, end, max_seg, paced, eff_mss));
            }
        }
        self.clear(flag::FAST_REXMIT);

        // A tail-loss probe (RFC 8985 §7.3): new data if the peer's window
        // allows, else the last segment again.
        let probe = self.has(flag::TLP_NOW) && !pacing_blocked;
        if probe {
            self.clear(flag::TLP_NOW);
            self.set(flag::TLP_OUT);
        }

        let force = self.has(flag::FORCE);
        let seq = self.snd_nxt;
        let data_start = self.data_start();
        let offset = seq.since(data_start) as usize;
        let queued = self.tx.len();
        let avail = queued.saturating_sub(offset);
        let len = if pacing_blocked {
            0
        } else {
            // The peer's window bounds sequence space; cwnd bounds pipe.
            let window_left = (self.snd_una + self.snd_wnd).since(seq) as usize;
            let cwnd_left = if probe { max_seg } else { self.cwnd().saturating_sub(self.pipe()) as usize };
            let mut len = avail.min(max_seg).min(window_left).min(cwnd_left);
            if len < avail && len < max_seg && !force && (len as u32) < self.max_snd_wnd / 2 {
                // Sender silly-window avoidance (RFC 9293 §3.8.6.2.1): wait for
                // a full segment or half the peer's largest window.
                len = 0;
            }
            if env.cfg.nagle && len < max_seg && len == avail && self.pipe() > 0 && !force {
                len = 0; // Nagle: one small segment in flight at a time
            }
            len
        };
        self.clear(flag::FORCE);
        let fin_due = self.fin_outstanding() && seq + len == self.fin_seq() && offset + len == queued;
        let send_fin = fin_due && !pacing_blocked && self.snd_nxt.le(self.fin_seq());
        if len == 0 && !send_fin {
            if probe && let Some((start, end)) = self.sentq.last() {
                return Some(self.emit_retransmission(now, env, out, start, end, max_seg, paced, eff_mss));
            }
            if avail > 0 && self.outstanding() == 0 && self.timers[Timer::Retransmit] == NEVER && !pacing_blocked {
                // Blocked by the window with nothing in flight: persist.
                self.timers[Timer::Retransmit] = now + self.rtt.rto();
                if !self.has(flag::PERSIST) {
                    self.set(flag::PERSIST);
                    self.unacked_since = now;
                }
            }
            if pacing_blocked {
                self.timers[Timer::Pacing] = Instant::from_micros(self.pace_next_ns.div_ceil(1000));
            }
            return self.has(flag::ACK_NOW).then(|| Emitted::header_only(self.emit_ack(now, self.snd_nxt, env, out)));
        }

        if self.outstanding() == 0 && now - self.last_tx > self.rtt.rto() && len > 0 {
            // RFC 5681 §4.1: after an idle period the old window is stale.
            self.cc.on_restart_after_idle(now, now - self.last_tx, self.mss());
        }
        let flags = Flags { fin: send_fin, psh: len > 0 && offset + len == queued, ..Flags::default() };
        let header = self.header(now, env, seq, flags);
        let hlen = header.emit(out);
        let (copied, payload_sum) = self.copy_payload(env, offset, &mut out[hlen..hlen + len]);
        debug_assert_eq!(copied, len);

        if len > 0 {
            self.clear(flag::PERSIST);
        }
        let end = seq + len + send_fin as usize;
        if self.outstanding() == 0 {
            self.unacked_since = now;
        }
        if !self.sentq.is_allocated() {
            // Room for a full send buffer of full-sized segments up front,
            // so a window that grows mid-transfer never reallocates (pooled
            // storage has it already): 24 bytes a segment, about 2 % of the
            // buffer at a 1448-byte MSS.
            let mut storage = env.sentq_pool.take(VecDeque::new);
            let records = (self.tx.capacity() / eff_mss.max(1)).saturating_add(2).min(self.sentq.max_records());
            storage.reserve(records.saturating_sub(storage.len()));
            self.sentq.attach(storage);
        }
        self.sentq.on_transmit(seq, end, now);
        self.snd_nxt = end;
        self.snd_max = self.snd_max.max(end);
        self.after_data_sent(now, len, hlen, paced, eff_mss);
        self.fast_start_on_send(now, env);
        if send_fin {
            match self.state {
                State::Established => self.state = State::FinWait1,
                State::CloseWait => self.state = State::LastAck,
                _ => {}
            }
        }
        Some(Emitted { len: hlen + len, header_len: hlen, payload_sum })
    }

    /// Resends the record `[start, end)` (data, and the FIN if the record
    /// holds it).
    #[allow(clippy::too_many_arguments)]
    fn emit_retransmission(
        &mut self,
        now: Instant,
        env: &mut Env,
        out: &mut [u8],
        start: SeqNumber,
        end: SeqNumber,
        max_seg: usize,
        paced: Option<u64>,
        eff_mss: usize,
    ) -> Emitted {
        let data_start = self.data_start();
        let offset = start.since(data_start) as usize;
        let queued = self.tx.len();
        let data_end = data_start + queued;
        let holds_fin = self.fin_outstanding() && end.gt(data_end);
        let len = (end.since(start) as usize - holds_fin as usize).min(max_seg).min(queued.saturating_sub(offset));
        let fin = holds_fin && start + len == data_end;
        let flags = Flags { fin, psh: len > 0 && offset + len == queued, ..Flags::default() };
        let header = self.header(now, env, start, flags);
        let hlen = header.emit(out);
        let (copied, payload_sum) = self.copy_payload(env, offset, &mut out[hlen..hlen + len]);
        debug_assert_eq!(copied, len);
        self.sentq.on_retransmit(start, now);
        env.counters.retransmits += 1;
        self.totals.retransmits += 1;
        if self.has(flag::UNDO_ARMED) {
            self.undo_retrans = self.undo_retrans.saturating_add(1);
        }
        self.after_data_sent(now, len, hlen, paced, eff_mss);
        Emitted { len: hlen + len, header_len: hlen, payload_sum }
    }

    /// Copies `out.len()` queued bytes from `offset` into a segment's
    /// payload, summing them on the way unless the device finishes the
    /// checksum ([`Env::partial_checksums`]).
    #[inline]
    fn copy_payload(&self, env: &Env, offset: usize, out: &mut [u8]) -> (usize, Sum) {
        if env.partial_checksums {
            (self.tx.copy_out(offset, out), Sum::new())
        } else {
            self.tx.copy_out_summed(offset, out, Sum::new())
        }
    }

    /// Timers and the pacer after a data segment went out.
    fn after_data_sent(&mut self, now: Instant, len: usize, hlen: usize, paced: Option<u64>, eff_mss: usize) {
        if self.timers[Timer::Retransmit] == NEVER {
            self.timers[Timer::Retransmit] = now + self.rtt.rto();
        }
        if let Some(rate) = paced {
            // The next segment may leave once this one's time at the paced
            // rate has passed; idle time earns at most one segment of credit.
            // The rate counts whole frames, as a link does (and as the
            // policy's cap is given): payload, TCP header, IPv4 and Ethernet.
            // Kept in nanoseconds: a 121.1 µs spacing taken as 121 µs sends
            // 0.1 % faster than a 100 Mbit/s link and builds a queue there.
            let frame = (len + hlen + LOWER_HEADERS) as u64;
            let spacing = frame * 1_000_000_000 / rate;
            let credit = (eff_mss + hlen + LOWER_HEADERS) as u64 * 1_000_000_000 / rate;
            self.pace_next_ns = self.pace_next_ns.max(nanos(now).saturating_sub(credit)) + spacing;
        }
        if len > 0 {
            self.last_tx = now;
        }
        self.arm_tlp(now);
    }

    /// The header of an RST that aborts this connection.
    pub fn reset_header(&self, seq: SeqNumber, ack: Option<SeqNumber>) -> TcpHeader {
        TcpHeader {
            src_port: self.tuple.local_port,
            dst_port: self.tuple.remote_port,
            seq,
            ack,
            flags: Flags { rst: true, ..Flags::default() },
            ..TcpHeader::default()
        }
    }
}
