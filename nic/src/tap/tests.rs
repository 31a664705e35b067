//! Tests of the TAP backend.
//!
//! Two kinds:
//!
//! - The data path over a `SOCK_SEQPACKET` socket pair (one message per
//!   frame, non-blocking, a send buffer that fills up): receive, transmit,
//!   `EAGAIN`, write errors and `wait`, with no privileges.
//! - Real TAP interfaces, each in a network namespace the test creates and
//!   deletes (`fwtap-<pid>-<n>`), talking ARP and ICMP with the kernel.
//!   These need root (`CAP_NET_ADMIN`); as another user they fail with a
//!   message that says so, rather than pass without testing anything. A
//!   thread enters the namespace with `setns(2)` to open the TAP there (a
//!   network namespace is per thread); the descriptor then works anywhere.

use std::collections::VecDeque;
use std::fs::File;
use std::io::Read;
use std::os::fd::FromRawFd;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Instant;

use smoltcp::wire::{EthernetAddress, Icmpv4Repr, Ipv4Address};

use super::*;
use crate::test_frames::{self, Seen, classify};

// ---------------------------------------------------------------------------
// Helpers
// ---------------------------------------------------------------------------

#[track_caller]
fn require_root() {
    // SAFETY: geteuid takes no arguments and cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        panic!("needs root (CAP_NET_ADMIN): run as root");
    }
}

/// Runs a command to completion and returns its standard output; panics with
/// its standard error if it fails.
#[track_caller]
fn run(program: &str, args: &[&str]) -> String {
    let out = Command::new(program).args(args).output().unwrap_or_else(|e| panic!("cannot run {program}: {e}"));
    assert!(
        out.status.success(),
        "`{program} {}` failed ({}): {}",
        args.join(" "),
        out.status,
        String::from_utf8_lossy(&out.stderr).trim()
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A network namespace of this test's own, deleted on drop (also when the
/// test fails). IPv6 is off in it, so the kernel sends only what a test
/// asks for.
struct Netns {
    name: String,
}

impl Netns {
    #[track_caller]
    fn new() -> Netns {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        require_root();
        let name = format!("fwtap-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        run("ip", &["netns", "add", &name]);
        let ns = Netns { name };
        for knob in ["net.ipv6.conf.all.disable_ipv6=1", "net.ipv6.conf.default.disable_ipv6=1"] {
            run("ip", &["netns", "exec", &ns.name, "sysctl", "-qw", knob]);
        }
        ns
    }

    /// `ip -n NS ARGS...`
    #[track_caller]
    fn ip(&self, args: &[&str]) -> String {
        let mut all = vec!["-n", self.name.as_str()];
        all.extend_from_slice(args);
        run("ip", &all)
    }

    /// `ip netns exec NS ARGS...`, not started yet.
    fn exec(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.name]).args(args);
        cmd
    }

    /// Runs `f` on a thread inside the namespace.
    fn enter<T: Send>(&self, f: impl FnOnce() -> T + Send) -> T {
        let path = format!("/run/netns/{}", self.name);
        let ns = File::open(&path).unwrap_or_else(|e| panic!("open {path}: {e}"));
        std::thread::scope(|s| {
            s.spawn(|| {
                // SAFETY: setns takes a descriptor we hold open; with
                // CLONE_NEWNET it moves only this thread, which ends with `f`.
                let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
                assert_eq!(rc, 0, "setns into {}: {}", self.name, io::Error::last_os_error());
                f()
            })
            .join()
            .unwrap_or_else(|panic| std::panic::resume_unwind(panic))
        })
    }

    #[track_caller]
    fn open(&self, config: TapConfig) -> Tap {
        let name = config.name.clone();
        self.enter(move || Tap::open_with(&config)).unwrap_or_else(|e| panic!("open TAP {name}: {e}"))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.name]).status();
    }
}

