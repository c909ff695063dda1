//! The simulated machine and its oracle, side by side.
//!
//! The machine is what the engine runs on a core, minus threads and
//! clocks: the real [`GroupState`] of every group (`live`), and per core the
//! real [`WalLog`] writing through a [`SimDir`]. Mutations are applied to
//! the live state and submitted to the log exactly as the runtime's group
//! tasks do; checkpoints follow `shard/src/core/checkpoint.rs` phase by
//! phase; a restart goes through the real `recover` and `consolidate` (see
//! `restart.rs`).
//!
//! The oracle keeps, per group, the reference [`Model`] of everything
//! applied (`model_live`), and of everything acknowledged (`model_durable`,
//! with `shadow`, the real state machine's copy of the same prefix), plus
//! the submitted but unacknowledged entries in log order (`pending`). An
//! entry is acknowledged when the log's durable LSN covers it (SPEC §6).

use std::cell::Cell;
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::rc::Rc;
use std::sync::Arc;

use bytes::Bytes;
use futures::FutureExt;
use rill_shard::packs::ColdStore;
use rill_shard::planted::{self, Bug};
use rill_shard::protocol::checkpoint::{CheckpointRun, CheckpointStep};
use rill_shard::protocol::cold::ColdRun;
use rill_shard::protocol::mutation::{admit_and_apply, Mutation};
use rill_shard::protocol::pins::WalPins;
use rill_shard::state::api::{Append, AppendBatch, Close, Create, ProducerArgs, PublishSnapshot};
use rill_shard::state::command::{
    self, Applied, Command, LeaseAcquire, LeaseRelease, LeaseRenew, MemberHeartbeat, MemberLeave,
    OffsetCommit, Op,
};
use rill_shard::state::group::GroupState;
use rill_shard::wal::device::WalDir;
use rill_shard::wal::log::{EntryBody, LogEntry, LogStore};
use rill_shard::wal::{WalConfig, WalLog};
use rill_shard::StreamId;

use super::device::SimDir;
use super::kit::{ensure, guard, yields, Fail, Stats};
use super::packs::SimPackDir;
use super::plan::{At, EpochPick, Life, Prod, SeqPick, Setup, SimOp, ATTRS, CONTENT_TYPES, PRODUCERS};
use crate::model::Model;
use crate::observe::{observe, Observed};

/// A core's checkpoint in progress: the real run (`protocol/checkpoint.rs`)
/// and, once it asked to retire the log, the task doing so.
pub(super) struct Ckpt {
    pub run: CheckpointRun,
    pub retiring: Option<Retiring>,
    /// The group a one-group run covers.
    pub only: Option<u32>,
    /// Groups whose snapshots the run wrote.
    pub written: Vec<u32>,
    /// The LSN the run retires through, once asked to.
    pub retire_cut: u64,
}

/// The task retiring a core's log for a checkpoint, and its outcome once
/// it finished (`Some(true)`: retired).
pub(super) type Retiring = (glommio::task::JoinHandle<()>, Rc<Cell<Option<bool>>>);

/// A core's cold job in flight: the real job (`protocol/cold.rs`) and, while
/// it waits at its durability barrier, the LSN the barrier waits for.
pub(super) struct PackJob {
    pub run: ColdRun,
    pub barrier: Option<u64>,
}

/// One core: its log, its device, its checkpoint, its cold job.
pub(super) struct Core {
    pub log: Rc<WalLog>,
    pub dir: SimDir,
    pub checkpoint: Option<Ckpt>,
    /// A submission failed: the core must stop (its state is ahead of its
    /// log) and the machine restart.
    pub submit_failed: bool,
    /// The cold worker's job in flight.
    pub cold_job: Option<PackJob>,
    /// The groups' WAL pins, kept as the runtime's commit queue does.
    pub pins: WalPins,
}

impl Core {
    /// Starts core `core`'s log at LSN `first_lsn` (what recovery says the
    /// run starts at, as the engine does).
    pub fn start(core: usize, setup: &Setup, first_lsn: u64) -> Core {
        let dir = SimDir::new();
        let config =
            WalConfig { segment_bytes: setup.segment_bytes, buffer_bytes: 1 << 30, ..WalConfig::default() };
        let log =
            Rc::new(WalLog::start_at(Rc::new(dir.clone()) as Rc<dyn WalDir>, core as u32, config, first_lsn));
        Core { log, dir, checkpoint: None, submit_failed: false, cold_job: None, pins: WalPins::new() }
    }

