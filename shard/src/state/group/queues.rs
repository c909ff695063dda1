//! Queue consumer groups of a stream (SPEC §2 "Queues"): competing
//! consumers, visibility timeouts, attempts and dead letters, kept in the
//! stream's own group next to its bytes and lease groups (one namespace:
//! a name is a lease group or a queue group, never both,
//! `ConsumerGroupKindMismatch`).
//!
//! Rules, each checked against the unchanged state before anything is
//! written (a refused command changes nothing):
//!
//! - **Receive** hands out up to `max` messages, oldest first: first the
//!   in-flight ones whose visibility has passed (nacked, or not acked in
//!   time: each delivery charges an attempt), then new records from the
//!   high-water mark, but new ones only while fewer than `max_in_flight`
//!   are in flight. Every delivery gets a fresh receipt and is invisible
//!   to other receives until `now + visibility`, so a message is never
//!   with two consumers at once. A message whose visibility passes after
//!   its `max_attempts`-th delivery is dead-lettered instead of delivered
//!   again (`DeadLettersFull` when the group already holds
//!   `max_dead_letters_per_group`). The first receive (or policy) of a
//!   name creates the group at the offset its `Start` resolved to.
//! - **Ack** removes the delivery's message; **nack** makes it visible
//!   again after its delay, keeping its attempts. Both need the latest
//!   receipt of a message in flight: an older or unknown one is
//!   `ReceiptNotFound` and changes nothing.
//! - **Dead letters** keep the message (offset, length, time, attempts);
//!   *purge* forgets them, *redrive* puts them back in flight, visible at
//!   once with no attempts charged.
//! - Messages below the stream's retained offset are gone for every group:
//!   a receive drops them from the in-flight and dead sets and moves the
//!   high-water mark up to it.
//!
//! Visibility uses the group's clock (the command's `now_ms`).

use crate::error::{Error, ErrorKind, Result};
use crate::state::api::{
    self, Backlog, DeliveryMeta, Read, Start, DEFAULT_MAX_ATTEMPTS, DEFAULT_MAX_IN_FLIGHT, MAX_LEASE_TTL,
    MAX_QUEUE_ATTEMPTS, MAX_QUEUE_IN_FLIGHT, MAX_RECEIVE_MESSAGES,
};
use crate::state::command::{QueueDeadLetters, QueuePolicySet, QueueReceive, QueueSettle, RecordSpan, Response};
use crate::state::group::consumer_state::{ConsumerGroup, QueueMessage, QueueState};
use crate::state::group::checks::{check_name, kind_mismatch};
use crate::state::group::read::ColdRecords;
use crate::state::group::stream::StreamState;
use crate::state::group::GroupState;
use crate::state::name::StreamId;

impl QueueState {
    /// A new group reading from `start` with the default policy.
    pub fn new(start: u64) -> Self {
        QueueState {
            next: start,
            in_flight: Default::default(),
            dead: Default::default(),
            last_receipt: 0,
            max_attempts: DEFAULT_MAX_ATTEMPTS,
            max_in_flight: DEFAULT_MAX_IN_FLIGHT,
        }
    }

    /// The offset of the in-flight message whose latest receipt is
    /// `receipt` (receipts are never 0).
    fn holder_of(&self, receipt: u64) -> Option<u64> {
        if receipt == 0 {
            return None;
        }
        self.in_flight.iter().find(|(_, m)| m.receipt == receipt).map(|(o, _)| *o)
    }
}

fn receipt_not_found(group: &str, receipt: u64) -> Error {
    ErrorKind::ReceiptNotFound { consumer_group: group.to_string(), receipt }.into()
}

fn check_ms(what: &str, ms: u64, min: u64) -> Result<()> {
    let max = MAX_LEASE_TTL.as_millis() as u64;
    if ms < min || ms > max {
        return Err(Error::bad_request(format!("a {what} lasts from {min} to {max} ms, not {ms}")));
    }
    Ok(())
}

impl StreamState {
    /// The queue group `group`, if it exists; a lease group of that name is
    /// `ConsumerGroupKindMismatch`.
    pub(crate) fn queue(&self, group: &str) -> Result<Option<&QueueState>> {
        match self.consumers.get(group) {
            None => Ok(None),
            Some(ConsumerGroup::Queue(q)) => Ok(Some(q)),
            Some(ConsumerGroup::Lease(_)) => Err(kind_mismatch(group, "queue")),
        }
    }

