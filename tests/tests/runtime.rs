//! The thread-per-core runtime: routing, mailboxes, group independence,
//! live readers, admission, snapshots across engines, metrics, and the
//! handle's behaviour under several async runtimes.

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use rill::{Append, Create, Engine, ErrorClass, ErrorCode, Read};
use rill_tests::{find_stream, open, open_with, sid, Gate};

// SPEC §1 placement + DESIGN routing: 4096 streams created and appended
// concurrently from 64 tasks reach every core and most groups; every
// append lands once.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn fan_in_from_64_tasks_reaches_every_core_and_most_groups() {
    let e = open(2, 64);
    let engine = e.engine.clone();
    let mut tasks = Vec::new();
    for t in 0..64 {
        let engine = engine.clone();
        tasks.push(tokio::spawn(async move {
            for i in 0..64 {
                let id = sid("fan", &format!("t{t}-s{i}"));
                engine.create(Create::new(id.clone())).await.unwrap();
                let r =
                    engine.append(Append::new(id.clone(), format!("{t}:{i}").into_bytes())).await.unwrap();
                assert_eq!(r.start_offset, 0);
            }
        }));
    }
    for t in tasks {
        t.await.unwrap();
    }
    let m = engine.metrics();
    assert_eq!(m.accepted_appends, 4096);
    assert_eq!(m.streams, 4096);
    assert!(m.cores.iter().all(|c| c.accepted_appends > 0), "every core got appends: {:?}", m.cores);
    let groups_used = m.groups.iter().filter(|g| g.accepted_appends > 0).count();
    assert!(groups_used * 4 > 64 * 3, "only {groups_used} of 64 groups used");
    // SPEC §8: per-core and per-group sums equal the totals.
    let by_core: u64 = m.cores.iter().map(|c| c.routed_requests).sum();
    let by_group: u64 = m.groups.iter().map(|g| g.routed_requests).sum();
    assert_eq!(by_core, m.routed_requests);
    assert_eq!(by_group, m.routed_requests);
    assert_eq!(m.groups.iter().map(|g| g.accepted_appends).sum::<u64>(), m.accepted_appends);
    assert_eq!(m.groups.iter().map(|g| g.applied_mutations).sum::<u64>(), m.applied_mutations);
    assert_eq!(m.routed_requests, 8192);
    assert_eq!(m.applied_mutations, 8192);
    assert!(m.append_latency.count >= 4096);
    // Spot-check reads.
    for t in [0, 31, 63] {
        let id = sid("fan", &format!("t{t}-s7"));
        let r = engine.read(Read::new(id)).await.unwrap();
        assert_eq!(&r.payload[..], format!("{t}:7").as_bytes());
    }
}

// Issue contract: groups on one core do not block each other. One group's
// log submission is held at a gate; another group on the same core keeps
// answering; the held append completes once the gate opens.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_blocked_group_does_not_stall_its_core() {
    let (config, _dir) = rill_tests::config(1, 8);
    let probe = Engine::open(config.clone().groups(8)).unwrap();
    let slow = find_stream(&probe, "b", |p| p.group == 3);
    let fast = find_stream(&probe, "b", |p| p.group == 5);
    drop(probe);
    let gate = Gate::closed_for(3);
    let engine = Engine::open(config.log_factory(gate.log_factory())).unwrap();
    assert_eq!(engine.locate(&slow).core, engine.locate(&fast).core);

    let e2 = engine.clone();
    let slow_id = slow.clone();
    let held = tokio::spawn(async move { e2.create(Create::new(slow_id)).await });
    while gate.waiting() == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    // The other group on the same core answers while group 3 is held.
    engine.create(Create::new(fast.clone())).await.unwrap();
    for i in 0..20u64 {
        let r = engine.append(Append::new(fast.clone(), &b"0123456789"[..])).await.unwrap();
        assert_eq!(r.start_offset, i * 10);
    }
    assert!(!held.is_finished(), "the held group must still be waiting");
    assert_eq!(gate.waiting(), 1);
    gate.open();
    assert!(!held.await.unwrap().unwrap().already_exists);
    engine.append(Append::new(slow.clone(), &b"after"[..])).await.unwrap();
    engine.shutdown().await.unwrap();
}

