//! The results: one row per server and case (medians over the rounds), as
//! a table for the terminal and in Markdown, the closing line, and the
//! file it is written to.

use std::path::{Path, PathBuf};
use std::time::Duration;

use super::plan::{Case, Server};
use super::wrk::{WrkResult, format_latency};
use crate::stats::median;

/// One server on one case.
#[derive(Clone, Debug, PartialEq)]
pub struct Row {
    /// The server measured.
    pub server: Server,
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
    /// How many rounds the medians are of.
    pub rounds: usize,
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
            rounds: runs.len(),
        })
    }
}

/// The rows of a run, in the order measured.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Report {
    /// One per server and case.
    pub rows: Vec<Row>,
    /// The open-loop rate of the latency case: half nginx's keep-alive-256
    /// requests per second.
    pub latency_rate: Option<f64>,
}

impl Report {
    fn summary(&self, server: Server, case: Case) -> Option<&Summary> {
        let row = self.rows.iter().find(|r| r.server == server && r.case == case)?;
        row.outcome.as_ref().ok()
    }

    /// `server`'s requests per second over nginx's on `case`.
    #[must_use]
    pub fn ratio(&self, server: Server, case: Case) -> Option<f64> {
        let nginx = self.summary(Server::Nginx, case)?.requests_per_second;
        let this = self.summary(server, case)?.requests_per_second;
        (nginx > 0.0).then_some(this / nginx)
    }

    /// `server`'s p99 over nginx's on `case` (for the latency case: lower
    /// is better).
    #[must_use]
    pub fn p99_ratio(&self, server: Server, case: Case) -> Option<f64> {
        let nginx = self.summary(Server::Nginx, case)?.p99?.as_secs_f64();
        let this = self.summary(server, case)?.p99?.as_secs_f64();
        (nginx > 0.0).then_some(this / nginx)
    }

    /// The cells of the rows of the throughput cases (`latency` false) or
    /// of the latency cases: server, case, req/s, p50, p99, ratio to nginx
    /// (req/s, or p99 for the latency cases), errors.
    fn cells(&self, latency: bool) -> Vec<[String; 7]> {
        self.rows
            .iter()
            .filter(|row| row.case.is_open_loop() == latency)
            .map(|row| {
                let (server, case) = (row.server.name().to_owned(), row.case.describe().to_owned());
                let ratio =
                    if latency { self.p99_ratio(row.server, row.case) } else { self.ratio(row.server, row.case) };
                match &row.outcome {
                    Ok(s) => [
                        server,
                        case,
                        format!("{:.0}", s.requests_per_second),
                        latency_cell(s.p50),
                        latency_cell(s.p99),
                        ratio.map_or("–".to_owned(), |r| format!("{r:.2}")),
                        s.errors.to_string(),
                    ],
                    Err(why) => [server, case, "failed".into(), "–".into(), "–".into(), "–".into(), one_line(why)],
                }
            })
            .collect()
    }

    /// The tables for a terminal, aligned: throughput, then (if any)
    /// latency at half nginx's rate.
    #[must_use]
    pub fn text_table(&self) -> String {
        let mut out = aligned(&HEADER, &self.cells(false));
        let latency = self.cells(true);
        if !latency.is_empty() {
            out.push_str(&format!("\n{}\n", self.latency_title()));
            out.push_str(&aligned(&LATENCY_HEADER, &latency));
        }
        out
    }

    /// The tables in Markdown.
    #[must_use]
    pub fn markdown_table(&self) -> String {
        let mut out = markdown_rows(&HEADER, &self.cells(false));
        let latency = self.cells(true);
        if !latency.is_empty() {
            out.push_str(&format!("\n{}\n\n", self.latency_title()));
            out.push_str(&markdown_rows(&LATENCY_HEADER, &latency));
        }
        out
    }

    /// What the latency table measures, and at what rate.
    fn latency_title(&self) -> String {
        let rate = self
            .latency_rate
            .map_or("no rate: nginx's keep-alive-256 figure is missing".to_owned(), |r| format!("{r:.0} req/s"));
        format!(
            "Latency at half nginx's saturated keep-alive-256 rate ({rate}), open loop, latency from when each request was due:"
        )
    }

