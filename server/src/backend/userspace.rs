//! The userspace backend: the HTTP server on Fairway's own TCP/IP stack, over
//! AF_XDP (`--backend afxdp`) or a TAP device (`--backend tap`).
//!
//! One shard per NIC queue (`--queues`, queues `0 .. queues`), each on its
//! own thread pinned to its own core, running [`crate::runtime::run`] with
//! `config.runtime` and a host listening on `--port` (80) of `--ip`, and on
//! `--tls-port` (443) through [`Tls`] when `--tls-cert` is given. The
//! shards share a software steering [`Fabric`]: whatever queue the hardware
//! (or the veth's transmit hash) puts a frame on, it reaches the shard that
//! owns its flow by the stack's own hash, and ARP reaches every shard.
//! `--steering off` (the ablation's baseline) leaves each shard what its
//! own queue receives, as a NIC's RSS alone would: a passive connection is
//! served by the shard whose queue brought its SYN, owner or not. That
//! holds while the sender keeps a flow on one queue, which a NIC's RSS
//! does and a veth does not always (its queue follows the sender's
//! transmit hash, which Linux TCP changes on a retransmission timeout), so
//! with several queues on a veth it is a measurement, not a deployment.
//! `--recycle` without `frames` wraps each device in
//! [`FreshFrames`], which copies every frame through a buffer allocated
//! for it (the study's `sk_buff`); the rest of `--recycle` goes to the
//! stack ([`fairway_stack::Recycle`]).
//!
//! A shard needs a queue of its own to transmit on, and two AF_XDP sockets
//! cannot share a queue without sharing their UMEM, so `--shards` beyond
//! `--queues` are not started (with a warning); add queues to use more
//! cores (`ethtool -L IF combined N`).
//!
//! The stack's MAC address: over AF_XDP, the interface's own (asked of the
//! kernel from the shard's network namespace); over TAP, `02:02` followed by
//! the four bytes of `--ip` (locally administered), since the TAP's own
//! address belongs to the kernel side, which may bridge it.
//!
//! `--fairness`, `--capacity` and `--weight` apply: each shard runs the
//! policy over its connections through the stack's own window-control
//! hooks, each flow weighted as its client is, a configured capacity
//! divided among the shards by their active flows' weights
//! ([`WindowControl`]).
//!
//! Stopping: once `stop` is raised every shard stops accepting, finishes the
//! responses in flight and closes its idle connections (see [`HttpApp`]),
//! within `config.shutdown_grace`; then the devices are dropped, which
//! detaches the XDP program.

mod app;
mod fairness;
mod transport;

use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use fairway_nic::fresh_frames::FreshFrames;
use fairway_nic::steering::{Fabric, Steered};
use fairway_nic::{Device, Wait};
use fairway_stack::ETHERNET_HEADER_LEN;
use fairway_stack::Shard;
use fairway_stack::steering::Steering;

pub use app::HttpApp;
pub use fairness::{SENSE_INTERVAL, StackFlowState, WindowControl};

use super::connection_limit::ConnectionLimit;
use super::fairness::{ShareBoard, policy_for};
use super::{Application, ShardService, report};
pub use super::{Running, ShardReport};

use crate::config::{Backend, Config, FastStart, IpPrefix, Steering as SteeringMode};
use crate::host::wake::WakeQueue;
use crate::host::{Beneath, Host, Service, Transport, Windows};
use crate::http::h2::AutoService;
use crate::metrics::MetricsHub;
use crate::rt::{AsyncService, Shared};
use crate::runtime::AsShard;
use crate::runtime::shards::spawn_async_with;
use crate::site::ShardSite;
use crate::tls::Tls;

