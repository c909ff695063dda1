//! The reference model's command handlers (SPEC §2), one function per
//! operation, each written as "check everything, then change".
//!
//! `Model::apply` answers with an [`Observed`], the same shape the real
//! machine's answers are reduced to, so the property tests compare them
//! directly. A handler that returns an error or an idempotent answer must
//! not have touched the model; `apply` derives `mutated` from the commit
//! index and the tests check the state separately.

use rill_shard::error::ErrorCode;
use rill_shard::state::command::{Append, AppendBatch, Close, Create, Producer, PublishSnapshot};
use rill_shard::state::command::{Command, Effect, Op};
use rill_shard::StreamId;

use bytes::Bytes;

use crate::model::rules::{check_attrs, content_type_ok, last_ok, stream_seq_ok, Verdict};
use crate::model::{Model, ModelStream};
use crate::observe::{Fault, Item, Observed, Outcome};

type Answer = Result<Outcome, Fault>;

impl Model {
    /// Applies one command to the model.
    pub fn apply(&mut self, cmd: &Command) -> Observed {
        let before = self.commit_index;
        let mut effects = Vec::new();
        let now = cmd.now_ms;
        let result = match &cmd.op {
            Op::Create(req) => self.create(req, &[], now, &mut effects),
            Op::CreateRecords { create, more } => self.create(create, more, now, &mut effects),
            Op::Append(req) => self
                .append(req, &[], now, &mut effects)
                .map(|o| self.producer_seq(&req.id, req.producer.as_ref(), o)),
            Op::AppendRecords { append, more } => self
                .append(append, more, now, &mut effects)
                .map(|o| self.producer_seq(&append.id, append.producer.as_ref(), o)),
            Op::AppendBatch(req) => self
                .batch(req, now, &mut effects)
                .map(|o| self.producer_seq(&req.id, req.producer.as_ref(), o)),
            Op::Close(req) => self.close(req, now, &mut effects),
            Op::Delete(id) => self.delete(id, now, &mut effects),
            Op::SetAttrs { id, attrs } => self.set_attrs(id, attrs.as_deref(), now),
            Op::Touch(id) => self.touch(id, now),
            Op::PublishSnapshot(req) => self.publish(req, now),
            Op::AdvanceRetention { id, offset } => self.retain(id, *offset, now),
            Op::ExpireDue => self.expire(now, &mut effects),
            Op::FlushCommit(commit) => self.flush(commit),
            Op::GcAck { seqs } => self.gc_ack(seqs),
            Op::PurgeBucket { bucket } => self.purge(bucket, &mut effects),
            Op::CompactCommit(commit) => self.compact(commit, now),
            Op::AcquireLease(req) => self.acquire(req, now),
            Op::RenewLease(req) => self.renew(req, now),
            Op::ReleaseLease(req) => self.release_lease(req, now),
            Op::CommitOffset(req) => self.commit_offset(req, now),
            Op::Heartbeat(req) => self.heartbeat(req, now),
            Op::Leave(req) => self.leave(req, now),
            Op::QueueReceive(req) => self.queue_receive(req, now),
            Op::QueueAck(req) => self.queue_settle(req, false, now),
            Op::QueueNack(req) => self.queue_settle(req, true, now),
            Op::SetQueuePolicy(req) => self.set_queue_policy(req, now),
            Op::PurgeDeadLetters(req) => self.queue_dead_letters(req, false, now),
            Op::RedriveDeadLetters(req) => self.queue_dead_letters(req, true, now),
            Op::SetRetention(req) => self.set_retention(req, now),
            Op::Reclaim(req) => self.reclaim(req, now),
            Op::ForkCreate(req) => self.fork_create(req, now, &mut effects),
            Op::ForkPin(req) => self.fork_pin(req, now),
            Op::ForkPinAck(req) => self.fork_pin_ack(req, &mut effects),
            Op::ForkUnpin(req) => self.fork_unpin(req),
            Op::ForkOutboxDone(req) => self.fork_outbox_done(req),
        };
        Observed { result, mutated: self.commit_index != before, effects }
    }

