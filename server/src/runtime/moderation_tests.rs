//! Interrupt moderation in virtual time: a scripted device whose frames
//! arrive at set instants, a clock that only moves when the loop turns
//! (each receive costs [`TURN`]), sleeps or pauses. Nothing sleeps for real.

use std::cell::{Cell, RefCell};
use std::collections::VecDeque;
use std::io;
use std::net::Ipv4Addr;
use std::rc::Rc;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

use fairway_nic::{Device, Wait};
use fairway_stack::time::Instant;
use fairway_stack::{Config, Event, Shard};

use super::{App, LoopConfig, LoopStats, run_with_clock};
use crate::clock::Clock;

/// What one turn of the loop costs in virtual time, in microseconds.
const TURN: u64 = 1;

/// Virtual time in microseconds, shared by the clock, the device and the app.
type Now = Rc<Cell<u64>>;

struct VirtualClock {
    now: Now,
    pauses: Rc<RefCell<Vec<u64>>>,
}

impl Clock for VirtualClock {
    fn now(&self) -> Instant {
        Instant::from_micros(self.now.get())
    }
    fn pause(&mut self, duration: Duration) {
        self.now.set((self.now() + duration.into()).total_micros());
        self.pauses.borrow_mut().push(self.now.get());
    }
}

/// A device whose frames arrive at scripted instants.
struct ScriptedNic {
    now: Now,
    arrivals: VecDeque<u64>,
    /// The budget of every receive.
    budgets: Vec<usize>,
    /// When each wait on the device returned.
    wakes: Rc<RefCell<Vec<u64>>>,
    /// The longest a frame waited between arriving and being received.
    max_latency: u64,
    scratch: Vec<u8>,
}

impl ScriptedNic {
    fn new(now: &Now, arrivals: impl IntoIterator<Item = u64>, wakes: &Rc<RefCell<Vec<u64>>>) -> ScriptedNic {
        ScriptedNic {
            now: now.clone(),
            arrivals: arrivals.into_iter().collect(),
            budgets: Vec::new(),
            wakes: wakes.clone(),
            max_latency: 0,
            scratch: vec![0; 1514],
        }
    }
}

impl Device for ScriptedNic {
    fn max_frame_len(&self) -> usize {
        self.scratch.len()
    }
    fn receive<F: FnMut(&[u8])>(&mut self, budget: usize, mut on_frame: F) -> usize {
        self.now.set(self.now.get() + TURN);
        self.budgets.push(budget);
        let mut n = 0;
        while n < budget && self.arrivals.front().is_some_and(|&at| at <= self.now.get()) {
            let at = self.arrivals.pop_front().unwrap_or_default();
            self.max_latency = self.max_latency.max(self.now.get() - at);
            // Not for the shard's MAC: counted and dropped, which is all
            // these tests need of it.
            on_frame(&[0u8; 60]);
            n += 1;
        }
        n
    }
    fn transmit<F: FnMut(&mut [u8]) -> Option<usize>>(&mut self, budget: usize, mut fill: F) -> usize {
        let mut sent = 0;
        while sent < budget && fill(&mut self.scratch).is_some() {
            sent += 1;
        }
        sent
    }
}

impl Wait for ScriptedNic {
    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let limit = self.now.get() + timeout.map_or(u64::MAX / 2, |t| t.as_micros() as u64);
        let next = self.arrivals.front().copied().unwrap_or(u64::MAX).max(self.now.get());
        self.now.set(next.min(limit));
        self.wakes.borrow_mut().push(self.now.get());
        Ok(())
    }
}

/// Does nothing; finishes when virtual time reaches `end`.
struct Until {
    now: Now,
    end: u64,
}

impl App for Until {
    fn on_event(&mut self, _: &mut Shard, _: Instant, _: Event) {}
    fn finished(&self) -> bool {
        self.now.get() >= self.end
    }
}

struct Outcome {
    stats: LoopStats,
    budgets: Vec<usize>,
    /// Every wake-up (device wait or coalescing pause), in order.
    wakes: Vec<u64>,
    max_latency: u64,
}

