//! [`Pacer`]: one timer per core drives the heartbeats of every group the
//! core leads, instead of a timer per group.
//!
//! With openraft's own heartbeats off (`paced`), a replica that leads sends
//! heartbeats only when the pacer triggers them; the pacer triggers every
//! leading group of its core in one executor turn each interval, so the
//! heartbeats of all of them are queued together and the transport's
//! writer sends them to each peer in one frame. Invariant: the interval is
//! below the election timeout, so a leader that is alive and connected is
//! never deposed for silence.

use std::cell::{Cell, RefCell};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use super::state_machine::GroupRaft;
use super::rt::sleep;

/// The heartbeat timer of one core.
#[derive(Debug)]
pub struct Pacer {
    groups: RefCell<Vec<GroupRaft>>,
    interval: Duration,
    rounds: Cell<u64>,
    beats: Cell<u64>,
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
            interval,
            rounds: Cell::new(0),
            beats: Cell::new(0),
            stopped: Cell::new(false),
        })
    }

    /// Adds a replica of this core.
    pub fn add(&self, raft: GroupRaft) {
        self.groups.borrow_mut().push(raft);
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
    pub async fn run(self: Rc<Self>) {
        use openraft::async_runtime::WatchReceiver;
        while !self.stopped.get() {
            sleep(self.interval).await;
            let groups: Vec<GroupRaft> = self.groups.borrow().clone();
            for raft in groups {
                let leading = raft.metrics().borrow_watched().state == openraft::ServerState::Leader;
                if leading && raft.trigger().heartbeat().await.is_ok() {
                    self.beats.set(self.beats.get() + 1);
                }
            }
            self.rounds.set(self.rounds.get() + 1);
        }
    }
}
