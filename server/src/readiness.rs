//! What an edge-triggered kernel socket may still do before its next
//! event: the one record of it that the kernel backend's connections and
//! the shard's outbound sockets (the proxy's upstreams) both keep.
//!
//! mio registers sockets edge-triggered: an event comes once per change,
//! so a socket's side stays "maybe ready" until a call proves it is not.
//! A call on a side known to be drained (or full) answers `WouldBlock`
//! without a syscall. Two kinds of call prove it: one that says
//! `WouldBlock`, and a short transfer: a TCP read that returns less than
//! asked took all the socket held, a write that sends less filled its
//! buffer, and whatever arrives or frees up afterwards brings a new edge.
//! A socket whose peer closed it, or that failed, keeps both sides ready
//! for good: the event that said so was its last, and the next call
//! returns the end (`Ok(0)`) or the error.

use std::io;

/// Which way a call on a socket goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Side {
    /// Reading what the socket received.
    Read,
    /// Writing into its send buffer.
    Write,
}

/// One socket's readiness, as far as its events and calls have told.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Readiness {
    /// Not known to be drained since the last readable event.
    readable: bool,
    /// Not known to be full since the last writable event.
    writable: bool,
    /// The peer closed it or it failed: a final state.
    closed: bool,
}

impl Readiness {
    /// A socket just accepted or opened: each side is tried once before
    /// waiting (the request is often in already).
    pub const FRESH: Readiness = Readiness { readable: true, writable: true, closed: false };

    /// Notes what `event` says of the socket.
    pub fn note(&mut self, event: &mio::event::Event) {
        self.closed |= event.is_read_closed() || event.is_write_closed() || event.is_error();
        // Errors and hang-ups show up as readiness: the next call says what.
        self.readable |= event.is_readable() || self.closed;
        self.writable |= event.is_writable() || self.closed;
    }

    /// Whether a call on `side` may find something to do.
    #[must_use]
    pub fn ready(&self, side: Side) -> bool {
        match side {
            Side::Read => self.readable,
            Side::Write => self.writable,
        }
    }

    /// Runs `op`, a call on `side` that moves up to `want` bytes, unless
    /// that side is known to be drained or full; retries it when
    /// interrupted.
    ///
    /// # Errors
    ///
    /// `WouldBlock` without a syscall when the side is known not ready;
    /// otherwise what `op` returned.
    pub fn io(&mut self, side: Side, want: usize, mut op: impl FnMut() -> io::Result<usize>) -> io::Result<usize> {
        let closed = self.closed;
        let ready = match side {
            Side::Read => &mut self.readable,
            Side::Write => &mut self.writable,
        };
        if !*ready {
            return Err(io::ErrorKind::WouldBlock.into());
        }
        loop {
            match op() {
                Ok(n) => {
                    *ready = closed || n == 0 || n >= want;
                    return Ok(n);
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    *ready = false;
                    return Err(e);
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use std::io::{Read, Write};
    use std::time::Duration;

    use mio::net::TcpStream;
    use mio::{Events, Interest, Poll, Token};

    use super::*;

    /// A connected pair on the loopback, the client's end registered in a
    /// poll whose events feed `state`; `calls` counts what `io` let through.
    struct Fixture {
        poll: Poll,
        events: Events,
        client: TcpStream,
        server: std::net::TcpStream,
        state: Readiness,
        calls: u32,
    }

    impl Fixture {
        fn new() -> Fixture {
            let poll = Poll::new().unwrap();
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let client = std::net::TcpStream::connect(listener.local_addr().unwrap()).unwrap();
            client.set_nonblocking(true).unwrap();
            let mut client = TcpStream::from_std(client);
            poll.registry().register(&mut client, Token(1), Interest::READABLE | Interest::WRITABLE).unwrap();
            let server = listener.accept().unwrap().0;
            Fixture { poll, events: Events::with_capacity(8), client, server, state: Readiness::FRESH, calls: 0 }
        }

        /// Takes the pending events into the state; how many.
        fn settle(&mut self) -> usize {
            self.poll.poll(&mut self.events, Some(Duration::from_millis(200))).unwrap();
            self.events.iter().map(|e| self.state.note(e)).count()
        }

        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            let (client, calls) = (&mut self.client, &mut self.calls);
            self.state.io(Side::Read, buf.len(), || {
                *calls += 1;
                client.read(buf)
            })
        }

        fn write(&mut self, data: &[u8]) -> io::Result<usize> {
            let (client, calls) = (&mut self.client, &mut self.calls);
            self.state.io(Side::Write, data.len(), || {
                *calls += 1;
                client.write(data)
            })
        }
    }

    #[test]
    fn a_short_read_waits_for_the_next_event_without_a_call() {
        let mut f = Fixture::new();
        let mut buf = [0; 64];
        assert_eq!(f.read(&mut buf).unwrap_err().kind(), io::ErrorKind::WouldBlock);
        assert_eq!((f.calls, f.state.ready(Side::Read)), (1, false), "WouldBlock: drained");
        assert_eq!(f.read(&mut buf).unwrap_err().kind(), io::ErrorKind::WouldBlock);
        assert_eq!(f.calls, 1, "a drained side costs no call");

        f.server.write_all(b"hello").unwrap();
        assert!(f.settle() > 0);
        assert_eq!(f.read(&mut buf).unwrap(), 5);
        assert_eq!((f.calls, f.state.ready(Side::Read)), (2, false), "five of 64: all there was");
        assert!(f.read(&mut buf).is_err());
        assert_eq!(f.calls, 2);

        // What arrives after a short read brings its own edge.
        f.server.write_all(&[7; 64]).unwrap();
        assert!(f.settle() > 0);
        assert_eq!(f.read(&mut buf).unwrap(), 64);
        assert!(f.state.ready(Side::Read), "a full read may have left more");
    }

    #[test]
    fn data_and_the_close_in_one_event_are_both_read() {
        let mut f = Fixture::new();
        f.settle();
        f.server.write_all(b"last words").unwrap();
        f.server.shutdown(std::net::Shutdown::Both).unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert!(f.settle() > 0);
        let mut buf = [0; 64];
        assert_eq!(f.read(&mut buf).unwrap(), 10);
        assert!(f.state.ready(Side::Read), "closed: a short read proves nothing, no edge is left to come");
        assert_eq!(f.read(&mut buf).unwrap(), 0, "the end is read");
    }

    #[test]
    fn a_short_write_waits_for_room() {
        let mut f = Fixture::new();
        let data = vec![1; 1 << 20];
        let mut sent = 0;
        while let Ok(n) = f.write(&data) {
            sent += n;
        }
        assert!(sent > 0);
        assert!(!f.state.ready(Side::Write));
        let before = f.calls;
        assert!(f.write(&data).is_err());
        assert_eq!(f.calls, before, "a full side costs no call");

        let mut sink = vec![0; 1 << 20];
        let mut drained = 0;
        while drained < sent {
            drained += f.server.read(&mut sink).unwrap();
        }
        assert!(f.settle() > 0);
        assert!(f.state.ready(Side::Write), "room again");
        assert!(f.write(&data).unwrap() > 0);
    }
}
