//! The one error type of the engine (SPEC §5).
//!
//! Every failure a caller can see is an [`Error`]: a typed [`ErrorKind`] with
//! structured context (offsets, sequence numbers, limits), an optional
//! [`Placement`] saying where the request was routed, a stable
//! [`ErrorCode`] and an [`ErrorClass`]. Callers match on `code()` or on the
//! kind, never on message text. The code of a kind never changes once
//! released; new kinds get new codes.

use std::fmt;

use crate::placement::Placement;

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
    StreamNotFound,
    BucketNotFound,
    StreamConflict,
    ContentTypeMismatch,
    StreamClosed,
    StreamSeqConflict,
    ProducerSeqConflict,
    ProducerFenced,
    ProducerDuplicateTooOld,
    EmptyAppend,
    InvalidName,
    BadRequest,
    PayloadTooLarge,
    OffsetOutOfRange,
    OffsetGone,
    SnapshotConflict,
    SnapshotNotFound,
    TooManyStreams,
    LiveReadBackpressure,
    ColdBackpressure,
    Overloaded,
    UncommittedBackpressure,
    PlacementMismatch,
    ShapeMismatch,
    DirectoryInUse,
    Corrupted,
    Io,
    ShuttingDown,
    Internal,
}

impl ErrorCode {
    /// A stable, lowercase, snake_case name for logs and wire formats.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::StreamNotFound => "stream_not_found",
            ErrorCode::BucketNotFound => "bucket_not_found",
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
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::Internal => "internal",
        }
    }

    /// The class every error of this code belongs to.
    pub fn class(self) -> ErrorClass {
        match self {
            ErrorCode::LiveReadBackpressure
            | ErrorCode::ColdBackpressure
            | ErrorCode::DirectoryInUse
            | ErrorCode::Overloaded
            | ErrorCode::UncommittedBackpressure => ErrorClass::Temporary,
            ErrorCode::Corrupted | ErrorCode::Io | ErrorCode::ShuttingDown | ErrorCode::Internal => {
                ErrorClass::Persistent
            }
            _ => ErrorClass::Permanent,
        }
    }
}

/// What went wrong, with the context a caller needs to react without parsing
/// text.
#[derive(Clone, Debug, PartialEq, Eq)]
#[non_exhaustive]
pub enum ErrorKind {
    StreamNotFound {
        bucket: String,
        stream: String,
    },
    BucketNotFound {
        bucket: String,
    },
    /// The stream exists with different settings; `field` names the first
    /// setting that differs.
    StreamConflict {
        field: &'static str,
    },
    ContentTypeMismatch {
        expected: String,
        received: String,
    },
    StreamClosed {
        next_offset: u64,
    },
    StreamSeqConflict {
        last: String,
        received: String,
    },
    ProducerSeqConflict {
        expected: u64,
        received: u64,
    },
    ProducerFenced {
        current_epoch: u64,
        received_epoch: u64,
    },
    /// A retried producer seq older than the remembered window: it was
    /// accepted once, but its offsets are no longer known.
    ProducerDuplicateTooOld {
        seq: u64,
        oldest_remembered: u64,
    },
    EmptyAppend,
    InvalidName {
        field: &'static str,
        reason: &'static str,
    },
    BadRequest {
        reason: String,
    },
    PayloadTooLarge {
        len: u64,
        limit: u64,
    },
    OffsetOutOfRange {
        offset: u64,
        tail: u64,
    },
    OffsetGone {
        offset: u64,
        retained: u64,
    },
    SnapshotConflict {
        offset: u64,
    },
    SnapshotNotFound {
        offset: u64,
    },
    TooManyStreams {
        limit: u64,
    },
    LiveReadBackpressure {
        core: usize,
        limit: usize,
    },
    /// The group holds too many bytes not yet flushed to cold segments.
    ColdBackpressure {
        before: u64,
        after: u64,
        limit: u64,
    },
    Overloaded {
        core: usize,
        capacity: usize,
    },
    UncommittedBackpressure {
        group: u32,
        before: u64,
        after: u64,
        limit: u64,
    },
    PlacementMismatch {
        expected_group: u32,
        received_group: u32,
        reason: &'static str,
    },
    ShapeMismatch {
        field: &'static str,
        recorded: u64,
        requested: u64,
    },
    /// Another engine (in this or another process) has the data directory
    /// open.
    DirectoryInUse {
        path: String,
    },
    Corrupted {
        what: String,
    },
    Io {
        op: &'static str,
        message: String,
    },
    ShuttingDown,
    /// A broken invariant of the engine itself (a bug: please report it);
    /// `what` names where it was noticed.
    Internal {
        what: &'static str,
    },
}

impl ErrorKind {
    pub fn code(&self) -> ErrorCode {
        match self {
            ErrorKind::StreamNotFound { .. } => ErrorCode::StreamNotFound,
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
            ErrorKind::ShuttingDown => ErrorCode::ShuttingDown,
            ErrorKind::Internal { .. } => ErrorCode::Internal,
        }
    }
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
    pub fn new(kind: ErrorKind) -> Self {
        Error { kind: Box::new(kind), placement: None }
    }

    /// Attach the placement the request was routed to.
    pub fn with_placement(mut self, placement: Placement) -> Self {
        self.placement = Some(placement);
        self
    }

    pub fn kind(&self) -> &ErrorKind {
        &self.kind
    }

    pub fn code(&self) -> ErrorCode {
        self.kind.code()
    }

    pub fn class(&self) -> ErrorClass {
        self.code().class()
    }

    pub fn placement(&self) -> Option<Placement> {
        self.placement
    }

    /// True when retrying later may succeed.
    pub fn is_temporary(&self) -> bool {
        self.class() == ErrorClass::Temporary
    }

    pub fn bad_request(reason: impl Into<String>) -> Self {
        Error::new(ErrorKind::BadRequest { reason: reason.into() })
    }

    pub fn corrupted(what: impl Into<String>) -> Self {
        Error::new(ErrorKind::Corrupted { what: what.into() })
    }

    pub fn io(op: &'static str, err: &std::io::Error) -> Self {
        Error::new(ErrorKind::Io { op, message: err.to_string() })
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
            ErrorKind::SnapshotConflict { offset } => {
                write!(f, "a different snapshot exists at offset {offset}")
            }
            ErrorKind::SnapshotNotFound { offset } => write!(f, "no snapshot at or below {offset}"),
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
            ErrorKind::PlacementMismatch { expected_group, received_group, reason } => write!(
                f,
                "placement mismatch ({reason}): expected group {expected_group}, got {received_group}"
            ),
            ErrorKind::ShapeMismatch { field, recorded, requested } => write!(
                f,
                "engine shape mismatch: {field} is {recorded} on record, {requested} requested"
            ),
            ErrorKind::DirectoryInUse { path } => write!(f, "data directory {path} is open in another engine"),
            ErrorKind::Corrupted { what } => write!(f, "corrupted: {what}"),
            ErrorKind::Io { op, message } => write!(f, "i/o failure during {op}: {message}"),
            ErrorKind::ShuttingDown => write!(f, "the engine is shut down"),
            ErrorKind::Internal { what } => write!(f, "internal error in {what} (a bug in the engine)"),
        }?;
        if let Some(p) = self.placement {
            write!(f, " (core {}, group {})", p.core, p.group)?;
        }
        Ok(())
    }
}

impl std::error::Error for Error {}

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
