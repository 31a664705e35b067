//! The rendering is checked against the text exposition format by a small
//! parser written from its specification: line syntax, families, label
//! escaping, cumulative histograms.

use std::collections::{BTreeMap, HashSet};
use std::net::{Ipv4Addr, SocketAddr, SocketAddrV4};
use std::time::Duration;

use fairway_nic::steering::SteeringCounts;
use fairway_stack::State;
use fairway_stack::time::{Duration as StackDuration, Instant};
use fairway_stack::{Config, FlowStats, Shard};

use super::*;
use crate::runtime::LoopStats;

/// One sample: metric name, labels, value.
#[derive(Debug, Clone, PartialEq)]
struct Sample {
    name: String,
    labels: BTreeMap<String, String>,
    value: f64,
}

fn is_metric_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_' || c == ':')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_' || c == ':')
}

fn is_label_name(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// Parses `{a="x",b="y"}` at the start of `s`; returns the labels and the rest.
#[track_caller]
fn parse_labels(s: &str) -> (BTreeMap<String, String>, &str) {
    let mut labels = BTreeMap::new();
    let mut rest = s.strip_prefix('{').expect("labels open with {");
    loop {
        if let Some(after) = rest.strip_prefix('}') {
            return (labels, after);
        }
        let eq = rest.find('=').expect("a label has =");
        let name = &rest[..eq];
        assert!(is_label_name(name), "label name {name:?}");
        rest = rest[eq + 1..].strip_prefix('"').expect("label values are quoted");
        let mut value = String::new();
        let mut chars = rest.char_indices();
        let end = loop {
            match chars.next().expect("label value is closed") {
                (i, '"') => break i,
                (_, '\\') => match chars.next().expect("escape has a character").1 {
                    '\\' => value.push('\\'),
                    '"' => value.push('"'),
                    'n' => value.push('\n'),
                    other => panic!("bad escape \\{other}"),
                },
                (_, '\n') => panic!("raw line feed in a label value"),
                (_, c) => value.push(c),
            }
        };
        assert!(labels.insert(name.to_owned(), value).is_none(), "label {name} twice");
        rest = &rest[end + 1..];
        rest = rest.strip_prefix(',').unwrap_or(rest);
    }
}

fn parse_value(s: &str) -> f64 {
    match s {
        "+Inf" => f64::INFINITY,
        "-Inf" => f64::NEG_INFINITY,
        "NaN" => f64::NAN,
        _ => s.parse().unwrap_or_else(|_| panic!("bad value {s:?}")),
    }
}

/// Checks the whole text and returns its samples and each family's type.
#[track_caller]
fn parse(text: &str) -> (Vec<Sample>, BTreeMap<String, String>) {
    assert!(text.ends_with('\n'), "the text ends with a line feed");
    let mut types = BTreeMap::new();
    let mut helped = HashSet::new();
    let mut closed = HashSet::new();
    let mut current: Option<String> = None;
    let mut samples = Vec::new();
    for line in text.lines() {
        if let Some(rest) = line.strip_prefix("# HELP ") {
            let (name, help) = rest.split_once(' ').expect("HELP has a text");
            assert!(is_metric_name(name) && !help.is_empty(), "{line}");
            assert!(helped.insert(name.to_owned()), "HELP twice for {name}");
        } else if let Some(rest) = line.strip_prefix("# TYPE ") {
            let (name, kind) = rest.split_once(' ').expect("TYPE has a type");
            assert!(is_metric_name(name), "{line}");
            assert!(["counter", "gauge", "histogram", "summary", "untyped"].contains(&kind), "{line}");
            assert!(types.insert(name.to_owned(), kind.to_owned()).is_none(), "TYPE twice for {name}");
            if let Some(previous) = current.replace(name.to_owned()) {
                closed.insert(previous);
            }
        } else {
            assert!(!line.starts_with('#') && !line.is_empty(), "stray line {line:?}");
            let name_end = line.find(['{', ' ']).expect("a sample has a value");
            let name = &line[..name_end];
            assert!(is_metric_name(name), "{line}");
            let (labels, rest) = if line[name_end..].starts_with('{') {
                parse_labels(&line[name_end..])
            } else {
                (BTreeMap::new(), &line[name_end..])
            };
            let value = rest.strip_prefix(' ').expect("one space before the value");
            assert!(!value.contains(' '), "no timestamps here: {line}");
            let family = current.as_deref().expect("samples follow a TYPE line");
            let base = ["_bucket", "_sum", "_count"]
                .iter()
                .find_map(|s| name.strip_suffix(s).filter(|b| types.get(*b).is_some_and(|t| t == "histogram")))
                .unwrap_or(name);
            assert_eq!(base, family, "a sample of another family than the last TYPE: {line}");
            assert!(!closed.contains(base), "family {base} is split");
            samples.push(Sample { name: name.to_owned(), labels, value: parse_value(value) });
        }
    }
    (samples, types)
}

/// Checks every histogram: buckets cumulative, `+Inf` equal to `_count`.
#[track_caller]
fn check_histograms(samples: &[Sample], types: &BTreeMap<String, String>) {
    for (name, _) in types.iter().filter(|(_, t)| *t == "histogram") {
        let bucket = format!("{name}_bucket");
        // Group by the labels other than `le`.
        let mut series: BTreeMap<BTreeMap<String, String>, Vec<(f64, f64)>> = BTreeMap::new();
        for s in samples.iter().filter(|s| s.name == bucket) {
            let mut key = s.labels.clone();
            let le = parse_value(&key.remove("le").expect("a bucket has le"));
            series.entry(key).or_default().push((le, s.value));
        }
        assert!(!series.is_empty(), "{name} has buckets");
        for (key, buckets) in series {
            for pair in buckets.windows(2) {
                assert!(pair[0].0 < pair[1].0, "{name}{key:?}: le increasing");
                assert!(pair[0].1 <= pair[1].1, "{name}{key:?}: buckets cumulative: {buckets:?}");
            }
            let last = buckets.last().unwrap();
            assert_eq!(last.0, f64::INFINITY, "{name}{key:?} ends at +Inf");
            let count = samples.iter().find(|s| s.name == format!("{name}_count") && s.labels == key).expect("_count");
            assert_eq!(last.1, count.value, "{name}{key:?}: +Inf = _count");
            assert!(samples.iter().any(|s| s.name == format!("{name}_sum") && s.labels == key), "{name}: _sum");
        }
    }
}

fn value(samples: &[Sample], name: &str, labels: &[(&str, &str)]) -> Option<f64> {
    samples
        .iter()
        .find(|s| {
            s.name == name
                && s.labels.len() == labels.len()
                && labels.iter().all(|(k, v)| s.labels.get(*k).is_some_and(|x| x == v))
        })
        .map(|s| s.value)
}

fn flow(port: u16, srtt_us: u64) -> FlowStats {
    FlowStats {
        local: SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 1), 80).into(),
        remote: SocketAddrV4::new(Ipv4Addr::new(10, 0, 0, 2), port).into(),
        state: State::Established,
        srtt: Some(StackDuration::from_micros(srtt_us)),
        rttvar: Some(StackDuration::from_micros(srtt_us / 4)),
        min_rtt: Some(StackDuration::from_micros(srtt_us / 2)),
        rto: StackDuration::from_millis(200),
        cwnd: 14_480,
        ssthresh: u32::MAX,
        snd_wnd: 65_535,
        rcv_wnd: 131_072,
        mss: 1448,
        bytes_sent: 0,
        bytes_acked: 0,
        bytes_received: 0,
        retransmits: 3,
        timeouts: 0,
        spurious: 0,
        send_queue: 0,
        recv_queue: 0,
        rcv_rtt: None,
        rcv_wnd_cap: None,
        cwnd_cap: None,
        pacing_cap: None,
        fast_start_jump: false,
        window_scaling: Some((7, 7)),
        timestamps: true,
        sack: true,
    }
}

