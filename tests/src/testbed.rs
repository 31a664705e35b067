//! The testbed: network namespaces where Fairway meets real Linux peers.
//!
//! One implementation, used two ways: `cargo xtask testbed up|down|status`
//! keeps one up for a developer (the `fairway-testbed` binary,
//! [`Testbed::leak`]), and integration tests each build their own under a
//! unique prefix and lose it when the [`Testbed`] drops, panics included.
//! Traffic stays inside the namespaces built here; the host's own
//! interfaces, routes and addresses are never touched.
//!
//! # Topology
//!
//! ```text
//!  {p}-c0                {p}-sw                                      {p}-srv
//! ┌───────────────┐     ┌─────────────────────────────────────┐     ┌───────────────────────────────┐
//! │ eth0          ├─────┤ c0 ─────────────────┐               │     │                               │
//! │ 10.77.0.10/24 │     │                     │               │     │                               │
//! └───────────────┘     │                    br0 ─── srv ─────┼─────┤ fw0: Q queues, no IPv4        │
//!  {p}-c1               │                     │               │     │   (Fairway over AF_XDP)       │
//! ┌───────────────┐     │                     ├────── tap ─────┼─────┤ tapup ─ brtap ─ fwtap0        │
//! │ eth0          ├─────┤ c1 ═ linkem ═ c1e ─ c1b             │     │   (Fairway over TAP)          │
//! │ 10.77.0.11/24 │     │                                     │     │                               │
//! └───────────────┘     └─────────────────────────────────────┘     └───────────────────────────────┘
//! ```
//!
//! A line between two names is a veth pair, or a bridge and its port; `═`
//! is `fairway-linkem` carrying frames between two interfaces. Here client 0
//! is on a direct link and client 1 on an emulated one.
//!
//! - `{p}-sw` holds the Linux bridge `br0`; every other namespace hangs off
//!   it by a veth pair whose switch end is a port.
//! - `{p}-srv` holds `fw0`, a veth with `Q` receive and transmit queues
//!   (`Q` = [`TestbedConfig::queues`], Fairway's shard count); its peer `srv`
//!   has `Q` queues too, which is what spreads frames over `fw0`'s queues (a
//!   veth delivers on the receive queue whose number is the peer's transmit
//!   queue, which the kernel picks by flow hash; with a one-queue peer
//!   everything lands on queue 0). `fw0` has no IP address: the kernel must
//!   not answer for Fairway's 10.77.0.1.
//! - `{p}-srv` also holds the persistent TAP `fwtap0`, joined to the switch
//!   by a small bridge `brtap` and the veth `tapup`/`tap`. Over TAP, Fairway
//!   must use a MAC address other than `fwtap0`'s own (the bridge takes its
//!   ports' addresses for itself and would not forward frames for it):
//!   [`Testbed::tap_stack_mac`] is one set aside for it.
//! - Client `i`, in `{p}-c{i}`, has `eth0` with 10.77.0.(10+i)/24. Its peer
//!   `c{i}` is a bridge port, or, when the client has [`LinkParams`], one end
//!   of `fairway-linkem --a c{i} --b c{i}e`, running in `{p}-sw`, whose
//!   other end's veth peer `c{i}b` is the bridge port.
//! - With [`TestbedConfig::server_link`], `srv` is not a bridge port
//!   either: `fairway-linkem --a srv --b srve` carries its frames, and
//!   `srve`'s peer `srvb` is the port. Every client's traffic to and from
//!   the server then crosses that one emulated link: a shared bottleneck.
//! - Fairway's address is 10.77.0.1/24 (host 1 of [`TestbedConfig::subnet`]).
//!   MAC addresses are fixed and say whose they are: `02:00` then the IPv4
//!   address (`fw0` 02:00:0a:4d:00:01, client 0 02:00:0a:4d:00:0a);
//!   `fwtap0` is 02:01:…, the one for Fairway over TAP 02:02:….
//!
//! With [`TestbedConfig::rx_cpus`], the kernel's receive processing (RPS)
//! runs on the server's CPUs in its namespace and on the clients' CPUs in
//! the switch's and theirs, as on separate machines: a server's core does
//! not run its clients' receive path, nor a client's core its server's.
//!
//! Every veth end has `tso off gso off gro off` (ethtool), so no frame is
//! longer than the MTU (1500 bytes, or [`TestbedConfig::mtu`]). Transmit
//! checksum offload (`tx`) is off too, except on `fw0` and on the switch's
//! ports toward the clients: a client's kernel, the switch's and the TAP's
//! fill in TCP checksums before a frame leaves (AF_XDP hands Fairway the raw
//! frame, and a partial checksum would read as corrupt), while the server,
//! like a real server's NIC, may leave its checksums to the interface: its
//! frames reach the clients' kernels marked partial, which they take without
//! summing (and `fairway-linkem` completes them, as a wire's sender would).
//! IPv6 is disabled in every namespace (no router solicitations or DAD on
//! the links).
//!
//! # Cleaning up
//!
//! [`Testbed::up`] first removes whatever an earlier run with the same
//! prefix left, and removes what it built if a step fails. [`down`] kills
//! the emulators recorded in [`state_dir`] and every process inside the
//! namespaces, detaches XDP from `fw0` (and unpins libxdp's dispatcher),
//! and deletes the namespaces, which deletes their interfaces. It is safe
//! when nothing exists. See [`netns`] for entering a namespace from a test
//! thread and for why bpffs is absent under `ip netns exec`.

mod config;
mod error;
mod kernel_address;
pub mod netns;
mod process;
mod status;

use std::fmt;
use std::fs::{self, File};
use std::io::Write;
use std::net::{Ipv4Addr, Ipv6Addr};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

pub use config::{
    LINK_KEYS, LinkParams, MAX_MTU, MAX_PREFIX_LEN, MAX_QUEUES, MIN_MTU, RxCpus, Subnet, TestbedConfig, parse_duration,
    parse_mtu, parse_percent, parse_rate, parse_size, validate_prefix,
};
pub use error::TestbedError;
pub use kernel_address::KernelAddress;
pub use netns::{NetnsGuard, enter, in_netns, is_root, require_root};
pub use process::{DEFAULT_TIMEOUT, ExecOutput, ServerProcess, Spawned, exec, exec_timeout, spawn, spawn_here};
pub use status::{EmulatorStatus, InterfaceStatus, NamespaceStatus, Status, XdpStatus, status};

