//! The times of a stream's hot records, kept as runs.
//!
//! Every record carries the millisecond time it was stamped with when it
//! landed: `max(previous record's time, the command's now_ms)`, so times
//! never decrease within a stream and every replica (and every replay)
//! stamps the same value. Under load many consecutive records share one
//! millisecond, so the times are kept as runs `(first offset, time)`: every
//! record from a run's offset up to the next run's offset has the run's
//! time. The cold tier keeps the same runs per pack slice (FORMAT.md, "Cold
//! pack file").
//!
//! Invariants (checked by `GroupState::check_invariants`): with hot
//! records, the first run starts at the first hot record, every run starts
//! at a hot record's start, run offsets and run times strictly increase;
//! without hot records there is no run.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

/// Record times as runs `(first offset, time in ms)`, oldest first.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TimeRuns {
    runs: VecDeque<(u64, u64)>,
}

impl TimeRuns {
    /// The runs, oldest first.
    pub fn iter(&self) -> impl ExactSizeIterator<Item = &(u64, u64)> {
        self.runs.iter()
    }

    /// Number of runs.
    pub fn len(&self) -> usize {
        self.runs.len()
    }

    /// True without runs (no hot record).
    pub fn is_empty(&self) -> bool {
        self.runs.is_empty()
    }

    /// Adds the newest record, starting at `start` (above every earlier
    /// one) with time `at_ms` (at least the newest run's time).
    pub(crate) fn push(&mut self, start: u64, at_ms: u64) {
        match self.runs.back() {
            Some(&(_, last)) if last >= at_ms => {}
            _ => self.runs.push_back((start, at_ms)),
        }
    }

    /// The time of the record that holds `offset` (the newest run starting
    /// at or before it), `None` before the first run.
    pub fn time_at(&self, offset: u64) -> Option<u64> {
        let after = self.runs.partition_point(|&(start, _)| start <= offset);
        after.checked_sub(1).map(|i| self.runs[i].1)
    }

    /// Offset of the first run whose time is at least `at_ms`.
    pub fn first_at_or_after_time(&self, at_ms: u64) -> Option<u64> {
        let i = self.runs.partition_point(|&(_, t)| t < at_ms);
        self.runs.get(i).map(|&(start, _)| start)
    }

    /// The hot records now start at `first` (`None`: none is left): drops
    /// the runs wholly before it and moves the straddling run's start up.
    pub(crate) fn trim_front(&mut self, first: Option<u64>) {
        let Some(first) = first else {
            self.runs.clear();
            return;
        };
        while self.runs.len() > 1 && self.runs[1].0 <= first {
            self.runs.pop_front();
        }
        if let Some(front) = self.runs.front_mut() {
            front.0 = front.0.max(first);
        }
    }

    /// The runs covering `[from, to)`, the first moved up to `from`.
    pub fn covering(&self, from: u64, to: u64) -> Vec<(u64, u64)> {
        let first = self.runs.partition_point(|&(start, _)| start <= from).saturating_sub(1);
        self.runs
            .range(first..)
            .take_while(|&&(start, _)| start < to)
            .map(|&(start, at)| (start.max(from), at))
            .collect()
    }

    /// Builds runs from a list (a decoded snapshot's); the caller checks
    /// the invariants.
    pub(crate) fn from_runs(runs: impl IntoIterator<Item = (u64, u64)>) -> Self {
        TimeRuns { runs: runs.into_iter().collect() }
    }
}

#[cfg(test)]
mod tests {
    use super::TimeRuns;

    #[test]
    fn equal_times_share_a_run_and_lookups_find_the_holding_run() {
        let mut t = TimeRuns::default();
        t.push(0, 5);
        t.push(10, 5);
        t.push(20, 7);
        t.push(30, 7);
        t.push(40, 9);
        assert_eq!(t.iter().copied().collect::<Vec<_>>(), vec![(0, 5), (20, 7), (40, 9)]);
        assert_eq!(t.time_at(0), Some(5));
        assert_eq!(t.time_at(19), Some(5));
        assert_eq!(t.time_at(20), Some(7));
        assert_eq!(t.time_at(1000), Some(9));
        assert_eq!(t.first_at_or_after_time(0), Some(0));
        assert_eq!(t.first_at_or_after_time(6), Some(20));
        assert_eq!(t.first_at_or_after_time(9), Some(40));
        assert_eq!(t.first_at_or_after_time(10), None);
        assert_eq!(t.covering(25, 45), vec![(25, 7), (40, 9)]);
        assert_eq!(t.covering(0, 20), vec![(0, 5)]);
    }

    #[test]
    fn trimming_keeps_the_straddling_run() {
        let mut t = TimeRuns::from_runs([(0, 5), (20, 7), (40, 9)]);
        t.trim_front(Some(30));
        assert_eq!(t.iter().copied().collect::<Vec<_>>(), vec![(30, 7), (40, 9)]);
        t.trim_front(Some(40));
        assert_eq!(t.iter().copied().collect::<Vec<_>>(), vec![(40, 9)]);
        t.trim_front(None);
        assert!(t.is_empty());
        assert_eq!(t.time_at(0), None);
    }
}
