//! h2load (nghttp2's HTTP/2 load generator): what its report says, in the
//! bench's result type. Its command line is
//! [`Case::h2load_command`](super::plan::Case::h2load_command).

use super::wrk::WrkResult;

/// Reads h2load's report of a timed run (`-D`), which must have spoken
/// `protocol` (`h2` over TLS, `h2c` in clear text): h2load falls back to
/// HTTP/1.1 when ALPN does not give it `h2`, and then measures something
/// else.
///
/// From `finished in T, R req/s` and `requests: N total, N started, N done,
/// N succeeded, N failed, N errored, N timeout`: the requests per second
/// (responses, whatever their status, over the measured duration); the
/// responses (`done` less `errored`); streams that ended without a response
/// (`errored`: resets, broken connections, h2load's timeouts among them)
/// as socket errors; responses with another status than 2xx or 3xx
/// (`failed` less `errored`) as non-2xx. h2load gives no latency
/// percentiles (a mean and a spread per request only), so there are none.
///
/// # Errors
///
/// When a figure is missing or unreadable, when no protocol or another one
/// was negotiated, or when no request completed: h2load reports nothing
/// for streams still open at the end, so a server that answers nothing
/// would otherwise read as zero requests and zero failures (and h2load
/// exits 0 when it cannot connect at all).
pub fn parse(report: &str, protocol: &str) -> Result<WrkResult, String> {
    let mut rps = None;
    let mut counts = None;
    let mut negotiated = Vec::new();
    for line in report.lines().map(str::trim) {
        if let Some(rest) = line.strip_prefix("finished in ") {
            // "1.00s, 33576.00 req/s, 2.56MB/s"
            let value = rest.split(", ").nth(1).and_then(|part| part.strip_suffix(" req/s"));
            let value = value.ok_or_else(|| format!("h2load's finished line {line:?}"))?;
            rps = Some(value.parse::<f64>().map_err(|_| format!("h2load's req/s {value:?}"))?);
        } else if let Some(rest) = line.strip_prefix("requests: ") {
            counts = Some(request_counts(rest).ok_or_else(|| format!("h2load's requests line {line:?}"))?);
        } else if let Some(name) = line.strip_prefix("Application protocol:") {
            negotiated.push(name.trim());
        }
    }
    let missing = |what: &str| format!("no {what} in h2load's report: {:?}", report.trim());
    if negotiated.is_empty() {
        return Err(missing("application protocol (did it connect?)"));
    }
    if let Some(other) = negotiated.iter().find(|&&p| p != protocol) {
        return Err(format!("h2load spoke {other}, not {protocol}"));
    }
    let rps = rps.ok_or_else(|| missing("req/s"))?;
    let counts = counts.ok_or_else(|| missing("request counts"))?;
    if counts.done == 0 {
        return Err(format!("h2load completed no request ({} started): {:?}", counts.started, report.trim()));
    }
    Ok(WrkResult {
        idle_share: None,
        requests_per_second: rps,
        p50: None,
        p99: None,
        requests: counts.done.saturating_sub(counts.errored),
        socket_errors: counts.errored,
        timeouts: counts.timeout,
        non_2xx: counts.failed.saturating_sub(counts.errored),
        server_cpu: None,
    })
}

/// What the report says was negotiated, for the log: `TLS Protocol: ...,
/// Cipher: ..., Application protocol: h2` (each line once, though every
/// thread prints its own), or that it says nothing.
#[must_use]
pub fn session(report: &str) -> String {
    let mut said: Vec<&str> = Vec::new();
    for line in report.lines().map(str::trim) {
        let wanted = ["TLS Protocol:", "Cipher:", "Application protocol:"].iter().any(|p| line.starts_with(p));
        if wanted && !said.contains(&line) {
            said.push(line);
        }
    }
    if said.is_empty() { "no protocol negotiated".to_owned() } else { said.join(", ") }
}

/// The counts of h2load's `requests:` line.
#[derive(Debug, PartialEq, Eq)]
struct RequestCounts {
    started: u64,
    done: u64,
    failed: u64,
    errored: u64,
    timeout: u64,
}

