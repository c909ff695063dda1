//! The record index of a slice (pack format version 3, FORMAT.md "Cold pack
//! file"): where each record of the slice starts, and the time of each
//! record, stored in the slice's table entry.
//!
//! This module owns the index's two forms and its encoding inside a table
//! entry:
//!
//! * [`RecordIndexBuf`], owned, in absolute stream offsets: what a writer
//!   builds record by record and hands to the pack writer;
//! * [`RecordIndex`], a borrowed, allocation-free view over the index bytes
//!   of a parsed pack's table, answering lookups by offset and by time with
//!   binary searches over those bytes.
//!
//! The invariants, kept by [`RecordIndexBuf::push`] on the write side,
//! checked again by the writer ([`check_index`]) and by the parser
//! ([`check_raw`]) on arbitrary bytes:
//!
//! * a slice has at least one record; record starts are strictly
//!   increasing, the first is the slice's first byte and every one lies
//!   inside the slice (so records are non-empty and tile the slice);
//! * record times never decrease; they are stored as time runs, each the
//!   start of its first record and its time: at least one run, the first at
//!   the first record, run starts strictly increasing and each a record's
//!   start, run times strictly increasing;
//! * on disk, starts and run starts are `u32` offsets relative to the slice
//!   start (so a slice of a version 3 pack is at most `u32::MAX` bytes), and
//!   a run's time is a `u64` of milliseconds, all little-endian.
//!
//! [`check_raw`] validates in O(records + runs) without allocating; a
//! [`RecordIndex`] is only ever built over bytes it accepted.

use std::fmt;

use crate::error::{ColdError, Result};

/// Bytes of one record start on disk (`u32` relative offset).
pub const RECORD_START_LEN: usize = 4;
/// Bytes of one time run on disk (`u32` relative offset, `u64` time).
pub const TIME_RUN_LEN: usize = 12;

/// An owned record index for one slice, in absolute stream offsets.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RecordIndexBuf {
    /// Start of every record, strictly increasing.
    starts: Vec<u64>,
    /// `(start, at_ms)` of every time run: starts strictly increasing and
    /// each in `starts`, times strictly increasing, the first at
    /// `starts[0]`.
    runs: Vec<(u64, u64)>,
}

impl RecordIndexBuf {
    /// An empty index.
    pub fn new() -> Self {
        RecordIndexBuf::default()
    }

    /// Adds a record starting at `start` (which must be above the previous
    /// record's start; `InvalidInput` otherwise, and the index is left as it
    /// was) with time `at_ms`. A time below the previous record's is raised
    /// to it (times never decrease); a new time run begins only when the
    /// time grows.
    pub fn push(&mut self, start: u64, at_ms: u64) -> Result<()> {
        if let Some(&last) = self.starts.last() {
            if start <= last {
                return Err(ColdError::invalid_input(format!(
                    "record index: record at {start} does not start above the previous one at {last}"
                )));
            }
        }
        match self.runs.last() {
            Some(&(_, time)) if at_ms <= time => {}
            _ => self.runs.push((start, at_ms)),
        }
        self.starts.push(start);
        Ok(())
    }

    /// Appends every record of `index`, which must start above this index's
    /// last record (`InvalidInput` otherwise, and nothing is appended).
    /// Times are raised as by [`push`](Self::push).
    pub fn extend_from(&mut self, index: &RecordIndex<'_>) -> Result<()> {
        if let (Some(&last), Some(first)) = (self.starts.last(), index.start(0)) {
            if first <= last {
                return Err(ColdError::invalid_input(format!(
                    "record index: appended records start at {first}, not above the last one at {last}"
                )));
            }
        }
        self.starts.reserve(index.len());
        for (start, at_ms) in index.iter() {
            self.push(start, at_ms)?;
        }
        Ok(())
    }

    /// Number of records.
    pub fn len(&self) -> usize {
        self.starts.len()
    }

    /// Whether the index holds no record (a pack writer refuses it).
    pub fn is_empty(&self) -> bool {
        self.starts.is_empty()
    }

    /// The start of every record, in order.
    pub fn starts(&self) -> &[u64] {
        &self.starts
    }

    /// The time runs: `(absolute start, at_ms)` of each, in order.
    pub fn runs(&self) -> &[(u64, u64)] {
        &self.runs
    }

    /// An index with exactly these fields, invariants unchecked: how tests
    /// reach the writer's checks of rules `push` cannot break.
    #[cfg(test)]
    pub(crate) fn from_raw(starts: Vec<u64>, runs: Vec<(u64, u64)>) -> Self {
        RecordIndexBuf { starts, runs }
    }
}

