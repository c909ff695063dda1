//! The crash workload's queue workers: one stream used as a work queue by
//! two queue consumer groups, driven in every cycle and drained by the
//! parent after every kill.
//!
//! Each child appends messages `q<cycle>-<n>` to `queues/work` (printing
//! `P <tag>` before the send and `Q <tag> <offset>` once acknowledged);
//! two workers of group `workers` compete for them and one worker of group
//! `audit` sees every one of them too (fan-out). A worker receives up to
//! four messages under a 300 ms visibility, prints `R <group> <offset>
//! <receipt>` for each, and then acks most of them (printing `Y <group>
//! <offset> <receipt>` once the ack is acknowledged, and `X` with the same
//! words before it is sent), nacks some with no
//! delay and leaves a few alone, so they come back when the visibility
//! passes. Both groups allow [`MAX_ATTEMPTS`] deliveries, more than any
//! message gets, so nothing is dead-lettered.
//!
//! After each kill the parent ([`QueueLog::drain`]) reopens the engine and
//! receives and acks everything either group still holds, waiting for the
//! dead child's in-flight messages to become visible again, until both
//! backlogs are empty. Invariants checked (SPEC §2 "Queues"): receipts of a
//! group only grow, so a delivery of an offset under a receipt above the
//! one its acknowledged ack used is a redelivery after a durable ack
//! (refused); no offset is acked twice in one group; every delivery holds
//! a payload a child sent, at the offset its append was acknowledged with;
//! after the drain every acknowledged append has been acked exactly once
//! in each group, and nothing is ready, in flight or dead (none lost, none
//! stuck).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rill::{Append, Create, Engine, QueuePolicy, Receive, StreamId};

use super::child::Sink;
use super::rng::{mix, Rng};

const TAG_QUEUE: u64 = 6;

/// The queue groups and how many workers each runs in a child.
pub const QUEUE_GROUPS: [(&str, usize); 2] = [("workers", 2), ("audit", 1)];

/// Deliveries a message may get before it is dead-lettered: far more than
/// any message of the test is delivered.
pub const MAX_ATTEMPTS: u32 = 1000;

/// The workers' visibility timeout.
const VISIBILITY: Duration = Duration::from_millis(300);

/// How long the parent's drain waits for a dead child's messages.
const DRAIN_LIMIT: Duration = Duration::from_secs(20);

/// The stream of the queue workers.
pub fn queue_stream() -> StreamId {
    StreamId::new("queues", "work").expect("a valid stream name")
}

