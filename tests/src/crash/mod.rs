//! The crash-recovery workload: what the `crash_child` binary does to an
//! engine until it is killed (or its power is cut), and the model the
//! parent test checks the recovered engine against (SPEC §2, §6). This
//! file owns the shared constants and the engine configurations; each
//! section lives in its own file (listed under "Files" below). Both the
//! kill -9 crash test (`tests/tests/crash.rs`) and the power-loss test
//! (`tests/tests/power_loss.rs`) use it.
//!
//! # What the crash test proves
//!
//! A child process runs a deterministic workload and writes a transcript
//! line before it sends each operation and another after the reply comes
//! back. The parent kills it with `SIGKILL` at a random moment, reopens the
//! data directory and checks, for every stream the transcript names:
//!
//! * every acknowledged operation is there: each acknowledged append holds
//!   the same bytes at the same offsets it was acknowledged with, an
//!   acknowledged close is closed, an acknowledged delete is gone unless a
//!   later create brought the name back;
//! * nothing else is there: the stream is exactly the state reached by a
//!   prefix of the operations sent to it. Since one writer drives a stream
//!   and sends its next operation only after the previous reply, at most one
//!   operation per stream is in flight when the child dies; it may or may
//!   not have landed, but never partly, twice, or after a hole;
//! * the recovered state is whole: `head` agrees with the bytes read
//!   (tail offset, closed, content type, append count and the integrity
//!   set-sum over the exact record boundaries);
//! * idempotent producers survive the crash: when the operation in flight
//!   was a producer append, the next child resends it with the same
//!   producer seq, and the engine must answer it as a duplicate with the
//!   original offsets if it had landed before the kill, or apply it once at
//!   the current tail if it had not. It is never applied twice;
//! * queues are at-least-once and lose nothing (`queue.rs`): no message is
//!   delivered to a group again after its ack was acknowledged, and after
//!   the parent drains both groups every acknowledged append was acked
//!   exactly once per group, with nothing left ready, in flight or dead.
//!
//! The parent keeps every stream of every earlier cycle in its model and
//! checks all of them after each kill, so an operation that survived one
//! crash must survive all the later ones too. Once the parent has seen an
//! in-flight operation in the recovered state it counts as committed.
//!
//! # Workload
//!
//! Each stream has a script: a sequence of operations generated from the
//! seed and the stream's name alone, so the parent regenerates every
//! operation (payload bytes included) from the transcript's
//! `(stream, op number)`. A script creates the stream (some with a content
//! type, some with an initial payload), appends (plain, as an idempotent
//! producer `w<incarnation>` at epoch 0 with seqs counting up, and in
//! batches of 2 to 5 payloads), closes (with `close` or an append with
//! `close_after`, the only appends that may be empty), appends to a closed
//! stream (expecting `StreamClosed`), deletes, probes the deleted name
//! (expecting not found) and creates it again. Payload sizes are uniform in
//! `1..=2000` bytes. Each cycle runs [`WRITERS`] writer tasks at once; each
//! takes new streams named after the cycle one after the other (writer `w`
//! takes indexes `w`, `w + WRITERS`, ...) until the child is killed or the
//! cycle's [`OP_BUDGET`] is spent. Each stream carried over for a resend
//! gets a writer of its own, which sends the resend first and then goes on
//! with the rest of that stream's script.
//!
//! # Transcript
//!
//! One line per event, written with a single `write` and flushed:
//!
//! ```text
//! O                                      the engine is open, the workload starts
//! S <stream> <opno>                      about to send op <opno> of <stream>
//! A <stream> <opno> <start> <next> [dedup]
//!                                        the op succeeded: byte range [start, next) for
//!                                        appends and batches (the whole batch), 0 <next>
//!                                        for a create, <tail> <tail> for a close, 0 0
//!                                        for a delete; `dedup` when the engine answered
//!                                        it as a repeat (a deduplicated producer append
//!                                        or batch, an existing stream, a closed stream)
//! E <stream> <opno> <error code>         the op failed with this `ErrorCode::as_str()`
//! F <stream> <opno> <error code>         the op failed with a persistent-class error (the
//!                                        engine is unhealthy): its fate is unknown, the
//!                                        writer of the stream stops (allowed only where
//!                                        the test injected a fault)
//! G <stream> poisoned                    after an `F`, a `head` of the stream failed with a
//!                                        persistent error too (else `answered:<what>`)
//! U <bucket>                             about to purge the bucket (power-loss workload)
//! V <bucket> <streams removed>           the purge was acknowledged
//! W <bucket> <error code>                the purge failed
//! K <generation>                         the lease writer acquired its lease (`lease.rs`)
//! N <offset>                             the lease writer is about to commit this offset
//! M <committed>                          the commit was acknowledged: the committed offset
//! P <tag>                                the queue producer is about to append `<tag>` (`queue.rs`)
//! Q <tag> <offset>                       that append was acknowledged at <offset>
//! R <group> <offset> <receipt>           a queue worker of <group> was handed this delivery
//! X <group> <offset> <receipt>           about to ack that delivery
//! Y <group> <offset> <receipt>           the ack was acknowledged
//! D                                      the op budget is spent; the child idles
//! ```
//!
//! `<stream>` is `c<cycle>s<index>` (see [`StreamKey`]). The resend file the
//! parent passes to the next child has one line per carried stream:
//! `<stream> <opno> <producer id> <producer seq>` (see [`Resend`]).
//!
//! # Files
//!
//! * `rng.rs`: the deterministic randomness every side derives from the seed;
//! * `ops.rs`: stream keys, payloads, operations and replies as the
//!   transcript records them;
//! * `script.rs`: the expected state of a stream and the scripts that
//!   generate its operations;
//! * `child.rs`: the child's side, driving scripts and writing transcript lines;
//! * `purge.rs`: the power-loss workload's purges (with markers whose bytes
//!   must vanish) and on-demand maintenance;
//! * `lease.rs`: the lease writer (a fenced lease and its committed offset,
//!   acquired and advanced across every cycle);
//! * `queue.rs`: the queue producer and workers (two queue groups on one
//!   stream, receive, ack, nack, visibility expiry) and the parent's drain;
//! * `process.rs`: running a child process, killing it, collecting its transcript;
//! * `transcript.rs`: the parent's model, built from the children's transcripts;
//! * `verify.rs`: reading streams back from an engine and checking them
//!   against the model.