    /// Stops the core's checkpoint task (its log stops when dropped).
    pub fn stop(self) {
        if let Some(Ckpt { retiring: Some((task, _)), .. }) = self.checkpoint {
            task.cancel();
        }
    }
}

/// A logged entry, as the oracle remembers it.
#[derive(Clone, Debug)]
pub(super) enum Entry {
    Command(Box<Command>),
    /// An installed snapshot and the model of the state it holds.
    Install(Vec<u8>, Box<Model>),
}

/// A submitted entry that is not acknowledged yet.
#[derive(Clone, Debug)]
pub(super) struct Pending {
    pub lsn: u64,
    pub index: u64,
    pub entry: Entry,
    /// The request, if a client would retry it (a producer request).
    pub retry: Option<Op>,
}

/// One group: the machine's state and the oracle's.
pub(super) struct Group {
    pub live: GroupState,
    pub shadow: GroupState,
    pub model_live: Model,
    pub model_durable: Model,
    pub pending: VecDeque<Pending>,
    pub checkpointed_index: u64,
    pub captures: Vec<(Vec<u8>, Model)>,
}

/// Checkpoint files: durable ones, and renamed ones whose directory is not
/// synced yet (a power failure keeps the old or the new one).
#[derive(Default)]
pub(super) struct Checkpoints {
    pub durable: BTreeMap<u32, Vec<u8>>,
    pub renamed: BTreeMap<u32, Vec<u8>>,
}

/// The whole simulation.
pub(super) struct Sim {
    pub setup: Setup,
    pub seed: u64,
    pub cores: Vec<Core>,
    pub groups: Vec<Group>,
    pub checkpoints: Checkpoints,
    pub now: u64,
    pub payloads: u64,
    /// Producer requests whose outcome a crash hid from their client.
    pub lost: Vec<(u32, Op)>,
    pub stats: Stats,
    pub scratch: tempfile::TempDir,
    /// The group the current step touched, for the per-step check.
    pub touched: Option<u32>,
    /// The pack directory (the simulated twin of the runtime's) and the
    /// store reads go through.
    pub packs: Arc<SimPackDir>,
    pub store: ColdStore,
    /// Files a failed cold job may have left that its cleanup could not
    /// remove; the next restart's orphan sweep does.
    pub leftovers: BTreeSet<String>,
    /// Pack files damaged on purpose and still on disk.
    pub damaged: BTreeSet<String>,
    /// Buckets purged whose erasure is not confirmed yet.
    pub purged: BTreeSet<String>,
    /// Reads refused on damaged packs since the last step.
    pub corrupt_reads: Cell<u64>,
    /// Fork calls and the fork keeper in flight, and what the fork checks
    /// remember.
    pub forks: super::fork_state::Forks,
}

/// Applies a logged entry to a state and its model (the way replay does).
pub(super) fn apply_entry(
    state: &mut GroupState,
    model: &mut Model,
    pending: &Pending,
    setup: &Setup,
) -> Result<(), Fail> {
    match &pending.entry {
        Entry::Command(cmd) => {
            let applied = guard("apply", || state.apply(cmd, &mut Vec::new()))?;
            ensure(applied.mutated && state.commit_index() == pending.index, "replay", || {
                format!(
                    "{:?} did not reproduce index {} (now {})",
                    cmd.op,
                    pending.index,
                    state.commit_index()
                )
            })?;
            model.apply(cmd);
        }
        Entry::Install(bytes, installed) => {
            *state = GroupState::decode_snapshot(bytes, setup.limits.clone())
                .map_err(|e| Fail::new("install", format!("snapshot does not decode: {e}")))?;
            *model = Model::clone(installed);
        }
    }
    Ok(())
}

