//! The suite: the profiles (`quick`, `full`, and the smoke test's `tiny`),
//! the plan of steps a profile expands to, and running the plan.
//!
//! **Interleaving.** A plan is a sequence of repetitions; each repetition
//! runs the floor and then every cell of every selected workload once, in
//! both modes, and within a cell every peer once, in an order rotated by
//! the repetition and the cell. So the repetitions of one measurement are
//! spread over the whole run, and no peer always runs first, last or right
//! after the same neighbour: slow drift of a shared machine lands on
//! everyone alike. Cold reads (E) load their data once, before the first
//! repetition, and interleave rill and the floor in each.
//!
//! **Isolation.** Every measured run of rill or a peer gets a fresh
//! directory under `<dir>/bench-scratch/` (same file system as the data
//! directory), opens its store there, and closes it and removes the
//! directory afterwards, so no store's background work (compaction,
//! flushes, checkpoints) runs while another is measured.
//!
//! **Paired floor.** Right before each rill run of A, B and C, the floor
//! probe its ratio is taken against (A, B: the mode's 1 MiB probe; C: the
//! mode's 4 KiB probe) runs for half the profile's floor time on the same
//! file, and the run records that probe's figure and its ratio to it
//! (`rill_per_pair_floor`, `p99_per_pair_floor_p99`): a ratio per
//! repetition, against the device as it was a moment before.
//!
//! **Failures.** A failed rill run (including a failed data check) stops
//! the suite with its error; a failed peer run is reported and the suite
//! goes on.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use rill::{Engine, StreamId};

use crate::floor::{self, FloorFile, WriteProbe, WRITE_PROBES};
use crate::peers;
use crate::progress::Progress;
use crate::report_table;
use crate::rill_side::{self, create_streams, shutdown, stream_ids};
use crate::sample::{Outcome, Sample, Workload};
use crate::util::{bytes_label, count_label, Mode, Result, Scratch};
use crate::window::Timing;
use crate::workloads::calls::Calls;
use crate::workloads::cold::{self, ColdShape, Loaded};
use crate::workloads::consume::{self, ConsumeShape};
use crate::workloads::idem::{self, IdemShape};
use crate::workloads::ingest::{self, IngestShape};
use crate::workloads::openloop::{self, OpenShape};
use crate::workloads::queue::{self, QueueShape};
use crate::workloads::recovery::{self, RecoveryShape};
use crate::workloads::tail::{self, TailShape};

/// One cell of workload B.
#[derive(Clone, Copy, Debug)]
pub struct FanIn {
    pub streams: usize,
    pub zipf: bool,
    pub record_bytes: usize,
    /// rill makes `append_many` calls of [`B_MANY`] (else one `append` per
    /// record, `b_window` per client).
    pub many: bool,
}

impl FanIn {
    /// A cell of independent appends.
    pub fn appends(streams: usize, zipf: bool, record_bytes: usize) -> FanIn {
        FanIn { streams, zipf, record_bytes, many: false }
    }

    /// A cell of `append_many` calls.
    pub fn many(streams: usize, zipf: bool, record_bytes: usize) -> FanIn {
        FanIn { streams, zipf, record_bytes, many: true }
    }
}

/// Everything a profile measures.
#[derive(Clone, Debug)]
pub struct Profile {
    pub name: &'static str,
    pub reps: usize,
    pub timing: Timing,
    /// Time of each floor probe.
    pub floor_time: Duration,
    /// A: record sizes; one client with this window.
    pub a_sizes: Vec<usize>,
    pub a_window: usize,
    /// A with `append_batch` ([`A_BATCHES`]): record sizes.
    pub a_batch_sizes: Vec<usize>,
    /// B: cells; clients × window in flight (the `append_many` cells:
    /// clients × [`B_MANY`]).
    pub b_cells: Vec<FanIn>,
    pub b_clients: usize,
    pub b_window: usize,
    /// C: offered rates over `c_streams` streams.
    pub c_rates: Vec<f64>,
    pub c_streams: usize,
    pub c_record_bytes: usize,
    /// D: reader counts, writer rate.
    pub d_readers: Vec<usize>,
    pub d_rate: f64,
    pub d_record_bytes: usize,
    /// E: what is loaded, and how long random reads run.
    pub e: ColdShape,
    pub e_random: Duration,
    /// F: `(producers, duplicate share)` cells, record sizes, streams.
    pub f_cells: Vec<(bool, f64)>,
    pub f_sizes: Vec<usize>,
    pub f_streams: usize,
    /// G: the writer that is killed.
    pub g: RecoveryShape,
    /// H: the flush policy's ack counts (one cell each), streams, record
    /// size (fill with B's clients and window).
    pub h_flush_acks: Vec<u32>,
    pub h_streams: usize,
    pub h_record_bytes: usize,
    /// I: `(queue groups, workers)` cells, streams, messages per receive,
    /// record size.
    pub i_cells: Vec<(usize, usize)>,
    pub i_streams: usize,
    pub i_max_messages: usize,
    pub i_record_bytes: usize,
}

