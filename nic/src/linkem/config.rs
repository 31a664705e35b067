//! [`EmulatorConfig`]: which interfaces the emulator bridges and what each
//! direction does to the frames crossing it.

use std::time::Duration;

use crate::sim::LinkConfig;

/// The smallest default queue: enough for a burst of ~40 full-size frames
/// even on a short, slow path.
const MIN_DEFAULT_QUEUE_BYTES: usize = 64 * 1024;

/// What [`Emulator::start`](super::Emulator::start) sets up.
///
/// Each direction is a [`LinkConfig`], exactly as in the simulated network:
/// delay, bandwidth (0 = unlimited) with a drop-tail queue in bytes (`None`
/// = unlimited), loss, reordering, duplication and corruption.
#[derive(Clone, Debug, PartialEq)]
pub struct EmulatorConfig {
    /// Interface A (e.g. the client side).
    pub a: String,
    /// Interface B (e.g. the server side).
    pub b: String,
    /// Frames received on A and sent out of B.
    pub a_to_b: LinkConfig,
    /// Frames received on B and sent out of A.
    pub b_to_a: LinkConfig,
    /// Seeds both directions' random streams (each its own, as in the
    /// simulator: direction A→B is link 0, B→A link 1).
    pub seed: u64,
    /// How long before a frame's departure the worker stops sleeping and
    /// spins on the clock instead, to absorb the kernel's wake-up latency.
    /// Zero never spins.
    pub spin: Duration,
    /// `SCHED_FIFO` priority of the two worker threads (1..=99), so that a
    /// departure is not held up by a busy machine; `None` leaves them at
    /// normal priority. If the kernel refuses, they run at normal priority
    /// and a warning is printed.
    pub realtime_priority: Option<u8>,
    /// Most bytes of frame buffers each direction may hold (frames waiting
    /// in the queue and on the "wire"); beyond, frames are dropped and
    /// counted in [`DirectionStats::no_buffer`](super::DirectionStats::no_buffer).
    pub max_buffer_bytes: usize,
}

impl EmulatorConfig {
    /// Bridges `a` and `b` with no impairment in either direction, seed 1,
    /// 50 µs of spinning, real-time priority 10 and up to 512 MiB of frames
    /// per direction.
    pub fn new(a: impl Into<String>, b: impl Into<String>) -> EmulatorConfig {
        EmulatorConfig {
            a: a.into(),
            b: b.into(),
            a_to_b: LinkConfig::ideal(),
            b_to_a: LinkConfig::ideal(),
            seed: 1,
            spin: Duration::from_micros(50),
            realtime_priority: Some(10),
            max_buffer_bytes: 512 << 20,
        }
    }

    /// Applies `link` to both directions.
    pub fn with_link(mut self, link: LinkConfig) -> EmulatorConfig {
        self.a_to_b = link;
        self.b_to_a = link;
        self
    }
}

/// The queue a rate-limited direction gets when none is given: one
/// bandwidth-delay product of the round trip (`delay_ab + delay_ba`), the
/// classic size of a drop-tail buffer, and at least 64 KiB.
pub fn default_queue_bytes(bandwidth_bps: u64, round_trip: Duration) -> usize {
    let bdp = u128::from(bandwidth_bps) * round_trip.as_micros() / 8 / 1_000_000;
    usize::try_from(bdp).unwrap_or(usize::MAX).max(MIN_DEFAULT_QUEUE_BYTES)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_queue_is_one_round_trip_bdp() {
        // 100 Mbit/s × 50 ms = 625 000 bytes.
        assert_eq!(default_queue_bytes(100_000_000, Duration::from_millis(50)), 625_000);
        assert_eq!(default_queue_bytes(1_000_000, Duration::from_millis(10)), MIN_DEFAULT_QUEUE_BYTES);
        assert_eq!(default_queue_bytes(u64::MAX, Duration::from_secs(3600)), usize::MAX);
    }
}
