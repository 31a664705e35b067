//! A request/response workload that allocates nothing once warmed up, for
//! the allocation test and as the live traffic of the fuzz test.
//!
//! Each client keeps `conns_per_client` requests in flight. A request is
//! `request_len` bytes; the server answers each with `response_len` bytes
//! whose content depends on the request number, and the client checks every
//! byte. With [`Mode::KeepAlive`] requests reuse their connection; with
//! [`Mode::ConnectionPerRequest`] each request opens a connection that the
//! server closes after answering (HTTP/1.0 style).

use core::net::{Ipv4Addr, SocketAddrV4};

use fairway_stack::time::Instant;
use fairway_stack::{Event, Handle, Listener, RecvError, SendError, Shard};

use crate::world::SimApp;

/// How requests use connections.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// One connection carries request after request.
    KeepAlive,
    /// A new connection per request, closed by the server.
    ConnectionPerRequest,
}

/// What the clients ask for.
#[derive(Clone, Copy, Debug)]
pub struct Workload {
    /// How requests use connections.
    pub mode: Mode,
    /// Requests in flight per client host.
    pub conns_per_client: usize,
    /// Bytes per request (at least 8: it starts with the request number).
    pub request_len: usize,
    /// Bytes per response.
    pub response_len: usize,
    /// Requests to complete.
    pub target: u64,
}

/// Per-connection progress (both roles).
#[derive(Clone, Copy, Debug)]
struct Conn {
    handle: Handle,
    /// Request number this connection serves.
    request: u64,
    /// Bytes of the current message sent.
    sent: usize,
    /// Bytes of the current message received.
    received: usize,
    /// Client: the request is sent and the response awaited.
    awaiting: bool,
}

/// The workload.
pub struct RequestResponse {
    server: usize,
    server_addr: SocketAddrV4,
    listener: Option<Listener>,
    mode: Mode,
    conns_per_client: usize,
    request_len: usize,
    response_len: usize,
    /// Requests answered and verified.
    pub completed: u64,
    /// Stop after this many.
    pub target: u64,
    /// Responses whose bytes were wrong, and failed connections.
    pub errors: u64,
    next_request: u64,
    /// Per host, connection state indexed by handle index.
    conns: Vec<Vec<Option<Conn>>>,
    /// Per client host, connections it should have open.
    open: Vec<usize>,
    /// Per client host, keep-alive connections waiting for a request to send.
    idle: Vec<Vec<Handle>>,
    buf: Vec<u8>,
}

impl RequestResponse {
    /// `workload` on `hosts` hosts, with the server at index `server`.
    pub fn new(hosts: usize, server: usize, server_ip: Ipv4Addr, workload: Workload) -> RequestResponse {
        let Workload { mode, conns_per_client, request_len, response_len, target } = workload;
        RequestResponse {
            server,
            server_addr: SocketAddrV4::new(server_ip, 80),
            listener: None,
            mode,
            conns_per_client,
            request_len,
            response_len,
            completed: 0,
            target,
            errors: 0,
            next_request: 0,
            conns: (0..hosts).map(|_| vec![None; 1 << 16]).collect(),
            open: vec![0; hosts],
            idle: (0..hosts).map(|_| Vec::with_capacity(conns_per_client)).collect(),
            buf: vec![0; 64 * 1024],
        }
    }

    /// The byte at `offset` of the response to request `n`.
    fn response_byte(n: u64, offset: usize) -> u8 {
        (n as usize).wrapping_mul(31).wrapping_add(offset.wrapping_mul(7)) as u8
    }

    fn request_byte(n: u64, offset: usize) -> u8 {
        (n as usize).wrapping_add(offset) as u8
    }

    fn slot(&mut self, host: usize, h: Handle) -> &mut Option<Conn> {
        &mut self.conns[host][h.index() as usize]
    }

