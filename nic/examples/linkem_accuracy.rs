//! Measures how closely `fairway-linkem` delivers its settings: added
//! one-way delay, rate, loss and reordering, through three network
//! namespaces on this host (client — emulator — server, veth pairs), with a
//! direct veth pair as the reference path. Prints Markdown tables; the
//! figures in `nic/src/linkem/README.md` come from it.
//!
//! ```sh
//! cargo build --release -p fairway-nic --bin fairway-linkem --example linkem_accuracy
//! sudo target/release/examples/linkem_accuracy            # everything, ~1 min
//! sudo target/release/examples/linkem_accuracy delay      # or: ping, rate, loss, reorder
//! ```
//!
//! One-way delay is the receiver's kernel time stamp (`SO_TIMESTAMPNS`) minus
//! the sender's `CLOCK_REALTIME` just before `send`: same host, same clock,
//! so no synchronisation error. Extra `fairway-linkem` options go in
//! `LINKEM_ARGS` (e.g. `LINKEM_ARGS="--spin 0"`).

#[path = "../tests/linkem_support/mod.rs"]
mod support;

use std::net::{SocketAddrV4, UdpSocket};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use support::{
    Arrival, DIRECT_SERVER_IP, SERVER_IP, Trio, in_ns, linkem_binary, percentile, receive_probes, send_probes,
};

const PORT: u16 = 9000;

/// Probes for the delay table: 2000 × 100 bytes, one per 2 ms.
const DELAY_PROBES: u32 = 2000;

fn main() {
    let what = std::env::args().nth(1).unwrap_or_else(|| "all".to_owned());
    let binary = linkem_binary(None);
    let extra: Vec<String> =
        std::env::var("LINKEM_ARGS").unwrap_or_default().split_whitespace().map(str::to_owned).collect();
    let trio = Trio::new();
    let uname = support::sh(&["uname", "-r"]);
    println!("fairway-linkem accuracy, kernel {}, {} CPUs", uname.trim(), num_cpus());
    if !extra.is_empty() {
        println!("extra linkem arguments: {}", extra.join(" "));
    }
    // Resolve ARP on both paths once, so no probe waits for it.
    warm_up(&trio, &binary);

    if what == "all" || what == "delay" {
        delay_table(&trio, &binary, &extra);
    }
    if what == "all" || what == "ping" {
        ping_table(&trio, &binary, &extra);
    }
    if what == "all" || what == "rate" {
        rate_table(&trio, &binary, &extra);
    }
    if what == "all" || what == "loss" {
        loss_table(&trio, &binary, &extra);
    }
    if what == "all" || what == "reorder" {
        reorder_table(&trio, &binary, &extra);
    }
}

fn num_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn args<'a>(settings: &'a [&'a str], extra: &'a [String]) -> Vec<&'a str> {
    settings.iter().copied().chain(extra.iter().map(String::as_str)).collect()
}

fn warm_up(trio: &Trio, binary: &std::path::Path) {
    let linkem = trio.linkem(binary, &[]);
    for ip in ["10.77.0.1", "10.78.0.1"] {
        support::sh(&["ip", "netns", "exec", &trio.client, "ping", "-c", "2", "-i", "0.2", "-q", ip]);
    }
    linkem.stop();
}

/// Sends `count` probes from the client to `to` while the server receives
/// them; returns the arrivals, the bytes received and the receiver's time
/// from first to last arrival.
fn probe(trio: &Trio, to: SocketAddrV4, count: u32, size: usize, interval: Duration) -> (Vec<Arrival>, u64) {
    let (ready_tx, ready_rx) = mpsc::channel();
    let receiver = in_ns(&trio.server, move || {
        let socket = UdpSocket::bind(("0.0.0.0", PORT)).expect("bind");
        ready_tx.send(()).expect("main waits");
        receive_probes(&socket, Duration::from_millis(500), Duration::from_secs(120))
    });
    ready_rx.recv().expect("receiver ready");
    let sender = in_ns(&trio.client, move || send_probes(to, count, size, interval));
    sender.join().expect("sender");
    receiver.join().expect("receiver")
}

