//! What a testbed is made of: [`TestbedConfig`], the [`Subnet`] its hosts
//! are numbered in, and the [`LinkParams`] of an emulated client link.
//!
//! Link settings use `fairway-linkem`'s syntax, which follows tc's:
//! durations `250us`, `25ms`, `1s`; rates in bits per second `800kbit`,
//! `100mbit`, `1gbit` (decimal multiples); sizes in bytes `1500b`, `256kb`,
//! `1mb` (binary multiples, as tc); shares in percent `1%` or `0.5`.

use std::fmt;
use std::net::Ipv4Addr;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use fairway_nic::linkem::units;

use super::TestbedError;

/// The longest prefix: namespace names stay short enough to read in
/// `ip netns list`, and `{prefix}-srv` fits comfortably in a file name.
pub const MAX_PREFIX_LEN: usize = 16;

/// The most queues the server interface may have (veth allows more; a
/// testbed never needs them).
pub const MAX_QUEUES: usize = 256;

/// The smallest MTU a testbed takes: IPv4's minimum.
pub const MIN_MTU: u32 = 576;
/// The largest MTU a testbed takes: jumbo frames (Fairway's stack goes no
/// higher).
pub const MAX_MTU: u32 = 9000;

/// Host number of Fairway's address in the subnet (10.77.0.1).
pub(crate) const SERVER_HOST: u32 = 1;

/// Host number of client 0 (10.77.0.10); client `i` is `CLIENT_HOST_BASE + i`.
pub(crate) const CLIENT_HOST_BASE: u32 = 10;

/// An IPv4 subnet: network address and prefix length.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct Subnet {
    network: Ipv4Addr,
    prefix_len: u8,
}

impl Subnet {
    /// 10.77.0.0/24, the default.
    pub const DEFAULT: Subnet = Subnet { network: Ipv4Addr::new(10, 77, 0, 0), prefix_len: 24 };

    /// A subnet from its network address, which must have no host bits set,
    /// and a prefix length of 8 to 29.
    pub fn new(network: Ipv4Addr, prefix_len: u8) -> Result<Subnet, TestbedError> {
        if !(8..=29).contains(&prefix_len) {
            return Err(TestbedError::Config(format!("subnet prefix length /{prefix_len} is not within /8../29")));
        }
        let mask = u32::MAX << (32 - prefix_len);
        if u32::from(network) & !mask != 0 {
            return Err(TestbedError::Config(format!(
                "{network}/{prefix_len} has host bits set (the network is {}/{prefix_len})",
                Ipv4Addr::from(u32::from(network) & mask)
            )));
        }
        Ok(Subnet { network, prefix_len })
    }

    /// The network address.
    pub fn network(&self) -> Ipv4Addr {
        self.network
    }

    /// The prefix length.
    pub fn prefix_len(&self) -> u8 {
        self.prefix_len
    }

    /// Host `n` of the subnet (network address + `n`), or `None` when that
    /// is the network or broadcast address or beyond.
    pub fn host(&self, n: u32) -> Option<Ipv4Addr> {
        let size = 1u32 << (32 - self.prefix_len);
        (n >= 1 && n < size - 1).then(|| Ipv4Addr::from(u32::from(self.network) + n))
    }

    /// How many clients fit: hosts from 10 (client 0) up to the last
    /// before broadcast.
    pub fn max_clients(&self) -> usize {
        let size = 1u64 << (32 - self.prefix_len);
        (size - 1).saturating_sub(u64::from(CLIENT_HOST_BASE)) as usize
    }
}

impl Default for Subnet {
    fn default() -> Subnet {
        Subnet::DEFAULT
    }
}

impl fmt::Display for Subnet {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.network, self.prefix_len)
    }
}

impl FromStr for Subnet {
    type Err = TestbedError;

    fn from_str(s: &str) -> Result<Subnet, TestbedError> {
        let bad = || TestbedError::Config(format!("`{s}` is not a subnet like 10.77.0.0/24"));
        let (addr, len) = s.split_once('/').ok_or_else(bad)?;
        let network: Ipv4Addr = addr.parse().map_err(|_| bad())?;
        let prefix_len: u8 = len.parse().map_err(|_| bad())?;
        Subnet::new(network, prefix_len)
    }
}

