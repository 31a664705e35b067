//! The receive side's announcements: the window we advertise (silly-window
//! avoidance, window scaling, the policy's cap, never moving the right edge
//! back) and the SACK blocks we report.

use super::*;

impl Connection {
    /// The shift our advertised windows use (0 unless scaling was agreed).
    pub(super) fn rcv_shift(&self) -> u8 {
        if self.has(flag::WSCALE) { self.rcv_wscale } else { 0 }
    }

    /// The window we can offer now: free receive space (the whole buffer if
    /// none is attached yet), bounded by what the window field expresses and
    /// by the policy's cap (never below 2·MSS, so the flow cannot stall).
    /// The cap is rounded up to the window scale's unit: the field's
    /// rounding down would otherwise take a capped window under the cap,
    /// and a 2·MSS window under two segments, which leaves the sender one
    /// segment and the receiver waiting for a second one to ACK.
    pub(super) fn advertisable_window(&self, env: &Env) -> usize {
        let capacity = if self.rx.is_allocated() { self.rx.capacity() } else { env.cfg.rx_buffer };
        let free = capacity - self.rx.len();
        let mut window = free.min(MAX_UNSCALED_WINDOW << self.rcv_shift());
        if self.rcv_wnd_cap != u32::MAX {
            let floor = 2 * self.our_mss(env) as usize;
            let unit = 1usize << self.rcv_shift();
            window = window.min((self.rcv_wnd_cap as usize).max(floor).next_multiple_of(unit));
        }
        window
    }

    /// Receiver silly-window avoidance step: min(RCV.BUFF / 2, MSS), and at
    /// least one unit of the window field.
    pub(super) fn window_step(&self, env: &Env) -> usize {
        (env.cfg.rx_buffer / 2).min(self.our_mss(env) as usize).max(1 << self.rcv_shift())
    }

    /// The value for an outgoing segment's window field. Moves the advertised
    /// right edge forward only in silly-window-free steps and never back
    /// (RFC 9293 §3.8.6.2.2, §3.10.7.4): a lowered cap or a filling buffer
    /// shrinks the window only as data arrives. With scaling the field is
    /// the window >> shift, rounded down unless that would pull the edge
    /// back (then up, as RFC 7323 §2.4 allows).
    pub(super) fn window_to_advertise(&mut self, env: &Env, syn: bool) -> u16 {
        let shift = if syn { 0 } else { self.rcv_shift() };
        if self.rcv_adv.lt(self.rcv_nxt) {
            self.rcv_adv = self.rcv_nxt;
        }
        let promised = self.rcv_adv;
        let new_edge = self.rcv_nxt + self.advertisable_window(env);
        if new_edge.gt(promised) && new_edge.since(promised) as usize >= self.window_step(env) {
            self.rcv_adv = new_edge;
        }
        let window = self.rcv_adv.since(self.rcv_nxt);
        let mut field = window >> shift;
        if (self.rcv_nxt + (field << shift)).lt(promised) {
            field += 1;
        }
        let field = field.min(u16::MAX as u32);
        // The promise is exactly what the field says.
        self.rcv_adv = self.rcv_nxt + (field << shift);
        field as u16
    }

    /// Fills in the SACK blocks of an outgoing ACK (RFC 2018 §4): a D-SACK
    /// first if a duplicate arrived (RFC 2883), then the block holding the
    /// most recent arrival, then the others, as many as fit.
    pub(super) fn add_sack_blocks(&mut self, header: &mut TcpHeader) {
        if !self.has(flag::SACK) {
            return;
        }
        let max = if header.timestamp.is_some() { 3 } else { crate::wire::MAX_SACK_BLOCKS };
        let mut n = 0;
        if self.has(flag::DSACK) {
            self.clear(flag::DSACK);
            header.sack[0] = (self.dsack_start.get(), self.dsack_end.get());
            n = 1;
        }
        if !self.reasm.is_empty() {
            let base = self.rcv_nxt;
            // The block holding the most recent arrival goes first.
            let recent = self
                .has(flag::RECENT_OOO)
                .then_some(self.recent_ooo)
                .filter(|r| r.ge(base))
                .and_then(|r| self.reasm.block_at(r.since(base)));
            if let Some((a, b)) = recent {
                header.sack[n] = ((base + a).get(), (base + b).get());
                n += 1;
            }
            for (a, b) in self.reasm.blocks().filter(|&blk| Some(blk) != recent) {
                if n >= max {
                    break;
                }
                header.sack[n] = ((base + a).get(), (base + b).get());
                n += 1;
            }
        }
        header.sack_len = n.min(max) as u8;
    }

    /// How many SACK blocks the next ACK carries.
    pub(super) fn sack_block_count(&self, timestamps: bool) -> usize {
        if !self.has(flag::SACK) {
            return 0;
        }
        let max = if timestamps { 3 } else { crate::wire::MAX_SACK_BLOCKS };
        // The assembler may hold thousands of blocks; only `max` can go out.
        (self.has(flag::DSACK) as usize + self.reasm.blocks().take(max).count()).min(max)
    }

    /// Notes `[start, end)` as a duplicate to report in the next ACK.
    pub(super) fn note_duplicate(&mut self, start: SeqNumber, end: SeqNumber) {
        if self.has(flag::SACK) && start.lt(end) {
            self.dsack_start = start;
            self.dsack_end = end;
            self.set(flag::DSACK);
        }
    }
}
