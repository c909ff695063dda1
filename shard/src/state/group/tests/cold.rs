//! The cold tier's bookkeeping (SPEC §3 "Hot and cold data", §4
//! `max_hot_bytes_per_group`): flush plans and commits, stale plans, pack
//! reference counts, the GC queue, bucket purge, compaction, retention over
//! cold chunks and hot-byte admission.
//!
//! [`Store`] plays the runtime's part at the state level: it "writes" every
//! planned pack into a map `file -> slice -> bytes`, builds the commit the
//! runtime would build, resolves read plans against that map and removes
//! files when the GC queue says so. A read that reaches a removed or
//! unknown file fails, so every read below also proves that no live file
//! was reclaimed.

use std::collections::BTreeMap;

use bytes::{Bytes, BytesMut};

use super::{sid, small_limits, Harness};
use crate::error::{Error, ErrorClass, ErrorCode, ErrorKind, Result};
use crate::state::api::{Append, AppendBatch, Create, PublishSnapshot, Read, ReadReply};
use crate::state::command::{Command, CompactCommit, FlushCommit, Op, PackCommit, Response, SliceCommit};
use crate::state::group::cold::pack_file_name;
use crate::state::group::{ColdPiece, CompactPlan, FlushLimits, GroupLimits, GroupState, PackPlan, Piece};
use crate::state::integrity::{record_digest, SetSum};
use crate::state::name::StreamId;

/// A flush without bounds.
const ALL: FlushLimits = FlushLimits { max_flush_bytes: u64::MAX, max_batch_bytes: u64::MAX };

/// The test limits with reads large enough to cover a whole test stream.
fn cold_limits() -> GroupLimits {
    GroupLimits { max_streams_per_group: 64, max_read_bytes: 1 << 20, ..small_limits() }
}

fn bid(bucket: &str, stream: &str) -> StreamId {
    StreamId::new(bucket, stream).unwrap()
}

/// Deterministic payload bytes.
fn payload(seed: u64, len: usize) -> Bytes {
    (0..len)
        .map(|k| (seed.wrapping_mul(31).wrapping_add(k as u64 * 7) % 251) as u8)
        .collect::<Vec<u8>>()
        .into()
}

/// Pack files as the runtime would have written them: file -> slice -> bytes.
#[derive(Default)]
struct Store {
    files: BTreeMap<String, BTreeMap<u32, Bytes>>,
}

impl Store {
    /// Writes one planned pack and returns the commit the runtime builds for
    /// it: per slice, its records' count and the set-sum of their digests.
    fn write(&mut self, plan: &PackPlan) -> PackCommit {
        let mut contents = BTreeMap::new();
        let mut slices = Vec::new();
        let mut bytes = 0u64;
        for (index, slice) in plan.slices.iter().enumerate() {
            assert_eq!(slice.stream.bucket(), plan.bucket, "a pack holds one bucket's slices");
            let mut data = BytesMut::new();
            let mut sum = SetSum::default();
            let mut at = slice.start;
            for (start, record) in &slice.records {
                assert_eq!(*start, at, "a slice holds contiguous whole records");
                assert!(!record.is_empty());
                sum.add_digest(record_digest(*start, record));
                data.extend_from_slice(record);
                at += record.len() as u64;
            }
            assert_eq!(at, slice.end, "a slice ends where its records end");
            bytes += data.len() as u64;
            contents.insert(index as u32, data.freeze());
            slices.push(SliceCommit {
                stream: slice.stream.clone(),
                incarnation: slice.incarnation,
                start: slice.start,
                end: slice.end,
                records: slice.records.len() as u64,
                sum,
            });
        }
        assert!(self.files.insert(plan.file.clone(), contents).is_none(), "pack file {} reused", plan.file);
        PackCommit {
            pack_id: plan.pack_id,
            bucket: plan.bucket.clone(),
            file: plan.file.clone(),
            bytes,
            slices,
        }
    }

    fn write_all(&mut self, plans: &[PackPlan]) -> FlushCommit {
        FlushCommit { packs: plans.iter().map(|plan| self.write(plan)).collect() }
    }

    /// Writes a compaction's output: the inputs' bytes, in order, as slice 0.
    fn compact(&mut self, plan: &CompactPlan, grace_ms: u64) -> CompactCommit {
        let mut merged = BytesMut::new();
        for (_, slice, file) in &plan.inputs {
            merged.extend_from_slice(&self.files[file][slice]);
        }
        assert_eq!(merged.len() as u64, plan.end - plan.start);
        let bytes = merged.len() as u64;
        assert!(self.files.insert(plan.file.clone(), BTreeMap::from([(0, merged.freeze())])).is_none());
        let slice = SliceCommit {
            stream: plan.stream.clone(),
            incarnation: plan.incarnation,
            start: plan.start,
            end: plan.end,
            records: plan.records,
            sum: plan.sum,
        };
        CompactCommit {
            stream: plan.stream.clone(),
            incarnation: plan.incarnation,
            start: plan.start,
            end: plan.end,
            inputs: plan.inputs.iter().map(|(pack, slice, _)| (*pack, *slice)).collect(),
            output: PackCommit {
                pack_id: plan.pack_id,
                bucket: plan.stream.bucket().to_string(),
                file: plan.file.clone(),
                bytes,
                slices: vec![slice],
            },
            grace_ms,
        }
    }

    fn gc_now(&mut self, h: &mut Harness) -> Vec<String> {
        let now = h.now;
        self.run_gc(h, now)
    }

    /// Resolves one cold piece; a missing file or slice is `Corrupted`.
    fn fetch(&self, piece: &ColdPiece) -> Result<Bytes> {
        let slice = self
            .files
            .get(&piece.file)
            .and_then(|slices| slices.get(&piece.slice))
            .ok_or_else(|| Error::corrupted(format!("no {} slice {}", piece.file, piece.slice)))?;
        let (from, to) = (piece.from as usize, (piece.from + piece.len) as usize);
        if to > slice.len() {
            return Err(Error::corrupted("piece beyond its slice"));
        }
        Ok(slice.slice(from..to))
    }

