//! Replicas whose raft logs live in real write-ahead logs on disk: records
//! go through `WalJournal` into WAL segments; a restart recovers them
//! (`recovery::recover`), rebuilds the raft log, consolidates it into the
//! group's raft log file and rejoins from its checkpoint file (replicas
//! checkpoint every 5 entries and purge the log below). A follower restarted twice catches up
//! and converges; a whole cluster stopped and restarted keeps every
//! acknowledged write. Every restart also replays a crash in the middle of
//! consolidation (the raft log file rewritten, the segments it covers not
//! yet removed) and must rebuild the same raft log. Raft log checkpoints
//! taken while the replicas run let their WALs retire segments, and the
//! records they held come back from the raft log files.

use std::path::Path;
use std::rc::Rc;
use std::time::Duration;

use openraft::async_runtime::WatchReceiver;
use openraft::AsyncRuntime;

use super::checkpoint::DirCheckpoints;
use super::replica::{restore, timings};
use super::cluster_tests::{append, by_id, create, members, snapshot_of, wait_converged, wait_for_leader};
use super::cluster_tests::{Client, Count, Replica};
use super::journal::WalJournal;
use super::log_checkpoint::LogCheckpoints;
use super::log_image::LogImage;
use super::log_store::GroupLog;
use super::mem_net::{GroupRaft, MemNet};
use super::rt::GlommioRt;
use super::state_machine::GroupMachine;
use super::types::{NodeId, StoredMembership};
use super::wire::RaftRecord;
use crate::protocol::pins::WalPins;
use crate::state::group::{GroupLimits, GroupState};
use crate::state::name::StreamId;
use crate::wal::recovery::{self, wal_dir};
use crate::wal::{Durability, WalConfig, WalIo, WalLog};

fn wal_config() -> WalConfig {
    WalConfig { durability: Durability::Fsync, io: WalIo::Std, segment_bytes: 1 << 20, buffer_bytes: 1 << 20 }
}

/// The segments of core 0's WAL under `dir`, with their bytes.
fn segments(dir: &Path) -> Vec<(std::path::PathBuf, Vec<u8>)> {
    let mut found: Vec<_> = std::fs::read_dir(wal_dir(dir, 0))
        .map(|entries| entries.map(|e| e.expect("dir entry").path()).collect())
        .unwrap_or_default();
    found.sort();
    found.into_iter().map(|p| (p.clone(), std::fs::read(&p).expect("segment reads"))).collect()
}

/// Recovers `dir` and consolidates it; returns the rebuilt raft log, the
/// number of raft records recovery found and the first LSN of the run.
fn recover_and_consolidate(dir: &Path) -> (LogImage, usize, u64) {
    let mut recovered = recovery::recover(dir, 1, &GroupLimits::default()).expect("recovers");
    let found = recovered.raft[0].len();
    let image = LogImage::rebuild(&recovered.raft[0]).expect("the raft log rebuilds");
    recovered.raft[0] = image.compacted().iter().map(RaftRecord::encode).collect();
    recovery::consolidate(dir, &recovered, 1).expect("consolidates");
    (image, found, recovered.next_lsn)
}

/// A replica started from disk, with its log and raft log checkpoints.
struct OnDisk {
    replica: Replica,
    /// Raft records recovery found.
    found: usize,
    /// Whether it started from a checkpoint file.
    checkpoint: bool,
    log: GroupLog,
    log_checkpoints: LogCheckpoints,
}

