//! Forks in the simulation (SPEC §2 "Forks"; ARCHITECTURE.md "Forks across
//! groups"): `Engine::fork` and the fork keeper, run step by step against
//! the real groups, and the checks that hold forks to their promises
//! across crashes.
//!
//! A fork call (`engine/src/fork.rs`) asks the source's group for its head
//! and incarnation, copies the source's records through real reads (hot
//! and cold, the way the engine's handle reads them: whole records, the
//! retained part of one that straddles the retained start, the last one
//! cut at the fork offset), has the model confirm the copy, and logs
//! `ForkCreate` on the fork's group; later steps log `ForkPin` on the
//! source's group and `ForkPinAck` on the fork's, each once the step
//! before is durable, and the call answers once the answer is durable. The
//! keeper (`engine/src/fork_keeper.rs`) reads a group's outbox, waits for
//! that group's durability barrier, and delivers each entry in two halves,
//! each durable before the next. A crash ends every call and the keeper's
//! round, as it ends the process; what they left in an outbox is the next
//! keeper's to deliver. So crashes land between every two steps, and other
//! operations (appends to the fork, deletes of either side, expiry,
//! purges, retention) land between them too; only a call's first three
//! steps run in one operation.
//!
//! What is checked, beyond the world's checks (every group's fork book
//! equal to the model's after every step it touched, every name's answers
//! against the model's, recovery exactly the acknowledged state plus a
//! prefix of what was pending):
//!
//! * `fork-copy`: the copy the reads made is the model's copy of the
//!   source at that point, or both refuse the fork point.
//! * `fork-prefix` (every full check, every restart): a fork whose call
//!   answered still reads the source's prefix as it was copied, exactly,
//!   while it lives; its own appends after it are the model's.
//! * `fork-pin` (the same): while such a fork lives, its source is that
//!   incarnation, live, or answers `StreamGone`, unless a purge of the
//!   source's bucket dropped the pin; a fork whose pin was answered is
//!   pinned by its source's group.
//! * `fork-keeper` and `fork-release` (after a drain: the keeper runs until
//!   nothing is owed, within a bounded number of rounds): every outbox is
//!   empty, and every pin held names a fork that still holds it, so a
//!   source whose last fork went answers `StreamNotFound`, down a chain.
//!
//! One leak is known and counted rather than failed (FUZZING.md): a fork
//! call's own pin that reaches the source after the fork was deleted and
//! its unpin already delivered pins a fork that no longer exists.

use std::collections::VecDeque;

use bytes::{Bytes, BytesMut};
use rill_shard::error::ErrorCode;
use rill_shard::state::api::{ForkCopy, ForkOwed, ForkPoint, HeadReply, Read};
use rill_shard::state::command::{
    self, ForkCreate, ForkOrigin, ForkOutboxDone, ForkPin, ForkPinAck, ForkUnpin, Op,
};
use rill_shard::wal::log::LogStore;
use rill_shard::StreamId;

use super::fork_state::{AckedFork, ForkJob, KeeperRound, Prefix, Stage, Wait};
use super::kit::{ensure, guard, Fail};
use super::plan::{ForkAction, PointPick};
use super::world::Sim;
use crate::observe::{Fault, Outcome};

/// How many keeper rounds a drain allows before it calls the outboxes
/// stuck (a round delivers everything owed when it started; each link of a
/// chain takes one more).
const DRAIN_ROUNDS: usize = 32;

