//! [`Engine::fork`]: a stream made from another's prefix (SPEC §2 "Forks";
//! ARCHITECTURE.md "Forks across groups").
//!
//! A fork and its source usually live in different groups, often on
//! different cores and maybe in different buckets, and no core ever waits
//! on another: this handle drives the steps, each one a call to one group.
//!
//! 1. The source's group answers what a fork needs of it (head and
//!    incarnation); a soft-deleted source is `StreamGone`, a content type
//!    the request names must be the source's.
//! 2. The handle reads the source's records from its retained start up to
//!    the fork point (whole records, the last one cut at the point) and
//!    resolves the point to a byte offset.
//! 3. The fork's group logs the fork with its copy (`ForkCreate`), which
//!    also puts a pin request in its outbox. An existing fork made by the
//!    same request answers as an idempotent create and ends the call here.
//! 4. The source's group pins the incarnation copied (`ForkPin`), or
//!    refuses when the source was deleted or re-created meanwhile.
//! 5. The fork's group logs the answer (`ForkPinAck`): a refused pin
//!    removes the fork and the call fails with the source's state.
//!
//! Each step is durable before the next starts, and the call answers only
//! after step 5. A crash or a shutdown between steps leaves the pin request
//! in the fork's outbox, which the fork keeper (`fork_keeper.rs`) delivers.
//!
//! The fork holds its own copy, so its bytes live in its own bucket and
//! erasing one bucket never leaves them reachable through another; the
//! price is that a fork copies its prefix, at most
//! [`MAX_FORK_COPY_BYTES`].

use std::hash::BuildHasher;
use std::sync::atomic::{AtomicU64, Ordering};

use bytes::Bytes;
use rill_shard::api::{CreateReply, Fork, ForkCopy, ForkOwed, ForkPoint, ForkSourceInfo, Read};
use rill_shard::node::calls;
use rill_shard::{Error, ErrorKind, Result, StreamId};

use crate::engine::Engine;

/// The most bytes a fork may inherit (its copy is logged as one command).
pub const MAX_FORK_COPY_BYTES: u64 = 32 << 20;

impl Engine {
    /// Forks `req.source` into the new stream `req.create.id` (SPEC §2
    /// "Forks"): the fork holds the source's bytes below `req.point` at
    /// the source's offsets, then its own. Its content type, TTL and
    /// expiry are the source's unless `req.create` names them (a named
    /// content type must be the source's: `ContentTypeMismatch`); it
    /// starts open, with no producers. Re-sending the same fork (same
    /// source, same point, same settings) answers `already_exists`; another
    /// stream of that name is `StreamConflict`.
    ///
    /// Errors: the source missing (`StreamNotFound`) or soft-deleted
    /// (`StreamGone`); a point past the tail, below the retained start,
    /// not at a record start, or past the record or the records it counts
    /// (`BadRequest`); a prefix above [`MAX_FORK_COPY_BYTES`]
    /// (`PayloadTooLarge`). Answered once the fork and the source's pin are
    /// durable; from then on deleting or expiring the source is a soft
    /// delete until the fork is gone.
    pub async fn fork(&self, req: Fork) -> Result<CreateReply> {
        let Fork { mut create, source, point } = req;
        if create.id == source {
            return Err(Error::bad_request("a stream cannot be forked onto itself"));
        }
        if let Some(attrs) = &create.attrs {
            rill_shard::api::validate_attrs(attrs)?;
        }
        let info = self.call(self.locate(&source), calls::ForkSource(source.clone())).await?;
        let head = &info.head;
        match &create.content_type {
            Some(named) if *named != head.content_type => {
                return Err(Error::new(ErrorKind::ContentTypeMismatch {
                    expected: head.content_type.clone(),
                    received: named.clone(),
                }));
            }
            Some(_) => {}
            None => create.content_type = Some(head.content_type.clone()),
        }
        if create.ttl_s.is_none() && create.expires_at_ms.is_none() {
            create.ttl_s = head.ttl_s;
            create.expires_at_ms = head.expires_at_ms;
        }
        let (start, inherited, end) = self.copy_prefix(&source, &info, point).await?;
        self.check_records(create.initial_payload.as_ref(), &create.more_records)?;
        let fork_id = create.id.clone();
        let token = fork_token(&fork_id);
        let made = calls::ForkCreate {
            create,
            start,
            inherited,
            source: source.clone(),
            source_incarnation: info.incarnation,
            token,
            point,
            end,
        };
        let reply = self.call(self.locate(&fork_id), made).await?;
        if reply.already_exists {
            return Ok(reply);
        }
        // Steps 4 and 5 under the engine's pin lock, which the keeper's
        // deliveries hold too, and only while the fork still owes its pin:
        // a fork deleted meanwhile owes an unpin instead, and that unpin
        // must reach the source after any pin (else the pin would outlive
        // the fork and the source's name would never be released).
        let pinned = {
            let _held = self.inner.fork_pins.lock().await;
            let owed = self.call(self.locate(&fork_id), calls::ForkOutbox).await?;
            let owes_pin = owed.iter().any(
                |o| matches!(o, ForkOwed::Pin { fork, token: t, .. } if *fork == fork_id && *t == token),
            );
            if owes_pin {
                let pin = calls::ForkPin {
                    source: source.clone(),
                    source_incarnation: info.incarnation,
                    token,
                    fork: fork_id.clone(),
                };
                let pinned = self.call(self.locate(&source), pin).await?;
                let ack = calls::ForkPinAck { fork: fork_id.clone(), token, pinned };
                self.call(self.locate(&fork_id), ack).await?;
                pinned
            } else {
                // The keeper answered the pin already, or the fork is gone:
                // a fork that still stands was pinned.
                self.head(&fork_id).await.is_ok()
            }
        };
        if pinned {
            return Ok(reply);
        }
        // The source went away (or was re-created) while the fork was made,
        // or the fork was deleted meanwhile.
        match self.call(self.locate(&source), calls::ForkSource(source.clone())).await {
            Err(e) => Err(e),
            Ok(found) if found.incarnation != info.incarnation => {
                Err(Error::new(ErrorKind::StreamConflict { field: "source (re-created during the fork)" }))
            }
            Ok(_) => Ok(reply),
        }
    }

