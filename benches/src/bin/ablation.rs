//! `cargo xtask lab ablation`: the receive-path ablation. Fairway over
//! AF_XDP with each receive-path technique switched off alone, all off and
//! all on, under its default loop and with `--busy-poll-us 0` (all on
//! also with a fixed busy-poll window), beside
//! nginx and Fairway's kernel backend on the same core; wrk (saturated
//! req/s, p99, the server's CPU per request) and the open-loop generator
//! (CPU per request at fixed offered loads), rounds alternating. Writes
//! benches/results/ablation-DATE.md and a PNG bar chart beside it, and
//! ends with `ablation: all on vs all off +P % requests per CPU-second
//! (Connection: close); CPU per keep-alive request R × nginx`.

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use clap::Parser;
use fairway::runtime::signals::stop_on_signals;
use fairway_benches::ablation::{Layout, Measure, Polling, Results, Technique, Variant};
use fairway_benches::cli::{at_least_one, seconds, testbed_prefix};
use fairway_benches::http::measure::{Bench, Stop};
use fairway_benches::http::openloop;
use fairway_benches::http::plan::{Cores, Programs, Subject, UpstreamAt, cpu_list};
use fairway_benches::http::report::today;
use fairway_benches::http::site::RunFiles;
use fairway_tests::testbed::{self, Testbed, TestbedConfig};

/// What `--help` says before the options.
const LONG_ABOUT: &str = "\
The receive-path ablation (issue 17): what each of Fairway's receive-path
techniques is worth, in the server's CPU time per request and in
saturated requests per second, each switched off alone, all off (the
conventional baseline) and all on, beside nginx.

Needs root, wrk, nginx and curl. Builds a namespace testbed (one client,
one queue), pins the server to core 0 and the load to the other cores,
measures, and removes it (also on Ctrl-C); then the same with two queues
and two shards for steering. About 27 minutes with the defaults.";