    /// The reclamation worker at `now`: removes due files, acks their seqs.
    fn run_gc(&mut self, h: &mut Harness, now: u64) -> Vec<String> {
        let due = h.g.gc_due(now);
        if due.is_empty() {
            return Vec::new();
        }
        for (_, file) in &due {
            self.files.remove(file);
        }
        let seqs = due.iter().map(|(seq, _)| *seq).collect();
        assert_eq!(h.ok(Op::GcAck { seqs }), Response::GcAcked { removed: due.len() as u64 });
        due.into_iter().map(|(_, file)| file).collect()
    }
}

/// Applies a flush commit: `(chunks, stale_slices)`.
fn commit_flush(h: &mut Harness, commit: FlushCommit) -> (u64, u64) {
    match h.ok(Op::FlushCommit(commit)) {
        Response::Flushed { chunks, stale_slices } => (chunks, stale_slices),
        other => panic!("not a flush reply: {other:?}"),
    }
}

/// Plans, writes and commits one flush, as the runtime does (checking the
/// plan's pack names first).
fn flush(h: &mut Harness, store: &mut Store, limits: &FlushLimits) -> Vec<PackPlan> {
    let plans = h.g.plan_flush(limits);
    check_names(&h.g, &plans);
    let slices: u64 = plans.iter().map(|p| p.slices.len() as u64).sum();
    let commit = store.write_all(&plans);
    assert_eq!(commit_flush(h, commit), (slices, 0), "a fresh plan is never stale");
    plans
}

fn compact(h: &mut Harness, commit: CompactCommit) -> bool {
    match h.ok(Op::CompactCommit(commit)) {
        Response::Compacted { replaced } => replaced,
        other => panic!("not a compaction reply: {other:?}"),
    }
}

fn read(h: &Harness, store: &Store, id: &StreamId, offset: u64, max_len: usize) -> Result<ReadReply> {
    h.g.read_plan(&Read::new(id.clone()).offset(offset).max_len(max_len), h.now)?.resolve(|p| store.fetch(p))
}

/// Every read from `from` to the tail, at every length, returns exactly
/// `expected[offset..]` clamped to the length.
fn check_every_read(h: &mut Harness, store: &Store, id: &StreamId, expected: &[u8], from: u64) {
    let tail = expected.len() as u64;
    assert_eq!(h.g.head(id, h.now).unwrap().tail_offset, tail);
    for offset in from..=tail {
        for len in 1..=(tail - offset).max(1) {
            let reply = read(h, store, id, offset, len as usize)
                .unwrap_or_else(|e| panic!("{id} read at {offset} len {len}: {e}"));
            let end = (offset + len).min(tail);
            assert_eq!(
                &reply.payload[..],
                &expected[offset as usize..end as usize],
                "{id} at {offset}+{len}"
            );
            assert_eq!((reply.offset, reply.next_offset, reply.up_to_date), (offset, end, end == tail));
        }
    }
}

fn publish(id: &StreamId, offset: u64) -> Op {
    Op::from(PublishSnapshot::new(id.clone(), offset, Bytes::from_static(b"state")))
}

fn retain(id: &StreamId, offset: u64) -> Op {
    Op::AdvanceRetention { id: id.clone(), offset }
}

/// The set-sum of `records`.
fn sum_of(records: &[(u64, Bytes)]) -> SetSum {
    let mut sum = SetSum::default();
    for (start, record) in records {
        sum.add_digest(record_digest(*start, record));
    }
    sum
}

fn gc_files(g: &GroupState) -> Vec<String> {
    g.cold().gc.values().map(|e| e.file.clone()).collect()
}

/// A model of one stream: its records, to compare reads and sums against.
#[derive(Default)]
struct Model {
    records: Vec<(u64, Bytes)>,
    bytes: Vec<u8>,
}

impl Model {
    fn append(&mut self, h: &mut Harness, id: &StreamId, record: Bytes) {
        let reply = h.append(Append::new(id.clone(), record.clone()));
        assert_eq!(reply.start_offset, self.bytes.len() as u64);
        self.records.push((reply.start_offset, record.clone()));
        self.bytes.extend_from_slice(&record);
    }
}

// SPEC §2 Read + §3: the bytes may come from cold segments, the hot buffer or
// both, and the caller cannot tell: after several flushes interleaved with
// appends, every read at every offset and length returns exactly what was
// appended, and flushing changes neither the tail nor the integrity sums.
#[test]
fn reads_across_cold_and_hot_return_the_appended_bytes() {
    let mut h = Harness::with_limits(cold_limits());
    let mut store = Store::default();
    let names = [sid("s"), sid("t")];
    let mut models: Vec<Model> = names.iter().map(|_| Model::default()).collect();
    for id in &names {
        h.create(Create::new(id.clone()));
    }
    let partial = FlushLimits { max_flush_bytes: 7, max_batch_bytes: 5 };
    for round in 0..6u64 {
        for (i, (id, model)) in names.iter().zip(&mut models).enumerate() {
            for k in 0..2u64 {
                let seed = round * 4 + i as u64 * 2 + k;
                model.append(&mut h, id, payload(seed, 1 + (seed % 4) as usize));
            }
        }
        match round {
            2 => {
                flush(&mut h, &mut store, &ALL);
            }
            5 => {}
            _ => {
                flush(&mut h, &mut store, &partial);
            }
        }
        for (id, model) in names.iter().zip(&models) {
            check_every_read(&mut h, &store, id, &model.bytes, 0);
            let head = h.g.head(id, h.now).unwrap();
            assert_eq!(head.integrity.live, sum_of(&model.records), "flushing keeps the live sum");
            assert_eq!(head.integrity.evicted, SetSum::default());
        }
    }
    let cold: u64 = h.g.cold_bytes();
    let total: u64 = models.iter().map(|m| m.bytes.len() as u64).sum();
    assert_eq!(h.g.hot_bytes() + cold, total, "every byte is either hot or cold, once");
    for (id, model) in names.iter().zip(&models) {
        let stream = h.g.stream(id).unwrap();
        assert!(stream.cold_chunks().len() >= 2, "{id} has several cold chunks");
        assert!(stream.records().len() >= 1, "{id} ends in hot records");
        let plan = h.g.read_plan(&Read::new(id.clone()).max_len(1 << 20), h.now).unwrap();
        assert!(plan.pieces.iter().any(|p| matches!(p, Piece::Cold(_))));
        assert!(plan.pieces.iter().any(|p| matches!(p, Piece::Hot(_))));
        assert_eq!(&plan.resolve(|p| store.fetch(p)).unwrap().payload[..], &model.bytes[..]);
    }
}

