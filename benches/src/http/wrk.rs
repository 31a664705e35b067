//! wrk: its command line for a case, the Lua script for pipelining, and
//! what its `--latency` report says.

use std::time::Duration;

/// The Lua script that makes wrk pipeline: each write carries `depth`
/// requests (the script's first argument, after wrk's `--`), sent back to
/// back before any response is read. Written by us, in the way wrk's
/// scripting interface allows (`init` builds the batch once, `request`
/// returns it).
pub const PIPELINE_SCRIPT: &str = "\
-- Written by fairway-benches' `http`: pipelined requests, `depth` per write.
init = function(args)
  local depth = tonumber(args[1]) or 1
  local batch = {}
  for i = 1, depth do
    batch[i] = wrk.format()
  end
  pipelined = table.concat(batch)
end

request = function()
  return pipelined
end
";

/// What one wrk run reported.
#[derive(Clone, Debug, PartialEq)]
pub struct WrkResult {
    /// `Requests/sec:` (responses per second, pipelined ones counted one
    /// by one).
    pub requests_per_second: f64,
    /// The 50th percentile of the latency distribution; `None` when wrk's
    /// distribution is not to be trusted (see [`parse`]).
    pub p50: Option<Duration>,
    /// The 99th percentile, the same way.
    pub p99: Option<Duration>,
    /// Responses completed, from `N requests in T`.
    pub requests: u64,
    /// Socket errors: connect, read, write and timeout together.
    pub socket_errors: u64,
    /// Of those, the requests wrk gave up waiting for (its `--timeout`,
    /// 2 s by default): slow answers rather than broken connections.
    pub timeouts: u64,
    /// `Non-2xx or 3xx responses:`.
    pub non_2xx: u64,
    /// The server's CPU time per answered request over the measured
    /// window, when the server's process is known: the open-loop generator
    /// reads it, and the bench around a wrk run (wrk itself cannot tell).
    pub server_cpu: Option<Duration>,
    /// For the idle case: the server's CPU time over the window, as a
    /// share of one core.
    pub idle_share: Option<f64>,
}

impl WrkResult {
    /// Everything that went wrong: socket errors and bad statuses.
    #[must_use]
    pub fn errors(&self) -> u64 {
        self.socket_errors + self.non_2xx
    }
}

/// Reads the report of `wrk --latency`.
///
/// A percentile that reads zero means wrk's distribution is inconsistent,
/// and then none of its percentiles is given (`None`, shown `n/a`). wrk 4
/// "corrects" its histogram after the run by adding samples every
/// `runtime / (responses / connections)` below each long one, but does not
/// lower the histogram's minimum; its percentiles walk from that minimum,
/// so when added samples fall below it the ranks run past the end and it
/// prints `0.00us`. Pipelining guarantees this: responses count one by
/// one but latency is sampled once per batch, so the interval is `depth`
/// times too short and most added samples land below the minimum (the
/// pipelined case printed 50 % 1.38ms, 75 % to 99 % 0.00us). The nonzero
/// percentiles of such a report are shifted as well, so they go too.
///
/// # Errors
///
/// When the requests per second are missing or unreadable, or the
/// percentiles are missing (no `--latency`) or unreadable, in words.
pub fn parse(report: &str) -> Result<WrkResult, String> {
    let mut rps = None;
    let (mut p50, mut p99) = (None, None);
    let mut a_percentile_is_zero = false;
    let (mut requests, mut socket_errors, mut timeouts, mut non_2xx) = (0, 0, 0, 0);
    for line in report.lines().map(str::trim) {
        if let Some(value) = line.strip_prefix("Requests/sec:") {
            rps = Some(value.trim().parse::<f64>().map_err(|_| format!("requests/sec {:?}", value.trim()))?);
        } else if let Some((percent, value)) = percentile_line(line) {
            let latency = duration(value).ok_or_else(|| format!("{percent}% latency {value:?}"))?;
            a_percentile_is_zero |= latency.is_zero();
            match percent {
                "50" => p50 = Some(latency),
                "99" => p99 = Some(latency),
                _ => {}
            }
        } else if let Some(errors) = line.strip_prefix("Socket errors:") {
            // "connect 0, read 0, write 0, timeout 12"
            for part in errors.split(',') {
                let mut words = part.split_whitespace();
                let kind = words.next();
                let count = words.next().and_then(|n| n.parse::<u64>().ok());
                let count = count.ok_or_else(|| format!("socket errors {:?}", errors.trim()))?;
                socket_errors += count;
                if kind == Some("timeout") {
                    timeouts += count;
                }
            }
        } else if let Some(value) = line.strip_prefix("Non-2xx or 3xx responses:") {
            non_2xx = value.trim().parse().map_err(|_| format!("non-2xx count {:?}", value.trim()))?;
        } else if let Some((count, _)) = line.split_once(" requests in ") {
            requests = count.trim().parse().map_err(|_| format!("request count {count:?}"))?;
        }
    }
    let missing = |what: &str| format!("no {what} in wrk's report: {:?}", report.trim());
    let rps = rps.ok_or_else(|| missing("Requests/sec"))?;
    let p50 = p50.ok_or_else(|| missing("50% latency (was --latency given?)"))?;
    let p99 = p99.ok_or_else(|| missing("99% latency (was --latency given?)"))?;
    let trusted = !a_percentile_is_zero;
    Ok(WrkResult {
        idle_share: None,
        requests_per_second: rps,
        p50: trusted.then_some(p50),
        p99: trusted.then_some(p99),
        requests,
        socket_errors,
        timeouts,
        non_2xx,
        server_cpu: None,
    })
}

