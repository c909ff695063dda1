//! Request values and replies of the stream API (SPEC §2).
//!
//! Requests are plain data with a constructor and builder setters. They are
//! not a format: a mutating request becomes a logged command through the
//! `From` conversions in `state::command::payload` (the one boundary), so a
//! new builder field never changes bytes on disk by accident.
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ProducerArgs {
    /// The producer's id (stable across its restarts).
    pub id: String,
    /// Its epoch: a restarted producer bumps it and starts again at seq 0.
    pub epoch: u64,
    /// Its sequence number within the epoch.
    pub seq: u64,
}

/// Create a stream (idempotent when the settings match).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Create {
    /// The stream.
    pub id: StreamId,
    /// Its content type (`None`: [`DEFAULT_CONTENT_TYPE`]).
    pub content_type: Option<String>,
    /// Bytes appended as the stream is created (append 1).
    pub initial_payload: Option<Bytes>,
    /// Further records appended at creation after `initial_payload`, each
    /// its own record; the initial data counts as one append. None may be
    /// empty, and they need a non-empty `initial_payload`.
    /// [`Create::initial_records`] sets both.
    pub more_records: Vec<Bytes>,
    /// Create the stream closed.
    pub closed: bool,
    /// Sliding time to live, in seconds: renewed by appends and reads.
    pub ttl_s: Option<u64>,
    /// Fixed expiry in Unix milliseconds (never extended).
    pub expires_at_ms: Option<u64>,
    /// Attributes as a JSON object text (see [`crate::state::api::validate_attrs`]).
    pub attrs: Option<String>,
    /// The idempotent producer creating it.
    pub producer: Option<ProducerArgs>,
    /// The caller's opaque sequence string (must increase byte-wise).
    pub stream_seq: Option<String>,
}

impl Create {
    /// A create of `id` with every setting at its default.
    pub fn new(id: StreamId) -> Self {
        Create {
            id,
            content_type: None,
            initial_payload: None,
            more_records: Vec::new(),
            closed: false,
            ttl_s: None,
            expires_at_ms: None,
            attrs: None,
            producer: None,
            stream_seq: None,
        }
    }
    /// Sets the content type.
    pub fn content_type(mut self, content_type: impl Into<String>) -> Self {
        self.content_type = Some(content_type.into());
        self
    }
    /// Sets the bytes appended at creation.
    pub fn initial_payload(mut self, payload: impl Into<Bytes>) -> Self {
        self.initial_payload = Some(payload.into());
        self
    }
    /// Sets the records appended at creation, in order, each its own
    /// record (the first becomes `initial_payload`, the rest
    /// `more_records`). No record may be empty.
    pub fn initial_records(mut self, records: Vec<Bytes>) -> Self {
        let mut records = records.into_iter();
        self.initial_payload = records.next();
        self.more_records = records.collect();
        self
    }
    /// Creates the stream closed (or open).
    pub fn closed(mut self, closed: bool) -> Self {
        self.closed = closed;
        self
    }
    /// Sets a sliding time to live, in seconds.
    pub fn ttl_s(mut self, ttl_s: u64) -> Self {
        self.ttl_s = Some(ttl_s);
        self
    }
    /// Sets a fixed expiry, in Unix milliseconds.
    pub fn expires_at_ms(mut self, expires_at_ms: u64) -> Self {
        self.expires_at_ms = Some(expires_at_ms);
        self
    }
    /// Sets the attributes (a JSON object of at most 16 KiB).
    pub fn attrs(mut self, json: impl Into<String>) -> Self {
        self.attrs = Some(json.into());
        self
    }
    /// Creates as idempotent producer `id` at `epoch` and `seq`.
    pub fn producer(mut self, id: impl Into<String>, epoch: u64, seq: u64) -> Self {
        self.producer = Some(ProducerArgs { id: id.into(), epoch, seq });
        self
    }
    /// Sets the caller's sequence string.
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
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Append {
    /// The stream.
    pub id: StreamId,
    /// The bytes to append.
    pub payload: Bytes,
    /// Further records after `payload`, each its own record: the whole
    /// append lands at once or not at all, with one reply, one producer
    /// seq and one `stream_seq` (unlike [`AppendBatch`], whose items
    /// succeed or fail one by one). None may be empty, nor `payload`
    /// when there are some. [`Append::records`] sets both.
    pub more_records: Vec<Bytes>,
    /// The content type the caller expects the stream to have.
    pub content_type: Option<String>,
    /// Close the stream once the payload landed.
    pub close_after: bool,
    /// The caller's opaque sequence string (must increase byte-wise).
    pub stream_seq: Option<String>,
    /// The idempotent producer appending.
    pub producer: Option<ProducerArgs>,
}

impl Append {
    /// An append of `payload` to `id`.
    pub fn new(id: StreamId, payload: impl Into<Bytes>) -> Self {
        Append {
            id,
            payload: payload.into(),
            more_records: Vec::new(),
            content_type: None,
            close_after: false,
            stream_seq: None,
            producer: None,
        }
    }
    /// One append of several records to `id`, in order (see
    /// [`Append::more_records`]); an empty list is an empty append.
    pub fn records(id: StreamId, records: Vec<Bytes>) -> Self {
        let mut records = records.into_iter();
        let mut append = Append::new(id, records.next().unwrap_or_default());
        append.more_records = records.collect();
        append
    }
    /// Appends as idempotent producer `id` at `epoch` and `seq`.
    pub fn producer(mut self, id: impl Into<String>, epoch: u64, seq: u64) -> Self {
        self.producer = Some(ProducerArgs { id: id.into(), epoch, seq });
        self
    }
    /// Sets the caller's sequence string.
    pub fn stream_seq(mut self, seq: impl Into<String>) -> Self {
        self.stream_seq = Some(seq.into());
        self
    }
    /// Closes the stream after this payload.
    pub fn close_after(mut self, close_after: bool) -> Self {
        self.close_after = close_after;
        self
    }
    /// Sets the content type the stream must have.
    pub fn content_type(mut self, content_type: impl Into<String>) -> Self {
        self.content_type = Some(content_type.into());
        self
    }
}

/// Append many payloads to one stream in one routed request; each item gets
/// its own result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendBatch {
    /// The stream.
    pub id: StreamId,
    /// The payloads, in order; each becomes one append.
    pub payloads: Vec<Bytes>,
    /// The content type the caller expects the stream to have.
    pub content_type: Option<String>,
    /// The idempotent producer appending (its seq covers the whole batch).
    pub producer: Option<ProducerArgs>,
}