/// What `--help` says after the options.
const AFTER_LONG_HELP: &str = "\
Techniques (the server's flags that switch each off):
  steering        --steering off: no software steering (with one shard it
                  saves only the classification of each frame; with
                  several, a shard keeps what its queue brings, ARP
                  and Neighbor Discovery alone going to every shard)
  moderation      --busy-poll-us 0 --itr-us 0 --no-adaptive-batch
                  --batch 1: no busy polling, a frame per loop turn
  frames          --no-recycle frames: each frame copied through a buffer
                  allocated for it (an sk_buff), not the UMEM in place
  buffers         --no-recycle buffers: connection rings, reassembly and
                  sent-queue storage allocated and freed per use
  handles         --no-recycle handles: each connection's state allocated
                  when it opens and freed when it closes (the study's fd)
  events          --no-recycle events: an allocation per event (the
                  study's epoll_event)
  all             all of the above at once
Each runs under the default loop (busy-poll up to 50 us, the window
adapting to the load) and, unless --no-busy-poll-zero, again with
--busy-poll-us 0 (moderation and all stop busy polling themselves),
against all on under the same loop. All on runs also with
--no-adaptive-busy-poll (a fixed 50 us window): the busy-polling table
sets it, and --busy-poll-us 0, against the default.
References with their defaults: nginx (one worker) and fairway/kernel
(the kernel backend; of the switches, only busy polling applies to it,
its default being off: it runs again with --busy-poll-us 50).

With one shard, steering has nothing to steer between. The two-shard part
runs the server on both cores (two shards, two veth queues), the load on
the same cores, and sets each side's steering against it off: over
AF_XDP software steering against each shard keeping what its queue
brings, on the kernel backend a SO_REUSEPORT listener per shard against
one listener shared by both shards (--steering off). The server's CPU per
request stays its own, with the load beside it.

Measures, per server and round (rounds alternate the order):
  keep-alive      wrk, /plaintext, 64 connections
  close           wrk, /plaintext with Connection: close, 64 connections
  16k             wrk, a 16 KB file, keep-alive, 64 connections
  open loop       the open-loop generator at each --rates, keep-alive
                  /plaintext, 256 connections
The server's CPU per request is utime + stime from /proc/PID/stat over
the window, over the responses. A gain is all on's figure over the
variant's, round by round (requests per CPU-second: the variant's CPU
per request over all on's), less one; medians and ranges.";

// The option docs are verbatim, as `http`'s: each first line is for -h.
/// The receive-path ablation on a namespace testbed.
#[derive(Parser, Debug)]
#[command(name = "ablation", long_about = LONG_ABOUT, after_long_help = AFTER_LONG_HELP)]
#[command(args_override_self = true)]
struct Cli {
    /// Rounds of every server; medians, ranges
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = at_least_one::<usize>, verbatim_doc_comment)]
    rounds: usize,
    /// Each wrk and open-loop run, in seconds
    #[arg(long, value_name = "S", default_value = "4", value_parser = seconds, verbatim_doc_comment)]
    duration: Duration,
    /// Open-loop rates, req/s
    ///
    /// Below every server's saturation, so that each measures CPU per
    /// request at the same offered load.
    #[arg(long, value_name = "LIST", default_value = "5000,15000", value_parser = rates, verbatim_doc_comment)]
    rates: std::vec::Vec<u32>,
    /// Leave out the --busy-poll-us 0 variants
    ///
    /// About a third shorter.
    #[arg(long, verbatim_doc_comment)]
    no_busy_poll_zero: bool,
    /// Leave out Fairway's kernel backend
    #[arg(long, verbatim_doc_comment)]
    no_kernel: bool,
    /// Leave out the two-shard part (steering)
    ///
    /// About 6 minutes shorter.
    #[arg(long, verbatim_doc_comment)]
    no_two_shards: bool,
    /// The server binary
    ///
    /// By default $FAIRWAY_BIN, else `fairway` beside this program.
    #[arg(long, value_name = "PATH", verbatim_doc_comment)]
    fairway: Option<PathBuf>,
    /// Where the results go (default: benches/results)
    ///
    /// The Markdown and the chart.
    #[arg(long, value_name = "DIR", verbatim_doc_comment)]
    #[arg(default_value_os_t = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("results"), hide_default_value = true)]
    out: PathBuf,
    /// No chart
    #[arg(long, verbatim_doc_comment)]
    no_plots: bool,
    /// The testbed's prefix
    #[arg(long, value_name = "P", default_value = "fwabl", value_parser = testbed_prefix, verbatim_doc_comment)]
    prefix: String,
}

/// `--rates`: positive whole numbers.
fn rates(list: &str) -> Result<Vec<u32>, String> {
    list.split(',')
        .map(|r| match r.trim().parse::<u32>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("'{r}' is not a rate (a whole number of requests per second above 0)")),
        })
        .collect()
}

fn main() -> ExitCode {
    let mut argv = std::env::args().skip(1).peekable();
    if argv.peek().is_some_and(|a| a == "openloop") {
        return openloop::main("ablation", argv.skip(1));
    }
    let cli = Cli::parse();
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        Err(why) => {
            eprintln!("ablation: {why}");
            ExitCode::FAILURE
        }
    }
}

fn can_run(program: &str, arg: &str) -> bool {
    Command::new(program).arg(arg).stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok()
}

