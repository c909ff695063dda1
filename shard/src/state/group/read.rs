//! Reads that may span cold chunks and hot records (SPEC §2 Read, §3).
//!
//! The state machine cannot touch files, so a read is planned here as a
//! list of pieces: hot pieces carry the bytes (zero-copy slices of the
//! records), cold pieces name a pack file, a slice and a range inside it.
//! The runtime resolves cold pieces through its memory-mapped pack cache
//! ([`ReadPlan::resolve`]); the caller cannot tell cold from hot bytes. A
//! plan always covers exactly `[offset, next_offset)`, piece after piece.
//!
//! A record read ([`StreamState::plan_records`]) also needs the record
//! boundaries and times of the cold chunks it touches, which live in the
//! pack files' record indexes, not in the group state: the planner asks a
//! [`ColdRecords`] for them (the runtime answers from its pack cache, the
//! pure tests and the model from nothing). Cold chunks always hold whole
//! records, so a chunk's ends are record boundaries.

use bytes::{Bytes, BytesMut};

use crate::error::{Error, ErrorKind, Result};
use crate::state::api::{ReadReply, RecordMeta};
use crate::state::group::cold::ColdChunk;
use crate::state::group::stream::StreamState;
use crate::state::group::GroupState;

/// A range of one slice of a pack file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ColdPiece {
    pub file: String,
    pub slice: u32,
    /// Offset inside the slice.
    pub from: u64,
    pub len: u64,
}

/// One contiguous piece of a read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Piece {
    Hot(Bytes),
    Cold(ColdPiece),
}

/// A read, planned: the reply's fields and where its bytes are.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadPlan {
    pub offset: u64,
    pub next_offset: u64,
    pub up_to_date: bool,
    pub closed: bool,
    pub pieces: Vec<Piece>,
    /// The records of a record read (empty for a byte read).
    pub records: Vec<RecordMeta>,
}

/// The record indexes of cold slices (FORMAT.md "Cold pack file").
pub trait ColdRecords {
    /// Calls `f` with the record index of slice `slice` of pack `file`
    /// (`None` for a pack written by a format without one).
    fn with_records<R>(
        &self,
        file: &str,
        slice: u32,
        f: impl FnOnce(Option<rill_cold::RecordIndex<'_>>) -> R,
    ) -> Result<R>;
}

/// The record lookup of state without cold data: any cold chunk is an
/// error.
#[derive(Clone, Copy, Debug, Default)]
pub struct HotOnly;

impl ColdRecords for HotOnly {
    fn with_records<R>(
        &self,
        file: &str,
        slice: u32,
        _f: impl FnOnce(Option<rill_cold::RecordIndex<'_>>) -> R,
    ) -> Result<R> {
        Err(Error::corrupted(format!("{file} slice {slice}: cold records read without a cold store")))
    }
}

impl ReadPlan {
    /// True when every byte is hot.
    pub fn is_hot(&self) -> bool {
        self.pieces.iter().all(|p| matches!(p, Piece::Hot(_)))
    }