/// Checks `index` as the record index of the slice `[start, start + len)`
/// of a version 3 pack; the error says which rule it breaks.
pub(crate) fn check_index(index: &RecordIndexBuf, start: u64, len: u64) -> std::result::Result<(), String> {
    if len > u64::from(u32::MAX) {
        return Err(format!("slice of {len} bytes is longer than a record index can address ({})", u32::MAX));
    }
    let end = start.checked_add(len).ok_or_else(|| format!("stream range {start} + {len} overflows"))?;
    let starts = &index.starts;
    let (Some(&first), Some(&last)) = (starts.first(), starts.last()) else {
        return Err("record index holds no record".into());
    };
    if first != start {
        return Err(format!("first record starts at {first}, not at the slice start {start}"));
    }
    if last >= end {
        return Err(format!("record at {last} starts at or past the slice end {end}"));
    }
    if let Some(pair) = starts.windows(2).find(|pair| pair[1] <= pair[0]) {
        return Err(format!("record at {} does not start above the previous one at {}", pair[1], pair[0]));
    }
    let runs = &index.runs;
    let Some(&(first_run, _)) = runs.first() else {
        return Err("record index holds no time run".into());
    };
    if first_run != start {
        return Err(format!("first time run starts at {first_run}, not at the first record {start}"));
    }
    if runs.len() > starts.len() {
        return Err(format!("{} time runs for {} records", runs.len(), starts.len()));
    }
    if let Some(pair) = runs.windows(2).find(|pair| pair[1].0 <= pair[0].0) {
        return Err(format!(
            "time run at {} does not start above the previous one at {}",
            pair[1].0, pair[0].0
        ));
    }
    if let Some(pair) = runs.windows(2).find(|pair| pair[1].1 <= pair[0].1) {
        return Err(format!(
            "time run at {} has time {}, not above the previous run's {}",
            pair[1].0, pair[1].1, pair[0].1
        ));
    }
    // Both sequences are increasing: one merge walk finds each run's record.
    let mut records = starts.iter().peekable();
    for &(run, _) in runs {
        while records.next_if(|&&s| s < run).is_some() {}
        if records.peek() != Some(&&run) {
            return Err(format!("time run at {run} does not start at a record"));
        }
    }
    Ok(())
}

/// Appends the index's on-disk form to `out`: `u32` record count, `u32` run
/// count, the relative starts, the runs. `index` must have passed
/// [`check_index`] for a slice starting at `start`.
pub(crate) fn encode_index(out: &mut Vec<u8>, index: &RecordIndexBuf, start: u64) {
    let rel = |at: u64| -> [u8; 4] {
        debug_assert!(at >= start && at - start <= u64::from(u32::MAX));
        ((at - start) as u32).to_le_bytes()
    };
    out.extend_from_slice(&(index.starts.len() as u32).to_le_bytes());
    out.extend_from_slice(&(index.runs.len() as u32).to_le_bytes());
    for &at in &index.starts {
        out.extend_from_slice(&rel(at));
    }
    for &(at, at_ms) in &index.runs {
        out.extend_from_slice(&rel(at));
        out.extend_from_slice(&at_ms.to_le_bytes());
    }
}

/// Bytes the on-disk form of an index of `records` records in `runs` runs
/// takes after the two counts.
pub(crate) fn index_body_len(records: u64, runs: u64) -> Option<u64> {
    records.checked_mul(RECORD_START_LEN as u64)?.checked_add(runs.checked_mul(TIME_RUN_LEN as u64)?)
}

fn u32_at(bytes: &[u8], at: usize) -> Option<u32> {
    let raw = bytes.get(at..at.checked_add(4)?)?;
    Some(u32::from_le_bytes([raw[0], raw[1], raw[2], raw[3]]))
}

fn u64_at(bytes: &[u8], at: usize) -> Option<u64> {
    let raw = bytes.get(at..at.checked_add(8)?)?;
    let mut out = [0u8; 8];
    out.copy_from_slice(raw);
    Some(u64::from_le_bytes(out))
}

/// Checks the two counts of an index: at least one record, and between one
/// time run and one per record.
pub(crate) fn check_counts(records: u64, runs: u64) -> std::result::Result<(), String> {
    if records == 0 {
        return Err("record count is zero".into());
    }
    if runs == 0 {
        return Err("run count is zero".into());
    }
    if runs > records {
        return Err(format!("{runs} time runs for {records} records"));
    }
    Ok(())
}

