//! Software flow steering: frames that arrive on one shard's queue but
//! belong to another shard's flow are handed over, through bounded
//! lock-free queues, to the shard that owns them.
//!
//! A shard owns one receive queue of an interface. Hardware places each
//! flow on some queue (RSS on a NIC, the transmit hash of a veth peer) by a
//! hash we cannot reproduce; the stack decides ownership by its own
//! symmetric hash of the 4-tuple ([`fairway_stack::steering::owner`]). So:
//!
//! - a TCP or UDP frame goes to the shard that owns its 4-tuple, an ICMP one
//!   to the owner of its address pair (ports 0);
//! - an ARP frame goes to every shard: each keeps its own neighbour cache,
//!   and a reply one shard waits for may arrive on another's queue;
//! - anything else stays where it arrived (the shard counts and drops it).
//!
//! [`Fabric`] holds one inbox per shard and a shared pool of frame buffers,
//! all allocated up front: steering a frame is one copy into a recycled
//! buffer and two queue operations, never an allocation. When an inbox or
//! the pool is full the frame is dropped and counted, as a full NIC ring
//! would. [`Steered`] wraps a shard's own [`Device`] so the runtime drives it
//! like any other: `receive` yields the frames steered in from other shards
//! and those of its own queue it owns, and passes the rest on; `transmit`
//! goes straight to its own queue (any queue may send any flow's frames).
//!
//! A shard sleeping in [`Wait::wait`] must wake when another shard steers a
//! frame to it, so each inbox has an eventfd that `wait` polls beside the
//! device's own descriptor. A receive signals each shard it passed frames
//! to once, when it is done, however many frames it passed.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use crossbeam_queue::ArrayQueue;
use fairway_stack::steering::{owner, owner6};
use smoltcp::wire::{
    EthernetFrame, EthernetProtocol, IpProtocol, Ipv4Packet, Ipv6ExtHeader, Ipv6Packet, TcpPacket, UdpPacket,
};

use crate::{Device, Wait};

/// Where a frame belongs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Owner {
    /// The shard with this index.
    Shard(u16),
    /// Every shard (ARP).
    All,
    /// Whichever shard received it: not a flow of any shard (the receiving
    /// shard counts and drops what it cannot use).
    Here,
}

/// Whether `frame` is ARP or IPv6 Neighbor Discovery right after the IPv6
/// header (as RFC 4861 sends it), reading no more than the Ethernet type,
/// the IPv6 next header and the ICMPv6 type: what every shard must see
/// even with flow steering off, as [`classify`] sends to all.
fn is_neighbour(frame: &[u8]) -> bool {
    let Ok(eth) = EthernetFrame::new_checked(frame) else { return false };
    match eth.ethertype() {
        EthernetProtocol::Arp => true,
        EthernetProtocol::Ipv6 => Ipv6Packet::new_checked(eth.payload()).is_ok_and(|ip| {
            ip.next_header() == IpProtocol::Icmpv6 && ip.payload().first().is_some_and(|t| (133..=137).contains(t))
        }),
        _ => false,
    }
}

/// Decides which of `count` shards a frame belongs to.
///
/// Never panics: a frame too short or malformed to classify belongs
/// [`Owner::Here`].
#[must_use]
pub fn classify(frame: &[u8], count: u16) -> Owner {
    let Ok(eth) = EthernetFrame::new_checked(frame) else { return Owner::Here };
    match eth.ethertype() {
        EthernetProtocol::Arp => Owner::All,
        EthernetProtocol::Ipv4 => {
            let Ok(ip) = Ipv4Packet::new_checked(eth.payload()) else { return Owner::Here };
            // Fragments after the first carry no ports; the stack drops
            // fragments anyway, wherever they land.
            if ip.frag_offset() != 0 {
                return Owner::Here;
            }
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            let ports = match ip.next_header() {
                IpProtocol::Tcp => TcpPacket::new_checked(ip.payload()).ok().map(|t| (t.src_port(), t.dst_port())),
                IpProtocol::Udp => UdpPacket::new_checked(ip.payload()).ok().map(|u| (u.src_port(), u.dst_port())),
                IpProtocol::Icmp => Some((0, 0)),
                _ => None,
            };
            match ports {
                Some((sp, dp)) => Owner::Shard(owner((src, sp), (dst, dp), count)),
                None => Owner::Here,
            }
        }
        EthernetProtocol::Ipv6 => {
            let Ok(ip) = Ipv6Packet::new_checked(eth.payload()) else { return Owner::Here };
            let (src, dst) = (ip.src_addr(), ip.dst_addr());
            // Past the options and routing headers to TCP or UDP. Neighbor
            // Discovery goes to every shard, as ARP does (each keeps its
            // own neighbour cache); other ICMPv6 (echo) is for whichever
            // shard gets it, and so are fragments, which the stack drops.
            let (mut next, mut rest) = (ip.next_header(), ip.payload());
            let ports = loop {
                match next {
                    IpProtocol::HopByHop | IpProtocol::Ipv6Opts | IpProtocol::Ipv6Route => {
                        let Ok(ext) = Ipv6ExtHeader::new_checked(rest) else { break None };
                        let len = (usize::from(ext.header_len()) + 1) * 8;
                        next = ext.next_header();
                        rest = &rest[len..];
                    }
                    IpProtocol::Tcp => break TcpPacket::new_checked(rest).ok().map(|t| (t.src_port(), t.dst_port())),
                    IpProtocol::Udp => break UdpPacket::new_checked(rest).ok().map(|u| (u.src_port(), u.dst_port())),
                    // Router and neighbour solicitations and advertisements,
                    // and redirects (RFC 4861 §4).
                    IpProtocol::Icmpv6 if rest.first().is_some_and(|t| (133..=137).contains(t)) => {
                        return Owner::All;
                    }
                    _ => break None,
                }
            };
            match ports {
                Some((sp, dp)) => Owner::Shard(owner6((src, sp), (dst, dp), count)),
                None => Owner::Here,
            }
        }
        _ => Owner::Here,
    }
}

