//! The projection runner (SPEC §2 "Projection runner"): named
//! subscriptions, each a [`Reader`] feeding one handler, run together
//! until cancelled or until one of them fails.
//!
//! - A handler's error is retried after the [`Retry`] backoff (100 ms,
//!   500 ms, 2 s by default) up to `max_attempts` (3) in all; then the
//!   record is poison: that subscription commits what it had acked,
//!   releases its leases and stops, and the runner stops the others.
//! - Each subscription is its own future, polled concurrently by
//!   [`ProjectionRunner::run`] in the caller's task; the first one to fail
//!   stops the rest.
//! - Cancellation from outside ([`CancelToken`]) stops every subscription
//!   between records (or during a backoff): each commits its acks,
//!   releases its leases and leaves. A handler already running finishes.
//!   All of that gets `shutdown_grace` (10 s by default); past it the
//!   runner abandons what is left (those leases lapse after their TTL) and
//!   says so.
//! - A record is acked only after its handler succeeded, so a record is
//!   handled at least once; after a crash or a takeover the acks not yet
//!   committed are handled again.

use std::fmt::Display;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use futures::future::{select, BoxFuture, Either};
use futures::FutureExt;
use parking_lot::Mutex;

use crate::{Engine, Error, StreamId};

use super::cancel::CancelToken;
use super::config::ReaderConfig;
use super::reader::{Message, Reader};

/// How often and how patiently a failing handler is retried.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Retry {
    /// Attempts in all, the first included (at least 1).
    pub max_attempts: u32,
    /// The wait after the n-th failed attempt (the last one repeats).
    pub backoff: Vec<Duration>,
}

impl Default for Retry {
    fn default() -> Self {
        Retry {
            max_attempts: 3,
            backoff: vec![Duration::from_millis(100), Duration::from_millis(500), Duration::from_secs(2)],
        }
    }
}

impl Retry {
    fn wait_after(&self, attempt: u32) -> Duration {
        let i = (attempt.saturating_sub(1) as usize).min(self.backoff.len().saturating_sub(1));
        self.backoff.get(i).copied().unwrap_or(Duration::ZERO)
    }
}

/// What a handler's error says, kept as text for [`ProjectionError::Poison`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HandlerError(pub String);

impl<E: Display> From<E> for HandlerError {
    fn from(err: E) -> Self {
        HandlerError(err.to_string())
    }
}

/// Why [`ProjectionRunner::run`] stopped other than by cancellation.
#[derive(Debug)]
pub enum ProjectionError {
    /// A record failed every attempt of its handler.
    Poison {
        /// The subscription.
        subscription: String,
        /// The record's stream.
        stream: StreamId,
        /// The record's offset.
        offset: u64,
        /// Attempts made.
        attempts: u32,
        /// The last attempt's error.
        error: String,
    },
    /// The engine refused something the subscription cannot work around.
    Engine {
        /// The subscription.
        subscription: String,
        /// The engine's error.
        error: Error,
    },
    /// Two subscriptions were given one name.
    DuplicateSubscription(String),
    /// A subscription's settings cannot run (`BadRequest` inside).
    BadConfig {
        /// The subscription.
        subscription: String,
        /// What is wrong.
        error: Error,
    },
    /// Stopping took longer than the shutdown grace; the subscriptions
    /// still running were abandoned (their leases lapse after their TTL).
    GraceExceeded {
        /// The grace that ran out.
        grace: Duration,
    },
}

impl Display for ProjectionError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ProjectionError::Poison { subscription, stream, offset, attempts, error } => write!(
                f,
                "subscription {subscription}: the record at offset {offset} of {stream} failed {attempts} attempts \
                 (last: {error}); the subscription stopped"
            ),
            ProjectionError::Engine { subscription, error } => write!(f, "subscription {subscription}: {error}"),
            ProjectionError::DuplicateSubscription(name) => write!(f, "two subscriptions are named {name}"),
            ProjectionError::BadConfig { subscription, error } => {
                write!(f, "subscription {subscription} cannot run: {error}")
            }
            ProjectionError::GraceExceeded { grace } => write!(
                f,
                "the subscriptions did not stop within the {} ms shutdown grace and were abandoned",
                grace.as_millis()
            ),
        }
    }
}