const KIB: usize = 1024;

/// A's batched cells: `(requests in flight, records per request)`.
pub const A_BATCHES: (usize, usize) = (4, 64);

/// B's `append_many` cells: `(calls in flight per client, items per call)`.
pub const B_MANY: (usize, usize) = (4, 64);

impl Profile {
    /// About three minutes on two cores (the main job adds its load): every workload, short cells.
    pub fn quick() -> Profile {
        Profile {
            name: "quick",
            reps: 3,
            timing: Timing { warmup: Duration::from_millis(150), measure: Duration::from_millis(500) },
            floor_time: Duration::from_millis(200),
            a_sizes: vec![100, KIB, 16 * KIB],
            a_window: 128,
            a_batch_sizes: vec![KIB],
            b_cells: vec![
                FanIn::appends(1000, false, KIB),
                FanIn::appends(1000, false, 256),
                FanIn::appends(10_000, true, KIB),
                FanIn::many(1000, false, KIB),
                FanIn::many(1000, false, 256),
            ],
            b_clients: 4,
            b_window: 64,
            c_rates: vec![5000.0],
            c_streams: 1000,
            c_record_bytes: KIB,
            d_readers: vec![16],
            d_rate: 1000.0,
            d_record_bytes: KIB,
            e: ColdShape { streams: 64, total_bytes: 64 << 20, record_bytes: KIB },
            e_random: Duration::from_millis(500),
            f_cells: vec![(false, 0.0), (true, 0.1)],
            f_sizes: vec![KIB],
            f_streams: 1000,
            g: RecoveryShape {
                streams: 1000,
                record_bytes: KIB,
                clients: 2,
                window: 128,
                write_for: Duration::from_millis(500),
            },
            h_flush_acks: vec![100],
            h_streams: 1000,
            h_record_bytes: KIB,
            i_cells: vec![(1, 16), (8, 16)],
            i_streams: 1000,
            i_max_messages: 16,
            i_record_bytes: KIB,
        }
    }

    /// About fifteen minutes on two cores: the whole matrix.
    pub fn full() -> Profile {
        let mut b_cells = Vec::new();
        for streams in [1000, 10_000, 100_000] {
            for zipf in [false, true] {
                b_cells.push(FanIn::appends(streams, zipf, KIB));
            }
        }
        for record_bytes in [100, 256, 16 * KIB] {
            b_cells.push(FanIn::appends(1000, false, record_bytes));
        }
        for record_bytes in [KIB, 256] {
            b_cells.push(FanIn::many(1000, false, record_bytes));
        }
        Profile {
            name: "full",
            reps: 3,
            timing: Timing { warmup: Duration::from_millis(500), measure: Duration::from_millis(1500) },
            floor_time: Duration::from_millis(700),
            a_sizes: vec![100, KIB, 16 * KIB],
            a_window: 128,
            a_batch_sizes: vec![100, KIB],
            b_cells,
            b_clients: 4,
            b_window: 64,
            c_rates: vec![1000.0, 5000.0, 20_000.0],
            c_streams: 1000,
            c_record_bytes: KIB,
            d_readers: vec![1, 16, 256],
            d_rate: 1000.0,
            d_record_bytes: KIB,
            e: ColdShape { streams: 64, total_bytes: 512 << 20, record_bytes: KIB },
            e_random: Duration::from_millis(1500),
            f_cells: vec![(false, 0.0), (true, 0.0), (true, 0.1)],
            f_sizes: vec![100, KIB],
            f_streams: 1000,
            g: RecoveryShape {
                streams: 1000,
                record_bytes: KIB,
                clients: 2,
                window: 128,
                write_for: Duration::from_secs(3),
            },
            h_flush_acks: vec![1, 100],
            h_streams: 1000,
            h_record_bytes: KIB,
            i_cells: vec![(1, 16), (8, 16)],
            i_streams: 1000,
            i_max_messages: 16,
            i_record_bytes: KIB,
        }
    }

