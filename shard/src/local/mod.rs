//! The local runtime: the few single-threaded primitives every task of a
//! core uses, whether it belongs to the log or to the runtime above it. A
//! leaf: it knows nothing of groups, requests or logs.
//!
//! * [`LocalSignal`]: a wakeable slot for one task waiting on events of its
//!   own executor (no atomics: everything here lives on one thread).
//! * [`yield_now`]: give every other ready task one turn.
//! * [`blocking`]: work on the executor's blocking pool, accounted so a core
//!   never exits while such work is in flight.

pub mod blocking;

use std::cell::Cell;
use std::task::{Poll, Waker};

/// Gives every other ready task of the executor a turn, once.
pub async fn yield_now() {
    let mut yielded = false;
    std::future::poll_fn(|cx| {
        if yielded {
            Poll::Ready(())
        } else {
            yielded = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    })
    .await
}

/// A wakeable single-consumer slot, for a task waiting on local events.
#[derive(Default)]
pub struct LocalSignal {
    waker: Cell<Option<Waker>>,
}

impl std::fmt::Debug for LocalSignal {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LocalSignal")
    }
}

impl LocalSignal {
    /// Wakes the waiting task, if any.
    pub fn notify(&self) {
        if let Some(w) = self.waker.take() {
            w.wake();
        }
    }

    /// Polls `ready` until it yields, parking on this signal in between.
    pub async fn wait_until<T>(&self, mut ready: impl FnMut() -> Option<T>) -> T {
        std::future::poll_fn(|cx| match ready() {
            Some(v) => Poll::Ready(v),
            None => {
                self.waker.set(Some(cx.waker().clone()));
                Poll::Pending
            }
        })
        .await
    }
}
