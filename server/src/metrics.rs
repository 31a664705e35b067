//! What the server counts, per shard, and its Prometheus text rendering.
//!
//! Each shard owns a [`ShardMetrics`] and updates it on its own thread with
//! plain adds: no locks, no atomics, no allocation per request. Now and then
//! ([`ShardMetrics::publish_if_due`], at most once per
//! [`PUBLISH_INTERVAL`]) the shard copies it into its slot of the shared
//! [`MetricsHub`]; that copy takes the slot's lock, which only a scrape
//! contends for. A scrape ([`MetricsHub::render`]) merges the slots and
//! writes the [text exposition format] into a caller's reused buffer. So a
//! scrape sees each shard as it was at most a publishing interval ago (the
//! shard serving the scrape can publish first to show itself as of now).
//!
//! Merged across shards: requests, responses by status, the latency
//! histogram. Per shard (label `shard`): packets, drops by reason, steered
//! frames, active connections, the loop's moderation counts, and the RTT
//! and window of up to `max_flows` connections; and window control's view
//! ([`FairFlow`]: what the fairness policy saw of each active flow and the
//! caps in force), its active flows, and Jain's index over their delivery
//! rates, merged across shards (`fairway_fairness_jain_index`).
//!
//! [text exposition format]: https://prometheus.io/docs/instrumenting/exposition_formats/

use std::io::Write;
use std::net::SocketAddr;
use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use fairway_nic::steering::SteeringCounts;

use crate::proxy::ProxyCounters;
use crate::tls::TlsCounters;
use fairway_stack::fairness::Direction;
use fairway_stack::time::Instant;
use fairway_stack::{Counters, DropReason, FlowStats};
use hdrhistogram::Histogram;

use crate::runtime::{BATCH_BUCKETS, LoopStats};

/// The most often a shard copies its metrics into the hub.
pub const PUBLISH_INTERVAL: Duration = Duration::from_secs(1);

/// The longest latency the histogram tells apart (longer ones are counted
/// as this), in microseconds.
const LATENCY_MAX_US: u64 = 60_000_000;

/// The latency histogram's `le` bounds, in microseconds.
const LATENCY_BUCKETS_US: [u64; 17] = [
    50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 25_000, 50_000, 100_000, 250_000, 500_000, 1_000_000, 2_500_000,
    5_000_000, 10_000_000,
];

/// The latency quantiles rendered as gauges.
const QUANTILES: [(f64, &str); 5] = [(0.5, "0.5"), (0.9, "0.9"), (0.99, "0.99"), (0.999, "0.999"), (1.0, "1")];

/// Status codes counted one by one: 100 ..= 599.
const STATUS_FIRST: u16 = 100;
const STATUS_SLOTS: usize = 500;

/// What window control saw of one active flow, and the caps in force on
/// it, whichever backend senses and acts.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct FairFlow {
    /// Our end.
    pub local: SocketAddr,
    /// The peer's end.
    pub remote: SocketAddr,
    /// Which way its data goes.
    pub direction: Direction,
    /// The smoothed RTT the policy used (receiver-side for uploads).
    pub srtt: fairway_stack::time::Duration,
    /// The minimum RTT the policy used.
    pub min_rtt: fairway_stack::time::Duration,
    /// Payload bytes per second recently delivered.
    pub delivery_rate: f64,
    /// The cap on the window advertised to the peer (uploads), bytes.
    pub window_cap: Option<u32>,
    /// The cap on the pacing rate (downloads), bytes per second.
    pub pacing_cap: Option<u64>,
    /// Its weight in the policy's shares (`--weight`; 1 by default).
    pub weight: f64,
}

/// Window control's totals over a shard's active flows: enough to merge
/// Jain's index across shards exactly.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
struct FairTotals {
    active: u64,
    rate_sum: f64,
    rate_squares: f64,
}

/// One shard's metrics. Owned and updated by that shard alone.
#[derive(Clone, Debug)]
pub struct ShardMetrics {
    shard: u16,
    requests: u64,
    responses: [u64; STATUS_SLOTS],
    /// Responses with a status outside 100 ..= 599 (a bug if ever non-zero).
    responses_other: u64,
    latency: Histogram<u64>,
    latency_sum_us: u64,
    active_connections: u64,
    refused_connections: u64,
    stack: Option<Counters>,
    /// The stack's connection table: every state, and TIME-WAIT alone.
    stack_connections: Option<(u64, u64)>,
    steering: Option<SteeringCounts>,
    tls: Option<TlsCounters>,
    /// The reverse proxy's, once it has forwarded anything.
    proxy: Option<ProxyCounters>,
    looped: Option<LoopStats>,
    /// The async runtime's tasks alive, and those that panicked.
    tasks: Option<(u64, u64)>,
    /// HTTP/2 connections served, and streams answered through the bridge.
    http2: Option<(u64, u64)>,
    flows: Vec<FlowStats>,
    max_flows: usize,
    flows_omitted: u64,
    fair_flows: Vec<FairFlow>,
    fair_flows_omitted: u64,
    fair_totals: Option<FairTotals>,
    next_publish: Option<Instant>,
}

