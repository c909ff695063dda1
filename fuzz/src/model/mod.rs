//! A deliberately simple reference model of one group (SPEC §2), for
//! model-based property tests of `rill_shard::state::group::GroupState`.
//!
//! The model favours obviousness over efficiency: each stream keeps every
//! byte ever appended in one `Vec<u8>` and the boundaries of every record
//! ever accepted, forever; retention only moves a number, and which records
//! are "evicted" is recomputed from it on demand. Producers keep their full
//! history of accepted seqs in the current epoch; the bounded window of the
//! real machine is modelled by arithmetic on seqs (only the last
//! `producer_window` seqs can be replayed). Expiry is evaluated from the
//! stored settings at every access. Nothing here shares code with the real
//! machine beyond public API types, `record_digest` and the limits.
//!
//! Rules the model encodes, in SPEC order (the real machine documents the
//! same choices): checks happen in the order empty payload, lookup, content
//! type, producer, closed, `stream_seq`; a command that is rejected or
//! idempotent changes nothing; every other command consumes one commit
//! index. The command handlers live in [`ops`], the rules they
//! share in [`rules`], the cold tier's in [`cold`], forks (copies, pins,
//! tombstones and the outbox) in [`forks`].

pub mod cold;
pub mod forks;
pub mod leases;
pub mod ops;
pub mod queues;
pub mod retention;
pub mod rules;

use std::collections::{BTreeMap, BTreeSet};

use rill_shard::error::ErrorCode;
use rill_shard::state::api::{HeadReply, DEFAULT_CONTENT_TYPE};
use rill_shard::state::group::GroupLimits;
use rill_shard::state::integrity::{record_digest, Integrity, SetSum};
use rill_shard::StreamId;

use crate::observe::{Fault, Item};

/// What a producer retry replays: the commit index and the item results.
pub type Recorded = (u64, Vec<Result<Item, Fault>>);

/// One producer id on one stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelProducer {
    pub epoch: u64,
    pub last_seq: u64,
    pub last_used: u64,
    /// Every accepted seq of the current epoch.
    pub history: BTreeMap<u64, Recorded>,
}

/// One stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelStream {
    pub content_type: String,
    pub data: Vec<u8>,
    /// `(start, end)` of every record ever accepted.
    pub records: Vec<(u64, u64)>,
    /// The time of each of `records`, in the same order.
    pub times: Vec<u64>,
    pub retained: u64,
    pub appends: u64,
    pub closed: bool,
    pub ttl_s: Option<u64>,
    pub expires_at_ms: Option<u64>,
    pub last_access_ms: u64,
    pub stream_seq: Option<String>,
    pub producers: BTreeMap<String, ModelProducer>,
    pub attrs: Option<String>,
    /// offset -> (content type, payload)
    pub snapshots: BTreeMap<u64, (String, Vec<u8>)>,
    /// The commit index that created this stream (flush and compaction
    /// commits name it, so a re-created stream is told apart).
    pub incarnation: u64,
    /// Consumer groups: name -> (owner, generation, expires at, committed).
    pub leases: BTreeMap<String, ModelLease>,
    /// Queue groups (one namespace with `leases`).
    pub queues: BTreeMap<String, crate::model::queues::ModelQueue>,
    /// Every record starting below this offset was moved to the cold tier.
    pub flushed: u64,
    /// The flushed ranges retention has not dropped, contiguous, ending at
    /// `flushed`.
    pub chunks: Vec<ModelChunk>,
    /// The retention policy: (consumed rule, max age ms).
    pub retention: Option<(bool, Option<u64>)>,
}

/// A flushed range of a stream: the records `[start, end)` held by one
/// slice of one pack.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelChunk {
    pub start: u64,
    pub end: u64,
    pub records: u64,
    pub pack: u64,
    pub slice: u32,
}