/// Two shards with traffic of every kind.
fn two_busy_shards() -> MetricsHub {
    let hub = MetricsHub::new(2, 4, "afxdp");
    let mut a = ShardMetrics::new(0, 4);
    let mut b = ShardMetrics::new(1, 4);
    for _ in 0..10 {
        a.request();
        a.response(200, Duration::from_micros(80));
    }
    a.request();
    a.response(404, Duration::from_millis(3));
    for _ in 0..5 {
        b.request();
        b.response(200, Duration::from_micros(400));
    }
    b.response(408, Duration::from_secs(10));
    a.connection_opened();
    a.connection_opened();
    b.connection_opened();
    a.connection_closed();

    let mut shard = Shard::new(Config::new([2, 0, 0, 0, 0, 1], Ipv4Addr::new(10, 0, 0, 1), 24));
    shard.handle_frame(Instant::ZERO, &[0u8; 60]); // not for our MAC
    shard.handle_frame(Instant::ZERO, &[0u8; 5]); // truncated
    a.observe_stack(shard.counters());
    b.observe_stack(shard.counters());
    a.observe_stack_connections(3, 1);
    a.observe_steering(SteeringCounts { steered_out: 7, steered_in: 2, broadcast: 1, inbox_full: 0, pool_empty: 0 });
    let mut stats = LoopStats { turns: 100, frames_in: 40, rx_batches: 3, sleeps: 9, ..LoopStats::default() };
    stats.batch_histogram[0] = 1; // 1 frame
    stats.batch_histogram[3] = 1; // 8..15
    stats.batch_histogram[4] = 1; // 16..31
    a.observe_loop(&stats);
    a.observe_flows([flow(40_000, 1_500), flow(40_001, 20_000)]);
    b.observe_flows((0..6).map(|i| flow(50_000 + i, 300)));
    hub.publish(&a);
    hub.publish(&b);
    hub
}