impl AppendBatch {
    /// A batch of `payloads` for `id`.
    pub fn new(id: StreamId, payloads: Vec<Bytes>) -> Self {
        AppendBatch { id, payloads, content_type: None, producer: None }
    }
    /// Appends as idempotent producer `id` at `epoch` and `seq` (one seq for the batch).
    pub fn producer(mut self, id: impl Into<String>, epoch: u64, seq: u64) -> Self {
        self.producer = Some(ProducerArgs { id: id.into(), epoch, seq });
        self
    }
    /// Sets the content type the stream must have.
    pub fn content_type(mut self, content_type: impl Into<String>) -> Self {
        self.content_type = Some(content_type.into());
        self
    }
}

/// Read bytes from `offset`, at most `max_len` of them.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Read {
    /// The stream.
    pub id: StreamId,
    /// Offset of the first byte to read.
    pub offset: u64,
    /// Most bytes returned (clamped to `max_read_bytes`).
    pub max_len: usize,
    /// Read whole records (see [`Read::records`]).
    pub records: bool,
    /// Serve from this replica's state without confirming leadership (see
    /// [`Read::allow_stale`]).
    pub stale: bool,
}

impl Read {
    /// A read of `id` from offset 0, at most [`DEFAULT_READ_MAX_LEN`] bytes.
    pub fn new(id: StreamId) -> Self {
        Read { id, offset: 0, max_len: DEFAULT_READ_MAX_LEN, records: false, stale: false }
    }
    /// On a replicated node, reads this node's replica as it stands,
    /// leader or follower, without a quorum round: faster, and on a
    /// follower possibly behind the leader (never ahead of what was
    /// committed, never a byte that is not in the log). Without it a read
    /// is linearizable and a follower answers `NotLeader`. No effect on a
    /// single node.
    pub fn allow_stale(mut self, stale: bool) -> Self {
        self.stale = stale;
        self
    }
    /// Reads whole records: the reply starts at the first record boundary
    /// at or after `offset` (a read starting inside a record skips to the
    /// next one), ends at a record boundary, holds at least one record when
    /// one starts before the tail (even one larger than `max_len`), and
    /// lists every record's offset and time in [`ReadReply::records`].
    pub fn records(mut self, records: bool) -> Self {
        self.records = records;
        self
    }
    /// Sets the offset to read from.
    pub fn offset(mut self, offset: u64) -> Self {
        self.offset = offset;
        self
    }
    /// Sets the most bytes returned.
    pub fn max_len(mut self, max_len: usize) -> Self {
        self.max_len = max_len;
        self
    }
}