/// The settings of an emulated link between a client and the switch,
/// rendered as `fairway-linkem` arguments by [`LinkParams::to_args`]. Both
/// directions get the same settings. `None` leaves a setting to the
/// emulator's default (no delay, no rate limit, no loss, ...).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkParams {
    /// One-way delay, added in each direction (`--delay`).
    pub delay: Option<Duration>,
    /// Rate limit in bits per second (`--rate`).
    pub rate_bps: Option<u64>,
    /// Size of the drop-tail queue in front of the rate limit, in bytes
    /// (`--queue`).
    pub queue_bytes: Option<u64>,
    /// Random loss, percent of frames (`--loss`).
    pub loss_percent: Option<f64>,
    /// Frames delayed further to arrive out of order, percent (`--reorder`).
    pub reorder_percent: Option<f64>,
    /// How much further a reordered frame is delayed (`--reorder-delay`).
    pub reorder_delay: Option<Duration>,
    /// Seed of the emulator's random choices (`--seed`).
    pub seed: Option<u64>,
}

/// The `key=value` names [`LinkParams::set`] takes, in argument order.
pub const LINK_KEYS: [&str; 7] = ["delay", "rate", "queue", "loss", "reorder", "reorder-delay", "seed"];

impl LinkParams {
    /// A link with only a one-way delay.
    pub fn with_delay(delay: Duration) -> LinkParams {
        LinkParams { delay: Some(delay), ..LinkParams::default() }
    }

    /// Sets one field from its `fairway-linkem` option name (without the
    /// dashes) and value: `set("delay", "25ms")`, `set("loss", "1%")`.
    pub fn set(&mut self, key: &str, value: &str) -> Result<(), String> {
        match key {
            "delay" => self.delay = Some(parse_duration(value)?),
            "rate" => self.rate_bps = Some(parse_rate(value)?),
            "queue" => self.queue_bytes = Some(parse_size(value)?),
            "loss" => self.loss_percent = Some(parse_percent(value)?),
            "reorder" => self.reorder_percent = Some(parse_percent(value)?),
            "reorder-delay" | "reorder_delay" => self.reorder_delay = Some(parse_duration(value)?),
            "seed" => self.seed = Some(value.parse().map_err(|_| format!("seed `{value}` is not a number"))?),
            _ => return Err(format!("unknown link setting `{key}` (expected one of: {})", LINK_KEYS.join(", "))),
        }
        Ok(())
    }

    /// Parses `delay=25ms,rate=100mbit,loss=1%` (any subset, any order).
    pub fn parse_list(list: &str) -> Result<LinkParams, String> {
        let mut params = LinkParams::default();
        for item in list.split(',').map(str::trim).filter(|item| !item.is_empty()) {
            let (key, value) =
                item.split_once('=').ok_or_else(|| format!("`{item}` is not key=value (e.g. delay=25ms)"))?;
            params.set(key.trim(), value.trim())?;
        }
        Ok(params)
    }

    /// Whether no setting is given (the emulator would be a plain wire).
    pub fn is_empty(&self) -> bool {
        *self == LinkParams::default()
    }

    /// Checks ranges: percentages within 0..=100, a non-zero rate and queue.
    pub fn validate(&self) -> Result<(), String> {
        for (name, value) in [("loss", self.loss_percent), ("reorder", self.reorder_percent)] {
            if let Some(v) = value
                && !(0.0..=100.0).contains(&v)
            {
                return Err(format!("{name} {v}% is not within 0..100 %"));
            }
        }
        if self.rate_bps == Some(0) {
            return Err("rate 0 would carry nothing".to_owned());
        }
        if self.queue_bytes == Some(0) {
            return Err("queue 0 would hold nothing".to_owned());
        }
        Ok(())
    }

    /// The settings as `(option, value)` pairs in `fairway-linkem`'s
    /// syntax, e.g. `("delay", "25ms")`.
    pub fn settings(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        if let Some(d) = self.delay {
            out.push(("delay", format_duration(d)));
        }
        if let Some(r) = self.rate_bps {
            out.push(("rate", format_rate(r)));
        }
        if let Some(q) = self.queue_bytes {
            out.push(("queue", format_size(q)));
        }
        if let Some(p) = self.loss_percent {
            out.push(("loss", format!("{p}%")));
        }
        if let Some(p) = self.reorder_percent {
            out.push(("reorder", format!("{p}%")));
        }
        if let Some(d) = self.reorder_delay {
            out.push(("reorder-delay", format_duration(d)));
        }
        if let Some(s) = self.seed {
            out.push(("seed", s.to_string()));
        }
        out
    }

