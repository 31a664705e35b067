//! Connections for async tasks on a Fairway shard: [`TcpListener`] (the
//! shard's listening socket) and [`TcpStream`], on the userspace stack or
//! on kernel sockets alike.
//!
//! A [`TcpStream`] implements hyper's [`Read`](hyper::rt::Read) and
//! [`Write`](hyper::rt::Write), so hyper serves HTTP over it directly
//! (see [`crate::rt::serve_http1`]). Reads are in place where the backend
//! allows: on the userspace stack the bytes go from the connection's
//! receive ring straight into hyper's buffer, one copy; kernel sockets
//! read into a shard buffer first. Writes copy once, into the send ring or
//! the kernel. Writes are vectored (one `writev` on kernel sockets), so
//! hyper need not flatten a head and a body into one buffer first.
//!
//! A stream is also tokio's `AsyncRead` and `AsyncWrite`. Both types are
//! `!Send`: they belong to the shard whose task made them.

use std::future::poll_fn;
use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use crate::rt::reactor::{ConnId, Runtime, current};

fn not_on_a_shard() -> io::Error {
    io::Error::new(io::ErrorKind::NotFound, "not in a task of a Fairway shard (fairway::rt)")
}

/// The shard's listening socket, as its tasks see it: the connections the
/// host admitted (within the connection limit), in order.
pub struct TcpListener {
    rt: Rc<dyn Runtime>,
}

impl std::fmt::Debug for TcpListener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpListener").finish_non_exhaustive()
    }
}

impl TcpListener {
    /// The listener of the shard this task runs on (the server's
    /// configured address: `--listen`, or port 80 of `--ip`).
    ///
    /// # Errors
    ///
    /// Called outside a task of a Fairway shard.
    pub fn shard() -> io::Result<TcpListener> {
        Ok(TcpListener { rt: current().ok_or_else(not_on_a_shard)? })
    }

    /// The next connection, and its peer's address.
    ///
    /// # Errors
    ///
    /// The server is shutting down (`ConnectionAborted`): accept no more.
    pub async fn accept(&self) -> io::Result<(TcpStream, SocketAddr)> {
        let (id, peer) = poll_fn(|cx| self.rt.poll_accept(cx)).await?;
        Ok((TcpStream { rt: Rc::clone(&self.rt), id }, peer))
    }
}

/// A connection, read and written by one task. Dropping it closes the
/// connection gracefully (the host lingers for the peer's FIN).
pub struct TcpStream {
    rt: Rc<dyn Runtime>,
    id: ConnId,
}

impl std::fmt::Debug for TcpStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpStream").field("peer", &self.peer_addr()).finish_non_exhaustive()
    }
}

impl TcpStream {
    /// The peer's address, while the connection is open.
    #[must_use]
    pub fn peer_addr(&self) -> Option<SocketAddr> {
        self.rt.peer(self.id)
    }

    /// Whether the connection speaks TLS (it came in on a TLS port; what
    /// the stream reads and writes is the plaintext).
    #[must_use]
    pub fn is_secure(&self) -> bool {
        self.rt.is_secure(self.id)
    }

    /// Reads into `buf`: the count, 0 at the peer's FIN.
    ///
    /// # Errors
    ///
    /// The connection was reset or closed.
    pub async fn read(&self, buf: &mut [u8]) -> io::Result<usize> {
        poll_fn(|cx| self.poll_read_into(cx, buf)).await
    }

    /// Writes some of `data`: how much was taken.
    ///
    /// # Errors
    ///
    /// The connection was reset or closed.
    pub async fn write(&self, data: &[u8]) -> io::Result<usize> {
        poll_fn(|cx| self.rt.poll_write(self.id, cx, data)).await
    }

    /// Writes all of `data`.
    ///
    /// # Errors
    ///
    /// The connection was reset or closed.
    pub async fn write_all(&self, mut data: &[u8]) -> io::Result<()> {
        while !data.is_empty() {
            let n = self.write(data).await?;
            data = &data[n..];
        }
        Ok(())
    }

    /// Shuts the sending side: a FIN follows what was written.
    ///
    /// # Errors
    ///
    /// The connection is already closed.
    pub fn shutdown(&self) -> io::Result<()> {
        self.rt.shutdown(self.id)
    }

    fn poll_read_into(&self, cx: &mut Context<'_>, buf: &mut [u8]) -> Poll<io::Result<usize>> {
        let want = buf.len();
        self.rt.poll_read(self.id, cx, want, &mut |data| {
            let n = data.len().min(buf.len());
            buf[..n].copy_from_slice(&data[..n]);
            n
        })
    }
}

impl Drop for TcpStream {
    fn drop(&mut self) {
        self.rt.release(self.id);
    }
}

impl hyper::rt::Read for TcpStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        mut buf: hyper::rt::ReadBufCursor<'_>,
    ) -> Poll<io::Result<()>> {
        let want = buf.remaining();
        self.rt
            .poll_read(self.id, cx, want, &mut |data| {
                let n = data.len().min(buf.remaining());
                buf.put_slice(&data[..n]);
                n
            })
            .map_ok(|_| ())
    }
}

impl hyper::rt::Write for TcpStream {
    fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
        self.rt.poll_write(self.id, cx, data)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        self.rt.poll_write_vectored(self.id, cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        true
    }

    /// Nothing to flush: the stack (or the kernel) sends on its own.
    fn poll_flush(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        Poll::Ready(Ok(()))
    }

    fn poll_shutdown(self: Pin<&mut Self>, _: &mut Context<'_>) -> Poll<io::Result<()>> {
        // Already closed is as good as shut.
        let _ = self.rt.shutdown(self.id);
        Poll::Ready(Ok(()))
    }
}

/// tokio's I/O traits, for code written against them (codecs, TLS
/// wrappers, tonic): reads copy once from the receive ring into tokio's
/// buffer.
mod tokio_io {
    use std::io;
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use super::TcpStream;

    impl tokio::io::AsyncRead for TcpStream {
        fn poll_read(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            buf: &mut tokio::io::ReadBuf<'_>,
        ) -> Poll<io::Result<()>> {
            let want = buf.remaining();
            self.rt
                .poll_read(self.id, cx, want, &mut |data| {
                    let n = data.len().min(buf.remaining());
                    buf.put_slice(&data[..n]);
                    n
                })
                .map_ok(|_| ())
        }
    }

    impl tokio::io::AsyncWrite for TcpStream {
        fn poll_write(self: Pin<&mut Self>, cx: &mut Context<'_>, data: &[u8]) -> Poll<io::Result<usize>> {
            hyper::rt::Write::poll_write(self, cx, data)
        }

        fn poll_write_vectored(
            self: Pin<&mut Self>,
            cx: &mut Context<'_>,
            bufs: &[io::IoSlice<'_>],
        ) -> Poll<io::Result<usize>> {
            hyper::rt::Write::poll_write_vectored(self, cx, bufs)
        }

        fn is_write_vectored(&self) -> bool {
            true
        }

        fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            hyper::rt::Write::poll_flush(self, cx)
        }

        fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
            hyper::rt::Write::poll_shutdown(self, cx)
        }
    }
}
