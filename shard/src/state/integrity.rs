//! Order-independent integrity set-sums over a stream's records (SPEC §2
//! "Integrity").
//!
//! Each record (one accepted payload at one offset) hashes to a 256-bit
//! digest: `BLAKE3("rill.record.v1" || u64le(offset) || payload)`. A
//! [`SetSum`] is the lane-wise wrapping sum of such digests viewed as four
//! little-endian `u64` lanes, plus a record count. Addition is commutative
//! and invertible, so the sum of a set does not depend on the order records
//! arrived in, and a record can be moved from `live` to `evicted` when
//! retention drops it. `total == live + evicted` always holds; a reader that
//! knows the record boundaries can recompute `live` from what it read.

use serde::{Deserialize, Serialize};

const RECORD_DOMAIN: &[u8] = b"rill.record.v1";

/// The digest of one record, as four little-endian lanes.
pub fn record_digest(offset: u64, payload: &[u8]) -> [u64; 4] {
    let mut h = blake3::Hasher::new();
    h.update(RECORD_DOMAIN);
    h.update(&offset.to_le_bytes());
    h.update(payload);
    let bytes = h.finalize();
    let mut lanes = [0u64; 4];
    for (lane, chunk) in lanes.iter_mut().zip(bytes.as_bytes().chunks_exact(8)) {
        let mut b = [0u8; 8];
        b.copy_from_slice(chunk);
        *lane = u64::from_le_bytes(b);
    }
    lanes
}

/// A multiset checksum: sum of record digests and the number of records.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct SetSum {
    /// The four 64-bit lanes of the wrapping sum of record digests.
    pub lanes: [u64; 4],
    /// Records summed.
    pub records: u64,
}

impl SetSum {
    /// Adds one record digest.
    pub fn add_digest(&mut self, digest: [u64; 4]) {
        for (l, d) in self.lanes.iter_mut().zip(digest) {
            *l = l.wrapping_add(d);
        }
        self.records += 1;
    }

    /// Removes one record digest (added before).
    pub fn remove_digest(&mut self, digest: [u64; 4]) {
        for (l, d) in self.lanes.iter_mut().zip(digest) {
            *l = l.wrapping_sub(d);
        }
        self.records = self.records.saturating_sub(1);
    }

    /// Adds the record at `offset` with `payload`.
    pub fn add_record(&mut self, offset: u64, payload: &[u8]) {
        self.add_digest(record_digest(offset, payload));
    }

    /// The union of two disjoint sets.
    pub fn combined(mut self, other: SetSum) -> SetSum {
        for (l, o) in self.lanes.iter_mut().zip(other.lanes) {
            *l = l.wrapping_add(o);
        }
        self.records += other.records;
        self
    }

    /// The difference of a set and a subset of it.
    pub fn minus(mut self, other: SetSum) -> SetSum {
        for (l, o) in self.lanes.iter_mut().zip(other.lanes) {
            *l = l.wrapping_sub(o);
        }
        self.records = self.records.saturating_sub(other.records);
        self
    }

    /// The sum as 32 little-endian bytes, for display and comparison.
    pub fn to_bytes(&self) -> [u8; 32] {
        let mut out = [0u8; 32];
        for (chunk, lane) in out.chunks_exact_mut(8).zip(self.lanes) {
            chunk.copy_from_slice(&lane.to_le_bytes());
        }
        out
    }
}

/// A stream's integrity summary as `head` reports it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Integrity {
    /// Records still retained.
    pub live: SetSum,
    /// Records dropped by retention.
    pub evicted: SetSum,
}

impl Integrity {
    /// Every record ever accepted: `live + evicted`.
    pub fn total(&self) -> SetSum {
        self.live.combined(self.evicted)
    }

    /// Moves a whole set (a cold chunk's records) from `live` to `evicted`.
    pub fn evict_sum(&mut self, sum: SetSum) {
        self.live = self.live.minus(sum);
        self.evicted = self.evicted.combined(sum);
    }

    /// Moves one record's digest from `live` to `evicted`.
    pub fn evict(&mut self, digest: [u64; 4]) {
        self.live.remove_digest(digest);
        self.evicted.add_digest(digest);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    // SPEC §2 Integrity: order-independent, split into live/evicted/total.
    #[test]
    fn set_sum_is_order_independent_and_invertible() {
        let records: Vec<(u64, &[u8])> = vec![(0, b"ab"), (2, b"cde"), (5, b"f")];
        let mut forward = SetSum::default();
        for (o, p) in &records {
            forward.add_record(*o, p);
        }
        let mut backward = SetSum::default();
        for (o, p) in records.iter().rev() {
            backward.add_record(*o, p);
        }
        assert_eq!(forward, backward);
        assert_eq!(forward.records, 3);

        let mut integ = Integrity { live: forward, evicted: SetSum::default() };
        integ.evict(record_digest(0, b"ab"));
        assert_eq!(integ.total(), forward);
        assert_eq!(integ.live.records, 2);
        let mut expect_live = SetSum::default();
        expect_live.add_record(2, b"cde");
        expect_live.add_record(5, b"f");
        assert_eq!(integ.live, expect_live);
    }

    #[test]
    fn offset_is_part_of_the_digest() {
        assert_ne!(record_digest(0, b"x"), record_digest(1, b"x"));
    }
}
