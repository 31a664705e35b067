//! [`Emulator`]: the two directions' threads, started together and stopped
//! together.

use std::io;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::config::EmulatorConfig;
use super::packet_socket::{Interface, PacketSocket};
use super::stats::{DirectionStats, SharedStats};
use super::sys::Waker;
use super::worker::Worker;
use crate::sim::LinkConfig;
use crate::sim::link::LinkModel;

/// Kernel buffer of each receive socket: ~40 ms of 1 Gbit/s in full-size
/// frames, so that a worker busy elsewhere for a while loses nothing.
const RCVBUF: usize = 8 << 20;
const SNDBUF: usize = 4 << 20;

/// An Ethernet header and one VLAN tag, on top of the MTU.
const L2_OVERHEAD: usize = 14 + 4;

/// Why the emulator could not start or stopped on its own. Each displays as
/// one line that says what to do.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum LinkemError {
    /// Raw sockets need `CAP_NET_RAW`.
    #[error("opening an AF_PACKET socket needs CAP_NET_RAW: run fairway-linkem as root")]
    NotPermitted,
    /// No interface of that name in the emulator's network namespace.
    #[error("no interface named `{0}` in this network namespace (see `ip link`)")]
    NoSuchInterface(String),
    /// The interface exists but is administratively down.
    #[error("interface `{0}` is down: bring it up with `ip link set {0} up`")]
    InterfaceDown(String),
    /// Both ends are the same interface.
    #[error("both ends are `{0}`: the emulator bridges two different interfaces")]
    SameInterface(String),
    /// A system call failed.
    #[error("{context}: {source}")]
    Io {
        /// What was being done.
        context: String,
        /// What the kernel said.
        source: io::Error,
    },
    /// A direction's thread stopped with an error.
    #[error("direction {direction} stopped: {source}")]
    Worker {
        /// `a->b` or `b->a`.
        direction: &'static str,
        /// What the kernel said.
        source: io::Error,
    },
    /// A direction's thread panicked (a bug).
    #[error("direction {0} panicked")]
    Panicked(&'static str),
}

/// The final counters, from [`Emulator::stop`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Report {
    /// Frames from A to B.
    pub a_to_b: DirectionStats,
    /// Frames from B to A.
    pub b_to_a: DirectionStats,
    /// How long the emulator ran.
    pub elapsed: Duration,
}

/// A running link emulator: one thread per direction (see the [module
/// documentation](super)). Dropping it stops it, discarding the counters.
#[derive(Debug)]
pub struct Emulator {
    directions: Vec<Direction>,
    stop: Arc<AtomicBool>,
    waker: Arc<Waker>,
    started: Instant,
}

#[derive(Debug)]
struct Direction {
    name: &'static str,
    shared: Arc<SharedStats>,
    pending: Arc<PendingLink>,
    thread: Option<JoinHandle<io::Result<DirectionStats>>>,
}

/// A configuration handed to a running direction: its worker takes it at
/// the top of its next turn (before it reads more frames), so frames
/// offered from then on meet the new link; those already on the wire keep
/// their departure times.
#[derive(Debug, Default)]
pub(crate) struct PendingLink {
    waiting: AtomicBool,
    config: Mutex<Option<LinkConfig>>,
}

impl PendingLink {
    fn set(&self, config: LinkConfig) {
        *self.config.lock().unwrap_or_else(PoisonError::into_inner) = Some(config);
        self.waiting.store(true, Ordering::Release);
    }

    /// The configuration set since the last call, if any (one atomic load
    /// when there is none).
    pub(crate) fn take(&self) -> Option<LinkConfig> {
        if !self.waiting.swap(false, Ordering::AcqRel) {
            return None;
        }
        self.config.lock().unwrap_or_else(PoisonError::into_inner).take()
    }
}

