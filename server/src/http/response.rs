//! Writing responses into the output window: status lines, the headers every
//! response carries, numbers without allocating.
//!
//! Every response head starts
//!
//! ```text
//! HTTP/1.1 <code> <reason>\r\n
//! Server: <server_name>\r\n
//! Date: <Site::now_date>\r\n
//! ```
//!
//! then the handler's headers (`Content-Type`, `Content-Length` first, then
//! the rest), then `Connection: close` when the server closes after this
//! response or `Connection: keep-alive` when it keeps an HTTP/1.0 peer's
//! connection open, then the blank line.

/// The most bytes a response head can take: a status line, `Server` and
/// `Date` (both bounded, see [`MAX_FIELD`]), and the longest handler headers
/// (a file's `Content-Type`, `Content-Length`, `Content-Range`,
/// `Accept-Ranges`, `ETag`, `Last-Modified`, `Connection`) fit well within.
pub(crate) const MAX_RESPONSE_HEAD: usize = 768;

/// The longest body written inline with its head (plaintext, json, upload
/// answers, error texts); longer bodies are streamed.
pub(crate) const MAX_INLINE_BODY: usize = 160;

/// `Server` and `Date` values are cut to this length so a head always fits.
pub(crate) const MAX_FIELD: usize = 64;

/// The interim response to `Expect: 100-continue`.
pub(crate) const CONTINUE: &[u8] = b"HTTP/1.1 100 Continue\r\n\r\n";

/// The reason phrase for each status this server sends.
#[must_use]
#[inline]
pub(crate) fn reason(status: u16) -> &'static str {
    match status {
        100 => "Continue",
        200 => "OK",
        201 => "Created",
        202 => "Accepted",
        204 => "No Content",
        206 => "Partial Content",
        301 => "Moved Permanently",
        302 => "Found",
        303 => "See Other",
        304 => "Not Modified",
        307 => "Temporary Redirect",
        308 => "Permanent Redirect",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        405 => "Method Not Allowed",
        406 => "Not Acceptable",
        408 => "Request Timeout",
        409 => "Conflict",
        410 => "Gone",
        411 => "Length Required",
        412 => "Precondition Failed",
        413 => "Content Too Large",
        414 => "URI Too Long",
        415 => "Unsupported Media Type",
        416 => "Range Not Satisfiable",
        422 => "Unprocessable Content",
        429 => "Too Many Requests",
        431 => "Request Header Fields Too Large",
        501 => "Not Implemented",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        504 => "Gateway Timeout",
        500 => "Internal Server Error",
        505 => "HTTP Version Not Supported",
        // RFC 9112 §4: a reason phrase may be empty; clients go by the code.
        _ => "",
    }
}

/// Bytes into a fixed slice. Writes past the end are dropped and remembered,
/// so a caller that sized the slice wrongly gets `None` from
/// [`finish`](ByteWriter::finish), never a panic.
pub(crate) struct ByteWriter<'a> {
    buf: &'a mut [u8],
    len: usize,
    overflow: bool,
}

impl<'a> ByteWriter<'a> {
    pub(crate) fn new(buf: &'a mut [u8]) -> ByteWriter<'a> {
        ByteWriter { buf, len: 0, overflow: false }
    }

    #[inline]
    pub(crate) fn put(&mut self, bytes: &[u8]) {
        match self.buf.get_mut(self.len..self.len + bytes.len()) {
            Some(dst) => {
                dst.copy_from_slice(bytes);
                self.len += bytes.len();
            }
            None => self.overflow = true,
        }
    }

    #[inline]
    pub(crate) fn put_u64(&mut self, n: u64) {
        self.put(itoa::Buffer::new().format(n).as_bytes());
    }

    pub(crate) fn put_hex(&mut self, n: u64) {
        let mut digits = [0u8; 16];
        let mut at = digits.len();
        let mut n = n;
        loop {
            at -= 1;
            digits[at] = b"0123456789abcdef"[(n & 0xf) as usize];
            n >>= 4;
            if n == 0 {
                break;
            }
        }
        self.put(&digits[at..]);
    }

    /// Bytes written so far.
    pub(crate) fn len(&self) -> usize {
        self.len
    }

    /// Bytes that still fit.
    pub(crate) fn room(&self) -> usize {
        if self.overflow { 0 } else { self.buf.len() - self.len }
    }

    /// What was written, or `None` if anything did not fit.
    #[inline]
    pub(crate) fn finish(self) -> Option<usize> {
        (!self.overflow).then_some(self.len)
    }
}

/// What a response says about the connection after it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Persistence {
    /// HTTP/1.1 keep-alive: no `Connection` header needed.
    Default,
    /// An HTTP/1.0 peer asked for keep-alive and gets it.
    KeepAlive,
    /// The server closes after this response.
    Close,
}

/// What every response head shares on a connection, per request.
#[derive(Clone, Copy)]
pub(crate) struct Common<'a> {
    pub server: &'a [u8],
    pub date: &'a [u8],
}

/// A response head being written.
pub(crate) struct HeadWriter<'a> {
    w: ByteWriter<'a>,
}

