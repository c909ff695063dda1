//! Forks end to end (SPEC §2 "Forks"): a fork on another core holds the
//! source's prefix at the source's offsets and then its own appends; fork
//! points of every kind resolve or are refused with a typed error; a
//! pinned source soft-deletes and the fork keeper lets it go once its last
//! fork is gone, down a chain; forks survive restarts; a fork into another
//! bucket keeps its copy when the source's bucket is purged.

use std::time::{Duration, Instant};

use bytes::Bytes;
use rill::{Append, Config, Create, Engine, ErrorCode, Fork, ForkPoint, Read, StreamId};
use rill_tests::{find_stream, open, sid};

fn block_on<F: std::future::Future>(f: F) -> F::Output {
    futures::executor::block_on(f)
}

async fn all(e: &Engine, id: &StreamId) -> Vec<u8> {
    let head = e.head(id).await.unwrap();
    let read = e.read(Read::new(id.clone()).offset(head.retained_offset).max_len(1 << 20)).await.unwrap();
    read.payload.to_vec()
}

async fn records(e: &Engine, id: &StreamId) -> Vec<Bytes> {
    let r = e.read_records(Read::new(id.clone())).await.unwrap();
    r.records.into_iter().map(|r| r.payload).collect()
}

/// Waits (bounded) until `id`'s head fails with `code`.
async fn wait_for(e: &Engine, id: &StreamId, code: ErrorCode) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let now = e.head(id).await.err().map(|e| e.code());
        if now == Some(code) {
            return;
        }
        assert!(Instant::now() < deadline, "{id} never became {code:?} (is {now:?})");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A source on core 0 with three records, and a fork name on core 1.
async fn setup(e: &Engine) -> (StreamId, StreamId) {
    let source = find_stream(e, "f", |p| p.core == 0);
    let fork = sid("f", &format!("{}-fork", source.stream()));
    let fork = if e.locate(&fork).core == 1 { fork } else { find_stream(e, "g", |p| p.core == 1) };
    e.create(Create::new(source.clone()).content_type("text/plain").ttl_s(3600)).await.unwrap();
    for part in ["first", "second", "third"] {
        e.append(Append::new(source.clone(), Bytes::from(part))).await.unwrap();
    }
    (source, fork)
}

#[test]
fn a_fork_on_another_core_reads_the_prefix_then_its_own_appends() {
    let e = open(2, 4);
    block_on(async {
        let (source, fork) = setup(&e).await;
        assert_ne!(e.locate(&source).core, e.locate(&fork).core);
        let made =
            e.fork(Fork::new(Create::new(fork.clone()), source.clone()).at(ForkPoint::Offset(11))).await;
        let made = made.unwrap();
        assert!(!made.already_exists);
        assert_eq!(made.next_offset, 11);
        assert_eq!(all(&e, &fork).await, b"firstsecond");
        assert_eq!(records(&e, &fork).await, vec![Bytes::from("first"), Bytes::from("second")]);
        let head = e.head(&fork).await.unwrap();
        assert_eq!(head.content_type, "text/plain", "inherited");
        assert_eq!(head.ttl_s, Some(3600), "inherited");
        assert!(!head.closed);
        let own = e.append(Append::new(fork.clone(), &b"-own"[..])).await.unwrap();
        assert_eq!(own.start_offset, 11);
        e.append(Append::new(source.clone(), &b"-src"[..])).await.unwrap();
        assert_eq!(all(&e, &fork).await, b"firstsecond-own");
        assert_eq!(all(&e, &source).await, b"firstsecondthird-src");
        // The same fork again is an idempotent create; another point is not.
        let again = e.fork(Fork::new(Create::new(fork.clone()), source.clone()).at(ForkPoint::Offset(11)));
        assert!(again.await.unwrap().already_exists);
        let other = e.fork(Fork::new(Create::new(fork.clone()), source.clone()).at(ForkPoint::Offset(5)));
        assert_eq!(other.await.unwrap_err().code(), ErrorCode::StreamConflict);
    });
}

