//! The window-control driver over a real connection: caps set from a
//! policy's decision, lifted when the flow goes idle or is untracked.

use super::harness::*;
use crate::fairness::{Capacity, Direction, Driver, DriverConfig, EqualRate, EqualRateConfig, Policy, wire_factor};
use crate::time::Duration;

/// An established connection whose handshake took 20 ms (the SYN-ACK's
/// round trip is the flow's min-RTT).
fn established_after(rtt: Duration) -> T {
    let mut t = T::listening();
    t.send(t.seg_in().seq(IRS).no_ack().syn().mss(PEER_MSS).window(8192));
    t.iss = t.expected_iss(REMOTE_PORT);
    assert_eq!(t.segments().len(), 1, "the SYN-ACK");
    t.advance(rtt);
    t.send(t.seg_in().window(8192));
    t.events();
    t.handle = t.shard.accept(t.listener.unwrap());
    t
}

fn equal_rate(bps: u64) -> Driver {
    Driver::new(
        Policy::EqualRate(EqualRate::new(EqualRateConfig::default())),
        DriverConfig::new(Capacity::Configured(bps)),
    )
}

#[test]
fn an_upload_gets_its_share_times_rtt_and_loses_it_when_untracked() {
    let mut t = established_after(Duration::from_millis(20));
    let h = t.h();
    assert_eq!(t.shard.flow(h).unwrap().min_rtt, Some(Duration::from_millis(20)));
    let mut driver = equal_rate(1_000_000);
    driver.track(t.now, h, Direction::Upload, 1.0);
    assert!(driver.poll_at() <= t.now, "a newcomer is served at once");
    driver.run(t.now, &mut t.shard);
    // 125 kB/s of wire, as payload, over 20 ms + the 2 ms common queue.
    let mss = u32::from(t.shard.flow(h).unwrap().mss);
    // Whole segments: rounded up.
    let expected = ((125_000.0 / wire_factor(mss) * 0.022) as u32).div_ceil(mss) * mss;
    assert_eq!(t.shard.flow(h).unwrap().rcv_wnd_cap, Some(expected));
    assert_eq!(driver.poll_at(), t.now + Duration::from_millis(5));
    driver.untrack(&mut t.shard, h);
    assert_eq!(t.shard.flow(h).unwrap().rcv_wnd_cap, None);
    assert!(driver.is_empty());
}

#[test]
fn an_idle_flow_holds_no_share_and_a_closed_one_is_forgotten() {
    let mut t = established_after(Duration::from_millis(10));
    let h = t.h();
    let mut driver = equal_rate(10_000_000);
    driver.track(t.now, h, Direction::Download, 1.0);
    driver.run(t.now, &mut t.shard);
    let stats = t.shard.flow(h).unwrap();
    assert_eq!(stats.pacing_cap, Some(1_250_000));
    assert!(stats.cwnd_cap.is_some());
    // Nothing delivered for over a second: the caps are lifted.
    t.advance(Duration::from_millis(1500));
    driver.run(t.now, &mut t.shard);
    let stats = t.shard.flow(h).unwrap();
    assert_eq!((stats.pacing_cap, stats.cwnd_cap), (None, None));
    assert_eq!(driver.flows().next().map(|(_, sample, _)| sample), Some(None));
    t.shard.abort(h);
    t.shard.close(h);
    driver.run(t.now, &mut t.shard);
    assert!(driver.is_empty());
}

#[test]
fn the_driver_tells_the_shard_a_newcomers_share_for_careful_resume() {
    let mut t = established_after(Duration::from_millis(10));
    let h = t.h();
    let mut driver = equal_rate(10_000_000);
    driver.track(t.now, h, Direction::Download, 1.0);
    driver.run(t.now, &mut t.shard);
    // One active flow: a newcomer would get half of 1.25 MB/s of wire, as payload.
    let expected = (1_250_000.0 / wire_factor(1448) / 2.0) as u64;
    assert_eq!(t.shard.fast_start_share(), Some(expected));
    // Without a policy there is no share to bound a jump.
    let mut off = Driver::new(Policy::Off, DriverConfig::new(Capacity::Configured(10_000_000)));
    off.run(t.now, &mut t.shard);
    assert_eq!(t.shard.fast_start_share(), None);
}
