//! An async mutex for one thread (openraft's `Mutex`).
//!
//! Invariants: at most one guard exists at a time (the value sits in a
//! `RefCell` and a guard is its one mutable borrow); a lock that finds the
//! mutex held waits and succeeds on a later poll once the guard is dropped;
//! dropping a guard wakes every waiter (each re-checks, so a cancelled
//! waiter never strands the others).

use std::cell::{RefCell, RefMut};
use std::future::{poll_fn, Future};
use std::ops::{Deref, DerefMut};
use std::task::{Poll, Waker};

use openraft::async_runtime::Mutex;

/// The mutex for [`super::GlommioRt`].
#[derive(Debug)]
pub struct LocalMutex<T> {
    value: RefCell<T>,
    waiting: RefCell<Vec<Waker>>,
}

/// Holds the lock until dropped.
#[derive(Debug)]
pub struct LocalMutexGuard<'a, T> {
    value: RefMut<'a, T>,
    waiting: &'a RefCell<Vec<Waker>>,
}

impl<T> Deref for LocalMutexGuard<'_, T> {
    type Target = T;

    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T> DerefMut for LocalMutexGuard<'_, T> {
    fn deref_mut(&mut self) -> &mut T {
        &mut self.value
    }
}

impl<T> Drop for LocalMutexGuard<'_, T> {
    fn drop(&mut self) {
        // The borrow itself is released right after this body; a woken task
        // runs on a later executor turn, so it finds the value free.
        let waiting = std::mem::take(&mut *self.waiting.borrow_mut());
        for waker in waiting {
            waker.wake();
        }
    }
}

impl<T: 'static> Mutex<T> for LocalMutex<T> {
    type Guard<'a> = LocalMutexGuard<'a, T>;

    fn new(value: T) -> Self {
        Self { value: RefCell::new(value), waiting: RefCell::new(Vec::new()) }
    }

    fn lock(&self) -> impl Future<Output = LocalMutexGuard<'_, T>> {
        poll_fn(move |cx| match self.value.try_borrow_mut() {
            Ok(value) => Poll::Ready(LocalMutexGuard { value, waiting: &self.waiting }),
            Err(_) => {
                let mut waiting = self.waiting.borrow_mut();
                if !waiting.iter().any(|w| w.will_wake(cx.waker())) {
                    waiting.push(cx.waker().clone());
                }
                Poll::Pending
            }
        })
    }
}
