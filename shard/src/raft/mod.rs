//! Consensus (issue 17): the one place that names openraft's types.
//!
//! openraft is pinned to an alpha release whose API moves between
//! versions, so everything that touches it lives below this module and the
//! rest of the crate sees rill's own vocabulary. What is here so far:
//!
//! * [`rt`]: the glommio runtime adapter openraft runs on. One executor
//!   per core, every primitive single-threaded (`Rc`, no atomics), no
//!   tokio anywhere (`cargo tree -p rill-shard -i tokio` prints nothing).
//!
//! The replicated group (log storage over the core's WAL, the state
//! machine over `GroupState`, the transport) builds on these; the design is
//! in ARCHITECTURE.md, "Replication".

pub mod address_book;
pub mod balance;
pub mod checkpoint;
pub mod rt;
pub mod types;
pub mod wire;
pub mod journal;
pub mod log_checkpoint;
pub mod log_image;
pub mod identity;
pub mod log_store;
pub mod mem_net;
pub mod membership;
pub mod net;
pub mod node;
pub mod pacer;
pub mod replica;
pub mod sim;
pub mod state_machine;

#[cfg(test)]
mod tests;
#[cfg(test)]
mod cluster_tests;
#[cfg(test)]
mod durable_tests;
#[cfg(test)]
mod replica_tests;
#[cfg(test)]
mod sim_tests;
#[cfg(test)]
mod pacer_tests;