fn run(cli: &Cli) -> Result<(), String> {
    if !testbed::is_root() {
        return Err("needs root (network namespaces, AF_XDP): sudo -E cargo xtask lab ablation".into());
    }
    for (program, arg, package) in
        [("wrk", "-v", "wrk"), ("curl", "--version", "curl"), ("taskset", "-V", "util-linux"), ("nginx", "-v", "nginx")]
    {
        if !can_run(program, arg) {
            return Err(format!("{program} not found: install the Debian package {package}"));
        }
    }
    if !cli.no_plots {
        fairway_tests::plot::check_font()?;
    }
    let me = std::env::current_exe().map_err(|e| format!("cannot tell where this program is: {e}"))?;
    let fairway = cli
        .fairway
        .clone()
        .or_else(|| std::env::var_os("FAIRWAY_BIN").filter(|v| !v.is_empty()).map(PathBuf::from))
        .unwrap_or_else(|| me.with_file_name("fairway"));
    if !fairway.is_file() {
        return Err(format!(
            "no server at {} (cargo build --release -p fairway --features afxdp, or --fairway PATH)",
            fairway.display()
        ));
    }
    // Only fairway and nginx run; the axum programs are never started.
    let programs =
        Programs { fairway: fairway.clone(), baseline: None, axum: PathBuf::new(), axum_tokio: PathBuf::new() };
    let total = std::thread::available_parallelism().map_or(1, usize::from);
    let cores = Cores::split(total, Some(1))?;
    let interrupted = stop_on_signals().map_err(|e| format!("cannot handle signals: {e}"))?;
    let files = RunFiles::create(1, UpstreamAt::Loopback).map_err(|e| format!("writing the site: {e}"))?;
    let config = TestbedConfig::new(cli.prefix.clone()).clients(1).queues(1).rx_cpus(&cores.server, &cores.client);
    let tb = Testbed::up(config).map_err(|e| format!("testbed up: {e}"))?;
    let bench = Bench {
        tb: &tb,
        cores: cores.clone(),
        programs: &programs,
        openloop: &me,
        files: &files,
        duration: cli.duration,
        warm_up: Duration::from_secs(1),
        interrupted: &interrupted,
        upstream: UpstreamAt::Loopback,
    };
    let mut references = vec![Subject::Nginx];
    if !cli.no_kernel {
        references.push(Subject::FairwayKernel);
    }
    let layout = Layout { rates: cli.rates.clone(), zero: !cli.no_busy_poll_zero, references };
    let started = Instant::now();
    let measured = measure(&bench, &layout.variants(), &layout.measures(), cli.rounds);
    if let Err(e) = tb.down() {
        eprintln!("ablation: testbed down: {e}");
    }
    let results = measured?;
    let two_shards = if cli.no_two_shards {
        None
    } else {
        let both = Cores { server: (0..total).collect(), client: (0..total).collect() };
        let config =
            TestbedConfig::new(cli.prefix.clone()).clients(1).queues(total).rx_cpus(&both.server, &both.client);
        let tb = Testbed::up(config).map_err(|e| format!("testbed up (two shards): {e}"))?;
        let bench = Bench {
            tb: &tb,
            cores: both,
            programs: &programs,
            openloop: &me,
            files: &files,
            duration: cli.duration,
            warm_up: Duration::from_secs(1),
            interrupted: &interrupted,
            upstream: UpstreamAt::Loopback,
        };
        let measured = measure(&bench, &Variant::steering(!cli.no_kernel), &layout.measures(), cli.rounds);
        if let Err(e) = tb.down() {
            eprintln!("ablation: testbed down: {e}");
        }
        Some(measured?)
    };
    let took = started.elapsed();

    let date = today();
    let path = free_path(&cli.out, &format!("ablation-{date}"), "md");
    let chart = path.with_extension("png");
    let setup = vec![
        format!(
            "cores: {total}; every server on core {} (one shard or worker), the load on {}",
            cpu_list(&cores.server),
            cpu_list(&cores.client)
        ),
        format!(
            "{} round(s), the servers' order reversed every other round; each wrk and open-loop run {} s, a 1 s \
             wrk warm-up per server start; {} min in all",
            cli.rounds,
            cli.duration.as_secs_f64(),
            (took.as_secs_f64() / 60.0).round()
        ),
        format!(
            "testbed {}: one veth queue, MTU {}, offloads off, RPS to each side's cores; kernel {}",
            cli.prefix,
            testbed::MTU,
            std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default().trim()
        ),
        format!("fairway: {}", shown(&fairway)),
    ];
    let mut setup = setup;
    if two_shards.is_some() {
        setup.push(format!(
            "steering, two shards: a second testbed with {total} veth queues; the server on cores {}, one shard \
             each, the load on the same cores",
            cpu_list(&(0..total).collect::<Vec<_>>())
        ));
    }
    let chart_name = chart.file_name().and_then(|n| n.to_str());
    let text = markdown(&layout, &results, two_shards.as_ref(), &date, &setup, chart_name);
    std::fs::create_dir_all(&cli.out).map_err(|e| format!("{}: {e}", cli.out.display()))?;
    std::fs::write(&path, &text).map_err(|e| format!("writing {}: {e}", path.display()))?;
    print!("{text}");
    println!("\nwritten to {}", path.display());
    if !cli.no_plots {
        let (categories, series) = layout.chart(&results);
        let title = "ablation: gain of each technique, requests per server CPU-second (medians)";
        match fairway_tests::plot::grouped_bars(&chart, title, "gain of having it on, %", &categories, &series) {
            Ok(()) => println!("chart: {}", chart.display()),
            Err(e) => eprintln!("ablation: {e}"),
        }
    }
    println!("{}", layout.closing_line(&results));
    Ok(())
}

