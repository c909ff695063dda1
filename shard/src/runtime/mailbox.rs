//! A core's mailbox: a bounded lock-free queue from any thread into one
//! core, with an explicit wake of the parked executor.
//!
//! The queue is a `crossbeam-channel` bounded channel. The receiving
//! dispatcher never polls on a timer. When it finds the queue empty it
//! either spins (wakes itself and looks again, while the adaptive policy of
//! [`super::spin`] says more mail is likely soon; `parked` stays lowered, so
//! senders pay no wake) or parks: it registers its waker, raises `parked`,
//! and looks once more.
//! A sender that enqueues and then finds `parked` raised lowers it and wakes
//! the dispatcher (a glommio foreign wake, which kicks the executor's
//! eventfd). Both sides order "flag" and "queue" with sequentially
//! consistent fences, so one of them always sees the other: either the
//! dispatcher's second look finds the mail, or the sender sees the flag.
//! A sender that is not racing a parked dispatcher pays no wake at all.
//!
//! When the queue is full a sender either fails with `Overloaded` or waits
//! for space (see [`MailboxFull`]); waiting senders park their wakers in a
//! small list the dispatcher drains after each batch it takes.

use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{fence, AtomicBool, Ordering::Relaxed, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use crossbeam_channel::{Receiver, Sender, TryRecvError, TrySendError};
use futures::task::AtomicWaker;
use parking_lot::Mutex;

use super::envelope::Mail;
use super::spin::{Idle, IdleSpin, SpinPolicy};
use crate::error::{Error, ErrorKind, Result};
use crate::limits::MailboxFull;
use crate::metrics::CoreMetrics;

#[derive(Debug, Default)]
struct Shared {
    parked: AtomicBool,
    dispatcher: AtomicWaker,
    space_wanted: AtomicBool,
    space_waiters: Mutex<Vec<Waker>>,
}

/// The sending side; cheap to clone, usable from any thread.
#[derive(Debug, Clone)]
pub struct MailboxSender {
    core: usize,
    capacity: usize,
    policy: MailboxFull,
    tx: Sender<Mail>,
    shared: Arc<Shared>,
    metrics: Arc<CoreMetrics>,
}

/// The receiving side, owned by the core's dispatcher.
#[derive(Debug)]
pub struct MailboxReceiver {
    rx: Receiver<Mail>,
    shared: Arc<Shared>,
    metrics: Arc<CoreMetrics>,
    spin: IdleSpin,
}

/// Creates one core's mailbox.
pub fn mailbox(
    core: usize,
    capacity: usize,
    policy: MailboxFull,
    metrics: Arc<CoreMetrics>,
) -> (MailboxSender, MailboxReceiver) {
    let (tx, rx) = crossbeam_channel::bounded(capacity);
    let shared = Arc::new(Shared::default());
    (
        MailboxSender { core, capacity, policy, tx, shared: shared.clone(), metrics: metrics.clone() },
        MailboxReceiver { rx, shared, metrics, spin: IdleSpin::new(SpinPolicy::OFF) },
    )
}

impl MailboxSender {
    /// The mailbox's capacity.
    pub fn capacity(&self) -> usize {
        self.capacity
    }

    /// Mail currently queued.
    pub fn depth(&self) -> usize {
        self.tx.len()
    }

    fn wake_dispatcher(&self) {
        fence(SeqCst);
        if self.shared.parked.swap(false, SeqCst) {
            self.metrics.dispatcher_wakes.fetch_add(1, Relaxed);
            self.shared.dispatcher.wake();
        }
    }

    fn shutting_down(&self) -> Error {
        Error::new(ErrorKind::ShuttingDown)
    }

    /// Sends one piece of mail, applying the full-mailbox policy.
    pub fn send(&self, mail: Mail) -> SendMail<'_> {
        SendMail { sender: self, mail: Some(mail), counted_full: false, policy: self.policy }
    }

    /// Sends one piece of mail, waiting for space whatever the policy (for
    /// control mail that must arrive).
    pub fn send_waiting(&self, mail: Mail) -> SendMail<'_> {
        SendMail { sender: self, mail: Some(mail), counted_full: false, policy: MailboxFull::Wait }
    }

    /// Sends without waiting; `Err` gives the mail back when full.
    pub fn try_send(&self, mail: Mail) -> std::result::Result<(), Mail> {
        match self.tx.try_send(mail) {
            Ok(()) => {
                self.wake_dispatcher();
                Ok(())
            }
            Err(TrySendError::Full(m)) | Err(TrySendError::Disconnected(m)) => Err(m),
        }
    }
}

/// Future of [`MailboxSender::send`].
#[derive(Debug)]
pub struct SendMail<'a> {
    sender: &'a MailboxSender,
    mail: Option<Mail>,
    counted_full: bool,
    policy: MailboxFull,
}

impl Future for SendMail<'_> {
    type Output = Result<()>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Result<()>> {
        let this = &mut *self;
        let sender = this.sender;
        let Some(mut mail) = this.mail.take() else {
            return Poll::Ready(Ok(()));
        };
        for attempt in 0..2 {
            match sender.tx.try_send(mail) {
                Ok(()) => {
                    sender.wake_dispatcher();
                    return Poll::Ready(Ok(()));
                }
                Err(TrySendError::Disconnected(_)) => {
                    return Poll::Ready(Err(sender.shutting_down()));
                }
                Err(TrySendError::Full(m)) => mail = m,
            }
            if !this.counted_full {
                this.counted_full = true;
                sender.metrics.mailbox_full_events.fetch_add(1, SeqCst);
            }
            if this.policy == MailboxFull::Reject {
                sender.metrics.overloaded_events.fetch_add(1, SeqCst);
                return Poll::Ready(Err(Error::new(ErrorKind::Overloaded {
                    core: sender.core,
                    capacity: sender.capacity,
                })));
            }
            if attempt == 0 {
                // Register before the second attempt so space freed in
                // between is not missed.
                sender.shared.space_waiters.lock().push(cx.waker().clone());
                sender.shared.space_wanted.store(true, SeqCst);
            }
        }
        this.mail = Some(mail);
        Poll::Pending
    }
}

