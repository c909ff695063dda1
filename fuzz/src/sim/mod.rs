//! The deterministic simulation: random operations, crashes and I/O faults
//! against the real group state machine, WAL writer, segment scan and
//! recovery, checked step by step against the reference model.
//!
//! A run is a function of its seed (and operation count): [`plan`] turns
//! the seed into an engine shape, an operation and fault mix, and a list of
//! abstract operations; [`world`] executes them on a simulated machine
//! (one real `WalLog` per core over a simulated device, [`device`]) inside
//! a single glommio executor on the calling thread, with a simulated clock
//! and no timers, so the same seed gives the same run, byte for byte
//! ([`Report::digest`]). After every step the touched group is compared
//! with the model ([`checks`]); every few steps and after every restart,
//! every group in full. A crash ([`restart`]) lays out what survived as a
//! real data directory and opens it with the real `recover` and
//! `consolidate`. [`shrink`] reduces a failing operation list.
//!
//! The cold tier ([`cold`]) runs each core's worker job by job on real
//! pack files, with reads through the real pack cache; crashes may damage
//! a pack file.
//!
//! What is not simulated: the runtime's mailboxes, group tasks and their
//! interleavings (the engine-level tests cover those), admission limits
//! other than hot bytes, faults of the pack files' own writes and syncs
//! (packs are written whole and synced before any commit names them), and
//! the `StdDir`/`DmaDir` devices.

pub mod checks;
pub mod cold;
pub mod device;
pub mod packs;
pub mod plan;
pub mod restart;
pub mod shrink;
pub mod world;

use std::cell::Cell;
use std::fmt;
use std::future::Future;
use std::pin::Pin;
use std::rc::Rc;
use std::task::{Context, Poll};

use rill_shard::planted::{self, Bug};

use self::checks::Depth;
use self::plan::SimOp;
use self::world::Sim;

/// What to run.
#[derive(Clone, Debug)]
pub struct SimConfig {
    pub seed: u64,
    /// Operations generated from the seed.
    pub ops: usize,
    /// Run only these operations (indexes into the generated list), as a
    /// shrunk failure does.
    pub keep: Option<Vec<usize>>,
    /// Compare every group in full, every byte included, every this many
    /// steps (1: every step); the touched group's views are compared after
    /// every step regardless.
    pub full_check_every: usize,
    /// A planted bug to run with (teeth tests only).
    pub bug: Option<Bug>,
}

impl SimConfig {
    pub fn new(seed: u64, ops: usize) -> Self {
        SimConfig { seed, ops, keep: None, full_check_every: 16, bug: None }
    }
}

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
             {} torn tails, {} corruptions detected ({} harmless), {} checkpoints, {} installs ({} refused), \
             {} retries, unacked kept/dropped {}/{}; cold: {} flushes, {} compactions, {} files removed, \
             {} purges ({} buckets erased), {} packs damaged, {} damaged reads refused, {} orphans swept, \
             {} pack faults, {} packs torn",
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
            self.packs_torn
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

/// A divergence: where, which check, and what it saw.
#[derive(Clone, Debug)]
pub struct Failure {
    /// Position in the run (0-based), and index in the generated list.
    pub step: usize,
    pub index: usize,
    pub op: String,
    pub check: &'static str,
    pub detail: String,
}

impl fmt::Display for Failure {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "step {} (op #{} {}): {} check failed: {}",
            self.step, self.index, self.op, self.check, self.detail
        )
    }
}

/// The outcome of a run.
#[derive(Clone, Debug)]
pub struct Report {
    pub seed: u64,
    pub stats: Stats,
    /// BLAKE3 over the final state of every group and the statistics: the
    /// same seed and commit give the same digest.
    pub digest: String,
    pub failure: Option<Failure>,
}

pub(crate) fn ensure(ok: bool, check: &'static str, detail: impl FnOnce() -> String) -> Result<(), Fail> {
    if ok {
        Ok(())
    } else {
        Err(Fail::new(check, detail()))
    }
}

