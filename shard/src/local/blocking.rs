//! Work on the executor's blocking pool, accounted so a core never exits
//! while such work is in flight.
//!
//! glommio's blocking threads hand each result back through the executor;
//! if the executor is gone by then, the thread panics. Every blocking call
//! of the engine goes through [`run`], which counts it in the calling
//! executor's thread-local counter until the work itself is done, and a
//! core waits for [`wait_idle`] before its executor returns.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

thread_local! {
    static IN_FLIGHT: Arc<AtomicUsize> = Arc::new(AtomicUsize::new(0));
}

/// Runs `f` on the blocking pool of the current executor.
pub async fn run<R: Send + 'static>(f: impl FnOnce() -> R + Send + 'static) -> R {
    let counter = IN_FLIGHT.with(Arc::clone);
    counter.fetch_add(1, Ordering::SeqCst);
    glommio::executor()
        .spawn_blocking(move || {
            let result = f();
            counter.fetch_sub(1, Ordering::SeqCst);
            result
        })
        .await
}

/// Waits (at most `limit`) until no blocking work of this executor is in
/// flight, plus a short grace for the last result to be handed back.
pub async fn wait_idle(limit: Duration) {
    let counter = IN_FLIGHT.with(Arc::clone);
    let started = Instant::now();
    while counter.load(Ordering::SeqCst) > 0 && started.elapsed() < limit {
        glommio::timer::sleep(Duration::from_millis(1)).await;
    }
    glommio::timer::sleep(Duration::from_millis(5)).await;
}
