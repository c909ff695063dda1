//! Three `rill serve --cluster` processes on loopback: the server contract
//! of issue 17, under load, with the leader killed by SIGKILL.
//!
//! A writer sends idempotent-producer appends to the nodes in turn (a
//! follower forwards to the group's leader), retrying a 503 or a broken
//! connection with the same sequence number. Meanwhile the test finds the
//! stream's leader (the one node that serves a request marked as already
//! forwarded), kills it with SIGKILL, and restarts it on the same directory
//! and ports, `RILL_CLUSTER_KILLS` times (default 20). Afterwards, through
//! every node, the stream holds every acknowledged append exactly once and
//! in order, and nothing that was never sent. Each kill's time to the next
//! acknowledged append is printed (the failover time a client sees). Last,
//! with two nodes down, the remaining one answers every write 503 with
//! Retry-After within the request timeout, never a 2xx; such a write may
//! still commit once the cluster heals, and then only after the
//! acknowledged history. After the heal, a read with `Rill-Allow-Stale:
//! true` is served by every node from its own replica (even one that may
//! not forward) and converges on that history.

mod http_support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_support::cluster::{free_port, read_bodies, wait_for_leaders, Node};
use http_support::try_call;

const STREAM: &str = "/v1/stream/cluster-s";

fn headers(seq: u64) -> Vec<(String, String)> {
    vec![
        ("content-type".into(), "text/plain".into()),
        ("producer-id".into(), "p".into()),
        ("producer-epoch".into(), "0".into()),
        ("producer-seq".into(), seq.to_string()),
    ]
}

/// Appends `seq` through `base` until a 2xx (a retry of the same seq is
/// deduplicated, so it lands once).
fn append_until_acked(bases: &[String], start: usize, seq: u64) -> bool {
    let h = headers(seq);
    let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut at = start;
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let base = &bases[at % bases.len()];
        match try_call("POST", &format!("{base}{STREAM}"), &h, format!("{seq};").as_bytes()) {
            Ok(r) if (200..300).contains(&r.status) => return true,
            Ok(r) if r.status == 503 => {}
            Ok(r) => panic!("append {seq} got {}: {}", r.status, r.text()),
            Err(_) => {}
        }
        at += 1;
        std::thread::sleep(Duration::from_millis(20));
    }
    false
}

/// What a minority write's body reads as.
const MINORITY: u64 = u64::MAX;

/// [`read_seqs`], retrying while the healed cluster elects a leader.
fn read_seqs_until_leader(base: &str) -> Vec<u64> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let url = format!("{base}{STREAM}?offset=-1");
        match try_call("GET", &url, &[], b"") {
            Ok(r) if r.status == 200 => return read_seqs(base),
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            other => panic!("no leader through {base} after the heal: {other:?}"),
        }
    }
}

fn read_seqs(base: &str) -> Vec<u64> {
    read_seqs_with(base, &[])
}

/// The stream's seqs read through `base` with `headers` on every request.
fn read_seqs_with(base: &str, headers: &[(&str, &str)]) -> Vec<u64> {
    read_bodies(base, STREAM, headers)
        .iter()
        .map(|t| if t == "minority" { MINORITY } else { t.parse().expect("a seq") })
        .collect()
}

