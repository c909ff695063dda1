//! Opening rill for a measured run and the checks around it: the
//! configuration of each mode, creating a cell's streams, and checking that
//! every stream holds exactly the appends acknowledged to it.

use std::path::Path;
use std::sync::OnceLock;

use futures::stream::{self, StreamExt};
use rill::{Config, Create, Engine, SpinPolicy, StreamId, WalIo};

use crate::util::{Mode, Result};

/// Creates, heads and deletes in flight while preparing or checking a run.
const ADMIN_WINDOW: usize = 512;

static WAL_IO: OnceLock<WalIo> = OnceLock::new();
static SPIN: OnceLock<SpinPolicy> = OnceLock::new();

/// Chooses the idle-spin policy of every engine of this process (once; the
/// default is the engine's).
pub fn set_spin(policy: SpinPolicy) {
    let _ = SPIN.set(policy);
}

/// Chooses how every engine of this process writes its WAL (once; the
/// default is DMA).
pub fn set_wal_io(io: WalIo) {
    let _ = WAL_IO.set(io);
}

/// The WAL I/O in use.
pub fn wal_io() -> WalIo {
    WAL_IO.get().copied().unwrap_or(WalIo::Dma)
}

/// The configuration of a run: defaults, except the durability of `mode`
/// (and the WAL I/O and spin chosen with [`set_wal_io`] and [`set_spin`]).
pub fn config(dir: &Path, mode: Mode) -> Config {
    let spin = SPIN.get().copied().unwrap_or_default();
    Config::new(dir).durability(mode.durability()).wal_io(wal_io()).spin(spin)
}

/// `n` stream ids in bucket `bench`, named `<prefix><i>`.
pub fn stream_ids(prefix: &str, n: usize) -> Result<Vec<StreamId>> {
    Ok((0..n)
        .map(|i| StreamId::new("bench", format!("{prefix}{i}")))
        .collect::<std::result::Result<_, _>>()?)
}

/// Creates every stream, [`ADMIN_WINDOW`] at a time.
pub fn create_streams(engine: &Engine, ids: &[StreamId]) -> Result<()> {
    futures::executor::block_on(async {
        let mut replies =
            stream::iter(ids).map(|id| engine.create(Create::new(id.clone()))).buffer_unordered(ADMIN_WINDOW);
        while let Some(reply) = replies.next().await {
            reply?;
        }
        Ok(())
    })
}

/// Checks that stream `i` holds exactly `acked[i]` appends of
/// `record_bytes` each.
pub fn check_tails(engine: &Engine, ids: &[StreamId], acked: &[u64], record_bytes: usize) -> Result<()> {
    futures::executor::block_on(async {
        let mut heads = stream::iter(ids.iter().enumerate())
            .map(|(s, id)| async move { (s, engine.head(id).await) })
            .buffer_unordered(ADMIN_WINDOW);
        while let Some((s, head)) = heads.next().await {
            let head = head?;
            let want = acked[s];
            if head.append_count != want || head.tail_offset != want * record_bytes as u64 {
                return Err(format!(
                    "stream {} holds {} appends ({} bytes) but {want} were acknowledged",
                    ids[s], head.append_count, head.tail_offset
                )
                .into());
            }
        }
        Ok(())
    })
}

/// Shuts an engine down, turning its error into ours.
pub fn shutdown(engine: Engine) -> Result<()> {
    futures::executor::block_on(engine.shutdown())?;
    Ok(())
}
