//! Packet rates of one shard over AF_XDP and TAP, on the testbed.
//!
//! Each measurement runs two threads, one per core: the measured side on
//! core 0 and its counterpart on core 1, each holding one device opened
//! inside the namespace its interface lives in.
//!
//! - [`Bench::afxdp_rx`]: a generator ([`transmit_loop`] on an AF_XDP
//!   socket on the switch port `srv`) blasts prebuilt 64-byte UDP frames
//!   into `fw0`; the shard is the server's own runtime loop
//!   ([`fairway::runtime::run`]) over an [`AfXdp`] on `fw0` queue 0,
//!   handing every frame to [`Shard::handle_frame`], which counts it as UDP
//!   to a closed port and drops it (answering with a port unreachable only
//!   as often as its ICMP rate limit allows).
//! - [`Bench::afxdp_tx`]: the shard's [`AfXdp`] on `fw0` transmits
//!   prebuilt frames as fast as it accepts them; a sink AF_XDP socket on
//!   `srv` receives them, so neither the bridge nor the kernel's stack
//!   sees them, and counts what was delivered.
//! - [`Bench::tap_rx`]: the same generator on the switch port `tap`, whose
//!   frames reach the TAP `fwtap0` through the server namespace's bridge;
//!   the shard is the runtime loop over a [`Tap`] on `fwtap0`.
//!
//! Counters are sampled at the end of a warm-up and at the end of the
//! measured window; a rate is the difference over the time between the two
//! samples.

use std::io;
use std::net::{Ipv4Addr, SocketAddrV4};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use fairway::runtime::shards::pin_to_core;
use fairway::runtime::{self, App, LoopConfig};
use fairway_nic::afxdp::{AfXdp, AfXdpConfig, AfXdpStats};
use fairway_nic::tap::Tap;
use fairway_nic::{Device, Wait};
use fairway_stack::time::Instant as StackInstant;
use fairway_stack::{DropReason, Event, Shard};
use fairway_tests::real_peers::{parse_mac, shard_config};
use fairway_tests::testbed::{self, SERVER_IF, TAP_IF, Testbed};

use crate::udp_frames::{UdpFrame, flows};

/// The switch-side peer of `fw0` (the testbed's name for it).
pub const SWITCH_SERVER_PORT: &str = "srv";
/// The switch-side peer of the TAP's uplink (the testbed's name for it).
pub const SWITCH_TAP_PORT: &str = "tap";
/// The core of the measured shard.
pub const SHARD_CORE: usize = 0;
/// The core of the generator or the sink.
pub const COUNTERPART_CORE: usize = 1;
/// The address the generated frames come from, and the sent ones go to:
/// on the subnet, but no client's.
pub const PEER_IP: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 99);
/// The MAC address that goes with [`PEER_IP`] (the testbed's scheme).
pub const PEER_MAC: [u8; 6] = [0x02, 0x00, 10, 77, 0, 99];
/// UDP port 9 (discard): closed on Fairway.
pub const CLOSED_PORT: u16 = 9;
/// How many flows (source ports) the prebuilt frames cycle through.
pub const FLOWS: usize = 256;
/// Frames offered to `transmit` per call by the transmit loops.
pub const TX_BUDGET: usize = 256;
/// Frames the measured shard's loop receives per turn at most (the
/// runtime's default batch).
pub const SHARD_BATCH: usize = 64;
/// Frames taken per `receive` call by the sink.
const RX_BUDGET: usize = 256;
/// How long the devices have to open before a measurement gives up.
const OPEN_TIMEOUT: Duration = Duration::from_secs(20);
/// How often the main thread looks at the interrupt flag while it waits.
const TICK: Duration = Duration::from_millis(20);

/// The warm-up before counting, and the window counted.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Window {
    /// Traffic runs this long before the first sample.
    pub warm_up: Duration,
    /// The time between the two samples.
    pub length: Duration,
}

/// One measurement: frames per second on each side of the device.
#[derive(Clone, Debug, PartialEq)]
pub struct Rate {
    /// The shard's side: frames it received, or frames its device accepted
    /// for sending.
    pub shard: f64,
    /// The other side: frames the generator's device accepted (offered
    /// load), or frames the sink received (delivered).
    pub counterpart: f64,
    /// Frames the shard's side moved per turn of its loop (one `receive`
    /// of at most [`SHARD_BATCH`], or one `transmit` of at most
    /// [`TX_BUDGET`]): near the budget
    /// when the shard or its device is the limit, far below it when the
    /// shard waits for frames.
    pub per_turn: f64,
    /// What each side's device and the shard counted, one line each, for
    /// `--verbose`.
    pub notes: Vec<String>,
}

