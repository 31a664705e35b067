//! The application-facing types: handles, events, errors and flow statistics.

use core::net::SocketAddr;

use crate::pool::Key;
use crate::tcp::State;
use crate::time::Duration;

/// A connection, as the application holds it: the stack's file descriptor.
///
/// Handles are generational: once the application closes a connection, its
/// handle never reaches another connection, even one that reuses the slot.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Handle(pub(crate) Key);

impl Handle {
    /// A small dense number for indexing per-connection application state;
    /// reused after the connection is closed.
    pub fn index(self) -> u32 {
        self.0.index()
    }
}

/// A listening socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Listener(pub(crate) u32);

/// Something the application should act on (see [`crate::Shard::poll_event`]).
///
/// Events are edge-triggered and coalesced: one `Readable` stands for any
/// amount of data that arrived since the application last called `recv`, one
/// `Writable` for space freed after a `send` came up short.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Event {
    /// The listener has connections waiting: call `accept` until it returns `None`.
    Acceptable(Listener),
    /// An active open completed.
    Connected(Handle),
    /// Data arrived: call `recv` until it returns `WouldBlock`.
    Readable(Handle),
    /// Send space became available after a short `send`.
    Writable(Handle),
    /// The peer closed its sending side; after the data still queued, `recv`
    /// returns `Ok(0)`.
    HangUp(Handle),
    /// The connection failed. The handle stays valid until `close`.
    Error(Handle, ConnectionError),
}

/// Why a connection failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConnectionError {
    /// The peer sent RST.
    #[error("connection reset by peer")]
    Reset,
    /// The peer refused the connection (RST in answer to our SYN).
    #[error("connection refused")]
    Refused,
    /// Data or a handshake went unacknowledged past the user timeout or the
    /// retry limit, or keep-alive probes went unanswered.
    #[error("connection timed out")]
    TimedOut,
}

/// `listen` failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ListenError {
    /// The address is not one of ours.
    #[error("address not available")]
    AddressNotAvailable,
    /// Something already listens on that port.
    #[error("address in use")]
    AddressInUse,
    /// The shard holds its maximum of listeners.
    #[error("too many listeners")]
    TooManyListeners,
}

/// `connect` failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ConnectError {
    /// Port 0, or an address that cannot be a peer (ours, broadcast, multicast).
    #[error("invalid remote address")]
    InvalidAddress,
    /// No route to the address.
    #[error("no route to host")]
    NoRoute,
    /// Every ephemeral port to that peer is taken.
    #[error("no ephemeral port available")]
    NoPort,
    /// The shard holds its maximum of connections.
    #[error("too many connections")]
    TooManyConnections,
}

/// `send` failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum SendError {
    /// The send buffer is full; wait for [`Event::Writable`].
    #[error("send buffer full")]
    WouldBlock,
    /// The application already shut down the sending side.
    #[error("sending side shut down")]
    Shutdown,
    /// The connection failed.
    #[error(transparent)]
    Connection(#[from] ConnectionError),
    /// The handle does not name a live connection.
    #[error("invalid handle")]
    InvalidHandle,
}

/// `recv` failed.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum RecvError {
    /// Nothing to read yet; wait for [`Event::Readable`].
    #[error("no data available")]
    WouldBlock,
    /// The connection failed.
    #[error(transparent)]
    Connection(#[from] ConnectionError),
    /// The handle does not name a live connection.
    #[error("invalid handle")]
    InvalidHandle,
}

/// A snapshot of one connection, for monitoring and for the fairness policy.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlowStats {
    /// Our end.
    pub local: SocketAddr,
    /// The peer's end.
    pub remote: SocketAddr,
    /// RFC 9293 state.
    pub state: State,
    /// Smoothed RTT (RFC 6298), once measured.
    pub srtt: Option<Duration>,
    /// RTT variation, once measured.
    pub rttvar: Option<Duration>,
    /// Windowed minimum RTT, once measured.
    pub min_rtt: Option<Duration>,
    /// Current retransmission timeout.
    pub rto: Duration,
    /// Congestion window, bytes.
    pub cwnd: u32,
    /// Slow-start threshold, bytes (`u32::MAX` until the first loss).
    pub ssthresh: u32,
    /// The peer's advertised window, bytes.
    pub snd_wnd: u32,
    /// The window we last advertised, bytes.
    pub rcv_wnd: u32,
    /// Maximum segment size we send.
    pub mss: u16,
    /// Bytes the application queued with `send`.
    pub bytes_sent: u64,
    /// Bytes the peer acknowledged.
    pub bytes_acked: u64,
    /// Bytes received in order.
    pub bytes_received: u64,
    /// Segments sent again.
    pub retransmits: u32,
    /// Retransmission timeouts.
    pub timeouts: u32,
    /// Window reductions undone because the loss proved spurious (D-SACK,
    /// Eifel).
    pub spurious: u32,
    /// Bytes queued to send (unsent or unacknowledged).
    pub send_queue: usize,
    /// Bytes received but not yet read.
    pub recv_queue: usize,
    /// Receiver-side RTT estimate (from timestamp echoes), for flows that
    /// mostly receive.
    pub rcv_rtt: Option<Duration>,
    /// The cap on the window we advertise, if the policy set one.
    pub rcv_wnd_cap: Option<u32>,
    /// The cap on the congestion window, if set.
    pub cwnd_cap: Option<u32>,
    /// The cap on the pacing rate (bytes per second), if set.
    pub pacing_cap: Option<u64>,
    /// Careful resume jumped on this connection (from a saved path or a
    /// fairness share): it sends a download's worth at once.
    pub fast_start_jump: bool,
    /// Window scaling in use: (the peer's shift, ours).
    pub window_scaling: Option<(u8, u8)>,
    /// Timestamps in use.
    pub timestamps: bool,
    /// SACK in use.
    pub sack: bool,
}
