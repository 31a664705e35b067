//! TCP demultiplexing: segments to their connection, or to a listener
//! (the SYN queue, SYN cookies), or answered with an RST.

use core::net::Ipv6Addr;

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{TcpPacket, TcpRepr};

use crate::api::{Event, Listener};
use crate::counters::DropReason;
use crate::flow_table::FourTuple;
use crate::pool::Key;
use crate::tcp::State;
use crate::tcp::connection::{Action, Connection};
use crate::tcp::segment::Segment;
use crate::tcp::seq::SeqNumber;
use crate::tcp::syn_cookie::{CookieOptions, SynCookies};
use crate::time::Instant;
use crate::wire::{self, Flags, TcpHeader};

use super::Shard;

impl Shard {
    /// A TCP segment from `remote` (at link address `peer`) to our
    /// `local`, addresses of either family (IPv4 ones IPv4-mapped).
    pub(super) fn handle_tcp(&mut self, now: Instant, peer: [u8; 6], local: Ipv6Addr, remote: Ipv6Addr, bytes: &[u8]) {
        let Ok(packet) = TcpPacket::new_checked(bytes) else {
            return self.drop(DropReason::TcpTruncated);
        };
        let sum_ok = match (remote.to_ipv4_mapped(), local.to_ipv4_mapped()) {
            (Some(remote), Some(local)) => wire::tcp_checksum_ok_v4(bytes, remote, local),
            _ => wire::tcp_checksum_ok(bytes, remote, local),
        };
        if !sum_ok {
            return self.drop(DropReason::TcpBadChecksum);
        }
        // Most segments of a connection are plain ACKs with timestamps:
        // those skip the general parse.
        let seg = match Segment::parse_predicted(&packet) {
            Some(seg) => seg,
            None => {
                let caps = ChecksumCapabilities::ignored();
                let (src, dst) = (remote.to_canonical().into(), local.to_canonical().into());
                let Ok(repr) = TcpRepr::parse(&packet, &src, &dst, &caps) else {
                    return self.drop(DropReason::TcpMalformed);
                };
                Segment::from_repr(&repr, packet.psh())
            }
        };
        let tuple =
            FourTuple { local_ip: local, remote_ip: remote, local_port: seg.dst_port, remote_port: seg.src_port };
        if self.config.steering.is_some_and(|s| !s.owns(&tuple)) {
            self.env.0.counters.segments_not_owned += 1;
        }
        match self.flows.get(&tuple) {
            Some(key) => self.segment_for_connection(now, peer, key, tuple, &seg),
            None => self.segment_without_connection(now, peer, tuple, &seg),
        }
    }

    pub(super) fn segment_for_connection(
        &mut self,
        now: Instant,
        peer: [u8; 6],
        key: Key,
        tuple: FourTuple,
        seg: &Segment<'_>,
    ) {
        if let Some(conn) = self.conns.get(key) {
            if self.should_hold(conn.state, seg) {
                let already_held = conn.ack_held();
                return self.hold_ack(now, peer, key, seg, already_held);
            }
            if conn.ack_held() {
                // In order: the held ACK came first.
                self.release_held_ack(key);
            }
        }
        self.deliver_segment(now, peer, key, tuple, seg);
    }

    /// Hands `seg` to connection `key` now, and acts on the outcome.
    pub(super) fn deliver_segment(
        &mut self,
        now: Instant,
        peer: [u8; 6],
        key: Key,
        tuple: FourTuple,
        seg: &Segment<'_>,
    ) {
        let awaiting_confirmation = self.neighbors_await_confirmation();
        let Some(conn) = self.conns.get_mut(key) else {
            // Cannot happen while the table and slab agree; recover anyway.
            self.flows.remove(&tuple, key);
            return self.segment_without_connection(now, peer, tuple, seg);
        };
        // A handshake may only complete if the accept queue has room; if not,
        // ignore the ACK and let the peer retry (as Linux does).
        if conn.state == State::SynReceived
            && conn.is_passive()
            && seg.ack.is_some()
            && !seg.flags.rst
            && !seg.flags.syn
            && self
                .listeners
                .get(conn.listener as usize)
                .and_then(Option::as_ref)
                .is_some_and(|l| l.backlog.len() >= l.backlog_limit)
        {
            return self.drop(DropReason::TcpAcceptQueueFull);
        }
        // An ACK of something new confirms the peer's next hop to a
        // neighbour entry that waits for it (RFC 4861 §7.3.1); nothing is
        // looked at while none waits.
        let acked_before = awaiting_confirmation.then(|| conn.snd_una());
        let outcome = conn.on_segment(now, seg, &mut self.env.0);
        if let Some(before) = acked_before
            && self.conns.get(key).is_some_and(|c| c.snd_una() != before)
        {
            self.confirm_neighbor(now, tuple.remote_ip);
        }
        if outcome.action == Action::Recycle {
            self.remove_connection(key);
            return self.segment_without_connection(now, peer, tuple, seg);
        }
        let handshake_done = self.conns.get(key).map(|c| {
            (
                c.is_passive() && c.state != State::SynReceived,
                // Closing clears ACCEPTED (the handle is dead to the
                // application), so an orphan must not be queued again.
                c.state != State::Closed && !c.in_backlog() && !c.is_accepted() && !c.is_orphan(),
            )
        });
        if let Some((true, needs_accept)) = handshake_done {
            self.leave_syn_queue(key);
            if needs_accept {
                self.enqueue_accept(key);
            }
        }
        self.apply(key, outcome, Some(peer));
    }

