//! The parent's model of the children's transcripts: for every stream of
//! every cycle, the ops known to be in it (`committed`), the op in flight
//! at the last kill, and the producer resend the next child owes.
//! Invariants: every reply in a transcript is the one the script predicts;
//! an op that was seen after a crash counts as committed from then on;
//! a landed producer op must come back deduplicated when resent.

use std::collections::{BTreeMap, BTreeSet};

use super::child::Resend;
use super::ops::{Expect, Op, Outcome, StreamKey};
use super::queue::QueueLog;
use super::script::Script;

/// An op sent in the current cycle whose reply has not been read yet.
#[derive(Clone, Debug)]
pub(super) struct Sent {
    pub(super) op: Op,
    /// The script once the op is applied.
    pub(super) after: Script,
    /// For a resend: whether the op was already in the stream.
    pub(super) resend_of_landed: Option<bool>,
}

/// A producer op to send again at the next child start.
#[derive(Clone, Debug)]
pub(super) struct Planned {
    pub(super) op: Op,
    pub(super) after: Script,
    /// Whether the previous verification found the op in the stream.
    pub(super) landed: bool,
}

/// The model of one stream.
#[derive(Clone, Debug)]
pub(super) struct Track {
    /// The script advanced by exactly the ops known to be in the stream.
    pub(super) committed: Script,
    /// The cycle whose child drives the stream: its own, or a later one it
    /// was carried into for a resend.
    pub(super) active_cycle: u32,
    pub(super) outstanding: Option<Sent>,
    /// After a crash: the op (number `committed.generated()`) that was in
    /// flight, which may or may not have landed, with the script after it.
    pub(super) pending: Option<(Op, Script)>,
    pub(super) resend: Option<Planned>,
    /// Ops in `committed` that were never acknowledged but were seen.
    pub(super) seen_unacked: BTreeSet<u64>,
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
    /// `F` lines: ops that failed with a persistent error (fate unknown).
    pub unknown_outcomes: u64,
    /// `G` lines: probes that found the failed core refusing requests.
    pub poisoned_probes: u64,
    /// `U` and `V` lines: bucket purges sent and acknowledged.
    pub purges_sent: u64,
    pub purges_acked: u64,
    pub done: bool,
}

/// The parent's model: every stream of every cycle so far.
#[derive(Clone, Debug)]
pub struct Model {
    pub(super) seed: u64,
    pub(super) tracks: BTreeMap<StreamKey, Track>,
    /// Whether a persistent error (`F` line) is an allowed outcome: only
    /// where the test injected a fault.
    pub(super) allow_unknown: bool,
    /// Every bucket a purge was sent for, with whether it was acknowledged.
    pub(super) purges: BTreeMap<String, bool>,
    /// What the lease writer was told (`lease.rs`).
    pub(super) lease: LeaseLog,
    /// What the queue workers were told (`queue.rs`).
    pub(super) queue: QueueLog,
}

