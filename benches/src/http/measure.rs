//! Running one server on the testbed and measuring it with wrk (h2load for
//! HTTP/2) from the client namespace: start (pinned), wait until it
//! answers, check what it serves, warm up, run each case, stop. For the
//! open-loop cases the generator also reads the server's CPU time (it is
//! given the server's pid, once `/proc/PID/comm` shows the spawned process
//! is the server).

use std::io;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fairway_tests::testbed::{self, ServerProcess, Testbed};

use super::h2load;
use super::openloop::outcome::OpenLoopOutcome;
use super::openloop::server_cpu::ProcessTree;
use super::plan::{
    Case, Cores, Generator, Group, PLAINTEXT_BODY, Programs, STATIC_BYTES, Subject, UpstreamAt, expected_comm,
    server_command, upstream_command,
};
use super::site::RunFiles;
use super::wrk::{self, WrkResult};
use fairway_tests::testbed::KernelAddress;

/// How long a server has to answer its first request.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// How long a server has after SIGTERM (Fairway's own shutdown deadline
/// is 5 s by default) before SIGKILL.
const STOP_GRACE: Duration = Duration::from_secs(10);
/// How much longer than its duration a wrk or h2load run may take.
const WRK_SLACK: Duration = Duration::from_secs(30);

/// Why measuring stopped early.
#[derive(Debug)]
pub enum Stop {
    /// Ctrl-C.
    Interrupted,
}

/// A case's outcome: wrk's report (or h2load's or the open-loop
/// generator's, in the same shape), or why there is none.
pub type Outcome = Result<WrkResult, String>;

/// What a run is made of, on one testbed.
pub struct Bench<'a> {
    /// The testbed (one client).
    pub tb: &'a Testbed,
    /// The core budget.
    pub cores: Cores,
    /// The servers' binaries.
    pub programs: &'a Programs,
    /// The `http` binary, whose `openloop` runs the open-loop cases.
    pub openloop: &'a Path,
    /// The files.
    pub files: &'a RunFiles,
    /// Each case's wrk (or h2load) duration.
    pub duration: Duration,
    /// wrk against `/plaintext` before the cases, and h2load before each
    /// of its cases, not counted.
    pub warm_up: Duration,
    /// Raised by Ctrl-C.
    pub interrupted: &'a AtomicBool,
    /// Where the proxies' upstream runs.
    pub upstream: UpstreamAt,
}

