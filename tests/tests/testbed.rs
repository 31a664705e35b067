//! The namespace testbed against the real kernel: it builds what it says,
//! frames cross the bridge and reach Fairway's interfaces, and it always
//! cleans up (twice in a row, after a crash, in a panic, after a failed
//! `up`). Needs root; every test has its own prefix and finishes in seconds.

use std::panic::{AssertUnwindSafe, catch_unwind};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use fairway_tests::testbed::{
    self, BRIDGE, CLIENT_IF, LinkParams, SERVER_IF, Status, TAP_BRIDGE, TAP_IF, Testbed, TestbedConfig, TestbedError,
    exec, exec_timeout, spawn,
};

/// A prefix no other test (in this process or another) uses:
/// `fwt{pid}_{n}`, at most 13 characters.
fn unique_prefix() -> String {
    static NEXT: AtomicUsize = AtomicUsize::new(0);
    format!("fwt{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed))
}

#[track_caller]
fn require_root() {
    if let Err(e) = testbed::require_root() {
        panic!("{e}");
    }
}

/// The namespaces `ip netns list` shows for `prefix`.
fn listed(prefix: &str) -> Vec<String> {
    let out = Command::new("ip").args(["netns", "list"]).output().expect("ip netns list");
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| name.strip_prefix(prefix).is_some_and(|rest| rest.starts_with('-')))
        .map(str::to_owned)
        .collect()
}

#[track_caller]
fn ping(ns: &str, to: &str) -> String {
    let out = exec(ns, &["ping", "-c", "1", "-W", "2", to]).unwrap();
    assert!(out.success(), "ping {to} from {ns} failed:\n{}{}", out.stdout_text(), out.stderr_text());
    out.stdout_text()
}

fn ports(status: &Status, ns: &str, bridge: &str) -> Vec<String> {
    let mut ports: Vec<String> =
        status.namespace(ns).unwrap().bridge_ports(bridge).into_iter().map(str::to_owned).collect();
    ports.sort();
    ports
}

/// Reads one frame from the TAP, as Fairway's TAP backend would: prints
/// "attached", then "frame SRC-MAC ETHERTYPE" for the first frame.
const TAP_READER: &str = r#"
import fcntl, os, select, struct, time
fd = os.open("/dev/net/tun", os.O_RDWR)
TUNSETIFF, IFF_TAP, IFF_NO_PI = 0x400454ca, 0x0002, 0x1000
fcntl.ioctl(fd, TUNSETIFF, struct.pack("16sH", b"fwtap0", IFF_TAP | IFF_NO_PI))
print("attached", flush=True)
deadline = time.time() + 5
while time.time() < deadline:
    if select.select([fd], [], [], 0.1)[0]:
        frame = os.read(fd, 65536)
        print("frame", frame[6:12].hex(":"), frame[12:14].hex(), flush=True)
        break
"#;