/// The three packet-rate measurements on one testbed.
pub struct Bench<'a> {
    tb: &'a Testbed,
    window: Window,
    interrupted: Arc<AtomicBool>,
}

impl<'a> Bench<'a> {
    /// Measurements on `tb` over `window`; each returns `None` once
    /// `interrupted` is raised.
    #[must_use]
    pub fn new(tb: &'a Testbed, window: Window, interrupted: Arc<AtomicBool>) -> Bench<'a> {
        Bench { tb, window, interrupted }
    }

    /// Frames from the generator on `srv` into one shard on `fw0` queue 0.
    ///
    /// # Errors
    ///
    /// When a device cannot be opened or a thread fails.
    pub fn afxdp_rx(&self) -> io::Result<Option<Rate>> {
        let mac = parse_mac(&self.tb.server_mac());
        let frames = self.frames_to(mac);
        let config = shard_config(mac, self.tb.server_ip(), self.tb.prefix_len(), 0, 1);
        let run = Run::new();
        let workers = vec![
            run.start("shard", self.tb.server_ns(), SHARD_CORE, move |ctl| {
                shard_loop(ctl, config, || open_afxdp(SERVER_IF), describe_afxdp)
            })?,
            run.start("generator", self.tb.switch_ns(), COUNTERPART_CORE, move |ctl| {
                transmit_loop(ctl, SWITCH_SERVER_PORT, &frames)
            })?,
        ];
        run.measure(workers, &self.window, &self.interrupted)
    }

    /// Frames from one shard's AF_XDP socket on `fw0` queue 0 into a sink
    /// on `srv`.
    ///
    /// # Errors
    ///
    /// When a device cannot be opened or a thread fails.
    pub fn afxdp_tx(&self) -> io::Result<Option<Rate>> {
        let template = UdpFrame::new(
            parse_mac(&self.tb.server_mac()),
            PEER_MAC,
            SocketAddrV4::new(self.tb.server_ip(), 1024),
            SocketAddrV4::new(PEER_IP, CLOSED_PORT),
        );
        let frames = flows(&template, FLOWS);
        let run = Run::new();
        let workers = vec![
            run.start("shard", self.tb.server_ns(), SHARD_CORE, move |ctl| transmit_loop(ctl, SERVER_IF, &frames))?,
            run.start("sink", self.tb.switch_ns(), COUNTERPART_CORE, |ctl| sink_loop(ctl, SWITCH_SERVER_PORT))?,
        ];
        run.measure(workers, &self.window, &self.interrupted)
    }

    /// Frames from the generator on `tap` into one shard on the TAP
    /// `fwtap0`.
    ///
    /// # Errors
    ///
    /// When a device cannot be opened or a thread fails.
    pub fn tap_rx(&self) -> io::Result<Option<Rate>> {
        // Not fwtap0's own MAC: the server namespace's bridge keeps that.
        let mac = parse_mac(&self.tb.tap_stack_mac());
        let frames = self.frames_to(mac);
        let config = shard_config(mac, self.tb.server_ip(), self.tb.prefix_len(), 0, 1);
        let run = Run::new();
        let workers = vec![
            run.start("shard", self.tb.server_ns(), SHARD_CORE, move |ctl| {
                let open = || Tap::open(TAP_IF).map_err(io::Error::other);
                shard_loop(ctl, config, open, |tap: &Tap| format!("{:?}", tap.stats()))
            })?,
            run.start("generator", self.tb.switch_ns(), COUNTERPART_CORE, move |ctl| {
                transmit_loop(ctl, SWITCH_TAP_PORT, &frames)
            })?,
        ];
        run.measure(workers, &self.window, &self.interrupted)
    }

    /// The generator's frames: from [`PEER_IP`] to Fairway's closed port
    /// at `mac`, over [`FLOWS`] source ports.
    fn frames_to(&self, mac: [u8; 6]) -> Vec<Vec<u8>> {
        let template = UdpFrame::new(
            PEER_MAC,
            mac,
            SocketAddrV4::new(PEER_IP, 1024),
            SocketAddrV4::new(self.tb.server_ip(), CLOSED_PORT),
        );
        flows(&template, FLOWS)
    }
}

/// What a worker thread shares with the main thread.
#[derive(Clone)]
pub struct Control {
    stop: Arc<AtomicBool>,
    ready: Arc<AtomicUsize>,
    count: Arc<AtomicU64>,
    turns: Arc<AtomicU64>,
}

impl Control {
    /// The device is open: the measurement may start.
    fn set_ready(&self) {
        self.ready.fetch_add(1, Ordering::Release);
    }