impl Sim {
    /// Runs one fork operation.
    pub(super) async fn fork(&mut self, action: ForkAction, n: u8, to: u8) -> Result<(), Fail> {
        match action {
            ForkAction::Start { point, ttl, retry } => self.fork_start(n, to, point, ttl, retry),
            ForkAction::Step => self.fork_steps(),
            ForkAction::Keep => self.keep_step(usize::from(n)),
            ForkAction::Delete { source } => {
                let names: Vec<StreamId> = self
                    .setup
                    .names()
                    .filter(|id| {
                        let forks = &self.groups[self.group_of(id) as usize].model_live.forks;
                        match source {
                            true => forks.sources.contains_key(*id),
                            false => forks.origins.contains_key(*id),
                        }
                    })
                    .cloned()
                    .collect();
                let Some(id) = names.get(usize::from(n) % names.len().max(1)).cloned() else { return Ok(()) };
                self.command_in(self.group_of(&id), Op::Delete(id.clone()), None)
            }
            ForkAction::Append { len } => {
                let forks: Vec<StreamId> = self
                    .setup
                    .names()
                    .filter(|id| {
                        self.groups[self.group_of(id) as usize].model_live.forks.origins.contains_key(*id)
                    })
                    .cloned()
                    .collect();
                let Some(id) = forks.get(usize::from(n) % forks.len().max(1)).cloned() else { return Ok(()) };
                let payload = self.payload(len);
                let op = Op::from(rill_shard::state::api::Append::new(id.clone(), payload));
                self.command_in(self.group_of(&id), op, None)
            }
            ForkAction::Drain => self.drain().await,
        }
    }

    /// The log position group `g`'s last submitted entry takes.
    fn wait_of(&self, g: u32) -> Wait {
        self.groups[g as usize].pending.back().map(|p| (self.core_of(g), p.lsn))
    }

    /// The position was made durable (or there was nothing to wait for).
    fn waited(&self, wait: Wait) -> bool {
        wait.is_none_or(|(c, lsn)| self.cores[c].log.durable_lsn() >= lsn)
    }

    /// Steps 1 to 3 of `Engine::fork`: the source's head, the copy, the
    /// fork's create; the call goes on in [`Self::fork_steps`].
    fn fork_start(
        &mut self,
        n: u8,
        to: u8,
        point: PointPick,
        ttl: Option<u8>,
        retry: bool,
    ) -> Result<(), Fail> {
        let request = match (retry, &self.forks.last) {
            (true, Some(last)) => Some(last.clone()),
            _ => self.fork_request(n, to, point, ttl),
        };
        let Some((source, fork, point, ttl)) = request else { return Ok(()) };
        self.forks.last = Some((source.clone(), fork.clone(), point, ttl));
        let gs = self.group_of(&source);
        self.touched = Some(gs);
        let group = &self.groups[gs as usize];
        let real = guard("fork source", || group.live.fork_source(&source, self.now))?;
        let real = real.map(|i| (i.head, i.incarnation)).map_err(|e| Fault::of(&e));
        let model = group.model_live.fork_source(&source, self.now);
        ensure(real == model, "fork-source", || format!("{source}: real {real:?}, model {model:?}"))?;
        let Ok((head, source_incarnation)) = real else { return Ok(()) };
        let Some(copied) = self.copy_prefix(gs, &source, &head, point)? else { return Ok(()) };
        let model = self.groups[gs as usize].model_live.fork_prefix(&source, point, self.now);
        let (real_view, model_view) =
            (copied.clone().map(|(s, r, e)| (s, r.iter().map(|b| b.to_vec()).collect::<Vec<_>>(), e)), model);
        ensure(real_view == model_view, "fork-copy", || {
            format!("{source} at {point:?}: real {real_view:?}, model {model_view:?}")
        })?;
        let Ok((start, inherited, end)) = copied else { return Ok(()) };
        // The fork takes the source's content type, and its TTL and expiry
        // unless it names its own.
        let mut create = command::Create::from(rill_shard::state::api::Create::new(fork.clone()));
        create.content_type = Some(head.content_type.clone());
        (create.ttl_s, create.expires_at_ms) = match ttl {
            Some(ttl) => (Some(ttl), None),
            None => (head.ttl_s, head.expires_at_ms),
        };
        self.forks.tokens += 1;
        let token = self.seed.rotate_left(24) ^ self.forks.tokens;
        let copy = Prefix { source_incarnation, start, bytes: inherited.concat(), end };
        let origin = ForkOrigin { source: source.clone(), source_incarnation, token, point, end };
        let req = ForkCreate { create, more: Vec::new(), start, inherited, origin };
        let gf = self.group_of(&fork);
        let answer = self.command_observed(gf, Op::ForkCreate(Box::new(req)), None)?;
        match answer.result {
            Ok(Outcome::Created { already_exists: false, commit_index, .. }) => {
                let wait = self.wait_of(gf);
                let job =
                    ForkJob { fork, source, token, copy, incarnation: commit_index, stage: Stage::Pin, wait };
                self.forks.jobs.push(job);
            }
            Ok(Outcome::Created { already_exists: true, .. }) => self.stats.fork_retries += 1,
            // Refused (a conflict, a tombstone, the stream limit, the hot
            // bytes): the call fails with nothing else logged.
            _ => {}
        }
        Ok(())
    }