    /// A producer append reports the producer's last accepted seq in the
    /// request's epoch, after the command (every landed item of a batch).
    fn producer_seq(&self, id: &StreamId, producer: Option<&Producer>, outcome: Outcome) -> Outcome {
        let Some(p) = producer else { return outcome };
        let highest = self
            .streams
            .get(id)
            .and_then(|s| s.producers.get(&p.id))
            .filter(|known| known.epoch == p.epoch)
            .map(|known| known.last_seq);
        match outcome {
            Outcome::Appended(item) => Outcome::Appended(Item { producer_seq: highest, ..item }),
            Outcome::Batch { items, commit_index } => Outcome::Batch {
                items: items
                    .into_iter()
                    .map(|i| i.map(|item| Item { producer_seq: highest, ..item }))
                    .collect(),
                commit_index,
            },
            other => other,
        }
    }

    fn create(&mut self, req: &Create, more: &[Bytes], now: u64, effects: &mut Vec<Effect>) -> Answer {
        self.create_with(req, more, None, now, effects)
    }

    /// A create; of a fork when `prefix` gives the copy's start and its
    /// records, which the stream then holds from that offset, before its
    /// own initial records (those alone are its first append).
    pub(crate) fn create_with(
        &mut self,
        req: &Create,
        more: &[Bytes],
        prefix: Option<(u64, &[Bytes])>,
        now: u64,
        effects: &mut Vec<Effect>,
    ) -> Answer {
        let bad = || Err(Fault::new(ErrorCode::BadRequest));
        if !records_ok(req.initial_payload.as_deref(), more) {
            return bad();
        }
        // A tombstone's name is taken until its last fork goes.
        if self.forks.is_tombstone(&req.id) {
            return Err(Fault::new(ErrorCode::StreamGone));
        }
        if req.ttl_s.is_some() && req.expires_at_ms.is_some() {
            return bad();
        }
        if req.ttl_s == Some(0) || req.expires_at_ms.is_some_and(|at| at <= now) {
            return bad();
        }
        if let Some(attrs) = &req.attrs {
            check_attrs(attrs)?;
        }
        let content_type = Model::content_type_of(req.content_type.as_deref()).to_string();
        let mut replacing = false;
        if let Some(old) = self.streams.get(&req.id) {
            if old.alive(now) {
                let differs = [
                    (old.content_type != content_type, "content_type"),
                    (old.ttl_s != req.ttl_s, "ttl_s"),
                    (old.expires_at_ms != req.expires_at_ms, "expires_at_ms"),
                    (old.closed != req.closed, "closed"),
                ];
                if differs.iter().any(|(d, _)| *d) {
                    return Err(Fault::new(ErrorCode::StreamConflict));
                }
                return Ok(Outcome::Created {
                    already_exists: true,
                    next_offset: old.tail(),
                    commit_index: self.commit_index,
                });
            }
            // Expired with forks: soft-deleted once the sweep removes it.
            if self.forks.is_pinned(&req.id) {
                return Err(Fault::new(ErrorCode::StreamGone));
            }
            replacing = true;
        }
        if let Some(p) = &req.producer {
            if p.seq != 0 {
                return Err(Fault::with(ErrorCode::ProducerSeqConflict, &[0, p.seq]));
            }
        }
        let others = self.streams.len() as u64 - u64::from(replacing);
        if others >= self.limits.max_streams_per_group {
            return Err(Fault::with(ErrorCode::TooManyStreams, &[self.limits.max_streams_per_group]));
        }
        let (start, inherited) = prefix.unwrap_or((0, &[]));
        let initial = req.initial_payload.iter().chain(more);
        let inherited_len: u64 = inherited.iter().map(|r| r.len() as u64).sum();
        self.room(initial.clone().map(|p| p.len() as u64).sum::<u64>() + inherited_len)?;

        self.commit_index += 1;
        if replacing {
            self.drop_stream(&req.id);
            self.forks.removed(&req.id);
            effects.push(Effect::Removed(req.id.clone()));
        }
        self.buckets.insert(req.id.bucket().to_string());
        let mut stream = ModelStream::new(&content_type, now);
        // Offsets below the copy's start are gone (never readable).
        stream.data = vec![0; start as usize];
        stream.retained = start;
        for record in inherited {
            stream.push(record, now);
        }
        stream.ttl_s = req.ttl_s;
        stream.expires_at_ms = req.expires_at_ms;
        stream.attrs = req.attrs.clone();
        stream.stream_seq = req.stream_seq.clone();
        stream.incarnation = self.commit_index;
        let own = stream.tail();
        let payload = req.initial_payload.as_deref().unwrap_or(&[]);
        if !payload.is_empty() {
            for record in initial {
                stream.push(record, now);
            }
            stream.appends = 1;
        }
        stream.closed = req.closed;
        let item = self.item(&stream, own);
        if let Some(p) = &req.producer {
            self.remember(&mut stream, p, vec![Ok(item)]);
        }
        if stream.tail() > stream.retained || stream.closed {
            effects.push(Effect::Advanced(req.id.clone()));
        }
        let next_offset = stream.tail();
        self.streams.insert(req.id.clone(), stream);
        Ok(Outcome::Created { already_exists: false, next_offset, commit_index: self.commit_index })
    }

