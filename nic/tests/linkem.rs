//! `fairway-linkem` between real veth pairs in network namespaces: frames
//! cross unchanged, loss, delay and the queue limit do what they say, kernel
//! TCP with its offloads on arrives intact, and errors are one clear line.
//!
//! Needs root (namespaces, raw sockets): run as root or via `cargo xtask
//! test`. Each test makes its own namespaces (`fwl-<pid>-<n>-*`) and removes
//! them when it ends, passed or failed. The timing test has a generous
//! tolerance; the precise figures are in `nic/src/linkem/README.md`.
#![cfg(target_os = "linux")]

mod linkem_support;

use std::path::Path;
use std::process::Command;
use std::time::Duration;

use linkem_support::{RawSocket, SERVER_IP, Trio, in_ns, needs_root, test_frame};

const ETHERTYPE: u16 = 0x88b5; // IEEE local experimental

fn binary() -> &'static Path {
    Path::new(env!("CARGO_BIN_EXE_fairway-linkem"))
}

/// Sends `frames` from `dev` in `from` and returns what `to_dev` in `to`
/// receives of our EtherType, until 300 ms pass without a frame.
fn cross(from: &str, dev: &'static str, to: &str, to_dev: &'static str, frames: Vec<Vec<u8>>) -> Vec<Vec<u8>> {
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let receiver = in_ns(to, move || {
        let socket = RawSocket::open(to_dev, ETHERTYPE);
        ready_tx.send(()).expect("test waits");
        socket.drain(Duration::from_millis(300))
    });
    ready_rx.recv().expect("receiver ready");
    in_ns(from, move || {
        let socket = RawSocket::open(dev, ETHERTYPE);
        for frame in &frames {
            socket.send(frame);
        }
    })
    .join()
    .expect("sender");
    receiver.join().expect("receiver")
}

#[test]
fn frames_cross_both_ways_unchanged() {
    let trio = Trio::new();
    let linkem = trio.linkem(binary(), &[]);
    let client_mac = Trio::mac(&trio.client, "c0");
    let server_mac = Trio::mac(&trio.server, "s0");
    let stranger = [0x02, 0, 0, 0, 0, 0x99];
    // Header-only to full-size frames, to the peer, to a MAC nobody has
    // (a wire forwards it anyway) and to broadcast.
    let frames = |src: [u8; 6], dst: [u8; 6], tag: u32| -> Vec<Vec<u8>> {
        let sizes = [22, 23, 60, 61, 64, 100, 577, 1000, 1513, 1514];
        let mut out: Vec<Vec<u8>> =
            sizes.iter().enumerate().map(|(seq, &len)| test_frame(dst, src, ETHERTYPE, tag, seq as u32, len)).collect();
        out.push(test_frame(stranger, src, ETHERTYPE, tag, 100, 300));
        out.push(test_frame([0xff; 6], src, ETHERTYPE, tag, 101, 300));
        out
    };
    let to_server = frames(client_mac, server_mac, 1);
    let got = cross(&trio.client, "c0", &trio.server, "s0", to_server.clone());
    assert_eq!(got, to_server, "client -> server");
    let to_client = frames(server_mac, client_mac, 2);
    let got = cross(&trio.server, "s0", &trio.client, "c0", to_client.clone());
    assert_eq!(got, to_client, "server -> client");

    let counters = linkem.stop();
    for (name, dir) in [("a->b", &counters.a_to_b), ("b->a", &counters.b_to_a)] {
        assert!(dir["forwarded"] >= 12.0, "{name}: {}", counters.text);
        assert_eq!(dir["forwarded"], dir["received"], "{name}: {}", counters.text);
        assert_eq!(dir["queue_drops"] + dir["lost"] + dir["oversized"] + dir["send_errors"], 0.0, "{}", counters.text);
    }
}

