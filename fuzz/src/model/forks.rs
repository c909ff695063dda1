//! The model's forks (SPEC §2 "Forks"; ARCHITECTURE.md "Forks across
//! groups"), written from the rules, not from the real machine: a fork is
//! a stream created with a copy of its source's records (the command
//! carries them; the model keeps them like any other records, starting at
//! the copy's start, with every offset below it gone), an *origin* naming
//! its source, and an outbox entry owed to the source's group. A source's
//! group keeps a *pin* per fork; removing a pinned stream leaves a
//! tombstone that answers `StreamGone` until its last pin goes, and a
//! tombstone that was itself a fork then owes its own source an unpin (the
//! cascade). Both sides may be in the one modelled group: the model does
//! not care, it answers each command by the group's own book.
//!
//! The book's fields are declared in the real book's order with the same
//! types, so the two encode to the same postcard bytes when they hold the
//! same pins, origins and outbox: the tests compare them whole that way
//! (the real book's fields are private).

use std::collections::BTreeMap;

use bytes::Bytes;
use rill_shard::error::ErrorCode;
use rill_shard::state::api::{ForkOwed, ForkPoint, HeadReply};
use rill_shard::state::command::{Effect, ForkCreate, ForkOutboxDone, ForkPin, ForkPinAck, ForkUnpin};
use rill_shard::StreamId;
use serde::Serialize;

use crate::model::Model;
use crate::observe::{Fault, Outcome};

type Answer = Result<Outcome, Fault>;

/// The pins a source of this group holds.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ModelPins {
    /// The source's incarnation the pins hold.
    pub incarnation: u64,
    /// Fork by token.
    pub pins: BTreeMap<u64, StreamId>,
    /// The source was removed: its name is a tombstone.
    pub tombstone: bool,
}

/// Where a fork of this group came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ModelOrigin {
    pub source: StreamId,
    pub source_incarnation: u64,
    pub token: u64,
    pub point: ForkPoint,
    pub end: u64,
    /// The source's group answered the pin.
    pub pinned: bool,
}

/// What this group owes a source's group.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub enum ModelOwed {
    Pin { source: StreamId, source_incarnation: u64 },
    Unpin { source: StreamId },
}

/// The group's fork bookkeeping.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ModelForks {
    pub sources: BTreeMap<StreamId, ModelPins>,
    pub origins: BTreeMap<StreamId, ModelOrigin>,
    /// Keyed by (fork, token).
    pub outbox: BTreeMap<(StreamId, u64), ModelOwed>,
}

impl ModelForks {
    /// The name is a removed source that forks still pin.
    pub fn is_tombstone(&self, id: &StreamId) -> bool {
        self.sources.get(id).is_some_and(|s| s.tombstone)
    }

    /// Some fork pins the stream.
    pub fn is_pinned(&self, id: &StreamId) -> bool {
        self.sources.get(id).is_some_and(|s| !s.pins.is_empty())
    }

    /// The book's encoding, to compare with the real one's
    /// (`postcard::to_allocvec(state.forks())`).
    pub fn encoded(&self) -> Vec<u8> {
        postcard::to_allocvec(self).expect("the model's fork book encodes")
    }

    /// The outbox as the real machine lists it (fork name, then token).
    pub fn owed(&self) -> Vec<ForkOwed> {
        self.outbox
            .iter()
            .map(|((fork, token), owed)| match owed {
                ModelOwed::Pin { source, source_incarnation } => ForkOwed::Pin {
                    fork: fork.clone(),
                    token: *token,
                    source: source.clone(),
                    source_incarnation: *source_incarnation,
                },
                ModelOwed::Unpin { source } => {
                    ForkOwed::Unpin { fork: fork.clone(), token: *token, source: source.clone() }
                }
            })
            .collect()
    }

    /// A fork went: it owes its source an unpin.
    fn release_origin(&mut self, id: &StreamId) {
        if let Some(origin) = self.origins.remove(id) {
            self.outbox.insert((id.clone(), origin.token), ModelOwed::Unpin { source: origin.source });
        }
    }

    /// A stream was removed by a delete, an expiry or a create over its
    /// expired self: pinned, it leaves a tombstone (which keeps its own
    /// origin, and so its own pin, while it stands); otherwise its pins are
    /// forgotten and, if it is a fork, its source is owed an unpin.
    pub(crate) fn removed(&mut self, id: &StreamId) {
        if let Some(pins) = self.sources.get_mut(id) {
            if !pins.pins.is_empty() {
                pins.tombstone = true;
                return;
            }
            self.sources.remove(id);
        }
        self.release_origin(id);
    }