    /// The `fairway-linkem` arguments after `--a IF --b IF`:
    /// `["--delay", "25ms", "--rate", "100mbit", ...]`.
    pub fn to_args(&self) -> Vec<String> {
        self.settings().into_iter().flat_map(|(key, value)| [format!("--{key}"), value]).collect()
    }
}

impl fmt::Display for LinkParams {
    /// `delay=25ms,rate=100mbit`, the form [`LinkParams::parse_list`] reads;
    /// `plain wire` when no setting is given.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let settings = self.settings();
        if settings.is_empty() {
            return f.write_str("plain wire");
        }
        let list: Vec<String> = settings.into_iter().map(|(k, v)| format!("{k}={v}")).collect();
        f.write_str(&list.join(","))
    }
}

// The link settings are the emulator's own, parsed by its parsers so the
// testbed accepts exactly what `fairway-linkem` does. Percentages stay in
// percent here (they are printed back as `loss=1%`).

/// Parses an MTU for [`TestbedConfig::mtu`]: a number of bytes within
/// [`MIN_MTU`]`..=`[`MAX_MTU`].
pub fn parse_mtu(s: &str) -> Result<u32, String> {
    let mtu: u32 = s.trim().parse().map_err(|e| format!("MTU {s}: {e}"))?;
    check_mtu(mtu)?;
    Ok(mtu)
}

fn check_mtu(mtu: u32) -> Result<(), String> {
    if (MIN_MTU..=MAX_MTU).contains(&mtu) {
        Ok(())
    } else {
        Err(format!("MTU {mtu} is not within {MIN_MTU}..={MAX_MTU}"))
    }
}

/// `250us`, `25ms`, `1.5s`; a bare `0` is zero.
pub fn parse_duration(s: &str) -> Result<Duration, String> {
    units::parse_duration(s).map_err(|e| e.to_string())
}

/// `800kbit`, `100mbit`, `1gbit`, `9600bit`: bits per second.
pub fn parse_rate(s: &str) -> Result<u64, String> {
    units::parse_rate(s).map_err(|e| e.to_string())
}

/// `1500b`, `256kb`, `1mb` (kb = 1024 bytes, as tc), or a bare number of
/// bytes.
pub fn parse_size(s: &str) -> Result<u64, String> {
    units::parse_size(s).map(|b| b as u64).map_err(|e| e.to_string())
}

/// `1%`, `0.5%` or `0.5`: percent.
pub fn parse_percent(s: &str) -> Result<f64, String> {
    units::parse_percent(s).map(|p| p * 100.0).map_err(|e| e.to_string())
}

fn format_duration(d: Duration) -> String {
    units::format_duration(d)
}

fn format_rate(bps: u64) -> String {
    units::format_rate(bps)
}

fn format_size(bytes: u64) -> String {
    for (scale, unit) in [(1024 * 1024, "mb"), (1024, "kb")] {
        if bytes.is_multiple_of(scale) {
            return format!("{}{unit}", bytes / scale);
        }
    }
    format!("{bytes}b")
}

