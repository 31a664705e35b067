//! The per-shard executor: tasks in slots, run to completion on the shard's
//! thread (`!Send` futures welcome), each woken by a [`Waker`] made once
//! per slot and reused by the slot's later tasks ([`IdWaker`]), so waking
//! and re-polling allocate nothing; spawning allocates the task's box.
//!
//! A task's waker puts its id on the shard's [`WakeQueue`] (tagged
//! [`TASK`]); the host hands it back ([`Executor::woken`]) and the
//! executor polls it on its next [`run`](Executor::run). A task is polled
//! under `catch_unwind`: one that panics is dropped (its streams close),
//! the others go on.

use std::collections::VecDeque;
use std::future::Future;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use crate::host::wake::{IdWaker, TASK, WakeQueue};

/// A task's future.
pub(crate) type Task = Pin<Box<dyn Future<Output = ()>>>;

/// A task slot's waker, kept for the slot's next tasks.
struct SlotWaker {
    mark: Arc<IdWaker>,
    waker: Waker,
}

/// One shard's tasks. See the [module documentation](self).
pub(crate) struct Executor {
    tasks: Vec<Option<Task>>,
    wakers: Vec<SlotWaker>,
    free: Vec<u32>,
    ready: VecDeque<u32>,
    live: usize,
    panicked: u64,
    wakes: Arc<WakeQueue>,
}

impl Executor {
    /// An executor whose wakers push to `wakes`.
    pub(crate) fn new(wakes: Arc<WakeQueue>) -> Executor {
        Executor {
            tasks: Vec::new(),
            wakers: Vec::new(),
            free: Vec::new(),
            ready: VecDeque::new(),
            live: 0,
            panicked: 0,
            wakes,
        }
    }

    /// Adds a task; it is polled on the next [`run`](Self::run).
    pub(crate) fn spawn(&mut self, task: Task) {
        let id = match self.free.pop() {
            Some(id) => id,
            None => {
                let id = self.tasks.len() as u32;
                let (mark, waker) = IdWaker::new(&self.wakes, TASK | id);
                self.tasks.push(None);
                self.wakers.push(SlotWaker { mark, waker });
                id
            }
        };
        self.tasks[id as usize] = Some(task);
        self.ready.push_back(id);
        self.live += 1;
    }

    /// Task `id`'s waker was woken.
    pub(crate) fn woken(&mut self, id: u32) {
        let i = id as usize;
        if self.tasks.get(i).is_some_and(Option::is_some) && self.wakers[i].mark.take() {
            self.ready.push_back(id);
        }
    }

    /// Whether a task is ready to be polled.
    pub(crate) fn has_ready(&self) -> bool {
        !self.ready.is_empty()
    }

    /// Tasks alive.
    pub(crate) fn live(&self) -> usize {
        self.live
    }

    /// Tasks that panicked (and were dropped).
    pub(crate) fn panicked(&self) -> u64 {
        self.panicked
    }

    /// Polls the tasks that are ready now (not those woken while they
    /// run: they wait for the next call, so a task that wakes itself
    /// cannot starve the shard's I/O). `spawned` is asked after each poll
    /// for tasks the polled one spawned.
    pub(crate) fn run(&mut self, spawned: &mut dyn FnMut() -> Option<Task>) {
        for _ in 0..self.ready.len() {
            let Some(id) = self.ready.pop_front() else { break };
            let i = id as usize;
            let Some(task) = self.tasks.get_mut(i).and_then(Option::as_mut) else { continue };
            let slot = &self.wakers[i];
            // A wake from now on queues the task again.
            slot.mark.take();
            let mut cx = Context::from_waker(&slot.waker);
            let done = match catch_unwind(AssertUnwindSafe(|| task.as_mut().poll(&mut cx))) {
                Ok(Poll::Ready(())) => true,
                Ok(Poll::Pending) => false,
                Err(_) => {
                    self.panicked += 1;
                    tracing::error!("a task panicked; it is dropped and the shard goes on");
                    true
                }
            };
            if done {
                let task = self.tasks[i].take();
                // Its drop closes what it held; a panic there is its own.
                let _ = catch_unwind(AssertUnwindSafe(move || drop(task)));
                self.free.push(id);
                self.live -= 1;
            }
            while let Some(task) = spawned() {
                self.spawn(task);
            }
        }
    }

    /// Drops every task (the grace period is over).
    pub(crate) fn clear(&mut self) {
        for (i, task) in self.tasks.iter_mut().enumerate() {
            if let Some(task) = task.take() {
                let _ = catch_unwind(AssertUnwindSafe(move || drop(task)));
                self.free.push(i as u32);
            }
        }
        self.ready.clear();
        self.live = 0;
    }
}

#[cfg(test)]
mod tests {
    use std::cell::Cell;
    use std::rc::Rc;

    use super::*;

    /// Ready on its second poll, after waking itself on the first.
    struct Twice(Rc<Cell<u32>>);

    impl Future for Twice {
        type Output = ();
        fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            self.0.set(self.0.get() + 1);
            if self.0.get() == 1 {
                cx.waker().wake_by_ref();
                Poll::Pending
            } else {
                Poll::Ready(())
            }
        }
    }

    fn deliver(queue: &WakeQueue, executor: &mut Executor) {
        let mut ids = Vec::new();
        queue.drain_into(&mut ids);
        for id in ids {
            executor.woken(id & !TASK);
        }
    }

    #[test]
    fn a_woken_task_is_polled_again_and_its_slot_reused() {
        let queue = WakeQueue::new(None);
        let mut executor = Executor::new(Arc::clone(&queue));
        let polls = Rc::new(Cell::new(0));
        executor.spawn(Box::pin(Twice(Rc::clone(&polls))));
        executor.run(&mut || None);
        assert_eq!((polls.get(), executor.live()), (1, 1));
        assert!(!executor.has_ready(), "woken during its poll: queued, not run again at once");
        deliver(&queue, &mut executor);
        executor.run(&mut || None);
        assert_eq!((polls.get(), executor.live()), (2, 0));
        executor.spawn(Box::pin(async {}));
        assert_eq!(executor.tasks.len(), 1, "the slot is reused");
        executor.run(&mut || None);
        assert_eq!(executor.live(), 0);
    }

    #[test]
    fn a_panicking_task_is_dropped_and_the_others_run() {
        let queue = WakeQueue::new(None);
        let mut executor = Executor::new(queue);
        let ran = Rc::new(Cell::new(false));
        let flag = Rc::clone(&ran);
        executor.spawn(Box::pin(async { panic!("a task bug") }));
        executor.spawn(Box::pin(async move { flag.set(true) }));
        let mut extra = Some(Box::pin(async {}) as Task);
        executor.run(&mut || extra.take());
        assert!(ran.get());
        assert_eq!(executor.panicked(), 1);
        assert_eq!(executor.live(), 1, "the task spawned during the run waits for the next");
        executor.run(&mut || None);
        assert_eq!(executor.live(), 0);
    }
}