    /// A new fork request: a stored stream (by `n`) into a fresh name (by
    /// `to`; one in eight any name, so conflicts and tombstones happen).
    fn fork_request(
        &self,
        n: u8,
        to: u8,
        point: PointPick,
        ttl: Option<u8>,
    ) -> Option<(StreamId, StreamId, ForkPoint, Option<u64>)> {
        let stored: Vec<&StreamId> = self
            .setup
            .names()
            .filter(|id| self.groups[self.group_of(id) as usize].model_live.streams.contains_key(*id))
            .collect();
        let source = (*stored.get(usize::from(n) % stored.len().max(1))?).clone();
        let candidates: Vec<&StreamId> = self
            .setup
            .names()
            .filter(|id| {
                let model = &self.groups[self.group_of(id) as usize].model_live;
                to.is_multiple_of(8)
                    || (!model.streams.contains_key(*id) && !model.forks.sources.contains_key(*id))
            })
            .filter(|id| **id != source)
            .collect();
        let fork = (*candidates.get(usize::from(to) % candidates.len().max(1))?).clone();
        let model = &self.groups[self.group_of(&source) as usize].model_live;
        let stream = model.streams.get(&source)?;
        let records: Vec<(u64, u64)> =
            stream.live_records().map(|(s, e)| (s.max(stream.retained), e)).collect();
        let nth = |r: u8| records.get(usize::from(r) % records.len().max(1)).map_or(stream.tail(), |r| r.0);
        let point = match point {
            PointPick::Tail => ForkPoint::Tail,
            PointPick::Offset(k) => ForkPoint::Offset(stream.retained + u64::from(k)),
            PointPick::IntoRecord { r, bytes } => {
                ForkPoint::IntoRecord { offset: nth(r), bytes: u64::from(bytes) }
            }
            PointPick::Records { r, count } => ForkPoint::Records { offset: nth(r), count: u64::from(count) },
        };
        Some((source, fork, point, ttl.map(u64::from)))
    }

