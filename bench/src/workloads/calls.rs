//! How an ingest client of rill makes its requests ([`Calls`]): one
//! `append` per record, one `append_batch` of `n` records to one stream, or
//! one `append_many` of `n` items, each to a stream picked on its own. A
//! [`Request`] is one call's streams, picked before it is sent; [`send`]
//! makes the call (retrying temporary errors, [`crate::retry`]: the whole
//! call for `append` and `append_batch`, item by item for `append_many`);
//! [`Answered::check`] checks every record's reply (one reply per record,
//! each exactly the payload long and not deduplicated) and counts the
//! records acknowledged to each stream.

use std::time::Instant;

use bytes::Bytes;
use rill::{Append, AppendBatch, AppendReply, Engine, StreamId};

use crate::retry::{retrying, retrying_each};
use crate::util::{Picker, Result, Rng};

/// How requests are made.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Calls {
    /// One `Engine::append` per record.
    Append,
    /// One `Engine::append_batch` of this many records to one stream.
    Batch(usize),
    /// One `Engine::append_many` of this many items, each to a stream
    /// picked independently.
    Many(usize),
}

impl Calls {
    /// Records per request.
    pub fn records(self) -> usize {
        match self {
            Calls::Append => 1,
            Calls::Batch(n) | Calls::Many(n) => n,
        }
    }
}

/// The streams (indexes into the run's ids) of one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Request {
    Append(usize),
    /// `n` records to one stream.
    Batch {
        stream: usize,
        n: usize,
    },
    /// One stream per item.
    Many(Vec<usize>),
}

impl Request {
    /// Picks the streams of a request.
    pub fn pick(calls: Calls, picker: &Picker, rng: &mut Rng) -> Request {
        match calls {
            Calls::Append => Request::Append(picker.pick(rng)),
            Calls::Batch(n) => Request::Batch { stream: picker.pick(rng), n },
            Calls::Many(n) => Request::Many((0..n).map(|_| picker.pick(rng)).collect()),
        }
    }

    /// Records in the request.
    pub fn records(&self) -> usize {
        match self {
            Request::Append(_) => 1,
            Request::Batch { n, .. } => *n,
            Request::Many(streams) => streams.len(),
        }
    }

    /// The stream of record `i`.
    fn stream(&self, i: usize) -> usize {
        match self {
            Request::Append(s) | Request::Batch { stream: s, .. } => *s,
            Request::Many(streams) => streams[i],
        }
    }
}

/// What came back for a request.
#[derive(Debug)]
enum Replies {
    One(AppendReply),
    /// One per record, in the request's order.
    Each(Vec<rill::Result<AppendReply>>),
}

/// A request and its answer.
#[derive(Debug)]
pub struct Answered {
    pub request: Request,
    pub began: Instant,
    pub answered: Instant,
    /// Temporary errors retried (for `append_many`, items sent again).
    pub retries: u64,
    replies: rill::Result<Replies>,
}

/// Sends one request of `payload`s and waits for its answer.
pub async fn send(engine: &Engine, ids: &[StreamId], request: Request, payload: &Bytes) -> Answered {
    let began = Instant::now();
    let (replies, retries) = match &request {
        Request::Append(s) => {
            let (r, retries) =
                retrying(|| engine.append(Append::new(ids[*s].clone(), payload.clone()))).await;
            (r.map(Replies::One), retries)
        }
        Request::Batch { stream, n } => {
            let (r, retries) = retrying(|| {
                engine.append_batch(AppendBatch::new(ids[*stream].clone(), vec![payload.clone(); *n]))
            })
            .await;
            (r.map(|b| Replies::Each(b.items)), retries)
        }
        Request::Many(streams) => {
            let (r, retries) = retrying_each(streams.len(), |pending: &[usize]| {
                let items =
                    pending.iter().map(|&i| Append::new(ids[streams[i]].clone(), payload.clone())).collect();
                engine.append_many(items)
            })
            .await;
            (r.map(Replies::Each), retries)
        }
    };
    Answered { request, began, answered: Instant::now(), retries, replies }
}

