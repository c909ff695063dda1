//! A single-value broadcast for one thread (openraft's `Watch`).
//!
//! Invariants: the value carries a version bumped by every accepted
//! change; a receiver remembers the last version it marked seen, so
//! `changed` returns at once for an unseen version and otherwise waits for
//! the next one; a plain borrow never marks a value seen. With every sender
//! gone, `changed` on a seen value fails instead of waiting forever; with
//! every receiver gone, `send` fails and hands the value back.

use std::cell::{Cell, Ref, RefCell};
use std::future::poll_fn;
use std::rc::Rc;
use std::task::{Poll, Waker};

use openraft::async_runtime::watch::SendError;
use openraft::async_runtime::{RecvError, Watch};

/// The watch family for [`super::GlommioRt`].
#[derive(Debug)]
pub struct LocalWatch;

#[derive(Debug)]
struct Shared<T> {
    value: RefCell<T>,
    version: Cell<u64>,
    senders: Cell<usize>,
    receivers: Cell<usize>,
    waiting: RefCell<Vec<Waker>>,
}

impl<T> Shared<T> {
    fn bump(&self) {
        self.version.set(self.version.get() + 1);
        self.wake_all();
    }

    fn wake_all(&self) {
        let waiting = std::mem::take(&mut *self.waiting.borrow_mut());
        for waker in waiting {
            waker.wake();
        }
    }
}

/// The sending half.
#[derive(Debug)]
pub struct WatchSender<T> {
    shared: Rc<Shared<T>>,
}

/// A receiving half with its own seen version.
#[derive(Debug)]
pub struct WatchReceiver<T> {
    shared: Rc<Shared<T>>,
    seen: u64,
}

impl Watch for LocalWatch {
    type Sender<T> = WatchSender<T>;
    type Receiver<T> = WatchReceiver<T>;
    type Ref<'a, T: 'a> = Ref<'a, T>;

    fn channel<T>(init: T) -> (Self::Sender<T>, Self::Receiver<T>) {
        let shared = Rc::new(Shared {
            value: RefCell::new(init),
            version: Cell::new(0),
            senders: Cell::new(1),
            receivers: Cell::new(1),
            waiting: RefCell::new(Vec::new()),
        });
        (WatchSender { shared: shared.clone() }, WatchReceiver { shared, seen: 0 })
    }
}

impl<T> Clone for WatchSender<T> {
    fn clone(&self) -> Self {
        self.shared.senders.set(self.shared.senders.get() + 1);
        Self { shared: self.shared.clone() }
    }
}

impl<T> Drop for WatchSender<T> {
    fn drop(&mut self) {
        let left = self.shared.senders.get() - 1;
        self.shared.senders.set(left);
        if left == 0 {
            self.shared.wake_all();
        }
    }
}

impl<T> openraft::async_runtime::WatchSender<LocalWatch, T> for WatchSender<T> {
    fn send(&self, value: T) -> Result<(), SendError<T>> {
        if self.shared.receivers.get() == 0 {
            return Err(SendError(value));
        }
        let old = std::mem::replace(&mut *self.shared.value.borrow_mut(), value);
        drop(old);
        self.shared.bump();
        Ok(())
    }

    fn send_if_modified<F>(&self, modify: F) -> bool
    where
        F: FnOnce(&mut T) -> bool,
    {
        let modified = modify(&mut self.shared.value.borrow_mut());
        if modified {
            self.shared.bump();
        }
        modified
    }

    fn borrow_watched(&self) -> Ref<'_, T> {
        self.shared.value.borrow()
    }

    fn subscribe(&self) -> WatchReceiver<T> {
        self.shared.receivers.set(self.shared.receivers.get() + 1);
        WatchReceiver { shared: self.shared.clone(), seen: self.shared.version.get() }
    }
}

impl<T> Clone for WatchReceiver<T> {
    fn clone(&self) -> Self {
        self.shared.receivers.set(self.shared.receivers.get() + 1);
        Self { shared: self.shared.clone(), seen: self.seen }
    }
}

impl<T> Drop for WatchReceiver<T> {
    fn drop(&mut self) {
        self.shared.receivers.set(self.shared.receivers.get() - 1);
    }
}

impl<T> openraft::async_runtime::WatchReceiver<LocalWatch, T> for WatchReceiver<T> {
    async fn changed(&mut self) -> Result<(), RecvError> {
        poll_fn(|cx| {
            let version = self.shared.version.get();
            if version != self.seen {
                self.seen = version;
                return Poll::Ready(Ok(()));
            }
            if self.shared.senders.get() == 0 {
                return Poll::Ready(Err(RecvError(())));
            }
            let mut waiting = self.shared.waiting.borrow_mut();
            if !waiting.iter().any(|w| w.will_wake(cx.waker())) {
                waiting.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }

    fn borrow_watched(&self) -> Ref<'_, T> {
        self.shared.value.borrow()
    }

    fn borrow_and_update(&mut self) -> Ref<'_, T> {
        self.seen = self.shared.version.get();
        self.shared.value.borrow()
    }
}
