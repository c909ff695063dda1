//! The crash-recovery workload: what the `crash_child` binary does to an
//! engine until it is killed, and the model the parent test checks the
//! recovered engine against (SPEC §2, §6).
//!
//! # What the crash test proves
//!
//! A child process runs a deterministic workload and writes a transcript
//! line before it sends each operation and another after the reply comes
//! back. The parent kills it with `SIGKILL` at a random moment, reopens the
//! data directory and checks, for every stream the transcript names:
//!
//! * every acknowledged operation is there: each acknowledged append holds
//!   the same bytes at the same offsets it was acknowledged with, an
//!   acknowledged close is closed, an acknowledged delete is gone unless a
//!   later create brought the name back;
//! * nothing else is there: the stream is exactly the state reached by a
//!   prefix of the operations sent to it. Since one writer drives a stream
//!   and sends its next operation only after the previous reply, at most one
//!   operation per stream is in flight when the child dies; it may or may
//!   not have landed, but never partly, twice, or after a hole;
//! * the recovered state is whole: `head` agrees with the bytes read
//!   (tail offset, closed, content type, append count and the integrity
//!   set-sum over the exact record boundaries);
//! * idempotent producers survive the crash: when the operation in flight
//!   was a producer append, the next child resends it with the same
//!   producer seq, and the engine must answer it as a duplicate with the
//!   original offsets if it had landed before the kill, or apply it once at
//!   the current tail if it had not. It is never applied twice.
//!
//! The parent keeps every stream of every earlier cycle in its model and
//! checks all of them after each kill, so an operation that survived one
//! crash must survive all the later ones too. Once the parent has seen an
//! in-flight operation in the recovered state it counts as committed.
//!
//! # Workload
//!
//! Each stream has a script: a sequence of operations generated from the
//! seed and the stream's name alone, so the parent regenerates every
//! operation (payload bytes included) from the transcript's
//! `(stream, op number)`. A script creates the stream (some with a content
//! type, some with an initial payload), appends (plain, as an idempotent
//! producer `w<incarnation>` at epoch 0 with seqs counting up, and in
//! batches of 2 to 5 payloads), closes (with `close` or an append with
//! `close_after`, the only appends that may be empty), appends to a closed
//! stream (expecting `StreamClosed`), deletes, probes the deleted name
//! (expecting not found) and creates it again. Payload sizes are uniform in
//! `1..=2000` bytes. Each cycle runs [`WRITERS`] writer tasks at once; each
//! takes new streams named after the cycle one after the other (writer `w`
//! takes indexes `w`, `w + WRITERS`, ...) until the child is killed or the
//! cycle's [`OP_BUDGET`] is spent. Each stream carried over for a resend
//! gets a writer of its own, which sends the resend first and then goes on
//! with the rest of that stream's script.
//!
//! # Transcript
//!
//! One line per event, written with a single `write` and flushed:
//!
//! ```text
//! O                                      the engine is open, the workload starts
//! S <stream> <opno>                      about to send op <opno> of <stream>
//! A <stream> <opno> <start> <next> [dedup]
//!                                        the op succeeded: byte range [start, next) for
//!                                        appends and batches (the whole batch), 0 <next>
//!                                        for a create, <tail> <tail> for a close, 0 0
//!                                        for a delete; `dedup` when the engine answered
//!                                        it as a repeat (a deduplicated producer append
//!                                        or batch, an existing stream, a closed stream)
//! E <stream> <opno> <error code>         the op failed with this `ErrorCode::as_str()`
//! D                                      the op budget is spent; the child idles
//! ```
//!
//! `<stream>` is `c<cycle>s<index>` (see [`StreamKey`]). The resend file the
//! parent passes to the next child has one line per carried stream:
//! `<stream> <opno> <producer id> <producer seq>` (see [`Resend`]).

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;
use std::path::Path;
use std::str::FromStr;
use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

use bytes::Bytes;
use rill::{
    Append, AppendBatch, Config, Create, Engine, ErrorCode, ProducerArgs, Read, SetSum, StreamId,
    DEFAULT_CONTENT_TYPE,
};

/// Cores of every engine the crash test opens (child and parent alike).
pub const CORES: usize = 2;
/// Groups of every engine the crash test opens.
pub const GROUPS: u32 = 16;
/// Buckets the streams are spread over.
pub const BUCKETS: u32 = 4;
/// Writer tasks of a cycle (streams written concurrently), resends aside.
pub const WRITERS: u32 = 48;
/// Ops one cycle may send at most: far more than a child gets through
/// before the kill, so that the kill lands in the middle of the work.
pub const OP_BUDGET: u64 = 50_000;
/// Shortest and longest script, in operations.
pub const SCRIPT_OPS: (u64, u64) = (40, 160);
/// Largest payload of one append or batch item.
pub const MAX_PAYLOAD: u64 = 2000;

const TAG_SCRIPT: u64 = 1;
const TAG_PAYLOAD: u64 = 2;
/// Domain tag for randomness outside the scripts (the parent's delays).
pub const TAG_PARENT: u64 = 3;

const JSON: &str = "application/json";
const TEXT: &str = "text/plain";

/// Codes of a stream that does not exist (a bucket left without streams
/// may or may not be remembered).
pub const NOT_FOUND: &[ErrorCode] = &[ErrorCode::StreamNotFound, ErrorCode::BucketNotFound];
const CLOSED: &[ErrorCode] = &[ErrorCode::StreamClosed];

/// The engine configuration of the crash test, on `dir`: small cold-tier
/// and checkpoint thresholds so kills also land in the middle of flushes,
/// reclamation, compaction and checkpoints.
pub fn engine_config(dir: &Path) -> Config {
    Config::new(dir)
        .cores(CORES)
        .groups(GROUPS)
        .min_hot_bytes(16 * 1024)
        .flush_interval(std::time::Duration::from_millis(10))
        .max_batch_bytes(64 * 1024)
        .compaction(8 * 1024, 256 * 1024, std::time::Duration::from_millis(0))
        .wal_segment_bytes(256 * 1024)
        .checkpoint_wal_bytes(1024 * 1024)
}

// ---------------------------------------------------------------------------
// Deterministic randomness
// ---------------------------------------------------------------------------

fn finalize(mut z: u64) -> u64 {
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// Hashes a tuple of numbers into one seed.
pub fn mix(parts: &[u64]) -> u64 {
    parts.iter().fold(0x6A09_E667_F3BC_C909, |h, p| finalize(h ^ finalize(p.wrapping_add(0x9E37_79B9))))
}

/// SplitMix64: small, fast and fully specified here, so a seed replays the
/// same workload whatever the dependency versions.
#[derive(Clone, Debug)]
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed)
    }

    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        finalize(self.0)
    }

    /// Uniform in `0..n` (`n > 0`).
    pub fn below(&mut self, n: u64) -> u64 {
        ((u128::from(self.next_u64()) * u128::from(n)) >> 64) as u64
    }

    /// Uniform in `lo..=hi`.
    pub fn range(&mut self, lo: u64, hi: u64) -> u64 {
        lo + self.below(hi - lo + 1)
    }

    /// True with probability `p` percent.
    pub fn percent(&mut self, p: u64) -> bool {
        self.below(100) < p
    }

    pub fn fill(&mut self, buf: &mut [u8]) {
        for chunk in buf.chunks_mut(8) {
            let word = self.next_u64().to_le_bytes();
            chunk.copy_from_slice(&word[..chunk.len()]);
        }
    }
}

