//! Client-side consumer helpers over the engine's consumer primitives
//! (leases, committed offsets, membership): the share of streams one
//! member should hold ([`target_partition_count`]) and where a reader
//! starts ([`Start`], resolved by `Engine::start_offset`). The coordinated
//! reader that balances streams across a consumer group's live members
//! builds on them.

/// How many of `total` streams one of `live` consumers should hold: an
/// even share rounded up, plus `slack` so a rebalance does not thrash, and
/// never more than all of them: `min(total, ceil(total / max(live, 1)) +
/// slack)`.
pub fn target_partition_count(total: usize, live: usize, slack: usize) -> usize {
    total.min(total.div_ceil(live.max(1)).saturating_add(slack))
}

/// Where a reader without a committed offset starts.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash)]
pub enum Start {
    /// The oldest retained record.
    #[default]
    Earliest,
    /// The tail: only records appended from now on.
    Latest,
    /// The first record stamped at or after this time (Unix ms).
    Timestamp(u64),
    /// The first record that starts after this offset (a reader that kept
    /// the offset of the last record it handled resumes with the next).
    After(u64),
}

#[cfg(test)]
mod tests {
    use super::target_partition_count;

    #[test]
    fn shares_round_up_take_slack_and_never_exceed_the_total() {
        assert_eq!(target_partition_count(10, 3, 0), 4);
        assert_eq!(target_partition_count(10, 3, 1), 5);
        assert_eq!(target_partition_count(9, 3, 0), 3);
        assert_eq!(target_partition_count(10, 0, 0), 10, "no live consumer counts as one");
        assert_eq!(target_partition_count(10, 1, 5), 10, "capped at the total");
        assert_eq!(target_partition_count(0, 4, 2), 0);
        assert_eq!(target_partition_count(3, 10, 0), 1);
        assert_eq!(target_partition_count(usize::MAX, 1, usize::MAX), usize::MAX);
    }
}