    /// Fetches the cold pieces with `fetch` and assembles the reply. A
    /// fetched piece of the wrong length is `Corrupted`.
    pub fn resolve(self, mut fetch: impl FnMut(&ColdPiece) -> Result<Bytes>) -> Result<ReadReply> {
        let want = self.next_offset - self.offset;
        let mut parts = Vec::with_capacity(self.pieces.len());
        for piece in self.pieces {
            let bytes = match piece {
                Piece::Hot(b) => b,
                Piece::Cold(c) => {
                    let b = fetch(&c)?;
                    if b.len() as u64 != c.len {
                        return Err(Error::corrupted(format!(
                            "{} slice {} returned a short range",
                            c.file, c.slice
                        )));
                    }
                    b
                }
            };
            parts.push(bytes);
        }
        let payload = match parts.len() {
            0 => Bytes::new(),
            1 => parts.pop().expect("one part"),
            _ => {
                let mut out = BytesMut::with_capacity(want as usize);
                for p in &parts {
                    out.extend_from_slice(p);
                }
                out.freeze()
            }
        };
        if payload.len() as u64 != want {
            return Err(Error::corrupted("read pieces do not cover the requested range"));
        }
        Ok(ReadReply {
            payload,
            offset: self.offset,
            next_offset: self.next_offset,
            up_to_date: self.up_to_date,
            closed: self.closed,
            records: self.records,
        })
    }
}

/// A resolver for state without cold data: any cold piece is an error.
pub fn hot_only(piece: &ColdPiece) -> Result<Bytes> {
    Err(Error::corrupted(format!(
        "{} slice {}: cold data read without a cold store",
        piece.file, piece.slice
    )))
}

impl StreamState {
    /// The checks every read makes first (SPEC §2 Read): an offset within
    /// `[retained_offset, next_offset]` and a length of at least 1.
    fn check_read(&self, offset: u64, max_len: usize) -> Result<()> {
        if offset < self.retained_offset {
            return Err(ErrorKind::OffsetGone { offset, retained: self.retained_offset }.into());
        }
        if offset > self.next_offset {
            return Err(ErrorKind::OffsetOutOfRange { offset, tail: self.next_offset }.into());
        }
        if max_len == 0 {
            return Err(Error::bad_request("max_len must be at least 1"));
        }
        Ok(())
    }

    /// Plans the bytes `[offset, offset + max_len)` clamped to the tail
    /// (SPEC §2 Read); `max_len` is already clamped by the caller. Cold
    /// pieces carry pack ids in `file` until [`GroupState`] names them.
    pub(crate) fn plan_read(&self, offset: u64, max_len: usize, group: &GroupState) -> Result<ReadPlan> {
        self.check_read(offset, max_len)?;
        let end = offset.saturating_add(max_len as u64).min(self.next_offset);
        let mut pieces = Vec::new();
        let mut at = offset;
        if at < end {
            let first = self.cold.partition_point(|c| c.end() <= at);
            for chunk in self.cold.range(first..) {
                if at >= end {
                    break;
                }
                if chunk.start > at {
                    return Err(broken());
                }
                let to = end.min(chunk.end());
                let file = group.cold.packs.get(&chunk.pack).ok_or_else(broken)?.file.clone();
                pieces.push(Piece::Cold(ColdPiece {
                    file,
                    slice: chunk.slice,
                    from: at - chunk.start,
                    len: to - at,
                }));
                at = to;
            }
        }
        if at < end {
            let first = self.records.partition_point(|(start, p)| start + p.len() as u64 <= at);
            for (start, payload) in self.records.range(first..) {
                if at >= end {
                    break;
                }
                if *start > at {
                    return Err(broken());
                }
                let to = end.min(start + payload.len() as u64);
                let (from, until) = ((at - start) as usize, (to - start) as usize);
                let skew = usize::from(
                    matches!(pieces.last(), Some(Piece::Cold(_)))
                        && until < payload.len()
                        && crate::planted::active(crate::planted::Bug::ColdHotBoundary),
                );
                pieces.push(Piece::Hot(payload.slice(from + skew..until + skew)));
                at = to;
            }
        }
        if at != end {
            return Err(broken());
        }
        Ok(ReadPlan {
            offset,
            next_offset: end,
            up_to_date: end == self.next_offset,
            closed: self.closed && end == self.next_offset,
            pieces,
            records: Vec::new(),
        })
    }