    /// Step 2 of `Engine::fork` (`copy_prefix` in `engine/src/fork.rs`),
    /// through real reads of group `g`: the copy's start, its records and
    /// the fork offset, or the refusal; `None` when a read met a pack
    /// damaged on purpose (the call fails with `Corrupted`).
    #[allow(clippy::type_complexity)]
    fn copy_prefix(
        &self,
        g: u32,
        source: &StreamId,
        head: &HeadReply,
        point: ForkPoint,
    ) -> Result<Option<Result<(u64, Vec<Bytes>, u64), Fault>>, Fail> {
        let bad = || Ok(Some(Err(Fault::new(ErrorCode::BadRequest))));
        let Ok(mut copy) = ForkCopy::new(point, head.retained_offset, head.tail_offset) else {
            return bad();
        };
        let limit = self.setup.limits.max_read_bytes.max(1);
        let mut at = copy.start();
        while copy.wants_read_at(at) {
            let req = Read::new(source.clone()).offset(at).max_len(limit).records(true);
            let reply = match self.real_read(g, &req)? {
                None => return Ok(None),
                Some(Err(fault)) => return Ok(Some(Err(fault))),
                Some(Ok(reply)) => reply,
            };
            if reply.offset > at {
                // The retained part of a record straddling the start, read
                // in pieces of at most the read limit.
                let mut part = BytesMut::new();
                let mut from = at;
                while from < reply.offset {
                    let req = Read::new(source.clone()).offset(from).max_len((reply.offset - from) as usize);
                    let piece = match self.real_read(g, &req)? {
                        None => return Ok(None),
                        Some(Err(fault)) => return Ok(Some(Err(fault))),
                        Some(Ok(piece)) => piece,
                    };
                    let ok = piece.offset == from
                        && !piece.payload.is_empty()
                        && piece.next_offset <= reply.offset;
                    ensure(ok, "fork-copy", || format!("{source}: the read at {from} gave {piece:?}"))?;
                    part.extend_from_slice(&piece.payload);
                    from = piece.next_offset;
                }
                copy.take_part(at, part.freeze());
            }
            if reply.payload.is_empty() {
                break;
            }
            copy.take(&reply);
            at = reply.next_offset;
        }
        let start = copy.start();
        match copy.finish() {
            Ok((end, inherited)) => Ok(Some(Ok((start, inherited, end)))),
            Err(_) => bad(),
        }
    }

    /// Steps 4 and 5 of every fork call in flight, and its answer, each
    /// once the step before is durable.
    fn fork_steps(&mut self) -> Result<(), Fail> {
        let jobs = std::mem::take(&mut self.forks.jobs);
        let mut kept = Vec::with_capacity(jobs.len());
        for mut job in jobs {
            if !self.waited(job.wait) {
                kept.push(job);
                continue;
            }
            let (gs, gf) = (self.group_of(&job.source), self.group_of(&job.fork));
            match job.stage {
                Stage::Pin => {
                    let pin = ForkPin {
                        source: job.source.clone(),
                        source_incarnation: job.copy.source_incarnation,
                        token: job.token,
                        fork: job.fork.clone(),
                    };
                    let pinned = self.pin(gs, pin, true)?;
                    job.stage = Stage::Ack { pinned };
                    job.wait = self.wait_of(gs);
                }
                Stage::Ack { pinned } => {
                    let ack = ForkPinAck { fork: job.fork.clone(), token: job.token, pinned };
                    let before = self.groups[gf as usize].live.commit_index();
                    self.command_in(gf, Op::ForkPinAck(ack), None)?;
                    let decided = self.groups[gf as usize].live.commit_index() != before;
                    job.stage = Stage::Answer { pinned, decided };
                    job.wait = self.wait_of(gf);
                }
                Stage::Answer { pinned: true, .. } => {
                    self.stats.forks += 1;
                    let acked = AckedFork {
                        fork: job.fork,
                        source: job.source,
                        token: job.token,
                        copy: job.copy,
                        incarnation: job.incarnation,
                    };
                    self.forks.acked.push(acked);
                    continue;
                }
                Stage::Answer { pinned: false, decided } => {
                    // The call fails with the source's state. When its own
                    // answer was the one logged, the refusal removed the
                    // fork. (When the keeper answered first, the fork stands
                    // as that answer left it: pinned, if the source's bucket
                    // was purged since, and the call still fails.)
                    self.stats.forks_refused += 1;
                    let live = &self.groups[gf as usize].live;
                    let stays = live.stream(&job.fork).is_some_and(|s| s.incarnation() == job.incarnation);
                    ensure(!(decided && stays), "fork-pin", || {
                        format!("{}: its pin on {} was refused, and it is still there", job.fork, job.source)
                    })?;
                    continue;
                }
            }
            kept.push(job);
        }
        self.forks.jobs = kept;
        if self.forks.acked.len() > 64 {
            self.forks.acked.drain(..self.forks.acked.len() - 64);
        }
        Ok(())
    }

