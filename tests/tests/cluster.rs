//! Embedded cluster mode (`Config::cluster`): three engines in one process,
//! each a node with its own data directory, replicating every group over
//! loopback TCP.
//!
//! Checks: the nodes form the cluster on first start with no other step;
//! a write is answered only by a group's leader and followers answer
//! `NotLeader` (naming the leader once known); every acknowledged write is
//! on every node, in order, after a follower and then the whole cluster
//! restarted from disk, and every replica, read as it stands
//! (`Read::allow_stale`, `Engine::head_stale`), holds the same bytes; under steady writes a
//! node's WAL stays near its `checkpoint_wal_bytes` (raft log checkpoints
//! retire it while the node runs) and a restart still finds every write;
//! a single node's directory refuses cluster mode and a cluster's
//! directory refuses single-node mode.

mod embedded_cluster;

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use bytes::Bytes;
use embedded_cluster::{append_numbered, free_addr, on_leader};
use rill::{Append, ClusterConfig, Config, Create, Engine, ErrorCode, Read, StreamId};

const GROUPS: u32 = 4;

fn cluster(node: u64, addrs: &[SocketAddr]) -> ClusterConfig {
    let mut c = ClusterConfig::new(node)
        .heartbeat(Duration::from_millis(50))
        .election_timeout(Duration::from_millis(300), Duration::from_millis(600))
        .request_timeout(Duration::from_secs(3));
    for (i, addr) in addrs.iter().enumerate() {
        c = c.member(i as u64 + 1, *addr, "");
    }
    c
}

fn open(dir: &std::path::Path, node: u64, addrs: &[SocketAddr]) -> Engine {
    let config = Config::new(dir).cores(1).groups(GROUPS).pin_threads(false).cluster(cluster(node, addrs));
    Engine::open(config).expect("node opens")
}

fn read_all(nodes: &[&Engine], id: &StreamId) -> Bytes {
    on_leader(nodes, |e| {
        futures::executor::block_on(e.read(Read::new(id.clone()).max_len(1 << 20))).map(|r| r.payload)
    })
}

#[test]
fn three_embedded_nodes_replicate_and_survive_restarts() {
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    let addrs: Vec<SocketAddr> = (0..3).map(|_| free_addr()).collect();
    let mut engines: Vec<Option<Engine>> =
        (0..3).map(|i| Some(open(dirs[i].path(), i as u64 + 1, &addrs))).collect();
    let id = StreamId::new("b", "s").expect("id");
    let mut expected = Vec::new();
    {
        let nodes: Vec<&Engine> = engines.iter().flatten().collect();
        on_leader(&nodes, |e| futures::executor::block_on(e.create(Create::new(id.clone()))));
        append_numbered(&nodes, &id, 0..20, &mut expected);
        assert_eq!(read_all(&nodes, &id), expected);
        // Followers refuse, naming a leader.
        let refusals: Vec<rill::Error> = nodes
            .iter()
            .filter_map(|e| futures::executor::block_on(e.append(Append::new(id.clone(), "x"))).err())
            .collect();
        assert!(refusals.len() >= 2, "at most one node leads the group");
        for err in &refusals {
            assert_eq!(err.code(), ErrorCode::NotLeader, "{err}");
        }
        // The one write that was accepted, if any, is part of the history.
        if refusals.len() == 2 {
            expected.extend_from_slice(b"x");
        }
    }
    // Restart one node, then all of them; nothing acknowledged is lost.
    let one = engines[1].take().expect("node 2");
    futures::executor::block_on(one.shutdown()).expect("node 2 stops");
    drop(one);
    engines[1] = Some(open(dirs[1].path(), 2, &addrs));
    {
        let nodes: Vec<&Engine> = engines.iter().flatten().collect();
        append_numbered(&nodes, &id, 20..30, &mut expected);
        assert_eq!(read_all(&nodes, &id), expected);
    }
    for slot in engines.iter_mut() {
        let engine = slot.take().expect("node");
        futures::executor::block_on(engine.shutdown()).expect("node stops");
    }
    let engines: Vec<Engine> = (0..3).map(|i| open(dirs[i].path(), i as u64 + 1, &addrs)).collect();
    let nodes: Vec<&Engine> = engines.iter().collect();
    assert_eq!(read_all(&nodes, &id), expected, "the whole cluster restarted with every acknowledged write");
    // Every replica, read as it stands (`allow_stale`, served by followers
    // too), converges to the same bytes.
    for (i, node) in nodes.iter().enumerate() {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let read = Read::new(id.clone()).max_len(1 << 20).allow_stale(true);
            let got = futures::executor::block_on(node.read(read)).map(|r| r.payload);
            // `head_stale` answers from the replica too, and agrees.
            let tail = futures::executor::block_on(node.head_stale(&id)).map(|h| h.tail_offset);
            if got.as_ref().is_ok_and(|b| *b == expected)
                && tail.as_ref().is_ok_and(|t| *t == expected.len() as u64)
            {
                break;
            }
            assert!(Instant::now() < deadline, "replica {} never converged: {got:?}", i + 1);
            std::thread::sleep(Duration::from_millis(50));
        }
    }
    for engine in engines {
        futures::executor::block_on(engine.shutdown()).expect("node stops");
    }
    // A cluster's directory refuses to open as a single node.
    let err =
        Engine::open(Config::new(dirs[0].path()).cores(1).groups(GROUPS).pin_threads(false)).unwrap_err();
    assert_eq!(err.code(), ErrorCode::ShapeMismatch, "{err}");
}

