//! `cargo xtask bench http`: wrk from a client namespace against Fairway
//! over AF_XDP, Fairway on kernel sockets and nginx, and against the axum
//! example on Fairway (both backends) and the same router on tokio, each
//! on the same server cores, on a namespace testbed this program builds
//! and removes; h2load for HTTP/2 (over TLS and in clear text) against
//! Fairway and nginx; with `--baseline`, another build of Fairway beside
//! this one. Needs root. Prints tables (req/s, p50, p99, the ratio to each
//! group's baseline, and the server's CPU time per request at a fixed
//! open-loop rate), writes them as Markdown to
//! benches/results/http-DATE.md, and ends with `bench: fairway/afxdp X
//! req/s = R × nginx (keep-alive plaintext, 256 connections)`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::Ordering;
use std::time::Duration;

use clap::error::ErrorKind;
use clap::{ArgAction, CommandFactory, Parser};
use fairway::runtime::signals::stop_on_signals;
use fairway_benches::cli::{at_least_one, seconds, testbed_prefix};
use fairway_benches::http::measure::{Bench, Outcome, Stop};
use fairway_benches::http::openloop;
use fairway_benches::http::plan::{
    Case, Cores, Generator, Group, H2_STREAMS, NGINX_H2C_PORT, Programs, SERVER_IP, Subject, UpstreamAt, cpu_list,
    select,
};
use fairway_benches::http::report::{Report, Row, Summary, result_path, today};
use fairway_benches::http::site::RunFiles;
use fairway_tests::testbed::{self, Testbed, TestbedConfig};

/// What `--help` says before the options.
const LONG_ABOUT: &str = "\
wrk against Fairway over AF_XDP and on kernel sockets, nginx, and the axum
example on Fairway and on tokio; h2load for HTTP/2 against Fairway and
nginx; with --baseline, another build of Fairway beside this one. The
servers and cases are described below the options.

Needs root, wrk, h2load (for h2 and h2c), nginx and curl. Builds a namespace
testbed (prefix --prefix, default fwhttp; one client; one fw0 queue per server
core), measures, and removes it (also on Ctrl-C). wrk and h2load run in the
client namespace.";

/// What `--help` says after the options: the servers, the cases and what
/// the open-loop generator measures.
const AFTER_LONG_HELP: &str = "\
Servers, each in the server namespace, pinned with taskset to the same
server cores (one shard, worker or thread per core); wrk pinned to the
other cores. The built-in server and nginx, ratios to nginx:
  afxdp            fairway --backend afxdp --iface fw0 --ip 10.77.0.1/24,
                   port 80
  kernel           fairway --backend kernel --listen 10.77.0.1:8080, with
                   10.77.0.1/24 on fw0 as the kernel's address
  nginx            nginx, the same way, port 80: /plaintext by `return 200`
  nginx-gso        nginx as deployed on a veth: tx checksum, TSO and GSO
                   on fw0 for its run (off for every other server, so no
                   frame exceeds the MTU), its segments up to 64 KB
  afxdp6           afxdp with --ip fd77::1/64 too, wrk coming over IPv6
                   to http://[fd77::1]/ (the client gets fd77::a/64)
  baseline-afxdp   afxdp from the --baseline build of fairway (the server
                   before a change, beside it after)
  baseline-kernel  kernel from that build, on 10.77.0.1:8083
Each serves the same 1 MB file from a site in /dev/shm (fairway: --root).
HTTPS (TLS 1.3, one ECDSA P-256 certificate for all), ratios to tls-nginx:
  tls-afxdp        afxdp with --tls-only, port 443 (rustls)
  tls-kernel       kernel with --tls-only, 10.77.0.1:8443
  tls-nginx        nginx (OpenSSL), port 443 (listen ... ssl http2);
                   `close` is a full TLS handshake per request (wrk
                   resumes no session)
Reverse proxies in front of one upstream (fairway --backend kernel
--listen 127.0.0.1:9080 --root SITE in the server's namespace, on the
server's cores), ratios to proxy-nginx:
  proxy-afxdp      afxdp with --upstream app=http://127.0.0.1:9080, port 80
  proxy-kernel     kernel with that --upstream, 10.77.0.1:8084
  proxy-nginx      nginx, proxy_pass to a keep-alive upstream pool,
                   10.77.0.1:8090
With --nic-upstream the upstream runs in the client's namespace instead,
at 10.77.0.10:9080 (still on the server's cores): proxy-afxdp reaches it
through its own stack, the others through fw0 (with tcp_tw_reuse=1 in the
server's namespace, as for Fairway's stack).
The axum example (server/examples/axum_app.rs), ratios to axum-tokio:
  axum-afxdp       the example with afxdp's flags (no --root), port 80
  axum-kernel      the example on kernel sockets, 10.77.0.1:8081
  axum-tokio       the same router by axum::serve on tokio's multi-thread
                   runtime, one worker thread per server core (axum_tokio,
                   beside this program), 10.77.0.1:8082
By default all of them but baseline-*, which join with --baseline.

Cases (wrk --latency, one run each per round):
  keepalive-64    keep-alive GET /plaintext, 64 connections
  keepalive-256   the same, 256 connections
  pipelined       /plaintext pipelined 16 deep (a wrk Lua script), 256
                  connections; not for the axum servers
  close           /plaintext with `Connection: close`, 64 connections
  static          the 1 MB static file, keep-alive, 64 connections; not
                  for the axum servers (they serve no files)

HTTP/2 cases (h2load -c 64 -m 32 -D S, threads as wrk's, after an h2load
warm-up of --warm-up S of their own; req/s and failures, no latency
percentiles, which h2load does not report):
  h2              GET /plaintext over TLS, h2 by ALPN, 64 connections of
                  32 concurrent streams; for tls-afxdp, tls-kernel and
                  tls-nginx
  h2c             the same in clear text, HTTP/2 with prior knowledge;
                  for afxdp and kernel on their plain ports, and nginx on
                  a listener of its own, 10.77.0.1:8085 (listen ... http2:
                  HTTP/2 only, so not port 80)

After every server's wrk cases, at half the keep-alive-256 rate of its
group's baseline (nginx, or axum-tokio; the median of this run's rounds),
the open-loop generator (`http openloop`, this program, in the client
namespace; `http openloop --help`):
  latency-half    keep-alive GET /plaintext, 256 connections, requests due
                  at a constant rate, latency counted from when each was
                  due; p50, p99, p99 against the baseline's (lower is
                  better), and the server's CPU time per request (utime +
                  stime of its processes from /proc over the window)

