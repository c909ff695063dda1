//! Consumption-driven retention of a stream (SPEC §2 "Consumption-driven
//! retention"): its policy, stored with the stream, and the reclaim that
//! applies it through the same path as snapshot retention (hot records
//! dropped, cold chunks released to the GC queue).
//!
//! Rules, each checked against the unchanged state before anything is
//! written (a refused command changes nothing):
//!
//! - A policy has a `consumed` rule, an age rule (`max_age_ms`, 1 ms to
//!   ten years) or both; one with neither clears the stream's policy.
//! - The *consumed prefix* of a stream is the lowest, over its consumer
//!   groups, of what each has consumed: a lease group's committed offset
//!   (0 before its first commit), a queue group's lowest offset still in
//!   flight or dead, else its high-water mark. A stream with no consumer
//!   group has consumed nothing.
//! - A reclaim moves the retained start to the larger of the consumed
//!   prefix (with the `consumed` rule) and the first record at or after
//!   `now - max_age` (with the age rule; found at admission and carried by
//!   the command), never past the tail. Queue groups lose their in-flight
//!   and dead messages below the new start, and their high-water marks
//!   move up to it. A reclaim that would not move the start changes
//!   nothing; a stream without a policy is `BadRequest`.
//! - What the age rule took beyond the consumed prefix is reported apart
//!   (`aged_bytes`): records no group had consumed.

use crate::error::{Error, Result};
use crate::state::api::{RetentionPolicy, Reclaimed, Start, MAX_RETENTION_AGE};
use crate::state::command::{Reclaim, RetentionSet, Response};
use crate::state::group::consumer_state::{ConsumerGroup, RetentionRule};
use crate::state::group::read::ColdRecords;
use crate::state::group::stream::StreamState;
use crate::state::group::GroupState;
use crate::state::name::StreamId;

impl StreamState {
    /// The lowest offset some consumer group has not consumed (the module
    /// docs); the retained start when the stream has no consumer group.
    pub(crate) fn consumed_prefix(&self) -> u64 {
        let each = self.consumers.values().map(|group| match group {
            ConsumerGroup::Lease(l) => l.committed.unwrap_or(0),
            ConsumerGroup::Queue(q) => {
                if crate::planted::active(crate::planted::Bug::ReclaimIgnoresHeld) {
                    return q.next;
                }
                let held = q.in_flight.keys().chain(q.dead.keys()).min().copied();
                held.map_or(q.next, |o| o.min(q.next))
            }
        });
        each.min().unwrap_or(self.retained_offset).min(self.next_offset)
    }

    /// The stream's retention policy (the default when it has none).
    pub fn retention_policy(&self) -> RetentionPolicy {
        self.retention.map_or_else(RetentionPolicy::default, |r| RetentionPolicy {
            consumed: r.consumed,
            max_age: r.max_age_ms.map(std::time::Duration::from_millis),
        })
    }
}

impl GroupState {
    /// The logged form of a policy, checked.
    pub fn prepare_retention(&self, id: &StreamId, policy: RetentionPolicy, now_ms: u64) -> Result<RetentionSet> {
        self.lookup(id, now_ms)?;
        let max_age_ms = match policy.max_age {
            None => None,
            Some(age) => {
                let ms = u64::try_from(age.as_millis()).unwrap_or(u64::MAX);
                let max = MAX_RETENTION_AGE.as_millis() as u64;
                if ms == 0 || ms > max {
                    return Err(Error::bad_request(format!("a retention max_age is 1 to {max} ms, not {ms}")));
                }
                Some(ms)
            }
        };
        Ok(RetentionSet { id: id.clone(), consumed: policy.consumed, max_age_ms })
    }