    /// The queue group, or a new one at `start` when the stream may take
    /// one more consumer group.
    fn queue_or_new(&self, group: &str, start: u64, limit: usize) -> Result<(QueueState, bool)> {
        match self.queue(group)? {
            Some(q) => Ok((q.clone(), false)),
            None if self.consumers.len() >= limit => {
                Err(ErrorKind::TooManyConsumerGroups { limit: limit as u64 }.into())
            }
            None => Ok((QueueState::new(start.clamp(self.retained_offset, self.next_offset)), true)),
        }
    }
}

impl GroupState {
    /// The high-water mark of queue group `group` (`None` for a new
    /// group): where a receive's fresh records must start.
    pub fn queue_next(&self, id: &StreamId, group: &str, now_ms: u64) -> Result<Option<u64>> {
        Ok(self.lookup(id, now_ms)?.queue(group)?.map(|q| q.next))
    }

    /// Where `start` points on stream `id`: the retained offset, the tail,
    /// the first record at or after a time, or the first record after an
    /// offset (the tail when there is none).
    pub fn resolve_start(&self, id: &StreamId, start: Start, now_ms: u64, lookup: &impl ColdRecords) -> Result<u64> {
        let stream = self.lookup(id, now_ms)?;
        match start {
            Start::Earliest => Ok(stream.retained_offset),
            Start::Latest => Ok(stream.next_offset),
            Start::Timestamp(ms) => stream.offset_at(ms, self, lookup),
            Start::After(offset) => {
                let from = offset.saturating_add(1).max(stream.retained_offset);
                if from >= stream.next_offset {
                    return Ok(stream.next_offset);
                }
                let read = Read::new(id.clone()).offset(from).max_len(1).records(true);
                Ok(self.read_plan_with(&read, now_ms, lookup)?.offset)
            }
        }
    }

    /// The logged form of a receive: the group's start resolved (when it
    /// is new) and the records from its high-water mark on, as this state
    /// holds them (admission; SPEC §2 "Queues"). Refuses what the command
    /// would refuse anyway only where it must look (the stream, the kind
    /// of the group).
    pub fn prepare_receive(&self, req: &api::Receive, now_ms: u64, lookup: &impl ColdRecords) -> Result<QueueReceive> {
        let max = u32::try_from(req.max_messages).unwrap_or(u32::MAX);
        let visibility_ms = u64::try_from(req.visibility.as_millis()).unwrap_or(u64::MAX);
        let mut cmd = QueueReceive {
            id: req.id.clone(),
            group: req.consumer_group.clone(),
            max,
            visibility_ms,
            start_offset: 0,
            fresh: Vec::new(),
        };
        let stream = self.lookup(&req.id, now_ms)?;
        let next = match stream.queue(&req.consumer_group)? {
            Some(q) => q.next.max(stream.retained_offset),
            None => {
                cmd.start_offset = self.resolve_start(&req.id, req.start, now_ms, lookup)?;
                cmd.start_offset
            }
        };
        if next >= stream.next_offset || max == 0 || max > MAX_RECEIVE_MESSAGES {
            return Ok(cmd);
        }
        let read = Read::new(req.id.clone()).offset(next).max_len(self.limits.max_read_bytes).records(true);
        let plan = self.read_plan_with(&read, now_ms, lookup)?;
        let ends = plan.records.iter().skip(1).map(|r| r.offset).chain(std::iter::once(plan.next_offset));
        cmd.fresh = plan
            .records
            .iter()
            .zip(ends)
            .take(max as usize)
            .map(|(r, end)| RecordSpan { offset: r.offset, len: end - r.offset, at_ms: r.at_ms })
            .collect();
        Ok(cmd)
    }