Last, with no load at all, after a second's rest from the last case:
  idle            the server's CPU time over --duration as a share of one
                  core (what an idle shard costs: it must not poll); for
                  afxdp, kernel, nginx and the three axum servers";

// The option docs are verbatim, as clap here does not wrap help text: each
// first line is a phrase for `-h`, the rest is for `--help`, which indents
// them by 10 columns, so they are at most 70.
/// wrk against Fairway, nginx and the axum example on a namespace testbed.
#[derive(Parser, Debug)]
#[command(name = "http", long_about = LONG_ABOUT, after_long_help = AFTER_LONG_HELP)]
// As the hand-written parser did: a repeated option takes its last value,
// and `-1` is a value (which the option then refuses), not an unknown flag.
#[command(args_override_self = true, allow_negative_numbers = true)]
struct Cli {
    /// Each wrk run, in seconds, at least 1
    ///
    /// A second is wrk's resolution.
    #[arg(long, value_name = "S", default_value = "10", value_parser = wrk_duration, verbatim_doc_comment)]
    duration: Duration,
    /// Rounds of every server and case; medians
    #[arg(long, value_name = "N", default_value_t = 1, value_parser = at_least_one::<usize>, verbatim_doc_comment)]
    rounds: usize,
    /// wrk against each server before its cases
    ///
    /// In seconds, as --duration.
    #[arg(long, value_name = "S", default_value = "1", value_parser = seconds, verbatim_doc_comment)]
    warm_up: Duration,
    /// Which servers run, comma-separated
    ///
    /// Some of the servers below. By default all of them but baseline-*,
    /// which join with --baseline.
    // `std::vec::Vec`, not `Vec`, which clap would take for a repeated
    // option: this is one value, the list `select` makes of it.
    #[arg(long, value_name = "LIST", value_parser = servers, verbatim_doc_comment)]
    servers: Option<std::vec::Vec<Subject>>,
    /// Which cases run, comma-separated (default: all)
    ///
    /// Some of the cases below.
    #[arg(long, value_name = "LIST", value_parser = cases, verbatim_doc_comment)]
    cases: Option<std::vec::Vec<Case>>,
    /// Cores for the server (default: half)
    ///
    /// wrk gets the rest.
    #[arg(long, value_name = "N", value_parser = at_least_one::<usize>, verbatim_doc_comment)]
    server_cores: Option<usize>,
    /// The server binary
    ///
    /// By default $FAIRWAY_BIN, else `fairway` beside this program.
    #[arg(long, value_name = "PATH", verbatim_doc_comment)]
    fairway: Option<PathBuf>,
    /// Another build's fairway binary, for baseline-*
    ///
    /// For baseline-afxdp and baseline-kernel, which do not run without it.
    #[arg(long, value_name = "PATH", verbatim_doc_comment)]
    baseline: Option<PathBuf>,
    /// The axum example
    ///
    /// By default examples/axum_app in the fairway binary's directory.
    #[arg(long, value_name = "PATH", verbatim_doc_comment)]
    axum: Option<PathBuf>,
    /// Where the Markdown goes (default: benches/results)
    // The default is hidden, as it names the directory of this checkout.
    #[arg(long, value_name = "DIR", verbatim_doc_comment)]
    #[arg(default_value_os_t = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results"), hide_default_value = true)]
    out: PathBuf,
    /// The testbed's prefix
    #[arg(long, value_name = "P", default_value = "fwhttp", value_parser = testbed_prefix, verbatim_doc_comment)]
    prefix: String,
    /// The MTU of every link
    ///
    /// 9000 for jumbo frames, which Fairway over AF_XDP takes in several
    /// UMEM frames.
    #[arg(long, value_name = "N", default_value_t = testbed::MTU, value_parser = testbed::parse_mtu)]
    #[arg(verbatim_doc_comment)]
    mtu: u32,
    /// The proxies' upstream in the client's namespace
    ///
    /// At 10.77.0.10:9080 (still on the server's cores) instead of the
    /// server namespace's loopback: Fairway over AF_XDP then reaches it
    /// through its own stack, the kernel proxies and nginx through fw0.
    #[arg(long, verbatim_doc_comment)]
    nic_upstream: bool,
    /// Receive processing on the sending core (no RPS)
    ///
    /// Leaves the kernel's receive processing where it runs by default: in
    /// the softirq of the core that sent the frame, so the server's core
    /// bridges its frames and runs wrk's TCP receive path (and nginx's
    /// ACK-clocked sends run on wrk's core). By default RPS steers it to
    /// each side's own cores, as on two machines.
    #[arg(long = "no-rx-steering", action = ArgAction::SetFalse, verbatim_doc_comment)]
    rx_steering: bool,
}

