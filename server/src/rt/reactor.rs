//! The reactor: what ties a shard's tasks to its connections, its clock and
//! its host.
//!
//! The host runs [`AsyncService`] on its connections. A connection the host
//! admits is handed to the tasks through the accept queue (the shard's
//! [`TcpListener`](crate::net::TcpListener)); from then on the task does
//! the I/O, straight on the shard's transport ([`Shared`]: the stack's
//! rings or the kernel socket), and the host only wakes it: each
//! connection keeps one waker per direction (a task that waits to read,
//! one that waits to write), and an event for the connection wakes exactly
//! those. Two tasks waiting the same way on one connection would steal each
//! other's wake-ups; a stream belongs to one task.
//!
//! Nothing is lost between a `WouldBlock` and the event that ends it: the
//! transport's events are edge-triggered from the failed call on (the stack
//! raises `Readable` for data after a `recv`, `Writable` after a short
//! `send`; mio reports the next change), and the loop only delivers events
//! between task polls, on the same thread.
//!
//! When the task drops its stream the host lingers and closes it; when the
//! host closes a connection (the peer reset it, the idle timeout) the task's
//! next call fails.
//!
//! The tasks are tokio's, on the shard's current-thread runtime and
//! local runtime (see [`crate::runtime::driver`]); their timers are tokio's.
//! Every call that moves bytes [kicks](crate::runtime::kick) the shard's
//! loop, which runs after the tasks it woke and transmits what they wrote
//! (or, if it was asleep, wakes for it). The tasks the server spawns (the
//! application's main task, and whatever it spawns with
//! [`fairway::rt::spawn`](super::spawn)) are kept in a `JoinSet`: a
//! draining shard waits for them within the grace period, aborts them at
//! its end, and counts those that panicked.

use std::cell::{Cell, RefCell};
use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll, Waker};

use fairway_stack::Shard;
use fairway_stack::time::{Duration, Instant};

use tokio::task::JoinSet;

use crate::host::{Cx, HostEvent, Layered, Next, Service, Transport, TransportError};
use crate::metrics::ShardMetrics;
use crate::runtime::AsShard;
use crate::site::ShardSite;

/// A transport shared by the loop (through the host) and the shard's
/// tasks: each call borrows it for its own length only.
pub struct Shared<X>(pub(crate) Rc<RefCell<X>>);

impl<X> Shared<X> {
    /// `transport`, to be shared.
    pub fn new(transport: X) -> Shared<X> {
        Shared(Rc::new(RefCell::new(transport)))
    }

    /// The transport, to look at (its counters after the loop ended).
    pub fn borrow(&self) -> std::cell::Ref<'_, X> {
        self.0.borrow()
    }

    /// The transport, to act on, between the tasks' turns (a driver of its
    /// own feeds it frames this way).
    ///
    /// # Panics
    ///
    /// Called from inside a task of the same shard, which holds it.
    pub fn borrow_mut(&self) -> std::cell::RefMut<'_, X> {
        self.0.borrow_mut()
    }
}

impl AsShard for Shared<Shard> {
    fn shard_mut(&mut self) -> impl std::ops::DerefMut<Target = Shard> + '_ {
        self.0.borrow_mut()
    }
    fn shard_ref(&self) -> impl std::ops::Deref<Target = Shard> + '_ {
        self.0.borrow()
    }
}

impl AsShard for Shared<crate::tls::Tls<Shard>> {
    fn shard_mut(&mut self) -> impl std::ops::DerefMut<Target = Shard> + '_ {
        std::cell::RefMut::map(self.0.borrow_mut(), crate::tls::Tls::inner_mut)
    }
    fn shard_ref(&self) -> impl std::ops::Deref<Target = Shard> + '_ {
        std::cell::Ref::map(self.0.borrow(), crate::tls::Tls::inner)
    }
}

impl<X: Transport> Transport for Shared<X> {
    type Conn = X::Conn;
    type Listener = X::Listener;
    type Event = X::Event;

