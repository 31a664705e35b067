//! Window control's rules common to both backends: the policy `--fairness`
//! names, how a connection's direction and activity are told from its byte
//! counters, and how a configured `--capacity` is divided among shards.
//!
//! The kernel backend senses through `TCP_INFO` and acts through socket
//! options ([`kernel`](super::kernel)); the userspace backend reads the
//! stack's `FlowStats` and acts through the
//! [`Driver`](fairway_stack::fairness::Driver)
//! ([`userspace`](super::userspace)). Both decide with these rules, so a
//! flow is the same flow whichever backend serves it.

use std::sync::atomic::{AtomicU64, Ordering};

use fairway_stack::fairness::{Direction, Policy};

use crate::config::Fairness;

/// Bytes a connection must move one way before it counts as a flow: a
/// scrape or a small request holds no share.
pub(crate) const BULK_BYTES: u64 = 64 * 1024;

/// How many times more one direction must carry to decide the direction.
pub(crate) const DOMINANCE: u64 = 2;

/// Weights are published in thousandths.
const WEIGHT_SCALE: f64 = 1000.0;

/// The policy `--fairness` names, with its default configuration.
#[must_use]
pub fn policy_for(fairness: Fairness) -> Policy {
    let name = match fairness {
        Fairness::Off => "off",
        Fairness::Seed => "seed",
        Fairness::EqualRate => "equal-rate",
    };
    Policy::from_name(name).unwrap_or(Policy::Off)
}

/// Which way a connection's bytes went: `received` and `acked` over one
/// interval, the last verdict `previous`. One direction must carry more
/// than [`DOMINANCE`] times the other; anything else keeps the verdict.
pub(crate) fn classify(received: u64, acked: u64, previous: Option<Direction>) -> Option<Direction> {
    if received > acked.saturating_mul(DOMINANCE) {
        Some(Direction::Upload)
    } else if acked > received.saturating_mul(DOMINANCE) {
        Some(Direction::Download)
    } else {
        previous
    }
}

/// Each shard's active weight, so that a configured capacity is divided
/// among shards as their flows are.
#[derive(Debug)]
pub struct ShareBoard {
    weights: Box<[AtomicU64]>,
}

impl ShareBoard {
    /// A board for `shards` shards.
    #[must_use]
    pub fn new(shards: usize) -> ShareBoard {
        ShareBoard { weights: (0..shards).map(|_| AtomicU64::new(0)).collect() }
    }

    /// Publishes shard `shard`'s active `weight` and returns its part of
    /// `bits_per_sec` (all of it while no shard has a flow).
    pub fn share(&self, shard: usize, weight: f64, bits_per_sec: u64) -> u64 {
        let mine = (weight * WEIGHT_SCALE) as u64;
        if let Some(w) = self.weights.get(shard) {
            w.store(mine, Ordering::Relaxed);
        }
        let total: u64 = self.weights.iter().map(|w| w.load(Ordering::Relaxed)).sum();
        part(bits_per_sec, mine, total)
    }
}

/// `bits_per_sec × mine / total`, or all of it when either is 0.
fn part(bits_per_sec: u64, mine: u64, total: u64) -> u64 {
    if mine == 0 || total == 0 {
        return bits_per_sec;
    }
    (u128::from(bits_per_sec) * u128::from(mine) / u128::from(total.max(mine))) as u64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn direction_needs_dominance() {
        assert_eq!(classify(300, 100, None), Some(Direction::Upload));
        assert_eq!(classify(100, 300, None), Some(Direction::Download));
        assert_eq!(classify(150, 100, None), None);
        assert_eq!(classify(150, 100, Some(Direction::Download)), Some(Direction::Download));
        assert_eq!(classify(0, 0, Some(Direction::Upload)), Some(Direction::Upload));
    }

    #[test]
    fn a_configured_capacity_is_divided_among_shards_by_weight() {
        let board = ShareBoard::new(3);
        assert_eq!(board.share(0, 0.0, 90_000_000), 90_000_000, "no flows anywhere: all of it");
        assert_eq!(board.share(0, 2.0, 90_000_000), 90_000_000, "the only shard with flows");
        assert_eq!(board.share(1, 1.0, 90_000_000), 30_000_000);
        assert_eq!(board.share(0, 2.0, 90_000_000), 60_000_000);
        assert_eq!(board.share(2, 0.0, 90_000_000), 90_000_000, "a shard without flows needs none");
        assert_eq!(part(10, 5, 2), 10, "a stale total never gives more than all");
    }

    #[test]
    fn policies_follow_the_configuration() {
        assert_eq!(policy_for(Fairness::Off).name(), "off");
        assert_eq!(policy_for(Fairness::Seed).name(), "seed");
        assert_eq!(policy_for(Fairness::EqualRate).name(), "equal-rate");
    }
}
