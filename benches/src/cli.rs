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

/// A measuring window in seconds ([`seconds`]): a window of no time
/// measures nothing.
///
/// # Errors
///
/// When `s` is not a number of seconds, or is 0.
pub fn positive_seconds(s: &str) -> Result<Duration, String> {
    match seconds(s)? {
        window if window.is_zero() => Err("must be more than 0".to_owned()),
        window => Ok(window),
    }
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

/// For the binaries' tests: checks that `command`'s long help names each
/// of `options` at the start of a line, that every argument is explained,
/// and that the long and short help fit 80 columns; returns the long help.
///
/// # Panics
///
/// When one of these does not hold.
#[must_use]
pub fn checked_help(mut command: clap::Command, options: &[&str]) -> String {
    let long = command.render_long_help().to_string();
    for option in options {
        let named = long.lines().any(|l| l.trim_start().split(' ').next() == Some(option));
        assert!(named, "{option} is not in the help:\n{long}");
    }
    for argument in command.get_arguments() {
        assert!(argument.get_help().is_some(), "{} is not explained", argument.get_id());
    }
    let short = command.render_help().to_string();
    for help in [&long, &short] {
        let wide: Vec<&str> = help.lines().filter(|l| l.chars().count() > 80).collect();
        assert!(wide.is_empty(), "longer than 80 columns: {wide:#?}");
    }
    long
}

/// For the binaries' tests: whether parsing stopped to show the help, as
/// `-h` and `--help` do, with exit status 0.
#[must_use]
pub fn shows_help<T: std::fmt::Debug>(parsed: Result<T, clap::Error>) -> bool {
    parsed.is_err_and(|e| e.kind() == clap::error::ErrorKind::DisplayHelp && e.exit_code() == 0)
}

/// For the binaries' tests: the message `main` prints for a refused
/// command line (clap's, then the usage), after checking that it exits
/// with status 2.
///
/// # Panics
///
/// When the command line was accepted, or refused with another status.
#[track_caller]
pub fn refusal<T: std::fmt::Debug>(parsed: Result<T, clap::Error>) -> String {
    let e = parsed.expect_err("the command line was accepted");
    assert_eq!(e.exit_code(), 2, "{e}");
    e.to_string()
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
