//! Consumer groups of a stream: fenced leases and committed offsets (SPEC
//! §2 "Leases and committed offsets"), kept in the stream's own group so a
//! lease, a committed offset and the stream's bytes are ordered by one log.
//!
//! Rules, each checked against the unchanged state before anything is
//! written (a refused command changes nothing):
//!
//! - **Acquire** succeeds when the consumer group is new, released, past
//!   its expiry, or already held by the same owner; every acquire sets the
//!   generation one higher, so a holder's earlier generation stops working
//!   the moment anyone (itself included) acquires again. Held by another
//!   owner and not expired: `LeaseHeld` (temporary) with the holder and the
//!   expiry. A new consumer group beyond `max_consumer_groups_per_stream` is
//!   `TooManyConsumerGroups`.
//! - **Renew**, **release** and **commit** need the current owner and
//!   generation, else `OwnershipLost`. The generation fences them, not the
//!   clock: a lease past its expiry that nobody has acquired since is still
//!   its holder's to renew, release or commit under (no other owner can
//!   have written in between). Renew keeps the generation; release clears
//!   the owner and raises the generation.
//! - **Committed offsets** are exclusive (the next offset to read), at most
//!   the stream's tail (`OffsetOutOfRange`), and never go back: a commit at
//!   or below the stored offset answers the stored one and changes
//!   nothing. They survive lease changes and restarts, and go with the
//!   stream when it is deleted or expires.
//!
//! Expiry uses the group's clock (the command's `now_ms`). Consumer group
//! commands neither renew the stream's TTL nor move its tail. One
//! namespace holds every consumer group of a stream (leases now; the
//! queue groups of a later command share it).

use crate::error::{Error, ErrorKind, Result};
use crate::state::api::LeaseReply;
use crate::state::command::{LeaseAcquire, LeaseRelease, LeaseRenew, OffsetCommit, Response};
use crate::state::group::checks::{check_name, check_ttl, kind_mismatch};
use crate::state::group::consumer_state::{ConsumerGroup, LeaseState};
use crate::state::group::stream::StreamState;
use crate::state::group::GroupState;
use crate::state::name::StreamId;

fn lost(group: &str, generation: u64, current: u64) -> Error {
    ErrorKind::OwnershipLost { consumer_group: group.to_string(), generation, current_generation: current }
        .into()
}

impl StreamState {
    /// The consumer groups of the stream.
    pub fn consumer_groups(&self) -> &std::collections::BTreeMap<String, ConsumerGroup> {
        &self.consumers
    }

    /// The lease of `group` when `owner` at `generation` holds it.
    fn held(&self, group: &str, owner: &str, generation: u64) -> Result<&LeaseState> {
        match self.consumers.get(group) {
            Some(ConsumerGroup::Lease(lease)) => {
                if lease.owner.as_deref() == Some(owner) && lease.generation == generation {
                    Ok(lease)
                } else {
                    Err(lost(group, generation, lease.generation))
                }
            }
            Some(ConsumerGroup::Queue(_)) => Err(kind_mismatch(group, "lease")),
            None => Err(lost(group, generation, 0)),
        }
    }
}