/// Polls `f` every 10 ms until it gives a value; panics after 5 s.
#[track_caller]
fn eventually<T>(what: &str, mut f: impl FnMut() -> Option<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        if let Some(value) = f() {
            return value;
        }
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// A child process killed and reaped on drop, whatever the test did.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// Our side of the TAP: the address the kernel resolves and pings.
const OUR_MAC: EthernetAddress = EthernetAddress([0x02, 0x00, 0x00, 0x99, 0x00, 0x02]);
const OUR_IP: Ipv4Address = Ipv4Address::new(10, 99, 0, 2);
const KERNEL_IP: Ipv4Address = Ipv4Address::new(10, 99, 0, 1);

/// An ARP reply from our side of the TAP.
fn arp_reply(to_mac: EthernetAddress, to_ip: Ipv4Address) -> Vec<u8> {
    test_frames::arp_reply((OUR_MAC, OUR_IP), (to_mac, to_ip))
}

/// An echo reply from our side of the TAP to the kernel's.
fn echo_reply(to_mac: EthernetAddress, ident: u16, seq_no: u16, data: &[u8]) -> Vec<u8> {
    test_frames::icmp((OUR_MAC, OUR_IP), (to_mac, KERNEL_IP), &Icmpv4Repr::EchoReply { ident, seq_no, data })
}

/// Sends as many of `queue`'s frames as the device takes, oldest first.
fn transmit_queued(dev: &mut impl Device, queue: &mut VecDeque<Vec<u8>>) -> usize {
    dev.transmit(queue.len(), |buf| {
        let frame = queue.pop_front()?;
        buf[..frame.len()].copy_from_slice(&frame);
        Some(frame.len())
    })
}

fn mac_string(mac: EthernetAddress) -> String {
    let b = mac.0;
    format!("{:02x}:{:02x}:{:02x}:{:02x}:{:02x}:{:02x}", b[0], b[1], b[2], b[3], b[4], b[5])
}

// ---------------------------------------------------------------------------
// Names and configuration: no system call, no privilege
// ---------------------------------------------------------------------------

#[test]
fn invalid_names_are_refused_with_the_rule_they_break() {
    let cases = [
        ("", "empty"),
        ("a-name-far-too-long-for-linux", "at most 15 bytes"),
        ("sixteen-bytes-xx", "at most 15 bytes"),
        (".", "`.` and `..`"),
        ("..", "`.` and `..`"),
        ("tap/0", "may not contain"),
        ("tap:0", "may not contain"),
        ("tap 0", "may not contain"),
        ("tap\t0", "may not contain"),
        ("tap\0x", "may not contain"),
        ("tap%s", "`%d`"),
        ("tap%d%d", "`%d`"),
        ("tap%", "`%d`"),
    ];
    for (name, reason) in cases {
        match Tap::open(name) {
            Err(e @ TapError::InvalidName { .. }) => {
                let message = e.to_string();
                assert!(message.contains(&format!("{name:?}")), "{message:?} does not name {name:?}");
                assert!(message.contains(reason), "{message:?} does not say {reason:?}");
                assert!(!message.contains('\n'), "{message:?} is not one line");
            }
            other => panic!("Tap::open({name:?}) gave {other:?}, not InvalidName"),
        }
    }
    // The longest valid name and a single `%d` pass the check.
    assert!(interface_name("fifteen-bytes-x").is_ok());
    assert!(interface_name("fw%d").is_ok());
}

#[test]
fn impossible_frame_lengths_are_refused_before_opening() {
    for len in [0, 13, MAX_TAP_FRAME_LEN + 1] {
        match Tap::open_with(&TapConfig::new("fwcfg0").with_max_frame_len(len)) {
            Err(e @ TapError::InvalidConfig(_)) => assert!(e.to_string().contains(&len.to_string()), "{e}"),
            other => panic!("max_frame_len {len} gave {other:?}, not InvalidConfig"),
        }
    }
}

// ---------------------------------------------------------------------------
// The data path over a socket pair: no privilege
// ---------------------------------------------------------------------------

/// A `Tap` over one end of a non-blocking `SOCK_SEQPACKET` pair, and the
/// other end, which plays the kernel.
fn tap_over_socket_pair(max_frame_len: usize) -> (Tap, UnixDatagram) {
    let mut fds = [0; 2];
    // SAFETY: `fds` is room for the two descriptors socketpair writes.
    let rc = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_NONBLOCK | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    assert_eq!(rc, 0, "socketpair: {}", io::Error::last_os_error());
    // SAFETY: both descriptors were just created and are owned by nobody
    // else. A SOCK_SEQPACKET socket works as a UnixDatagram for send/recv.
    let (ours, theirs) = unsafe { (OwnedFd::from_raw_fd(fds[0]), UnixDatagram::from_raw_fd(fds[1])) };
    (Tap::from_fd(ours, "pair".to_owned(), max_frame_len), theirs)
}

/// A frame of `len` bytes whose bytes all say `tag`, except a counter in
/// the first four.
fn tagged(tag: u32, len: usize) -> Vec<u8> {
    let mut frame = vec![tag as u8; len];
    frame[..4].copy_from_slice(&tag.to_be_bytes());
    frame
}

/// The (tag, length) of each frame made by [`tagged`], checking that its
/// bytes are intact; short to print when an assertion fails.
#[track_caller]
fn tags(frames: &[Vec<u8>]) -> Vec<(u32, usize)> {
    frames
        .iter()
        .map(|f| {
            let tag = u32::from_be_bytes(f[..4].try_into().expect("4 bytes"));
            assert!(*f == tagged(tag, f.len()), "frame {tag} ({} bytes) is corrupted", f.len());
            (tag, f.len())
        })
        .collect()
}

fn drain(peer: &UnixDatagram) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = vec![0; MAX_TAP_FRAME_LEN];
    loop {
        match peer.recv(&mut buf) {
            Ok(n) => out.push(buf[..n].to_vec()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return out,
            Err(e) => panic!("recv: {e}"),
        }
    }
}

#[test]
fn receive_lends_frames_in_order_and_drops_runts_and_oversize_ones() {
    let (mut tap, peer) = tap_over_socket_pair(1514);
    let frames = [tagged(1, 60), tagged(2, 13), tagged(3, 1514), tagged(4, 1515), tagged(5, 14), tagged(6, 9000)];
    for f in &frames {
        peer.send(f).expect("send");
    }
    assert_eq!(tap.receive(0, |_| panic!("budget 0 handed a frame")), 0);

    let mut got = Vec::new();
    // Budget 1: the first frame only.
    assert_eq!(tap.receive(1, |f| got.push(f.to_vec())), 1);
    assert_eq!(tags(&got), [(1, 60)]);
    // The rest: the runt and the two oversize frames vanish, counted.
    assert_eq!(tap.receive(16, |f| got.push(f.to_vec())), 2);
    assert_eq!(tags(&got), [(1, 60), (3, 1514), (5, 14)]);
    assert_eq!(tap.receive(16, |_| panic!("nothing is left")), 0);

    let stats = tap.stats();
    assert_eq!(stats.rx_frames, 3);
    assert_eq!(stats.rx_bytes, 60 + 1514 + 14);
    assert_eq!(stats.rx_runts, 1);
    assert_eq!(stats.rx_oversize, 2);
    assert_eq!(stats.rx_errors, 0);
}

#[test]
fn transmit_writes_each_filled_frame_and_refuses_runts() {
    let (mut tap, peer) = tap_over_socket_pair(1514);
    assert_eq!(tap.max_frame_len(), 1514);
    assert_eq!(tap.transmit(0, |_| panic!("budget 0 called fill")), 0);

    let mut queue: VecDeque<Vec<u8>> = [tagged(1, 60), tagged(2, 1514), tagged(3, 14)].into();
    let mut lens = Vec::new();
    let sent = tap.transmit(8, |buf| {
        assert_eq!(buf.len(), 1514, "every transmit buffer is max_frame_len long");
        let f = queue.pop_front()?;
        buf[..f.len()].copy_from_slice(&f);
        lens.push(f.len());
        Some(f.len())
    });
    assert_eq!(sent, 3);
    assert_eq!(tags(&drain(&peer)), [(1, 60), (2, 1514), (3, 14)]);

    // The budget bounds the batch; a runt is accepted, counted, not written.
    let mut calls = 0;
    let sent = tap.transmit(2, |buf| {
        calls += 1;
        buf[..10].fill(0xee);
        Some(10)
    });
    assert_eq!((sent, calls), (2, 2));
    assert!(drain(&peer).is_empty());

    let stats = tap.stats();
    assert_eq!((stats.tx_frames, stats.tx_bytes), (3, 60 + 1514 + 14));
    assert_eq!(stats.tx_runts, 2);
    assert_eq!((stats.tx_errors, stats.tx_deferred), (0, 0));
}

#[test]
fn a_frame_that_meets_eagain_is_kept_and_sent_first_and_fill_waits_for_it() {
    let (mut tap, peer) = tap_over_socket_pair(1514);
    let mut next = 0u32;
    // Fill the socket buffer until the kernel says EAGAIN.
    let mut total_sent = 0;
    loop {
        let sent = tap.transmit(64, |buf| {
            let f = tagged(next, 1000);
            next += 1;
            buf[..f.len()].copy_from_slice(&f);
            Some(f.len())
        });
        total_sent += sent;
        if tap.has_pending_tx() {
            break;
        }
        assert_eq!(sent, 64);
        assert!(total_sent < 1_000_000, "the socket buffer never filled");
    }
    // Every frame fill produced was accepted, the last one is held.
    assert_eq!(total_sent, next as usize);
    assert_eq!(tap.stats().tx_deferred, 1);
    assert_eq!(tap.stats().tx_frames, u64::from(next) - 1);

    // No free buffer: fill is not called, nothing is accepted.
    assert_eq!(tap.transmit(64, |_| panic!("fill called while a frame is held")), 0);
    assert!(!tap.flush_pending_tx());

    // The peer reads everything but the held frame, in order.
    let first: Vec<(u32, usize)> = (0..next - 1).map(|tag| (tag, 1000)).collect();
    assert_eq!(tags(&drain(&peer)), first);

    // Next transmit: the held frame goes out first, then new ones.
    let held = next - 1;
    let sent = tap.transmit(2, |buf| {
        let f = tagged(next, 1000);
        next += 1;
        buf[..f.len()].copy_from_slice(&f);
        Some(f.len())
    });
    assert_eq!(sent, 2);
    assert!(!tap.has_pending_tx());
    assert_eq!(tags(&drain(&peer)), [(held, 1000), (held + 1, 1000), (held + 2, 1000)]);
    let stats = tap.stats();
    assert_eq!(stats.tx_frames, u64::from(next));
    assert_eq!(stats.tx_errors, 0);
}

#[test]
fn wait_writes_a_held_frame_once_the_descriptor_is_writable() {
    let (mut tap, peer) = tap_over_socket_pair(1514);
    let mut next = 0u32;
    while !tap.has_pending_tx() {
        tap.transmit(64, |buf| {
            let f = tagged(next, 1000);
            next += 1;
            buf[..f.len()].copy_from_slice(&f);
            Some(f.len())
        });
        assert!(next < 1_000_000, "the socket buffer never filled");
    }
    // Still full: wait times out with the frame held.
    tap.wait(Some(Duration::from_millis(20))).expect("wait");
    assert!(tap.has_pending_tx());
    // Room again while it sleeps: the wait wakes (POLLOUT) and writes it.
    // (The reader may or may not catch the held frame in its own drain.)
    let reader = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        let drained = drain(&peer);
        (peer, drained)
    });
    let start = Instant::now();
    tap.wait(Some(Duration::from_secs(10))).expect("wait");
    assert!(start.elapsed() < Duration::from_secs(5), "wait slept through the room made for the held frame");
    assert!(!tap.has_pending_tx());
    let (peer, mut delivered) = reader.join().expect("reader");
    delivered.extend(drain(&peer));
    let all: Vec<(u32, usize)> = (0..next).map(|tag| (tag, 1000)).collect();
    assert_eq!(tags(&delivered), all, "every frame, the held one last, once");
    assert_eq!(tap.stats().tx_frames, u64::from(next));
}