impl Sim {
    pub fn new(seed: u64, setup: Setup) -> Sim {
        let groups = (0..setup.groups)
            .map(|g| {
                let state = GroupState::new(g, setup.groups, setup.limits.clone());
                Group {
                    live: state.clone(),
                    shadow: state,
                    model_live: Model::new(setup.limits.clone()),
                    model_durable: Model::new(setup.limits.clone()),
                    pending: VecDeque::new(),
                    checkpointed_index: 0,
                    captures: Vec::new(),
                }
            })
            .collect();
        let cores = (0..setup.cores).map(|c| Core::start(c, &setup, 1)).collect();
        let scratch = crate::targets::scratch_dir();
        let packs = Arc::new(SimPackDir::new(scratch.path().join("cold")));
        Sim {
            setup,
            seed,
            cores,
            groups,
            checkpoints: Checkpoints::default(),
            now: 1_000_000,
            payloads: 0,
            lost: Vec::new(),
            stats: Stats::default(),
            scratch,
            touched: None,
            store: ColdStore::new(packs.clone(), 1 << 20),
            packs,
            leftovers: BTreeSet::new(),
            damaged: BTreeSet::new(),
            purged: BTreeSet::new(),
            corrupt_reads: Cell::new(0),
            forks: Default::default(),
        }
    }

    pub fn group_of(&self, id: &StreamId) -> u32 {
        id.placement(self.setup.groups, self.setup.cores).group
    }

    pub fn core_of(&self, group: u32) -> usize {
        group as usize % self.setup.cores
    }

    pub fn groups_of_core(&self, core: usize) -> Vec<u32> {
        (0..self.setup.groups).filter(|g| self.core_of(*g) == core).collect()
    }

    fn model(&self, id: &StreamId) -> &Model {
        &self.groups[self.group_of(id) as usize].model_live
    }

    /// Below the universe size a pick names that stream; above it, one of
    /// the stored streams, forks included (so most operations reach a
    /// stream that exists).
    fn target(&self, pick: usize) -> StreamId {
        let all = &self.setup.streams;
        if pick < all.len() {
            return all[pick].clone();
        }
        let stored: Vec<&StreamId> =
            self.setup.names().filter(|id| self.model(id).streams.contains_key(id)).collect();
        match stored.len() {
            0 => all[pick % all.len()].clone(),
            n => stored[pick % n].clone(),
        }
    }

    fn producer(&self, id: &StreamId, prod: &Option<Prod>) -> Option<ProducerArgs> {
        let prod = prod.as_ref()?;
        let name = PRODUCERS[usize::from(prod.p) % PRODUCERS.len()];
        let known = self.model(id).producer(id, name);
        let current_epoch = known.map_or(0, |(epoch, _)| epoch);
        let next = known.map_or(0, |(_, last)| last + 1);
        let epoch = match prod.epoch {
            EpochPick::Same => current_epoch,
            EpochPick::Bump => current_epoch + 1,
            EpochPick::Lower => current_epoch.saturating_sub(1),
        };
        let seq = match (prod.epoch, prod.seq) {
            (EpochPick::Bump, SeqPick::Next) | (_, SeqPick::Zero) => 0,
            (_, SeqPick::Next) => next,
            (_, SeqPick::Back(k)) => next.saturating_sub(1 + u64::from(k)),
            (_, SeqPick::Ahead(k)) => next + u64::from(k),
        };
        Some(ProducerArgs { id: name.to_string(), epoch, seq })
    }

    fn offset(&self, id: &StreamId, at: At) -> u64 {
        let stream = self.model(id).streams.get(id);
        let (tail, retained) = stream.map_or((0, 0), |st| (st.tail(), st.retained));
        let snapshot = stream.and_then(|st| st.snapshots.keys().next_back().copied()).unwrap_or(tail);
        match at {
            At::Abs(n) => n,
            At::FromTail(k) => tail.saturating_sub(k),
            At::FromRetained(k) => retained + k,
            At::Beyond(k) => tail + k,
            At::BelowSnapshot(k) => snapshot.saturating_sub(k),
        }
    }

    /// A fresh payload; distinct bytes make misplaced data visible.
    pub(super) fn payload(&mut self, len: u16) -> Bytes {
        self.payloads += 1;
        let seed = self.payloads;
        (0..u64::from(len))
            .map(|i| (seed.wrapping_mul(31).wrapping_add(i * 7)) as u8)
            .collect::<Vec<u8>>()
            .into()
    }