// SPEC §3 flush: a plan whose stream was deleted before the commit is stale;
// its pack file is queued for removal and nothing moves.
#[test]
fn stale_plan_stream_deleted() {
    let mut h = Harness::with_limits(cold_limits());
    let mut store = Store::default();
    h.create_plain("s");
    h.append_bytes("s", b"abcd");
    let plans = h.g.plan_flush(&ALL);
    let commit = store.write_all(&plans);
    h.ok(Op::Delete(sid("s")));
    assert_eq!(commit_flush(&mut h, commit), (0, 1));
    assert!(h.g.cold().packs.is_empty());
    assert_eq!(gc_files(&h.g), vec![plans[0].file.clone()]);
    assert_eq!(h.g.gc_due(h.now), vec![(0, plans[0].file.clone())]);
    assert_eq!(store.gc_now(&mut h), vec![plans[0].file.clone()]);
    assert!(store.files.is_empty(), "the orphan file is removed");
}

// SPEC §3 flush: deleted and re-created under the same name (or replaced
// after expiry) is a new stream; a plan made for the old one is stale even
// when the new one holds records at the same offsets with the same lengths.
#[test]
fn stale_plan_stream_recreated() {
    let mut h = Harness::with_limits(cold_limits());
    let mut store = Store::default();
    h.create_plain("s");
    h.append_bytes("s", b"old!");
    let plans = h.g.plan_flush(&ALL);
    let commit = store.write_all(&plans);
    h.ok(Op::Delete(sid("s")));
    h.create_plain("s");
    h.append_bytes("s", b"new!");
    let incarnation = h.g.stream(&sid("s")).unwrap().incarnation();
    assert_ne!(incarnation, plans[0].slices[0].incarnation, "a re-created stream is a new incarnation");
    assert_eq!(commit_flush(&mut h, commit), (0, 1));
    assert_eq!(gc_files(&h.g), vec![plans[0].file.clone()]);
    assert_eq!(h.g.hot_bytes(), 4);
    assert_eq!(&read(&h, &store, &sid("s"), 0, 10).unwrap().payload[..], b"new!");

    // The same through expiry: a create replacing an expired stream.
    h.create(Create::new(sid("e")).ttl_s(1));
    h.append_bytes("e", b"old!");
    let plans = h.g.plan_flush(&FlushLimits { max_flush_bytes: 4, max_batch_bytes: 4 });
    assert_eq!(plans[0].slices[0].stream, sid("e"));
    let commit = store.write_all(&plans);
    h.now += 5_000;
    h.create(Create::new(sid("e")).ttl_s(1));
    h.append_bytes("e", b"new!");
    assert_eq!(commit_flush(&mut h, commit), (0, 1));
    assert_eq!(&read(&h, &store, &sid("e"), 0, 10).unwrap().payload[..], b"new!");
    assert_eq!(h.g.gc_due(h.now).len(), 2);
    store.gc_now(&mut h);
    check_every_read(&mut h, &store, &sid("s"), b"new!", 0);
}

// SPEC §3 flush: retention that dropped the planned records (trimmed) makes
// the plan stale; the retained records stay hot and readable.
#[test]
fn stale_plan_retention_advanced() {
    let mut h = Harness::with_limits(cold_limits());
    let mut store = Store::default();
    h.create_plain("s");
    h.append_bytes("s", b"abc");
    h.append_bytes("s", b"def");
    h.append_bytes("s", b"gh");
    let plans = h.g.plan_flush(&ALL);
    assert_eq!((plans[0].slices[0].start, plans[0].slices[0].end), (0, 8));
    let commit = store.write_all(&plans);
    h.ok(publish(&sid("s"), 3));
    h.ok(retain(&sid("s"), 3));
    let integrity = h.g.head(&sid("s"), h.now).unwrap().integrity;
    assert_eq!(commit_flush(&mut h, commit), (0, 1));
    assert_eq!(gc_files(&h.g), vec![plans[0].file.clone()]);
    assert_eq!(h.g.hot_bytes(), 5);
    assert_eq!(h.g.head(&sid("s"), h.now).unwrap().integrity, integrity);
    assert_eq!(&read(&h, &store, &sid("s"), 3, 10).unwrap().payload[..], b"defgh");
    // A fresh plan after the trim holds.
    store.gc_now(&mut h);
    flush(&mut h, &mut store, &ALL);
    check_every_read(&mut h, &store, &sid("s"), b"abcdefgh", 3);
}

// SPEC §3 flush: a range already flushed by an earlier commit is stale.
// Committing the same plan twice moves nothing the second time (hot and cold
// bytes, integrity and packs unchanged, and the live file is not queued for
// removal); a later, overlapping plan committed after the first is stale and
// its own file is queued.
#[test]
fn stale_plan_range_already_flushed() {
    let mut h = Harness::with_limits(cold_limits());
    let mut store = Store::default();
    h.create_plain("s");
    h.append_bytes("s", b"abc");
    h.append_bytes("s", b"de");
    let first = h.g.plan_flush(&ALL);
    let commit = store.write_all(&first);
    assert_eq!(commit_flush(&mut h, commit.clone()), (1, 0));
    let (hot, cold, cold_state) = (h.g.hot_bytes(), h.g.cold_bytes(), h.g.cold().clone());
    let integrity = h.g.head(&sid("s"), h.now).unwrap().integrity;
    assert_eq!((hot, cold), (0, 5));
    assert_eq!(commit_flush(&mut h, commit), (0, 1));
    assert_eq!((h.g.hot_bytes(), h.g.cold_bytes()), (hot, cold));
    assert_eq!(h.g.head(&sid("s"), h.now).unwrap().integrity, integrity);
    assert_eq!(h.g.cold(), &cold_state, "no double count, and the live file is not reclaimed");
    assert_eq!(h.g.stream(&sid("s")).unwrap().cold_chunks().len(), 1);

    // Two plans over the same hot range, the second made later.
    h.append_bytes("s", b"fgh");
    let a = h.g.plan_flush(&ALL);
    let a_commit = store.write_all(&a);
    h.append_bytes("s", b"ij");
    let b = h.g.plan_flush(&ALL);
    assert_ne!(a[0].file, b[0].file);
    let b_commit = store.write_all(&b);
    assert_eq!(commit_flush(&mut h, a_commit), (1, 0));
    assert_eq!(commit_flush(&mut h, b_commit), (0, 1));
    assert_eq!(gc_files(&h.g), vec![b[0].file.clone()]);
    assert_eq!(store.gc_now(&mut h), vec![b[0].file.clone()]);
    check_every_read(&mut h, &store, &sid("s"), b"abcdefghij", 0);
}

