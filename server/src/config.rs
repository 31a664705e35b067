//! The server's configuration: command-line flags (clap) and an optional
//! TOML file with the same keys (`--config FILE`). A flag given on the
//! command line wins over the file; the file wins over the defaults.
//!
//! [`Options`] is what either source says, every key optional, so that the
//! two can be merged key by key (the per-client weights prefix by prefix:
//! [`ClientWeights`]); [`Config`] is the merged, validated result with
//! every default filled in. Errors are one line and name the key.

use std::fmt;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};
use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use clap::{ArgAction, CommandFactory, FromArgMatches, Parser, ValueEnum};
use serde::Deserialize;

use crate::http::HttpConfig;
use crate::runtime::LoopConfig;

mod ablation;
mod upstreams;
mod weights;

pub use ablation::{ALL_OFF_ENV, Recycling, Steering, all_off, all_off_if_asked};

pub use upstreams::{
    Balance, GroupOptions, ProxyConfig, Route, RouteSpec, UpstreamGroup, UpstreamServer, UpstreamSpec,
};
pub use weights::{ClientWeight, ClientWeights, Weight};

/// Where packets come from.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Backend {
    /// Kernel sockets (mio, one SO_REUSEPORT listener per shard); needs no
    /// privileges.
    #[default]
    Kernel,
    /// The userspace stack over AF_XDP on `--iface`.
    Afxdp,
    /// The userspace stack over a TAP device.
    Tap,
}

impl fmt::Display for Backend {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Backend::Kernel => "kernel",
            Backend::Afxdp => "afxdp",
            Backend::Tap => "tap",
        })
    }
}

/// The window-control policy that keeps competing flows fair.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Fairness {
    /// No caps: each sender's own congestion control decides.
    #[default]
    Off,
    /// The seed study's RTT-ratio policy.
    Seed,
    /// Equal rate for every active flow: window = share × RTT.
    EqualRate,
}

/// How a new connection to a recently seen path starts (userspace backends).
///
/// The default is careful resume: on the delay lab it made repeat downloads
/// of 250 KB to 1 MB 10–37 % faster at 20–50 ms of added delay with no safe
/// retreat in any of its jumps and no first download slower, and on the
/// simulated network it lost nothing more than slow start returning to a
/// congested path and less onto an idle one (benches/README.md, 2026-12-02).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, ValueEnum, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FastStart {
    /// From scratch: the initial window, an RTO of 1 s.
    Off,
    /// RFC 9040: the RTT estimate and ssthresh of the client's path (its address, or its /64),
    /// remembered
    /// for 10 minutes; cwnd still starts at the initial window.
    PathMemory,
    /// Path memory, then careful resume (RFC 9959): once the handshake's RTT agrees with the
    /// path's, jump to half the window the path carried (at most the flow's fairness share),
    /// paced over one RTT, validate it, and retreat on loss; a client not seen before, under
    /// a fairness policy, jumps to its share's worth of one RTT.
    #[default]
    CarefulResume,
}

/// An IPv4 address with its prefix length: `10.0.0.1/24`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "Scalar")]
pub struct IpPrefix {
    /// The address.
    pub addr: Ipv4Addr,
    /// The prefix length, 0 ..= 32.
    pub prefix: u8,
}

impl IpPrefix {
    /// Whether `other` is in this address's subnet.
    #[must_use]
    pub fn contains(&self, other: Ipv4Addr) -> bool {
        u32::from(self.addr) & self.mask() == u32::from(other) & self.mask()
    }

    /// The subnet itself: the address with its host bits clear.
    #[must_use]
    pub fn network(&self) -> IpPrefix {
        IpPrefix { addr: Ipv4Addr::from(u32::from(self.addr) & self.mask()), prefix: self.prefix }
    }

    /// The netmask of the prefix length.
    fn mask(&self) -> u32 {
        u32::MAX.checked_shl(32 - u32::from(self.prefix.min(32))).unwrap_or(0)
    }
}

impl FromStr for IpPrefix {
    type Err = String;
    fn from_str(s: &str) -> Result<IpPrefix, String> {
        let (addr, prefix) = s.split_once('/').ok_or_else(|| format!("'{s}' is not ADDR/PREFIX (e.g. 10.0.0.1/24)"))?;
        let addr = addr.parse().map_err(|_| format!("'{addr}' is not an IPv4 address"))?;
        let prefix = prefix
            .parse::<u8>()
            .ok()
            .filter(|&p| p <= 32)
            .ok_or_else(|| format!("bad prefix '/{prefix}' in '{s}': expected 0 to 32"))?;
        Ok(IpPrefix { addr, prefix })
    }
}

impl fmt::Display for IpPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// An IPv6 address with its prefix length: `fd77::1/64`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Ip6Prefix {
    /// The address.
    pub addr: Ipv6Addr,
    /// The prefix length, 0 ..= 128.
    pub prefix: u8,
}

impl Ip6Prefix {
    /// Whether `other` is in this prefix.
    #[must_use]
    pub fn contains(&self, other: Ipv6Addr) -> bool {
        self.addr.to_bits() & self.mask() == other.to_bits() & self.mask()
    }

    /// The prefix itself: the address with its host bits clear.
    #[must_use]
    pub fn network(&self) -> Ip6Prefix {
        Ip6Prefix { addr: Ipv6Addr::from_bits(self.addr.to_bits() & self.mask()), prefix: self.prefix }
    }

    fn mask(&self) -> u128 {
        u128::MAX.checked_shl(128 - u32::from(self.prefix.min(128))).unwrap_or(0)
    }
}

impl fmt::Display for Ip6Prefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

/// What `--ip` takes: an address of either family with its prefix length.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AnyPrefix {
    /// `10.0.0.1/24`.
    V4(IpPrefix),
    /// `fd77::1/64`.
    V6(Ip6Prefix),
}

impl AnyPrefix {
    /// Whether `addr` is in this prefix (an IPv4-mapped IPv6 address counts
    /// as its IPv4 address).
    #[must_use]
    pub fn contains(&self, addr: std::net::IpAddr) -> bool {
        match (self, addr.to_canonical()) {
            (AnyPrefix::V4(p), std::net::IpAddr::V4(a)) => p.contains(a),
            (AnyPrefix::V6(p), std::net::IpAddr::V6(a)) => p.contains(a),
            _ => false,
        }
    }

    /// The prefix itself: the address with its host bits clear.
    #[must_use]
    pub fn network(&self) -> AnyPrefix {
        match self {
            AnyPrefix::V4(p) => AnyPrefix::V4(p.network()),
            AnyPrefix::V6(p) => AnyPrefix::V6(p.network()),
        }
    }

    /// The prefix length.
    #[must_use]
    pub fn prefix_len(&self) -> u8 {
        match self {
            AnyPrefix::V4(p) => p.prefix,
            AnyPrefix::V6(p) => p.prefix,
        }
    }

    /// The address, of either family.
    #[must_use]
    pub fn addr(&self) -> std::net::IpAddr {
        match self {
            AnyPrefix::V4(p) => p.addr.into(),
            AnyPrefix::V6(p) => p.addr.into(),
        }
    }
}

impl fmt::Display for AnyPrefix {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            AnyPrefix::V4(p) => p.fmt(f),
            AnyPrefix::V6(p) => p.fmt(f),
        }
    }
}

