//! Reads that may span cold chunks and hot records (SPEC §2 Read, §3).
//!
//! The state machine cannot touch files, so a read is planned here as a
//! list of pieces: hot pieces carry the bytes (zero-copy slices of the
//! records), cold pieces name a pack file, a slice and a range inside it.
//! The runtime resolves cold pieces through its memory-mapped pack cache
//! ([`ReadPlan::resolve`]); the caller cannot tell cold from hot bytes. A
//! plan always covers exactly `[offset, next_offset)`, piece after piece.

use bytes::{Bytes, BytesMut};

use crate::error::{Error, ErrorKind, Result};
use crate::state::api::ReadReply;
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
    /// Plans the bytes `[offset, offset + max_len)` clamped to the tail
    /// (SPEC §2 Read); `max_len` is already clamped by the caller. Cold
    /// pieces carry pack ids in `file` until [`GroupState`] names them.
    pub(crate) fn plan_read(&self, offset: u64, max_len: usize, group: &GroupState) -> Result<ReadPlan> {
        if offset < self.retained_offset {
            return Err(ErrorKind::OffsetGone { offset, retained: self.retained_offset }.into());
        }
        if offset > self.next_offset {
            return Err(ErrorKind::OffsetOutOfRange { offset, tail: self.next_offset }.into());
        }
        if max_len == 0 {
            return Err(Error::bad_request("max_len must be at least 1"));
        }
        let end = offset.saturating_add(max_len as u64).min(self.next_offset);
        let mut pieces = Vec::new();
        let broken = || Error::corrupted("stream data does not cover the retained range");
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
        })
    }
}
