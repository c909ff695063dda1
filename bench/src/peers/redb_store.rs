//! redb as a peer: one table keyed by `(stream, seq)`, a write transaction
//! per write.

use std::path::Path;

use redb::{Database, Durability, TableDefinition};

use super::SyncStore;
use crate::util::{Mode, Result};

const TABLE: TableDefinition<'static, (u64, u64), &'static [u8]> = TableDefinition::new("streams");

pub struct RedbStore {
    db: Database,
    mode: Mode,
}

impl RedbStore {
    pub fn open(dir: &Path, mode: Mode) -> Result<RedbStore> {
        let db = Database::create(dir.join("redb.db"))?;
        Ok(RedbStore { db, mode })
    }
}

impl SyncStore for RedbStore {
    fn write(&self, keys: &[(u64, u64)], payload: &[u8]) -> Result<()> {
        let mut tx = self.db.begin_write()?;
        tx.set_durability(match self.mode {
            Mode::Durable => Durability::Immediate,
            Mode::Relaxed => Durability::Eventual,
        });
        {
            let mut table = tx.open_table(TABLE)?;
            for key in keys {
                table.insert(key, payload)?;
            }
        }
        tx.commit()?;
        Ok(())
    }

    fn close(self: Box<Self>) -> Result<()> {
        Ok(())
    }
}
