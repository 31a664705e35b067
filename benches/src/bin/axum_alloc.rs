//! `axum_alloc` (`cargo xtask bench alloc`): heap allocations per request
//! of three servers of the same `/plaintext`, each in this process on
//! 127.0.0.1 in turn, counted by a global allocator:
//!
//! - the built-in server (`fairway::Server::builder()`, kernel backend,
//!   one shard, the built-in endpoints): a sync `Handler`;
//! - the axum example (server/examples/axum_app.rs) on Fairway's async
//!   runtime, the same way;
//! - the same router by `axum::serve` on a tokio current-thread runtime in
//!   a thread of its own.
//!
//! A client thread in this process sends keep-alive requests one at a
//! time on std `TcpStream`s, reading each answer into one fixed buffer, so
//! that it allocates nothing per request; a control server (fixed bytes
//! from a std thread per connection, no HTTP) shows that it does not. The
//! allocator counts the whole process, so every thread is in the figures:
//! the server's own, its background ones, the client. No root needed.

use std::alloc::System;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::{self, JoinHandle};
use std::time::Duration;

use axum::serve::ListenerExt;
use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};
use fairway::{Server, ServerHandle};
use fairway_benches::cli::at_least_one;
use stats_alloc::{INSTRUMENTED_SYSTEM, Region, Stats, StatsAlloc};

#[path = "../../../server/examples/axum_app.rs"]
#[allow(dead_code)]
mod axum_app;

#[global_allocator]
static GLOBAL: &StatsAlloc<System> = &INSTRUMENTED_SYSTEM;

/// What `--help` says before the options.
const LONG_ABOUT: &str = "\
Heap allocations per request, keep-alive GET /plaintext on 127.0.0.1, of
the built-in server (fairway::Server::builder(), kernel backend, one shard),
the axum example on Fairway (the same way), and the same router by
axum::serve on a tokio current-thread runtime, each in this process in turn.
A client thread sends W warm-up requests (default 1000), then N measured
ones (default 20000), one at a time, over one connection and then over C
connections in turn (default 16); a global allocator counts what the whole
process allocates over the N. A control server without HTTP (fixed bytes
from a std thread) shows what the client itself allocates: nothing.
Prints a table, and ends with
  bench: allocations per request: fairway handler A, axum on fairway B,
  axum on tokio C (keep-alive /plaintext)
(one connection). No root needed.";

/// The request, the same every time.
const REQUEST: &[u8] = b"GET /plaintext HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
/// The body every server answers it with.
const BODY: &[u8] = b"Hello, World!";
/// The control server's answer.
const CONTROL_ANSWER: &[u8] = b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, World!";
/// Room for one answer: the head and the 13-byte body.
const ANSWER_BUFFER: usize = 4096;

// The option docs are verbatim, as clap here does not wrap help text: each
// first line is a phrase for `-h`, the rest is for `--help`, which indents
// them by 10 columns, so they are at most 70.
/// Heap allocations per request of three servers of the same /plaintext.
#[derive(Parser, Debug)]
#[command(name = "axum_alloc", long_about = LONG_ABOUT)]
// As the hand-written parser did: a repeated option takes its last value,
// and `-1` is a value (which the option then refuses), not an unknown flag.
#[command(args_override_self = true, allow_negative_numbers = true)]
struct Cli {
    /// Measured requests per run
    #[arg(long, value_name = "N", default_value_t = 20_000, value_parser = at_least_one::<u64>, verbatim_doc_comment)]
    requests: u64,
    /// Requests before each run's count starts
    ///
    /// At least --connections, so that every connection is served before
    /// the count starts.
    #[arg(long, value_name = "W", default_value_t = 1_000, value_parser = at_least_one::<u64>, verbatim_doc_comment)]
    warm_up: u64,
    /// Connections of the second run of each
    #[arg(long, value_name = "C", default_value_t = 16, value_parser = at_least_one::<usize>, verbatim_doc_comment)]
    connections: usize,
}

impl Cli {
    /// The plan, once what clap cannot check holds: every connection is
    /// served during the warm-up, so that its per-connection setup is not
    /// counted.
    fn check(self) -> Result<Plan, clap::Error> {
        if self.warm_up < self.connections as u64 {
            let why = format!("--warm-up must be at least --connections ({})", self.connections);
            return Err(Cli::command().error(ErrorKind::ValueValidation, why));
        }
        Ok(Plan { requests: self.requests, warm_up: self.warm_up, connections: self.connections })
    }
}

