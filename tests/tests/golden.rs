//! Golden fixtures: every on-disk format, as bytes committed under
//! `tests/fixtures/`, with damaged variants (FORMAT.md).
//!
//! Each test builds the format's bytes from a fixed recipe and requires them
//! to equal the committed file, then decodes the committed file and checks
//! what it holds; the damaged variants must be refused with `Corrupted` (or,
//! for a cut WAL tail, read as a torn tail keeping what precedes it). So a
//! change to any format, on purpose or by accident, fails here until the
//! fixtures are regenerated (`RILL_BLESS=1 cargo test -p rill-tests --test
//! golden`) in the same commit as FORMAT.md and a version bump. The WAL
//! segments of versions 1 to 6 and the checkpoints of versions 2 to 5 are
//! what earlier releases wrote: blessing never rewrites them, and they must
//! keep opening, migrated.

use std::path::{Path, PathBuf};
use std::time::Duration;

use bytes::Bytes;
use rill::{Append, AppendBatch, Close, Create, ErrorCode};
use rill_shard::raft::checkpoint::{self, CheckpointMeta, RaftCheckpoint};
use rill_shard::raft::log_image::LogImage;
use rill_shard::raft::replica::restore;
use rill_shard::raft::types::{Member, Proposal, ProposalId};
use rill_shard::raft::wire::{RaftRecord, WireLogId, WireMembership, WirePayload, WireVote};
use rill_shard::state::api::{ForkOwed, ForkPoint, Receive, RetentionPolicy};
use rill_shard::state::command::{
    Command, ForkCreate, ForkOrigin, ForkOutboxDone, ForkPin, ForkPinAck, ForkUnpin, LeaseAcquire,
    LeaseRelease, LeaseRenew, MemberHeartbeat, MemberLeave, OffsetCommit, Op, QueueDeadLetters,
    QueuePolicySet, QueueSettle, RetentionSet,
};
use rill_shard::state::group::{GroupLimits, GroupState, HotOnly};
use rill_shard::wal::format::{encode_record, pad_to_block, RecordKind, SegmentHeader};
use rill_shard::wal::scan::{scan_segment, ScanEnd};
use rill_shard::wal::{raft_file, recovery};
use rill_tests::sid;

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures").join(name)
}

/// Compares `built` with the committed fixture (or writes it when
/// blessing) and returns the committed bytes.
fn golden(name: &str, built: &[u8]) -> Vec<u8> {
    let path = fixture(name);
    if std::env::var_os("RILL_BLESS").is_some() {
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, built).unwrap();
    }
    let committed = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        committed == built,
        "{name}: the format's bytes changed; bump its version, update FORMAT.md and regenerate with RILL_BLESS=1"
    );
    committed
}

/// The committed fixture of a previous format version, which this build
/// reads but no longer writes: never rewritten (not even when blessing),
/// and still what the recipe of its version builds, so the older commands
/// keep their encodings.
fn previous(name: &str, built: &[u8]) -> Vec<u8> {
    let path = fixture(name);
    let committed = std::fs::read(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    assert!(
        committed == built,
        "{name}: the recipe no longer builds what an earlier release wrote; old encodings must not change"
    );
    committed
}

/// A damaged copy of `bytes`: one byte at `at` flipped.
fn flipped(bytes: &[u8], at: usize) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out[at] ^= 0x5a;
    out
}

/// The commands every fixture is made of: creates, appends (one with a
/// producer), a batch, a close.
fn commands() -> Vec<Command> {
    let (a, b) = (sid("golden", "a"), sid("golden", "b"));
    let ops = vec![
        Op::from(Create::new(a.clone()).content_type("text/plain")),
        Op::from(Append::new(a.clone(), &b"hello"[..]).producer("writer", 1, 0)),
        Op::from(Create::new(b.clone()).ttl_s(60).initial_payload(&b"first"[..])),
        Op::from(AppendBatch::new(b.clone(), vec![Bytes::from_static(b"x"), Bytes::from_static(b"yz")])),
        Op::from(Append::new(a.clone(), &b" world"[..]).stream_seq("0001")),
        Op::from(Close::new(b)),
    ];
    ops.into_iter().enumerate().map(|(i, op)| Command { now_ms: 1_700_000_000_000 + i as u64, op }).collect()
}