    /// Logs a pin on the source's group `gs`, answering whether it holds.
    /// A fork call's pin (`from_call`) that lands after its fork lost its
    /// origin is noted: if the fork's unpin was delivered first, it is the
    /// known leak (module docs), which the release check passes over. (The
    /// keeper's own stale pins cannot leak: its rounds are sequential, so
    /// the unpin that replaced the pin is delivered in a later round.)
    fn pin(&mut self, gs: u32, pin: ForkPin, from_call: bool) -> Result<bool, Fail> {
        let before = self.groups[gs as usize].live.commit_index();
        let answer = self.command_observed(gs, Op::ForkPin(pin.clone()), None)?;
        let pinned = matches!(answer.result, Ok(Outcome::ForkPinned { pinned: true, .. }));
        let mutated = self.groups[gs as usize].live.commit_index() != before;
        let fork_book = &self.groups[self.group_of(&pin.fork) as usize].model_live.forks;
        let holds = fork_book.origins.get(&pin.fork).is_some_and(|o| o.token == pin.token);
        if from_call && pinned && mutated && !holds {
            self.forks.late.insert((pin.source, pin.token));
        }
        Ok(pinned)
    }

    /// The fork keeper moves on as far as durability lets it, as its
    /// thread does: start a round on a group that owes something (reading
    /// its outbox, noting its barrier), then, each once the step before is
    /// durable, deliver the next half of an entry.
    fn keep_step(&mut self, pick: usize) -> Result<(), Fail> {
        let mut round = match self.forks.keeper.take() {
            Some(round) => round,
            None => {
                let owing: Vec<u32> = (0..self.setup.groups)
                    .filter(|g| self.groups[*g as usize].live.forks().outbox_len() > 0)
                    .collect();
                let Some(&g) = owing.get(pick % owing.len().max(1)) else { return Ok(()) };
                self.touched = Some(g);
                let owed: VecDeque<ForkOwed> = self.groups[g as usize].live.fork_outbox().into();
                KeeperRound { owed, half: None, wait: self.wait_of(g) }
            }
        };
        while self.waited(round.wait) {
            match round.half.take() {
                Some((entry, pinned)) => round.wait = self.deliver_second(&entry, pinned)?,
                None => match round.owed.pop_front() {
                    Some(entry) => {
                        let (pinned, wait) = self.deliver_first(&entry)?;
                        round.half = Some((entry, pinned));
                        round.wait = wait;
                    }
                    None => return Ok(()), // the round is over
                },
            }
        }
        self.forks.keeper = Some(round);
        Ok(())
    }

    /// The first half of delivering an outbox entry, on the source's group:
    /// the pin (answering whether it holds) or the unpin.
    fn deliver_first(&mut self, entry: &ForkOwed) -> Result<(bool, Wait), Fail> {
        match entry.clone() {
            ForkOwed::Pin { fork, token, source, source_incarnation } => {
                let gs = self.group_of(&source);
                let pinned = self.pin(gs, ForkPin { source, source_incarnation, token, fork }, false)?;
                Ok((pinned, self.wait_of(gs)))
            }
            ForkOwed::Unpin { fork, token, source } => {
                let gs = self.group_of(&source);
                let tombstone = self.groups[gs as usize].model_live.forks.is_tombstone(&source);
                self.command_in(gs, Op::ForkUnpin(ForkUnpin { source: source.clone(), token, fork }), None)?;
                if tombstone && !self.groups[gs as usize].model_live.forks.sources.contains_key(&source) {
                    self.stats.fork_releases += 1;
                }
                Ok((false, self.wait_of(gs)))
            }
        }
    }