#[test]
fn up_builds_the_topology_and_frames_reach_fairways_interfaces() {
    require_root();
    let prefix = unique_prefix();
    let tb = Testbed::up(TestbedConfig::new(&prefix).clients(2).queues(2)).unwrap();
    let (srv, sw, c0, c1) = (tb.server_ns(), tb.switch_ns(), tb.client_ns(0), tb.client_ns(1));
    assert_eq!(tb.server_ip().to_string(), "10.77.0.1");
    assert_eq!(tb.client_namespaces(), [c0.clone(), c1.clone()]);

    // What exists, read back from `ip -n ... -d link` and `ip -4 addr`.
    let status = tb.status().unwrap();
    let names: Vec<&str> = status.namespaces.iter().map(|ns| ns.name.as_str()).collect();
    assert_eq!(names, [&srv, &sw, &c0, &c1]);
    let fw0 = status.interface(&srv, SERVER_IF).unwrap();
    assert_eq!((fw0.kind.as_str(), fw0.rx_queues, fw0.tx_queues, fw0.mtu), ("veth", 2, 2, 1500), "{status}");
    assert!(fw0.ipv4.is_empty() && fw0.is_up() && fw0.xdp.is_none(), "{status}");
    assert_eq!(fw0.mac, tb.server_mac());
    let peer = status.interface(&sw, "srv").unwrap();
    assert_eq!((peer.rx_queues, peer.tx_queues), (2, 2), "fw0's peer must be multi-queue too\n{status}");
    let tap = status.interface(&srv, TAP_IF).unwrap();
    assert_eq!((tap.kind.as_str(), tap.master.as_deref()), ("tun", Some(TAP_BRIDGE)), "{status}");
    assert_eq!(ports(&status, &srv, TAP_BRIDGE), ["fwtap0", "tapup"]);
    assert_eq!(ports(&status, &sw, BRIDGE), ["c0", "c1", "srv", "tap"]);
    for (i, ns) in [&c0, &c1].into_iter().enumerate() {
        let eth0 = status.interface(ns, CLIENT_IF).unwrap();
        assert_eq!(eth0.ipv4, [format!("10.77.0.{}/24", 10 + i)], "{status}");
        assert_eq!(eth0.mac, tb.client_mac(i));
    }
    // The same, as `ip` prints it.
    let link = testbed::exec(&srv, &["ip", "-d", "link", "show", "dev", SERVER_IF]).unwrap().checked().unwrap();
    assert!(link.stdout_text().contains("numtxqueues 2 numrxqueues 2"), "{}", link.stdout_text());
    let addr = testbed::exec(&srv, &["ip", "-4", "addr", "show", "dev", SERVER_IF]).unwrap().checked().unwrap();
    assert_eq!(addr.stdout_text().trim(), "", "fw0 must have no kernel IPv4 address");

    // Offloads off where frames are made or read; no IPv6.
    let k = exec(&c0, &["ethtool", "-k", CLIENT_IF]).unwrap().checked().unwrap().stdout_text();
    assert!(k.contains("tx-checksumming: off") && k.contains("generic-segmentation-offload: off"), "{k}");
    let k = exec(&srv, &["ethtool", "-k", SERVER_IF]).unwrap().checked().unwrap().stdout_text();
    assert!(k.contains("generic-receive-offload: off"), "{k}");
    let v6 = exec(&c1, &["sysctl", "-n", "net.ipv6.conf.all.disable_ipv6"]).unwrap().checked().unwrap();
    assert_eq!(v6.stdout_text().trim(), "1");

    // Client to client through the bridge.
    ping(&c0, "10.77.0.11");

    // A client's frame reaches fw0: pinging Fairway's address makes it ARP.
    let mut tcpdump = spawn(&srv, &["tcpdump", "-i", SERVER_IF, "-n", "-e", "-l", "-c", "1", "arp"]).unwrap();
    tcpdump.wait_for_stderr("listening on", Duration::from_secs(5)).unwrap();
    let _ = exec(&c0, &["ping", "-c", "1", "-W", "1", "10.77.0.1"]).unwrap(); // nobody answers yet
    let seen = tcpdump.wait_timeout(Duration::from_secs(5)).unwrap().stdout_text();
    assert!(seen.contains(&tb.client_mac(0)) && seen.contains("who-has 10.77.0.1 tell 10.77.0.10"), "{seen}");

    // And the TAP, read like Fairway's TAP backend reads it.
    let mut reader = spawn(&srv, &["python3", "-c", TAP_READER]).unwrap();
    reader.wait_for_stdout("attached", Duration::from_secs(5)).unwrap();
    let _ = exec(&c1, &["ping", "-c", "2", "-i", "0.5", "-W", "1", "10.77.0.1"]).unwrap();
    let seen = reader.wait_timeout(Duration::from_secs(6)).unwrap().stdout_text();
    assert!(seen.contains(&format!("frame {} 0806", tb.client_mac(1))), "{seen}");

    // A test thread can enter the server namespace, and comes back.
    let dev = || std::fs::read_to_string("/proc/thread-self/net/dev").unwrap();
    assert!(!dev().contains("fw0:"));
    {
        let guard = testbed::enter(&srv).unwrap();
        assert_eq!(guard.namespace(), srv);
        assert!(dev().contains("fw0:") && dev().contains("fwtap0:"), "{}", dev());
    }
    assert!(!dev().contains("fw0:"));
    assert!(testbed::in_netns(&c0, || dev().contains("eth0:")).unwrap());

    let report = tb.down().unwrap();
    assert_eq!(report.namespaces.len(), 4, "{report}");
    assert!(listed(&prefix).is_empty(), "{:?}", listed(&prefix));
    assert!(testbed::down(&prefix).unwrap().is_empty(), "down again has nothing to do");
    assert!(testbed::status(&prefix).unwrap().is_empty());
}

