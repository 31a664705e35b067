//! Where the server's connections come from: the kernel's TCP ([`kernel`],
//! mio and `SO_REUSEPORT`), or the userspace stack over AF_XDP or TAP
//! ([`userspace`]). Either way each shard runs the same
//! [loop](crate::runtime) and the same [host](crate::host); only the
//! transport under the host differs.
//!
//! [`serve`] runs the one the configuration names until the stop flag goes
//! up and the connections in flight are done; [`start`] starts it and
//! returns a [`Running`] to wait on.

pub mod connection_limit;
pub mod fairness;
pub mod kernel;
#[cfg(unix)]
pub mod userspace;

use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use fairway_stack::Counters;

use crate::config::{Backend, Config};
use crate::host::{Host, Service, Transport, Windows};
use crate::http::{Handler, builtin};
use crate::metrics::MetricsHub;
use crate::proxy::Proxy;
use crate::rt::MainTask;
use crate::runtime::LoopStats;

/// What a server runs on each shard.
#[derive(Clone, Default)]
pub enum Application {
    /// The built-in endpoints ([`crate::http::builtin()`]).
    #[default]
    Builtin,
    /// A [`Handler`] per shard, made on the shard's thread.
    Handler(MakeHandler),
    /// An async application: the main task of each shard, made on its
    /// thread, run by the shard's executor ([`crate::rt`]).
    Async(MakeTask),
}

/// Makes a shard's handler, on its thread.
pub type MakeHandler = Arc<dyn Fn() -> Box<dyn Handler> + Send + Sync>;

/// Makes a shard's main task, on its thread.
pub type MakeTask = Arc<dyn Fn() -> MainTask + Send + Sync>;

/// What runs on a shard, once the built-in endpoints are one handler among
/// others.
#[derive(Clone)]
pub(crate) enum ShardService {
    /// HTTP answered by the handlers `MakeHandler` makes.
    Http(MakeHandler),
    /// The async runtime with the main tasks `MakeTask` makes.
    Async(MakeTask),
}

impl Application {
    /// What each shard runs for `config`: the built-in endpoints are their
    /// router with its HTTP limits; with upstreams, the reverse proxy
    /// answers what its routes match, in front of the built-in endpoints
    /// or the application's handler.
    ///
    /// # Errors
    ///
    /// Upstreams with an async application, which is not a handler the
    /// proxy can stand in front of.
    pub(crate) fn service(&self, config: &Config) -> io::Result<ShardService> {
        let http = config.http();
        let make: MakeHandler = match self {
            Application::Builtin => Arc::new(move || Box::new(builtin(&http)) as Box<dyn Handler>),
            Application::Handler(make) => Arc::clone(make),
            Application::Async(_) if config.proxy.is_some() => {
                return Err(io::Error::other(
                    "--upstream needs the built-in endpoints or a Handler application: an async one is not proxied",
                ));
            }
            Application::Async(make) => return Ok(ShardService::Async(Arc::clone(make))),
        };
        Ok(ShardService::Http(match &config.proxy {
            Some(proxy) => {
                let through_nic = config.backend != crate::config::Backend::Kernel;
                let (proxy, health) = (Arc::clone(proxy), crate::proxy::health::start(proxy, through_nic));
                Arc::new(move || Box::new(Proxy::new(Arc::clone(&proxy), make(), health.clone())) as Box<dyn Handler>)
            }
            None => make,
        }))
    }
}

impl std::fmt::Debug for Application {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            Application::Builtin => "Builtin",
            Application::Handler(_) => "Handler",
            Application::Async(_) => "Async",
        })
    }
}

/// Serves with `config.backend` until `stop` is raised (SIGINT/SIGTERM, see
/// [`crate::runtime::signals::stop_on_signals`]) and in-flight requests are
/// done or `config.shutdown_grace` has passed.
///
/// # Errors
///
/// The backend cannot start (address in use, no permission, no such
/// interface) or fails while serving; one line that says why.
pub fn serve(config: &Config, stop: Arc<AtomicBool>) -> io::Result<()> {
    start(config, stop)?.wait()?;
    tracing::info!("fairway: stopped");
    Ok(())
}

/// Starts the backend `config` names and returns at once; the shards are
/// running (and, on the kernel backend, listening) when it returns.
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
    match config.backend {
        Backend::Kernel => kernel::start_app(config, stop, app),
        #[cfg(unix)]
        Backend::Afxdp | Backend::Tap => userspace::start_app(config, stop, app),
        #[cfg(not(unix))]
        Backend::Afxdp | Backend::Tap => {
            Err(io::Error::new(io::ErrorKind::Unsupported, "the userspace backends need Linux: use --backend kernel"))
        }
    }
}

/// How often [`Running::wait`] looks for shards that ended.
const WAIT_POLL: Duration = Duration::from_millis(50);

