//! Running programs for the testbed and its tests: on the host (`ip -n NS
//! ...`, which acts on a namespace without entering it) and inside a
//! namespace (`ip netns exec NS ...`). Every run is bounded by a timeout and
//! captures stdout and stderr; a [`Spawned`] child is killed when dropped.

use std::ffi::OsStr;
use std::io::Read;
use std::path::PathBuf;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::TestbedError;
use super::error::one_line;

/// The bound of [`exec`] and of every command the testbed runs itself.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);

/// How often a waiting loop looks again.
const POLL: Duration = Duration::from_millis(5);

/// How long to wait for the output pipes to close after the child exited
/// (a grandchild may hold them open; its output is then cut short).
const DRAIN: Duration = Duration::from_secs(1);

/// A finished program: its status and everything it printed.
#[derive(Debug, Clone)]
pub struct ExecOutput {
    /// The command line, as a shell would take it.
    pub command: String,
    /// How it ended.
    pub status: ExitStatus,
    /// Everything it wrote to stdout.
    pub stdout: Vec<u8>,
    /// Everything it wrote to stderr.
    pub stderr: Vec<u8>,
}

impl ExecOutput {
    /// Whether it exited with status 0.
    pub fn success(&self) -> bool {
        self.status.success()
    }

    /// stdout as text (invalid UTF-8 replaced).
    pub fn stdout_text(&self) -> String {
        String::from_utf8_lossy(&self.stdout).into_owned()
    }

    /// stderr as text (invalid UTF-8 replaced).
    pub fn stderr_text(&self) -> String {
        String::from_utf8_lossy(&self.stderr).into_owned()
    }

    /// `Ok(self)` when it succeeded, else an error naming the command, its
    /// status and its stderr.
    pub fn checked(self) -> Result<ExecOutput, TestbedError> {
        self.checked_as("running a command")
    }

    /// [`ExecOutput::checked`] with `what` describing the step.
    pub fn checked_as(self, what: &str) -> Result<ExecOutput, TestbedError> {
        if self.success() {
            return Ok(self);
        }
        let stderr = self.stderr_text();
        let text = if stderr.trim().is_empty() { self.stdout_text() } else { stderr };
        Err(TestbedError::Command {
            what: what.to_owned(),
            command: self.command,
            status: describe(self.status),
            stderr: one_line(&text),
        })
    }
}

/// Runs `cmd` inside namespace `ns` (`ip netns exec ns cmd...`) to
/// completion, bounded by [`DEFAULT_TIMEOUT`]. An `Err` means it could not
/// start or timed out; a non-zero exit is an `Ok` whose
/// [`status`](ExecOutput::status) says so (chain
/// [`checked`](ExecOutput::checked) to make it an error).
pub fn exec<S: AsRef<OsStr>>(ns: &str, cmd: &[S]) -> Result<ExecOutput, TestbedError> {
    exec_timeout(ns, cmd, DEFAULT_TIMEOUT)
}

/// [`exec`] with another bound. On timeout the program is killed.
pub fn exec_timeout<S: AsRef<OsStr>>(ns: &str, cmd: &[S], timeout: Duration) -> Result<ExecOutput, TestbedError> {
    spawn(ns, cmd)?.wait_timeout(timeout)
}

/// Starts `cmd` inside namespace `ns` in the background, stdin closed and
/// its output captured. Dropping the [`Spawned`] kills it.
pub fn spawn<S: AsRef<OsStr>>(ns: &str, cmd: &[S]) -> Result<Spawned, TestbedError> {
    let mut command = Command::new("ip");
    command.args(["netns", "exec", ns]).args(cmd);
    Spawned::start(&format!("running a command in namespace {ns}"), command)
}

/// Starts `cmd` in this process's own network namespace (no `ip netns
/// exec`: no root needed), as [`spawn`] does in a namespace.
pub fn spawn_here<S: AsRef<OsStr>>(cmd: &[S]) -> Result<Spawned, TestbedError> {
    let (program, args) = cmd.split_first().ok_or_else(|| TestbedError::Command {
        what: "running a command".to_owned(),
        command: String::new(),
        status: "not started".to_owned(),
        stderr: "an empty command line".to_owned(),
    })?;
    let mut command = Command::new(program);
    command.args(args);
    Spawned::start("running a command", command)
}

/// Runs `program args...` on the host, bounded by [`DEFAULT_TIMEOUT`], and
/// fails unless it exits 0. `what` names the step in the error.
pub(crate) fn run(what: &str, program: &str, args: &[&str]) -> Result<ExecOutput, TestbedError> {
    let mut command = Command::new(program);
    command.args(args);
    Spawned::start(what, command)?.wait_timeout(DEFAULT_TIMEOUT)?.checked_as(what)
}

