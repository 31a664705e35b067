//! Network namespaces, veth pairs and frame builders for the AF_XDP tests.
//!
//! Every test builds its own pair of namespaces joined by a veth: the
//! "kernel" side has an IPv4 address and the kernel's stack; the "driven"
//! side has no address, and the test drives it through an AF_XDP socket
//! from a thread that entered the namespace with `setns(2)` (the network
//! namespace is per thread, and the socket finds its interface in the
//! calling thread's namespace). The namespaces are deleted on drop, also
//! when the test panics.
//!
//! Each thread that opens sockets also gets a mount namespace of its own,
//! so the test fixes whether libxdp finds a BPF filesystem (the host's
//! mounts are untouched).

#![allow(dead_code, reason = "each test binary uses part of the helpers")]

use std::fs::File;
use std::io;
use std::net::Ipv4Addr;
use std::os::fd::AsRawFd;
use std::process::{Command, Output};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

use fairway_nic::afxdp::AfXdp;
use fairway_nic::{Device, Wait};
use smoltcp::wire::{EthernetAddress, Icmpv4Repr};

/// The kernel side's address.
pub const KERNEL_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
/// The address the driven side answers for.
pub const DRIVEN_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
/// The MAC the driven side's replies carry (not the veth's own).
pub const DRIVEN_MAC: EthernetAddress = EthernetAddress([0x02, 0xfa, 0x1b, 0x00, 0x00, 0x02]);
/// The driven interface's name (in its namespace).
pub const DRIVEN_IF: &str = "xd0";
/// The kernel-side interface's name (in its namespace).
pub const KERNEL_IF: &str = "xk0";

/// Panics unless running as root: these tests create namespaces and XDP
/// programs, and must never pass without having run.
pub fn require_root() {
    // SAFETY: geteuid takes no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        panic!("needs root (CAP_NET_ADMIN, CAP_BPF): run as root or via cargo xtask test");
    }
}