impl ShardMetrics {
    /// Metrics for shard `shard`, keeping the statistics of at most
    /// `max_flows` connections (their room is allocated now).
    #[must_use]
    pub fn new(shard: u16, max_flows: usize) -> ShardMetrics {
        ShardMetrics {
            shard,
            requests: 0,
            responses: [0; STATUS_SLOTS],
            responses_other: 0,
            latency: latency_histogram(),
            latency_sum_us: 0,
            active_connections: 0,
            refused_connections: 0,
            stack: None,
            stack_connections: None,
            steering: None,
            tls: None,
            proxy: None,
            looped: None,
            tasks: None,
            http2: None,
            flows: Vec::with_capacity(max_flows),
            max_flows,
            flows_omitted: 0,
            fair_flows: Vec::with_capacity(max_flows),
            fair_flows_omitted: 0,
            fair_totals: None,
            next_publish: None,
        }
    }

    /// The shard these are.
    #[must_use]
    pub fn shard(&self) -> u16 {
        self.shard
    }

    /// A request was answered (its response completed).
    pub fn request(&mut self) {
        self.requests += 1;
    }

    /// A response with `status` was completed, `latency` after its request
    /// arrived.
    pub fn response(&mut self, status: u16, latency: Duration) {
        match usize::from(status).checked_sub(usize::from(STATUS_FIRST)) {
            Some(i) if i < STATUS_SLOTS => self.responses[i] += 1,
            _ => self.responses_other += 1,
        }
        let us = u64::try_from(latency.as_micros()).unwrap_or(u64::MAX);
        self.latency.saturating_record(us.clamp(1, LATENCY_MAX_US));
        self.latency_sum_us = self.latency_sum_us.saturating_add(us);
    }

    /// A connection was accepted.
    pub fn connection_opened(&mut self) {
        self.active_connections += 1;
    }

    /// An accepted connection ended.
    pub fn connection_closed(&mut self) {
        self.active_connections = self.active_connections.saturating_sub(1);
    }

    /// A connection was refused (the server's connection limit).
    pub fn connection_refused(&mut self) {
        self.refused_connections += 1;
    }

    /// The userspace stack's counters (packets, drops by reason, TCP).
    pub fn observe_stack(&mut self, counters: &Counters) {
        match &mut self.stack {
            Some(mine) => mine.clone_from(counters),
            None => self.stack = Some(counters.clone()),
        }
    }

    /// The stack's connection table: `total` connections in every state
    /// (the application's, those it closed that are still finishing, and
    /// TIME-WAIT), `time_wait` of them in TIME-WAIT.
    pub fn observe_stack_connections(&mut self, total: u64, time_wait: u64) {
        self.stack_connections = Some((total, time_wait));
    }

    /// The shard's software steering counters.
    pub fn observe_steering(&mut self, counts: SteeringCounts) {
        self.steering = Some(counts);
    }

    /// The shard's TLS counters.
    pub fn observe_tls(&mut self, counts: TlsCounters) {
        self.tls = Some(counts);
    }

    /// The shard's reverse-proxy counters, to add to.
    pub fn proxy_mut(&mut self) -> &mut ProxyCounters {
        self.proxy.get_or_insert_with(ProxyCounters::default)
    }

    /// The shard loop's counts.
    pub fn observe_loop(&mut self, stats: &LoopStats) {
        self.looped = Some(*stats);
    }

    /// The async runtime's tasks: alive now, and panicked so far.
    pub fn observe_tasks(&mut self, live: u64, panicked: u64) {
        self.tasks = Some((live, panicked));
    }

    /// HTTP/2 on the HTTP layer: connections served so far, and streams
    /// (requests) answered.
    pub fn observe_http2(&mut self, connections: u64, streams: u64) {
        self.http2 = Some((connections, streams));
    }

    /// The async runtime's tasks alive, as last observed.
    #[must_use]
    pub fn tasks(&self) -> Option<u64> {
        self.tasks.map(|(live, _)| live)
    }

    /// Replaces the per-connection statistics with `flows`, keeping the
    /// first `max_flows` and counting the rest.
    pub fn observe_flows<I: IntoIterator<Item = FlowStats>>(&mut self, flows: I) {
        self.flows.clear();
        self.flows_omitted = 0;
        for flow in flows {
            if self.flows.len() < self.max_flows {
                self.flows.push(flow);
            } else {
                self.flows_omitted += 1;
            }
        }
    }

    /// Replaces window control's view with its active `flows`: every one
    /// counts towards Jain's index and the active flows, the first
    /// `max_flows` are listed.
    pub fn observe_fairness<I: IntoIterator<Item = FairFlow>>(&mut self, flows: I) {
        self.fair_flows.clear();
        self.fair_flows_omitted = 0;
        let mut totals = FairTotals::default();
        for flow in flows {
            totals.active += 1;
            totals.rate_sum += flow.delivery_rate;
            totals.rate_squares += flow.delivery_rate * flow.delivery_rate;
            if self.fair_flows.len() < self.max_flows {
                self.fair_flows.push(flow);
            } else {
                self.fair_flows_omitted += 1;
            }
        }
        self.fair_totals = Some(totals);
    }

