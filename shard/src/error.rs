//! The one error type of the engine (SPEC §5).
//!
//! Every failure a caller can see is an [`Error`]: a typed [`ErrorKind`] with
//! structured context (offsets, sequence numbers, limits), an optional
//! [`Placement`] saying where the request was routed, a stable
//! [`ErrorCode`] and an [`ErrorClass`]. Callers match on `code()` or on the
//! kind, never on message text. The code of a kind never changes once
//! released; new kinds get new codes.
//!
//! An I/O error keeps the operating-system error it came from (its
//! [`std::error::Error::source`], and [`Error::io_kind`]); a `Corrupted`
//! error names the file and byte offset when the code that noticed it knows
//! them; a core whose log failed is [`ErrorKind::Poisoned`], so a caller can
//! tell "this request failed on I/O" from "this core stopped earlier".

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};

use crate::placement::Placement;

pub use rill_cold::IoSource;

/// How a caller should react to an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorClass {
    /// Backpressure or a transient limit: the same request may succeed later.
    Temporary,
    /// The request is wrong or conflicts with the stream's state: retrying the
    /// same request gives the same answer.
    Permanent,
    /// The engine is unhealthy (I/O failure, corruption, shut down): nothing
    /// will succeed until an operator intervenes.
    Persistent,
}

/// Stable, matchable identity of an error.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ErrorCode {
    /// No stream of that name exists in the bucket.
    StreamNotFound,
    /// No bucket of that name exists.
    BucketNotFound,
    /// The stream was deleted or expired while forks of it live: its name
    /// stays taken (a soft delete) until the last fork is gone.
    StreamGone,
    /// The stream exists with different settings.
    StreamConflict,
    /// An append's content type differs from the stream's.
    ContentTypeMismatch,
    /// The stream is closed: no appends are accepted.
    StreamClosed,
    /// A `Stream-Seq` not above the stream's last one.
    StreamSeqConflict,
    /// A producer's seq that is neither its next nor a remembered retry.
    ProducerSeqConflict,
    /// A producer epoch below the stream's current one.
    ProducerFenced,
    /// A retried producer seq older than the remembered window.
    ProducerDuplicateTooOld,
    /// An append without bytes.
    EmptyAppend,
    /// A bucket or stream name that breaks the naming rules.
    InvalidName,
    /// A request that is malformed in some other way.
    BadRequest,
    /// A payload above the configured limit.
    PayloadTooLarge,
    /// A read offset beyond the stream's tail.
    OffsetOutOfRange,
    /// A read offset below what retention keeps.
    OffsetGone,
    /// Record boundaries asked of bytes a pack format without them holds.
    NoRecordIndex,
    /// Another owner holds the consumer group's lease.
    LeaseHeld,
    /// The caller's lease is no longer the current one (another owner or
    /// generation holds the consumer group).
    OwnershipLost,
    /// The stream already has its limit of consumer groups.
    TooManyConsumerGroups,
    /// The consumer group already has its limit of live consumers.
    TooManyConsumers,
    /// The consumer group's name is taken by the other kind (lease or
    /// queue) on this stream.
    ConsumerGroupKindMismatch,
    /// A queue receipt that is not the latest delivery of a message in
    /// flight (acked already, redelivered since, or never issued).
    ReceiptNotFound,
    /// The queue group already holds its limit of dead letters.
    DeadLettersFull,
    /// A snapshot already exists at that offset.
    SnapshotConflict,
    /// No snapshot at that offset.
    SnapshotNotFound,
    /// The group holds as many streams as it may.
    TooManyStreams,
    /// Too many live readers wait on the core.
    LiveReadBackpressure,
    /// The group holds too many bytes not yet flushed cold.
    ColdBackpressure,
    /// The core's mailbox is full.
    Overloaded,
    /// The group holds too many bytes not yet durable.
    UncommittedBackpressure,
    /// A request or snapshot that does not fit where it was sent.
    PlacementMismatch,
    /// The data directory was written with another engine shape.
    ShapeMismatch,
    /// The data directory is open in another engine.
    DirectoryInUse,
    /// Bytes on disk are not what the engine wrote.
    Corrupted,
    /// An operating-system call failed.
    Io,
    /// The core stopped after its log failed.
    Poisoned,
    /// The engine is shut down.
    ShuttingDown,
    /// A broken invariant of the engine (a bug).
    Internal,
    /// This node's replica of the group is not its leader (replicated
    /// groups): send the request to the leader.
    NotLeader,
    /// The group's leader could not reach a quorum within the request
    /// timeout (replicated groups): a write may still commit later.
    NoQuorum,
    /// The outcome of a write is unknown after a leader change (replicated
    /// groups): retry it with an idempotent producer.
    Indeterminate,
}

