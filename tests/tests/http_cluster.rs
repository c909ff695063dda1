//! Three `rill serve --cluster` processes on loopback: the server contract
//! of issue 17, under load, with the leader killed by SIGKILL.
//!
//! Three writers, each an idempotent producer of its own, send appends to
//! the nodes in turn (a follower forwards to the group's leader), retrying
//! a 503 or a broken connection with the same sequence number, and record
//! when each append was first sent and when it was acknowledged. Meanwhile
//! the test finds the
//! stream's leader (the one node that serves a request marked as already
//! forwarded), kills it with SIGKILL, and restarts it on the same directory
//! and ports, `RILL_CLUSTER_KILLS` times (default 20). Afterwards, through
//! every node, the stream holds every acknowledged append exactly once,
//! each writer's in its order, nothing that was never sent, and the
//! history is linearizable: an append acknowledged before another was
//! first sent stands before it in the stream. Each kill's time to the next
//! acknowledged append is printed (the failover time a client sees). Last,
//! with two nodes down, the remaining one answers every write 503 with
//! Retry-After within the request timeout, never a 2xx; such a write may
//! still commit once the cluster heals, and then only after the
//! acknowledged history. After the heal, a read with `Rill-Allow-Stale:
//! true` is served by every node from its own replica (even one that may
//! not forward) and converges on that history within 10 s plus a second
//! per 10,000 appends (the time each took is printed).

mod http_support;

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use http_support::cluster::{free_port, read_bodies, wait_for_leaders, Node};
use http_support::try_call;

const STREAM: &str = "/v1/stream/cluster-s";

/// Concurrent writers, each its own producer.
const WRITERS: usize = 3;

fn headers(writer: usize, seq: u64) -> Vec<(String, String)> {
    vec![
        ("content-type".into(), "text/plain".into()),
        ("producer-id".into(), format!("p{writer}")),
        ("producer-epoch".into(), "0".into()),
        ("producer-seq".into(), seq.to_string()),
    ]
}