    /// The smoke test's: one repetition, every workload for a fraction of
    /// a second at tiny scale.
    pub fn tiny() -> Profile {
        Profile {
            name: "tiny",
            reps: 1,
            timing: Timing { warmup: Duration::from_millis(50), measure: Duration::from_millis(200) },
            floor_time: Duration::from_millis(30),
            a_sizes: vec![KIB],
            a_window: 8,
            a_batch_sizes: vec![KIB],
            b_cells: vec![FanIn::appends(50, true, 100), FanIn::many(50, false, 100)],
            b_clients: 2,
            b_window: 8,
            c_rates: vec![500.0],
            c_streams: 20,
            c_record_bytes: 100,
            d_readers: vec![3],
            d_rate: 200.0,
            d_record_bytes: 100,
            e: ColdShape { streams: 4, total_bytes: 256 << 10, record_bytes: KIB },
            e_random: Duration::from_millis(50),
            f_cells: vec![(false, 0.0), (true, 0.2)],
            f_sizes: vec![100],
            f_streams: 20,
            g: RecoveryShape {
                streams: 10,
                record_bytes: 100,
                clients: 1,
                window: 10,
                write_for: Duration::from_millis(300),
            },
            h_flush_acks: vec![10],
            h_streams: 20,
            h_record_bytes: 100,
            i_cells: vec![(1, 4), (2, 4)],
            i_streams: 20,
            i_max_messages: 4,
            i_record_bytes: 100,
        }
    }

    /// Scales every measured and warm-up time by `factor`.
    pub fn scaled(mut self, factor: f64) -> Profile {
        self.timing.warmup = self.timing.warmup.mul_f64(factor);
        self.timing.measure = self.timing.measure.mul_f64(factor);
        self.floor_time = self.floor_time.mul_f64(factor);
        self.e_random = self.e_random.mul_f64(factor);
        self.g.write_for = self.g.write_for.mul_f64(factor);
        self
    }
}

/// How to run a profile.
#[derive(Clone, Debug)]
pub struct SuiteOptions {
    pub profile: Profile,
    /// The data directory; scratch space goes under it.
    pub dir: PathBuf,
    pub modes: Vec<Mode>,
    /// Peers besides rill (names from [`peers::compiled`]).
    pub peers: Vec<String>,
    pub workloads: Vec<Workload>,
    /// The bench binary, started as G's child writer (G is skipped
    /// without it).
    pub exe: Option<PathBuf>,
    pub progress: bool,
}

/// What a suite run produced.
#[derive(Debug)]
pub struct SuiteResult {
    pub samples: Vec<Sample>,
    /// Peer runs that failed, with their errors.
    pub failures: Vec<String>,
    /// Whether the floor's file took `O_DIRECT`.
    pub floor_direct: bool,
    pub elapsed: Duration,
}

#[derive(Clone, Debug)]
enum Action {
    Floor,
    Ingest(IngestShape),
    Open(OpenShape),
    Tail(TailShape),
    ColdLoad,
    ColdRead { random: bool },
    Idem(IdemShape),
    Recovery,
    Consume(ConsumeShape),
    Queue(QueueShape),
}

#[derive(Clone, Debug)]
struct Step {
    workload: Workload,
    mode: Option<Mode>,
    cell: String,
    record_bytes: usize,
    peer: String,
    rep: usize,
    action: Action,
}

impl Step {
    fn describe(&self, reps: usize) -> String {
        let mode = self.mode.map_or(String::new(), |m| format!("{} ", m.name()));
        if matches!(self.action, Action::ColdLoad) {
            return "E: loading and flushing the cold data set".into();
        }
        format!(
            "rep {}/{reps} {mode}{} {} {} · {}",
            self.rep + 1,
            self.workload.letter(),
            self.cell,
            bytes_label(self.record_bytes),
            self.peer
        )
    }
}

