//! Decoding a chunked request body (RFC 9112 §7.1), a byte at a time for the
//! framing and a slice at a time for the data.
//!
//! Strict where leniency lets two parsers disagree about where a body ends:
//! every line ends in CRLF, a chunk's data is followed by CRLF, a size is hex
//! that fits a u64. Chunk extensions are skipped; trailer fields are read and
//! dropped. Size lines (extensions included) are bounded by
//! [`MAX_SIZE_LINE`] and the trailer section by [`MAX_TRAILERS`], so a peer
//! cannot make the decoder hold or scan unbounded framing.

/// The longest chunk-size line, extensions included, without its CRLF.
pub(crate) const MAX_SIZE_LINE: usize = 1024;

/// The longest trailer section, line endings included.
pub(crate) const MAX_TRAILERS: usize = 8 * 1024;

/// Why a chunked body is refused (all answered 400).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum ChunkError {
    /// Not the chunked syntax.
    Malformed,
    /// A size line over [`MAX_SIZE_LINE`].
    SizeLineTooLong,
    /// A trailer section over [`MAX_TRAILERS`].
    TrailersTooLarge,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Hex digits of a chunk size (`digits` read so far).
    Size {
        digits: usize,
    },
    /// Whitespace after the size, before `;` or CR.
    SizeSpace,
    /// A chunk extension, skipped up to CR.
    Extension,
    /// The LF ending a size line.
    SizeLf,
    /// Chunk data still to come.
    Data {
        remaining: u64,
    },
    /// The CR, then the LF, after a chunk's data.
    DataCr,
    DataLf,
    /// The start of a trailer line, or the final CRLF.
    TrailerStart,
    /// Inside a trailer line, up to CR.
    Trailer,
    /// The LF ending a trailer line.
    TrailerLf,
    /// The LF of the final CRLF.
    EndLf,
    Done,
}

/// A chunked body decoder; one per request body.
#[derive(Clone, Debug)]
pub(crate) struct ChunkedDecoder {
    state: State,
    size: u64,
    /// Bytes of the current size line, or of the trailer section.
    line: usize,
}

impl Default for ChunkedDecoder {
    fn default() -> ChunkedDecoder {
        ChunkedDecoder { state: State::Size { digits: 0 }, size: 0, line: 0 }
    }
}

impl ChunkedDecoder {
    /// The whole body, trailers included, has been read.
    pub(crate) fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// Decodes from `input`, handing chunk data to `data`, and returns how
    /// many bytes of `input` it used. Stops at the end of the body, so what
    /// follows in `input` (a pipelined request) is left alone.
    #[cfg(test)]
    pub(crate) fn decode(&mut self, input: &[u8], mut data: impl FnMut(&[u8])) -> Result<usize, ChunkError> {
        self.decode_taking(input, |d| {
            data(d);
            d.len()
        })
    }

    /// As `decode`, but `data` says how much of each piece it took, and
    /// decoding stops after a piece it did not take whole: the rest of it
    /// is left in `input` (back-pressure), to be offered again.
    pub(crate) fn decode_taking(
        &mut self,
        input: &[u8],
        mut data: impl FnMut(&[u8]) -> usize,
    ) -> Result<usize, ChunkError> {
        let mut at = 0;
        while at < input.len() && self.state != State::Done {
            if let State::Data { remaining } = self.state {
                let offer = remaining.min((input.len() - at) as u64) as usize;
                let take = data(&input[at..at + offer]).min(offer);
                at += take;
                let remaining = remaining - take as u64;
                self.state = if remaining == 0 { State::DataCr } else { State::Data { remaining } };
                if take < offer {
                    break;
                }
                continue;
            }
            self.state = self.step(input[at])?;
            at += 1;
        }
        Ok(at)
    }

