//! `fairway-linkem`: a link emulator between two interfaces (this kernel has
//! no netem). See `fairway_nic::linkem` for the model and `--help` for the
//! options.

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("fairway-linkem: AF_PACKET sockets are Linux only");
    std::process::exit(2);
}

#[cfg(target_os = "linux")]
fn main() {
    std::process::exit(cli::main());
}

#[cfg(target_os = "linux")]
mod cli {
    use std::fmt::Write as _;
    use std::path::PathBuf;
    use std::time::{Duration, Instant};

    use clap::Parser;
    use fairway_nic::linkem::units::{
        format_duration, format_rate, parse_duration, parse_percent, parse_rate, parse_size,
    };
    use fairway_nic::linkem::{DirectionStats, Emulator, EmulatorConfig, ShutdownSignals, default_queue_bytes};
    use fairway_nic::sim::LinkConfig;

    const AFTER_HELP: &str = "\
Units (as tc): durations 250us, 25ms, 1.5s; rates in bits per second 800kbit, 100mbit,
1gbit (decimal); sizes 1500b (or a bare 1500), 256kb, 4mb (kb = 1024 bytes, as tc; kib,
mib also accepted); percentages 1%, 0.5% (a bare 0.5 means 0.5%, as netem).

The shared options (--delay, --rate, ...) set both directions; --delay-ab, --rate-ba, ...
override one direction. A->B carries the frames that arrive on --a and leave by --b.

Each direction: a frame waits while earlier ones are serialised at --rate, is dropped if the
bytes waiting would exceed --queue (drop-tail), is then lost, corrupted, duplicated or
reordered (given an extra delay up to --reorder-delay) with the given probabilities, and
leaves --delay after its serialisation ends. The model is nic::sim's, driven by
CLOCK_MONOTONIC from each frame's kernel receive time stamp.

Offloads need no ethtool: partial checksums are completed and TSO/GRO super-frames are cut
into MTU-size frames before they enter the model.

Prints `fairway-linkem: ready` on stderr once both interfaces are bridged. Runs until SIGINT
or SIGTERM, then prints one line of counters per direction on stdout and exits 0.

With --control FILE, SIGHUP reconfigures the running link: the FILE holds link options
(e.g. `--loss 10%` or `--reorder 5% --duplicate 2%`) that apply on top of the command line's,
later ones winning; an empty FILE restores the command line's links. Frames already on the
wire keep their times; the counters go on. A FILE that does not parse is reported on stderr
and changes nothing.
Exit status 1: the emulator could not start or failed; 2: bad arguments.";

    /// A link emulator: bridges two interfaces and applies, per direction,
    /// one-way delay, a rate limit with a drop-tail queue, loss, reordering,
    /// duplication and corruption.
    #[derive(Debug, Parser)]
    // A control file's options repeat the command line's: the later win.
    #[command(name = "fairway-linkem", version, after_help = AFTER_HELP, args_override_self = true)]
    struct Args {
        /// Interface A (e.g. the client side); must be up.
        #[arg(long, value_name = "IFACE")]
        a: String,
        /// Interface B (e.g. the server side); must be up.
        #[arg(long, value_name = "IFACE")]
        b: String,

        /// One-way delay added in each direction [default: 0ms].
        #[arg(long, value_name = "TIME", value_parser = parse_duration)]
        delay: Option<Duration>,
        /// Rate limit of each direction, in bits per second
        /// [default: unlimited, which means no serialisation and no queue].
        #[arg(long, value_name = "RATE", value_parser = parse_rate)]
        rate: Option<u64>,
        /// Drop-tail limit on the bytes waiting to be serialised, per
        /// direction (only with a rate limit) [default: one bandwidth-delay
        /// product of the round trip (rate × (delay-ab + delay-ba)), at least
        /// 64kb].
        #[arg(long, value_name = "SIZE", value_parser = parse_size)]
        queue: Option<usize>,
        /// Probability that a frame is lost [default: 0%].
        #[arg(long, value_name = "PERCENT", value_parser = parse_percent)]
        loss: Option<f64>,
        /// Probability that a frame is held back by up to --reorder-delay, so
        /// that later frames overtake it [default: 0%].
        #[arg(long, value_name = "PERCENT", value_parser = parse_percent)]
        reorder: Option<f64>,
        /// Largest extra delay of a reordered frame (uniform in (0, this])
        /// [default: 10ms].
        #[arg(long, value_name = "TIME", value_parser = parse_duration)]
        reorder_delay: Option<Duration>,
        /// Probability that a frame is delivered twice [default: 0%].
        #[arg(long, value_name = "PERCENT", value_parser = parse_percent)]
        duplicate: Option<f64>,
        /// Probability that one byte of a frame is changed (the IP, TCP and
        /// UDP checksums always catch it) [default: 0%].
        #[arg(long, value_name = "PERCENT", value_parser = parse_percent)]
        corrupt: Option<f64>,