/// `items` rotated left by `by`.
fn rotated<T: Clone>(items: &[T], by: usize) -> Vec<T> {
    if items.is_empty() {
        return Vec::new();
    }
    let by = by % items.len();
    items[by..].iter().chain(&items[..by]).cloned().collect()
}

fn fan_in_label(c: &FanIn) -> String {
    let spread = if c.zipf { "zipf" } else { "uniform" };
    let label = format!("{} streams, {spread}", count_label(c.streams));
    if c.many {
        format!("{label}, append_many ×{}", B_MANY.1)
    } else {
        label
    }
}

/// Expands a profile into its steps, in the order they run.
fn plan(opts: &SuiteOptions) -> Vec<Step> {
    let p = &opts.profile;
    let wants = |w: Workload| opts.workloads.contains(&w);
    let mut steps = Vec::new();
    let mut push = |workload, mode, cell: String, record_bytes, peer: &str, rep, action| {
        steps.push(Step { workload, mode, cell, record_bytes, peer: peer.to_string(), rep, action });
    };
    if wants(Workload::E) {
        push(Workload::E, None, "load".into(), p.e.record_bytes, "rill", 0, Action::ColdLoad);
    }
    for rep in 0..p.reps {
        if wants(Workload::Floor) {
            push(Workload::Floor, None, "probes".into(), 0, "floor", rep, Action::Floor);
        }
        let mut k = rep; // rotation counter, advanced per cell
        for &mode in &opts.modes {
            let mut peers: Vec<&str> = vec!["rill"];
            peers.extend(opts.peers.iter().map(String::as_str).filter(|p| peers::supports(p, mode)));
            if wants(Workload::A) {
                let single = p.a_sizes.iter().map(|&b| (b, p.a_window, Calls::Append));
                let (window, batch) = A_BATCHES;
                let batched = p.a_batch_sizes.iter().map(|&b| (b, window, Calls::Batch(batch)));
                for (record_bytes, window, calls) in single.chain(batched) {
                    let shape =
                        IngestShape { streams: 1, zipf: false, clients: 1, window, record_bytes, calls };
                    let cell = match calls {
                        Calls::Batch(n) => format!("1 stream, batches of {n}"),
                        _ => "1 stream".to_string(),
                    };
                    k += 1;
                    for peer in rotated(&peers, k) {
                        let action = Action::Ingest(shape.clone());
                        push(Workload::A, Some(mode), cell.clone(), record_bytes, peer, rep, action);
                    }
                }
            }
            if wants(Workload::B) {
                for c in &p.b_cells {
                    let (window, calls) =
                        if c.many { (B_MANY.0, Calls::Many(B_MANY.1)) } else { (p.b_window, Calls::Append) };
                    let shape = IngestShape {
                        streams: c.streams,
                        zipf: c.zipf,
                        clients: p.b_clients,
                        window,
                        record_bytes: c.record_bytes,
                        calls,
                    };
                    k += 1;
                    for peer in rotated(&peers, k) {
                        let action = Action::Ingest(shape.clone());
                        push(Workload::B, Some(mode), fan_in_label(c), c.record_bytes, peer, rep, action);
                    }
                }
            }
            if wants(Workload::C) {
                for &rate in &p.c_rates {
                    let shape = OpenShape { streams: p.c_streams, rate, record_bytes: p.c_record_bytes };
                    let cell = format!("{rate:.0}/s over {} streams", count_label(p.c_streams));
                    k += 1;
                    for peer in rotated(&peers, k) {
                        let action = Action::Open(shape.clone());
                        push(Workload::C, Some(mode), cell.clone(), p.c_record_bytes, peer, rep, action);
                    }
                }
            }
            if wants(Workload::D) {
                for &readers in &p.d_readers {
                    let shape = TailShape { readers, rate: p.d_rate, record_bytes: p.d_record_bytes };
                    let cell =
                        format!("{readers} reader{}, {:.0}/s", if readers == 1 { "" } else { "s" }, p.d_rate);
                    push(Workload::D, Some(mode), cell, p.d_record_bytes, "rill", rep, Action::Tail(shape));
                }
            }
            if wants(Workload::F) {
                for &record_bytes in &p.f_sizes {
                    for &(producers, dup_share) in &p.f_cells {
                        let shape = IdemShape {
                            streams: p.f_streams,
                            clients: p.b_clients,
                            window: p.b_window,
                            record_bytes,
                            producers,
                            dup_share,
                        };
                        let cell = match (producers, dup_share > 0.0) {
                            (false, _) => "producers off".to_string(),
                            (true, false) => "producers on, no retries".to_string(),
                            (true, true) => format!("producers on, {:.0}% retries", dup_share * 100.0),
                        };
                        push(Workload::F, Some(mode), cell, record_bytes, "rill", rep, Action::Idem(shape));
                    }
                }
            }
            if wants(Workload::G) && opts.exe.is_some() {
                let g = &p.g;
                let cell = format!(
                    "{} streams, killed after {:.1} s",
                    count_label(g.streams),
                    g.write_for.as_secs_f64()
                );
                push(Workload::G, Some(mode), cell, g.record_bytes, "rill", rep, Action::Recovery);
            }
            if wants(Workload::H) {
                for &flush_acks in &p.h_flush_acks {
                    let shape = ConsumeShape {
                        streams: p.h_streams,
                        clients: p.b_clients,
                        window: p.b_window,
                        record_bytes: p.h_record_bytes,
                        flush_acks,
                    };
                    let cell = format!(
                        "{} streams, {} readers, commit every {flush_acks} ack{}",
                        count_label(p.h_streams),
                        p.b_clients,
                        if flush_acks == 1 { "" } else { "s" }
                    );
                    let action = Action::Consume(shape);
                    push(Workload::H, Some(mode), cell, p.h_record_bytes, "rill", rep, action);
                }
            }
            if wants(Workload::I) {
                for &(groups, workers) in &p.i_cells {
                    let shape = QueueShape {
                        streams: p.i_streams,
                        clients: p.b_clients,
                        window: p.b_window,
                        record_bytes: p.i_record_bytes,
                        workers,
                        groups,
                        max_messages: p.i_max_messages,
                    };
                    let cell = if groups == 1 {
                        format!("{} queues, {workers} competing workers", count_label(p.i_streams))
                    } else {
                        format!(
                            "{} queues, fan-out to {groups} groups, {workers} workers",
                            count_label(p.i_streams)
                        )
                    };
                    let action = Action::Queue(shape);
                    push(Workload::I, Some(mode), cell, p.i_record_bytes, "rill", rep, action);
                }
            }
        }
        if wants(Workload::E) {
            for (random, cell) in [(false, "sequential"), (true, "random")] {
                k += 1;
                for peer in rotated(&["rill", "floor"], k) {
                    let action = Action::ColdRead { random };
                    push(Workload::E, None, cell.to_string(), p.e.record_bytes, peer, rep, action);
                }
            }
        }
    }
    steps
}

