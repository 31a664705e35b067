//! [`Worker`]: the thread that carries one direction: it reads frames from
//! the ingress interface, puts them through the link model at their kernel
//! receive time, and sends each out of the egress interface when the model
//! says it arrives.

use std::io;
use std::os::fd::AsRawFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use super::emulator::PendingLink;
use super::frame_slab::FrameSlab;
use super::offload::Segmenter;
use super::packet_socket::{Interface, PacketSocket, RxBatch, TxBatch, TxOutcome};
use super::stats::{DirectionStats, SharedStats};
use super::sys::{self, Waker};
use crate::deadline_queue::{DeadlineQueue, Due};
use crate::sim::link::{LinkModel, Verdict};

/// A frame waiting in its direction's queue: slab slot `slot`, `len`
/// bytes.
#[derive(Clone, Copy, Debug)]
struct Queued {
    slot: u32,
    len: u32,
}

/// A frame and when it leaves.
type Departure = Due<Queued>;

/// Frames per `recvmmsg` and per `sendmmsg`.
const BATCH: usize = 64;

/// Most `recvmmsg` calls in a row before the worker looks at its departures
/// again, so that a flood of arrivals cannot make frames leave late.
const RX_ROUNDS: usize = 4;

/// How often the socket's drop counter is read.
const KERNEL_DROPS_EVERY: Duration = Duration::from_millis(100);
/// While the ingress interface is down, how often the emulator looks
/// whether it was deleted: a deletion first takes the interface down, and
/// the socket reports that DOWN and nothing after it.
const DOWN_RECHECK: Duration = Duration::from_millis(100);

/// Lateness above this is counted in [`DirectionStats::late_over_100us`].
const LATE_US: u64 = 100;

/// Everything one direction's thread needs, prepared (sockets opened and
/// bound) by [`Emulator::start`](super::Emulator::start).
pub(crate) struct Worker {
    /// The interface `rx` is bound to.
    pub(crate) ingress: Interface,
    pub(crate) rx: PacketSocket,
    pub(crate) tx: PacketSocket,
    pub(crate) model: LinkModel,
    /// The longest frame the egress interface takes: MTU, Ethernet header,
    /// one VLAN tag.
    pub(crate) egress_max_frame: usize,
    pub(crate) spin: Duration,
    pub(crate) realtime_priority: Option<u8>,
    pub(crate) max_buffer_bytes: usize,
    /// The zero of the emulator's microsecond clock (`CLOCK_MONOTONIC`).
    pub(crate) origin: Instant,
    pub(crate) shared: Arc<SharedStats>,
    /// A new configuration from [`Emulator::reconfigure`](super::Emulator::reconfigure).
    pub(crate) pending: Arc<PendingLink>,
    pub(crate) stop: Arc<AtomicBool>,
    pub(crate) waker: Arc<Waker>,
}

/// The frames in flight of one direction, and what moves them.
struct Line {
    model: LinkModel,
    slab: FrameSlab,
    queue: DeadlineQueue<Queued>,
    stats: DirectionStats,
    /// The latest offer time: offers never go backwards, which the
    /// serialiser relies on.
    last_offer_us: u64,
}