/// What a testbed is made of. Build one with [`TestbedConfig::new`] and the
/// builder methods, then pass it to [`Testbed::up`](super::Testbed::up).
#[derive(Debug, Clone, PartialEq)]
pub struct TestbedConfig {
    /// Names the namespaces: `{prefix}-srv`, `{prefix}-sw`, `{prefix}-c0`,
    /// ... ASCII letters, digits and `_`, at most [`MAX_PREFIX_LEN`] long.
    pub prefix: String,
    /// How many client namespaces.
    pub clients: usize,
    /// Queues of the server's veth `fw0` (and of its peer, so that frames
    /// spread over them): one per Fairway shard.
    pub queues: usize,
    /// Per client: `None` (or no entry) for a direct bridge port, `Some` for
    /// a link through `fairway-linkem`. At most `clients` entries.
    pub links: Vec<Option<LinkParams>>,
    /// `Some` puts `fairway-linkem` between the switch and the server's
    /// port (`srv`), so every client's traffic to and from the server shares
    /// that one link: the bottleneck of an experiment where flows compete.
    pub server_link: Option<LinkParams>,
    /// The subnet: Fairway is host 1, client `i` host `10 + i`.
    pub subnet: Subnet,
    /// Create `fwtap0` as a multi-queue TAP (`ip tuntap ... multi_queue`),
    /// for Fairway over TAP with several shards; each shard then attaches
    /// with `IFF_MULTI_QUEUE`.
    pub tap_multi_queue: bool,
    /// The `fairway-linkem` binary; `None` looks for it (see
    /// [`find_linkem`](super::find_linkem)).
    pub linkem: Option<PathBuf>,
    /// `Some` steers the kernel's receive processing (RPS, `rps_cpus`):
    /// in the server's namespace to the server's CPUs, in the switch's and
    /// the clients' to the clients' CPUs, as separate machines would run
    /// it. Without it the kernel runs a frame's receive path in the softirq
    /// of whichever core sent it: on a veth testbed a server's core then
    /// bridges its own frames and runs its clients' TCP receive path, and a
    /// kernel server's ACK-clocked sending runs on its clients' cores.
    pub rx_cpus: Option<RxCpus>,
    /// The MTU of every interface ([`MTU`](super::MTU), 1500, unless set):
    /// 9000 gives every link jumbo frames, which Fairway over AF_XDP takes
    /// in several UMEM frames (multi-buffer).
    pub mtu: u32,
    /// Give every client an IPv6 unique-local address too (client `i` is
    /// host `10 + i` of fd77::/64, fd77::a for client 0; Fairway's is fd77::1, see
    /// [`Testbed::server_ip6`](super::Testbed::server_ip6)). Off in this
    /// default, which the tests start from: the clients' kernels then keep
    /// IPv6, and its router solicitations and listener reports, off tests
    /// that do not ask for it. `fairway-testbed up` (and so `cargo xtask
    /// testbed up` and `cargo xtask run`) turns it on unless `--no-ipv6`.
    pub ipv6: bool,
}

/// The CPUs [`TestbedConfig::rx_cpus`] steers receive processing to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RxCpus {
    /// For the server's namespace.
    pub server: Vec<usize>,
    /// For the switch's and the clients' namespaces.
    pub clients: Vec<usize>,
}

/// `cpus` as an `rps_cpus` mask: hex, one 32-bit word per 32 CPUs, most
/// significant first, comma-separated, as sysfs takes it. `None` when empty.
#[must_use]
pub fn rps_mask(cpus: &[usize]) -> Option<String> {
    let words = cpus.iter().max()? / 32 + 1;
    let mut mask = vec![0u32; words];
    for &cpu in cpus {
        mask[words - 1 - cpu / 32] |= 1 << (cpu % 32);
    }
    Some(mask.iter().map(|w| format!("{w:08x}")).collect::<Vec<_>>().join(","))
}

impl Default for TestbedConfig {
    /// Prefix `fw`, 2 clients on direct links, 2 queues, 10.77.0.0/24.
    fn default() -> TestbedConfig {
        TestbedConfig {
            prefix: super::DEFAULT_PREFIX.to_owned(),
            clients: 2,
            queues: 2,
            links: Vec::new(),
            server_link: None,
            subnet: Subnet::DEFAULT,
            tap_multi_queue: false,
            linkem: None,
            rx_cpus: None,
            mtu: super::MTU,
            ipv6: false,
        }
    }
}

impl TestbedConfig {
    /// The default configuration under another prefix.
    pub fn new(prefix: impl Into<String>) -> TestbedConfig {
        TestbedConfig { prefix: prefix.into(), ..TestbedConfig::default() }
    }

    /// Gives the clients IPv6 addresses beside their IPv4 ones.
    pub fn ipv6(mut self, on: bool) -> TestbedConfig {
        self.ipv6 = on;
        self
    }

    /// Sets the number of clients.
    pub fn clients(mut self, clients: usize) -> TestbedConfig {
        self.clients = clients;
        self
    }

    /// Sets the number of queues of `fw0`.
    pub fn queues(mut self, queues: usize) -> TestbedConfig {
        self.queues = queues;
        self
    }

