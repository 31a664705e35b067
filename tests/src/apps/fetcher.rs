//! Fairway as an HTTP client: one `GET` over a fresh connection, the body
//! hashed as it arrives (`Connection: close`, so the body ends at the
//! server's FIN). The real-peer tests point it at a kernel server
//! (Python's `http.server`) and compare the digest with the file's.

use std::net::SocketAddrV4;

use fairway::runtime::App;
use fairway_stack::time::Instant;
use fairway_stack::{ConnectionError, Event, Handle, Shard};
use sha2::{Digest, Sha256};

/// What a fetch got.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fetched {
    /// The response's status code.
    pub status: u16,
    /// Bytes of body received.
    pub body_len: u64,
    /// SHA-256 of the body, lowercase hex.
    pub sha256: String,
}

/// Why a fetch failed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum FetchError {
    /// `connect` refused to start (no route, bad address, ...).
    Connect(String),
    /// The connection failed.
    Connection(ConnectionError),
    /// The response head did not parse.
    BadResponse,
    /// The server closed before the head was complete.
    Truncated,
}

/// One `GET path` to `server`.
pub struct Fetcher {
    server: SocketAddrV4,
    path: String,
    handle: Option<Handle>,
    head: Vec<u8>,
    status: Option<u16>,
    body_len: u64,
    digest: Sha256,
    /// The outcome, once there is one.
    pub outcome: Option<Result<Fetched, FetchError>>,
}

impl Fetcher {
    /// A fetch of `path` (starting with `/`) from `server`.
    #[must_use]
    pub fn new(server: SocketAddrV4, path: &str) -> Fetcher {
        Fetcher {
            server,
            path: path.to_owned(),
            handle: None,
            head: Vec::new(),
            status: None,
            body_len: 0,
            digest: Sha256::new(),
            outcome: None,
        }
    }

    fn body(&mut self, data: &[u8]) {
        self.body_len += data.len() as u64;
        self.digest.update(data);
    }

    fn on_data(&mut self, data: &[u8]) -> Result<(), FetchError> {
        if self.status.is_some() {
            self.body(data);
            return Ok(());
        }
        self.head.extend_from_slice(data);
        let mut headers = [httparse::EMPTY_HEADER; 32];
        let mut response = httparse::Response::new(&mut headers);
        match response.parse(&self.head) {
            Ok(httparse::Status::Complete(len)) => {
                self.status = Some(response.code.ok_or(FetchError::BadResponse)?);
                let rest = self.head.split_off(len);
                self.body(&rest);
                Ok(())
            }
            Ok(httparse::Status::Partial) => Ok(()),
            Err(_) => Err(FetchError::BadResponse),
        }
    }

    fn finish(&mut self, shard: &mut Shard, outcome: Result<Fetched, FetchError>) {
        if let Some(h) = self.handle.take() {
            shard.close(h);
        }
        self.outcome.get_or_insert(outcome);
    }
}

impl super::Leaves for Fetcher {
    type Left = Fetcher;

    fn leave(self) -> Fetcher {
        self
    }
}

impl App for Fetcher {
    fn start(&mut self, shard: &mut Shard, now: Instant) {
        match shard.connect(now, self.server) {
            Ok(h) => self.handle = Some(h),
            Err(e) => self.outcome = Some(Err(FetchError::Connect(e.to_string()))),
        }
    }

    fn on_event(&mut self, shard: &mut Shard, _: Instant, event: Event) {
        match event {
            Event::Connected(h) => {
                let request =
                    format!("GET {} HTTP/1.1\r\nHost: {}\r\nConnection: close\r\n\r\n", self.path, self.server);
                // A request this small always fits an empty send buffer.
                let sent = shard.send(h, request.as_bytes());
                debug_assert_eq!(sent, Ok(request.len()));
            }
            Event::Readable(h) | Event::HangUp(h) => {
                let mut buf = [0u8; 16 * 1024];
                loop {
                    match shard.recv(h, &mut buf) {
                        Ok(0) => {
                            let outcome = match self.status {
                                Some(status) => Ok(Fetched {
                                    status,
                                    body_len: self.body_len,
                                    sha256: super::hex(&self.digest.clone().finalize()),
                                }),
                                None => Err(FetchError::Truncated),
                            };
                            self.finish(shard, outcome);
                            return;
                        }
                        Ok(n) => {
                            if let Err(e) = self.on_data(&buf[..n]) {
                                self.finish(shard, Err(e));
                                return;
                            }
                        }
                        Err(_) => return,
                    }
                }
            }
            Event::Error(_, e) => self.finish(shard, Err(FetchError::Connection(e))),
            Event::Acceptable(_) | Event::Writable(_) => {}
        }
    }

    fn finished(&self) -> bool {
        self.outcome.is_some()
    }
}
