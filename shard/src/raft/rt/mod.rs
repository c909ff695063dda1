//! [`GlommioRt`]: openraft's `AsyncRuntime` on a glommio executor.
//!
//! openraft spawns its tasks, sleeps and builds its channels only through
//! this trait, so a group's consensus tasks run on the core that owns the
//! group, beside its group task, with no thread hop. Invariants:
//!
//! * everything is single-threaded: tasks are `spawn_local`, the channels,
//!   watch and mutex are `Rc`-based and never cross a thread (openraft's
//!   `single-threaded` feature drops its `Send` bounds);
//! * a spawned task is detached: dropping its [`JoinHandle`] never cancels
//!   it (openraft relies on tokio's semantics here), and a panic inside it
//!   is caught and reported as [`JoinError::Panicked`] to whoever awaits the
//!   handle instead of unwinding through the executor;
//! * time and randomness come from [`clock`]: the monotonic clock, glommio
//!   timers and the thread's generator, or, on a simulation thread, a
//!   virtual clock and a seeded generator ([`SimClock`]).
//!
//! Conformance: openraft's own runtime suite runs against it in this
//! module's tests.

mod clock;
mod mpsc;
mod mutex;
mod oneshot;
mod timeout;
mod watch;

use std::fmt;
use std::future::Future;
use std::panic::AssertUnwindSafe;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::FutureExt;
use openraft::AsyncRuntime;

pub use mpsc::{LocalMpsc, Receiver, Sender, WeakSender};
pub use mutex::{LocalMutex, LocalMutexGuard};
pub use oneshot::LocalOneshot;
pub use clock::{RtInstant, RtRng, SimClock, Sleep};
pub use timeout::{Timeout, TimeoutError};
pub use watch::{LocalWatch, WatchReceiver, WatchSender};

/// Sleeps on the raft runtime's clock (virtual under a [`SimClock`]).
pub async fn sleep(duration: Duration) {
    Sleep::new(duration).await
}

/// openraft's runtime on the current glommio executor.
#[derive(Debug)]
pub struct GlommioRt {
    /// Only for openraft's test entry points (`new`/`block_on`): the
    /// executor a test runs its future on. The engine never builds one
    /// here; its cores already run inside executors.
    executor: Option<glommio::LocalExecutor>,
}

/// Why a spawned task produced no value.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum JoinError {
    /// The task panicked; the message when it was a string.
    Panicked(String),
    /// The executor dropped the task before it finished (shutdown).
    Cancelled,
}

impl fmt::Display for JoinError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Panicked(message) => write!(f, "raft task panicked: {message}"),
            Self::Cancelled => f.write_str("raft task cancelled by its executor"),
        }
    }
}

impl std::error::Error for JoinError {}

/// A detached task's result; dropping it leaves the task running.
#[derive(Debug)]
pub struct JoinHandle<T> {
    inner: glommio::task::JoinHandle<Result<T, JoinError>>,
}

impl<T> Future for JoinHandle<T> {
    type Output = Result<T, JoinError>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        Pin::new(&mut self.inner).poll(cx).map(|done| done.unwrap_or(Err(JoinError::Cancelled)))
    }
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    match payload.downcast::<String>() {
        Ok(text) => *text,
        Err(payload) => match payload.downcast::<&'static str>() {
            Ok(text) => (*text).to_owned(),
            Err(_) => "(non-string panic payload)".to_owned(),
        },
    }
}

impl AsyncRuntime for GlommioRt {
    type JoinError = JoinError;
    type JoinHandle<T: 'static> = JoinHandle<T>;
    type Sleep = Sleep;
    type Instant = RtInstant;
    type TimeoutError = TimeoutError;
    type Timeout<R, T: Future<Output = R>> = Timeout<T>;
    type ThreadLocalRng = RtRng;
    type Mpsc = LocalMpsc;
    type Watch = LocalWatch;
    type Oneshot = LocalOneshot;
    type Mutex<T: 'static> = LocalMutex<T>;

    fn spawn<T>(future: T) -> Self::JoinHandle<T::Output>
    where
        T: Future + 'static,
        T::Output: 'static,
    {
        let guarded = AssertUnwindSafe(future)
            .catch_unwind()
            .map(|done| done.map_err(|payload| JoinError::Panicked(panic_message(payload))));
        JoinHandle { inner: glommio::spawn_local(guarded).detach() }
    }

    fn sleep(duration: Duration) -> Self::Sleep {
        Sleep::new(duration)
    }

    fn sleep_until(deadline: Self::Instant) -> Self::Sleep {
        Sleep::until(deadline)
    }

    fn timeout<R, F: Future<Output = R>>(duration: Duration, future: F) -> Self::Timeout<R, F> {
        Timeout::new(future, Sleep::new(duration))
    }

    fn timeout_at<R, F: Future<Output = R>>(deadline: Self::Instant, future: F) -> Self::Timeout<R, F> {
        Timeout::new(future, Sleep::until(deadline))
    }

    fn is_panic(join_error: &Self::JoinError) -> bool {
        matches!(join_error, JoinError::Panicked(_))
    }

    fn thread_rng() -> Self::ThreadLocalRng {
        RtRng::current()
    }

    fn new(_threads: usize) -> Self {
        // A small registered-buffer area: tests run many executors side by
        // side and the machine's locked-memory limit is a few MiB.
        let executor = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
            .io_memory(512 << 10)
            .make()
            .expect("openraft test runtime: a glommio executor");
        Self { executor: Some(executor) }
    }

    fn block_on<F, T>(&mut self, future: F) -> T
    where
        F: Future<Output = T>,
    {
        match &self.executor {
            Some(executor) => executor.run(future),
            None => panic!("GlommioRt::block_on is for tests: build the runtime with GlommioRt::new"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passes_openraft_runtime_suite() {
        openraft_rt::testing::Suite::<GlommioRt>::test_all();
    }

    #[test]
    fn dropping_a_handle_detaches_and_a_panic_is_reported() {
        let mut rt = GlommioRt::new(1);
        rt.block_on(async {
            let (tx, rx) = futures::channel::oneshot::channel();
            drop(GlommioRt::spawn(async move {
                GlommioRt::sleep(Duration::from_millis(5)).await;
                let _ = tx.send(7);
            }));
            assert_eq!(rx.await, Ok(7));
            let failed = GlommioRt::spawn(async { panic!("boom") }).await;
            assert_eq!(failed, Err(JoinError::Panicked("boom".to_owned())));
            assert!(GlommioRt::is_panic(&failed.unwrap_err()));
        });
    }
}
