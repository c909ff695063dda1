//! The logged commands of consumer groups: fenced leases and committed
//! offsets (SPEC §2 "Leases and committed offsets"). Like every payload of
//! the log, their postcard encoding is the format (FORMAT.md "Command
//! body"): never reorder, remove or retype a field.

use serde::{Deserialize, Serialize};

use crate::state::api;
use crate::state::name::StreamId;

/// Acquire the lease of a consumer group on a stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseAcquire {
    /// The stream.
    pub id: StreamId,
    /// The consumer group.
    pub group: String,
    /// Who asks.
    pub owner: String,
    /// How long the lease lasts from the command's `now_ms`.
    pub ttl_ms: u64,
}

/// Renew a held lease.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRenew {
    /// The stream.
    pub id: StreamId,
    /// The consumer group.
    pub group: String,
    /// The holder the caller believes it is.
    pub owner: String,
    /// The generation the caller holds.
    pub generation: u64,
    /// The new time to live from the command's `now_ms`.
    pub ttl_ms: u64,
}

/// Release a held lease.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeaseRelease {
    /// The stream.
    pub id: StreamId,
    /// The consumer group.
    pub group: String,
    /// The holder the caller believes it is.
    pub owner: String,
    /// The generation the caller holds.
    pub generation: u64,
}

/// Commit a consumer group's offset under its lease.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffsetCommit {
    /// The stream.
    pub id: StreamId,
    /// The consumer group.
    pub group: String,
    /// The holder the caller believes it is.
    pub owner: String,
    /// The generation the caller holds.
    pub generation: u64,
    /// The next offset to read (exclusive).
    pub offset: u64,
}

impl From<api::AcquireLease> for LeaseAcquire {
    fn from(a: api::AcquireLease) -> Self {
        // A TTL too short or too long for the log's u64 ms is refused by
        // the state machine (0 ms, or above the maximum).
        let ttl_ms = u64::try_from(a.ttl.as_millis()).unwrap_or(u64::MAX);
        LeaseAcquire { id: a.id, group: a.consumer_group, owner: a.owner, ttl_ms }
    }
}

impl LeaseRenew {
    /// A renewal of `lease` for `ttl`.
    pub fn of(lease: &api::Lease, ttl: std::time::Duration) -> Self {
        LeaseRenew {
            id: lease.id.clone(),
            group: lease.consumer_group.clone(),
            owner: lease.owner.clone(),
            generation: lease.generation,
            ttl_ms: u64::try_from(ttl.as_millis()).unwrap_or(u64::MAX),
        }
    }
}

impl LeaseRelease {
    /// The release of `lease`.
    pub fn of(lease: &api::Lease) -> Self {
        LeaseRelease {
            id: lease.id.clone(),
            group: lease.consumer_group.clone(),
            owner: lease.owner.clone(),
            generation: lease.generation,
        }
    }
}

impl OffsetCommit {
    /// A commit of `offset` under `lease`.
    pub fn of(lease: &api::Lease, offset: u64) -> Self {
        OffsetCommit {
            id: lease.id.clone(),
            group: lease.consumer_group.clone(),
            owner: lease.owner.clone(),
            generation: lease.generation,
            offset,
        }
    }
}

/// A consumer's heartbeat in a consumer group's membership.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberHeartbeat {
    /// The bucket the consumer group reads.
    pub bucket: String,
    /// The consumer group.
    pub group: String,
    /// The consumer.
    pub consumer: String,
    /// How long the consumer counts as live from the command's `now_ms`.
    pub ttl_ms: u64,
}

/// A consumer leaving a consumer group's membership.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MemberLeave {
    /// The bucket the consumer group reads.
    pub bucket: String,
    /// The consumer group.
    pub group: String,
    /// The consumer.
    pub consumer: String,
}

impl From<api::Heartbeat> for MemberHeartbeat {
    fn from(h: api::Heartbeat) -> Self {
        let ttl_ms = u64::try_from(h.ttl.as_millis()).unwrap_or(u64::MAX);
        MemberHeartbeat { bucket: h.bucket, group: h.consumer_group, consumer: h.consumer, ttl_ms }
    }
}
