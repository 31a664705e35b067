//! `cargo xtask run`: builds the `fairway` server and runs it in the
//! foreground until Ctrl-C.
//!
//! As root it brings up the namespace testbed and serves over AF_XDP on
//! `fw0` in `fw-srv`, where a client namespace can reach it. Where that
//! cannot work (not root, `--kernel`, or the server over AF_XDP does not
//! start: no kernel support, attach refused, ...) it says why in one line
//! and serves on the kernel backend at 127.0.0.1:8080 instead. Which of
//! the two is a pure function of what is known ([`plan`]), so it is tested
//! without root or a kernel.

use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpStream, ToSocketAddrs};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::cargo::{self, Cargo, Invocation};
use crate::cli::{RunArgs, TestbedAction, TestbedArgs};
use crate::commands::testbed;
use crate::error::Failure;
use crate::system;

/// The testbed `run` brings up: `cargo xtask testbed`'s default prefix.
const SERVER_NS: &str = "fw-srv";
const CLIENT_NS: &str = "fw-c0";
/// The testbed interface Fairway drives over AF_XDP, and its address there.
const SERVER_IF: &str = "fw0";
const SERVER_IP: &str = "10.77.0.1";
const SERVER_PREFIX_LEN: u8 = 24;
/// Its IPv6 address there (the testbed's `--ipv6` subnet).
const SERVER_IP6: &str = "fd77::1";
const SERVER_PREFIX6_LEN: u8 = 64;
/// Where the kernel backend listens unless `--listen` follows `--`.
pub const KERNEL_LISTEN: &str = "127.0.0.1:8080";
/// The path every check and printed curl line asks for.
const PROBE_PATH: &str = "/plaintext";

/// How long the server has to answer its first request.
const READY_TIMEOUT: Duration = Duration::from_secs(30);
/// How long the server has after SIGTERM (its own shutdown deadline is
/// 5 s by default) before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// How often waiting loops look again.
const POLL: Duration = Duration::from_millis(100);

/// Debian packages `run` needs when it will try AF_XDP: the AF_XDP build's
/// and the testbed's tools (curl among them). The kernel backend needs
/// none.
pub fn packages(afxdp: bool) -> Vec<&'static str> {
    if afxdp { [system::AFXDP_BUILD_PACKAGES, system::TESTBED_PACKAGES].concat() } else { Vec::new() }
}

/// What `run` does next.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Plan {
    /// Bring up the testbed and start the server over AF_XDP on it.
    Afxdp,
    /// Serve on the kernel backend; `why` is the one line that says why.
    Kernel { why: String },
}

/// The plan for a user who is root or not, asked for `--kernel` or not,
/// after the AF_XDP attempt failed with `afxdp_failure` (its one-line
/// reason) or before any attempt (`None`).
pub fn plan(root: bool, kernel_flag: bool, afxdp_failure: Option<&str>) -> Plan {
    let why = if kernel_flag {
        "--kernel given".to_owned()
    } else if !root {
        "not root: AF_XDP and the namespace testbed need root (sudo -E cargo xtask run)".to_owned()
    } else if let Some(failure) = afxdp_failure {
        format!("AF_XDP is not possible here: {failure}")
    } else {
        return Plan::Afxdp;
    };
    Plan::Kernel { why }
}

/// `cargo build --release -p fairway [--features afxdp]`
pub fn build(cargo: &Cargo, afxdp: bool) -> Invocation {
    let mut line = vec!["build", "--release", "-p", "fairway"];
    if afxdp {
        line.extend(["--features", "afxdp"]);
    }
    cargo.command(line)
}

/// Where [`build`] puts the server.
pub fn server_path(cargo: &Cargo) -> PathBuf {
    cargo.target_dir().join("release").join("fairway")
}

/// The testbed's fw0 queues, and the server's shards: `--queues`, else one
/// per core.
fn queues(args: &RunArgs) -> usize {
    args.queues.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from))
}

