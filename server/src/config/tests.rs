use std::io::Write;

use super::*;

/// Every key, as a flag and as a TOML key.
const KEYS: &[&str] = &[
    "config",
    "backend",
    "listen",
    "port",
    "tls-cert",
    "tls-key",
    "tls-port",
    "tls-listen",
    "handshake-timeout",
    "tls-only",
    "iface",
    "ip",
    "gateway",
    "queues",
    "tap-name",
    "shards",
    "busy-poll-us",
    "latency",
    "no-adaptive-busy-poll",
    "itr-us",
    "batch",
    "no-adaptive-batch",
    "no-multi-buffer",
    "no-tx-checksum-offload",
    "prefer-busy-poll",
    "recycle",
    "no-recycle",
    "steering",
    "root",
    "max-bytes",
    "max-body",
    "max-collect",
    "max-head",
    "max-request-line",
    "header-timeout",
    "body-timeout",
    "body-min-rate",
    "no-http2",
    "http2-max-streams",
    "idle-timeout",
    "response-timeout",
    "max-connections",
    "socket-buffer",
    "tcp-user-timeout",
    "time-wait",
    "challenge-acks",
    "invalid-ack-interval",
    "fast-start",
    "initial-window",
    "shutdown-grace",
    "log",
    "fairness",
    "capacity",
    "weight",
    "upstream",
    "route",
];

#[track_caller]
fn load(args: &[&str]) -> Result<Config, ConfigError> {
    Config::load(std::iter::once("fairway").chain(args.iter().copied()), None)
}

#[track_caller]
fn ok(args: &[&str]) -> Config {
    load(args).unwrap_or_else(|e| panic!("{args:?}: {e}"))
}

#[track_caller]
fn err(args: &[&str]) -> String {
    let e = load(args).expect_err("an error");
    let text = e.to_string();
    if !matches!(e, ConfigError::Cli(_)) {
        assert!(!text.trim_end().contains('\n'), "one line: {text}");
    }
    text
}

/// A TOML file that lives as long as the returned guard.
struct TempFile(PathBuf);

impl TempFile {
    fn new(name: &str, text: &str) -> TempFile {
        let path = std::env::temp_dir().join(format!("fairway-config-{}-{name}.toml", std::process::id()));
        std::fs::File::create(&path).and_then(|mut f| f.write_all(text.as_bytes())).expect("temp file");
        TempFile(path)
    }
    fn path(&self) -> &str {
        self.0.to_str().expect("UTF-8 temp path")
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
    }
}

#[test]
fn defaults() {
    let c = ok(&[]);
    assert_eq!(c.backend, Backend::Kernel);
    assert_eq!(c.listen, "127.0.0.1:8080".parse().unwrap());
    assert_eq!((c.iface, c.ip, c.gateway), (None, None, None));
    assert_eq!(c.queues, 1);
    assert_eq!(c.tap_name, "fwtap0");
    assert_eq!(c.shards, std::thread::available_parallelism().map_or(1, usize::from));
    // The kernel backend (the default) does not busy-poll unless asked;
    // the rest of the loop's defaults are the userspace backends'.
    assert_eq!(c.runtime, LoopConfig { busy_poll: Duration::ZERO, ..LoopConfig::default() });
    let afxdp = ok(&["--backend", "afxdp", "--iface", "fw0", "--ip", "10.0.0.1/24"]);
    assert_eq!(afxdp.runtime, LoopConfig::default());
    assert_eq!(afxdp.runtime.busy_poll, Duration::from_micros(50));
    assert_eq!(c.runtime.itr, Duration::ZERO);
    assert_eq!(c.runtime.batch, 64);
    assert!(c.runtime.adaptive_batch && c.runtime.adaptive_busy_poll);
    assert!(!c.runtime.latency, "busy polling kept within a wake-up's cost unless asked");
    assert!(ok(&["--latency"]).runtime.latency);
    assert!(c.multi_buffer && !c.prefer_busy_poll, "multi-buffer on, the driver's busy polling off");
    assert!(c.tx_checksum_offload, "checksum offload asked for by default");
    assert_eq!(c.root, None);
    assert_eq!((c.max_bytes, c.max_body), (1 << 30, 64 << 20));
    assert_eq!((c.max_head, c.max_request_line), (16 << 10, 8 << 10));
    assert_eq!((c.header_timeout, c.idle_timeout), (Duration::from_secs(10), Duration::from_secs(60)));
    assert_eq!(c.response_timeout, Duration::from_secs(30));
    assert_eq!(c.tcp_user_timeout, Duration::from_secs(300));
    assert_eq!(c.max_connections, 10_000);
    assert_eq!(c.socket_buffer, 1 << 20);
    assert_eq!(c.shutdown_grace, Duration::from_secs(5));
    assert_eq!(c.log, "info");
    assert_eq!(c.fairness, Fairness::Off);
    assert_eq!(c.capacity, None);
    assert!(c.weights.is_empty());
}

#[test]
fn rust_log_is_the_fallback_for_log() {
    let c = Config::load(["fairway"], Some("fairway=debug")).unwrap();
    assert_eq!(c.log, "fairway=debug");
    let c = Config::load(["fairway", "--log", "warn"], Some("fairway=debug")).unwrap();
    assert_eq!(c.log, "warn");
}

