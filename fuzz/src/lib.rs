//! `rill-fuzz`: the correctness harness (FUZZING.md).
//!
//! * The reference model of a group: [`model::Model`] is a small,
//!   obviously-correct restatement of SPEC §2 for one group (handlers in
//!   `model/ops.rs`, shared rules in `model/rules.rs`, the cold tier in `model/cold.rs`, forks in
//!   `model/forks.rs`); [`observe`] reduces
//!   the real state machine's answers to the model's vocabulary so the two
//!   can be compared step by step. The model owns no invariant of the
//!   engine: it is an oracle, kept independent of `rill_shard::state::group` on
//!   purpose.
//! * Decoder fuzz targets ([`targets`]) with their seed corpus and mutator
//!   ([`corpus`]) and an input reader ([`cursor`]), and the HTTP server's
//!   request-to-command mapping ([`http_target`]).
//! * The deterministic simulation ([`sim`]): random operations, crashes and
//!   I/O faults against the real state machine, WAL and recovery, checked
//!   against the model; run by the `sim` binary and `tests/sim.rs`.
//! * A seeded random number generator ([`rng`]) shared by both.

pub mod corpus;
pub mod cursor;
pub mod http_target;
pub mod model;
pub mod observe;
pub use rill_shard::rng;
pub mod sim;
pub mod targets;

pub use model::Model;
pub use observe::{observe, Fault, Item, Observed, Outcome};
