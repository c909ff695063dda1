//! Where a group's leadership belongs: each group has a preferred node
//! (the voters in id order, one group after another), so a node leads an
//! equal share of every core's groups and the leaders' work (proposals,
//! replication, heartbeats) is spread over the nodes instead of piling up
//! on whichever node won the most elections.
//!
//! Pure rules only; the per-core [`Pacer`](super::pacer::Pacer) applies
//! them. Invariants: leadership is only ever handed to the preferred node,
//! and only when that node already holds every entry the leader has
//! (openraft's transfer then makes it campaign at once), so a transfer
//! never waits on a catch-up and never picks a node that is down or
//! behind; a group moves at most once per cool-down.

use std::collections::BTreeMap;

use super::types::NodeId;

/// The node `group`'s leadership belongs to among `voters` (sorted, as a
/// `BTreeMap`'s keys are), or `None` without voters.
pub fn preferred_leader(group: u32, voters: &[NodeId]) -> Option<NodeId> {
    if voters.is_empty() {
        return None;
    }
    voters.get(group as usize % voters.len()).copied()
}

/// What a leading replica knows of its followers: its last log index and,
/// per node, the last index that node is known to hold.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct LeaderView {
    /// This replica's last log index.
    pub last_log: Option<u64>,
    /// Each voter's matched index (`None`: nothing known yet).
    pub matched: BTreeMap<NodeId, Option<u64>>,
}

/// Whether `me`, leading `group`, should hand leadership to another node
/// now, and to which: its preferred node, when that is not `me` and holds
/// every entry `me` has.
pub fn hand_over(group: u32, me: NodeId, voters: &[NodeId], view: &LeaderView) -> Option<NodeId> {
    let to = preferred_leader(group, voters)?;
    if to == me {
        return None;
    }
    let holds = view.matched.get(&to).copied().flatten()?;
    (holds >= view.last_log.unwrap_or(0)).then_some(to)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn preferred_leaders_take_the_voters_in_turn() {
        let voters = [2, 5, 7];
        let picks: Vec<Option<NodeId>> = (0..6).map(|g| preferred_leader(g, &voters)).collect();
        assert_eq!(picks, [2, 5, 7, 2, 5, 7].map(Some));
        assert_eq!(preferred_leader(3, &[]), None);
    }

    #[test]
    fn leadership_moves_only_to_a_caught_up_preferred_node() {
        let voters = [1, 2, 3];
        let view = |last: u64, two: Option<u64>| LeaderView {
            last_log: Some(last),
            matched: [(1, Some(last)), (2, two), (3, Some(last))].into_iter().collect(),
        };
        // Group 1 belongs to node 2.
        assert_eq!(hand_over(1, 1, &voters, &view(10, Some(10))), Some(2));
        assert_eq!(hand_over(1, 1, &voters, &view(10, Some(9))), None, "node 2 is behind");
        assert_eq!(hand_over(1, 1, &voters, &view(10, None)), None, "nothing known of node 2");
        assert_eq!(hand_over(1, 2, &voters, &view(10, Some(10))), None, "node 2 already leads it");
        assert_eq!(hand_over(1, 1, &voters, &LeaderView::default()), None, "no follower known");
    }
}