#[test]
fn wait_times_out_wakes_for_a_frame_and_reports_a_closed_peer() {
    let (mut tap, peer) = tap_over_socket_pair(1514);
    let start = Instant::now();
    tap.wait(Some(Duration::from_millis(50))).expect("wait");
    let waited = start.elapsed();
    assert!(waited >= Duration::from_millis(50), "woke after {waited:?}, before the timeout");
    // A sub-millisecond timeout is honoured too (ppoll, not poll).
    tap.wait(Some(Duration::from_micros(200))).expect("wait");

    let sender = std::thread::spawn({
        let peer = peer.try_clone().expect("clone");
        move || {
            std::thread::sleep(Duration::from_millis(30));
            peer.send(&tagged(7, 64)).expect("send");
        }
    });
    let start = Instant::now();
    tap.wait(Some(Duration::from_secs(10))).expect("wait");
    assert!(start.elapsed() < Duration::from_secs(5), "wait slept through a frame");
    sender.join().expect("sender");
    assert_eq!(tap.receive(4, |f| assert!(f == tagged(7, 64), "frame changed")), 1);

    drop(peer);
    let err = tap.wait(Some(Duration::from_secs(10))).expect_err("the peer is gone");
    assert!(err.to_string().contains("gone"), "{err}");
}

