//! Logging: `tracing` events to standard error, filtered by an env-filter
//! directive (`info`, `fairway=debug,warn`, ...) from `--log` or
//! `RUST_LOG` (see [`crate::config::Config::log`]).

use std::io::IsTerminal;

use tracing_subscriber::EnvFilter;
use tracing_subscriber::filter::ParseError;

/// Why logging could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum LogError {
    /// The filter is not env-filter syntax.
    #[error("bad log filter '{filter}': {source}")]
    Filter {
        /// The filter given.
        filter: String,
        /// What is wrong with it.
        source: ParseError,
    },
    /// A global subscriber was installed before (logging is set up once per
    /// process).
    #[error("logging is already set up")]
    AlreadySet,
}

/// Installs the process's subscriber: events that pass `filter` go to
/// standard error, in colour when it is a terminal.
///
/// # Errors
///
/// A bad filter, or a second call.
pub fn init(filter: &str) -> Result<(), LogError> {
    let env_filter =
        EnvFilter::try_new(filter).map_err(|source| LogError::Filter { filter: filter.to_owned(), source })?;
    tracing_subscriber::fmt()
        .with_env_filter(env_filter)
        .with_writer(std::io::stderr)
        .with_ansi(std::io::stderr().is_terminal())
        .with_thread_names(true)
        .try_init()
        .map_err(|_| LogError::AlreadySet)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_filter_is_refused_and_logging_is_set_up_once() {
        let e = init("fairway=loud").unwrap_err();
        assert!(e.to_string().starts_with("bad log filter 'fairway=loud': "), "{e}");
        init("warn").unwrap();
        tracing::warn!("logging works");
        assert!(matches!(init("info"), Err(LogError::AlreadySet)));
    }
}
