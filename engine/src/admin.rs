//! Operator calls of the `Engine`: group snapshots (SPEC §7), checkpoints
//! (SPEC §6), and the cold tier's on-demand jobs and bucket purge (SPEC §3).
//!
//! Group-level calls are routed by group id (checked against the engine's
//! shape before routing); core-level jobs are sent to every core's mailbox
//! and awaited together.

use std::sync::atomic::Ordering;

use futures::channel::oneshot;
use rill_shard::api::GroupSnapshot;
use rill_shard::node::calls;
use rill_shard::node::ColdJob;
use rill_shard::node::Mail;
use rill_shard::{Error, ErrorKind, Misplacement, Placement, Result};

use crate::engine::Engine;

/// What `purge_bucket` did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct PurgeReport {
    /// Streams removed across all groups.
    pub removed_streams: u64,
    /// GC entries of the bucket not yet reclaimed (zero after GC ran: the
    /// erasure proof).
    pub pending_gc_entries: u64,
}

impl Engine {
    fn group_placement(&self, group: u32) -> Result<Placement> {
        if group >= self.inner.config.groups {
            return Err(Error::new(ErrorKind::PlacementMismatch {
                group,
                mismatch: Misplacement::NoSuchGroup { group_count: self.inner.config.groups },
            }));
        }
        Ok(Placement { core: self.core_of_group(group), group })
    }

    /// Captures one group's full state (SPEC §7).
    pub async fn snapshot_group(&self, group: u32) -> Result<GroupSnapshot> {
        let placement = self.group_placement(group)?;
        self.call(placement, calls::SnapshotGroup).await
    }

    /// Replaces a group's state with a snapshot taken from an engine of the
    /// same shape. The placement is checked before routing. Returns the
    /// installed commit index.
    pub async fn install_group_snapshot(&self, snapshot: GroupSnapshot) -> Result<u64> {
        if snapshot.group_count != self.inner.config.groups {
            return Err(Error::new(ErrorKind::ShapeMismatch {
                field: "groups",
                recorded: u64::from(self.inner.config.groups),
                requested: u64::from(snapshot.group_count),
            }));
        }
        let placement = self.group_placement(snapshot.group)?;
        self.call(placement, calls::InstallGroupSnapshot(snapshot)).await
    }

    /// Writes a checkpoint of every group that changed and retires the WAL
    /// segments the checkpoints cover. Returns when every core is done.
    pub async fn checkpoint(&self) -> Result<()> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::new(ErrorKind::ShuttingDown));
        }
        let mut acks = Vec::new();
        for mailbox in &self.inner.mailboxes {
            let (tx, rx) = oneshot::channel();
            mailbox.send_waiting(Mail::Checkpoint(tx)).await?;
            acks.push(rx);
        }
        for ack in acks {
            ack.await.map_err(|_| Error::new(ErrorKind::ShuttingDown))??;
        }
        Ok(())
    }

    async fn cold_job(&self, job: ColdJob) -> Result<u64> {
        if self.inner.closed.load(Ordering::Acquire) {
            return Err(Error::new(ErrorKind::ShuttingDown));
        }
        let mut acks = Vec::new();
        for mailbox in &self.inner.mailboxes {
            let (tx, rx) = oneshot::channel();
            mailbox.send_waiting(Mail::Cold(job, tx)).await?;
            acks.push(rx);
        }
        let mut total = 0;
        for ack in acks {
            total += ack.await.map_err(|_| Error::new(ErrorKind::ShuttingDown))??;
        }
        Ok(total)
    }

    /// Flushes every group's hot bytes to cold pack files now; returns the
    /// number of chunks flushed.
    pub async fn flush_cold(&self) -> Result<u64> {
        self.cold_job(ColdJob::Flush).await
    }

    /// One reclamation pass over every group: removes the files of due GC
    /// entries and commits their removal; returns the entries reclaimed.
    pub async fn run_gc(&self) -> Result<u64> {
        self.cold_job(ColdJob::Gc).await
    }

    /// Merges runs of small adjacent cold chunks; returns the number of
    /// compactions done.
    pub async fn compact_cold(&self) -> Result<u64> {
        self.cold_job(ColdJob::Compact).await
    }

    /// Removes every stream of `bucket` in every group (SPEC §3). After
    /// `run_gc`, a second purge reporting zero pending entries proves every
    /// byte of the bucket is gone from the cold tier.
    pub async fn purge_bucket(&self, bucket: &str) -> Result<PurgeReport> {
        rill_shard::validate_name("bucket", bucket)?;
        let mut report = PurgeReport::default();
        for group in 0..self.inner.config.groups {
            let placement = Placement { core: self.core_of_group(group), group };
            let purged = self.call(placement, calls::PurgeBucket(bucket.to_string())).await?;
            report.removed_streams += purged.removed_streams;
            report.pending_gc_entries += purged.pending_gc_entries;
        }
        // Purged forks owe their sources (maybe in other buckets) unpins.
        self.kick_fork_keeper();
        Ok(report)
    }
}
