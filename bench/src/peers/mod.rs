//! The peers: other embedded stores measured next to rill in the same run,
//! behind one synchronous interface.
//!
//! A peer is handed the same records a rill client sends: a record is a key
//! `(stream, seq)` (16 bytes, both big-endian, so a stream's records sort
//! together) and a payload. [`SyncStore::write`] writes a group of records
//! as one unit (a batch, a transaction, a log entry) and returns once they
//! are as durable as the mode asks; only then are they counted as
//! acknowledged. A workload's client that keeps `w` rill appends in flight
//! hands a peer `w` records per call, so the peer gets the same
//! amortisation of a sync that rill's group commit gets from the window.
//!
//! * `fjall` (default feature `fjall`): one keyspace with one partition;
//!   durable: each batch is committed with `PersistMode::SyncData`;
//!   relaxed: each batch is flushed to the OS (`PersistMode::Buffer`, the
//!   default) and the journal is synced every 100 ms (`fsync_ms`).
//! * `redb` (feature `redb`): one table keyed by `(u64, u64)`; one write
//!   transaction per call, `Durability::Immediate` (durable) or
//!   `Durability::Eventual` (relaxed: no sync at commit).
//! * `okaywal` (feature `okaywal`): one log entry per call, one chunk per
//!   record (key then payload); `commit` syncs, and concurrent commits share
//!   syncs. It has no relaxed mode, so it is measured in durable tables
//!   only.
//! * `nats` (feature `nats`): NATS JetStream, a server on 127.0.0.1; see
//!   [`nats`] (and `bench/scripts/install-nats.sh`).

use std::path::Path;

use crate::util::{Mode, Result};

#[cfg(feature = "fjall")]
mod fjall_store;
#[cfg(feature = "nats")]
pub mod nats;
#[cfg(feature = "okaywal")]
mod okaywal_store;
#[cfg(feature = "redb")]
mod redb_store;

/// A store that takes groups of records synchronously.
pub trait SyncStore: Send + Sync {
    /// Writes one record per key, each with `payload`, as one unit, and
    /// returns once they are as durable as the store's mode asks.
    fn write(&self, keys: &[(u64, u64)], payload: &[u8]) -> Result<()>;

    /// Flushes and closes the store.
    fn close(self: Box<Self>) -> Result<()>;
}

/// The 16-byte key of record `seq` of `stream`.
pub fn key_bytes(stream: u64, seq: u64) -> [u8; 16] {
    let mut k = [0u8; 16];
    k[..8].copy_from_slice(&stream.to_be_bytes());
    k[8..].copy_from_slice(&seq.to_be_bytes());
    k
}

/// The peers compiled into this binary, in the order they run.
pub fn compiled() -> Vec<&'static str> {
    let mut peers = Vec::new();
    if cfg!(feature = "fjall") {
        peers.push("fjall");
    }
    if cfg!(feature = "redb") {
        peers.push("redb");
    }
    if cfg!(feature = "okaywal") {
        peers.push("okaywal");
    }
    if cfg!(feature = "nats") {
        peers.push("nats");
    }
    peers
}

/// Whether `peer` has a configuration for `mode`.
pub fn supports(peer: &str, mode: Mode) -> bool {
    !(peer == "okaywal" && mode == Mode::Relaxed)
}

/// Opens `peer` in the empty directory `dir`.
pub fn open(peer: &str, dir: &Path, mode: Mode) -> Result<Box<dyn SyncStore>> {
    let _ = (dir, mode);
    match peer {
        #[cfg(feature = "fjall")]
        "fjall" => Ok(Box::new(fjall_store::FjallStore::open(dir, mode)?)),
        #[cfg(feature = "redb")]
        "redb" => Ok(Box::new(redb_store::RedbStore::open(dir, mode)?)),
        #[cfg(feature = "okaywal")]
        "okaywal" => Ok(Box::new(okaywal_store::OkayStore::open(dir)?)),
        #[cfg(feature = "nats")]
        "nats" => Ok(Box::new(nats::NatsStore::open(dir, mode)?)),
        other => {
            Err(format!("peer {other:?} is not compiled in (see the cargo features of rill-bench)").into())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_sort_by_stream_then_seq() {
        assert!(key_bytes(1, 9) < key_bytes(2, 0));
        assert!(key_bytes(1, 1) < key_bytes(1, 256));
    }

    #[test]
    fn every_compiled_peer_writes_and_closes() {
        for peer in compiled() {
            #[cfg(feature = "nats")]
            if peer == "nats" && nats::server_binary().is_none() {
                continue; // no server installed: the suite reports the failure instead
            }
            for mode in [Mode::Durable, Mode::Relaxed] {
                if !supports(peer, mode) {
                    continue;
                }
                let dir = tempfile::tempdir().expect("temp dir");
                let store = open(peer, dir.path(), mode).expect("opens");
                store.write(&[(1, 0), (1, 1), (7, 0)], b"payload").expect("writes");
                store.close().expect("closes");
            }
        }
    }
}
