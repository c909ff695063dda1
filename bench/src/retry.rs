//! Backing off when rill pushes back.
//!
//! rill answers a request it cannot admit yet (a group holding its limit of
//! hot bytes until a flush catches up, a full queue) with an error of class
//! `Temporary`: back off and retry. The workloads do what a client should:
//! wait ([`BACKOFF_START`], doubling up to [`BACKOFF_MAX`]) and send the
//! same request again, counting each retry; the wait is part of the
//! request's latency, and the retry count is reported with the run. A
//! call that answers each of its items on its own (`Engine::append_many`)
//! is retried item by item ([`retrying_each`]): only the items that got a
//! temporary error are sent again.
//!
//! Waiting needs a timer that works under any executor (a plain
//! `block_on`, the open-loop drivers): [`Delay`] is a future completed by
//! one shared timer thread.

use std::future::Future;
use std::pin::Pin;
use std::sync::{Arc, Condvar, Mutex, OnceLock};
use std::task::{Context, Poll, Waker};
use std::time::{Duration, Instant};

/// First wait after a temporary error.
pub const BACKOFF_START: Duration = Duration::from_micros(500);
/// Longest wait between two attempts.
pub const BACKOFF_MAX: Duration = Duration::from_millis(16);

#[derive(Default)]
struct Timers {
    due: Mutex<Vec<(Instant, Waker)>>,
    changed: Condvar,
}

fn timers() -> &'static Arc<Timers> {
    static TIMERS: OnceLock<Arc<Timers>> = OnceLock::new();
    TIMERS.get_or_init(|| {
        let timers = Arc::new(Timers::default());
        let t = timers.clone();
        std::thread::Builder::new()
            .name("bench-timer".into())
            .spawn(move || {
                let mut due = t.due.lock().expect("timer lock");
                loop {
                    let now = Instant::now();
                    let mut i = 0;
                    while i < due.len() {
                        if due[i].0 <= now {
                            due.swap_remove(i).1.wake();
                        } else {
                            i += 1;
                        }
                    }
                    due = match due.iter().map(|(at, _)| *at).min() {
                        Some(at) => t.changed.wait_timeout(due, at - now).expect("timer lock").0,
                        None => t.changed.wait(due).expect("timer lock"),
                    };
                }
            })
            .expect("timer thread starts");
        timers
    })
}

/// Completes once its deadline has passed.
#[derive(Debug)]
pub struct Delay {
    at: Instant,
    registered: bool,
}

impl Delay {
    pub fn new(after: Duration) -> Delay {
        Delay { at: Instant::now() + after, registered: false }
    }
}

impl Future for Delay {
    type Output = ();

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
        if Instant::now() >= self.at {
            return Poll::Ready(());
        }
        if !self.registered {
            let t = timers();
            t.due.lock().expect("timer lock").push((self.at, cx.waker().clone()));
            t.changed.notify_one();
            self.registered = true;
        }
        Poll::Pending
    }
}

/// Calls `attempt` until it succeeds or fails with an error that is not
/// temporary, backing off in between; returns the last result and the
/// number of retries.
pub async fn retrying<T, F, Fut>(mut attempt: F) -> (rill::Result<T>, u64)
where
    F: FnMut() -> Fut,
    Fut: Future<Output = rill::Result<T>>,
{
    let mut retries = 0;
    let mut wait = BACKOFF_START;
    loop {
        match attempt().await {
            Err(e) if e.is_temporary() => {
                retries += 1;
                Delay::new(wait).await;
                wait = (wait * 2).min(BACKOFF_MAX);
            }
            other => return (other, retries),
        }
    }
}