/// Close a stream (idempotent), optionally as a producer or with a
/// `stream_seq`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Close {
    /// The stream.
    pub id: StreamId,
    /// The idempotent producer closing it.
    pub producer: Option<ProducerArgs>,
    /// The caller's opaque sequence string.
    pub stream_seq: Option<String>,
}

impl Close {
    /// A close of `id`.
    pub fn new(id: StreamId) -> Self {
        Close { id, producer: None, stream_seq: None }
    }
    /// Closes as idempotent producer `id` at `epoch` and `seq`.
    pub fn producer(mut self, id: impl Into<String>, epoch: u64, seq: u64) -> Self {
        self.producer = Some(ProducerArgs { id: id.into(), epoch, seq });
        self
    }
    /// Sets the caller's sequence string.
    pub fn stream_seq(mut self, seq: impl Into<String>) -> Self {
        self.stream_seq = Some(seq.into());
        self
    }
}

/// Publish an application snapshot of a stream's state at `offset`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PublishSnapshot {
    /// The stream.
    pub id: StreamId,
    /// The stream offset the snapshot describes.
    pub offset: u64,
    /// The snapshot's content type.
    pub content_type: String,
    /// The snapshot's bytes.
    pub payload: Bytes,
    /// BLAKE3 of `payload`, checked when present.
    pub expected_digest: Option<[u8; 32]>,
}

impl PublishSnapshot {
    /// A snapshot of `id` at `offset`.
    pub fn new(id: StreamId, offset: u64, payload: impl Into<Bytes>) -> Self {
        PublishSnapshot {
            id,
            offset,
            content_type: DEFAULT_CONTENT_TYPE.to_string(),
            payload: payload.into(),
            expected_digest: None,
        }
    }
    /// Sets the snapshot's content type.
    pub fn content_type(mut self, content_type: impl Into<String>) -> Self {
        self.content_type = content_type.into();
        self
    }
    /// Requires the payload's BLAKE3 to be `digest`.
    pub fn expected_digest(mut self, digest: [u8; 32]) -> Self {
        self.expected_digest = Some(digest);
        self
    }
}

/// Reply to [`Create`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateReply {
    /// The stream existed with the same settings; nothing changed.
    pub already_exists: bool,
    /// The stream's tail after the create.
    pub next_offset: u64,
    /// The group commit index the create was applied at.
    pub commit_index: u64,
}

/// Reply to one append (or one batch item).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendReply {
    /// Offset of the payload's first byte.
    pub start_offset: u64,
    /// Offset just past the payload (the new tail).
    pub next_offset: u64,
    /// Appends accepted by the stream so far, this one included.
    pub stream_append_count: u64,
    /// A producer retry: the original append's offsets, nothing changed.
    pub deduplicated: bool,
    /// True when the stream is closed after this append.
    pub closed: bool,
    /// The group commit index the append was applied at.
    pub commit_index: u64,
    /// For a producer's append: the highest seq the stream has accepted
    /// from that producer in the request's epoch, after this append (its
    /// own seq when it is new; possibly higher when it is a retry of an
    /// older one). `None` without a producer, or when the stream does not
    /// remember the producer in that epoch (an empty close of a closed
    /// stream consumes no seq).
    pub producer_seq: Option<u64>,
}

/// Reply to [`AppendBatch`]: one result per payload, in order.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchReply {
    /// One result per payload, in order.
    pub items: Vec<Result<AppendReply, Error>>,
    /// The group commit index the batch was applied at.
    pub commit_index: u64,
}

/// Reply to [`Read`] and live reads.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadReply {
    /// The bytes read.
    pub payload: Bytes,
    /// Offset of the first byte of `payload`.
    pub offset: u64,
    /// Offset just past `payload` (where to read next).
    pub next_offset: u64,
    /// True when `next_offset` is the tail.
    pub up_to_date: bool,
    /// True only when the stream is closed and `next_offset` is the tail.
    pub closed: bool,
    /// For a record read ([`Read::records`]): each record of `payload`, in
    /// order; record `i` is `payload[records[i].offset - offset ..
    /// records[i + 1].offset - offset]` (the last one ends at
    /// `next_offset`). Empty for a byte read.
    pub records: Vec<RecordMeta>,
}