    fn index(conn: X::Conn) -> usize {
        X::index(conn)
    }
    fn classify(event: X::Event) -> HostEvent<X::Conn, X::Listener> {
        X::classify(event)
    }
    fn why_failed(event: X::Event) -> io::ErrorKind {
        X::why_failed(event)
    }
    fn connect(&mut self, now: Instant, to: SocketAddr) -> Result<X::Conn, io::ErrorKind> {
        self.0.borrow_mut().connect(now, to)
    }
    fn listen(&mut self, port: u16) -> Result<X::Listener, String> {
        self.0.borrow_mut().listen(port)
    }
    fn unlisten(&mut self, listener: X::Listener) {
        self.0.borrow_mut().unlisten(listener);
    }
    fn accept(&mut self, listener: X::Listener) -> Option<(X::Conn, SocketAddr)> {
        self.0.borrow_mut().accept(listener)
    }
    fn recv(&mut self, conn: X::Conn, buf: &mut [u8]) -> Result<usize, TransportError> {
        self.0.borrow_mut().recv(conn, buf)
    }
    fn recv_with(
        &mut self,
        conn: X::Conn,
        scratch: &mut [u8],
        take: &mut dyn FnMut(&[u8]) -> usize,
    ) -> Result<usize, TransportError> {
        self.0.borrow_mut().recv_with(conn, scratch, take)
    }
    fn send(&mut self, conn: X::Conn, data: &[u8]) -> Result<usize, TransportError> {
        self.0.borrow_mut().send(conn, data)
    }
    const SENDS_IN_PLACE: bool = X::SENDS_IN_PLACE;
    fn send_with(&mut self, conn: X::Conn, fill: &mut dyn FnMut(&mut [u8]) -> usize) -> Result<usize, TransportError> {
        self.0.borrow_mut().send_with(conn, fill)
    }
    fn send_vectored(&mut self, conn: X::Conn, data: &[io::IoSlice<'_>]) -> Result<usize, TransportError> {
        self.0.borrow_mut().send_vectored(conn, data)
    }
    fn shutdown(&mut self, conn: X::Conn) {
        self.0.borrow_mut().shutdown(conn);
    }
    fn close(&mut self, conn: X::Conn) {
        self.0.borrow_mut().close(conn);
    }
    fn abort(&mut self, conn: X::Conn) {
        self.0.borrow_mut().abort(conn);
    }
    fn delivered(&self) -> bool {
        self.0.borrow().delivered()
    }
    fn next_expiry(&self) -> Option<Instant> {
        self.0.borrow().next_expiry()
    }
    fn expire(&mut self, now: Instant, expired: &mut dyn FnMut(X::Conn)) {
        self.0.borrow_mut().expire(now, expired);
    }
    fn counters(&self) -> Option<fairway_stack::Counters> {
        self.0.borrow().counters()
    }
    fn observe(&self, metrics: &mut ShardMetrics, conns: &mut dyn Iterator<Item = X::Conn>) {
        self.0.borrow().observe(metrics, conns);
    }
}

impl<X: Transport> Layered for Shared<X> {
    type Below = X;

    fn below(&self) -> impl std::ops::Deref<Target = X> + '_ {
        self.0.borrow()
    }
    fn below_mut(&mut self) -> impl std::ops::DerefMut<Target = X> + '_ {
        self.0.borrow_mut()
    }
}

/// A connection as tasks name it: its host slot and a generation, so a
/// stream outliving its connection never reaches the slot's next one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ConnId {
    slot: u32,
    generation: u32,
}

