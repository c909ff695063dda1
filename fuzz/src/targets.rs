//! Decoder fuzz targets: one plain function per on-disk or wire format
//! (FORMAT.md), shared by the libFuzzer targets in `fuzz/cargo-fuzz/` and
//! by the stable-Rust corpus test `fuzz/tests/decoders.rs`.
//!
//! Every target takes arbitrary bytes and panics only when the decoder it
//! drives breaks its contract (DESIGN principle 5, SPEC §2 "Integrity",
//! §6): arbitrary bytes give `Ok` or a typed `Corrupted` error, never a
//! panic; what decodes re-encodes to exactly the same bytes; and where a
//! target can build a valid encoding from its input (through a
//! [`Cursor`]) it checks that the encoding round-trips and that damage to
//! it is detected. Allocation and running time are bounded by the decoders'
//! own checks (lengths are compared with the input before anything is
//! allocated); libFuzzer's `-rss_limit_mb`/`-timeout` enforce it in fuzzing
//! runs, the corpus test bounds the time per input.

use std::collections::BTreeMap;
use std::time::Duration;

use bytes::Bytes;
use rill_shard::raft::checkpoint::{CheckpointMeta, RaftCheckpoint};
use rill_shard::raft::log_image::LogImage;
use rill_shard::raft::replica::restore;
use rill_shard::raft::types::{Member, Proposal, ProposalId};
use rill_shard::raft::wire::{RaftRecord, WireLogId, WireMembership, WirePayload, WireVote};
use rill_shard::state::api::{Append, AppendBatch, Create, ForkPoint, PublishSnapshot, Receive};
use rill_shard::state::command::{
    self, Command, ForkCreate, ForkOrigin, ForkOutboxDone, ForkPin, ForkPinAck, ForkUnpin, Op, QueueSettle,
    Response, RetentionSet,
};
use rill_shard::state::group::{GroupLimits, GroupState, HotOnly};
use rill_shard::wal::format::{
    decode_record_at, encode_record, next_block, pad_to_block, RecordAt, RecordKind, RecordRef,
    SegmentHeader, HEADER_LEN, MAGIC, RECORD_HEADER_LEN,
};
use rill_shard::wal::raft_file::{self, RaftLogFile};
use rill_shard::wal::scan::{scan_segment, ScanEnd, SegmentScan};
use rill_shard::{ErrorCode, StreamId};

use crate::cursor::Cursor;

/// A decoder target: panics when the decoder breaks its contract.
pub type Target = fn(&[u8]);

/// Every target by name; the name is also its corpus directory
/// (`fuzz/corpus/<name>/`) and its libFuzzer binary.
pub const TARGETS: &[(&str, Target)] = &[
    ("wal_header", wal_header),
    ("wal_record", wal_record),
    ("wal_segment", wal_segment),
    ("group_snapshot", group_snapshot),
    ("group_snapshot_body", group_snapshot_body),
    ("command", command),
    ("command_apply", command_apply),
    ("recovery", recovery),
    ("raft_record", raft_record),
    ("raft_log_file", raft_log_file),
    ("raft_checkpoint", raft_checkpoint),
    ("shape_file", shape_file),
    ("cluster_file", cluster_file),
    ("cold_pack", cold_pack),
    ("http_request", crate::http_target::http_request),
];

/// The target called `name`.
pub fn by_name(name: &str) -> Option<Target> {
    TARGETS.iter().find(|(n, _)| *n == name).map(|(_, t)| *t)
}

/// Asserts that `result` is a `Corrupted` error.
fn expect_corrupted<T: std::fmt::Debug>(result: rill_shard::Result<T>, what: impl FnOnce() -> String) {
    match result {
        Ok(value) => panic!("{} went unnoticed: decoded {value:?}", what()),
        Err(e) => assert_eq!(e.code(), ErrorCode::Corrupted, "{}: {e:?}", what()),
    }
}

/// Limits under which a decoded snapshot is never trimmed, so a decode that
/// succeeds must re-encode to the same bytes.
pub fn unbounded_limits() -> GroupLimits {
    GroupLimits {
        max_streams_per_group: u64::MAX,
        max_producers_per_stream: usize::MAX,
        producer_window: usize::MAX,
        max_snapshots_per_stream: usize::MAX,
        ..GroupLimits::default()
    }
}

/// The WAL segment header block (FORMAT.md "Header").
pub fn wal_header(data: &[u8]) {
    match SegmentHeader::decode(data) {
        Ok(header) => assert_eq!(header.encode()[..], data[..HEADER_LEN], "header does not round-trip"),
        Err(e) => assert_eq!(e.code(), ErrorCode::Corrupted, "{e:?}"),
    }
    // A header built from the input round-trips, and any changed byte of
    // its block is detected.
    let mut c = Cursor::new(data);
    let header = SegmentHeader::new(c.u32(), c.u64(), c.u64());
    let mut block = header.encode();
    assert_eq!(block.len(), HEADER_LEN);
    assert_eq!(SegmentHeader::decode(&block).expect("a fresh header decodes"), header);
    let at = c.below(HEADER_LEN);
    block[at] ^= c.u8() | 1;
    expect_corrupted(SegmentHeader::decode(&block), || format!("changed byte {at} of a header"));
}

/// One record at a record position (FORMAT.md "Record", "Flushes and
/// padding"). The first two input bytes choose the position.
pub fn wal_record(data: &[u8]) {
    let mut c = Cursor::new(data);
    let shift = c.u16() as usize;
    let mut bytes = vec![0u8; HEADER_LEN];
    bytes.extend_from_slice(c.rest());
    let pos = HEADER_LEN + shift % (bytes.len() - HEADER_LEN + 1);
    check_record_at(&bytes, pos);

    // A record built from the input decodes to itself; a truncated one
    // never decodes; a changed byte it checksums is always detected.
    let mut c = Cursor::new(data);
    let (lsn, group, index) = (c.u64(), c.u32(), c.u64());
    let kind = if c.bool() { RecordKind::Command } else { RecordKind::Install };
    let in_block = c.below(BLOCK_LEN);
    let cut = c.u32() as usize;
    let flip = c.u32() as usize;
    let body = match c.bytes(600) {
        [] => &[7u8][..],
        body => body,
    };
    let mut bytes = vec![0u8; HEADER_LEN + in_block];
    let pos = bytes.len();
    encode_record(&mut bytes, lsn, group, index, kind, body)
        .expect("a non-empty body within the record limit frames");
    let end = bytes.len();
    let expected = RecordRef { pos: pos as u64, lsn, group, index, kind, body };
    assert_eq!(decode_record_at(&bytes, pos), RecordAt::Valid(expected, end));
    let cut = pos + cut % (end - pos);
    assert!(!matches!(decode_record_at(&bytes[..cut], pos), RecordAt::Valid(..)), "truncated at {cut}");
    let at = pos + 4 + flip % (end - pos - 4);
    bytes[at] ^= 0x5a;
    assert!(
        !matches!(decode_record_at(&bytes, pos), RecordAt::Valid(..)),
        "changed byte {at} went unnoticed"
    );
}

