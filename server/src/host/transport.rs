//! The transport seam: what the [host](super) asks of a backend's
//! connections, written once and implemented by the userspace stack
//! (`Shard` and its `Handle`s, [`crate::backend::userspace`]) and by kernel
//! sockets ([`crate::backend::kernel::KernelSockets`]).
//!
//! The contract is the stack's own, epoll-style and edge-triggered:
//!
//! - an event that names a connection ([`HostEvent::Ready`]) means it may
//!   have input, room for output, or news (a FIN): the host calls
//!   [`recv`](Transport::recv) and [`send`](Transport::send) until they say
//!   [`TransportError::WouldBlock`], and only then waits for the next event
//!   (a service that stops earlier, at its turn's budget, wakes the
//!   connection to be driven again next turn: the readiness it did not use
//!   is still there, with no event to say so);
//! - `recv` returning `Ok(0)` is the peer's FIN, after everything it sent;
//! - a connection name is generational: once closed, it never reaches a
//!   later connection, so a stale event is ignored, not misdelivered.
//!
//! Nothing here allocates; a transport's calls are as cheap as its
//! backend's (a ring copy on the stack, one syscall on the kernel).

use std::fmt;
use std::io;
use std::net::SocketAddr;

use fairway_stack::Counters;
use fairway_stack::time::Instant;

use crate::metrics::ShardMetrics;

/// Why a transport call did not move bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TransportError {
    /// Nothing to read, or no room to write, now: wait for the next event.
    WouldBlock,
    /// The connection failed (reset, timed out) or is gone: stop using it.
    Failed,
}

/// What an event means to the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum HostEvent<C, L> {
    /// The listener has connections to accept.
    Acceptable(L),
    /// The connection may have input, output room or a FIN.
    Ready(C),
    /// The connection failed; the host releases it.
    Failed(C),
    /// Nothing for the host.
    Other,
}

/// A backend's connections, as the host drives them: epoll-style and
/// edge-triggered (call until `WouldBlock`, then wait for the next event),
/// `Ok(0)` from `recv` at the peer's FIN, connection names generational.
pub trait Transport {
    /// A connection's name: generational, cheap to copy.
    type Conn: Copy + Eq + fmt::Debug;
    /// A listening socket's name.
    type Listener: Copy + fmt::Debug;
    /// What the backend's loop hands the application.
    type Event: Copy + fmt::Debug;

    /// A small dense number for indexing per-connection state; reused after
    /// the connection is closed.
    fn index(conn: Self::Conn) -> usize;

    /// What `event` means to the host.
    fn classify(event: Self::Event) -> HostEvent<Self::Conn, Self::Listener>;

    /// Why the connection an event [classified](Self::classify) as
    /// [`HostEvent::Failed`] failed: refused, reset or timed out.
    fn why_failed(event: Self::Event) -> io::ErrorKind {
        let _ = event;
        io::ErrorKind::ConnectionReset
    }

    /// Opens a connection to `to` (an upstream, say): its name at once,
    /// its readiness later, as [`HostEvent::Ready`] once it is established
    /// or [`HostEvent::Failed`] when it is not. Its bytes go plain, as
    /// `recv` and `send` move them. The default, for a backend whose
    /// outbound connections are kernel sockets the service opens itself
    /// ([`crate::outbound`]), opens none.
    ///
    /// # Errors
    ///
    /// Why not at once: no route, no port, too many connections, or
    /// [`io::ErrorKind::Unsupported`].
    fn connect(&mut self, now: Instant, to: SocketAddr) -> Result<Self::Conn, io::ErrorKind> {
        let _ = (now, to);
        Err(io::ErrorKind::Unsupported)
    }

    /// Starts listening on `port` (a backend with a listener bound in
    /// advance hands that one out and ignores the port).
    ///
    /// # Errors
    ///
    /// Why it cannot, in one line.
    fn listen(&mut self, port: u16) -> Result<Self::Listener, String>;

    /// Stops listening: connections not yet accepted are refused.
    fn unlisten(&mut self, listener: Self::Listener);

    /// Takes the next connection the listener has established, with the
    /// peer's address.
    fn accept(&mut self, listener: Self::Listener) -> Option<(Self::Conn, SocketAddr)>;

    /// Reads into `buf`: the count, `Ok(0)` at the peer's FIN.
    ///
    /// # Errors
    ///
    /// [`TransportError::WouldBlock`] when nothing is there yet.
    fn recv(&mut self, conn: Self::Conn, buf: &mut [u8]) -> Result<usize, TransportError>;

    /// Lends the received bytes at the front of the connection's input to
    /// `take`, which returns how many it used; they are then consumed. The
    /// slice may be only part of what is waiting (a ring's first segment);
    /// call again for the rest. `Ok(0)` from an empty input is the peer's
    /// FIN. A backend without a receive ring of its own reads at most
    /// `scratch.len()` bytes into `scratch` first (one copy more) and lends
    /// those, so the caller sizes `scratch` to what `take` can use: what it
    /// leaves of them is lost. That copy is the default; a backend with a
    /// ring lends from it instead.
    ///
    /// # Errors
    ///
    /// As [`recv`](Self::recv).
    fn recv_with(
        &mut self,
        conn: Self::Conn,
        scratch: &mut [u8],
        take: &mut dyn FnMut(&[u8]) -> usize,
    ) -> Result<usize, TransportError> {
        let n = self.recv(conn, scratch)?;
        Ok(take(&scratch[..n]).min(n))
    }