/// `33576 total, 33608 started, 33576 done, 33576 succeeded, 0 failed, 0
/// errored, 0 timeout`, every count present.
fn request_counts(text: &str) -> Option<RequestCounts> {
    let count =
        |name: &str| text.split(", ").find_map(|part| part.strip_suffix(name)?.strip_suffix(' ')?.parse::<u64>().ok());
    Some(RequestCounts {
        started: count("started")?,
        done: count("done")?,
        failed: count("failed")?,
        errored: count("errored")?,
        timeout: count("timeout")?,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What h2load 1.52 (Debian bookworm) printed for `-t 1 -c 4 -m 8 -D 1`
    /// against nginx over TLS.
    const REPORT: &str = "\
starting benchmark...
spawning thread #0: 4 total client(s). Timing-based test with 0s of warm-up time and 1s of main duration for measurements.
Warm-up started for thread #0.
progress: 25% of clients started
progress: 50% of clients started
progress: 75% of clients started
progress: 100% of clients started
Warm-up phase is over for thread #0.
Main benchmark duration is started for thread #0.
TLS Protocol: TLSv1.2
Cipher: ECDHE-ECDSA-AES128-GCM-SHA256
Server Temp Key: X25519 253 bits
Application protocol: h2
Main benchmark duration is over for thread #0. Stopping all clients.
Stopped all clients for thread #0

finished in 1.00s, 33576.00 req/s, 2.56MB/s
requests: 33576 total, 33608 started, 33576 done, 33576 succeeded, 0 failed, 0 errored, 0 timeout
status codes: 33576 2xx, 0 3xx, 0 4xx, 0 5xx
traffic: 2.56MB (2686276) total, 1.57MB (1645224) headers (space savings 50.51%), 426.26KB (436488) data
                     min         max         mean         sd        +/- sd
time for request:       56us     12.98ms       833us      1.13ms    88.03%
time for connect:     6.01ms     19.60ms     14.01ms      6.73ms    75.00%
time to 1st byte:    12.51ms     20.33ms     16.42ms      4.47ms   100.00%
req/s           :    8245.62     8506.14     8390.78      110.89    50.00%
";

    #[test]
    fn a_clean_report() {
        let r = parse(REPORT, "h2").unwrap();
        assert_eq!(r.requests_per_second, 33_576.0);
        assert_eq!((r.requests, r.socket_errors, r.timeouts, r.non_2xx, r.errors()), (33_576, 0, 0, 0, 0));
        // No percentiles are made up from its mean and spread.
        assert_eq!((r.p50, r.p99, r.server_cpu), (None, None, None));
    }

    #[test]
    fn failures_are_counted_as_the_bench_counts_errors() {
        // 12 streams reset (3 of them timed out), 5 answered 503.
        let report = REPORT.replace(
            "33576 done, 33576 succeeded, 0 failed, 0 errored, 0 timeout",
            "33576 done, 33559 succeeded, 17 failed, 12 errored, 3 timeout",
        );
        let r = parse(&report, "h2").unwrap();
        assert_eq!((r.requests, r.socket_errors, r.timeouts, r.non_2xx, r.errors()), (33_564, 12, 3, 5, 17));
        // Bad statuses alone: what it printed for a path nginx has not.
        let not_found = REPORT.replace(
            "33576 done, 33576 succeeded, 0 failed, 0 errored",
            "33576 done, 0 succeeded, 33576 failed, 0 errored",
        );
        let r = parse(&not_found, "h2").unwrap();
        assert_eq!((r.requests, r.socket_errors, r.non_2xx, r.errors()), (33_576, 0, 33_576, 33_576));
    }

    #[test]
    fn another_protocol_is_an_error() {
        let http1 = REPORT.replace("Application protocol: h2", "Application protocol: http/1.1");
        assert_eq!(parse(&http1, "h2").unwrap_err(), "h2load spoke http/1.1, not h2");
        assert_eq!(parse(REPORT, "h2c").unwrap_err(), "h2load spoke h2, not h2c");
        let cleartext = REPORT.replace("Application protocol: h2", "Application protocol: h2c");
        assert_eq!(parse(&cleartext, "h2c").unwrap().requests, 33_576);
    }

    #[test]
    fn nothing_answered_is_an_error_not_zeros() {
        // Nothing listening: no protocol, zeros everywhere, exit status 0.
        let refused = "\
starting benchmark...
spawning thread #0: 4 total client(s). Timing-based test with 0s of warm-up time and 1s of main duration for measurements.
Main benchmark duration is over for thread #0. Stopping all clients.

finished in 1.51s, 0.00 req/s, 0B/s
requests: 0 total, 0 started, 0 done, 0 succeeded, 0 failed, 0 errored, 0 timeout
status codes: 0 2xx, 0 3xx, 0 4xx, 0 5xx
";
        assert!(parse(refused, "h2c").unwrap_err().contains("no application protocol"));
        // HTTP/2's preface to an HTTP/1.1 port: streams started, none done,
        // none counted as failed.
        let silent = REPORT.replace("Application protocol: h2", "Application protocol: h2c").replace(
            "33576 total, 33608 started, 33576 done, 33576 succeeded",
            "0 total, 32 started, 0 done, 0 succeeded",
        );
        assert!(parse(&silent, "h2c").unwrap_err().starts_with("h2load completed no request (32 started)"));
    }

    #[test]
    fn missing_or_unreadable_figures_are_errors() {
        let without = |prefix: &str| REPORT.lines().filter(|l| !l.starts_with(prefix)).collect::<Vec<_>>().join("\n");
        assert!(parse(&without("finished in"), "h2").unwrap_err().contains("no req/s"));
        assert!(parse(&without("requests:"), "h2").unwrap_err().contains("no request counts"));
        assert!(parse(&REPORT.replace("33576.00 req/s", "many req/s"), "h2").unwrap_err().contains("req/s \"many\""));
        assert!(parse(&REPORT.replace("0 errored", "errored"), "h2").unwrap_err().contains("requests line"));
        assert!(parse("", "h2").is_err());
    }

    #[test]
    fn the_session_for_the_log() {
        assert_eq!(
            session(&format!("{REPORT}{REPORT}")),
            "TLS Protocol: TLSv1.2, Cipher: ECDHE-ECDSA-AES128-GCM-SHA256, Application protocol: h2"
        );
        assert_eq!(session("finished in 1.00s, 0.00 req/s, 0B/s"), "no protocol negotiated");
    }

    #[test]
    fn request_counts_by_name() {
        assert_eq!(
            request_counts("10 total, 12 started, 9 done, 7 succeeded, 2 failed, 1 errored, 0 timeout"),
            Some(RequestCounts { started: 12, done: 9, failed: 2, errored: 1, timeout: 0 })
        );
        assert_eq!(request_counts("10 total, 12 started"), None);
    }
}