/// The block size, re-exported for recipes.
pub const BLOCK_LEN: usize = rill_shard::wal::format::BLOCK;

fn check_record_at(bytes: &[u8], pos: usize) {
    match decode_record_at(bytes, pos) {
        RecordAt::Valid(record, next) => {
            assert_eq!(record.pos, pos as u64);
            assert_eq!(next, pos + RECORD_HEADER_LEN + record.body.len());
            assert!(next <= bytes.len() && !record.body.is_empty());
            let mut again = Vec::new();
            encode_record(&mut again, record.lsn, record.group, record.index, record.kind, record.body)
                .expect("a non-empty body within the record limit frames");
            assert_eq!(again[..], bytes[pos..next], "record does not round-trip");
        }
        RecordAt::Padding(boundary) => {
            assert_eq!(boundary, next_block(pos));
            let zeros = &bytes[pos..boundary.min(bytes.len())];
            assert!(zeros.iter().all(|&b| b == 0), "padding at {pos} holds a nonzero byte");
        }
        RecordAt::Invalid(_) => {}
    }
}

/// A whole segment (FORMAT.md "Reading a segment back"): as given, and,
/// when the input does not start with the segment magic, behind a valid
/// header. Then a segment assembled from the input must scan back exactly,
/// every truncation of it must scan to a prefix of its records, and damage
/// before its last record must be `Corrupted`.
pub fn wal_segment(data: &[u8]) {
    check_scan(data);
    if !data.starts_with(&MAGIC) {
        let mut c = Cursor::new(data);
        let first_lsn = u64::from(c.u8());
        let mut bytes = SegmentHeader::new(0, 1, first_lsn).encode();
        bytes.extend_from_slice(c.rest());
        check_scan(&bytes);
    }
    assembled_segment(data);
}

/// Scans `bytes` and checks what the scan promises; returns the scan when
/// it succeeded.
fn check_scan(bytes: &[u8]) -> Option<SegmentScan<'_>> {
    let scan = match scan_segment(bytes) {
        Ok(scan) => scan,
        Err(e) => {
            assert_eq!(e.code(), ErrorCode::Corrupted, "{e:?}");
            return None;
        }
    };
    assert_eq!(scan.header.is_none(), scan.end == ScanEnd::TornHeader);
    let mut end_of_last = HEADER_LEN;
    for (i, record) in scan.records.iter().enumerate() {
        let header = scan.header.expect("records only behind a header");
        match i {
            0 => assert!(record.lsn >= header.first_lsn),
            _ => assert_eq!(Some(record.lsn), scan.records[i - 1].lsn.checked_add(1)),
        }
        let pos = record.pos as usize;
        assert!(pos >= end_of_last, "records overlap");
        end_of_last = pos + RECORD_HEADER_LEN + record.body.len();
        check_record_at(bytes, pos);
    }
    if let ScanEnd::TornTail { at, .. } = scan.end {
        assert!(at as usize >= end_of_last && (at as usize) < bytes.len());
    }
    Some(scan)
}

/// Builds a segment of records and flushes from the input and checks the
/// scan rule on it.
fn assembled_segment(data: &[u8]) {
    let mut c = Cursor::new(data);
    let first_lsn = c.u64() >> 1;
    let mut bytes = SegmentHeader::new(c.u32(), c.u64(), first_lsn).encode();
    let mut expected: Vec<(usize, u64, u32, u64, Vec<u8>)> = Vec::new();
    let mut lsn = first_lsn;
    let flushes = 1 + c.below(4);
    for _ in 0..flushes {
        let mut flush = Vec::new();
        for _ in 0..1 + c.below(4) {
            let (group, index) = (c.u32(), c.u64());
            let body = match c.bytes(1500) {
                [] => vec![1],
                body => body.to_vec(),
            };
            expected.push((bytes.len() + flush.len(), lsn, group, index, body.clone()));
            encode_record(&mut flush, lsn, group, index, RecordKind::Command, &body)
                .expect("a non-empty body within the record limit frames");
            lsn += 1;
        }
        pad_to_block(&mut flush);
        bytes.extend_from_slice(&flush);
    }
    let scan = scan_segment(&bytes).expect("an assembled segment scans");
    assert_eq!(scan.end, ScanEnd::Clean);
    let got: Vec<_> =
        scan.records.iter().map(|r| (r.pos as usize, r.lsn, r.group, r.index, r.body.to_vec())).collect();
    assert_eq!(got, expected, "assembled segment does not scan back");

    // A crash can cut the segment anywhere: the scan keeps exactly the
    // records that end before the cut.
    let cut = c.u32() as usize % (bytes.len() + 1);
    let scan = scan_segment(&bytes[..cut]).expect("a truncated segment is a torn tail, not corruption");
    let kept: Vec<u64> = scan.records.iter().map(|r| r.lsn).collect();
    let whole: Vec<u64> = expected
        .iter()
        .filter(|(pos, _, _, _, body)| pos + RECORD_HEADER_LEN + body.len() <= cut)
        .map(|(_, lsn, ..)| *lsn)
        .collect();
    assert_eq!(kept, whole, "cut at {cut}");

    // Damage to any byte before the last record is never taken for a torn
    // tail: the later record proves the log relied on those bytes.
    let last_pos = expected.last().map(|(pos, ..)| *pos).expect("at least one record");
    let at = c.u32() as usize % last_pos;
    bytes[at] ^= c.u8() | 1;
    match scan_segment(&bytes) {
        Err(e) => assert_eq!(e.code(), ErrorCode::Corrupted),
        Ok(scan) => panic!("damage at {at} before the record at {last_pos} went unnoticed: {:?}", scan.end),
    }
}

/// The group snapshot (FORMAT.md "Group snapshot", SPEC §7), as given.
pub fn group_snapshot(data: &[u8]) {
    check_snapshot(data);
    built_snapshot(data);
}

/// A group snapshot whose body is the input, behind a valid header and
/// checksum, so arbitrary bytes reach the body decoder and the invariant
/// checks.
pub fn group_snapshot_body(data: &[u8]) {
    let mut c = Cursor::new(data);
    let group_count = u32::from(c.u8()) + 1;
    let group = u32::from(c.u8()) % group_count;
    let commit_index = u64::from(c.u16());
    check_snapshot(&wrap_snapshot_body(group, group_count, commit_index, c.rest()));
}

