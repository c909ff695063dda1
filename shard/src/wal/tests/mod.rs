//! Tests of the write-ahead log: the format and scan rules byte by byte
//! ([`format`]), the writer over the memory and fault-injecting devices
//! ([`writer`]), and the page-cache segment files of the relaxed mode on a
//! real file system ([`page_cache`]).

mod format;
mod page_cache;
mod writer;

use bytes::Bytes;

use crate::state::api::Append;
use crate::state::command::{Command, Op};
use crate::state::name::StreamId;

/// Runs `make`'s future on a fresh glommio executor and returns its output.
fn run<T, F, Fut>(make: F) -> T
where
    T: Send + 'static,
    F: FnOnce() -> Fut + Send + 'static,
    Fut: std::future::Future<Output = T> + 'static,
{
    glommio::LocalExecutorBuilder::new(glommio::Placement::Unbound)
        .spawn(make)
        .expect("executor starts")
        .join()
        .expect("executor ends")
}

/// The `i`-th test command: an append of `len` bytes.
fn cmd(i: u64, len: usize) -> Command {
    let id = StreamId::new("b", "s").expect("valid");
    Command { now_ms: i, op: Op::from(Append::new(id, Bytes::from(vec![(i % 256) as u8; len]))) }
}
