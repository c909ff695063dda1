//! Helpers of the embedded cluster tests (`cluster`, `membership`):
//! free loopback addresses, running a request on whichever node leads, and
//! appending a numbered history through the leaders.

use std::net::{SocketAddr, TcpListener};
use std::time::{Duration, Instant};

use rill::{Append, Engine, ErrorCode, StreamId};

/// A free loopback address.
pub fn free_addr() -> SocketAddr {
    TcpListener::bind("127.0.0.1:0").expect("bind").local_addr().expect("addr")
}

/// Runs `op` on each node in turn until one (the leader) takes it,
/// retrying while a leader is being elected.
pub fn on_leader<T>(nodes: &[&Engine], mut op: impl FnMut(&Engine) -> rill::Result<T>) -> T {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        for node in nodes {
            match op(node) {
                Ok(value) => return value,
                Err(e)
                    if matches!(
                        e.code(),
                        ErrorCode::NotLeader | ErrorCode::NoQuorum | ErrorCode::Indeterminate
                    ) => {}
                Err(e) => panic!("unexpected error: {e}"),
            }
        }
        assert!(Instant::now() < deadline, "no leader took the request within 20 s");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Appends `[i]` for each `i` of `range` through whichever node leads,
/// adding each acknowledged body to `expected`.
pub fn append_numbered(
    nodes: &[&Engine],
    id: &StreamId,
    range: std::ops::Range<u32>,
    expected: &mut Vec<u8>,
) {
    for i in range {
        let body = format!("[{i:03}]");
        on_leader(nodes, |e| futures::executor::block_on(e.append(Append::new(id.clone(), body.clone()))));
        expected.extend_from_slice(body.as_bytes());
    }
}
