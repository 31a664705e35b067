//! The open-loop run: C nonblocking keep-alive connections on one mio
//! `Poll`, and a loop that hands out every request the moment it is due,
//! reads answers, and records latency from when each request was due.
//!
//! With the server's pid, the server's CPU time is read when the first
//! measured request falls due (before it is sent) and when the loop ends
//! (just after the last answer): a few `/proc` reads, microseconds, once
//! each.
//!
//! The loop polls with a zero timeout: epoll's timeout is in whole
//! milliseconds, and sleeping to the next due time would make sends up to
//! a millisecond late, which would count as latency. The generator owns
//! its core (the bench pins it), so spinning costs nothing measured.

use std::collections::VecDeque;
use std::io::{self, Read, Write};
use std::time::{Duration, Instant};

use hdrhistogram::Histogram;
use mio::net::TcpStream;
use mio::{Events, Interest, Poll, Token};

use super::Config;
use super::outcome::{OpenLoopOutcome, ServerCpu};
use super::response::ResponseReader;
use super::schedule::Schedule;
use super::server_cpu::ProcessTree;

/// How long all connections have to be established before the run.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// The largest latency recorded exactly; longer ones saturate.
const MAX_LATENCY: Duration = Duration::from_secs(60);

/// A request handed to a connection: when it was due, and whether it is
/// measured.
#[derive(Clone, Copy, Debug)]
struct Due {
    at: Instant,
    measured: bool,
}

/// One keep-alive connection.
struct Connection {
    stream: TcpStream,
    connected: bool,
    /// Requests handed to it, oldest first; the first is on the wire when
    /// `in_flight`.
    queue: VecDeque<Due>,
    in_flight: bool,
    /// Bytes written but not yet accepted by the socket.
    unsent: Vec<u8>,
    reader: ResponseReader,
}

impl Connection {
    fn open(poll: &Poll, config: &Config, token: Token) -> io::Result<Connection> {
        let mut stream = TcpStream::connect(config.addr)?;
        stream.set_nodelay(true)?;
        poll.registry().register(&mut stream, token, Interest::READABLE | Interest::WRITABLE)?;
        Ok(Connection {
            stream,
            connected: false,
            queue: VecDeque::new(),
            in_flight: false,
            unsent: Vec::new(),
            reader: ResponseReader::default(),
        })
    }

    /// Puts the next queued request on the wire if none is.
    fn send_next(&mut self, request: &[u8]) -> io::Result<()> {
        if self.connected && !self.in_flight && !self.queue.is_empty() {
            self.in_flight = true;
            self.unsent.extend_from_slice(request);
        }
        self.flush()
    }

