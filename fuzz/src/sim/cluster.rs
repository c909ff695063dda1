//! The replicated-group simulation: one group of three founding voters
//! (node slots for up to five), each node with its own journal, over the
//! in-memory network, in virtual time, driven by a seeded list of
//! operations ([`plan`]): client writes and reads at random nodes, network
//! isolations and heals, crashes that lose what a replica's journal had not
//! made durable, and membership changes (add a fresh node, remove a voter,
//! replace a voter with a fresh node) asked through
//! `membership::change_here` wherever the client finds the leader. Every
//! run is a pure function of its seed and of which of its operations run
//! ([`ClusterConfig::keep`], what the shrinker, `super::cluster_shrink`,
//! reduces).
//!
//! Membership: a joiner starts empty (it never initializes the group) and
//! catches up as a learner. A change that runs out of its time (the group
//! may be left in the joint configuration) is asked again, unchanged, by
//! the next membership step and at the end, until it succeeds; a crash may
//! land in the middle of one. When a change that removes a node succeeds,
//! the node is stopped for good: it leaves the convergence and end checks,
//! but what it applied must still be a prefix of what every other replica
//! applied (`not-a-prefix`). A change that would leave fewer than two
//! voters must be refused and change nothing.
//!
//! Checks, after every step and at the end (once every replica is back,
//! the network healed, an unfinished change finished, a write acknowledged
//! and the replicas converged, and again after every node lost power at
//! once and restarted); "every replica" is every node in play, removed
//! nodes aside:
//!
//! * `not-a-prefix`: of what any two replicas applied, one is a prefix of
//!   the other (state-machine safety; openraft orders leaders by
//!   `(term, node)`, so one term may see two leaders, one after the other);
//! * `stale-read`: a linearizable read never returns a tail below the
//!   tail of a write acknowledged before the read began;
//! * `acked-lost`: every acknowledged write is in the stream exactly once,
//!   in acknowledgement order (the client is sequential, so that is
//!   real-time order);
//! * `phantom`: a write refused with `NotLeader` never appears, nor does
//!   anything never proposed;
//! * `same-index`: whatever is seen at one applied log index, a replica's
//!   state after any step or the checkpoint a replica restarts from, holds
//!   the same writes (the state after a committed entry is one);
//! * `vote-lost`: a restarted replica's journal holds a vote at least as
//!   high as every vote it was seen to grant (`MemNet` notes the grants);
//! * `recovery`: a crashed replica's journal rebuilds a log, that log is
//!   not purged past the checkpoint it restarts from, and the replica
//!   starts;
//! * `diverged`: converged replicas hold byte-identical group state;
//! * `membership`: a change that returns has made exactly the voters it
//!   leads to, committed and uniform; a change that would leave one voter
//!   is refused; at the end every replica's membership is the voters the
//!   client's last successful change led to, committed, with no joint
//!   configuration and no other member;
//! * `no-convergence`: within 20 virtual seconds of the heal, an unfinished
//!   change finishes, a write at the leader is acknowledged (the quorum of
//!   the voters now commits) and every replica applies the leader's whole
//!   log (clean runs of a soak of 500 seeds of 300 steps took at most
//!   3.6 s).
//!
//! Replicas checkpoint every 4 to 24 entries (drawn per run) into a
//! checkpoint slot on the same simulated device, keep 0 to 11 entries below
//! it and purge the rest, so restarts start from checkpoints and lagging
//! replicas catch up by snapshot.
//!
//! The network drops up to 5% of requests and replies (a rate drawn per
//! run), delays each message by up to 30 ms (a bound drawn per run), so
//! concurrent messages reorder, and delivers up to 5% of appends and votes
//! a second time, later; isolations cut whole links. Elections time out
//! after 300 to 600 ms, or, one run in four, an election storm: barely
//! more than a vote's round trip (two syncs and two message delays), from
//! a narrow range, so candidates of one term compete.
//!
//! The journal models a device that takes a sync period drawn per run
//! (2 to 20 ms of virtual time, or 50 to 150 ms one run in four) to sync:
//! a record is durable once a sync that began after it was written has
//! finished; a crash keeps the durable records and, in half the runs, a
//! random part of the rest (written back without a sync). A checkpoint
//! takes two syncs (its file's and its directory's) and only a finished one
//! survives a crash. A panic inside openraft (its own invariant checks) is
//! a failure too (`panic`).

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::rc::Rc;
use std::time::Duration;

use bytes::Bytes;
use rill_shard::planted::{self, Bug};
use rill_shard::raft::checkpoint::{CheckpointStore, RaftCheckpoint};
use rill_shard::raft::journal::RaftJournal;
use rill_shard::raft::log_image::LogImage;
use rill_shard::raft::mem_net::MemNet;
use rill_shard::raft::membership::{self, change_here, GroupMembers, MemberChange};
use rill_shard::raft::replica::{restore, timings, GroupReplica, ReplicaStart};
use rill_shard::raft::rt::{sleep, RtInstant};
use rill_shard::raft::sim::run_seed;
use rill_shard::raft::types::{Member, NodeId, StoredMembership};
use rill_shard::raft::wire::RaftRecord;
use rill_shard::rng::Rng;
use rill_shard::state::api::{Append, Create, Read};
use rill_shard::state::command::{Command, Op, Response};
use rill_shard::state::group::{GroupLimits, GroupState};
use rill_shard::wal::log::{LocalFuture, Lsn};
use rill_shard::{ErrorCode, StreamId};

/// The founding voters, nodes 1 to 3.
const FOUNDERS: u64 = 3;
/// Node slots of a run: the founders and up to two fresh nodes that join.
const SLOTS: u64 = 5;
/// A write's payload: `w` and its sequence number, 8 bytes.
const PAYLOAD_LEN: usize = 8;

/// What a run found wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterFailure {
    /// The step (position in the operations run) it was found at; the
    /// number of operations run for the end checks.
    pub step: usize,
    pub check: &'static str,
    pub detail: String,
}

