//! The kernel backend: HTTP over the kernel's TCP, one shard per core.
//!
//! Each shard is a thread pinned to its core running the same
//! [loop](crate::runtime) and [host](crate::host) as the userspace backends,
//! over its own mio `Poll` ([`KernelPoll`]) and its own listener on
//! `--listen` ([`KernelSockets`]); the listeners share the port through
//! `SO_REUSEPORT`, so the kernel spreads new connections over the shards by
//! their 4-tuple and a connection stays on the shard that accepted it.
//! With `--steering off` the shards instead share one listener (one accept
//! queue, each shard's epoll woken by every new connection, whichever
//! accepts first keeping it), as threads around one socket do without
//! `SO_REUSEPORT`: the ablation's conventional baseline.
//! Shards share nothing but the connection limit, the metrics hub and
//! window control's board of active weights.
//!
//! The loop's knobs apply as on the userspace backends: `--batch` bounds
//! the readiness events taken per turn (at least 256), `--itr-us`
//! coalesces wake-ups, and `--busy-poll-us` polls (`epoll_wait` without a
//! timeout) for that long before it sleeps; off by default here, where the
//! kernel's interrupts already queued the data (it cost about 4 % CPU per
//! request, measured on loopback, and bought nothing).
//!
//! `--fairness`, `--capacity` and `--weight` apply: each shard runs the
//! policy over its connections, each weighted as its client is, sensing
//! through `TCP_INFO` and acting through the window clamp and the pacing
//! limit ([`Controller`]).
//!
//! Shutdown: when the stop flag goes up, every shard takes the connections
//! the kernel has established (closing the listener would reset them),
//! closes its listener (so new connections are refused once all have),
//! closes its idle connections, lets the busy ones finish their responses,
//! and returns when they are done or `--shutdown-grace` has passed.

mod fairness;
mod sockets;
mod tcp_sockopt;

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use socket2::{Domain, Protocol, Socket, Type};
use tracing::info;

pub use fairness::{Controller, SocketFlowState};
pub use sockets::{AsSockets, KernelConn, KernelEvent, KernelListener, KernelPoll, KernelSockets};

use super::connection_limit::ConnectionLimit;
use super::fairness::{ShareBoard, policy_for};
use super::{Application, Running, ShardService, report};
use crate::config::{Config, Steering};
use crate::host::wake::WakeQueue;
use crate::host::{Beneath, Host, Service, Transport, Windows};
use crate::http::h2::AutoService;
use crate::metrics::MetricsHub;
use crate::rt::{AsyncService, Shared};
use crate::runtime::NetIo;
use crate::runtime::shards::spawn_async_with;
use crate::site::ShardSite;
use crate::tls::Tls;

/// Connections the kernel queues per listener before they are accepted.
const BACKLOG: i32 = 1024;

/// The most connections per shard listed in the per-flow metrics.
const METRICS_FLOWS: usize = 64;

/// What a kernel shard's application is made with, on the shard's thread.
pub(crate) struct KernelParts {
    /// The shard's sockets (its listener registered with its poll).
    pub sockets: KernelSockets,
    /// What its connections share.
    pub site: ShardSite,
    pub limit: Arc<ConnectionLimit>,
    pub stop: Arc<AtomicBool>,
    /// The shard's wake-up queue, notified through its poll.
    pub wakes: Arc<WakeQueue>,
    /// Window control over its connections.
    pub window: Controller,
    /// The ports its listeners are bound to, for the host.
    pub ports: Vec<u16>,
    /// Those of them that speak TLS.
    pub tls_ports: Vec<u16>,
}

/// Serves `config` on kernel sockets until `stop` is raised and the
/// connections in flight are done (or `config.shutdown_grace` has passed).
///
/// # Errors
///
/// As [`start`], or a shard's poll fails.
pub fn serve(config: &Config, stop: Arc<AtomicBool>) -> io::Result<()> {
    start(config, stop)?.wait().map(|_| ())
}