// ---------------------------------------------------------------------------
// Streams and operations
// ---------------------------------------------------------------------------

/// A stream of the workload: the cycle that started it and its index in
/// that cycle. Written `c<cycle>s<index>`, which is also the stream name;
/// the bucket is `crash<index % BUCKETS>`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct StreamKey {
    pub cycle: u32,
    pub index: u32,
}

impl StreamKey {
    pub fn id(self) -> StreamId {
        StreamId::new(format!("crash{}", self.index % BUCKETS), self.to_string()).expect("valid stream name")
    }
}

impl fmt::Display for StreamKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "c{}s{}", self.cycle, self.index)
    }
}

impl FromStr for StreamKey {
    type Err = String;
    fn from_str(s: &str) -> Result<StreamKey, String> {
        let bad = || format!("`{s}` is not a stream key (c<cycle>s<index>)");
        let (cycle, index) = s.strip_prefix('c').and_then(|rest| rest.split_once('s')).ok_or_else(bad)?;
        Ok(StreamKey { cycle: cycle.parse().map_err(|_| bad())?, index: index.parse().map_err(|_| bad())? })
    }
}

/// The payload of item `item` of op `opno` of a stream: a pure function of
/// its arguments.
pub fn payload(seed: u64, key: StreamKey, opno: u64, item: usize, len: u64) -> Bytes {
    let mut rng = Rng::new(mix(&[seed, TAG_PAYLOAD, key.cycle.into(), key.index.into(), opno, item as u64]));
    let mut buf = vec![0u8; len as usize];
    rng.fill(&mut buf);
    Bytes::from(buf)
}

/// What an operation does.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum OpKind {
    /// Create the stream; `initial_len > 0` adds an initial payload.
    Create {
        content_type: Option<&'static str>,
        initial_len: u64,
    },
    Append {
        len: u64,
        content_type: Option<String>,
        close_after: bool,
        producer: Option<ProducerArgs>,
    },
    Batch {
        lens: Vec<u64>,
        producer: Option<ProducerArgs>,
    },
    Close,
    Delete,
}

/// What the engine must answer, assuming every earlier op of the stream was
/// applied exactly once.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Expect {
    /// An `A` line with these fields (`noop` is the `dedup` flag).
    Applied { start: u64, next: u64, noop: bool },
    /// An `E` line with one of these codes.
    Fails(&'static [ErrorCode]),
}

/// One operation of a stream's script.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Op {
    pub key: StreamKey,
    pub opno: u64,
    pub kind: OpKind,
    pub expect: Expect,
}

impl Op {
    pub fn producer(&self) -> Option<&ProducerArgs> {
        match &self.kind {
            OpKind::Append { producer, .. } | OpKind::Batch { producer, .. } => producer.as_ref(),
            _ => None,
        }
    }

    /// A short description for messages.
    pub fn describe(&self) -> String {
        let producer = |p: &Option<ProducerArgs>| match p {
            Some(p) => format!(" as producer {} seq {}", p.id, p.seq),
            None => String::new(),
        };
        match &self.kind {
            OpKind::Create { content_type, initial_len } => {
                format!(
                    "create ({}, initial {initial_len} bytes)",
                    content_type.unwrap_or(DEFAULT_CONTENT_TYPE)
                )
            }
            OpKind::Append { len, close_after, producer: p, .. } => format!(
                "append of {len} bytes{}{}",
                if *close_after { " with close_after" } else { "" },
                producer(p)
            ),
            OpKind::Batch { lens, producer: p } => format!("batch of {lens:?} bytes{}", producer(p)),
            OpKind::Close => "close".to_string(),
            OpKind::Delete => "delete".to_string(),
        }
    }

    /// Sends the op and reduces the reply to what the transcript records.
    pub async fn execute(&self, engine: &Engine, seed: u64) -> Outcome {
        let id = self.key.id();
        let bytes = |item: usize, len: u64| payload(seed, self.key, self.opno, item, len);
        let result = match &self.kind {
            OpKind::Create { content_type, initial_len } => {
                let mut req = Create::new(id);
                if let Some(ct) = content_type {
                    req = req.content_type(*ct);
                }
                if *initial_len > 0 {
                    req = req.initial_payload(bytes(0, *initial_len));
                }
                engine.create(req).await.map(|r| Outcome::Applied {
                    start: 0,
                    next: r.next_offset,
                    noop: r.already_exists,
                })
            }
            OpKind::Append { len, content_type, close_after, producer } => {
                let mut req = Append::new(id, bytes(0, *len)).close_after(*close_after);
                if let Some(ct) = content_type {
                    req = req.content_type(ct.clone());
                }
                if let Some(p) = producer {
                    req = req.producer(p.id.clone(), p.epoch, p.seq);
                }
                engine.append(req).await.map(|r| Outcome::Applied {
                    start: r.start_offset,
                    next: r.next_offset,
                    noop: r.deduplicated,
                })
            }
            OpKind::Batch { lens, producer } => {
                let payloads = lens.iter().enumerate().map(|(i, len)| bytes(i, *len)).collect();
                let mut req = AppendBatch::new(id, payloads);
                if let Some(p) = producer {
                    req = req.producer(p.id.clone(), p.epoch, p.seq);
                }
                engine.append_batch(req).await.map(|r| batch_outcome(&r.items))
            }
            OpKind::Close => engine.close(&id).await.map(|r| Outcome::Applied {
                start: r.next_offset,
                next: r.next_offset,
                noop: r.already_closed,
            }),
            OpKind::Delete => {
                engine.delete(&id).await.map(|()| Outcome::Applied { start: 0, next: 0, noop: false })
            }
        };
        result.unwrap_or_else(|e| Outcome::Failed(e.code().as_str().to_string()))
    }
}

/// A batch reply as one transcript outcome: the whole byte range when every
/// item landed contiguously and all or none were deduplicated; otherwise a
/// failure code the parent will not expect.
fn batch_outcome(items: &[rill::Result<rill::AppendReply>]) -> Outcome {
    let mut replies = Vec::with_capacity(items.len());
    for item in items {
        match item {
            Ok(r) => replies.push(r),
            Err(e) => return Outcome::Failed(e.code().as_str().to_string()),
        }
    }
    let (Some(first), Some(last)) = (replies.first(), replies.last()) else {
        return Outcome::Failed("empty_batch_reply".to_string());
    };
    if replies.windows(2).any(|w| w[0].next_offset != w[1].start_offset) {
        return Outcome::Failed("discontiguous_batch_reply".to_string());
    }
    let deduplicated = replies.iter().filter(|r| r.deduplicated).count();
    if deduplicated != 0 && deduplicated != replies.len() {
        return Outcome::Failed("partly_deduplicated_batch_reply".to_string());
    }
    Outcome::Applied { start: first.start_offset, next: last.next_offset, noop: deduplicated != 0 }
}

