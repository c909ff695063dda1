//! Three nodes, each on its own thread and glommio executor, replicating a
//! group over real loopback TCP; and a peer of another cluster refused at
//! the handshake.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::rc::Rc;
use std::sync::mpsc as std_mpsc;
use std::time::{Duration, Instant};

use glommio::net::TcpListener;
use openraft::async_runtime::WatchReceiver;
use openraft::AsyncRuntime;

use super::handshake::Hello;
use super::link::TcpNetFactory;
use super::messages::NetRequest;
use super::transport::TcpNet;
use crate::error::ErrorKind;
use crate::raft::cluster_tests::{append, config, create, Client, Count};
use crate::raft::address_book::AddressBook;
use crate::raft::journal::MemJournal;
use crate::raft::log_image::LogImage;
use crate::raft::log_store::GroupLog;
use crate::raft::state_machine::GroupRaft;
use crate::raft::rt::GlommioRt;
use crate::raft::state_machine::GroupMachine;
use crate::raft::types::{Member, NodeId, StoredMembership};
use crate::raft::wire::WireVote;
use crate::state::group::{GroupLimits, GroupState};
use crate::state::name::StreamId;

const CLUSTER: u64 = 0xC0FFEE;
const APPENDS: u64 = 30;

fn executor() -> glommio::LocalExecutor {
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound).io_memory(512 << 10).make().expect("executor")
}

/// One node's whole life: bind, learn the peers, replicate, report the
/// group state once it holds every append, stop when told.
fn node(
    id: NodeId,
    bound: std_mpsc::Sender<(NodeId, SocketAddr)>,
    peers: std_mpsc::Receiver<BTreeMap<NodeId, SocketAddr>>,
    done: std_mpsc::Sender<(NodeId, Vec<u8>)>,
    stop: std_mpsc::Receiver<()>,
) {
    executor().run(async move {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        bound.send((id, listener.local_addr().expect("addr"))).unwrap();
        let peers = peers.recv().expect("the peer addresses");
        let members: BTreeMap<NodeId, Member> = peers
            .iter()
            .map(|(n, addr)| (*n, Member { raft_addr: addr.to_string(), http_addr: String::new() }))
            .collect();
        let net = TcpNet::new(Hello::new(CLUSTER, id, 1, 1), AddressBook::new(members.clone()));
        net.listen(listener);
        let log = GroupLog::new(0, Rc::new(MemJournal::new()), LogImage::default());
        let state = GroupState::new(0, 1, GroupLimits::default());
        let machine = GroupMachine::new(state, None, StoredMembership::default(), Rc::new(Count::default()));
        let raft = GroupRaft::new(id, config(), TcpNetFactory::new(net.clone(), 0), log, machine.clone())
            .await
            .expect("raft starts");
        net.serve_group(0, raft.clone());
        if id == 1 {
            raft.initialize(members).await.expect("initialize");
        }
        let deadline = Instant::now() + Duration::from_secs(30);
        let mut client = Client::default();
        let mut written = false;
        let id_s = StreamId::new("b", "s").unwrap();
        loop {
            assert!(Instant::now() < deadline, "node {id}: no convergence within 30 s");
            let leader = raft.metrics().borrow_watched().current_leader;
            if leader == Some(id) && !written {
                raft.client_write(client.proposal(create("s"))).await.expect("create");
                for _ in 0..APPENDS {
                    raft.client_write(client.proposal(append("s", b"0123456789"))).await.expect("append");
                }
                written = true;
            }
            let tail = machine.with_state(|s| s.stream(&id_s).map(|s| s.next_offset()));
            if tail == Some(APPENDS * 10) {
                break;
            }
            GlommioRt::sleep(Duration::from_millis(20)).await;
        }
        let sent = net.stats();
        assert!(sent.frames > 0 && sent.messages >= sent.frames, "node {id} sent {sent:?}");
        eprintln!("node {id}: {} frames carried {} messages", sent.frames, sent.messages);
        done.send((id, machine.with_state(|s| s.encode_snapshot()))).unwrap();
        // Keep serving the others until every node has converged.
        while stop.try_recv().is_err() {
            GlommioRt::sleep(Duration::from_millis(20)).await;
        }
        raft.shutdown().await.expect("raft stops");
    });
}