use config::{CLIENT_HOST_BASE, SERVER_HOST};
use netns::list_namespaces;
use process::{describe, display_command, run};

/// The prefix of `cargo xtask testbed`.
pub const DEFAULT_PREFIX: &str = "fw";
/// The interface Fairway drives over AF_XDP, in the server namespace.
pub const SERVER_IF: &str = "fw0";
/// The TAP Fairway can drive instead, in the server namespace.
pub const TAP_IF: &str = "fwtap0";
/// Each client's interface.
pub const CLIENT_IF: &str = "eth0";
/// The bridge of the switch namespace.
pub const BRIDGE: &str = "br0";
/// The bridge in the server namespace that joins the TAP to the switch.
pub const TAP_BRIDGE: &str = "brtap";
/// The veth from [`TAP_BRIDGE`] to the switch (server side).
pub const TAP_UPLINK: &str = "tapup";
/// Switch ports: `fw0`'s peer and the TAP uplink's peer.
const SWITCH_SERVER_PORT: &str = "srv";
const SWITCH_TAP_PORT: &str = "tap";
/// The MTU of every interface unless [`TestbedConfig::mtu`] says otherwise.
pub const MTU: u32 = 1500;
/// Where the testbeds keep pidfiles and emulator logs, one directory per
/// prefix.
pub const STATE_ROOT: &str = "/run/fairway-testbed";
/// The environment variable naming the `fairway-linkem` binary.
pub const LINKEM_ENV: &str = "FAIRWAY_LINKEM";

/// How long a just-started emulator has to open its interfaces.
const EMULATOR_READY_TIMEOUT: Duration = Duration::from_secs(5);
/// How long processes get to exit after SIGTERM, then after SIGKILL.
const TERM_GRACE: Duration = Duration::from_secs(2);
const KILL_GRACE: Duration = Duration::from_secs(1);

/// The offloads every veth end has off (see the module docs).
const OFFLOADS: [&str; 4] = ["tx", "tso", "gso", "gro"];
/// Transmit checksum offload, which `fw0` and the switch's ports toward the
/// clients have on again.
const CHECKSUM_OFFLOAD: &str = "tx";
/// The segmentation offloads a kernel sender uses.
const SEND_OFFLOADS: [&str; 2] = ["tso", "gso"];

/// `ethtool -K dev FEATURE on|off...` in namespace `ns`.
fn set_offloads(ns: &str, dev: &str, features: &[&str], on: bool) -> Result<(), TestbedError> {
    let state = if on { "on" } else { "off" };
    let mut args = vec!["netns", "exec", ns, "ethtool", "-K", dev];
    for feature in features {
        args.extend([*feature, state]);
    }
    run(&format!("turning offloads {state} on {dev} in {ns}"), "ip", &args).map(drop)
}

/// The IPv6 subnet of a testbed with [`TestbedConfig::ipv6`]: fd77::/64,
/// unique-local (RFC 4193).
pub const IPV6_SUBNET: Ipv6Addr = Ipv6Addr::new(0xfd77, 0, 0, 0, 0, 0, 0, 0);
/// Its prefix length.
pub const IPV6_PREFIX_LEN: u8 = 64;

/// Host `n` of [`IPV6_SUBNET`].
fn ipv6_host(n: u32) -> Ipv6Addr {
    Ipv6Addr::from_bits(IPV6_SUBNET.to_bits() | u128::from(n))
}

/// The `fairway` flags that put the server on a testbed's server
/// interface ([`SERVER_IF`]) over AF_XDP as `prefix` (`10.77.0.1/24`).
/// Queues, shards and the rest are the caller's.
pub fn afxdp_flags(prefix: &str) -> Vec<String> {
    ["--backend", "afxdp", "--iface", SERVER_IF, "--ip", prefix].map(str::to_owned).to_vec()
}

/// The server namespace of testbed `prefix`.
pub fn server_ns(prefix: &str) -> String {
    format!("{prefix}-srv")
}

/// The switch namespace of testbed `prefix`.
pub fn switch_ns(prefix: &str) -> String {
    format!("{prefix}-sw")
}

/// The namespace of client `i` of testbed `prefix`.
pub fn client_ns(prefix: &str, i: usize) -> String {
    format!("{prefix}-c{i}")
}

/// Where testbed `prefix` keeps its pidfiles and emulator logs.
pub fn state_dir(prefix: &str) -> PathBuf {
    Path::new(STATE_ROOT).join(prefix)
}

/// The namespaces of `all` that belong to testbed `prefix`: server,
/// switch, then clients by number.
fn testbed_namespaces(prefix: &str, all: &[String]) -> Vec<String> {
    let is_client = |name: &str| {
        name.strip_prefix(prefix)
            .and_then(|rest| rest.strip_prefix("-c"))
            .is_some_and(|n| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()))
    };
    let mut clients: Vec<&String> = all.iter().filter(|name| is_client(name)).collect();
    clients.sort_by_key(|name| name[prefix.len() + 2..].parse::<u64>().unwrap_or(u64::MAX));
    let fixed = [server_ns(prefix), switch_ns(prefix)];
    fixed.into_iter().filter(|name| all.contains(name)).chain(clients.into_iter().cloned()).collect()
}

/// A MAC address `02:{tag}:` followed by the four bytes of `ip`.
fn mac_for(tag: u8, ip: Ipv4Addr) -> String {
    let [a, b, c, d] = ip.octets();
    format!("02:{tag:02x}:{a:02x}:{b:02x}:{c:02x}:{d:02x}")
}

/// A running testbed. Dropping it tears it down (see [`down`]), unless it
/// was [`leak`](Testbed::leak)ed.
#[derive(Debug)]
pub struct Testbed {
    config: TestbedConfig,
    /// Each emulator by the switch port whose link it is (`c{i}`, `srv`).
    emulators: Vec<(String, Child)>,
    leaked: bool,
    torn_down: bool,
}

