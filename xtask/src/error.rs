//! How xtask stops: a message for the user and the exit code to leave with.

use std::fmt;

/// Exit code for a command line xtask does not understand.
const USAGE_EXIT_CODE: u8 = 2;

/// Why a subcommand did not finish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Failure {
    /// The command line was wrong. Exit code 2, with a pointer to the help
    /// (of the subcommand `topic` when there is one).
    Usage { message: String, topic: Option<&'static str> },
    /// Something xtask ran or checked failed. `code` is the exit code to
    /// propagate (a child's own exit code when there is one).
    Failed { message: String, code: u8 },
    /// A child failed and has said why itself, last (the soak's verdict
    /// line): exit with its code and print nothing more.
    Reported { code: u8 },
}

impl Failure {
    pub fn usage(message: impl Into<String>) -> Failure {
        Failure::Usage { message: message.into(), topic: None }
    }

    /// A usage error in the arguments of subcommand `topic`.
    pub fn usage_of(topic: &'static str, message: impl Into<String>) -> Failure {
        Failure::Usage { message: message.into(), topic: Some(topic) }
    }

    /// A failure that is not a child's exit status: exit code 1.
    pub fn failed(message: impl Into<String>) -> Failure {
        Failure::Failed { message: message.into(), code: 1 }
    }

    pub fn exit_code(&self) -> u8 {
        match self {
            Failure::Usage { .. } => USAGE_EXIT_CODE,
            Failure::Failed { code, .. } | Failure::Reported { code } => *code,
        }
    }
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Failure::Usage { message, topic } => {
                let help = topic.map_or("help".to_owned(), |t| format!("help {t}"));
                write!(f, "{message}\n\nRun `cargo xtask {help}` for usage.")
            }
            Failure::Failed { message, .. } => f.write_str(message),
            Failure::Reported { code } => write!(f, "exit status {code}"),
        }
    }
}