    pub(super) fn enqueue_accept(&mut self, key: Key) {
        let Some(conn) = self.conns.get_mut(key) else { return };
        let Some(Some(l)) = self.listeners.get_mut(conn.listener as usize) else { return };
        conn.set_in_backlog(true);
        l.backlog.push_back(key);
        if !l.notified {
            l.notified = true;
            let listener = Listener(conn.listener);
            self.env.0.events.push_back(Event::Acceptable(listener));
        }
    }

    pub(super) fn segment_without_connection(
        &mut self,
        now: Instant,
        peer: [u8; 6],
        tuple: FourTuple,
        seg: &Segment<'_>,
    ) {
        if seg.flags.rst {
            return self.drop(DropReason::TcpNoConnection);
        }
        // A listener of the segment's family: one on one family's address
        // leaves the other's connections to no listener.
        let listener = self.listener_ports.get(&tuple.local_port).copied().filter(|&l| {
            self.listeners.get(l as usize).and_then(Option::as_ref).is_some_and(|s| s.families.take(&tuple))
        });
        if let Some(l) = listener {
            if seg.flags.syn && seg.ack.is_none() {
                return self.open_passive(now, peer, tuple, l, seg);
            }
            if self.accept_cookie(now, tuple, l, seg) {
                return;
            }
        }
        self.drop(DropReason::TcpNoConnection);
        // RFC 9293 §3.10.7.1: the RST takes its sequence number from the ACK
        // field, or acknowledges the segment if it had none.
        let (seq, ack) = match seg.ack {
            Some(ack) => (ack, None),
            None => (SeqNumber::new(0), Some(seg.seq + seg.len())),
        };
        let header = TcpHeader {
            src_port: tuple.local_port,
            dst_port: tuple.remote_port,
            seq,
            ack,
            flags: Flags { rst: true, ..Flags::default() },
            ..TcpHeader::default()
        };
        self.queue_tcp_control(peer, &tuple, &header);
    }

    pub(super) fn open_passive(
        &mut self,
        now: Instant,
        peer: [u8; 6],
        tuple: FourTuple,
        listener: u32,
        seg: &Segment<'_>,
    ) {
        // Nothing to answer through: a spoofed or misrouted SYN.
        if self.next_hop(tuple.remote_ip).is_none() {
            return self.drop(DropReason::NoRoute);
        }
        let Some(Some(l)) = self.listeners.get_mut(listener as usize) else { return };
        if l.syn_queue >= self.config.limits.syn_backlog {
            if self.config.tcp.syn_cookies {
                return self.send_cookie(now, peer, tuple, seg);
            }
            return self.drop(DropReason::TcpSynQueueFull);
        }
        if self.conns.len() >= self.config.limits.max_connections {
            return self.drop(DropReason::TcpConnectionLimit);
        }
        l.syn_queue += 1;
        if crate::tcp::connection::peer_mss(seg).1 {
            self.env.0.counters.mss_raised += 1;
        }
        let iss = self.isn.isn(now, &tuple);
        let mut conn = Connection::accept_syn(Key::default(), tuple, iss, listener, seg, now, &self.env.0);
        conn.set_syn_queue_slot();
        let key = self.insert_connection(conn);
        self.env.0.counters.segments_in += 1;
        self.sync(key);
    }