impl Testbed {
    /// Builds the testbed `config` describes, after removing anything an
    /// earlier testbed with the same prefix left. On failure, removes what
    /// it built and returns the step that failed.
    pub fn up(config: TestbedConfig) -> Result<Testbed, TestbedError> {
        require_root()?;
        config.validate()?;
        let linkem = if config.is_emulated() { Some(resolve_linkem(&config)?) } else { None };
        down(&config.prefix)?;
        netns::ensure_bpffs();
        let mut testbed = Testbed { config, emulators: Vec::new(), leaked: false, torn_down: false };
        if let Err(e) = testbed.build(linkem.as_deref()) {
            testbed.torn_down = true;
            if let Err(cleanup) = testbed.teardown() {
                eprintln!("testbed: after a failed up, {cleanup}");
            }
            return Err(e);
        }
        Ok(testbed)
    }

    fn build(&mut self, linkem: Option<&Path>) -> Result<(), TestbedError> {
        let c = &self.config;
        let (srv, sw) = (server_ns(&c.prefix), switch_ns(&c.prefix));
        let dir = state_dir(&c.prefix);
        fs::create_dir_all(&dir).map_err(|e| TestbedError::io(format!("creating {}", dir.display()), e))?;

        let clients: Vec<String> = (0..c.clients).map(|i| client_ns(&c.prefix, i)).collect();
        for ns in [&srv, &sw].into_iter().chain(&clients) {
            ip(&format!("creating namespace {ns}"), &["netns", "add", ns])?;
            if c.ipv6 && clients.contains(ns) {
                // The clients speak IPv6 (their addresses come below).
                ip(&format!("bringing up lo in {ns}"), &["-n", ns, "link", "set", "dev", "lo", "up"])?;
                continue;
            }
            run(
                &format!("disabling IPv6 in {ns}"),
                "ip",
                &[
                    "netns",
                    "exec",
                    ns,
                    "sysctl",
                    "-q",
                    "-w",
                    "net.ipv6.conf.all.disable_ipv6=1",
                    "net.ipv6.conf.default.disable_ipv6=1",
                ],
            )?;
            ip(&format!("bringing up lo in {ns}"), &["-n", ns, "link", "set", "dev", "lo", "up"])?;
        }

        // The switch.
        ip("creating the bridge", &["-n", &sw, "link", "add", "name", BRIDGE, "type", "bridge"])?;
        let mut veths: Vec<(String, String)> = Vec::new();
        let mut bridged: Vec<(String, String, String)> = Vec::new();
        let mut toward_clients: Vec<(String, String)> = Vec::new();

        // The server: multi-queue fw0, its equally multi-queue peer a port.
        let queues = c.queues.to_string();
        let server_mac = self.server_mac();
        ip(
            "creating the server's veth fw0",
            &[
                "-n",
                &srv,
                "link",
                "add",
                "name",
                SERVER_IF,
                "address",
                &server_mac,
                "numtxqueues",
                &queues,
                "numrxqueues",
                &queues,
                "type",
                "veth",
                "peer",
                "name",
                SWITCH_SERVER_PORT,
                "numtxqueues",
                &queues,
                "numrxqueues",
                &queues,
                "netns",
                &sw,
            ],
        )?;
        veths.extend([(srv.clone(), SERVER_IF.to_owned()), (sw.clone(), SWITCH_SERVER_PORT.to_owned())]);
        if c.server_link.is_some() {
            // srv ═ linkem ═ srve ─ srvb, a port of the bridge.
            let (emulated, bridge_port) = emulated_ports(SWITCH_SERVER_PORT);
            ip(
                "creating the server's emulator veth",
                &["-n", &sw, "link", "add", "name", &emulated, "type", "veth", "peer", "name", &bridge_port],
            )?;
            veths.extend([(sw.clone(), emulated), (sw.clone(), bridge_port.clone())]);
            bridged.push((sw.clone(), bridge_port, BRIDGE.to_owned()));
        } else {
            bridged.push((sw.clone(), SWITCH_SERVER_PORT.to_owned(), BRIDGE.to_owned()));
        }

        // The TAP, bridged to a veth whose peer is a switch port.
        let mut tuntap = vec!["-n", &srv, "tuntap", "add", "dev", TAP_IF, "mode", "tap"];
        if c.tap_multi_queue {
            tuntap.push("multi_queue");
        }
        ip("creating the TAP fwtap0", &tuntap)?;
        let tap_mac = mac_for(1, self.server_ip());
        ip("setting fwtap0's address", &["-n", &srv, "link", "set", "dev", TAP_IF, "address", &tap_mac])?;
        ip("creating the TAP's bridge", &["-n", &srv, "link", "add", "name", TAP_BRIDGE, "type", "bridge"])?;
        ip(
            "creating the TAP's uplink veth",
            &[
                "-n",
                &srv,
                "link",
                "add",
                "name",
                TAP_UPLINK,
                "type",
                "veth",
                "peer",
                "name",
                SWITCH_TAP_PORT,
                "netns",
                &sw,
            ],
        )?;
        veths.extend([(srv.clone(), TAP_UPLINK.to_owned()), (sw.clone(), SWITCH_TAP_PORT.to_owned())]);
        bridged.extend([
            (srv.clone(), TAP_IF.to_owned(), TAP_BRIDGE.to_owned()),
            (srv.clone(), TAP_UPLINK.to_owned(), TAP_BRIDGE.to_owned()),
            (sw.clone(), SWITCH_TAP_PORT.to_owned(), BRIDGE.to_owned()),
        ]);

        // The clients.
        let prefix_len = c.subnet.prefix_len();
        for (i, ns) in clients.iter().enumerate() {
            let port = format!("c{i}");
            let mac = self.client_mac(i);
            ip(
                &format!("creating client {i}'s veth"),
                &[
                    "-n", ns, "link", "add", "name", CLIENT_IF, "address", &mac, "type", "veth", "peer", "name", &port,
                    "netns", &sw,
                ],
            )?;
            let addr = format!("{}/{prefix_len}", self.client_ip(i));
            ip(&format!("addressing client {i}"), &["-n", ns, "addr", "add", &addr, "dev", CLIENT_IF])?;
            if c.ipv6 {
                // No duplicate detection: the testbed hands the addresses out.
                let addr = format!("{}/{IPV6_PREFIX_LEN}", self.client_ip6(i));
                ip(
                    &format!("addressing client {i} (IPv6)"),
                    &["-n", ns, "addr", "add", &addr, "dev", CLIENT_IF, "nodad"],
                )?;
            }
            veths.extend([(ns.clone(), CLIENT_IF.to_owned()), (sw.clone(), port.clone())]);
            if c.link_of(i).is_some() {
                let (emulated, bridge_port) = emulated_ports(&port);
                ip(
                    &format!("creating client {i}'s emulator veth"),
                    &["-n", &sw, "link", "add", "name", &emulated, "type", "veth", "peer", "name", &bridge_port],
                )?;
                veths.extend([(sw.clone(), emulated), (sw.clone(), bridge_port.clone())]);
                toward_clients.push((sw.clone(), bridge_port.clone()));
                bridged.push((sw.clone(), bridge_port, BRIDGE.to_owned()));
            } else {
                toward_clients.push((sw.clone(), port.clone()));
                bridged.push((sw.clone(), port, BRIDGE.to_owned()));
            }
        }

        for (ns, dev, master) in &bridged {
            ip(
                &format!("making {dev} a port of {master} in {ns}"),
                &["-n", ns, "link", "set", "dev", dev, "master", master],
            )?;
        }
        for (ns, dev) in &veths {
            set_offloads(ns, dev, &OFFLOADS, false)?;
        }
        // A server's NIC and a switch finish checksums (see the module docs).
        for (ns, dev) in [(srv.clone(), SERVER_IF.to_owned())].iter().chain(&toward_clients) {
            set_offloads(ns, dev, &[CHECKSUM_OFFLOAD], true)?;
        }
        let mtu = c.mtu.to_string();
        let bridges = [(sw.clone(), BRIDGE.to_owned()), (srv.clone(), TAP_BRIDGE.to_owned())];
        let tap = (srv.clone(), TAP_IF.to_owned());
        for (ns, dev) in bridges.iter().chain(&veths).chain([&tap]) {
            ip(&format!("bringing up {dev} in {ns}"), &["-n", ns, "link", "set", "dev", dev, "mtu", &mtu, "up"])?;
        }

        if let Some(rx) = &c.rx_cpus {
            // Every receive queue of every interface but lo (sysfs as `ip
            // netns exec` mounts it for the namespace).
            let steer = |ns: &String, cpus: &[usize]| -> Result<(), TestbedError> {
                let Some(mask) = config::rps_mask(cpus) else { return Ok(()) };
                let script = format!(
                    "for q in /sys/class/net/*/queues/rx-*/rps_cpus; do \
                     case $q in /sys/class/net/lo/*) continue;; esac; echo {mask} > $q || exit 1; done"
                );
                run(
                    &format!("steering receive processing in {ns} to CPUs {mask}"),
                    "ip",
                    &["netns", "exec", ns, "sh", "-c", &script],
                )
                .map(drop)
            };
            steer(&srv, &rx.server)?;
            for ns in [&sw].into_iter().chain(&clients) {
                steer(ns, &rx.clients)?;
            }
        }

        if let Some(linkem) = linkem {
            self.start_emulators(linkem)?;
        }
        Ok(())
    }

