//! The simulation's shared vocabulary, below every other part of it: what a
//! run counts ([`Stats`]), what a broken check says ([`Fail`]), and the
//! small helpers every part uses to check, to catch a panic of the code
//! under test, and to let the executor's other tasks run.

use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};

/// Counts of what a run did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Stats {
    pub steps: u64,
    pub commands: u64,
    pub mutations: u64,
    pub acked: u64,
    pub restarts: u64,
    pub power_losses: u64,
    /// Power failures that found written but unsynced bytes.
    pub crashes_with_unsynced_bytes: u64,
    pub device_faults: u64,
    pub torn_tails: u64,
    pub corruptions_detected: u64,
    pub corruptions_harmless: u64,
    pub checkpoints: u64,
    pub installs: u64,
    /// Installs of a snapshot that was not ahead of the group, refused.
    pub installs_refused: u64,
    /// Installs that would have waited for the core's checkpoint run.
    pub installs_deferred: u64,
    pub retries: u64,
    /// Unacknowledged entries that a restart kept, and ones it dropped.
    pub recovered_unacked: u64,
    pub lost_unacked: u64,
    /// Cold tier: flush and compaction jobs that wrote a pack, files GC
    /// removed, purges, purged buckets found erased, pack files damaged,
    /// reads and compactions refused on damaged packs, orphan packs swept
    /// at restart.
    pub flushes: u64,
    pub compactions: u64,
    pub files_removed: u64,
    pub purges: u64,
    pub buckets_erased: u64,
    pub packs_damaged: u64,
    pub cold_corruptions_detected: u64,
    pub orphans_swept: u64,
    /// Pack-directory faults delivered, and packs a power failure tore.
    pub pack_faults: u64,
    pub packs_torn: u64,
    /// Queue messages delivered (receipts handed out) and acks that
    /// removed one (SPEC §2 "Queues").
    pub queue_deliveries: u64,
    pub queue_acks: u64,
    /// Reclaims that moved a retained start, and the bytes they dropped
    /// (SPEC §2 "Consumption-driven retention").
    pub reclaims: u64,
    pub reclaimed_bytes: u64,
    /// Forks (SPEC §2 "Forks"): calls that answered with their pin held,
    /// that failed on a refused pin, that found the same fork made (a
    /// retry); deletes and expiries that left a tombstone; outbox entries
    /// the keeper delivered; tombstones released by an unpin; pins a drain
    /// found leaked by a fork call's pin landing after its fork's unpin
    /// (the known leak, FUZZING.md).
    pub forks: u64,
    pub forks_refused: u64,
    pub fork_retries: u64,
    pub soft_deletes: u64,
    pub fork_deliveries: u64,
    pub fork_releases: u64,
    pub late_pins: u64,
}

impl Stats {
    pub fn add(&mut self, other: &Stats) {
        let pairs = [
            (&mut self.steps, other.steps),
            (&mut self.commands, other.commands),
            (&mut self.mutations, other.mutations),
            (&mut self.acked, other.acked),
            (&mut self.restarts, other.restarts),
            (&mut self.power_losses, other.power_losses),
            (&mut self.crashes_with_unsynced_bytes, other.crashes_with_unsynced_bytes),
            (&mut self.device_faults, other.device_faults),
            (&mut self.torn_tails, other.torn_tails),
            (&mut self.corruptions_detected, other.corruptions_detected),
            (&mut self.corruptions_harmless, other.corruptions_harmless),
            (&mut self.checkpoints, other.checkpoints),
            (&mut self.installs, other.installs),
            (&mut self.installs_refused, other.installs_refused),
            (&mut self.installs_deferred, other.installs_deferred),
            (&mut self.retries, other.retries),
            (&mut self.recovered_unacked, other.recovered_unacked),
            (&mut self.lost_unacked, other.lost_unacked),
            (&mut self.flushes, other.flushes),
            (&mut self.compactions, other.compactions),
            (&mut self.files_removed, other.files_removed),
            (&mut self.purges, other.purges),
            (&mut self.buckets_erased, other.buckets_erased),
            (&mut self.packs_damaged, other.packs_damaged),
            (&mut self.cold_corruptions_detected, other.cold_corruptions_detected),
            (&mut self.orphans_swept, other.orphans_swept),
            (&mut self.pack_faults, other.pack_faults),
            (&mut self.packs_torn, other.packs_torn),
            (&mut self.queue_deliveries, other.queue_deliveries),
            (&mut self.queue_acks, other.queue_acks),
            (&mut self.reclaims, other.reclaims),
            (&mut self.reclaimed_bytes, other.reclaimed_bytes),
            (&mut self.forks, other.forks),
            (&mut self.forks_refused, other.forks_refused),
            (&mut self.fork_retries, other.fork_retries),
            (&mut self.soft_deletes, other.soft_deletes),
            (&mut self.fork_deliveries, other.fork_deliveries),
            (&mut self.fork_releases, other.fork_releases),
            (&mut self.late_pins, other.late_pins),
        ];
        for (mine, theirs) in pairs {
            *mine += theirs;
        }
    }
}