/// Runs a command to completion; panics with its output if it fails.
pub fn run(program: &str, args: &[&str]) -> String {
    let output = output(program, args);
    assert!(
        output.status.success(),
        "`{program} {}` failed: {}{}",
        args.join(" "),
        String::from_utf8_lossy(&output.stdout),
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8_lossy(&output.stdout).into_owned()
}

/// Runs a command to completion, whatever its status.
pub fn output(program: &str, args: &[&str]) -> Output {
    Command::new(program).args(args).output().unwrap_or_else(|e| panic!("cannot run {program}: {e}"))
}

static NEXT: AtomicU32 = AtomicU32::new(0);

/// A network namespace named `fwx-<pid>-<n>-<role>`, deleted on drop.
pub struct Netns {
    pub name: String,
}

impl Netns {
    pub fn new(role: &str) -> Netns {
        require_root();
        let name = format!("fwx-{}-{}-{role}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        run("ip", &["netns", "add", &name]);
        let ns = Netns { name };
        ns.ip(&["link", "set", "lo", "up"]);
        ns
    }

    /// `ip -n NS ARGS...`, which must succeed.
    pub fn ip(&self, args: &[&str]) -> String {
        let mut full = vec!["-n", &self.name];
        full.extend_from_slice(args);
        run("ip", &full)
    }

    /// `ip netns exec NS ARGS...` to completion, whatever its status.
    pub fn exec(&self, args: &[&str]) -> Output {
        let mut full = vec!["netns", "exec", &self.name];
        full.extend_from_slice(args);
        output("ip", &full)
    }

    /// Whether any XDP program (native, generic or offloaded) is attached to
    /// `interface`, as `ip link` shows it.
    pub fn has_xdp(&self, interface: &str) -> bool {
        self.ip(&["link", "show", "dev", interface]).contains("xdp")
    }

    /// Runs `f` on a thread inside this namespace; see [`in_netns`].
    pub fn enter<T: Send>(&self, bpffs: Bpffs, f: impl FnOnce() -> T + Send) -> T {
        in_netns(&self.name, bpffs, f)
    }
}

/// Runs `f` on a thread inside the namespace `name`, with libxdp's BPF
/// filesystem `bpffs` in that thread's mount namespace; panics in `f` come
/// back here.
pub fn in_netns<T: Send>(name: &str, bpffs: Bpffs, f: impl FnOnce() -> T + Send) -> T {
    let path = format!("/run/netns/{name}");
    std::thread::scope(|scope| {
        let thread = scope.spawn(move || {
            set_up_mounts(bpffs);
            let ns = File::open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
            // SAFETY: setns takes a descriptor we hold open; with
            // CLONE_NEWNET it moves only this thread.
            let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
            assert_eq!(rc, 0, "setns into {path}: {}", io::Error::last_os_error());
            f()
        });
        thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

/// Whether the thread that opens sockets sees a BPF filesystem at
/// `/sys/fs/bpf`, where libxdp keeps its dispatcher's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Bpffs {
    /// None: libxdp attaches its program without the dispatcher.
    Absent,
    /// A fresh one, private to the thread. libxdp caches where it found
    /// one, so a test binary uses this on one thread only.
    Mounted,
}

fn check(rc: libc::c_int, what: &str) {
    assert_eq!(rc, 0, "{what}: {}", io::Error::last_os_error());
}

/// Gives the calling thread a private mount namespace with or without a
/// BPF filesystem at `/sys/fs/bpf`.
fn set_up_mounts(bpffs: Bpffs) {
    let target = c"/sys/fs/bpf";
    // SAFETY: unshare takes flags only and affects only this thread, which
    // stops sharing its filesystem attributes (required to leave the
    // process's mount namespace) and gets a copy of the mounts.
    check(unsafe { libc::unshare(libc::CLONE_FS | libc::CLONE_NEWNS) }, "unshare(CLONE_NEWNS)");
    // SAFETY: NUL-terminated strings that outlive the call; nothing here
    // propagates back to the host's mounts once they are private.
    check(
        unsafe {
            libc::mount(
                c"none".as_ptr(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_PRIVATE,
                std::ptr::null(),
            )
        },
        "mount --make-rprivate /",
    );
    let mounted = std::fs::read_to_string("/proc/thread-self/mounts")
        .expect("procfs")
        .lines()
        .any(|line| line.split_ascii_whitespace().nth(1) == Some("/sys/fs/bpf"));
    if mounted {
        // SAFETY: a NUL-terminated path; the unmount is private to this
        // thread's mount namespace.
        check(unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) }, "umount /sys/fs/bpf");
    }
    if bpffs == Bpffs::Mounted {
        // SAFETY: NUL-terminated strings that outlive the call; the mount
        // lives in this thread's private mount namespace.
        check(
            unsafe { libc::mount(c"bpf".as_ptr(), target.as_ptr(), c"bpf".as_ptr(), 0, c"mode=0700".as_ptr().cast()) },
            "mount -t bpf bpf /sys/fs/bpf",
        );
    }
}

/// Two namespaces joined by a veth: `kernel` has `KERNEL_IF` with
/// `KERNEL_IP/24`, `driven` has `DRIVEN_IF` up with no address.
pub struct VethPair {
    // Deleting either namespace deletes the veth.
    pub driven: Netns,
    pub kernel: Netns,
}

impl VethPair {
    /// A pair whose two ends have `queues` receive and transmit queues each.
    pub fn new(queues: u32) -> VethPair {
        VethPair::with_mtu(queues, 1500)
    }

    /// [`VethPair::new`] with both ends at `mtu`.
    pub fn with_mtu(queues: u32, mtu: u32) -> VethPair {
        let driven = Netns::new("d");
        let kernel = Netns::new("k");
        let q = queues.to_string();
        driven.ip(&[
            "link",
            "add",
            DRIVEN_IF,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
            "type",
            "veth",
            "peer",
            "name",
            KERNEL_IF,
            "netns",
            &kernel.name,
            "numtxqueues",
            &q,
            "numrxqueues",
            &q,
        ]);
        let mtu = mtu.to_string();
        driven.ip(&["link", "set", DRIVEN_IF, "mtu", &mtu, "up"]);
        kernel.ip(&["addr", "add", &format!("{KERNEL_IP}/24"), "dev", KERNEL_IF]);
        kernel.ip(&["link", "set", KERNEL_IF, "mtu", &mtu, "up"]);
        VethPair { driven, kernel }
    }

    /// The kernel side's MAC address.
    pub fn kernel_mac(&self) -> EthernetAddress {
        let text = self.kernel.ip(&["-o", "link", "show", "dev", KERNEL_IF]);
        let mac = text.split("link/ether ").nth(1).and_then(|rest| rest.split_whitespace().next()).expect("a MAC");
        EthernetAddress::from_bytes(
            &mac.split(':').map(|byte| u8::from_str_radix(byte, 16).expect("hex")).collect::<Vec<_>>(),
        )
    }
}

/// The frame builders and parser every nic test shares.
#[path = "../../src/test_frames.rs"]
mod test_frames;

/// An ARP reply from `DRIVEN_MAC`/`DRIVEN_IP` to the asker.
pub fn arp_reply(to_mac: EthernetAddress, to_ip: Ipv4Addr) -> Vec<u8> {
    test_frames::arp_reply((DRIVEN_MAC, DRIVEN_IP), (to_mac, to_ip))
}

/// An ICMP echo reply from `DRIVEN_IP` for a request from `to`.
pub fn echo_reply(to_mac: EthernetAddress, to_ip: Ipv4Addr, ident: u16, seq_no: u16, data: &[u8]) -> Vec<u8> {
    test_frames::icmp((DRIVEN_MAC, DRIVEN_IP), (to_mac, to_ip), &Icmpv4Repr::EchoReply { ident, seq_no, data })
}

/// What a received frame asks of the driven side.
#[derive(Debug)]
pub enum Request {
    /// An ARP request for `DRIVEN_IP`, from this MAC and address.
    Arp(EthernetAddress, Ipv4Addr),
    /// An ICMP echo request to `DRIVEN_IP`.
    Echo { mac: EthernetAddress, ip: Ipv4Addr, ident: u16, seq_no: u16, data: Vec<u8> },
    /// A UDP datagram to `DRIVEN_IP`.
    Udp,
    /// Anything else.
    Other,
}

/// What a received frame asks of the driven side: the shared parser's
/// answer, for `DRIVEN_IP`.
pub fn classify(frame: &[u8]) -> Request {
    use test_frames::Seen as Frame;
    match test_frames::classify(frame) {
        Frame::ArpRequest { sender_mac, sender_ip, target_ip, .. } if target_ip == DRIVEN_IP => {
            Request::Arp(sender_mac, sender_ip)
        }
        Frame::EchoRequest { src, ip_src, ip_dst, ident, seq_no, data, .. } if ip_dst == DRIVEN_IP => {
            Request::Echo { mac: src, ip: ip_src, ident, seq_no, data }
        }
        Frame::Udp { ip_dst } if ip_dst == DRIVEN_IP => Request::Udp,
        _ => Request::Other,
    }
}

/// Sends `frames` through `socket`, waiting (boundedly) for free transmit
/// frames when needed.
pub fn send_all(socket: &mut AfXdp, frames: &[Vec<u8>]) {
    let deadline = Instant::now() + Duration::from_secs(5);
    let mut next = 0;
    while next < frames.len() {
        let mut pending = frames[next..].iter();
        next += socket.transmit(frames.len() - next, |buf| {
            let frame = pending.next()?;
            buf[..frame.len()].copy_from_slice(frame);
            Some(frame.len())
        });
        assert!(Instant::now() < deadline, "could not transmit {} frames in 5 s", frames.len());
        if next < frames.len() {
            socket.wait(Some(Duration::from_millis(1))).expect("wait");
        }
    }
}

/// What a responder saw.
#[derive(Debug, Default, Clone, Copy)]
pub struct Seen {
    pub arp_requests: u64,
    pub echo_requests: u64,
    pub udp: u64,
    pub other: u64,
}

/// Answers ARP requests for `DRIVEN_IP` and ICMP echo requests to it on
/// `socket` until `done()` or 20 s have passed.
pub fn respond(socket: &mut AfXdp, done: impl Fn() -> bool) -> Seen {
    respond_with(socket, done, |_| {})
}

/// [`respond`], also handing each echo request's data to `on_echo`.
pub fn respond_with(socket: &mut AfXdp, done: impl Fn() -> bool, mut on_echo: impl FnMut(&[u8])) -> Seen {
    let deadline = Instant::now() + Duration::from_secs(20);
    let mut seen = Seen::default();
    let mut replies = Vec::new();
    while !done() && Instant::now() < deadline {
        socket.receive(64, |frame| match classify(frame) {
            Request::Arp(mac, ip) => {
                seen.arp_requests += 1;
                replies.push(arp_reply(mac, ip));
            }
            Request::Echo { mac, ip, ident, seq_no, data } => {
                seen.echo_requests += 1;
                on_echo(&data);
                replies.push(echo_reply(mac, ip, ident, seq_no, &data));
            }
            Request::Udp => seen.udp += 1,
            Request::Other => seen.other += 1,
        });
        if replies.is_empty() {
            socket.wait(Some(Duration::from_millis(20))).expect("wait");
        } else {
            send_all(socket, &replies);
            replies.clear();
        }
    }
    seen
}

/// The flags a driver thread and the test's main thread share.
#[derive(Default)]
pub struct Flags {
    /// Set by the driver once its sockets are open.
    pub ready: std::sync::atomic::AtomicBool,
    /// Set by the main thread when the driver should return.
    pub done: std::sync::atomic::AtomicBool,
}

impl Flags {
    pub fn set_ready(&self) {
        self.ready.store(true, Ordering::Release);
    }

    pub fn is_done(&self) -> bool {
        self.done.load(Ordering::Acquire)
    }
}

/// Sets `done` when dropped, so a panicking main thread still stops the
/// driver.
struct SetDoneOnDrop<'a>(&'a Flags);

impl Drop for SetDoneOnDrop<'_> {
    fn drop(&mut self) {
        self.0.done.store(true, Ordering::Release);
    }
}

/// Runs `driver` on a thread inside `ns` (see [`Netns::enter`]); once it
/// has set `ready`, runs `kernel_side` here, then sets `done` and returns
/// what `driver` returned. A panic on either side fails the test.
pub fn drive<T: Send>(
    ns: &Netns,
    bpffs: Bpffs,
    driver: impl FnOnce(&Flags) -> T + Send,
    kernel_side: impl FnOnce(),
) -> T {
    let flags = Flags::default();
    std::thread::scope(|scope| {
        let thread = scope.spawn(|| ns.enter(bpffs, || driver(&flags)));
        {
            let _stop = SetDoneOnDrop(&flags);
            let deadline = Instant::now() + Duration::from_secs(10);
            while !flags.ready.load(Ordering::Acquire) && !thread.is_finished() {
                assert!(Instant::now() < deadline, "the driver did not get ready in 10 s");
                std::thread::sleep(Duration::from_millis(5));
            }
            if flags.ready.load(Ordering::Acquire) {
                kernel_side();
            }
        }
        thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// The environment variable that turns [`VICTIM_TEST`] on, naming the
/// namespace to open a socket in.
pub const VICTIM_ENV: &str = "FAIRWAY_AFXDP_VICTIM_NETNS";
/// The (ignored) test that, run as a child process with [`VICTIM_ENV`]
/// set, opens a socket and waits to be killed.
pub const VICTIM_TEST: &str = "victim_holds_a_socket_until_killed";
/// What the victim prints once its socket is open.
pub const VICTIM_READY: &str = "fairway-afxdp-victim-ready";

/// Kills the child on drop, so a failing test leaves no process behind.
struct KillOnDrop(std::process::Child);

impl Drop for KillOnDrop {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Starts the ignored test `test` of this test binary as a child process
/// with `env` set, behind `wrapper` (a command prefix such as `setpriv
/// ...`), its standard output piped.
fn spawn_child(test: &str, env: (&str, &str), wrapper: &[&str]) -> KillOnDrop {
    let exe = std::env::current_exe().expect("the test binary");
    let exe = exe.to_str().expect("a UTF-8 path");
    let mut argv: Vec<&str> = wrapper.to_vec();
    argv.extend([exe, "--exact", test, "--ignored", "--nocapture", "--test-threads=1"]);
    let child = Command::new(argv[0])
        .args(&argv[1..])
        .env(env.0, env.1)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn the child test");
    KillOnDrop(child)
}

/// Reads `child`'s standard output on a thread until a line containing
/// `marker` appears, for up to 10 s; returns that line.
fn wait_for_line(child: &mut KillOnDrop, marker: &'static str) -> String {
    use std::io::BufRead;
    let stdout = child.0.stdout.take().expect("piped stdout");
    let (line_tx, line_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in std::io::BufReader::new(stdout).lines() {
            match line {
                Ok(line) if line.contains(marker) => {
                    let _ = line_tx.send(line);
                }
                Ok(_) => {}
                Err(_) => return,
            }
        }
    });
    line_rx.recv_timeout(Duration::from_secs(10)).unwrap_or_else(|_| panic!("no line with {marker:?} in 10 s"))
}

/// Runs [`VICTIM_TEST`] of this test binary as a child process, which opens
/// an AF_XDP socket on `DRIVEN_IF` in `ns`, and kills it with SIGKILL once
/// the socket is open: what a crashed server leaves behind.
pub fn kill_a_process_with_an_open_socket(ns: &Netns) {
    let mut child = spawn_child(VICTIM_TEST, (VICTIM_ENV, &ns.name), &[]);
    wait_for_line(&mut child, VICTIM_READY);
    drop(child);
}

/// The environment variable that turns [`OPENER_TEST`] on.
pub const OPENER_ENV: &str = "FAIRWAY_AFXDP_OPENER";
/// The (ignored) test that, run as a child process, tries to open a socket
/// on `lo` and prints what happened.
pub const OPENER_TEST: &str = "opener_prints_what_open_says";
/// What starts the line the opener prints.
pub const OPENER_MARKER: &str = "fairway-afxdp-opener:";

/// What opening a socket on `lo` says in a child process started behind
/// `wrapper` (which takes its privileges or limits away).
pub fn open_lo_behind(wrapper: &[&str]) -> String {
    let mut child = spawn_child(OPENER_TEST, (OPENER_ENV, "1"), wrapper);
    wait_for_line(&mut child, OPENER_MARKER)
}

/// The body of [`OPENER_TEST`]: a no-op unless [`OPENER_ENV`] is set.
pub fn opener() {
    if std::env::var_os(OPENER_ENV).is_none() {
        return;
    }
    match AfXdp::open(&fairway_nic::afxdp::AfXdpConfig::new("lo", 0)) {
        Ok(_) => println!("{OPENER_MARKER} opened"),
        Err(error) => println!("{OPENER_MARKER} {error:?} / {error}"),
    }
}

/// The body of [`VICTIM_TEST`]: a no-op unless [`VICTIM_ENV`] is set.
pub fn victim() {
    let Ok(ns) = std::env::var(VICTIM_ENV) else { return };
    in_netns(&ns, Bpffs::Absent, || {
        let _socket = AfXdp::open(&fairway_nic::afxdp::AfXdpConfig::new(DRIVEN_IF, 0)).expect("victim: open");
        println!("{VICTIM_READY}");
        let _ = std::io::Write::flush(&mut std::io::stdout());
        std::thread::sleep(Duration::from_secs(30));
    });
}