    /// Answers a SYN with a SYN cookie and keeps nothing (RFC 4987 §3.6).
    /// The SYN-ACK goes back to the link-layer sender, like an RST: a
    /// stateless reply must not make state in the ARP cache either.
    pub(super) fn send_cookie(&mut self, now: Instant, peer: [u8; 6], tuple: FourTuple, seg: &Segment<'_>) {
        let cfg = &self.config.tcp;
        let our_mss = crate::tcp::connection::mss_for(&tuple, &self.env.0);
        let offered = seg.mss.filter(|&m| m > 0).unwrap_or(536).min(our_mss);
        let (iss, _) = self.cookies.isn(now, &tuple, seg.seq, offered);
        // Window scale and SACK survive only in the timestamp's low bits.
        let timestamps = cfg.timestamps && seg.timestamp.is_some();
        let wscale = (timestamps && cfg.window_scaling).then_some(seg.wscale).flatten();
        let sack = timestamps && cfg.sack && seg.sack_permitted;
        let timestamp = seg.timestamp.filter(|_| timestamps).map(|(tsval, _)| {
            let ts_now = (now.total_millis() as u32).wrapping_add(iss.get().rotate_left(13));
            (SynCookies::encode_ts(ts_now, wscale, sack), tsval)
        });
        let header = TcpHeader {
            src_port: tuple.local_port,
            dst_port: tuple.remote_port,
            seq: iss,
            ack: Some(seg.seq + 1u32),
            flags: Flags { syn: true, ..Flags::default() },
            window: cfg.rx_buffer.min(u16::MAX as usize) as u16,
            mss: Some(our_mss),
            wscale: wscale.map(|_| crate::tcp::connection::window_shift(cfg.rx_buffer)),
            sack_permitted: sack,
            timestamp,
            ..TcpHeader::default()
        };
        let (our_mac, partial) = (self.config.mac, self.config.tx_checksum_offload);
        let (local, remote) = (tuple.local_ip, tuple.remote_ip);
        if self.push_control(|frame| wire::emit_tcp_frame(frame, (our_mac, peer), local, remote, &header, partial)) {
            self.env.0.counters.syn_cookies_sent += 1;
            self.env.0.counters.segments_out += 1;
            self.env.0.counters.checksums_offloaded += u64::from(partial);
        }
    }

    /// An ACK for a listening port without a connection: the end of a cookie
    /// handshake, if the cookie checks out. Returns whether it was one.
    pub(super) fn accept_cookie(&mut self, now: Instant, tuple: FourTuple, listener: u32, seg: &Segment<'_>) -> bool {
        let Some(ack) = seg.ack else { return false };
        if seg.flags.syn || !self.config.tcp.syn_cookies {
            return false;
        }
        let Some(mss) = self.cookies.check(now, &tuple, seg.seq - 1u32, ack - 1u32) else { return false };
        let (wscale, sack) = match seg.timestamp {
            Some((_, tsecr)) if self.config.tcp.timestamps => SynCookies::decode_ts(tsecr),
            _ => (None, false),
        };
        let Some(Some(l)) = self.listeners.get(listener as usize) else { return false };
        if l.backlog.len() >= l.backlog_limit {
            self.drop(DropReason::TcpAcceptQueueFull);
            return true;
        }
        if self.conns.len() >= self.config.limits.max_connections {
            self.drop(DropReason::TcpConnectionLimit);
            return true;
        }
        let options = CookieOptions { mss, wscale, sack };
        let conn = Connection::from_cookie(Key::default(), tuple, listener, seg, options, now, &mut self.env.0);
        let key = self.insert_connection(conn);
        self.env.0.counters.syn_cookies_accepted += 1;
        self.enqueue_accept(key);
        // The ACK may carry data (or a FIN): process it as any segment.
        if let Some(conn) = self.conns.get_mut(key) {
            let outcome = conn.on_segment(now, seg, &mut self.env.0);
            self.apply(key, outcome, None);
        }
        true
    }

    /// Queues a TCP segment without payload (RST) that belongs to no live
    /// connection's send path.
    pub(super) fn queue_tcp_control(&mut self, mac: [u8; 6], tuple: &FourTuple, header: &TcpHeader) {
        let (local, remote) = (tuple.local_ip, tuple.remote_ip);
        let (our_mac, partial) = (self.config.mac, self.config.tx_checksum_offload);
        if self.push_control(|frame| wire::emit_tcp_frame(frame, (our_mac, mac), local, remote, header, partial)) {
            self.env.0.counters.resets_sent += 1;
            self.env.0.counters.segments_out += 1;
            self.env.0.counters.checksums_offloaded += u64::from(partial);
        }
    }
}
