//! Engine configuration: the data directory, the engine's shape (cores and
//! groups) and every runtime limit, with builder setters.
//!
//! `Config::new(dir)` gives the defaults: one core per online CPU, 64
//! groups, and the limits of [`Limits::default`]. Nothing is validated
//! until [`crate::Engine::open`], which refuses an impossible configuration
//! with a `BadRequest` error.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use std::time::Duration;

use rill_shard::log::{LogFactory, LogStore, MemLog};
use rill_shard::node::Clock;
use rill_shard::CheckpointConfig;
use rill_shard::ColdConfig;
use rill_shard::{Durability, WalConfig, WalIo};
use rill_shard::{Error, Result};
use rill_shard::{Limits, MailboxFull, SpinPolicy};

/// Default number of groups.
pub const DEFAULT_GROUPS: u32 = 64;
/// Default io_uring memory per executor.
pub const DEFAULT_IO_MEMORY_BYTES: usize = 1 << 20;

/// How an engine is opened.
#[derive(Clone)]
pub struct Config {
    pub(crate) data_dir: PathBuf,
    pub(crate) cores: usize,
    pub(crate) groups: u32,
    pub(crate) limits: Limits,
    pub(crate) pin_threads: bool,
    pub(crate) io_memory_bytes: usize,
    pub(crate) wal: WalConfig,
    pub(crate) checkpoint: CheckpointConfig,
    pub(crate) cold: ColdConfig,
    pub(crate) log_factory: Option<LogFactory>,
    pub(crate) clock: Option<Clock>,
    pub(crate) reply_spin: Duration,
    pub(crate) cluster: Option<crate::cluster::ClusterConfig>,
}

impl std::fmt::Debug for Config {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Config")
            .field("data_dir", &self.data_dir)
            .field("cores", &self.cores)
            .field("groups", &self.groups)
            .field("limits", &self.limits)
            .field("pin_threads", &self.pin_threads)
            .finish_non_exhaustive()
    }
}

/// Number of CPUs this process may run on.
pub fn online_cpus() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

impl Config {
    /// The defaults on data directory `data_dir`: one core per online CPU, 64 groups,
    /// the limits of [`Limits::default`].
    pub fn new(data_dir: impl AsRef<Path>) -> Self {
        Config {
            data_dir: data_dir.as_ref().to_path_buf(),
            cores: online_cpus(),
            groups: DEFAULT_GROUPS,
            limits: Limits::default(),
            pin_threads: true,
            io_memory_bytes: DEFAULT_IO_MEMORY_BYTES,
            wal: WalConfig::default(),
            checkpoint: CheckpointConfig::default(),
            cold: ColdConfig::default(),
            log_factory: None,
            clock: None,
            reply_spin: Duration::ZERO,
            cluster: None,
        }
    }

    /// Refuses a configuration that could never run, with a `BadRequest`
    /// naming the setting (`Engine::open` calls this first).
    pub fn check(&self) -> Result<()> {
        if self.cores == 0 {
            return Err(Error::bad_request("cores must be at least 1"));
        }
        if self.groups == 0 {
            return Err(Error::bad_request("groups must be at least 1"));
        }
        self.limits.check()?;
        self.wal.check()?;
        if let Some(cluster) = &self.cluster {
            cluster.check()?;
            if !matches!(self.wal.durability, Durability::Fsync) {
                // An ack means a quorum holds the entry on a synced log;
                // with interval syncs it would mean "in a quorum's memory",
                // which a correlated power loss takes back.
                return Err(Error::bad_request(
                    "a cluster needs Durability::Fsync (every ack is fsynced on a quorum)",
                ));
            }
            if self.log_factory.is_some() {
                return Err(Error::bad_request(
                    "a cluster keeps its raft logs in the WAL: no custom log factory",
                ));
            }
        }
        self.checkpoint.check()?;
        self.cold.check()
    }

    /// Makes every group a Raft group over the cluster's members (see
    /// [`crate::ClusterConfig`]). Requires `Durability::Fsync`.
    pub fn cluster(mut self, cluster: crate::cluster::ClusterConfig) -> Self {
        self.cluster = Some(cluster);
        self
    }

    /// The cluster this engine is a node of, if any.
    pub fn cluster_config(&self) -> Option<&crate::cluster::ClusterConfig> {
        self.cluster.as_ref()
    }

    /// The data directory.
    pub fn data_dir(&self) -> &Path {
        &self.data_dir
    }

