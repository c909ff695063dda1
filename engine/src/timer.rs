//! Timers and the clock, served by the engine's cores, for client-side
//! helpers that must not bring a runtime of their own (the coordinated
//! reader and the projection runner in [`crate::consumer`]).
//!
//! [`Engine::sleep`] parks a task on one of the cores' timers (one mail,
//! one oneshot) and completes from any executor; cores take turns so no
//! core carries every timer. [`Engine::now_ms`] reads the clock the cores
//! stamp commands with, so a helper compares lease expiries against the
//! same time the groups use.

use std::sync::atomic::Ordering;
use std::time::Duration;

use futures::channel::oneshot;
use rill_shard::node::{CoreTask, Mail};
use rill_shard::{Error, ErrorKind, Result};

use crate::engine::Engine;

impl Engine {
    /// Completes after `duration`, timed by one of the engine's cores.
    /// Fails with `ShuttingDown` when the engine stops first.
    pub async fn sleep(&self, duration: Duration) -> Result<()> {
        let inner = &self.inner;
        if inner.closed.load(Ordering::Acquire) {
            return Err(Error::new(ErrorKind::ShuttingDown));
        }
        if duration.is_zero() {
            return Ok(());
        }
        let core = inner.next_timer_core.fetch_add(1, Ordering::Relaxed) % inner.mailboxes.len();
        let (tx, rx) = oneshot::channel::<()>();
        let task = CoreTask(Box::new(move || {
            Box::pin(async move {
                glommio::timer::sleep(duration).await;
                let _ = tx.send(());
            })
        }));
        inner.mailboxes[core].send_waiting(Mail::Spawn(task)).await?;
        rx.await.map_err(|_| Error::new(ErrorKind::ShuttingDown))
    }

    /// The engine's clock in Unix milliseconds: the time its cores stamp
    /// commands with (and judge lease and membership expiry by).
    pub fn now_ms(&self) -> u64 {
        (self.inner.clock.0)()
    }
}
