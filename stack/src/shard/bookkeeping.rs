//! Connection bookkeeping: timers, the ready queue, the outcomes of a
//! connection's inputs, removal.

use crate::pool::Key;
use crate::tcp::connection::{Action, Connection, NEVER, Outcome};

use super::{FIRST_CONNECTION_TIMER, Shard};

impl Shard {
    /// Puts the connection's deadline in the wheel and, if it has something to
    /// send, in the ready queue.
    pub(super) fn sync(&mut self, key: Key) {
        self.sync_timer(key);
        if let Some(conn) = self.conns.get_mut(key)
            && !conn.in_ready()
            && conn.wants_tx()
        {
            conn.set_in_ready(true);
            self.ready.push_back(key);
        }
    }

    /// Takes a new connection into the table: its slot, its own key, and
    /// its 4-tuple in the flow table.
    pub(super) fn insert_connection(&mut self, conn: Connection) -> Key {
        let tuple = conn.tuple;
        let key = self.conns.insert(conn);
        if let Some(conn) = self.conns.get_mut(key) {
            conn.key = key;
        }
        self.flows.insert(tuple, key);
        key
    }

    pub(super) fn sync_timer(&mut self, key: Key) {
        let Some(conn) = self.conns.get_mut(key) else { return };
        let at = conn.next_deadline(&self.env.0.cfg);
        // The wheel keeps each connection's deadline as scheduled.
        let id = key.index() + FIRST_CONNECTION_TIMER;
        if Some(at) != self.timers.deadline(id) {
            if at == NEVER {
                self.timers.cancel(id);
            } else {
                self.timers.schedule(id, at);
            }
        }
    }

    /// Carries out what a connection asked for.
    pub(super) fn apply(&mut self, key: Key, outcome: Outcome, peer: Option<[u8; 6]>) {
        if let Some((seq, ack)) = outcome.reset
            && let Some(conn) = self.conns.get(key)
        {
            let (header, tuple) = (conn.reset_header(seq, ack), conn.tuple);
            let mac = peer.or_else(|| self.next_hop(tuple.remote_ip).and_then(|hop| self.neighbor_mac(hop)));
            if let Some(mac) = mac {
                self.queue_tcp_control(mac, &tuple, &header);
            }
        }
        match outcome.action {
            Action::Keep => self.sync(key),
            Action::Detach => {
                if let Some(conn) = self.conns.get(key) {
                    let tuple = conn.tuple;
                    self.flows.remove(&tuple, key);
                }
                self.leave_syn_queue(key);
                self.sync(key);
            }
            Action::Remove | Action::Recycle => self.remove_connection(key),
        }
    }

    pub(super) fn leave_syn_queue(&mut self, key: Key) {
        let Some(conn) = self.conns.get_mut(key) else { return };
        if conn.take_syn_queue_slot()
            && let Some(Some(l)) = self.listeners.get_mut(conn.listener as usize)
        {
            l.syn_queue = l.syn_queue.saturating_sub(1);
        }
    }

    pub(super) fn remove_connection(&mut self, key: Key) {
        self.leave_syn_queue(key);
        let Some(mut conn) = self.conns.remove(key) else { return };
        if conn.ack_held() {
            // Its ACK has nobody to go to now.
            self.held.retain(|h| h.key() != key);
        }
        conn.on_removed(self.now, &mut self.env.0);
        self.flows.remove(&conn.tuple, key);
        self.timers.cancel(key.index() + FIRST_CONNECTION_TIMER);
    }
}