fn delay_table(trio: &Trio, binary: &std::path::Path, extra: &[String]) {
    println!("\n### Added one-way delay (client -> server, {DELAY_PROBES} UDP probes of 100 B, one per 2 ms)\n");
    println!("| path | setting | mean | error: mean | p50 | p99 | max | min |");
    println!("|---|---:|---:|---:|---:|---:|---:|---:|");
    let ms = |d: f64| format!("{:.3} ms", d * 1e3);
    let (direct, _) =
        probe(trio, SocketAddrV4::new(DIRECT_SERVER_IP, PORT), DELAY_PROBES, 100, Duration::from_millis(2));
    let row = |name: &str, setting: f64, arrivals: &[Arrival]| {
        let mut v: Vec<f64> = arrivals.iter().map(|a| a.one_way.as_secs_f64()).collect();
        v.sort_by(f64::total_cmp);
        let mean = v.iter().sum::<f64>() / v.len() as f64;
        let err = |x: f64| format!("{:+.3} ms", (x - setting) * 1e3);
        println!(
            "| {name} | {} | {} | {} | {} | {} | {} | {} |",
            if name == "direct veth" { "-".to_owned() } else { ms(setting) },
            ms(mean),
            err(mean),
            err(percentile(&v, 50.0)),
            err(percentile(&v, 99.0)),
            err(*v.last().expect("probes")),
            err(v[0]),
        );
    };
    row("direct veth", 0.0, &direct);
    for delay in ["0ms", "5ms", "25ms"] {
        let linkem = trio.linkem(binary, &args(&["--delay", delay], extra));
        let (arrivals, _) =
            probe(trio, SocketAddrV4::new(SERVER_IP, PORT), DELAY_PROBES, 100, Duration::from_millis(2));
        let counters = linkem.stop();
        let setting = support_duration(delay);
        row(&format!("linkem --delay {delay}"), setting, &arrivals);
        let ab = &counters.a_to_b;
        eprintln!(
            "  linkem a->b: forwarded {} late_us_mean {} late_us_max {} late_over_100us {}",
            ab["forwarded"], ab["late_us_mean"], ab["late_us_max"], ab["late_over_100us"]
        );
    }
    // Under load: the same probes while 40 Mbit/s of bulk UDP crosses the
    // other way.
    let linkem = trio.linkem(binary, &args(&["--delay", "25ms"], extra));
    let sink = in_ns(&trio.client, || {
        let socket = UdpSocket::bind(("0.0.0.0", PORT + 1)).expect("bind");
        receive_probes(&socket, Duration::from_secs(2), Duration::from_secs(60))
    });
    let load = in_ns(&trio.server, || {
        send_probes(SocketAddrV4::new(support::CLIENT_IP, PORT + 1), 3300 * 5, 1472, Duration::from_micros(300))
    });
    let (arrivals, _) = probe(trio, SocketAddrV4::new(SERVER_IP, PORT), DELAY_PROBES, 100, Duration::from_millis(2));
    load.join().expect("load");
    sink.join().expect("sink");
    linkem.stop();
    row("linkem --delay 25ms, 40 Mbit/s the other way", 0.025, &arrivals);
}

/// `ping -i 0.01 -c 500` through the emulator and on the direct path.
fn ping_table(trio: &Trio, binary: &std::path::Path, extra: &[String]) {
    println!("\n### Ping RTT (`ping -i 0.01 -c 500`, client -> server and back)\n");
    println!("| path | setting (2 × delay) | min | avg | max | mdev | avg - setting |");
    println!("|---|---:|---:|---:|---:|---:|---:|");
    let ping = |ip: &str| -> Vec<f64> {
        let out = support::sh(&["ip", "netns", "exec", &trio.client, "ping", "-i", "0.01", "-c", "500", "-q", ip]);
        let line = out.lines().find(|l| l.contains("min/avg/max")).expect("rtt line").to_owned();
        let figures = line.split(" = ").nth(1).and_then(|v| v.split(' ').next()).expect("figures");
        figures.split('/').map(|n| n.parse().expect("number")).collect()
    };
    let row = |name: &str, setting: Option<f64>, v: &[f64]| {
        let setting_text = setting.map_or("-".to_owned(), |s| format!("{s:.3} ms"));
        let err = setting.map_or("-".to_owned(), |s| format!("{:+.3} ms", v[1] - s));
        println!(
            "| {name} | {setting_text} | {:.3} ms | {:.3} ms | {:.3} ms | {:.3} ms | {err} |",
            v[0], v[1], v[2], v[3]
        );
    };
    row("direct veth", None, &ping("10.78.0.1"));
    for (delay, rtt) in [("0ms", 0.0), ("5ms", 10.0), ("25ms", 50.0)] {
        let linkem = trio.linkem(binary, &args(&["--delay", delay], extra));
        let v = ping("10.77.0.1");
        linkem.stop();
        row(&format!("linkem --delay {delay}"), Some(rtt), &v);
    }
}

