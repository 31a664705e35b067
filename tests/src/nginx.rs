//! nginx over the kernel stack, the baseline every benchmark and lab
//! compares Fairway with: its configuration ([`NginxConfig`]: the bulk
//! download's and the fairness lab's [`baseline`](NginxConfig::baseline),
//! the HTTP benchmark's [`benchmark`](NginxConfig::benchmark)), a [`SiteDir`]
//! (a directory of our own holding the files to serve, the configuration,
//! the pid file, the error log and nginx's temp paths, so that nothing of
//! the system's nginx set-up is used or touched), and nginx running on it
//! inside a testbed namespace as a [`ServerProcess`].

use std::fs::{self, File};
use std::io::{self, Write};
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::testbed::ServerProcess;
use fairway::http::pattern_byte;

/// Where sites are made: memory, so the files are served from the page
/// cache.
pub const SITE_PARENT: &str = "/dev/shm";
/// How long nginx has to exit after SIGTERM (its fast shutdown, which
/// also ends its workers) before it is killed.
const STOP_GRACE: Duration = Duration::from_secs(5);

/// How nginx is set up. Whatever the settings, it runs in the foreground
/// as root with a master process, `sendfile on`, no access log, serving
/// the site's `root/`, and keeps its pid file, error log and temp paths in
/// the site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NginxConfig {
    /// The one address it listens on.
    pub listen: SocketAddrV4,
    /// `worker_processes`.
    pub workers: usize,
    /// `worker_connections`.
    pub worker_connections: usize,
    /// `reuseport` on the listening socket: one per worker.
    pub reuseport: bool,
    /// `tcp_nopush on` and no limit on the requests of a keep-alive
    /// connection, as a throughput benchmark sets nginx up.
    pub throughput: bool,
    /// `GET /plaintext` answered from the configuration (`return 200`)
    /// with this `text/plain` body.
    pub plaintext: Option<String>,
    /// `POST /upload` of any length read to its end, thrown away and
    /// answered 204 (Fairway's upload sink without the digest).
    pub upload_sink: bool,
    /// HTTPS on this address too, with the site's [`TLS_CERT`] and
    /// [`TLS_KEY`] (written by whoever sets the site up): TLS 1.2 and 1.3,
    /// a shared session cache and tickets.
    pub tls: Option<SocketAddrV4>,
    /// HTTP/2 on the HTTPS address too, by ALPN beside HTTP/1.1 (nginx
    /// 1.22's `listen ... ssl http2`): a client that offers no `h2` still
    /// gets HTTP/1.1.
    pub tls_http2: bool,
    /// Cleartext HTTP/2 with prior knowledge on this address too (`listen
    /// ADDR http2`), serving what [`listen`](Self::listen) serves. nginx
    /// speaks only HTTP/2 there, so it is an address of its own.
    pub h2c: Option<SocketAddrV4>,
    /// A reverse proxy too: a server on the first address passing every
    /// request to the HTTP server at the second (`HOST:PORT`), over a
    /// pool of keep-alive connections (HTTP/1.1, `keepalive 256` per
    /// worker: Fairway's default pool), as nginx is set up in front of an
    /// application.
    pub proxy: Option<(SocketAddrV4, String)>,
}

/// The certificate nginx serves HTTPS with, in the site's directory.
pub const TLS_CERT: &str = "tls.crt";
/// Its key.
pub const TLS_KEY: &str = "tls.key";

impl NginxConfig {
    /// The kernel-stack baseline of the bulk download (`fairway-benches
    /// nic`) and of the fairness lab: one worker, 64 connections, uploads
    /// thrown away.
    #[must_use]
    pub fn baseline(listen: SocketAddrV4) -> NginxConfig {
        NginxConfig {
            listen,
            workers: 1,
            worker_connections: 64,
            reuseport: false,
            throughput: false,
            plaintext: None,
            upload_sink: true,
            tls: None,
            tls_http2: false,
            h2c: None,
            proxy: None,
        }
    }

    /// nginx beside Fairway in the HTTP benchmark (`fairway-benches
    /// http`): `workers` workers of 4,096 connections on `reuseport`
    /// sockets, `tcp_nopush`, keep-alive without a request limit, and
    /// `/plaintext` answering `plaintext`.
    #[must_use]
    pub fn benchmark(listen: SocketAddrV4, workers: usize, plaintext: &str) -> NginxConfig {
        NginxConfig {
            listen,
            workers,
            worker_connections: 4096,
            reuseport: true,
            throughput: true,
            plaintext: Some(plaintext.to_owned()),
            upload_sink: false,
            tls: None,
            tls_http2: false,
            h2c: None,
            proxy: None,
        }
    }