/// One step of a run, with its own random choices, so a subset of a run's
/// operations replays deterministically (see [`ClusterConfig::keep`]).
///
/// A node is named by `at`, a number below [`PICK`]: at run time it picks
/// one of the nodes in play (founders and joiners not yet removed), `at *
/// count / PICK`, so with the three founders it is the node the old
/// `below(3)` draw named.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ClusterOp {
    /// A client write at node `at`, or, with `believed`, at the node `at`
    /// believes leads.
    Write { at: u8, believed: bool },
    /// A linearizable read at node `at`.
    Read { at: u8 },
    /// Node `at` cut off from the others.
    Isolate { at: u8 },
    /// Every link restored.
    Heal,
    /// Node `at` crashes `delay` (reduced below three sync periods) from
    /// now, if every node is up.
    Crash { at: u8, delay: u64 },
    /// Every crashed node restarts.
    Restart,
    /// Time passes.
    Wait { ms: u64 },
    /// A membership change, asked of whichever node leads (following
    /// `NotLeader` as a client would) within `bound_ms` of virtual time. An
    /// unfinished change is asked again, as it was, by the next `Member`
    /// step (and at the end) until it succeeds; otherwise `change` says
    /// what: `pick` chooses the voter to remove or replace (as `at` does,
    /// among the voters), a joiner is the lowest node id not yet used.
    /// With `crash`, node `crash.0` (as `at`) crashes `crash.1` ms into
    /// the change, if every node is up.
    Member { change: MemberOp, pick: u8, bound_ms: u64, crash: Option<(u8, u64)> },
}

/// Which membership change a [`ClusterOp::Member`] asks for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MemberOp {
    /// A fresh node joins as a voter.
    Add,
    /// A voter leaves (refused with `BadRequest` at two voters).
    Remove,
    /// A fresh node takes a voter's place.
    Replace,
}

/// Node choices are drawn below this, a multiple of every count of nodes
/// in play (2 to 5).
pub const PICK: u64 = 60;

/// The chance, in thousandths, that a step is a membership change (drawn
/// from a stream of its own and inserted before the next operation, so
/// the other operations of a seed stay what they were without them).
const MEMBER_PER_MILLE: u64 = 40;

/// The operations of seed `seed`: drawn from their own random stream, so
/// the run's other choices (timings, faults) do not depend on them.
pub fn plan(seed: u64, ops: usize) -> Vec<ClusterOp> {
    let mut rng = Rng::new(seed ^ 0x636c_7573_7465_7221);
    let mut members = Rng::new(seed ^ 0x6d65_6d62_6572_7321);
    (0..ops)
        .map(|_| {
            if members.below(1000) < MEMBER_PER_MILLE {
                let change = match members.below(10) {
                    0..=3 => MemberOp::Replace,
                    4..=6 => MemberOp::Add,
                    _ => MemberOp::Remove,
                };
                let pick = members.below(PICK) as u8;
                // Mostly time enough to finish; sometimes too little, so a
                // change stops half way (a joint configuration in force).
                let bound_ms = if members.below(4) == 0 { 50 + members.below(400) } else { 3_000 };
                let crash = (members.below(3) == 0).then(|| (members.below(PICK) as u8, members.below(200)));
                return ClusterOp::Member { change, pick, bound_ms, crash };
            }
            let at = rng.below(PICK) as u8;
            match rng.below(100) {
                0..=44 => ClusterOp::Write { at, believed: rng.below(10) < 7 },
                45..=59 => ClusterOp::Read { at },
                60..=67 => ClusterOp::Isolate { at },
                68..=77 => ClusterOp::Heal,
                78..=82 => ClusterOp::Crash { at, delay: rng.next_u64() },
                83..=89 => ClusterOp::Restart,
                _ => ClusterOp::Wait { ms: 1 + rng.below(800) },
            }
        })
        .collect()
}

/// What to run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClusterConfig {
    pub seed: u64,
    /// Operations generated from the seed.
    pub ops: usize,
    pub bug: Option<Bug>,
    /// Run only these of the generated operations (indexes, ascending):
    /// a shrunk run.
    pub keep: Option<Vec<usize>>,
}

impl ClusterConfig {
    /// Every operation of `seed`, with `bug` planted.
    pub fn new(seed: u64, ops: usize, bug: Option<Bug>) -> Self {
        ClusterConfig { seed, ops, bug, keep: None }
    }
}

/// What a run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ClusterStats {
    pub acked: usize,
    pub unknown: usize,
    pub refused: usize,
    pub reads: usize,
    pub crashes: usize,
    pub elections: u64,
    /// Checkpoints written (each lets a replica purge its log below it).
    pub checkpoints: usize,
    /// Crashes aimed at a vote, a purge or a checkpoint in flight.
    pub aimed_crashes: usize,
    /// Membership changes that succeeded, that ran out of time (asked
    /// again later), and that were refused (`BadRequest`: two voters left).
    pub changes: usize,
    pub changes_unfinished: usize,
    pub changes_refused: usize,
    /// Crashes in the middle of a membership change.
    pub change_crashes: usize,
    /// The longest the cluster took to converge at the end, in virtual
    /// milliseconds (of a limit of 20 s).
    pub converge_ms: u64,
    /// BLAKE3 of the converged state and of every outcome, in order.
    pub digest: [u8; 32],
}

/// A journal whose device takes `sync` of virtual time per sync, and the
/// replica's checkpoint slot on the same device, whose writes take two
/// syncs (the file's and its directory's), so a journal record written
/// after a checkpoint began can be durable before the checkpoint is. A
/// crash bumps the epoch: a sync or a checkpoint write that began before it
/// does not finish.
#[derive(Debug)]
struct SimJournal {
    records: RefCell<Vec<RaftRecord>>,
    durable: Cell<usize>,
    sync: Duration,
    epoch: Cell<u64>,
    checkpoint: RefCell<Option<Vec<u8>>>,
    checkpoints_written: Cell<usize>,
    /// Aimed crashes: when the replica writes a vote or a purge, or starts
    /// a checkpoint, the device dies within two syncs with this chance in
    /// thousandths (while no other replica is down), losing what it had
    /// not made durable; the replica's storage then fails until a restart.
    aim_per_mille: u64,
    /// Whether a crash keeps a random part of what was written but not
    /// synced (a device that writes back on its own), so a record can
    /// outlive an unfinished checkpoint begun before it.
    writeback: bool,
    rng: RefCell<Rng>,
    dead: Cell<bool>,
    /// Replicas down right now, shared by the journals of a run.
    down: Rc<Cell<usize>>,
    /// Whether aimed crashes may happen now (only during the steps, not
    /// while the cluster forms or converges at the end).
    aiming: Rc<Cell<bool>>,
}

impl SimJournal {
    fn new(
        sync: Duration,
        aim_per_mille: u64,
        writeback: bool,
        seed: u64,
        down: Rc<Cell<usize>>,
        aiming: Rc<Cell<bool>>,
    ) -> Self {
        SimJournal {
            records: RefCell::new(Vec::new()),
            durable: Cell::new(0),
            sync,
            epoch: Cell::new(0),
            checkpoint: RefCell::new(None),
            checkpoints_written: Cell::new(0),
            aim_per_mille,
            writeback,
            rng: RefCell::new(Rng::new(seed)),
            dead: Cell::new(false),
            down,
            aiming,
        }
    }

    fn dead_error() -> rill_shard::Error {
        rill_shard::Error::io("simulated device", std::io::Error::other("the replica crashed"))
    }