#[test]
fn fork_points_resolve_or_are_refused() {
    let e = open(2, 4);
    block_on(async {
        let (source, _) = setup(&e).await;
        let fork_at = |name: &str, point: ForkPoint| {
            Fork::new(Create::new(sid("points", name)), source.clone()).at(point)
        };
        e.fork(fork_at("tail", ForkPoint::Tail)).await.unwrap();
        assert_eq!(all(&e, &sid("points", "tail")).await, b"firstsecondthird");
        e.fork(fork_at("mid", ForkPoint::Offset(7))).await.unwrap();
        assert_eq!(records(&e, &sid("points", "mid")).await, vec![Bytes::from("first"), Bytes::from("se")]);
        e.fork(fork_at("into", ForkPoint::IntoRecord { offset: 5, bytes: 3 })).await.unwrap();
        assert_eq!(all(&e, &sid("points", "into")).await, b"firstsec");
        e.fork(fork_at("whole", ForkPoint::IntoRecord { offset: 5, bytes: 6 })).await.unwrap();
        assert_eq!(all(&e, &sid("points", "whole")).await, b"firstsecond");
        e.fork(fork_at("recs", ForkPoint::Records { offset: 5, count: 2 })).await.unwrap();
        assert_eq!(all(&e, &sid("points", "recs")).await, b"firstsecondthird");
        e.fork(fork_at("zero", ForkPoint::Offset(0))).await.unwrap();
        assert_eq!(e.head(&sid("points", "zero")).await.unwrap().tail_offset, 0);

        let refused = [
            ("past", ForkPoint::Offset(17), ErrorCode::BadRequest),
            ("over", ForkPoint::IntoRecord { offset: 5, bytes: 7 }, ErrorCode::BadRequest),
            ("notstart", ForkPoint::IntoRecord { offset: 6, bytes: 1 }, ErrorCode::BadRequest),
            ("many", ForkPoint::Records { offset: 5, count: 3 }, ErrorCode::BadRequest),
            ("attail", ForkPoint::IntoRecord { offset: 16, bytes: 1 }, ErrorCode::BadRequest),
        ];
        for (name, point, code) in refused {
            let err = e.fork(fork_at(name, point)).await.unwrap_err();
            assert_eq!(err.code(), code, "{name}: {err}");
            assert_eq!(e.head(&sid("points", name)).await.unwrap_err().code(), ErrorCode::StreamNotFound);
        }
        let typed =
            Fork::new(Create::new(sid("points", "json")).content_type("application/json"), source.clone());
        assert_eq!(e.fork(typed).await.unwrap_err().code(), ErrorCode::ContentTypeMismatch);
        let missing = Fork::new(Create::new(sid("points", "x")), sid("points", "no-such-source"));
        assert_eq!(e.fork(missing).await.unwrap_err().code(), ErrorCode::StreamNotFound);
        let onto_itself = Fork::new(Create::new(source.clone()), source.clone());
        assert_eq!(e.fork(onto_itself).await.unwrap_err().code(), ErrorCode::BadRequest);
        // A refused fork left no pin: the source deletes outright.
        e.delete(&sid("points", "tail")).await.unwrap();
        for name in ["mid", "into", "whole", "recs", "zero"] {
            e.delete(&sid("points", name)).await.unwrap();
        }
        e.delete(&source).await.unwrap();
        wait_for(&e, &source, ErrorCode::StreamNotFound).await;
    });
}