    /// Runs one operation (without the checks that follow every step).
    pub async fn execute(&mut self, index: usize, op: &SimOp) -> Result<(), Fail> {
        self.touched = None;
        match op {
            SimOp::Advance(ms) => self.now += ms,
            SimOp::Create { s, ct, payload, closed, life, attrs, producer, seq } => {
                let id = self.target(*s);
                let mut req = Create::new(id.clone());
                req.content_type = ct.map(|c| CONTENT_TYPES[usize::from(c) % 2].to_string());
                req.initial_payload = payload.map(|len| self.payload(len));
                req.closed = *closed;
                (req.ttl_s, req.expires_at_ms) = match life {
                    Life::Forever => (None, None),
                    Life::Ttl(ttl) => (Some(*ttl), None),
                    Life::ExpiresIn(ms) => (None, Some(self.now + ms)),
                };
                req.attrs = attrs.map(|a| ATTRS[usize::from(a) % ATTRS.len()].to_string());
                req.producer = self.producer(&id, producer);
                req.stream_seq = seq.map(|n| format!("{n:02}"));
                self.command(&id, Op::from(req))?;
            }
            SimOp::Append { s, len, more, ct, close_after, seq, producer } => {
                let id = self.target(*s);
                let mut req = Append::new(id.clone(), self.payload(*len)).close_after(*close_after);
                req.more_records = more.iter().map(|len| self.payload(*len)).collect();
                req.content_type = ct.map(|c| CONTENT_TYPES[usize::from(c) % 2].to_string());
                req.stream_seq = seq.map(|n| format!("{n:02}"));
                req.producer = self.producer(&id, producer);
                self.command(&id, Op::from(req))?;
            }
            SimOp::Batch { s, lens, producer } => {
                let id = self.target(*s);
                let payloads = lens.iter().map(|len| self.payload(*len)).collect();
                let mut req = AppendBatch::new(id.clone(), payloads);
                req.producer = self.producer(&id, producer);
                self.command(&id, Op::from(req))?;
            }
            SimOp::Close { s, producer } => {
                let id = self.target(*s);
                let mut req = Close::new(id.clone());
                req.producer = self.producer(&id, producer);
                self.command(&id, Op::from(req))?;
            }
            SimOp::Delete { s } => {
                let id = self.target(*s);
                self.command(&id, Op::Delete(id.clone()))?;
            }
            SimOp::SetAttrs { s, attrs } => {
                let id = self.target(*s);
                let attrs = attrs.map(|a| ATTRS[usize::from(a) % ATTRS.len()].to_string());
                self.command(&id, Op::SetAttrs { id: id.clone(), attrs })?;
            }
            SimOp::Read { s, at, max_len, records } => {
                let id = self.target(*s);
                let g = self.group_of(&id);
                self.touched = Some(g);
                let offset = self.offset(&id, *at);
                if *records {
                    self.compare_records(g, &id, offset, usize::from(*max_len))?;
                    self.compare_offset_at(g, &id, self.now.saturating_sub(u64::from(*max_len) * 100))?;
                } else {
                    self.compare_read(g, &id, offset, usize::from(*max_len))?;
                }
                let group = &self.groups[g as usize];
                let due = group.live.renewal_due(&id, self.now);
                let model_due = group.model_live.renewal_due(&id, self.now);
                ensure(due == model_due, "renewal", || format!("{id}: real {due}, model {model_due}"))?;
                if due {
                    self.command(&id, Op::Touch(id.clone()))?;
                }
            }
            SimOp::Lease { s, group, owner, action, ttl_ms, stale, at } => {
                let id = self.target(*s);
                let g = self.group_of(&id);
                let group = format!("cg{group}");
                let owner = ["alice", "bob"][usize::from(*owner) % 2].to_string();
                let current = self.groups[g as usize]
                    .model_live
                    .streams
                    .get(&id)
                    .and_then(|st| st.leases.get(&group))
                    .map_or(0, |l| l.generation);
                let generation = if *stale { current.saturating_sub(1) } else { current };
                let ttl_ms = u64::from(*ttl_ms);
                if *action >= 4 {
                    // Membership lives in the group of (bucket, consumer group).
                    let bucket = id.bucket().to_string();
                    let hash = rill_shard::placement_hash(&bucket, &group);
                    let g = rill_shard::placement_of(hash, self.setup.groups, self.setup.cores).group;
                    let op = if *action == 4 {
                        Op::Heartbeat(MemberHeartbeat { bucket, group, consumer: owner, ttl_ms })
                    } else {
                        Op::Leave(MemberLeave { bucket, group, consumer: owner })
                    };
                    return self.command_in(g, op, None);
                }
                let op = match action {
                    0 => Op::AcquireLease(LeaseAcquire { id: id.clone(), group, owner, ttl_ms }),
                    1 => Op::RenewLease(LeaseRenew { id: id.clone(), group, owner, generation, ttl_ms }),
                    2 => Op::ReleaseLease(LeaseRelease { id: id.clone(), group, owner, generation }),
                    _ => {
                        let offset = self.offset(&id, *at);
                        Op::CommitOffset(OffsetCommit { id: id.clone(), group, owner, generation, offset })
                    }
                };
                self.command(&id, op)?;
            }
            SimOp::Queue { s, group, action, n, ms, stale } => {
                let id = self.target(*s);
                self.queue(id, *group, *action, *n, *ms, *stale)?;
            }
            SimOp::Fork { action, n, to } => self.fork(*action, *n, *to).await?,
            SimOp::Retention { s, reclaim, consumed, age_ms } => {
                let id = self.target(*s);
                match reclaim {
                    true => self.reclaim(id)?,
                    false => self.set_retention(id, *consumed, *age_ms)?,
                }
            }
            SimOp::Publish { s, at, variant } => {
                let id = self.target(*s);
                let offset = self.offset(&id, *at);
                let req =
                    PublishSnapshot::new(id.clone(), offset, vec![*variant; 3]).content_type("text/plain");
                self.command(&id, Op::from(req))?;
            }
            SimOp::Retain { s, at } => {
                let id = self.target(*s);
                let offset = self.offset(&id, *at);
                self.command(&id, Op::AdvanceRetention { id: id.clone(), offset })?;
            }
            SimOp::ExpireDue { group } => self.command_in(*group, Op::ExpireDue, None)?,
            SimOp::Capture { group } => {
                // The runtime answers `snapshot_group` once the state it
                // encoded is durable: capture the acknowledged state.
                let g = &mut self.groups[*group as usize];
                g.captures.push((g.shadow.encode_snapshot(), g.model_durable.clone()));
                if g.captures.len() > 4 {
                    g.captures.remove(0);
                }
            }
            SimOp::Install { group, pick, ahead } => self.install(*group, usize::from(*pick), *ahead)?,
            SimOp::Retry { pick } => {
                if !self.lost.is_empty() {
                    let (group, op) = self.lost.remove(usize::from(*pick) % self.lost.len());
                    self.stats.retries += 1;
                    self.command_in(group, op, None)?;
                }
            }
            SimOp::Device { core, grants, fault } => {
                let dir = self.cores[*core % self.cores.len()].dir.clone();
                for i in 0..*grants {
                    let fault = fault.filter(|(at, _)| *at == i).map(|(_, f)| f);
                    if dir.waiting() == 0 {
                        yields(2).await;
                    }
                    if !dir.grant(fault) {
                        break;
                    }
                    self.stats.device_faults += u64::from(fault.is_some());
                    yields(3).await;
                }
            }
            SimOp::Settle => self.settle().await?,
            SimOp::Checkpoint { core, phases, group } => {
                let only = group.map(|g| g % self.setup.groups);
                let core = only.map_or(*core % self.cores.len(), |g| self.core_of(g));
                for _ in 0..*phases {
                    self.checkpoint_phase(core, only)?;
                    yields(2).await;
                }
            }
            SimOp::ColdStart { core, group, kind, fault } => {
                self.cold_start(*core % self.cores.len(), *group, *kind, *fault)?
            }
            SimOp::ColdStep { core } => self.cold_step(*core % self.cores.len())?,
            SimOp::Purge { bucket } => self.purge(*bucket)?,
            SimOp::Crash { power_loss, corrupt, mid_flush, salt } => {
                if *mid_flush {
                    self.run_until_sync().await;
                }
                self.restart(*power_loss, *corrupt, *salt ^ index as u64).await?;
            }
        }
        Ok(())
    }