/// A snapshot file around `body`, with a valid header and checksum.
pub fn wrap_snapshot_body(group: u32, group_count: u32, commit_index: u64, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(body.len() + 62);
    // Magic and version as the encoder writes them today.
    let current = GroupState::new(0, 1, GroupLimits::default()).encode_snapshot();
    out.extend_from_slice(&current[..10]);
    out.extend_from_slice(&group.to_le_bytes());
    out.extend_from_slice(&group_count.to_le_bytes());
    out.extend_from_slice(&commit_index.to_le_bytes());
    out.extend_from_slice(&(body.len() as u32).to_le_bytes());
    out.extend_from_slice(body);
    let checksum = blake3::hash(&out);
    out.extend_from_slice(checksum.as_bytes());
    out
}

fn check_snapshot(bytes: &[u8]) {
    match GroupState::decode_snapshot(bytes, unbounded_limits()) {
        Ok(state) => {
            state.check_invariants();
            assert_eq!(state.encode_snapshot(), bytes, "snapshot does not round-trip");
        }
        Err(e) => assert_eq!(e.code(), ErrorCode::Corrupted, "{e:?}"),
    }
}

/// A state built by applying commands from the input round-trips, and a
/// changed byte anywhere in its snapshot is `Corrupted`.
fn built_snapshot(data: &[u8]) {
    let mut c = Cursor::new(data);
    let state = built_state(&mut c, 0, 1);
    let mut bytes = state.encode_snapshot();
    let decoded = GroupState::decode_snapshot(&bytes, unbounded_limits()).expect("a fresh snapshot decodes");
    assert_eq!(decoded, state);
    let at = c.below(bytes.len());
    bytes[at] ^= c.u8() | 1;
    expect_corrupted(GroupState::decode_snapshot(&bytes, unbounded_limits()), || {
        format!("changed byte {at} of a snapshot")
    });
}

/// A small but varied group state whose commands are chosen by the input.
pub fn built_state(c: &mut Cursor<'_>, group: u32, group_count: u32) -> GroupState {
    let mut state = GroupState::new(group, group_count, unbounded_limits());
    let mut now = 1_000;
    for cmd in built_commands(c) {
        now = cmd.now_ms;
        state.apply(&cmd, &mut Vec::new());
    }
    // Queue groups: receives prepared from the built state, as a core's
    // admission would, some messages settled again.
    for stream in ["x", "y"] {
        if !c.bool() {
            continue;
        }
        let id = StreamId::new("a", stream).expect("valid");
        let req = Receive::new(&id, "q").max_messages(1 + c.below(3)).visibility(Duration::from_millis(500));
        if let Ok(receive) = state.prepare_receive(&req, now, &HotOnly) {
            let cmd = Command { now_ms: now, op: Op::QueueReceive(receive) };
            state.apply(&cmd, &mut Vec::new());
        }
        if c.bool() {
            let nack = QueueSettle { id, group: "q".into(), receipt: 1, delay_ms: u64::from(c.u8()) };
            state.apply(&Command { now_ms: now, op: Op::QueueNack(nack) }, &mut Vec::new());
        }
    }
    // Retention policies, some streams reclaimed by theirs.
    for stream in ["x", "y"] {
        if !c.bool() {
            continue;
        }
        let id = StreamId::new("a", stream).expect("valid");
        let max_age_ms = c.bool().then(|| 1 + u64::from(c.u8()) * 10);
        let set = RetentionSet { id: id.clone(), consumed: c.bool(), max_age_ms };
        state.apply(&Command { now_ms: now, op: Op::SetRetention(set) }, &mut Vec::new());
        if c.bool() {
            if let Ok(reclaim) = state.prepare_reclaim(&id, now, &HotOnly) {
                state.apply(&Command { now_ms: now, op: Op::Reclaim(reclaim) }, &mut Vec::new());
            }
        }
    }
    built_forks(c, &mut state, now);
    state
}

/// Forks added to a built state (SPEC §2 "Forks"), so its snapshot holds a
/// fork book: up to two forks `f/0` and `f/1`, each of `a/x`, `a/y` or
/// `f/0` (a fork of a fork), copied as the engine would (the source's hot
/// records from the first, the last one maybe cut); then the source's pin
/// granted, refused (another incarnation) or not yet sent, its answer
/// acknowledged or still owed; then maybe the source deleted (a tombstone
/// while pinned) or the fork (an unpin owed, sometimes delivered).
fn built_forks(c: &mut Cursor<'_>, state: &mut GroupState, now: u64) {
    let apply = |state: &mut GroupState, op| state.apply(&Command { now_ms: now, op }, &mut Vec::new());
    for (n, token) in [("0", 1u64), ("1", 2)] {
        if !c.bool() {
            continue;
        }
        let source = match c.below(3) {
            0 => StreamId::new("a", "x"),
            1 => StreamId::new("a", "y"),
            _ => StreamId::new("f", "0"),
        }
        .expect("valid");
        let fork = StreamId::new("f", n).expect("valid");
        let Ok(info) = state.fork_source(&source, now) else { continue };
        let Some(stream) = state.stream(&source) else { continue };
        let hot: Vec<(u64, Bytes)> = stream.records().cloned().collect();
        let start = hot.first().map_or(info.head.tail_offset, |(at, _)| *at);
        let kept = c.below(hot.len() + 1);
        let mut inherited: Vec<Bytes> = hot[..kept].iter().map(|(_, r)| r.clone()).collect();
        let cut = match inherited.last_mut() {
            Some(last) if last.len() > 1 && c.bool() => {
                let bytes = 1 + c.below(last.len() - 1);
                last.truncate(bytes);
                Some(bytes as u64)
            }
            _ => None,
        };
        let end = start + inherited.iter().map(|r| r.len() as u64).sum::<u64>();
        let point = match cut {
            Some(bytes) => ForkPoint::IntoRecord { offset: hot[kept - 1].0, bytes },
            None if kept == hot.len() && c.bool() => ForkPoint::Tail,
            None if c.bool() => ForkPoint::Records { offset: start, count: kept as u64 },
            None => ForkPoint::Offset(end),
        };
        let mut create = command::Create::from(Create::new(fork.clone()));
        if c.bool() {
            create.initial_payload = Some(Bytes::copy_from_slice(c.bytes(12))).filter(|p| !p.is_empty());
        }
        let origin =
            ForkOrigin { source: source.clone(), source_incarnation: info.incarnation, token, point, end };
        let made = ForkCreate { create, more: Vec::new(), start, inherited, origin };
        if !apply(state, Op::ForkCreate(Box::new(made))).mutated {
            continue;
        }
        if c.below(4) > 0 {
            let source_incarnation = info.incarnation + u64::from(c.below(4) == 0);
            let pin = ForkPin { source: source.clone(), source_incarnation, token, fork: fork.clone() };
            let pinned = matches!(
                apply(state, Op::ForkPin(pin)).result,
                Ok(Response::ForkPinned { pinned: true, .. })
            );
            if c.below(4) > 0 {
                apply(state, Op::ForkPinAck(ForkPinAck { fork: fork.clone(), token, pinned }));
            }
        }
        match c.below(4) {
            0 => {
                apply(state, Op::Delete(source));
            }
            1 => {
                apply(state, Op::Delete(fork.clone()));
                if c.bool() {
                    apply(state, Op::ForkUnpin(ForkUnpin { source, token, fork: fork.clone() }));
                    apply(state, Op::ForkOutboxDone(ForkOutboxDone { fork, token }));
                }
            }
            _ => {}
        }
    }
}

