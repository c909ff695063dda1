//! Leases and committed offsets end to end (SPEC §2 "Leases and committed
//! offsets"): fencing of a paused owner on the engine's clock, and a lease
//! with its committed offset surviving a clean restart and `kill -9`.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use rill::consumer::target_partition_count;
use rill::{AcquireLease, Append, Config, Create, Engine, ErrorClass, ErrorCode, ErrorKind, Heartbeat};
use rill_tests::sid;

fn config(dir: &Path) -> Config {
    Config::new(dir).cores(2).groups(4)
}

// A paused owner: its lease lapses, a second owner acquires (generation +
// 1, resuming from the committed offset) and commits; the first owner's
// late commit and renewal are refused with OwnershipLost and change
// nothing.
#[test]
fn a_paused_owner_is_fenced_by_the_next_generation() {
    let dir = tempfile::tempdir().unwrap();
    futures::executor::block_on(async {
        let e = Engine::open(config(dir.path())).unwrap();
        let id = sid("b", "work");
        e.create(Create::new(id.clone()).initial_payload(&b"0123456789"[..])).await.unwrap();
        let first = e
            .acquire_lease(AcquireLease::new(&id, "readers", "first").ttl(Duration::from_millis(1_000)))
            .await
            .unwrap();
        assert_eq!((first.generation, first.committed), (1, None));
        assert_eq!(e.commit_offset(&first, 4).await.unwrap(), 4);
        let held = e.acquire_lease(AcquireLease::new(&id, "readers", "second")).await.unwrap_err();
        assert_eq!((held.code(), held.class()), (ErrorCode::LeaseHeld, ErrorClass::Temporary));
        assert!(matches!(held.kind(), ErrorKind::LeaseHeld { holder, .. } if holder == "first"), "{held}");

        std::thread::sleep(Duration::from_millis(1_300)); // "first" pauses past its TTL
        let second = e.acquire_lease(AcquireLease::new(&id, "readers", "second")).await.unwrap();
        assert_eq!((second.generation, second.committed), (2, Some(4)));
        e.append(Append::new(id.clone(), &b"abc"[..])).await.unwrap();
        assert_eq!(e.commit_offset(&second, 12).await.unwrap(), 12);

        let late = e.commit_offset(&first, 13).await.unwrap_err();
        assert_eq!((late.code(), late.class()), (ErrorCode::OwnershipLost, ErrorClass::Permanent));
        assert_eq!(
            e.renew_lease(&first, Duration::from_secs(1)).await.unwrap_err().code(),
            ErrorCode::OwnershipLost
        );
        assert_eq!(e.release_lease(&first).await.unwrap_err().code(), ErrorCode::OwnershipLost);
        assert_eq!(
            e.committed_offset(&id, "readers").await.unwrap(),
            Some(12),
            "the late commit changed nothing"
        );
        // Offsets never go back, and never pass the tail.
        assert_eq!(e.commit_offset(&second, 5).await.unwrap(), 12);
        assert_eq!(e.commit_offset(&second, 14).await.unwrap_err().code(), ErrorCode::OffsetOutOfRange);
        // Bad input is a clear error before anything is sent.
        let bad =
            e.acquire_lease(AcquireLease::new(&id, "readers", "x").ttl(Duration::ZERO)).await.unwrap_err();
        assert_eq!(bad.code(), ErrorCode::BadRequest);
        e.shutdown().await.unwrap();
    });
}

// A lease and its committed offset survive a clean restart, with and
// without the shutdown checkpoint (so from checkpoints and from the log).
#[test]
fn a_lease_and_its_offset_survive_restarts() {
    for checkpoint_on_shutdown in [false, true] {
        let dir = tempfile::tempdir().unwrap();
        let id = sid("b", "kept");
        let lease = futures::executor::block_on(async {
            let e = Engine::open(config(dir.path()).checkpoint_on_shutdown(checkpoint_on_shutdown)).unwrap();
            e.create(Create::new(id.clone()).initial_payload(&b"abcdef"[..])).await.unwrap();
            let lease = e
                .acquire_lease(AcquireLease::new(&id, "readers", "r1").ttl(Duration::from_secs(600)))
                .await
                .unwrap();
            e.commit_offset(&lease, 3).await.unwrap();
            let lease = e.renew_lease(&lease, Duration::from_secs(900)).await.unwrap();
            e.shutdown().await.unwrap();
            lease
        });
        futures::executor::block_on(async {
            let e = Engine::open(config(dir.path())).unwrap();
            assert_eq!(e.committed_offset(&id, "readers").await.unwrap(), Some(3));
            let held = e.acquire_lease(AcquireLease::new(&id, "readers", "r2")).await.unwrap_err();
            assert_eq!(held.code(), ErrorCode::LeaseHeld, "the lease outlived the restart");
            // The holder's lease value from before the restart still works.
            assert_eq!(e.commit_offset(&lease, 6).await.unwrap(), 6);
            e.release_lease(&lease).await.unwrap();
            let next = e.acquire_lease(AcquireLease::new(&id, "readers", "r2")).await.unwrap();
            assert_eq!((next.generation, next.committed), (3, Some(6)));
            e.shutdown().await.unwrap();
        });
    }
}