/// What the shard's tasks may ask of their runtime: an object, so that
/// streams, listeners and timers need not name the transport.
pub(crate) trait Runtime {
    /// The loop's time.
    fn now(&self) -> Instant;
    /// The next admitted connection, once there is one.
    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(ConnId, SocketAddr)>>;
    /// Lends at most `want` received bytes of `id` to `take`.
    fn poll_read(
        &self,
        id: ConnId,
        cx: &mut Context<'_>,
        want: usize,
        take: &mut dyn FnMut(&[u8]) -> usize,
    ) -> Poll<io::Result<usize>>;
    /// Queues bytes to send on `id`.
    fn poll_write(&self, id: ConnId, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>>;
    /// Queues the slices of `data`, in order, on `id`.
    fn poll_write_vectored(
        &self,
        id: ConnId,
        cx: &mut Context<'_>,
        data: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>>;
    /// Shuts `id`'s sending side.
    fn shutdown(&self, id: ConnId) -> io::Result<()>;
    /// The task is done with `id`: the host lingers and closes it.
    fn release(&self, id: ConnId);
    /// The peer of `id`.
    fn peer(&self, id: ConnId) -> Option<SocketAddr>;
    /// Whether `id` speaks TLS.
    fn is_secure(&self, id: ConnId) -> bool;
    /// Adds a task, kept with the server's tasks.
    fn spawn(&self, task: Task);
    /// Ready once the server drains.
    fn poll_draining(&self, cx: &mut Context<'_>) -> Poll<()>;
    /// How hyper serves the shard's connections.
    fn limits(&self) -> ServeLimits;
}

/// How hyper serves a shard's connections, from the server's
/// [`HttpConfig`](crate::http::HttpConfig).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct ServeLimits {
    /// How long a client may take to send a request head (HTTP/1).
    pub(crate) header_timeout: std::time::Duration,
    /// HTTP/2's, if it is served: the most streams a client may have open,
    /// and the largest header list it may send (the HTTP/1 head's limit).
    pub(crate) http2: Option<(u32, u32)>,
}

impl ServeLimits {
    fn of(http: &crate::http::HttpConfig) -> ServeLimits {
        let header_list = u32::try_from(http.max_head).unwrap_or(u32::MAX);
        ServeLimits {
            header_timeout: http.header_timeout,
            http2: http.http2.then_some((http.http2_max_streams, header_list)),
        }
    }
}

/// A task's future.
pub(crate) type Task = Pin<Box<dyn Future<Output = ()>>>;

thread_local! {
    /// The runtime of the shard this thread runs (one per thread).
    static CURRENT: RefCell<Option<Rc<dyn Runtime>>> = const { RefCell::new(None) };
}

/// The runtime of the shard whose thread calls, if there is one.
pub(crate) fn current() -> Option<Rc<dyn Runtime>> {
    CURRENT.with(|c| c.borrow().clone())
}

struct ConnState<C> {
    conn: C,
    generation: u32,
    peer: SocketAddr,
    /// The task waiting to read, and to write.
    read: Option<Waker>,
    write: Option<Waker>,
    /// Its host slot's waker: the host drives the slot when woken.
    host: Waker,
    /// The task dropped its stream.
    released: bool,
    /// The last time bytes moved either way.
    last_io: Instant,
    /// Bytes another service read before this one took the connection
    /// over ([`AsyncService::adopt`]), and how many the task has read:
    /// its first reads take them.
    read_ahead: Vec<u8>,
    read_ahead_at: usize,
}

impl<C> ConnState<C> {
    fn wake_all(&mut self) {
        for waker in [self.read.take(), self.write.take()].into_iter().flatten() {
            waker.wake();
        }
    }
}

fn register(slot: &mut Option<Waker>, cx: &Context<'_>) {
    if !slot.as_ref().is_some_and(|w| w.will_wake(cx.waker())) {
        *slot = Some(cx.waker().clone());
    }
}

struct State<C> {
    now: Instant,
    conns: Vec<Option<ConnState<C>>>,
    generations: Vec<u32>,
    accepted: std::collections::VecDeque<(ConnId, SocketAddr)>,
    accept: Option<Waker>,
    draining: bool,
    drain_wakers: Vec<Waker>,
}

impl<C: Copy> State<C> {
    fn conn(&mut self, id: ConnId) -> Option<&mut ConnState<C>> {
        self.conns.get_mut(id.slot as usize)?.as_mut().filter(|c| c.generation == id.generation)
    }
}

/// The reactor's shared part (see the [module documentation](self)).
pub(crate) struct Core<X: Transport> {
    limits: ServeLimits,
    net: Rc<RefCell<X>>,
    state: RefCell<State<X::Conn>>,
    /// The server's tasks: the main one and those `rt::spawn` added.
    tasks: RefCell<JoinSet<()>>,
    panicked: Cell<u64>,
    scratch: RefCell<Box<[u8]>>,
}

fn gone() -> io::Error {
    io::Error::new(io::ErrorKind::NotConnected, "the connection is closed")
}

impl<X: Transport + 'static> Runtime for Core<X> {
    fn now(&self) -> Instant {
        self.state.borrow().now
    }

    fn poll_accept(&self, cx: &mut Context<'_>) -> Poll<io::Result<(ConnId, SocketAddr)>> {
        let mut state = self.state.borrow_mut();
        while let Some((id, peer)) = state.accepted.pop_front() {
            if state.conn(id).is_some() {
                return Poll::Ready(Ok((id, peer)));
            }
        }
        if state.draining {
            return Poll::Ready(Err(io::Error::new(io::ErrorKind::ConnectionAborted, "the server is shutting down")));
        }
        register(&mut state.accept, cx);
        Poll::Pending
    }

    fn poll_read(
        &self,
        id: ConnId,
        cx: &mut Context<'_>,
        want: usize,
        take: &mut dyn FnMut(&[u8]) -> usize,
    ) -> Poll<io::Result<usize>> {
        let mut state = self.state.borrow_mut();
        let now = state.now;
        let Some(c) = state.conn(id) else { return Poll::Ready(Err(gone())) };
        if c.read_ahead_at < c.read_ahead.len() {
            let ahead = &c.read_ahead[c.read_ahead_at..];
            let n = take(&ahead[..want.min(ahead.len())]);
            c.read_ahead_at += n;
            return Poll::Ready(Ok(n));
        }
        let mut scratch = self.scratch.borrow_mut();
        let want = want.min(scratch.len());
        match self.net.borrow_mut().recv_with(c.conn, &mut scratch[..want], take) {
            Ok(n) => {
                c.last_io = now;
                // The receive window may open: the loop says so.
                crate::runtime::kick();
                Poll::Ready(Ok(n))
            }
            Err(TransportError::WouldBlock) => {
                register(&mut c.read, cx);
                Poll::Pending
            }
            Err(TransportError::Failed) => Poll::Ready(Err(io::ErrorKind::ConnectionReset.into())),
        }
    }

    fn poll_write(&self, id: ConnId, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        self.poll_write_vectored(id, cx, &[io::IoSlice::new(data)])
    }

    fn poll_write_vectored(
        &self,
        id: ConnId,
        cx: &mut Context<'_>,
        data: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        let mut state = self.state.borrow_mut();
        let now = state.now;
        let Some(c) = state.conn(id) else { return Poll::Ready(Err(gone())) };
        if data.iter().all(|s| s.is_empty()) {
            return Poll::Ready(Ok(0));
        }
        match self.net.borrow_mut().send_vectored(c.conn, data) {
            Ok(n) => {
                c.last_io = now;
                crate::runtime::kick();
                Poll::Ready(Ok(n))
            }
            Err(TransportError::WouldBlock) => {
                register(&mut c.write, cx);
                Poll::Pending
            }
            Err(TransportError::Failed) => Poll::Ready(Err(io::ErrorKind::BrokenPipe.into())),
        }
    }

    fn shutdown(&self, id: ConnId) -> io::Result<()> {
        let mut state = self.state.borrow_mut();
        let c = state.conn(id).ok_or_else(gone)?;
        self.net.borrow_mut().shutdown(c.conn);
        crate::runtime::kick();
        Ok(())
    }

    fn release(&self, id: ConnId) {
        let mut state = self.state.borrow_mut();
        if let Some(c) = state.conn(id) {
            c.released = true;
            c.host.wake_by_ref();
        }
    }

    fn peer(&self, id: ConnId) -> Option<SocketAddr> {
        self.state.borrow_mut().conn(id).map(|c| c.peer)
    }

    fn is_secure(&self, id: ConnId) -> bool {
        let conn = self.state.borrow_mut().conn(id).map(|c| c.conn);
        conn.is_some_and(|conn| self.net.borrow().is_secure(conn))
    }

    fn spawn(&self, task: Task) {
        self.tasks.borrow_mut().spawn_local(task);
    }

    fn poll_draining(&self, cx: &mut Context<'_>) -> Poll<()> {
        let mut state = self.state.borrow_mut();
        if state.draining {
            return Poll::Ready(());
        }
        if !state.drain_wakers.iter().any(|w| w.will_wake(cx.waker())) {
            state.drain_wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }

    fn limits(&self) -> ServeLimits {
        self.limits
    }
}

/// What a shard's async application is: a function that makes its main
/// task, called once on the shard's thread.
pub type MainTask = Box<dyn FnOnce() -> Pin<Box<dyn Future<Output = ()>>>>;

/// A connection's session: its host slot.
#[derive(Clone, Copy, Debug, Default)]
pub struct AsyncSession {
    slot: u32,
}

/// The async runtime as a [host](crate::host) service: admitted
/// connections go to the shard's listener, events wake the tasks waiting
/// on their connection, a stream the task drops is lingered over and
/// closed, and the executor runs on every turn of the loop.
pub struct AsyncService<X: Transport + 'static> {
    core: Rc<Core<X>>,
    main: Option<MainTask>,
    idle_timeout: Duration,
}

impl<X: Transport + 'static> AsyncService<X> {
    /// The runtime over `net` (the same transport the host is given),
    /// starting with the task `main` makes, on the shard's tokio runtime
    /// (made on the shard's thread, which it becomes the runtime of). A
    /// connection with no bytes moved for `http.idle_timeout` is reset;
    /// hyper connections served through [`serve_http1`](super::serve_http1)
    /// time out a request head after `http.header_timeout`.
    pub fn new(net: &Shared<X>, http: &crate::http::HttpConfig, main: MainTask) -> Self {
        let core = Rc::new(Core {
            limits: ServeLimits::of(http),
            net: Rc::clone(&net.0),
            state: RefCell::new(State {
                now: Instant::ZERO,
                conns: Vec::new(),
                generations: Vec::new(),
                accepted: std::collections::VecDeque::new(),
                accept: None,
                draining: false,
                drain_wakers: Vec::new(),
            }),
            tasks: RefCell::new(JoinSet::new()),
            panicked: Cell::new(0),
            scratch: RefCell::new(vec![0; 64 * 1024].into_boxed_slice()),
        });
        CURRENT.with(|c| *c.borrow_mut() = Some(Rc::clone(&core) as Rc<dyn Runtime>));
        AsyncService { core, main: Some(main), idle_timeout: http.idle_timeout.into() }
    }