    /// A bucket was purged: its pins and tombstones go outright, its forks
    /// owe their sources unpins.
    pub(crate) fn purged(&mut self, bucket: &str) {
        self.sources.retain(|id, _| id.bucket() != bucket);
        let forks: Vec<StreamId> = self.origins.keys().filter(|id| id.bucket() == bucket).cloned().collect();
        for id in forks {
            self.release_origin(&id);
        }
    }
}

impl Model {
    /// What a fork needs of its source: its head and incarnation.
    pub fn fork_source(&self, id: &StreamId, now_ms: u64) -> Result<(HeadReply, u64), Fault> {
        let incarnation = self.find(id, now_ms)?.incarnation;
        Ok((self.head(id, now_ms)?, incarnation))
    }

    /// Every message the group owes other groups.
    pub fn fork_outbox(&self) -> Vec<ForkOwed> {
        self.forks.owed()
    }

    pub(crate) fn fork_create(&mut self, req: &ForkCreate, now: u64, effects: &mut Vec<Effect>) -> Answer {
        let bad = || Err(Fault::new(ErrorCode::BadRequest));
        let id = &req.create.id;
        if req.origin.source == *id || req.inherited.iter().any(Bytes::is_empty) {
            return bad();
        }
        let inherited: u64 = req.inherited.iter().map(|r| r.len() as u64).sum();
        if req.start.checked_add(inherited) != Some(req.origin.end) {
            return bad();
        }
        if let Some(existing) = self.streams.get(id).filter(|s| s.alive(now)) {
            // The same request again is idempotent; anything else there is
            // a conflict.
            let same = self
                .forks
                .origins
                .get(id)
                .is_some_and(|o| o.source == req.origin.source && o.point == req.origin.point);
            let content_type = Model::content_type_of(req.create.content_type.as_deref());
            let settings = existing.content_type == content_type
                && existing.ttl_s == req.create.ttl_s
                && existing.expires_at_ms == req.create.expires_at_ms
                && existing.closed == req.create.closed;
            if !same || !settings {
                return Err(Fault::new(ErrorCode::StreamConflict));
            }
            return Ok(Outcome::Created {
                already_exists: true,
                next_offset: existing.tail(),
                commit_index: self.commit_index,
            });
        }
        let created =
            self.create_with(&req.create, &req.more, Some((req.start, &req.inherited)), now, effects)?;
        let o = &req.origin;
        let origin = ModelOrigin {
            source: o.source.clone(),
            source_incarnation: o.source_incarnation,
            token: o.token,
            point: o.point,
            end: o.end,
            pinned: false,
        };
        self.forks.origins.insert(id.clone(), origin);
        let owed = ModelOwed::Pin { source: o.source.clone(), source_incarnation: o.source_incarnation };
        self.forks.outbox.insert((id.clone(), o.token), owed);
        Ok(created)
    }

    pub(crate) fn fork_pin(&mut self, req: &ForkPin, now: u64) -> Answer {
        let known = self.forks.sources.get(&req.source);
        let held = known.is_some_and(|s| {
            s.incarnation == req.source_incarnation && s.pins.get(&req.token) == Some(&req.fork)
        });
        if held {
            return Ok(Outcome::ForkPinned { pinned: true, commit_index: self.commit_index });
        }
        // The incarnation the fork copied, live or a tombstone; a stream
        // re-created since (or never there) refuses.
        let tombstone = known.is_some_and(|s| s.tombstone && s.incarnation == req.source_incarnation);
        let live = self
            .streams
            .get(&req.source)
            .is_some_and(|s| s.alive(now) && s.incarnation == req.source_incarnation);
        if !tombstone && !live {
            return Ok(Outcome::ForkPinned { pinned: false, commit_index: self.commit_index });
        }
        self.commit_index += 1;
        let pins = self.forks.sources.entry(req.source.clone()).or_insert_with(|| ModelPins {
            incarnation: req.source_incarnation,
            pins: BTreeMap::new(),
            tombstone: false,
        });
        pins.pins.insert(req.token, req.fork.clone());
        Ok(Outcome::ForkPinned { pinned: true, commit_index: self.commit_index })
    }