    pub(crate) fn queue_receive(&mut self, req: &QueueReceive, now: u64) -> Result<Response> {
        check_name("consumer group", &req.group)?;
        if req.max == 0 || req.max > MAX_RECEIVE_MESSAGES {
            return Err(Error::bad_request(format!(
                "a receive asks for 1 to {MAX_RECEIVE_MESSAGES} messages, not {}",
                req.max
            )));
        }
        check_ms("visibility timeout", req.visibility_ms, 1)?;
        let limit = self.limits.max_consumer_groups_per_stream;
        let dead_limit = self.limits.max_dead_letters_per_group;
        let stream = self.lookup(&req.id, now)?;
        let (mut q, created) = stream.queue_or_new(&req.group, req.start_offset, limit)?;
        let before = q.clone();
        let (retained, tail) = (stream.retained_offset, stream.next_offset);
        // Retention took what lies below the retained offset.
        q.in_flight.retain(|offset, _| *offset >= retained);
        q.dead.retain(|offset, _| *offset >= retained);
        q.next = q.next.max(retained);
        // Visible again after the last attempt: dead-letter.
        let spent: Vec<u64> = q
            .in_flight
            .iter()
            .filter(|(_, m)| m.visible_at_ms <= now && m.attempts >= q.max_attempts)
            .map(|(o, _)| *o)
            .collect();
        if !spent.is_empty() && q.dead.len() + spent.len() > dead_limit {
            return Err(ErrorKind::DeadLettersFull { consumer_group: req.group.clone(), limit: dead_limit as u64 }
                .into());
        }
        for offset in spent {
            if let Some(m) = q.in_flight.remove(&offset) {
                q.dead.insert(offset, m);
            }
        }
        let visible_until = now.saturating_add(req.visibility_ms);
        let mut deliveries = Vec::new();
        let max = req.max as usize;
        for (offset, m) in q.in_flight.iter_mut().filter(|(_, m)| m.visible_at_ms <= now).take(max) {
            q.last_receipt += 1;
            m.attempts = m.attempts.saturating_add(1);
            m.receipt = q.last_receipt;
            m.visible_at_ms = visible_until;
            deliveries.push(DeliveryMeta::of(*offset, m));
        }
        let mut free = (q.max_in_flight as usize).saturating_sub(q.in_flight.len());
        for span in &req.fresh {
            if deliveries.len() >= max || free == 0 {
                break;
            }
            if span.offset < q.next {
                continue;
            }
            if span.offset != q.next || span.len == 0 || span.offset + span.len > tail {
                break; // not the record at the high-water mark: admission saw another state
            }
            q.last_receipt += 1;
            let m = QueueMessage {
                len: span.len,
                at_ms: span.at_ms,
                attempts: 1,
                receipt: q.last_receipt,
                visible_at_ms: visible_until,
            };
            q.in_flight.insert(span.offset, m);
            q.next = span.offset + span.len;
            free -= 1;
            deliveries.push(DeliveryMeta::of(span.offset, &m));
        }
        if !created && q == before {
            return Ok(Response::Received { deliveries, commit_index: self.commit_index });
        }
        let commit_index = self.bump();
        let stream = Self::stream_mut(&mut self.buckets, &req.id)?;
        stream.consumers.insert(req.group.clone(), ConsumerGroup::Queue(q));
        Ok(Response::Received { deliveries, commit_index })
    }

    /// Acks (`nack` false) or nacks a delivery by its receipt.
    pub(crate) fn queue_settle(&mut self, req: &QueueSettle, nack: bool, now: u64) -> Result<Response> {
        if nack {
            check_ms("nack delay", req.delay_ms, 0)?;
        }
        let q = self.lookup(&req.id, now)?.queue(&req.group)?;
        let Some(offset) = q.and_then(|q| q.holder_of(req.receipt)) else {
            return Err(receipt_not_found(&req.group, req.receipt));
        };
        let commit_index = self.bump();
        let stream = Self::stream_mut(&mut self.buckets, &req.id)?;
        if let Some(ConsumerGroup::Queue(q)) = stream.consumers.get_mut(&req.group) {
            if nack {
                if let Some(m) = q.in_flight.get_mut(&offset) {
                    m.visible_at_ms = now.saturating_add(req.delay_ms);
                }
            } else {
                q.in_flight.remove(&offset);
            }
        }
        Ok(Response::QueueSettled { commit_index })
    }

    pub(crate) fn set_queue_policy(&mut self, req: &QueuePolicySet, now: u64) -> Result<Response> {
        check_name("consumer group", &req.group)?;
        if req.max_attempts == 0 || req.max_attempts > MAX_QUEUE_ATTEMPTS {
            return Err(Error::bad_request(format!(
                "max_attempts is 1 to {MAX_QUEUE_ATTEMPTS}, not {}",
                req.max_attempts
            )));
        }
        if req.max_in_flight == 0 || req.max_in_flight > MAX_QUEUE_IN_FLIGHT {
            return Err(Error::bad_request(format!(
                "max_in_flight is 1 to {MAX_QUEUE_IN_FLIGHT}, not {}",
                req.max_in_flight
            )));
        }
        let limit = self.limits.max_consumer_groups_per_stream;
        let stream = self.lookup(&req.id, now)?;
        let (mut q, created) = stream.queue_or_new(&req.group, req.start_offset, limit)?;
        if !created && q.max_attempts == req.max_attempts && q.max_in_flight == req.max_in_flight {
            return Ok(Response::QueuePolicySet { commit_index: self.commit_index });
        }
        q.max_attempts = req.max_attempts;
        q.max_in_flight = req.max_in_flight;
        let commit_index = self.bump();
        let stream = Self::stream_mut(&mut self.buckets, &req.id)?;
        stream.consumers.insert(req.group.clone(), ConsumerGroup::Queue(q));
        Ok(Response::QueuePolicySet { commit_index })
    }

