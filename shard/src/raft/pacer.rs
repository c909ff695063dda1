//! [`Pacer`]: one timer per core drives the heartbeats of every group the
//! core leads, instead of a timer per group.
//!
//! With openraft's own heartbeats off (`paced`), a replica that leads sends
//! heartbeats only when the pacer triggers them; the pacer triggers every
//! leading group of its core in one executor turn each interval, so the
//! heartbeats of all of them are queued together and the transport's
//! writer sends them to each peer in one frame. The pacer also turns
//! openraft's election tick off where no election can be due (leaders,
//! and followers that heard their leader lately; see [`Pacer::run`]).
//! Invariants: the interval is below the election timeout, so a leader that
//! is alive and connected is never deposed for silence; a replica whose
//! leader fell silent ticks again before its election timer can expire
//! (with the default timings), so gating the tick never starts an election
//! early and delays none by more than one interval.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use super::balance::{hand_over, LeaderView};
use super::net::transport::Heard;
use super::rt::{sleep, RtInstant};
use super::state_machine::GroupRaft;
use super::types::NodeId;

/// Leaders are checked against their group's preferred node every this
/// many rounds (1 s at the default 100 ms).
const BALANCE_EVERY: u64 = 10;
/// A group is not moved again within this many rounds of a transfer.
const BALANCE_COOL_DOWN: u64 = 100;
/// At most this many transfers per core and balancing round, so a node
/// that comes back takes its groups back gradually.
const BALANCE_MOST: usize = 4;

/// One replica the pacer drives.
#[derive(Debug, Clone)]
struct Paced {
    group: u32,
    raft: GroupRaft,
    heard: Option<Heard>,
    moved_at: Cell<Option<u64>>,
}

/// This node, for handing leadership to each group's preferred node
/// among the group's current voters.
#[derive(Debug, Clone)]
struct Balance {
    me: NodeId,
}

/// The heartbeat timer of one core.
#[derive(Debug)]
pub struct Pacer {
    groups: RefCell<Vec<Rc<Paced>>>,
    balance: RefCell<Option<Balance>>,
    interval: Duration,
    rounds: Cell<u64>,
    beats: Cell<u64>,
    transfers: Cell<u64>,
    stopped: Cell<bool>,
}

/// `config` with openraft's own heartbeat timer off, for replicas a
/// [`Pacer`] drives.
///
/// openraft also ticks every replica at 13/64 of its `heartbeat_interval`
/// to check the election timer (and its own heartbeat timer, off here).
/// With the heartbeats paced, that interval only sets the tick, so it is
/// raised to make a tick about a fifth of the shortest election timeout
/// (60 ms for 300 ms): elections stay randomised over the same range,
/// each one at most a tick later, and an idle core handles several times
/// fewer ticks (measured by `rill-bench cluster --only idle`). It stays
/// below the election timeout, as openraft requires; its append-entries
/// RPC timeout, which openraft also takes from it, only grows.
pub fn paced(config: &Arc<openraft::Config>) -> Arc<openraft::Config> {
    let mut config = (**config).clone();
    config.enable_heartbeat = false;
    let election_min = config.election_timeout_min;
    let slow_tick = (election_min * 64 / 13 / 5).min(election_min.saturating_sub(1)).max(1);
    config.heartbeat_interval = config.heartbeat_interval.max(slow_tick);
    Arc::new(config)
}

impl Pacer {
    /// A pacer that beats every `interval` (the configured heartbeat).
    pub fn new(interval: Duration) -> Rc<Pacer> {
        Rc::new(Pacer {
            groups: RefCell::new(Vec::new()),
            balance: RefCell::new(None),
            interval,
            rounds: Cell::new(0),
            beats: Cell::new(0),
            transfers: Cell::new(0),
            stopped: Cell::new(false),
        })
    }

    /// Hands each group's leadership to its preferred node among the
    /// group's voters (`balance.rs`) when this node, `me`, leads it and that
    /// node is caught up: checked every [`BALANCE_EVERY`] rounds. A group
    /// in the middle of a membership change (a joint or an uncommitted
    /// membership) stays where it is.
    pub fn balance_leaders(&self, me: NodeId) {
        *self.balance.borrow_mut() = Some(Balance { me });
    }

    /// Adds replica `group` of this core; as a follower it always ticks.
    pub fn add(&self, group: u32, raft: GroupRaft) {
        self.groups.borrow_mut().push(Rc::new(Paced { group, raft, heard: None, moved_at: Cell::new(None) }));
    }

