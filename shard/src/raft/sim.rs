//! Driving raft replicas in virtual time: [`run_virtual`] runs a scenario
//! on the current executor with a [`SimClock`] installed, letting every
//! ready task run (a bounded number of turns) before moving time to the
//! next timer. With the in-memory network and journals nothing else wakes
//! a task, so a scenario's whole course is a function of its seed.

use std::cell::RefCell;
use std::future::Future;
use std::rc::Rc;
use std::time::Duration;

use openraft::AsyncRuntime;

use super::rt::{GlommioRt, SimClock};
use crate::local::yield_now;

/// Executor turns given to ready tasks before time moves on.
const TURNS_PER_STEP: usize = 64;

/// Runs `scenario` in virtual time seeded with `seed`, at most `limit` of
/// virtual time; `None` when it did not finish in time. Panics inside the
/// scenario propagate.
pub async fn run_virtual<T: 'static>(
    seed: u64,
    limit: Duration,
    scenario: impl Future<Output = T> + 'static,
) -> Option<T> {
    let clock = SimClock::install(seed);
    let done: Rc<RefCell<Option<std::thread::Result<T>>>> = Rc::new(RefCell::new(None));
    let slot = done.clone();
    let task = GlommioRt::spawn(async move {
        let outcome = futures::FutureExt::catch_unwind(std::panic::AssertUnwindSafe(scenario)).await;
        *slot.borrow_mut() = Some(outcome);
    });
    let finished = loop {
        for _ in 0..TURNS_PER_STEP {
            yield_now().await;
        }
        if done.borrow().is_some() {
            break true;
        }
        if clock.now() > limit || !clock.advance() {
            break false;
        }
    };
    drop(task);
    SimClock::uninstall();
    if !finished {
        return None;
    }
    let outcome = done.borrow_mut().take().expect("finished");
    match outcome {
        Ok(value) => Some(value),
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

/// Runs `scenario` in virtual time on a fresh executor of this thread
/// (see [`run_virtual`]).
pub fn run_seed<T: 'static>(
    seed: u64,
    limit: Duration,
    scenario: impl Future<Output = T> + 'static,
) -> Option<T> {
    let mut rt = GlommioRt::new(1);
    rt.block_on(run_virtual(seed, limit, scenario))
}