/// Binds every shard's listener and starts the shards serving the built-in
/// endpoints; logs the address it serves on once every listener is bound.
///
/// # Errors
///
/// A listener cannot be bound (address in use, permission denied), the
/// static root cannot be opened, or a thread cannot be started; each as one
/// line that says what was being done.
pub fn start(config: &Config, stop: Arc<AtomicBool>) -> io::Result<Running> {
    start_app(config, stop, &Application::Builtin)
}

/// [`start`] with `app` on every shard.
///
/// # Errors
///
/// As [`start`].
pub fn start_app(config: &Config, stop: Arc<AtomicBool>, app: &Application) -> io::Result<Running> {
    let (http, grace) = (config.http(), config.shutdown_grace);
    // TLS handshakes: how long each may take, and how many one shard lets
    // be in progress at once.
    let handshakes = (
        config.tls.as_ref().map_or(crate::config::HANDSHAKE_TIMEOUT, |t| t.handshake_timeout),
        crate::tls::handshake_share(config, config.shards),
    );
    match (app.service(config)?, crate::tls::keys_for(config)?) {
        (ShardService::Http(make), None) => start_with(config, stop, move |p: KernelParts| {
            let sockets = Shared::new(p.sockets);
            let service = AutoService::new(http.clone(), make(), &sockets, Arc::clone(&p.wakes));
            let host = Host::with_service(service, p.site, p.limit, p.stop, grace, p.wakes)
                .with_ports(&p.ports)
                .with_window_control(Beneath(p.window));
            (sockets, host)
        }),
        (ShardService::Http(make), Some(keys)) => {
            let shard_keys = Arc::clone(&keys);
            let running = start_with(config, stop, move |p: KernelParts| {
                let sockets = Shared::new(
                    Tls::new(p.sockets, Arc::clone(&shard_keys), &p.tls_ports)
                        .with_handshake_limits(handshakes.0, handshakes.1),
                );
                let service = AutoService::new(http.clone(), make(), &sockets, Arc::clone(&p.wakes));
                let host = Host::with_service(service, p.site, p.limit, p.stop, grace, p.wakes)
                    .with_ports(&p.ports)
                    .with_window_control(Beneath(Beneath(p.window)));
                (sockets, host)
            })?;
            Ok(running.with_tls(keys))
        }
        (ShardService::Async(make), None) => start_with(config, stop, move |p: KernelParts| {
            let sockets = Shared::new(p.sockets);
            let service = AsyncService::new(&sockets, &http, make());
            let host = Host::with_service(service, p.site, p.limit, p.stop, grace, p.wakes)
                .with_ports(&p.ports)
                .with_window_control(Beneath(p.window));
            (sockets, host)
        }),
        (ShardService::Async(make), Some(keys)) => {
            let shard_keys = Arc::clone(&keys);
            let running = start_with(config, stop, move |p: KernelParts| {
                let sockets = Shared::new(
                    Tls::new(p.sockets, Arc::clone(&shard_keys), &p.tls_ports)
                        .with_handshake_limits(handshakes.0, handshakes.1),
                );
                let service = AsyncService::new(&sockets, &http, make());
                let host = Host::with_service(service, p.site, p.limit, p.stop, grace, p.wakes)
                    .with_ports(&p.ports)
                    .with_window_control(Beneath(Beneath(p.window)));
                (sockets, host)
            })?;
            Ok(running.with_tls(keys))
        }
    }
}