/// Checks raw index bytes (`starts`: the relative record starts, `runs`:
/// the time runs, both exactly as long as their counts say) for a slice of
/// `len` bytes; the error says which rule they break. O(records + runs), no
/// allocation.
pub(crate) fn check_raw(starts: &[u8], runs: &[u8], len: u64) -> std::result::Result<(), String> {
    if len > u64::from(u32::MAX) {
        return Err(format!("slice of {len} bytes is longer than a record index can address ({})", u32::MAX));
    }
    if !starts.len().is_multiple_of(RECORD_START_LEN) || !runs.len().is_multiple_of(TIME_RUN_LEN) {
        return Err(format!("index of {} + {} bytes is not whole starts and runs", starts.len(), runs.len()));
    }
    let records = starts.len() / RECORD_START_LEN;
    let run_count = runs.len() / TIME_RUN_LEN;
    check_counts(records as u64, run_count as u64)?;
    let rel = |i: usize| u32_at(starts, i * RECORD_START_LEN).unwrap_or(u32::MAX);
    let mut previous = None;
    for i in 0..records {
        let at = rel(i);
        match previous {
            None if at != 0 => return Err(format!("record 0 starts at relative offset {at}, not 0")),
            Some(before) if at <= before => {
                return Err(format!(
                    "record {i} starts at relative offset {at}, not above record {}'s {before}",
                    i - 1
                ))
            }
            _ => {}
        }
        if u64::from(at) >= len {
            return Err(format!(
                "record {i} starts at relative offset {at}, outside the slice of {len} bytes"
            ));
        }
        previous = Some(at);
    }
    let mut record = 0;
    let mut previous: Option<(u32, u64)> = None;
    for j in 0..run_count {
        let at = u32_at(runs, j * TIME_RUN_LEN).unwrap_or(u32::MAX);
        let at_ms = u64_at(runs, j * TIME_RUN_LEN + 4).unwrap_or(0);
        match previous {
            None if at != 0 => return Err(format!("time run 0 starts at relative offset {at}, not 0")),
            Some((before, _)) if at <= before => {
                return Err(format!(
                    "time run {j} starts at relative offset {at}, not above run {}'s {before}",
                    j - 1
                ))
            }
            Some((_, time)) if at_ms <= time => {
                return Err(format!("time run {j} has time {at_ms}, not above run {}'s {time}", j - 1))
            }
            _ => {}
        }
        // Run starts increase, so the walk over the records only moves on.
        while record < records && rel(record) < at {
            record += 1;
        }
        if record == records || rel(record) != at {
            return Err(format!("time run {j} starts at relative offset {at}, which no record starts at"));
        }
        previous = Some((at, at_ms));
    }
    Ok(())
}

/// The first `i` in `0..n` for which `below(i)` is false, where `below` is
/// true on a prefix of `0..n` and false after it (`n` when it is true on
/// all).
fn partition(n: usize, below: impl Fn(usize) -> bool) -> usize {
    let (mut lo, mut hi) = (0, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if below(mid) {
            lo = mid + 1;
        } else {
            hi = mid;
        }
    }
    lo
}

/// The record index of one slice of a parsed version 3 pack: a borrowed
/// view over the index bytes of the pack's table, answering in absolute
/// stream offsets. Never empty. Built only over bytes the parser accepted.
#[derive(Clone, Copy)]
pub struct RecordIndex<'a> {
    /// Stream offset of the slice's first byte.
    slice_start: u64,
    /// Length of the slice, at most `u32::MAX`.
    slice_len: u64,
    /// The relative record starts, [`RECORD_START_LEN`] bytes each.
    starts: &'a [u8],
    /// The time runs, [`TIME_RUN_LEN`] bytes each.
    runs: &'a [u8],
}

impl fmt::Debug for RecordIndex<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RecordIndex")
            .field("slice_start", &self.slice_start)
            .field("slice_len", &self.slice_len)
            .field("records", &self.len())
            .field("runs", &self.run_count())
            .finish()
    }
}

impl<'a> RecordIndex<'a> {
    /// A view over index bytes that passed [`check_raw`] for the slice
    /// `[slice_start, slice_start + slice_len)`.
    pub(crate) fn new(slice_start: u64, slice_len: u64, starts: &'a [u8], runs: &'a [u8]) -> Self {
        debug_assert!(check_raw(starts, runs, slice_len).is_ok());
        RecordIndex { slice_start, slice_len, starts, runs }
    }

