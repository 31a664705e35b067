//! [`status`]: what exists of a testbed, read back from the system (not
//! from what `up` meant to build): its namespaces, their interfaces with
//! queue counts, XDP programs, bridge ports and IPv4 addresses, and the
//! link emulators it started.

use std::fmt;

use super::TestbedError;
use super::config::validate_prefix;
use super::netns::{list_namespaces, require_root};
use super::process::run;

/// Everything that exists of the testbed with a given prefix.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Status {
    /// The prefix asked about.
    pub prefix: String,
    /// Its namespaces: server, switch, then clients in order.
    pub namespaces: Vec<NamespaceStatus>,
    /// The link emulators its state directory records.
    pub emulators: Vec<EmulatorStatus>,
}

/// One namespace and its interfaces.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct NamespaceStatus {
    /// Its name, e.g. `fw-srv`.
    pub name: String,
    /// Its interfaces, `lo` included, in index order.
    pub interfaces: Vec<InterfaceStatus>,
}

/// One interface as `ip -d link` and `ip -4 addr` describe it.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct InterfaceStatus {
    /// The interface index (within its namespace).
    pub index: u32,
    /// The name, without the `@peer` suffix.
    pub name: String,
    /// `veth`, `bridge`, `tun`, `loopback`, ... (empty when `ip` does not
    /// say).
    pub kind: String,
    /// The flags between `<` and `>`: `UP`, `LOWER_UP`, `NO-CARRIER`, ...
    pub flags: Vec<String>,
    /// The operational state: `UP`, `DOWN`, `UNKNOWN`, ...
    pub state: String,
    /// The MTU.
    pub mtu: u32,
    /// The MAC address.
    pub mac: String,
    /// The bridge it is a port of.
    pub master: Option<String>,
    /// As a bridge port: its STP state (`forwarding`, `disabled`, ...).
    pub port_state: Option<String>,
    /// The namespace of a veth's peer, when elsewhere.
    pub link_netns: Option<String>,
    /// Receive queues.
    pub rx_queues: u32,
    /// Transmit queues.
    pub tx_queues: u32,
    /// The XDP program attached, if any.
    pub xdp: Option<XdpStatus>,
    /// IPv4 addresses with prefix length, e.g. `10.77.0.10/24`.
    pub ipv4: Vec<String>,
}

/// An XDP program attached to an interface.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct XdpStatus {
    /// `xdp` (native), `xdpgeneric`, `xdpoffload`, ... as `ip` names it.
    pub mode: String,
    /// The program's id (`bpftool prog show id N`).
    pub prog_id: u32,
    /// The program's name, e.g. `xdp_dispatcher`.
    pub prog_name: String,
}

/// A link emulator the testbed started.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct EmulatorStatus {
    /// The switch port whose link it emulates: `c{i}` for client `i`,
    /// `srv` for the server.
    pub port: String,
    /// Its process id.
    pub pid: u32,
    /// Whether that process is still the emulator and running.
    pub running: bool,
    /// Its command line.
    pub args: Vec<String>,
}

impl Status {
    /// Whether nothing of the testbed exists.
    pub fn is_empty(&self) -> bool {
        self.namespaces.is_empty() && self.emulators.is_empty()
    }

    /// The namespace named `name`.
    pub fn namespace(&self, name: &str) -> Option<&NamespaceStatus> {
        self.namespaces.iter().find(|ns| ns.name == name)
    }

    /// Interface `interface` of namespace `ns`.
    pub fn interface(&self, ns: &str, interface: &str) -> Option<&InterfaceStatus> {
        self.namespace(ns)?.interface(interface)
    }
}

impl NamespaceStatus {
    /// The interface named `name`.
    pub fn interface(&self, name: &str) -> Option<&InterfaceStatus> {
        self.interfaces.iter().find(|i| i.name == name)
    }

    /// The names of the ports of bridge `bridge`.
    pub fn bridge_ports(&self, bridge: &str) -> Vec<&str> {
        self.interfaces.iter().filter(|i| i.master.as_deref() == Some(bridge)).map(|i| i.name.as_str()).collect()
    }
}

impl InterfaceStatus {
    /// Whether it is administratively up (`UP` among the flags).
    pub fn is_up(&self) -> bool {
        self.flags.iter().any(|f| f == "UP")
    }
}

/// Reads what exists of the testbed `prefix`. Needs root (it looks inside
/// the namespaces).
pub fn status(prefix: &str) -> Result<Status, TestbedError> {
    require_root()?;
    validate_prefix(prefix)?;
    let mut status = Status { prefix: prefix.to_owned(), ..Status::default() };
    for ns in super::testbed_namespaces(prefix, &list_namespaces()?) {
        let links = run(&format!("listing the interfaces of {ns}"), "ip", &["-n", &ns, "-o", "-d", "link", "show"])?;
        let mut interfaces = parse_links(&links.stdout_text());
        let addrs = run(&format!("listing the addresses of {ns}"), "ip", &["-n", &ns, "-o", "-4", "addr", "show"])?;
        for (name, addr) in parse_ipv4(&addrs.stdout_text()) {
            if let Some(interface) = interfaces.iter_mut().find(|i| i.name == name) {
                interface.ipv4.push(addr);
            }
        }
        status.namespaces.push(NamespaceStatus { name: ns, interfaces });
    }
    status.emulators = super::recorded_emulators(prefix)?
        .into_iter()
        .map(|e| EmulatorStatus { running: e.is_running(), port: e.port, pid: e.pid, args: e.args })
        .collect();
    Ok(status)
}

