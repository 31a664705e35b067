//! The receive-path ablation (`cargo xtask lab ablation`, the `ablation`
//! binary): what each of Fairway's receive-path techniques is worth, each
//! switched off alone, all off, and all on, in the server's CPU time per
//! request and in saturated requests per second. Pure: the variants, their
//! flags, the gains over rounds, the tables and the closing line, tested
//! without a testbed; the binary runs them with [`crate::http`]'s
//! machinery (wrk, the open-loop generator, CPU from `/proc/PID/stat`).

use std::fmt::Write as _;
use std::time::Duration;

use crate::http::plan::{Case, Subject};
use crate::http::wrk::WrkResult;
use crate::stats::median;

/// The loop settings a variant runs under.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Polling {
    /// The server's default: busy-poll up to 50 µs before sleeping, while
    /// most idle gaps are shorter than that (an adaptive window).
    Default,
    /// `--no-adaptive-busy-poll`: spin the whole 50 µs every time the loop
    /// goes idle (a fixed window).
    Fixed,
    /// `--busy-poll-us 0`: sleep at once, so that no CPU time is spent
    /// spinning (busy polling counted honestly, as the issue asks).
    Zero,
    /// `--busy-poll-us 50`: the kernel backend with busy polling on (its
    /// default is off).
    Busy,
}

impl Polling {
    /// Both, in the order their tables come.
    pub const ALL: [Polling; 2] = [Polling::Default, Polling::Zero];

    /// Its words in tables.
    #[must_use]
    pub fn describe(self) -> &'static str {
        match self {
            Polling::Default => "default loop (busy-poll up to 50 µs, adaptive)",
            Polling::Fixed => "--no-adaptive-busy-poll (a fixed 50 µs window)",
            Polling::Zero => "--busy-poll-us 0",
            Polling::Busy => "--busy-poll-us 50",
        }
    }
}

/// What a variant switches off.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Technique {
    /// Nothing: every technique on (the baseline of the gains).
    None,
    /// Flow steering (`--steering off`).
    Steering,
    /// Interrupt moderation: busy polling, adaptive batches and batching
    /// itself (`--busy-poll-us 0 --itr-us 0 --no-adaptive-batch --batch
    /// 1`: a frame per loop turn, as an interrupt per packet).
    Moderation,
    /// Frame buffer recycling (`--no-recycle frames`): an allocation and a
    /// copy per frame, as an `sk_buff`.
    Frames,
    /// Per-connection buffer recycling (`--no-recycle buffers`).
    Buffers,
    /// Connection slot and handle recycling (`--no-recycle handles`): the
    /// study's `fd` recycling.
    Handles,
    /// Event record recycling (`--no-recycle events`): the study's
    /// `epoll_event` recycling.
    Events,
    /// Everything at once: the conventional baseline.
    All,
}

impl Technique {
    /// Each technique off alone, then all of them.
    pub const OFF: [Technique; 7] = [
        Technique::Steering,
        Technique::Moderation,
        Technique::Frames,
        Technique::Buffers,
        Technique::Handles,
        Technique::Events,
        Technique::All,
    ];

    /// Its name in tables: what is off.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            Technique::None => "all on",
            Technique::Steering => "steering off",
            Technique::Moderation => "moderation off",
            Technique::Frames => "frame recycling off",
            Technique::Buffers => "buffer recycling off",
            Technique::Handles => "handle (fd) recycling off",
            Technique::Events => "event recycling off",
            Technique::All => "all off",
        }
    }

    /// A short name, for the chart.
    #[must_use]
    pub fn short(self) -> &'static str {
        match self {
            Technique::None => "all on",
            Technique::Steering => "steering",
            Technique::Moderation => "moderation",
            Technique::Frames => "frames",
            Technique::Buffers => "buffers",
            Technique::Handles => "handles (fd)",
            Technique::Events => "events",
            Technique::All => "all",
        }
    }

    /// The study's figure for the same technique, where it gave one: the
    /// gain of having it on, on its simple web server (fd recycling +7 %,
    /// epoll_event recycling +6 %, all five together +40 %).
    #[must_use]
    pub fn study(self) -> Option<f64> {
        match self {
            Technique::Handles => Some(7.0),
            Technique::Events => Some(6.0),
            Technique::All => Some(40.0),
            _ => None,
        }
    }

    /// The server flags that switch it off, after the server's own.
    #[must_use]
    pub fn flags(self) -> Vec<String> {
        const MODERATION: [&str; 7] = ["--busy-poll-us", "0", "--itr-us", "0", "--no-adaptive-batch", "--batch", "1"];
        let words: Vec<&str> = match self {
            Technique::None => vec![],
            Technique::Steering => vec!["--steering", "off"],
            Technique::Moderation => MODERATION.to_vec(),
            Technique::Frames => vec!["--no-recycle", "frames"],
            Technique::Buffers => vec!["--no-recycle", "buffers"],
            Technique::Handles => vec!["--no-recycle", "handles"],
            Technique::Events => vec!["--no-recycle", "events"],
            Technique::All => [["--recycle", "none", "--steering", "off"].as_slice(), &MODERATION].concat(),
        };
        words.into_iter().map(str::to_owned).collect()
    }

    /// Whether it turns busy polling off itself, so that it has one row
    /// for both loop settings.
    #[must_use]
    pub fn stops_busy_polling(self) -> bool {
        matches!(self, Technique::Moderation | Technique::All)
    }
}