    /// Grants device operations (without faults) until each device waits
    /// on a sync or on nothing.
    async fn run_until_sync(&mut self) {
        for core in 0..self.cores.len() {
            for _ in 0..16 {
                yields(3).await;
                let dir = &self.cores[core].dir;
                if matches!(dir.next_waiting(), None | Some("sync")) || !dir.grant(None) {
                    break;
                }
            }
        }
        yields(3).await;
    }

    /// Grants every device operation until every log is idle.
    pub async fn settle(&mut self) -> Result<(), Fail> {
        for _ in 0..10_000 {
            yields(3).await;
            let mut granted = false;
            for core in &self.cores {
                granted |= core.dir.grant(None);
            }
            if !granted {
                return Ok(());
            }
        }
        Err(Fail::new("settle", "the logs never went idle".into()))
    }

    /// Applies a command for the stream `id` to its group.
    fn command(&mut self, id: &StreamId, op: Op) -> Result<(), Fail> {
        let retry = match &op {
            Op::Create(command::Create { producer: Some(_), .. })
            | Op::Append(command::Append { producer: Some(_), .. })
            | Op::AppendBatch(command::AppendBatch { producer: Some(_), .. })
            | Op::Close(command::Close { producer: Some(_), .. }) => Some(op.clone()),
            _ => None,
        };
        self.command_in(self.group_of(id), op, retry)
    }

