//! The pure state machine and its vocabulary: what a group is, what changes
//! it, and the values requests and replies carry. Nothing here performs
//! I/O, reads a clock or knows about threads: the runtime and the
//! simulation drive it step by step.
//!
//! * [`group`]: the group state machine ([`group::GroupState`]).
//! * [`command`]: the logged mutations it applies and what they return.
//! * [`api`]: request and reply values of the stream API.
//! * [`fork_copy`]: what a fork copies of its source.
//! * [`name`]: validated stream names.
//! * [`integrity`]: order-independent set-sums over records.

pub mod api;
pub mod command;
pub mod fork_copy;
pub mod group;
pub mod integrity;
pub mod name;