// SPEC §6 seam: nothing is acknowledged or readable before the log says it
// is durable; SPEC §4: uncommitted bytes per group are bounded and the
// excess fails fast with a temporary error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn replies_wait_for_durability_and_uncommitted_bytes_are_bounded() {
    let gate = Gate::holding_durability();
    let e = open_with(1, 4, |c| {
        c.log_factory(gate.log_factory()).max_uncommitted_bytes_per_group(1000).max_payload_bytes(500)
    });
    let id = sid("b", "durable");
    let engine = e.engine.clone();
    let create = {
        let engine = engine.clone();
        let id = id.clone();
        tokio::spawn(async move { engine.create(Create::new(id)).await })
    };
    // The create is applied (its reply still waits for durability) before
    // the appends are sent; otherwise an append could arrive first, fail
    // with StreamNotFound and leave the loop below waiting for ever.
    let group = e.locate(&id).group as usize;
    while e.metrics().groups[group].streams == 0 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let mut appends = Vec::new();
    for _ in 0..2 {
        let engine = engine.clone();
        let id = id.clone();
        appends.push(tokio::spawn(async move { engine.append(Append::new(id, vec![7u8; 400])).await }));
    }
    while e.metrics().groups[e.locate(&id).group as usize].uncommitted_bytes < 800 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let over = engine.append(Append::new(id.clone(), vec![8u8; 400])).await.unwrap_err();
    assert_eq!(over.code(), ErrorCode::UncommittedBackpressure);
    assert_eq!(over.class(), ErrorClass::Temporary);
    assert!(matches!(
        over.kind(),
        rill::ErrorKind::UncommittedBackpressure { before: 800, after: 1200, limit: 1000, .. }
    ));
    // A read of the group waits for durability too.
    let read = {
        let engine = engine.clone();
        let id = id.clone();
        tokio::spawn(async move { engine.read(Read::new(id)).await })
    };
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert!(!create.is_finished() && !read.is_finished() && appends.iter().all(|a| !a.is_finished()));
    gate.open();
    create.await.unwrap().unwrap();
    for a in appends {
        a.await.unwrap().unwrap();
    }
    assert_eq!(read.await.unwrap().unwrap().payload.len(), 800);
    let retried = engine.append(Append::new(id.clone(), vec![8u8; 400])).await.unwrap();
    assert_eq!(retried.start_offset, 800);
    assert_eq!(e.metrics().uncommitted_backpressure_events, 1);
}

// SPEC §2 Live read: a waiter completes on append and on close.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiters_complete_on_append_and_on_close() {
    let e = open(2, 8);
    let id = sid("b", "live");
    e.create(Create::new(id.clone())).await.unwrap();
    let engine = e.engine.clone();
    let mut waiters = Vec::new();
    for _ in 0..3 {
        let engine = engine.clone();
        let id = id.clone();
        waiters.push(tokio::spawn(async move {
            engine.wait_read(Read::new(id).offset(0), Duration::from_secs(30)).await
        }));
    }
    while e.metrics().live_waiters < 3 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    engine.append(Append::new(id.clone(), &b"news"[..])).await.unwrap();
    for w in waiters {
        let r = w.await.unwrap().unwrap();
        assert_eq!(&r.payload[..], b"news");
        assert!(!r.closed);
    }
    // Three readers at the same offset shared one read.
    assert!(e.metrics().cores.iter().map(|c| c.shared_read_hits).sum::<u64>() >= 2);

    let at_tail = {
        let engine = engine.clone();
        let id = id.clone();
        tokio::spawn(async move { engine.wait_read(Read::new(id).offset(4), Duration::from_secs(30)).await })
    };
    while e.metrics().live_waiters < 1 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    engine.close(&id).await.unwrap();
    let r = at_tail.await.unwrap().unwrap();
    assert!(r.payload.is_empty() && r.closed && r.up_to_date);
    assert_eq!(e.metrics().live_waiters, 0);
}