#[test]
fn a_failed_write_drops_the_frame_counts_it_and_keeps_going() {
    let (mut tap, peer) = tap_over_socket_pair(1514);
    drop(peer);
    // EPIPE (Rust ignores SIGPIPE): each frame is accepted and dropped.
    let sent = tap.transmit(3, |buf| {
        buf[..60].fill(1);
        Some(60)
    });
    assert_eq!(sent, 3);
    let stats = tap.stats();
    assert_eq!((stats.tx_errors, stats.tx_frames, stats.tx_deferred), (3, 0, 0));
    assert!(!tap.has_pending_tx());
    assert_eq!(tap.last_error().and_then(|e| e.raw_os_error()), Some(libc::EPIPE));
    // Receive on a closed pair ends at once.
    assert_eq!(tap.receive(4, |_| panic!("no frame")), 0);
}

#[test]
#[should_panic(expected = "fill returned 1515 bytes for a 1514-byte buffer")]
#[cfg(debug_assertions)]
fn fill_overrunning_the_buffer_is_a_caller_bug() {
    let (mut tap, _peer) = tap_over_socket_pair(1514);
    tap.transmit(1, |_| Some(1515));
}

// ---------------------------------------------------------------------------
// Real TAP interfaces in a namespace of the test's own: root
// ---------------------------------------------------------------------------