impl FromStr for AnyPrefix {
    type Err = String;
    fn from_str(s: &str) -> Result<AnyPrefix, String> {
        let Some((addr, prefix)) = s.split_once('/').filter(|(addr, _)| addr.contains(':')) else {
            return s
                .parse()
                .map(AnyPrefix::V4)
                .map_err(|e| e.replace("not an IPv4 address", "not an IPv4 address (nor an IPv6 one)"));
        };
        let addr = addr.parse().map_err(|_| format!("'{addr}' is not an IPv6 address"))?;
        let prefix = prefix
            .parse::<u8>()
            .ok()
            .filter(|&p| p <= 128)
            .ok_or_else(|| format!("bad prefix '/{prefix}' in '{s}': expected 0 to 128"))?;
        Ok(AnyPrefix::V6(Ip6Prefix { addr, prefix }))
    }
}

/// A file key that takes one value or a list of them: `ip =
/// "10.77.0.1/24"` or `ip = ["10.77.0.1/24", "fd77::1/64"]`, and the same
/// for `gateway`.
fn one_or_many<'de, D, T>(deserializer: D) -> Result<Vec<T>, D::Error>
where
    D: serde::Deserializer<'de>,
    T: FromStr,
    T::Err: fmt::Display,
{
    use serde::de::{Error, SeqAccess, Visitor};
    struct Values<T>(std::marker::PhantomData<T>);
    impl<'de, T: FromStr> Visitor<'de> for Values<T>
    where
        T::Err: fmt::Display,
    {
        type Value = Vec<T>;
        fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
            f.write_str("a string or a list of them")
        }
        fn visit_str<E: Error>(self, s: &str) -> Result<Vec<T>, E> {
            s.parse().map(|v| vec![v]).map_err(E::custom)
        }
        fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Vec<T>, A::Error> {
            let mut values = Vec::new();
            while let Some(s) = seq.next_element::<String>()? {
                values.push(s.parse().map_err(A::Error::custom)?);
            }
            Ok(values)
        }
    }
    deserializer.deserialize_any(Values(std::marker::PhantomData))
}

/// A size in bytes: `65536`, `64KiB`, `16M` (K, M, G are powers of 1024, as
/// are KiB, MiB, GiB; KB, MB, GB are powers of 1000).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "Scalar")]
pub struct ByteSize(pub u64);

impl FromStr for ByteSize {
    type Err = String;
    fn from_str(s: &str) -> Result<ByteSize, String> {
        let (number, unit) = split_number(s);
        let n: u64 = number.parse().map_err(|_| format!("'{s}' is not a size (e.g. 65536, 64KiB, 16MiB)"))?;
        let scale: u64 = match unit.to_ascii_lowercase().as_str() {
            "" | "b" => 1,
            "k" | "kib" => 1 << 10,
            "m" | "mib" => 1 << 20,
            "g" | "gib" => 1 << 30,
            "kb" => 1_000,
            "mb" => 1_000_000,
            "gb" => 1_000_000_000,
            _ => return Err(format!("unknown size unit '{unit}' in '{s}' (KiB, MiB, GiB, KB, MB, GB)")),
        };
        n.checked_mul(scale).map(ByteSize).ok_or_else(|| format!("'{s}' is too large"))
    }
}

/// A span of time: `10s`, `500ms`, `250us`, `2m`; a bare number is seconds.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "Scalar")]
pub struct Span(pub Duration);

impl FromStr for Span {
    type Err = String;
    fn from_str(s: &str) -> Result<Span, String> {
        let (number, unit) = split_number(s);
        let n: u64 = number.parse().map_err(|_| format!("'{s}' is not a duration (e.g. 10s, 500ms)"))?;
        let d = match unit {
            "" | "s" => Duration::from_secs(n),
            "ms" => Duration::from_millis(n),
            "us" | "µs" => Duration::from_micros(n),
            "m" | "min" => Duration::from_secs(n.saturating_mul(60)),
            _ => return Err(format!("unknown time unit '{unit}' in '{s}' (us, ms, s, m)")),
        };
        Ok(Span(d))
    }
}

/// A link rate in bits per second: `100mbit`, `1gbit`, `2.5gbit`,
/// `500kbit`; a bare number is bits per second.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
#[serde(try_from = "Scalar")]
pub struct Bandwidth {
    /// Bits per second.
    pub bits_per_sec: u64,
}

impl FromStr for Bandwidth {
    type Err = String;
    fn from_str(s: &str) -> Result<Bandwidth, String> {
        let (number, unit) = split_number(s);
        let n: f64 = number.parse().map_err(|_| format!("'{s}' is not a rate (e.g. 100mbit, 1gbit)"))?;
        let scale = match unit.to_ascii_lowercase().trim_end_matches("/s") {
            "" | "bit" => 1.0,
            "kbit" => 1e3,
            "mbit" => 1e6,
            "gbit" => 1e9,
            "tbit" => 1e12,
            _ => return Err(format!("unknown rate unit '{unit}' in '{s}' (kbit, mbit, gbit)")),
        };
        let bits = n * scale;
        if !bits.is_finite() || bits < 0.0 || bits > u64::MAX as f64 {
            return Err(format!("'{s}' is out of range"));
        }
        Ok(Bandwidth { bits_per_sec: bits.round() as u64 })
    }
}

impl fmt::Display for Bandwidth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}bit/s", self.bits_per_sec)
    }
}

/// Splits `"64KiB"` into `("64", "KiB")`.
fn split_number(s: &str) -> (&str, &str) {
    let s = s.trim();
    let end = s.find(|c: char| !(c.is_ascii_digit() || c == '.')).unwrap_or(s.len());
    (&s[..end], s[end..].trim())
}

/// A TOML value that may be written as a number or a string.
#[derive(Deserialize)]
#[serde(untagged)]
enum Scalar {
    Int(u64),
    Str(String),
}

impl Scalar {
    fn text(self) -> String {
        match self {
            Scalar::Int(n) => n.to_string(),
            Scalar::Str(s) => s,
        }
    }
}

macro_rules! from_scalar {
    ($($t:ty),*) => {$(
        impl TryFrom<Scalar> for $t {
            type Error = String;
            fn try_from(v: Scalar) -> Result<$t, String> {
                v.text().parse()
            }
        }
    )*};
}
from_scalar!(IpPrefix, ByteSize, Span, Bandwidth);

/// What the command line or the file says. Every key is optional; the
/// defaults are [`Config`]'s.
#[derive(Clone, Debug, Default, Parser, Deserialize)]
#[command(
    name = "fairway",
    version,
    about = "Fairway: an HTTP/1.1 server on a userspace TCP/IP stack (AF_XDP, TAP) or on kernel sockets",
    after_long_help = "Every flag can also be set in the --config TOML file, under the same name without the \
                       dashes (busy-poll-us = 20, backend = \"afxdp\", ...). Flags on the command line win over \
                       the file. RUST_LOG is used when neither sets --log."
)]
#[serde(deny_unknown_fields, rename_all = "kebab-case")]
pub struct Options {
    /// Read settings from this TOML file; flags on the command line win over it.
    #[arg(long, value_name = "FILE")]
    #[serde(skip)]
    pub config: Option<PathBuf>,

    /// Where packets come from: kernel sockets (no privileges needed), the userspace stack over AF_XDP
    /// on --iface, or over a TAP device [default: kernel]
    #[arg(long, value_enum)]
    pub backend: Option<Backend>,

