//! An adaptive busy-poll window: spin only while spinning mostly finds
//! work, and (unless the shard is in its latency mode) only through gaps
//! shorter than what a sleep and a wake-up would cost instead.
//!
//! A fixed window spins its whole length every time the loop goes idle. At
//! a light, steady load (a request every 200 µs, say) most idle gaps are
//! longer than the window, so most requests pay for a whole window of
//! spinning and still end in a sleep: measured at 5 k requests/s, a 50 µs
//! window doubled the server's CPU time per request and bought no latency
//! (benches/README.md, the receive-path ablation). So, as a NIC's adaptive
//! interrupt moderation follows the traffic, the loop keeps a running share
//! of its recent idle gaps (from going quiet to finding work again, slept
//! through or not) that a full window would have caught, and spins only
//! while that share is at least [`OPEN_SHARE`]: a miss then wastes a window
//! at most one idle gap in four. Under a load whose gaps are short it spins
//! as a fixed window does; under one whose gaps are long it sleeps at once
//! and costs nothing.
//!
//! A server shard also [limits](AdaptiveSpin::limit) the window to what a
//! sleep and a wake-up cost it in CPU time, measured when it starts: a gap
//! spun through costs the gap, one slept through costs the wake-up, so
//! spinning longer than that never saves CPU, and spinning through the gaps
//! of half a load (tens of microseconds) spends a core on latency alone.
//! That trade is the latency mode's (`--latency`), which spins the whole
//! `--busy-poll-us`.

use std::time::Duration;

/// The share (of [`ONE`]) of recent idle gaps shorter than the bound at or
/// above which the window is open.
pub const OPEN_SHARE: u32 = ONE * 3 / 4;

/// The fixed-point one of the running share.
pub const ONE: u32 = 1 << 10;

/// Each gap's weight in the running share: 1 / 2^`WEIGHT_SHIFT`.
const WEIGHT_SHIFT: u32 = 3;

/// The busy-poll window of one shard loop.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AdaptiveSpin {
    max: Duration,
    adaptive: bool,
    /// The running share of idle gaps shorter than `max`, of [`ONE`].
    short: u32,
}

impl AdaptiveSpin {
    /// A window of `max`, open at the start; always open when `adaptive`
    /// is false. A zero `max` never spins.
    #[must_use]
    pub fn new(max: Duration, adaptive: bool) -> AdaptiveSpin {
        AdaptiveSpin { max, adaptive, short: ONE }
    }

    /// Spins at most `max` from now on (the shard's measured wake-up cost,
    /// say: see [`LoopConfig::latency`](super::LoopConfig::latency)).
    pub fn limit(&mut self, max: Duration) {
        self.max = self.max.min(max);
    }

    /// The longest it spins.
    #[must_use]
    pub fn max(&self) -> Duration {
        self.max
    }

    /// How long the loop spins, now, once it finds nothing to do.
    #[must_use]
    pub fn window(&self) -> Duration {
        if !self.adaptive || self.short >= OPEN_SHARE { self.max } else { Duration::ZERO }
    }

    /// The loop found work `gap` after it went quiet.
    pub fn observe(&mut self, gap: Duration) {
        let caught = if gap < self.max { ONE } else { 0 };
        self.short = self.short - (self.short >> WEIGHT_SHIFT) + (caught >> WEIGHT_SHIFT);
    }

    /// The running share of recent idle gaps a full window would have
    /// caught, from 0 to 1 (what the tests look at).
    #[cfg(test)]
    fn short_share(&self) -> f64 {
        f64::from(self.short) / f64::from(ONE)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const US: Duration = Duration::from_micros(1);

    #[test]
    fn long_gaps_close_the_window_and_short_ones_reopen_it() {
        let mut s = AdaptiveSpin::new(50 * US, true);
        assert_eq!(s.window(), 50 * US, "open at the start");
        // Each long gap takes an eighth off the share: 7/8, 49/64 (both at
        // least 3/4), then 343/512.
        s.observe(200 * US);
        s.observe(50 * US);
        assert_eq!(s.window(), 50 * US);
        s.observe(51 * US);
        assert_eq!(s.window(), Duration::ZERO);
        for _ in 0..40 {
            s.observe(1000 * US);
        }
        assert!(s.short_share() < 0.01, "{}", s.short_share());
        // Short gaps bring it back: the share climbs past 3/4 in 11.
        let mut opened_after = 0;
        while s.window().is_zero() {
            s.observe(49 * US);
            opened_after += 1;
        }
        assert_eq!(opened_after, 11);
    }

    #[test]
    fn a_load_that_mostly_misses_keeps_it_closed() {
        // One gap in two short: never open for long.
        let mut s = AdaptiveSpin::new(50 * US, true);
        let mut open = 0;
        for i in 0..1000 {
            s.observe(if i % 2 == 0 { 10 * US } else { 100 * US });
            open += usize::from(!s.window().is_zero());
        }
        assert!(open < 10, "{open}");
        // Three in four short: open from the start and staying so.
        let mut s = AdaptiveSpin::new(50 * US, true);
        for i in 0..1000 {
            s.observe(if i % 4 == 0 { 100 * US } else { 10 * US });
        }
        assert_eq!(s.window(), 50 * US, "{}", s.short_share());
    }

    #[test]
    fn fixed_when_not_adaptive_and_never_open_with_a_zero_bound() {
        let mut s = AdaptiveSpin::new(50 * US, false);
        for _ in 0..100 {
            s.observe(Duration::from_secs(1));
        }
        assert_eq!(s.window(), 50 * US);
        let mut z = AdaptiveSpin::new(Duration::ZERO, true);
        z.observe(Duration::ZERO);
        assert_eq!(z.window(), Duration::ZERO);
    }

    #[test]
    fn a_limit_to_the_wake_up_cost_keeps_gaps_longer_than_it_from_spinning() {
        // Gaps of 20 µs: a 50 µs window catches them all and stays open;
        // limited to a wake-up's 8 µs it catches none and closes, as
        // sleeping through them costs less than spinning.
        let mut latency = AdaptiveSpin::new(50 * US, true);
        let mut economical = AdaptiveSpin::new(50 * US, true);
        economical.limit(8 * US);
        assert_eq!((economical.max(), economical.window()), (8 * US, 8 * US));
        for _ in 0..20 {
            latency.observe(20 * US);
            economical.observe(20 * US);
        }
        assert_eq!(latency.window(), 50 * US);
        assert_eq!(economical.window(), Duration::ZERO);
        // Gaps of 3 µs it still spins through.
        for _ in 0..20 {
            economical.observe(3 * US);
        }
        assert_eq!(economical.window(), 8 * US);
        economical.limit(Duration::from_secs(1));
        assert_eq!(economical.max(), 8 * US, "a limit only lowers the window");
    }
}
