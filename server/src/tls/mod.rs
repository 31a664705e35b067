//! TLS termination with rustls, on every backend.
//!
//! TLS is a [transport](crate::host::Transport) over another: [`Tls`]
//! wraps the backend's connections (the userspace stack's or kernel
//! sockets), and the connections accepted on a TLS port get a rustls
//! session that turns the ciphertext the backend carries into the
//! plaintext the HTTP layer reads, and back. The host, the HTTP layer and
//! the handlers are the same for both; a plain port and a TLS port can be
//! served side by side by one host.
//!
//! [`TlsKeys`] holds the certificate and key, loaded from PEM files, and
//! what resumption needs (a ticket key and a session cache shared by every
//! shard); [`TlsKeys::reload`] reads the files again (on `SIGHUP`) for the
//! connections accepted after it, leaving those in progress as they are.
//!
//! What is offered: TLS 1.3 and 1.2 (rustls's safe suites, `ring`'s
//! cryptography), ALPN `h2` and `http/1.1` (`h2` first; `http/1.1` alone
//! with `--no-http2`; a client that offers only other protocols is
//! refused, RFC 7301 §3.2), resumption by tickets (TLS 1.3
//! and 1.2) and by session ids (1.2). rustls never renegotiates.

mod transport;

use std::fmt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use rustls::crypto::ring as provider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use rustls::server::{ProducesTickets, ServerSessionMemoryCache, StoresServerSessions};
use rustls::{ServerConfig, version};

pub use transport::{CHUNK, Tls, TlsCounters};

/// TLS sessions kept for resumption by session id (TLS 1.2), server-wide.
const SESSION_CACHE: usize = 4096;

/// Why a certificate or key could not be used: one line, naming the file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsError(String);

impl fmt::Display for TlsError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for TlsError {}

/// The server's certificate chain and key, as rustls serves them, and what
/// resumption keeps; shared by every shard, reloadable.
pub struct TlsKeys {
    cert: PathBuf,
    key: PathBuf,
    tickets: Arc<dyn ProducesTickets>,
    sessions: Arc<dyn StoresServerSessions>,
    /// ALPN offers `h2` (before `http/1.1`).
    http2: bool,
    /// Bumped by every reload, so a shard sees a new config with one load.
    generation: AtomicU64,
    current: Mutex<Arc<ServerConfig>>,
}

impl fmt::Debug for TlsKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("TlsKeys").field("cert", &self.cert).field("key", &self.key).finish_non_exhaustive()
    }
}

impl TlsKeys {
    /// Loads the PEM certificate chain at `cert` (the server's first, then
    /// its issuers) and the PEM private key at `key` (PKCS#8, PKCS#1 RSA or
    /// SEC1 EC; RSA, ECDSA P-256/P-384 or Ed25519).
    ///
    /// # Errors
    ///
    /// A file cannot be read, holds no certificate or no key, the key is of
    /// a kind rustls cannot sign with, or it does not belong to the
    /// certificate; each as one line naming the file.
    pub fn load(cert: &Path, key: &Path) -> Result<TlsKeys, TlsError> {
        TlsKeys::load_offering(cert, key, false)
    }

    /// [`load`](Self::load), with ALPN offering `h2` before `http/1.1` when
    /// `http2` is set (the server behind it speaks both).
    ///
    /// # Errors
    ///
    /// As [`load`](Self::load).
    pub fn load_offering(cert: &Path, key: &Path, http2: bool) -> Result<TlsKeys, TlsError> {
        let tickets = provider::Ticketer::new().map_err(|e| TlsError(format!("cannot make a ticket key: {e}")))?;
        let sessions: Arc<dyn StoresServerSessions> = ServerSessionMemoryCache::new(SESSION_CACHE);
        let config = server_config(cert, key, &tickets, &sessions, http2)?;
        Ok(TlsKeys {
            cert: cert.to_path_buf(),
            key: key.to_path_buf(),
            tickets,
            sessions,
            http2,
            generation: AtomicU64::new(0),
            current: Mutex::new(config),
        })
    }

    /// Reads the certificate and key again; connections accepted from now
    /// on use them (those in progress keep theirs). On failure the ones in
    /// use stay.
    ///
    /// # Errors
    ///
    /// As [`load`](Self::load).
    pub fn reload(&self) -> Result<(), TlsError> {
        let config = server_config(&self.cert, &self.key, &self.tickets, &self.sessions, self.http2)?;
        *self.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner) = config;
        self.generation.fetch_add(1, Ordering::Release);
        Ok(())
    }

    /// The certificate file.
    #[must_use]
    pub fn cert_path(&self) -> &Path {
        &self.cert
    }

    /// The config of now and its generation.
    pub(crate) fn current(&self) -> (u64, Arc<ServerConfig>) {
        let generation = self.generation.load(Ordering::Acquire);
        let config = Arc::clone(&self.current.lock().unwrap_or_else(std::sync::PoisonError::into_inner));
        (generation, config)
    }

    /// Whether a config of `generation` is still the current one.
    pub(crate) fn is_current(&self, generation: u64) -> bool {
        self.generation.load(Ordering::Acquire) == generation
    }
}

