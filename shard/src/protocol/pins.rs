//! WAL pins: which of a core's log records are still needed by a group
//! because no durable checkpoint of that group covers them yet.
//!
//! A group's pin is the lowest LSN of its records that its last durable
//! checkpoint does not hold (none when every record it logged is in one).
//! The core's log may retire a segment only when every record in it is
//! below every pin: [`WalPins::retire_cut`] is the highest LSN that is, so
//! groups can be checkpointed one at a time (each right after its own
//! flush, holding only its few hot bytes) and the log still shrinks
//! without a run over every group.
//!
//! The driver reports three events per group, in this order for a run:
//! * [`WalPins::submitting`] before each record it submits, with a lower
//!   bound of the LSN the record will get (the log's last LSN plus one), so
//!   the pin is never above the record;
//! * [`WalPins::cloned`] when it takes the state a checkpoint will hold:
//!   records submitted from then on are not in that checkpoint;
//! * [`WalPins::checkpointed`] once that checkpoint is durable (file
//!   synced, renamed, directory synced): the pin moves to the first record
//!   submitted after the clone.
//!
//! Invariants: a pin only moves at `checkpointed`, to a value no lower
//! than records the durable checkpoint holds; a run abandoned between
//! `cloned` and `checkpointed` leaves the pin where it was (the next run's
//! clone covers everything since); pins live in memory only, because
//! recovery replays what the log kept by commit index and then empties
//! the log (`consolidate`), so each run starts with no pins.

use std::collections::BTreeMap;

/// One group's pin (see the module docs).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Pin {
    /// Lowest LSN not held by the last durable checkpoint.
    from: Option<u64>,
    /// Lowest LSN submitted since the last clone.
    since_clone: Option<u64>,
}

/// The pins of one core's groups.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WalPins {
    groups: BTreeMap<u32, Pin>,
}

impl WalPins {
    /// No pins.
    pub fn new() -> Self {
        WalPins::default()
    }

    /// Group `group` is about to submit a record whose LSN will be at
    /// least `lsn`.
    pub fn submitting(&mut self, group: u32, lsn: u64) {
        let pin = self.groups.entry(group).or_default();
        pin.from.get_or_insert(lsn);
        pin.since_clone.get_or_insert(lsn);
    }

    /// The state a checkpoint of `group` will hold was just taken.
    pub fn cloned(&mut self, group: u32) {
        self.groups.entry(group).or_default().since_clone = None;
    }

    /// The checkpoint of `group` taken at its last [`WalPins::cloned`] is
    /// durable.
    pub fn checkpointed(&mut self, group: u32) {
        let pin = self.groups.entry(group).or_default();
        pin.from = pin.since_clone;
    }

    /// The lowest pin of all groups, if any.
    pub fn lowest(&self) -> Option<u64> {
        self.groups.values().filter_map(|p| p.from).min()
    }

    /// Group `group`'s pin, if any.
    pub fn pin_of(&self, group: u32) -> Option<u64> {
        self.groups.get(&group).and_then(|p| p.from)
    }

    /// The groups whose pins are at or below `lsn`, lowest pin first: the
    /// ones holding the oldest log records.
    pub fn pinned_at_or_below(&self, lsn: u64) -> Vec<u32> {
        let mut groups: Vec<(u64, u32)> =
            self.groups.iter().filter_map(|(g, p)| p.from.filter(|f| *f <= lsn).map(|f| (f, *g))).collect();
        groups.sort_unstable();
        groups.into_iter().map(|(_, g)| g).collect()
    }

    /// The highest LSN through which the log may retire, at most `upto`
    /// (the log's durable LSN): just below the lowest pin.
    pub fn retire_cut(&self, upto: u64) -> u64 {
        if crate::planted::active(crate::planted::Bug::RetirePinned) {
            return upto;
        }
        match self.lowest() {
            Some(pin) => upto.min(pin.saturating_sub(1)),
            None => upto,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_pins_retire_through_the_durable_lsn() {
        let pins = WalPins::new();
        assert_eq!(pins.retire_cut(42), 42);
        assert_eq!(pins.lowest(), None);
    }

    #[test]
    fn a_checkpoint_moves_a_pin_past_what_it_holds() {
        let mut pins = WalPins::new();
        pins.submitting(1, 10);
        pins.submitting(2, 11);
        pins.submitting(1, 12);
        assert_eq!(pins.retire_cut(100), 9);
        pins.cloned(1);
        pins.submitting(1, 13); // after the clone: not in the checkpoint
        assert_eq!(pins.retire_cut(100), 9, "not durable yet");
        pins.checkpointed(1);
        assert_eq!(pins.pin_of(1), Some(13));
        assert_eq!(pins.retire_cut(100), 10, "group 2 still pins 11");
        pins.cloned(2);
        pins.checkpointed(2);
        assert_eq!(pins.pin_of(2), None);
        assert_eq!(pins.retire_cut(100), 12);
        assert_eq!(pins.retire_cut(5), 5, "never past the durable LSN");
    }

    #[test]
    fn the_oldest_pins_come_first() {
        let mut pins = WalPins::new();
        pins.submitting(7, 30);
        pins.submitting(4, 20);
        pins.submitting(9, 50);
        assert_eq!(pins.pinned_at_or_below(40), vec![4, 7]);
        assert_eq!(pins.pinned_at_or_below(10), Vec::<u32>::new());
    }

    #[test]
    fn an_abandoned_run_keeps_the_pin() {
        let mut pins = WalPins::new();
        pins.submitting(3, 5);
        pins.cloned(3);
        pins.submitting(3, 6);
        // The write failed: no checkpointed. The next run covers both.
        assert_eq!(pins.pin_of(3), Some(5));
        pins.cloned(3);
        pins.checkpointed(3);
        assert_eq!(pins.pin_of(3), None);
    }
}