    /// Maybe dies within two syncs from now (see `aim_per_mille`).
    fn aim(self: &Rc<Self>) {
        if !self.aiming.get()
            || self.dead.get()
            || self.down.get() > 0
            || self.rng.borrow_mut().below(1000) >= self.aim_per_mille
        {
            return;
        }
        let delay = Duration::from_millis(self.rng.borrow_mut().below(2 * self.sync.as_millis() as u64 + 1));
        self.doom(delay);
    }

    /// The device dies `delay` from now, losing what it had not made
    /// durable; it counts as down from now on.
    fn doom(self: &Rc<Self>, delay: Duration) {
        self.down.set(self.down.get() + 1);
        let journal = self.clone();
        glommio::spawn_local(async move {
            sleep(delay).await;
            journal.crash();
            journal.dead.set(true);
        })
        .detach();
    }
}

impl SimJournal {
    fn save(&self, _group: u32, bytes: Vec<u8>) -> LocalFuture<'_, rill_shard::Result<()>> {
        Box::pin(async move {
            if self.dead.get() {
                return Err(SimJournal::dead_error());
            }
            let epoch = self.epoch.get();
            sleep(2 * self.sync).await;
            if self.epoch.get() != epoch {
                return Err(rill_shard::Error::io(
                    "checkpoint",
                    std::io::Error::other("the replica crashed"),
                ));
            }
            *self.checkpoint.borrow_mut() = Some(bytes);
            self.checkpoints_written.set(self.checkpoints_written.get() + 1);
            Ok(())
        })
    }
}

/// The journal as the replica holds it (the aimed crash needs the `Rc`).
#[derive(Debug, Clone)]
struct DeviceJournal(Rc<SimJournal>);

impl RaftJournal for DeviceJournal {
    fn write<'a>(&'a self, _group: u32, record: &'a RaftRecord) -> LocalFuture<'a, rill_shard::Result<Lsn>> {
        if self.0.dead.get() {
            return Box::pin(std::future::ready(Err(SimJournal::dead_error())));
        }
        let lsn = {
            let mut records = self.0.records.borrow_mut();
            records.push(record.clone());
            records.len() as Lsn
        };
        if matches!(record, RaftRecord::Vote(_) | RaftRecord::Purge { .. }) {
            self.0.aim();
        }
        Box::pin(std::future::ready(Ok(lsn)))
    }

    fn wait_durable(&self, lsn: Lsn) -> LocalFuture<'_, rill_shard::Result<()>> {
        self.0.wait_durable(lsn)
    }
}

impl CheckpointStore for DeviceJournal {
    fn save(&self, group: u32, bytes: Vec<u8>) -> LocalFuture<'_, rill_shard::Result<()>> {
        self.0.aim();
        self.0.save(group, bytes)
    }
}

impl SimJournal {
    fn wait_durable(&self, lsn: Lsn) -> LocalFuture<'_, rill_shard::Result<()>> {
        Box::pin(async move {
            while (self.durable.get() as Lsn) < lsn {
                if self.dead.get() {
                    return Err(SimJournal::dead_error());
                }
                let (upto, epoch) = (self.records.borrow().len(), self.epoch.get());
                sleep(self.sync).await;
                if self.epoch.get() != epoch {
                    return Err(rill_shard::Error::io("sync", std::io::Error::other("the replica crashed")));
                }
                self.durable.set(self.durable.get().max(upto));
            }
            Ok(())
        })
    }
}

impl SimJournal {
    /// A crash: what was not durable is gone (with `writeback`, all but a
    /// random prefix of it, which the device wrote back on its own);
    /// returns the encoded records that remain, as recovery would read
    /// them.
    fn crash(&self) -> Vec<Vec<u8>> {
        self.epoch.set(self.epoch.get() + 1);
        let mut records = self.records.borrow_mut();
        let durable = self.durable.get();
        let kept = match self.writeback {
            true => durable + self.rng.borrow_mut().below((records.len() - durable) as u64 + 1) as usize,
            false => durable,
        };
        records.truncate(kept);
        self.durable.set(kept);
        records.iter().map(RaftRecord::encode).collect()
    }
}

/// Where a node slot is in a run's life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Slot {
    /// Never started: a fresh node a change may bring in.
    Unborn,
    /// In play: a founder, or a node started to join (crashed or not).
    Live,
    /// Removed from the group by a change that succeeded, and stopped for
    /// good.
    Gone,
}

struct Node {
    id: NodeId,
    journal: Rc<SimJournal>,
    replica: Option<GroupReplica>,
    slot: Slot,
}

impl Node {
    fn live(&self) -> bool {
        self.slot == Slot::Live
    }
}

/// Node `id`'s addresses (unused by `MemNet`; a joiner's must be host:port).
fn member(id: NodeId) -> Member {
    Member { raft_addr: format!("127.0.0.1:{}", 7000 + id), http_addr: String::new() }
}

/// The founding members: nodes 1 to 3.
fn members() -> BTreeMap<NodeId, Member> {
    (1..=FOUNDERS).map(|n| (n, member(n))).collect()
}

/// How a run's replicas time their heartbeats and elections.
#[derive(Clone, Copy, Debug)]
struct Timing {
    heartbeat_ms: u64,
    election_ms: (u64, u64),
    /// Checkpoint every this many entries, keeping that many below it.
    snapshots: (u64, u64),
}

async fn start(
    net: &MemNet,
    node: &mut Node,
    image: LogImage,
    boot: u64,
    timing: Timing,
) -> Result<(), String> {
    let limits = GroupLimits::default();
    let purged = image.last_purged().map(|id| id.index);
    let (state, applied, membership, snapshot) = match &*node.journal.checkpoint.borrow() {
        Some(bytes) => {
            let checkpoint = RaftCheckpoint::decode(bytes).map_err(|e| e.to_string())?;
            let (state, applied, membership, snapshot) =
                restore(&checkpoint, &limits).map_err(|e| e.to_string())?;
            (state, applied, membership, Some(snapshot))
        }
        None => (GroupState::new(0, 1, limits), None, StoredMembership::default(), None),
    };
    // The log continues the checkpoint: nothing between them is lost.
    if purged > applied.map(|id| id.index) {
        return Err(format!(
            "its log is purged through index {purged:?}, past its checkpoint at {:?}",
            applied.map(|id| id.index)
        ));
    }
    let start = ReplicaStart {
        group: 0,
        node: node.id,
        boot,
        state,
        applied,
        membership,
        image,
        journal: Rc::new(DeviceJournal(node.journal.clone())),
        config: timings(timing.heartbeat_ms, timing.election_ms, Some(timing.snapshots))
            .expect("valid timings"),
        timeout: Duration::from_secs(1),
        checkpoints: Some(Rc::new(DeviceJournal(node.journal.clone()))),
        snapshot,
        book: None,
    };
    let replica = GroupReplica::start(start, net.factory(node.id)).await.map_err(|e| e.to_string())?;
    net.attach(node.id, replica.raft().clone());
    node.replica = Some(replica);
    Ok(())
}