impl ErrorCode {
    /// A stable, lowercase, snake_case name for logs and wire formats.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::StreamNotFound => "stream_not_found",
            ErrorCode::BucketNotFound => "bucket_not_found",
            ErrorCode::StreamGone => "stream_gone",
            ErrorCode::StreamConflict => "stream_conflict",
            ErrorCode::ContentTypeMismatch => "content_type_mismatch",
            ErrorCode::StreamClosed => "stream_closed",
            ErrorCode::StreamSeqConflict => "stream_seq_conflict",
            ErrorCode::ProducerSeqConflict => "producer_seq_conflict",
            ErrorCode::ProducerFenced => "producer_fenced",
            ErrorCode::ProducerDuplicateTooOld => "producer_duplicate_too_old",
            ErrorCode::EmptyAppend => "empty_append",
            ErrorCode::InvalidName => "invalid_name",
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::OffsetOutOfRange => "offset_out_of_range",
            ErrorCode::OffsetGone => "offset_gone",
            ErrorCode::NoRecordIndex => "no_record_index",
            ErrorCode::LeaseHeld => "lease_held",
            ErrorCode::OwnershipLost => "ownership_lost",
            ErrorCode::TooManyConsumerGroups => "too_many_consumer_groups",
            ErrorCode::TooManyConsumers => "too_many_consumers",
            ErrorCode::ConsumerGroupKindMismatch => "consumer_group_kind_mismatch",
            ErrorCode::ReceiptNotFound => "receipt_not_found",
            ErrorCode::DeadLettersFull => "dead_letters_full",
            ErrorCode::SnapshotConflict => "snapshot_conflict",
            ErrorCode::SnapshotNotFound => "snapshot_not_found",
            ErrorCode::TooManyStreams => "too_many_streams",
            ErrorCode::LiveReadBackpressure => "live_read_backpressure",
            ErrorCode::ColdBackpressure => "cold_backpressure",
            ErrorCode::Overloaded => "overloaded",
            ErrorCode::UncommittedBackpressure => "uncommitted_backpressure",
            ErrorCode::PlacementMismatch => "placement_mismatch",
            ErrorCode::ShapeMismatch => "shape_mismatch",
            ErrorCode::DirectoryInUse => "directory_in_use",
            ErrorCode::Corrupted => "corrupted",
            ErrorCode::Io => "io",
            ErrorCode::Poisoned => "poisoned",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::Internal => "internal",
            ErrorCode::NotLeader => "not_leader",
            ErrorCode::NoQuorum => "no_quorum",
            ErrorCode::Indeterminate => "indeterminate",
        }
    }

    /// The class every error of this code belongs to.
    pub fn class(self) -> ErrorClass {
        match self {
            ErrorCode::LiveReadBackpressure
            | ErrorCode::LeaseHeld
            | ErrorCode::DeadLettersFull
            | ErrorCode::ColdBackpressure
            | ErrorCode::DirectoryInUse
            | ErrorCode::Overloaded
            | ErrorCode::UncommittedBackpressure
            | ErrorCode::NotLeader
            | ErrorCode::NoQuorum
            | ErrorCode::Indeterminate => ErrorClass::Temporary,
            ErrorCode::Corrupted
            | ErrorCode::Io
            | ErrorCode::Poisoned
            | ErrorCode::ShuttingDown
            | ErrorCode::Internal => ErrorClass::Persistent,
            _ => ErrorClass::Permanent,
        }
    }
}

