//! The command line: parsing (by hand, to keep xtask std-only and quick to
//! build) and the help texts.
//!
//! Rules shared by the subcommands:
//! - `-h`/`--help` as the first argument of a subcommand shows its help, as
//!   does `cargo xtask help <COMMAND>`.
//! - Commands that run one of our binaries (`sim`, `bench loopback`,
//!   `bench alloc`, `bench nic`, `bench http`, `testbed ACTION`) hand
//!   every further argument to it unchanged; a leading `--` is dropped, so
//!   `cargo xtask sim -- --help` reaches fairway-sim's own help.
//! - `run` has options of its own; the server's arguments go after `--`.
//! - `bench micro` hands its arguments to `cargo bench` as they are, so
//!   criterion's options go after a `--` there, as with cargo itself.

use std::ffi::{OsStr, OsString};

use crate::error::Failure;

/// A parsed command line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Command {
    /// Print usage: of the tool (`None`) or of one subcommand.
    Help(Option<Topic>),
    Test(TestArgs),
    Sim(PassThrough),
    Bench(BenchArgs),
    Run(RunArgs),
    Testbed(TestbedArgs),
    Lab(PassThrough),
    Fuzz(FuzzArgs),
    Soak(PassThrough),
}

/// A subcommand with its own help page.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Topic {
    Run,
    Test,
    Sim,
    Bench,
    Testbed,
    Lab,
    Fuzz,
    Soak,
}

impl Topic {
    const ALL: [Topic; 8] =
        [Topic::Run, Topic::Test, Topic::Sim, Topic::Bench, Topic::Testbed, Topic::Lab, Topic::Fuzz, Topic::Soak];

    pub fn name(self) -> &'static str {
        match self {
            Topic::Run => "run",
            Topic::Test => "test",
            Topic::Sim => "sim",
            Topic::Bench => "bench",
            Topic::Testbed => "testbed",
            Topic::Lab => "lab",
            Topic::Fuzz => "fuzz",
            Topic::Soak => "soak",
        }
    }

    fn from_name(name: &str) -> Option<Topic> {
        Topic::ALL.into_iter().find(|topic| topic.name() == name)
    }
}

/// `cargo xtask test [--quick] [-- <extra cargo test args>]`
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TestArgs {
    /// Leave out the heavy simulated-network tests (the fairway-tests crate).
    pub quick: bool,
    /// Appended to the `cargo test` command line.
    pub extra: Vec<OsString>,
}

/// `cargo xtask fuzz [TARGET...] [--seconds N | --runs N]`
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FuzzArgs {
    /// The targets to run (none: every one).
    pub targets: Vec<String>,
    /// Seconds per target.
    pub seconds: Option<u64>,
    /// Executions per target (wins over `seconds`).
    pub runs: Option<u64>,
}

/// Arguments handed unchanged to the binary a subcommand runs.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PassThrough {
    pub args: Vec<OsString>,
}

/// `cargo xtask run [--kernel] [--queues N] [-- <FAIRWAY ARGS>...]`
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct RunArgs {
    /// Serve on the kernel backend even where AF_XDP would work.
    pub kernel: bool,
    /// Queues of the testbed's `fw0`, and shards of the server on it
    /// (`None`: one per core).
    pub queues: Option<usize>,
    /// Handed to `fairway` after the flags xtask sets.
    pub fairway: Vec<OsString>,
}

/// Server flags `cargo xtask run` sets itself, with what to do instead.
const RUN_RESERVED_FLAGS: &[(&str, &str)] = &[
    ("--backend", "xtask picks it (afxdp, else kernel); --kernel forces the kernel backend"),
    ("--iface", "the server runs on the testbed's fw0"),
    ("--ip", "the server is the testbed's 10.77.0.1/24"),
    ("--queues", "use `cargo xtask run --queues N` (before `--`): it sizes the testbed too"),
];

/// What `cargo xtask bench` measures.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum BenchTarget {
    Loopback,
    Micro,
    Alloc,
    Nic,
    Http,
    All,
}

impl BenchTarget {
    pub const DEFAULT: BenchTarget = BenchTarget::Loopback;

    fn from_name(name: &str) -> Option<BenchTarget> {
        match name {
            "loopback" => Some(BenchTarget::Loopback),
            "micro" => Some(BenchTarget::Micro),
            "alloc" => Some(BenchTarget::Alloc),
            "nic" => Some(BenchTarget::Nic),
            "http" => Some(BenchTarget::Http),
            "all" => Some(BenchTarget::All),
            _ => None,
        }
    }
}

/// `cargo xtask bench [loopback|micro|alloc|nic|http|all] [args...]`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BenchArgs {
    pub target: BenchTarget,
    /// For `loopback`, `alloc`, `nic` and `http`: the benchmark binary's
    /// arguments. For `micro`: extra `cargo bench` arguments. Always empty
    /// for `all`.
    pub args: Vec<OsString>,
}

/// What `cargo xtask testbed` does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TestbedAction {
    Up,
    Down,
    Status,
}

impl TestbedAction {
    pub fn name(self) -> &'static str {
        match self {
            TestbedAction::Up => "up",
            TestbedAction::Down => "down",
            TestbedAction::Status => "status",
        }
    }

    fn from_name(name: &str) -> Option<TestbedAction> {
        [TestbedAction::Up, TestbedAction::Down, TestbedAction::Status].into_iter().find(|a| a.name() == name)
    }
}

/// `cargo xtask testbed up|down|status [ARGS...]`
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TestbedArgs {
    pub action: TestbedAction,
    /// Handed to `fairway-testbed ACTION` unchanged.
    pub args: Vec<OsString>,
}

