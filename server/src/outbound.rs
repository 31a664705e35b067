//! Kernel sockets a shard opens itself (the reverse proxy's upstream
//! connections), driven by the shard's own loop like its clients'.
//!
//! Each shard that may open outbound connections has one [`Outbound`]: an
//! epoll instance (mio's [`Poll`]) of its own. The shard's loop sleeps on
//! that epoll's descriptor beside its queue's (the userspace backends'
//! [`Steered::also_wake_on`](fairway_nic::steering::Steered::also_wake_on),
//! the kernel backend's own poll, where it is registered as one more
//! source), and each turn the host calls [`Outbound::dispatch`], which
//! takes the sockets' readiness without blocking and wakes the exchange
//! watching each ready socket ([`Outbound::watch`]). That exchange then
//! reads and writes until `WouldBlock`, as the host does with its own
//! connections: registrations are edge-triggered.
//!
//! On the userspace backends, an upstream reached through the NIC is a
//! connection of the shard's own stack, not a kernel socket: a **link**.
//! The service cannot call the stack (the host holds it while it drives a
//! connection), so a link is a pair of buffers here that the host fills and
//! empties for it:
//!
//! ```text
//! proxy ── connect_link / write ──▶ Outbound (link: out, input) ◀── host: Transport::connect,
//!       ◀── read / link_state ─────                                   send, recv on its events
//! ```
//!
//! The service asks for a link ([`Outbound::connect_link`]) and writes to
//! and reads from it as from a non-blocking socket; the host, each turn
//! and on the connection's events, opens what was asked
//! ([`Outbound::take_connect`]), closes what was let go
//! ([`Outbound::take_close`]) and moves the bytes ([`Outbound::pump`]),
//! waking the link's watcher when something changed. A byte costs one copy
//! more than on a kernel socket (ring to link buffer), which buys a service
//! that never holds the stack.
//!
//! Nothing here allocates once the token table has grown to the most
//! sockets open at once: a waker is an `Arc`'s clone, a token is reused,
//! and so are a link's buffers.

use std::io;
use std::net::SocketAddr;
use std::os::fd::{AsRawFd, RawFd};
use std::task::Waker;

use mio::{Events, Interest, Poll, Token};

use crate::readiness::{Readiness, Side};

/// How many readiness events one [`Outbound::dispatch`] takes.
const EVENTS: usize = 256;

/// Whether `addr` is on the loopback (IPv4's, IPv6's, or IPv4's mapped),
/// which only the kernel reaches.
#[must_use]
pub fn is_loopback(addr: SocketAddr) -> bool {
    match addr {
        SocketAddr::V4(a) => a.ip().is_loopback(),
        SocketAddr::V6(a) => a.ip().is_loopback() || a.ip().to_ipv4_mapped().is_some_and(|v4| v4.is_loopback()),
    }
}

/// What a link holds of its connection's input until the service reads it.
pub const LINK_INPUT: usize = 64 * 1024;

/// What a link holds of output the connection has not taken yet.
pub const LINK_OUTPUT: usize = 64 * 1024;

/// One shard's outbound sockets: their epoll, and who waits on each.
pub struct Outbound {
    poll: Poll,
    events: Events,
    /// By token: the socket's watcher and what its events said while it
    /// had none.
    tokens: Vec<Entry>,
    /// Tokens free for reuse.
    free: Vec<usize>,
    /// Kernel sockets registered.
    sockets: usize,
    /// Whether the host opens links: connections of its own transport.
    links_on: bool,
    /// By token: its link's state and buffers, kept for the token's next
    /// link once made.
    links: Vec<Option<Link>>,
    /// Links asked for and not yet opened by the host.
    connects: Vec<Token>,
    /// Links let go and not yet closed by the host.
    closes: Vec<Token>,
    /// Links with bytes to move (output written, input room freed).
    dirty: Vec<Token>,
}

#[derive(Default)]
struct Entry {
    registered: bool,
    /// A link, not a kernel socket.
    link: bool,
    watcher: Option<Waker>,
    /// The peer closed or the socket failed while nobody watched (an idle
    /// pooled connection the upstream hung up).
    hung_up: bool,
    /// A kernel socket's: whether a read or write may find work.
    readiness: Readiness,
}