/// One server set-up the ablation measures.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Variant {
    /// The server: fairway/afxdp, or a reference (nginx, fairway/kernel).
    pub server: Subject,
    /// What is switched off (references: [`Technique::None`]).
    pub off: Technique,
    /// The loop settings ([`Polling::Default`] for the references).
    pub polling: Polling,
}

impl Variant {
    /// Fairway over AF_XDP with `off` off, under `polling`.
    #[must_use]
    pub fn afxdp(off: Technique, polling: Polling) -> Variant {
        Variant { server: Subject::FairwayAfxdp, off, polling }
    }

    /// A reference server with its defaults.
    #[must_use]
    pub fn reference(server: Subject) -> Variant {
        Variant { server, off: Technique::None, polling: Polling::Default }
    }

    /// Fairway's kernel backend with busy polling on (`--busy-poll-us 50`).
    #[must_use]
    pub fn kernel_busy() -> Variant {
        Variant { server: Subject::FairwayKernel, off: Technique::None, polling: Polling::Busy }
    }

    /// Fairway's kernel backend with steering off: its shards share one
    /// listener instead of one `SO_REUSEPORT` listener each.
    #[must_use]
    pub fn kernel_steering_off() -> Variant {
        Variant { server: Subject::FairwayKernel, off: Technique::Steering, polling: Polling::Default }
    }

    /// Every variant of one round: all on, all on with a fixed busy-poll
    /// window, and each technique off under the default loop, then (with
    /// `zero`) the same with `--busy-poll-us 0` but for those that stop
    /// busy polling themselves, then the references.
    #[must_use]
    pub fn all(zero: bool, references: &[Subject]) -> Vec<Variant> {
        let mut list =
            vec![Variant::afxdp(Technique::None, Polling::Default), Variant::afxdp(Technique::None, Polling::Fixed)];
        list.extend(Technique::OFF.iter().map(|&t| Variant::afxdp(t, Polling::Default)));
        if zero {
            list.push(Variant::afxdp(Technique::None, Polling::Zero));
            let rest = Technique::OFF.iter().filter(|t| !t.stops_busy_polling());
            list.extend(rest.map(|&t| Variant::afxdp(t, Polling::Zero)));
        }
        list.extend(references.iter().map(|&s| Variant::reference(s)));
        if references.contains(&Subject::FairwayKernel) {
            list.push(Variant::kernel_busy());
        }
        list
    }

    /// The two-shard part's variants: Fairway over AF_XDP with software
    /// steering and without, and its kernel backend with a `SO_REUSEPORT`
    /// listener per shard and with one shared (`kernel`: whether it runs).
    #[must_use]
    pub fn steering(kernel: bool) -> Vec<Variant> {
        let mut list = vec![
            Variant::afxdp(Technique::None, Polling::Default),
            Variant::afxdp(Technique::Steering, Polling::Default),
        ];
        if kernel {
            list.extend([Variant::reference(Subject::FairwayKernel), Variant::kernel_steering_off()]);
        }
        list
    }

    /// The flags after the server's own.
    #[must_use]
    pub fn flags(self) -> Vec<String> {
        let mut flags = self.off.flags();
        match self.polling {
            Polling::Zero if !self.off.stops_busy_polling() => {
                flags.extend(["--busy-poll-us".to_owned(), "0".to_owned()]);
            }
            Polling::Busy => flags.extend(["--busy-poll-us".to_owned(), "50".to_owned()]),
            Polling::Fixed if !self.off.stops_busy_polling() => flags.push("--no-adaptive-busy-poll".to_owned()),
            _ => {}
        }
        flags
    }

    /// Its name in tables and logs.
    #[must_use]
    pub fn name(self) -> String {
        match (self.server, self.polling) {
            (Subject::FairwayAfxdp, Polling::Default) => format!("afxdp, {}", self.off.name()),
            (Subject::FairwayAfxdp, Polling::Fixed) => format!("afxdp fixed busy-poll, {}", self.off.name()),
            (Subject::FairwayAfxdp, _) => format!("afxdp bp0, {}", self.off.name()),
            (server, Polling::Busy) => format!("{}, busy-poll 50 µs", server.name()),
            (server, _) if self.off == Technique::Steering => format!("{}, steering off", server.name()),
            (server, _) => server.name().to_owned(),
        }
    }

