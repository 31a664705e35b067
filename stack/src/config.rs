//! A shard's configuration: addresses, TCP parameters and resource limits.
//!
//! Defaults follow Linux where the RFCs leave a choice (200 ms minimum RTO,
//! 40 ms delayed ACK, 60 s TIME-WAIT, 49152–65535 for ephemeral ports).

use core::net::{Ipv4Addr, Ipv6Addr};

pub use crate::tcp::congestion::Algorithm;
pub use crate::tcp::path_cache::PathMemoryConfig;
use crate::time::Duration;

/// Everything a [`crate::Shard`] needs to know before its first frame.
#[derive(Clone, Debug)]
pub struct Config {
    /// Our Ethernet address.
    pub mac: [u8; 6],
    /// Our IPv4 address.
    pub ip: Ipv4Addr,
    /// The length of our subnet prefix (24 for a /24).
    pub prefix_len: u8,
    /// The next hop for destinations outside our subnet; without one they are
    /// unreachable.
    pub gateway: Option<Ipv4Addr>,
    /// The IP MTU of the link: the largest IPv4 packet we send (Ethernet
    /// header excluded). Our MSS is `mtu - 40`.
    pub mtu: usize,
    /// A secret that keys initial sequence numbers (RFC 6528) and the flow
    /// table's hash. The driver must choose it at random; tests fix it.
    pub secret: u128,
    /// TCP parameters.
    pub tcp: TcpConfig,
    /// Resource limits.
    pub limits: Limits,
    /// What the shard recycles through pools (everything, by default).
    /// Each part off is allocated and freed per use instead: the baselines
    /// of the receive-path ablation.
    pub recycle: Recycle,
    /// When several shards share one interface: this shard's place among
    /// them. `connect` then picks local ports whose flows this shard owns by
    /// [`crate::steering::owner`], so the runtime steers their frames here.
    /// `None` (the default): one shard, every port.
    pub steering: Option<crate::steering::Steering>,
    /// IPv6 beside IPv4; off (`None`) by default.
    pub ipv6: Option<Ipv6Config>,
    /// Leave TCP checksums for the device to finish: every TCP segment the
    /// shard emits carries in its checksum field only the pseudo-header
    /// sum (folded, not complemented, as Linux's `CHECKSUM_PARTIAL`), and
    /// payloads are copied into frames without being summed. Set it only
    /// when the device agreed to finish them (`Device::offload_tx_checksums`
    /// in fairway-nic; [`crate::partial_checksum`] says where). Off by
    /// default: every frame leaves complete.
    pub tx_checksum_offload: bool,
}

/// What a shard takes from pools and gives back, rather than allocating
/// and freeing per use as a conventional stack does. Each part is one of
/// the receive-path techniques of the ablation (issue 17); with a part on,
/// its switch costs nothing (the pools are what runs), and with it off the
/// counting allocator sees its allocations per connection or per event.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Recycle {
    /// Per-connection buffers: the receive and send rings, reassembly and
    /// sent-queue storage, and the shard's own control frames. Off, each
    /// is allocated when first needed and freed when let go.
    pub buffers: bool,
    /// Connection slots, whose generational handles are the stack's file
    /// descriptors (the study's `fd`). Off, a connection's state is boxed
    /// on an allocation of its own when it opens and freed when it closes;
    /// on, it lives in the slab's slot, which the next connection reuses.
    pub handles: bool,
    /// Event records (the study's `epoll_event`). Off, every event is
    /// boxed when queued and freed when the application polls it; on, the
    /// queue's ring holds them in place.
    pub events: bool,
}

impl Recycle {
    /// Everything recycled: the default.
    pub const ALL: Recycle = Recycle { buffers: true, handles: true, events: true };
    /// Nothing recycled: the conventional baseline.
    pub const NONE: Recycle = Recycle { buffers: false, handles: false, events: false };
}

impl Default for Recycle {
    fn default() -> Recycle {
        Recycle::ALL
    }
}

