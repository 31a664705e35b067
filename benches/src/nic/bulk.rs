//! A bulk download by kernel `curl` in client 0's namespace: from Fairway's
//! server (one shard, AF_XDP on `fw0` queue 0), from a bare shard running
//! the server's HTTP layer (`HttpShard`: the shard loop without the
//! server's set-up), and from nginx
//! over the kernel stack on the same `fw0`, which gets the kernel address
//! 10.77.0.1/24 only while nginx runs (and Fairway, with its XDP program,
//! is stopped).

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use fairway_nic::Device;
use fairway_nic::afxdp::{AfXdp, AfXdpConfig};
use fairway_stack::Shard;
use fairway_tests::apps::http_shard::HttpShard;
use fairway_tests::real_peers::{HTTP_PORT, Shards, parse_mac, server_addr, shard_config};
use fairway_tests::testbed::{self, SERVER_IF, Testbed};

use fairway_tests::nginx::{SiteDir, bytes_path};
use fairway_tests::served::Served;
use fairway_tests::testbed::KernelAddress;

/// How long a server has to answer its first request.
const READY_TIMEOUT: Duration = Duration::from_secs(20);
/// The slowest download rate waited for (bits per second) before curl
/// gives up.
const SLOWEST: f64 = 50e6;

/// One download, as curl measured it.
#[derive(Clone, Debug, PartialEq)]
pub struct Download {
    /// curl's `speed_download`, in bits per second.
    pub bits_per_second: f64,
    /// What the server counted, for `--verbose`.
    pub note: String,
}

/// The downloads of `bytes` bytes on one testbed.
pub struct Bulk<'a> {
    tb: &'a Testbed,
    bytes: u64,
    interrupted: &'a AtomicBool,
}

