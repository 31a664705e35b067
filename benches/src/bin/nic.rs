//! `cargo xtask bench nic`: packets per second received and sent by one
//! shard over AF_XDP (copy mode on veth) and received over TAP, then a bulk
//! download by kernel curl from Fairway over AF_XDP beside the same from
//! nginx over the kernel stack, all on a namespace testbed this program
//! builds and removes. Needs root. Ends with
//! `nic: afxdp X Mpps rx, Y Mpps tx; tap Z Mpps rx`.

use std::net::SocketAddrV4;
use std::process::{Command, ExitCode, Stdio};
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use clap::{ArgAction, Parser};
use fairway::runtime::signals::stop_on_signals;
use fairway_benches::cli::{at_least_one, positive_seconds, seconds, testbed_prefix};
use fairway_benches::nic::bulk::Bulk;
use fairway_benches::nic::pps::{Bench, Rate, SHARD_BATCH, TX_BUDGET, Window};
use fairway_benches::stats::median;
use fairway_benches::udp_frames::MIN_FRAME_LEN;
use fairway_tests::nginx::SiteDir;
use fairway_tests::real_peers::server_addr;
use fairway_tests::testbed::{self, SERVER_IF, Testbed, TestbedConfig};

/// What is measured, for `--help`.
const LONG_ABOUT: &str = "\
Packets per second received and sent by one shard over AF_XDP and received
over TAP, then a bulk download from Fairway beside the same from nginx.

Needs root. Builds a namespace testbed (prefix --prefix, default fwbench)
with one client and one queue, measures, and removes it (also on Ctrl-C).

Packet rates, one shard pinned to core 0, its counterpart on core 1, with
64-byte UDP frames (60 bytes without FCS) to a closed port, which the stack
counts and drops:
  afxdp rx  a generator AF_XDP socket on the switch port `srv` blasts frames
            into fw0; the shard's loop on fw0 queue 0 hands each to
            Shard::handle_frame
  afxdp tx  the shard's AF_XDP socket on fw0 sends frames as fast as it
            accepts them; a sink AF_XDP socket on `srv` counts them
  tap rx    the generator on the switch port `tap`; the shard reads fwtap0

Bulk download: kernel curl in the client downloads --bulk-bytes from the
fairway server (one shard, AF_XDP on fw0, /bytes/N), from a bare shard
running the server's HTTP layer, and from nginx (one worker, sendfile, the
kernel stack on fw0 with the address 10.77.0.1/24), alternating.";

// `--help` groups the options under these headings, after --verbose.
const PACKET_RATES: &str = "Packet rates";
const BULK_DOWNLOAD: &str = "Bulk download";
const TESTBED: &str = "Testbed";