fn render(hub: &MetricsHub) -> String {
    let mut out = Vec::new();
    hub.render(&mut out);
    String::from_utf8(out).expect("the text is UTF-8")
}

#[test]
fn the_rendering_is_valid_exposition_text() {
    let text = render(&two_busy_shards());
    let (samples, types) = parse(&text);
    check_histograms(&samples, &types);
    for family in [
        "fairway_http_requests_total",
        "fairway_http_responses_total",
        "fairway_http_request_duration_seconds",
        "fairway_packets_received_total",
        "fairway_drops_total",
        "fairway_steered_frames_total",
        "fairway_active_connections",
        "fairway_flow_srtt_seconds",
        "fairway_flow_cwnd_bytes",
        "fairway_loop_rx_batch_frames",
    ] {
        assert!(types.contains_key(family), "{family} missing:\n{text}");
    }
}

#[test]
fn an_empty_hub_renders_valid_text_too() {
    let text = render(&MetricsHub::new(3, 0, "kernel"));
    let (samples, types) = parse(&text);
    check_histograms(&samples, &types);
    assert_eq!(value(&samples, "fairway_http_requests_total", &[]), Some(0.0));
    assert_eq!(value(&samples, "fairway_http_request_duration_seconds_count", &[]), Some(0.0));
    // Nothing about a userspace stack that is not there.
    assert!(!types.contains_key("fairway_drops_total"));
}