/// IPv6 (RFC 8200): which addresses are ours, and how they come up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Ipv6Config {
    /// Configured addresses (global or unique-local) with their prefix
    /// lengths. The link-local address formed from the MAC
    /// ([`link_local`]) is ours besides them.
    pub addresses: Vec<(Ipv6Addr, u8)>,
    /// Neighbor Solicitations sent to detect a duplicate before an address
    /// is used (RFC 4862 §5.1 `DupAddrDetectTransmits`, 1 by default); 0
    /// uses every address at once.
    pub dad_transmits: u8,
    /// The default router for off-link destinations. Without one, the
    /// routers that advertise themselves (RFC 4861 §6.3.4) are used.
    pub gateway: Option<Ipv6Addr>,
}

impl Ipv6Config {
    /// The configured `addresses`, with duplicate address detection.
    pub fn new(addresses: Vec<(Ipv6Addr, u8)>) -> Ipv6Config {
        Ipv6Config { addresses, dad_transmits: 1, gateway: None }
    }
}

/// The link-local address of an interface with Ethernet address `mac`:
/// fe80::/64 and the modified EUI-64 identifier (RFC 4291 §2.5.1 and
/// appendix A, RFC 4862 §5.3).
pub fn link_local(mac: [u8; 6]) -> Ipv6Addr {
    let [a, b, c, d, e, f] = mac;
    let id = [a ^ 0x02, b, c, 0xff, 0xfe, d, e, f];
    let mut octets = [0u8; 16];
    octets[..2].copy_from_slice(&[0xfe, 0x80]);
    octets[8..].copy_from_slice(&id);
    Ipv6Addr::from(octets)
}

/// The solicited-node multicast address of `addr` (RFC 4291 §2.7.1):
/// ff02::1:ffXX:XXXX from its last 24 bits.
pub fn solicited_node(addr: Ipv6Addr) -> Ipv6Addr {
    let o = addr.octets();
    Ipv6Addr::from([0xff, 0x02, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0xff, o[13], o[14], o[15]])
}

impl Config {
    /// A configuration with default parameters for the given addresses.
    pub fn new(mac: [u8; 6], ip: Ipv4Addr, prefix_len: u8) -> Config {
        Config {
            mac,
            ip,
            prefix_len,
            gateway: None,
            mtu: 1500,
            secret: 0x5eed_f00d_dead_beef_0123_4567_89ab_cdef,
            tcp: TcpConfig::default(),
            limits: Limits::default(),
            recycle: Recycle::ALL,
            steering: None,
            ipv6: None,
            tx_checksum_offload: false,
        }
    }

    /// The largest Ethernet frame this shard emits (header included).
    pub fn max_frame_len(&self) -> usize {
        self.mtu + crate::wire::ETHERNET_HEADER_LEN
    }

    /// The MSS we announce: the MTU minus minimal IPv4 and TCP headers.
    pub fn mss(&self) -> u16 {
        (self.mtu.saturating_sub(40)).clamp(64, u16::MAX as usize) as u16
    }
}

