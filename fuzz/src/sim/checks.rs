//! The comparisons between the machine's live groups and the reference
//! model (SPEC §2): reads, and everything a group shows without a command.
//!
//! [`Sim::check_group`] runs after every step on the group the step
//! touched, comparing its invariants, counters and each stream's head
//! (integrity set-sums included), attributes, renewal need and producers
//! (epoch and last seq, so deduplication state is compared across
//! restarts); the read a step makes is compared byte for byte when it
//! runs. Every few steps, after every restart and at the end of a run,
//! every group is compared that way plus every retained byte of every
//! stream, read back in chunks.

use std::collections::BTreeMap;

use rill_shard::state::api::{Read, ReadReply};
use rill_shard::state::group::GroupState;
use rill_shard::StreamId;

use super::world::Sim;

/// How much of a group [`Sim::check_group`] compares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Depth {
    /// Invariants, hot bytes, stream count, commit index, next expiry.
    Counters,
    /// And every stream's head (integrity set-sums included), attributes,
    /// renewal need and producers.
    Views,
    /// And every retained byte of every stream, read back in chunks.
    Bytes,
}
use super::kit::{ensure, guard, Fail};
use crate::model::Model;
use crate::observe::Fault;

/// Consumer groups as both sides show them: name -> (owner, generation,
/// expiry, committed offset).
type Leases = BTreeMap<String, (Option<String>, u64, u64, Option<u64>)>;
/// name -> (high-water mark, in flight, dead, (max attempts, max in flight, last receipt)); a message is (offset, len, attempts, receipt, visible at).
type Queues = BTreeMap<String, (u64, Vec<QueueRow>, Vec<QueueRow>, (u32, u32, u64))>;
type QueueRow = (u64, u64, u32, u64, u64);

impl Sim {
    /// A read of the real group, its cold pieces and record indexes taken
    /// from the simulated pack store; `None` when it was refused on a pack
    /// damaged on purpose (allowed, and counted).
    pub(super) fn real_read(&self, g: u32, req: &Read) -> Result<Option<Result<ReadReply, Fault>>, Fail> {
        let live = &self.groups[g as usize].live;
        match guard("read", || live.read_plan_with(req, self.now, &self.store))? {
            Ok(plan) => Ok(self.resolve(plan)?.map(Ok)),
            Err(e) if self.refused_on_damage(&e) => Ok(None),
            Err(e) => Ok(Some(Err(Fault::of(&e)))),
        }
    }

    /// Reads on both sides; returns `(next_offset, up_to_date)` on success.
    pub fn compare_read(
        &self,
        g: u32,
        id: &StreamId,
        offset: u64,
        max_len: usize,
    ) -> Result<Option<(u64, bool)>, Fail> {
        let group = &self.groups[g as usize];
        let req = Read::new(id.clone()).offset(offset).max_len(max_len);
        let Some(real) = self.real_read(g, &req)? else { return Ok(None) };
        let model = group.model_live.read(id, offset, max_len, self.now);
        match (&real, &model) {
            (Ok(r), Ok(m)) => {
                let same = r.offset == offset
                    && r.payload[..] == m.bytes[..]
                    && (r.next_offset, r.up_to_date, r.closed) == (m.next_offset, m.up_to_date, m.closed);
                ensure(same, "read", || {
                    format!(
                        "{id} at {offset} len {max_len}: real {} bytes to {} (up to date {}, closed {}), \
                         model {} bytes to {} ({}, {})",
                        r.payload.len(),
                        r.next_offset,
                        r.up_to_date,
                        r.closed,
                        m.bytes.len(),
                        m.next_offset,
                        m.up_to_date,
                        m.closed
                    )
                })?;
                Ok(Some((r.next_offset, r.up_to_date)))
            }
            (Err(r), Err(m)) if r == m => Ok(None),
            _ => Err(Fail::new("read", format!("{id} at {offset}: real {real:?}, model {model:?}"))),
        }
    }

    /// Record reads on both sides; returns `(next_offset, up_to_date)` on
    /// success.
    pub fn compare_records(
        &self,
        g: u32,
        id: &StreamId,
        offset: u64,
        max_len: usize,
    ) -> Result<Option<(u64, bool)>, Fail> {
        let group = &self.groups[g as usize];
        let req = Read::new(id.clone()).offset(offset).max_len(max_len).records(true);
        let Some(real) = self.real_read(g, &req)? else { return Ok(None) };
        let model = group.model_live.read_records(id, offset, max_len, self.now);
        match (&real, &model) {
            (Ok(r), Ok((m, records))) => {
                let metas: Vec<(u64, u64)> = r.records.iter().map(|m| (m.offset, m.at_ms)).collect();
                let same = r.payload[..] == m.bytes[..]
                    && (r.next_offset, r.up_to_date, r.closed) == (m.next_offset, m.up_to_date, m.closed)
                    && &metas == records
                    && r.offset == records.first().map_or(r.next_offset, |m| m.0);
                ensure(same, "record read", || {
                    format!(
                        "{id} at {offset} len {max_len}: real {} bytes {}..{} records {metas:?}, \
                         model {} bytes to {} records {records:?}",
                        r.payload.len(),
                        r.offset,
                        r.next_offset,
                        m.bytes.len(),
                        m.next_offset,
                    )
                })?;
                Ok(Some((r.next_offset, r.up_to_date)))
            }
            (Err(r), Err(m)) if r == m => Ok(None),
            _ => Err(Fail::new("record read", format!("{id} at {offset}: real {real:?}, model {model:?}"))),
        }
    }

