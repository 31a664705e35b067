//! HTTP dates (RFC 9110 §5.6.7): the `Date` and `Last-Modified` values this
//! server sends, and the `If-Modified-Since` / `If-Range` values it reads.
//!
//! Sending uses IMF-fixdate only (`Sun, 06 Nov 1994 08:49:37 GMT`, always
//! 29 bytes). Reading accepts all three formats, as the RFC requires of a
//! recipient: IMF-fixdate, RFC 850 (`Sunday, 06-Nov-94 08:49:37 GMT`) and
//! asctime (`Sun Nov  6 08:49:37 1994`).
//!
//! Nothing here reads a clock: [`DateCache`] is handed the time by the
//! runtime, which updates it once a second.

/// The length of an IMF-fixdate.
pub const HTTP_DATE_LEN: usize = 29;

/// The last second an IMF-fixdate can show (9999-12-31 23:59:59 UTC).
const MAX_SECS: u64 = 253_402_300_799;

const SECS_PER_DAY: u64 = 86_400;
const WEEKDAYS: [&[u8; 3]; 7] = [b"Thu", b"Fri", b"Sat", b"Sun", b"Mon", b"Tue", b"Wed"]; // 1970-01-01 was a Thursday
const MONTHS: [&[u8; 3]; 12] =
    [b"Jan", b"Feb", b"Mar", b"Apr", b"May", b"Jun", b"Jul", b"Aug", b"Sep", b"Oct", b"Nov", b"Dec"];
/// Days before each month in a common year.
const DAYS_BEFORE_MONTH: [u64; 12] = [0, 31, 59, 90, 120, 151, 181, 212, 243, 273, 304, 334];

fn is_leap(year: u64) -> bool {
    year.is_multiple_of(4) && (!year.is_multiple_of(100) || year.is_multiple_of(400))
}

/// Leap years in `1..=year`.
fn leaps_through(year: u64) -> u64 {
    year / 4 - year / 100 + year / 400
}

/// Days from 1970-01-01 to January 1st of `year` (`year >= 1970`).
fn days_before_year(year: u64) -> u64 {
    365 * (year - 1970) + leaps_through(year - 1) - leaps_through(1969)
}

fn days_in_month(year: u64, month: usize) -> u64 {
    match month {
        1 if is_leap(year) => 29,
        1 => 28,
        3 | 5 | 8 | 10 => 30,
        _ => 31,
    }
}

/// Formats `unix_secs` (seconds since 1970-01-01 UTC) as an IMF-fixdate.
/// Times past the year 9999 show its last second.
#[must_use]
pub fn format_http_date(unix_secs: u64) -> [u8; HTTP_DATE_LEN] {
    let secs = unix_secs.min(MAX_SECS);
    let days = secs / SECS_PER_DAY;
    let in_day = secs % SECS_PER_DAY;
    // A year has at least 365 days, so this guess is never early; step back
    // over the leap days it missed (at most a few).
    let mut year = 1970 + days / 365;
    while days_before_year(year) > days {
        year -= 1;
    }
    let mut day_of_year = days - days_before_year(year);
    let mut month = 0;
    while day_of_year >= days_in_month(year, month) {
        day_of_year -= days_in_month(year, month);
        month += 1;
    }

    let mut out = *b"Thu, 01 Jan 1970 00:00:00 GMT";
    out[..3].copy_from_slice(WEEKDAYS[(days % 7) as usize]);
    two_digits(&mut out[5..7], day_of_year + 1);
    out[8..11].copy_from_slice(MONTHS[month]);
    two_digits(&mut out[12..14], year / 100);
    two_digits(&mut out[14..16], year % 100);
    two_digits(&mut out[17..19], in_day / 3600);
    two_digits(&mut out[20..22], in_day / 60 % 60);
    two_digits(&mut out[23..25], in_day % 60);
    out
}

fn two_digits(out: &mut [u8], n: u64) {
    out[0] = b'0' + (n / 10 % 10) as u8;
    out[1] = b'0' + (n % 10) as u8;
}

/// Parses an HTTP-date in any of the three formats into seconds since
/// 1970-01-01 UTC. `None` for anything else, and for dates before 1970
/// (which no file here can predate, so ignoring them changes nothing).
///
/// RFC 850's two-digit years are read as 1970–2069.
#[must_use]
pub fn parse_http_date(text: &[u8]) -> Option<u64> {
    let text = text.trim_ascii();
    let comma = text.iter().position(|&b| b == b',');
    let (year, month, day, time) = match comma {
        // IMF-fixdate: "Sun, 06 Nov 1994 08:49:37 GMT"
        Some(3) => {
            let rest = text.get(4..)?;
            let [b' ', d1, d2, b' ', m1, m2, m3, b' ', y1, y2, y3, y4, b' ', time @ .., b' ', b'G', b'M', b'T'] = rest
            else {
                return None;
            };
            let year = digits(&[*y1, *y2, *y3, *y4])?;
            (year, month_index([*m1, *m2, *m3])?, digits(&[*d1, *d2])?, time)
        }
        // RFC 850: "Sunday, 06-Nov-94 08:49:37 GMT"
        Some(6..=9) => {
            let rest = text.get(comma? + 1..)?;
            let [b' ', d1, d2, b'-', m1, m2, m3, b'-', y1, y2, b' ', time @ .., b' ', b'G', b'M', b'T'] = rest else {
                return None;
            };
            let yy = digits(&[*y1, *y2])?;
            let year = if yy < 70 { 2000 + yy } else { 1900 + yy };
            (year, month_index([*m1, *m2, *m3])?, digits(&[*d1, *d2])?, time)
        }
        // asctime: "Sun Nov  6 08:49:37 1994"
        None => {
            let [_, _, _, b' ', m1, m2, m3, b' ', d1, d2, b' ', time @ .., b' ', y1, y2, y3, y4] = text else {
                return None;
            };
            let day = if *d1 == b' ' { digits(&[*d2])? } else { digits(&[*d1, *d2])? };
            (digits(&[*y1, *y2, *y3, *y4])?, month_index([*m1, *m2, *m3])?, day, time)
        }
        Some(_) => return None,
    };
    let [h1, h2, b':', n1, n2, b':', s1, s2] = time else { return None };
    let (hour, minute, second) = (digits(&[*h1, *h2])?, digits(&[*n1, *n2])?, digits(&[*s1, *s2])?);
    // A leap second (60) is read as the second before it.
    if year < 1970 || day == 0 || day > days_in_month(year, month) || hour > 23 || minute > 59 || second > 60 {
        return None;
    }
    let leap_day = u64::from(month > 1 && is_leap(year));
    let days = days_before_year(year) + DAYS_BEFORE_MONTH[month] + leap_day + day - 1;
    Some(days * SECS_PER_DAY + hour * 3600 + minute * 60 + second.min(59))
}

