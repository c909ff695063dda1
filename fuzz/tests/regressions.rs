//! Regression tests for bugs the decoder targets and the simulation found,
//! one per bug, each named after it (FUZZING.md lists them with how they
//! were found).

use rill_shard::ErrorCode;

// FORMAT.md "`rill.shape`": a shape file that does not parse is
// `Corrupted`. One that was not UTF-8 text was reported as an I/O error
// (found by the `shape_file` target on its `not-utf8` seed).
#[test]
fn shape_file_that_is_not_utf8_is_corrupted() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(rill::SHAPE_FILE), b"rill-shape 1\ngroups \xff7\ncores 1\n").unwrap();
    let config = rill::Config::new(dir.path()).cores(1).groups(7).pin_threads(false);
    let Err(err) = rill::Engine::open(config) else { panic!("a garbled shape file opened") };
    assert_eq!(err.code(), ErrorCode::Corrupted, "{err:?}");
}

/// An engine of one core and one group in `dir` that replays its WAL at
/// the next open (no checkpoint at shutdown).
fn one_group(dir: &std::path::Path) -> rill::Engine {
    let config = rill::Config::new(dir).cores(1).groups(1).pin_threads(false).checkpoint_on_shutdown(false);
    rill::Engine::open(config).unwrap()
}

fn read_all(engine: &rill::Engine, id: &rill::StreamId) -> rill::Result<Vec<u8>> {
    let reply = futures::executor::block_on(engine.read(rill::Read::new(id.clone())))?;
    Ok(reply.payload.to_vec())
}

// SPEC §7 + §6: an installed group snapshot is a logged mutation, so it
// survives a restart. An install whose commit index is more than one above
// the group's was logged fine but made recovery fail ("group 0 jumps from
// index 0 to 3") and the engine refuse to open (found by the simulation,
// seed 0; `recover` now accepts any forward jump for an Install record).
#[test]
fn install_that_jumps_the_commit_index_survives_recovery() {
    use futures::executor::block_on;
    let (source, target) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let id = rill::StreamId::new("b", "s").unwrap();
    let a = one_group(source.path());
    block_on(a.create(rill::Create::new(id.clone()))).unwrap();
    block_on(a.append(rill::Append::new(id.clone(), &b"one"[..]))).unwrap();
    block_on(a.append(rill::Append::new(id.clone(), &b"two"[..]))).unwrap();
    let snapshot = block_on(a.snapshot_group(0)).unwrap();
    assert_eq!(snapshot.commit_index, 3);
    block_on(a.shutdown()).unwrap();

    let b = one_group(target.path());
    assert_eq!(block_on(b.install_group_snapshot(snapshot)).unwrap(), 3);
    block_on(b.append(rill::Append::new(id.clone(), &b"three"[..]))).unwrap();
    block_on(b.shutdown()).unwrap();
    drop(b);

    let b = one_group(target.path());
    assert_eq!(read_all(&b, &id).unwrap(), b"onetwothree");
    block_on(b.shutdown()).unwrap();
}

// SPEC §7 + §6: installing a snapshot whose commit index is not above the
// group's own (a snapshot of an engine that is behind) used to be
// acknowledged and then lost at restart, because recovery skips records at
// or below a group's commit index (found by the simulation, whose installs
// include older captured snapshots). Such an install is now refused with a
// typed error and changes nothing; a later restart shows the group as it
// was.
#[test]
fn install_of_an_older_snapshot_survives_recovery() {
    use futures::executor::block_on;
    let (source, target) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let id = rill::StreamId::new("b", "s").unwrap();
    let a = one_group(source.path());
    block_on(a.create(rill::Create::new(id.clone()))).unwrap();
    block_on(a.append(rill::Append::new(id.clone(), &b"old"[..]))).unwrap();
    let snapshot = block_on(a.snapshot_group(0)).unwrap();
    block_on(a.shutdown()).unwrap();

    let b = one_group(target.path());
    let other = rill::StreamId::new("b", "t").unwrap();
    block_on(b.create(rill::Create::new(other.clone()))).unwrap();
    for _ in 0..3 {
        block_on(b.append(rill::Append::new(other.clone(), &b"x"[..]))).unwrap();
    }
    let err = block_on(b.install_group_snapshot(snapshot)).unwrap_err();
    assert_eq!(err.code(), rill::ErrorCode::BadRequest);
    assert_eq!(read_all(&b, &other).unwrap(), b"xxx", "a refused install changes nothing");
    block_on(b.shutdown()).unwrap();
    drop(b);

    let b = one_group(target.path());
    assert_eq!(read_all(&b, &other).unwrap(), b"xxx");
    assert!(read_all(&b, &id).is_err(), "the refused snapshot never landed");
    block_on(b.shutdown()).unwrap();
}

