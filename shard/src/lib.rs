//! `rill-shard`: one core's world.
//!
//! The crate is three layers, each a folder, with a few leaves below them
//! (imports only ever point down):
//!
//! * `runtime/`: the glommio side of a core: mailbox, dispatcher, group
//!   tasks, the commit queue, and the thin drivers of the protocols below.
//! * `protocol/`: the runtime's protocols (mutation admission, checkpoint
//!   runs, cold jobs) as sans-IO step machines the runtime and the
//!   simulation both drive.
//! * `packs/`: the cold tier's synchronous file work (writing, reading,
//!   removing and checking pack files) behind a pack-directory seam.
//! * `wal/`: the log seam and the write-ahead log: record format, devices,
//!   writer, recovery.
//! * `state/`: the pure group state machine and its vocabulary (API
//!   values, logged commands, names, integrity set-sums).
//! * leaves: errors, placement, `local/` (the single-threaded primitives
//!   every task uses), limits, metrics.
//!
//! The modules are private; what the `rill` crate needs is the face below
//! ([`api`], [`log`], [`node`] and the root re-exports). The `internals`
//! feature makes every module public for the benchmarks, the fuzzing and
//! simulation harness and the integration tests, and the `planted` feature
//! compiles in the harness's deliberate bugs ([`planted`] docs). Nothing
//! here knows about other cores; the `rill` crate wires cores together.
//!
//! The `unreachable_pub` lint is not enabled here: items the harnesses reach
//! through `internals` are `pub` inside modules that are private in the
//! default build, where that lint would flag them; the module privacy and
//! this face are what keep the surface small.

#![cfg_attr(not(feature = "internals"), warn(missing_docs))]

/// Declares the crate's modules: private, or public with `internals`.
macro_rules! modules {
    ($($(#[$meta:meta])* $name:ident),* $(,)?) => {$(
        $(#[$meta])*
        #[cfg(feature = "internals")]
        pub mod $name;
        $(#[$meta])*
        #[cfg(not(feature = "internals"))]
        mod $name;
    )*};
}

modules!(
    /// The one error type (SPEC §5).
    error,
    /// Every bound of the runtime.
    limits,
    /// Single-threaded primitives of a core's tasks.
    local,
    /// Per-core and per-group counters and histograms.
    metrics,
    /// The cold tier's file work.
    packs,
    /// Placement of streams on groups and cores.
    placement,
    /// Consensus: the one module that names openraft's types. Parts of it
    /// serve only the tests and the simulation (the in-memory network, the
    /// virtual clock).
    #[cfg_attr(not(feature = "internals"), allow(dead_code, unused_imports))]
    raft,
    /// The runtime's protocols as sans-IO step machines.
    protocol,
    /// One core's glommio runtime.
    runtime,
    /// The pure state machine and its vocabulary.
    state,
    /// The log seam and the write-ahead log.
    wal,
);

/// The one deterministic PRNG of every harness (tests and `internals`).
#[cfg(feature = "internals")]
pub mod rng;
#[cfg(all(test, not(feature = "internals")))]
mod rng;

/// Deliberately planted bugs for the harnesses (feature `planted`).
#[cfg(feature = "planted")]
pub mod planted;
#[cfg(not(feature = "planted"))]
mod planted;

pub use crate::error::{Error, ErrorClass, ErrorCode, ErrorKind, IoSource, Misplacement, Result};
pub use crate::limits::{
    Limits, MailboxFull, SpinPolicy, DEFAULT_MAX_BATCH_ITEMS, DEFAULT_MAX_PAYLOAD_BYTES,
};
pub use crate::metrics::{
    empty_histogram, CoreMetrics, CoreMetricsSnapshot, GroupMetrics, GroupMetricsSnapshot, LatencySummary,
};
pub use crate::placement::{placement_hash, placement_of, Placement};
pub use crate::protocol::checkpoint::CheckpointConfig;
pub use crate::protocol::cold::ColdConfig;
pub use crate::state::api;
pub use crate::state::group::{GroupLimits, GroupState};
pub use crate::state::integrity::{record_digest, Integrity, SetSum};
pub use crate::state::name::{validate_name, StreamId, MAX_NAME_LEN};
pub use crate::wal::{Durability, WalConfig, WalIo};

/// The log seam: what a core's log store implements (the write-ahead log,
/// the in-memory log, the tests' gated logs).
pub mod log {
    pub use crate::metrics::LogStats;
    pub use crate::wal::log::{EntryBody, LocalFuture, LogEntry, LogFactory, LogStore, Lsn, MemLog};
}

/// What the engine handle is built from: starting a core, its mailbox and
/// message vocabulary, the typed calls, recovery at open, the pack
/// directory.
pub mod node {
    pub use crate::packs::{cold_dir, remove_orphan_packs, FsPackDir, PackDir};
    pub use crate::runtime::calls;
    pub use crate::runtime::envelope::{ColdJob, CoreTask, Envelope, Letter, LetterBatch, Mail, Request};
    pub use crate::runtime::mailbox::{mailbox, MailboxSender};
    pub use crate::runtime::{run_core, system_clock, Clock, CoreSpec};
    pub use crate::wal::{recovery, WalLog};
}

/// What a replicated node is built from (the engine's cluster mode): the
/// groups' seeds at open, each core's cluster spec, the raft address's
/// acceptor and the member addresses.
pub mod cluster {
    pub use crate::raft::address_book::AddressBook;
    pub use crate::raft::identity::{
        parse_identity, render_identity, ClusterIdentity, Origin, IDENTITY_FILE,
    };
    pub use crate::raft::membership::{GroupMembers, MemberChange, MIN_VOTERS};
    pub use crate::raft::net::acceptor::{Acceptor, Incoming};
    pub use crate::raft::net::handshake::Hello;
    pub use crate::raft::node::{seed_groups, ClusterSpec, CoreCluster, GroupSeed};
    pub use crate::raft::replica::{timings, RaftConfig};
    pub use crate::raft::types::{Member, NodeId};
    pub use crate::runtime::envelope::MembersRequest;
}
