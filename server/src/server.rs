//! Embedding Fairway: [`Server::builder`] starts a server from your own
//! program, integration test or benchmark, with your application on every
//! shard, and returns a [`ServerHandle`] with the address it serves on and
//! a graceful [`shutdown`](ServerHandle::shutdown).
//!
//! ```no_run
//! use fairway::http::{handler_fn, Method, Router};
//! use fairway::Server;
//!
//! let server = Server::builder()
//!     .listen("127.0.0.1:0".parse().unwrap())
//!     .shards(1)
//!     .handler(|| Router::new().route(Method::Get, "/hello", handler_fn(|_, _, res| res.text(200, "hello\n"))))
//!     .spawn()
//!     .unwrap();
//! println!("serving on http://{}", server.local_addr());
//! server.shutdown().unwrap();
//! ```
//!
//! The application is made once per shard, on the shard's thread, so it
//! need not be `Send`: a [`Handler`] ([`handler`](Builder::handler)), an
//! async main task ([`task`](Builder::task)), or an axum `Router`
//! ([`axum`](Builder::axum)). The backend and every other setting come
//! from a [`Config`], the `fairway` binary's flags
//! ([`from_args`](Builder::from_args), [`config`](Builder::config)), or
//! the builder's own shortcuts.

use std::future::Future;
use std::io;
use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::backend::{self, Application, Running, ShardReport};
use crate::config::{Backend, Config, ConfigError};
use crate::http::Handler;

/// Fairway as a library: see the [module documentation](self).
#[derive(Debug)]
pub struct Server;

impl Server {
    /// A builder with the default configuration: the kernel backend on
    /// 127.0.0.1:8080, one shard per core, the built-in endpoints.
    #[must_use]
    pub fn builder() -> Builder {
        Builder::new(Config::defaults())
    }
}

/// How a server is set up; see [`Server::builder`].
#[derive(Debug)]
pub struct Builder {
    config: Config,
    app: Application,
    stop: Option<Arc<AtomicBool>>,
}

impl Builder {
    fn new(config: Config) -> Builder {
        Builder { config, app: Application::Builtin, stop: None }
    }

    /// A builder configured by the process's arguments, exactly as the
    /// `fairway` binary is (`--backend`, `--listen`, `--iface`, `--ip`,
    /// `--shards`, `--config FILE`...), so an example or a tool built on
    /// the library takes the same flags.
    ///
    /// # Errors
    ///
    /// The arguments do not parse, or asked for `--help` or `--version`:
    /// [`ConfigError::exit`] prints either properly.
    pub fn from_args() -> Result<Builder, ConfigError> {
        Config::from_env().map(Builder::new)
    }

    /// Takes every setting from `config`.
    #[must_use]
    pub fn config(mut self, config: Config) -> Builder {
        self.config = config;
        self
    }

    /// The configuration so far.
    #[must_use]
    pub fn configuration(&self) -> &Config {
        &self.config
    }

    /// Where packets come from (see [`Backend`]); the userspace ones also
    /// need an address ([`Config::ip`]) and, for AF_XDP, an interface.
    #[must_use]
    pub fn backend(mut self, backend: Backend) -> Builder {
        self.config.backend = backend;
        self
    }

    /// Kernel backend: where to listen (port 0 picks a free one; see
    /// [`ServerHandle::local_addr`]).
    #[must_use]
    pub fn listen(mut self, addr: SocketAddr) -> Builder {
        self.config.listen = addr;
        self
    }

    /// How many shards (one loop per core) run on the kernel backend; the
    /// userspace backends run one per queue.
    #[must_use]
    pub fn shards(mut self, shards: usize) -> Builder {
        self.config.shards = shards.max(1);
        self
    }

    /// A stop flag of the caller's (the one SIGINT and SIGTERM raise, say):
    /// raising it shuts the server down as [`ServerHandle::shutdown`] does.
    #[must_use]
    pub fn stop_flag(mut self, stop: Arc<AtomicBool>) -> Builder {
        self.stop = Some(stop);
        self
    }

    /// Serves with the [`Handler`] `make` returns, once per shard.
    #[must_use]
    pub fn handler<H, F>(mut self, make: F) -> Builder
    where
        H: Handler + 'static,
        F: Fn() -> H + Send + Sync + 'static,
    {
        self.app = Application::Handler(Arc::new(move || Box::new(make()) as Box<dyn Handler>));
        self
    }

    /// Runs the async task `main` returns on each shard's executor: it
    /// accepts from [`TcpListener::shard`](crate::net::TcpListener::shard)
    /// and serves as it likes (see [`crate::rt::serve`]).
    #[must_use]
    pub fn task<F, Fut>(mut self, main: F) -> Builder
    where
        F: Fn() -> Fut + Send + Sync + 'static,
        Fut: Future<Output = ()> + 'static,
    {
        let main = Arc::new(main);
        self.app = Application::Async(Arc::new(move || {
            let main = Arc::clone(&main);
            Box::new(move || Box::pin(main()) as std::pin::Pin<Box<dyn Future<Output = ()>>>)
        }));
        self
    }