/// Appends writer `writer`'s `seq` (body `writer:seq;`) through the nodes
/// in turn until a 2xx (a retry of the same seq is deduplicated, so it
/// lands once).
fn append_until_acked(bases: &[String], start: usize, writer: usize, seq: u64) -> bool {
    let h = headers(writer, seq);
    let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    let mut at = start;
    let deadline = Instant::now() + Duration::from_secs(60);
    while Instant::now() < deadline {
        let base = &bases[at % bases.len()];
        match try_call("POST", &format!("{base}{STREAM}"), &h, format!("{writer}:{seq};").as_bytes()) {
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

/// A minority write's body.
const MINORITY: &str = "minority";

/// The stream's bodies through `base`, retrying while the healed cluster
/// elects a leader.
fn read_until_leader(base: &str) -> Vec<String> {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let url = format!("{base}{STREAM}?offset=-1");
        match try_call("GET", &url, &[], b"") {
            Ok(r) if r.status == 200 => return read_bodies(base, STREAM, &[]),
            _ if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
            other => panic!("no leader through {base} after the heal: {other:?}"),
        }
    }
}

/// One acknowledged append: who sent it, its seq, when it was first sent
/// and when it was acknowledged.
#[derive(Clone, Copy, Debug)]
struct Op {
    writer: usize,
    seq: u64,
    sent: Instant,
    acked: Instant,
}

/// Checks `history` (the stream's bodies) against the acknowledged `ops`:
/// every op exactly once, each writer's in seq order, nothing else but
/// minority writes after all of them, and real-time order: an op
/// acknowledged before another was first sent stands before it.
fn check_history(history: &[String], ops: &[Op], through: &str) {
    let mut at = std::collections::HashMap::new();
    for (pos, body) in history.iter().enumerate() {
        if body == MINORITY {
            continue;
        }
        let (w, seq) = body.split_once(':').expect("writer:seq");
        let key: (usize, u64) = (w.parse().expect("a writer"), seq.parse().expect("a seq"));
        assert!(at.insert(key, pos).is_none(), "{body} stands twice in the stream through {through}");
    }
    assert_eq!(at.len(), ops.len(), "the stream through {through} holds other appends than the acknowledged");
    let pos = |op: &Op| {
        *at.get(&(op.writer, op.seq)).unwrap_or_else(|| panic!("{op:?} is missing through {through}"))
    };
    for w in 0..WRITERS {
        let mine: Vec<usize> = ops.iter().filter(|o| o.writer == w).map(pos).collect();
        assert!(mine.windows(2).all(|p| p[0] < p[1]), "writer {w}'s appends out of order through {through}");
    }
    let first_minority = history.iter().position(|b| b == MINORITY).unwrap_or(history.len());
    assert!(first_minority >= ops.len(), "a minority write lands only after the acknowledged history");
    // Real time: sorted by acknowledgement, the furthest position among the
    // ops acknowledged before an op was sent must be before that op.
    let mut by_ack: Vec<(Instant, usize)> = ops.iter().map(|o| (o.acked, pos(o))).collect();
    by_ack.sort();
    let furthest: Vec<usize> = by_ack
        .iter()
        .scan(0usize, |max, (_, p)| {
            *max = (*max).max(*p);
            Some(*max)
        })
        .collect();
    for op in ops {
        let before = by_ack.partition_point(|(acked, _)| *acked < op.sent);
        if before > 0 {
            assert!(
                furthest[before - 1] < pos(op),
                "not linearizable through {through}: {op:?} at {} follows an append acknowledged before it was sent",
                pos(op)
            );
        }
    }
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
    let writers: Vec<_> = (0..WRITERS)
        .map(|writer| {
            let (bases, stop, acked, last) =
                (bases.clone(), stop.clone(), acked.clone(), last_ack_at.clone());
            std::thread::spawn(move || {
                let mut ops = Vec::new();
                let mut seq = 0u64;
                while !stop.load(Ordering::Relaxed) {
                    let sent = Instant::now();
                    let start = seq as usize + writer;
                    assert!(
                        append_until_acked(&bases, start, writer, seq),
                        "append {writer}:{seq} never acknowledged"
                    );
                    let now = Instant::now();
                    ops.push(Op { writer, seq, sent, acked: now });
                    seq += 1;
                    acked.fetch_add(1, Ordering::Relaxed);
                    *last.lock() = now;
                }
                ops
            })
        })
        .collect();
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
    let ops: Vec<Op> = writers.into_iter().flat_map(|w| w.join().expect("writer")).collect();
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
    assert!(!ops.is_empty(), "the writers acknowledged nothing");
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
    // Every node (directly or by forwarding) serves the same history,
    // linearizable and with each acknowledged append once. A minority write
    // was never acknowledged, yet it may have reached a log and commit after
    // the heal (that is what `NoQuorum` warns of): it may only follow the
    // acknowledged history.
    let history = read_until_leader(&bases[0]);
    eprintln!("{} appends acknowledged by {WRITERS} writers; the history is linearizable", ops.len());
    for base in &bases {
        let seen = read_until_leader(base);
        check_history(&seen, &ops, base);
    }
    // `Rill-Allow-Stale: true`: every node serves its own replica, even a
    // request it may not forward, and each converges on the history the
    // leader serves.
    // A node restarted last catches up a history that grows with the kill
    // count: 10 s, and a second more per 10,000 appends.
    let stale = [("rill-allow-stale", "true"), ("rill-forwarded", "1")];
    let bound = Duration::from_secs(10 + history.len() as u64 / 10_000);
    for base in &bases {
        let started = Instant::now();
        loop {
            let head = try_call("HEAD", &format!("{base}{STREAM}"), &stale, b"").expect("stale head");
            assert_eq!(head.status, 200, "a stale HEAD is served by every node");
            let seen = read_bodies(base, STREAM, &stale);
            if seen == history {
                eprintln!("the replica behind {base} converged after {:?}", started.elapsed());
                break;
            }
            assert!(
                started.elapsed() < bound,
                "the replica behind {base} did not converge within {bound:?}: it holds {} of {} appends",
                seen.len(),
                history.len()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}

/// The history checker itself: a history that puts an append before one
/// acknowledged before it was sent is refused; concurrent appends may land
/// in either order.
#[test]
fn the_history_checker_refuses_what_is_not_linearizable() {
    let t0 = Instant::now();
    let at = |ms: u64| t0 + Duration::from_millis(ms);
    let ops = [
        Op { writer: 0, seq: 0, sent: at(0), acked: at(10) },
        Op { writer: 1, seq: 0, sent: at(5), acked: at(15) },
        Op { writer: 2, seq: 0, sent: at(20), acked: at(30) },
    ];
    let bodies = |list: &[&str]| list.iter().map(|b| b.to_string()).collect::<Vec<String>>();
    // 0:0 and 1:0 overlap: either order is linearizable.
    check_history(&bodies(&["0:0", "1:0", "2:0"]), &ops, "ok");
    check_history(&bodies(&["1:0", "0:0", "2:0", MINORITY]), &ops, "ok");
    let refused =
        |history: Vec<String>| std::panic::catch_unwind(|| check_history(&history, &ops, "planted")).is_err();
    assert!(refused(bodies(&["2:0", "0:0", "1:0"])), "2:0 was sent after 0:0 and 1:0 were acknowledged");
    assert!(refused(bodies(&["0:0", "1:0"])), "an acknowledged append is missing");
    assert!(refused(bodies(&["0:0", "1:0", "2:0", "2:0"])), "an append stands twice");
    assert!(refused(bodies(&["0:0", MINORITY, "1:0", "2:0"])), "a minority write inside the history");
}