/// Parses the arguments that follow `cargo xtask`.
pub fn parse<I>(args: I) -> Result<Command, Failure>
where
    I: IntoIterator,
    I::Item: Into<OsString>,
{
    let mut args = args.into_iter().map(Into::into);
    let Some(first) = args.next() else {
        return Ok(Command::Help(None));
    };
    let rest: Vec<OsString> = args.collect();
    match first.to_str() {
        Some("help") => parse_help(rest),
        Some("-h" | "--help") => Ok(Command::Help(None)),
        Some("test") => parse_test(rest),
        Some("sim") => Ok(parse_pass_through(rest).map_or(Command::Help(Some(Topic::Sim)), Command::Sim)),
        Some("run") => parse_run(rest),
        Some("bench") => parse_bench(rest),
        Some("testbed") => parse_testbed(rest),
        Some("lab") => Ok(parse_pass_through(rest).map_or(Command::Help(Some(Topic::Lab)), Command::Lab)),
        Some("fuzz") => parse_fuzz(rest),
        Some("soak") => Ok(parse_pass_through(rest).map_or(Command::Help(Some(Topic::Soak)), Command::Soak)),
        _ => Err(Failure::usage(format!(
            "unknown command `{}` (expected one of: run, test, sim, bench, testbed, lab, fuzz, soak, help)",
            first.to_string_lossy()
        ))),
    }
}

fn is_help_flag(arg: &OsStr) -> bool {
    arg == "-h" || arg == "--help"
}

fn parse_help(rest: Vec<OsString>) -> Result<Command, Failure> {
    match rest.as_slice() {
        [] => Ok(Command::Help(None)),
        [topic] => match topic.to_str() {
            Some("help") => Ok(Command::Help(None)),
            Some(name) if let Some(topic) = Topic::from_name(name) => Ok(Command::Help(Some(topic))),
            _ => Err(Failure::usage(format!(
                "no help for `{}`: not a command (expected one of: run, test, sim, bench, testbed, lab, fuzz)",
                topic.to_string_lossy()
            ))),
        },
        [_, extra, ..] => Err(Failure::usage(format!(
            "`cargo xtask help` takes at most one command, got also `{}`",
            extra.to_string_lossy()
        ))),
    }
}

fn parse_test(rest: Vec<OsString>) -> Result<Command, Failure> {
    let mut parsed = TestArgs::default();
    let mut args = rest.into_iter();
    while let Some(arg) = args.next() {
        if arg == "--" {
            parsed.extra = args.collect();
            break;
        } else if arg == "--quick" {
            parsed.quick = true;
        } else if is_help_flag(&arg) {
            return Ok(Command::Help(Some(Topic::Test)));
        } else {
            let message = format!(
                "unexpected argument `{}` for `cargo xtask test` \
                 (extra `cargo test` arguments go after `--`)",
                arg.to_string_lossy()
            );
            return Err(Failure::usage_of("test", message));
        }
    }
    Ok(Command::Test(parsed))
}

fn parse_run(rest: Vec<OsString>) -> Result<Command, Failure> {
    let mut parsed = RunArgs::default();
    let mut args = rest.into_iter();
    while let Some(arg) = args.next() {
        if arg == "--" {
            parsed.fairway = args.collect();
            break;
        } else if is_help_flag(&arg) {
            return Ok(Command::Help(Some(Topic::Run)));
        } else if arg == "--kernel" {
            parsed.kernel = true;
        } else if let Some(value) = option_value(&arg, "--queues", &mut args) {
            let value = value.ok_or_else(|| Failure::usage_of("run", "--queues needs a value"))?;
            parsed.queues = Some(positive(&value, "--queues")?);
        } else {
            let message = format!(
                "unexpected argument `{}` for `cargo xtask run` (the server's arguments go after `--`)",
                arg.to_string_lossy()
            );
            return Err(Failure::usage_of("run", message));
        }
    }
    for arg in &parsed.fairway {
        let Some(arg) = arg.to_str() else { continue };
        let name = arg.split_once('=').map_or(arg, |(name, _)| name);
        if let Some((flag, instead)) = RUN_RESERVED_FLAGS.iter().find(|(flag, _)| *flag == name) {
            return Err(Failure::usage_of("run", format!("`{flag}` is set by `cargo xtask run`: {instead}")));
        }
    }
    Ok(Command::Run(parsed))
}

fn parse_fuzz(rest: Vec<OsString>) -> Result<Command, Failure> {
    let mut parsed = FuzzArgs::default();
    let mut args = rest.into_iter();
    let number = |value: Option<String>, flag: &str| -> Result<u64, Failure> {
        let value = value.ok_or_else(|| Failure::usage_of("fuzz", format!("{flag} needs a value")))?;
        match value.parse::<u64>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(Failure::usage_of("fuzz", format!("{flag} takes a whole number of at least 1, not `{value}`"))),
        }
    };
    while let Some(arg) = args.next() {
        if is_help_flag(&arg) {
            return Ok(Command::Help(Some(Topic::Fuzz)));
        } else if let Some(value) = option_value(&arg, "--seconds", &mut args) {
            parsed.seconds = Some(number(value, "--seconds")?);
        } else if let Some(value) = option_value(&arg, "--runs", &mut args) {
            parsed.runs = Some(number(value, "--runs")?);
        } else if arg.to_string_lossy().starts_with('-') {
            return Err(Failure::usage_of("fuzz", format!("unexpected option `{}`", arg.to_string_lossy())));
        } else {
            parsed.targets.push(arg.to_string_lossy().into_owned());
        }
    }
    Ok(Command::Fuzz(parsed))
}

