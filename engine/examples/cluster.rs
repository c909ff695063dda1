//! A replicated cluster embedded in one process: three nodes form it,
//! take writes, then a fourth node joins and takes the third one's place
//! through joint consensus, and the history is read back from the new node.
//!
//! `cargo run --release -p rill --example cluster`
//!
//! Each node is an `Engine` with `Config::cluster`, its own data directory
//! and its own raft address on loopback; in a real deployment each runs in
//! its own process or machine (`rill serve --cluster`, README).

use std::net::{SocketAddr, TcpListener};
use std::path::Path;
use std::time::Duration;

use rill::{Append, ClusterConfig, Config, Create, Engine, ErrorCode, Member, MemberChange, Read, StreamId};

fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr")
}

fn node(dir: &Path, id: u64, members: &[(u64, SocketAddr)], join: bool) -> rill::Result<Engine> {
    let mut cluster = ClusterConfig::new(id).join(join);
    for (member, addr) in members {
        cluster = cluster.member(*member, *addr, "");
    }
    Engine::open(Config::new(dir).cores(1).groups(4).pin_threads(false).cluster(cluster))
}

/// Runs `op` on whichever node takes it (the stream's group leader),
/// waiting out elections.
async fn on_leader<T, F, Fut>(nodes: &[&Engine], op: F) -> rill::Result<T>
where
    F: Fn(Engine) -> Fut,
    Fut: std::future::Future<Output = rill::Result<T>>,
{
    for _ in 0..400 {
        for node in nodes {
            match op((*node).clone()).await {
                Err(e) if matches!(e.code(), ErrorCode::NotLeader | ErrorCode::NoQuorum) => {}
                done => return done,
            }
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    Err(rill::Error::bad_request("no leader within 20 s"))
}

fn main() -> rill::Result<()> {
    futures::executor::block_on(run())
}

async fn run() -> rill::Result<()> {
    let root = tempfile::tempdir().expect("a scratch directory");
    let addrs: Vec<(u64, SocketAddr)> = (1..=4).map(|n| (n, free_addr())).collect();
    let founders = &addrs[..3];
    let dir = |n: u64| root.path().join(format!("node{n}"));
    let (one, two, three) = (
        node(&dir(1), 1, founders, false)?,
        node(&dir(2), 2, founders, false)?,
        node(&dir(3), 3, founders, false)?,
    );

    let id = StreamId::new("example", "orders")?;
    on_leader(&[&one, &two, &three], |e| {
        let id = id.clone();
        async move { e.create(Create::new(id)).await }
    })
    .await?;
    for i in 0..5 {
        let body = format!("order {i};");
        on_leader(&[&one, &two, &three], |e| {
            let (id, body) = (id.clone(), body.clone());
            async move { e.append(Append::new(id, body)).await }
        })
        .await?;
    }

    // Node 4 starts to join (it names itself and one member), then any
    // member moves node 3's place to it in every group.
    let four = node(&dir(4), 4, &[addrs[0], addrs[3]], true)?;
    let member = Member { raft_addr: addrs[3].1.to_string(), http_addr: String::new() };
    let view =
        one.change_members(MemberChange::Replace { old: 3, id: 4, member }, Duration::from_secs(30)).await?;
    println!("voters now: {:?}", view.voters());
    three.shutdown().await?;

    // Node 4's own replica holds the history once it applied what it
    // holds (a stale read: no quorum round, no forwarding).
    for _ in 0..100 {
        match four.read(Read::new(id.clone()).allow_stale(true)).await {
            Ok(r) if r.payload.ends_with(b"order 4;") => {
                println!("node 4 holds: {}", String::from_utf8_lossy(&r.payload));
                break;
            }
            _ => std::thread::sleep(Duration::from_millis(50)),
        }
    }
    let read = on_leader(&[&one, &two, &four], |e| {
        let id = id.clone();
        async move { e.read(Read::new(id)).await }
    })
    .await?;
    println!("linearizable read: {}", String::from_utf8_lossy(&read.payload));
    for engine in [one, two, four] {
        engine.shutdown().await?;
    }
    Ok(())
}