    /// The variant whose figures its gains are measured against: all on
    /// under the same loop settings (a technique that stops busy polling
    /// is compared with the default loop's all on).
    #[must_use]
    pub fn baseline(self) -> Variant {
        let polling = if self.off.stops_busy_polling() { Polling::Default } else { self.polling };
        Variant { server: self.server, off: Technique::None, polling }
    }
}

/// A measurement of one round of a variant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Measure {
    /// wrk, saturating: keep-alive `/plaintext`, 64 connections.
    KeepAlive,
    /// wrk, saturating: `Connection: close` `/plaintext`, 64 connections.
    Close,
    /// wrk, saturating: the 16 KB file, keep-alive, 64 connections.
    Small16k,
    /// The open-loop generator at this many requests per second,
    /// keep-alive `/plaintext`, 256 connections.
    OpenLoop(u32),
}

impl Measure {
    /// The wrk measures.
    pub const WRK: [Measure; 3] = [Measure::KeepAlive, Measure::Close, Measure::Small16k];

    /// The wrk case it runs, or the open-loop one.
    #[must_use]
    pub fn case(self) -> Case {
        match self {
            Measure::KeepAlive => Case::KeepAlive64,
            Measure::Close => Case::Close,
            Measure::Small16k => Case::Small16k,
            Measure::OpenLoop(_) => Case::LatencyHalf,
        }
    }

    /// Its words in tables.
    #[must_use]
    pub fn describe(self) -> String {
        match self {
            Measure::KeepAlive => "keep-alive".to_owned(),
            Measure::Close => "Connection: close".to_owned(),
            Measure::Small16k => "16 KB keep-alive".to_owned(),
            Measure::OpenLoop(rate) => format!("keep-alive at {} k/s", f64::from(rate) / 1000.0),
        }
    }
}

/// Every round's result of one variant and measure.
#[derive(Clone, Debug, Default)]
pub struct Rounds {
    /// By round (index), `None` where it failed.
    pub runs: Vec<Option<WrkResult>>,
}

/// Everything measured.
#[derive(Clone, Debug, Default)]
pub struct Results {
    /// Each variant's measures.
    pub cells: Vec<(Variant, Measure, Rounds)>,
    /// The rounds run.
    pub rounds: usize,
}

/// A figure over the rounds: the median and the range.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Spread {
    /// The median.
    pub median: f64,
    /// The smallest.
    pub min: f64,
    /// The largest.
    pub max: f64,
    /// How many rounds it is over.
    pub n: usize,
}

impl Spread {
    /// Over `values` (none: `None`).
    #[must_use]
    pub fn of(values: &[f64]) -> Option<Spread> {
        let values: Vec<f64> = values.iter().copied().filter(|v| v.is_finite()).collect();
        if values.is_empty() {
            return None;
        }
        let min = values.iter().copied().fold(f64::INFINITY, f64::min);
        let max = values.iter().copied().fold(f64::NEG_INFINITY, f64::max);
        Some(Spread { median: median(values.clone()), min, max, n: values.len() })
    }

    /// `+12.3 % (+8.1 … +15.0)`.
    #[must_use]
    pub fn percent(&self) -> String {
        format!("{:+.1} % ({:+.1} … {:+.1})", self.median, self.min, self.max)
    }
}

impl Results {
    /// Records one round's outcome.
    pub fn record(&mut self, variant: Variant, measure: Measure, round: usize, outcome: Option<WrkResult>) {
        let index = match self.cells.iter().position(|(v, m, _)| *v == variant && *m == measure) {
            Some(i) => i,
            None => {
                self.cells.push((variant, measure, Rounds::default()));
                self.cells.len() - 1
            }
        };
        let runs = &mut self.cells[index].2.runs;
        if runs.len() <= round {
            runs.resize(round + 1, None);
        }
        runs[round] = outcome;
        self.rounds = self.rounds.max(round + 1);
    }

    fn runs(&self, variant: Variant, measure: Measure) -> &[Option<WrkResult>] {
        self.cells.iter().find(|(v, m, _)| *v == variant && *m == measure).map_or(&[], |(_, _, r)| &r.runs)
    }

    /// A per-round figure of a variant: `pick` of each round that ran.
    fn per_round(&self, variant: Variant, measure: Measure, pick: fn(&WrkResult) -> Option<f64>) -> Vec<Option<f64>> {
        self.runs(variant, measure).iter().map(|r| r.as_ref().and_then(pick)).collect()
    }