/// A few commands on three streams, chosen by the input.
pub fn built_commands(c: &mut Cursor<'_>) -> Vec<Command> {
    let mut out = Vec::new();
    let ids: Vec<StreamId> = ["a/x", "a/y", "b/x"]
        .iter()
        .map(|n| {
            let (b, s) = n.split_once('/').expect("a slash");
            StreamId::new(b, s).expect("valid")
        })
        .collect();
    let mut now = 1_000u64;
    for _ in 0..c.below(24) {
        let id = ids[c.below(ids.len())].clone();
        now += u64::from(c.u8());
        let op = match c.below(6) {
            0 => {
                let mut create = Create::new(id);
                if c.bool() {
                    create.ttl_s = Some(1 + u64::from(c.u8()));
                }
                Op::from(create)
            }
            1 | 2 => {
                let mut append = Append::new(id, Bytes::copy_from_slice(c.bytes(40)));
                if c.u8().is_multiple_of(4) {
                    // A multi-record append (its records may be empty: refused whole).
                    append.more_records =
                        (0..1 + c.u8() % 3).map(|_| Bytes::copy_from_slice(c.bytes(12))).collect();
                }
                if c.bool() {
                    append.producer = Some(rill_shard::state::api::ProducerArgs {
                        id: "p".into(),
                        epoch: 0,
                        seq: u64::from(c.u8() % 4),
                    });
                }
                Op::from(append)
            }
            3 => Op::from(AppendBatch::new(id, vec![Bytes::copy_from_slice(c.bytes(9)); 2])),
            4 => Op::from(PublishSnapshot::new(id, u64::from(c.u8() % 16), vec![c.u8()])),
            _ => Op::AdvanceRetention { id, offset: u64::from(c.u8() % 16) },
        };
        out.push(Command { now_ms: now, op });
    }
    out
}

/// The postcard `Command` codec of WAL records (FORMAT.md "Record", kind
/// 1): arbitrary bytes decode or fail, never panic; a decoded command
/// round-trips through its encoding.
pub fn command(data: &[u8]) {
    if let Ok(cmd) = postcard::from_bytes::<Command>(data) {
        let bytes = postcard::to_stdvec(&cmd).expect("a command encodes");
        let again: Command = postcard::from_bytes(&bytes).expect("an encoded command decodes");
        assert_eq!(again, cmd, "command does not round-trip");
        assert_eq!(postcard::to_stdvec(&again).expect("encodes"), bytes, "encoding is not stable");
        // Admission's size bound never undercounts the record body.
        assert!(bytes.len() as u64 <= cmd.body_len_bound(), "body_len_bound undercounts {cmd:?}");
    }
}

/// Commands decoded from arbitrary bytes, applied one after another to a
/// group: whatever a checksummed record carries, replaying it never panics
/// and leaves the group's invariants intact, and the resulting state
/// survives a snapshot round trip.
///
/// One exception, by the state machine's design: a flush or compaction
/// commit is the runtime's plan, and the set-sums and lengths it carries
/// are trusted, not recomputed from the records (FUZZING.md, "Found"). Once
/// such a commit has landed, the target only requires that checking the
/// invariants and decoding the snapshot fail cleanly, never panic.
pub fn command_apply(data: &[u8]) {
    let limits = apply_limits();
    let mut state = GroupState::new(0, 1, limits.clone());
    let mut rest = data;
    let mut trusted = false;
    for _ in 0..64 {
        let Ok((cmd, next)) = postcard::take_from_bytes::<Command>(rest) else { break };
        rest = next;
        let before = state.commit_index();
        let mut effects = Vec::new();
        let applied = state.apply(&cmd, &mut effects);
        assert_eq!(state.commit_index(), before + u64::from(applied.mutated));
        trusted |= applied.mutated && matches!(cmd.op, Op::FlushCommit(_) | Op::CompactCommit(_));
        if !trusted {
            state.check_invariants();
        }
    }
    let bytes = state.encode_snapshot();
    match GroupState::decode_snapshot(&bytes, limits) {
        Ok(decoded) => assert_eq!(decoded, state),
        Err(e) if trusted => assert_eq!(e.code(), ErrorCode::Corrupted, "{e:?}"),
        Err(e) => panic!("the snapshot of a valid state does not decode: {e:?}"),
    }
    if trusted {
        let _ = state.verify();
    }
}

/// The small limits [`command_apply`] replays under, so that replay reaches
/// the refusals of a full group too.
pub fn apply_limits() -> GroupLimits {
    GroupLimits {
        max_streams_per_group: 8,
        max_producers_per_stream: 2,
        producer_window: 3,
        max_snapshots_per_stream: 2,
        ..GroupLimits::default()
    }
}

/// Recovery of a whole data directory (FORMAT.md "Reading a segment back",
/// the recovery rule): a checkpoint and one to three segments of one core,
/// built from the input. A segment is either raw input behind a valid header
/// or records assembled from commands the input chooses (with lsns, groups
/// and indexes that may or may not line up). Recovery either succeeds with
/// states that keep their invariants or fails with `Corrupted`.
pub fn recovery(data: &[u8]) {
    let dir = scratch_dir();
    let mut c = Cursor::new(data);
    let group_count = 1 + c.below(3) as u32;
    let mut files: BTreeMap<std::path::PathBuf, Vec<u8>> = BTreeMap::new();
    if c.bool() {
        let g = c.below(group_count as usize) as u32;
        let bytes = match c.bool() {
            true => built_state(&mut c, g, group_count).encode_snapshot(),
            false => c.bytes(2000).to_vec(),
        };
        files.insert(dir.path().join("checkpoints").join(format!("group-{g:05}.snap")), bytes);
    }
    let mut lsn = 1 + u64::from(c.u8() % 4);
    let mut index = vec![0u64; group_count as usize + 1];
    for seq in 1..=1 + c.below(3) as u64 {
        let mut bytes = SegmentHeader::new(0, seq, lsn).encode();
        if c.bool() {
            bytes.extend_from_slice(c.bytes(6000));
        } else {
            let mut flush = Vec::new();
            for cmd in built_commands(&mut c) {
                let g = c.below(index.len());
                index[g] += u64::from(!c.u8().is_multiple_of(3));
                let body = postcard::to_stdvec(&cmd).expect("a command encodes");
                encode_record(&mut flush, lsn, g as u32, index[g], RecordKind::Command, &body)
                    .expect("a non-empty body within the record limit frames");
                lsn += 1;
                if c.u8().is_multiple_of(4) {
                    pad_to_block(&mut flush);
                }
            }
            let cut = flush.len() - c.below(flush.len() + 1) / 4;
            flush.truncate(cut);
            bytes.extend_from_slice(&flush);
        }
        let name = rill_shard::wal::writer::segment_name(seq);
        files.insert(dir.path().join("wal").join("core-0").join(name), bytes);
    }
    for (path, bytes) in &files {
        std::fs::create_dir_all(path.parent().expect("has a parent")).expect("scratch directory");
        std::fs::write(path, bytes).expect("scratch file");
    }
    match rill_shard::wal::recovery::recover(dir.path(), group_count, &GroupLimits::default()) {
        Ok(recovered) => {
            for state in &recovered.states {
                state.check_invariants();
            }
        }
        Err(e) => assert_eq!(e.code(), ErrorCode::Corrupted, "{e:?}"),
    }
}

