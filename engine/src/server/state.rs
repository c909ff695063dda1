//! What the server's cores share: its options, the shutdown signal and the
//! HTTP-level counters.
//!
//! [`Shutdown`] is a one-way latch any thread can trip; tasks on any core
//! wait on it (glommio wakers may be woken from another thread). A waiter
//! dropped before the trip removes its waker, so the latch never holds
//! more wakers than there are live waiters. [`HttpStats`] are relaxed atomics summed
//! into `/metrics`; `connections_active` is also what the graceful
//! shutdown waits on.

use std::collections::HashMap;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use parking_lot::Mutex;

use crate::Engine;

/// What a core's request handlers share: the engine and the server's
/// shared state.
#[derive(Debug)]
pub(crate) struct Ctx {
    pub engine: Engine,
    pub shared: std::sync::Arc<Shared>,
}

/// How the server behaves (set from the command line).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServeOptions {
    /// How long a long-poll (and one SSE wait) parks before answering.
    pub long_poll_timeout: Duration,
    /// Largest request body; beyond it the answer is 413.
    pub max_body_bytes: usize,
    /// Most bytes one catch-up read returns.
    pub max_read_bytes: usize,
    /// Open connections per core; more are closed as soon as accepted.
    pub max_connections_per_core: usize,
    /// A client must send its request headers within this (slowloris).
    pub header_read_timeout: Duration,
    /// How long a graceful shutdown waits for open requests.
    pub drain_timeout: Duration,
}

impl Default for ServeOptions {
    fn default() -> Self {
        ServeOptions {
            long_poll_timeout: Duration::from_secs(30),
            max_body_bytes: 16 << 20,
            max_read_bytes: 4 << 20,
            max_connections_per_core: 10_000,
            header_read_timeout: Duration::from_secs(10),
            drain_timeout: Duration::from_secs(10),
        }
    }
}

/// A latch that wakes every waiter when tripped. A waiter that is dropped
/// before the latch trips takes its waker out again, so the set holds only
/// live waiters (one per open connection, accept loop and parked read).
#[derive(Debug, Default)]
pub struct Shutdown {
    tripped: AtomicBool,
    next_key: AtomicU64,
    wakers: Mutex<HashMap<u64, Waker>>,
}

impl Shutdown {
    /// Trips the latch: every waiter wakes and the server stops accepting.
    pub fn trip(&self) {
        self.tripped.store(true, Ordering::Release);
        let wakers: Vec<Waker> = self.wakers.lock().drain().map(|(_, w)| w).collect();
        for w in wakers {
            w.wake();
        }
    }

    /// Whether shutdown has begun.
    pub fn is_tripped(&self) -> bool {
        self.tripped.load(Ordering::Acquire)
    }

    /// Resolves once the latch is tripped.
    pub fn wait(&self) -> ShutdownWait<'_> {
        ShutdownWait { shutdown: self, key: None }
    }

    /// Waiters currently registered.
    pub fn waiters(&self) -> usize {
        self.wakers.lock().len()
    }
}

/// The future of [`Shutdown::wait`].
#[derive(Debug)]
pub struct ShutdownWait<'a> {
    shutdown: &'a Shutdown,
    key: Option<u64>,
}

impl Future for ShutdownWait<'_> {
    type Output = ();

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        let this = self.get_mut();
        if this.shutdown.is_tripped() {
            return Poll::Ready(());
        }
        let mut wakers = this.shutdown.wakers.lock();
        if this.shutdown.is_tripped() {
            return Poll::Ready(());
        }
        let key = *this.key.get_or_insert_with(|| this.shutdown.next_key.fetch_add(1, Ordering::Relaxed));
        match wakers.get_mut(&key) {
            Some(w) if w.will_wake(cx.waker()) => {}
            Some(w) => w.clone_from(cx.waker()),
            None => {
                wakers.insert(key, cx.waker().clone());
            }
        }
        Poll::Pending
    }
}

impl Drop for ShutdownWait<'_> {
    fn drop(&mut self) {
        if let Some(key) = self.key {
            self.shutdown.wakers.lock().remove(&key);
        }
    }
}

/// HTTP-level counters.
#[derive(Debug, Default)]
pub struct HttpStats {
    /// Responses by status class: 1xx..5xx at index 0..4.
    pub responses: [AtomicU64; 5],
    /// Connections accepted.
    pub connections_accepted: AtomicU64,
    /// Connections refused at the per-core cap.
    pub connections_refused: AtomicU64,
    /// Connections open now.
    pub connections_active: AtomicU64,
    /// Server-sent event streams open now.
    pub sse_streams_active: AtomicU64,
}

impl HttpStats {
    /// Counts one response of `status`.
    pub fn count_response(&self, status: u16) {
        let class = (status / 100).clamp(1, 5) as usize - 1;
        self.responses[class].fetch_add(1, Ordering::Relaxed);
    }
}

/// Everything the cores share.
#[derive(Debug, Default)]
pub struct Shared {
    /// The server's options.
    pub options: ServeOptions,
    /// The graceful-shutdown latch.
    pub shutdown: Shutdown,
    /// The server's counters.
    pub stats: HttpStats,
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::Arc;

    #[test]
    fn shutdown_wakes_a_waiter_on_another_thread() {
        let s = Arc::new(Shutdown::default());
        let waiter = {
            let s = s.clone();
            std::thread::spawn(move || futures::executor::block_on(s.wait()))
        };
        s.trip();
        waiter.join().unwrap();
        assert!(s.is_tripped());
        futures::executor::block_on(s.wait());
    }

    #[test]
    fn dropped_waiters_leave_the_set() {
        let s = Shutdown::default();
        let waker = futures::task::noop_waker();
        let mut cx = Context::from_waker(&waker);
        let mut waits: Vec<_> = (0..10).map(|_| Box::pin(s.wait())).collect();
        for w in &mut waits {
            assert!(w.as_mut().poll(&mut cx).is_pending());
            assert!(w.as_mut().poll(&mut cx).is_pending());
        }
        assert_eq!(s.waiters(), 10);
        waits.truncate(3);
        assert_eq!(s.waiters(), 3);
        drop(waits);
        assert_eq!(s.waiters(), 0);
    }

    #[test]
    fn responses_are_counted_by_class() {
        let stats = HttpStats::default();
        for s in [200, 204, 404, 503, 999] {
            stats.count_response(s);
        }
        let got: Vec<u64> = stats.responses.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        assert_eq!(got, vec![0, 2, 0, 1, 2]);
    }
}