mod child;
mod lease;
mod ops;
pub mod process;
pub mod purge;
mod queue;
mod rng;
mod script;
#[cfg(test)]
mod tests;
mod transcript;
mod verify;

use std::path::Path;

use rill::{Config, Durability, ErrorCode, WalIo};

pub use child::{run_workload, run_workload_with, Extras, Resend, Sink};
pub use ops::{payload, Expect, Op, OpKind, Outcome, StreamKey};
pub use queue::QueueLog;
pub use rng::{mix, Rng};
pub use script::{Live, Record, Script, StreamState};
pub use transcript::{Model, TranscriptReport};
pub use verify::{compare, observe, Observed, PresentStream, VerifyReport};

/// Cores of every engine the crash test opens (child and parent alike).
pub const CORES: usize = 2;
/// Groups of every engine the crash test opens.
pub const GROUPS: u32 = 16;
/// Buckets the streams are spread over.
pub const BUCKETS: u32 = 4;
/// Writer tasks of a cycle (streams written concurrently), resends aside.
pub const WRITERS: u32 = 48;
/// Ops one cycle may send at most: far more than a child gets through
/// before the kill, so that the kill lands in the middle of the work.
pub const OP_BUDGET: u64 = 50_000;
/// Shortest and longest script, in operations.
pub const SCRIPT_OPS: (u64, u64) = (40, 160);
/// Largest payload of one append or batch item.
pub const MAX_PAYLOAD: u64 = 2000;

pub(crate) const TAG_SCRIPT: u64 = 1;
pub(crate) const TAG_PAYLOAD: u64 = 2;
/// Domain tag for randomness outside the scripts (the parent's delays).
pub const TAG_PARENT: u64 = 3;

pub(crate) const JSON: &str = "application/json";
pub(crate) const TEXT: &str = "text/plain";

/// Codes of a stream that does not exist (a bucket left without streams
/// may or may not be remembered).
pub const NOT_FOUND: &[ErrorCode] = &[ErrorCode::StreamNotFound, ErrorCode::BucketNotFound];
pub(crate) const CLOSED: &[ErrorCode] = &[ErrorCode::StreamClosed];

/// The engine configuration of the crash test, on `dir`: small cold-tier
/// and checkpoint thresholds so kills also land in the middle of flushes,
/// reclamation, compaction and checkpoints.
pub fn engine_config(dir: &Path) -> Config {
    Config::new(dir)
        .cores(CORES)
        .groups(GROUPS)
        .min_hot_bytes(16 * 1024)
        .flush_interval(std::time::Duration::from_millis(10))
        .max_batch_bytes(64 * 1024)
        .compaction(8 * 1024, 256 * 1024, std::time::Duration::from_millis(0))
        .wal_segment_bytes(256 * 1024)
        .checkpoint_wal_bytes(1024 * 1024)
}

/// How often [`relaxed_config`] syncs: far longer than any cycle, so that
/// only segment rotations and checkpoints sync the log before the kill.
pub const RELAXED_SYNC: std::time::Duration = std::time::Duration::from_secs(600);

/// The crash test's configuration in the relaxed durability
/// (`Durability::Interval`, WAL segments written through the page cache by
/// the default `WalIo`): what `kill -9` must not lose either.
pub fn relaxed_config(dir: &Path) -> Config {
    engine_config(dir).durability(Durability::Interval(RELAXED_SYNC))
}

/// The engine configuration of the power-loss test: the crash test's, with
/// the WAL on standard I/O (`pwrite` + `fdatasync`: a FUSE file system
/// offers no `O_DIRECT` writes to a block device the way a disk file system
/// does, so the default DMA WAL cannot run there) and checkpoints at a
/// quarter of the WAL bytes and at least every 200 ms, so power cuts land
/// around checkpoint renames and WAL retirements too.
pub fn power_loss_config(dir: &Path) -> Config {
    engine_config(dir)
        .wal_io(WalIo::Std)
        .checkpoint_wal_bytes(256 * 1024)
        .checkpoint_interval(std::time::Duration::from_millis(200))
}