/// Runs the loop over frames arriving at `arrivals` until virtual time `end`.
fn drive(config: LoopConfig, arrivals: impl IntoIterator<Item = u64>, end: u64) -> Outcome {
    let now: Now = Rc::new(Cell::new(0));
    let wakes = Rc::new(RefCell::new(Vec::new()));
    let mut nic = ScriptedNic::new(&now, arrivals, &wakes);
    let mut clock = VirtualClock { now: now.clone(), pauses: wakes.clone() };
    let mut shard = Shard::new(Config::new([2, 0, 0, 0, 0, 1], Ipv4Addr::new(10, 0, 0, 1), 24));
    let mut app = Until { now: now.clone(), end };
    let stats = run_with_clock(&mut shard, &mut nic, &mut app, &config, &AtomicBool::new(false), &mut clock)
        .expect("the scripted device never fails");
    assert_eq!(shard.counters().frames_in, stats.frames_in);
    let wakes = wakes.borrow().clone();
    Outcome { stats, budgets: nic.budgets, wakes, max_latency: nic.max_latency }
}

fn config(batch: usize, adaptive_batch: bool, busy_poll_us: u64, itr_us: u64) -> LoopConfig {
    LoopConfig {
        batch,
        adaptive_batch,
        busy_poll: Duration::from_micros(busy_poll_us),
        adaptive_busy_poll: true,
        itr: Duration::from_micros(itr_us),
        max_sleep: Duration::from_millis(100),
        latency: false,
    }
}

/// Frames every `gap` microseconds from `start`, `count` of them.
fn every(gap: u64, start: u64, count: u64) -> impl Iterator<Item = u64> {
    (0..count).map(move |i| start + i * gap)
}

// ---- adaptive batches ----

#[test]
fn a_burst_grows_the_batch_to_its_bound_and_the_quiet_after_shrinks_it() {
    // Idle, the loop sleeps its longest (100 ms) at a time: run for 1 s.
    let out = drive(config(64, true, 0, 0), std::iter::repeat_n(0, 1000), 1_000_000);
    assert_eq!(out.budgets[..6], [8, 16, 32, 64, 64, 64]);
    assert_eq!(*out.budgets.last().unwrap(), 8, "back to small batches once idle");
    assert_eq!(out.stats.frames_in, 1000);
    // 8 + 16 + 32 + 14 × 64 = 952, then 48.
    let h = out.stats.batch_histogram;
    assert_eq!((h[3], h[4], h[5], h[6]), (1, 1, 2, 14), "{h:?}");
    assert_eq!(out.stats.rx_batches_full, 17);
    assert!((out.stats.mean_batch() - 1000.0 / 18.0).abs() < 1e-9);
}

#[test]
fn without_adaptivity_every_receive_asks_for_the_whole_batch() {
    let out = drive(config(64, false, 0, 0), std::iter::repeat_n(0, 1000), 1_000_000);
    assert!(out.budgets.iter().all(|&b| b == 64));
    let h = out.stats.batch_histogram;
    assert_eq!((h[5], h[6]), (1, 15), "{h:?}");
    assert_eq!(out.stats.rx_budget_total, 64 * out.stats.turns);
}

#[test]
fn light_load_keeps_the_batch_small() {
    let adaptive = drive(config(256, true, 0, 0), every(100, 50, 100), 11_000);
    let fixed = drive(config(256, false, 0, 0), every(100, 50, 100), 11_000);
    assert!(adaptive.budgets.iter().all(|&b| b == 8));
    assert_eq!(adaptive.stats.rx_budget_total, 8 * adaptive.stats.turns);
    assert_eq!(fixed.stats.rx_budget_total, 256 * fixed.stats.turns);
    assert_eq!(adaptive.stats.batch_histogram[0], 100, "one frame per batch");
}

// ---- busy polling ----

