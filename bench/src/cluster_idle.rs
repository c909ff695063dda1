//! The idle cell of `rill-bench cluster`: what three replicated nodes cost
//! when nobody sends them anything.
//!
//! Three `rill serve --cluster` processes on loopback, each with `cores`
//! cores and `groups` groups, form their cluster from fresh directories.
//! Once every group has exactly one leader, named by all three nodes, and
//! the nodes have handed the groups to their preferred leaders (each node
//! leads a third, give or take one), the cell waits one more second for
//! that traffic to pass, then
//! measures each process's CPU time (user + system, `/proc/<pid>/stat`)
//! and its cores' raft transport counters (`/metrics`: frames written and
//! the messages they carried) over `window`. Nothing is sent to the nodes
//! in that window except the two `/metrics` reads that bracket it. The
//! processes are killed and their directories removed when the cell ends,
//! whatever happened.

use std::net::{SocketAddr, TcpListener};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use bytes::Bytes;

use crate::http::client::Conn;
use crate::http::servers::{binary, Kind};
use crate::util::Result;

/// What one node cost over the window.
#[derive(Clone, Copy, Debug)]
pub struct IdleNode {
    /// CPU time over wall time: 1.0 is one core busy all the time.
    pub core_share: f64,
    /// Raft frames written per second, per (core, peer) connection.
    pub frames_per_sec_per_pair: f64,
    /// Raft messages per frame written.
    pub messages_per_frame: f64,
}

/// A running node; killed (and its directory removed) when dropped.
struct Node {
    child: Child,
    http: SocketAddr,
    dir: PathBuf,
}

impl Drop for Node {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// A free loopback address (bound once to learn it, then released).
pub fn free_addr() -> Result<SocketAddr> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?)
}

/// Measures three idle nodes of `cores` cores and `groups` groups for
/// `window`, in fresh directories under `dir`; one entry per node.
pub fn measure(dir: &Path, cores: usize, groups: usize, window: Duration) -> Result<Vec<IdleNode>> {
    let _ = std::fs::remove_dir_all(dir);
    std::fs::create_dir_all(dir)?;
    let bin = binary(Kind::Rill)?;
    let addrs: Vec<(SocketAddr, SocketAddr)> =
        (0..3).map(|_| Ok((free_addr()?, free_addr()?))).collect::<Result<_>>()?;
    let members: Vec<String> =
        addrs.iter().enumerate().map(|(i, (raft, http))| format!("{}={raft}@{http}", i + 1)).collect();
    let members = members.join(",");
    let mut nodes = Vec::new();
    for (i, (_, http)) in addrs.iter().enumerate() {
        let node_dir = dir.join(format!("node-{}", i + 1));
        std::fs::create_dir_all(&node_dir)?;
        let log = std::fs::File::create(node_dir.join("server.log"))?;
        let child = Command::new(&bin)
            .arg("serve")
            .arg("--dir")
            .arg(node_dir.join("data"))
            .args(["--listen", &http.to_string(), "--cores", &cores.to_string()])
            .args(["--groups", &groups.to_string(), "--no-pin"])
            .args(["--node-id", &(i + 1).to_string(), "--cluster", &members])
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()?;
        nodes.push(Node { child, http: *http, dir: node_dir });
    }
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let metrics = |node: &Node| -> Result<String> {
        runtime.block_on(async {
            let mut conn = Conn::open(node.http).await?;
            let answer = conn.call("GET", "/metrics", &[], Bytes::new()).await?;
            if answer.status != 200 {
                return Err(format!("/metrics answered {}", answer.status).into());
            }
            Ok(String::from_utf8_lossy(&answer.body).into_owned())
        })
    };
    let deadline = Instant::now() + Duration::from_secs(180);
    loop {
        for node in &mut nodes {
            if let Some(status) = node.child.try_wait()? {
                let log = std::fs::read_to_string(node.dir.join("server.log")).unwrap_or_default();
                return Err(format!("a node exited with {status}: {log}").into());
            }
        }
        let pages: Vec<String> = nodes.iter().map(|n| metrics(n).unwrap_or_default()).collect();
        if settled(&pages, groups) {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!("{groups} groups did not each settle on one leader within 180 s").into());
        }
        std::thread::sleep(Duration::from_millis(250));
    }
    std::thread::sleep(Duration::from_secs(1));
    let sent = |page: &str| {
        (
            core_sum(page, "rill_core_raft_frames_sent_total"),
            core_sum(page, "rill_core_raft_messages_sent_total"),
        )
    };
    let before: Vec<((u64, u64), u64, Instant)> = nodes
        .iter()
        .map(|n| Ok((sent(&metrics(n)?), cpu_ticks(n.child.id())?, Instant::now())))
        .collect::<Result<_>>()?;
    std::thread::sleep(window);
    let ticks_per_sec = rustix::param::clock_ticks_per_second() as f64;
    let pairs = (cores * 2) as f64;
    nodes
        .iter()
        .zip(before)
        .map(|(n, ((frames0, messages0), ticks0, at))| {
            let ticks = cpu_ticks(n.child.id())?;
            let elapsed = at.elapsed().as_secs_f64();
            let (frames, messages) = sent(&metrics(n)?);
            let frames = frames.saturating_sub(frames0) as f64;
            Ok(IdleNode {
                core_share: ticks.saturating_sub(ticks0) as f64 / ticks_per_sec / elapsed,
                frames_per_sec_per_pair: frames / elapsed / pairs,
                messages_per_frame: messages.saturating_sub(messages0) as f64 / frames.max(1.0),
            })
        })
        .collect()
}

