//! The kernel backend: HTTP over the kernel's TCP, one shard per core.
//!
//! Each shard is a thread pinned to its core with its own mio `Poll` and
//! its own listener on `--listen`; the listeners share the port through
//! `SO_REUSEPORT`, so the kernel spreads new connections over the shards by
//! their 4-tuple and a connection stays on the shard that accepted it.
//! Shards share nothing but the connection limit, the metrics hub and
//! window control's board of active weights.
//! `--busy-poll-us`, `--itr-us` and `--batch` are the userspace backends'
//! and do not apply here.
//!
//! `--fairness`, `--capacity` and `--weight` apply: each shard runs the
//! policy over its connections, each weighted as its client is, sensing
//! through `TCP_INFO` and acting through the window clamp and the pacing
//! limit ([`fairness`]).
//!
//! Shutdown: when the stop flag goes up, every shard closes its listener
//! (so new connections are refused once all have), closes its idle
//! connections, lets the busy ones finish their responses, and returns
//! when they are done or `--shutdown-grace` has passed.

mod deadlines;
mod fairness;
mod shard;

use std::io;
use std::net::{SocketAddr, TcpListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use socket2::{Domain, Protocol, Socket, Type};
use tracing::{error, info};

use crate::backend::connection_limit::ConnectionLimit;
use crate::backend::fairness::{ShareBoard, policy_for};
use crate::config::Config;
use crate::metrics::MetricsHub;
use crate::runtime::shards::pin_to_core;
use crate::site::ShardSite;

/// Connections the kernel queues per listener before they are accepted.
const BACKLOG: i32 = 1024;

/// The most connections per shard listed in the per-flow metrics.
const METRICS_FLOWS: usize = 64;

/// Serves `config` on kernel sockets until `stop` is raised and the
/// connections in flight are done (or `config.shutdown_grace` has passed).
/// Logs the address it serves on once every listener is bound.
///
/// # Errors
///
/// A listener cannot be bound (address in use, permission denied), the
/// static root cannot be opened, a thread cannot be started, or a shard's
/// poll fails; each as one line that says what was being done.
pub fn serve(config: &Config, stop: Arc<AtomicBool>) -> io::Result<()> {
    let shards = u16::try_from(config.shards)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, format!("--shards {} is too many", config.shards)))?;
    let (addr, listeners) = bind(config.listen, shards)?;
    let policy = policy_for(config.fairness);
    let capacity = config.capacity.map(|c| c.bits_per_sec);
    let hub = Arc::new(MetricsHub::new(shards, METRICS_FLOWS, "kernel").with_fairness(policy.name(), capacity));
    let board = Arc::new(ShareBoard::new(usize::from(shards)));
    let limit = Arc::new(ConnectionLimit::new(config.max_connections));
    let mut parts = Vec::with_capacity(listeners.len());
    for (index, listener) in (0..shards).zip(listeners) {
        let site = ShardSite::new(index, Arc::clone(&hub), config.root.as_deref(), METRICS_FLOWS).map_err(|e| {
            let root = config.root.as_deref().unwrap_or(std::path::Path::new("")).display();
            io::Error::new(e.kind(), format!("cannot open --root {root}: {e}"))
        })?;
        parts.push(shard::ShardParts {
            index,
            listener: mio::net::TcpListener::from_std(listener),
            site,
            http: config.http(),
            limit: Arc::clone(&limit),
            max_sleep: config.runtime.max_sleep,
            grace: config.shutdown_grace,
            fairness: fairness::Controller::new(
                policy.clone(),
                capacity,
                Arc::clone(&board),
                usize::from(index),
                config.weights.clone(),
            ),
        });
    }
    let pin = std::thread::available_parallelism().is_ok_and(|n| n.get() >= usize::from(shards));
    let mut handles = Vec::with_capacity(parts.len());
    for part in parts {
        let shard_stop = Arc::clone(&stop);
        let index = part.index;
        let spawned = std::thread::Builder::new().name(format!("fairway-shard-{index}")).spawn(move || {
            let stop = shard_stop;
            if pin {
                pin_to_core(usize::from(index));
            }
            let result = shard::run(part, &stop);
            if let Err(e) = &result {
                error!(shard = index, "shard stopped: {e}");
                // The others drain and return too, so the error is reported.
                stop.store(true, Ordering::Relaxed);
            }
            result
        });
        match spawned {
            Ok(handle) => handles.push(handle),
            Err(e) => {
                stop.store(true, Ordering::Relaxed);
                join(handles)?;
                return Err(io::Error::new(e.kind(), format!("cannot start shard {index}: {e}")));
            }
        }
    }
    info!("fairway: serving on http://{addr} (kernel backend, {shards} shards)");
    join(handles)?;
    info!("fairway: stopped");
    Ok(())
}

/// Waits for every shard; the first error wins.
fn join(handles: Vec<std::thread::JoinHandle<io::Result<()>>>) -> io::Result<()> {
    let mut first = Ok(());
    for handle in handles {
        let result = handle.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
        if first.is_ok() {
            first = result;
        }
    }
    first
}

/// Binds one listener per shard on `addr` (port 0: a free port, the same
/// for all). Returns the address bound.
///
/// `SO_REUSEPORT` would let these listeners join those of another process
/// of the same user already on the port, silently sharing its traffic; so
/// the port is first probed with a plain bind, which fails if anything
/// listens there.
fn bind(addr: SocketAddr, shards: u16) -> io::Result<(SocketAddr, Vec<TcpListener>)> {
    let cannot = |e: io::Error| io::Error::new(e.kind(), format!("cannot listen on {addr}: {e}"));
    let probe = socket(addr, false).map_err(cannot)?;
    let bound = probe.local_addr()?.as_socket().unwrap_or(addr);
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
    if reuse_port {
        socket.set_reuse_port(true)?;
    }
    socket.set_nonblocking(true)?;
    socket.bind(&addr.into())?;
    Ok(socket)
}