    fn append(&mut self, req: &Append, more: &[Bytes], now: u64, effects: &mut Vec<Effect>) -> Answer {
        if req.payload.is_empty() && !req.close_after {
            return Err(Fault::new(ErrorCode::EmptyAppend));
        }
        if !records_ok(Some(&req.payload), more) {
            return Err(Fault::new(ErrorCode::BadRequest));
        }
        let stream = self.find(&req.id, now)?;
        content_type_ok(stream, req.content_type.as_deref())?;
        if let Some(p) = &req.producer {
            if let Verdict::Replay((commit_index, items)) = self.judge(stream, p)? {
                let last = last_ok(&items);
                return Ok(Outcome::Appended(Item { deduplicated: true, commit_index, ..last }));
            }
        }
        if stream.closed {
            if req.payload.is_empty() {
                let tail = stream.tail();
                return Ok(Outcome::Appended(Item {
                    start: tail,
                    next: tail,
                    count: stream.appends,
                    deduplicated: false,
                    closed: true,
                    commit_index: self.commit_index,
                    producer_seq: None,
                }));
            }
            return Err(Fault::with(ErrorCode::StreamClosed, &[stream.tail()]));
        }
        stream_seq_ok(stream, req.stream_seq.as_deref())?;
        self.room(req.payload.len() as u64 + more.iter().map(|p| p.len() as u64).sum::<u64>())?;

        self.commit_index += 1;
        let mut stream = self.streams.remove(&req.id).expect("found above");
        let start = stream.tail();
        for record in std::iter::once(&req.payload).chain(more).filter(|p| !p.is_empty()) {
            stream.push(record, now);
        }
        stream.appends += 1;
        stream.closed = stream.closed || req.close_after;
        let item = self.item(&stream, start);
        if req.stream_seq.is_some() {
            stream.stream_seq = req.stream_seq.clone();
        }
        if let Some(p) = &req.producer {
            self.remember(&mut stream, p, vec![Ok(item.clone())]);
        }
        stream.last_access_ms = now;
        self.streams.insert(req.id.clone(), stream);
        effects.push(Effect::Advanced(req.id.clone()));
        Ok(Outcome::Appended(item))
    }

