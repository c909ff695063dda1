//! # rill
//!
//! An embedded, thread-per-core, sharded storage engine for append-only
//! byte streams. Open an [`Engine`] on a data directory; it starts one
//! pinned executor per core, each owning a disjoint set of groups. Every
//! stream hashes to one group (see [`StreamId`] and [`Engine::locate`]), and
//! every request for it is served on that group's core, in order, with no
//! locks on the way.
//!
//! ```no_run
//! # async fn demo() -> Result<(), rill::Error> {
//! use rill::{Append, Config, Create, Engine, Read, StreamId};
//! let engine = Engine::open(Config::new("./rill-data"))?;
//! let id = StreamId::new("events", "orders")?;
//! engine.create(Create::new(id.clone()).content_type("application/json")).await?;
//! let put = engine.append(Append::new(id.clone(), &b"{\"n\":1}"[..])).await?;
//! let got = engine.read(Read::new(id).offset(put.start_offset)).await?;
//! assert_eq!(&got.payload[..], b"{\"n\":1}");
//! engine.shutdown().await?;
//! # Ok(()) }
//! ```
//!
//! This crate is the public face; the per-core world (state machine,
//! runtime, log seam) lives in `rill-shard` and is re-exported where a
//! caller needs it.

#![warn(missing_docs, unreachable_pub)]

mod admin;
mod cluster;
mod config;
pub mod consumer;
mod engine;
mod fork;
mod fork_keeper;
mod kick;
mod members;
mod metrics;
mod queues;
mod retention;
mod runtime;
mod shape;
mod subscribe;
mod timer;

#[cfg(feature = "server")]
pub mod server;

pub use admin::PurgeReport;
pub use cluster::{ClusterConfig, ClusterMember};
pub use config::{online_cpus, Config, DEFAULT_GROUPS, DEFAULT_IO_MEMORY_BYTES};
pub use engine::Engine;
pub use fork::MAX_FORK_COPY_BYTES;
pub use members::ClusterView;
pub use metrics::MetricsSnapshot;
pub use rill_shard::cluster::{GroupMembers, Member, MemberChange};
pub use rill_shard::CheckpointConfig;
pub use rill_shard::ColdConfig;
pub use rill_shard::{Durability, WalConfig, WalIo};
pub use shape::{LOCK_FILE, SHAPE_FILE};
pub use subscribe::{Subscribe, Subscription};

pub use rill_shard::api::{
    AcquireLease, AppSnapshot, Append, AppendBatch, AppendReply, Backlog, BatchReply, BootstrapReply, Close,
    CloseReply, Create, CreateReply, Delivery, Fork, ForkPoint, GroupSnapshot, HeadReply, Heartbeat, Lease,
    Membership, ProducerArgs, PublishSnapshot, QueuePolicy, Read, ReadReply, Receive, Reclaimed, Record,
    RecordMeta, RecordsReply, RetentionPolicy, SnapshotReply, Start, DEFAULT_CONTENT_TYPE,
    DEFAULT_READ_MAX_LEN, MAX_ATTRS_BYTES, MAX_CONSUMER_NAME_LEN, MAX_LEASE_TTL, MAX_RECEIVE_MESSAGES,
    MAX_RETENTION_AGE,
};
pub use rill_shard::{placement_hash, MAX_NAME_LEN};
pub use rill_shard::{record_digest, Integrity, SetSum};
pub use rill_shard::{CoreMetricsSnapshot, GroupMetricsSnapshot, LatencySummary};
pub use rill_shard::{
    Error, ErrorClass, ErrorCode, ErrorKind, IoSource, Misplacement, Placement, Result, StreamId,
};
pub use rill_shard::{Limits, MailboxFull, SpinPolicy};

/// Seams for tests and tools: the log store trait and its in-memory store.
pub mod seams {
    pub use rill_shard::log::{EntryBody, LocalFuture, LogEntry, LogFactory, LogStore, Lsn, MemLog};
    pub use rill_shard::node::{system_clock, Clock};
}