/// Whether every group has exactly one leading node and all three nodes
/// name the same, known leader.
fn settled(pages: &[String], groups: usize) -> bool {
    let leading = |page: &str| -> Vec<bool> {
        let mut of = vec![false; groups];
        for (group, value) in group_values(page, "rill_group_raft_leading") {
            if let Some(slot) = of.get_mut(group) {
                *slot = value == 1;
            }
        }
        of
    };
    let leader = |page: &str| -> Vec<u64> {
        let mut of = vec![0; groups];
        for (group, value) in group_values(page, "rill_group_raft_leader") {
            if let Some(slot) = of.get_mut(group) {
                *slot = value;
            }
        }
        of
    };
    let leads: Vec<Vec<bool>> = pages.iter().map(|p| leading(p)).collect();
    let named: Vec<Vec<u64>> = pages.iter().map(|p| leader(p)).collect();
    let one_each = (0..groups).all(|g| {
        leads.iter().filter(|l| l[g]).count() == 1
            && named[0][g] != 0
            && named.iter().all(|n| n[g] == named[0][g])
    });
    // The nodes hand groups to their preferred leaders (a third each)
    // after the first elections; measure once that is done.
    let share = groups / pages.len().max(1);
    let balanced = leads.iter().all(|l| l.iter().filter(|x| **x).count().abs_diff(share) <= 1);
    one_each && balanced
}

/// The `{group="g"} value` lines of one metric.
fn group_values<'a>(page: &'a str, name: &'a str) -> impl Iterator<Item = (usize, u64)> + 'a {
    page.lines().filter_map(move |line| {
        let rest = line.strip_prefix(name)?.strip_prefix("{group=\"")?;
        let (group, rest) = rest.split_once("\"} ")?;
        Some((group.parse().ok()?, rest.trim().parse().ok()?))
    })
}

/// A per-core counter summed over the node's cores.
fn core_sum(page: &str, name: &str) -> u64 {
    page.lines()
        .filter_map(|line| line.strip_prefix(name)?.strip_prefix("{core=\"")?.split_once("\"} "))
        .filter_map(|(_, value)| value.trim().parse::<u64>().ok())
        .sum()
}

/// User plus system CPU time of process `pid`, in clock ticks.
fn cpu_ticks(pid: u32) -> Result<u64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // The command name (field 2) may hold spaces: count from its ')'.
    let after = stat.rsplit_once(')').map(|(_, rest)| rest).ok_or("malformed /proc stat")?;
    let fields: Vec<&str> = after.split_whitespace().collect();
    // Fields 14 (utime) and 15 (stime), 1-based over the whole line; the
    // slice starts at field 3.
    let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<u64>().ok()).ok_or("short /proc stat");
    Ok(field(14)? + field(15)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_page_parsers_read_metric_lines() {
        let page = "rill_group_raft_leading{group=\"0\"} 1\nrill_group_raft_leading{group=\"1\"} 0\n\
                    rill_group_raft_leader{group=\"0\"} 2\nrill_group_raft_leader{group=\"1\"} 2\n\
                    rill_core_raft_frames_sent_total{core=\"0\"} 10\nrill_core_raft_frames_sent_total{core=\"1\"} 5\n";
        assert_eq!(group_values(page, "rill_group_raft_leading").collect::<Vec<_>>(), vec![(0, 1), (1, 0)]);
        assert_eq!(core_sum(page, "rill_core_raft_frames_sent_total"), 15);
        let other = page.replace("leading{group=\"0\"} 1", "leading{group=\"0\"} 0");
        let third = page.replace("leading{group=\"1\"} 0", "leading{group=\"1\"} 1");
        // Group 0 led by the first page only, group 1 by the third only.
        let pages = [
            page.to_string(),
            other.clone(),
            third.replace("leading{group=\"0\"} 1", "leading{group=\"0\"} 0"),
        ];
        assert!(settled(&pages, 2));
        assert!(!settled(&[page.to_string(), page.to_string(), other], 2), "two nodes lead group 0");
    }

    /// The three nodes' pages when group `g` is led by node `leaders[g]`.
    fn pages_for(leaders: &[u64]) -> Vec<String> {
        (1..=3u64)
            .map(|node| {
                leaders
                    .iter()
                    .enumerate()
                    .map(|(g, l)| {
                        format!(
                            "rill_group_raft_leading{{group=\"{g}\"}} {}\nrill_group_raft_leader{{group=\"{g}\"}} {l}\n",
                            u64::from(*l == node)
                        )
                    })
                    .collect()
            })
            .collect()
    }

    #[test]
    fn settled_waits_for_a_balanced_leadership() {
        assert!(settled(&pages_for(&[1, 2, 3, 1, 2, 3]), 6));
        assert!(!settled(&pages_for(&[1, 1, 1, 1, 2, 3]), 6), "node 1 leads four of six groups");
        assert!(!settled(&pages_for(&[1, 2, 3, 0, 2, 3]), 6), "group 3 has no leader");
    }

    #[test]
    fn this_process_has_cpu_ticks() {
        assert!(cpu_ticks(std::process::id()).is_ok());
    }
}
