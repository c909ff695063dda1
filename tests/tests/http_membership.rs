//! Membership changes of `rill serve --cluster` processes through the
//! operator's tools: `rill cluster replace` puts a node started with
//! `--join` in the place of a founding node, over HTTP to any member.
//!
//! Checks: the command succeeds and prints every group with the new
//! voters; after the old node is killed (SIGKILL) the cluster keeps
//! acknowledging writes, which needs the new node in every quorum; every
//! node, the new one included, serves the whole acknowledged history
//! (forwarding to leaders it learnt from the membership); `rill cluster
//! status` on the new node shows the same voters; an impossible change is
//! a 400 and a failed command exits non-zero with the server's message.

mod http_support;

use std::process::Command;

use http_support::cluster::{free_port, read_bodies, wait_for_leaders, Node, BIN};
use http_support::try_call;

const GROUPS: u32 = 8;

fn cli(args: &[&str]) -> (bool, String, String) {
    let out = Command::new(BIN).args(args).output().expect("run rill cluster");
    (
        out.status.success(),
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}

/// Appends `body;` to `stream` through `base`, retrying 503s; panics on
/// anything but a 2xx within 20 s.
fn append(base: &str, stream: &str, body: &str) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let r =
            try_call("POST", &format!("{base}{stream}"), &[("content-type", "text/plain")], body.as_bytes());
        match r {
            Ok(r) if (200..300).contains(&r.status) => return,
            Ok(r) if r.status == 503 => {}
            Ok(r) => panic!("append through {base}: {} {}", r.status, r.text()),
            Err(_) => {}
        }
        assert!(std::time::Instant::now() < deadline, "no append acknowledged through {base} within 20 s");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn rill_cluster_replace_moves_every_group_to_a_joined_node() {
    let root = tempfile::tempdir().expect("dir");
    let ports: Vec<(u16, u16)> = (0..4).map(|_| (free_port(), free_port())).collect();
    let entry = |n: usize| format!("{}=127.0.0.1:{}@127.0.0.1:{}", n + 1, ports[n].0, ports[n].1);
    let founders = (0..3).map(entry).collect::<Vec<_>>().join(",");
    let mut nodes: Vec<Node> = (0..3)
        .map(|n| {
            Node::new(
                n as u64 + 1,
                root.path().join(format!("n{}", n + 1)),
                format!("127.0.0.1:{}", ports[n].1),
                &founders,
            )
        })
        .collect();
    for node in &mut nodes {
        node.start();
    }
    let bases: Vec<String> = nodes.iter().map(Node::base).collect();
    wait_for_leaders(&bases, GROUPS);
    let streams: Vec<String> = (0..6).map(|i| format!("/v1/stream/m{i}")).collect();
    for s in &streams {
        let r = try_call("PUT", &format!("{}{s}", bases[0]), &[("content-type", "text/plain")], b"")
            .expect("put");
        assert!(r.status == 201 || r.status == 200, "{}", r.text());
    }
    let mut expected: Vec<Vec<String>> = vec![Vec::new(); streams.len()];
    for i in 0..5 {
        for (k, s) in streams.iter().enumerate() {
            append(&bases[i % 3], s, &format!("a{i};"));
            expected[k].push(format!("a{i}"));
        }
    }

    // Node 4 joins: it names itself and one member, and waits.
    let mut four = Node::new(
        4,
        root.path().join("n4"),
        format!("127.0.0.1:{}", ports[3].1),
        &format!("{},{}", entry(0), entry(3)),
    );
    four.extra = vec!["--join".into()];
    four.start();
    let (ok, stdout, stderr) =
        cli(&["cluster", "replace", "--server", &nodes[0].http, "3", &entry(3), "--wait-ms", "30000"]);
    assert!(ok, "rill cluster replace failed: {stderr}");
    let view: serde_json::Value = serde_json::from_str(&stdout).expect("the command prints JSON");
    assert_eq!(view["voters"], serde_json::json!([1, 2, 4]), "{stdout}");
    assert_eq!(view["groups"].as_array().map(Vec::len), Some(GROUPS as usize));

    // Node 3 goes for good; writes need node 4 in their quorums now.
    nodes[2].kill();
    let live = [bases[0].clone(), bases[1].clone(), four.base()];
    for i in 5..10 {
        for (k, s) in streams.iter().enumerate() {
            append(&live[i % 3], s, &format!("a{i};"));
            expected[k].push(format!("a{i}"));
        }
    }
    for base in &live {
        for (k, s) in streams.iter().enumerate() {
            assert_eq!(read_bodies(base, s, &[]), expected[k], "{s} through {base}");
        }
    }
    let (ok, stdout, stderr) = cli(&["cluster", "status", "--server", &four.http]);
    assert!(ok, "rill cluster status failed: {stderr}");
    let view: serde_json::Value = serde_json::from_str(&stdout).expect("JSON");
    assert_eq!(view["node"], serde_json::json!(4));
    assert_eq!(view["voters"], serde_json::json!([1, 2, 4]), "{stdout}");
    assert_eq!(view["members"]["4"]["http"], serde_json::json!(four.http), "{stdout}");

    // Impossible changes: a 400 over HTTP, a non-zero exit from the CLI.
    let bad = br#"{"op":"replace","old":7,"id":8,"raft":"127.0.0.1:1","http":"127.0.0.1:2"}"#;
    let r = try_call("POST", &format!("{}/v1/cluster/members", bases[1]), &[], bad).expect("post");
    assert_eq!(r.status, 400, "{}", r.text());
    assert!(r.text().contains("not a voter"), "{}", r.text());
    let (ok, _, stderr) = cli(&["cluster", "remove", "--server", &nodes[0].http, "2", "--wait-ms", "5000"]);
    assert!(ok, "removing node 2 leaves two voters, which is allowed: {stderr}");
    let (ok, _, stderr) = cli(&["cluster", "remove", "--server", &nodes[0].http, "1", "--wait-ms", "5000"]);
    assert!(!ok, "a cluster keeps at least two voters");
    assert!(stderr.contains("400") && stderr.contains("at least 2"), "{stderr}");
}