impl Worker {
    /// Runs until the `stop` flag is set, then returns the final
    /// counters. Frames still in flight are discarded.
    ///
    /// # Errors
    ///
    /// The ingress interface was deleted, or another receive error. An
    /// interface going down is only a warning: frames flow again when it
    /// comes back up.
    pub(crate) fn run(self) -> io::Result<DirectionStats> {
        // Not fatal: without it, wake-ups are up to 50 µs late.
        if let Err(e) = sys::set_timer_slack_1ns() {
            eprintln!("fairway-linkem: warning: cannot set the timer slack to 1 ns: {e}");
        }
        if let Some(priority) = self.realtime_priority
            && let Err(e) = sys::set_fifo_priority(priority)
        {
            eprintln!(
                "fairway-linkem: warning: cannot run at SCHED_FIFO priority {priority} ({e}); timing will suffer on a busy machine"
            );
        }
        let Worker {
            ingress,
            rx,
            tx,
            model,
            egress_max_frame,
            spin,
            max_buffer_bytes,
            origin,
            shared,
            pending,
            stop,
            waker,
            ..
        } = self;
        let mut clock = Clock { origin, offset_ns: None };
        let mut line = Line {
            model,
            slab: FrameSlab::new(egress_max_frame, max_buffer_bytes),
            queue: DeadlineQueue::default(),
            stats: DirectionStats::default(),
            last_offer_us: 0,
        };
        let mut rx_batch = RxBatch::new(BATCH);
        let mut tx_batch = TxBatch::new(BATCH);
        let mut sending: Vec<Departure> = Vec::with_capacity(BATCH);
        let spin_us = spin.as_micros() as u64;
        let mut next_drop_check = Instant::now();
        // An ENETDOWN came and no frame after it.
        let mut down = false;

        loop {
            if let Some(config) = pending.take() {
                line.model.configure(config);
            }
            line.send_due(&clock, &tx, &mut tx_batch, &mut sending);
            for _ in 0..RX_ROUNDS {
                let received = match rx_batch.receive(&rx) {
                    Ok(n) => n,
                    // The kernel says so once per event; a socket on an
                    // interface that comes back up works again, one on a
                    // deleted interface never does.
                    Err(e) if e.raw_os_error() == Some(libc::ENETDOWN) => {
                        if !Interface::exists(ingress.index) {
                            return Err(deleted(&ingress.name));
                        }
                        eprintln!("fairway-linkem: warning: interface `{}` went down", ingress.name);
                        down = true;
                        0
                    }
                    Err(e) => return Err(e),
                };
                if received > 0 {
                    down = false;
                }
                line.take_in(&mut clock, &mut rx_batch, received, egress_max_frame);
                if received < BATCH {
                    break;
                }
                line.send_due(&clock, &tx, &mut tx_batch, &mut sending);
            }
            line.send_due(&clock, &tx, &mut tx_batch, &mut sending);

            if Instant::now() >= next_drop_check {
                line.stats.kernel_drops += rx.take_kernel_drops()?;
                next_drop_check = Instant::now() + KERNEL_DROPS_EVERY;
            }
            line.publish(&shared);
            if stop.load(Ordering::Acquire) {
                break;
            }
            if down && !Interface::exists(ingress.index) {
                return Err(deleted(&ingress.name));
            }
            // Down, the emulator wakes to look again.
            let recheck = down.then_some(DOWN_RECHECK);

            let now = clock.now_us();
            let wait = match line.queue.next_at() {
                Some(at) if at <= now => continue,
                Some(at) => Some(at - now),
                None => None,
            };
            match wait {
                // Close enough: spin on the clock (frames arriving meanwhile
                // keep their kernel time stamps, so they lose nothing).
                Some(us) if us <= spin_us => {
                    let at = now + us;
                    while clock.now_us() < at {
                        std::hint::spin_loop();
                    }
                }
                Some(us) => {
                    let timeout = Duration::from_micros(us - spin_us);
                    sys::wait_readable(
                        [rx.as_raw_fd(), waker.as_raw_fd()],
                        Some(recheck.map_or(timeout, |r| r.min(timeout))),
                    )?;
                }
                None => {
                    sys::wait_readable([rx.as_raw_fd(), waker.as_raw_fd()], recheck)?;
                }
            }
        }

        line.stats.kernel_drops += rx.take_kernel_drops().unwrap_or(0);
        line.stats.in_flight = line.queue.len() as u64;
        let Line { queue, slab, .. } = &mut line;
        for departure in queue.drain() {
            slab.release(departure.item.slot);
        }
        line.publish(&shared);
        Ok(line.final_stats())
    }
}

/// The error that ends a direction whose ingress interface is gone.
fn deleted(name: &str) -> io::Error {
    io::Error::other(format!("interface `{name}` was deleted"))
}

/// Microseconds since the emulator started, on `CLOCK_MONOTONIC` (which
/// `Instant` reads on Linux).
struct Clock {
    origin: Instant,
    /// The last good [`realtime_offset_ns`](Clock::realtime_offset_ns).
    offset_ns: Option<i128>,
}

/// Widest bracket of two monotonic readings around a real-time reading that
/// still gives a trustworthy offset.
const OFFSET_BRACKET_NS: i128 = 2_000;

impl Clock {
    fn now_us(&self) -> u64 {
        self.origin.elapsed().as_micros() as u64
    }

    /// `CLOCK_REALTIME` minus our clock, in nanoseconds: converts the
    /// kernel's receive time stamps (which are real-time). Resampled per
    /// batch, so that a step of the real-time clock is followed at once.
    ///
    /// The real-time reading is bracketed by two monotonic ones and kept
    /// only if they are at most 2 µs apart: an interrupt or a preemption
    /// between two plain readings would shift the offset by its length,
    /// and every frame of the batch would leave that much early. After a few
    /// wide brackets in a row, the previous offset stands.
    fn realtime_offset_ns(&mut self) -> i128 {
        for _ in 0..4 {
            let before = self.origin.elapsed().as_nanos() as i128;
            let real = SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i128);
            let after = self.origin.elapsed().as_nanos() as i128;
            if after - before <= OFFSET_BRACKET_NS {
                let offset = real - (before + after) / 2;
                self.offset_ns = Some(offset);
                return offset;
            }
        }
        *self.offset_ns.get_or_insert_with(|| {
            let mono = self.origin.elapsed().as_nanos() as i128;
            SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_nanos() as i128) - mono
        })
    }
}