    /// The spread of `pick` over the rounds.
    #[must_use]
    pub fn spread(&self, variant: Variant, measure: Measure, pick: fn(&WrkResult) -> Option<f64>) -> Option<Spread> {
        let values: Vec<f64> = self.per_round(variant, measure, pick).into_iter().flatten().collect();
        Spread::of(&values)
    }

    /// The gain, in percent, of having `variant`'s technique on: round by
    /// round, its baseline's `pick` over its own (`higher_is_better`: req/s)
    /// or its own over its baseline's (CPU per request: the gain in
    /// requests per CPU-second), less one. Rounds are paired, so that
    /// what drifts between rounds (the machine is shared) cancels.
    #[must_use]
    pub fn gain(&self, variant: Variant, measure: Measure, metric: Metric) -> Option<Spread> {
        self.gain_over(variant, variant.baseline(), measure, metric)
    }

    /// [`Results::gain`] against `baseline`.
    #[must_use]
    pub fn gain_over(&self, variant: Variant, baseline: Variant, measure: Measure, metric: Metric) -> Option<Spread> {
        let ours = self.per_round(variant, measure, metric.pick());
        let base = self.per_round(baseline, measure, metric.pick());
        let gains: Vec<f64> = ours
            .iter()
            .zip(&base)
            .filter_map(|(&o, &b)| {
                let (o, b) = (o?, b?);
                let ratio = if metric.higher_is_better() { b / o } else { o / b };
                (ratio.is_finite() && o > 0.0 && b > 0.0).then_some((ratio - 1.0) * 100.0)
            })
            .collect();
        Spread::of(&gains)
    }

    /// `variant`'s CPU per request over `reference`'s at `measure`, round
    /// by round.
    #[must_use]
    pub fn cpu_ratio(&self, variant: Variant, reference: Variant, measure: Measure) -> Option<Spread> {
        let ours = self.per_round(variant, measure, Metric::Cpu.pick());
        let theirs = self.per_round(reference, measure, Metric::Cpu.pick());
        let ratios: Vec<f64> =
            ours.iter().zip(&theirs).filter_map(|(&o, &t)| Some(o? / t?)).filter(|r| r.is_finite()).collect();
        Spread::of(&ratios)
    }
}

/// What a gain is measured in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Metric {
    /// Requests per second (wrk, saturated).
    Rate,
    /// The server's CPU time per request, µs.
    Cpu,
    /// The 99th percentile of latency, µs.
    P99,
}

impl Metric {
    /// Reads it from a round's result.
    #[must_use]
    pub fn pick(self) -> fn(&WrkResult) -> Option<f64> {
        match self {
            Metric::Rate => |r| Some(r.requests_per_second),
            Metric::Cpu => |r| r.server_cpu.map(|d| d.as_secs_f64() * 1e6),
            Metric::P99 => |r| r.p99.map(|d| d.as_secs_f64() * 1e6),
        }
    }

    fn higher_is_better(self) -> bool {
        self == Metric::Rate
    }
}

/// How the tables are set out: the open-loop rates, whether the
/// `--busy-poll-us 0` variants ran, and the references.
#[derive(Clone, Debug)]
pub struct Layout {
    /// The open-loop rates, requests per second.
    pub rates: Vec<u32>,
    /// Whether the `--busy-poll-us 0` variants ran.
    pub zero: bool,
    /// The reference servers.
    pub references: Vec<Subject>,
}

impl Layout {
    /// Every measure of a variant, wrk's then the open-loop ones.
    #[must_use]
    pub fn measures(&self) -> Vec<Measure> {
        let mut all = Measure::WRK.to_vec();
        all.extend(self.rates.iter().map(|&r| Measure::OpenLoop(r)));
        all
    }

    fn pollings(&self) -> Vec<Polling> {
        if self.zero { Polling::ALL.to_vec() } else { vec![Polling::Default] }
    }