/// A reply as the transcript records it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    Applied { start: u64, next: u64, noop: bool },
    Failed(String),
}

impl Outcome {
    /// The `A` or `E` line of op `opno` of `key`.
    pub fn line(&self, key: StreamKey, opno: u64) -> String {
        match self {
            Outcome::Applied { start, next, noop } => {
                format!("A {key} {opno} {start} {next}{}", if *noop { " dedup" } else { "" })
            }
            Outcome::Failed(code) => format!("E {key} {opno} {code}"),
        }
    }
}

impl fmt::Display for Outcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Outcome::Applied { start, next, noop } => {
                write!(f, "[{start}, {next}){}", if *noop { " dedup" } else { "" })
            }
            Outcome::Failed(code) => write!(f, "error {code}"),
        }
    }
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Expect::Applied { start, next, noop } => {
                write!(f, "[{start}, {next}){}", if *noop { " dedup" } else { "" })
            }
            Expect::Fails(codes) => {
                let names: Vec<&str> = codes.iter().map(|c| c.as_str()).collect();
                write!(f, "error {}", names.join(" or "))
            }
        }
    }
}

// ---------------------------------------------------------------------------
// Expected stream state and scripts
// ---------------------------------------------------------------------------

/// One stored record: a non-empty payload at an offset.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record {
    pub opno: u64,
    pub item: usize,
    pub start: u64,
    pub payload: Bytes,
}

impl Record {
    pub fn end(&self) -> u64 {
        self.start + self.payload.len() as u64
    }
}

/// A stream that exists, as the model expects it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Live {
    /// 1 for the first create, 2 after a delete and re-create, ...
    pub incarnation: u32,
    pub content_type: String,
    pub closed: bool,
    pub records: Vec<Record>,
    pub append_count: u64,
    /// Next seq of this incarnation's producer.
    pub producer_seq: u64,
}

impl Live {
    pub fn tail(&self) -> u64 {
        self.records.last().map_or(0, Record::end)
    }

    pub fn content(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(self.tail() as usize);
        for r in &self.records {
            out.extend_from_slice(&r.payload);
        }
        out
    }

    pub fn live_sum(&self) -> SetSum {
        let mut sum = SetSum::default();
        for r in &self.records {
            sum.add_record(r.start, &r.payload);
        }
        sum
    }

    fn land(&mut self, opno: u64, item: usize, payload: Bytes) {
        if !payload.is_empty() {
            let start = self.tail();
            self.records.push(Record { opno, item, start, payload });
        }
        self.append_count += 1;
    }
}

/// A stream's expected state after a prefix of its script.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct StreamState {
    /// `None` before the first create and after a delete.
    pub live: Option<Live>,
    /// Creates applied so far.
    pub incarnations: u32,
}

/// A stream's script: generates its ops one after the other and keeps the
/// state they lead to, assuming each is applied exactly once. Everything is
/// derived from the seed and the key.
#[derive(Clone, Debug)]
pub struct Script {
    seed: u64,
    key: StreamKey,
    rng: Rng,
    length: u64,
    generated: u64,
    /// The deleted name was probed once already.
    probed: bool,
    state: StreamState,
}

impl Script {
    pub fn new(seed: u64, key: StreamKey) -> Script {
        let mut rng = Rng::new(mix(&[seed, TAG_SCRIPT, key.cycle.into(), key.index.into()]));
        let length = rng.range(SCRIPT_OPS.0, SCRIPT_OPS.1);
        Script { seed, key, rng, length, generated: 0, probed: false, state: StreamState::default() }
    }

    pub fn key(&self) -> StreamKey {
        self.key
    }

    /// Ops generated so far (the number of the next op).
    pub fn generated(&self) -> u64 {
        self.generated
    }

    /// Ops in the whole script.
    pub fn length(&self) -> u64 {
        self.length
    }

    /// The state after every op generated so far.
    pub fn state(&self) -> &StreamState {
        &self.state
    }

    /// The next op, or `None` at the end of the script.
    pub fn next_op(&mut self) -> Option<Op> {
        if self.generated >= self.length {
            return None;
        }
        let opno = self.generated;
        let kind = self.choose();
        let expect = self.apply(opno, &kind);
        self.generated += 1;
        Some(Op { key: self.key, opno, kind, expect })
    }

    /// Generates and drops ops until `opno` is next; false if the script is
    /// shorter.
    pub fn skip_to(&mut self, opno: u64) -> bool {
        while self.generated < opno {
            if self.next_op().is_none() {
                return false;
            }
        }
        self.generated == opno
    }

    fn len(&mut self) -> u64 {
        self.rng.range(1, MAX_PAYLOAD)
    }

    fn plain_append(&mut self, content_type: Option<String>) -> OpKind {
        let len = self.len();
        OpKind::Append { len, content_type, close_after: false, producer: None }
    }

    fn choose(&mut self) -> OpKind {
        let live = self
            .state
            .live
            .as_ref()
            .map(|l| (l.closed, l.incarnation, l.producer_seq, l.content_type.clone()));
        match live {
            None => {
                if self.generated > 0 && !self.probed && self.rng.percent(40) {
                    self.probed = true;
                    return self.plain_append(None);
                }
                self.probed = false;
                let content_type = [None, Some(JSON), Some(TEXT)][self.rng.below(3) as usize];
                let initial_len = if self.rng.percent(40) { self.len() } else { 0 };
                OpKind::Create { content_type, initial_len }
            }
            Some((true, ..)) => match self.rng.below(100) {
                0..15 => self.plain_append(None),
                15..25 => {
                    let lens = (0..self.rng.range(2, 5)).map(|_| self.len()).collect();
                    OpKind::Batch { lens, producer: None }
                }
                25..40 => OpKind::Close,
                _ => OpKind::Delete,
            },
            Some((false, incarnation, seq, content_type)) => {
                let producer = ProducerArgs { id: format!("w{incarnation}"), epoch: 0, seq };
                match self.rng.below(100) {
                    0..42 => {
                        let content_type = self.rng.percent(25).then_some(content_type);
                        self.plain_append(content_type)
                    }
                    42..74 => {
                        let len = self.len();
                        OpKind::Append {
                            len,
                            content_type: None,
                            close_after: false,
                            producer: Some(producer),
                        }
                    }
                    74..90 => {
                        let lens = (0..self.rng.range(2, 5)).map(|_| self.len()).collect();
                        let producer = self.rng.percent(50).then_some(producer);
                        OpKind::Batch { lens, producer }
                    }
                    90..93 => OpKind::Close,
                    93..96 => {
                        let len = if self.rng.percent(35) { 0 } else { self.len() };
                        let producer = self.rng.percent(50).then_some(producer);
                        OpKind::Append { len, content_type: None, close_after: true, producer }
                    }
                    _ => OpKind::Delete,
                }
            }
        }
    }