/// Every round: each variant started, its wrk measures and open-loop
/// rates run, stopped; the order reversed every other round.
fn measure(bench: &Bench<'_>, variants: &[Variant], measures: &[Measure], rounds: usize) -> Result<Results, String> {
    let mut results = Results::default();
    for round in 0..rounds {
        let mut order = variants.to_vec();
        if round % 2 == 1 {
            order.reverse();
        }
        for (i, &variant) in order.iter().enumerate() {
            if bench.interrupted.load(Ordering::Relaxed) {
                return Err("interrupted; the testbed is removed".into());
            }
            eprintln!("ablation: round {}/{rounds}, {}/{}: {}", round + 1, i + 1, order.len(), variant.name());
            let started = match bench.start(variant.server, &variant.flags()).map_err(stopped)? {
                Ok(started) => Some(started),
                Err(why) => {
                    eprintln!("ablation:   did not start: {why}");
                    None
                }
            };
            let Some(mut started) = started else {
                for &m in measures {
                    results.record(variant, m, round, None);
                }
                continue;
            };
            for &m in measures {
                let outcome = match m {
                    Measure::OpenLoop(rate) => started.open_loop(m.case(), f64::from(rate)),
                    _ => started.load(m.case()),
                }
                .map_err(stopped)?;
                match &outcome {
                    Ok(r) => eprintln!(
                        "ablation:   {}: {:.0} req/s, CPU {} µs/req, {} errors",
                        m.describe(),
                        r.requests_per_second,
                        r.server_cpu.map_or("n/a".to_owned(), |d| format!("{:.2}", d.as_secs_f64() * 1e6)),
                        r.errors()
                    ),
                    Err(why) => eprintln!("ablation:   {}: failed: {why}", m.describe()),
                }
                results.record(variant, m, round, outcome.ok());
            }
            started.stop();
        }
    }
    Ok(results)
}

fn stopped(Stop::Interrupted: Stop) -> String {
    "interrupted; the testbed is removed".to_owned()
}

/// `dir/STEM.EXT`, or `STEM-2.EXT`, ... when taken.
fn free_path(dir: &Path, stem: &str, ext: &str) -> PathBuf {
    let first = dir.join(format!("{stem}.{ext}"));
    if !first.exists() {
        return first;
    }
    (2..).map(|n| dir.join(format!("{stem}-{n}.{ext}"))).find(|p| !p.exists()).unwrap_or(first)
}

/// `path` relative to the repository, or its last two components.
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