        /// --delay for A->B only.
        #[arg(long, value_name = "TIME", value_parser = parse_duration, help_heading = "A->B only")]
        delay_ab: Option<Duration>,
        /// --rate for A->B only.
        #[arg(long, value_name = "RATE", value_parser = parse_rate, help_heading = "A->B only")]
        rate_ab: Option<u64>,
        /// --queue for A->B only.
        #[arg(long, value_name = "SIZE", value_parser = parse_size, help_heading = "A->B only")]
        queue_ab: Option<usize>,
        /// --loss for A->B only.
        #[arg(long, value_name = "PERCENT", value_parser = parse_percent, help_heading = "A->B only")]
        loss_ab: Option<f64>,
        /// --reorder for A->B only.
        #[arg(long, value_name = "PERCENT", value_parser = parse_percent, help_heading = "A->B only")]
        reorder_ab: Option<f64>,
        /// --reorder-delay for A->B only.
        #[arg(long, value_name = "TIME", value_parser = parse_duration, help_heading = "A->B only")]
        reorder_delay_ab: Option<Duration>,
        /// --duplicate for A->B only.
        #[arg(long, value_name = "PERCENT", value_parser = parse_percent, help_heading = "A->B only")]
        duplicate_ab: Option<f64>,
        /// --corrupt for A->B only.
        #[arg(long, value_name = "PERCENT", value_parser = parse_percent, help_heading = "A->B only")]
        corrupt_ab: Option<f64>,

        /// --delay for B->A only.
        #[arg(long, value_name = "TIME", value_parser = parse_duration, help_heading = "B->A only")]
        delay_ba: Option<Duration>,
        /// --rate for B->A only.
        #[arg(long, value_name = "RATE", value_parser = parse_rate, help_heading = "B->A only")]
        rate_ba: Option<u64>,
        /// --queue for B->A only.
        #[arg(long, value_name = "SIZE", value_parser = parse_size, help_heading = "B->A only")]
        queue_ba: Option<usize>,
        /// --loss for B->A only.
        #[arg(long, value_name = "PERCENT", value_parser = parse_percent, help_heading = "B->A only")]
        loss_ba: Option<f64>,
        /// --reorder for B->A only.
        #[arg(long, value_name = "PERCENT", value_parser = parse_percent, help_heading = "B->A only")]
        reorder_ba: Option<f64>,
        /// --reorder-delay for B->A only.
        #[arg(long, value_name = "TIME", value_parser = parse_duration, help_heading = "B->A only")]
        reorder_delay_ba: Option<Duration>,
        /// --duplicate for B->A only.
        #[arg(long, value_name = "PERCENT", value_parser = parse_percent, help_heading = "B->A only")]
        duplicate_ba: Option<f64>,
        /// --corrupt for B->A only.
        #[arg(long, value_name = "PERCENT", value_parser = parse_percent, help_heading = "B->A only")]
        corrupt_ba: Option<f64>,