/// A program running in the background, its output collected as it comes.
/// Killed (SIGKILL) and reaped when dropped.
#[derive(Debug)]
pub struct Spawned {
    child: Child,
    command: String,
    stdout: Arc<Mutex<Vec<u8>>>,
    stderr: Arc<Mutex<Vec<u8>>>,
    readers: Vec<JoinHandle<()>>,
    status: Option<ExitStatus>,
}

impl Spawned {
    /// Starts `command` with stdin closed and stdout/stderr captured.
    pub(crate) fn start(what: &str, mut command: Command) -> Result<Spawned, TestbedError> {
        let line = display_command(&command);
        command.stdin(Stdio::null()).stdout(Stdio::piped()).stderr(Stdio::piped());
        let mut child = command.spawn().map_err(|error| TestbedError::Spawn {
            what: what.to_owned(),
            command: line.clone(),
            error,
        })?;
        let stdout = Arc::new(Mutex::new(Vec::new()));
        let stderr = Arc::new(Mutex::new(Vec::new()));
        let mut readers = Vec::new();
        if let Some(pipe) = child.stdout.take() {
            readers.push(collect(pipe, Arc::clone(&stdout)));
        }
        if let Some(pipe) = child.stderr.take() {
            readers.push(collect(pipe, Arc::clone(&stderr)));
        }
        Ok(Spawned { child, command: line, stdout, stderr, readers, status: None })
    }

    /// The child's process id (after `ip netns exec` has exec'd, the
    /// program's own).
    pub fn id(&self) -> u32 {
        self.child.id()
    }

    /// The command line.
    pub fn command(&self) -> &str {
        &self.command
    }

    /// What it has written to stdout so far.
    pub fn stdout(&self) -> Vec<u8> {
        lock(&self.stdout).clone()
    }

    /// What it has written to stderr so far.
    pub fn stderr(&self) -> Vec<u8> {
        lock(&self.stderr).clone()
    }

    /// Its exit status, if it has exited.
    pub fn try_wait(&mut self) -> Option<ExitStatus> {
        if self.status.is_none() {
            self.status = self.child.try_wait().ok().flatten();
        }
        self.status
    }

    /// Waits until its stderr contains `needle` (e.g. tcpdump's
    /// "listening on"). Fails if it exits first or `timeout` passes; the
    /// program keeps running either way.
    pub fn wait_for_stderr(&mut self, needle: &str, timeout: Duration) -> Result<(), TestbedError> {
        self.wait_for(needle, timeout, true)
    }

    /// Waits until its stdout contains `needle`; see
    /// [`Spawned::wait_for_stderr`].
    pub fn wait_for_stdout(&mut self, needle: &str, timeout: Duration) -> Result<(), TestbedError> {
        self.wait_for(needle, timeout, false)
    }

    fn wait_for(&mut self, needle: &str, timeout: Duration, on_stderr: bool) -> Result<(), TestbedError> {
        let deadline = Instant::now() + timeout;
        let seen = |s: &Spawned| {
            let buf = if on_stderr { lock(&s.stderr) } else { lock(&s.stdout) };
            String::from_utf8_lossy(&buf).contains(needle)
        };
        loop {
            if seen(self) {
                return Ok(());
            }
            let exited = self.try_wait();
            if exited.is_some() || Instant::now() >= deadline {
                // The pipes may still hold the last words.
                self.drain_readers(if exited.is_some() { DRAIN } else { Duration::ZERO });
                if seen(self) {
                    return Ok(());
                }
                let why = match exited {
                    Some(status) => format!("exited ({}) before", describe(status)),
                    None => format!("did not within {timeout:?}"),
                };
                let stream = if on_stderr { "stderr" } else { "stdout" };
                return Err(TestbedError::NotReady {
                    command: self.command.clone(),
                    why,
                    expected: format!("`{needle}` on {stream}"),
                    stderr: one_line(&String::from_utf8_lossy(&self.stderr())),
                });
            }
            std::thread::sleep(POLL);
        }
    }

    /// Waits for it to exit, at most `timeout`; then kills it and fails
    /// with [`TestbedError::Timeout`].
    pub fn wait_timeout(mut self, timeout: Duration) -> Result<ExecOutput, TestbedError> {
        let deadline = Instant::now() + timeout;
        while self.try_wait().is_none() {
            if Instant::now() >= deadline {
                self.finish();
                return Err(TestbedError::Timeout {
                    command: self.command.clone(),
                    timeout,
                    stderr: one_line(&String::from_utf8_lossy(&self.stderr())),
                });
            }
            std::thread::sleep(POLL);
        }
        Ok(self.finish())
    }

