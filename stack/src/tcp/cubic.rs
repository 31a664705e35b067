//! CUBIC (RFC 9438) with HyStart++ (RFC 9406) for leaving slow start.
//!
//! Read first: RFC 9438 §4 (the algorithm; §4.1 names every variable used
//! here), §5.8 (application-limited flows) and RFC 9406 §4 (HyStart++, in
//! [`hystart`](crate::tcp::hystart)).
//!
//! Windows are kept in bytes, which RFC 9438 §4.1 allows: wherever the RFC
//! counts segments, this file scales by the MSS, and `segments_acked` becomes
//! bytes acknowledged over the MSS. The cubic function is evaluated in `f64`
//! seconds: IEEE 754 rounds each basic operation exactly, so a run replays
//! bit for bit. The one libm call, the cube root of eq. 2, is taken once per
//! congestion-avoidance stage, never per ACK.
//!
//! What this file does not own: deciding that data was lost, fast recovery's
//! window inflation, and whether the sender is application-limited; the
//! connection reports those through [`CongestionControl`].

use crate::tcp::congestion::{AckSample, CongestionControl, initial_window};
use crate::tcp::hystart::HyStart;
use crate::time::{Duration, Instant};

/// C, the aggressiveness of the cubic increase, in segments per second³
/// (RFC 9438 §5.1).
pub const C: f64 = 0.4;
/// β_cubic, the multiplicative decrease factor (RFC 9438 §4.6), as the
/// fraction [`BETA_NUM`] / [`BETA_DEN`] so that reductions are exact.
pub const BETA_CUBIC: f64 = BETA_NUM as f64 / BETA_DEN as f64;
/// Numerator of β_cubic = 0.7.
pub const BETA_NUM: u64 = 7;
/// Denominator of β_cubic = 0.7.
pub const BETA_DEN: u64 = 10;
/// α_cubic = 3(1 − β)/(1 + β): the additive increase that gives the
/// Reno-friendly estimate Reno's average window (RFC 9438 §4.3).
pub const ALPHA_CUBIC: f64 = 3.0 * (1.0 - BETA_CUBIC) / (1.0 + BETA_CUBIC);

/// CUBIC congestion control (RFC 9438), leaving the initial slow start with
/// HyStart++ (RFC 9406).
///
/// About 120 bytes, held inline in every connection; cheap per ACK (a few
/// floating-point operations, no cube root).
#[derive(Clone, Debug, PartialEq)]
pub struct Cubic {
    cwnd: u32,
    ssthresh: u32,
    /// Growth earned but not yet applied, in bytes, within `[0, 1]`: at
    /// large windows an ACK earns less than a byte (RFC 9438 §4.1:
    /// `segments_acked` may be fractional).
    carry: f32,
    /// cwnd_prior (RFC 9438 §4.1): cwnd when ssthresh was last set.
    cwnd_prior: u32,
    /// W_max (RFC 9438 §4.1, §4.7) in bytes; 0 while undefined (before the
    /// first congestion event and after a timeout, §4.8 and §4.10).
    w_max: u32,
    epoch: Epoch,
    /// Fast recovery begun by [`CongestionControl::on_congestion`] is under
    /// way: its end deflates the window, and a timeout within it belongs to
    /// the same congestion episode.
    in_recovery: bool,
    /// A retransmission timeout has not yet been followed by an ACK of new
    /// data: further timeouts are backoffs of the same event.
    in_loss: bool,
    hystart: HyStart,
    /// The state before the last congestion event, for undo (§4.9).
    saved: Option<Saved>,
}

/// The current congestion-avoidance stage (RFC 9438 §4.2).
#[derive(Clone, Copy, Debug, PartialEq)]
struct Epoch {
    /// A stage is under way; when false, the next ACK in congestion
    /// avoidance starts one.
    active: bool,
    /// t_epoch + K, pushed later by time the window went unused (§5.8):
    /// W_cubic at `now` is C·(now − origin)³ + W_max. Keeping the sum
    /// rather than t_epoch and K apart saves a subtraction per ACK.
    origin: Instant,
    /// The last ACK counted in this stage: the time since it is either
    /// elapsed (a cwnd-limited ACK) or excluded (an application-limited one).
    last_ack: Instant,
    /// W_est (§4.3), the Reno-friendly estimate, in bytes.
    w_est: f64,
}

impl Epoch {
    const NONE: Epoch = Epoch { active: false, origin: Instant::ZERO, last_ack: Instant::ZERO, w_est: 0.0 };

    /// RFC 9438 §5.8: `t` must not include time the window went unused, so
    /// the curve moves later by the time since the last counted ACK.
    fn exclude_until(&mut self, now: Instant) {
        self.origin += now - self.last_ack;
        self.last_ack = self.last_ack.max(now);
    }
}

/// RFC 9438 §4.9.2's undo_* variables.
#[derive(Clone, Copy, Debug, PartialEq)]
struct Saved {
    cwnd: u32,
    ssthresh: u32,
    cwnd_prior: u32,
    w_max: u32,
    carry: f32,
    epoch_active: bool,
    origin: Instant,
    w_est: f64,
}

impl Cubic {
    /// A fresh instance: the initial window of RFC 6928, an unbounded
    /// ssthresh, and HyStart++ watching the first slow start.
    pub fn new(mss: u32) -> Cubic {
        Cubic {
            cwnd: initial_window(sane_mss(mss)),
            ssthresh: u32::MAX,
            carry: 0.0,
            cwnd_prior: 0,
            w_max: 0,
            epoch: Epoch::NONE,
            in_recovery: false,
            in_loss: false,
            hystart: HyStart::new(),
            saved: None,
        }
    }

    /// HyStart++ runs only in the initial slow start, while ssthresh is
    /// still unbounded (RFC 9406 §4.3); later slow starts stop at the
    /// ssthresh a congestion event left.
    fn uses_hystart(&self) -> bool {
        self.ssthresh == u32::MAX
    }

