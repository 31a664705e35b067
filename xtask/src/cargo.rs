//! Running cargo (and other programs) from the workspace root, and turning
//! their exit status into ours.

use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::{self, ExitStatus};

use crate::error::Failure;

/// Variables cargo sets for the xtask process itself (it is a package binary
/// run by `cargo run`). They describe xtask, not the crates a nested cargo
/// builds, so they are not handed on.
const XTASK_ONLY_ENV: &[&str] = &[
    "CARGO_MANIFEST_DIR",
    "CARGO_MANIFEST_PATH",
    "CARGO_CRATE_NAME",
    "CARGO_BIN_NAME",
    "CARGO_PRIMARY_PACKAGE",
    "CARGO_RUSTC_CURRENT_DIR",
];
const XTASK_ONLY_ENV_PREFIX: &str = "CARGO_PKG_";

/// How to reach cargo, and where the workspace is.
#[derive(Debug, Clone)]
pub struct Cargo {
    program: OsString,
    root: PathBuf,
}

impl Cargo {
    /// The cargo that runs xtask (`$CARGO`, falling back to `cargo` on the
    /// PATH), in the workspace that holds xtask.
    pub fn from_env() -> Cargo {
        let program = std::env::var_os("CARGO").filter(|p| !p.is_empty()).unwrap_or_else(|| OsString::from("cargo"));
        Cargo::new(program, workspace_root())
    }

    pub fn new(program: impl Into<OsString>, root: impl Into<PathBuf>) -> Cargo {
        Cargo { program: program.into(), root: root.into() }
    }

    /// The workspace root.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Where cargo puts what it builds: `$CARGO_TARGET_DIR` (relative to
    /// the workspace root, where cargo runs, when relative), else the
    /// workspace's `target/`. A `build.target-dir` in a cargo config file is
    /// not read.
    pub fn target_dir(&self) -> PathBuf {
        self.target_dir_from(std::env::var_os("CARGO_TARGET_DIR"))
    }

    fn target_dir_from(&self, env: Option<OsString>) -> PathBuf {
        match env.filter(|dir| !dir.is_empty()) {
            Some(dir) => self.root.join(dir),
            None => self.root.join("target"),
        }
    }

    /// `cargo run --release -p <package> [--features <features>] --bin <bin>
    /// -- <args>`: one of the workspace's binaries, built in release, with
    /// the user's arguments after the separator.
    pub fn run_release_bin(&self, package: &str, features: Option<&str>, bin: &str, args: &[OsString]) -> Invocation {
        let mut line: Vec<OsString> = vec!["run".into(), "--release".into(), "-p".into(), package.into()];
        if let Some(features) = features {
            line.extend(["--features".into(), features.into()]);
        }
        line.extend(["--bin".into(), bin.into(), "--".into()]);
        line.extend_from_slice(args);
        self.command(line)
    }

    /// `cargo <args>` run from the workspace root.
    pub fn command<I>(&self, args: I) -> Invocation
    where
        I: IntoIterator,
        I::Item: Into<OsString>,
    {
        Invocation {
            display_program: "cargo".to_owned(),
            program: self.program.clone(),
            args: args.into_iter().map(Into::into).collect(),
            dir: Some(self.root.clone()),
            env: Vec::new(),
        }
    }
}

/// The workspace root: the parent of xtask's manifest directory. Taken from
/// `CARGO_MANIFEST_DIR` as cargo sets it when running xtask, else from the
/// value it had when xtask was built.
fn workspace_root() -> PathBuf {
    let manifest_dir = std::env::var_os("CARGO_MANIFEST_DIR")
        .filter(|dir| !dir.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(env!("CARGO_MANIFEST_DIR")));
    manifest_dir.parent().map(Path::to_path_buf).unwrap_or(manifest_dir)
}

/// One program to run, with its arguments, directory and extra environment.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Invocation {
    display_program: String,
    program: OsString,
    args: Vec<OsString>,
    dir: Option<PathBuf>,
    env: Vec<(OsString, OsString)>,
}

impl Invocation {
    /// `program <args>`, found on the PATH, run from the current directory.
    pub fn new<I>(program: &str, args: I) -> Invocation
    where
        I: IntoIterator,
        I::Item: Into<OsString>,
    {
        Invocation {
            display_program: program.to_owned(),
            program: OsString::from(program),
            args: args.into_iter().map(Into::into).collect(),
            dir: None,
            env: Vec::new(),
        }
    }

    /// Runs it from `dir`.
    pub fn in_dir(mut self, dir: &Path) -> Invocation {
        self.dir = Some(dir.to_owned());
        self
    }

    /// Sets an environment variable for the child.
    pub fn env(mut self, key: &str, value: &str) -> Invocation {
        self.env.push((key.into(), value.into()));
        self
    }

    /// The command line as a user would type it (`cargo ...`, arguments
    /// quoted for a POSIX shell where needed).
    pub fn display(&self) -> String {
        let mut line = self.display_program.clone();
        for arg in &self.args {
            line.push(' ');
            line.push_str(&crate::shell::quote(arg));
        }
        line
    }