impl GroupState {
    pub(crate) fn acquire_lease(&mut self, req: &LeaseAcquire, now: u64) -> Result<Response> {
        check_name("consumer group", &req.group)?;
        check_name("owner", &req.owner)?;
        check_ttl(req.ttl_ms)?;
        let stream = self.lookup(&req.id, now)?;
        let generation = match stream.consumers.get(&req.group) {
            None => {
                let limit = self.limits.max_consumer_groups_per_stream;
                if stream.consumers.len() >= limit {
                    return Err(ErrorKind::TooManyConsumerGroups { limit: limit as u64 }.into());
                }
                1
            }
            Some(ConsumerGroup::Lease(lease)) => {
                if let Some(holder) = lease.owner.as_deref() {
                    if holder != req.owner && now < lease.expires_at_ms {
                        return Err(ErrorKind::LeaseHeld {
                            consumer_group: req.group.clone(),
                            holder: holder.to_string(),
                            expires_at_ms: lease.expires_at_ms,
                        }
                        .into());
                    }
                }
                lease.generation + 1
            }
            Some(ConsumerGroup::Queue(_)) => return Err(kind_mismatch(&req.group, "lease")),
        };
        let commit_index = self.bump();
        let stream = Self::stream_mut(&mut self.buckets, &req.id)?;
        let committed = match stream.consumers.get(&req.group) {
            Some(ConsumerGroup::Lease(lease)) => lease.committed,
            Some(ConsumerGroup::Queue(_)) | None => None,
        };
        let lease = LeaseState {
            owner: Some(req.owner.clone()),
            generation,
            expires_at_ms: now.saturating_add(req.ttl_ms),
            committed,
        };
        let reply = LeaseReply { generation, expires_at_ms: lease.expires_at_ms, committed, commit_index };
        stream.consumers.insert(req.group.clone(), ConsumerGroup::Lease(lease));
        Ok(Response::Lease(reply))
    }

    pub(crate) fn renew_lease(&mut self, req: &LeaseRenew, now: u64) -> Result<Response> {
        check_ttl(req.ttl_ms)?;
        let committed = self.lookup(&req.id, now)?.held(&req.group, &req.owner, req.generation)?.committed;
        let expires_at_ms = now.saturating_add(req.ttl_ms);
        let commit_index = self.bump();
        let stream = Self::stream_mut(&mut self.buckets, &req.id)?;
        if let Some(ConsumerGroup::Lease(lease)) = stream.consumers.get_mut(&req.group) {
            lease.expires_at_ms = expires_at_ms;
        }
        Ok(Response::Lease(LeaseReply { generation: req.generation, expires_at_ms, committed, commit_index }))
    }

    pub(crate) fn release_lease(&mut self, req: &LeaseRelease, now: u64) -> Result<Response> {
        self.lookup(&req.id, now)?.held(&req.group, &req.owner, req.generation)?;
        let commit_index = self.bump();
        let stream = Self::stream_mut(&mut self.buckets, &req.id)?;
        if let Some(ConsumerGroup::Lease(lease)) = stream.consumers.get_mut(&req.group) {
            lease.owner = None;
            lease.generation += 1;
            lease.expires_at_ms = now;
        }
        Ok(Response::LeaseReleased { commit_index })
    }

    pub(crate) fn commit_offset(&mut self, req: &OffsetCommit, now: u64) -> Result<Response> {
        let stream = self.lookup(&req.id, now)?;
        let lease = match (stream.held(&req.group, &req.owner, req.generation), stream.consumers.get(&req.group)) {
            (Err(_), Some(ConsumerGroup::Lease(any)))
                if crate::planted::active(crate::planted::Bug::StaleLeaseCommit) =>
            {
                any
            }
            (held, _) => held?,
        };
        if req.offset > stream.next_offset {
            return Err(ErrorKind::OffsetOutOfRange { offset: req.offset, tail: stream.next_offset }.into());
        }
        if let Some(stored) = lease.committed.filter(|stored| *stored >= req.offset) {
            return Ok(Response::OffsetCommitted { committed: stored, commit_index: self.commit_index });
        }
        let commit_index = self.bump();
        let stream = Self::stream_mut(&mut self.buckets, &req.id)?;
        if let Some(ConsumerGroup::Lease(lease)) = stream.consumers.get_mut(&req.group) {
            lease.committed = Some(req.offset);
        }
        Ok(Response::OffsetCommitted { committed: req.offset, commit_index })
    }

    /// A consumer group's committed offset (`None` before its first commit
    /// or for an unknown consumer group).
    pub fn committed_offset(&self, id: &StreamId, group: &str, now_ms: u64) -> Result<Option<u64>> {
        Ok(match self.lookup(id, now_ms)?.consumers.get(group) {
            Some(ConsumerGroup::Lease(lease)) => lease.committed,
            Some(ConsumerGroup::Queue(_)) => return Err(kind_mismatch(group, "lease")),
            None => None,
        })
    }
}