/// State shared by the steps of a run.
struct Context<'a> {
    opts: &'a SuiteOptions,
    scratch_root: PathBuf,
    runs: usize,
    ids: HashMap<usize, Arc<Vec<StreamId>>>,
    cold: Option<(Scratch, Loaded)>,
    floor: Option<FloorFile>,
    floor_direct: bool,
}

/// Which floor probe a rill cell is paired with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Pairing {
    /// A and B: the mode's bandwidth probe (1 MiB writes, synced if durable).
    Bandwidth,
    /// C: the mode's latency probe (4 KiB writes, synced if durable).
    Latency,
}

/// Adds the paired floor probe's figure and rill's ratio to it.
fn paired(mut out: Outcome, floor: &Outcome, pairing: Pairing) -> Outcome {
    match pairing {
        Pairing::Bandwidth => {
            let f = floor.mib_per_sec();
            out.extra.push(("pair_floor_mib_per_s", f));
            if f > 0.0 {
                out.extra.push(("rill_per_pair_floor", out.mib_per_sec() / f));
            }
        }
        Pairing::Latency => {
            let f = floor.us(0.99);
            out.extra.push(("pair_floor_p99_us", f));
            if f > 0.0 {
                out.extra.push(("p99_per_pair_floor_p99", out.us(0.99) / f));
            }
        }
    }
    out
}