    fn stopped(&self) -> bool {
        self.stop.load(Ordering::Relaxed)
    }

    /// Publishes the running counts of frames and of loop turns.
    fn publish(&self, frames: u64, turns: u64) {
        self.count.store(frames, Ordering::Relaxed);
        self.turns.store(turns, Ordering::Relaxed);
    }
}

/// A worker thread and its counters.
struct Worker {
    name: &'static str,
    count: Arc<AtomicU64>,
    turns: Arc<AtomicU64>,
    handle: JoinHandle<io::Result<String>>,
}

/// One measurement's threads: started, counted, stopped.
struct Run {
    stop: Arc<AtomicBool>,
    ready: Arc<AtomicUsize>,
}

impl Run {
    fn new() -> Run {
        Run { stop: Arc::new(AtomicBool::new(false)), ready: Arc::new(AtomicUsize::new(0)) }
    }

    /// Starts `body` on a thread pinned to `core`, inside namespace `ns`.
    /// It returns a line about what its devices counted.
    fn start<F>(&self, name: &'static str, ns: String, core: usize, body: F) -> io::Result<Worker>
    where
        F: FnOnce(&Control) -> io::Result<String> + Send + 'static,
    {
        let ctl = Control {
            stop: Arc::clone(&self.stop),
            ready: Arc::clone(&self.ready),
            count: Arc::new(AtomicU64::new(0)),
            turns: Arc::new(AtomicU64::new(0)),
        };
        let (count, turns) = (Arc::clone(&ctl.count), Arc::clone(&ctl.turns));
        let handle = std::thread::Builder::new().name(format!("nic-{name}")).spawn(move || {
            pin_to_core(core);
            let _inside = testbed::enter(&ns).map_err(io::Error::other)?;
            let result = body(&ctl);
            // A worker that fails must not leave the other spinning.
            ctl.stop.store(true, Ordering::Relaxed);
            result
        })?;
        Ok(Worker { name, count, turns, handle })
    }

    /// Waits until every worker's device is open, lets the warm-up pass,
    /// counts over the window, then stops and joins the workers. The
    /// first worker's rate is the shard's, the second's the counterpart's.
    fn measure(self, workers: Vec<Worker>, window: &Window, interrupted: &AtomicBool) -> io::Result<Option<Rate>> {
        let counted = self.count(&workers, window, interrupted);
        self.stop.store(true, Ordering::Relaxed);
        let mut notes = Vec::new();
        let mut failure = None;
        for worker in workers {
            match worker.handle.join() {
                Ok(Ok(note)) => notes.push(format!("{}: {note}", worker.name)),
                Ok(Err(e)) => {
                    failure.get_or_insert(io::Error::new(e.kind(), format!("{}: {e}", worker.name)));
                }
                Err(panic) => std::panic::resume_unwind(panic),
            }
        }
        if let Some(e) = failure {
            return Err(e);
        }
        Ok(counted.map(|[shard, counterpart, per_turn]| Rate { shard, counterpart, per_turn, notes }))
    }

    /// The two workers' rates and the first one's frames per turn, or
    /// `None` if interrupted or a worker ended early (its error comes out
    /// of the join).
    fn count(&self, workers: &[Worker], window: &Window, interrupted: &AtomicBool) -> Option<[f64; 3]> {
        let deadline = Instant::now() + OPEN_TIMEOUT;
        while self.ready.load(Ordering::Acquire) < workers.len() {
            if self.stop.load(Ordering::Relaxed) || interrupted.load(Ordering::Relaxed) || Instant::now() > deadline {
                return None;
            }
            std::thread::sleep(TICK);
        }
        let sample = || {
            let counts = workers.iter().flat_map(|w| [&w.count, &w.turns]).map(|c| c.load(Ordering::Relaxed));
            (Instant::now(), counts.collect::<Vec<u64>>())
        };
        let pause = |length: Duration| {
            let end = Instant::now() + length;
            while Instant::now() < end {
                if self.stop.load(Ordering::Relaxed) || interrupted.load(Ordering::Relaxed) {
                    return false;
                }
                std::thread::sleep(TICK.min(end.saturating_duration_since(Instant::now())));
            }
            true
        };
        if !pause(window.warm_up) {
            return None;
        }
        let (t0, c0) = sample();
        if !pause(window.length) {
            return None;
        }
        let (t1, c1) = sample();
        let seconds = (t1 - t0).as_secs_f64();
        let delta = |i: usize| (c1[i] - c0[i]) as f64;
        // [shard frames, shard turns, counterpart frames, counterpart turns]
        Some([delta(0) / seconds, delta(2) / seconds, delta(0) / delta(1).max(1.0)])
    }
}

/// An AF_XDP socket on queue 0 of `interface`, in this thread's namespace.
fn open_afxdp(interface: &str) -> io::Result<AfXdp> {
    AfXdp::open(&AfXdpConfig::new(interface, 0)).map_err(io::Error::other)
}

/// Sends `frames` round-robin through an AF_XDP socket on `interface`
/// queue 0, as fast as the socket accepts them, until stopped. Counts the
/// frames the device accepted.
fn transmit_loop(ctl: &Control, interface: &str, frames: &[Vec<u8>]) -> io::Result<String> {
    let mut device = open_afxdp(interface)?;
    ctl.set_ready();
    let (mut sent, mut next, mut turns) = (0u64, 0usize, 0u64);
    while !ctl.stopped() {
        turns += 1;
        sent += device.transmit(TX_BUDGET, |buf| {
            let frame = &frames[next];
            next = (next + 1) % frames.len();
            buf[..frame.len()].copy_from_slice(frame);
            Some(frame.len())
        }) as u64;
        ctl.publish(sent, turns);
    }
    Ok(format!("{interface}: {}", describe_afxdp(&device)))
}

/// Receives from an AF_XDP socket on `interface` queue 0 until stopped,
/// counting frames and looking at none.
fn sink_loop(ctl: &Control, interface: &str) -> io::Result<String> {
    let mut device = open_afxdp(interface)?;
    ctl.set_ready();
    let (mut received, mut turns) = (0u64, 0u64);
    while !ctl.stopped() {
        turns += 1;
        received += device.receive(RX_BUDGET, |_| ()) as u64;
        ctl.publish(received, turns);
    }
    Ok(format!("{interface}: {}", describe_afxdp(&device)))
}

/// The application of the measured shard: it publishes how many frames
/// the shard has handled, once per turn of the loop (the runtime calls
/// `poll` once a turn).
struct Meter {
    ctl: Control,
    turns: u64,
}

impl App for Meter {
    fn on_event(&mut self, _: &mut Shard, _: StackInstant, _: Event) {}

