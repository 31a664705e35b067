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
use std::time::Duration;

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

/// `http openloop`'s usage.
pub const USAGE: &str = "\
usage: http openloop --connect ADDR:PORT --rate R [--connections C]
                     [--duration S] [--warm-up S] [--path P] [--drain S]
                     [--server-pid PID]

Open-loop load: GET P (default /plaintext) due every 1/R s, round-robin over
C keep-alive connections (default 256), one outstanding request each; a
request due on a busy connection waits and its latency counts from when it
was due. Requests due in the S seconds (default 10) after the warm-up
(default 1) are measured; answers have --drain seconds (default 2) after
the last is due. Prints p50, p90, p99, p99.9, max and the achieved rate as
one `openloop:` line. With --server-pid, also the CPU time (utime + stime
from /proc) of that process and its descendants from just before the first
measured request is due to just after the last answer, and the answers.";

impl Config {
    /// Parses the arguments after `openloop`. `Err("")` asks for the help.
    ///
    /// # Errors
    ///
    /// A missing, unknown or unreadable argument, in words.
    pub fn parse(args: impl IntoIterator<Item = String>) -> Result<Config, String> {
        let (mut addr, mut rate) = (None, None);
        let mut c = Config {
            addr: SocketAddr::from(([127, 0, 0, 1], 80)),
            path: "/plaintext".into(),
            rate: 0.0,
            connections: 256,
            duration: Duration::from_secs(10),
            warm_up: Duration::from_secs(1),
            drain: Duration::from_secs(2),
            server_pid: None,
        };
        let mut it = args.into_iter();
        while let Some(flag) = it.next() {
            let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
            let seconds = |s: String| match s.parse::<f64>() {
                Ok(x) if x.is_finite() && x >= 0.0 => Ok(Duration::from_secs_f64(x)),
                _ => Err(format!("{flag} {s}: not a number of seconds")),
            };
            match flag.as_str() {
                "--connect" => {
                    let v = value()?;
                    addr = Some(v.parse::<SocketAddr>().map_err(|e| format!("--connect {v}: {e}"))?);
                }
                "--rate" => {
                    let v = value()?;
                    rate = Some(v.parse::<f64>().map_err(|e| format!("--rate {v}: {e}"))?);
                }
                "--connections" => {
                    let v = value()?;
                    c.connections = v.parse().map_err(|e| format!("--connections {v}: {e}"))?;
                }
                "--duration" => c.duration = seconds(value()?)?,
                "--warm-up" => c.warm_up = seconds(value()?)?,
                "--drain" => c.drain = seconds(value()?)?,
                "--path" => c.path = value()?,
                "--server-pid" => {
                    let v = value()?;
                    c.server_pid = Some(v.parse().map_err(|e| format!("--server-pid {v}: {e}"))?);
                }
                "-h" | "--help" => return Err(String::new()),
                other => return Err(format!("unknown argument {other}")),
            }
        }
        c.addr = addr.ok_or("--connect ADDR:PORT is required")?;
        c.rate = rate.ok_or("--rate R is required")?;
        schedule::Schedule::new(c.rate, c.connections)?;
        if c.duration.is_zero() {
            return Err("--duration must be more than 0".into());
        }
        if !c.path.starts_with('/') || c.path.bytes().any(|b| b.is_ascii_whitespace() || b.is_ascii_control()) {
            return Err(format!("--path {:?}: must start with / and have no spaces", c.path));
        }
        Ok(c)
    }

    /// The request every connection sends.
    #[must_use]
    pub fn request(&self) -> Vec<u8> {
        format!("GET {} HTTP/1.1\r\nHost: {}\r\n\r\n", self.path, self.addr.ip()).into_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Config, String> {
        Config::parse(args.iter().map(|s| s.to_string()))
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
        assert_eq!(parse(&["--help"]), Err(String::new()));
        assert!(parse(&["--rate", "5"]).unwrap_err().contains("--connect"));
        assert!(parse(&["--connect", "1.2.3.4:80"]).unwrap_err().contains("--rate"));
        assert!(parse(&["--connect", "1.2.3.4", "--rate", "5"]).unwrap_err().contains("--connect 1.2.3.4"));
        assert!(parse(&["--connect", "1.2.3.4:80", "--rate", "0"]).unwrap_err().contains("positive"));
        assert!(parse(&["--connect", "1.2.3.4:80", "--rate", "5", "--connections", "0"]).is_err());
        assert!(parse(&["--connect", "1.2.3.4:80", "--rate", "5", "--path", "/a b"]).is_err());
        assert!(parse(&["--connect", "1.2.3.4:80", "--rate", "5", "--duration", "0"]).is_err());
        assert!(parse(&["--connect", "1.2.3.4:80", "--rate", "5", "--server-pid", "x"]).is_err());
        assert!(parse(&["--nope"]).unwrap_err().contains("--nope"));
    }

    #[test]
    fn the_usage_fits_80_columns() {
        assert!(USAGE.lines().all(|l| l.chars().count() <= 80));
    }
}