// kill -9: every commit the child saw acknowledged is in the committed
// offset after recovery, and the child's lease (an hour long) is still
// held: another owner is refused, the child itself re-acquires at the
// next generation.
#[test]
fn committed_offsets_survive_kill_9() {
    let dir = tempfile::tempdir().unwrap();
    let mut child = Command::new(env!("CARGO_BIN_EXE_lease_child"))
        .arg(dir.path())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("start lease_child");
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let mut last: Option<(u64, u64)> = None;
    let mut commits = 0;
    let deadline = Instant::now() + Duration::from_secs(60);
    while commits < 200 && Instant::now() < deadline {
        let Ok(line) = rx.recv_timeout(Duration::from_secs(30)) else { break };
        let words: Vec<&str> = line.split_whitespace().collect();
        if let ["C", generation, offset] = words[..] {
            last = Some((generation.parse().unwrap(), offset.parse().unwrap()));
            commits += 1;
        }
    }
    child.kill().expect("SIGKILL the child");
    child.wait().unwrap();
    // Lines the child wrote before the kill may still be in the pipe.
    while let Ok(line) = rx.recv_timeout(Duration::from_millis(200)) {
        if let ["C", generation, offset] = line.split_whitespace().collect::<Vec<_>>()[..] {
            last = Some((generation.parse().unwrap(), offset.parse().unwrap()));
        }
    }
    let (generation, acked) = last.expect("the child acknowledged commits before it was killed");
    assert_eq!(generation, 1);
    futures::executor::block_on(async {
        let e = Engine::open(config(dir.path())).unwrap();
        let id = sid("b", "leased");
        let committed = e.committed_offset(&id, "readers").await.unwrap().expect("a committed offset");
        let tail = e.head(&id).await.unwrap().tail_offset;
        assert!(committed >= acked && committed <= tail, "acked {acked}, committed {committed}, tail {tail}");
        let held = e.acquire_lease(AcquireLease::new(&id, "readers", "someone-else")).await.unwrap_err();
        assert!(matches!(held.kind(), ErrorKind::LeaseHeld { holder, .. } if holder == "child"), "{held}");
        let again = e.acquire_lease(AcquireLease::new(&id, "readers", "child")).await.unwrap();
        assert_eq!((again.generation, again.committed), (2, Some(committed)));
        e.shutdown().await.unwrap();
    });
}

// Membership: heartbeats count live consumers (routed to the group of the
// bucket and consumer group), a lapsed consumer stops counting, leave is
// idempotent, and the count feeds the balanced share of each consumer.
#[test]
fn membership_counts_live_consumers() {
    let dir = tempfile::tempdir().unwrap();
    futures::executor::block_on(async {
        let e = Engine::open(config(dir.path())).unwrap();
        let beat = |who: &str, ms: u64| Heartbeat::new("b", "projectors", who).ttl(Duration::from_millis(ms));
        assert_eq!(e.heartbeat(beat("a", 60_000)).await.unwrap().live_consumers, 1);
        assert_eq!(e.heartbeat(beat("b", 60_000)).await.unwrap().live_consumers, 2);
        assert_eq!(e.heartbeat(beat("c", 1_000)).await.unwrap().live_consumers, 3);
        assert_eq!(target_partition_count(16, 3, 1), 7);
        std::thread::sleep(Duration::from_millis(1_200)); // "c" stops beating
        let live = e.heartbeat(beat("a", 60_000)).await.unwrap().live_consumers;
        assert_eq!(live, 2);
        assert_eq!(target_partition_count(16, live as usize, 1), 9);
        e.leave("b", "projectors", "b").await.unwrap();
        e.leave("b", "projectors", "b").await.unwrap(); // idempotent
        e.leave("b", "projectors", "never-joined").await.unwrap();
        assert_eq!(e.heartbeat(beat("a", 60_000)).await.unwrap().live_consumers, 1);
        let bad = e.heartbeat(beat("a", 0)).await.unwrap_err();
        assert_eq!(bad.code(), ErrorCode::BadRequest);
        e.shutdown().await.unwrap();
        // Membership is logged: it survives a restart.
        let e = Engine::open(config(dir.path())).unwrap();
        assert_eq!(e.heartbeat(beat("d", 60_000)).await.unwrap().live_consumers, 2);
        e.shutdown().await.unwrap();
    });
}
