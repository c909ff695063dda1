//! The data-plane commands of a group: create, append, append batch and
//! close (SPEC §2 Create, Append, Append batch, Close).
//!
//! Every op here has two phases: it first checks everything against the
//! unchanged state (returning an error, or an idempotent reply, without
//! writing), and only then consumes one commit index and writes. Check
//! order for appends: empty payload, stream lookup, content type, producer
//! rules, closed, `stream_seq`. Choices this module makes:
//!
//! - `stream_append_count` counts every accepted append, an empty
//!   `close_after` append included; a plain `Close` and a `Create` without
//!   an initial payload count nothing. The initial payload of a create is
//!   append number one.
//! - An empty `close_after` append on an already-closed stream is an
//!   idempotent success (no mutation), and so is `Close` on a closed stream;
//!   neither consumes the producer seq or `stream_seq` it carried.
//! - A batch whose stream is closed, or whose content type differs, fails
//!   every item with that error; producer errors fail the whole request.
//!   A batch in which no item lands (all empty, or no items) is not a
//!   mutation and consumes no producer seq.
//! - An idempotent re-create ignores the request's payload, attributes,
//!   producer and `stream_seq`; a create of a new stream with an empty
//!   initial payload stores no record (and counts no append).

use bytes::Bytes;

use crate::error::{Error, ErrorKind, Result};
use crate::state::api::{validate_attrs, BatchReply, CloseReply, CreateReply};
use crate::state::command::{Append, AppendBatch, Close, Create, Effect, Producer, Response};
use crate::state::group::producer::{self, ItemFailure, ItemOutcome, Landed, ProducerCheck, ProducerEntry};
use crate::state::group::stream::StreamState;
use crate::state::group::create_rules::{settings_match, Prefix};
use crate::state::group::GroupState;

impl GroupState {
    /// Admission of new hot bytes (SPEC §4 `max_hot_bytes_per_group`):
    /// checked after duplicate detection, so retries and idempotent
    /// re-creates, which add nothing, always pass.
    fn check_hot_room(&self, added: u64) -> Result<()> {
        let limit = self.limits.max_hot_bytes;
        let after = self.hot_bytes.saturating_add(added);
        if added > 0 && after > limit {
            return Err(ErrorKind::ColdBackpressure { before: self.hot_bytes, after, limit }.into());
        }
        Ok(())
    }

    /// A create; `more` are further initial records after the initial
    /// payload ([`crate::state::command::Op::CreateRecords`]).
    pub(crate) fn create(
        &mut self,
        req: &Create,
        more: &[Bytes],
        now: u64,
        effects: &mut Vec<Effect>,
    ) -> Result<Response> {
        self.create_with(req, more, None, now, effects)
    }

    /// A create, of a fork when `prefix` holds its inherited records: the
    /// stream then starts at `prefix.start` with them, before its own
    /// initial records (which alone count as its first append).
    pub(crate) fn create_with(
        &mut self,
        req: &Create,
        more: &[Bytes],
        prefix: Option<Prefix<'_>>,
        now: u64,
        effects: &mut Vec<Effect>,
    ) -> Result<Response> {
        check_records(req.initial_payload.as_ref(), more)?;
        if self.forks.is_tombstone(&req.id) {
            return Err(super::forks::gone(&req.id));
        }
        if req.ttl_s.is_some() && req.expires_at_ms.is_some() {
            return Err(Error::bad_request("ttl_s and expires_at_ms are exclusive"));
        }
        if req.ttl_s == Some(0) {
            return Err(Error::bad_request("ttl_s must be at least 1"));
        }
        if let Some(at) = req.expires_at_ms {
            if at <= now {
                return Err(Error::bad_request(format!("expires_at_ms {at} is not after now ({now})")));
            }
        }
        if let Some(attrs) = &req.attrs {
            validate_attrs(attrs)?;
        }
        let mut replaces_expired = false;
        if let Some(existing) = self.stream(&req.id) {
            if existing.is_expired(now) && self.forks.is_pinned(&req.id) {
                // Expired with forks: soft-deleted once the sweep removes it.
                return Err(super::forks::gone(&req.id));
            }
            if existing.is_expired(now) {
                replaces_expired = true;
            } else {
                return settings_match(existing, req).map(|()| {
                    Response::Create(CreateReply {
                        already_exists: true,
                        next_offset: existing.next_offset,
                        commit_index: self.commit_index,
                    })
                });
            }
        }
        if let Some(args) = &req.producer {
            if args.seq != 0 {
                return Err(ErrorKind::ProducerSeqConflict { expected: 0, received: args.seq }.into());
            }
        }
        let limit = self.limits.max_streams_per_group;
        if self.stream_count - u64::from(replaces_expired) >= limit {
            return Err(ErrorKind::TooManyStreams { limit }.into());
        }
        let initial_len: u64 = req.initial_payload.iter().chain(more).map(|p| p.len() as u64).sum();
        let inherited_len: u64 = prefix.as_ref().map_or(0, |p| p.records.iter().map(|r| r.len() as u64).sum());
        self.check_hot_room(initial_len + inherited_len)?;

        let commit_index = self.bump();
        if replaces_expired {
            self.remove_stream(&req.id);
            self.forks_on_removed(&req.id);
            effects.push(Effect::Removed(req.id.clone()));
        }
        let mut stream = StreamState::new(req.id.clone(), req.effective_content_type().to_string(), now);
        if let Some(prefix) = &prefix {
            stream.retained_offset = prefix.start;
            stream.next_offset = prefix.start;
            for record in prefix.records {
                stream.push_record(record, now);
            }
        }
        stream.incarnation = commit_index;
        stream.ttl_s = req.ttl_s;
        stream.expires_at_ms = req.expires_at_ms;
        stream.attrs = req.attrs.clone();
        stream.last_stream_seq = req.stream_seq.clone();
        let mut landed =
            Landed { start_offset: stream.next_offset, next_offset: stream.next_offset, ..Landed::default() };
        if let Some(payload) = req.initial_payload.as_ref().filter(|p| !p.is_empty()) {
            landed = stream.land(payload, now);
            for payload in more {
                stream.push_record(payload, now);
            }
            landed.next_offset = stream.next_offset;
        }
        stream.closed = req.closed;
        landed.closed = req.closed;
        if let Some(args) = &req.producer {
            let entry =
                ProducerEntry { seq: args.seq, commit_index, items: vec![ItemOutcome::Landed(landed)] };
            self.record_producer(&mut stream, args, entry);
        }
        let next_offset = stream.next_offset;
        if next_offset > stream.retained_offset || req.closed {
            effects.push(Effect::Advanced(req.id.clone()));
        }
        self.insert_stream(stream);
        Ok(Response::Create(CreateReply { already_exists: false, next_offset, commit_index }))
    }