/// The commands of a version 3 segment: [`commands`], then the two
/// multi-record commands version 3 adds.
fn commands_v3() -> Vec<Command> {
    let (a, c) = (sid("golden", "a"), sid("golden", "c"));
    let records = |list: &[&'static str]| list.iter().map(|r| Bytes::from_static(r.as_bytes())).collect();
    let mut all = commands();
    let lease = |group: &str, owner: &str| (a.clone(), group.to_string(), owner.to_string());
    let (id, group, owner) = lease("readers", "r1");
    let more = [
        Op::from(Append::records(a.clone(), records(&["[1]", "{\"k\":2}", "3"])).producer("writer", 1, 1)),
        Op::from(Create::new(c).content_type("application/json").initial_records(records(&["\"x\"", "[]"]))),
        Op::AcquireLease(LeaseAcquire {
            id: id.clone(),
            group: group.clone(),
            owner: owner.clone(),
            ttl_ms: 30_000,
        }),
        Op::CommitOffset(OffsetCommit {
            id: id.clone(),
            group: group.clone(),
            owner: owner.clone(),
            generation: 1,
            offset: 11,
        }),
        Op::RenewLease(LeaseRenew {
            id: id.clone(),
            group: group.clone(),
            owner: owner.clone(),
            generation: 1,
            ttl_ms: 60_000,
        }),
        Op::ReleaseLease(LeaseRelease { id, group, owner, generation: 1 }),
        Op::Heartbeat(MemberHeartbeat {
            bucket: "golden".into(),
            group: "readers".into(),
            consumer: "r1".into(),
            ttl_ms: 10_000,
        }),
        Op::Heartbeat(MemberHeartbeat {
            bucket: "golden".into(),
            group: "readers".into(),
            consumer: "r2".into(),
            ttl_ms: 10_000,
        }),
        Op::Leave(MemberLeave { bucket: "golden".into(), group: "readers".into(), consumer: "r2".into() }),
    ];
    let base = all.len() as u64;
    all.extend(
        more.into_iter()
            .enumerate()
            .map(|(i, op)| Command { now_ms: 1_700_000_000_100 + base + i as u64, op }),
    );
    all
}

/// A command of the version 4 or 6 recipe, made from the state before it
/// at its time.
type Step<'a> = Box<dyn Fn(&GroupState, u64) -> Op + 'a>;

/// The commands of a version 4 segment: [`commands_v3`], then the queue
/// group commands version 4 adds: a policy of one attempt, receives (each
/// made by admission from the state the commands before it built), an ack,
/// nacks, a message dead-lettered, redriven, dead-lettered again and
/// purged.
fn commands_v4() -> Vec<Command> {
    let a = sid("golden", "a");
    let mut all = commands_v3();
    let mut state = state_of(all.clone());
    let mut now = 1_700_000_000_200;
    let group = || "workers".to_string();
    let settle = |receipt, delay_ms| QueueSettle { id: a.clone(), group: group(), receipt, delay_ms };
    let receive = |state: &GroupState, now| {
        let req = Receive::new(&a, "workers").max_messages(3).visibility(Duration::from_secs(30));
        Op::QueueReceive(state.prepare_receive(&req, now, &HotOnly).unwrap())
    };
    let dead = || QueueDeadLetters { id: a.clone(), group: group() };
    let steps: Vec<Step<'_>> = vec![
        Box::new(|_: &GroupState, _| {
            Op::SetQueuePolicy(QueuePolicySet {
                id: a.clone(),
                group: group(),
                max_attempts: 1,
                max_in_flight: 8,
                start_offset: 0,
            })
        }),
        Box::new(receive),
        Box::new(|_: &GroupState, _| Op::QueueAck(settle(1, 0))),
        Box::new(|_: &GroupState, _| Op::QueueNack(settle(2, 0))),
        // Message 2 has had its one attempt: dead-lettered, fresh ones handed out.
        Box::new(receive),
        Box::new(|_: &GroupState, _| Op::RedriveDeadLetters(dead())),
        Box::new(receive),
        Box::new(|_: &GroupState, _| Op::QueueNack(settle(6, 0))),
        // Dead-lettered again; the three others are still invisible.
        Box::new(receive),
        Box::new(|_: &GroupState, _| Op::PurgeDeadLetters(dead())),
    ];
    for step in steps {
        now += 1;
        let cmd = Command { now_ms: now, op: step(&state, now) };
        assert!(state.apply(&cmd, &mut Vec::new()).mutated, "{cmd:?}");
        all.push(cmd);
    }
    all
}

/// The commands of a version 5 segment: [`commands_v4`], then the
/// retention commands version 5 adds: stream a kept until every consumer
/// group has consumed it, stream c for 50 ms, each reclaimed (the reclaim
/// made by admission from the state before it).
fn commands_v5() -> Vec<Command> {
    let (a, c) = (sid("golden", "a"), sid("golden", "c"));
    let mut all = commands_v4();
    let mut state = state_of(all.clone());
    let mut now = 1_700_000_000_300;
    let policy = |id: &rill::StreamId, consumed, max_age_ms| {
        Op::SetRetention(RetentionSet { id: id.clone(), consumed, max_age_ms })
    };
    for (id, consumed, age) in [(&a, true, None), (&c, false, Some(50))] {
        for reclaim in [false, true] {
            now += 1;
            let op = match reclaim {
                false => policy(id, consumed, age),
                true => Op::Reclaim(state.prepare_reclaim(id, now, &HotOnly).unwrap()),
            };
            let cmd = Command { now_ms: now, op };
            assert!(state.apply(&cmd, &mut Vec::new()).mutated, "{cmd:?}");
            all.push(cmd);
        }
    }
    all
}

/// A fork of `source` named `name`, as `Engine::fork` makes it from the
/// state before it: the source's content type and incarnation, a copy of
/// its records from its retained start up to `end` (what `point` resolves
/// to; the last record cut there), then `own` as the fork's first record.
fn fork_of(
    state: &GroupState,
    now: u64,
    (name, source): (&str, &str),
    token: u64,
    (point, end): (ForkPoint, u64),
    own: Option<&'static [u8]>,
) -> Op {
    let (id, source) = (sid("golden", name), sid("golden", source));
    let info = state.fork_source(&source, now).unwrap();
    let start = info.head.retained_offset;
    let inherited = state
        .stream(&source)
        .unwrap()
        .records()
        .filter(|(at, _)| (start..end).contains(at))
        .map(|(at, record)| record.slice(..record.len().min((end - at) as usize)))
        .collect();
    let mut create = Create::new(id).content_type(info.head.content_type.as_str());
    if let Some(own) = own {
        create = create.initial_payload(own);
    }
    let origin = ForkOrigin { source, source_incarnation: info.incarnation, token, point, end };
    Op::ForkCreate(Box::new(ForkCreate { create: create.into(), more: Vec::new(), start, inherited, origin }))
}