/// What went wrong, with the context a caller needs to react without parsing
/// text.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    /// No stream `stream` exists in bucket `bucket`.
    StreamNotFound {
        /// The bucket named.
        bucket: String,
        /// The stream named.
        stream: String,
    },
    /// No bucket `bucket` exists.
    BucketNotFound {
        /// The bucket named.
        bucket: String,
    },
    /// Stream `stream` of bucket `bucket` was deleted or expired while
    /// forks of it live (a soft delete): it cannot be read, written,
    /// deleted, re-created or forked until the last fork is gone.
    StreamGone {
        /// The bucket named.
        bucket: String,
        /// The stream named.
        stream: String,
    },
    /// The stream exists with different settings; `field` names the first
    /// setting that differs.
    StreamConflict {
        /// The first setting that differs.
        field: &'static str,
    },
    /// An append's content type differs from the stream's.
    ContentTypeMismatch {
        /// The stream's content type.
        expected: String,
        /// The append's content type.
        received: String,
    },
    /// The stream is closed; `next_offset` is its final tail.
    StreamClosed {
        /// The closed stream's tail.
        next_offset: u64,
    },
    /// A `Stream-Seq` that does not sort above the stream's last one.
    StreamSeqConflict {
        /// The last seq the stream accepted.
        last: String,
        /// The request's seq.
        received: String,
    },
    /// A producer seq that is neither the producer's next one nor a retry it remembers.
    ProducerSeqConflict {
        /// The seq the stream expects next.
        expected: u64,
        /// The request's seq.
        received: u64,
    },
    /// A producer epoch below the current one: a newer producer took over.
    ProducerFenced {
        /// The stream's current epoch for the producer.
        current_epoch: u64,
        /// The request's epoch.
        received_epoch: u64,
    },
    /// A retried producer seq older than the remembered window: it was
    /// accepted once, but its offsets are no longer known.
    ProducerDuplicateTooOld {
        /// The request's seq.
        seq: u64,
        /// The oldest seq still remembered.
        oldest_remembered: u64,
    },
    /// An append without bytes.
    EmptyAppend,
    /// A bucket or stream name that breaks the naming rules (SPEC §1).
    InvalidName {
        /// Which name (`bucket` or `stream`).
        field: &'static str,
        /// The rule it breaks.
        reason: &'static str,
    },
    /// A request malformed in a way no other kind names.
    BadRequest {
        /// What is wrong.
        reason: String,
    },
    /// A payload above the configured limit.
    PayloadTooLarge {
        /// The payload's length in bytes.
        len: u64,
        /// The limit in bytes.
        limit: u64,
    },
    /// A read offset beyond the stream's tail.
    OffsetOutOfRange {
        /// The offset asked for.
        offset: u64,
        /// The stream's tail.
        tail: u64,
    },
    /// A read offset below what retention keeps.
    OffsetGone {
        /// The offset asked for.
        offset: u64,
        /// The lowest offset still kept.
        retained: u64,
    },
    /// A record read or `offset_at` reached bytes flushed by a pack format
    /// that keeps no record boundaries (version 1); read them as bytes.
    NoRecordIndex {
        /// First offset of the flushed range without boundaries.
        offset: u64,
        /// The pack file holding it.
        file: String,
    },
    /// Another owner holds the consumer group's lease until
    /// `expires_at_ms`.
    LeaseHeld {
        /// The consumer group.
        consumer_group: String,
        /// Its current holder.
        holder: String,
        /// When the holder's lease lapses (group clock, Unix ms).
        expires_at_ms: u64,
    },
    /// The caller's lease is not the consumer group's current one.
    OwnershipLost {
        /// The consumer group.
        consumer_group: String,
        /// The generation the caller presented.
        generation: u64,
        /// The group's current generation (0: the consumer group does not
        /// exist).
        current_generation: u64,
    },
    /// The stream already has `limit` consumer groups.
    TooManyConsumerGroups {
        /// `max_consumer_groups_per_stream`.
        limit: u64,
    },
    /// The consumer group already has `limit` live consumers.
    TooManyConsumers {
        /// `max_consumers_per_group`.
        limit: u64,
    },
    /// `consumer_group` is a group of kind `is` on this stream, asked for
    /// as kind `wanted` ("lease" or "queue").
    ConsumerGroupKindMismatch {
        /// The consumer group.
        consumer_group: String,
        /// What it is.
        is: &'static str,
        /// What the request needs.
        wanted: &'static str,
    },
    /// `receipt` is not the latest delivery of a message in flight of
    /// queue group `consumer_group`.
    ReceiptNotFound {
        /// The consumer group.
        consumer_group: String,
        /// The receipt presented.
        receipt: u64,
    },
    /// Queue group `consumer_group` already holds `limit` dead letters
    /// (purge or redrive them).
    DeadLettersFull {
        /// The consumer group.
        consumer_group: String,
        /// `max_dead_letters_per_group`.
        limit: u64,
    },
    /// A snapshot already exists at `offset`.
    SnapshotConflict {
        /// The snapshot's offset.
        offset: u64,
    },
    /// No snapshot exists at `offset`.
    SnapshotNotFound {
        /// The offset asked for.
        offset: u64,
    },
    /// The group holds as many streams as it may.
    TooManyStreams {
        /// The per-group stream limit.
        limit: u64,
    },
    /// Too many live readers already wait on core `core`.
    LiveReadBackpressure {
        /// The core.
        core: usize,
        /// The per-core live-reader limit.
        limit: usize,
    },
    /// The group holds too many bytes not yet flushed to cold segments.
    ColdBackpressure {
        /// Unflushed bytes now.
        before: u64,
        /// Unflushed bytes the request would leave.
        after: u64,
        /// The per-group limit.
        limit: u64,
    },
    /// Core `core`'s mailbox is full.
    Overloaded {
        /// The core.
        core: usize,
        /// The mailbox's capacity.
        capacity: usize,
    },
    /// Group `group` would hold too many bytes not yet durable.
    UncommittedBackpressure {
        /// The group.
        group: u32,
        /// Uncommitted bytes now.
        before: u64,
        /// Uncommitted bytes the request would leave.
        after: u64,
        /// The per-group limit.
        limit: u64,
    },
    /// A request or a group snapshot for `group` does not fit where it was
    /// sent; `mismatch` says how.
    PlacementMismatch {
        /// The group the request or snapshot was for.
        group: u32,
        /// How it does not fit.
        mismatch: Misplacement,
    },
    /// The data directory was written with another engine shape.
    ShapeMismatch {
        /// Which setting differs (`cores`, `groups`).
        field: &'static str,
        /// The value on record.
        recorded: u64,
        /// The value asked for.
        requested: u64,
    },
    /// Another engine (in this or another process) has the data directory
    /// open.
    DirectoryInUse {
        /// The data directory.
        path: String,
    },
    /// Bytes the engine wrote earlier are not what it wrote: a checksum
    /// mismatch, a bad magic or version, a log that disagrees with its
    /// checkpoint. `what` says which check failed; `file` and `offset` name
    /// the file and the byte offset in it when the code that noticed knows
    /// them (a WAL segment and a record's offset, a pack, a checkpoint).
    Corrupted {
        /// Which check failed.
        what: String,
        /// The file, when known.
        file: Option<PathBuf>,
        /// The byte offset in the file, when known.
        offset: Option<u64>,
    },
    /// An operating-system call failed. `op` names the operation ("wal
    /// fdatasync", "create pack file", ...), `io_kind` is the error's
    /// [`io::ErrorKind`], `path` the file or directory it was about when
    /// known, and `source` the error itself (also the error's
    /// [`std::error::Error::source`]). Two `Io` errors are equal when `op`,
    /// `io_kind` and `path` are: the source compares by its kind only.
    Io {
        /// The operation that failed.
        op: &'static str,
        /// The operating-system error's kind.
        io_kind: io::ErrorKind,
        /// The file or directory, when known.
        path: Option<PathBuf>,
        /// The operating-system error.
        source: IoSource,
    },
    /// Core `core` stopped accepting requests because its log failed
    /// earlier: `cause` is that failure (the error the request that hit it
    /// got, usually `Io`). Every request the core receives afterwards gets
    /// this error; only reopening the engine (after an operator fixed the
    /// device) clears it.
    Poisoned {
        /// The stopped core.
        core: usize,
        /// The failure that stopped it.
        cause: Box<Error>,
    },
    /// The engine is shut down (or shutting down).
    ShuttingDown,
    /// A broken invariant of the engine itself (a bug: please report it);
    /// `what` names where it was noticed.
    Internal {
        /// Where it was noticed.
        what: &'static str,
    },
    /// This node's replica of `group` is not its leader; `leader` is the
    /// leader's node id when this node knows it.
    NotLeader {
        /// The replicated group.
        group: u32,
        /// The leader's node id, when known.
        leader: Option<u64>,
    },
    /// `group`'s leader could not commit within `waited_ms`: no quorum of
    /// replicas answered. A write that got this may still commit later.
    NoQuorum {
        /// The replicated group.
        group: u32,
        /// How long the request waited.
        waited_ms: u64,
    },
    /// The outcome of a write to `group` is unknown: leadership changed
    /// while it was in flight. Retrying with an idempotent producer is safe.
    Indeterminate {
        /// The replicated group.
        group: u32,
    },
}