#[test]
fn every_flag_parses() {
    let c = ok(&[
        "--backend",
        "afxdp",
        "--iface",
        "fw0",
        "--ip",
        "10.77.0.1/24",
        "--gateway",
        "10.77.0.254",
        "--queues",
        "2",
        "--shards",
        "2",
        "--busy-poll-us",
        "0",
        "--itr-us",
        "25",
        "--batch",
        "256",
        "--no-adaptive-batch",
        "--no-adaptive-busy-poll",
        "--no-multi-buffer",
        "--no-tx-checksum-offload",
        "--prefer-busy-poll",
        "--max-bytes",
        "2GiB",
        "--max-body",
        "10MB",
        "--max-head",
        "32K",
        "--max-request-line",
        "4096",
        "--header-timeout",
        "500ms",
        "--idle-timeout",
        "2m",
        "--tcp-user-timeout",
        "45s",
        "--max-connections",
        "100000",
        "--shutdown-grace",
        "250us",
        "--log",
        "debug",
        "--fairness",
        "equal-rate",
        "--capacity",
        "2.5gbit",
        "--tap-name",
        "tap9",
        "--listen",
        "0.0.0.0:80",
        "--weight",
        "10.77.0.12=2",
        "--weight",
        "10.77.0.0/24=0.5",
    ]);
    assert_eq!(c.backend, Backend::Afxdp);
    assert_eq!(c.ip, Some(IpPrefix { addr: Ipv4Addr::new(10, 77, 0, 1), prefix: 24 }));
    assert_eq!(c.gateway, Some(Ipv4Addr::new(10, 77, 0, 254)));
    assert_eq!((c.queues, c.shards), (2, 2));
    assert_eq!(c.runtime.busy_poll, Duration::ZERO);
    assert_eq!(c.runtime.itr, Duration::from_micros(25));
    assert_eq!(c.runtime.batch, 256);
    assert!(!c.runtime.adaptive_batch && !c.runtime.adaptive_busy_poll);
    assert!(!c.multi_buffer && c.prefer_busy_poll && !c.tx_checksum_offload);
    assert_eq!((c.max_bytes, c.max_body, c.max_head, c.max_request_line), (2 << 30, 10_000_000, 32 << 10, 4096));
    assert_eq!(c.header_timeout, Duration::from_millis(500));
    assert_eq!(c.idle_timeout, Duration::from_secs(120));
    assert_eq!(c.tcp_user_timeout, Duration::from_secs(45));
    assert_eq!(c.shutdown_grace, Duration::from_micros(250));
    assert_eq!(c.max_connections, 100_000);
    assert_eq!(c.fairness, Fairness::EqualRate);
    assert_eq!(c.capacity, Some(Bandwidth { bits_per_sec: 2_500_000_000 }));
    assert_eq!(c.tap_name, "tap9");
    assert_eq!(c.listen, "0.0.0.0:80".parse().unwrap());
    let weights: Vec<String> = c.weights.iter().map(ToString::to_string).collect();
    assert_eq!(weights, ["10.77.0.12/32=2", "10.77.0.0/24=0.5"], "longest prefix first");
}

#[test]
fn the_file_sets_what_the_command_line_does_not() {
    let file = TempFile::new(
        "precedence",
        r#"
backend = "tap"
ip = "10.0.0.1/24"
shards = 2
batch = 32
itr-us = 40
max-body = "1MiB"
socket-buffer = "4MiB"
header-timeout = 3
no-adaptive-batch = true
no-adaptive-busy-poll = true
prefer-busy-poll = true
capacity = "100mbit"
fairness = "seed"
"#,
    );
    let c = ok(&["--config", file.path(), "--batch", "128", "--ip", "192.168.7.2/16"]);
    assert_eq!(c.backend, Backend::Tap, "from the file");
    assert_eq!(c.runtime.batch, 128, "the command line wins");
    assert_eq!(c.ip, Some(IpPrefix { addr: Ipv4Addr::new(192, 168, 7, 2), prefix: 16 }), "the command line wins");
    assert_eq!(c.shards, 2);
    assert_eq!(c.runtime.itr, Duration::from_micros(40));
    assert_eq!(c.max_body, 1 << 20);
    assert_eq!(c.socket_buffer, 4 << 20);
    assert_eq!(c.header_timeout, Duration::from_secs(3));
    assert!(!c.runtime.adaptive_batch && !c.runtime.adaptive_busy_poll);
    assert!(c.prefer_busy_poll && c.multi_buffer, "the file's flag, and the default");
    assert_eq!(c.capacity, Some(Bandwidth { bits_per_sec: 100_000_000 }));
    assert_eq!(c.fairness, Fairness::Seed);
    assert_eq!(c.max_connections, 10_000, "neither: the default");
}

