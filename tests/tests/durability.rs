//! Durability across restarts (SPEC §6, §7): every piece of state is
//! identical after a reopen, whether it comes back from checkpoints (clean
//! shutdown) or from replaying the WAL (no checkpoint at shutdown); the WAL
//! stays bounded by checkpoints; torn tails are cut, earlier damage fails
//! the open.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use rill::{Append, AppendBatch, Close, Config, Create, Engine, ErrorCode, PublishSnapshot, Read, StreamId};
use rill_tests::{sid, ManualClock};

const GROUPS: u32 = 8;

fn config(dir: &Path, clock: &ManualClock) -> Config {
    Config::new(dir).cores(2).groups(GROUPS).clock(clock.as_clock())
}

/// A workload touching every kind of state a group keeps.
async fn populate(e: &Engine, tag: &str) -> Vec<StreamId> {
    let mut ids = Vec::new();
    for i in 0..12 {
        let id = sid(&format!("bucket-{}", i % 3), &format!("{tag}-{i}"));
        let mut create =
            Create::new(id.clone()).content_type(if i % 2 == 0 { "text/plain" } else { "application/json" });
        if i % 4 == 1 {
            create = create.ttl_s(3600);
        }
        if i % 4 == 2 {
            create = create.expires_at_ms(1_800_000_000_000);
        }
        e.create(create.attrs(format!(r#"{{"title":"t{i}","metadata":{{"i":{i}}}}}"#))).await.unwrap();
        for n in 0..(i + 3) {
            let payload = Bytes::from(format!("{tag}:{i}:{n};").repeat(n + 1));
            e.append(Append::new(id.clone(), payload).producer(format!("p{}", n % 2), 0, (n / 2) as u64))
                .await
                .unwrap();
        }
        let batch = vec![Bytes::from_static(b"b1"), Bytes::new(), Bytes::from_static(b"b3")];
        e.append_batch(AppendBatch::new(id.clone(), batch)).await.unwrap();
        e.append(Append::new(id.clone(), &b"seq"[..]).stream_seq(format!("{i:04}"))).await.unwrap();
        if i % 3 == 0 {
            let head = e.head(&id).await.unwrap();
            let at = head.tail_offset / 2;
            e.publish_snapshot(PublishSnapshot::new(id.clone(), at, format!("snap@{at}").into_bytes()))
                .await
                .unwrap();
            e.advance_retention(&id, at).await.unwrap();
        }
        if i % 5 == 0 {
            e.close_with(Close::new(id.clone()).producer("closer", 0, 0)).await.unwrap();
        }
        ids.push(id);
    }
    // A deleted stream and a deleted-then-recreated one.
    e.delete(&ids[11]).await.unwrap();
    e.delete(&ids[10]).await.unwrap();
    e.create(Create::new(ids[10].clone()).initial_payload(&b"reborn"[..])).await.unwrap();
    ids
}

/// Everything observable, per group and per stream.
async fn observe(e: &Engine, ids: &[StreamId]) -> Vec<String> {
    let mut out = Vec::new();
    for g in 0..GROUPS {
        let snap = e.snapshot_group(g).await.unwrap();
        out.push(format!("group {g} index {} bytes {}", snap.commit_index, blake_hex(&snap.bytes)));
    }
    for id in ids {
        let head =
            e.head(id).await.map(|h| format!("{h:?}")).unwrap_or_else(|err| format!("{:?}", err.code()));
        out.push(format!("{id} head {head}"));
        if let Ok(h) = e.head(id).await {
            let r = e.read(Read::new(id.clone()).offset(h.retained_offset).max_len(1 << 20)).await.unwrap();
            out.push(format!("{id} bytes {}", blake_hex(&r.payload)));
            out.push(format!("{id} attrs {:?}", e.get_attrs(id).await.unwrap()));
            out.push(format!("{id} boot {:?}", e.bootstrap(id).await.unwrap().snapshot));
        }
    }
    out
}

fn blake_hex(bytes: &[u8]) -> String {
    format!("{}", rill_shard::state::integrity::record_digest(0, bytes)[0])
}

fn wal_files(dir: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    if let Ok(cores) = std::fs::read_dir(dir.join("wal")) {
        for core in cores.flatten() {
            for f in std::fs::read_dir(core.path()).unwrap().flatten() {
                files.push(f.path());
            }
        }
    }
    files.sort();
    files
}

fn restart_keeps_everything(checkpoint_on_shutdown: bool) {
    let dir = tempfile::tempdir().unwrap();
    let clock = ManualClock::new(1_700_000_000_000);
    let cfg = || config(dir.path(), &clock).checkpoint_on_shutdown(checkpoint_on_shutdown);
    let (ids, before) = futures::executor::block_on(async {
        let e = Engine::open(cfg()).unwrap();
        let mut ids = populate(&e, "first").await;
        // A checkpoint in the middle: the replay must start after it.
        e.checkpoint().await.unwrap();
        ids.extend(populate(&e, "second").await);
        let before = observe(&e, &ids).await;
        e.shutdown().await.unwrap();
        (ids, before)
    });
    if !checkpoint_on_shutdown {
        assert!(!wal_files(dir.path()).is_empty(), "the replay path must have WAL left to replay");
    }
    let after = futures::executor::block_on(async {
        let e = Engine::open(cfg()).unwrap();
        let after = observe(&e, &ids).await;
        // The next append after the restart lands at the right offset and a
        // producer retry from before the restart is deduplicated.
        let head = e.head(&ids[3]).await.unwrap();
        let r = e.append(Append::new(ids[3].clone(), &b"next"[..])).await.unwrap();
        assert_eq!(r.start_offset, head.tail_offset);
        let dup = e.append(Append::new(ids[3].clone(), Bytes::from("x")).producer("p0", 0, 0)).await.unwrap();
        assert!(dup.deduplicated);
        e.shutdown().await.unwrap();
        after
    });
    for (b, a) in before.iter().zip(&after) {
        assert_eq!(b, a, "state differs after restart (checkpoint_on_shutdown = {checkpoint_on_shutdown})");
    }
    assert_eq!(before.len(), after.len());
}

// SPEC §6/§7: streams, offsets, content types, closed, TTL and expiry,
// attributes, producers, snapshots, retention and integrity sums are
// identical after a clean restart (from checkpoints).
#[test]
fn restart_from_checkpoints_keeps_every_piece_of_state() {
    restart_keeps_everything(true);
}

// SPEC §6: the same, recovered by replaying the WAL after the last
// checkpoint.
#[test]
fn restart_from_wal_replay_keeps_every_piece_of_state() {
    restart_keeps_everything(false);
}

// SPEC §3 (WAL bounded) + issue: checkpoints retire WAL segments, so the WAL
// stays bounded under steady writes.
#[test]
fn checkpoints_keep_the_wal_bounded() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config::new(dir.path())
        .cores(1)
        .groups(4)
        .wal_segment_bytes(64 * 1024)
        .checkpoint_wal_bytes(256 * 1024)
        .checkpoint_interval(Duration::from_secs(3600))
        // No background flush: a flush's pack commit landing while the
        // explicit checkpoint below runs would be a record that checkpoint
        // does not cover, and the segment holding it would rightly stay.
        .background_flush(false);
    futures::executor::block_on(async {
        let e = Engine::open(cfg.clone()).unwrap();
        let id = sid("b", "steady");
        e.create(Create::new(id.clone())).await.unwrap();
        let mut peak = 0u64;
        for i in 0..3000u64 {
            e.append(Append::new(id.clone(), vec![(i % 251) as u8; 700])).await.unwrap();
            if i % 100 == 0 {
                let bytes: u64 =
                    wal_files(dir.path()).iter().filter_map(|f| f.metadata().ok()).map(|m| m.len()).sum();
                peak = peak.max(bytes);
            }
        }
        // Sequential appends are one sync (and one 4 KiB block) each, so
        // ~12 MB went through the WAL; checkpoints keep what stays near
        // their 256 KiB threshold.
        assert!(peak < 4 * 1024 * 1024, "WAL grew to {peak} bytes");
        e.checkpoint().await.unwrap();
        let left: u64 = wal_files(dir.path()).iter().filter_map(|f| f.metadata().ok()).map(|m| m.len()).sum();
        assert!(left <= 64 * 1024, "after a checkpoint only the active segment may stay, found {left} bytes");
        e.shutdown().await.unwrap();
        let e = Engine::open(cfg).unwrap();
        let r = e.read(Read::new(id.clone()).offset(699 * 700).max_len(1400)).await.unwrap();
        assert_eq!(r.payload.len(), 1400);
        assert_eq!(e.head(&id).await.unwrap().tail_offset, 3000 * 700);
        e.shutdown().await.unwrap();
    });
}

// SPEC §8: each core counts what its log and dispatcher did: batches (one
// per sequential append; fewer than records when appends arrive together),
// records, a sync per batch in `Fsync` mode, bytes written in whole blocks,
// parks and cross-thread wakes, and checkpoint runs.
#[test]
fn each_core_counts_its_log_batches_syncs_wakes_and_checkpoints() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config::new(dir.path()).cores(1).groups(4).checkpoint_interval(Duration::from_secs(3600));
    futures::executor::block_on(async {
        let e = Engine::open(cfg).unwrap();
        let base = e.metrics().cores[0].clone();
        let id = sid("b", "counted");
        e.create(Create::new(id.clone())).await.unwrap();
        for i in 0..50u8 {
            e.append(Append::new(id.clone(), vec![i; 100])).await.unwrap();
        }
        let sequential = e.metrics().cores[0].clone();
        let (batches, records) =
            (sequential.wal_batches - base.wal_batches, sequential.wal_records - base.wal_records);
        assert_eq!(records, 51, "a create and 50 appends");
        assert_eq!(batches, 51, "one caller, one append at a time: a batch each");
        assert_eq!(sequential.wal_syncs - base.wal_syncs, batches);
        assert_eq!((sequential.wal_bytes_written - base.wal_bytes_written) % 4096, 0);
        assert!(sequential.wal_bytes_written - base.wal_bytes_written >= 51 * 4096);
        // Between appends the dispatcher either parked (and was woken) or
        // spun and caught the next one (ARCHITECTURE.md, "The wake path").
        let waited = |c: &rill::CoreMetricsSnapshot| c.dispatcher_parks + c.dispatcher_spin_catches;
        let woken = |c: &rill::CoreMetricsSnapshot| c.dispatcher_wakes + c.dispatcher_spin_catches;
        assert!(waited(&sequential) > waited(&base));
        assert!(woken(&sequential) > woken(&base));

        let burst = (0..256u32).map(|i| e.append(Append::new(id.clone(), i.to_le_bytes().to_vec())));
        for reply in futures::future::join_all(burst).await {
            reply.unwrap();
        }
        let after = e.metrics().cores[0].clone();
        let (batches, records) =
            (after.wal_batches - sequential.wal_batches, after.wal_records - sequential.wal_records);
        assert_eq!(records, 256);
        assert!(batches < records, "256 appends in flight together shared batches, got {batches}");

        assert_eq!(after.checkpoints, base.checkpoints);
        e.checkpoint().await.unwrap();
        assert_eq!(e.metrics().cores[0].checkpoints, after.checkpoints + 1);
        e.shutdown().await.unwrap();
    });
}

// SPEC §1: the group count is fixed for a data directory; the core count may
// change (groups are re-homed) and nothing is lost.
#[test]
fn shape_is_enforced_and_cores_may_change() {
    let dir = tempfile::tempdir().unwrap();
    let id = sid("b", "moves");
    futures::executor::block_on(async {
        let e =
            Engine::open(Config::new(dir.path()).cores(2).groups(8).checkpoint_on_shutdown(false)).unwrap();
        e.create(Create::new(id.clone()).initial_payload(&b"kept"[..])).await.unwrap();
        e.shutdown().await.unwrap();
    });
    let err = Engine::open(Config::new(dir.path()).cores(2).groups(16)).unwrap_err();
    assert_eq!(err.code(), ErrorCode::ShapeMismatch);
    futures::executor::block_on(async {
        let e = Engine::open(Config::new(dir.path()).cores(1).groups(8)).unwrap();
        assert_eq!(&e.read(Read::new(id.clone())).await.unwrap().payload[..], b"kept");
        e.shutdown().await.unwrap();
    });
}

/// Writes records through an engine that does not checkpoint at shutdown,
/// leaving them all in one WAL segment of core 0.
fn engine_with_wal_records(dir: &Path, records: usize) -> (StreamId, PathBuf) {
    let id = sid("b", "torn");
    futures::executor::block_on(async {
        let e = Engine::open(Config::new(dir).cores(1).groups(1).checkpoint_on_shutdown(false)).unwrap();
        e.create(Create::new(id.clone())).await.unwrap();
        for i in 0..records {
            e.append(Append::new(id.clone(), format!("record-{i:04}|").into_bytes())).await.unwrap();
        }
        e.shutdown().await.unwrap();
    });
    // Besides the segment with the records there may be the preallocated
    // spare (all zeros, no header yet).
    let files: Vec<PathBuf> =
        wal_files(dir).into_iter().filter(|f| std::fs::read(f).unwrap().iter().any(|b| *b != 0)).collect();
    assert_eq!(files.len(), 1, "one segment with records expected: {files:?}");
    (id, files[0].clone())
}

// SPEC §6: a torn tail (the segment cut at any byte of its last record, or a
// bit flipped anywhere in it) is cut off and every earlier record is
// recovered, each time.
#[test]
fn torn_tail_is_cut_and_earlier_records_survive() {
    let template = tempfile::tempdir().unwrap();
    let (id, segment) = engine_with_wal_records(template.path(), 20);
    let bytes = std::fs::read(&segment).unwrap();
    let scan = rill_shard::wal::scan::scan_segment(&bytes).unwrap();
    let last = scan.records.last().unwrap();
    let start = last.pos as usize;
    let end = start + rill_shard::wal::format::encoded_len(last.body.len());
    // The earlier records hold the create and 19 appends of 12 bytes.
    let earlier = 19 * 12;
    let check = |damaged: Vec<u8>, what: String| {
        let dir = tempfile::tempdir().unwrap();
        copy_dir(template.path(), dir.path());
        let seg = dir.path().join(segment.strip_prefix(template.path()).unwrap());
        std::fs::write(&seg, &damaged).unwrap();
        futures::executor::block_on(async {
            let e = Engine::open(Config::new(dir.path()).cores(1).groups(1)).unwrap();
            let r = e.read(Read::new(id.clone())).await.unwrap();
            let text = String::from_utf8(r.payload.to_vec()).unwrap();
            let expected: String = (0..19).map(|i| format!("record-{i:04}|")).collect();
            assert_eq!(&text[..earlier.min(text.len())], &expected[..], "{what}");
            assert_eq!(text.len(), earlier, "{what}: the damaged last record must be gone");
            e.shutdown().await.unwrap();
        });
    };
    for cut in start..end {
        check(bytes[..cut].to_vec(), format!("cut at {cut}"));
    }
    for pos in (start..end).step_by(3) {
        let mut damaged = bytes.clone();
        damaged[pos] ^= 1 << (pos % 8);
        check(damaged, format!("bit flipped at {pos}"));
    }
}

// SPEC §6: damage before the tail fails the open with Corrupted naming the
// file, instead of silently dropping later records.
#[test]
fn damage_before_the_tail_fails_the_open() {
    let dir = tempfile::tempdir().unwrap();
    let (_id, segment) = engine_with_wal_records(dir.path(), 20);
    let mut bytes = std::fs::read(&segment).unwrap();
    // The second record's payload sits early in the segment, after the
    // 4096-byte header block and the create record.
    let pos = bytes.windows(12).position(|w| w == b"record-0001|").unwrap();
    bytes[pos + 3] ^= 0x10;
    std::fs::write(&segment, &bytes).unwrap();
    let err = Engine::open(Config::new(dir.path()).cores(1).groups(1)).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Corrupted);
    assert!(err.to_string().contains(".wal"), "the error names the file: {err}");
}

