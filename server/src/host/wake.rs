//! Wake-ups as data: one queue per shard of the things that asked to run
//! again (a connection whose handler deferred its answer, an async task),
//! and the [`Waker`]s that put them there.
//!
//! A waker is made once per connection slot or task and reused, so waking
//! allocates nothing (a clone is a reference count). Each waker remembers
//! whether it is queued, so a thing woken many times before the shard gets
//! to it is queued once; the owner clears the mark ([`IdWaker::take`])
//! before it runs the thing, so a wake during that run queues it again.
//!
//! Wakes normally come from the shard's own thread, while its loop runs;
//! a wake from another thread must also end the loop's sleep. The loop
//! says when it is about to sleep ([`WakeQueue::about_to_sleep`]); a push
//! that finds it asleep calls the queue's notifier (the shard's eventfd,
//! or mio's waker), and only then: the shard's own wakes cost no syscall.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::task::{Wake, Waker};

/// Ends a shard loop's sleep from another thread.
pub type Notifier = Box<dyn Fn() + Send + Sync>;

/// Tags a queued id as an async task's rather than a connection slot's.
pub const TASK: u32 = 1 << 31;

/// One shard's queue of woken ids.
pub struct WakeQueue {
    ids: Mutex<Vec<u32>>,
    pending: AtomicBool,
    sleeping: AtomicBool,
    notify: Option<Notifier>,
}

impl std::fmt::Debug for WakeQueue {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("WakeQueue").field("pending", &self.pending.load(Ordering::Relaxed)).finish_non_exhaustive()
    }
}

impl WakeQueue {
    /// A queue whose sleeping loop `notify` wakes (none: a wake from
    /// another thread waits for the loop's next turn, at most its
    /// `max_sleep`).
    #[must_use]
    pub fn new(notify: Option<Notifier>) -> Arc<WakeQueue> {
        Arc::new(WakeQueue {
            ids: Mutex::new(Vec::with_capacity(64)),
            pending: AtomicBool::new(false),
            sleeping: AtomicBool::new(false),
            notify,
        })
    }

    /// Queues `id`.
    pub fn push(&self, id: u32) {
        self.ids.lock().unwrap_or_else(PoisonError::into_inner).push(id);
        self.pending.store(true, Ordering::SeqCst);
        if self.sleeping.load(Ordering::SeqCst)
            && let Some(notify) = &self.notify
        {
            notify();
        }
    }

    /// Whether ids are queued.
    #[must_use]
    pub fn is_pending(&self) -> bool {
        self.pending.load(Ordering::SeqCst)
    }

    /// Moves every queued id to the end of `out`, oldest first. Keeps both
    /// vectors' room, so steady state allocates nothing.
    pub fn drain_into(&self, out: &mut Vec<u32>) {
        if !self.pending.swap(false, Ordering::SeqCst) {
            return;
        }
        out.append(&mut self.ids.lock().unwrap_or_else(PoisonError::into_inner));
    }

    /// The loop is about to sleep: from now on a push notifies. Returns
    /// false if something is queued already (then it must not sleep).
    pub fn about_to_sleep(&self) -> bool {
        self.sleeping.store(true, Ordering::SeqCst);
        !self.pending.load(Ordering::SeqCst)
    }

    /// The loop is awake again: pushes need not notify.
    pub fn awake(&self) {
        self.sleeping.store(false, Ordering::Relaxed);
    }
}

/// The waker of one id: see the [module documentation](self).
#[derive(Debug)]
pub struct IdWaker {
    id: u32,
    queued: AtomicBool,
    queue: Arc<WakeQueue>,
}

impl IdWaker {
    /// A waker that queues `id` on `queue`, and the [`Waker`] made of it.
    #[must_use]
    pub fn new(queue: &Arc<WakeQueue>, id: u32) -> (Arc<IdWaker>, Waker) {
        let this = Arc::new(IdWaker { id, queued: AtomicBool::new(false), queue: Arc::clone(queue) });
        let waker = Waker::from(Arc::clone(&this));
        (this, waker)
    }

    /// Clears the queued mark before the id is run; returns whether it was
    /// set (the id was woken since the last take).
    pub fn take(&self) -> bool {
        self.queued.swap(false, Ordering::AcqRel)
    }
}

impl Wake for IdWaker {
    fn wake(self: Arc<Self>) {
        self.wake_by_ref();
    }

    fn wake_by_ref(self: &Arc<Self>) {
        if !self.queued.swap(true, Ordering::AcqRel) {
            self.queue.push(self.id);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::AtomicUsize;

    use super::*;

    #[test]
    fn a_thing_woken_twice_is_queued_once_until_taken() {
        let queue = WakeQueue::new(None);
        let (a, waker_a) = IdWaker::new(&queue, 3);
        let (_b, waker_b) = IdWaker::new(&queue, TASK | 4);
        waker_a.wake_by_ref();
        let clone = waker_a.clone();
        clone.wake();
        waker_b.wake_by_ref();
        let mut out = Vec::new();
        queue.drain_into(&mut out);
        assert_eq!(out, [3, TASK | 4]);
        assert!(!queue.is_pending());
        waker_a.wake_by_ref();
        queue.drain_into(&mut out);
        assert_eq!(out, [3, TASK | 4], "not taken yet: not queued again");
        assert!(a.take());
        waker_a.wake_by_ref();
        queue.drain_into(&mut out);
        assert_eq!(out, [3, TASK | 4, 3]);
    }

    #[test]
    fn only_a_sleeping_loop_is_notified() {
        let notified = Arc::new(AtomicUsize::new(0));
        let count = Arc::clone(&notified);
        let queue = WakeQueue::new(Some(Box::new(move || {
            count.fetch_add(1, Ordering::SeqCst);
        })));
        queue.push(1);
        assert_eq!(notified.load(Ordering::SeqCst), 0, "awake: no syscall");
        assert!(!queue.about_to_sleep(), "something is queued: do not sleep");
        let mut out = Vec::new();
        queue.drain_into(&mut out);
        assert!(queue.about_to_sleep());
        std::thread::scope(|s| {
            s.spawn(|| queue.push(2));
        });
        assert_eq!(notified.load(Ordering::SeqCst), 1, "a wake from another thread ends the sleep");
        queue.awake();
        queue.push(3);
        assert_eq!(notified.load(Ordering::SeqCst), 1);
    }
}