    /// Number of records; at least one.
    pub fn len(&self) -> usize {
        self.starts.len() / RECORD_START_LEN
    }

    /// Whether the index holds no record (never, for a parsed slice).
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Number of time runs: at least one, at most [`len`](Self::len).
    pub fn run_count(&self) -> usize {
        self.runs.len() / TIME_RUN_LEN
    }

    /// Relative start of record `i`.
    fn rel(&self, i: usize) -> Option<u32> {
        u32_at(self.starts, i.checked_mul(RECORD_START_LEN)?)
    }

    /// Relative start of run `j`.
    fn run_rel(&self, j: usize) -> Option<u32> {
        u32_at(self.runs, j.checked_mul(TIME_RUN_LEN)?)
    }

    /// Time of run `j`.
    fn run_time(&self, j: usize) -> Option<u64> {
        u64_at(self.runs, j.checked_mul(TIME_RUN_LEN)?.checked_add(4)?)
    }

    /// The slice's end offset.
    fn slice_end(&self) -> u64 {
        self.slice_start + self.slice_len
    }

    /// Stream offset where record `i` starts.
    pub fn start(&self, i: usize) -> Option<u64> {
        self.rel(i).map(|rel| self.slice_start + u64::from(rel))
    }

    /// Stream offset where record `i` ends: the start of record `i + 1`, or
    /// the slice's end for the last record.
    pub fn end(&self, i: usize) -> Option<u64> {
        if i >= self.len() {
            return None;
        }
        Some(self.start(i + 1).unwrap_or_else(|| self.slice_end()))
    }

    /// Time (milliseconds) of record `i`: that of the last run starting at
    /// or before it.
    pub fn time(&self, i: usize) -> Option<u64> {
        let rel = self.rel(i)?;
        let runs = partition(self.run_count(), |j| self.run_rel(j).is_some_and(|r| r <= rel));
        self.run_time(runs.checked_sub(1)?)
    }

    /// Index of the first record starting at or after stream offset
    /// `offset`; [`len`](Self::len) when none does.
    pub fn first_at_or_after(&self, offset: u64) -> usize {
        let Some(target) = offset.checked_sub(self.slice_start) else { return 0 };
        match u32::try_from(target) {
            Ok(target) => partition(self.len(), |i| self.rel(i).is_some_and(|r| r < target)),
            // Beyond any relative offset: every record starts before it.
            Err(_) => self.len(),
        }
    }

    /// The record whose bytes `[start, end)` hold stream offset `offset`;
    /// `None` when the offset lies outside the slice.
    pub fn containing(&self, offset: u64) -> Option<usize> {
        if offset < self.slice_start || offset >= self.slice_end() {
            return None;
        }
        let target = u32::try_from(offset - self.slice_start).ok()?;
        partition(self.len(), |i| self.rel(i).is_some_and(|r| r <= target)).checked_sub(1)
    }

    /// Index of the first record whose time is at or after `at_ms`;
    /// [`len`](Self::len) when none is.
    pub fn first_at_or_after_time(&self, at_ms: u64) -> usize {
        let run = partition(self.run_count(), |j| self.run_time(j).is_some_and(|t| t < at_ms));
        match self.run_rel(run) {
            Some(at) => partition(self.len(), |i| self.rel(i).is_some_and(|r| r < at)),
            None => self.len(),
        }
    }

    /// `(absolute start, at_ms)` of every record, in order.
    pub fn iter(&self) -> impl Iterator<Item = (u64, u64)> + 'a {
        Records { index: *self, next: 0, run: 0 }
    }
}

/// The walk behind [`RecordIndex::iter`]: one pass over the records and
/// the runs together.
struct Records<'a> {
    index: RecordIndex<'a>,
    next: usize,
    run: usize,
}

impl Iterator for Records<'_> {
    type Item = (u64, u64);

    fn next(&mut self) -> Option<(u64, u64)> {
        let rel = self.index.rel(self.next)?;
        while self.index.run_rel(self.run + 1).is_some_and(|r| r <= rel) {
            self.run += 1;
        }
        self.next += 1;
        Some((self.index.slice_start + u64::from(rel), self.index.run_time(self.run).unwrap_or(0)))
    }

    fn size_hint(&self) -> (usize, Option<usize>) {
        let left = self.index.len().saturating_sub(self.next);
        (left, Some(left))
    }
}

impl ExactSizeIterator for Records<'_> {}