    /// Congestion avoidance (RFC 9438 §4.2–4.5).
    fn avoid(&mut self, ack: &AckSample, mss: u32) {
        let now = ack.now;
        if ack.app_limited {
            // §5.8: no growth, and the time does not count as elapsed.
            if self.epoch.active {
                self.epoch.exclude_until(now);
            }
            return;
        }
        if !self.epoch.active {
            self.start_epoch(now, mss);
        }
        let cwnd = self.cwnd as f64;
        let acked = ack.acked as f64;
        let since_k = signed_secs(now, self.epoch.origin);
        // §4.2: RTT is the smoothed RTT; fall back on whatever is known.
        let rtt = ack.srtt.or(ack.rtt).or(ack.min_rtt).unwrap_or(Duration::ZERO).as_secs_f64();

        // §4.3, eq. 4 in bytes. α becomes 1 once W_est has regained the
        // window at the last reduction, to grow as fast as Reno from there.
        let alpha = if self.epoch.w_est >= self.cwnd_prior as f64 { 1.0 } else { ALPHA_CUBIC };
        self.epoch.w_est += alpha * acked * mss as f64 / cwnd;

        // §4.2: aim at where the curve will be one RTT from now, no lower
        // than cwnd (growth never reverses) and no higher than 1.5·cwnd
        // (slower than slow start); §4.4–4.5: close (target − cwnd)/cwnd of
        // the gap per segment acknowledged, in the concave and convex
        // regions alike.
        let target = w_cubic(since_k + rtt, self.w_max, mss).clamp(cwnd, 1.5 * cwnd);
        let mut next = cwnd + (target - cwnd) * acked / cwnd;
        // §4.3: where the curve is below Reno's estimate, follow Reno.
        if w_cubic(since_k, self.w_max, mss) < self.epoch.w_est {
            next = next.max(self.epoch.w_est);
        }
        self.grow(next - cwnd, ack.acked.min(mss));
        self.epoch.last_ack = self.epoch.last_ack.max(now);
    }

    /// Starts a congestion-avoidance stage at `now` from the current cwnd
    /// (cwnd_epoch).
    fn start_epoch(&mut self, now: Instant, mss: u32) {
        let k = if self.w_max > self.cwnd {
            k(self.w_max, self.cwnd, mss)
        } else {
            // W_max is undefined (the first slow start ended without loss,
            // §4.10, or a timeout intervened, §4.8) or the window already
            // passed it: the curve starts its convex part here, K = 0 and
            // W_max = cwnd_epoch.
            self.w_max = self.cwnd;
            Duration::ZERO
        };
        // §4.3: W_est starts at cwnd_epoch.
        self.epoch = Epoch { active: true, origin: now + k, last_ack: now, w_est: self.cwnd as f64 };
    }

    /// Adds `delta` bytes (plus the carried fraction) to cwnd, at most
    /// `limit`: byte counting lets one ACK grow cwnd by at most L·SMSS with
    /// L = 1 (RFC 3465 §2.2), which bounds bursts from stretch ACKs even
    /// where the curve would allow more.
    fn grow(&mut self, delta: f64, limit: u32) {
        let total = delta.max(0.0) + self.carry as f64;
        if total >= limit as f64 {
            self.cwnd = self.cwnd.saturating_add(limit);
            self.carry = 0.0;
        } else {
            let whole = total.floor();
            self.cwnd = self.cwnd.saturating_add(whole as u32);
            self.carry = (total - whole) as f32;
        }
    }

    /// Saves what an undo must restore (RFC 9438 §4.9.2).
    fn save(&mut self) {
        self.saved = Some(Saved {
            cwnd: self.cwnd,
            ssthresh: self.ssthresh,
            cwnd_prior: self.cwnd_prior,
            w_max: self.w_max,
            carry: self.carry,
            epoch_active: self.epoch.active,
            origin: self.epoch.origin,
            w_est: self.epoch.w_est,
        });
    }

    /// Ends the congestion-avoidance stage: the next one starts from the
    /// reduced window (t_epoch is the start of congestion avoidance).
    fn end_epoch(&mut self) {
        self.epoch.active = false;
        self.carry = 0.0;
    }
}

impl CongestionControl for Cubic {
    fn cwnd(&self) -> u32 {
        self.cwnd
    }

    fn ssthresh(&self) -> u32 {
        self.ssthresh
    }

    fn on_ack(&mut self, ack: &AckSample) {
        let mss = sane_mss(ack.mss);
        self.in_loss = false; // new data arrived: the timeout episode is over
        if self.cwnd < self.ssthresh {
            if self.uses_hystart() && self.hystart.on_ack(ack) {
                // RFC 9406 §4.2: CSS ran its rounds; RFC 9438 §4.10: W_max
                // stays undefined and cwnd_prior = cwnd.
                self.ssthresh = self.cwnd;
                self.cwnd_prior = self.cwnd;
            } else {
                if !ack.app_limited {
                    // RFC 7661: an unused window does not grow.
                    let most = mss.saturating_mul(ack.acks.max(1));
                    let inc =
                        if self.uses_hystart() { self.hystart.increase(ack.acked, most) } else { ack.acked.min(most) };
                    self.cwnd = self.cwnd.saturating_add(inc).min(self.ssthresh);
                }
                return;
            }
        }
        self.avoid(ack, mss);
    }

    /// RFC 9438 §4.6–4.7. `flight` is not used: β applies to cwnd, which
    /// §4.6 permits when cwnd cannot grow while the sender leaves it
    /// unfilled; application-limited ACKs guarantee that here.
    fn on_congestion(&mut self, _now: Instant, _flight: u32, mss: u32) {
        let mss = sane_mss(mss);
        self.save();
        // §4.7: a loss before regaining the last W_max means the path's
        // share shrank (a new flow); plateau at cwnd·(1 + β)/2 to make room.
        self.w_max =
            if self.cwnd < self.w_max { reduce(self.cwnd, BETA_DEN + BETA_NUM, 2 * BETA_DEN) } else { self.cwnd };
        self.cwnd_prior = self.cwnd;
        self.ssthresh = reduced_ssthresh(self.cwnd, mss);
        self.cwnd = self.ssthresh;
        self.end_epoch();
        self.in_recovery = true;
        self.in_loss = false;
    }

