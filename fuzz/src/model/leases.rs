//! The model's consumer groups (SPEC §2 "Leases and committed offsets"),
//! written from the rules, not from the real machine: a lease is an owner,
//! a generation, an expiry and a committed offset, and every command checks
//! them in the documented order before it changes anything.

use rill_shard::error::ErrorCode;
use rill_shard::state::command::{
    LeaseAcquire, LeaseRelease, LeaseRenew, MemberHeartbeat, MemberLeave, OffsetCommit,
};
use rill_shard::StreamId;

use crate::model::{Model, ModelLease};
use crate::observe::{Fault, Outcome};

type Answer = Result<Outcome, Fault>;

const MAX_NAME: usize = 255;
const MAX_TTL_MS: u64 = 24 * 3_600_000;

fn bad() -> Fault {
    Fault::new(ErrorCode::BadRequest)
}

fn name_ok(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME
}

impl Model {
    /// The lease of `group` if `owner` at `generation` is its holder.
    fn holder(
        &self,
        id: &StreamId,
        group: &str,
        owner: &str,
        generation: u64,
        now: u64,
    ) -> Result<ModelLease, Fault> {
        let stream = self.find(id, now)?;
        if stream.queues.contains_key(group) {
            return Err(Fault::new(ErrorCode::ConsumerGroupKindMismatch));
        }
        match stream.leases.get(group) {
            Some(l) if l.owner.as_deref() == Some(owner) && l.generation == generation => Ok(l.clone()),
            Some(l) => Err(Fault::with(ErrorCode::OwnershipLost, &[generation, l.generation])),
            None => Err(Fault::with(ErrorCode::OwnershipLost, &[generation, 0])),
        }
    }

    pub(crate) fn acquire(&mut self, req: &LeaseAcquire, now: u64) -> Answer {
        if !name_ok(&req.group) || !name_ok(&req.owner) || req.ttl_ms == 0 || req.ttl_ms > MAX_TTL_MS {
            return Err(bad());
        }
        let stream = self.find(&req.id, now)?;
        if stream.queues.contains_key(&req.group) {
            return Err(Fault::new(ErrorCode::ConsumerGroupKindMismatch));
        }
        let (generation, committed) = match stream.leases.get(&req.group) {
            None if stream.consumer_group_count() >= self.limits.max_consumer_groups_per_stream => {
                let limit = self.limits.max_consumer_groups_per_stream as u64;
                return Err(Fault::with(ErrorCode::TooManyConsumerGroups, &[limit]));
            }
            None => (1, None),
            Some(l) => {
                let live_other = l.owner.as_ref().is_some_and(|o| *o != req.owner) && now < l.expires_at;
                if live_other {
                    return Err(Fault::with(ErrorCode::LeaseHeld, &[l.expires_at]));
                }
                (l.generation + 1, l.committed)
            }
        };
        self.commit_index += 1;
        let expires_at = now + req.ttl_ms;
        let lease = ModelLease { owner: Some(req.owner.clone()), generation, expires_at, committed };
        self.streams.get_mut(&req.id).expect("found").leases.insert(req.group.clone(), lease);
        Ok(Outcome::Lease {
            generation,
            expires_at_ms: expires_at,
            committed,
            commit_index: self.commit_index,
        })
    }

    pub(crate) fn renew(&mut self, req: &LeaseRenew, now: u64) -> Answer {
        if req.ttl_ms == 0 || req.ttl_ms > MAX_TTL_MS {
            return Err(bad());
        }
        let held = self.holder(&req.id, &req.group, &req.owner, req.generation, now)?;
        self.commit_index += 1;
        let expires_at = now + req.ttl_ms;
        let stream = self.streams.get_mut(&req.id).expect("found");
        stream.leases.insert(req.group.clone(), ModelLease { expires_at, ..held.clone() });
        Ok(Outcome::Lease {
            generation: held.generation,
            expires_at_ms: expires_at,
            committed: held.committed,
            commit_index: self.commit_index,
        })
    }