    /// The gains table under `polling`: a row per technique, the gain of
    /// having it on in requests per CPU-second at each measure, and in
    /// saturated req/s for the wrk ones; medians over the rounds with
    /// their ranges; the study's figure beside.
    #[must_use]
    pub fn gains_table(&self, results: &Results, polling: Polling) -> String {
        let measures = self.measures();
        let mut out = String::new();
        let mut header = "| technique switched off |".to_owned();
        let mut rule = "|---|".to_owned();
        for m in &measures {
            let _ = write!(header, " req per CPU-s, {} |", m.describe());
            rule.push_str("--:|");
        }
        for m in Measure::WRK {
            let _ = write!(header, " req/s, {} |", m.describe());
            rule.push_str("--:|");
        }
        header.push_str(" the study |");
        rule.push_str("--:|");
        let _ = writeln!(out, "{header}\n{rule}");
        // Under --busy-poll-us 0, moderation and all off (which stop busy
        // polling themselves, and so ran once) are set against all on
        // without busy polling: what the rest of moderation and the other
        // techniques are worth once spinning is not counted.
        let baseline = Variant::afxdp(Technique::None, polling);
        for off in Technique::OFF {
            let variant = Variant::afxdp(off, if off.stops_busy_polling() { Polling::Default } else { polling });
            let mut line = format!("| {} |", off.name());
            for &m in &measures {
                let _ = write!(line, " {} |", cell(results.gain_over(variant, baseline, m, Metric::Cpu)));
            }
            for m in Measure::WRK {
                let _ = write!(line, " {} |", cell(results.gain_over(variant, baseline, m, Metric::Rate)));
            }
            let study = match off.study() {
                Some(g) if off == Technique::All => format!("+{g:.0} % (lighttpd +36 %, Apache +20 %)"),
                Some(g) => format!("+{g:.0} %"),
                None => "—".to_owned(),
            };
            let _ = writeln!(line, " {study} |");
            out.push_str(&line);
        }
        out
    }

    /// The kernel backend's table: the gain of having busy polling on
    /// (`--busy-poll-us 50` over its default, 0), as [`Layout::gains_table`]'s
    /// rows; empty when the kernel backend did not run.
    #[must_use]
    pub fn kernel_table(&self, results: &Results) -> String {
        if !self.references.contains(&Subject::FairwayKernel) {
            return String::new();
        }
        let off = Variant::reference(Subject::FairwayKernel);
        pairs_table(results, &self.measures(), &[("busy polling off (its default)", off, Variant::kernel_busy())])
    }

    /// Busy polling over AF_XDP, all on: the gain of the adaptive window
    /// (the default against `--no-adaptive-busy-poll`) and, when the
    /// `--busy-poll-us 0` variants ran, of busy polling itself (the default
    /// against none), as [`Layout::gains_table`]'s rows.
    #[must_use]
    pub fn busy_poll_table(&self, results: &Results) -> String {
        let on = Variant::afxdp(Technique::None, Polling::Default);
        let mut rows =
            vec![("adaptive window off (a fixed 50 µs)", Variant::afxdp(Technique::None, Polling::Fixed), on)];
        if self.zero {
            rows.push(("busy polling off (--busy-poll-us 0)", Variant::afxdp(Technique::None, Polling::Zero), on));
        }
        pairs_table(results, &self.measures(), &rows)
    }

    /// The figures table: each variant's medians (ranges) of CPU per
    /// request, req/s and p99 at each measure.
    #[must_use]
    pub fn figures_table(&self, results: &Results) -> String {
        figures_table(results, &self.measures(), &self.variants())
    }

    /// The two-shard part's table: the gain of steering, over AF_XDP
    /// (software steering against each shard keeping what its queue
    /// brings) and on the kernel backend (a `SO_REUSEPORT` listener per
    /// shard against one shared), from `results` of [`Variant::steering`].
    #[must_use]
    pub fn steering_table(&self, results: &Results) -> String {
        let mut rows = vec![(
            "afxdp: steering off (each shard keeps what its queue brings)",
            Variant::afxdp(Technique::Steering, Polling::Default),
            Variant::afxdp(Technique::None, Polling::Default),
        )];
        if self.references.contains(&Subject::FairwayKernel) {
            rows.push((
                "kernel: steering off (one listener shared, no SO_REUSEPORT)",
                Variant::kernel_steering_off(),
                Variant::reference(Subject::FairwayKernel),
            ));
        }
        pairs_table(results, &self.measures(), &rows)
    }

    /// The two-shard part's figures, as [`Layout::figures_table`]'s.
    #[must_use]
    pub fn steering_figures(&self, results: &Results) -> String {
        let kernel = self.references.contains(&Subject::FairwayKernel);
        figures_table(results, &self.measures(), &Variant::steering(kernel))
    }

    /// The nginx ratios: CPU per request of all on (each loop setting) and
    /// of Fairway's kernel backend over nginx's, at each measure.
    #[must_use]
    pub fn nginx_table(&self, results: &Results) -> String {
        let nginx = Variant::reference(Subject::Nginx);
        let measures = self.measures();
        let mut out = String::new();
        let mut header = "| server |".to_owned();
        let mut rule = "|---|".to_owned();
        for m in &measures {
            let _ = write!(header, " CPU/req × nginx, {} |", m.describe());
            rule.push_str("--:|");
        }
        let _ = writeln!(out, "{header}\n{rule}");
        let mut rows: Vec<Variant> = self.pollings().iter().map(|&p| Variant::afxdp(Technique::None, p)).collect();
        rows.insert(1, Variant::afxdp(Technique::None, Polling::Fixed));
        rows.push(Variant::afxdp(Technique::All, Polling::Default));
        rows.extend(self.references.iter().filter(|&&s| s != Subject::Nginx).map(|&s| Variant::reference(s)));
        if self.references.contains(&Subject::FairwayKernel) {
            rows.push(Variant::kernel_busy());
        }
        for variant in rows {
            let mut line = format!("| {} |", variant.name());
            for &m in &measures {
                let ratio = results.cpu_ratio(variant, nginx, m);
                let _ = write!(
                    line,
                    " {} |",
                    ratio.map_or("n/a".to_owned(), |s| format!("{:.2} ({:.2}–{:.2})", s.median, s.min, s.max))
                );
            }
            let _ = writeln!(line);
            out.push_str(&line);
        }
        out
    }