        /// Seed of the random draws (each direction has its own stream
        /// derived from it, as links in nic::sim).
        #[arg(long, value_name = "N", default_value_t = 1)]
        seed: u64,
        /// Spin on the clock instead of sleeping when the next departure is
        /// this close (absorbs the kernel's wake-up latency; costs CPU at
        /// high frame rates); 0 never spins.
        #[arg(long, value_name = "TIME", value_parser = parse_duration, default_value = "50us")]
        spin: Duration,
        /// SCHED_FIFO priority (1-99) of the two forwarding threads, so that
        /// frames leave on time however busy the machine is (they sleep
        /// whenever nothing is due); 0 keeps normal scheduling.
        #[arg(long, value_name = "N", default_value_t = 10, value_parser = clap::value_parser!(u8).range(0..=99))]
        rt_priority: u8,
        /// Print the counters on stderr at this interval (e.g. 1s).
        #[arg(long, value_name = "TIME", value_parser = parse_duration)]
        stats_interval: Option<Duration>,
        /// Also write the counters to FILE (replaced at every
        /// --stats-interval, and at exit).
        #[arg(long, value_name = "FILE")]
        stats: Option<PathBuf>,
        /// On SIGHUP, apply the link options in FILE on top of the command
        /// line's (an empty FILE restores them); see below.
        #[arg(long, value_name = "FILE")]
        control: Option<PathBuf>,
    }

    /// The shared setting, overridden by the direction's own.
    struct Direction {
        delay: Duration,
        rate: u64,
        queue: Option<usize>,
        loss: f64,
        reorder: f64,
        reorder_delay: Duration,
        duplicate: f64,
        corrupt: f64,
    }

    impl Args {
        fn directions(&self) -> [Direction; 2] {
            let ab = Direction {
                delay: self.delay_ab.or(self.delay).unwrap_or_default(),
                rate: self.rate_ab.or(self.rate).unwrap_or(0),
                queue: self.queue_ab.or(self.queue),
                loss: self.loss_ab.or(self.loss).unwrap_or(0.0),
                reorder: self.reorder_ab.or(self.reorder).unwrap_or(0.0),
                reorder_delay: self.reorder_delay_ab.or(self.reorder_delay).unwrap_or(Duration::from_millis(10)),
                duplicate: self.duplicate_ab.or(self.duplicate).unwrap_or(0.0),
                corrupt: self.corrupt_ab.or(self.corrupt).unwrap_or(0.0),
            };
            let ba = Direction {
                delay: self.delay_ba.or(self.delay).unwrap_or_default(),
                rate: self.rate_ba.or(self.rate).unwrap_or(0),
                queue: self.queue_ba.or(self.queue),
                loss: self.loss_ba.or(self.loss).unwrap_or(0.0),
                reorder: self.reorder_ba.or(self.reorder).unwrap_or(0.0),
                reorder_delay: self.reorder_delay_ba.or(self.reorder_delay).unwrap_or(Duration::from_millis(10)),
                duplicate: self.duplicate_ba.or(self.duplicate).unwrap_or(0.0),
                corrupt: self.corrupt_ba.or(self.corrupt).unwrap_or(0.0),
            };
            [ab, ba]
        }
    }

    impl Direction {
        fn link(&self, round_trip: Duration) -> LinkConfig {
            let mut link = LinkConfig::ideal()
                .with_delay(self.delay.into())
                .with_bandwidth_bps(self.rate)
                .with_loss(self.loss)
                .with_reorder(self.reorder, self.reorder_delay.into())
                .with_duplicate(self.duplicate)
                .with_corrupt(self.corrupt);
            if self.rate > 0 {
                link = link.with_queue_bytes(self.queue.unwrap_or_else(|| default_queue_bytes(self.rate, round_trip)));
            }
            link
        }

        fn describe(&self, link: &LinkConfig) -> String {
            let mut s = format!("delay {}", format_duration(self.delay));
            if self.rate > 0 {
                let _ = write!(s, ", rate {}, queue {} B", format_rate(self.rate), link.queue_bytes.unwrap_or(0));
            }
            for (name, p) in [
                ("loss", self.loss),
                ("reorder", self.reorder),
                ("duplicate", self.duplicate),
                ("corrupt", self.corrupt),
            ] {
                if p > 0.0 {
                    let _ = write!(s, ", {name} {}%", p * 100.0);
                }
            }
            if self.reorder > 0.0 {
                let _ = write!(s, " (up to {})", format_duration(self.reorder_delay));
            }
            s
        }
    }

    /// The links of `args`: `[a->b, b->a]`, and their descriptions.
    fn links(args: &Args) -> ([LinkConfig; 2], String) {
        let [ab, ba] = args.directions();
        let round_trip = ab.delay + ba.delay;
        let (link_ab, link_ba) = (ab.link(round_trip), ba.link(round_trip));
        let text =
            format!("{a}->{b}: {}; {b}->{a}: {}", ab.describe(&link_ab), ba.describe(&link_ba), a = args.a, b = args.b);
        ([link_ab, link_ba], text)
    }