fn stream() -> StreamId {
    StreamId::new("sim", "s").expect("a valid name")
}

fn append(seq: u64) -> Op {
    let payload = format!("w{seq:07}");
    Op::from(Append::new(stream(), Bytes::from(payload.into_bytes())))
}

fn tail(state: &GroupState) -> u64 {
    state.stream(&stream()).map_or(0, |s| s.next_offset())
}

/// The write sequence numbers in the stream, in order.
fn written(state: &GroupState) -> Result<Vec<u64>, String> {
    if state.stream(&stream()).is_none() {
        return Ok(Vec::new());
    }
    let len = tail(state) as usize;
    let reply = state
        .read(&Read::new(stream()).max_len(len.max(1)), 0)
        .map_err(|e| format!("the stream does not read back: {e}"))?;
    let bytes = reply.payload;
    if bytes.len() != len || !len.is_multiple_of(PAYLOAD_LEN) {
        return Err(format!("the stream holds {} bytes, not whole writes", bytes.len()));
    }
    bytes
        .chunks(PAYLOAD_LEN)
        .map(|chunk| {
            std::str::from_utf8(&chunk[1..])
                .ok()
                .and_then(|digits| digits.parse().ok())
                .filter(|_| chunk[0] == b'w')
                .ok_or_else(|| format!("not a write: {chunk:?}"))
        })
        .collect()
}

/// A converged replica's encoded state and the writes its stream holds.
type ReplicaEnd = (Vec<u8>, Result<Vec<u64>, String>);

struct Run {
    net: MemNet,
    nodes: Vec<Node>,
    acked: Vec<(u64, u64)>,
    refused: Vec<u64>,
    stats: ClusterStats,
    /// Every `(term, node)` seen leading.
    leaders: BTreeSet<(u64, NodeId)>,
    outcome: blake3::Hasher,
    boots: u64,
    timing: Timing,
    /// Per node, the highest vote `(term, candidate)` it was seen to grant:
    /// a restart must find at least that vote in its journal.
    granted: BTreeMap<NodeId, (u64, NodeId)>,
    /// Whether a crashed replica restarts at the start of the next step
    /// (drawn per run), rather than at the next restart step.
    prompt_restarts: bool,
    /// The writes seen at each applied index, by any replica or checkpoint.
    at_index: std::collections::HashMap<u64, Vec<u64>>,
    /// The voters the client's last successful change led to (the
    /// founders before any): what every replica must end up with.
    voters: BTreeSet<NodeId>,
    /// A change whose outcome is unknown (it ran out of time), and the
    /// voters it leads to: asked again until it succeeds.
    pending: Option<(MemberChange, BTreeSet<NodeId>)>,
    /// What each node was last seen to apply; a removed node's last stays
    /// in the prefix check.
    seen: BTreeMap<NodeId, Vec<u64>>,
    /// Removed nodes, stopped for good.
    gone: BTreeSet<NodeId>,
}

impl Run {
    fn fail(step: usize, check: &'static str, detail: String) -> ClusterFailure {
        ClusterFailure { step, check, detail }
    }

    /// After every step: counts each new leader (openraft orders leaders
    /// by `(term, node)`, so a term may see more than one), and checks
    /// state-machine safety: what any two replicas applied, one is a
    /// prefix of the other.
    fn check_step(&mut self, step: usize) -> Result<(), ClusterFailure> {
        let mut applied: Vec<(NodeId, Vec<u64>)> = Vec::new();
        let mut indexes = Vec::new();
        for node in &self.nodes {
            let Some(replica) = node.replica.as_ref().filter(|_| node.live()) else { continue };
            let status = replica.status();
            if status.leading && self.leaders.insert((status.term, node.id)) {
                self.stats.elections += 1;
            }
            let (index, writes) = replica.local(|s| (replica.applied().map(|id| id.index), written(s)));
            let writes = writes.map_err(|e| Self::fail(step, "not-a-prefix", e))?;
            indexes.push(index);
            applied.push((node.id, writes));
        }
        for ((id, writes), index) in applied.iter().zip(indexes) {
            if let Some(index) = index {
                self.same_index(step, index, writes, format_args!("node {id}"))?;
            }
        }
        // A removed node's last applied writes stay a prefix too; a crashed
        // node's are compared again once it is back.
        for (id, writes) in &applied {
            self.seen.insert(*id, writes.clone());
        }
        for id in &self.gone {
            if let Some(writes) = self.seen.get(id) {
                applied.push((*id, writes.clone()));
            }
        }
        for (i, (a, left)) in applied.iter().enumerate() {
            for (b, right) in &applied[i + 1..] {
                let n = left.len().min(right.len());
                if left[..n] != right[..n] {
                    let at = (0..n).find(|k| left[*k] != right[*k]).unwrap_or(n);
                    return Err(Self::fail(
                        step,
                        "not-a-prefix",
                        format!("nodes {a} and {b} applied different writes at position {at}"),
                    ));
                }
            }
        }
        Ok(())
    }

    async fn write(&mut self, at: usize, seq: u64) {
        let Some(replica) = &self.nodes[at].replica else { return };
        let result = replica.propose(Command { now_ms: 1, op: append(seq) }).await;
        self.trace(format_args!("write {seq} at node {}: {:?}", at + 1, result.as_ref().map(|a| &a.result)));
        match result {
            Ok(applied) => match applied.result {
                Ok(Response::Append(reply)) => {
                    self.acked.push((seq, reply.start_offset));
                    self.stats.acked += 1;
                    self.outcome.update(&reply.start_offset.to_le_bytes());
                }
                other => {
                    self.outcome.update(format!("{other:?}").as_bytes());
                }
            },
            Err(e) if e.code() == ErrorCode::NotLeader => {
                self.refused.push(seq);
                self.stats.refused += 1;
                self.outcome.update(b"not-leader");
            }
            Err(e) => {
                self.stats.unknown += 1;
                self.outcome.update(e.code().as_str().as_bytes());
            }
        }
    }

    async fn read(&mut self, at: usize, step: usize) -> Result<(), ClusterFailure> {
        let Some(replica) = &self.nodes[at].replica else { return Ok(()) };
        let floor = self.acked.last().map_or(0, |(_, offset)| offset + PAYLOAD_LEN as u64);
        self.stats.reads += 1;
        let result = replica.read(tail).await;
        self.trace(format_args!("read at node {}: {result:?}", at + 1));
        if let Ok(seen) = result {
            self.outcome.update(&seen.to_le_bytes());
            if seen < floor {
                return Err(Self::fail(
                    step,
                    "stale-read",
                    format!("node {} read a tail of {seen} after a write acknowledged up to {floor}", at + 1),
                ));
            }
        }
        Ok(())
    }

