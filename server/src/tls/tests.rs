//! TLS over an in-memory transport, with rustls's client at the other end:
//! the host and the HTTP layer serve a TLS port and a plain one through
//! [`Tls`], and what a client sees is checked byte for byte.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration as StdDuration;

use fairway_stack::time::Instant;
use rustls::pki_types::{CertificateDer, ServerName};
use rustls::{ClientConfig, ClientConnection, HandshakeKind, RootCertStore};

use super::*;
use crate::backend::connection_limit::ConnectionLimit;
use crate::host::wake::WakeQueue;
use crate::host::{Host, HostEvent, Transport, TransportError};
use crate::http::{HttpConfig, HttpService, Router};
use crate::metrics::MetricsHub;
use crate::runtime::App;
use crate::site::ShardSite;

const PLAIN: u16 = 80;
const TLS: u16 = 443;

/// One in-memory connection: what the client sent and the server has not
/// read, what the server sent, and whether the client shut its side.
#[derive(Default)]
struct Pipe {
    to_server: VecDeque<u8>,
    to_client: Vec<u8>,
    client_fin: bool,
    server_shut: bool,
    closed: bool,
    aborted: bool,
}

/// Connections held in memory; `send` takes at most `room` bytes beyond
/// what the client has not read yet, so a slow reader blocks the server.
struct Pipes {
    conns: Vec<Pipe>,
    /// Connections waiting on each port's listener.
    backlog: Vec<(u16, u32)>,
    room: usize,
}

impl Transport for Pipes {
    type Conn = u32;
    type Listener = u16;
    type Event = HostEvent<u32, u16>;

    fn index(conn: u32) -> usize {
        conn as usize
    }

    fn classify(event: Self::Event) -> Self::Event {
        event
    }

    fn listen(&mut self, port: u16) -> Result<u16, String> {
        Ok(port)
    }

    fn unlisten(&mut self, _: u16) {}

    fn accept(&mut self, listener: u16) -> Option<(u32, SocketAddr)> {
        let at = self.backlog.iter().position(|&(port, _)| port == listener)?;
        let (_, conn) = self.backlog.remove(at);
        Some((conn, SocketAddr::from((Ipv4Addr::new(10, 0, 0, 2), 4000 + conn as u16))))
    }

    fn recv(&mut self, conn: u32, buf: &mut [u8]) -> Result<usize, TransportError> {
        let pipe = &mut self.conns[conn as usize];
        if pipe.to_server.is_empty() {
            return if pipe.client_fin { Ok(0) } else { Err(TransportError::WouldBlock) };
        }
        let n = pipe.to_server.len().min(buf.len());
        for (dst, src) in buf.iter_mut().zip(pipe.to_server.drain(..n)) {
            *dst = src;
        }
        Ok(n)
    }

    fn send(&mut self, conn: u32, data: &[u8]) -> Result<usize, TransportError> {
        let pipe = &mut self.conns[conn as usize];
        assert!(!pipe.server_shut, "a send after shutdown");
        let n = data.len().min(self.room.saturating_sub(pipe.to_client.len()));
        if n == 0 {
            return Err(TransportError::WouldBlock);
        }
        pipe.to_client.extend_from_slice(&data[..n]);
        Ok(n)
    }

    fn shutdown(&mut self, conn: u32) {
        self.conns[conn as usize].server_shut = true;
    }

    fn close(&mut self, conn: u32) {
        self.conns[conn as usize].closed = true;
    }

    fn abort(&mut self, conn: u32) {
        self.conns[conn as usize].aborted = true;
    }
}

/// A certificate for `localhost` and its key, as PEM files in a fresh
/// directory, and the certificate for a client's roots.
struct Credentials {
    dir: PathBuf,
    cert: PathBuf,
    key: PathBuf,
    der: CertificateDer<'static>,
}