/// Where a link is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum LinkState {
    /// Asked for; the host has not opened it yet.
    Requested,
    /// Opened; not yet established.
    Connecting,
    Open,
    Failed(io::ErrorKind),
    /// Let go; the host closes it at its next turn.
    Closing,
}

/// A connection of the host's own transport, as the service sees it: what
/// came in (`input[taken..filled]`) and what goes out (`out[sent..]`).
struct Link {
    to: SocketAddr,
    state: LinkState,
    input: Box<[u8]>,
    filled: usize,
    taken: usize,
    /// The peer's FIN came after the input's bytes.
    eof: bool,
    /// The input filled up before the transport ran dry: pump again once
    /// the service has read some.
    more: bool,
    out: Vec<u8>,
    sent: usize,
    /// On the dirty list already.
    dirty: bool,
}

impl std::fmt::Debug for Outbound {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outbound").field("sockets", &self.open()).finish_non_exhaustive()
    }
}

impl Outbound {
    /// A new epoll for one shard's outbound sockets.
    ///
    /// # Errors
    ///
    /// The epoll instance cannot be made (out of descriptors).
    pub fn new() -> io::Result<Outbound> {
        Ok(Outbound {
            poll: Poll::new()?,
            events: Events::with_capacity(EVENTS),
            tokens: Vec::new(),
            free: Vec::new(),
            sockets: 0,
            links_on: false,
            links: Vec::new(),
            connects: Vec::new(),
            closes: Vec::new(),
            dirty: Vec::new(),
        })
    }

    /// The same, whose host also opens links (the userspace backends: an
    /// upstream beyond this host is reached through the NIC, by the shard's
    /// own stack).
    #[must_use]
    pub fn with_links(mut self) -> Outbound {
        self.links_on = true;
        self
    }

    /// Whether a connection to `to` is a link (through the NIC, by the
    /// shard's stack) rather than a kernel socket: on a host that opens
    /// links, every address but the loopback's, which only the kernel
    /// reaches.
    #[must_use]
    pub fn through_nic(&self, to: SocketAddr) -> bool {
        self.links_on && !is_loopback(to)
    }

    /// The descriptor the shard's loop sleeps on: readable while a socket
    /// has readiness not yet dispatched.
    #[must_use]
    pub fn fd(&self) -> RawFd {
        self.poll.as_raw_fd()
    }

    /// How many sockets and links are open.
    #[must_use]
    pub fn open(&self) -> usize {
        self.tokens.iter().filter(|e| e.registered).count()
    }

    /// A free token.
    fn token(&mut self) -> usize {
        self.free.pop().unwrap_or_else(|| {
            self.tokens.push(Entry::default());
            self.tokens.len() - 1
        })
    }

    /// Registers `socket` for readable and writable readiness (edge
    /// triggered), with no watcher yet.
    ///
    /// # Errors
    ///
    /// What `epoll_ctl` reported.
    pub fn register(&mut self, socket: &mut impl mio::event::Source) -> io::Result<Token> {
        let i = self.token();
        if let Err(e) = self.poll.registry().register(socket, Token(i), Interest::READABLE | Interest::WRITABLE) {
            self.free.push(i);
            return Err(e);
        }
        self.tokens[i] =
            Entry { registered: true, link: false, watcher: None, hung_up: false, readiness: Readiness::FRESH };
        self.sockets += 1;
        Ok(Token(i))
    }

    /// Forgets `socket` (before it is closed); its token may be reused.
    pub fn deregister(&mut self, socket: &mut impl mio::event::Source, token: Token) {
        let _ = self.poll.registry().deregister(socket);
        if let Some(entry) = self.tokens.get_mut(token.0).filter(|e| e.registered && !e.link) {
            *entry = Entry::default();
            self.free.push(token.0);
            self.sockets -= 1;
        }
    }