    async fn crash(&mut self, at: usize) {
        let Some(replica) = self.nodes[at].replica.take() else { return };
        self.net.detach(self.nodes[at].id);
        replica.shutdown().await;
        drop(replica);
        let journal = &self.nodes[at].journal;
        if !journal.dead.get() {
            journal.down.set(journal.down.get() + 1);
        }
        journal.crash();
        self.stats.crashes += 1;
        self.trace(format_args!("crash node {}", at + 1));
    }

    async fn restart(&mut self, at: usize) -> Result<(), ClusterFailure> {
        if !self.nodes[at].live() {
            return Ok(());
        }
        let journal = self.nodes[at].journal.clone();
        if journal.dead.get() {
            // An aimed crash: the device died under the running replica.
            if let Some(replica) = self.nodes[at].replica.take() {
                self.net.detach(self.nodes[at].id);
                replica.shutdown().await;
                self.stats.crashes += 1;
                self.stats.aimed_crashes += 1;
            }
            journal.dead.set(false);
        } else if self.nodes[at].replica.is_some() {
            return Ok(());
        }
        let down = journal.down.get();
        journal.down.set(down.saturating_sub(1));
        let records = journal.crash();
        let image = LogImage::rebuild(&records)
            .map_err(|e| Self::fail(0, "recovery", format!("node {} does not recover: {e}", at + 1)))?;
        self.note_grants();
        let id = self.nodes[at].id;
        let checkpoint = journal.checkpoint.borrow().clone();
        if let Some(bytes) = checkpoint {
            let seen = RaftCheckpoint::decode(&bytes).and_then(|c| {
                restore(&c, &GroupLimits::default()).map(|(state, applied, ..)| (state, applied))
            });
            if let Ok((state, Some(applied))) = seen {
                let writes = written(&state).map_err(|e| Self::fail(0, "recovery", e))?;
                self.same_index(0, applied.index, &writes, format_args!("node {id}'s checkpoint"))?;
            }
        }
        let vote = image.vote().map(|v| (v.leader_id.term, v.leader_id.node_id));
        if let Some(granted) = self.granted.get(&id).filter(|g| vote < Some(**g)) {
            return Err(Self::fail(
                0,
                "vote-lost",
                format!("node {id} granted a vote for {granted:?} but restarts with {vote:?}"),
            ));
        }
        self.boots += 1;
        let boot = self.boots;
        start(&self.net, &mut self.nodes[at], image, boot, self.timing)
            .await
            .map_err(|e| Self::fail(0, "recovery", format!("node {} does not recover: {e}", at + 1)))?;
        self.trace(format_args!("restart node {}", at + 1));
        Ok(())
    }

    /// Checks that whatever was seen at applied index `index` (a replica's
    /// state, or a checkpoint's) holds `writes`, as everything seen there
    /// before did: the state after a given committed entry is one.
    fn same_index(
        &mut self,
        step: usize,
        index: u64,
        writes: &[u64],
        what: std::fmt::Arguments<'_>,
    ) -> Result<(), ClusterFailure> {
        match self.at_index.get(&index) {
            Some(seen) if seen.as_slice() != writes => Err(Self::fail(
                step,
                "same-index",
                format!(
                    "{what} holds {} writes at applied index {index}, where {} were seen before",
                    writes.len(),
                    seen.len()
                ),
            )),
            Some(_) => Ok(()),
            None => {
                self.at_index.insert(index, writes.to_vec());
                Ok(())
            }
        }
    }

    /// Takes the votes granted since the last call into `granted`.
    fn note_grants(&mut self) {
        for (voter, vote) in self.net.take_grants() {
            let vote = (vote.leader_id.term, vote.leader_id.node_id);
            let highest = self.granted.entry(voter).or_insert(vote);
            *highest = (*highest).max(vote);
        }
    }

    fn trace(&self, what: std::fmt::Arguments<'_>) {
        if std::env::var_os("RILL_CLUSTER_TRACE").is_some() {
            let statuses: Vec<String> = self
                .nodes
                .iter()
                .map(|n| match &n.replica {
                    Some(r) => {
                        let s = r.status();
                        format!(
                            "{}:t{}{}l{:?}a{:?}",
                            n.id,
                            s.term,
                            if s.leading { "L" } else { "" },
                            s.last_log,
                            s.applied
                        )
                    }
                    None => format!("{}:down", n.id),
                })
                .collect();
            eprintln!(
                "{:>10?} {what} [{}]",
                rill_shard::raft::rt::RtInstant::now().since_origin(),
                statuses.join(" ")
            );
        }
    }

    async fn step(&mut self, step: usize, op: ClusterOp, seq: &mut u64) -> Result<(), ClusterFailure> {
        if self.prompt_restarts {
            for i in 0..self.nodes.len() {
                self.restart(i).await.map_err(|f| Self::fail(step, f.check, f.detail))?;
            }
        }
        match op {
            ClusterOp::Write { at, believed } => {
                *seq += 1;
                // Mostly where the client believes the leader is (as a
                // client redirected by NotLeader would), else anywhere.
                let at = self.pick(at);
                let leader = self.nodes[at].replica.as_ref().and_then(|r| r.status().leader);
                let at = match leader.and_then(|l| self.slot_of(l)) {
                    Some(leader) if believed => leader,
                    _ => at,
                };
                self.write(at, *seq).await;
            }
            ClusterOp::Read { at } => {
                let at = self.pick(at);
                self.read(at, step).await?
            }
            ClusterOp::Isolate { at } => {
                let id = self.nodes[self.pick(at)].id;
                self.net.isolate(id, (1..=SLOTS).filter(|n| *n != id));
                self.trace(format_args!("isolate node {id}"));
            }
            ClusterOp::Heal => {
                self.net.heal();
                self.trace(format_args!("heal"));
            }
            ClusterOp::Crash { at, delay } => {
                // At most one replica down at a time keeps a quorum possible;
                // the crash lands a little after whatever is in flight.
                let at = self.pick(at);
                if self.all_up() {
                    let sync_ms = self.nodes[at].journal.sync.as_millis() as u64;
                    sleep(Duration::from_millis(delay % (3 * sync_ms + 1))).await;
                    self.crash(at).await;
                }
            }
            ClusterOp::Restart => {
                for i in 0..self.nodes.len() {
                    self.restart(i).await.map_err(|f| Self::fail(step, f.check, f.detail))?;
                }
            }
            ClusterOp::Wait { ms } => sleep(Duration::from_millis(ms)).await,
            ClusterOp::Member { change, pick, bound_ms, crash } => {
                self.member(step, change, pick, Duration::from_millis(bound_ms), crash).await?
            }
        }
        self.check_step(step)
    }