impl std::error::Error for ProjectionError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            ProjectionError::Engine { error, .. } | ProjectionError::BadConfig { error, .. } => Some(error),
            _ => None,
        }
    }
}

type Handler = Box<dyn FnMut(Message) -> BoxFuture<'static, Result<(), HandlerError>> + Send>;

struct Subscription {
    name: String,
    config: ReaderConfig,
    handler: Handler,
}

/// Subscriptions and how they are run (see the module docs).
pub struct ProjectionRunner {
    engine: Engine,
    subscriptions: Vec<Subscription>,
    retry: Retry,
    grace: Duration,
}

impl std::fmt::Debug for ProjectionRunner {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let names: Vec<&str> = self.subscriptions.iter().map(|s| s.name.as_str()).collect();
        f.debug_struct("ProjectionRunner").field("subscriptions", &names).field("retry", &self.retry).finish()
    }
}

impl ProjectionRunner {
    /// A runner with no subscriptions, the default [`Retry`] and a 10 s
    /// shutdown grace.
    pub fn new(engine: &Engine) -> Self {
        ProjectionRunner {
            engine: engine.clone(),
            subscriptions: Vec::new(),
            retry: Retry::default(),
            grace: Duration::from_secs(10),
        }
    }

    /// How failing handlers are retried.
    pub fn retry(mut self, retry: Retry) -> Self {
        self.retry = retry;
        self
    }

    /// How long stopping may take before what is left is abandoned.
    pub fn shutdown_grace(mut self, grace: Duration) -> Self {
        self.grace = grace;
        self
    }

    /// Adds subscription `name`: a reader with `config` whose records go to
    /// `handler`, one at a time per subscription. A record is acked when
    /// the handler returns `Ok`.
    pub fn subscribe<H, F, E>(mut self, name: &str, config: ReaderConfig, mut handler: H) -> Self
    where
        H: FnMut(Message) -> F + Send + 'static,
        F: Future<Output = Result<(), E>> + Send + 'static,
        E: Into<HandlerError>,
    {
        let handler: Handler = Box::new(move |d| {
            let fut = handler(d);
            async move { fut.await.map_err(Into::into) }.boxed()
        });
        self.subscriptions.push(Subscription { name: name.to_string(), config, handler });
        self
    }

    /// Runs every subscription until `cancel` is cancelled (then `Ok`,
    /// once all have stopped cleanly) or one fails (then that failure,
    /// once the others have stopped).
    pub async fn run(self, cancel: CancelToken) -> Result<(), ProjectionError> {
        let ProjectionRunner { engine, subscriptions, retry, grace } = self;
        let mut names: Vec<&str> = subscriptions.iter().map(|s| s.name.as_str()).collect();
        names.sort_unstable();
        if let Some(w) = names.windows(2).find(|w| w[0] == w[1]) {
            return Err(ProjectionError::DuplicateSubscription(w[0].to_string()));
        }
        for s in &subscriptions {
            s.config
                .check()
                .map_err(|error| ProjectionError::BadConfig { subscription: s.name.clone(), error })?;
        }
        let failed = CancelToken::new();
        let first: Arc<Mutex<Option<ProjectionError>>> = Arc::default();
        let runs = subscriptions.into_iter().map(|s| {
            let (engine, retry, cancel, failed, first) =
                (engine.clone(), retry.clone(), cancel.clone(), failed.clone(), first.clone());
            async move {
                if let Err(err) = run_one(engine, s, retry, cancel, failed.clone()).await {
                    first.lock().get_or_insert(err);
                    failed.cancel();
                }
            }
        });
        let all = futures::future::join_all(runs);
        let stop_then_grace = {
            let (engine, cancel, failed) = (engine.clone(), cancel.clone(), failed.clone());
            async move {
                stopped(cancel, failed).await;
                let _ = engine.sleep(grace).await;
            }
        };
        futures::pin_mut!(all, stop_then_grace);
        let abandoned = matches!(select(all, stop_then_grace).await, Either::Right(_));
        if let Some(err) = first.lock().take() {
            return Err(err);
        }
        if abandoned {
            return Err(ProjectionError::GraceExceeded { grace });
        }
        Ok(())
    }
}