    /// Executors (one pinned thread each). Default: online CPUs.
    pub fn cores(mut self, cores: usize) -> Self {
        self.cores = cores;
        self
    }

    /// Groups (fixed for the life of the data directory). Default: 64.
    pub fn groups(mut self, groups: u32) -> Self {
        self.groups = groups;
        self
    }

    /// Replace every limit at once.
    pub fn limits(mut self, limits: Limits) -> Self {
        self.limits = limits;
        self
    }

    /// The limits as configured so far.
    pub fn current_limits(&self) -> &Limits {
        &self.limits
    }

    /// Requests queued per core mailbox.
    pub fn mailbox_capacity(mut self, capacity: usize) -> Self {
        self.limits.mailbox_capacity = capacity;
        self
    }

    /// Wait for space (default) or fail with `Overloaded` when full.
    pub fn mailbox_full(mut self, policy: MailboxFull) -> Self {
        self.limits.mailbox_full = policy;
        self
    }

    /// When a core's dispatcher spins on an empty mailbox instead of
    /// parking its thread (default: up to 50 µs after mail while no reply
    /// waits for the log, at most a quarter of the time, never after a busy
    /// or CPU-contended period; [`SpinPolicy::OFF`] never spins). Spinning
    /// saves the sleeping-thread wakes of a park at low load; see
    /// ARCHITECTURE.md, "The wake path".
    pub fn spin(mut self, policy: SpinPolicy) -> Self {
        self.limits.spin = policy;
        self
    }

    /// How long a caller spins for its reply before its task parks
    /// (default zero: never). Worth it only for callers that own their
    /// thread (a blocking `block_on` loop) and want the lowest round trip:
    /// it trades up to this much CPU per call for the thread wake of a
    /// park. The spin runs inside the call's poll, so it holds the caller's
    /// executor thread.
    pub fn reply_spin(mut self, spin: Duration) -> Self {
        self.reply_spin = spin;
        self
    }

    /// Requests queued inside a core for one group.
    pub fn group_queue_depth(mut self, depth: usize) -> Self {
        self.limits.group_queue_depth = depth;
        self
    }

    /// Parked live readers per core.
    pub fn live_waiters_per_core(mut self, limit: usize) -> Self {
        self.limits.live_waiters_per_core = limit;
        self
    }

    /// Payload bytes per group waiting for the log.
    pub fn max_uncommitted_bytes_per_group(mut self, limit: u64) -> Self {
        self.limits.max_uncommitted_bytes_per_group = limit;
        self
    }

    /// Largest payload of one append, batch or snapshot.
    pub fn max_payload_bytes(mut self, limit: u64) -> Self {
        self.limits.max_payload_bytes = limit;
        self
    }

    /// Items per append batch.
    pub fn max_batch_items(mut self, limit: usize) -> Self {
        self.limits.max_batch_items = limit;
        self
    }

    /// Streams per group.
    pub fn max_streams_per_group(mut self, limit: u64) -> Self {
        self.limits.group.max_streams_per_group = limit;
        self
    }

    /// How often expired streams are swept.
    pub fn expiry_sweep_interval_ms(mut self, interval_ms: u64) -> Self {
        self.limits.expiry_sweep_interval_ms = interval_ms;
        self
    }

    /// Pin each executor to one CPU (default true).
    pub fn pin_threads(mut self, pin: bool) -> Self {
        self.pin_threads = pin;
        self
    }

    /// io_uring buffer memory per executor (locked memory).
    pub fn io_memory_bytes(mut self, bytes: usize) -> Self {
        self.io_memory_bytes = bytes;
        self
    }

    /// When an append is acknowledged: after `fdatasync` (the default) or,
    /// explicitly relaxed, once the write is in the page cache, with a sync
    /// every interval (see [`Durability::Interval`] for exactly what that
    /// can lose).
    pub fn durability(mut self, durability: Durability) -> Self {
        self.wal.durability = durability;
        self
    }

    /// DMA (default; in `Durability::Interval` mode, a shared mapping),
    /// `std::fs` or memory-mapped WAL files (see [`WalIo`]).
    pub fn wal_io(mut self, io: WalIo) -> Self {
        self.wal.io = io;
        self
    }

    /// WAL segment size.
    pub fn wal_segment_bytes(mut self, bytes: u64) -> Self {
        self.wal.segment_bytes = bytes;
        self
    }

