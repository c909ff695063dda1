//! The group's invariants, stated once as code (DESIGN principle 4).
//!
//! [`GroupState::verify`] walks the whole state in time linear in its size
//! (it re-hashes every retained record and snapshot) and reports the first
//! broken invariant as text. The snapshot decoder uses it to turn a body that
//! parses but violates an invariant into `Corrupted`; tests and the fuzzer
//! call [`GroupState::check_invariants`] after every step, which panics.
//! Every arithmetic step is checked, so `verify` itself never panics on an
//! arbitrary decoded state.

use std::collections::{BTreeMap, BTreeSet};

use crate::state::api::validate_attrs;
use crate::state::group::producer::{ItemOutcome, ProducerState};
use crate::state::group::stream::StreamState;
use crate::state::group::GroupState;
use crate::state::integrity::SetSum;
use crate::state::name::validate_name;

type Check = std::result::Result<(), String>;

fn ensure(condition: bool, what: impl FnOnce() -> String) -> Check {
    if condition {
        Ok(())
    } else {
        Err(what())
    }
}

impl GroupState {
    /// Panics when an invariant is broken (see [`Self::verify`]).
    pub fn check_invariants(&self) {
        if let Err(what) = self.verify() {
            panic!("group {} invariant violated: {what}", self.group);
        }
    }

    /// Checks every invariant of the group and its streams.
    pub fn verify(&self) -> Check {
        ensure(self.group < self.group_count.max(1), || "group is not below group_count".into())?;
        self.verify_members()?;
        self.verify_forks()?;
        let mut hot_bytes = 0u64;
        let mut stream_count = 0u64;
        let mut expiry = BTreeSet::new();
        let mut refs = BTreeMap::new();
        for (bucket, streams) in &self.buckets {
            validate_name("bucket", bucket).map_err(|e| format!("bucket {bucket:?}: {e}"))?;
            for (name, stream) in streams {
                let at = format!("stream {bucket:?}/{name:?}");
                ensure(stream.id.bucket() == bucket && stream.id.stream() == name, || {
                    format!("{at} is stored under another name than its id {}", stream.id)
                })?;
                let retained =
                    self.verify_stream(stream, &mut refs).map_err(|what| format!("{at}: {what}"))?;
                hot_bytes = hot_bytes.checked_add(retained).ok_or("hot bytes overflow")?;
                stream_count += 1;
                if let Some(deadline) = stream.deadline_ms() {
                    expiry.insert((deadline, stream.id.clone()));
                }
            }
        }
        ensure(hot_bytes == self.hot_bytes, || {
            format!("hot_bytes is {} but records hold {hot_bytes}", self.hot_bytes)
        })?;
        ensure(stream_count == self.stream_count, || {
            format!("stream_count is {} but {stream_count} are stored", self.stream_count)
        })?;
        ensure(expiry == self.expiry, || "expiry index is out of step with the streams".into())?;
        for (pack, info) in &self.cold.packs {
            let used = refs.get(pack).copied().unwrap_or(0);
            ensure(info.live_slices > 0 && info.live_slices == used, || {
                format!("pack {pack} counts {} live slices, chunks reference {used}", info.live_slices)
            })?;
        }
        ensure(refs.keys().all(|p| self.cold.packs.contains_key(p)), || {
            "a chunk references a dropped pack".into()
        })?;
        let live_files: BTreeSet<&str> = self.cold.packs.values().map(|p| p.file.as_str()).collect();
        ensure(live_files.len() == self.cold.packs.len(), || "two live packs share a file".into())?;
        ensure(self.cold.gc.values().all(|e| !live_files.contains(e.file.as_str())), || {
            "a live pack's file is queued for removal".into()
        })?;
        ensure(self.cold.gc.keys().all(|seq| *seq < self.cold.next_gc_seq), || {
            "gc entry beyond the next seq".into()
        })
    }