#[test]
fn loss_of_100_percent_drops_everything() {
    let trio = Trio::new();
    let linkem = trio.linkem(binary(), &["--loss", "100%"]);
    let server_mac = Trio::mac(&trio.server, "s0");
    let client_mac = Trio::mac(&trio.client, "c0");
    let burst = |src, dst, tag| (0..50).map(|seq| test_frame(dst, src, ETHERTYPE, tag, seq, 200)).collect::<Vec<_>>();
    assert_eq!(cross(&trio.client, "c0", &trio.server, "s0", burst(client_mac, server_mac, 1)), Vec::<Vec<u8>>::new());
    assert_eq!(cross(&trio.server, "s0", &trio.client, "c0", burst(server_mac, client_mac, 2)), Vec::<Vec<u8>>::new());
    let counters = linkem.stop();
    for dir in [&counters.a_to_b, &counters.b_to_a] {
        assert_eq!(dir["forwarded"], 0.0, "{}", counters.text);
        assert!(dir["lost"] >= 50.0, "{}", counters.text);
        assert_eq!(dir["lost"], dir["received"], "{}", counters.text);
    }
}

/// SIGHUP applies the `--control` file's options on top of the command
/// line's; a file that does not parse changes nothing; an empty one
/// restores the command line's link.
#[test]
fn sighup_applies_the_control_file_and_an_empty_one_restores_the_link() {
    let trio = Trio::new();
    let control = std::env::temp_dir().join(format!("fwl-control-{}", std::process::id()));
    std::fs::write(&control, "").unwrap();
    let linkem = trio.linkem(binary(), &["--control", control.to_str().unwrap()]);
    let (server_mac, client_mac) = (Trio::mac(&trio.server, "s0"), Trio::mac(&trio.client, "c0"));
    let burst = |tag| (0..20).map(|seq| test_frame(server_mac, client_mac, ETHERTYPE, tag, seq, 200)).collect();
    let send = |tag| cross(&trio.client, "c0", &trio.server, "s0", burst(tag)).len();
    let hangup = |options: &str| {
        std::fs::write(&control, options).unwrap();
        linkem.signal(libc::SIGHUP);
        // The main thread takes it at once; each direction at its next turn,
        // before it reads another frame.
        std::thread::sleep(Duration::from_millis(300));
    };
    assert_eq!(send(1), 20, "the command line's link: no loss");
    hangup("--loss 100%");
    assert_eq!(send(2), 0, "the control file's 100 % loss");
    hangup("--loss");
    assert_eq!(send(3), 0, "a file that does not parse changes nothing");
    hangup("");
    assert_eq!(send(4), 20, "an empty file restores the command line's link");
    let counters = linkem.stop();
    let _ = std::fs::remove_file(&control);
    assert_eq!(counters.a_to_b["lost"], 40.0, "{}", counters.text);
    assert_eq!(counters.a_to_b["forwarded"], 40.0, "{}", counters.text);
    assert_eq!(counters.stderr.matches("fairway-linkem: reconfigured").count(), 2, "{}", counters.stderr);
    assert!(counters.stderr.contains("control file ignored"), "{}", counters.stderr);
}

/// `rtt min/avg/max/mdev = 10.1/10.2/10.9/0.1 ms` → (min, avg, max).
fn ping(ns: &str, args: &[&str]) -> (f64, f64, f64) {
    let out =
        Command::new("ip").args(["netns", "exec", ns, "ping", "-q", "-W", "2"]).args(args).output().expect("run ping");
    let text = String::from_utf8_lossy(&out.stdout);
    let line =
        text.lines().find(|l| l.contains("min/avg/max")).unwrap_or_else(|| panic!("ping printed no RTT: {text}"));
    let numbers: Vec<f64> = line
        .split(" = ")
        .nth(1)
        .and_then(|v| v.split(' ').next())
        .map(|v| v.split('/').map(|n| n.parse().expect("number")).collect())
        .expect("rtt figures");
    (numbers[0], numbers[1], numbers[2])
}