    /// Applies a command to group `g` and the model, compares what both
    /// answer (SPEC §2), and logs it if it mutated.
    pub(super) fn command_in(&mut self, g: u32, op: Op, retry: Option<Op>) -> Result<(), Fail> {
        self.command_observed(g, op, retry).map(|_| ())
    }

    /// [`Self::command_in`], answering what both sides showed.
    pub(super) fn command_observed(&mut self, g: u32, op: Op, retry: Option<Op>) -> Result<Observed, Fail> {
        self.touched = Some(g);
        self.stats.commands += 1;
        let cmd = Command { now_ms: self.now, op };
        let group = &mut self.groups[g as usize];
        // The runtime's own admission and apply step; the simulation does
        // not bound uncommitted bytes.
        let real = guard("apply", || match admit_and_apply(&mut group.live, &cmd, 0, u64::MAX) {
            Mutation::Refused(err) => observe(&Applied { result: Err(err), mutated: false }, Vec::new()),
            Mutation::Unchanged(result) => observe(&Applied { result, mutated: false }, Vec::new()),
            Mutation::Logged { result, effects, .. } => observe(&Applied { result, mutated: true }, effects),
        })?;
        let tombstones = |m: &Model| m.forks.sources.values().filter(|p| p.tombstone).count();
        let before = matches!(cmd.op, Op::Delete(_) | Op::ExpireDue).then(|| tombstones(&group.model_live));
        let model = group.model_live.apply(&cmd);
        if let Some(before) = before {
            self.stats.soft_deletes += tombstones(&group.model_live).saturating_sub(before) as u64;
        }
        ensure(real == model, "reply", || {
            format!("group {g}: {:?} at {}:\n  real  {real:?}\n  model {model:?}", cmd.op, cmd.now_ms)
        })?;
        if real.mutated {
            let index = group.live.commit_index();
            self.submit(g, index, Entry::Command(Box::new(cmd)), retry)?;
        }
        Ok(real)
    }