/// The server's arguments over AF_XDP on the testbed: its own flags, then
/// `extra` (whose `--shards`, when there is one, replaces ours).
fn afxdp_args(queues: usize, extra: &[OsString]) -> Vec<OsString> {
    let queues = queues.to_string();
    let ip = format!("{SERVER_IP}/{SERVER_PREFIX_LEN}");
    let ip6 = format!("{SERVER_IP6}/{SERVER_PREFIX6_LEN}");
    let mut line: Vec<OsString> =
        ["--backend", "afxdp", "--iface", SERVER_IF, "--ip", &ip, "--ip", &ip6, "--queues", &queues]
            .into_iter()
            .map(OsString::from)
            .collect();
    if flag_value(extra, "--shards").is_none() {
        line.extend(["--shards".into(), queues.into()]);
    }
    line.extend_from_slice(extra);
    line
}

/// The server's arguments on the kernel backend: `--listen` at
/// [`KERNEL_LISTEN`] unless `extra` names its own.
fn kernel_args(extra: &[OsString]) -> Vec<OsString> {
    let mut line: Vec<OsString> = vec!["--backend".into(), "kernel".into()];
    if flag_value(extra, "--listen").is_none() {
        line.extend(["--listen".into(), KERNEL_LISTEN.into()]);
    }
    line.extend_from_slice(extra);
    line
}

/// The value of `--flag VALUE` or `--flag=VALUE` in `args` (the last one
/// given, as clap takes it).
fn flag_value(args: &[OsString], flag: &str) -> Option<String> {
    let mut found = None;
    let mut it = args.iter();
    while let Some(arg) = it.next() {
        let Some(arg) = arg.to_str() else { continue };
        if arg == flag {
            found = Some(it.next().map(|v| v.to_string_lossy().into_owned()).unwrap_or_default());
        } else if let Some(value) = arg.strip_prefix(flag).and_then(|rest| rest.strip_prefix('=')) {
            found = Some(value.to_owned());
        }
    }
    found
}

/// Where a client reaches a server listening on `listen`: the same, but
/// loopback for an unspecified address (`0.0.0.0:8080` → `127.0.0.1:8080`).
fn reachable(listen: &str) -> String {
    if let Some(port) = listen.strip_prefix("0.0.0.0:") {
        format!("127.0.0.1:{port}")
    } else if let Some(port) = listen.strip_prefix("[::]:") {
        format!("[::1]:{port}")
    } else {
        listen.to_owned()
    }
}

/// The last line a failed server printed, as one line: trimmed, without
/// terminal colours; a stand-in when it printed nothing.
fn one_line_error(last_line: &str, status: &str) -> String {
    let line = strip_ansi(last_line);
    let line = line.trim();
    if line.is_empty() {
        format!("the server exited ({status}) without a message")
    } else {
        format!("{line} ({status})")
    }
}

/// `text` without ANSI escape sequences (`ESC [ ... letter`).
fn strip_ansi(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.next() == Some('[') {
                for c in chars.by_ref() {
                    if c.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
        } else {
            out.push(c);
        }
    }
    out
}

pub fn run(cargo: &Cargo, args: &RunArgs) -> Result<(), Failure> {
    let root = system::is_root();
    let first = plan(root, args.kernel, None);
    system::ensure_debian_packages(&packages(first == Plan::Afxdp))?;
    let build = build(cargo, first == Plan::Afxdp);
    eprintln!("xtask run: $ {}", build.display());
    build.run()?;
    let server = server_path(cargo);
    let stop = stop_on_signals()?;

    let failure = if first == Plan::Afxdp {
        match serve_afxdp(cargo, &server, args, &stop)? {
            Afxdp::Served => return Ok(()),
            Afxdp::Impossible(why) => Some(why),
        }
    } else {
        None
    };
    if stop.load(Ordering::SeqCst) {
        return Ok(());
    }
    let Plan::Kernel { why } = plan(root, args.kernel, failure.as_deref()) else {
        unreachable!("after an AF_XDP attempt the plan is the kernel backend");
    };
    eprintln!("xtask run: {why}; serving on the kernel backend instead");
    serve_kernel(&server, args, &stop)
}

