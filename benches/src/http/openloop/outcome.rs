//! What an open-loop run measured, and the one line `http openloop`
//! prints it as (the bench reads that line back from the client
//! namespace).

use std::time::Duration;

use crate::http::wrk::WrkResult;

/// The measured requests: those due in the measured span.
#[derive(Clone, Debug, PartialEq)]
pub struct OpenLoopOutcome {
    /// The schedule's rate, requests per second.
    pub target_rate: f64,
    /// Measured requests answered with 2xx or 3xx, per second of the span
    /// from the first being due to the last answer (at least the
    /// measured span).
    pub achieved_rate: f64,
    /// Measured requests (due in the span).
    pub requests: u64,
    /// Of those: no answer (connection lost, or none before the drain
    /// ended), or a status of 400 or more.
    pub errors: u64,
    /// Latency percentiles of the answered ones: 50 %.
    pub p50: Duration,
    /// 90 %.
    pub p90: Duration,
    /// 99 %.
    pub p99: Duration,
    /// 99.9 %.
    pub p999: Duration,
    /// The largest.
    pub max: Duration,
    /// The most the generator itself was late in noticing a request was
    /// due (its own loop, not the server): large values mean the client
    /// core could not keep up and the latencies include that.
    pub late_max: Duration,
    /// The server's CPU time over the window, when it was measured
    /// (`--server-pid`).
    pub server_cpu: Option<ServerCpu>,
}

/// The server's CPU time over the measured window, and the answers it
/// gave in it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ServerCpu {
    /// User and system time of the server's processes, from just before
    /// the first measured request was due to just after the last answer.
    pub time: Duration,
    /// Measured requests answered with 2xx or 3xx.
    pub answered: u64,
}

impl ServerCpu {
    /// CPU time per answered request; `None` when none was.
    #[must_use]
    pub fn per_request(&self) -> Option<Duration> {
        let answered = u32::try_from(self.answered).ok().filter(|&n| n > 0)?;
        Some(self.time / answered)
    }
}

const PREFIX: &str = "openloop:";

impl OpenLoopOutcome {
    /// `openloop: target=R achieved=A requests=N errors=E p50_us=..
    /// p90_us=.. p99_us=.. p999_us=.. max_us=.. late_max_us=..`, and
    /// ` server_cpu_us=.. answered=..` when the server's CPU was measured.
    #[must_use]
    pub fn line(&self) -> String {
        let us = |d: Duration| d.as_micros();
        let cpu =
            self.server_cpu.map_or(String::new(), |c| format!(" server_cpu_us={} answered={}", us(c.time), c.answered));
        format!(
            "{PREFIX} target={:.0} achieved={:.0} requests={} errors={} p50_us={} p90_us={} p99_us={} \
             p999_us={} max_us={} late_max_us={}{cpu}",
            self.target_rate,
            self.achieved_rate,
            self.requests,
            self.errors,
            us(self.p50),
            us(self.p90),
            us(self.p99),
            us(self.p999),
            us(self.max),
            us(self.late_max)
        )
    }

    /// Reads the [`line`](Self::line) in `output` (the last one, if
    /// several).
    ///
    /// # Errors
    ///
    /// No such line, or a field missing or unreadable, in words.
    pub fn parse(output: &str) -> Result<OpenLoopOutcome, String> {
        let line = output
            .lines()
            .rev()
            .find_map(|l| l.trim().strip_prefix(PREFIX))
            .ok_or_else(|| format!("no `{PREFIX}` line in {:?}", output.trim()))?;
        let field = |name: &str| -> Result<f64, String> {
            let value = line
                .split_whitespace()
                .find_map(|w| w.strip_prefix(name)?.strip_prefix('='))
                .ok_or_else(|| format!("no {name} in {line:?}"))?;
            value.parse::<f64>().map_err(|_| format!("{name}={value}: not a number"))
        };
        let micros = |name: &str| field(name).map(|us| Duration::from_micros(us as u64));
        let server_cpu = if line.split_whitespace().any(|w| w.starts_with("server_cpu_us=")) {
            Some(ServerCpu { time: micros("server_cpu_us")?, answered: field("answered")? as u64 })
        } else {
            None
        };
        Ok(OpenLoopOutcome {
            target_rate: field("target")?,
            achieved_rate: field("achieved")?,
            requests: field("requests")? as u64,
            errors: field("errors")? as u64,
            p50: micros("p50_us")?,
            p90: micros("p90_us")?,
            p99: micros("p99_us")?,
            p999: micros("p999_us")?,
            max: micros("max_us")?,
            late_max: micros("late_max_us")?,
            server_cpu,
        })
    }