    /// Installs a group snapshot the way the runtime does: decode, refuse
    /// one that does not move the group forward, replace the state, log an
    /// Install record at the snapshot's commit index.
    fn install(&mut self, g: u32, pick: usize, ahead: u8) -> Result<(), Fail> {
        let (bytes, model) = if ahead == 0 {
            let group = &self.groups[g as usize];
            if group.captures.is_empty() {
                return Ok(());
            }
            group.captures[pick % group.captures.len()].clone()
        } else {
            let ids: Vec<StreamId> =
                self.setup.streams.iter().filter(|id| self.group_of(id) == g).cloned().collect();
            if ids.is_empty() {
                return Ok(());
            }
            let payloads: Vec<Bytes> = (0..ahead).map(|_| self.payload(5)).collect();
            let group = &self.groups[g as usize];
            let (mut state, mut model) = (group.live.clone(), group.model_live.clone());
            for (j, payload) in payloads.into_iter().enumerate() {
                let id = ids[(pick + j) % ids.len()].clone();
                let op = match model.find(&id, self.now) {
                    Ok(_) => Op::from(Append::new(id, payload)),
                    Err(_) => Op::from(Create::new(id)),
                };
                let cmd = Command { now_ms: self.now, op };
                let real = guard("apply", || observe(&state.apply(&cmd, &mut Vec::new()), Vec::new()))?;
                let expected = model.apply(&cmd);
                ensure(real.result == expected.result, "reply", || {
                    format!("group {g} (foreign copy): {:?}: real {real:?}, model {expected:?}", cmd.op)
                })?;
            }
            if state.commit_index() <= group.live.commit_index() {
                return Ok(());
            }
            (state.encode_snapshot(), model)
        };
        self.touched = Some(g);
        let state = GroupState::decode_snapshot(&bytes, self.setup.limits.clone())
            .map_err(|e| Fail::new("install", format!("snapshot does not decode: {e}")))?;
        let index = state.commit_index();
        let group = &mut self.groups[g as usize];
        if index <= group.live.commit_index() {
            // The runtime refuses a snapshot that does not move the group
            // forward (ARCHITECTURE.md, "Group snapshot install"): nothing
            // changes, nothing is logged.
            self.stats.installs_refused += 1;
            return Ok(());
        }
        if self.cores[self.core_of(g)].checkpoint.is_some() {
            // The runtime's install waits for the core's checkpoint run (it
            // takes the checkpoint lock); here it simply does not happen.
            self.stats.installs_deferred += 1;
            return Ok(());
        }
        // Logged by reference: the installed state is the group's durable
        // checkpoint before its `InstallRef` record is submitted.
        let group = &mut self.groups[g as usize];
        group.live = state;
        group.model_live = model.clone();
        group.checkpointed_index = index;
        self.checkpoints.renamed.remove(&g);
        self.checkpoints.durable.insert(g, bytes.clone());
        self.stats.installs += 1;
        self.submit(g, index, Entry::Install(bytes, Box::new(model)), None)
    }

    /// Hands an entry to the group's core log, as the group task does.
    fn submit(&mut self, g: u32, index: u64, entry: Entry, retry: Option<Op>) -> Result<(), Fail> {
        self.stats.mutations += 1;
        let core = &mut self.cores[g as usize % self.setup.cores];
        let body = match &entry {
            Entry::Command(cmd) => EntryBody::Command(cmd.as_ref()),
            Entry::Install(bytes, _) => EntryBody::InstallRef(*blake3::hash(bytes).as_bytes()),
        };
        core.pins.submitting(g, core.log.last_lsn() + 1);
        let submitted = core.log.submit(LogEntry { group: g, index, body }).now_or_never();
        match submitted {
            Some(Ok(lsn)) => {
                self.groups[g as usize].pending.push_back(Pending { lsn, index, entry, retry });
                Ok(())
            }
            // The log failed: this entry is not logged and never may
            // appear; the core stops and the machine restarts.
            Some(Err(_)) => {
                core.submit_failed = true;
                Ok(())
            }
            None => Err(Fail::new("submit", "the log made a submission wait".into())),
        }
    }

    /// Acknowledges every pending entry the logs made durable (with the
    /// planted `AckBeforeDurable` bug: every submitted one).
    pub fn acknowledge(&mut self) -> Result<(), Fail> {
        for c in 0..self.cores.len() {
            let log = &self.cores[c].log;
            let durable =
                if planted::active(Bug::AckBeforeDurable) { log.last_lsn() } else { log.durable_lsn() };
            for g in self.groups_of_core(c) {
                let group = &mut self.groups[g as usize];
                while group.pending.front().is_some_and(|p| p.lsn <= durable) {
                    let pending = group.pending.pop_front().expect("checked");
                    apply_entry(&mut group.shadow, &mut group.model_durable, &pending, &self.setup)?;
                    self.stats.acked += 1;
                }
            }
        }
        Ok(())
    }