// The option docs are verbatim, as clap here does not wrap help text: each
// first line is a phrase for `-h`, the rest is for `--help`, which indents
// them by 10 columns, so they are at most 70.
/// Packet rates over AF_XDP and TAP, and a bulk download beside nginx.
#[derive(Parser, Debug)]
#[command(name = "nic", long_about = LONG_ABOUT)]
// As the hand-written parser did: a repeated option takes its last value,
// and `-1` is a value (which the option then refuses), not an unknown flag.
#[command(args_override_self = true, allow_negative_numbers = true)]
struct Cli {
    /// Rounds of the three; medians are reported
    #[arg(long, value_name = "N", default_value_t = 5, value_parser = at_least_one::<usize>)]
    #[arg(help_heading = PACKET_RATES, verbatim_doc_comment)]
    rounds: usize,
    /// The measured window of each, in seconds
    #[arg(long, value_name = "S", default_value = "3", value_parser = positive_seconds)]
    #[arg(help_heading = PACKET_RATES, verbatim_doc_comment)]
    seconds: Duration,
    /// Traffic before the window, in seconds
    #[arg(long, value_name = "S", default_value = "1", value_parser = seconds)]
    #[arg(help_heading = PACKET_RATES, verbatim_doc_comment)]
    warm_up: Duration,
    /// Leave out tap rx
    #[arg(long, help_heading = PACKET_RATES, verbatim_doc_comment)]
    skip_tap: bool,
    /// Leave out the packet rates (the bulk download alone)
    ///
    /// Not with --skip-bulk, which would leave nothing to measure.
    #[arg(long, conflicts_with = "skip_bulk", help_heading = PACKET_RATES, verbatim_doc_comment)]
    skip_rates: bool,
    /// The body, in bytes
    #[arg(long, value_name = "N", default_value_t = 1_000_000_000, value_parser = at_least_one::<u64>)]
    #[arg(help_heading = BULK_DOWNLOAD, verbatim_doc_comment)]
    bulk_bytes: u64,
    /// Downloads from each
    #[arg(long, value_name = "N", default_value_t = 3, value_parser = at_least_one::<usize>)]
    #[arg(help_heading = BULK_DOWNLOAD, verbatim_doc_comment)]
    bulk_rounds: usize,
    /// Leave out the bulk download (then nginx is not needed)
    #[arg(long, help_heading = BULK_DOWNLOAD, verbatim_doc_comment)]
    skip_bulk: bool,
    /// The MTU of every link
    ///
    /// 9000 for jumbo frames, which Fairway over AF_XDP takes in several
    /// UMEM frames and nginx's kernel stack sends whole.
    #[arg(long, value_name = "N", default_value_t = testbed::MTU, value_parser = testbed::parse_mtu)]
    #[arg(help_heading = TESTBED, verbatim_doc_comment)]
    mtu: u32,
    /// The testbed's prefix
    #[arg(long, value_name = "P", default_value = "fwbench", value_parser = testbed_prefix)]
    #[arg(help_heading = TESTBED, verbatim_doc_comment)]
    prefix: String,
    /// Receive processing on the sending core (no RPS)
    ///
    /// Leaves the kernel's receive processing in the softirq of the core
    /// that sent each frame. By default RPS runs it in the server's
    /// namespace on core 0 and in the switch's and the client's on core 1,
    /// as on two machines.
    #[arg(long = "no-rx-steering", action = ArgAction::SetFalse)]
    #[arg(help_heading = TESTBED, verbatim_doc_comment)]
    rx_steering: bool,
    /// Print what each device and shard counted, every round
    ///
    /// The first round's is always printed.
    #[arg(long, verbatim_doc_comment)]
    verbose: bool,
}

/// The command line, as the measurements take it.
#[derive(Clone, Debug, PartialEq)]
struct Args {
    rounds: usize,
    window: Window,
    bulk_bytes: u64,
    bulk_rounds: usize,
    skip_bulk: bool,
    skip_tap: bool,
    skip_rates: bool,
    mtu: u32,
    prefix: String,
    verbose: bool,
    rx_steering: bool,
}

impl From<Cli> for Args {
    fn from(cli: Cli) -> Args {
        Args {
            rounds: cli.rounds,
            window: Window { warm_up: cli.warm_up, length: cli.seconds },
            bulk_bytes: cli.bulk_bytes,
            bulk_rounds: cli.bulk_rounds,
            skip_bulk: cli.skip_bulk,
            skip_tap: cli.skip_tap,
            skip_rates: cli.skip_rates,
            mtu: cli.mtu,
            prefix: cli.prefix,
            verbose: cli.verbose,
            rx_steering: cli.rx_steering,
        }
    }
}

/// Frames per second as Mpps.
fn mpps(frames_per_second: f64) -> f64 {
    frames_per_second / 1e6
}

/// The packet-rate rounds: per round the three measurements' rates.
#[derive(Default)]
struct Rates {
    afxdp_rx: Vec<Rate>,
    afxdp_tx: Vec<Rate>,
    tap_rx: Vec<Rate>,
}

impl Rates {
    fn medians(rates: &[Rate]) -> (f64, f64) {
        (
            median(rates.iter().map(|r| mpps(r.shard)).collect()),
            median(rates.iter().map(|r| mpps(r.counterpart)).collect()),
        )
    }
}

/// Why the run ended early.
enum Stop {
    Interrupted,
    Failed(String),
}

