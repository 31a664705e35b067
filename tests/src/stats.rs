//! What benchmarks and scenarios report over their rounds, and the CPU
//! time `/proc` shows (see [`parse_stat`]).

/// The median of `values` (the mean of the middle two for an even count);
/// NaN for none.
#[must_use]
pub fn median(mut values: Vec<f64>) -> f64 {
    values.sort_by(f64::total_cmp);
    let n = values.len();
    match n {
        0 => f64::NAN,
        _ if n % 2 == 1 => values[n / 2],
        _ => (values[n / 2 - 1] + values[n / 2]) / 2.0,
    }
}

/// `USER_HZ`: the clock ticks per second of `/proc/PID/stat`'s times.
pub const CLOCK_TICKS_PER_SECOND: u64 = 100;

/// What the generator needs from one `/proc/PID/stat`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Stat {
    /// The parent's process id.
    pub ppid: u32,
    /// `utime + stime`, in clock ticks.
    pub cpu_ticks: u64,
}

/// Reads `/proc/PID/stat`'s (or `/proc/PID/task/TID/stat`'s) text: `pid (comm) state ppid ... utime stime
/// ...`. The command name may hold spaces and parentheses, so the fields
/// are counted from its last `)`.
#[must_use]
pub fn parse_stat(text: &str) -> Option<Stat> {
    let (_, rest) = text.rsplit_once(')')?;
    // After the name: field 3 (state) is index 0, so field N is N - 3.
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n - 3)?.parse::<u64>().ok();
    let ppid = u32::try_from(field(4)?).ok()?;
    Some(Stat { ppid, cpu_ticks: field(14)?.checked_add(field(15)?)? })
}

/// `ticks` of [`CLOCK_TICKS_PER_SECOND`] as a duration.
#[must_use]
pub fn ticks_to_duration(ticks: u64) -> std::time::Duration {
    std::time::Duration::from_micros(ticks.saturating_mul(1_000_000 / CLOCK_TICKS_PER_SECOND))
}

/// Reads and parses one stat file (`/proc/PID/stat`, `/proc/self/task/TID/stat`,
/// `/proc/thread-self/stat`); the errors name it.
fn read_stat(path: &str) -> std::io::Result<Stat> {
    let text = std::fs::read_to_string(path).map_err(|e| std::io::Error::new(e.kind(), format!("{path}: {e}")))?;
    parse_stat(&text).ok_or_else(|| std::io::Error::new(std::io::ErrorKind::InvalidData, format!("{path}: unreadable")))
}

/// Process `pid`'s `/proc/PID/stat` (its CPU time covers all its threads).
///
/// # Errors
///
/// The process is gone, not ours to read, or its stat is unreadable.
pub fn process_stat(pid: u32) -> std::io::Result<Stat> {
    read_stat(&format!("/proc/{pid}/stat"))
}

/// The CPU time (user and system, all its threads) process `pid` has used
/// so far, at the 10 ms resolution of `/proc`.
///
/// # Errors
///
/// As [`process_stat`].
pub fn process_cpu_time(pid: u32) -> std::io::Result<std::time::Duration> {
    process_stat(pid).map(|stat| ticks_to_duration(stat.cpu_ticks))
}

/// The CPU time (user and system) the thread `tid` of this process has
/// used so far, at the 10 ms resolution of `/proc`.
///
/// # Errors
///
/// The thread is gone, or its stat is unreadable.
pub fn thread_cpu_time(tid: u32) -> std::io::Result<std::time::Duration> {
    read_stat(&format!("/proc/self/task/{tid}/stat")).map(|stat| ticks_to_duration(stat.cpu_ticks))
}

/// The CPU time (user and system) the calling thread has used so far, at
/// the 10 ms resolution of `/proc`.
///
/// # Errors
///
/// Its stat is unreadable.
pub fn own_thread_cpu_time() -> std::io::Result<std::time::Duration> {
    read_stat("/proc/thread-self/stat").map(|stat| ticks_to_duration(stat.cpu_ticks))
}