#[test]
fn the_file_accepts_every_key_but_config() {
    let dir = std::env::temp_dir();
    let file = TempFile::new(
        "every-key",
        &format!(
            r#"
backend = "afxdp"
listen = "127.0.0.1:9090"
iface = "fw0"
ip = "10.77.0.1/24"
gateway = "10.77.0.2"
queues = 1
tap-name = "t0"
shards = 1
busy-poll-us = 10
itr-us = 10
batch = 16
no-adaptive-batch = false
root = "{}"
max-bytes = 1000
max-body = 1000
max-head = 1000
max-request-line = 100
header-timeout = "1s"
body-timeout = "4s"
body-min-rate = "2KiB"
idle-timeout = "1s"
response-timeout = "3s"
max-connections = 5
tcp-user-timeout = "30s"
time-wait = "5s"
challenge-acks = 50
invalid-ack-interval = "100ms"
shutdown-grace = "1s"
log = "warn"
fairness = "off"
capacity = "1gbit"
weight = {{ "10.77.0.12" = 2 }}
"#,
            dir.display()
        ),
    );
    let c = ok(&["--config", file.path()]);
    assert_eq!(c.root.as_deref(), Some(dir.as_path()));
    assert_eq!(c.listen, "127.0.0.1:9090".parse().unwrap());
    assert_eq!(c.weights.weight_of(ip("10.77.0.12")).get(), 2.0);
    assert_eq!((c.body_timeout, c.body_min_rate), (Duration::from_secs(4), 2048));
    assert_eq!(c.response_timeout, Duration::from_secs(3));
    assert_eq!(
        (c.tcp_user_timeout, c.time_wait, c.challenge_acks, c.invalid_ack_interval),
        (Duration::from_secs(30), Duration::from_secs(5), 50, Duration::from_millis(100))
    );
    let nested = TempFile::new("nested", "config = \"other.toml\"\n");
    let e = err(&["--config", nested.path()]);
    assert!(e.contains(":1:") && e.contains("config"), "{e}");
}

#[test]
fn file_errors_name_the_file_and_line() {
    let file = TempFile::new("bad", "backend = \"kernel\"\nbatchh = 3\n");
    let e = err(&["--config", file.path()]);
    assert!(e.starts_with(file.path()) && e.contains(":2:") && e.contains("batchh"), "{e}");
    let file = TempFile::new("bad-value", "shards = 1\nip = \"10.0.0.1/40\"\n");
    let e = err(&["--config", file.path()]);
    assert!(e.contains(":2:") && e.contains("bad prefix"), "{e}");
    let e = err(&["--config", "/nonexistent/fairway.toml"]);
    assert!(e.starts_with("/nonexistent/fairway.toml: "), "{e}");
}

#[test]
fn validation_errors_are_one_clear_line() {
    let cases: &[(&[&str], &str)] = &[
        (&["--backend", "afxdp", "--ip", "10.0.0.1/24"], "--backend afxdp needs --iface"),
        (&["--backend", "afxdp", "--iface", "fw0"], "--backend afxdp needs --ip"),
        (&["--backend", "tap"], "--backend tap needs --ip"),
        (&["--shards", "0"], "--shards must be at least 1"),
        (&["--queues", "0"], "--queues must be at least 1"),
        (&["--shards", "2", "--queues", "3"], "--queues 3 is more than --shards 2"),
        (&["--batch", "0"], "--batch must be at least 1"),
        (&["--max-connections", "0"], "--max-connections must be at least 1"),
        (&["--max-body", "0"], "--max-body must be at least 1"),
        (&["--max-head", "1K", "--max-request-line", "2K"], "--max-request-line 2048 is more than --max-head 1024"),
        (&["--header-timeout", "0s"], "--header-timeout must be more than 0"),
        (&["--idle-timeout", "0"], "--idle-timeout must be more than 0"),
        (&["--ip", "10.0.0.1/24", "--gateway", "10.0.1.1"], "--gateway 10.0.1.1 is not another address"),
        (&["--ip", "10.0.0.1/24", "--gateway", "10.0.0.1"], "--gateway 10.0.0.1 is not another address"),
        (&["--gateway", "10.0.0.1"], "--gateway needs --ip"),
        (&["--root", "/nonexistent/www"], "--root /nonexistent/www: not a directory"),
        (&["--log", "fairway=loud"], "--log 'fairway=loud'"),
        (&["--capacity", "0mbit"], "--capacity must be more than 0"),
        (&["--socket-buffer", "1KiB"], "--socket-buffer 1024 is outside 16KiB..256MiB"),
        (&["--socket-buffer", "1GiB"], "--socket-buffer 1073741824 is outside 16KiB..256MiB"),
        (&["--weight", "10.0.0.0/24=1", "--weight", "10.0.0.9/24=2"], "--weight 10.0.0.0/24 is given twice (1 and 2)"),
    ];
    for (args, expected) in cases {
        let e = err(args);
        assert!(e.contains(expected), "{args:?}: {e:?} lacks {expected:?}");
    }
}