/// Where one record of a record read starts and when it was stamped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RecordMeta {
    /// Stream offset of the record's first byte.
    pub offset: u64,
    /// The record's time: `max(previous record's time, now_ms of its
    /// append)`, in Unix milliseconds.
    pub at_ms: u64,
}

/// One record of a [`RecordsReply`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    /// Stream offset of the record's first byte.
    pub offset: u64,
    /// The record's bytes.
    pub payload: Bytes,
    /// The record's time, in Unix milliseconds (see [`RecordMeta::at_ms`]).
    pub timestamp_ms: u64,
}

/// Reply to a record read: whole records (see [`Read::records`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RecordsReply {
    /// The records, in order (zero-copy slices of one buffer).
    pub records: Vec<Record>,
    /// Offset just past the last record (where to read next).
    pub next_offset: u64,
    /// True when `next_offset` is the tail.
    pub up_to_date: bool,
    /// True only when the stream is closed and `next_offset` is the tail.
    pub closed: bool,
}

impl From<ReadReply> for RecordsReply {
    fn from(reply: ReadReply) -> Self {
        let records = reply
            .record_iter()
            .map(|(meta, payload)| Record { offset: meta.offset, payload, timestamp_ms: meta.at_ms })
            .collect();
        RecordsReply { records, next_offset: reply.next_offset, up_to_date: reply.up_to_date, closed: reply.closed }
    }
}

impl ReadReply {
    /// The records of a record read as `(meta, bytes)` (nothing for a
    /// byte read).
    pub fn record_iter(&self) -> impl Iterator<Item = (RecordMeta, Bytes)> + '_ {
        self.records.iter().enumerate().map(move |(i, meta)| {
            let end = self.records.get(i + 1).map_or(self.next_offset, |next| next.offset);
            let (from, to) = ((meta.offset - self.offset) as usize, (end - self.offset) as usize);
            (*meta, self.payload.slice(from..to))
        })
    }
}

/// Reply to `head`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HeadReply {
    /// The stream's content type.
    pub content_type: String,
    /// The tail (the next append's offset).
    pub tail_offset: u64,
    /// The stream is closed.
    pub closed: bool,
    /// Its sliding time to live, in seconds.
    pub ttl_s: Option<u64>,
    /// Its fixed expiry, in Unix milliseconds.
    pub expires_at_ms: Option<u64>,
    /// When the stream will expire if nobody touches it (TTL or fixed).
    pub expiry_deadline_ms: Option<u64>,
    /// The oldest offset still readable (retention drops what is before).
    pub retained_offset: u64,
    /// Offset of the latest application snapshot.
    pub snapshot_offset: Option<u64>,
    /// Appends accepted so far.
    pub append_count: u64,
    /// Set-sums over the stream's records (live, evicted, total).
    pub integrity: Integrity,
}

/// Reply to `close`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CloseReply {
    /// The stream's tail.
    pub next_offset: u64,
    /// The stream was already closed; nothing changed.
    pub already_closed: bool,
    /// The group commit index the close was applied at.
    pub commit_index: u64,
}

/// An application snapshot as stored.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AppSnapshot {
    /// The stream offset the snapshot describes.
    pub offset: u64,
    /// Its content type.
    pub content_type: String,
    /// Its bytes.
    pub payload: Bytes,
    /// BLAKE3 of `payload`.
    pub digest: [u8; 32],
}

/// Reply to `publish_snapshot`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SnapshotReply {
    /// The snapshot's offset.
    pub offset: u64,
    /// The same snapshot was already stored; nothing changed.
    pub already_existed: bool,
    /// The group commit index it was applied at.
    pub commit_index: u64,
}

/// Reply to `bootstrap`: the latest snapshot and the bytes after it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BootstrapReply {
    /// The latest application snapshot, if any.
    pub snapshot: Option<AppSnapshot>,
    /// The bytes after it (or from the retained start without one).
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
    /// The read.
    pub read: Read,
    /// How long to wait at the tail.
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

/// Longest lease a consumer may take or renew at once (one day).
pub const MAX_LEASE_TTL: Duration = Duration::from_secs(24 * 60 * 60);

/// Longest consumer group and owner name, in bytes.
pub const MAX_CONSUMER_NAME_LEN: usize = 255;