    /// Applies `kind` to the state and says what the engine must answer.
    fn apply(&mut self, opno: u64, kind: &OpKind) -> Expect {
        let (seed, key) = (self.seed, self.key);
        let state = &mut self.state;
        let Some(live) = state.live.as_mut() else {
            let OpKind::Create { content_type, initial_len } = kind else {
                return Expect::Fails(NOT_FOUND);
            };
            state.incarnations += 1;
            let mut live = Live {
                incarnation: state.incarnations,
                content_type: content_type.unwrap_or(DEFAULT_CONTENT_TYPE).to_string(),
                closed: false,
                records: Vec::new(),
                append_count: 0,
                producer_seq: 0,
            };
            if *initial_len > 0 {
                live.land(opno, 0, payload(seed, key, opno, 0, *initial_len));
            }
            let next = live.tail();
            state.live = Some(live);
            return Expect::Applied { start: 0, next, noop: false };
        };
        let start = live.tail();
        match kind {
            OpKind::Create { .. } => unreachable!("scripts create only absent streams"),
            OpKind::Append { len, close_after, producer, .. } => {
                if live.closed {
                    // Scripts send only non-empty appends to closed streams.
                    return Expect::Fails(CLOSED);
                }
                live.land(opno, 0, payload(seed, key, opno, 0, *len));
                live.closed |= *close_after;
                if producer.is_some() {
                    live.producer_seq += 1;
                }
                Expect::Applied { start, next: live.tail(), noop: false }
            }
            OpKind::Batch { lens, producer } => {
                if live.closed {
                    return Expect::Fails(CLOSED);
                }
                for (item, len) in lens.iter().enumerate() {
                    live.land(opno, item, payload(seed, key, opno, item, *len));
                }
                if producer.is_some() {
                    live.producer_seq += 1;
                }
                Expect::Applied { start, next: live.tail(), noop: false }
            }
            OpKind::Close => {
                let noop = live.closed;
                live.closed = true;
                Expect::Applied { start, next: start, noop }
            }
            OpKind::Delete => {
                state.live = None;
                Expect::Applied { start: 0, next: 0, noop: false }
            }
        }
    }
}

// ---------------------------------------------------------------------------
// The child's side: driving scripts and writing the transcript
// ---------------------------------------------------------------------------

/// Where transcript lines go.
pub trait Sink: Send + Sync {
    /// Records one line (without its newline). False when the line could
    /// not be recorded: the writer must stop at once.
    fn emit(&self, line: &str) -> bool;

    /// Whether an op whose `S` line was just recorded may be sent. A real
    /// process is always alive until it is killed; the in-process tests use
    /// this to stop between the `S` line and the send.
    fn alive(&self) -> bool {
        true
    }
}

/// A producer op the next child must send again first (a line of the
/// resend file: `<stream> <opno> <producer id> <producer seq>`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resend {
    pub key: StreamKey,
    pub opno: u64,
    pub producer_id: String,
    pub seq: u64,
}

impl Resend {
    pub fn line(&self) -> String {
        format!("{} {} {} {}", self.key, self.opno, self.producer_id, self.seq)
    }

    pub fn parse_file(text: &str) -> Result<Vec<Resend>, String> {
        text.lines()
            .filter(|l| !l.trim().is_empty())
            .map(|line| {
                let words: Vec<&str> = line.split_whitespace().collect();
                let bad = || format!("bad resend line `{line}`");
                let [key, opno, producer_id, seq] = words[..] else { return Err(bad()) };
                Ok(Resend {
                    key: key.parse()?,
                    opno: opno.parse().map_err(|_| bad())?,
                    producer_id: producer_id.to_string(),
                    seq: seq.parse().map_err(|_| bad())?,
                })
            })
            .collect()
    }

    pub fn file(resends: &[Resend]) -> String {
        resends.iter().map(|r| r.line() + "\n").collect()
    }
}

/// Runs one cycle of the workload: a writer for each resend, which sends
/// the resend and then the rest of that stream's script, and [`WRITERS`]
/// writers for the new streams of `cycle`, all concurrently. Must run inside
/// a tokio runtime. Returns when every writer has stopped: when the sink
/// refused a line or the [`OP_BUDGET`] is spent (each writer then stops
/// before its next op, as a kill between two ops would).
pub async fn run_workload(
    engine: Engine,
    seed: u64,
    cycle: u32,
    resends: Vec<Resend>,
    sink: Arc<dyn Sink>,
) -> Result<(), String> {
    let budget = Arc::new(AtomicU64::new(OP_BUDGET));
    let mut tasks = Vec::new();
    for resend in resends {
        let mut script = Script::new(seed, resend.key);
        let op = script.skip_to(resend.opno).then(|| script.next_op()).flatten();
        let matches = op
            .as_ref()
            .and_then(Op::producer)
            .is_some_and(|p| p.id == resend.producer_id && p.seq == resend.seq && p.epoch == 0);
        if !matches {
            return Err(format!(
                "resend `{}` does not name a producer op of the script: {op:?}",
                resend.line()
            ));
        }
        let writer = Writer { engine: engine.clone(), seed, sink: sink.clone(), budget: budget.clone() };
        tasks.push(tokio::spawn(async move {
            writer.drive(script, op).await;
        }));
    }
    for first in 0..WRITERS {
        let writer = Writer { engine: engine.clone(), seed, sink: sink.clone(), budget: budget.clone() };
        tasks.push(tokio::spawn(async move {
            let mut index = first;
            while writer.drive(Script::new(seed, StreamKey { cycle, index }), None).await {
                index += WRITERS;
            }
        }));
    }
    for task in tasks {
        task.await.map_err(|e| format!("a writer task failed: {e}"))?;
    }
    Ok(())
}

/// One writer task: drives one stream at a time, sending each op only
/// after the previous reply.
struct Writer {
    engine: Engine,
    seed: u64,
    sink: Arc<dyn Sink>,
    budget: Arc<AtomicU64>,
}

impl Writer {
    /// Sends `first` (a resend), then the rest of the script. True when the
    /// script ran to its end.
    async fn drive(&self, mut script: Script, first: Option<Op>) -> bool {
        if let Some(op) = first {
            if !self.step(&op).await {
                return false;
            }
        }
        while let Some(op) = script.next_op() {
            if !self.step(&op).await {
                return false;
            }
        }
        true
    }

    async fn step(&self, op: &Op) -> bool {
        let spent = self.budget.fetch_update(SeqCst, SeqCst, |left| left.checked_sub(1)).is_err();
        if spent || !self.sink.emit(&format!("S {} {}", op.key, op.opno)) || !self.sink.alive() {
            return false;
        }
        let outcome = op.execute(&self.engine, self.seed).await;
        self.sink.emit(&outcome.line(op.key, op.opno))
    }
}

// ---------------------------------------------------------------------------
// The parent's side: the model of the transcript and the verifier
// ---------------------------------------------------------------------------

/// A stream as read back from an engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observed {
    /// `head` answered not found.
    Absent,
    Present(PresentStream),
}