    /// The node slot `at` (below [`PICK`]) picks among the nodes in play.
    fn pick(&self, at: u8) -> usize {
        let live: Vec<usize> = (0..self.nodes.len()).filter(|i| self.nodes[*i].live()).collect();
        live[at as usize * live.len() / PICK as usize]
    }

    /// Node `id`'s slot, if it is in play.
    fn slot_of(&self, id: NodeId) -> Option<usize> {
        let slot = (id as usize).checked_sub(1)?;
        self.nodes.get(slot).filter(|n| n.live()).map(|_| slot)
    }

    /// Whether every node in play runs on a live device.
    fn all_up(&self) -> bool {
        self.nodes.iter().filter(|n| n.live()).all(|n| n.replica.is_some() && !n.journal.dead.get())
    }

    /// A membership change step (see [`ClusterOp::Member`]).
    async fn member(
        &mut self,
        step: usize,
        op: MemberOp,
        pick: u8,
        bound: Duration,
        crash: Option<(u8, u64)>,
    ) -> Result<(), ClusterFailure> {
        let (change, target) = match self.pending.clone() {
            Some(pending) => pending,
            None => {
                let voters: Vec<NodeId> = self.voters.iter().copied().collect();
                let chosen = voters[pick as usize * voters.len() / PICK as usize];
                let fresh = self.nodes.iter().find(|n| n.slot == Slot::Unborn).map(|n| n.id);
                let change = match (op, fresh) {
                    (MemberOp::Add, Some(id)) => MemberChange::Add { id, member: member(id) },
                    (MemberOp::Replace, Some(id)) => {
                        MemberChange::Replace { old: chosen, id, member: member(id) }
                    }
                    (MemberOp::Remove, _) => MemberChange::Remove { id: chosen },
                    // Every node id is used.
                    (_, None) => return Ok(()),
                };
                match change.target(&self.voters) {
                    Ok(target) => (change, target),
                    Err(_) => return self.refused_change(step, change, bound).await,
                }
            }
        };
        // A joiner starts empty and never initializes the group: the
        // leader brings it in as a learner.
        if let Some((id, _)) = change.joiner() {
            let slot = id as usize - 1;
            if self.nodes[slot].slot == Slot::Unborn {
                self.nodes[slot].slot = Slot::Live;
                // A first start, not a restart: no node comes back up.
                let down = self.nodes[slot].journal.down.get();
                self.restart(slot).await.map_err(|f| Self::fail(step, f.check, f.detail))?;
                self.nodes[slot].journal.down.set(down);
                self.trace(format_args!("node {id} starts empty to join"));
            }
        }
        if let Some((at, delay)) = crash {
            let at = self.pick(at);
            if self.all_up() {
                self.stats.change_crashes += 1;
                self.nodes[at].journal.doom(Duration::from_millis(delay));
            }
        }
        self.trace(format_args!("change {change:?} (to voters {target:?})"));
        let outcome = self.ask_change(&change, bound).await;
        self.trace(format_args!("change {change:?}: {:?}", outcome.as_ref().map(|v| (&v.voters, v.joint))));
        self.change_outcome(step, change, target, outcome).await
    }

    /// What the client makes of a change's outcome: a success fixes the
    /// voters (and stops a removed node for good), an error but a refusal
    /// leaves the change to be asked again.
    async fn change_outcome(
        &mut self,
        step: usize,
        change: MemberChange,
        target: BTreeSet<NodeId>,
        outcome: rill_shard::Result<GroupMembers>,
    ) -> Result<(), ClusterFailure> {
        match outcome {
            Ok(view) => {
                if view.joint || !view.committed || view.voters != target {
                    return Err(Self::fail(
                        step,
                        "membership",
                        format!(
                            "{change:?} returned with voters {:?} (joint {}, committed {}), not {target:?}",
                            view.voters, view.joint, view.committed
                        ),
                    ));
                }
                self.stats.changes += 1;
                self.outcome.update(format!("changed to {target:?}").as_bytes());
                self.voters = target;
                self.pending = None;
                if let Some(old) = change.leaver() {
                    self.retire(old).await;
                }
                Ok(())
            }
            Err(e) if e.code() == ErrorCode::BadRequest => Err(Self::fail(
                step,
                "membership",
                format!("{change:?} from voters {:?} was refused: {e}", self.voters),
            )),
            Err(e) => {
                self.stats.changes_unfinished += 1;
                self.outcome.update(e.code().as_str().as_bytes());
                self.pending = Some((change, target));
                Ok(())
            }
        }
    }

    /// A change `target` refuses (it would leave fewer than two voters):
    /// the group must refuse it too, and change nothing.
    async fn refused_change(
        &mut self,
        step: usize,
        change: MemberChange,
        bound: Duration,
    ) -> Result<(), ClusterFailure> {
        self.stats.changes_refused += 1;
        match self.ask_change(&change, bound).await {
            Ok(view) => Err(Self::fail(
                step,
                "membership",
                format!("{change:?} from voters {:?} was made: {:?}", self.voters, view.voters),
            )),
            Err(e) => {
                self.outcome.update(e.code().as_str().as_bytes());
                Ok(())
            }
        }
    }

    /// Asks for `change` as a client would: at the node it believes leads,
    /// following `NotLeader`, trying the others when no leader is known,
    /// until `bound` of virtual time has passed.
    async fn ask_change(
        &mut self,
        change: &MemberChange,
        bound: Duration,
    ) -> rill_shard::Result<GroupMembers> {
        let started = RtInstant::now();
        let believed = self.nodes.iter().filter_map(|n| n.replica.as_ref()).find_map(|r| r.status().leader);
        let mut at = believed.and_then(|l| self.slot_of(l)).unwrap_or_else(|| self.pick(0));
        let mut last = None;
        loop {
            let left = bound.saturating_sub(RtInstant::now() - started);
            if left.is_zero() {
                return Err(last.unwrap_or_else(|| {
                    rill_shard::Error::new(rill_shard::ErrorKind::NoQuorum {
                        group: 0,
                        waited_ms: bound.as_millis() as u64,
                    })
                }));
            }
            let node = &self.nodes[at];
            let next = match node.replica.as_ref().filter(|_| !node.journal.dead.get()) {
                Some(replica) => {
                    let raft = replica.raft().clone();
                    match change_here(&raft, 0, node.id, change, left).await {
                        Ok(view) => return Ok(view),
                        Err(e) => {
                            let next = match e.kind() {
                                rill_shard::ErrorKind::NotLeader { leader: Some(leader), .. } => {
                                    self.slot_of(*leader).filter(|l| *l != at)
                                }
                                _ => None,
                            };
                            if e.code() == ErrorCode::BadRequest {
                                return Err(e);
                            }
                            last = Some(e);
                            next
                        }
                    }
                }
                None => None,
            };
            at = match next {
                Some(next) => next,
                None => {
                    // No leader known here: look elsewhere a little later.
                    let live: Vec<usize> = (0..self.nodes.len()).filter(|i| self.nodes[*i].live()).collect();
                    let k = live.iter().position(|i| *i == at).map_or(0, |k| (k + 1) % live.len());
                    live[k]
                }
            };
            sleep(Duration::from_millis(20)).await;
        }
    }