impl fmt::Display for Stats {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} steps, {} commands, {} logged, {} acked, {} restarts ({} power losses, {} with unsynced \
             bytes), {} device faults, \
             {} torn tails, {} corruptions detected ({} harmless), {} checkpoints, {} installs ({} refused, {} deferred), \
             {} retries, unacked kept/dropped {}/{}; cold: {} flushes, {} compactions, {} files removed, \
             {} purges ({} buckets erased), {} packs damaged, {} damaged reads refused, {} orphans swept, \
             {} pack faults, {} packs torn; queues: {} deliveries, {} acks; {} reclaims ({} bytes); \
             forks: {} made, {} refused, {} retried, {} soft deletes, {} deliveries, {} releases, {} late pins",
            self.steps,
            self.commands,
            self.mutations,
            self.acked,
            self.restarts,
            self.power_losses,
            self.crashes_with_unsynced_bytes,
            self.device_faults,
            self.torn_tails,
            self.corruptions_detected,
            self.corruptions_harmless,
            self.checkpoints,
            self.installs,
            self.installs_refused,
            self.installs_deferred,
            self.retries,
            self.recovered_unacked,
            self.lost_unacked,
            self.flushes,
            self.compactions,
            self.files_removed,
            self.purges,
            self.buckets_erased,
            self.packs_damaged,
            self.cold_corruptions_detected,
            self.orphans_swept,
            self.pack_faults,
            self.packs_torn,
            self.queue_deliveries,
            self.queue_acks,
            self.reclaims,
            self.reclaimed_bytes,
            self.forks,
            self.forks_refused,
            self.fork_retries,
            self.soft_deletes,
            self.fork_deliveries,
            self.fork_releases,
            self.late_pins
        )
    }
}

/// A broken check, before it is placed at a step.
#[derive(Clone, Debug)]
pub struct Fail {
    pub check: &'static str,
    pub detail: String,
}

impl Fail {
    pub fn new(check: &'static str, detail: String) -> Self {
        Fail { check, detail }
    }
}

pub fn ensure(ok: bool, check: &'static str, detail: impl FnOnce() -> String) -> Result<(), Fail> {
    if ok {
        Ok(())
    } else {
        Err(Fail::new(check, detail()))
    }
}

/// Runs `f`, turning a panic (a broken assertion in the code under test)
/// into a failed check.
pub fn guard<T>(check: &'static str, f: impl FnOnce() -> T) -> Result<T, Fail> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        .map_err(|panic| Fail::new(check, format!("panicked: {}", panic_message(&*panic))))
}

/// The message of a panic payload.
pub fn panic_message(panic: &(dyn std::any::Any + Send)) -> String {
    panic
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "(no message)".into())
}

/// Lets every other task of the executor run `n` times.
pub async fn yields(n: usize) {
    struct YieldNow(bool);
    impl Future for YieldNow {
        type Output = ();
        fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<()> {
            if self.0 {
                return Poll::Ready(());
            }
            self.0 = true;
            cx.waker().wake_by_ref();
            Poll::Pending
        }
    }
    for _ in 0..n {
        YieldNow(false).await;
    }
}
