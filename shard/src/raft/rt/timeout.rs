//! The named timeout future (openraft's runtime trait needs nameable
//! types) over the runtime's [`Sleep`]. A [`Timeout`] polls its future
//! first, so a future that is ready when the deadline passes still wins.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};


pub use super::clock::Sleep;

/// The deadline passed before the future finished.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TimeoutError;

impl fmt::Display for TimeoutError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("deadline passed")
    }
}

impl std::error::Error for TimeoutError {}

pin_project_lite::pin_project! {
    /// A future raced against a [`Sleep`].
    #[derive(Debug)]
    pub struct Timeout<F> {
        #[pin]
        future: F,
        sleep: Sleep,
    }
}

impl<F> Timeout<F> {
    pub(super) fn new(future: F, sleep: Sleep) -> Self {
        Self { future, sleep }
    }
}

impl<F: Future> Future for Timeout<F> {
    type Output = Result<F::Output, TimeoutError>;

    fn poll(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = self.project();
        if let Poll::Ready(value) = this.future.poll(cx) {
            return Poll::Ready(Ok(value));
        }
        Pin::new(this.sleep).poll(cx).map(|()| Err(TimeoutError))
    }
}