/// Runs `f`, turning a panic (a broken assertion in the code under test)
/// into a failed check.
pub(crate) fn guard<T>(check: &'static str, f: impl FnOnce() -> T) -> Result<T, Fail> {
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
pub(crate) async fn yields(n: usize) {
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

/// Runs one simulation on the calling thread.
pub fn run(config: &SimConfig) -> Report {
    let (setup, _mix, ops) = plan::generate(config.seed, config.ops);
    let selected: Vec<(usize, SimOp)> = match &config.keep {
        Some(keep) => keep.iter().filter(|i| **i < ops.len()).map(|i| (*i, ops[*i].clone())).collect(),
        None => ops.into_iter().enumerate().collect(),
    };
    let progress = Rc::new(Cell::new((0usize, 0usize)));
    let executor = glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .io_memory(256 << 10)
        .make()
        .expect("a glommio executor starts on this thread");
    planted::plant(config.bug);
    let seed = config.seed;
    let every = config.full_check_every.max(1);
    let tracker = progress.clone();
    let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        executor.run(drive(seed, setup, selected.clone(), every, tracker))
    }));
    planted::plant(None);
    drop(executor);
    match outcome {
        Ok(report) => report,
        Err(panic) => {
            let (step, index) = progress.get();
            let op = selected.get(step).map(|(_, op)| format!("{op:?}")).unwrap_or_default();
            let detail = format!("panicked: {}", panic_message(&*panic));
            Report {
                seed,
                stats: Stats::default(),
                digest: String::new(),
                failure: Some(Failure { step, index, op, check: "panic", detail }),
            }
        }
    }
}

async fn drive(
    seed: u64,
    setup: plan::Setup,
    ops: Vec<(usize, SimOp)>,
    every: usize,
    progress: Rc<Cell<(usize, usize)>>,
) -> Report {
    let mut sim = Sim::new(seed, setup);
    let end = ops.last().map_or(0, |(i, _)| i + 1);
    let epilogue = [
        (end, SimOp::Settle),
        (
            end,
            SimOp::Crash { power_loss: true, corrupt: false, mid_flush: false, salt: seed.rotate_left(17) },
        ),
    ];
    for (step, (index, op)) in ops.iter().chain(epilogue.iter()).enumerate() {
        progress.set((step, *index));
        let full = step % every == 0 || step >= ops.len();
        if let Err(fail) = sim.step(*index, op, full).await {
            let failure = Failure {
                step,
                index: *index,
                op: format!("{op:?}"),
                check: fail.check,
                detail: fail.detail,
            };
            return Report { seed, stats: sim.stats.clone(), digest: String::new(), failure: Some(failure) };
        }
        sim.stats.steps += 1;
    }
    // The epilogue made everything durable, crashed and recovered: nothing
    // may be pending.
    let pending: usize = sim.groups.iter().map(|g| g.pending.len()).sum();
    if pending != 0 {
        let failure = Failure {
            step: ops.len() + epilogue.len(),
            index: end,
            op: "end".into(),
            check: "settle",
            detail: format!("{pending} entries still pending after the final restart"),
        };
        return Report { seed, stats: sim.stats.clone(), digest: String::new(), failure: Some(failure) };
    }
    let digest = sim.digest();
    for core in sim.cores.drain(..) {
        core.stop();
    }
    Report { seed, stats: sim.stats.clone(), digest, failure: None }
}

impl Sim {
    /// One step: the operation, then acknowledgements, a restart if a log
    /// failed, and the checks.
    async fn step(&mut self, index: usize, op: &SimOp, full: bool) -> Result<(), Fail> {
        self.execute(index, op).await?;
        yields(2).await;
        self.acknowledge()?;
        let failed =
            self.cores.iter().any(|c| c.dir.failed() || c.submit_failed || c.dir.violation().is_some());
        if failed {
            // A failed log stops its core; the machine restarts. Whether the
            // restart follows a power failure is decided by the operation.
            let salt = self.seed ^ (index as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
            self.restart(salt & 1 == 1, false, salt).await?;
        }
        if full {
            for g in 0..self.setup.groups {
                self.check_group(g, Depth::Bytes)?;
            }
            self.check_files()?;
        } else if let Some(g) = self.touched {
            self.check_group(g, Depth::Views)?;
        }
        self.stats.cold_corruptions_detected += self.corrupt_reads.take();
        self.stats.pack_faults = self.packs.faults();
        Ok(())
    }

    fn digest(&self) -> String {
        let mut hasher = blake3::Hasher::new();
        hasher.update(&self.seed.to_le_bytes());
        for group in &self.groups {
            hasher.update(&group.live.encode_snapshot());
        }
        hasher.update(format!("{:?}", self.stats).as_bytes());
        hasher.finalize().to_hex()[..32].to_string()
    }
}
