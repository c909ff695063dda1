//! `rill-shard`: one core's world.
//!
//! This crate owns everything that runs on (or is owned by) a single core:
//! the pure group state machine ([`group`]), the commands it applies
//! ([`command`]), the API request and reply values ([`api`]), names and
//! placement ([`name`]), integrity set-sums ([`integrity`]), the error type
//! ([`error`]), the log seam the state machine's effects go through
//! ([`log`]), per-core and per-group metrics ([`metrics`]) and the core
//! worker runtime ([`core`]). Nothing here knows about other cores; the
//! `rill` crate wires cores together.

pub mod api;
pub mod command;
pub mod error;
pub mod group;
pub mod integrity;
pub mod name;

pub use error::{Error, ErrorClass, ErrorCode, ErrorKind, Result};
pub use name::{Placement, StreamId};
pub mod core;
pub mod limits;
pub mod log;
pub mod metrics;
#[doc(hidden)]
pub mod planted;
pub mod wal;