    fn batch(&mut self, req: &AppendBatch, now: u64, effects: &mut Vec<Effect>) -> Answer {
        let stream = self.find(&req.id, now)?;
        let every = |fault: Fault, commit_index: u64| {
            let items = req.payloads.iter().map(|_| Err(fault.clone())).collect();
            Ok(Outcome::Batch { items, commit_index })
        };
        if let Err(fault) = content_type_ok(stream, req.content_type.as_deref()) {
            return every(fault, self.commit_index);
        }
        if let Some(p) = &req.producer {
            if let Verdict::Replay((commit_index, items)) = self.judge(stream, p)? {
                let items = items
                    .into_iter()
                    .map(|item| item.map(|i| Item { deduplicated: true, commit_index, ..i }))
                    .collect();
                return Ok(Outcome::Batch { items, commit_index });
            }
        }
        if stream.closed {
            return every(Fault::with(ErrorCode::StreamClosed, &[stream.tail()]), self.commit_index);
        }
        if req.payloads.iter().all(|p| p.is_empty()) {
            return every(Fault::new(ErrorCode::EmptyAppend), self.commit_index);
        }
        // Admitted whole or not at all (SPEC §4).
        self.room(req.payloads.iter().map(|p| p.len() as u64).sum())?;

        self.commit_index += 1;
        let mut stream = self.streams.remove(&req.id).expect("found above");
        let mut items = Vec::new();
        for payload in &req.payloads {
            if payload.is_empty() {
                items.push(Err(Fault::new(ErrorCode::EmptyAppend)));
                continue;
            }
            let start = stream.tail();
            stream.push(payload, now);
            stream.appends += 1;
            items.push(Ok(self.item(&stream, start)));
        }
        if let Some(p) = &req.producer {
            self.remember(&mut stream, p, items.clone());
        }
        stream.last_access_ms = now;
        self.streams.insert(req.id.clone(), stream);
        effects.push(Effect::Advanced(req.id.clone()));
        Ok(Outcome::Batch { items, commit_index: self.commit_index })
    }

    fn close(&mut self, req: &Close, now: u64, effects: &mut Vec<Effect>) -> Answer {
        let stream = self.find(&req.id, now)?;
        if let Some(p) = &req.producer {
            if let Verdict::Replay((commit_index, items)) = self.judge(stream, p)? {
                let last = last_ok(&items);
                return Ok(Outcome::Closed { next_offset: last.next, already_closed: false, commit_index });
            }
        }
        if stream.closed {
            return Ok(Outcome::Closed {
                next_offset: stream.tail(),
                already_closed: true,
                commit_index: self.commit_index,
            });
        }
        stream_seq_ok(stream, req.stream_seq.as_deref())?;

        self.commit_index += 1;
        let mut stream = self.streams.remove(&req.id).expect("found above");
        stream.closed = true;
        if req.stream_seq.is_some() {
            stream.stream_seq = req.stream_seq.clone();
        }
        let item = self.item(&stream, stream.tail());
        if let Some(p) = &req.producer {
            self.remember(&mut stream, p, vec![Ok(item)]);
        }
        stream.last_access_ms = now;
        let next_offset = stream.tail();
        self.streams.insert(req.id.clone(), stream);
        effects.push(Effect::Advanced(req.id.clone()));
        Ok(Outcome::Closed { next_offset, already_closed: false, commit_index: self.commit_index })
    }

    fn delete(&mut self, id: &StreamId, now: u64, effects: &mut Vec<Effect>) -> Answer {
        self.find(id, now)?;
        self.commit_index += 1;
        self.drop_stream(id);
        self.forks.removed(id);
        effects.push(Effect::Removed(id.clone()));
        Ok(Outcome::Deleted { commit_index: self.commit_index })
    }

    fn set_attrs(&mut self, id: &StreamId, attrs: Option<&str>, now: u64) -> Answer {
        self.find(id, now)?;
        if let Some(attrs) = attrs {
            check_attrs(attrs)?;
        }
        self.commit_index += 1;
        self.find_mut(id, now)?.attrs = attrs.map(str::to_string);
        Ok(Outcome::AttrsSet { commit_index: self.commit_index })
    }

