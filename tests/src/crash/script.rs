//! The expected state of a stream and the scripts that generate its ops.
//! A script is derived from the seed and the stream's key alone and keeps
//! the state its ops lead to, assuming each is applied exactly once; the
//! child and the parent run the same script, so they agree on every op
//! and on every expected reply.

use bytes::Bytes;
use rill::{ProducerArgs, SetSum, DEFAULT_CONTENT_TYPE};

use super::ops::{payload, Expect, Op, OpKind, StreamKey};
use super::rng::{mix, Rng};
use super::{CLOSED, JSON, MAX_PAYLOAD, NOT_FOUND, SCRIPT_OPS, TAG_SCRIPT, TEXT};

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
                    OpKind::Batch { lens, producer: None, one_append: self.rng.percent(50) }
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
                        OpKind::Batch { lens, producer, one_append: self.rng.percent(50) }
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
            OpKind::Batch { lens, producer, one_append } => {
                if live.closed {
                    return Expect::Fails(CLOSED);
                }
                for (item, len) in lens.iter().enumerate() {
                    live.land(opno, item, payload(seed, key, opno, item, *len));
                }
                if *one_append {
                    // One append of several records counts once.
                    live.append_count -= lens.len() as u64 - 1;
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