    /// Frees the token of a socket that was closed without
    /// [`deregister`](Self::deregister) (closing it took it out of the
    /// epoll); a link's is [closed](Self::close_link).
    pub fn forget(&mut self, token: Token) {
        match self.tokens.get_mut(token.0).filter(|e| e.registered) {
            Some(entry) if entry.link => self.close_link(token),
            Some(entry) => {
                *entry = Entry::default();
                self.free.push(token.0);
                self.sockets -= 1;
            }
            None => {}
        }
    }

    /// Wakes `waker` at the socket's next readiness (replacing any other
    /// watcher).
    pub fn watch(&mut self, token: Token, waker: &Waker) {
        if let Some(entry) = self.tokens.get_mut(token.0).filter(|e| e.registered) {
            match &mut entry.watcher {
                Some(w) if w.will_wake(waker) => {}
                slot => *slot = Some(waker.clone()),
            }
        }
    }

    /// Nobody waits on the socket any more (it goes back to a pool).
    pub fn unwatch(&mut self, token: Token) {
        if let Some(entry) = self.tokens.get_mut(token.0) {
            entry.watcher = None;
            entry.hung_up = false;
        }
    }

    /// Whether the socket's peer closed it, it failed, or input arrived,
    /// while nobody watched it: an idle connection not to use again.
    #[must_use]
    pub fn hung_up(&self, token: Token) -> bool {
        self.tokens.get(token.0).is_some_and(|e| e.hung_up)
    }

    /// Takes the readiness the sockets have, without blocking, and wakes
    /// their watchers: how many events there were. Cheap when no socket
    /// is registered (no system call).
    pub fn dispatch(&mut self) -> usize {
        if self.sockets == 0 {
            return 0;
        }
        if self.poll.poll(&mut self.events, Some(std::time::Duration::ZERO)).is_err() {
            return 0;
        }
        let mut count = 0;
        for event in &self.events {
            count += 1;
            let Some(entry) = self.tokens.get_mut(event.token().0).filter(|e| e.registered) else { continue };
            entry.readiness.note(event);
            match &entry.watcher {
                Some(waker) => waker.wake_by_ref(),
                // Input on an idle connection is as bad as a close: bytes
                // no request asked for.
                None => entry.hung_up |= event.is_readable() || event.is_read_closed() || event.is_error(),
            }
        }
        count
    }

    /// Reads from the kernel socket registered as `token` into `buf`,
    /// with no syscall while the socket is known to be drained (it said
    /// `WouldBlock`, or a read returned less than asked, and no event came
    /// since): see [`Readiness`].
    ///
    /// # Errors
    ///
    /// `WouldBlock` when it is drained; what the read returned.
    pub fn read_socket(&mut self, token: Token, socket: &mut impl io::Read, buf: &mut [u8]) -> io::Result<usize> {
        let want = buf.len();
        match self.tokens.get_mut(token.0).filter(|e| e.registered && !e.link) {
            Some(entry) => entry.readiness.io(Side::Read, want, || socket.read(buf)),
            None => socket.read(buf),
        }
    }

    /// Writes `data` to the kernel socket registered as `token`, with no
    /// syscall while its buffer is known to be full.
    ///
    /// # Errors
    ///
    /// `WouldBlock` when it is full; what the write returned.
    pub fn write_socket(&mut self, token: Token, socket: &mut impl io::Write, data: &[u8]) -> io::Result<usize> {
        match self.tokens.get_mut(token.0).filter(|e| e.registered && !e.link) {
            Some(entry) => entry.readiness.io(Side::Write, data.len(), || socket.write(data)),
            None => socket.write(data),
        }
    }

    /// Asks the host for a link to `to`; it opens it at its next turn.
    /// Reads and writes say `WouldBlock` until it is established, and
    /// [`link_state`](Self::link_state) says when it is, or why not.
    ///
    /// # Errors
    ///
    /// `Unsupported` where the host opens no links.
    pub fn connect_link(&mut self, to: SocketAddr) -> io::Result<Token> {
        if !self.links_on {
            return Err(io::ErrorKind::Unsupported.into());
        }
        let i = self.token();
        self.tokens[i] = Entry { registered: true, link: true, ..Entry::default() };
        if i >= self.links.len() {
            self.links.resize_with(i + 1, || None);
        }
        let link = self.links[i].get_or_insert_with(|| Link {
            to,
            state: LinkState::Requested,
            input: vec![0; LINK_INPUT].into_boxed_slice(),
            filled: 0,
            taken: 0,
            eof: false,
            more: false,
            out: Vec::with_capacity(LINK_OUTPUT),
            sent: 0,
            dirty: false,
        });
        (link.to, link.state, link.eof, link.more, link.dirty) = (to, LinkState::Requested, false, false, false);
        (link.filled, link.taken, link.sent) = (0, 0, 0);
        link.out.clear();
        self.connects.push(Token(i));
        Ok(Token(i))
    }

