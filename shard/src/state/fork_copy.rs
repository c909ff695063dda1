//! What a fork copies of its source (SPEC §2 "Forks"): the pure part of
//! `Engine::fork`'s step 2, shared with the crash simulation so both copy
//! by one rule.
//!
//! [`ForkCopy::new`] checks the fork point against the source's retained
//! start and tail; the caller then reads the source's records from the
//! retained start while [`ForkCopy::wants_read_at`] says so, handing each
//! record read to [`ForkCopy::take`] (and the retained part of a record
//! that straddles the start to [`ForkCopy::take_part`]);
//! [`ForkCopy::finish`] resolves the point to a byte offset and returns
//! the inherited records, the last one cut there, copied out of the reads
//! (a cold read is a view of a mapped pack file, which the fork must not
//! keep).

use bytes::Bytes;

use crate::error::{Error, Result};
use crate::state::api::{ForkPoint, ReadReply};

/// A fork's copy in progress.
#[derive(Clone, Debug)]
pub struct ForkCopy {
    point: ForkPoint,
    start: u64,
    tail: u64,
    /// The offset the copy reaches before what the point keeps past it.
    anchor: u64,
    /// Records still wanted from the anchor on.
    wanted_past: u64,
    records: Vec<(u64, Bytes)>,
    copied: u64,
}

impl ForkCopy {
    /// A copy of a source whose retained start is `start` and tail `tail`;
    /// a point past the tail, below the start, or a sub-offset at the tail
    /// is `BadRequest`.
    pub fn new(point: ForkPoint, start: u64, tail: u64) -> Result<Self> {
        let (anchor, wanted_past) = match point {
            ForkPoint::Tail => (tail, 0),
            ForkPoint::Offset(offset)
            | ForkPoint::IntoRecord { offset, bytes: 0 }
            | ForkPoint::Records { offset, count: 0 } => (offset, 0),
            ForkPoint::IntoRecord { offset, .. } => (offset, 1),
            ForkPoint::Records { offset, count } => (offset, count),
        };
        if anchor > tail {
            return Err(Error::bad_request(format!("fork offset {anchor} is past the source's tail {tail}")));
        }
        if anchor < start {
            return Err(Error::bad_request(format!(
                "fork offset {anchor} is below the source's retained start {start}"
            )));
        }
        if wanted_past > 0 && anchor == tail {
            return Err(Error::bad_request(format!(
                "a fork sub-offset needs a record at offset {anchor}, the source's tail"
            )));
        }
        Ok(ForkCopy { point, start, tail, anchor, wanted_past, records: Vec::new(), copied: 0 })
    }

    /// Where the copy starts (the source's retained start).
    pub fn start(&self) -> u64 {
        self.start
    }

    /// Whether the copy needs a read from `at`, the offset after the last.
    pub fn wants_read_at(&self, at: u64) -> bool {
        at < self.anchor || (self.wanted_past > 0 && at < self.tail)
    }

    /// The retained part of a record that straddles the start, at `offset`.
    pub fn take_part(&mut self, offset: u64, part: Bytes) {
        self.copied += part.len() as u64;
        self.records.push((offset, part));
    }

    /// The records of a record read, up to what the point keeps.
    pub fn take(&mut self, reply: &ReadReply) {
        for (meta, payload) in reply.record_iter() {
            if meta.offset >= self.anchor {
                if self.wanted_past == 0 {
                    break;
                }
                self.wanted_past -= 1;
            }
            self.copied += payload.len() as u64;
            self.records.push((meta.offset, payload));
        }
    }

    /// Bytes taken so far.
    pub fn copied(&self) -> u64 {
        self.copied
    }

    /// The fork offset and the inherited records, or `BadRequest` for a
    /// point not at a record start or past the record or records it counts.
    pub fn finish(self) -> Result<(u64, Vec<Bytes>)> {
        let anchor = self.anchor;
        let mut past = self.records.iter().filter(|(offset, _)| *offset >= anchor);
        let first = past.clone().next();
        let sub_offset = matches!(
            self.point,
            ForkPoint::IntoRecord { bytes: 1.., .. } | ForkPoint::Records { count: 1.., .. }
        );
        if sub_offset && first.is_some_and(|(offset, _)| *offset != anchor) {
            return Err(Error::bad_request(format!(
                "fork offset {anchor} is not where a record of the source starts"
            )));
        }
        let end = match self.point {
            ForkPoint::IntoRecord { bytes, .. } if bytes > 0 => {
                let Some((_, record)) = first else {
                    return Err(Error::bad_request(format!("no record of the source starts at {anchor}")));
                };
                if bytes > record.len() as u64 {
                    return Err(Error::bad_request(format!(
                        "fork sub-offset {bytes} is past the end of the {}-byte record at {anchor}",
                        record.len()
                    )));
                }
                anchor + bytes
            }
            ForkPoint::Records { count, .. } if count > 0 => {
                let found = past.clone().count() as u64;
                let Some((offset, record)) = past.nth(count as usize - 1) else {
                    return Err(Error::bad_request(format!(
                        "fork sub-offset {count} is past the {found} records from offset {anchor}"
                    )));
                };
                offset + record.len() as u64
            }
            _ => anchor,
        };
        let inherited = self
            .records
            .iter()
            .take_while(|(offset, _)| *offset < end)
            .map(|(offset, record)| {
                let len = ((end - offset) as usize).min(record.len());
                Bytes::copy_from_slice(&record[..len])
            })
            .collect();
        Ok((end, inherited))
    }
}