#[test]
fn the_kernel_resolves_and_pings_us_through_the_tap() {
    let ns = Netns::new();
    let mut tap = ns.open(TapConfig::new("fwtap0"));
    assert_eq!(tap.name(), "fwtap0");
    assert_eq!(tap.max_frame_len(), 1514, "a new TAP has a 1500-byte MTU");
    let kernel_mac = EthernetAddress(tap.mac_address().expect("SIOCGIFHWADDR"));
    assert!(kernel_mac.is_unicast() && kernel_mac != OUR_MAC);
    ns.ip(&["addr", "add", "10.99.0.1/24", "dev", "fwtap0"]);
    ns.ip(&["link", "set", "fwtap0", "up"]);

    let mut ping = Reaped(
        ns.exec(&["ping", "-n", "-c", "3", "-i", "0.2", "-W", "2", "10.99.0.2"])
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("spawn ping"),
    );

    let deadline = Instant::now() + Duration::from_secs(20);
    let mut received: Vec<Vec<u8>> = Vec::new();
    let mut replies: VecDeque<Vec<u8>> = VecDeque::new();
    let mut sent: Vec<Vec<u8>> = Vec::new();
    let (mut arp_requests, mut echo_seqs) = (0, Vec::new());
    let status = loop {
        assert!(Instant::now() < deadline, "ping did not finish; frames so far: {received:02x?}");
        tap.wait(Some(Duration::from_millis(50))).expect("wait");
        let before = received.len();
        tap.receive(16, |f| received.push(f.to_vec()));
        for frame in &received[before..] {
            match classify(frame) {
                Seen::ArpRequest { dst, sender_mac, sender_ip, target_ip } if target_ip == OUR_IP => {
                    // Broadcast, or unicast when the kernel re-checks an entry.
                    assert!(dst == EthernetAddress::BROADCAST || dst == OUR_MAC, "ARP request to {dst}");
                    assert_eq!(sender_mac, kernel_mac, "the ARP request comes from the MAC SIOCGIFHWADDR gave");
                    assert_eq!(sender_ip, KERNEL_IP);
                    arp_requests += 1;
                    replies.push_back(arp_reply(sender_mac, sender_ip));
                }
                Seen::EchoRequest { src, dst, ip_dst, ident, seq_no, data, .. } => {
                    assert_eq!((src, dst, ip_dst), (kernel_mac, OUR_MAC, OUR_IP));
                    echo_seqs.push(seq_no);
                    replies.push_back(echo_reply(src, ident, seq_no, &data));
                }
                _ => {}
            }
        }
        let queued: Vec<Vec<u8>> = replies.iter().cloned().collect();
        let n = transmit_queued(&mut tap, &mut replies);
        sent.extend(queued.into_iter().take(n));
        if let Some(status) = ping.0.try_wait().expect("try_wait") {
            break status;
        }
    };
    let mut out = String::new();
    ping.0.stdout.take().expect("stdout").read_to_string(&mut out).expect("read ping output");
    assert!(status.success(), "ping failed ({status}): {out}");
    assert!(out.contains("3 packets transmitted, 3 received"), "{out}");
    assert!(arp_requests >= 1, "no ARP request for 10.99.0.2 in {received:02x?}");
    assert_eq!(echo_seqs, [1, 2, 3]);

    // The kernel took our ARP reply into its neighbour table.
    let neigh = ns.ip(&["neigh", "show", "10.99.0.2", "dev", "fwtap0"]);
    assert!(neigh.contains(&format!("lladdr {}", mac_string(OUR_MAC))), "neighbour table: {neigh:?}");

    let stats = tap.stats();
    assert_eq!(stats.rx_frames, received.len() as u64);
    assert_eq!(stats.rx_bytes, received.iter().map(|f| f.len() as u64).sum::<u64>());
    assert_eq!(stats.tx_frames, sent.len() as u64);
    assert_eq!(stats.tx_bytes, sent.iter().map(|f| f.len() as u64).sum::<u64>());
    assert_eq!(stats.tx_frames, arp_requests + 3);
    let faults = (stats.rx_oversize, stats.rx_runts, stats.rx_errors, stats.tx_runts, stats.tx_errors);
    assert_eq!(faults, (0, 0, 0, 0, 0), "{stats:?}");
    assert_eq!(stats.tx_deferred, 0);
}