    /// Address and port to listen on (kernel backend) [default: 127.0.0.1:8080]
    #[arg(long, value_name = "ADDR:PORT")]
    pub listen: Option<SocketAddr>,

    /// Userspace backends: the port plain HTTP is served on, on every --ip address [default: 80]
    #[arg(long, value_name = "PORT")]
    pub port: Option<u16>,

    /// Serve HTTPS with this PEM certificate chain (the server's certificate first, then its
    /// issuers); needs --tls-key. Re-read with the key on SIGHUP, for the connections that come
    /// after (those in progress keep theirs). TLS 1.3 and 1.2, ALPN http/1.1, session resumption
    /// by tickets [default: no TLS]
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,

    /// The PEM private key of --tls-cert (PKCS#8, PKCS#1 RSA or SEC1 EC: RSA, ECDSA P-256/P-384 or
    /// Ed25519)
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,

    /// Userspace backends: the port HTTPS is served on, beside --port [default: 443]
    #[arg(long, value_name = "PORT")]
    pub tls_port: Option<u16>,

    /// Kernel backend: the address and port HTTPS is served on, beside --listen [default: --listen's
    /// address, port 8443]
    #[arg(long, value_name = "ADDR:PORT")]
    pub tls_listen: Option<SocketAddr>,

    /// With --tls-cert: a connection whose TLS handshake has not finished this long after it was
    /// accepted is closed (an alert first), and at most half of --max-connections may be in their
    /// handshake at once, the oldest cut short to make room (stalled handshakes, the TLS form of
    /// slowloris) [default: 10s]
    #[arg(long, value_name = "TIME")]
    pub handshake_timeout: Option<Span>,

    /// With --tls-cert: serve HTTPS only, no plain HTTP port
    #[arg(long, action = ArgAction::SetTrue)]
    #[serde(default)]
    pub tls_only: bool,

    /// Network interface whose queues the AF_XDP backend binds (required with --backend afxdp)
    #[arg(long, value_name = "IF")]
    pub iface: Option<String>,

    /// The userspace stack's own addresses and subnets, one per --ip: one IPv4, e.g. 10.0.0.1/24 (required
    /// with afxdp and tap), where it serves HTTP on port 80, and any IPv6, e.g. fd77::1/64, which turn IPv6 on
    /// (with the link-local address): HTTP is served on port 80 of these too
    #[arg(long, value_name = "ADDR/PREFIX")]
    #[serde(default, deserialize_with = "one_or_many")]
    pub ip: Vec<AnyPrefix>,

    /// Router for destinations off the --ip subnets (userspace backends), one per family: an IPv4 one on
    /// the IPv4 subnet, an IPv6 one (link-local, or on an IPv6 prefix) [default: none for IPv4, on-link
    /// only; for IPv6 the routers that advertise themselves]
    #[arg(long, value_name = "ADDR")]
    #[serde(default, deserialize_with = "one_or_many")]
    pub gateway: Vec<std::net::IpAddr>,

    /// NIC queues to bind, one AF_XDP socket and one shard each (userspace backends run one shard per
    /// queue: --shards beyond --queues are not started; frames a queue receives for another shard's
    /// flow are steered to it in software) [default: 1]
    #[arg(long, value_name = "N")]
    pub queues: Option<u16>,

    /// Name of the TAP device the tap backend opens [default: fwtap0]
    #[arg(long, value_name = "NAME")]
    pub tap_name: Option<String>,

    /// Shards: one loop per core, each pinned to its core [default: all cores]
    #[arg(long, value_name = "N")]
    pub shards: Option<usize>,

    /// Busy-poll for at most this many microseconds before sleeping (the kernel backend: polls
    /// epoll without blocking); 0 sleeps at once. Adapted to the load: the loop spins only while
    /// at least three in four of its recent idle gaps were shorter than its window, and its window
    /// is, unless --latency, no longer than what a sleep and a wake-up cost the shard in CPU time
    /// (measured at its start: a few microseconds), so spinning never costs more than sleeping
    /// would [default: 50; 0 on the kernel backend]
    #[arg(long, value_name = "US")]
    pub busy_poll_us: Option<u64>,

    /// Spend CPU for latency: spin the whole --busy-poll-us whenever most idle gaps are shorter
    /// than it, not only through gaps shorter than a sleep and a wake-up cost. Lowers the latency
    /// tail at moderate load at the price of up to a core per shard (benches/README.md has the
    /// figures of both)
    #[arg(long, action = ArgAction::SetTrue)]
    #[serde(default)]
    pub latency: bool,

    /// Spin the whole --busy-poll-us every time the loop goes idle, instead of adapting the window
    /// to how often spinning finds work
    #[arg(long, action = ArgAction::SetTrue)]
    #[serde(default)]
    pub no_adaptive_busy_poll: bool,

    /// Interrupt coalescing: under load wake at most once per this many microseconds; 0 is off
    /// [default: 0]
    #[arg(long, value_name = "US")]
    pub itr_us: Option<u64>,

    /// Most frames received, and sent, per loop turn [default: 64]
    #[arg(long, value_name = "N")]
    pub batch: Option<usize>,

    /// Always receive --batch frames per turn, instead of adapting the batch to the load (from 8 up
    /// to --batch)
    #[arg(long, action = ArgAction::SetTrue)]
    #[serde(default)]
    pub no_adaptive_batch: bool,

    /// AF_XDP backend: keep every frame to one 2048- or 4096-byte UMEM frame instead of binding with
    /// multi-buffer (XDP_USE_SG) when the interface's MTU is larger (jumbo frames, up to MTU 9000):
    /// longer frames are then dropped and TCP peers are told a smaller MSS. What a kernel or driver
    /// that refuses multi-buffer leaves, logged as a warning either way
    #[arg(long, action = ArgAction::SetTrue)]
    #[serde(default)]
    pub no_multi_buffer: bool,

    /// AF_XDP backend: compute every TCP checksum in the shard instead of leaving it to the
    /// interface through AF_XDP transmit metadata (Linux 6.11, copy mode, the interface's
    /// tx-checksumming on), which saves a pass over each payload byte here and, on
    /// a veth, the peer's verification. Where that cannot be, the shard computes them anyway,
    /// logged as a warning
    #[arg(long, action = ArgAction::SetTrue)]
    #[serde(default)]
    pub no_tx_checksum_offload: bool,

    /// AF_XDP backend: while a shard busy-polls, let it also run the driver's receive processing
    /// (its NAPI poll) instead of leaving that to softirqs on whichever core they land:
    /// SO_PREFER_BUSY_POLL, with SO_BUSY_POLL = --busy-poll-us and SO_BUSY_POLL_BUDGET = --batch,
    /// and a non-blocking recvfrom after every empty receive. Off by default (see benches/README.md
    /// for what it measured)
    #[arg(long, action = ArgAction::SetTrue)]
    #[serde(default)]
    pub prefer_busy_poll: bool,