// SPEC §3 flush + packs: staleness is per slice: a pack whose other slice
// still holds is kept with one live slice and is not queued.
#[test]
fn stale_plan_partially() {
    let mut h = Harness::with_limits(cold_limits());
    let mut store = Store::default();
    h.create_plain("s");
    h.create_plain("t");
    h.append_bytes("s", b"sss");
    h.append_bytes("t", b"tttt");
    let plans = h.g.plan_flush(&ALL);
    assert_eq!(plans.len(), 1);
    assert_eq!(plans[0].slices.len(), 2);
    let commit = store.write_all(&plans);
    h.ok(Op::Delete(sid("t")));
    assert_eq!(commit_flush(&mut h, commit), (1, 1));
    assert_eq!(h.g.cold().packs[&plans[0].pack_id].live_slices, 1);
    assert!(h.g.cold().gc.is_empty());
    assert_eq!((h.g.hot_bytes(), h.g.cold_bytes()), (0, 3));
    check_every_read(&mut h, &store, &sid("s"), b"sss", 0);
    h.ok(Op::Delete(sid("s")));
    assert_eq!(gc_files(&h.g), vec![plans[0].file.clone()]);
}

// SPEC §3 GC: a pack shared by two streams is removed only when its last
// live slice is released; the queue is committed, `gc_due` lists it, and the
// worker's ack removes it; acks of unknown seqs change nothing.
#[test]
fn pack_reference_counts_and_gc_acks() {
    let mut h = Harness::with_limits(cold_limits());
    let mut store = Store::default();
    h.create_plain("s");
    h.create_plain("t");
    h.append_bytes("s", b"sss");
    h.append_bytes("t", b"tt");
    let plans = flush(&mut h, &mut store, &ALL);
    assert_eq!(plans.len(), 1);
    let (pack, file) = (plans[0].pack_id, plans[0].file.clone());
    assert_eq!(h.g.cold().packs[&pack].live_slices, 2);
    assert_eq!(h.g.referenced_files(), vec![file.clone()]);

    h.ok(Op::Delete(sid("s")));
    assert_eq!(h.g.cold().packs[&pack].live_slices, 1);
    assert!(h.g.cold().gc.is_empty() && h.g.gc_due(u64::MAX).is_empty());
    check_every_read(&mut h, &store, &sid("t"), b"tt", 0);

    h.ok(Op::Delete(sid("t")));
    assert!(h.g.cold().packs.is_empty());
    assert_eq!(h.g.cold().gc.len(), 1);
    let (seq, entry) = h.g.cold().gc.iter().next().map(|(s, e)| (*s, e.clone())).unwrap();
    assert_eq!((entry.file.as_str(), entry.bucket.as_str()), (file.as_str(), "b"));
    assert_eq!(h.g.gc_due(h.now), vec![(seq, file.clone())]);
    assert_eq!(h.g.pending_gc("b"), 1);
    assert_eq!(h.g.referenced_files(), vec![file.clone()]);

    assert_eq!(h.ok(Op::GcAck { seqs: vec![seq] }), Response::GcAcked { removed: 1 });
    assert!(h.g.cold().gc.is_empty() && h.g.referenced_files().is_empty());
    for seqs in [vec![seq], vec![seq + 1, 99], vec![]] {
        let again = h.apply(Op::GcAck { seqs });
        assert!(!again.mutated, "acks of unknown seqs are not mutations");
        assert_eq!(again.result.unwrap(), Response::GcAcked { removed: 0 });
    }
}

// SPEC §3 Packs: only streams of the same bucket share a pack.
#[test]
fn buckets_flush_into_separate_packs() {
    let mut h = Harness::with_limits(cold_limits());
    let mut store = Store::default();
    let (x, y, z) = (bid("b1", "x"), bid("b1", "y"), bid("b2", "x"));
    for id in [&x, &y, &z] {
        h.create(Create::new(id.clone()));
        h.append(Append::new(id.clone(), format!("{id}").into_bytes()));
    }
    let plans = flush(&mut h, &mut store, &ALL);
    assert_eq!(plans.len(), 2);
    assert_eq!(plans.iter().map(|p| p.bucket.as_str()).collect::<Vec<_>>(), vec!["b1", "b2"]);
    assert_ne!(plans[0].pack_id, plans[1].pack_id);
    assert_ne!(plans[0].file, plans[1].file);
    assert_eq!(plans[0].slices.len(), 2);
    for (pack, info) in &h.g.cold().packs {
        for stream in h.g.streams() {
            for chunk in stream.cold_chunks().filter(|c| c.pack == *pack) {
                assert_eq!(stream.id().bucket(), info.bucket, "chunk at {} of {}", chunk.start, stream.id());
            }
        }
    }
    for id in [&x, &y, &z] {
        check_every_read(&mut h, &store, id, format!("{id}").as_bytes(), 0);
    }
    // Deleting every stream of one bucket reclaims its pack alone.
    h.ok(Op::Delete(x.clone()));
    h.ok(Op::Delete(y.clone()));
    assert_eq!(gc_files(&h.g), vec![plans[0].file.clone()]);
    assert_eq!(h.g.cold().packs.values().map(|p| p.bucket.as_str()).collect::<Vec<_>>(), vec!["b2"]);
}

fn planned_bytes(plans: &[PackPlan]) -> Vec<u64> {
    plans.iter().map(|p| p.slices.iter().map(|s| s.end - s.start).sum()).collect()
}

fn check_names(g: &GroupState, plans: &[PackPlan]) {
    let mut ids: Vec<u64> = plans.iter().map(|p| p.pack_id).collect();
    ids.sort_unstable();
    ids.dedup();
    assert_eq!(ids.len(), plans.len(), "pack ids within a plan are unique");
    for plan in plans {
        assert_eq!(plan.file, pack_file_name(g.group(), plan.pack_id));
        assert!(!g.cold().packs.contains_key(&plan.pack_id), "a planned pack never names a live one");
    }
}

