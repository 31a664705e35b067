//! The results: one row per server and case (medians over the rounds), as
//! a table for the terminal and in Markdown, the closing line, and the
//! file it is written to.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::plan::{Case, Generator, Group, H2_STREAMS, Subject, UpstreamAt};
use super::wrk::{WrkResult, format_latency};
use crate::stats::median;

/// One server on one case.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The server measured.
    pub server: Subject,
    /// The load.
    pub case: Case,
    /// The medians over the rounds, or why there are none.
    pub outcome: Result<Summary, String>,
}

/// The medians of a case's rounds.
#[derive(Clone, Debug, PartialEq)]
pub struct Summary {
    /// Requests (responses) per second.
    pub requests_per_second: f64,
    /// Latency percentiles: medians of the rounds that gave one, `None`
    /// when none did (wrk's distribution was inconsistent).
    pub p50: Option<Duration>,
    /// See `p50`.
    pub p99: Option<Duration>,
    /// Errors (socket errors and non-2xx responses) over all rounds.
    pub errors: u64,
    /// Of those, wrk's timeouts (answers slower than its 2 s).
    pub timeouts: u64,
    /// How many rounds the medians are of.
    pub rounds: usize,
    /// The server's CPU time per request: the median of the rounds that
    /// measured it.
    pub server_cpu: Option<Duration>,
    /// The idle case's: the server's CPU as a share of one core, median.
    pub idle_share: Option<f64>,
}

impl Summary {
    /// The medians of `runs` (at least one).
    #[must_use]
    pub fn of(runs: &[WrkResult]) -> Option<Summary> {
        if runs.is_empty() {
            return None;
        }
        let secs = |pick: fn(&WrkResult) -> Option<Duration>| {
            let given: Vec<f64> = runs.iter().filter_map(|r| Some(pick(r)?.as_secs_f64())).collect();
            (!given.is_empty()).then(|| Duration::from_secs_f64(median(given)))
        };
        Some(Summary {
            requests_per_second: median(runs.iter().map(|r| r.requests_per_second).collect()),
            p50: secs(|r| r.p50),
            p99: secs(|r| r.p99),
            errors: runs.iter().map(WrkResult::errors).sum(),
            timeouts: runs.iter().map(|r| r.timeouts).sum(),
            rounds: runs.len(),
            server_cpu: secs(|r| r.server_cpu),
            idle_share: {
                let given: Vec<f64> = runs.iter().filter_map(|r| r.idle_share).collect();
                (!given.is_empty()).then(|| median(given))
            },
        })
    }
}

/// The rows of a run, in the order measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// One per server and case.
    pub rows: Vec<Row>,
    /// The open-loop rate of the built-in group's latency case: half
    /// nginx's keep-alive-256 requests per second.
    pub latency_rate: Option<f64>,
    /// The same for the axum group: half axum/tokio's.
    pub axum_latency_rate: Option<f64>,
    /// The MTU of every link it was measured on.
    pub mtu: u32,
    /// Where the proxies' upstream ran.
    pub upstream: UpstreamAt,
}

impl Report {
    fn summary(&self, server: Subject, case: Case) -> Option<&Summary> {
        let row = self.rows.iter().find(|r| r.server == server && r.case == case)?;
        row.outcome.as_ref().ok()
    }

    /// `group`'s open-loop rate, if it had one.
    #[must_use]
    pub fn rate(&self, group: Group) -> Option<f64> {
        match group {
            Group::BuiltIn => self.latency_rate,
            Group::Axum => self.axum_latency_rate,
            Group::Tls | Group::Proxy => None,
        }
    }

    /// `server`'s requests per second over its group baseline's (nginx,
    /// or axum/tokio) on `case`.
    #[must_use]
    pub fn ratio(&self, server: Subject, case: Case) -> Option<f64> {
        self.ratio_to(server, server.group().baseline(), case)
    }

    /// `server`'s requests per second over `against`'s on `case`.
    fn ratio_to(&self, server: Subject, against: Subject, case: Case) -> Option<f64> {
        let against = self.summary(against, case)?.requests_per_second;
        let this = self.summary(server, case)?.requests_per_second;
        (against > 0.0).then_some(this / against)
    }

    /// `server`'s p99 over its group baseline's on `case` (for the
    /// latency case: lower is better).
    #[must_use]
    pub fn p99_ratio(&self, server: Subject, case: Case) -> Option<f64> {
        let baseline = self.summary(server.group().baseline(), case)?.p99?.as_secs_f64();
        let this = self.summary(server, case)?.p99?.as_secs_f64();
        (baseline > 0.0).then_some(this / baseline)
    }

    /// The groups with rows, in [`Group::ALL`]'s order (the built-in one
    /// when there are none, for an empty table).
    fn groups(&self) -> Vec<Group> {
        let present: Vec<Group> =
            Group::ALL.into_iter().filter(|&g| self.rows.iter().any(|r| r.server.group() == g)).collect();
        if present.is_empty() { vec![Group::BuiltIn] } else { present }
    }

    /// The cells of `group`'s rows of the cases `generator` measures
    /// (wrk's throughput cases, h2load's HTTP/2 cases, or the open-loop
    /// latency cases): server, case, req/s, p50 and p99 (not h2load's,
    /// which has none), ratio to the group's baseline (req/s, or p99 for
    /// the latency cases), the server's CPU time per request, errors.
    fn cells(&self, group: Group, generator: Generator) -> Vec<Vec<String>> {
        if generator == Generator::Idle {
            return self
                .rows
                .iter()
                .filter(|row| row.server.group() == group && row.case.generator() == generator)
                .map(|row| {
                    let share = match &row.outcome {
                        Ok(s) => s.idle_share.map_or("–".to_owned(), |f| format!("{:.2}", f * 100.0)),
                        Err(why) => one_line(why),
                    };
                    vec![row.server.name().to_owned(), share]
                })
                .collect();
        }
        let percentiles = generator != Generator::H2load;
        self.rows
            .iter()
            .filter(|row| row.server.group() == group && row.case.generator() == generator)
            .map(|row| {
                let mut cells = vec![row.server.name().to_owned(), row.case.describe_for(group)];
                let ratio = match generator {
                    Generator::OpenLoop => self.p99_ratio(row.server, row.case),
                    Generator::Wrk | Generator::H2load | Generator::Idle => self.ratio(row.server, row.case),
                };
                match &row.outcome {
                    Ok(s) => {
                        cells.push(format!("{:.0}", s.requests_per_second));
                        if percentiles {
                            cells.extend([latency_cell(s.p50), latency_cell(s.p99)]);
                        }
                        cells.push(ratio.map_or("–".to_owned(), |r| format!("{r:.2}")));
                    }
                    Err(_) => {
                        cells.push("failed".into());
                        let figures = if percentiles { 3 } else { 1 };
                        cells.extend(std::iter::repeat_n("–".to_owned(), figures));
                    }
                }
                let cpu = row.outcome.as_ref().ok().and_then(|s| s.server_cpu);
                cells.push(cpu.map_or("–".to_owned(), cpu_cell));
                cells.push(match &row.outcome {
                    Ok(s) if s.timeouts > 0 => format!("{} ({} timeouts)", s.errors, s.timeouts),
                    Ok(s) => s.errors.to_string(),
                    Err(why) => one_line(why),
                });
                cells
            })
            .collect()
    }

