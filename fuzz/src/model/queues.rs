//! The model's queue groups (SPEC §2 "Queues"), written from the rules,
//! not from the real machine: a queue group is a high-water mark, a list
//! of messages in flight and a list of dead ones, and every command checks
//! in the documented order before it changes anything. New messages come
//! from the model's own records: a receive's fresh spans are used only
//! while each one is exactly the model's record at the high-water mark.

use rill_shard::error::ErrorCode;
use rill_shard::state::command::{QueueDeadLetters, QueuePolicySet, QueueReceive, QueueSettle};
use rill_shard::StreamId;

use crate::model::{Model, ModelStream};
use crate::observe::{Fault, Outcome};

type Answer = Result<Outcome, Fault>;

const MAX_NAME: usize = 255;
const MAX_MS: u64 = 24 * 3_600_000;

/// A message in flight or dead.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelMessage {
    pub offset: u64,
    pub len: u64,
    pub at: u64,
    pub attempts: u32,
    pub receipt: u64,
    pub visible_at: u64,
}

/// A queue group.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ModelQueue {
    pub next: u64,
    /// In offset order.
    pub in_flight: Vec<ModelMessage>,
    /// In offset order.
    pub dead: Vec<ModelMessage>,
    pub last_receipt: u64,
    pub max_attempts: u32,
    pub max_in_flight: u32,
}

impl ModelQueue {
    fn new(next: u64) -> Self {
        ModelQueue {
            next,
            in_flight: Vec::new(),
            dead: Vec::new(),
            last_receipt: 0,
            max_attempts: 5,
            max_in_flight: 1024,
        }
    }
}

fn bad() -> Fault {
    Fault::new(ErrorCode::BadRequest)
}

fn name_ok(name: &str) -> bool {
    !name.is_empty() && name.len() <= MAX_NAME
}

impl ModelStream {
    /// The queue group `group` (a lease group of that name is a mismatch).
    pub fn queue(&self, group: &str) -> Result<Option<&ModelQueue>, Fault> {
        if self.leases.contains_key(group) {
            return Err(Fault::new(ErrorCode::ConsumerGroupKindMismatch));
        }
        Ok(self.queues.get(group))
    }

    /// Consumer groups of both kinds.
    pub fn consumer_group_count(&self) -> usize {
        self.leases.len() + self.queues.len()
    }

    fn queue_or_new(&self, group: &str, start: u64, limit: usize) -> Result<(ModelQueue, bool), Fault> {
        match self.queue(group)? {
            Some(q) => Ok((q.clone(), false)),
            None if self.consumer_group_count() >= limit => {
                Err(Fault::with(ErrorCode::TooManyConsumerGroups, &[limit as u64]))
            }
            None => Ok((ModelQueue::new(start.clamp(self.retained, self.tail())), true)),
        }
    }

    /// The record starting at `offset`: `(len, time)`.
    fn record_at(&self, offset: u64) -> Option<(u64, u64)> {
        let i = self.records.iter().position(|(start, _)| *start == offset)?;
        let (start, end) = self.records[i];
        Some((end - start, self.times[i]))
    }
}

impl Model {
    pub(crate) fn queue_receive(&mut self, req: &QueueReceive, now: u64) -> Answer {
        if !name_ok(&req.group)
            || req.max == 0
            || req.max > 1000
            || req.visibility_ms == 0
            || req.visibility_ms > MAX_MS
        {
            return Err(bad());
        }
        let (limit, dead_limit) =
            (self.limits.max_consumer_groups_per_stream, self.limits.max_dead_letters_per_group);
        let stream = self.find(&req.id, now)?;
        let (mut q, created) = stream.queue_or_new(&req.group, req.start_offset, limit)?;
        let before = q.clone();
        q.in_flight.retain(|m| m.offset >= stream.retained);
        q.dead.retain(|m| m.offset >= stream.retained);
        q.next = q.next.max(stream.retained);
        let spent =
            q.in_flight.iter().filter(|m| m.visible_at <= now && m.attempts >= q.max_attempts).count();
        if spent > 0 && q.dead.len() + spent > dead_limit {
            return Err(Fault::with(ErrorCode::DeadLettersFull, &[dead_limit as u64]));
        }
        let (alive, gone): (Vec<_>, Vec<_>) =
            q.in_flight.drain(..).partition(|m| !(m.visible_at <= now && m.attempts >= q.max_attempts));
        q.in_flight = alive;
        q.dead.extend(gone);
        q.dead.sort_by_key(|m| m.offset);
        let until = now + req.visibility_ms;
        let mut out = Vec::new();
        for m in q.in_flight.iter_mut() {
            if out.len() == req.max as usize {
                break;
            }
            if m.visible_at <= now {
                q.last_receipt += 1;
                m.attempts += 1;
                m.receipt = q.last_receipt;
                m.visible_at = until;
                out.push((m.offset, m.len, m.attempts, m.receipt, m.at));
            }
        }
        for span in &req.fresh {
            if out.len() == req.max as usize || q.in_flight.len() >= q.max_in_flight as usize {
                break;
            }
            if span.offset < q.next {
                continue;
            }
            match stream.record_at(q.next) {
                Some((len, at)) if span.offset == q.next && span.len == len && span.at_ms == at => {
                    q.last_receipt += 1;
                    let m = ModelMessage {
                        offset: span.offset,
                        len,
                        at,
                        attempts: 1,
                        receipt: q.last_receipt,
                        visible_at: until,
                    };
                    out.push((m.offset, m.len, m.attempts, m.receipt, m.at));
                    q.in_flight.push(m);
                    q.next += len;
                }
                _ => break,
            }
        }
        if !created && q == before {
            return Ok(Outcome::Received { deliveries: out, commit_index: self.commit_index });
        }
        self.commit_index += 1;
        self.streams.get_mut(&req.id).expect("found").queues.insert(req.group.clone(), q);
        Ok(Outcome::Received { deliveries: out, commit_index: self.commit_index })
    }

