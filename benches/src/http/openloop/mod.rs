//! `http openloop`: an open-loop HTTP/1.1 load generator, free of
//! coordinated omission. Requests are due on a fixed schedule at a
//! constant rate ([`schedule`]), spread round-robin over keep-alive
//! connections, one outstanding per connection; a request whose connection
//! is still busy waits on it, and its latency still counts from when it
//! was due. Latency is response complete − due, in an hdrhistogram.
//!
//! - [`schedule`]: rate → when each request is due, on which connection;
//! - [`response`]: where each response ends, across split reads;
//! - [`generator`]: the connections and the event loop;
//! - [`server_cpu`]: the server's CPU time, from `/proc`;
//! - [`outcome`]: the percentiles, as one line and back.

pub mod generator;
pub mod outcome;
pub mod response;
pub mod schedule;
pub mod server_cpu;

use std::net::SocketAddr;
use std::process::ExitCode;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{CommandFactory, Parser};

use crate::cli::{at_least_one, positive_seconds, seconds};

/// What to run.
#[derive(Clone, Debug, PartialEq)]
pub struct Config {
    /// The server.
    pub addr: SocketAddr,
    /// The request path.
    pub path: String,
    /// Requests per second.
    pub rate: f64,
    /// Keep-alive connections.
    pub connections: usize,
    /// Requests due in this span after the warm-up are measured.
    pub duration: Duration,
    /// Requests due before this are sent but not measured.
    pub warm_up: Duration,
    /// How long after the last request is due the answers may still come;
    /// those that do not are errors.
    pub drain: Duration,
    /// The server's process, whose CPU time (with its descendants') over
    /// the measured window is reported; `None`: not measured.
    pub server_pid: Option<u32>,
}

/// What `http openloop --help` says before the options.
const LONG_ABOUT: &str = "\
Open-loop load: GET P (default /plaintext) due every 1/R s, round-robin over
C keep-alive connections (default 256), one outstanding request each; a
request due on a busy connection waits and its latency counts from when it
was due. Requests due in the S seconds (default 10) after the warm-up
(default 1) are measured; answers have --drain seconds (default 2) after
the last is due. Prints p50, p90, p99, p99.9, max and the achieved rate as
one `openloop:` line. With --server-pid, also the CPU time (utime + stime
from /proc) of that process and its descendants from just before the first
measured request is due to just after the last answer, and the answers.";

// The option docs are verbatim, as clap here does not wrap help text: each
// first line is a phrase for `-h`, the rest is for `--help`, which indents
// them by 10 columns, so they are at most 70.
/// Open-loop HTTP/1.1 load against one server.
///
/// `http openloop`'s command line: parsed from `["http openloop", ARGS...]`,
/// then [`check`](OpenLoopCli::check)ed into a [`Config`].
#[derive(Parser, Debug)]
#[command(name = "openloop", bin_name = "http openloop", long_about = LONG_ABOUT)]
// As the hand-written parser did: a repeated option takes its last value,
// and `-1` is a value (which the option then refuses), not an unknown flag.
#[command(args_override_self = true, allow_negative_numbers = true)]
pub struct OpenLoopCli {
    /// The server
    #[arg(long, value_name = "ADDR:PORT", verbatim_doc_comment)]
    connect: SocketAddr,
    /// Requests due per second
    #[arg(long, value_name = "R", verbatim_doc_comment)]
    rate: f64,
    /// Keep-alive connections
    ///
    /// Requests go round-robin over them, one outstanding on each.
    #[arg(long, value_name = "C", default_value_t = 256, value_parser = at_least_one::<usize>, verbatim_doc_comment)]
    connections: usize,
    /// Seconds of requests measured
    ///
    /// The requests due in this span after the warm-up.
    #[arg(long, value_name = "S", default_value = "10", value_parser = positive_seconds, verbatim_doc_comment)]
    duration: Duration,
    /// Seconds of requests not measured
    ///
    /// The requests due before the measured ones are sent all the same.
    #[arg(long, value_name = "S", default_value = "1", value_parser = seconds, verbatim_doc_comment)]
    warm_up: Duration,
    /// The request path
    ///
    /// From /, without spaces or control characters.
    #[arg(long, value_name = "P", default_value = "/plaintext", value_parser = request_path, verbatim_doc_comment)]
    path: String,
    /// Seconds for the answers at the end
    ///
    /// After the last request is due; answers that have not come by then
    /// are errors.
    #[arg(long, value_name = "S", default_value = "2", value_parser = seconds, verbatim_doc_comment)]
    drain: Duration,
    /// The server's process, whose CPU time is reported
    ///
    /// With its descendants', over the measured window.
    #[arg(long, value_name = "PID", verbatim_doc_comment)]
    server_pid: Option<u32>,
}

/// `--path`: what fits the request line as it is.
fn request_path(s: &str) -> Result<String, String> {
    if !s.starts_with('/') || s.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control()) {
        return Err("must start with / and have no spaces".to_owned());
    }
    Ok(s.to_owned())
}

impl OpenLoopCli {
    /// What to run, once what clap cannot check holds: a schedule of
    /// `--rate` over `--connections`.
    ///
    /// # Errors
    ///
    /// The schedule's objection, as a command-line error (exit status 2).
    pub fn check(self) -> Result<Config, clap::Error> {
        schedule::Schedule::new(self.rate, self.connections)
            .map_err(|why| OpenLoopCli::command().error(ErrorKind::ValueValidation, why))?;
        Ok(Config {
            addr: self.connect,
            path: self.path,
            rate: self.rate,
            connections: self.connections,
            duration: self.duration,
            warm_up: self.warm_up,
            drain: self.drain,
            server_pid: self.server_pid,
        })
    }
}