#[test]
fn busy_polling_catches_frames_that_sleeping_would_wake_for() {
    // A frame every 30 µs: within a 50 µs busy-poll window of the last one.
    let spin = drive(config(64, true, 50, 0), every(30, 10, 100), 3_100);
    let sleep = drive(config(64, true, 0, 0), every(30, 10, 100), 3_100);
    assert_eq!(spin.stats.frames_in, 100);
    assert_eq!(sleep.stats.frames_in, 100);
    // The loop starts by polling, so every frame is found by spinning.
    assert_eq!(spin.stats.busy_poll_hits, 100, "{:?}", spin.stats);
    assert!(spin.stats.sleeps <= 2, "{:?}", spin.stats);
    assert!(spin.stats.busy_poll_turns >= 99 * 25, "spinning costs turns: {:?}", spin.stats);
    // Without it: one sleep per frame, and never a spinning turn.
    assert!(sleep.stats.sleeps >= 100, "{:?}", sleep.stats);
    assert_eq!((sleep.stats.busy_poll_hits, sleep.stats.busy_poll_turns), (0, 0));
}

#[test]
fn a_fixed_window_gives_up_after_its_length_every_time() {
    // Frames 200 µs apart: the 50 µs window always runs out first.
    let fixed = LoopConfig { adaptive_busy_poll: false, ..config(64, true, 50, 0) };
    let out = drive(fixed, every(200, 100, 20), 4_100);
    assert_eq!(out.stats.busy_poll_hits, 0, "{:?}", out.stats);
    assert!(out.stats.sleeps >= 20, "{:?}", out.stats);
    // About 50 spinning turns before each sleep, not more and not less.
    assert!(out.stats.busy_poll_turns <= 21 * 51, "{:?}", out.stats);
    assert!(out.stats.busy_poll_turns >= 20 * 49, "{:?}", out.stats);
}

#[test]
fn an_adaptive_window_closes_when_spinning_never_finds_work() {
    // The same light load: after three misses (the share of short gaps
    // falls below three in four) the loop sleeps at once; every frame is
    // still served as soon as it comes.
    let out = drive(config(64, true, 50, 0), every(200, 100, 20), 4_100);
    assert_eq!(out.stats.frames_in, 20);
    assert_eq!(out.stats.busy_poll_hits, 0, "{:?}", out.stats);
    assert!(out.stats.sleeps >= 20, "{:?}", out.stats);
    assert!(out.stats.busy_poll_turns <= 4 * 51, "{:?}", out.stats);
    assert!(out.max_latency <= 1, "{}", out.max_latency);
}

#[test]
fn an_adaptive_window_reopens_when_the_gaps_shorten() {
    // A light load closes the window; then frames 20 µs apart: short gaps,
    // slept through, reopen it after about ten, and spinning catches the
    // rest.
    let light = every(200, 100, 20);
    let heavy = every(20, 5_000, 200);
    let out = drive(config(64, true, 50, 0), light.chain(heavy), 9_100);
    assert_eq!(out.stats.frames_in, 220);
    assert!(out.stats.busy_poll_hits >= 180, "{:?}", out.stats);
    assert!(out.stats.sleeps <= 20 + 20, "{:?}", out.stats);
}

// ---- interrupt coalescing ----

#[test]
fn coalescing_wakes_at_most_once_per_interval_under_load() {
    // A frame every 10 µs for 10 ms. Fixed batches, so that one receive
    // takes all that waits and the batch sizes show the coalescing alone.
    let itr = drive(config(64, false, 0, 100), every(10, 5, 1000), 10_100);
    let off = drive(config(64, false, 0, 0), every(10, 5, 1000), 10_100);
    assert_eq!(itr.stats.frames_in, 1000);
    assert_eq!(off.stats.frames_in, 1000);
    assert!(off.stats.wakeups() >= 1000, "one wake-up per frame without it: {:?}", off.stats);
    assert_eq!(off.stats.itr_pauses, 0);
    assert!((95..=105).contains(&itr.stats.wakeups()), "{:?}", itr.stats);
    assert!(itr.stats.mean_batch() >= 9.0, "frames handled ten at a time: {:?}", itr.stats);
    // Between the first and the last frame, no two wake-ups are closer than
    // the interval.
    let during: Vec<u64> = itr.wakes.iter().copied().filter(|&t| t <= 10_000).collect();
    for pair in during.windows(2) {
        assert!(pair[1] - pair[0] >= 100, "wake-ups at {pair:?}");
    }
    // The price: a frame waits up to the interval.
    assert!(itr.max_latency <= 100 + TURN, "{}", itr.max_latency);
    assert!(off.max_latency <= TURN);
}