fn main() -> ExitCode {
    // A bad command line exits with status 2, -h and --help with 0.
    let args = Args::from(Cli::parse());
    if !testbed::is_root() {
        eprintln!("nic: needs root (network namespaces, AF_XDP): run it as root, e.g. sudo -E cargo xtask bench nic");
        return ExitCode::FAILURE;
    }
    if !args.skip_bulk && !has_nginx() {
        eprintln!(
            "nic: nginx not found: install the Debian package nginx (cargo xtask bench nic does), or --skip-bulk"
        );
        return ExitCode::FAILURE;
    }
    let interrupted = match stop_on_signals() {
        Ok(flag) => flag,
        Err(e) => {
            eprintln!("nic: cannot handle signals: {e}");
            return ExitCode::FAILURE;
        }
    };
    let mut config = TestbedConfig::new(args.prefix.clone()).clients(1).queues(1).mtu(args.mtu);
    if args.rx_steering {
        config = config.rx_cpus(&[0], &[1]);
    }
    let tb = match Testbed::up(config) {
        Ok(tb) => tb,
        Err(e) => {
            eprintln!("nic: testbed up: {e}");
            return ExitCode::FAILURE;
        }
    };
    let outcome = run(&args, &tb, &interrupted);
    // Down before the last line, so that a teardown error is seen.
    if let Err(e) = tb.down() {
        eprintln!("nic: testbed down: {e}");
    }
    match outcome {
        Ok(last) => {
            println!("{last}");
            ExitCode::SUCCESS
        }
        Err(Stop::Interrupted) => {
            eprintln!("nic: interrupted; the testbed is removed");
            ExitCode::from(130)
        }
        Err(Stop::Failed(e)) => {
            eprintln!("nic: {e}");
            ExitCode::FAILURE
        }
    }
}

/// Both parts; returns the last line.
fn run(args: &Args, tb: &Testbed, interrupted: &Arc<AtomicBool>) -> Result<String, Stop> {
    let rates = if args.skip_rates { None } else { Some(packet_rates(args, tb, interrupted)?) };
    let bulk = if args.skip_bulk { None } else { Some(bulk_download(args, tb, interrupted)?) };
    // The last line is the packet rates' when they ran, else the bulk one.
    let Some(rates) = rates else {
        return Ok(bulk.unwrap_or_default());
    };
    if let Some(line) = bulk {
        println!("{line}");
    }
    let (rx, _) = Rates::medians(&rates.afxdp_rx);
    let (tx, _) = Rates::medians(&rates.afxdp_tx);
    let tap = if args.skip_tap {
        "tap skipped".to_owned()
    } else {
        format!("tap {:.2} Mpps rx", Rates::medians(&rates.tap_rx).0)
    };
    Ok(format!("nic: afxdp {rx:.2} Mpps rx, {tx:.2} Mpps tx; {tap}"))
}