    /// Userspace backends: what the stack recycles, the rest being allocated and freed per use as a
    /// conventional stack does (the receive-path ablation): all, none, or some of frames (the
    /// AF_XDP UMEM or TAP buffers lent in place; off, each frame is copied through a buffer
    /// allocated for it, as an sk_buff), buffers (connections' rings, reassembly and sent-queue
    /// storage, control frames), handles (connection slots, the stack's fds: off, each
    /// connection's state is allocated when it opens and freed when it closes), events (the
    /// application's event records: off, one allocation per event). In the --config file:
    /// recycle = "buffers,events" [default: all]
    #[arg(long, value_name = "LIST", conflicts_with = "no_recycle")]
    pub recycle: Option<Recycling>,

    /// Userspace backends: what the stack does not recycle (the rest it does), as --recycle's list,
    /// e.g. --no-recycle handles
    #[arg(long, value_name = "LIST")]
    pub no_recycle: Option<Recycling>,

    /// Userspace backends: software steers each frame to the shard that owns its flow by
    /// Fairway's hash (ARP to every shard); off leaves each shard what its own queue receives,
    /// as a NIC's RSS alone would, a connection living where its SYN arrived, and shares only
    /// ARP (with several queues, --upstream needs software). Kernel backend: software gives each shard its own
    /// SO_REUSEPORT listener, the kernel choosing a new connection's shard by its 4-tuple; off
    /// has the shards share one listener, whichever accepts first keeping the connection
    /// [default: software]
    #[arg(long, value_enum)]
    pub steering: Option<Steering>,

    /// Serve static files from this directory (GET /PATH) [default: none, no static files]
    #[arg(long, value_name = "DIR")]
    pub root: Option<PathBuf>,

    /// Largest N that GET /bytes/N serves [default: 1GiB]
    #[arg(long, value_name = "SIZE")]
    pub max_bytes: Option<ByteSize>,

    /// Largest request body accepted (413 beyond) [default: 64MiB]
    #[arg(long, value_name = "SIZE")]
    pub max_body: Option<ByteSize>,

    /// Largest request body a handler gathers whole (collect_body: an echo, a form, JSON); 413
    /// beyond, at once and without 100 Continue when the declared Content-Length is over it.
    /// Bodies streamed to a handler (POST /upload) are bounded by --max-body [default: 64KiB]
    #[arg(long, value_name = "SIZE")]
    pub max_collect: Option<ByteSize>,

    /// Largest request head, request line and headers (431 beyond) [default: 16KiB]
    #[arg(long, value_name = "SIZE")]
    pub max_head: Option<ByteSize>,

    /// Longest request line (414 beyond) [default: 8KiB]
    #[arg(long, value_name = "SIZE")]
    pub max_request_line: Option<ByteSize>,

    /// Time a client has to send a whole request head (408 beyond: slowloris) [default: 10s]
    #[arg(long, value_name = "TIME")]
    pub header_timeout: Option<Span>,

    /// Time a request body has from its start, plus a second for every --body-min-rate bytes it
    /// brings (408 and close beyond: slow POST) [default: 20s]
    #[arg(long, value_name = "TIME")]
    pub body_timeout: Option<Span>,

    /// Bytes a second a request body must average to earn time beyond --body-timeout; 0: the whole
    /// body within --body-timeout [default: 500]
    #[arg(long, value_name = "SIZE")]
    pub body_min_rate: Option<ByteSize>,

    /// Serve HTTP/1.1 only: no HTTP/2, neither by ALPN (h2) over TLS nor with prior knowledge
    /// on a plain port
    #[arg(long, action = ArgAction::SetTrue)]
    #[serde(default)]
    pub no_http2: bool,

    /// The most streams an HTTP/2 client may have open on one connection (more are refused with
    /// REFUSED_STREAM) [default: 128]
    #[arg(long, value_name = "N")]
    pub http2_max_streams: Option<u32>,

    /// A keep-alive connection idle this long is closed [default: 60s]
    #[arg(long, value_name = "TIME")]
    pub idle_timeout: Option<Span>,

    /// A handler that defers its answer must give it within this time of the request's head (503
    /// and close beyond) [default: 30s]
    #[arg(long, value_name = "TIME")]
    pub response_timeout: Option<Span>,

    /// Most connections open at once, whole server; more are refused [default: 10000]
    #[arg(long, value_name = "N")]
    pub max_connections: Option<usize>,

    /// Userspace backends: each connection's send and receive buffer (taken from a pool while
    /// data waits in it). A flow's rate is at most this over its RTT: 1MiB lets one flow reach
    /// 32 Mbit/s at 256 ms; raise it for faster long-RTT flows. The kernel backend autotunes
    /// [default: 1MiB]
    #[arg(long, value_name = "SIZE")]
    pub socket_buffer: Option<ByteSize>,

    /// Userspace backends: a connection whose data stays unacknowledged this long (retransmitted
    /// without answer, or probing a window its peer keeps shut after the application closed it)
    /// is given up [default: 5m]
    #[arg(long, value_name = "TIME")]
    pub tcp_user_timeout: Option<Span>,

    /// Userspace backends: how long a connection the server closed first stays in TIME-WAIT
    /// (2·MSL, RFC 9293 §3.6.1), holding its slot so that old duplicates of its segments find
    /// it; shorten only where the network keeps no segment that long (a testbed) [default: 60s]
    #[arg(long, value_name = "TIME")]
    pub time_wait: Option<Span>,

    /// Userspace backends: challenge ACKs (RFC 5961: the answers to an RST or a SYN inside the
    /// window, an ACK far below what was sent) each shard sends per second at most; beyond, they
    /// are dropped and counted (tcp_challenge_ack_limit) [default: 1000]
    #[arg(long, value_name = "N")]
    pub challenge_acks: Option<u32>,

    /// Userspace backends: per connection, at most one ACK per this interval answers a segment
    /// without data that is out of the window, fails PAWS or acknowledges what was never sent
    /// (Linux's tcp_invalid_ratelimit); the others are counted (tcp_invalid_ack_limit); 0
    /// answers every one [default: 500ms]
    #[arg(long, value_name = "TIME")]
    pub invalid_ack_interval: Option<Span>,

    /// Userspace backends: how a connection to a client (its IPv4 address, or its IPv6 /64) seen in the last 10
    /// minutes starts: from scratch, from the path's RTT and ssthresh (path-memory), or with
    /// careful resume's paced jump to half the window the path last carried (no jump into a
    /// standing queue; a safe retreat on loss; with --fairness equal-rate, a new client's jump is
    /// to its fair share's worth of one RTT) [default: careful-resume]
    #[arg(long, value_enum)]
    pub fast_start: Option<FastStart>,

    /// Userspace backends: the initial congestion window, in segments, paced over the handshake's
    /// RTT when above 10 (RFC 6928's 10, with its 14,600-byte cap, is the conservative choice; 32
    /// is what several CDNs run and what a 100 KB download needs to finish in two round trips)
    /// [default: 32]
    #[arg(long, value_name = "SEGMENTS")]
    pub initial_window: Option<u32>,

    /// On SIGINT/SIGTERM, stop accepting and give in-flight responses this long to finish
    /// [default: 5s]
    #[arg(long, value_name = "TIME")]
    pub shutdown_grace: Option<Span>,

    /// Log filter (tracing env-filter syntax: error, warn, info, debug, trace, or
    /// fairway=debug,...) [default: $RUST_LOG, else info]
    #[arg(long, value_name = "FILTER")]
    pub log: Option<String>,

    /// Window-control policy that keeps competing flows fair [default: off]
    #[arg(long, value_enum)]
    pub fairness: Option<Fairness>,