#[test]
fn coalescing_does_not_delay_a_frame_after_a_quiet_interval() {
    // Frames 1 ms apart: each finds the loop asleep on the device, and one
    // pause after it is all the coalescing costs.
    let out = drive(config(64, true, 0, 100), every(1_000, 500, 10), 10_600);
    assert_eq!(out.stats.frames_in, 10);
    assert!(out.max_latency <= TURN, "{}", out.max_latency);
    // One pause after each frame, and one after the first turn, which
    // sends the shard's gratuitous ARP.
    assert_eq!(out.stats.frames_out, 1);
    assert_eq!(out.stats.itr_pauses, 11, "{:?}", out.stats);
    assert!(out.stats.itr_paused_us <= 11 * 100);
}

#[test]
fn a_coalescing_pause_never_outlasts_the_longest_sleep() {
    let mut cfg = config(64, true, 0, 1_000);
    cfg.max_sleep = Duration::from_micros(300);
    let out = drive(cfg, every(10, 5, 500), 5_100);
    assert!(out.stats.itr_pauses > 10, "{:?}", out.stats);
    assert!(out.stats.itr_paused_us <= 300 * out.stats.itr_pauses, "{:?}", out.stats);
    assert!(out.max_latency <= 300 + 2 * TURN, "{}", out.max_latency);
}

// ---- the application's deadlines ----

/// Wants a turn at each of `due` (µs), and notes when it got them.
struct Timed {
    now: Now,
    due: VecDeque<u64>,
    fired: Vec<u64>,
    end: u64,
}

impl App for Timed {
    fn on_event(&mut self, _: &mut Shard, _: Instant, _: Event) {}
    fn poll(&mut self, _: &mut Shard, now: Instant) {
        while self.due.front().is_some_and(|&at| at <= now.total_micros()) {
            self.due.pop_front();
            self.fired.push(now.total_micros());
        }
    }
    fn poll_timeout(&self) -> Option<Instant> {
        self.due.front().map(|&at| Instant::from_micros(at))
    }
    fn finished(&self) -> bool {
        self.now.get() >= self.end
    }
}

#[test]
fn the_loop_sleeps_until_the_applications_next_deadline_not_its_longest_sleep() {
    let now: Now = Rc::new(Cell::new(0));
    let wakes = Rc::new(RefCell::new(Vec::new()));
    let mut nic = ScriptedNic::new(&now, [], &wakes);
    let mut clock = VirtualClock { now: now.clone(), pauses: wakes.clone() };
    let mut shard = Shard::new(Config::new([2, 0, 0, 0, 0, 1], Ipv4Addr::new(10, 0, 0, 1), 24));
    let mut app =
        Timed { now: now.clone(), due: VecDeque::from([5_000, 12_345, 250_000]), fired: Vec::new(), end: 400_000 };
    let stats =
        run_with_clock(&mut shard, &mut nic, &mut app, &config(64, true, 0, 0), &AtomicBool::new(false), &mut clock)
            .unwrap();
    // Each fired at its time (to the turn), not at the next 100 ms sleep.
    assert_eq!(app.fired.len(), 3, "{:?}", app.fired);
    for (fired, due) in app.fired.iter().zip([5_000u64, 12_345, 250_000]) {
        assert!((due..=due + 2 * TURN).contains(fired), "due at {due}, fired at {fired}");
    }
    // Between them the loop slept, in as few sleeps as max_sleep allows.
    assert!(stats.sleeps <= 8, "{stats:?}");
}
