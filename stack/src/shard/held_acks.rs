//! The pure ACKs of one receive batch, coalesced per connection.
//!
//! A download's sender sees one ACK per one or two segments. Several of
//! one flow often arrive in the same receive batch, and each would move
//! cwnd, the sent queue, RACK and the retransmission timer on its own,
//! although the sender only runs once the batch is in. So the shard keeps
//! an established connection's pure ACK back until the batch ends (the
//! next `poll_*`, `handle_timeout` or application call), and a later pure
//! ACK of the same connection that supersedes it takes its place: it
//! acknowledges more, neither carries SACK blocks, its timestamp is no
//! older. The survivor counts the ACKs it stands for, so slow start grows
//! as if each had been processed ([`Segment::acks`]).
//!
//! What is never merged: duplicate ACKs (their count drives fast
//! retransmit), ACKs with SACK blocks (each one's blocks go to the
//! scoreboard), and anything with data, SYN, FIN or RST. Such a segment
//! first releases the connection's held ACK, so a connection's segments
//! are always processed in the order they came.

use crate::pool::Key;
use crate::tcp::State;
use crate::tcp::segment::Segment;
use crate::time::Instant;

use super::Shard;

/// A pure ACK held back until its batch ends.
#[derive(Debug)]
pub(super) struct HeldAck {
    key: Key,
    peer: [u8; 6],
    /// When it arrived: it is processed as of then.
    at: Instant,
    seg: Segment<'static>,
}

/// Whether `later`, a pure ACK that arrived after `held`, may stand for
/// both.
fn supersedes(held: &Segment<'_>, later: &Segment<'_>) -> bool {
    let (Some(a), Some(b)) = (held.ack, later.ack) else { return false };
    let no_sack = |s: &Segment<'_>| s.sack.iter().all(Option::is_none);
    let timestamps_in_order = match (held.timestamp, later.timestamp) {
        (None, None) => true,
        (Some((old, _)), Some((new, _))) => new.wrapping_sub(old) as i32 >= 0,
        _ => false,
    };
    b.gt(a) && later.seq == held.seq && no_sack(held) && no_sack(later) && timestamps_in_order
}

impl HeldAck {
    /// The connection it is held for.
    pub(super) fn key(&self) -> Key {
        self.key
    }
}

impl Shard {
    /// Whether `seg` for connection `key` in `state` is a pure ACK to hold
    /// back rather than deliver now.
    pub(super) fn should_hold(&self, state: State, seg: &Segment<'_>) -> bool {
        self.config.tcp.coalesce_acks && state == State::Established && seg.is_pure_ack()
    }

    /// Holds `seg`, a pure ACK of `key`, until the batch ends: in place of
    /// the one held for `key` (`already_held`, the connection's flag, says
    /// whether there is one: the list is only searched then) if it
    /// supersedes it, after delivering that one if not.
    pub(super) fn hold_ack(&mut self, now: Instant, peer: [u8; 6], key: Key, seg: &Segment<'_>, already_held: bool) {
        let detached = seg.without_payload();
        if already_held && let Some(i) = self.held.iter().position(|h| h.key == key) {
            if supersedes(&self.held[i].seg, seg) {
                let acks = self.held[i].seg.acks + seg.acks;
                self.held[i] = HeldAck { key, peer, at: now, seg: Segment { acks, ..detached } };
                self.env.0.counters.acks_coalesced += 1;
                return;
            }
            let earlier = self.held.remove(i);
            self.deliver_held(earlier);
        }
        let Some(conn) = self.conns.get_mut(key) else { return };
        conn.set_ack_held(true);
        self.held.push(HeldAck { key, peer, at: now, seg: detached });
    }

    /// Delivers the ACK held for `key`, if any: before the connection's
    /// next segment, or its removal.
    pub(super) fn release_held_ack(&mut self, key: Key) {
        let Some(i) = self.held.iter().position(|h| h.key == key) else { return };
        let held = self.held.remove(i);
        self.deliver_held(held);
    }

    /// Delivers every held ACK, in the order they came: the batch is over.
    pub(super) fn release_held_acks(&mut self) {
        if self.held.is_empty() {
            return;
        }
        // Taken out (keeping its allocation) while the ACKs are delivered.
        let mut held = std::mem::take(&mut self.held);
        for ack in held.drain(..) {
            self.deliver_held(ack);
        }
        debug_assert!(self.held.is_empty(), "delivering a held ACK holds no other");
        self.held = held;
    }

    fn deliver_held(&mut self, held: HeldAck) {
        let HeldAck { key, peer, at, seg } = held;
        // A connection removed meanwhile (it cannot be, as the shard
        // releases first; but a stale ACK must not reach a stranger).
        let Some(conn) = self.conns.get_mut(key) else { return };
        conn.set_ack_held(false);
        let tuple = conn.tuple;
        self.deliver_segment(at, peer, key, tuple, &seg);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::seq::SeqNumber;
    use crate::wire::Flags;

    fn ack(ack: u32, tsval: Option<u32>) -> Segment<'static> {
        Segment {
            src_port: 40000,
            dst_port: 80,
            seq: SeqNumber::new(100),
            ack: Some(SeqNumber::new(ack)),
            flags: Flags::default(),
            window: 500,
            mss: None,
            wscale: None,
            sack_permitted: false,
            timestamp: tsval.map(|v| (v, 7)),
            sack: [None; 3],
            payload: &[],
            acks: 1,
        }
    }

    #[test]
    fn only_a_later_ack_that_acknowledges_more_without_sack_supersedes() {
        assert!(supersedes(&ack(1000, Some(5)), &ack(2000, Some(5))));
        assert!(supersedes(&ack(1000, Some(5)), &ack(2000, Some(6))));
        assert!(!supersedes(&ack(1000, Some(5)), &ack(1000, Some(6))), "a duplicate ACK counts on its own");
        assert!(!supersedes(&ack(2000, Some(5)), &ack(1000, Some(6))), "an older ACK");
        assert!(!supersedes(&ack(1000, Some(6)), &ack(2000, Some(5))), "an older timestamp (PAWS decides)");
        assert!(!supersedes(&ack(1000, None), &ack(2000, Some(5))));
        let sack =
            Segment { sack: [Some((SeqNumber::new(3000), SeqNumber::new(4000))), None, None], ..ack(2000, None) };
        assert!(!supersedes(&ack(1000, None), &sack), "SACK blocks go to the scoreboard one by one");
        assert!(!supersedes(&sack, &ack(5000, None)));
        let moved = Segment { seq: SeqNumber::new(101), ..ack(2000, None) };
        assert!(!supersedes(&ack(1000, None), &moved), "the peer sent data in between");
        // Across the wrap of the timestamp clock.
        assert!(supersedes(&ack(1000, Some(u32::MAX)), &ack(2000, Some(3))));
    }
}
