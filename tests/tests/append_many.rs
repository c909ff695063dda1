//! `Engine::append_many` on the real runtime: each item's result is exactly
//! what issuing the items one by one, in order, would have returned, and
//! what it acknowledged is durable.
//!
//! The main test drives two engines with the same seeded workload: one gets
//! every round as a single `append_many`, the other gets the same items as
//! sequential `append`s. Replies (offsets, counts, dedup flags, producer
//! seqs, commit indexes), errors (codes) and every stream's bytes must be
//! identical, and stay so after both reopen from disk.

use bytes::Bytes;
use rill::{Append, AppendReply, Config, Create, Engine, ErrorCode, Limits, Read, Result, StreamId};
use rill_tests::{config, open, open_with, sid};

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

const MAX_PAYLOAD: u64 = 512;

fn small_payloads(c: Config) -> Config {
    c.limits(Limits { max_payload_bytes: MAX_PAYLOAD, ..Limits::default() })
}

/// One random item over `streams` (some of which were never created).
fn item(rng: &mut Rng, streams: &[StreamId], seqs: &mut [u64]) -> Append {
    let s = rng.below(streams.len() as u64) as usize;
    let len = match rng.below(20) {
        0 => 0,                        // empty: refused unless it closes
        1 => MAX_PAYLOAD as usize + 1, // too large
        _ => 1 + rng.below(200) as usize,
    };
    let payload = Bytes::from(vec![b'a' + (rng.below(26) as u8); len]);
    let mut a = Append::new(streams[s].clone(), payload);
    if rng.below(400) == 0 {
        a = a.close_after(true);
    }
    let mismatched = s % 5 == 1 && rng.below(4) == 0;
    if mismatched {
        a = a.content_type("application/json"); // mismatch on a text stream
    }
    let valid = (1..=MAX_PAYLOAD as usize).contains(&len) && !mismatched;
    if s.is_multiple_of(3) && valid {
        // A producer per stream (on items that would otherwise land): mostly
        // the next seq, sometimes a retry of the last one, sometimes a gap.
        let seq = match rng.below(10) {
            0 => seqs[s].saturating_sub(1),
            1 => seqs[s] + 2,
            _ => seqs[s],
        };
        if seq == seqs[s] {
            seqs[s] += 1;
        }
        a = a.producer(format!("p{s}"), 0, seq);
    }
    a
}

fn same(left: &[Result<AppendReply>], right: &[Result<AppendReply>], round: usize) {
    assert_eq!(left.len(), right.len());
    for (i, (l, r)) in left.iter().zip(right).enumerate() {
        match (l, r) {
            (Ok(l), Ok(r)) => assert_eq!(l, r, "round {round} item {i}"),
            (Err(l), Err(r)) => assert_eq!(l.code(), r.code(), "round {round} item {i}: {l} vs {r}"),
            _ => panic!("round {round} item {i}: append_many {l:?}, one by one {r:?}"),
        }
    }
}

