//! One group on its core: its state machine, its request queue, and the
//! task that serves the queue one request at a time.
//!
//! Mutations are applied to the state machine, submitted to the core's log,
//! and answered through [`super::commit::Commit`] once durable. Queries are
//! answered from the state machine under the same rule (after the group's
//! last submitted entry is durable). Live reads that find nothing park in
//! the core's waiter registry; the group's effects wake them. Admission for
//! uncommitted bytes and live readers happens here, before anything is
//! applied, so a rejected request changes nothing. A replicated group's
//! requests go through `replicated.rs` first: mutations are proposed and
//! answered once applied, reads confirm leadership before they run here.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::rc::Rc;
use std::sync::atomic::Ordering::Relaxed;
use std::sync::Arc;
use std::task::Poll;
use std::time::{Duration, Instant};

use futures::future::{select, Either};

use super::commit::{LatencyKind, Pending, PendingReply};
use super::envelope::{Envelope, Reply, ReplyTx, Request};
use super::waiters::{Waiter, WaiterId};
use super::{Core, Queue};
use crate::error::{Error, ErrorKind, Misplacement, Result};
use crate::metrics::GroupMetrics;
use crate::protocol::mutation::{admit_and_apply, Mutation};
use crate::state::api::{GroupSnapshot, Read, ReadReply};
use crate::state::command::{Command, Effect, Op, Response};
use crate::state::group::GroupState;
use crate::state::name::StreamId;
use crate::wal::device::sync_dir;
use crate::wal::log::{EntryBody, LogEntry, Lsn};
use crate::wal::recovery::write_checkpoint;
use crate::raft::replica::GroupReplica;

/// A group as its core holds it.
#[derive(Debug)]
pub struct Group {
    pub id: u32,
    /// The group's state; a replicated group shares it with its replica's
    /// state machine, which alone mutates it.
    pub state: Rc<RefCell<GroupState>>,
    /// The group's replica, when the node is replicated.
    pub replica: Option<Rc<GroupReplica>>,
    pub metrics: Arc<GroupMetrics>,
    queue: Queue,
    /// LSN of the last entry this group submitted.
    last_lsn: Cell<Lsn>,
    /// Payload bytes submitted but not yet durable.
    uncommitted: Cell<u64>,
    /// An `ExpireDue` request is already queued.
    pub expiry_queued: Cell<bool>,
    /// Commit index of the group's last checkpoint (by this run).
    pub checkpointed_index: Cell<u64>,
    /// When the expiry sweep may next ask a stream whose age rule only
    /// cold records could meet (a lookup in the packs): in memory only.
    pub cold_age_checks: RefCell<HashMap<StreamId, u64>>,
}

impl Group {
    /// A group starting from (recovered) `state`, which is taken to be
    /// checkpointed already.
    pub fn new(id: u32, state: GroupState, metrics: Arc<GroupMetrics>) -> Self {
        Self::with_state(id, Rc::new(RefCell::new(state)), None, metrics)
    }

    /// A replicated group, served from its replica's state.
    pub fn replicated(id: u32, replica: Rc<GroupReplica>, metrics: Arc<GroupMetrics>) -> Self {
        Self::with_state(id, replica.state_cell(), Some(replica), metrics)
    }

    fn with_state(
        id: u32,
        cell: Rc<RefCell<GroupState>>,
        replica: Option<Rc<GroupReplica>>,
        metrics: Arc<GroupMetrics>,
    ) -> Self {
        let state = cell.borrow();
        metrics.set_hot_bytes(state.hot_bytes());
        metrics.streams.store(state.stream_count(), Relaxed);
        metrics.fork_outbox.store(state.forks().outbox_len() as u64, Relaxed);
        metrics.commit_index.store(state.commit_index(), Relaxed);
        let checkpointed = state.commit_index();
        drop(state);
        Group {
            id,
            state: cell,
            replica,
            metrics,
            queue: Queue::default(),
            last_lsn: Cell::new(0),
            uncommitted: Cell::new(0),
            expiry_queued: Cell::new(false),
            checkpointed_index: Cell::new(checkpointed),
            cold_age_checks: RefCell::new(HashMap::new()),
        }
    }