// ARCHITECTURE.md "Snapshots and retention": records entirely before the
// retained offset are dropped and their digests move from `live` to
// `evicted`; a record straddling it stays. Once records are flushed to a
// cold chunk, retention drops whole chunks only: three flushed records and
// retention past the first two leave all three live (and their cold bytes
// kept), where the same log without the flush evicts two. Head's integrity
// split then depends on when flushes ran (found while extending the
// harness to the cold tier). Chunk granularity is the documented behaviour
// (ARCHITECTURE.md, "Snapshots and retention"); this test records what
// per-record eviction would look like, should chunks ever keep per-record
// digests.
#[test]
#[ignore = "documented: retention evicts flushed records per chunk, not per record"]
fn retention_evicts_flushed_records_one_by_one() {
    use bytes::Bytes;
    use rill_shard::state::api::{Append, Create, PublishSnapshot};
    use rill_shard::state::command::{Command, FlushCommit, Op, PackCommit};
    use rill_shard::state::group::{FlushLimits, GroupLimits, GroupState};

    let limits = GroupLimits { max_hot_bytes: u64::MAX, ..GroupLimits::default() };
    let id = rill_shard::StreamId::new("b", "s").unwrap();
    let run = |state: &mut GroupState, op: Op| state.apply(&Command { now_ms: 1, op }, &mut Vec::new());
    let mut hot = GroupState::new(0, 1, limits);
    run(&mut hot, Op::from(Create::new(id.clone())));
    for payload in [&b"aaa"[..], b"bbb", b"ccc"] {
        run(&mut hot, Op::from(Append::new(id.clone(), Bytes::copy_from_slice(payload))));
    }
    let mut flushed = hot.clone();
    let plans = flushed.plan_flush(&FlushLimits { max_flush_bytes: 1 << 20, max_batch_bytes: 1 << 20 });
    let packs: Vec<PackCommit> = plans.iter().map(|plan| plan.commit(9)).collect();
    assert!(run(&mut flushed, Op::FlushCommit(FlushCommit { packs })).mutated);
    for state in [&mut hot, &mut flushed] {
        run(state, Op::from(PublishSnapshot::new(id.clone(), 7, Bytes::from_static(b"s"))));
        run(state, Op::AdvanceRetention { id: id.clone(), offset: 7 });
    }
    let (hot, flushed) = (hot.head(&id, 1).unwrap(), flushed.head(&id, 1).unwrap());
    assert_eq!(hot.integrity.evicted.records, 2);
    assert_eq!(flushed.integrity, hot.integrity, "the integrity split depends on whether a flush ran");
}

/// A group state and a clock, for the fork regressions below.
struct Group(rill_shard::state::group::GroupState, u64);

impl Group {
    fn new() -> Self {
        let limits = rill_shard::state::group::GroupLimits::default();
        Group(rill_shard::state::group::GroupState::new(0, 1, limits), 1_000_000)
    }

    fn ok(&mut self, op: rill_shard::state::command::Op) -> rill_shard::state::command::Response {
        let cmd = rill_shard::state::command::Command { now_ms: self.1, op };
        let applied = self.0.apply(&cmd, &mut Vec::new());
        applied.result.unwrap_or_else(|e| panic!("{:?}: {e}", cmd.op))
    }

    /// Forks `fork` from `source` (its whole `copy`, token `token`) and
    /// pins it, as `Engine::fork` does when both live in this group.
    fn fork(&mut self, source: &rill::StreamId, fork: &rill::StreamId, copy: &'static [u8], token: u64) {
        use rill_shard::state::command::{self, ForkCreate, ForkOrigin, ForkPin, ForkPinAck, Op};
        let source_incarnation = self.0.fork_source(source, self.1).unwrap().incarnation;
        let create = command::Create::from(rill::Create::new(fork.clone()).content_type("text/plain"));
        let origin = ForkOrigin {
            source: source.clone(),
            source_incarnation,
            token,
            point: rill::ForkPoint::Tail,
            end: copy.len() as u64,
        };
        let inherited = vec![bytes::Bytes::from_static(copy)];
        self.ok(Op::ForkCreate(Box::new(ForkCreate {
            create,
            more: Vec::new(),
            start: 0,
            inherited,
            origin,
        })));
        let pin = ForkPin { source: source.clone(), source_incarnation, token, fork: fork.clone() };
        self.ok(Op::ForkPin(pin));
        self.ok(Op::ForkPinAck(ForkPinAck { fork: fork.clone(), token, pinned: true }));
    }
}