impl Context<'_> {
    /// Runs the floor probe a rill cell is paired with, right before the
    /// cell, for half the profile's floor time.
    fn paired_floor(&mut self, mode: Mode, pairing: Pairing) -> Result<Outcome> {
        if self.floor.is_none() {
            self.floor = Some(FloorFile::create(&self.scratch_root, "probe")?);
        }
        let file = self.floor.as_ref().expect("created above");
        let (_, block) = match pairing {
            Pairing::Bandwidth => report_table::floor_bandwidth_label(mode),
            Pairing::Latency => report_table::floor_latency_label(mode),
        };
        let probe = WriteProbe { block, sync: mode == Mode::Durable };
        let (o, direct) = file.probe(probe, self.opts.profile.floor_time / 2)?;
        self.floor_direct = direct;
        Ok(o)
    }

    fn fresh_dir(&mut self) -> Result<Scratch> {
        self.runs += 1;
        Ok(Scratch::fresh(self.scratch_root.join(format!("run-{}", self.runs)))?)
    }

    fn ids(&mut self, n: usize) -> Result<Arc<Vec<StreamId>>> {
        if let Some(ids) = self.ids.get(&n) {
            return Ok(ids.clone());
        }
        let ids = Arc::new(stream_ids("s", n)?);
        self.ids.insert(n, ids.clone());
        Ok(ids)
    }

    /// Opens a fresh engine with `streams` streams created.
    fn engine(&mut self, mode: Mode, streams: usize) -> Result<(Scratch, Engine, Arc<Vec<StreamId>>)> {
        let dir = self.fresh_dir()?;
        let engine = Engine::open(rill_side::config(dir.path(), mode))?;
        let ids = self.ids(streams)?;
        if let Err(e) = create_streams(&engine, &ids) {
            shutdown(engine)?;
            return Err(e);
        }
        Ok((dir, engine, ids))
    }

    fn run(&mut self, step: &Step, seed: u64) -> Result<Vec<(String, usize, Outcome)>> {
        let p = &self.opts.profile;
        let timing = p.timing;
        let one = |o: Outcome| vec![(step.cell.clone(), step.record_bytes, o)];
        let mode = step.mode.unwrap_or(Mode::Durable);
        match &step.action {
            Action::Floor => {
                if self.floor.is_none() {
                    self.floor = Some(FloorFile::create(&self.scratch_root, "probe")?);
                }
                let file = self.floor.as_ref().expect("created above");
                let mut out = Vec::new();
                for probe in WRITE_PROBES {
                    let (o, direct) = file.probe(probe, p.floor_time)?;
                    self.floor_direct = direct;
                    out.push((probe.label(), probe.block, o));
                }
                out.push((floor::MEMCPY_LABEL.to_string(), 64 << 20, floor::memcpy(p.floor_time)));
                Ok(out)
            }
            Action::Ingest(shape) if step.peer == "rill" => {
                let pair = self.paired_floor(mode, Pairing::Bandwidth)?;
                let (_dir, engine, ids) = self.engine(mode, shape.streams)?;
                let out = ingest::rill(&engine, &ids, shape, timing, seed);
                shutdown(engine)?;
                Ok(one(paired(out?, &pair, Pairing::Bandwidth)))
            }
            Action::Ingest(shape) => {
                let dir = self.fresh_dir()?;
                let store = peers::open(&step.peer, dir.path(), mode)?;
                let out = ingest::sync(&*store, shape, timing, seed);
                store.close()?;
                Ok(one(out?))
            }
            Action::Open(shape) if step.peer == "rill" => {
                let pair = self.paired_floor(mode, Pairing::Latency)?;
                let (_dir, engine, ids) = self.engine(mode, shape.streams)?;
                let out = openloop::rill(&engine, &ids, shape, timing, seed);
                shutdown(engine)?;
                Ok(one(paired(out?, &pair, Pairing::Latency)))
            }
            Action::Open(shape) => {
                let dir = self.fresh_dir()?;
                let store = peers::open(&step.peer, dir.path(), mode)?;
                let out = openloop::sync(&*store, shape, timing, seed);
                store.close()?;
                Ok(one(out?))
            }
            Action::Tail(shape) => {
                let (_dir, engine, ids) = self.engine(mode, 1)?;
                let out = tail::rill(&engine, &ids[0], shape, timing);
                shutdown(engine)?;
                Ok(one(out?))
            }
            Action::Idem(shape) => {
                let (_dir, engine, ids) = self.engine(mode, shape.streams)?;
                let out = idem::rill(&engine, &ids, shape, timing, seed);
                shutdown(engine)?;
                Ok(one(out?))
            }
            Action::Consume(shape) => {
                let (_dir, engine, ids) = self.engine(mode, shape.streams)?;
                let out = consume::rill(&engine, &ids, shape, timing, seed);
                shutdown(engine)?;
                Ok(one(out?))
            }
            Action::Queue(shape) => {
                let (_dir, engine, ids) = self.engine(mode, shape.streams)?;
                let out = queue::rill(&engine, &ids, shape, timing, seed);
                shutdown(engine)?;
                Ok(one(out?))
            }
            Action::Recovery => {
                let exe = self.opts.exe.clone().ok_or("G needs the bench binary")?;
                let dir = self.fresh_dir()?;
                Ok(one(recovery::run(&exe, dir.path(), mode, &p.g)?))
            }
            Action::ColdLoad => {
                let dir = Scratch::fresh(self.scratch_root.join("cold"))?;
                let loaded = cold::load(dir.path(), &p.e)?;
                self.cold = Some((dir, loaded));
                Ok(Vec::new())
            }
            Action::ColdRead { random } => {
                let (_, loaded) = self.cold.as_ref().ok_or("cold data was not loaded")?;
                let o = match (*random, step.peer.as_str()) {
                    (false, "rill") => loaded.rill_sequential()?,
                    (false, _) => loaded.floor_sequential()?,
                    (true, "rill") => loaded.rill_random(p.e_random, seed)?,
                    (true, _) => loaded.floor_random(p.e_random, seed)?,
                };
                Ok(one(o))
            }
        }
    }
}