/// Completes when either token is cancelled.
async fn stopped(cancel: CancelToken, failed: CancelToken) {
    let (a, b) = (cancel.cancelled(), failed.cancelled());
    futures::pin_mut!(a, b);
    select(a, b).await;
}

/// Waits `d` unless the runner stops first; true when it stopped.
async fn backoff(engine: Engine, d: Duration, cancel: CancelToken, failed: CancelToken) -> bool {
    let sleep = engine.sleep(d);
    let stop = stopped(cancel, failed);
    futures::pin_mut!(sleep, stop);
    matches!(select(sleep, stop).await, Either::Right(_))
}

/// One subscription, from joining to leaving.
async fn run_one(
    engine: Engine,
    mut s: Subscription,
    retry: Retry,
    cancel: CancelToken,
    failed: CancelToken,
) -> Result<(), ProjectionError> {
    let name = s.name.clone();
    let engine_err = |error: Error| ProjectionError::Engine { subscription: name.clone(), error };
    let mut reader = Reader::join(&engine, s.config.clone()).await.map_err(engine_err)?;
    let outcome = 'records: loop {
        if cancel.is_cancelled() || failed.is_cancelled() {
            break Ok(());
        }
        let delivery = {
            let next = reader.next();
            let stop = stopped(cancel.clone(), failed.clone());
            futures::pin_mut!(next, stop);
            match select(next, stop).await {
                Either::Left((Ok(d), _)) => d,
                Either::Left((Err(err), _)) => break Err(engine_err(err)),
                Either::Right(_) => break Ok(()),
            }
        };
        let mut attempt = 0;
        loop {
            attempt += 1;
            match (s.handler)(delivery.clone()).await {
                Ok(()) => {
                    if let Err(err) = reader.ack(&delivery).await {
                        break 'records Err(engine_err(err));
                    }
                    break;
                }
                Err(HandlerError(error)) if attempt >= retry.max_attempts.max(1) => {
                    tracing::warn!(subscription = %s.name, stream = %delivery.stream, offset = delivery.record.offset, attempts = attempt, %error, "poison record stops the subscription");
                    break 'records Err(ProjectionError::Poison {
                        subscription: s.name.clone(),
                        stream: delivery.stream.clone(),
                        offset: delivery.record.offset,
                        attempts: attempt,
                        error,
                    });
                }
                Err(HandlerError(error)) => {
                    tracing::debug!(subscription = %s.name, attempt, %error, "handler failed; retrying");
                    let wait = retry.wait_after(attempt);
                    if backoff(engine.clone(), wait, cancel.clone(), failed.clone()).await {
                        // Stopped mid-retry: the record stays unacked and
                        // goes to whoever reads the stream next.
                        break 'records Ok(());
                    }
                }
            }
        }
    };
    // Commit what was acked (before a poison too), release, leave.
    let closed = reader.shutdown().await;
    match (outcome, closed) {
        (Err(err), _) => Err(err),
        (Ok(()), Err(error)) => Err(ProjectionError::Engine { subscription: s.name, error }),
        (Ok(()), Ok(())) => Ok(()),
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::Retry;

    #[test]
    fn the_backoff_follows_the_list_and_repeats_its_last_wait() {
        let r = Retry::default();
        assert_eq!(r.wait_after(1), Duration::from_millis(100));
        assert_eq!(r.wait_after(2), Duration::from_millis(500));
        assert_eq!(r.wait_after(3), Duration::from_secs(2));
        assert_eq!(r.wait_after(9), Duration::from_secs(2));
        assert_eq!(Retry { max_attempts: 1, backoff: vec![] }.wait_after(1), Duration::ZERO);
    }
}