impl ModelStream {
    pub fn new(content_type: &str, now_ms: u64) -> Self {
        ModelStream {
            content_type: content_type.to_string(),
            data: Vec::new(),
            records: Vec::new(),
            times: Vec::new(),
            retained: 0,
            appends: 0,
            closed: false,
            ttl_s: None,
            expires_at_ms: None,
            last_access_ms: now_ms,
            stream_seq: None,
            producers: BTreeMap::new(),
            attrs: None,
            snapshots: BTreeMap::new(),
            incarnation: 0,
            leases: BTreeMap::new(),
            queues: BTreeMap::new(),
            flushed: 0,
            chunks: Vec::new(),
            retention: None,
        }
    }

    pub fn tail(&self) -> u64 {
        self.data.len() as u64
    }

    pub fn deadline(&self) -> Option<u64> {
        if let Some(at) = self.expires_at_ms {
            return Some(at);
        }
        self.ttl_s.map(|ttl| self.last_access_ms + ttl * 1000)
    }

    pub fn alive(&self, now_ms: u64) -> bool {
        match self.deadline() {
            Some(deadline) => now_ms < deadline,
            None => true,
        }
    }

    /// Records that retention has not dropped (those ending above it).
    pub fn live_records(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.records.iter().copied().filter(|(_, end)| *end > self.retained)
    }

    /// Records not flushed that retention has not dropped: the bytes the
    /// real machine holds in memory.
    pub fn hot_records(&self) -> impl Iterator<Item = (u64, u64)> + '_ {
        self.live_records().filter(|(start, _)| *start >= self.flushed)
    }

    /// Bytes the real machine holds in memory for this stream.
    pub fn hot_bytes(&self) -> u64 {
        self.hot_records().map(|(start, end)| end - start).sum()
    }

    /// Whether the record `[start, end)` lies in a flushed range that
    /// retention kept (retention drops flushed ranges whole: a record in
    /// a kept range stays live even when it ends below the retained start).
    fn in_kept_chunk(&self, start: u64, end: u64) -> bool {
        self.chunks.first().is_some_and(|c| start >= c.start && end <= self.flushed)
    }

    pub fn integrity(&self) -> Integrity {
        let mut integrity = Integrity { live: SetSum::default(), evicted: SetSum::default() };
        for (start, end) in self.records.iter().copied() {
            let digest = record_digest(start, &self.data[start as usize..end as usize]);
            if end > self.retained || self.in_kept_chunk(start, end) {
                integrity.live.add_digest(digest);
            } else {
                integrity.evicted.add_digest(digest);
            }
        }
        integrity
    }

    /// Appends one non-empty payload as a record at `now_ms` (its time is
    /// never below the previous record's).
    pub fn push(&mut self, payload: &[u8], now_ms: u64) {
        let start = self.tail();
        self.data.extend_from_slice(payload);
        self.records.push((start, self.tail()));
        let at = self.times.last().map_or(now_ms, |last| now_ms.max(*last));
        self.times.push(at);
    }

    /// Live records with their times: `(start, end, at_ms)`.
    pub fn live_timed(&self) -> impl Iterator<Item = (u64, u64, u64)> + '_ {
        self.records
            .iter()
            .zip(&self.times)
            .map(|(&(start, end), &at)| (start, end, at))
            .filter(|&(_, end, _)| end > self.retained)
    }
}

/// One leased consumer group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelLease {
    pub owner: Option<String>,
    pub generation: u64,
    pub expires_at: u64,
    pub committed: Option<u64>,
}

/// A read as the model answers it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelRead {
    pub bytes: Vec<u8>,
    pub next_offset: u64,
    pub up_to_date: bool,
    pub closed: bool,
}

/// The model of one group.
#[derive(Clone, Debug)]
pub struct Model {
    pub limits: GroupLimits,
    pub commit_index: u64,
    pub buckets: BTreeSet<String>,
    pub streams: BTreeMap<StreamId, ModelStream>,
    pub cold: ModelCold,
    /// Consumer group membership: (bucket, consumer group) -> consumer ->
    /// live until.
    pub members: BTreeMap<(String, String), BTreeMap<String, u64>>,
    /// Fork pins, origins and the outbox.
    pub forks: forks::ModelForks,
}