/// What `head` and a full read of a stream return.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PresentStream {
    pub content_type: String,
    pub closed: bool,
    pub tail_offset: u64,
    pub append_count: u64,
    pub live: SetSum,
    /// The bytes read from offset 0 to the end.
    pub content: Vec<u8>,
}

impl Observed {
    /// What an engine holding exactly `state` would answer.
    pub fn of_state(state: &StreamState) -> Observed {
        match &state.live {
            None => Observed::Absent,
            Some(live) => Observed::Present(PresentStream {
                content_type: live.content_type.clone(),
                closed: live.closed,
                tail_offset: live.tail(),
                append_count: live.append_count,
                live: live.live_sum(),
                content: live.content(),
            }),
        }
    }

    fn bytes(&self) -> u64 {
        match self {
            Observed::Absent => 0,
            Observed::Present(p) => p.content.len() as u64,
        }
    }
}

/// Reads a stream back: `head`, then every byte from offset 0.
pub async fn observe(engine: &Engine, key: StreamKey) -> Result<Observed, String> {
    let id = key.id();
    let head = match engine.head(&id).await {
        Ok(head) => head,
        Err(e) if NOT_FOUND.contains(&e.code()) => return Ok(Observed::Absent),
        Err(e) => return Err(format!("head failed: {e} ({})", e.code().as_str())),
    };
    let mut content = Vec::with_capacity(head.tail_offset as usize);
    loop {
        let offset = content.len() as u64;
        let r = engine
            .read(Read::new(id.clone()).offset(offset))
            .await
            .map_err(|e| format!("read at {offset} failed: {e} ({})", e.code().as_str()))?;
        if r.offset != offset || r.next_offset != offset + r.payload.len() as u64 {
            return Err(format!(
                "read at {offset} answered offset {} next {} with {} bytes",
                r.offset,
                r.next_offset,
                r.payload.len()
            ));
        }
        content.extend_from_slice(&r.payload);
        if r.up_to_date {
            break;
        }
        if r.payload.is_empty() {
            return Err(format!("read at {offset} returned nothing and is not up to date"));
        }
    }
    Ok(Observed::Present(PresentStream {
        content_type: head.content_type,
        closed: head.closed,
        tail_offset: head.tail_offset,
        append_count: head.append_count,
        live: head.integrity.live,
        content,
    }))
}

/// Checks an observed stream against one expected state; the error says
/// what differs first, naming the op whose data is missing or altered.
pub fn compare(expected: &StreamState, observed: &Observed) -> Result<(), String> {
    let (live, p) = match (&expected.live, observed) {
        (None, Observed::Absent) => return Ok(()),
        (None, Observed::Present(p)) => {
            let why = if expected.incarnations > 0 {
                "its delete was acknowledged"
            } else {
                "it was never created"
            };
            return Err(format!(
                "the stream exists ({} bytes, closed {}) but should not: {why}",
                p.content.len(),
                p.closed
            ));
        }
        (Some(live), Observed::Absent) => {
            return Err(format!(
                "the stream is not found, but incarnation {} should exist with {} bytes in {} records{}",
                live.incarnation,
                live.tail(),
                live.records.len(),
                live.records.last().map_or(String::new(), |r| format!(" (last written by op {})", r.opno)),
            ));
        }
        (Some(live), Observed::Present(p)) => (live, p),
    };
    if p.tail_offset != p.content.len() as u64 {
        return Err(format!(
            "head says the tail is {} but reading from 0 gave {} bytes",
            p.tail_offset,
            p.content.len()
        ));
    }
    if let Some(problem) = content_problem(live, &p.content) {
        return Err(problem);
    }
    if p.closed != live.closed {
        return Err(format!("closed is {}, expected {}", p.closed, live.closed));
    }
    if p.content_type != live.content_type {
        return Err(format!("content type is {:?}, expected {:?}", p.content_type, live.content_type));
    }
    if p.append_count != live.append_count {
        return Err(format!("append count is {}, expected {}", p.append_count, live.append_count));
    }
    let sum = live.live_sum();
    if p.live != sum {
        return Err(format!(
            "the integrity sum over {} records differs from the one over the expected {} records",
            p.live.records, sum.records
        ));
    }
    Ok(())
}

/// Which expected record is missing or altered in `content`, or what extra
/// bytes follow them; `None` when the bytes are exactly the records'.
fn content_problem(live: &Live, content: &[u8]) -> Option<String> {
    let have = content.len() as u64;
    for r in &live.records {
        let what = format!("op {} item {} at [{}, {})", r.opno, r.item, r.start, r.end());
        if have < r.end() {
            let held = &content[(r.start.min(have) as usize)..];
            return Some(if have <= r.start {
                format!("{what} is missing: the stream ends at {have}")
            } else if held == &r.payload[..held.len()] {
                format!("{what} is cut short: the stream ends at {have}")
            } else {
                format!("{what} holds other bytes{}", identify(live, held))
            });
        }
        let held = &content[r.start as usize..r.end() as usize];
        if held != &r.payload[..] {
            let first = held.iter().zip(r.payload.iter()).position(|(a, b)| a != b).unwrap_or(0);
            return Some(format!(
                "{what} holds other bytes from offset {}{}",
                r.start + first as u64,
                identify(live, &content[r.start as usize..])
            ));
        }
    }
    let tail = live.tail();
    (have > tail).then(|| {
        format!(
            "{} bytes follow the last expected byte at {tail}{}",
            have - tail,
            identify(live, &content[tail as usize..])
        )
    })
}

/// Names the record of `live` whose payload `bytes` start with, if any (a
/// duplicate or a misplaced record).
fn identify(live: &Live, bytes: &[u8]) -> String {
    let probe = &bytes[..bytes.len().min(16)];
    live.records
        .iter()
        .find(|r| {
            let n = probe.len().min(r.payload.len());
            n >= 8 && r.payload[..n] == probe[..n]
        })
        .map_or(String::from(" (not the start of any expected record)"), |r| {
            format!(" (they start like op {} item {}, stored at {})", r.opno, r.item, r.start)
        })
}

/// An op sent in the current cycle whose reply has not been read yet.
#[derive(Clone, Debug)]
struct Sent {
    op: Op,
    /// The script once the op is applied.
    after: Script,
    /// For a resend: whether the op was already in the stream.
    resend_of_landed: Option<bool>,
}

/// A producer op to send again at the next child start.
#[derive(Clone, Debug)]
struct Planned {
    op: Op,
    after: Script,
    /// Whether the previous verification found the op in the stream.
    landed: bool,
}

/// The model of one stream.
#[derive(Clone, Debug)]
struct Track {
    /// The script advanced by exactly the ops known to be in the stream.
    committed: Script,
    /// The cycle whose child drives the stream: its own, or a later one it
    /// was carried into for a resend.
    active_cycle: u32,
    outstanding: Option<Sent>,
    /// After a crash: the op (number `committed.generated()`) that was in
    /// flight, which may or may not have landed, with the script after it.
    pending: Option<(Op, Script)>,
    resend: Option<Planned>,
    /// Ops in `committed` that were never acknowledged but were seen.
    seen_unacked: BTreeSet<u64>,
}