    /// The command line with the control file's options after it, parsed:
    /// the links SIGHUP applies, or why the file is refused.
    fn reload(control: &std::path::Path, args: &Args) -> Result<Args, String> {
        let text = std::fs::read_to_string(control).map_err(|e| format!("reading {}: {e}", control.display()))?;
        let line = std::env::args_os().chain(text.split_whitespace().map(Into::into));
        let new = Args::try_parse_from(line).map_err(|e| {
            let e = e.to_string();
            e.lines().next().unwrap_or_default().trim_start_matches("error: ").to_owned()
        })?;
        if (&new.a, &new.b) != (&args.a, &args.b) {
            return Err("a control file cannot change the interfaces".to_owned());
        }
        Ok(new)
    }

    /// Runs the program; returns the exit status.
    pub(crate) fn main() -> i32 {
        let args = Args::parse();
        // Before any thread exists, so that every thread inherits the mask
        // and the signals reach only `signals.wait`.
        let signals = match ShutdownSignals::block(args.control.is_some()) {
            Ok(s) => s,
            Err(e) => {
                eprintln!("fairway-linkem: cannot block SIGINT/SIGTERM: {e}");
                return 1;
            }
        };
        let ([link_ab, link_ba], described) = links(&args);
        let mut config = EmulatorConfig::new(&args.a, &args.b);
        config.a_to_b = link_ab;
        config.b_to_a = link_ba;
        config.seed = args.seed;
        config.spin = args.spin;
        config.realtime_priority = (args.rt_priority > 0).then_some(args.rt_priority);

        let emulator = match Emulator::start(&config) {
            Ok(e) => e,
            Err(e) => {
                eprintln!("fairway-linkem: {e}");
                return 1;
            }
        };
        eprintln!("fairway-linkem: ready: {} <-> {}; {described}", args.a, args.b);

        let names = [format!("a->b ({}->{})", args.a, args.b), format!("b->a ({}->{})", args.b, args.a)];
        let report = |stats: &[DirectionStats; 2], elapsed: Duration| -> String {
            let mut out = format!("fairway-linkem: {:.3} s\n", elapsed.as_secs_f64());
            for (name, s) in names.iter().zip(stats) {
                let _ = writeln!(out, "{name}: {s}");
            }
            out
        };
        let write_stats_file = |text: &str| {
            if let Some(path) = &args.stats
                && let Err(e) = std::fs::write(path, text)
            {
                eprintln!("fairway-linkem: warning: cannot write {}: {e}", path.display());
            }
        };

        // Wake at least this often to notice a failed direction.
        let tick = args.stats_interval.unwrap_or(Duration::from_millis(200)).min(Duration::from_millis(200));
        let mut next_stats = args.stats_interval.map(|i| Instant::now() + i);
        loop {
            match signals.wait(tick) {
                Ok(Some("SIGHUP")) => {
                    if let Some(control) = &args.control {
                        match reload(control, &args) {
                            Ok(new) => {
                                let ([ab, ba], described) = links(&new);
                                emulator.reconfigure(ab, ba);
                                eprintln!("fairway-linkem: reconfigured: {described}");
                            }
                            Err(why) => eprintln!("fairway-linkem: warning: control file ignored: {why}"),
                        }
                    }
                }
                Ok(Some(_)) => break,
                Ok(None) => {}
                Err(e) => {
                    eprintln!("fairway-linkem: waiting for signals: {e}");
                    break;
                }
            }
            if emulator.failed() {
                break;
            }
            if let (Some(at), Some(interval)) = (next_stats, args.stats_interval)
                && Instant::now() >= at
            {
                let text = report(&emulator.stats(), emulator.elapsed());
                eprint!("{text}");
                write_stats_file(&text);
                next_stats = Some(at + interval);
            }
        }

        match emulator.stop() {
            Ok(r) => {
                let text = report(&[r.a_to_b, r.b_to_a], r.elapsed);
                print!("{text}");
                write_stats_file(&text);
                0
            }
            Err(e) => {
                eprintln!("fairway-linkem: {e}");
                1
            }
        }
    }
}