    pub(crate) fn fork_pin_ack(&mut self, req: &ForkPinAck, effects: &mut Vec<Effect>) -> Answer {
        let key = (req.fork.clone(), req.token);
        if !matches!(self.forks.outbox.get(&key), Some(ModelOwed::Pin { .. })) {
            return Ok(Outcome::ForkPinAcked { removed: false, commit_index: self.commit_index });
        }
        self.commit_index += 1;
        self.forks.outbox.remove(&key);
        let Some(origin) = self.forks.origins.get_mut(&req.fork).filter(|o| o.token == req.token) else {
            return Ok(Outcome::ForkPinAcked { removed: false, commit_index: self.commit_index });
        };
        if req.pinned {
            origin.pinned = true;
            return Ok(Outcome::ForkPinAcked { removed: false, commit_index: self.commit_index });
        }
        // Refused: the copy may mix two incarnations of the source, so the
        // fork goes (owing nothing: the source holds no pin for it). Forks
        // of the fork keep their copies; its name becomes their tombstone.
        self.forks.origins.remove(&req.fork);
        match self.forks.sources.get_mut(&req.fork) {
            Some(pins) if !pins.pins.is_empty() => pins.tombstone = true,
            _ => {
                self.forks.sources.remove(&req.fork);
            }
        }
        if self.streams.contains_key(&req.fork) {
            self.drop_stream(&req.fork);
            effects.push(Effect::Removed(req.fork.clone()));
        }
        Ok(Outcome::ForkPinAcked { removed: true, commit_index: self.commit_index })
    }

    pub(crate) fn fork_unpin(&mut self, req: &ForkUnpin) -> Answer {
        let Some(pins) = self.forks.sources.get_mut(&req.source) else {
            return Ok(Outcome::ForkUnpinned { released: false, commit_index: self.commit_index });
        };
        if pins.pins.get(&req.token) != Some(&req.fork) {
            return Ok(Outcome::ForkUnpinned { released: false, commit_index: self.commit_index });
        }
        self.commit_index += 1;
        pins.pins.remove(&req.token);
        if pins.pins.is_empty() {
            let tombstone = pins.tombstone;
            self.forks.sources.remove(&req.source);
            if tombstone {
                // The name is free now; if it was a fork, the cascade goes
                // on to its own source.
                self.forks.release_origin(&req.source);
            }
        }
        Ok(Outcome::ForkUnpinned { released: true, commit_index: self.commit_index })
    }

    pub(crate) fn fork_outbox_done(&mut self, req: &ForkOutboxDone) -> Answer {
        let key = (req.fork.clone(), req.token);
        if matches!(self.forks.outbox.get(&key), Some(ModelOwed::Unpin { .. })) {
            self.commit_index += 1;
            self.forks.outbox.remove(&key);
        }
        Ok(Outcome::ForkOutboxDone { commit_index: self.commit_index })
    }
}

impl Model {
    /// The copy a fork of `id` at `point` holds, as `Engine::fork` makes it
    /// (SPEC §2 "Forks"): the copy's start (the source's retained start),
    /// its records (whole ones, the first one's retained part, the last one
    /// cut at the fork offset), and the fork offset. A point past the tail,
    /// below the retained start, not at a record start or past the records
    /// there is `BadRequest`.
    #[allow(clippy::type_complexity)]
    pub fn fork_prefix(
        &self,
        id: &StreamId,
        point: ForkPoint,
        now_ms: u64,
    ) -> Result<(u64, Vec<Vec<u8>>, u64), Fault> {
        let stream = self.find(id, now_ms)?;
        let bad = || Err(Fault::new(ErrorCode::BadRequest));
        let (start, tail) = (stream.retained, stream.tail());
        let records: Vec<(u64, u64)> = stream.live_records().map(|(s, e)| (s.max(start), e)).collect();
        let (anchor, past) = match point {
            ForkPoint::Tail => (tail, None),
            ForkPoint::Offset(offset)
            | ForkPoint::IntoRecord { offset, bytes: 0 }
            | ForkPoint::Records { offset, count: 0 } => (offset, None),
            ForkPoint::IntoRecord { offset, .. } | ForkPoint::Records { offset, .. } => (offset, Some(())),
        };
        if anchor > tail || anchor < start || (past.is_some() && anchor == tail) {
            return bad();
        }
        let from_anchor: Vec<(u64, u64)> = records.iter().copied().filter(|(s, _)| *s >= anchor).collect();
        let end = match point {
            ForkPoint::IntoRecord { bytes, .. } if bytes > 0 => match from_anchor.first() {
                Some(&(s, e)) if s == anchor && bytes <= e - s => anchor + bytes,
                _ => return bad(),
            },
            ForkPoint::Records { count, .. } if count > 0 => {
                let n = usize::try_from(count).unwrap_or(usize::MAX);
                match (from_anchor.first(), from_anchor.get(n - 1)) {
                    (Some(&(s, _)), Some(&(_, e))) if s == anchor => e,
                    _ => return bad(),
                }
            }
            _ => anchor,
        };
        let copy = records
            .iter()
            .filter(|(s, _)| *s < end)
            .map(|&(s, e)| stream.data[s as usize..e.min(end) as usize].to_vec())
            .collect();
        Ok((start, copy, end))
    }
}