/// The commands of a version 6 segment: [`commands_v5`], then the fork
/// commands version 6 adds, both sides in this one group (the engine sends
/// the same commands when they are in two): stream s, forked into f (its
/// first record and part of its second), f forked into g (a fork of a
/// fork), a forked into h from its retained start (11) and h deleted again
/// with its unpin delivered; then s deleted while f pins it (a tombstone),
/// g deleted with its unpin left owed, and p forked from f with its pin
/// not yet sent. The checkpoint of these holds a fork book of every kind
/// of entry: a live source and a tombstone, a pinned and an unpinned
/// origin, an owed pin and an owed unpin.
fn commands_v6() -> Vec<Command> {
    let mut all = commands_v5();
    let mut state = state_of(all.clone());
    let mut now = 1_700_000_000_400;
    let id = |name: &str| sid("golden", name);
    let records = |list: &[&'static str]| list.iter().map(|r| Bytes::from_static(r.as_bytes())).collect();
    let pin = |state: &GroupState, source: &str, fork: &str, token| {
        let source_incarnation = state.stream(&id(source)).unwrap().incarnation();
        Op::ForkPin(ForkPin { source: id(source), source_incarnation, token, fork: id(fork) })
    };
    let ack = |fork: &str, token| Op::ForkPinAck(ForkPinAck { fork: id(fork), token, pinned: true });
    let steps: Vec<Step<'_>> = vec![
        Box::new(|_: &GroupState, _| {
            let create = Create::new(id("s")).content_type("text/plain");
            Op::from(create.initial_records(records(&["one", "two", "three"])))
        }),
        Box::new(|state: &GroupState, now| {
            let point = ForkPoint::IntoRecord { offset: 3, bytes: 2 };
            fork_of(state, now, ("f", "s"), 101, (point, 5), Some(b"+f"))
        }),
        Box::new(|state: &GroupState, _| pin(state, "s", "f", 101)),
        Box::new(|_: &GroupState, _| ack("f", 101)),
        Box::new(|state: &GroupState, now| fork_of(state, now, ("g", "f"), 102, (ForkPoint::Tail, 7), None)),
        Box::new(|state: &GroupState, _| pin(state, "f", "g", 102)),
        Box::new(|_: &GroupState, _| ack("g", 102)),
        Box::new(|state: &GroupState, now| {
            let point = ForkPoint::Records { offset: 11, count: 2 };
            fork_of(state, now, ("h", "a"), 103, (point, 21), None)
        }),
        Box::new(|state: &GroupState, _| pin(state, "a", "h", 103)),
        Box::new(|_: &GroupState, _| ack("h", 103)),
        Box::new(|_: &GroupState, _| Op::Delete(id("h"))),
        Box::new(|_: &GroupState, _| Op::ForkUnpin(ForkUnpin { source: id("a"), token: 103, fork: id("h") })),
        Box::new(|_: &GroupState, _| Op::ForkOutboxDone(ForkOutboxDone { fork: id("h"), token: 103 })),
        Box::new(|_: &GroupState, _| Op::Delete(id("s"))),
        Box::new(|_: &GroupState, _| Op::Delete(id("g"))),
        Box::new(|state: &GroupState, now| {
            fork_of(state, now, ("p", "f"), 104, (ForkPoint::Offset(5), 5), None)
        }),
    ];
    for step in steps {
        now += 1;
        let cmd = Command { now_ms: now, op: step(&state, now) };
        assert!(state.apply(&cmd, &mut Vec::new()).mutated, "{cmd:?}");
        all.push(cmd);
    }
    all
}

/// The commands of a segment of `version`.
fn commands_of(version: u16) -> Vec<Command> {
    match version {
        6.. => commands_v6(),
        5 => commands_v5(),
        4 => commands_v4(),
        3 => commands_v3(),
        _ => commands(),
    }
}

/// The group `commands` build (group 3 of 8).
fn state_of(commands: Vec<Command>) -> GroupState {
    state_in(3, commands)
}

/// Group `group` of 8 after `commands`.
fn state_in(group: u32, commands: Vec<Command>) -> GroupState {
    let mut state = GroupState::new(group, 8, GroupLimits::default());
    for cmd in commands {
        assert!(state.apply(&cmd, &mut Vec::new()).mutated, "{cmd:?}");
    }
    state
}

/// The group the version 1 and 2 commands build.
fn state() -> GroupState {
    state_of(commands())
}

/// The replicated group of the raft fixtures (group 4 of 8).
const RAFT_GROUP: u32 = 4;

/// A raft log id: the leader's term and node, and the entry's index.
fn raft_id(term: u64, node: u64, index: u64) -> WireLogId {
    WireLogId { term, node, index }
}

/// A proposal of node `node` carrying command `i` of [`commands`].
fn proposal(node: u64, seq: u64, i: usize) -> WirePayload {
    let id = ProposalId { node, boot: 0x5eed, seq };
    WirePayload::Normal(Box::new(Proposal { id, cmd: commands()[i].clone() }))
}

/// `records` with every vote as not granted, as a rebuilt log holds it.
fn ungranted(records: &[RaftRecord]) -> Vec<RaftRecord> {
    records
        .iter()
        .map(|r| match r {
            RaftRecord::Vote(vote) => RaftRecord::Vote(WireVote { committed: false, ..*vote }),
            other => other.clone(),
        })
        .collect()
}

/// The raft records of a version 7 segment, group 4's, as its leader (node
/// 1, term 2) logs them: the blank entry a new leader commits first, a
/// command it proposed, its vote, the committed hint. They are already the
/// fewest records that rebuild their log.
fn raft_records() -> Vec<RaftRecord> {
    vec![
        RaftRecord::Entry { log_id: raft_id(2, 1, 1), payload: WirePayload::Blank },
        RaftRecord::Entry { log_id: raft_id(2, 1, 2), payload: proposal(1, 1, 1) },
        RaftRecord::Vote(WireVote { term: 2, node: 1, committed: true }),
        RaftRecord::Committed(Some(raft_id(2, 1, 2))),
    ]
}

/// The index field of a raft record's WAL record: the log index of an
/// entry, else 0.
fn raft_index(record: &RaftRecord) -> u64 {
    match record {
        RaftRecord::Entry { log_id, .. } => log_id.index,
        _ => 0,
    }
}

/// A segment of `version` holding the commands as group 3's records, two
/// flushes, (version 2) an install reference after them and (version 7)
/// group 4's [`raft_records`] at the end.
fn segment(version: u16) -> Vec<u8> {
    let mut bytes = SegmentHeader { version, ..SegmentHeader::new(1, 7, 100) }.encode();
    let mut flush = Vec::new();
    let commands = commands_of(version);
    for (i, cmd) in commands.iter().enumerate() {
        let body = postcard::to_stdvec(cmd).unwrap();
        encode_record(&mut flush, 100 + i as u64, 3, 1 + i as u64, RecordKind::Command, &body).unwrap();
        if i == 2 {
            pad_to_block(&mut flush);
            bytes.append(&mut flush);
        }
    }
    let n = commands.len() as u64;
    if version >= 2 {
        encode_record(&mut flush, 100 + n, 3, n, RecordKind::InstallRef, &[7u8; 32]).unwrap();
    }
    if version >= 7 {
        for (i, record) in raft_records().iter().enumerate() {
            let (lsn, index) = (101 + n + i as u64, raft_index(record));
            encode_record(&mut flush, lsn, RAFT_GROUP, index, RecordKind::Raft, &record.encode()).unwrap();
        }
    }
    pad_to_block(&mut flush);
    bytes.append(&mut flush);
    bytes
}

