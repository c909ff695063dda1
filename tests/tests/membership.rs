//! Membership changes of an embedded cluster (`Engine::change_members`):
//! a node started with `ClusterConfig::join` is added to every group,
//! another node is removed, a third replaced by a new one, each through
//! joint consensus, while the acknowledged history stays whole.
//!
//! Checks: after each change every group has exactly the target voters;
//! a joined node holds every acknowledged append (read as its replica
//! stands); writes go on after the removed and replaced nodes are shut
//! down, which only works if the new voters count in the quorum; a node
//! restarted with its original (now stale) member list rejoins, since its
//! data directory keeps the cluster's id and its groups their membership;
//! running a finished change again changes nothing; impossible changes,
//! a single-node engine and a data directory opened as another node are
//! refused with typed errors.

mod embedded_cluster;

use std::collections::BTreeSet;
use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use embedded_cluster::{append_numbered, free_addr, on_leader};
use rill::{ClusterConfig, Config, Create, Engine, ErrorCode, Member, MemberChange, Read, StreamId};

const GROUPS: u32 = 4;
const WAIT: Duration = Duration::from_secs(30);

/// Node `node`'s config naming `members` (node id, raft address).
fn config(dir: &Path, node: u64, members: &[(u64, SocketAddr)], join: bool) -> Config {
    let mut c = ClusterConfig::new(node)
        .heartbeat(Duration::from_millis(50))
        .election_timeout(Duration::from_millis(300), Duration::from_millis(600))
        .request_timeout(Duration::from_secs(3))
        .join(join);
    for (id, addr) in members {
        c = c.member(*id, *addr, "");
    }
    Config::new(dir).cores(1).groups(GROUPS).pin_threads(false).cluster(c)
}

fn member(addr: SocketAddr) -> Member {
    Member { raft_addr: addr.to_string(), http_addr: String::new() }
}