    /// `bench: p99 at half nginx's rate (R req/s): fairway/afxdp X vs nginx
    /// Y`, or what is missing for it; `None` when the latency case was not
    /// run.
    #[must_use]
    pub fn latency_line(&self) -> Option<String> {
        let case = Case::LatencyHalf;
        if !self.rows.iter().any(|r| r.case == case) {
            return None;
        }
        let (afxdp, nginx) = (Server::FairwayAfxdp, Server::Nginx);
        let rate = self.latency_rate.map_or("no rate".to_owned(), |r| format!("{r:.0} req/s"));
        let p99 =
            |server| self.summary(server, case).and_then(|s| s.p99).map_or("no figure".to_owned(), format_latency);
        Some(format!("bench: p99 at half {nginx}'s rate ({rate}): {afxdp} {} vs {nginx} {}", p99(afxdp), p99(nginx)))
    }

    /// `bench: fairway/afxdp X req/s = R × nginx (keep-alive plaintext, 256
    /// connections)`, or what is missing for it.
    #[must_use]
    pub fn headline(&self) -> String {
        let case = Case::HEADLINE;
        let (afxdp, nginx) = (Server::FairwayAfxdp, Server::Nginx);
        match (self.summary(afxdp, case), self.ratio(afxdp, case)) {
            (Some(s), Some(r)) => {
                format!("bench: {afxdp} {:.0} req/s = {r:.2} × {nginx} ({case})", s.requests_per_second)
            }
            (Some(s), None) => {
                format!("bench: {afxdp} {:.0} req/s, no {nginx} figure to compare ({case})", s.requests_per_second)
            }
            (None, _) => format!("bench: {afxdp}: no figure ({case})"),
        }
    }

