//! Three-node clusters of `rill serve --cluster` child processes on
//! loopback, for the multi-process cluster tests (`http_cluster`,
//! `http_partition`): free ports, starting, killing and restarting a node
//! on its directory and ports, and asking a node whether it leads a
//! stream's group. A node is killed (SIGKILL) when dropped.

use std::net::TcpListener;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};

use super::try_call;

/// The test crate's build of `rill serve`.
pub const BIN: &str = env!("CARGO_BIN_EXE_rill_serve");

/// A free port below the kernel's ephemeral range, so no outgoing
/// connection (a client or a peer dialling a node that is down) can be
/// given it as its local port while its node restarts.
pub fn free_port() -> u16 {
    let range = std::fs::read_to_string("/proc/sys/net/ipv4/ip_local_port_range").unwrap_or_default();
    let low: u16 = range.split_whitespace().next().and_then(|v| v.parse().ok()).unwrap_or(32768);
    static NEXT: AtomicU64 = AtomicU64::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos());
    let seed =
        std::process::id() as u64 ^ nanos as u64 ^ NEXT.fetch_add(1, Ordering::Relaxed).wrapping_mul(104_729);
    let span = u64::from(low.saturating_sub(11_000).max(1));
    for i in 0..10_000u64 {
        let port = 10_000 + ((seed.wrapping_mul(2654435761).wrapping_add(i * 7919)) % span) as u16;
        if TcpListener::bind(("127.0.0.1", port)).is_ok() {
            return port;
        }
    }
    panic!("no free port below {low}");
}

/// One node of a test cluster.
pub struct Node {
    pub id: u64,
    pub dir: PathBuf,
    /// HTTP address, `127.0.0.1:port`.
    pub http: String,
    /// The `--cluster` member list every node is given.
    pub members: String,
    /// `--raft-listen`, when peers reach this node through a proxy.
    pub raft_listen: Option<String>,
    /// More flags (`--join`).
    pub extra: Vec<String>,
    pub process: Option<std::process::Child>,
}

impl Node {
    /// Node `id` (from 1) of `members`, in `dir`, serving HTTP on `http`.
    pub fn new(id: u64, dir: PathBuf, http: String, members: &str) -> Node {
        Node {
            id,
            dir,
            http,
            members: members.to_string(),
            raft_listen: None,
            extra: Vec::new(),
            process: None,
        }
    }

    pub fn base(&self) -> String {
        format!("http://{}", self.http)
    }

    /// Starts the process (2 cores, 8 groups, a 2 s request timeout) and
    /// waits for it to listen; its stderr goes to `<dir>.stderr`.
    pub fn start(&mut self) {
        use std::io::BufRead;
        let log = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.with_extension("stderr"))
            .expect("stderr file");
        let mut command = std::process::Command::new(BIN);
        command
            .arg("serve")
            .arg("--dir")
            .arg(&self.dir)
            .args(["--listen", &self.http, "--cores", "2", "--groups", "8", "--no-pin"])
            .args(["--node-id", &self.id.to_string(), "--cluster", &self.members])
            .args(["--request-timeout-ms", "2000"]);
        if let Some(addr) = &self.raft_listen {
            command.args(["--raft-listen", addr]);
        }
        command.args(&self.extra);
        let mut child = command
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(log)
            .spawn()
            .expect("spawn rill_serve");
        let mut line = String::new();
        let stdout = child.stdout.take().expect("stdout");
        std::io::BufReader::new(stdout).read_line(&mut line).expect("read the listening line");
        if !line.starts_with("rill listening on ") {
            let log = std::fs::read_to_string(self.dir.with_extension("stderr")).unwrap_or_default();
            let tail: String = log.lines().rev().take(20).collect::<Vec<_>>().join("\n");
            panic!("node {} did not start: {line:?}\n{tail}", self.id);
        }
        self.process = Some(child);
    }

    /// SIGKILL, and reap.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.process.take() {
            child.kill().expect("SIGKILL");
            child.wait().expect("reap");
        }
    }

    /// Whether this node leads the group of `stream` (a path) right now:
    /// it serves a linearizable read marked as already forwarded, which a
    /// follower may not forward again.
    pub fn leads(&self, stream: &str) -> bool {
        let url = format!("{}{stream}?offset=-1", self.base());
        matches!(try_call("GET", &url, &[("rill-forwarded", "1")], b""), Ok(r) if r.status == 200)
    }
}

impl Drop for Node {
    fn drop(&mut self) {
        self.kill();
    }
}

/// Waits (up to 30 s) until `/metrics` on every node shows each of
/// `groups` groups with exactly one leading node, named by all of them.
pub fn wait_for_leaders(bases: &[String], groups: u32) {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        let per_node: Vec<String> = bases
            .iter()
            .map(|b| try_call("GET", &format!("{b}/metrics"), &[], b"").map(|r| r.text()).unwrap_or_default())
            .collect();
        let settled = (0..groups).all(|g| {
            let leading = per_node
                .iter()
                .filter(|m| m.contains(&format!("rill_group_raft_leading{{group=\"{g}\"}} 1")))
                .count();
            let named: Vec<&str> = per_node
                .iter()
                .filter_map(|m| {
                    m.lines().find(|l| l.starts_with(&format!("rill_group_raft_leader{{group=\"{g}\"}} ")))
                })
                .collect();
            leading == 1
                && named.len() == bases.len()
                && named.iter().all(|l| *l == named[0])
                && !named[0].ends_with(" 0")
        });
        if settled {
            return;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "groups did not settle on one leader each: {per_node:?}"
        );
        std::thread::sleep(std::time::Duration::from_millis(200));
    }
}

/// The `;`-terminated bodies of `stream` (a path) read through `base` from
/// the start, with `headers` on every request. A page answered 503 (a
/// leadership change under way) is asked again, for up to 10 s.
pub fn read_bodies(base: &str, stream: &str, headers: &[(&str, &str)]) -> Vec<String> {
    let mut text = String::new();
    let mut offset = "-1".to_string();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    for _ in 0..10_000 {
        let r = try_call("GET", &format!("{base}{stream}?offset={offset}"), headers, b"").expect("read");
        if r.status == 503 && std::time::Instant::now() < deadline {
            std::thread::sleep(std::time::Duration::from_millis(50));
            continue;
        }
        assert_eq!(r.status, 200, "read through {base}: {}", r.text());
        text.push_str(&r.text());
        offset = r.offset();
        if r.header("stream-up-to-date") == Some("true") {
            break;
        }
    }
    text.split_terminator(';').map(str::to_string).collect()
}
