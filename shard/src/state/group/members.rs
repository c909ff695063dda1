//! Consumer group membership (SPEC §2 "Membership"): which consumers of a
//! consumer group are live, kept in the group that owns
//! `placement_hash(bucket, consumer group)`, so every consumer of one
//! consumer group heartbeats into one ordered log.
//!
//! A heartbeat makes its consumer live until `now_ms + ttl` and answers the
//! live count; a leave removes it and is idempotent (an unknown consumer
//! changes nothing). Every command on a consumer group first drops its
//! lapsed members (so the map holds no more than the live consumers of
//! the consumer groups in use, plus those not touched since they lapsed)
//! and drops the consumer group once it is empty. A consumer group holds
//! at most `max_consumers_per_group` live consumers (`TooManyConsumers`).
//! Membership belongs to its bucket: purging the bucket removes it.

use std::collections::BTreeMap;

use crate::error::{ErrorKind, Result};
use crate::state::api::Membership;
use crate::state::command::{MemberHeartbeat, MemberLeave, Response};
use crate::state::group::checks::{check_name, check_ttl};
use crate::state::group::GroupState;
use crate::state::name::validate_name;

/// bucket -> consumer group -> consumer -> live until (group clock, ms).
pub(crate) type Members = BTreeMap<String, BTreeMap<String, BTreeMap<String, u64>>>;

impl GroupState {
    /// Live consumers of a consumer group at `now_ms`.
    pub fn live_consumers(&self, bucket: &str, group: &str, now_ms: u64) -> u32 {
        let members = self.members.get(bucket).and_then(|groups| groups.get(group));
        members.map_or(0, |m| m.values().filter(|until| **until > now_ms).count() as u32)
    }

    /// The membership map (for the model comparisons of the harnesses).
    pub fn members(&self) -> &BTreeMap<String, BTreeMap<String, BTreeMap<String, u64>>> {
        &self.members
    }

    /// Drops the lapsed members of one consumer group, and the consumer
    /// group (and bucket) when nothing is left.
    fn prune(&mut self, bucket: &str, group: &str, now: u64) {
        let Some(groups) = self.members.get_mut(bucket) else { return };
        if let Some(members) = groups.get_mut(group) {
            members.retain(|_, until| *until > now);
            if members.is_empty() {
                groups.remove(group);
            }
        }
        if groups.is_empty() {
            self.members.remove(bucket);
        }
    }

    pub(crate) fn heartbeat(&mut self, req: &MemberHeartbeat, now: u64) -> Result<Response> {
        validate_name("bucket", &req.bucket)?;
        check_name("consumer group", &req.group)?;
        check_name("consumer", &req.consumer)?;
        check_ttl(req.ttl_ms)?;
        let live = self.live_consumers(&req.bucket, &req.group, now);
        let known = self
            .members
            .get(&req.bucket)
            .and_then(|g| g.get(&req.group))
            .and_then(|m| m.get(&req.consumer))
            .is_some_and(|until| *until > now);
        let limit = self.limits.max_consumers_per_group;
        if !known && live as usize >= limit {
            return Err(ErrorKind::TooManyConsumers { limit: limit as u64 }.into());
        }
        let commit_index = self.bump();
        self.prune(&req.bucket, &req.group, now);
        let members = self.members.entry(req.bucket.clone()).or_default().entry(req.group.clone()).or_default();
        members.insert(req.consumer.clone(), now.saturating_add(req.ttl_ms));
        let live_consumers = members.len() as u32;
        Ok(Response::Heartbeat { membership: Membership { live_consumers }, commit_index })
    }

    pub(crate) fn leave(&mut self, req: &MemberLeave, now: u64) -> Result<Response> {
        let present = self
            .members
            .get(&req.bucket)
            .and_then(|g| g.get(&req.group))
            .is_some_and(|m| m.contains_key(&req.consumer));
        if !present {
            return Ok(Response::Left { commit_index: self.commit_index });
        }
        let commit_index = self.bump();
        if let Some(members) = self.members.get_mut(&req.bucket).and_then(|g| g.get_mut(&req.group)) {
            members.remove(&req.consumer);
        }
        self.prune(&req.bucket, &req.group, now);
        Ok(Response::Left { commit_index })
    }
}