    /// Requests counted.
    #[must_use]
    pub fn requests(&self) -> u64 {
        self.requests
    }

    /// Responses counted with `status`.
    #[must_use]
    pub fn responses(&self, status: u16) -> u64 {
        match usize::from(status).checked_sub(usize::from(STATUS_FIRST)) {
            Some(i) if i < STATUS_SLOTS => self.responses[i],
            _ => self.responses_other,
        }
    }

    /// Connections open now.
    #[must_use]
    pub fn active_connections(&self) -> u64 {
        self.active_connections
    }

    /// Copies these metrics into `hub` if [`PUBLISH_INTERVAL`] has passed
    /// since the last time (or it is the first). Returns whether it did.
    /// Cheap enough to call every loop turn.
    pub fn publish_if_due(&mut self, hub: &MetricsHub, now: Instant) -> bool {
        if self.next_publish.is_some_and(|at| now < at) {
            return false;
        }
        hub.publish(self);
        self.next_publish = Some(now + PUBLISH_INTERVAL.into());
        true
    }

    /// Makes `self` a copy of `other` without allocating (the flow room of
    /// both was allocated up front).
    fn copy_from(&mut self, other: &ShardMetrics) {
        self.shard = other.shard;
        self.requests = other.requests;
        self.responses = other.responses;
        self.responses_other = other.responses_other;
        self.latency.reset();
        // Same bounds on both sides: the addition cannot fail.
        let _ = self.latency.add(&other.latency);
        self.latency_sum_us = other.latency_sum_us;
        self.active_connections = other.active_connections;
        self.refused_connections = other.refused_connections;
        match (&mut self.stack, &other.stack) {
            (Some(mine), Some(theirs)) => mine.clone_from(theirs),
            (mine, theirs) => mine.clone_from(theirs),
        }
        self.stack_connections = other.stack_connections;
        self.steering = other.steering;
        self.tls = other.tls;
        self.proxy = other.proxy;
        self.looped = other.looped;
        self.tasks = other.tasks;
        self.http2 = other.http2;
        self.flows.clear();
        self.flows.extend_from_slice(&other.flows);
        self.flows_omitted = other.flows_omitted;
        self.fair_flows.clear();
        self.fair_flows.extend_from_slice(&other.fair_flows);
        self.fair_flows_omitted = other.fair_flows_omitted;
        self.fair_totals = other.fair_totals;
    }
}

fn latency_histogram() -> Histogram<u64> {
    // 1 µs to 60 s at three significant figures: a fixed, small footprint.
    Histogram::new_with_bounds(1, LATENCY_MAX_US, 3).unwrap_or_else(|_| unreachable!("valid bounds"))
}

/// The metrics of every shard, as last published, and what a scrape needs
/// to merge them. Shared by all shards (in an `Arc`).
#[derive(Debug)]
pub struct MetricsHub {
    slots: Box<[Mutex<ShardMetrics>]>,
    render: Mutex<Merged>,
    backend: String,
    /// The fairness policy's name and the capacity it shares, for
    /// `fairway_fairness_info`.
    fairness: Option<(String, String)>,
}

/// What a scrape merges into; kept so that scrapes do not allocate.
#[derive(Debug)]
struct Merged {
    latency: Histogram<u64>,
    responses: [u64; STATUS_SLOTS],
}

impl MetricsHub {
    /// A hub for shards `0 .. shards`, each keeping at most `max_flows`
    /// connection statistics; `backend` names the backend in
    /// `fairway_info`.
    #[must_use]
    pub fn new(shards: u16, max_flows: usize, backend: &str) -> MetricsHub {
        MetricsHub {
            slots: (0..shards).map(|i| Mutex::new(ShardMetrics::new(i, max_flows))).collect(),
            render: Mutex::new(Merged { latency: latency_histogram(), responses: [0; STATUS_SLOTS] }),
            backend: backend.to_owned(),
            fairness: None,
        }
    }

    /// Names the fairness policy in force (`policy`, as `--fairness` takes
    /// it) and the capacity it shares (bits per second, or `None` when it
    /// is estimated), for `fairway_fairness_info`.
    #[must_use]
    pub fn with_fairness(mut self, policy: &str, capacity_bits_per_sec: Option<u64>) -> MetricsHub {
        let capacity = capacity_bits_per_sec.map_or_else(|| "estimated".to_owned(), |bps| bps.to_string());
        self.fairness = Some((policy.to_owned(), capacity));
        self
    }

    /// How many shards publish here.
    #[must_use]
    pub fn shards(&self) -> usize {
        self.slots.len()
    }

