//! [`RaftJournal`]: where a group's raft records become durable.
//!
//! In a node this is the core's write-ahead log, shared by every group of
//! the core so one `fdatasync` covers all of them; [`MemJournal`] keeps the
//! records in memory (durable at once, nothing survives the process) for
//! tests of the layers above and for engines without a data directory.
//! Invariants every journal keeps: records get strictly increasing LSNs in
//! the order they were written; `wait_durable(lsn)` resolves only once
//! every record up to `lsn` is durable; records come back from recovery in
//! LSN order.

use std::cell::RefCell;
use std::fmt;
use std::rc::Rc;

use super::wire::RaftRecord;
use crate::error::Result;
use crate::protocol::pins::WalPins;
use crate::wal::log::{EntryBody, LocalFuture, LogEntry, LogStore, Lsn};

/// A core's durable sequence of raft records, shared by its groups.
pub trait RaftJournal: fmt::Debug {
    /// Queues one record of `group` and returns its LSN. An error means it
    /// was not written and the group must stop.
    fn write<'a>(&'a self, group: u32, record: &'a RaftRecord) -> LocalFuture<'a, Result<Lsn>>;

    /// Resolves once every record up to `lsn` is durable.
    fn wait_durable(&self, lsn: Lsn) -> LocalFuture<'_, Result<()>>;
}

/// Records kept in memory, durable as soon as written.
#[derive(Debug, Default)]
pub struct MemJournal {
    records: RefCell<Vec<(u32, RaftRecord)>>,
}

impl MemJournal {
    /// An empty journal.
    pub fn new() -> Self {
        Self::default()
    }

    /// Every record written so far for `group`, in order (what recovery
    /// would read back).
    pub fn records_of(&self, group: u32) -> Vec<RaftRecord> {
        self.records.borrow().iter().filter(|(g, _)| *g == group).map(|(_, r)| r.clone()).collect()
    }
}

impl RaftJournal for MemJournal {
    fn write<'a>(&'a self, group: u32, record: &'a RaftRecord) -> LocalFuture<'a, Result<Lsn>> {
        let mut records = self.records.borrow_mut();
        // The encoding is what a WAL would store: check it decodes back.
        debug_assert_eq!(RaftRecord::decode(&record.encode()).as_ref(), Ok(record));
        records.push((group, record.clone()));
        let lsn = records.len() as Lsn;
        Box::pin(std::future::ready(Ok(lsn)))
    }

    fn wait_durable(&self, _lsn: Lsn) -> LocalFuture<'_, Result<()>> {
        Box::pin(std::future::ready(Ok(())))
    }
}

/// The core's log (the write-ahead log in a node) as the raft journal of
/// every group on the core: each record is one WAL record of kind `Raft`
/// (FORMAT.md), so a group's raft records share the core's group commit
/// with everything else the core logs. Each record pins the log for its
/// group (`protocol/pins.rs`) from the moment it gets its LSN, in the same
/// poll, so no retirement can pass it before the group's raft log file
/// holds it (`raft/log_file.rs`).
#[derive(Debug, Clone)]
pub struct WalJournal {
    log: Rc<dyn LogStore>,
    pins: Rc<RefCell<WalPins>>,
}

impl WalJournal {
    /// The journal over `log`, pinning it in `pins`.
    pub fn new(log: Rc<dyn LogStore>, pins: Rc<RefCell<WalPins>>) -> Self {
        Self { log, pins }
    }

    /// The log underneath.
    pub fn log(&self) -> &Rc<dyn LogStore> {
        &self.log
    }

    /// The pins of the log's groups.
    pub fn pins(&self) -> &Rc<RefCell<WalPins>> {
        &self.pins
    }
}

impl RaftJournal for WalJournal {
    fn write<'a>(&'a self, group: u32, record: &'a RaftRecord) -> LocalFuture<'a, Result<Lsn>> {
        Box::pin(async move {
            let body = record.encode();
            let index = match record {
                RaftRecord::Entry { log_id, .. } => log_id.index,
                _ => 0,
            };
            let lsn = self.log.submit(LogEntry { group, index, body: EntryBody::Raft(&body) }).await?;
            self.pins.borrow_mut().submitting(group, lsn);
            Ok(lsn)
        })
    }

    fn wait_durable(&self, lsn: Lsn) -> LocalFuture<'_, Result<()>> {
        self.log.wait_durable(lsn)
    }
}
