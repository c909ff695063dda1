//! okaywal as a peer: a log entry per write, a chunk per record.

use std::io::Write;
use std::path::Path;

use okaywal::{LogVoid, WriteAheadLog};

use super::{key_bytes, SyncStore};
use crate::util::Result;

pub struct OkayStore {
    wal: WriteAheadLog,
}

impl OkayStore {
    pub fn open(dir: &Path) -> Result<OkayStore> {
        // `LogVoid` checkpoints by dropping entries: the benchmark never
        // reads them back.
        Ok(OkayStore { wal: WriteAheadLog::recover(dir, LogVoid)? })
    }
}

impl SyncStore for OkayStore {
    fn write(&self, keys: &[(u64, u64)], payload: &[u8]) -> Result<()> {
        let mut entry = self.wal.begin_entry()?;
        for (stream, seq) in keys {
            let mut chunk = entry.begin_chunk((16 + payload.len()) as u32)?;
            chunk.write_all(&key_bytes(*stream, *seq))?;
            chunk.write_all(payload)?;
            chunk.finish()?;
        }
        entry.commit()?;
        Ok(())
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.wal.shutdown()?;
        Ok(())
    }
}
