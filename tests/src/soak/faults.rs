//! The faults of a soak: which, on whose link, when ([`plan`]), the
//! windows they were really in force ([`Window`], from the times the
//! testbed applied and lifted them), and which errors they explain
//! ([`explains`]).
//!
//! Faults take turns on the load clients' links, one at a time with a
//! calm gap between: a flap (the link down, then up), a loss burst (10 %
//! both ways), reordering with duplication, and a vanishing client (see
//! [`super::vanish`]). The probing client's link is never faulted, so a
//! failed `/healthz` probe has no excuse.

use std::time::{Duration, Instant};

use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// What a fault does.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum FaultKind {
    /// The client's link goes down for the fault's duration: nothing
    /// crosses either way, then everything does again.
    Flap,
    /// 10 % loss both ways ([`LOSS_BURST`]).
    LossBurst,
    /// Reordering and duplication both ways ([`REORDER_DUPLICATE`]).
    ReorderDuplicate,
    /// A client opens connections in the middle of exchanges, then
    /// vanishes: its address is deleted and its sockets closed, so nothing
    /// it sends ever leaves and nothing sent to it is ever answered.
    Vanish,
}

impl FaultKind {
    /// Every kind, in the order they take turns: a vanish first, so that
    /// the server clears what it leaves while the others run.
    pub const ALL: [FaultKind; 4] =
        [FaultKind::Vanish, FaultKind::Flap, FaultKind::LossBurst, FaultKind::ReorderDuplicate];

    /// Its name in the report.
    #[must_use]
    pub fn name(self) -> &'static str {
        match self {
            FaultKind::Flap => "flap",
            FaultKind::LossBurst => "loss burst",
            FaultKind::ReorderDuplicate => "reorder+duplicate",
            FaultKind::Vanish => "vanish",
        }
    }

    /// The range its duration is drawn from (a vanish is an instant:
    /// what it leaves behind is the server's to clear).
    fn durations(self) -> (Duration, Duration) {
        match self {
            FaultKind::Flap => (Duration::from_secs(2), Duration::from_secs(4)),
            FaultKind::LossBurst => (Duration::from_secs(3), Duration::from_secs(6)),
            FaultKind::ReorderDuplicate => (Duration::from_secs(4), Duration::from_secs(8)),
            FaultKind::Vanish => (Duration::ZERO, Duration::ZERO),
        }
    }
}

/// The link options of a loss burst.
pub const LOSS_BURST: &str = "--loss 10%";
/// The link options of a reordering window: 10 % of frames held back up
/// to 20 ms, 5 % delivered twice.
pub const REORDER_DUPLICATE: &str = "--reorder 10% --reorder-delay 20ms --duplicate 5%";

/// Calm between one fault's end and the next one's start.
pub const GAP: Duration = Duration::from_secs(4);
/// How long after a window ends its fault still explains an error: the
/// retransmission timers it backed off (a 4 s flap leaves the next RTO
/// up to 3.2 s away) and the requests that waited on them.
pub const GRACE: Duration = Duration::from_secs(5);

/// One fault to apply.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Fault {
    /// What it does.
    pub kind: FaultKind,
    /// The load client whose link (or, for a vanish, whose namespace) it
    /// hits.
    pub client: usize,
    /// When it starts, from the start of the faulted phase.
    pub at: Duration,
    /// How long it lasts.
    pub duration: Duration,
}

/// The faults of a phase of `length`: kinds and `clients` in turn, each
/// duration drawn from the kind's range with `seed`, [`GAP`] between two,
/// the first after one gap, and none ending within `quiet_end` of the
/// phase's end (so the last ones' errors can show before the load stops);
/// at most `most` of them.
#[must_use]
pub fn plan(length: Duration, clients: &[usize], quiet_end: Duration, seed: u64, most: usize) -> Vec<Fault> {
    let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
    let mut faults = Vec::new();
    let mut at = GAP;
    if clients.is_empty() {
        return faults;
    }
    for n in 0..most {
        let kind = FaultKind::ALL[n % FaultKind::ALL.len()];
        // Clients turn once per round of kinds too, so each client meets
        // every kind.
        let client = clients[(n + n / FaultKind::ALL.len()) % clients.len()];
        let (low, high) = kind.durations();
        let duration = if high > low {
            Duration::from_millis(rng.random_range(low.as_millis() as u64..=high.as_millis() as u64))
        } else {
            low
        };
        if at + duration + quiet_end > length {
            break;
        }
        faults.push(Fault { kind, client, at, duration });
        at += duration + GAP;
    }
    faults
}

