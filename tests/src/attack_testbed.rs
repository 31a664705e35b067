//! A TCP attack against the `fairway` server over AF_XDP on a testbed: the
//! scripted attacker of [`crate::attacks`] on a raw `AF_PACKET` port of a
//! client namespace ([`PacketPort`]), at an address that namespace's kernel
//! does not own (so the kernel leaves its connections alone), while kernel
//! curl clients in another namespace download through the same server.
//!
//! [`live_attack`] runs one round: the legitimate downloads (their SHA-256
//! checked) and the attacker's four `GET /bytes/4MiB` connections, which
//! misbehave for 2 s and then behave so that their bodies must arrive
//! intact. It measures the legitimate goodput, the server shard's CPU time
//! (from `/proc`, its thread only), the frames it received, the process's
//! RSS and the connections the server still holds afterwards.
//!
//! Root only; traffic stays inside the testbed's namespaces.

use core::net::{Ipv4Addr, SocketAddrV4};
use std::sync::atomic::{AtomicU16, Ordering};
use std::time::{Duration, Instant};

use fairway::ServerHandle;
use fairway_nic::packet_port::PacketPort;

use crate::attacks::{Attack, AttackParams, Attacker, Request};
use crate::platform::gauge;
use crate::real_peers::{parse_mac, pattern_sha256};
use crate::stats::{
    machine_cpu_ticks, own_thread_cpu_time, process_cpu_time, processes_named, rss_kib, thread_cpu_time, threads_named,
};
use crate::testbed::{self, CLIENT_IF, Testbed};
use crate::world::{RawHost, raw_turn};

/// The attacker's address: host 200 of the testbed's subnet, which no
/// namespace owns.
#[must_use]
pub fn attacker_ip(tb: &Testbed) -> Ipv4Addr {
    let [a, b, c, _] = tb.server_ip().octets();
    Ipv4Addr::new(a, b, c, 200)
}

/// What one round measured.
#[derive(Clone, Debug)]
pub struct LiveRound {
    /// The attack (or [`Attack::Honest`]).
    pub attack: Attack,
    /// Legitimate downloads intact, of all.
    pub legitimate_intact: (usize, usize),
    /// Their bytes over the wall time from the first start to the last end, Mbit/s.
    pub goodput_mbps: f64,
    /// That wall time.
    pub download_time: Duration,
    /// From the same start to the attacker's end (done, or its limit).
    pub attacker_time: Duration,
    /// The attacker's transfers intact, of all.
    pub attacker_intact: (usize, usize),
    /// A line for each of its connections that did not complete intact.
    pub attacker_unfinished: Vec<String>,
    /// Frames its port dropped (truncated, super-frames, refused sends).
    pub port_dropped: u64,
    /// Frames the attacker sent, and of them forged.
    pub attacker_sent: u64,
    /// Frames sent only for the attack.
    pub forged: u64,
    /// The server shard's CPU time during the round.
    pub shard_cpu: Duration,
    /// The attacker's CPU time (its thread) during the round.
    pub attacker_cpu: Duration,
    /// The link emulators' CPU time (every `fairway-linkem` of the
    /// testbed: the server's link carries each forged frame once).
    pub linkem_cpu: Duration,
    /// How busy the machine's CPUs were over the round, 0 to 1 (both cores
    /// at work: 1): when near 1, the link emulator, the attacker and the
    /// clients compete with the server for CPU and the goodput says as
    /// much about the machine as about the server.
    pub machine_busy: f64,
    /// Frames the server received during the round.
    pub frames_in: u64,
    /// The process's resident set after the round, bytes.
    pub rss_after: u64,
    /// Connections the server holds once the round is over.
    pub connections_after: u64,
}

impl LiveRound {
    /// The shard's CPU time per received frame, in microseconds.
    #[must_use]
    pub fn cpu_per_frame_us(&self) -> f64 {
        self.shard_cpu.as_secs_f64() * 1e6 / self.frames_in.max(1) as f64
    }
}

/// The local ports the next round's attacker starts from: every round of a
/// process gets its own, so that none meets a predecessor's connection in
/// the server's TIME-WAIT.
static NEXT_PORTS: AtomicU16 = AtomicU16::new(40_000);

/// The link emulators' CPU time so far, by process (the name is cut to 15
/// bytes by the kernel).
fn linkem_cpu() -> Vec<(u32, Duration)> {
    processes_named("fairway-linkem").into_iter().filter_map(|pid| Some((pid, process_cpu_time(pid).ok()?))).collect()
}

/// The shard threads' CPU time so far.
fn shard_cpu() -> Duration {
    threads_named("fairway-shard-0").into_iter().filter_map(|tid| thread_cpu_time(tid).ok()).sum()
}