/// Starts one shard per listener, each running the host `make` builds on
/// its thread over transport `T`.
fn start_with<T, S, W, F>(config: &Config, stop: Arc<AtomicBool>, make: F) -> io::Result<Running>
where
    T: Transport + 'static,
    KernelPoll: NetIo<T, Event = T::Event>,
    S: Service<T> + 'static,
    W: Windows<T> + 'static,
    F: Fn(KernelParts) -> (T, Host<T, S, W>) + Send + Sync + 'static,
{
    let shards = u16::try_from(config.shards)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("--shards {} is too many", config.shards)))?;
    // The plain listeners, then the TLS ones: one of each per shard.
    let tls_only = config.tls.as_ref().is_some_and(|t| t.only);
    let steering = config.steering;
    let (addr, mut plain) = if tls_only { (config.listen, Vec::new()) } else { bind(config.listen, shards, steering)? };
    let (tls_addr, mut tls) = match &config.tls {
        Some(t) => {
            let (bound, listeners) = bind(t.listen, shards, steering)?;
            (Some(bound), listeners)
        }
        None => (None, Vec::new()),
    };
    let mut ports = Vec::new();
    if !tls_only {
        ports.push(addr.port());
    }
    ports.extend(tls_addr.map(|a| a.port()));
    let tls_ports: Vec<u16> = tls_addr.map(|a| a.port()).into_iter().collect();
    let listeners: Vec<Vec<std::net::TcpListener>> =
        (0..shards).map(|_| plain.pop().into_iter().chain(tls.pop()).collect()).collect();
    let policy = policy_for(config.fairness);
    let capacity = config.capacity.map(|c| c.bits_per_sec);
    let hub = Arc::new(MetricsHub::new(shards, METRICS_FLOWS, "kernel").with_fairness(policy.name(), capacity));
    let board = Arc::new(ShareBoard::new(usize::from(shards)));
    let limit = Arc::new(ConnectionLimit::new(config.max_connections));
    let pin = std::thread::available_parallelism().is_ok_and(|n| n.get() >= usize::from(shards));
    let make = Arc::new(make);
    // Raised only when a shard fails, to stop the others at once; `stop`
    // itself is the hosts' business (they drain, then finish).
    let halt = Arc::new(AtomicBool::new(false));
    let mut handles = Vec::with_capacity(listeners.len());
    for (index, listener) in (0..shards).zip(listeners) {
        let site = ShardSite::new(index, Arc::clone(&hub), config.root.as_deref(), METRICS_FLOWS).map_err(|e| {
            let root = config.root.as_deref().unwrap_or(std::path::Path::new("")).display();
            io::Error::new(e.kind(), format!("cannot open --root {root}: {e}"))
        })?;
        let site = if config.proxy.is_some() { site.with_outbound()? } else { site };
        let window =
            Controller::new(policy.clone(), capacity, Arc::clone(&board), usize::from(index), config.weights.clone());
        let batch = config.runtime.batch;
        let (limit, stop, make) = (Arc::clone(&limit), Arc::clone(&stop), Arc::clone(&make));
        let (ports, tls_ports) = (ports.clone(), tls_ports.clone());
        let build = move || {
            let poll = KernelPoll::new(batch)?;
            if let Some(fd) = site.outbound_fd() {
                poll.also_wake_on(fd)?;
            }
            let sockets = KernelSockets::new(poll.registry(), listener)?;
            let wakes = WakeQueue::new(Some(poll.notifier()));
            let parts = KernelParts { sockets, site, limit, stop, wakes, window, ports, tls_ports };
            let (transport, host) = make(parts);
            Ok((transport, poll, host))
        };
        match spawn_async_with(index, pin, config.runtime, Arc::clone(&halt), build, report) {
            Ok(handle) => handles.push(handle),
            Err(e) => {
                halt.store(true, Ordering::Relaxed);
                let _ = Running::new(handles, halt, hub, Some(addr)).wait();
                return Err(io::Error::new(e.kind(), format!("cannot start shard {index}: {e}")));
            }
        }
    }
    if !tls_only {
        info!("fairway: serving on http://{addr} (kernel backend, {shards} shards)");
    }
    let running = Running::new(handles, halt, hub, if tls_only { tls_addr } else { Some(addr) });
    Ok(match tls_addr {
        Some(tls_addr) => {
            info!("fairway: serving on https://{tls_addr} (kernel backend, {shards} shards)");
            running.with_tls_addr(tls_addr)
        }
        None => running,
    })
}