/// One steered frame: a pooled buffer and the length used.
struct Frame {
    buf: Box<[u8]>,
    len: usize,
}

/// Counters of one shard's steering, readable from any thread.
#[derive(Debug, Default)]
pub struct SteeringStats {
    /// Frames this shard received on its own queue and passed to another.
    pub steered_out: AtomicU64,
    /// Frames other shards passed to this one.
    pub steered_in: AtomicU64,
    /// ARP and Neighbor Discovery frames copied to every other shard
    /// (counted once per frame).
    pub broadcast: AtomicU64,
    /// Frames dropped because the owner's inbox was full.
    pub inbox_full: AtomicU64,
    /// Frames dropped because the buffer pool was empty.
    pub pool_empty: AtomicU64,
}

impl SteeringStats {
    /// A snapshot: (steered out, steered in, broadcast, inbox full, pool empty).
    #[must_use]
    pub fn snapshot(&self) -> SteeringCounts {
        SteeringCounts {
            steered_out: self.steered_out.load(Ordering::Relaxed),
            steered_in: self.steered_in.load(Ordering::Relaxed),
            broadcast: self.broadcast.load(Ordering::Relaxed),
            inbox_full: self.inbox_full.load(Ordering::Relaxed),
            pool_empty: self.pool_empty.load(Ordering::Relaxed),
        }
    }
}

/// A snapshot of [`SteeringStats`].
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SteeringCounts {
    /// Frames received on this shard's queue and passed to another shard.
    pub steered_out: u64,
    /// Frames other shards passed to this one.
    pub steered_in: u64,
    /// ARP frames copied to every other shard.
    pub broadcast: u64,
    /// Frames dropped: the owner's inbox was full.
    pub inbox_full: u64,
    /// Frames dropped: no free buffer in the pool.
    pub pool_empty: u64,
}

/// A shard's inbox: steered frames and the eventfd that wakes it.
struct Inbox {
    frames: ArrayQueue<Frame>,
    wake: OwnedFd,
    stats: SteeringStats,
}

/// The queues between the shards of one interface.
pub struct Fabric {
    inboxes: Vec<Inbox>,
    pool: ArrayQueue<Box<[u8]>>,
    frame_len: usize,
}

impl core::fmt::Debug for Fabric {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Fabric")
            .field("shards", &self.inboxes.len())
            .field("free_buffers", &self.pool.len())
            .field("frame_len", &self.frame_len)
            .finish()
    }
}

impl Fabric {
    /// A fabric for `shards` shards, each inbox holding up to `depth`
    /// frames of at most `frame_len` bytes; the pool holds `shards × depth`
    /// buffers, allocated now.
    ///
    /// # Errors
    ///
    /// When an eventfd cannot be created (out of file descriptors).
    ///
    /// # Panics
    ///
    /// When `shards` is 0 or above `u16::MAX`, or `depth` is 0.
    pub fn new(shards: usize, depth: usize, frame_len: usize) -> io::Result<Arc<Fabric>> {
        assert!(shards > 0 && shards <= usize::from(u16::MAX), "a fabric needs 1 to 65535 shards");
        assert!(depth > 0, "inboxes need room for at least one frame");
        let mut inboxes = Vec::with_capacity(shards);
        for _ in 0..shards {
            inboxes.push(Inbox { frames: ArrayQueue::new(depth), wake: eventfd()?, stats: SteeringStats::default() });
        }
        let pool = ArrayQueue::new(shards * depth);
        for _ in 0..shards * depth {
            let _ = pool.push(vec![0u8; frame_len].into_boxed_slice());
        }
        Ok(Arc::new(Fabric { inboxes, pool, frame_len }))
    }

    /// How many shards share the fabric.
    #[must_use]
    pub fn shards(&self) -> u16 {
        self.inboxes.len() as u16
    }

    /// The steering counters of shard `index`.
    ///
    /// # Panics
    ///
    /// When `index` is not a shard of this fabric.
    #[must_use]
    pub fn stats(&self, index: u16) -> &SteeringStats {
        &self.inboxes[usize::from(index)].stats
    }

