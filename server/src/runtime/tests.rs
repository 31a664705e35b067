//! The loop over a real file descriptor: two shards on two threads, joined
//! by a datagram socket pair (`fairway_nic::socket_pair`), in wall-clock time.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use fairway_nic::socket_pair::{SocketPairEnd, socket_pair};
use fairway_stack::time::Instant;
use fairway_stack::{Config, Event, Handle, Shard};

use super::shards::{join_all, spawn};
use super::{App, LoopConfig};

const SERVER: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 1);
const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 0, 0, 2);
const SERVER_MAC: [u8; 6] = [2, 0, 0, 0, 0, 1];
const CLIENT_MAC: [u8; 6] = [2, 0, 0, 0, 0, 2];

/// Echoes everything back on every accepted connection. What the send
/// buffer cannot take yet waits in `pending`, and nothing more is read until
/// it is out (the client may be descheduled and stop reading for a while).
#[derive(Default)]
struct Echo {
    listener: Option<fairway_stack::Listener>,
    buf: Vec<u8>,
    pending: Vec<u8>,
    peer_done: bool,
}

impl Echo {
    /// Sends what is pending; returns whether all of it went.
    fn flush(&mut self, shard: &mut Shard, h: Handle) -> bool {
        while !self.pending.is_empty() {
            match shard.send(h, &self.pending) {
                Ok(0) | Err(_) => return false,
                Ok(n) => {
                    self.pending.drain(..n);
                }
            }
        }
        true
    }

    fn echo(&mut self, shard: &mut Shard, h: Handle) {
        while self.flush(shard, h) && !self.peer_done {
            match shard.recv(h, &mut self.buf) {
                Ok(0) => self.peer_done = true,
                Ok(n) => self.pending.extend_from_slice(&self.buf[..n]),
                Err(_) => return,
            }
        }
        if self.peer_done && self.pending.is_empty() {
            shard.close(h);
        }
    }
}

impl App for Echo {
    fn start(&mut self, shard: &mut Shard, _: Instant) {
        self.listener = Some(shard.listen(SocketAddrV4::new(SERVER, 7)).unwrap());
        self.buf = vec![0; 65536];
    }
    fn on_event(&mut self, shard: &mut Shard, _: Instant, event: Event) {
        match event {
            Event::Acceptable(l) => while shard.accept(l).is_some() {},
            Event::Readable(h) | Event::Writable(h) | Event::HangUp(h) => self.echo(shard, h),
            _ => {}
        }
    }
}

/// Sends `total` bytes of a pattern and reads them back.
struct Pump {
    total: usize,
    sent: usize,
    received: Vec<u8>,
    handle: Option<Handle>,
    done: bool,
}

impl Pump {
    fn byte(i: usize) -> u8 {
        (i % 251) as u8
    }
    fn push(&mut self, shard: &mut Shard) {
        let Some(h) = self.handle else { return };
        while self.sent < self.total {
            let chunk: Vec<u8> = (self.sent..self.total.min(self.sent + 8192)).map(Pump::byte).collect();
            match shard.send(h, &chunk) {
                Ok(0) | Err(_) => break,
                Ok(n) => self.sent += n,
            }
        }
    }
}

impl App for Pump {
    fn start(&mut self, shard: &mut Shard, now: Instant) {
        self.handle = Some(shard.connect(now, SocketAddrV4::new(SERVER, 7)).unwrap());
    }
    fn on_event(&mut self, shard: &mut Shard, _: Instant, event: Event) {
        match event {
            Event::Connected(_) | Event::Writable(_) => self.push(shard),
            Event::Readable(h) => {
                let mut buf = [0u8; 16384];
                while let Ok(n) = shard.recv(h, &mut buf) {
                    if n == 0 {
                        break;
                    }
                    self.received.extend_from_slice(&buf[..n]);
                }
                if self.received.len() == self.total {
                    shard.close(h);
                    self.done = true;
                }
            }
            Event::Error(_, e) => panic!("client connection failed: {e:?}"),
            _ => {}
        }
    }
    fn finished(&self) -> bool {
        self.done
    }
}

fn shard(mac: [u8; 6], ip: Ipv4Addr, peer: (Ipv4Addr, [u8; 6])) -> Shard {
    let mut config = Config::new(mac, ip, 24);
    config.tcp.rx_buffer = 256 * 1024;
    config.tcp.tx_buffer = 256 * 1024;
    let mut shard = Shard::new(config);
    shard.add_neighbor(peer.0, peer.1);
    shard
}

#[test]
fn two_shard_loops_move_a_megabyte_through_a_real_descriptor() {
    let (server_wire, client_wire) = socket_pair().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let config = LoopConfig::default();
    let server = spawn(0, false, config, stop.clone(), move || {
        Ok((shard(SERVER_MAC, SERVER, (CLIENT, CLIENT_MAC)), server_wire, Echo::default()))
    })
    .unwrap();
    let total = 1 << 20;
    let client = spawn(1, false, config, Arc::new(AtomicBool::new(false)), move || {
        let pump = Pump { total, sent: 0, received: Vec::new(), handle: None, done: false };
        Ok((shard(CLIENT_MAC, CLIENT, (SERVER, SERVER_MAC)), client_wire, pump))
    })
    .unwrap();
    // The client finishes by itself; a watchdog bounds the test.
    let watchdog = {
        let stop = stop.clone();
        std::thread::spawn(move || {
            std::thread::sleep(Duration::from_secs(60));
            stop.store(true, Ordering::Relaxed);
        })
    };
    let client_exit = join_all(vec![client]).remove(0);
    stop.store(true, Ordering::Relaxed);
    let server_exit = join_all(vec![server]).remove(0);
    drop(watchdog);
    let stats = client_exit.result.unwrap();
    let server_stats = server_exit.result.unwrap();
    assert!(stats.frames_out > 700 && stats.frames_in > 700, "{stats:?}");
    assert!(server_stats.frames_in > 700 && server_stats.events > 0, "{server_stats:?}");
    let counters = server_exit.shard.unwrap().counters().clone();
    assert_eq!(counters.established, 1, "{counters}");
}

#[test]
fn the_stop_flag_ends_an_idle_loop_within_its_longest_sleep() {
    let (wire, _other) = socket_pair().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let config = LoopConfig { max_sleep: Duration::from_millis(20), ..LoopConfig::default() };
    let handle = spawn(0, false, config, stop.clone(), move || {
        Ok((shard(SERVER_MAC, SERVER, (CLIENT, CLIENT_MAC)), wire, Echo::default()))
    })
    .unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let asked = std::time::Instant::now();
    stop.store(true, Ordering::Relaxed);
    let exit = join_all(vec![handle]).remove(0);
    assert!(asked.elapsed() < Duration::from_secs(2));
    let stats = exit.result.unwrap();
    assert!(stats.sleeps >= 2, "an idle loop sleeps instead of spinning: {stats:?}");
    assert!(stats.turns < 10_000, "{stats:?}");
}

#[test]
fn a_factory_error_ends_the_shard_with_it() {
    let stop = Arc::new(AtomicBool::new(false));
    let handle = spawn::<Shard, SocketPairEnd, Echo, _>(0, false, LoopConfig::default(), stop, || {
        Err(io::Error::other("no such interface: fw9"))
    })
    .unwrap();
    let exit = join_all(vec![handle]).remove(0);
    assert_eq!(exit.result.unwrap_err().to_string(), "no such interface: fw9");
    assert!(exit.shard.is_none());
}