/// Runs the suite.
pub fn run(opts: &SuiteOptions) -> Result<SuiteResult> {
    let steps = plan(opts);
    let scratch = Scratch::fresh(opts.dir.join("bench-scratch"))?;
    let mut ctx = Context {
        opts,
        scratch_root: scratch.path().to_path_buf(),
        runs: 0,
        ids: HashMap::new(),
        cold: None,
        floor: None,
        floor_direct: false,
    };
    let mut progress = Progress::new(steps.len(), opts.progress);
    let started = Instant::now();
    let mut samples = Vec::new();
    let mut failures = Vec::new();
    for (i, step) in steps.iter().enumerate() {
        progress.step(&step.describe(opts.profile.reps));
        let seed = (step.rep as u64) << 32 | i as u64;
        match ctx.run(step, seed) {
            Ok(outcomes) => {
                for (cell, record_bytes, outcome) in outcomes {
                    samples.push(Sample {
                        workload: step.workload,
                        mode: step.mode,
                        cell,
                        record_bytes,
                        peer: step.peer.clone(),
                        rep: step.rep,
                        outcome,
                    });
                }
            }
            Err(e) if step.peer != "rill" && step.peer != "floor" => {
                let what = format!("{} failed: {e}", step.describe(opts.profile.reps));
                progress.note(&format!("warning: {what}"));
                failures.push(what);
            }
            Err(e) => {
                progress.finish();
                return Err(format!("{} failed: {e}", step.describe(opts.profile.reps)).into());
            }
        }
    }
    progress.finish();
    let floor_direct = ctx.floor_direct;
    drop(ctx);
    drop(scratch);
    Ok(SuiteResult { samples, failures, floor_direct, elapsed: started.elapsed() })
}

/// Every workload, floor included.
pub fn all_workloads() -> Vec<Workload> {
    Workload::ALL.to_vec()
}

