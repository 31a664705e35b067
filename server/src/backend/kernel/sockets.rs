//! Kernel sockets behind the [transport seam](crate::host::Transport), and
//! the poller that is their side of the shard loop.
//!
//! [`KernelSockets`] holds one shard's `SO_REUSEPORT` listeners (the plain
//! port's, and the TLS port's when there is one) and its
//! accepted mio streams in slots named by generational [`KernelConn`]s,
//! as the stack names its connections by `Handle`. mio is edge-triggered:
//! a readiness event comes once per change, so each slot keeps its
//! socket's [`Readiness`] (may it still be readable or writable, until a
//! call says `WouldBlock` or moves less than asked), and a call on a socket
//! known to be drained answers `WouldBlock` without a syscall. That
//! matters because the HTTP layer
//! stops reading while its output window is full: the bytes left in the
//! socket are read after the next flush, with no new event to say so.
//!
//! [`KernelPoll`] is the loop's [`NetIo`] for them: `receive` polls mio
//! without blocking (or takes what the last `wait` brought), turning each
//! readiness event into a [`KernelEvent`]; `wait` blocks in `epoll_wait`.
//! Its [`mio::Waker`] ends that wait when another thread wakes the shard.

use std::collections::VecDeque;
use std::io::{self, ErrorKind, Read, Write};
use std::net::{Shutdown, SocketAddr};
use std::sync::Arc;
use std::time::Duration;

use fairway_stack::time::Instant;
use mio::net::{TcpListener, TcpStream};
use mio::{Events, Interest, Poll, Registry, Token};
use tracing::{debug, warn};

use crate::host::wake::Notifier;
use crate::host::{HostEvent, Transport, TransportError};
use crate::readiness::{Readiness, Side};
use crate::rt::Shared;
use crate::runtime::NetIo;
use crate::tls::Tls;

/// The waker's token; a stream's is its slot index, listener `i`'s
/// `LISTENERS - i`.
const WAKER: Token = Token(usize::MAX);
/// The token of the shard's outbound sockets' epoll (ready: the host
/// dispatches it every turn).
const OUTBOUND: Token = Token(LISTENERS - MAX_LISTENERS - 1);
/// The first listener's token.
const LISTENERS: usize = usize::MAX - 1;
/// The most listeners a shard has.
const MAX_LISTENERS: usize = 4;

/// The fewest readiness events taken per poll: with hundreds of busy
/// connections, fewer means more `epoll_wait` calls for the same work.
const MIN_EVENTS: usize = 256;

/// A kernel connection's name: its slot and the slot's generation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelConn {
    index: u32,
    generation: u32,
}

/// One of the shard's listeners: its place in the list it was given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelListener(u8);

/// What the poller tells the host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KernelEvent {
    /// The listener has connections waiting.
    Acceptable(KernelListener),
    /// The stream may be readable or writable, or has news (FIN, error).
    Ready(KernelConn),
}

struct StreamSlot {
    stream: Option<TcpStream>,
    generation: u32,
    readiness: Readiness,
}

/// One shard's kernel sockets: its listener and its accepted streams, in
/// slots named by generational [`KernelConn`]s, each remembering whether
/// it may still be readable or writable (mio is edge-triggered).
pub struct KernelSockets {
    registry: Registry,
    /// Each listener with its port; `None` once closed.
    listeners: Vec<(u16, Option<TcpListener>)>,
    slots: Vec<StreamSlot>,
    free: Vec<u32>,
    /// `accept` failed (out of file descriptors, say): try again once a
    /// socket closes, since no new event may come for what waits.
    accept_stalled: bool,
    /// Listeners to try accepting on without an event (bit `i`: listener
    /// `i`).
    retry_accept: u8,
}

impl std::fmt::Debug for KernelSockets {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelSockets").field("open", &(self.slots.len() - self.free.len())).finish_non_exhaustive()
    }
}

impl KernelSockets {
    /// The sockets of a shard whose poll's registry is `registry`, serving
    /// `listeners` (bound and listening already; each registered by
    /// [`listen`](Transport::listen) with its port; at most four).
    ///
    /// # Errors
    ///
    /// The registry cannot be cloned.
    pub fn new(registry: &Registry, listeners: Vec<std::net::TcpListener>) -> io::Result<KernelSockets> {
        assert!(listeners.len() <= MAX_LISTENERS, "at most {MAX_LISTENERS} listeners");
        let listeners = listeners
            .into_iter()
            .map(|l| Ok((l.local_addr()?.port(), Some(TcpListener::from_std(l)))))
            .collect::<io::Result<_>>()?;
        Ok(KernelSockets {
            registry: registry.try_clone()?,
            listeners,
            slots: Vec::new(),
            free: Vec::new(),
            accept_stalled: false,
            retry_accept: 0,
        })
    }