    /// Purges (`redrive` false) or redrives a queue group's dead letters;
    /// answers how many. Nothing to do (or no such group) changes nothing.
    pub(crate) fn queue_dead_letters(&mut self, req: &QueueDeadLetters, redrive: bool, now: u64) -> Result<Response> {
        let q = self.lookup(&req.id, now)?.queue(&req.group)?;
        let count = q.map_or(0, |q| q.dead.len() as u64);
        if count == 0 {
            return Ok(Response::DeadLetters { count: 0, commit_index: self.commit_index });
        }
        let commit_index = self.bump();
        let stream = Self::stream_mut(&mut self.buckets, &req.id)?;
        if let Some(ConsumerGroup::Queue(q)) = stream.consumers.get_mut(&req.group) {
            let dead = std::mem::take(&mut q.dead);
            if redrive {
                for (offset, m) in dead {
                    q.in_flight.insert(offset, QueueMessage { attempts: 0, receipt: 0, visible_at_ms: now, ..m });
                }
            }
        }
        Ok(Response::DeadLetters { count, commit_index })
    }

    /// A queue group's backlog (a group never received from: everything
    /// from the retained offset is ready).
    pub fn backlog(&self, id: &StreamId, group: &str, now_ms: u64, lookup: &impl ColdRecords) -> Result<Backlog> {
        let stream = self.lookup(id, now_ms)?;
        let fresh = QueueState::new(stream.retained_offset);
        let q = stream.queue(group)?.unwrap_or(&fresh);
        let next = q.next.max(stream.retained_offset);
        let (waiting, first_at) = stream.records_from(next, self, lookup)?;
        let mut ready = waiting;
        let mut oldest = first_at;
        let mut in_flight = 0;
        for (offset, m) in &q.in_flight {
            if *offset < stream.retained_offset {
                continue;
            }
            if m.visible_at_ms <= now_ms {
                ready += 1;
                oldest = Some(oldest.map_or(m.at_ms, |o| o.min(m.at_ms)));
            } else {
                in_flight += 1;
            }
        }
        Ok(Backlog {
            ready,
            in_flight,
            dead: q.dead.len() as u64,
            oldest_ready_age_ms: oldest.map(|at| now_ms.saturating_sub(at)),
        })
    }

    /// Up to `max` of a queue group's dead letters, oldest first (receipt
    /// 0: a dead letter cannot be settled).
    pub fn dead_letter_list(&self, id: &StreamId, group: &str, max: usize, now_ms: u64) -> Result<Vec<DeliveryMeta>> {
        let stream = self.lookup(id, now_ms)?;
        Ok(stream
            .queue(group)?
            .map(|q| q.dead.iter().take(max).map(|(o, m)| DeliveryMeta { receipt: 0, ..DeliveryMeta::of(*o, m) }).collect())
            .unwrap_or_default())
    }
}

impl StreamState {
    /// How many records start at or after `offset` (a record boundary),
    /// and the first one's time.
    fn records_from(&self, offset: u64, group: &GroupState, lookup: &impl ColdRecords) -> Result<(u64, Option<u64>)> {
        let (mut count, mut first) = (0u64, None);
        for chunk in self.cold.iter().filter(|c| c.end() > offset) {
            if chunk.start >= offset && first.is_some() {
                count += chunk.records;
                continue;
            }
            let file = &group.cold.packs.get(&chunk.pack).ok_or_else(|| Error::corrupted("a cold chunk without its pack"))?.file;
            let (n, at) = lookup.with_records(file, chunk.slice, |index| {
                index.map(|index| {
                    let i = index.first_at_or_after(offset);
                    ((index.len() - i.min(index.len())) as u64, index.time(i))
                })
            })?
            .ok_or_else(|| Error::from(ErrorKind::NoRecordIndex { offset: chunk.start, file: file.clone() }))?;
            count += n;
            first = first.or(at);
        }
        let hot_from = self.records.partition_point(|(start, _)| *start < offset);
        count += (self.records.len() - hot_from) as u64;
        if first.is_none() {
            first = self.records.get(hot_from).and_then(|(start, _)| self.times.time_at(*start));
        }
        Ok((count, first))
    }
}