/// A rustls config serving the chain in `cert_path` with the key in
/// `key_path`, resuming with `tickets` and `sessions`, offering `h2` by
/// ALPN if `http2`.
fn server_config(
    cert_path: &Path,
    key_path: &Path,
    tickets: &Arc<dyn ProducesTickets>,
    sessions: &Arc<dyn StoresServerSessions>,
    http2: bool,
) -> Result<Arc<ServerConfig>, TlsError> {
    let (cert, key) = (cert_path.display(), key_path.display());
    let chain = CertificateDer::pem_file_iter(cert_path)
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(|e| TlsError(format!("cannot read the certificates in --tls-cert {cert}: {}", pem_error(&e))))?;
    if chain.is_empty() {
        return Err(TlsError(format!("--tls-cert {cert} holds no PEM certificate (BEGIN CERTIFICATE)")));
    }
    let private = PrivateKeyDer::from_pem_file(key_path)
        .map_err(|e| TlsError(format!("cannot read the private key in --tls-key {key}: {}", pem_error(&e))))?;
    let mut config = ServerConfig::builder_with_provider(Arc::new(provider::default_provider()))
        .with_protocol_versions(&[&version::TLS13, &version::TLS12])
        .map_err(|e| TlsError(format!("TLS versions: {e}")))?
        .with_no_client_auth()
        .with_single_cert(chain, private)
        .map_err(|e| match e {
            rustls::Error::InconsistentKeys(_) => {
                TlsError(format!("--tls-key {key} is not the key of the certificate in --tls-cert {cert}"))
            }
            e => TlsError(format!("cannot use --tls-key {key} with --tls-cert {cert}: {e}")),
        })?;
    // RFC 9113 §3.2: `h2` first, so that a client offering both speaks it.
    config.alpn_protocols = if http2 { vec![b"h2".to_vec(), b"http/1.1".to_vec()] } else { vec![b"http/1.1".to_vec()] };
    config.ticketer = Arc::clone(tickets);
    config.session_storage = Arc::clone(sessions);
    Ok(Arc::new(config))
}

/// How many TLS handshakes one of `config`'s shards lets be in progress at
/// once: its share of half the connection limit.
#[must_use]
pub fn handshake_share(config: &crate::config::Config, shards: usize) -> usize {
    (config.max_connections / 2 / shards.max(1)).max(1)
}

/// The keys `config` names, loaded, if it serves TLS.
///
/// # Errors
///
/// As [`TlsKeys::load`], as an [`std::io::Error`] of kind `InvalidInput`.
pub fn keys_for(config: &crate::config::Config) -> std::io::Result<Option<Arc<TlsKeys>>> {
    let Some(tls) = &config.tls else { return Ok(None) };
    let keys = TlsKeys::load_offering(&tls.cert, &tls.key, config.http2)
        .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidInput, e.to_string()))?;
    Ok(Some(Arc::new(keys)))
}

/// Reloads `keys` on every `SIGHUP`, from a thread of its own, logging
/// what came of it; [`close`](signal_hook::iterator::Handle::close) the
/// handle to stop.
///
/// # Errors
///
/// The signal handler cannot be installed, or the thread started.
pub fn reload_on_sighup(keys: Arc<TlsKeys>) -> std::io::Result<signal_hook::iterator::Handle> {
    let mut signals = signal_hook::iterator::Signals::new([signal_hook::consts::SIGHUP])
        .map_err(|e| std::io::Error::new(e.kind(), format!("cannot handle SIGHUP: {e}")))?;
    let handle = signals.handle();
    std::thread::Builder::new().name("fairway-sighup".to_owned()).spawn(move || {
        for _ in signals.forever() {
            match keys.reload() {
                Ok(()) => tracing::info!("SIGHUP: reloaded --tls-cert {} for new connections", keys.cert.display()),
                Err(e) => tracing::error!("SIGHUP: {e}; the certificate in use stays"),
            }
        }
    })?;
    Ok(handle)
}

fn pem_error(e: &rustls::pki_types::pem::Error) -> String {
    match e {
        rustls::pki_types::pem::Error::Io(e) => e.to_string(),
        rustls::pki_types::pem::Error::NoItemsFound => "no PEM section of that kind".to_owned(),
        e => format!("{e:?}"),
    }
}

#[cfg(test)]
mod tests;