impl Line {
    /// Handles the `received` frames of `batch`: each, or each segment of a
    /// super-frame, goes into a buffer of its own and through the model.
    fn take_in(&mut self, clock: &mut Clock, batch: &mut RxBatch, received: usize, egress_max_frame: usize) {
        if received == 0 {
            return;
        }
        let offset = clock.realtime_offset_ns();
        let now = clock.now_us();
        for i in 0..received {
            let rx = batch.frame(i);
            self.stats.received += 1;
            self.stats.received_bytes += rx.len as u64;
            // The kernel's receive time, on our clock; a frame is never
            // offered before the previous one, nor in the future.
            let stamped = rx.stamp_ns.map_or(now, |ns| (((ns - offset) / 1000).max(0) as u64).min(now));
            let at = stamped.max(self.last_offer_us);
            self.last_offer_us = at;
            if rx.truncated {
                self.stats.oversized += 1;
                continue;
            }
            let frame = batch.frame_mut(i);
            match rx.vnet.gso() {
                None => {
                    if let Some((start, offset)) = rx.vnet.partial_checksum()
                        && fairway_stack::finish_checksum(frame, start, offset)
                    {
                        self.stats.checksums_completed += 1;
                    }
                    if frame.len() > egress_max_frame {
                        self.stats.oversized += 1;
                        continue;
                    }
                    let Some(slot) = self.slab.take() else {
                        self.stats.no_buffer += 1;
                        continue;
                    };
                    self.slab.slot_mut(slot)[..frame.len()].copy_from_slice(frame);
                    self.offer(at, slot, frame.len());
                }
                Some(Ok(mss)) => match Segmenter::new(frame, mss) {
                    Some(seg) if seg.max_len() <= egress_max_frame => {
                        self.stats.segmented += 1;
                        for k in 0..seg.count(frame) {
                            self.stats.segments += 1;
                            let Some(slot) = self.slab.take() else {
                                self.stats.no_buffer += 1;
                                continue;
                            };
                            let len = seg.write(frame, k, self.slab.slot_mut(slot));
                            self.offer(at, slot, len);
                        }
                    }
                    _ => self.stats.oversized += 1,
                },
                Some(Err(())) => self.stats.oversized += 1,
            }
        }
    }

    /// Puts the frame in `slot` through the model at `at`, and schedules its
    /// departure (and its duplicate's) or frees its buffer.
    fn offer(&mut self, at: u64, slot: u32, len: usize) {
        match self.model.transmit(at, &mut self.slab.slot_mut(slot)[..len]) {
            Verdict::QueueDrop | Verdict::Lost => self.slab.release(slot),
            Verdict::Deliver { at, copy_at } => {
                self.queue.push(at, Queued { slot, len: len as u32 });
                if let Some(copy_at) = copy_at {
                    let Some(copy) = self.slab.take() else {
                        self.stats.no_buffer += 1;
                        return;
                    };
                    let (from, to) = self.slab.pair_mut(slot, copy);
                    to[..len].copy_from_slice(&from[..len]);
                    self.queue.push(copy_at, Queued { slot: copy, len: len as u32 });
                }
            }
        }
    }

    /// Sends every frame whose departure time has come, in batches.
    fn send_due(&mut self, clock: &Clock, tx: &PacketSocket, batch: &mut TxBatch, sending: &mut Vec<Departure>) {
        loop {
            let now = clock.now_us();
            sending.clear();
            while sending.len() < batch.capacity()
                && let Some(departure) = self.queue.pop_due(now)
            {
                sending.push(departure);
            }
            if sending.is_empty() {
                return;
            }
            let Line { slab, stats, model, .. } = self;
            let mut outcomes = sending.iter();
            batch.send(tx, sending.iter().map(|d| &slab.slot(d.item.slot)[..d.item.len as usize]), |outcome| {
                let Some(d) = outcomes.next() else { return };
                match outcome {
                    TxOutcome::Sent => {
                        model.stats.frames_delivered += 1;
                        model.stats.bytes_delivered += u64::from(d.item.len);
                        let late = now - d.at;
                        stats.late_us_total += late;
                        stats.late_us_max = stats.late_us_max.max(late);
                        stats.late_over_100us += u64::from(late > LATE_US);
                    }
                    TxOutcome::Failed(_) => stats.send_errors += 1,
                }
            });
            for d in sending.iter() {
                slab.release(d.item.slot);
            }
        }
    }

    fn final_stats(&self) -> DirectionStats {
        DirectionStats { link: self.model.stats, ..self.stats }
    }

    fn publish(&self, shared: &SharedStats) {
        shared.publish(&self.final_stats());
    }
}