#[test]
fn wait_on_a_tap_times_out_wakes_for_a_frame_and_reports_a_deleted_interface() {
    let ns = Netns::new();
    let mut tap = ns.open(TapConfig::new("fwtap1"));
    ns.ip(&["addr", "add", "10.99.0.1/24", "dev", "fwtap1"]);
    ns.ip(&["link", "set", "fwtap1", "up"]);

    // Nothing is sent: the wait lasts its timeout.
    let start = Instant::now();
    tap.wait(Some(Duration::from_millis(100))).expect("wait");
    assert!(start.elapsed() >= Duration::from_millis(100), "woke after {:?}", start.elapsed());
    assert_eq!(tap.receive(16, |f| panic!("unexpected frame {f:02x?}")), 0);

    // A ping makes the kernel ask who has 10.99.0.2: the wait ends early.
    let _ping = Reaped(
        ns.exec(&["ping", "-n", "-c", "1", "-W", "5", "10.99.0.2"])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn ping"),
    );
    let start = Instant::now();
    let mut seen = Vec::new();
    while seen.is_empty() {
        assert!(start.elapsed() < Duration::from_secs(4), "no frame came");
        tap.wait(Some(Duration::from_secs(5))).expect("wait");
        tap.receive(16, |f| seen.push(classify(f)));
    }
    assert!(start.elapsed() < Duration::from_secs(4), "wait slept through the frame");
    assert!(matches!(seen[0], Seen::ArpRequest { target_ip, .. } if target_ip == OUR_IP), "{seen:?}");

    // Deleting the interface under the open descriptor: wait says so at
    // once, receive and transmit count errors and never panic.
    ns.ip(&["link", "del", "fwtap1"]);
    let start = Instant::now();
    let err = tap.wait(Some(Duration::from_secs(5))).expect_err("the interface is gone");
    assert!(start.elapsed() < Duration::from_secs(4));
    assert!(err.to_string().contains("fwtap1") && err.to_string().contains("gone"), "{err}");
    assert_eq!(tap.receive(16, |_| panic!("no frame")), 0);
    assert_eq!(tap.stats().rx_errors, 1);
    let sent = tap.transmit(1, |buf| {
        buf[..60].copy_from_slice(&[0xff; 60]);
        Some(60)
    });
    assert_eq!(sent, 1, "the frame is accepted (and lost, like on a cut wire)");
    assert_eq!(tap.stats().tx_errors, 1);
    assert!(tap.last_error().is_some());
}

