//! `cargo xtask bench http`: wrk from a client namespace against Fairway
//! over AF_XDP, Fairway on kernel sockets and nginx, each on the same
//! server cores, on a namespace testbed this program builds and removes.
//! Needs root. Prints a table (req/s, p50, p99, ratio to nginx), writes it
//! as Markdown to benches/results/http-DATE.md, and ends with
//! `bench: fairway/afxdp X req/s = R × nginx (keep-alive plaintext, 256
//! connections)`.

use std::path::PathBuf;
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::Ordering;
use std::time::Duration;

use fairway::runtime::signals::stop_on_signals;
use fairway_benches::http::measure::{Bench, Outcome, Stop};
use fairway_benches::http::openloop;
use fairway_benches::http::plan::{Case, Cores, Server, cpu_list, select};
use fairway_benches::http::report::{Report, Row, Summary, result_path, today};
use fairway_benches::http::site::Site;
use fairway_tests::testbed::{self, Testbed, TestbedConfig};

const USAGE: &str = "\
usage: http [--duration S] [--rounds N] [--warm-up S] [--servers LIST]
            [--cases LIST] [--server-cores N] [--fairway PATH] [--out DIR]
            [--prefix P]

Needs root, wrk, nginx and curl. Builds a namespace testbed (prefix --prefix,
default fwhttp; one client; one fw0 queue per server core), measures, and
removes it (also on Ctrl-C). wrk runs in the client namespace.

Servers, each in the server namespace, pinned with taskset to the same
server cores (one shard or worker per core); wrk pinned to the other cores:
  afxdp    fairway --backend afxdp --iface fw0 --ip 10.77.0.1/24, port 80
  kernel   fairway --backend kernel --listen 10.77.0.1:8080, with
           10.77.0.1/24 on fw0 as the kernel's address
  nginx    nginx, the same way, port 80: /plaintext by `return 200`
Each serves the same 1 MB file from a site in /dev/shm (fairway: --root).

Cases (wrk --latency, one run each per round):
  keepalive-64    keep-alive GET /plaintext, 64 connections
  keepalive-256   the same, 256 connections
  pipelined       /plaintext pipelined 16 deep (a wrk Lua script), 256
  close           /plaintext with `Connection: close`, 64 connections
  static          the 1 MB static file, keep-alive, 64 connections

After every server's wrk cases, at half nginx's keep-alive-256 rate (the
median of this run's rounds), the open-loop generator (`http openloop`,
this program, in the client namespace; `http openloop --help`):
  latency-half    keep-alive GET /plaintext, 256 connections, requests due
                  at a constant rate, latency counted from when each was
                  due; p50, p99 and p99 against nginx's (lower is better)

  --duration S       each wrk run, in seconds (default 10)
  --rounds N         rounds of every server and case (default 1); medians
  --warm-up S        wrk against each server before its cases (default 1)
  --servers LIST     some of afxdp,kernel,nginx (default all)
  --cases LIST       some of the cases above (default all)
  --server-cores N   cores for the server (default half; wrk gets the rest)
  --fairway PATH     the server binary (default $FAIRWAY_BIN, else
                     `fairway` beside this program)
  --out DIR          where the Markdown goes (default benches/results)
  --prefix P         the testbed's prefix (default fwhttp)
  -h, --help         show this help";

/// The command line.
#[derive(Clone, Debug, PartialEq)]
struct Args {
    duration: Duration,
    rounds: usize,
    warm_up: Duration,
    servers: Vec<Server>,
    cases: Vec<Case>,
    server_cores: Option<usize>,
    fairway: Option<PathBuf>,
    out: PathBuf,
    prefix: String,
}

impl Default for Args {
    fn default() -> Args {
        Args {
            duration: Duration::from_secs(10),
            rounds: 1,
            warm_up: Duration::from_secs(1),
            servers: Server::ALL.to_vec(),
            cases: Case::ALL.to_vec(),
            server_cores: None,
            fairway: None,
            out: PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results"),
            prefix: "fwhttp".to_owned(),
        }
    }
}