/// `--duration`: wrk runs for whole seconds.
fn wrk_duration(s: &str) -> Result<Duration, String> {
    match seconds(s)? {
        d if d < Duration::from_secs(1) => Err("must be at least 1 second (wrk's resolution)".to_owned()),
        d => Ok(d),
    }
}

/// `--servers`: some of `Subject::ALL` by key, in its order.
fn servers(list: &str) -> Result<Vec<Subject>, String> {
    select(list, &Subject::ALL, Subject::key)
}

/// `--cases`: some of `Case::ALL` by key, in its order.
fn cases(list: &str) -> Result<Vec<Case>, String> {
    select(list, &Case::ALL, Case::key)
}

impl Cli {
    /// The arguments, once what clap cannot check holds: a server of the
    /// baseline build needs --baseline, and the default servers include
    /// them only when it is given.
    fn check(self) -> Result<Args, clap::Error> {
        let servers = match self.servers {
            Some(list) => {
                if self.baseline.is_none()
                    && let Some(server) = list.iter().find(|s| s.is_baseline_build())
                {
                    let why = format!("--servers {}: needs --baseline PATH (another build's fairway)", server.key());
                    return Err(Cli::command().error(ErrorKind::MissingRequiredArgument, why));
                }
                list
            }
            None => default_servers(self.baseline.is_some()),
        };
        Ok(Args {
            duration: self.duration,
            rounds: self.rounds,
            warm_up: self.warm_up,
            servers,
            cases: self.cases.unwrap_or_else(|| Case::ALL.to_vec()),
            server_cores: self.server_cores,
            fairway: self.fairway,
            baseline: self.baseline,
            axum: self.axum,
            out: self.out,
            prefix: self.prefix,
            rx_steering: self.rx_steering,
            mtu: self.mtu,
            upstream: if self.nic_upstream { UpstreamAt::BeyondNic } else { UpstreamAt::Loopback },
        })
    }
}

/// The command line, as the measurements take it.
#[derive(Clone, Debug, PartialEq)]
struct Args {
    duration: Duration,
    rounds: usize,
    warm_up: Duration,
    servers: Vec<Subject>,
    cases: Vec<Case>,
    server_cores: Option<usize>,
    fairway: Option<PathBuf>,
    baseline: Option<PathBuf>,
    axum: Option<PathBuf>,
    out: PathBuf,
    prefix: String,
    rx_steering: bool,
    mtu: u32,
    upstream: UpstreamAt,
}

/// The servers that run without `--servers`: every one but those of the
/// baseline build, unless there is one.
fn default_servers(baseline: bool) -> Vec<Subject> {
    Subject::ALL.into_iter().filter(|s| baseline || !s.is_baseline_build()).collect()
}

/// The server binary: `--fairway`, else `$FAIRWAY_BIN`, else `fairway`
/// beside this program (cargo builds both into the same directory).
fn fairway_binary(args: &Args) -> Option<PathBuf> {
    args.fairway
        .clone()
        .or_else(|| std::env::var_os("FAIRWAY_BIN").filter(|v| !v.is_empty()).map(PathBuf::from))
        .or_else(|| Some(std::env::current_exe().ok()?.parent()?.join("fairway")))
}

/// The axum example: `--axum`, else `examples/axum_app` in the `fairway`
/// binary's directory (where `cargo build --example` puts it).
fn axum_binary(args: &Args, fairway: &Path) -> PathBuf {
    args.axum.clone().unwrap_or_else(|| fairway.parent().unwrap_or(Path::new("")).join("examples").join("axum_app"))
}

/// `name` beside this program (cargo builds the crate's binaries into the
/// same directory).
fn beside_this_program(name: &str) -> Option<PathBuf> {
    Some(std::env::current_exe().ok()?.parent()?.join(name))
}

/// Every binary the servers run.
fn programs(args: &Args) -> Result<Programs, String> {
    let fairway = fairway_binary(args).ok_or("cannot tell where the fairway binary is: --fairway")?;
    let axum_tokio = beside_this_program("axum_tokio").ok_or("cannot tell where this program is, for axum_tokio")?;
    Ok(Programs { axum: axum_binary(args, &fairway), fairway, baseline: args.baseline.clone(), axum_tokio })
}

/// How to get the binary `server` runs, when it is missing.
fn build_hint(server: Subject) -> &'static str {
    match server {
        Subject::FairwayAfxdp
        | Subject::FairwayAfxdp6
        | Subject::FairwayKernel
        | Subject::TlsAfxdp
        | Subject::TlsKernel
        | Subject::ProxyAfxdp
        | Subject::ProxyKernel => "cargo build --release -p fairway --features afxdp, or --fairway PATH",
        Subject::BaselineAfxdp | Subject::BaselineKernel => "--baseline PATH: another build's fairway binary",
        Subject::AxumAfxdp | Subject::AxumKernel => {
            "cargo build --release -p fairway --features afxdp --example axum_app, or --axum PATH"
        }
        Subject::AxumTokio => "cargo build --release -p fairway-benches --bin axum_tokio",
        Subject::Nginx | Subject::NginxGso | Subject::TlsNginx | Subject::ProxyNginx => "apt-get install nginx",
    }
}