/// TCP parameters.
#[derive(Clone, Debug)]
pub struct TcpConfig {
    /// Receive buffer per connection, in bytes (allocated on first data).
    pub rx_buffer: usize,
    /// Send buffer per connection, in bytes (allocated on first send).
    pub tx_buffer: usize,
    /// RTO before the first RTT sample (RFC 6298: 1 s).
    pub initial_rto: Duration,
    /// The least the RTO adds to SRTT: RTO = SRTT + max(4·RTTVAR, min_rto),
    /// as Linux's rto_min (200 ms). RFC 6298 asks for an RTO of at least 1 s;
    /// this is the common deviation, and it keeps the RTO clear of the RTT on
    /// long paths too.
    pub min_rto: Duration,
    /// Upper bound of the RTO (RFC 6298: at least 60 s).
    pub max_rto: Duration,
    /// How long an ACK may be delayed; zero acknowledges every segment at once.
    pub delayed_ack: Duration,
    /// How long TIME-WAIT lasts (2·MSL).
    pub time_wait: Duration,
    /// How long a closed-by-us connection waits in FIN-WAIT-2 for the peer's FIN.
    pub fin_wait2_timeout: Duration,
    /// Abort a connection whose data stays unacknowledged this long (RFC 9293
    /// user timeout); and one the application has closed whose data has
    /// waited this long on the peer's zero window (a connection it holds
    /// stays open while the peer answers the window probes).
    pub user_timeout: Duration,
    /// SYN retransmissions before an active open gives up (6: about 127 s).
    pub syn_retries: u8,
    /// SYN-ACK retransmissions before a half-open connection is dropped (5: about 63 s).
    pub synack_retries: u8,
    /// Keep-alive probing; off by default.
    pub keepalive: Option<KeepAlive>,
    /// Coalesce small writes (Nagle's algorithm). Off by default, as servers
    /// set TCP_NODELAY.
    pub nagle: bool,
    /// Local ports used by `connect`.
    pub ephemeral_ports: (u16, u16),
    /// Challenge ACKs (RFC 5961) the shard sends per second at most.
    pub challenge_acks_per_sec: u32,
    /// On one connection, at most one ACK per this interval answers an
    /// unacceptable segment that carries no data, SYN or FIN (a stale or
    /// forged pure ACK, a keep-alive probe, an ACK of unsent data); the
    /// others are dropped unanswered and counted (`tcp_invalid_ack_limit`).
    /// Linux's `tcp_invalid_ratelimit`, with its default of 500 ms.
    pub invalid_ack_interval: Duration,
    /// The congestion-control algorithm of new connections.
    pub congestion: Algorithm,
    /// Offer and accept window scaling (RFC 7323). The shift follows the
    /// receive buffer.
    pub window_scaling: bool,
    /// Offer and accept timestamps (RFC 7323): RTT measurement and PAWS.
    pub timestamps: bool,
    /// Offer and accept selective acknowledgments (RFC 2018, RFC 6675).
    pub sack: bool,
    /// Answer SYNs with SYN cookies once a listener's SYN queue is full
    /// (RFC 4987) instead of dropping them.
    pub syn_cookies: bool,
    /// Pace transmissions over the RTT instead of sending windows in bursts.
    pub pacing: bool,
    /// Pacing rate as a multiple of cwnd / SRTT, in percent (Linux uses 200
    /// in slow start and 120 after; one gain for both keeps it simple).
    pub pacing_gain_percent: u32,
    /// Acknowledge this many segments at once at the start of a connection
    /// (quick-ACK) before delaying ACKs.
    pub quick_acks: u8,
    /// The most out-of-order blocks (runs of received bytes beyond a gap)
    /// kept per connection; each costs 8 bytes while there is out-of-order
    /// data. The limit in force is one block per KiB of receive buffer, at
    /// least 16, and at most this: enough for full-sized segments with every
    /// other one lost. Past it, the data nearest RCV.NXT wins and the rest
    /// is dropped (the peer retransmits it).
    pub reassembly_blocks: usize,
    /// Process the pure ACKs of one connection that arrive in one receive
    /// batch together: an ACK that a later one supersedes (the later one
    /// acknowledges more, and neither carries SACK blocks) is not processed
    /// on its own, so cwnd, the sent queue and the timers move once per
    /// batch instead of once per ACK; slow start still grows by one MSS for
    /// each. A batch ends at the next `poll_*`, `handle_timeout` or
    /// application call. On by default.
    pub coalesce_acks: bool,
    /// The initial window of new connections, in segments (RFC 6928: 10,
    /// which keeps its byte cap of 14,600). A larger one is paced over the
    /// handshake's RTT.
    pub initial_window: u32,
    /// How a new connection to a known path starts: from nothing, from the
    /// path's remembered RTT and ssthresh, or with careful resume's jump.
    pub fast_start: FastStart,
    /// The per-shard path cache behind `fast_start`.
    pub path_memory: PathMemoryConfig,
}