/// The command line, as the measurements take it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Plan {
    requests: u64,
    warm_up: u64,
    connections: usize,
}

fn main() -> ExitCode {
    // A bad command line exits with status 2, -h and --help with 0.
    let plan = Cli::parse().check().unwrap_or_else(|e| e.exit());
    match run(plan) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("axum_alloc: {e}");
            ExitCode::FAILURE
        }
    }
}

/// A server under test, in this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Subject {
    /// Fixed bytes from a std thread per connection: the client's own
    /// allocations.
    Control,
    /// The built-in endpoints on Fairway's kernel backend.
    FairwayHandler,
    /// The axum example on Fairway's kernel backend.
    AxumOnFairway,
    /// The axum example's router by `axum::serve` on tokio.
    AxumOnTokio,
}

impl Subject {
    const ALL: [Subject; 4] = [Subject::Control, Subject::FairwayHandler, Subject::AxumOnFairway, Subject::AxumOnTokio];

    fn name(self) -> &'static str {
        match self {
            Subject::Control => "control (no HTTP)",
            Subject::FairwayHandler => "fairway handler",
            Subject::AxumOnFairway => "axum on fairway",
            Subject::AxumOnTokio => "axum on tokio",
        }
    }

    fn start(self) -> io::Result<Running> {
        let local = SocketAddr::from(([127, 0, 0, 1], 0));
        match self {
            Subject::Control => Control::spawn().map(Running::Control),
            Subject::FairwayHandler => Server::builder().listen(local).shards(1).spawn().map(Running::Fairway),
            Subject::AxumOnFairway => {
                let state = axum_app::AppState::default();
                let server = Server::builder().listen(local).shards(1).axum(move || axum_app::app(state.clone()));
                server.spawn().map(Running::Fairway)
            }
            Subject::AxumOnTokio => Tokio::spawn().map(Running::Tokio),
        }
    }
}

/// A server started by [`Subject::start`].
enum Running {
    Control(Control),
    Fairway(ServerHandle),
    Tokio(Tokio),
}

impl Running {
    fn addr(&self) -> SocketAddr {
        match self {
            Running::Control(c) => c.addr,
            Running::Fairway(server) => server.local_addr(),
            Running::Tokio(t) => t.addr,
        }
    }

    fn stop(self) -> io::Result<()> {
        match self {
            Running::Control(c) => c.stop(),
            Running::Fairway(server) => server.shutdown().map(drop),
            Running::Tokio(t) => t.stop(),
        }
    }
}

/// What one run counted.
#[derive(Clone, Copy, Debug)]
struct Counted {
    subject: Subject,
    connections: usize,
    requests: u64,
    stats: Stats,
}

impl Counted {
    fn per_request(&self, count: usize) -> f64 {
        count as f64 / self.requests as f64
    }
}

fn run(plan: Plan) -> Result<(), String> {
    let mut counted = Vec::new();
    for subject in Subject::ALL {
        let running = subject.start().map_err(|e| format!("{}: could not start: {e}", subject.name()))?;
        let addr = running.addr();
        for connections in [1, plan.connections] {
            // The client in a thread of its own; this one waits in join,
            // which allocates nothing.
            let client = thread::spawn(move || measure(addr, connections, plan));
            let stats = client
                .join()
                .map_err(|_| format!("{}: the client panicked", subject.name()))?
                .map_err(|e| format!("{}, {connections} connection(s): {e}", subject.name()))?;
            counted.push(Counted { subject, connections, requests: plan.requests, stats });
        }
        running.stop().map_err(|e| format!("{}: stopping: {e}", subject.name()))?;
    }
    print!("{}", table(&plan, &counted));
    let control = counted.iter().filter(|c| c.subject == Subject::Control).map(|c| c.stats.allocations).sum::<usize>();
    if control > 0 {
        eprintln!(
            "axum_alloc: the control run allocated {control} times: the client or a background thread allocates, \
             and every figure includes it"
        );
    }
    println!("{}", headline(&counted));
    Ok(())
}

