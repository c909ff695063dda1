//! Request values and replies of the stream API (SPEC §2).
//!
//! Requests are plain data with a constructor and builder setters; the
//! mutating ones double as the payload of logged commands (see
//! [`crate::state::command`]), so they are serialisable and carry no runtime state.
//! Replies carry the `commit_index` at which they were applied where that
//! applies. Nothing here validates beyond what a type can express; the
//! engine checks requests before routing and the state machine checks them
//! again when applying.

use std::time::Duration;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::error::Error;
use crate::state::integrity::Integrity;
use crate::state::name::StreamId;

/// Content type of a stream created without one.
pub const DEFAULT_CONTENT_TYPE: &str = "application/octet-stream";
/// `max_len` of a [`Read`] built without one.
pub const DEFAULT_READ_MAX_LEN: usize = 1 << 20;

/// An idempotent producer's identity on one append (SPEC §2 "Idempotent
/// producers").
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProducerArgs {
    pub id: String,
    pub epoch: u64,
    pub seq: u64,
}

/// Create a stream (idempotent when the settings match).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Create {
    pub id: StreamId,
    pub content_type: Option<String>,
    pub initial_payload: Option<Bytes>,
    pub closed: bool,
    pub ttl_s: Option<u64>,
    pub expires_at_ms: Option<u64>,
    /// Attributes as a JSON object text (see [`crate::state::api::validate_attrs`]).
    pub attrs: Option<String>,
    pub producer: Option<ProducerArgs>,
    pub stream_seq: Option<String>,
}

impl Create {
    pub fn new(id: StreamId) -> Self {
        Create {
            id,
            content_type: None,
            initial_payload: None,
            closed: false,
            ttl_s: None,
            expires_at_ms: None,
            attrs: None,
            producer: None,
            stream_seq: None,
        }
    }
    pub fn content_type(mut self, content_type: impl Into<String>) -> Self {
        self.content_type = Some(content_type.into());
        self
    }
    pub fn initial_payload(mut self, payload: impl Into<Bytes>) -> Self {
        self.initial_payload = Some(payload.into());
        self
    }
    pub fn closed(mut self, closed: bool) -> Self {
        self.closed = closed;
        self
    }
    pub fn ttl_s(mut self, ttl_s: u64) -> Self {
        self.ttl_s = Some(ttl_s);
        self
    }
    pub fn expires_at_ms(mut self, expires_at_ms: u64) -> Self {
        self.expires_at_ms = Some(expires_at_ms);
        self
    }
    pub fn attrs(mut self, json: impl Into<String>) -> Self {
        self.attrs = Some(json.into());
        self
    }
    pub fn producer(mut self, id: impl Into<String>, epoch: u64, seq: u64) -> Self {
        self.producer = Some(ProducerArgs { id: id.into(), epoch, seq });
        self
    }
    pub fn stream_seq(mut self, seq: impl Into<String>) -> Self {
        self.stream_seq = Some(seq.into());
        self
    }
    /// The effective content type.
    pub fn effective_content_type(&self) -> &str {
        self.content_type.as_deref().unwrap_or(DEFAULT_CONTENT_TYPE)
    }
}

/// Append one payload to a stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Append {
    pub id: StreamId,
    pub payload: Bytes,
    pub content_type: Option<String>,
    pub close_after: bool,
    pub stream_seq: Option<String>,
    pub producer: Option<ProducerArgs>,
}

impl Append {
    pub fn new(id: StreamId, payload: impl Into<Bytes>) -> Self {
        Append {
            id,
            payload: payload.into(),
            content_type: None,
            close_after: false,
            stream_seq: None,
            producer: None,
        }
    }
    pub fn producer(mut self, id: impl Into<String>, epoch: u64, seq: u64) -> Self {
        self.producer = Some(ProducerArgs { id: id.into(), epoch, seq });
        self
    }
    pub fn stream_seq(mut self, seq: impl Into<String>) -> Self {
        self.stream_seq = Some(seq.into());
        self
    }
    pub fn close_after(mut self, close_after: bool) -> Self {
        self.close_after = close_after;
        self
    }
    pub fn content_type(mut self, content_type: impl Into<String>) -> Self {
        self.content_type = Some(content_type.into());
        self
    }
}

/// Append many payloads to one stream in one routed request; each item gets
/// its own result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendBatch {
    pub id: StreamId,
    pub payloads: Vec<Bytes>,
    pub content_type: Option<String>,
    pub producer: Option<ProducerArgs>,
}

impl AppendBatch {
    pub fn new(id: StreamId, payloads: Vec<Bytes>) -> Self {
        AppendBatch { id, payloads, content_type: None, producer: None }
    }
    pub fn producer(mut self, id: impl Into<String>, epoch: u64, seq: u64) -> Self {
        self.producer = Some(ProducerArgs { id: id.into(), epoch, seq });
        self
    }
    pub fn content_type(mut self, content_type: impl Into<String>) -> Self {
        self.content_type = Some(content_type.into());
        self
    }
}

/// Read bytes from `offset`, at most `max_len` of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Read {
    pub id: StreamId,
    pub offset: u64,
    pub max_len: usize,
}

impl Read {
    pub fn new(id: StreamId) -> Self {
        Read { id, offset: 0, max_len: DEFAULT_READ_MAX_LEN }
    }
    pub fn offset(mut self, offset: u64) -> Self {
        self.offset = offset;
        self
    }
    pub fn max_len(mut self, max_len: usize) -> Self {
        self.max_len = max_len;
        self
    }
}