    /// Copies `metrics` into its shard's slot. A shard whose index is not
    /// one of the hub's is ignored.
    pub fn publish(&self, metrics: &ShardMetrics) {
        if let Some(slot) = self.slots.get(usize::from(metrics.shard)) {
            lock(slot).copy_from(metrics);
        }
    }

    /// Appends the merged metrics to `out` in Prometheus text format.
    pub fn render(&self, out: &mut Vec<u8>) {
        // Writing into a Vec cannot fail.
        let _ = self.write(out);
    }

    fn write(&self, out: &mut Vec<u8>) -> std::io::Result<()> {
        let mut merged = lock(&self.render);
        let merged = &mut *merged;
        merged.latency.reset();
        merged.responses = [0; STATUS_SLOTS];
        let (mut requests, mut other, mut sum_us) = (0u64, 0u64, 0u64);
        for slot in &self.slots {
            let m = lock(slot);
            requests += m.requests;
            other += m.responses_other;
            sum_us = sum_us.saturating_add(m.latency_sum_us);
            for (total, n) in merged.responses.iter_mut().zip(m.responses.iter()) {
                *total += n;
            }
            let _ = merged.latency.add(&m.latency);
        }

        family(
            out,
            "fairway_info",
            "gauge",
            "The running server; the value is always 1. Every figure here merges what each shard last \
             published: the shard answering this scrape as of now, the others at most 1 s ago.",
        )?;
        out.write_all(b"fairway_info{version=\"")?;
        escape_label_value(out, env!("CARGO_PKG_VERSION"));
        out.write_all(b"\",backend=\"")?;
        escape_label_value(out, &self.backend);
        out.write_all(b"\"} 1\n")?;

        family(
            out,
            "fairway_http_requests_total",
            "counter",
            "HTTP requests answered (each counted once its response is complete).",
        )?;
        writeln!(out, "fairway_http_requests_total {requests}")?;

        family(out, "fairway_http_responses_total", "counter", "HTTP responses sent, by status code.")?;
        for (i, &n) in merged.responses.iter().enumerate().filter(|&(_, &n)| n > 0) {
            writeln!(out, "fairway_http_responses_total{{code=\"{}\"}} {n}", i + usize::from(STATUS_FIRST))?;
        }
        if other > 0 {
            writeln!(out, "fairway_http_responses_total{{code=\"other\"}} {other}")?;
        }

        let name = "fairway_http_request_duration_seconds";
        family(out, name, "histogram", "Time from a request's arrival to its response's completion.")?;
        let mut cumulative = 0u64;
        let mut recorded = merged.latency.iter_recorded().peekable();
        for bound in LATENCY_BUCKETS_US {
            while let Some(v) = recorded.next_if(|v| merged.latency.lowest_equivalent(v.value_iterated_to()) <= bound) {
                cumulative += v.count_at_value();
            }
            writeln!(out, "{name}_bucket{{le=\"{}\"}} {cumulative}", seconds(bound))?;
        }
        let count = merged.latency.len();
        writeln!(out, "{name}_bucket{{le=\"+Inf\"}} {count}")?;
        writeln!(out, "{name}_sum {}", seconds(sum_us))?;
        writeln!(out, "{name}_count {count}")?;

        let name = "fairway_http_latency_quantile_seconds";
        family(out, name, "gauge", "Latency quantiles over every response so far (hdrhistogram, 3 digits).")?;
        for (q, label) in QUANTILES {
            let v = if count == 0 { 0 } else { merged.latency.value_at_quantile(q) };
            writeln!(out, "{name}{{quantile=\"{label}\"}} {}", seconds(v))?;
        }

        self.write_shards(out)
    }