    /// An append; `more` are further records after the payload, landing
    /// with it as one append ([`crate::state::command::Op::AppendRecords`]).
    pub(crate) fn append(
        &mut self,
        req: &Append,
        more: &[Bytes],
        now: u64,
        effects: &mut Vec<Effect>,
    ) -> Result<Response> {
        if req.payload.is_empty() && !req.close_after {
            return Err(ErrorKind::EmptyAppend.into());
        }
        check_records(Some(&req.payload), more)?;
        let stream = self.lookup(&req.id, now)?;
        check_content_type(stream, req.content_type.as_deref())?;
        if let Some(args) = &req.producer {
            if let ProducerCheck::Duplicate(entry) = producer::check(&stream.producers, args)? {
                return Ok(Response::Append(entry.replay_append()));
            }
        }
        if stream.closed {
            if req.payload.is_empty() {
                let idle = Landed {
                    start_offset: stream.next_offset,
                    next_offset: stream.next_offset,
                    append_count: stream.append_count,
                    closed: true,
                };
                return Ok(Response::Append(idle.reply(false, self.commit_index)));
            }
            return Err(ErrorKind::StreamClosed { next_offset: stream.next_offset }.into());
        }
        check_stream_seq(stream, req.stream_seq.as_deref())?;
        let added = req.payload.len() as u64 + more.iter().map(|p| p.len() as u64).sum::<u64>();
        self.check_hot_room(added)?;

        let commit_index = self.bump();
        let stream = Self::stream_mut(&mut self.buckets, &req.id)?;
        let mut landed = stream.land(&req.payload, now);
        for payload in more {
            stream.push_record(payload, now);
        }
        landed.next_offset = stream.next_offset;
        stream.closed |= req.close_after;
        landed.closed = stream.closed;
        if let Some(seq) = &req.stream_seq {
            stream.last_stream_seq = Some(seq.clone());
        }
        if let Some(args) = &req.producer {
            let entry =
                ProducerEntry { seq: args.seq, commit_index, items: vec![ItemOutcome::Landed(landed)] };
            producer::record(
                &mut stream.producers,
                args,
                entry,
                self.limits.max_producers_per_stream,
                self.limits.producer_window,
            );
        }
        self.hot_bytes += added;
        self.set_last_access(&req.id, now);
        effects.push(Effect::Advanced(req.id.clone()));
        Ok(Response::Append(landed.reply(false, commit_index)))
    }

