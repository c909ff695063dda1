//! Forks in the group state (SPEC §2 "Forks"; ARCHITECTURE.md "Forks across
//! groups"): the fork book, and the commands that keep it.
//!
//! A fork holds its own copy of its source's prefix, so no read ever
//! crosses groups; what crosses them is bookkeeping. The source's group
//! keeps a *pin* per live fork (`sources`), which is what makes deleting or
//! expiring a source with forks a soft delete: its bytes are released at
//! once, but its name stays a tombstone that answers `StreamGone` until the
//! last pin goes. The fork's group keeps the fork's *origin* (`origins`)
//! and an *outbox* of messages owed to the source's group: a `Pin` from the
//! fork's creation until the source answered, an `Unpin` from the fork's
//! removal until the source logged it. The engine's fork keeper delivers
//! the outbox and logs each answer here, so a crash between two groups'
//! steps leaves an outbox entry that is re-sent, and every step is
//! idempotent by the fork's token.
//!
//! Invariants (checked by `verify`): a tombstone (`deleted`) names no
//! stored stream and has at least one pin; a live source entry names a
//! stored stream of its incarnation and has at least one pin; every origin
//! names a stored fork or a tombstone; every outbox entry is keyed by
//! `(fork, token)`, a `Pin` entry only while the origin is unpinned, an
//! `Unpin` entry only once the fork's origin is gone.

use std::collections::BTreeMap;

use bytes::Bytes;
use serde::{Deserialize, Serialize};

use crate::error::{Error, ErrorKind, Result};
use crate::state::api::{CreateReply, ForkOwed, ForkSourceInfo};
use crate::state::command::{
    Effect, ForkCreate, ForkOrigin, ForkOutboxDone, ForkPin, ForkPinAck, ForkUnpin, Response,
};
use crate::state::group::GroupState;
use crate::state::name::StreamId;

/// The pins of one source stream of the group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourcePins {
    /// The incarnation the pins hold.
    pub(crate) incarnation: u64,
    /// Fork by token.
    pub(crate) pins: BTreeMap<u64, StreamId>,
    /// The stream was deleted or expired: this is its tombstone.
    pub(crate) deleted: bool,
}

/// A fork of the group: where its prefix came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Origin {
    pub(crate) origin: ForkOrigin,
    /// The source's group recorded the pin.
    pub(crate) pinned: bool,
}

/// A message owed to a source's group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Owed {
    /// Pin the source (the fork was created, the source has not answered).
    Pin { source: StreamId, source_incarnation: u64 },
    /// Unpin the source (the fork is gone).
    Unpin { source: StreamId },
}

/// The group's fork bookkeeping (group snapshot format 6).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ForkBook {
    pub(crate) sources: BTreeMap<StreamId, SourcePins>,
    pub(crate) origins: BTreeMap<StreamId, Origin>,
    pub(crate) outbox: BTreeMap<(StreamId, u64), Owed>,
}

impl ForkBook {
    /// The name is a soft-deleted source's tombstone.
    pub(crate) fn is_tombstone(&self, id: &StreamId) -> bool {
        self.sources.get(id).is_some_and(|s| s.deleted)
    }
    /// The stream has forks pinning it.
    pub(crate) fn is_pinned(&self, id: &StreamId) -> bool {
        self.sources.get(id).is_some_and(|s| !s.pins.is_empty())
    }
    /// A name that is not a live stream answers `StreamGone`: a tombstone,
    /// or a pinned source that expired and awaits its sweep (SPEC §2
    /// "Forks": expiring a pinned source is a soft delete too).
    pub(crate) fn is_gone(&self, id: &StreamId) -> bool {
        self.is_tombstone(id) || self.is_pinned(id)
    }
    /// Messages owed to other groups.
    pub fn outbox_len(&self) -> usize {
        self.outbox.len()
    }
}

/// The error for a soft-deleted stream's name.
pub(crate) fn gone(id: &StreamId) -> Error {
    ErrorKind::StreamGone { bucket: id.bucket().to_string(), stream: id.stream().to_string() }.into()
}

impl GroupState {
    /// The fork bookkeeping.
    pub fn forks(&self) -> &ForkBook {
        &self.forks
    }

    /// What a fork needs of its source (SPEC §2 "Forks"): a soft-deleted
    /// source is `StreamGone`.
    pub fn fork_source(&self, id: &StreamId, now_ms: u64) -> Result<ForkSourceInfo> {
        let stream = self.lookup(id, now_ms)?;
        Ok(ForkSourceInfo { head: stream.head(), incarnation: stream.incarnation })
    }

    /// Every message the group owes other groups, oldest fork name first.
    pub fn fork_outbox(&self) -> Vec<ForkOwed> {
        self.forks
            .outbox
            .iter()
            .map(|((fork, token), owed)| match owed {
                Owed::Pin { source, source_incarnation } => ForkOwed::Pin {
                    fork: fork.clone(),
                    token: *token,
                    source: source.clone(),
                    source_incarnation: *source_incarnation,
                },
                Owed::Unpin { source } => {
                    ForkOwed::Unpin { fork: fork.clone(), token: *token, source: source.clone() }
                }
            })
            .collect()
    }

