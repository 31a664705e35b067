//! The files a run needs, in a directory of its own under `/dev/shm`
//! (memory, so the static file is served from the page cache): `root/`
//! with the 1 MB file every server serves, nginx's configuration (its pid
//! file, log and temp paths go there too), and wrk's pipelining script.

use std::fs::{self, File};
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use fairway_tests::apps::responder::pattern_byte;

use super::plan::{STATIC_BYTES, STATIC_FILE, nginx_config};
use super::wrk::PIPELINE_SCRIPT;

/// Where sites are made.
pub const SITE_PARENT: &str = "/dev/shm";

/// The directory; removed when dropped.
#[derive(Debug)]
pub struct Site {
    dir: PathBuf,
}

impl Site {
    /// Writes the site, nginx with `workers` workers.
    ///
    /// # Errors
    ///
    /// When a file cannot be written (the partial site is removed).
    pub fn create(workers: usize) -> io::Result<Site> {
        let dir = Path::new(SITE_PARENT).join(format!("fairway-http-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        // From here on, dropping the site removes whatever was written.
        let site = Site { dir };
        fs::create_dir_all(site.dir.join("root"))?;
        fs::write(site.dir.join("nginx.conf"), nginx_config(&site.dir, workers))?;
        fs::write(site.script(), PIPELINE_SCRIPT)?;
        let mut file = File::create(site.dir.join("root").join(STATIC_FILE))?;
        let body: Vec<u8> = (0..STATIC_BYTES).map(pattern_byte).collect();
        file.write_all(&body)?;
        file.sync_all()?;
        Ok(site)
    }

    /// The site's directory.
    #[must_use]
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// wrk's pipelining script.
    #[must_use]
    pub fn script(&self) -> PathBuf {
        self.dir.join("pipeline.lua")
    }

    /// nginx's error log.
    #[must_use]
    pub fn nginx_log(&self) -> PathBuf {
        self.dir.join("error.log")
    }
}

impl Drop for Site {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.dir);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_site_holds_everything_and_is_removed_when_dropped() {
        let site = Site::create(2).unwrap();
        let dir = site.dir().to_path_buf();
        let body = fs::read(dir.join("root").join(STATIC_FILE)).unwrap();
        assert_eq!(body.len() as u64, STATIC_BYTES);
        assert!(fs::read_to_string(dir.join("nginx.conf")).unwrap().contains("worker_processes 2;"));
        assert_eq!(fs::read_to_string(site.script()).unwrap(), PIPELINE_SCRIPT);
        drop(site);
        assert!(!dir.exists());
    }
}