/// A pack file some chunk still uses.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelPack {
    pub bucket: String,
    pub file: String,
    /// Chunks (over all streams) that use it.
    pub users: u32,
}

/// A file queued for removal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelGc {
    pub file: String,
    pub bucket: String,
    pub not_before_ms: u64,
}

/// The group's pack files and removal queue.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ModelCold {
    pub packs: BTreeMap<u64, ModelPack>,
    pub gc: BTreeMap<u64, ModelGc>,
    pub next_gc: u64,
}

impl Model {
    pub fn new(limits: GroupLimits) -> Self {
        Model {
            limits,
            commit_index: 0,
            buckets: BTreeSet::new(),
            streams: BTreeMap::new(),
            cold: ModelCold::default(),
            members: BTreeMap::new(),
            forks: forks::ModelForks::default(),
        }
    }

    /// The live stream, or the not-found fault SPEC §2 gives: a removed
    /// source that forks still pin is `StreamGone`, and so is an expired
    /// one before the sweep removes it (SPEC §2 "Forks").
    pub fn find(&self, id: &StreamId, now_ms: u64) -> Result<&ModelStream, Fault> {
        if !self.buckets.contains(id.bucket()) {
            return Err(Fault::new(ErrorCode::BucketNotFound));
        }
        match self.streams.get(id) {
            Some(stream) if stream.alive(now_ms) => Ok(stream),
            _ if self.forks.is_tombstone(id) || self.forks.is_pinned(id) => {
                Err(Fault::new(ErrorCode::StreamGone))
            }
            _ => Err(Fault::new(ErrorCode::StreamNotFound)),
        }
    }

    pub fn find_mut(&mut self, id: &StreamId, now_ms: u64) -> Result<&mut ModelStream, Fault> {
        self.find(id, now_ms)?;
        self.streams.get_mut(id).ok_or(Fault::new(ErrorCode::StreamNotFound))
    }

    pub fn hot_bytes(&self) -> u64 {
        self.streams.values().map(ModelStream::hot_bytes).sum()
    }

    pub fn next_expiry_ms(&self) -> Option<u64> {
        self.streams.values().filter_map(ModelStream::deadline).min()
    }

    pub fn read(&self, id: &StreamId, offset: u64, max_len: usize, now_ms: u64) -> Result<ModelRead, Fault> {
        let stream = self.find(id, now_ms)?;
        if offset < stream.retained {
            return Err(Fault::with(ErrorCode::OffsetGone, &[offset, stream.retained]));
        }
        if offset > stream.tail() {
            return Err(Fault::with(ErrorCode::OffsetOutOfRange, &[offset, stream.tail()]));
        }
        let len = max_len.min(self.limits.max_read_bytes);
        if len == 0 {
            return Err(Fault::new(ErrorCode::BadRequest));
        }
        let end = stream.tail().min(offset + len as u64);
        let at_tail = end == stream.tail();
        Ok(ModelRead {
            bytes: stream.data[offset as usize..end as usize].to_vec(),
            next_offset: end,
            up_to_date: at_tail,
            closed: at_tail && stream.closed,
        })
    }