    /// The stream of `conn`, if it is open.
    #[must_use]
    pub fn stream(&self, conn: KernelConn) -> Option<&TcpStream> {
        let slot = self.slots.get(conn.index as usize)?;
        if slot.generation == conn.generation { slot.stream.as_ref() } else { None }
    }

    fn slot(&mut self, conn: KernelConn) -> Option<&mut StreamSlot> {
        self.slots.get_mut(conn.index as usize).filter(|s| s.generation == conn.generation && s.stream.is_some())
    }

    /// A new stream into a free slot.
    fn insert(&mut self, mut stream: TcpStream) -> io::Result<KernelConn> {
        let index = match self.free.pop() {
            Some(index) => index,
            None => {
                self.slots.push(StreamSlot { stream: None, generation: 0, readiness: Readiness::default() });
                (self.slots.len() - 1) as u32
            }
        };
        if let Err(e) =
            self.registry.register(&mut stream, Token(index as usize), Interest::READABLE | Interest::WRITABLE)
        {
            self.free.push(index);
            return Err(e);
        }
        let slot = &mut self.slots[index as usize];
        slot.stream = Some(stream);
        slot.readiness = Readiness::FRESH;
        Ok(KernelConn { index, generation: slot.generation })
    }

    /// Runs `op`, which moves up to `want` bytes, on `conn`'s stream
    /// unless that side is known to be drained or full
    /// ([`Readiness::io`]): the count, or `WouldBlock`, or `Failed`.
    fn io(
        &mut self,
        conn: KernelConn,
        side: Side,
        want: usize,
        mut op: impl FnMut(&mut TcpStream) -> io::Result<usize>,
    ) -> Result<usize, TransportError> {
        let StreamSlot { stream, readiness, .. } = self.slot(conn).ok_or(TransportError::Failed)?;
        let stream = stream.as_mut().ok_or(TransportError::Failed)?;
        readiness.io(side, want, || op(stream)).map_err(|e| match e.kind() {
            ErrorKind::WouldBlock => TransportError::WouldBlock,
            _ => TransportError::Failed,
        })
    }

    /// Turns mio's event into the host's, noting the readiness it reports.
    fn event(&mut self, event: &mio::event::Event) -> Option<KernelEvent> {
        match event.token() {
            WAKER | OUTBOUND => None,
            Token(t) if t > LISTENERS - MAX_LISTENERS => {
                Some(KernelEvent::Acceptable(KernelListener((LISTENERS - t) as u8)))
            }
            Token(i) => {
                let slot = self.slots.get_mut(i).filter(|s| s.stream.is_some())?;
                slot.readiness.note(event);
                Some(KernelEvent::Ready(KernelConn { index: i as u32, generation: slot.generation }))
            }
        }
    }
}

impl Transport for KernelSockets {
    type Conn = KernelConn;
    type Listener = KernelListener;
    type Event = KernelEvent;

    fn index(conn: KernelConn) -> usize {
        conn.index as usize
    }

    fn classify(event: KernelEvent) -> HostEvent<KernelConn, KernelListener> {
        match event {
            KernelEvent::Acceptable(listener) => HostEvent::Acceptable(listener),
            KernelEvent::Ready(conn) => HostEvent::Ready(conn),
        }
    }

    /// Registers the listener bound to `port`; with a single listener,
    /// that one whatever the port (it was bound in advance, to `:0` maybe).
    fn listen(&mut self, port: u16) -> Result<KernelListener, String> {
        let i = match self.listeners.as_slice() {
            [_] => 0,
            all => all.iter().position(|&(p, _)| p == port).ok_or(format!("no listener was bound to port {port}"))?,
        };
        let listener = self.listeners[i].1.as_mut().ok_or("the listener was closed")?;
        self.registry
            .register(listener, Token(LISTENERS - i), Interest::READABLE)
            .map_err(|e| format!("polling the listener: {e}"))?;
        // Connections may have queued before registration: look at once.
        self.retry_accept |= 1 << i;
        Ok(KernelListener(i as u8))
    }