impl<'a> HeadWriter<'a> {
    /// Starts a head: status line, `Server`, `Date`.
    #[inline]
    pub(crate) fn start(buf: &'a mut [u8], status: u16, common: Common<'_>) -> HeadWriter<'a> {
        let mut w = ByteWriter::new(buf);
        w.put(b"HTTP/1.1 ");
        w.put_u64(u64::from(status));
        w.put(b" ");
        w.put(reason(status).as_bytes());
        w.put(b"\r\nServer: ");
        w.put(&common.server[..common.server.len().min(MAX_FIELD)]);
        w.put(b"\r\nDate: ");
        w.put(&common.date[..common.date.len().min(MAX_FIELD)]);
        w.put(b"\r\n");
        HeadWriter { w }
    }

    #[inline]
    pub(crate) fn header(&mut self, name: &str, value: &[u8]) {
        self.w.put(name.as_bytes());
        self.w.put(b": ");
        self.w.put(value);
        self.w.put(b"\r\n");
    }

    #[inline]
    pub(crate) fn header_u64(&mut self, name: &str, value: u64) {
        self.w.put(name.as_bytes());
        self.w.put(b": ");
        self.w.put_u64(value);
        self.w.put(b"\r\n");
    }

    /// `Content-Range: bytes first-last/len` for a 206 (`end` exclusive).
    pub(crate) fn content_range(&mut self, start: u64, end: u64, len: u64) {
        self.w.put(b"Content-Range: bytes ");
        self.w.put_u64(start);
        self.w.put(b"-");
        self.w.put_u64(end - 1);
        self.w.put(b"/");
        self.w.put_u64(len);
        self.w.put(b"\r\n");
    }

    /// `Content-Range: bytes */len` for a 416.
    pub(crate) fn unsatisfied_range(&mut self, len: u64) {
        self.w.put(b"Content-Range: bytes */");
        self.w.put_u64(len);
        self.w.put(b"\r\n");
    }

    /// Ends the head; the body (if inline) follows at the returned offset.
    #[inline]
    pub(crate) fn end(mut self, persistence: Persistence) -> ByteWriter<'a> {
        match persistence {
            Persistence::Default => {}
            Persistence::KeepAlive => self.w.put(b"Connection: keep-alive\r\n"),
            Persistence::Close => self.w.put(b"Connection: close\r\n"),
        }
        self.w.put(b"\r\n");
        self.w
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const COMMON: Common<'static> = Common { server: b"fairway", date: b"Sun, 06 Nov 1994 08:49:37 GMT" };

    fn head(persistence: Persistence, f: impl FnOnce(&mut HeadWriter<'_>)) -> String {
        let mut buf = [0u8; MAX_RESPONSE_HEAD];
        let mut h = HeadWriter::start(&mut buf, 206, COMMON);
        f(&mut h);
        let len = h.end(persistence).finish().unwrap();
        String::from_utf8(buf[..len].to_vec()).unwrap()
    }

    #[test]
    fn heads_are_written_in_the_documented_order() {
        let text = head(Persistence::Close, |h| {
            h.header("Content-Type", b"text/plain");
            h.header_u64("Content-Length", 10);
            h.content_range(5, 15, 100);
        });
        assert_eq!(
            text,
            "HTTP/1.1 206 Partial Content\r\nServer: fairway\r\nDate: Sun, 06 Nov 1994 08:49:37 GMT\r\n\
             Content-Type: text/plain\r\nContent-Length: 10\r\nContent-Range: bytes 5-14/100\r\n\
             Connection: close\r\n\r\n"
        );
        assert!(
            head(Persistence::KeepAlive, |h| h.unsatisfied_range(7))
                .ends_with("Content-Range: bytes */7\r\nConnection: keep-alive\r\n\r\n")
        );
        assert!(head(Persistence::Default, |_| {}).ends_with("GMT\r\n\r\n"));
    }

    #[test]
    fn a_writer_that_runs_out_of_room_says_so() {
        let mut buf = [0u8; 4];
        let mut w = ByteWriter::new(&mut buf);
        w.put(b"abc");
        w.put_hex(0xabc);
        assert_eq!(w.len(), 3);
        assert_eq!(w.finish(), None);
        let mut buf = [0u8; 16];
        let mut w = ByteWriter::new(&mut buf);
        w.put_hex(0);
        w.put_hex(0x1f);
        w.put_u64(42);
        assert_eq!(w.finish(), Some(5));
        assert_eq!(&buf[..5], b"01f42");
    }

    #[test]
    fn the_longest_head_fits() {
        let long = [b'x'; 200];
        let mut buf = [0u8; MAX_RESPONSE_HEAD];
        let mut h = HeadWriter::start(&mut buf, 431, Common { server: &long, date: &long });
        h.header("Content-Type", b"text/plain; version=0.0.4; charset=utf-8");
        h.header_u64("Content-Length", u64::MAX);
        h.content_range(u64::MAX - 1, u64::MAX, u64::MAX);
        h.header("Accept-Ranges", b"bytes");
        h.header("ETag", b"\"ffffffffffffffff-ffffffffffffffff\"");
        h.header("Last-Modified", b"Sun, 06 Nov 1994 08:49:37 GMT");
        h.header("Allow", b"GET, HEAD");
        assert!(h.end(Persistence::Close).finish().is_some());
    }
}