    /// Bottleneck capacity the fairness policy shares, e.g. 100mbit or 10gbit
    /// [default: none, measured]
    #[arg(long, value_name = "RATE")]
    pub capacity: Option<Bandwidth>,

    /// A client's weight in the fairness policy's shares, by address or prefix of either family
    /// (10.77.0.12=2, 10.77.0.0/24=0.5, fd77::/64=2; 0.001 to 1000), repeatable; the longest matching prefix wins. equal-rate gives
    /// each flow capacity × weight / Σ weights (seed does not weigh its flows). In the --config file, a
    /// table: weight = { "10.77.0.0/24" = 0.5 }, which --weight adds to and wins over for the same
    /// prefix [default: 1 for every client]
    #[arg(long, value_name = "ADDR[/PREFIX]=WEIGHT")]
    #[serde(default, deserialize_with = "weights::deserialize")]
    pub weight: Vec<ClientWeight>,

    /// Reverse proxy: an upstream server, NAME=http://HOST[:PORT], repeatable (several with one NAME make a
    /// group that requests are spread over). With one group and no --route every request goes to it.
    /// Upstreams speak plain HTTP/1.1, with per-shard pools of keep-alive connections: on kernel
    /// sockets, reached through the kernel (this host's, or any it routes to); over AF_XDP or TAP,
    /// those on the loopback (127.0.0.1, ::1) through kernel sockets in the server's namespace and
    /// every other through the NIC by the shard's own stack (--ip's subnet, --gateway beyond it;
    /// no route is a 502). In the --config file, a table
    /// per group with its settings: [upstream.NAME] servers = ["http://127.0.0.1:8000", ...],
    /// balance = "round-robin" | "least-connections", connect-timeout = "5s" (then 504),
    /// first-byte-timeout = "20s" (from the request's end; then 504), idle-timeout = "60s" (a pause
    /// within a response, then it is cut; also an idle pooled connection's life), max-fails = 1 and
    /// fail-timeout = "10s" (a server failing that often within that time is out of turn for that
    /// long), keepalive = 256 (idle connections kept per server per shard), health-check = "/PATH" and
    /// health-interval = "5s" (an active check: GET PATH, 2xx or 3xx keeps the server in turn)
    #[arg(long, value_name = "NAME=URL")]
    #[serde(default, deserialize_with = "upstreams::deserialize")]
    pub upstream: Vec<UpstreamSpec>,

    /// Reverse proxy: requests for HOST (any, when left out) whose path starts with PREFIX go to the
    /// upstream group NAME, e.g. /api/=app or example.com/=web, repeatable; a host's routes are
    /// tried first, then the longest prefix; requests no route matches, and those of a route to
    /// builtin (/metrics=builtin), get the server's own endpoints (or the application's handler). In
    /// the --config file, [[route]] tables: host = "example.com" (optional), path = "/api/", upstream =
    /// "app", which --route flags add to and win over for the same host and prefix [default: with
    /// one upstream group, / to it]
    #[arg(long, value_name = "[HOST]/PREFIX=NAME")]
    #[serde(default)]
    pub route: Vec<RouteSpec>,
}

impl Options {
    /// `self` where it says something, else `file`.
    fn or(self, file: Options) -> Options {
        Options {
            config: self.config,
            backend: self.backend.or(file.backend),
            listen: self.listen.or(file.listen),
            port: self.port.or(file.port),
            tls_cert: self.tls_cert.or(file.tls_cert),
            tls_key: self.tls_key.or(file.tls_key),
            tls_port: self.tls_port.or(file.tls_port),
            tls_listen: self.tls_listen.or(file.tls_listen),
            tls_only: self.tls_only || file.tls_only,
            handshake_timeout: self.handshake_timeout.or(file.handshake_timeout),
            iface: self.iface.or(file.iface),
            ip: if self.ip.is_empty() { file.ip } else { self.ip },
            gateway: if self.gateway.is_empty() { file.gateway } else { self.gateway },
            queues: self.queues.or(file.queues),
            tap_name: self.tap_name.or(file.tap_name),
            shards: self.shards.or(file.shards),
            busy_poll_us: self.busy_poll_us.or(file.busy_poll_us),
            latency: self.latency || file.latency,
            itr_us: self.itr_us.or(file.itr_us),
            batch: self.batch.or(file.batch),
            no_adaptive_batch: self.no_adaptive_batch || file.no_adaptive_batch,
            no_adaptive_busy_poll: self.no_adaptive_busy_poll || file.no_adaptive_busy_poll,
            no_multi_buffer: self.no_multi_buffer || file.no_multi_buffer,
            no_tx_checksum_offload: self.no_tx_checksum_offload || file.no_tx_checksum_offload,
            prefer_busy_poll: self.prefer_busy_poll || file.prefer_busy_poll,
            // One of --recycle and --no-recycle on the command line wins
            // over either in the file.
            recycle: if self.recycle.is_some() || self.no_recycle.is_some() { self.recycle } else { file.recycle },
            no_recycle: if self.recycle.is_some() || self.no_recycle.is_some() {
                self.no_recycle
            } else {
                file.no_recycle
            },
            steering: self.steering.or(file.steering),
            root: self.root.or(file.root),
            max_bytes: self.max_bytes.or(file.max_bytes),
            max_body: self.max_body.or(file.max_body),
            max_collect: self.max_collect.or(file.max_collect),
            max_head: self.max_head.or(file.max_head),
            max_request_line: self.max_request_line.or(file.max_request_line),
            header_timeout: self.header_timeout.or(file.header_timeout),
            idle_timeout: self.idle_timeout.or(file.idle_timeout),
            no_http2: self.no_http2 || file.no_http2,
            http2_max_streams: self.http2_max_streams.or(file.http2_max_streams),
            body_timeout: self.body_timeout.or(file.body_timeout),
            body_min_rate: self.body_min_rate.or(file.body_min_rate),
            response_timeout: self.response_timeout.or(file.response_timeout),
            max_connections: self.max_connections.or(file.max_connections),
            socket_buffer: self.socket_buffer.or(file.socket_buffer),
            tcp_user_timeout: self.tcp_user_timeout.or(file.tcp_user_timeout),
            time_wait: self.time_wait.or(file.time_wait),
            challenge_acks: self.challenge_acks.or(file.challenge_acks),
            invalid_ack_interval: self.invalid_ack_interval.or(file.invalid_ack_interval),
            shutdown_grace: self.shutdown_grace.or(file.shutdown_grace),
            fast_start: self.fast_start.or(file.fast_start),
            initial_window: self.initial_window.or(file.initial_window),
            log: self.log.or(file.log),
            fairness: self.fairness.or(file.fairness),
            capacity: self.capacity.or(file.capacity),
            upstream: {
                // A group the command line names has its servers, with the
                // file's settings for it.
                let mut upstream = file.upstream;
                for group in &mut upstream {
                    if self.upstream.iter().any(|u| u.name == group.name) {
                        group.options.servers.clear();
                    }
                }
                upstream.extend(self.upstream);
                upstream
            },
            route: {
                // The command line's, then the file's that it does not
                // replace (the same host and prefix), as --weight adds up.
                let same = |a: &RouteSpec, b: &RouteSpec| {
                    let host = |r: &RouteSpec| r.host.as_deref().map(str::to_ascii_lowercase);
                    host(a) == host(b) && a.path.as_deref().unwrap_or("/") == b.path.as_deref().unwrap_or("/")
                };
                let mut route = self.route;
                let kept: Vec<RouteSpec> =
                    file.route.into_iter().filter(|f| !route.iter().any(|c| same(c, f))).collect();
                route.extend(kept);
                route
            },
            weight: {
                // Per prefix: the command line's for the clients it names,
                // the file's for the others.
                let mut weight = file.weight;
                weight.retain(|f| self.weight.iter().all(|c| c.clients() != f.clients()));
                weight.extend(self.weight);
                weight
            },
        }
    }
}