    /// The second half, on the fork's group: the pin's answer, or the
    /// unpin's delivery.
    fn deliver_second(&mut self, entry: &ForkOwed, pinned: bool) -> Result<Wait, Fail> {
        let (fork, op) = match entry.clone() {
            ForkOwed::Pin { fork, token, .. } => {
                (fork.clone(), Op::ForkPinAck(ForkPinAck { fork, token, pinned }))
            }
            ForkOwed::Unpin { fork, token, .. } => {
                (fork.clone(), Op::ForkOutboxDone(ForkOutboxDone { fork, token }))
            }
        };
        let gf = self.group_of(&fork);
        self.command_in(gf, op, None)?;
        self.stats.fork_deliveries += 1;
        Ok(self.wait_of(gf))
    }

    /// The keeper has time: rounds over every group that owes something,
    /// the devices settling between steps, until nothing is owed; then the
    /// release check.
    async fn drain(&mut self) -> Result<(), Fail> {
        // The round in progress is abandoned (a new round re-reads what it
        // had; every delivery is idempotent).
        self.forks.keeper = None;
        let failed = |sim: &Sim| sim.cores.iter().any(|c| c.dir.failed() || c.submit_failed);
        for _ in 0..DRAIN_ROUNDS {
            self.settle().await?;
            if failed(self) {
                return Ok(()); // the step restarts the machine
            }
            let owing: Vec<u32> = (0..self.setup.groups)
                .filter(|g| self.groups[*g as usize].live.forks().outbox_len() > 0)
                .collect();
            if owing.is_empty() {
                break;
            }
            for g in owing {
                for entry in self.groups[g as usize].live.fork_outbox() {
                    let (pinned, _) = self.deliver_first(&entry)?;
                    self.settle().await?;
                    self.deliver_second(&entry, pinned)?;
                    self.settle().await?;
                    if failed(self) {
                        return Ok(());
                    }
                }
            }
        }
        self.acknowledge()?;
        for g in 0..self.setup.groups {
            let owed = self.groups[g as usize].live.fork_outbox();
            ensure(owed.is_empty(), "fork-keeper", || {
                format!("group {g} still owes {owed:?} after {DRAIN_ROUNDS} keeper rounds")
            })?;
        }
        self.check_releases()
    }

    /// The known leak, for the release check: pins of fork calls that
    /// landed after their fork lost its origin, still held, counted once.
    fn note_leaks(&mut self) {
        for g in 0..self.setup.groups {
            for (source, pins) in &self.groups[g as usize].model_live.forks.sources {
                for token in pins.pins.keys() {
                    let key = (source.clone(), *token);
                    if self.forks.late.contains(&key) && self.forks.leaked.insert(key) {
                        self.stats.late_pins += 1;
                    }
                }
            }
        }
    }

    /// After a drain: every pin held names a fork that still holds it (its
    /// origin, live or a tombstone), but for the known leak; so every name
    /// that answers `StreamGone` is pinned by a fork that lives.
    fn check_releases(&mut self) -> Result<(), Fail> {
        self.note_leaks();
        for g in 0..self.setup.groups {
            let book = &self.groups[g as usize].model_live.forks;
            for (source, pins) in &book.sources {
                for (token, fork) in &pins.pins {
                    let holder = &self.groups[self.group_of(fork) as usize].model_live.forks;
                    let holds =
                        holder.origins.get(fork).is_some_and(|o| o.token == *token && o.source == *source);
                    let late = self.forks.leaked.contains(&(source.clone(), *token));
                    ensure(holds || late, "fork-release", || {
                        format!(
                            "{source} (tombstone {}) is pinned by token {token} of {fork}, which no longer \
                             holds it, and nothing is owed",
                            pins.tombstone
                        )
                    })?;
                }
            }
            for id in self.setup.names().filter(|id| self.group_of(id) == g) {
                let gone = self.groups[g as usize].live.head_view(id, self.now).err().map(|e| e.code());
                if gone == Some(ErrorCode::StreamGone) {
                    ensure(book.is_pinned(id), "fork-release", || format!("{id} is gone with no pin"))?;
                }
            }
        }
        Ok(())
    }