/// `Some(value)` when `arg` is `name` (value: the next argument) or
/// `name=value`; `Some(None)` when the value is missing; `None` when `arg`
/// is another option.
fn option_value(arg: &OsStr, name: &str, rest: &mut impl Iterator<Item = OsString>) -> Option<Option<String>> {
    let text = arg.to_str()?;
    if text == name {
        return Some(rest.next().map(|v| v.to_string_lossy().into_owned()));
    }
    text.strip_prefix(name)?.strip_prefix('=').map(|v| Some(v.to_owned()))
}

/// A whole number of at least 1.
fn positive(value: &str, flag: &str) -> Result<usize, Failure> {
    match value.parse::<usize>() {
        Ok(n) if n > 0 => Ok(n),
        _ => Err(Failure::usage_of("run", format!("{flag} takes a whole number of at least 1, not `{value}`"))),
    }
}

/// `None` means the user asked for the subcommand's help.
fn parse_pass_through(rest: Vec<OsString>) -> Option<PassThrough> {
    match rest.first() {
        Some(first) if is_help_flag(first) => None,
        _ => Some(PassThrough { args: strip_separator(rest) }),
    }
}

fn parse_bench(rest: Vec<OsString>) -> Result<Command, Failure> {
    let Some(first) = rest.first() else {
        return Ok(Command::Bench(BenchArgs { target: BenchTarget::DEFAULT, args: Vec::new() }));
    };
    if is_help_flag(first) {
        return Ok(Command::Help(Some(Topic::Bench)));
    }
    if let Some(target) = first.to_str().and_then(BenchTarget::from_name) {
        let args: Vec<OsString> = rest.into_iter().skip(1).collect();
        return match target {
            BenchTarget::Loopback | BenchTarget::Alloc | BenchTarget::Nic | BenchTarget::Http => {
                Ok(Command::Bench(BenchArgs { target, args: strip_separator(args) }))
            }
            // cargo bench gets its arguments as typed: `-- <criterion args>`.
            BenchTarget::Micro => Ok(Command::Bench(BenchArgs { target, args })),
            BenchTarget::All if args.is_empty() => Ok(Command::Bench(BenchArgs { target, args })),
            BenchTarget::All => Err(Failure::usage_of(
                "bench",
                "`cargo xtask bench all` takes no further arguments; \
                 run `bench loopback ARGS...` and `bench micro ARGS...` separately to pass some",
            )),
        };
    }
    // Options without a target go to the default target, loopback.
    if first.to_string_lossy().starts_with('-') {
        return Ok(Command::Bench(BenchArgs { target: BenchTarget::DEFAULT, args: strip_separator(rest) }));
    }
    Err(Failure::usage_of(
        "bench",
        format!(
            "unknown bench target `{}` (expected loopback, micro, alloc, nic, http or all)",
            first.to_string_lossy()
        ),
    ))
}

fn parse_testbed(rest: Vec<OsString>) -> Result<Command, Failure> {
    let Some(first) = rest.first() else {
        return Err(Failure::usage_of("testbed", "`cargo xtask testbed` needs an action: up, down or status"));
    };
    if is_help_flag(first) {
        return Ok(Command::Help(Some(Topic::Testbed)));
    }
    match first.to_str().and_then(TestbedAction::from_name) {
        Some(action) => {
            let args = strip_separator(rest.into_iter().skip(1).collect());
            Ok(Command::Testbed(TestbedArgs { action, args }))
        }
        None => Err(Failure::usage_of(
            "testbed",
            format!("unknown testbed action `{}` (expected up, down or status)", first.to_string_lossy()),
        )),
    }
}

/// Drops one leading `--`: the binary behind `cargo run ... --` would
/// otherwise see it as an argument.
fn strip_separator(mut args: Vec<OsString>) -> Vec<OsString> {
    if args.first().is_some_and(|arg| arg == "--") {
        args.remove(0);
    }
    args
}

/// The help text for the tool (`None`) or for one subcommand.
pub fn help(topic: Option<Topic>) -> &'static str {
    match topic {
        None => MAIN_HELP,
        Some(Topic::Run) => RUN_HELP,
        Some(Topic::Test) => TEST_HELP,
        Some(Topic::Sim) => SIM_HELP,
        Some(Topic::Bench) => BENCH_HELP,
        Some(Topic::Testbed) => TESTBED_HELP,
        Some(Topic::Lab) => LAB_HELP,
        Some(Topic::Fuzz) => FUZZ_HELP,
        Some(Topic::Soak) => SOAK_HELP,
    }
}

const MAIN_HELP: &str = "\
cargo xtask: set-up and orchestration for Fairway

Usage: cargo xtask <COMMAND> [ARGS...]

Commands:
  run     Serve with Fairway: over AF_XDP on the testbed as root, else on
          kernel sockets at 127.0.0.1:8080
  test    Check formatting, run clippy, run the workspace tests
  sim     Run simulated-network scenarios (fairway-sim)
  bench   Run benchmarks: loopback (default), micro, alloc, nic or http (as
          root), all
  testbed Bring the namespace testbed up or down, or show it (as root)
  lab     Run the lab experiments (fairway-lab): lab fairness
  fuzz    Run the coverage-guided fuzz targets (cargo-fuzz, nightly)
  soak    Soak the server over AF_XDP under load and link faults (as root)
  help    Show this help, or a command's: cargo xtask help <COMMAND>

Each command also takes -h/--help.

Commands install the Debian packages they need when missing (as root); when
not root they print the apt-get command to run instead.
";

pub const SOAK_HELP: &str = "\
Usage: cargo xtask soak [--minutes N] [--seed N] [--prefix P]

The server over AF_XDP on a testbed (three clients, each behind an emulated
link: 1 ms, 30 Mbit/s), as root, for N minutes (default 30):
- load from clients 1 and 2, every answer checked byte for byte:
  keep-alive, short connections, uploads (Content-Length and chunked),
  large downloads (some ranged, some reset mid-body), pipelined batches;
