//! The core worker: everything that runs on one pinned executor.
//!
//! A core owns a disjoint set of groups. Its **dispatcher** task drains the
//! core's mailbox and files each request into its group's local queue; one
//! **group task** per group takes requests from that queue one at a time and
//! applies them to the group's state machine, so a group never needs a lock
//! and its mutations happen in commit order. Anything a group waits on (its
//! log submission, a parked reader) suspends only that group's task: the
//! other groups of the core keep running. An **acker** task releases replies
//! once the core's log reports them durable (see [`commit`]); an **expiry**
//! task asks groups with due deadlines to drop expired streams.
//!
//! Invariants: a group's state is touched only by its own task (and, for
//! read-only answers to timed-out readers, by the watcher tasks of the same
//! core); every reply leaves through [`commit::Commit`], which never lets a
//! caller see a mutation before the log made it durable.

pub mod calls;
pub mod checkpoint;
pub mod cold;
pub mod commit;
pub mod envelope;
pub mod group_task;
pub mod log_pressure;
pub mod mailbox;
mod members;
mod queues;
mod raft_log;
mod replicated;
pub mod spin;
pub mod waiters;

use std::cell::{Cell, RefCell};
use std::collections::{HashMap, VecDeque};
use std::path::PathBuf;
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures::channel::oneshot;

use crate::error::{Error, ErrorKind, Misplacement};
use crate::limits::Limits;
use crate::local::{blocking, yield_now, LocalSignal};
use crate::metrics::{CoreMetrics, GroupMetrics};
use crate::state::command::Op;
use crate::state::group::GroupState;
use crate::wal::log::LogFactory;

use self::commit::Commit;
use self::envelope::{BatchReplies, Envelope, LetterBatch, Mail, ReplyTx, Request};
use self::group_task::Group;
use self::mailbox::MailboxReceiver;
use self::waiters::Waiters;
use crate::packs::{ColdStore, PackDir};
use crate::protocol::checkpoint::CheckpointConfig;
use crate::protocol::cold::ColdConfig;

/// Wall-clock milliseconds, injectable for tests and simulation.
pub type Clock = Arc<dyn Fn() -> u64 + Send + Sync>;

/// The system clock in Unix milliseconds.
pub fn system_clock() -> Clock {
    Arc::new(|| {
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_millis() as u64)
    })
}

/// Everything a core needs, handed to its thread.
pub struct CoreSpec {
    /// The core's index.
    pub core: usize,
    /// The groups homed on this core: recovered state and shared metrics.
    pub groups: Vec<(GroupState, Arc<GroupMetrics>)>,
    /// When to checkpoint (None: never).
    pub checkpoint: Option<CheckpointConfig>,
    /// The checkpoint directory.
    pub checkpoint_dir: PathBuf,
    /// The cold tier (None: everything stays hot).
    pub cold: Option<ColdConfig>,
    /// The pack-file directory.
    pub pack_dir: Arc<dyn PackDir>,
    /// The core's counters (shared with the engine handle).
    pub metrics: Arc<CoreMetrics>,
    /// The runtime limits.
    pub limits: Limits,
    /// Builds the core's log on its thread.
    pub log_factory: LogFactory,
    /// The receiving end of the core's mailbox.
    pub mailbox: MailboxReceiver,
    /// The wall clock commands are stamped with.
    pub clock: Clock,
    /// A replicated node's consensus for this core's groups (None: every
    /// group is a one-replica state machine).
    pub cluster: Option<crate::raft::node::CoreCluster>,
}

impl std::fmt::Debug for CoreSpec {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CoreSpec")
            .field("core", &self.core)
            .field("groups", &self.groups.len())
            .finish_non_exhaustive()
    }
}

/// One core's runtime state, shared by its tasks (single-threaded).
pub struct Core {
    pub(crate) id: usize,
    pub(crate) limits: Limits,
    pub(crate) metrics: Arc<CoreMetrics>,
    pub(crate) clock: Clock,
    pub(crate) groups: HashMap<u32, Rc<Group>>,
    pub(crate) waiters: RefCell<Waiters>,
    pub(crate) commit: Commit,
    pub(crate) stopping: Cell<bool>,
    pub(crate) checkpoint: Option<CheckpointConfig>,
    pub(crate) checkpoint_dir: PathBuf,
    pub(crate) checkpoint_lock: futures::lock::Mutex<()>,
    pub(crate) cold_config: Option<ColdConfig>,
    pub(crate) cold_store: Option<Arc<ColdStore>>,
    pub(crate) cold_lock: futures::lock::Mutex<()>,
    /// The core's consensus, when its groups are replicated.
    pub(crate) replicas: Option<crate::raft::node::CoreReplicas>,
}