    /// Kills it (if still running) and returns what it printed.
    pub fn kill(mut self) -> ExecOutput {
        self.finish()
    }

    /// Stops it the way a service manager does: SIGTERM, then SIGKILL if
    /// it is still running after `grace`. Returns its status (a graceful
    /// exit, or the kill) and what it printed.
    pub fn terminate(mut self, grace: Duration) -> ExecOutput {
        if self.try_wait().is_none() {
            let pid = libc::pid_t::try_from(self.id()).unwrap_or(libc::pid_t::MAX);
            // SAFETY: kill(2) on our own child, which is not yet reaped, so
            // the pid cannot name another process.
            unsafe { libc::kill(pid, libc::SIGTERM) };
            let deadline = Instant::now() + grace;
            while self.try_wait().is_none() && Instant::now() < deadline {
                std::thread::sleep(POLL);
            }
        }
        self.finish()
    }

    /// Kills, reaps and drains: the output as of now.
    fn finish(&mut self) -> ExecOutput {
        let status = match self.try_wait() {
            Some(status) => status,
            None => {
                let _ = self.child.kill();
                let status = self.child.wait().unwrap_or_else(|_| killed_status());
                self.status = Some(status);
                status
            }
        };
        self.drain_readers(DRAIN);
        ExecOutput { command: self.command.clone(), status, stdout: self.stdout(), stderr: self.stderr() }
    }

    /// Joins the reader threads that finish within `bound`; the others are
    /// left to end with the pipe.
    fn drain_readers(&mut self, bound: Duration) {
        let deadline = Instant::now() + bound;
        while self.readers.iter().any(|r| !r.is_finished()) && Instant::now() < deadline {
            std::thread::sleep(POLL);
        }
        for reader in std::mem::take(&mut self.readers) {
            if reader.is_finished() {
                let _ = reader.join();
            } else {
                self.readers.push(reader);
            }
        }
    }
}

impl Drop for Spawned {
    fn drop(&mut self) {
        if self.status.is_none() {
            self.finish();
        }
    }
}

/// A server under test (nginx, the `fairway` binary, a baseline build)
/// running in the background: stopped with SIGTERM, then SIGKILL after a
/// grace period ([`Spawned::terminate`]), by [`stop`](Self::stop) or when
/// dropped.
#[derive(Debug)]
pub struct ServerProcess {
    process: Option<Spawned>,
    grace: Duration,
    log: Option<PathBuf>,
}

impl ServerProcess {
    /// Starts `cmd` in namespace `ns`; `grace` is how long it has to exit
    /// after SIGTERM.
    ///
    /// # Errors
    ///
    /// When it cannot be started.
    pub fn spawn<S: AsRef<OsStr>>(ns: &str, cmd: &[S], grace: Duration) -> Result<ServerProcess, TestbedError> {
        Ok(ServerProcess { process: Some(spawn(ns, cmd)?), grace, log: None })
    }

    /// The log file it writes its complaints to (nginx's error log), for
    /// [`complaints`](Self::complaints).
    #[must_use]
    pub fn with_log(mut self, log: PathBuf) -> ServerProcess {
        self.log = Some(log);
        self
    }

    /// Whether it is still running.
    pub fn is_running(&mut self) -> bool {
        self.process.as_mut().is_some_and(|p| p.try_wait().is_none())
    }

    /// Its process id, until it is stopped.
    #[must_use]
    pub fn id(&self) -> Option<u32> {
        self.process.as_ref().map(Spawned::id)
    }

    /// What it printed and logged so far, in one line of at most 300
    /// characters (the end, which says why), for an error message.
    #[must_use]
    pub fn complaints(&self) -> String {
        let printed =
            self.process.as_ref().map(|p| String::from_utf8_lossy(&p.stderr()).into_owned()).unwrap_or_default();
        let logged = self.log.as_ref().and_then(|log| std::fs::read_to_string(log).ok()).unwrap_or_default();
        let text = format!("{} {}", printed.trim(), logged.trim());
        let text = text.split_whitespace().collect::<Vec<_>>().join(" ");
        let start = text.char_indices().rev().nth(299).map_or(0, |(i, _)| i);
        text[start..].to_owned()
    }

    /// Stops it (SIGTERM, SIGKILL after the grace period): its status and
    /// output, or `None` when it was already stopped.
    pub fn stop(&mut self) -> Option<ExecOutput> {
        self.process.take().map(|p| p.terminate(self.grace))
    }
}

impl Drop for ServerProcess {
    fn drop(&mut self) {
        let _ = self.stop();
    }
}