/// Recovers replica `id` from `dir` and starts it.
async fn start_from_disk(net: &MemNet, id: NodeId, dir: &Path) -> OnDisk {
    let limits = GroupLimits::default();
    let kept = segments(dir);
    let (image, found, _) = recover_and_consolidate(dir);
    // A crash after the raft log file was rewritten but before the segments
    // went: the file's `through` covers them, nothing is applied twice.
    for (path, bytes) in &kept {
        std::fs::write(path, bytes).expect("segment restored");
    }
    let (again, _, next_lsn) = recover_and_consolidate(dir);
    assert_eq!(again, image, "replica {id}: recovery after an interrupted consolidation differs");
    let config = wal_config();
    let wal: Rc<dyn crate::wal::log::LogStore> =
        Rc::new(WalLog::start_at(config.open_dir(&wal_dir(dir, 0)), 0, config, next_lsn));
    let pins = Rc::new(std::cell::RefCell::new(WalPins::new()));
    let wal_journal = WalJournal::new(wal, pins);
    let log_checkpoints = LogCheckpoints::new(wal_journal.clone(), recovery::checkpoint_dir(dir));
    let log = GroupLog::new(0, Rc::new(wal_journal), image);
    // Checkpoints every 5 entries, 2 kept below: restarts start from a
    // checkpoint file and a log purged below it.
    let checkpoints = DirCheckpoints::new(recovery::checkpoint_dir(dir));
    let (machine, found_checkpoint) = match checkpoints.load(0).expect("the checkpoint reads") {
        Some(checkpoint) => {
            let (state, applied, membership, snapshot) = restore(&checkpoint, &limits).expect("restores");
            let machine = GroupMachine::new(state, applied, membership, Rc::new(Count::default()));
            (machine.with_checkpoints(Rc::new(checkpoints), Some(snapshot)), true)
        }
        None => {
            let state = GroupState::new(0, 1, limits);
            let machine = GroupMachine::new(state, None, StoredMembership::default(), Rc::new(Count::default()));
            (machine.with_checkpoints(Rc::new(checkpoints), None), false)
        }
    };
    let config = timings(50, (300, 600), Some((5, 2))).expect("valid timings");
    let raft = GroupRaft::new(id, config, net.factory(id), log.clone(), machine.clone()).await.expect("raft starts");
    net.attach(id, raft.clone());
    OnDisk { replica: Replica { id, raft, machine }, found, checkpoint: found_checkpoint, log, log_checkpoints }
}

async fn stop(net: &MemNet, replica: Replica) {
    net.detach(replica.id);
    replica.raft.shutdown().await.expect("raft stops");
    drop(replica);
    // Let the log's tasks see their handles dropped.
    GlommioRt::sleep(Duration::from_millis(20)).await;
}

/// Writes through whichever replica leads, retrying while a leader is
/// being (re)established: a restarted replica may still name the leader
/// its stored vote names until a heartbeat or an election settles it.
async fn write(replicas: &[Replica], proposal: super::types::Proposal) {
    for _ in 0..200 {
        let leader = wait_for_leader(&replicas.iter().collect::<Vec<_>>()).await;
        match by_id(replicas, leader).raft.client_write(proposal.clone()).await {
            Ok(_) => return,
            Err(openraft::error::RaftError::APIError(openraft::error::ClientWriteError::ForwardToLeader(_))) => {
                GlommioRt::sleep(Duration::from_millis(50)).await;
            }
            Err(other) => panic!("write failed: {other}"),
        }
    }
    panic!("no leader took the write within 10 s");
}

fn tail(replica: &Replica) -> Option<u64> {
    replica.machine.with_state(|s| s.stream(&StreamId::new("b", "s").unwrap()).map(|s| s.next_offset()))
}

#[test]
fn raft_logs_in_the_wal_survive_restarts() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().expect("temp dir")).collect();
    let paths: Vec<std::path::PathBuf> = dirs.iter().map(|d| d.path().to_path_buf()).collect();
    let mut rt = GlommioRt::new(1);
    rt.block_on(async move {
        let net = MemNet::new();
        let mut replicas = Vec::new();
        for (i, path) in paths.iter().enumerate() {
            let OnDisk { replica, found, checkpoint, .. } = start_from_disk(&net, i as NodeId + 1, path).await;
            assert_eq!((found, checkpoint), (0, false), "a fresh directory has no raft records");
            replicas.push(replica);
        }
        replicas[0].raft.initialize(members()).await.expect("initialize");
        let leader = wait_for_leader(&replicas.iter().collect::<Vec<_>>()).await;
        let mut client = Client::default();
        write(&replicas, client.proposal(create("s"))).await;
        for _ in 0..10 {
            write(&replicas, client.proposal(append("s", b"0123456789"))).await;
        }
        wait_converged(&replicas.iter().collect::<Vec<_>>()).await;

        // Stop a follower, write on without it, restart it from its WAL.
        let follower = replicas.iter().map(|r| r.id).find(|id| *id != leader).unwrap();
        for round in 0..2 {
            let at = replicas.iter().position(|r| r.id == follower).unwrap();
            let replica = replicas.remove(at);
            stop(&net, replica).await;
            for _ in 0..5 {
                write(&replicas, client.proposal(append("s", b"abcde"))).await;
            }
            let OnDisk { replica, found, checkpoint, .. } =
                start_from_disk(&net, follower, &paths[follower as usize - 1]).await;
            assert!(found > 0 && checkpoint, "round {round}: {found} raft records, checkpoint {checkpoint}");
            replicas.push(replica);
            wait_converged(&replicas.iter().collect::<Vec<_>>()).await;
        }
        let expected = snapshot_of(&replicas[0]);
        for replica in &replicas {
            assert_eq!(snapshot_of(replica), expected, "replica {} differs", replica.id);
            assert_eq!(tail(replica), Some(10 * 10 + 2 * 5 * 5));
        }

        // Stop everything; restart from disk; every acknowledged write is there.
        let last = replicas[0].raft.metrics().borrow_watched().last_applied;
        for replica in replicas.drain(..) {
            stop(&net, replica).await;
        }
        for (i, path) in paths.iter().enumerate() {
            let OnDisk { replica, found, checkpoint, .. } = start_from_disk(&net, i as NodeId + 1, path).await;
            assert!(found > 0 && checkpoint, "node {}: {found} raft records, checkpoint {checkpoint}", i + 1);
            replicas.push(replica);
        }
        // The write commits in the new leader's term, which applies
        // everything before it on every replica.
        write(&replicas, client.proposal(append("s", b"z"))).await;
        let all: Vec<&Replica> = replicas.iter().collect();
        wait_converged(&all).await;
        assert!(replicas[0].machine.applied().map(|a| a.index) > last.map(|a| a.index));
        for replica in &replicas {
            assert_eq!(tail(replica), Some(10 * 10 + 2 * 5 * 5 + 1), "replica {} lost a write", replica.id);
            assert_eq!(snapshot_of(replica), snapshot_of(&replicas[0]));
        }
        for replica in replicas.drain(..) {
            stop(&net, replica).await;
        }
    });
    drop(dirs);
}

