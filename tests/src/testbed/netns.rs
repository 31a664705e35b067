//! Namespaces from the inside: entering one from a test thread
//! ([`enter`], [`in_netns`]), the privileges that needs ([`require_root`]),
//! listing the named namespaces, and the bpffs that libxdp pins its
//! dispatcher in ([`ensure_bpffs`]).
//!
//! # `enter` versus `ip netns exec`
//!
//! [`enter`] moves only the calling thread into the namespace
//! (`setns(2)` with `CLONE_NEWNET` on the fd of `/var/run/netns/NAME`):
//! sockets, AF_XDP sockets and TAP devices it opens then belong to that
//! namespace, and it still sees the host's mounts, including
//! `/sys/fs/bpf`. Note that `/sys/class/net` there still lists the host's
//! interfaces (sysfs shows the namespace of whoever mounted it); use
//! `/proc/thread-self/net/dev` or netlink to see the namespace's.
//!
//! `ip netns exec NAME cmd` runs `cmd` in a private mount namespace where it
//! remounts `/sys` for the target namespace, so `/sys/fs/bpf` is **not
//! mounted** there: libxdp cannot pin its multi-program dispatcher and falls
//! back to attaching the program directly. A server run that way still
//! works; one that must share the dispatcher should run from a thread that
//! used [`enter`].

use std::fs::File;
use std::marker::PhantomData;
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use super::TestbedError;
use super::process::run;

/// Where `ip netns add` bind-mounts the namespaces it names.
pub const NETNS_RUN_DIR: &str = "/var/run/netns";

/// Where libxdp wants bpffs.
pub const BPFFS_PATH: &str = "/sys/fs/bpf";

/// Capability numbers from `linux/capability.h`.
const CAP_NET_ADMIN: u32 = 12;
const CAP_SYS_ADMIN: u32 = 21;

/// The path of a named namespace.
pub fn netns_path(ns: &str) -> PathBuf {
    Path::new(NETNS_RUN_DIR).join(ns)
}

/// Fails with [`TestbedError::NotRoot`] unless this process may create
/// namespaces and configure their networking (`CAP_NET_ADMIN` and
/// `CAP_SYS_ADMIN`, as root has).
pub fn require_root() -> Result<(), TestbedError> {
    if is_root() { Ok(()) } else { Err(TestbedError::NotRoot) }
}

/// Whether this process has `CAP_NET_ADMIN` and `CAP_SYS_ADMIN` in effect.
pub fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status").ok().and_then(|s| effective_caps(&s)).is_some_and(|caps| {
        let has = |cap: u32| caps & (1u64 << cap) != 0;
        has(CAP_NET_ADMIN) && has(CAP_SYS_ADMIN)
    })
}

/// The `CapEff:` mask of `/proc/self/status`.
fn effective_caps(status: &str) -> Option<u64> {
    let hex = status.lines().find_map(|line| line.strip_prefix("CapEff:"))?.trim();
    u64::from_str_radix(hex, 16).ok()
}

/// The names of every named namespace (`ip netns list`, read from
/// [`NETNS_RUN_DIR`]).
pub fn list_namespaces() -> Result<Vec<String>, TestbedError> {
    match std::fs::read_dir(NETNS_RUN_DIR) {
        Ok(entries) => {
            let mut names: Vec<String> =
                entries.filter_map(Result::ok).map(|e| e.file_name().to_string_lossy().into_owned()).collect();
            names.sort();
            Ok(names)
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Vec::new()),
        Err(e) => Err(TestbedError::io(format!("listing {NETNS_RUN_DIR}"), e)),
    }
}

/// Moves the calling thread into namespace `ns` until the returned guard is
/// dropped, which moves it back. Only this thread moves: other threads, and
/// child processes spawned from other threads, stay where they are.
///
/// The guard cannot be sent to another thread (it must restore the thread
/// that entered). For a closure run inside a namespace on a thread of its
/// own, see [`in_netns`].
pub fn enter(ns: &str) -> Result<NetnsGuard, TestbedError> {
    let previous = File::open("/proc/thread-self/ns/net")
        .map_err(|e| TestbedError::io("opening /proc/thread-self/ns/net (this thread's namespace)", e))?;
    let path = netns_path(ns);
    let target = File::open(&path)
        .map_err(|e| TestbedError::io(format!("opening {} (does namespace {ns} exist?)", path.display()), e))?;
    setns(&target).map_err(|e| TestbedError::io(format!("entering namespace {ns} (setns)"), e))?;
    Ok(NetnsGuard { previous, ns: ns.to_owned(), _same_thread: PhantomData })
}