/// The ids under `dir` (`/proc`, `/proc/self/task`) whose `comm` is
/// `name` (the kernel cuts it at 15 bytes).
fn ids_named(dir: &str, name: &str) -> Vec<u32> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    entries
        .filter_map(|entry| {
            let entry = entry.ok()?;
            let id = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let comm = std::fs::read_to_string(entry.path().join("comm")).ok()?;
            (comm.trim_end() == name).then_some(id)
        })
        .collect()
}

/// The ids of the processes named `name`.
#[must_use]
pub fn processes_named(name: &str) -> Vec<u32> {
    ids_named("/proc", name)
}

/// The ids of this process's threads named `name`.
#[must_use]
pub fn threads_named(name: &str) -> Vec<u32> {
    ids_named("/proc/self/task", name)
}

/// The whole machine's CPU time so far, in clock ticks summed over its
/// CPUs: `(busy, all)`, busy being everything but idle and I/O wait (the
/// first line of `/proc/stat`).
#[must_use]
pub fn machine_cpu_ticks() -> Option<(u64, u64)> {
    let text = std::fs::read_to_string("/proc/stat").ok()?;
    parse_machine_cpu(&text)
}

/// [`machine_cpu_ticks`] from `/proc/stat`'s text.
#[must_use]
pub fn parse_machine_cpu(text: &str) -> Option<(u64, u64)> {
    let line = text.lines().find(|l| l.starts_with("cpu "))?;
    let ticks: Vec<u64> = line.split_whitespace().skip(1).take(8).map(str::parse).collect::<Result<_, _>>().ok()?;
    let [user, nice, system, idle, iowait, irq, softirq, steal] = ticks[..] else { return None };
    let busy = user + nice + system + irq + softirq + steal;
    Some((busy, busy + idle + iowait))
}

/// The VmRSS of process `pid`, KiB.
#[must_use]
pub fn rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status.lines().find_map(|l| l.strip_prefix("VmRSS:")?.trim().strip_suffix("kB")?.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn machine_cpu_counts_all_but_idle_and_iowait_as_busy() {
        let text = "cpu  100 5 50 800 40 3 2 0 0 0\ncpu0 50 2 25 400 20 1 1 0 0 0\n";
        assert_eq!(parse_machine_cpu(text), Some((160, 1000)));
        assert_eq!(parse_machine_cpu("cpu  1 2 3\n"), None, "too few fields");
        assert_eq!(parse_machine_cpu("intr 5\n"), None);
    }

    #[test]
    fn median_of_odd_even_and_no_rounds() {
        assert_eq!(median(vec![3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(vec![4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(vec![7.0]), 7.0);
        assert!(median(Vec::new()).is_nan());
    }

    #[test]
    fn fields_are_counted_after_the_command_name() {
        let line = "4242 (nginx) S 4200 4242 4242 0 -1 4194624 1234 0 0 0 350 120 0 0 20 0 1 0 99 1 2 3";
        assert_eq!(parse_stat(line), Some(Stat { ppid: 4200, cpu_ticks: 470 }));
        // A name with a space and a parenthesis of its own.
        let odd = "7 (a b) c)) R 1 7 7 0 -1 0 0 0 0 0 5 6 0 0 20 0 1 0 1";
        assert_eq!(parse_stat(odd), Some(Stat { ppid: 1, cpu_ticks: 11 }));
        assert_eq!(parse_stat("7 (short) R 1 2"), None);
        assert_eq!(parse_stat(""), None);
    }

    #[test]
    fn this_thread_is_found_by_name_and_has_a_cpu_time() {
        let named = std::thread::Builder::new()
            .name("stats-probe".into())
            .spawn(|| {
                let tid = std::fs::read_link("/proc/thread-self").ok()?.file_name()?.to_str()?.parse::<u32>().ok()?;
                let found = threads_named("stats-probe");
                Some((tid, found, thread_cpu_time(tid).is_ok()))
            })
            .unwrap()
            .join()
            .unwrap();
        let (tid, found, timed) = named.expect("/proc/thread-self");
        assert_eq!(found, vec![tid]);
        assert!(timed);
    }
}