impl std::fmt::Debug for Core {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Core").field("id", &self.id).finish_non_exhaustive()
    }
}

impl Core {
    pub(crate) fn now_ms(&self) -> u64 {
        (self.clock)()
    }

    /// Fetches a cold piece through the core's pack cache.
    pub(crate) fn fetch_cold(&self, piece: &crate::state::group::ColdPiece) -> crate::error::Result<bytes::Bytes> {
        match &self.cold_store {
            Some(store) => store.fetch(piece),
            None => crate::state::group::read::hot_only(piece),
        }
    }
}

impl crate::state::group::ColdRecords for Core {
    fn with_records<R>(
        &self,
        file: &str,
        slice: u32,
        f: impl FnOnce(Option<rill_cold::RecordIndex<'_>>) -> R,
    ) -> crate::error::Result<R> {
        match &self.cold_store {
            Some(store) => store.with_records(file, slice, f),
            None => crate::state::group::HotOnly.with_records(file, slice, f),
        }
    }
}

/// Runs one core until it is told to stop or every sender is gone. Must be
/// called inside the core's glommio executor.
pub async fn run_core(spec: CoreSpec) {
    let CoreSpec {
        core,
        groups,
        checkpoint: checkpoint_spec,
        checkpoint_dir,
        cold: cold_config,
        pack_dir,
        metrics,
        limits,
        log_factory,
        mailbox,
        clock,
        cluster,
    } = spec;
    let mailbox = mailbox.with_spin(limits.spin);
    let cold_store = cold_config.as_ref().map(|c| Arc::new(ColdStore::new(pack_dir, c.cache_bytes)));
    let log: Rc<dyn crate::wal::log::LogStore> = Rc::from(log_factory(core));
    let pins = Rc::new(RefCell::new(crate::protocol::pins::WalPins::new()));
    let mut by_id = HashMap::new();
    let (mut replicas, mut failed) = (None, None);
    match cluster {
        None => {
            for (state, group_metrics) in groups {
                let id = state.group();
                by_id.insert(id, Rc::new(Group::new(id, state, group_metrics)));
            }
        }
        Some(cluster) => {
            let mut states = std::collections::BTreeMap::new();
            let mut metrics_of = HashMap::new();
            for (state, group_metrics) in groups {
                metrics_of.insert(state.group(), group_metrics);
                states.insert(state.group(), state);
            }
            match crate::raft::node::start_core(core, cluster, states, log.clone(), pins.clone()).await {
                Ok(started) => {
                    for (id, replica) in &started.replicas {
                        let group_metrics = metrics_of.remove(id).unwrap_or_default();
                        by_id.insert(*id, Rc::new(Group::replicated(*id, replica.clone(), group_metrics)));
                    }
                    replicas = Some(started);
                }
                Err(err) => {
                    tracing::error!(core, error = %err, "the core's replicas did not start; it refuses every request");
                    failed = Some(err);
                }
            }
        }
    }
    let core = Rc::new(Core {
        id: core,
        limits,
        metrics,
        clock,
        groups: by_id,
        waiters: RefCell::new(Waiters::default()),
        commit: Commit::new(core, log, pins),
        stopping: Cell::new(false),
        checkpoint: checkpoint_spec,
        checkpoint_dir,
        checkpoint_lock: futures::lock::Mutex::new(()),
        cold_config,
        cold_store,
        cold_lock: futures::lock::Mutex::new(()),
        replicas,
    });
    if let Some(err) = failed {
        core.commit.fail(err);
    }
    for group in core.groups.values() {
        group.forward_effects(&core);
    }

    let mut tasks = Vec::new();
    for group in core.groups.values() {
        let (c, g) = (core.clone(), group.clone());
        tasks.push(glommio::spawn_local(async move { g.run(c).await }).detach());
    }
    let c = core.clone();
    tasks.push(glommio::spawn_local(async move { c.commit.run_acker(&c).await }).detach());
    let c = core.clone();
    tasks.push(glommio::spawn_local(async move { expiry_loop(c).await }).detach());
    let c = core.clone();
    tasks.push(glommio::spawn_local(async move { log_pressure::checkpoint_loop(c).await }).detach());
    let c = core.clone();
    tasks.push(glommio::spawn_local(async move { cold::cold_loop(c).await }).detach());
    if core.replicas.is_some() {
        let c = core.clone();
        let every = Duration::from_millis(200);
        tasks.push(glommio::spawn_local(async move { replicated::publish_raft_metrics(c, every).await }).detach());
        let c = core.clone();
        tasks.push(glommio::spawn_local(async move { raft_log::raft_log_loop(c).await }).detach());
    }

    let done = dispatch_loop(&core, &mailbox).await;
    stop(&core).await;
    for task in &tasks {
        task.cancel();
    }
    drop(tasks);
    // The WAL's own tasks go with the core; then let blocking work that
    // cancelled tasks left behind finish before the executor returns.
    drop(core);
    blocking::wait_idle(Duration::from_secs(30)).await;
    if let Some(done) = done {
        let _ = done.send(());
    }
}

/// Drains the mailbox into group queues until told to stop. Returns the
/// shutdown acknowledgement to complete, if any.
async fn dispatch_loop(core: &Rc<Core>, mailbox: &MailboxReceiver) -> Option<oneshot::Sender<()>> {
    let mut batch = Vec::with_capacity(core.limits.dispatch_batch);
    loop {
        if !mailbox.recv_batch(&mut batch, core.limits.dispatch_batch, || core.commit.waiting()).await {
            return None;
        }
        for mail in batch.drain(..) {
            match mail {
                Mail::Request(letter) => {
                    route(core, Envelope::from(*letter), Admission::Check);
                }
                Mail::Batch(batch) => route_batch(core, *batch),
                Mail::Checkpoint(done) if core.replicas.is_some() => {
                    let _ = done.send(Err(replicated_refusal("checkpoint")));
                }
                Mail::Cold(_, done) if core.replicas.is_some() => {
                    let _ = done.send(Err(replicated_refusal("cold flush")));
                }
                Mail::Checkpoint(done) => {
                    let c = core.clone();
                    glommio::spawn_local(async move {
                        let _ = done.send(checkpoint::checkpoint(&c).await);
                    })
                    .detach();
                }
                Mail::Cold(job, done) => {
                    let c = core.clone();
                    glommio::spawn_local(async move {
                        let _ = done.send(cold::run_job(&c, job, true).await);
                    })
                    .detach();
                }
                Mail::Shutdown(done) => return Some(done),
                Mail::Spawn(task) => {
                    glommio::spawn_local((task.0)()).detach();
                }
            }
        }
        // Let the group tasks just fed run before taking more mail, so a
        // flood of mail cannot starve them until the preemption timer.
        yield_now().await;
    }
}

/// What an administrative job a replicated core does not run answers: its
/// groups checkpoint as raft snapshots and keep every byte hot.
fn replicated_refusal(job: &str) -> Error {
    Error::bad_request(format!("a {job} on demand is not available on a replicated node"))
}

/// Whether [`route`] checks the group's queue depth.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Admission {
    /// Refuse with `Overloaded` when the group's queue is full.
    Check,
    /// Already admitted (a later item of a batch whose group took the first).
    Admitted,
}