    fn on_server(&mut self, shard: &mut Shard) {
        let l = *self
            .listener
            .get_or_insert_with(|| shard.listen(SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, 80)).expect("listen"));
        let host = self.server;
        while let Some(event) = shard.poll_event() {
            match event {
                Event::Acceptable(_) => {
                    while let Some(h) = shard.accept(l) {
                        *self.slot(host, h) =
                            Some(Conn { handle: h, request: 0, sent: 0, received: 0, awaiting: false });
                        self.serve(shard, h);
                    }
                }
                Event::Readable(h) | Event::Writable(h) | Event::HangUp(h) => self.serve(shard, h),
                Event::Error(h, _) => {
                    self.errors += 1;
                    *self.slot(host, h) = None;
                    shard.close(h);
                }
                Event::Connected(_) => {}
            }
        }
    }

    /// Reads a whole request, then writes the whole response.
    fn serve(&mut self, shard: &mut Shard, h: Handle) {
        let host = self.server;
        let Some(mut c) = *self.slot(host, h) else { return };
        loop {
            if c.received < self.request_len {
                let want = self.request_len - c.received;
                match shard.recv(h, &mut self.buf[..want]) {
                    Ok(0) => {
                        *self.slot(host, h) = None;
                        shard.close(h);
                        return;
                    }
                    Ok(n) => {
                        if c.received == 0 && n >= 8 {
                            c.request = u64::from_le_bytes(self.buf[..8].try_into().unwrap_or_default());
                        }
                        c.received += n;
                        continue;
                    }
                    Err(RecvError::WouldBlock) => break,
                    Err(_) => {
                        *self.slot(host, h) = None;
                        shard.close(h);
                        return;
                    }
                }
            }
            // A whole request is in: answer it.
            while c.sent < self.response_len {
                let n = (self.response_len - c.sent).min(self.buf.len());
                for (i, b) in self.buf[..n].iter_mut().enumerate() {
                    *b = Self::response_byte(c.request, c.sent + i);
                }
                match shard.send(h, &self.buf[..n]) {
                    Ok(k) => c.sent += k,
                    Err(SendError::WouldBlock) => {
                        *self.slot(host, h) = Some(c);
                        return;
                    }
                    Err(_) => {
                        *self.slot(host, h) = None;
                        shard.close(h);
                        return;
                    }
                }
            }
            if self.mode == Mode::ConnectionPerRequest {
                *self.slot(host, h) = None;
                shard.close(h);
                return;
            }
            c.sent = 0;
            c.received = 0;
        }
        *self.slot(host, h) = Some(c);
    }

    fn on_client(&mut self, host: usize, shard: &mut Shard, now: Instant) {
        while let Some(event) = shard.poll_event() {
            match event {
                Event::Connected(h) | Event::Writable(h) | Event::Readable(h) | Event::HangUp(h) => {
                    self.client_io(host, shard, h);
                }
                Event::Error(h, _) => {
                    self.errors += 1;
                    if self.slot(host, h).take().is_some() {
                        self.open[host] -= 1;
                    }
                    shard.close(h);
                }
                Event::Acceptable(_) => {}
            }
        }
        while self.next_request < self.target
            && let Some(h) = self.idle[host].pop()
        {
            let request = self.next_request;
            if let Some(c) = self.slot(host, h).as_mut() {
                *c = Conn { request, sent: 0, received: 0, awaiting: true, ..*c };
                self.next_request += 1;
                self.client_io(host, shard, h);
            }
        }
        while self.open[host] < self.conns_per_client && self.next_request < self.target {
            match shard.connect(now, self.server_addr) {
                Ok(h) => {
                    let request = self.next_request;
                    self.next_request += 1;
                    *self.slot(host, h) = Some(Conn { handle: h, request, sent: 0, received: 0, awaiting: true });
                    self.open[host] += 1;
                    self.client_io(host, shard, h);
                }
                Err(_) => {
                    self.errors += 1;
                    break;
                }
            }
        }
    }

    fn client_io(&mut self, host: usize, shard: &mut Shard, h: Handle) {
        let Some(mut c) = *self.slot(host, h) else { return };
        loop {
            // Send the request.
            while c.awaiting && c.sent < self.request_len {
                let n = self.request_len - c.sent;
                for i in 0..n {
                    self.buf[i] = Self::request_byte(c.request, c.sent + i);
                }
                if c.sent == 0 {
                    self.buf[..8].copy_from_slice(&c.request.to_le_bytes());
                }
                match shard.send(h, &self.buf[..n]) {
                    Ok(k) => c.sent += k,
                    Err(SendError::WouldBlock) => break,
                    Err(_) => return self.client_failed(host, shard, h),
                }
            }
            // Read and check the response.
            match shard.recv(h, &mut self.buf) {
                Ok(0) => {
                    // The server closed: the end of a per-request connection.
                    if c.awaiting {
                        self.errors += 1;
                    }
                    *self.slot(host, h) = None;
                    self.open[host] -= 1;
                    shard.close(h);
                    return;
                }
                Ok(n) => {
                    for i in 0..n {
                        if self.buf[i] != Self::response_byte(c.request, c.received + i) {
                            self.errors += 1;
                            break;
                        }
                    }
                    c.received += n;
                    if c.received > self.response_len {
                        self.errors += 1;
                    }
                    if c.received == self.response_len && c.awaiting {
                        self.completed += 1;
                        c.awaiting = false;
                        if self.mode == Mode::KeepAlive {
                            if self.next_request < self.target {
                                c.request = self.next_request;
                                self.next_request += 1;
                                c.sent = 0;
                                c.received = 0;
                                c.awaiting = true;
                            } else {
                                self.idle[host].push(h);
                            }
                        }
                    }
                }
                Err(RecvError::WouldBlock) => break,
                Err(_) => return self.client_failed(host, shard, h),
            }
        }
        *self.slot(host, h) = Some(c);
    }

    fn client_failed(&mut self, host: usize, shard: &mut Shard, h: Handle) {
        self.errors += 1;
        if self.slot(host, h).take().is_some() {
            self.open[host] -= 1;
        }
        shard.close(h);
    }

    /// The live client connections on `host` (keep-alive mode), for tests
    /// that target them.
    pub fn client_handles(&self, host: usize) -> impl Iterator<Item = Handle> + '_ {
        self.conns[host].iter().flatten().map(|c| c.handle)
    }
}

impl SimApp for RequestResponse {
    fn on_host(&mut self, host: usize, shard: &mut Shard, now: Instant) {
        if host == self.server {
            self.on_server(shard);
        } else {
            self.on_client(host, shard, now);
        }
    }

    fn done(&self) -> bool {
        self.completed >= self.target
    }
}
