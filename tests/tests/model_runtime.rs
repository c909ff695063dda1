//! A model test on the real runtime (SPEC §2, §3): several cores, many
//! concurrent tasks issuing random operations, the cold tier flushing,
//! compacting and reclaiming in the background with tiny thresholds, bucket
//! purges, and a restart in the middle; after the tasks join, every stream
//! is checked against a plain per-stream model. Each task owns its streams
//! (and the one bucket it purges), so the model of one stream is exact
//! whatever the interleaving of tasks.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use rill::{Append, AppendBatch, Config, Create, Engine, ErrorCode, Read, StreamId};

/// What a stream must look like.
#[derive(Clone, Debug, Default)]
struct StreamModel {
    exists: bool,
    bytes: Vec<u8>,
    closed: bool,
    /// Next producer seq of the stream's producer (epoch 0).
    seq: u64,
}

use rill_shard::rng::Rng;

fn config(dir: &std::path::Path) -> Config {
    Config::new(dir)
        .cores(2)
        .groups(8)
        .min_hot_bytes(2 * 1024)
        .flush_interval(Duration::from_millis(3))
        .max_batch_bytes(8 * 1024)
        .compaction(2 * 1024, 32 * 1024, Duration::from_millis(0))
        .wal_segment_bytes(128 * 1024)
        .checkpoint_wal_bytes(256 * 1024)
}

/// One task's random operations over its own streams.
async fn run_task(e: Engine, task: u64, seed: u64, ops: usize, models: &mut BTreeMap<StreamId, StreamModel>) {
    let mut rng = Rng::new(seed ^ (task + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15));
    // Streams 0 to 2 share buckets with other tasks; stream 3 lives in the
    // task's own bucket, which the task may purge (SPEC §3 erasure) while
    // the others write and the cold tier works.
    let own = format!("own{task}");
    let ids: Vec<StreamId> = (0..4)
        .map(|s| {
            let bucket = if s == 3 { own.clone() } else { format!("bucket{}", s % 2) };
            StreamId::new(bucket, format!("t{task}-s{s}")).unwrap()
        })
        .collect();
    for _ in 0..ops {
        let id = &ids[rng.below(ids.len() as u64) as usize];
        let m = models.entry(id.clone()).or_default();
        match rng.below(10) {
            0 => {
                let r = e.create(Create::new(id.clone())).await;
                match r {
                    Ok(reply) => {
                        assert_eq!(reply.already_exists, m.exists, "{id}");
                        if !m.exists {
                            *m = StreamModel { exists: true, ..StreamModel::default() };
                        }
                    }
                    // A closed stream differs from a create of an open one.
                    Err(err) if err.code() == ErrorCode::StreamConflict => {
                        assert!(m.exists && m.closed, "{id}")
                    }
                    Err(err) => panic!("create {id}: {err}"),
                }
            }
            1..=5 => {
                let len = 1 + rng.below(600) as usize;
                let fill = b'a' + (rng.below(26) as u8);
                let mut data = vec![fill; len];
                data[0] = b'<';
                let with_producer = rng.below(3) == 0;
                let mut req = Append::new(id.clone(), data.clone());
                if with_producer {
                    req = req.producer("p", 0, m.seq);
                }
                match e.append(req).await {
                    Ok(r) => {
                        assert!(m.exists && !m.closed, "{id}: append accepted on a missing or closed stream");
                        assert_eq!(r.start_offset, m.bytes.len() as u64, "{id}");
                        m.bytes.extend_from_slice(&data);
                        if with_producer {
                            // A retry of the same seq is deduplicated.
                            let again = e.append(Append::new(id.clone(), data).producer("p", 0, m.seq)).await;
                            let again = again.unwrap();
                            assert!(again.deduplicated && again.start_offset == r.start_offset, "{id}");
                            m.seq += 1;
                        }
                    }
                    Err(err) => match err.code() {
                        ErrorCode::StreamNotFound | ErrorCode::BucketNotFound => {
                            assert!(!m.exists, "{id}: {err}")
                        }
                        ErrorCode::StreamClosed => assert!(m.closed, "{id}: {err}"),
                        ErrorCode::ColdBackpressure => {}
                        _ => panic!("append {id}: {err}"),
                    },
                }
            }
            6 => {
                let items: Vec<Bytes> = (0..1 + rng.below(4))
                    .map(|i| Bytes::from(vec![b'0' + i as u8; 1 + i as usize * 7]))
                    .collect();
                match e.append_batch(AppendBatch::new(id.clone(), items.clone())).await {
                    Ok(reply) => {
                        for (item, result) in items.iter().zip(&reply.items) {
                            match result {
                                Ok(r) => {
                                    assert_eq!(r.start_offset, m.bytes.len() as u64, "{id}");
                                    m.bytes.extend_from_slice(item);
                                }
                                Err(err) => assert_eq!(err.code(), ErrorCode::StreamClosed, "{id}"),
                            }
                        }
                    }
                    Err(err) => assert!(
                        matches!(
                            err.code(),
                            ErrorCode::StreamNotFound
                                | ErrorCode::BucketNotFound
                                | ErrorCode::ColdBackpressure
                        ),
                        "batch {id}: {err}"
                    ),
                }
            }
            7 => {
                let r = e.read(Read::new(id.clone()).offset(rng.below(m.bytes.len() as u64 + 1))).await;
                if let Ok(r) = r {
                    let end = r.next_offset as usize;
                    assert_eq!(&r.payload[..], &m.bytes[r.offset as usize..end], "{id} mid-run read");
                }
            }
            9 if rng.below(12) == 0 => {
                let report = e.purge_bucket(&own).await.unwrap();
                let mine = ids.iter().filter(|i| i.bucket() == own).collect::<Vec<_>>();
                let existed = mine.iter().filter(|i| models.get(**i).is_some_and(|m| m.exists)).count();
                assert_eq!(report.removed_streams, existed as u64, "purge of {own}");
                for i in mine {
                    models.insert(i.clone(), StreamModel::default());
                }
            }
            8 if rng.below(4) == 0 => {
                let closed = e.close(id).await.is_ok();
                assert_eq!(closed, m.exists, "{id}: close succeeds exactly on existing streams");
                m.closed |= closed;
            }
            _ if rng.below(6) == 0 => {
                let deleted = e.delete(id).await.is_ok();
                assert_eq!(deleted, m.exists, "{id}: delete succeeds exactly on existing streams");
                *m = StreamModel::default();
            }
            _ => {}
        }
    }
}

