//! The files a run needs: a [`SiteDir`] of the one nginx module (in
//! `/dev/shm`, so the static file is served from the page cache) with the
//! 1 MB file every server serves (and a 16 KB one, for the ablation) and nginx set up for the benchmark, and
//! wrk's pipelining script beside it.

use std::io;
use std::net::SocketAddrV4;
use std::path::{Path, PathBuf};

use fairway_tests::certificate::{KeyKind, self_signed};
use fairway_tests::nginx::{NginxConfig, SiteDir, TLS_CERT, TLS_KEY};

use super::plan::{
    NGINX_H2C_PORT, PLAINTEXT_BODY, SERVER_IP, SMALL_BYTES, SMALL_FILE, STATIC_BYTES, STATIC_FILE, Subject, UpstreamAt,
};
use super::wrk::PIPELINE_SCRIPT;

/// The site and the script; removed when dropped.
#[derive(Debug)]
pub struct RunFiles {
    site: SiteDir,
    script: PathBuf,
}

impl RunFiles {
    /// Writes the files, nginx with `workers` workers, HTTP/2 by ALPN on
    /// its HTTPS port and with prior knowledge on [`NGINX_H2C_PORT`], its
    /// proxy to `upstream`.
    ///
    /// # Errors
    ///
    /// When a file cannot be written (what was written is removed).
    pub fn create(workers: usize, upstream: UpstreamAt) -> io::Result<RunFiles> {
        let ip = SERVER_IP.parse().map_err(io::Error::other)?;
        let mut config = NginxConfig::benchmark(SocketAddrV4::new(ip, Subject::Nginx.port()), workers, PLAINTEXT_BODY);
        config.tls = Some(SocketAddrV4::new(ip, Subject::TlsNginx.port()));
        config.tls_http2 = true;
        config.h2c = Some(SocketAddrV4::new(ip, NGINX_H2C_PORT));
        config.proxy = Some((SocketAddrV4::new(ip, Subject::ProxyNginx.port()), upstream.addr().to_owned()));
        let site = SiteDir::new(&config)?
            .with_pattern(&format!("/{STATIC_FILE}"), STATIC_BYTES)?
            .with_pattern(&format!("/{SMALL_FILE}"), SMALL_BYTES)?;
        let script = site.write("pipeline.lua", PIPELINE_SCRIPT)?;
        // What every HTTPS server of the run serves.
        let ip_name = format!("IP:{SERVER_IP}");
        self_signed(&site.dir().join(TLS_CERT), &site.dir().join(TLS_KEY), KeyKind::EcdsaP256, &ip_name)?;
        Ok(RunFiles { site, script })
    }

    /// The site (its directory, the root the built-in servers serve,
    /// nginx's command line and error log).
    #[must_use]
    pub fn site(&self) -> &SiteDir {
        &self.site
    }

    /// The site's directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        self.site.dir()
    }

    /// wrk's pipelining script.
    #[must_use]
    pub fn script(&self) -> &Path {
        &self.script
    }
}

#[cfg(test)]
mod tests {
    use std::fs;

    use super::*;

    #[test]
    fn a_site_holds_everything_and_is_removed_when_dropped() {
        let files = RunFiles::create(2, UpstreamAt::Loopback).unwrap();
        let dir = files.dir().to_path_buf();
        let body = fs::read(dir.join("root").join(STATIC_FILE)).unwrap();
        assert_eq!(body.len() as u64, STATIC_BYTES);
        assert!(fs::read_to_string(dir.join("nginx.conf")).unwrap().contains("worker_processes 2;"));
        let conf = fs::read_to_string(dir.join("nginx.conf")).unwrap();
        assert!(conf.contains("listen 10.77.0.1:80 reuseport;"));
        assert!(conf.contains("listen 10.77.0.1:443 ssl http2 reuseport;"), "{conf}");
        assert!(conf.contains("listen 10.77.0.1:8085 http2 reuseport;"), "{conf}");
        assert!(conf.contains("listen 10.77.0.1:8090 reuseport;") && conf.contains("server 127.0.0.1:9080;"), "{conf}");
        assert!(fs::read_to_string(dir.join(TLS_CERT)).unwrap().contains("BEGIN CERTIFICATE"));
        assert!(fs::read_to_string(dir.join(TLS_KEY)).unwrap().contains("PRIVATE KEY"));
        assert_eq!(fs::read_to_string(files.script()).unwrap(), PIPELINE_SCRIPT);
        drop(files);
        assert!(!dir.exists());
    }
}