async fn contents(e: &Engine, streams: &[StreamId]) -> Vec<Option<(Bytes, u64, bool)>> {
    let mut out = Vec::new();
    for id in streams {
        out.push(
            e.read(Read::new(id.clone()).offset(0).max_len(1 << 24))
                .await
                .ok()
                .map(|r| (r.payload, r.next_offset, r.closed)),
        );
    }
    out
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn append_many_answers_exactly_as_one_by_one_and_survives_reopen() {
    let (many_config, many_dir) = config(2, 8);
    let (single_config, single_dir) = config(2, 8);
    let (many_config, single_config) = (small_payloads(many_config), small_payloads(single_config));
    let many = Engine::open(many_config.clone()).unwrap();
    let single = Engine::open(single_config.clone()).unwrap();

    let streams: Vec<StreamId> = (0..24).map(|i| sid("b", &format!("s{i}"))).collect();
    for (i, id) in streams.iter().enumerate() {
        if i % 7 == 6 {
            continue; // never created: NotFound for every item
        }
        for e in [&many, &single] {
            e.create(Create::new(id.clone()).content_type("text/plain")).await.unwrap();
        }
    }
    let mut rng = Rng(0x5eed_1234_abcd_0001);
    let mut seqs = vec![0u64; streams.len()];
    let (mut ok, mut total) = (0usize, 0usize);
    for round in 0..40 {
        let n = 1 + rng.below(96) as usize;
        let items: Vec<Append> = (0..n).map(|_| item(&mut rng, &streams, &mut seqs)).collect();
        let got = many.append_many(items.clone()).await.unwrap();
        let mut want = Vec::with_capacity(n);
        for a in items {
            want.push(single.append(a).await);
        }
        same(&got, &want, round);
        ok += got.iter().filter(|r| r.is_ok()).count();
        total += n;
    }
    assert!(ok > 1000, "the workload should mostly succeed, {ok} of {total} did");
    let before = contents(&many, &streams).await;
    assert_eq!(before, contents(&single, &streams).await);

    many.shutdown().await.unwrap();
    single.shutdown().await.unwrap();
    let many = Engine::open(many_config).unwrap();
    let single = Engine::open(single_config).unwrap();
    let after = contents(&many, &streams).await;
    assert_eq!(after, before, "what append_many acknowledged is what reopens");
    assert_eq!(after, contents(&single, &streams).await);
    drop((many_dir, single_dir));
}

#[tokio::test]
async fn append_many_edges_empty_too_many_and_after_shutdown() {
    let e = open_with(2, 4, |c| c.limits(Limits { max_batch_items: 8, ..Limits::default() }));
    assert!(e.append_many(Vec::new()).await.unwrap().is_empty());
    let id = sid("b", "x");
    e.create(Create::new(id.clone())).await.unwrap();
    let nine: Vec<Append> = (0..9).map(|_| Append::new(id.clone(), &b"z"[..])).collect();
    let err = e.append_many(nine).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::BadRequest);
    assert_eq!(e.head(&id).await.unwrap().tail_offset, 0, "a refused call appends nothing");

    let eight: Vec<Append> = (0..8).map(|i| Append::new(id.clone(), vec![b'0' + i; 2])).collect();
    let replies = e.append_many(eight).await.unwrap();
    let offsets: Vec<u64> = replies.iter().map(|r| r.as_ref().unwrap().start_offset).collect();
    assert_eq!(offsets, vec![0, 2, 4, 6, 8, 10, 12, 14], "one stream's items land in order");
    let read = e.read(Read::new(id.clone())).await.unwrap();
    assert_eq!(&read.payload[..], b"0011223344556677");

    e.shutdown().await.unwrap();
    let err = e.append_many(vec![Append::new(id, &b"late"[..])]).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::ShuttingDown);
}

#[tokio::test]
async fn append_many_items_across_every_core_keep_their_places() {
    let e = open(2, 8);
    let a = rill_tests::find_stream(&e, "b", |p| p.core == 0);
    let b = rill_tests::find_stream(&e, "b", |p| p.core == 1);
    for id in [&a, &b] {
        e.create(Create::new(id.clone())).await.unwrap();
    }
    // A stream of b's group (so its bucket exists there) that was never created.
    let missing =
        (0..10_000).map(|i| sid("b", &format!("m{i}"))).find(|id| e.locate(id) == e.locate(&b)).unwrap();
    let items = vec![
        Append::new(a.clone(), &b"a1"[..]),
        Append::new(b.clone(), &b"b1"[..]),
        Append::new(missing.clone(), &b"m"[..]),
        Append::new(a.clone(), Bytes::new()),
        Append::new(b.clone(), &b"b2"[..]),
        Append::new(a.clone(), &b"a2"[..]),
    ];
    let r = e.append_many(items).await.unwrap();
    assert_eq!(r[0].as_ref().unwrap().next_offset, 2);
    assert_eq!(r[1].as_ref().unwrap().next_offset, 2);
    assert_eq!(r[2].as_ref().unwrap_err().code(), ErrorCode::StreamNotFound);
    assert_eq!(r[2].as_ref().unwrap_err().placement(), Some(e.locate(&missing)));
    assert_eq!(r[3].as_ref().unwrap_err().code(), ErrorCode::EmptyAppend);
    assert_eq!(r[4].as_ref().unwrap().start_offset, 2);
    assert_eq!(r[5].as_ref().unwrap().start_offset, 2);
    let routed = e.metrics().routed_requests;
    assert_eq!(routed, 2 + 5, "two creates, then five routed items (the empty one never leaves)");
}