// SPEC §2 Live read: timeout returns empty and up to date; a dropped waiter
// is removed from its core promptly.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn waiter_timeout_and_cancellation() {
    let e = open(1, 2);
    let id = sid("b", "timeout");
    e.create(Create::new(id.clone()).initial_payload(&b"ab"[..])).await.unwrap();
    let r = e.wait_read(Read::new(id.clone()).offset(2), Duration::from_millis(30)).await.unwrap();
    assert!(r.payload.is_empty() && r.up_to_date && !r.closed);
    assert_eq!(r.next_offset, 2);

    let engine = e.engine.clone();
    let waiter = {
        let id = id.clone();
        tokio::spawn(
            async move { engine.wait_read(Read::new(id).offset(2), Duration::from_secs(3600)).await },
        )
    };
    while e.metrics().live_waiters < 1 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    waiter.abort();
    let mut polls = 0;
    while e.metrics().live_waiters > 0 {
        polls += 1;
        assert!(polls < 5000, "dropped waiter was never removed");
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

// SPEC §4: live waiters per core are capped; the next waiter fails fast
// with a temporary error.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn live_waiter_cap_rejects_the_next_waiter() {
    let e = open_with(1, 2, |c| c.live_waiters_per_core(4));
    let id = sid("b", "cap");
    e.create(Create::new(id.clone())).await.unwrap();
    let mut parked = Vec::new();
    for _ in 0..4 {
        let engine = e.engine.clone();
        let id = id.clone();
        parked.push(tokio::spawn(
            async move { engine.wait_read(Read::new(id), Duration::from_secs(60)).await },
        ));
    }
    while e.metrics().live_waiters < 4 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    let err = e.wait_read(Read::new(id.clone()), Duration::from_secs(60)).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::LiveReadBackpressure);
    assert!(err.is_temporary());
    assert_eq!(e.metrics().live_read_backpressure_events, 1);
    e.append(Append::new(id.clone(), &b"go"[..])).await.unwrap();
    for p in parked {
        assert_eq!(&p.await.unwrap().unwrap().payload[..], b"go");
    }
}