#[test]
fn a_single_nodes_data_refuses_cluster_mode() {
    let dir = tempfile::tempdir().expect("dir");
    let single =
        Engine::open(Config::new(dir.path()).cores(1).groups(GROUPS).pin_threads(false)).expect("opens");
    let id = StreamId::new("b", "s").expect("id");
    futures::executor::block_on(single.create(Create::new(id))).expect("create");
    futures::executor::block_on(single.shutdown()).expect("stops");
    let addrs: Vec<SocketAddr> = (0..3).map(|_| free_addr()).collect();
    let config =
        Config::new(dir.path()).cores(1).groups(GROUPS).pin_threads(false).cluster(cluster(1, &addrs));
    let err = Engine::open(config).unwrap_err();
    assert_eq!(err.code(), ErrorCode::ShapeMismatch, "{err}");
}

/// Bytes of every file under `dir` (recursively).
fn dir_bytes(dir: &std::path::Path) -> u64 {
    std::fs::read_dir(dir).map_or(0, |entries| {
        entries
            .map(|e| e.expect("dir entry").path())
            .map(|p| if p.is_dir() { dir_bytes(&p) } else { p.metadata().map_or(0, |m| m.len()) })
            .sum()
    })
}

#[test]
fn a_replicated_wal_is_retired_while_the_node_runs() {
    const STREAMS: usize = 4;
    const APPENDS: usize = 300;
    const WAL_BYTES: u64 = 256 << 10;
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().expect("dir")).collect();
    let addrs: Vec<SocketAddr> = (0..3).map(|_| free_addr()).collect();
    let open_small = |i: usize| {
        let config = Config::new(dirs[i].path())
            .cores(1)
            .groups(GROUPS)
            .pin_threads(false)
            .wal_segment_bytes(64 << 10)
            .checkpoint_wal_bytes(WAL_BYTES)
            .cluster(cluster(i as u64 + 1, &addrs));
        Engine::open(config).expect("node opens")
    };
    let engines: Vec<Engine> = (0..3).map(open_small).collect();
    let ids: Vec<StreamId> = (0..STREAMS).map(|s| StreamId::new("b", format!("s{s}")).expect("id")).collect();
    let nodes: Vec<&Engine> = engines.iter().collect();
    for id in &ids {
        on_leader(&nodes, |e| futures::executor::block_on(e.create(Create::new(id.clone()))));
    }
    // One writer per stream, so records of several groups interleave in
    // each WAL while its raft log checkpoints run.
    let body = |s: usize, i: usize| format!("<{s}:{i:04}>").repeat(100);
    std::thread::scope(|scope| {
        for (s, id) in ids.iter().enumerate() {
            let nodes = &nodes;
            scope.spawn(move || {
                for i in 0..APPENDS {
                    on_leader(nodes, |e| {
                        futures::executor::block_on(e.append(Append::new(id.clone(), body(s, i))))
                    });
                }
            });
        }
    });
    let written = (STREAMS * APPENDS * body(0, 0).len()) as u64;
    // The WAL holds about WAL_BYTES and a segment or two, not the history.
    std::thread::sleep(Duration::from_millis(300));
    for (i, dir) in dirs.iter().enumerate() {
        let wal = dir_bytes(&dir.path().join("wal"));
        assert!(wal < written / 2, "node {}: a {wal} byte WAL after {written} bytes of appends", i + 1);
    }
    for engine in engines {
        futures::executor::block_on(engine.shutdown()).expect("node stops");
    }
    let engines: Vec<Engine> = (0..3).map(open_small).collect();
    let nodes: Vec<&Engine> = engines.iter().collect();
    for (s, id) in ids.iter().enumerate() {
        let expected: String = (0..APPENDS).map(|i| body(s, i)).collect();
        assert_eq!(read_all(&nodes, id), expected.as_bytes(), "stream {s} after the restart");
    }
    for engine in engines {
        futures::executor::block_on(engine.shutdown()).expect("node stops");
    }
}

/// Leadership ends up on each group's preferred node (the members in id
/// order, one group after another), whoever won the first elections, and
/// stays there: the nodes hand groups over with openraft's leadership
/// transfer, over the real transport.
#[test]
fn each_group_ends_up_led_by_its_preferred_node() {
    let addrs: Vec<SocketAddr> = (0..3).map(|_| free_addr()).collect();
    let dirs: Vec<tempfile::TempDir> = (0..3).map(|_| tempfile::tempdir().expect("temp dir")).collect();
    let engines: Vec<Engine> = (0..3).map(|i| open(dirs[i].path(), i as u64 + 1, &addrs)).collect();
    let leaders = |engines: &[Engine]| -> Vec<Vec<u64>> {
        engines.iter().map(|e| e.metrics().groups.iter().map(|g| g.raft_leader).collect()).collect()
    };
    let preferred: Vec<u64> = (0..GROUPS as u64).map(|g| g % 3 + 1).collect();
    let deadline = Instant::now() + Duration::from_secs(30);
    while leaders(&engines).iter().any(|seen| *seen != preferred) {
        assert!(Instant::now() < deadline, "leaders {:?}, preferred {preferred:?}", leaders(&engines));
        std::thread::sleep(Duration::from_millis(100));
    }
    let terms = |engines: &[Engine]| -> Vec<u64> {
        engines[0].metrics().groups.iter().map(|g| g.raft_term).collect()
    };
    let settled = terms(&engines);
    std::thread::sleep(Duration::from_secs(2));
    assert_eq!(terms(&engines), settled, "no election once every group is where it belongs");
    assert!(leaders(&engines).iter().all(|seen| *seen == preferred));
    for engine in engines {
        futures::executor::block_on(engine.shutdown()).expect("node stops");
    }
}