    /// The logged form of a reclaim: where the age rule's cutoff falls, as
    /// this state (and the cold record index through `lookup`) holds it.
    pub fn prepare_reclaim(&self, id: &StreamId, now_ms: u64, lookup: &impl ColdRecords) -> Result<Reclaim> {
        let stream = self.lookup(id, now_ms)?;
        let Some(rule) = stream.retention else {
            return Err(Error::bad_request(format!("{id} has no retention policy to reclaim by")));
        };
        let aged_to = match rule.max_age_ms {
            Some(age) => self.resolve_start(id, Start::Timestamp(now_ms.saturating_sub(age)), now_ms, lookup)?,
            None => 0,
        };
        Ok(Reclaim { id: id.clone(), aged_to })
    }

    /// Streams of this group whose policy may reclaim something now, a
    /// cheap hint (the reclaim decides): `(id, None)` when the consumed
    /// rule would move the start or a hot record is past the age rule's
    /// age; `(id, Some(max_age_ms))` when only cold records could be, whose
    /// times are in the packs (the caller decides how often to look).
    pub fn reclaim_due(&self, now_ms: u64) -> Vec<(StreamId, Option<u64>)> {
        self.streams()
            .filter(|s| !s.is_expired(now_ms))
            .filter_map(|s| {
                let rule = s.retention?;
                let consumed = rule.consumed && s.consumed_prefix() > s.retained_offset;
                let hot_aged = rule.max_age_ms.is_some_and(|age| {
                    let cutoff = now_ms.saturating_sub(age);
                    s.times.iter().next().is_some_and(|(_, t)| *t < cutoff)
                });
                match (consumed || hot_aged, rule.max_age_ms) {
                    (true, _) => Some((s.id.clone(), None)),
                    (false, Some(age)) if s.cold_chunks().len() > 0 => Some((s.id.clone(), Some(age))),
                    _ => None,
                }
            })
            .collect()
    }

    pub(crate) fn set_retention(&mut self, req: &RetentionSet, now: u64) -> Result<Response> {
        self.lookup(&req.id, now)?;
        if req.max_age_ms.is_some_and(|ms| ms == 0 || ms > MAX_RETENTION_AGE.as_millis() as u64) {
            return Err(Error::bad_request("a retention max_age out of range"));
        }
        let rule = (req.consumed || req.max_age_ms.is_some())
            .then_some(RetentionRule { consumed: req.consumed, max_age_ms: req.max_age_ms });
        let commit_index = self.bump();
        Self::stream_mut(&mut self.buckets, &req.id)?.retention = rule;
        Ok(Response::RetentionSet { commit_index })
    }

    pub(crate) fn reclaim(&mut self, req: &Reclaim, now: u64) -> Result<Response> {
        let stream = self.lookup(&req.id, now)?;
        let Some(rule) = stream.retention else {
            return Err(Error::bad_request(format!("{} has no retention policy to reclaim by", req.id)));
        };
        let before = stream.retained_offset;
        let consumed = if rule.consumed { stream.consumed_prefix() } else { before };
        let aged = if rule.max_age_ms.is_some() { req.aged_to.min(stream.next_offset) } else { 0 };
        let target = consumed.max(aged);
        if target <= before {
            let reclaimed = Reclaimed { retained_offset: before, consumed_bytes: 0, aged_bytes: 0 };
            return Ok(Response::Reclaimed { reclaimed, commit_index: self.commit_index });
        }
        let reclaimed = Reclaimed {
            retained_offset: target,
            consumed_bytes: consumed.min(target).saturating_sub(before),
            aged_bytes: target.saturating_sub(consumed.max(before)),
        };
        let commit_index = self.bump();
        let stream = Self::stream_mut(&mut self.buckets, &req.id)?;
        for group in stream.consumers.values_mut() {
            if let ConsumerGroup::Queue(q) = group {
                q.in_flight.retain(|offset, _| *offset >= target);
                q.dead.retain(|offset, _| *offset >= target);
                q.next = q.next.max(target);
            }
        }
        let (freed, dropped) = stream.retain_from(target);
        self.hot_bytes -= freed;
        self.release_chunks(dropped, 0);
        Ok(Response::Reclaimed { reclaimed, commit_index })
    }
}
