//! [`HttpService`]: the HTTP layer as a [host](crate::host) service, the
//! same on every backend. Each connection's session is a pooled
//! [`HttpConn`]; driving it is the sequence in the [module
//! docs](super#driving-a-connection), over the host's transport.

use std::net::SocketAddr;

use fairway_stack::time::Instant;

use crate::host::{Cx, Next, Service, Transport, TransportError};
use crate::http::{HttpConfig, HttpConn};

/// HTTP/1.1 on every connection of a host.
#[derive(Clone, Debug)]
pub struct HttpService {
    http: HttpConfig,
}

impl HttpService {
    /// HTTP as `http` says.
    #[must_use]
    pub fn new(http: HttpConfig) -> HttpService {
        HttpService { http }
    }
}

impl<T: Transport> Service<T> for HttpService {
    type Session = HttpConn;

    fn session(&mut self) -> HttpConn {
        HttpConn::new(&self.http)
    }

    fn open(&mut self, conn: &mut HttpConn, cx: &mut Cx<'_, T>, _peer: SocketAddr) -> Next {
        conn.reset(cx.now);
        // Data may have come with the handshake's last ACK.
        drive(conn, cx)
    }

    fn drive(&mut self, conn: &mut HttpConn, cx: &mut Cx<'_, T>) -> Next {
        drive(conn, cx)
    }

    fn timeout(&mut self, conn: &mut HttpConn, cx: &mut Cx<'_, T>) -> Next {
        if conn.deadline().is_some_and(|at| at <= cx.now) {
            conn.on_timeout(cx.now, cx.site);
        }
        // Flushes a 408, closes an idle connection, or leaves the deadline
        // that replaced this one to be armed.
        drive(conn, cx)
    }

    fn deadline(&self, conn: &HttpConn) -> Option<Instant> {
        conn.deadline()
    }

    fn is_idle(&self, conn: &HttpConn) -> bool {
        conn.is_idle()
    }
}

/// Drives one connection as far as it goes now: read while it wants input,
/// flush, and again while either made progress (a flush can free room for
/// requests held back).
fn drive<T: Transport>(conn: &mut HttpConn, cx: &mut Cx<'_, T>) -> Next {
    let (now, c) = (cx.now, cx.conn);
    loop {
        let mut progress = false;
        while conn.wants_input() {
            match cx.transport.recv(c, conn.recv_buf()) {
                Ok(0) => {
                    conn.on_eof(now);
                    break;
                }
                Ok(n) => {
                    conn.on_recv(n, now, cx.site);
                    progress = true;
                }
                Err(TransportError::WouldBlock) => break,
                Err(TransportError::Failed) => return Next::Abort,
            }
        }
        loop {
            let out = conn.output(now, cx.site);
            if out.is_empty() {
                break;
            }
            let len = out.len();
            match cx.transport.send(c, out) {
                Ok(n) => {
                    conn.consume(n);
                    progress |= n > 0;
                    if n < len {
                        break;
                    }
                }
                Err(TransportError::WouldBlock) => break,
                Err(TransportError::Failed) => return Next::Abort,
            }
        }
        if conn.should_close() || (cx.draining && conn.is_idle()) {
            return Next::Close;
        }
        if !progress {
            return Next::Keep;
        }
    }
}