// SPEC §3 flush: a plan takes whole records from the front of the hot data,
// at most max_batch_bytes per pack and max_flush_bytes in all; a record
// larger than the bounds still leaves the hot tier (alone).
#[test]
fn flush_plan_bounds() {
    let mut h = Harness::with_limits(cold_limits());
    let mut store = Store::default();
    let mut models: Vec<(StreamId, Model)> = Vec::new();
    for name in ["s", "t", "u"] {
        h.create_plain(name);
        let mut model = Model::default();
        for k in 0..2 {
            model.append(&mut h, &sid(name), payload(k, 5));
        }
        models.push((sid(name), model));
    }
    // max_batch_bytes splits one bucket's slices over several packs.
    let split = FlushLimits { max_flush_bytes: u64::MAX, max_batch_bytes: 12 };
    let plans = h.g.plan_flush(&split);
    check_names(&h.g, &plans);
    assert!(plans.len() >= 2);
    assert!(plans.iter().all(|p| p.bucket == "b"));
    assert!(planned_bytes(&plans).iter().all(|b| *b <= 12 && *b > 0), "{:?}", planned_bytes(&plans));
    assert_eq!(planned_bytes(&plans).iter().sum::<u64>(), 30, "nothing is left behind");

    // max_flush_bytes bounds the whole plan.
    let bounded = FlushLimits { max_flush_bytes: 12, max_batch_bytes: 100 };
    let plans = h.g.plan_flush(&bounded);
    check_names(&h.g, &plans);
    let total: u64 = planned_bytes(&plans).iter().sum();
    assert!(total > 0 && total <= 12, "{total}");
    let commit = store.write_all(&plans);
    commit_flush(&mut h, commit);
    assert_eq!(h.g.hot_bytes(), 30 - total);
    assert!(flush(&mut h, &mut store, &split).len() >= 2);
    assert_eq!(h.g.hot_bytes(), 0);

    // An oversized record is flushed alone.
    h.create_plain("big");
    let mut big = Model::default();
    big.append(&mut h, &sid("big"), payload(9, 50));
    big.append(&mut h, &sid("big"), payload(10, 3));
    let tiny = FlushLimits { max_flush_bytes: 10, max_batch_bytes: 10 };
    let plans = flush(&mut h, &mut store, &tiny);
    assert_eq!(plans.len(), 1);
    assert_eq!(plans[0].slices.len(), 1);
    assert_eq!((plans[0].slices[0].start, plans[0].slices[0].end), (0, 50));
    assert_eq!(plans[0].slices[0].records.len(), 1);
    assert_eq!(h.g.hot_bytes(), 3);
    flush(&mut h, &mut store, &tiny);
    assert_eq!(h.g.hot_bytes(), 0);
    models.push((sid("big"), big));
    for (id, model) in &models {
        check_every_read(&mut h, &store, id, &model.bytes, 0);
    }
}

// SPEC §2 retention + §3 GC: retention past whole cold chunks drops them
// (their sums move from live to evicted, the total is unchanged), releases
// their slices (a pack is queued when its last one goes), and reads below
// the retained offset are OffsetGone.
#[test]
fn retention_across_cold_chunks() {
    let mut h = Harness::with_limits(cold_limits());
    let mut store = Store::default();
    let (s, t) = (sid("s"), sid("t"));
    h.create(Create::new(s.clone()));
    h.create(Create::new(t.clone()));
    let (mut ms, mut mt) = (Model::default(), Model::default());
    ms.append(&mut h, &s, Bytes::from_static(b"aaaa"));
    mt.append(&mut h, &t, Bytes::from_static(b"TTT"));
    let shared = flush(&mut h, &mut store, &ALL);
    assert_eq!(shared[0].slices.len(), 2);
    ms.append(&mut h, &s, Bytes::from_static(b"bbbb"));
    let own = flush(&mut h, &mut store, &ALL);
    ms.append(&mut h, &s, Bytes::from_static(b"cccc"));
    let third = flush(&mut h, &mut store, &ALL);
    ms.append(&mut h, &s, Bytes::from_static(b"dd"));
    assert_eq!(h.g.stream(&s).unwrap().cold_chunks().len(), 3);

    let before = h.g.head(&s, h.now).unwrap().integrity;
    h.ok(publish(&s, 10));
    h.ok(retain(&s, 10));
    let head = h.g.head(&s, h.now).unwrap();
    assert_eq!(head.retained_offset, 10);
    assert_eq!(head.integrity.total(), before.total());
    assert_eq!(head.integrity.evicted, sum_of(&ms.records[..2]));
    assert_eq!(head.integrity.live, sum_of(&ms.records[2..]));
    let chunks: Vec<u64> = h.g.stream(&s).unwrap().cold_chunks().map(|c| c.start).collect();
    assert_eq!(chunks, vec![8], "the straddling chunk [8, 12) stays");
    // The shared pack keeps t's slice; s's own pack is queued.
    assert_eq!(h.g.cold().packs[&shared[0].pack_id].live_slices, 1);
    assert_eq!(gc_files(&h.g), vec![own[0].file.clone()]);
    assert_eq!(h.g.hot_bytes(), 2);
    for offset in [0, 4, 9] {
        let err = read(&h, &store, &s, offset, 4).unwrap_err();
        assert_eq!(*err.kind(), ErrorKind::OffsetGone { offset, retained: 10 });
    }
    store.gc_now(&mut h);
    check_every_read(&mut h, &store, &s, &ms.bytes, 10);
    check_every_read(&mut h, &store, &t, &mt.bytes, 0);

    // Retention to the tail drops the last chunk and the hot record.
    h.ok(publish(&s, 14));
    h.ok(retain(&s, 14));
    assert_eq!(h.g.stream(&s).unwrap().cold_chunks().len(), 0);
    assert_eq!(gc_files(&h.g), vec![third[0].file.clone()]);
    let head = h.g.head(&s, h.now).unwrap();
    assert_eq!(head.integrity.live, SetSum::default());
    assert_eq!(head.integrity.evicted, sum_of(&ms.records));
    assert_eq!(h.g.hot_bytes(), 0);
    assert!(read(&h, &store, &s, 14, 4).unwrap().up_to_date);
}