#[test]
fn persistent_taps_are_attached_with_their_mtu_and_clear_errors() {
    let ns = Netns::new();
    ns.ip(&["tuntap", "add", "dev", "fwp0", "mode", "tap"]);
    ns.ip(&["link", "set", "dev", "fwp0", "mtu", "9000"]);

    let first = ns.open(TapConfig::new("fwp0"));
    assert_eq!(first.max_frame_len(), 9014, "max_frame_len follows the MTU");
    let mac = first.mac_address().expect("mac");
    let shown = ns.ip(&["link", "show", "fwp0"]);
    assert!(shown.contains(&mac_string(EthernetAddress(mac))), "{mac:02x?} not in {shown}");

    // A single-queue TAP takes one descriptor at a time.
    match ns.enter(|| Tap::open("fwp0")) {
        Err(e @ TapError::Busy { .. }) => assert!(e.to_string().contains("`fwp0` is busy"), "{e}"),
        other => panic!("a second open gave {other:?}, not Busy"),
    }
    drop(first);
    // Another test's child process, between its fork and its exec, may
    // still hold a copy of the closed descriptor for a moment.
    let again = eventually("fwp0 to be free again", || {
        match ns.enter(|| Tap::open_with(&TapConfig::new("fwp0").with_max_frame_len(1514))) {
            Ok(tap) => Some(tap),
            Err(TapError::Busy { .. }) => None,
            Err(e) => panic!("reopening fwp0: {e}"),
        }
    });
    assert_eq!(again.max_frame_len(), 1514);
    drop(again);
    // Persistent: it outlived both descriptors.
    ns.ip(&["link", "show", "fwp0"]);

    // Names that exist but are not a TAP.
    ns.ip(&["tuntap", "add", "dev", "fwtun0", "mode", "tun"]);
    for name in ["lo", "fwtun0"] {
        match ns.enter(|| Tap::open(name)) {
            Err(e @ TapError::NotATap { .. }) => assert!(e.to_string().contains(&format!("`{name}`")), "{e}"),
            other => panic!("opening {name} gave {other:?}, not NotATap"),
        }
    }

    // Multi-queue: each open is one more queue; single-queue is refused.
    let q0 = ns.open(TapConfig::new("fwmq0").with_multi_queue(true));
    let q1 = ns.open(TapConfig::new("fwmq0").with_multi_queue(true));
    assert_eq!((q0.name(), q1.name()), ("fwmq0", "fwmq0"));
    match ns.enter(|| Tap::open("fwmq0")) {
        Err(e @ TapError::NotATap { wanted: "single-queue", .. }) => {
            assert!(e.to_string().contains("multi-queue"), "{e}")
        }
        other => panic!("a single-queue open of a multi-queue TAP gave {other:?}"),
    }

    // `%d`: the kernel picks the number, and name() reports it.
    let picked = ns.open(TapConfig::new("fwx%d"));
    assert_eq!(picked.name(), "fwx0");
    ns.ip(&["link", "show", "fwx0"]);
    drop(picked);
    // Transient: it goes away with its descriptor (once any forked copy is
    // gone too, as above).
    eventually("fwx0 to go away with its descriptor", || {
        let out = Command::new("ip").args(["-n", &ns.name, "link", "show", "fwx0"]).output().expect("ip");
        (!out.status.success()).then_some(())
    });
}

