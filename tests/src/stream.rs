//! Endless downloads measured over a window of virtual time: the goodput
//! cells of the regression table.
//!
//! Each flow is one connection from a client host to the server. The client
//! sends an 8-byte flow id; the server answers with that flow's [`Pattern`]
//! for as long as the run lasts, and never closes. The client checks every
//! byte it reads against the pattern (so a partial stream is verified, which
//! a hash of the whole could not do) and counts the bytes it has read when
//! the measurement window ends: `window` after its handshake completed
//! ([`Event::Connected`]). The run is done when every flow's window has
//! passed or the flow failed.

use core::net::{Ipv4Addr, SocketAddrV4};
use std::collections::HashMap;

use fairway_stack::time::{Duration, Instant};
use fairway_stack::{Event, FlowStats, Handle, Listener, RecvError, SendError, Shard};

use crate::transfers::Pattern;
use crate::world::SimApp;

const ID_LEN: usize = 8;
/// How much of the pattern the server produces per `send` attempt; the send
/// buffer usually has room for a segment or two only.
const FILL_PIECE: usize = 4096;

/// What one flow measured.
#[derive(Clone, Debug)]
pub struct StreamResult {
    /// The client host.
    pub client: usize,
    /// When the client's handshake completed: the window's start.
    pub connected: Option<Instant>,
    /// Bytes the client read by the end of the window, once it has ended.
    pub bytes_in_window: Option<u64>,
    /// Bytes the client read in all.
    pub bytes_read: u64,
    /// A failure: a byte that differs from the pattern, a connection error,
    /// or the stream ending.
    pub error: Option<String>,
    /// The server's view of the flow when the window ended.
    pub server_flow: Option<FlowStats>,
    /// `Event::Error` seen for this flow, on either end.
    pub connection_errors: u32,
}

impl StreamResult {
    /// Measured to the end of its window, with every byte as sent.
    pub fn intact(&self) -> bool {
        self.error.is_none() && self.bytes_in_window.is_some()
    }

    /// The end of the measurement window, once the handshake completed.
    fn window_end(&self, window: Duration) -> Option<Instant> {
        Some(self.connected? + window)
    }
}

/// The server's side of one flow.
struct ServerFlow {
    id: [u8; ID_LEN],
    id_len: usize,
    /// Index into the results, once the id has arrived.
    flow: Option<usize>,
    sent: u64,
}

/// One endless download per entry of `clients`, measured over `window`.
pub struct Streams {
    server: usize,
    server_addr: SocketAddrV4,
    listener: Option<Listener>,
    window: Duration,
    /// Results, one per flow, in the order of the clients given.
    pub results: Vec<StreamResult>,
    /// Per flow, the client's handle once it connected.
    client_handles: Vec<Option<Handle>>,
    /// Per flow, the server's handle once the id arrived.
    server_handles: Vec<Option<Handle>>,
    servers: HashMap<Handle, ServerFlow>,
    buf: Vec<u8>,
    scratch: Vec<u8>,
    last_now: Instant,
}

impl Streams {
    /// A flow from each of `clients` (host indices, repeats allowed) to the
    /// server host `server` at `server_addr`.
    pub fn new(server: usize, server_addr: SocketAddrV4, clients: &[usize], window: Duration) -> Streams {
        let results = clients
            .iter()
            .map(|&client| StreamResult {
                client,
                connected: None,
                bytes_in_window: None,
                bytes_read: 0,
                error: None,
                server_flow: None,
                connection_errors: 0,
            })
            .collect();
        Streams {
            server,
            server_addr,
            listener: None,
            window,
            results,
            client_handles: vec![None; clients.len()],
            server_handles: vec![None; clients.len()],
            servers: HashMap::new(),
            buf: vec![0; 64 * 1024],
            scratch: vec![0; FILL_PIECE],
            last_now: Instant::ZERO,
        }
    }

    /// The flow whose pattern the id names.
    fn pattern(flow: usize) -> Pattern {
        Pattern::new(0x5717_0000 + flow as u64)
    }

    fn fail(&mut self, flow: usize, why: String) {
        let r = &mut self.results[flow];
        if r.error.is_none() && r.bytes_in_window.is_none() {
            r.error = Some(why);
        }
    }

    fn on_server(&mut self, shard: &mut Shard, now: Instant) {
        let l = match self.listener {
            Some(l) => l,
            None => {
                let addr = SocketAddrV4::new(Ipv4Addr::UNSPECIFIED, self.server_addr.port());
                let l = shard.listen(addr).unwrap_or_else(|e| panic!("listen on {addr}: {e}"));
                *self.listener.insert(l)
            }
        };
        while let Some(event) = shard.poll_event() {
            match event {
                Event::Acceptable(_) => {
                    while let Some(h) = shard.accept(l) {
                        self.servers.insert(h, ServerFlow { id: [0; ID_LEN], id_len: 0, flow: None, sent: 0 });
                        self.on_server_conn(shard, h);
                    }
                }
                Event::Error(h, e) => {
                    if let Some(flow) = self.servers.get(&h).and_then(|s| s.flow) {
                        self.results[flow].connection_errors += 1;
                        self.fail(flow, format!("server: {e}"));
                    }
                    self.servers.remove(&h);
                    shard.close(h);
                }
                Event::Readable(h) | Event::Writable(h) | Event::HangUp(h) => self.on_server_conn(shard, h),
                Event::Connected(_) => {}
            }
        }
        // Snapshot the server's view of each flow as its window ends.
        for flow in 0..self.results.len() {
            let r = &self.results[flow];
            if r.server_flow.is_none()
                && r.window_end(self.window).is_some_and(|end| now >= end)
                && let Some(h) = self.server_handles[flow]
            {
                self.results[flow].server_flow = shard.flow(h);
            }
        }
    }