    /// As a row of the bench's table: the achieved rate, p50, p99, and the
    /// server's CPU time per answered request.
    #[must_use]
    pub fn as_wrk_result(&self) -> WrkResult {
        WrkResult {
            idle_share: None,
            requests_per_second: self.achieved_rate,
            p50: Some(self.p50),
            p99: Some(self.p99),
            requests: self.requests,
            socket_errors: self.errors,
            timeouts: 0,
            non_2xx: 0,
            server_cpu: self.server_cpu.and_then(|c| c.per_request()),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> OpenLoopOutcome {
        OpenLoopOutcome {
            target_rate: 88_000.0,
            achieved_rate: 87_990.0,
            requests: 704_000,
            errors: 2,
            p50: Duration::from_micros(95),
            p90: Duration::from_micros(180),
            p99: Duration::from_micros(1_250),
            p999: Duration::from_micros(4_100),
            max: Duration::from_micros(12_000),
            late_max: Duration::from_micros(40),
            server_cpu: None,
        }
    }

    #[test]
    fn the_line_and_back() {
        let line = sample().line();
        assert_eq!(
            line,
            "openloop: target=88000 achieved=87990 requests=704000 errors=2 p50_us=95 p90_us=180 p99_us=1250 \
             p999_us=4100 max_us=12000 late_max_us=40"
        );
        let output = format!("openloop: connected 256\n{line}\n");
        assert_eq!(OpenLoopOutcome::parse(&output), Ok(sample()));
    }

    #[test]
    fn the_server_cpu_time_goes_on_the_line_when_measured() {
        let measured = OpenLoopOutcome {
            server_cpu: Some(ServerCpu { time: Duration::from_micros(3_520_000), answered: 703_998 }),
            ..sample()
        };
        let line = measured.line();
        assert!(line.starts_with(&sample().line()), "{line}");
        assert!(line.ends_with(" late_max_us=40 server_cpu_us=3520000 answered=703998"), "{line}");
        assert_eq!(OpenLoopOutcome::parse(&line), Ok(measured.clone()));
        let per_request = measured.as_wrk_result().server_cpu.unwrap();
        assert_eq!(per_request.as_nanos(), 3_520_000_000 / 703_998);
        assert_eq!(sample().as_wrk_result().server_cpu, None);
        // Without answers there is no figure per request; a time without
        // its count is not a line.
        assert_eq!(ServerCpu { time: Duration::from_secs(1), answered: 0 }.per_request(), None);
        assert!(OpenLoopOutcome::parse(&line.replace(" answered=703998", "")).unwrap_err().contains("answered"));
    }

    #[test]
    fn what_is_not_a_line() {
        assert!(OpenLoopOutcome::parse("").unwrap_err().contains("no `openloop:` line"));
        let without_p99 = sample().line().replace("p99_us=1250 ", "");
        assert!(OpenLoopOutcome::parse(&without_p99).unwrap_err().contains("no p99_us"));
        let garbled = sample().line().replace("errors=2", "errors=two");
        assert!(OpenLoopOutcome::parse(&garbled).unwrap_err().contains("errors=two"));
    }

    #[test]
    fn as_a_row() {
        let r = sample().as_wrk_result();
        assert_eq!((r.requests_per_second, r.p50, r.p99), (87_990.0, Some(sample().p50), Some(sample().p99)));
        assert_eq!((r.requests, r.errors()), (704_000, 2));
    }
}