fn collect(mut pipe: impl Read + Send + 'static, into: Arc<Mutex<Vec<u8>>>) -> JoinHandle<()> {
    std::thread::spawn(move || {
        let mut chunk = [0u8; 8192];
        loop {
            match pipe.read(&mut chunk) {
                Ok(0) => break,
                Ok(n) => lock(&into).extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(_) => break,
            }
        }
    })
}

fn lock(buf: &Mutex<Vec<u8>>) -> std::sync::MutexGuard<'_, Vec<u8>> {
    // A reader thread cannot panic while holding the lock; recover anyway.
    buf.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

fn killed_status() -> ExitStatus {
    use std::os::unix::process::ExitStatusExt;
    ExitStatus::from_raw(9)
}

/// "exit status 2", "killed by signal 9".
pub(crate) fn describe(status: ExitStatus) -> String {
    use std::os::unix::process::ExitStatusExt;
    match (status.code(), status.signal()) {
        (Some(code), _) => format!("exit status {code}"),
        (None, Some(signal)) => format!("killed by signal {signal}"),
        _ => status.to_string(),
    }
}

/// The command line as a POSIX shell would take it.
pub(crate) fn display_command(command: &Command) -> String {
    std::iter::once(command.get_program()).chain(command.get_args()).map(quote).collect::<Vec<_>>().join(" ")
}

/// Shell quoting, one implementation with xtask's (std only).
#[path = "../../../xtask/src/shell.rs"]
mod shell;

pub(crate) use shell::quote;

#[cfg(test)]
mod tests {
    use super::*;

    fn sh(script: &str) -> Spawned {
        let mut command = Command::new("sh");
        command.args(["-c", script]);
        Spawned::start("test", command).unwrap()
    }

    #[test]
    fn output_and_status_are_captured() {
        let out = sh("echo out; echo err >&2; exit 3").wait_timeout(Duration::from_secs(5)).unwrap();
        assert_eq!(out.stdout_text(), "out\n");
        assert_eq!(out.stderr_text(), "err\n");
        assert_eq!(out.status.code(), Some(3));
        assert_eq!(out.command, "sh -c 'echo out; echo err >&2; exit 3'");
        let err = out.checked_as("testing").unwrap_err();
        assert_eq!(err.to_string(), "testing: `sh -c 'echo out; echo err >&2; exit 3'` failed (exit status 3): err");
    }

    #[test]
    fn a_timeout_kills() {
        let started = Instant::now();
        let err = sh("echo starting >&2; exec sleep 30").wait_timeout(Duration::from_millis(200)).unwrap_err();
        assert!(started.elapsed() < Duration::from_secs(5));
        assert!(matches!(err, TestbedError::Timeout { .. }), "{err}");
        assert!(err.to_string().contains("starting"), "{err}");
    }

    #[test]
    fn waiting_for_output() {
        let mut child = sh("sleep 0.1; echo ready >&2; exec sleep 30");
        child.wait_for_stderr("ready", Duration::from_secs(5)).unwrap();
        assert!(child.try_wait().is_none());
        let pid = child.id();
        drop(child);
        // Killed and reaped: the pid no longer names our child.
        assert!(
            !std::path::Path::new(&format!("/proc/{pid}/cmdline")).exists() || {
                let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
                !String::from_utf8_lossy(&cmdline).contains("sleep")
            }
        );
        let err = sh("echo nope >&2").wait_for_stderr_owned("ready").unwrap_err();
        assert!(err.to_string().contains("exited (exit status 0) before"), "{err}");
    }

    impl Spawned {
        fn wait_for_stderr_owned(mut self, needle: &str) -> Result<(), TestbedError> {
            self.wait_for_stderr(needle, Duration::from_secs(5))
        }
    }

    #[test]
    fn terminating_asks_first_and_kills_after_the_grace() {
        let mut polite = sh("trap 'echo bye; exit 0' TERM; echo up; while :; do sleep 0.05; done");
        polite.wait_for_stdout("up", Duration::from_secs(5)).unwrap();
        let out = polite.terminate(Duration::from_secs(5));
        assert!(out.success(), "{}", describe(out.status));
        assert_eq!(out.stdout_text(), "up\nbye\n");

        let mut stubborn = sh("trap '' TERM; echo up; while :; do sleep 0.05; done");
        stubborn.wait_for_stdout("up", Duration::from_secs(5)).unwrap();
        let started = Instant::now();
        let out = stubborn.terminate(Duration::from_millis(300));
        assert!(started.elapsed() >= Duration::from_millis(300));
        assert_eq!(describe(out.status), "killed by signal 9");
    }

    #[test]
    fn missing_program() {
        let err = run("probing", "/nonexistent/fairway-no-such-tool", &["x"]).unwrap_err();
        assert!(err.to_string().starts_with("probing: could not run `/nonexistent/fairway-no-such-tool x`"), "{err}");
    }
}
