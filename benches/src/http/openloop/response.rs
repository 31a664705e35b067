//! Reading HTTP/1.1 responses off a keep-alive connection, as little as
//! the generator needs: where each response ends and its status. The head
//! ends at the blank line, the body is `Content-Length` bytes. Bytes may
//! arrive split anywhere; a response without `Content-Length` (chunked, or
//! closed-delimited) is an error, since the servers under test always send
//! one for `/plaintext`.

use std::fmt;

/// A head longer than this without its blank line is an error.
pub const MAX_HEAD: usize = 16 * 1024;

/// Why the stream cannot be read on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BadResponse {
    /// The status line is not `HTTP/1.x NNN ...`.
    StatusLine,
    /// No `Content-Length`, or one that is not a number.
    ContentLength,
    /// No blank line within [`MAX_HEAD`] bytes.
    HeadTooLong,
}

impl fmt::Display for BadResponse {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            BadResponse::StatusLine => "a response without an HTTP/1.x status line",
            BadResponse::ContentLength => "a response without a readable Content-Length",
            BadResponse::HeadTooLong => "a response head longer than 16 KiB",
        })
    }
}

impl std::error::Error for BadResponse {}

/// Where the reader is in the stream.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// In a head (its bytes so far kept in `head`).
    Head,
    /// In the body of a response with `status`; `left` bytes to go.
    Body { status: u16, left: u64 },
}

/// Splits a stream of responses.
#[derive(Debug)]
pub struct ResponseReader {
    state: State,
    head: Vec<u8>,
}

impl Default for ResponseReader {
    fn default() -> ResponseReader {
        ResponseReader { state: State::Head, head: Vec::with_capacity(512) }
    }
}

impl ResponseReader {
    /// Reads `bytes`, the next part of the stream, and calls `complete`
    /// with the status of every response that ends in them, in order.
    ///
    /// # Errors
    ///
    /// A response it cannot delimit; the stream is lost after it.
    pub fn feed(&mut self, mut bytes: &[u8], mut complete: impl FnMut(u16)) -> Result<(), BadResponse> {
        while !bytes.is_empty() {
            match self.state {
                State::Body { status, left } => {
                    let take = bytes.len().min(usize::try_from(left).unwrap_or(usize::MAX));
                    bytes = &bytes[take..];
                    let left = left - take as u64;
                    self.state = State::Body { status, left };
                    if left == 0 {
                        self.state = State::Head;
                        complete(status);
                    }
                }
                State::Head => {
                    // The blank line may straddle what was kept and what came.
                    let searched_from = self.head.len().saturating_sub(3);
                    let kept = self.head.len();
                    self.head.extend_from_slice(bytes);
                    let Some(at) = find_blank_line(&self.head[searched_from..]) else {
                        if self.head.len() > MAX_HEAD {
                            return Err(BadResponse::HeadTooLong);
                        }
                        return Ok(());
                    };
                    let end = searched_from + at + 4;
                    let (status, length) = parse_head(&self.head[..end])?;
                    bytes = &bytes[end - kept..];
                    self.head.clear();
                    if length == 0 {
                        complete(status);
                    } else {
                        self.state = State::Body { status, left: length };
                    }
                }
            }
        }
        Ok(())
    }

    /// Whether the stream is between responses.
    #[must_use]
    pub fn is_idle(&self) -> bool {
        self.state == State::Head && self.head.is_empty()
    }
}

fn find_blank_line(bytes: &[u8]) -> Option<usize> {
    bytes.windows(4).position(|w| w == b"\r\n\r\n")
}