/// Whether `program ARG` runs (for wrk, `-v` exits 1 after printing its
/// version, so only starting counts).
fn can_run(program: &str, arg: &str) -> bool {
    Command::new(program).arg(arg).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1).peekable();
    if argv.peek().is_some_and(|a| a == "openloop") {
        return openloop::main("http", argv.skip(1));
    }
    // A bad command line exits with status 2, -h and --help with 0.
    let args = Cli::parse().check().unwrap_or_else(|e| e.exit());
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(Failure::Interrupted) => {
            eprintln!("http: interrupted; the testbed is removed");
            ExitCode::from(130)
        }
        Err(Failure::Failed(e)) => {
            eprintln!("http: {e}");
            ExitCode::FAILURE
        }
    }
}

enum Failure {
    Interrupted,
    Failed(String),
}

fn run(args: &Args) -> Result<(), Failure> {
    let failed = |e: String| Failure::Failed(e);
    if !testbed::is_root() {
        return Err(failed(
            "needs root (network namespaces, AF_XDP): run it as root, e.g. sudo -E cargo xtask bench http".into(),
        ));
    }
    for (program, arg, package) in
        [("wrk", "-v", "wrk"), ("curl", "--version", "curl"), ("taskset", "-V", "util-linux")]
    {
        if !can_run(program, arg) {
            return Err(failed(format!("{program} not found: install the Debian package {package}")));
        }
    }
    if runs_h2load(args) && !can_run("h2load", "--version") {
        return Err(failed(
            "h2load not found: install the Debian package nghttp2-client (cargo xtask bench http does)".into(),
        ));
    }
    if args.servers.iter().any(|s| s.is_nginx()) && !can_run("nginx", "-v") {
        return Err(failed("nginx not found: install the Debian package nginx (cargo xtask bench http does)".into()));
    }
    let programs = programs(args).map_err(failed)?;
    for &server in args.servers.iter().filter(|&&s| !s.is_nginx()) {
        match programs.of(server) {
            Some(program) if program.is_file() => {}
            Some(program) => {
                return Err(failed(format!("{server}: no binary at {} ({})", program.display(), build_hint(server))));
            }
            None => return Err(failed(format!("{server}: {}", build_hint(server)))),
        }
    }
    let openloop_program = std::env::current_exe()
        .map_err(|e| failed(format!("cannot tell where this program is, for `http openloop`: {e}")))?;
    let total = std::thread::available_parallelism().map_or(1, usize::from);
    let cores = Cores::split(total, args.server_cores).map_err(failed)?;
    let interrupted = stop_on_signals().map_err(|e| failed(format!("cannot handle signals: {e}")))?;
    let files =
        RunFiles::create(cores.server.len(), args.upstream).map_err(|e| failed(format!("writing the site: {e}")))?;
    // The kernel's receive processing on each side's own cores, as on two
    // machines (see TestbedConfig::rx_cpus), unless --no-rx-steering.
    let mut config = TestbedConfig::new(args.prefix.clone())
        .clients(1)
        .queues(cores.server.len())
        .mtu(args.mtu)
        .ipv6(args.servers.iter().any(|s| s.is_ipv6()));
    if args.rx_steering {
        config = config.rx_cpus(&cores.server, &cores.client);
    }
    let tb = Testbed::up(config).map_err(|e| failed(format!("testbed up: {e}")))?;
    if args.upstream == UpstreamAt::BeyondNic {
        // The kernel proxies' upstream connections leave TIME-WAIT behind
        // faster than its ports free up; reusing them (as Fairway's stack
        // does) is what a deployment would set, and it is off by default
        // beyond the loopback. The namespace is the testbed's own.
        let line = ["sysctl", "-q", "-w", "net.ipv4.tcp_tw_reuse=1"];
        match testbed::exec(&tb.server_ns(), &line) {
            Ok(out) if out.success() => {}
            Ok(out) => return Err(failed(format!("sysctl tcp_tw_reuse: {}", out.stderr_text()))),
            Err(e) => return Err(failed(format!("sysctl tcp_tw_reuse: {e}"))),
        }
    }
    let bench = Bench {
        tb: &tb,
        cores: cores.clone(),
        programs: &programs,
        openloop: &openloop_program,
        files: &files,
        duration: args.duration,
        warm_up: args.warm_up,
        interrupted: &interrupted,
        upstream: args.upstream,
    };
    let measured = measure(args, &bench);
    if let Err(e) = tb.down() {
        eprintln!("http: testbed down: {e}");
    }
    let report = measured?;

    let setup = setup_lines(args, &cores, total, &programs);
    println!();
    for line in &setup {
        println!("{line}");
    }
    println!();
    print!("{}", report.text_table());
    let date = today();
    let path = result_path(&args.out, &date, |p| p.exists());
    let written =
        std::fs::create_dir_all(&args.out).and_then(|()| std::fs::write(&path, report.markdown(&date, &setup)));
    match written {
        Ok(()) => println!("\nwritten to {}", path.display()),
        Err(e) => eprintln!("http: writing {}: {e}", path.display()),
    }
    for line in report.closing_lines() {
        println!("{line}");
    }
    let all_ran = report.rows.iter().all(|r| r.outcome.is_ok());
    if all_ran { Ok(()) } else { Err(failed("some cases have no figure (see the table)".into())) }
}