/// Close a stream (idempotent), optionally as a producer or with a
/// `stream_seq`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Close {
    pub id: StreamId,
    pub producer: Option<ProducerArgs>,
    pub stream_seq: Option<String>,
}

impl Close {
    pub fn new(id: StreamId) -> Self {
        Close { id, producer: None, stream_seq: None }
    }
    pub fn producer(mut self, id: impl Into<String>, epoch: u64, seq: u64) -> Self {
        self.producer = Some(ProducerArgs { id: id.into(), epoch, seq });
        self
    }
    pub fn stream_seq(mut self, seq: impl Into<String>) -> Self {
        self.stream_seq = Some(seq.into());
        self
    }
}

/// Publish an application snapshot of a stream's state at `offset`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishSnapshot {
    pub id: StreamId,
    pub offset: u64,
    pub content_type: String,
    pub payload: Bytes,
    /// BLAKE3 of `payload`, checked when present.
    pub expected_digest: Option<[u8; 32]>,
}

impl PublishSnapshot {
    pub fn new(id: StreamId, offset: u64, payload: impl Into<Bytes>) -> Self {
        PublishSnapshot {
            id,
            offset,
            content_type: DEFAULT_CONTENT_TYPE.to_string(),
            payload: payload.into(),
            expected_digest: None,
        }
    }
    pub fn content_type(mut self, content_type: impl Into<String>) -> Self {
        self.content_type = content_type.into();
        self
    }
    pub fn expected_digest(mut self, digest: [u8; 32]) -> Self {
        self.expected_digest = Some(digest);
        self
    }
}

/// Reply to [`Create`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateReply {
    pub already_exists: bool,
    pub next_offset: u64,
    pub commit_index: u64,
}

/// Reply to one append (or one batch item).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendReply {
    pub start_offset: u64,
    pub next_offset: u64,
    /// Appends accepted by the stream so far, this one included.
    pub stream_append_count: u64,
    pub deduplicated: bool,
    /// True when the stream is closed after this append.
    pub closed: bool,
    pub commit_index: u64,
}

/// Reply to [`AppendBatch`]: one result per payload, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchReply {
    pub items: Vec<Result<AppendReply, Error>>,
    pub commit_index: u64,
}

/// Reply to [`Read`] and live reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadReply {
    pub payload: Bytes,
    /// Offset of the first byte of `payload`.
    pub offset: u64,
    pub next_offset: u64,
    /// True when `next_offset` is the tail.
    pub up_to_date: bool,
    /// True only when the stream is closed and `next_offset` is the tail.
    pub closed: bool,
}

/// Reply to `head`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeadReply {
    pub content_type: String,
    pub tail_offset: u64,
    pub closed: bool,
    pub ttl_s: Option<u64>,
    pub expires_at_ms: Option<u64>,
    /// When the stream will expire if nobody touches it (TTL or fixed).
    pub expiry_deadline_ms: Option<u64>,
    pub retained_offset: u64,
    pub snapshot_offset: Option<u64>,
    pub append_count: u64,
    pub integrity: Integrity,
}

/// Reply to `close`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloseReply {
    pub next_offset: u64,
    pub already_closed: bool,
    pub commit_index: u64,
}

/// An application snapshot as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppSnapshot {
    pub offset: u64,
    pub content_type: String,
    pub payload: Bytes,
    pub digest: [u8; 32],
}

/// Reply to `publish_snapshot`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotReply {
    pub offset: u64,
    pub already_existed: bool,
    pub commit_index: u64,
}

/// Reply to `bootstrap`: the latest snapshot and the bytes after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BootstrapReply {
    pub snapshot: Option<AppSnapshot>,
    pub updates: ReadReply,
}

/// Largest attribute object, in bytes of JSON text.
pub const MAX_ATTRS_BYTES: usize = 16 * 1024;

/// Checks an attribute object: a JSON object of at most 16 KiB whose
/// `title`, when present, is a string (SPEC §2 "attributes").
pub fn validate_attrs(json: &str) -> Result<(), Error> {
    if json.len() > MAX_ATTRS_BYTES {
        return Err(Error::new(crate::error::ErrorKind::PayloadTooLarge {
            len: json.len() as u64,
            limit: MAX_ATTRS_BYTES as u64,
        }));
    }
    let value: serde_json::Value = serde_json::from_str(json)
        .map_err(|e| Error::bad_request(format!("attributes are not JSON: {e}")))?;
    let object = value.as_object().ok_or_else(|| Error::bad_request("attributes must be a JSON object"))?;
    if let Some(title) = object.get("title") {
        if !title.is_string() {
            return Err(Error::bad_request("attribute `title` must be a string"));
        }
    }
    Ok(())
}

/// A live read: a [`Read`] that waits up to `timeout` for data.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WaitRead {
    pub read: Read,
    pub timeout: Duration,
}

/// One group's full state at a commit index (SPEC §7).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct GroupSnapshot {
    /// The group captured.
    pub group: u32,
    /// Group count of the engine it was taken from.
    pub group_count: u32,
    /// The group's commit index at the capture.
    pub commit_index: u64,
    /// The encoded state (format in `FORMAT.md`).
    pub bytes: Bytes,
    /// The pack files (in the source engine's `cold/` directory) the
    /// state's cold chunks name. An install refuses the snapshot until
    /// they are in the target engine's `cold/` directory.
    pub pack_files: Vec<String>,
}