/// Frames each shard's steering inbox holds.
const STEERING_DEPTH: usize = 1024;
/// The largest IP MTU the stack uses, whatever the interface allows (jumbo
/// frames); the steering buffers are sized for the interface's, up to it.
const MAX_MTU: usize = 9000;
/// The MTU assumed for an interface whose own cannot be read (a TAP that
/// does not exist yet is made with this one).
const DEFAULT_MTU: usize = 1500;
/// UMEM frames of this size hold a frame of the default MTU whole; larger
/// MTUs take 4096-byte ones, so that a jumbo frame is three parts, not six.
#[cfg(all(target_os = "linux", feature = "afxdp"))]
const SMALL_UMEM_FRAME: u32 = 2048;
#[cfg(all(target_os = "linux", feature = "afxdp"))]
const LARGE_UMEM_FRAME: u32 = 4096;
/// What a UMEM frame holds of a received frame: its size less the kernel's
/// 256-byte XDP headroom.
#[cfg(all(target_os = "linux", feature = "afxdp"))]
const XDP_HEADROOM: usize = 256;
/// Connections whose RTT and window `/metrics` shows, per shard.
const MAX_FLOWS: usize = 64;

/// Serves HTTP on the userspace stack as `config` says, until `stop` is
/// raised and the shards have drained (at most `config.shutdown_grace`
/// later).
///
/// # Errors
///
/// A configuration that is not for a userspace backend, a device that
/// cannot be opened (the AF_XDP or TAP error's own one-line message), a
/// `--root` that cannot be opened, or a shard loop that failed.
pub fn serve(config: &Config, stop: Arc<AtomicBool>) -> io::Result<()> {
    start(config, stop)?.wait().map(|_| ())
}

/// Starts the shards [`serve`] runs, from the calling thread (whose network
/// namespace the shard threads inherit), and returns at once.
///
/// # Errors
///
/// As [`serve`], for what fails before any shard runs.
pub fn start(config: &Config, stop: Arc<AtomicBool>) -> io::Result<Running> {
    start_app(config, stop, &Application::Builtin)
}

/// [`start`] with `app` on every shard.
///
/// # Errors
///
/// As [`serve`], for what fails before any shard runs.
pub fn start_app(config: &Config, stop: Arc<AtomicBool>, app: &Application) -> io::Result<Running> {
    let ip = config.ip.ok_or_else(|| {
        io::Error::new(io::ErrorKind::InvalidInput, format!("--backend {} needs --ip ADDR/PREFIX", config.backend))
    })?;
    let count = config.queues.max(1);
    if config.shards > usize::from(count) {
        tracing::warn!(
            "running {count} shard(s), one per queue, not --shards {}: a shard needs a queue to send on \
             (add queues with --queues, and to the NIC with `ethtool -L IF combined N`)",
            config.shards
        );
    }
    if config.steering == SteeringMode::Off && count > 1 {
        tracing::warn!(
            "--steering off with {count} queues: each shard serves what its own queue brings, so a flow the \
             sender moves to another queue (a veth does after a retransmission timeout) is lost; for measurement"
        );
    }
    match config.backend {
        Backend::Afxdp => start_afxdp(config, ip, count, stop, app),
        Backend::Tap => start_tap(config, ip, count, stop, app),
        Backend::Kernel => Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            "the kernel backend does not run on the userspace stack (use --backend afxdp or tap)",
        )),
    }
}

#[cfg(all(target_os = "linux", feature = "afxdp"))]
fn start_afxdp(
    config: &Config,
    ip: IpPrefix,
    count: u16,
    stop: Arc<AtomicBool>,
    app: &Application,
) -> io::Result<Running> {
    use fairway_nic::afxdp::{AfXdp, AfXdpConfig, KernelBusyPoll};

    let iface = config
        .iface
        .clone()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "--backend afxdp needs --iface"))?;
    let frame_len = largest_frame(&iface);
    // A frame of the interface's MTU in one UMEM frame if 2048 bytes hold
    // it; in as few parts as 4096-byte ones allow otherwise.
    let frame_size =
        if frame_len <= SMALL_UMEM_FRAME as usize - XDP_HEADROOM { SMALL_UMEM_FRAME } else { LARGE_UMEM_FRAME };
    let (multi_buffer, tx_checksum_offload) = (config.multi_buffer, config.tx_checksum_offload);
    let kernel_busy_poll = config.prefer_busy_poll.then(|| KernelBusyPoll {
        timeout: config.runtime.busy_poll,
        budget: u16::try_from(config.runtime.batch).unwrap_or(u16::MAX),
    });
    start_shards(config, ip, count, frame_len, stop, app, move |index| {
        let afxdp = AfXdpConfig {
            frame_size,
            multi_buffer,
            kernel_busy_poll,
            tx_checksum_offload,
            ..AfXdpConfig::new(iface.as_str(), u32::from(index))
        };
        let mut device = AfXdp::open(&afxdp).map_err(|e| io::Error::other(e.to_string()))?;
        // Asked here to say it; asked again (the same answer) where the
        // shard is configured to match.
        let offloaded = tx_checksum_offload && device.offload_tx_checksums();
        for warning in device.warnings() {
            tracing::warn!(shard = index, "{warning}");
        }
        let mac = fairway_nic::interface::mac_address(&iface)
            .map_err(|e| io::Error::new(e.kind(), format!("reading the MAC address of {iface}: {e}")))?;
        tracing::info!(
            shard = index,
            "AF_XDP on {iface} queue {index} ({} bind, {} XDP, frames up to {} bytes{}, TCP checksums {})",
            device.bind_mode(),
            device.xdp_mode(),
            device.max_frame_len(),
            if device.multi_buffer() { " in several UMEM frames" } else { "" },
            if offloaded { "finished by the kernel" } else { "computed here" }
        );
        Ok((device, mac))
    })
}