    /// Ends shard `index`'s sleep in [`Steered::wait`] (its application
    /// has work that another thread woke), through the eventfd that
    /// steered frames signal. Does nothing for a shard the fabric lacks.
    pub fn wake(&self, index: u16) {
        if let Some(inbox) = self.inboxes.get(usize::from(index)) {
            signal(&inbox.wake);
        }
    }

    /// Copies `frame` into shard `to`'s inbox. Returns whether it was queued
    /// (a full inbox or pool drops it, counted on `from`); the caller wakes
    /// `to` once for the whole batch it passes ([`Wakes`]).
    fn pass(&self, from: u16, to: u16, frame: &[u8]) -> bool {
        let counters = &self.inboxes[usize::from(from)].stats;
        let Some(mut buf) = self.pool.pop() else {
            counters.pool_empty.fetch_add(1, Ordering::Relaxed);
            return false;
        };
        let len = frame.len().min(buf.len());
        buf[..len].copy_from_slice(&frame[..len]);
        let inbox = &self.inboxes[usize::from(to)];
        if let Err(Frame { buf, .. }) = inbox.frames.push(Frame { buf, len }) {
            let _ = self.pool.push(buf);
            counters.inbox_full.fetch_add(1, Ordering::Relaxed);
            return false;
        }
        inbox.stats.steered_in.fetch_add(1, Ordering::Relaxed);
        true
    }
}

/// The shards one receive passed frames to, each woken once when the
/// receive is done: one eventfd write per shard and batch, not per frame.
#[derive(Debug)]
struct Wakes {
    /// Per shard, whether it is in `due`.
    marked: Vec<bool>,
    due: Vec<u16>,
}

impl Wakes {
    fn new(shards: u16) -> Wakes {
        Wakes { marked: vec![false; usize::from(shards)], due: Vec::with_capacity(usize::from(shards)) }
    }

    fn mark(&mut self, shard: u16) {
        if !std::mem::replace(&mut self.marked[usize::from(shard)], true) {
            self.due.push(shard);
        }
    }

    /// Wakes every marked shard, once.
    fn send(&mut self, fabric: &Fabric) {
        for shard in self.due.drain(..) {
            self.marked[usize::from(shard)] = false;
            signal(&fabric.inboxes[usize::from(shard)].wake);
        }
    }
}

/// A shard's device behind the fabric: see the module documentation.
pub struct Steered<D> {
    device: D,
    fabric: Arc<Fabric>,
    index: u16,
    wakes: Wakes,
    /// Another descriptor whose readiness ends the wait (the shard's own
    /// outbound sockets' epoll): see [`Steered::also_wake_on`].
    also: Option<RawFd>,
    /// Whether frames are steered at all: see [`Steered::without_steering`].
    steer: bool,
}

impl<D: core::fmt::Debug> core::fmt::Debug for Steered<D> {
    fn fmt(&self, f: &mut core::fmt::Formatter<'_>) -> core::fmt::Result {
        f.debug_struct("Steered").field("device", &self.device).field("index", &self.index).finish()
    }
}

impl<D> Steered<D> {
    /// Shard `index`'s view of `device` on `fabric`.
    ///
    /// # Panics
    ///
    /// When `index` is not a shard of `fabric`.
    pub fn new(device: D, fabric: Arc<Fabric>, index: u16) -> Steered<D> {
        assert!(index < fabric.shards(), "shard {index} of a {}-shard fabric", fabric.shards());
        let wakes = Wakes::new(fabric.shards());
        Steered { device, fabric, index, wakes, also: None, steer: true }
    }

    /// Turns flow steering off (`--steering off`, the ablation's baseline):
    /// `receive` hands over every frame of the shard's own queue, whichever
    /// shard owns its flow, without classifying it by flow. What a NIC
    /// whose RSS hash agreed with ours would leave the shards with; a
    /// passive connection is served by the shard whose queue brought its
    /// SYN, since a NIC or veth puts every frame of a flow on one queue.
    /// ARP and Neighbor Discovery frames still reach every shard, as a
    /// kernel keeps one neighbour table for all its cores: a NIC or veth
    /// brings them to one queue, and without them the other shards could
    /// answer no client (every SYN on their queues would wait for a
    /// retransmission that happens to land elsewhere: measured, 65
    /// `Connection: close` requests a second on a two-queue veth).
    #[must_use]
    pub fn without_steering(mut self) -> Steered<D> {
        self.steer = false;
        self
    }

    /// Whether frames are steered (not [`Steered::without_steering`]).
    #[must_use]
    pub fn steers(&self) -> bool {
        self.steer
    }

    /// Makes [`Wait::wait`] return also when `fd` is readable: the epoll
    /// of sockets the shard opened itself (upstream connections), so their
    /// readiness ends its sleep as its queue's does (also in a reactor of
    /// the driver's: [`Wait::wake_sources`]). The caller keeps `fd` open as
    /// long as this device lives.
    pub fn also_wake_on(&mut self, fd: RawFd) {
        self.also = Some(fd);
    }

    /// The wrapped device.
    pub fn device(&self) -> &D {
        &self.device
    }