    /// Pending WAL batch bytes per core before appends wait.
    pub fn wal_buffer_bytes(mut self, bytes: usize) -> Self {
        self.wal.buffer_bytes = bytes;
        self
    }

    /// Longest time between checkpoints while anything changed.
    pub fn checkpoint_interval(mut self, interval: Duration) -> Self {
        self.checkpoint.interval = interval;
        self
    }

    /// WAL bytes per core that trigger a checkpoint.
    pub fn checkpoint_wal_bytes(mut self, bytes: u64) -> Self {
        self.checkpoint.wal_bytes = bytes;
        self
    }

    /// Whether a clean shutdown checkpoints (tests turn it off to exercise
    /// WAL replay).
    #[doc(hidden)]
    pub fn checkpoint_on_shutdown(mut self, on: bool) -> Self {
        self.checkpoint.on_shutdown = on;
        self
    }

    /// Checkpoint each group right after its durable flush (default on):
    /// checkpoint bytes then follow the group's state, not its hot bytes,
    /// and the log retires below the lowest group pin as groups flush.
    pub fn checkpoint_after_flush(mut self, on: bool) -> Self {
        self.checkpoint.after_flush = on;
        self
    }

    /// The write-ahead log's settings.
    pub fn wal_config(&self) -> &WalConfig {
        &self.wal
    }

    /// Replace the write-ahead log's settings at once.
    pub fn wal(mut self, wal: WalConfig) -> Self {
        self.wal = wal;
        self
    }

    /// The checkpoint settings.
    pub fn checkpoint_config(&self) -> &CheckpointConfig {
        &self.checkpoint
    }

    /// Replace the checkpoint settings at once.
    pub fn checkpoints(mut self, checkpoint: CheckpointConfig) -> Self {
        self.checkpoint = checkpoint;
        self
    }

    /// Hot bytes a group may hold before appends get `ColdBackpressure`.
    pub fn max_hot_bytes_per_group(mut self, limit: u64) -> Self {
        self.limits.group.max_hot_bytes = limit;
        self
    }

    /// Background flush, reclamation and compaction (default on).
    pub fn background_flush(mut self, on: bool) -> Self {
        self.cold.background = on;
        self
    }

    /// How often the background cold worker runs.
    pub fn flush_interval(mut self, interval: Duration) -> Self {
        self.cold.interval = interval;
        self
    }

    /// Hot bytes of a group that trigger a background flush.
    pub fn min_hot_bytes(mut self, bytes: u64) -> Self {
        self.cold.min_hot_bytes = bytes;
        self
    }

    /// Bytes one flush of a group moves at most.
    pub fn max_flush_bytes(mut self, bytes: u64) -> Self {
        self.cold.max_flush_bytes = bytes;
        self
    }

    /// Bytes one pack file holds at most.
    pub fn max_batch_bytes(mut self, bytes: u64) -> Self {
        self.cold.max_batch_bytes = bytes;
        self
    }

    /// Compaction: chunks below `small_bytes` merge into runs of at most
    /// `max_bytes`; inputs are removed `grace` after the merge.
    pub fn compaction(mut self, small_bytes: u64, max_bytes: u64, grace: Duration) -> Self {
        self.cold.compact_small_bytes = small_bytes;
        self.cold.compact_max_bytes = max_bytes;
        self.cold.compact_grace = grace;
        self
    }

    /// The cold tier's settings.
    pub fn cold_config(&self) -> &ColdConfig {
        &self.cold
    }

    /// Replace the cold tier's settings at once.
    pub fn cold(mut self, cold: ColdConfig) -> Self {
        self.cold = cold;
        self
    }

    /// Replaces the write-ahead log with another log store per core (tests
    /// use this to inject slow or failing logs).
    #[doc(hidden)]
    pub fn log_factory(mut self, factory: LogFactory) -> Self {
        self.log_factory = Some(factory);
        self
    }

    /// Keeps the log in memory only: nothing survives the process. For
    /// tests that need no disk.
    #[doc(hidden)]
    pub fn in_memory_log(self) -> Self {
        self.log_factory(Arc::new(|_core| Box::new(MemLog::new()) as Box<dyn LogStore>))
    }

    /// Replaces the wall clock (Unix milliseconds) the cores stamp commands
    /// with.
    #[doc(hidden)]
    pub fn clock(mut self, clock: Clock) -> Self {
        self.clock = Some(clock);
        self
    }
}