    pub fn push(&self, env: Envelope) {
        self.queue.push(env);
    }

    /// LSN of the last entry this group submitted (0: none this run).
    pub fn last_lsn(&self) -> Lsn {
        self.last_lsn.get()
    }

    pub fn queue_len(&self) -> usize {
        self.queue.len()
    }

    pub fn drain_queue(&self) -> Vec<Envelope> {
        self.queue.drain()
    }

    /// The group's task: serve requests in arrival order, forever.
    pub async fn run(self: Rc<Self>, core: Rc<Core>) {
        loop {
            let env = self.queue.pop().await;
            self.handle(&core, env).await;
        }
    }

    /// Payload bytes submitted (or proposed) and not yet settled.
    pub(crate) fn uncommitted(&self) -> u64 {
        self.uncommitted.get()
    }

    pub(crate) fn add_uncommitted(&self, bytes: u64) {
        let now = self.uncommitted.get() + bytes;
        self.uncommitted.set(now);
        self.metrics.uncommitted_bytes.store(now, Relaxed);
    }

    pub(crate) fn settle_uncommitted(&self, bytes: u64) {
        let left = self.uncommitted.get().saturating_sub(bytes);
        self.uncommitted.set(left);
        self.metrics.uncommitted_bytes.store(left, Relaxed);
    }

    async fn handle(&self, core: &Rc<Core>, env: Envelope) {
        let Envelope { request, reply, sent_at, .. } = env;
        let kind = if request.is_append() {
            LatencyKind::Append
        } else if request.is_read() {
            LatencyKind::Read
        } else {
            LatencyKind::Other
        };
        if let Some(err) = core.commit.poisoned() {
            let _ = reply.send(Err(err));
            return;
        }
        if let Some(replica) = &self.replica {
            if let Err(err) = self.replicated_precheck(replica, &request).await {
                let _ = reply.send(Err(err));
                return;
            }
        }
        let now = core.now_ms();
        let answer = |result: Result<Reply>, reply: ReplyTx| self.answer(core, result, reply, sent_at, kind);
        match request {
            Request::Mutate(op) => {
                if matches!(op, Op::ExpireDue) {
                    self.expiry_queued.set(false);
                }
                self.mutate_at(core, now, op, reply, sent_at, kind).await
            }
            Request::Barrier => answer(Ok(Reply::Done), reply),
            Request::Read(read) => {
                let result = self.read_now(core, &read, now);
                self.renew(core, &read.id, now).await;
                answer(result.map(Reply::Read), reply);
            }
            Request::WaitRead { read, timeout } => {
                self.wait_read(core, read, timeout, reply, sent_at, now).await
            }
            Request::Head { id, .. } => answer(self.state.borrow_mut().head(&id, now).map(Reply::Head), reply),
            Request::ForkSource(id) => {
                answer(self.state.borrow().fork_source(&id, now).map(Reply::ForkSource), reply)
            }
            Request::ForkOutbox => answer(Ok(Reply::ForkOutbox(self.state.borrow().fork_outbox())), reply),
            Request::GetAttrs(id) => answer(self.state.borrow().get_attrs(&id, now).map(Reply::Attrs), reply),
            Request::CommittedOffset { id, group } => {
                let result = self.state.borrow().committed_offset(&id, &group, now);
                answer(result.map(Reply::Committed), reply)
            }
            Request::OffsetAt { id, at_ms } => {
                let result = self.state.borrow().offset_at(&id, at_ms, now, core.as_ref());
                answer(result.map(Reply::Offset), reply)
            }
            Request::Bootstrap { id, max_len } => {
                let planned = self.state.borrow().bootstrap_plan(&id, max_len, now);
                let result = planned.and_then(|(snapshot, plan)| {
                    let updates = plan.resolve(|piece| core.fetch_cold(piece))?;
                    Ok(crate::state::api::BootstrapReply { snapshot, updates })
                });
                self.renew(core, &id, now).await;
                answer(result.map(Reply::Bootstrap), reply);
            }
            Request::Receive(req) => self.receive(core, now, req, reply, sent_at).await,
            Request::Reclaim(id) => self.reclaim(core, now, id, reply, sent_at).await,
            Request::Backlog { id, group } => {
                let result = self.state.borrow().backlog(&id, &group, now, core.as_ref());
                answer(result.map(Reply::Backlog), reply)
            }
            Request::DeadLetters { id, group, max } => {
                let result = self.dead_letters(core, &id, &group, max, now);
                answer(result.map(Reply::Deliveries), reply)
            }
            Request::SnapshotGroup => {
                let state = self.state.borrow();
                let snapshot = GroupSnapshot {
                    group: self.id,
                    group_count: state.group_count(),
                    commit_index: state.commit_index(),
                    bytes: state.encode_snapshot().into(),
                    pack_files: state.cold().packs.values().map(|p| p.file.clone()).collect(),
                };
                drop(state);
                answer(Ok(Reply::GroupSnapshot(snapshot)), reply);
            }
            Request::InstallGroupSnapshot(snapshot) => self.install(core, snapshot, reply, sent_at).await,
            Request::Members(request) => self.members(core, request, reply, sent_at),
        }
    }