/// Files a batch's items into their groups' queues, in order, each
/// answering into its slot of one reply. A group's queue depth is checked
/// once per batch, at its first item: a group takes all of a batch's items
/// or none (each then `Overloaded`), so items for one stream never land
/// out of order with a gap. A batch is bounded by `max_batch_items`.
fn route_batch(core: &Rc<Core>, batch: LetterBatch) {
    let LetterBatch { items, reply, sent_at } = batch;
    let replies = BatchReplies::new(items.len(), reply);
    let mut decided: Vec<(u32, bool)> = Vec::new();
    for (index, (group, request)) in items.into_iter().enumerate() {
        let env = Envelope { group, request, reply: replies.slot(index), sent_at };
        let admission = match decided.iter().find(|(g, _)| *g == group) {
            Some(&(_, true)) => Admission::Admitted,
            Some(&(_, false)) => {
                let err = overloaded(core);
                env.reply.send(Err(err));
                continue;
            }
            None => {
                let took = route(core, env, Admission::Check);
                decided.push((group, took));
                continue;
            }
        };
        route(core, env, admission);
    }
}

fn overloaded(core: &Core) -> Error {
    core.metrics.overloaded_events.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    Error::new(ErrorKind::Overloaded { core: core.id, capacity: core.limits.group_queue_depth })
}

/// Files one envelope into its group's queue (or answers it at once);
/// true when the group took it.
fn route(core: &Rc<Core>, env: Envelope, admission: Admission) -> bool {
    let Some(group) = core.groups.get(&env.group) else {
        let err = Error::new(ErrorKind::PlacementMismatch {
            group: env.group,
            mismatch: Misplacement::NotHomed { reached: core.id },
        });
        env.reply.send(Err(err));
        return false;
    };
    core.metrics.routed_requests.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    group.metrics.routed_requests.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    if admission == Admission::Check
        && group.queue_len() >= core.limits.group_queue_depth
        && !matches!(env.request, Request::Mutate(Op::ExpireDue))
    {
        env.reply.send(Err(overloaded(core)));
        return false;
    }
    group.push(env);
    true
}