#[cfg(not(all(target_os = "linux", feature = "afxdp")))]
fn start_afxdp(_: &Config, _: IpPrefix, _: u16, _: Arc<AtomicBool>, _: &Application) -> io::Result<Running> {
    Err(io::Error::new(
        io::ErrorKind::Unsupported,
        "this fairway was built without AF_XDP support: rebuild with --features afxdp, or use --backend tap or kernel",
    ))
}

#[cfg(target_os = "linux")]
fn start_tap(
    config: &Config,
    ip: IpPrefix,
    count: u16,
    stop: Arc<AtomicBool>,
    app: &Application,
) -> io::Result<Running> {
    use fairway_nic::tap::{Tap, TapConfig};

    let name = config.tap_name.clone();
    let mac = tap_stack_mac(ip);
    let frame_len = largest_frame(&name);
    start_shards(config, ip, count, frame_len, stop, app, move |index| {
        let tap = Tap::open_with(&TapConfig::new(name.as_str()).with_multi_queue(count > 1))
            .map_err(|e| io::Error::other(e.to_string()))?;
        tracing::info!(shard = index, "TAP {} (queue {index} of {count})", tap.name());
        Ok((tap, mac))
    })
}

#[cfg(not(target_os = "linux"))]
fn start_tap(_: &Config, _: IpPrefix, _: u16, _: Arc<AtomicBool>, _: &Application) -> io::Result<Running> {
    Err(io::Error::new(io::ErrorKind::Unsupported, "TAP devices need Linux: use --backend kernel"))
}

/// The stack's own MAC address behind a TAP: `02:02` and the IPv4 address.
#[must_use]
pub fn tap_stack_mac(ip: IpPrefix) -> [u8; 6] {
    let [a, b, c, d] = ip.addr.octets();
    [0x02, 0x02, a, b, c, d]
}

/// The longest frame the stack sends or receives on interface `name`: its
/// MTU (up to [`MAX_MTU`]) and the Ethernet header.
fn largest_frame(name: &str) -> usize {
    fairway_nic::interface::mtu(name).unwrap_or(DEFAULT_MTU).clamp(576, MAX_MTU) + ETHERNET_HEADER_LEN
}