    /// Advances core `c`'s checkpoint by one step of the real protocol.
    fn checkpoint_phase(&mut self, c: usize, only: Option<u32>) -> Result<(), Fail> {
        let mut ckpt = match self.cores[c].checkpoint.take() {
            Some(ckpt) => ckpt,
            None => Ckpt {
                run: CheckpointRun::new(self.cores[c].log.last_lsn()),
                retiring: None,
                only,
                written: Vec::new(),
                retire_cut: 0,
            },
        };
        if let Some((task, done)) = ckpt.retiring.take() {
            match done.get() {
                None => ckpt.retiring = Some((task, done)),
                Some(ok) => {
                    self.stats.checkpoints += u64::from(ok);
                    if ok {
                        self.check_retired(c, ckpt.retire_cut)?;
                    }
                    return Ok(()); // the run is over
                }
            }
            self.cores[c].checkpoint = Some(ckpt);
            return Ok(());
        }
        let durable = self.cores[c].log.durable_lsn();
        let (pins, only) = (&self.cores[c].pins, ckpt.only);
        let changed = || {
            let due = |g: &u32| {
                let group = &self.groups[*g as usize];
                only.is_none_or(|o| o == *g)
                    && (group.live.commit_index() != group.checkpointed_index || pins.pin_of(*g).is_some())
            };
            self.groups_of_core(c).into_iter().filter(due).collect()
        };
        match ckpt.run.next(durable, changed) {
            CheckpointStep::WaitDurable(_) => {}
            CheckpointStep::Write(g) => {
                let group = &mut self.groups[g as usize];
                self.checkpoints.renamed.insert(g, group.live.encode_snapshot());
                group.checkpointed_index = group.live.commit_index();
                self.cores[c].pins.cloned(g);
                ckpt.written.push(g);
            }
            CheckpointStep::SyncDir => {
                let renamed = std::mem::take(&mut self.checkpoints.renamed);
                self.checkpoints.durable.extend(renamed);
            }
            CheckpointStep::Retire(_) => {
                // As the runtime does: the run's snapshots are durable, their
                // pins move, and the log retires below the lowest pin.
                for g in &ckpt.written {
                    self.cores[c].pins.checkpointed(*g);
                }
                let cut = self.cores[c].pins.retire_cut(self.cores[c].log.durable_lsn());
                ckpt.retire_cut = cut;
                let log = self.cores[c].log.clone();
                let done = Rc::new(Cell::new(None));
                let flag = done.clone();
                let task = glommio::spawn_local(async move {
                    flag.set(Some(log.retire_through(cut).await.is_ok()));
                })
                .detach();
                ckpt.retiring = Some((task, done));
            }
            CheckpointStep::Done => return Ok(()),
        }
        self.cores[c].checkpoint = Some(ckpt);
        Ok(())
    }

    /// After a checkpoint retired the log through `cut`, no segment but the
    /// active one may hold only records at or below it, and at most one
    /// spare (header-less) segment may wait: so the WAL holds what was
    /// logged since the last checkpoint plus at most two segments.
    fn check_retired(&self, c: usize, cut: u64) -> Result<(), Fail> {
        let image = self.cores[c].dir.image(false, &mut crate::rng::Rng::new(0));
        let mut headed = Vec::new();
        let mut spares = 0;
        for (name, bytes) in image.iter().filter(|(n, _)| n.ends_with(".wal")) {
            match rill_shard::wal::format::SegmentHeader::decode(bytes) {
                Ok(header) => headed.push((header.seq, name, bytes)),
                Err(_) => spares += 1,
            }
        }
        ensure(spares <= 1, "wal-size", || format!("core {c}: {spares} spare segments after a checkpoint"))?;
        headed.sort();
        headed.pop(); // the active segment
        for (_, name, bytes) in headed {
            let scan = rill_shard::wal::scan::scan_segment(bytes)
                .map_err(|e| Fail::new("wal-size", format!("core {c}: {name} does not scan: {e}")))?;
            let newest = scan.records.iter().map(|r| r.lsn).max().unwrap_or(0);
            ensure(newest > cut, "wal-size", || {
                format!(
                    "core {c}: {name} holds only records through LSN {newest} after retiring through {cut}"
                )
            })?;
        }
        Ok(())
    }
}