    /// At every full check and after every restart: the forks whose calls
    /// answered read their copies and keep their sources pinned, and every
    /// origin whose pin was answered is held by its source's group.
    pub(super) fn check_forks(&self) -> Result<(), Fail> {
        for acked in &self.forks.acked {
            let gf = self.group_of(&acked.fork);
            let group = &self.groups[gf as usize];
            let lives = group
                .live
                .fork_source(&acked.fork, self.now)
                .is_ok_and(|i| i.incarnation == acked.incarnation);
            if !lives {
                continue;
            }
            // The prefix, as copied, from the fork's retained start on.
            let copy = &acked.copy;
            let retained = group.model_live.streams.get(&acked.fork).map_or(copy.start, |s| s.retained);
            let mut offset = retained.max(copy.start);
            while offset < copy.end {
                let req = Read::new(acked.fork.clone()).offset(offset).max_len((copy.end - offset) as usize);
                let reply = match self.real_read(gf, &req)? {
                    None => break, // a damaged pack, refused
                    Some(reply) => reply,
                };
                let want = &copy.bytes[(offset - copy.start) as usize..];
                let ok = reply.as_ref().is_ok_and(|r| {
                    r.offset == offset && !r.payload.is_empty() && want.starts_with(&r.payload)
                });
                ensure(ok, "fork-prefix", || {
                    format!(
                        "{} (fork of {} copied at [{}, {})): at {offset} read {reply:?}",
                        acked.fork, acked.source, copy.start, copy.end
                    )
                })?;
                offset = reply.map_or(copy.end, |r| r.next_offset);
            }
            // Its source is the incarnation copied, or soft-deleted.
            if self.forks.purged.contains(&(acked.source.clone(), acked.token)) {
                continue;
            }
            let gs = self.group_of(&acked.source);
            let source = self.groups[gs as usize].live.fork_source(&acked.source, self.now);
            let ok = match &source {
                Ok(info) => info.incarnation == copy.source_incarnation,
                Err(e) => e.code() == ErrorCode::StreamGone,
            };
            ensure(ok, "fork-pin", || {
                format!(
                    "{} lives (fork of incarnation {} of {}), but its source answers {:?}",
                    acked.fork,
                    copy.source_incarnation,
                    acked.source,
                    source.map(|i| i.incarnation)
                )
            })?;
        }
        for g in 0..self.setup.groups {
            for (fork, origin) in &self.groups[g as usize].model_live.forks.origins {
                if !origin.pinned || self.forks.purged.contains(&(origin.source.clone(), origin.token)) {
                    continue;
                }
                let book = &self.groups[self.group_of(&origin.source) as usize].model_live.forks;
                let held =
                    book.sources.get(&origin.source).is_some_and(|p| p.pins.get(&origin.token) == Some(fork));
                ensure(held, "fork-pin", || {
                    format!(
                        "{fork}'s pin on {} (token {}) was answered, but is not held",
                        origin.source, origin.token
                    )
                })?;
            }
        }
        Ok(())
    }

    /// Before a purge of `bucket`: the pins of its sources go with it,
    /// those of forks a crash may bring back too (a fork's delete that is
    /// not durable yet, undone while the source's purge survives).
    pub(super) fn fork_purging(&mut self, bucket: &str) {
        for group in &self.groups {
            let origins =
                group.model_live.forks.origins.values().chain(group.model_durable.forks.origins.values());
            for origin in origins.filter(|o| o.source.bucket() == bucket) {
                self.forks.purged.insert((origin.source.clone(), origin.token));
            }
        }
        // The pins of in-flight calls too (their pin may land after).
        for job in self.forks.jobs.iter().filter(|j| j.source.bucket() == bucket) {
            self.forks.purged.insert((job.source.clone(), job.token));
        }
    }
}
