//! Namespaces, a running `fairway-linkem` and raw and UDP probes, shared by
//! `tests/linkem.rs` and `examples/linkem_accuracy.rs`.
//!
//! ```text
//!  client ns            emu ns                  server ns
//!  c0 10.77.0.10 ── veth ── ea [linkem] eb ── veth ── s0 10.77.0.1
//!  cd 10.78.0.10 ─────────────── veth (direct) ────────── sd 10.78.0.1
//! ```
//!
//! The direct pair is the reference path without the emulator. Every
//! namespace is named `fwl-<pid>-<n>-{c,e,s}` and deleted when the [`Trio`]
//! is dropped, also on panic.
#![allow(dead_code)]

use std::collections::HashMap;
use std::ffi::CString;
use std::io::{BufRead, BufReader, Read};
use std::net::{Ipv4Addr, SocketAddrV4, UdpSocket};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::mpsc;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

pub const CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 10);
pub const SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
pub const DIRECT_CLIENT_IP: Ipv4Addr = Ipv4Addr::new(10, 78, 0, 10);
pub const DIRECT_SERVER_IP: Ipv4Addr = Ipv4Addr::new(10, 78, 0, 1);

/// Panics unless running as root: namespaces and raw sockets need it, and a
/// test that cannot run must not pass.
#[track_caller]
pub fn needs_root() {
    // SAFETY: geteuid cannot fail and has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        panic!("needs root: run as root or via cargo xtask test");
    }
}

