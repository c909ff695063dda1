//! The engine's consumption-driven retention calls (SPEC §2
//! "Consumption-driven retention"): a stream's retention policy, and a
//! reclaim on demand. Each core also reclaims on its own, at every expiry
//! sweep (`Limits::expiry_sweep_interval_ms`, 1 s by default), for every
//! stream whose policy may take something; the calls here are for setting
//! the policy and for callers that want the bytes back at once.
//!
//! Both calls are answered once their command is durable. What a reclaim
//! takes is gone the way snapshot retention takes it: hot records dropped,
//! cold chunks released to the GC queue, whose files are removed once
//! nothing refers to them (so a purge-free stream is erased record by
//! record, with no hole: only a prefix is ever reclaimed).

use std::borrow::Borrow;

use rill_shard::api::{Reclaimed, RetentionPolicy};
use rill_shard::node::calls;
use rill_shard::{Result, StreamId};

use crate::engine::Engine;

impl Engine {
    /// Sets a stream's retention policy: with `consumed`, what every
    /// consumer group of the stream has consumed is reclaimed; with
    /// `max_age`, records older than it are reclaimed, consumed or not. A
    /// policy with neither rule clears it. A `max_age` of zero or above
    /// ten years: `BadRequest`.
    pub async fn set_retention_policy(
        &self,
        id: impl Borrow<StreamId>,
        policy: RetentionPolicy,
    ) -> Result<()> {
        let call = calls::SetRetention { id: id.borrow().clone(), policy };
        self.call(self.locate(id.borrow()), call).await
    }

    /// Reclaims now what the stream's policy allows, and says what it
    /// took (nothing when the retained start would not move). A stream
    /// without a policy: `BadRequest`.
    pub async fn reclaim(&self, id: impl Borrow<StreamId>) -> Result<Reclaimed> {
        let call = calls::ReclaimNow(id.borrow().clone());
        self.call(self.locate(id.borrow()), call).await
    }
}
