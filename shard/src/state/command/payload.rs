//! The payloads of logged commands: the log's own types, written into every
//! WAL record and documented byte by byte in FORMAT.md ("Command body").
//!
//! They mirror the API's request builders (`state::api`) field for field
//! today, but they are a separate vocabulary on purpose: the only way from
//! an API request to a logged command is the `From` conversion below (one
//! boundary), so a new builder field cannot change the bytes on disk
//! without a change here, in FORMAT.md and in the golden fixtures. The
//! postcard encoding of these types (fields in declaration order, enum
//! variants by index) is the format: never reorder, remove or retype a
//! field; add one only with a format version bump.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::state::api::{self, DEFAULT_CONTENT_TYPE};
use crate::state::name::StreamId;

/// An idempotent producer's `(id, epoch, seq)` on a logged command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Producer {
    /// The producer's id.
    pub id: String,
    /// Its epoch (a restart of the producer bumps it).
    pub epoch: u64,
    /// Its sequence number within the epoch.
    pub seq: u64,
}

/// Create a stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Create {
    /// The stream.
    pub id: StreamId,
    /// Its content type (`None`: the default).
    pub content_type: Option<String>,
    /// Bytes appended at creation.
    pub initial_payload: Option<Bytes>,
    /// Created closed.
    pub closed: bool,
    /// Sliding time to live, in seconds.
    pub ttl_s: Option<u64>,
    /// Fixed expiry, in Unix milliseconds.
    pub expires_at_ms: Option<u64>,
    /// Attributes (JSON object text).
    pub attrs: Option<String>,
    /// The producer creating it.
    pub producer: Option<Producer>,
    /// The caller's opaque sequence string.
    pub stream_seq: Option<String>,
}

impl Create {
    /// The effective content type.
    pub fn effective_content_type(&self) -> &str {
        self.content_type.as_deref().unwrap_or(DEFAULT_CONTENT_TYPE)
    }
}

/// Append one payload.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Append {
    /// The stream.
    pub id: StreamId,
    /// The bytes.
    pub payload: Bytes,
    /// The content type the caller expects the stream to have.
    pub content_type: Option<String>,
    /// Close the stream after the payload lands.
    pub close_after: bool,
    /// The caller's opaque sequence string.
    pub stream_seq: Option<String>,
    /// The producer appending.
    pub producer: Option<Producer>,
}

/// Append many payloads to one stream; each item gets its own result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppendBatch {
    /// The stream.
    pub id: StreamId,
    /// The items, in order.
    pub payloads: Vec<Bytes>,
    /// The content type the caller expects the stream to have.
    pub content_type: Option<String>,
    /// The producer appending (its seq covers the batch as a whole).
    pub producer: Option<Producer>,
}

/// Close a stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Close {
    /// The stream.
    pub id: StreamId,
    /// The producer closing it.
    pub producer: Option<Producer>,
    /// The caller's opaque sequence string.
    pub stream_seq: Option<String>,
}

/// Publish an application snapshot of a stream's state at an offset.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PublishSnapshot {
    /// The stream.
    pub id: StreamId,
    /// The offset the snapshot describes.
    pub offset: u64,
    /// The snapshot's content type.
    pub content_type: String,
    /// The snapshot's bytes.
    pub payload: Bytes,
    /// BLAKE3 of `payload`, checked when present.
    pub expected_digest: Option<[u8; 32]>,
}

impl From<api::ProducerArgs> for Producer {
    fn from(p: api::ProducerArgs) -> Self {
        Producer { id: p.id, epoch: p.epoch, seq: p.seq }
    }
}

impl From<api::Create> for Create {
    fn from(c: api::Create) -> Self {
        Create {
            id: c.id,
            content_type: c.content_type,
            initial_payload: c.initial_payload,
            closed: c.closed,
            ttl_s: c.ttl_s,
            expires_at_ms: c.expires_at_ms,
            attrs: c.attrs,
            producer: c.producer.map(Producer::from),
            stream_seq: c.stream_seq,
        }
    }
}

impl From<api::Append> for Append {
    fn from(a: api::Append) -> Self {
        Append {
            id: a.id,
            payload: a.payload,
            content_type: a.content_type,
            close_after: a.close_after,
            stream_seq: a.stream_seq,
            producer: a.producer.map(Producer::from),
        }
    }
}

impl From<api::AppendBatch> for AppendBatch {
    fn from(b: api::AppendBatch) -> Self {
        AppendBatch {
            id: b.id,
            payloads: b.payloads,
            content_type: b.content_type,
            producer: b.producer.map(Producer::from),
        }
    }
}

impl From<api::Close> for Close {
    fn from(c: api::Close) -> Self {
        Close { id: c.id, producer: c.producer.map(Producer::from), stream_seq: c.stream_seq }
    }
}

impl From<api::PublishSnapshot> for PublishSnapshot {
    fn from(p: api::PublishSnapshot) -> Self {
        PublishSnapshot {
            id: p.id,
            offset: p.offset,
            content_type: p.content_type,
            payload: p.payload,
            expected_digest: p.expected_digest,
        }
    }
}
