//! The server's CPU time, read from `/proc`: the generator takes it just
//! before its measured window and just after, so that the bench reports
//! server CPU time per request at a fixed offered load. (On a machine
//! where the load generator saturates first, requests per second measure
//! the client; CPU time per request at the same rate measures the server.)
//!
//! A process's `utime` and `stime` (fields 14 and 15 of
//! `/proc/PID/stat`) cover all its threads, but a child's only once it has
//! been waited for; so a server with worker processes (nginx's master and
//! workers) is the process and its descendants, found once before the
//! window (by `ppid`, field 4, over every `/proc/*/stat`) and summed.
//!
//! The fields are in clock ticks of `USER_HZ`, which Linux fixes at 100
//! for user space on every architecture we run on (what
//! `sysconf(_SC_CLK_TCK)` returns; reading it needs libc and `unsafe`,
//! which this crate keeps out): 10 ms resolution, under 0.1 µs per request
//! over a window of seconds at tens of thousands of requests per second.

use std::fs;
use std::io;
use std::time::Duration;

pub use fairway_tests::stats::{CLOCK_TICKS_PER_SECOND, Stat, parse_stat};
use fairway_tests::stats::{process_stat, ticks_to_duration};

/// `root` and every process below it, given each process's `(pid, ppid)`:
/// `root` first.
#[must_use]
pub fn descendants(root: u32, parents: &[(u32, u32)]) -> Vec<u32> {
    let mut tree = vec![root];
    let mut next = 0;
    while let Some(&parent) = tree.get(next) {
        for &(pid, _) in parents.iter().filter(|&&(_, ppid)| ppid == parent) {
            if !tree.contains(&pid) {
                tree.push(pid);
            }
        }
        next += 1;
    }
    tree
}

/// A server's processes, fixed when found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProcessTree {
    pids: Vec<u32>,
}

impl ProcessTree {
    /// `pid` and its descendants, as they are now.
    ///
    /// # Errors
    ///
    /// `pid` has no readable `/proc/PID/stat` (it is gone, or not ours to
    /// read).
    pub fn of(pid: u32) -> io::Result<ProcessTree> {
        process_stat(pid)?;
        let mut parents = Vec::new();
        for entry in fs::read_dir("/proc")? {
            let Some(child) = entry?.file_name().to_str().and_then(|name| name.parse::<u32>().ok()) else {
                continue;
            };
            // A process may end while the directory is read: skip it.
            if let Ok(stat) = process_stat(child) {
                parents.push((child, stat.ppid));
            }
        }
        Ok(ProcessTree { pids: descendants(pid, &parents) })
    }

    /// The processes, the server's own first.
    #[must_use]
    pub fn pids(&self) -> &[u32] {
        &self.pids
    }

    /// The CPU time (user and system) all of them have used so far.
    ///
    /// # Errors
    ///
    /// One of them is gone: a sum without it would be short, so there is
    /// no figure rather than a wrong one.
    pub fn cpu_time(&self) -> io::Result<Duration> {
        let mut ticks = 0u64;
        for &pid in &self.pids {
            ticks = ticks.saturating_add(process_stat(pid)?.cpu_ticks);
        }
        Ok(ticks_to_duration(ticks))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tree_is_its_root_and_everything_below() {
        // 10 is nginx's master; 11 and 12 its workers; 13 a worker's
        // child; 20 someone else's.
        let parents = [(1, 0), (10, 1), (11, 10), (12, 10), (13, 12), (20, 1)];
        assert_eq!(descendants(10, &parents), [10, 11, 12, 13]);
        assert_eq!(descendants(20, &parents), [20]);
        // A cycle (a pid reused while reading) ends.
        assert_eq!(descendants(5, &[(5, 6), (6, 5)]), [5, 6]);
    }

    #[test]
    fn this_process_uses_cpu_time() {
        let tree = ProcessTree::of(std::process::id()).unwrap();
        assert_eq!(tree.pids()[0], std::process::id());
        let before = tree.cpu_time().unwrap();
        // Spin until a tick is counted (wall time bounds it on a loaded
        // machine).
        let start = std::time::Instant::now();
        let mut x = 0u64;
        while start.elapsed() < Duration::from_secs(5) && tree.cpu_time().unwrap() == before {
            for _ in 0..10_000 {
                x = std::hint::black_box(x.wrapping_add(1));
            }
        }
        assert!(tree.cpu_time().unwrap() > before, "no CPU time counted");
        assert!(ProcessTree::of(u32::MAX).is_err());
    }
}
