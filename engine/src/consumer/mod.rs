//! Consumers over the engine's consumer primitives (leases, committed
//! offsets, membership), all client-side: they run in the caller's task,
//! on any executor, and take their timers from the engine
//! ([`Engine::sleep`](crate::Engine::sleep)).
//!
//! - [`Reader`]: the coordinated reader, one member of a consumer group
//!   sharing a set of streams with the group's other live members
//!   (`reader.rs`; per-stream bookkeeping in `partition.rs`; settings in
//!   `config.rs`).
//! - [`ProjectionRunner`]: handlers over readers, with retries, poison,
//!   a shutdown grace and outside cancellation (`projection.rs`, with
//!   [`CancelToken`] in `cancel.rs`).
//! - [`target_partition_count`], the share of streams one member holds,
//!   and [`Start`], where a stream without a committed offset is read
//!   from (resolved by `Engine::start_offset`).

mod cancel;
mod config;
mod partition;
mod projection;
mod reader;

pub use cancel::{CancelToken, Cancelled};
pub use config::{FlushPolicy, ReaderConfig, DEFAULT_FETCH_BYTES, DEFAULT_READER_LEASE_TTL};
pub use projection::{HandlerError, ProjectionError, ProjectionRunner, Retry};
pub use reader::{Message, Reader, ReaderStats};

/// How many of `total` streams one of `live` consumers should hold: an
/// even share rounded up, plus `slack` so a rebalance does not thrash, and
/// never more than all of them: `min(total, ceil(total / max(live, 1)) +
/// slack)`.
pub fn target_partition_count(total: usize, live: usize, slack: usize) -> usize {
    total.min(total.div_ceil(live.max(1)).saturating_add(slack))
}

/// Where a reader without a committed offset starts: the one type the
/// queues share ([`crate::Start`]).
pub use rill_shard::api::Start;

#[cfg(test)]
mod tests {
    use super::target_partition_count;

    #[test]
    fn shares_round_up_take_slack_and_never_exceed_the_total() {
        assert_eq!(target_partition_count(10, 3, 0), 4);
        assert_eq!(target_partition_count(10, 3, 1), 5);
        assert_eq!(target_partition_count(9, 3, 0), 3);
        assert_eq!(target_partition_count(10, 0, 0), 10, "no live consumer counts as one");
        assert_eq!(target_partition_count(10, 1, 5), 10, "capped at the total");
        assert_eq!(target_partition_count(0, 4, 2), 0);
        assert_eq!(target_partition_count(3, 10, 0), 1);
        assert_eq!(target_partition_count(usize::MAX, 1, usize::MAX), usize::MAX);
    }
}
