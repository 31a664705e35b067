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
//! Nothing here allocates once the token table has grown to the most
//! sockets open at once: a waker is an `Arc`'s clone, a token is reused.

use std::io;
use std::os::fd::{AsRawFd, RawFd};
use std::task::Waker;

use mio::{Events, Interest, Poll, Token};

/// How many readiness events one [`Outbound::dispatch`] takes.
const EVENTS: usize = 256;

/// One shard's outbound sockets: their epoll, and who waits on each.
pub struct Outbound {
    poll: Poll,
    events: Events,
    /// By token: the socket's watcher and what its events said while it
    /// had none.
    tokens: Vec<Entry>,
    /// Tokens free for reuse.
    free: Vec<usize>,
}

#[derive(Default)]
struct Entry {
    registered: bool,
    watcher: Option<Waker>,
    /// The peer closed or the socket failed while nobody watched (an idle
    /// pooled connection the upstream hung up).
    hung_up: bool,
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
        Ok(Outbound { poll: Poll::new()?, events: Events::with_capacity(EVENTS), tokens: Vec::new(), free: Vec::new() })
    }

    /// The descriptor the shard's loop sleeps on: readable while a socket
    /// has readiness not yet dispatched.
    #[must_use]
    pub fn fd(&self) -> RawFd {
        self.poll.as_raw_fd()
    }

    /// How many sockets are registered.
    #[must_use]
    pub fn open(&self) -> usize {
        self.tokens.iter().filter(|e| e.registered).count()
    }

    /// Registers `socket` for readable and writable readiness (edge
    /// triggered), with no watcher yet.
    ///
    /// # Errors
    ///
    /// What `epoll_ctl` reported.
    pub fn register(&mut self, socket: &mut impl mio::event::Source) -> io::Result<Token> {
        let i = self.free.pop().unwrap_or_else(|| {
            self.tokens.push(Entry::default());
            self.tokens.len() - 1
        });
        if let Err(e) = self.poll.registry().register(socket, Token(i), Interest::READABLE | Interest::WRITABLE) {
            self.free.push(i);
            return Err(e);
        }
        self.tokens[i] = Entry { registered: true, watcher: None, hung_up: false };
        Ok(Token(i))
    }

    /// Forgets `socket` (before it is closed); its token may be reused.
    pub fn deregister(&mut self, socket: &mut impl mio::event::Source, token: Token) {
        let _ = self.poll.registry().deregister(socket);
        if let Some(entry) = self.tokens.get_mut(token.0).filter(|e| e.registered) {
            *entry = Entry::default();
            self.free.push(token.0);
        }
    }

    /// Frees the token of a socket that was closed without
    /// [`deregister`](Self::deregister) (closing it took it out of the
    /// epoll).
    pub fn forget(&mut self, token: Token) {
        if let Some(entry) = self.tokens.get_mut(token.0).filter(|e| e.registered) {
            *entry = Entry::default();
            self.free.push(token.0);
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
        if self.free.len() == self.tokens.len() {
            return 0;
        }
        if self.poll.poll(&mut self.events, Some(std::time::Duration::ZERO)).is_err() {
            return 0;
        }
        let mut count = 0;
        for event in &self.events {
            count += 1;
            let Some(entry) = self.tokens.get_mut(event.token().0).filter(|e| e.registered) else { continue };
            match &entry.watcher {
                Some(waker) => waker.wake_by_ref(),
                // Input on an idle connection is as bad as a close: bytes
                // no request asked for.
                None => entry.hung_up |= event.is_readable() || event.is_read_closed() || event.is_error(),
            }
        }
        count
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
}