    /// The configuration file for a site in `dir` (absolute).
    #[must_use]
    pub fn text(&self, dir: &Path) -> String {
        let d = dir.display();
        let (workers, connections, listen) = (self.workers, self.worker_connections, self.listen);
        let reuseport = if self.reuseport { " reuseport" } else { "" };
        let throughput = if self.throughput { "    tcp_nopush on;\n    keepalive_requests 100000000;\n" } else { "" };
        let body_size = if self.upload_sink { "        client_max_body_size 0;\n" } else { "" };
        let tls_http2 = if self.tls_http2 { " http2" } else { "" };
        let tls = self.tls.map_or(String::new(), |at| {
            format!(
                "        listen {at} ssl{tls_http2}{reuseport};\n        ssl_certificate {d}/{TLS_CERT};\n        \
                 ssl_certificate_key {d}/{TLS_KEY};\n        ssl_protocols TLSv1.2 TLSv1.3;\n        \
                 ssl_session_cache shared:SSL:10m;\n        ssl_session_tickets on;\n"
            )
        });
        let h2c = self.h2c.map_or(String::new(), |at| format!("        listen {at} http2{reuseport};\n"));
        let mut locations = String::new();
        if let Some(body) = &self.plaintext {
            let body = body.replace('\\', "\\\\").replace('"', "\\\"");
            locations.push_str(&format!(
                "\n        location = /plaintext {{\n            default_type text/plain;\n            return 200 \"{body}\";\n        }}\n"
            ));
        }
        if self.upload_sink {
            locations.push_str("\n        location = /upload {\n            return 204;\n        }\n");
        }
        let proxy = self.proxy.as_ref().map_or(String::new(), |(at, upstream)| {
            format!(
                "\n    upstream application {{\n        server {upstream};\n        keepalive 256;\n    }}\n\n    \
                 server {{\n        listen {at}{reuseport};\n        location / {{\n            proxy_pass \
                 http://application;\n            proxy_http_version 1.1;\n            proxy_set_header Connection \
                 \"\";\n            proxy_set_header Host $host;\n            proxy_set_header X-Forwarded-For \
                 $proxy_add_x_forwarded_for;\n        }}\n    }}\n"
            )
        });
        format!(
            "\
# Written by fairway-tests' `nginx`: the kernel-stack baseline.
daemon off;
master_process on;
worker_processes {workers};
user root;
pid {d}/nginx.pid;
error_log {d}/error.log warn;

events {{
    worker_connections {connections};
}}

http {{
    access_log off;
    sendfile on;
{throughput}    default_type application/octet-stream;
    client_body_temp_path {d}/client_body;
    proxy_temp_path {d}/proxy;
    fastcgi_temp_path {d}/fastcgi;
    uwsgi_temp_path {d}/uwsgi;
    scgi_temp_path {d}/scgi;

    server {{
        listen {listen}{reuseport};
{h2c}{tls}        root {d}/root;
{body_size}{locations}    }}
{proxy}}}
"
        )
    }
}

/// The URL path of an `n`-byte body, the same on nginx and on Fairway:
/// `/bytes/{n}`.
#[must_use]
pub fn bytes_path(n: u64) -> String {
    format!("/bytes/{n}")
}

/// nginx's command line for the site in `dir`: its prefix, error log and
/// configuration all there.
#[must_use]
pub fn command(dir: &Path) -> Vec<String> {
    let prefix = format!("{}/", dir.display());
    let (log, config) = (dir.join("error.log").display().to_string(), dir.join("nginx.conf").display().to_string());
    ["nginx", "-p", &prefix, "-e", &log, "-c", &config].map(str::to_owned).to_vec()
}

/// A directory under [`SITE_PARENT`] with nginx's configuration and the
/// files it serves from `root/`. Removed when dropped.
#[derive(Debug)]
pub struct SiteDir {
    dir: PathBuf,
}