impl Emulator {
    /// Opens and binds the sockets on both interfaces, then starts both
    /// directions. Frames flow as soon as this returns.
    ///
    /// # Errors
    ///
    /// See [`LinkemError`]: not root, no such interface, interface down,
    /// the same interface twice, or a system call that failed.
    ///
    /// # Panics
    ///
    /// If a probability in a [`LinkConfig`](crate::sim::LinkConfig) is outside
    /// `[0, 1]`.
    pub fn start(config: &EmulatorConfig) -> Result<Emulator, LinkemError> {
        if config.a == config.b {
            return Err(LinkemError::SameInterface(config.a.clone()));
        }
        let probe = PacketSocket::open().map_err(|e| match e.raw_os_error() {
            Some(libc::EPERM) | Some(libc::EACCES) => LinkemError::NotPermitted,
            _ => io_error("opening an AF_PACKET socket")(e),
        })?;
        let find = |name: &str| -> Result<Interface, LinkemError> {
            let interface = Interface::find(name, &probe)
                .map_err(io_error(&format!("reading the settings of interface `{name}`")))?
                .ok_or_else(|| LinkemError::NoSuchInterface(name.to_owned()))?;
            if !interface.up {
                return Err(LinkemError::InterfaceDown(name.to_owned()));
            }
            Ok(interface)
        };
        let (a, b) = (find(&config.a)?, find(&config.b)?);
        drop(probe);

        let stop = Arc::new(AtomicBool::new(false));
        let waker = Arc::new(Waker::new().map_err(io_error("creating an eventfd"))?);
        let origin = Instant::now();
        let mut workers = Vec::new();
        for (index, name, from, to, link) in [(0, "a->b", &a, &b, config.a_to_b), (1, "b->a", &b, &a, config.b_to_a)] {
            let rx = PacketSocket::receiver(from.index, RCVBUF)
                .map_err(io_error(&format!("opening a receive socket on `{}`", from.name)))?;
            let tx = PacketSocket::sender(to.index, SNDBUF)
                .map_err(io_error(&format!("opening a send socket on `{}`", to.name)))?;
            let shared = Arc::new(SharedStats::default());
            let pending = Arc::new(PendingLink::default());
            let worker = Worker {
                ingress: from.clone(),
                rx,
                tx,
                model: LinkModel::new(link, config.seed, index),
                egress_max_frame: to.mtu + L2_OVERHEAD,
                spin: config.spin,
                realtime_priority: config.realtime_priority,
                max_buffer_bytes: config.max_buffer_bytes,
                origin,
                shared: shared.clone(),
                pending: pending.clone(),
                stop: stop.clone(),
                waker: waker.clone(),
            };
            workers.push((name, shared, pending, worker));
        }

        let mut emulator = Emulator { directions: Vec::new(), stop, waker, started: origin };
        for (name, shared, pending, worker) in workers {
            let thread = std::thread::Builder::new()
                .name(format!("linkem {name}"))
                .spawn(move || worker.run())
                .map_err(io_error("starting a thread"))?;
            emulator.directions.push(Direction { name, shared, pending, thread: Some(thread) });
        }
        Ok(emulator)
    }

    /// The counters so far: `[a->b, b->a]`.
    pub fn stats(&self) -> [DirectionStats; 2] {
        [self.directions[0].shared.snapshot(), self.directions[1].shared.snapshot()]
    }

    /// Applies new link configurations while running (a loss burst, the
    /// end of one): each direction takes its own at the top of its next
    /// turn. Frames already on the wire keep their departure times, frames
    /// already queued their place; the random streams continue, and the
    /// counters go on adding up.
    ///
    /// # Panics
    ///
    /// If a probability in either configuration is outside `[0, 1]`.
    #[track_caller]
    pub fn reconfigure(&self, a_to_b: LinkConfig, b_to_a: LinkConfig) {
        a_to_b.validate();
        b_to_a.validate();
        self.directions[0].pending.set(a_to_b);
        self.directions[1].pending.set(b_to_a);
    }

    /// How long the emulator has been running.
    pub fn elapsed(&self) -> Duration {
        self.started.elapsed()
    }

    /// Whether a direction has stopped on its own (an error, reported by
    /// [`stop`](Emulator::stop)).
    pub fn failed(&self) -> bool {
        self.directions.iter().any(|d| d.thread.as_ref().is_some_and(JoinHandle::is_finished))
    }

    /// Stops both directions and returns the final counters. Frames still
    /// in flight are discarded (and counted).
    ///
    /// # Errors
    ///
    /// The first direction that had stopped with an error.
    pub fn stop(mut self) -> Result<Report, LinkemError> {
        let stats = self.shut_down();
        let [a_to_b, b_to_a] = stats;
        Ok(Report { a_to_b: a_to_b?, b_to_a: b_to_a?, elapsed: self.started.elapsed() })
    }

    fn shut_down(&mut self) -> [Result<DirectionStats, LinkemError>; 2] {
        self.stop.store(true, Ordering::Release);
        // If the eventfd cannot be written, the workers still notice the
        // flag at their next frame or departure.
        let _ = self.waker.wake();
        let mut results = self.directions.iter_mut().map(|d| {
            let name = d.name;
            match d.thread.take().map(JoinHandle::join) {
                Some(Ok(Ok(stats))) => Ok(stats),
                Some(Ok(Err(source))) => Err(LinkemError::Worker { direction: name, source }),
                Some(Err(_)) => Err(LinkemError::Panicked(name)),
                None => Ok(d.shared.snapshot()),
            }
        });
        let first = results.next().unwrap_or(Ok(DirectionStats::default()));
        let second = results.next().unwrap_or(Ok(DirectionStats::default()));
        [first, second]
    }
}

impl Drop for Emulator {
    fn drop(&mut self) {
        if self.directions.iter().any(|d| d.thread.is_some()) {
            let _ = self.shut_down();
        }
    }
}

fn io_error(context: &str) -> impl FnOnce(io::Error) -> LinkemError + '_ {
    move |source| LinkemError::Io { context: context.to_owned(), source }
}