    pub(crate) fn release_lease(&mut self, req: &LeaseRelease, now: u64) -> Answer {
        let held = self.holder(&req.id, &req.group, &req.owner, req.generation, now)?;
        self.commit_index += 1;
        let released = ModelLease { owner: None, generation: held.generation + 1, expires_at: now, ..held };
        self.streams.get_mut(&req.id).expect("found").leases.insert(req.group.clone(), released);
        Ok(Outcome::Released { commit_index: self.commit_index })
    }

    pub(crate) fn commit_offset(&mut self, req: &OffsetCommit, now: u64) -> Answer {
        let held = self.holder(&req.id, &req.group, &req.owner, req.generation, now)?;
        let tail = self.find(&req.id, now)?.tail();
        if req.offset > tail {
            return Err(Fault::with(ErrorCode::OffsetOutOfRange, &[req.offset, tail]));
        }
        match held.committed {
            Some(stored) if stored >= req.offset => {
                Ok(Outcome::Committed { committed: stored, commit_index: self.commit_index })
            }
            _ => {
                self.commit_index += 1;
                let stream = self.streams.get_mut(&req.id).expect("found");
                stream.leases.insert(req.group.clone(), ModelLease { committed: Some(req.offset), ..held });
                Ok(Outcome::Committed { committed: req.offset, commit_index: self.commit_index })
            }
        }
    }

    /// A consumer group's committed offset.
    pub fn committed_offset(&self, id: &StreamId, group: &str, now: u64) -> Result<Option<u64>, Fault> {
        let stream = self.find(id, now)?;
        if stream.queues.contains_key(group) {
            return Err(Fault::new(ErrorCode::ConsumerGroupKindMismatch));
        }
        Ok(stream.leases.get(group).and_then(|l| l.committed))
    }
}

impl Model {
    pub(crate) fn heartbeat(&mut self, req: &MemberHeartbeat, now: u64) -> Answer {
        if rill_shard::validate_name("bucket", &req.bucket).is_err() {
            return Err(Fault::new(ErrorCode::InvalidName));
        }
        if !name_ok(&req.group) || !name_ok(&req.consumer) || req.ttl_ms == 0 || req.ttl_ms > MAX_TTL_MS {
            return Err(bad());
        }
        let key = (req.bucket.clone(), req.group.clone());
        let live: Vec<String> = self
            .members
            .get(&key)
            .map(|m| m.iter().filter(|(_, until)| **until > now).map(|(c, _)| c.clone()).collect())
            .unwrap_or_default();
        let limit = self.limits.max_consumers_per_group;
        if !live.contains(&req.consumer) && live.len() >= limit {
            return Err(Fault::with(ErrorCode::TooManyConsumers, &[limit as u64]));
        }
        self.commit_index += 1;
        let members = self.members.entry(key).or_default();
        members.retain(|_, until| *until > now);
        members.insert(req.consumer.clone(), now + req.ttl_ms);
        let live_consumers = members.len() as u32;
        Ok(Outcome::Heartbeat { live_consumers, commit_index: self.commit_index })
    }

    pub(crate) fn leave(&mut self, req: &MemberLeave, now: u64) -> Answer {
        let key = (req.bucket.clone(), req.group.clone());
        let Some(members) = self.members.get_mut(&key).filter(|m| m.contains_key(&req.consumer)) else {
            return Ok(Outcome::Left { commit_index: self.commit_index });
        };
        self.commit_index += 1;
        members.remove(&req.consumer);
        members.retain(|_, until| *until > now);
        if members.is_empty() {
            self.members.remove(&key);
        }
        Ok(Outcome::Left { commit_index: self.commit_index })
    }

    /// Live consumers of a consumer group.
    pub fn live_consumers(&self, bucket: &str, group: &str, now: u64) -> u32 {
        let key = (bucket.to_string(), group.to_string());
        self.members.get(&key).map_or(0, |m| m.values().filter(|until| **until > now).count() as u32)
    }
}
