//! [`AddressBook`]: where each node of the cluster listens, as this node
//! last learnt it; one per node, shared by its cores and its HTTP server.
//!
//! It starts from the configured member list and learns from every
//! membership the groups apply or install (a node added later, with the
//! addresses the change named) and from every node openraft asks the
//! transport to reach. The transport dials from it and the server forwards
//! clients to a leader's HTTP address from it, so a node added after
//! start is reachable everywhere without restarting anyone.
//!
//! Invariant: an entry is only ever replaced by one a membership carried
//! (a later change may move a node), never removed, so a request in flight
//! to a removed node still finds where to fail.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::sync::{Arc, RwLock};

use super::types::{Member, Membership, NodeId};

/// A node's view of every member's addresses. Clones share it.
#[derive(Clone, Debug, Default)]
pub struct AddressBook {
    members: Arc<RwLock<BTreeMap<NodeId, Member>>>,
}

impl AddressBook {
    /// A book holding `members`.
    pub fn new(members: BTreeMap<NodeId, Member>) -> Self {
        AddressBook { members: Arc::new(RwLock::new(members)) }
    }

    /// Records `member` as node `id`'s addresses (no write when unchanged).
    pub fn learn(&self, id: NodeId, member: &Member) {
        if self.members.read().unwrap_or_else(|p| p.into_inner()).get(&id) == Some(member) {
            return;
        }
        self.members.write().unwrap_or_else(|p| p.into_inner()).insert(id, member.clone());
    }

    /// Records every node of `membership`.
    pub fn learn_all(&self, membership: &Membership) {
        for (id, member) in membership.nodes() {
            self.learn(*id, member);
        }
    }

    /// Node `id`'s addresses, when known.
    pub fn get(&self, id: NodeId) -> Option<Member> {
        self.members.read().unwrap_or_else(|p| p.into_inner()).get(&id).cloned()
    }

    /// Node `id`'s raft address, when known and a socket address.
    pub fn raft_addr(&self, id: NodeId) -> Option<SocketAddr> {
        self.get(id).and_then(|m| m.raft_addr.parse().ok())
    }

    /// Every node known.
    pub fn all(&self) -> BTreeMap<NodeId, Member> {
        self.members.read().unwrap_or_else(|p| p.into_inner()).clone()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(raft: &str) -> Member {
        Member { raft_addr: raft.into(), http_addr: String::new() }
    }

    #[test]
    fn learns_and_replaces_but_never_forgets() {
        let book = AddressBook::new([(1, member("127.0.0.1:7001"))].into_iter().collect());
        let shared = book.clone();
        let membership = Membership::new(
            vec![[1, 4].into_iter().collect()],
            BTreeMap::from([(1, member("127.0.0.1:7101")), (4, member("127.0.0.1:7004"))]),
        )
        .expect("a membership");
        shared.learn_all(&membership);
        assert_eq!(book.raft_addr(4), Some("127.0.0.1:7004".parse().unwrap()));
        assert_eq!(book.raft_addr(1), Some("127.0.0.1:7101".parse().unwrap()), "a membership moves a node");
        book.learn(9, &member("not an address"));
        assert_eq!(book.raft_addr(9), None);
        assert_eq!(book.all().len(), 3);
    }
}