#[test]
fn three_nodes_replicate_over_tcp() {
    let (bound_tx, bound_rx) = std_mpsc::channel();
    let (done_tx, done_rx) = std_mpsc::channel();
    let mut peer_txs = Vec::new();
    let mut stop_txs = Vec::new();
    let mut threads = Vec::new();
    for id in 1..=3u64 {
        let (peer_tx, peer_rx) = std_mpsc::channel();
        let (stop_tx, stop_rx) = std_mpsc::channel();
        peer_txs.push(peer_tx);
        stop_txs.push(stop_tx);
        let (bound, done) = (bound_tx.clone(), done_tx.clone());
        threads.push(std::thread::spawn(move || node(id, bound, peer_rx, done, stop_rx)));
    }
    let peers: BTreeMap<NodeId, SocketAddr> = (0..3).map(|_| bound_rx.recv().expect("a node bound")).collect();
    for tx in &peer_txs {
        tx.send(peers.clone()).unwrap();
    }
    let mut snapshots = BTreeMap::new();
    for _ in 0..3 {
        let (id, bytes) = done_rx.recv_timeout(Duration::from_secs(60)).expect("a node converged");
        snapshots.insert(id, bytes);
    }
    for tx in &stop_txs {
        tx.send(()).unwrap();
    }
    for thread in threads {
        thread.join().expect("a node panicked");
    }
    let first = snapshots[&1].clone();
    assert!(snapshots.values().all(|s| *s == first), "replicas hold different group states");
}

#[test]
fn a_peer_of_another_cluster_is_refused() {
    executor().run(async {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind");
        let addr = listener.local_addr().unwrap();
        let server = TcpNet::new(Hello::new(1, 1, 1, 1), AddressBook::default());
        server.listen(listener);
        let one = Member { raft_addr: addr.to_string(), http_addr: String::new() };
        let stranger = TcpNet::new(Hello::new(2, 2, 1, 1), AddressBook::new(BTreeMap::from([(1, one)])));
        let request = NetRequest::Vote { vote: WireVote { term: 1, node: 2, committed: false }, last: None };
        let err = stranger.call(1, 0, &request, Duration::from_secs(5)).await.unwrap_err();
        assert!(
            matches!(err.kind(), ErrorKind::ShapeMismatch { field: "cluster id", recorded: 2, requested: 1 }),
            "{err}"
        );
        let unknown = stranger.call(9, 0, &request, Duration::from_secs(5)).await.unwrap_err();
        assert!(unknown.to_string().contains("no known raft address"), "{unknown}");
    });
}

/// A peer that completes the handshake and then never answers (a process
/// stopped, or restarted behind a connection that still looks open): a
/// request that times out with nothing heard gives the connection up, so
/// the next request dials again.
#[test]
fn a_silent_connection_is_given_up_and_dialled_again() {
    use std::io::{Read, Write};
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = listener.local_addr().unwrap();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counting = accepted.clone();
    std::thread::spawn(move || {
        let mut held = Vec::new();
        for stream in listener.incoming() {
            let Ok(mut stream) = stream else { return };
            counting.fetch_add(1, Ordering::SeqCst);
            let mut theirs = [0u8; super::handshake::HELLO_LEN];
            if stream.read_exact(&mut theirs).is_ok() {
                let _ = stream.write_all(&Hello::new(CLUSTER, 2, 1, 1).encode());
            }
            // Keep the socket open and never read from it again.
            held.push(stream);
        }
    });
    executor().run(async move {
        let two = Member { raft_addr: addr.to_string(), http_addr: String::new() };
        let net = TcpNet::new(Hello::new(CLUSTER, 1, 1, 1), AddressBook::new(BTreeMap::from([(2, two)])));
        let request = NetRequest::Vote { vote: WireVote { term: 1, node: 1, committed: false }, last: None };
        for attempt in 1..=3usize {
            let err = net.call(2, 0, &request, Duration::from_millis(200)).await.unwrap_err();
            assert!(err.to_string().contains("did not answer"), "{err}");
            assert_eq!(accepted.load(Ordering::SeqCst), attempt, "attempt {attempt} dialled afresh");
        }
    });
}
