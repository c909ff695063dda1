//! The logged commands of forks (SPEC §2 "Forks"; ARCHITECTURE.md "Forks
//! across groups"). Like every payload of the log, their postcard encoding
//! is the format (FORMAT.md "Command body", version 6): never reorder,
//! remove or retype a field.
//!
//! A fork `F` of a source `S` holds its own copy of `S`'s bytes below the
//! fork point, so the commands split in two sides. `F`'s group logs
//! [`ForkCreate`] (the copy, the fork's settings and its origin),
//! [`ForkPinAck`] (what `S`'s group answered) and [`ForkOutboxDone`] (an
//! unpin delivered); `S`'s group logs [`ForkPin`] and [`ForkUnpin`]. Every
//! one is keyed by the fork's token, so a re-sent command finds its own
//! earlier outcome.

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::state::api::ForkPoint;
use crate::state::command::payload::Create;
use crate::state::name::StreamId;

/// Where a fork came from: recorded on the fork, and the key of its pin on
/// the source.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkOrigin {
    /// The source stream.
    pub source: StreamId,
    /// The source's incarnation the prefix was copied from.
    pub source_incarnation: u64,
    /// The fork's token (unique per fork creation).
    pub token: u64,
    /// The fork point as the request named it (an idempotent re-create
    /// must name the same one).
    pub point: ForkPoint,
    /// The resolved fork offset: the fork's own bytes start here.
    pub end: u64,
}

/// Create a fork: the stream `create` names, starting at `start` with the
/// inherited records (the source's records in `[start, origin.end)`, the
/// last one possibly cut at `origin.end`), then `create`'s initial payload
/// and `more` as the fork's own first append.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkCreate {
    /// The fork's settings and its own initial payload.
    pub create: Create,
    /// Further records of the initial payload (JSON mode).
    pub more: Vec<Bytes>,
    /// The source's retained start the copy begins at.
    pub start: u64,
    /// The inherited records, oldest first.
    pub inherited: Vec<Bytes>,
    /// Where the prefix came from.
    pub origin: ForkOrigin,
}

/// Pin a source for a fork (logged by the source's group).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkPin {
    /// The source stream.
    pub source: StreamId,
    /// The incarnation the fork copied; another one refuses the pin.
    pub source_incarnation: u64,
    /// The fork's token.
    pub token: u64,
    /// The fork.
    pub fork: StreamId,
}

/// The source group's answer to a [`ForkPin`], logged by the fork's group.
/// A refused pin removes the fork (its copy may not be of one
/// incarnation of the source).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkPinAck {
    /// The fork.
    pub fork: StreamId,
    /// The fork's token.
    pub token: u64,
    /// The source recorded the pin.
    pub pinned: bool,
}

/// Drop a fork's pin on its source (logged by the source's group). When a
/// soft-deleted source loses its last pin it is gone for good, and if it is
/// a fork itself its own unpin is owed next.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkUnpin {
    /// The source stream.
    pub source: StreamId,
    /// The fork's token.
    pub token: u64,
    /// The fork.
    pub fork: StreamId,
}

/// An owed message of the fork's group was delivered: drop it from the
/// outbox (logged by the fork's group).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkOutboxDone {
    /// The fork.
    pub fork: StreamId,
    /// The fork's token.
    pub token: u64,
}