/// Counts of one transcript.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TranscriptReport {
    pub lines: u64,
    pub sent: u64,
    /// `A` and `E` lines.
    pub acked: u64,
    /// `E` lines (all of them expected).
    pub expected_errors: u64,
    pub in_flight_at_kill: u64,
    pub resends_deduplicated: u64,
    pub resends_applied: u64,
    pub done: bool,
}

/// Counts of one verification.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifyReport {
    pub streams: u64,
    pub bytes: u64,
    /// In-flight ops found in the stream / not found.
    pub in_flight_landed: u64,
    pub in_flight_absent: u64,
    /// One entry per stream that does not match.
    pub failures: Vec<String>,
}

/// The parent's model: every stream of every cycle so far.
#[derive(Clone, Debug)]
pub struct Model {
    seed: u64,
    tracks: BTreeMap<StreamKey, Track>,
}

/// A transcript reply, parsed.
fn parse_reply(kind: &str, words: &[&str]) -> Result<Outcome, String> {
    let number = |w: &str| w.parse::<u64>().map_err(|_| format!("`{w}` is not a number"));
    match (kind, words) {
        ("A", [start, next]) => {
            Ok(Outcome::Applied { start: number(start)?, next: number(next)?, noop: false })
        }
        ("A", [start, next, "dedup"]) => {
            Ok(Outcome::Applied { start: number(start)?, next: number(next)?, noop: true })
        }
        ("E", [code]) => Ok(Outcome::Failed(code.to_string())),
        _ => Err("malformed reply".to_string()),
    }
}

impl Model {
    pub fn new(seed: u64) -> Model {
        Model { seed, tracks: BTreeMap::new() }
    }

    /// Streams known so far.
    pub fn streams(&self) -> usize {
        self.tracks.len()
    }

    /// The resend file of the next cycle.
    pub fn resends(&self) -> Vec<Resend> {
        self.tracks
            .values()
            .filter_map(|t| t.resend.as_ref())
            .map(|plan| {
                let p = plan.op.producer().expect("only producer ops are resent");
                Resend { key: plan.op.key, opno: plan.op.opno, producer_id: p.id.clone(), seq: p.seq }
            })
            .collect()
    }

    /// Follows the transcript of a child of `cycle` that was then killed.
    /// Checks that the child kept the protocol and that every reply is the
    /// one the script predicts; leaves the op each stream had in flight at
    /// the kill pending for [`Model::verify`].
    pub fn apply_transcript(&mut self, cycle: u32, lines: &[String]) -> Result<TranscriptReport, String> {
        let mut report = TranscriptReport::default();
        for (n, line) in lines.iter().enumerate() {
            report.lines += 1;
            let words: Vec<&str> = line.split(' ').collect();
            let at = |e: String| format!("transcript line {} `{line}`: {e}", n + 1);
            match words[..] {
                ["O"] if n == 0 => {}
                ["D"] => report.done = true,
                ["S", key, opno] => {
                    let key: StreamKey = key.parse().map_err(at)?;
                    let opno = opno.parse().map_err(|_| at("bad op number".to_string()))?;
                    self.on_send(cycle, key, opno).map_err(at)?;
                    report.sent += 1;
                }
                [kind @ ("A" | "E"), key, opno, ref rest @ ..] => {
                    let key: StreamKey = key.parse().map_err(at)?;
                    let opno = opno.parse().map_err(|_| at("bad op number".to_string()))?;
                    let got = parse_reply(kind, rest).map_err(at)?;
                    self.on_reply(key, opno, &got, &mut report).map_err(at)?;
                    report.acked += 1;
                    report.expected_errors += u64::from(kind == "E");
                }
                _ => return Err(at("not a transcript line".to_string())),
            }
        }
        // The child was killed here: whatever is still outstanding may or
        // may not have reached the engine.
        for track in self.tracks.values_mut() {
            let Some(sent) = track.outstanding.take() else { continue };
            report.in_flight_at_kill += 1;
            match sent.resend_of_landed {
                Some(true) => track.resend = Some(Planned { op: sent.op, after: sent.after, landed: true }),
                _ => track.pending = Some((sent.op, sent.after)),
            }
        }
        Ok(report)
    }

    fn on_send(&mut self, cycle: u32, key: StreamKey, opno: u64) -> Result<(), String> {
        let seed = self.seed;
        let track = match self.tracks.entry(key) {
            std::collections::btree_map::Entry::Occupied(o) => o.into_mut(),
            std::collections::btree_map::Entry::Vacant(v) => {
                if key.cycle != cycle || opno != 0 {
                    return Err(format!("first op of {key} in cycle {cycle} is op {opno}"));
                }
                v.insert(Track {
                    committed: Script::new(seed, key),
                    active_cycle: cycle,
                    outstanding: None,
                    pending: None,
                    resend: None,
                    seen_unacked: BTreeSet::new(),
                })
            }
        };
        if track.active_cycle != cycle {
            return Err(format!(
                "{key} is not driven in cycle {cycle} (last driven in cycle {})",
                track.active_cycle
            ));
        }
        if let Some(sent) = &track.outstanding {
            return Err(format!("op {opno} sent while op {} still waits for its reply", sent.op.opno));
        }
        if let Some(plan) = track.resend.take() {
            if plan.op.opno != opno {
                return Err(format!("expected the resend of op {} first, got op {opno}", plan.op.opno));
            }
            track.outstanding =
                Some(Sent { op: plan.op, after: plan.after, resend_of_landed: Some(plan.landed) });
            return Ok(());
        }
        if track.pending.is_some() {
            return Err(format!("{key} still has an op of unknown fate"));
        }
        if opno != track.committed.generated() {
            return Err(format!(
                "op {opno} sent out of order: the next op is {}",
                track.committed.generated()
            ));
        }
        let mut after = track.committed.clone();
        let op = after.next_op().ok_or_else(|| format!("op {opno} is beyond the end of the script"))?;
        track.outstanding = Some(Sent { op, after, resend_of_landed: None });
        Ok(())
    }

