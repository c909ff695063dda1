//! Limits against the log's record size (SPEC §4, §7): a group at its hot
//! limit moves to another engine whole, and a payload limit no log record
//! could carry is refused at open. Neither may panic a core.

use std::time::Duration;

use bytes::Bytes;
use rill::{Append, Config, Create, Engine, ErrorCode, Read};
use rill_tests::sid;

const MIB: usize = 1 << 20;

/// Every byte of a stream, read back in pieces.
async fn read_all(engine: &Engine, id: &rill::StreamId) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let got = engine.read(Read::new(id.clone()).offset(out.len() as u64).max_len(8 * MIB)).await.unwrap();
        out.extend_from_slice(&got.payload);
        if got.up_to_date {
            return out;
        }
    }
}

fn one_group(dir: &std::path::Path) -> Config {
    Config::new(dir).cores(1).groups(1).background_flush(false).io_memory_bytes(1 << 20)
}

// SPEC §7: a group snapshot installs on another engine of the same shape,
// however large the group (here at the default hot limit, the size of the
// log's largest record): the installed state is logged by reference, so
// the install succeeds, reads back identically, and survives a restart.
#[test]
fn a_group_at_its_hot_limit_installs_and_reads_back() {
    let (a_dir, b_dir) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    futures::executor::block_on(async {
        let a = Engine::open(one_group(a_dir.path())).unwrap();
        let id = sid("big", "s");
        a.create(Create::new(id.clone())).await.unwrap();
        let limit = a.config().current_limits().group.max_hot_bytes as usize;
        let mut model = Vec::with_capacity(limit);
        let piece = 16 * MIB;
        for n in 0..limit / piece {
            let payload: Vec<u8> = (0..piece).map(|i| (i * 31 + n * 7) as u8).collect();
            model.extend_from_slice(&payload);
            a.append(Append::new(id.clone(), Bytes::from(payload))).await.unwrap();
        }
        assert_eq!(model.len(), limit, "the group holds exactly its hot limit");
        let snapshot = a.snapshot_group(0).await.unwrap();
        assert!(snapshot.bytes.len() > limit, "the snapshot is larger than one log record");
        a.shutdown().await.unwrap();

        let b = Engine::open(one_group(b_dir.path())).unwrap();
        assert_eq!(b.install_group_snapshot(snapshot.clone()).await.unwrap(), snapshot.commit_index);
        assert!(read_all(&b, &id).await == model, "the installed group reads back identically");
        b.shutdown().await.unwrap();

        let b = Engine::open(one_group(b_dir.path()).checkpoint_interval(Duration::from_secs(3600))).unwrap();
        assert!(read_all(&b, &id).await == model, "and again after a restart");
        // At its hot limit the group takes no more until a flush makes room.
        let full = b.append(Append::new(id.clone(), &b"tail"[..])).await.unwrap_err();
        assert_eq!(full.code(), ErrorCode::ColdBackpressure, "{full}");
        b.flush_cold().await.unwrap();
        let next = b.append(Append::new(id.clone(), &b"tail"[..])).await.unwrap();
        assert_eq!(next.start_offset, limit as u64, "appends continue after the installed tail");
        b.shutdown().await.unwrap();
    });
}

// SPEC §4: a payload limit beyond what one log record can carry is refused
// at open with a clear, typed error, before anything starts.
#[test]
fn a_payload_limit_beyond_the_log_record_is_refused_at_open() {
    let dir = tempfile::tempdir().unwrap();
    let config = one_group(dir.path())
        .max_payload_bytes(100 << 20)
        .max_uncommitted_bytes_per_group(256 << 20)
        .max_hot_bytes_per_group(256 << 20);
    let err = Engine::open(config).unwrap_err();
    assert_eq!(err.code(), ErrorCode::BadRequest, "{err}");
    assert!(err.to_string().contains("max_payload_bytes"), "{err}");
    // The largest limit the log can carry is accepted and served.
    let largest = rill::Limits::default().max_payload_for_log();
    let config = one_group(dir.path())
        .max_payload_bytes(largest)
        .max_uncommitted_bytes_per_group(256 << 20)
        .max_hot_bytes_per_group(256 << 20);
    futures::executor::block_on(async {
        let engine = Engine::open(config).unwrap();
        let id = sid("big", "one");
        engine.create(Create::new(id.clone())).await.unwrap();
        let reply = engine.append(Append::new(id.clone(), vec![5u8; largest as usize])).await.unwrap();
        assert_eq!(reply.next_offset, largest);
        let over = engine.append(Append::new(id, vec![5u8; largest as usize + 1])).await.unwrap_err();
        assert_eq!(over.code(), ErrorCode::PayloadTooLarge, "{over}");
        engine.shutdown().await.unwrap();
    });
}
