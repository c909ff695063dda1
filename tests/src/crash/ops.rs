//! Streams and operations: the key naming a stream of the workload, the
//! payload of every op (a pure function of the seed, the key and the op
//! number), what an op does, what the engine must answer, and how a reply
//! is reduced to a transcript line. Invariant: an op's bytes and expected
//! reply can always be regenerated from `(seed, stream, op number)`.

use std::fmt;
use std::str::FromStr;

use bytes::Bytes;
use rill::{
    Append, AppendBatch, Create, Engine, ErrorClass, ErrorCode, ProducerArgs, StreamId, DEFAULT_CONTENT_TYPE,
};

use super::rng::{mix, Rng};
use super::{BUCKETS, TAG_PAYLOAD};

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
    /// Several payloads as a batch (one result per item) or, with
    /// `one_append`, as one multi-record append (one reply, one append).
    Batch {
        lens: Vec<u64>,
        producer: Option<ProducerArgs>,
        one_append: bool,
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
            OpKind::Batch { lens, producer: p, one_append } => format!(
                "{} of {lens:?} bytes{}",
                if *one_append { "multi-record append" } else { "batch" },
                producer(p)
            ),
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
            OpKind::Batch { lens, producer, one_append: true } => {
                let records = lens.iter().enumerate().map(|(i, len)| bytes(i, *len)).collect();
                let mut req = Append::records(id, records);
                if let Some(p) = producer {
                    req = req.producer(p.id.clone(), p.epoch, p.seq);
                }
                engine.append(req).await.map(|r| Outcome::Applied {
                    start: r.start_offset,
                    next: r.next_offset,
                    noop: r.deduplicated,
                })
            }
            OpKind::Batch { lens, producer, one_append: false } => {
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
        result.unwrap_or_else(|e| Outcome::of_error(&e))
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
            Err(e) => return Outcome::of_error(e),
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
    Applied {
        start: u64,
        next: u64,
        noop: bool,
    },
    Failed(String),
    /// A persistent-class error (the engine is unhealthy: I/O, corruption):
    /// the op may or may not have landed, and the stream's writer stops.
    Unknown(String),
}

impl Outcome {
    /// An engine error as the transcript records it.
    pub fn of_error(e: &rill::Error) -> Outcome {
        let code = e.code().as_str().to_string();
        if e.class() == ErrorClass::Persistent {
            Outcome::Unknown(code)
        } else {
            Outcome::Failed(code)
        }
    }

    /// The `A` or `E` line of op `opno` of `key`.
    pub fn line(&self, key: StreamKey, opno: u64) -> String {
        match self {
            Outcome::Applied { start, next, noop } => {
                format!("A {key} {opno} {start} {next}{}", if *noop { " dedup" } else { "" })
            }
            Outcome::Failed(code) => format!("E {key} {opno} {code}"),
            Outcome::Unknown(code) => format!("F {key} {opno} {code}"),
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
            Outcome::Unknown(code) => write!(f, "persistent error {code} (outcome unknown)"),
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
