//! hyper's `rt::Timer` on glommio timers: what lets hyper cut a client off
//! that sends its request headers too slowly (slowloris).
//!
//! hyper wants sleeps that are `Send + Sync`; glommio's timers are bound to
//! their executor and are not. So each core thread keeps a small timer
//! wheel (a `BTreeMap` from deadline to waker) and one driver task that
//! sleeps on a glommio timer until the earliest deadline, then wakes every
//! sleep that is due. A [`CoreSleep`] is plain data (a deadline and a key),
//! so it is `Send + Sync`; it registers itself in the wheel of the thread
//! that polls it (always the core that runs its connection) and removes
//! itself when dropped, so a cancelled header timeout costs one map entry
//! for as long as it lives, no task.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};
use std::thread::ThreadId;
use std::time::{Duration, Instant};

#[derive(Default)]
struct Wheel {
    entries: BTreeMap<(Instant, u64), Waker>,
    next_key: u64,
    driver: Option<Waker>,
    driver_started: bool,
}

thread_local! {
    static WHEEL: RefCell<Wheel> = RefCell::new(Wheel::default());
}

/// The timer handed to hyper.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct CoreTimer;

impl hyper::rt::Timer for CoreTimer {
    fn sleep(&self, duration: Duration) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(CoreSleep::until(Instant::now() + duration))
    }

    fn sleep_until(&self, deadline: Instant) -> Pin<Box<dyn hyper::rt::Sleep>> {
        Box::pin(CoreSleep::until(deadline))
    }
}

/// One sleep (see the module docs).
#[derive(Debug)]
pub(crate) struct CoreSleep {
    deadline: Instant,
    registered: Option<(u64, ThreadId)>,
}

impl CoreSleep {
    pub(crate) fn until(deadline: Instant) -> Self {
        CoreSleep { deadline, registered: None }
    }

    fn unregister(&mut self) {
        if let Some((key, thread)) = self.registered.take() {
            if thread == std::thread::current().id() {
                let deadline = self.deadline;
                let _ = WHEEL.try_with(|w| w.borrow_mut().entries.remove(&(deadline, key)));
            }
        }
    }
}

impl hyper::rt::Sleep for CoreSleep {}

impl Future for CoreSleep {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if Instant::now() >= this.deadline {
            this.unregister();
            return Poll::Ready(());
        }
        let here = std::thread::current().id();
        if this.registered.is_some_and(|(_, t)| t != here) {
            this.registered = None;
        }
        let deadline = this.deadline;
        let start_driver = WHEEL.with(|w| {
            let mut w = w.borrow_mut();
            let key = match this.registered {
                Some((key, _)) => key,
                None => {
                    w.next_key += 1;
                    w.next_key
                }
            };
            let earliest_before = w.entries.keys().next().map(|(at, _)| *at);
            w.entries.insert((deadline, key), cx.waker().clone());
            this.registered = Some((key, here));
            if earliest_before.is_none_or(|at| deadline < at) {
                if let Some(driver) = &w.driver {
                    driver.wake_by_ref();
                }
            }
            !std::mem::replace(&mut w.driver_started, true)
        });
        if start_driver {
            glommio::spawn_local(drive()).detach();
        }
        Poll::Pending
    }
}

impl Drop for CoreSleep {
    fn drop(&mut self) {
        self.unregister();
    }
}

/// The per-thread driver: sleeps until the earliest deadline, wakes what
/// is due, forever (it ends with its executor).
async fn drive() {
    let mut timer: Option<(Instant, glommio::timer::Timer)> = None;
    std::future::poll_fn(move |cx| loop {
        let now = Instant::now();
        let (due, next) = WHEEL.with(|w| {
            let mut w = w.borrow_mut();
            w.driver = Some(cx.waker().clone());
            let later = w.entries.split_off(&(now, u64::MAX));
            let due = std::mem::replace(&mut w.entries, later);
            (due, w.entries.keys().next().map(|(at, _)| *at))
        });
        for (_, waker) in due {
            waker.wake();
        }
        let Some(at) = next else {
            timer = None;
            return Poll::<()>::Pending;
        };
        if timer.as_ref().map(|(t, _)| *t) != Some(at) {
            timer = Some((at, glommio::timer::Timer::new(at.saturating_duration_since(now))));
        }
        let (_, t) = timer.as_mut().expect("just set");
        match Pin::new(t).poll(cx) {
            Poll::Ready(_) => timer = None,
            Poll::Pending => return Poll::Pending,
        }
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sleeps_fire_in_order_and_cancelled_ones_leave_the_wheel() {
        let ex = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound).make().unwrap();
        ex.run(async {
            let start = Instant::now();
            let long = CoreSleep::until(start + Duration::from_secs(3600));
            let mut long = Box::pin(long);
            // Register the long sleep, then drop it: its entry must go.
            assert!(futures::poll!(long.as_mut()).is_pending());
            assert_eq!(WHEEL.with(|w| w.borrow().entries.len()), 1);
            drop(long);
            assert_eq!(WHEEL.with(|w| w.borrow().entries.len()), 0);
            let order = std::rc::Rc::new(RefCell::new(Vec::new()));
            let mut tasks = Vec::new();
            for (i, ms) in [(2u32, 30u64), (1, 10)] {
                let order = order.clone();
                tasks.push(glommio::spawn_local(async move {
                    CoreSleep::until(start + Duration::from_millis(ms)).await;
                    order.borrow_mut().push(i);
                }));
            }
            for t in tasks {
                t.await;
            }
            assert_eq!(*order.borrow(), vec![1, 2]);
            assert!(start.elapsed() >= Duration::from_millis(30));
        });
    }
}