    /// The server's tasks alive now (the main one and those it spawned
    /// through [`fairway::rt::spawn`](super::spawn)).
    #[must_use]
    pub fn tasks(&self) -> usize {
        self.core.tasks.borrow().len()
    }

    /// Tasks that panicked (each ended there; the shard went on).
    #[must_use]
    pub fn panicked(&self) -> u64 {
        self.core.panicked.get()
    }

    /// Takes over a connection another service of the host opened (an
    /// HTTP/1 connection that turned out to speak HTTP/2), into the
    /// session `s`: the tasks accept it as a new one, and its stream reads
    /// `read_ahead` (what that service had read of it) first.
    pub fn adopt(
        &mut self,
        s: &mut AsyncSession,
        cx: &mut Cx<'_, Shared<X>>,
        peer: SocketAddr,
        read_ahead: &[u8],
    ) -> Next {
        s.slot = cx.slot;
        let mut state = self.core.state.borrow_mut();
        let i = cx.slot as usize;
        if i >= state.conns.len() {
            state.conns.resize_with(i + 1, || None);
            state.generations.resize(i + 1, 0);
        }
        state.generations[i] = state.generations[i].wrapping_add(1);
        let generation = state.generations[i];
        state.conns[i] = Some(ConnState {
            conn: cx.conn,
            generation,
            peer,
            read: None,
            write: None,
            host: cx.waker.clone(),
            released: false,
            last_io: cx.now,
            read_ahead: read_ahead.to_vec(),
            read_ahead_at: 0,
        });
        state.accepted.push_back((ConnId { slot: cx.slot, generation }, peer));
        if let Some(waker) = state.accept.take() {
            waker.wake();
        }
        Next::Keep
    }