// FORMAT.md "Write-ahead log segment": version 7 is what this build writes,
// versions 1 to 6 what earlier releases wrote; all read back to the same
// records, and damage is told from a torn tail.
#[test]
fn wal_segments_decode() {
    const CURRENT: u16 = rill_shard::wal::format::FORMAT_VERSION;
    assert_eq!(CURRENT, 7);
    for version in [1u16, 2, 3, 4, 5, 6, 7] {
        let name = format!("wal-v{version}.wal");
        let committed = match version {
            CURRENT => golden(&name, &segment(version)),
            _ => previous(&name, &segment(version)),
        };
        let scan = scan_segment(&committed).unwrap();
        assert_eq!(scan.header.map(|h| (h.version, h.core, h.seq)), Some((version, 1, 7)));
        assert_eq!(scan.end, ScanEnd::Clean);
        let commands: Vec<Command> = scan
            .records
            .iter()
            .filter(|r| r.kind == RecordKind::Command)
            .map(|r| postcard::from_bytes(r.body).unwrap())
            .collect();
        assert_eq!(commands, commands_of(version));
        // The commands, then (version 2 on) the install reference, then
        // (version 7 on) the raft records.
        let mut kinds = vec![RecordKind::Command; commands.len()];
        if version >= 2 {
            kinds.push(RecordKind::InstallRef);
        }
        if version >= 7 {
            kinds.extend(raft_records().iter().map(|_| RecordKind::Raft));
        }
        assert_eq!(scan.records.iter().map(|r| r.kind).collect::<Vec<_>>(), kinds);
        // The raft records decode, carry their group and index, and rebuild
        // the group's raft log.
        let raft: Vec<_> = scan.records.iter().filter(|r| r.kind == RecordKind::Raft).collect();
        let decoded: Vec<RaftRecord> = raft.iter().map(|r| RaftRecord::decode(r.body).unwrap()).collect();
        assert_eq!(decoded, if version >= 7 { raft_records() } else { Vec::new() });
        for (r, record) in raft.iter().zip(&decoded) {
            assert_eq!((r.group, r.index), (RAFT_GROUP, raft_index(record)), "{record:?}");
        }
        let bodies: Vec<Vec<u8>> = raft.iter().map(|r| r.body.to_vec()).collect();
        // A rebuilt log holds the vote as not granted (a restarted replica
        // must win a new term before it leads).
        assert_eq!(LogImage::rebuild(&bodies).unwrap().compacted(), ungranted(&decoded));
        // Version 6 holds every fork command; no earlier version holds one.
        let forks: std::collections::BTreeSet<&str> =
            commands.iter().filter_map(|c| fork_op_name(&c.op)).collect();
        assert_eq!(forks.len(), if version >= 6 { 5 } else { 0 }, "{forks:?}");

        // A flipped byte inside an earlier record is corruption.
        let first = scan.records[1].pos as usize + 30;
        let err = scan_segment(&flipped(&committed, first)).map(|_| ()).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Corrupted, "{err}");
        // A cut inside the last record is a torn tail keeping the rest.
        let last = scan.records.last().unwrap().pos as usize;
        let torn = &committed[..last + 10];
        let scan = scan_segment(torn).unwrap();
        assert!(matches!(scan.end, ScanEnd::TornTail { .. }), "{:?}", scan.end);
        assert_eq!(scan.records.len(), kinds.len() - 1);
    }
}

/// The records of the raft log fixture, group 4's on a follower (every
/// kind of record and of entry): a purge (the initial membership at index 0
/// is in a snapshot), a joint membership change its term 1 leader (node 1)
/// sent, cut off again when the leader of term 2 (node 3) replaced it, that
/// leader's vote, its blank entry and a command it proposed, and the
/// committed hint.
fn raft_log_records() -> Vec<RaftRecord> {
    let member =
        |n: u64| Member { raft_addr: format!("10.0.0.{n}:7000"), http_addr: format!("10.0.0.{n}:8080") };
    let membership = WireMembership {
        configs: vec![vec![1, 2, 3], vec![1, 2, 3, 4]],
        nodes: (1..=4).map(|n| (n, member(n))).collect(),
    };
    vec![
        RaftRecord::Purge { upto: raft_id(1, 1, 0) },
        RaftRecord::Entry { log_id: raft_id(1, 1, 1), payload: WirePayload::Membership(membership) },
        RaftRecord::Truncate { after: Some(raft_id(1, 1, 0)) },
        RaftRecord::Vote(WireVote { term: 2, node: 3, committed: true }),
        RaftRecord::Entry { log_id: raft_id(2, 3, 1), payload: WirePayload::Blank },
        RaftRecord::Entry { log_id: raft_id(2, 3, 2), payload: proposal(3, 7, 4) },
        RaftRecord::Committed(Some(raft_id(2, 3, 2))),
    ]
}

/// Version 1 of the raft log file, as an earlier release wrote it: the
/// frame of version 2 without `through`.
fn raft_log_file_v1(group: u32, bodies: &[Vec<u8>]) -> Vec<u8> {
    let mut out = b"RILLRLOG".to_vec();
    out.extend_from_slice(&1u16.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&group.to_le_bytes());
    out.extend_from_slice(&(bodies.len() as u32).to_le_bytes());
    for body in bodies {
        out.extend_from_slice(&(body.len() as u32).to_le_bytes());
        out.extend_from_slice(body);
    }
    let checksum = blake3::hash(&out);
    out.extend_from_slice(checksum.as_bytes());
    out
}