    fn flush(&mut self) -> io::Result<()> {
        while self.connected && !self.unsent.is_empty() {
            match self.stream.write(&self.unsent) {
                Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
                Ok(n) => drop(self.unsent.drain(..n)),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

/// Counters and the histogram of the measured requests.
struct Tally {
    latency: Histogram<u64>,
    errors: u64,
    answered: u64,
    last_answer: Option<Instant>,
    late_max: Duration,
}

impl Tally {
    fn answered(&mut self, due: Due, status: u16, now: Instant) {
        if !due.measured {
            return;
        }
        if status >= 400 {
            self.errors += 1;
            return;
        }
        let nanos = u64::try_from(now.saturating_duration_since(due.at).as_nanos()).unwrap_or(u64::MAX);
        self.latency.saturating_record(nanos.max(1));
        self.answered += 1;
        self.last_answer = Some(now);
    }

    fn lost(&mut self, queue: &mut VecDeque<Due>) {
        self.errors += queue.drain(..).filter(|d| d.measured).count() as u64;
    }
}

/// Runs `config` and reports the measured requests. Progress and
/// connection trouble go to stderr.
///
/// # Errors
///
/// When the connections cannot be set up at all, or the server's process
/// (`server_pid`) cannot be read before the run.
pub fn run(config: &Config) -> io::Result<OpenLoopOutcome> {
    let schedule = Schedule::new(config.rate, config.connections).map_err(io::Error::other)?;
    // Found before the clock starts: scanning /proc takes milliseconds.
    let server = config.server_pid.map(ProcessTree::of).transpose()?;
    let mut cpu_before = None;
    let request = config.request();
    let mut poll = Poll::new()?;
    let mut events = Events::with_capacity(1024);
    let mut conns =
        (0..config.connections).map(|i| Connection::open(&poll, config, Token(i))).collect::<io::Result<Vec<_>>>()?;

    // Connect everything before the clock starts.
    let deadline = Instant::now() + CONNECT_TIMEOUT;
    while conns.iter().any(|c| !c.connected) {
        if Instant::now() > deadline {
            let up = conns.iter().filter(|c| c.connected).count();
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!("{up} of {} connections to {} up after {CONNECT_TIMEOUT:?}", conns.len(), config.addr),
            ));
        }
        poll.poll(&mut events, Some(Duration::from_millis(10)))?;
        for event in &events {
            let conn = &mut conns[event.token().0];
            if event.is_writable() && !conn.connected {
                if let Some(e) = conn.stream.take_error()? {
                    return Err(e);
                }
                conn.connected = conn.stream.peer_addr().is_ok();
            }
        }
    }

    let first = schedule.count_before(config.warm_up);
    let total = schedule.count_before(config.warm_up + config.duration);
    let mut tally = Tally {
        latency: Histogram::new_with_bounds(1, MAX_LATENCY.as_nanos() as u64, 3).map_err(io::Error::other)?,
        errors: 0,
        answered: 0,
        last_answer: None,
        late_max: Duration::ZERO,
    };
    let start = Instant::now();
    let end = start + schedule.due(total.saturating_sub(1)) + config.drain;
    let mut next = 0u64;
    let mut buf = vec![0u8; 64 * 1024];
    let mut statuses = Vec::new();
    let mut reconnects = 0u64;
    loop {
        let now = Instant::now();
        while next < total && start + schedule.due(next) <= now {
            if next == first
                && let Some(server) = &server
            {
                cpu_before = cpu_time(server);
            }
            let at = start + schedule.due(next);
            let measured = next >= first;
            if measured {
                tally.late_max = tally.late_max.max(now - at);
            }
            let i = schedule.connection(next);
            conns[i].queue.push_back(Due { at, measured });
            if let Err(e) = conns[i].send_next(&request) {
                reconnect(&poll, config, &mut conns, i, &mut tally, &e, &mut reconnects)?;
            }
            next += 1;
        }
        let waiting = conns.iter().any(|c| !c.queue.is_empty());
        if next == total && !waiting || now > end {
            break;
        }
        poll.poll(&mut events, Some(Duration::ZERO))?;
        for event in &events {
            let i = event.token().0;
            let conn = &mut conns[i];
            let result = (|| -> io::Result<()> {
                if event.is_writable() {
                    if !conn.connected {
                        if let Some(e) = conn.stream.take_error()? {
                            return Err(e);
                        }
                        conn.connected = conn.stream.peer_addr().is_ok();
                    }
                    conn.send_next(&request)?;
                }
                if event.is_readable() || event.is_read_closed() {
                    loop {
                        match conn.stream.read(&mut buf) {
                            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                            Ok(n) => {
                                conn.reader.feed(&buf[..n], |s| statuses.push(s)).map_err(io::Error::other)?;
                                let now = Instant::now();
                                for status in statuses.drain(..) {
                                    let Some(due) = conn.queue.pop_front() else {
                                        return Err(io::Error::other("an answer to no request"));
                                    };
                                    conn.in_flight = false;
                                    tally.answered(due, status, now);
                                }
                                conn.send_next(&request)?;
                            }
                            Err(e) if e.kind() == io::ErrorKind::WouldBlock => break,
                            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                            Err(e) => return Err(e),
                        }
                    }
                }
                Ok(())
            })();
            if let Err(e) = result {
                statuses.clear();
                reconnect(&poll, config, &mut conns, i, &mut tally, &e, &mut reconnects)?;
            }
        }
    }
    let cpu_after = server.as_ref().and_then(cpu_time);
    for conn in &mut conns {
        tally.lost(&mut conn.queue);
    }
    if reconnects > 0 {
        eprintln!("openloop: {reconnects} connections lost and reopened");
    }
    let measured = total - first;
    let span_start = start + schedule.due(first);
    let span = tally
        .last_answer
        .map_or(config.duration, |last| last.saturating_duration_since(span_start))
        .max(config.duration);
    let quantile = |q: f64| Duration::from_nanos(tally.latency.value_at_quantile(q));
    Ok(OpenLoopOutcome {
        target_rate: config.rate,
        achieved_rate: tally.answered as f64 / span.as_secs_f64(),
        requests: measured,
        errors: tally.errors,
        p50: quantile(0.50),
        p90: quantile(0.90),
        p99: quantile(0.99),
        p999: quantile(0.999),
        max: Duration::from_nanos(tally.latency.max()),
        late_max: tally.late_max,
        server_cpu: cpu_before
            .zip(cpu_after)
            .map(|(before, after)| ServerCpu { time: after.saturating_sub(before), answered: tally.answered }),
    })
}

/// The server's CPU time so far, or `None` (said on stderr) when a
/// process of it is gone.
fn cpu_time(server: &ProcessTree) -> Option<Duration> {
    server.cpu_time().map_err(|e| eprintln!("openloop: no server CPU time: {e}")).ok()
}

/// Counts connection `i`'s requests as lost and opens it again; its
/// queue starts empty.
fn reconnect(
    poll: &Poll,
    config: &Config,
    conns: &mut [Connection],
    i: usize,
    tally: &mut Tally,
    why: &io::Error,
    reconnects: &mut u64,
) -> io::Result<()> {
    if *reconnects == 0 {
        eprintln!("openloop: connection {i} lost: {why}");
    }
    *reconnects += 1;
    tally.lost(&mut conns[i].queue);
    let _ = poll.registry().deregister(&mut conns[i].stream);
    conns[i] = Connection::open(poll, config, Token(i))?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::net::{SocketAddr, TcpListener};
    use std::thread;

    use super::*;

    /// A server on 127.0.0.1 that answers each request after `delay`,
    /// in order, one connection per thread.
    fn server(delay: Duration) -> SocketAddr {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        thread::spawn(move || {
            for stream in listener.incoming() {
                let Ok(mut stream) = stream else { return };
                thread::spawn(move || {
                    let mut buf = [0u8; 4096];
                    let mut pending = Vec::new();
                    loop {
                        let n = match stream.read(&mut buf) {
                            Ok(0) | Err(_) => return,
                            Ok(n) => n,
                        };
                        pending.extend_from_slice(&buf[..n]);
                        while let Some(at) = pending.windows(4).position(|w| w == b"\r\n\r\n") {
                            pending.drain(..at + 4);
                            thread::sleep(delay);
                            let answer = b"HTTP/1.1 200 OK\r\nContent-Length: 13\r\n\r\nHello, World!";
                            if stream.write_all(answer).is_err() {
                                return;
                            }
                        }
                    }
                });
            }
        });
        addr
    }

    fn config(addr: SocketAddr, rate: f64, connections: usize) -> Config {
        Config {
            addr,
            path: "/plaintext".into(),
            rate,
            connections,
            duration: Duration::from_millis(500),
            warm_up: Duration::from_millis(100),
            drain: Duration::from_secs(2),
            server_pid: None,
        }
    }

    #[test]
    fn a_fast_server_is_measured_at_the_rate() {
        let outcome = run(&config(server(Duration::ZERO), 2000.0, 4)).unwrap();
        assert_eq!((outcome.requests, outcome.errors), (1000, 0));
        assert!((outcome.achieved_rate - 2000.0).abs() < 200.0, "{outcome:?}");
        assert!(outcome.p50 < Duration::from_millis(5), "{outcome:?}");
    }

    #[test]
    fn waiting_behind_a_slow_answer_counts_from_when_the_request_was_due() {
        // One connection, a request due every 2 ms, each answered after
        // 10 ms: the queue grows by 4 requests per answer, so late
        // requests wait far longer than 10 ms. A closed-loop client would
        // report 10 ms for every one of them.
        let mut c = config(server(Duration::from_millis(10)), 500.0, 1);
        c.warm_up = Duration::ZERO;
        c.duration = Duration::from_millis(200);
        c.drain = Duration::from_secs(5);
        let outcome = run(&c).unwrap();
        assert_eq!((outcome.requests, outcome.errors), (100, 0));
        // The last of 100 is due at 198 ms and answered at about 1 s.
        assert!(outcome.max > Duration::from_millis(700), "{outcome:?}");
        assert!(outcome.p50 > Duration::from_millis(300), "{outcome:?}");
        assert!(outcome.achieved_rate < 150.0, "{outcome:?}");
    }

    #[test]
    fn unanswered_requests_are_errors() {
        let mut c = config(server(Duration::from_millis(50)), 200.0, 1);
        c.warm_up = Duration::ZERO;
        c.duration = Duration::from_millis(100);
        c.drain = Duration::from_millis(100);
        let outcome = run(&c).unwrap();
        // 20 due, one answered every 50 ms for about 200 ms.
        assert_eq!(outcome.requests, 20);
        assert!(outcome.errors >= 10, "{outcome:?}");
    }

    #[test]
    fn the_server_cpu_time_is_measured_over_the_window() {
        // The server is a thread of this process: its pid is ours (and
        // the generator's own spinning is counted too, as it is not when
        // the server is a process of its own).
        let mut c = config(server(Duration::ZERO), 2000.0, 4);
        c.server_pid = Some(std::process::id());
        let outcome = run(&c).unwrap();
        let cpu = outcome.server_cpu.unwrap();
        assert_eq!(cpu.answered, 1000, "{outcome:?}");
        assert!(cpu.time > Duration::ZERO && cpu.time < Duration::from_secs(5), "{cpu:?}");
        assert_eq!(run(&config(server(Duration::ZERO), 2000.0, 4)).unwrap().server_cpu, None);
        c.server_pid = Some(u32::MAX);
        assert!(run(&c).is_err());
    }

    #[test]
    fn nobody_listening_is_an_error() {
        let port = TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap();
        assert!(run(&config(port, 100.0, 2)).is_err());
    }
}