/// [`retrying`] for a call of `n` items that answers each item on its own
/// (`Engine::append_many`). `attempt` gets the positions (in `0..n`) of the
/// items to send and answers one result per position, in order. Items that
/// failed with a temporary error are sent again, alone, after the backoff,
/// each counted as a retry, until none is left; a temporary error of the
/// whole call sends every pending item again. Returns each item's last
/// result at its position (any other error stays in its place), or the
/// whole call's error that was not temporary, and the retries.
pub async fn retrying_each<R, F, Fut>(n: usize, mut attempt: F) -> (rill::Result<Vec<rill::Result<R>>>, u64)
where
    F: FnMut(&[usize]) -> Fut,
    Fut: Future<Output = rill::Result<Vec<rill::Result<R>>>>,
{
    let mut results: Vec<Option<rill::Result<R>>> = (0..n).map(|_| None).collect();
    let mut pending: Vec<usize> = (0..n).collect();
    let mut retries = 0;
    let mut wait = BACKOFF_START;
    while !pending.is_empty() {
        let mut again = Vec::new();
        match attempt(&pending).await {
            Ok(answers) if answers.len() == pending.len() => {
                for (&i, answer) in pending.iter().zip(answers) {
                    match answer {
                        Err(e) if e.is_temporary() => again.push(i),
                        answer => results[i] = Some(answer),
                    }
                }
            }
            Ok(_) => {
                let what = "a call answered a different number of items than it was sent";
                return (Err(rill::Error::new(rill::ErrorKind::Internal { what })), retries);
            }
            Err(e) if e.is_temporary() => again = pending,
            Err(e) => return (Err(e), retries),
        }
        if !again.is_empty() {
            retries += again.len() as u64;
            Delay::new(wait).await;
            wait = (wait * 2).min(BACKOFF_MAX);
        }
        pending = again;
    }
    (Ok(results.into_iter().map(|r| r.expect("every item answered")).collect()), retries)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn delays_complete_in_deadline_order() {
        let started = Instant::now();
        futures::executor::block_on(async {
            let (a, b) =
                futures::join!(Delay::new(Duration::from_millis(20)), Delay::new(Duration::from_millis(5)));
            let _ = (a, b);
        });
        assert!(started.elapsed() >= Duration::from_millis(20));
    }

    #[test]
    fn retries_only_temporary_errors() {
        let mut calls = 0;
        let (r, retries) = futures::executor::block_on(retrying(|| {
            calls += 1;
            let n = calls;
            async move {
                if n < 3 {
                    Err(rill::Error::new(rill::ErrorKind::Overloaded { core: 0, capacity: 1 }))
                } else {
                    Ok(n)
                }
            }
        }));
        assert_eq!((r.ok(), retries), (Some(3), 2));
        let (r, retries) =
            futures::executor::block_on(retrying(|| async { Err::<(), _>(rill::Error::corrupted("no")) }));
        assert!(r.is_err() && retries == 0);
    }

    #[test]
    fn retries_only_the_items_that_got_a_temporary_error() {
        let overloaded = || rill::Error::new(rill::ErrorKind::Overloaded { core: 0, capacity: 1 });
        let mut sent: Vec<Vec<usize>> = Vec::new();
        let (r, retries) = futures::executor::block_on(retrying_each(4, |pending: &[usize]| {
            sent.push(pending.to_vec());
            let round = sent.len();
            let answers: Vec<rill::Result<usize>> = pending
                .iter()
                .map(|&i| match (round, i) {
                    (1, 1 | 3) | (2, 3) => Err(overloaded()),
                    (_, 2) => Err(rill::Error::corrupted("no")),
                    _ => Ok(i * 10),
                })
                .collect();
            async move { Ok(answers) }
        }));
        assert_eq!(sent, vec![vec![0, 1, 2, 3], vec![1, 3], vec![3]]);
        assert_eq!(retries, 3);
        let r = r.unwrap();
        assert_eq!(r.len(), 4);
        assert_eq!(
            (r[0].as_ref().ok(), r[1].as_ref().ok(), r[3].as_ref().ok()),
            (Some(&0), Some(&10), Some(&30))
        );
        assert!(r[2].is_err(), "a lasting error stays in its place");
        // A whole call's lasting error is the answer; a wrong count is an error.
        let (r, _) = futures::executor::block_on(retrying_each(2, |_: &[usize]| async {
            Err::<Vec<rill::Result<()>>, _>(rill::Error::corrupted("no"))
        }));
        assert!(r.is_err());
        let (r, _) = futures::executor::block_on(retrying_each(2, |_: &[usize]| async { Ok(vec![Ok(())]) }));
        assert!(r.is_err());
    }
}