#[test]
fn bad_values_are_refused_by_the_parser() {
    let cases: &[(&[&str], &str)] = &[
        (&["--ip", "10.0.0.1/33"], "bad prefix '/33'"),
        (&["--ip", "10.0.0.1"], "not ADDR/PREFIX"),
        (&["--ip", "10.0.0/24"], "not an IPv4 address"),
        (&["--backend", "dpdk"], "dpdk"),
        (&["--fairness", "max-min"], "max-min"),
        (&["--max-body", "12XB"], "unknown size unit"),
        (&["--header-timeout", "1h"], "unknown time unit"),
        (&["--capacity", "fast"], "not a rate"),
        (&["--listen", "localhost"], "localhost"),
        (&["--shards", "-1"], "-1"),
        (&["--no-such-flag"], "no-such-flag"),
        (&["--weight", "10.0.0.1"], "'10.0.0.1' is not ADDR[/PREFIX]=WEIGHT"),
        (&["--weight", "10.0.0=2"], "'10.0.0' is not an IPv4 address or ADDR/PREFIX"),
        (&["--weight", "10.0.0.1/33=2"], "bad prefix '/33'"),
        (&["--weight", "10.0.0.1=heavy"], "weight 'heavy' in '10.0.0.1=heavy' is not a number"),
        (&["--weight", "10.0.0.1=0"], "weight 0 for 10.0.0.1 is out of range: from 0.001 to 1000"),
        (&["--weight", "10.0.0.1=-1"], "weight -1 for 10.0.0.1 is out of range"),
        (&["--weight", "10.0.0.1=inf"], "weight inf for 10.0.0.1 is out of range"),
        (&["--weight", "10.0.0.1=NaN"], "weight NaN for 10.0.0.1 is out of range"),
        (&["--weight", "10.0.0.1=1001"], "weight 1001 for 10.0.0.1 is out of range"),
    ];
    for (args, expected) in cases {
        let e = err(args);
        assert!(e.contains(expected), "{args:?}: {e:?} lacks {expected:?}");
    }
}

#[test]
fn help_explains_every_key_with_its_default() {
    let help = Options::command().render_long_help().to_string();
    for key in KEYS {
        assert!(help.contains(&format!("--{key}")), "--help lacks --{key}");
    }
    // And the list above is every flag there is.
    let ids: Vec<String> = Options::command()
        .get_arguments()
        .filter_map(|a| a.get_long().map(str::to_owned))
        .filter(|l| l != "help" && l != "version")
        .collect();
    assert_eq!(ids, KEYS, "a flag was added or renamed: update KEYS and these tests");
    // The defaults the help states are the ones applied.
    let c = ok(&[]);
    for stated in [
        format!("[default: {}]", c.backend),
        format!("[default: {}]", c.listen),
        format!("[default: {}]", c.queues),
        format!("[default: {}]", c.tap_name),
        format!(
            "[default: {}; {} on the kernel backend]",
            ok(&["--backend", "tap", "--ip", "10.0.0.1/24"]).runtime.busy_poll.as_micros(),
            c.runtime.busy_poll.as_micros()
        ),
        format!("[default: {}]", c.runtime.itr.as_micros()),
        format!("[default: {}]", c.runtime.batch),
        format!("[default: {}]", c.max_connections),
        "[default: $RUST_LOG, else info]".to_owned(),
        "[default: all cores]".to_owned(),
        "[default: 1GiB]".to_owned(),
        "[default: 64MiB]".to_owned(),
        "[default: 16KiB]".to_owned(),
        "[default: 8KiB]".to_owned(),
        "[default: 10s]".to_owned(),
        "[default: 20s]".to_owned(),
        "[default: 500]".to_owned(),
        "[default: 60s]".to_owned(),
        "[default: 30s]".to_owned(),
        "[default: 5s]".to_owned(),
        "[default: off]".to_owned(),
        "[default: 1 for every client]".to_owned(),
        "[default: 1MiB]".to_owned(),
        "[default: 5m]".to_owned(),
        "[default: 60s]".to_owned(),
        format!("[default: {}]", c.challenge_acks),
        "[default: 500ms]".to_owned(),
        format!("[default: {}]", c.recycle),
        format!("[default: {}]", c.steering),
    ] {
        assert!(help.replace('\n', " ").contains(&stated), "--help lacks {stated}:\n{help}");
    }
    assert_eq!(c.max_bytes, "1GiB".parse::<ByteSize>().unwrap().0);
    assert_eq!(c.max_body, "64MiB".parse::<ByteSize>().unwrap().0);
    assert_eq!(c.max_head as u64, "16KiB".parse::<ByteSize>().unwrap().0);
    assert_eq!(c.max_request_line as u64, "8KiB".parse::<ByteSize>().unwrap().0);
    assert_eq!(c.header_timeout, "10s".parse::<Span>().unwrap().0);
    assert_eq!(c.idle_timeout, "60s".parse::<Span>().unwrap().0);
    assert_eq!((c.body_timeout, c.body_min_rate), ("20s".parse::<Span>().unwrap().0, 500));
    assert_eq!(c.shutdown_grace, "5s".parse::<Span>().unwrap().0);
    assert_eq!(c.tcp_user_timeout, "5m".parse::<Span>().unwrap().0);
    assert_eq!(c.invalid_ack_interval, "500ms".parse::<Span>().unwrap().0);
    let stack = fairway_stack::TcpConfig::default();
    assert_eq!(
        (c.tcp_user_timeout, c.time_wait, c.challenge_acks, c.invalid_ack_interval),
        (
            stack.user_timeout.into(),
            stack.time_wait.into(),
            stack.challenge_acks_per_sec,
            stack.invalid_ack_interval.into()
        ),
        "the server's defaults are the stack's"
    );
}