// SPEC §2 "Forks", ARCHITECTURE.md "Forks across groups": expiring a
// pinned source is a soft delete, and "an expired pinned stream answers
// [`StreamGone`] even before the sweep removes it". Between its expiry and
// the sweep (up to `expiry_sweep_interval_ms` in the engine) it answered
// `StreamNotFound` to reads, heads and deletes, and only a create saw it
// gone, so a client could see 404 and then 410 (found by the group model
// test's first run with forks, `forks_match_the_model`; `lookup` now asks
// the fork book whether a pinned name is gone).
#[test]
fn an_expired_pinned_source_is_gone_before_its_sweep() {
    use rill_shard::state::command::Op;
    let (source, fork) = (rill::StreamId::new("b", "s").unwrap(), rill::StreamId::new("b", "f").unwrap());
    let mut g = Group::new();
    g.ok(Op::from(rill::Create::new(source.clone()).content_type("text/plain").ttl_s(1)));
    g.ok(Op::from(rill::Append::new(source.clone(), &b"hello"[..])));
    g.fork(&source, &fork, b"hello", 7);
    g.1 += 2_000;
    let read = g.0.read(&rill::Read::new(source.clone()), g.1).map(|_| ()).unwrap_err();
    assert_eq!(read.code(), ErrorCode::StreamGone, "{read}");
    assert_eq!(g.0.head_view(&source, g.1).unwrap_err().code(), ErrorCode::StreamGone);
    g.ok(Op::ExpireDue);
    assert_eq!(g.0.head_view(&source, g.1).unwrap_err().code(), ErrorCode::StreamGone, "and after it");
}

// SPEC §2 "Forks": a fork copies its source's records from the retained
// start, the first one's retained part included. `Engine::fork` read that
// part with one byte read, which stops at `max_read_bytes`, so when the
// retained start cut a record whose rest was longer than a read, the fork
// failed with `StreamConflict` ("source changed during the fork") though
// nothing had changed (found by the simulation's port of the copy, in 8 of
// the CI budget's 200 seeds; it reads the part in pieces now).
#[test]
fn a_fork_copies_a_cut_record_longer_than_a_read() {
    use futures::executor::block_on;
    let dir = tempfile::tempdir().unwrap();
    let mut limits = rill::Limits::default();
    limits.group.max_read_bytes = 16;
    let config = rill::Config::new(dir.path()).cores(1).groups(1).pin_threads(false).limits(limits);
    let e = rill::Engine::open(config).unwrap();
    let (source, fork) = (rill::StreamId::new("b", "s").unwrap(), rill::StreamId::new("b", "f").unwrap());
    let record: Vec<u8> = (0..60u8).collect();
    block_on(async {
        e.create(rill::Create::new(source.clone()).content_type("text/plain")).await.unwrap();
        e.append(rill::Append::new(source.clone(), record.clone())).await.unwrap();
        e.publish_snapshot(rill::PublishSnapshot::new(source.clone(), 10, &b"state"[..])).await.unwrap();
        assert_eq!(e.advance_retention(&source, 10).await.unwrap(), 10);
        let made = e.fork(rill::Fork::new(rill::Create::new(fork.clone()), source.clone())).await;
        assert!(made.is_ok_and(|r| !r.already_exists && r.next_offset == 60), "the fork failed");
        let mut copy = Vec::new();
        let mut offset = 10;
        while offset < 60 {
            let r = e.read(rill::Read::new(fork.clone()).offset(offset)).await.unwrap();
            copy.extend_from_slice(&r.payload);
            offset = r.next_offset;
        }
        assert_eq!(copy, record[10..]);
        e.shutdown().await.unwrap();
    });
}