    /// Closes the listener, so the kernel sends new connections to the
    /// shards still listening, or refuses them once all have stopped.
    fn unlisten(&mut self, listener: KernelListener) {
        if let Some(mut listener) = self.listeners.get_mut(usize::from(listener.0)).and_then(|l| l.1.take()) {
            let _ = self.registry.deregister(&mut listener);
        }
    }

    fn accept(&mut self, listener: KernelListener) -> Option<(KernelConn, SocketAddr)> {
        loop {
            let listener = self.listeners.get(usize::from(listener.0))?.1.as_ref()?;
            match listener.accept() {
                Ok((stream, peer)) => {
                    // An IPv4 client of a socket on `[::]` is that IPv4
                    // address, for the logs, the metrics and the weights.
                    let peer = SocketAddr::new(peer.ip().to_canonical(), peer.port());
                    if let Err(e) = stream.set_nodelay(true) {
                        debug!("TCP_NODELAY: {e}");
                    }
                    match self.insert(stream) {
                        Ok(conn) => return Some((conn, peer)),
                        Err(e) => warn!("registering a connection: {e}"),
                    }
                }
                Err(e) if e.kind() == ErrorKind::WouldBlock => return None,
                Err(e) if matches!(e.kind(), ErrorKind::Interrupted | ErrorKind::ConnectionAborted) => {}
                Err(e) => {
                    warn!("accept: {e}");
                    self.accept_stalled = true;
                    return None;
                }
            }
        }
    }

    fn recv(&mut self, conn: KernelConn, buf: &mut [u8]) -> Result<usize, TransportError> {
        self.io(conn, Side::Read, buf.len(), |stream| stream.read(buf))
    }

    fn send(&mut self, conn: KernelConn, data: &[u8]) -> Result<usize, TransportError> {
        match self.io(conn, Side::Write, data.len(), |stream| stream.write(data)) {
            Ok(0) if !data.is_empty() => Err(TransportError::Failed),
            sent => sent,
        }
    }

    /// One `writev`: a response's head and body in one syscall.
    fn send_vectored(&mut self, conn: KernelConn, data: &[io::IoSlice<'_>]) -> Result<usize, TransportError> {
        let want: usize = data.iter().map(|s| s.len()).sum();
        match self.io(conn, Side::Write, want, |stream| stream.write_vectored(data)) {
            Ok(0) if want > 0 => Err(TransportError::Failed),
            sent => sent,
        }
    }

    fn shutdown(&mut self, conn: KernelConn) {
        if let Some(stream) = self.slot(conn).and_then(|s| s.stream.as_ref()) {
            let _ = stream.shutdown(Shutdown::Write);
        }
    }

    fn close(&mut self, conn: KernelConn) {
        let Some(slot) = self.slot(conn) else { return };
        let Some(mut stream) = slot.stream.take() else { return };
        slot.generation = slot.generation.wrapping_add(1);
        slot.readiness = Readiness::default();
        let _ = self.registry.deregister(&mut stream);
        drop(stream);
        self.free.push(conn.index);
        if std::mem::take(&mut self.accept_stalled) {
            self.retry_accept = ((1u16 << self.listeners.len()) - 1) as u8;
        }
    }

    /// A zero linger time: closing sends a reset, not a FIN.
    fn abort(&mut self, conn: KernelConn) {
        if let Some(stream) = self.stream(conn) {
            let _ = socket2::SockRef::from(stream).set_linger(Some(Duration::ZERO));
        }
        self.close(conn);
    }
}

/// One shard's poll: the loop's [`NetIo`] over its sockets (`epoll_wait`
/// without a timeout to receive, with one to sleep, woken by its
/// [`notifier`](KernelPoll::notifier)).
pub struct KernelPoll {
    poll: Poll,
    events: Events,
    /// The last `wait` filled `events`: `receive` takes them.
    fresh: bool,
    queue: VecDeque<KernelEvent>,
    waker: Arc<mio::Waker>,
}

impl std::fmt::Debug for KernelPoll {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KernelPoll").field("queued", &self.queue.len()).finish_non_exhaustive()
    }
}

impl KernelPoll {
    /// A poll taking up to `batch` events at a time (at least
    /// [`MIN_EVENTS`]).
    ///
    /// # Errors
    ///
    /// The epoll instance or its waker cannot be made.
    pub fn new(batch: usize) -> io::Result<KernelPoll> {
        let poll = Poll::new()?;
        let waker = Arc::new(mio::Waker::new(poll.registry(), WAKER)?);
        let batch = batch.max(MIN_EVENTS);
        Ok(KernelPoll {
            poll,
            events: Events::with_capacity(batch),
            fresh: false,
            queue: VecDeque::with_capacity(batch),
            waker,
        })
    }