/// Whether some server of the run runs an h2load case.
fn runs_h2load(args: &Args) -> bool {
    let mut h2load = args.cases.iter().filter(|c| c.generator() == Generator::H2load);
    h2load.any(|&c| args.servers.iter().any(|s| s.runs(c)))
}

/// Every round: each server, its wrk and h2load cases; then, at half the
/// median keep-alive-256 rate of each group's baseline, every round of
/// each server's open-loop cases; then the medians.
fn measure(args: &Args, bench: &Bench<'_>) -> Result<Report, Failure> {
    let (open_loop, closed_loop): (Vec<Case>, Vec<Case>) = args.cases.iter().partition(|c| c.is_open_loop());
    let mut runs: Vec<(Subject, Case, Vec<Outcome>)> = Vec::new();
    measure_cases(args, bench, &closed_loop, &|_| Err(String::new()), &mut runs)?;
    let (built_in, axum) = (latency_rate(&runs, Group::BuiltIn), latency_rate(&runs, Group::Axum));
    let rate_of = |group| match group {
        Group::BuiltIn => built_in.clone(),
        Group::Axum => axum.clone(),
        Group::Tls => Err("the open-loop generator speaks plain HTTP only".to_owned()),
        Group::Proxy => Err("the proxies' CPU per request comes from their wrk cases".to_owned()),
    };
    measure_cases(args, bench, &open_loop, &rate_of, &mut runs)?;
    let mut report = summarise(runs);
    report.mtu = args.mtu;
    report.upstream = args.upstream;
    report.latency_rate = built_in.ok();
    report.axum_latency_rate = axum.ok();
    Ok(report)
}

/// Every round of `cases` on every server they apply to, into `runs`.
/// Open-loop cases run at the rate `rate_of` the server's group, or fail
/// with why there is none (without starting the server).
fn measure_cases(
    args: &Args,
    bench: &Bench<'_>,
    cases: &[Case],
    rate_of: &dyn Fn(Group) -> Result<f64, String>,
    runs: &mut Vec<(Subject, Case, Vec<Outcome>)>,
) -> Result<(), Failure> {
    for round in 1..=args.rounds {
        for &server in &args.servers {
            // A case that does not apply to a server has no row.
            let cases: Vec<Case> = cases.iter().copied().filter(|&c| server.runs(c)).collect();
            if cases.is_empty() {
                continue;
            }
            if bench.interrupted.load(Ordering::Relaxed) {
                return Err(Failure::Interrupted);
            }
            let rate = rate_of(server.group());
            let outcomes = match &rate {
                Err(why) if cases.iter().all(|c| c.is_open_loop()) => {
                    cases.iter().map(|&c| (c, Err(why.clone()))).collect()
                }
                _ => {
                    eprintln!("http: round {round}/{}: {server}", args.rounds);
                    bench.server(server, &cases, rate.clone()).map_err(|Stop::Interrupted| Failure::Interrupted)?
                }
            };
            for (case, outcome) in outcomes {
                let what = case.describe_for(server.group());
                match &outcome {
                    Ok(r) if r.idle_share.is_some() => {
                        eprintln!("http:   {what}: {:.2} % of one core", r.idle_share.unwrap_or(0.0) * 100.0);
                    }
                    Ok(r) => eprintln!(
                        "http:   {what}: {:.0} req/s, {} errors ({} of them wrk's timeouts)",
                        r.requests_per_second,
                        r.errors(),
                        r.timeouts
                    ),
                    Err(why) => eprintln!("http:   {what}: failed: {why}"),
                }
                match runs.iter_mut().find(|(s, c, _)| *s == server && *c == case) {
                    Some((_, _, list)) => list.push(outcome),
                    None => runs.push((server, case, vec![outcome])),
                }
            }
        }
    }
    Ok(())
}

/// Half the median of the keep-alive-256 rounds of `group`'s baseline
/// (nginx, or axum/tokio), or why there is none.
fn latency_rate(runs: &[(Subject, Case, Vec<Outcome>)], group: Group) -> Result<f64, String> {
    let baseline = group.baseline();
    let rounds = runs.iter().find(|(s, c, _)| *s == baseline && *c == Case::KeepAlive256);
    let figures: Vec<f64> = rounds
        .map(|(_, _, o)| o.iter().filter_map(|o| Some(o.as_ref().ok()?.requests_per_second)).collect())
        .unwrap_or_default();
    if figures.is_empty() {
        return Err(format!(
            "needs {baseline}'s keep-alive-256 figure from the same run (--servers with {}, --cases with \
             keepalive-256)",
            baseline.key()
        ));
    }
    Ok(0.5 * fairway_benches::stats::median(figures))
}

/// A row per server and case: the medians of the rounds that ran, or the
/// last reason none did.
fn summarise(runs: Vec<(Subject, Case, Vec<Outcome>)>) -> Report {
    let rows = runs
        .into_iter()
        .map(|(server, case, outcomes)| {
            let ok: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().ok().cloned()).collect();
            let why = outcomes.iter().rev().find_map(|o| o.as_ref().err().cloned()).unwrap_or_default();
            Row { server, case, outcome: Summary::of(&ok).ok_or(why) }
        })
        .collect();
    Report { rows, latency_rate: None, axum_latency_rate: None, mtu: testbed::MTU, upstream: UpstreamAt::Loopback }
}