/// Why the configuration could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    /// The command line did not parse, or asked for `--help` or
    /// `--version` ([`ConfigError::exit`] prints either properly).
    #[error("{0}")]
    Cli(#[from] clap::Error),
    /// The `--config` file could not be read.
    #[error("{path}: {source}")]
    Read {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The `--config` file is not valid TOML or has a bad key or value.
    #[error("{path}:{line}: {message}")]
    File {
        /// The file.
        path: PathBuf,
        /// Where (1-based).
        line: usize,
        /// What is wrong.
        message: String,
    },
    /// The settings contradict each other or are out of range.
    #[error("{0}")]
    Invalid(String),
}

impl ConfigError {
    /// Prints the error (or the help or version asked for) and exits: 0
    /// for help and version, 2 otherwise.
    pub fn exit(&self) -> ! {
        match self {
            ConfigError::Cli(e) => e.exit(),
            other => {
                eprintln!("fairway: {other}");
                std::process::exit(2)
            }
        }
    }
}

/// HTTPS: where it is served, and with what certificate.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsConfig {
    /// The PEM certificate chain.
    pub cert: PathBuf,
    /// Its PEM private key.
    pub key: PathBuf,
    /// Userspace backends: the HTTPS port.
    pub port: u16,
    /// Kernel backend: the HTTPS address and port.
    pub listen: SocketAddr,
    /// HTTPS only: no plain port.
    pub only: bool,
    /// How long a TLS handshake may take.
    pub handshake_timeout: Duration,
}

impl Config {
    /// Userspace backends: the ports served, and which of them speak TLS.
    #[must_use]
    pub fn ports(&self) -> (Vec<u16>, Vec<u16>) {
        match &self.tls {
            None => (vec![self.port], Vec::new()),
            Some(tls) if tls.only => (vec![tls.port], vec![tls.port]),
            Some(tls) => (vec![self.port, tls.port], vec![tls.port]),
        }
    }
}

/// How long a TLS handshake may take by default (`--handshake-timeout`).
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// The server's settings, merged and validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Config {
    /// Where packets come from.
    pub backend: Backend,
    /// Kernel backend: where to listen.
    pub listen: SocketAddr,
    /// Userspace backends: the plain HTTP port.
    pub port: u16,
    /// HTTPS, if served.
    pub tls: Option<TlsConfig>,
    /// AF_XDP backend: the interface.
    pub iface: Option<String>,
    /// Userspace backends: the stack's IPv4 address and subnet.
    pub ip: Option<IpPrefix>,
    /// Userspace backends: the stack's IPv6 addresses (none: IPv6 off).
    pub ip6: Vec<Ip6Prefix>,
    /// Userspace backends: the default router.
    pub gateway: Option<Ipv4Addr>,
    /// Userspace backends: the IPv6 default router (none: the advertised
    /// ones).
    pub gateway6: Option<Ipv6Addr>,
    /// AF_XDP backend: NIC queues bound (≤ `shards`).
    pub queues: u16,
    /// AF_XDP backend: whether frames may span several UMEM frames
    /// (multi-buffer), for MTUs above what one holds.
    pub multi_buffer: bool,
    /// AF_XDP backend: whether the kernel is asked to finish TCP checksums
    /// (transmit metadata) where it can.
    pub tx_checksum_offload: bool,
    /// AF_XDP backend: whether a busy-polling shard also busy-polls the
    /// driver (`SO_PREFER_BUSY_POLL`).
    pub prefer_busy_poll: bool,
    /// TAP backend: the device's name.
    pub tap_name: String,
    /// Shard loops, one per core.
    pub shards: usize,
    /// How each shard loop runs: batch, adaptivity, busy-poll, coalescing.
    pub runtime: LoopConfig,
    /// Userspace backends: what the stack recycles.
    pub recycle: Recycling,
    /// Whether frames (userspace backends) or new connections (kernel
    /// backend, by `SO_REUSEPORT`) are steered to a shard of their own.
    pub steering: Steering,
    /// Static files' directory.
    pub root: Option<PathBuf>,
    /// Largest `/bytes/{n}`.
    pub max_bytes: u64,
    /// Largest request body.
    pub max_body: u64,
    /// Largest request head.
    pub max_head: usize,
    /// Longest request line.
    pub max_request_line: usize,
    /// Time allowed for a request head.
    pub header_timeout: Duration,
    /// The largest request body a handler gathers whole.
    pub max_collect: usize,
    /// Keep-alive idle timeout.
    pub idle_timeout: Duration,
    /// HTTP/2 beside HTTP/1.1 (`--no-http2` turns it off).
    pub http2: bool,
    /// The most streams an HTTP/2 client may have open on one connection.
    pub http2_max_streams: u32,
    /// Time a request body has, before what its rate earns.
    pub body_timeout: Duration,
    /// The body rate, bytes a second, that earns more time.
    pub body_min_rate: u64,
    /// Time a deferred answer may take.
    pub response_timeout: Duration,
    /// Most connections at once.
    pub max_connections: usize,
    /// Userspace backends: each connection's send and receive buffer, bytes.
    pub socket_buffer: usize,
    /// Userspace backends: the TCP user timeout.
    pub tcp_user_timeout: Duration,
    /// Userspace backends: how long TIME-WAIT lasts.
    pub time_wait: Duration,
    /// Userspace backends: RFC 5961 challenge ACKs per second per shard.
    pub challenge_acks: u32,
    /// Userspace backends: the per-connection interval between ACKs that
    /// answer unacceptable segments without data.
    pub invalid_ack_interval: Duration,
    /// Userspace backends: how connections to known paths start.
    pub fast_start: FastStart,
    /// Userspace backends: the initial window, segments.
    pub initial_window: u32,
    /// Graceful shutdown deadline.
    pub shutdown_grace: Duration,
    /// The tracing filter.
    pub log: String,
    /// The fairness policy.
    pub fairness: Fairness,
    /// The capacity it shares, if configured.
    pub capacity: Option<Bandwidth>,
    /// Each client's weight in the shares.
    pub weights: ClientWeights,
    /// The reverse proxy's upstreams and routes, if any.
    pub proxy: Option<std::sync::Arc<ProxyConfig>>,
}

impl Config {
    /// The HTTP layer's settings: the limits and timeouts above, the
    /// `Server` name and the default output window.
    #[must_use]
    pub fn http(&self) -> HttpConfig {
        HttpConfig {
            max_request_line: self.max_request_line,
            max_head: self.max_head,
            max_body: self.max_body,
            max_bytes: self.max_bytes,
            header_timeout: self.header_timeout,
            idle_timeout: self.idle_timeout,
            response_timeout: self.response_timeout,
            body_timeout: self.body_timeout,
            body_min_rate: self.body_min_rate,
            max_collect: self.max_collect,
            http2: self.http2,
            http2_max_streams: self.http2_max_streams,
            ..HttpConfig::default()
        }
    }