    /// Checks one stream; returns its hot payload bytes and adds its cold
    /// chunks' references to `refs` (pack -> slices).
    fn verify_stream(
        &self,
        stream: &StreamState,
        refs: &mut BTreeMap<u64, u32>,
    ) -> std::result::Result<u64, String> {
        let mut live = SetSum::default();
        let mut retained = 0u64;
        let first_start =
            stream.cold.front().map(|c| c.start).or(stream.records.front().map(|(start, _)| *start));
        let mut expected_start = first_start.unwrap_or(stream.next_offset);
        for chunk in &stream.cold {
            ensure(chunk.len > 0 && chunk.records > 0, || format!("empty cold chunk at {}", chunk.start))?;
            ensure(chunk.start == expected_start, || {
                format!(
                    "cold chunk at {} does not follow the previous data ending at {expected_start}",
                    chunk.start
                )
            })?;
            expected_start = chunk.start.checked_add(chunk.len).ok_or("cold chunk end overflows")?;
            live = live.combined(chunk.sum);
            let pack = self
                .cold
                .packs
                .get(&chunk.pack)
                .ok_or_else(|| format!("cold chunk names unknown pack {}", chunk.pack))?;
            ensure(pack.bucket == stream.id.bucket(), || {
                format!("pack {} belongs to another bucket", chunk.pack)
            })?;
            *refs.entry(chunk.pack).or_default() += 1;
        }
        ensure(stream.unsettled <= stream.records.len(), || {
            format!("{} unsettled of {} records", stream.unsettled, stream.records.len())
        })?;
        let settled = stream.records.len() - stream.unsettled;
        for (i, (start, payload)) in stream.records.iter().enumerate() {
            ensure(!payload.is_empty(), || format!("empty record at {start}"))?;
            ensure(*start == expected_start, || {
                format!("record at {start} does not follow the previous one ending at {expected_start}")
            })?;
            expected_start = start.checked_add(payload.len() as u64).ok_or("record end overflows")?;
            retained += payload.len() as u64;
            if i < settled {
                live.add_record(*start, payload);
            }
        }
        ensure(expected_start == stream.next_offset, || {
            format!("records end at {expected_start}, tail is {}", stream.next_offset)
        })?;
        let first_end =
            stream.cold.front().map(|c| c.end()).or(stream.records.front().map(|(s, p)| s + p.len() as u64));
        match (first_start, first_end) {
            (Some(start), Some(end)) => {
                ensure(start <= stream.retained_offset && stream.retained_offset < end, || {
                    format!("retained offset {} is outside the first record or chunk", stream.retained_offset)
                })?
            }
            _ => ensure(stream.retained_offset == stream.next_offset, || {
                "no records but the retained offset is below the tail".into()
            })?,
        }
        ensure(stream.integrity.live == live, || "live set-sum differs from the settled records".into())?;
        verify_times(stream)?;
        verify_consumers(stream)?;
        ensure(stream.incarnation >= 1 && stream.incarnation <= self.commit_index, || {
            format!("incarnation {} is not a past commit index", stream.incarnation)
        })?;
        ensure(!(stream.ttl_s.is_some() && stream.expires_at_ms.is_some()), || {
            "both ttl_s and expires_at_ms".into()
        })?;
        ensure(stream.ttl_s != Some(0), || "ttl_s is zero".into())?;
        if let Some(attrs) = &stream.attrs {
            validate_attrs(attrs).map_err(|e| format!("attributes: {e}"))?;
        }
        ensure(stream.producers.len() <= self.limits.max_producers_per_stream.max(1), || {
            format!("{} producers", stream.producers.len())
        })?;
        for (id, producer) in &stream.producers {
            self.verify_producer(stream, producer).map_err(|what| format!("producer {id:?}: {what}"))?;
        }
        ensure(stream.snapshots.len() <= self.limits.max_snapshots_per_stream, || {
            format!("{} snapshots", stream.snapshots.len())
        })?;
        for (offset, snapshot) in &stream.snapshots {
            ensure(*offset == snapshot.offset, || {
                format!("snapshot keyed {offset} says {}", snapshot.offset)
            })?;
            ensure(stream.retained_offset <= *offset && *offset <= stream.next_offset, || {
                format!("snapshot at {offset} is outside the retained range")
            })?;
            ensure(*blake3::hash(&snapshot.payload).as_bytes() == snapshot.digest, || {
                format!("snapshot at {offset} does not match its digest")
            })?;
        }
        Ok(retained)
    }

    fn verify_producer(&self, stream: &StreamState, producer: &ProducerState) -> Check {
        ensure(producer.window.len() <= self.limits.producer_window, || {
            format!("window of {}", producer.window.len())
        })?;
        ensure(producer.last_used <= self.commit_index, || "last used after the commit index".into())?;
        if let Some(last) = producer.window.back() {
            ensure(last.seq == producer.last_seq, || "window does not end at the last seq".into())?;
            ensure(last.commit_index == producer.last_used, || "window end is not the last use".into())?;
        }
        let mut previous: Option<u64> = None;
        for entry in &producer.window {
            if let Some(previous) = previous {
                ensure(previous.checked_add(1) == Some(entry.seq), || {
                    "window seqs are not consecutive".into()
                })?;
            }
            previous = Some(entry.seq);
            ensure(entry.commit_index <= producer.last_used, || "outcome after the last use".into())?;
            let mut landed_any = false;
            for item in &entry.items {
                if let ItemOutcome::Landed(landed) = item {
                    landed_any = true;
                    ensure(
                        landed.start_offset <= landed.next_offset && landed.next_offset <= stream.next_offset,
                        || format!("outcome of seq {} lies beyond the tail", entry.seq),
                    )?;
                }
            }
            ensure(landed_any, || format!("outcome of seq {} landed nothing", entry.seq))?;
        }
        Ok(())
    }
}

