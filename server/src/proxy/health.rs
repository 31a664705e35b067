//! Active health checks: one thread for the whole server asks every server
//! of the groups that have `health-check` for that path every
//! `health-interval`, and publishes the verdicts the shards read (a
//! relaxed atomic per server). A server answering 2xx or 3xx within the
//! group's `connect-timeout` + `first-byte-timeout` is in turn; any other
//! answer, or none, puts it out until it answers well again. A change is
//! logged. Servers of groups without a check are always in turn here
//! (passive health still applies), and so are servers the shards reach
//! through the NIC (on the userspace backends, every one beyond the
//! loopback): the checking thread has only kernel sockets, which do not
//! reach them.

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use tracing::{info, warn};

use crate::config::{ProxyConfig, UpstreamGroup};
use crate::outbound::is_loopback;

/// The checks' verdicts, per server of every group.
#[derive(Debug)]
pub struct HealthBoard {
    /// Where each group's servers start in `healthy`.
    offsets: Vec<usize>,
    healthy: Vec<AtomicBool>,
}

impl HealthBoard {
    fn new(config: &ProxyConfig) -> HealthBoard {
        let mut offsets = Vec::with_capacity(config.groups.len());
        let mut total = 0;
        for g in &config.groups {
            offsets.push(total);
            total += g.servers.len();
        }
        HealthBoard { offsets, healthy: (0..total).map(|_| AtomicBool::new(true)).collect() }
    }

    /// Whether server `s` of group `g` passed its last check (or has none).
    #[must_use]
    pub fn healthy(&self, g: usize, s: usize) -> bool {
        self.healthy[self.offsets[g] + s].load(Ordering::Relaxed)
    }

    fn set(&self, g: usize, s: usize, healthy: bool) -> bool {
        self.healthy[self.offsets[g] + s].swap(healthy, Ordering::Relaxed)
    }
}

/// Starts the checks when some group has one: the board the shards read.
/// With `through_nic` (the userspace backends), servers beyond the
/// loopback are not checked, and a warning says so. The thread ends when
/// the last holder of the board drops it.
#[must_use]
pub fn start(config: &Arc<ProxyConfig>, through_nic: bool) -> Option<Arc<HealthBoard>> {
    if config.groups.iter().all(|g| g.health.is_none()) {
        return None;
    }
    let unchecked = |addr| through_nic && !is_loopback(addr);
    for group in config.groups.iter().filter(|g| g.health.is_some()) {
        for server in group.servers.iter().filter(|s| unchecked(s.addr)) {
            warn!(
                upstream = %group.name,
                server = %server.url,
                "no active health check: it is reached through the NIC, the checks through the kernel; \
                 passive health still applies"
            );
        }
    }
    let board = Arc::new(HealthBoard::new(config));
    let (weak, config) = (Arc::downgrade(&board), Arc::clone(config));
    let spawned = std::thread::Builder::new()
        .name("fairway-health".into())
        .spawn(move || run(&config, &weak, through_nic, check));
    if let Err(e) = spawned {
        warn!("cannot start the upstream health checks: {e}; passive health only");
    }
    Some(board)
}

