//! The engine's queue calls (SPEC §2 "Queues"): competing consumers of a
//! stream's records under visibility timeouts, with acks, nacks, a policy,
//! a backlog and dead letters. Each call goes to the group that owns the
//! stream, where the queue group's state lives beside the stream's bytes:
//! a receive, an ack and the records they name are ordered by one log.
//!
//! Every mutating call is answered only once its command is durable, so an
//! acknowledged ack is never undone by a crash, and a receive's messages
//! are not handed out twice while their visibility lasts, restarts
//! included. Arguments are checked by the state machine, which refuses
//! bad ones with `BadRequest` before anything is logged.

use std::borrow::Borrow;
use std::time::Duration;

use rill_shard::api::{Backlog, Delivery, QueuePolicy, Receive};
use rill_shard::node::calls;
use rill_shard::{Result, StreamId};

use crate::engine::Engine;

impl Engine {
    /// Receives up to `req.max_messages` messages of a queue group, oldest
    /// first: messages whose visibility timeout passed (an attempt charged
    /// each time) before new records. Each stays invisible to other
    /// receives for `req.visibility`; the first receive of a name creates
    /// the group at `req.start`. An empty list when nothing is ready or
    /// the group's in-flight bound is reached.
    pub async fn receive(&self, req: Receive) -> Result<Vec<Delivery>> {
        let placement = self.locate(&req.id);
        self.call(placement, req).await
    }

    /// Acks a delivery: its message leaves the group for good. A receipt
    /// that is not the message's latest delivery (it was received again
    /// after its visibility passed) or is unknown: `ReceiptNotFound`, and
    /// nothing changes.
    pub async fn ack(&self, id: impl Borrow<StreamId>, consumer_group: &str, receipt: u64) -> Result<()> {
        let call = calls::Ack { id: id.borrow().clone(), group: consumer_group.to_string(), receipt };
        self.call(self.locate(id.borrow()), call).await
    }

    /// Nacks a delivery: its message becomes receivable again after
    /// `delay` (zero: at once), keeping its attempts. Stale or unknown
    /// receipt: `ReceiptNotFound`.
    pub async fn nack(
        &self,
        id: impl Borrow<StreamId>,
        consumer_group: &str,
        receipt: u64,
        delay: Duration,
    ) -> Result<()> {
        let call = calls::Nack { id: id.borrow().clone(), group: consumer_group.to_string(), receipt, delay };
        self.call(self.locate(id.borrow()), call).await
    }

    /// Sets a queue group's policy (creating the group at the oldest
    /// retained record when it is new): attempts before a message is
    /// dead-lettered, and messages in flight at most.
    pub async fn set_queue_policy(
        &self,
        id: impl Borrow<StreamId>,
        consumer_group: &str,
        policy: QueuePolicy,
    ) -> Result<()> {
        let call =
            calls::SetQueuePolicy { id: id.borrow().clone(), group: consumer_group.to_string(), policy };
        self.call(self.locate(id.borrow()), call).await
    }

    /// A queue group's backlog: messages ready, in flight and dead, and
    /// the age of the oldest ready one. A group never received from counts
    /// every retained record as ready.
    pub async fn backlog(&self, id: impl Borrow<StreamId>, consumer_group: &str) -> Result<Backlog> {
        let call = calls::QueueBacklog { id: id.borrow().clone(), group: consumer_group.to_string() };
        self.call(self.locate(id.borrow()), call).await
    }

    /// Up to `max` of a queue group's dead letters, oldest first, with
    /// their bytes (their receipts are 0: a dead letter cannot be acked).
    pub async fn dead_letters(
        &self,
        id: impl Borrow<StreamId>,
        consumer_group: &str,
        max: usize,
    ) -> Result<Vec<Delivery>> {
        let call = calls::DeadLetters { id: id.borrow().clone(), group: consumer_group.to_string(), max };
        self.call(self.locate(id.borrow()), call).await
    }

    /// Forgets a queue group's dead letters; returns how many. Their bytes
    /// stay in the stream until retention takes them.
    pub async fn purge_dead_letters(&self, id: impl Borrow<StreamId>, consumer_group: &str) -> Result<u64> {
        let call = calls::SettleDeadLetters {
            id: id.borrow().clone(),
            group: consumer_group.to_string(),
            redrive: false,
        };
        self.call(self.locate(id.borrow()), call).await
    }

    /// Puts a queue group's dead letters back in flight, receivable at
    /// once with fresh attempts; returns how many.
    pub async fn redrive_dead_letters(&self, id: impl Borrow<StreamId>, consumer_group: &str) -> Result<u64> {
        let call = calls::SettleDeadLetters {
            id: id.borrow().clone(),
            group: consumer_group.to_string(),
            redrive: true,
        };
        self.call(self.locate(id.borrow()), call).await
    }
}