impl MailboxReceiver {
    /// Sets the idle-spin policy (off by default).
    pub fn with_spin(mut self, policy: SpinPolicy) -> Self {
        self.spin = IdleSpin::new(policy);
        self
    }

    /// Waits for mail and moves up to `max` pieces into `out`. Returns
    /// false when every sender is gone and the queue is empty. `waiting`
    /// tells the spin policy whether replies wait for the log.
    pub async fn recv_batch(&self, out: &mut Vec<Mail>, max: usize, waiting: impl Fn() -> bool) -> bool {
        std::future::poll_fn(|cx| self.poll_batch(cx, out, max, &waiting)).await
    }

    fn poll_batch(&self, cx: &mut Context<'_>, out: &mut Vec<Mail>, max: usize, waiting: &dyn Fn() -> bool) -> Poll<bool> {
        let now = std::time::Instant::now();
        let spun = self.spin.resume(now);
        if !spun.is_zero() {
            self.metrics.dispatcher_spin_ns.fetch_add(spun.as_nanos() as u64, Relaxed);
        }
        if self.drain(out, max) {
            if !spun.is_zero() {
                self.metrics.dispatcher_spin_catches.fetch_add(1, Relaxed);
            }
            self.spin.mail(now);
            return Poll::Ready(true);
        }
        if self.spin.idle(now, waiting()) == Idle::Spin {
            // Stay awake: no parked flag, so senders skip the wake; the
            // self-wake gets this task polled again after glommio has
            // looked at its ring.
            self.shared.parked.store(false, SeqCst);
            cx.waker().wake_by_ref();
            return Poll::Pending;
        }
        self.shared.dispatcher.register(cx.waker());
        self.shared.parked.store(true, SeqCst);
        fence(SeqCst);
        match self.rx.try_recv() {
            Ok(mail) => {
                self.shared.parked.store(false, SeqCst);
                out.push(mail);
                self.drain(out, max.saturating_sub(1));
                self.release_space();
                self.spin.resume(now);
                self.spin.mail(now);
                Poll::Ready(true)
            }
            Err(TryRecvError::Empty) => {
                self.metrics.dispatcher_parks.fetch_add(1, Relaxed);
                Poll::Pending
            }
            Err(TryRecvError::Disconnected) => Poll::Ready(false),
        }
    }

    /// Takes what is queued; true if anything was taken.
    fn drain(&self, out: &mut Vec<Mail>, max: usize) -> bool {
        let before = out.len();
        while out.len() - before < max {
            match self.rx.try_recv() {
                Ok(mail) => out.push(mail),
                Err(_) => break,
            }
        }
        let took = out.len() > before;
        if took {
            self.release_space();
        }
        took
    }

    fn release_space(&self) {
        if self.shared.space_wanted.swap(false, SeqCst) {
            let waiters = std::mem::take(&mut *self.shared.space_waiters.lock());
            for w in waiters {
                w.wake();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::runtime::envelope::Mail;
    use futures::channel::oneshot;

    fn shutdown_mail() -> Mail {
        Mail::Shutdown(oneshot::channel().0)
    }

    // SPEC §4: a full mailbox is counted and, under Reject, fails fast with a
    // temporary error.
    #[test]
    fn full_mailbox_rejects_and_counts() {
        let metrics = Arc::new(CoreMetrics::default());
        let (tx, _rx) = mailbox(3, 2, MailboxFull::Reject, metrics.clone());
        futures::executor::block_on(async {
            tx.send(shutdown_mail()).await.unwrap();
            tx.send(shutdown_mail()).await.unwrap();
            let err = tx.send(shutdown_mail()).await.unwrap_err();
            assert_eq!(err.code(), crate::error::ErrorCode::Overloaded);
            assert!(err.is_temporary());
        });
        assert_eq!(metrics.mailbox_full_events.load(SeqCst), 1);
    }

    // SPEC §4: under Wait, a sender blocked on a full mailbox proceeds once
    // the receiver drains.
    #[test]
    fn full_mailbox_waits_for_space() {
        let metrics = Arc::new(CoreMetrics::default());
        let (tx, rx) = mailbox(0, 1, MailboxFull::Wait, metrics.clone());
        futures::executor::block_on(tx.send(shutdown_mail())).unwrap();
        let sender = std::thread::spawn(move || {
            futures::executor::block_on(tx.send(shutdown_mail())).unwrap();
        });
        while metrics.mailbox_full_events.load(SeqCst) == 0 {
            std::thread::yield_now();
        }
        let mut got = Vec::new();
        futures::executor::block_on(rx.recv_batch(&mut got, 8, || false));
        sender.join().unwrap();
        futures::executor::block_on(rx.recv_batch(&mut got, 8, || false));
        assert_eq!(got.len(), 2);
    }

    #[test]
    fn disconnected_senders_end_the_receiver() {
        let (tx, rx) = mailbox(0, 4, MailboxFull::Wait, Arc::new(CoreMetrics::default()));
        drop(tx);
        let mut got = Vec::new();
        assert!(!futures::executor::block_on(rx.recv_batch(&mut got, 8, || false)));
    }
}