    /// The command to spawn: program, arguments, directory, and the
    /// environment without xtask's own cargo variables.
    pub fn to_command(&self) -> process::Command {
        let mut command = process::Command::new(&self.program);
        command.args(&self.args);
        if let Some(dir) = &self.dir {
            command.current_dir(dir);
        }
        for (key, _) in std::env::vars_os() {
            let key_str = key.to_string_lossy();
            if XTASK_ONLY_ENV.contains(&key_str.as_ref()) || key_str.starts_with(XTASK_ONLY_ENV_PREFIX) {
                command.env_remove(&key);
            }
        }
        command.envs(self.env.iter().cloned());
        command
    }

    /// Runs to completion with inherited stdio. `Ok` on success; otherwise a
    /// failure carrying the child's exit code.
    pub fn run(&self) -> Result<(), Failure> {
        let status = self.to_command().status().map_err(|err| {
            Failure::failed(format!(
                "could not start `{}` ({}): {err}",
                self.display(),
                Path::new(&self.program).display()
            ))
        })?;
        if status.success() {
            Ok(())
        } else {
            Err(Failure::Failed {
                message: format!("`{}` failed ({})", self.display(), describe(status)),
                code: exit_code(status),
            })
        }
    }
}

/// "exit status 101", "killed by signal 9".
pub fn describe(status: ExitStatus) -> String {
    if let Some(code) = status.code() {
        return format!("exit status {code}");
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return format!("killed by signal {signal}");
        }
    }
    status.to_string()
}

/// The code to exit with after a child ended with `status`: its own exit code
/// when it has one in 1..=255, 128 + signal when a signal killed it (as shells
/// do), else 1.
pub fn exit_code(status: ExitStatus) -> u8 {
    if status.success() {
        return 0;
    }
    if let Some(code) = status.code() {
        return u8::try_from(code).ok().filter(|&c| c != 0).unwrap_or(1);
    }
    #[cfg(unix)]
    {
        use std::os::unix::process::ExitStatusExt;
        if let Some(signal) = status.signal() {
            return u8::try_from(128 + signal).unwrap_or(1);
        }
    }
    1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn display_quotes_only_what_needs_it() {
        let cargo = Cargo::new("/opt/rust/bin/cargo", "/ws");
        let invocation = cargo.command(["test", "--workspace", "a b", "", "it's", "tcp::x"]);
        assert_eq!(invocation.display(), r"cargo test --workspace 'a b' '' 'it'\''s' tcp::x");
    }

    #[test]
    fn target_dir() {
        let cargo = Cargo::new("cargo", "/ws");
        assert_eq!(cargo.target_dir_from(None), Path::new("/ws/target"));
        assert_eq!(cargo.target_dir_from(Some("".into())), Path::new("/ws/target"));
        assert_eq!(cargo.target_dir_from(Some("/tmp/t".into())), Path::new("/tmp/t"));
        assert_eq!(cargo.target_dir_from(Some("out".into())), Path::new("/ws/out"));
    }

    #[test]
    fn workspace_root_is_the_parent_of_xtask() {
        let root = workspace_root();
        assert!(root.join("xtask").join("Cargo.toml").is_file(), "{root:?}");
        assert!(root.join("Cargo.toml").is_file(), "{root:?}");
    }

    #[cfg(unix)]
    #[test]
    fn exit_codes_propagate() {
        use std::os::unix::process::ExitStatusExt;
        // Raw wait statuses: exit code in the high byte, signal in the low bits.
        assert_eq!(exit_code(ExitStatus::from_raw(0)), 0);
        assert_eq!(exit_code(ExitStatus::from_raw(101 << 8)), 101);
        assert_eq!(exit_code(ExitStatus::from_raw(1 << 8)), 1);
        assert_eq!(exit_code(ExitStatus::from_raw(9)), 137);
        assert_eq!(describe(ExitStatus::from_raw(101 << 8)), "exit status 101");
        assert_eq!(describe(ExitStatus::from_raw(9)), "killed by signal 9");
    }

    #[cfg(unix)]
    #[test]
    fn run_reports_the_child_exit_code() {
        assert_eq!(Invocation::new("sh", ["-c", "exit 0"]).run(), Ok(()));
        let with_env = Invocation::new("sh", ["-c", r#"test "$XTASK_TEST_VAR" = yes"#]);
        assert_eq!(with_env.env("XTASK_TEST_VAR", "yes").run(), Ok(()));
        match Invocation::new("sh", ["-c", "exit 7"]).run() {
            Err(Failure::Failed { code, message }) => {
                assert_eq!(code, 7);
                assert_eq!(message, "`sh -c 'exit 7'` failed (exit status 7)");
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn missing_program_is_a_failure_not_a_panic() {
        let missing = Cargo::new("/nonexistent/xtask-no-such-cargo", "/");
        let err = missing.command(["--version"]).run().unwrap_err();
        assert_eq!(err.exit_code(), 1);
        assert!(err.to_string().contains("could not start"));
    }
}