/// How the AF_XDP attempt ended.
enum Afxdp {
    /// The server ran until Ctrl-C; the testbed is down again.
    Served,
    /// It could not serve, for this one-line reason; the testbed is down.
    Impossible(String),
}

fn serve_afxdp(cargo: &Cargo, server: &Path, args: &RunArgs, stop: &AtomicBool) -> Result<Afxdp, Failure> {
    let queues = queues(args);
    let up = TestbedArgs { action: TestbedAction::Up, args: vec!["--queues".into(), queues.to_string().into()] };
    let up = testbed::fairway_testbed(cargo, &up);
    // Down however `up` ends: a Ctrl-C can cut it short, and `down` is
    // safe when nothing exists.
    let _testbed = TestbedDown(cargo);
    eprintln!("xtask run: $ {}", up.display());
    if let Err(failure) = up.run() {
        return Ok(Afxdp::Impossible(format!("the testbed did not come up: {failure}")));
    }

    let mut line: Vec<OsString> = vec!["netns".into(), "exec".into(), SERVER_NS.into(), server.into()];
    line.extend(afxdp_args(queues, &args.fairway));
    // HTTPS beside HTTP, with a certificate made for the run, unless the
    // user gave one (or openssl cannot make one: then HTTP only).
    let certificate = if flag_value(&args.fairway, "--tls-cert").is_none() {
        match RunCertificate::make() {
            Ok(certificate) => Some(certificate),
            Err(why) => {
                eprintln!("xtask run: no HTTPS: {why}");
                None
            }
        }
    } else {
        None
    };
    if let Some(certificate) = &certificate {
        line.extend(certificate.flags());
    }
    let mut server = Foreground::start(Invocation::new("ip", line))?;
    let url = format!("http://{SERVER_IP}{PROBE_PATH}");
    let answered = wait_until(&mut server, stop, || curl_from_client(&url));
    match answered {
        Wait::Answered => {}
        Wait::Stopped => {
            server.stop();
            return Ok(Afxdp::Served);
        }
        Wait::Exited(why) => return Ok(Afxdp::Impossible(why)),
        Wait::TimedOut => {
            server.stop();
            return Ok(Afxdp::Impossible(format!(
                "the server over AF_XDP did not answer {url} within {} s",
                READY_TIMEOUT.as_secs()
            )));
        }
    }
    eprintln!(
        "xtask run: Fairway serves over AF_XDP on {SERVER_IF} in {SERVER_NS} ({queues} queues, {} shards): \
         http://{SERVER_IP}/",
        flag_value(&args.fairway, "--shards").unwrap_or_else(|| queues.to_string())
    );
    println!("ip netns exec {CLIENT_NS} curl {url}");
    println!("ip netns exec {CLIENT_NS} curl -6 'http://[{SERVER_IP6}]{PROBE_PATH}'");
    if let Some(certificate) = &certificate {
        println!("{}", certificate.curl_line());
    }
    eprintln!("xtask run: serving until Ctrl-C; then the server stops and the testbed comes down");
    server.serve_until(stop)?;
    Ok(Afxdp::Served)
}

fn serve_kernel(server: &Path, args: &RunArgs, stop: &AtomicBool) -> Result<(), Failure> {
    let mut line: Vec<OsString> = Vec::new();
    line.extend(kernel_args(&args.fairway));
    let listen = flag_value(&args.fairway, "--listen").unwrap_or_else(|| KERNEL_LISTEN.to_owned());
    let address = reachable(&listen);
    let mut server = Foreground::start(Invocation::new(&server.to_string_lossy(), line))?;
    match wait_until(&mut server, stop, || http_get_ok(&address)) {
        Wait::Answered => {}
        Wait::Stopped => {
            server.stop();
            return Ok(());
        }
        Wait::Exited(why) => return Err(Failure::failed(format!("xtask run: the kernel backend failed: {why}"))),
        Wait::TimedOut => {
            server.stop();
            return Err(Failure::failed(format!(
                "xtask run: the kernel backend did not answer http://{address}{PROBE_PATH} within {} s",
                READY_TIMEOUT.as_secs()
            )));
        }
    }
    eprintln!("xtask run: Fairway serves on the kernel backend: http://{address}/");
    println!("curl http://{address}{PROBE_PATH}");
    eprintln!("xtask run: serving until Ctrl-C");
    server.serve_until(stop)
}