/// Runs `f` on a new thread inside namespace `ns` and returns its result.
/// A panic in `f` propagates.
pub fn in_netns<T: Send>(ns: &str, f: impl FnOnce() -> T + Send) -> Result<T, TestbedError> {
    std::thread::scope(|scope| {
        let thread = scope.spawn(|| -> Result<T, TestbedError> {
            let _guard = enter(ns)?;
            Ok(f())
        });
        thread.join().unwrap_or_else(|panic| std::panic::resume_unwind(panic))
    })
}

/// The thread's stay in a namespace; dropping it returns the thread to the
/// namespace it came from.
#[derive(Debug)]
pub struct NetnsGuard {
    previous: File,
    ns: String,
    // `*const ()` makes the guard neither Send nor Sync: it must be dropped
    // on the thread that entered.
    _same_thread: PhantomData<*const ()>,
}

impl NetnsGuard {
    /// The namespace the thread is in.
    pub fn namespace(&self) -> &str {
        &self.ns
    }
}

impl Drop for NetnsGuard {
    fn drop(&mut self) {
        if let Err(e) = setns(&self.previous) {
            // The thread would go on in the wrong namespace: everything it
            // opened next would land there. Better to stop.
            panic!("could not return this thread from namespace {} (setns): {e}", self.ns);
        }
    }
}

/// `setns(fd, CLONE_NEWNET)` for the calling thread.
fn setns(ns: &File) -> std::io::Result<()> {
    // SAFETY: `ns` is an open file, so its descriptor stays valid for the
    // call; setns(2) only reads the descriptor and changes the calling
    // thread's network namespace, touching no memory of ours.
    let rc = unsafe { libc::setns(ns.as_raw_fd(), libc::CLONE_NEWNET) };
    if rc == 0 { Ok(()) } else { Err(std::io::Error::last_os_error()) }
}

/// Mounts bpffs at [`BPFFS_PATH`] unless it is mounted there already, so
/// that libxdp can pin its dispatcher. A failure is reported on stderr, not
/// returned: libxdp works without it (see the module docs).
pub fn ensure_bpffs() {
    static MOUNTING: Mutex<()> = Mutex::new(());
    let _one_at_a_time = MOUNTING.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    if bpffs_mounted() {
        return;
    }
    if let Err(e) = run("mounting bpffs for libxdp", "mount", &["-t", "bpf", "bpf", BPFFS_PATH]) {
        eprintln!("testbed: warning: {e} (libxdp falls back to loading without its dispatcher)");
    }
}

/// Whether `/proc/self/mounts` shows a bpf filesystem at [`BPFFS_PATH`].
pub fn bpffs_mounted() -> bool {
    std::fs::read_to_string("/proc/self/mounts").is_ok_and(|mounts| {
        mounts.lines().any(|line| {
            let mut fields = line.split_whitespace();
            let (_source, target, kind) = (fields.next(), fields.next(), fields.next());
            target == Some(BPFFS_PATH) && kind == Some("bpf")
        })
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn capabilities_from_status() {
        let status = "Name:\tx\nCapInh:\t0000000000000000\nCapEff:\t000001ffffffffff\n";
        assert_eq!(effective_caps(status), Some(0x1ff_ffff_ffff));
        assert_eq!(effective_caps("Name:\tx\n"), None);
        // An unprivileged process: nothing in effect.
        assert_eq!(effective_caps("CapEff:\t0000000000000000\n"), Some(0));
    }

    #[test]
    fn entering_a_missing_namespace_says_which() {
        let err = enter("fairway-no-such-namespace").unwrap_err();
        assert!(err.to_string().contains("/var/run/netns/fairway-no-such-namespace"), "{err}");
    }
}