/// Binds a listener for each shard on `addr` (port 0: a free port, the
/// same for all). Returns the address bound.
///
/// With [`Steering::Software`], one `SO_REUSEPORT` socket per shard. That
/// option would let these listeners join those of another process of the
/// same user already on the port, silently sharing its traffic; so the
/// port is first probed with a plain bind, which fails if anything listens
/// there. With [`Steering::Off`], one socket without it, each shard's
/// listener a duplicate of its descriptor.
fn bind(addr: SocketAddr, shards: u16, steering: Steering) -> io::Result<(SocketAddr, Vec<TcpListener>)> {
    let cannot = |e: io::Error| io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}"));
    let probe = socket(addr, false).map_err(cannot)?;
    let bound = probe.local_addr()?.as_socket().unwrap_or(addr);
    if steering == Steering::Off {
        probe.listen(BACKLOG).map_err(cannot)?;
        let shared: TcpListener = probe.into();
        let listeners = (1..shards).map(|_| shared.try_clone()).collect::<io::Result<Vec<_>>>().map_err(cannot)?;
        return Ok((bound, std::iter::once(shared).chain(listeners).collect()));
    }
    let listeners = (0..shards)
        .map(|_| {
            let socket = socket(bound, true)?;
            socket.listen(BACKLOG)?;
            Ok(socket.into())
        })
        .collect::<io::Result<Vec<TcpListener>>>()
        .map_err(cannot)?;
    drop(probe);
    Ok((bound, listeners))
}

/// A non-blocking TCP socket bound to `addr`.
fn socket(addr: SocketAddr, reuse_port: bool) -> io::Result<Socket> {
    let socket = Socket::new(Domain::for_address(addr), Type::STREAM, Some(Protocol::TCP))?;
    // Connections of an earlier run in TIME_WAIT do not block a restart;
    // on Linux this never lets two listeners share a port.
    socket.set_reuse_address(true)?;
    if let SocketAddr::V6(v6) = addr
        && v6.ip().is_unspecified()
    {
        // `[::]` takes both families, whatever net.ipv6.bindv6only says.
        socket.set_only_v6(false)?;
    }
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    Ok(socket)
}

#[cfg(test)]
mod tests {
    use std::net::{Ipv4Addr, SocketAddr};
    use std::os::fd::AsRawFd;
    use std::os::unix::fs::MetadataExt;

    use socket2::SockRef;

    use super::*;

    /// The socket behind a descriptor: its inode (a duplicate has its
    /// original's).
    fn inode(listener: &TcpListener) -> u64 {
        let fd = listener.as_raw_fd();
        std::fs::metadata(format!("/proc/self/fd/{fd}")).unwrap().ino()
    }

    #[test]
    fn software_steering_gives_each_shard_a_reuseport_listener_of_its_own() {
        let (bound, listeners) = bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 3, Steering::Software).unwrap();
        assert_ne!(bound.port(), 0);
        let mut inodes: Vec<u64> = listeners.iter().map(inode).collect();
        inodes.sort_unstable();
        inodes.dedup();
        assert_eq!(inodes.len(), 3, "three sockets");
        for l in &listeners {
            assert!(SockRef::from(l).reuse_port().unwrap());
            assert_eq!(l.local_addr().unwrap(), bound);
        }
    }

    #[test]
    fn steering_off_gives_every_shard_the_same_listener_without_reuseport() {
        let (bound, listeners) = bind(SocketAddr::from((Ipv4Addr::LOCALHOST, 0)), 3, Steering::Off).unwrap();
        assert_eq!(listeners.len(), 3);
        let first = inode(&listeners[0]);
        for l in &listeners {
            assert_eq!(inode(l), first, "one socket, three descriptors");
            assert!(!SockRef::from(l).reuse_port().unwrap());
            assert_eq!(l.local_addr().unwrap(), bound);
        }
        // A connection is accepted through any of them, once.
        let client = std::net::TcpStream::connect(bound).unwrap();
        let (accepted, peer) = listeners[2].accept().unwrap();
        assert_eq!(peer, client.local_addr().unwrap());
        drop(accepted);
        // (Non-blocking, as every listener of a shard is.)
        assert_eq!(listeners[0].accept().unwrap_err().kind(), io::ErrorKind::WouldBlock);
    }

    #[test]
    fn a_port_taken_by_another_socket_is_refused_either_way() {
        let taken = std::net::TcpListener::bind((Ipv4Addr::LOCALHOST, 0)).unwrap();
        let addr = taken.local_addr().unwrap();
        for steering in [Steering::Software, Steering::Off] {
            let err = bind(addr, 2, steering).unwrap_err();
            assert!(err.to_string().contains(&format!("cannot listen on {addr}")), "{err}");
        }
    }
}
