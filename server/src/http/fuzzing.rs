//! Entry points for the fuzz targets in `fuzz/` (feature `fuzzing`): the
//! parts of the HTTP layer without a public API of their own, each with the
//! property its target checks. A violated property panics, which the
//! fuzzer reports as a crash.

use crate::http::chunked::{ChunkError, ChunkedDecoder};
use crate::http::parse::{self, Head, HeadLimits, MAX_HEADERS, Reject};
use crate::http::range::{self, RangeRequest};

/// What decoding a chunked body gave: its data, how much input it used
/// (or why it refused), and whether the body ended.
type Decoded = (Vec<u8>, Result<usize, ChunkError>, bool);

fn decode_in_pieces(input: &[u8], cuts: &[usize]) -> Decoded {
    let mut decoder = ChunkedDecoder::default();
    let mut data = Vec::new();
    let mut at = 0;
    for &end in cuts.iter().chain([&input.len()]) {
        let end = end.min(input.len());
        if end <= at {
            continue;
        }
        let piece = &input[at..end];
        match decoder.decode_taking(piece, |d| {
            data.extend_from_slice(d);
            d.len()
        }) {
            Ok(used) => {
                at += used;
                if decoder.is_done() {
                    break;
                }
                assert_eq!(used, piece.len(), "a decoder that is not done takes all it is given");
            }
            Err(e) => return (data, Err(e), false),
        }
    }
    (data, Ok(at), decoder.is_done())
}

/// Decodes `input` as a chunked body whole and in the pieces `cuts` marks
/// (offsets, any order): both must give the same data, the same verdict
/// and stop at the same byte.
///
/// # Panics
///
/// When they differ.
pub fn chunked_split_invariance(input: &[u8], cuts: &[usize]) {
    let mut cuts = cuts.to_vec();
    cuts.sort_unstable();
    let whole = decode_in_pieces(input, &[]);
    let pieces = decode_in_pieces(input, &cuts);
    assert_eq!(whole, pieces, "whole and in pieces at {cuts:?}");
}

/// Resolves a `Range` value against `len`: a part lies inside the
/// representation and is not empty.
///
/// # Panics
///
/// When it does not.
pub fn range_within(value: &[u8], len: u64) {
    match range::resolve(Some(value), len) {
        RangeRequest::Part { start, end } => assert!(start < end && end <= len, "{start}..{end} of {len}"),
        RangeRequest::Full | RangeRequest::Unsatisfiable => {}
    }
}

/// Parses `buf` as a request head under small limits: a complete head
/// lies within the buffer and the limits, a newer HTTP/1.x names a `2`…`9`
/// digit in the buffer, and every refusal has a status of its own.
///
/// # Panics
///
/// When one of those does not hold.
pub fn head(buf: &[u8]) {
    let limits = HeadLimits { max_request_line: 256, max_head: 1024, max_body: 1 << 20 };
    let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
    match parse::parse_head(buf, &mut headers, &limits) {
        Ok(Head::Complete(req)) => {
            assert!(req.head_len <= buf.len() && req.head_len <= limits.max_head);
            assert!(req.path.starts_with('/'), "{:?}", req.path);
        }
        Ok(Head::Partial) => assert!(buf.len() < limits.max_head),
        Err(Reject::NewerMinor { at }) => assert!((b'2'..=b'9').contains(&buf[at]), "{at}"),
        Err(reject) => assert!(matches!(reject.status(), 400 | 413 | 414 | 431 | 501 | 505), "{reject:?}"),
    }
}