/// The result file.
fn markdown(
    layout: &Layout,
    results: &Results,
    two_shards: Option<&Results>,
    date: &str,
    setup: &[String],
    chart: Option<&str>,
) -> String {
    let mut out = format!("# The receive-path ablation, {date}\n\n`sudo -E cargo xtask lab ablation`\n\n");
    for line in setup {
        out.push_str(&format!("- {line}\n"));
    }
    out.push_str(
        "\nA gain is what having the technique on is worth: all on's figure over the variant's (requests per \
         CPU-second: the variant's CPU per request over all on's; req/s: all on's over the variant's), less one, \
         round by round against all on under the same loop (under --busy-poll-us 0, moderation off and all \
         off, which stop busy polling themselves, against all on with --busy-poll-us 0); the median, and the \
         range over the rounds in brackets. CPU per request under wrk is at saturation (the close and 16 KB cases have no fixed-rate \
         load); the open-loop columns are at a fixed offered load. The study's figures (fd recycling +7 %, \
         epoll_event recycling +6 %, all five +40 %; +36 % on lighttpd, +20 % on Apache) are its \
         throughput gains on its web servers.\n",
    );
    for polling in if layout.zero { Polling::ALL.to_vec() } else { vec![Polling::Default] } {
        out.push_str(&format!("\n## Gains, {}\n\n", polling.describe()));
        out.push_str(&layout.gains_table(results, polling));
    }
    out.push_str("\n## Busy polling over AF_XDP, all on\n\n");
    out.push_str(&layout.busy_poll_table(results));
    let kernel = layout.kernel_table(results);
    if !kernel.is_empty() {
        out.push_str("\n## Fairway's kernel backend: busy polling\n\n");
        out.push_str(&kernel);
    }
    if let Some(two) = two_shards {
        out.push_str(
            "\n## Steering, two shards\n\nThe server on both cores (two shards; over AF_XDP two veth queues), \
             the load on the same cores; each variant against its own side with steering on.\n\n",
        );
        out.push_str(&layout.steering_table(two));
        out.push_str("\nThe two-shard figures (medians, ranges):\n\n");
        out.push_str(&layout.steering_figures(two));
    }
    out.push_str("\n## CPU per request against nginx's (medians, ranges)\n\n");
    out.push_str(&layout.nginx_table(results));
    out.push_str("\n## Every server's figures (medians, ranges)\n\n");
    out.push_str(&layout.figures_table(results));
    if let Some(chart) = chart {
        out.push_str(&format!("\n![gains]({chart})\n"));
    }
    out.push_str(&format!(
        "\nTechniques switched off: {}.\n\n{}\n",
        Technique::OFF.iter().map(|t| t.name()).collect::<Vec<_>>().join(", "),
        layout.closing_line(results)
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;
    use fairway_benches::cli::checked_help;

    #[test]
    fn defaults_and_options() {
        let cli = Cli::try_parse_from(["ablation"]).unwrap();
        assert_eq!((cli.rounds, cli.duration, cli.rates.clone()), (3, Duration::from_secs(4), vec![5000, 15000]));
        assert!(!cli.no_busy_poll_zero && !cli.no_kernel && !cli.no_plots);
        let cli = Cli::try_parse_from(["ablation", "--rounds", "1", "--rates", "1000", "--no-busy-poll-zero"]).unwrap();
        assert_eq!((cli.rounds, cli.rates.clone(), cli.no_busy_poll_zero), (1, vec![1000], true));
        assert!(Cli::try_parse_from(["ablation", "--rates", "0"]).is_err());
        assert!(Cli::try_parse_from(["ablation", "--rounds", "0"]).is_err());
    }

    #[test]
    fn the_help_names_every_option_and_fits_80_columns() {
        let long = checked_help(
            Cli::command(),
            &[
                "--rounds",
                "--duration",
                "--rates",
                "--no-busy-poll-zero",
                "--no-kernel",
                "--fairway",
                "--out",
                "--no-plots",
                "--prefix",
            ],
        );
        for technique in ["steering", "moderation", "frames", "buffers", "handles", "events"] {
            assert!(long.contains(&format!("  {technique}  ")), "{technique} is not explained");
        }
    }

    #[test]
    fn the_result_file_names_no_absolute_path_and_ends_with_the_closing_line() {
        let layout = Layout { rates: vec![5000], zero: true, references: vec![Subject::Nginx] };
        let text = markdown(&layout, &Results::default(), None, "2026-12-02", &["x".to_owned()], Some("a.png"));
        assert!(text.trim_end().ends_with("× nginx"), "{text}");
        assert!(!text.contains(env!("CARGO_MANIFEST_DIR")));
        assert!(text.contains("## Gains, --busy-poll-us 0"));
        assert!(text.contains("## Busy polling over AF_XDP, all on"));
    }
}
