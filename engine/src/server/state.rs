//! What the server's cores share: its options, the shutdown signal and the
//! HTTP-level counters.
//!
//! [`Shutdown`] is a one-way latch any thread can trip; tasks on any core
//! wait on it (their wakers are kept until it trips; glommio wakers may be
//! woken from another thread). [`HttpStats`] are relaxed atomics summed
//! into `/metrics`; `connections_active` is also what the graceful
//! shutdown waits on.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::task::{Poll, Waker};
use std::time::Duration;

use parking_lot::Mutex;

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

/// A latch that wakes every waiter when tripped.
#[derive(Debug, Default)]
pub struct Shutdown {
    tripped: AtomicBool,
    wakers: Mutex<Vec<Waker>>,
}

impl Shutdown {
    pub fn trip(&self) {
        self.tripped.store(true, Ordering::Release);
        for w in self.wakers.lock().drain(..) {
            w.wake();
        }
    }

    pub fn is_tripped(&self) -> bool {
        self.tripped.load(Ordering::Acquire)
    }

    /// Resolves once the latch is tripped.
    pub async fn wait(&self) {
        std::future::poll_fn(|cx| {
            if self.is_tripped() {
                return Poll::Ready(());
            }
            let mut wakers = self.wakers.lock();
            if self.is_tripped() {
                return Poll::Ready(());
            }
            if !wakers.iter().any(|w| w.will_wake(cx.waker())) {
                wakers.push(cx.waker().clone());
            }
            Poll::Pending
        })
        .await
    }
}

/// HTTP-level counters.
#[derive(Debug, Default)]
pub struct HttpStats {
    /// Responses by status class: 1xx..5xx at index 0..4.
    pub responses: [AtomicU64; 5],
    pub connections_accepted: AtomicU64,
    pub connections_refused: AtomicU64,
    pub connections_active: AtomicU64,
    pub sse_streams_active: AtomicU64,
}

impl HttpStats {
    pub fn count_response(&self, status: u16) {
        let class = (status / 100).clamp(1, 5) as usize - 1;
        self.responses[class].fetch_add(1, Ordering::Relaxed);
    }
}

/// Everything the cores share.
#[derive(Debug, Default)]
pub struct Shared {
    pub options: ServeOptions,
    pub shutdown: Shutdown,
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
    fn responses_are_counted_by_class() {
        let stats = HttpStats::default();
        for s in [200, 204, 404, 503, 999] {
            stats.count_response(s);
        }
        let got: Vec<u64> = stats.responses.iter().map(|c| c.load(Ordering::Relaxed)).collect();
        assert_eq!(got, vec![0, 2, 0, 1, 2]);
    }
}