    fn on_server_conn(&mut self, shard: &mut Shard, h: Handle) {
        let Some(mut conn) = self.servers.remove(&h) else { return };
        // The id first; anything after it (the client's FIN) is ignored.
        loop {
            let result = if conn.id_len < ID_LEN {
                shard.recv(h, &mut conn.id[conn.id_len..])
            } else {
                shard.recv(h, &mut self.buf)
            };
            match result {
                Ok(0) | Err(RecvError::WouldBlock) => break,
                Ok(n) if conn.id_len < ID_LEN => {
                    conn.id_len += n;
                    if conn.id_len == ID_LEN {
                        let flow = u64::from_be_bytes(conn.id) as usize;
                        if flow < self.results.len() && self.server_handles[flow].is_none() {
                            self.server_handles[flow] = Some(h);
                            conn.flow = Some(flow);
                        }
                    }
                }
                Ok(_) => {}
                Err(e) => {
                    if let Some(flow) = conn.flow {
                        self.fail(flow, format!("server recv: {e}"));
                    }
                    shard.close(h);
                    return;
                }
            }
        }
        if let Some(flow) = conn.flow {
            let pattern = Self::pattern(flow);
            loop {
                let piece = &mut self.buf[..FILL_PIECE];
                pattern.fill(conn.sent, piece);
                match shard.send(h, piece) {
                    Ok(k) => {
                        conn.sent += k as u64;
                        if k < FILL_PIECE {
                            break;
                        }
                    }
                    Err(SendError::WouldBlock) => break,
                    Err(e) => {
                        self.fail(flow, format!("server send: {e}"));
                        shard.close(h);
                        return;
                    }
                }
            }
        }
        self.servers.insert(h, conn);
    }

    fn on_client(&mut self, host: usize, shard: &mut Shard, now: Instant) {
        // The first visit opens the host's flows.
        for flow in 0..self.results.len() {
            if self.results[flow].client == host
                && self.client_handles[flow].is_none()
                && self.results[flow].error.is_none()
            {
                match shard.connect(now, self.server_addr) {
                    Ok(h) => self.client_handles[flow] = Some(h),
                    Err(e) => self.fail(flow, format!("connect: {e}")),
                }
            }
        }
        while let Some(event) = shard.poll_event() {
            let (Event::Connected(h) | Event::Readable(h) | Event::Writable(h) | Event::HangUp(h) | Event::Error(h, _)) =
                event
            else {
                continue;
            };
            let Some(flow) = self.client_handles.iter().position(|&c| c == Some(h)) else { continue };
            match event {
                Event::Connected(_) => {
                    self.results[flow].connected = Some(now);
                    match shard.send(h, &(flow as u64).to_be_bytes()) {
                        Ok(ID_LEN) => shard.shutdown(h),
                        Ok(n) => self.fail(flow, format!("client sent {n} of {ID_LEN} id bytes")),
                        Err(e) => self.fail(flow, format!("client send: {e}")),
                    }
                }
                Event::Error(_, e) => {
                    self.results[flow].connection_errors += 1;
                    self.fail(flow, format!("client: {e}"));
                }
                _ => self.read(flow, shard, h),
            }
        }
        // Close the windows that have ended.
        let window = self.window;
        for r in self.results.iter_mut().filter(|r| r.client == host) {
            if r.bytes_in_window.is_none() && r.error.is_none() && r.window_end(window).is_some_and(|e| now >= e) {
                r.bytes_in_window = Some(r.bytes_read);
            }
        }
    }

    fn read(&mut self, flow: usize, shard: &mut Shard, h: Handle) {
        let pattern = Self::pattern(flow);
        loop {
            match shard.recv(h, &mut self.buf) {
                Ok(0) => return self.fail(flow, "the server ended the stream".into()),
                Ok(n) => {
                    let offset = self.results[flow].bytes_read;
                    if !pattern.matches(offset, &self.buf[..n], &mut self.scratch) {
                        return self
                            .fail(flow, format!("bytes {offset}..{} differ from what was sent", offset + n as u64));
                    }
                    self.results[flow].bytes_read += n as u64;
                }
                Err(RecvError::WouldBlock) => return,
                Err(e) => return self.fail(flow, format!("client recv: {e}")),
            }
        }
    }
}

impl SimApp for Streams {
    fn on_host(&mut self, host: usize, shard: &mut Shard, now: Instant) {
        self.last_now = self.last_now.max(now);
        if host == self.server {
            self.on_server(shard, now);
        } else {
            self.on_client(host, shard, now);
        }
    }

    fn done(&self) -> bool {
        // A measured flow also waits for the server's snapshot, whichever
        // host the world visits first.
        self.results.iter().zip(&self.server_handles).all(|(r, server)| {
            r.error.is_some() || (r.bytes_in_window.is_some() && (r.server_flow.is_some() || server.is_none()))
        })
    }

    fn next_wakeup(&self) -> Option<Instant> {
        self.results
            .iter()
            .filter(|r| r.bytes_in_window.is_none() && r.error.is_none())
            .filter_map(|r| r.window_end(self.window))
            .filter(|&end| end > self.last_now)
            .min()
    }
}