    /// RFC 6582 §3.2 step 3, option 1: cwnd = min(ssthresh, max(FlightSize,
    /// SMSS) + SMSS), which avoids a burst when little is in flight. Only a
    /// recovery begun by [`CongestionControl::on_congestion`] and not undone
    /// since is deflated.
    fn on_recovery_end(&mut self, _now: Instant, flight: u32, mss: u32) {
        if !self.in_recovery {
            return;
        }
        let mss = sane_mss(mss);
        self.in_recovery = false;
        let deflated = self.ssthresh.min(flight.max(mss).saturating_add(mss));
        self.cwnd = self.cwnd.min(deflated).max(mss);
    }

    /// RFC 9438 §4.8: ssthresh as for any congestion event, cwnd to one
    /// segment (RFC 5681 §3.1), and the next congestion-avoidance stage
    /// starts a fresh curve (K = 0, W_max = cwnd_epoch).
    fn on_timeout(&mut self, _now: Instant, _flight: u32, mss: u32) {
        let mss = sane_mss(mss);
        if !self.in_loss {
            self.save();
            if !self.in_recovery {
                self.cwnd_prior = self.cwnd;
                self.ssthresh = reduced_ssthresh(self.cwnd, mss);
            }
            // Within fast recovery, ssthresh already carries this episode's
            // reduction; taking β of the deflated window again would count
            // one congestion event twice.
            self.w_max = 0;
        }
        // A repeated timeout (backoff) holds ssthresh, as RFC 5681 §3.1
        // requires, and keeps the undo state from the first.
        self.cwnd = mss;
        self.end_epoch();
        self.in_recovery = false;
        self.in_loss = true;
    }

    /// RFC 9438 §4.9.2: restore cwnd, cwnd_prior, ssthresh, W_max, K,
    /// t_epoch and W_est as they were before the event, unless cwnd has
    /// already regrown past cwnd_prior (a late detection), in which case the
    /// current values are the better ones.
    fn on_spurious_congestion(&mut self, now: Instant) {
        let Some(saved) = self.saved.take() else { return };
        if self.cwnd >= saved.cwnd {
            return;
        }
        self.cwnd = saved.cwnd;
        self.ssthresh = saved.ssthresh;
        self.cwnd_prior = saved.cwnd_prior;
        self.w_max = saved.w_max;
        self.carry = saved.carry;
        // K and t_epoch both live in `origin`. The time since the event
        // counts as elapsed, as restoring t_epoch implies: the sender was
        // not application-limited, it was recovering.
        self.epoch = Epoch {
            active: saved.epoch_active,
            origin: saved.origin,
            last_ack: self.epoch.last_ack.max(now),
            w_est: saved.w_est,
        };
        self.in_recovery = false;
        self.in_loss = false;
    }

    /// RFC 5681 §4.1: the restart window is min(IW, cwnd). RFC 9438 §5.8:
    /// the idle time is not elapsed time; if the window shrank, the next
    /// congestion-avoidance stage starts a fresh curve from it instead.
    fn on_restart_after_idle(&mut self, now: Instant, _idle: Duration, mss: u32) {
        let iw = initial_window(sane_mss(mss));
        if self.cwnd > iw {
            self.cwnd = iw;
            self.end_epoch();
        } else if self.epoch.active {
            // The whole gap since the last ACK: with nothing in flight, the
            // window went unused from then on.
            self.epoch.exclude_until(now);
        }
        if self.uses_hystart() {
            // RFC 9406 §4.3 allows HyStart++ for the restart window; its
            // rounds and RTTs from before the idle period are stale.
            self.hystart = HyStart::new();
        }
    }

    /// A larger initial window, a remembered ssthresh (RFC 9040), or
    /// careful resume's jump or retreat: the values are taken as they come.
    /// A finite ssthresh ends HyStart++ (it only watches the first slow
    /// start, RFC 9406 §4.3) and makes cwnd_prior; the next
    /// congestion-avoidance stage starts a fresh curve from cwnd (K = 0,
    /// W_max = cwnd_epoch, as after a slow start that ended without loss,
    /// RFC 9438 §4.10); no earlier event can be undone.
    fn set_window(&mut self, cwnd: Option<u32>, ssthresh: Option<u32>) {
        if let Some(cwnd) = cwnd {
            self.cwnd = cwnd.max(1);
        }
        if let Some(ssthresh) = ssthresh {
            self.ssthresh = ssthresh.max(1);
            self.cwnd_prior = self.ssthresh.min(self.cwnd);
        }
        self.w_max = 0;
        self.end_epoch();
        self.saved = None;
    }
}

/// W_cubic (RFC 9438 §4.2, eq. 1) in bytes: C·(t − K)³ + W_max, with
/// `since_k` = t − K in seconds.
fn w_cubic(since_k: f64, w_max: u32, mss: u32) -> f64 {
    C * mss as f64 * since_k * since_k * since_k + w_max as f64
}

/// K (RFC 9438 §4.2, eq. 2): the time the curve takes from `cwnd_epoch` to
/// `w_max`, ∛((W_max − cwnd_epoch)/C) with windows in segments.
fn k(w_max: u32, cwnd_epoch: u32, mss: u32) -> Duration {
    let segments = w_max.saturating_sub(cwnd_epoch) as f64 / mss as f64;
    Duration::from_micros(((segments / C).cbrt() * 1e6) as u64)
}

/// ssthresh after a congestion event: max(cwnd·β_cubic, 2·SMSS) (RFC 9438
/// §4.6).
fn reduced_ssthresh(cwnd: u32, mss: u32) -> u32 {
    reduce(cwnd, BETA_NUM, BETA_DEN).max(mss.saturating_mul(2))
}

/// `value · num / den`, exactly, without overflow for the ratios used here
/// (at most 1).
fn reduce(value: u32, num: u64, den: u64) -> u32 {
    (value as u64 * num / den) as u32
}

/// `now − origin` in seconds, negative before the origin.
fn signed_secs(now: Instant, origin: Instant) -> f64 {
    if now >= origin { (now - origin).as_secs_f64() } else { -(origin - now).as_secs_f64() }
}