/// Acquire the lease of consumer group `consumer_group` on a stream as
/// `owner` (SPEC §2 "Leases and committed offsets").
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AcquireLease {
    /// The stream.
    pub id: StreamId,
    /// The consumer group (1 to 255 bytes).
    pub consumer_group: String,
    /// Who asks (1 to 255 bytes).
    pub owner: String,
    /// How long the lease lasts (at least 1 ms, at most [`MAX_LEASE_TTL`]);
    /// 30 s by default.
    pub ttl: Duration,
}

impl AcquireLease {
    /// A lease request of `owner` for `consumer_group` on `id`, for 30 s.
    pub fn new(id: impl std::borrow::Borrow<StreamId>, consumer_group: &str, owner: &str) -> Self {
        AcquireLease {
            id: id.borrow().clone(),
            consumer_group: consumer_group.to_string(),
            owner: owner.to_string(),
            ttl: Duration::from_secs(30),
        }
    }
    /// Sets how long the lease lasts.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }
}

/// A lease's milliseconds, checked: at least 1, at most [`MAX_LEASE_TTL`].
pub fn lease_ttl_ms(ttl: Duration) -> Result<u64, Error> {
    if ttl < Duration::from_millis(1) || ttl > MAX_LEASE_TTL {
        return Err(Error::bad_request(format!(
            "a lease lasts from 1 ms to {} s, not {ttl:?}",
            MAX_LEASE_TTL.as_secs()
        )));
    }
    Ok(ttl.as_millis() as u64)
}

/// What the group answers to an acquire or a renew.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LeaseReply {
    /// The lease's generation: every acquire raises it, a renew keeps it.
    pub generation: u64,
    /// When the lease lapses (group clock, Unix ms).
    pub expires_at_ms: u64,
    /// The consumer group's committed offset, if any.
    pub committed: Option<u64>,
    /// The group commit index the command was applied at.
    pub commit_index: u64,
}

/// A held lease: what renew, release and commit present to prove
/// ownership (the owner and the generation fence them).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Lease {
    /// The stream.
    pub id: StreamId,
    /// The consumer group.
    pub consumer_group: String,
    /// The holder.
    pub owner: String,
    /// The generation this holder got.
    pub generation: u64,
    /// When the lease lapses unless renewed (group clock, Unix ms).
    pub expires_at_ms: u64,
    /// The consumer group's committed offset when the lease was acquired or
    /// last renewed.
    pub committed: Option<u64>,
}

/// A consumer's heartbeat in consumer group `consumer_group` of `bucket`
/// (SPEC §2 "Membership"): it counts as live for `ttl` (30 s by default).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Heartbeat {
    /// The bucket the consumer group reads.
    pub bucket: String,
    /// The consumer group (1 to 255 bytes).
    pub consumer_group: String,
    /// The consumer (1 to 255 bytes).
    pub consumer: String,
    /// How long it counts as live without another heartbeat (at least
    /// 1 ms, at most [`MAX_LEASE_TTL`]).
    pub ttl: Duration,
}

impl Heartbeat {
    /// A heartbeat of `consumer` in `consumer_group` of `bucket`, for 30 s.
    pub fn new(bucket: &str, consumer_group: &str, consumer: &str) -> Self {
        Heartbeat {
            bucket: bucket.to_string(),
            consumer_group: consumer_group.to_string(),
            consumer: consumer.to_string(),
            ttl: Duration::from_secs(30),
        }
    }
    /// Sets how long the consumer counts as live.
    pub fn ttl(mut self, ttl: Duration) -> Self {
        self.ttl = ttl;
        self
    }
}

/// A consumer group's membership after a heartbeat.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Membership {
    /// Consumers whose last heartbeat has not lapsed, the caller included.
    pub live_consumers: u32,
}

/// Where a reader or a new queue group without a committed position
/// starts (shared by the coordinated reader and the queues).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Start {
    /// The oldest retained record.
    #[default]
    Earliest,
    /// The tail: only records appended from now on.
    Latest,
    /// The first record stamped at or after this time (Unix ms).
    Timestamp(u64),
    /// The first record that starts after this offset (a reader that kept
    /// the offset of the last record it handled resumes with the next).
    After(u64),
}

/// Most messages one receive hands out.
pub const MAX_RECEIVE_MESSAGES: u32 = 1000;

