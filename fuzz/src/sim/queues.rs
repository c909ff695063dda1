//! Queue group commands in the simulation (SPEC §2 "Queues"): a receive is
//! prepared against the real group's state the way the runtime prepares
//! it (the records from the group's high-water mark found hot or in the
//! simulated packs, `runtime/queues.rs`), then applied, judged by the
//! model and logged like every other command; acks and nacks present a
//! receipt the model has in flight (or a stale one); a look compares the
//! backlog and the dead letters.
//!
//! What this proves rides on the world's own checks: the queue state of
//! every stream (high-water mark, each message in flight and dead with its
//! attempts, receipt and visibility, the policy) is compared with the
//! model after every step and, after every crash, with the model of what
//! was acknowledged. So an ack that was durable is never undone by a
//! restart (the message is not handed out again) and a receive that was
//! durable is never forgotten (the message is not lost before its ack:
//! it is in flight, and comes back when its visibility passes).

use std::time::Duration;

use rill_shard::state::api::{Receive, Start};
use rill_shard::state::command::{Op, QueueDeadLetters, QueuePolicySet, QueueSettle};
use rill_shard::StreamId;

use super::kit::{ensure, guard, Fail};
use super::plan::QueueAction;
use super::world::Sim;
use crate::observe::Fault;

/// The consumer group names a [`super::plan::SimOp::Queue`] picks from:
/// the first is also a lease group's name, so kind mismatches happen.
const GROUPS: [&str; 3] = ["cg1", "q0", "q1"];

impl Sim {
    /// Runs one queue command (see the module docs).
    pub(super) fn queue(
        &mut self,
        id: StreamId,
        group: u8,
        action: QueueAction,
        n: u8,
        ms: u16,
        stale: bool,
    ) -> Result<(), Fail> {
        let mut name = GROUPS[usize::from(group) % GROUPS.len()];
        let (n, ms) = (usize::from(n), u64::from(ms));
        let mut id = id;
        if matches!(action, QueueAction::Ack | QueueAction::Nack) && !stale {
            // Settle what some worker holds: a group with messages in
            // flight, when the one picked has none.
            if let Some((other, other_name)) = self.holder(&id, name, n) {
                (id, name) = (other, other_name);
            }
        }
        let g = self.group_of(&id);
        let op = match action {
            QueueAction::Receive { latest } => {
                let start = if latest { Start::Latest } else { Start::Earliest };
                let req = Receive::new(&id, name)
                    .max_messages(n)
                    .visibility(Duration::from_millis(ms))
                    .start(start);
                let group = &self.groups[g as usize];
                let prepared =
                    guard("prepare receive", || group.live.prepare_receive(&req, self.now, &self.store))?;
                match prepared {
                    Ok(cmd) => Op::QueueReceive(cmd),
                    // A damaged pack may refuse the records' lookup.
                    Err(e) if self.refused_on_damage(&e) => return Ok(()),
                    Err(e) => {
                        // Admission refuses only what the command would:
                        // the stream, or a lease group of that name.
                        let model =
                            group.model_live.find(&id, self.now).and_then(|st| st.queue(name).map(|_| ()));
                        let real = Err(Fault::of(&e));
                        return ensure(real == model, "receive admission", || {
                            format!("{id} {name}: real {real:?}, model {model:?}")
                        });
                    }
                }
            }
            QueueAction::Ack | QueueAction::Nack => {
                let receipt = self.receipt(g, &id, name, n, stale);
                let settle = QueueSettle { id: id.clone(), group: name.to_string(), receipt, delay_ms: 0 };
                match action {
                    QueueAction::Ack => Op::QueueAck(settle),
                    _ => Op::QueueNack(QueueSettle { delay_ms: ms, ..settle }),
                }
            }
            QueueAction::Policy => {
                let start_offset =
                    self.groups[g as usize].model_live.streams.get(&id).map_or(0, |st| st.retained);
                Op::SetQueuePolicy(QueuePolicySet {
                    id: id.clone(),
                    group: name.to_string(),
                    max_attempts: n as u32,
                    max_in_flight: (ms % 5) as u32,
                    start_offset,
                })
            }
            QueueAction::Purge => {
                Op::PurgeDeadLetters(QueueDeadLetters { id: id.clone(), group: name.to_string() })
            }
            QueueAction::Redrive => {
                Op::RedriveDeadLetters(QueueDeadLetters { id: id.clone(), group: name.to_string() })
            }
            QueueAction::Look => return self.look(g, &id, name, n),
        };
        let ack = matches!(op, Op::QueueAck(_));
        let before = self.queue_counts(g, &id, name);
        self.command_in(g, op, None)?;
        let after = self.queue_counts(g, &id, name);
        // Deliveries (receipts handed out) and acks that removed a message.
        self.stats.queue_deliveries += after.0.saturating_sub(before.0);
        if ack && after.1 < before.1 {
            self.stats.queue_acks += 1;
        }
        Ok(())
    }

