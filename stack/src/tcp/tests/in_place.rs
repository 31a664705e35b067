//! The in-place API: `send_with` writes into the send ring, `recv_with`
//! reads from the receive ring, each without a buffer of the caller's.

use super::harness::*;
use crate::api::{Event, RecvError, SendError};

/// The send ring's size in the test configuration.
const TX_BUFFER: usize = 4 * RX_BUFFER;

fn pattern(from: usize, len: usize) -> Vec<u8> {
    (from..from + len).map(|i| (i % 251) as u8).collect()
}

#[test]
fn send_with_queues_what_the_writer_says_it_wrote() {
    let mut t = T::established();
    let s = t.iss.wrapping_add(1);
    let mut offered = 0;
    let n = t.shard.send_with(t.h(), |free| {
        offered = free.len();
        free[..300].copy_from_slice(&pattern(0, 300));
        300
    });
    assert_eq!((n, offered), (Ok(300), TX_BUFFER));
    // A writer that claims more than it was lent is held to the slice.
    let n = t.shard.send_with(t.h(), |free| {
        free[..200].copy_from_slice(&pattern(300, 200));
        assert_eq!(free.len(), TX_BUFFER - 300);
        200
    });
    assert_eq!(n, Ok(200));
    assert_eq!(t.shard.send_with(t.h(), |_| 0), Ok(0), "writing nothing is not an error");
    t.recv(&[t.seg_out().data(&pattern(0, 500)).psh()]);
    t.send(t.seg_in().ack(s + 500));
    t.recv_nothing();
    let flow = t.shard.flow(t.h()).unwrap();
    assert_eq!((flow.bytes_sent, flow.bytes_acked, flow.send_queue), (500, 500, 0));
}

#[test]
fn send_with_clamps_a_count_beyond_the_slice() {
    let mut t = T::established();
    let n = t.shard.send_with(t.h(), |free| {
        free.fill(7);
        free.len() + 1000
    });
    assert_eq!(n, Ok(TX_BUFFER));
    assert_eq!(t.shard.flow(t.h()).unwrap().send_queue, TX_BUFFER);
}

#[test]
fn a_full_ring_is_not_lent_and_signals_writable_when_acked() {
    let mut t = T::established();
    let s = t.iss.wrapping_add(1);
    assert_eq!(t.shard.send_with(t.h(), |free| free.len()), Ok(TX_BUFFER));
    let mut called = false;
    assert_eq!(
        t.shard.send_with(t.h(), |_| {
            called = true;
            0
        }),
        Err(SendError::WouldBlock)
    );
    assert!(!called, "the writer is not called without room");
    assert!(!t.segments().is_empty());
    t.send(t.seg_in().ack(s + 1000));
    assert_eq!(t.event(), Some(Event::Writable(t.h())));
    let mut offered = 0;
    assert_eq!(
        t.shard.send_with(t.h(), |free| {
            offered = free.len();
            free.len()
        }),
        Ok(1000)
    );
    assert_eq!(offered, 1000, "exactly the room the ACK freed");
}

#[test]
fn send_with_wraps_around_the_ring_in_two_calls_and_sends_in_order() {
    let mut t = T::established();
    let s = t.iss.wrapping_add(1);
    // 10,000 queued, the first 5,000 acknowledged: the free space runs from
    // the queue's end at 10,000 to the ring's end, then from its start to
    // 5,000.
    assert_eq!(t.shard.send(t.h(), &pattern(0, 10_000)), Ok(10_000));
    let mut sent: Vec<u8> = t.segments().iter().flat_map(|seg| seg.payload.clone()).collect();
    t.send(t.seg_in().ack(s + 5000));
    sent.extend(t.segments().iter().flat_map(|seg| seg.payload.clone()));
    let mut slices = Vec::new();
    let mut written = 10_000;
    while let Ok(n) = t.shard.send_with(t.h(), |free| {
        slices.push(free.len());
        free.copy_from_slice(&pattern(written, free.len()));
        free.len()
    }) {
        written += n;
    }
    assert_eq!(slices, [TX_BUFFER - 10_000, 5000], "one contiguous part per call");
    assert_eq!(written, 5000 + TX_BUFFER);
    // Everything goes out byte-exact across the wrap as the peer acks it.
    while sent.len() < written {
        t.send(t.seg_in().ack(s + sent.len() as u32).window(u16::MAX));
        for seg in t.segments() {
            assert_eq!(seg.seq, s + sent.len() as u32);
            sent.extend_from_slice(&seg.payload);
        }
    }
    assert_eq!(sent, pattern(0, written));
}

#[test]
fn a_fin_follows_the_data_written_in_place() {
    let mut t = T::established();
    let s = t.iss.wrapping_add(1);
    let data = pattern(0, 1500);
    assert_eq!(
        t.shard.send_with(t.h(), |free| {
            free[..1500].copy_from_slice(&data);
            1500
        }),
        Ok(1500)
    );
    t.shard.shutdown(t.h());
    t.recv(&[t.seg_out().data(&data[..1000]), t.seg_out().seq(s + 1000).data(&data[1000..]).psh().fin()]);
    assert_eq!(t.shard.send_with(t.h(), |free| free.len()), Err(SendError::Shutdown));
}

#[test]
fn recv_with_consumes_what_the_reader_took_and_keeps_the_rest() {
    let mut t = T::established();
    t.send(t.seg_in().data(b"0123456789"));
    let mut seen = Vec::new();
    let n = t.shard.recv_with(t.h(), |data| {
        seen = data.to_vec();
        4
    });
    assert_eq!((n, &seen[..]), (Ok(4), &b"0123456789"[..]));
    // A reader claiming more than it was lent consumes only what is there.
    assert_eq!(t.shard.recv_with(t.h(), |data| data.len() + 50), Ok(6));
    assert_eq!(t.shard.recv_with(t.h(), |_| unreachable!("nothing to lend")), Err(RecvError::WouldBlock));
}

#[test]
fn recv_with_lends_a_wrapped_ring_in_two_parts_then_the_end_of_stream() {
    let mut t = T::established();
    // 3,000 in, 2,500 read: the queue starts at 2,500 of the 4,096-byte
    // ring; 2,000 more wrap at its end.
    for i in 0..3 {
        t.send(t.seg_in().seq(IRS + 1 + 1000 * i).data(&pattern(1000 * i as usize, 1000)));
    }
    assert_eq!(t.shard.recv_with(t.h(), |data| data.len().min(2500)), Ok(2500));
    t.send(t.seg_in().seq(IRS + 3001).data(&pattern(3000, 1000)));
    t.send(t.seg_in().seq(IRS + 4001).data(&pattern(4000, 1000)).fin());
    let mut parts = Vec::new();
    let mut got = Vec::new();
    loop {
        match t.shard.recv_with(t.h(), |data| {
            parts.push(data.len());
            got.extend_from_slice(data);
            data.len()
        }) {
            Ok(0) => break,
            Ok(_) => {}
            Err(e) => panic!("recv_with: {e:?}"),
        }
    }
    assert_eq!(parts, [RX_BUFFER - 2500, 2500 - (RX_BUFFER - 2500)], "the ring's two parts, then the end");
    assert_eq!(got, pattern(2500, 2500));
}