/// The self-signed certificate `run` serves HTTPS with on the testbed, in
/// a directory of its own that goes when the run ends.
struct RunCertificate {
    dir: PathBuf,
}

impl RunCertificate {
    /// An ECDSA P-256 certificate for [`SERVER_IP`] and its key (openssl).
    fn make() -> Result<RunCertificate, String> {
        let dir = std::env::temp_dir().join(format!("fairway-run-tls-{}", std::process::id()));
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let certificate = RunCertificate { dir };
        let out = Command::new("openssl")
            .args(["req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:P-256", "-nodes", "-days", "30"])
            .args(["-subj", &format!("/CN={SERVER_IP}"), "-addext", &format!("subjectAltName=IP:{SERVER_IP}")])
            .arg("-keyout")
            .arg(certificate.key())
            .arg("-out")
            .arg(certificate.cert())
            .output()
            .map_err(|e| format!("openssl: {e}"))?;
        if !out.status.success() {
            return Err(format!("openssl req: {}", String::from_utf8_lossy(&out.stderr).trim()));
        }
        Ok(certificate)
    }

    fn cert(&self) -> PathBuf {
        self.dir.join("cert.pem")
    }

    fn key(&self) -> PathBuf {
        self.dir.join("key.pem")
    }

    /// The server's flags for it.
    fn flags(&self) -> Vec<OsString> {
        vec!["--tls-cert".into(), self.cert().into(), "--tls-key".into(), self.key().into()]
    }

    /// The curl line that works in the client namespace.
    fn curl_line(&self) -> String {
        format!("ip netns exec {CLIENT_NS} curl --cacert {} https://{SERVER_IP}{PROBE_PATH}", self.cert().display())
    }
}

impl Drop for RunCertificate {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Takes the testbed down when dropped, however `run` leaves.
struct TestbedDown<'a>(&'a Cargo);

impl Drop for TestbedDown<'_> {
    fn drop(&mut self) {
        let down = testbed::fairway_testbed(self.0, &TestbedArgs { action: TestbedAction::Down, args: vec![] });
        eprintln!("xtask run: $ {}", down.display());
        if let Err(failure) = down.run() {
            eprintln!("xtask run: {failure}");
        }
    }
}

/// Raised by SIGINT or SIGTERM. The server runs in a process group of its
/// own, so the terminal's Ctrl-C reaches only xtask, which then sends the
/// server exactly one SIGTERM: fairway takes a second signal as "exit now",
/// which would skip its graceful shutdown.
fn stop_on_signals() -> Result<Arc<AtomicBool>, Failure> {
    let flag = Arc::new(AtomicBool::new(false));
    for signal in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(signal, Arc::clone(&flag))
            .map_err(|e| Failure::failed(format!("xtask run: cannot handle signal {signal}: {e}")))?;
    }
    Ok(flag)
}

/// How waiting for the first answer ended.
enum Wait {
    Answered,
    /// Ctrl-C.
    Stopped,
    /// The server exited first, for this one-line reason.
    Exited(String),
    TimedOut,
}

/// Asks `answers` until it says yes, the server exits, Ctrl-C, or
/// [`READY_TIMEOUT`].
fn wait_until(server: &mut Foreground, stop: &AtomicBool, mut answers: impl FnMut() -> bool) -> Wait {
    let deadline = Instant::now() + READY_TIMEOUT;
    loop {
        if stop.load(Ordering::SeqCst) {
            return Wait::Stopped;
        }
        if let Some(status) = server.try_wait() {
            return Wait::Exited(one_line_error(&server.last_line(), &cargo::describe(status)));
        }
        if answers() {
            return Wait::Answered;
        }
        if Instant::now() > deadline {
            return Wait::TimedOut;
        }
        std::thread::sleep(POLL);
    }
}