    /// Puts client `client` behind an emulated link.
    pub fn link(mut self, client: usize, params: LinkParams) -> TestbedConfig {
        if self.links.len() <= client {
            self.links.resize(client + 1, None);
        }
        self.links[client] = Some(params);
        self
    }

    /// Puts the server's port behind an emulated link that every client
    /// shares.
    pub fn server_link(mut self, params: LinkParams) -> TestbedConfig {
        self.server_link = Some(params);
        self
    }

    /// Sets the subnet.
    pub fn subnet(mut self, subnet: Subnet) -> TestbedConfig {
        self.subnet = subnet;
        self
    }

    /// Sets the path of `fairway-linkem`.
    pub fn linkem(mut self, path: impl Into<PathBuf>) -> TestbedConfig {
        self.linkem = Some(path.into());
        self
    }

    /// Receive processing steered to the server's and the clients' CPUs
    /// (see [`TestbedConfig::rx_cpus`]).
    pub fn rx_cpus(mut self, server: &[usize], clients: &[usize]) -> TestbedConfig {
        self.rx_cpus = Some(RxCpus { server: server.to_vec(), clients: clients.to_vec() });
        self
    }

    /// Sets the MTU of every interface (see [`TestbedConfig::mtu`]).
    pub fn mtu(mut self, mtu: u32) -> TestbedConfig {
        self.mtu = mtu;
        self
    }

    /// The emulated link of `client`, if it has one.
    pub fn link_of(&self, client: usize) -> Option<&LinkParams> {
        self.links.get(client).and_then(Option::as_ref)
    }

    /// Whether any client, or the server, is behind `fairway-linkem`.
    pub fn is_emulated(&self) -> bool {
        self.server_link.is_some() || (0..self.clients).any(|i| self.link_of(i).is_some())
    }

    /// Checks everything that can be checked before touching the system.
    pub fn validate(&self) -> Result<(), TestbedError> {
        validate_prefix(&self.prefix)?;
        if !(1..=MAX_QUEUES).contains(&self.queues) {
            return Err(TestbedError::Config(format!("queues {} is not within 1..={MAX_QUEUES}", self.queues)));
        }
        check_mtu(self.mtu).map_err(TestbedError::Config)?;
        if self.clients > self.subnet.max_clients() {
            return Err(TestbedError::Config(format!(
                "{} clients do not fit in {} (at most {}: clients start at host {CLIENT_HOST_BASE})",
                self.clients,
                self.subnet,
                self.subnet.max_clients()
            )));
        }
        if self.links.len() > self.clients {
            return Err(TestbedError::Config(format!(
                "a link is given for client {} but there are only {} clients (0..{})",
                self.links.len() - 1,
                self.clients,
                self.clients
            )));
        }
        for (i, link) in self.links.iter().enumerate() {
            if let Some(link) = link {
                link.validate().map_err(|e| TestbedError::Config(format!("link of client {i}: {e}")))?;
            }
        }
        if let Some(link) = &self.server_link {
            link.validate().map_err(|e| TestbedError::Config(format!("link of the server: {e}")))?;
        }
        Ok(())
    }
}