#[test]
fn help_and_version_are_not_errors_to_report() {
    for flag in ["--help", "-h", "--version"] {
        match load(&[flag]) {
            Err(ConfigError::Cli(e)) => assert_eq!(e.exit_code(), 0, "{flag}"),
            other => panic!("{flag}: {other:?}"),
        }
    }
}

#[test]
fn prefixes_know_their_subnet() {
    let p: IpPrefix = "10.1.2.3/16".parse().unwrap();
    assert!(p.contains(Ipv4Addr::new(10, 1, 200, 1)));
    assert!(!p.contains(Ipv4Addr::new(10, 2, 0, 1)));
    let all: IpPrefix = "10.1.2.3/0".parse().unwrap();
    assert!(all.contains(Ipv4Addr::new(192, 0, 2, 1)));
    let host: IpPrefix = "10.1.2.3/32".parse().unwrap();
    assert!(!host.contains(Ipv4Addr::new(10, 1, 2, 4)));
    assert_eq!(host.to_string(), "10.1.2.3/32");
}

#[test]
fn the_http_layer_gets_the_limits_and_timeouts() {
    let config = ok(&[
        "--max-request-line",
        "1KiB",
        "--max-head",
        "4KiB",
        "--max-body",
        "1MiB",
        "--max-bytes",
        "2MiB",
        "--header-timeout",
        "3s",
        "--idle-timeout",
        "7s",
        "--response-timeout",
        "2s",
        "--body-timeout",
        "9s",
        "--body-min-rate",
        "1KiB",
    ]);
    let http = config.http();
    assert_eq!((http.body_timeout, http.body_min_rate), (Duration::from_secs(9), 1024));
    assert_eq!((http.max_request_line, http.max_head, http.max_body, http.max_bytes), (1024, 4096, 1 << 20, 2 << 20));
    assert_eq!((http.header_timeout, http.idle_timeout), (Duration::from_secs(3), Duration::from_secs(7)));
    assert_eq!(http.response_timeout, Duration::from_secs(2));
    assert_eq!(http.server_name, "fairway");
}

fn ip(s: &str) -> std::net::IpAddr {
    s.parse().unwrap()
}

#[test]
fn weights_merge_per_prefix_the_command_line_winning() {
    let file = TempFile::new(
        "weights",
        r#"
fairness = "equal-rate"

[weight]
"10.77.0.12" = 2
"10.77.0.0/24" = 0.5
"10.0.0.0/8" = 4
"#,
    );
    let c = ok(&["--config", file.path(), "--weight", "10.77.0.12=3", "--weight", "192.168.0.0/16=0.25"]);
    let w = |a| c.weights.weight_of(ip(a)).get();
    assert_eq!(w("10.77.0.12"), 3.0, "the command line wins for the same clients");
    assert_eq!(w("10.77.0.13"), 0.5, "the file's /24");
    assert_eq!(w("10.1.2.3"), 4.0, "the file's /8");
    assert_eq!(w("192.168.7.7"), 0.25, "the command line adds to the file");
    assert_eq!(w("172.16.0.1"), 1.0, "no prefix matches: 1");
    // The same clients written another way are the same key.
    let c = ok(&["--config", file.path(), "--weight", "10.77.0.99/24=8"]);
    assert_eq!(c.weights.weight_of(ip("10.77.0.13")).get(), 8.0);
    assert_eq!(c.weights.iter().count(), 3);
}

#[test]
fn the_file_takes_weights_as_a_list_of_what_the_flag_takes_too() {
    let file = TempFile::new("weight-list", "weight = [\"10.77.0.12=2\", \"10.77.0.0/24=0.5\"]\n");
    let c = ok(&["--config", file.path()]);
    assert_eq!(c.weights.weight_of(ip("10.77.0.12")).get(), 2.0);
    assert_eq!(c.weights.weight_of(ip("10.77.0.1")).get(), 0.5);
}

#[test]
fn bad_weights_in_the_file_name_the_line() {
    let cases = [
        ("fairness = \"seed\"\n[weight]\n\"10.0.0.1/40\" = 1\n", "bad prefix '/40'"),
        ("fairness = \"seed\"\n[weight]\n\"10.0.0.1\" = 0\n", "weight 0 for 10.0.0.1 is out of range"),
        ("fairness = \"seed\"\n[weight]\n\"10.0.0.1\" = \"heavy\"\n", "heavy"),
        ("fairness = \"seed\"\nweight = [\"10.0.0.1\"]\n", "not ADDR[/PREFIX]=WEIGHT"),
        ("fairness = \"seed\"\nweight = 2\n", "a table of clients and weights"),
    ];
    for (text, expected) in cases {
        let file = TempFile::new("bad-weight", text);
        let e = err(&["--config", file.path()]);
        assert!(e.starts_with(file.path()) && e.contains(expected), "{text:?}: {e:?} lacks {expected:?}");
        assert!(!e.contains(":1:"), "the line of the weight, not the file's first: {e}");
    }
    let file = TempFile::new("twice", "[weight]\n\"10.0.0.0/24\" = 1\n\"10.0.0.1/24\" = 2\n");
    assert!(err(&["--config", file.path()]).contains("--weight 10.0.0.0/24 is given twice"));
}

