//! Window control on the kernel backend, end to end: the real `fairway`
//! binary on 127.0.0.1 (a free port, two shards) with two uploads to
//! `/upload` and two downloads from `/bytes/N` at once, checked through
//! `/metrics` (the caps the kernel reports for each flow) and through what
//! the downloads deliver; and two downloads from different loopback
//! addresses, one of them weighted with `--weight`.
//!
//! Loopback has no bottleneck, so this checks the mechanism (the policy's
//! caps reach each socket, and a paced download is held to its cap), never
//! fairness numbers: those come from the testbed.

mod support;

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpStream};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};
use support::{FairwayProcess, series, total};

/// The kernel backend with bodies and downloads that never end within a
/// test, plus `extra`.
#[track_caller]
fn start(extra: &[&str]) -> FairwayProcess {
    let mut args = vec!["--max-body", "100gb", "--max-bytes", "100gb"];
    args.extend_from_slice(extra);
    FairwayProcess::start(&args)
}

/// Two uploads and two downloads, running until dropped. Each download
/// counts the bytes it received.
struct Traffic {
    stop: Arc<AtomicBool>,
    downloaded: Vec<Arc<AtomicU64>>,
    threads: Vec<JoinHandle<()>>,
}

impl Traffic {
    fn start(addr: SocketAddr) -> Traffic {
        let stop = Arc::new(AtomicBool::new(false));
        let mut threads = Vec::new();
        let mut downloaded = Vec::new();
        for _ in 0..2 {
            let (stop, count) = (Arc::clone(&stop), Arc::new(AtomicU64::new(0)));
            downloaded.push(Arc::clone(&count));
            threads.push(std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
                s.write_all(b"GET /bytes/50000000000 HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
                let mut buf = vec![0; 64 * 1024];
                while !stop.load(Ordering::Relaxed) {
                    match s.read(&mut buf) {
                        Ok(0) => break,
                        Ok(n) => {
                            count.fetch_add(n as u64, Ordering::Relaxed);
                        }
                        Err(_) => {}
                    }
                }
            }));
        }
        for _ in 0..2 {
            let stop = Arc::clone(&stop);
            threads.push(std::thread::spawn(move || {
                let mut s = TcpStream::connect(addr).unwrap();
                s.write_all(b"POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: 50000000000\r\n\r\n").unwrap();
                let chunk = vec![7; 64 * 1024];
                // About 20 MB/s: plenty to count as a flow, little CPU.
                while !stop.load(Ordering::Relaxed) && s.write_all(&chunk).is_ok() {
                    std::thread::sleep(Duration::from_millis(3));
                }
            }));
        }
        Traffic { stop, downloaded, threads }
    }

    /// Each download's bytes per second over `span`.
    fn download_rates(&self, span: Duration) -> Vec<f64> {
        let before: Vec<u64> = self.downloaded.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        std::thread::sleep(span);
        self.downloaded
            .iter()
            .zip(before)
            .map(|(c, b)| (c.load(Ordering::Relaxed) - b) as f64 / span.as_secs_f64())
            .collect()
    }
}

impl Drop for Traffic {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for t in self.threads.drain(..) {
            let _ = t.join();
        }
    }
}

/// Scrapes until `done` says yes, or panics with the last scrape after 15 s.
#[track_caller]
fn scrape_until(server: &FairwayProcess, what: &str, done: impl Fn(&str) -> bool) -> String {
    let start = Instant::now();
    loop {
        let text = server.scrape();
        if done(&text) {
            return text;
        }
        assert!(start.elapsed() < Duration::from_secs(15), "no {what} within 15 s; the last scrape:\n{text}");
        std::thread::sleep(Duration::from_millis(200));
    }
}

/// 80 Mbit/s over four flows: 2.5 MB/s each, in wire bytes.
const SHARE: f64 = 80e6 / 8.0 / 4.0;