/// `path` as the committed report names it: relative to the repository,
/// or only by its last components when it is elsewhere (a report names no
/// path of the machine it ran on).
fn shown(path: &Path) -> String {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap_or(Path::new("/"));
    let path = path.canonicalize().unwrap_or_else(|_| path.to_owned());
    let repo = repo.canonicalize().unwrap_or_else(|_| repo.to_owned());
    if let Ok(inside) = path.strip_prefix(&repo) {
        return inside.display().to_string();
    }
    let tail: Vec<_> = path.components().rev().take(2).collect();
    let tail: PathBuf = tail.into_iter().rev().collect();
    format!("…/{} (outside the repository)", tail.display())
}

/// What the table was measured on.
fn setup_lines(args: &Args, cores: &Cores, total: usize, programs: &Programs) -> Vec<String> {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    let ran = |pick: fn(Subject) -> bool| args.servers.iter().any(|&s| pick(s));
    let mut lines = vec![
        format!(
            "cores: {total}; every server on {} ({} shards, workers or threads), wrk on {} ({} threads)",
            cpu_list(&cores.server),
            cores.server.len(),
            cpu_list(&cores.client),
            cores.client.len()
        ),
        format!(
            "wrk {} s per case, {} round(s), medians; {} s warm-up per server",
            args.duration.as_secs(),
            args.rounds,
            args.warm_up.as_secs_f64()
        ),
        format!(
            "testbed {}: veth fw0 in {}-srv, wrk in {}-c0, MTU {} on every link; kernel {}",
            args.prefix,
            args.prefix,
            args.prefix,
            args.mtu,
            kernel.trim()
        ),
        format!(
            "offloads: tso, gso and gro off on every veth (ethtool -K), so every server's frames are \
             MTU-sized on the wire; transmit checksum offload (tx) on fw0 and the switch's ports toward the \
             clients only, so a server may leave its checksums to the interface (nginx does; Fairway through \
             AF_XDP transmit metadata) and the clients' kernels take them unverified; receive processing \
             (RPS): {}",
            if args.rx_steering {
                format!(
                    "in the server's namespace on {}, in the switch's and wrk's on {}",
                    cpu_list(&cores.server),
                    cpu_list(&cores.client)
                )
            } else {
                "the kernel's default (the sending core's softirq), --no-rx-steering".to_owned()
            }
        ),
        format!("fairway: {}", shown(&programs.fairway)),
    ];
    if let Some(baseline) = programs.baseline.as_ref().filter(|_| ran(Subject::is_baseline_build)) {
        lines.push(format!("baseline (baseline/*): {}", shown(baseline)));
    }
    if ran(|s| s.group() == Group::Axum) {
        lines.push(format!(
            "axum example (axum/afxdp, axum/kernel): {}; axum/tokio: {}",
            shown(&programs.axum),
            shown(&programs.axum_tokio)
        ));
        lines.push(
            "ratios (× columns) within each group: fairway/*, baseline/* and nginx to nginx; axum/* to axum/tokio \
             (the same router on tokio)"
                .to_owned(),
        );
    }
    if runs_h2load(args) {
        lines.push(format!(
            "h2load (HTTP/2 cases): {} s per case after an h2load warm-up of {} s, -m {H2_STREAMS} streams per \
             connection, threads as wrk's; nginx: HTTP/2 by ALPN on its HTTPS port (listen ... ssl http2), cleartext \
             HTTP/2 with prior knowledge on {SERVER_IP}:{NGINX_H2C_PORT} (listen ... http2); h2load gives no \
             latency percentiles; server CPU per request over each run, as around wrk",
            args.duration.as_secs(),
            args.warm_up.as_secs_f64(),
        ));
    }
    if args.cases.contains(&Case::LatencyHalf) {
        lines.push(
            "server CPU per request (latency tables): utime + stime of the server's process and its children \
             (nginx: master and workers) from /proc/PID/stat, from just before the open-loop window to just \
             after its last answer, over the requests answered; 10 ms clock ticks"
                .to_owned(),
        );
    }
    lines
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairway_benches::cli::{checked_help, refusal, shows_help};
    use fairway_benches::http::wrk::WrkResult;

    /// `http ARGS` as `main` reads it.
    fn parse_strs(args: &[&str]) -> Result<Args, clap::Error> {
        Cli::try_parse_from(std::iter::once("http").chain(args.iter().copied()))?.check()
    }

    #[test]
    fn reports_name_paths_relative_to_the_repository() {
        let repo = Path::new(env!("CARGO_MANIFEST_DIR")).parent().unwrap();
        assert_eq!(shown(&repo.join("target/release/fairway")), "target/release/fairway");
        assert_eq!(shown(Path::new("/elsewhere/build/release/fairway")), "…/release/fairway (outside the repository)");
    }

    #[test]
    fn defaults() {
        let a = parse_strs(&[]).unwrap();
        // What `Args::default()` was before clap held the defaults.
        assert_eq!(
            a,
            Args {
                duration: Duration::from_secs(10),
                rounds: 1,
                warm_up: Duration::from_secs(1),
                servers: default_servers(false),
                cases: Case::ALL.to_vec(),
                server_cores: None,
                fairway: None,
                baseline: None,
                axum: None,
                out: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results"),
                prefix: "fwhttp".to_owned(),
                rx_steering: true,
                mtu: testbed::MTU,
                upstream: UpstreamAt::Loopback,
            }
        );
        assert_eq!((a.duration, a.rounds, a.warm_up), (Duration::from_secs(10), 1, Duration::from_secs(1)));
        // Every server but the baseline build's, which needs --baseline;
        // Fairway over IPv6 among them, and the HTTPS ones.
        assert_eq!(
            a.servers,
            [
                Subject::FairwayAfxdp,
                Subject::FairwayKernel,
                Subject::Nginx,
                Subject::NginxGso,
                Subject::FairwayAfxdp6,
                Subject::AxumAfxdp,
                Subject::AxumKernel,
                Subject::AxumTokio,
                Subject::TlsAfxdp,
                Subject::TlsKernel,
                Subject::TlsNginx,
                Subject::ProxyAfxdp,
                Subject::ProxyKernel,
                Subject::ProxyNginx
            ]
        );
        assert_eq!(a.cases, Case::ALL);
        assert!(a.out.ends_with("benches/results"), "{:?}", a.out);
        assert_eq!(a.prefix, "fwhttp");
    }

    #[test]
    fn every_option() {
        let a = parse_strs(&[
            "--duration",
            "3",
            "--rounds",
            "2",
            "--warm-up",
            "0",
            "--servers",
            "nginx,afxdp",
            "--cases",
            "close,keepalive-256",
            "--server-cores",
            "1",
            "--fairway",
            "/x/fairway",
            "--baseline",
            "/old/fairway",
            "--axum",
            "/x/axum_app",
            "--out",
            "/tmp/r",
            "--prefix",
            "hb",
            "--no-rx-steering",
            "--mtu",
            "9000",
            "--nic-upstream",
        ])
        .unwrap();
        assert_eq!(
            a,
            Args {
                duration: Duration::from_secs(3),
                rounds: 2,
                warm_up: Duration::ZERO,
                servers: vec![Subject::FairwayAfxdp, Subject::Nginx],
                cases: vec![Case::KeepAlive256, Case::Close],
                server_cores: Some(1),
                fairway: Some("/x/fairway".into()),
                baseline: Some("/old/fairway".into()),
                axum: Some("/x/axum_app".into()),
                out: "/tmp/r".into(),
                prefix: "hb".into(),
                rx_steering: false,
                mtu: 9000,
                upstream: UpstreamAt::BeyondNic,
            }
        );
        assert_eq!(fairway_binary(&a), Some(PathBuf::from("/x/fairway")));
        let programs = programs(&a).unwrap();
        assert_eq!(programs.of(Subject::BaselineKernel), Some(Path::new("/old/fairway")));
        assert_eq!(programs.of(Subject::AxumKernel), Some(Path::new("/x/axum_app")));
        assert!(programs.axum_tokio.ends_with("axum_tokio"), "{programs:?}");
    }

    #[test]
    fn h2load_is_needed_only_when_a_server_runs_an_http2_case() {
        let run = |args: &[&str]| runs_h2load(&parse_strs(args).unwrap());
        assert!(run(&[]));
        assert_eq!(parse_strs(&["--cases", "h2c,h2"]).unwrap().cases, [Case::H2, Case::H2c]);
        assert!(run(&["--servers", "nginx", "--cases", "h2c"]));
        assert!(run(&["--servers", "tls-kernel", "--cases", "h2,close"]));
        assert!(!run(&["--cases", "keepalive-64,latency-half"]));
        // Cases no server of the run applies to.
        assert!(!run(&["--servers", "afxdp,nginx", "--cases", "h2"]));
        assert!(!run(&["--servers", "axum-afxdp,tls-nginx", "--cases", "h2c"]));
    }

    #[test]
    fn the_baseline_build_runs_only_when_given() {
        let with = parse_strs(&["--baseline", "/old/fairway"]).unwrap();
        assert_eq!(with.servers, Subject::ALL);
        let chosen = parse_strs(&["--servers", "baseline-afxdp,afxdp", "--baseline", "/old/fairway"]).unwrap();
        assert_eq!(chosen.servers, [Subject::FairwayAfxdp, Subject::BaselineAfxdp]);
        let without = parse_strs(&["--servers", "nginx,baseline-kernel"]).unwrap_err();
        assert_eq!(without.exit_code(), 2);
        // clap's message starts with "error: ".
        let without = without.to_string();
        assert!(without.starts_with("error: --servers baseline-kernel: needs --baseline PATH"), "{without}");
    }

    #[test]
    fn the_axum_example_is_found_beside_the_server() {
        let a = parse_strs(&["--fairway", "/t/release/fairway"]).unwrap();
        assert_eq!(axum_binary(&a, Path::new("/t/release/fairway")), Path::new("/t/release/examples/axum_app"));
        assert_eq!(programs(&a).unwrap().axum, Path::new("/t/release/examples/axum_app"));
        assert_eq!(axum_binary(&a, Path::new("fairway")), Path::new("examples/axum_app"));
        let chosen = parse_strs(&["--axum", "/x/app"]).unwrap();
        assert_eq!(axum_binary(&chosen, Path::new("/t/release/fairway")), Path::new("/x/app"));
        for server in Subject::ALL {
            assert!(!build_hint(server).is_empty());
        }
    }

    #[test]
    fn help_and_errors() {
        for help in ["--help", "-h"] {
            assert!(shows_help(parse_strs(&[help])), "{help}");
        }
        let error = |args: &[&str]| refusal(parse_strs(args));
        // Where clap words an error its own way, the fragment is clap's:
        // "needs a value", "--servers: ...", "--cases: ...", "--prefix...",
        // "unknown argument" and "--mtu: ..." were the hand-written
        // parser's.
        assert!(error(&["--rounds", "0"]).contains("at least 1"));
        assert!(error(&["--duration", "0.5"]).contains("at least 1 second"));
        assert!(error(&["--duration"]).contains("a value is required for '--duration <S>'"));
        assert!(error(&["--servers", "apache"]).contains("for '--servers <LIST>': unknown name"));
        assert!(error(&["--cases", "slow"]).contains("for '--cases <LIST>': unknown name"));
        assert!(error(&["--prefix", "a/b"]).contains("invalid value 'a/b' for '--prefix <P>'"));
        assert!(error(&["--nope"]).contains("unexpected argument '--nope'"));
        assert!(error(&["--mtu", "65536"]).contains("not within 576..=9000"));
        assert!(error(&["--mtu", "big"]).contains("for '--mtu <N>': MTU big"));
    }

    #[test]
    fn the_help_names_every_option_server_and_case_and_fits_80_columns() {
        let long = checked_help(
            Cli::command(),
            &[
                "--duration",
                "--rounds",
                "--warm-up",
                "--servers",
                "--cases",
                "--server-cores",
                "--fairway",
                "--baseline",
                "--axum",
                "--out",
                "--prefix",
                "--mtu",
                "--no-rx-steering",
            ],
        );
        for server in Subject::ALL {
            assert!(long.contains(&format!("  {}  ", server.key())), "{server} is not explained");
        }
        for case in Case::ALL {
            assert!(long.contains(&format!("  {}  ", case.key())), "{case} is not explained");
        }
    }

    #[test]
    fn the_latency_rate_is_half_nginx_median_keep_alive_256_rate() {
        let run = |rps: f64| {
            Ok(WrkResult {
                idle_share: None,
                requests_per_second: rps,
                p50: None,
                p99: None,
                requests: 1,
                socket_errors: 0,
                timeouts: 0,
                non_2xx: 0,
                server_cpu: None,
            })
        };
        let runs = vec![
            (Subject::FairwayAfxdp, Case::KeepAlive256, vec![run(500.0)]),
            (Subject::Nginx, Case::KeepAlive64, vec![run(900.0)]),
            (Subject::Nginx, Case::KeepAlive256, vec![run(100.0), Err("x".into()), run(300.0), run(200.0)]),
        ];
        assert_eq!(latency_rate(&runs, Group::BuiltIn), Ok(100.0));
        assert!(latency_rate(&runs[..2], Group::BuiltIn).unwrap_err().contains("keepalive-256"));
        let failed = vec![(Subject::Nginx, Case::KeepAlive256, vec![Err("x".into())])];
        assert!(latency_rate(&failed, Group::BuiltIn).is_err());
    }

    #[test]
    fn the_axum_group_runs_at_half_axum_on_tokio_rate() {
        let run = |rps: f64| {
            Ok(WrkResult {
                idle_share: None,
                requests_per_second: rps,
                p50: None,
                p99: None,
                requests: 1,
                socket_errors: 0,
                timeouts: 0,
                non_2xx: 0,
                server_cpu: None,
            })
        };
        let runs = vec![
            (Subject::Nginx, Case::KeepAlive256, vec![run(100.0)]),
            (Subject::AxumAfxdp, Case::KeepAlive256, vec![run(500.0)]),
            (Subject::AxumTokio, Case::KeepAlive256, vec![run(80.0), run(60.0)]),
        ];
        assert_eq!(latency_rate(&runs, Group::Axum), Ok(35.0));
        assert_eq!(latency_rate(&runs, Group::BuiltIn), Ok(50.0));
        let why = latency_rate(&runs[..2], Group::Axum).unwrap_err();
        assert_eq!(
            why,
            "needs axum/tokio's keep-alive-256 figure from the same run (--servers with axum-tokio, --cases with \
             keepalive-256)"
        );
    }

    #[test]
    fn rounds_are_summarised_per_server_and_case() {
        let run = |rps: f64| WrkResult {
            idle_share: None,
            requests_per_second: rps,
            p50: Some(Duration::from_micros(500)),
            p99: Some(Duration::from_micros(900)),
            requests: 10,
            socket_errors: 0,
            timeouts: 0,
            non_2xx: 0,
            server_cpu: None,
        };
        let report = summarise(vec![
            (Subject::FairwayAfxdp, Case::KeepAlive256, vec![Ok(run(300.0)), Err("x".into()), Ok(run(100.0))]),
            (Subject::Nginx, Case::KeepAlive256, vec![Ok(run(100.0))]),
            (Subject::FairwayKernel, Case::KeepAlive256, vec![Err("first".into()), Err("last".into())]),
        ]);
        let afxdp = report.rows[0].outcome.as_ref().unwrap();
        assert_eq!((afxdp.requests_per_second, afxdp.rounds), (200.0, 2));
        assert_eq!(report.rows[2].outcome, Err("last".into()));
        assert_eq!(
            report.headline(),
            "bench: fairway/afxdp 200 req/s = 2.00 × nginx (keep-alive plaintext, 256 connections)"
        );
    }
}