    /// A stream of the group was removed by a delete, an expiry or a create
    /// over its expired self: a pinned source becomes a tombstone (its
    /// origin, if it is a fork too, stays until the tombstone goes), an
    /// unpinned one forgets its pins, a fork owes its source an unpin.
    pub(crate) fn forks_on_removed(&mut self, id: &StreamId) {
        if let Some(source) = self.forks.sources.get_mut(id) {
            if !source.pins.is_empty() {
                source.deleted = true;
                return;
            }
            self.forks.sources.remove(id);
        }
        self.release_origin(id);
    }

    /// A purge removed the stream (or its tombstone): pins and tombstone go
    /// with the bucket outright, and a fork owes its source an unpin.
    pub(crate) fn forks_on_purged(&mut self, bucket: &str) {
        let ids: Vec<StreamId> = self
            .forks
            .sources
            .keys()
            .chain(self.forks.origins.keys())
            .filter(|id| id.bucket() == bucket)
            .cloned()
            .collect();
        for id in ids {
            self.forks.sources.remove(&id);
            self.release_origin(&id);
        }
    }

    /// Drops a fork's origin, owing its source an unpin.
    fn release_origin(&mut self, id: &StreamId) {
        if let Some(origin) = self.forks.origins.remove(id) {
            let key = (id.clone(), origin.origin.token);
            self.forks.outbox.insert(key, Owed::Unpin { source: origin.origin.source });
        }
    }

    /// `Op::ForkCreate` on the fork's group.
    pub(crate) fn fork_create(&mut self, req: &ForkCreate, now: u64, effects: &mut Vec<Effect>) -> Result<Response> {
        let id = &req.create.id;
        if req.origin.source == *id {
            return Err(Error::bad_request("a stream cannot be forked onto itself"));
        }
        let inherited: u64 = req.inherited.iter().map(|r| r.len() as u64).sum();
        if req.inherited.iter().any(Bytes::is_empty) {
            return Err(Error::bad_request("an inherited record of a fork is empty"));
        }
        if req.start.checked_add(inherited) != Some(req.origin.end) {
            return Err(Error::bad_request(format!(
                "a fork's inherited records ({inherited} bytes from {}) do not end at its fork offset {}",
                req.start, req.origin.end
            )));
        }
        if let Some(existing) = self.stream(id).filter(|s| !s.is_expired(now)) {
            let same = self.forks.origins.get(id).is_some_and(|o| {
                o.origin.source == req.origin.source && o.origin.point == req.origin.point
            });
            if !same {
                return Err(ErrorKind::StreamConflict { field: "forked_from" }.into());
            }
            super::create_rules::settings_match(existing, &req.create)?;
            return Ok(Response::Create(CreateReply {
                already_exists: true,
                next_offset: existing.next_offset,
                commit_index: self.commit_index,
            }));
        }
        let prefix = super::create_rules::Prefix { start: req.start, records: &req.inherited };
        let response = self.create_with(&req.create, &req.more, Some(prefix), now, effects)?;
        let token = req.origin.token;
        self.forks.origins.insert(id.clone(), Origin { origin: req.origin.clone(), pinned: false });
        self.forks.outbox.insert(
            (id.clone(), token),
            Owed::Pin { source: req.origin.source.clone(), source_incarnation: req.origin.source_incarnation },
        );
        Ok(response)
    }

    /// `Op::ForkPin` on the source's group: pins the source's incarnation
    /// the fork copied (a live stream or its tombstone), or refuses.
    pub(crate) fn fork_pin(&mut self, req: &ForkPin, now: u64) -> Result<Response> {
        if let Some(source) = self.forks.sources.get(&req.source) {
            if source.incarnation == req.source_incarnation && source.pins.get(&req.token) == Some(&req.fork) {
                return Ok(Response::ForkPinned { pinned: true, commit_index: self.commit_index });
            }
        }
        let tombstone = self.forks.is_tombstone(&req.source)
            && self.forks.sources.get(&req.source).is_some_and(|s| s.incarnation == req.source_incarnation);
        let live = self
            .stream(&req.source)
            .is_some_and(|s| !s.is_expired(now) && s.incarnation == req.source_incarnation);
        if !tombstone && !live {
            return Ok(Response::ForkPinned { pinned: false, commit_index: self.commit_index });
        }
        let commit_index = self.bump();
        let source = self.forks.sources.entry(req.source.clone()).or_insert_with(|| SourcePins {
            incarnation: req.source_incarnation,
            pins: BTreeMap::new(),
            deleted: false,
        });
        source.pins.insert(req.token, req.fork.clone());
        Ok(Response::ForkPinned { pinned: true, commit_index })
    }

