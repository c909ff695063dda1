//! The group snapshot format (SPEC §7): the whole state of one group as one
//! self-checking byte string.
//!
//! ```text
//! offset  size  field
//!      0     8  magic b"RILLGSNP"
//!      8     2  u16le format version (6; versions 5, 4, 3 and 2 are
//!               read and migrated)
//!     10     4  u32le group
//!     14     4  u32le group_count
//!     18     8  u64le commit_index
//!     26     4  u32le body length N
//!     30     N  body: postcard of (buckets map, cold state, members,
//!                fork book): bucket -> stream -> stream state (hot
//!                records, their time runs, cold chunk references,
//!                consumer groups), then packs and the GC queue, then
//!                consumer group membership, then fork pins, origins and
//!                the outbox (version 2 has no membership; versions 3 and
//!                4 have no retention policy; version 3 has no queue
//!                groups; versions before 6 have no fork book)
//!   30+N    32  BLAKE3 of bytes [0, 30+N)
//! ```
//!
//! Invariants: encoding is deterministic (BTreeMaps throughout, no derived
//! state in the body), so the same state always gives the same bytes. The
//! decoder trusts nothing: it checks sizes before it slices, the checksum
//! before it parses, that the body is the canonical encoding of what it
//! parsed (re-encoding gives the same bytes), and every state invariant
//! afterwards; any failure is `Corrupted`, never a panic. Derived state
//! (hot bytes, stream count, the expiry index) is rebuilt, not stored.
//! Limits are not stored: a snapshot decoded under smaller limits has its
//! producers, producer windows and application snapshots trimmed to them
//! (least recently used producers, oldest outcomes and lowest-offset
//! snapshots go first).

use std::collections::BTreeSet;

use crate::error::{Error, Result};
use crate::state::group::cold::ColdState;
use crate::state::group::consumer_state::ConsumerGroup;
use crate::state::group::forks::ForkBook;
use crate::state::group::members::Members;
use crate::state::group::snapshot_v2::BucketsV2;
use crate::state::group::snapshot_v4::BucketsV4;
use crate::state::group::{producer, Buckets, GroupLimits, GroupState};

const MAGIC: &[u8; 8] = b"RILLGSNP";
const VERSION: u16 = 6;
/// The version before forks: its bodies have no fork book.
const NO_FORKS: u16 = 5;
/// The version before queue groups: its bodies decode as version 4's.
const NO_QUEUES: u16 = 3;
/// The oldest version still read (migrated by `snapshot_v2`).
const OLDEST_READ: u16 = 2;
const HEADER_LEN: usize = 30;
const CHECKSUM_LEN: usize = 32;

impl GroupState {
    /// Serialises the whole group (see the module docs for the layout).
    /// The body holds settled integrity sums (a decoded stream has none
    /// unsettled): a state with unsettled records is settled in a copy
    /// first; callers that own their state call [`GroupState::settle_all`]
    /// to spare the copy.
    pub fn encode_snapshot(&self) -> Vec<u8> {
        let unsettled = self.buckets.values().any(|streams| streams.values().any(|s| s.unsettled() > 0));
        if unsettled {
            let mut settled = self.clone();
            settled.settle_all();
            return settled.encode_snapshot();
        }
        let body = postcard::to_stdvec(&(&self.buckets, &self.cold, &self.members, &self.forks))
            .expect("a group state always serialises");
        let body_len = u32::try_from(body.len()).expect("a group snapshot body fits in 4 GiB");
        let mut out = Vec::with_capacity(HEADER_LEN + body.len() + CHECKSUM_LEN);
        out.extend_from_slice(MAGIC);
        out.extend_from_slice(&VERSION.to_le_bytes());
        out.extend_from_slice(&self.group.to_le_bytes());
        out.extend_from_slice(&self.group_count.to_le_bytes());
        out.extend_from_slice(&self.commit_index.to_le_bytes());
        out.extend_from_slice(&body_len.to_le_bytes());
        out.extend_from_slice(&body);
        let checksum = blake3::hash(&out);
        out.extend_from_slice(checksum.as_bytes());
        out
    }