    /// Stops node `id`, removed from the group, for good.
    async fn retire(&mut self, id: NodeId) {
        let slot = id as usize - 1;
        let node = &mut self.nodes[slot];
        if node.replica.is_none() || node.journal.dead.get() {
            node.journal.down.set(node.journal.down.get().saturating_sub(1));
        }
        node.slot = Slot::Gone;
        if let Some(replica) = node.replica.take() {
            self.net.detach(id);
            replica.shutdown().await;
        }
        self.gone.insert(id);
        self.trace(format_args!("node {id} removed and stopped"));
    }

    /// Brings every node in play back, heals the network, finishes an
    /// unfinished change, has one write acknowledged (the quorum of the
    /// voters now) and waits until every replica applied the leader's whole
    /// log, all within 20 virtual seconds.
    async fn converge(&mut self, step: usize, seq: &mut u64) -> Result<(), ClusterFailure> {
        for i in 0..self.nodes.len() {
            self.restart(i).await.map_err(|f| Self::fail(step, f.check, f.detail))?;
        }
        self.net.heal();
        let started = RtInstant::now();
        let limit = Duration::from_secs(20);
        let mut wrote = false;
        while RtInstant::now() - started < limit {
            // A device an aimed crash doomed during the last steps may die
            // only now: bring its replica back too.
            for i in 0..self.nodes.len() {
                if self.nodes[i].journal.dead.get() {
                    self.restart(i).await.map_err(|f| Self::fail(step, f.check, f.detail))?;
                }
            }
            self.check_step(step)?;
            if let Some((change, target)) = self.pending.clone() {
                let outcome = self.ask_change(&change, Duration::from_secs(1)).await;
                self.trace(format_args!("finish {change:?}: {:?}", outcome.as_ref().map(|v| &v.voters)));
                self.change_outcome(step, change, target, outcome).await?;
                continue;
            }
            let statuses: Vec<_> = self
                .nodes
                .iter()
                .enumerate()
                .filter(|(_, n)| n.live())
                .filter_map(|(i, n)| n.replica.as_ref().map(|r| (i, r.status())))
                .collect();
            let leader = statuses.iter().find(|(_, s)| s.leading).copied();
            let statuses: Vec<_> = statuses.into_iter().map(|(_, s)| s).collect();
            if let Some((at, leader)) = leader {
                if !wrote {
                    *seq += 1;
                    let before = self.stats.acked;
                    self.write(at, *seq).await;
                    wrote = self.stats.acked > before;
                    if !wrote {
                        sleep(Duration::from_millis(10)).await;
                    }
                    continue;
                }
                if statuses.iter().all(|s| s.applied == leader.last_log && s.last_log == leader.last_log) {
                    let waited = (RtInstant::now() - started).as_millis() as u64;
                    self.stats.converge_ms = self.stats.converge_ms.max(waited);
                    return Ok(());
                }
            }
            sleep(Duration::from_millis(10)).await;
        }
        let statuses: Vec<_> =
            self.nodes.iter().filter_map(|n| n.replica.as_ref()).map(|r| r.status()).collect();
        let what = match (&self.pending, wrote) {
            (Some((change, _)), _) => format!("{change:?} did not finish"),
            (None, false) => "no write was acknowledged".to_string(),
            (None, true) => "the replicas did not catch up".to_string(),
        };
        Err(Self::fail(
            step,
            "no-convergence",
            format!("the healed cluster did not converge within 20 s ({what}): {statuses:?}"),
        ))
    }

    /// After convergence: every replica's membership is the voters the
    /// client's last successful change led to, committed, uniform (no
    /// joint configuration), with no other member.
    fn check_members(&self, step: usize) -> Result<(), ClusterFailure> {
        for node in self.nodes.iter().filter(|n| n.live()) {
            let Some(replica) = &node.replica else { continue };
            let view = membership::view(replica.raft(), 0);
            let nodes: BTreeSet<NodeId> = view.nodes.keys().copied().collect();
            if view.voters != self.voters || view.joint || !view.committed || nodes != self.voters {
                return Err(Self::fail(
                    step,
                    "membership",
                    format!(
                        "node {} holds voters {:?} (members {nodes:?}, joint {}, committed {}) where the client's changes led to {:?}",
                        node.id, view.voters, view.joint, view.committed, self.voters
                    ),
                ));
            }
        }
        Ok(())
    }

    fn final_checks(&mut self, step: usize) -> Result<(), ClusterFailure> {
        self.check_members(step)?;
        let ids: Vec<NodeId> =
            self.nodes.iter().filter(|n| n.live() && n.replica.is_some()).map(|n| n.id).collect();
        let states: Vec<ReplicaEnd> = self
            .nodes
            .iter()
            .filter(|n| n.live())
            .filter_map(|n| n.replica.as_ref())
            .map(|r| r.local(|s| (s.encode_snapshot(), written(s))))
            .collect();
        let first = &states[0].0;
        if let Some(i) = states.iter().position(|(bytes, _)| bytes != first) {
            return Err(Self::fail(
                step,
                "diverged",
                format!("node {} holds another group state than node {}", ids[i], ids[0]),
            ));
        }
        let writes = states[0].1.clone().map_err(|e| Self::fail(step, "acked-lost", e))?;
        let mut position = std::collections::HashMap::new();
        for (i, seq) in writes.iter().enumerate() {
            if position.insert(*seq, i).is_some() {
                return Err(Self::fail(step, "acked-lost", format!("write {seq} is in the stream twice")));
            }
        }
        let mut last = None;
        for (seq, offset) in &self.acked {
            let Some(&at) = position.get(seq) else {
                return Err(Self::fail(step, "acked-lost", format!("acknowledged write {seq} is missing")));
            };
            if at as u64 * PAYLOAD_LEN as u64 != *offset {
                return Err(Self::fail(
                    step,
                    "acked-lost",
                    format!("write {seq} acknowledged at {offset} sits at {}", at * PAYLOAD_LEN),
                ));
            }
            if last.is_some_and(|l| l >= at) {
                return Err(Self::fail(
                    step,
                    "acked-lost",
                    format!("write {seq} is out of acknowledgement order"),
                ));
            }
            last = Some(at);
        }
        for seq in &self.refused {
            if position.contains_key(seq) {
                return Err(Self::fail(
                    step,
                    "phantom",
                    format!("write {seq} was refused with NotLeader but landed"),
                ));
            }
        }
        self.stats.digest = *blake3::hash(first).as_bytes();
        Ok(())
    }
}

