//! The control-plane commands of a group: delete, attributes, TTL touch,
//! application snapshots, retention and expiry (SPEC §2 "Head, close,
//! delete, attributes", "TTL and expiry", "Snapshots, retention,
//! bootstrap").
//!
//! Like the data-plane ops, each checks everything before it consumes a
//! commit index and writes. Choices this module makes:
//!
//! - `SetAttrs` is always a mutation when it succeeds, even if the value is
//!   unchanged.
//! - `PublishSnapshot` keeps at most `max_snapshots_per_stream` snapshots;
//!   beyond that the one with the lowest offset is dropped, which is the one
//!   just published when it is older than all the kept ones.
//! - `AdvanceRetention` to an offset at or below the retained start is a
//!   no-op success. Above it, the stream needs an application snapshot
//!   (`SnapshotNotFound` when it has none) and the offset may not exceed the
//!   latest snapshot's (`BadRequest`). Records ending at or below the new
//!   start are dropped (their digests move to `evicted`); a record that
//!   straddles it stays, its bytes below the start unreadable. Snapshots
//!   below the new start are dropped; the latest never is.
//! - `ExpireDue` removes expired streams and reports them in (bucket,
//!   stream) order.

use crate::error::{Error, ErrorKind, Result};
use crate::state::api::{validate_attrs, AppSnapshot, SnapshotReply};
use crate::state::command::{Effect, PublishSnapshot, Response};
use crate::state::group::GroupState;
use crate::state::name::StreamId;

impl GroupState {
    pub(crate) fn delete(&mut self, id: &StreamId, now: u64, effects: &mut Vec<Effect>) -> Result<Response> {
        self.lookup(id, now)?;
        let commit_index = self.bump();
        self.remove_stream(id);
        self.forks_on_removed(id);
        effects.push(Effect::Removed(id.clone()));
        Ok(Response::Deleted { commit_index })
    }

    pub(crate) fn set_attrs(&mut self, id: &StreamId, attrs: Option<&str>, now: u64) -> Result<Response> {
        self.lookup(id, now)?;
        if let Some(attrs) = attrs {
            validate_attrs(attrs)?;
        }
        let commit_index = self.bump();
        Self::stream_mut(&mut self.buckets, id)?.attrs = attrs.map(str::to_string);
        Ok(Response::AttrsSet { commit_index })
    }

    pub(crate) fn touch(&mut self, id: &StreamId, now: u64) -> Result<Response> {
        self.lookup(id, now)?;
        if !self.renewal_due(id, now) {
            return Ok(Response::Touched { renewed: false });
        }
        self.bump();
        self.set_last_access(id, now);
        Ok(Response::Touched { renewed: true })
    }

    pub(crate) fn publish_snapshot(&mut self, req: &PublishSnapshot, now: u64) -> Result<Response> {
        let stream = self.lookup(&req.id, now)?;
        if req.offset > stream.next_offset {
            return Err(ErrorKind::OffsetOutOfRange { offset: req.offset, tail: stream.next_offset }.into());
        }
        if req.offset < stream.retained_offset {
            return Err(ErrorKind::OffsetGone { offset: req.offset, retained: stream.retained_offset }.into());
        }
        let digest = *blake3::hash(&req.payload).as_bytes();
        if req.expected_digest.is_some_and(|expected| expected != digest) {
            return Err(Error::bad_request("snapshot payload does not match expected_digest"));
        }
        if let Some(existing) = stream.snapshots.get(&req.offset) {
            if existing.payload == req.payload && existing.content_type == req.content_type {
                return Ok(Response::Snapshot(SnapshotReply {
                    offset: req.offset,
                    already_existed: true,
                    commit_index: self.commit_index,
                }));
            }
            return Err(ErrorKind::SnapshotConflict { offset: req.offset }.into());
        }

        let commit_index = self.bump();
        let keep = self.limits.max_snapshots_per_stream;
        let stream = Self::stream_mut(&mut self.buckets, &req.id)?;
        let snapshot = AppSnapshot {
            offset: req.offset,
            content_type: req.content_type.clone(),
            payload: req.payload.clone(),
            digest,
        };
        stream.snapshots.insert(req.offset, snapshot);
        while stream.snapshots.len() > keep {
            stream.snapshots.pop_first();
        }
        Ok(Response::Snapshot(SnapshotReply { offset: req.offset, already_existed: false, commit_index }))
    }

    pub(crate) fn advance_retention(&mut self, id: &StreamId, offset: u64, now: u64) -> Result<Response> {
        let stream = self.lookup(id, now)?;
        if offset <= stream.retained_offset {
            return Ok(Response::Retention {
                retained_offset: stream.retained_offset,
                commit_index: self.commit_index,
            });
        }
        let Some(latest) = stream.latest_snapshot() else {
            return Err(ErrorKind::SnapshotNotFound { offset }.into());
        };
        if offset > latest.offset {
            return Err(Error::bad_request(format!(
                "retention offset {offset} is above the latest snapshot at {}",
                latest.offset
            )));
        }

        let commit_index = self.bump();
        let (freed, dropped) = Self::stream_mut(&mut self.buckets, id)?.retain_from(offset);
        self.hot_bytes -= freed;
        self.release_chunks(dropped, 0);
        Ok(Response::Retention { retained_offset: offset, commit_index })
    }

    pub(crate) fn expire_due(&mut self, now: u64, effects: &mut Vec<Effect>) -> Result<Response> {
        let mut due: Vec<StreamId> = self
            .expiry
            .iter()
            .take_while(|(deadline, _)| *deadline <= now)
            .map(|(_, id)| id.clone())
            .collect();
        if due.is_empty() {
            return Ok(Response::Expired { removed: due });
        }
        due.sort();
        self.bump();
        for id in &due {
            self.remove_stream(id);
            self.forks_on_removed(id);
            effects.push(Effect::Removed(id.clone()));
        }
        Ok(Response::Expired { removed: due })
    }
}