#[test]
fn a_delay_shows_in_the_ping_rtt() {
    let trio = Trio::new();
    let linkem = trio.linkem(binary(), &["--delay", "5ms"]);
    // ARP first, so that no echo waits for it.
    ping(&trio.client, &["-c", "1", &SERVER_IP.to_string()]);
    let (min, avg, _) = ping(&trio.client, &["-c", "50", "-i", "0.02", &SERVER_IP.to_string()]);
    linkem.stop();
    // Each echo crosses twice, and can never be early. Busy CI machines wake
    // up late, hence the 2 ms on the average.
    assert!(min >= 9.99, "min RTT {min} ms < 2 × 5 ms");
    assert!((10.0..=12.0).contains(&avg), "mean RTT {avg} ms is not 10 ms ± 2 ms");
    // Per-direction settings: 1 ms one way, 9 ms back.
    let linkem = trio.linkem(binary(), &["--delay", "50ms", "--delay-ab", "1ms", "--delay-ba", "9ms"]);
    let (min, avg, _) = ping(&trio.client, &["-c", "20", "-i", "0.02", &SERVER_IP.to_string()]);
    linkem.stop();
    assert!(min >= 9.99 && (10.0..=12.0).contains(&avg), "1 ms + 9 ms: RTT min {min} avg {avg}");
}

#[test]
fn the_queue_limit_drops_a_burst_beyond_it() {
    let trio = Trio::new();
    // 1000-byte frames take 8 ms each at 1 Mbit/s: the whole burst arrives
    // while the first is on the wire; the queue holds 10 more (10 000 B of
    // 10 240), and drops the rest.
    let linkem = trio.linkem(binary(), &["--rate", "1mbit", "--queue", "10kb"]);
    let client_mac = Trio::mac(&trio.client, "c0");
    let server_mac = Trio::mac(&trio.server, "s0");
    let burst: Vec<Vec<u8>> = (0..100).map(|seq| test_frame(server_mac, client_mac, ETHERTYPE, 7, seq, 1000)).collect();
    let got = cross(&trio.client, "c0", &trio.server, "s0", burst.clone());
    let counters = linkem.stop();
    let ab = &counters.a_to_b;
    // Exactly 11 unless the sender was descheduled mid-burst for a whole
    // frame time.
    assert!((11..=14).contains(&got.len()), "{} frames crossed: {}", got.len(), counters.text);
    assert_eq!(got, burst[..got.len()], "the first frames cross, in order");
    assert_eq!(ab["forwarded"], got.len() as f64, "{}", counters.text);
    assert_eq!(ab["queue_drops"], (100 - got.len()) as f64, "{}", counters.text);
}

#[test]
fn kernel_tcp_with_offloads_on_arrives_intact() {
    use std::io::{Read, Write};
    let trio = Trio::new();
    let linkem = trio.linkem(binary(), &["--delay", "1ms", "--rate", "200mbit", "--loss", "0.5%"]);
    let data: Vec<u8> = (0..4_000_000u32).map(|i| (i.wrapping_mul(2_654_435_761) >> 24) as u8).collect();
    let expected = data.clone();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    let receiver = in_ns(&trio.server, move || {
        let listener = std::net::TcpListener::bind(("0.0.0.0", 9100)).expect("listen");
        ready_tx.send(()).expect("test waits");
        let (mut stream, _) = listener.accept().expect("accept");
        stream.set_read_timeout(Some(Duration::from_secs(20))).expect("timeout");
        let mut got = Vec::new();
        stream.read_to_end(&mut got).expect("read");
        got
    });
    ready_rx.recv().expect("listening");
    in_ns(&trio.client, move || {
        let mut stream = std::net::TcpStream::connect((SERVER_IP, 9100)).expect("connect");
        stream.write_all(&data).expect("write");
    })
    .join()
    .expect("sender");
    let got = receiver.join().expect("receiver");
    let counters = linkem.stop();
    assert!(got == expected, "{} bytes arrived, {} sent, or they differ", got.len(), expected.len());
    // veth's defaults: TSO on the sender and checksum offload on both.
    assert!(counters.a_to_b["segmented"] > 0.0, "no super-frame was cut: {}", counters.text);
    assert!(counters.b_to_a["checksums_completed"] > 0.0, "{}", counters.text);
    assert!(counters.a_to_b["lost"] > 0.0, "{}", counters.text);
}