/// A line of the latency distribution, `50%    1.90ms`: the percent and
/// the time.
fn percentile_line(line: &str) -> Option<(&str, &str)> {
    let (percent, value) = line.split_once('%')?;
    let value = value.trim();
    (!percent.is_empty() && percent.bytes().all(|b| b.is_ascii_digit()) && !value.is_empty())
        .then_some((percent, value))
}

/// A wrk time: a number and one of its units `us`, `ms`, `s`, `m`, `h`.
#[must_use]
pub fn duration(text: &str) -> Option<Duration> {
    let units = [("us", 1e-6), ("ms", 1e-3), ("s", 1.0), ("m", 60.0), ("h", 3600.0)];
    let (number, scale) = units.iter().find_map(|(unit, scale)| Some((text.strip_suffix(unit)?, *scale)))?;
    let value: f64 = number.parse().ok()?;
    (value.is_finite() && value >= 0.0).then(|| Duration::from_secs_f64(value * scale))
}

/// A latency as a person reads it: `470 µs`, `1.20 ms`, `2.50 s`.
#[must_use]
pub fn format_latency(d: Duration) -> String {
    let us = d.as_secs_f64() * 1e6;
    if us < 1000.0 {
        format!("{us:.0} µs")
    } else if us < 1e6 {
        format!("{:.2} ms", us / 1e3)
    } else {
        format!("{:.2} s", us / 1e6)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A report as wrk 4.1 prints it with --latency.
    const REPORT: &str = "\
Running 10s test @ http://10.77.0.1/plaintext
  1 threads and 256 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency     1.95ms  310.12us  12.50ms   91.20%
    Req/Sec   131.10k     4.02k  138.22k    72.00%
  Latency Distribution
     50%    1.90ms
     75%    2.01ms
     90%    2.20ms
     99%    3.10ms
  1304512 requests in 10.00s, 160.49MB read
Requests/sec: 130440.71
Transfer/sec:     16.05MB
";

    #[test]
    fn a_clean_report() {
        let r = parse(REPORT).unwrap();
        assert_eq!(r.requests_per_second, 130_440.71);
        assert_eq!(r.p50, Some(Duration::from_micros(1900)));
        assert_eq!(r.p99, Some(Duration::from_micros(3100)));
        assert_eq!((r.requests, r.socket_errors, r.timeouts, r.non_2xx, r.errors()), (1_304_512, 0, 0, 0, 0));
    }

    #[test]
    fn errors_and_bad_statuses_are_counted() {
        let report = REPORT.replace(
            "Requests/sec:",
            "  Socket errors: connect 3, read 120, write 0, timeout 7\n  Non-2xx or 3xx responses: 5\nRequests/sec:",
        );
        let r = parse(&report).unwrap();
        assert_eq!((r.socket_errors, r.timeouts, r.non_2xx, r.errors()), (130, 7, 5, 135));
    }

    #[test]
    fn missing_parts_are_errors_not_zeros() {
        assert!(parse("").unwrap_err().contains("no Requests/sec"));
        let without_latency: String = REPORT.lines().filter(|l| !l.contains('%')).collect::<Vec<_>>().join("\n");
        assert!(parse(&without_latency).unwrap_err().contains("--latency"));
        assert!(parse(&REPORT.replace("130440.71", "lots")).unwrap_err().contains("requests/sec"));
        assert!(parse(&REPORT.replace("3.10ms", "3.10xs")).unwrap_err().contains("99% latency"));
        // wrk's connect failure: no report at all.
        assert!(parse("unable to connect to 10.77.0.1:80 Connection refused\n").is_err());
    }

    /// What wrk 4.1 printed for `/plaintext` pipelined 16 deep.
    const PIPELINED: &str = "\
Running 2s test @ http://127.0.0.1:18080/plaintext
  1 threads and 256 connections
  Thread Stats   Avg      Stdev     Max   +/- Stdev
    Latency   691.32us    0.93ms  15.48ms   52.28%
    Req/Sec     1.82M    74.89k    1.97M    75.00%
  Latency Distribution
     50%    1.38ms
     75%    0.00us
     90%    0.00us
     99%    0.00us
  3626752 requests in 2.02s, 456.55MB read
Requests/sec: 1791250.47
Transfer/sec:    225.49MB
";

    #[test]
    fn a_distribution_with_zero_percentiles_gives_no_percentiles() {
        let r = parse(PIPELINED).unwrap();
        assert_eq!(r.requests_per_second, 1_791_250.47);
        assert_eq!((r.p50, r.p99), (None, None));
        assert_eq!(r.requests, 3_626_752);
        // One zero anywhere discredits the rest.
        let r = parse(&REPORT.replace("2.01ms", "0.00us")).unwrap();
        assert_eq!((r.p50, r.p99), (None, None));
    }

    #[test]
    fn percentile_lines() {
        assert_eq!(percentile_line("50%    1.90ms"), Some(("50", "1.90ms")));
        assert_eq!(percentile_line("99%    0.00us"), Some(("99", "0.00us")));
        assert_eq!(percentile_line("Latency   691.32us    0.93ms  15.48ms   52.28%"), None);
        assert_eq!(percentile_line("%  1ms"), None);
        assert_eq!(percentile_line("75%"), None);
    }

    #[test]
    fn wrk_time_units() {
        assert_eq!(duration("470.00us"), Some(Duration::from_micros(470)));
        assert_eq!(duration("1.20ms"), Some(Duration::from_micros(1200)));
        assert_eq!(duration("2.00s"), Some(Duration::from_secs(2)));
        assert_eq!(duration("1.50m"), Some(Duration::from_secs(90)));
        assert_eq!(duration("1.00h"), Some(Duration::from_secs(3600)));
        assert_eq!(duration("12"), None);
        assert_eq!(duration("-1.00ms"), None);
        assert_eq!(duration("ms"), None);
    }

    #[test]
    fn latencies_for_people() {
        assert_eq!(format_latency(Duration::from_micros(470)), "470 µs");
        assert_eq!(format_latency(Duration::from_micros(1900)), "1.90 ms");
        assert_eq!(format_latency(Duration::from_millis(2500)), "2.50 s");
    }

    #[test]
    fn the_pipeline_script_takes_its_depth_as_an_argument() {
        assert!(PIPELINE_SCRIPT.contains("tonumber(args[1])"));
        assert!(PIPELINE_SCRIPT.contains("wrk.format()"));
        assert!(PIPELINE_SCRIPT.contains("request = function()"));
    }
}