/// Drives `attacker` through `port` in real time until it is done or
/// `limit` has passed; whether it is done.
pub fn drive(attacker: &mut Attacker, port: &mut PacketPort, limit: Duration) -> bool {
    let start = Instant::now();
    let (mut frames, mut out) = (Vec::new(), Vec::new());
    while !attacker.done() && start.elapsed() < limit {
        let now = fairway_stack::time::Instant::from_micros(start.elapsed().as_micros() as u64);
        raw_turn(attacker, port, now, &mut frames, &mut out);
        // Sleep until a frame arrives or the attacker's next turn (at most 1 ms).
        let wait = attacker.next_wakeup().map_or(1000, |t| t.total_micros().saturating_sub(now.total_micros()));
        let mut fd = libc::pollfd { fd: port.receive_fd(), events: libc::POLLIN, revents: 0 };
        let timeout_ms = i32::from(wait >= 1000);
        // SAFETY: one valid pollfd for the duration of the call.
        unsafe { libc::poll(&raw mut fd, 1, timeout_ms) };
    }
    attacker.done()
}

/// One round: `legitimate` curl downloads of `size` bytes from client 0 and
/// the attacker from client 1, against `server` (one shard) on `tb`.
///
/// # Panics
///
/// When a client cannot be started or the attacker's port cannot open.
#[must_use]
pub fn live_attack(
    tb: &Testbed,
    server: &ServerHandle,
    attack: Attack,
    seed: u64,
    legitimate: usize,
    size: u64,
) -> LiveRound {
    let cpu_before = shard_cpu();
    let machine_before = machine_cpu_ticks();
    let linkem_before = linkem_cpu();
    let frames_before = gauge(server, "fairway_packets_received_total");
    let url = format!("http://{}/bytes/{size}", tb.server_ip());
    let script =
        format!("for i in $(seq {legitimate}); do (curl -sS -f --max-time 120 '{url}' | sha256sum) & done; wait");
    let started = Instant::now();
    let curls = testbed::spawn(&tb.client_ns(0), &["bash", "-o", "pipefail", "-c", &script])
        .unwrap_or_else(|e| panic!("curl clients: {e}"));
    // The downloads are timed on their own: the attacker's transfers may
    // end later (a frame its port missed costs it a retransmission
    // timeout), and the goodput is the legitimate clients'.
    let downloads = std::thread::spawn(move || {
        let out = curls.wait_timeout(Duration::from_secs(150));
        (out, started.elapsed())
    });
    let mut params = AttackParams::issue(attack);
    params.first_port = NEXT_PORTS.fetch_add(params.connections as u16, Ordering::Relaxed);
    let ip = attacker_ip(tb);
    let mac = parse_mac(&tb.client_mac(1));
    let server_addr = SocketAddrV4::new(tb.server_ip(), 80);
    let server_mac = parse_mac(&tb.server_mac());
    let (attacker, port_dropped, attacker_cpu) = testbed::in_netns(&tb.client_ns(1), || {
        let mut port = PacketPort::open(CLIENT_IF).unwrap_or_else(|e| panic!("packet port on {CLIENT_IF}: {e}"));
        let mut attacker = Attacker::new(seed, &params, (ip, mac), (server_addr, server_mac), &Request::HttpBytes);
        let cpu = own_thread_cpu_time().unwrap_or_default();
        drive(&mut attacker, &mut port, Duration::from_secs(90));
        (attacker, port.dropped, own_thread_cpu_time().unwrap_or_default().saturating_sub(cpu))
    })
    .unwrap_or_else(|e| panic!("attacker namespace: {e}"));
    let attacker_time = started.elapsed();
    let (out, elapsed) = downloads.join().unwrap_or_else(|_| panic!("the curl clients' waiter panicked"));
    let linkem_cpu = linkem_cpu()
        .into_iter()
        .filter_map(|(pid, after)| {
            let before = linkem_before.iter().find(|&&(p, _)| p == pid)?.1;
            Some(after.saturating_sub(before))
        })
        .sum();
    let machine_busy = match (machine_before, machine_cpu_ticks()) {
        (Some((busy0, all0)), Some((busy1, all1))) if all1 > all0 => (busy1 - busy0) as f64 / (all1 - all0) as f64,
        _ => f64::NAN,
    };
    let out = out.unwrap_or_else(|e| panic!("curl clients: {e}"));
    let expected = pattern_sha256(size);
    let intact = out.stdout_text().lines().filter(|l| l.split_whitespace().next() == Some(expected.as_str())).count();
    // The server closes each connection after its response; wait for the
    // last FINs to be acknowledged.
    let deadline = Instant::now() + Duration::from_secs(10);
    while gauge(server, "fairway_active_connections") > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    // Shards publish their counters once a second: wait for the last.
    std::thread::sleep(Duration::from_millis(1200));
    LiveRound {
        attack,
        legitimate_intact: (intact, legitimate),
        goodput_mbps: (intact as u64 * size) as f64 * 8.0 / elapsed.as_secs_f64() / 1e6,
        download_time: elapsed,
        attacker_time,
        attacker_intact: attacker.intact(),
        attacker_unfinished: attacker.unfinished(),
        port_dropped,
        attacker_sent: attacker.counts.sent,
        forged: attacker.counts.forged,
        shard_cpu: shard_cpu().saturating_sub(cpu_before),
        attacker_cpu,
        linkem_cpu,
        machine_busy,
        frames_in: gauge(server, "fairway_packets_received_total").saturating_sub(frames_before),
        rss_after: rss_kib(std::process::id()).unwrap_or(0) * 1024,
        connections_after: gauge(server, "fairway_active_connections"),
    }
}