/// Env var that turns [`unprivileged_open_helper`] on in a child process.
const HELPER_ENV: &str = "FAIRWAY_TAP_UNPRIVILEGED_HELPER";

#[test]
fn opening_without_privilege_says_permission_denied() {
    let ns = Netns::new();
    // The test binary, copied where an unprivileged user may run it.
    let dir = TempDir::new();
    let exe = dir.0.join("tap-helper");
    std::fs::copy(std::env::current_exe().expect("current_exe"), &exe).expect("copy the test binary");
    std::fs::set_permissions(&exe, std::fs::Permissions::from_mode(0o755)).expect("chmod");

    // Root without CAP_NET_ADMIN: EPERM on TUNSETIFF. As `nobody`: EACCES
    // on /dev/net/tun where it is mode 0600, else EPERM. Either way the
    // same variant, one clear line.
    let drop_cap = ["--inh-caps=-net_admin", "--bounding-set=-net_admin"];
    let as_nobody = ["--reuid=65534", "--regid=65534", "--clear-groups"];
    for privileges in [&drop_cap[..], &as_nobody[..]] {
        let mut args = vec!["setpriv"];
        args.extend_from_slice(privileges);
        let exe = exe.to_str().expect("utf-8 path");
        args.extend_from_slice(&[exe, "--exact", "tap::tests::unprivileged_open_helper", "--ignored", "--nocapture"]);
        let out = ns.exec(&args).env(HELPER_ENV, "1").output().expect("run the helper");
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && stdout.contains("HELPER permission denied"),
            "helper {privileges:?} failed ({}):\n{stdout}\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

/// Run by [`opening_without_privilege_says_permission_denied`] in a child
/// process without `CAP_NET_ADMIN`; does nothing elsewhere.
#[test]
#[ignore = "helper: opening_without_privilege_says_permission_denied runs it without privileges"]
fn unprivileged_open_helper() {
    if std::env::var_os(HELPER_ENV).is_none() {
        return;
    }
    match Tap::open("fwperm0") {
        Err(e @ TapError::PermissionDenied { .. }) => {
            let message = e.to_string();
            assert!(!message.contains('\n'));
            assert!(message.contains("run as root"), "{message}");
            println!("HELPER {message}");
        }
        other => panic!("expected PermissionDenied, got {other:?}"),
    }
}

/// A directory removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let path =
            std::env::temp_dir().join(format!("fwtap-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed)));
        std::fs::create_dir_all(&path).expect("create temp dir");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod temp dir");
        TempDir(path)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}