/// Whether `curl` in the client namespace gets a 200 for `url`.
fn curl_from_client(url: &str) -> bool {
    Command::new("ip")
        .args(["netns", "exec", CLIENT_NS, "curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", "--max-time", "1"])
        .arg(url)
        .stdin(Stdio::null())
        .stderr(Stdio::null())
        .output()
        .is_ok_and(|out| out.stdout == b"200")
}

/// Whether `GET /plaintext` to `address` gets `HTTP/1.1 200` (std only: the
/// kernel backend must work where curl is not installed).
fn http_get_ok(address: &str) -> bool {
    let Some(addr): Option<SocketAddr> = address.to_socket_addrs().ok().and_then(|mut a| a.next()) else {
        return false;
    };
    let Ok(mut stream) = TcpStream::connect_timeout(&addr, Duration::from_secs(1)) else { return false };
    let _ = stream.set_read_timeout(Some(Duration::from_secs(1)));
    let request = format!("GET {PROBE_PATH} HTTP/1.1\r\nHost: {address}\r\nConnection: close\r\n\r\n");
    if stream.write_all(request.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    stream.read_exact(&mut head).is_ok() && head.starts_with(b"HTTP/1.1 200")
}

/// The server `run` started in the foreground: its stdout goes to ours; its stderr is copied to
/// ours line by line, the last line kept for a one-line error.
struct Foreground {
    child: Option<Child>,
    command: String,
    last_line: Arc<Mutex<String>>,
    copier: Option<JoinHandle<()>>,
}

impl Foreground {
    fn start(invocation: Invocation) -> Result<Foreground, Failure> {
        let command = invocation.display();
        eprintln!("xtask run: $ {command}");
        let mut child = invocation
            .to_command()
            .process_group(0)
            .stdin(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Failure::failed(format!("xtask run: could not start `{command}`: {e}")))?;
        let last_line = Arc::new(Mutex::new(String::new()));
        let copier = child.stderr.take().map(|stderr| {
            let last_line = Arc::clone(&last_line);
            std::thread::spawn(move || copy_lines(stderr, &last_line))
        });
        Ok(Foreground { child: Some(child), command, last_line, copier })
    }

    fn try_wait(&mut self) -> Option<ExitStatus> {
        let status = self.child.as_mut()?.try_wait().ok().flatten()?;
        // Its last words, before they are read.
        if let Some(copier) = self.copier.take() {
            let _ = copier.join();
        }
        Some(status)
    }

    fn last_line(&self) -> String {
        self.last_line.lock().map(|l| l.clone()).unwrap_or_default()
    }

    /// Waits for Ctrl-C, then stops the server. A server that exits by
    /// itself first is a failure unless it exited with status 0.
    fn serve_until(&mut self, stop: &AtomicBool) -> Result<(), Failure> {
        while !stop.load(Ordering::SeqCst) {
            if let Some(status) = self.try_wait() {
                self.child = None;
                if status.success() {
                    return Ok(());
                }
                return Err(Failure::Failed {
                    message: format!(
                        "xtask run: `{}` stopped: {}",
                        self.command,
                        one_line_error(&self.last_line(), &cargo::describe(status))
                    ),
                    code: cargo::exit_code(status),
                });
            }
            std::thread::sleep(POLL);
        }
        eprintln!("xtask run: stopping the server");
        self.stop();
        Ok(())
    }

    /// SIGTERM, then SIGKILL if it is still there after [`STOP_GRACE`].
    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else { return };
        let exited = |child: &mut Child, within: Duration| {
            let deadline = Instant::now() + within;
            loop {
                if child.try_wait().ok().flatten().is_some() {
                    return true;
                }
                if Instant::now() > deadline {
                    return false;
                }
                std::thread::sleep(Duration::from_millis(20));
            }
        };
        if !exited(&mut child, Duration::ZERO) {
            let _ = Command::new("kill").args(["-TERM", &child.id().to_string()]).status();
            if !exited(&mut child, STOP_GRACE) {
                eprintln!("xtask run: the server ignored SIGTERM for {} s; killing it", STOP_GRACE.as_secs());
                let _ = child.kill();
                let _ = child.wait();
            }
        }
        if let Some(copier) = self.copier.take() {
            let _ = copier.join();
        }
    }
}