/// Runs the binary in `ns` (or here) and returns (exit code, stderr).
fn run(ns: Option<&str>, args: &[&str]) -> (i32, String) {
    let mut command = match ns {
        Some(ns) => {
            let mut c = Command::new("ip");
            c.args(["netns", "exec", ns]).arg(binary());
            c
        }
        None => Command::new(binary()),
    };
    let out = command.args(args).output().expect("run fairway-linkem");
    (out.status.code().unwrap_or(-1), String::from_utf8_lossy(&out.stderr).into_owned())
}

#[test]
fn bad_arguments_are_one_clear_line() {
    for (args, expected) in [
        (&["--a", "x", "--b", "y", "--delay", "25"][..], "`25` has no unit: write 25ms, 25us or 25s"),
        (&["--a", "x", "--b", "y", "--rate", "100mbps"][..], "bytes per second"),
        (&["--a", "x", "--b", "y", "--loss", "150%"][..], "more than 100 %"),
        (&["--a", "x", "--b", "y", "--queue", "10kbit"][..], "is not a size"),
    ] {
        let (code, stderr) = run(None, args);
        assert_eq!(code, 2, "{args:?}: {stderr}");
        assert!(stderr.lines().next().is_some_and(|l| l.contains(expected)), "{args:?}: {stderr}");
    }
}

#[test]
fn missing_down_and_forbidden_interfaces_are_one_clear_line() {
    needs_root();
    let trio = Trio::new();
    let (code, stderr) = run(Some(&trio.emu), &["--a", "ea", "--b", "nosuch0"]);
    assert_eq!(
        (code, stderr.trim()),
        (1, "fairway-linkem: no interface named `nosuch0` in this network namespace (see `ip link`)")
    );
    let (code, stderr) = run(Some(&trio.emu), &["--a", "ea", "--b", "ea"]);
    assert_eq!(code, 1, "{stderr}");
    assert!(stderr.contains("both ends are `ea`"), "{stderr}");
    linkem_support::sh(&["ip", "-n", &trio.emu, "link", "set", "eb", "down"]);
    let (code, stderr) = run(Some(&trio.emu), &["--a", "ea", "--b", "eb"]);
    assert_eq!(
        (code, stderr.trim()),
        (1, "fairway-linkem: interface `eb` is down: bring it up with `ip link set eb up`")
    );
    // Without CAP_NET_RAW (an unprivileged user).
    let out = Command::new("ip")
        .args(["netns", "exec", &trio.emu, "setpriv", "--reuid=65534", "--regid=65534", "--clear-groups"])
        .arg(binary())
        .args(["--a", "ea", "--b", "eb"])
        .output()
        .expect("setpriv");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert_eq!(
        stderr.trim(),
        "fairway-linkem: opening an AF_PACKET socket needs CAP_NET_RAW: run fairway-linkem as root"
    );
}

#[test]
fn a_deleted_interface_ends_the_emulator_with_an_error() {
    let trio = Trio::new();
    let linkem = trio.linkem(binary(), &["--delay", "1ms"]);
    linkem_support::sh(&["ip", "-n", &trio.emu, "link", "del", "eb"]);
    let (code, stderr) = linkem.wait_exit(Duration::from_secs(5));
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("fairway-linkem: direction b->a stopped: interface `eb` was deleted"), "{stderr}");
}

/// A deletion first takes the interface down, and the socket reports only
/// that: when the emulator looked while the interface still existed (a
/// loaded machine), it waited for good. Taken down first and deleted a
/// moment later, the interface must still end the emulator.
#[test]
fn an_interface_deleted_after_going_down_ends_the_emulator_too() {
    let trio = Trio::new();
    let linkem = trio.linkem(binary(), &["--delay", "1ms"]);
    linkem_support::sh(&["ip", "-n", &trio.emu, "link", "set", "eb", "down"]);
    std::thread::sleep(Duration::from_millis(300));
    linkem_support::sh(&["ip", "-n", &trio.emu, "link", "del", "eb"]);
    let (code, stderr) = linkem.wait_exit(Duration::from_secs(5));
    assert!(stderr.contains("fairway-linkem: warning: interface `eb` went down"), "{stderr}");
    assert_eq!(code, Some(1), "{stderr}");
    assert!(stderr.contains("fairway-linkem: direction b->a stopped: interface `eb` was deleted"), "{stderr}");
}