/// Checks that `prefix` can name namespaces: 1 to [`MAX_PREFIX_LEN`] ASCII
/// letters, digits or `_` (no `-`, so that one prefix's names never match
/// another's pattern).
pub fn validate_prefix(prefix: &str) -> Result<(), TestbedError> {
    let ok = !prefix.is_empty()
        && prefix.len() <= MAX_PREFIX_LEN
        && prefix.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
    if ok {
        Ok(())
    } else {
        Err(TestbedError::Config(format!(
            "prefix `{prefix}` must be 1 to {MAX_PREFIX_LEN} ASCII letters, digits or `_`"
        )))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rps_masks() {
        assert_eq!(rps_mask(&[]), None);
        assert_eq!(rps_mask(&[0]).as_deref(), Some("00000001"));
        assert_eq!(rps_mask(&[1, 3]).as_deref(), Some("0000000a"));
        assert_eq!(rps_mask(&[0, 33]).as_deref(), Some("00000002,00000001"));
    }

    #[test]
    fn subnet_hosts() {
        let s: Subnet = "10.77.0.0/24".parse().unwrap();
        assert_eq!(s, Subnet::DEFAULT);
        assert_eq!(s.to_string(), "10.77.0.0/24");
        assert_eq!(s.host(1), Some(Ipv4Addr::new(10, 77, 0, 1)));
        assert_eq!(s.host(254), Some(Ipv4Addr::new(10, 77, 0, 254)));
        assert_eq!(s.host(0), None);
        assert_eq!(s.host(255), None);
        assert_eq!(s.max_clients(), 245);
        assert_eq!("10.1.0.0/28".parse::<Subnet>().unwrap().max_clients(), 5);
        assert!("10.77.0.1/24".parse::<Subnet>().is_err());
        assert!("10.77.0.0/30".parse::<Subnet>().is_err());
        assert!("10.77.0.0".parse::<Subnet>().is_err());
    }

    #[test]
    fn link_params_round_trip() {
        let p =
            LinkParams::parse_list("delay=25ms, rate=100mbit,queue=256kb,loss=1%,reorder=5,reorder-delay=10ms,seed=7")
                .unwrap();
        assert_eq!(p.delay, Some(Duration::from_millis(25)));
        assert_eq!(p.rate_bps, Some(100_000_000));
        assert_eq!(p.queue_bytes, Some(256 * 1024));
        assert_eq!(p.loss_percent, Some(1.0));
        assert_eq!(p.reorder_percent, Some(5.0));
        assert_eq!(p.seed, Some(7));
        assert_eq!(
            p.to_args().join(" "),
            "--delay 25ms --rate 100mbit --queue 256kb --loss 1% --reorder 5% --reorder-delay 10ms --seed 7"
        );
        assert_eq!(LinkParams::parse_list(&p.to_string()).unwrap(), p);
        assert!(LinkParams::default().is_empty());
        assert!(LinkParams::default().to_args().is_empty());
    }

    #[test]
    fn units() {
        assert_eq!(parse_duration("250us"), Ok(Duration::from_micros(250)));
        assert_eq!(parse_duration("1.5s"), Ok(Duration::from_millis(1500)));
        assert!(parse_duration("5").is_err());
        assert_eq!(parse_duration("0"), Ok(Duration::ZERO));
        assert!(parse_duration("5 parsecs").is_err());
        assert!(parse_duration("-5ms").is_err());
        assert_eq!(format_duration(Duration::from_micros(1500)), "1500us");
        assert_eq!(parse_rate("1gbit"), Ok(1_000_000_000));
        assert_eq!(parse_rate("1.5Mbit"), Ok(1_500_000));
        assert!(parse_rate("100mbps").is_err());
        assert_eq!(format_rate(1_500_000), "1500kbit");
        assert_eq!(format_rate(999), "999bit");
        assert_eq!(parse_size("1mb"), Ok(1 << 20));
        assert_eq!(parse_size("1500"), Ok(1500));
        assert_eq!(format_size(1500), "1500b");
        assert_eq!(parse_percent("0.5%"), Ok(0.5));
        assert!(parse_percent("101%").is_err());
        assert!(LinkParams::parse_list("delay").is_err());
        assert!(LinkParams::parse_list("jitter=5ms").is_err());
    }

    #[test]
    fn config_checks() {
        assert!(TestbedConfig::default().validate().is_ok());
        assert!(TestbedConfig::new("fwt12345678").validate().is_ok());
        for bad in ["", "fw-x", "fw x", "a_very_long_prefix_name"] {
            assert!(TestbedConfig::new(bad).validate().is_err(), "{bad:?}");
        }
        assert!(TestbedConfig::default().queues(0).validate().is_err());
        assert!(TestbedConfig::default().clients(246).validate().is_err());
        assert!(TestbedConfig::default().clients(245).validate().is_ok());
        let linked = TestbedConfig::default().clients(2).link(1, LinkParams::with_delay(Duration::from_millis(5)));
        assert_eq!(linked.links.len(), 2);
        assert!(linked.is_emulated() && linked.link_of(0).is_none() && linked.link_of(1).is_some());
        assert!(linked.validate().is_ok());
        assert!(TestbedConfig::default().clients(1).link(1, LinkParams::default()).validate().is_err());
        let lossy = LinkParams { loss_percent: Some(150.0), ..LinkParams::default() };
        assert!(TestbedConfig::default().link(0, lossy).validate().is_err());
    }
}