// FORMAT.md "Raft log file": the file of group 4, through WAL LSN 4242,
// decodes to its group, `through` and records, which decode and rebuild the
// group's raft log (the purge point, the two entries of term 2, the vote
// and the committed hint); a flipped byte anywhere, or a cut file, is
// `Corrupted`. The version 1 file an earlier release wrote still reads,
// as through 0 (it came before every WAL record).
#[test]
fn raft_log_file_decodes() {
    assert_eq!(raft_file::VERSION, 2);
    let records = raft_log_records();
    let bodies: Vec<Vec<u8>> = records.iter().map(RaftRecord::encode).collect();
    let committed = golden("raft-log-v2.log", &raft_file::encode(RAFT_GROUP, 4242, &bodies));
    assert_eq!((&committed[..8], &committed[8..10]), (&b"RILLRLOG"[..], &[2, 0][..]));
    let file = raft_file::RaftLogFile { group: RAFT_GROUP, through: 4242, records: bodies.clone() };
    assert_eq!(raft_file::decode(&committed).unwrap(), file);
    let v1 = previous("raft-log-v1.log", &raft_log_file_v1(RAFT_GROUP, &bodies));
    assert_eq!(raft_file::decode(&v1).unwrap(), raft_file::RaftLogFile { through: 0, ..file });
    let decoded: Vec<RaftRecord> = bodies.iter().map(|b| RaftRecord::decode(b).unwrap()).collect();
    assert_eq!(decoded, records);
    let image = LogImage::rebuild(&bodies).unwrap();
    assert_eq!(image.len(), 2);
    let [purge, _, _, vote, blank, command, hint] = <[RaftRecord; 7]>::try_from(records).unwrap();
    assert_eq!(image.compacted(), ungranted(&[purge, blank, command, vote, hint]));
    for bytes in [&committed, &v1] {
        for at in 0..bytes.len() {
            let err = raft_file::decode(&flipped(bytes, at)).unwrap_err();
            assert_eq!(err.code(), ErrorCode::Corrupted, "byte {at}: {err}");
        }
        for len in [0, 20, 28, bytes.len() - 33, bytes.len() - 1] {
            let err = raft_file::decode(&bytes[..len]).unwrap_err();
            assert_eq!(err.code(), ErrorCode::Corrupted, "cut to {len}: {err}");
        }
    }
}

/// The raft checkpoint fixture, group 4's ([`RAFT_GROUP`]) at entry 40 of
/// term 3 (leader node 2): the group state after the version 3 commands
/// (streams, a producer, records, a consumer group's lease, offset and
/// members) as a group snapshot of the current version, and the membership
/// of voters 1, 2 and 3 set by the entry at index 0.
fn raft_checkpoint() -> RaftCheckpoint {
    let member =
        |n: u64| Member { raft_addr: format!("10.0.0.{n}:7000"), http_addr: format!("10.0.0.{n}:8080") };
    let membership =
        WireMembership { configs: vec![vec![1, 2, 3]], nodes: (1..=3).map(|n| (n, member(n))).collect() };
    RaftCheckpoint {
        group: RAFT_GROUP,
        meta: CheckpointMeta {
            applied: Some(raft_id(3, 2, 40)),
            membership_at: Some(raft_id(1, 1, 0)),
            membership,
        },
        state: state_in(RAFT_GROUP, commands_v3()).encode_snapshot(),
    }
}

// FORMAT.md "Raft checkpoint": the checkpoint of group 4 decodes to its
// meta and group snapshot; restoring it gives back the group state (the
// same snapshot bytes), its applied log id and its membership, or refuses a
// checkpoint whose snapshot holds another group; a flipped byte anywhere,
// or a cut file, is `Corrupted`. The state inside is a group snapshot of
// the current version, so blessing a new group snapshot version rewrites
// this file too.
#[test]
fn raft_checkpoint_decodes() {
    assert_eq!(checkpoint::VERSION, 1);
    let built = raft_checkpoint();
    let committed = golden("raft-checkpoint-v1.snap", &built.encode());
    assert_eq!((&committed[..8], &committed[8..10]), (&b"RILLRSNP"[..], &[1, 0][..]));
    assert_eq!((&committed[10..12], &committed[12..16]), (&[0, 0][..], &RAFT_GROUP.to_le_bytes()[..]));
    let decoded = RaftCheckpoint::decode(&committed).unwrap();
    assert_eq!(decoded, built);

    let (state, applied, membership, snapshot) = restore(&decoded, &GroupLimits::default()).unwrap();
    assert_eq!(state, state_in(RAFT_GROUP, commands_v3()));
    assert_eq!((state.group(), state.group_count(), state.commit_index()), (RAFT_GROUP, 8, 15));
    assert_eq!(state.encode_snapshot(), decoded.state);
    assert_eq!(state.committed_offset(&sid("golden", "a"), "readers", 0).unwrap(), Some(11));
    assert_eq!(applied.map(|id| id.index), Some(40));
    assert_eq!(applied, Some(raft_id(3, 2, 40).to_log_id()));
    assert_eq!(*membership.log_id(), Some(raft_id(1, 1, 0).to_log_id()));
    assert_eq!(membership.voter_ids().collect::<Vec<_>>(), [1, 2, 3]);
    assert_eq!(WireMembership::of(membership.membership()), built.meta.membership);
    assert_eq!((snapshot.meta.last_log_id, &snapshot.meta.last_membership), (applied, &membership));
    assert_eq!(snapshot.snapshot, decoded.state);

    // A checkpoint that names another group than its snapshot holds decodes
    // (the file is well formed) but does not restore.
    let other = RaftCheckpoint { group: RAFT_GROUP + 1, ..built.clone() };
    let err =
        restore(&RaftCheckpoint::decode(&other.encode()).unwrap(), &GroupLimits::default()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Corrupted, "{err}");

    for at in 0..committed.len() {
        let err = RaftCheckpoint::decode(&flipped(&committed, at)).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Corrupted, "byte {at}: {err}");
    }
    let meta_end = 20 + u32::from_le_bytes(committed[16..20].try_into().unwrap()) as usize;
    let end = committed.len();
    for len in [0, 16, 20, meta_end, meta_end + 8, end / 2, end - 33, end - 32, end - 1] {
        let err = RaftCheckpoint::decode(&committed[..len]).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Corrupted, "cut to {len}: {err}");
    }
}

/// The name of a fork command (`None` for any other).
fn fork_op_name(op: &Op) -> Option<&'static str> {
    match op {
        Op::ForkCreate(_) => Some("create"),
        Op::ForkPin(_) => Some("pin"),
        Op::ForkPinAck(_) => Some("ack"),
        Op::ForkUnpin(_) => Some("unpin"),
        Op::ForkOutboxDone(_) => Some("outbox done"),
        _ => None,
    }
}

/// The retention policies of the version 5 recipe, and what its reclaims
/// dropped: stream a up to what both its groups have consumed (the
/// readers' committed offset and the workers' oldest message in flight are
/// both 11), stream c whole.
fn check_retention(state: &GroupState) {
    let (a, c) = (state.stream(&sid("golden", "a")).unwrap(), state.stream(&sid("golden", "c")).unwrap());
    let policy = |s: &rill_shard::state::group::StreamState| {
        let p = s.retention_policy();
        (p.consumed, p.max_age)
    };
    assert_eq!(policy(a), (true, None));
    assert_eq!(policy(c), (false, Some(Duration::from_millis(50))));
    assert_eq!((a.retained_offset(), c.retained_offset()), (11, c.next_offset()));
}