/// Parses the arguments after the program name. `Err("")` asks for the
/// help.
fn parse(args: impl IntoIterator<Item = String>) -> Result<Args, String> {
    let mut a = Args::default();
    let mut it = args.into_iter();
    while let Some(flag) = it.next() {
        let mut value = || it.next().ok_or_else(|| format!("{flag} needs a value"));
        let count = |s: String| match s.parse::<usize>() {
            Ok(0) => Err(format!("{flag} must be at least 1")),
            Ok(n) => Ok(n),
            Err(e) => Err(format!("{flag} {s}: {e}")),
        };
        let seconds = |s: String| match s.parse::<f64>() {
            Ok(x) if x.is_finite() && x >= 0.0 => Ok(Duration::from_secs_f64(x)),
            _ => Err(format!("{flag} {s}: not a number of seconds")),
        };
        match flag.as_str() {
            "--duration" => a.duration = seconds(value()?)?,
            "--rounds" => a.rounds = count(value()?)?,
            "--warm-up" => a.warm_up = seconds(value()?)?,
            "--servers" => {
                a.servers = select(&value()?, &Server::ALL, Server::key).map_err(|e| format!("{flag}: {e}"))?
            }
            "--cases" => a.cases = select(&value()?, &Case::ALL, Case::key).map_err(|e| format!("{flag}: {e}"))?,
            "--server-cores" => a.server_cores = Some(count(value()?)?),
            "--fairway" => a.fairway = Some(PathBuf::from(value()?)),
            "--out" => a.out = PathBuf::from(value()?),
            "--prefix" => a.prefix = value()?,
            "-h" | "--help" => return Err(String::new()),
            other => return Err(format!("unknown argument {other}")),
        }
    }
    if a.duration < Duration::from_secs(1) {
        return Err("--duration must be at least 1 second (wrk's resolution)".into());
    }
    testbed::validate_prefix(&a.prefix).map_err(|e| format!("--prefix: {e}"))?;
    Ok(a)
}

/// The server binary: `--fairway`, else `$FAIRWAY_BIN`, else `fairway`
/// beside this program (cargo builds both into the same directory).
fn fairway_binary(args: &Args) -> Option<PathBuf> {
    args.fairway
        .clone()
        .or_else(|| std::env::var_os("FAIRWAY_BIN").filter(|v| !v.is_empty()).map(PathBuf::from))
        .or_else(|| Some(std::env::current_exe().ok()?.parent()?.join("fairway")))
}