- faults in turn on their links: a client that vanishes mid-exchange
  (its address deleted, its sockets closed), flaps (link down 2-4 s),
  10 % loss bursts, reordering with duplication (the emulator's --control);
- /healthz every second and /metrics every 5 s from client 0, whose link
  is never faulted.
The first round of faults is the warm-up; the baseline (RSS, connections)
is taken after it. It fails on any wrong answer; any error or failed probe
outside a fault window on its client's link (or 5 s after it); RSS more
than 5 % above the baseline or connections above it once the server has
drained; a bug's counter that moved (damaged frames, an ACK of unsent
data, a 500, a panic); a server that does not stop cleanly. It prints
which, then, last:
  soak: N requests, W wrong, E errors (F explained by faults), RSS
  baseline B MiB → end A MiB
and exits 1 when a criterion failed, 2 when it could not run.

It installs the AF_XDP build's and the testbed's packages when missing,
builds fairway-linkem, then runs
  cargo run --release -p fairway-tests --features afxdp --bin fairway-soak
with every argument unchanged. Ctrl-C ends it early (failed), cleaned up.

Options (fairway-soak's):
      --minutes N  The load's length, warm-up included [default: 30]
      --seed N     Seeds the faults' durations and the load [default: 1]
      --prefix P   The testbed's prefix [default: fsoak]
  -h, --help       Show this help

Examples:
  sudo -E cargo xtask soak
  sudo -E cargo xtask soak --minutes 2
";

pub const FUZZ_HELP: &str = "\
Usage: cargo xtask fuzz [TARGET...] [--seconds N | --runs N]

Runs the libFuzzer targets in fuzz/ (cargo-fuzz on the nightly toolchain;
both installed first when missing), each on its corpus in fuzz/corpus/TARGET,
which grows with what the run finds. One line per target: executions,
coverage (cov: edges, ft: features) and corpus size. A crash stops the run;
the input is left in fuzz/artifacts/TARGET/.

Targets (all of them when none is named):
  http_head     the request-head parser and its limits
  range         Range values against file lengths
  chunked       the chunked decoder, whole against split anywhere
  http_conn     one HTTP connection: inputs split anywhere, partial
                flushes, timeouts, EOF
  assembler     reassembly bookkeeping against a bitmap model
  sent_queue    the SACK scoreboard against a plain model: transmissions,
                ACKs, SACK blocks anywhere, loss marks, sequence wrap
  config        the TOML config file and --weight values
  shard_frames  a client and a server shard, frames dropped, duplicated,
                reordered, rewritten (checksums fixed) or raw, both
                applications and the clock driven by the fuzzer

Options:
      --seconds N  Run each target for N seconds (default 60)
      --runs N     Run each target for N executions instead
  -h, --help       Show this help

Examples:
  cargo xtask fuzz --seconds 30
  cargo xtask fuzz shard_frames --runs 10000000
";

pub const TEST_HELP: &str = "\
Usage: cargo xtask test [--quick] [-- <CARGO TEST ARGS>...]

Runs these steps in order, stopping at the first failure:
1. fmt     cargo fmt --all -- --check
2. clippy  cargo clippy --workspace --all-targets --all-features -- -D warnings
3. linkem  cargo build --release -p fairway-nic --bin fairway-linkem
4. test    cargo test --workspace --all-features [<CARGO TEST ARGS>...]
5. all-off cargo test --workspace --all-features --test kernel_e2e --test
           kernel_tls --test proxy --test server_afxdp --test server_tap
           --quiet
It prints each step's wall time, and exits with the status of the step that
failed. Every feature is on, so the AF_XDP backend is built and checked;
its build needs clang and libelf, the server's end-to-end tests wrk and
Chromium, and the axum_postgres example's tests PostgreSQL (installed first
when missing, as root).
Steps 4 and 5 get FAIRWAY_LINKEM, the emulator step 3 built, for the tests
that put it between kernel clients and Fairway. The real-peer tests need
root: they build network namespaces and remove them when done.
Step 5 runs the server's end-to-end tests again with FAIRWAY_TEST_ALL_OFF=1:
every server they start has each receive-path technique it does not set
itself switched off (nothing recycled, no interrupt moderation, and no
steering where it has one queue and no upstreams), the ablation's
conventional baseline, which must change nothing a client sees.

Options:
      --quick   Leave out the heavy simulated-network tests and step 5:
          step 4 becomes
          cargo test --workspace --all-features --exclude fairway-tests [...]
  -h, --help    Show this help

Arguments after `--` are appended to the `cargo test` command line; the test
binaries' own arguments go after a second `--`.

Examples:
  cargo xtask test
  cargo xtask test --quick
  cargo xtask test -- tcp::                 only tests whose name contains tcp::
  cargo xtask test -- -- --nocapture        show the tests' output
";

const LAB_HELP: &str = "\
Usage: cargo xtask lab <EXPERIMENT> [ARGS...]

Builds and runs the lab:
  cargo run --release -p fairway-tests --bin fairway-lab -- <EXPERIMENT> ...

