//! The reference model's shared rules (SPEC §2): the idempotent-producer
//! verdict with its window modelled as seq arithmetic, producer bookkeeping
//! with least-recently-used eviction, and the request checks several
//! commands share (content type, `stream_seq`, attributes).
//!
//! Like the rest of the model these are restated from the specification,
//! not taken from the real machine.

use rill_shard::error::ErrorCode;
use rill_shard::state::command::Producer;

use crate::model::{Model, ModelProducer, ModelStream, Recorded};
use crate::observe::{Fault, Item};

/// What the producer rules decide.
pub(crate) enum Verdict {
    Proceed,
    Replay(Recorded),
}

impl Model {
    /// The item an accepted append reports, at the current commit index.
    pub(crate) fn item(&self, stream: &ModelStream, start: u64) -> Item {
        Item {
            start,
            next: stream.tail(),
            count: stream.appends,
            deduplicated: false,
            closed: stream.closed,
            commit_index: self.commit_index,
            producer_seq: None,
        }
    }

    /// The producer rules of SPEC §2, with the window as seq arithmetic.
    pub(crate) fn judge(&self, stream: &ModelStream, p: &Producer) -> Result<Verdict, Fault> {
        let Some(known) = stream.producers.get(&p.id) else {
            if p.seq == 0 {
                return Ok(Verdict::Proceed);
            }
            return Err(Fault::with(ErrorCode::ProducerSeqConflict, &[0, p.seq]));
        };
        if p.epoch < known.epoch {
            return Err(Fault::with(ErrorCode::ProducerFenced, &[known.epoch, p.epoch]));
        }
        if p.epoch > known.epoch {
            return if p.seq == 0 { Ok(Verdict::Proceed) } else { Err(Fault::new(ErrorCode::BadRequest)) };
        }
        if p.seq == known.last_seq + 1 {
            return Ok(Verdict::Proceed);
        }
        if p.seq > known.last_seq {
            return Err(Fault::with(ErrorCode::ProducerSeqConflict, &[known.last_seq + 1, p.seq]));
        }
        let oldest = (known.last_seq + 1).saturating_sub(self.limits.producer_window as u64);
        if p.seq < oldest {
            return Err(Fault::with(ErrorCode::ProducerDuplicateTooOld, &[p.seq, oldest]));
        }
        Ok(Verdict::Replay(known.history[&p.seq].clone()))
    }

    /// Records an accepted producer request at the current commit index.
    pub(crate) fn remember(&self, stream: &mut ModelStream, p: &Producer, items: Vec<Result<Item, Fault>>) {
        if !stream.producers.contains_key(&p.id) {
            let cap = self.limits.max_producers_per_stream.max(1);
            while stream.producers.len() >= cap {
                let victim = stream
                    .producers
                    .iter()
                    .map(|(id, state)| (state.last_used, id.clone()))
                    .min()
                    .map(|(_, id)| id)
                    .expect("non-empty");
                stream.producers.remove(&victim);
            }
        }
        let entry = stream.producers.entry(p.id.clone()).or_insert(ModelProducer {
            epoch: p.epoch,
            last_seq: 0,
            last_used: 0,
            history: Default::default(),
        });
        if entry.epoch != p.epoch {
            entry.epoch = p.epoch;
            entry.history.clear();
        }
        entry.last_seq = p.seq;
        entry.last_used = self.commit_index;
        entry.history.insert(p.seq, (self.commit_index, items));
    }
}

pub(crate) fn last_ok(items: &[Result<Item, Fault>]) -> Item {
    items.iter().rev().find_map(|i| i.as_ref().ok()).cloned().expect("a stored outcome landed something")
}

pub(crate) fn content_type_ok(stream: &ModelStream, requested: Option<&str>) -> Result<(), Fault> {
    match requested {
        Some(ct) if ct != stream.content_type => Err(Fault::new(ErrorCode::ContentTypeMismatch)),
        _ => Ok(()),
    }
}

pub(crate) fn stream_seq_ok(stream: &ModelStream, requested: Option<&str>) -> Result<(), Fault> {
    match (requested, &stream.stream_seq) {
        (Some(new), Some(last)) if new.as_bytes() <= last.as_bytes() => {
            Err(Fault::new(ErrorCode::StreamSeqConflict))
        }
        _ => Ok(()),
    }
}

/// SPEC §2 attributes: a JSON object of at most 16 KiB with a string title.
pub(crate) fn check_attrs(attrs: &str) -> Result<(), Fault> {
    if attrs.len() > 16 * 1024 {
        return Err(Fault::new(ErrorCode::PayloadTooLarge));
    }
    let value: serde_json::Value =
        serde_json::from_str(attrs).map_err(|_| Fault::new(ErrorCode::BadRequest))?;
    let object = value.as_object().ok_or(Fault::new(ErrorCode::BadRequest))?;
    match object.get("title") {
        Some(title) if !title.is_string() => Err(Fault::new(ErrorCode::BadRequest)),
        _ => Ok(()),
    }
}
