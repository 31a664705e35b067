//! Parsing of the emulator's settings, in tc's units: durations (`250us`,
//! `25ms`, `1.5s`), rates in bits per second (`800kbit`, `100mbit`, `1gbit`,
//! decimal multiples), sizes in bytes (`1500b`, `256kb`, `1mb`, binary
//! multiples as in tc; `kib`/`mib` are accepted as synonyms) and
//! percentages (`1%`, `0.5%`, or a bare `0.5` meaning percent, as netem).
//!
//! Each parser returns a [`UnitError`] whose message is one line that names
//! the value and shows the accepted forms, so a command-line parser can print
//! it as it is.

use std::time::Duration;

/// The longest delay accepted: longer is surely a typo, and keeps the
/// microsecond arithmetic far from overflow.
pub const MAX_DURATION: Duration = Duration::from_secs(3600);

/// A setting that does not parse: the message says what was expected.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct UnitError(String);

/// Splits `25ms` into `(25.0, "ms")`: a non-negative decimal number, then a
/// unit (possibly empty), with surrounding blanks ignored.
fn number_and_unit(s: &str) -> Option<(f64, &str)> {
    let s = s.trim();
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    let digits = &s[..end];
    if digits.is_empty() || digits.starts_with('.') && digits.len() == 1 {
        return None;
    }
    let number: f64 = digits.parse().ok()?;
    number.is_finite().then_some((number, s[end..].trim()))
}

/// Parses a duration: `250us` (or `µs`), `25ms`, `1.5s`; a bare `0` is zero.
/// Rounded to the nearest microsecond.
///
/// # Errors
///
/// No unit on a non-zero number, an unknown unit, or more than an hour.
pub fn parse_duration(s: &str) -> Result<Duration, UnitError> {
    let bad = || UnitError(format!("`{s}` is not a duration: write e.g. 25ms, 250us or 1.5s"));
    let (n, unit) = number_and_unit(s).ok_or_else(bad)?;
    let micros = match unit.to_ascii_lowercase().as_str() {
        "us" | "µs" => n,
        "ms" => n * 1e3,
        "s" => n * 1e6,
        "" if n == 0.0 => 0.0,
        "" => return Err(UnitError(format!("`{s}` has no unit: write {s}ms, {s}us or {s}s"))),
        _ => return Err(bad()),
    };
    if micros > MAX_DURATION.as_micros() as f64 {
        return Err(UnitError(format!("`{s}` is more than an hour")));
    }
    Ok(Duration::from_micros(micros.round() as u64))
}

/// Parses a rate in bits per second: `9600bit`, `800kbit`, `100mbit`,
/// `1gbit` (decimal multiples, any case); `0` or `unlimited` mean no limit
/// and parse as 0.
///
/// # Errors
///
/// No unit on a non-zero number, a unit in bytes per second (tc's `bps`),
/// an unknown unit, or above 10^15 bit/s.
pub fn parse_rate(s: &str) -> Result<u64, UnitError> {
    if s.trim().eq_ignore_ascii_case("unlimited") {
        return Ok(0);
    }
    let bad = || UnitError(format!("`{s}` is not a rate: write e.g. 100mbit, 800kbit or 1gbit (bits per second)"));
    let (n, unit) = number_and_unit(s).ok_or_else(bad)?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "bit" => 1.0,
        "kbit" => 1e3,
        "mbit" => 1e6,
        "gbit" => 1e9,
        "tbit" => 1e12,
        "" if n == 0.0 => 0.0,
        "" => return Err(UnitError(format!("`{s}` has no unit: write {s}mbit, {s}kbit or {s}bit"))),
        u if u.ends_with("bps") => {
            return Err(UnitError(format!(
                "`{s}` is in bytes per second, which is ambiguous: write the rate in bits, e.g. 100mbit"
            )));
        }
        _ => return Err(bad()),
    };
    let bps = n * scale;
    if bps > 1e15 {
        return Err(UnitError(format!("`{s}` is more than 1000 Tbit/s")));
    }
    Ok(bps.round() as u64)
}

/// Parses a size in bytes: `1500b` or a bare `1500`, `256kb` (or `k`, `kib`:
/// 1024 bytes, as tc), `4mb` (or `m`, `mib`: 1024², as tc), any case.
///
/// # Errors
///
/// An unknown unit (`kbit` is a rate), or 1 TiB or more.
pub fn parse_size(s: &str) -> Result<usize, UnitError> {
    let bad = || UnitError(format!("`{s}` is not a size: write e.g. 1500b, 256kb or 4mb (kb = 1024 bytes, as tc)"));
    let (n, unit) = number_and_unit(s).ok_or_else(bad)?;
    let scale = match unit.to_ascii_lowercase().as_str() {
        "" | "b" => 1.0,
        "k" | "kb" | "kib" => 1024.0,
        "m" | "mb" | "mib" => 1024.0 * 1024.0,
        "g" | "gb" | "gib" => 1024.0 * 1024.0 * 1024.0,
        _ => return Err(bad()),
    };
    let bytes = n * scale;
    if bytes >= (1u64 << 40) as f64 {
        return Err(UnitError(format!("`{s}` is 1 TiB or more")));
    }
    Ok(bytes.round() as usize)
}