#[test]
fn up_twice_rebuilds_and_cleans_what_a_crashed_run_left() {
    require_root();
    let prefix = unique_prefix();
    let config = TestbedConfig::new(&prefix).clients(1).queues(1);
    let first = Testbed::up(config.clone()).unwrap();
    // A crash: the testbed is never torn down and a process stays inside.
    let mut stray = Command::new("ip")
        .args(["netns", "exec", &first.client_ns(0), "sleep", "60"])
        .stdin(Stdio::null())
        .spawn()
        .unwrap();
    first.leak();

    let second = Testbed::up(config).unwrap();
    let deadline = Instant::now() + Duration::from_secs(5);
    while stray.try_wait().unwrap().is_none() {
        assert!(Instant::now() < deadline, "up left the stray process alive");
        std::thread::sleep(Duration::from_millis(10));
    }
    let status = second.status().unwrap();
    assert_eq!(status.namespaces.len(), 3, "{status}");
    assert_eq!(status.interface(&second.server_ns(), SERVER_IF).unwrap().rx_queues, 1, "{status}");
    // The rebuilt bridge forwards: the client's ARP reaches fw0.
    let mut tcpdump = spawn(&second.server_ns(), &["tcpdump", "-i", SERVER_IF, "-n", "-l", "-c", "1", "arp"]).unwrap();
    tcpdump.wait_for_stderr("listening on", Duration::from_secs(5)).unwrap();
    let _ = exec(&second.client_ns(0), &["ping", "-c", "1", "-W", "1", "10.77.0.1"]).unwrap();
    assert!(tcpdump.wait_timeout(Duration::from_secs(5)).unwrap().stdout_text().contains("who-has 10.77.0.1"));
    drop(second);
    assert!(listed(&prefix).is_empty(), "{:?}", listed(&prefix));
}

#[test]
fn down_is_safe_when_nothing_exists() {
    require_root();
    let prefix = unique_prefix();
    assert!(testbed::down(&prefix).unwrap().is_empty());
    assert!(testbed::down(&prefix).unwrap().is_empty());
    let status = testbed::status(&prefix).unwrap();
    assert!(status.is_empty(), "{status}");
    assert!(matches!(testbed::down("bad-prefix"), Err(TestbedError::Config(_))));
}

#[test]
fn a_testbed_dropped_in_a_panic_is_removed() {
    require_root();
    let prefix = unique_prefix();
    let result = catch_unwind(AssertUnwindSafe(|| {
        let tb = Testbed::up(TestbedConfig::new(&prefix).clients(1)).unwrap();
        assert_eq!(listed(&prefix).len(), 3);
        panic!("a test failing with its testbed up ({})", tb.prefix());
    }));
    assert!(result.is_err());
    assert!(listed(&prefix).is_empty(), "{:?}", listed(&prefix));
}

#[test]
fn a_failed_up_removes_what_it_built() {
    require_root();
    let prefix = unique_prefix();
    // An "emulator" that exits at once fails the last step of `up`.
    let config = TestbedConfig::new(&prefix)
        .clients(2)
        .link(1, LinkParams::with_delay(Duration::from_millis(1)))
        .linkem("/bin/false");
    let err = Testbed::up(config).unwrap_err();
    assert!(matches!(err, TestbedError::EmulatorExited { ref port, .. } if port == "c1"), "{err}");
    assert!(!err.to_string().contains('\n'), "{err}");
    assert!(listed(&prefix).is_empty(), "{:?}", listed(&prefix));
    assert!(!testbed::state_dir(&prefix).exists());
}

