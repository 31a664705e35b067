//! Two shards, a client and a server with live connections in every
//! state, and a fuzzer that decides everything between them: which frames
//! arrive, in what order, twice or not at all; header fields rewritten
//! (checksums fixed, so the stack's logic sees them, not its checksum
//! check); raw frames; what each side's application does; and the clock.
//! Nothing may panic, and the server's counts stay within its limits.
#![no_main]

use std::collections::VecDeque;
use std::net::{Ipv4Addr, SocketAddrV4};

use arbitrary::Arbitrary;
use fairway_stack::time::{Duration, Instant};
use fairway_stack::{Config, Event, Handle, Shard};
use libfuzzer_sys::fuzz_target;
use smoltcp::wire::{IpAddress, Ipv4Address, Ipv4Packet, TcpPacket};

/// Each input builds two shards and drops them, and a shard's first
/// connection allocates a whole slab chunk (1,024 slots). glibc hands such
/// blocks back to the kernel on free, so every input page-faulted them in
/// again (a third of the run's time); mimalloc keeps them for the next input.
#[global_allocator]
static ALLOCATOR: mimalloc::MiMalloc = mimalloc::MiMalloc;

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
/// Ethernet + IPv4 (no options, as the shards send).
const TCP_AT: usize = 14 + 20;

#[derive(Arbitrary, Debug)]
enum Field {
    Seq,
    Ack,
    Flags,
    Window,
    DataOffset,
    /// A byte of the options or payload.
    Byte(u8),
}

#[derive(Arbitrary, Debug)]
enum Op {
    Connect,
    ClientSend {
        conn: u8,
        len: u16,
    },
    ClientClose {
        conn: u8,
    },
    ClientAbort {
        conn: u8,
    },
    ServerSend {
        conn: u8,
        len: u16,
    },
    ServerClose {
        conn: u8,
    },
    ServerAbort {
        conn: u8,
    },
    /// The next frames each way, as they are.
    Deliver {
        to_server: u8,
        to_client: u8,
    },
    DropNext,
    DuplicateNext,
    SwapNext,
    /// Rewrites a field of the next frame to the server.
    Mutate {
        field: Field,
        value: u32,
    },
    /// Any bytes, as a frame to the server.
    Raw(Vec<u8>),
    Advance {
        ms: u16,
    },
}

fn mac(ip: Ipv4Addr) -> [u8; 6] {
    let [a, b, c, d] = ip.octets();
    [2, 0, a, b, c, d]
}

struct World {
    now: Instant,
    server: Shard,
    client: Shard,
    clients: Vec<Handle>,
    served: Vec<Handle>,
    to_server: VecDeque<Vec<u8>>,
    to_client: VecDeque<Vec<u8>>,
    /// Frames delivered or dropped, kept for the next ones to be copied into.
    spare: Vec<Vec<u8>>,
    buf: Vec<u8>,
    scratch: Vec<u8>,
}

/// Frames queued each way at most: a fuzz case cannot grow them without end.
const QUEUED: usize = 512;

impl World {
    fn new() -> World {
        let mut config = Config::new(mac(SERVER), SERVER, 24);
        config.limits.max_connections = 8;
        let mut server = Shard::new(config);
        let mut client = Shard::new(Config::new(mac(CLIENT), CLIENT, 24));
        server.add_neighbor(CLIENT, mac(CLIENT));
        client.add_neighbor(SERVER, mac(SERVER));
        server.listen(SocketAddrV4::new(SERVER, 80)).expect("a port to listen on");
        World {
            now: Instant::from_secs(1),
            server,
            client,
            clients: Vec::new(),
            served: Vec::new(),
            to_server: VecDeque::new(),
            to_client: VecDeque::new(),
            spare: Vec::new(),
            buf: vec![0; 2048],
            scratch: vec![0; 4096],
        }
    }

    /// Timers, the applications' answers to events, and what each side
    /// has to send, queued (not delivered).
    fn settle(&mut self) {
        let now = self.now;
        for shard in [&mut self.server, &mut self.client] {
            if shard.poll_timeout().is_some_and(|at| at <= now) {
                shard.handle_timeout(now);
            }
        }
        let scratch = &mut self.scratch;
        while let Some(event) = self.server.poll_event() {
            match event {
                Event::Acceptable(l) => {
                    while let Some(h) = self.server.accept(l) {
                        self.served.push(h);
                    }
                }
                Event::Readable(h) | Event::HangUp(h) => {
                    while matches!(self.server.recv(h, scratch), Ok(n) if n > 0) {}
                }
                Event::Error(h, _) => self.server.close(h),
                Event::Connected(_) | Event::Writable(_) => {}
            }
        }
        while let Some(event) = self.client.poll_event() {
            if let Event::Readable(h) | Event::HangUp(h) = event {
                while matches!(self.client.recv(h, scratch), Ok(n) if n > 0) {}
            }
        }
        for (shard, queue) in [(&mut self.server, &mut self.to_client), (&mut self.client, &mut self.to_server)] {
            for _ in 0..256 {
                let Some(n) = shard.poll_transmit(now, &mut self.buf) else { break };
                let mut frame = self.spare.pop().unwrap_or_default();
                frame.clear();
                frame.extend_from_slice(&self.buf[..n]);
                queue.push_back(frame);
            }
            while queue.len() > QUEUED {
                self.spare.extend(queue.pop_back());
            }
        }
    }