    fn write_shards(&self, out: &mut Vec<u8>) -> std::io::Result<()> {
        type Get = fn(&ShardMetrics) -> Option<u64>;
        let per_shard: [(&str, &str, &str, Get); 54] = [
            ("fairway_active_connections", "gauge", "Connections open.", |m| Some(m.active_connections)),
            ("fairway_refused_connections_total", "counter", "Connections refused at the connection limit.", |m| {
                Some(m.refused_connections)
            }),
            (
                "fairway_tcp_connections",
                "gauge",
                "Connections in the stack's table, every state: open, closing after the application let go, \
                 TIME-WAIT.",
                |m| m.stack_connections.map(|c| c.0),
            ),
            ("fairway_tcp_time_wait_connections", "gauge", "Connections in TIME-WAIT.", |m| {
                m.stack_connections.map(|c| c.1)
            }),
            ("fairway_packets_received_total", "counter", "Frames the stack received.", |m| {
                m.stack.as_ref().map(|c| c.frames_in)
            }),
            ("fairway_packets_sent_total", "counter", "Frames the stack sent.", |m| {
                m.stack.as_ref().map(|c| c.frames_out)
            }),
            ("fairway_tcp_retransmits_total", "counter", "TCP segments sent again.", |m| {
                m.stack.as_ref().map(|c| c.retransmits)
            }),
            ("fairway_tcp_timeouts_total", "counter", "TCP retransmission timeouts.", |m| {
                m.stack.as_ref().map(|c| c.timeouts)
            }),
            ("fairway_tcp_established_total", "counter", "TCP connections that reached ESTABLISHED.", |m| {
                m.stack.as_ref().map(|c| c.established)
            }),
            ("fairway_tcp_established_ipv6_total", "counter", "Of them, those over IPv6.", |m| {
                m.stack.as_ref().map(|c| c.established_ipv6)
            }),
            ("fairway_tcp_resets_sent_total", "counter", "TCP RSTs sent.", |m| m.stack.as_ref().map(|c| c.resets_sent)),
            ("fairway_tcp_mss_raised_total", "counter", "SYNs whose MSS was below 48 bytes, raised to 48.", |m| {
                m.stack.as_ref().map(|c| c.mss_raised)
            }),
            (
                "fairway_tcp_checksums_offloaded_total",
                "counter",
                "TCP segments sent with their checksum left for the NIC (AF_XDP transmit metadata) to finish.",
                |m| m.stack.as_ref().map(|c| c.checksums_offloaded),
            ),
            (
                "fairway_tcp_acks_coalesced_total",
                "counter",
                "Pure ACKs that a later ACK of the same connection in the same receive batch superseded.",
                |m| m.stack.as_ref().map(|c| c.acks_coalesced),
            ),
            (
                "fairway_tcp_path_memory_used_total",
                "counter",
                "Connections that started from a remembered path's RTT and ssthresh (--fast-start).",
                |m| m.stack.as_ref().map(|c| c.path_memory_used),
            ),
            (
                "fairway_tcp_path_memory_updates_total",
                "counter",
                "Paths written to the path cache by connections that ended.",
                |m| m.stack.as_ref().map(|c| c.path_memory_updates),
            ),
            ("fairway_tcp_fast_start_jumps_total", "counter", "Careful resume's jumps (RFC 9959).", |m| {
                m.stack.as_ref().map(|c| c.fast_start_jumps)
            }),
            ("fairway_tcp_fast_start_retreats_total", "counter", "Careful resume's safe retreats (RFC 9959).", |m| {
                m.stack.as_ref().map(|c| c.fast_start_retreats)
            }),
            (
                "fairway_tcp_segments_not_owned_total",
                "counter",
                "TCP segments of a flow another shard owns (none while software steering runs).",
                |m| m.stack.as_ref().map(|c| c.segments_not_owned),
            ),
            (
                "fairway_tcp_orphans_given_up_total",
                "counter",
                "Closed connections given up after the user timeout with their data held by a zero window.",
                |m| m.stack.as_ref().map(|c| c.orphans_given_up),
            ),
            (
                "fairway_tcp_time_wait_reused_total",
                "counter",
                "Outgoing connections that took over a four-tuple in TIME-WAIT (held 1 s or more, timestamps on).",
                |m| m.stack.as_ref().map(|c| c.time_wait_reused),
            ),
            ("fairway_icmp_echo_replies_total", "counter", "ICMP and ICMPv6 echo replies sent.", |m| {
                m.stack.as_ref().map(|c| c.echo_replies)
            }),
            (
                "fairway_ipv6_neighbor_solicitations_total",
                "counter",
                "IPv6 Neighbor Solicitations sent (duplicate address detection's included).",
                |m| m.stack.as_ref().map(|c| c.neighbor_solicits),
            ),
            ("fairway_ipv6_neighbor_advertisements_total", "counter", "IPv6 Neighbor Advertisements sent.", |m| {
                m.stack.as_ref().map(|c| c.neighbor_adverts)
            }),
            (
                "fairway_ipv6_duplicate_addresses_total",
                "counter",
                "IPv6 addresses of ours found in use by another node, and so never used.",
                |m| m.stack.as_ref().map(|c| c.duplicate_addresses),
            ),
            ("fairway_ipv6_parameter_problems_total", "counter", "ICMPv6 parameter problems sent.", |m| {
                m.stack.as_ref().map(|c| c.param_problems_sent)
            }),
            (
                "fairway_pool_bytes_trimmed_total",
                "counter",
                "Bytes of pooled connection buffers freed after a 5 s interval that did not need them.",
                |m| m.stack.as_ref().map(|c| c.pool_bytes_trimmed),
            ),
            ("fairway_tls_handshakes_total", "counter", "TLS handshakes completed.", |m| m.tls.map(|t| t.handshakes)),
            (
                "fairway_tls_resumed_total",
                "counter",
                "TLS handshakes that resumed a session (a ticket or a session id).",
                |m| m.tls.map(|t| t.resumed),
            ),
            (
                "fairway_tls_errors_total",
                "counter",
                "TLS connections failed by the peer's error (an alert sent, the connection closed).",
                |m| m.tls.map(|t| t.errors),
            ),
            (
                "fairway_tls_handshake_timeouts_total",
                "counter",
                "TLS handshakes not finished within --handshake-timeout (an alert sent, the connection closed).",
                |m| m.tls.map(|t| t.handshake_timeouts),
            ),
            (
                "fairway_tls_handshakes_evicted_total",
                "counter",
                "TLS handshakes cut short, oldest first, when the shard had its share of the connection limit in handshakes.",
                |m| m.tls.map(|t| t.handshakes_evicted),
            ),
            ("fairway_proxy_forwarded_total", "counter", "Requests the reverse proxy forwarded upstream.", |m| {
                m.proxy.map(|p| p.forwarded)
            }),
            ("fairway_proxy_upstream_connects_total", "counter", "Upstream connections opened.", |m| {
                m.proxy.map(|p| p.connects)
            }),
            (
                "fairway_proxy_reused_total",
                "counter",
                "Requests sent on a pooled keep-alive upstream connection.",
                |m| m.proxy.map(|p| p.reused),
            ),
            (
                "fairway_proxy_retries_total",
                "counter",
                "Requests sent again: a pooled connection turned out closed, or a server refused.",
                |m| m.proxy.map(|p| p.retries),
            ),
            ("fairway_proxy_bad_gateway_total", "counter", "Proxied requests answered 502.", |m| {
                m.proxy.map(|p| p.bad_gateway)
            }),
            ("fairway_proxy_gateway_timeout_total", "counter", "Proxied requests answered 504.", |m| {
                m.proxy.map(|p| p.gateway_timeout)
            }),
            (
                "fairway_proxy_cut_total",
                "counter",
                "Proxied responses cut mid-body (the upstream closed or stalled).",
                |m| m.proxy.map(|p| p.cut),
            ),
            (
                "fairway_http2_connections_total",
                "counter",
                "Connections that spoke HTTP/2 to the built-in endpoints or a Handler.",
                |m| m.http2.map(|h| h.0),
            ),
            (
                "fairway_http2_streams_total",
                "counter",
                "HTTP/2 requests answered by the built-in endpoints or a Handler.",
                |m| m.http2.map(|h| h.1),
            ),
            (
                "fairway_tasks",
                "gauge",
                "The server's tasks alive on the shard's tokio runtime (main tasks, connections).",
                |m| m.tasks.map(|t| t.0),
            ),
            (
                "fairway_task_panics_total",
                "counter",
                "Async tasks that panicked (each dropped; the shard went on).",
                |m| m.tasks.map(|t| t.1),
            ),
            ("fairway_loop_turns_total", "counter", "Turns of the shard loop.", |m| m.looped.map(|l| l.turns)),
            ("fairway_loop_sleeps_total", "counter", "Sleeps on the device.", |m| m.looped.map(|l| l.sleeps)),
            ("fairway_loop_itr_pauses_total", "counter", "Interrupt-coalescing pauses.", |m| {
                m.looped.map(|l| l.itr_pauses)
            }),
            ("fairway_loop_itr_paused_seconds_total", "counter", "Time spent in coalescing pauses.", |m| {
                m.looped.map(|l| l.itr_paused_us)
            }),
            ("fairway_loop_busy_poll_turns_total", "counter", "Idle turns spent busy-polling.", |m| {
                m.looped.map(|l| l.busy_poll_turns)
            }),
            ("fairway_loop_busy_poll_hits_total", "counter", "Times busy-polling found work before sleeping.", |m| {
                m.looped.map(|l| l.busy_poll_hits)
            }),
            (
                "fairway_loop_wake_cost_seconds",
                "gauge",
                "What a sleep and a wake-up cost the shard in CPU time, measured at its start.",
                |m| m.looped.map(|l| l.wake_cost_ns / 1000),
            ),
            ("fairway_loop_spin_window_seconds", "gauge", "The longest the shard busy-polls before it sleeps.", |m| {
                m.looped.map(|l| l.spin_window_ns / 1000)
            }),
            ("fairway_loop_events_total", "counter", "Stack events handed to the application.", |m| {
                m.looped.map(|l| l.events)
            }),
            ("fairway_flows_omitted", "gauge", "Connections left out of the per-flow metrics.", |m| {
                Some(m.flows_omitted.max(m.fair_flows_omitted))
            }),
            ("fairway_fairness_active_flows", "gauge", "Flows window control counts as active.", |m| {
                m.fair_totals.map(|t| t.active)
            }),
        ];
        for (name, kind, help, get) in per_shard {
            let mut first = true;
            for slot in &self.slots {
                let m = lock(slot);
                let Some(v) = get(&m) else { continue };
                if std::mem::take(&mut first) {
                    family(out, name, kind, help)?;
                }
                // Times are kept in microseconds.
                if name.ends_with("_seconds_total") || name.ends_with("_seconds") {
                    writeln!(out, "{name}{{shard=\"{}\"}} {}", m.shard, seconds(v))?;
                } else {
                    writeln!(out, "{name}{{shard=\"{}\"}} {v}", m.shard)?;
                }
            }
        }

        let name = "fairway_drops_total";
        let mut first = true;
        for slot in &self.slots {
            let m = lock(slot);
            let Some(stack) = &m.stack else { continue };
            if std::mem::take(&mut first) {
                family(out, name, "counter", "Frames the stack dropped, by reason.")?;
            }
            for &reason in DropReason::ALL {
                let n = stack.dropped(reason);
                writeln!(out, "{name}{{shard=\"{}\",reason=\"{}\"}} {n}", m.shard, reason.label())?;
            }
        }

        self.write_fairness(out)?;

        type Steer = fn(&SteeringCounts) -> u64;
        let steering: [(&str, &str, &str, &str, Steer); 5] = [
            ("fairway_steered_frames_total", "Frames steered between shards.", "direction", "out", |s| s.steered_out),
            ("fairway_steered_frames_total", "", "direction", "in", |s| s.steered_in),
            ("fairway_steered_frames_total", "", "direction", "broadcast", |s| s.broadcast),
            ("fairway_steering_drops_total", "Frames steering dropped, by reason.", "reason", "inbox_full", |s| {
                s.inbox_full
            }),
            ("fairway_steering_drops_total", "", "reason", "pool_empty", |s| s.pool_empty),
        ];
        let mut last = "";
        for (name, help, key, value, get) in steering {
            for slot in &self.slots {
                let m = lock(slot);
                let Some(s) = &m.steering else { continue };
                if last != name {
                    family(out, name, "counter", help)?;
                    last = name;
                }
                writeln!(out, "{name}{{shard=\"{}\",{key}=\"{value}\"}} {}", m.shard, get(s))?;
            }
        }

        let name = "fairway_loop_rx_batch_frames";
        let mut first = true;
        for slot in &self.slots {
            let m = lock(slot);
            let Some(l) = &m.looped else { continue };
            if std::mem::take(&mut first) {
                family(out, name, "histogram", "Frames per non-empty receive of the shard loop.")?;
            }
            let mut cumulative = 0;
            for (i, &n) in l.batch_histogram.iter().enumerate().take(BATCH_BUCKETS - 1) {
                cumulative += n;
                writeln!(out, "{name}_bucket{{shard=\"{}\",le=\"{}\"}} {cumulative}", m.shard, (2u64 << i) - 1)?;
            }
            writeln!(out, "{name}_bucket{{shard=\"{}\",le=\"+Inf\"}} {}", m.shard, l.rx_batches)?;
            writeln!(out, "{name}_sum{{shard=\"{}\"}} {}", m.shard, l.frames_in)?;
            writeln!(out, "{name}_count{{shard=\"{}\"}} {}", m.shard, l.rx_batches)?;
        }

        self.write_flows(out)?;
        self.write_fair_flows(out)
    }

