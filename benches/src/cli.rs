//! Value parsers the benchmark binaries share on their clap command lines.

use std::fmt::Display;
use std::str::FromStr;
use std::time::Duration;

/// A count: a whole number, at least 1.
///
/// # Errors
///
/// What is wrong with `s`, in words.
pub fn at_least_one<T: FromStr + PartialEq + From<u8>>(s: &str) -> Result<T, String>
where
    T::Err: Display,
{
    match s.parse::<T>() {
        Ok(n) if n == T::from(0) => Err("must be at least 1".to_owned()),
        Ok(n) => Ok(n),
        Err(e) => Err(e.to_string()),
    }
}

/// A duration given in seconds as a decimal number (`0.5`).
///
/// # Errors
///
/// When `s` is not a non-negative number of seconds that fits a `Duration`.
pub fn seconds(s: &str) -> Result<Duration, String> {
    s.parse::<f64>()
        .ok()
        .and_then(|x| Duration::try_from_secs_f64(x).ok())
        .ok_or_else(|| "not a number of seconds".to_owned())
}

/// A testbed prefix that [`validate_prefix`](fairway_tests::testbed::validate_prefix)
/// accepts.
///
/// # Errors
///
/// Why the prefix cannot name namespaces.
pub fn testbed_prefix(s: &str) -> Result<String, String> {
    fairway_tests::testbed::validate_prefix(s).map_err(|e| e.to_string())?;
    Ok(s.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_seconds_and_prefixes() {
        assert_eq!(at_least_one::<usize>("3"), Ok(3));
        assert_eq!(at_least_one::<u64>("0"), Err("must be at least 1".to_owned()));
        assert!(at_least_one::<u32>("-1").is_err());
        assert_eq!(seconds("0.5"), Ok(Duration::from_millis(500)));
        for bad in ["-1", "nan", "inf", "1e30", "x"] {
            assert_eq!(seconds(bad), Err("not a number of seconds".to_owned()), "{bad}");
        }
        assert_eq!(testbed_prefix("fwb"), Ok("fwb".to_owned()));
        assert!(testbed_prefix("a/b").is_err());
    }
}
