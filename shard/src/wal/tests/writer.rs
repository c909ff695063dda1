//! Tests of the WAL writer over in-memory and faulty directories, run on a
//! real glommio executor: LSN order, durability only after sync, group
//! commit, rotation and retirement, and failure after an I/O error.

use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::time::Duration;


use crate::wal::device::{Fault, FaultyDir, MemDir, WalDir};
use crate::wal::format::{RecordKind, BLOCK};
use crate::wal::scan::{scan_segment, ScanEnd};
use crate::wal::{WalConfig, WalLog};
use crate::state::command::Command;
use super::{cmd, run};
use crate::wal::log::{EntryBody, LogEntry, LogStore};


fn config(segment_bytes: u64) -> WalConfig {
    WalConfig { segment_bytes, buffer_bytes: 1 << 20, ..WalConfig::default() }
}

/// Every record of every segment, in file-name order.
fn records(dir: &MemDir) -> Vec<(u64, u32, u64, Command)> {
    let files = dir.files.lock().clone();
    let mut out = Vec::new();
    for bytes in files.values() {
        let scan = scan_segment(bytes).expect("segment scans");
        if bytes.iter().all(|b| *b == 0) {
            // The preallocated spare: zeros, no header yet.
            assert!(matches!(scan.end, ScanEnd::TornHeader) && scan.records.is_empty());
            continue;
        }
        assert!(matches!(scan.end, ScanEnd::Clean), "written segments end clean");
        for r in scan.records {
            assert_eq!(r.kind, RecordKind::Command);
            out.push((r.lsn, r.group, r.index, postcard::from_bytes(r.body).expect("command decodes")));
        }
    }
    out
}

// SPEC §6: a reply waits for durability; records land in LSN order and
// decode to the commands submitted.
#[test]
fn records_are_durable_in_order() {
    let mem = MemDir::default();
    let dir = mem.clone();
    let got = run(move || async move {
        let wal = WalLog::start(Rc::new(dir), 0, config(1 << 20));
        let mut lsns = Vec::new();
        for i in 0..50u64 {
            let c = cmd(i, 10 + i as usize);
            let lsn = wal
                .submit(LogEntry { group: (i % 3) as u32, index: i + 1, body: EntryBody::Command(&c) })
                .await;
            lsns.push(lsn.expect("submit"));
        }
        assert_eq!(lsns, (1..=50).collect::<Vec<_>>());
        wal.wait_durable(50).await.expect("durable");
        assert_eq!(wal.durable_lsn(), 50);
        wal.live_bytes()
    });
    let recs = records(&mem);
    assert_eq!(recs.len(), 50);
    for (i, (lsn, group, index, c)) in recs.into_iter().enumerate() {
        assert_eq!((lsn, group, index), (i as u64 + 1, (i % 3) as u32, i as u64 + 1));
        assert_eq!(c, cmd(i as u64, 10 + i));
    }
    assert!(got >= 2 * BLOCK as u64);
    // Everything acknowledged was synced.
    assert_eq!(mem.files.lock().clone(), mem.synced.lock().clone());
}

// SPEC §6 group commit: a burst of submissions shares a few syncs instead of
// one each.
#[test]
fn a_burst_shares_syncs() {
    let mem = MemDir::default();
    let dir = mem.clone();
    run(move || async move {
        let wal = WalLog::start(Rc::new(dir), 0, config(1 << 20));
        for i in 0..200u64 {
            let c = cmd(i, 100);
            wal.submit(LogEntry { group: 0, index: i + 1, body: EntryBody::Command(&c) })
                .await
                .expect("submit");
        }
        wal.wait_durable(200).await.expect("durable");
    });
    let syncs = mem.syncs.load(Relaxed);
    assert!(syncs < 20, "200 submissions in one burst took {syncs} syncs");
    assert_eq!(records(&mem).len(), 200);
}