#[test]
fn equal_rate_clamps_uploads_and_paces_downloads_at_their_share() {
    let server = start(&["--fairness", "equal-rate", "--capacity", "80mbit"]);
    let traffic = Traffic::start(server.addr);
    let text = scrape_until(&server, "caps on four flows, both clamps as set", |text| {
        let pacing = series(text, "fairway_fairness_flow_pacing_cap_bytes_per_second");
        let windows = series(text, "fairway_fairness_flow_window_cap_bytes");
        total(text, "fairway_fairness_active_flows") == 4.0
            && pacing.len() == 2
            && windows.len() == 2
            // Each shard has seen the other's flows: a quarter each (the
            // policy may scale its capacity down to a half, never up).
            && pacing.iter().all(|&(_, p)| (SHARE * 0.5..=SHARE * 1.001).contains(&p))
            // The kernel's autotuning may raise a clamp between two of the
            // controller's rounds (it sets it again each round): wait for a
            // scrape that reads both clamps as set.
            && windows.iter().all(|&(_, w)| (4096.0..=140_000.0).contains(&w))
    });
    assert!(text.contains("fairway_fairness_info{policy=\"equal-rate\",capacity_bits_per_second=\"80000000\"} 1"));
    for (labels, p) in series(&text, "fairway_fairness_flow_pacing_cap_bytes_per_second") {
        assert!(labels.contains("direction=\"download\""), "{labels} {p}");
    }
    // Loopback's MSS is 64 kB, so the 2·MSS floor sets the windows: share ×
    // (min-RTT + δ) is less. The value is the kernel's TCP_WINDOW_CLAMP, in
    // the range above.
    for (labels, w) in series(&text, "fairway_fairness_flow_window_cap_bytes") {
        assert!(labels.contains("direction=\"upload\""), "{labels} {w}");
    }
    // Paced, a download delivers about its cap; unpaced, loopback gives
    // hundreds of MB/s.
    for rate in traffic.download_rates(Duration::from_secs(1)) {
        assert!(rate < SHARE * 1.5, "a paced download delivers {rate} B/s");
    }
    let j = total(&text, "fairway_fairness_jain_index");
    assert!(j > 0.0 && j <= 1.0, "{j}");
}

#[test]
fn off_senses_the_flows_and_caps_none() {
    let server = start(&["--fairness", "off"]);
    let traffic = Traffic::start(server.addr);
    let text = scrape_until(&server, "four active flows", |text| total(text, "fairway_fairness_active_flows") == 4.0);
    assert!(text.contains("fairway_fairness_info{policy=\"off\",capacity_bits_per_second=\"estimated\"} 1"));
    assert_eq!(series(&text, "fairway_fairness_flow_delivery_rate_bytes_per_second").len(), 4, "{text}");
    assert!(series(&text, "fairway_fairness_flow_pacing_cap_bytes_per_second").is_empty(), "{text}");
    assert!(series(&text, "fairway_fairness_flow_window_cap_bytes").is_empty(), "{text}");
    for rate in traffic.download_rates(Duration::from_secs(1)) {
        assert!(rate > SHARE * 4.0, "an unpaced download on loopback delivers only {rate} B/s");
    }
}

/// A download of `/bytes/N` from `from` (any address in 127/8 is
/// loopback's), reading until `stop`.
fn download_from(addr: SocketAddr, from: [u8; 4], stop: Arc<AtomicBool>) -> JoinHandle<()> {
    let socket = socket2::Socket::new(socket2::Domain::IPV4, socket2::Type::STREAM, None).unwrap();
    socket.bind(&SocketAddr::from((from, 0)).into()).unwrap();
    socket.connect(&addr.into()).unwrap();
    let mut s = TcpStream::from(socket);
    std::thread::spawn(move || {
        s.set_read_timeout(Some(Duration::from_millis(200))).unwrap();
        s.write_all(b"GET /bytes/50000000000 HTTP/1.1\r\nHost: t\r\n\r\n").unwrap();
        let mut buf = vec![0; 64 * 1024];
        while !stop.load(Ordering::Relaxed) && !matches!(s.read(&mut buf), Ok(0)) {}
    })
}

#[test]
fn a_weighted_client_is_paced_at_its_weighted_share() {
    // 127.0.0.2 weighs 3, 127.0.0.3 the default 1: 60 and 20 Mbit/s of 80,
    // whichever shards they land on.
    let server = start(&["--fairness", "equal-rate", "--capacity", "80mbit", "--weight", "127.0.0.2=3"]);
    let stop = Arc::new(AtomicBool::new(false));
    let threads = [[127, 0, 0, 2], [127, 0, 0, 3]].map(|from| download_from(server.addr, from, Arc::clone(&stop)));
    let (heavy, light) = (80e6 / 8.0 * 0.75, 80e6 / 8.0 * 0.25);
    let from = |labels: &str, ip: &str| labels.contains(&format!("remote=\"{ip}:"));
    let text = scrape_until(&server, "weighted caps on both downloads", |text| {
        let pacing = series(text, "fairway_fairness_flow_pacing_cap_bytes_per_second");
        let cap = |ip| pacing.iter().find(|(l, _)| from(l, ip)).map(|&(_, p)| p);
        // Each shard has seen the other's weight (the policy may scale its
        // capacity down to a half, never up).
        matches!((cap("127.0.0.2"), cap("127.0.0.3")), (Some(h), Some(l))
            if (heavy * 0.5..=heavy * 1.001).contains(&h) && (light * 0.5..=light * 1.001).contains(&l))
    });
    let weights = series(&text, "fairway_fairness_flow_weight");
    let weight = |ip| weights.iter().find(|(l, _)| from(l, ip)).map(|&(_, w)| w);
    assert_eq!((weight("127.0.0.2"), weight("127.0.0.3")), (Some(3.0), Some(1.0)), "{text}");
    stop.store(true, Ordering::Relaxed);
    drop(server);
    threads.into_iter().for_each(|t| t.join().unwrap());
}
