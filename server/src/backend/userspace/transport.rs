//! The userspace stack behind the [transport seam](crate::host::Transport):
//! a [`Shard`] is the transport, its `Handle`s the connections, its events
//! the stack's own. Listening is on `0.0.0.0:port` of the shard's address;
//! `recv_with` lends the receive ring itself, so async readers copy once, and
//! `send_with` the send ring, so file bodies are read straight into it.

use std::io;
use std::net::{SocketAddr, SocketAddrV4};

use fairway_stack::time::Instant;
use fairway_stack::{ConnectError, ConnectionError, Event, Handle, Listener, RecvError, SendError, Shard};

use crate::host::{HostEvent, Transport, TransportError};
use crate::metrics::ShardMetrics;

fn recv_error(e: RecvError) -> TransportError {
    match e {
        RecvError::WouldBlock => TransportError::WouldBlock,
        RecvError::Connection(_) | RecvError::InvalidHandle => TransportError::Failed,
    }
}

fn send_error(e: SendError) -> TransportError {
    match e {
        SendError::WouldBlock => TransportError::WouldBlock,
        SendError::Shutdown | SendError::Connection(_) | SendError::InvalidHandle => TransportError::Failed,
    }
}

impl Transport for Shard {
    type Conn = Handle;
    type Listener = Listener;
    type Event = Event;

    fn index(conn: Handle) -> usize {
        conn.index() as usize
    }

    fn classify(event: Event) -> HostEvent<Handle, Listener> {
        match event {
            Event::Acceptable(listener) => HostEvent::Acceptable(listener),
            Event::Readable(h) | Event::Writable(h) | Event::HangUp(h) | Event::Connected(h) => HostEvent::Ready(h),
            Event::Error(h, _) => HostEvent::Failed(h),
        }
    }

    fn why_failed(event: Event) -> io::ErrorKind {
        match event {
            Event::Error(_, ConnectionError::Refused) => io::ErrorKind::ConnectionRefused,
            Event::Error(_, ConnectionError::TimedOut) => io::ErrorKind::TimedOut,
            _ => io::ErrorKind::ConnectionReset,
        }
    }

    fn connect(&mut self, now: Instant, to: SocketAddr) -> Result<Handle, io::ErrorKind> {
        Shard::connect(self, now, to).map_err(|e| match e {
            ConnectError::InvalidAddress => io::ErrorKind::InvalidInput,
            ConnectError::NoRoute => io::ErrorKind::HostUnreachable,
            ConnectError::NoPort => io::ErrorKind::AddrNotAvailable,
            ConnectError::TooManyConnections => io::ErrorKind::QuotaExceeded,
        })
    }

    fn listen(&mut self, port: u16) -> Result<Listener, String> {
        Shard::listen(self, SocketAddrV4::new(std::net::Ipv4Addr::UNSPECIFIED, port))
            .map_err(|e| format!("cannot listen on port {port}: {e}"))
    }

    fn unlisten(&mut self, listener: Listener) {
        Shard::unlisten(self, listener);
    }

    fn accept(&mut self, listener: Listener) -> Option<(Handle, SocketAddr)> {
        loop {
            let h = Shard::accept(self, listener)?;
            match self.peer(h) {
                Some(peer) => return Some((h, peer)),
                None => self.close(h),
            }
        }
    }

    fn recv(&mut self, conn: Handle, buf: &mut [u8]) -> Result<usize, TransportError> {
        Shard::recv(self, conn, buf).map_err(recv_error)
    }

    fn recv_with(
        &mut self,
        conn: Handle,
        _scratch: &mut [u8],
        take: &mut dyn FnMut(&[u8]) -> usize,
    ) -> Result<usize, TransportError> {
        Shard::recv_with(self, conn, take).map_err(recv_error)
    }

    fn send(&mut self, conn: Handle, data: &[u8]) -> Result<usize, TransportError> {
        Shard::send(self, conn, data).map_err(send_error)
    }

    const SENDS_IN_PLACE: bool = true;

    fn send_with(&mut self, conn: Handle, fill: &mut dyn FnMut(&mut [u8]) -> usize) -> Result<usize, TransportError> {
        Shard::send_with(self, conn, fill).map_err(send_error)
    }

    fn shutdown(&mut self, conn: Handle) {
        Shard::shutdown(self, conn);
    }

    fn close(&mut self, conn: Handle) {
        Shard::close(self, conn);
    }

    fn abort(&mut self, conn: Handle) {
        Shard::abort(self, conn);
    }

    /// Every connection is closed or in TIME-WAIT: what was queued is out.
    fn delivered(&self) -> bool {
        self.connection_count() == self.time_wait_count()
    }

    fn counters(&self) -> Option<fairway_stack::Counters> {
        Some(Shard::counters(self).clone())
    }

    fn observe(&self, metrics: &mut ShardMetrics, conns: &mut dyn Iterator<Item = Handle>) {
        metrics.observe_stack(self.counters());
        metrics.observe_stack_connections(self.connection_count() as u64, self.time_wait_count() as u64);
        metrics.observe_flows(conns.filter_map(|h| self.flow(h)));
    }
}