impl ErrorKind {
    /// The error's stable code.
    pub fn code(&self) -> ErrorCode {
        match self {
            ErrorKind::StreamNotFound { .. } => ErrorCode::StreamNotFound,
            ErrorKind::StreamGone { .. } => ErrorCode::StreamGone,
            ErrorKind::BucketNotFound { .. } => ErrorCode::BucketNotFound,
            ErrorKind::StreamConflict { .. } => ErrorCode::StreamConflict,
            ErrorKind::ContentTypeMismatch { .. } => ErrorCode::ContentTypeMismatch,
            ErrorKind::StreamClosed { .. } => ErrorCode::StreamClosed,
            ErrorKind::StreamSeqConflict { .. } => ErrorCode::StreamSeqConflict,
            ErrorKind::ProducerSeqConflict { .. } => ErrorCode::ProducerSeqConflict,
            ErrorKind::ProducerFenced { .. } => ErrorCode::ProducerFenced,
            ErrorKind::ProducerDuplicateTooOld { .. } => ErrorCode::ProducerDuplicateTooOld,
            ErrorKind::EmptyAppend => ErrorCode::EmptyAppend,
            ErrorKind::InvalidName { .. } => ErrorCode::InvalidName,
            ErrorKind::BadRequest { .. } => ErrorCode::BadRequest,
            ErrorKind::PayloadTooLarge { .. } => ErrorCode::PayloadTooLarge,
            ErrorKind::OffsetOutOfRange { .. } => ErrorCode::OffsetOutOfRange,
            ErrorKind::OffsetGone { .. } => ErrorCode::OffsetGone,
            ErrorKind::NoRecordIndex { .. } => ErrorCode::NoRecordIndex,
            ErrorKind::LeaseHeld { .. } => ErrorCode::LeaseHeld,
            ErrorKind::OwnershipLost { .. } => ErrorCode::OwnershipLost,
            ErrorKind::TooManyConsumerGroups { .. } => ErrorCode::TooManyConsumerGroups,
            ErrorKind::TooManyConsumers { .. } => ErrorCode::TooManyConsumers,
            ErrorKind::ConsumerGroupKindMismatch { .. } => ErrorCode::ConsumerGroupKindMismatch,
            ErrorKind::ReceiptNotFound { .. } => ErrorCode::ReceiptNotFound,
            ErrorKind::DeadLettersFull { .. } => ErrorCode::DeadLettersFull,
            ErrorKind::SnapshotConflict { .. } => ErrorCode::SnapshotConflict,
            ErrorKind::SnapshotNotFound { .. } => ErrorCode::SnapshotNotFound,
            ErrorKind::TooManyStreams { .. } => ErrorCode::TooManyStreams,
            ErrorKind::LiveReadBackpressure { .. } => ErrorCode::LiveReadBackpressure,
            ErrorKind::ColdBackpressure { .. } => ErrorCode::ColdBackpressure,
            ErrorKind::Overloaded { .. } => ErrorCode::Overloaded,
            ErrorKind::UncommittedBackpressure { .. } => ErrorCode::UncommittedBackpressure,
            ErrorKind::PlacementMismatch { .. } => ErrorCode::PlacementMismatch,
            ErrorKind::ShapeMismatch { .. } => ErrorCode::ShapeMismatch,
            ErrorKind::DirectoryInUse { .. } => ErrorCode::DirectoryInUse,
            ErrorKind::Corrupted { .. } => ErrorCode::Corrupted,
            ErrorKind::Io { .. } => ErrorCode::Io,
            ErrorKind::Poisoned { .. } => ErrorCode::Poisoned,
            ErrorKind::ShuttingDown => ErrorCode::ShuttingDown,
            ErrorKind::Internal { .. } => ErrorCode::Internal,
            ErrorKind::NotLeader { .. } => ErrorCode::NotLeader,
            ErrorKind::NoQuorum { .. } => ErrorCode::NoQuorum,
            ErrorKind::Indeterminate { .. } => ErrorCode::Indeterminate,
        }
    }
}

