//! The simulated network allocates nothing per frame once warm.
//!
//! A counting global allocator (per thread, so parallel tests do not disturb
//! each other) wraps the system one; a request/response workload runs
//! through an impaired dumbbell, and the steady state must not allocate.

use std::alloc::{GlobalAlloc, Layout, System};
use std::cell::Cell;

use fairway_nic::Device;
use fairway_nic::sim::{HostId, LinkConfig, Network, Side};
use fairway_stack::time::Duration;

struct CountingAllocator;

thread_local! {
    static ALLOCATIONS: Cell<u64> = const { Cell::new(0) };
}

fn count() {
    // `try_with`: the thread-local is gone while a thread is torn down.
    let _ = ALLOCATIONS.try_with(|n| n.set(n.get() + 1));
}

fn allocations() -> u64 {
    ALLOCATIONS.with(Cell::get)
}

// SAFETY: every method forwards to `System` with the caller's arguments
// unchanged; counting touches only a const-initialised thread-local `Cell`,
// which neither allocates nor re-enters the allocator.
unsafe impl GlobalAlloc for CountingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded contract.
        unsafe { System.alloc(layout) }
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        count();
        // SAFETY: forwarded contract.
        unsafe { System.alloc_zeroed(layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        count();
        // SAFETY: forwarded contract.
        unsafe { System.realloc(ptr, layout, new_size) }
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded contract.
        unsafe { System.dealloc(ptr, layout) }
    }
}

#[global_allocator]
static GLOBAL: CountingAllocator = CountingAllocator;

const MAX_FRAME: usize = 1514;
const RESPONSE_FRAMES: usize = 6;

fn mac(i: u8) -> [u8; 6] {
    [0x02, 0, 0, 0, 0, i]
}

struct Workload {
    net: Network,
    clients: [HostId; 2],
    server: HostId,
    responses_received: u64,
}

impl Workload {
    fn new(impaired: bool) -> Workload {
        let mut bottleneck =
            LinkConfig::ideal().with_bandwidth_mbps(100).with_delay(Duration::from_millis(2)).with_queue_bytes(30_000);
        let mut access = LinkConfig::ideal().with_bandwidth_mbps(1000).with_delay(Duration::from_micros(50));
        if impaired {
            bottleneck = bottleneck
                .with_queue_bytes(12_000)
                .with_loss(0.01)
                .with_reorder(0.05, Duration::from_micros(500))
                .with_duplicate(0.01)
                .with_corrupt(0.01);
            access = access.with_loss(0.005).with_duplicate(0.005);
        }
        let mut net = Network::new(11, MAX_FRAME, bottleneck, bottleneck);
        let clients = [net.add_host(Side::Left, mac(1), access), net.add_host(Side::Left, mac(2), access)];
        let server = net.add_host(Side::Right, mac(9), access.with_delay(Duration::from_micros(20)));
        Workload { net, clients, server, responses_received: 0 }
    }

    /// Each client sends a request (and, now and then, a broadcast); the
    /// server answers each request with a burst; run until idle.
    fn round(&mut self, round: u32) {
        for (i, &client) in self.clients.iter().enumerate() {
            let src = mac(1 + i as u8);
            let broadcast = round.is_multiple_of(16);
            self.net.port(client).transmit(1, |buf| {
                buf[..6].copy_from_slice(&mac(9));
                buf[6..12].copy_from_slice(&src);
                buf[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
                buf[14..18].copy_from_slice(&round.to_be_bytes());
                Some(200)
            });
            if broadcast {
                self.net.port(client).transmit(1, |buf| {
                    buf[..6].copy_from_slice(&[0xff; 6]);
                    buf[6..12].copy_from_slice(&src);
                    Some(60)
                });
            }
        }
        while let Some(t) = self.net.next_event() {
            self.net.advance(t);
            self.serve();
            for client in self.clients {
                let mut responses = 0;
                self.net.port(client).receive(64, |f| {
                    // Responses come from the server; broadcasts from the
                    // other client.
                    responses += u64::from(f[6..12] == mac(9));
                });
                self.responses_received += responses;
            }
        }
        self.net.advance(self.net.now() + Duration::from_micros(100));
    }

    fn serve(&mut self) {
        // Requests are answered from a fixed-size array: no allocation here
        // either.
        let mut requesters = [[0u8; 6]; 16];
        let mut n = 0;
        self.net.port(self.server).receive(requesters.len(), |f| {
            if f.len() == 200 {
                requesters[n].copy_from_slice(&f[6..12]);
                n += 1;
            }
        });
        for dst in &requesters[..n] {
            let mut k = 0;
            self.net.port(self.server).transmit(RESPONSE_FRAMES, |buf| {
                buf[..6].copy_from_slice(dst);
                buf[6..12].copy_from_slice(&mac(9));
                buf[12..14].copy_from_slice(&0x88b5u16.to_be_bytes());
                k += 1;
                Some(if k == RESPONSE_FRAMES { 600 } else { MAX_FRAME })
            });
        }
    }
}

/// Rounds are identical (but for a broadcast every 16th), so the first ones
/// reach the peak number of frames alive; after them nothing may allocate.
#[test]
fn a_warm_network_allocates_nothing_per_frame() {
    let mut w = Workload::new(false);
    for round in 0..100 {
        w.round(round);
    }
    let hops_before = w.net.frame_hops();
    let before = allocations();
    for round in 100..10_100 {
        w.round(round);
    }
    let allocated = allocations() - before;
    let hops = w.net.frame_hops() - hops_before;
    assert!(hops > 400_000, "the workload moved only {hops} frame hops");
    assert_eq!(w.responses_received, 2 * 10_100 * RESPONSE_FRAMES as u64);
    assert_eq!(allocated, 0, "{allocated} allocations over {hops} frame hops");
}

/// With impairments the peak wanders (a duplicated request doubles a
/// response burst), so warming up cannot prove much; reserving room for the
/// most frames ever alive at once makes the whole run allocation-free, from
/// the first frame.
#[test]
fn a_reserved_network_allocates_nothing_even_under_impairments() {
    let mut w = Workload::new(true);
    w.net.reserve_frames(256);
    let before = allocations();
    for round in 0..10_000 {
        w.round(round);
    }
    let allocated = allocations() - before;
    let stats = w.net.stats();
    let t = stats.total;
    assert!(t.lost > 0 && t.duplicated > 0 && t.reordered > 0 && t.corrupted > 0 && t.queue_drops > 0, "{t:?}");
    assert!(w.responses_received > 100_000);
    assert_eq!(allocated, 0, "{allocated} allocations over {} frame hops", t.frames_offered);
}

trait TotalOffered {
    fn frame_hops(&self) -> u64;
}

impl TotalOffered for Network {
    /// Frame hops so far, without `stats()` (which allocates its per-host
    /// table).
    fn frame_hops(&self) -> u64 {
        use fairway_nic::sim::LinkId;
        let bottleneck =
            [Side::Left, Side::Right].map(|from| self.link_stats(LinkId::Bottleneck { from }).frames_offered);
        let access = self.hosts().map(|h| {
            self.link_stats(LinkId::Uplink(h)).frames_offered + self.link_stats(LinkId::Downlink(h)).frames_offered
        });
        bottleneck.iter().sum::<u64>() + access.sum::<u64>()
    }
}
