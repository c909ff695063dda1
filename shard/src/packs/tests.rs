//! Tests of the cold tier's file work on a real directory: flushed slices
//! carry one record index entry per record, a compaction's output carries
//! its inputs' indexes joined, and a compaction whose inputs lack an index
//! (a pack of format version 1) or whose range retention has cut is
//! skipped.

use std::sync::Arc;

use bytes::Bytes;

use super::{compaction_inputs, write_compaction, write_flush, ColdStore, FsPackDir, PackDir};
use crate::state::api::{Append, Create, PublishSnapshot};
use crate::state::command::{Command, FlushCommit, Op};
use crate::state::group::{FlushLimits, GroupLimits, GroupState};
use crate::state::name::StreamId;

const ALL: FlushLimits = FlushLimits { max_flush_bytes: u64::MAX, max_batch_bytes: u64::MAX };

fn apply(state: &mut GroupState, op: Op) {
    let applied = state.apply(&Command { now_ms: 1_000, op }, &mut Vec::new());
    applied.result.as_ref().unwrap();
    assert!(applied.mutated);
}

/// A group whose stream `s` holds three cold chunks of three records each,
/// flushed into `dir`; returns the state and every record's `(start, bytes)`.
fn flushed_group(dir: &dyn PackDir, id: &StreamId) -> (GroupState, Vec<(u64, Bytes)>) {
    let mut state = GroupState::new(0, 1, GroupLimits::default());
    apply(&mut state, Op::from(Create::new(id.clone())));
    let mut records = Vec::new();
    let mut at = 0;
    for round in 0..3u8 {
        for n in 0..3u8 {
            let payload = Bytes::from(vec![round * 3 + n; usize::from(n) * 5 + 1]);
            records.push((at, payload.clone()));
            at += payload.len() as u64;
            apply(&mut state, Op::from(Append::new(id.clone(), payload)));
        }
        let plans = state.plan_flush(&ALL);
        let packs = write_flush(dir, state.group(), &plans).unwrap();
        apply(&mut state, Op::FlushCommit(FlushCommit { packs }));
    }
    assert_eq!(state.stream(id).unwrap().cold_chunks().len(), 3);
    (state, records)
}

fn file_of(state: &GroupState, pack: u64) -> String {
    state.cold().packs[&pack].file.clone()
}

#[test]
fn flushed_slices_and_compaction_outputs_carry_their_record_index() {
    let tmp = tempfile::tempdir().unwrap();
    let dir: Arc<dyn PackDir> = Arc::new(FsPackDir::open(tmp.path()).unwrap());
    let store = ColdStore::new(Arc::clone(&dir), 1 << 20);
    let id = StreamId::new("b", "s").unwrap();
    let (state, records) = flushed_group(&*dir, &id);

    // Each flushed slice indexes its own three records.
    for (i, chunk) in state.stream(&id).unwrap().cold_chunks().enumerate() {
        let starts = store
            .with_records(&file_of(&state, chunk.pack), chunk.slice, |index| {
                let index = index.expect("a flushed slice has a record index");
                assert_eq!(index.end(index.len() - 1), Some(chunk.end()));
                index.iter().collect::<Vec<_>>()
            })
            .unwrap();
        // Every command of this test runs at 1 000 ms: every record's time.
        let want: Vec<(u64, u64)> = records[i * 3..i * 3 + 3].iter().map(|(start, _)| (*start, 1_000)).collect();
        assert_eq!(starts, want, "chunk {i}");
    }
    let chunk = state.stream(&id).unwrap().cold_chunks().next().unwrap().clone();
    assert!(store.with_records(&file_of(&state, chunk.pack), 9, |_| ()).is_err(), "no slice 9");

    // The compaction joins the three indexes in front of the joined bytes.
    let plans = state.plan_compaction(1 << 20, 1 << 20);
    assert_eq!(plans.len(), 1);
    let plan = &plans[0];
    let inputs = compaction_inputs(&store, &state, plan).unwrap().expect("the run holds");
    let starts: Vec<u64> = records.iter().map(|(start, _)| *start).collect();
    assert_eq!(inputs.index.starts(), &starts[..]);
    assert_eq!(inputs.index.runs(), &[(0, 1_000)]);
    let bytes: Vec<u8> = records.iter().flat_map(|(_, b)| b.to_vec()).collect();
    assert_eq!(inputs.parts.concat(), bytes);
    let output = write_compaction(&*dir, state.group(), plan, &inputs).unwrap();
    let read = store
        .with_records(&output.file, 0, |index| index.unwrap().iter().map(|(s, _)| s).collect::<Vec<_>>())
        .unwrap();
    assert_eq!(read, starts);

    // Retention past the first chunk leaves the planned range uncovered.
    let mut cut = state.clone();
    apply(&mut cut, Op::from(PublishSnapshot::new(id.clone(), chunk.end(), Bytes::from_static(b"snap"))));
    apply(&mut cut, Op::AdvanceRetention { id: id.clone(), offset: chunk.end() });
    assert!(compaction_inputs(&store, &cut, plan).unwrap().is_none());
}

#[test]
fn a_compaction_over_a_version_1_input_is_skipped() {
    let tmp = tempfile::tempdir().unwrap();
    let dir: Arc<dyn PackDir> = Arc::new(FsPackDir::open(tmp.path()).unwrap());
    let store = ColdStore::new(Arc::clone(&dir), 1 << 20);
    let id = StreamId::new("b", "s").unwrap();
    let (state, _) = flushed_group(&*dir, &id);

    // Rewrite the second chunk's pack as a build before the index wrote it.
    let chunk = state.stream(&id).unwrap().cold_chunks().nth(1).unwrap().clone();
    let file = file_of(&state, chunk.pack);
    let old = rill_cold::PackReader::open(&store.path(&file)).unwrap();
    let datas: Vec<Vec<u8>> = (0..old.slice_count()).map(|i| old.slice_bytes(i).unwrap().to_vec()).collect();
    let parts: Vec<[&[u8]; 1]> = datas.iter().map(|d| [&d[..]]).collect();
    let none = rill_cold::RecordIndexBuf::new();
    let specs: Vec<rill_cold::SliceSpec<'_>> = old
        .slices()
        .iter()
        .zip(&parts)
        .map(|(meta, parts)| rill_cold::SliceSpec {
            stream: &meta.stream,
            incarnation: meta.incarnation,
            start: meta.start,
            parts,
            index: &none,
        })
        .collect();
    let v1 = rill_cold::pack::encode_pack_version(1, old.group(), old.pack_id(), old.bucket(), &specs).unwrap();
    dir.remove(&file).unwrap();
    dir.write(&file, &v1).unwrap();
    store.forget(&file);

    assert!(store.with_records(&file, chunk.slice, |index| index.is_none()).unwrap());
    assert!(store.fetch(&crate::state::group::ColdPiece { file, slice: chunk.slice, from: 0, len: chunk.len })
        .is_ok());
    let plans = state.plan_compaction(1 << 20, 1 << 20);
    assert_eq!(plans.len(), 1);
    assert!(compaction_inputs(&store, &state, &plans[0]).unwrap().is_none(), "skipped, not failed");
}