// ARCHITECTURE.md "Forks across groups": "the fork holds a copy" of its
// prefix. `Engine::fork` logged the bytes its reads returned as they were,
// and a read of cold bytes is a view of the source's memory-mapped pack
// file, so a fork's hot records were that mapping: they kept the source's
// pack alive after its removal (its disk space, and its bucket's bytes
// after a purge) for as long as the fork stayed hot, and changed with the
// file (found by the simulation, seed 1113 of 5,000 operations: damage to
// the source's pack at rest changed the fork's hot copy and the oracle's
// logged command with it, `not-a-prefix`; the copy is taken out of the
// reads now).
#[test]
fn a_fork_holds_its_own_copy_of_cold_bytes() {
    use futures::executor::block_on;
    let dir = tempfile::tempdir().unwrap();
    let config = rill::Config::new(dir.path()).cores(1).groups(1).pin_threads(false).background_flush(false);
    let e = rill::Engine::open(config).unwrap();
    let (source, fork) = (rill::StreamId::new("a", "s").unwrap(), rill::StreamId::new("b", "f").unwrap());
    let marker = b"cold bytes of the source".to_vec();
    block_on(async {
        e.create(rill::Create::new(source.clone()).content_type("text/plain")).await.unwrap();
        e.append(rill::Append::new(source.clone(), marker.clone())).await.unwrap();
        assert_eq!(e.flush_cold().await.unwrap(), 1);
        e.fork(rill::Fork::new(rill::Create::new(fork.clone()), source.clone())).await.unwrap();
    });
    // The source's pack changes under its mapping (as damage at rest
    // would); the fork's copy must not.
    let packs: Vec<std::path::PathBuf> =
        std::fs::read_dir(dir.path().join("cold")).unwrap().flatten().map(|f| f.path()).collect();
    assert_eq!(packs.len(), 1, "{packs:?}");
    let mut bytes = std::fs::read(&packs[0]).unwrap();
    let at = bytes.windows(marker.len()).position(|w| w == marker).expect("the pack holds the bytes raw");
    bytes[at] ^= 0xff;
    {
        use std::io::{Seek, SeekFrom, Write};
        let mut file = std::fs::OpenOptions::new().write(true).open(&packs[0]).unwrap();
        file.seek(SeekFrom::Start(at as u64)).unwrap();
        file.write_all(&bytes[at..at + 1]).unwrap();
    }
    block_on(async {
        let read = e.read(rill::Read::new(fork.clone())).await.unwrap();
        assert_eq!(read.payload[..], marker[..], "the fork's copy changed with its source's pack");
        e.shutdown().await.unwrap();
    });
}

// SPEC §2 "Forks": once a source's last fork is deleted, the source's
// name is released. Not so when the fork is deleted while its creation is
// in flight and the fork keeper delivers the unpin its deletion owes
// before `Engine::fork` delivers its own pin: the unpin finds nothing to
// drop and is done, then the pin lands and names a fork that no longer
// exists, and nothing ever owes its unpin; deleting the source afterwards
// leaves a tombstone that answers `StreamGone` for good (found by the
// simulation, where fork calls and keeper rounds interleave step by step:
// 8 such pins in the CI budget's 200 seeds, which its release check
// counts instead of failing on). The engine no longer sends this
// sequence: `Engine::fork` pins only while its fork still owes the pin,
// under a lock the keeper's deliveries hold too; the state machine alone
// cannot tell, so this stays a known sequence; see FUZZING.md "Found".
#[test]
#[ignore = "a sequence the engine's pin lock prevents; the state machine alone leaks the pin (FUZZING.md)"]
fn a_pin_that_lands_after_its_forks_unpin_is_released() {
    use rill_shard::state::command::{self, ForkCreate, ForkOrigin, ForkOutboxDone, ForkPin, ForkUnpin, Op};
    let (source, fork) = (rill::StreamId::new("b", "s").unwrap(), rill::StreamId::new("b", "f").unwrap());
    let mut g = Group::new();
    g.ok(Op::from(rill::Create::new(source.clone()).content_type("text/plain")));
    g.ok(Op::from(rill::Append::new(source.clone(), &b"hello"[..])));
    let source_incarnation = g.0.fork_source(&source, g.1).unwrap().incarnation;
    // Step 3 of `Engine::fork`: the fork and its copy.
    let create = command::Create::from(rill::Create::new(fork.clone()).content_type("text/plain"));
    let origin = ForkOrigin {
        source: source.clone(),
        source_incarnation,
        token: 7,
        point: rill::ForkPoint::Tail,
        end: 5,
    };
    let inherited = vec![bytes::Bytes::from_static(b"hello")];
    g.ok(Op::ForkCreate(Box::new(ForkCreate { create, more: Vec::new(), start: 0, inherited, origin })));
    // A client deletes the fork; the keeper delivers the unpin it owes.
    g.ok(Op::Delete(fork.clone()));
    g.ok(Op::ForkUnpin(ForkUnpin { source: source.clone(), token: 7, fork: fork.clone() }));
    g.ok(Op::ForkOutboxDone(ForkOutboxDone { fork: fork.clone(), token: 7 }));
    // Step 4 of `Engine::fork` lands only now.
    g.ok(Op::ForkPin(ForkPin { source: source.clone(), source_incarnation, token: 7, fork: fork.clone() }));
    g.ok(Op::Delete(source.clone()));
    assert!(g.0.fork_outbox().is_empty(), "nothing is owed, so nothing will release it");
    let now = g.0.head_view(&source, g.1).map(|_| ()).unwrap_err();
    assert_eq!(now.code(), ErrorCode::StreamNotFound, "the source's only fork is gone: {now}");
}