    /// `offset_at` on both sides.
    pub fn compare_offset_at(&self, g: u32, id: &StreamId, at_ms: u64) -> Result<(), Fail> {
        let group = &self.groups[g as usize];
        let real = match guard("offset_at", || group.live.offset_at(id, at_ms, self.now, &self.store))? {
            Err(e) if self.refused_on_damage(&e) => return Ok(()),
            other => other.map_err(|e| Fault::of(&e)),
        };
        let model = group.model_live.offset_at(id, at_ms, self.now);
        ensure(real == model, "offset_at", || format!("{id} at {at_ms} ms: real {real:?}, model {model:?}"))
    }

    /// Compares group `g` with its model, as deep as `depth` says.
    pub fn check_group(&self, g: u32, depth: Depth) -> Result<(), Fail> {
        let group = &self.groups[g as usize];
        let (real, model) = (&group.live, &group.model_live);
        guard("invariants", || real.check_invariants())?;
        let counters = |hot, streams, commit, expiry| (hot, streams, commit, expiry);
        let r = counters(real.hot_bytes(), real.stream_count(), real.commit_index(), real.next_expiry_ms());
        let m = counters(
            model.hot_bytes(),
            model.streams.len() as u64,
            model.commit_index,
            model.next_expiry_ms(),
        );
        ensure(r == m, "counters", || {
            format!("group {g} (hot bytes, streams, commit index, next expiry): real {r:?}, model {m:?}")
        })?;
        let limit = self.setup.limits.max_hot_bytes;
        ensure(real.hot_bytes() <= limit, "hot-limit", || {
            format!("group {g} holds {} hot bytes, above its limit {limit}", real.hot_bytes())
        })?;
        if depth == Depth::Counters {
            return Ok(());
        }
        let members: BTreeMap<(String, String), BTreeMap<String, u64>> = real
            .members()
            .iter()
            .flat_map(|(b, groups)| groups.iter().map(move |(g, m)| ((b.clone(), g.clone()), m.clone())))
            .collect();
        ensure(members == model.members, "membership", || {
            format!("group {g}: real {members:?}, model {:?}", model.members)
        })?;
        compare_cold(g, real, model)?;
        // The fork book whole: pins, tombstones, origins, the outbox.
        let book = postcard::to_allocvec(real.forks()).map_err(|e| Fail::new("forks", e.to_string()))?;
        ensure(book == model.forks.encoded(), "forks", || {
            format!("group {g}: real {:?}, model {:?}", real.forks(), model.forks)
        })?;
        for id in self.setup.names().filter(|id| self.group_of(id) == g) {
            let now = self.now;
            let head = real.head_view(id, now).map_err(|e| Fault::of(&e));
            let model_head = model.head(id, now);
            ensure(head == model_head, "head", || format!("{id}: real {head:?}, model {model_head:?}"))?;
            let attrs = real.get_attrs(id, now).map_err(|e| Fault::of(&e));
            let model_attrs = model.get_attrs(id, now);
            ensure(attrs == model_attrs, "attrs", || format!("{id}: real {attrs:?}, model {model_attrs:?}"))?;
            ensure(real.renewal_due(id, now) == model.renewal_due(id, now), "renewal", || id.to_string())?;
            let producers: Option<BTreeMap<String, (u64, u64)>> = real.stream(id).map(|s| {
                s.producers()
                    .iter()
                    .map(|(p, state)| (p.clone(), (state.epoch(), state.last_seq())))
                    .collect()
            });
            let model_producers: Option<BTreeMap<String, (u64, u64)>> = model.streams.get(id).map(|s| {
                s.producers.iter().map(|(p, state)| (p.clone(), (state.epoch, state.last_seq))).collect()
            });
            ensure(producers == model_producers, "producers", || {
                format!("{id}: real {producers:?}, model {model_producers:?}")
            })?;
            // Consumer groups: owner, generation, expiry and committed offset.
            let leases: Option<Leases> = real.stream(id).map(|s| {
                s.consumer_groups()
                    .iter()
                    .filter_map(|(name, group)| match group {
                        rill_shard::state::group::ConsumerGroup::Lease(l) => Some((
                            name.clone(),
                            (l.owner.clone(), l.generation, l.expires_at_ms, l.committed),
                        )),
                        rill_shard::state::group::ConsumerGroup::Queue(_) => None,
                    })
                    .collect()
            });
            let model_leases: Option<Leases> = model.streams.get(id).map(|s| {
                s.leases
                    .iter()
                    .map(|(name, l)| {
                        (name.clone(), (l.owner.clone(), l.generation, l.expires_at, l.committed))
                    })
                    .collect()
            });
            ensure(leases == model_leases, "leases", || {
                format!("{id}: real {leases:?}, model {model_leases:?}")
            })?;
            // Queue groups: high-water mark, every message in flight and
            // dead with its attempts, receipt and visibility, the policy.
            let queues: Option<Queues> = real.stream(id).map(|s| {
                s.consumer_groups()
                    .iter()
                    .filter_map(|(name, group)| match group {
                        rill_shard::state::group::ConsumerGroup::Queue(q) => {
                            let list = |m: &std::collections::BTreeMap<
                                u64,
                                rill_shard::state::group::QueueMessage,
                            >| {
                                m.iter()
                                    .map(|(o, m)| (*o, m.len, m.attempts, m.receipt, m.visible_at_ms))
                                    .collect::<Vec<_>>()
                            };
                            let policy = (q.max_attempts, q.max_in_flight, q.last_receipt);
                            Some((name.clone(), (q.next, list(&q.in_flight), list(&q.dead), policy)))
                        }
                        rill_shard::state::group::ConsumerGroup::Lease(_) => None,
                    })
                    .collect()
            });
            let model_queues: Option<Queues> = model.streams.get(id).map(|s| {
                s.queues
                    .iter()
                    .map(|(name, q)| {
                        let list = |m: &[crate::model::queues::ModelMessage]| {
                            m.iter().map(|m| (m.offset, m.len, m.attempts, m.receipt, m.visible_at)).collect()
                        };
                        let policy = (q.max_attempts, q.max_in_flight, q.last_receipt);
                        (name.clone(), (q.next, list(&q.in_flight), list(&q.dead), policy))
                    })
                    .collect()
            });
            ensure(queues == model_queues, "queues", || {
                format!("{id}: real {queues:?}, model {model_queues:?}")
            })?;
            let policy = real.stream(id).map(|s| {
                let p = s.retention_policy();
                let age = p.max_age.map(|a| a.as_millis() as u64);
                (p.consumed || age.is_some()).then_some((p.consumed, age))
            });
            let model_policy = model.streams.get(id).map(|s| s.retention);
            ensure(policy == model_policy, "retention policy", || {
                format!("{id}: real {policy:?}, model {model_policy:?}")
            })?;
            if depth != Depth::Bytes {
                continue;
            }
            if let Ok(stream) = model.find(id, now) {
                let mut offset = stream.retained;
                for _ in 0..100_000 {
                    match self.compare_read(g, id, offset, self.setup.limits.max_read_bytes)? {
                        Some((next, false)) => offset = next,
                        _ => break,
                    }
                }
                // And every record, by record reads of at most 64 bytes.
                let mut offset = stream.retained;
                for _ in 0..100_000 {
                    match self.compare_records(g, id, offset, 64)? {
                        Some((next, false)) => offset = next,
                        _ => break,
                    }
                }
            }
        }
        Ok(())
    }
}