#[test]
fn acknowledged_appends_survive_leader_kills() {
    let kills: usize = std::env::var("RILL_CLUSTER_KILLS").ok().and_then(|v| v.parse().ok()).unwrap_or(20);
    let root = tempfile::tempdir().expect("temp dir");
    let ports: Vec<(u16, u16)> = (0..3).map(|_| (free_port(), free_port())).collect();
    let members: Vec<String> = ports
        .iter()
        .enumerate()
        .map(|(i, (raft, http))| format!("{}=127.0.0.1:{raft}@127.0.0.1:{http}", i + 1))
        .collect();
    let members = members.join(",");
    let mut nodes: Vec<Node> = ports
        .iter()
        .enumerate()
        .map(|(i, (_, http))| {
            let dir = root.path().join(format!("node-{}", i + 1));
            Node::new(i as u64 + 1, dir, format!("127.0.0.1:{http}"), &members)
        })
        .collect();
    for node in &mut nodes {
        node.start();
    }
    let bases: Vec<String> = nodes.iter().map(Node::base).collect();
    // The cluster forms by itself; the create goes through node 1
    // (forwarded when node 1 does not lead).
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let r = try_call("PUT", &format!("{}{STREAM}", bases[0]), &[("content-type", "text/plain")], b"");
        match r {
            Ok(r) if r.status == 201 || r.status == 200 => break,
            Ok(r) if r.status == 503 => {}
            Ok(r) => panic!("create got {}: {}", r.status, r.text()),
            Err(_) => {}
        }
        assert!(Instant::now() < deadline, "no leader within 30 s");
        std::thread::sleep(Duration::from_millis(100));
    }

    // `/metrics` names each group's leader: within a few heartbeats every
    // group has exactly one node that leads it, and every node names it.
    wait_for_leaders(&bases, 8);
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicU64::new(0));
    let last_ack_at = Arc::new(parking_lot::Mutex::new(Instant::now()));
    let writer = {
        let (bases, stop, acked, last) = (bases.clone(), stop.clone(), acked.clone(), last_ack_at.clone());
        std::thread::spawn(move || {
            let mut seq = 0u64;
            while !stop.load(Ordering::Relaxed) {
                assert!(append_until_acked(&bases, seq as usize, seq), "append {seq} never acknowledged");
                seq += 1;
                acked.store(seq, Ordering::Relaxed);
                *last.lock() = Instant::now();
            }
            seq
        })
    };
    let mut failovers = Vec::new();
    let deadline = Instant::now() + Duration::from_secs(60 + 10 * kills as u64);
    while failovers.len() < kills {
        assert!(Instant::now() < deadline, "only {} kills in time", failovers.len());
        std::thread::sleep(Duration::from_millis(300));
        let Some(leader) = (0..3).find(|i| nodes[*i].leads(STREAM)) else { continue };
        let before = acked.load(Ordering::Relaxed);
        let killed_at = Instant::now();
        nodes[leader].kill();
        // Wait for the next acknowledged append: the failover a client sees.
        while acked.load(Ordering::Relaxed) <= before + 1 && killed_at.elapsed() < Duration::from_secs(30) {
            std::thread::sleep(Duration::from_millis(5));
        }
        let took = last_ack_at.lock().saturating_duration_since(killed_at);
        failovers.push(took);
        eprintln!("kill {}: node {} down; next ack after {took:?}", failovers.len(), leader + 1);
        nodes[leader].start();
    }
    std::thread::sleep(Duration::from_millis(300));
    stop.store(true, Ordering::Relaxed);
    let sent = writer.join().expect("writer");
    failovers.sort();
    if !failovers.is_empty() {
        let at = |q: f64| failovers[((failovers.len() - 1) as f64 * q).round() as usize];
        eprintln!(
            "failover over {} kills: median {:?}, p99 {:?}, max {:?}",
            failovers.len(),
            at(0.5),
            at(0.99),
            failovers[failovers.len() - 1]
        );
    }
    assert!(sent > 0, "the writer acknowledged nothing");
    // A minority: with two nodes down, the last one acknowledges nothing
    // (503 within the request timeout, never a 2xx), then the cluster heals.
    nodes[1].kill();
    nodes[2].kill();
    for attempt in 0..3 {
        let url = format!("{}{STREAM}", bases[0]);
        let started = Instant::now();
        let r =
            try_call("POST", &url, &[("content-type", "text/plain")], b"minority;").expect("node 1 answers");
        assert_eq!(r.status, 503, "minority write {attempt} got {}: {}", r.status, r.text());
        assert!(r.header("retry-after").is_some(), "a 503 says when to retry");
        assert!(started.elapsed() < Duration::from_secs(10), "answered within the request timeout");
    }
    nodes[1].start();
    nodes[2].start();
    // Every node (directly or by forwarding) serves the same history:
    // each acknowledged seq once, in order, nothing never sent.
    // A minority write was never acknowledged, yet it may have reached a
    // log and commit after the heal (that is what `NoQuorum` warns of):
    // it may only follow the acknowledged history.
    for base in &bases {
        let seqs = read_seqs_until_leader(base);
        let acked: Vec<u64> = seqs.iter().copied().filter(|s| *s != MINORITY).collect();
        assert_eq!(acked, (0..sent).collect::<Vec<u64>>(), "through {base}");
        let first_minority = seqs.iter().position(|s| *s == MINORITY).unwrap_or(seqs.len());
        assert!(first_minority as u64 >= sent, "a minority write lands only after the acknowledged history");
    }
    // `Rill-Allow-Stale: true`: every node serves its own replica, even a
    // request it may not forward, and each converges on the history the
    // leader serves.
    let history = read_seqs_until_leader(&bases[0]);
    let stale = [("rill-allow-stale", "true"), ("rill-forwarded", "1")];
    for base in &bases {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let head = try_call("HEAD", &format!("{base}{STREAM}"), &stale, b"").expect("stale head");
            assert_eq!(head.status, 200, "a stale HEAD is served by every node");
            if read_seqs_with(base, &stale) == history {
                break;
            }
            assert!(Instant::now() < deadline, "the replica behind {base} never caught up");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