fn support_duration(s: &str) -> f64 {
    s.trim_end_matches("ms").parse::<f64>().expect("ms") / 1e3
}

fn rate_table(trio: &Trio, binary: &std::path::Path, extra: &[String]) {
    println!("\n### Rate (client -> server)\n");
    println!(
        "| setting | traffic | frames received | wire rate achieved | of setting | linkem queue drops | linkem CPU |"
    );
    println!("|---|---|---:|---:|---:|---:|---:|");
    for (rate, bps) in [("100mbit", 100e6), ("10mbit", 10e6)] {
        // UDP offered at 120 % of the rate: 1472-byte payloads are 1514-byte
        // frames, in bursts of 10.
        let frame = 1514.0 * 8.0;
        let interval = Duration::from_secs_f64(frame / (bps * 1.2));
        let count = (5.0 / interval.as_secs_f64()) as u32;
        let linkem = trio.linkem(binary, &args(&["--rate", rate, "--delay", "5ms"], extra));
        let (arrivals, _) = probe(trio, SocketAddrV4::new(SERVER_IP, PORT), count, 1472, interval);
        let counters = linkem.stop();
        // Rate over the receiver's first to last arrival: frames - 1
        // serialisation times.
        let first = arrivals.first().expect("arrivals");
        let last = arrivals.last().expect("arrivals");
        let span = (last.at_ns - first.at_ns) as f64 / 1e9;
        let achieved = (arrivals.len() - 1) as f64 * frame / span;
        println!(
            "| --rate {rate} --delay 5ms | UDP 1472 B at 120 % for 5 s | {} | {:.2} Mbit/s | {:.2} % | {} | {:.0} % of a core |",
            arrivals.len(),
            achieved / 1e6,
            achieved / bps * 100.0,
            counters.a_to_b["queue_drops"],
            counters.cpu_seconds / span * 100.0,
        );
    }
    // Kernel TCP, one flow, 5 s.
    let linkem = trio.linkem(binary, &args(&["--rate", "100mbit", "--delay", "5ms"], extra));
    let (goodput, seconds) = tcp_bulk(trio, Duration::from_secs(10));
    let counters = linkem.stop();
    // Full-size segments: 1448 bytes of payload (timestamps on) in a
    // 1514-byte frame; the ACKs go the other way.
    let wire = goodput * 1514.0 / 1448.0;
    println!(
        "| --rate 100mbit --delay 5ms | kernel TCP (CUBIC), one flow, {seconds:.1} s from first to last byte | {} | {:.2} Mbit/s (goodput {:.2}) | {:.2} % | {} | {:.0} % of a core |",
        counters.a_to_b["forwarded"],
        wire / 1e6,
        goodput / 1e6,
        wire / 100e6 * 100.0,
        counters.a_to_b["queue_drops"],
        counters.cpu_seconds / seconds * 100.0,
    );
    eprintln!("  tcp: {}", counters.text.trim());
}