/// Checks each server with `check` when due, until the board is dropped.
fn run(
    config: &ProxyConfig,
    board: &Weak<HealthBoard>,
    through_nic: bool,
    check: impl Fn(&UpstreamGroup, std::net::SocketAddr, &str) -> Result<u16, String>,
) {
    let mut due: Vec<Instant> = config.groups.iter().map(|_| Instant::now()).collect();
    loop {
        let now = Instant::now();
        for (g, group) in config.groups.iter().enumerate() {
            let Some((path, interval)) = &group.health else { continue };
            if now < due[g] {
                continue;
            }
            due[g] = now + *interval;
            for (s, server) in group.servers.iter().enumerate() {
                if through_nic && !is_loopback(server.addr) {
                    continue;
                }
                let verdict = check(group, server.addr, path);
                let Some(board) = board.upgrade() else { return };
                let was = board.set(g, s, verdict.is_ok());
                match (&verdict, was) {
                    (Err(why), true) => {
                        warn!(upstream = %group.name, server = %server.url, "health check {path} failed: {why}");
                    }
                    (Ok(status), false) => {
                        info!(upstream = %group.name, server = %server.url, "health check {path} passes again: {status}");
                    }
                    _ => {}
                }
            }
        }
        if board.strong_count() == 0 {
            return;
        }
        let next = due.iter().zip(&config.groups).filter(|(_, g)| g.health.is_some()).map(|(d, _)| *d).min();
        let wait = next.map_or(Duration::from_secs(1), |d| d.saturating_duration_since(Instant::now()));
        std::thread::sleep(wait.min(Duration::from_secs(1)));
    }
}

/// One check: the status of `GET path` on `addr`, 2xx or 3xx, or why not.
fn check(group: &UpstreamGroup, addr: std::net::SocketAddr, path: &str) -> Result<u16, String> {
    let mut stream = TcpStream::connect_timeout(&addr, group.connect_timeout).map_err(|e| e.to_string())?;
    stream.set_read_timeout(Some(group.first_byte_timeout)).map_err(|e| e.to_string())?;
    let request =
        format!("GET {path} HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\nUser-Agent: fairway-health\r\n\r\n");
    stream.write_all(request.as_bytes()).map_err(|e| e.to_string())?;
    let mut head = [0u8; 64];
    let mut len = 0;
    while len < 12 {
        match stream.read(&mut head[len..]) {
            Ok(0) => return Err("closed before a status line".into()),
            Ok(n) => len += n,
            Err(e) => return Err(e.to_string()),
        }
    }
    let line = String::from_utf8_lossy(&head[..len]);
    let status: u16 = line
        .strip_prefix("HTTP/1.")
        .and_then(|rest| rest.get(2..5))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| format!("not an HTTP/1 status line: {:?}", line.lines().next().unwrap_or("")))?;
    if (200..400).contains(&status) { Ok(status) } else { Err(format!("it answered {status}")) }
}

#[cfg(test)]
mod tests {
    use std::sync::Mutex;

    use super::*;
    use crate::config::Config;

    #[test]
    fn through_the_nic_only_servers_on_the_loopback_are_checked() {
        let flags = ["fairway", "--upstream", "a=http://127.0.0.1:9", "--upstream", "a=http://10.0.0.2:9"];
        let config = Config::load(flags, None).unwrap();
        let mut proxy = (**config.proxy.as_ref().unwrap()).clone();
        proxy.groups[0].health = Some(("/h".to_owned(), Duration::from_millis(10)));
        let proxy = Arc::new(proxy);
        for through_nic in [true, false] {
            let board = Arc::new(HealthBoard::new(&proxy));
            let asked = Arc::new(Mutex::new(Vec::new()));
            let (weak, config, seen) = (Arc::downgrade(&board), Arc::clone(&proxy), Arc::clone(&asked));
            // Every server asked fails: whoever is not asked stays in turn.
            let thread = std::thread::spawn(move || {
                run(&config, &weak, through_nic, |_, addr, _| {
                    seen.lock().unwrap().push(addr);
                    Err("refused".into())
                });
            });
            while asked.lock().unwrap().len() < 4 {
                std::thread::sleep(Duration::from_millis(5));
            }
            let verdicts = (board.healthy(0, 0), board.healthy(0, 1));
            drop(board);
            thread.join().unwrap();
            let asked = asked.lock().unwrap();
            let nic = asked.iter().any(|a| !a.ip().is_loopback());
            if through_nic {
                assert_eq!((verdicts, nic), ((false, true), false), "the NIC's server is never asked: {asked:?}");
            } else {
                assert_eq!((verdicts, nic), ((false, false), true), "both are asked: {asked:?}");
            }
        }
    }
}
