//! [`TestbedError`]: why building, inspecting or removing a testbed failed.
//!
//! Every variant displays as one line that says what failed and, when a
//! program was run, the command line and what it printed on stderr, so a
//! failing test or `cargo xtask testbed up` shows the cause without a rerun.

use std::io;
use std::path::PathBuf;
use std::time::Duration;

/// Why a testbed operation failed.
#[derive(Debug, thiserror::Error)]
pub enum TestbedError {
    /// The process lacks `CAP_NET_ADMIN` or `CAP_SYS_ADMIN` (namespaces,
    /// veth, bridges and mounts need both).
    #[error("needs root (CAP_NET_ADMIN): run as root or via cargo xtask test")]
    NotRoot,
    /// The configuration cannot be built (bad prefix, too many clients for
    /// the subnet, a link setting out of range, ...).
    #[error("invalid testbed configuration: {0}")]
    Config(String),
    /// A program ran and exited unsuccessfully.
    #[error("{what}: `{command}` failed ({status}): {stderr}")]
    Command {
        /// The step that failed, e.g. "creating the bridge".
        what: String,
        /// The command line, as a shell would take it.
        command: String,
        /// "exit status 2", "killed by signal 9".
        status: String,
        /// Its stderr (or stdout when stderr was empty), on one line.
        stderr: String,
    },
    /// A program could not be started at all (not installed, not
    /// executable).
    #[error("{what}: could not run `{command}`: {error}")]
    Spawn {
        /// The step that failed.
        what: String,
        /// The command line.
        command: String,
        /// What `exec` reported.
        error: io::Error,
    },
    /// A program did not finish in time; it was killed.
    #[error("`{command}` did not finish within {timeout:?} and was killed; stderr: {stderr}")]
    Timeout {
        /// The command line.
        command: String,
        /// The bound it exceeded.
        timeout: Duration,
        /// What it had printed on stderr by then, on one line.
        stderr: String,
    },
    /// A background program did not print what shows it is ready.
    #[error("`{command}` {why} printing {expected}; stderr: {stderr}")]
    NotReady {
        /// The command line.
        command: String,
        /// "did not within 5s", "exited (exit status 1) before".
        why: String,
        /// What was awaited, e.g. "`listening on` on stderr".
        expected: String,
        /// What it had printed on stderr, on one line.
        stderr: String,
    },
    /// A file operation failed (the state directory, a pidfile, a
    /// namespace file).
    #[error("{what}: {error}")]
    Io {
        /// What was being done, naming the path.
        what: String,
        /// The underlying error.
        error: io::Error,
    },
    /// A client has emulated link settings but no `fairway-linkem` binary
    /// was found.
    #[error(
        "fairway-linkem not found (looked at {}): build it with \
         `cargo build --release -p fairway-nic --bin fairway-linkem` or set FAIRWAY_LINKEM=/path",
        display_paths(.looked)
    )]
    LinkemNotFound {
        /// The paths that were tried.
        looked: Vec<PathBuf>,
    },
    /// A link emulator exited right after it was started.
    #[error("the link emulator of port {port} exited at start ({status}); its log {log:?}: {output}")]
    EmulatorExited {
        /// The switch port whose link it was to emulate: `c{i}` for client
        /// `i`, `srv` for the server.
        port: String,
        /// How it ended.
        status: String,
        /// Where its output went.
        log: PathBuf,
        /// The end of that output, on one line.
        output: String,
    },
    /// `down` did what it could but some steps failed; each is listed.
    #[error("teardown of `{prefix}` incomplete: {}", join_errors(.errors))]
    Teardown {
        /// The testbed's prefix.
        prefix: String,
        /// Every step that failed, in order.
        errors: Vec<TestbedError>,
    },
}

impl TestbedError {
    pub(crate) fn io(what: impl Into<String>, error: io::Error) -> TestbedError {
        TestbedError::Io { what: what.into(), error }
    }
}

/// Puts a program's output on one line: trimmed lines joined by "; ", and
/// no more than `MAX` characters (the end kept: that is where errors are).
pub(crate) fn one_line(text: &str) -> String {
    const MAX: usize = 600;
    let joined = text.lines().map(str::trim).filter(|line| !line.is_empty()).collect::<Vec<_>>().join("; ");
    let count = joined.chars().count();
    if count <= MAX {
        return joined;
    }
    let tail: String = joined.chars().skip(count - MAX).collect();
    format!("...{tail}")
}

fn display_paths(paths: &[PathBuf]) -> String {
    if paths.is_empty() {
        return "nothing".to_owned();
    }
    paths.iter().map(|p| p.display().to_string()).collect::<Vec<_>>().join(", ")
}

fn join_errors(errors: &[TestbedError]) -> String {
    errors.iter().map(ToString::to_string).collect::<Vec<_>>().join("; ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn output_on_one_line() {
        assert_eq!(
            one_line("  RTNETLINK answers: File exists\n\n  second \n"),
            "RTNETLINK answers: File exists; second"
        );
        assert_eq!(one_line(""), "");
        let long = "x".repeat(1000);
        let line = one_line(&long);
        assert!(line.starts_with("...") && line.len() == 603, "{line}");
    }

    #[test]
    fn errors_are_one_line() {
        let e = TestbedError::Command {
            what: "creating the bridge".into(),
            command: "ip -n fw-sw link add name br0 type bridge".into(),
            status: "exit status 2".into(),
            stderr: one_line("RTNETLINK answers: File exists\n"),
        };
        assert_eq!(
            e.to_string(),
            "creating the bridge: `ip -n fw-sw link add name br0 type bridge` failed (exit status 2): \
             RTNETLINK answers: File exists"
        );
        let e = TestbedError::Teardown { prefix: "fw".into(), errors: vec![e, TestbedError::NotRoot] };
        assert!(!e.to_string().contains('\n'));
        let e = TestbedError::LinkemNotFound { looked: vec!["/a".into(), "/b".into()] };
        assert!(e.to_string().starts_with("fairway-linkem not found (looked at /a, /b): build it with `cargo"));
    }
}