    /// Every variant, in table order.
    #[must_use]
    pub fn variants(&self) -> Vec<Variant> {
        Variant::all(self.zero, &self.references)
    }

    /// The lab's last line: all on against all off in requests per CPU
    /// second on `Connection: close` (wrk, saturated: the only load the
    /// close case has), and all on's CPU per keep-alive request against
    /// nginx's at the lowest open-loop rate (the same offered load).
    #[must_use]
    pub fn closing_line(&self, results: &Results) -> String {
        let all_off = Variant::afxdp(Technique::All, Polling::Default);
        let gain = results.gain(all_off, Measure::Close, Metric::Cpu);
        let p = gain.map_or("n/a".to_owned(), |g| format!("{:+.0}", g.median));
        let rate = self.rates.iter().copied().min();
        let ratio = rate.and_then(|r| {
            results.cpu_ratio(
                Variant::afxdp(Technique::None, Polling::Default),
                Variant::reference(Subject::Nginx),
                Measure::OpenLoop(r),
            )
        });
        let r = ratio.map_or("n/a".to_owned(), |s| format!("{:.2}", s.median));
        format!(
            "ablation: all on vs all off {p} % requests per CPU-second (Connection: close); CPU per keep-alive \
             request {r} × nginx"
        )
    }

    /// The chart's data: per technique, the gain in requests per
    /// CPU-second on `Connection: close` and at the lowest open-loop rate
    /// (default loop and, when run, `--busy-poll-us 0`), and the study's.
    #[must_use]
    pub fn chart(&self, results: &Results) -> (Vec<String>, Vec<(String, Vec<f64>)>) {
        let categories: Vec<String> = Technique::OFF.iter().map(|t| t.short().to_owned()).collect();
        let low = self.rates.iter().copied().min();
        let mut series = Vec::new();
        for polling in self.pollings() {
            let tag = if polling == Polling::Zero { ", bp0" } else { "" };
            let baseline = Variant::afxdp(Technique::None, polling);
            let value = |t: Technique, m: Measure| {
                let variant = Variant::afxdp(t, if t.stops_busy_polling() { Polling::Default } else { polling });
                results.gain_over(variant, baseline, m, Metric::Cpu).map_or(f64::NAN, |s| s.median)
            };
            series.push((
                format!("close, req/CPU-s{tag}"),
                Technique::OFF.iter().map(|&t| value(t, Measure::Close)).collect(),
            ));
            if let Some(rate) = low {
                series.push((
                    format!("keep-alive {} k/s, req/CPU-s{tag}", f64::from(rate) / 1000.0),
                    Technique::OFF.iter().map(|&t| value(t, Measure::OpenLoop(rate))).collect(),
                ));
            }
        }
        series.push(("the study".to_owned(), Technique::OFF.iter().map(|t| t.study().unwrap_or(f64::NAN)).collect()));
        (categories, series)
    }
}

/// Each of `variants`' medians (ranges) of CPU per request, req/s and p99
/// at each of `measures`.
#[must_use]
pub fn figures_table(results: &Results, measures: &[Measure], variants: &[Variant]) -> String {
    let mut out = String::new();
    let mut header = "| server |".to_owned();
    let mut rule = "|---|".to_owned();
    for m in measures {
        let _ = write!(header, " {}: CPU µs/req | req/s | p99 |", m.describe());
        rule.push_str("--:|--:|--:|");
    }
    let _ = writeln!(out, "{header}\n{rule}");
    for &variant in variants {
        let mut line = format!("| {} |", variant.name());
        for &m in measures {
            let cpu = results.spread(variant, m, Metric::Cpu.pick());
            let rate = results.spread(variant, m, Metric::Rate.pick());
            let p99 = results.spread(variant, m, Metric::P99.pick());
            let _ = write!(
                line,
                " {} | {} | {} |",
                cpu.map_or("n/a".to_owned(), |s| format!("{:.2} ({:.2}–{:.2})", s.median, s.min, s.max)),
                rate.map_or("n/a".to_owned(), |s| format!("{:.0} ({:.0}–{:.0})", s.median, s.min, s.max)),
                p99.map_or("n/a".to_owned(), |s| format_us(s.median)),
            );
        }
        let _ = writeln!(line);
        out.push_str(&line);
    }
    out
}