/// Creates the stream, sets both groups' policies, then runs the producer
/// and the workers until the sink refuses a line (the process is being
/// killed). Engine errors are retried after a pause, never fatal.
pub async fn queue_loop(engine: Engine, seed: u64, cycle: u32, sink: Arc<dyn Sink>) {
    let id = queue_stream();
    loop {
        let _ = engine.create(Create::new(id.clone())).await;
        let mut set = true;
        for (group, _) in QUEUE_GROUPS {
            let policy = QueuePolicy::new().max_attempts(MAX_ATTEMPTS);
            set &= engine.set_queue_policy(&id, group, policy).await.is_ok();
        }
        if set {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let mut tasks = vec![tokio::spawn(produce(engine.clone(), cycle, sink.clone()))];
    for (g, (group, workers)) in QUEUE_GROUPS.into_iter().enumerate() {
        for w in 0..workers {
            let rng = Rng::new(mix(&[seed, TAG_QUEUE, cycle.into(), g as u64, w as u64]));
            tasks.push(tokio::spawn(work(engine.clone(), group, rng, sink.clone())));
        }
    }
    for task in tasks {
        let _ = task.await;
    }
}

async fn produce(engine: Engine, cycle: u32, sink: Arc<dyn Sink>) {
    let id = queue_stream();
    let mut rng = Rng::new(mix(&[u64::from(cycle), TAG_QUEUE]));
    for n in 0.. {
        let tag = format!("q{cycle}-{n}");
        if !sink.emit(&format!("P {tag}")) {
            return;
        }
        match engine.append(Append::new(id.clone(), tag.clone())).await {
            Ok(put) => {
                if !sink.emit(&format!("Q {tag} {}", put.start_offset)) {
                    return;
                }
            }
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
        tokio::time::sleep(Duration::from_millis(rng.range(1, 6))).await;
    }
}

async fn work(engine: Engine, group: &'static str, mut rng: Rng, sink: Arc<dyn Sink>) {
    let id = queue_stream();
    loop {
        let got = engine.receive(Receive::new(&id, group).max_messages(4).visibility(VISIBILITY)).await;
        let Ok(got) = got else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        if got.is_empty() {
            tokio::time::sleep(Duration::from_millis(rng.range(2, 10))).await;
            continue;
        }
        for d in &got {
            if !sink.emit(&format!("R {group} {} {}", d.offset, d.receipt)) {
                return;
            }
        }
        for d in got {
            match rng.range(0, 10) {
                0 => {} // left alone: it comes back after the visibility
                1 => {
                    let _ = engine.nack(&id, group, d.receipt, Duration::ZERO).await;
                }
                _ => {
                    if !sink.emit(&format!("X {group} {} {}", d.offset, d.receipt)) {
                        return;
                    }
                    if engine.ack(&id, group, d.receipt).await.is_ok()
                        && !sink.emit(&format!("Y {group} {} {}", d.offset, d.receipt))
                    {
                        return;
                    }
                }
            }
        }
    }
}

/// What the parent knows of the queue workers, over every cycle.
#[derive(Clone, Debug, Default)]
pub struct QueueLog {
    /// Every payload a child sent.
    sent: BTreeSet<String>,
    /// Acknowledged appends: offset → payload.
    appended: BTreeMap<u64, String>,
    /// Per group: acked offset → the receipt its acknowledged ack used.
    acked: BTreeMap<String, BTreeMap<u64, u64>>,
    /// Per group: the highest receipt a child was handed for each offset.
    delivered: BTreeMap<String, BTreeMap<u64, u64>>,
    /// Per group: offset → the receipt of the last ack a child sent for it
    /// (it may have landed although no reply was seen).
    ack_sent: BTreeMap<String, BTreeMap<u64, u64>>,
    /// Totals over every cycle.
    pub deliveries: u64,
    pub acks: u64,
    pub drained: u64,
    /// Acks in flight at a kill that turned out to have landed.
    pub acks_landed_unseen: u64,
}

impl QueueLog {
    /// Applies one transcript line if it is a queue line: `None` when it is
    /// not one, else whether it keeps the invariants.
    pub fn apply(&mut self, words: &[&str]) -> Option<Result<(), String>> {
        match *words {
            ["P" | "Q" | "R" | "X" | "Y", ..] => Some(self.apply_line(words)),
            _ => None,
        }
    }

    fn apply_line(&mut self, words: &[&str]) -> Result<(), String> {
        let number = |w: &str| w.parse::<u64>().map_err(|_| format!("`{w}` is not a number"));
        match *words {
            ["P", tag] => {
                self.sent.insert(tag.to_string());
                Ok(())
            }
            ["Q", tag, offset] => {
                if !self.sent.contains(tag) {
                    return Err(format!("append of {tag} acknowledged before it was sent"));
                }
                let offset = number(offset)?;
                if let Some(other) = self.appended.insert(offset, tag.to_string()) {
                    return Err(format!("{tag} and {other} were both acknowledged at offset {offset}"));
                }
                Ok(())
            }
            ["R", group, offset, receipt] => {
                self.deliveries += 1;
                self.delivered_to(group, number(offset)?, number(receipt)?)
            }
            ["X", group, offset, receipt] => {
                let (offset, receipt) = (number(offset)?, number(receipt)?);
                self.ack_sent.entry(group.to_string()).or_default().insert(offset, receipt);
                Ok(())
            }
            ["Y", group, offset, receipt] => {
                self.acks += 1;
                self.acked_in(group, number(offset)?, number(receipt)?)
            }
            _ => Err("malformed queue line".to_string()),
        }
    }

    fn delivered_to(&mut self, group: &str, offset: u64, receipt: u64) -> Result<(), String> {
        if let Some(&acked) = self.acked.get(group).and_then(|a| a.get(&offset)) {
            if receipt > acked {
                return Err(format!(
                    "group {group}: offset {offset} delivered under receipt {receipt} after its ack under \
                     receipt {acked} was acknowledged"
                ));
            }
        }
        let seen = self.delivered.entry(group.to_string()).or_default().entry(offset).or_insert(0);
        *seen = (*seen).max(receipt);
        Ok(())
    }

    fn acked_in(&mut self, group: &str, offset: u64, receipt: u64) -> Result<(), String> {
        let later = self.delivered.get(group).and_then(|d| d.get(&offset)).is_some_and(|&r| r > receipt);
        if later {
            return Err(format!(
                "group {group}: the ack of offset {offset} under receipt {receipt} succeeded, but a later \
                 receipt was handed out for it first"
            ));
        }
        if let Some(before) = self.acked.entry(group.to_string()).or_default().insert(offset, receipt) {
            return Err(format!(
                "group {group}: offset {offset} acked twice (receipts {before} and {receipt})"
            ));
        }
        Ok(())
    }

    /// After a kill: receives and acks whatever each group still holds
    /// until both backlogs are empty, then checks that every acknowledged
    /// append was acked exactly once per group.
    pub async fn drain(&mut self, engine: &Engine) -> Result<(), String> {
        if self.sent.is_empty() {
            return Ok(()); // the workers never started
        }
        let id = queue_stream();
        for (group, _) in QUEUE_GROUPS {
            let started = Instant::now();
            loop {
                let req = Receive::new(&id, group).max_messages(256).visibility(Duration::from_secs(600));
                let got =
                    engine.receive(req).await.map_err(|e| format!("queue drain: {group}: receive: {e}"))?;
                for d in &got {
                    let payload = String::from_utf8_lossy(&d.payload);
                    match self.appended.get(&d.offset) {
                        Some(tag) if *tag != payload => {
                            return Err(format!(
                                "group {group}: offset {} holds `{payload}`, acknowledged as `{tag}`",
                                d.offset
                            ))
                        }
                        None if !self.sent.contains(payload.as_ref()) => {
                            return Err(format!(
                                "group {group}: offset {} holds `{payload}`, never sent",
                                d.offset
                            ))
                        }
                        _ => {}
                    }
                    self.delivered_to(group, d.offset, d.receipt)?;
                    engine
                        .ack(&id, group, d.receipt)
                        .await
                        .map_err(|e| format!("queue drain: {group}: ack of offset {}: {e}", d.offset))?;
                    self.acked_in(group, d.offset, d.receipt)?;
                    self.drained += 1;
                }
                if !got.is_empty() {
                    continue;
                }
                let b = engine.backlog(&id, group).await.map_err(|e| format!("queue drain: {group}: {e}"))?;
                if b.dead != 0 {
                    return Err(format!("group {group}: {} messages dead-lettered", b.dead));
                }
                if b.ready == 0 && b.in_flight == 0 {
                    break;
                }
                if started.elapsed() > DRAIN_LIMIT {
                    return Err(format!(
                        "group {group}: {} ready and {} in flight are stuck after {DRAIN_LIMIT:?}",
                        b.ready, b.in_flight
                    ));
                }
                // The verifier runs under a plain `block_on`, without tokio.
                std::thread::sleep(Duration::from_millis(20));
            }
            // An ack sent under the latest receipt the children were handed,
            // with no reply before the kill, may have landed: then the message
            // does not come back, and counts as acked under that receipt.
            for (&offset, &receipt) in self.ack_sent.get(group).into_iter().flatten() {
                let latest = self.delivered.get(group).and_then(|d| d.get(&offset)) == Some(&receipt);
                let acked = self.acked.entry(group.to_string()).or_default();
                if latest && !acked.contains_key(&offset) {
                    acked.insert(offset, receipt);
                    self.acks_landed_unseen += 1;
                }
            }
            let acked = self.acked.get(group);
            if let Some(lost) = self.appended.keys().find(|o| !acked.is_some_and(|a| a.contains_key(o))) {
                let handed = self.delivered.get(group).and_then(|d| d.get(lost));
                return Err(format!(
                    "group {group}: the acknowledged append at offset {lost} ({:?}) was never acked; the \
                     highest receipt handed out for it: {handed:?}",
                    self.appended[lost]
                ));
            }
            self.ack_sent.remove(group);
        }
        Ok(())
    }
}