// SPEC §3 purge_bucket: removes every stream of the bucket and the bucket,
// queues its packs, and reports streams removed and GC entries pending;
// once GC ran, a second purge reports zero (the erasure proof) and changes
// nothing. Other buckets are untouched.
#[test]
fn purge_bucket_and_erasure_proof() {
    let mut h = Harness::with_limits(cold_limits());
    let mut store = Store::default();
    let (s, t, x) = (bid("b", "s"), bid("b", "t"), bid("c", "x"));
    let mut mx = Model::default();
    for id in [&s, &t, &x] {
        h.create(Create::new(id.clone()));
    }
    h.append(Append::new(s.clone(), &b"s1"[..]));
    h.append(Append::new(t.clone(), &b"t1"[..]));
    mx.append(&mut h, &x, Bytes::from_static(b"x1"));
    flush(&mut h, &mut store, &ALL);
    h.append(Append::new(s.clone(), &b"s2"[..]));
    mx.append(&mut h, &x, Bytes::from_static(b"x2"));
    flush(&mut h, &mut store, &ALL);
    h.append(Append::new(s.clone(), &b"s3"[..]));
    mx.append(&mut h, &x, Bytes::from_static(b"x3"));
    let b_packs: Vec<String> =
        h.g.cold().packs.values().filter(|p| p.bucket == "b").map(|p| p.file.clone()).collect();
    assert_eq!(b_packs.len(), 2);
    let c_packs = h.g.cold().packs.values().filter(|p| p.bucket == "c").count();

    let purged = h.apply(Op::PurgeBucket { bucket: "b".into() });
    assert!(purged.mutated);
    assert_eq!(purged.result.unwrap(), Response::Purged { removed_streams: 2, pending_gc_entries: 2 });
    assert_eq!(h.effects.len(), 2);
    for id in [&s, &t] {
        assert_eq!(h.g.head(id, h.now).unwrap_err().code(), ErrorCode::BucketNotFound);
        assert_eq!(read(&h, &store, id, 0, 1).unwrap_err().code(), ErrorCode::BucketNotFound);
    }
    assert_eq!(h.g.buckets().collect::<Vec<_>>(), vec!["c"]);
    let mut queued = gc_files(&h.g);
    queued.sort();
    assert_eq!(queued, b_packs);
    assert_eq!(h.g.hot_bytes(), 2, "only c's hot record is left");

    // Before GC ran, a repeated purge reports the pending entries.
    let again = h.apply(Op::PurgeBucket { bucket: "b".into() });
    assert!(!again.mutated);
    assert_eq!(again.result.unwrap(), Response::Purged { removed_streams: 0, pending_gc_entries: 2 });
    store.gc_now(&mut h);
    let proof = h.apply(Op::PurgeBucket { bucket: "b".into() });
    assert!(!proof.mutated);
    assert_eq!(proof.result.unwrap(), Response::Purged { removed_streams: 0, pending_gc_entries: 0 });
    assert!(store.files.keys().all(|f| !b_packs.contains(f)), "every byte of the bucket is gone");

    assert_eq!(h.g.cold().packs.len(), c_packs);
    check_every_read(&mut h, &store, &x, &mx.bytes, 0);
    // The name can be used again, from scratch.
    h.create(Create::new(s.clone()));
    assert_eq!(h.g.head(&s, h.now).unwrap().tail_offset, 0);
}

/// A stream "s" with `n` flushed chunks of 3 bytes each, plus a hot record.
fn small_chunks(n: u64) -> (Harness, Store, Model) {
    let mut h = Harness::with_limits(cold_limits());
    let mut store = Store::default();
    let mut model = Model::default();
    h.create_plain("s");
    for k in 0..n {
        model.append(&mut h, &sid("s"), payload(k, 3));
        flush(&mut h, &mut store, &ALL);
    }
    model.append(&mut h, &sid("s"), payload(99, 2));
    (h, store, model)
}

// SPEC §3 compaction: a run of small adjacent chunks becomes one; reads see
// the same bytes throughout; the inputs are reclaimed only after the grace
// period.
#[test]
fn compaction_merges_a_run_and_reclaims_after_grace() {
    let (mut h, mut store, model) = small_chunks(4);
    let s = sid("s");
    let before: Vec<_> = h.g.stream(&s).unwrap().cold_chunks().cloned().collect();
    assert_eq!(before.len(), 4);
    let plans = h.g.plan_compaction(10, 100);
    assert_eq!(plans.len(), 1);
    let plan = &plans[0];
    assert_eq!((plan.start, plan.end, plan.inputs.len(), plan.records), (0, 12, 4, 4));
    assert_eq!(plan.file, pack_file_name(h.g.group(), plan.pack_id));
    assert!(!h.g.cold().packs.contains_key(&plan.pack_id));
    assert!(h.g.plan_compaction(10, 5).is_empty(), "no run of two fits in 5 bytes");
    assert!(h.g.plan_compaction(3, 100).is_empty(), "no chunk is smaller than 3 bytes");

    let commit = store.compact(plan, 5_000);
    let input_files: Vec<String> = plan.inputs.iter().map(|(_, _, f)| f.clone()).collect();
    let integrity = h.g.head(&s, h.now).unwrap().integrity;
    assert!(compact(&mut h, commit.clone()));
    let after: Vec<_> = h.g.stream(&s).unwrap().cold_chunks().cloned().collect();
    assert_eq!(after.len(), 1);
    assert_eq!((after[0].start, after[0].len, after[0].records), (0, 12, 4));
    assert_eq!(after[0].sum, before.iter().fold(SetSum::default(), |s, c| s.combined(c.sum)));
    assert_eq!(h.g.head(&s, h.now).unwrap().integrity, integrity);
    check_every_read(&mut h, &store, &s, &model.bytes, 0);

    let due_at = h.now + 5_000;
    assert!(h.g.cold().gc.values().all(|e| e.not_before_ms == due_at));
    assert_eq!(gc_files(&h.g), input_files);
    assert!(h.g.gc_due(due_at - 1).is_empty(), "inputs are kept through the grace period");
    assert_eq!(h.g.gc_due(due_at).len(), 4);
    assert!(store.run_gc(&mut h, due_at - 1).is_empty());
    check_every_read(&mut h, &store, &s, &model.bytes, 0);

    // The same commit again changes nothing and never reclaims the output.
    let again = h.apply(Op::CompactCommit(commit));
    assert!(!again.mutated);
    assert_eq!(again.result.unwrap(), Response::Compacted { replaced: false });
    assert_eq!(h.g.stream(&s).unwrap().cold_chunks().cloned().collect::<Vec<_>>(), after);
    assert!(!gc_files(&h.g).contains(&plan.file), "the live output is not queued");
    let mut removed = store.run_gc(&mut h, u64::MAX);
    removed.sort();
    let mut expected = input_files.clone();
    expected.sort();
    assert_eq!(removed, expected, "only the inputs are reclaimed");
    check_every_read(&mut h, &store, &s, &model.bytes, 0);
    assert!(h.g.plan_compaction(100, 100).is_empty(), "one chunk is no run");
}