    /// `group`'s tables: throughput from wrk, HTTP/2 from h2load, latency
    /// at half its baseline's rate; those without rows left out (wrk's
    /// kept, empty, when all are).
    fn tables(&self, group: Group) -> Vec<Table> {
        let table = |generator| Table {
            title: self.table_title(group, generator),
            header: header(group, generator),
            cells: self.cells(group, generator),
        };
        let mut tables: Vec<Table> = [Generator::Wrk, Generator::H2load, Generator::OpenLoop, Generator::Idle]
            .into_iter()
            .map(table)
            .filter(|t| !t.cells.is_empty())
            .collect();
        if tables.is_empty() {
            tables.push(table(Generator::Wrk));
        }
        tables
    }

    /// The tables for a terminal, aligned: for each group, throughput,
    /// then (if any) HTTP/2 and latency at half its baseline's rate.
    #[must_use]
    pub fn text_table(&self) -> String {
        self.rendered(aligned, "\n")
    }

    /// The tables in Markdown.
    #[must_use]
    pub fn markdown_table(&self) -> String {
        self.rendered(markdown_rows, "\n\n")
    }

    /// Every group's title and tables, each table by `render`; a title is
    /// followed by `after_title` and preceded by a blank line (but at the
    /// top).
    fn rendered(&self, render: fn(&[String], &[Vec<String>]) -> String, after_title: &str) -> String {
        let mut out = String::new();
        let title = |out: &mut String, title: String| {
            if !out.is_empty() {
                out.push('\n');
            }
            out.push_str(&title);
            out.push_str(after_title);
        };
        for group in self.groups() {
            if let Some(group_title) = group_title(group, self.upstream) {
                title(&mut out, group_title);
            }
            for table in self.tables(group) {
                if let Some(table_title) = table.title {
                    title(&mut out, table_title);
                }
                out.push_str(&render(&table.header, &table.cells));
            }
        }
        out
    }

    /// What comes above `group`'s table of the cases `generator` measures:
    /// nothing for wrk's.
    fn table_title(&self, group: Group, generator: Generator) -> Option<String> {
        match generator {
            Generator::Wrk => None,
            Generator::H2load => Some(format!(
                "HTTP/2 from h2load, {H2_STREAMS} concurrent streams per connection, ratios to {}; no latency \
                 percentiles (h2load reports none, only a mean and spread); the server's CPU time per request over \
                 each run:",
                group.baseline()
            )),
            Generator::OpenLoop => Some(self.latency_title(group)),
            Generator::Idle => Some(
                "With no load at all (after a second's rest from the last case): the server's CPU time over the \
                 case's duration, as a share of one core:"
                    .to_owned(),
            ),
        }
    }

    /// What `group`'s latency table measures, and at what rate.
    fn latency_title(&self, group: Group) -> String {
        let baseline = group.baseline();
        let rate = self
            .rate(group)
            .map_or(format!("no rate: {baseline}'s keep-alive-256 figure is missing"), |r| format!("{r:.0} req/s"));
        format!(
            "Latency at half {baseline}'s saturated keep-alive-256 rate ({rate}), open loop, latency from when each \
             request was due; the server's CPU time per request over the same window:"
        )
    }

    /// `bench: p99 at half nginx's rate (R req/s): fairway/afxdp X vs nginx
    /// Y`, or what is missing for it; `None` when the latency case was not
    /// run.
    #[must_use]
    pub fn latency_line(&self) -> Option<String> {
        self.group_latency_line(Group::BuiltIn)
    }

    /// [`latency_line`](Self::latency_line) for `group`: its lead server
    /// against its baseline.
    fn group_latency_line(&self, group: Group) -> Option<String> {
        let case = Case::LatencyHalf;
        if !self.rows.iter().any(|r| r.case == case && r.server.group() == group) {
            return None;
        }
        let (lead, baseline) = (group.lead(), group.baseline());
        let rate = self.rate(group).map_or("no rate".to_owned(), |r| format!("{r:.0} req/s"));
        let p99 =
            |server| self.summary(server, case).and_then(|s| s.p99).map_or("no figure".to_owned(), format_latency);
        Some(format!(
            "bench: p99 at half {baseline}'s rate ({rate}): {lead} {} vs {baseline} {}",
            p99(lead),
            p99(baseline)
        ))
    }

    /// `bench: server CPU per request at R req/s: fairway/afxdp A µs,
    /// fairway/kernel B µs, nginx C µs` (every server of `group` that ran
    /// the latency case, in order), or what is missing; `None` when none
    /// of the group ran it.
    #[must_use]
    pub fn cpu_line(&self, group: Group) -> Option<String> {
        let rows: Vec<&Row> =
            self.rows.iter().filter(|r| r.case == Case::LatencyHalf && r.server.group() == group).collect();
        if rows.is_empty() {
            return None;
        }
        let rate = self.rate(group).map_or("no rate".to_owned(), |r| format!("{r:.0} req/s"));
        Some(format!("bench: server CPU per request at {rate}: {}", cpu_figures(&rows)))
    }

    /// `bench: LABEL X req/s = R × AGAINST (WHAT)` for `server` against
    /// `against` on `case`, or what is missing for it.
    fn comparison(
        &self,
        (server, label): (Subject, &str),
        (against, against_label): (Subject, &str),
        case: Case,
        what: &str,
    ) -> String {
        match (self.summary(server, case), self.ratio_to(server, against, case)) {
            (Some(s), Some(r)) => {
                format!("bench: {label} {:.0} req/s = {r:.2} × {against_label} ({what})", s.requests_per_second)
            }
            (Some(s), None) => format!(
                "bench: {label} {:.0} req/s, no {against_label} figure to compare ({what})",
                s.requests_per_second
            ),
            (None, _) => format!("bench: {label}: no figure ({what})"),
        }
    }

    /// `bench: fairway/afxdp X req/s = R × nginx (keep-alive plaintext, 256
    /// connections)`, or what is missing for it.
    #[must_use]
    pub fn headline(&self) -> String {
        let (afxdp, nginx, case) = (Subject::FairwayAfxdp, Subject::Nginx, Case::HEADLINE);
        self.comparison((afxdp, afxdp.name()), (nginx, nginx.name()), case, case.describe())
    }

    /// When the static case ran: `bench: static 1MB fairway/afxdp X req/s =
    /// R × nginx (MTU M)`, or what is missing for it.
    #[must_use]
    pub fn static_line(&self) -> Option<String> {
        let case = Case::StaticFile;
        if !self.rows.iter().any(|r| r.case == case && r.server.group() == Group::BuiltIn) {
            return None;
        }
        let (afxdp, nginx) = (Subject::FairwayAfxdp, Subject::Nginx);
        let label = format!("static 1MB {}", afxdp.name());
        let what = format!("MTU {}", self.mtu);
        Some(self.comparison((afxdp, &label), (nginx, nginx.name()), case, &what))
    }