/// One round of the faults (each kind once, as [`plan`] would begin), and
/// how long it lasts with a [`GAP`] after the last.
#[must_use]
pub fn round(clients: &[usize], seed: u64) -> (Vec<Fault>, Duration) {
    let faults: Vec<Fault> = plan(Duration::MAX / 2, clients, Duration::ZERO, seed, FaultKind::ALL.len());
    let length = faults.last().map_or(GAP, |f| f.at + f.duration + GAP);
    (faults, length)
}

/// A fault as it was really in force: from when the testbed applied it to
/// when it lifted it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// What it was.
    pub kind: FaultKind,
    /// Whose link.
    pub client: usize,
    /// Applied.
    pub start: Instant,
    /// Lifted.
    pub end: Instant,
}

/// The window that explains a failure of client `client` between `start`
/// and `end`: one on that client's link in force during that span, or
/// less than [`GRACE`] before it began. A vanish explains nothing: the
/// connections it cuts are its own and are not counted as requests.
#[must_use]
pub fn explains(windows: &[Window], client: usize, start: Instant, end: Instant) -> Option<FaultKind> {
    windows
        .iter()
        .filter(|w| w.kind != FaultKind::Vanish && w.client == client)
        .find(|w| start <= w.end + GRACE && end >= w.start)
        .map(|w| w.kind)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_plan_takes_turns_and_ends_before_the_quiet_end() {
        let faults = plan(Duration::from_secs(110), &[1, 2], Duration::from_secs(10), 7, usize::MAX);
        assert!(faults.len() >= 8, "{faults:?}");
        for (n, f) in faults.iter().enumerate() {
            assert_eq!(f.kind, FaultKind::ALL[n % 4]);
            assert!(f.at + f.duration + Duration::from_secs(10) <= Duration::from_secs(110));
            let (low, high) = f.kind.durations();
            assert!((low..=high).contains(&f.duration), "{f:?}");
        }
        for pair in faults.windows(2) {
            assert_eq!(pair[1].at, pair[0].at + pair[0].duration + GAP);
        }
        // Each client meets each kind within two rounds.
        for kind in FaultKind::ALL {
            for client in [1, 2] {
                assert!(faults.iter().any(|f| f.kind == kind && f.client == client), "{kind:?} on {client}");
            }
        }
        assert_eq!(faults, plan(Duration::from_secs(110), &[1, 2], Duration::from_secs(10), 7, usize::MAX), "seeded");
        assert!(plan(Duration::from_secs(5), &[1], Duration::from_secs(10), 7, usize::MAX).is_empty());
        let (round, length) = round(&[1, 2], 7);
        assert_eq!(round, faults[..4], "a round is how the plan begins");
        assert_eq!(length, round[3].at + round[3].duration + GAP);
    }

    #[test]
    fn a_window_explains_its_own_clients_failures_during_it_and_just_after() {
        let t0 = Instant::now();
        let s = Duration::from_secs;
        let windows = [
            Window { kind: FaultKind::Flap, client: 1, start: t0 + s(10), end: t0 + s(13) },
            Window { kind: FaultKind::Vanish, client: 2, start: t0 + s(20), end: t0 + s(20) },
        ];
        let explained = |client, from, to| explains(&windows, client, t0 + s(from), t0 + s(to));
        assert_eq!(explained(1, 11, 12), Some(FaultKind::Flap), "inside");
        assert_eq!(explained(1, 2, 10), Some(FaultKind::Flap), "a request that waited into it");
        assert_eq!(explained(1, 17, 30), Some(FaultKind::Flap), "begun within the grace");
        assert_eq!(explained(1, 19, 30), None, "begun after the grace");
        assert_eq!(explained(1, 2, 9), None, "over before it");
        assert_eq!(explained(2, 11, 12), None, "another client's link");
        assert_eq!(explained(2, 19, 21), None, "a vanish explains nothing");
    }
}