fn copy_dir(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap().flatten() {
        let target = to.join(entry.file_name());
        if entry.path().is_dir() {
            std::fs::create_dir_all(&target).unwrap();
            copy_dir(&entry.path(), &target);
        } else {
            std::fs::copy(entry.path(), &target).unwrap();
        }
    }
}

// SPEC §6 + DESIGN "narrow I/O seams": when the WAL device fails (an fsync
// error, or a torn write followed by an error), the core stops acknowledging
// with a persistent I/O error that keeps its OS cause, every later request
// gets `Poisoned` naming it; nothing unacknowledged is reported durable, and
// a reopen on a healthy device recovers every acknowledged append.
#[test]
fn a_failing_wal_device_stops_acknowledging_and_loses_nothing_acknowledged() {
    use rill_shard::wal::device::{Fault, FaultyDir, StdDir, WalDir};
    use rill_shard::wal::{WalConfig, WalLog};
    use std::rc::Rc;

    for fault in [Fault::FailIo, Fault::TearWrite { keep: 300 }] {
        let dir = tempfile::tempdir().unwrap();
        let data_dir = dir.path().to_path_buf();
        let factory: rill::seams::LogFactory = std::sync::Arc::new(move |core| {
            let wal_dir = rill_shard::wal::recovery::wal_dir(&data_dir, core);
            let inner: Rc<dyn WalDir> = Rc::new(StdDir::new(wal_dir));
            // Create, header write, header sync, then 40 write/sync pairs
            // succeed; everything after fails.
            let faulty: Rc<dyn WalDir> = Rc::new(FaultyDir::new(inner, 83, fault));
            let config = WalConfig { segment_bytes: 1 << 20, buffer_bytes: 1 << 20, ..WalConfig::default() };
            Box::new(WalLog::start(faulty, core as u32, config)) as Box<dyn rill::seams::LogStore>
        });
        let id = sid("b", "faulty");
        let acked = futures::executor::block_on(async {
            let e = Engine::open(Config::new(dir.path()).cores(1).groups(1).log_factory(factory)).unwrap();
            e.create(Create::new(id.clone())).await.unwrap();
            let mut acked = Vec::new();
            let mut failure = None;
            for i in 0..200u32 {
                match e.append(Append::new(id.clone(), format!("rec-{i:04};").into_bytes())).await {
                    Ok(r) => acked.push(r.next_offset),
                    Err(err) => {
                        failure = Some(err);
                        break;
                    }
                }
            }
            let err = failure.expect("the device fails within 200 appends");
            assert_eq!(err.code(), ErrorCode::Io, "{fault:?}: {err}");
            assert_eq!(err.class(), rill::ErrorClass::Persistent);
            // The error keeps the operating-system error it came from.
            let os = std::error::Error::source(&err).expect("an Io error has a source");
            assert!(os.downcast_ref::<std::io::Error>().is_some(), "{fault:?}: source is {os:?}");
            assert!(err.io_kind().is_some(), "{fault:?}");
            // Every later request is told the core stopped, and why.
            let later = e.append(Append::new(id.clone(), &b"after"[..])).await.unwrap_err();
            assert_eq!(later.code(), ErrorCode::Poisoned, "a failed core refuses further writes: {later}");
            assert_eq!(later.class(), rill::ErrorClass::Persistent);
            match later.kind() {
                rill::ErrorKind::Poisoned { core, cause } => {
                    assert_eq!(*core, 0);
                    assert_eq!(cause.code(), ErrorCode::Io, "the cause is the log's failure");
                }
                other => panic!("expected Poisoned, got {other:?}"),
            }
            let read = e.read(Read::new(id.clone())).await.unwrap_err();
            assert_eq!(read.code(), ErrorCode::Poisoned, "reads on a failed core are refused too");
            drop(e);
            acked
        });
        assert!(acked.len() >= 10, "{fault:?}: some appends were acknowledged before the fault");
        futures::executor::block_on(async {
            let e = Engine::open(Config::new(dir.path()).cores(1).groups(1)).unwrap();
            let r = e.read(Read::new(id.clone()).max_len(1 << 20)).await.unwrap();
            let tail = *acked.last().unwrap();
            assert!(r.next_offset >= tail, "{fault:?}: acknowledged bytes lost ({} < {tail})", r.next_offset);
            let expected: String = (0..acked.len()).map(|i| format!("rec-{i:04};")).collect();
            assert_eq!(&r.payload[..expected.len()], expected.as_bytes(), "{fault:?}");
            e.shutdown().await.unwrap();
        });
    }
}