    /// The link of `token`, while it is one.
    fn link_mut(&mut self, token: Token) -> Option<&mut Link> {
        self.tokens.get(token.0).filter(|e| e.registered && e.link)?;
        self.links.get_mut(token.0)?.as_mut()
    }

    /// Whether the link is established (`Ok(false)` while it is being
    /// opened), or why it failed.
    ///
    /// # Errors
    ///
    /// Why it could not be opened or failed since; `NotConnected` for a
    /// token that is no open link.
    pub fn link_state(&self, token: Token) -> Result<bool, io::ErrorKind> {
        let link =
            self.tokens.get(token.0).filter(|e| e.registered && e.link).and_then(|_| self.links[token.0].as_ref());
        match link.map(|l| l.state) {
            Some(LinkState::Requested | LinkState::Connecting) => Ok(false),
            Some(LinkState::Open) => Ok(true),
            Some(LinkState::Failed(kind)) => Err(kind),
            Some(LinkState::Closing) | None => Err(io::ErrorKind::NotConnected),
        }
    }

    /// Reads what the link received into `buf`, as a non-blocking socket
    /// does: `Ok(0)` at the peer's FIN, after every byte before it.
    ///
    /// # Errors
    ///
    /// `WouldBlock` when nothing is there yet; why the link failed.
    pub fn read(&mut self, token: Token, buf: &mut [u8]) -> io::Result<usize> {
        let Some(link) = self.link_mut(token) else { return Err(io::ErrorKind::NotConnected.into()) };
        if link.taken < link.filled {
            let n = buf.len().min(link.filled - link.taken);
            buf[..n].copy_from_slice(&link.input[link.taken..link.taken + n]);
            link.taken += n;
            if link.more && !std::mem::replace(&mut link.dirty, true) {
                self.dirty.push(token);
            }
            return Ok(n);
        }
        match link.state {
            _ if link.eof => Ok(0),
            LinkState::Failed(kind) => Err(kind.into()),
            LinkState::Closing => Err(io::ErrorKind::NotConnected.into()),
            _ => Err(io::ErrorKind::WouldBlock.into()),
        }
    }