impl Bench<'_> {
    /// Starts `server`, runs `cases` against it, and stops it: each case's
    /// outcome. A server that does not start, or serves the wrong thing,
    /// fails every case with the reason. Open-loop cases run at
    /// `open_loop_rate`, or fail with the reason there is none.
    ///
    /// # Errors
    ///
    /// [`Stop::Interrupted`] on Ctrl-C; the server is stopped.
    pub fn server(
        &self,
        server: Subject,
        cases: &[Case],
        open_loop_rate: Result<f64, String>,
    ) -> Result<Vec<(Case, Outcome)>, Stop> {
        let mut started = match self.start(server, &[])? {
            Ok(started) => started,
            Err(why) => return Ok(cases.iter().map(|&c| (c, Err(why.clone()))).collect()),
        };
        let mut outcomes = Vec::new();
        for &case in cases {
            let outcome = match (&open_loop_rate, case.is_open_loop()) {
                (_, false) => started.load(case)?,
                (Ok(rate), true) => started.open_loop(case, *rate)?,
                (Err(why), true) => Err(why.clone()),
            };
            outcomes.push((case, outcome));
        }
        started.stop();
        Ok(outcomes)
    }

    /// Starts `server` with `extra` flags after its own (the ablation's
    /// switches), waits until it answers and serves what the cases
    /// expect, and warms it up: a server to run cases against, or why it
    /// could not start.
    ///
    /// # Errors
    ///
    /// [`Stop::Interrupted`] on Ctrl-C; the server is stopped.
    pub fn start(&self, server: Subject, extra: &[String]) -> Result<Result<Started<'_>, String>, Stop> {
        let address = if server.needs_kernel_address() {
            match KernelAddress::add(self.tb) {
                Ok(address) => Some(address),
                Err(e) => return Ok(Err(e.to_string())),
            }
        } else {
            None
        };
        let offloads = if server.segmentation_offload() {
            match Offloads::on(self.tb) {
                Ok(offloads) => Some(offloads),
                Err(e) => return Ok(Err(e)),
            }
        } else {
            None
        };
        let Some(program) = self.programs.of(server) else {
            return Ok(Err(format!("{server} runs another build of fairway: --baseline PATH")));
        };
        // The proxies' upstream runs beside them, for their runs only.
        let upstream = if server.group() == Group::Proxy {
            let line = upstream_command(&self.cores, &self.programs.fairway, self.files.dir(), self.upstream);
            let ns = match self.upstream {
                UpstreamAt::Loopback => self.tb.server_ns(),
                UpstreamAt::BeyondNic => self.tb.client_ns(0),
            };
            match ServerProcess::spawn(&ns, &line, STOP_GRACE) {
                Ok(process) => Some(process),
                Err(e) => return Ok(Err(format!("could not start the upstream: {e}"))),
            }
        } else {
            None
        };
        let mut line = server_command(server, &self.cores, program, self.files.dir(), self.upstream);
        line.extend(extra.iter().cloned());
        let mut running = match ServerProcess::spawn(&self.tb.server_ns(), &line, STOP_GRACE) {
            Ok(process) if server.is_nginx() => process.with_log(self.files.site().log()),
            Ok(process) => process,
            Err(e) => return Ok(Err(format!("could not start: {e}"))),
        };
        if let Err(why) = self.ready(server, &mut running)? {
            return Ok(Err(why));
        }
        if let Err(why) = self.check(server) {
            return Ok(Err(why));
        }
        let pid = server_pid(&running, program).map_err(|why| eprintln!("http:   no server CPU figures: {why}")).ok();
        if !self.warm_up.is_zero() {
            let _ = self.wrk(Case::KeepAlive64, server, self.warm_up)?;
        }
        Ok(Ok(Started {
            bench: self,
            server,
            running,
            pid,
            _upstream: upstream,
            _offloads: offloads,
            _address: address,
        }))
    }

    /// Waits until `/plaintext` answers 200 from the client.
    fn ready(&self, server: Subject, running: &mut ServerProcess) -> Result<Result<(), String>, Stop> {
        let url = server.url("/plaintext");
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if self.interrupted.load(Ordering::Relaxed) {
                return Err(Stop::Interrupted);
            }
            if !running.is_running() {
                return Ok(Err(format!("exited before it answered: {}", running.complaints())));
            }
            if self.curl(&url).is_ok_and(|(code, _)| code == "200") {
                return Ok(Ok(()));
            }
            if Instant::now() > deadline {
                return Ok(Err(format!("no answer to {url} within {READY_TIMEOUT:?}: {}", running.complaints())));
            }
            std::thread::sleep(Duration::from_millis(100));
        }
    }

    /// Whether the server serves what the cases expect: the plaintext body,
    /// and the whole static file from those that serve it.
    fn check(&self, server: Subject) -> Result<(), String> {
        let plaintext = (Case::KeepAlive64, PLAINTEXT_BODY.len() as u64);
        let file = server.serves_static().then_some((Case::StaticFile, STATIC_BYTES));
        for (case, bytes) in std::iter::once(plaintext).chain(file) {
            let url = server.url(&case.path());
            let (code, size) = self.curl(&url).map_err(|e| format!("GET {url}: {e}"))?;
            if code != "200" || size != bytes.to_string() {
                return Err(format!("GET {url}: status {code}, {size} bytes (expected 200, {bytes} bytes)"));
            }
        }
        Ok(())
    }

    /// `curl` from the client: status and body size.
    fn curl(&self, url: &str) -> io::Result<(String, String)> {
        // The run's certificate is self-signed: HTTPS is checked for what
        // it serves, not for whom.
        let line =
            ["curl", "-s", "-k", "-o", "/dev/null", "--max-time", "2", "-w", "%{http_code} %{size_download}", url];
        let out =
            testbed::exec_timeout(&self.tb.client_ns(0), &line, Duration::from_secs(5)).map_err(io::Error::other)?;
        let text = out.stdout_text();
        let mut words = text.split_whitespace();
        Ok((words.next().unwrap_or_default().to_owned(), words.next().unwrap_or_default().to_owned()))
    }

    /// [`closed_loop`](Self::closed_loop) for the case duration, with the
    /// server's CPU time per request over the run when `server_pid` is
    /// known (its process tree's utime + stime from `/proc`, before and
    /// after, over the responses wrk or h2load counted). h2load's cases
    /// warm up first with a run of their own: the server's warm-up spoke
    /// HTTP/1.1.
    fn measured(&self, case: Case, server: Subject, server_pid: Option<u32>) -> Result<Outcome, Stop> {
        if case.generator() == Generator::Idle {
            return self.idle(server_pid);
        }
        if case.generator() == Generator::H2load && !self.warm_up.is_zero() {
            let _ = self.h2load(case, server, self.warm_up)?;
        }
        let tree = server_pid.and_then(|pid| ProcessTree::of(pid).ok());
        let before = tree.as_ref().and_then(|t| t.cpu_time().ok());
        let mut outcome = self.closed_loop(case, server, self.duration)?;
        let after = tree.as_ref().and_then(|t| t.cpu_time().ok());
        if let (Ok(result), Some(before), Some(after)) = (&mut outcome, before, after)
            && result.requests > 0
        {
            result.server_cpu = Some(after.saturating_sub(before) / u32::try_from(result.requests).unwrap_or(u32::MAX));
        }
        Ok(outcome)
    }

    /// The idle case: after a second for what the last load left (a
    /// busy-poll window, lingering connections), the server's CPU time
    /// over the case's duration with no load at all, as a share of a core.
    fn idle(&self, server_pid: Option<u32>) -> Result<Outcome, Stop> {
        let Some(tree) = server_pid.and_then(|pid| ProcessTree::of(pid).ok()) else {
            return Ok(Err("the server's process is not known: no CPU time to read".to_owned()));
        };
        let pause = |d: Duration| -> Result<(), Stop> {
            let end = Instant::now() + d;
            while Instant::now() < end {
                if self.interrupted.load(Ordering::Relaxed) {
                    return Err(Stop::Interrupted);
                }
                std::thread::sleep(Duration::from_millis(100).min(end.saturating_duration_since(Instant::now())));
            }
            Ok(())
        };
        pause(Duration::from_secs(1))?;
        let (before, start) = (tree.cpu_time(), Instant::now());
        pause(self.duration)?;
        let (after, took) = (tree.cpu_time(), start.elapsed());
        Ok(match (before, after) {
            (Ok(before), Ok(after)) => Ok(WrkResult {
                requests_per_second: 0.0,
                p50: None,
                p99: None,
                requests: 0,
                socket_errors: 0,
                timeouts: 0,
                non_2xx: 0,
                server_cpu: None,
                idle_share: Some(after.saturating_sub(before).as_secs_f64() / took.as_secs_f64()),
            }),
            (Err(e), _) | (_, Err(e)) => Err(format!("the server's CPU time: {e}")),
        })
    }

    /// One run of `case` for `duration` by its closed-loop generator: wrk,
    /// or h2load for HTTP/2.
    fn closed_loop(&self, case: Case, server: Subject, duration: Duration) -> Result<Outcome, Stop> {
        match case.generator() {
            Generator::Wrk => self.wrk(case, server, duration),
            Generator::H2load => self.h2load(case, server, duration),
            Generator::OpenLoop => Ok(Err(format!("{} runs open loop, at a rate", case.key()))),
            Generator::Idle => Ok(Err(format!("{} puts no load on the server", case.key()))),
        }
    }

    /// One h2load run of `case` for `duration`; the TLS and HTTP/2 it
    /// negotiated go to the log.
    fn h2load(&self, case: Case, server: Subject, duration: Duration) -> Result<Outcome, Stop> {
        let line = case.h2load_command(server, &self.cores, duration);
        let out = testbed::exec_timeout(&self.tb.client_ns(0), &line, duration + WRK_SLACK);
        if self.interrupted.load(Ordering::Relaxed) {
            return Err(Stop::Interrupted);
        }
        Ok(match out {
            Ok(out) if out.success() => {
                let text = out.stdout_text();
                eprintln!("http:   h2load: {}", h2load::session(&text));
                h2load::parse(&text, if server.is_tls() { "h2" } else { "h2c" })
            }
            Ok(out) => Err(format!("h2load failed: {} {}", out.stdout_text().trim(), out.stderr_text().trim())),
            Err(e) => Err(format!("h2load: {e}")),
        })
    }

    /// One wrk run of `case` for `duration`.
    fn wrk(&self, case: Case, server: Subject, duration: Duration) -> Result<Outcome, Stop> {
        let line = case.wrk_command(server, &self.cores, duration, self.files.script());
        let out = testbed::exec_timeout(&self.tb.client_ns(0), &line, duration + WRK_SLACK);
        if self.interrupted.load(Ordering::Relaxed) {
            return Err(Stop::Interrupted);
        }
        Ok(match out {
            Ok(out) if out.success() => wrk::parse(&out.stdout_text()),
            Ok(out) => Err(format!("wrk failed: {} {}", out.stdout_text().trim(), out.stderr_text().trim())),
            Err(e) => Err(format!("wrk: {e}")),
        })
    }
}