    /// Plans a record read (see [`crate::state::api::Read::records`]):
    /// whole records from the first boundary at or after `offset`, as many
    /// as fit in `max_len` bytes, at least one when one starts before the
    /// tail.
    pub(crate) fn plan_records(
        &self,
        offset: u64,
        max_len: usize,
        group: &GroupState,
        lookup: &impl ColdRecords,
    ) -> Result<ReadPlan> {
        self.check_read(offset, max_len)?;
        let mut records: Vec<RecordMeta> = Vec::new();
        // The end of the last record taken.
        let mut end = None;
        // Full once the next record would end past `max_len` bytes from the
        // first record taken (the first is always taken).
        let full = |records: &[RecordMeta], to: u64| {
            records.first().is_some_and(|first| to > first.offset.saturating_add(max_len as u64))
        };
        let mut stopped = false;
        let first = self.cold.partition_point(|c| c.end() <= offset);
        for chunk in self.cold.range(first..) {
            let file = &group.cold.packs.get(&chunk.pack).ok_or_else(broken)?.file;
            stopped = lookup.with_records(file, chunk.slice, |index| -> Result<bool> {
                let index = index.ok_or_else(|| no_index(chunk, file))?;
                let last = index.len().checked_sub(1).ok_or_else(broken)?;
                if index.start(0) != Some(chunk.start) || index.end(last) != Some(chunk.end()) {
                    return Err(broken());
                }
                for i in index.first_at_or_after(offset)..index.len() {
                    let (Some(at), Some(to), Some(at_ms)) = (index.start(i), index.end(i), index.time(i)) else {
                        return Err(broken());
                    };
                    if full(&records, to) {
                        return Ok(true);
                    }
                    records.push(RecordMeta { offset: at, at_ms });
                    end = Some(to);
                }
                Ok(false)
            })??;
            if stopped {
                break;
            }
        }
        if !stopped {
            let first = self.records.partition_point(|(at, p)| at + p.len() as u64 <= offset);
            for (at, payload) in self.records.range(first..) {
                if *at < offset {
                    continue; // the read starts inside it: skip to the next boundary
                }
                let to = at + payload.len() as u64;
                if full(&records, to) {
                    break;
                }
                let at_ms = self.times.time_at(*at).ok_or_else(broken)?;
                records.push(RecordMeta { offset: *at, at_ms });
                end = Some(to);
            }
        }
        let start = records.first().map(|r| r.offset);
        let (start, end) = match (start, end) {
            (Some(start), Some(end)) => (start, end),
            _ => (self.next_offset, self.next_offset),
        };
        let mut plan = if start == end {
            ReadPlan {
                offset: start,
                next_offset: end,
                up_to_date: end == self.next_offset,
                closed: self.closed && end == self.next_offset,
                pieces: Vec::new(),
                records: Vec::new(),
            }
        } else {
            self.plan_read(start, (end - start) as usize, group)?
        };
        plan.records = records;
        Ok(plan)
    }
}

impl StreamState {
    /// See [`GroupState::offset_at`]. Times never decrease along a stream,
    /// so the cold chunks are searched by bisection on their last record's
    /// time, then inside the chunk.
    pub(crate) fn offset_at(&self, at_ms: u64, group: &GroupState, lookup: &impl ColdRecords) -> Result<u64> {
        let index_of = |chunk: &ColdChunk, f: &mut dyn FnMut(rill_cold::RecordIndex<'_>) -> Option<u64>| {
            let file = &group.cold.packs.get(&chunk.pack).ok_or_else(broken)?.file;
            lookup.with_records(file, chunk.slice, |index| index.map(&mut *f).ok_or_else(|| no_index(chunk, file)))?
        };
        let last_time = |chunk: &ColdChunk| -> Result<u64> {
            index_of(chunk, &mut |index| index.len().checked_sub(1).and_then(|i| index.time(i)))?.ok_or_else(broken)
        };
        // The first chunk whose last record is at or after `at_ms`.
        let (mut lo, mut hi) = (0, self.cold.len());
        while lo < hi {
            let mid = lo + (hi - lo) / 2;
            if last_time(&self.cold[mid])? >= at_ms {
                hi = mid;
            } else {
                lo = mid + 1;
            }
        }
        let found = match self.cold.get(lo) {
            Some(chunk) => index_of(chunk, &mut |index| {
                let i = index.first_at_or_after_time(at_ms);
                index.start(i)
            })?,
            None => self.times.first_at_or_after_time(at_ms),
        };
        Ok(found.map_or(self.next_offset, |offset| offset.max(self.retained_offset)))
    }
}

fn broken() -> Error {
    Error::corrupted("stream data does not cover the retained range")
}

fn no_index(chunk: &ColdChunk, file: &str) -> Error {
    ErrorKind::NoRecordIndex { offset: chunk.start, file: file.to_string() }.into()
}