// SPEC §3 compaction: a compaction whose stream changed meanwhile (trimmed,
// deleted, re-created) is not applied and its output file is queued; one
// whose run is unchanged still applies after an unrelated later flush.
#[test]
fn stale_compaction_is_not_applied() {
    // Trimmed: retention dropped the run's first chunk.
    let (mut h, mut store, model) = small_chunks(3);
    let s = sid("s");
    let plan = h.g.plan_compaction(10, 100).remove(0);
    let commit = store.compact(&plan, 5_000);
    h.ok(publish(&s, 3));
    h.ok(retain(&s, 3));
    let chunks: Vec<_> = h.g.stream(&s).unwrap().cold_chunks().cloned().collect();
    let queued = h.g.cold().gc.len();
    assert!(!compact(&mut h, commit));
    assert_eq!(h.g.stream(&s).unwrap().cold_chunks().cloned().collect::<Vec<_>>(), chunks);
    assert_eq!(h.g.cold().gc.len(), queued + 1);
    assert_eq!(gc_files(&h.g).last(), Some(&plan.file));
    assert!(h.g.gc_due(h.now).iter().any(|(_, f)| *f == plan.file), "the orphan has no grace");
    store.gc_now(&mut h);
    check_every_read(&mut h, &store, &s, &model.bytes, 3);

    // Deleted and re-created with the same layout of chunks.
    let (mut h, mut store, _) = small_chunks(3);
    let plan = h.g.plan_compaction(10, 100).remove(0);
    let commit = store.compact(&plan, 5_000);
    h.ok(Op::Delete(s.clone()));
    h.create_plain("s");
    let mut fresh = Model::default();
    for k in 0..3 {
        fresh.append(&mut h, &s, payload(50 + k, 3));
        flush(&mut h, &mut store, &ALL);
    }
    assert!(!compact(&mut h, commit));
    assert_eq!(h.g.stream(&s).unwrap().cold_chunks().len(), 3);
    store.gc_now(&mut h);
    check_every_read(&mut h, &store, &s, &fresh.bytes, 0);

    // Unrelated change after the run: still applies.
    let (mut h, mut store, mut model) = small_chunks(3);
    let plan = h.g.plan_compaction(10, 100).remove(0);
    let commit = store.compact(&plan, 0);
    model.append(&mut h, &s, payload(7, 4));
    flush(&mut h, &mut store, &ALL);
    assert!(compact(&mut h, commit));
    assert_eq!(h.g.stream(&s).unwrap().cold_chunks().len(), 2);
    store.gc_now(&mut h);
    check_every_read(&mut h, &store, &s, &model.bytes, 0);
}

// SPEC §4 max_hot_bytes_per_group: an append that would exceed it is
// ColdBackpressure { before, after, limit } (temporary) and changes nothing;
// a batch is rejected whole; duplicate producer retries and idempotent
// re-creates pass; after a flush the append lands.
#[test]
fn hot_bytes_admission() {
    let mut h = Harness::with_limits(GroupLimits { max_hot_bytes: 10, ..cold_limits() });
    let mut store = Store::default();
    let s = sid("s");
    h.create(Create::new(s.clone()).initial_payload(&b"abcd"[..]));
    let first = h.append(Append::new(s.clone(), &b"efghij"[..]).producer("p", 1, 0));
    assert_eq!(h.g.hot_bytes(), 10, "exactly at the limit is admitted");

    let err = h.apply(Op::from(Append::new(s.clone(), &b"k"[..]))).result.unwrap_err();
    assert_eq!(*err.kind(), ErrorKind::ColdBackpressure { before: 10, after: 11, limit: 10 });
    assert_eq!(err.class(), ErrorClass::Temporary);
    let batch = AppendBatch::new(s.clone(), vec![Bytes::from_static(b"k"), Bytes::new()]);
    let err = h.apply(Op::from(batch)).result.unwrap_err();
    assert_eq!(*err.kind(), ErrorKind::ColdBackpressure { before: 10, after: 11, limit: 10 });
    let err = h.apply(Op::from(Create::new(sid("n")).initial_payload(&b"x"[..]))).result.unwrap_err();
    assert_eq!(err.code(), ErrorCode::ColdBackpressure);
    assert_eq!(h.g.head(&s, h.now).unwrap().append_count, 2, "nothing was counted");

    // Retries and idempotent re-creates add no bytes and pass.
    let retry = h.apply(Op::from(Append::new(s.clone(), &b"efghij"[..]).producer("p", 1, 0)));
    assert!(!retry.mutated);
    let Ok(Response::Append(retry)) = retry.result else { panic!("retry rejected") };
    assert!(retry.deduplicated);
    assert_eq!((retry.start_offset, retry.next_offset), (first.start_offset, first.next_offset));
    let again = h.create(Create::new(s.clone()).initial_payload(&b"abcd"[..]));
    assert!(again.already_exists);
    h.create_plain("empty");

    flush(&mut h, &mut store, &ALL);
    assert_eq!(h.g.hot_bytes(), 0);
    h.append(Append::new(s.clone(), &b"k"[..]));
    let items = vec![Bytes::from_static(b"lmnopqrst")];
    assert!(h.apply(Op::from(AppendBatch::new(s.clone(), items))).result.is_ok());
    assert_eq!(h.g.hot_bytes(), 10);
    let cold = h.g.cold_bytes();
    assert_eq!(cold, 10, "flushed bytes do not count as hot");
    check_every_read(&mut h, &store, &s, b"abcdefghijklmnopqrst", 0);
}