    /// The wrapped device, mutably.
    pub fn device_mut(&mut self) -> &mut D {
        &mut self.device
    }

    /// This shard's steering counters.
    #[must_use]
    pub fn stats(&self) -> SteeringCounts {
        self.fabric.stats(self.index).snapshot()
    }

    fn inbox(&self) -> &Inbox {
        &self.fabric.inboxes[usize::from(self.index)]
    }
}

impl<D: Device> Device for Steered<D> {
    fn max_frame_len(&self) -> usize {
        self.device.max_frame_len()
    }

    /// Frames steered in from other shards first (they have waited longest),
    /// then this shard's own queue. Frames there that another shard owns are
    /// passed on and not handed over, so the queue is read until `budget`
    /// frames were handed over or it is empty, as the trait promises.
    fn receive<F: FnMut(&[u8])>(&mut self, budget: usize, mut on_frame: F) -> usize {
        let mut handed = 0;
        let inbox = &self.fabric.inboxes[usize::from(self.index)];
        while handed < budget {
            let Some(frame) = inbox.frames.pop() else { break };
            on_frame(&frame.buf[..frame.len]);
            let _ = self.fabric.pool.push(frame.buf);
            handed += 1;
        }
        let (fabric, index, wakes) = (&self.fabric, self.index, &mut self.wakes);
        let count = fabric.shards();
        let stats = &fabric.inboxes[usize::from(index)].stats;
        if !self.steer {
            // Flows stay where they arrived; only ARP and ND are shared.
            handed += self.device.receive(budget - handed, |frame| {
                if count > 1 && is_neighbour(frame) {
                    for other in (0..count).filter(|&o| o != index) {
                        if fabric.pass(index, other, frame) {
                            wakes.mark(other);
                        }
                    }
                    stats.broadcast.fetch_add(1, Ordering::Relaxed);
                }
                on_frame(frame);
            });
            wakes.send(fabric);
            return handed;
        }
        while handed < budget {
            let want = budget - handed;
            let read = self.device.receive(want, |frame| match classify(frame, count) {
                Owner::Shard(owner) if owner != index => {
                    if fabric.pass(index, owner, frame) {
                        stats.steered_out.fetch_add(1, Ordering::Relaxed);
                        wakes.mark(owner);
                    }
                }
                Owner::All => {
                    for other in (0..count).filter(|&o| o != index) {
                        if fabric.pass(index, other, frame) {
                            wakes.mark(other);
                        }
                    }
                    if count > 1 {
                        stats.broadcast.fetch_add(1, Ordering::Relaxed);
                    }
                    handed += 1;
                    on_frame(frame);
                }
                Owner::Shard(_) | Owner::Here => {
                    handed += 1;
                    on_frame(frame);
                }
            });
            if read < want {
                break; // the device's queue is empty
            }
        }
        wakes.send(fabric);
        handed
    }

    fn transmit<F: FnMut(&mut [u8]) -> Option<usize>>(&mut self, budget: usize, fill: F) -> usize {
        self.device.transmit(budget, fill)
    }

    fn offload_tx_checksums(&mut self) -> bool {
        self.device.offload_tx_checksums()
    }
}

impl<D: Wait + AsRawFd> Wait for Steered<D> {
    /// Sleeps until the device or the inbox has frames, or [`Fabric::wake`]
    /// was called. A frame already in the inbox returns at once; so does a
    /// signal sent before the call (the eventfd is drained after the wait,
    /// not before, so a wake-up just before it is never lost: at worst one
    /// wait returns early).
    fn wait(&mut self, timeout: Option<Duration>) -> io::Result<()> {
        let inbox = self.inbox();
        if !inbox.frames.is_empty() {
            return Ok(());
        }
        // A negative descriptor is skipped by poll(2).
        let mut fds = [
            libc::pollfd { fd: self.device.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: inbox.wake.as_raw_fd(), events: libc::POLLIN, revents: 0 },
            libc::pollfd { fd: self.also.unwrap_or(-1), events: libc::POLLIN, revents: 0 },
        ];
        poll(&mut fds, timeout)?;
        if fds[1].revents != 0 {
            drain(&inbox.wake);
        }
        if fds[0].revents != 0 {
            // Let the device do its own part (AF_XDP wakes the kernel's
            // fill-ring processing in its wait): a zero timeout returns at once.
            self.device.wait(Some(Duration::ZERO))?;
        }
        Ok(())
    }

    /// The device's own, the inbox's eventfd (frames steered here, and
    /// [`Fabric::wake`]), and the one [`also_wake_on`](Self::also_wake_on)
    /// named.
    fn wake_sources<'a>(&'a self, sources: &mut Vec<BorrowedFd<'a>>) {
        self.device.wake_sources(sources);
        sources.push(self.inbox().wake.as_fd());
        if let Some(fd) = self.also {
            // SAFETY: `also_wake_on`'s contract: the descriptor stays open
            // while this device lives, which outlives the borrow.
            sources.push(unsafe { BorrowedFd::borrow_raw(fd) });
        }
    }

    /// False while steered frames wait in the inbox, or as the device says.
    fn before_sleep(&mut self) -> io::Result<bool> {
        if !self.inbox().frames.is_empty() {
            return Ok(false);
        }
        self.device.before_sleep()
    }

    /// The inbox's eventfd is read back to zero: a signal sent after this
    /// (a frame steered meanwhile) wakes the next sleep. A steered frame
    /// is never lost to it, since the turn that follows looks at the inbox.
    fn after_sleep(&mut self) {
        drain(&self.inbox().wake);
        self.device.after_sleep();
    }
}