fn digits(text: &[u8]) -> Option<u64> {
    text.iter().try_fold(0u64, |n, &b| b.is_ascii_digit().then(|| n * 10 + u64::from(b - b'0')))
}

fn month_index(name: [u8; 3]) -> Option<usize> {
    MONTHS.iter().position(|m| **m == name)
}

/// The `Date` header's value, formatted once per second rather than once
/// per response. The runtime owns one per shard and calls [`update`] with
/// the wall clock each turn; it is cheap when the second has not changed.
///
/// [`update`]: DateCache::update
#[derive(Clone, Debug)]
pub struct DateCache {
    secs: u64,
    text: [u8; HTTP_DATE_LEN],
}

impl DateCache {
    /// A cache showing `unix_secs`.
    #[must_use]
    pub fn new(unix_secs: u64) -> DateCache {
        DateCache { secs: unix_secs, text: format_http_date(unix_secs) }
    }

    /// Moves the cache to `unix_secs`; returns whether the text changed.
    pub fn update(&mut self, unix_secs: u64) -> bool {
        if unix_secs == self.secs {
            return false;
        }
        *self = DateCache::new(unix_secs);
        true
    }

    /// The IMF-fixdate for the cached second.
    #[must_use]
    pub fn as_bytes(&self) -> &[u8] {
        &self.text
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // RFC 9110 §5.6.7's example, in its three spellings.
    const EXAMPLE: u64 = 784_111_777;

    #[test]
    fn formats_imf_fixdate() {
        assert_eq!(&format_http_date(EXAMPLE), b"Sun, 06 Nov 1994 08:49:37 GMT");
        assert_eq!(&format_http_date(0), b"Thu, 01 Jan 1970 00:00:00 GMT");
        assert_eq!(&format_http_date(951_782_400), b"Tue, 29 Feb 2000 00:00:00 GMT");
        assert_eq!(&format_http_date(4_107_542_399), b"Sun, 28 Feb 2100 23:59:59 GMT"); // 2100 is not leap
        assert_eq!(&format_http_date(4_133_980_799), b"Fri, 31 Dec 2100 23:59:59 GMT");
        assert_eq!(&format_http_date(u64::MAX), b"Fri, 31 Dec 9999 23:59:59 GMT");
    }

    #[test]
    fn parses_the_three_formats() {
        assert_eq!(parse_http_date(b"Sun, 06 Nov 1994 08:49:37 GMT"), Some(EXAMPLE));
        assert_eq!(parse_http_date(b"Sunday, 06-Nov-94 08:49:37 GMT"), Some(EXAMPLE));
        assert_eq!(parse_http_date(b"Sun Nov  6 08:49:37 1994"), Some(EXAMPLE));
        assert_eq!(parse_http_date(b"Thu, 01 Jan 1970 00:00:00 GMT"), Some(0));
        assert_eq!(parse_http_date(b"Wednesday, 01-Jan-31 00:00:00 GMT"), Some(1_924_992_000));
    }

    #[test]
    fn rejects_what_is_not_a_date() {
        for bad in [
            &b""[..],
            b"yesterday",
            b"Sun, 06 Nov 1994 08:49:37 UTC",
            b"Sun, 6 Nov 1994 08:49:37 GMT",
            b"Sun, 31 Nov 1994 08:49:37 GMT",
            b"Sun, 29 Feb 1900 08:49:37 GMT",
            b"Sun, 06 Nov 1994 24:00:00 GMT",
            b"Sun, 06 Foo 1994 08:49:37 GMT",
            b"Sun, 06 Nov 1969 08:49:37 GMT",
            b"Sun, 06 Nov 19x4 08:49:37 GMT",
            b"Sun Nov 6 08:49:37 1994",
            b",,,,,,,,,,,,,,,,,,,,,,,,,,,,,,",
        ] {
            assert_eq!(parse_http_date(bad), None, "{}", String::from_utf8_lossy(bad));
        }
    }

    #[test]
    fn formatting_and_parsing_agree_every_day_for_centuries() {
        let mut secs = 0;
        while secs < MAX_SECS {
            let text = format_http_date(secs);
            assert_eq!(parse_http_date(&text), Some(secs), "{}", String::from_utf8_lossy(&text));
            secs += SECS_PER_DAY + 3_661;
        }
    }

    #[test]
    fn the_cache_changes_once_a_second() {
        let mut cache = DateCache::new(EXAMPLE);
        assert!(!cache.update(EXAMPLE));
        assert!(cache.update(EXAMPLE + 1));
        assert_eq!(cache.as_bytes(), b"Sun, 06 Nov 1994 08:49:38 GMT");
    }
}
