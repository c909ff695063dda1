//! A minority partition of three `rill serve --cluster` processes: the
//! leader of a stream's group is cut off from the other two, while both
//! sides keep taking requests.
//!
//! The nodes reach each other's raft address through one fault-injecting
//! proxy per node: the member list names the proxies and each node binds
//! its raft listener behind its proxy (`--raft-listen`). A proxy reads the
//! dialling node's id from the replication hello (FORMAT.md, "Replication
//! handshake and frames") and refuses, or cuts, every connection between
//! the isolated node and the others. HTTP is never cut.
//!
//! Checks: during the partition, every write and every linearizable read
//! sent to the isolated old leader (marked as already forwarded, so it may
//! not hand it to the majority) gets a 503 with `Retry-After` within the
//! election timeout plus the request timeout, never a 2xx; a read marked
//! `Rill-Allow-Stale` there still answers from its replica. Meanwhile the
//! majority elects a new leader and keeps acknowledging a writer's appends
//! (at least one per second after the election). After the heal, every
//! node serves the same history: each acknowledged append exactly once, in
//! order, and none of the minority's writes, which never reached a quorum
//! and were truncated away.

mod http_support;

use std::collections::BTreeSet;
use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use http_support::cluster::{free_port, read_bodies, wait_for_leaders, Node};
use http_support::try_call;

const STREAM: &str = "/v1/stream/partition-s";
/// Bytes of the replication hello; the dialling node's id is the u64 at
/// offset 20 (little-endian).
const HELLO_BYTES: usize = 40;

/// Which nodes are cut off from the rest, and every proxied connection.
#[derive(Default)]
struct Faults {
    isolated: Mutex<BTreeSet<u64>>,
    live: Mutex<Vec<(u64, u64, TcpStream)>>,
}

impl Faults {
    /// Whether traffic between `a` and `b` is cut.
    fn cut(&self, a: u64, b: u64) -> bool {
        let isolated = self.isolated.lock().unwrap();
        isolated.contains(&a) != isolated.contains(&b)
    }

    /// Cuts `node` off and closes its open connections.
    fn isolate(&self, node: u64) {
        self.isolated.lock().unwrap().insert(node);
        let mut live = self.live.lock().unwrap();
        live.retain(|(from, to, stream)| {
            if self.cut(*from, *to) {
                let _ = stream.shutdown(Shutdown::Both);
                false
            } else {
                true
            }
        });
    }

    fn heal(&self) {
        self.isolated.lock().unwrap().clear();
    }
}

/// Forwards connections on `listener` to node `to`'s raft listener at
/// `target`, unless the faults cut the dialling node off from it.
fn proxy(listener: TcpListener, to: u64, target: SocketAddr, faults: Arc<Faults>) {
    std::thread::spawn(move || {
        for inbound in listener.incoming() {
            let Ok(mut inbound) = inbound else { continue };
            let faults = faults.clone();
            std::thread::spawn(move || {
                let _ = inbound.set_read_timeout(Some(Duration::from_secs(5)));
                let mut hello = [0u8; HELLO_BYTES];
                if inbound.read_exact(&mut hello).is_err() {
                    return;
                }
                let from = u64::from_le_bytes(hello[20..28].try_into().expect("8 bytes"));
                if faults.cut(from, to) {
                    return;
                }
                let Ok(mut outbound) = TcpStream::connect(target) else { return };
                let _ = inbound.set_read_timeout(None);
                if outbound.write_all(&hello).is_err() {
                    return;
                }
                let (Ok(inbound_copy), Ok(outbound_copy)) = (inbound.try_clone(), outbound.try_clone())
                else {
                    return;
                };
                {
                    let mut live = faults.live.lock().unwrap();
                    live.push((from, to, inbound.try_clone().expect("clone")));
                    live.push((from, to, outbound.try_clone().expect("clone")));
                }
                // A partition that began meanwhile cuts this one too.
                if faults.cut(from, to) {
                    let _ = inbound.shutdown(Shutdown::Both);
                    let _ = outbound.shutdown(Shutdown::Both);
                    return;
                }
                std::thread::spawn(move || pump(inbound_copy, outbound_copy));
                pump(outbound, inbound);
            });
        }
    });
}