impl SiteDir {
    /// Writes a site with nginx set up as `config` and nothing to serve
    /// yet.
    ///
    /// # Errors
    ///
    /// When a file cannot be written (the partial site is removed).
    pub fn new(config: &NginxConfig) -> io::Result<SiteDir> {
        static SITES: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let number = SITES.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let dir = Path::new(SITE_PARENT).join(format!("fairway-nginx-{}-{number}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        // From here on, dropping the site removes whatever was written.
        let site = SiteDir { dir };
        fs::create_dir_all(site.root())?;
        fs::write(site.config_path(), config.text(&site.dir))?;
        Ok(site)
    }

    /// The [`baseline`](NginxConfig::baseline) on `listen`, serving the
    /// first `n` bytes of Fairway's pattern at [`bytes_path`]`(n)`.
    ///
    /// # Errors
    ///
    /// When a file cannot be written (the partial site is removed).
    pub fn create(n: u64, listen: SocketAddrV4) -> io::Result<SiteDir> {
        SiteDir::new(&NginxConfig::baseline(listen))?.with_pattern(&bytes_path(n), n)
    }

    /// [`SiteDir::create`] with a sparse file: zeros that take no memory, for
    /// endless downloads whose content nobody checks.
    ///
    /// # Errors
    ///
    /// When a file cannot be written (the partial site is removed).
    pub fn create_sparse(n: u64, listen: SocketAddrV4) -> io::Result<SiteDir> {
        SiteDir::new(&NginxConfig::baseline(listen))?.with_sparse(&bytes_path(n), n)
    }

    /// Adds the first `n` bytes of Fairway's pattern at URL path `path`.
    ///
    /// # Errors
    ///
    /// When the file cannot be written (the site is removed).
    pub fn with_pattern(self, path: &str, n: u64) -> io::Result<SiteDir> {
        write_pattern(&self.file(path)?, n)?;
        Ok(self)
    }

    /// Adds an `n`-byte sparse file at URL path `path`.
    ///
    /// # Errors
    ///
    /// When the file cannot be written (the site is removed).
    pub fn with_sparse(self, path: &str, n: u64) -> io::Result<SiteDir> {
        File::create(self.file(path)?)?.set_len(n)?;
        Ok(self)
    }

    /// Writes `name` beside the configuration (not served: a client's
    /// script, say); its path.
    ///
    /// # Errors
    ///
    /// When it cannot be written.
    pub fn write(&self, name: &str, contents: &str) -> io::Result<PathBuf> {
        let path = self.dir.join(name);
        fs::write(&path, contents)?;
        Ok(path)
    }

    /// The file at URL path `path`, its directories made.
    fn file(&self, path: &str) -> io::Result<PathBuf> {
        let file = self.root().join(path.trim_start_matches('/'));
        if let Some(parent) = file.parent() {
            fs::create_dir_all(parent)?;
        }
        Ok(file)
    }

    /// The site's directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// The directory served (`--root` for Fairway).
    #[must_use]
    pub fn root(&self) -> PathBuf {
        self.dir.join("root")
    }

    /// nginx's error log.
    #[must_use]
    pub fn log(&self) -> PathBuf {
        self.dir.join("error.log")
    }

    fn config_path(&self) -> PathBuf {
        self.dir.join("nginx.conf")
    }

    /// nginx's command line for this site.
    #[must_use]
    pub fn command(&self) -> Vec<String> {
        command(&self.dir)
    }

    /// Starts nginx on this site inside namespace `ns`, its command line
    /// after `prefix` (`taskset -c CPUS`, say); its complaints include
    /// its error log.
    ///
    /// # Errors
    ///
    /// When nginx cannot be started.
    pub fn start_with(&self, ns: &str, prefix: &[String]) -> io::Result<ServerProcess> {
        let line: Vec<String> = prefix.iter().cloned().chain(self.command()).collect();
        let process = ServerProcess::spawn(ns, &line, STOP_GRACE).map_err(io::Error::other)?;
        Ok(process.with_log(self.log()))
    }

    /// Starts nginx on this site inside namespace `ns`.
    ///
    /// # Errors
    ///
    /// When nginx cannot be started.
    pub fn start(&self, ns: &str) -> io::Result<ServerProcess> {
        self.start_with(ns, &[])
    }
}

impl Drop for SiteDir {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

/// Writes the first `n` bytes of Fairway's pattern to `path`.
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

#[cfg(test)]
mod tests {
    use std::net::Ipv4Addr;

    use super::*;

    /// Every path in `text` nginx writes or reads is under `dir` (the URL
    /// paths of the locations aside), and the braces balance.
    fn keeps_to(text: &str, dir: &str) {
        let urls = ["/upload", "/plaintext"];
        for word in text.split_whitespace().filter(|w| w.starts_with('/') && !urls.contains(w)) {
            assert!(word.starts_with(dir), "{word} is outside the site");
        }
        assert_eq!(text.matches('{').count(), text.matches('}').count());
    }

    #[test]
    fn the_configuration_keeps_everything_in_the_site() {
        let config = NginxConfig::baseline(SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 1), 80));
        let text = config.text(Path::new("/dev/shm/x"));
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
        assert!(!text.contains("reuseport") && !text.contains("/plaintext"), "{text}");
        keeps_to(&text, "/dev/shm/x/");
    }

    #[test]
    fn the_benchmark_configuration() {
        let config = NginxConfig::benchmark(SocketAddrV4::new(Ipv4Addr::new(10, 77, 0, 1), 80), 2, "Hello, World!");
        let text = config.text(Path::new("/dev/shm/x"));
        for line in [
            "worker_processes 2;",
            "worker_connections 4096;",
            "listen 10.77.0.1:80 reuseport;",
            "return 200 \"Hello, World!\";",
            "default_type text/plain;",
            "tcp_nopush on;",
            "keepalive_requests 100000000;",
            "access_log off;",
            "root /dev/shm/x/root;",
            "pid /dev/shm/x/nginx.pid;",
        ] {
            assert!(text.lines().any(|l| l.trim() == line), "missing {line:?} in\n{text}");
        }
        assert!(!text.contains("/upload"), "{text}");
        keeps_to(&text, "/dev/shm/x/");
    }

    #[test]
    fn http2_by_alpn_and_with_prior_knowledge_on_a_listener_of_its_own() {
        let ip = Ipv4Addr::new(10, 77, 0, 1);
        let mut config = NginxConfig::benchmark(SocketAddrV4::new(ip, 80), 2, "Hello, World!");
        config.tls = Some(SocketAddrV4::new(ip, 443));
        let http1 = config.text(Path::new("/dev/shm/x"));
        assert!(http1.lines().any(|l| l.trim() == "listen 10.77.0.1:443 ssl reuseport;"), "{http1}");
        assert!(!http1.contains("http2"), "{http1}");
        config.tls_http2 = true;
        config.h2c = Some(SocketAddrV4::new(ip, 8085));
        let text = config.text(Path::new("/dev/shm/x"));
        for line in [
            "listen 10.77.0.1:80 reuseport;",
            "listen 10.77.0.1:8085 http2 reuseport;",
            "listen 10.77.0.1:443 ssl http2 reuseport;",
        ] {
            assert!(text.lines().any(|l| l.trim() == line), "missing {line:?} in\n{text}");
        }
        // One server block serves all three, /plaintext included.
        assert_eq!(text.matches("server {").count(), 1, "{text}");
        assert_eq!(text.matches("http2").count(), 2, "{text}");
        keeps_to(&text, "/dev/shm/x/");
    }

    #[test]
    fn a_site_holds_the_pattern_and_is_removed_when_dropped() {
        let n = 251 * 4096 + 1000;
        let site = SiteDir::create(n, SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080)).unwrap();
        let dir = site.dir().to_path_buf();
        let body = fs::read(dir.join("root").join("bytes").join(n.to_string())).unwrap();
        assert_eq!(body.len() as u64, n);
        assert!(body.iter().enumerate().all(|(i, &b)| b == pattern_byte(i as u64)));
        assert!(fs::read_to_string(dir.join("nginx.conf")).unwrap().contains("listen 127.0.0.1:8080;"));
        let script = site.write("pipeline.lua", "-- wrk").unwrap();
        assert_eq!(script, dir.join("pipeline.lua"));
        assert_eq!(fs::read_to_string(&script).unwrap(), "-- wrk");
        assert_eq!(
            site.command(),
            ["nginx", "-p", &format!("{}/", dir.display()), "-e", &site.log().display().to_string(), "-c"]
                .iter()
                .map(ToString::to_string)
                .chain([dir.join("nginx.conf").display().to_string()])
                .collect::<Vec<_>>()
        );
        drop(site);
        assert!(!dir.exists());
    }