/// Parses `ip -o -d link show`: one interface a line, `\` where the
/// multi-line output had its line breaks.
pub fn parse_links(text: &str) -> Vec<InterfaceStatus> {
    text.lines().filter_map(parse_link).collect()
}

fn parse_link(line: &str) -> Option<InterfaceStatus> {
    let tokens: Vec<&str> = line.split_whitespace().filter(|t| *t != "\\").collect();
    // "2:" "fw0@if3:" "<BROADCAST,...>" ...
    let name = tokens.get(1)?.trim_end_matches(':');
    let name = name.split_once('@').map_or(name, |(name, _)| name);
    let index = tokens.first()?.trim_end_matches(':').parse().ok()?;
    let mut status = InterfaceStatus { index, name: name.to_owned(), ..InterfaceStatus::default() };
    if let Some(flags) = tokens.get(2).and_then(|t| t.strip_prefix('<')).and_then(|t| t.strip_suffix('>')) {
        status.flags = flags.split(',').filter(|f| !f.is_empty()).map(str::to_owned).collect();
    }
    let after = |i: usize| tokens.get(i + 1).copied();
    for (i, &token) in tokens.iter().enumerate() {
        match token {
            "mtu" if status.mtu == 0 => status.mtu = after(i).and_then(|t| t.parse().ok()).unwrap_or(0),
            "state" if status.state.is_empty() => status.state = after(i).unwrap_or_default().to_owned(),
            "master" => status.master = after(i).map(str::to_owned),
            "link-netns" => status.link_netns = after(i).map(str::to_owned),
            "numrxqueues" => status.rx_queues = after(i).and_then(|t| t.parse().ok()).unwrap_or(0),
            "numtxqueues" => status.tx_queues = after(i).and_then(|t| t.parse().ok()).unwrap_or(0),
            "link/loopback" => status.kind = "loopback".to_owned(),
            "maxmtu" if status.kind.is_empty() => {
                // With -d, the kind ("veth", "bridge", "tun") comes right
                // after "maxmtu N"; a plain device goes on with "addrgenmode".
                if let Some(kind) = tokens.get(i + 2).filter(|t| !["addrgenmode", "bridge_slave"].contains(t)) {
                    status.kind = (*kind).to_owned();
                }
            }
            "bridge_slave" if after(i) == Some("state") => {
                status.port_state = tokens.get(i + 2).map(|s| (*s).to_owned());
            }
            t if t.starts_with("link/") && status.mac.is_empty() => {
                status.mac = after(i).unwrap_or_default().to_owned();
            }
            t if t.starts_with("prog/xdp") && after(i) == Some("id") => {
                status.xdp = Some(XdpStatus {
                    mode: t.trim_start_matches("prog/").to_owned(),
                    prog_id: tokens.get(i + 2).and_then(|t| t.parse().ok()).unwrap_or(0),
                    prog_name: match tokens.get(i + 3) {
                        Some(&"name") => tokens.get(i + 4).copied().unwrap_or_default().to_owned(),
                        _ => String::new(),
                    },
                });
            }
            _ => {}
        }
    }
    Some(status)
}

/// Parses `ip -o -4 addr show` into `(interface, "10.77.0.10/24")` pairs.
pub fn parse_ipv4(text: &str) -> Vec<(String, String)> {
    text.lines()
        .filter_map(|line| {
            let tokens: Vec<&str> = line.split_whitespace().collect();
            let name = tokens.get(1)?.trim_end_matches(':');
            let name = name.split_once('@').map_or(name, |(name, _)| name);
            let at = tokens.iter().position(|t| *t == "inet")?;
            Some((name.to_owned(), (*tokens.get(at + 1)?).to_owned()))
        })
        .collect()
}