    pub(crate) fn queue_settle(&mut self, req: &QueueSettle, nack: bool, now: u64) -> Answer {
        if nack && req.delay_ms > MAX_MS {
            return Err(bad());
        }
        let stream = self.find(&req.id, now)?;
        let at = stream
            .queue(&req.group)?
            .and_then(|q| q.in_flight.iter().position(|m| req.receipt != 0 && m.receipt == req.receipt));
        let Some(at) = at else {
            return Err(Fault::with(ErrorCode::ReceiptNotFound, &[req.receipt]));
        };
        self.commit_index += 1;
        let q = self.streams.get_mut(&req.id).expect("found").queues.get_mut(&req.group).expect("found");
        if nack {
            q.in_flight[at].visible_at = now + req.delay_ms;
        } else {
            q.in_flight.remove(at);
        }
        Ok(Outcome::QueueSettled { commit_index: self.commit_index })
    }

    pub(crate) fn set_queue_policy(&mut self, req: &QueuePolicySet, now: u64) -> Answer {
        if !name_ok(&req.group)
            || !(1..=1000).contains(&req.max_attempts)
            || !(1..=65_536).contains(&req.max_in_flight)
        {
            return Err(bad());
        }
        let limit = self.limits.max_consumer_groups_per_stream;
        let stream = self.find(&req.id, now)?;
        let (mut q, created) = stream.queue_or_new(&req.group, req.start_offset, limit)?;
        if !created && q.max_attempts == req.max_attempts && q.max_in_flight == req.max_in_flight {
            return Ok(Outcome::QueuePolicySet { commit_index: self.commit_index });
        }
        q.max_attempts = req.max_attempts;
        q.max_in_flight = req.max_in_flight;
        self.commit_index += 1;
        self.streams.get_mut(&req.id).expect("found").queues.insert(req.group.clone(), q);
        Ok(Outcome::QueuePolicySet { commit_index: self.commit_index })
    }

    pub(crate) fn queue_dead_letters(&mut self, req: &QueueDeadLetters, redrive: bool, now: u64) -> Answer {
        let count = self.find(&req.id, now)?.queue(&req.group)?.map_or(0, |q| q.dead.len() as u64);
        if count == 0 {
            return Ok(Outcome::DeadLetters { count: 0, commit_index: self.commit_index });
        }
        self.commit_index += 1;
        let q = self.streams.get_mut(&req.id).expect("found").queues.get_mut(&req.group).expect("found");
        let dead = std::mem::take(&mut q.dead);
        if redrive {
            for m in dead {
                q.in_flight.push(ModelMessage { attempts: 0, receipt: 0, visible_at: now, ..m });
            }
            q.in_flight.sort_by_key(|m| m.offset);
        }
        Ok(Outcome::DeadLetters { count, commit_index: self.commit_index })
    }

    /// A queue group's backlog: `(ready, in flight, dead, oldest ready
    /// age)`; a group never used has everything from the retained offset
    /// ready.
    pub fn backlog(
        &self,
        id: &StreamId,
        group: &str,
        now: u64,
    ) -> Result<(u64, u64, u64, Option<u64>), Fault> {
        let stream = self.find(id, now)?;
        let fresh = ModelQueue::new(stream.retained);
        let q = stream.queue(group)?.unwrap_or(&fresh);
        let next = q.next.max(stream.retained);
        let waiting: Vec<usize> =
            (0..stream.records.len()).filter(|i| stream.records[*i].0 >= next).collect();
        let mut ready = waiting.len() as u64;
        let mut oldest = waiting.first().map(|i| stream.times[*i]);
        let mut in_flight = 0;
        for m in q.in_flight.iter().filter(|m| m.offset >= stream.retained) {
            if m.visible_at <= now {
                ready += 1;
                oldest = Some(oldest.map_or(m.at, |o: u64| o.min(m.at)));
            } else {
                in_flight += 1;
            }
        }
        Ok((ready, in_flight, q.dead.len() as u64, oldest.map(|at| now.saturating_sub(at))))
    }

    /// Up to `max` dead letters: `(offset, len, attempts, time)`.
    pub fn dead_letters(
        &self,
        id: &StreamId,
        group: &str,
        max: usize,
        now: u64,
    ) -> Result<Vec<(u64, u64, u32, u64)>, Fault> {
        let q = self.find(id, now)?.queue(group)?;
        Ok(q.map(|q| q.dead.iter().take(max).map(|m| (m.offset, m.len, m.attempts, m.at)).collect())
            .unwrap_or_default())
    }

    /// A queue group as `(high-water mark, in flight, dead)` offsets with
    /// their attempts, receipts and visibility.
    pub fn queue_view(&self, id: &StreamId, group: &str) -> Option<&ModelQueue> {
        self.streams.get(id).and_then(|s| s.queues.get(group))
    }
}