    /// Every setting at its default: the kernel backend on 127.0.0.1:8080,
    /// one shard per core, the built-in endpoints' limits.
    ///
    /// # Panics
    ///
    /// Never: the defaults are valid.
    #[must_use]
    pub fn defaults() -> Config {
        Options::default().resolve(None).expect("the defaults are a valid configuration")
    }

    /// The configuration from the process's arguments and `RUST_LOG`.
    ///
    /// # Errors
    ///
    /// See [`ConfigError`]; [`ConfigError::exit`] reports it.
    pub fn from_env() -> Result<Config, ConfigError> {
        Config::load(std::env::args_os(), std::env::var("RUST_LOG").ok().as_deref())
    }

    /// The configuration from `args` (the program name first), the file
    /// they name with `--config`, and `rust_log` (the log filter used when
    /// neither sets `log`).
    ///
    /// # Errors
    ///
    /// See [`ConfigError`].
    pub fn load<I, T>(args: I, rust_log: Option<&str>) -> Result<Config, ConfigError>
    where
        I: IntoIterator<Item = T>,
        T: Into<std::ffi::OsString> + Clone,
    {
        let matches = Options::command().try_get_matches_from(args)?;
        let cli = Options::from_arg_matches(&matches)?;
        let file = match &cli.config {
            Some(path) => read_file(path)?,
            None => Options::default(),
        };
        cli.or(file).resolve(rust_log)
    }
}

/// Reads and parses a `--config` file.
fn read_file(path: &Path) -> Result<Options, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read { path: path.to_owned(), source })?;
    parse_file(path, &text)
}

/// Parses the text of the `--config` file at `path`.
fn parse_file(path: &Path, text: &str) -> Result<Options, ConfigError> {
    toml::from_str(text).map_err(|e| ConfigError::File {
        path: path.to_owned(),
        line: e.span().map_or(1, |s| text[..s.start.min(text.len())].matches('\n').count() + 1),
        message: e.message().trim().replace('\n', " "),
    })
}

/// For the fuzz targets (feature `fuzzing`): `text` as a config file's,
/// resolved with no flags on the command line.
///
/// # Errors
///
/// As [`Config::load`] with `--config` naming a file that holds `text`.
#[cfg(feature = "fuzzing")]
#[doc(hidden)]
pub fn from_file_text(text: &str) -> Result<Config, ConfigError> {
    parse_file(Path::new("fuzz.toml"), text)?.resolve(None)
}

fn invalid(message: impl Into<String>) -> ConfigError {
    ConfigError::Invalid(message.into())
}

/// At least one, or an error naming `--flag`.
fn at_least_one<T: PartialEq + Default>(value: T, flag: &str) -> Result<T, ConfigError> {
    if value == T::default() { Err(invalid(format!("--{flag} must be at least 1"))) } else { Ok(value) }
}

fn size(value: Option<ByteSize>, default: u64, flag: &str) -> Result<u64, ConfigError> {
    at_least_one(value.map_or(default, |b| b.0), flag)
}

/// The smallest `--socket-buffer`: room for a few full segments.
const MIN_SOCKET_BUFFER: usize = 16 << 10;
/// The largest `--socket-buffer` (window scaling reaches 1 GiB; this is
/// plenty for 1 Gbit/s at 500 ms).
const MAX_SOCKET_BUFFER: usize = 256 << 20;

fn usize_size(value: Option<ByteSize>, default: usize, flag: &str) -> Result<usize, ConfigError> {
    let v = size(value, default as u64, flag)?;
    usize::try_from(v).map_err(|_| invalid(format!("--{flag} {v} is too large")))
}

fn span(value: Option<Span>, default: Duration, flag: &str) -> Result<Duration, ConfigError> {
    let d = value.map_or(default, |s| s.0);
    if d.is_zero() { Err(invalid(format!("--{flag} must be more than 0"))) } else { Ok(d) }
}

