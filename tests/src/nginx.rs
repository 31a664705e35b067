//! nginx over the kernel stack, the uncontrolled baseline of the bulk
//! download benchmark (`fairway-benches nic`) and of the fairness lab: a
//! [`Site`] (a directory of our own holding the file to serve, the
//! configuration, the pid file, the error log and nginx's temp paths) and
//! a running [`Nginx`] inside a testbed namespace.
//!
//! Besides the file, every site takes `POST /upload` of any length and
//! throws the body away (nginx reads a body it does not use to its end),
//! answering 204, like Fairway's upload sink without the digest.

use std::fs::{self, File};
use std::io::{self, Write};
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use crate::apps::responder::pattern_byte;
use crate::testbed::{self, Spawned};

/// Where sites are made: memory, so the file is served from the page cache.
pub const SITE_PARENT: &str = "/dev/shm";
/// How long nginx has to exit after SIGTERM before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// nginx's configuration for `dir` (absolute): one worker, listening on
/// `listen` only, `sendfile on`, no access log, serving `dir/root` and
/// discarding uploads to `/upload`, with its pid file, error log and temp
/// paths in `dir`.
#[must_use]
pub fn config_text(dir: &Path, listen: SocketAddrV4) -> String {
    let d = dir.display();
    format!(
        "\
# Written by fairway-tests' `nginx`: the kernel-stack baseline.
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
        client_max_body_size 0;

        location = /upload {{
            return 204;
        }}
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
        let site = Site::empty(listen)?;
        write_pattern(&site.file_path(n), n)?;
        Ok(site)
    }

    /// Writes a site whose `n`-byte file is sparse: zeros that take no
    /// memory, for endless downloads whose content nobody checks.
    ///
    /// # Errors
    ///
    /// When a file cannot be written (the partial site is removed).
    pub fn create_sparse(n: u64, listen: SocketAddrV4) -> io::Result<Site> {
        let site = Site::empty(listen)?;
        File::create(site.file_path(n))?.set_len(n)?;
        Ok(site)
    }

    /// The directory with the configuration and an empty `root/bytes`.
    fn empty(listen: SocketAddrV4) -> io::Result<Site> {
        static SITES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let number = SITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = Path::new(SITE_PARENT).join(format!("fairway-nginx-{}-{number}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        // From here on, dropping the site removes whatever was written.
        let site = Site { dir };
        fs::create_dir_all(site.dir.join("root").join("bytes"))?;
        fs::write(site.config_path(), config_text(&site.dir, listen))?;
        Ok(site)
    }

    fn file_path(&self, n: u64) -> PathBuf {
        self.dir.join("root").join(bytes_path(n).trim_start_matches('/'))
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
            "client_max_body_size 0;",
            "location = /upload {",
            "return 204;",
        ] {
            assert!(text.lines().any(|l| l.trim() == line), "missing {line:?} in\n{text}");
        }
        // Every path nginx writes or reads is in the site (`/upload` is a
        // URL path).
        for word in text.split_whitespace().filter(|w| w.starts_with('/') && *w != "/upload") {
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
    fn a_sparse_site_has_the_length_without_the_bytes() {
        let n = 100_000_000_000;
        let site = Site::create_sparse(n, SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080)).unwrap();
        let path = site.dir().join("root").join("bytes").join(n.to_string());
        let meta = fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), n);
        assert!(std::os::unix::fs::MetadataExt::blocks(&meta) < 8, "the file is not sparse");
        let other = Site::create_sparse(1, SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8081)).unwrap();
        assert_ne!(other.dir(), site.dir(), "two sites of one process share a directory");
    }

    #[test]
    fn the_url_path_is_the_responders() {
        assert_eq!(bytes_path(1_000_000_000), "/bytes/1000000000");
    }
}