/// Opens `connections` connections to `addr`, sends the warm-up requests
/// round-robin over them, then counts the process's allocations over the
/// measured ones.
fn measure(addr: SocketAddr, connections: usize, plan: Plan) -> Result<Stats, String> {
    let mut streams = (0..connections)
        .map(|_| {
            let stream = TcpStream::connect(addr)?;
            stream.set_nodelay(true)?;
            stream.set_read_timeout(Some(Duration::from_secs(10)))?;
            Ok(stream)
        })
        .collect::<io::Result<Vec<_>>>()
        .map_err(|e| format!("connecting to {addr}: {e}"))?;
    let mut buf = [0u8; ANSWER_BUFFER];
    for i in 0..plan.warm_up {
        exchange(&mut streams[i as usize % connections], &mut buf)?;
    }
    let region = Region::new(GLOBAL);
    for i in 0..plan.requests {
        exchange(&mut streams[i as usize % connections], &mut buf)?;
    }
    Ok(region.change())
}

/// Sends [`REQUEST`] and reads the whole answer into `buf`: a 200 with
/// [`BODY`]. Nothing is allocated unless it fails.
fn exchange(stream: &mut TcpStream, buf: &mut [u8]) -> Result<(), String> {
    stream.write_all(REQUEST).map_err(|e| format!("sending: {e}"))?;
    let mut filled = 0;
    loop {
        if let Some(end) = answer_end(&buf[..filled])? {
            if end != filled {
                return Err(format!("{} bytes after the answer to one request", filled - end));
            }
            return check(&buf[..end]);
        }
        if filled == buf.len() {
            return Err(format!("an answer longer than {} bytes", buf.len()));
        }
        match stream.read(&mut buf[filled..]) {
            Ok(0) => return Err("the server closed the connection".into()),
            Ok(n) => filled += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(format!("reading: {e}")),
        }
    }
}

/// Where the answer at the start of `bytes` ends, once its head and its
/// `Content-Length` of body are all in.
fn answer_end(bytes: &[u8]) -> Result<Option<usize>, String> {
    let Some(head) = bytes.windows(4).position(|w| w == b"\r\n\r\n") else {
        return Ok(None);
    };
    let end = head + 4 + content_length(&bytes[..head])?;
    Ok((bytes.len() >= end).then_some(end))
}

/// The `Content-Length` of a response head (any case).
fn content_length(head: &[u8]) -> Result<usize, String> {
    for line in head.split(|&b| b == b'\n') {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let Some(colon) = line.iter().position(|&b| b == b':') else { continue };
        if line[..colon].eq_ignore_ascii_case(b"content-length") {
            let value = std::str::from_utf8(&line[colon + 1..]).ok().map(str::trim);
            return value
                .and_then(|v| v.parse().ok())
                .ok_or_else(|| format!("Content-Length {:?}", String::from_utf8_lossy(&line[colon + 1..])));
        }
    }
    Err(format!("an answer without Content-Length: {:?}", String::from_utf8_lossy(head)))
}

/// Whether `answer` is a 200 with [`BODY`].
fn check(answer: &[u8]) -> Result<(), String> {
    if answer.starts_with(b"HTTP/1.1 200 ") && answer.ends_with(BODY) {
        Ok(())
    } else {
        Err(format!("not a 200 with {:?}: {:?}", String::from_utf8_lossy(BODY), String::from_utf8_lossy(answer)))
    }
}

/// The table, with what it counts.
fn table(plan: &Plan, counted: &[Counted]) -> String {
    let mut out = format!(
        "Heap allocations per request, keep-alive GET /plaintext on 127.0.0.1:\n\
         {} warm-up, then {} measured requests, one at a time, from a client\n\
         thread on fixed buffers (it allocates nothing: see the control rows).\n\
         Counted: every thread of this process, background threads included.\n\n",
        plan.warm_up, plan.requests
    );
    out.push_str(&format!(
        "{:<18} {:>11} {:>12} {:>14} {:>10} {:>10}\n",
        "server", "connections", "allocations", "reallocations", "frees", "bytes"
    ));
    for c in counted {
        out.push_str(&format!(
            "{:<18} {:>11} {:>12.2} {:>14.2} {:>10.2} {:>10.1}\n",
            c.subject.name(),
            c.connections,
            c.per_request(c.stats.allocations),
            c.per_request(c.stats.reallocations),
            c.per_request(c.stats.deallocations),
            c.per_request(c.stats.bytes_allocated),
        ));
    }
    out.push_str("(each per request; bytes: allocated, not counting reallocations)\n\n");
    out
}