/// A stream's hot records, as `(offset, bytes)`.
fn records_of(state: &GroupState, name: &str) -> Vec<(u64, Vec<u8>)> {
    let stream = state.stream(&sid("golden", name)).unwrap_or_else(|| panic!("stream {name}"));
    stream.records().map(|(at, r)| (*at, r.to_vec())).collect()
}

/// The error code a head of `name` answers.
fn head_error(state: &GroupState, name: &str, now: u64) -> ErrorCode {
    state.head_view(&sid("golden", name), now).unwrap_err().code()
}

// FORMAT.md "Group snapshot": a checkpoint file decodes to the state it was
// taken of, fork book included; a flipped byte is refused.
#[test]
fn checkpoint_decodes() {
    let built = state_of(commands_v6());
    let committed = golden("checkpoint-v6.snap", &built.encode_snapshot());
    assert_eq!(&committed[8..10], &[6, 0]);
    let decoded = GroupState::decode_snapshot(&committed, GroupLimits::default()).unwrap();
    assert_eq!(decoded, built);
    assert_eq!((decoded.group(), decoded.group_count(), decoded.commit_index()), (3, 8, 45));
    check_retention(&decoded);
    // The forks hold their copies at their sources' offsets.
    let own =
        |list: &[(u64, &str)]| list.iter().map(|(at, r)| (*at, r.as_bytes().to_vec())).collect::<Vec<_>>();
    assert_eq!(records_of(&decoded, "f"), own(&[(0, "one"), (3, "tw"), (5, "+f")]));
    assert_eq!(records_of(&decoded, "p"), own(&[(0, "one"), (3, "tw")]));
    // The fork book: s is a tombstone pinned by f (its bytes released); a
    // is pinned no more (h's unpin was delivered); f is still pinned by
    // the deleted g, which owes f its unpin; p still owes f its pin.
    let now = 1_700_000_000_500;
    assert_eq!(head_error(&decoded, "s", now), ErrorCode::StreamGone);
    assert_eq!(decoded.fork_source(&sid("golden", "s"), now).unwrap_err().code(), ErrorCode::StreamGone);
    assert!(decoded.stream(&sid("golden", "s")).is_none());
    for gone in ["g", "h"] {
        assert_eq!(head_error(&decoded, gone, now), ErrorCode::StreamNotFound, "{gone}");
    }
    let f = sid("golden", "f");
    let f_incarnation = decoded.stream(&f).unwrap().incarnation();
    assert_eq!(
        decoded.fork_outbox(),
        vec![
            ForkOwed::Unpin { fork: sid("golden", "g"), token: 102, source: f.clone() },
            ForkOwed::Pin {
                fork: sid("golden", "p"),
                token: 104,
                source: f,
                source_incarnation: f_incarnation
            },
        ]
    );
    assert_eq!(decoded.forks().outbox_len(), 2);
    // What the pins decide: f, pinned by g, deletes softly; a, no longer
    // pinned, deletes outright.
    let mut after = decoded.clone();
    for name in ["f", "a"] {
        let cmd = Command { now_ms: now, op: Op::Delete(sid("golden", name)) };
        assert!(after.apply(&cmd, &mut Vec::new()).mutated, "{cmd:?}");
    }
    assert_eq!(head_error(&after, "f", now), ErrorCode::StreamGone);
    assert_eq!(head_error(&after, "a", now), ErrorCode::StreamNotFound);
    for at in [9, committed.len() / 2, committed.len() - 1] {
        let err = GroupState::decode_snapshot(&flipped(&committed, at), GroupLimits::default()).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Corrupted, "byte {at}: {err}");
    }
    for len in [committed.len() - 33, committed.len() - 1] {
        let err = GroupState::decode_snapshot(&committed[..len], GroupLimits::default()).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Corrupted, "cut to {len}: {err}");
    }
    // The same bytes labelled version 5 (checksum made right) are refused,
    // never misread: a version 5 body ends before the fork book.
    let err = GroupState::decode_snapshot(&relabelled(&committed, 5), GroupLimits::default()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Corrupted, "{err}");
}

// A version 5 checkpoint (what the previous release wrote, before forks)
// decodes migrated, with an empty fork book, and re-encodes as version 6.
#[test]
fn a_version_5_checkpoint_decodes_migrated() {
    let committed = std::fs::read(fixture("checkpoint-v5.snap")).unwrap();
    assert_eq!(&committed[8..10], &[5, 0]);
    let decoded = GroupState::decode_snapshot(&committed, GroupLimits::default()).unwrap();
    assert_eq!(decoded, state_of(commands_v5()));
    assert_eq!((decoded.group(), decoded.group_count(), decoded.commit_index()), (3, 8, 29));
    check_retention(&decoded);
    assert!(decoded.fork_outbox().is_empty());
    assert_eq!(decoded.forks().outbox_len(), 0);
    for at in [9, committed.len() / 2, committed.len() - 1] {
        let err = GroupState::decode_snapshot(&flipped(&committed, at), GroupLimits::default()).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Corrupted, "byte {at}: {err}");
    }
    // The same bytes labelled version 6 are refused (a version 6 body ends
    // with a fork book), and so are they labelled version 4 (a version 4
    // stream state has no retention rule).
    for version in [6, 4] {
        let err = GroupState::decode_snapshot(&relabelled(&committed, version), GroupLimits::default())
            .unwrap_err();
        assert_eq!(err.code(), ErrorCode::Corrupted, "version {version}: {err}");
    }
    let again = decoded.encode_snapshot();
    assert_eq!(&again[8..10], &[6, 0]);
    assert_eq!(GroupState::decode_snapshot(&again, GroupLimits::default()).unwrap(), decoded);
}

/// `bytes` with its version field set to `version` and its checksum made
/// right again.
fn relabelled(bytes: &[u8], version: u16) -> Vec<u8> {
    let mut out = bytes.to_vec();
    out[8..10].copy_from_slice(&version.to_le_bytes());
    let body_end = out.len() - 32;
    let sum = *blake3::hash(&out[..body_end]).as_bytes();
    out[body_end..].copy_from_slice(&sum);
    out
}