impl Credentials {
    fn new(name: &str) -> Credentials {
        let dir = std::env::temp_dir().join(format!("fairway-tls-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let (cert, key) = (dir.join("cert.pem"), dir.join("key.pem"));
        let der = Credentials::write(&cert, &key);
        Credentials { dir, cert, key, der }
    }

    /// A new self-signed certificate and key into `cert` and `key`.
    fn write(cert: &std::path::Path, key: &std::path::Path) -> CertificateDer<'static> {
        let rcgen::CertifiedKey { cert: c, signing_key } =
            rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
        std::fs::write(cert, c.pem()).unwrap();
        std::fs::write(key, signing_key.serialize_pem()).unwrap();
        c.der().clone()
    }

    fn keys(&self) -> Arc<TlsKeys> {
        Arc::new(TlsKeys::load(&self.cert, &self.key).unwrap())
    }
}

impl Drop for Credentials {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A client config trusting `der`, offering `alpn`, limited to `versions`.
fn client_config(
    der: &CertificateDer<'static>,
    versions: &[&'static rustls::SupportedProtocolVersion],
    alpn: &[&[u8]],
) -> Arc<ClientConfig> {
    let mut roots = RootCertStore::empty();
    roots.add(der.clone()).unwrap();
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = ClientConfig::builder_with_provider(provider)
        .with_protocol_versions(versions)
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = alpn.iter().map(|p| p.to_vec()).collect();
    Arc::new(config)
}

/// A host serving the built-in endpoints on a plain port and a TLS port
/// over [`Pipes`], and the clients of its connections.
struct Bench {
    host: Host<Tls<Pipes>, HttpService<Router>>,
    t: Tls<Pipes>,
    clients: Vec<Option<ClientConnection>>,
    now: Instant,
}

impl Bench {
    fn new(keys: Arc<TlsKeys>, room: usize) -> Bench {
        let hub = Arc::new(MetricsHub::new(1, 4, "test"));
        let mut host = Host::with_service(
            HttpService::new(HttpConfig::default()),
            ShardSite::new(0, hub, None, 4).unwrap(),
            Arc::new(ConnectionLimit::new(64)),
            Arc::new(AtomicBool::new(false)),
            StdDuration::from_secs(5),
            WakeQueue::new(None),
        )
        .with_ports(&[PLAIN, TLS]);
        let mut t = Tls::new(Pipes { conns: Vec::new(), backlog: Vec::new(), room }, keys, &[TLS]);
        let now = Instant::from_secs(1);
        host.start(&mut t, now);
        Bench { host, t, clients: Vec::new(), now }
    }

    /// A new connection to `port`; a TLS client on it when `config` is
    /// given.
    fn connect(&mut self, port: u16, config: Option<&Arc<ClientConfig>>) -> u32 {
        let conn = self.t.inner().conns.len() as u32;
        self.t.inner_mut().conns.push(Pipe::default());
        self.t.inner_mut().backlog.push((port, conn));
        let client =
            config.map(|c| ClientConnection::new(Arc::clone(c), ServerName::try_from("localhost").unwrap()).unwrap());
        self.clients.push(client);
        self.host.on_event(&mut self.t, self.now, HostEvent::Acceptable(port));
        conn
    }

    /// The client's bytes (encrypted, if it speaks TLS) to the server, and
    /// an event for the connection.
    fn client_sends(&mut self, conn: u32, bytes: &[u8]) {
        let i = conn as usize;
        match &mut self.clients[i] {
            Some(tls) => {
                tls.writer().write_all(bytes).unwrap();
                let mut wire = Vec::new();
                while tls.wants_write() {
                    tls.write_tls(&mut wire).unwrap();
                }
                self.t.inner_mut().conns[i].to_server.extend(wire);
            }
            None => self.t.inner_mut().conns[i].to_server.extend(bytes),
        }
        self.event(conn);
    }

    /// Raw bytes from the client, past its TLS session.
    fn client_sends_raw(&mut self, conn: u32, bytes: &[u8]) {
        self.t.inner_mut().conns[conn as usize].to_server.extend(bytes);
        self.event(conn);
    }

    fn event(&mut self, conn: u32) {
        self.host.on_event(&mut self.t, self.now, HostEvent::Ready(conn));
        self.host.poll(&mut self.t, self.now);
    }

    /// Runs the connection until neither side moves: the client's TLS
    /// messages go to the server, the server's to the client, whose
    /// plaintext is returned. The server's output is read as a client
    /// would, which frees room below.
    fn exchange(&mut self, conn: u32) -> Vec<u8> {
        let i = conn as usize;
        let mut plaintext = Vec::new();
        for _ in 0..100_000 {
            let wire = std::mem::take(&mut self.t.inner_mut().conns[i].to_client);
            let mut moved = !wire.is_empty();
            match &mut self.clients[i] {
                Some(tls) => {
                    let mut rd = &wire[..];
                    while !rd.is_empty() {
                        tls.read_tls(&mut rd).unwrap();
                        tls.process_new_packets().expect("the server speaks TLS");
                        let _ = tls.reader().read_to_end(&mut plaintext);
                    }
                    let mut out = Vec::new();
                    while tls.wants_write() {
                        tls.write_tls(&mut out).unwrap();
                    }
                    moved |= !out.is_empty();
                    self.t.inner_mut().conns[i].to_server.extend(out);
                }
                None => plaintext.extend(wire),
            }
            if !moved {
                return plaintext;
            }
            self.event(conn);
        }
        panic!("the exchange never settled");
    }

    fn pipe(&self, conn: u32) -> &Pipe {
        &self.t.inner().conns[conn as usize]
    }
}

/// The body of one response at the start of `bytes`, and what follows it.
fn body(bytes: &[u8]) -> (&[u8], &[u8]) {
    let text = String::from_utf8_lossy(bytes);
    let head_end = text.find("\r\n\r\n").expect("a response head") + 4;
    let head = &text[..head_end].to_ascii_lowercase();
    let len: usize =
        head.lines().find_map(|l| l.strip_prefix("content-length:")).expect("a Content-Length").trim().parse().unwrap();
    (&bytes[head_end..head_end + len], &bytes[head_end + len..])
}

const PLAINTEXT: &[u8] = b"GET /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n";

#[test]
fn a_client_completes_the_handshake_with_http_1_1_and_is_served_keep_alive_over_tls_1_3_and_1_2() {
    let creds = Credentials::new("versions");
    let mut b = Bench::new(creds.keys(), usize::MAX);
    for (n, version) in [&rustls::version::TLS13, &rustls::version::TLS12].into_iter().enumerate() {
        let config = client_config(&creds.der, &[version], &[b"http/1.1"]);
        let conn = b.connect(TLS, Some(&config));
        b.exchange(conn);
        let client = b.clients[conn as usize].as_ref().unwrap();
        assert!(!client.is_handshaking());
        assert_eq!(client.protocol_version(), Some(version.version));
        assert_eq!(client.alpn_protocol(), Some(&b"http/1.1"[..]));
        assert_eq!(b.t.alpn(conn), Some(&b"http/1.1"[..]));
        for _ in 0..2 {
            b.client_sends(conn, PLAINTEXT);
            let got = b.exchange(conn);
            let (text, rest) = body(&got);
            assert_eq!((text, rest.len()), (&b"Hello, World!"[..], 0));
        }
        assert!(!b.pipe(conn).aborted && !b.pipe(conn).closed);
        assert_eq!(b.t.tls_counters().handshakes, n as u64 + 1);
    }
    assert_eq!(b.t.tls_counters().errors, 0);
}

#[test]
fn the_plain_port_beside_the_tls_port_passes_through_untouched() {
    let creds = Credentials::new("plain");
    let mut b = Bench::new(creds.keys(), usize::MAX);
    let conn = b.connect(PLAIN, None);
    b.client_sends(conn, PLAINTEXT);
    let got = b.exchange(conn);
    assert!(got.starts_with(b"HTTP/1.1 200 OK\r\n"), "{}", String::from_utf8_lossy(&got));
    assert_eq!(body(&got).0, b"Hello, World!");
    assert!(!b.t.is_tls(conn));
    assert_eq!(b.t.tls_counters().handshakes, 0);
}

#[test]
fn a_returning_client_resumes_its_session_with_a_ticket() {
    let creds = Credentials::new("resume");
    let mut b = Bench::new(creds.keys(), usize::MAX);
    for version in [&rustls::version::TLS13, &rustls::version::TLS12] {
        let config = client_config(&creds.der, &[version], &[b"http/1.1"]);
        let first = b.connect(TLS, Some(&config));
        b.client_sends(first, PLAINTEXT);
        assert_eq!(body(&b.exchange(first)).0, b"Hello, World!");
        assert_eq!(b.t.handshake_kind(first), Some(HandshakeKind::Full));
        let again = b.connect(TLS, Some(&config));
        b.client_sends(again, PLAINTEXT);
        assert_eq!(body(&b.exchange(again)).0, b"Hello, World!");
        assert_eq!(b.t.handshake_kind(again), Some(HandshakeKind::Resumed), "{version:?}");
        assert_eq!(b.clients[again as usize].as_ref().unwrap().handshake_kind(), Some(HandshakeKind::Resumed));
    }
    assert_eq!(b.t.tls_counters().resumed, 2);
}

#[test]
fn a_large_response_through_a_slow_reader_arrives_byte_exact() {
    let creds = Credentials::new("large");
    // The connection below takes at most 3000 bytes the client has not
    // read: the server blocks on almost every record.
    let mut b = Bench::new(creds.keys(), 3000);
    let config = client_config(&creds.der, &[&rustls::version::TLS13], &[b"http/1.1"]);
    let conn = b.connect(TLS, Some(&config));
    let n = 3_000_000;
    b.client_sends(conn, format!("GET /bytes/{n} HTTP/1.1\r\nHost: localhost\r\n\r\n").as_bytes());
    let got = b.exchange(conn);
    let (data, rest) = body(&got);
    assert_eq!((data.len(), rest.len()), (n, 0));
    // What /bytes/ sends, the server's own pattern.
    assert!(data.iter().enumerate().all(|(i, &byte)| byte == crate::http::pattern_byte(i as u64)), "a byte differs");
}

#[test]
fn connection_close_ends_with_close_notify_before_the_fin() {
    let creds = Credentials::new("close");
    let mut b = Bench::new(creds.keys(), usize::MAX);
    let config = client_config(&creds.der, &[&rustls::version::TLS13], &[b"http/1.1"]);
    let conn = b.connect(TLS, Some(&config));
    b.client_sends(conn, b"GET /plaintext HTTP/1.1\r\nHost: localhost\r\nConnection: close\r\n\r\n");
    let got = b.exchange(conn);
    assert_eq!(body(&got).0, b"Hello, World!");
    let client = b.clients[conn as usize].as_mut().unwrap();
    let mut rest = Vec::new();
    assert_eq!(client.reader().read_to_end(&mut rest).unwrap(), 0, "close_notify: a clean end");
    assert!(b.pipe(conn).server_shut, "the FIN follows it");
}

#[test]
fn garbage_or_a_refused_protocol_gets_an_alert_and_the_server_goes_on() {
    let creds = Credentials::new("garbage");
    let mut b = Bench::new(creds.keys(), usize::MAX);
    // Plain HTTP on the TLS port.
    let conn = b.connect(TLS, None);
    b.client_sends_raw(conn, PLAINTEXT);
    let alert = b.pipe(conn).to_client.clone();
    assert_eq!(alert.first(), Some(&21), "an alert record: {alert:?}");
    assert!(b.pipe(conn).server_shut && !b.pipe(conn).aborted, "then the FIN, no reset");
    // What the peer still sends is dropped; its FIN ends the linger.
    b.client_sends_raw(conn, b"more garbage");
    b.t.inner_mut().conns[conn as usize].client_fin = true;
    b.event(conn);
    assert!(b.pipe(conn).closed && !b.pipe(conn).aborted);
    // A client that speaks only h2.
    let config = client_config(&creds.der, &[&rustls::version::TLS13], &[b"h2"]);
    let conn = b.connect(TLS, Some(&config));
    let wire = {
        let client = b.clients[conn as usize].as_mut().unwrap();
        let mut out = Vec::new();
        client.write_tls(&mut out).unwrap();
        out
    };
    b.client_sends_raw(conn, &wire);
    let reply = b.pipe(conn).to_client.clone();
    let client = b.clients[conn as usize].as_mut().unwrap();
    client.read_tls(&mut &reply[..]).unwrap();
    let refused = client.process_new_packets().unwrap_err();
    assert!(refused.to_string().contains("NoApplicationProtocol"), "{refused}");
    assert!(b.pipe(conn).server_shut);
    // A handshake message longer than rustls takes (64 KiB): an alert too,
    // though rustls queues none for it.
    let conn = b.connect(TLS, None);
    let mut record = vec![22, 3, 1, 0x40, 0x00, 1, 0xff, 0xff, 0xff];
    record.resize(5 + 0x4000, 0);
    b.client_sends_raw(conn, &record);
    assert_eq!(b.pipe(conn).to_client, [21, 3, 3, 0, 2, 2, 50], "decode_error");
    assert!(b.pipe(conn).server_shut);
    // A ClientHello cut short, then the FIN: the connection ends.
    let config = client_config(&creds.der, &[&rustls::version::TLS13], &[b"http/1.1"]);
    let conn = b.connect(TLS, Some(&config));
    let mut hello = Vec::new();
    b.clients[conn as usize].as_mut().unwrap().write_tls(&mut hello).unwrap();
    b.client_sends_raw(conn, &hello[..hello.len() / 2]);
    b.t.inner_mut().conns[conn as usize].client_fin = true;
    b.event(conn);
    assert!(b.pipe(conn).closed || b.pipe(conn).aborted, "the connection ended");
    assert_eq!(b.t.tls_counters().errors, 3);
    // And a good client is served after all that.
    let conn = b.connect(TLS, Some(&config));
    b.client_sends(conn, PLAINTEXT);
    assert_eq!(body(&b.exchange(conn)).0, b"Hello, World!");
}

#[test]
fn a_bad_key_or_certificate_is_refused_with_the_file_named() {
    let creds = Credentials::new("bad");
    let other = creds.dir.join("other-key.pem");
    let other_cert = creds.dir.join("other-cert.pem");
    let _ = Credentials::write(&other_cert, &other);
    let err = TlsKeys::load(&creds.cert, &other).unwrap_err().to_string();
    assert!(err.contains("is not the key of the certificate") && err.contains("other-key.pem"), "{err}");
    let missing = creds.dir.join("missing.pem");
    let err = TlsKeys::load(&missing, &creds.key).unwrap_err().to_string();
    assert!(err.contains("--tls-cert") && err.contains("missing.pem"), "{err}");
    let err = TlsKeys::load(&creds.key, &creds.key).unwrap_err().to_string();
    assert!(err.contains("holds no PEM certificate"), "{err}");
    let err = TlsKeys::load(&creds.cert, &creds.cert).unwrap_err().to_string();
    assert!(err.contains("--tls-key") && err.contains("cert.pem"), "{err}");
}

#[test]
fn a_reload_serves_new_connections_with_the_new_certificate_and_keeps_the_old_ones() {
    let creds = Credentials::new("reload");
    let keys = creds.keys();
    let mut b = Bench::new(Arc::clone(&keys), usize::MAX);
    let old = client_config(&creds.der, &[&rustls::version::TLS13], &[b"http/1.1"]);
    let before = b.connect(TLS, Some(&old));
    b.client_sends(before, PLAINTEXT);
    assert_eq!(body(&b.exchange(before)).0, b"Hello, World!");
    // A broken file: refused, and what was served stays.
    std::fs::write(&creds.key, "not a key").unwrap();
    assert!(keys.reload().is_err());
    // New files: new connections get the new certificate.
    let new_der = Credentials::write(&creds.cert, &creds.key);
    keys.reload().unwrap();
    let new = client_config(&new_der, &[&rustls::version::TLS13], &[b"http/1.1"]);
    let after = b.connect(TLS, Some(&new));
    b.client_sends(after, PLAINTEXT);
    assert_eq!(body(&b.exchange(after)).0, b"Hello, World!");
    // The old connection goes on.
    b.client_sends(before, PLAINTEXT);
    assert_eq!(body(&b.exchange(before)).0, b"Hello, World!");
    // A new client trusting only the old certificate is refused now (one
    // with a session of before would resume it: the ticket key stays).
    let stranger = client_config(&creds.der, &[&rustls::version::TLS13], &[b"http/1.1"]);
    let refused = b.connect(TLS, Some(&stranger));
    let mut hello = Vec::new();
    b.clients[refused as usize].as_mut().unwrap().write_tls(&mut hello).unwrap();
    b.client_sends_raw(refused, &hello);
    let reply = b.pipe(refused).to_client.clone();
    let client = b.clients[refused as usize].as_mut().unwrap();
    client.read_tls(&mut &reply[..]).unwrap();
    assert!(client.process_new_packets().is_err(), "the old root does not verify the new certificate");
}