impl Bench<'_> {
    /// One open-loop run of `case` at `rate` for the case duration, after
    /// a warm-up of its own; with `server_pid`, the generator measures the
    /// server's CPU time too.
    fn open_loop(&self, case: Case, server: Subject, rate: f64, server_pid: Option<u32>) -> Result<Outcome, Stop> {
        let warm_up = Duration::from_secs(1);
        let mut line = case.openloop_command(server, &self.cores, self.openloop, rate, self.duration, warm_up);
        // The namespaces share the PID namespace and /proc: the generator
        // in the client namespace reads the server's /proc/PID/stat.
        line.extend(server_pid.map(|pid| ["--server-pid".to_owned(), pid.to_string()]).into_iter().flatten());
        let out = testbed::exec_timeout(&self.tb.client_ns(0), &line, self.duration + warm_up + WRK_SLACK);
        if self.interrupted.load(Ordering::Relaxed) {
            return Err(Stop::Interrupted);
        }
        Ok(match out {
            Ok(out) if out.success() => {
                let text = out.stdout_text();
                // The whole line (p90, p99.9, max, the generator's own
                // lateness) for the log; the table has p50 and p99.
                eprintln!("http:   {}", text.trim());
                OpenLoopOutcome::parse(&text).map(|o| o.as_wrk_result())
            }
            Ok(out) => Err(format!("openloop failed: {} {}", out.stdout_text().trim(), out.stderr_text().trim())),
            Err(e) => Err(format!("openloop: {e}")),
        })
    }
}

