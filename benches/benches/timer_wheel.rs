//! The timer wheel under the loads a shard puts on it: arming and cancelling
//! many timers, letting them all expire, and moving one timer (an RTO re-armed
//! on every ACK) while many others are pending.

use std::hint::black_box;

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use fairway_stack::time::{Duration, Instant};
use fairway_stack::timer_wheel::TimerWheel;

const TIMERS: u32 = 100_000;

/// Deadline offsets spread over 0..`span_micros` (xorshift, fixed seed).
fn offsets(span_micros: u64) -> Vec<Duration> {
    let mut x = 0x9e37_79b9_7f4a_7c15u64;
    (0..TIMERS)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            Duration::from_micros(x % span_micros)
        })
        .collect()
}

fn schedule_cancel(c: &mut Criterion) {
    let mut group = c.benchmark_group("timer_wheel");
    group.throughput(Throughput::Elements(u64::from(TIMERS)));
    // Offsets up to a minute reach every level a TCP timer uses.
    let offsets = offsets(60_000_000);
    let now = Instant::from_secs(1);
    let mut wheel = TimerWheel::new(now);
    group.bench_function("schedule_cancel_100k", |b| {
        b.iter(|| {
            for (id, &offset) in (0..TIMERS).zip(&offsets) {
                wheel.schedule(id, black_box(now + offset));
            }
            for id in 0..TIMERS {
                black_box(wheel.cancel(id));
            }
        })
    });
    group.finish();
}

fn schedule_expire(c: &mut Criterion) {
    let mut group = c.benchmark_group("timer_wheel");
    group.throughput(Throughput::Elements(u64::from(TIMERS)));
    // Deadlines within a second, drained every millisecond as a busy shard
    // would.
    let offsets = offsets(1_000_000);
    let mut now = Instant::from_secs(1);
    let mut wheel = TimerWheel::new(now);
    group.bench_function("schedule_expire_100k", |b| {
        b.iter(|| {
            for (id, &offset) in (0..TIMERS).zip(&offsets) {
                wheel.schedule(id, now + offset);
            }
            let mut fired = 0u32;
            while !wheel.is_empty() {
                now += Duration::from_millis(1);
                while let Some(id) = wheel.pop_expired(now) {
                    black_box(id);
                    fired += 1;
                }
            }
            assert_eq!(fired, TIMERS);
        })
    });
    group.finish();
}

fn reschedule(c: &mut Criterion) {
    let mut group = c.benchmark_group("timer_wheel");
    let offsets = offsets(60_000_000);
    let now = Instant::from_secs(1);
    let mut wheel = TimerWheel::new(now);
    for (id, &offset) in (0..TIMERS).zip(&offsets) {
        wheel.schedule(id, now + offset);
    }
    // The moved timer walks through 1000 distinct deadlines around 200 ms
    // (an RTO), so it changes slot and often level.
    let mut step = 0u64;
    group.throughput(Throughput::Elements(1));
    group.bench_function("reschedule_existing_id", |b| {
        b.iter(|| {
            step = (step + 1) % 1_000;
            let at = now + Duration::from_micros(200_000 + step * 97);
            wheel.schedule(black_box(TIMERS / 2), black_box(at));
        })
    });
    group.finish();
}

criterion_group!(benches, schedule_cancel, schedule_expire, reschedule);
criterion_main!(benches);
