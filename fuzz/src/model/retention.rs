//! The model's consumption-driven retention (SPEC §2 "Consumption-driven
//! retention"), written from the rules, not from the real machine: a
//! stream's policy is a `consumed` flag and an optional age; a reclaim
//! moves the retained start to the larger of what every consumer group has
//! consumed and the age cutoff the command carries (the simulation checks
//! that cutoff against [`Model::offset_at`] separately), never past the
//! tail, dropping the queue groups' messages below it.

use rill_shard::error::ErrorCode;
use rill_shard::state::command::{Reclaim, RetentionSet};

use crate::model::{Model, ModelStream};
use crate::observe::{Fault, Outcome};

type Answer = Result<Outcome, Fault>;

/// Ten years, the longest age a policy may set.
const MAX_AGE_MS: u64 = 10 * 365 * 24 * 3_600_000;

impl ModelStream {
    /// The lowest offset some consumer group has not consumed; the
    /// retained start with no group.
    pub fn consumed_prefix(&self) -> u64 {
        let leases = self.leases.values().map(|l| l.committed.unwrap_or(0));
        let queues = self.queues.values().map(|q| {
            let held = q.in_flight.iter().chain(&q.dead).map(|m| m.offset).min();
            held.map_or(q.next, |o| o.min(q.next))
        });
        leases.chain(queues).min().unwrap_or(self.retained).min(self.tail())
    }
}

impl Model {
    pub(crate) fn set_retention(&mut self, req: &RetentionSet, now: u64) -> Answer {
        self.find(&req.id, now)?;
        if req.max_age_ms.is_some_and(|ms| ms == 0 || ms > MAX_AGE_MS) {
            return Err(Fault::new(ErrorCode::BadRequest));
        }
        self.commit_index += 1;
        let stream = self.find_mut(&req.id, now)?;
        stream.retention =
            (req.consumed || req.max_age_ms.is_some()).then_some((req.consumed, req.max_age_ms));
        Ok(Outcome::RetentionSet { commit_index: self.commit_index })
    }

    pub(crate) fn reclaim(&mut self, req: &Reclaim, now: u64) -> Answer {
        let stream = self.find(&req.id, now)?;
        let Some((consumed_rule, age)) = stream.retention else {
            return Err(Fault::new(ErrorCode::BadRequest));
        };
        let before = stream.retained;
        let consumed = if consumed_rule { stream.consumed_prefix() } else { before };
        let aged = if age.is_some() { req.aged_to.min(stream.tail()) } else { 0 };
        let target = consumed.max(aged);
        if target <= before {
            return Ok(Outcome::Reclaimed {
                retained_offset: before,
                consumed_bytes: 0,
                aged_bytes: 0,
                commit_index: self.commit_index,
            });
        }
        self.commit_index += 1;
        let stream = self.find_mut(&req.id, now)?;
        for q in stream.queues.values_mut() {
            q.in_flight.retain(|m| m.offset >= target);
            q.dead.retain(|m| m.offset >= target);
            q.next = q.next.max(target);
        }
        stream.retained = target;
        stream.snapshots.retain(|at, _| *at >= target);
        let gone = stream.chunks.iter().take_while(|c| c.end <= target).count();
        let dropped: Vec<_> = stream.chunks.drain(..gone).collect();
        self.release(dropped, 0);
        Ok(Outcome::Reclaimed {
            retained_offset: target,
            consumed_bytes: consumed.min(target).saturating_sub(before),
            aged_bytes: target.saturating_sub(consumed.max(before)),
            commit_index: self.commit_index,
        })
    }
}