/// An MSS that keeps the arithmetic sound: at least one byte (no division
/// by zero) and at most TCP's 16-bit MSS option (no overflow in
/// [`initial_window`]).
fn sane_mss(mss: u32) -> u32 {
    mss.clamp(1, u16::MAX as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tcp::hystart::Phase;
    use crate::tcp::seq::SeqNumber;
    use proptest::prelude::*;

    const MSS: u32 = 1000;
    const RTT: Duration = Duration::from_millis(100);

    /// Asserts `actual` is within `tolerance` of `expected`.
    #[track_caller]
    fn assert_near(actual: f64, expected: f64, tolerance: f64) {
        assert!((actual - expected).abs() <= tolerance, "{actual} is not within {tolerance} of {expected}");
    }

    /// An ACK of `acked` bytes at `now` from a cwnd-limited sender, which
    /// refills the window after each ACK (so `snd_nxt` is `ack` + cwnd).
    fn sample(c: &Cubic, now: Instant, ack: u32, acked: u32, rtt: Duration) -> AckSample {
        AckSample {
            now,
            acked,
            acks: 1,
            flight: c.cwnd(),
            mss: MSS,
            rtt: Some(rtt),
            srtt: Some(rtt),
            min_rtt: Some(rtt),
            app_limited: false,
            ack: SeqNumber::new(ack),
            snd_nxt: SeqNumber::new(ack.wrapping_add(c.cwnd())),
        }
    }

    /// A cwnd-limited flow: ACKs of one MSS each, a window's worth per RTT,
    /// evenly spaced.
    struct Flow {
        now: Instant,
        ack: u32,
    }

    impl Flow {
        fn new(now: Instant) -> Flow {
            Flow { now, ack: 0 }
        }

        /// One round trip of ACKs with `rtt` samples; `app_limited` marks
        /// them all.
        fn round(&mut self, c: &mut Cubic, rtt: Duration, app_limited: bool) {
            let n = (c.cwnd() / MSS).max(1);
            let step = Duration::from_micros(rtt.total_micros() / n as u64);
            for _ in 0..n {
                self.now += step;
                self.ack = self.ack.wrapping_add(MSS);
                c.on_ack(&AckSample { app_limited, ..sample(c, self.now, self.ack, MSS, rtt) });
            }
        }

        /// Round trips of `rtt` until `until`.
        fn run_until(&mut self, c: &mut Cubic, until: Instant, rtt: Duration) {
            while self.now < until {
                self.round(c, rtt, false);
            }
        }
    }

    /// A CUBIC instance in congestion avoidance that has just reduced from
    /// `w_max_segments` (first event: W_max = cwnd before it).
    fn reduced_from(w_max_segments: u32) -> Cubic {
        let mut c = Cubic::new(MSS);
        c.cwnd = w_max_segments * MSS;
        c.ssthresh = c.cwnd; // as if slow start had ended here
        c.on_congestion(Instant::ZERO, c.cwnd, MSS);
        c.on_recovery_end(Instant::ZERO, c.cwnd, MSS);
        c
    }

    fn k_secs(c: &Cubic, epoch_start: Instant) -> f64 {
        (c.epoch.origin - epoch_start).as_secs_f64()
    }

    // ---- The cubic function (RFC 9438 §4.2) ----

    #[test]
    fn the_window_function_matches_hand_computed_values() {
        // W_max = 100 segments of 1000 bytes; C = 0.4.
        let w_max = 100 * MSS;
        assert_eq!(w_cubic(0.0, w_max, MSS), 100_000.0); // t = K: the plateau
        assert_near(w_cubic(1.0, w_max, MSS), 100_400.0, 1e-6); // + 0.4·1³ segments
        assert_near(w_cubic(-1.0, w_max, MSS), 99_600.0, 1e-6);
        assert_near(w_cubic(2.0, w_max, MSS), 103_200.0, 1e-6); // + 0.4·2³
        assert_near(w_cubic(-5.0, w_max, MSS), 50_000.0, 1e-6); // − 0.4·5³
        // K = ∛((100 − 70)/0.4) = ∛75 = 4.217163 s, so W(0) = cwnd_epoch.
        assert_eq!(k(100 * MSS, 70 * MSS, MSS), Duration::from_micros(4_217_163));
        assert_near(w_cubic(-4.217_163, w_max, MSS), 70_000.0, 0.01);
        // K = ∛((1000 − 700)/0.4) = ∛750 = 9.085603 s.
        assert_eq!(k(1000 * MSS, 700 * MSS, MSS), Duration::from_micros(9_085_602));
        assert_eq!(k(70 * MSS, 70 * MSS, MSS), Duration::ZERO);
    }

    #[test]
    fn k_is_set_when_avoidance_starts_after_a_reduction() {
        let mut c = reduced_from(100);
        assert_eq!((c.cwnd(), c.ssthresh(), c.w_max), (70 * MSS, 70 * MSS, 100 * MSS));
        assert!(!c.epoch.active, "the stage starts with the first ACK in avoidance");
        let start = Instant::from_secs(3);
        c.on_ack(&sample(&c, start, MSS, MSS, RTT));
        assert!(c.epoch.active);
        assert_near(k_secs(&c, start), 4.217_163, 1e-6);
        assert_eq!(c.epoch.w_est as u32, 70_007, "W_est = cwnd_epoch + α·MSS²/cwnd");
    }

    // ---- Growth in congestion avoidance (RFC 9438 §4.2–4.5) ----

    #[test]
    fn growth_in_one_rtt_closes_most_of_the_gap_to_the_target() {
        // Concave: from 700 segments towards W_max = 1000, K = 9.0856 s.
        // Each ACK closes 1/cwnd of the gap to W(t + RTT), so over a window
        // of ACKs cwnd follows the target one RTT late: it tracks W(t), and
        // the first RTT grows it by W(0.1) − W(0) = 0.4·((−8.9856)³ −
        // (−9.0856)³) = 9.80 segments.
        let mut c = reduced_from(1000);
        let mut flow = Flow::new(Instant::from_secs(1));
        flow.round(&mut c, RTT, false);
        let concave = (c.cwnd() - 700 * MSS) as f64 / MSS as f64;
        assert_near(concave, 9.80, 0.3);
        assert!(c.cwnd() < c.w_max);

        // Convex: past K the curve accelerates. Around t − K = 2 s the
        // curve climbs 0.4·(2.1³ − 2³) = 0.50 segments per RTT; around
        // t − K = 6 s, 0.4·(6.1³ − 6³) = 4.39 segments per RTT.
        let mut c = reduced_from(1000);
        let start = Instant::from_secs(1);
        let mut flow = Flow::new(start);
        let k = Duration::from_micros(9_085_602);
        flow.run_until(&mut c, start + k + Duration::from_secs(2), RTT);
        assert!(c.cwnd() > c.w_max);
        let before = c.cwnd();
        flow.round(&mut c, RTT, false);
        let early = (c.cwnd() - before) as f64 / MSS as f64;
        flow.run_until(&mut c, start + k + Duration::from_secs(6), RTT);
        let before = c.cwnd();
        flow.round(&mut c, RTT, false);
        let late = (c.cwnd() - before) as f64 / MSS as f64;
        assert_near(early, 0.50, 0.1);
        assert_near(late, 4.39, 0.2);
    }

    #[test]
    fn the_window_tracks_the_curve_through_both_regions() {
        // Outside the Reno-friendly region cwnd follows W_cubic(t) within
        // about one RTT's worth of curve.
        let mut c = reduced_from(1000);
        let start = Instant::from_secs(1);
        let mut flow = Flow::new(start);
        for secs in [1u64, 4, 8, 9, 10, 12, 14] {
            flow.run_until(&mut c, start + Duration::from_secs(secs), RTT);
            let t = signed_secs(flow.now, c.epoch.origin);
            let lo = w_cubic(t - 0.2, c.w_max, MSS);
            let hi = w_cubic(t + 0.1, c.w_max, MSS);
            let cwnd = c.cwnd() as f64;
            assert!(lo <= cwnd && cwnd <= hi, "at {secs} s: {cwnd} outside [{lo}, {hi}]");
        }
        assert!(c.epoch.w_est < c.cwnd() as f64, "the cubic region ruled throughout");
    }

    #[test]
    fn one_ack_grows_by_the_rfc_increment() {
        // At the start of the stage, one ACK of an MSS grows cwnd by
        // (target − cwnd)/cwnd segments: (709.80 − 700)/700 · 1000 bytes.
        let mut c = reduced_from(1000);
        c.on_ack(&sample(&c, Instant::from_secs(1), MSS, MSS, RTT));
        let target = w_cubic(-9.085_602 + 0.1, 1000 * MSS, MSS);
        assert_near(target / MSS as f64, 709.797, 0.001);
        let expected = (target - 700_000.0) / 700_000.0 * 1000.0;
        assert_eq!(c.cwnd(), 700 * MSS + expected as u32);
    }

    #[test]
    fn the_target_is_capped_at_one_and_a_half_windows() {
        // Far into the convex region the curve would jump; growth per RTT
        // stays below 50%.
        let mut c = reduced_from(100);
        let start = Instant::from_secs(1);
        let mut flow = Flow::new(start);
        // Long RTT so the curve runs far ahead of cwnd.
        let rtt = Duration::from_secs(5);
        let mut ratio = 0.0;
        for _ in 0..6 {
            let before = c.cwnd();
            flow.round(&mut c, rtt, false);
            ratio = c.cwnd() as f64 / before as f64;
            assert!(ratio <= 1.5, "{before} -> {}", c.cwnd());
        }
        assert!(ratio > 1.45, "the cap binds: {ratio}");
    }

    #[test]
    fn the_reno_friendly_region_dominates_small_windows_and_short_rtts() {
        // W_max = 10 segments, RTT = 1 ms. The curve needs K = ∛(3/0.4)
        // = 1.957 s to regain 10 segments, but 20 RTTs take 20 ms, when
        // W_cubic = 0.4·(0.02 − 1.957)³ + 10 = 7.09 segments. Reno's
        // estimate grows by α = 0.529 segments per RTT until it reaches
        // cwnd_prior = 10 (3/0.529 = 5.7 RTTs), then by 1: 7 + 3 + 14.3
        // = 24.3 segments for a fluid window; the flow below sends whole
        // segments, ⌊cwnd⌋ per RTT, which costs it about one.
        let rtt = Duration::from_millis(1);
        let mut c = reduced_from(10);
        let start = Instant::from_secs(1);
        let mut flow = Flow::new(start);
        for _ in 0..20 {
            flow.round(&mut c, rtt, false);
        }
        let t = signed_secs(flow.now, c.epoch.origin);
        assert!(w_cubic(t, c.w_max, MSS) < 7.2 * MSS as f64);
        let segments = c.cwnd() as f64 / MSS as f64;
        assert!((22.5..=24.3).contains(&segments), "{segments} segments");
        assert_near(c.epoch.w_est, c.cwnd() as f64, MSS as f64);
    }

    #[test]
    fn reno_friendly_growth_starts_at_alpha_cubic() {
        // Below cwnd_prior W_est grows by α = 3·0.3/1.7 per window.
        assert_near(ALPHA_CUBIC, 0.529_411_76, 1e-8);
        let rtt = Duration::from_millis(1);
        let mut c = reduced_from(10);
        let mut flow = Flow::new(Instant::from_secs(1));
        flow.round(&mut c, rtt, false);
        // 7 ACKs of W_est += α·1000²/cwnd, cwnd ≈ 7000..7500 bytes.
        assert_near(c.epoch.w_est - 7000.0, 0.529 * 1000.0, 40.0);
    }

    // ---- Reductions (RFC 9438 §4.6–4.8) ----

    #[test]
    fn a_congestion_event_multiplies_by_beta() {
        let c = reduced_from(100);
        assert_eq!((c.cwnd(), c.ssthresh()), (70 * MSS, 70 * MSS));
        assert_eq!(c.cwnd_prior, 100 * MSS);
        // β of a byte count that is not a multiple of ten rounds down.
        let mut c = Cubic::new(MSS);
        c.cwnd = 12_345;
        c.on_congestion(Instant::ZERO, 0, MSS);
        assert_eq!(c.cwnd(), 8_641);
        // Never below two segments.
        let mut c = Cubic::new(MSS);
        c.cwnd = 2 * MSS;
        c.on_congestion(Instant::ZERO, 0, MSS);
        assert_eq!((c.cwnd(), c.ssthresh()), (2 * MSS, 2 * MSS));
    }

    #[test]
    fn fast_convergence_lowers_w_max() {
        let mut c = reduced_from(100);
        assert_eq!(c.w_max, 100 * MSS);
        // A loss at 80 segments, short of W_max: plateau at 80·(1 + 0.7)/2.
        c.cwnd = 80 * MSS;
        c.on_congestion(Instant::ZERO, 0, MSS);
        assert_eq!(c.w_max, 68 * MSS);
        assert_eq!(c.cwnd(), 56 * MSS);
        // A loss beyond W_max remembers the window itself.
        c.cwnd = 90 * MSS;
        c.on_congestion(Instant::ZERO, 0, MSS);
        assert_eq!(c.w_max, 90 * MSS);
    }

    #[test]
    fn recovery_end_deflates_to_what_is_in_flight() {
        let mut c = Cubic::new(MSS);
        c.cwnd = 100 * MSS;
        c.on_congestion(Instant::ZERO, 100 * MSS, MSS);
        c.on_recovery_end(Instant::ZERO, 5 * MSS, MSS);
        assert_eq!(c.cwnd(), 6 * MSS);
        // With nothing in flight, still two segments (RFC 6582 option 1).
        let mut c = Cubic::new(MSS);
        c.cwnd = 100 * MSS;
        c.on_congestion(Instant::ZERO, 100 * MSS, MSS);
        c.on_recovery_end(Instant::ZERO, 0, MSS);
        assert_eq!(c.cwnd(), 2 * MSS);
        // A full pipe keeps ssthresh.
        let mut c = reduced_from(100);
        assert_eq!(c.cwnd(), 70 * MSS);
        c.on_recovery_end(Instant::ZERO, 0, MSS);
        assert_eq!(c.cwnd(), 70 * MSS, "no recovery in progress: nothing to deflate");
    }

    #[test]
    fn a_timeout_collapses_to_one_segment_and_restarts_the_curve() {
        let mut c = reduced_from(100);
        let mut flow = Flow::new(Instant::from_secs(1));
        flow.run_until(&mut c, Instant::from_secs(3), RTT);
        let before = c.cwnd();
        c.on_timeout(flow.now, before, MSS);
        assert_eq!(c.cwnd(), MSS);
        assert_eq!(c.ssthresh(), reduce(before, 7, 10));
        assert!(!c.epoch.active);
        // Backoff: a second timeout holds ssthresh (RFC 5681 §3.1).
        c.on_timeout(flow.now, MSS, MSS);
        assert_eq!((c.cwnd(), c.ssthresh()), (MSS, reduce(before, 7, 10)));
        // Slow start back to ssthresh, then a fresh curve: K = 0 and
        // W_max = cwnd_epoch (RFC 9438 §4.8).
        while c.cwnd() < c.ssthresh() {
            flow.round(&mut c, RTT, false);
        }
        assert!(c.epoch.active);
        assert_eq!(c.w_max, c.ssthresh());
        assert!(c.epoch.origin <= c.epoch.last_ack && c.epoch.last_ack - c.epoch.origin <= RTT);
    }

    #[test]
    fn a_timeout_during_recovery_does_not_reduce_twice() {
        let mut c = reduced_from(100);
        c.in_recovery = true;
        c.on_timeout(Instant::ZERO, 70 * MSS, MSS);
        assert_eq!((c.cwnd(), c.ssthresh()), (MSS, 70 * MSS));
    }

    // ---- Undo (RFC 9438 §4.9) ----

    #[test]
    fn undo_restores_the_exact_previous_state() {
        let mut c = reduced_from(100);
        let mut flow = Flow::new(Instant::from_secs(1));
        flow.run_until(&mut c, Instant::from_secs(2), RTT);
        assert!(c.epoch.active && c.carry > 0.0);
        let before = c.clone();

        c.on_congestion(flow.now, c.cwnd(), MSS);
        assert_ne!(c, before);
        c.on_spurious_congestion(flow.now);
        assert_eq!(c, Cubic { saved: None, ..before.clone() });

        // A spurious timeout too.
        c.on_timeout(flow.now, c.cwnd(), MSS);
        c.on_timeout(flow.now, c.cwnd(), MSS); // a backoff of the same event
        c.on_spurious_congestion(flow.now);
        assert_eq!(c, Cubic { saved: None, ..before.clone() });

        // Nothing saved: nothing to do.
        c.on_spurious_congestion(flow.now);
        assert_eq!(c, Cubic { saved: None, ..before });
    }

    #[test]
    fn undo_after_regrowth_keeps_the_current_state() {
        let mut c = Cubic::new(MSS);
        c.cwnd = 20 * MSS;
        c.on_congestion(Instant::ZERO, 0, MSS);
        c.cwnd = 25 * MSS; // regrew past cwnd_prior before the detection
        let now = c.clone();
        c.on_spurious_congestion(Instant::ZERO);
        assert_eq!(c, Cubic { saved: None, ..now });
    }

    #[test]
    fn undo_resumes_the_stage_where_it_was() {
        // The restored curve keeps its origin: recovery time counts as
        // elapsed, as restoring t_epoch implies.
        let mut c = reduced_from(100);
        let mut flow = Flow::new(Instant::from_secs(1));
        flow.run_until(&mut c, Instant::from_secs(2), RTT);
        let origin = c.epoch.origin;
        c.on_congestion(flow.now, c.cwnd(), MSS);
        c.on_spurious_congestion(flow.now + Duration::from_secs(1));
        assert_eq!(c.epoch.origin, origin);
        assert_eq!(c.epoch.last_ack, flow.now + Duration::from_secs(1));
    }

    // ---- Application-limited and idle periods (RFC 9438 §5.8) ----

    #[test]
    fn app_limited_periods_do_not_advance_the_epoch() {
        let start = Instant::from_secs(1);
        // A: one second of cwnd-limited ACKs.
        let mut a = reduced_from(1000);
        let mut fa = Flow::new(start);
        fa.run_until(&mut a, start + Duration::from_secs(1), RTT);

        // B: the same second, interrupted half way by ten seconds of
        // application-limited ACKs, one every 100 ms.
        let mut b = reduced_from(1000);
        let mut fb = Flow::new(start);
        fb.run_until(&mut b, start + Duration::from_millis(500), RTT);
        let (paused, origin, last) = (b.cwnd(), b.epoch.origin, fb.now);
        for _ in 0..100 {
            fb.now += Duration::from_millis(100);
            fb.ack += MSS;
            b.on_ack(&AckSample { app_limited: true, ..sample(&b, fb.now, fb.ack, MSS, RTT) });
        }
        assert_eq!(b.cwnd(), paused, "no growth while application-limited");
        assert_eq!(b.epoch.origin, origin + Duration::from_secs(10), "the curve moved by the pause");
        assert_eq!(fb.now, last + Duration::from_secs(10));
        // From here B's ACKs are A's, ten seconds later.
        fb.run_until(&mut b, start + Duration::from_secs(11), RTT);
        assert_eq!(b.cwnd(), a.cwnd(), "W grows only with cwnd-limited time");

        // C: the same ten seconds, not application-limited, grows on.
        let mut c = reduced_from(1000);
        let mut fc = Flow::new(start);
        fc.run_until(&mut c, start + Duration::from_secs(11), RTT);
        assert!(c.cwnd() > a.cwnd() + 200 * MSS);
    }

    #[test]
    fn an_application_limited_sender_does_not_grow_in_slow_start() {
        let mut c = Cubic::new(MSS);
        c.on_ack(&AckSample { app_limited: true, ..sample(&c, Instant::ZERO, MSS, MSS, RTT) });
        assert_eq!(c.cwnd(), 10 * MSS);
    }

    #[test]
    fn restart_after_idle_caps_at_the_initial_window_and_restarts_the_curve() {
        let mut c = reduced_from(100);
        let mut flow = Flow::new(Instant::from_secs(1));
        flow.run_until(&mut c, Instant::from_secs(2), RTT);
        assert!(c.cwnd() > initial_window(MSS));
        c.on_restart_after_idle(flow.now + Duration::from_secs(30), Duration::from_secs(30), MSS);
        assert_eq!(c.cwnd(), initial_window(MSS));
        assert!(!c.epoch.active);
        assert_eq!(c.w_max, 100 * MSS, "the plateau is remembered");
    }

    #[test]
    fn restart_after_idle_excludes_the_idle_time() {
        // A window already at most IW keeps its stage, moved later by the
        // idle period.
        let mut c = reduced_from(11);
        let mut flow = Flow::new(Instant::from_secs(1));
        flow.run_until(&mut c, Instant::from_millis(1_300), RTT);
        assert!(c.cwnd() <= initial_window(MSS) && c.epoch.active);
        let (cwnd, origin, last) = (c.cwnd(), c.epoch.origin, c.epoch.last_ack);
        let now = last + Duration::from_secs(30);
        c.on_restart_after_idle(now, Duration::from_secs(30), MSS);
        assert_eq!(c.cwnd(), cwnd);
        assert_eq!(c.epoch.origin, origin + Duration::from_secs(30));
    }

    // ---- Slow start and HyStart++ (RFC 9406) ----

    #[test]
    fn slow_start_grows_by_at_most_one_segment_per_ack() {
        let mut c = Cubic::new(MSS);
        c.on_ack(&sample(&c, Instant::ZERO, 3 * MSS, 3 * MSS, RTT));
        assert_eq!(c.cwnd(), 11 * MSS);
        c.on_ack(&sample(&c, Instant::ZERO, 3 * MSS + 100, 100, RTT));
        assert_eq!(c.cwnd(), 11 * MSS + 100);
        // And stops at ssthresh.
        c.ssthresh = 11 * MSS + 500;
        c.on_ack(&sample(&c, Instant::ZERO, 4 * MSS, MSS, RTT));
        assert_eq!(c.cwnd(), 11 * MSS + 500);
    }

    #[test]
    fn hystart_leaves_slow_start_when_the_rtt_rises() {
        let mut c = Cubic::new(MSS);
        let mut flow = Flow::new(Instant::ZERO);
        for _ in 0..3 {
            flow.round(&mut c, Duration::from_millis(50), false);
        }
        assert_eq!(c.hystart.phase(), Phase::SlowStart);
        // +20 ms is beyond RttThresh = clamp(50/8, 4, 16) = 6.25 ms.
        let mut rounds = 0;
        while c.ssthresh() == u32::MAX {
            flow.round(&mut c, Duration::from_millis(70), false);
            rounds += 1;
            assert!(rounds < 10, "HyStart++ did not leave slow start");
        }
        // The first slower round enters CSS (its partial round counts),
        // four more complete it, and the first ACK of the sixth leaves.
        assert_eq!(rounds, 6);
        assert!(c.epoch.active, "the ACK that ends CSS starts avoidance");
        assert_eq!(c.cwnd_prior, c.ssthresh(), "cwnd_prior = cwnd on leaving (RFC 9438 §4.10)");
        assert_eq!(c.w_max, c.ssthresh(), "K = 0, W_max = cwnd_epoch (RFC 9438 §4.10)");
        // Far below the 80·2⁵ segments plain slow start would have reached.
        assert!(c.ssthresh() < 300 * MSS, "{}", c.ssthresh());
    }

    #[test]
    fn hystart_stays_in_slow_start_while_rtts_are_flat() {
        let mut c = Cubic::new(MSS);
        let mut flow = Flow::new(Instant::ZERO);
        for _ in 0..10 {
            flow.round(&mut c, Duration::from_millis(50), false);
        }
        assert_eq!(c.ssthresh(), u32::MAX);
        assert_eq!(c.hystart.phase(), Phase::SlowStart);
        // Doubling each round: 10 · 2¹⁰ segments.
        assert_eq!(c.cwnd(), 10 * 1024 * MSS);
    }

    #[test]
    fn css_grows_a_quarter_as_fast_as_slow_start() {
        let mut c = Cubic::new(MSS);
        let mut flow = Flow::new(Instant::ZERO);
        for _ in 0..2 {
            flow.round(&mut c, Duration::from_millis(50), false);
        }
        while c.hystart.phase() == Phase::SlowStart {
            flow.round(&mut c, Duration::from_millis(70), false);
        }
        let before = c.cwnd();
        c.on_ack(&sample(&c, flow.now, flow.ack + MSS, MSS, Duration::from_millis(70)));
        assert_eq!(c.cwnd() - before, MSS / 4);
        assert_eq!(c.ssthresh(), u32::MAX, "still slow start, conservatively");
    }

    #[test]
    fn a_loss_in_slow_start_ends_it() {
        let mut c = Cubic::new(MSS);
        let mut flow = Flow::new(Instant::ZERO);
        for _ in 0..3 {
            flow.round(&mut c, Duration::from_millis(50), false);
        }
        c.on_congestion(flow.now, c.cwnd(), MSS);
        assert_eq!(c.ssthresh(), 56 * MSS, "β of 80 segments");
        assert!(!c.uses_hystart());
    }

    #[test]
    fn the_public_api_works_through_the_enum() {
        use crate::tcp::congestion::{Algorithm, Congestion};
        let mut c = Congestion::new(Algorithm::Cubic, MSS);
        assert_eq!((c.cwnd(), c.ssthresh()), (initial_window(MSS), u32::MAX));
        c.on_ack(&AckSample {
            now: Instant::ZERO,
            acked: MSS,
            acks: 1,
            flight: 10 * MSS,
            mss: MSS,
            rtt: None,
            srtt: None,
            min_rtt: None,
            app_limited: false,
            ack: SeqNumber::new(MSS),
            snd_nxt: SeqNumber::new(11 * MSS),
        });
        assert_eq!(c.cwnd(), 11 * MSS);
    }

    #[test]
    fn the_state_fits_in_two_cache_lines() {
        // Held inline in every connection's control block.
        assert!(core::mem::size_of::<Cubic>() <= 128, "{} bytes", core::mem::size_of::<Cubic>());
    }

    // ---- Properties ----

    #[derive(Clone, Debug)]
    enum Event {
        Ack { dt: u64, acked: u32, rtt: Option<u64>, srtt: Option<u64>, app_limited: bool, ahead: u32 },
        Congestion { flight: u32 },
        RecoveryEnd { flight: u32 },
        Timeout { flight: u32 },
        Spurious,
        Restart { dt: u64 },
    }

    fn event() -> impl Strategy<Value = Event> {
        let micros = prop_oneof![0..2_000u64, 0..2_000_000u64, 0..100_000_000u64];
        let rtt = proptest::option::of(prop_oneof![0..100_000u64, 0..10_000_000_000u64]);
        prop_oneof![
            8 => (micros.clone(), prop_oneof![0..20_000u32, any::<u32>()], rtt.clone(), rtt, any::<bool>(), 0..1u32 << 30)
                .prop_map(|(dt, acked, rtt, srtt, app_limited, ahead)| Event::Ack { dt, acked, rtt, srtt, app_limited, ahead }),
            1 => any::<u32>().prop_map(|flight| Event::Congestion { flight }),
            1 => any::<u32>().prop_map(|flight| Event::RecoveryEnd { flight }),
            1 => any::<u32>().prop_map(|flight| Event::Timeout { flight }),
            1 => Just(Event::Spurious),
            1 => micros.prop_map(|dt| Event::Restart { dt }),
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        /// No sequence of events panics, overflows, collapses the window
        /// below one segment (two after a congestion event, until a
        /// timeout), grows it faster than byte counting allows, or grows it
        /// while the sender leaves it unused.
        #[test]
        fn the_window_stays_within_its_bounds(mss in prop_oneof![1..100u32, 500..9001u32], events in proptest::collection::vec(event(), 1..300)) {
            let mut c = Cubic::new(mss);
            let mut now = Instant::from_secs(1);
            let mut ack = SeqNumber::new(0);
            let mut floor = mss;
            for event in events {
                let before = c.cwnd();
                match event {
                    Event::Ack { dt, acked, rtt, srtt, app_limited, ahead } => {
                        now += Duration::from_micros(dt);
                        ack += acked;
                        c.on_ack(&AckSample {
                            now,
                            acked,
                            acks: 1,
                            flight: before,
                            mss,
                            rtt: rtt.map(Duration::from_micros),
                            srtt: srtt.map(Duration::from_micros),
                            min_rtt: rtt.map(Duration::from_micros),
                            app_limited,
                            ack,
                            snd_nxt: ack + ahead,
                        });
                        prop_assert!(c.cwnd() >= before, "an ACK shrank cwnd");
                        prop_assert!(!app_limited || c.cwnd() == before, "an unused window grew");
                        prop_assert!(c.cwnd() - before <= acked.min(mss), "{before} -> {} on {acked}", c.cwnd());
                    }
                    Event::Congestion { flight } => {
                        c.on_congestion(now, flight, mss);
                        floor = 2 * mss;
                        prop_assert!(c.ssthresh() >= 2 * mss);
                    }
                    Event::RecoveryEnd { flight } => c.on_recovery_end(now, flight, mss),
                    Event::Timeout { flight } => {
                        c.on_timeout(now, flight, mss);
                        floor = mss;
                        prop_assert_eq!(c.cwnd(), mss);
                        prop_assert!(c.ssthresh() >= 2 * mss);
                    }
                    Event::Spurious => {
                        c.on_spurious_congestion(now);
                        // The restored window may be one from before an
                        // earlier timeout.
                        floor = mss;
                    }
                    Event::Restart { dt } => {
                        now += Duration::from_micros(dt);
                        c.on_restart_after_idle(now, Duration::from_micros(dt), mss);
                        prop_assert!(c.cwnd() <= before);
                    }
                }
                prop_assert!(c.cwnd() >= floor, "cwnd {} below {floor}", c.cwnd());
                prop_assert!(c.ssthresh() >= 2 * mss);
            }
        }
    }
}
