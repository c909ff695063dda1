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
//! a pack file. Forks ([`forks`]) run `Engine::fork`'s steps and the fork
//! keeper's deliveries one logged step at a time across groups.
//!
//! What is not simulated: the runtime's mailboxes, group tasks and their
//! interleavings (the engine-level tests cover those), admission limits
//! other than hot bytes, faults of the pack files' own writes and syncs
//! (packs are written whole and synced before any commit names them), and
//! the `StdDir`/`DmaDir` devices.

pub mod checks;
pub mod cluster;
pub mod cluster_shrink;
pub mod cold;
pub mod device;
mod fork_state;
mod forks;
pub mod kit;
pub mod packs;
pub mod plan;
mod queues;
pub mod restart;
mod retention;
pub mod shrink;
pub mod world;

use std::cell::Cell;
use std::fmt;
use std::rc::Rc;

use rill_shard::planted::{self, Bug};

use self::checks::Depth;
use self::kit::yields;
pub use self::kit::{panic_message, Fail, Stats};
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
        // The fork keeper has time: nothing stays owed, no tombstone
        // outlives its last fork.
        (end, SimOp::Fork { action: plan::ForkAction::Drain, n: 0, to: 0 }),
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
            self.check_forks()?;
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