/// A raft record (FORMAT.md "Raft records": the body of a WAL record of
/// kind `Raft`, and each record of a raft log file): arbitrary bytes decode
/// or are `Corrupted`, never a panic. Postcard reads an integer spelt in
/// more bytes than it needs, so a decoded record re-encodes to exactly the
/// input or, when the input spelt one so, to shorter bytes; either way the
/// encoding decodes to the same record. A decoded record applies to an empty
/// raft log or is refused with `Corrupted` (a membership openraft does not
/// accept). A record built from the input round-trips, and a cut of its
/// encoding or a byte appended to it is `Corrupted`.
pub fn raft_record(data: &[u8]) {
    match RaftRecord::decode(data) {
        Ok(record) => check_raft_record(&record, data),
        Err(e) => assert_eq!(e.code(), ErrorCode::Corrupted, "{e:?}"),
    }
    let mut c = Cursor::new(data);
    let record = built_raft_record(&mut c);
    let bytes = record.encode();
    check_raft_record(&record, &bytes);
    let cut = c.below(bytes.len());
    expect_corrupted(RaftRecord::decode(&bytes[..cut]), || format!("raft record cut to {cut} bytes"));
    let longer = [&bytes[..], &[c.u8()]].concat();
    expect_corrupted(RaftRecord::decode(&longer), || "a byte after a raft record".to_string());
}

/// What [`raft_record`] requires of `record`, decoded from `bytes`.
fn check_raft_record(record: &RaftRecord, bytes: &[u8]) {
    let again = record.encode();
    assert!(
        again == bytes || again.len() < bytes.len(),
        "raft record re-encodes to other bytes: {again:02x?}"
    );
    let decoded = RaftRecord::decode(&again).expect("an encoded raft record decodes");
    assert_eq!(&decoded, record, "raft record does not round-trip");
    if let Err(e) = LogImage::default().apply(record) {
        assert_eq!(e.code(), ErrorCode::Corrupted, "{record:?}: {e:?}");
    }
}

/// A raft record of any kind, chosen by the input: log ids and votes of
/// small or any numbers, entries that are blank, carry a command the input
/// builds, or change the membership (sometimes naming a voter without an
/// address).
pub fn built_raft_record(c: &mut Cursor<'_>) -> RaftRecord {
    match c.below(5) {
        0 => {
            let log_id = built_log_id(c);
            let payload = match c.below(3) {
                0 => WirePayload::Blank,
                1 => {
                    let id = ProposalId { node: built_number(c), boot: c.u64(), seq: built_number(c) };
                    let cmd = built_commands(c)
                        .into_iter()
                        .next()
                        .unwrap_or(Command { now_ms: built_number(c), op: Op::ExpireDue });
                    WirePayload::Normal(Box::new(Proposal { id, cmd }))
                }
                _ => WirePayload::Membership(built_membership(c)),
            };
            RaftRecord::Entry { log_id, payload }
        }
        1 => RaftRecord::Vote(WireVote { term: built_number(c), node: built_number(c), committed: c.bool() }),
        2 => RaftRecord::Truncate { after: c.bool().then(|| built_log_id(c)) },
        3 => RaftRecord::Purge { upto: built_log_id(c) },
        _ => RaftRecord::Committed(c.bool().then(|| built_log_id(c))),
    }
}

/// A small number or any number, chosen by the input.
fn built_number(c: &mut Cursor<'_>) -> u64 {
    match c.bool() {
        true => u64::from(c.u8()),
        false => c.u64(),
    }
}

/// A log id of small or any numbers, chosen by the input.
fn built_log_id(c: &mut Cursor<'_>) -> WireLogId {
    WireLogId { term: built_number(c), node: built_number(c), index: built_number(c) }
}

/// A membership of one or two voter sets (maybe empty) of nodes 0 to 5 and
/// up to five address entries, chosen by the input: sometimes a voter has
/// no address, so openraft refuses it.
fn built_membership(c: &mut Cursor<'_>) -> WireMembership {
    let set = |c: &mut Cursor<'_>| -> Vec<u64> { (0..c.below(5)).map(|_| u64::from(c.u8() % 6)).collect() };
    let configs = (0..1 + c.below(2)).map(|_| set(c)).collect();
    let nodes = (0..c.below(6))
        .map(|_| {
            let n = u64::from(c.u8() % 6);
            let addr = |port: u16| format!("10.0.0.{n}:{port}");
            (n, Member { raft_addr: addr(7000), http_addr: addr(8080) })
        })
        .collect();
    WireMembership { configs, nodes }
}

/// The raft log file (FORMAT.md "Raft log file"): as given, and with the
/// input behind a valid header (its group and record count taken from the
/// input) and checksum, so arbitrary bytes reach the record framing. What
/// decodes re-encodes to exactly the same bytes, and its records rebuild a
/// raft log or are refused with `Corrupted`; anything else is `Corrupted`.
/// A file of records built from the input (raft records and raw bodies)
/// decodes back to them, and every cut of it and any changed byte is
/// `Corrupted`.
pub fn raft_log_file(data: &[u8]) {
    check_raft_log_file(data);
    let mut c = Cursor::new(data);
    let (group, through, count) = (c.u32(), c.u64(), u32::from(c.u8()));
    check_raft_log_file(&wrap_raft_log(group, through, count, c.rest()));

    let mut c = Cursor::new(data);
    let (group, through) = (c.u32(), c.u64());
    let records: Vec<Vec<u8>> = (0..c.below(6))
        .map(|_| match c.bool() {
            true => built_raft_record(&mut c).encode(),
            false => match c.bytes(200) {
                [] => vec![0],
                body => body.to_vec(),
            },
        })
        .collect();
    let mut bytes = raft_file::encode(group, through, &records);
    let decoded = raft_file::decode(&bytes).expect("a fresh raft log file decodes");
    assert_eq!(decoded, RaftLogFile { group, through, records }, "raft log file does not round-trip");
    let cut = c.below(bytes.len());
    expect_corrupted(raft_file::decode(&bytes[..cut]), || format!("raft log file cut to {cut} bytes"));
    let at = c.below(bytes.len());
    bytes[at] ^= c.u8() | 1;
    expect_corrupted(raft_file::decode(&bytes), || format!("changed byte {at} of a raft log file"));
}