// SPEC §7: a group snapshot installed on a second engine of the same shape
// reads back identically and accepts the next append at the right offset.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn group_snapshot_moves_to_a_second_engine() {
    let a = open(2, 8);
    let b = open(2, 8);
    let id = sid("b", "moving");
    a.create(Create::new(id.clone()).content_type("text/plain")).await.unwrap();
    a.append(Append::new(id.clone(), &b"hello "[..]).producer("p", 0, 0)).await.unwrap();
    a.append(Append::new(id.clone(), &b"world"[..]).producer("p", 0, 1)).await.unwrap();
    a.set_attrs(&id, r#"{"title":"t"}"#).await.unwrap();
    let group = a.locate(&id).group;
    let snapshot = a.snapshot_group(group).await.unwrap();
    assert_eq!(snapshot.group, group);
    let installed = b.install_group_snapshot(snapshot.clone()).await.unwrap();
    assert_eq!(installed, snapshot.commit_index);

    let ra = a.read(Read::new(id.clone())).await.unwrap();
    let rb = b.read(Read::new(id.clone())).await.unwrap();
    assert_eq!(ra, rb);
    assert_eq!(a.head(&id).await.unwrap(), b.head(&id).await.unwrap());
    assert_eq!(b.get_attrs(&id).await.unwrap().as_deref(), Some(r#"{"title":"t"}"#));
    // Producer state came along: a retry is deduplicated, the next seq lands
    // at the tail.
    let dup = b.append(Append::new(id.clone(), &b"world"[..]).producer("p", 0, 1)).await.unwrap();
    assert!(dup.deduplicated && dup.start_offset == 6);
    let next = b.append(Append::new(id.clone(), &b"!"[..]).producer("p", 0, 2)).await.unwrap();
    assert_eq!((next.start_offset, next.next_offset), (11, 12));
    // The second engine's snapshot of that group equals the first's plus
    // one append, and re-snapshotting the source is byte-identical.
    assert_eq!(a.snapshot_group(group).await.unwrap().bytes, snapshot.bytes);

    // Placement checks before routing.
    let wrong_shape = open(2, 16);
    let err = wrong_shape.install_group_snapshot(snapshot.clone()).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::ShapeMismatch);
    let mut moved = snapshot.clone();
    moved.group = (group + 1) % 8;
    assert_eq!(b.install_group_snapshot(moved).await.unwrap_err().code(), ErrorCode::PlacementMismatch);
    let mut garbage = snapshot;
    garbage.bytes = Bytes::from_static(b"not a snapshot");
    assert_eq!(b.install_group_snapshot(garbage).await.unwrap_err().code(), ErrorCode::Corrupted);
}

// Issue contract: the handle is Clone + Send + Sync and its futures run on
// any runtime: a plain thread with block_on, and a glommio task.
#[test]
fn handle_works_from_plain_threads_and_glommio_tasks() {
    fn assert_handle<T: Clone + Send + Sync + 'static>() {}
    assert_handle::<Engine>();
    let e = open(2, 8);
    let mut threads = Vec::new();
    for t in 0..4 {
        let engine = e.engine.clone();
        threads.push(std::thread::spawn(move || {
            futures::executor::block_on(async {
                let id = sid("threads", &format!("t{t}"));
                engine.create(Create::new(id.clone())).await.unwrap();
                for i in 0..50u64 {
                    let r = engine.append(Append::new(id.clone(), &b"xy"[..])).await.unwrap();
                    assert_eq!(r.start_offset, i * 2);
                }
            })
        }));
    }
    for t in threads {
        t.join().unwrap();
    }
    let engine = e.engine.clone();
    let handle = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .spawn(move || async move {
            let id = sid("glommio", "g");
            engine.create(Create::new(id.clone())).await.unwrap();
            engine.append(Append::new(id.clone(), &b"from glommio"[..])).await.unwrap();
            engine.read(Read::new(id)).await.unwrap().payload
        })
        .unwrap();
    assert_eq!(&handle.join().unwrap()[..], b"from glommio");
}

// Issue contract: shutdown stops the cores cleanly; later calls fail with a
// persistent ShuttingDown; dropping the last handle does not hang.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn shutdown_and_drop() {
    let e = open(2, 8);
    let id = sid("b", "bye");
    e.create(Create::new(id.clone())).await.unwrap();
    let parked = {
        let engine = e.engine.clone();
        let id = id.clone();
        tokio::spawn(async move { engine.wait_read(Read::new(id), Duration::from_secs(3600)).await })
    };
    while e.metrics().live_waiters < 1 {
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
    e.shutdown().await.unwrap();
    assert_eq!(parked.await.unwrap().unwrap_err().code(), ErrorCode::ShuttingDown);
    let err = e.append(Append::new(id.clone(), &b"late"[..])).await.unwrap_err();
    assert_eq!(err.code(), ErrorCode::ShuttingDown);
    assert_eq!(err.class(), ErrorClass::Persistent);
    e.shutdown().await.unwrap();

    // Drop without shutdown, with clones alive on other threads until the end.
    let f = open(2, 8);
    let clone = f.engine.clone();
    let t = std::thread::spawn(move || {
        futures::executor::block_on(clone.create(Create::new(sid("b", "d")))).unwrap();
        drop(clone);
    });
    t.join().unwrap();
    drop(f);
}

// SPEC §4: a full mailbox is counted; with the Reject policy the sender gets
// Overloaded (temporary) and nothing is half-applied.
#[test]
fn full_mailbox_under_reject_policy() {
    let gate = Gate::holding_durability();
    let e = open_with(1, 1, |c| {
        c.mailbox_capacity(2)
            .group_queue_depth(2)
            .mailbox_full(rill::MailboxFull::Reject)
            .log_factory(gate.log_factory())
    });
    let engine = Arc::new(e.engine.clone());
    // Durability is held, so requests pile up; fire many without awaiting.
    let mut pending = Vec::new();
    let mut rejected = 0;
    for i in 0..64 {
        let engine = engine.clone();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let r = futures::executor::block_on(engine.create(Create::new(sid("b", &format!("full-{i}")))));
            let _ = tx.send(r.map(|_| ()));
        });
        pending.push(rx);
    }
    std::thread::sleep(Duration::from_millis(100));
    gate.open();
    for rx in pending {
        match rx.recv().unwrap() {
            Ok(()) => {}
            Err(err) => {
                assert_eq!(err.code(), ErrorCode::Overloaded);
                assert!(err.is_temporary());
                rejected += 1;
            }
        }
    }
    let m = e.metrics();
    assert!(rejected > 0, "some requests must have been refused");
    assert_eq!(m.overloaded_events, rejected);
    assert_eq!(m.streams, 64 - rejected, "refused creates left nothing behind");
}