/// The group's packs, removal queue and every stream's chunks, real
/// against model.
fn compare_cold(g: u32, real: &GroupState, model: &Model) -> Result<(), Fail> {
    let cold = real.cold();
    let packs: Vec<(u64, &str, &str, u32)> =
        cold.packs.iter().map(|(id, p)| (*id, p.bucket.as_str(), p.file.as_str(), p.live_slices)).collect();
    let model_packs: Vec<(u64, &str, &str, u32)> =
        model.cold.packs.iter().map(|(id, p)| (*id, p.bucket.as_str(), p.file.as_str(), p.users)).collect();
    ensure(packs == model_packs, "cold-packs", || {
        format!("group {g}: real {packs:?}, model {model_packs:?}")
    })?;
    let gc: Vec<(u64, &str, &str, u64)> =
        cold.gc.iter().map(|(s, e)| (*s, e.file.as_str(), e.bucket.as_str(), e.not_before_ms)).collect();
    let model_gc: Vec<(u64, &str, &str, u64)> = model
        .cold
        .gc
        .iter()
        .map(|(s, e)| (*s, e.file.as_str(), e.bucket.as_str(), e.not_before_ms))
        .collect();
    ensure(gc == model_gc, "cold-gc", || format!("group {g}: real {gc:?}, model {model_gc:?}"))?;
    for stream in real.streams() {
        let chunks: Vec<(u64, u64, u64, u64, u32)> =
            stream.cold_chunks().map(|c| (c.start, c.end(), c.records, c.pack, c.slice)).collect();
        let model_chunks: Vec<(u64, u64, u64, u64, u32)> = model
            .streams
            .get(stream.id())
            .map(|s| s.chunks.iter().map(|c| (c.start, c.end, c.records, c.pack, c.slice)).collect())
            .unwrap_or_default();
        ensure(chunks == model_chunks, "cold-chunks", || {
            format!("{}: real {chunks:?}, model {model_chunks:?}", stream.id())
        })?;
    }
    Ok(())
}