/// Attempts before a message is dead-lettered, by default.
pub const DEFAULT_MAX_ATTEMPTS: u32 = 5;
/// Messages a queue group keeps in flight at most, by default.
pub const DEFAULT_MAX_IN_FLIGHT: u32 = 1024;
/// The largest `max_in_flight` a policy may set.
pub const MAX_QUEUE_IN_FLIGHT: u32 = 65_536;
/// The largest `max_attempts` a policy may set.
pub const MAX_QUEUE_ATTEMPTS: u32 = 1000;

/// Receive messages of queue group `consumer_group` of a stream (SPEC §2
/// "Queues"): up to `max_messages` (10 by default), each invisible to
/// other receives for `visibility` (30 s by default). `start` applies only
/// when the group is new (default [`Start::Earliest`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Receive {
    /// The stream.
    pub id: StreamId,
    /// The consumer group (1 to 255 bytes).
    pub consumer_group: String,
    /// Messages at most (1 to [`MAX_RECEIVE_MESSAGES`]).
    pub max_messages: usize,
    /// How long a delivery stays invisible (1 ms to [`MAX_LEASE_TTL`]).
    pub visibility: Duration,
    /// Where a new group starts.
    pub start: Start,
}

impl Receive {
    /// A receive of up to 10 messages under a 30 s visibility timeout.
    pub fn new(id: impl std::borrow::Borrow<StreamId>, consumer_group: &str) -> Self {
        Receive {
            id: id.borrow().clone(),
            consumer_group: consumer_group.to_string(),
            max_messages: 10,
            visibility: Duration::from_secs(30),
            start: Start::Earliest,
        }
    }
    /// Sets the most messages handed out.
    pub fn max_messages(mut self, max: usize) -> Self {
        self.max_messages = max;
        self
    }
    /// Sets the visibility timeout.
    pub fn visibility(mut self, visibility: Duration) -> Self {
        self.visibility = visibility;
        self
    }
    /// Sets where a new group starts.
    pub fn start(mut self, start: Start) -> Self {
        self.start = start;
        self
    }
}

/// A message handed out by a receive (or listed as a dead letter).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Delivery {
    /// The record's offset in the stream.
    pub offset: u64,
    /// The record's bytes.
    pub payload: Bytes,
    /// Deliveries of this message so far, this one included.
    pub attempts: u32,
    /// What ack and nack name (0 for a dead letter).
    pub receipt: u64,
    /// The record's time (Unix ms).
    pub timestamp_ms: u64,
}

/// A delivery as the state machine decides it: the record's place, not
/// its bytes (the core reads those, hot or cold).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DeliveryMeta {
    /// The record's offset.
    pub offset: u64,
    /// Its length.
    pub len: u64,
    /// Deliveries so far.
    pub attempts: u32,
    /// The delivery's receipt (0 for a dead letter).
    pub receipt: u64,
    /// The record's time.
    pub timestamp_ms: u64,
}

impl DeliveryMeta {
    pub(crate) fn of(offset: u64, m: &crate::state::group::consumer_state::QueueMessage) -> Self {
        DeliveryMeta { offset, len: m.len, attempts: m.attempts, receipt: m.receipt, timestamp_ms: m.at_ms }
    }
}

/// A queue group's policy: attempts before a message is dead-lettered (5
/// by default) and messages in flight at most (1024 by default).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct QueuePolicy {
    /// Attempts before dead-lettering (1 to 1000).
    pub max_attempts: u32,
    /// Messages in flight at most (1 to 65536).
    pub max_in_flight: usize,
}

impl Default for QueuePolicy {
    fn default() -> Self {
        QueuePolicy {
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT as usize,
        }
    }
}

impl QueuePolicy {
    /// The default policy.
    pub fn new() -> Self {
        QueuePolicy::default()
    }
    /// Sets the attempts before dead-lettering.
    pub fn max_attempts(mut self, n: u32) -> Self {
        self.max_attempts = n;
        self
    }
    /// Sets the messages in flight at most.
    pub fn max_in_flight(mut self, n: usize) -> Self {
        self.max_in_flight = n;
        self
    }
}

/// A queue group's backlog.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Backlog {
    /// Messages a receive could hand out now (new or visible again).
    pub ready: u64,
    /// Messages handed out, invisible, not acked.
    pub in_flight: u64,
    /// Dead letters.
    pub dead: u64,
    /// Age of the oldest ready message (by its record's time).
    pub oldest_ready_age_ms: Option<u64>,
}