/// Periodically renews TTL streams with parked readers, asks groups with
/// a due expiry to remove expired streams, and reclaims what streams'
/// retention policies allow.
async fn expiry_loop(core: Rc<Core>) {
    let interval = Duration::from_millis(core.limits.expiry_sweep_interval_ms);
    loop {
        glommio::timer::sleep(interval).await;
        let now = core.now_ms();
        for group in core.groups.values() {
            // A parked live reader is reading: keep its TTL stream renewed
            // (SPEC §2: a stream never expires while it is being read).
            let parked = core.waiters.borrow().streams_of_group(group.id);
            for id in parked {
                if group.state.borrow().renewal_due(&id, now) {
                    let request = Request::Mutate(Op::Touch(id));
                    group.push(Envelope {
                        group: group.id,
                        request,
                        reply: ReplyTx::Nowhere,
                        sent_at: std::time::Instant::now(),
                    });
                }
            }
            // Retention policies (SPEC §2 "Consumption-driven retention"):
            // a reclaim for each stream whose policy may take something,
            // unless the group is busy (the next sweep asks again). One
            // that only cold records could age out costs a lookup in the
            // packs, so it is asked at most every 1/64 of its age (at least
            // a second): the reclaim lags the age by under 2%.
            if group.queue_len() < core.limits.group_queue_depth / 2 {
                let due = group.state.borrow().reclaim_due(now);
                let mut checks = group.cold_age_checks.borrow_mut();
                let cold: std::collections::HashSet<&crate::StreamId> =
                    due.iter().filter(|(_, cold)| cold.is_some()).map(|(id, _)| id).collect();
                checks.retain(|id, _| cold.contains(id));
                for (id, cold_age) in due {
                    if let Some(age) = cold_age {
                        if checks.get(&id).is_some_and(|next| *next > now) {
                            continue;
                        }
                        checks.insert(id.clone(), now + (age / 64).max(1_000));
                    }
                    group.push(Envelope {
                        group: group.id,
                        request: Request::Reclaim(id),
                        reply: ReplyTx::Nowhere,
                        sent_at: std::time::Instant::now(),
                    });
                }
            }
            let due = group.state.borrow().next_expiry_ms().is_some_and(|at| at <= now);
            if due && !group.expiry_queued.get() {
                group.expiry_queued.set(true);
                group.push(Envelope {
                    group: group.id,
                    request: Request::Mutate(Op::ExpireDue),
                    reply: ReplyTx::Nowhere,
                    sent_at: std::time::Instant::now(),
                });
            }
        }
    }
}

/// Stops the core: fails queued requests and parked readers, and waits a
/// bounded time for acknowledgements already in flight.
async fn stop(core: &Rc<Core>) {
    core.stopping.set(true);
    for group in core.groups.values() {
        for env in group.drain_queue() {
            let _ = env.reply.send(Err(Error::new(ErrorKind::ShuttingDown)));
        }
    }
    let parked = core.waiters.borrow_mut().drain_all();
    core.metrics.live_waiters.store(0, std::sync::atomic::Ordering::Relaxed);
    for w in parked {
        if let Some(watcher) = &w.watcher {
            watcher.cancel();
        }
        let _ = w.reply.send(Err(Error::new(ErrorKind::ShuttingDown)));
    }
    core.commit.drain(core, Duration::from_secs(5)).await;
    if core.checkpoint.as_ref().is_some_and(|c| c.on_shutdown) && core.commit.failure().is_none() {
        if let Err(err) = checkpoint::checkpoint(core).await {
            tracing::error!(core = core.id, error = %err, "checkpoint at shutdown failed");
        }
    }
    if let Some(replicas) = &core.replicas {
        // Stop consensus and close the connections, so peers see this node
        // go (an engine reopened in the same process must not leave them
        // talking to a socket nobody reads).
        replicas.pacer.stop();
        let replicas_down = futures::future::join_all(replicas.replicas.values().map(|r| r.shutdown()));
        if glommio::timer::timeout(Duration::from_secs(5), async { Ok(replicas_down.await) }).await.is_err() {
            tracing::warn!(core = core.id, "raft replicas did not stop within 5 s");
        }
        replicas.net.close_all();
    }
}

/// A FIFO of envelopes with a signal, one per group.
#[derive(Debug, Default)]
pub(crate) struct Queue {
    items: RefCell<VecDeque<Envelope>>,
    signal: LocalSignal,
}

impl Queue {
    pub(crate) fn push(&self, env: Envelope) {
        self.items.borrow_mut().push_back(env);
        self.signal.notify();
    }

    pub(crate) fn len(&self) -> usize {
        self.items.borrow().len()
    }

    pub(crate) async fn pop(&self) -> Envelope {
        self.signal.wait_until(|| self.items.borrow_mut().pop_front()).await
    }

    pub(crate) fn drain(&self) -> Vec<Envelope> {
        self.items.borrow_mut().drain(..).collect()
    }
}
