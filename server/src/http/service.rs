//! [`HttpService`]: the HTTP layer as a [host](crate::host) service, the
//! same on every backend. Each connection's session is a pooled
//! [`HttpConn`] answered by the service's [`Handler`]; driving it is the
//! sequence in the [module docs](super#driving-a-connection), over the
//! host's transport.

use std::net::SocketAddr;

use fairway_stack::time::Instant;

use crate::host::{Cx, Next, Service, Transport, TransportError};
use crate::http::{Env, Handler, HttpConfig, HttpConn, Router, builtin};

/// HTTP/1.1 on every connection of a host, answered by `H` (the built-in
/// endpoints by default).
#[derive(Debug)]
pub struct HttpService<H = Router> {
    http: HttpConfig,
    handler: H,
}

impl HttpService<Router> {
    /// HTTP as `http` says, serving the built-in endpoints
    /// ([`builtin`](crate::http::builtin())).
    #[must_use]
    pub fn new(http: HttpConfig) -> HttpService<Router> {
        let handler = builtin(&http);
        HttpService { http, handler }
    }
}

impl<H: Handler> HttpService<H> {
    /// HTTP as `http` says, answered by `handler`.
    #[must_use]
    pub fn with_handler(http: HttpConfig, handler: H) -> HttpService<H> {
        HttpService { http, handler }
    }

    /// The handler.
    #[must_use]
    pub fn handler(&self) -> &H {
        &self.handler
    }

    /// The handler, mutably.
    pub fn handler_mut(&mut self) -> &mut H {
        &mut self.handler
    }
}

impl<T: Transport, H: Handler> Service<T> for HttpService<H> {
    type Session = HttpConn;

    fn session(&mut self) -> HttpConn {
        let mut conn = HttpConn::new(&self.http);
        conn.set_in_place(T::SENDS_IN_PLACE);
        conn
    }

    fn open(&mut self, conn: &mut HttpConn, cx: &mut Cx<'_, T>, peer: SocketAddr) -> Next {
        conn.reset(cx.now);
        conn.attach(crate::http::handler::connection_index(cx.slot), Some(peer));
        conn.set_secure(cx.transport.is_secure(cx.conn));
        // Data may have come with the handshake's last ACK.
        drive(conn, cx, &mut self.handler)
    }

    fn drive(&mut self, conn: &mut HttpConn, cx: &mut Cx<'_, T>) -> Next {
        drive(conn, cx, &mut self.handler)
    }

    fn timeout(&mut self, conn: &mut HttpConn, cx: &mut Cx<'_, T>) -> Next {
        if conn.deadline().is_some_and(|at| at <= cx.now) {
            let mut env = Env { site: &mut *cx.site, handler: &mut self.handler, waker: cx.waker };
            conn.on_timeout(cx.now, &mut env);
        }
        // Flushes a 408 or 503, closes an idle connection, or leaves the
        // deadline that replaced this one to be armed.
        drive(conn, cx, &mut self.handler)
    }

    fn deadline(&self, conn: &HttpConn) -> Option<Instant> {
        conn.deadline()
    }

    fn is_idle(&self, conn: &HttpConn) -> bool {
        conn.is_idle()
    }

    fn closed(&mut self, conn: &mut HttpConn) {
        conn.finish(&mut self.handler);
    }
}

/// The most bytes one connection moves (in and out) in one turn of the
/// loop. A kernel socket whose peer reads as fast as we write never says
/// `WouldBlock`: without a bound, one download would keep the shard to
/// itself and starve every other connection on it. Past the bound the
/// connection wakes itself and goes on next turn, after the others' events.
/// Half a megabyte is a fraction of a millisecond of copying, and a large
/// multiple of a turn's fixed cost.
pub(crate) const TURN_BYTES: usize = 512 * 1024;

/// Drives one connection as far as it goes now: read while it wants input,
/// flush, and again while either made progress (a flush can free room for
/// requests held back), up to [`TURN_BYTES`] this turn.
fn drive<T: Transport>(conn: &mut HttpConn, cx: &mut Cx<'_, T>, handler: &mut dyn Handler) -> Next {
    let (now, c) = (cx.now, cx.conn);
    let mut env = Env { site: &mut *cx.site, handler, waker: cx.waker };
    let mut moved = 0;
    loop {
        let mut progress = false;
        let wanted_input = conn.wants_input();
        while conn.wants_input() {
            match cx.transport.recv(c, conn.recv_buf()) {
                Ok(0) => {
                    conn.on_eof(now);
                    break;
                }
                Ok(n) => {
                    conn.on_recv(n, now, &mut env);
                    progress = true;
                    moved += n;
                    if moved >= TURN_BYTES {
                        break;
                    }
                }
                Err(TransportError::WouldBlock) => break,
                Err(TransportError::Failed) => return Next::Abort,
            }
        }
        loop {
            let out = conn.output(now, &mut env);
            let (sent, short) = if !out.is_empty() {
                let len = out.len();
                match cx.transport.send(c, out) {
                    Ok(n) => {
                        conn.consume(n);
                        (n, n < len)
                    }
                    Err(TransportError::WouldBlock) => break,
                    Err(TransportError::Failed) => return Next::Abort,
                }
            } else if T::SENDS_IN_PLACE && conn.body_in_place() {
                // The body goes from its source straight into the send
                // ring: 0 once it has ended, and the loop goes on to what
                // follows it.
                match cx.transport.send_with(c, &mut |room| conn.body_into(room)) {
                    Ok(n) => (n, false),
                    Err(TransportError::WouldBlock) => break,
                    Err(TransportError::Failed) => return Next::Abort,
                }
            } else {
                break;
            };
            progress |= sent > 0;
            moved += sent;
            if short || moved >= TURN_BYTES {
                break;
            }
        }
        if conn.should_close() || (cx.draining && conn.is_idle()) {
            return Next::Close;
        }
        // A handler that held a body back and takes it now (woken) frees
        // the input only in `output`: read on, as no event will say so.
        if !progress && (wanted_input || !conn.wants_input()) {
            return Next::Keep;
        }
        if moved >= TURN_BYTES {
            // Readiness is remembered (the transport has not said
            // `WouldBlock`): the wake brings it back without an event.
            env.waker.wake_by_ref();
            return Next::Keep;
        }
    }
}