// The next segment is preallocated with zeros once the active one is half
// full and taken at rotation: after the first rotation every segment is
// already segment-sized before its first record lands.
#[test]
fn segments_are_preallocated() {
    let mem = MemDir::default();
    let dir = mem.clone();
    run(move || async move {
        let wal = WalLog::start(Rc::new(dir.clone()), 0, config(4 * BLOCK as u64));
        for i in 0..12u64 {
            let c = cmd(i, 3000);
            let lsn = wal.submit(LogEntry { group: 0, index: i + 1, body: EntryBody::Command(&c) }).await;
            wal.wait_durable(lsn.expect("submit")).await.expect("durable");
        }
        glommio::timer::sleep(Duration::from_millis(5)).await;
    });
    let files = mem.files.lock().clone();
    let names: Vec<&String> = files.keys().collect();
    assert!(names.len() >= 4, "{names:?}");
    for (name, bytes) in files.iter().skip(1) {
        assert_eq!(bytes.len(), 4 * BLOCK, "{name} was preallocated to the segment size");
    }
    let last = files.values().last().expect("some segment");
    assert!(last.iter().all(|b| *b == 0), "the newest file is the spare, still all zeros");
    assert_eq!(records(&mem).len(), 12);
}

// Segments rotate past their size and are removed once retired.
#[test]
fn segments_rotate_and_retire() {
    let mem = MemDir::default();
    let dir = mem.clone();
    run(move || async move {
        let wal = WalLog::start(Rc::new(dir.clone()), 0, config(4 * BLOCK as u64));
        for i in 0..40u64 {
            let c = cmd(i, 3000);
            let lsn = wal.submit(LogEntry { group: 0, index: i + 1, body: EntryBody::Command(&c) }).await;
            wal.wait_durable(lsn.expect("submit")).await.expect("durable");
        }
        let before = dir.files.lock().len();
        assert!(before > 5, "rotation happened: {before} segments");
        wal.retire_through(30).await.expect("retire");
        let after = records(&dir);
        assert!(after.iter().all(|r| r.0 > 0));
        assert!(after.iter().any(|r| r.0 == 40), "records after the cut stay");
        assert!(after.first().expect("some left").0 <= 31, "nothing after the cut was dropped");
        assert!(dir.files.lock().len() < before);
        wal.retire_through(40).await.expect("retire all");
        let left = dir.files.lock().clone();
        assert!(
            left.values().all(|bytes| bytes.iter().all(|b| *b == 0)),
            "every covered segment is gone; only the preallocated spare stays"
        );
        // The log keeps working in a fresh segment.
        let c = cmd(41, 10);
        let lsn =
            wal.submit(LogEntry { group: 0, index: 41, body: EntryBody::Command(&c) }).await.expect("submit");
        wal.wait_durable(lsn).await.expect("durable");
    });
    assert_eq!(records(&mem).len(), 1);
}

// An I/O error fails the log: waiting callers and later submissions get the
// error, and nothing is reported durable that was not synced.
#[test]
fn io_failure_fails_the_log() {
    for fault in [Fault::FailIo, Fault::TearWrite { keep: 100 }] {
        let mem = MemDir::default();
        let shared = mem.clone();
        run(move || async move {
            // create, header write, header sync, first batch write and sync;
            // then the fault.
            let inner: Rc<dyn WalDir> = Rc::new(shared);
            let dir = FaultyDir::new(inner, 5, fault);
            let wal = WalLog::start(Rc::new(dir), 0, config(1 << 20));
            let c = cmd(0, 10);
            let first =
                wal.submit(LogEntry { group: 0, index: 1, body: EntryBody::Command(&c) }).await.unwrap();
            wal.wait_durable(first).await.expect("first batch is durable");
            let second =
                wal.submit(LogEntry { group: 0, index: 2, body: EntryBody::Command(&c) }).await.unwrap();
            let err = wal.wait_durable(second).await.expect_err("the faulted batch never becomes durable");
            assert_eq!(err.code(), crate::error::ErrorCode::Io);
            assert_eq!(wal.durable_lsn(), first);
            glommio::timer::sleep(Duration::from_millis(1)).await;
            let later = wal.submit(LogEntry { group: 0, index: 3, body: EntryBody::Command(&c) }).await;
            assert_eq!(later.expect_err("failed log refuses").code(), crate::error::ErrorCode::Io);
        });
        // What was synced scans to exactly the first record.
        for bytes in mem.synced.lock().values() {
            let scan = scan_segment(bytes).expect("synced bytes scan");
            assert_eq!(scan.records.len(), 1);
        }
    }
}