/// The data directory's scratch root (for messages).
pub fn scratch_dir(dir: &Path) -> PathBuf {
    dir.join("bench-scratch")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn opts(peers: &[&str]) -> SuiteOptions {
        SuiteOptions {
            profile: Profile::quick(),
            dir: PathBuf::from("/nonexistent"),
            modes: vec![Mode::Durable, Mode::Relaxed],
            peers: peers.iter().map(|s| s.to_string()).collect(),
            workloads: all_workloads(),
            exe: Some(PathBuf::from("/bin/true")),
            progress: false,
        }
    }

    #[test]
    fn every_repetition_runs_every_cell_with_rotating_peer_order() {
        let o = opts(&["fjall", "okaywal"]);
        let steps = plan(&o);
        let p = &o.profile;
        let a_b_c = p.a_sizes.len() + p.a_batch_sizes.len() + p.b_cells.len() + p.c_rates.len();
        // D, F, G, H and I run rill alone, once per cell and mode.
        let rill_only = p.d_readers.len() + p.f_cells.len() * p.f_sizes.len() + 1;
        let rill_only = rill_only + p.h_flush_acks.len() + p.i_cells.len();
        let per_rep_durable = a_b_c * 3 + rill_only;
        let per_rep_relaxed = a_b_c * 2 + rill_only;
        let per_rep = 1 + per_rep_durable + per_rep_relaxed + 4;
        assert_eq!(steps.len(), 1 + p.reps * per_rep);
        assert!(steps.iter().all(|s| !(s.peer == "okaywal" && s.mode == Some(Mode::Relaxed))));
        // The first A cell's peers run in a different order in each repetition.
        let firsts: Vec<&str> = (0..p.reps)
            .map(|rep| {
                steps
                    .iter()
                    .find(|s| s.rep == rep && s.workload == Workload::A)
                    .map(|s| s.peer.as_str())
                    .unwrap()
            })
            .collect();
        assert_ne!(firsts[0], firsts[1]);
        // The queues issue's cells: 16 workers over 1k queues, one group
        // and eight, filled as B is.
        let queue_cells: Vec<(usize, usize, usize)> = steps
            .iter()
            .filter(|s| s.rep == 0 && s.mode == Some(Mode::Durable))
            .filter_map(|s| match &s.action {
                Action::Queue(q) => Some((q.streams, q.workers, q.groups)),
                _ => None,
            })
            .collect();
        assert_eq!(queue_cells, vec![(1000, 16, 1), (1000, 16, 8)]);
        assert!(steps.iter().any(|s| matches!(&s.action, Action::Consume(c) if c.streams == 1000)));
    }

    #[test]
    fn the_profiles_hold_the_cells_of_the_targets() {
        use crate::report_targets::{A_1, B_1K, B_1K_MANY, C_RATE};
        let has = |o: &SuiteOptions, w: Workload, mode: Mode, cell: &str, bytes: usize, peer: &str| {
            plan(o).iter().any(|s| {
                s.workload == w
                    && s.mode == Some(mode)
                    && s.cell.starts_with(cell)
                    && s.record_bytes == bytes
                    && s.peer == peer
            })
        };
        let (d, r) = (Mode::Durable, Mode::Relaxed);
        let mut o = opts(&["fjall", "okaywal"]);
        for profile in [Profile::quick(), Profile::full()] {
            o.profile = profile;
            for peer in ["rill", "fjall", "okaywal"] {
                assert!(has(&o, Workload::B, d, B_1K, KIB, peer), "{} {peer}", o.profile.name);
                assert!(has(&o, Workload::B, d, B_1K_MANY, KIB, peer), "{} {peer}", o.profile.name);
                assert!(has(&o, Workload::B, d, B_1K_MANY, 256, peer), "{} {peer}", o.profile.name);
            }
            assert!(has(&o, Workload::B, r, B_1K, KIB, "fjall"));
            assert!(has(&o, Workload::A, d, A_1, 100, "fjall"));
        }
        // The full profile (and `durable`, which runs it) also has these.
        assert!(has(&o, Workload::B, d, B_1K, 16 * KIB, "rill"));
        assert!(has(&o, Workload::C, d, &format!("{C_RATE} "), KIB, "rill"));
        // The append_many cells: 4 clients × 4 calls × 64 items in flight;
        // a peer gets 4 × 64 records per write.
        let many = plan(&o).into_iter().find(|s| s.cell == B_1K_MANY).unwrap();
        let Action::Ingest(shape) = many.action else { panic!("{many:?}") };
        assert_eq!((shape.clients, shape.window, shape.calls), (4, 4, Calls::Many(64)));
        let tiny = SuiteOptions { profile: Profile::tiny(), ..opts(&[]) };
        assert!(plan(&tiny).iter().any(|s| s.cell.ends_with("append_many ×64")));
    }

    #[test]
    fn rotation() {
        assert_eq!(rotated(&[1, 2, 3], 1), vec![2, 3, 1]);
        assert_eq!(rotated(&[1, 2, 3], 3), vec![1, 2, 3]);
        assert!(rotated::<u8>(&[], 2).is_empty());
    }
}
