//! fjall as a peer: one keyspace, one partition, a batch per write.

use std::path::Path;

use fjall::{Keyspace, PartitionCreateOptions, PartitionHandle, PersistMode};

use super::{key_bytes, SyncStore};
use crate::util::{Mode, Result, RELAXED_SYNC};

pub struct FjallStore {
    keyspace: Keyspace,
    partition: PartitionHandle,
    mode: Mode,
}

impl FjallStore {
    pub fn open(dir: &Path, mode: Mode) -> Result<FjallStore> {
        let mut config = fjall::Config::new(dir);
        if mode == Mode::Relaxed {
            config = config.fsync_ms(Some(RELAXED_SYNC.as_millis() as u16));
        }
        let keyspace = config.open()?;
        let partition = keyspace.open_partition("streams", PartitionCreateOptions::default())?;
        Ok(FjallStore { keyspace, partition, mode })
    }
}

impl SyncStore for FjallStore {
    fn write(&self, keys: &[(u64, u64)], payload: &[u8]) -> Result<()> {
        let mut batch = self.keyspace.batch();
        if self.mode == Mode::Durable {
            batch = batch.durability(Some(PersistMode::SyncData));
        }
        for (stream, seq) in keys {
            batch.insert(&self.partition, key_bytes(*stream, *seq), payload);
        }
        batch.commit()?;
        Ok(())
    }

    fn close(self: Box<Self>) -> Result<()> {
        self.keyspace.persist(PersistMode::SyncAll)?;
        Ok(())
    }
}
