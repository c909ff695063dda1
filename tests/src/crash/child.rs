//! The child's side: writer tasks driving scripts against the engine and
//! framing every op with transcript lines. Invariants: a writer sends an
//! op only after the `S` line for it was recorded and the previous op's
//! reply came back, so at most one op per stream is in flight; a resend is
//! the exact producer op the parent asked for.

use std::sync::atomic::{AtomicU64, Ordering::SeqCst};
use std::sync::Arc;

use rill::{Engine, ErrorClass};

use super::ops::{Op, Outcome, StreamKey};
use super::script::Script;
use super::{OP_BUDGET, WRITERS};

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
    run_workload_with(engine, seed, cycle, resends, sink, Extras::default()).await
}

/// What a cycle runs besides the stream scripts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extras {
    /// Bucket purges with markers ([`super::purge::purge_loop`]).
    pub purges: bool,
    /// Checkpoints, compaction and GC on demand, over and over.
    pub maintenance: bool,
    /// The lease writer ([`super::lease::lease_loop`]).
    pub leases: bool,
    /// The queue producer and workers ([`super::queue::queue_loop`]).
    pub queues: bool,
}

/// [`run_workload`] plus `extras`, which run until the process is killed
/// (they are not waited for).
pub async fn run_workload_with(
    engine: Engine,
    seed: u64,
    cycle: u32,
    resends: Vec<Resend>,
    sink: Arc<dyn Sink>,
    extras: Extras,
) -> Result<(), String> {
    if extras.purges {
        tokio::spawn(super::purge::purge_loop(engine.clone(), seed, cycle, sink.clone()));
    }
    if extras.leases {
        tokio::spawn(super::lease::lease_loop(engine.clone(), seed, cycle, sink.clone()));
    }
    if extras.queues {
        tokio::spawn(super::queue::queue_loop(engine.clone(), seed, cycle, sink.clone()));
    }
    if extras.maintenance {
        tokio::spawn(super::purge::maintenance_loop(engine.clone(), seed, cycle));
    }
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

/// What a writer does after one op.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Next {
    /// Go on with the stream's script.
    Continue,
    /// Leave this stream (its last op has an unknown fate) and take the
    /// next one.
    Abandon,
    /// Stop: the sink refused a line or the budget is spent.
    Stop,
}

impl Writer {
    /// Sends `first` (a resend), then the rest of the script. True when the
    /// writer may take another stream (the script ran to its end, or the
    /// stream was abandoned after a persistent error).
    async fn drive(&self, mut script: Script, first: Option<Op>) -> bool {
        let mut op = first.or_else(|| script.next_op());
        while let Some(current) = op {
            match self.step(&current).await {
                Next::Continue => op = script.next_op(),
                Next::Abandon => return true,
                Next::Stop => return false,
            }
        }
        true
    }

    async fn step(&self, op: &Op) -> Next {
        let spent = self.budget.fetch_update(SeqCst, SeqCst, |left| left.checked_sub(1)).is_err();
        if spent || !self.sink.emit(&format!("S {} {}", op.key, op.opno)) || !self.sink.alive() {
            return Next::Stop;
        }
        let outcome = op.execute(&self.engine, self.seed).await;
        if !self.sink.emit(&outcome.line(op.key, op.opno)) {
            return Next::Stop;
        }
        if let Outcome::Unknown(_) = outcome {
            // The engine is unhealthy: the stream's core must now refuse
            // everything (the poisoned core). Probe it once with a head and
            // leave the stream: the op's fate is unknown until the parent
            // looks after the restart.
            let probe = match self.engine.head(op.key.id()).await {
                Err(e) if e.class() == ErrorClass::Persistent => "poisoned".to_string(),
                Err(e) => format!("answered:{}", e.code().as_str()),
                Ok(_) => "answered:ok".to_string(),
            };
            if !self.sink.emit(&format!("G {} {probe}", op.key)) {
                return Next::Stop;
            }
            return Next::Abandon;
        }
        Next::Continue
    }
}