/// How a request or a group snapshot does not fit where it was sent (the
/// detail of [`ErrorKind::PlacementMismatch`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Misplacement {
    /// The group id is not below the engine's group count.
    NoSuchGroup {
        /// The engine's group count.
        group_count: u32,
    },
    /// The request reached core `reached`, which does not home the group.
    NotHomed {
        /// The core the request reached.
        reached: usize,
    },
    /// The snapshot holds group `snapshot_group` of an engine of
    /// `snapshot_group_count` groups; the target group is in an engine of
    /// `group_count` groups.
    ForeignSnapshot {
        /// The group the snapshot holds.
        snapshot_group: u32,
        /// The group count of the engine it was taken from.
        snapshot_group_count: u32,
        /// The target engine's group count.
        group_count: u32,
    },
}

/// The engine's error: a kind with context, plus where the request went.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Error {
    kind: Box<ErrorKind>,
    placement: Option<Placement>,
}

/// Shorthand used throughout the workspace.
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// An error of `kind`, routed nowhere yet.
    pub fn new(kind: ErrorKind) -> Self {
        Error { kind: Box::new(kind), placement: None }
    }

    /// Attach the placement the request was routed to.
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.placement = Some(placement);
        self
    }

    /// What went wrong, with its context.
    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    /// The error's stable code.
    pub fn code(&self) -> ErrorCode {
        self.kind.code()
    }

    /// How a caller should react.
    pub fn class(&self) -> ErrorClass {
        self.code().class()
    }

    /// Where the request was routed, when it got that far.
    pub fn placement(&self) -> Option<Placement> {
        self.placement
    }

    /// True when retrying later may succeed.
    pub fn is_temporary(&self) -> bool {
        self.class() == ErrorClass::Temporary
    }

    /// A `BadRequest` error saying `reason`.
    pub fn bad_request(reason: impl Into<String>) -> Self {
        Error::new(ErrorKind::BadRequest { reason: reason.into() })
    }

    /// A `Corrupted` error saying `what`, about no file or offset yet (see
    /// [`Error::in_file`] and [`Error::at_offset`]).
    pub fn corrupted(what: impl Into<String>) -> Self {
        Error::new(ErrorKind::Corrupted { what: what.into(), file: None, offset: None })
    }

    /// An `Io` error from a failed `op`, keeping `err` as its source.
    pub fn io(op: &'static str, err: io::Error) -> Self {
        Error::new(ErrorKind::Io { op, io_kind: err.kind(), path: None, source: IoSource::new(err) })
    }

    /// An `Io` error from a failed `op` on `path`, keeping `err` as its
    /// source.
    pub fn io_at(op: &'static str, path: &Path, err: io::Error) -> Self {
        Error::io(op, err).in_file(path)
    }

    /// The `Poisoned` error of core `core`, stopped by `cause`.
    pub fn poisoned(core: usize, cause: Error) -> Self {
        Error::new(ErrorKind::Poisoned { core, cause: Box::new(cause) })
    }

    /// The same error, naming `file` as the file it concerns: the `file` of
    /// a `Corrupted` error or the `path` of an `Io` error, unless it names
    /// one already. Other kinds are returned unchanged.
    pub fn in_file(mut self, file: &Path) -> Self {
        match &mut *self.kind {
            ErrorKind::Corrupted { file: named @ None, .. } | ErrorKind::Io { path: named @ None, .. } => {
                *named = Some(file.to_path_buf());
            }
            _ => {}
        }
        self
    }

    /// The same error, naming `offset` as the byte offset of a `Corrupted`
    /// error (unless it names one already). Other kinds are returned
    /// unchanged.
    pub fn at_offset(mut self, offset: u64) -> Self {
        if let ErrorKind::Corrupted { offset: named @ None, .. } = &mut *self.kind {
            *named = Some(offset);
        }
        self
    }

    /// The [`io::ErrorKind`] of an `Io` error (`None` for every other kind,
    /// `Poisoned` included: its cause is in the kind).
    pub fn io_kind(&self) -> Option<io::ErrorKind> {
        match &*self.kind {
            ErrorKind::Io { io_kind, .. } => Some(*io_kind),
            _ => None,
        }
    }
}