/// A raft log file of `group` through `through` claiming `count` records,
/// whose records are `framed` (`[u32 length][body]` each, if the input is
/// well formed), with a valid header and checksum.
pub fn wrap_raft_log(group: u32, through: u64, count: u32, framed: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(raft_file::HEADER_LEN + framed.len() + 32);
    out.extend_from_slice(&raft_file::MAGIC);
    out.extend_from_slice(&raft_file::VERSION.to_le_bytes());
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&group.to_le_bytes());
    out.extend_from_slice(&through.to_le_bytes());
    out.extend_from_slice(&count.to_le_bytes());
    out.extend_from_slice(framed);
    let checksum = blake3::hash(&out);
    out.extend_from_slice(checksum.as_bytes());
    out
}

fn check_raft_log_file(bytes: &[u8]) {
    match raft_file::decode(bytes) {
        Ok(RaftLogFile { group, through, records }) => {
            assert!(records.iter().all(|r| !r.is_empty()), "an empty record decoded");
            // A version 1 file reads as through 0 and is rewritten as version 2.
            if bytes[8..10] == raft_file::VERSION.to_le_bytes() {
                assert_eq!(
                    raft_file::encode(group, through, &records),
                    bytes,
                    "raft log file does not round-trip"
                );
            } else {
                assert_eq!(through, 0, "a version 1 raft log file has no through");
            }
            if let Err(e) = LogImage::rebuild(&records) {
                assert_eq!(e.code(), ErrorCode::Corrupted, "{e:?}");
            }
        }
        Err(e) => assert_eq!(e.code(), ErrorCode::Corrupted, "{e:?}"),
    }
}

/// A replicated group's checkpoint (FORMAT.md "Raft checkpoint"): as
/// given, and with the input behind a valid header (its group taken from
/// the input) and checksum, so arbitrary bytes reach the meta and state
/// framing. Arbitrary bytes decode or are `Corrupted`, never a panic. What
/// decodes re-encodes to exactly the same bytes, but for one leeway: postcard
/// reads an integer of the meta spelt in more bytes than it needs, so the
/// re-encoding may instead be the input with its meta spelt shorter (its
/// length field and the checksum following suit); either way it decodes to
/// the same checkpoint. A decoded checkpoint restores, to a state whose
/// snapshot is exactly the one it holds, or is refused with `Corrupted` (a
/// group snapshot that does not decode or holds another group, a membership
/// openraft does not accept). A checkpoint built from the input (a group
/// state, log ids and a membership it chooses, sometimes naming another
/// group than its state's) round-trips and restores to that state unless
/// its membership or its group is wrong, and every cut of it and any changed
/// byte is `Corrupted`.
pub fn raft_checkpoint(data: &[u8]) {
    check_raft_checkpoint(data);
    let mut c = Cursor::new(data);
    let group = c.u32();
    check_raft_checkpoint(&wrap_raft_checkpoint(group, c.rest()));

    let mut c = Cursor::new(data);
    let group_count = 1 + c.below(8) as u32;
    let group = c.below(group_count as usize) as u32;
    let named = match c.below(8) {
        0 => c.u32(),
        _ => group,
    };
    let applied = c.bool().then(|| built_log_id(&mut c));
    let membership_at = c.bool().then(|| built_log_id(&mut c));
    let meta = CheckpointMeta { applied, membership_at, membership: built_membership(&mut c) };
    let state = built_state(&mut c, group, group_count);
    let checkpoint = RaftCheckpoint { group: named, meta, state: state.encode_snapshot() };
    let mut bytes = checkpoint.encode();
    let decoded = RaftCheckpoint::decode(&bytes).expect("a fresh raft checkpoint decodes");
    assert_eq!(decoded, checkpoint, "raft checkpoint does not round-trip");
    check_raft_checkpoint(&bytes);
    let expected = checkpoint.meta.membership.to_membership().ok();
    let valid = expected.is_some();
    match restore(&checkpoint, &unbounded_limits()) {
        Ok((restored, applied, membership, _)) => {
            assert!(valid && named == group, "restored group {group} named {named}: {:?}", checkpoint.meta);
            assert_eq!(restored, state, "the restored state is not the one checkpointed");
            assert_eq!(applied, checkpoint.meta.applied.map(WireLogId::to_log_id));
            assert_eq!(Some(membership.membership()), expected.as_ref());
        }
        Err(e) => {
            assert_eq!(e.code(), ErrorCode::Corrupted, "{e:?}");
            assert!(!valid || named != group, "a valid checkpoint of group {group} refused: {e:?}");
        }
    }
    let cut = c.below(bytes.len());
    expect_corrupted(RaftCheckpoint::decode(&bytes[..cut]), || format!("raft checkpoint cut to {cut} bytes"));
    let at = c.below(bytes.len());
    bytes[at] ^= c.u8() | 1;
    expect_corrupted(RaftCheckpoint::decode(&bytes), || format!("changed byte {at} of a raft checkpoint"));
}

/// A raft checkpoint of `group` whose meta and state are `framed`
/// (`[u32 meta length][meta][u64 state length][state]`, if the input is well
/// formed), with a valid header and checksum.
pub fn wrap_raft_checkpoint(group: u32, framed: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(16 + framed.len() + 32);
    // Magic and version as the encoder writes them today.
    let empty = WireMembership { configs: Vec::new(), nodes: Vec::new() };
    let meta = CheckpointMeta { applied: None, membership_at: None, membership: empty };
    out.extend_from_slice(&RaftCheckpoint { group, meta, state: Vec::new() }.encode()[..10]);
    out.extend_from_slice(&[0, 0]);
    out.extend_from_slice(&group.to_le_bytes());
    out.extend_from_slice(framed);
    let checksum = blake3::hash(&out);
    out.extend_from_slice(checksum.as_bytes());
    out
}