#[test]
fn raft_log_checkpoints_let_the_wal_retire() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().expect("temp dir")).collect();
    let paths: Vec<std::path::PathBuf> = dirs.iter().map(|d| d.path().to_path_buf()).collect();
    let mut rt = GlommioRt::new(1);
    rt.block_on(async move {
        let net = MemNet::new();
        let mut nodes = Vec::new();
        for (i, path) in paths.iter().enumerate() {
            nodes.push(start_from_disk(&net, i as NodeId + 1, path).await);
        }
        nodes[0].replica.raft.initialize(members()).await.expect("initialize");
        let replicas = |nodes: &[OnDisk]| nodes.iter().map(|n| n.replica.clone()).collect::<Vec<Replica>>();
        let mut client = Client::default();
        write(&replicas(&nodes), client.proposal(create("s"))).await;
        // 1 MiB segments: 400 appends of 8 KiB fill three of them.
        static PAYLOAD: [u8; 8 << 10] = [7; 8 << 10];
        for _ in 0..400 {
            write(&replicas(&nodes), client.proposal(append("s", &PAYLOAD))).await;
        }
        wait_converged(&replicas(&nodes).iter().collect::<Vec<_>>()).await;
        for node in &nodes {
            let before = segments(&paths[node.replica.id as usize - 1]).len();
            let run = node.log_checkpoints.run(&[(0, node.log.clone())]).await.expect("checkpoint runs");
            let after = segments(&paths[node.replica.id as usize - 1]).len();
            assert_eq!(run.groups, 1);
            assert!(run.bytes > 0 && run.retired_through > 0, "{run:?}");
            assert!(after < before, "node {}: {before} segments before the checkpoint, {after} after", node.replica.id);
            // Snapshots every 5 entries purge the log: the file is small.
            assert!(run.bytes < 64 << 10, "node {}: a {} byte raft log file", node.replica.id, run.bytes);
        }
        // More writes after the checkpoint, then every node stops at once.
        for _ in 0..20 {
            write(&replicas(&nodes), client.proposal(append("s", b"after"))).await;
        }
        wait_converged(&replicas(&nodes).iter().collect::<Vec<_>>()).await;
        for node in nodes.drain(..) {
            stop(&net, node.replica).await;
        }
        for (i, path) in paths.iter().enumerate() {
            let node = start_from_disk(&net, i as NodeId + 1, path).await;
            assert!(node.found > 0, "node {}: no raft records came back", i + 1);
            nodes.push(node);
        }
        write(&replicas(&nodes), client.proposal(append("s", b"z"))).await;
        wait_converged(&replicas(&nodes).iter().collect::<Vec<_>>()).await;
        for node in &nodes {
            assert_eq!(tail(&node.replica), Some(400 * (8 << 10) + 20 * 5 + 1), "replica {} lost a write", node.replica.id);
        }
        for node in nodes.drain(..) {
            stop(&net, node.replica).await;
        }
    });
    drop(dirs);
}