/// Parses a percentage, `1%`, `0.5%` or a bare `0.5` (percent, as netem), and
/// returns it as a probability in `[0, 1]`.
///
/// # Errors
///
/// Not a number, an unknown suffix, or more than 100 %.
pub fn parse_percent(s: &str) -> Result<f64, UnitError> {
    let bad = || UnitError(format!("`{s}` is not a percentage: write e.g. 1% or 0.5%"));
    let (n, unit) = number_and_unit(s).ok_or_else(bad)?;
    if !matches!(unit, "%" | "") {
        return Err(bad());
    }
    if n > 100.0 {
        return Err(UnitError(format!("`{s}` is more than 100 %")));
    }
    Ok(n / 100.0)
}

/// Writes a duration the way [`parse_duration`] reads it: `25ms`, `250us`,
/// `2s`.
pub fn format_duration(d: Duration) -> String {
    let us = d.as_micros();
    if us == 0 {
        "0ms".to_owned()
    } else if us.is_multiple_of(1_000_000) {
        format!("{}s", us / 1_000_000)
    } else if us.is_multiple_of(1000) {
        format!("{}ms", us / 1000)
    } else {
        format!("{us}us")
    }
}

/// Writes bits per second the way [`parse_rate`] reads them: `100mbit`,
/// `2500kbit`, `unlimited` for 0.
pub fn format_rate(bps: u64) -> String {
    if bps == 0 {
        return "unlimited".to_owned();
    }
    for (scale, unit) in [(1_000_000_000_000, "tbit"), (1_000_000_000, "gbit"), (1_000_000, "mbit"), (1000, "kbit")] {
        if bps.is_multiple_of(scale) {
            return format!("{}{unit}", bps / scale);
        }
    }
    format!("{bps}bit")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn durations() {
        assert_eq!(parse_duration("25ms"), Ok(Duration::from_millis(25)));
        assert_eq!(parse_duration(" 2.5ms "), Ok(Duration::from_micros(2500)));
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("250µs"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert_eq!(parse_duration("25MS"), Ok(Duration::from_millis(25)));
        assert_eq!(parse_duration("25").unwrap_err().to_string(), "`25` has no unit: write 25ms, 25us or 25s");
        assert!(parse_duration("-1ms").is_err());
        assert!(parse_duration("ms").is_err());
        assert!(parse_duration(".").is_err());
        assert!(parse_duration("1h").is_err());
        assert!(parse_duration("2e3ms").is_err());
        assert!(parse_duration("3601s").is_err());
    }

    #[test]
    fn rates() {
        assert_eq!(parse_rate("100mbit"), Ok(100_000_000));
        assert_eq!(parse_rate("1Gbit"), Ok(1_000_000_000));
        assert_eq!(parse_rate("800kbit"), Ok(800_000));
        assert_eq!(parse_rate("2.5mbit"), Ok(2_500_000));
        assert_eq!(parse_rate("9600bit"), Ok(9600));
        assert_eq!(parse_rate("0"), Ok(0));
        assert_eq!(parse_rate("unlimited"), Ok(0));
        assert!(parse_rate("100").unwrap_err().to_string().contains("no unit"));
        assert!(parse_rate("100mbps").unwrap_err().to_string().contains("bytes per second"));
        assert!(parse_rate("100mb").is_err());
    }

    #[test]
    fn sizes_use_binary_multiples_as_tc() {
        assert_eq!(parse_size("1500b"), Ok(1500));
        assert_eq!(parse_size("1500"), Ok(1500));
        assert_eq!(parse_size("256kb"), Ok(256 * 1024));
        assert_eq!(parse_size("256KiB"), Ok(256 * 1024));
        assert_eq!(parse_size("1mb"), Ok(1 << 20));
        assert_eq!(parse_size("1.5k"), Ok(1536));
        assert!(parse_size("10kbit").is_err());
        assert!(parse_size("2048gb").is_err());
    }

    #[test]
    fn percentages_are_probabilities() {
        assert_eq!(parse_percent("1%"), Ok(0.01));
        assert_eq!(parse_percent("0.5%"), Ok(0.005));
        assert_eq!(parse_percent("0.5"), Ok(0.005));
        assert_eq!(parse_percent("100%"), Ok(1.0));
        assert_eq!(parse_percent("0%"), Ok(0.0));
        assert!(parse_percent("101%").is_err());
        assert!(parse_percent("1 percent").is_err());
    }

    #[test]
    fn shown_values_parse_back() {
        for d in [0, 1, 250, 25_000, 1_500_000, 2_000_000] {
            let d = Duration::from_micros(d);
            assert_eq!(parse_duration(&format_duration(d)), Ok(d));
        }
        for r in [0, 9600, 800_000, 100_000_000, 2_500_000, 1_000_000_000] {
            assert_eq!(parse_rate(&format_rate(r)), Ok(r));
        }
    }
}