    /// Hands the next `n` frames of `queue` to `shard`.
    fn deliver(now: Instant, shard: &mut Shard, queue: &mut VecDeque<Vec<u8>>, spare: &mut Vec<Vec<u8>>, n: u8) {
        for _ in 0..n % 16 {
            let Some(frame) = queue.pop_front() else { break };
            shard.handle_frame(now, &frame);
            spare.push(frame);
        }
    }
}

/// What one side's application does to one of its connections. (The
/// fuzzer's `Op` keeps a variant for each, so the corpus still decodes.)
enum Act {
    Send(u16),
    Close,
    Abort,
}

/// `act` on the connection of `handles` that `conn` picks, if there is one.
fn act(shard: &mut Shard, handles: &[Handle], conn: u8, act: Act) {
    const DATA: [u8; 8192] = [0x5a; 8192];
    let Some(&h) = handles.get(usize::from(conn) % handles.len().max(1)) else { return };
    match act {
        Act::Send(len) => {
            let _ = shard.send(h, &DATA[..usize::from(len) % DATA.len()]);
        }
        Act::Close => shard.close(h),
        Act::Abort => shard.abort(h),
    }
}

/// Rewrites `field` of a TCP frame and fixes its checksums.
fn mutate(frame: &mut [u8], field: &Field, value: u32) {
    if frame.len() < TCP_AT + 20 {
        return;
    }
    {
        let mut tcp = TcpPacket::new_unchecked(&mut frame[TCP_AT..]);
        match field {
            Field::Seq => tcp.set_seq_number(smoltcp::wire::TcpSeqNumber(value as i32)),
            Field::Ack => tcp.set_ack_number(smoltcp::wire::TcpSeqNumber(value as i32)),
            Field::Window => tcp.set_window_len(value as u16),
            Field::Flags | Field::DataOffset | Field::Byte(_) => {}
        }
    }
    match field {
        // The flags byte (with the reserved bits and NS).
        Field::Flags => frame[TCP_AT + 13] = value as u8,
        Field::DataOffset => frame[TCP_AT + 12] = value as u8,
        Field::Byte(at) => {
            let at = TCP_AT + 20 + usize::from(*at);
            if at < frame.len() {
                frame[at] = value as u8;
            }
        }
        _ => {}
    }
    let Ok(ip) = Ipv4Packet::new_checked(&frame[14..]) else { return };
    let (src, dst, len) = (ip.src_addr(), ip.dst_addr(), usize::from(ip.total_len()));
    if len < 20 || 14 + len > frame.len() {
        return;
    }
    let mut tcp = TcpPacket::new_unchecked(&mut frame[TCP_AT..14 + len]);
    tcp.fill_checksum(&IpAddress::Ipv4(Ipv4Address::from(src)), &IpAddress::Ipv4(Ipv4Address::from(dst)));
}

fuzz_target!(|ops: Vec<Op>| {
    let mut w = World::new();
    for op in ops.into_iter().take(128) {
        match op {
            Op::Connect => {
                if let Ok(h) = w.client.connect(w.now, SocketAddrV4::new(SERVER, 80)) {
                    w.clients.push(h);
                }
            }
            Op::ClientSend { conn, len } => act(&mut w.client, &w.clients, conn, Act::Send(len)),
            Op::ClientClose { conn } => act(&mut w.client, &w.clients, conn, Act::Close),
            Op::ClientAbort { conn } => act(&mut w.client, &w.clients, conn, Act::Abort),
            Op::ServerSend { conn, len } => act(&mut w.server, &w.served, conn, Act::Send(len)),
            Op::ServerClose { conn } => act(&mut w.server, &w.served, conn, Act::Close),
            Op::ServerAbort { conn } => act(&mut w.server, &w.served, conn, Act::Abort),
            Op::Deliver { to_server, to_client } => {
                World::deliver(w.now, &mut w.server, &mut w.to_server, &mut w.spare, to_server);
                World::deliver(w.now, &mut w.client, &mut w.to_client, &mut w.spare, to_client);
            }
            Op::DropNext => w.spare.extend(w.to_server.pop_front()),
            Op::DuplicateNext => {
                if let Some(first) = w.to_server.front().cloned() {
                    w.to_server.push_front(first);
                }
            }
            Op::SwapNext => {
                if w.to_server.len() >= 2 {
                    w.to_server.swap(0, 1);
                }
            }
            Op::Mutate { field, value } => {
                if let Some(frame) = w.to_server.front_mut() {
                    mutate(frame, &field, value);
                }
            }
            Op::Raw(bytes) => w.server.handle_frame(w.now, &bytes),
            Op::Advance { ms } => w.now = w.now + Duration::from_millis(u64::from(ms) * 4),
        }
        w.settle();
        assert!(w.server.connection_count() <= 8 + w.server.time_wait_count(), "over the connection limit");
    }
});