#[test]
fn the_longest_matching_prefix_decides_a_clients_weight() {
    let weights = ["0.0.0.0/0=0.5", "10.0.0.0/8=2", "10.1.0.0/16=3", "10.1.2.3=7"].map(|w| w.parse().unwrap());
    let weights = ClientWeights::new(weights.into_iter().rev().collect()).unwrap();
    let w = |a| weights.weight_of(ip(a)).get();
    assert_eq!(w("10.1.2.3"), 7.0);
    assert_eq!(w("10.1.2.4"), 3.0);
    assert_eq!(w("10.2.0.1"), 2.0);
    assert_eq!(w("192.0.2.1"), 0.5, "/0 matches every IPv4 client");
    assert_eq!(w("::ffff:10.1.2.3"), 7.0, "a dual-stack listener's IPv4 client");
    assert_eq!(w("2001:db8::1"), 1.0, "IPv6 clients have no prefixes");
    let none = ClientWeights::default();
    assert_eq!(none.weight_of(ip("10.1.2.3")), Weight::default());
    assert_eq!(Weight::default().get(), 1.0);
}

#[test]
fn a_weight_names_its_network_not_the_address_it_was_written_with() {
    let w: ClientWeight = " 10.77.0.12/24 = 0.5".parse().unwrap();
    assert_eq!(w.clients(), AnyPrefix::V4(IpPrefix { addr: Ipv4Addr::new(10, 77, 0, 0), prefix: 24 }));
    assert_eq!(w.weight().get(), 0.5);
    assert_eq!(w.to_string(), "10.77.0.0/24=0.5");
    assert_eq!("10.77.0.12=1e1".parse::<ClientWeight>().unwrap().to_string(), "10.77.0.12/32=10");
    assert_eq!(Weight::new(Weight::MIN).map(Weight::get), Some(0.001));
    assert_eq!(Weight::new(Weight::MAX + 1.0), None);
}

#[test]
fn weights_take_ipv6_prefixes_beside_ipv4_ones() {
    let weights = ClientWeights::new(
        ["fd77::/64=2", "fd77::5=3", "0.0.0.0/0=0.5", "fd77::9/64=4"]
            .iter()
            .map(|s| s.parse().unwrap())
            .filter(|w: &ClientWeight| w.to_string() != "fd77::/64=4")
            .collect(),
    )
    .unwrap();
    let w = |s: &str| weights.weight_of(ip(s)).get();
    assert_eq!(w("fd77::5"), 3.0, "the /128 is the longest match");
    assert_eq!(w("fd77::9"), 2.0);
    assert_eq!(w("2001:db8::1"), 1.0, "no prefix of its own, and IPv4's /0 is IPv4's");
    assert_eq!(w("10.0.0.1"), 0.5);
    assert_eq!("fd77::5=3".parse::<ClientWeight>().unwrap().to_string(), "fd77::5/128=3");
    assert_eq!(" fd77::9/64 = 4".parse::<ClientWeight>().unwrap().to_string(), "fd77::/64=4", "the network");
    let twice = ClientWeights::new(vec!["fd77::/64=2".parse().unwrap(), "fd77::1/64=3".parse().unwrap()]);
    assert!(twice.unwrap_err().contains("--weight fd77::/64 is given twice"));
    assert!("fd77::x=2".parse::<ClientWeight>().unwrap_err().contains("nor an IPv6 address"));
}

