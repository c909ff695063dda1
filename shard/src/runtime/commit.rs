//! Acknowledgement after durability: the core's log and its queue of
//! replies waiting for it.
//!
//! Every reply of a core leaves through [`Commit::after`] with the LSN it
//! depends on: a mutation's own LSN, or, for anything else a group answers,
//! the last LSN that group submitted (so a read never shows bytes a crash
//! could take back). A reply whose LSN is already durable, with nothing
//! queued ahead of it, goes out at once; otherwise it queues in submission
//! order and the acker task releases it when the log's durable LSN covers
//! it. Effects of a mutation (waking live readers) are released the same
//! way, so a parked reader is never woken by bytes that are not yet durable.
//! If the log fails, the core is failed: queued replies that are not durable
//! get the error, and every later submission fails with it.

use std::cell::RefCell;
use std::collections::VecDeque;
use std::rc::Rc;
use std::time::{Duration, Instant};

use super::envelope::{Reply, ReplyTx};
use super::Core;
use crate::error::Result;
use crate::local::LocalSignal;
use crate::protocol::pins::WalPins;
use crate::state::command::Effect;
use crate::wal::log::{LogEntry, LogStore, Lsn};

/// Which latency histogram a reply feeds.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LatencyKind {
    Append,
    Read,
    Other,
}

/// A reply (and/or effects) waiting for durability.
#[derive(Debug)]
pub struct Pending {
    pub lsn: Lsn,
    pub group: u32,
    pub reply: Option<PendingReply>,
    pub effects: Vec<Effect>,
    /// Payload bytes this entry held uncommitted in its group.
    pub uncommitted: u64,
}

/// The reply part of a [`Pending`].
#[derive(Debug)]
pub struct PendingReply {
    pub tx: ReplyTx,
    pub result: Result<Reply>,
    pub sent_at: Instant,
    pub kind: LatencyKind,
}

/// A core's log plus the replies waiting on it.
#[derive(Debug)]
pub struct Commit {
    log: std::rc::Rc<dyn LogStore>,
    /// Which records each group still needs (`protocol/pins.rs`), shared
    /// with a replicated core's raft journal.
    pins: std::rc::Rc<RefCell<WalPins>>,
    queue: RefCell<VecDeque<Pending>>,
    signal: LocalSignal,
    core: usize,
    failed: RefCell<Option<crate::error::Error>>,
}

impl Commit {
    pub fn new(core: usize, log: std::rc::Rc<dyn LogStore>, pins: std::rc::Rc<RefCell<WalPins>>) -> Self {
        Commit {
            log,
            pins,
            queue: RefCell::new(VecDeque::new()),
            signal: LocalSignal::default(),
            core,
            failed: RefCell::new(None),
        }
    }

    /// True while replies or effects wait for the log (a flush is in
    /// flight or about to start).
    pub fn waiting(&self) -> bool {
        !self.queue.borrow().is_empty()
    }

    /// Submits an entry to the log. After an error the core is failed:
    /// this and every later submission get [`ErrorKind::Poisoned`] naming
    /// the failure.
    ///
    /// [`ErrorKind::Poisoned`]: crate::error::ErrorKind::Poisoned
    pub async fn submit(&self, entry: LogEntry<'_>) -> Result<Lsn> {
        if let Some(err) = self.poisoned() {
            return Err(err);
        }
        // Pinned before the LSN is assigned, at a bound no higher than it.
        self.pins.borrow_mut().submitting(entry.group, self.log.last_lsn() + 1);
        match self.log.submit(entry).await {
            Ok(lsn) => Ok(lsn),
            Err(err) => {
                tracing::error!(error = %err, "log submission failed; core stops accepting mutations");
                self.failed.replace(Some(err.clone()));
                Err(err)
            }
        }
    }

    /// The groups' WAL pins.
    pub fn pins(&self) -> &RefCell<WalPins> {
        &self.pins
    }

    /// The core's log.
    pub fn log(&self) -> &dyn LogStore {
        &*self.log
    }

    /// Fails the core with `err`: every later request gets `Poisoned`.
    pub fn fail(&self, err: crate::error::Error) {
        self.failed.replace(Some(err));
    }

    /// The error that failed this core, if any.
    pub fn failure(&self) -> Option<crate::error::Error> {
        self.failed.borrow().clone()
    }

    /// The error a request gets once this core has failed: `Poisoned`,
    /// with the failure as its cause.
    pub fn poisoned(&self) -> Option<crate::error::Error> {
        self.failed.borrow().clone().map(|cause| crate::error::Error::poisoned(self.core, cause))
    }

    /// Releases `item` once `item.lsn` is durable.
    pub fn after(&self, core: &Rc<Core>, item: Pending) {
        if item.lsn <= self.log.durable_lsn() && self.queue.borrow().is_empty() {
            complete(core, item, None);
        } else {
            self.queue.borrow_mut().push_back(item);
            self.signal.notify();
        }
    }

    /// The acker task: releases queued items as the log makes them durable.
    pub async fn run_acker(&self, core: &Rc<Core>) {
        loop {
            let lsn = self.signal.wait_until(|| self.queue.borrow().front().map(|p| p.lsn)).await;
            let outcome = self.log.wait_durable(lsn).await;
            if let Err(err) = outcome {
                tracing::error!(error = %err, "log cannot make entries durable; core failed");
                self.failed.replace(Some(err));
            }
            self.release(core);
        }
    }

    /// Completes every queued item the log has made durable (or fails the
    /// rest when the core has failed).
    fn release(&self, core: &Rc<Core>) {
        core.metrics.record_log_stats(self.log.stats());
        let durable = self.log.durable_lsn();
        let failure = self.failure();
        let mut ready = Vec::new();
        {
            let mut queue = self.queue.borrow_mut();
            while let Some(front) = queue.front() {
                if front.lsn > durable && failure.is_none() {
                    break;
                }
                let item = queue.pop_front().expect("front exists");
                let fail = (item.lsn > durable).then(|| failure.clone()).flatten();
                ready.push((item, fail));
            }
        }
        for (item, fail) in ready {
            complete(core, item, fail);
        }
    }

    /// Waits up to `timeout` for queued items; fails whatever is left.
    pub async fn drain(&self, core: &Rc<Core>, timeout: Duration) {
        let start = Instant::now();
        while !self.queue.borrow().is_empty() {
            if start.elapsed() >= timeout {
                let left: Vec<Pending> = self.queue.borrow_mut().drain(..).collect();
                let err = crate::error::Error::new(crate::error::ErrorKind::ShuttingDown);
                for item in left {
                    complete(core, item, Some(err.clone()));
                }
                return;
            }
            glommio::timer::sleep(Duration::from_millis(1)).await;
        }
    }
}

/// Sends the reply, settles the group's uncommitted bytes and runs effects.
fn complete(core: &Rc<Core>, item: Pending, fail: Option<crate::error::Error>) {
    let group = core.groups.get(&item.group);
    if let Some(group) = group {
        group.settle_uncommitted(item.uncommitted);
    }
    if let Some(reply) = item.reply {
        let result = match fail {
            Some(err) => Err(err),
            None => reply.result,
        };
        let latency = reply.sent_at.elapsed();
        match reply.kind {
            LatencyKind::Append => core.metrics.record_append_latency(latency),
            LatencyKind::Read => core.metrics.record_read_latency(latency),
            LatencyKind::Other => {}
        }
        let _ = reply.tx.send(result);
    }
    if let Some(group) = group {
        for effect in item.effects {
            group.on_effect(core, effect);
        }
    }
}