fn check_raft_checkpoint(bytes: &[u8]) {
    let checkpoint = match RaftCheckpoint::decode(bytes) {
        Ok(checkpoint) => checkpoint,
        Err(e) => {
            assert_eq!(e.code(), ErrorCode::Corrupted, "{e:?}");
            return;
        }
    };
    let again = checkpoint.encode();
    if again != bytes {
        // Only the meta may be spelt otherwise, and only longer than its
        // encoding: the rest of the file is copied as it is.
        let meta_len = u32::from_le_bytes(bytes[16..20].try_into().expect("4 bytes")) as usize;
        let meta = postcard::to_stdvec(&checkpoint.meta).expect("a checkpoint meta encodes");
        assert!(meta.len() < meta_len, "raft checkpoint re-encodes to other bytes: {again:02x?}");
        let mut framed = (meta.len() as u32).to_le_bytes().to_vec();
        framed.extend_from_slice(&meta);
        framed.extend_from_slice(&bytes[20 + meta_len..bytes.len() - 32]);
        assert_eq!(
            again,
            wrap_raft_checkpoint(checkpoint.group, &framed),
            "raft checkpoint re-encodes to more than its meta spelt shorter"
        );
    }
    let decoded = RaftCheckpoint::decode(&again).expect("an encoded raft checkpoint decodes");
    assert_eq!(decoded, checkpoint, "raft checkpoint does not round-trip");
    match restore(&checkpoint, &unbounded_limits()) {
        Ok((state, applied, membership, snapshot)) => {
            state.check_invariants();
            assert_eq!(state.group(), checkpoint.group, "restored another group");
            assert_eq!(state.encode_snapshot(), checkpoint.state, "the restored state does not round-trip");
            assert_eq!(applied, checkpoint.meta.applied.map(WireLogId::to_log_id));
            assert_eq!(*membership.log_id(), checkpoint.meta.membership_at.map(WireLogId::to_log_id));
            assert_eq!(snapshot.meta.last_log_id, applied);
            assert_eq!(snapshot.meta.last_membership, membership);
            assert_eq!(snapshot.snapshot, checkpoint.state);
        }
        Err(e) => assert_eq!(e.code(), ErrorCode::Corrupted, "{e:?}"),
    }
}

/// The `rill.shape` file (FORMAT.md "`rill.shape`"), through `Engine::open`
/// (its parser is private): a file that does not parse is `Corrupted`, one
/// of another shape is `ShapeMismatch`, and only a file that names this
/// shape opens.
pub fn shape_file(data: &[u8]) {
    const GROUPS: u32 = 7;
    let dir = scratch_dir();
    std::fs::write(dir.path().join(rill::SHAPE_FILE), data).expect("scratch file");
    let config =
        rill::Config::new(dir.path()).cores(1).groups(GROUPS).pin_threads(false).io_memory_bytes(256 << 10);
    match rill::Engine::open(config) {
        Ok(engine) => {
            futures::executor::block_on(engine.shutdown()).expect("engine shuts down");
            let text = std::str::from_utf8(data).expect("an accepted shape file is text");
            let names = |key: &str, value: &str| {
                text.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == [key, value])
            };
            assert!(names("rill-shape", "1") && names("groups", "7"), "accepted {text:?}");
        }
        Err(e) => assert!(
            matches!(e.code(), ErrorCode::Corrupted | ErrorCode::ShapeMismatch),
            "shape file {data:?}: {e:?}"
        ),
    }
}

/// The `rill.cluster` file (FORMAT.md "`rill.cluster`"): any bytes parse
/// to an identity or are `Corrupted`; what parses names a nonzero id and
/// renders back to text that parses to the same identity.
pub fn cluster_file(data: &[u8]) {
    use rill_shard::cluster::{parse_identity, render_identity};
    match parse_identity(data) {
        Ok((id, node, origin)) => {
            assert_ne!(id, 0, "an identity without a cluster id");
            let again = render_identity(id, node, origin);
            assert_eq!(parse_identity(again.as_bytes()).expect("rendered text parses"), (id, node, origin));
        }
        Err(e) => assert_eq!(e.code(), ErrorCode::Corrupted, "{data:?}: {e:?}"),
    }
}

/// A fresh scratch directory, in memory-backed storage when there is one.
pub fn scratch_dir() -> tempfile::TempDir {
    let shm = std::path::Path::new("/dev/shm");
    let builder = tempfile::Builder::new().prefix("rill-fuzz-").to_owned();
    if shm.is_dir() {
        if let Ok(dir) = builder.tempdir_in(shm) {
            return dir;
        }
    }
    builder.tempdir().expect("a scratch directory")
}

fn assert_cold_corrupted(err: &rill_cold::ColdError, what: &str) {
    assert!(matches!(err.kind(), rill_cold::ColdErrorKind::Corrupted { .. }), "{what}: {err:?}");
}

/// Checks every lookup of a parsed record index against a linear scan over
/// what its `iter` yields, at every record boundary and next to it, outside
/// the slice `[start, start + len)`, and at the times around each record's.
fn check_record_index(index: &rill_cold::RecordIndex<'_>, start: u64, len: u64) {
    let end = start + len;
    let records: Vec<(u64, u64)> = index.iter().collect();
    let n = records.len();
    assert_eq!(n, index.len(), "iter and len disagree");
    assert!(!index.is_empty(), "a parsed version 3 slice has records");
    assert_eq!(records[0].0, start, "the first record starts the slice");
    assert!(records.windows(2).all(|w| w[0].0 < w[1].0 && w[0].1 <= w[1].1), "records out of order");
    assert!(records[n - 1].0 < end, "a record starts past the slice");
    let ends: Vec<u64> = records.iter().skip(1).map(|r| r.0).chain([end]).collect();
    for (i, &(at, time)) in records.iter().enumerate() {
        assert_eq!((index.start(i), index.end(i), index.time(i)), (Some(at), Some(ends[i]), Some(time)));
    }
    assert_eq!((index.start(n), index.end(n), index.time(n)), (None, None, None));
    let mut offsets = vec![0, u64::MAX, start.saturating_sub(1), end, end.saturating_add(1)];
    let mut times = vec![0, u64::MAX];
    for &(at, time) in &records {
        offsets.extend([at, at.saturating_sub(1), at.saturating_add(1)]);
        times.extend([time, time.saturating_sub(1), time.saturating_add(1)]);
    }
    for offset in offsets {
        let first = records.iter().position(|r| r.0 >= offset).unwrap_or(n);
        assert_eq!(index.first_at_or_after(offset), first, "first_at_or_after({offset})");
        let holding = (0..n).find(|&i| records[i].0 <= offset && offset < ends[i]);
        assert_eq!(index.containing(offset), holding, "containing({offset})");
    }
    for time in times {
        let first = records.iter().position(|r| r.1 >= time).unwrap_or(n);
        assert_eq!(index.first_at_or_after_time(time), first, "first_at_or_after_time({time})");
    }
}