#[test]
fn requests_responses_and_latency_merge_across_shards() {
    let (samples, _) = parse(&render(&two_busy_shards()));
    assert_eq!(value(&samples, "fairway_http_requests_total", &[]), Some(16.0));
    assert_eq!(value(&samples, "fairway_http_responses_total", &[("code", "200")]), Some(15.0));
    assert_eq!(value(&samples, "fairway_http_responses_total", &[("code", "404")]), Some(1.0));
    assert_eq!(value(&samples, "fairway_http_responses_total", &[("code", "408")]), Some(1.0));
    let h = "fairway_http_request_duration_seconds";
    assert_eq!(value(&samples, &format!("{h}_count"), &[]), Some(17.0));
    assert_eq!(value(&samples, &format!("{h}_bucket"), &[("le", "0.0001")]), Some(10.0));
    assert_eq!(value(&samples, &format!("{h}_bucket"), &[("le", "0.0005")]), Some(15.0));
    assert_eq!(value(&samples, &format!("{h}_bucket"), &[("le", "0.005")]), Some(16.0));
    assert_eq!(value(&samples, &format!("{h}_bucket"), &[("le", "10")]), Some(17.0));
    let sum = value(&samples, &format!("{h}_sum"), &[]).unwrap();
    assert!((sum - (10.0 * 80e-6 + 3e-3 + 5.0 * 400e-6 + 10.0)).abs() < 1e-9, "{sum}");
    let p50 = value(&samples, "fairway_http_latency_quantile_seconds", &[("quantile", "0.5")]).unwrap();
    assert!((80e-6..=81e-6).contains(&p50), "{p50}");
    let max = value(&samples, "fairway_http_latency_quantile_seconds", &[("quantile", "1")]).unwrap();
    assert!((9.99..=10.01).contains(&max), "{max}");
}

#[test]
fn per_shard_series_carry_their_shard() {
    let (samples, _) = parse(&render(&two_busy_shards()));
    assert_eq!(value(&samples, "fairway_active_connections", &[("shard", "0")]), Some(1.0));
    assert_eq!(value(&samples, "fairway_active_connections", &[("shard", "1")]), Some(1.0));
    assert_eq!(value(&samples, "fairway_packets_received_total", &[("shard", "1")]), Some(2.0));
    // The stack's table, where the shard reported it.
    assert_eq!(value(&samples, "fairway_tcp_connections", &[("shard", "0")]), Some(3.0));
    assert_eq!(value(&samples, "fairway_tcp_time_wait_connections", &[("shard", "0")]), Some(1.0));
    assert_eq!(value(&samples, "fairway_tcp_connections", &[("shard", "1")]), None);
    let drop = |reason| value(&samples, "fairway_drops_total", &[("shard", "0"), ("reason", reason)]);
    assert_eq!(drop("ethernet_not_for_us"), Some(1.0));
    assert_eq!(drop("ethernet_truncated"), Some(1.0));
    assert_eq!(drop("tcp_bad_checksum"), Some(0.0));
    let steered = |d| value(&samples, "fairway_steered_frames_total", &[("shard", "0"), ("direction", d)]);
    assert_eq!((steered("out"), steered("in")), (Some(7.0), Some(2.0)));
    assert_eq!(value(&samples, "fairway_steered_frames_total", &[("shard", "1"), ("direction", "out")]), None);
    let b = "fairway_loop_rx_batch_frames_bucket";
    assert_eq!(value(&samples, b, &[("shard", "0"), ("le", "1")]), Some(1.0));
    assert_eq!(value(&samples, b, &[("shard", "0"), ("le", "7")]), Some(1.0));
    assert_eq!(value(&samples, b, &[("shard", "0"), ("le", "15")]), Some(2.0));
    assert_eq!(value(&samples, b, &[("shard", "0"), ("le", "31")]), Some(3.0));
    assert_eq!(value(&samples, "fairway_loop_sleeps_total", &[("shard", "0")]), Some(9.0));
}