/// Copies `from` into `to` until either side closes, then closes both.
fn pump(mut from: TcpStream, mut to: TcpStream) {
    let _ = std::io::copy(&mut from, &mut to);
    let _ = from.shutdown(Shutdown::Both);
    let _ = to.shutdown(Shutdown::Both);
}

fn producer_headers(seq: &str) -> [(&'static str, String); 4] {
    [
        ("content-type", "text/plain".to_string()),
        ("producer-id", "majority".to_string()),
        ("producer-epoch", "0".to_string()),
        ("producer-seq", seq.to_string()),
    ]
}

/// The stream's bodies read through `base`.
fn read_all(base: &str, headers: &[(&str, &str)]) -> Vec<String> {
    read_bodies(base, STREAM, headers)
}

#[test]
fn a_minority_never_acknowledges_and_the_majority_goes_on() {
    let root = tempfile::tempdir().expect("temp dir");
    let faults = Arc::new(Faults::default());
    // (proxy, real raft listener, http) per node.
    let ports: Vec<(u16, u16, u16)> = (0..3).map(|_| (free_port(), free_port(), free_port())).collect();
    let members: Vec<String> = ports
        .iter()
        .enumerate()
        .map(|(i, (proxy, _, http))| format!("{}=127.0.0.1:{proxy}@127.0.0.1:{http}", i + 1))
        .collect();
    let members = members.join(",");
    let mut nodes: Vec<Node> = Vec::new();
    for (i, (proxy_port, raft, http)) in ports.iter().enumerate() {
        let id = i as u64 + 1;
        let listener = TcpListener::bind(("127.0.0.1", *proxy_port)).expect("bind the proxy");
        proxy(listener, id, format!("127.0.0.1:{raft}").parse().unwrap(), faults.clone());
        let mut node =
            Node::new(id, root.path().join(format!("node-{id}")), format!("127.0.0.1:{http}"), &members);
        node.raft_listen = Some(format!("127.0.0.1:{raft}"));
        node.start();
        nodes.push(node);
    }
    let bases: Vec<String> = nodes.iter().map(Node::base).collect();
    wait_for_leaders(&bases, 8);
    let created = try_call("PUT", &format!("{}{STREAM}", bases[0]), &[("content-type", "text/plain")], b"")
        .expect("create");
    assert!(created.status == 201 || created.status == 200, "create: {} {}", created.status, created.text());
    let leader = (0..3).find(|i| nodes[*i].leads(STREAM)).expect("the stream's group has a leader");
    let majority: Vec<String> = (0..3).filter(|i| *i != leader).map(|i| bases[i].clone()).collect();

    // A writer on the majority's side: idempotent appends, each retried
    // (same seq) until acknowledged.
    let stop = Arc::new(AtomicBool::new(false));
    let acked = Arc::new(AtomicU64::new(0));
    let ack_times = Arc::new(Mutex::new(Vec::<Instant>::new()));
    let writer = {
        let (majority, stop, acked, ack_times) =
            (majority.clone(), stop.clone(), acked.clone(), ack_times.clone());
        std::thread::spawn(move || {
            let mut seq = 0u64;
            let mut at = 0usize;
            while !stop.load(Ordering::Relaxed) {
                let h = producer_headers(&seq.to_string());
                let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (*k, v.as_str())).collect();
                let url = format!("{}{STREAM}", majority[at % majority.len()]);
                match try_call("POST", &url, &h, format!("{seq};").as_bytes()) {
                    Ok(r) if (200..300).contains(&r.status) => {
                        seq += 1;
                        acked.store(seq, Ordering::Relaxed);
                        ack_times.lock().unwrap().push(Instant::now());
                    }
                    Ok(r) if r.status == 503 => at += 1,
                    Ok(r) => panic!("majority append {seq} got {}: {}", r.status, r.text()),
                    Err(_) => at += 1,
                }
                std::thread::sleep(Duration::from_millis(10));
            }
            seq
        })
    };
    let deadline = Instant::now() + Duration::from_secs(30);
    while acked.load(Ordering::Relaxed) < 20 {
        assert!(!writer.is_finished(), "the writer stopped before the partition");
        assert!(Instant::now() < deadline, "fewer than 20 appends acknowledged in 30 s before the partition");
        std::thread::sleep(Duration::from_millis(20));
    }

    // Cut the leader off.
    let cut_at = Instant::now();
    faults.isolate(nodes[leader].id);
    let on_minority = [("content-type", "text/plain"), ("rill-forwarded", "1")];
    let url = format!("{}{STREAM}", bases[leader]);
    // Election timeout (at most 600 ms) plus the request timeout (2 s),
    // with room for a loaded machine.
    let bound = Duration::from_secs(5);
    let mut minority_writes = 0;
    while cut_at.elapsed() < Duration::from_secs(6) {
        let started = Instant::now();
        let body = format!("minority-{minority_writes};");
        let r = try_call("POST", &url, &on_minority, body.as_bytes()).expect("the isolated node answers");
        assert_eq!(r.status, 503, "a minority write got {}: {}", r.status, r.text());
        assert!(r.header("retry-after").is_some(), "a 503 says when to retry");
        assert!(started.elapsed() < bound, "a minority write waited {:?}", started.elapsed());
        minority_writes += 1;
        let started = Instant::now();
        let r =
            try_call("GET", &format!("{url}?offset=-1"), &[("rill-forwarded", "1")], b"").expect("answers");
        assert_eq!(r.status, 503, "a linearizable read on the minority got {}: {}", r.status, r.text());
        assert!(started.elapsed() < bound, "a minority read waited {:?}", started.elapsed());
        // A stale read is served from the isolated replica.
        let stale = [("rill-forwarded", "1"), ("rill-allow-stale", "true")];
        let r = try_call("GET", &format!("{url}?offset=-1"), &stale, b"").expect("answers");
        assert_eq!(r.status, 200, "a stale read on the minority got {}: {}", r.status, r.text());
    }
    let healed_at = Instant::now();
    faults.heal();
    // The majority kept committing: at least one ack per second from two
    // seconds after the cut (its election) to the heal.
    let from = cut_at + Duration::from_secs(2);
    let during = ack_times.lock().unwrap().iter().filter(|t| **t >= from && **t < healed_at).count();
    let seconds = healed_at.saturating_duration_since(from).as_secs_f64();
    assert!(
        during as f64 >= seconds.floor(),
        "the majority acknowledged {during} appends in the {seconds:.1} s of the partition after its election"
    );
    eprintln!(
        "partition: {minority_writes} minority writes refused; the majority acknowledged {during} appends in {seconds:.1} s"
    );
    std::thread::sleep(Duration::from_millis(500));
    stop.store(true, Ordering::Relaxed);
    let sent = writer.join().expect("writer");

    // After the heal every node serves the same history: each acknowledged
    // seq once and in order, and no minority write.
    let want: Vec<String> = (0..sent).map(|s| s.to_string()).collect();
    for base in &bases {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let r = try_call("GET", &format!("{base}{STREAM}?offset=-1"), &[], b"");
            if matches!(r, Ok(ref r) if r.status == 200) {
                break;
            }
            assert!(Instant::now() < deadline, "no leader through {base} after the heal");
            std::thread::sleep(Duration::from_millis(100));
        }
        assert_eq!(read_all(base, &[]), want, "the history through {base}");
    }
    // And every replica, read as it stands, converges on it.
    for base in &bases {
        let stale = [("rill-forwarded", "1"), ("rill-allow-stale", "true")];
        let deadline = Instant::now() + Duration::from_secs(10);
        while read_all(base, &stale) != want {
            assert!(Instant::now() < deadline, "the replica behind {base} did not converge");
            std::thread::sleep(Duration::from_millis(100));
        }
    }
}