impl<D: AsRawFd> AsRawFd for Steered<D> {
    fn as_raw_fd(&self) -> RawFd {
        self.device.as_raw_fd()
    }
}

fn eventfd() -> io::Result<OwnedFd> {
    // SAFETY: eventfd takes no pointers; a non-negative result is a new
    // descriptor that nothing else owns.
    let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just created and is owned by nobody else.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn signal(fd: &OwnedFd) {
    let one: u64 = 1;
    // SAFETY: writes 8 bytes from a live u64 to an eventfd we own. A full
    // counter (EAGAIN) already means "wake up", so the result is ignored.
    let _ = unsafe { libc::write(fd.as_raw_fd(), (&raw const one).cast(), 8) };
}

fn drain(fd: &OwnedFd) {
    let mut value: u64 = 0;
    // SAFETY: reads 8 bytes into a live u64 from a non-blocking eventfd we
    // own; EAGAIN (nothing signalled) is the common, harmless case.
    let _ = unsafe { libc::read(fd.as_raw_fd(), (&raw mut value).cast(), 8) };
}

/// `poll(2)` with a microsecond-precise timeout; `EINTR` is a normal return.
fn poll(fds: &mut [libc::pollfd], timeout: Option<Duration>) -> io::Result<()> {
    let ts = timeout.map(|t| libc::timespec {
        tv_sec: t.as_secs().min(i64::MAX as u64) as libc::time_t,
        tv_nsec: libc::c_long::from(t.subsec_nanos() as i32),
    });
    let ts_ptr = ts.as_ref().map_or(core::ptr::null(), |t| t as *const libc::timespec);
    // SAFETY: `fds` is a live, exclusively borrowed slice of pollfd of the
    // length passed; `ts_ptr` is null or points at `ts`, alive for the call;
    // no signal mask is passed.
    let r = unsafe { libc::ppoll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, ts_ptr, core::ptr::null()) };
    if r < 0 {
        let err = io::Error::last_os_error();
        if err.kind() != io::ErrorKind::Interrupted {
            return Err(err);
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use core::net::Ipv4Addr;
    use smoltcp::phy::ChecksumCapabilities;
    use smoltcp::wire::{
        ArpOperation, ArpPacket, ArpRepr, EthernetAddress, EthernetRepr, Ipv4Repr, TcpRepr, TcpSeqNumber,
    };
    use std::collections::VecDeque;

    const SERVER: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
    const CLIENT: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 10);

    /// A device whose receive queue the test fills and whose transmissions
    /// it reads.
    #[derive(Debug, Default)]
    struct Queue {
        rx: VecDeque<Vec<u8>>,
        tx: Vec<Vec<u8>>,
    }

    impl Device for Queue {
        fn max_frame_len(&self) -> usize {
            1514
        }
        fn receive<F: FnMut(&[u8])>(&mut self, budget: usize, mut on_frame: F) -> usize {
            let mut n = 0;
            while n < budget {
                let Some(f) = self.rx.pop_front() else { break };
                on_frame(&f);
                n += 1;
            }
            n
        }
        fn transmit<F: FnMut(&mut [u8]) -> Option<usize>>(&mut self, budget: usize, mut fill: F) -> usize {
            let mut buf = [0u8; 1514];
            let mut n = 0;
            while n < budget {
                let Some(len) = fill(&mut buf) else { break };
                self.tx.push(buf[..len].to_vec());
                n += 1;
            }
            n
        }
    }

    fn eth(payload_len: usize, ethertype: EthernetProtocol, emit: impl FnOnce(&mut [u8])) -> Vec<u8> {
        let repr = EthernetRepr {
            src_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
            dst_addr: EthernetAddress([2, 0, 0, 0, 0, 1]),
            ethertype,
        };
        let mut frame = vec![0u8; repr.buffer_len() + payload_len];
        let mut e = EthernetFrame::new_unchecked(&mut frame[..]);
        repr.emit(&mut e);
        emit(e.payload_mut());
        frame
    }

    fn tcp(src: (Ipv4Addr, u16), dst: (Ipv4Addr, u16)) -> Vec<u8> {
        let tcp = TcpRepr {
            src_port: src.1,
            dst_port: dst.1,
            control: smoltcp::wire::TcpControl::Syn,
            seq_number: TcpSeqNumber(1),
            ack_number: None,
            window_len: 1000,
            window_scale: None,
            max_seg_size: None,
            sack_permitted: false,
            sack_ranges: [None; 3],
            timestamp: None,
            payload: &[],
        };
        let ip = Ipv4Repr {
            src_addr: src.0,
            dst_addr: dst.0,
            next_header: IpProtocol::Tcp,
            payload_len: tcp.buffer_len(),
            hop_limit: 64,
        };
        let caps = ChecksumCapabilities::default();
        eth(ip.buffer_len() + tcp.buffer_len(), EthernetProtocol::Ipv4, |buf| {
            let mut p = Ipv4Packet::new_unchecked(buf);
            ip.emit(&mut p, &caps);
            let mut t = TcpPacket::new_unchecked(p.payload_mut());
            tcp.emit(&mut t, &src.0.into(), &dst.0.into(), &caps);
        })
    }

    /// An IPv6 frame from `src` to `dst` carrying `next` and `payload`.
    fn ipv6(src: core::net::Ipv6Addr, dst: core::net::Ipv6Addr, next: IpProtocol, payload: &[u8]) -> Vec<u8> {
        let ip = smoltcp::wire::Ipv6Repr {
            src_addr: src,
            dst_addr: dst,
            next_header: next,
            payload_len: payload.len(),
            hop_limit: 64,
        };
        eth(ip.buffer_len() + payload.len(), EthernetProtocol::Ipv6, |buf| {
            ip.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..40]));
            buf[40..].copy_from_slice(payload);
        })
    }

    #[test]
    fn ipv6_flows_follow_the_stacks_ipv6_hash_past_extension_headers() {
        let (client, server) = ("fd77::a".parse().unwrap(), "fd77::1".parse().unwrap());
        // A bare 20-byte header: classify reads no more than its ports.
        let segment = |sp: u16, dp: u16| {
            let mut h = [sp.to_be_bytes(), dp.to_be_bytes()].concat();
            h.extend_from_slice(&[0, 0, 0, 1, 0, 0, 0, 0, 0x50, 0x02, 0x10, 0, 0, 0, 0, 0]);
            h
        };
        for count in [1u16, 2, 3, 8] {
            for port in 40000..40100 {
                let expected = Owner::Shard(owner6((client, port), (server, 80), count));
                let to_server = ipv6(client, server, IpProtocol::Tcp, &segment(port, 80));
                let from_server = ipv6(server, client, IpProtocol::Tcp, &segment(80, port));
                assert_eq!(classify(&to_server, count), expected);
                assert_eq!(classify(&from_server, count), expected);
                // Behind a Destination Options header (8 bytes of padding).
                let options = [vec![u8::from(IpProtocol::Tcp), 0, 1, 4, 0, 0, 0, 0], segment(port, 80)].concat();
                assert_eq!(classify(&ipv6(client, server, IpProtocol::Ipv6Opts, &options), count), expected);
            }
        }
        // Neighbor Discovery goes to every shard, as ARP does; echo to any.
        assert_eq!(classify(&ipv6(client, server, IpProtocol::Icmpv6, &[135, 0, 0, 0]), 4), Owner::All);
        assert_eq!(classify(&ipv6(client, server, IpProtocol::Icmpv6, &[136, 0, 0, 0]), 4), Owner::All);
        assert_eq!(classify(&ipv6(client, server, IpProtocol::Icmpv6, &[128, 0, 0, 0]), 4), Owner::Here);
        // Cut anywhere, or with a header longer than the packet: no panic.
        let frame = ipv6(client, server, IpProtocol::Ipv6Opts, &[6, 9, 0, 0, 0, 0, 0, 0, 0, 80, 0, 80]);
        for len in 0..=frame.len() {
            let _ = classify(&frame[..len], 4);
        }
    }

    fn arp() -> Vec<u8> {
        let repr = ArpRepr::EthernetIpv4 {
            operation: ArpOperation::Request,
            source_hardware_addr: EthernetAddress([2, 0, 0, 0, 0, 2]),
            source_protocol_addr: CLIENT,
            target_hardware_addr: EthernetAddress([0; 6]),
            target_protocol_addr: SERVER,
        };
        eth(repr.buffer_len(), EthernetProtocol::Arp, |buf| repr.emit(&mut ArpPacket::new_unchecked(buf)))
    }

    /// A client port whose flow to the server's port 80 shard `shard` of
    /// `count` owns.
    fn port_owned_by(shard: u16, count: u16) -> u16 {
        (40000..).find(|&p| owner((CLIENT, p), (SERVER, 80), count) == shard).unwrap()
    }

    fn collect<D: Device>(d: &mut D) -> Vec<Vec<u8>> {
        let mut out = Vec::new();
        d.receive(64, |f| out.push(f.to_vec()));
        out
    }

    #[test]
    fn classify_follows_the_stacks_hash_and_is_symmetric() {
        for count in [1u16, 2, 3, 8] {
            for port in 40000..40100 {
                let to_server = tcp((CLIENT, port), (SERVER, 80));
                let from_server = tcp((SERVER, 80), (CLIENT, port));
                let expected = Owner::Shard(owner((CLIENT, port), (SERVER, 80), count));
                assert_eq!(classify(&to_server, count), expected);
                assert_eq!(classify(&from_server, count), expected);
            }
        }
        assert_eq!(classify(&arp(), 4), Owner::All);
    }

    #[test]
    fn classify_never_panics_on_garbage() {
        let frame = tcp((CLIENT, 40000), (SERVER, 80));
        for len in 0..frame.len() {
            let _ = classify(&frame[..len], 4);
        }
        for byte in 0..frame.len() {
            let mut f = frame.clone();
            f[byte] ^= 0xff;
            let _ = classify(&f, 4);
        }
        assert_eq!(classify(&[], 2), Owner::Here);
    }

    #[test]
    fn a_frame_on_the_wrong_queue_reaches_its_owner() {
        let fabric = Fabric::new(2, 16, 1514).unwrap();
        let mut shard0 = Steered::new(Queue::default(), fabric.clone(), 0);
        let mut shard1 = Steered::new(Queue::default(), fabric.clone(), 1);
        let mine = tcp((CLIENT, port_owned_by(0, 2)), (SERVER, 80));
        let theirs = tcp((CLIENT, port_owned_by(1, 2)), (SERVER, 80));
        shard0.device_mut().rx.extend([mine.clone(), theirs.clone()]);
        assert_eq!(collect(&mut shard0), vec![mine]);
        assert_eq!(collect(&mut shard1), vec![theirs]);
        assert_eq!(shard0.stats().steered_out, 1);
        assert_eq!(shard1.stats().steered_in, 1);
        // The buffer went back to the pool.
        assert_eq!(fabric.pool.len(), 32);
    }

    #[test]
    fn without_steering_a_shard_keeps_what_its_queue_brings() {
        let fabric = Fabric::new(2, 16, 1514).unwrap();
        let mut shard0 = Steered::new(Queue::default(), fabric.clone(), 0).without_steering();
        let mut shard1 = Steered::new(Queue::default(), fabric.clone(), 1).without_steering();
        assert!(!shard0.steers() && Steered::new(Queue::default(), fabric.clone(), 0).steers());
        let mine = tcp((CLIENT, port_owned_by(0, 2)), (SERVER, 80));
        let theirs = tcp((CLIENT, port_owned_by(1, 2)), (SERVER, 80));
        let (c6, s6) = ("fd77::2".parse().unwrap(), "fd77::1".parse().unwrap());
        let advert = ipv6(c6, s6, IpProtocol::Icmpv6, &[136, 0, 0, 0]);
        let echo = ipv6(c6, s6, IpProtocol::Icmpv6, &[128, 0, 0, 0]);
        shard0.device_mut().rx.extend([mine.clone(), theirs.clone(), arp(), advert.clone(), echo.clone()]);
        // Shard 1's flow stays on shard 0's queue; ARP and the neighbour
        // advertisement reach both, as one neighbour table would.
        assert_eq!(collect(&mut shard0), vec![mine, theirs, arp(), advert.clone(), echo]);
        assert_eq!(shard0.stats(), SteeringCounts { broadcast: 2, ..SteeringCounts::default() });
        assert_eq!(collect(&mut shard1), vec![arp(), advert]);
        assert_eq!(fabric.pool.len(), 32, "the steering buffers came back");
    }

    /// What an inbox's eventfd has counted since it was last read.
    fn signals(fabric: &Fabric, shard: u16) -> u64 {
        let mut value: u64 = 0;
        // SAFETY: reads 8 bytes into a live u64 from a non-blocking eventfd
        // the fabric owns; EAGAIN leaves it 0.
        let _ = unsafe { libc::read(fabric.inboxes[usize::from(shard)].wake.as_raw_fd(), (&raw mut value).cast(), 8) };
        value
    }

    #[test]
    fn a_batch_steered_to_a_shard_wakes_it_once() {
        let fabric = Fabric::new(3, 16, 1514).unwrap();
        let mut shard0 = Steered::new(Queue::default(), fabric.clone(), 0);
        let to_one = tcp((CLIENT, port_owned_by(1, 3)), (SERVER, 80));
        let to_two = tcp((CLIENT, port_owned_by(2, 3)), (SERVER, 80));
        shard0.device_mut().rx.extend([to_one.clone(), to_two.clone(), to_one.clone(), arp(), to_one]);
        assert_eq!(collect(&mut shard0), vec![arp()]);
        assert_eq!(shard0.stats().steered_out, 4);
        assert_eq!((signals(&fabric, 1), signals(&fabric, 2)), (1, 1), "one wake-up per shard for the batch");
        assert_eq!(signals(&fabric, 0), 0, "the receiving shard is not woken");
        // The next batch wakes again.
        shard0.device_mut().rx.push_back(tcp((CLIENT, port_owned_by(2, 3)), (SERVER, 80)));
        collect(&mut shard0);
        assert_eq!((signals(&fabric, 1), signals(&fabric, 2)), (0, 1));
    }

    #[test]
    fn arp_reaches_every_shard() {
        let fabric = Fabric::new(3, 4, 1514).unwrap();
        let mut shards: Vec<_> = (0..3).map(|i| Steered::new(Queue::default(), fabric.clone(), i)).collect();
        shards[1].device_mut().rx.push_back(arp());
        assert_eq!(collect(&mut shards[1]), vec![arp()]);
        assert_eq!(collect(&mut shards[0]), vec![arp()]);
        assert_eq!(collect(&mut shards[2]), vec![arp()]);
        assert_eq!(shards[1].stats().broadcast, 1);
    }

    #[test]
    fn a_full_inbox_drops_and_counts_without_losing_buffers() {
        let fabric = Fabric::new(2, 2, 1514).unwrap();
        let mut shard0 = Steered::new(Queue::default(), fabric.clone(), 0);
        let mut shard1 = Steered::new(Queue::default(), fabric.clone(), 1);
        let theirs = tcp((CLIENT, port_owned_by(1, 2)), (SERVER, 80));
        shard0.device_mut().rx.extend(std::iter::repeat_n(theirs.clone(), 5));
        assert_eq!(collect(&mut shard0), Vec::<Vec<u8>>::new());
        let c = shard0.stats();
        assert_eq!((c.steered_out, c.inbox_full), (2, 3));
        assert_eq!(collect(&mut shard1).len(), 2);
        assert_eq!(fabric.pool.len(), 4);
    }

    #[test]
    fn the_budget_bounds_what_is_handed_over() {
        let fabric = Fabric::new(2, 16, 1514).unwrap();
        let mut shard0 = Steered::new(Queue::default(), fabric.clone(), 0);
        let mine = tcp((CLIENT, port_owned_by(0, 2)), (SERVER, 80));
        shard0.device_mut().rx.extend(std::iter::repeat_n(mine, 5));
        let mut n = 0;
        assert_eq!(shard0.receive(3, |_| n += 1), 3);
        assert_eq!(n, 3);
        assert_eq!(shard0.receive(10, |_| n += 1), 2);
        // Transmit goes to the shard's own queue.
        assert_eq!(shard0.transmit(1, |buf| Some(buf[..60].len())), 1);
        assert_eq!(shard0.device().tx.len(), 1);
    }

    #[test]
    fn one_shard_keeps_everything() {
        let fabric = Fabric::new(1, 4, 1514).unwrap();
        let mut only = Steered::new(Queue::default(), fabric, 0);
        only.device_mut().rx.extend([arp(), tcp((CLIENT, 40000), (SERVER, 80))]);
        assert_eq!(collect(&mut only).len(), 2);
        assert_eq!(only.stats(), SteeringCounts::default());
    }

    /// A device that never has a frame: its descriptor is an eventfd
    /// nobody signals.
    #[derive(Debug)]
    struct Idle(OwnedFd);
    impl Device for Idle {
        fn max_frame_len(&self) -> usize {
            1514
        }
        fn receive<F: FnMut(&[u8])>(&mut self, _: usize, _: F) -> usize {
            0
        }
        fn transmit<F: FnMut(&mut [u8]) -> Option<usize>>(&mut self, _: usize, _: F) -> usize {
            0
        }
    }
    impl Wait for Idle {
        fn wait(&mut self, _: Option<Duration>) -> io::Result<()> {
            Ok(())
        }
    }
    impl AsRawFd for Idle {
        fn as_raw_fd(&self) -> RawFd {
            self.0.as_raw_fd()
        }
    }

    #[test]
    fn a_wake_ends_the_wait_even_when_sent_before_it() {
        let fabric = Fabric::new(2, 4, 1514).unwrap();
        let mut sleeper = Steered::new(Idle(eventfd().unwrap()), fabric.clone(), 1);
        let started = std::time::Instant::now();
        fabric.wake(1);
        sleeper.wait(Some(Duration::from_secs(10))).unwrap();
        assert!(started.elapsed() < Duration::from_secs(5), "a wake sent before the wait is not lost");
        let waiter = std::thread::spawn(move || sleeper.wait(Some(Duration::from_secs(10))).unwrap());
        std::thread::sleep(Duration::from_millis(50));
        fabric.wake(1);
        fabric.wake(7); // no such shard: nothing happens
        waiter.join().unwrap();
        assert!(started.elapsed() < Duration::from_secs(5), "woken from another thread, not by the timeout");
    }

    #[test]
    fn a_steered_frame_wakes_a_waiting_shard() {
        let fabric = Fabric::new(2, 4, 1514).unwrap();
        // An eventfd nobody signals: the device never becomes readable.
        let mut sleeper = Steered::new(Idle(eventfd().unwrap()), fabric.clone(), 1);
        let mut sender = Steered::new(Queue::default(), fabric, 0);
        let started = std::time::Instant::now();
        let waiter = std::thread::spawn(move || {
            sleeper.wait(Some(Duration::from_secs(10))).unwrap();
            let mut got = 0;
            sleeper.receive(8, |_| got += 1);
            got
        });
        std::thread::sleep(Duration::from_millis(50));
        sender.device_mut().rx.push_back(tcp((CLIENT, port_owned_by(1, 2)), (SERVER, 80)));
        assert!(collect(&mut sender).is_empty());
        assert_eq!(waiter.join().unwrap(), 1);
        assert!(started.elapsed() < Duration::from_secs(5), "woken by the steered frame, not the timeout");
    }
}