    /// Parses and checks a snapshot made by [`Self::encode_snapshot`].
    pub fn decode_snapshot(bytes: &[u8], limits: GroupLimits) -> Result<GroupState> {
        if bytes.len() < HEADER_LEN + CHECKSUM_LEN {
            return Err(corrupt("truncated header"));
        }
        if &bytes[0..8] != MAGIC {
            return Err(corrupt("bad magic"));
        }
        let version = u16::from_le_bytes([bytes[8], bytes[9]]);
        if !(OLDEST_READ..=VERSION).contains(&version) {
            return Err(corrupt(format!(
                "format version {version} is not one this build reads ({OLDEST_READ} to {VERSION})"
            )));
        }
        let group = u32::from_le_bytes(array(&bytes[10..14]));
        let group_count = u32::from_le_bytes(array(&bytes[14..18]));
        let commit_index = u64::from_le_bytes(array(&bytes[18..26]));
        let body_len = u32::from_le_bytes(array(&bytes[26..30])) as usize;
        let body_end = HEADER_LEN.checked_add(body_len).ok_or_else(|| corrupt("body length overflows"))?;
        let expected_len =
            body_end.checked_add(CHECKSUM_LEN).ok_or_else(|| corrupt("body length overflows"))?;
        if bytes.len() < expected_len {
            return Err(corrupt("truncated body"));
        }
        if bytes.len() > expected_len {
            return Err(corrupt("trailing bytes after the checksum"));
        }
        if blake3::hash(&bytes[..body_end]).as_bytes()[..] != bytes[body_end..] {
            return Err(corrupt("checksum mismatch"));
        }
        if group >= group_count {
            return Err(corrupt(format!("group {group} is not below group_count {group_count}")));
        }
        let body = &bytes[HEADER_LEN..body_end];
        let mut forks = ForkBook::default();
        let (buckets, cold, members) = if version == VERSION {
            let (buckets, cold, members, book) = decode_body::<(Buckets, ColdState, Members, ForkBook)>(body)?;
            forks = book;
            (buckets, cold, members)
        } else if version == NO_FORKS {
            decode_body::<(Buckets, ColdState, Members)>(body)?
        } else if version >= NO_QUEUES {
            let (old, cold, members) = decode_body::<(BucketsV4, ColdState, Members)>(body)?;
            let queues = old.values().flat_map(|streams| streams.values()).any(|stream| {
                stream.consumers.values().any(|group| matches!(group, ConsumerGroup::Queue(_)))
            });
            if version == NO_QUEUES && queues {
                return Err(corrupt(format!("a version {NO_QUEUES} snapshot cannot hold a queue group")));
            }
            let buckets = old
                .into_iter()
                .map(|(bucket, streams)| {
                    (bucket, streams.into_iter().map(|(name, stream)| (name, stream.migrate())).collect())
                })
                .collect();
            (buckets, cold, members)
        } else {
            let (old, cold) = decode_body::<(BucketsV2, ColdState)>(body)?;
            let buckets = old
                .into_iter()
                .map(|(bucket, streams)| {
                    (bucket, streams.into_iter().map(|(name, stream)| (name, stream.migrate())).collect())
                })
                .collect();
            (buckets, cold, Members::new())
        };

        let mut buckets: Buckets = buckets;
        if crate::planted::active(crate::planted::Bug::RestoreDropsInFlight) {
            for stream in buckets.values_mut().flat_map(|streams| streams.values_mut()) {
                for group in stream.consumers.values_mut() {
                    if let ConsumerGroup::Queue(q) = group {
                        q.in_flight.clear();
                    }
                }
            }
        }
        let mut state = GroupState::new(group, group_count, limits);
        state.commit_index = commit_index;
        state.buckets = buckets;
        state.cold = cold;
        state.members = members;
        state.forks = forks;
        state.trim_to_limits();
        state.rebuild_derived()?;
        state.verify().map_err(|what| corrupt(format!("invariant violated: {what}")))?;
        Ok(state)
    }

    /// Applies the current limits to state that was made under other ones.
    fn trim_to_limits(&mut self) {
        let max_producers = self.limits.max_producers_per_stream.max(1);
        let window_len = self.limits.producer_window;
        let max_snapshots = self.limits.max_snapshots_per_stream;
        for stream in self.buckets.values_mut().flat_map(|streams| streams.values_mut()) {
            while stream.producers.len() > max_producers {
                let Some(victim) = producer::least_recently_used(&stream.producers) else {
                    break;
                };
                stream.producers.remove(&victim);
            }
            for state in stream.producers.values_mut() {
                producer::trim_window(state, window_len);
            }
            while stream.snapshots.len() > max_snapshots {
                stream.snapshots.pop_first();
            }
        }
    }

    /// Recomputes hot bytes, stream count and the expiry index, failing on
    /// arithmetic that a valid state cannot produce.
    fn rebuild_derived(&mut self) -> Result<()> {
        let mut hot_bytes = 0u64;
        let mut stream_count = 0u64;
        let mut expiry = BTreeSet::new();
        for stream in self.streams() {
            let retained = stream
                .records
                .iter()
                .try_fold(0u64, |sum, (_, payload)| sum.checked_add(payload.len() as u64))
                .ok_or_else(|| corrupt("retained bytes overflow"))?;
            hot_bytes = hot_bytes.checked_add(retained).ok_or_else(|| corrupt("hot bytes overflow"))?;
            stream_count += 1;
            if let Some(deadline) = stream.deadline_ms() {
                expiry.insert((deadline, stream.id.clone()));
            }
        }
        self.hot_bytes = hot_bytes;
        self.stream_count = stream_count;
        self.expiry = expiry;
        Ok(())
    }
}

/// Decodes a body `B` (a version's tuple of parts), requiring the
/// canonical encoding and no trailing byte.
fn decode_body<B>(body: &[u8]) -> Result<B>
where
    B: serde::Serialize + serde::de::DeserializeOwned,
{
    let (parts, rest): (B, &[u8]) =
        postcard::take_from_bytes(body).map_err(|e| corrupt(format!("undecodable body: {e}")))?;
    if !rest.is_empty() {
        return Err(corrupt("trailing bytes in the body"));
    }
    if postcard::to_stdvec(&parts).ok().as_deref() != Some(body) {
        return Err(corrupt("body is not in canonical form"));
    }
    Ok(parts)
}

fn corrupt(what: impl Into<String>) -> Error {
    Error::corrupted(format!("group snapshot: {}", what.into()))
}

/// A fixed-size array from a slice whose length the caller checked.
fn array<const N: usize>(slice: &[u8]) -> [u8; N] {
    let mut out = [0u8; N];
    out.copy_from_slice(slice);
    out
}
