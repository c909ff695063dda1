//! A cancellation token for the projection runner: cloned freely, set
//! once from anywhere (another thread, a signal handler's task), awaited
//! from any executor. Once cancelled it stays cancelled.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll, Waker};

use parking_lot::Mutex;

#[derive(Debug, Default)]
struct Shared {
    cancelled: bool,
    wakers: Vec<Waker>,
}

/// A shared "stop now" flag with a future that completes when it is set.
#[derive(Clone, Debug, Default)]
pub struct CancelToken {
    shared: Arc<Mutex<Shared>>,
}

impl CancelToken {
    /// A token not cancelled yet.
    pub fn new() -> Self {
        CancelToken::default()
    }

    /// Cancels: every [`CancelToken::cancelled`] of every clone completes.
    pub fn cancel(&self) {
        let wakers = {
            let mut shared = self.shared.lock();
            shared.cancelled = true;
            std::mem::take(&mut shared.wakers)
        };
        for w in wakers {
            w.wake();
        }
    }

    /// True once cancelled.
    pub fn is_cancelled(&self) -> bool {
        self.shared.lock().cancelled
    }

    /// Completes once the token is cancelled.
    pub fn cancelled(&self) -> Cancelled {
        Cancelled { token: self.clone() }
    }
}

/// The future of [`CancelToken::cancelled`].
#[derive(Debug)]
pub struct Cancelled {
    token: CancelToken,
}

impl Future for Cancelled {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let mut shared = self.token.shared.lock();
        if shared.cancelled {
            return Poll::Ready(());
        }
        if !shared.wakers.iter().any(|w| w.will_wake(cx.waker())) {
            shared.wakers.push(cx.waker().clone());
        }
        Poll::Pending
    }
}

#[cfg(test)]
mod tests {
    use super::CancelToken;

    #[test]
    fn a_cancel_from_another_thread_wakes_every_waiter() {
        let token = CancelToken::new();
        let waiters: Vec<_> = (0..3)
            .map(|_| {
                let t = token.clone();
                std::thread::spawn(move || futures::executor::block_on(t.cancelled()))
            })
            .collect();
        assert!(!token.is_cancelled());
        std::thread::sleep(std::time::Duration::from_millis(20));
        token.cancel();
        for w in waiters {
            w.join().unwrap();
        }
        assert!(token.is_cancelled());
        futures::executor::block_on(token.cancelled());
    }
}