/// A gains table of pairs: for each row (its words, the variant with the
/// technique off, the one with it on), the gain of having it on in
/// requests per CPU-second at each of `measures`, and in req/s at wrk's.
#[must_use]
pub fn pairs_table(results: &Results, measures: &[Measure], rows: &[(&str, Variant, Variant)]) -> String {
    let mut out = String::new();
    let mut header = "| switched off |".to_owned();
    let mut rule = "|---|".to_owned();
    for m in measures {
        let _ = write!(header, " req per CPU-s, {} |", m.describe());
        rule.push_str("--:|");
    }
    let wrk: Vec<Measure> = measures.iter().copied().filter(|m| !matches!(m, Measure::OpenLoop(_))).collect();
    for m in &wrk {
        let _ = write!(header, " req/s, {} |", m.describe());
        rule.push_str("--:|");
    }
    let _ = writeln!(out, "{header}\n{rule}");
    for &(words, off, on) in rows {
        let mut line = format!("| {words} |");
        for &m in measures {
            let _ = write!(line, " {} |", cell(results.gain_over(off, on, m, Metric::Cpu)));
        }
        for &m in &wrk {
            let _ = write!(line, " {} |", cell(results.gain_over(off, on, m, Metric::Rate)));
        }
        let _ = writeln!(line);
        out.push_str(&line);
    }
    out
}

fn cell(spread: Option<Spread>) -> String {
    spread.map_or("n/a".to_owned(), |s| s.percent())
}