/// `bench: allocations per request: fairway handler A, axum on fairway B,
/// axum on tokio C (keep-alive /plaintext)`, over one connection.
fn headline(counted: &[Counted]) -> String {
    let figure = |subject: Subject| {
        counted
            .iter()
            .find(|c| c.subject == subject && c.connections == 1)
            .map_or("no figure".to_owned(), |c| format!("{:.2}", c.per_request(c.stats.allocations)))
    };
    let servers = [Subject::FairwayHandler, Subject::AxumOnFairway, Subject::AxumOnTokio];
    let figures: Vec<String> = servers.iter().map(|&s| format!("{} {}", s.name(), figure(s))).collect();
    format!("bench: allocations per request: {} (keep-alive /plaintext)", figures.join(", "))
}

/// The control server: reads requests into a fixed buffer and answers
/// each blank line that ends one with [`CONTROL_ANSWER`], a thread per
/// connection. It allocates nothing per request.
struct Control {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    acceptor: JoinHandle<()>,
}

impl Control {
    fn spawn() -> io::Result<Control> {
        let listener = TcpListener::bind("127.0.0.1:0")?;
        let addr = listener.local_addr()?;
        let stop = Arc::new(AtomicBool::new(false));
        let stopped = Arc::clone(&stop);
        let acceptor = thread::Builder::new().name("control".into()).spawn(move || {
            for stream in listener.incoming() {
                if stopped.load(Ordering::Relaxed) {
                    return;
                }
                if let Ok(stream) = stream {
                    thread::spawn(move || answer_requests(stream));
                }
            }
        })?;
        Ok(Control { addr, stop, acceptor })
    }

    fn stop(self) -> io::Result<()> {
        self.stop.store(true, Ordering::Relaxed);
        // Wakes the acceptor from accept(2) to see the flag.
        drop(TcpStream::connect(self.addr)?);
        self.acceptor.join().map_err(|_| io::Error::other("the control server panicked"))
    }
}

/// Answers every request on `stream` until the client closes it.
fn answer_requests(mut stream: TcpStream) {
    let _ = stream.set_nodelay(true);
    let mut buf = [0u8; ANSWER_BUFFER];
    // How much of "\r\n\r\n" the bytes so far end with.
    let mut matched = 0;
    loop {
        let n = match stream.read(&mut buf) {
            Ok(0) | Err(_) => return,
            Ok(n) => n,
        };
        for &byte in &buf[..n] {
            matched = match (matched, byte) {
                (0 | 2, b'\r') | (1 | 3, b'\n') => matched + 1,
                (_, b'\r') => 1,
                _ => 0,
            };
            if matched == 4 {
                matched = 0;
                if stream.write_all(CONTROL_ANSWER).is_err() {
                    return;
                }
            }
        }
    }
}

/// The axum example's router by `axum::serve` on a tokio current-thread
/// runtime, in a thread of its own.
struct Tokio {
    addr: SocketAddr,
    stop: tokio::sync::oneshot::Sender<()>,
    thread: JoinHandle<io::Result<()>>,
}