fn packet_rates(args: &Args, tb: &Testbed, interrupted: &Arc<AtomicBool>) -> Result<Rates, Stop> {
    println!(
        "packet rates: one shard on core 0, its counterpart on core 1; {MIN_FRAME_LEN}-byte UDP frames \
         (64 on the wire) to a closed port, counted and dropped by the stack; {:.1} s warm-up, {:.1} s \
         window, {} rounds",
        args.window.warm_up.as_secs_f64(),
        args.window.length.as_secs_f64(),
        args.rounds
    );
    println!("  afxdp rx: received by the shard (offered: accepted by the generator's AF_XDP socket on `srv`)");
    println!("  afxdp tx: accepted by the shard's AF_XDP socket on fw0 (delivered: received by the sink on `srv`)");
    if !args.skip_tap {
        println!("  tap rx:   received by the shard from fwtap0 (offered: accepted by the generator on `tap`)");
    }
    let header = ["round", "afxdp rx", "offered", "afxdp tx", "delivered", "tap rx", "offered"];
    let columns = if args.skip_tap { 5 } else { 7 };
    println!("{}  (Mpps)", header[..columns].iter().map(|h| format!("{h:>10}")).collect::<String>());
    let bench = Bench::new(tb, args.window, Arc::clone(interrupted));
    let mut rates = Rates::default();
    for round in 1..=args.rounds {
        let measure = |what: &str, f: &dyn Fn() -> std::io::Result<Option<Rate>>| match f() {
            Ok(Some(rate)) => Ok(rate),
            Ok(None) => Err(Stop::Interrupted),
            Err(e) => Err(Stop::Failed(format!("{what}, round {round}: {e}"))),
        };
        let rx = measure("afxdp rx", &|| bench.afxdp_rx())?;
        let tx = measure("afxdp tx", &|| bench.afxdp_tx())?;
        let tap = if args.skip_tap { None } else { Some(measure("tap rx", &|| bench.tap_rx())?) };
        let mut row = format!("{round:>10}");
        for rate in [Some(&rx), Some(&tx), tap.as_ref()].into_iter().flatten() {
            row.push_str(&format!("{:>10.2}{:>10.2}", mpps(rate.shard), mpps(rate.counterpart)));
        }
        println!("{row}");
        if round == 1 || args.verbose {
            for (what, rate) in [("afxdp rx", Some(&rx)), ("afxdp tx", Some(&tx)), ("tap rx", tap.as_ref())] {
                for note in rate.iter().flat_map(|r| &r.notes) {
                    println!("    {what} {note}");
                }
            }
        }
        rates.afxdp_rx.push(rx);
        rates.afxdp_tx.push(tx);
        rates.tap_rx.extend(tap);
    }
    let lists = [
        ("afxdp rx", &rates.afxdp_rx, SHARD_BATCH),
        ("afxdp tx", &rates.afxdp_tx, TX_BUDGET),
        ("tap rx", &rates.tap_rx, SHARD_BATCH),
    ];
    let lists = &lists[..columns / 2];
    let mut row = format!("{:>10}", "median");
    for (_, list, _) in lists {
        let (shard, counterpart) = Rates::medians(list);
        row.push_str(&format!("{shard:>10.2}{counterpart:>10.2}"));
    }
    println!("{row}");
    let per_turn: Vec<String> = lists
        .iter()
        .map(|(what, list, budget)| {
            format!("{what} {:.2} of {budget}", median(list.iter().map(|r| r.per_turn).collect()))
        })
        .collect();
    println!("frames per turn of the shard's loop (median): {}", per_turn.join(", "));
    Ok(rates)
}

/// The bulk downloads; returns the `bulk:` line.
fn bulk_download(args: &Args, tb: &Testbed, interrupted: &AtomicBool) -> Result<String, Stop> {
    let failed = |e: std::io::Error| Stop::Failed(format!("bulk download: {e}"));
    println!();
    println!(
        "bulk download: kernel curl in {} downloads {} bytes from 10.77.0.1, {} rounds each, alternating",
        tb.client_ns(0),
        args.bulk_bytes,
        args.bulk_rounds
    );
    println!(
        "  fairway: the server (fairway --backend afxdp, one shard, /bytes/N), copy-mode AF_XDP on {SERVER_IF} queue 0, \
         MTU {} ({})",
        args.mtu,
        if args.mtu > 1500 { "multi-buffer, 4096-byte UMEM frames" } else { "one 2048-byte UMEM frame per frame" }
    );
    println!("  shard:   one bare shard running the server's HTTP layer (no server set-up), the same way");
    println!("  nginx:   one worker, sendfile, from /dev/shm, the kernel stack on {SERVER_IF} with 10.77.0.1/24");
    println!("  offloads as the testbed sets them: {}", offloads(tb));
    let listen: SocketAddrV4 = server_addr(tb);
    let site = SiteDir::create(args.bulk_bytes, listen).map_err(failed)?;
    let bulk = Bulk::new(tb, args.bulk_bytes, interrupted);
    println!("{:>10}{:>16}{:>16}{:>16}  (Gbit/s)", "round", "fairway", "shard", "nginx");
    let (mut server, mut shard, mut nginx) = (Vec::new(), Vec::new(), Vec::new());
    for round in 1..=args.bulk_rounds {
        let f = bulk.server().map_err(|e| failed(std::io::Error::other(format!("fairway: {e}"))))?;
        let f = f.ok_or(Stop::Interrupted)?;
        let r = bulk.fairway().map_err(|e| failed(std::io::Error::other(format!("shard: {e}"))))?;
        let r = r.ok_or(Stop::Interrupted)?;
        let n = bulk.nginx(&site).map_err(failed)?.ok_or(Stop::Interrupted)?;
        println!(
            "{round:>10}{:>16.2}{:>16.2}{:>16.2}",
            f.bits_per_second / 1e9,
            r.bits_per_second / 1e9,
            n.bits_per_second / 1e9
        );
        if args.verbose {
            println!("    fairway: {}", f.note);
            println!("    shard: {}", r.note);
            if !n.note.is_empty() {
                println!("    nginx: {}", n.note);
            }
        }
        server.push(f.bits_per_second / 1e9);
        shard.push(r.bits_per_second / 1e9);
        nginx.push(n.bits_per_second / 1e9);
    }
    let (f, r, n) = (median(server), median(shard), median(nginx));
    println!("{:>10}{f:>16.2}{r:>16.2}{n:>16.2}", "median");
    println!("bulk (bare shard): {r:.2} Gbit/s, ratio {:.2} to nginx", r / n);
    Ok(format!(
        "bulk: fairway {f:.2} Gbit/s, nginx {n:.2} Gbit/s, ratio {:.2} (fairway/nginx, MTU {})",
        f / n,
        args.mtu
    ))
}