impl Drop for Foreground {
    fn drop(&mut self) {
        self.stop();
    }
}

/// Copies `from` to our stderr line by line, remembering the last
/// non-empty line.
fn copy_lines(from: impl Read, last_line: &Mutex<String>) {
    for line in BufReader::new(from).split(b'\n') {
        let Ok(line) = line else { break };
        let text = String::from_utf8_lossy(&line);
        eprintln!("{text}");
        if !text.trim().is_empty()
            && let Ok(mut last) = last_line.lock()
        {
            *last = text.into_owned();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    fn strs(args: &[OsString]) -> Vec<String> {
        args.iter().map(|a| a.to_string_lossy().into_owned()).collect()
    }

    #[test]
    fn root_tries_afxdp_first() {
        assert_eq!(plan(true, false, None), Plan::Afxdp);
    }

    #[test]
    fn not_root_serves_on_the_kernel_and_says_why() {
        let Plan::Kernel { why } = plan(false, false, None) else { panic!("not root must not try AF_XDP") };
        assert!(why.starts_with("not root:"), "{why}");
        assert!(!why.contains('\n'), "{why}");
        // The AF_XDP failure does not matter when it was never tried.
        assert_eq!(plan(false, false, Some("x")), plan(false, false, None));
    }

    #[test]
    fn a_failed_afxdp_start_falls_back_with_its_reason() {
        let failure = "Error: attaching XDP to fw0: Operation not supported (exit status 1)";
        assert_eq!(
            plan(true, false, Some(failure)),
            Plan::Kernel { why: format!("AF_XDP is not possible here: {failure}") }
        );
    }

    #[test]
    fn kernel_flag_wins() {
        for root in [true, false] {
            assert_eq!(plan(root, true, None), Plan::Kernel { why: "--kernel given".into() });
        }
    }

    #[test]
    fn packages_only_for_afxdp() {
        assert!(packages(false).is_empty());
        let afxdp = packages(true);
        for package in system::AFXDP_BUILD_PACKAGES.iter().chain(system::TESTBED_PACKAGES) {
            assert!(afxdp.contains(package), "{package} missing");
        }
        assert!(afxdp.contains(&"curl"));
    }

    #[test]
    fn build_lines() {
        let cargo = Cargo::new("cargo", "/ws");
        assert_eq!(build(&cargo, true).display(), "cargo build --release -p fairway --features afxdp");
        assert_eq!(build(&cargo, false).display(), "cargo build --release -p fairway");
    }

    #[test]
    fn afxdp_server_line() {
        assert_eq!(
            strs(&afxdp_args(2, &[])),
            [
                "--backend",
                "afxdp",
                "--iface",
                "fw0",
                "--ip",
                "10.77.0.1/24",
                "--ip",
                "fd77::1/64",
                "--queues",
                "2",
                "--shards",
                "2"
            ]
        );
        // The user's --shards replaces ours; other flags follow ours.
        assert_eq!(
            strs(&afxdp_args(2, &os(&["--shards=1", "--root", "/srv"]))),
            [
                "--backend",
                "afxdp",
                "--iface",
                "fw0",
                "--ip",
                "10.77.0.1/24",
                "--ip",
                "fd77::1/64",
                "--queues",
                "2",
                "--shards=1",
                "--root",
                "/srv"
            ]
        );
    }

    #[test]
    fn kernel_server_line() {
        assert_eq!(strs(&kernel_args(&[])), ["--backend", "kernel", "--listen", "127.0.0.1:8080"]);
        assert_eq!(
            strs(&kernel_args(&os(&["--listen", "0.0.0.0:9000", "--shards", "1"]))),
            ["--backend", "kernel", "--listen", "0.0.0.0:9000", "--shards", "1"]
        );
    }

    #[test]
    fn flag_values() {
        assert_eq!(flag_value(&os(&[]), "--listen"), None);
        assert_eq!(flag_value(&os(&["--listen", "a:1"]), "--listen"), Some("a:1".into()));
        assert_eq!(flag_value(&os(&["--listen=a:1", "--listen", "b:2"]), "--listen"), Some("b:2".into()));
        assert_eq!(flag_value(&os(&["--listener=a:1"]), "--listen"), None);
        assert_eq!(flag_value(&os(&["--listen"]), "--listen"), Some(String::new()));
    }

    #[test]
    fn clients_reach_unspecified_addresses_on_loopback() {
        assert_eq!(reachable("127.0.0.1:8080"), "127.0.0.1:8080");
        assert_eq!(reachable("0.0.0.0:9000"), "127.0.0.1:9000");
        assert_eq!(reachable("[::]:80"), "[::1]:80");
        assert_eq!(reachable("10.0.0.2:80"), "10.0.0.2:80");
    }

    #[test]
    fn errors_are_one_line() {
        assert_eq!(
            one_line_error("  \u{1b}[31mERROR\u{1b}[0m fairway: attach refused  ", "exit status 1"),
            "ERROR fairway: attach refused (exit status 1)"
        );
        assert_eq!(
            one_line_error("", "killed by signal 9"),
            "the server exited (killed by signal 9) without a message"
        );
    }

    #[test]
    fn stderr_copy_keeps_the_last_line() {
        let last = Mutex::new(String::new());
        copy_lines(&b"starting\nError: no AF_XDP\n\n"[..], &last);
        assert_eq!(*last.lock().unwrap(), "Error: no AF_XDP");
    }

    #[test]
    fn kernel_probe_fails_quietly_when_nothing_listens() {
        // Port 9 (discard) on loopback: nothing should answer HTTP there.
        assert!(!http_get_ok("127.0.0.1:9"));
        assert!(!http_get_ok("not an address"));
    }

    #[test]
    fn the_run_certificate_is_made_for_the_server_and_removed_after() {
        let Ok(certificate) = RunCertificate::make() else {
            // Without openssl the run serves HTTP only; nothing to check.
            assert!(Command::new("openssl").arg("version").output().is_err(), "openssl runs but made no certificate");
            return;
        };
        let dir = certificate.dir.clone();
        let pem = std::fs::read_to_string(certificate.cert()).unwrap();
        assert!(pem.contains("BEGIN CERTIFICATE"));
        assert!(std::fs::read_to_string(certificate.key()).unwrap().contains("PRIVATE KEY"));
        let flags: Vec<String> = certificate.flags().iter().map(|f| f.to_string_lossy().into_owned()).collect();
        assert_eq!(flags[0], "--tls-cert");
        assert!(certificate.curl_line().ends_with(&format!("https://{SERVER_IP}{PROBE_PATH}")));
        drop(certificate);
        assert!(!dir.exists());
    }

    #[test]
    fn help_states_the_defaults() {
        let help = crate::cli::help(Some(crate::cli::Topic::Run));
        assert!(help.contains(KERNEL_LISTEN));
        assert!(help.contains(&format!("ip netns exec {CLIENT_NS} curl http://{SERVER_IP}{PROBE_PATH}")));
        assert!(help.contains(&format!("ip netns exec {CLIENT_NS} curl -6 'http://[{SERVER_IP6}]{PROBE_PATH}'")));
        assert!(help.contains(&format!("ip netns exec {CLIENT_NS} curl --cacert DIR/cert.pem https://{SERVER_IP}")));
        assert!(help.contains(&build(&Cargo::new("cargo", "/ws"), true).display()));
    }
}