    /// The policy in force and Jain's index over every shard's active flows.
    fn write_fairness(&self, out: &mut Vec<u8>) -> std::io::Result<()> {
        if let Some((policy, capacity)) = &self.fairness {
            family(out, "fairway_fairness_info", "gauge", "The fairness policy in force; the value is always 1.")?;
            out.write_all(b"fairway_fairness_info{policy=\"")?;
            escape_label_value(out, policy);
            out.write_all(b"\",capacity_bits_per_second=\"")?;
            escape_label_value(out, capacity);
            out.write_all(b"\"} 1\n")?;
        }
        let mut merged: Option<FairTotals> = None;
        for slot in &self.slots {
            let Some(t) = lock(slot).fair_totals else { continue };
            let m = merged.get_or_insert_default();
            m.active += t.active;
            m.rate_sum += t.rate_sum;
            m.rate_squares += t.rate_squares;
        }
        if let Some(t) = merged {
            let name = "fairway_fairness_jain_index";
            let help = "Jain's index over the delivery rates of every active flow (1 = equal; 1 with none).";
            family(out, name, "gauge", help)?;
            let j = if t.active == 0 || t.rate_squares <= 0.0 {
                1.0
            } else {
                t.rate_sum * t.rate_sum / (t.active as f64 * t.rate_squares)
            };
            writeln!(out, "{name} {j}")?;
        }
        Ok(())
    }