/// Whether `nginx -v` runs.
fn has_nginx() -> bool {
    Command::new("nginx").arg("-v").stdout(Stdio::null()).stderr(Stdio::null()).status().is_ok_and(|s| s.success())
}

/// The segmentation, receive and checksum offloads of fw0 and of the
/// client's eth0, as ethtool reports them.
fn offloads(tb: &Testbed) -> String {
    let report = |ns: &str, dev: &str| {
        let text = testbed::exec(ns, &["ethtool", "-k", dev]).map(|o| o.stdout_text()).unwrap_or_default();
        let features = offload_features(&text);
        if features.is_empty() { format!("{dev}: unknown") } else { format!("{dev}: {features}") }
    };
    format!("{}; {}", report(&tb.server_ns(), SERVER_IF), report(&tb.client_ns(0), testbed::CLIENT_IF))
}

/// The offloads that matter for a bulk transfer, from `ethtool -k`.
fn offload_features(ethtool: &str) -> String {
    const WANTED: [(&str, &str); 4] = [
        ("tcp-segmentation-offload", "tso"),
        ("generic-segmentation-offload", "gso"),
        ("generic-receive-offload", "gro"),
        ("tx-checksumming", "tx-csum"),
    ];
    WANTED
        .iter()
        .filter_map(|(name, short)| {
            let line = ethtool.lines().find(|l| l.trim_start().starts_with(&format!("{name}:")))?;
            let value = line.split(':').nth(1)?.split_whitespace().next()?;
            Some(format!("{short} {value}"))
        })
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    use clap::CommandFactory;
    use fairway_benches::cli::{checked_help, refusal, shows_help};

    /// `nic ARGS` as `main` reads it.
    fn parse_strs(args: &[&str]) -> Result<Args, clap::Error> {
        Cli::try_parse_from(std::iter::once("nic").chain(args.iter().copied())).map(Args::from)
    }

    #[test]
    fn defaults() {
        let a = parse_strs(&[]).unwrap();
        // What `Args::default()` was before clap held the defaults.
        assert_eq!(
            a,
            Args {
                rounds: 5,
                window: Window { warm_up: Duration::from_secs(1), length: Duration::from_secs(3) },
                bulk_bytes: 1_000_000_000,
                bulk_rounds: 3,
                skip_bulk: false,
                skip_tap: false,
                skip_rates: false,
                mtu: testbed::MTU,
                prefix: "fwbench".to_owned(),
                verbose: false,
                rx_steering: true,
            }
        );
        assert_eq!((a.rounds, a.bulk_bytes, a.bulk_rounds, a.prefix.as_str()), (5, 1_000_000_000, 3, "fwbench"));
        assert_eq!(a.window, Window { warm_up: Duration::from_secs(1), length: Duration::from_secs(3) });
        assert!(!a.skip_bulk && !a.skip_tap && !a.verbose);
    }

    #[test]
    fn every_option() {
        let a = parse_strs(&[
            "--rounds",
            "2",
            "--seconds",
            "0.5",
            "--warm-up",
            "0",
            "--bulk-bytes",
            "1000",
            "--bulk-rounds",
            "1",
            "--skip-bulk",
            "--skip-tap",
            "--mtu",
            "9000",
            "--prefix",
            "nb",
            "--verbose",
            "--no-rx-steering",
        ])
        .unwrap();
        assert_eq!(
            a,
            Args {
                rounds: 2,
                window: Window { warm_up: Duration::ZERO, length: Duration::from_millis(500) },
                bulk_bytes: 1000,
                bulk_rounds: 1,
                skip_bulk: true,
                skip_tap: true,
                skip_rates: false,
                mtu: 9000,
                prefix: "nb".into(),
                verbose: true,
                rx_steering: false,
            }
        );
        // A repeated option takes its last value, as before clap.
        assert_eq!(parse_strs(&["--rounds", "2", "--rounds", "3"]).unwrap().rounds, 3);
    }

    #[test]
    fn help_and_errors() {
        for help in ["--help", "-h"] {
            assert!(shows_help(parse_strs(&[help])), "{help}");
        }
        let error = |args: &[&str]| refusal(parse_strs(args));
        // Where clap words an error its own way, the fragment is clap's:
        // "needs a value", "--rounds x: ...", "--bulk-bytes -1: ...",
        // "--prefix: ..." and "unknown argument" were the hand-written
        // parser's, and "cannot be used with" was "nothing to measure".
        assert!(error(&["--rounds"]).contains("a value is required for '--rounds <N>'"));
        assert!(error(&["--rounds", "0"]).contains("at least 1"));
        assert!(error(&["--rounds", "x"]).contains("invalid value 'x' for '--rounds <N>'"));
        assert!(error(&["--bulk-bytes", "-1"]).contains("invalid value '-1' for '--bulk-bytes <N>'"));
        assert!(error(&["--seconds", "0"]).contains("more than 0"));
        assert!(error(&["--seconds", "nan"]).contains("not a number of seconds"));
        assert!(error(&["--warm-up", "-1"]).contains("not a number of seconds"));
        assert!(error(&["--prefix", "a/b"]).contains("invalid value 'a/b' for '--prefix <P>'"));
        assert!(error(&["--nope"]).contains("unexpected argument '--nope'"));
        assert!(error(&["--mtu", "100"]).contains("not within 576..=9000"));
        assert!(error(&["--skip-rates", "--skip-bulk"]).contains("'--skip-rates' cannot be used with '--skip-bulk'"));
    }

    #[test]
    fn the_help_names_every_option_and_fits_80_columns() {
        let _ = checked_help(
            Cli::command(),
            &[
                "--rounds",
                "--seconds",
                "--warm-up",
                "--bulk-bytes",
                "--bulk-rounds",
                "--skip-bulk",
                "--skip-tap",
                "--skip-rates",
                "--mtu",
                "--prefix",
                "--verbose",
                "--no-rx-steering",
            ],
        );
    }

    #[test]
    fn offloads_from_ethtool() {
        let text = "Features for fw0:\nrx-checksumming: on\ntx-checksumming: off\n\
                    \ttx-checksum-ipv4: off [fixed]\ntcp-segmentation-offload: off\n\
                    generic-segmentation-offload: off\ngeneric-receive-offload: on [requested off]\n";
        assert_eq!(offload_features(text), "tso off, gso off, gro on, tx-csum off");
        assert_eq!(offload_features(""), "");
    }

    #[test]
    fn medians_in_mpps() {
        let rate = |shard: f64, counterpart: f64| Rate { shard, counterpart, per_turn: 1.0, notes: vec![] };
        let rates = [rate(1e6, 2e6), rate(3e6, 1e6), rate(2e6, 4e6)];
        assert_eq!(Rates::medians(&rates), (2.0, 2.0));
    }
}