    /// Queues `data` for the link, as much as it has room for
    /// ([`LINK_OUTPUT`]); the host sends it at its next turn.
    ///
    /// # Errors
    ///
    /// `WouldBlock` when it has no room; why the link failed.
    pub fn write(&mut self, token: Token, data: &[u8]) -> io::Result<usize> {
        let Some(link) = self.link_mut(token) else { return Err(io::ErrorKind::NotConnected.into()) };
        match link.state {
            LinkState::Failed(kind) => return Err(kind.into()),
            LinkState::Closing => return Err(io::ErrorKind::NotConnected.into()),
            _ => {}
        }
        if link.sent > 0 {
            link.out.drain(..link.sent);
            link.sent = 0;
        }
        let n = data.len().min(LINK_OUTPUT - link.out.len());
        if n == 0 {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        link.out.extend_from_slice(&data[..n]);
        if link.state == LinkState::Open && !std::mem::replace(&mut link.dirty, true) {
            self.dirty.push(token);
        }
        Ok(n)
    }

    /// Lets the link go: the host closes its connection (a FIN after
    /// what was queued) at its next turn, and the token is free then.
    pub fn close_link(&mut self, token: Token) {
        let Some(link) = self.link_mut(token) else { return };
        if link.state != LinkState::Closing {
            link.state = LinkState::Closing;
            self.closes.push(token);
        }
        let entry = &mut self.tokens[token.0];
        (entry.watcher, entry.hung_up) = (None, false);
    }

    /// Lets every link go (a shard that has drained).
    pub fn close_links(&mut self) {
        for i in 0..self.tokens.len() {
            if self.tokens[i].registered && self.tokens[i].link {
                self.close_link(Token(i));
            }
        }
    }

    /// Whether the host has links to open, close or pump.
    #[must_use]
    pub fn link_work(&self) -> bool {
        !(self.connects.is_empty() && self.closes.is_empty() && self.dirty.is_empty())
    }

    /// For the host: the next link to open, and where to.
    pub fn take_connect(&mut self) -> Option<(Token, SocketAddr)> {
        while let Some(token) = self.connects.pop() {
            if let Some(link) = self.link_mut(token).filter(|l| l.state == LinkState::Requested) {
                link.state = LinkState::Connecting;
                return Some((token, link.to));
            }
        }
        None
    }

    /// For the host: the next link to close. Its token is free at once, so
    /// the host forgets it before it opens any link.
    pub fn take_close(&mut self) -> Option<Token> {
        let token = self.closes.pop()?;
        if let Some(entry) = self.tokens.get_mut(token.0).filter(|e| e.registered && e.link) {
            *entry = Entry::default();
            self.free.push(token.0);
        }
        Some(token)
    }

    /// For the host: the next link with bytes to move.
    pub fn take_dirty(&mut self) -> Option<Token> {
        let token = self.dirty.pop()?;
        if let Some(link) = self.link_mut(token) {
            link.dirty = false;
        }
        Some(token)
    }

    /// For the host: the link could not be opened, or failed.
    pub fn link_failed(&mut self, token: Token, kind: io::ErrorKind) {
        let Some(link) = self.link_mut(token) else { return };
        if link.state != LinkState::Closing {
            link.state = LinkState::Failed(kind);
            self.notify(token, true);
        }
    }

    /// Wakes the link's watcher; with nobody watching, input or a failure
    /// (`bad`) marks it hung up, as [`dispatch`](Self::dispatch) does.
    fn notify(&mut self, token: Token, bad: bool) {
        let entry = &mut self.tokens[token.0];
        match &entry.watcher {
            Some(waker) => waker.wake_by_ref(),
            None => entry.hung_up |= bad,
        }
    }

    /// For the host, at the link's connection's events and when it is
    /// dirty: marks it established, sends what it queued and receives what
    /// fits, through `io`, the connection as the host lends it
    /// ([`crate::host::ConnIo`]: non-blocking, `WouldBlock` when it cannot
    /// move any, `Ok(0)` from `read` at the peer's FIN). `Err` when the
    /// connection failed (the link says so from then on): the host closes
    /// it.
    ///
    /// # Errors
    ///
    /// Why the connection failed.
    pub fn pump(&mut self, token: Token, io: &mut (impl io::Read + io::Write)) -> Result<(), io::ErrorKind> {
        let Some(link) = self.link_mut(token) else { return Ok(()) };
        let mut news = false;
        match link.state {
            LinkState::Connecting => {
                link.state = LinkState::Open;
                news = true;
            }
            LinkState::Open => {}
            _ => return Ok(()),
        }
        let mut failure = None;
        while link.sent < link.out.len() {
            match io.write(&link.out[link.sent..]) {
                Ok(0) => break,
                Ok(n) => {
                    link.sent += n;
                    news = true;
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => {
                    failure = Some(e.kind());
                    break;
                }
            }
        }
        if link.sent == link.out.len() {
            link.out.clear();
            link.sent = 0;
        }
        if link.taken > 0 {
            link.input.copy_within(link.taken..link.filled, 0);
            (link.filled, link.taken) = (link.filled - link.taken, 0);
        }
        let mut input = false;
        while failure.is_none() && !link.eof && link.filled < link.input.len() {
            match io.read(&mut link.input[link.filled..]) {
                Ok(0) => link.eof = true,
                Ok(n) => link.filled += n,
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) => failure = Some(e.kind()),
            }
            input = failure.is_none();
        }
        link.more = !link.eof && link.filled == link.input.len();
        if let Some(kind) = failure {
            link.state = LinkState::Failed(kind);
        }
        if news || input || failure.is_some() {
            self.notify(token, input || failure.is_some());
        }
        failure.map_or(Ok(()), Err)
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::sync::Arc;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::task::Wake;

    use super::*;

    struct Count(AtomicUsize);

    impl Wake for Count {
        fn wake(self: Arc<Self>) {
            self.0.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn pair() -> (mio::net::TcpStream, std::net::TcpStream) {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let client = mio::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
        let (server, _) = listener.accept().unwrap();
        (client, server)
    }

    fn settle(out: &mut Outbound) -> usize {
        // The loopback delivers at once, but the event may take a moment.
        for _ in 0..100 {
            let n = out.dispatch();
            if n > 0 {
                return n;
            }
            std::thread::sleep(std::time::Duration::from_millis(2));
        }
        0
    }

    #[test]
    fn readiness_wakes_the_watcher_and_a_hang_up_is_kept_for_the_pool() {
        let mut out = Outbound::new().unwrap();
        assert_eq!(out.dispatch(), 0, "nothing registered: nothing to take");
        let (mut client, mut server) = pair();
        let token = out.register(&mut client).unwrap();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        let waker = Waker::from(Arc::clone(&count));
        out.watch(token, &waker);
        assert!(settle(&mut out) > 0, "connected: writable");
        assert_eq!(count.0.load(Ordering::Relaxed), 1);

        server.write_all(b"hi").unwrap();
        assert!(settle(&mut out) > 0);
        assert_eq!(count.0.load(Ordering::Relaxed), 2, "readable wakes it again");
        let mut buf = [0u8; 8];
        assert_eq!(client.read(&mut buf).unwrap(), 2);

        out.unwatch(token);
        assert!(!out.hung_up(token));
        drop(server);
        assert!(settle(&mut out) > 0);
        assert_eq!(count.0.load(Ordering::Relaxed), 2, "unwatched: nobody is woken");
        assert!(out.hung_up(token), "the idle socket's hang-up is remembered");

        out.deregister(&mut client, token);
        assert_eq!(out.open(), 0);
        let (mut again, _server) = pair();
        assert_eq!(out.register(&mut again).unwrap(), token, "the token is reused");
        assert!(!out.hung_up(token), "and starts clean");
    }

    #[test]
    fn the_descriptor_wakes_an_outer_poll_while_readiness_waits() {
        // As the kernel backend's loop sleeps on it: registered in its poll.
        let mut out = Outbound::new().unwrap();
        let (mut client, _server) = pair();
        let _token = out.register(&mut client).unwrap();
        let mut outer = Poll::new().unwrap();
        let fd = out.fd();
        outer.registry().register(&mut mio::unix::SourceFd(&fd), Token(7), Interest::READABLE).unwrap();
        let mut events = Events::with_capacity(4);
        outer.poll(&mut events, Some(std::time::Duration::from_secs(1))).unwrap();
        assert_eq!(events.iter().map(|e| e.token()).collect::<Vec<_>>(), [Token(7)]);
        assert!(out.dispatch() > 0);
    }

    /// A connection as a link's host lends it: `input` to receive (then a
    /// FIN when `fin`), and room for `room` bytes of output.
    struct Fake {
        input: Vec<u8>,
        fin: bool,
        room: usize,
        sent: Vec<u8>,
        fail: Option<io::ErrorKind>,
    }

    impl io::Read for Fake {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if let Some(kind) = self.fail {
                return Err(kind.into());
            }
            let n = buf.len().min(self.input.len());
            if n == 0 {
                return if self.fin { Ok(0) } else { Err(io::ErrorKind::WouldBlock.into()) };
            }
            buf[..n].copy_from_slice(&self.input[..n]);
            self.input.drain(..n);
            Ok(n)
        }
    }

    impl io::Write for Fake {
        fn write(&mut self, data: &[u8]) -> io::Result<usize> {
            if let Some(kind) = self.fail {
                return Err(kind.into());
            }
            let n = data.len().min(self.room);
            if n == 0 {
                return Err(io::ErrorKind::WouldBlock.into());
            }
            self.room -= n;
            self.sent.extend_from_slice(&data[..n]);
            Ok(n)
        }

        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn a_link_queues_until_open_holds_what_it_can_and_asks_to_be_pumped_again() {
        let to: SocketAddr = "10.0.0.2:8000".parse().unwrap();
        assert!(Outbound::new().unwrap().connect_link(to).is_err(), "a host without links opens none");
        let mut out = Outbound::new().unwrap().with_links();
        assert!(out.through_nic(to) && !out.through_nic("127.0.0.1:80".parse().unwrap()));
        let token = out.connect_link(to).unwrap();
        let count = Arc::new(Count(AtomicUsize::new(0)));
        out.watch(token, &Waker::from(Arc::clone(&count)));
        assert_eq!(out.link_state(token), Ok(false));
        assert_eq!(out.write(token, b"GET / HTTP/1.1\r\n\r\n").unwrap(), 18);
        assert!(out.take_dirty().is_none(), "nothing to pump before it is open");
        assert_eq!(out.take_connect(), Some((token, to)));
        assert_eq!(out.take_connect(), None);

        // Established: the request goes, and the input fills the link.
        let mut conn =
            Fake { input: vec![7; LINK_INPUT + 1000], fin: true, room: 1 << 20, sent: Vec::new(), fail: None };
        out.pump(token, &mut conn).unwrap();
        assert_eq!((out.link_state(token), conn.sent.len()), (Ok(true), 18));
        assert_eq!(count.0.load(Ordering::Relaxed), 1, "the watcher is woken");
        assert_eq!(conn.input.len(), 1000, "the link holds LINK_INPUT");
        let mut buf = vec![0; 4096];
        assert_eq!(out.read(token, &mut buf).unwrap(), 4096);
        assert_eq!(out.take_dirty(), Some(token), "room freed with more waiting: pump again");
        assert_eq!(out.take_dirty(), None);
        out.pump(token, &mut conn).unwrap();
        let mut total = 4096;
        loop {
            match out.read(token, &mut buf) {
                Ok(0) => break,
                Ok(n) => total += n,
                Err(e) => panic!("{e} after {total}"),
            }
            while let Some(t) = out.take_dirty() {
                out.pump(t, &mut conn).unwrap();
            }
        }
        assert_eq!(total, LINK_INPUT + 1000, "every byte, then the FIN");

        // Output beyond its room waits; a failure is told, and then read.
        let big = vec![1; LINK_OUTPUT + 10];
        assert_eq!(out.write(token, &big).unwrap(), LINK_OUTPUT);
        assert_eq!(out.write(token, b"x").unwrap_err().kind(), io::ErrorKind::WouldBlock);
        assert_eq!(out.take_dirty(), Some(token));
        conn.fail = Some(io::ErrorKind::ConnectionReset);
        assert_eq!(out.pump(token, &mut conn), Err(io::ErrorKind::ConnectionReset));
        assert_eq!(out.link_state(token), Err(io::ErrorKind::ConnectionReset));
        assert_eq!(out.write(token, b"x").unwrap_err().kind(), io::ErrorKind::ConnectionReset);

        // Let go: the host closes it, and the token serves the next link,
        // which starts clean.
        out.close_link(token);
        assert_eq!(out.take_close(), Some(token));
        let again = out.connect_link(to).unwrap();
        assert_eq!(again, token);
        assert_eq!(out.link_state(again), Ok(false));
        assert_eq!(out.read(again, &mut buf).unwrap_err().kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    fn an_idle_link_that_hears_from_its_peer_is_hung_up() {
        let mut out = Outbound::new().unwrap().with_links();
        let token = out.connect_link("10.0.0.2:8000".parse().unwrap()).unwrap();
        let _ = out.take_connect();
        let mut conn = Fake { input: Vec::new(), fin: false, room: 100, sent: Vec::new(), fail: None };
        out.pump(token, &mut conn).unwrap();
        assert!(!out.hung_up(token), "established, unwatched: not hung up");
        conn.fin = true;
        out.pump(token, &mut conn).unwrap();
        assert!(out.hung_up(token), "its FIN while pooled");
        out.forget(token);
        assert_eq!(out.take_close(), Some(token), "forgetting a link closes it");
    }
}