    /// Starts `fairway-linkem` for every emulated link (the server's, then
    /// each client's), in the switch namespace, in a process group of its
    /// own (so a terminal's Ctrl-C does not reach it), recording its pid and
    /// command line.
    fn start_emulators(&mut self, linkem: &Path) -> Result<(), TestbedError> {
        let prefix = self.config.prefix.clone();
        let sw = switch_ns(&prefix);
        let dir = state_dir(&prefix);
        let server = self.config.server_link.clone().map(|params| (SWITCH_SERVER_PORT.to_owned(), params));
        let clients = (0..self.config.clients).filter_map(|i| Some((format!("c{i}"), self.config.link_of(i)?.clone())));
        let links: Vec<(String, LinkParams)> = server.into_iter().chain(clients).collect();
        for (port, params) in links {
            let (emulated, _) = emulated_ports(&port);
            let mut argv: Vec<String> =
                vec![linkem.display().to_string(), "--a".to_owned(), port.clone(), "--b".to_owned(), emulated];
            argv.extend(params.to_args());
            // Empty: the link as configured, until `reconfigure_link`.
            let control = control_path(&dir, &port);
            fs::write(&control, "").map_err(|e| TestbedError::io(format!("creating {}", control.display()), e))?;
            argv.extend(["--control".to_owned(), control.display().to_string()]);
            let log_path = dir.join(format!("linkem-{port}.log"));
            let log =
                File::create(&log_path).map_err(|e| TestbedError::io(format!("creating {}", log_path.display()), e))?;
            let log2 = log.try_clone().map_err(|e| TestbedError::io(format!("opening {}", log_path.display()), e))?;
            let mut command = Command::new("ip");
            command.args(["netns", "exec", &sw]).args(&argv);
            command.stdin(Stdio::null()).stdout(log).stderr(log2).process_group(0);
            let line = display_command(&command);
            let child = command.spawn().map_err(|error| TestbedError::Spawn {
                what: format!("starting the link emulator of port {port}"),
                command: line,
                error,
            })?;
            let record = EmulatorRecord { port: port.clone(), pid: child.id(), args: argv };
            self.emulators.push((port, child));
            record.save(&dir)?;
        }
        self.wait_for_emulators(&sw, &dir)
    }