/// The time runs cover exactly the hot records (see `times.rs`).
fn verify_times(stream: &StreamState) -> Check {
    let mut runs = stream.times.iter().peekable();
    let Some(&(first, _)) = runs.peek() else {
        return ensure(stream.records.is_empty(), || "hot records without times".into());
    };
    ensure(stream.records.front().map(|(start, _)| *start) == Some(*first), || {
        format!("the first time run starts at {first}, not at the first hot record")
    })?;
    let starts: BTreeSet<u64> = stream.records.iter().map(|(start, _)| *start).collect();
    let mut previous: Option<(u64, u64)> = None;
    for &(start, at_ms) in stream.times.iter() {
        ensure(starts.contains(&start), || format!("a time run starts at {start}, inside a record"))?;
        if let Some((before, before_ms)) = previous {
            ensure(start > before && at_ms > before_ms, || {
                format!("time runs ({before}, {before_ms}) and ({start}, {at_ms}) do not both increase")
            })?;
        }
        ensure(at_ms <= stream.last_at_ms, || {
            format!("a time run at {at_ms} ms is after the newest record's {} ms", stream.last_at_ms)
        })?;
        previous = Some((start, at_ms));
    }
    Ok(())
}

/// Consumer groups: valid names, generations from 1, committed offsets
/// within the stream, an owner on every lease not released.
fn verify_consumers(stream: &StreamState) -> Check {
    use crate::state::api::MAX_CONSUMER_NAME_LEN;
    use crate::state::group::consumer_state::ConsumerGroup;
    for (name, group) in stream.consumers.iter() {
        ensure(!name.is_empty() && name.len() <= MAX_CONSUMER_NAME_LEN, || {
            format!("consumer group name of {} bytes", name.len())
        })?;
        let lease = match group {
            ConsumerGroup::Lease(lease) => lease,
            ConsumerGroup::Queue(q) => {
                verify_queue(stream, name, q)?;
                continue;
            }
        };
        ensure(lease.generation >= 1, || format!("consumer group {name:?} at generation 0"))?;
        if let Some(owner) = &lease.owner {
            ensure(!owner.is_empty() && owner.len() <= MAX_CONSUMER_NAME_LEN, || {
                format!("owner name of {} bytes in consumer group {name:?}", owner.len())
            })?;
        }
        if let Some(committed) = lease.committed {
            ensure(committed <= stream.next_offset, || {
                format!("consumer group {name:?} committed {committed}, past the tail {}", stream.next_offset)
            })?;
        }
    }
    Ok(())
}

/// A queue group: its high-water mark within the stream, every message in
/// flight or dead below it and not overlapping the next, in one set only,
/// receipts unique and issued, a policy within bounds.
fn verify_queue(
    stream: &StreamState,
    name: &str,
    q: &crate::state::group::consumer_state::QueueState,
) -> Check {
    use crate::state::api::{MAX_QUEUE_ATTEMPTS, MAX_QUEUE_IN_FLIGHT};
    ensure(q.next <= stream.next_offset, || {
        format!("queue group {name:?} high-water mark {} past the tail {}", q.next, stream.next_offset)
    })?;
    ensure((1..=MAX_QUEUE_ATTEMPTS).contains(&q.max_attempts), || {
        format!("queue group {name:?} max_attempts {}", q.max_attempts)
    })?;
    ensure((1..=MAX_QUEUE_IN_FLIGHT).contains(&q.max_in_flight), || {
        format!("queue group {name:?} max_in_flight {}", q.max_in_flight)
    })?;
    let mut receipts = std::collections::BTreeSet::new();
    let mut end = 0;
    let mut all: Vec<(&u64, &crate::state::group::consumer_state::QueueMessage)> =
        q.in_flight.iter().chain(q.dead.iter()).collect();
    all.sort_by_key(|(o, _)| **o);
    for (offset, m) in all {
        ensure(*offset >= end && m.len > 0 && offset + m.len <= q.next, || {
            format!("queue group {name:?} message at {offset} (+{}) overlaps or passes {}", m.len, q.next)
        })?;
        end = offset + m.len;
        ensure(m.receipt <= q.last_receipt, || format!("queue group {name:?} receipt {} never issued", m.receipt))?;
        if m.receipt != 0 {
            ensure(receipts.insert(m.receipt), || format!("queue group {name:?} receipt {} twice", m.receipt))?;
        }
    }
    Ok(())
}

impl GroupState {
    /// Membership: valid names, no empty consumer group or bucket entry.
    fn verify_members(&self) -> Check {
        use crate::state::api::MAX_CONSUMER_NAME_LEN;
        let name_ok = |n: &String| !n.is_empty() && n.len() <= MAX_CONSUMER_NAME_LEN;
        for (bucket, groups) in self.members() {
            validate_name("bucket", bucket).map_err(|e| format!("membership bucket {bucket:?}: {e}"))?;
            ensure(!groups.is_empty(), || format!("membership bucket {bucket:?} without consumer groups"))?;
            for (group, members) in groups {
                ensure(name_ok(group), || format!("membership consumer group name of {} bytes", group.len()))?;
                ensure(!members.is_empty(), || format!("consumer group {group:?} without members"))?;
                ensure(members.keys().all(name_ok), || format!("a consumer name in {group:?} is out of bounds"))?;
            }
        }
        Ok(())
    }
}
