//! Every bound of the runtime in one place (SPEC §4, DESIGN "a limit on
//! everything").
//!
//! Each limit has a name, a default and a meaning; [`Limits::check`]
//! asserts the relationships between them when the engine opens, so a
//! configuration that could never work is refused with a clear error rather
//! than discovered under load.

use std::time::Duration;

use crate::error::{Error, Result};
use crate::state::command::{BATCH_ITEM_OVERHEAD_BYTES, COMMAND_OVERHEAD_BYTES};
use crate::state::group::GroupLimits;
use crate::wal::format::MAX_BODY_LEN;

/// Default `max_payload_bytes`.
pub const DEFAULT_MAX_PAYLOAD_BYTES: u64 = 16 << 20;
/// Default `max_batch_items`.
pub const DEFAULT_MAX_BATCH_ITEMS: usize = 4096;

/// What a sender does when a core's mailbox is full.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MailboxFull {
    /// Wait (asynchronously) for space. The event is still counted.
    Wait,
    /// Fail at once with `Overloaded` (a temporary error).
    Reject,
}

/// The tunable part of the policy (see [`Limits::spin`] and `runtime::spin`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct SpinPolicy {
    /// Spin while mail came within this long; zero turns spinning off.
    pub idle_spin: Duration,
    /// Most of each period the dispatcher may spend spinning, in percent.
    pub budget_percent: u32,
}

impl SpinPolicy {
    /// A policy that never spins.
    pub const OFF: SpinPolicy = SpinPolicy { idle_spin: Duration::ZERO, budget_percent: 0 };

    /// True when the policy may spin at all.
    pub fn enabled(&self) -> bool {
        !self.idle_spin.is_zero() && self.budget_percent > 0
    }
}

impl Default for SpinPolicy {
    /// Spin up to 50 µs after mail, at most a quarter of the time.
    fn default() -> Self {
        SpinPolicy { idle_spin: Duration::from_micros(50), budget_percent: 25 }
    }
}

/// Runtime bounds. All are per core or per group as named.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Requests queued in one core's mailbox.
    pub mailbox_capacity: usize,
    /// Policy when the mailbox is full.
    pub mailbox_full: MailboxFull,
    /// Requests queued inside a core for one group; beyond it the request
    /// fails with `Overloaded` so one stuck group cannot hoard the core.
    pub group_queue_depth: usize,
    /// Parked live readers per core (`LiveReadBackpressure` beyond).
    pub live_waiters_per_core: usize,
    /// Payload bytes of one group submitted to the log but not yet durable
    /// (`UncommittedBackpressure` beyond).
    pub max_uncommitted_bytes_per_group: u64,
    /// Largest payload of one append, one batch (summed) or one snapshot.
    pub max_payload_bytes: u64,
    /// Items in one append batch.
    pub max_batch_items: usize,
    /// Mail one dispatcher turn takes before yielding to group tasks.
    pub dispatch_batch: usize,
    /// How often each core looks for expired streams.
    pub expiry_sweep_interval_ms: u64,
    /// Bounds the state machine enforces itself.
    pub group: GroupLimits,
    /// When a core's dispatcher spins on an empty mailbox instead of
    /// parking ([`SpinPolicy::OFF`] never does).
    pub spin: SpinPolicy,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            mailbox_capacity: 16 * 1024,
            mailbox_full: MailboxFull::Wait,
            group_queue_depth: 8 * 1024,
            live_waiters_per_core: 64 * 1024,
            max_uncommitted_bytes_per_group: 64 << 20,
            max_payload_bytes: DEFAULT_MAX_PAYLOAD_BYTES,
            max_batch_items: DEFAULT_MAX_BATCH_ITEMS,
            dispatch_batch: 256,
            expiry_sweep_interval_ms: 1000,
            group: GroupLimits::default(),
            spin: SpinPolicy::default(),
        }
    }
}

impl Limits {
    /// The largest `max_payload_bytes` one log record can carry with these
    /// limits' `max_batch_items`.
    pub fn max_payload_for_log(&self) -> u64 {
        max_payload_for(self.max_batch_items)
    }

    /// Checks every limit and the relationships between them.
    pub fn check(&self) -> Result<()> {
        let positive = [
            ("mailbox_capacity", self.mailbox_capacity as u64),
            ("group_queue_depth", self.group_queue_depth as u64),
            ("max_uncommitted_bytes_per_group", self.max_uncommitted_bytes_per_group),
            ("max_payload_bytes", self.max_payload_bytes),
            ("max_batch_items", self.max_batch_items as u64),
            ("dispatch_batch", self.dispatch_batch as u64),
            ("expiry_sweep_interval_ms", self.expiry_sweep_interval_ms),
            ("max_streams_per_group", self.group.max_streams_per_group),
            ("max_read_bytes", self.group.max_read_bytes as u64),
            ("producer_window", self.group.producer_window as u64),
            ("max_producers_per_stream", self.group.max_producers_per_stream as u64),
            ("max_snapshots_per_stream", self.group.max_snapshots_per_stream as u64),
            ("max_consumer_groups_per_stream", self.group.max_consumer_groups_per_stream as u64),
            ("max_consumers_per_group", self.group.max_consumers_per_group as u64),
            ("max_dead_letters_per_group", self.group.max_dead_letters_per_group as u64),
        ];
        for (name, value) in positive {
            if value == 0 {
                return Err(Error::bad_request(format!("limit {name} must be positive")));
            }
        }
        if self.spin.budget_percent > 100 {
            return Err(Error::bad_request(format!(
                "spin budget_percent is {}; it is a share of time, at most 100",
                self.spin.budget_percent
            )));
        }
        if self.max_payload_bytes > self.max_uncommitted_bytes_per_group {
            return Err(Error::bad_request(
                "max_payload_bytes must not exceed max_uncommitted_bytes_per_group \
                 (one payload could never be admitted)",
            ));
        }
        if self.max_payload_bytes > self.group.max_hot_bytes {
            return Err(Error::bad_request(format!(
                "max_payload_bytes ({}) must not exceed max_hot_bytes_per_group ({}): a payload of \
                 the limit could never land in the hot tier",
                self.max_payload_bytes, self.group.max_hot_bytes
            )));
        }
        let largest = self.max_payload_for_log();
        if self.max_payload_bytes > largest {
            return Err(Error::bad_request(format!(
                "max_payload_bytes ({}) must be at most {largest}: the log's largest record body is {} \
                 bytes, less the command's own fields and {} batch item prefixes",
                self.max_payload_bytes, MAX_BODY_LEN, self.max_batch_items
            )));
        }
        Ok(())
    }
}

/// The largest `max_payload_bytes` a log record can carry with batches of
/// up to `max_batch_items` payloads.
pub fn max_payload_for(max_batch_items: usize) -> u64 {
    (MAX_BODY_LEN as u64)
        .saturating_sub(COMMAND_OVERHEAD_BYTES)
        .saturating_sub(max_batch_items as u64 * BATCH_ITEM_OVERHEAD_BYTES)
}

// The defaults relate as `Limits::check` requires (checked at compile time).
const _: () = {
    assert!(
        DEFAULT_MAX_PAYLOAD_BYTES
            + COMMAND_OVERHEAD_BYTES
            + DEFAULT_MAX_BATCH_ITEMS as u64 * BATCH_ITEM_OVERHEAD_BYTES
            <= MAX_BODY_LEN as u64
    );
};
