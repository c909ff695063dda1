//! The logged commands of consumption-driven retention (SPEC §2
//! "Consumption-driven retention"). Like every payload of the log, their
//! postcard encoding is the format (FORMAT.md "Command body"): never
//! reorder, remove or retype a field.
//!
//! A reclaim carries what its core saw when it admitted it: where the age
//! backstop's cutoff falls (the first record at or after it, from the hot
//! times or the cold record index). Applying it needs nothing else: the
//! consumed prefix comes from the consumer groups in the state, so a
//! replay reclaims the same bytes.

use serde::{Deserialize, Serialize};

use crate::state::name::StreamId;

/// Set (or, with neither rule, clear) a stream's retention policy.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RetentionSet {
    /// The stream.
    pub id: StreamId,
    /// Reclaim what every consumer group has consumed.
    pub consumed: bool,
    /// Reclaim records older than this many ms, consumed or not.
    pub max_age_ms: Option<u64>,
}

/// Reclaim what the stream's policy allows, now.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Reclaim {
    /// The stream.
    pub id: StreamId,
    /// The first record at or after the age cutoff (the tail when every
    /// record is older; 0 without an age rule), as admission found it.
    pub aged_to: u64,
}
