//! The decoder targets' seed corpus and the mutator that grows inputs from
//! it.
//!
//! [`seeds`] generates, deterministically, a few dozen inputs per target:
//! valid encodings made by the real encoders (headers, records, segments,
//! group snapshots, commands, raft records, raft log files and raft
//! checkpoints, shape files), their truncations, and bit flips. The commands cover every
//! operation, forks included, one snapshot seed holds a fork book of every
//! kind of entry, and the raft records cover every kind of record. The
//! output is committed under `fuzz/corpus/<target>/` (the test
//! `fuzz/tests/decoders.rs` checks that it is current and rewrites it when
//! `RILL_FUZZ_WRITE_CORPUS=1`), so libFuzzer starts from it and every input
//! ever found to crash a target can be added next to it by hand. [`mutate`]
//! derives new inputs from corpus files the way a fuzzer would.

use std::path::PathBuf;

use bytes::Bytes;
use rill_shard::raft::checkpoint::{CheckpointMeta, RaftCheckpoint};
use rill_shard::raft::log_image::LogImage;
use rill_shard::raft::types::{Member, Proposal, ProposalId};
use rill_shard::raft::wire::{RaftRecord, WireLogId, WireMembership, WirePayload, WireVote};
use rill_shard::state::api::{Append, AppendBatch, Close, Create, ForkPoint, ProducerArgs, PublishSnapshot};
use rill_shard::state::command::{
    Command, CompactCommit, FlushCommit, ForkCreate, ForkOrigin, ForkOutboxDone, ForkPin, ForkPinAck,
    ForkUnpin, LeaseAcquire, LeaseRelease, LeaseRenew, MemberHeartbeat, MemberLeave, OffsetCommit, Op,
    PackCommit, QueueDeadLetters, QueuePolicySet, QueueReceive, QueueSettle, Reclaim, RecordSpan,
    RetentionSet, SliceCommit,
};
use rill_shard::state::group::GroupState;
use rill_shard::wal::format::{encode_record, pad_to_block, RecordKind, SegmentHeader, BLOCK};
use rill_shard::wal::raft_file;
use rill_shard::StreamId;

use crate::cursor::Cursor;
use crate::rng::Rng;
use crate::targets::{apply_limits, built_state, unbounded_limits, wrap_raft_checkpoint};

/// One generated corpus file.
#[derive(Clone, Debug)]
pub struct Seed {
    pub target: &'static str,
    pub name: String,
    pub bytes: Vec<u8>,
}

/// The committed corpus directory.
pub fn corpus_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("corpus")
}

/// Every file of `target`'s corpus directory, by name, in name order.
pub fn load(target: &str) -> Vec<(String, Vec<u8>)> {
    let dir = corpus_dir().join(target);
    let mut out: Vec<(String, Vec<u8>)> = match std::fs::read_dir(&dir) {
        Ok(entries) => entries
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_file())
            .map(|e| {
                let bytes = std::fs::read(e.path()).expect("corpus file reads");
                (e.file_name().to_string_lossy().into_owned(), bytes)
            })
            .collect(),
        Err(_) => Vec::new(),
    };
    out.sort();
    out
}

struct Out {
    seeds: Vec<Seed>,
    rng: Rng,
}

impl Out {
    fn add(&mut self, target: &'static str, name: impl Into<String>, bytes: Vec<u8>) {
        self.seeds.push(Seed { target, name: name.into(), bytes });
    }

    /// The input, a few truncations and a few bit flips of it.
    fn add_damaged(&mut self, target: &'static str, name: &str, bytes: Vec<u8>, variants: usize) {
        for i in 0..variants {
            if bytes.is_empty() {
                break;
            }
            let cut = self.rng.index(bytes.len());
            self.add(target, format!("{name}-cut{i}"), bytes[..cut].to_vec());
            let mut flipped = bytes.clone();
            let at = self.rng.index(bytes.len());
            flipped[at] ^= 1 << self.rng.below(8);
            self.add(target, format!("{name}-flip{i}"), flipped);
        }
        self.add(target, name.to_string(), bytes);
    }
}

fn id(bucket: &str, stream: &str) -> StreamId {
    StreamId::new(bucket, stream).expect("valid name")
}