    /// One framing byte.
    fn step(&mut self, b: u8) -> Result<State, ChunkError> {
        use State::*;
        let next = match (self.state, b) {
            (Size { digits }, _) if b.is_ascii_hexdigit() => {
                let digit = u64::from((b as char).to_digit(16).unwrap_or(0));
                self.size =
                    self.size.checked_mul(16).and_then(|s| s.checked_add(digit)).ok_or(ChunkError::Malformed)?;
                Size { digits: digits + 1 }
            }
            (Size { digits: 0 }, _) => return Err(ChunkError::Malformed),
            (Size { .. } | SizeSpace, b' ' | b'\t') => SizeSpace,
            (Size { .. } | SizeSpace, b';') => Extension,
            (Size { .. } | SizeSpace | Extension, b'\r') => SizeLf,
            (Extension, b'\n') => return Err(ChunkError::Malformed),
            (Extension, _) => Extension,
            (SizeLf, b'\n') if self.size == 0 => {
                self.line = 0;
                TrailerStart
            }
            (SizeLf, b'\n') => Data { remaining: std::mem::take(&mut self.size) },
            (DataCr, b'\r') => DataLf,
            (DataLf, b'\n') => {
                self.line = 0;
                Size { digits: 0 }
            }
            (TrailerStart, b'\r') => EndLf,
            (TrailerStart | Trailer, b'\n') => return Err(ChunkError::Malformed),
            (TrailerStart | Trailer, _) if b != b'\r' => Trailer,
            (Trailer, b'\r') => TrailerLf,
            (TrailerLf, b'\n') => TrailerStart,
            (EndLf, b'\n') => Done,
            _ => return Err(ChunkError::Malformed),
        };
        self.line += 1;
        match next {
            Size { .. } | SizeSpace | Extension if self.line > MAX_SIZE_LINE => Err(ChunkError::SizeLineTooLong),
            TrailerStart | Trailer | TrailerLf | EndLf if self.line > MAX_TRAILERS => Err(ChunkError::TrailersTooLarge),
            _ => Ok(next),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Decodes `input` fed in pieces of `step` bytes; returns the data and
    /// the bytes used.
    fn decode_in_pieces(input: &[u8], step: usize) -> Result<(Vec<u8>, usize), ChunkError> {
        let mut d = ChunkedDecoder::default();
        let mut out = Vec::new();
        let mut used = 0;
        while used < input.len() && !d.is_done() {
            let end = (used + step).min(input.len());
            used += d.decode(&input[used..end], |data| out.extend_from_slice(data))?;
        }
        assert!(d.is_done(), "incomplete after {used} bytes");
        Ok((out, used))
    }

    #[test]
    fn decodes_in_any_pieces_and_stops_at_the_end() {
        let body =
            b"5\r\nhello\r\n1;name=value;x\r\n \r\nA \r\n0123456789\r\n0\r\nTrailer: yes\r\nMore: no\r\n\r\nGET /";
        for step in [1, 2, 3, 7, 100] {
            let (data, used) = decode_in_pieces(body, step).unwrap();
            assert_eq!(data, b"hello 0123456789");
            assert_eq!(&body[used..], b"GET /");
        }
        assert_eq!(decode_in_pieces(b"0\r\n\r\n", 1).unwrap().0, b"");
        assert_eq!(decode_in_pieces(b"000\r\n\r\n", 1).unwrap().1, 7);
    }

    #[test]
    fn refuses_what_is_not_chunked() {
        for bad in [
            &b"\r\n"[..],
            b"x\r\n",
            b"5\nhello\r\n0\r\n\r\n",
            b"5\r\nhelloX\r\n",
            b"5\r\nhello\rX",
            b"1;ext\n",
            b"0\r\nTrailer\n",
            b"0\r\n\rX",
            b"0\r\n\n",
            b"10000000000000000\r\n", // 2^64
            b"-1\r\n",
            b" 1\r\n",
            b"1 x\r\n",
        ] {
            let mut d = ChunkedDecoder::default();
            assert_eq!(d.decode(bad, |_| {}), Err(ChunkError::Malformed), "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn framing_is_bounded() {
        let mut d = ChunkedDecoder::default();
        let long_ext = [b"1;".as_slice(), &[b'x'; MAX_SIZE_LINE]].concat();
        assert_eq!(d.decode(&long_ext, |_| {}), Err(ChunkError::SizeLineTooLong));
        let mut d = ChunkedDecoder::default();
        let zeros = vec![b'0'; MAX_SIZE_LINE + 1];
        assert_eq!(d.decode(&zeros, |_| {}), Err(ChunkError::SizeLineTooLong));
        let mut d = ChunkedDecoder::default();
        let trailers = [b"0\r\n".as_slice(), &b"T: v\r\n".repeat(MAX_TRAILERS / 6 + 1)].concat();
        assert_eq!(d.decode(&trailers, |_| {}), Err(ChunkError::TrailersTooLarge));
        // The largest size there is is fine as a size.
        let mut d = ChunkedDecoder::default();
        assert_eq!(d.decode(b"ffffffffffffffff\r\nab", |_| {}), Ok(20));
    }
}