#[test]
fn commands_in_namespaces_are_bounded() {
    require_root();
    let tb = Testbed::up(TestbedConfig::new(unique_prefix()).clients(1)).unwrap();
    let c0 = tb.client_ns(0);
    let out = exec(&c0, &["ip", "-o", "-4", "addr", "show", "dev", CLIENT_IF]).unwrap().checked().unwrap();
    assert!(out.stdout_text().contains("10.77.0.10/24"));
    let failed = exec(&c0, &["sh", "-c", "echo oops >&2; exit 3"]).unwrap();
    assert_eq!(failed.status.code(), Some(3));
    assert!(failed.checked().unwrap_err().to_string().ends_with("failed (exit status 3): oops"));

    let started = Instant::now();
    let err = exec_timeout(&c0, &["sleep", "30"], Duration::from_millis(300)).unwrap_err();
    assert!(matches!(err, TestbedError::Timeout { .. }), "{err}");
    assert!(started.elapsed() < Duration::from_secs(5));

    // A background child dies with its handle.
    let child = spawn(&c0, &["sleep", "30"]).unwrap();
    let pid = child.id();
    drop(child);
    let gone = std::fs::read_to_string(format!("/proc/{pid}/cmdline")).map_or(true, |c| !c.contains("sleep"));
    assert!(gone);
}

/// Ping's round trip through a 10 ms emulated link is at least 2 × 10 ms.
/// Needs `fairway-linkem` (`cargo xtask test` builds it and sets
/// $FAIRWAY_LINKEM); without it the test fails and says how to build it.
#[test]
fn an_emulated_client_sees_the_delay() {
    require_root();
    let linkem = testbed::find_linkem().expect(
        "fairway-linkem not found: set FAIRWAY_LINKEM or run \
         `cargo build --release -p fairway-nic --bin fairway-linkem`",
    );
    let config = TestbedConfig::new(unique_prefix())
        .clients(2)
        .link(0, LinkParams::with_delay(Duration::from_millis(10)))
        .linkem(linkem);
    let tb = Testbed::up(config).unwrap();
    assert_eq!(tb.emulators().len(), 1);
    let status = tb.status().unwrap();
    assert!(status.emulators.iter().all(|e| e.running), "{status}");
    assert_eq!(ports(&status, &tb.switch_ns(), BRIDGE), ["c0b", "c1", "srv", "tap"]);

    let out = exec(&tb.client_ns(0), &["ping", "-c", "3", "-i", "0.2", "-W", "2", "10.77.0.11"]).unwrap();
    let text = out.stdout_text();
    assert!(out.success(), "{text}{}", out.stderr_text());
    // "rtt min/avg/max/mdev = 20.512/20.701/21.032/0.214 ms"
    let min_ms: f64 = text
        .lines()
        .find_map(|line| line.split_once(" = ")?.1.split('/').next()?.parse().ok())
        .unwrap_or_else(|| panic!("no rtt line in {text}"));
    assert!(min_ms >= 20.0, "round trip {min_ms} ms through a 10 ms link\n{text}");
}

/// On a testbed with IPv6 the clients have their fd77::/64 addresses, and
/// the kernel's address on `fw0` (for kernel-stack servers) includes
/// fd77::1 while it lives: clients reach it with `ping -6`. Dropped, IPv6 is
/// off on `fw0` again (its link-local address, from the MAC Fairway uses,
/// would be Fairway's too).
#[test]
fn the_kernel_address_covers_ipv6_on_a_testbed_with_ipv6() {
    require_root();
    let tb = Testbed::up(TestbedConfig::new(unique_prefix()).clients(1).queues(1).ipv6(true)).unwrap();
    let client6 = exec(&tb.client_ns(0), &["ip", "-6", "addr", "show", "dev", CLIENT_IF]).unwrap().stdout_text();
    assert!(client6.contains(&format!("{}/64", tb.client_ip6(0))), "{client6}");
    let server6 = tb.server_ip6().to_string();
    let address = testbed::KernelAddress::add(&tb).unwrap();
    let out = exec_timeout(&tb.client_ns(0), &["ping", "-6", "-c", "1", "-W", "2", &server6], Duration::from_secs(10))
        .unwrap();
    assert!(out.success(), "ping -6 {server6}: {}{}", out.stdout_text(), out.stderr_text());
    drop(address);
    let fw0 = exec(&tb.server_ns(), &["ip", "-6", "addr", "show", "dev", SERVER_IF]).unwrap().stdout_text();
    assert!(!fw0.contains("inet6"), "fw0 keeps IPv6 addresses: {fw0}");
    tb.down().unwrap();
}