/// Runs `ops` steps of seed `seed` (with `bug` planted, if any).
pub fn run_cluster(seed: u64, ops: usize, bug: Option<Bug>) -> Result<ClusterStats, ClusterFailure> {
    run_cluster_with(&ClusterConfig::new(seed, ops, bug))
}

/// Runs what `config` says.
pub fn run_cluster_with(config: &ClusterConfig) -> Result<ClusterStats, ClusterFailure> {
    let (seed, bug) = (config.seed, config.bug);
    let all = plan(seed, config.ops);
    let ops: Vec<ClusterOp> = match &config.keep {
        Some(keep) => keep.iter().filter_map(|i| all.get(*i).copied()).collect(),
        None => all,
    };
    let count = ops.len();
    // The step running, for a panic's failure.
    let current = Rc::new(Cell::new(count));
    let at_step = current.clone();
    planted::plant(bug);
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        run_seed(seed, Duration::from_secs(24 * 3600), async move {
            let mut rng = Rng::new(seed);
            // Mostly a fast device; one run in four a slow one (50-150 ms
            // per sync), whose long windows a crash lands in more often.
            let sync_ms = if rng.below(4) == 0 { 50 + rng.below(101) } else { 2 + rng.below(19) };
            let sync = Duration::from_millis(sync_ms);
            let aim = if rng.below(2) == 0 { 0 } else { 50 + rng.below(251) };
            // In half the runs a crash keeps some of what was not synced.
            let writeback = rng.below(2) == 0;
            let down = Rc::new(Cell::new(0));
            let aiming = Rc::new(Cell::new(false));
            let mut journal_seed = rng.next_u64();
            let mut journal = || {
                journal_seed = journal_seed.wrapping_add(1);
                Rc::new(SimJournal::new(sync, aim, writeback, journal_seed, down.clone(), aiming.clone()))
            };
            let snapshots = (4 + rng.below(21), rng.below(12));
            let net = MemNet::new();
            // Per run: up to 5% of messages lost, each delayed up to 0-30 ms.
            let (net_seed, drop_per_mille, delay_ms) = (rng.next_u64(), rng.below(51), rng.below(31));
            net.set_faults(net_seed, drop_per_mille, delay_ms);
            // Up to 5% of appends and votes delivered twice.
            net.set_duplicates(rng.below(51));
            // One run in four an election storm: election timeouts barely
            // above a vote's round trip (two syncs, two message delays),
            // drawn from a narrow range, so elections often fail and
            // candidates of one term compete.
            let timing = if rng.below(4) == 0 {
                let min = 2 * sync_ms + 2 * delay_ms + 10 + rng.below(21);
                Timing {
                    heartbeat_ms: 5 + rng.below(6),
                    election_ms: (min, min + 5 + rng.below(21)),
                    snapshots,
                }
            } else {
                Timing { heartbeat_ms: 50, election_ms: (300, 600), snapshots }
            };
            let prompt_restarts = rng.below(2) == 0;
            let mut run = Run {
                net,
                nodes: (1..=SLOTS)
                    .map(|id| {
                        let slot = if id <= FOUNDERS { Slot::Live } else { Slot::Unborn };
                        Node { id, journal: journal(), replica: None, slot }
                    })
                    .collect(),
                acked: Vec::new(),
                refused: Vec::new(),
                stats: ClusterStats::default(),
                leaders: BTreeSet::new(),
                outcome: blake3::Hasher::new(),
                boots: 0,
                timing,
                granted: BTreeMap::new(),
                prompt_restarts,
                at_index: std::collections::HashMap::new(),
                voters: (1..=FOUNDERS).collect(),
                pending: None,
                seen: BTreeMap::new(),
                gone: BTreeSet::new(),
            };
            for i in 0..run.nodes.len() {
                run.restart(i).await?;
            }
            let first = run.nodes[0].replica.as_ref().expect("started");
            first
                .raft()
                .initialize(members())
                .await
                .map_err(|e| Run::fail(0, "initialize", e.to_string()))?;
            // The stream every write goes to, created before the faults start.
            let mut created = false;
            for _ in 0..200 {
                for node in run.nodes.iter().filter(|n| n.live()) {
                    let replica = node.replica.as_ref().expect("started");
                    let create = Op::from(Create::new(stream()));
                    let result = replica.propose(Command { now_ms: 1, op: create }).await;
                    run.trace(format_args!("create at node {}: {:?}", node.id, result.as_ref().map(|_| ())));
                    if result.is_ok() {
                        created = true;
                        break;
                    }
                }
                if created {
                    break;
                }
                sleep(Duration::from_millis(50)).await;
            }
            if !created {
                return Err(Run::fail(0, "no-convergence", "no leader took the first write".into()));
            }
            let mut seq = 0;
            aiming.set(true);
            for (step, op) in ops.into_iter().enumerate() {
                at_step.set(step);
                run.step(step, op, &mut seq).await?;
            }
            aiming.set(false);
            at_step.set(count);
            run.converge(count, &mut seq).await?;
            run.final_checks(count)?;
            // Then every node in play loses power at once and restarts from what its
            // device holds: the same history must come back.
            for i in 0..run.nodes.len() {
                run.crash(i).await;
            }
            run.converge(count, &mut seq).await?;
            run.final_checks(count)?;
            for node in &run.nodes {
                if let Some(replica) = &node.replica {
                    replica.shutdown().await;
                }
            }
            let mut stats = run.stats.clone();
            stats.checkpoints = run.nodes.iter().map(|n| n.journal.checkpoints_written.get()).sum();
            let outcomes = run.outcome.finalize();
            let mut digest = blake3::Hasher::new();
            digest.update(&stats.digest);
            digest.update(outcomes.as_bytes());
            stats.digest = *digest.finalize().as_bytes();
            Ok(stats)
        })
    }));
    planted::plant(None);
    match outcome {
        Ok(Some(result)) => result,
        Ok(None) => Err(Run::fail(count, "no-convergence", "the run did not end in virtual time".into())),
        Err(panic) => Err(Run::fail(current.get(), "panic", crate::sim::panic_message(&*panic))),
    }
}
