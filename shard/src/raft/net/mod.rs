//! Replica-to-replica traffic over TCP (FORMAT.md, "Replication frames"
//! and "Replication handshake").
//!
//! * [`handshake`]: the hello each side sends first; mismatched clusters
//!   or shapes refuse each other.
//! * [`frame`]: checksummed frames carrying many messages each.
//! * [`messages`]: openraft's RPCs in rill's own encoding.
//! * [`transport`]: [`transport::TcpNet`], a node's connections on its
//!   glommio executor.
//! * [`link`]: openraft's network seam over it.
//! * [`acceptor`]: the node's one raft address, handing each accepted
//!   connection to the core its hello names.

pub mod acceptor;
pub mod frame;
pub mod handshake;
pub mod link;
pub mod messages;
pub mod transport;

#[cfg(test)]
mod tests;