    /// Serves the axum `Router` that `make` returns, once per shard, with
    /// hyper's HTTP/1 server on the shard's executor.
    #[cfg(feature = "axum")]
    #[must_use]
    pub fn axum<F>(self, make: F) -> Builder
    where
        F: Fn() -> ::axum::Router + Send + Sync + 'static,
    {
        self.task(move || crate::rt::axum(make()))
    }

    /// Starts the server and returns once every shard runs (on the kernel
    /// backend, once every listener is bound).
    ///
    /// # Errors
    ///
    /// The backend cannot start: the address is in use, the interface does
    /// not exist, `--root` cannot be opened; one line that says why.
    pub fn spawn(self) -> io::Result<ServerHandle> {
        let stop = self.stop.unwrap_or_default();
        let running = backend::start_app(&self.config, Arc::clone(&stop), &self.app)?;
        // Every backend says where it serves; the fallback is never taken.
        let addr = running.local_addr().unwrap_or_else(|| SocketAddr::from(([0, 0, 0, 0], self.config.port)));
        let tls_addr = running.tls_local_addr();
        Ok(ServerHandle { running: Some(running), stop, addr, tls_addr })
    }

    /// Starts the server and serves until SIGINT or SIGTERM, then shuts it
    /// down gracefully (as the `fairway` binary does). It takes the process
    /// as its own: the signal handlers, and glibc's threshold for mapping
    /// big blocks ([`map_large_blocks`](crate::runtime::memory::map_large_blocks)).
    ///
    /// # Errors
    ///
    /// As [`spawn`](Self::spawn), or a shard fails while serving.
    pub fn run(self) -> io::Result<()> {
        crate::runtime::memory::map_large_blocks();
        let stop = crate::runtime::signals::stop_on_signals()
            .map_err(|e| io::Error::new(e.kind(), format!("cannot handle SIGINT/SIGTERM: {e}")))?;
        let handle = self.stop_flag(stop).spawn()?;
        let reload = match handle.tls() {
            Some(keys) => Some(crate::tls::reload_on_sighup(Arc::clone(keys))?),
            None => None,
        };
        let result = handle.wait();
        if let Some(reload) = reload {
            reload.close();
        }
        result?;
        tracing::info!("fairway: stopped");
        Ok(())
    }
}

/// What the `fairway` binary does with its configuration: sets up
/// logging, then [`Server::run`]s until SIGINT/SIGTERM. One line on
/// standard error says why when it cannot: exit status 2 for the logging
/// set-up (a bad filter), 1 for the server.
#[must_use]
pub fn run_binary(config: Config) -> std::process::ExitCode {
    if let Err(e) = crate::logging::init(&config.log) {
        eprintln!("fairway: {e}");
        return std::process::ExitCode::from(2);
    }
    tracing::debug!(?config, "configuration");
    match Server::builder().config(config).run() {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("fairway: {e}");
            std::process::ExitCode::FAILURE
        }
    }
}

/// A running server (see [`Server::builder`]). Dropping it shuts it down
/// and waits.
#[derive(Debug)]
pub struct ServerHandle {
    running: Option<Running>,
    stop: Arc<AtomicBool>,
    addr: SocketAddr,
    tls_addr: Option<SocketAddr>,
}

impl ServerHandle {
    /// Where it serves: the kernel backend's bound address (with the port
    /// picked for `:0`), or `--port` of the userspace stack's `--ip`.
    #[must_use]
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `http://ADDR` plus `path`.
    #[must_use]
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// Where it serves HTTPS, if it does: the kernel backend's bound TLS
    /// address, or `--tls-port` of the userspace stack's `--ip`.
    #[must_use]
    pub fn tls_local_addr(&self) -> Option<SocketAddr> {
        self.tls_addr
    }

    /// The certificate and key it serves HTTPS with, if it does:
    /// [`reload`](crate::tls::TlsKeys::reload) them after replacing the
    /// files.
    #[must_use]
    pub fn tls(&self) -> Option<&Arc<crate::tls::TlsKeys>> {
        self.running.as_ref()?.tls()
    }

    /// Whether every shard has ended (a failure, or a stop).
    #[must_use]
    pub fn is_finished(&self) -> bool {
        self.running.as_ref().is_none_or(Running::is_finished)
    }

    /// The metrics every shard publishes into.
    #[must_use]
    pub fn metrics(&self) -> Option<&Arc<crate::metrics::MetricsHub>> {
        self.running.as_ref().map(Running::hub)
    }

    /// Stops accepting, lets the requests in flight finish (within the
    /// configured grace period), and waits for every shard to end.
    ///
    /// # Errors
    ///
    /// A shard failed.
    pub fn shutdown(mut self) -> io::Result<Vec<ShardReport>> {
        self.stop.store(true, Ordering::Relaxed);
        self.running.take().map_or(Ok(Vec::new()), Running::wait)
    }

    /// Waits for the server to end (after its stop flag was raised).
    ///
    /// # Errors
    ///
    /// A shard failed.
    pub fn wait(mut self) -> io::Result<Vec<ShardReport>> {
        self.running.take().map_or(Ok(Vec::new()), Running::wait)
    }
}

impl Drop for ServerHandle {
    fn drop(&mut self) {
        if let Some(running) = self.running.take() {
            self.stop.store(true, Ordering::Relaxed);
            let _ = running.wait();
        }
    }
}