#[test]
fn a_pinned_source_soft_deletes_and_the_keeper_cascades_down_a_chain() {
    let e = open(2, 4);
    block_on(async {
        let (source, fork) = setup(&e).await;
        let grandchild = find_stream(&e, "h", |p| p.core == 0);
        e.fork(Fork::new(Create::new(fork.clone()), source.clone())).await.unwrap();
        e.fork(Fork::new(Create::new(grandchild.clone()), fork.clone())).await.unwrap();
        e.delete(&source).await.unwrap();
        e.delete(&fork).await.unwrap();
        for id in [&source, &fork] {
            assert_eq!(e.head(id).await.unwrap_err().code(), ErrorCode::StreamGone);
            assert_eq!(e.delete(id).await.unwrap_err().code(), ErrorCode::StreamGone);
            let append = e.append(Append::new(id.clone(), &b"x"[..])).await;
            assert_eq!(append.unwrap_err().code(), ErrorCode::StreamGone);
            assert_eq!(e.create(Create::new(id.clone())).await.unwrap_err().code(), ErrorCode::StreamGone);
            let refork = e.fork(Fork::new(Create::new(sid("h", "refork")), id.clone())).await;
            assert_eq!(refork.unwrap_err().code(), ErrorCode::StreamGone);
        }
        assert_eq!(all(&e, &grandchild).await, b"firstsecondthird");
        e.delete(&grandchild).await.unwrap();
        wait_for(&e, &fork, ErrorCode::StreamNotFound).await;
        wait_for(&e, &source, ErrorCode::StreamNotFound).await;
        e.create(Create::new(source.clone())).await.unwrap();
    });
}

#[test]
fn an_expiring_fork_releases_its_source() {
    let e = open(2, 4);
    block_on(async {
        let (source, fork) = setup(&e).await;
        e.fork(Fork::new(Create::new(fork.clone()).ttl_s(1), source.clone())).await.unwrap();
        e.delete(&source).await.unwrap();
        assert_eq!(e.head(&source).await.unwrap_err().code(), ErrorCode::StreamGone);
        // The fork expires by its own TTL (real clock), then the source goes.
        wait_for(&e, &fork, ErrorCode::StreamNotFound).await;
        wait_for(&e, &source, ErrorCode::StreamNotFound).await;
    });
}

#[test]
fn forks_and_tombstones_survive_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let config = || Config::new(dir.path()).cores(2).groups(4);
    let (source, fork) = {
        let e = Engine::open(config()).unwrap();
        let ids = block_on(async {
            let (source, fork) = setup(&e).await;
            e.fork(Fork::new(Create::new(fork.clone()), source.clone()).at(ForkPoint::Offset(5)))
                .await
                .unwrap();
            e.delete(&source).await.unwrap();
            (source, fork)
        });
        block_on(e.shutdown()).unwrap();
        ids
    };
    let e = Engine::open(config()).unwrap();
    block_on(async {
        assert_eq!(all(&e, &fork).await, b"first");
        assert_eq!(e.head(&source).await.unwrap_err().code(), ErrorCode::StreamGone);
        e.delete(&fork).await.unwrap();
        wait_for(&e, &source, ErrorCode::StreamNotFound).await;
    });
}

#[test]
fn a_fork_into_another_bucket_keeps_its_copy_through_a_purge() {
    let e = open(2, 4);
    block_on(async {
        let (source, _) = setup(&e).await;
        let fork = sid("other", "copy");
        e.fork(Fork::new(Create::new(fork.clone()), source.clone())).await.unwrap();
        e.purge_bucket(source.bucket()).await.unwrap();
        assert_eq!(e.head(&source).await.unwrap_err().code(), ErrorCode::BucketNotFound);
        assert_eq!(all(&e, &fork).await, b"firstsecondthird");
        // The fork's later removal owes an unpin to a purged source: a no-op.
        e.delete(&fork).await.unwrap();
        let deadline = Instant::now() + Duration::from_secs(20);
        while e.metrics().groups.iter().any(|g| g.fork_outbox > 0) {
            assert!(Instant::now() < deadline, "the fork outbox never drained");
            std::thread::sleep(Duration::from_millis(20));
        }
    });
}