/// The stack configuration of shard `index` of `count`.
fn stack_config(
    config: &Config,
    ip: IpPrefix,
    mac: [u8; 6],
    max_frame_len: usize,
    index: u16,
    count: u16,
) -> fairway_stack::Config {
    let mut stack = fairway_stack::Config::new(mac, ip.addr, ip.prefix);
    stack.gateway = config.gateway;
    stack.mtu = max_frame_len.saturating_sub(ETHERNET_HEADER_LEN).clamp(576, MAX_MTU);
    stack.tcp.rx_buffer = config.socket_buffer;
    stack.tcp.tx_buffer = config.socket_buffer;
    stack.tcp.user_timeout = config.tcp_user_timeout.into();
    stack.tcp.time_wait = config.time_wait.into();
    stack.tcp.challenge_acks_per_sec = config.challenge_acks;
    stack.tcp.invalid_ack_interval = config.invalid_ack_interval.into();
    stack.tcp.initial_window = config.initial_window;
    stack.tcp.fast_start = match config.fast_start {
        FastStart::Off => fairway_stack::FastStart::Off,
        FastStart::PathMemory => fairway_stack::FastStart::PathMemory,
        FastStart::CarefulResume => fairway_stack::FastStart::CarefulResume,
    };
    stack.secret = random_secret();
    stack.recycle = config.recycle.stack();
    stack.steering = (count > 1).then_some(Steering { index, count });
    // IPv6 is on when an address is given: every shard answers for it
    // (ping, Neighbor Discovery), each after its own duplicate detection.
    stack.ipv6 = (!config.ip6.is_empty()).then(|| fairway_stack::Ipv6Config {
        gateway: config.gateway6,
        ..fairway_stack::Ipv6Config::new(config.ip6.iter().map(|p| (p.addr, p.prefix)).collect())
    });
    stack
}

/// A secret for SYN cookies and initial sequence numbers that another
/// process cannot guess: the standard library's per-process random hash
/// keys.
fn random_secret() -> u128 {
    use std::hash::{BuildHasher, Hasher};
    let word = || std::collections::hash_map::RandomState::new().build_hasher().finish();
    u128::from(word()) << 64 | u128::from(word())
}

/// What a userspace shard's application is made with, on its thread.
pub(crate) struct UserspaceParts {
    /// The shard's stack.
    pub shard: Shard,
    /// What its connections share.
    pub site: ShardSite,
    pub limit: Arc<ConnectionLimit>,
    pub stop: Arc<AtomicBool>,
    /// The shard's wake-up queue, notified through its steering eventfd.
    pub wakes: Arc<WakeQueue>,
    /// Window control over its connections.
    pub window: WindowControl,
    /// The steering fabric (its counters reach the metrics) and the index.
    pub fabric: Arc<Fabric>,
    pub index: u16,
}

/// Starts `count` shards running `app`; `open(index)` runs on shard
/// `index`'s thread and opens its device and says the stack's MAC.
fn start_shards<D, O>(
    config: &Config,
    ip: IpPrefix,
    count: u16,
    frame_len: usize,
    stop: Arc<AtomicBool>,
    app: &Application,
    open: O,
) -> io::Result<Running>
where
    D: Device + Wait + AsRawFd + 'static,
    O: Fn(u16) -> io::Result<(D, [u8; 6])> + Send + Sync + 'static,
{
    let (http, grace) = (config.http(), config.shutdown_grace);
    // TLS handshakes: how long each may take, and how many one shard lets
    // be in progress at once.
    let handshakes = (
        config.tls.as_ref().map_or(crate::config::HANDSHAKE_TIMEOUT, |t| t.handshake_timeout),
        crate::tls::handshake_share(config, usize::from(count)),
    );
    let (ports, tls_ports) = config.ports();
    let running = match (app.service(config)?, crate::tls::keys_for(config)?) {
        (ShardService::Http(make), None) => {
            spawn_all(config, ip, count, frame_len, stop, open, move |p: UserspaceParts| {
                let shard = Shared::new(p.shard);
                let service = AutoService::new(http.clone(), make(), &shard, Arc::clone(&p.wakes));
                let host = Host::with_service(service, p.site, p.limit, p.stop, grace, p.wakes)
                    .with_ports(&ports)
                    .with_steering(p.fabric, p.index)
                    .with_window_control(Beneath(p.window));
                (shard, host)
            })?
        }
        (ShardService::Http(make), Some(keys)) => {
            let shard_keys = Arc::clone(&keys);
            spawn_all(config, ip, count, frame_len, stop, open, move |p: UserspaceParts| {
                let shard = Shared::new(
                    Tls::new(p.shard, Arc::clone(&shard_keys), &tls_ports)
                        .with_handshake_limits(handshakes.0, handshakes.1),
                );
                let service = AutoService::new(http.clone(), make(), &shard, Arc::clone(&p.wakes));
                let host = Host::with_service(service, p.site, p.limit, p.stop, grace, p.wakes)
                    .with_ports(&ports)
                    .with_steering(p.fabric, p.index)
                    .with_window_control(Beneath(Beneath(p.window)));
                (shard, host)
            })?
            .with_tls(keys)
        }
        (ShardService::Async(make), None) => {
            spawn_all(config, ip, count, frame_len, stop, open, move |p: UserspaceParts| {
                let shard = Shared::new(p.shard);
                let service = AsyncService::new(&shard, &http, make());
                let host = Host::with_service(service, p.site, p.limit, p.stop, grace, p.wakes)
                    .with_ports(&ports)
                    .with_steering(p.fabric, p.index)
                    .with_window_control(Beneath(p.window));
                (shard, host)
            })?
        }
        (ShardService::Async(make), Some(keys)) => {
            let shard_keys = Arc::clone(&keys);
            spawn_all(config, ip, count, frame_len, stop, open, move |p: UserspaceParts| {
                let shard = Shared::new(
                    Tls::new(p.shard, Arc::clone(&shard_keys), &tls_ports)
                        .with_handshake_limits(handshakes.0, handshakes.1),
                );
                let service = AsyncService::new(&shard, &http, make());
                let host = Host::with_service(service, p.site, p.limit, p.stop, grace, p.wakes)
                    .with_ports(&ports)
                    .with_steering(p.fabric, p.index)
                    .with_window_control(Beneath(Beneath(p.window)));
                (shard, host)
            })?
            .with_tls(keys)
        }
    };
    Ok(running)
}