/// How a new connection uses what earlier ones learned about its path.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FastStart {
    /// Every connection starts from scratch: the initial window, RTO 1 s.
    #[default]
    Off,
    /// RFC 9040 temporal sharing: a connection to a recently seen path
    /// (its host, or its /64: [`PathMemoryConfig`](crate::PathMemoryConfig)) starts its RTT estimator and ssthresh from the
    /// path's; cwnd still starts at the initial window.
    PathMemory,
    /// Path memory, and careful resume (RFC 9959): once the handshake's RTT
    /// agrees with the path's, a connection jumps to half the window the
    /// path carried (bounded by its fairness share), paced over one RTT,
    /// then validates it, and retreats if the jump met loss. A connection
    /// to a path not seen before, where a fairness policy gives it a share
    /// ([`Shard::set_fast_start_share`](crate::Shard::set_fast_start_share)),
    /// jumps the same way to that share times the handshake's RTT.
    CarefulResume,
}

impl FastStart {
    /// `off`, `path-memory` or `careful-resume`.
    pub fn name(self) -> &'static str {
        match self {
            FastStart::Off => "off",
            FastStart::PathMemory => "path-memory",
            FastStart::CarefulResume => "careful-resume",
        }
    }
}

impl Default for TcpConfig {
    fn default() -> TcpConfig {
        TcpConfig {
            rx_buffer: 64 * 1024,
            tx_buffer: 64 * 1024,
            initial_rto: Duration::from_secs(1),
            min_rto: Duration::from_millis(200),
            max_rto: Duration::from_secs(60),
            delayed_ack: Duration::from_millis(40),
            time_wait: Duration::from_secs(60),
            fin_wait2_timeout: Duration::from_secs(60),
            user_timeout: Duration::from_secs(300),
            syn_retries: 6,
            synack_retries: 5,
            keepalive: None,
            nagle: false,
            ephemeral_ports: (49152, 65535),
            challenge_acks_per_sec: 1000,
            invalid_ack_interval: Duration::from_millis(500),
            congestion: Algorithm::Cubic,
            window_scaling: true,
            timestamps: true,
            sack: true,
            syn_cookies: true,
            pacing: false,
            pacing_gain_percent: 150,
            quick_acks: 16,
            reassembly_blocks: crate::tcp::assembler::DEFAULT_MAX_BLOCKS,
            coalesce_acks: true,
            initial_window: 10,
            fast_start: FastStart::Off,
            path_memory: PathMemoryConfig::default(),
        }
    }
}

/// Keep-alive parameters (RFC 9293 §3.8.4).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeepAlive {
    /// Idle time before the first probe.
    pub idle: Duration,
    /// Time between unanswered probes.
    pub interval: Duration,
    /// Unanswered probes before the connection is dropped.
    pub probes: u8,
}

impl Default for KeepAlive {
    fn default() -> KeepAlive {
        KeepAlive { idle: Duration::from_secs(7200), interval: Duration::from_secs(75), probes: 9 }
    }
}

/// Bounds on what a shard will hold, whatever its peers send.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Connections of every state, TIME-WAIT included.
    pub max_connections: usize,
    /// Connections in TIME-WAIT; past this, a closing connection skips TIME-WAIT.
    pub max_time_wait: usize,
    /// Half-open (SYN-RECEIVED) connections per listener.
    pub syn_backlog: usize,
    /// Established connections waiting for `accept`, per listener.
    pub accept_backlog: usize,
    /// Listening sockets.
    pub max_listeners: usize,
    /// Entries in the ARP cache.
    pub arp_cache: usize,
    /// Frames held while their next hop is being resolved.
    pub arp_pending: usize,
    /// Frames (ARP replies, RSTs, ICMP) queued for transmission by the shard itself.
    pub control_queue: usize,
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_connections: 1 << 20,
            max_time_wait: 1 << 18,
            syn_backlog: 1024,
            accept_backlog: 1024,
            max_listeners: 64,
            arp_cache: 1024,
            arp_pending: 64,
            control_queue: 256,
        }
    }
}
