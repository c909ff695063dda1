//! The log seam: where a group's committed mutations go to become durable.
//!
//! Every mutating command a group applies is handed to its core's
//! [`LogStore`] as a [`LogEntry`] before the caller hears about it. The store
//! gives each entry a core-wide log sequence number (LSN), strictly
//! increasing in submission order, and reports a durable LSN that only moves
//! forward. The runtime's rule is simple and holds for every store:
//!
//! * a mutation is acknowledged only once `durable_lsn() >= its lsn`;
//! * any other reply of a group (a read, a duplicate, an idempotent
//!   re-create) waits until `durable_lsn()` covers the last entry that group
//!   submitted, so nobody ever sees state that a crash could take back.
//!
//! [`MemLog`] is the store of an engine without a write-ahead log: entries
//! are counted and immediately "durable" (nothing survives the process); it
//! serves tests that need no disk. The write-ahead log
//! ([`crate::wal::WalLog`]) and the tests' gated stores implement the same
//! trait.

use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;

use crate::error::Result;
use crate::metrics::LogStats;
use crate::state::command::Command;

/// A boxed, single-threaded future (stores live on one core).
pub type LocalFuture<'a, T> = Pin<Box<dyn Future<Output = T> + 'a>>;

/// Log sequence number, core-wide; 0 means "nothing submitted".
pub type Lsn = u64;

/// What one log entry carries.
#[derive(Debug, Clone, Copy)]
pub enum EntryBody<'a> {
    /// A mutating command applied at `index`.
    Command(&'a Command),
    /// A group state installed at `index`: the group's checkpoint file
    /// already holds it (durably); the entry carries the snapshot's BLAKE3.
    InstallRef([u8; 32]),
    /// A replicated group's raft record, already encoded (the log stores
    /// it as it is; only the `raft` module reads it).
    Raft(&'a [u8]),
}

/// One entry: a group's mutation at its commit index.
#[derive(Debug, Clone, Copy)]
pub struct LogEntry<'a> {
    /// The group the entry belongs to.
    pub group: u32,
    /// The group's commit index after the entry.
    pub index: u64,
    /// What the entry carries.
    pub body: EntryBody<'a>,
}

impl LogEntry<'_> {
    /// Payload bytes the entry carries (for admission accounting).
    pub fn payload_len(&self) -> u64 {
        match self.body {
            EntryBody::Command(cmd) => cmd.payload_len(),
            EntryBody::InstallRef(_) => 0,
            EntryBody::Raft(body) => body.len() as u64,
        }
    }
}

/// A core's log. Implementations are single-threaded (owned by one core).
pub trait LogStore: fmt::Debug {
    /// Queues one entry and returns its LSN. Entries become durable in LSN
    /// order. May wait (for space, or a slow device); only the submitting
    /// group waits meanwhile. An error means the entry was not logged and
    /// the core must stop (its in-memory state is ahead of its log).
    fn submit<'a>(&'a self, entry: LogEntry<'a>) -> LocalFuture<'a, Result<Lsn>>;

    /// Every entry with an LSN at or below this is durable.
    fn durable_lsn(&self) -> Lsn;

    /// Resolves once `durable_lsn() >= lsn`, or with the error that made
    /// durability impossible.
    fn wait_durable(&self, lsn: Lsn) -> LocalFuture<'_, Result<()>>;

    /// LSN of the last submitted entry (0 if none).
    fn last_lsn(&self) -> Lsn;

    /// Drops every stored entry with an LSN at or below `cut` (the caller
    /// has checkpointed everything they carried).
    fn retire_through(&self, _cut: Lsn) -> LocalFuture<'_, Result<()>> {
        Box::pin(std::future::ready(Ok(())))
    }

    /// Bytes the log currently keeps on its device.
    fn live_bytes(&self) -> u64 {
        0
    }

    /// Counters of what the log has done.
    fn stats(&self) -> LogStats {
        LogStats::default()
    }
}

/// The log of an engine without a write-ahead log: entries are counted and
/// durable as soon as they are submitted. Acknowledged state lives only in
/// memory and does not survive the process.
#[derive(Debug, Default)]
pub struct MemLog {
    next: Cell<Lsn>,
    bytes: Cell<u64>,
}

impl MemLog {
    /// An empty in-memory log.
    pub fn new() -> Self {
        MemLog::default()
    }

    /// Payload bytes submitted so far.
    pub fn submitted_bytes(&self) -> u64 {
        self.bytes.get()
    }
}

impl LogStore for MemLog {
    fn submit<'a>(&'a self, entry: LogEntry<'a>) -> LocalFuture<'a, Result<Lsn>> {
        let lsn = self.next.get() + 1;
        self.next.set(lsn);
        self.bytes.set(self.bytes.get() + entry.payload_len());
        Box::pin(std::future::ready(Ok(lsn)))
    }

    fn durable_lsn(&self) -> Lsn {
        self.next.get()
    }

    fn wait_durable(&self, _lsn: Lsn) -> LocalFuture<'_, Result<()>> {
        Box::pin(std::future::ready(Ok(())))
    }

    fn last_lsn(&self) -> Lsn {
        self.next.get()
    }
}

/// Builds one core's log store on that core's thread.
pub type LogFactory = std::sync::Arc<dyn Fn(usize) -> Box<dyn LogStore> + Send + Sync>;