    /// A (stream, group) with messages in flight in the model: `(id,
    /// name)` itself when it has some, else the `n`-th of those that do.
    fn holder(&self, id: &StreamId, name: &'static str, n: usize) -> Option<(StreamId, &'static str)> {
        let holds = |id: &StreamId, name: &str| {
            let g = self.group_of(id);
            self.groups[g as usize].model_live.queue_view(id, name).is_some_and(|q| !q.in_flight.is_empty())
        };
        if holds(id, name) {
            return None;
        }
        let all: Vec<(StreamId, &'static str)> = self
            .setup
            .streams
            .iter()
            .flat_map(|id| GROUPS.iter().map(move |g| (id.clone(), *g)))
            .filter(|(id, g)| holds(id, g))
            .collect();
        (!all.is_empty()).then(|| all[n % all.len()].clone())
    }

    /// The model's last receipt and messages in flight of group `name`.
    fn queue_counts(&self, g: u32, id: &StreamId, name: &str) -> (u64, usize) {
        let q = self.groups[g as usize].model_live.queue_view(id, name);
        q.map_or((0, 0), |q| (q.last_receipt, q.in_flight.len()))
    }

    /// A receipt of group `name`: one in flight in the model (the `n`-th),
    /// or, when `stale` or nothing is in flight, one that is not.
    fn receipt(&self, g: u32, id: &StreamId, name: &str, n: usize, stale: bool) -> u64 {
        let q = self.groups[g as usize].model_live.queue_view(id, name);
        let live: Vec<u64> = q.map(|q| q.in_flight.iter().map(|m| m.receipt).collect()).unwrap_or_default();
        match (stale, live.is_empty()) {
            (false, false) => live[n % live.len()],
            (true, _) => q.map_or(0, |q| q.last_receipt.saturating_sub(n as u64)),
            (false, true) => n as u64,
        }
    }

    /// Backlog and dead letters on both sides.
    fn look(&self, g: u32, id: &StreamId, name: &str, n: usize) -> Result<(), Fail> {
        let group = &self.groups[g as usize];
        let real = guard("backlog", || group.live.backlog(id, name, self.now, &self.store))?;
        let real = match real {
            Err(e) if self.refused_on_damage(&e) => return Ok(()),
            other => other
                .map(|b| (b.ready, b.in_flight, b.dead, b.oldest_ready_age_ms))
                .map_err(|e| Fault::of(&e)),
        };
        let model = group.model_live.backlog(id, name, self.now);
        ensure(real == model, "backlog", || format!("{id} {name}: real {real:?}, model {model:?}"))?;
        let real = guard("dead letters", || group.live.dead_letter_list(id, name, n, self.now))?
            .map(|l| l.iter().map(|d| (d.offset, d.len, d.attempts, d.timestamp_ms)).collect::<Vec<_>>())
            .map_err(|e| Fault::of(&e));
        let model = group.model_live.dead_letters(id, name, n, self.now);
        ensure(real == model, "dead letters", || format!("{id} {name}: real {real:?}, model {model:?}"))
    }
}