/// The lease writer's acknowledged history.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct LeaseLog {
    /// The highest acknowledged acquire's generation (0: none yet).
    pub generation: u64,
    /// The highest acknowledged committed offset (or the one recovery
    /// showed), 0 before any.
    pub committed: u64,
    /// The highest offset a commit was sent for.
    pub sent: u64,
    /// Acquires and commits acknowledged, over all cycles.
    pub acquires: u64,
    pub commits: u64,
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
        Model {
            seed,
            tracks: BTreeMap::new(),
            allow_unknown: false,
            purges: BTreeMap::new(),
            lease: LeaseLog::default(),
            queue: QueueLog::default(),
        }
    }

    /// Accepts persistent errors (`F` lines) as ops of unknown fate, as
    /// after an injected I/O fault; by default they fail the transcript.
    pub fn allow_unknown_outcomes(&mut self, allow: bool) {
        self.allow_unknown = allow;
    }

    /// Streams of cycles before `cycle` whose fate is settled (no op in
    /// flight, pending or owed as a resend): candidates to retire.
    pub fn settled_before(&self, cycle: u32) -> Vec<StreamKey> {
        self.tracks
            .iter()
            .filter(|(k, t)| {
                k.cycle < cycle && t.outstanding.is_none() && t.pending.is_none() && t.resend.is_none()
            })
            .map(|(k, _)| *k)
            .collect()
    }

    /// Stops tracking `key` (the test deleted the stream for good, so that
    /// long runs stay bounded; its name is never used again).
    pub fn forget(&mut self, key: StreamKey) {
        self.tracks.remove(&key);
    }

    /// Stops tracking the purge of `bucket` (the test completed it and saw
    /// its bytes gone).
    pub fn forget_purge(&mut self, bucket: &str) {
        self.purges.remove(bucket);
    }

    /// The lease writer's acknowledged history.
    pub fn lease(&self) -> LeaseLog {
        self.lease
    }

    /// The queue workers' history.
    pub fn queue(&self) -> &QueueLog {
        &self.queue
    }

    /// Every bucket a purge was sent for, with whether it was acknowledged.
    pub fn purges(&self) -> &BTreeMap<String, bool> {
        &self.purges
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
            if let Some(kept) = self.queue.apply(&words) {
                kept.map_err(at)?;
                continue;
            }
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
                ["F", key, opno, code] => {
                    let key: StreamKey = key.parse().map_err(at)?;
                    let opno = opno.parse().map_err(|_| at("bad op number".to_string()))?;
                    self.on_unknown(key, opno, code).map_err(at)?;
                    report.unknown_outcomes += 1;
                }
                ["G", key, probe] => {
                    if probe != "poisoned" {
                        return Err(at(format!(
                            "after a persistent error the core still serves {key} (head {probe}): \
                             it must be poisoned"
                        )));
                    }
                    report.poisoned_probes += 1;
                }
                ["U", bucket] => {
                    self.purges.entry(bucket.to_string()).or_insert(false);
                    report.purges_sent += 1;
                }
                ["V", bucket, _removed] => {
                    let acked = self
                        .purges
                        .get_mut(bucket)
                        .ok_or_else(|| at("purge reply before its send".into()))?;
                    *acked = true;
                    report.purges_acked += 1;
                }
                ["W", _bucket, _code] => {}
                ["K", generation] => {
                    let generation: u64 = generation.parse().map_err(|_| at("bad generation".into()))?;
                    if generation <= self.lease.generation {
                        return Err(at(format!(
                            "an acquire got generation {generation} after generation {} was acknowledged: \
                             an acknowledged acquire was lost",
                            self.lease.generation
                        )));
                    }
                    self.lease.generation = generation;
                    self.lease.acquires += 1;
                }
                ["N", offset] => {
                    let offset: u64 = offset.parse().map_err(|_| at("bad offset".into()))?;
                    self.lease.sent = self.lease.sent.max(offset);
                }
                ["M", committed] => {
                    let committed: u64 = committed.parse().map_err(|_| at("bad offset".into()))?;
                    if committed < self.lease.committed || committed > self.lease.sent {
                        return Err(at(format!(
                            "a commit answered {committed}; acknowledged before: {}, highest sent: {}",
                            self.lease.committed, self.lease.sent
                        )));
                    }
                    self.lease.committed = committed;
                    self.lease.commits += 1;
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

    /// An op that failed with a persistent error: like an op in flight at
    /// the kill, it may or may not have landed, and its stream is not
    /// driven further in this cycle.
    fn on_unknown(&mut self, key: StreamKey, opno: u64, code: &str) -> Result<(), String> {
        let allow = self.allow_unknown;
        let track =
            self.tracks.get_mut(&key).ok_or_else(|| format!("reply for {key}, which nothing was sent to"))?;
        let sent = track
            .outstanding
            .take()
            .ok_or_else(|| format!("reply for op {opno} of {key}, which is not waiting"))?;
        if sent.op.opno != opno {
            return Err(format!("reply for op {opno} while op {} waits", sent.op.opno));
        }
        if !allow {
            return Err(format!(
                "{key} op {opno} ({}) failed with the persistent error {code} where no fault was injected",
                sent.op.describe()
            ));
        }
        match sent.resend_of_landed {
            Some(true) => track.resend = Some(Planned { op: sent.op, after: sent.after, landed: true }),
            _ => track.pending = Some((sent.op, sent.after)),
        }
        Ok(())
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
}
