//! The reference model of a group, for property tests and simulation.
//!
//! [`model::Model`] is a small, obviously-correct restatement of SPEC §2 for
//! one group; [`observe`] reduces the real state machine's answers to the
//! model's vocabulary so the two can be compared step by step (see
//! `tests/group_model.rs`). The model owns no invariant of the engine: it is
//! an oracle, kept independent of `rill_shard::group` on purpose.

pub mod model;
pub mod model_ops;
pub mod model_rules;
pub mod observe;

pub use model::Model;
pub use observe::{observe, Fault, Item, Observed, Outcome};
