//! Single byte ranges (RFC 9110 §14): `Range: bytes=a-b`, `bytes=a-` and
//! `bytes=-suffix`.
//!
//! A `Range` this server does not serve as a range is ignored, which the RFC
//! allows (§14.2): several ranges, another unit, or a syntax error all get
//! the whole representation with 200. A well-formed single range that
//! starts past the end gets 416.

/// What a request's `Range` asks of a representation of `len` bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum RangeRequest {
    /// The whole representation (no `Range`, or one that is ignored).
    Full,
    /// Bytes `start..end` (206).
    Part { start: u64, end: u64 },
    /// Nothing of it (416).
    Unsatisfiable,
}

/// Resolves a `Range` field value against a length.
pub(crate) fn resolve(range: Option<&[u8]>, len: u64) -> RangeRequest {
    let Some(value) = range else { return RangeRequest::Full };
    let Some(spec) = parse(value) else { return RangeRequest::Full };
    match spec {
        // RFC 9110 §14.1.1: last < first makes the range invalid: ignored.
        Spec::From { first, last: Some(last) } if last < first => RangeRequest::Full,
        Spec::From { first, .. } if first >= len => RangeRequest::Unsatisfiable,
        Spec::From { first, last } => {
            RangeRequest::Part { start: first, end: last.map_or(len, |last| last.saturating_add(1).min(len)) }
        }
        Spec::Suffix(n) if n == 0 || len == 0 => RangeRequest::Unsatisfiable,
        Spec::Suffix(n) => RangeRequest::Part { start: len - n.min(len), end: len },
    }
}

enum Spec {
    /// `first-` or `first-last`.
    From { first: u64, last: Option<u64> },
    /// `-n`: the last n bytes.
    Suffix(u64),
}

fn parse(value: &[u8]) -> Option<Spec> {
    let value = value.trim_ascii();
    let (unit, set) = value.split_at_checked(6)?;
    if !unit.eq_ignore_ascii_case(b"bytes=") || set.contains(&b',') {
        return None;
    }
    let set = set.trim_ascii();
    let dash = set.iter().position(|&b| b == b'-')?;
    let (first, last) = (&set[..dash], &set[dash + 1..]);
    match (first.is_empty(), last.is_empty()) {
        (true, true) => None,
        (true, false) => Some(Spec::Suffix(position(last)?)),
        (false, true) => Some(Spec::From { first: position(first)?, last: None }),
        (false, false) => Some(Spec::From { first: position(first)?, last: Some(position(last)?) }),
    }
}

/// Digits; a number too large for a u64 is as good as u64::MAX here (past
/// any end).
fn position(text: &[u8]) -> Option<u64> {
    if text.is_empty() || !text.iter().all(u8::is_ascii_digit) {
        return None;
    }
    Some(text.iter().fold(0u64, |n, &b| n.saturating_mul(10).saturating_add(u64::from(b - b'0'))))
}

#[cfg(test)]
mod tests {
    use super::RangeRequest::*;
    use super::*;

    fn r(value: &str, len: u64) -> RangeRequest {
        resolve(Some(value.as_bytes()), len)
    }

    #[test]
    fn single_ranges() {
        assert_eq!(resolve(None, 10), Full);
        assert_eq!(r("bytes=0-0", 10), Part { start: 0, end: 1 });
        assert_eq!(r("bytes=2-5", 10), Part { start: 2, end: 6 });
        assert_eq!(r("Bytes = 2-5 ", 10), Full); // no whitespace around '='
        assert_eq!(r("bytes= 2-5 ", 10), Part { start: 2, end: 6 });
        assert_eq!(r("bytes=2-500", 10), Part { start: 2, end: 10 });
        assert_eq!(r("bytes=2-99999999999999999999999", 10), Part { start: 2, end: 10 });
        assert_eq!(r("bytes=7-", 10), Part { start: 7, end: 10 });
        assert_eq!(r("bytes=-3", 10), Part { start: 7, end: 10 });
        assert_eq!(r("bytes=-30", 10), Part { start: 0, end: 10 });
        assert_eq!(r("bytes=9-9", 10), Part { start: 9, end: 10 });
    }

    #[test]
    fn unsatisfiable_ranges() {
        assert_eq!(r("bytes=10-", 10), Unsatisfiable);
        assert_eq!(r("bytes=10-20", 10), Unsatisfiable);
        assert_eq!(r("bytes=99999999999999999999999-", 10), Unsatisfiable);
        assert_eq!(r("bytes=-0", 10), Unsatisfiable);
        assert_eq!(r("bytes=0-", 0), Unsatisfiable);
        assert_eq!(r("bytes=-5", 0), Unsatisfiable);
    }

    #[test]
    fn ignored_ranges() {
        for value in ["bytes=5-2", "bytes=0-1,3-4", "items=0-1", "bytes=", "bytes=-", "bytes=a-b", "bytes=1", "bytes"] {
            assert_eq!(r(value, 10), Full, "{value}");
        }
    }
}