/// The status and `Content-Length` of a whole head.
fn parse_head(head: &[u8]) -> Result<(u16, u64), BadResponse> {
    let text = std::str::from_utf8(head).map_err(|_| BadResponse::StatusLine)?;
    let mut lines = text.split("\r\n");
    let status_line = lines.next().unwrap_or_default();
    let mut words = status_line.split(' ');
    let version = words.next().unwrap_or_default();
    let code = words.next().unwrap_or_default();
    if !version.starts_with("HTTP/1.") || code.len() != 3 {
        return Err(BadResponse::StatusLine);
    }
    let status = code.parse::<u16>().map_err(|_| BadResponse::StatusLine)?;
    let length = lines
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.trim().eq_ignore_ascii_case("content-length"))
        .ok_or(BadResponse::ContentLength)?
        .1
        .trim()
        .parse::<u64>()
        .map_err(|_| BadResponse::ContentLength)?;
    Ok((status, length))
}

#[cfg(test)]
mod tests {
    use super::*;

    const PLAINTEXT: &[u8] = b"HTTP/1.1 200 OK\r\nServer: fairway\r\nDate: Mon, 30 Nov 2026 10:00:00 GMT\r\n\
Content-Type: text/plain\r\nContent-Length: 13\r\n\r\nHello, World!";

    fn statuses(reader: &mut ResponseReader, parts: &[&[u8]]) -> Result<Vec<u16>, BadResponse> {
        let mut seen = Vec::new();
        for part in parts {
            reader.feed(part, |s| seen.push(s))?;
        }
        Ok(seen)
    }

    #[test]
    fn whole_responses() {
        let mut r = ResponseReader::default();
        let three = [PLAINTEXT, PLAINTEXT, PLAINTEXT].concat();
        assert_eq!(statuses(&mut r, &[&three]), Ok(vec![200, 200, 200]));
        assert!(r.is_idle());
    }

    #[test]
    fn every_split_of_two_responses_gives_the_same_two() {
        let not_found = b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n";
        let stream = [PLAINTEXT, not_found.as_slice(), PLAINTEXT].concat();
        for a in 0..=stream.len() {
            for b in a..=stream.len() {
                let mut r = ResponseReader::default();
                let seen = statuses(&mut r, &[&stream[..a], &stream[a..b], &stream[b..]]);
                assert_eq!(seen, Ok(vec![200, 404, 200]), "split at {a} and {b}");
                assert!(r.is_idle());
            }
        }
    }

    #[test]
    fn byte_by_byte() {
        let mut r = ResponseReader::default();
        let mut seen = Vec::new();
        for (i, byte) in PLAINTEXT.iter().enumerate() {
            r.feed(std::slice::from_ref(byte), |s| seen.push(s)).unwrap();
            assert_eq!(seen.len(), usize::from(i == PLAINTEXT.len() - 1), "after byte {i}");
        }
    }

    #[test]
    fn a_large_body_is_skipped_not_kept() {
        let mut r = ResponseReader::default();
        let head = b"HTTP/1.1 200 OK\r\nContent-Length: 1000000\r\n\r\n";
        let body = vec![b'x'; 1_000_000];
        let seen = statuses(&mut r, &[head, &body[..400_000], &body[400_000..], PLAINTEXT]);
        assert_eq!(seen, Ok(vec![200, 200]));
        assert!(r.head.capacity() < 4096);
    }

    #[test]
    fn what_cannot_be_delimited_is_an_error() {
        let error = |bytes: &[u8]| ResponseReader::default().feed(bytes, |_| {}).unwrap_err();
        assert_eq!(error(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"), BadResponse::ContentLength);
        assert_eq!(error(b"HTTP/1.1 200 OK\r\nContent-Length: lots\r\n\r\n"), BadResponse::ContentLength);
        assert_eq!(error(b"SSH-2.0-OpenSSH\r\n\r\n"), BadResponse::StatusLine);
        assert_eq!(error(b"HTTP/1.1 2000 OK\r\nContent-Length: 0\r\n\r\n"), BadResponse::StatusLine);
        assert_eq!(error(&vec![b'a'; MAX_HEAD + 1]), BadResponse::HeadTooLong);
        // Not yet an error: the head may still end.
        assert!(ResponseReader::default().feed(&[b'a'; 100], |_| {}).is_ok());
    }
}