    /// The registry sockets are registered with.
    #[must_use]
    pub fn registry(&self) -> &Registry {
        self.poll.registry()
    }

    /// Makes the wait end also when `fd` (the shard's outbound sockets'
    /// epoll) is readable.
    ///
    /// # Errors
    ///
    /// What `epoll_ctl` reported.
    pub fn also_wake_on(&self, fd: std::os::fd::RawFd) -> io::Result<()> {
        self.poll.registry().register(&mut mio::unix::SourceFd(&fd), OUTBOUND, Interest::READABLE)
    }

    /// Ends this poll's wait from any thread.
    #[must_use]
    pub fn notifier(&self) -> Notifier {
        let waker = Arc::clone(&self.waker);
        Box::new(move || {
            let _ = waker.wake();
        })
    }

    fn poll(&mut self, timeout: Duration) -> io::Result<()> {
        match self.poll.poll(&mut self.events, Some(timeout)) {
            Err(e) if e.kind() != ErrorKind::Interrupted => Err(e),
            _ => Ok(()),
        }
    }
}

/// Something that lends a shard's [`KernelSockets`]: the sockets
/// themselves, under TLS, or shared with async tasks.
pub trait AsSockets {
    /// The sockets, to act on.
    fn sockets_mut(&mut self) -> impl std::ops::DerefMut<Target = KernelSockets> + '_;
}

impl AsSockets for KernelSockets {
    fn sockets_mut(&mut self) -> impl std::ops::DerefMut<Target = KernelSockets> + '_ {
        self
    }
}

impl AsSockets for Tls<KernelSockets> {
    fn sockets_mut(&mut self) -> impl std::ops::DerefMut<Target = KernelSockets> + '_ {
        self.inner_mut()
    }
}

impl AsSockets for Shared<KernelSockets> {
    fn sockets_mut(&mut self) -> impl std::ops::DerefMut<Target = KernelSockets> + '_ {
        self.0.borrow_mut()
    }
}

impl AsSockets for Shared<Tls<KernelSockets>> {
    fn sockets_mut(&mut self) -> impl std::ops::DerefMut<Target = KernelSockets> + '_ {
        std::cell::RefMut::map(self.0.borrow_mut(), Tls::inner_mut)
    }
}

impl<T: AsSockets> NetIo<T> for KernelPoll {
    type Event = KernelEvent;

    fn receive(&mut self, transport: &mut T, _: Instant, _budget: usize) -> usize {
        if !std::mem::take(&mut self.fresh) && self.poll(Duration::ZERO).is_err() {
            self.events.clear();
        }
        let mut sockets = transport.sockets_mut();
        let mut count = 0;
        for event in &self.events {
            count += 1;
            if let Some(event) = sockets.event(event) {
                self.queue.push_back(event);
            }
        }
        self.events.clear();
        count
    }

    fn handle_timeout(&mut self, _: &mut T, _: Instant) {}

    fn poll_event(&mut self, transport: &mut T) -> Option<KernelEvent> {
        let mut sockets = transport.sockets_mut();
        if sockets.retry_accept != 0 {
            let i = sockets.retry_accept.trailing_zeros() as u8;
            sockets.retry_accept &= !(1 << i);
            return Some(KernelEvent::Acceptable(KernelListener(i)));
        }
        self.queue.pop_front()
    }

    fn transmit(&mut self, _: &mut T, _: Instant, _: usize) -> usize {
        0
    }

    fn poll_timeout(&self, _: &T) -> Option<Instant> {
        None
    }

    fn wait(&mut self, timeout: Duration) -> io::Result<()> {
        self.poll(timeout)?;
        self.fresh = true;
        Ok(())
    }

    /// The poll's own epoll descriptor: readable when any of its sockets
    /// (or its waker) has an event, which the next `receive` takes.
    fn wake_sources<'a>(&'a self, sources: &mut Vec<std::os::fd::BorrowedFd<'a>>) {
        sources.push(std::os::fd::AsFd::as_fd(self.poll.registry()));
    }

    /// False while events taken by the last poll wait to be handed out.
    fn before_sleep(&mut self) -> io::Result<bool> {
        Ok(self.queue.is_empty())
    }

    fn after_sleep(&mut self) {}
}