    /// Window control's view of each listed flow.
    fn write_fair_flows(&self, out: &mut Vec<u8>) -> std::io::Result<()> {
        type Get = fn(&FairFlow) -> Option<f64>;
        let per_flow: [(&str, &str, Get); 6] = [
            ("fairway_fairness_flow_srtt_seconds", "The smoothed RTT window control used.", |f| secs(Some(f.srtt))),
            ("fairway_fairness_flow_min_rtt_seconds", "The minimum RTT window control used.", |f| {
                secs(Some(f.min_rtt))
            }),
            (
                "fairway_fairness_flow_delivery_rate_bytes_per_second",
                "Payload bytes per second a flow recently delivered.",
                |f| Some(f.delivery_rate),
            ),
            ("fairway_fairness_flow_window_cap_bytes", "The cap on the window advertised to an uploader.", |f| {
                f.window_cap.map(f64::from)
            }),
            ("fairway_fairness_flow_pacing_cap_bytes_per_second", "The cap on a download's pacing rate.", |f| {
                f.pacing_cap.map(|p| p as f64)
            }),
            ("fairway_fairness_flow_weight", "A flow's weight in the policy's shares (--weight; 1 by default).", |f| {
                Some(f.weight)
            }),
        ];
        for (name, help, get) in per_flow {
            let mut first = true;
            for slot in &self.slots {
                let m = lock(slot);
                for flow in &m.fair_flows {
                    let Some(v) = get(flow) else { continue };
                    if std::mem::take(&mut first) {
                        family(out, name, "gauge", help)?;
                    }
                    let direction = match flow.direction {
                        Direction::Upload => "upload",
                        Direction::Download => "download",
                    };
                    writeln!(
                        out,
                        "{name}{{shard=\"{}\",local=\"{}\",remote=\"{}\",direction=\"{direction}\"}} {v}",
                        m.shard, flow.local, flow.remote
                    )?;
                }
            }
        }
        Ok(())
    }