impl Options {
    fn resolve(self, rust_log: Option<&str>) -> Result<Config, ConfigError> {
        let backend = self.backend.unwrap_or_default();
        let shards = at_least_one(
            self.shards.unwrap_or_else(|| std::thread::available_parallelism().map_or(1, usize::from)),
            "shards",
        )?;
        let queues = at_least_one(self.queues.unwrap_or(1), "queues")?;
        if usize::from(queues) > shards {
            return Err(invalid(format!("--queues {queues} is more than --shards {shards}: each queue needs a shard")));
        }
        let (mut ip, mut ip6) = (None, Vec::new());
        for prefix in &self.ip {
            match *prefix {
                AnyPrefix::V4(p) if ip.is_some() => {
                    return Err(invalid(format!("--ip {p}: one IPv4 address at most (IPv6 ones may be several)")));
                }
                AnyPrefix::V4(p) => ip = Some(p),
                AnyPrefix::V6(p) if p.addr.is_multicast() || p.addr.is_unspecified() || p.addr.is_loopback() => {
                    return Err(invalid(format!("--ip {p}: not an address an interface can have")));
                }
                AnyPrefix::V6(p) => ip6.push(p),
            }
        }
        match backend {
            Backend::Afxdp if self.iface.is_none() => {
                return Err(invalid("--backend afxdp needs --iface (the interface to bind)"));
            }
            Backend::Afxdp | Backend::Tap if ip.is_none() => {
                let beside = if ip6.is_empty() { "" } else { " beside the IPv6 ones: TCP runs over IPv4 so far" };
                return Err(invalid(format!(
                    "--backend {backend} needs --ip ADDR/PREFIX (the stack's own IPv4 address){beside}"
                )));
            }
            _ => {}
        }
        let (mut gateway, mut gateway6) = (None, None);
        for &router in &self.gateway {
            match router {
                std::net::IpAddr::V4(router) if gateway.replace(router).is_some() => {
                    return Err(invalid(format!("--gateway {router}: one IPv4 gateway at most")));
                }
                std::net::IpAddr::V6(router) if gateway6.replace(router).is_some() => {
                    return Err(invalid(format!("--gateway {router}: one IPv6 gateway at most")));
                }
                _ => {}
            }
        }
        if let Some(gateway) = gateway {
            match ip {
                Some(ip) if !ip.contains(gateway) || ip.addr == gateway => {
                    return Err(invalid(format!("--gateway {gateway} is not another address on --ip {ip}'s subnet")));
                }
                None => return Err(invalid("--gateway needs --ip ADDR/PREFIX")),
                Some(_) => {}
            }
        }
        if let Some(router) = gateway6 {
            let reachable =
                router.is_unicast_link_local() || ip6.iter().any(|p| p.contains(router) && p.addr != router);
            if ip6.is_empty() {
                return Err(invalid(format!("--gateway {router} needs an IPv6 --ip ADDR/PREFIX")));
            }
            if !reachable || router.is_multicast() {
                return Err(invalid(format!(
                    "--gateway {router} is neither link-local nor another address on an IPv6 --ip prefix"
                )));
            }
        }
        if let Some(root) = &self.root
            && !root.is_dir()
        {
            return Err(invalid(format!("--root {}: not a directory", root.display())));
        }
        let max_head = usize_size(self.max_head, 16 << 10, "max-head")?;
        let max_request_line = usize_size(self.max_request_line, 8 << 10, "max-request-line")?;
        if max_request_line > max_head {
            return Err(invalid(format!(
                "--max-request-line {max_request_line} is more than --max-head {max_head}, which includes it"
            )));
        }
        let log = self.log.or_else(|| rust_log.map(str::to_owned)).unwrap_or_else(|| "info".to_owned());
        if let Err(e) = tracing_subscriber::EnvFilter::try_new(&log) {
            return Err(invalid(format!("--log '{log}': {e}")));
        }
        if self.capacity.is_some_and(|c| c.bits_per_sec == 0) {
            return Err(invalid("--capacity must be more than 0"));
        }
        let socket_buffer = usize_size(self.socket_buffer, 1 << 20, "socket-buffer")?;
        if !(MIN_SOCKET_BUFFER..=MAX_SOCKET_BUFFER).contains(&socket_buffer) {
            return Err(invalid(format!(
                "--socket-buffer {socket_buffer} is outside {}KiB..{}MiB",
                MIN_SOCKET_BUFFER >> 10,
                MAX_SOCKET_BUFFER >> 20
            )));
        }
        let listen = self.listen.unwrap_or(SocketAddr::from(([127, 0, 0, 1], 8080)));
        let port = self.port.unwrap_or(80);
        let tls = match (self.tls_cert, self.tls_key) {
            (Some(cert), Some(key)) => {
                let tls_port = self.tls_port.unwrap_or(443);
                let tls_listen = self.tls_listen.unwrap_or(SocketAddr::new(listen.ip(), 8443));
                if backend == Backend::Kernel
                    && !self.tls_only
                    && tls_listen.port() == listen.port()
                    && listen.port() != 0
                {
                    return Err(invalid(format!("--tls-listen {tls_listen} is --listen too: give HTTPS its own port")));
                }
                if backend != Backend::Kernel && !self.tls_only && tls_port == port {
                    return Err(invalid(format!("--tls-port {tls_port} is --port too: give HTTPS its own port")));
                }
                let handshake_timeout = span(self.handshake_timeout, HANDSHAKE_TIMEOUT, "handshake-timeout")?;
                Some(TlsConfig {
                    cert,
                    key,
                    port: tls_port,
                    listen: tls_listen,
                    only: self.tls_only,
                    handshake_timeout,
                })
            }
            (None, None)
                if self.tls_only
                    || self.tls_port.is_some()
                    || self.tls_listen.is_some()
                    || self.handshake_timeout.is_some() =>
            {
                return Err(invalid(
                    "--tls-only, --tls-port, --tls-listen and --handshake-timeout need --tls-cert and --tls-key",
                ));
            }
            (Some(_), None) => return Err(invalid("--tls-cert needs --tls-key")),
            (None, Some(_)) => return Err(invalid("--tls-key needs --tls-cert")),
            (None, None) => None,
        };
        let response_timeout = span(self.response_timeout, Duration::from_secs(30), "response-timeout")?;
        let looked = match &self.config {
            Some(file) => format!("the --route flags or {}'s [[route]] tables", file.display()),
            None => "the --route flags (and no --config file)".to_owned(),
        };
        let proxy = upstreams::resolve(self.upstream, self.route, response_timeout, &looked).map_err(invalid)?;
        let recycle = match (self.recycle, self.no_recycle) {
            (Some(_), Some(_)) => return Err(invalid("--recycle and --no-recycle: give one of them")),
            (Some(on), None) => on,
            (None, Some(off)) => off.complement(),
            (None, None) => Recycling::ALL,
        };
        let steering = self.steering.unwrap_or_default();
        if steering == Steering::Off && queues > 1 && proxy.is_some() {
            return Err(invalid(
                "--steering off with several --queues leaves --upstream's replies on any shard: use software",
            ));
        }
        let defaults = LoopConfig::default();
        Ok(Config {
            backend,
            listen,
            port,
            tls,
            iface: self.iface,
            ip,
            ip6,
            gateway,
            gateway6,
            queues,
            multi_buffer: !self.no_multi_buffer,
            tx_checksum_offload: !self.no_tx_checksum_offload,
            prefer_busy_poll: self.prefer_busy_poll,
            tap_name: self.tap_name.unwrap_or_else(|| "fwtap0".to_owned()),
            shards,
            runtime: LoopConfig {
                batch: at_least_one(self.batch.unwrap_or(defaults.batch), "batch")?,
                adaptive_batch: !self.no_adaptive_batch,
                // Kernel sockets are fed by the kernel's own interrupts and
                // softirqs: spinning on epoll there buys no throughput, and
                // even the adaptive window, which costs nothing at 5 and
                // 15 k req/s, serves 23 % fewer keep-alive requests per
                // CPU-second under wrk (the receive-path ablation of
                // 2026-12-03), so it is off unless asked for.
                busy_poll: self.busy_poll_us.map_or(
                    if backend == Backend::Kernel { Duration::ZERO } else { defaults.busy_poll },
                    Duration::from_micros,
                ),
                adaptive_busy_poll: !self.no_adaptive_busy_poll,
                latency: self.latency,
                itr: self.itr_us.map_or(defaults.itr, Duration::from_micros),
                max_sleep: defaults.max_sleep,
            },
            recycle,
            steering,
            root: self.root,
            max_bytes: size(self.max_bytes, 1 << 30, "max-bytes")?,
            max_body: size(self.max_body, 64 << 20, "max-body")?,
            max_collect: usize::try_from(size(self.max_collect, 64 << 10, "max-collect")?)
                .map_err(|_| invalid("--max-collect is larger than this machine can hold"))?,
            max_head,
            max_request_line,
            header_timeout: span(self.header_timeout, Duration::from_secs(10), "header-timeout")?,
            idle_timeout: span(self.idle_timeout, Duration::from_secs(60), "idle-timeout")?,
            http2: !self.no_http2,
            http2_max_streams: at_least_one(self.http2_max_streams.unwrap_or(128), "http2-max-streams")?,
            body_timeout: span(self.body_timeout, Duration::from_secs(20), "body-timeout")?,
            body_min_rate: self.body_min_rate.map_or(500, |r| r.0),
            response_timeout,
            max_connections: at_least_one(self.max_connections.unwrap_or(10_000), "max-connections")?,
            socket_buffer,
            tcp_user_timeout: span(self.tcp_user_timeout, Duration::from_secs(300), "tcp-user-timeout")?,
            time_wait: span(self.time_wait, Duration::from_secs(60), "time-wait")?,
            challenge_acks: self.challenge_acks.unwrap_or(1000),
            invalid_ack_interval: self.invalid_ack_interval.map_or(Duration::from_millis(500), |s| s.0),
            fast_start: self.fast_start.unwrap_or_default(),
            initial_window: match self.initial_window.unwrap_or(32) {
                n @ 1..=256 => n,
                n => return Err(invalid(format!("--initial-window {n} is outside 1..256 segments"))),
            },
            shutdown_grace: self.shutdown_grace.map_or(Duration::from_secs(5), |s| s.0),
            log,
            fairness: self.fairness.unwrap_or_default(),
            capacity: self.capacity,
            weights: ClientWeights::new(self.weight).map_err(invalid)?,
            proxy: proxy.map(std::sync::Arc::new),
        })
    }
}

#[cfg(test)]
mod tests;
