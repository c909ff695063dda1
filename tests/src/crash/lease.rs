//! The crash workload's lease writer: one consumer group's lease and
//! committed offset on a stream of its own, driven across every cycle.
//!
//! Each child acquires the lease of consumer group `readers` on
//! `leases/work` as owner `child` (for an hour, so it never lapses between
//! cycles) and prints `K <generation>` once the acquire is acknowledged;
//! then, over and over, appends a record, prints `N <offset>` before it
//! commits that tail and `M <committed>` once the commit is acknowledged.
//! Invariants the parent checks (`transcript.rs`, `verify.rs`): every
//! acknowledged acquire's generation is above every earlier acknowledged
//! one (an acknowledged acquire that a crash lost would hand the same
//! generation out twice); acknowledged commits never go back; after each
//! recovery the committed offset is at least the last acknowledged commit
//! and at most the highest offset ever sent.

use std::sync::Arc;
use std::time::Duration;

use rill::{AcquireLease, Append, Create, Engine, StreamId};

use super::child::Sink;
use super::rng::{mix, Rng};

const TAG_LEASE: u64 = 5;

/// The consumer group of the lease writer.
pub const LEASE_GROUP: &str = "readers";

/// The stream of the lease writer.
pub fn lease_stream() -> StreamId {
    StreamId::new("leases", "work").expect("a valid stream name")
}

/// Acquires the lease, then appends and commits until the sink refuses a
/// line (the process is being killed). Engine errors are retried after a
/// pause, never fatal: under an injected fault a core may refuse all.
pub async fn lease_loop(engine: Engine, seed: u64, cycle: u32, sink: Arc<dyn Sink>) {
    let mut rng = Rng::new(mix(&[seed, TAG_LEASE, cycle.into()]));
    let id = lease_stream();
    let lease = loop {
        let _ = engine.create(Create::new(id.clone())).await;
        let req = AcquireLease::new(&id, LEASE_GROUP, "child").ttl(Duration::from_secs(3600));
        match engine.acquire_lease(req).await {
            Ok(lease) => break lease,
            Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
        }
    };
    if !sink.emit(&format!("K {}", lease.generation)) {
        return;
    }
    loop {
        let Ok(put) = engine.append(Append::new(id.clone(), format!("c{cycle}-{};", rng.next_u64()))).await
        else {
            tokio::time::sleep(Duration::from_millis(20)).await;
            continue;
        };
        if !sink.emit(&format!("N {}", put.next_offset)) {
            return;
        }
        if let Ok(committed) = engine.commit_offset(&lease, put.next_offset).await {
            if !sink.emit(&format!("M {committed}")) {
                return;
            }
        }
        tokio::time::sleep(Duration::from_millis(rng.range(2, 15))).await;
    }
}