#[test]
fn flows_are_labelled_by_their_ends_and_bounded_per_shard() {
    let (samples, _) = parse(&render(&two_busy_shards()));
    let labels = [("shard", "0"), ("local", "10.0.0.1:80"), ("remote", "10.0.0.2:40001")];
    assert_eq!(value(&samples, "fairway_flow_srtt_seconds", &labels), Some(0.02));
    assert_eq!(value(&samples, "fairway_flow_min_rtt_seconds", &labels), Some(0.01));
    assert_eq!(value(&samples, "fairway_flow_cwnd_bytes", &labels), Some(14_480.0));
    assert_eq!(value(&samples, "fairway_flow_receive_window_bytes", &labels), Some(131_072.0));
    let shard1 = samples.iter().filter(|s| s.name == "fairway_flow_srtt_seconds" && s.labels["shard"] == "1").count();
    assert_eq!(shard1, 4, "at most max_flows per shard");
    assert_eq!(value(&samples, "fairway_flows_omitted", &[("shard", "1")]), Some(2.0));
    // A cap that is not set is not rendered.
    assert!(!samples.iter().any(|s| s.name == "fairway_flow_receive_window_cap_bytes"));
}

#[test]
fn label_values_are_escaped() {
    let hub = MetricsHub::new(1, 0, "we\"ird\\back\nend");
    let text = render(&hub);
    assert!(text.contains(r#"backend="we\"ird\\back\nend""#), "{text}");
    let (samples, _) = parse(&text);
    assert_eq!(samples[0].labels["backend"], "we\"ird\\back\nend");
}

#[test]
fn publishing_is_rate_limited_and_a_scrape_sees_the_last_copy() {
    let hub = MetricsHub::new(1, 0, "kernel");
    let mut m = ShardMetrics::new(0, 0);
    m.request();
    assert!(m.publish_if_due(&hub, Instant::from_millis(10)));
    m.request();
    assert!(!m.publish_if_due(&hub, Instant::from_millis(500)));
    let (samples, _) = parse(&render(&hub));
    assert_eq!(value(&samples, "fairway_http_requests_total", &[]), Some(1.0));
    assert!(m.publish_if_due(&hub, Instant::from_millis(1_010)));
    let (samples, _) = parse(&render(&hub));
    assert_eq!(value(&samples, "fairway_http_requests_total", &[]), Some(2.0));
}

#[test]
fn rendering_reuses_the_buffer_and_repeats_itself() {
    let hub = two_busy_shards();
    let mut out = Vec::with_capacity(64 * 1024);
    hub.render(&mut out);
    let first = out.clone();
    let capacity = out.capacity();
    out.clear();
    hub.render(&mut out);
    assert_eq!(out, first, "rendering twice gives the same text");
    assert_eq!(out.capacity(), capacity, "no regrowth");
}

#[test]
fn odd_statuses_and_huge_latencies_are_counted_not_lost() {
    let mut m = ShardMetrics::new(0, 0);
    m.response(999, Duration::from_secs(3600));
    m.response(0, Duration::ZERO);
    assert_eq!(m.responses(999), 2);
    let hub = MetricsHub::new(1, 0, "kernel");
    hub.publish(&m);
    let (samples, types) = parse(&render(&hub));
    check_histograms(&samples, &types);
    assert_eq!(value(&samples, "fairway_http_responses_total", &[("code", "other")]), Some(2.0));
    assert_eq!(value(&samples, "fairway_http_request_duration_seconds_bucket", &[("le", "+Inf")]), Some(2.0));
    assert_eq!(value(&samples, "fairway_http_request_duration_seconds_bucket", &[("le", "10")]), Some(1.0));
}

#[test]
fn seconds_are_written_exactly() {
    assert_eq!(seconds(0).to_string(), "0");
    assert_eq!(seconds(50).to_string(), "0.00005");
    assert_eq!(seconds(1_500_000).to_string(), "1.5");
    assert_eq!(seconds(2_000_000).to_string(), "2");
    assert_eq!(seconds(123_456_789).to_string(), "123.456789");
}

fn fair_flow(port: u16, direction: fairway_stack::fairness::Direction, rate: f64) -> FairFlow {
    let upload = direction == fairway_stack::fairness::Direction::Upload;
    FairFlow {
        local: "127.0.0.1:80".parse().unwrap(),
        remote: SocketAddr::from(([127, 0, 0, 2], port)),
        direction,
        srtt: StackDuration::from_millis(30),
        min_rtt: StackDuration::from_millis(20),
        delivery_rate: rate,
        window_cap: upload.then_some(131_072),
        pacing_cap: (!upload).then_some(2_500_000),
        weight: 1.0,
    }
}

#[test]
fn fairness_flows_and_jain_index_merge_across_shards() {
    use fairway_stack::fairness::{Direction, jain_index};
    let hub = MetricsHub::new(2, 2, "kernel").with_fairness("equal-rate", Some(80_000_000));
    let mut a = ShardMetrics::new(0, 2);
    let mut b = ShardMetrics::new(1, 2);
    let heavy = FairFlow { weight: 2.5, ..fair_flow(2, Direction::Download, 3e6) };
    a.observe_fairness([fair_flow(1, Direction::Upload, 1e6), heavy]);
    // Three on shard 1: two listed, all three counted.
    b.observe_fairness((3..6).map(|p| fair_flow(p, Direction::Download, 2e6)));
    hub.publish(&a);
    hub.publish(&b);
    let text = render(&hub);
    let (samples, types) = parse(&text);
    assert_eq!(types["fairway_fairness_jain_index"], "gauge");
    let j = value(&samples, "fairway_fairness_jain_index", &[]).unwrap();
    assert!((j - jain_index(&[1e6, 3e6, 2e6, 2e6, 2e6])).abs() < 1e-12, "{j}");
    let info = [("policy", "equal-rate"), ("capacity_bits_per_second", "80000000")];
    assert_eq!(value(&samples, "fairway_fairness_info", &info), Some(1.0));
    assert_eq!(value(&samples, "fairway_fairness_active_flows", &[("shard", "1")]), Some(3.0));
    assert_eq!(value(&samples, "fairway_flows_omitted", &[("shard", "1")]), Some(1.0));
    let up = [("shard", "0"), ("local", "127.0.0.1:80"), ("remote", "127.0.0.2:1"), ("direction", "upload")];
    assert_eq!(value(&samples, "fairway_fairness_flow_window_cap_bytes", &up), Some(131_072.0));
    assert_eq!(value(&samples, "fairway_fairness_flow_min_rtt_seconds", &up), Some(0.02));
    assert_eq!(value(&samples, "fairway_fairness_flow_delivery_rate_bytes_per_second", &up), Some(1e6));
    let down = [("shard", "0"), ("local", "127.0.0.1:80"), ("remote", "127.0.0.2:2"), ("direction", "download")];
    assert_eq!(value(&samples, "fairway_fairness_flow_pacing_cap_bytes_per_second", &down), Some(2.5e6));
    assert_eq!(value(&samples, "fairway_fairness_flow_window_cap_bytes", &down), None);
    assert_eq!(types["fairway_fairness_flow_weight"], "gauge");
    assert_eq!(value(&samples, "fairway_fairness_flow_weight", &down), Some(2.5));
    assert_eq!(value(&samples, "fairway_fairness_flow_weight", &up), Some(1.0), "1 unless configured");
    let listed = samples.iter().filter(|s| s.name == "fairway_fairness_flow_srtt_seconds").count();
    assert_eq!(listed, 4);
}

#[test]
fn without_window_control_no_fairness_series_appear() {
    let text = render(&two_busy_shards());
    assert!(!text.contains("fairway_fairness_"), "{text}");
    // A shard that observed no active flow: J = 1, no division by zero.
    let hub = MetricsHub::new(1, 2, "kernel").with_fairness("off", None);
    let mut a = ShardMetrics::new(0, 2);
    a.observe_fairness(std::iter::empty());
    hub.publish(&a);
    let (samples, _) = parse(&render(&hub));
    assert_eq!(value(&samples, "fairway_fairness_jain_index", &[]), Some(1.0));
    let info = [("policy", "off"), ("capacity_bits_per_second", "estimated")];
    assert_eq!(value(&samples, "fairway_fairness_info", &info), Some(1.0));
}