    /// Adds replica `group` of this core, whose transport records when it
    /// last heard its leader (`TcpNet::heard`): as a follower it ticks
    /// only after two quiet intervals.
    pub fn add_heard(&self, group: u32, raft: GroupRaft, heard: Heard) {
        let paced = Paced { group, raft, heard: Some(heard), moved_at: Cell::new(None) };
        self.groups.borrow_mut().push(Rc::new(paced));
    }

    /// Leadership transfers the balancer asked for so far.
    pub fn transfers(&self) -> u64 {
        self.transfers.get()
    }

    /// Where `paced`, which this node leads, should go now, if anywhere.
    fn hand_over_to(&self, paced: &Paced, round: u64, done: usize) -> Option<NodeId> {
        use openraft::async_runtime::WatchReceiver;
        let balance = self.balance.borrow();
        let balance = balance.as_ref()?;
        if !round.is_multiple_of(BALANCE_EVERY) || done >= BALANCE_MOST {
            return None;
        }
        if paced.moved_at.get().is_some_and(|at| round < at + BALANCE_COOL_DOWN) {
            return None;
        }
        let metrics = paced.raft.metrics();
        let m = metrics.borrow_watched();
        let membership = m.membership_config.membership();
        let changing = m.membership_config.log_id() != m.committed_membership_config.log_id();
        if changing || membership.get_joint_config().len() > 1 {
            return None;
        }
        let voters: Vec<NodeId> = membership.voter_ids().collect();
        let matched = m.replication.as_ref()?.iter().map(|(node, at)| (*node, at.map(|l| l.index))).collect();
        hand_over(paced.group, balance.me, &voters, &LeaderView { last_log: m.last_log_index, matched })
    }

    /// Rounds run and heartbeats triggered so far.
    pub fn counts(&self) -> (u64, u64) {
        (self.rounds.get(), self.beats.get())
    }

    /// Ends [`Pacer::run`] at its next round.
    pub fn stop(&self) {
        self.stopped.set(true);
    }

    /// Triggers the heartbeats of every leading replica each interval,
    /// until stopped.
    ///
    /// Each round it also decides which replicas run openraft's tick,
    /// which only serves to start elections. A leader never needs it (its
    /// tick checks an election timer that does not apply to it and a
    /// heartbeat timer that is off, `paced`). A follower that accepted an
    /// append or heartbeat from its leader within the last two intervals
    /// does not need it either: its own election timer, which openraft
    /// keeps whether it ticks or not, cannot expire before its tick is back,
    /// since that happens within three intervals of the last heartbeat,
    /// which is no later than the shortest election timeout with the
    /// defaults (100 ms, 300 ms; with other timings an election may start
    /// up to one interval later, never earlier). Every other replica
    /// (candidate, follower of a silent leader or of none, or one whose
    /// transport does not record `heard`) ticks. So an idle core's ticks
    /// are paid only where an election may be due.
    pub async fn run(self: Rc<Self>) {
        use openraft::async_runtime::WatchReceiver;
        let mut ticking: Vec<bool> = Vec::new();
        while !self.stopped.get() {
            sleep(self.interval).await;
            let groups: Vec<Rc<Paced>> = self.groups.borrow().clone();
            ticking.resize(groups.len(), true);
            let now = RtInstant::now();
            let round = self.rounds.get();
            let mut moved = 0;
            for (paced, ticks) in groups.iter().zip(ticking.iter_mut()) {
                let raft = &paced.raft;
                let leading = raft.metrics().borrow_watched().state == openraft::ServerState::Leader;
                let hears = paced
                    .heard
                    .as_ref()
                    .and_then(|h| h.get())
                    .is_some_and(|at| now.since_origin().saturating_sub(at.since_origin()) < self.interval * 2);
                let tick = !leading && !hears;
                if *ticks != tick {
                    raft.runtime_config().tick(tick);
                    *ticks = tick;
                }
                if !leading {
                    continue;
                }
                if raft.trigger().heartbeat().await.is_ok() {
                    self.beats.set(self.beats.get() + 1);
                }
                if let Some(to) = self.hand_over_to(paced, round, moved) {
                    if raft.trigger().transfer_leader(to).await.is_ok() {
                        paced.moved_at.set(Some(round));
                        self.transfers.set(self.transfers.get() + 1);
                        moved += 1;
                    }
                }
            }
            self.rounds.set(self.rounds.get() + 1);
        }
    }
}