/// Record boundaries and times for a slice of `len` bytes at `start`, chosen
/// by the input: up to eight records, times that mostly grow and sometimes
/// fall (the index raises them).
fn built_index(c: &mut Cursor<'_>, start: u64, len: usize) -> rill_cold::RecordIndexBuf {
    let mut cuts: Vec<u64> = (0..c.below(8)).map(|_| c.below(len) as u64).collect();
    cuts.push(0);
    cuts.sort_unstable();
    cuts.dedup();
    let mut index = rill_cold::RecordIndexBuf::new();
    let mut time = u64::from(c.u16());
    for cut in cuts {
        match c.below(4) {
            0 => time = time.saturating_sub(u64::from(c.u8())),
            1 => {}
            _ => time += u64::from(c.u8()),
        }
        index.push(start + cut, time).expect("cuts increase");
    }
    index
}

/// A cold pack file (FORMAT.md "Cold pack file"): arbitrary bytes are
/// refused as `Corrupted` or give a pack (version 3, or version 1 without
/// record indexes) whose record indexes answer every lookup like a linear
/// scan and whose every slice either verifies against its digest or is
/// `Corrupted`; a pack whose slices all verify re-encodes, with its parsed
/// indexes, to exactly its bytes. A pack of either version built from the
/// input parses back with the indexes it was given, any truncation of it is
/// refused, any changed table byte fails the open, and any other changed
/// byte is caught by the header and trailer checks or by the digest of the
/// slice it lies in.
pub fn cold_pack(data: &[u8]) {
    use rill_cold::pack::encode_pack_version;
    use rill_cold::{PackReader, RecordIndexBuf, SliceSpec};
    match PackReader::from_bytes(Bytes::copy_from_slice(data)) {
        Ok(reader) => {
            let version = reader.format_version();
            let mut indexes = Vec::new();
            for (i, meta) in reader.slices().iter().enumerate() {
                let records = reader.slice_records(i).expect("a slice of the pack has an answer");
                assert_eq!(records.is_some(), version == 3, "version {version} and a record index");
                let mut rebuilt = RecordIndexBuf::new();
                if let Some(records) = records {
                    check_record_index(&records, meta.start, meta.len);
                    rebuilt.extend_from(&records).expect("a parsed index rebuilds");
                }
                indexes.push(rebuilt);
            }
            let mut slices = Vec::new();
            for i in 0..reader.slice_count() {
                match reader.slice_bytes(i) {
                    Ok(bytes) => slices.push(bytes.to_vec()),
                    Err(e) => assert_cold_corrupted(&e, "slice of an arbitrary pack"),
                }
            }
            if slices.len() == reader.slice_count() {
                let parts: Vec<[&[u8]; 1]> = slices.iter().map(|s| [&s[..]]).collect();
                let specs: Vec<SliceSpec<'_>> = reader
                    .slices()
                    .iter()
                    .zip(&parts)
                    .zip(&indexes)
                    .map(|((meta, parts), index)| SliceSpec {
                        stream: &meta.stream,
                        incarnation: meta.incarnation,
                        start: meta.start,
                        parts: &parts[..],
                        index,
                    })
                    .collect();
                let again =
                    encode_pack_version(version, reader.group(), reader.pack_id(), reader.bucket(), &specs)
                        .expect("a pack that parsed re-encodes");
                assert_eq!(again, data, "pack does not round-trip");
            }
        }
        Err(e) => assert_cold_corrupted(&e, "arbitrary pack"),
    }

    let mut c = Cursor::new(data);
    let (group, pack_id) = (c.u32(), c.u64());
    let version = if c.below(4) == 0 { 1 } else { 3 };
    let names = ["x", "y", "a-longer-stream-name"];
    let mut bodies = Vec::new();
    let mut metas = Vec::new();
    let mut indexes = Vec::new();
    for _ in 0..1 + c.below(4) {
        let body = match c.bytes(300) {
            [] => vec![0x42],
            body => body.to_vec(),
        };
        let (stream, incarnation, start) = (names[c.below(names.len())], c.u64(), u64::from(c.u32()));
        indexes.push(built_index(&mut c, start, body.len()));
        metas.push((stream, incarnation, start));
        bodies.push(body);
    }
    let parts: Vec<[&[u8]; 1]> = bodies.iter().map(|b| [&b[..]]).collect();
    let specs: Vec<SliceSpec<'_>> = metas
        .iter()
        .zip(&parts)
        .zip(&indexes)
        .map(|(((stream, incarnation, start), parts), index)| SliceSpec {
            stream,
            incarnation: *incarnation,
            start: *start,
            parts: &parts[..],
            index,
        })
        .collect();
    let mut bytes =
        encode_pack_version(version, group, pack_id, "bucket", &specs).expect("a valid pack encodes");
    let reader = PackReader::from_bytes(Bytes::from(bytes.clone())).expect("a fresh pack parses");
    reader.verify_all().expect("a fresh pack verifies");
    assert_eq!(reader.format_version(), version);
    let got: Vec<_> = reader.slices().iter().map(|m| (m.stream.as_str(), m.incarnation, m.start)).collect();
    let want: Vec<_> = metas.iter().map(|(s, i, o)| (*s, *i, *o)).collect();
    assert_eq!(got, want);
    for (i, written) in indexes.iter().enumerate() {
        match reader.slice_records(i).expect("a slice of the pack") {
            Some(records) => {
                assert_eq!(version, 3, "a version 1 pack has no record index");
                let meta = &reader.slices()[i];
                check_record_index(&records, meta.start, meta.len);
                let mut rebuilt = RecordIndexBuf::new();
                rebuilt.extend_from(&records).expect("a parsed index rebuilds");
                assert_eq!(&rebuilt, written, "slice {i}'s record index");
            }
            None => assert_eq!(version, 1, "a version 3 slice without its record index"),
        }
    }
    let (table_at, table_end) = (reader.layout().table_offset as usize, bytes.len() - 64);
    let cut = c.below(bytes.len());
    match PackReader::from_bytes(Bytes::copy_from_slice(&bytes[..cut])) {
        Ok(_) => panic!("a pack cut at {cut} of {} parsed", bytes.len()),
        Err(e) => assert_cold_corrupted(&e, "truncated pack"),
    }
    let mut table_flip = bytes.clone();
    let at = table_at + c.below(table_end - table_at);
    table_flip[at] ^= c.u8() | 1;
    match PackReader::from_bytes(Bytes::from(table_flip)) {
        Ok(_) => panic!("changed table byte {at} of a pack went unnoticed"),
        Err(e) => assert_cold_corrupted(&e, "damaged table"),
    }
    let at = c.below(bytes.len());
    bytes[at] ^= c.u8() | 1;
    match PackReader::from_bytes(Bytes::from(bytes)) {
        Ok(damaged) => {
            let caught = (0..damaged.slice_count()).any(|i| damaged.slice_bytes(i).is_err());
            assert!(caught, "changed byte {at} of a pack went unnoticed");
        }
        Err(e) => assert_cold_corrupted(&e, "damaged pack"),
    }
}