/// Runs a command and panics with its output if it fails.
#[track_caller]
pub fn sh(args: &[&str]) -> String {
    let out = Command::new(args[0]).args(&args[1..]).output().unwrap_or_else(|e| panic!("{args:?}: {e}"));
    assert!(
        out.status.success(),
        "{args:?} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Three namespaces joined by veth pairs (see the module documentation).
pub struct Trio {
    pub client: String,
    pub emu: String,
    pub server: String,
}

impl Trio {
    pub fn new() -> Trio {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        needs_root();
        let base = format!("fwl-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let trio = Trio { client: format!("{base}-c"), emu: format!("{base}-e"), server: format!("{base}-s") };
        // From here on, Drop cleans up whatever was made.
        for ns in [&trio.client, &trio.emu, &trio.server] {
            sh(&["ip", "netns", "add", ns]);
            sh(&["ip", "-n", ns, "link", "set", "lo", "up"]);
            // No IPv6 chatter (router solicitations, MLD) in the way of the
            // frames under test.
            sh(&["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.all.disable_ipv6=1"]);
            sh(&["ip", "netns", "exec", ns, "sysctl", "-qw", "net.ipv6.conf.default.disable_ipv6=1"]);
        }
        let (c, e, s) = (trio.client.as_str(), trio.emu.as_str(), trio.server.as_str());
        sh(&["ip", "link", "add", "c0", "netns", c, "type", "veth", "peer", "ea", "netns", e]);
        sh(&["ip", "link", "add", "s0", "netns", s, "type", "veth", "peer", "eb", "netns", e]);
        sh(&["ip", "link", "add", "cd", "netns", c, "type", "veth", "peer", "sd", "netns", s]);
        for (ns, dev, addr) in [
            (c, "c0", "10.77.0.10/24"),
            (s, "s0", "10.77.0.1/24"),
            (c, "cd", "10.78.0.10/24"),
            (s, "sd", "10.78.0.1/24"),
        ] {
            sh(&["ip", "-n", ns, "addr", "add", addr, "dev", dev]);
            sh(&["ip", "-n", ns, "link", "set", dev, "up"]);
        }
        for dev in ["ea", "eb"] {
            sh(&["ip", "-n", e, "link", "set", dev, "up"]);
        }
        trio
    }

    /// The MAC address of `dev` in namespace `ns`.
    pub fn mac(ns: &str, dev: &str) -> [u8; 6] {
        let out = sh(&["ip", "netns", "exec", ns, "cat", &format!("/sys/class/net/{dev}/address")]);
        let mut mac = [0; 6];
        for (b, part) in mac.iter_mut().zip(out.trim().split(':')) {
            *b = u8::from_str_radix(part, 16).expect("hex");
        }
        mac
    }

    /// Starts `fairway-linkem --a ea --b eb ARGS` in the emulator namespace
    /// and waits until it says it is ready.
    pub fn linkem(&self, binary: &Path, args: &[&str]) -> Linkem {
        let mut child = Command::new("ip")
            .args(["netns", "exec", &self.emu])
            .arg(binary)
            .args(["--a", "ea", "--b", "eb"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap_or_else(|e| panic!("starting {}: {e}", binary.display()));
        let stderr = child.stderr.take().expect("piped");
        let (ready_tx, ready_rx) = mpsc::channel();
        let reader = std::thread::spawn(move || {
            let mut all = String::new();
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.starts_with("fairway-linkem: ready") {
                    let _ = ready_tx.send(());
                }
                all.push_str(&line);
                all.push('\n');
            }
            all
        });
        let mut linkem = Linkem { child, stderr: Some(reader) };
        if ready_rx.recv_timeout(Duration::from_secs(10)).is_err() {
            let stderr = linkem.kill();
            panic!("fairway-linkem did not get ready: {stderr}");
        }
        linkem
    }
}

impl Drop for Trio {
    fn drop(&mut self) {
        for ns in [&self.client, &self.emu, &self.server] {
            let _ = Command::new("ip").args(["netns", "del", ns]).stderr(Stdio::null()).status();
        }
    }
}

/// A running `fairway-linkem`; killed when dropped.
pub struct Linkem {
    child: Child,
    stderr: Option<std::thread::JoinHandle<String>>,
}

/// The counters `fairway-linkem` prints at exit, per direction.
#[derive(Debug)]
pub struct Counters {
    pub a_to_b: HashMap<String, f64>,
    pub b_to_a: HashMap<String, f64>,
    pub text: String,
    /// What it printed on stderr.
    pub stderr: String,
    /// CPU time the emulator used (user + system), in seconds.
    pub cpu_seconds: f64,
}

impl Linkem {
    /// Stops it with SIGTERM and returns its counters.
    #[track_caller]
    pub fn stop(mut self) -> Counters {
        let cpu_seconds = self.cpu_seconds();
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = Instant::now() + Duration::from_secs(10);
        let status = loop {
            if let Some(status) = self.child.try_wait().expect("wait") {
                break status;
            }
            if Instant::now() > deadline {
                let stderr = self.kill();
                panic!("fairway-linkem did not stop within 10 s of SIGTERM: {stderr}");
            }
            std::thread::sleep(Duration::from_millis(10));
        };
        let mut text = String::new();
        self.child.stdout.take().expect("piped").read_to_string(&mut text).expect("stdout");
        let stderr = self.stderr.take().map(|t| t.join().unwrap_or_default()).unwrap_or_default();
        assert!(status.success(), "fairway-linkem exited with {status}: {stderr}");
        let parse = |prefix: &str| -> HashMap<String, f64> {
            let line = text.lines().find(|l| l.starts_with(prefix)).unwrap_or_else(|| panic!("no {prefix} in {text}"));
            let (_, pairs) = line.split_once(": ").expect("name: pairs");
            pairs
                .split(' ')
                .filter_map(|kv| kv.split_once('='))
                .map(|(k, v)| (k.to_owned(), v.parse().expect("number")))
                .collect()
        };
        Counters { a_to_b: parse("a->b"), b_to_a: parse("b->a"), text, stderr, cpu_seconds }
    }

    /// Sends it `signal`.
    pub fn signal(&self, signal: i32) {
        // SAFETY: kill(2) on our own child's pid.
        unsafe { libc::kill(self.child.id() as i32, signal) };
    }

    /// utime + stime of the process so far (`ip netns exec` execs the
    /// emulator, so the child's pid is the emulator's).
    fn cpu_seconds(&self) -> f64 {
        let stat = std::fs::read_to_string(format!("/proc/{}/stat", self.child.id())).unwrap_or_default();
        // The fields after the parenthesised command name; utime and stime
        // are fields 14 and 15 of the whole line.
        let fields: Vec<&str> = stat.rsplit_once(')').map_or(vec![], |(_, rest)| rest.split_whitespace().collect());
        let ticks: f64 = [11, 12].iter().filter_map(|&i| fields.get(i)?.parse::<f64>().ok()).sum();
        // SAFETY: sysconf has no preconditions.
        let per_second = unsafe { libc::sysconf(libc::_SC_CLK_TCK) } as f64;
        ticks / per_second
    }

    /// Waits up to `timeout` for it to exit by itself; returns its exit
    /// code (`None`: still running, now killed) and stderr.
    pub fn wait_exit(mut self, timeout: Duration) -> (Option<i32>, String) {
        let deadline = Instant::now() + timeout;
        while Instant::now() < deadline {
            if let Some(status) = self.child.try_wait().expect("wait") {
                let stderr = self.stderr.take().map(|t| t.join().unwrap_or_default()).unwrap_or_default();
                return (status.code(), stderr);
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        (None, self.kill())
    }

    fn kill(&mut self) -> String {
        let _ = self.child.kill();
        let _ = self.child.wait();
        self.stderr.take().map(|t| t.join().unwrap_or_default()).unwrap_or_default()
    }
}

impl Drop for Linkem {
    fn drop(&mut self) {
        if self.stderr.is_some() {
            self.kill();
        }
    }
}

/// Moves the calling thread into namespace `ns`: sockets it opens from
/// then on live there.
#[track_caller]
pub fn enter(ns: &str) {
    let path = CString::new(format!("/run/netns/{ns}")).expect("no NUL");
    // SAFETY: a NUL-terminated path; the result is checked.
    let fd = unsafe { libc::open(path.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC) };
    assert!(fd >= 0, "open /run/netns/{ns}: {}", std::io::Error::last_os_error());
    // SAFETY: `fd` is a namespace file we opened; setns affects this thread.
    let r = unsafe { libc::setns(fd, libc::CLONE_NEWNET) };
    let err = std::io::Error::last_os_error();
    // SAFETY: we own `fd`.
    unsafe { libc::close(fd) };
    assert_eq!(r, 0, "setns {ns}: {err}");
}

/// Runs `f` on a new thread inside namespace `ns`.
pub fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> std::thread::JoinHandle<T> {
    let ns = ns.to_owned();
    std::thread::spawn(move || {
        enter(&ns);
        f()
    })
}

/// A raw AF_PACKET socket bound to one interface of the calling thread's
/// namespace, receiving frames of one EtherType.
pub struct RawSocket {
    fd: std::os::fd::OwnedFd,
    ifindex: i32,
}

impl RawSocket {
    #[track_caller]
    pub fn open(dev: &str, ethertype: u16) -> RawSocket {
        use std::os::fd::FromRawFd;
        let name = CString::new(dev).expect("no NUL");
        // SAFETY: plain system calls; results checked.
        unsafe {
            let ifindex = libc::if_nametoindex(name.as_ptr()) as i32;
            assert!(ifindex > 0, "no interface {dev}");
            let fd = libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, i32::from(ethertype.to_be()));
            assert!(fd >= 0, "socket: {}", std::io::Error::last_os_error());
            let fd = std::os::fd::OwnedFd::from_raw_fd(fd);
            let mut addr: libc::sockaddr_ll = std::mem::zeroed();
            addr.sll_family = libc::AF_PACKET as u16;
            addr.sll_protocol = ethertype.to_be();
            addr.sll_ifindex = ifindex;
            let r = libc::bind(
                fd.as_raw_fd(),
                (&raw const addr).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            );
            assert_eq!(r, 0, "bind: {}", std::io::Error::last_os_error());
            RawSocket { fd, ifindex }
        }
    }

    #[track_caller]
    pub fn send(&self, frame: &[u8]) {
        // SAFETY: sends `frame.len()` bytes from a live slice.
        let r = unsafe { libc::send(self.fd.as_raw_fd(), frame.as_ptr().cast(), frame.len(), 0) };
        assert_eq!(r, frame.len() as isize, "send: {}", std::io::Error::last_os_error());
    }

    /// The next frame, or `None` after `timeout` without one.
    pub fn recv(&self, timeout: Duration) -> Option<Vec<u8>> {
        let mut pfd = libc::pollfd { fd: self.fd.as_raw_fd(), events: libc::POLLIN, revents: 0 };
        // SAFETY: one live pollfd.
        let r = unsafe { libc::poll(&mut pfd, 1, timeout.as_millis() as i32) };
        if r <= 0 {
            return None;
        }
        let mut buf = vec![0u8; 65_536];
        // SAFETY: receives into a live buffer of its length.
        let n = unsafe { libc::recv(self.fd.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len(), libc::MSG_DONTWAIT) };
        (n >= 0).then(|| {
            buf.truncate(n as usize);
            buf
        })
    }

    /// Every frame that arrives until `quiet` passes without one.
    pub fn drain(&self, quiet: Duration) -> Vec<Vec<u8>> {
        std::iter::from_fn(|| self.recv(quiet)).collect()
    }

    pub fn ifindex(&self) -> i32 {
        self.ifindex
    }
}

/// An Ethernet frame of EtherType `ethertype` (local experimental 0x88b5
/// by default in the tests) carrying `tag` and `seq`, `len` bytes long.
pub fn test_frame(dst: [u8; 6], src: [u8; 6], ethertype: u16, tag: u32, seq: u32, len: usize) -> Vec<u8> {
    let mut f = Vec::with_capacity(len);
    f.extend_from_slice(&dst);
    f.extend_from_slice(&src);
    f.extend_from_slice(&ethertype.to_be_bytes());
    f.extend_from_slice(&tag.to_be_bytes());
    f.extend_from_slice(&seq.to_be_bytes());
    f.extend((f.len()..len).map(|i| (i as u32).wrapping_mul(seq | 1).wrapping_add(tag) as u8));
    f.truncate(len.max(22));
    f
}

/// One UDP probe received: its sequence number and one-way delay.
#[derive(Clone, Copy, Debug)]
pub struct Arrival {
    pub seq: u32,
    /// Kernel receive time stamp minus the sender's clock before `send`,
    /// both `CLOCK_REALTIME` on the same host.
    pub one_way: Duration,
    /// The kernel receive time stamp, `CLOCK_REALTIME` nanoseconds.
    pub at_ns: u128,
}

fn realtime_ns() -> u128 {
    SystemTime::now().duration_since(UNIX_EPOCH).expect("after 1970").as_nanos()
}

/// Sends `count` UDP probes of `size` bytes from the calling thread's
/// namespace to `to`, one every `interval` on average, each stamped with its
/// send time. Never spins: after a late wake-up it catches up with a burst.
pub fn send_probes(to: SocketAddrV4, count: u32, size: usize, interval: Duration) {
    let socket = UdpSocket::bind("0.0.0.0:0").expect("bind");
    let mut buf = vec![0u8; size.max(20)];
    let start = Instant::now();
    for seq in 0..count {
        let due = start + interval * seq;
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        buf[..4].copy_from_slice(&seq.to_be_bytes());
        buf[4..20].copy_from_slice(&realtime_ns().to_be_bytes());
        // A full socket buffer (a slow link, a burst) just loses the probe.
        let _ = socket.send_to(&buf, to);
    }
}

/// Receives probes on `port` in the calling thread's namespace until
/// `quiet` passes without one (or `limit` passes overall), with kernel
/// receive time stamps.
pub fn receive_probes(socket: &UdpSocket, quiet: Duration, limit: Duration) -> (Vec<Arrival>, u64) {
    // SAFETY: setsockopt with a live int.
    unsafe {
        let one: libc::c_int = 1;
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TIMESTAMPNS,
            (&raw const one).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
        let big: libc::c_int = 32 << 20;
        libc::setsockopt(
            socket.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_RCVBUFFORCE,
            (&raw const big).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        );
    }
    socket.set_read_timeout(Some(quiet)).expect("timeout");
    let mut arrivals = Vec::new();
    let mut bytes = 0u64;
    let mut buf = vec![0u8; 65_536];
    let mut control = [0u64; 16];
    let end = Instant::now() + limit;
    while Instant::now() < end {
        let mut iov = libc::iovec { iov_base: buf.as_mut_ptr().cast(), iov_len: buf.len() };
        // SAFETY: msghdr points at live buffers of the lengths given.
        let (n, stamp) = unsafe {
            let mut msg: libc::msghdr = std::mem::zeroed();
            msg.msg_iov = &mut iov;
            msg.msg_iovlen = 1;
            msg.msg_control = control.as_mut_ptr().cast();
            msg.msg_controllen = std::mem::size_of_val(&control) as _;
            let n = libc::recvmsg(socket.as_raw_fd(), &mut msg, 0);
            let mut stamp = None;
            if n >= 0 {
                let mut cmsg = libc::CMSG_FIRSTHDR(&msg);
                while !cmsg.is_null() {
                    if (*cmsg).cmsg_level == libc::SOL_SOCKET && (*cmsg).cmsg_type == libc::SCM_TIMESTAMPNS {
                        let ts = std::ptr::read_unaligned(libc::CMSG_DATA(cmsg).cast::<libc::timespec>());
                        stamp = Some(ts.tv_sec as u128 * 1_000_000_000 + ts.tv_nsec as u128);
                    }
                    cmsg = libc::CMSG_NXTHDR(&msg, cmsg);
                }
            }
            (n, stamp)
        };
        if n < 0 {
            break; // the quiet timeout
        }
        let n = n as usize;
        bytes += n as u64;
        if n >= 20 {
            let seq = u32::from_be_bytes(buf[..4].try_into().expect("4"));
            let sent = u128::from_be_bytes(buf[4..20].try_into().expect("16"));
            let received = stamp.unwrap_or_else(realtime_ns);
            arrivals.push(Arrival {
                seq,
                one_way: Duration::from_nanos(received.saturating_sub(sent) as u64),
                at_ns: received,
            });
        }
    }
    (arrivals, bytes)
}

/// The `fairway-linkem` binary next to the running executable (tests and
/// examples live one directory below it), or `$FAIRWAY_LINKEM`.
pub fn linkem_binary(from_cargo: Option<&str>) -> PathBuf {
    if let Some(path) = std::env::var_os("FAIRWAY_LINKEM") {
        return path.into();
    }
    if let Some(path) = from_cargo {
        return path.into();
    }
    let exe = std::env::current_exe().expect("current exe");
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let path = dir.join("fairway-linkem");
    assert!(path.exists(), "{} not found: cargo build -p fairway-nic --bin fairway-linkem first", path.display());
    path
}

/// Percentile `p` (0..=100) of sorted values.
pub fn percentile(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * (sorted.len() - 1) as f64).round() as usize;
    sorted[rank.min(sorted.len() - 1)]
}