/// Commands covering every operation, with and without optional fields;
/// the fork commands ([`fork_commands`]) come last, made from the state the
/// others build under [`apply_limits`] (as `command_apply` replays them).
pub fn sample_commands() -> Vec<Command> {
    let a = id("a", "x");
    let b = id("b", "long-stream-name");
    let producer = |seq| Some(ProducerArgs { id: "p0".into(), epoch: 1, seq });
    let mut create = Create::new(a.clone()).content_type("text/plain").ttl_s(30).attrs(r#"{"title":"t"}"#);
    create.initial_payload = Some(Bytes::from_static(b"hello"));
    create.producer = producer(0);
    create.stream_seq = Some("01".into());
    let mut append = Append::new(a.clone(), Bytes::from_static(b"world")).close_after(true);
    append.producer = producer(1);
    append.stream_seq = Some("02".into());
    append.content_type = Some("text/plain".into());
    let mut batch =
        AppendBatch::new(b.clone(), vec![Bytes::from_static(b"1"), Bytes::new(), vec![7; 300].into()]);
    batch.producer = producer(2);
    let mut close = Close::new(b.clone());
    close.stream_seq = Some("zz".into());
    let mut publish = PublishSnapshot::new(a.clone(), 3, Bytes::from_static(b"snap")).content_type("x/y");
    publish.expected_digest = Some(*blake3::hash(b"snap").as_bytes());
    let pack = PackCommit {
        pack_id: 1 << 16,
        bucket: "a".into(),
        file: "g00000-0000000000010000.pack".into(),
        bytes: 200,
        slices: vec![SliceCommit {
            stream: a.clone(),
            incarnation: 1,
            start: 0,
            end: 5,
            records: 1,
            sum: rill_shard::state::integrity::SetSum::default(),
        }],
    };
    let a2 = a.clone();
    let ops = vec![
        Op::from(Create::new(b.clone())),
        Op::from(create),
        Op::from(Create::new(a.clone()).expires_at_ms(5_000).closed(true)),
        Op::from(Append::new(a.clone(), Bytes::from_static(b"x"))),
        Op::from(append),
        Op::from(batch),
        Op::from(close),
        Op::Delete(b.clone()),
        Op::SetAttrs { id: a.clone(), attrs: Some(r#"{"metadata":{"k":1}}"#.into()) },
        Op::SetAttrs { id: a.clone(), attrs: None },
        Op::Touch(a.clone()),
        Op::from(publish),
        Op::AdvanceRetention { id: a.clone(), offset: 3 },
        Op::ExpireDue,
        Op::FlushCommit(FlushCommit { packs: vec![pack.clone()] }),
        Op::GcAck { seqs: vec![1, 7] },
        Op::PurgeBucket { bucket: "b".into() },
        Op::CompactCommit(CompactCommit {
            stream: a.clone(),
            incarnation: 1,
            start: 0,
            end: 5,
            inputs: vec![(1 << 16, 0), (2 << 16, 1)],
            output: pack,
            grace_ms: 30_000,
        }),
        Op::from(
            Append::records(a2.clone(), vec![Bytes::from_static(b"[1]"), Bytes::from_static(b"\"two\"")])
                .producer("p0", 1, 3),
        ),
        Op::from(
            Create::new(id("b", "json")).initial_records(vec![Bytes::from_static(b"1"), vec![9; 40].into()]),
        ),
        Op::AcquireLease(LeaseAcquire {
            id: a2.clone(),
            group: "cg".into(),
            owner: "o1".into(),
            ttl_ms: 5_000,
        }),
        Op::RenewLease(LeaseRenew {
            id: a2.clone(),
            group: "cg".into(),
            owner: "o1".into(),
            generation: 1,
            ttl_ms: 9,
        }),
        Op::CommitOffset(OffsetCommit {
            id: a2.clone(),
            group: "cg".into(),
            owner: "o1".into(),
            generation: 1,
            offset: 4,
        }),
        Op::ReleaseLease(LeaseRelease {
            id: a2.clone(),
            group: "cg".into(),
            owner: "o1".into(),
            generation: 1,
        }),
        Op::Heartbeat(MemberHeartbeat {
            bucket: "a".into(),
            group: "cg".into(),
            consumer: "o1".into(),
            ttl_ms: 7,
        }),
        Op::Leave(MemberLeave { bucket: "a".into(), group: "cg".into(), consumer: "o1".into() }),
        Op::QueueReceive(QueueReceive {
            id: a.clone(),
            group: "q".into(),
            max: 3,
            visibility_ms: 30_000,
            start_offset: 0,
            fresh: vec![
                RecordSpan { offset: 0, len: 5, at_ms: 1_000 },
                RecordSpan { offset: 5, len: 5, at_ms: 1_977 },
            ],
        }),
        Op::QueueAck(QueueSettle { id: a.clone(), group: "q".into(), receipt: 1, delay_ms: 0 }),
        Op::QueueNack(QueueSettle { id: a.clone(), group: "q".into(), receipt: 2, delay_ms: 250 }),
        Op::SetQueuePolicy(QueuePolicySet {
            id: a.clone(),
            group: "q".into(),
            max_attempts: 3,
            max_in_flight: 64,
            start_offset: 0,
        }),
        Op::PurgeDeadLetters(QueueDeadLetters { id: a.clone(), group: "q".into() }),
        Op::RedriveDeadLetters(QueueDeadLetters { id: a.clone(), group: "q".into() }),
        Op::SetRetention(RetentionSet { id: a.clone(), consumed: true, max_age_ms: Some(86_400_000) }),
        Op::SetRetention(RetentionSet { id: a.clone(), consumed: false, max_age_ms: None }),
        Op::Reclaim(Reclaim { id: a.clone(), aged_to: 5 }),
    ];
    let mut commands: Vec<Command> =
        ops.into_iter().enumerate().map(|(i, op)| Command { now_ms: 1_000 + i as u64 * 977, op }).collect();
    let mut state = GroupState::new(0, 1, apply_limits());
    for cmd in &commands {
        state.apply(cmd, &mut Vec::new());
    }
    let now = commands.last().map_or(0, |cmd| cmd.now_ms) + 977;
    commands.extend(fork_commands(&mut state, now));
    commands
}

/// A fork `name` of `source` (both in bucket `c`), as the engine makes it
/// from `state`: the source's incarnation and a copy of its records from
/// its retained start up to `end` (the last one cut there), then `own`.
fn fork_of(
    state: &GroupState,
    now: u64,
    (name, source): (&str, &str),
    token: u64,
    (point, end): (ForkPoint, u64),
    own: Option<&'static [u8]>,
) -> Op {
    let (fork, source) = (id("c", name), id("c", source));
    let info = state.fork_source(&source, now).expect("the corpus forks a live source");
    let start = info.head.retained_offset;
    let inherited = state
        .stream(&source)
        .expect("a live source is stored")
        .records()
        .filter(|(at, _)| (start..end).contains(at))
        .map(|(at, record)| record.slice(..record.len().min((end - at) as usize)))
        .collect();
    let mut create = Create::new(fork).content_type(info.head.content_type.as_str());
    create.initial_payload = own.map(Bytes::from_static);
    let origin = ForkOrigin { source, source_incarnation: info.incarnation, token, point, end };
    Op::ForkCreate(Box::new(ForkCreate { create: create.into(), more: Vec::new(), start, inherited, origin }))
}

/// Fork commands (SPEC §2 "Forks") on streams of bucket `c`, each made from
/// `state` as it stands and applied to it, from `now` on: c/src forked
/// into c/f1 (pinned, acknowledged), c/f1 into c/f2 (a fork of a fork,
/// whose pin names another incarnation and is refused, which removes it),
/// c/src into c/f3 (its pin never sent); c/src deleted while f1 pins it (a
/// tombstone); c/f1 into c/f4, pinned, then f4 deleted and its unpin
/// delivered; then f1 deleted, its unpin left owed. The state ends with a
/// tombstone, an unpinned origin, an owed pin and an owed unpin.
pub fn fork_commands(state: &mut GroupState, mut now: u64) -> Vec<Command> {
    type Step = fn(&GroupState, u64) -> Op;
    fn pin(state: &GroupState, (source, fork): (&str, &str), token: u64, other_incarnation: bool) -> Op {
        let incarnation = state.stream(&id("c", source)).expect("a stored source").incarnation();
        let source_incarnation = incarnation + u64::from(other_incarnation);
        Op::ForkPin(ForkPin { source: id("c", source), source_incarnation, token, fork: id("c", fork) })
    }
    let steps: [Step; 18] = [
        |_, _| {
            let records = ["one", "two", "three"].map(|r| Bytes::from_static(r.as_bytes())).to_vec();
            Op::from(Create::new(id("c", "src")).content_type("text/plain").initial_records(records))
        },
        |state, now| {
            let point = ForkPoint::IntoRecord { offset: 3, bytes: 2 };
            fork_of(state, now, ("f1", "src"), 1, (point, 5), Some(b"+1"))
        },
        |state, _| pin(state, ("src", "f1"), 1, false),
        |_, _| Op::ForkPinAck(ForkPinAck { fork: id("c", "f1"), token: 1, pinned: true }),
        |state, now| fork_of(state, now, ("f2", "f1"), 2, (ForkPoint::Tail, 7), None),
        |state, _| pin(state, ("f1", "f2"), 2, true),
        |_, _| Op::ForkPinAck(ForkPinAck { fork: id("c", "f2"), token: 2, pinned: false }),
        |state, now| {
            let point = ForkPoint::Records { offset: 0, count: 2 };
            fork_of(state, now, ("f3", "src"), 3, (point, 6), None)
        },
        |_, _| Op::Delete(id("c", "src")),
        |state, now| fork_of(state, now, ("f4", "f1"), 4, (ForkPoint::Offset(3), 3), Some(b"+4")),
        |state, _| pin(state, ("f1", "f4"), 4, false),
        |_, _| Op::ForkPinAck(ForkPinAck { fork: id("c", "f4"), token: 4, pinned: true }),
        |_, _| Op::Delete(id("c", "f4")),
        |_, _| Op::ForkUnpin(ForkUnpin { source: id("c", "f1"), token: 4, fork: id("c", "f4") }),
        |_, _| Op::ForkOutboxDone(ForkOutboxDone { fork: id("c", "f4"), token: 4 }),
        |_, _| Op::Delete(id("c", "f1")),
        // Re-sent: an acknowledgement and an unpin already done (no-ops).
        |_, _| Op::ForkPinAck(ForkPinAck { fork: id("c", "f1"), token: 1, pinned: true }),
        |_, _| Op::ForkUnpin(ForkUnpin { source: id("c", "f1"), token: 4, fork: id("c", "f4") }),
    ];
    let mut out = Vec::new();
    for step in steps {
        let cmd = Command { now_ms: now, op: step(state, now) };
        state.apply(&cmd, &mut Vec::new());
        out.push(cmd);
        now += 977;
    }
    out
}

/// A replicated group's raft log as its records (FORMAT.md "Raft
/// records"), every kind of record and of entry, in an order that rebuilds:
/// a purge, a joint membership change and a blank entry of term 1, the
/// blank entry cut off again, the votes of node 2 for term 2 (asked, then
/// granted by a quorum), its blank entry and two commands of `commands`
/// (the second and the last), and the committed hint.
pub fn sample_raft_records(commands: &[Command]) -> Vec<RaftRecord> {
    let id = |term, node, index| WireLogId { term, node, index };
    let member =
        |n: u64| Member { raft_addr: format!("10.0.0.{n}:7000"), http_addr: format!("10.0.0.{n}:8080") };
    let membership = WireMembership {
        configs: vec![vec![1, 2, 3], vec![2, 3, 4]],
        nodes: (1..=4).map(|n| (n, member(n))).collect(),
    };
    let proposal = |seq, cmd: &Command| {
        let id = ProposalId { node: 2, boot: 0xb007, seq };
        WirePayload::Normal(Box::new(Proposal { id, cmd: cmd.clone() }))
    };
    let last = commands.last().expect("sample commands");
    vec![
        RaftRecord::Purge { upto: id(1, 1, 4) },
        RaftRecord::Entry { log_id: id(1, 1, 5), payload: WirePayload::Membership(membership) },
        RaftRecord::Entry { log_id: id(1, 1, 6), payload: WirePayload::Blank },
        RaftRecord::Truncate { after: Some(id(1, 1, 5)) },
        RaftRecord::Vote(WireVote { term: 2, node: 2, committed: false }),
        RaftRecord::Vote(WireVote { term: 2, node: 2, committed: true }),
        RaftRecord::Entry { log_id: id(2, 2, 6), payload: WirePayload::Blank },
        RaftRecord::Entry { log_id: id(2, 2, 7), payload: proposal(1, &commands[1]) },
        RaftRecord::Entry { log_id: id(2, 2, 8), payload: proposal(2, last) },
        RaftRecord::Committed(Some(id(2, 2, 7))),
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

/// A segment holding `commands` in flushes of `per_flush` records.
fn segment(first_lsn: u64, commands: &[Command], per_flush: usize) -> Vec<u8> {
    let mut bytes = SegmentHeader::new(1, 3, first_lsn).encode();
    let mut flush = Vec::new();
    for (i, cmd) in commands.iter().enumerate() {
        let body = postcard::to_stdvec(cmd).expect("a command encodes");
        encode_record(
            &mut flush,
            first_lsn + i as u64,
            (i % 3) as u32,
            i as u64 + 1,
            RecordKind::Command,
            &body,
        )
        .expect("corpus records are valid");
        if (i + 1) % per_flush == 0 {
            pad_to_block(&mut flush);
            bytes.append(&mut flush);
        }
    }
    pad_to_block(&mut flush);
    bytes.append(&mut flush);
    bytes
}

/// The generated seed corpus of every target.
pub fn seeds() -> Vec<Seed> {
    let mut out = Out { seeds: Vec::new(), rng: Rng::new(0x5eed) };
    let commands = sample_commands();

    // wal_header: valid blocks, damaged ones, foreign ones.
    for (i, (core, seq, first_lsn)) in
        [(0, 1, 1), (3, 77, 1 << 40), (u32::MAX, u64::MAX, 0)].iter().enumerate()
    {
        let block = SegmentHeader::new(*core, *seq, *first_lsn).encode();
        out.add_damaged("wal_header", &format!("valid{i}"), block, 3);
    }
    out.add("wal_header", "zeros", vec![0; BLOCK]);
    out.add("wal_header", "ones", vec![0xff; BLOCK]);
    out.add("wal_header", "empty", Vec::new());
    let mut future = SegmentHeader::new(0, 1, 1).encode();
    future[8] = 9;
    let crc = crc32c::crc32c(&future[..32]);
    future[32..36].copy_from_slice(&crc.to_le_bytes());
    out.add("wal_header", "version9", future);

    // wal_record: [u16 shift] then the bytes placed at offset 4096.
    for (i, cmd) in commands.iter().enumerate().step_by(3) {
        let body = postcard::to_stdvec(cmd).expect("encodes");
        let mut input = vec![0, 0];
        encode_record(&mut input, 10 + i as u64, i as u32, i as u64, RecordKind::Command, &body)
            .expect("corpus records are valid");
        out.add_damaged("wal_record", &format!("cmd{i}"), input, 2);
    }
    let mut straddle = (4090u16).to_le_bytes().to_vec();
    straddle.extend(vec![0; 4090]);
    encode_record(&mut straddle, 1, 0, 1, RecordKind::Install, &[9; 40]).expect("corpus records are valid");
    out.add_damaged("wal_record", "straddle", straddle, 2);
    let mut padding = vec![0, 0];
    padding.extend(vec![0; 5000]);
    out.add("wal_record", "padding", padding.clone());
    padding[900] = 1;
    out.add("wal_record", "nonzero-padding", padding);
    let mut short_len = (4094u16).to_le_bytes().to_vec();
    short_len.extend(vec![0; 4096]);
    out.add("wal_record", "length-across-boundary", short_len);
    let mut huge = vec![0, 0];
    huge.extend(u32::MAX.to_le_bytes());
    huge.extend([0; 40]);
    out.add("wal_record", "huge-length", huge);

    // wal_segment: whole segments, torn and damaged, plus assembly recipes.
    for (i, per_flush) in [1usize, 4, 100].iter().enumerate() {
        let seg = segment(5, &commands, *per_flush);
        out.add_damaged("wal_segment", &format!("segment{i}"), seg, 4);
    }
    let mut zero_tail = segment(1, &commands[..3], 1);
    zero_tail.extend(vec![0; 3 * BLOCK]);
    out.add("wal_segment", "zero-tail", zero_tail);
    let mut gap = segment(1, &commands[..2], 1);
    let mut later = Vec::new();
    encode_record(&mut later, 9, 0, 9, RecordKind::Command, b"later").expect("corpus records are valid");
    gap.extend(later);
    out.add("wal_segment", "lsn-gap", gap);
    for i in 0..6 {
        let recipe = out.rng.bytes(200 + i * 300);
        out.add("wal_segment", format!("recipe{i}"), recipe);
    }

    // group_snapshot: snapshots of built states; group_snapshot_body: their
    // bodies behind a three-field prefix.
    for i in 0..5 {
        let recipe = out.rng.bytes(40 + i * 80);
        let state = built_state(&mut Cursor::new(&recipe), 0, 1);
        let bytes = state.encode_snapshot();
        let body = bytes[30..bytes.len() - 32].to_vec();
        out.add_damaged("group_snapshot", &format!("state{i}"), bytes, 2);
        let mut input = vec![0, 0];
        input.extend((state.commit_index() as u16).to_le_bytes());
        input.extend(body);
        out.add_damaged("group_snapshot_body", &format!("state{i}"), input, 3);
    }
    let mut forked = GroupState::new(0, 1, unbounded_limits());
    fork_commands(&mut forked, 1_000);
    let bytes = forked.encode_snapshot();
    let mut input = vec![0, 0];
    input.extend((forked.commit_index() as u16).to_le_bytes());
    input.extend(&bytes[30..bytes.len() - 32]);
    out.add_damaged("group_snapshot", "forks", bytes, 2);
    out.add_damaged("group_snapshot_body", "forks", input, 3);
    let empty = GroupState::new(2, 5, unbounded_limits()).encode_snapshot();
    out.add("group_snapshot", "empty", empty);

    // command and command_apply: every operation, and sequences.
    let mut sequence = Vec::new();
    for (i, cmd) in commands.iter().enumerate() {
        let bytes = postcard::to_stdvec(cmd).expect("encodes");
        sequence.extend_from_slice(&bytes);
        out.add_damaged("command", &format!("op{i}"), bytes, 1);
    }
    out.add_damaged("command_apply", "all-ops", sequence, 4);
    for i in 0..4 {
        let recipe = out.rng.bytes(60 + i * 50);
        let mut seq = Vec::new();
        for cmd in crate::targets::built_commands(&mut Cursor::new(&recipe)) {
            seq.extend(postcard::to_stdvec(&cmd).expect("encodes"));
        }
        out.add("command_apply", format!("built{i}"), seq);
    }

    // recovery: recipes (any bytes are one).
    for i in 0..16 {
        let recipe = out.rng.bytes(64 + i * 64);
        out.add("recovery", format!("recipe{i}"), recipe);
    }

    // shape_file: the documented text and its near misses.
    let shapes: [(&str, &[u8]); 12] = [
        ("valid", b"rill-shape 1\ngroups 7\ncores 1\n"),
        ("valid-other-cores", b"rill-shape 1\ngroups 7\ncores 3\n"),
        ("other-groups", b"rill-shape 1\ngroups 8\ncores 1\n"),
        ("other-version", b"rill-shape 2\ngroups 7\ncores 1\n"),
        ("duplicate-key", b"rill-shape 1\ngroups 7\ngroups 7\ncores 1\n"),
        ("missing-cores", b"rill-shape 1\ngroups 7\n"),
        ("unknown-key", b"rill-shape 1\ngroups 7\ncores 1\nshards 2\n"),
        ("not-a-number", b"rill-shape 1\ngroups many\ncores 1\n"),
        ("overflow", b"rill-shape 1\ngroups 99999999999999999999\ncores 1\n"),
        ("empty", b""),
        ("crlf", b"rill-shape 1\r\ngroups 7\r\ncores 1\r\n"),
        ("not-utf8", b"rill-shape 1\ngroups \xff7\ncores 1\n"),
    ];
    for (name, text) in shapes {
        out.add("shape_file", name, text.to_vec());
    }
    // cluster_file: the documented text and its near misses.
    let identities: [(&str, &[u8]); 11] = [
        ("formed", b"rill-cluster 1\nid 00000000c0ffee01\nnode 1\norigin formed\n"),
        ("joined", b"rill-cluster 1\nid 00000000c0ffee01\nnode 4\norigin joined\n"),
        ("other-version", b"rill-cluster 2\nid 00000000c0ffee01\nnode 1\norigin formed\n"),
        ("zero-id", b"rill-cluster 1\nid 0000000000000000\nnode 1\norigin formed\n"),
        ("duplicate-key", b"rill-cluster 1\nid 1\nid 2\nnode 1\norigin formed\n"),
        ("missing-origin", b"rill-cluster 1\nid 1\nnode 1\n"),
        ("unknown-origin", b"rill-cluster 1\nid 1\nnode 1\norigin borrowed\n"),
        ("empty", b""),
        ("not-utf8", b"rill-cluster 1\nid \xff1\nnode 1\norigin formed\n"),
        ("id-overflow", b"rill-cluster 1\nid 1ffffffffffffffff\nnode 1\norigin formed\n"),
        ("no-value", b"rill-cluster 1\nid\nnode 1\norigin formed\n"),
    ];
    for (name, text) in identities {
        out.add("cluster_file", name, text.to_vec());
    }
    // cold_pack: packs of one to four slices of several records in several
    // time runs, damaged and whole, in version 3 and (as older builds wrote
    // them, without record indexes) version 1, and recipes.
    for version in [3u16, 1] {
        for i in 0..4usize {
            let bodies: Vec<Vec<u8>> = (0..=i).map(|n| out.rng.bytes(1 + n * 97)).collect();
            let parts: Vec<[&[u8]; 1]> = bodies.iter().map(|b| [&b[..]]).collect();
            let names = ["x", "y", "z", "w"];
            let indexes: Vec<rill_cold::RecordIndexBuf> = bodies
                .iter()
                .enumerate()
                .map(|(n, body)| {
                    // Records every 13 bytes, a new time every third record.
                    let mut index = rill_cold::RecordIndexBuf::new();
                    for (r, at) in (0..body.len() as u64).step_by(13).enumerate() {
                        index
                            .push(10 * n as u64 + at, 1_700_000_000_000 + (r / 3) as u64 * 250)
                            .expect("in order");
                    }
                    index
                })
                .collect();
            let specs: Vec<rill_cold::SliceSpec<'_>> = parts
                .iter()
                .zip(&indexes)
                .enumerate()
                .map(|(n, (parts, index))| rill_cold::SliceSpec {
                    stream: names[n],
                    incarnation: n as u64 + 1,
                    start: 10 * n as u64,
                    parts: &parts[..],
                    index,
                })
                .collect();
            let pack = rill_cold::pack::encode_pack_version(version, 3, 1 << 16 | i as u64, "bucket", &specs)
                .expect("a pack encodes");
            let name = if version == 3 { format!("pack{i}") } else { format!("v1-pack{i}") };
            out.add_damaged("cold_pack", &name, pack, 3);
        }
    }
    for i in 0..4 {
        let recipe = out.rng.bytes(40 + i * 120);
        out.add("cold_pack", format!("recipe{i}"), recipe);
    }

    // http_request: requests of every kind the server maps, and junk.
    for (name, bytes) in crate::http_target::seeds() {
        out.add("http_request", name, bytes);
    }
    raft_seeds(&mut out, &commands);
    raft_checkpoint_seeds(&mut out);
    out.seeds
}

/// The seeds of WAL format 7 (the raft records of replicated groups), made
/// after every other target's so that those keep their bytes: raft records
/// of every kind and raft log files of them, and records of kind `Raft` for
/// the WAL targets.
fn raft_seeds(out: &mut Out, commands: &[Command]) {
    // raft_record: the sample log's records, the variants it lacks, a
    // refused membership, an integer spelt in more bytes than it needs, and
    // recipes.
    let log = sample_raft_records(commands);
    for (i, record) in log.iter().enumerate() {
        out.add_damaged("raft_record", &format!("record{i}"), record.encode(), 2);
    }
    let max = WireLogId { term: u64::MAX, node: u64::MAX, index: u64::MAX };
    let orphan = WireMembership { configs: vec![vec![1, 2]], nodes: Vec::new() };
    let others = [
        ("truncate-all", RaftRecord::Truncate { after: None }),
        ("committed-none", RaftRecord::Committed(None)),
        ("purge-max", RaftRecord::Purge { upto: max }),
        ("orphan-voter", RaftRecord::Entry { log_id: max, payload: WirePayload::Membership(orphan) }),
    ];
    for (name, record) in others {
        out.add("raft_record", name, record.encode());
    }
    let mut overlong = RaftRecord::Vote(WireVote { term: 5, node: 1, committed: true }).encode();
    assert_eq!(overlong, [1, 5, 1, 1], "a vote's postcard encoding");
    overlong.splice(1..2, [0x85, 0x00]);
    out.add("raft_record", "overlong-term", overlong);
    for i in 0..4 {
        let recipe = out.rng.bytes(16 + i * 48);
        out.add("raft_record", format!("recipe{i}"), recipe);
    }

    // raft_log_file: files of the sample log (whole and compacted), an
    // empty one, one of bodies that are not raft records; the framing of the
    // sample log's file as the target wraps it ([u32 group][u64 through]
    // [u8 count][records]); recipes.
    let bodies: Vec<Vec<u8>> = log.iter().map(RaftRecord::encode).collect();
    let file = raft_file::encode(2, 1 << 20, &bodies);
    out.add_damaged("raft_log_file", "log", file.clone(), 3);
    let image = LogImage::rebuild(&bodies).expect("the sample raft log rebuilds");
    let compacted: Vec<Vec<u8>> = image.compacted().iter().map(RaftRecord::encode).collect();
    out.add("raft_log_file", "compacted", raft_file::encode(2, 77, &compacted));
    out.add("raft_log_file", "empty", raft_file::encode(0, 0, &[]));
    // Version 1 (no `through`), as consolidation wrote it before.
    let mut v1 = raft_file::MAGIC.to_vec();
    v1.extend_from_slice(&1u16.to_le_bytes());
    v1.extend_from_slice(&[0, 0]);
    v1.extend_from_slice(&2u32.to_le_bytes());
    v1.extend_from_slice(&(compacted.len() as u32).to_le_bytes());
    for body in &compacted {
        v1.extend_from_slice(&(body.len() as u32).to_le_bytes());
        v1.extend_from_slice(body);
    }
    let checksum = blake3::hash(&v1);
    v1.extend_from_slice(checksum.as_bytes());
    out.add_damaged("raft_log_file", "version1", v1, 2);
    out.add(
        "raft_log_file",
        "not-raft-records",
        raft_file::encode(7, u64::MAX, &[vec![1, 2, 3], vec![0xff; 40]]),
    );
    let mut framed = 2u32.to_le_bytes().to_vec();
    framed.extend_from_slice(&(1u64 << 20).to_le_bytes());
    framed.push(bodies.len() as u8);
    framed.extend_from_slice(&file[raft_file::HEADER_LEN..file.len() - 32]);
    out.add_damaged("raft_log_file", "framed", framed, 2);
    for i in 0..4 {
        let recipe = out.rng.bytes(24 + i * 64);
        out.add("raft_log_file", format!("recipe{i}"), recipe);
    }

    // wal_record: records of kind Raft, an entry and a vote.
    for (name, record) in [("raft-entry", &log[7]), ("raft-vote", &log[5])] {
        let mut input = vec![0, 0];
        encode_record(&mut input, 40, 2, raft_index(record), RecordKind::Raft, &record.encode())
            .expect("corpus records are valid");
        out.add_damaged("wal_record", name, input, 2);
    }

    // wal_segment: sample commands of groups 0 and 1, each followed by a
    // record of group 2's raft log, six records a flush.
    let mut seg = SegmentHeader::new(1, 3, 5).encode();
    let mut flush = Vec::new();
    let mut index = [0u64; 2];
    let mut lsn = 5;
    for (i, cmd) in commands.iter().take(log.len()).enumerate() {
        index[i % 2] += 1;
        let body = postcard::to_stdvec(cmd).expect("a command encodes");
        encode_record(&mut flush, lsn, (i % 2) as u32, index[i % 2], RecordKind::Command, &body)
            .expect("corpus records are valid");
        let raft = &log[i];
        encode_record(&mut flush, lsn + 1, 2, raft_index(raft), RecordKind::Raft, &raft.encode())
            .expect("corpus records are valid");
        lsn += 2;
        if i % 3 == 2 {
            pad_to_block(&mut flush);
            seg.append(&mut flush);
        }
    }
    pad_to_block(&mut flush);
    seg.append(&mut flush);
    out.add_damaged("wal_segment", "raft", seg, 3);

    // recovery: a recipe of three groups, no checkpoint, one segment (lsns
    // from 1) of raw bytes: group 2's raft log and one record of group 1,
    // in one flush.
    let mut flush = Vec::new();
    for (i, record) in log.iter().chain([&RaftRecord::Committed(None)]).enumerate() {
        let group = if i == log.len() { 1 } else { 2 };
        encode_record(
            &mut flush,
            1 + i as u64,
            group,
            raft_index(record),
            RecordKind::Raft,
            &record.encode(),
        )
        .expect("corpus records are valid");
    }
    pad_to_block(&mut flush);
    let mut recipe = 2u32.to_le_bytes().to_vec();
    recipe.extend([0, 0]);
    recipe.extend(0u32.to_le_bytes());
    recipe.push(1);
    recipe.extend((flush.len() as u32).to_le_bytes());
    recipe.extend(flush);
    out.add_damaged("recovery", "raft", recipe, 1);
}

/// The seeds of the raft checkpoint (FORMAT.md "Raft checkpoint"), made
/// after every other target's so that those keep their bytes: checkpoints
/// of three built states (one in a joint membership change) and of one
/// holding a fork book, whole, cut and flipped; the framing of two of them
/// as the target wraps it (`[u32 group]`, then what follows the group field
/// up to the checksum); a fresh group's (nothing applied, no membership);
/// checkpoints that decode but do not restore (naming another group than
/// their state's, a voter without an address, a damaged group snapshot);
/// one whose meta spells an integer in more bytes than it needs; recipes.
fn raft_checkpoint_seeds(out: &mut Out) {
    const TARGET: &str = "raft_checkpoint";
    let id = |term, node, index| WireLogId { term, node, index };
    let member =
        |n: u64| Member { raft_addr: format!("10.0.0.{n}:7000"), http_addr: format!("10.0.0.{n}:8080") };
    let membership = |configs: Vec<Vec<u64>>, nodes: u64| WireMembership {
        configs,
        nodes: (1..=nodes).map(|n| (n, member(n))).collect(),
    };
    let meta = |applied, membership| CheckpointMeta {
        applied: Some(applied),
        membership_at: Some(id(1, 1, 0)),
        membership,
    };
    let framed = |bytes: &[u8]| [&bytes[12..16], &bytes[16..bytes.len() - 32]].concat();
    let mut checkpoints = Vec::new();
    for i in 0..3u32 {
        let recipe = out.rng.bytes(40 + i as usize * 80);
        let state = built_state(&mut Cursor::new(&recipe), i, 3);
        let voters = match i {
            2 => membership(vec![vec![1, 2, 3], vec![2, 3, 4]], 4),
            _ => membership(vec![vec![1, 2, 3]], 3),
        };
        let applied = id(2 + u64::from(i), 1, 10 + 7 * u64::from(i));
        checkpoints.push(RaftCheckpoint {
            group: i,
            meta: meta(applied, voters),
            state: state.encode_snapshot(),
        });
    }
    for (i, checkpoint) in checkpoints.iter().enumerate() {
        out.add_damaged(TARGET, &format!("checkpoint{i}"), checkpoint.encode(), 2);
    }
    let mut forked = GroupState::new(0, 1, unbounded_limits());
    fork_commands(&mut forked, 1_000);
    let voters = membership(vec![vec![1, 2, 3]], 4);
    let forks =
        RaftCheckpoint { group: 0, meta: meta(id(5, 3, 30), voters), state: forked.encode_snapshot() };
    out.add_damaged(TARGET, "forks", forks.encode(), 2);
    let first = &checkpoints[0];
    let framed_first = framed(&first.encode());
    assert_eq!(wrap_raft_checkpoint(first.group, &framed_first[4..]), first.encode(), "the target's framing");
    out.add_damaged(TARGET, "framed", framed_first, 2);
    out.add_damaged(TARGET, "framed-forks", framed(&forks.encode()), 2);

    let empty = membership(Vec::new(), 0);
    let fresh = RaftCheckpoint {
        group: 2,
        meta: CheckpointMeta { applied: None, membership_at: None, membership: empty },
        state: GroupState::new(2, 5, unbounded_limits()).encode_snapshot(),
    };
    out.add(TARGET, "fresh", fresh.encode());
    out.add(TARGET, "other-group", RaftCheckpoint { group: 1, ..first.clone() }.encode());
    let orphan = WireMembership { configs: vec![vec![1, 2]], nodes: vec![(1, member(1))] };
    let orphan =
        RaftCheckpoint { meta: CheckpointMeta { membership: orphan, ..first.meta.clone() }, ..first.clone() };
    out.add(TARGET, "orphan-voter", orphan.encode());
    let mut damaged = checkpoints[1].clone();
    let at = damaged.state.len() / 2;
    damaged.state[at] ^= 0x10;
    out.add(TARGET, "damaged-state", damaged.encode());
    // The applied entry's term, 2, spelt in two bytes.
    let mut meta = postcard::to_stdvec(&first.meta).expect("a checkpoint meta encodes");
    assert_eq!(meta[..2], [1, 2], "an applied log id's postcard encoding");
    meta.splice(1..2, [0x82, 0x00]);
    let mut body = (meta.len() as u32).to_le_bytes().to_vec();
    body.extend(meta);
    body.extend((first.state.len() as u64).to_le_bytes());
    body.extend(&first.state);
    let overlong = wrap_raft_checkpoint(first.group, &body);
    assert_eq!(RaftCheckpoint::decode(&overlong).as_ref().ok(), Some(first), "an over-long meta decodes");
    out.add(TARGET, "overlong-meta", overlong);
    for i in 0..4 {
        let recipe = out.rng.bytes(32 + i * 96);
        out.add(TARGET, format!("recipe{i}"), recipe);
    }
}

/// A new input derived from `input` (and sometimes `other`) by one to four
/// random edits of the kinds a coverage-guided fuzzer makes.
pub fn mutate(rng: &mut Rng, input: &[u8], other: &[u8]) -> Vec<u8> {
    let mut out = input.to_vec();
    for _ in 0..rng.range(1, 4) {
        let len = out.len();
        match rng.below(9) {
            0 if len > 0 => {
                let at = rng.index(len);
                out[at] ^= 1 << rng.below(8);
            }
            1 if len > 0 => {
                let at = rng.index(len);
                out[at] = rng.next_u64() as u8;
            }
            2 => out.truncate(rng.index(len + 1)),
            3 => {
                let at = rng.index(len + 1);
                let n = rng.index(16) + 1;
                let extra = rng.bytes(n);
                out.splice(at..at, extra);
            }
            4 if len > 0 => {
                let from = rng.index(len);
                let n = rng.index(len - from) + 1;
                let chunk = out[from..from + n].to_vec();
                let at = rng.index(len + 1);
                out.splice(at..at, chunk);
            }
            5 if !other.is_empty() => {
                let at = rng.index(len + 1);
                let from = rng.index(other.len());
                out.truncate(at);
                out.extend_from_slice(&other[from..]);
            }
            6 if len > 0 => {
                let from = rng.index(len);
                let n = rng.index(len - from) + 1;
                out[from..from + n].fill(0);
            }
            7 if len >= 4 => {
                let at = rng.index(len - 3);
                let values = [0u32, 1, 0xff, 0xffff_ffff, len as u32, BLOCK as u32, 64 << 20];
                let v = values[rng.index(values.len())];
                out[at..at + 4].copy_from_slice(&v.to_le_bytes());
            }
            _ => {
                let n = rng.index(64);
                out.extend(rng.bytes(n));
            }
        }
    }
    out
}
