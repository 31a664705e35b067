//! [`LinkConfig`]: what one direction of a simulated link does to frames.

use fairway_stack::time::Duration;

/// The behaviour of one direction of a simulated link.
///
/// A frame offered to a link goes through these steps, in this order (see the
/// [module documentation](super) for the whole model):
///
/// 1. **Queue.** If the link is still serialising earlier frames, the frame
///    waits in a FIFO. When the bytes already waiting plus this frame would
///    exceed `queue_bytes`, the frame is dropped (drop-tail). The frame being
///    serialised does not count as waiting. Without a bandwidth limit nothing
///    ever waits, so nothing is ever dropped here.
/// 2. **Serialisation.** The link is busy for `len × 8 / bandwidth_bps`
///    seconds per frame; time is kept exactly (no rounding drift between
///    back-to-back frames), and the frame is fully on the wire at the next
///    whole microsecond.
/// 3. **Wire impairments**, each drawn from the link's own seeded random
///    stream: loss (the frame vanishes after using the link), corruption,
///    duplication, reordering.
/// 4. **Propagation.** The frame arrives `delay` after serialisation ends,
///    plus any reordering delay.
///
/// All probabilities are in `[0, 1]`; anything else is a configuration bug
/// and panics.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct LinkConfig {
    /// One-way propagation delay.
    pub delay: Duration,
    /// Bandwidth in bits per second; 0 means unlimited (no serialisation time,
    /// no queue). Values above 10^18 are treated as 10^18.
    pub bandwidth_bps: u64,
    /// Drop-tail limit on the bytes waiting to be serialised; `None` means
    /// unlimited.
    pub queue_bytes: Option<usize>,
    /// Probability that a frame is lost on the wire.
    pub loss: f64,
    /// Probability that a frame gets an extra delay, uniform in
    /// `(0, reorder_delay]` whole microseconds, so that later frames overtake
    /// it. The extra delay does not keep the link busy.
    pub reorder: f64,
    /// The largest extra delay of a reordered frame; zero disables
    /// reordering.
    pub reorder_delay: Duration,
    /// Probability that a frame is delivered twice. The copy arrives right
    /// after the frame would have arrived without reordering, carries the same
    /// bytes (corruption included), and does not use the link a second time.
    pub duplicate: f64,
    /// Probability that a frame is corrupted: exactly one byte, chosen
    /// uniformly, is XORed with a random non-zero value. A single changed byte
    /// alters one 16-bit word by `k` or `k × 256` with `1 ≤ k ≤ 255`, never by
    /// a multiple of 0xFFFF, so the 16-bit one's-complement Internet checksum
    /// (IPv4, TCP, UDP, ICMP) always detects it.
    pub corrupt: f64,
}

impl LinkConfig {
    /// A perfect link: no delay, unlimited bandwidth and queue, no
    /// impairments.
    pub const fn ideal() -> LinkConfig {
        LinkConfig {
            delay: Duration::ZERO,
            bandwidth_bps: 0,
            queue_bytes: None,
            loss: 0.0,
            reorder: 0.0,
            reorder_delay: Duration::ZERO,
            duplicate: 0.0,
            corrupt: 0.0,
        }
    }

    /// Sets the one-way propagation delay.
    pub const fn with_delay(mut self, delay: Duration) -> LinkConfig {
        self.delay = delay;
        self
    }

    /// Sets the bandwidth in bits per second (0 = unlimited).
    pub const fn with_bandwidth_bps(mut self, bps: u64) -> LinkConfig {
        self.bandwidth_bps = bps;
        self
    }

    /// Sets the bandwidth in megabits per second (10^6 bit/s; 0 = unlimited).
    pub const fn with_bandwidth_mbps(self, mbps: u64) -> LinkConfig {
        self.with_bandwidth_bps(mbps.saturating_mul(1_000_000))
    }

    /// Sets the drop-tail queue limit in bytes.
    pub const fn with_queue_bytes(mut self, bytes: usize) -> LinkConfig {
        self.queue_bytes = Some(bytes);
        self
    }

    /// Sets the loss probability.
    #[track_caller]
    pub fn with_loss(mut self, p: f64) -> LinkConfig {
        self.loss = probability("loss", p);
        self
    }

    /// Sets the reordering probability and the largest extra delay.
    #[track_caller]
    pub fn with_reorder(mut self, p: f64, max_extra_delay: Duration) -> LinkConfig {
        self.reorder = probability("reorder", p);
        self.reorder_delay = max_extra_delay;
        self
    }

    /// Sets the duplication probability.
    #[track_caller]
    pub fn with_duplicate(mut self, p: f64) -> LinkConfig {
        self.duplicate = probability("duplicate", p);
        self
    }

    /// Sets the corruption probability.
    #[track_caller]
    pub fn with_corrupt(mut self, p: f64) -> LinkConfig {
        self.corrupt = probability("corrupt", p);
        self
    }

    /// Panics unless every probability is in `[0, 1]`.
    #[track_caller]
    pub(crate) fn validate(&self) {
        probability("loss", self.loss);
        probability("reorder", self.reorder);
        probability("duplicate", self.duplicate);
        probability("corrupt", self.corrupt);
    }
}

impl Default for LinkConfig {
    fn default() -> LinkConfig {
        LinkConfig::ideal()
    }
}

#[track_caller]
fn probability(what: &str, p: f64) -> f64 {
    assert!((0.0..=1.0).contains(&p), "LinkConfig: {what} probability {p} is outside [0, 1]");
    p
}
