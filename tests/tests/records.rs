//! Records end to end (SPEC §2 "Records", "Read"): boundaries and times of
//! records survive flushes into packs, compaction and restarts; record
//! reads and `offset_at` answer the same over cold and hot data.

use std::path::Path;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use rill::{Append, AppendBatch, Config, Create, Engine, Read, Start, StreamId};
use rill_tests::sid;

fn config(dir: &Path) -> Config {
    Config::new(dir).cores(2).groups(4).background_flush(false)
}

fn wall_ms() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).unwrap().as_millis() as u64
}

/// A record: `(offset, time, bytes)`.
type Rec = (u64, u64, Vec<u8>);

/// Every record of the stream by record reads of at most `max_len` bytes.
async fn all_records(e: &Engine, id: &StreamId, max_len: usize) -> Vec<Rec> {
    let mut out = Vec::new();
    let mut offset = 0;
    loop {
        let r = e.read(Read::new(id.clone()).offset(offset).max_len(max_len).records(true)).await.unwrap();
        assert_eq!(r.offset, r.records.first().map_or(r.next_offset, |m| m.offset));
        out.extend(r.record_iter().map(|(m, b)| (m.offset, m.at_ms, b.to_vec())));
        offset = r.next_offset;
        if r.up_to_date {
            return out;
        }
    }
}

/// Checks record reads from every offset against `model` and `offset_at`
/// at every recorded time.
async fn check(e: &Engine, id: &StreamId, model: &[Rec]) {
    for max_len in [1usize, 10, 40, 1 << 20] {
        assert_eq!(all_records(e, id, max_len).await, model, "max_len {max_len}");
    }
    let tail = model.last().map_or(0, |(o, _, b)| o + b.len() as u64);
    for offset in 0..=tail {
        let r = e.read(Read::new(id.clone()).offset(offset).max_len(1).records(true)).await.unwrap();
        let expected = model.iter().find(|(o, _, _)| *o >= offset);
        match expected {
            Some((o, at, bytes)) => {
                assert_eq!(
                    (r.offset, r.records[0].at_ms, &r.payload[..]),
                    (*o, *at, &bytes[..]),
                    "at {offset}"
                );
            }
            None => assert_eq!((r.offset, r.records.len(), r.up_to_date), (tail, 0, true)),
        }
    }
    for (_, at, _) in model {
        let first = model.iter().find(|(_, t, _)| t >= at).unwrap().0;
        assert_eq!(e.offset_at(id, *at).await.unwrap(), first, "offset_at {at}");
        let after = model.iter().find(|(_, t, _)| *t > *at).map_or(tail, |r| r.0);
        assert_eq!(e.offset_at(id, at + 1).await.unwrap(), after, "offset_at {}", at + 1);
    }
    assert_eq!(e.offset_at(id, 0).await.unwrap(), 0);
    // The typed reply: the same records, from the middle of the first one.
    let typed = e.read_records(Read::new(id.clone()).offset(1).max_len(1 << 20)).await.unwrap();
    let got: Vec<Rec> =
        typed.records.iter().map(|r| (r.offset, r.timestamp_ms, r.payload.to_vec())).collect();
    assert_eq!(got, model[1..]);
    assert!(typed.up_to_date && typed.next_offset == tail);
    // Start positions.
    assert_eq!(e.start_offset(id, Start::Earliest).await.unwrap(), 0);
    assert_eq!(e.start_offset(id, Start::Latest).await.unwrap(), tail);
    let (second, at, _) = &model[1];
    assert_eq!(e.start_offset(id, Start::Timestamp(*at)).await.unwrap(), e.offset_at(id, *at).await.unwrap());
    assert_eq!(
        e.start_offset(id, Start::After(0)).await.unwrap(),
        *second,
        "after the first record's offset"
    );
    assert_eq!(e.start_offset(id, Start::After(*second)).await.unwrap(), model[2].0);
    assert_eq!(e.start_offset(id, Start::After(tail)).await.unwrap(), tail);
    assert_eq!(e.start_offset(id, Start::After(u64::MAX)).await.unwrap(), tail);
}

// Records appended one by one, many at once and as batch items, some
// milliseconds apart, keep their boundaries and times through flushes,
// a compaction of the cold chunks and two restarts.
#[test]
fn boundaries_and_times_survive_flushes_compaction_and_restarts() {
    let dir = tempfile::tempdir().unwrap();
    let id = sid("b", "records");
    let mut model: Vec<Rec> = Vec::new();
    futures::executor::block_on(async {
        let cfg = config(dir.path()).compaction(1 << 20, 8 << 20, Duration::from_millis(0));
        let e = Engine::open(cfg).unwrap();
        let before = wall_ms();
        e.create(Create::new(id.clone()).initial_records(vec![Bytes::from("c0"), Bytes::from("c1")]))
            .await
            .unwrap();
        for round in 0..5u8 {
            let single = vec![b'a' + round; 3 + round as usize];
            e.append(Append::new(id.clone(), single)).await.unwrap();
            let many = (0..3).map(|k| Bytes::from(format!("m{round}{k}"))).collect();
            let reply = e.append(Append::records(id.clone(), many)).await.unwrap();
            assert_eq!(
                reply.stream_append_count,
                1 + 3 * round as u64 + 2,
                "one create, three appends a round"
            );
            e.append_batch(AppendBatch::new(id.clone(), vec![Bytes::from(format!("b{round}"))]))
                .await
                .unwrap();
            if round % 2 == 0 {
                e.flush_cold().await.unwrap();
            }
            std::thread::sleep(Duration::from_millis(3));
        }
        let after = wall_ms();
        model = all_records(&e, &id, 1 << 20).await;
        assert_eq!(model.len(), 2 + 5 * 5);
        assert_eq!(model[0].2, b"c0");
        assert_eq!(model[1].2, b"c1");
        for pair in model.windows(2) {
            assert_eq!(pair[0].0 + pair[0].2.len() as u64, pair[1].0, "records are contiguous");
            assert!(pair[0].1 <= pair[1].1, "times never decrease");
        }
        assert!(model.iter().all(|(_, at, _)| (before..=after).contains(at)), "times come from the clock");
        assert!(model.first().unwrap().1 < model.last().unwrap().1, "the rounds are milliseconds apart");
        check(&e, &id, &model).await;
        assert!(e.compact_cold().await.unwrap() >= 1, "the small cold chunks compact");
        check(&e, &id, &model).await;
        e.shutdown().await.unwrap();
    });
    for checkpoint_on_shutdown in [false, true] {
        futures::executor::block_on(async {
            let e = Engine::open(config(dir.path()).checkpoint_on_shutdown(checkpoint_on_shutdown)).unwrap();
            check(&e, &id, &model).await;
            e.shutdown().await.unwrap();
        });
    }
}