/// A group with packs, chunks (one compacted), hot records and GC entries
/// (one waiting out a grace period).
fn cold_group() -> (Harness, Store, Model) {
    let (mut h, mut store, model) = small_chunks(4);
    let plan = h.g.plan_compaction(7, 100).remove(0);
    let commit = store.compact(&plan, 60_000);
    assert!(compact(&mut h, commit));
    h.create_plain("t");
    h.append_bytes("t", b"tttt");
    h.create(Create::new(bid("c", "x")));
    h.append(Append::new(bid("c", "x"), &b"xx"[..]));
    flush(&mut h, &mut store, &ALL);
    h.ok(Op::Delete(bid("c", "x")));
    h.append_bytes("t", b"hot");
    (h, store, model)
}

// SPEC §7: a group snapshot captures cold references and the GC queue too;
// it decodes to an equal state and re-encodes to the same bytes.
#[test]
fn snapshot_round_trip_with_cold_state() {
    let (h, store, model) = cold_group();
    assert!(!h.g.cold().packs.is_empty());
    assert!(h.g.cold().gc.values().any(|e| e.not_before_ms > h.now));
    assert!(h.g.cold().gc.values().any(|e| e.bucket == "c"));
    assert!(h.g.stream(&sid("s")).unwrap().cold_chunks().len() >= 2);
    let bytes = h.g.encode_snapshot();
    let decoded = GroupState::decode_snapshot(&bytes, cold_limits()).unwrap();
    decoded.check_invariants();
    assert_eq!(decoded, h.g);
    assert_eq!(decoded.encode_snapshot(), bytes);
    assert_eq!(decoded.hot_bytes(), h.g.hot_bytes());
    assert_eq!(decoded.gc_due(h.now), h.g.gc_due(h.now));
    let mut restored = Harness { g: decoded, now: h.now, effects: Vec::new() };
    check_every_read(&mut restored, &store, &sid("s"), &model.bytes, 0);
    check_every_read(&mut restored, &store, &sid("t"), b"tttthot", 0);
}

// SPEC §4 + §6: limits admit commands when they are first applied; a log
// replayed under `for_replay()` applies in full even when the configured
// max_hot_bytes is now smaller than what the log holds.
#[test]
fn replay_ignores_the_hot_byte_limit() {
    let mut h = Harness::with_limits(cold_limits());
    let mut store = Store::default();
    let mut log: Vec<Command> = Vec::new();
    let mut run = |h: &mut Harness, op: Op| {
        let cmd = Command { now_ms: h.now, op };
        let mut effects = Vec::new();
        let applied = h.g.apply(&cmd, &mut effects);
        h.g.check_invariants();
        assert!(applied.result.is_ok() && applied.mutated, "{:?}", applied.result);
        log.push(cmd);
    };
    run(&mut h, Op::from(Create::new(sid("s")).initial_payload(payload(1, 20))));
    run(&mut h, Op::from(Append::new(sid("s"), payload(2, 20))));
    let plans = h.g.plan_flush(&FlushLimits { max_flush_bytes: 20, max_batch_bytes: 20 });
    run(&mut h, Op::FlushCommit(store.write_all(&plans)));
    run(&mut h, Op::from(AppendBatch::new(sid("s"), vec![payload(3, 15), payload(4, 15)])));
    assert_eq!(h.g.hot_bytes(), 50);

    let small = GroupLimits { max_hot_bytes: 16, ..cold_limits() };
    let mut strict = GroupState::new(0, 1, small.clone());
    let mut refused = false;
    for cmd in &log {
        refused |= strict.apply(cmd, &mut Vec::new()).result.is_err();
        strict.check_invariants();
    }
    assert!(refused, "the small limit alone would refuse this log");

    let mut replayed = GroupState::new(0, 1, small.for_replay());
    for cmd in &log {
        let applied = replayed.apply(cmd, &mut Vec::new());
        replayed.check_invariants();
        assert!(applied.result.is_ok() && applied.mutated, "{:?}", applied.result);
    }
    assert_eq!(replayed.encode_snapshot(), h.g.encode_snapshot());
    replayed.set_limits(small);
    let mut h = Harness { g: replayed, now: h.now, effects: Vec::new() };
    let err = h.apply(Op::from(Append::new(sid("s"), &b"x"[..]))).result.unwrap_err();
    assert_eq!(*err.kind(), ErrorKind::ColdBackpressure { before: 50, after: 51, limit: 16 });
    let mut expected = Vec::new();
    for seed in 1..=4 {
        expected.extend_from_slice(&payload(seed, if seed <= 2 { 20 } else { 15 }));
    }
    check_every_read(&mut h, &store, &sid("s"), &expected, 0);
}

// SPEC §3 Flush: a stream holding more hot bytes than one pack continues
// in the next packs of the same flush, slice after slice, so one hot stream
// drains as fast as many small ones; committing the plan moves it all.
#[test]
fn one_stream_larger_than_a_pack_spans_several_packs() {
    let mut h = Harness::with_limits(cold_limits());
    let mut store = Store::default();
    h.create_plain("big");
    let mut model = Model::default();
    for k in 0..10 {
        model.append(&mut h, &sid("big"), payload(k, 4));
    }
    let limits = FlushLimits { max_flush_bytes: u64::MAX, max_batch_bytes: 10 };
    let plans = h.g.plan_flush(&limits);
    check_names(&h.g, &plans);
    assert_eq!(planned_bytes(&plans), vec![8, 8, 8, 8, 8]);
    let slices: Vec<(u64, u64)> =
        plans.iter().flat_map(|p| p.slices.iter().map(|s| (s.start, s.end))).collect();
    assert_eq!(slices, vec![(0, 8), (8, 16), (16, 24), (24, 32), (32, 40)], "consecutive, never repeated");
    let commit = store.write_all(&plans);
    let (chunks, stale) = commit_flush(&mut h, commit);
    assert_eq!((chunks, stale), (5, 0));
    assert_eq!(h.g.hot_bytes(), 0);
    check_every_read(&mut h, &store, &sid("big"), &model.bytes, 0);
}