/// What one shard did, once it has ended.
#[derive(Clone, Debug)]
pub struct ShardReport {
    /// The shard's index (and queue).
    pub index: u16,
    /// Its loop's counts.
    pub stats: LoopStats,
    /// Connections it accepted.
    pub accepted: u64,
    /// Connections it refused (the server-wide limit, or draining).
    pub refused: u64,
    /// Requests it answered.
    pub requests: u64,
    /// Its stack's counters (all zero on the kernel backend).
    pub counters: Counters,
}

/// The shards of a started server.
#[derive(Debug)]
pub struct Running {
    handles: Vec<JoinHandle<io::Result<ShardReport>>>,
    halt: Arc<AtomicBool>,
    hub: Arc<MetricsHub>,
    local_addr: Option<SocketAddr>,
    tls: Option<Arc<crate::tls::TlsKeys>>,
    tls_addr: Option<SocketAddr>,
}

impl Running {
    /// The shards of `handles`; `halt` stops their loops at once.
    pub(crate) fn new(
        handles: Vec<JoinHandle<io::Result<ShardReport>>>,
        halt: Arc<AtomicBool>,
        hub: Arc<MetricsHub>,
        local_addr: Option<SocketAddr>,
    ) -> Running {
        Running { handles, halt, hub, local_addr, tls: None, tls_addr: None }
    }

    /// The same, serving TLS with `keys`.
    pub(crate) fn with_tls(mut self, keys: Arc<crate::tls::TlsKeys>) -> Running {
        self.tls = Some(keys);
        self
    }

    /// The same, the kernel backend's TLS listeners bound to `addr`.
    pub(crate) fn with_tls_addr(mut self, addr: SocketAddr) -> Running {
        self.tls_addr = Some(addr);
        self
    }

    /// The certificate and key it serves TLS with, if it does: what
    /// [`TlsKeys::reload`](crate::tls::TlsKeys::reload) reloads.
    #[must_use]
    pub fn tls(&self) -> Option<&Arc<crate::tls::TlsKeys>> {
        self.tls.as_ref()
    }

    /// Where it serves HTTPS: the address the kernel backend's TLS
    /// listeners are bound to (the port chosen for `:0`), or `--tls-port` of
    /// the userspace stack's `--ip`; `None` without TLS.
    #[must_use]
    pub fn tls_local_addr(&self) -> Option<SocketAddr> {
        self.tls_addr
    }

    /// The metrics every shard publishes into.
    #[must_use]
    pub fn hub(&self) -> &Arc<MetricsHub> {
        &self.hub
    }

    /// Where it serves plain HTTP (HTTPS with `--tls-only`): the address
    /// the kernel backend's listeners are bound to (the port chosen for
    /// `:0`), or `--port` of the userspace stack's `--ip`.
    #[must_use]
    pub fn local_addr(&self) -> Option<SocketAddr> {
        self.local_addr
    }

    /// Whether every shard has ended.
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.handles.iter().all(JoinHandle::is_finished)
    }

    /// Stops every shard's loop at once, without draining (a failure's
    /// way); the stop flag is the graceful one.
    pub fn halt(&self) {
        self.halt.store(true, Ordering::Relaxed);
    }

    /// Waits for every shard to end (after the stop flag, or a failure).
    /// A shard that fails stops the others at once.
    ///
    /// # Errors
    ///
    /// The first shard's failure: its device's error, as that device put it.
    ///
    /// # Panics
    ///
    /// Re-raises a shard thread's panic.
    pub fn wait(self) -> io::Result<Vec<ShardReport>> {
        let Running { mut handles, halt, .. } = self;
        let mut reports = Vec::with_capacity(handles.len());
        let mut failure = None;
        while !handles.is_empty() {
            let Some(at) = handles.iter().position(JoinHandle::is_finished) else {
                // Shards end rarely (a failure, or the end of a shutdown):
                // looking twenty times a second costs an idle server nothing
                // measurable, where every 5 ms was most of its idle CPU.
                std::thread::sleep(WAIT_POLL);
                continue;
            };
            let result = handles.swap_remove(at).join().unwrap_or_else(|panic| std::panic::resume_unwind(panic));
            match result {
                Ok(report) => reports.push(report),
                Err(e) => {
                    halt.store(true, Ordering::Relaxed);
                    failure.get_or_insert(e);
                }
            }
        }
        reports.sort_by_key(|r| r.index);
        failure.map_or(Ok(reports), Err)
    }
}

/// A shard's report from how its loop ended and its host.
pub(crate) fn report<T, S, W>(
    index: u16,
    result: io::Result<LoopStats>,
    parts: Option<(T, Host<T, S, W>)>,
) -> io::Result<ShardReport>
where
    T: Transport,
    S: Service<T>,
    W: Windows<T>,
{
    let stats = result?;
    let Some((transport, host)) = parts else {
        return Err(io::Error::other(format!("shard {index} ended without its state")));
    };
    if let Some(e) = host.listen_error() {
        return Err(io::Error::other(format!("shard {index}: {e}")));
    }
    Ok(ShardReport {
        index,
        stats,
        accepted: host.accepted(),
        refused: host.refused(),
        requests: host.site().metrics().requests(),
        counters: transport.counters().unwrap_or_default(),
    })
}