    /// Reads hot and cold bytes (SPEC §3: the caller cannot tell them apart).
    pub(crate) fn read_now(&self, core: &Core, read: &Read, now: u64) -> Result<ReadReply> {
        let plan = self.state.borrow().read_plan_with(read, now, core)?;
        plan.resolve(|piece| core.fetch_cold(piece))
    }

    /// Answers once the group's last submitted entry is durable.
    pub(super) fn answer(
        &self,
        core: &Rc<Core>,
        result: Result<Reply>,
        tx: ReplyTx,
        sent_at: Instant,
        kind: LatencyKind,
    ) {
        let reply = PendingReply { tx, result, sent_at, kind };
        core.commit.after(
            core,
            Pending {
                lsn: self.last_lsn.get(),
                group: self.id,
                reply: Some(reply),
                effects: Vec::new(),
                uncommitted: 0,
            },
        );
    }

    /// Applies one mutating command stamped `now_ms`, logs it, and answers
    /// after durability.
    async fn mutate_at(
        &self,
        core: &Rc<Core>,
        now_ms: u64,
        op: Op,
        tx: ReplyTx,
        sent_at: Instant,
        kind: LatencyKind,
    ) {
        if let Some(replica) = &self.replica {
            if let Some(this) = core.groups.get(&self.id) {
                let cmd = Command { now_ms, op };
                return this.propose_pipelined(core, replica, cmd, tx, sent_at, kind).await;
            }
        }
        self.mutate_then(core, now_ms, op, tx, sent_at, kind, |result| result.map(Reply::Applied)).await
    }