/// A server [`Bench::start`] started, until [`Started::stop`] or drop.
pub struct Started<'a> {
    bench: &'a Bench<'a>,
    server: Subject,
    running: ServerProcess,
    pid: Option<u32>,
    // Dropped after the server (fields drop in order): its upstream, the
    // offloads and the kernel address it needed.
    _upstream: Option<ServerProcess>,
    _offloads: Option<Offloads<'a>>,
    _address: Option<KernelAddress>,
}

impl Started<'_> {
    /// The server's process id, when `/proc` showed it is the server.
    #[must_use]
    pub fn pid(&self) -> Option<u32> {
        self.pid
    }

    /// One run of `case` for the bench's duration by wrk, or by h2load
    /// for HTTP/2, with the server's CPU time per request.
    ///
    /// # Errors
    ///
    /// [`Stop::Interrupted`] on Ctrl-C.
    pub fn load(&mut self, case: Case) -> Result<Outcome, Stop> {
        if !self.running.is_running() {
            return Ok(Err(format!("the server exited: {}", self.running.complaints())));
        }
        self.bench.measured(case, self.server, self.pid)
    }

    /// One open-loop run of `case` at `rate` requests per second, with the
    /// server's CPU time per request.
    ///
    /// # Errors
    ///
    /// [`Stop::Interrupted`] on Ctrl-C.
    pub fn open_loop(&mut self, case: Case, rate: f64) -> Result<Outcome, Stop> {
        if !self.running.is_running() {
            return Ok(Err(format!("the server exited: {}", self.running.complaints())));
        }
        self.bench.open_loop(case, self.server, rate, self.pid)
    }

    /// Stops the server.
    pub fn stop(mut self) {
        drop(self.running.stop());
    }
}

/// tx checksum, TSO and GSO on `fw0` (see [`Subject::NginxGso`]), off
/// again as the testbed has them when dropped.
struct Offloads<'a> {
    tb: &'a Testbed,
}

impl Offloads<'_> {
    fn on(tb: &Testbed) -> Result<Offloads<'_>, String> {
        tb.server_send_offloads(true).map_err(|e| e.to_string())?;
        Ok(Offloads { tb })
    }
}

impl Drop for Offloads<'_> {
    fn drop(&mut self) {
        if let Err(e) = self.tb.server_send_offloads(false) {
            eprintln!("http: turning segmentation offload off again: {e}");
        }
    }
}

/// The server's process id, once `/proc/PID/comm` shows that the spawned
/// process is `program` itself: `ip netns exec` and `taskset` each exec
/// the next, so the id spawned is the server's, and a wrapper that forked
/// instead would be measured in its place.
fn server_pid(running: &ServerProcess, program: &Path) -> Result<u32, String> {
    let pid = running.id().ok_or("the server is not running")?;
    let path = format!("/proc/{pid}/comm");
    let comm = std::fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let expected = expected_comm(program);
    if comm.trim_end() == expected {
        Ok(pid)
    } else {
        Err(format!("{path} is {:?}, not {expected:?}", comm.trim_end()))
    }
}