/// Sends for `duration` over kernel TCP from the client to the server;
/// returns the goodput in bit/s and the measured seconds.
fn tcp_bulk(trio: &Trio, duration: Duration) -> (f64, f64) {
    use std::io::{Read, Write};
    let (ready_tx, ready_rx) = mpsc::channel();
    let receiver = in_ns(&trio.server, move || {
        let listener = std::net::TcpListener::bind(("0.0.0.0", PORT)).expect("listen");
        ready_tx.send(()).expect("main waits");
        let (mut stream, _) = listener.accept().expect("accept");
        let mut buf = vec![0u8; 1 << 20];
        let mut total = 0u64;
        let mut first = None;
        let mut last = Instant::now();
        loop {
            match stream.read(&mut buf) {
                Ok(0) | Err(_) => break,
                Ok(n) => {
                    // From the end of the first read to the end of the last:
                    // slow start included, so this can only under-report.
                    // (A window that opens mid-stream over-reports: the bytes
                    // held out of order behind a loss when it opens are
                    // counted inside it.)
                    total += n as u64;
                    last = Instant::now();
                    first.get_or_insert((last, total));
                }
            }
        }
        let (t0, b0) = first.expect("some data");
        let secs = (last - t0).as_secs_f64();
        ((total - b0) as f64 * 8.0 / secs, secs)
    });
    ready_rx.recv().expect("ready");
    let sender = in_ns(&trio.client, move || {
        let mut stream = std::net::TcpStream::connect((SERVER_IP, PORT)).expect("connect");
        let buf = vec![0x5a; 1 << 16];
        let end = Instant::now() + duration;
        while Instant::now() < end {
            stream.write_all(&buf).expect("write");
        }
    });
    sender.join().expect("sender");
    receiver.join().expect("receiver")
}

fn loss_table(trio: &Trio, binary: &std::path::Path, extra: &[String]) {
    println!("\n### Loss (client -> server, UDP probes of 100 B, one per 200 us)\n");
    println!("| setting | sent | received | observed loss | linkem lost (a->b) | 95 % interval of a binomial |");
    println!("|---|---:|---:|---:|---:|---:|");
    for (loss, p, n) in [("1%", 0.01, 20_000u32), ("10%", 0.10, 20_000)] {
        let linkem = trio.linkem(binary, &args(&["--loss", loss], extra));
        let (arrivals, _) = probe(trio, SocketAddrV4::new(SERVER_IP, PORT), n, 100, Duration::from_micros(200));
        let counters = linkem.stop();
        let observed = 1.0 - arrivals.len() as f64 / f64::from(n);
        let sd = (p * (1.0 - p) / f64::from(n)).sqrt();
        println!(
            "| --loss {loss} | {n} | {} | {:.3} % | {} | {:.2} % .. {:.2} % |",
            arrivals.len(),
            observed * 100.0,
            counters.a_to_b["lost"],
            (p - 1.96 * sd) * 100.0,
            (p + 1.96 * sd) * 100.0,
        );
    }
}

fn reorder_table(trio: &Trio, binary: &std::path::Path, extra: &[String]) {
    println!("\n### Reordering (client -> server, 10 000 UDP probes, one per 500 us)\n");
    println!(
        "| setting | received | arrived after a later probe | linkem reordered (a->b) | extra delay of those: mean, max |"
    );
    println!("|---|---:|---:|---:|---:|");
    let linkem = trio.linkem(binary, &args(&["--reorder", "5%", "--reorder-delay", "10ms", "--delay", "5ms"], extra));
    let (arrivals, _) = probe(trio, SocketAddrV4::new(SERVER_IP, PORT), 10_000, 100, Duration::from_micros(500));
    let counters = linkem.stop();
    let mut max_seq = None;
    let mut late = Vec::new();
    for a in &arrivals {
        if max_seq.is_some_and(|m| a.seq < m) {
            late.push(a.one_way.as_secs_f64() - 0.005);
        }
        max_seq = max_seq.max(Some(a.seq));
    }
    let mean = late.iter().sum::<f64>() / late.len().max(1) as f64;
    let max = late.iter().copied().fold(0.0, f64::max);
    println!(
        "| --reorder 5% --reorder-delay 10ms --delay 5ms | {} | {} ({:.2} %) | {} | {:.2} ms, {:.2} ms |",
        arrivals.len(),
        late.len(),
        late.len() as f64 / arrivals.len() as f64 * 100.0,
        counters.a_to_b["reordered"],
        mean * 1e3,
        max * 1e3,
    );
}