    /// Queues `data` to send: how much was taken (maybe less than all).
    ///
    /// # Errors
    ///
    /// [`TransportError::WouldBlock`] when nothing fits now.
    fn send(&mut self, conn: Self::Conn, data: &[u8]) -> Result<usize, TransportError>;

    /// Whether [`send_with`](Self::send_with) lends the transport's own send
    /// ring, so a body can be written there without a buffer of the
    /// caller's (the userspace stack). A kernel socket has no ring to lend.
    const SENDS_IN_PLACE: bool = false;

    /// Lends free room of the connection's send ring to `fill`, which writes
    /// the bytes to send at its start and returns how many it wrote; those
    /// are queued. The room may be only part of what is free (the ring's
    /// first contiguous part): call again for the rest. Called only when
    /// [`SENDS_IN_PLACE`](Self::SENDS_IN_PLACE); the default, for
    /// transports without a ring, never calls `fill` and says `WouldBlock`.
    ///
    /// # Errors
    ///
    /// [`TransportError::WouldBlock`] when there is no room now.
    fn send_with(
        &mut self,
        conn: Self::Conn,
        fill: &mut dyn FnMut(&mut [u8]) -> usize,
    ) -> Result<usize, TransportError> {
        let _ = (conn, fill);
        Err(TransportError::WouldBlock)
    }

    /// Queues the slices of `data` in order, as one `send` of them all
    /// would: how much was taken. One syscall (`writev`) on kernel
    /// sockets; the default sends slice by slice.
    ///
    /// # Errors
    ///
    /// [`TransportError::WouldBlock`] when nothing fits now.
    fn send_vectored(&mut self, conn: Self::Conn, data: &[std::io::IoSlice<'_>]) -> Result<usize, TransportError> {
        send_slices(self, conn, data)
    }

    /// Shuts the sending side: a FIN follows what is queued. Input still
    /// arrives.
    fn shutdown(&mut self, conn: Self::Conn);

    /// Closes the connection; its name is invalid afterwards. Queued output
    /// is still delivered; unread input makes it a reset, so the host
    /// lingers first (see the [host](super)).
    fn close(&mut self, conn: Self::Conn);

    /// Resets the connection at once; its name is invalid afterwards.
    fn abort(&mut self, conn: Self::Conn);

    /// Whether `conn` speaks TLS (a [`Tls`](crate::tls::Tls) transport's
    /// connection on one of its TLS ports).
    fn is_secure(&self, conn: Self::Conn) -> bool {
        let _ = conn;
        false
    }

    /// Whether everything closed connections queued has been delivered, so a
    /// shutting-down shard may stop (the kernel delivers it after the
    /// process is gone; the userspace stack only while its loop runs).
    fn delivered(&self) -> bool {
        true
    }

    /// When [`expire`](Self::expire) is next due: the transport's own
    /// deadlines (a TLS handshake's), if it has any.
    fn next_expiry(&self) -> Option<Instant> {
        None
    }

    /// Hands to `expired` every connection whose transport-level deadline
    /// has passed at `now` (a TLS handshake not finished in time), or that
    /// the transport cut for another reason of its own: the host closes
    /// them (their last words, an alert, are queued already).
    fn expire(&mut self, now: Instant, expired: &mut dyn FnMut(Self::Conn)) {
        let _ = (now, expired);
    }

    /// The userspace stack's counters, where there is one.
    fn counters(&self) -> Option<Counters> {
        None
    }

    /// Adds the backend's own counters, and what it knows of `conns` (the
    /// shard's connections), to the shard's metrics.
    fn observe(&self, metrics: &mut ShardMetrics, conns: &mut dyn Iterator<Item = Self::Conn>) {
        let _ = (metrics, conns);
    }
}

/// Queues the slices of `data` on `conn` in order with `t.send`, slice by
/// slice, until one is taken short: what [`Transport::send_vectored`] does
/// for a transport without a vectored send of its own.
///
/// # Errors
///
/// `t.send`'s, when nothing was taken.
pub fn send_slices<T: Transport + ?Sized>(
    t: &mut T,
    conn: T::Conn,
    data: &[std::io::IoSlice<'_>],
) -> Result<usize, TransportError> {
    let mut total = 0;
    for slice in data.iter().filter(|s| !s.is_empty()) {
        match t.send(conn, slice) {
            Ok(n) => {
                total += n;
                if n < slice.len() {
                    break;
                }
            }
            Err(e) if total == 0 => return Err(e),
            Err(_) => break,
        }
    }
    Ok(total)
}

/// One connection of a transport as a byte stream: [`io::Read`] and
/// [`io::Write`] over [`Transport::recv`] and [`Transport::send`],
/// `WouldBlock` when they say so, a failed connection as
/// `ConnectionReset`. What rustls reads and writes records through, and
/// what the host moves a link's bytes through.
pub struct ConnIo<'a, T: Transport> {
    /// The transport.
    pub t: &'a mut T,
    /// The connection.
    pub conn: T::Conn,
}

fn io_error(e: TransportError) -> io::Error {
    match e {
        TransportError::WouldBlock => io::ErrorKind::WouldBlock.into(),
        TransportError::Failed => io::ErrorKind::ConnectionReset.into(),
    }
}

impl<T: Transport> io::Read for ConnIo<'_, T> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.t.recv(self.conn, buf).map_err(io_error)
    }
}

impl<T: Transport> io::Write for ConnIo<'_, T> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.t.send(self.conn, buf).map_err(io_error)
    }

    fn write_vectored(&mut self, bufs: &[io::IoSlice<'_>]) -> io::Result<usize> {
        self.t.send_vectored(self.conn, bufs).map_err(io_error)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}