/// Starts `count` shards, each running the host `make` builds on its
/// thread over transport `T` (the shard, or the shard shared with tasks);
/// no device carries frames longer than `frame_len`.
fn spawn_all<D, O, T, S, W, F>(
    config: &Config,
    ip: IpPrefix,
    count: u16,
    frame_len: usize,
    stop: Arc<AtomicBool>,
    open: O,
    make: F,
) -> io::Result<Running>
where
    D: Device + Wait + AsRawFd + 'static,
    O: Fn(u16) -> io::Result<(D, [u8; 6])> + Send + Sync + 'static,
    T: Transport<Event = fairway_stack::Event> + AsShard + 'static,
    S: Service<T> + 'static,
    W: Windows<T> + 'static,
    F: Fn(UserspaceParts) -> (T, Host<T, S, W>) + Send + Sync + 'static,
{
    let policy = policy_for(config.fairness);
    let capacity = config.capacity.map(|c| c.bits_per_sec);
    let hub =
        Arc::new(MetricsHub::new(count, MAX_FLOWS, &config.backend.to_string()).with_fairness(policy.name(), capacity));
    let board = Arc::new(ShareBoard::new(usize::from(count)));
    let limit = Arc::new(ConnectionLimit::new(config.max_connections));
    let fabric = Fabric::new(usize::from(count), STEERING_DEPTH, frame_len)?;
    // Raised only when a shard fails, to stop the others at once; `stop`
    // itself is the hosts' business (they drain, then finish).
    let halt = Arc::new(AtomicBool::new(false));
    let (open, make) = (Arc::new(open), Arc::new(make));
    let mut handles = Vec::with_capacity(usize::from(count));
    for index in 0..count {
        let (cfg, open, make, fabric) = (config.clone(), Arc::clone(&open), Arc::clone(&make), Arc::clone(&fabric));
        let (shard_hub, limit, stop) = (Arc::clone(&hub), Arc::clone(&limit), Arc::clone(&stop));
        let window = WindowControl::new(policy.clone(), capacity, Arc::clone(&board), index)
            .with_weights(config.weights.clone());
        let build = move || {
            let (device, mac) = open(index)?;
            // --recycle without frames: a buffer allocated per frame;
            // --steering off: each shard keeps what its queue brings.
            let device = FreshFrames::new(device, cfg.recycle.frames);
            let mut device = Steered::new(device, Arc::clone(&fabric), index);
            if cfg.steering == SteeringMode::Off {
                device = device.without_steering();
            }
            let mut stack = stack_config(&cfg, ip, mac, device.max_frame_len(), index, count);
            // The device finishes TCP checksums (AF_XDP's transmit metadata):
            // the shard leaves them partial and copies payloads unsummed.
            stack.tx_checksum_offload = device.offload_tx_checksums();
            let shard = Shard::new(stack);
            let site = ShardSite::new(index, shard_hub, cfg.root.as_deref(), MAX_FLOWS)?;
            let site = if cfg.proxy.is_some() { site.with_outbound_links()? } else { site };
            if let Some(fd) = site.outbound_fd() {
                device.also_wake_on(fd);
            }
            let notify = Arc::clone(&fabric);
            let wakes = WakeQueue::new(Some(Box::new(move || notify.wake(index))));
            let (transport, host) = make(UserspaceParts { shard, site, limit, stop, wakes, window, fabric, index });
            Ok((transport, device, host))
        };
        match spawn_async_with(index, true, config.runtime, Arc::clone(&halt), build, report) {
            Ok(handle) => handles.push(handle),
            Err(e) => {
                halt.store(true, Ordering::Relaxed);
                let _ = Running::new(handles, halt, hub, None).wait();
                return Err(e);
            }
        }
    }
    let (ports, tls_ports) = config.ports();
    for &port in &ports {
        let scheme = if tls_ports.contains(&port) { "HTTPS" } else { "HTTP" };
        let ipv6: String = config.ip6.iter().map(|p| format!(" and [{}]:{port}", p.addr)).collect();
        tracing::info!("serving {scheme} on {}:{port}{ipv6} with {count} shard(s) over {}", ip.addr, config.backend);
    }
    // The plain port's address (the TLS one's with --tls-only), and the TLS
    // port's, as the kernel backend reports its bound ones.
    let at = |port: u16| std::net::SocketAddr::from((ip.addr, port));
    let plain = ports.iter().copied().find(|p| !tls_ports.contains(p)).or(tls_ports.first().copied());
    let running = Running::new(handles, halt, hub, plain.map(at));
    Ok(match tls_ports.first() {
        Some(&port) => running.with_tls_addr(at(port)),
        None => running,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(flags: &[&str]) -> Config {
        Config::load(std::iter::once("fairway").chain(flags.iter().copied()), None).unwrap()
    }

    fn error(flags: &[&str]) -> String {
        let err = serve(&config(flags), Arc::new(AtomicBool::new(false))).unwrap_err().to_string();
        assert!(!err.contains('\n'), "one line: {err}");
        err
    }

    #[test]
    fn the_kernel_backend_is_not_served_here() {
        assert!(error(&["--backend", "kernel"]).contains("needs --ip"));
        assert!(error(&["--backend", "kernel", "--ip", "10.9.9.1/24"]).contains("does not run on the userspace stack"));
    }

    #[test]
    fn an_afxdp_device_that_cannot_open_says_why_in_its_own_words() {
        let err = error(&["--backend", "afxdp", "--iface", "fwnosuchif9", "--ip", "10.9.9.1/24", "--shards", "1"]);
        if cfg!(all(target_os = "linux", feature = "afxdp")) {
            assert!(err.starts_with("no network interface named \"fwnosuchif9\""), "{err}");
        } else {
            assert!(err.contains("built without AF_XDP support") && err.contains("--features afxdp"), "{err}");
        }
    }

    #[test]
    fn the_stack_behind_a_tap_has_a_mac_of_its_own() {
        let ip: IpPrefix = "10.77.0.1/24".parse().unwrap();
        assert_eq!(tap_stack_mac(ip), [0x02, 0x02, 10, 77, 0, 1]);
        let stack = stack_config(&config(&["--backend", "tap", "--ip", "10.77.0.1/24"]), ip, [2; 6], 1514, 1, 2);
        assert_eq!((stack.mtu, stack.steering), (1500, Some(Steering { index: 1, count: 2 })));
        assert_ne!(stack.secret, random_secret(), "secrets differ per call");
        assert_eq!(stack.recycle, fairway_stack::Recycle::ALL);
        let flags = ["--backend", "tap", "--ip", "10.77.0.1/24", "--no-recycle", "frames,events"];
        let stack = stack_config(&config(&flags), ip, [2; 6], 1514, 0, 1);
        assert_eq!(stack.recycle, fairway_stack::Recycle { buffers: true, handles: true, events: false });
    }
}