    fn on_reply(
        &mut self,
        key: StreamKey,
        opno: u64,
        got: &Outcome,
        report: &mut TranscriptReport,
    ) -> Result<(), String> {
        let track =
            self.tracks.get_mut(&key).ok_or_else(|| format!("reply for {key}, which nothing was sent to"))?;
        let sent = track
            .outstanding
            .take()
            .ok_or_else(|| format!("reply for op {opno} of {key}, which is not waiting"))?;
        if sent.op.opno != opno {
            return Err(format!("reply for op {opno} while op {} waits", sent.op.opno));
        }
        let what = format!("{key} op {opno} ({})", sent.op.describe());
        match (&sent.op.expect, got, sent.resend_of_landed) {
            (
                Expect::Applied { start, next, .. },
                Outcome::Applied { start: s, next: n, noop },
                Some(landed),
            ) => {
                if (s, n) != (start, next) {
                    return Err(format!(
                        "{what}: the resend came back at [{s}, {n}), the op belongs at [{start}, {next})"
                    ));
                }
                match (landed, noop) {
                    (true, false) => {
                        return Err(format!(
                        "{what}: the resend was applied a second time; the op had landed before the crash \
                             and must come back deduplicated"
                    ))
                    }
                    (false, true) => {
                        return Err(format!(
                        "{what}: the resend came back deduplicated, but the op was not in the stream after \
                             the crash"
                    ))
                    }
                    (true, true) => report.resends_deduplicated += 1,
                    (false, false) => report.resends_applied += 1,
                }
            }
            (expect, got, _) => {
                let ok = match (expect, got) {
                    (
                        Expect::Applied { start, next, noop },
                        Outcome::Applied { start: s, next: n, noop: d },
                    ) => (start, next, noop) == (s, n, d),
                    (Expect::Fails(codes), Outcome::Failed(code)) => codes.iter().any(|c| c.as_str() == code),
                    _ => false,
                };
                if !ok {
                    return Err(format!("{what}: the child got {got}, the script expects {expect}"));
                }
            }
        }
        if sent.resend_of_landed != Some(true) {
            track.committed = sent.after;
        }
        Ok(())
    }

    /// Reads every known stream from `engine` (opened on the data directory
    /// after the kill of the child of `cycle`) and checks it with
    /// [`Model::check_stream`].
    pub async fn verify(&mut self, engine: &Engine, cycle: u32) -> VerifyReport {
        let mut report = VerifyReport::default();
        let keys: Vec<StreamKey> = self.tracks.keys().copied().collect();
        for key in keys {
            let result = match observe(engine, key).await {
                Ok(observed) => self.check_stream(cycle, key, &observed, &mut report),
                Err(e) => Err(format!("{key}: {e}")),
            };
            if let Err(e) = result {
                report.failures.push(e);
            }
        }
        report
    }

    /// Checks one stream after the kill of the child of `cycle`: it must be
    /// the committed state, or (with an op in flight) that state plus the
    /// op. Resolves the in-flight op by what was seen and plans its resend
    /// when it is a producer op; other streams are left as they are and
    /// checked again after every later cycle.
    pub fn check_stream(
        &mut self,
        cycle: u32,
        key: StreamKey,
        observed: &Observed,
        report: &mut VerifyReport,
    ) -> Result<(), String> {
        let track = self.tracks.get_mut(&key).ok_or_else(|| format!("{key}: not in the model"))?;
        let without = compare(track.committed.state(), observed);
        let landed = match (&track.pending, without) {
            (None, Ok(())) => None,
            (None, Err(e)) => {
                return Err(format!("{key}: {e} ({})", ack_summary(track)));
            }
            (Some((op, after)), without) => match (without, compare(after.state(), observed)) {
                (Ok(()), _) => Some(false),
                (Err(_), Ok(())) => Some(true),
                (Err(a), Err(b)) => {
                    let ack = ack_summary(track);
                    let op = op.describe();
                    return Err(if a == b {
                        format!("{key}: {a}, whether or not the op in flight ({op}) landed ({ack})")
                    } else {
                        format!("{key}: without the op in flight ({op}): {a}; with it: {b} ({ack})")
                    });
                }
            },
        };
        report.streams += 1;
        report.bytes += observed.bytes();
        if let (Some(landed), Some((op, after))) = (landed, track.pending.take()) {
            if landed {
                report.in_flight_landed += 1;
                track.committed = after.clone();
                track.seen_unacked.insert(op.opno);
            } else {
                report.in_flight_absent += 1;
            }
            if op.producer().is_some() {
                track.resend = Some(Planned { op, after, landed });
            }
        }
        if track.resend.is_some() {
            track.active_cycle = cycle + 1;
        }
        Ok(())
    }
}