// A version 4 checkpoint (what an earlier release wrote, before
// retention policies) decodes migrated, with no stream holding a policy,
// and re-encodes as version 6.
#[test]
fn a_version_4_checkpoint_decodes_migrated() {
    let committed = std::fs::read(fixture("checkpoint-v4.snap")).unwrap();
    assert_eq!(&committed[8..10], &[4, 0]);
    let decoded = GroupState::decode_snapshot(&committed, GroupLimits::default()).unwrap();
    assert_eq!(decoded, state_of(commands_v4()));
    assert_eq!((decoded.group(), decoded.group_count(), decoded.commit_index()), (3, 8, 25));
    let now = 1_700_000_000_300;
    let backlog = decoded.backlog(&sid("golden", "a"), "workers", now, &HotOnly).unwrap();
    assert_eq!((backlog.ready, backlog.in_flight, backlog.dead), (0, 3, 0), "{backlog:?}");
    assert_eq!(decoded.live_consumers("golden", "readers", 1_700_000_000_200), 1);
    assert_eq!(decoded.committed_offset(&sid("golden", "a"), "readers", 0).unwrap(), Some(11));
    let a = decoded.stream(&sid("golden", "a")).unwrap();
    let times: Vec<(u64, u64)> = a.times().iter().copied().collect();
    assert_eq!(times, vec![(0, 1_700_000_000_001), (5, 1_700_000_000_004), (11, 1_700_000_000_106)]);
    for at in [9, committed.len() / 2, committed.len() - 1] {
        let err = GroupState::decode_snapshot(&flipped(&committed, at), GroupLimits::default()).unwrap_err();
        assert_eq!(err.code(), ErrorCode::Corrupted, "byte {at}: {err}");
    }
    assert!(decoded.streams().all(|s| s.retention_policy() == RetentionPolicy::default()));
    // The same bytes labelled version 3 (checksum made right) are refused:
    // version 3 had no queue groups, so such a file is not one it wrote.
    let err = GroupState::decode_snapshot(&relabelled(&committed, 3), GroupLimits::default()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Corrupted, "{err}");
    assert!(err.to_string().contains("version 3"), "{err}");
    let again = decoded.encode_snapshot();
    assert_eq!(&again[8..10], &[6, 0]);
    assert_eq!(GroupState::decode_snapshot(&again, GroupLimits::default()).unwrap(), decoded);
}

// A version 3 checkpoint (what an earlier release wrote, before queue
// groups) decodes migrated, and re-encodes as version 6.
#[test]
fn a_version_3_checkpoint_decodes() {
    let committed = std::fs::read(fixture("checkpoint-v3.snap")).unwrap();
    assert_eq!(&committed[8..10], &[3, 0]);
    let decoded = GroupState::decode_snapshot(&committed, GroupLimits::default()).unwrap();
    assert_eq!(decoded, state_of(commands_v3()));
    assert_eq!(decoded.commit_index(), 15);
    assert_eq!(decoded.committed_offset(&sid("golden", "a"), "readers", 0).unwrap(), Some(11));
    let again = decoded.encode_snapshot();
    assert_eq!(&again[8..10], &[6, 0]);
    assert_eq!(GroupState::decode_snapshot(&again, GroupLimits::default()).unwrap(), decoded);
}

// A version 2 checkpoint (what an earlier release wrote, before record
// times) still decodes, migrated: the same streams, records and sums, each
// hot record stamped with its stream's creation time.
#[test]
fn a_version_2_checkpoint_decodes_migrated() {
    let committed = std::fs::read(fixture("checkpoint-v2.snap")).unwrap();
    assert_eq!(&committed[8..10], &[2, 0]);
    let decoded = GroupState::decode_snapshot(&committed, GroupLimits::default()).unwrap();
    let expected = state();
    assert_eq!(decoded.commit_index(), expected.commit_index());
    for name in ["a", "b"] {
        let id = sid("golden", name);
        let (got, want) = (decoded.stream(&id).unwrap(), expected.stream(&id).unwrap());
        assert_eq!(got.records().collect::<Vec<_>>(), want.records().collect::<Vec<_>>(), "{name}");
        assert_eq!(got.settled_integrity(), want.settled_integrity(), "{name}");
        let first = got.records().next().unwrap().0;
        let times: Vec<(u64, u64)> = got.times().iter().copied().collect();
        assert_eq!(times, vec![(first, got.created_at_ms())], "{name}");
        assert_eq!(got.last_at_ms(), got.created_at_ms());
    }
    // Re-encoded, it is a version 6 checkpoint that decodes to itself.
    let again = decoded.encode_snapshot();
    assert_eq!(&again[8..10], &[6, 0]);
    assert_eq!(GroupState::decode_snapshot(&again, GroupLimits::default()).unwrap(), decoded);
}

// A version 1 data directory (a checkpoint and a version 1 segment) still
// opens through the real recovery, to the same state.
#[test]
fn a_version_1_data_directory_recovers() {
    let dir = tempfile::tempdir().unwrap();
    let wal = recovery::wal_dir(dir.path(), 1);
    std::fs::create_dir_all(&wal).unwrap();
    std::fs::create_dir_all(recovery::checkpoint_dir(dir.path())).unwrap();
    std::fs::copy(fixture("wal-v1.wal"), wal.join("0000000000000007.wal")).unwrap();
    let recovered = recovery::recover(dir.path(), 8, &GroupLimits::default()).unwrap();
    assert_eq!(recovered.states[3], state());
    assert_eq!(recovered.replayed_records, 6);
}

// A version 5 data directory (its checkpoint and segment) opens through the
// real recovery, migrated; and the version 6 segment, logged after that
// checkpoint by a version 6 build, replays its fork commands on top of it.
#[test]
fn a_version_5_data_directory_recovers() {
    for (segment, expected, replayed) in [("wal-v5.wal", commands_v5(), 0), ("wal-v6.wal", commands_v6(), 16)]
    {
        let dir = tempfile::tempdir().unwrap();
        let wal = recovery::wal_dir(dir.path(), 1);
        let checkpoints = recovery::checkpoint_dir(dir.path());
        std::fs::create_dir_all(&wal).unwrap();
        std::fs::create_dir_all(&checkpoints).unwrap();
        std::fs::copy(fixture("checkpoint-v5.snap"), checkpoints.join("group-00003.snap")).unwrap();
        std::fs::copy(fixture(segment), wal.join("0000000000000007.wal")).unwrap();
        let recovered = recovery::recover(dir.path(), 8, &GroupLimits::default()).unwrap();
        assert_eq!(recovered.states[3], state_of(expected), "{segment}");
        assert_eq!(recovered.replayed_records, replayed, "{segment}");
    }
}