impl fmt::Display for Status {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_empty() {
            return writeln!(f, "testbed `{}`: nothing exists", self.prefix);
        }
        writeln!(f, "testbed `{}`: {} namespaces", self.prefix, self.namespaces.len())?;
        for ns in &self.namespaces {
            writeln!(f, "{}", ns.name)?;
            for i in ns.interfaces.iter().filter(|i| i.name != "lo") {
                write!(f, "  {:<7} {:<7} {:<5} {} mtu {}", i.name, i.kind, i.state, i.mac, i.mtu)?;
                if i.kind == "veth" || i.kind == "tun" {
                    write!(f, " queues rx {} tx {}", i.rx_queues, i.tx_queues)?;
                }
                match &i.xdp {
                    Some(x) => write!(f, " {} id {} {}", x.mode, x.prog_id, x.prog_name)?,
                    None if i.name == super::SERVER_IF => write!(f, " xdp off")?,
                    None => {}
                }
                if let Some(master) = &i.master {
                    write!(f, " port of {master} ({})", i.port_state.as_deref().unwrap_or("?"))?;
                }
                if i.ipv4.is_empty() {
                    if i.name == super::SERVER_IF {
                        write!(f, " no IPv4")?;
                    }
                } else {
                    write!(f, " {}", i.ipv4.join(" "))?;
                }
                writeln!(f)?;
            }
        }
        if !self.emulators.is_empty() {
            writeln!(f, "link emulators")?;
            for e in &self.emulators {
                let state = if e.running { "running" } else { "gone" };
                writeln!(f, "  {}: pid {} {state}: {}", e.port, e.pid, e.args.join(" "))?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // Captured from iproute2 6.1 on Linux 6.18.
    const FW0: &str = r"2: fw0@if3: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 xdp qdisc noqueue state UP mode DEFAULT group default qlen 1000\    link/ether 4e:fb:f4:9b:f7:0c brd ff:ff:ff:ff:ff:ff link-netns xp-sw promiscuity 0  allmulti 0 minmtu 68 maxmtu 65535 \    veth addrgenmode eui64 numtxqueues 2 numrxqueues 2 gso_max_size 65536 gso_max_segs 65535 tso_max_size 524280 tso_max_segs 65535 gro_max_size 65536 \    prog/xdp id 106 name pass tag 614b434cd8324ecc jited load_time 8469700505614 created_by_uid 0 ";
    const TAP: &str = r"3: fwtap0: <BROADCAST,MULTICAST> mtu 1500 qdisc noop master brtap state DOWN mode DEFAULT group default qlen 1000\    link/ether da:9e:a2:4d:92:0c brd ff:ff:ff:ff:ff:ff promiscuity 1  allmulti 1 minmtu 68 maxmtu 65521 \    tun type tap pi off vnet_hdr off persist on \    bridge_slave state disabled priority 32 cost 2 hairpin off guard off addrgenmode eui64 numtxqueues 1 numrxqueues 1 gso_max_size 65536";
    const PORT: &str = r"4: c0@if2: <BROADCAST,MULTICAST,UP,LOWER_UP> mtu 1500 qdisc noqueue master br0 state UP mode DEFAULT group default qlen 1000\    link/ether 66:bb:25:87:ce:ef brd ff:ff:ff:ff:ff:ff link-netns xp-c0 promiscuity 1  allmulti 1 minmtu 68 maxmtu 65535 \    veth \    bridge_slave state forwarding priority 32 cost 2 addrgenmode eui64 numtxqueues 2 numrxqueues 2";
    const LO: &str = r"1: lo: <LOOPBACK> mtu 65536 qdisc noop state DOWN mode DEFAULT group default qlen 1000\    link/loopback 00:00:00:00:00:00 brd 00:00:00:00:00:00 promiscuity 0  allmulti 0 minmtu 0 maxmtu 0 addrgenmode eui64 numtxqueues 1 numrxqueues 1";

    #[test]
    fn links() {
        let links = parse_links(&[LO, FW0, TAP, PORT].join("\n"));
        assert_eq!(links.len(), 4);
        let [lo, fw0, tap, port] = &links[..] else { unreachable!() };
        assert_eq!((lo.name.as_str(), lo.kind.as_str(), lo.mtu), ("lo", "loopback", 65536));
        assert_eq!((fw0.index, fw0.name.as_str()), (2, "fw0"));
        assert_eq!(fw0.kind, "veth");
        assert!(fw0.is_up());
        assert_eq!(fw0.state, "UP");
        assert_eq!(fw0.mac, "4e:fb:f4:9b:f7:0c");
        assert_eq!((fw0.rx_queues, fw0.tx_queues), (2, 2));
        assert_eq!(fw0.link_netns.as_deref(), Some("xp-sw"));
        assert_eq!(fw0.xdp, Some(XdpStatus { mode: "xdp".into(), prog_id: 106, prog_name: "pass".into() }), "{fw0:?}");
        assert_eq!(fw0.master, None);
        assert_eq!(tap.kind, "tun");
        assert!(!tap.is_up());
        assert_eq!(tap.master.as_deref(), Some("brtap"));
        assert_eq!(tap.port_state.as_deref(), Some("disabled"));
        assert_eq!(tap.xdp, None);
        assert_eq!(port.kind, "veth");
        assert_eq!(port.master.as_deref(), Some("br0"));
        assert_eq!(port.port_state.as_deref(), Some("forwarding"));
    }

    #[test]
    fn addresses() {
        let text = "1: lo    inet 127.0.0.1/8 scope host lo\\       valid_lft forever preferred_lft forever\n\
                    2: eth0    inet 10.77.0.10/24 scope global eth0\\       valid_lft forever preferred_lft forever\n";
        assert_eq!(
            parse_ipv4(text),
            [("lo".to_owned(), "127.0.0.1/8".to_owned()), ("eth0".to_owned(), "10.77.0.10/24".to_owned())]
        );
    }
}