fn format_us(us: f64) -> String {
    crate::http::wrk::format_latency(Duration::from_secs_f64(us / 1e6))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(rps: f64, cpu_us: f64) -> WrkResult {
        WrkResult {
            idle_share: None,
            requests_per_second: rps,
            p50: None,
            p99: Some(Duration::from_micros(900)),
            requests: 1000,
            socket_errors: 0,
            timeouts: 0,
            non_2xx: 0,
            server_cpu: Some(Duration::from_secs_f64(cpu_us / 1e6)),
        }
    }

    #[test]
    fn variants_and_their_flags() {
        let all = Variant::all(true, &[Subject::Nginx, Subject::FairwayKernel]);
        // 9 under the default loop (one with a fixed busy-poll window), 6
        // with busy-poll 0, 2 references, and the kernel backend busy
        // polling.
        assert_eq!(all.len(), 18);
        let fixed = Variant::afxdp(Technique::None, Polling::Fixed);
        assert_eq!(fixed.flags().join(" "), "--no-adaptive-busy-poll");
        assert_eq!(fixed.name(), "afxdp fixed busy-poll, all on");
        assert_eq!(fixed.baseline(), Variant::afxdp(Technique::None, Polling::Fixed));
        assert_eq!(Variant::kernel_busy().flags().join(" "), "--busy-poll-us 50");
        assert_eq!(Variant::kernel_busy().name(), "fairway/kernel, busy-poll 50 µs");
        assert_eq!(Variant::kernel_steering_off().flags().join(" "), "--steering off");
        assert_eq!(Variant::kernel_steering_off().name(), "fairway/kernel, steering off");
        assert_eq!(Variant::steering(true).len(), 4);
        assert_eq!(Variant::steering(false).len(), 2);
        assert_eq!(Variant::afxdp(Technique::None, Polling::Default).flags(), Vec::<String>::new());
        assert_eq!(
            Variant::afxdp(Technique::Handles, Polling::Zero).flags().join(" "),
            "--no-recycle handles --busy-poll-us 0"
        );
        assert_eq!(
            Variant::afxdp(Technique::All, Polling::Default).flags().join(" "),
            "--recycle none --steering off --busy-poll-us 0 --itr-us 0 --no-adaptive-batch --batch 1"
        );
        assert!(!all.contains(&Variant::afxdp(Technique::All, Polling::Zero)));
        assert_eq!(
            Variant::afxdp(Technique::All, Polling::Zero).baseline(),
            Variant::afxdp(Technique::None, Polling::Default)
        );
        assert_eq!(
            Variant::afxdp(Technique::Events, Polling::Zero).baseline(),
            Variant::afxdp(Technique::None, Polling::Zero)
        );
        assert_eq!(Variant::all(false, &[]).len(), 9);
    }

    #[test]
    fn gains_pair_rounds_and_the_closing_line_says_them() {
        let layout = Layout { rates: vec![20_000, 5_000], zero: false, references: vec![Subject::Nginx] };
        let mut results = Results::default();
        let on = Variant::afxdp(Technique::None, Polling::Default);
        let off = Variant::afxdp(Technique::All, Polling::Default);
        let nginx = Variant::reference(Subject::Nginx);
        for (round, drift) in [1.0, 2.0, 1.5].into_iter().enumerate() {
            // All off costs 1.5 × the CPU per close request and reaches
            // 0.8 × the rate, whatever the round's drift.
            results.record(on, Measure::Close, round, Some(run(1000.0 / drift, 10.0 * drift)));
            results.record(off, Measure::Close, round, Some(run(800.0 / drift, 15.0 * drift)));
            results.record(on, Measure::OpenLoop(5_000), round, Some(run(5000.0, 4.0)));
            results.record(nginx, Measure::OpenLoop(5_000), round, Some(run(5000.0, 10.0)));
        }
        let cpu = results.gain(off, Measure::Close, Metric::Cpu).unwrap();
        assert!((cpu.median - 50.0).abs() < 1e-9 && (cpu.max - cpu.min).abs() < 1e-9, "{cpu:?}");
        let rate = results.gain(off, Measure::Close, Metric::Rate).unwrap();
        assert!((rate.median - 25.0).abs() < 1e-9, "{rate:?}");
        assert_eq!(
            layout.closing_line(&results),
            "ablation: all on vs all off +50 % requests per CPU-second (Connection: close); CPU per keep-alive \
             request 0.40 × nginx"
        );
        let table = layout.gains_table(&results, Polling::Default);
        assert!(table.contains("| all off | n/a | +50.0 % (+50.0 … +50.0) |"), "{table}");
        assert!(table.contains("+40 % (lighttpd +36 %, Apache +20 %)"), "{table}");
        assert!(table.contains("| handle (fd) recycling off |") && table.contains("+7 % |"), "{table}");
        let (categories, series) = layout.chart(&results);
        assert_eq!(categories.len(), 7);
        assert_eq!(series.last().unwrap().1[6], 40.0);
        // A failed round is left out, not counted as zero.
        results.record(off, Measure::Close, 3, None);
        assert_eq!(results.gain(off, Measure::Close, Metric::Cpu).unwrap().n, 3);
        let figures = layout.figures_table(&results);
        assert!(figures.contains("| afxdp, all on |"), "{figures}");
        assert!(layout.nginx_table(&results).contains("0.40 (0.40–0.40)"));
    }

    #[test]
    fn the_kernel_and_steering_tables_set_each_off_against_its_own_on() {
        let layout =
            Layout { rates: vec![5_000], zero: false, references: vec![Subject::Nginx, Subject::FairwayKernel] };
        let mut results = Results::default();
        let kernel = Variant::reference(Subject::FairwayKernel);
        for round in 0..3 {
            // Busy polling on costs the kernel backend twice the CPU.
            results.record(kernel, Measure::OpenLoop(5_000), round, Some(run(5000.0, 10.0)));
            results.record(Variant::kernel_busy(), Measure::OpenLoop(5_000), round, Some(run(5000.0, 20.0)));
            results.record(Variant::kernel_steering_off(), Measure::Close, round, Some(run(900.0, 11.0)));
            results.record(kernel, Measure::Close, round, Some(run(1000.0, 10.0)));
        }
        let on = Variant::afxdp(Technique::None, Polling::Default);
        for round in 0..3 {
            // The fixed window costs 1.5 × the adaptive one's CPU.
            results.record(on, Measure::OpenLoop(5_000), round, Some(run(5000.0, 10.0)));
            let fixed = Variant::afxdp(Technique::None, Polling::Fixed);
            results.record(fixed, Measure::OpenLoop(5_000), round, Some(run(5000.0, 15.0)));
        }
        let spin = layout.busy_poll_table(&results);
        assert!(spin.contains("| adaptive window off (a fixed 50 µs) | n/a | n/a | n/a | +50.0 %"), "{spin}");
        assert!(!spin.contains("--busy-poll-us 0"), "the zero variants did not run: {spin}");
        let table = layout.kernel_table(&results);
        assert!(table.contains("| busy polling off (its default) |"), "{table}");
        assert!(table.contains("-50.0 % (-50.0 … -50.0)"), "{table}");
        let steering = layout.steering_table(&results);
        assert!(steering.contains("| kernel: steering off (one listener shared, no SO_REUSEPORT) |"), "{steering}");
        // CPU: +10 %; req/s: 1000 over 900.
        assert!(steering.contains("+10.0 % (+10.0 … +10.0)") && steering.contains("+11.1 %"), "{steering}");
        assert!(layout.steering_figures(&results).contains("| fairway/kernel, steering off |"));
        let without = Layout { references: vec![Subject::Nginx], ..layout };
        assert!(without.kernel_table(&results).is_empty());
        assert!(!without.steering_table(&results).contains("kernel"));
    }
}