    /// When the static case ran: `bench: static 1MB server CPU per request:
    /// fairway/afxdp A, ..., nginx B` for every built-in server that ran it
    /// (wrk saturates before the server on a small machine: this is the
    /// figure that compares the servers then).
    #[must_use]
    pub fn static_cpu_line(&self) -> Option<String> {
        let rows: Vec<&Row> =
            self.rows.iter().filter(|r| r.case == Case::StaticFile && r.server.group() == Group::BuiltIn).collect();
        if rows.is_empty() {
            return None;
        }
        Some(format!("bench: static 1MB server CPU per request: {}", cpu_figures(&rows)))
    }

    /// When the axum servers ran: `bench: axum on fairway/afxdp X req/s = R
    /// × axum on tokio (keep-alive, 256 connections)`, and the same with
    /// `Connection: close` over 64 connections.
    #[must_use]
    pub fn axum_lines(&self) -> Vec<String> {
        if !self.rows.iter().any(|r| r.server.group() == Group::Axum) {
            return Vec::new();
        }
        let (ours, theirs) = ((Subject::AxumAfxdp, "axum on fairway/afxdp"), (Subject::AxumTokio, "axum on tokio"));
        vec![
            self.comparison(ours, theirs, Case::KeepAlive256, "keep-alive, 256 connections"),
            self.comparison(ours, theirs, Case::Close, "Connection: close, 64 connections"),
        ]
    }

    /// When the HTTPS servers ran: `bench: https fairway/afxdp X req/s = R
    /// × nginx (keep-alive, 256 connections)`, and handshakes a second
    /// (`Connection: close`) the same way.
    #[must_use]
    pub fn tls_lines(&self) -> Vec<String> {
        if !self.rows.iter().any(|r| r.server.group() == Group::Tls) {
            return Vec::new();
        }
        let nginx = (Subject::TlsNginx, "nginx");
        let mut lines = Vec::new();
        for (ours, label) in [(Subject::TlsKernel, "https fairway/kernel"), (Subject::TlsAfxdp, "https fairway/afxdp")]
        {
            if self.rows.iter().any(|r| r.server == ours) {
                let handshakes = format!("{label} handshakes");
                lines.push(self.comparison(
                    (ours, &handshakes),
                    nginx,
                    Case::Close,
                    "Connection: close, 64 connections",
                ));
                lines.push(self.comparison((ours, label), nginx, Case::KeepAlive256, "keep-alive, 256 connections"));
            }
        }
        lines
    }

    /// When the proxies ran: `bench: proxy fairway/afxdp X req/s = R ×
    /// nginx proxy_pass (keep-alive, 256 connections)` (issue 14's line),
    /// the same for the 1 MB file, then the proxies' CPU per request in
    /// each.
    #[must_use]
    pub fn proxy_lines(&self) -> Vec<String> {
        if !self.rows.iter().any(|r| r.server.group() == Group::Proxy) {
            return Vec::new();
        }
        let nginx = (Subject::ProxyNginx, "nginx proxy_pass");
        let mut lines = Vec::new();
        for (ours, label) in [(Subject::ProxyKernel, "fairway/kernel"), (Subject::ProxyAfxdp, "fairway/afxdp")] {
            if self.rows.iter().any(|r| r.server == ours) {
                let keep_alive = format!("proxy {label}");
                lines.push(self.comparison(
                    (ours, &keep_alive),
                    nginx,
                    Case::KeepAlive256,
                    "keep-alive, 256 connections",
                ));
                let file = format!("proxy static 1MB {label}");
                lines.push(self.comparison((ours, &file), nginx, Case::StaticFile, "64 connections"));
            }
        }
        for case in [Case::KeepAlive256, Case::StaticFile] {
            let rows: Vec<&Row> =
                self.rows.iter().filter(|r| r.case == case && r.server.group() == Group::Proxy).collect();
            if !rows.is_empty() {
                lines.push(format!("bench: proxied {} proxy CPU per request: {}", case.key(), cpu_figures(&rows)));
            }
        }
        lines
    }

    /// When the HTTP/2 cases ran: `bench: h2 fairway/afxdp X req/s = R ×
    /// nginx (h2load, TLS, 64 connections × 32 streams)` (the HTTPS
    /// servers) and `bench: h2c fairway/afxdp ... (h2load, prior knowledge,
    /// ...)` (clear text), each followed by the server CPU per request of
    /// every server that ran it.
    #[must_use]
    pub fn http2_lines(&self) -> Vec<String> {
        let mut lines = Vec::new();
        for (case, ours, nginx, how) in [
            (Case::H2, Subject::TlsAfxdp, Subject::TlsNginx, "TLS"),
            (Case::H2c, Subject::FairwayAfxdp, Subject::Nginx, "prior knowledge"),
        ] {
            let rows: Vec<&Row> = self.rows.iter().filter(|r| r.case == case).collect();
            if rows.is_empty() {
                continue;
            }
            let label = format!("{} fairway/afxdp", case.key());
            let what = format!("h2load, {how}, {} connections × {H2_STREAMS} streams", case.connections());
            lines.push(self.comparison((ours, &label), (nginx, "nginx"), case, &what));
            lines.push(format!("bench: {} server CPU per request: {}", case.key(), cpu_figures(&rows)));
        }
        lines
    }

    /// When the idle case ran: `bench: idle CPU fairway/afxdp X % of a
    /// core, ...` for every server it ran on, in the order they ran.
    #[must_use]
    pub fn idle_line(&self) -> Option<String> {
        let figures: Vec<String> = self
            .rows
            .iter()
            .filter(|r| r.case == Case::Idle)
            .map(|r| match r.outcome.as_ref().ok().and_then(|s| s.idle_share) {
                Some(share) => format!("{} {:.2} %", r.server.name(), share * 100.0),
                None => format!("{} no figure", r.server.name()),
            })
            .collect();
        (!figures.is_empty()).then(|| format!("bench: idle CPU, % of one core: {} (no load)", figures.join(", ")))
    }

    /// For each baseline server that ran: `bench: fairway/afxdp X req/s = R
    /// × baseline/afxdp (keep-alive plaintext, 256 connections)`, the
    /// same for kernel.
    #[must_use]
    pub fn baseline_lines(&self) -> Vec<String> {
        let case = Case::HEADLINE;
        [(Subject::FairwayAfxdp, Subject::BaselineAfxdp), (Subject::FairwayKernel, Subject::BaselineKernel)]
            .into_iter()
            .filter(|&(_, baseline)| self.rows.iter().any(|r| r.server == baseline))
            .map(|(ours, baseline)| {
                self.comparison((ours, ours.name()), (baseline, baseline.name()), case, case.describe())
            })
            .collect()
    }

