//! Headless Chromium (Debian's `chromium`, which `cargo xtask test`
//! installs) loading a page from inside a testbed namespace, as a user's
//! browser would: [`dump_dom`] prints the page's DOM once it has loaded.
//!
//! Chromium runs as root here, so without its sandbox, with a fresh
//! profile of its own, and with every feature that reaches for the
//! network by itself switched off ([`FLAGS`]): in a namespace they find
//! nothing, and on this machine's closed network they fail many times a
//! start. It runs in a process group of its own, its home in the profile;
//! the group and every process that names the profile (its crash handlers
//! leave the group) are killed when the load ends, in time or not, and
//! the profile is removed.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use crate::testbed::Spawned;

/// What every start of Chromium here is given: headless, no sandbox (we
/// are root), no GPU, no QUIC, and no first-run, background, component
/// update or sync traffic.
pub const FLAGS: &[&str] = &[
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
];

/// How long Chromium's processes have to be gone after the kill.
const REAP: Duration = Duration::from_secs(10);

/// Loads `url` in Chromium inside namespace `ns`, with [`FLAGS`], a fresh
/// profile and `extra` flags, and returns the DOM as it is after the
/// page's `load` event (`--dump-dom`), within `timeout`. Chromium is gone
/// when it returns, whatever happened.
///
/// # Errors
///
/// Chromium could not be started (is it installed?), failed, or took
/// longer than `timeout`: what it said.
pub fn dump_dom(ns: &str, url: &str, extra: &[&str], timeout: Duration) -> Result<String, String> {
    let profile = Profile::new();
    let mut command = Command::new("ip");
    // Its home too, so that nothing is written outside the profile (the
    // crash handlers' database is under $XDG_CONFIG_HOME, and names it).
    let dir = &profile.dir;
    command
        .env("HOME", dir)
        .env("XDG_CONFIG_HOME", dir.join(".config"))
        .env("XDG_CACHE_HOME", dir.join(".cache"))
        .args(["netns", "exec", ns, "chromium"])
        .args(FLAGS)
        .arg(format!("--user-data-dir={}", profile.dir.display()))
        .args(extra)
        .args(["--dump-dom", url]);
    std::os::unix::process::CommandExt::process_group(&mut command, 0);
    let spawned = Spawned::start("starting chromium", command).map_err(|e| e.to_string())?;
    // `ip netns exec` and the launcher script exec Chromium in place: the
    // child's pid is the group's.
    let _group = Group { pgid: spawned.id(), profile };
    let out = spawned.wait_timeout(timeout).map_err(|e| e.to_string())?;
    if out.success() {
        Ok(out.stdout_text())
    } else {
        Err(format!(
            "{} failed ({}; cargo xtask test installs chromium): {}",
            out.command,
            out.status,
            out.stderr_text()
        ))
    }
}

/// A fresh, empty profile directory, removed on drop.
struct Profile {
    dir: PathBuf,
}

impl Profile {
    fn new() -> Profile {
        static NEXT: AtomicUsize = AtomicUsize::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let dir = std::env::temp_dir().join(format!("fairway-chromium-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let _ = std::fs::create_dir_all(&dir);
        Profile { dir }
    }
}

impl Drop for Profile {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Chromium's processes: its process group, and whatever names its
/// profile. Dropping it kills them all and waits until they are gone.
struct Group {
    pgid: u32,
    profile: Profile,
}

impl Drop for Group {
    fn drop(&mut self) {
        let Ok(pgid) = libc::pid_t::try_from(self.pgid) else { return };
        // SAFETY: kill(2) of the process group our child leads; a group id
        // is not reused while any member of the group lives, and a group
        // already gone is ESRCH.
        unsafe { libc::kill(-pgid, libc::SIGKILL) };
        let deadline = Instant::now() + REAP;
        loop {
            let left = naming(&self.profile.dir);
            // SAFETY: signal 0 only asks whether a member of the group
            // (a zombie not yet reaped included) is still there.
            let group = unsafe { libc::kill(-pgid, 0) } == 0;
            if (left.is_empty() && !group) || Instant::now() >= deadline {
                break;
            }
            for pid in left {
                // SAFETY: kill(2) of a process whose command line names
                // our own profile directory: one of Chromium's.
                unsafe { libc::kill(pid, libc::SIGKILL) };
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

/// The processes whose command line names `dir` (zombies have none).
fn naming(dir: &Path) -> Vec<libc::pid_t> {
    let needle = dir.as_os_str().as_encoded_bytes();
    let Ok(entries) = std::fs::read_dir("/proc") else { return Vec::new() };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<libc::pid_t>().ok())
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|line| line.windows(needle.len()).any(|w| w == needle))
        })
        .collect()
}

/// Whether any process still names a profile of this process's (a
/// Chromium [`dump_dom`] left behind: it must leave none).
#[must_use]
pub fn any_left() -> bool {
    let prefix = std::env::temp_dir().join(format!("fairway-chromium-{}-", std::process::id()));
    !naming(&prefix).is_empty()
}
