//! Failures as HTTP answers: the one place that decides which status an
//! engine error or a refused request gets.
//!
//! Every failure becomes a [`Failure`]: a status, a plain-text message
//! saying what went wrong (the body is `<code>: <message>` in
//! `text/plain; charset=utf-8`, where `<code>` is the engine's stable
//! `ErrorCode` name or `bad_request`/`not_found`/... for refusals made
//! before the engine was asked), and the protocol headers that go with
//! some of them (`Stream-Closed` and `Stream-Next-Offset` on an append to a
//! closed stream, the producer headers on fencing and gaps, `Retry-After`
//! on backpressure). The mapping from [`ErrorCode`] is total and matches
//! on codes, never on message text.

use http::StatusCode;

use super::headers as h;
use super::protocol::format_offset;
use crate::{Error, ErrorClass, ErrorCode, ErrorKind};

/// Seconds a client is told to wait after backpressure.
pub(crate) const RETRY_AFTER_S: u32 = 1;

/// A failed request, ready to be written as a response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Failure {
    /// The HTTP status.
    pub status: StatusCode,
    /// Stable lowercase code, first word of the body.
    pub code: &'static str,
    /// What went wrong, for people.
    pub message: String,
    /// Extra protocol headers (name, value).
    pub headers: Vec<(&'static str, String)>,
    /// The group's leader, when this node is a follower that knows it
    /// (the server forwards the request there).
    pub leader: Option<u64>,
}

impl Failure {
    /// A failure with a status, a stable code and a message.
    pub fn new(status: StatusCode, code: &'static str, message: impl Into<String>) -> Self {
        Failure { status, code, message: message.into(), headers: Vec::new(), leader: None }
    }

    /// A 400.
    pub fn bad_request(message: impl Into<String>) -> Self {
        Failure::new(StatusCode::BAD_REQUEST, "bad_request", message)
    }

    /// A 404.
    pub fn not_found(message: impl Into<String>) -> Self {
        Failure::new(StatusCode::NOT_FOUND, "not_found", message)
    }

    /// A 405.
    pub fn method_not_allowed(message: impl Into<String>) -> Self {
        Failure::new(StatusCode::METHOD_NOT_ALLOWED, "method_not_allowed", message)
    }

    /// A 413 naming the size and the limit.
    pub fn payload_too_large(len: u64, limit: u64) -> Self {
        Failure::new(
            StatusCode::PAYLOAD_TOO_LARGE,
            "payload_too_large",
            format!("request body of at least {len} bytes exceeds the limit of {limit}"),
        )
    }

    /// A 501.
    pub fn not_implemented(message: impl Into<String>) -> Self {
        Failure::new(StatusCode::NOT_IMPLEMENTED, "not_implemented", message)
    }

    /// Adds a protocol header to the response.
    pub fn with_header(mut self, name: &'static str, value: impl Into<String>) -> Self {
        self.headers.push((name, value.into()));
        self
    }

    /// The response body.
    pub fn body(&self) -> String {
        format!("{}: {}\n", self.code, self.message)
    }
}