    /// The closing lines: against the baseline build, the axum group's
    /// throughput, HTTPS's, the proxies', HTTP/2's, the axum group's p99
    /// and CPU per request, the built-in group's CPU per request and p99,
    /// the static file's (each if it ran), then the headline, last.
    #[must_use]
    pub fn closing_lines(&self) -> Vec<String> {
        let mut lines = self.baseline_lines();
        lines.extend(self.axum_lines());
        lines.extend(self.tls_lines());
        lines.extend(self.proxy_lines());
        lines.extend(self.http2_lines());
        lines.extend(self.group_latency_line(Group::Axum));
        lines.extend(self.cpu_line(Group::Axum));
        lines.extend(self.cpu_line(Group::BuiltIn));
        lines.extend(self.latency_line());
        lines.extend(self.static_cpu_line());
        lines.extend(self.static_line());
        lines.extend(self.idle_line());
        lines.push(self.headline());
        lines
    }

    /// The whole Markdown file: title, `setup` lines, tables, closing
    /// lines.
    #[must_use]
    pub fn markdown(&self, date: &str, setup: &[String]) -> String {
        let mut out = format!("# HTTP benchmark, {date}\n\n");
        for line in setup {
            out.push_str(&format!("- {line}\n"));
        }
        out.push('\n');
        out.push_str(&self.markdown_table());
        out.push('\n');
        for line in self.closing_lines() {
            out.push_str(&format!("{line}\n"));
        }
        out
    }
}

/// One of a group's tables: its title (none for wrk's, which comes first),
/// column names and rows.
struct Table {
    title: Option<String>,
    header: Vec<String>,
    cells: Vec<Vec<String>>,
}

/// What comes above a group's tables: nothing for the built-in server's,
/// which comes first; for the axum group, what its rows are and what they
/// are compared with.
fn group_title(group: Group, upstream: UpstreamAt) -> Option<String> {
    match group {
        Group::BuiltIn => None,
        Group::Tls => Some(format!(
            "HTTPS (TLS 1.3, ECDSA P-256, the same certificate): the built-in server over rustls and nginx over \
             OpenSSL ({}), which the ratios are to; Connection: close is a full handshake per request:",
            Group::Tls.baseline()
        )),
        Group::Axum => Some(format!(
            "The axum example (server/examples/axum_app.rs) on Fairway, and the same router on tokio ({}), \
             which the ratios are to:",
            Group::Axum.baseline()
        )),
        Group::Proxy => Some(format!(
            "Reverse proxies in front of one upstream (Fairway on kernel sockets at {}{}, sharing the \
             server's cores): Fairway with --upstream, and nginx with proxy_pass and a keep-alive pool ({}), \
             which the ratios are to; CPU per request is the proxy's alone:",
            upstream.addr(),
            match upstream {
                UpstreamAt::Loopback => "",
                UpstreamAt::BeyondNic => {
                    " in the client's namespace, beyond the NIC: Fairway over AF_XDP reaches it through its own stack"
                }
            },
            Group::Proxy.baseline()
        )),
    }
}

/// The column names of `group`'s table of the cases `generator`
/// measures: the ratio is to the group's baseline; h2load's has no
/// percentiles.
fn header(group: Group, generator: Generator) -> Vec<String> {
    if generator == Generator::Idle {
        return vec!["server".into(), "CPU, % of one core".into()];
    }
    let baseline = group.baseline();
    let mut names: Vec<String> = ["server", "case", "req/s"].map(String::from).to_vec();
    if generator != Generator::H2load {
        names.extend(["p50", "p99"].map(String::from));
    }
    if generator == Generator::OpenLoop {
        names.push(format!("p99 × {baseline} (lower is better)"));
    } else {
        names.push(format!("× {baseline}"));
    }
    names.push("server CPU per request".into());
    names.push("errors".into());
    names
}

/// Rows under `header`, columns aligned: text left, numbers right, the
/// last column unpadded.
fn aligned(header: &[String], cells: &[Vec<String>]) -> String {
    let last = header.len().saturating_sub(1);
    let mut widths: Vec<usize> = header.iter().map(|h| h.chars().count()).collect();
    for row in cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |row: &[String]| {
        let mut out = String::new();
        for (i, (cell, &width)) in row.iter().zip(&widths).enumerate() {
            let pad = width - cell.chars().count();
            match i {
                0 | 1 => out.push_str(&format!("{cell}{}  ", " ".repeat(pad))),
                _ if i == last => out.push_str(cell),
                _ => out.push_str(&format!("{}{cell}  ", " ".repeat(pad))),
            }
        }
        out.trim_end().to_owned()
    };
    let mut out = line(header);
    out.push('\n');
    for row in cells {
        out.push_str(&line(row));
        out.push('\n');
    }
    out
}

fn markdown_rows(header: &[String], cells: &[Vec<String>]) -> String {
    let mut out = format!("| {} |\n", header.join(" | "));
    // Text left, numbers right.
    out.push_str("|---|---|");
    out.push_str(&"--:|".repeat(header.len().saturating_sub(2)));
    out.push('\n');
    for row in cells {
        let escaped: Vec<String> = row.iter().map(|c| c.replace('|', "\\|")).collect();
        out.push_str(&format!("| {} |\n", escaped.join(" | ")));
    }
    out
}

/// CPU time per request, to the hundredth of a microsecond.
/// `server A µs, server no figure, ...`: each row's server CPU per request.
fn cpu_figures(rows: &[&Row]) -> String {
    let figures: Vec<String> = rows
        .iter()
        .map(|row| {
            let cpu = row.outcome.as_ref().ok().and_then(|s| s.server_cpu);
            format!("{} {}", row.server, cpu.map_or("no figure".to_owned(), cpu_cell))
        })
        .collect();
    figures.join(", ")
}

fn cpu_cell(per_request: Duration) -> String {
    format!("{:.2} µs", per_request.as_secs_f64() * 1e6)
}

/// A latency, or `n/a` when there is none to trust.
fn latency_cell(latency: Option<Duration>) -> String {
    latency.map_or_else(|| "n/a".to_owned(), format_latency)
}

fn one_line(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// `YYYY-MM-DD` of the UTC day `days` after 1970-01-01 (the proleptic
/// Gregorian calendar, from its 400-year cycle of 146,097 days).
#[must_use]
pub fn date_from_unix_days(days: i64) -> String {
    // Count from 0000-03-01, so that the leap day ends each year.
    let z = days + 719_468;
    let era = z.div_euclid(146_097);
    let day_of_era = z.rem_euclid(146_097);
    let year_of_era = (day_of_era - day_of_era / 1460 + day_of_era / 36_524 - day_of_era / 146_096) / 365;
    let day_of_year = day_of_era - (365 * year_of_era + year_of_era / 4 - year_of_era / 100);
    let month_from_march = (5 * day_of_year + 2) / 153;
    let day = day_of_year - (153 * month_from_march + 2) / 5 + 1;
    let month = if month_from_march < 10 { month_from_march + 3 } else { month_from_march - 9 };
    let year = year_of_era + era * 400 + i64::from(month <= 2);
    format!("{year:04}-{month:02}-{day:02}")
}

/// Today's date, UTC.
#[must_use]
pub fn today() -> String {
    let secs = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_secs());
    date_from_unix_days(i64::try_from(secs / 86_400).unwrap_or(0))
}