    /// A record read: whole records from the first one starting at or
    /// after `offset`, as many as end within `max_len` bytes of the first
    /// (always the first); `(start, at_ms)` of each.
    pub fn read_records(
        &self,
        id: &StreamId,
        offset: u64,
        max_len: usize,
        now_ms: u64,
    ) -> Result<(ModelRead, Vec<(u64, u64)>), Fault> {
        let stream = self.find(id, now_ms)?;
        if offset < stream.retained {
            return Err(Fault::with(ErrorCode::OffsetGone, &[offset, stream.retained]));
        }
        if offset > stream.tail() {
            return Err(Fault::with(ErrorCode::OffsetOutOfRange, &[offset, stream.tail()]));
        }
        let len = max_len.min(self.limits.max_read_bytes) as u64;
        if len == 0 {
            return Err(Fault::new(ErrorCode::BadRequest));
        }
        let mut taken: Vec<(u64, u64, u64)> = Vec::new();
        for (start, end, at) in stream.live_timed().filter(|&(start, _, _)| start >= offset) {
            if taken.first().is_some_and(|&(first, _, _)| end > first + len) {
                break;
            }
            taken.push((start, end, at));
        }
        let (from, to) = match (taken.first(), taken.last()) {
            (Some(first), Some(last)) => (first.0, last.1),
            _ => (stream.tail(), stream.tail()),
        };
        let at_tail = to == stream.tail();
        let read = ModelRead {
            bytes: stream.data[from as usize..to as usize].to_vec(),
            next_offset: to,
            up_to_date: at_tail,
            closed: at_tail && stream.closed,
        };
        Ok((read, taken.iter().map(|&(start, _, at)| (start, at)).collect()))
    }

    /// The first live record stamped at or after `at_ms` (its start, at
    /// least the retained offset), else the tail.
    pub fn offset_at(&self, id: &StreamId, at_ms: u64, now_ms: u64) -> Result<u64, Fault> {
        let stream = self.find(id, now_ms)?;
        Ok(stream
            .live_timed()
            .find(|&(_, _, at)| at >= at_ms)
            .map_or(stream.tail(), |(start, _, _)| start.max(stream.retained)))
    }

    pub fn head(&self, id: &StreamId, now_ms: u64) -> Result<HeadReply, Fault> {
        let stream = self.find(id, now_ms)?;
        Ok(HeadReply {
            content_type: stream.content_type.clone(),
            tail_offset: stream.tail(),
            closed: stream.closed,
            ttl_s: stream.ttl_s,
            expires_at_ms: stream.expires_at_ms,
            expiry_deadline_ms: stream.deadline(),
            retained_offset: stream.retained,
            snapshot_offset: stream.snapshots.keys().max().copied(),
            append_count: stream.appends,
            integrity: stream.integrity(),
        })
    }

    pub fn get_attrs(&self, id: &StreamId, now_ms: u64) -> Result<Option<String>, Fault> {
        Ok(self.find(id, now_ms)?.attrs.clone())
    }

    /// The latest snapshot `(offset, content type, payload)` and the read
    /// after it.
    #[allow(clippy::type_complexity)]
    pub fn bootstrap(
        &self,
        id: &StreamId,
        max_len: usize,
        now_ms: u64,
    ) -> Result<(Option<(u64, String, Vec<u8>)>, ModelRead), Fault> {
        let stream = self.find(id, now_ms)?;
        let latest = stream.snapshots.iter().next_back().map(|(o, (ct, p))| (*o, ct.clone(), p.clone()));
        let from = latest.as_ref().map_or(stream.retained, |(offset, _, _)| *offset);
        Ok((latest, self.read(id, from, max_len, now_ms)?))
    }

    pub fn renewal_due(&self, id: &StreamId, now_ms: u64) -> bool {
        match self.find(id, now_ms) {
            Ok(stream) if stream.expires_at_ms.is_none() => match stream.ttl_s {
                Some(ttl) => now_ms.saturating_sub(stream.last_access_ms) >= ttl * 1000 / 4,
                None => false,
            },
            _ => false,
        }
    }

    /// The producer's `(epoch, last_seq)` on a stored stream, if remembered.
    pub fn producer(&self, id: &StreamId, producer: &str) -> Option<(u64, u64)> {
        let p = self.streams.get(id)?.producers.get(producer)?;
        Some((p.epoch, p.last_seq))
    }

    /// The effective content type of a create.
    pub fn content_type_of(requested: Option<&str>) -> &str {
        requested.unwrap_or(DEFAULT_CONTENT_TYPE)
    }
}
