//! A bounded multi-producer channel for one thread (openraft's `Mpsc`).
//!
//! Invariants: the queue never holds more than `capacity` values; a send
//! that finds it full waits and completes on a later poll once there is
//! room; once every strong [`Sender`] is gone the receiver drains what is
//! queued and then sees the end; once the [`Receiver`] is gone every send
//! fails with its value handed back. Weak senders count for neither. No
//! value is dropped and no waker woken while the channel is borrowed.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::future::{poll_fn, Future};
use std::rc::{Rc, Weak};
use std::task::{Poll, Waker};

use openraft::async_runtime::{Mpsc, MpscReceiver, MpscSender, MpscWeakSender, SendError, TryRecvError};

/// The channel family for [`super::GlommioRt`].
#[derive(Debug)]
pub struct LocalMpsc;

#[derive(Debug)]
struct Chan<T> {
    queue: VecDeque<T>,
    capacity: usize,
    senders: usize,
    receiver_alive: bool,
    receiver_waker: Option<Waker>,
    blocked_senders: Vec<Waker>,
}

/// A strong sending half; the channel is open while one exists.
#[derive(Debug)]
pub struct Sender<T> {
    chan: Rc<RefCell<Chan<T>>>,
}

/// A sending half that does not keep the channel open.
#[derive(Debug)]
pub struct WeakSender<T> {
    chan: Weak<RefCell<Chan<T>>>,
}

/// The receiving half.
#[derive(Debug)]
pub struct Receiver<T> {
    chan: Rc<RefCell<Chan<T>>>,
}

impl Mpsc for LocalMpsc {
    type Sender<T> = Sender<T>;
    type Receiver<T> = Receiver<T>;
    type WeakSender<T> = WeakSender<T>;

    fn channel<T>(buffer: usize) -> (Self::Sender<T>, Self::Receiver<T>) {
        let chan = Rc::new(RefCell::new(Chan {
            queue: VecDeque::new(),
            capacity: buffer.max(1),
            senders: 1,
            receiver_alive: true,
            receiver_waker: None,
            blocked_senders: Vec::new(),
        }));
        (Sender { chan: chan.clone() }, Receiver { chan })
    }
}

impl<T> Clone for Sender<T> {
    fn clone(&self) -> Self {
        self.chan.borrow_mut().senders += 1;
        Self { chan: self.chan.clone() }
    }
}

impl<T> Drop for Sender<T> {
    fn drop(&mut self) {
        let waker = {
            let mut chan = self.chan.borrow_mut();
            chan.senders -= 1;
            if chan.senders == 0 {
                chan.receiver_waker.take()
            } else {
                None
            }
        };
        if let Some(waker) = waker {
            waker.wake();
        }
    }
}

impl<T> MpscSender<LocalMpsc, T> for Sender<T> {
    fn send(&self, msg: T) -> impl Future<Output = Result<(), SendError<T>>> {
        let mut msg = Some(msg);
        poll_fn(move |cx| {
            let mut chan = self.chan.borrow_mut();
            let value = msg.take().expect("a send future is not polled after it completed");
            if !chan.receiver_alive {
                return Poll::Ready(Err(SendError(value)));
            }
            if chan.queue.len() < chan.capacity {
                chan.queue.push_back(value);
                let waker = chan.receiver_waker.take();
                drop(chan);
                if let Some(waker) = waker {
                    waker.wake();
                }
                return Poll::Ready(Ok(()));
            }
            msg = Some(value);
            if !chan.blocked_senders.iter().any(|w| w.will_wake(cx.waker())) {
                chan.blocked_senders.push(cx.waker().clone());
            }
            Poll::Pending
        })
    }

    fn downgrade(&self) -> WeakSender<T> {
        WeakSender { chan: Rc::downgrade(&self.chan) }
    }
}

impl<T> Clone for WeakSender<T> {
    fn clone(&self) -> Self {
        Self { chan: self.chan.clone() }
    }
}

impl<T> MpscWeakSender<LocalMpsc, T> for WeakSender<T> {
    fn upgrade(&self) -> Option<Sender<T>> {
        let chan = self.chan.upgrade()?;
        let mut state = chan.borrow_mut();
        if state.senders == 0 {
            return None;
        }
        state.senders += 1;
        drop(state);
        Some(Sender { chan })
    }
}

impl<T> Receiver<T> {
    /// Takes the next value, waking every sender that waited for room
    /// (each re-checks; a cancelled one cannot strand the others).
    fn take(&mut self) -> Result<T, TryRecvError> {
        let (value, blocked) = {
            let mut chan = self.chan.borrow_mut();
            match chan.queue.pop_front() {
                Some(value) => (value, std::mem::take(&mut chan.blocked_senders)),
                None if chan.senders == 0 => return Err(TryRecvError::Disconnected),
                None => return Err(TryRecvError::Empty),
            }
        };
        for waker in blocked {
            waker.wake();
        }
        Ok(value)
    }
}

impl<T> MpscReceiver<T> for Receiver<T> {
    fn recv(&mut self) -> impl Future<Output = Option<T>> {
        poll_fn(move |cx| match self.take() {
            Ok(value) => Poll::Ready(Some(value)),
            Err(TryRecvError::Disconnected) => Poll::Ready(None),
            Err(TryRecvError::Empty) => {
                self.chan.borrow_mut().receiver_waker = Some(cx.waker().clone());
                Poll::Pending
            }
        })
    }

    fn try_recv(&mut self) -> Result<T, TryRecvError> {
        self.take()
    }
}

impl<T> Drop for Receiver<T> {
    fn drop(&mut self) {
        let (queued, blocked) = {
            let mut chan = self.chan.borrow_mut();
            chan.receiver_alive = false;
            (std::mem::take(&mut chan.queue), std::mem::take(&mut chan.blocked_senders))
        };
        drop(queued);
        for waker in blocked {
            waker.wake();
        }
    }
}