    fn touch(&mut self, id: &StreamId, now: u64) -> Answer {
        self.find(id, now)?;
        if !self.renewal_due(id, now) {
            return Ok(Outcome::Touched { renewed: false });
        }
        self.commit_index += 1;
        self.find_mut(id, now)?.last_access_ms = now;
        Ok(Outcome::Touched { renewed: true })
    }

    fn publish(&mut self, req: &PublishSnapshot, now: u64) -> Answer {
        let stream = self.find(&req.id, now)?;
        if req.offset > stream.tail() {
            return Err(Fault::with(ErrorCode::OffsetOutOfRange, &[req.offset, stream.tail()]));
        }
        if req.offset < stream.retained {
            return Err(Fault::with(ErrorCode::OffsetGone, &[req.offset, stream.retained]));
        }
        if let Some(expected) = req.expected_digest {
            if blake3::hash(&req.payload).as_bytes() != &expected {
                return Err(Fault::new(ErrorCode::BadRequest));
            }
        }
        if let Some((content_type, payload)) = stream.snapshots.get(&req.offset) {
            if *content_type == req.content_type && payload[..] == req.payload[..] {
                return Ok(Outcome::Snapshot {
                    offset: req.offset,
                    already_existed: true,
                    commit_index: self.commit_index,
                });
            }
            return Err(Fault::with(ErrorCode::SnapshotConflict, &[req.offset]));
        }
        self.commit_index += 1;
        let keep = self.limits.max_snapshots_per_stream;
        let stream = self.find_mut(&req.id, now)?;
        stream.snapshots.insert(req.offset, (req.content_type.clone(), req.payload.to_vec()));
        while stream.snapshots.len() > keep {
            let lowest = *stream.snapshots.keys().next().expect("non-empty");
            stream.snapshots.remove(&lowest);
        }
        Ok(Outcome::Snapshot { offset: req.offset, already_existed: false, commit_index: self.commit_index })
    }

    fn retain(&mut self, id: &StreamId, offset: u64, now: u64) -> Answer {
        let stream = self.find(id, now)?;
        if offset <= stream.retained {
            return Ok(Outcome::Retention {
                retained_offset: stream.retained,
                commit_index: self.commit_index,
            });
        }
        match stream.snapshots.keys().max() {
            None => return Err(Fault::new(ErrorCode::SnapshotNotFound)),
            Some(latest) if offset > *latest => return Err(Fault::new(ErrorCode::BadRequest)),
            Some(_) => {}
        }
        self.commit_index += 1;
        let stream = self.find_mut(id, now)?;
        stream.retained = offset;
        stream.snapshots.retain(|at, _| *at >= offset);
        // Flushed ranges go whole, once they end at or below the start.
        let gone = stream.chunks.iter().take_while(|c| c.end <= offset).count();
        let dropped: Vec<_> = stream.chunks.drain(..gone).collect();
        self.release(dropped, 0);
        Ok(Outcome::Retention { retained_offset: offset, commit_index: self.commit_index })
    }

    fn expire(&mut self, now: u64, effects: &mut Vec<Effect>) -> Answer {
        let removed: Vec<StreamId> =
            self.streams.iter().filter(|(_, s)| !s.alive(now)).map(|(id, _)| id.clone()).collect();
        if !removed.is_empty() {
            self.commit_index += 1;
            for id in &removed {
                self.drop_stream(id);
                self.forks.removed(id);
                effects.push(Effect::Removed(id.clone()));
            }
        }
        Ok(Outcome::Expired { removed })
    }
}

/// The further records of a multi-record create or append: none empty, nor
/// the first when there are some.
fn records_ok(first: Option<&[u8]>, more: &[Bytes]) -> bool {
    more.is_empty() || (first.is_some_and(|p| !p.is_empty()) && more.iter().all(|p| !p.is_empty()))
}