fn check_one(id: &StreamId, reply: &AppendReply, len: u64) -> Result<()> {
    if reply.next_offset.checked_sub(reply.start_offset) != Some(len) || reply.deduplicated {
        return Err(format!(
            "append to {id} answered [{}, {}){} for {len} bytes",
            reply.start_offset,
            reply.next_offset,
            if reply.deduplicated { " deduplicated" } else { "" }
        )
        .into());
    }
    Ok(())
}

impl Answered {
    /// Checks that every record of the request got its own reply, `len`
    /// bytes long and not deduplicated (any error fails the run), and adds
    /// each record to `acked` of its stream. Returns the records.
    pub fn check(&self, ids: &[StreamId], len: u64, acked: &mut [u64]) -> Result<u64> {
        let n = self.request.records();
        match &self.replies {
            Err(e) => return Err(e.clone().into()),
            Ok(Replies::One(reply)) => check_one(&ids[self.request.stream(0)], reply, len)?,
            Ok(Replies::Each(items)) => {
                if items.len() != n {
                    return Err(format!("a request of {n} records answered {} replies", items.len()).into());
                }
                for (i, item) in items.iter().enumerate() {
                    let id = &ids[self.request.stream(i)];
                    match item {
                        Ok(reply) => check_one(id, reply, len)?,
                        Err(e) => return Err(format!("append to {id}: {e}").into()),
                    }
                }
            }
        }
        for i in 0..n {
            acked[self.request.stream(i)] += 1;
        }
        Ok(n as u64)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requests_pick_one_stream_or_one_per_item() {
        let picker = Picker::new(1000, false);
        let mut rng = Rng::new(7);
        assert!(matches!(Request::pick(Calls::Append, &picker, &mut rng), Request::Append(s) if s < 1000));
        let batch = Request::pick(Calls::Batch(64), &picker, &mut rng);
        assert_eq!(batch.records(), 64);
        assert!((0..64).all(|i| batch.stream(i) == batch.stream(0)));
        let many = Request::pick(Calls::Many(64), &picker, &mut rng);
        assert_eq!(many.records(), 64);
        assert!((1..64).any(|i| many.stream(i) != many.stream(0)), "items pick their own streams");
        assert_eq!([Calls::Append, Calls::Batch(8), Calls::Many(64)].map(Calls::records), [1, 8, 64]);
    }

    fn reply(start: u64, next: u64, deduplicated: bool) -> AppendReply {
        AppendReply {
            start_offset: start,
            next_offset: next,
            stream_append_count: 1,
            deduplicated,
            closed: false,
            commit_index: 1,
            producer_seq: None,
        }
    }

    fn answered(request: Request, replies: rill::Result<Replies>) -> Answered {
        let now = Instant::now();
        Answered { request, began: now, answered: now, retries: 0, replies }
    }

    #[test]
    fn every_item_is_checked_and_counted_on_its_stream() {
        let ids = crate::rill_side::stream_ids("t", 3).unwrap();
        let mut acked = vec![0; 3];
        let each = |r: Vec<AppendReply>| Ok(Replies::Each(r.into_iter().map(Ok).collect()));
        let good = answered(Request::Many(vec![2, 0, 2]), each(vec![reply(0, 10, false); 3]));
        assert_eq!(good.check(&ids, 10, &mut acked).unwrap(), 3);
        assert_eq!(acked, vec![1, 0, 2]);
        let short = answered(Request::Many(vec![2, 0]), each(vec![reply(0, 10, false)]));
        assert!(short.check(&ids, 10, &mut acked).is_err());
        let dup = answered(Request::Many(vec![1, 1]), each(vec![reply(0, 10, false), reply(0, 10, true)]));
        assert!(dup.check(&ids, 10, &mut acked).is_err());
        let wrong = answered(Request::Append(1), Ok(Replies::One(reply(0, 9, false))));
        assert!(wrong.check(&ids, 10, &mut acked).is_err());
        let failed = Ok(Replies::Each(vec![Ok(reply(0, 10, false)), Err(rill::Error::corrupted("no"))]));
        assert!(answered(Request::Batch { stream: 1, n: 2 }, failed).check(&ids, 10, &mut acked).is_err());
        assert_eq!(acked, vec![1, 0, 2], "a failed request counts nothing");
    }
}