    /// Reads the source's records in `[retained start, fork point)`,
    /// resolving the point (`ForkCopy`): the copy's start, its records, its
    /// end.
    async fn copy_prefix(
        &self,
        source: &StreamId,
        info: &ForkSourceInfo,
        point: ForkPoint,
    ) -> Result<(u64, Vec<Bytes>, u64)> {
        let mut copy = ForkCopy::new(point, info.head.retained_offset, info.head.tail_offset)?;
        let limit = self.config().limits.group.max_read_bytes.max(1);
        let mut at = copy.start();
        while copy.wants_read_at(at) {
            let reply = self.read(Read::new(source.clone()).offset(at).max_len(limit).records(true)).await?;
            if reply.offset > at {
                // The first retained record straddles the retained start:
                // its retained part is a record of the copy, read in pieces
                // of at most `limit` bytes (a byte read stops there).
                let mut part = bytes::BytesMut::new();
                let mut from = at;
                while from < reply.offset {
                    let piece = self
                        .read(Read::new(source.clone()).offset(from).max_len((reply.offset - from) as usize))
                        .await?;
                    if piece.offset != from || piece.payload.is_empty() || piece.next_offset > reply.offset {
                        return Err(Error::new(ErrorKind::StreamConflict {
                            field: "source (changed during the fork)",
                        }));
                    }
                    part.extend_from_slice(&piece.payload);
                    from = piece.next_offset;
                }
                copy.take_part(at, part.freeze());
            }
            if reply.payload.is_empty() {
                break;
            }
            copy.take(&reply);
            if copy.copied() > MAX_FORK_COPY_BYTES {
                let len = copy.copied();
                return Err(Error::new(ErrorKind::PayloadTooLarge { len, limit: MAX_FORK_COPY_BYTES }));
            }
            at = reply.next_offset;
        }
        let start = copy.start();
        let (end, inherited) = copy.finish()?;
        Ok((start, inherited, end))
    }
}

/// A token no other fork creation uses: the time, a process-wide counter
/// and the fork's name, hashed.
fn fork_token(fork: &StreamId) -> u64 {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_nanos() as u64);
    let count = COUNTER.fetch_add(1, Ordering::Relaxed);
    // Randomly keyed per process, so two processes never agree by chance.
    std::hash::RandomState::new().hash_one((nanos, count, std::process::id(), fork.bucket(), fork.stream()))
}