impl Config {
    /// The request every connection sends.
    #[must_use]
    pub fn request(&self) -> Vec<u8> {
        format!("GET {} HTTP/1.1\r\nHost: {}\r\n\r\n", self.path, self.addr.ip()).into_bytes()
    }
}

/// `PROGRAM openloop ARGS`: the load generator alone, as a bench runs it
/// in the client namespace. A bad command line exits with status 2, -h
/// and --help with 0, as the program's own; the outcome is one line on
/// standard output.
#[must_use]
pub fn main(program: &str, args: impl Iterator<Item = String>) -> ExitCode {
    let argv = std::iter::once(format!("{program} openloop")).chain(args);
    let config = OpenLoopCli::parse_from(argv).check().unwrap_or_else(|e| e.exit());
    match generator::run(&config) {
        Ok(outcome) => {
            println!("{}", outcome.line());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("{program} openloop: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    use std::path::Path;

    use crate::cli::{checked_help, refusal, shows_help};
    use crate::http::plan::{Case, Cores, Subject};

    /// `http openloop ARGS` as `http`'s `main` reads it.
    fn parse(args: &[&str]) -> Result<Config, clap::Error> {
        OpenLoopCli::try_parse_from(std::iter::once("http openloop").chain(args.iter().copied()))?.check()
    }

    #[test]
    fn arguments() {
        let c = parse(&["--connect", "10.77.0.1:80", "--rate", "88000"]).unwrap();
        assert_eq!((c.addr, c.rate, c.connections), ("10.77.0.1:80".parse().unwrap(), 88_000.0, 256));
        assert_eq!(
            (c.duration, c.warm_up, c.path.as_str()),
            (Duration::from_secs(10), Duration::from_secs(1), "/plaintext")
        );
        assert_eq!(c.request(), b"GET /plaintext HTTP/1.1\r\nHost: 10.77.0.1\r\n\r\n");
        let c = parse(&[
            "--connect",
            "127.0.0.1:8080",
            "--rate",
            "5",
            "--connections",
            "2",
            "--duration",
            "0.5",
            "--warm-up",
            "0",
            "--drain",
            "1",
            "--path",
            "/json",
        ])
        .unwrap();
        assert_eq!((c.connections, c.duration, c.warm_up), (2, Duration::from_millis(500), Duration::ZERO));
        assert_eq!((c.drain, c.path.as_str()), (Duration::from_secs(1), "/json"));
        assert_eq!(c.server_pid, None);
        let c = parse(&["--connect", "127.0.0.1:80", "--rate", "5", "--server-pid", "4242"]).unwrap();
        assert_eq!(c.server_pid, Some(4242));
    }

    #[test]
    fn bad_arguments() {
        for help in ["--help", "-h"] {
            assert!(shows_help(parse(&[help])), "{help}");
        }
        let error = |args: &[&str]| refusal(parse(args));
        // Where clap words an error its own way, the fragment is clap's:
        // "--connect ADDR:PORT is required", "--connect 1.2.3.4: ...",
        // "--path ...", "--server-pid x: ..." and "unknown argument" were
        // the hand-written parser's.
        assert!(error(&["--rate", "5"]).contains("--connect <ADDR:PORT>"));
        assert!(error(&["--connect", "1.2.3.4:80"]).contains("--rate <R>"));
        assert!(
            error(&["--connect", "1.2.3.4", "--rate", "5"])
                .contains("invalid value '1.2.3.4' for '--connect <ADDR:PORT>'")
        );
        assert!(error(&["--connect", "1.2.3.4:80", "--rate", "0"]).contains("positive"));
        assert!(error(&["--connect", "1.2.3.4:80", "--rate", "5", "--connections", "0"]).contains("at least 1"));
        assert!(error(&["--connect", "1.2.3.4:80", "--rate", "5", "--path", "/a b"]).contains("for '--path <P>'"));
        assert!(error(&["--connect", "1.2.3.4:80", "--rate", "5", "--duration", "0"]).contains("more than 0"));
        assert!(
            error(&["--connect", "1.2.3.4:80", "--rate", "5", "--server-pid", "x"]).contains("'--server-pid <PID>'")
        );
        assert!(error(&["--nope"]).contains("unexpected argument '--nope'"));
    }

    #[test]
    fn the_help_names_every_option_and_fits_80_columns() {
        let long = checked_help(
            OpenLoopCli::command(),
            &["--connect", "--rate", "--connections", "--duration", "--warm-up", "--path", "--drain", "--server-pid"],
        );
        assert!(long.contains("Usage: http openloop "), "{long}");
    }

    #[test]
    fn the_bench_command_line_parses() {
        let cores = Cores::split(2, None).unwrap();
        let line = Case::LatencyHalf.openloop_command(
            Subject::FairwayKernel,
            &cores,
            Path::new("http"),
            88_123.4,
            Duration::from_millis(8500),
            Duration::from_secs(1),
        );
        let args = line.iter().skip_while(|a| *a != "openloop").skip(1);
        let c = parse(&args.map(String::as_str).collect::<Vec<_>>()).unwrap();
        assert_eq!((c.addr, c.path.as_str(), c.rate), ("10.77.0.1:8080".parse().unwrap(), "/plaintext", 88_123.0));
        assert_eq!((c.connections, c.duration, c.warm_up), (256, Duration::from_millis(8500), Duration::from_secs(1)));
    }
}