/// `dir/http-DATE.md`, or `http-DATE-2.md`, `-3`, ... when taken: a second
/// run on the same day does not overwrite the first.
#[must_use]
pub fn result_path(dir: &Path, date: &str, taken: impl Fn(&Path) -> bool) -> PathBuf {
    let first = dir.join(format!("http-{date}.md"));
    if !taken(&first) {
        return first;
    }
    (2..).map(|n| dir.join(format!("http-{date}-{n}.md"))).find(|p| !taken(p)).unwrap_or(first)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rps: f64, p50_us: u64, p99_us: u64) -> WrkResult {
        WrkResult {
            idle_share: None,
            requests_per_second: rps,
            p50: Some(Duration::from_micros(p50_us)),
            p99: Some(Duration::from_micros(p99_us)),
            requests: 1,
            socket_errors: 0,
            timeouts: 0,
            non_2xx: 0,
            server_cpu: None,
        }
    }

    fn row(server: Subject, case: Case, rps: f64) -> Row {
        Row { server, case, outcome: Ok(Summary::of(&[run(rps, 900, 2500)]).unwrap()) }
    }

    #[test]
    fn the_idle_line_and_table_give_each_servers_share_of_a_core() {
        let idle = |server, shares: &[f64]| {
            let runs: Vec<WrkResult> =
                shares.iter().map(|&f| WrkResult { idle_share: Some(f), requests: 0, ..run(0.0, 0, 0) }).collect();
            Row { server, case: Case::Idle, outcome: Ok(Summary::of(&runs).unwrap()) }
        };
        let report = Report {
            rows: vec![
                idle(Subject::FairwayAfxdp, &[0.004, 0.001, 0.002]),
                idle(Subject::Nginx, &[0.0003]),
                Row { server: Subject::FairwayKernel, case: Case::Idle, outcome: Err("gone".into()) },
            ],
            ..Report::default()
        };
        assert_eq!(
            report.idle_line().unwrap(),
            "bench: idle CPU, % of one core: fairway/afxdp 0.20 %, nginx 0.03 %, fairway/kernel no figure (no load)"
        );
        assert!(report.closing_lines().iter().any(|l| l.starts_with("bench: idle CPU")));
        let text = report.text_table();
        assert!(text.contains("CPU, % of one core") && text.contains("0.20"), "{text}");
        assert_eq!(Report::default().idle_line(), None, "no idle case, no line");
    }

    fn sample() -> Report {
        Report {
            rows: vec![
                row(Subject::FairwayAfxdp, Case::KeepAlive256, 195_000.0),
                Row { server: Subject::FairwayKernel, case: Case::KeepAlive256, outcome: Err("did not\nstart".into()) },
                row(Subject::Nginx, Case::KeepAlive256, 130_000.0),
            ],
            latency_rate: None,
            axum_latency_rate: None,
            mtu: 1500,
            upstream: UpstreamAt::Loopback,
        }
    }

    #[test]
    fn the_proxies_get_their_own_lines_and_no_built_in_static_line() {
        let report = Report {
            rows: vec![
                row(Subject::ProxyAfxdp, Case::KeepAlive256, 20_000.0),
                row(Subject::ProxyAfxdp, Case::StaticFile, 200.0),
                row(Subject::ProxyNginx, Case::KeepAlive256, 14_000.0),
                row(Subject::ProxyNginx, Case::StaticFile, 250.0),
            ],
            latency_rate: None,
            axum_latency_rate: None,
            mtu: 1500,
            upstream: UpstreamAt::Loopback,
        };
        let lines = report.proxy_lines();
        assert_eq!(
            lines[..2],
            [
                "bench: proxy fairway/afxdp 20000 req/s = 1.43 × nginx proxy_pass (keep-alive, 256 connections)",
                "bench: proxy static 1MB fairway/afxdp 200 req/s = 0.80 × nginx proxy_pass (64 connections)",
            ]
        );
        assert!(lines[2].starts_with("bench: proxied keepalive-256 proxy CPU per request: "), "{lines:?}");
        assert_eq!(report.static_line(), None, "the built-in servers' static line is not the proxies'");
        assert!(report.markdown_table().contains("Reverse proxies in front of one upstream"));
        assert!(sample().proxy_lines().is_empty());
    }

    #[test]
    fn medians_over_rounds_and_errors_summed() {
        let mut runs = vec![run(100.0, 10, 100), run(300.0, 30, 300), run(200.0, 20, 200)];
        runs[0].socket_errors = 2;
        runs[0].timeouts = 1;
        runs[2].non_2xx = 1;
        let s = Summary::of(&runs).unwrap();
        assert_eq!(s.requests_per_second, 200.0);
        assert_eq!((s.p50, s.p99), (Some(Duration::from_micros(20)), Some(Duration::from_micros(200))));
        assert_eq!((s.errors, s.timeouts, s.rounds), (3, 1, 3));
        assert_eq!(Summary::of(&[]), None);
    }

    #[test]
    fn percentiles_wrk_did_not_give_are_left_out_and_shown_as_not_available() {
        let mut runs = vec![run(100.0, 10, 100), run(300.0, 30, 300), run(200.0, 20, 200)];
        runs[2].p99 = None;
        let s = Summary::of(&runs).unwrap();
        assert_eq!(s.p99, Some(Duration::from_micros(200)));
        for r in &mut runs {
            r.p99 = None;
        }
        let s = Summary::of(&runs).unwrap();
        assert_eq!((s.p50, s.p99), (Some(Duration::from_micros(20)), None));
        let report = Report {
            rows: vec![Row { server: Subject::Nginx, case: Case::Pipelined, outcome: Ok(s) }],
            latency_rate: None,
            axum_latency_rate: None,
            mtu: 1500,
            upstream: UpstreamAt::Loopback,
        };
        let table = report.text_table();
        let line = table.lines().nth(1).unwrap();
        assert!(line.contains("20 µs") && line.contains("n/a") && !line.contains(" 0 µs"), "{table}");
    }

    #[test]
    fn ratios_are_to_nginx_on_the_same_case() {
        let report = sample();
        assert_eq!(report.ratio(Subject::FairwayAfxdp, Case::KeepAlive256), Some(1.5));
        assert_eq!(report.ratio(Subject::Nginx, Case::KeepAlive256), Some(1.0));
        assert_eq!(report.ratio(Subject::FairwayKernel, Case::KeepAlive256), None);
        assert_eq!(report.ratio(Subject::FairwayAfxdp, Case::Close), None);
    }

    #[test]
    fn the_static_line_when_the_static_case_ran() {
        assert_eq!(sample().static_line(), None);
        let mut report = sample();
        report.rows.push(row(Subject::FairwayAfxdp, Case::StaticFile, 300.0));
        assert_eq!(
            report.static_line().as_deref(),
            Some("bench: static 1MB fairway/afxdp 300 req/s, no nginx figure to compare (MTU 1500)")
        );
        report.rows.push(row(Subject::Nginx, Case::StaticFile, 250.0));
        assert_eq!(
            report.static_line().as_deref(),
            Some("bench: static 1MB fairway/afxdp 300 req/s = 1.20 × nginx (MTU 1500)")
        );
        assert!(report.closing_lines().iter().any(|l| l.starts_with("bench: static 1MB fairway")));
        let jumbo = Report { mtu: 9000, ..report.clone() };
        assert!(jumbo.static_line().is_some_and(|l| l.ends_with("× nginx (MTU 9000)")), "{:?}", jumbo.static_line());
        if let Ok(s) = &mut report.rows[3].outcome {
            s.server_cpu = Some(Duration::from_micros(850));
        }
        assert_eq!(
            report.static_cpu_line().as_deref(),
            Some("bench: static 1MB server CPU per request: fairway/afxdp 850.00 µs, nginx no figure")
        );
    }

    #[test]
    fn the_closing_line() {
        assert_eq!(
            sample().headline(),
            "bench: fairway/afxdp 195000 req/s = 1.50 × nginx (keep-alive plaintext, 256 connections)"
        );
        let mut without_nginx = sample();
        without_nginx.rows.pop();
        assert_eq!(
            without_nginx.headline(),
            "bench: fairway/afxdp 195000 req/s, no nginx figure to compare (keep-alive plaintext, 256 connections)"
        );
        assert_eq!(
            Report::default().headline(),
            "bench: fairway/afxdp: no figure (keep-alive plaintext, 256 connections)"
        );
    }

    #[test]
    fn the_text_table_aligns_its_columns() {
        let table = sample().text_table();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4);
        assert!(lines[0].starts_with("server          case  "), "{table}");
        assert_eq!(
            lines[1],
            "fairway/afxdp   keep-alive plaintext, 256 connections  195000  900 µs  2.50 ms     1.50                       –  0"
        );
        // With the server's CPU time per request measured around wrk.
        let mut measured = sample();
        if let Ok(s) = &mut measured.rows[0].outcome {
            s.server_cpu = Some(Duration::from_nanos(4_500));
        }
        assert!(
            measured.text_table().lines().nth(1).unwrap().ends_with("1.50                 4.50 µs  0"),
            "{}",
            measured.text_table()
        );
        assert!(lines[2].contains("failed") && lines[2].ends_with("did not start"), "{table}");
        assert!(lines[3].contains("130000") && lines[3].contains("1.00"), "{table}");
        // req/s right-aligned: the numbers end in the same column.
        let end = |line: &str, number: &str| line.find(number).unwrap() + number.len();
        assert_eq!(end(lines[1], "195000"), end(lines[3], "130000"));
    }

    #[test]
    fn the_markdown_file() {
        let text = sample().markdown("2026-01-02", &["cores: server 0, wrk 1".into()]);
        assert!(text.starts_with("# HTTP benchmark, 2026-01-02\n\n- cores: server 0, wrk 1\n\n"), "{text}");
        assert!(
            text.contains("| server | case | req/s | p50 | p99 | × nginx | server CPU per request | errors |\n|---|"),
            "{text}"
        );
        assert!(text.contains(
            "| fairway/afxdp | keep-alive plaintext, 256 connections | 195000 | 900 µs | 2.50 ms | 1.50 | – | 0 |"
        ));
        assert!(text.trim_end().ends_with("× nginx (keep-alive plaintext, 256 connections)"), "{text}");
        let pipes = Report {
            rows: vec![Row { server: Subject::Nginx, case: Case::Close, outcome: Err("a|b".into()) }],
            latency_rate: None,
            axum_latency_rate: None,
            mtu: 1500,
            upstream: UpstreamAt::Loopback,
        };
        assert!(pipes.markdown_table().contains("a\\|b"));
    }

    fn with_latency() -> Report {
        let mut report = sample();
        let latency = |server, p50_us, p99_us| Row {
            server,
            case: Case::LatencyHalf,
            outcome: Ok(Summary::of(&[run(65_000.0, p50_us, p99_us)]).unwrap()),
        };
        report.rows.push(latency(Subject::FairwayAfxdp, 80, 600));
        report.rows.push(Row { server: Subject::FairwayKernel, case: Case::LatencyHalf, outcome: Err("gone".into()) });
        report.rows.push(latency(Subject::Nginx, 120, 1_500));
        report.latency_rate = Some(65_000.0);
        report
    }

    #[test]
    fn latency_rows_get_their_own_table_with_the_p99_ratio() {
        let report = with_latency();
        let ratio = report.p99_ratio(Subject::FairwayAfxdp, Case::LatencyHalf).unwrap();
        assert!((ratio - 0.4).abs() < 1e-9, "{ratio}");
        let table = report.text_table();
        let lines: Vec<&str> = table.lines().collect();
        assert_eq!(lines.len(), 4 + 1 + 1 + 4, "{table}");
        assert!(!lines[..4].iter().any(|l| l.contains("open-loop")), "{table}");
        assert!(lines[5].starts_with("Latency at half nginx's saturated keep-alive-256 rate (65000 req/s)"), "{table}");
        assert!(lines[6].contains("p99 × nginx (lower is better)"), "{table}");
        assert!(lines[7].starts_with("fairway/afxdp") && lines[7].contains("600 µs"), "{table}");
        assert!(lines[7].contains("0.40"), "{table}");
        assert!(lines[8].ends_with("gone") && lines[9].contains("1.00"), "{table}");
        let markdown = report.markdown_table();
        assert_eq!(markdown.matches("|---|").count(), 2, "{markdown}");
        assert!(markdown.contains("| p99 × nginx (lower is better) |"), "{markdown}");
    }

    #[test]
    fn the_latency_line_comes_just_before_the_closing_line() {
        let report = with_latency();
        assert_eq!(
            report.latency_line().unwrap(),
            "bench: p99 at half nginx's rate (65000 req/s): fairway/afxdp 600 µs vs nginx 1.50 ms"
        );
        let cpu = report.cpu_line(Group::BuiltIn).unwrap();
        assert_eq!(report.closing_lines(), [cpu, report.latency_line().unwrap(), report.headline()]);
        let text = report.markdown("2026-01-02", &[]);
        let last: Vec<&str> = text.trim_end().lines().rev().take(2).collect();
        assert_eq!(last, [report.headline(), report.latency_line().unwrap()]);
        // Not run: no line. Run without a rate or figures: it says so.
        assert_eq!(sample().latency_line(), None);
        assert_eq!(sample().closing_lines(), [sample().headline()]);
        let mut none = with_latency();
        none.latency_rate = None;
        none.rows.retain(|r| r.server == Subject::FairwayKernel || r.case != Case::LatencyHalf);
        assert_eq!(
            none.latency_line().unwrap(),
            "bench: p99 at half nginx's rate (no rate): fairway/afxdp no figure vs nginx no figure"
        );
    }

    /// Every server: the built-in group (with the baseline build) and the
    /// axum group, throughput and latency with CPU time per request.
    fn both_groups() -> Report {
        let mut report = with_latency();
        report.rows.push(row(Subject::BaselineAfxdp, Case::KeepAlive256, 150_000.0));
        report.rows.push(row(Subject::BaselineKernel, Case::KeepAlive256, 104_000.0));
        report.rows[1] = row(Subject::FairwayKernel, Case::KeepAlive256, 104_000.0);
        for (server, keep_alive, close) in [
            (Subject::AxumAfxdp, 120_000.0, 30_000.0),
            (Subject::AxumKernel, 90_000.0, 20_000.0),
            (Subject::AxumTokio, 80_000.0, 15_000.0),
        ] {
            report.rows.push(row(server, Case::KeepAlive256, keep_alive));
            report.rows.push(row(server, Case::Close, close));
        }
        let latency = |server, p99_us, cpu_ns| {
            let mut run = run(40_000.0, 90, p99_us);
            run.server_cpu = Some(Duration::from_nanos(cpu_ns));
            Row { server, case: Case::LatencyHalf, outcome: Ok(Summary::of(&[run]).unwrap()) }
        };
        report.rows.push(latency(Subject::AxumAfxdp, 700, 4_250));
        report.rows.push(latency(Subject::AxumTokio, 1_400, 9_500));
        report.axum_latency_rate = Some(40_000.0);
        for row in &mut report.rows {
            if let (Subject::FairwayAfxdp, Case::LatencyHalf, Ok(s)) = (row.server, row.case, &mut row.outcome) {
                s.server_cpu = Some(Duration::from_nanos(2_130));
            }
        }
        report
    }

    #[test]
    fn ratios_are_to_the_baseline_of_each_group() {
        let report = both_groups();
        assert_eq!(report.ratio(Subject::AxumAfxdp, Case::KeepAlive256), Some(1.5));
        assert_eq!(report.ratio(Subject::AxumTokio, Case::Close), Some(1.0));
        assert_eq!(report.ratio(Subject::AxumKernel, Case::Close).map(|r| (r * 100.0).round()), Some(133.0));
        // The baseline build is compared with nginx, like the server it is.
        assert_eq!(report.ratio(Subject::BaselineKernel, Case::KeepAlive256), Some(0.8));
        assert_eq!(report.p99_ratio(Subject::AxumAfxdp, Case::LatencyHalf), Some(0.5));
        assert_eq!((report.rate(Group::BuiltIn), report.rate(Group::Axum)), (Some(65_000.0), Some(40_000.0)));
    }

    #[test]
    fn the_axum_group_has_tables_of_its_own() {
        let report = both_groups();
        let table = report.text_table();
        let lines: Vec<&str> = table.lines().collect();
        // Built-in: throughput (header + 5 rows), blank, title, latency
        // (header + 3 rows); blank, axum title, throughput (header + 6),
        // blank, title, latency (header + 2).
        assert_eq!(lines.len(), 6 + 1 + 1 + 4 + 1 + 1 + 7 + 1 + 1 + 3, "{table}");
        assert!(lines[0].contains("× nginx") && lines[4].starts_with("baseline/afxdp"), "{table}");
        assert!(lines[8].contains("p99 × nginx (lower is better)  server CPU per request  errors"), "{table}");
        assert!(lines[9].starts_with("fairway/afxdp") && lines[9].contains("2.13 µs"), "{table}");
        assert!(lines[10].ends_with("gone") && lines[11].starts_with("nginx"), "{table}");
        assert_eq!(lines[12], "");
        assert!(lines[13].starts_with("The axum example (server/examples/axum_app.rs) on Fairway"), "{table}");
        assert!(lines[14].contains("× axum/tokio") && !lines[14].contains("nginx"), "{table}");
        assert!(lines[15].starts_with("axum/afxdp") && lines[15].contains("1.50"), "{table}");
        assert!(lines[15].contains("keep-alive plaintext, 256 connections"), "{table}");
        assert!(lines[22].starts_with("Latency at half axum/tokio's saturated keep-alive-256 rate (40000 req/s)"));
        assert!(lines[23].contains("p99 × axum/tokio (lower is better)"), "{table}");
        assert!(lines[24].contains("open-loop plaintext at half axum/tokio's rate"), "{table}");
        assert!(lines[24].contains("0.50") && lines[24].contains("4.25 µs"), "{table}");
        assert!(lines[25].starts_with("axum/tokio") && lines[25].contains("9.50 µs"), "{table}");
        let markdown = report.markdown_table();
        assert_eq!(markdown.matches("|---|---|--:|--:|--:|--:|--:|--:|\n").count(), 4, "{markdown}");
        assert!(markdown.contains("\n\nThe axum example (server/examples/axum_app.rs) on Fairway"), "{markdown}");
        assert!(
            markdown.contains("| server | case | req/s | p50 | p99 | × axum/tokio | server CPU per request | errors |"),
            "{markdown}"
        );
        assert!(markdown.contains("| 0.50 | 4.25 µs | 0 |"), "{markdown}");
        // Only axum servers: their tables alone.
        let axum_only = Report {
            rows: report.rows.iter().filter(|r| r.server.group() == Group::Axum).cloned().collect(),
            ..report.clone()
        };
        assert!(axum_only.text_table().starts_with("The axum example"), "{}", axum_only.text_table());
        assert!(!axum_only.markdown_table().contains("nginx"));
    }

    #[test]
    fn the_closing_lines_of_every_group() {
        let report = both_groups();
        assert_eq!(
            report.closing_lines(),
            [
                "bench: fairway/afxdp 195000 req/s = 1.30 × baseline/afxdp (keep-alive plaintext, 256 connections)",
                "bench: fairway/kernel 104000 req/s = 1.00 × baseline/kernel (keep-alive plaintext, 256 connections)",
                "bench: axum on fairway/afxdp 120000 req/s = 1.50 × axum on tokio (keep-alive, 256 connections)",
                "bench: axum on fairway/afxdp 30000 req/s = 2.00 × axum on tokio (Connection: close, 64 connections)",
                "bench: p99 at half axum/tokio's rate (40000 req/s): axum/afxdp 700 µs vs axum/tokio 1.40 ms",
                "bench: server CPU per request at 40000 req/s: axum/afxdp 4.25 µs, axum/tokio 9.50 µs",
                "bench: server CPU per request at 65000 req/s: fairway/afxdp 2.13 µs, fairway/kernel no figure, \
                 nginx no figure",
                "bench: p99 at half nginx's rate (65000 req/s): fairway/afxdp 600 µs vs nginx 1.50 ms",
                "bench: fairway/afxdp 195000 req/s = 1.50 × nginx (keep-alive plaintext, 256 connections)",
            ]
        );
        assert!(report.markdown("2026-01-02", &[]).trim_end().ends_with(&report.headline()));
        // What is missing is said.
        let mut missing = both_groups();
        missing.rows.retain(|r| !(r.server == Subject::AxumTokio && r.case == Case::Close));
        missing.rows.retain(|r| !(r.server == Subject::AxumAfxdp && r.case == Case::KeepAlive256));
        missing.axum_latency_rate = None;
        let lines = missing.axum_lines();
        assert_eq!(lines[0], "bench: axum on fairway/afxdp: no figure (keep-alive, 256 connections)");
        assert_eq!(
            lines[1],
            "bench: axum on fairway/afxdp 30000 req/s, no axum on tokio figure to compare (Connection: close, 64 \
             connections)"
        );
        assert!(missing.cpu_line(Group::Axum).unwrap().starts_with("bench: server CPU per request at no rate: "));
        // Groups that did not run have no lines.
        assert_eq!(sample().axum_lines(), Vec::<String>::new());
        assert_eq!(sample().baseline_lines(), Vec::<String>::new());
        assert_eq!(sample().cpu_line(Group::BuiltIn), None);
        assert_eq!(with_latency().cpu_line(Group::Axum), None);
    }

    /// The built-in group and the HTTPS one with their HTTP/2 rows (no
    /// percentiles, as h2load gives none), and the built-in group's
    /// keep-alive rows.
    fn with_http2() -> Report {
        let h2 = |server, case, rps, cpu_ns| {
            let mut run = run(rps, 0, 0);
            (run.p50, run.p99, run.server_cpu) = (None, None, Some(Duration::from_nanos(cpu_ns)));
            Row { server, case, outcome: Ok(Summary::of(&[run]).unwrap()) }
        };
        let mut report = sample();
        report.rows.extend([
            h2(Subject::FairwayAfxdp, Case::H2c, 300_000.0, 3_500),
            Row { server: Subject::FairwayKernel, case: Case::H2c, outcome: Err("h2load spoke h2, not h2c".into()) },
            h2(Subject::Nginx, Case::H2c, 150_000.0, 6_000),
            h2(Subject::TlsAfxdp, Case::H2, 200_000.0, 4_000),
            h2(Subject::TlsKernel, Case::H2, 180_000.0, 4_250),
            h2(Subject::TlsNginx, Case::H2, 100_000.0, 8_000),
        ]);
        report
    }

    #[test]
    fn the_http2_closing_lines() {
        let report = with_http2();
        assert_eq!(
            report.http2_lines(),
            [
                "bench: h2 fairway/afxdp 200000 req/s = 2.00 × nginx (h2load, TLS, 64 connections × 32 streams)",
                "bench: h2 server CPU per request: fairway/afxdp tls 4.00 µs, fairway/kernel tls 4.25 µs, nginx tls \
                 8.00 µs",
                "bench: h2c fairway/afxdp 300000 req/s = 2.00 × nginx (h2load, prior knowledge, 64 connections × 32 \
                 streams)",
                "bench: h2c server CPU per request: fairway/afxdp 3.50 µs, fairway/kernel no figure, nginx 6.00 µs",
            ]
        );
        // Among the closing lines, after HTTPS's; the headline still last.
        assert_eq!(
            report.closing_lines(),
            [report.tls_lines(), report.http2_lines(), vec![report.headline()]].concat()
        );
        // What is missing is said; cases not run have no lines.
        let mut missing = with_http2();
        missing.rows.retain(|r| r.server != Subject::TlsNginx);
        missing.rows.retain(|r| !(r.server == Subject::FairwayAfxdp && r.case == Case::H2c));
        let lines = missing.http2_lines();
        assert_eq!(
            lines[0],
            "bench: h2 fairway/afxdp 200000 req/s, no nginx figure to compare (h2load, TLS, 64 connections × 32 \
             streams)"
        );
        assert_eq!(
            lines[2],
            "bench: h2c fairway/afxdp: no figure (h2load, prior knowledge, 64 connections × 32 streams)"
        );
        assert_eq!(sample().http2_lines(), Vec::<String>::new());
        let cleartext_only =
            Report { rows: with_http2().rows.into_iter().filter(|r| r.case != Case::H2).collect(), ..sample() };
        assert_eq!(cleartext_only.http2_lines().len(), 2);
        assert!(cleartext_only.http2_lines()[0].starts_with("bench: h2c fairway/afxdp 300000 req/s = 2.00 × nginx"));
    }

    #[test]
    fn the_http2_rows_get_a_table_without_percentiles() {
        let report = with_http2();
        let table = report.text_table();
        let lines: Vec<&str> = table.lines().collect();
        // Built-in: wrk's table (header + 3), blank, title, h2load's
        // (header + 3); blank, the HTTPS title, blank, title, h2load's
        // (header + 3): the HTTPS group ran no wrk case.
        assert_eq!(lines.len(), 4 + 1 + 1 + 4 + 1 + 1 + 1 + 1 + 4, "{table}");
        assert!(lines[1].starts_with("fairway/afxdp") && lines[1].contains("900 µs"), "{table}");
        assert_eq!(lines[4], "");
        assert!(lines[5].starts_with("HTTP/2 from h2load, 32 concurrent streams per connection, ratios to nginx;"));
        assert!(lines[5].contains("no latency percentiles (h2load reports none"), "{table}");
        let header: Vec<&str> = lines[6].split("  ").map(str::trim).filter(|c| !c.is_empty()).collect();
        assert_eq!(header, ["server", "case", "req/s", "× nginx", "server CPU per request", "errors"], "{table}");
        assert!(lines[7].starts_with("fairway/afxdp") && lines[7].contains("prior knowledge (h2load)"), "{table}");
        assert!(
            lines[7].contains("300000") && lines[7].contains("2.00") && lines[7].ends_with("3.50 µs  0"),
            "{table}"
        );
        assert!(lines[8].contains("failed") && lines[8].ends_with("h2load spoke h2, not h2c"), "{table}");
        assert!(lines[9].starts_with("nginx") && lines[9].ends_with("6.00 µs  0"), "{table}");
        assert!(lines[10].is_empty() && lines[11].starts_with("HTTPS (TLS 1.3"), "{table}");
        assert!(lines[13].starts_with("HTTP/2 from h2load") && lines[13].contains("ratios to nginx tls;"), "{table}");
        assert!(lines[14].contains("× nginx tls"), "{table}");
        assert!(lines[15].starts_with("fairway/afxdp tls") && lines[15].contains("over TLS (h2load)"), "{table}");
        assert!(!table.contains("n/a"), "no percentile is shown, not even as missing: {table}");
        let markdown = report.markdown_table();
        assert_eq!(
            markdown.matches("| server | case | req/s | × nginx | server CPU per request | errors |").count(),
            1
        );
        assert_eq!(markdown.matches("|---|---|--:|--:|--:|--:|\n").count(), 2, "{markdown}");
        assert!(markdown.contains("| 300000 | 2.00 | 3.50 µs | 0 |"), "{markdown}");
        assert!(markdown.contains("| failed | – | – | h2load spoke h2, not h2c |"), "{markdown}");
    }

    #[test]
    fn dates() {
        assert_eq!(date_from_unix_days(0), "1970-01-01");
        assert_eq!(date_from_unix_days(59), "1970-03-01");
        assert_eq!(date_from_unix_days(11_016), "2000-02-29");
        assert_eq!(date_from_unix_days(19_782), "2024-02-29");
        assert_eq!(date_from_unix_days(20_089), "2025-01-01");
        assert_eq!(date_from_unix_days(-1), "1969-12-31");
        assert_eq!(today().len(), 10);
    }

    #[test]
    fn result_paths_do_not_overwrite() {
        let dir = Path::new("/r");
        assert_eq!(result_path(dir, "2026-01-02", |_| false), Path::new("/r/http-2026-01-02.md"));
        let taken = |p: &Path| p.ends_with("http-2026-01-02.md") || p.ends_with("http-2026-01-02-2.md");
        assert_eq!(result_path(dir, "2026-01-02", taken), Path::new("/r/http-2026-01-02-3.md"));
    }
}