impl<'a> Bulk<'a> {
    /// Downloads of `bytes` bytes on `tb`; each returns `None` once
    /// `interrupted` is raised.
    #[must_use]
    pub fn new(tb: &'a Testbed, bytes: u64, interrupted: &'a AtomicBool) -> Bulk<'a> {
        Bulk { tb, bytes, interrupted }
    }

    /// The download from Fairway over AF_XDP. Its XDP program is gone from
    /// `fw0` when this returns.
    ///
    /// # Errors
    ///
    /// When the shard cannot start, does not answer, or curl fails.
    pub fn fairway(&self) -> io::Result<Option<Download>> {
        let tb = self.tb;
        let (mac, ip, len, bytes) = (parse_mac(&tb.server_mac()), tb.server_ip(), tb.prefix_len(), self.bytes);
        let shards = Shards::start(&tb.server_ns(), 1, move |_, _| {
            let mut device = AfXdp::open(&AfXdpConfig::new(SERVER_IF, 0)).map_err(io::Error::other)?;
            let app = HttpShard::new(HTTP_PORT, bytes.max(1 << 30));
            // As the server does: the interface finishes TCP checksums
            // where it can.
            let mut config = shard_config(mac, ip, len, 0, 1);
            config.tx_checksum_offload = device.offload_tx_checksums();
            Ok((Shard::new(config), device, app))
        })?;
        let downloaded = self.download(|| !shards.any_finished());
        let exit = shards.stop().remove(0);
        exit.result?;
        let note = exit.shard.map(|s| s.counters().to_string()).unwrap_or_default();
        Ok(downloaded?.map(|bits_per_second| Download { bits_per_second, note }))
    }

    /// The download from the `fairway` server itself (the userspace
    /// backend over AF_XDP on `fw0`, one shard, its defaults, `/bytes/N`
    /// written into the send ring in place), started in this process as
    /// `fairway --backend afxdp --iface fw0 --ip 10.77.0.1/24` would be.
    /// Its XDP program is gone from `fw0` when this returns.
    ///
    /// # Errors
    ///
    /// When it does not answer, curl fails, or a shard failed.
    ///
    /// # Panics
    ///
    /// When the server cannot start (as [`Served::start`]).
    pub fn server(&self) -> io::Result<Option<Download>> {
        let tb = self.tb;
        let flags = [tb.afxdp_flags(), vec!["--shards".into(), "1".into()]].concat();
        let served = Served::start(tb, &flags.iter().map(String::as_str).collect::<Vec<_>>());
        let downloaded = self.download(|| !served.is_finished());
        served.raise_stop();
        let reports = served.wait().map_err(|e| io::Error::other(format!("the server failed: {e}")))?;
        let note = reports.iter().map(|r| format!("{r:?}")).collect::<Vec<_>>().join("; ");
        Ok(downloaded?.map(|bits_per_second| Download { bits_per_second, note }))
    }

    /// The download from nginx over the kernel stack, serving `site` from
    /// `fw0` with the address 10.77.0.1/24, which is removed again.
    ///
    /// # Errors
    ///
    /// When the address cannot be set, nginx does not answer, or curl
    /// fails.
    pub fn nginx(&self, site: &SiteDir) -> io::Result<Option<Download>> {
        let _address = KernelAddress::add(self.tb)?;
        let mut nginx = site.start(&self.tb.server_ns())?;
        let downloaded = self.download(|| nginx.is_running());
        let complaints = nginx.complaints();
        drop(nginx.stop());
        let downloaded = downloaded.map_err(|e| io::Error::new(e.kind(), format!("nginx: {e} ({complaints})")))?;
        Ok(downloaded.map(|bits_per_second| Download { bits_per_second, note: complaints }))
    }

    /// Waits until the server answers a HEAD for the body, then downloads
    /// it: bits per second, or `None` if interrupted.
    fn download(&self, mut alive: impl FnMut() -> bool) -> io::Result<Option<f64>> {
        let url = format!("http://{}{}", server_addr(self.tb), bytes_path(self.bytes));
        let deadline = Instant::now() + READY_TIMEOUT;
        loop {
            if self.interrupted.load(Ordering::Relaxed) {
                return Ok(None);
            }
            if !alive() {
                return Err(io::Error::other("the server stopped before it answered"));
            }
            let head = self.curl(&["-I", "--max-time", "1", "-w", "%{http_code}", &url], Duration::from_secs(3))?;
            if head.trim() == "200" {
                break;
            }
            if Instant::now() > deadline {
                return Err(io::Error::other(format!("no answer to HEAD {url} within {READY_TIMEOUT:?}")));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let limit = Duration::from_secs_f64((self.bytes as f64 * 8.0 / SLOWEST).max(30.0));
        let max_time = limit.as_secs().to_string();
        let written = self.curl(
            &["--max-time", &max_time, "-w", "%{http_code} %{size_download} %{speed_download}", &url],
            limit + Duration::from_secs(10),
        )?;
        if self.interrupted.load(Ordering::Relaxed) {
            return Ok(None);
        }
        parse_curl(&written, self.bytes).map(Some).map_err(|e| io::Error::other(format!("GET {url}: {e}")))
    }

    /// `curl -s -o /dev/null ARGS` in client 0's namespace: what `-w`
    /// wrote.
    fn curl(&self, args: &[&str], timeout: Duration) -> io::Result<String> {
        let mut line = vec!["curl", "-s", "-o", "/dev/null"];
        line.extend_from_slice(args);
        let out = testbed::exec_timeout(&self.tb.client_ns(0), &line, timeout).map_err(io::Error::other)?;
        Ok(out.stdout_text())
    }
}

/// Reads curl's `-w '%{http_code} %{size_download} %{speed_download}'`:
/// the rate in bits per second, if the whole body of `expected` bytes came
/// with status 200.
///
/// # Errors
///
/// What was wrong, in words.
pub fn parse_curl(written: &str, expected: u64) -> Result<f64, String> {
    let words: Vec<&str> = written.split_whitespace().collect();
    let [code, size, speed] = words[..] else {
        return Err(format!("curl wrote {written:?}, not `code size speed`"));
    };
    if code != "200" {
        return Err(format!("status {code}"));
    }
    let size: f64 = size.parse().map_err(|_| format!("size {size:?}"))?;
    if size != expected as f64 {
        return Err(format!("{size} bytes of {expected}"));
    }
    let speed: f64 = speed.parse().map_err(|_| format!("speed {speed:?}"))?;
    Ok(speed * 8.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn curl_output_gives_bits_per_second() {
        assert_eq!(parse_curl("200 1000 125000000", 1000), Ok(1e9));
        assert_eq!(parse_curl("200 1000 1.25E+08\n", 1000).map(|b| b.round()), Ok(1e9));
        assert!(parse_curl("404 1000 10", 1000).unwrap_err().contains("status 404"));
        assert!(parse_curl("200 999 10", 1000).unwrap_err().contains("999 bytes of 1000"));
        assert!(parse_curl("", 1000).is_err());
        assert!(parse_curl("200 1000 fast", 1000).is_err());
    }
}