#[test]
fn gateway_takes_one_router_per_family() {
    let base = ["--backend", "tap", "--ip", "10.0.0.1/24", "--ip", "fd77::1/64"];
    fn with<'a>(base: &[&'a str], extra: &[&'a str]) -> Vec<&'a str> {
        [base, extra].concat()
    }
    let with = |extra: &[&'static str]| with(&base, extra);
    let c = ok(&with(&["--gateway", "10.0.0.254", "--gateway", "fe80::1"]));
    assert_eq!((c.gateway, c.gateway6), (Some(Ipv4Addr::new(10, 0, 0, 254)), Some("fe80::1".parse().unwrap())));
    assert_eq!(ok(&with(&["--gateway", "fd77::fe"])).gateway6, Some("fd77::fe".parse().unwrap()));
    assert_eq!(ok(&with(&[])).gateway6, None, "the advertised routers then");
    let file = TempFile::new("gateways", "gateway = [\"10.0.0.254\", \"fe80::1\"]\n");
    let c = ok(&[&base[..], &["--config", file.path()]].concat());
    assert_eq!((c.gateway.is_some(), c.gateway6.is_some()), (true, true));
    for (args, expected) in [
        (with(&["--gateway", "fe80::1", "--gateway", "fe80::2"]), "--gateway fe80::2: one IPv6 gateway at most"),
        (with(&["--gateway", "2001:db8::1"]), "--gateway 2001:db8::1 is neither link-local nor another address"),
        (with(&["--gateway", "fd77::1"]), "is neither link-local nor another address"),
        (vec!["--ip", "10.0.0.1/24", "--gateway", "fe80::1"], "--gateway fe80::1 needs an IPv6 --ip"),
    ] {
        let e = err(&args);
        assert!(e.contains(expected), "{args:?}: {e}");
    }
}

#[test]
fn ip_takes_one_ipv4_and_any_ipv6_addresses() {
    let c = ok(&["--backend", "tap", "--ip", "fd77::1/64", "--ip", "10.77.0.1/24", "--ip", "2001:db8::7/48"]);
    assert_eq!(c.ip, Some(IpPrefix { addr: Ipv4Addr::new(10, 77, 0, 1), prefix: 24 }));
    let v6 = |s: &str, prefix| Ip6Prefix { addr: s.parse().unwrap(), prefix };
    assert_eq!(c.ip6, [v6("fd77::1", 64), v6("2001:db8::7", 48)]);
    assert_eq!(ok(&["--backend", "tap", "--ip", "10.0.0.1/24"]).ip6, []);
    // The file takes one or a list.
    let file = TempFile::new("ip-list", "backend = \"tap\"\nip = [\"10.0.0.1/24\", \"fd77::5/64\"]\n");
    let c = ok(&["--config", file.path()]);
    assert_eq!((c.ip.map(|p| p.addr), c.ip6), (Some(Ipv4Addr::new(10, 0, 0, 1)), vec![v6("fd77::5", 64)]));
    let file = TempFile::new("ip-bad-list", "ip = [\"10.0.0.1/24\", \"fd77::5/200\"]\n");
    assert!(err(&["--config", file.path()]).contains("bad prefix '/200'"));
    for (args, expected) in [
        (&["--ip", "10.0.0.1/24", "--ip", "10.0.0.2/24"][..], "--ip 10.0.0.2/24: one IPv4 address at most"),
        (&["--backend", "tap", "--ip", "fd77::1/64"], "needs --ip ADDR/PREFIX (the stack's own IPv4 address) beside"),
        (&["--ip", "fd77::1/129"], "bad prefix '/129'"),
        (&["--ip", "fd77::x/64"], "'fd77::x' is not an IPv6 address"),
        (&["--ip", "ff02::1/64"], "--ip ff02::1/64: not an address an interface can have"),
        (&["--ip", "::/0"], "not an address an interface can have"),
    ] {
        let e = err(args);
        assert!(e.contains(expected), "{args:?}: {e}");
    }
}

#[test]
fn tls_takes_a_certificate_and_its_key_and_a_port_of_its_own() {
    let c = ok(&["--tls-cert", "c.pem", "--tls-key", "k.pem"]);
    let tls = c.tls.as_ref().expect("TLS on");
    assert_eq!((tls.cert.as_path(), tls.key.as_path()), (Path::new("c.pem"), Path::new("k.pem")));
    assert_eq!((tls.port, tls.listen, tls.only), (443, "127.0.0.1:8443".parse().unwrap(), false));
    assert_eq!(c.ports(), (vec![80, 443], vec![443]));
    let c = ok(&["--tls-cert", "c.pem", "--tls-key", "k.pem", "--port", "8080", "--tls-port", "8443"]);
    assert_eq!(c.ports(), (vec![8080, 8443], vec![8443]));
    let c = ok(&["--tls-cert", "c.pem", "--tls-key", "k.pem", "--tls-only"]);
    assert_eq!(c.ports(), (vec![443], vec![443]));
    assert_eq!(ok(&["--port", "81"]).ports(), (vec![81], vec![]));
    let c = ok(&["--listen", "[::]:80", "--tls-cert", "c.pem", "--tls-key", "k.pem"]);
    assert_eq!(c.tls.unwrap().listen, "[::]:8443".parse().unwrap(), "the --listen address, port 8443");
    let file = TempFile::new("tls", "tls-cert = \"c.pem\"\ntls-key = \"k.pem\"\ntls-port = 4443\n");
    let c = ok(&["--config", file.0.to_str().unwrap()]);
    assert_eq!(c.tls.unwrap().port, 4443);
}

#[test]
fn tls_flags_without_their_pair_or_on_the_plain_port_are_refused() {
    assert!(err(&["--tls-cert", "c.pem"]).contains("--tls-key"));
    assert!(err(&["--tls-key", "k.pem"]).contains("--tls-cert"));
    let e = err(&["--tls-only"]);
    assert!(e.contains("need --tls-cert and --tls-key"), "{e}");
    let e = err(&["--tls-port", "443"]);
    assert!(e.contains("need --tls-cert and --tls-key"), "{e}");
    let pair = ["--tls-cert", "c.pem", "--tls-key", "k.pem"];
    let e = err(&[&pair[..], &["--tls-listen", "127.0.0.1:8080"]].concat());
    assert!(e.contains("give HTTPS its own port"), "{e}");
    let e = err(&[&pair[..], &["--backend", "tap", "--ip", "10.0.0.1/24", "--tls-port", "80"]].concat());
    assert!(e.contains("give HTTPS its own port"), "{e}");
}

#[test]
fn upstreams_and_routes_come_from_flags_and_tables() {
    assert_eq!(ok(&[]).proxy, None);
    let c = ok(&["--upstream", "app=http://127.0.0.1:8000", "--upstream", "app=http://127.0.0.1:8001"]);
    let proxy = c.proxy.expect("a proxy");
    assert_eq!(proxy.groups.len(), 1);
    assert_eq!(proxy.groups[0].servers.iter().map(|s| s.addr.port()).collect::<Vec<_>>(), [8000, 8001]);
    assert_eq!(proxy.route(None, "/x"), Some(0), "one group and no route: everything goes to it");

    let file = TempFile::new(
        "upstreams",
        r#"
[upstream.api]
servers = ["http://127.0.0.1:9000", "http://127.0.0.1:9001"]
balance = "least-connections"
connect-timeout = "2s"
max-fails = 3
keepalive = 8
health-check = "/healthz"

[upstream.web]
servers = "http://127.0.0.1:9100"

[[route]]
path = "/api/"
upstream = "api"

[[route]]
upstream = "web"
"#,
    );
    let c = ok(&["--config", file.path()]);
    let proxy = c.proxy.expect("a proxy");
    let api = &proxy.groups[0];
    assert_eq!(
        (api.name.as_str(), api.balance, api.max_fails, api.keepalive),
        ("api", Balance::LeastConnections, 3, 8)
    );
    assert_eq!(api.connect_timeout, Duration::from_secs(2));
    assert_eq!(api.health, Some(("/healthz".to_owned(), Duration::from_secs(5))));
    assert_eq!((proxy.route(None, "/api/v1"), proxy.route(None, "/index.html")), (Some(0), Some(1)));

    // A group named on the command line takes its servers from there, its
    // settings from the file; a --route replaces the file's route for the
    // same host and prefix, and the file's others stay.
    let c = ok(&["--config", file.path(), "--upstream", "api=http://127.0.0.1:7000", "--route", "/=api"]);
    let proxy = c.proxy.expect("a proxy");
    let group = |name: &str| proxy.groups.iter().position(|g| g.name == name);
    let api = &proxy.groups[group("api").expect("api")];
    assert_eq!((api.servers.len(), api.servers[0].addr.port(), api.keepalive), (1, 7000, 8));
    assert_eq!(proxy.route(None, "/index.html"), group("api"));
    assert_eq!(proxy.routes.len(), 2, "/api/ from the file, / from the flag");
    // --route flags add to the file's routes, as --weight does.
    let c = ok(&["--config", file.path(), "--route", "/static/=web", "--route", "example.com/api/=web"]);
    let proxy = c.proxy.expect("a proxy");
    let group = |name: &str| proxy.groups.iter().position(|g| g.name == name);
    assert_eq!(proxy.route(None, "/static/x"), group("web"), "the flag's");
    assert_eq!(proxy.route(None, "/api/v1"), group("api"), "the file's");
    assert_eq!(proxy.route(Some(b"example.com"), "/api/v1"), group("web"), "the flag's, for its host");
    assert_eq!(proxy.route(None, "/index.html"), group("web"), "the file's");
    // Two groups and no route: the error says where routes were looked for.
    let two = TempFile::new(
        "two-groups",
        "[upstream.a]\nservers = \"http://127.0.0.1:1\"\n[upstream.b]\nservers = \"http://127.0.0.1:2\"\n",
    );
    let e = err(&["--config", two.path()]);
    assert!(e.contains("no route in the --route flags or ") && e.contains(two.path()), "{e}");
    let e = err(&["--upstream", "a=http://127.0.0.1:1", "--upstream", "b=http://127.0.0.1:2"]);
    assert!(e.contains("no route in the --route flags (and no --config file)"), "{e}");

    assert!(err(&["--upstream", "app"]).contains("is not NAME=URL"));
    assert!(err(&["--upstream", "a=http://127.0.0.1", "--route", "/=b"]).contains("no such upstream"));
    let bad = TempFile::new("bad-upstream", "[upstream.a]\nservers = [\"http://127.0.0.1\"]\nbalance = \"random\"\n");
    assert!(err(&["--config", bad.path()]).contains("unknown variant"));
}

#[test]
fn fast_start_and_the_initial_window_from_the_command_line_or_the_file() {
    let c = ok(&[]);
    assert_eq!((c.fast_start, c.initial_window), (FastStart::CarefulResume, 32));
    let c = ok(&["--fast-start", "careful-resume", "--initial-window", "10"]);
    assert_eq!((c.fast_start, c.initial_window), (FastStart::CarefulResume, 10));
    let file = TempFile::new("fast-start.toml", "fast-start = \"path-memory\"\ninitial-window = 16\n");
    let c = ok(&["--config", file.path()]);
    assert_eq!((c.fast_start, c.initial_window), (FastStart::PathMemory, 16));
    assert!(err(&["--fast-start", "fastest"]).contains("fastest"));
    assert!(err(&["--initial-window", "0"]).contains("--initial-window 0"));
    assert!(err(&["--initial-window", "1000"]).contains("outside 1..256"));
}
