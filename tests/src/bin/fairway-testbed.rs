//! `fairway-testbed`: brings the namespace testbed up, down, or shows it.
//! `cargo xtask testbed` calls this; the topology is described in
//! `fairway_tests::testbed`.

use std::fmt::Write as _;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use clap::{Args, Parser, Subcommand};
use fairway_tests::testbed::{
    self, DEFAULT_PREFIX, LinkParams, SERVER_IF, Subnet, TAP_IF, Testbed, TestbedConfig, parse_duration, parse_mtu,
    parse_percent, parse_rate, parse_size,
};

/// Network namespaces where Fairway meets Linux peers: a server namespace
/// ({prefix}-srv: fw0 for AF_XDP, fwtap0 for TAP), a switch ({prefix}-sw,
/// bridge br0) and clients ({prefix}-c0, ...: eth0 10.77.0.10, ...), some
/// behind an emulated link (fairway-linkem). Needs root.
#[derive(Parser, Debug)]
#[command(name = "fairway-testbed", version)]
struct Cli {
    #[command(subcommand)]
    command: Cmd,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Build the testbed and leave it up (an earlier one with the same
    /// prefix is removed first).
    Up(Box<UpArgs>),
    /// Remove the testbed: its processes, namespaces and interfaces.
    Down(PrefixArg),
    /// Show what exists of the testbed.
    Status(PrefixArg),
}

#[derive(Args, Debug)]
struct PrefixArg {
    /// Names the namespaces: PREFIX-srv, PREFIX-sw, PREFIX-c0, ...
    #[arg(long, default_value = DEFAULT_PREFIX)]
    prefix: String,
}

/// Link settings: the plain options (--delay, --rate, ...) apply to every
/// client, or only to those named with --client; --link sets one client's
/// link, on top of the plain options. Example: --delay 5ms --link
/// 1:delay=50ms,loss=1% gives client 0 5 ms and client 1 50 ms with 1 % loss.
#[derive(Args, Debug)]
struct UpArgs {
    /// Names the namespaces: PREFIX-srv, PREFIX-sw, PREFIX-c0, ...
    #[arg(long, default_value = DEFAULT_PREFIX)]
    prefix: String,
    /// Number of client namespaces.
    #[arg(long, default_value_t = 2)]
    clients: usize,
    /// Queues of fw0 (one per Fairway shard).
    #[arg(long, default_value_t = 2)]
    queues: usize,
    /// The subnet: Fairway is host 1, client I host 10+I.
    #[arg(long, default_value_t = Subnet::DEFAULT)]
    subnet: Subnet,
    /// Create fwtap0 as a multi-queue TAP (for Fairway over TAP with
    /// several shards).
    #[arg(long)]
    tap_multi_queue: bool,
    /// MTU of every interface: 1500, or up to 9000 for jumbo frames
    /// (Fairway over AF_XDP then takes each in several UMEM frames).
    #[arg(long, default_value_t = testbed::MTU, value_parser = parse_mtu)]
    mtu: u32,
    /// IPv4 only: no fd77::/64 addresses for the clients (by default
    /// client I is also fd77::a + I, and Fairway fd77::1 when started with
    /// --ip fd77::1/64).
    #[arg(long)]
    no_ipv6: bool,
    /// One-way delay of emulated links, each direction (e.g. 25ms).
    #[arg(long, value_parser = parse_duration, help_heading = "Link emulation")]
    delay: Option<Duration>,
    /// Rate of emulated links (e.g. 100mbit).
    #[arg(long, value_parser = parse_rate, help_heading = "Link emulation")]
    rate: Option<u64>,
    /// Queue in front of the rate limit (e.g. 256kb).
    #[arg(long, value_parser = parse_size, help_heading = "Link emulation")]
    queue: Option<u64>,
    /// Random loss (e.g. 1%).
    #[arg(long, value_parser = parse_percent, help_heading = "Link emulation")]
    loss: Option<f64>,
    /// Share of frames reordered (e.g. 5%).
    #[arg(long, value_parser = parse_percent, help_heading = "Link emulation")]
    reorder: Option<f64>,
    /// Extra delay of a reordered frame (e.g. 10ms).
    #[arg(long, value_parser = parse_duration, help_heading = "Link emulation")]
    reorder_delay: Option<Duration>,
    /// Seed of the emulators' random choices.
    #[arg(long, help_heading = "Link emulation")]
    seed: Option<u64>,
    /// Apply the plain link options only to client I (repeatable).
    #[arg(long = "client", value_name = "I", help_heading = "Link emulation")]
    clients_linked: Vec<usize>,
    /// One client's link: I:KEY=VALUE,... with keys delay, rate, queue,
    /// loss, reorder, reorder-delay, seed, on top of the plain options
    /// (repeatable; `I:` alone puts client I behind the emulator with the
    /// plain options only, or none).
    #[arg(long = "link", value_name = "I:SETTINGS", value_parser = parse_client_link, help_heading = "Link emulation")]
    links: Vec<(usize, LinkParams)>,
    /// A link in front of the server that every client's traffic crosses
    /// (a shared bottleneck): KEY=VALUE,... with the keys of --link, e.g.
    /// rate=20mbit,queue=250kb. Client links then carry only what is
    /// theirs (e.g. each its own delay).
    #[arg(long, value_name = "SETTINGS", value_parser = LinkParams::parse_list, help_heading = "Link emulation")]
    server_link: Option<LinkParams>,
    /// The fairway-linkem binary (default: $FAIRWAY_LINKEM, else beside
    /// this binary or in target/release).
    #[arg(long, value_name = "PATH", help_heading = "Link emulation")]
    linkem: Option<PathBuf>,
}

fn parse_client_link(s: &str) -> Result<(usize, LinkParams), String> {
    let (client, settings) =
        s.split_once(':').ok_or_else(|| format!("`{s}` is not I:SETTINGS (e.g. 0:delay=25ms,rate=100mbit)"))?;
    let client = client.trim().parse().map_err(|_| format!("`{client}` in `{s}` is not a client number"))?;
    Ok((client, LinkParams::parse_list(settings)?))
}

/// `top`'s settings, and `base`'s where `top` has none.
fn overlay(base: &LinkParams, top: &LinkParams) -> LinkParams {
    LinkParams {
        delay: top.delay.or(base.delay),
        rate_bps: top.rate_bps.or(base.rate_bps),
        queue_bytes: top.queue_bytes.or(base.queue_bytes),
        loss_percent: top.loss_percent.or(base.loss_percent),
        reorder_percent: top.reorder_percent.or(base.reorder_percent),
        reorder_delay: top.reorder_delay.or(base.reorder_delay),
        seed: top.seed.or(base.seed),
    }
}

impl UpArgs {
    fn config(&self) -> Result<TestbedConfig, String> {
        let plain = LinkParams {
            delay: self.delay,
            rate_bps: self.rate,
            queue_bytes: self.queue,
            loss_percent: self.loss,
            reorder_percent: self.reorder,
            reorder_delay: self.reorder_delay,
            seed: self.seed,
        };
        if plain.is_empty() && !self.clients_linked.is_empty() {
            return Err("--client picks the clients the plain link options apply to; give one \
                        (--delay, --rate, --queue, --loss, --reorder, --reorder-delay, --seed)"
                .to_owned());
        }
        for &i in self.clients_linked.iter().chain(self.links.iter().map(|(i, _)| i)) {
            if i >= self.clients {
                return Err(format!("client {i} does not exist: there are {} (0..{})", self.clients, self.clients));
            }
        }
        let mut config = TestbedConfig::new(&self.prefix)
            .clients(self.clients)
            .queues(self.queues)
            .subnet(self.subnet)
            .mtu(self.mtu)
            .ipv6(!self.no_ipv6);
        config.tap_multi_queue = self.tap_multi_queue;
        config.linkem = self.linkem.clone();
        if let Some(params) = &self.server_link {
            config = config.server_link(params.clone());
        }
        for i in 0..self.clients {
            let plain_here = !plain.is_empty() && (self.clients_linked.is_empty() || self.clients_linked.contains(&i));
            let base = if plain_here { Some(plain.clone()) } else { None };
            let own = self.links.iter().filter(|(c, _)| *c == i).map(|(_, p)| p).fold(None, |acc, p| {
                Some(overlay(acc.as_ref().or(base.as_ref()).unwrap_or(&LinkParams::default()), p))
            });
            if let Some(params) = own.or(base) {
                config = config.link(i, params);
            }
        }
        Ok(config)
    }
}

/// `cargo xtask testbed ARGS`, with `--prefix` when not the default.
fn xtask_line(prefix: &str, args: &str) -> String {
    if prefix == DEFAULT_PREFIX {
        format!("cargo xtask testbed {args}")
    } else {
        format!("cargo xtask testbed {args} --prefix {prefix}")
    }
}

fn up(args: &UpArgs) -> Result<String, String> {
    let config = args.config()?;
    let testbed = Testbed::up(config).map_err(|e| e.to_string())?;
    let out = describe(&testbed);
    // It outlives this process, whatever happens to stdout.
    testbed.leak();
    Ok(out)
}

/// What `up` built, and what to try.
fn describe(testbed: &Testbed) -> String {
    let mut out = String::new();
    let c = testbed.config();
    let (srv, server_ip) = (testbed.server_ns(), testbed.server_ip());
    let len = testbed.prefix_len();
    let _ = writeln!(
        out,
        "testbed `{}` is up: {} client{}, {} queue{} on {SERVER_IF}, {}",
        c.prefix,
        c.clients,
        if c.clients == 1 { "" } else { "s" },
        c.queues,
        if c.queues == 1 { "" } else { "s" },
        c.subnet
    );
    let width = testbed.client_namespaces().iter().chain([&srv]).map(String::len).max().unwrap_or(0);
    let _ = writeln!(
        out,
        "  {srv:<width$}  {SERVER_IF} {}, {} queues, no IP: Fairway over AF_XDP as {server_ip}/{len}",
        testbed.server_mac(),
        c.queues
    );
    let _ = writeln!(
        out,
        "  {:<width$}  {TAP_IF}{}: Fairway over TAP as {server_ip}/{len}, with MAC {} (not fwtap0's own)",
        "",
        if c.tap_multi_queue { " (multi-queue)" } else { "" },
        testbed.tap_stack_mac()
    );
    let emulators = testbed.emulators();
    let emulated = if c.is_emulated() { ", and the link emulators" } else { "" };
    let _ = writeln!(out, "  {:<width$}  bridge br0{emulated}", testbed.switch_ns());
    if let Some(params) = &c.server_link {
        let pid = emulators.iter().find(|(port, _)| port == "srv").map_or(0, |(_, pid)| *pid);
        let _ = writeln!(
            out,
            "  {:<width$}  every client reaches {SERVER_IF} through fairway-linkem (pid {pid}): {params}",
            ""
        );
    }
    for i in 0..c.clients {
        let how = match c.link_of(i) {
            None => "direct".to_owned(),
            Some(params) => {
                let pid = emulators.iter().find(|(port, _)| *port == format!("c{i}")).map_or(0, |(_, pid)| *pid);
                format!("through fairway-linkem (pid {pid}): {params}")
            }
        };
        let v6 =
            if c.ipv6 { format!(" and {}/{}", testbed.client_ip6(i), testbed::IPV6_PREFIX_LEN) } else { String::new() };
        let _ = writeln!(
            out,
            "  {:<width$}  eth0 {}/{len}{v6} {}, {how}",
            testbed.client_ns(i),
            testbed.client_ip(i),
            testbed.client_mac(i)
        );
    }
    if c.is_emulated() {
        let _ = writeln!(out, "emulator logs: {}", testbed::state_dir(&c.prefix).display());
    }
    let _ = writeln!(out, "try:");
    if c.clients > 0 {
        let c0 = testbed.client_ns(0);
        let _ = writeln!(out, "  ip netns exec {c0} ping {server_ip}");
        let _ = writeln!(out, "  ip netns exec {c0} curl http://{server_ip}/");
        if c.ipv6 {
            let _ = writeln!(
                out,
                "  ip netns exec {c0} ping -6 {}   (Fairway started with --ip {})",
                testbed.server_ip6(),
                testbed.server_prefix6()
            );
        }
        let _ = writeln!(out, "  ip netns exec {srv} tcpdump -eni {SERVER_IF}");
    }
    let _ = writeln!(out, "  {}", xtask_line(&c.prefix, "status"));
    let _ = writeln!(out, "remove it with: {}", xtask_line(&c.prefix, "down"));
    out
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    if !testbed::is_root() {
        eprintln!("fairway-testbed: needs root (CAP_NET_ADMIN): run it as root");
        return ExitCode::FAILURE;
    }
    let result = match &cli.command {
        Cmd::Up(args) => up(args),
        Cmd::Down(p) => testbed::down(&p.prefix).map(|report| report.to_string()).map_err(|e| e.to_string()),
        Cmd::Status(p) => testbed::status(&p.prefix).map(|status| status.to_string()).map_err(|e| e.to_string()),
    };
    match result {
        Ok(text) => {
            // A closed stdout (`| head`) is not worth a panic.
            let _ = std::io::stdout().write_all(text.as_bytes());
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("fairway-testbed: {e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn config(args: &[&str]) -> Result<TestbedConfig, String> {
        let cli = Cli::try_parse_from(["fairway-testbed", "up"].iter().chain(args)).map_err(|e| e.to_string())?;
        let Cmd::Up(up) = cli.command else { unreachable!() };
        up.config()
    }

    #[test]
    fn plain_options_apply_to_every_client_or_the_chosen_ones() {
        assert_eq!(config(&[]).unwrap().mtu, 1500);
        assert_eq!(config(&["--mtu", "9000"]).unwrap().mtu, 9000);
        assert!(config(&[]).unwrap().ipv6, "dual-stack by default");
        assert!(!config(&["--no-ipv6"]).unwrap().ipv6);
        assert!(config(&["--mtu", "9001"]).unwrap_err().contains("not within 576..=9000"));
        let c = config(&["--clients", "3", "--delay", "5ms", "--rate", "100mbit"]).unwrap();
        for i in 0..3 {
            assert_eq!(c.link_of(i).unwrap().to_string(), "delay=5ms,rate=100mbit");
        }
        let c = config(&["--clients", "3", "--loss", "1%", "--client", "2"]).unwrap();
        assert!(c.link_of(0).is_none() && c.link_of(1).is_none());
        assert_eq!(c.link_of(2).unwrap().to_string(), "loss=1%");
        assert!(config(&["--client", "1"]).is_err());
        assert!(config(&["--clients", "2", "--delay", "1ms", "--client", "2"]).is_err());
        assert!(!config(&[]).unwrap().is_emulated());
    }

    #[test]
    fn link_sets_one_client_on_top_of_the_plain_options() {
        let c = config(&["--delay", "5ms", "--link", "1:delay=50ms,loss=1%"]).unwrap();
        assert_eq!(c.link_of(0).unwrap().to_string(), "delay=5ms");
        assert_eq!(c.link_of(1).unwrap().to_string(), "delay=50ms,loss=1%");
        let c = config(&["--link", "0:"]).unwrap();
        assert!(c.link_of(0).unwrap().is_empty());
        assert!(c.link_of(1).is_none());
        assert!(config(&["--link", "0"]).is_err());
        assert!(config(&["--link", "5:delay=1ms"]).is_err());
        assert!(config(&["--link", "0:jitter=1ms"]).is_err());
        assert!(config(&["--delay", "5"]).is_err());
    }

    #[test]
    fn server_link_puts_one_bottleneck_in_front_of_the_server() {
        let c =
            config(&["--clients", "2", "--server-link", "rate=20mbit,queue=250kb", "--link", "1:delay=128ms"]).unwrap();
        assert_eq!(c.server_link.as_ref().unwrap().to_string(), "rate=20mbit,queue=250kb");
        assert!(c.link_of(0).is_none());
        assert_eq!(c.link_of(1).unwrap().to_string(), "delay=128ms");
        assert!(c.is_emulated());
        assert!(config(&["--server-link", "speed=1"]).is_err());
        assert!(config(&[]).unwrap().server_link.is_none());
    }
}