/// The status an engine error code maps to.
pub(crate) fn status_of(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::StreamNotFound | ErrorCode::BucketNotFound | ErrorCode::SnapshotNotFound => {
            StatusCode::NOT_FOUND
        }
        ErrorCode::StreamConflict
        | ErrorCode::ContentTypeMismatch
        | ErrorCode::StreamClosed
        | ErrorCode::StreamSeqConflict
        | ErrorCode::ProducerSeqConflict
        | ErrorCode::ProducerDuplicateTooOld
        | ErrorCode::SnapshotConflict => StatusCode::CONFLICT,
        ErrorCode::ProducerFenced => StatusCode::FORBIDDEN,
        ErrorCode::EmptyAppend
        | ErrorCode::InvalidName
        | ErrorCode::BadRequest
        | ErrorCode::OffsetOutOfRange => StatusCode::BAD_REQUEST,
        ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::OffsetGone | ErrorCode::StreamGone => StatusCode::GONE,
        ErrorCode::TooManyStreams => StatusCode::INSUFFICIENT_STORAGE,
        // A full core queue: this client is sending faster than the core
        // drains; the rest are engine-wide pressure.
        ErrorCode::Overloaded => StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::LiveReadBackpressure
        | ErrorCode::ColdBackpressure
        | ErrorCode::UncommittedBackpressure
        | ErrorCode::DirectoryInUse
        | ErrorCode::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
        // Replicated groups during an election or without a quorum: retry
        // (Retry-After) once a leader is established.
        ErrorCode::NotLeader | ErrorCode::NoQuorum | ErrorCode::Indeterminate => {
            StatusCode::SERVICE_UNAVAILABLE
        }
        // A stopped core: nothing this client can retry its way out of
        // until an operator reopens the engine.
        ErrorCode::Poisoned => StatusCode::SERVICE_UNAVAILABLE,
        // A JSON read of bytes flushed before record boundaries were kept:
        // the server cannot split them into messages.
        ErrorCode::NoRecordIndex => StatusCode::INTERNAL_SERVER_ERROR,
        ErrorCode::PlacementMismatch
        | ErrorCode::ShapeMismatch
        | ErrorCode::Corrupted
        | ErrorCode::Io
        | ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<&Error> for Failure {
    fn from(err: &Error) -> Self {
        let code = err.code();
        let mut failure = Failure::new(status_of(code), code.as_str(), err.to_string());
        // The Display text starts with the code already; keep the body as
        // `<code>: <message>` without saying the code twice.
        if let Some(rest) = failure.message.strip_prefix(&format!("{}: ", code.as_str())) {
            failure.message = rest.to_string();
        }
        match err.kind() {
            ErrorKind::StreamClosed { next_offset } => {
                failure = failure
                    .with_header(h::STREAM_CLOSED, "true")
                    .with_header(h::STREAM_NEXT_OFFSET, format_offset(*next_offset));
            }
            ErrorKind::ProducerSeqConflict { expected, received } => {
                failure = failure
                    .with_header(h::PRODUCER_EXPECTED_SEQ, expected.to_string())
                    .with_header(h::PRODUCER_RECEIVED_SEQ, received.to_string());
            }
            ErrorKind::ProducerFenced { current_epoch, .. } => {
                failure = failure.with_header(h::PRODUCER_EPOCH, current_epoch.to_string());
            }
            ErrorKind::NotLeader { leader, .. } => failure.leader = *leader,
            _ => {}
        }
        if err.class() == ErrorClass::Temporary || code == ErrorCode::ShuttingDown {
            failure = failure.with_header(h::RETRY_AFTER, RETRY_AFTER_S.to_string());
        }
        failure
    }
}

impl From<Error> for Failure {
    fn from(err: Error) -> Self {
        Failure::from(&err)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn protocol_statuses() {
        let cases = [
            (ErrorKind::StreamNotFound { bucket: "b".into(), stream: "s".into() }, 404),
            (ErrorKind::StreamConflict { field: "content_type" }, 409),
            (ErrorKind::ContentTypeMismatch { expected: "a".into(), received: "b".into() }, 409),
            (ErrorKind::StreamClosed { next_offset: 3 }, 409),
            (ErrorKind::StreamSeqConflict { last: "2".into(), received: "10".into() }, 409),
            (ErrorKind::ProducerSeqConflict { expected: 1, received: 3 }, 409),
            (ErrorKind::ProducerFenced { current_epoch: 2, received_epoch: 1 }, 403),
            (ErrorKind::EmptyAppend, 400),
            (ErrorKind::BadRequest { reason: "x".into() }, 400),
            (ErrorKind::PayloadTooLarge { len: 10, limit: 5 }, 413),
            (ErrorKind::OffsetGone { offset: 1, retained: 5 }, 410),
            (ErrorKind::Overloaded { core: 0, capacity: 1 }, 429),
            (ErrorKind::ColdBackpressure { before: 1, after: 2, limit: 1 }, 503),
            (ErrorKind::LiveReadBackpressure { core: 0, limit: 1 }, 503),
            (ErrorKind::UncommittedBackpressure { group: 0, before: 1, after: 2, limit: 1 }, 503),
            (ErrorKind::Corrupted { what: "x".into(), file: None, offset: None }, 500),
            (ErrorKind::Internal { what: "x" }, 500),
            (ErrorKind::Poisoned { core: 0, cause: Box::new(Error::corrupted("x")) }, 503),
            (ErrorKind::ShuttingDown, 503),
        ];
        for (kind, status) in cases {
            let f = Failure::from(Error::new(kind.clone()));
            assert_eq!(f.status.as_u16(), status, "{kind:?}");
            assert!(f.body().starts_with(f.code), "{:?}", f.body());
            assert!(!f.message.is_empty());
        }
    }

    #[test]
    fn protocol_headers_ride_along() {
        let f = Failure::from(Error::new(ErrorKind::StreamClosed { next_offset: 5 }));
        assert!(f.headers.contains(&(h::STREAM_CLOSED, "true".into())));
        assert!(f.headers.contains(&(h::STREAM_NEXT_OFFSET, format_offset(5))));
        let f = Failure::from(Error::new(ErrorKind::ProducerSeqConflict { expected: 1, received: 2 }));
        assert!(f.headers.contains(&(h::PRODUCER_EXPECTED_SEQ, "1".into())));
        assert!(f.headers.contains(&(h::PRODUCER_RECEIVED_SEQ, "2".into())));
        let f = Failure::from(Error::new(ErrorKind::ProducerFenced { current_epoch: 7, received_epoch: 1 }));
        assert!(f.headers.contains(&(h::PRODUCER_EPOCH, "7".into())));
        let f = Failure::from(Error::new(ErrorKind::ColdBackpressure { before: 1, after: 2, limit: 1 }));
        assert!(f.headers.iter().any(|(n, _)| *n == h::RETRY_AFTER));
        let f = Failure::from(Error::new(ErrorKind::StreamConflict { field: "ttl_s" }));
        assert!(f.headers.is_empty());
        assert_eq!(f.body(), "stream_conflict: stream exists with a different ttl_s\n");
    }
}
