//! [`EventQueue`]: the events a shard has for its application, in order
//! (the stack's `epoll_event` records).
//!
//! Recycled (the default), the queue is one ring that keeps its storage:
//! queueing and polling an event allocate nothing. Not recycled (the
//! ablation's baseline, [`crate::Recycle::events`] off), every event is
//! boxed on an allocation of its own when queued and freed when polled, as
//! a conventional event interface allocates a record per event.

use std::collections::VecDeque;

use crate::api::Event;

/// A FIFO of events, recycled or allocated per event.
#[derive(Debug)]
pub(crate) struct EventQueue {
    /// The events, when recycled.
    ring: VecDeque<Event>,
    /// The events, each boxed, when not.
    boxed: VecDeque<Box<Event>>,
    recycle: bool,
}

impl EventQueue {
    /// An empty queue with room for `capacity` events before it grows.
    pub(crate) fn new(capacity: usize, recycle: bool) -> EventQueue {
        let (ring, boxed) = if recycle {
            (VecDeque::with_capacity(capacity), VecDeque::new())
        } else {
            (VecDeque::new(), VecDeque::with_capacity(capacity))
        };
        EventQueue { ring, boxed, recycle }
    }

    /// Queues `event` last.
    pub(crate) fn push_back(&mut self, event: Event) {
        if self.recycle {
            self.ring.push_back(event);
        } else {
            self.boxed.push_back(Box::new(event));
        }
    }

    /// The first event, if any.
    pub(crate) fn pop_front(&mut self) -> Option<Event> {
        if self.recycle { self.ring.pop_front() } else { self.boxed.pop_front().map(|event| *event) }
    }

    /// Events queued.
    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.ring.len() + self.boxed.len()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::api::Listener;

    #[test]
    fn both_ways_keep_the_order() {
        for recycle in [true, false] {
            let mut queue = EventQueue::new(2, recycle);
            for i in 0..5 {
                queue.push_back(Event::Acceptable(Listener(i)));
            }
            assert_eq!(queue.len(), 5);
            let order: Vec<Event> = core::iter::from_fn(|| queue.pop_front()).collect();
            assert_eq!(order, (0..5).map(|i| Event::Acceptable(Listener(i))).collect::<Vec<_>>(), "{recycle}");
            assert_eq!(queue.len(), 0);
        }
    }

    #[test]
    fn only_the_unrecycled_queue_keeps_boxes() {
        let mut recycled = EventQueue::new(4, true);
        recycled.push_back(Event::Acceptable(Listener(1)));
        assert_eq!((recycled.ring.len(), recycled.boxed.len()), (1, 0));
        let mut fresh = EventQueue::new(4, false);
        fresh.push_back(Event::Acceptable(Listener(1)));
        assert_eq!((fresh.ring.len(), fresh.boxed.len()), (0, 1));
        assert_eq!(fresh.ring.capacity(), 0, "the unused ring holds no storage");
    }
}