/// Which ops a stream's committed state rests on, for failure messages.
fn ack_summary(track: &Track) -> String {
    let n = track.committed.generated();
    if n == 0 {
        return "no op of the stream is committed".to_string();
    }
    if track.seen_unacked.is_empty() {
        format!("ops 0..={} were acknowledged", n - 1)
    } else {
        format!(
            "ops 0..={} were acknowledged, or seen after an earlier crash: {:?}",
            n - 1,
            track.seen_unacked
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use parking_lot::Mutex;

    const SEED: u64 = 0x5EED_CAFE;

    /// A script of cycle 0 whose first `acked` ops keep one incarnation
    /// with at least three records and whose next op is a producer append
    /// (so it can be left in flight and resent).
    fn suitable_script(acked: u64) -> (StreamKey, Vec<Op>) {
        for index in 0..10_000 {
            let key = StreamKey { cycle: 0, index };
            let mut script = Script::new(SEED, key);
            let ops: Vec<Op> = (0..=acked).map_while(|_| script.next_op()).collect();
            let one_incarnation = ops.iter().skip(1).all(|op| {
                !matches!(op.kind, OpKind::Delete | OpKind::Close | OpKind::Append { close_after: true, .. })
            });
            let last_is_producer_append = matches!(&ops.last().unwrap().kind, OpKind::Append { len, producer: Some(_), .. } if *len > 0);
            let mut before = Script::new(SEED, key);
            before.skip_to(acked);
            let records = before.state().live.as_ref().map_or(0, |l| l.records.len());
            if ops.len() as u64 == acked + 1 && one_incarnation && last_is_producer_append && records >= 3 {
                return (key, ops);
            }
        }
        panic!("no suitable script");
    }

    fn transcript(ops: &[Op], acked: usize) -> Vec<String> {
        let mut lines = vec!["O".to_string()];
        for op in &ops[..acked] {
            lines.push(format!("S {} {}", op.key, op.opno));
            let Expect::Applied { start, next, noop } = op.expect else { panic!("an error op") };
            lines.push(Outcome::Applied { start, next, noop }.line(op.key, op.opno));
        }
        let last = &ops[acked];
        lines.push(format!("S {} {}", last.key, last.opno));
        lines
    }

    /// What an engine would report for a stream made of `records` (each
    /// landed once, in this order), whatever the model says.
    fn engine_with(live: &Live, payloads: &[Bytes]) -> Observed {
        let mut present = match Observed::of_state(&StreamState { live: Some(live.clone()), incarnations: 1 })
        {
            Observed::Present(p) => p,
            Observed::Absent => unreachable!(),
        };
        present.content.clear();
        present.live = SetSum::default();
        for p in payloads {
            present.live.add_record(present.content.len() as u64, p);
            present.content.extend_from_slice(p);
        }
        present.tail_offset = present.content.len() as u64;
        present.append_count = payloads.len() as u64;
        Observed::Present(present)
    }

    fn check(model: &Model, key: StreamKey, observed: &Observed) -> Result<(Model, VerifyReport), String> {
        let mut model = model.clone();
        let mut report = VerifyReport::default();
        model.check_stream(0, key, observed, &mut report).map(|()| (model, report))
    }

    // The verifier accepts the committed state and the committed state plus
    // the op in flight, and rejects a hole, a duplicate and a lost ack.
    #[test]
    fn verifier_accepts_prefixes_and_rejects_holes_duplicates_and_lost_acks() {
        let acked = 6;
        let (key, ops) = suitable_script(acked as u64);
        let mut model = Model::new(SEED);
        let report = model.apply_transcript(0, &transcript(&ops, acked)).unwrap();
        assert_eq!((report.sent, report.acked, report.in_flight_at_kill), (7, 6, 1));

        let mut script = Script::new(SEED, key);
        script.skip_to(acked as u64);
        let without = script.state().clone();
        script.next_op();
        let with = script.state().clone();
        let live = without.live.clone().unwrap();
        let payloads: Vec<Bytes> = live.records.iter().map(|r| r.payload.clone()).collect();
        let in_flight = with.live.as_ref().unwrap().records.last().unwrap().payload.clone();
        // The model-derived states and an engine built from the payloads agree.
        assert_eq!(engine_with(&live, &payloads), Observed::of_state(&without));

        // Correct: without the in-flight op (it did not land) ...
        let (after, r) = check(&model, key, &Observed::of_state(&without)).unwrap();
        assert_eq!((r.in_flight_absent, r.in_flight_landed), (1, 0));
        let resend = after.resends();
        assert_eq!(resend.len(), 1);
        assert_eq!(resend[0].opno, acked as u64);
        // ... and with it (it landed).
        let (landed, r) = check(&model, key, &Observed::of_state(&with)).unwrap();
        assert_eq!((r.in_flight_absent, r.in_flight_landed), (0, 1));

        // A hole: an acknowledged record in the middle is gone.
        let mut hole = payloads.clone();
        hole.remove(1);
        let err = check(&model, key, &engine_with(&live, &hole)).unwrap_err();
        assert!(err.contains("holds other bytes"), "{err}");
        // A duplicate: a record applied twice.
        let mut dup = payloads.clone();
        dup.insert(2, payloads[1].clone());
        let err = check(&model, key, &engine_with(&live, &dup)).unwrap_err();
        assert!(err.contains("start like op"), "{err}");
        // A duplicate of the in-flight op.
        let mut twice = payloads.clone();
        twice.push(in_flight.clone());
        twice.push(in_flight.clone());
        check(&model, key, &engine_with(&live, &twice)).unwrap_err();
        // A lost ack: the last acknowledged record is gone.
        let lost = &payloads[..payloads.len() - 1];
        let err = check(&model, key, &engine_with(&live, lost)).unwrap_err();
        assert!(err.contains("is missing"), "{err}");
        // The whole stream lost.
        let err = check(&model, key, &Observed::Absent).unwrap_err();
        assert!(err.contains("not found"), "{err}");
        // Bytes that were never sent after the last acknowledged record.
        let mut extra = payloads.clone();
        extra.push(Bytes::from_static(b"never sent by anybody"));
        check(&model, key, &engine_with(&live, &extra)).unwrap_err();

        // The resend of a landed producer op must come back deduplicated
        // with its original offsets; applied again it is a failure.
        let Expect::Applied { start, next, .. } = ops[acked].expect else { panic!() };
        let resend_lines = |flag: &str| {
            vec!["O".to_string(), format!("S {key} {acked}"), format!("A {key} {acked} {start} {next}{flag}")]
        };
        landed.clone().apply_transcript(1, &resend_lines(" dedup")).unwrap();
        let err = landed.clone().apply_transcript(1, &resend_lines("")).unwrap_err();
        assert!(err.contains("applied a second time"), "{err}");
        // The resend of an op that had not landed is applied fresh.
        after.clone().apply_transcript(1, &resend_lines("")).unwrap();
        let err = after.clone().apply_transcript(1, &resend_lines(" dedup")).unwrap_err();
        assert!(err.contains("not in the stream"), "{err}");
        // A reply at other offsets than the script's is refused.
        let mut wrong = transcript(&ops, acked);
        wrong[4] = format!("A {key} 1 {} {}", 7, 9);
        Model::new(SEED).apply_transcript(0, &wrong).unwrap_err();
    }

    #[test]
    fn scripts_are_deterministic_and_well_formed() {
        for index in 0..64 {
            let key = StreamKey { cycle: 3, index };
            let mut a = Script::new(SEED, key);
            let mut b = Script::new(SEED, key);
            let mut n = 0;
            while let Some(op) = a.next_op() {
                assert_eq!(Some(&op), b.next_op().as_ref());
                if let OpKind::Append { len: 0, close_after, .. } = op.kind {
                    assert!(close_after, "{op:?}");
                }
                n += 1;
            }
            assert!((SCRIPT_OPS.0..=SCRIPT_OPS.1).contains(&n));
        }
        assert_eq!("c12s7".parse::<StreamKey>().unwrap(), StreamKey { cycle: 12, index: 7 });
        let r = Resend { key: StreamKey { cycle: 1, index: 2 }, opno: 5, producer_id: "w2".into(), seq: 3 };
        assert_eq!(Resend::parse_file(&Resend::file(&[r.clone(), r.clone()])).unwrap(), vec![r.clone(), r]);
    }

    /// A sink that stops recording after `limit` lines, as if the process
    /// died there; an `S` line that is the last one recorded is not sent.
    #[derive(Debug)]
    struct CutSink {
        lines: Mutex<(Vec<String>, bool)>,
        limit: usize,
    }

    impl Sink for CutSink {
        fn emit(&self, line: &str) -> bool {
            let mut state = self.lines.lock();
            if state.1 {
                return false;
            }
            state.0.push(line.to_string());
            state.1 = state.0.len() >= self.limit;
            true
        }
        fn alive(&self) -> bool {
            !self.lines.lock().1
        }
    }

    // The whole harness against the real engine, without a crash: the
    // transcript is cut at a random line, as a kill would cut it (ops in
    // flight complete but go unrecorded, so they land unacknowledged), and
    // the verifier must accept the live engine's state; the next cycle's
    // resends must be deduplicated or applied fresh as the model says.
    #[test]
    fn cut_transcripts_verify_against_a_live_engine() {
        let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
        let e = crate::open(CORES, GROUPS);
        let mut model = Model::new(SEED);
        let mut rng = Rng::new(SEED);
        let (mut dedup, mut fresh, mut landed) = (0, 0, 0);
        for cycle in 0..6 {
            let sink = Arc::new(CutSink {
                lines: Mutex::new((Vec::new(), false)),
                limit: rng.range(300, 4000) as usize,
            });
            let resends = model.resends();
            rt.block_on(run_workload(e.engine.clone(), SEED, cycle, resends, sink.clone())).unwrap();
            let lines = std::mem::take(&mut sink.lines.lock().0);
            let t = model.apply_transcript(cycle, &lines).unwrap();
            let v = rt.block_on(model.verify(&e.engine, cycle));
            assert!(v.failures.is_empty(), "cycle {cycle}: {:#?}", v.failures);
            dedup += t.resends_deduplicated;
            fresh += t.resends_applied;
            landed += v.in_flight_landed;
        }
        assert!(landed > 0 && dedup > 0, "landed {landed}, resends deduplicated {dedup}, applied {fresh}");
    }
}