    /// Takes the time, starts the main task on the first turn, and reaps
    /// the tasks that ended (counting those that panicked).
    fn run(&mut self, now: Instant) {
        self.core.state.borrow_mut().now = now;
        if let Some(main) = self.main.take() {
            self.core.spawn(main());
        }
        let mut tasks = self.core.tasks.borrow_mut();
        while let Some(ended) = tasks.try_join_next() {
            if ended.is_err_and(|e| e.is_panic()) {
                self.core.panicked.set(self.core.panicked.get() + 1);
                tracing::error!("a task panicked; it ended there and the shard goes on");
            }
        }
    }
}

impl<X: Transport + 'static> Service<Shared<X>> for AsyncService<X> {
    type Session = AsyncSession;

    fn session(&mut self) -> AsyncSession {
        AsyncSession::default()
    }

    fn open(&mut self, s: &mut AsyncSession, cx: &mut Cx<'_, Shared<X>>, peer: SocketAddr) -> Next {
        self.adopt(s, cx, peer, &[])
    }

    fn drive(&mut self, s: &mut AsyncSession, cx: &mut Cx<'_, Shared<X>>) -> Next {
        let mut state = self.core.state.borrow_mut();
        let Some(c) = state.conns.get_mut(s.slot as usize).and_then(Option::as_mut) else { return Next::Abort };
        if c.released {
            return Next::Close;
        }
        c.last_io = cx.now;
        c.wake_all();
        Next::Keep
    }

    fn timeout(&mut self, s: &mut AsyncSession, cx: &mut Cx<'_, Shared<X>>) -> Next {
        let state = self.core.state.borrow();
        match state.conns.get(s.slot as usize).and_then(Option::as_ref) {
            Some(c) if c.released => Next::Close,
            Some(c) if cx.now < c.last_io + self.idle_timeout => Next::Keep,
            _ => Next::Abort,
        }
    }

    fn deadline(&self, s: &AsyncSession) -> Option<Instant> {
        let state = self.core.state.borrow();
        state.conns.get(s.slot as usize).and_then(Option::as_ref).map(|c| c.last_io + self.idle_timeout)
    }

    fn is_idle(&self, s: &AsyncSession) -> bool {
        let state = self.core.state.borrow();
        state.conns.get(s.slot as usize).and_then(Option::as_ref).is_none_or(|c| c.released)
    }

    fn closed(&mut self, s: &mut AsyncSession) {
        let mut state = self.core.state.borrow_mut();
        if let Some(mut c) = state.conns.get_mut(s.slot as usize).and_then(Option::take) {
            // The task's next call fails.
            c.wake_all();
        }
    }

    fn poll(&mut self, _: &mut Shared<X>, _: &mut ShardSite, now: Instant) {
        self.run(now);
    }

    fn poll_timeout(&self) -> Option<Instant> {
        // The first turn starts the main task; after that, tasks that
        // want the loop kick it.
        self.main.is_some().then_some(Instant::ZERO)
    }

    fn begin_drain(&mut self) {
        let mut state = self.core.state.borrow_mut();
        state.draining = true;
        for waker in std::mem::take(&mut state.drain_wakers).into_iter().chain(state.accept.take()) {
            waker.wake();
        }
    }

    fn busy(&self) -> bool {
        !self.core.tasks.borrow().is_empty()
    }

    fn observe(&self, metrics: &mut ShardMetrics) {
        metrics.observe_tasks(self.tasks() as u64, self.panicked());
    }

    fn end(&mut self) {
        // Aborted tasks are dropped when the runtime next polls them; the
        // set forgets them now, so the shard is not kept waiting.
        let mut tasks = self.core.tasks.borrow_mut();
        tasks.abort_all();
        tasks.detach_all();
    }
}

impl<X: Transport + 'static> Drop for AsyncService<X> {
    fn drop(&mut self) {
        self.end();
        CURRENT.with(|c| {
            let mut current = c.borrow_mut();
            if current.as_ref().is_some_and(|rt| std::ptr::addr_eq(Rc::as_ptr(rt), Rc::as_ptr(&self.core))) {
                current.take();
            }
        });
    }
}