    #[test]
    fn files_go_where_their_url_path_says() {
        let config = NginxConfig::benchmark(SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080), 1, "hi");
        let site = SiteDir::new(&config).unwrap().with_pattern("/1mb.bin", 1_000_000).unwrap();
        let body = fs::read(site.root().join("1mb.bin")).unwrap();
        assert_eq!(body.len(), 1_000_000);
        assert!(body.iter().enumerate().all(|(i, &b)| b == pattern_byte(i as u64)));
        assert!(fs::read_to_string(site.dir().join("nginx.conf")).unwrap().contains("worker_processes 1;"));
    }

    #[test]
    fn a_sparse_site_has_the_length_without_the_bytes() {
        let n = 100_000_000_000;
        let site = SiteDir::create_sparse(n, SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8080)).unwrap();
        let path = site.dir().join("root").join("bytes").join(n.to_string());
        let meta = fs::metadata(&path).unwrap();
        assert_eq!(meta.len(), n);
        assert!(std::os::unix::fs::MetadataExt::blocks(&meta) < 8, "the file is not sparse");
        let other = SiteDir::create_sparse(1, SocketAddrV4::new(Ipv4Addr::LOCALHOST, 8081)).unwrap();
        assert_ne!(other.dir(), site.dir(), "two sites of one process share a directory");
    }

    #[test]
    fn the_url_path_is_fairways() {
        assert_eq!(bytes_path(1_000_000_000), "/bytes/1000000000");
    }
}