    /// `Op::ForkPinAck` on the fork's group: the pin outbox entry goes; a
    /// refused pin removes the fork, whose copy cannot be trusted to be of
    /// one incarnation of the source.
    pub(crate) fn fork_pin_ack(&mut self, req: &ForkPinAck, effects: &mut Vec<Effect>) -> Result<Response> {
        let key = (req.fork.clone(), req.token);
        let pending = matches!(self.forks.outbox.get(&key), Some(Owed::Pin { .. }));
        if !pending {
            return Ok(Response::ForkPinAcked { removed: false, commit_index: self.commit_index });
        }
        let commit_index = self.bump();
        self.forks.outbox.remove(&key);
        let ours = self.forks.origins.get(&req.fork).is_some_and(|o| o.origin.token == req.token);
        if !ours {
            return Ok(Response::ForkPinAcked { removed: false, commit_index });
        }
        if req.pinned {
            if let Some(origin) = self.forks.origins.get_mut(&req.fork) {
                origin.pinned = true;
            }
            return Ok(Response::ForkPinAcked { removed: false, commit_index });
        }
        self.forks.origins.remove(&req.fork);
        if self.forks.is_pinned(&req.fork) {
            // Forks of a fork whose source refused it: they hold their own
            // copies; the fork becomes their tombstone.
            if let Some(source) = self.forks.sources.get_mut(&req.fork) {
                source.deleted = true;
            }
        } else {
            self.forks.sources.remove(&req.fork);
        }
        if self.remove_stream(&req.fork).is_some() {
            effects.push(Effect::Removed(req.fork.clone()));
        }
        Ok(Response::ForkPinAcked { removed: true, commit_index })
    }

    /// `Op::ForkUnpin` on the source's group: the pin goes (an unknown one
    /// is done already); a tombstone without pins goes for good, and if it
    /// was a fork its own unpin is owed next (the cascade).
    pub(crate) fn fork_unpin(&mut self, req: &ForkUnpin) -> Result<Response> {
        let held = self.forks.sources.get(&req.source).is_some_and(|s| s.pins.get(&req.token) == Some(&req.fork));
        if !held {
            return Ok(Response::ForkUnpinned { released: false, commit_index: self.commit_index });
        }
        let commit_index = self.bump();
        let source = self.forks.sources.get_mut(&req.source).expect("checked above");
        source.pins.remove(&req.token);
        if source.pins.is_empty() {
            let deleted = source.deleted;
            self.forks.sources.remove(&req.source);
            if deleted {
                self.release_origin(&req.source);
            }
        }
        Ok(Response::ForkUnpinned { released: true, commit_index })
    }

    /// `Op::ForkOutboxDone` on the fork's group: a delivered unpin leaves
    /// the outbox.
    pub(crate) fn fork_outbox_done(&mut self, req: &ForkOutboxDone) -> Result<Response> {
        let key = (req.fork.clone(), req.token);
        if !matches!(self.forks.outbox.get(&key), Some(Owed::Unpin { .. })) {
            return Ok(Response::ForkOutboxDone { commit_index: self.commit_index });
        }
        let commit_index = self.bump();
        self.forks.outbox.remove(&key);
        Ok(Response::ForkOutboxDone { commit_index })
    }

    /// The fork book's invariants (see the module docs), as a description
    /// of the first one broken.
    pub(crate) fn verify_forks(&self) -> std::result::Result<(), String> {
        for (id, source) in &self.forks.sources {
            if source.pins.is_empty() {
                return Err(format!("fork source {id:?} has no pins"));
            }
            match (source.deleted, self.stream(id)) {
                (true, Some(_)) => return Err(format!("tombstone {id:?} names a stored stream")),
                (false, None) => return Err(format!("fork source {id:?} is not stored")),
                (false, Some(s)) if s.incarnation != source.incarnation => {
                    return Err(format!("fork source {id:?} pins incarnation {} of {}", source.incarnation, s.incarnation))
                }
                _ => {}
            }
        }
        for (id, origin) in &self.forks.origins {
            if self.stream(id).is_none() && !self.forks.is_tombstone(id) {
                return Err(format!("fork {id:?} is neither stored nor a tombstone"));
            }
            let key = (id.clone(), origin.origin.token);
            match self.forks.outbox.get(&key) {
                Some(Owed::Pin { .. }) if origin.pinned => {
                    return Err(format!("fork {id:?} is pinned and still owes a pin"))
                }
                None if !origin.pinned => return Err(format!("fork {id:?} is unpinned and owes no pin")),
                Some(Owed::Unpin { .. }) => return Err(format!("fork {id:?} owes an unpin while it lives")),
                _ => {}
            }
        }
        for ((fork, token), owed) in &self.forks.outbox {
            let origin = self.forks.origins.get(fork).filter(|o| o.origin.token == *token);
            match owed {
                Owed::Pin { .. } if origin.is_none() => {
                    return Err(format!("fork {fork:?} owes a pin for token {token} it does not hold"))
                }
                Owed::Unpin { .. } if origin.is_some() => {
                    return Err(format!("fork {fork:?} owes an unpin for its live origin"))
                }
                _ => {}
            }
        }
        Ok(())
    }
}