/// Waits until `node`'s own replica holds exactly `expected`.
fn converges(node: &Engine, id: &StreamId, expected: &[u8]) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let read =
            futures::executor::block_on(node.read(Read::new(id.clone()).max_len(1 << 20).allow_stale(true)));
        match read {
            Ok(r) if r.payload == expected => return,
            Ok(r) => assert!(
                expected.starts_with(&r.payload) && Instant::now() < deadline,
                "a replica holds {:?}, not a prefix of the acknowledged {:?}",
                String::from_utf8_lossy(&r.payload),
                String::from_utf8_lossy(expected)
            ),
            Err(e)
                if matches!(e.code(), ErrorCode::StreamNotFound | ErrorCode::BucketNotFound)
                    && Instant::now() < deadline => {}
            Err(e) => panic!("stale read: {e}"),
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn change(node: &Engine, change: MemberChange) -> rill::ClusterView {
    futures::executor::block_on(node.change_members(change.clone(), WAIT))
        .unwrap_or_else(|e| panic!("{change:?} was not made: {e}"))
}

fn voters(ids: &[u64]) -> BTreeSet<u64> {
    ids.iter().copied().collect()
}

fn stop(engine: Engine) {
    futures::executor::block_on(engine.shutdown()).expect("node stops");
}

#[test]
fn nodes_join_leave_and_are_replaced_while_the_history_stays_whole() {
    let dirs: Vec<tempfile::TempDir> = (0..5).map(|_| tempfile::tempdir().expect("dir")).collect();
    let addrs: Vec<(u64, SocketAddr)> = (1..=5).map(|n| (n, free_addr())).collect();
    let founders = &addrs[..3];
    let open = |n: u64, members: &[(u64, SocketAddr)], join: bool| {
        Engine::open(config(dirs[n as usize - 1].path(), n, members, join)).expect("node opens")
    };
    let one = open(1, founders, false);
    let two = open(2, founders, false);
    let three = open(3, founders, false);
    let id = StreamId::new("b", "members").expect("id");
    let mut expected = Vec::new();
    on_leader(&[&one, &two, &three], |e| futures::executor::block_on(e.create(Create::new(id.clone()))));
    append_numbered(&[&one, &two, &three], &id, 0..10, &mut expected);

    // Node 4 joins: started to join, then added through node 1.
    let four = open(4, &[addrs[0], addrs[3]], true);
    let view = change(&one, MemberChange::Add { id: 4, member: member(addrs[3].1) });
    assert_eq!(view.groups.len(), GROUPS as usize);
    for group in &view.groups {
        assert_eq!(group.voters, voters(&[1, 2, 3, 4]), "group {}", group.group);
        assert!(!group.joint);
    }
    converges(&four, &id, &expected);
    // The metrics show the new membership (published every 200 ms).
    let deadline = Instant::now() + Duration::from_secs(10);
    while !one.metrics().groups.iter().all(|g| g.raft_voters == 4 && !g.raft_joint) {
        assert!(Instant::now() < deadline, "metrics: {:?}", one.metrics().groups);
        std::thread::sleep(Duration::from_millis(50));
    }
    let again = change(&three, MemberChange::Add { id: 4, member: member(addrs[3].1) });
    assert!(again.groups.iter().all(|g| g.voters == voters(&[1, 2, 3, 4])), "adding again changes nothing");
    append_numbered(&[&one, &two, &three, &four], &id, 10..20, &mut expected);

    // Node 1 leaves, asked through node 2 (which leads only some groups:
    // the others' changes are forwarded to their leaders).
    let view = change(&two, MemberChange::Remove { id: 1 });
    assert!(view.groups.iter().all(|g| g.voters == voters(&[2, 3, 4])), "{:?}", view.groups);
    stop(one);
    append_numbered(&[&two, &three, &four], &id, 20..30, &mut expected);

    // Node 5 takes node 3's place, through joint consensus.
    let five = open(5, &[addrs[1], addrs[4]], true);
    let view = change(&four, MemberChange::Replace { old: 3, id: 5, member: member(addrs[4].1) });
    assert!(view.groups.iter().all(|g| g.voters == voters(&[2, 4, 5]) && !g.joint), "{:?}", view.groups);
    stop(three);
    // With node 2 down too, only nodes 4 and 5 run: writes that commit now
    // prove both new voters count in the quorum.
    stop(two);
    append_numbered(&[&four, &five], &id, 30..40, &mut expected);
    converges(&five, &id, &expected);

    // Node 2 restarts with the member list it was first given, in which
    // neither node 4 nor node 5 appears: its directory has the cluster id
    // and its groups' membership, so it rejoins.
    let two = open(2, founders, false);
    append_numbered(&[&two, &four, &five], &id, 40..50, &mut expected);
    converges(&two, &id, &expected);
    converges(&four, &id, &expected);
    let shown = futures::executor::block_on(two.cluster_members()).expect("members");
    assert_eq!(shown.node, 2);
    assert!(shown.groups.iter().all(|g| g.voters == voters(&[2, 4, 5])), "{:?}", shown.groups);
    assert_eq!(
        two.cluster_member(5).map(|m| m.raft_addr),
        Some(addrs[4].1),
        "node 2 learnt node 5's address from the membership"
    );

    // Impossible changes are refused, typed, before anything changes.
    for bad in [
        MemberChange::Add { id: 0, member: member(addrs[0].1) },
        MemberChange::Add { id: 9, member: Member { raft_addr: "nowhere".into(), http_addr: String::new() } },
        MemberChange::Replace { old: 7, id: 8, member: member(addrs[0].1) },
    ] {
        let err = futures::executor::block_on(two.change_members(bad.clone(), WAIT)).unwrap_err();
        assert_eq!(err.code(), ErrorCode::BadRequest, "{bad:?}: {err}");
    }
    let shown = futures::executor::block_on(four.cluster_members()).expect("members");
    assert!(shown.groups.iter().all(|g| g.voters == voters(&[2, 4, 5])));
    for node in [two, four, five] {
        stop(node);
    }

    // A data directory opened as another node is refused.
    let err =
        Engine::open(config(dirs[1].path(), 7, &[(7, addrs[1].1), (4, addrs[3].1)], false)).unwrap_err();
    assert_eq!(err.code(), ErrorCode::ShapeMismatch, "{err}");
}

#[test]
fn a_single_node_has_no_members_to_change() {
    let dir = tempfile::tempdir().expect("dir");
    let engine = Engine::open(Config::new(dir.path()).cores(1).groups(2).pin_threads(false)).expect("open");
    let err = futures::executor::block_on(engine.cluster_members()).unwrap_err();
    assert_eq!(err.code(), ErrorCode::BadRequest, "{err}");
    let err =
        futures::executor::block_on(engine.change_members(MemberChange::Remove { id: 2 }, WAIT)).unwrap_err();
    assert_eq!(err.code(), ErrorCode::BadRequest, "{err}");
    assert!(engine.cluster_member(1).is_none());
    futures::executor::block_on(engine.shutdown()).expect("stops");
}