/// Whether `program ARG` runs (for wrk, `-v` exits 1 after printing its
/// version, so only starting counts).
fn can_run(program: &str, arg: &str) -> bool {
    Command::new(program).arg(arg).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1).peekable();
    if argv.peek().is_some_and(|a| a == "openloop") {
        return openloop(argv.skip(1));
    }
    let args = match parse(argv) {
        Ok(a) => a,
        Err(e) if e.is_empty() => {
            println!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("http: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
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

/// `http openloop ...`: the load generator alone (the bench runs it in the
/// client namespace this way).
fn openloop(args: impl Iterator<Item = String>) -> ExitCode {
    let config = match openloop::Config::parse(args) {
        Ok(c) => c,
        Err(e) if e.is_empty() => {
            println!("{}", openloop::USAGE);
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("http openloop: {e}\n\n{}", openloop::USAGE);
            return ExitCode::from(2);
        }
    };
    match openloop::generator::run(&config) {
        Ok(outcome) => {
            println!("{}", outcome.line());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("http openloop: {e}");
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
    if args.servers.contains(&Server::Nginx) && !can_run("nginx", "-v") {
        return Err(failed("nginx not found: install the Debian package nginx (cargo xtask bench http does)".into()));
    }
    let fairway =
        fairway_binary(args).ok_or_else(|| failed("cannot tell where the fairway binary is: --fairway".into()))?;
    let needs_fairway = args.servers.iter().any(|&s| s != Server::Nginx);
    if needs_fairway && !fairway.is_file() {
        return Err(failed(format!(
            "no server binary at {} (cargo build --release -p fairway --features afxdp, or --fairway PATH)",
            fairway.display()
        )));
    }
    let openloop_program = std::env::current_exe()
        .map_err(|e| failed(format!("cannot tell where this program is, for `http openloop`: {e}")))?;
    let total = std::thread::available_parallelism().map_or(1, usize::from);
    let cores = Cores::split(total, args.server_cores).map_err(failed)?;
    let interrupted = stop_on_signals().map_err(|e| failed(format!("cannot handle signals: {e}")))?;
    let site = Site::create(cores.server.len()).map_err(|e| failed(format!("writing the site: {e}")))?;
    let config = TestbedConfig::new(args.prefix.clone()).clients(1).queues(cores.server.len());
    let tb = Testbed::up(config).map_err(|e| failed(format!("testbed up: {e}")))?;
    let bench = Bench {
        tb: &tb,
        cores: cores.clone(),
        fairway: &fairway,
        openloop: &openloop_program,
        site: &site,
        duration: args.duration,
        warm_up: args.warm_up,
        interrupted: &interrupted,
    };
    let measured = measure(args, &bench);
    if let Err(e) = tb.down() {
        eprintln!("http: testbed down: {e}");
    }
    let report = measured?;

    let setup = setup_lines(args, &cores, total, &fairway);
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

/// Every round: each server, its wrk cases; then, at half nginx's median
/// keep-alive-256 rate, every round of each server's open-loop cases; then
/// the medians.
fn measure(args: &Args, bench: &Bench<'_>) -> Result<Report, Failure> {
    let (open_loop, wrk): (Vec<Case>, Vec<Case>) = args.cases.iter().partition(|c| c.is_open_loop());
    let mut runs: Vec<(Server, Case, Vec<Outcome>)> = Vec::new();
    measure_cases(args, bench, &wrk, Err(String::new()), &mut runs)?;
    let rate = latency_rate(&runs);
    measure_cases(args, bench, &open_loop, rate.clone(), &mut runs)?;
    let mut report = summarise(runs);
    report.latency_rate = rate.ok();
    Ok(report)
}

/// Every round of `cases` on every server, into `runs`. Open-loop cases
/// run at `rate`, or fail with why there is none (without starting the
/// servers).
fn measure_cases(
    args: &Args,
    bench: &Bench<'_>,
    cases: &[Case],
    rate: Result<f64, String>,
    runs: &mut Vec<(Server, Case, Vec<Outcome>)>,
) -> Result<(), Failure> {
    if cases.is_empty() {
        return Ok(());
    }
    for round in 1..=args.rounds {
        for &server in &args.servers {
            if bench.interrupted.load(Ordering::Relaxed) {
                return Err(Failure::Interrupted);
            }
            let outcomes = match &rate {
                Err(why) if cases.iter().all(|c| c.is_open_loop()) => {
                    cases.iter().map(|&c| (c, Err(why.clone()))).collect()
                }
                _ => {
                    eprintln!("http: round {round}/{}: {server}", args.rounds);
                    bench.server(server, cases, rate.clone()).map_err(|Stop::Interrupted| Failure::Interrupted)?
                }
            };
            for (case, outcome) in outcomes {
                match &outcome {
                    Ok(r) => eprintln!("http:   {case}: {:.0} req/s, {} errors", r.requests_per_second, r.errors()),
                    Err(why) => eprintln!("http:   {case}: failed: {why}"),
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

/// Half the median of nginx's keep-alive-256 rounds, or why there is none.
fn latency_rate(runs: &[(Server, Case, Vec<Outcome>)]) -> Result<f64, String> {
    let nginx = runs.iter().find(|(s, c, _)| *s == Server::Nginx && *c == Case::KeepAlive256);
    let figures: Vec<f64> = nginx
        .map(|(_, _, o)| o.iter().filter_map(|o| Some(o.as_ref().ok()?.requests_per_second)).collect())
        .unwrap_or_default();
    if figures.is_empty() {
        return Err("needs nginx's keep-alive-256 figure from the same run (--servers with nginx, --cases with \
                    keepalive-256)"
            .into());
    }
    Ok(0.5 * fairway_benches::stats::median(figures))
}

/// A row per server and case: the medians of the rounds that ran, or the
/// last reason none did.
fn summarise(runs: Vec<(Server, Case, Vec<Outcome>)>) -> Report {
    let rows = runs
        .into_iter()
        .map(|(server, case, outcomes)| {
            let ok: Vec<_> = outcomes.iter().filter_map(|o| o.as_ref().ok().cloned()).collect();
            let why = outcomes.iter().rev().find_map(|o| o.as_ref().err().cloned()).unwrap_or_default();
            Row { server, case, outcome: Summary::of(&ok).ok_or(why) }
        })
        .collect();
    Report { rows, latency_rate: None }
}

/// What the table was measured on.
fn setup_lines(args: &Args, cores: &Cores, total: usize, fairway: &std::path::Path) -> Vec<String> {
    let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    vec![
        format!(
            "cores: {total}; every server on {} ({} shards or workers), wrk on {} ({} threads)",
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
            "testbed {}: veth fw0 in {}-srv, wrk in {}-c0; kernel {}",
            args.prefix,
            args.prefix,
            args.prefix,
            kernel.trim()
        ),
        format!("fairway: {}", fairway.display()),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;
    use fairway_benches::http::wrk::WrkResult;

    fn parse_strs(args: &[&str]) -> Result<Args, String> {
        parse(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn defaults() {
        let a = parse_strs(&[]).unwrap();
        assert_eq!(a, Args::default());
        assert_eq!((a.duration, a.rounds, a.warm_up), (Duration::from_secs(10), 1, Duration::from_secs(1)));
        assert_eq!(a.servers, Server::ALL);
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
            "--out",
            "/tmp/r",
            "--prefix",
            "hb",
        ])
        .unwrap();
        assert_eq!(
            a,
            Args {
                duration: Duration::from_secs(3),
                rounds: 2,
                warm_up: Duration::ZERO,
                servers: vec![Server::FairwayAfxdp, Server::Nginx],
                cases: vec![Case::KeepAlive256, Case::Close],
                server_cores: Some(1),
                fairway: Some("/x/fairway".into()),
                out: "/tmp/r".into(),
                prefix: "hb".into(),
            }
        );
        assert_eq!(fairway_binary(&a), Some(PathBuf::from("/x/fairway")));
    }

    #[test]
    fn help_and_errors() {
        assert_eq!(parse_strs(&["--help"]), Err(String::new()));
        let error = |args: &[&str]| parse_strs(args).unwrap_err();
        assert!(error(&["--rounds", "0"]).contains("at least 1"));
        assert!(error(&["--duration", "0.5"]).contains("at least 1 second"));
        assert!(error(&["--duration"]).contains("needs a value"));
        assert!(error(&["--servers", "apache"]).starts_with("--servers: unknown name"));
        assert!(error(&["--cases", "slow"]).starts_with("--cases: unknown name"));
        assert!(error(&["--prefix", "a/b"]).starts_with("--prefix"));
        assert!(error(&["--nope"]).contains("unknown argument --nope"));
    }

    #[test]
    fn the_help_names_every_option_server_and_case_and_fits_80_columns() {
        for option in [
            "--duration",
            "--rounds",
            "--warm-up",
            "--servers",
            "--cases",
            "--server-cores",
            "--fairway",
            "--out",
            "--prefix",
        ] {
            assert!(USAGE.contains(&format!("  {option} ")), "{option} is not explained");
        }
        for server in Server::ALL {
            assert!(USAGE.contains(&format!("  {}  ", server.key())), "{server} is not explained");
        }
        for case in Case::ALL {
            assert!(USAGE.contains(&format!("  {}  ", case.key())), "{case} is not explained");
        }
        assert!(USAGE.lines().all(|l| l.chars().count() <= 80));
    }

    #[test]
    fn the_latency_rate_is_half_nginx_median_keep_alive_256_rate() {
        let run = |rps: f64| {
            Ok(WrkResult { requests_per_second: rps, p50: None, p99: None, requests: 1, socket_errors: 0, non_2xx: 0 })
        };
        let runs = vec![
            (Server::FairwayAfxdp, Case::KeepAlive256, vec![run(500.0)]),
            (Server::Nginx, Case::KeepAlive64, vec![run(900.0)]),
            (Server::Nginx, Case::KeepAlive256, vec![run(100.0), Err("x".into()), run(300.0), run(200.0)]),
        ];
        assert_eq!(latency_rate(&runs), Ok(100.0));
        assert!(latency_rate(&runs[..2]).unwrap_err().contains("keepalive-256"));
        let failed = vec![(Server::Nginx, Case::KeepAlive256, vec![Err("x".into())])];
        assert!(latency_rate(&failed).is_err());
    }

    #[test]
    fn rounds_are_summarised_per_server_and_case() {
        let run = |rps: f64| WrkResult {
            requests_per_second: rps,
            p50: Some(Duration::from_micros(500)),
            p99: Some(Duration::from_micros(900)),
            requests: 10,
            socket_errors: 0,
            non_2xx: 0,
        };
        let report = summarise(vec![
            (Server::FairwayAfxdp, Case::KeepAlive256, vec![Ok(run(300.0)), Err("x".into()), Ok(run(100.0))]),
            (Server::Nginx, Case::KeepAlive256, vec![Ok(run(100.0))]),
            (Server::FairwayKernel, Case::KeepAlive256, vec![Err("first".into()), Err("last".into())]),
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