// FORMAT.md "Write-ahead log segment", version 7, and SPEC §1: a
// replicated group's raft records outlive a consolidation in its raft log
// file, and a single-node engine refuses the directory instead of ignoring
// them.
#[test]
fn a_replicated_data_directory_keeps_its_raft_log_and_is_refused_single_node() {
    let dir = tempfile::tempdir().unwrap();
    let wal = recovery::wal_dir(dir.path(), 1);
    std::fs::create_dir_all(&wal).unwrap();
    std::fs::copy(fixture("wal-v7.wal"), wal.join("0000000000000007.wal")).unwrap();
    let recovered = recovery::recover(dir.path(), 8, &GroupLimits::default()).unwrap();
    assert_eq!(recovered.raft[RAFT_GROUP as usize].len(), raft_records().len());
    assert!(recovered.has_raft_records());
    recovery::consolidate(dir.path(), &recovered, 2).unwrap();
    let again = recovery::recover(dir.path(), 8, &GroupLimits::default()).unwrap();
    assert_eq!(again.raft, recovered.raft, "the raft log file carries the records over");
    let err = rill::Engine::open(rill::Config::new(dir.path()).cores(2).groups(8)).unwrap_err();
    assert_eq!(err.code(), ErrorCode::ShapeMismatch, "{err}");
    assert!(err.to_string().contains("replicated groups"), "{err}");
}

/// The two slices of the pack fixtures, with their record indexes: stream
/// `a` holds "hello" and " world" (one time), stream `b` "first", "x" and
/// "yz" (two times).
fn pack_indexes() -> [rill_cold::RecordIndexBuf; 2] {
    let mut a = rill_cold::RecordIndexBuf::new();
    a.push(0, 1_700_000_000_001).unwrap();
    a.push(5, 1_700_000_000_001).unwrap();
    let mut b = rill_cold::RecordIndexBuf::new();
    b.push(0, 1_700_000_000_002).unwrap();
    b.push(5, 1_700_000_000_003).unwrap();
    b.push(6, 1_700_000_000_003).unwrap();
    [a, b]
}

/// The pack fixture of `version`: version 3 is what this build writes,
/// version 1 what builds before the record index wrote (the indexes are
/// not written); the version 1 fixture was committed by such a build.
fn pack(version: u16) -> Vec<u8> {
    let parts_a: [&[u8]; 2] = [b"hello", b" world"];
    let parts_b: [&[u8]; 3] = [b"first", b"x", b"yz"];
    let [index_a, index_b] = pack_indexes();
    let slices = [
        rill_cold::SliceSpec { stream: "a", incarnation: 1, start: 0, parts: &parts_a, index: &index_a },
        rill_cold::SliceSpec { stream: "b", incarnation: 3, start: 0, parts: &parts_b, index: &index_b },
    ];
    if version == rill_cold::PACK_FORMAT_VERSION {
        rill_cold::encode_pack(3, 5 << 16, "golden", &slices).unwrap()
    } else {
        rill_cold::pack::encode_pack_version(version, 3, 5 << 16, "golden", &slices).unwrap()
    }
}

// FORMAT.md "Cold pack file": a pack of either version read decodes to its
// slices (version 3 with their record indexes, version 1 without); a
// flipped data byte fails that slice's check, a flipped table byte or a cut
// file does not open.
#[test]
fn pack_decodes() {
    assert_eq!(rill_cold::PACK_FORMAT_VERSION, 3);
    for version in [1u16, 3] {
        let committed = golden(&format!("pack-v{version}.pack"), &pack(version));
        let reader = rill_cold::PackReader::from_bytes(Bytes::from(committed.clone())).unwrap();
        assert_eq!(reader.format_version(), version);
        assert_eq!((reader.group(), reader.pack_id(), reader.bucket()), (3, 5 << 16, "golden"));
        assert_eq!(reader.slice_bytes(0).unwrap(), b"hello world");
        assert_eq!(reader.slice_bytes(1).unwrap(), b"firstxyz");
        if version == 1 {
            assert!(reader.slice_records(0).unwrap().is_none() && reader.slice_records(1).unwrap().is_none());
        } else {
            let a = reader.slice_records(0).unwrap().unwrap();
            assert_eq!(a.iter().collect::<Vec<_>>(), [(0, 1_700_000_000_001), (5, 1_700_000_000_001)]);
            assert_eq!((a.len(), a.run_count(), a.end(1)), (2, 1, Some(11)));
            let b = reader.slice_records(1).unwrap().unwrap();
            assert_eq!(
                b.iter().collect::<Vec<_>>(),
                [(0, 1_700_000_000_002), (5, 1_700_000_000_003), (6, 1_700_000_000_003)]
            );
            assert_eq!((b.len(), b.run_count()), (3, 2));
            assert_eq!((b.containing(5), b.containing(7), b.end(2)), (Some(1), Some(2), Some(8)));
            assert_eq!(b.first_at_or_after_time(1_700_000_000_003), 1);
            let mut rebuilt = rill_cold::RecordIndexBuf::new();
            rebuilt.extend_from(&b).unwrap();
            assert_eq!(rebuilt, pack_indexes()[1]);
        }
        let data = reader.slice_meta(1).unwrap().data_offset as usize;
        let damaged = rill_cold::PackReader::from_bytes(Bytes::from(flipped(&committed, data + 2))).unwrap();
        assert_eq!(damaged.slice_bytes(0).unwrap(), b"hello world", "other slices still serve");
        assert!(damaged.slice_bytes(1).is_err(), "the damaged slice is refused");
        let table = reader.layout().table_offset as usize;
        for at in table..committed.len() - 64 {
            let err = rill_cold::PackReader::from_bytes(Bytes::from(flipped(&committed, at))).unwrap_err();
            assert!(err.is_corrupted(), "table byte {at}: {err}");
        }
        assert!(rill_cold::PackReader::from_bytes(Bytes::from(committed[..committed.len() - 3].to_vec()))
            .is_err());
    }
}