/// The longest `max_age` a retention policy may set (ten years).
pub const MAX_RETENTION_AGE: Duration = Duration::from_secs(10 * 365 * 24 * 3600);

/// A stream's consumption-driven retention (SPEC §2 "Consumption-driven
/// retention"): with `consumed`, the records every consumer group of the
/// stream has consumed (a queue group's acknowledged prefix, a lease
/// group's committed offset) are reclaimed; with `max_age`, records older
/// than it are reclaimed whether consumed or not (the backstop for an
/// abandoned group). Neither rule: no policy (the default).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct RetentionPolicy {
    /// Reclaim what every consumer group has consumed.
    pub consumed: bool,
    /// Reclaim records older than this (1 ms to [`MAX_RETENTION_AGE`]).
    pub max_age: Option<Duration>,
}

impl RetentionPolicy {
    /// No rule (setting it clears a stream's policy).
    pub fn new() -> Self {
        RetentionPolicy::default()
    }
    /// Reclaims what every consumer group has consumed.
    pub fn consumed(mut self, on: bool) -> Self {
        self.consumed = on;
        self
    }
    /// Reclaims records older than `age`, consumed or not.
    pub fn max_age(mut self, age: Duration) -> Self {
        self.max_age = Some(age);
        self
    }
}

/// What one reclaim took (SPEC §2 "Consumption-driven retention").
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Reclaimed {
    /// The stream's retained start afterwards.
    pub retained_offset: u64,
    /// Bytes reclaimed because every consumer group had consumed them.
    pub consumed_bytes: u64,
    /// Bytes reclaimed by the age backstop that some group had not consumed.
    pub aged_bytes: u64,
}

/// Where a fork's inherited prefix ends (SPEC §2 "Forks"). Offsets are the
/// source's; the fork's own bytes start at the resolved point.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ForkPoint {
    /// The source's tail when the fork is made.
    Tail,
    /// A byte offset of the source, between its retained start and its tail.
    Offset(u64),
    /// `bytes` bytes into the record that starts at `offset` (at most its
    /// length; the record is cut there).
    IntoRecord {
        /// Where the record starts.
        offset: u64,
        /// Bytes of it the fork keeps.
        bytes: u64,
    },
    /// The `count` records from the one that starts at `offset` (JSON
    /// mode's message sub-offset).
    Records {
        /// Where the first record starts.
        offset: u64,
        /// How many records the fork keeps.
        count: u64,
    },
}

/// Fork a stream (SPEC §2 "Forks"): create `create.id` holding the
/// source's bytes below the fork point, at the source's offsets, followed
/// by its own appends. The fork has its own settings, producers and
/// lifetime; in `create`, a `content_type` of `None` and a TTL and expiry
/// both `None` are inherited from the source, and a named content type
/// must be the source's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fork {
    /// The new stream's settings and its own initial records.
    pub create: Create,
    /// The stream forked from.
    pub source: StreamId,
    /// Where the inherited prefix ends.
    pub point: ForkPoint,
}

impl Fork {
    /// A fork of `source` at its tail, with the settings of `create`.
    pub fn new(create: Create, source: StreamId) -> Self {
        Fork { create, source, point: ForkPoint::Tail }
    }
    /// Sets the fork point.
    pub fn at(mut self, point: ForkPoint) -> Self {
        self.point = point;
        self
    }
}

/// What a fork needs of its source: its head and incarnation (the commit
/// index of the create that made it, which a re-created stream changes).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForkSourceInfo {
    /// The source's head.
    pub head: HeadReply,
    /// The source's incarnation.
    pub incarnation: u64,
}

/// A message one group owes another for a fork (the outbox of
/// ARCHITECTURE.md "Forks across groups"), as the fork keeper sees it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ForkOwed {
    /// Pin the source for this fork, then acknowledge to the fork's group.
    Pin {
        /// The fork (of this group).
        fork: StreamId,
        /// The fork's token.
        token: u64,
        /// The source.
        source: StreamId,
        /// The source incarnation copied.
        source_incarnation: u64,
    },
    /// Drop this fork's pin on the source, then tell the fork's group.
    Unpin {
        /// The fork (of this group; it may be gone).
        fork: StreamId,
        /// The fork's token.
        token: u64,
        /// The source.
        source: StreamId,
    },
}

pub use crate::state::fork_copy::ForkCopy;