impl Tokio {
    fn spawn() -> io::Result<Tokio> {
        // Bound here, so that the address is known before the thread runs.
        let listener = TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
        let thread = thread::Builder::new().name("axum-tokio".into()).spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
            runtime.block_on(async move {
                let listener = tokio::net::TcpListener::from_std(listener)?.tap_io(|stream| {
                    // As Fairway's kernel backend does.
                    let _ = stream.set_nodelay(true);
                });
                let app = axum_app::app(axum_app::AppState::default());
                axum::serve(listener, app)
                    .with_graceful_shutdown(async move {
                        let _ = stopped.await;
                    })
                    .await
            })
        })?;
        Ok(Tokio { addr, stop, thread })
    }

    fn stop(self) -> io::Result<()> {
        // An error means the server has ended already: join says why.
        let _ = self.stop.send(());
        self.thread.join().map_err(|_| io::Error::other("the tokio server panicked"))?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use fairway_benches::cli::{checked_help, refusal, shows_help};

    /// `axum_alloc ARGS` as `main` reads it.
    fn parse_strs(args: &[&str]) -> Result<Plan, clap::Error> {
        Cli::try_parse_from(std::iter::once("axum_alloc").chain(args.iter().copied()))?.check()
    }

    #[test]
    fn arguments() {
        assert_eq!(parse_strs(&[]).unwrap(), Plan { requests: 20_000, warm_up: 1_000, connections: 16 });
        assert_eq!(
            parse_strs(&["--requests", "5", "--warm-up", "8", "--connections", "4"]).unwrap(),
            Plan { requests: 5, warm_up: 8, connections: 4 }
        );
        // A repeated option takes its last value, as before clap.
        assert_eq!(parse_strs(&["--requests", "5", "--requests", "6"]).unwrap().requests, 6);
        for help in ["--help", "-h"] {
            assert!(shows_help(parse_strs(&[help])), "{help}");
        }
        let error = |args: &[&str]| refusal(parse_strs(args));
        // Where clap words an error its own way, the fragment is clap's:
        // "unknown argument" was the hand-written parser's.
        assert!(error(&["--requests", "0"]).contains("at least 1"));
        assert!(error(&["--warm-up", "3"]).contains("--warm-up must be at least --connections (16)"));
        assert!(error(&["--nope"]).contains("unexpected argument '--nope'"));
    }

    #[test]
    fn the_help_names_every_option_and_fits_80_columns() {
        let _ = checked_help(Cli::command(), &["--requests", "--warm-up", "--connections"]);
    }

    #[test]
    fn where_an_answer_ends() {
        let answer = b"HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: 13\r\n\r\nHello, World!";
        assert_eq!(answer_end(answer), Ok(Some(answer.len())));
        // Split anywhere: not yet.
        for cut in 0..answer.len() {
            assert_eq!(answer_end(&answer[..cut]), Ok(None), "cut at {cut}");
        }
        assert_eq!(answer_end(CONTROL_ANSWER), Ok(Some(CONTROL_ANSWER.len())));
        assert!(answer_end(b"HTTP/1.1 200 OK\r\n\r\n").unwrap_err().contains("without Content-Length"));
        assert!(answer_end(b"HTTP/1.1 200 OK\r\nContent-Length: x\r\n\r\n").is_err());
        assert_eq!(check(answer), Ok(()));
        assert!(check(b"HTTP/1.1 404 Not Found\r\ncontent-length: 13\r\n\r\nHello, World!").is_err());
    }

    #[test]
    fn the_client_and_the_control_server_allocate_nothing_per_request() {
        let control = Control::spawn().unwrap();
        let plan = Plan { requests: 2_000, warm_up: 100, connections: 4 };
        let addr = control.addr;
        // Other tests run beside this one in the process: the measure is
        // in a thread, and only its own exchanges are checked by count.
        let stats = thread::spawn(move || measure(addr, 1, plan)).join().unwrap().unwrap();
        assert!(stats.allocations < 2_000, "{stats:?}");
        assert!(thread::spawn(move || measure(addr, 4, plan)).join().unwrap().is_ok());
        control.stop().unwrap();
    }

    #[test]
    fn the_headline() {
        let stats = |allocations| Stats { allocations, ..Stats::default() };
        let counted: Vec<Counted> =
            [(Subject::FairwayHandler, 0), (Subject::AxumOnFairway, 30_000), (Subject::AxumOnTokio, 50_000)]
                .into_iter()
                .map(|(subject, allocations)| Counted {
                    subject,
                    connections: 1,
                    requests: 20_000,
                    stats: stats(allocations),
                })
                .collect();
        assert_eq!(
            headline(&counted),
            "bench: allocations per request: fairway handler 0.00, axum on fairway 1.50, axum on tokio 2.50 \
             (keep-alive /plaintext)"
        );
        assert!(headline(&counted[..1]).contains("axum on tokio no figure"));
        let table = table(&Plan { requests: 20_000, warm_up: 1_000, connections: 16 }, &counted);
        assert!(table.contains("background threads included"), "{table}");
        assert!(table.lines().any(|l| l.starts_with("axum on fairway") && l.contains(" 1.50 ")), "{table}");
    }
}
