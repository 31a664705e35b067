//! nginx over the kernel stack, for the bulk-download comparison: a
//! [`Site`] (a directory of our own holding the file to serve, the
//! configuration, the pid file, the error log and nginx's temp paths) and
//! a running [`Nginx`] inside a testbed namespace.

use std::fs::{self, File};
use std::io::{self, Write};
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use fairway_tests::apps::responder::pattern_byte;
use fairway_tests::testbed::{self, Spawned};

/// Where sites are made: memory, so the file is served from the page cache.
pub const SITE_PARENT: &str = "/dev/shm";
/// How long nginx has to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// nginx's configuration for `dir` (absolute): one worker, listening on
/// `listen` only, `sendfile on`, no access log, serving `dir/root`, with
/// its pid file, error log and temp paths in `dir`.
#[must_use]
pub fn config_text(dir: &Path, listen: SocketAddrV4) -> String {
    let d = dir.display();
    format!(
        "\
# Written by fairway-benches' `nic`: the kernel-stack side of its bulk download.
daemon off;
master_process on;
worker_processes 1;
user root;
pid {d}/nginx.pid;
error_log {d}/error.log warn;

events {{
    worker_connections 64;
}}

http {{
    access_log off;
    sendfile on;
    default_type application/octet-stream;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;

    server {{
        listen {listen};
        root {d}/root;
    }}
}}
"
    )
}

/// The URL path of an `n`-byte body, the same on nginx and on the
/// responder: `/bytes/{n}`.
#[must_use]
pub fn bytes_path(n: u64) -> String {
    format!("/bytes/{n}")
}

/// A directory under [`SITE_PARENT`] with nginx's configuration and an
/// `n`-byte file at [`bytes_path`]`(n)` holding the responder's pattern.
/// Removed when dropped.
#[derive(Debug)]
pub struct Site {
    dir: PathBuf,
}

impl Site {
    /// Writes the site for an `n`-byte file, nginx listening on `listen`.
    ///
    /// # Errors
    ///
    /// When a file cannot be written (the partial site is removed).
    pub fn create(n: u64, listen: SocketAddrV4) -> io::Result<Site> {
        let dir = Path::new(SITE_PARENT).join(format!("fairway-nic-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        // From here on, dropping the site removes whatever was written.
        let site = Site { dir };
        fs::create_dir_all(site.dir.join("root").join("bytes"))?;
        fs::write(site.config_path(), config_text(&site.dir, listen))?;
        write_pattern(&site.dir.join("root").join(bytes_path(n).trim_start_matches('/')), n)?;
        Ok(site)
    }

    /// The site's directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn config_path(&self) -> PathBuf {
        self.dir.join("nginx.conf")
    }

    /// Starts nginx on this site inside namespace `ns`.
    ///
    /// # Errors
    ///
    /// When nginx cannot be started.
    pub fn start(&self, ns: &str) -> io::Result<Nginx> {
        let (dir, log, config) = (
            format!("{}/", self.dir.display()),
            self.dir.join("error.log").display().to_string(),
            self.config_path().display().to_string(),
        );
        let process =
            testbed::spawn(ns, &["nginx", "-p", &dir, "-e", &log, "-c", &config]).map_err(io::Error::other)?;
        Ok(Nginx { process: Some(process), log: self.dir.join("error.log") })
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Writes the first `n` bytes of the responder's pattern to `path`.
fn write_pattern(path: &Path, n: u64) -> io::Result<()> {
    // A whole number of the pattern's 251-byte periods, so every chunk
    // continues where the previous one ended.
    let chunk: Vec<u8> = (0..251 * 4096).map(pattern_byte).collect();
    let mut file = File::create(path)?;
    let mut left = n;
    while left > 0 {
        let len = left.min(chunk.len() as u64) as usize;
        file.write_all(&chunk[..len])?;
        left -= len as u64;
    }
    file.sync_all()
}

/// A running nginx; stopped (SIGTERM, then SIGKILL) when dropped.
#[derive(Debug)]
pub struct Nginx {
    process: Option<Spawned>,
    log: PathBuf,
}

impl Nginx {
    /// Whether it is still running.
    pub fn is_running(&mut self) -> bool {
        self.process.as_mut().is_some_and(|p| p.try_wait().is_none())
    }

    /// Its error log and what it printed, in one line, for an error message.
    #[must_use]
    pub fn complaints(&self) -> String {
        let log = fs::read_to_string(&self.log).unwrap_or_default();
        let printed = self.process.as_ref().map(|p| String::from_utf8_lossy(&p.stderr()).into_owned());
        format!("{} {}", log.trim(), printed.unwrap_or_default().trim()).trim().replace('\n', " | ")
    }

    /// Stops it: SIGTERM (nginx's fast shutdown, which also ends its
    /// worker), then SIGKILL if it is still there after a grace period.
    pub fn stop(&mut self) {
        let Some(mut process) = self.process.take() else { return };
        if process.try_wait().is_none() {
            let _ = Command::new("kill").args(["-TERM", &process.id().to_string()]).status();
            let deadline = Instant::now() + STOP_GRACE;
            while process.try_wait().is_none() && Instant::now() < deadline {
                std::thread::sleep(Duration::from_millis(10));
            }
        }
        drop(process.kill());
    }
}

impl Drop for Nginx {
    fn drop(&mut self) {
        self.stop();
    }
}

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    #[test]
    fn the_configuration_keeps_everything_in_the_site() {
        let text = config_text(Path::new("/dev/shm/x"), SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 1), 80));
        for line in [
            "worker_processes 1;",
            "listen 10.77.0.1:80;",
            "sendfile on;",
            "access_log off;",
            "pid /dev/shm/x/nginx.pid;",
            "error_log /dev/shm/x/error.log warn;",
            "root /dev/shm/x/root;",
            "client_body_temp_path /dev/shm/x/client_body;",
        ] {
            assert!(text.lines().any(|l| l.trim() == line), "missing {line:?} in\n{text}");
        }
        // Every path nginx writes or reads is in the site.
        for word in text.split_whitespace().filter(|w| w.starts_with('/')) {
            assert!(word.starts_with("/dev/shm/x/"), "{word} is outside the site");
        }
        assert_eq!(text.matches('{').count(), text.matches('}').count());
    }

    #[test]
    fn a_site_holds_the_pattern_and_is_removed_when_dropped() {
        let n = 251 * 4096 + 1000;
        let site = Site::create(n, SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080)).unwrap();
        let dir = site.dir().to_path_buf();
        let body = fs::read(dir.join("root").join("bytes").join(n.to_string())).unwrap();
        assert_eq!(body.len() as u64, n);
        assert!(body.iter().enumerate().all(|(i, &b)| b == pattern_byte(i as u64)));
        assert!(fs::read_to_string(dir.join("nginx.conf")).unwrap().contains("listen 127.0.0.1:8080;"));
        drop(site);
        assert!(!dir.exists());
    }

    #[test]
    fn the_url_path_is_the_responders() {
        assert_eq!(bytes_path(1_000_000_000), "/bytes/1000000000");
    }
}