    /// Waits until every emulator has a packet socket bound to each of its
    /// two interfaces (as the switch namespace's `/proc/net/packet` lists
    /// them), so that no frame sent right after `up` is lost. An emulator
    /// that exits meanwhile (it could not open its interfaces, a bad
    /// option) fails `up` with its log.
    fn wait_for_emulators(&mut self, sw: &str, dir: &Path) -> Result<(), TestbedError> {
        let links = run(&format!("listing the interfaces of {sw}"), "ip", &["-n", sw, "-o", "link", "show"])?;
        let index_of: Vec<(String, u32)> =
            status::parse_links(&links.stdout_text()).into_iter().map(|l| (l.name, l.index)).collect();
        let index = |name: &str| index_of.iter().find(|(n, _)| n == name).map(|(_, i)| *i);
        let wanted: Vec<(String, [Option<u32>; 2])> = self
            .emulators
            .iter()
            .map(|(port, _)| (port.clone(), [index(port), index(&emulated_ports(port).0)]))
            .collect();
        let deadline = Instant::now() + EMULATOR_READY_TIMEOUT;
        loop {
            for (port, child) in &mut self.emulators {
                if let Ok(Some(status)) = child.try_wait() {
                    let log = dir.join(format!("linkem-{port}.log"));
                    let output = error::one_line(&fs::read_to_string(&log).unwrap_or_default());
                    let output = if output.is_empty() { "(it printed nothing)".to_owned() } else { output };
                    return Err(TestbedError::EmulatorExited {
                        port: port.clone(),
                        status: describe(status),
                        log,
                        output,
                    });
                }
            }
            let bound = in_netns(sw, || fs::read_to_string("/proc/thread-self/net/packet"))?
                .map_err(|e| TestbedError::io(format!("reading /proc/net/packet in {sw}"), e))?;
            let bound = packet_socket_interfaces(&bound);
            let waiting: Vec<&str> = wanted
                .iter()
                .filter(|(_, ifs)| !ifs.iter().all(|i| i.is_some_and(|i| bound.contains(&i))))
                .map(|(port, _)| port.as_str())
                .collect();
            if waiting.is_empty() {
                return Ok(());
            }
            if Instant::now() >= deadline {
                let port = waiting[0];
                let log = dir.join(format!("linkem-{port}.log"));
                return Err(TestbedError::NotReady {
                    command: format!("fairway-linkem --a {port} --b {}", emulated_ports(port).0),
                    why: format!("did not within {EMULATOR_READY_TIMEOUT:?}"),
                    expected: "packet sockets on both interfaces (/proc/net/packet)".to_owned(),
                    stderr: error::one_line(&fs::read_to_string(&log).unwrap_or_default()),
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Leaves the testbed up after this value (and the process) is gone:
    /// for `cargo xtask testbed up`. Remove it later with [`down`].
    pub fn leak(mut self) {
        self.leaked = true;
    }

    /// Tears the testbed down now, reporting what was removed; dropping
    /// does the same but can only print errors.
    pub fn down(mut self) -> Result<DownReport, TestbedError> {
        self.torn_down = true;
        self.teardown()
    }

    fn teardown(&mut self) -> Result<DownReport, TestbedError> {
        let report = down(&self.config.prefix);
        // `down` killed them (a dead child of ours counts as gone); reap.
        for (_, child) in &mut self.emulators {
            let _ = child.kill();
            let _ = child.wait();
        }
        self.emulators.clear();
        report
    }

    /// What it was built from.
    pub fn config(&self) -> &TestbedConfig {
        &self.config
    }

    /// Its prefix.
    pub fn prefix(&self) -> &str {
        &self.config.prefix
    }

    /// The server namespace, `{prefix}-srv`: [`SERVER_IF`] and [`TAP_IF`].
    pub fn server_ns(&self) -> String {
        server_ns(&self.config.prefix)
    }

    /// The switch namespace, `{prefix}-sw`: the bridge and the emulators.
    pub fn switch_ns(&self) -> String {
        switch_ns(&self.config.prefix)
    }

    /// The namespace of client `i`, `{prefix}-c{i}`.
    pub fn client_ns(&self, i: usize) -> String {
        client_ns(&self.config.prefix, i)
    }

    /// Every client namespace, in order.
    pub fn client_namespaces(&self) -> Vec<String> {
        (0..self.config.clients).map(|i| self.client_ns(i)).collect()
    }

    /// How many clients.
    pub fn clients(&self) -> usize {
        self.config.clients
    }

    /// Fairway's address: host 1 of the subnet (10.77.0.1).
    pub fn server_ip(&self) -> Ipv4Addr {
        self.config.subnet.host(SERVER_HOST).expect("a validated subnet has host 1")
    }

    /// Fairway's IPv6 address on a testbed with [`TestbedConfig::ipv6`]:
    /// fd77::1 (in [`IPV6_PREFIX_LEN`]).
    pub fn server_ip6(&self) -> Ipv6Addr {
        ipv6_host(SERVER_HOST)
    }

    /// Client `i`'s IPv6 address with [`TestbedConfig::ipv6`]:
    /// host `10 + i` of fd77::/64 (fd77::a for client 0).
    pub fn client_ip6(&self, i: usize) -> Ipv6Addr {
        assert!(i < self.config.clients, "client {i} of {}", self.config.clients);
        ipv6_host(CLIENT_HOST_BASE + i as u32)
    }

    /// Client `i`'s address: host 10 + `i` (10.77.0.10, ...).
    pub fn client_ip(&self, i: usize) -> Ipv4Addr {
        assert!(i < self.config.clients, "client {i} of {}", self.config.clients);
        self.config.subnet.host(CLIENT_HOST_BASE + i as u32).expect("validated: every client fits the subnet")
    }

    /// The subnet's prefix length (24).
    pub fn prefix_len(&self) -> u8 {
        self.config.subnet.prefix_len()
    }

    /// Fairway's address with the subnet's prefix length (`10.77.0.1/24`),
    /// as `--ip` and `ip addr` take it.
    pub fn server_prefix(&self) -> String {
        format!("{}/{}", self.server_ip(), self.prefix_len())
    }

    /// Fairway's IPv6 address with its prefix length (`fd77::1/64`).
    pub fn server_prefix6(&self) -> String {
        format!("{}/{IPV6_PREFIX_LEN}", self.server_ip6())
    }

    /// The `fairway` flags that serve on this testbed ([`afxdp_flags`]),
    /// with its IPv6 address too when the testbed has IPv6.
    pub fn afxdp_flags(&self) -> Vec<String> {
        let mut flags = afxdp_flags(&self.server_prefix());
        if self.config.ipv6 {
            flags.extend(["--ip".to_owned(), self.server_prefix6()]);
        }
        flags
    }

    /// Turns TSO and GSO on `fw0` on (a kernel server then sends segments
    /// of up to 64 KB, as deployed on a veth) or off again, as
    /// [`Testbed::up`] leaves them (transmit checksum offload stays on).
    ///
    /// # Errors
    ///
    /// When `ethtool` fails.
    pub fn server_send_offloads(&self, on: bool) -> Result<(), TestbedError> {
        set_offloads(&self.server_ns(), SERVER_IF, &SEND_OFFLOADS, on)
    }

    /// `fw0`'s MAC address, the one Fairway uses over AF_XDP.
    pub fn server_mac(&self) -> String {
        mac_for(0, self.server_ip())
    }

    /// A MAC address for Fairway over TAP: not `fwtap0`'s own, which the
    /// bridge in the server namespace keeps for itself.
    pub fn tap_stack_mac(&self) -> String {
        mac_for(2, self.server_ip())
    }

    /// Client `i`'s MAC address.
    pub fn client_mac(&self, i: usize) -> String {
        mac_for(0, self.client_ip(i))
    }

    /// The link emulators it started: switch port (`c{i}` for client `i`,
    /// `srv` for the server) and process id.
    pub fn emulators(&self) -> Vec<(String, u32)> {
        self.emulators.iter().map(|(port, child)| (port.clone(), child.id())).collect()
    }

    /// Reconfigures the running emulator of `port` (`c{i}` for client `i`,
    /// `srv` for the server's link): `options`, fairway-linkem link options
    /// such as `--loss 10%`, apply on top of the ones it was started with,
    /// and `""` restores those (the emulator's `--control` file and SIGHUP).
    /// Returns once the emulator has said it took them.
    pub fn reconfigure_link(&self, port: &str, options: &str) -> Result<(), TestbedError> {
        let Some((_, child)) = self.emulators.iter().find(|(p, _)| p == port) else {
            return Err(TestbedError::Config(format!("no emulator on port {port}")));
        };
        let dir = state_dir(&self.config.prefix);
        let log = dir.join(format!("linkem-{port}.log"));
        let taken = |text: &str| text.matches("fairway-linkem: reconfigured").count();
        let before = taken(&fs::read_to_string(&log).unwrap_or_default());
        let control = control_path(&dir, port);
        fs::write(&control, options).map_err(|e| TestbedError::io(format!("writing {}", control.display()), e))?;
        run(&format!("signalling the emulator of {port}"), "kill", &["-HUP", &child.id().to_string()])?;
        let deadline = Instant::now() + EMULATOR_READY_TIMEOUT;
        loop {
            let text = fs::read_to_string(&log).unwrap_or_default();
            if taken(&text) > before {
                return Ok(());
            }
            if Instant::now() >= deadline {
                return Err(TestbedError::NotReady {
                    command: format!("kill -HUP {} (fairway-linkem of {port})", child.id()),
                    why: format!("did not within {EMULATOR_READY_TIMEOUT:?}"),
                    expected: "`fairway-linkem: reconfigured` in its log".to_owned(),
                    stderr: error::one_line(text.lines().last().unwrap_or_default()),
                });
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// Takes the emulated link of `port` down or brings it back up (its
    /// emulator's interface towards the switch, `{port}e`): while down,
    /// nothing crosses either way; the emulator waits, and forwards again
    /// once it is up.
    pub fn set_link_up(&self, port: &str, up: bool) -> Result<(), TestbedError> {
        if !self.emulators.iter().any(|(p, _)| p == port) {
            return Err(TestbedError::Config(format!("no emulator on port {port}")));
        }
        let (emulated, _) = emulated_ports(port);
        let state = if up { "up" } else { "down" };
        ip(&format!("setting {emulated} {state}"), &["-n", &self.switch_ns(), "link", "set", "dev", &emulated, state])
    }

    /// What exists of it now.
    pub fn status(&self) -> Result<Status, TestbedError> {
        status(&self.config.prefix)
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        if self.leaked || self.torn_down {
            return;
        }
        if let Err(e) = self.teardown() {
            eprintln!("testbed: {e}");
        }
    }
}

fn ip(what: &str, args: &[&str]) -> Result<(), TestbedError> {
    run(what, "ip", args).map(drop)
}

/// What [`down`] removed.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DownReport {
    /// The prefix.
    pub prefix: String,
    /// The namespaces deleted.
    pub namespaces: Vec<String>,
    /// The processes ended: pid and command line.
    pub killed: Vec<(u32, String)>,
    /// The XDP program detached from `fw0`, if one was attached.
    pub xdp_detached: Option<XdpStatus>,
    /// libxdp dispatcher pins removed from bpffs.
    pub unpinned: Vec<PathBuf>,
}

impl DownReport {
    /// Whether there was nothing to remove.
    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty() && self.killed.is_empty() && self.xdp_detached.is_none()
    }
}

impl fmt::Display for DownReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return writeln!(f, "testbed `{}`: nothing to remove", self.prefix);
        }
        for (pid, command) in &self.killed {
            writeln!(f, "ended pid {pid}: {command}")?;
        }
        if let Some(x) = &self.xdp_detached {
            writeln!(f, "detached XDP program {} ({}) from {SERVER_IF}", x.prog_id, x.prog_name)?;
        }
        for pin in &self.unpinned {
            writeln!(f, "removed libxdp pin {}", pin.display())?;
        }
        writeln!(f, "deleted namespaces: {}", self.namespaces.join(" "))
    }
}

/// Removes testbed `prefix`: ends the link emulators its state directory
/// records and every other process inside its namespaces (but never this
/// process), detaches any XDP program from `fw0`, deletes the namespaces
/// (and with them every interface) and the state directory. Safe to call
/// when nothing exists; every step is tried even if one fails, and the
/// failures are returned together.
pub fn down(prefix: &str) -> Result<DownReport, TestbedError> {
    require_root()?;
    validate_prefix(prefix)?;
    let mut report = DownReport { prefix: prefix.to_owned(), ..DownReport::default() };
    let mut errors = Vec::new();

    let mut victims: Vec<(u32, String)> = Vec::new();
    match recorded_emulators(prefix) {
        Ok(emulators) => {
            victims.extend(emulators.iter().filter(|e| e.is_running()).map(|e| (e.pid, e.args.join(" "))));
        }
        Err(e) => errors.push(e),
    }
    let namespaces = testbed_namespaces(prefix, &list_namespaces()?);
    for ns in &namespaces {
        match run(&format!("listing the processes in {ns}"), "ip", &["netns", "pids", ns]) {
            Ok(out) => {
                for pid in out.stdout_text().split_whitespace().filter_map(|p| p.parse::<u32>().ok()) {
                    if pid != std::process::id() && !victims.iter().any(|(v, _)| *v == pid) {
                        victims.push((pid, cmdline(pid).join(" ")));
                    }
                }
            }
            Err(e) => errors.push(e),
        }
    }
    terminate(&victims.iter().map(|(pid, _)| *pid).collect::<Vec<_>>());
    report.killed = victims;

    let srv = server_ns(prefix);
    if namespaces.contains(&srv) {
        match detach_xdp(&srv) {
            Ok((detached, unpinned)) => {
                report.xdp_detached = detached;
                report.unpinned = unpinned;
            }
            Err(e) => errors.push(e),
        }
    }
    for ns in &namespaces {
        match run(&format!("deleting namespace {ns}"), "ip", &["netns", "del", ns]) {
            Ok(_) => report.namespaces.push(ns.clone()),
            Err(e) => errors.push(e),
        }
    }
    let dir = state_dir(prefix);
    match fs::remove_dir_all(&dir) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            errors.push(TestbedError::io(format!("removing {}", dir.display()), e));
        }
        _ => {}
    }
    let left = testbed_namespaces(prefix, &list_namespaces()?);
    if !left.is_empty() && errors.is_empty() {
        errors.push(TestbedError::Config(format!("namespaces still listed after deleting them: {}", left.join(" "))));
    }
    if errors.is_empty() { Ok(report) } else { Err(TestbedError::Teardown { prefix: prefix.to_owned(), errors }) }
}

/// Detaches the XDP program from `fw0` in `srv`, and removes libxdp's pins
/// of it (`/sys/fs/bpf/xdp/dispatch-IFINDEX-PROGID`) so no program outlives
/// the testbed in bpffs.
fn detach_xdp(srv: &str) -> Result<(Option<XdpStatus>, Vec<PathBuf>), TestbedError> {
    let out = Command::new("ip").args(["-n", srv, "-o", "-d", "link", "show", "dev", SERVER_IF]).output();
    let Ok(out) = out else { return Ok((None, Vec::new())) };
    let text = String::from_utf8_lossy(&out.stdout);
    let Some(link) = status::parse_links(&text).into_iter().next() else { return Ok((None, Vec::new())) };
    let Some(xdp) = link.xdp else { return Ok((None, Vec::new())) };
    // `ip` names the mode it found; several programs show as another word.
    let modes: Vec<&str> = match xdp.mode.as_str() {
        mode @ ("xdp" | "xdpgeneric" | "xdpdrv" | "xdpoffload") => vec![mode],
        _ => vec!["xdpgeneric", "xdpdrv", "xdpoffload"],
    };
    for mode in &modes {
        let result =
            ip(&format!("detaching XDP from {SERVER_IF}"), &["-n", srv, "link", "set", "dev", SERVER_IF, mode, "off"]);
        if modes.len() == 1 {
            result?;
        }
    }
    let mut unpinned = Vec::new();
    let pin = Path::new(netns::BPFFS_PATH).join("xdp").join(format!("dispatch-{}-{}", link.index, xdp.prog_id));
    if pin.is_dir() {
        fs::remove_dir_all(&pin).map_err(|e| TestbedError::io(format!("removing {}", pin.display()), e))?;
        unpinned.push(pin);
    }
    Ok((Some(xdp), unpinned))
}

/// SIGTERM to every pid, up to [`TERM_GRACE`] for them to go, then SIGKILL
/// to the rest and up to [`KILL_GRACE`] more.
fn terminate(pids: &[u32]) {
    if pids.is_empty() {
        return;
    }
    for (signal, grace) in [("-TERM", TERM_GRACE), ("-KILL", KILL_GRACE)] {
        let alive: Vec<String> = pids.iter().filter(|&&p| is_alive(p)).map(u32::to_string).collect();
        if alive.is_empty() {
            return;
        }
        // Some may be gone by now: kill's complaint about them is expected.
        let _ = Command::new("kill").arg(signal).args(&alive).stderr(Stdio::null()).status();
        let deadline = Instant::now() + grace;
        while pids.iter().any(|&p| is_alive(p)) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Whether `pid` exists and is not a zombie (a zombie is dead; only its
/// parent's `wait` is missing).
fn is_alive(pid: u32) -> bool {
    match fs::read_to_string(format!("/proc/{pid}/stat")) {
        // "pid (comm) S ...": the state follows the last ')'.
        Ok(stat) => stat.rsplit_once(')').and_then(|(_, rest)| rest.split_whitespace().next()) != Some("Z"),
        Err(_) => false,
    }
}

/// The interface indexes packet sockets are bound to, from
/// `/proc/net/packet` ("sk RefCnt Type Proto Iface R Rmem User Inode").
fn packet_socket_interfaces(table: &str) -> Vec<u32> {
    table.lines().skip(1).filter_map(|line| line.split_whitespace().nth(4)?.parse().ok()).collect()
}

/// The command line of `pid` (empty if gone).
fn cmdline(pid: u32) -> Vec<String> {
    fs::read(format!("/proc/{pid}/cmdline"))
        .map(|raw| {
            raw.split(|&b| b == 0).filter(|a| !a.is_empty()).map(|a| String::from_utf8_lossy(a).into_owned()).collect()
        })
        .unwrap_or_default()
}

/// For the switch port `port` behind an emulator: the veth end the
/// emulator's other side opens (`{port}e`) and its peer, the bridge port
/// (`{port}b`).
fn emulated_ports(port: &str) -> (String, String) {
    (format!("{port}e"), format!("{port}b"))
}

/// The control file of the emulator of `port` (see
/// [`Testbed::reconfigure_link`]).
fn control_path(dir: &Path, port: &str) -> PathBuf {
    dir.join(format!("linkem-{port}.control"))
}

/// A link emulator as its pidfile records it: `linkem-{port}.pid` (`port`
/// is `c{i}` for client `i`, `srv` for the server) holds the pid, then the
/// program and its arguments, one a line.
#[derive(Debug, Clone, PartialEq, Eq)]
struct EmulatorRecord {
    port: String,
    pid: u32,
    args: Vec<String>,
}

impl EmulatorRecord {
    fn save(&self, dir: &Path) -> Result<(), TestbedError> {
        let path = dir.join(format!("linkem-{}.pid", self.port));
        let mut text = format!("{}\n", self.pid);
        for arg in &self.args {
            text.push_str(arg);
            text.push('\n');
        }
        File::create(&path)
            .and_then(|mut f| f.write_all(text.as_bytes()))
            .map_err(|e| TestbedError::io(format!("writing {}", path.display()), e))
    }

    fn parse(port: &str, text: &str) -> Option<EmulatorRecord> {
        let mut lines = text.lines();
        let pid = lines.next()?.trim().parse().ok()?;
        Some(EmulatorRecord { port: port.to_owned(), pid, args: lines.map(str::to_owned).collect() })
    }

    /// Whether the pid still runs this emulator (not another process that
    /// got the pid since): its command line ends with the recorded one
    /// (before `ip netns exec` execs, it is `ip netns exec NS` + that).
    fn is_running(&self) -> bool {
        let actual = cmdline(self.pid);
        is_alive(self.pid) && !self.args.is_empty() && actual.ends_with(&self.args)
    }
}

/// The emulators recorded in testbed `prefix`'s state directory.
fn recorded_emulators(prefix: &str) -> Result<Vec<EmulatorRecord>, TestbedError> {
    let dir = state_dir(prefix);
    let entries = match fs::read_dir(&dir) {
        Ok(entries) => entries,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(Vec::new()),
        Err(e) => return Err(TestbedError::io(format!("reading {}", dir.display()), e)),
    };
    let mut records = Vec::new();
    for entry in entries.filter_map(Result::ok) {
        let name = entry.file_name().to_string_lossy().into_owned();
        let Some(port) = name.strip_prefix("linkem-").and_then(|n| n.strip_suffix(".pid")) else { continue };
        if let Some(record) = fs::read_to_string(entry.path()).ok().and_then(|t| EmulatorRecord::parse(port, &t)) {
            records.push(record);
        }
    }
    // The server's first, then the clients' by number.
    records.sort_by_key(|r| (r.port != SWITCH_SERVER_PORT, r.port.trim_start_matches('c').parse::<u64>().ok()));
    Ok(records)
}

/// Where `fairway-linkem` is: `$FAIRWAY_LINKEM` if set, else the first
/// that exists of: beside the running executable (a cargo target profile
/// directory, or its `deps/`' parent), `$CARGO_TARGET_DIR/release`, the
/// workspace's `target/release`.
pub fn find_linkem() -> Option<PathBuf> {
    if let Some(path) = std::env::var_os(LINKEM_ENV).filter(|p| !p.is_empty()) {
        return Some(PathBuf::from(path));
    }
    linkem_candidates().into_iter().find(|p| p.is_file())
}

fn linkem_candidates() -> Vec<PathBuf> {
    const NAME: &str = "fairway-linkem";
    let mut candidates = Vec::new();
    if let Some(dir) = std::env::current_exe().ok().and_then(|exe| exe.parent().map(Path::to_path_buf)) {
        candidates.push(dir.join(NAME));
        if dir.ends_with("deps")
            && let Some(profile) = dir.parent()
        {
            candidates.push(profile.join(NAME));
        }
    }
    if let Some(target) = std::env::var_os("CARGO_TARGET_DIR").filter(|p| !p.is_empty()) {
        candidates.push(Path::new(&target).join("release").join(NAME));
    }
    // This crate's manifest directory is `tests/` in the workspace.
    if let Some(workspace) = Path::new(env!("CARGO_MANIFEST_DIR")).parent() {
        candidates.push(workspace.join("target").join("release").join(NAME));
    }
    candidates
}

fn resolve_linkem(config: &TestbedConfig) -> Result<PathBuf, TestbedError> {
    let path = config.linkem.clone().or_else(find_linkem);
    match path {
        Some(path) if path.is_file() => Ok(path),
        Some(path) => Err(TestbedError::LinkemNotFound { looked: vec![path] }),
        None => Err(TestbedError::LinkemNotFound { looked: linkem_candidates() }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn namespaces_of_a_prefix() {
        let all = names(&["fw-c10", "fw-c2", "fw-sw", "fwx-srv", "fw-srv", "fw-c", "fw-cx", "fw-c1-srv", "other"]);
        assert_eq!(testbed_namespaces("fw", &all), names(&["fw-srv", "fw-sw", "fw-c2", "fw-c10"]));
        assert!(testbed_namespaces("f", &all).is_empty());
    }

    #[test]
    fn bound_packet_sockets() {
        let table = "sk               RefCnt Type Proto  Iface R Rmem   User   Inode\n\
                     00000000468075d7 3      3    0003   8     1 0      0      218314\n\
                     0000000083bd501e 3      3    0003   10    1 0      0      218315\n";
        assert_eq!(packet_socket_interfaces(table), [8, 10]);
        assert!(packet_socket_interfaces("").is_empty());
    }

    #[test]
    fn macs_carry_the_address() {
        assert_eq!(mac_for(0, Ipv4Addr::new(10, 77, 0, 1)), "02:00:0a:4d:00:01");
        assert_eq!(mac_for(2, Ipv4Addr::new(10, 77, 0, 10)), "02:02:0a:4d:00:0a");
    }

    #[test]
    fn emulator_records() {
        let r = EmulatorRecord::parse("c1", "1234\n/x/fairway-linkem\n--a\nc1\n").unwrap();
        assert_eq!(
            r,
            EmulatorRecord { port: "c1".to_owned(), pid: 1234, args: names(&["/x/fairway-linkem", "--a", "c1"]) }
        );
        assert!(EmulatorRecord::parse("c0", "").is_none());
        assert!(EmulatorRecord::parse("srv", "x\n").is_none());
        // This process is alive but is not that emulator.
        let me = EmulatorRecord { port: "c0".to_owned(), pid: std::process::id(), args: names(&["/x/fairway-linkem"]) };
        assert!(is_alive(me.pid));
        assert!(!me.is_running());
    }
}