/// The cold tier's errors: `Corrupted` and `Io` keep their kind, their file
/// and (for `Io`) the operating-system error; the rest (invalid input, a
/// missing slice) mean a pack does not hold what the state says it does, so
/// they are `Corrupted` too.
impl From<rill_cold::ColdError> for Error {
    fn from(err: rill_cold::ColdError) -> Self {
        let error = match err.kind().clone() {
            rill_cold::ColdErrorKind::Corrupted { what } => Error::corrupted(what),
            rill_cold::ColdErrorKind::Io { op, io_kind, source } => Error::new(ErrorKind::Io {
                op,
                io_kind,
                path: None,
                source,
            }),
            _ => Error::corrupted(format!("cold tier: {}", err.kind())),
        };
        match err.file() {
            Some(file) => error.in_file(file),
            None => error,
        }
    }
}

impl From<ErrorKind> for Error {
    fn from(kind: ErrorKind) -> Self {
        Error::new(kind)
    }
}

impl fmt::Display for Error {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: ", self.code().as_str())?;
        match &*self.kind {
            ErrorKind::StreamNotFound { bucket, stream } => {
                write!(f, "stream {bucket:?}/{stream:?} not found")
            }
            ErrorKind::BucketNotFound { bucket } => write!(f, "bucket {bucket:?} not found"),
            ErrorKind::StreamGone { bucket, stream } => write!(
                f,
                "stream {bucket:?}/{stream:?} was deleted and is kept only for its forks (soft-deleted)"
            ),
            ErrorKind::StreamConflict { field } => {
                write!(f, "stream exists with a different {field}")
            }
            ErrorKind::ContentTypeMismatch { expected, received } => {
                write!(f, "stream content type is {expected:?}, request has {received:?}")
            }
            ErrorKind::StreamClosed { next_offset } => {
                write!(f, "stream is closed at offset {next_offset}")
            }
            ErrorKind::StreamSeqConflict { last, received } => {
                write!(f, "stream_seq {received:?} is not above the last accepted {last:?}")
            }
            ErrorKind::ProducerSeqConflict { expected, received } => {
                write!(f, "producer seq {received} received, {expected} expected")
            }
            ErrorKind::ProducerFenced { current_epoch, received_epoch } => {
                write!(f, "producer epoch {received_epoch} is fenced by epoch {current_epoch}")
            }
            ErrorKind::ProducerDuplicateTooOld { seq, oldest_remembered } => write!(
                f,
                "producer seq {seq} was accepted earlier but is older than the remembered window (oldest {oldest_remembered})"
            ),
            ErrorKind::EmptyAppend => write!(f, "empty append without close_after"),
            ErrorKind::InvalidName { field, reason } => write!(f, "invalid {field}: {reason}"),
            ErrorKind::BadRequest { reason } => write!(f, "bad request: {reason}"),
            ErrorKind::PayloadTooLarge { len, limit } => {
                write!(f, "payload of {len} bytes exceeds the limit of {limit}")
            }
            ErrorKind::OffsetOutOfRange { offset, tail } => {
                write!(f, "offset {offset} is beyond the tail {tail}")
            }
            ErrorKind::OffsetGone { offset, retained } => {
                write!(f, "offset {offset} is before the retained start {retained}")
            }
            ErrorKind::NoRecordIndex { offset, file } => write!(
                f,
                "the bytes from offset {offset} were flushed to {file} by pack format 1, \
                 which keeps no record boundaries or times (format 3 does); read them as bytes"
            ),
            ErrorKind::SnapshotConflict { offset } => {
                write!(f, "a different snapshot exists at offset {offset}")
            }
            ErrorKind::SnapshotNotFound { offset } => write!(f, "no snapshot at or below {offset}"),
            ErrorKind::LeaseHeld { consumer_group, holder, expires_at_ms } => write!(
                f,
                "consumer group {consumer_group:?} is leased to {holder:?} until {expires_at_ms} ms"
            ),
            ErrorKind::OwnershipLost { consumer_group, generation, current_generation } => write!(
                f,
                "the lease of consumer group {consumer_group:?} at generation {generation} is no longer held \
                 (current generation {current_generation})"
            ),
            ErrorKind::TooManyConsumerGroups { limit } => {
                write!(f, "the stream already has its limit of {limit} consumer groups")
            }
            ErrorKind::TooManyConsumers { limit } => {
                write!(f, "the consumer group already has its limit of {limit} live consumers")
            }
            ErrorKind::ConsumerGroupKindMismatch { consumer_group, is, wanted } => write!(
                f,
                "consumer group {consumer_group:?} is a {is} group on this stream; a {wanted} group needs another name"
            ),
            ErrorKind::ReceiptNotFound { consumer_group, receipt } => write!(
                f,
                "receipt {receipt} is not a delivery in flight of queue group {consumer_group:?} (acked, redelivered \
                 since, or never issued)"
            ),
            ErrorKind::DeadLettersFull { consumer_group, limit } => write!(
                f,
                "queue group {consumer_group:?} already holds its limit of {limit} dead letters; purge or redrive them"
            ),
            ErrorKind::TooManyStreams { limit } => {
                write!(f, "the group already holds its limit of {limit} streams")
            }
            ErrorKind::LiveReadBackpressure { core, limit } => {
                write!(f, "core {core} already parks its limit of {limit} live readers")
            }
            ErrorKind::ColdBackpressure { before, after, limit } => write!(
                f,
                "the group would hold {after} hot bytes (now {before}, limit {limit}) until flush catches up"
            ),
            ErrorKind::Overloaded { core, capacity } => {
                write!(f, "mailbox of core {core} is full (capacity {capacity})")
            }
            ErrorKind::UncommittedBackpressure { group, before, after, limit } => write!(
                f,
                "group {group} would hold {after} uncommitted bytes (now {before}, limit {limit})"
            ),
            ErrorKind::PlacementMismatch { group, mismatch } => match mismatch {
                Misplacement::NoSuchGroup { group_count } => {
                    write!(f, "there is no group {group}: the engine has {group_count} groups")
                }
                Misplacement::NotHomed { reached } => {
                    write!(f, "a request for group {group} reached core {reached}, which does not home it")
                }
                Misplacement::ForeignSnapshot { snapshot_group, snapshot_group_count, group_count } => write!(
                    f,
                    "a snapshot of group {snapshot_group} of {snapshot_group_count} groups cannot replace group \
                     {group} of {group_count} groups"
                ),
            },
            ErrorKind::ShapeMismatch { field, recorded, requested } => write!(
                f,
                "engine shape mismatch: {field} is {recorded} on record, {requested} requested"
            ),
            ErrorKind::DirectoryInUse { path } => write!(f, "data directory {path} is open in another engine"),
            ErrorKind::Corrupted { what, file, offset } => {
                f.write_str("corrupted: ")?;
                match (file, offset) {
                    (Some(file), Some(offset)) => write!(f, "{} at offset {offset}: ", file.display())?,
                    (Some(file), None) => write!(f, "{}: ", file.display())?,
                    (None, Some(offset)) => write!(f, "at offset {offset}: ")?,
                    (None, None) => {}
                }
                f.write_str(what)
            }
            ErrorKind::Io { op, path, source, .. } => match path {
                Some(path) => write!(f, "i/o failure during {op} on {}: {source}", path.display()),
                None => write!(f, "i/o failure during {op}: {source}"),
            },
            ErrorKind::Poisoned { core, cause } => {
                write!(f, "core {core} refuses requests since its log failed ({cause})")
            }
            ErrorKind::ShuttingDown => write!(f, "the engine is shut down"),
            ErrorKind::Internal { what } => write!(f, "internal error in {what} (a bug in the engine)"),
            ErrorKind::NotLeader { group, leader: Some(leader) } => {
                write!(f, "this node does not lead group {group}; node {leader} does")
            }
            ErrorKind::NotLeader { group, leader: None } => {
                write!(f, "this node does not lead group {group}, and no leader is known yet")
            }
            ErrorKind::NoQuorum { group, waited_ms } => write!(
                f,
                "group {group} could not reach a quorum of replicas within {waited_ms} ms (a write may still commit)"
            ),
            ErrorKind::Indeterminate { group } => write!(
                f,
                "the outcome of the write to group {group} is unknown after a leader change (retry with an idempotent producer)"
            ),
        }?;
        if let Some(p) = self.placement {
            write!(f, " (core {}, group {})", p.core, p.group)?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {
    /// The operating-system error of an `Io` error; the failure that stopped
    /// the core of a `Poisoned` one.
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match &*self.kind {
            ErrorKind::Io { source, .. } => Some(source.get()),
            ErrorKind::Poisoned { cause, .. } => Some(&**cause),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // SPEC §5: every code has exactly one class; backpressure is temporary,
    // request errors permanent, engine health persistent.
    #[test]
    fn classes_follow_spec_section_5() {
        assert_eq!(ErrorCode::LiveReadBackpressure.class(), ErrorClass::Temporary);
        assert_eq!(ErrorCode::Overloaded.class(), ErrorClass::Temporary);
        assert_eq!(ErrorCode::ColdBackpressure.class(), ErrorClass::Temporary);
        assert_eq!(ErrorCode::StreamNotFound.class(), ErrorClass::Permanent);
        assert_eq!(ErrorCode::ProducerFenced.class(), ErrorClass::Permanent);
        assert_eq!(ErrorCode::Corrupted.class(), ErrorClass::Persistent);
        assert_eq!(ErrorCode::Io.class(), ErrorClass::Persistent);
    }

    #[test]
    fn display_carries_context_and_placement() {
        let e = Error::new(ErrorKind::ProducerSeqConflict { expected: 4, received: 9 })
            .with_placement(Placement { core: 1, group: 7 });
        let text = e.to_string();
        assert!(text.starts_with("producer_seq_conflict"));
        assert!(text.contains('4') && text.contains('9') && text.contains("group 7"));
        assert_eq!(e.code(), ErrorCode::ProducerSeqConflict);
    }
}