    fn write_flows(&self, out: &mut Vec<u8>) -> std::io::Result<()> {
        type Get = fn(&FlowStats) -> Option<f64>;
        let per_flow: [(&str, &str, Get); 8] = [
            ("fairway_flow_srtt_seconds", "Smoothed RTT of a connection (RFC 6298).", |f| secs(f.srtt)),
            ("fairway_flow_rttvar_seconds", "RTT variation of a connection.", |f| secs(f.rttvar)),
            ("fairway_flow_min_rtt_seconds", "Windowed minimum RTT of a connection.", |f| secs(f.min_rtt)),
            ("fairway_flow_cwnd_bytes", "Congestion window of a connection.", |f| Some(f64::from(f.cwnd))),
            ("fairway_flow_send_window_bytes", "The peer's advertised window.", |f| Some(f64::from(f.snd_wnd))),
            ("fairway_flow_receive_window_bytes", "The window last advertised to the peer.", |f| {
                Some(f64::from(f.rcv_wnd))
            }),
            ("fairway_flow_receive_window_cap_bytes", "The fairness policy's cap on the advertised window.", |f| {
                f.rcv_wnd_cap.map(f64::from)
            }),
            ("fairway_flow_retransmits", "Segments a connection sent again.", |f| Some(f64::from(f.retransmits))),
        ];
        for (name, help, get) in per_flow {
            let mut first = true;
            for slot in &self.slots {
                let m = lock(slot);
                for flow in &m.flows {
                    let Some(v) = get(flow) else { continue };
                    if std::mem::take(&mut first) {
                        family(out, name, "gauge", help)?;
                    }
                    write!(
                        out,
                        "{name}{{shard=\"{}\",local=\"{}\",remote=\"{}\"}} ",
                        m.shard, flow.local, flow.remote
                    )?;
                    writeln!(out, "{v}")?;
                }
            }
        }
        Ok(())
    }
}

/// A span of the stack's clock in seconds.
fn secs(d: Option<fairway_stack::time::Duration>) -> Option<f64> {
    d.map(|d| d.total_micros() as f64 / 1e6)
}

/// Locks a slot; a shard that panicked while publishing left a whole copy
/// or a half one, and either is better than no metrics.
fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// The `# HELP` and `# TYPE` lines that open a metric family.
fn family(out: &mut Vec<u8>, name: &str, kind: &str, help: &str) -> std::io::Result<()> {
    writeln!(out, "# HELP {name} {help}")?;
    writeln!(out, "# TYPE {name} {kind}")
}

/// Microseconds as seconds, exactly (no float rounding: `1.5`, `0.00005`).
fn seconds(us: u64) -> Seconds {
    Seconds(us)
}

struct Seconds(u64);

impl std::fmt::Display for Seconds {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (whole, frac) = (self.0 / 1_000_000, self.0 % 1_000_000);
        if frac == 0 {
            return write!(f, "{whole}");
        }
        let mut digits = [0u8; 6];
        let mut rest = frac;
        for d in digits.iter_mut().rev() {
            *d = b'0' + (rest % 10) as u8;
            rest /= 10;
        }
        let len = 6 - digits.iter().rev().take_while(|&&d| d == b'0').count();
        let digits = std::str::from_utf8(&digits[..len]).map_err(|_| std::fmt::Error)?;
        write!(f, "{whole}.{digits}")
    }
}

/// Writes `value` as the inside of a quoted label value: backslash, double
/// quote and line feed escaped, as the text format requires.
pub fn escape_label_value(out: &mut Vec<u8>, value: &str) {
    for b in value.bytes() {
        match b {
            b'\\' => out.extend_from_slice(b"\\\\"),
            b'"' => out.extend_from_slice(b"\\\""),
            b'\n' => out.extend_from_slice(b"\\n"),
            _ => out.push(b),
        }
    }
}

#[cfg(test)]
mod tests;
