//! Heap allocations per keep-alive request over TLS, in steady state: the
//! [`Tls`] transport with rustls's session, against rustls's client, in
//! memory; only the server's calls are counted.
//!
//! The HTTP layer allocates nothing per request (`http_alloc`); the TLS
//! layer allocates one buffer per record each way, freed within the
//! request: rustls 0.23's record layer decrypts each received record into
//! a `Vec` of its own (`CommonState::take_received_plaintext`) and
//! encrypts each sent one into one (`RecordLayer::encrypt_outgoing`), in
//! its buffered and its unbuffered API alike. Nothing of ours allocates,
//! and nothing is kept: this test holds that, and counts what rustls does.
//!
//! A test without libtest's harness (`harness = false`): the process has one
//! thread, so every allocation counted is the server's.

use std::collections::VecDeque;
use std::io::{Read, Write};
use std::net::SocketAddr;
use std::sync::Arc;

use fairway::host::{HostEvent, Transport, TransportError};
use fairway::tls::{Tls, TlsKeys};
use rustls::pki_types::ServerName;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, Stats, StatsAlloc};

#[global_allocator]
static GLOBAL: &StatsAlloc<std::alloc::System> = &INSTRUMENTED_SYSTEM;

/// One connection in memory, both ways.
#[derive(Default)]
struct Mem {
    to_server: VecDeque<u8>,
    to_client: Vec<u8>,
    accepted: bool,
}

impl Transport for Mem {
    type Conn = u32;
    type Listener = u16;
    type Event = u32;

    fn index(conn: u32) -> usize {
        conn as usize
    }
    fn classify(conn: u32) -> HostEvent<u32, u16> {
        HostEvent::Ready(conn)
    }
    fn listen(&mut self, port: u16) -> Result<u16, String> {
        Ok(port)
    }
    fn unlisten(&mut self, _: u16) {}
    fn accept(&mut self, _: u16) -> Option<(u32, SocketAddr)> {
        (!std::mem::replace(&mut self.accepted, true)).then(|| (0, SocketAddr::from(([127, 0, 0, 1], 5000))))
    }
    fn recv(&mut self, _: u32, buf: &mut [u8]) -> Result<usize, TransportError> {
        if self.to_server.is_empty() {
            return Err(TransportError::WouldBlock);
        }
        let n = self.to_server.len().min(buf.len());
        for (d, s) in buf.iter_mut().zip(self.to_server.drain(..n)) {
            *d = s;
        }
        Ok(n)
    }
    fn send(&mut self, _: u32, data: &[u8]) -> Result<usize, TransportError> {
        self.to_client.extend_from_slice(data);
        Ok(data.len())
    }
    fn shutdown(&mut self, _: u32) {}
    fn close(&mut self, _: u32) {}
    fn abort(&mut self, _: u32) {}
}

const REQUEST: &[u8] = b"GET /plaintext HTTP/1.1\r\nHost: localhost\r\n\r\n";
const RESPONSE: &[u8] = b"HTTP/1.1 200 OK\r\nServer: fairway\r\nContent-Type: text/plain\r\nContent-Length: 13\r\nDate: Wed, 02 Dec 2026 11:00:00 GMT\r\n\r\nHello, World!";

fn add(total: &mut Stats, s: Stats) {
    total.allocations += s.allocations;
    total.reallocations += s.reallocations;
    total.deallocations += s.deallocations;
    total.bytes_allocated += s.bytes_allocated;
}

fn main() {
    let dir = std::env::temp_dir().join(format!("fairway-tls-alloc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let made = rcgen::generate_simple_self_signed(vec!["localhost".to_owned()]).unwrap();
    let (cert, key) = (dir.join("c.pem"), dir.join("k.pem"));
    std::fs::write(&cert, made.cert.pem()).unwrap();
    std::fs::write(&key, made.signing_key.serialize_pem()).unwrap();
    let keys = Arc::new(TlsKeys::load(&cert, &key).unwrap());
    let mut roots = rustls::RootCertStore::empty();
    roots.add(made.cert.der().clone()).unwrap();
    let mut config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    let mut client =
        rustls::ClientConnection::new(Arc::new(config), ServerName::try_from("localhost").unwrap()).unwrap();

    let mut tls = Tls::new(Mem::default(), keys, &[443]);
    let listener = tls.listen(443).unwrap();
    let (conn, _) = tls.accept(listener).unwrap();
    let mut buf = vec![0u8; 16 * 1024];
    let mut total = Stats::default();
    for round in 0..11_000 {
        if round == 1_000 {
            total = Stats::default();
        }
        client.writer().write_all(REQUEST).unwrap();
        let mut wire = Vec::new();
        while client.wants_write() {
            client.write_tls(&mut wire).unwrap();
        }
        tls.inner_mut().to_server.extend(wire);
        // The server's turn, as the HTTP layer takes it.
        let region = Region::new(GLOBAL);
        let mut got = 0;
        while let Ok(n) = tls.recv(conn, &mut buf) {
            got += n;
        }
        if got > 0 {
            assert_eq!(tls.send(conn, RESPONSE), Ok(RESPONSE.len()));
        }
        add(&mut total, region.change());
        // Copied out, so the transport's buffer keeps its room.
        let wire = tls.inner().to_client.clone();
        tls.inner_mut().to_client.clear();
        let mut rd = &wire[..];
        while !rd.is_empty() {
            client.read_tls(&mut rd).unwrap();
            client.process_new_packets().unwrap();
        }
        let mut plain = Vec::new();
        let _ = client.reader().read_to_end(&mut plain);
        assert!(round < 2 || plain.ends_with(b"Hello, World!"), "round {round}: {plain:?}");
    }
    println!("10,000 keep-alive requests over TLS, the server's allocations: {total:?}");
    // One record in, one out, per request: one buffer each, freed.
    assert_eq!(total.allocations, 20_000, "{total:?}");
    assert_eq!((total.deallocations, total.reallocations), (total.allocations, 0), "{total:?}");
    println!("test steady_state_tls_requests_allocate_one_buffer_per_record_and_keep_none ... ok");
    let _ = std::fs::remove_dir_all(&dir);
}