    /// [`Self::mutate_at`], with the reply made by `finish` from what
    /// applying returned, right after it was applied (a receive reads its
    /// deliveries' bytes there).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn mutate_then(
        &self,
        core: &Rc<Core>,
        now_ms: u64,
        op: Op,
        tx: ReplyTx,
        sent_at: Instant,
        kind: LatencyKind,
        finish: impl FnOnce(Result<Response>) -> Result<Reply>,
    ) {
        let cmd = Command { now_ms, op };
        if let Some(replica) = &self.replica {
            return self.propose_then(core, replica, cmd, tx, sent_at, kind, finish).await;
        }
        let before = self.uncommitted.get();
        let limit = core.limits.max_uncommitted_bytes_per_group;
        let decided = admit_and_apply(&mut self.state.borrow_mut(), &cmd, before, limit);
        let (index, result, effects, added) = match decided {
            Mutation::Refused(err) => {
                self.metrics.backpressure_events.fetch_add(1, Relaxed);
                core.metrics.uncommitted_backpressure_events.fetch_add(1, Relaxed);
                // Admission reveals nothing of the group's state: fail fast.
                let _ = tx.send(Err(err));
                return;
            }
            Mutation::Unchanged(result) => {
                if result.as_ref().is_err_and(|e| e.code() == crate::error::ErrorCode::ColdBackpressure) {
                    self.metrics.backpressure_events.fetch_add(1, Relaxed);
                    core.metrics.cold_backpressure_events.fetch_add(1, Relaxed);
                }
                self.answer(core, finish(result), tx, sent_at, kind);
                return;
            }
            Mutation::Logged { index, result, effects, payload_bytes } => {
                (index, result, effects, payload_bytes)
            }
        };
        self.account(core, &result);
        let result = finish(result);
        self.uncommitted.set(before + added);
        self.metrics.uncommitted_bytes.store(before + added, Relaxed);
        let entry = LogEntry { group: self.id, index, body: EntryBody::Command(&cmd) };
        match core.commit.submit(entry).await {
            Ok(lsn) => {
                self.last_lsn.set(lsn);
                let reply = PendingReply { tx, result, sent_at, kind };
                core.commit.after(
                    core,
                    Pending { lsn, group: self.id, reply: Some(reply), effects, uncommitted: added },
                );
            }
            Err(err) => {
                self.settle_uncommitted(added);
                let _ = tx.send(Err(err));
            }
        }
    }

    /// Updates counters after a mutation was applied.
    pub(super) fn account(&self, core: &Core, result: &Result<Response>) {
        let (mut appends, mut bytes) = (0u64, 0u64);
        match result {
            Ok(Response::Append(r)) if !r.deduplicated && r.next_offset > r.start_offset => {
                appends = 1;
                bytes = r.next_offset - r.start_offset;
            }
            Ok(Response::Batch(b)) => {
                for r in
                    b.items.iter().flatten().filter(|r| !r.deduplicated && r.next_offset > r.start_offset)
                {
                    appends += 1;
                    bytes += r.next_offset - r.start_offset;
                }
            }
            _ => {}
        }
        let m = &self.metrics;
        m.applied_mutations.fetch_add(1, Relaxed);
        core.metrics.applied_mutations.fetch_add(1, Relaxed);
        m.accepted_appends.fetch_add(appends, Relaxed);
        core.metrics.accepted_appends.fetch_add(appends, Relaxed);
        m.appended_bytes.fetch_add(bytes, Relaxed);
        let state = self.state.borrow();
        m.set_hot_bytes(state.hot_bytes());
        m.streams.store(state.stream_count(), Relaxed);
        m.fork_outbox.store(state.forks().outbox_len() as u64, Relaxed);
        m.commit_index.store(state.commit_index(), Relaxed);
    }

    /// Renews a TTL stream read at `now`, when the renewal is due (a
    /// committed mutation stamped with the read's own time, SPEC §2 "TTL
    /// and expiry"). Runs before the read is answered.
    async fn renew(&self, core: &Rc<Core>, id: &StreamId, now: u64) {
        if self.state.borrow().renewal_due(id, now) {
            let nowhere = ReplyTx::Nowhere;
            self.mutate_at(core, now, Op::Touch(id.clone()), nowhere, Instant::now(), LatencyKind::Other).await;
        }
    }

    async fn wait_read(
        &self,
        core: &Rc<Core>,
        read: Read,
        timeout: Duration,
        tx: ReplyTx,
        sent_at: Instant,
        now: u64,
    ) {
        let result = self.read_now(core, &read, now);
        let must_park = matches!(&result, Ok(r) if r.payload.is_empty() && !r.closed) && !timeout.is_zero();
        if !must_park {
            self.renew(core, &read.id, now).await;
            self.answer(core, result.map(Reply::Read), tx, sent_at, LatencyKind::Read);
            return;
        }
        let limit = core.limits.live_waiters_per_core;
        if core.waiters.borrow().len() >= limit {
            core.metrics.live_read_backpressure_events.fetch_add(1, Relaxed);
            let err = ErrorKind::LiveReadBackpressure { core: core.id, limit };
            let _ = tx.send(Err(err.into()));
            return;
        }
        let waiter = Waiter {
            group: self.id,
            stream: read.id.clone(),
            offset: read.offset,
            max_len: read.max_len,
            records: read.records,
            reply: tx,
            sent_at,
            watcher: None,
        };
        let wid = core.waiters.borrow_mut().insert(waiter);
        core.metrics.live_waiters.store(core.waiters.borrow().len() as u64, Relaxed);
        let watcher = glommio::spawn_local(watch(core.clone(), wid, timeout)).detach();
        if let Some(w) = core.waiters.borrow_mut().get_mut(wid) {
            w.watcher = Some(watcher);
        }
        self.renew(core, &read.id, now).await;
    }

    /// Acts on one released effect of this group.
    pub(crate) fn on_effect(&self, core: &Rc<Core>, effect: Effect) {
        match effect {
            Effect::Advanced(id) => self.wake_readers(core, &id),
            Effect::Removed(id) => {
                let parked = core.waiters.borrow_mut().take_stream(&id);
                core.metrics.live_waiters.store(core.waiters.borrow().len() as u64, Relaxed);
                for w in parked {
                    if let Some(h) = &w.watcher {
                        h.cancel();
                    }
                    let err =
                        ErrorKind::StreamNotFound { bucket: id.bucket().into(), stream: id.stream().into() };
                    self.answer(core, Err(err.into()), w.reply, w.sent_at, LatencyKind::Read);
                }
            }
        }
    }

    /// Answers the parked readers of a stream that now have data (or an
    /// error); readers that still have nothing stay parked. Readers at the
    /// same offset and length share one read.
    fn wake_readers(&self, core: &Rc<Core>, id: &StreamId) {
        let ids = core.waiters.borrow().ids_of(id);
        if ids.is_empty() {
            return;
        }
        let now = core.now_ms();
        let mut shared: HashMap<(u64, usize, bool), Result<ReadReply>> = HashMap::new();
        for wid in ids {
            let Some(position) = core.waiters.borrow().position(wid) else { continue };
            let result = match shared.get(&position) {
                Some(r) => {
                    core.metrics.shared_read_hits.fetch_add(1, Relaxed);
                    r.clone()
                }
                None => {
                    let (offset, max_len, records) = position;
                    let read = Read { id: id.clone(), offset, max_len, records, stale: false };
                    let r = self.read_now(core, &read, now);
                    shared.insert(position, r.clone());
                    r
                }
            };
            if matches!(&result, Ok(r) if r.payload.is_empty() && !r.closed) {
                continue;
            }
            let removed = core.waiters.borrow_mut().remove(wid);
            core.metrics.live_waiters.store(core.waiters.borrow().len() as u64, Relaxed);
            if let Some(w) = removed {
                if let Some(h) = &w.watcher {
                    h.cancel();
                }
                self.answer(core, result.map(Reply::Read), w.reply, w.sent_at, LatencyKind::Read);
            }
        }
    }

    async fn install(&self, core: &Rc<Core>, snapshot: GroupSnapshot, tx: ReplyTx, sent_at: Instant) {
        let kind = LatencyKind::Other;
        let (group_count, current) = {
            let state = self.state.borrow();
            (state.group_count(), state.commit_index())
        };
        let decoded = GroupState::decode_snapshot(&snapshot.bytes, core.limits.group.clone()).and_then(|s| {
            if s.group() != self.id || s.group_count() != group_count {
                Err(Error::new(ErrorKind::PlacementMismatch {
                    group: self.id,
                    mismatch: Misplacement::ForeignSnapshot {
                        snapshot_group: s.group(),
                        snapshot_group_count: s.group_count(),
                        group_count,
                    },
                }))
            } else if s.commit_index() <= current {
                // The log orders a group's entries by commit index; a state
                // that does not move the group forward could not be told
                // apart from entries it already holds at recovery.
                Err(Error::bad_request(format!(
                    "snapshot at commit index {} is not ahead of the group's {current}",
                    s.commit_index()
                )))
            } else {
                Ok(s)
            }
        });
        let state = match decoded {
            Ok(s) => s,
            Err(err) => return self.answer(core, Err(err), tx, sent_at, kind),
        };
        // The state may name pack files; they must be here, and be the ones
        // it names, before reads can be pointed at them.
        let checked = match (&core.cold_store, state.cold().packs.is_empty()) {
            (_, true) => Ok(state),
            (None, false) => {
                Err(Error::bad_request("the snapshot names pack files and this engine has no cold tier"))
            }
            (Some(store), false) => {
                let dir = store.dir().path().to_path_buf();
                crate::local::blocking::run(move || {
                    crate::packs::check_pack_files(&dir, &state).map(|()| state)
                })
                .await
            }
        };
        let state = match checked {
            Ok(s) => s,
            Err(err) => return self.answer(core, Err(err), tx, sent_at, kind),
        };
        let index = state.commit_index();
        // The installed state is logged by reference: it becomes the group's
        // checkpoint (written, synced, renamed, directory synced) before the
        // log records that it happened, so no record ever has to hold a
        // whole group (a group at its hot limit is as large as the log's
        // largest record). Holding the checkpoint lock keeps a checkpoint
        // run from renaming an older state of the group over it.
        let written = {
            let _no_checkpoint_run = core.checkpoint_lock.lock().await;
            let (dir, id, bytes) = (core.checkpoint_dir.clone(), self.id, snapshot.bytes.clone());
            let written = crate::local::blocking::run(move || {
                write_checkpoint(&dir, id, &bytes)?;
                sync_dir(&dir)
            })
            .await;
            if written.is_ok() {
                self.state.replace(state);
                self.checkpointed_index.set(index);
            }
            written
        };
        if let Err(err) = written {
            return self.answer(core, Err(err), tx, sent_at, kind);
        }
        self.account(core, &Ok(Response::Touched { renewed: false }));
        let effects: Vec<Effect> =
            core.waiters.borrow().streams_of_group(self.id).into_iter().map(Effect::Advanced).collect();
        let digest = *blake3::hash(&snapshot.bytes).as_bytes();
        let entry = LogEntry { group: self.id, index, body: EntryBody::InstallRef(digest) };
        match core.commit.submit(entry).await {
            Ok(lsn) => {
                self.last_lsn.set(lsn);
                let reply =
                    PendingReply { tx, result: Ok(Reply::Installed { commit_index: index }), sent_at, kind };
                core.commit.after(
                    core,
                    Pending { lsn, group: self.id, reply: Some(reply), effects, uncommitted: 0 },
                );
            }
            Err(err) => {
                let _ = tx.send(Err(err));
            }
        }
    }
}

/// Enforces a parked reader's timeout and notices its cancellation.
async fn watch(core: Rc<Core>, wid: WaiterId, timeout: Duration) {
    let sleep = Box::pin(glommio::timer::sleep(timeout));
    let cancelled = Box::pin(std::future::poll_fn(|cx| match core.waiters.borrow_mut().get_mut(wid) {
        Some(w) => w.reply.poll_canceled(cx),
        None => Poll::Ready(()),
    }));
    let timed_out = matches!(select(sleep, cancelled).await, Either::Left(_));
    let Some(w) = core.waiters.borrow_mut().remove(wid) else { return };
    core.metrics.live_waiters.store(core.waiters.borrow().len() as u64, Relaxed);
    if !timed_out {
        return; // the caller dropped its future: nothing to answer
    }
    let Some(group) = core.groups.get(&w.group) else { return };
    let read = Read { id: w.stream.clone(), offset: w.offset, max_len: w.max_len, records: w.records, stale: false };
    let result = group.read_now(&core, &read, core.now_ms());
    group.answer(&core, result.map(Reply::Read), w.reply, w.sent_at, LatencyKind::Read);
}