    fn poll(&mut self, shard: &mut Shard, _: StackInstant) {
        self.turns += 1;
        self.ctl.publish(shard.counters().frames_in, self.turns);
    }
}

/// The server's shard loop over the device `open` makes, until stopped.
fn shard_loop<D: Device + Wait>(
    ctl: &Control,
    config: fairway_stack::Config,
    open: impl FnOnce() -> io::Result<D>,
    describe: impl FnOnce(&D) -> String,
) -> io::Result<String> {
    let mut device = open()?;
    let mut shard = Shard::new(config);
    let mut app = Meter { ctl: ctl.clone(), turns: 0 };
    ctl.set_ready();
    let stats = runtime::run(
        &mut shard,
        &mut device,
        &mut app,
        &LoopConfig { batch: SHARD_BATCH, ..LoopConfig::default() },
        &ctl.stop,
    )?;
    let c = shard.counters();
    Ok(format!(
        "{} frames in, {} udp_no_port, {} unreachables sent, {} icmp_suppressed; {} turns, {} sleeps; {}",
        c.frames_in,
        c.dropped(DropReason::UdpNoPort),
        c.unreachables_sent,
        c.dropped(DropReason::IcmpSuppressed),
        stats.turns,
        stats.sleeps,
        describe(&device)
    ))
}

/// An AF_XDP socket's counters and the kernel's, in one line.
fn describe_afxdp(device: &AfXdp) -> String {
    let AfXdpStats { rx_frames, tx_frames, tx_ring_full, tx_frames_exhausted, tx_wakeups, rx_wakeups, kernel, .. } =
        device.stats();
    let mut line = format!(
        "{} {} mode; rx {rx_frames}, tx {tx_frames} (ring full {tx_ring_full}, frames in flight \
         {tx_frames_exhausted}, wakeups {tx_wakeups}), rx wakeups {rx_wakeups}",
        device.bind_mode(),
        device.xdp_mode()
    );
    if let Some(k) = kernel {
        line.push_str(&format!(
            "; kernel: rx dropped {}, rx ring full {}, fill ring empty {}, tx ring empty {}",
            k.rx_dropped, k.rx_ring_full, k.rx_fill_ring_empty, k.tx_ring_empty
        ));
    }
    line
}