    pub(crate) fn append_batch(
        &mut self,
        req: &AppendBatch,
        now: u64,
        effects: &mut Vec<Effect>,
    ) -> Result<Response> {
        let stream = self.lookup(&req.id, now)?;
        let fail_all = |error: Error, commit_index: u64| {
            let items = req.payloads.iter().map(|_| Err(error.clone())).collect();
            Ok(Response::Batch(BatchReply { items, commit_index }))
        };
        if let Err(error) = check_content_type(stream, req.content_type.as_deref()) {
            return fail_all(error, self.commit_index);
        }
        if let Some(args) = &req.producer {
            if let ProducerCheck::Duplicate(entry) = producer::check(&stream.producers, args)? {
                return Ok(Response::Batch(entry.replay_batch()));
            }
        }
        if stream.closed {
            let error = ErrorKind::StreamClosed { next_offset: stream.next_offset }.into();
            return fail_all(error, self.commit_index);
        }
        if req.payloads.iter().all(Bytes::is_empty) {
            return fail_all(ErrorKind::EmptyAppend.into(), self.commit_index);
        }
        // A batch is admitted whole or not at all (SPEC §4).
        self.check_hot_room(req.payloads.iter().map(|p| p.len() as u64).sum())?;

        let commit_index = self.bump();
        let stream = Self::stream_mut(&mut self.buckets, &req.id)?;
        let mut outcomes = Vec::with_capacity(req.payloads.len());
        let mut added = 0u64;
        for payload in &req.payloads {
            if payload.is_empty() {
                outcomes.push(ItemOutcome::Failed(ItemFailure::EmptyAppend));
            } else {
                added += payload.len() as u64;
                outcomes.push(ItemOutcome::Landed(stream.land(payload, now)));
            }
        }
        let items = outcomes
            .iter()
            .map(|outcome| match outcome {
                ItemOutcome::Landed(landed) => Ok(landed.reply(false, commit_index)),
                ItemOutcome::Failed(failure) => Err(failure.to_error()),
            })
            .collect();
        if let Some(args) = &req.producer {
            let entry = ProducerEntry { seq: args.seq, commit_index, items: outcomes };
            producer::record(
                &mut stream.producers,
                args,
                entry,
                self.limits.max_producers_per_stream,
                self.limits.producer_window,
            );
        }
        self.hot_bytes += added;
        self.set_last_access(&req.id, now);
        effects.push(Effect::Advanced(req.id.clone()));
        Ok(Response::Batch(BatchReply { items, commit_index }))
    }

    pub(crate) fn close(&mut self, req: &Close, now: u64, effects: &mut Vec<Effect>) -> Result<Response> {
        let stream = self.lookup(&req.id, now)?;
        if let Some(args) = &req.producer {
            if let ProducerCheck::Duplicate(entry) = producer::check(&stream.producers, args)? {
                return Ok(Response::Close(entry.replay_close()));
            }
        }
        if stream.closed {
            return Ok(Response::Close(CloseReply {
                next_offset: stream.next_offset,
                already_closed: true,
                commit_index: self.commit_index,
            }));
        }
        check_stream_seq(stream, req.stream_seq.as_deref())?;

        let commit_index = self.bump();
        let stream = Self::stream_mut(&mut self.buckets, &req.id)?;
        stream.closed = true;
        if let Some(seq) = &req.stream_seq {
            stream.last_stream_seq = Some(seq.clone());
        }
        let next_offset = stream.next_offset;
        if let Some(args) = &req.producer {
            let landed = Landed {
                start_offset: next_offset,
                next_offset,
                append_count: stream.append_count,
                closed: true,
            };
            let entry =
                ProducerEntry { seq: args.seq, commit_index, items: vec![ItemOutcome::Landed(landed)] };
            producer::record(
                &mut stream.producers,
                args,
                entry,
                self.limits.max_producers_per_stream,
                self.limits.producer_window,
            );
        }
        self.set_last_access(&req.id, now);
        effects.push(Effect::Advanced(req.id.clone()));
        Ok(Response::Close(CloseReply { next_offset, already_closed: false, commit_index }))
    }

    /// Records a producer on a stream that is not stored yet.
    fn record_producer(&self, stream: &mut StreamState, args: &Producer, entry: ProducerEntry) {
        producer::record(
            &mut stream.producers,
            args,
            entry,
            self.limits.max_producers_per_stream,
            self.limits.producer_window,
        );
    }
}

/// Records after the first of a create or an append: none may be empty,
/// nor the first when there are more.
fn check_records(first: Option<&Bytes>, more: &[Bytes]) -> Result<()> {
    if more.is_empty() {
        return Ok(());
    }
    if first.is_none_or(Bytes::is_empty) || more.iter().any(Bytes::is_empty) {
        return Err(Error::bad_request("a record of a multi-record create or append is empty"));
    }
    Ok(())
}

/// A request's content type, when given, must equal the stream's exactly.
fn check_content_type(stream: &StreamState, content_type: Option<&str>) -> Result<()> {
    match content_type {
        Some(received) if received != stream.content_type => Err(ErrorKind::ContentTypeMismatch {
            expected: stream.content_type.clone(),
            received: received.to_string(),
        }
        .into()),
        _ => Ok(()),
    }
}

/// A `stream_seq` must be strictly greater, byte-wise, than the last one.
fn check_stream_seq(stream: &StreamState, seq: Option<&str>) -> Result<()> {
    match (seq, stream.last_stream_seq.as_deref()) {
        (Some(received), Some(last)) if received.as_bytes() <= last.as_bytes() => {
            Err(ErrorKind::StreamSeqConflict { last: last.to_string(), received: received.to_string() }
                .into())
        }
        _ => Ok(()),
    }
}