    /// The closing lines: the latency line (if that case ran), then the
    /// headline, last.
    #[must_use]
    pub fn closing_lines(&self) -> Vec<String> {
        self.latency_line().into_iter().chain([self.headline()]).collect()
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

/// Rows under `header`, columns aligned: text left, numbers right, the
/// last column unpadded.
fn aligned(header: &[&str; 7], cells: &[[String; 7]]) -> String {
    let mut widths = header.map(|h| h.chars().count());
    for row in cells {
        for (width, cell) in widths.iter_mut().zip(row) {
            *width = (*width).max(cell.chars().count());
        }
    }
    let line = |row: &[String]| {
        let mut out = String::new();
        for (i, (cell, width)) in row.iter().zip(widths).enumerate() {
            let pad = width - cell.chars().count();
            match i {
                0 | 1 => out.push_str(&format!("{cell}{}  ", " ".repeat(pad))),
                6 => out.push_str(cell),
                _ => out.push_str(&format!("{}{cell}  ", " ".repeat(pad))),
            }
        }
        out.trim_end().to_owned()
    };
    let mut out = line(&header.map(str::to_owned));
    out.push('\n');
    for row in cells {
        out.push_str(&line(row));
        out.push('\n');
    }
    out
}

fn markdown_rows(header: &[&str; 7], cells: &[[String; 7]]) -> String {
    let mut out = format!("| {} |\n", header.join(" | "));
    out.push_str("|---|---|--:|--:|--:|--:|--:|\n");
    for row in cells {
        out.push_str(&format!("| {} |\n", row.clone().map(|c| c.replace('|', "\\|")).join(" | ")));
    }
    out
}

const HEADER: [&str; 7] = ["server", "case", "req/s", "p50", "p99", "× nginx", "errors"];
const LATENCY_HEADER: [&str; 7] = ["server", "case", "req/s", "p50", "p99", "p99 × nginx (lower is better)", "errors"];

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
            requests_per_second: rps,
            p50: Some(Duration::from_micros(p50_us)),
            p99: Some(Duration::from_micros(p99_us)),
            requests: 1,
            socket_errors: 0,
            non_2xx: 0,
        }
    }

    fn row(server: Server, case: Case, rps: f64) -> Row {
        Row { server, case, outcome: Ok(Summary::of(&[run(rps, 900, 2500)]).unwrap()) }
    }

    fn sample() -> Report {
        Report {
            rows: vec![
                row(Server::FairwayAfxdp, Case::KeepAlive256, 195_000.0),
                Row { server: Server::FairwayKernel, case: Case::KeepAlive256, outcome: Err("did not\nstart".into()) },
                row(Server::Nginx, Case::KeepAlive256, 130_000.0),
            ],
            latency_rate: None,
        }
    }

    #[test]
    fn medians_over_rounds_and_errors_summed() {
        let mut runs = vec![run(100.0, 10, 100), run(300.0, 30, 300), run(200.0, 20, 200)];
        runs[0].socket_errors = 2;
        runs[2].non_2xx = 1;
        let s = Summary::of(&runs).unwrap();
        assert_eq!(s.requests_per_second, 200.0);
        assert_eq!((s.p50, s.p99), (Some(Duration::from_micros(20)), Some(Duration::from_micros(200))));
        assert_eq!((s.errors, s.rounds), (3, 3));
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
            rows: vec![Row { server: Server::Nginx, case: Case::Pipelined, outcome: Ok(s) }],
            latency_rate: None,
        };
        let table = report.text_table();
        let line = table.lines().nth(1).unwrap();
        assert!(line.contains("20 µs") && line.contains("n/a") && !line.contains(" 0 µs"), "{table}");
    }

    #[test]
    fn ratios_are_to_nginx_on_the_same_case() {
        let report = sample();
        assert_eq!(report.ratio(Server::FairwayAfxdp, Case::KeepAlive256), Some(1.5));
        assert_eq!(report.ratio(Server::Nginx, Case::KeepAlive256), Some(1.0));
        assert_eq!(report.ratio(Server::FairwayKernel, Case::KeepAlive256), None);
        assert_eq!(report.ratio(Server::FairwayAfxdp, Case::Close), None);
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
            "fairway/afxdp   keep-alive plaintext, 256 connections  195000  900 µs  2.50 ms     1.50  0"
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
        assert!(text.contains("| server | case | req/s | p50 | p99 | × nginx | errors |\n|---|"), "{text}");
        assert!(text.contains(
            "| fairway/afxdp | keep-alive plaintext, 256 connections | 195000 | 900 µs | 2.50 ms | 1.50 | 0 |"
        ));
        assert!(text.trim_end().ends_with("× nginx (keep-alive plaintext, 256 connections)"), "{text}");
        let pipes = Report {
            rows: vec![Row { server: Server::Nginx, case: Case::Close, outcome: Err("a|b".into()) }],
            latency_rate: None,
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
        report.rows.push(latency(Server::FairwayAfxdp, 80, 600));
        report.rows.push(Row { server: Server::FairwayKernel, case: Case::LatencyHalf, outcome: Err("gone".into()) });
        report.rows.push(latency(Server::Nginx, 120, 1_500));
        report.latency_rate = Some(65_000.0);
        report
    }

    #[test]
    fn latency_rows_get_their_own_table_with_the_p99_ratio() {
        let report = with_latency();
        let ratio = report.p99_ratio(Server::FairwayAfxdp, Case::LatencyHalf).unwrap();
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
        assert_eq!(report.closing_lines(), [report.latency_line().unwrap(), report.headline()]);
        let text = report.markdown("2026-01-02", &[]);
        let last: Vec<&str> = text.trim_end().lines().rev().take(2).collect();
        assert_eq!(last, [report.headline(), report.latency_line().unwrap()]);
        // Not run: no line. Run without a rate or figures: it says so.
        assert_eq!(sample().latency_line(), None);
        assert_eq!(sample().closing_lines(), [sample().headline()]);
        let mut none = with_latency();
        none.latency_rate = None;
        none.rows.retain(|r| r.server == Server::FairwayKernel || r.case != Case::LatencyHalf);
        assert_eq!(
            none.latency_line().unwrap(),
            "bench: p99 at half nginx's rate (no rate): fairway/afxdp no figure vs nginx no figure"
        );
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
