//! A PostgreSQL server of a test's own (Debian's `postgresql` package,
//! which `cargo xtask test` installs): a fresh cluster in a temporary
//! directory, listening on a free port of `127.0.0.1` in this namespace
//! or in a testbed's, with its Unix socket in that directory too, so it
//! shares nothing with a system cluster. Stopped and removed when the
//! [`Postgres`] is dropped, also when the test fails.
//!
//! initdb and the server refuse to run as root: as root, they run as the
//! package's `postgres` user, which owns the directory.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use crate::testbed::{self, ExecOutput};

/// Where Debian installs each major version's server programs.
const VERSIONS_DIR: &str = "/usr/lib/postgresql";

/// The user the server runs as when the test runs as root.
const SERVICE_USER: &str = "postgres";

/// Settings for a throwaway cluster: nothing waits for the disk.
const FAST: &str = "-c fsync=off -c synchronous_commit=off -c full_page_writes=off";

/// How long initdb, a start or a stop may take.
const STEP: Duration = Duration::from_secs(60);

/// A running PostgreSQL server; stopped and deleted when dropped.
#[derive(Debug)]
pub struct Postgres {
    /// The temporary directory: the cluster in `data/`, the log, the socket.
    dir: PathBuf,
    bin: PathBuf,
    port: u16,
    /// The network namespace it listens in (`None`: this process's).
    ns: Option<String>,
}

impl Postgres {
    /// A new cluster, started, listening on `127.0.0.1` of namespace `ns`
    /// (or of this process's namespace), database `postgres`, user
    /// `postgres`, trusted without a password.
    ///
    /// # Errors
    ///
    /// PostgreSQL is not installed, or initdb or the start failed: what it
    /// said.
    pub fn start(ns: Option<&str>) -> Result<Postgres, String> {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let bin = server_programs()?;
        let name = format!("fairway-pg-{}-{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let dir = std::env::temp_dir().join(name);
        std::fs::create_dir(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let port = match ns {
            Some(ns) => testbed::in_netns(ns, free_port).map_err(|e| e.to_string())??,
            None => free_port()?,
        };
        // From here on a failure is cleaned up by the drop.
        let postgres = Postgres { dir, bin, port, ns: ns.map(str::to_owned) };
        if testbed::is_root() {
            postgres.succeed("chown", &["chown", SERVICE_USER, postgres.dir()])?;
        }
        let initdb = postgres.program("initdb");
        let data = postgres.data();
        let cmd = [&initdb, "-D", &data, "-U", "postgres", "--auth=trust", "--no-sync", "--no-instructions"];
        postgres.succeed("initdb", &postgres.as_owner(&cmd))?;
        postgres.start_again()?;
        Ok(postgres)
    }

    /// Its address, as libpq (and tokio-postgres) take it.
    #[must_use]
    pub fn url(&self) -> String {
        format!("postgresql://postgres@127.0.0.1:{}/postgres", self.port)
    }

    /// The psql command line that runs one statement over the server's Unix
    /// socket (from any namespace): unaligned rows, fields split by `|`,
    /// errors fatal. The statement goes last.
    #[must_use]
    pub fn psql(&self) -> Vec<String> {
        let port = self.port.to_string();
        ["psql", "-X", "-q", "-At", "-F", "|", "-v", "ON_ERROR_STOP=1", "-h", self.dir(), "-p", &port]
            .into_iter()
            .chain(["-U", "postgres", "-d", "postgres", "-c"])
            .map(str::to_owned)
            .collect()
    }

    /// Runs `sql` with [`psql`](Self::psql): its rows, one a line.
    ///
    /// # Errors
    ///
    /// psql failed: what it said.
    pub fn query(&self, sql: &str) -> Result<String, String> {
        let mut cmd = self.psql();
        cmd.push(sql.to_owned());
        self.succeed("psql", &cmd.iter().map(String::as_str).collect::<Vec<_>>()).map(|out| out.stdout_text())
    }

    /// Stops the server (fast: sessions are ended, the cluster kept).
    ///
    /// # Errors
    ///
    /// pg_ctl failed.
    pub fn stop(&self) -> Result<(), String> {
        self.pg_ctl(&["stop", "-m", "fast"]).map(drop)
    }

    /// Starts the server again after a [`stop`](Self::stop), on the same
    /// port, and waits until it takes connections.
    ///
    /// # Errors
    ///
    /// pg_ctl failed: its output and the server's log.
    pub fn start_again(&self) -> Result<(), String> {
        let options = format!("-h 127.0.0.1 -p {} -k {} {FAST}", self.port, self.dir());
        let log = self.dir.join("log").to_string_lossy().into_owned();
        self.pg_ctl(&["start", "-w", "-o", &options, "-l", &log]).map(drop).map_err(|e| {
            let log = std::fs::read_to_string(&log).unwrap_or_default();
            format!("{e}\nthe server's log:\n{log}")
        })
    }

    fn pg_ctl(&self, args: &[&str]) -> Result<ExecOutput, String> {
        let pg_ctl = self.program("pg_ctl");
        let data = self.data();
        let cmd = self.as_owner(&[&[pg_ctl.as_str(), "-D", &data], args].concat());
        self.succeed("pg_ctl", &cmd)
    }

    fn dir(&self) -> &str {
        self.dir.to_str().expect("a UTF-8 temporary directory")
    }

    fn data(&self) -> String {
        format!("{}/data", self.dir())
    }

    fn program(&self, name: &str) -> String {
        self.bin.join(name).to_string_lossy().into_owned()
    }

    /// `cmd` as the directory's owner: `runuser -u postgres --` as root.
    fn as_owner<'a>(&self, cmd: &[&'a str]) -> Vec<&'a str> {
        let runuser: &[&str] = if testbed::is_root() { &["runuser", "-u", SERVICE_USER, "--"] } else { &[] };
        [runuser, cmd].concat()
    }

    /// Runs `cmd` in the server's namespace, bounded by [`STEP`], and fails
    /// unless it exits 0.
    fn succeed(&self, what: &str, cmd: &[&str]) -> Result<ExecOutput, String> {
        let spawned = match &self.ns {
            Some(ns) => testbed::spawn(ns, cmd),
            None => testbed::spawn_here(cmd),
        };
        let out = spawned.and_then(|s| s.wait_timeout(STEP)).map_err(|e| format!("{what}: {e}"))?;
        if out.success() { Ok(out) } else { Err(format!("{what} failed: {}{}", out.stdout_text(), out.stderr_text())) }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if Path::new(&self.data()).join("postmaster.pid").exists()
            && let Err(e) = self.pg_ctl(&["stop", "-m", "immediate"])
        {
            eprintln!("postgres: {e}");
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// The bin directory of the newest PostgreSQL installed.
fn server_programs() -> Result<PathBuf, String> {
    let missing = || format!("no PostgreSQL server under {VERSIONS_DIR} (Debian's postgresql package)");
    let versions = std::fs::read_dir(VERSIONS_DIR).map_err(|_| missing())?;
    versions
        .flatten()
        .filter_map(|entry| Some((entry.file_name().to_str()?.parse::<u32>().ok()?, entry.path().join("bin"))))
        .filter(|(_, bin)| bin.join("initdb").exists())
        .max()
        .map(|(_, bin)| bin)
        .ok_or_else(missing)
}

/// A port of `127.0.0.1` nothing listens on now.
fn free_port() -> Result<u16, String> {
    let listener = std::net::TcpListener::bind(("127.0.0.1", 0)).map_err(|e| format!("a free port: {e}"))?;
    listener.local_addr().map(|a| a.port()).map_err(|e| e.to_string())
}