Every argument goes to fairway-lab unchanged (a leading `--` is dropped).
Experiments:
  fairness   N = 1..10 clients, RTTs 4-256 ms, one bottleneck (20 and
             100 Mbit/s), uploads and downloads, CUBIC and Reno senders,
             policies off / seed / equal-rate, on the simulated network.
             Prints Markdown tables and writes benches/results/fairness-sim.md,
             with PNG charts beside it (J against N; goodput over time);
             takes --seed N, --n 2,10, --bandwidth 20, --threads N, --out PATH,
             --no-plots. The charts need fonts-dejavu-core (installed as root).
  fairness --testbed
             The same on the namespace testbed (root; built with the afxdp
             feature; installs nginx and the testbed's tools when missing):
             kernel TCP clients uploading (CUBIC, BBR) and downloading
             through one emulated bottleneck, against nginx and Fairway over
             AF_XDP and on the kernel backend. Writes
             benches/results/fairness-testbed.md; takes --n, --bandwidth,
             --servers nginx,afxdp:equal-rate,kernel:off, --way up|down,
             --seconds, --warmup, --join, --fast-start MODE,
             --initial-window N (Fairway's), --out. About 30 s a cell.
  delay      How added delay slows HTTP downloads of each size, as one of
             Fairway's studies measured it (root; afxdp; installs nginx and
             the testbed's tools): kernel curl through a 100 Mbit/s emulated
             link with the delay in the round trip, from nginx and Fairway
             over AF_XDP and on kernel sockets; each try a first download and
             a repeat. By default 0-200 ms x 100 KB-10 MB, 3 tries, in well
             under 20 minutes; --full for the study's grid (0-2,000 ms x 100
             KB-300 MB, 10 tries 10 s apart: hours). Writes
             benches/results/delay-DATE.md and two PNG charts beside it;
             takes --delays 0,5, --sizes 100000, --tries N, --servers, --bound
             S, --fast-start off,careful-resume, --initial-window 10,32 and
             --socket-buffer 1,4 (MiB; Fairway over AF_XDP once per mode,
             window and buffer, rows side by side), --out, --no-plots.
  ablation   The receive-path ablation (root; builds the server with
             afxdp; needs wrk and nginx): Fairway over AF_XDP with each of
             steering, interrupt moderation and frame, buffer, handle and
             event recycling off alone, all off and all on, beside nginx and
             the kernel backend (busy polling on and off), on one server
             core; then steering with two shards (AF_XDP software steering,
             the kernel's SO_REUSEPORT listeners). Server CPU per request
             and saturated req/s, rounds alternating; writes
             benches/results/ablation-DATE.md and a PNG chart. About 27
             minutes; `lab ablation --help` for its options.

Examples:
  cargo xtask lab fairness
  cargo xtask lab fairness --n 10 --bandwidth 20
  sudo -E cargo xtask lab fairness --testbed --n 2,10 --way up
  sudo -E cargo xtask lab delay
  sudo -E cargo xtask lab delay --delays 5,50 --fast-start off,careful-resume
  sudo -E cargo xtask lab ablation
";

const SIM_HELP: &str = "\
Usage: cargo xtask sim [ARGS...]

Builds and runs the simulated-network scenario runner:
  cargo run --release -p fairway-tests --bin fairway-sim -- [ARGS...]

Every argument goes to fairway-sim unchanged (a leading `--` is dropped).
fairway-sim takes --list, --scenario NAME and --seed N; for its own help run
  cargo xtask sim -- --help

Examples:
  cargo xtask sim --list
  cargo xtask sim --scenario c100k
  cargo xtask sim --scenario NAME --seed 7
";

const BENCH_HELP: &str = "\
Usage: cargo xtask bench [loopback|micro|alloc|nic|http|all] [ARGS...]

Targets:
  loopback  (default) in-memory loopback throughput, Fairway and smoltcp
            side by side:
              cargo run --release -p fairway-benches --bin loopback -- [ARGS...]
            ARGS go to it unchanged (a leading `--` is dropped).
  micro     the criterion benchmarks: the stack's micro-benchmarks, and
            embedded_axum, an axum router on an embedded Fairway (kernel
            sockets, 127.0.0.1) under hyper's client, latency and
            throughput:
              cargo bench -p fairway-benches [ARGS...]
            ARGS go to cargo bench: a name filter, or criterion's options
            after `--`.
  alloc     heap allocations per keep-alive /plaintext request of the
            built-in server, the axum example on Fairway and the same
            router on tokio, each in one process on 127.0.0.1 (no root);
            ends with `bench: allocations per request: ...`:
              cargo run --release -p fairway-benches \\
                --bin axum_alloc -- [ARGS...]
            ARGS go to it unchanged (a leading `--` is dropped); see
            `cargo xtask bench alloc --help`.
  nic       needs root. On a namespace testbed it builds and removes: the
            packets per second one shard receives and sends over AF_XDP
            and receives over TAP, then a bulk download by curl from
            Fairway over AF_XDP beside the same from nginx:
              cargo run --release -p fairway-benches --features afxdp \\
                --bin nic -- [ARGS...]
            ARGS go to it unchanged (a leading `--` is dropped); see
            `cargo xtask bench nic --help`. Installs the AF_XDP build
            packages, the testbed's tools and nginx when missing.
  http      needs root. On a namespace testbed it builds and removes: wrk
            from a client namespace against Fairway over AF_XDP, Fairway
            on kernel sockets and nginx, and the axum example on Fairway
            against the same router on tokio, all on the same pinned
            server cores; keep-alive /plaintext at 64 and 256 connections,
            pipelined (depth 16), Connection: close, a 1 MB static file,
            and latency and server CPU time per request at a fixed rate;
            and h2load for HTTP/2, 64 connections × 32 streams, over TLS
            (case h2) and in clear text with prior knowledge (case h2c),
            against Fairway and nginx; and each server's CPU with no load
            at all (case idle).
            With --baseline PATH, another build of fairway beside this one.
            Prints req/s, p50, p99 and the ratio to each group's baseline
            (nginx, or axum on tokio), writes benches/results/http-DATE.md,
            and ends with lines such as
              bench: h2 fairway/afxdp X req/s = R × nginx (h2load, TLS, ...)
              bench: fairway/afxdp X req/s = R × nginx (keep-alive ...)
            It builds the servers, then runs the benchmark:
              cargo build --release -p fairway --features afxdp
              cargo build --release -p fairway --features afxdp \\
                --example axum_app
              cargo build --release -p fairway-benches --bin axum_tokio
              cargo run --release -p fairway-benches --bin http -- [ARGS...]
            ARGS go to it unchanged (a leading `--` is dropped): --duration
            S (10), --rounds N (1), --servers, --cases, ...; see
            `cargo xtask bench http --help`. Installs the AF_XDP build
            packages, the testbed's tools, nginx, wrk and nghttp2-client
            (h2load) when missing.
  all       loopback, then micro; takes no ARGS. Not nic or http, which
            need root and minutes: run them on their own.

Options:
  -h, --help    Show this help (only as the first argument; after a target,
                --help goes to that target)

Examples:
  cargo xtask bench
  cargo xtask bench loopback
  cargo xtask bench micro
  cargo xtask bench micro -- --save-baseline before
  cargo xtask bench alloc
  sudo -E cargo xtask bench nic --rounds 3 --skip-bulk
  sudo -E cargo xtask bench http --duration 5 --rounds 3
";

const TESTBED_HELP: &str = "\
Usage: cargo xtask testbed up|down|status [ARGS...]

Network namespaces where Fairway meets Linux peers, left up until `down`:
  PREFIX-srv  fw0 (veth, one queue per shard, no IP: Fairway over AF_XDP)
              and fwtap0 (TAP: Fairway over TAP); Fairway is 10.77.0.1/24
  PREFIX-sw   the bridge br0, and the link emulators (fairway-linkem)
  PREFIX-cI   client I: eth0 10.77.0.(10+I)/24, on br0 directly or through
              an emulated link
Needs root. Installs its Debian packages when missing, builds fairway-linkem
(cargo build --release -p fairway-nic --bin fairway-linkem) when a link is
emulated and FAIRWAY_LINKEM is not set, then runs
  cargo run --release -p fairway-tests --bin fairway-testbed -- ACTION [ARGS]
with every ARG unchanged (a leading `--` is dropped).

Actions and their main options (all: cargo xtask testbed up --help):
  up      --prefix P (fw)  --clients N (2)  --queues N (2)
          --delay D --rate R --queue B --loss P --reorder P --seed N:
            emulated links for every client, or those named by --client I
          --link I:delay=25ms,rate=100mbit,loss=1%  one client's link
          --server-link rate=20mbit,queue=250kb  one bottleneck every
            client shares, in front of the server
  down    --prefix P   ends its processes, deletes its namespaces
  status  --prefix P   namespaces, interfaces, queues, XDP, emulators

Examples:
  cargo xtask testbed up
  cargo xtask testbed up --clients 3 --queues 2 --delay 10ms --rate 100mbit
  cargo xtask testbed up --link 1:delay=50ms,loss=1%
  cargo xtask testbed up --server-link rate=20mbit --link 1:delay=128ms
  ip netns exec fw-c0 curl http://10.77.0.1/
  cargo xtask testbed down
";

const RUN_HELP: &str = "\
Usage: cargo xtask run [--kernel] [--queues N] [-- <FAIRWAY ARGS>...]

Builds the Fairway server and serves in the foreground until Ctrl-C.

As root, over AF_XDP on the namespace testbed:
1. installs the AF_XDP build packages and the testbed's tools when missing
2. cargo build --release -p fairway --features afxdp
3. brings the testbed up as `cargo xtask testbed up --queues N` does,
   dual-stack (prefix fw; an earlier fw testbed is replaced)
4. makes a self-signed certificate for 10.77.0.1 (openssl, in a temporary
   directory) and starts, in the server namespace fw-srv,
     fairway --backend afxdp --iface fw0 --ip 10.77.0.1/24 \\
       --ip fd77::1/64 --queues N --shards N \\
       --tls-cert DIR/cert.pem --tls-key DIR/key.pem [FAIRWAY ARGS...]
   (no certificate when FAIRWAY ARGS give --tls-cert)
5. waits until curl in the client namespace fw-c0 gets an answer, then
   prints the curl lines that work there, over IPv4, IPv6 and HTTPS:
     ip netns exec fw-c0 curl http://10.77.0.1/plaintext
     ip netns exec fw-c0 curl -6 'http://[fd77::1]/plaintext'
     ip netns exec fw-c0 curl --cacert DIR/cert.pem https://10.77.0.1/plaintext
6. on Ctrl-C: stops the server and takes the testbed down.

Not root, --kernel, or the AF_XDP server fails to start (no kernel support,
attach refused, ...): xtask says why in one line and serves on the kernel
backend instead, with no packages needed:
  cargo build --release -p fairway      (as root: with --features afxdp)
  fairway --backend kernel --listen 127.0.0.1:8080 [FAIRWAY ARGS...]
  curl http://127.0.0.1:8080/plaintext

Options:
      --kernel     Serve on the kernel backend even as root
      --queues N   Queues of fw0 and shards of the server [default: one per
                   core]
  -h, --help       Show this help

Arguments after `--` go to fairway after the flags above. A --shards there
replaces xtask's, a --listen moves the kernel backend; --backend, --iface,
--ip and --queues are xtask's to set. The server's own flags:
  cargo build --release -p fairway && target/release/fairway --help

Examples:
  sudo -E cargo xtask run
  sudo -E cargo xtask run --queues 1 -- --root ./www
  cargo xtask run -- --listen 0.0.0.0:8080
";

#[cfg(test)]
mod tests {
    use super::*;

    fn parse_strs(args: &[&str]) -> Result<Command, Failure> {
        parse(args.iter().copied())
    }

    fn os(args: &[&str]) -> Vec<OsString> {
        args.iter().map(OsString::from).collect()
    }

    #[test]
    fn no_arguments_shows_usage() {
        assert_eq!(parse_strs(&[]), Ok(Command::Help(None)));
    }

    #[test]
    fn help_forms() {
        assert_eq!(parse_strs(&["help"]), Ok(Command::Help(None)));
        assert_eq!(parse_strs(&["--help"]), Ok(Command::Help(None)));
        assert_eq!(parse_strs(&["-h"]), Ok(Command::Help(None)));
        assert_eq!(parse_strs(&["help", "help"]), Ok(Command::Help(None)));
        for topic in Topic::ALL {
            let expected = Ok(Command::Help(Some(topic)));
            assert_eq!(parse_strs(&["help", topic.name()]), expected);
            assert_eq!(parse_strs(&[topic.name(), "--help"]), expected);
            assert_eq!(parse_strs(&[topic.name(), "-h"]), expected);
        }
    }

    #[test]
    fn help_errors() {
        assert!(matches!(parse_strs(&["help", "nope"]), Err(Failure::Usage { .. })));
        assert!(matches!(parse_strs(&["help", "test", "sim"]), Err(Failure::Usage { .. })));
    }

    #[test]
    fn unknown_command_is_a_usage_error() {
        let err = parse_strs(&["tset"]).unwrap_err();
        assert_eq!(err.exit_code(), 2);
        assert!(err.to_string().contains("unknown command `tset`"));
        assert!(err.to_string().ends_with("Run `cargo xtask help` for usage."));
    }

    #[test]
    fn test_plain_and_quick() {
        assert_eq!(parse_strs(&["test"]), Ok(Command::Test(TestArgs::default())));
        assert_eq!(parse_strs(&["test", "--quick"]), Ok(Command::Test(TestArgs { quick: true, extra: vec![] })));
    }

    #[test]
    fn test_extra_args_after_separator_are_verbatim() {
        assert_eq!(
            parse_strs(&["test", "--quick", "--", "tcp::", "--", "--nocapture", "--help", "--quick"]),
            Ok(Command::Test(TestArgs {
                quick: true,
                extra: os(&["tcp::", "--", "--nocapture", "--help", "--quick"]),
            }))
        );
        assert_eq!(parse_strs(&["test", "--"]), Ok(Command::Test(TestArgs::default())));
    }

    #[test]
    fn test_rejects_unknown_options() {
        let err = parse_strs(&["test", "--release"]).unwrap_err();
        assert!(matches!(err, Failure::Usage { .. }));
        assert!(err.to_string().contains("after `--`"));
        assert!(err.to_string().ends_with("Run `cargo xtask help test` for usage."));
        assert!(matches!(parse_strs(&["test", "tcp::"]), Err(Failure::Usage { .. })));
    }

    #[test]
    fn sim_passes_everything_through() {
        let args = ["--scenario", "c100k", "--seed", "7", "--help"];
        let mut line = vec!["sim"];
        line.extend(args);
        assert_eq!(parse_strs(&line), Ok(Command::Sim(PassThrough { args: os(&args) })));
        assert_eq!(parse_strs(&["sim"]), Ok(Command::Sim(PassThrough::default())));
        // A leading `--` is a separator; later ones are arguments.
        assert_eq!(
            parse_strs(&["sim", "--", "--help", "--"]),
            Ok(Command::Sim(PassThrough { args: os(&["--help", "--"]) }))
        );
    }

    #[test]
    fn run_options_and_server_arguments() {
        assert_eq!(parse_strs(&["run"]), Ok(Command::Run(RunArgs::default())));
        assert_eq!(
            parse_strs(&["run", "--kernel", "--queues", "3", "--", "--root", "/srv", "--", "--help"]),
            Ok(Command::Run(RunArgs {
                kernel: true,
                queues: Some(3),
                fairway: os(&["--root", "/srv", "--", "--help"])
            }))
        );
        assert_eq!(
            parse_strs(&["run", "--queues=1"]),
            Ok(Command::Run(RunArgs { kernel: false, queues: Some(1), fairway: vec![] }))
        );
        // --help reaches fairway only after `--`.
        assert_eq!(parse_strs(&["run", "--kernel", "--help"]), Ok(Command::Help(Some(Topic::Run))));
        assert_eq!(
            parse_strs(&["run", "--", "--help"]),
            Ok(Command::Run(RunArgs { fairway: os(&["--help"]), ..RunArgs::default() }))
        );
    }

    #[test]
    fn run_rejects_what_it_does_not_know_or_sets_itself() {
        let error = |args: &[&str]| parse_strs(args).unwrap_err().to_string();
        assert!(error(&["run", "--root", "/srv"]).contains("go after `--`"));
        assert!(error(&["run", "--queues"]).contains("--queues needs a value"));
        assert!(error(&["run", "--queues", "0"]).contains("at least 1"));
        assert!(error(&["run", "--queues", "x"]).contains("not `x`"));
        assert!(error(&["run", "--", "--backend", "tap"]).contains("`--backend` is set by `cargo xtask run`"));
        assert!(error(&["run", "--", "--ip=10.0.0.1/24"]).contains("`--ip` is set"));
        assert!(error(&["run", "--", "--queues", "2"]).contains("cargo xtask run --queues N"));
        assert!(error(&["run", "--", "--iface", "eth0"]).ends_with("Run `cargo xtask help run` for usage."));
        // Flags that share a prefix with a reserved one are the server's.
        assert!(parse_strs(&["run", "--", "--ipv6"]).is_ok());
    }

    #[test]
    fn testbed_actions_pass_their_arguments_through() {
        for action in [TestbedAction::Up, TestbedAction::Down, TestbedAction::Status] {
            assert_eq!(
                parse_strs(&["testbed", action.name(), "--prefix", "x", "--help"]),
                Ok(Command::Testbed(TestbedArgs { action, args: os(&["--prefix", "x", "--help"]) }))
            );
        }
        assert_eq!(
            parse_strs(&["testbed", "up", "--", "--delay", "5ms"]),
            Ok(Command::Testbed(TestbedArgs { action: TestbedAction::Up, args: os(&["--delay", "5ms"]) }))
        );
    }

    #[test]
    fn testbed_needs_a_known_action() {
        let err = parse_strs(&["testbed"]).unwrap_err();
        assert!(err.to_string().starts_with("`cargo xtask testbed` needs an action"), "{err}");
        assert!(err.to_string().ends_with("Run `cargo xtask help testbed` for usage."), "{err}");
        let err = parse_strs(&["testbed", "upp"]).unwrap_err();
        assert!(err.to_string().contains("unknown testbed action `upp`"), "{err}");
        assert!(matches!(parse_strs(&["testbed", "--prefix", "x"]), Err(Failure::Usage { .. })));
    }

    #[test]
    fn bench_default_is_loopback() {
        let loopback = |args: &[&str]| Ok(Command::Bench(BenchArgs { target: BenchTarget::Loopback, args: os(args) }));
        assert_eq!(parse_strs(&["bench"]), loopback(&[]));
        assert_eq!(parse_strs(&["bench", "--duration", "5"]), loopback(&["--duration", "5"]));
        assert_eq!(parse_strs(&["bench", "--", "x"]), loopback(&["x"]));
        assert_eq!(parse_strs(&["bench", "loopback"]), loopback(&[]));
        assert_eq!(parse_strs(&["bench", "loopback", "--", "--help"]), loopback(&["--help"]));
        assert_eq!(parse_strs(&["bench", "loopback", "--help"]), loopback(&["--help"]));
    }

    #[test]
    fn bench_micro_keeps_cargo_bench_arguments_as_typed() {
        assert_eq!(
            parse_strs(&["bench", "micro", "--", "--save-baseline", "x"]),
            Ok(Command::Bench(BenchArgs { target: BenchTarget::Micro, args: os(&["--", "--save-baseline", "x"]) }))
        );
    }

    #[test]
    fn bench_nic_passes_its_arguments_through() {
        let nic = |args: &[&str]| Ok(Command::Bench(BenchArgs { target: BenchTarget::Nic, args: os(args) }));
        assert_eq!(parse_strs(&["bench", "nic"]), nic(&[]));
        assert_eq!(
            parse_strs(&["bench", "nic", "--rounds", "3", "--skip-bulk"]),
            nic(&["--rounds", "3", "--skip-bulk"])
        );
        assert_eq!(parse_strs(&["bench", "nic", "--", "--help"]), nic(&["--help"]));
        assert_eq!(parse_strs(&["bench", "nic", "--help"]), nic(&["--help"]));
    }

    #[test]
    fn bench_http_passes_its_arguments_through() {
        let http = |args: &[&str]| Ok(Command::Bench(BenchArgs { target: BenchTarget::Http, args: os(args) }));
        assert_eq!(parse_strs(&["bench", "http"]), http(&[]));
        assert_eq!(parse_strs(&["bench", "http", "--duration", "5"]), http(&["--duration", "5"]));
        assert_eq!(parse_strs(&["bench", "http", "--", "--help"]), http(&["--help"]));
    }

    #[test]
    fn bench_alloc_passes_its_arguments_through() {
        let alloc = |args: &[&str]| Ok(Command::Bench(BenchArgs { target: BenchTarget::Alloc, args: os(args) }));
        assert_eq!(parse_strs(&["bench", "alloc"]), alloc(&[]));
        assert_eq!(parse_strs(&["bench", "alloc", "--requests", "5"]), alloc(&["--requests", "5"]));
        assert_eq!(parse_strs(&["bench", "alloc", "--", "--help"]), alloc(&["--help"]));
    }

    #[test]
    fn bench_all_and_errors() {
        assert_eq!(
            parse_strs(&["bench", "all"]),
            Ok(Command::Bench(BenchArgs { target: BenchTarget::All, args: vec![] }))
        );
        assert!(matches!(parse_strs(&["bench", "all", "x"]), Err(Failure::Usage { .. })));
        let err = parse_strs(&["bench", "loopbak"]).unwrap_err();
        assert!(err.to_string().contains("unknown bench target `loopbak`"));
        assert!(err.to_string().contains("loopback, micro, alloc, nic, http or all"));
    }

    #[cfg(unix)]
    #[test]
    fn non_utf8_arguments_pass_through_unchanged() {
        use std::os::unix::ffi::OsStringExt;
        let odd = OsString::from_vec(vec![0x66, 0xff, 0x6f]);
        assert_eq!(parse(vec![OsString::from("sim"), odd.clone()]), Ok(Command::Sim(PassThrough { args: vec![odd] })));
    }

    #[test]
    fn fuzz_takes_targets_and_a_budget() {
        assert_eq!(parse_strs(&["fuzz"]), Ok(Command::Fuzz(FuzzArgs::default())));
        assert_eq!(
            parse_strs(&["fuzz", "range", "chunked", "--runs", "1000", "--seconds=5"]),
            Ok(Command::Fuzz(FuzzArgs {
                targets: vec!["range".into(), "chunked".into()],
                seconds: Some(5),
                runs: Some(1000)
            }))
        );
        for bad in [&["fuzz", "--runs"][..], &["fuzz", "--seconds", "0"], &["fuzz", "--fast"]] {
            assert!(matches!(parse_strs(bad), Err(Failure::Usage { .. })), "{bad:?}");
        }
    }

    #[test]
    fn every_help_fits_in_80_columns() {
        for topic in std::iter::once(None).chain(Topic::ALL.map(Some)) {
            for line in help(topic).lines() {
                assert!(line.chars().count() <= 80, "too long: {line:?}");
            }
        }
    }
}