async fn check(e: &Engine, models: &BTreeMap<StreamId, StreamModel>) {
    for (id, m) in models {
        match e.head(id).await {
            Ok(head) => {
                assert!(m.exists, "{id} exists but the model deleted it");
                assert_eq!(head.tail_offset, m.bytes.len() as u64, "{id}");
                assert_eq!(head.closed, m.closed, "{id}");
                let mut got = Vec::new();
                let mut offset = 0;
                loop {
                    let r = e.read(Read::new(id.clone()).offset(offset)).await.unwrap();
                    got.extend_from_slice(&r.payload);
                    offset = r.next_offset;
                    if r.up_to_date {
                        break;
                    }
                }
                assert_eq!(got, m.bytes, "{id}");
            }
            Err(err) => {
                assert!(!m.exists, "{id} is missing: {err}");
            }
        }
    }
}

#[test]
fn concurrent_random_operations_match_the_model_across_a_restart() {
    let seed = std::env::var("RILL_MODEL_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed_u64);
    println!("model runtime test: seed {seed} (replay with RILL_MODEL_SEED={seed})");
    let dir = tempfile::tempdir().unwrap();
    let tasks = 8u64;
    let mut models: Vec<BTreeMap<StreamId, StreamModel>> = vec![BTreeMap::new(); tasks as usize];
    for round in 0..2u64 {
        let e = Engine::open(config(dir.path())).unwrap();
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).build().unwrap();
        let handles: Vec<_> = models
            .drain(..)
            .enumerate()
            .map(|(task, mut model)| {
                let e = e.clone();
                rt.spawn(async move {
                    run_task(e, task as u64, seed.wrapping_add(round), 800, &mut model).await;
                    model
                })
            })
            .collect();
        for h in handles {
            models.push(rt.block_on(h).unwrap());
        }
        let merged: BTreeMap<StreamId, StreamModel> = models.iter().flat_map(|m| m.clone()).collect();
        futures::executor::block_on(async {
            check(&e, &merged).await;
            e.flush_cold().await.unwrap();
            e.compact_cold().await.unwrap();
            e.run_gc().await.unwrap();
            check(&e, &merged).await;
        });
        let m = e.metrics();
        println!(
            "round {round}: {} mutations, {} flushes, {} compactions, {} GC entries",
            m.applied_mutations,
            m.cores.iter().map(|c| c.flushes).sum::<u64>(),
            m.cores.iter().map(|c| c.compactions).sum::<u64>(),
            m.cores.iter().map(|c| c.gc_entries).sum::<u64>()
        );
        // Round 0 ends without a clean shutdown's checkpoint: the next open
        // replays the WAL over the cold tier's commits.
        if round == 0 {
            drop(e);
        } else {
            futures::executor::block_on(e.shutdown()).unwrap();
        }
    }
    let e = Engine::open(config(dir.path())).unwrap();
    let merged: BTreeMap<StreamId, StreamModel> = models.iter().flat_map(|m| m.clone()).collect();
    futures::executor::block_on(check(&e, &merged));
    futures::executor::block_on(e.shutdown()).unwrap();
}
