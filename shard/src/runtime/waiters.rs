//! The parked live readers of one core (SPEC §2 "Live read").
//!
//! A waiter is registered when a `wait_read` finds no data at its offset.
//! It leaves the registry exactly once, by one of: the stream advancing (or
//! closing, or disappearing), its timeout, its caller dropping the reply
//! future (cancellation), or the core stopping. The registry's size is the
//! core's live-waiter count, which admission caps. Waiters on the same
//! stream, offset and length are answered from one shared read.

use std::collections::HashMap;
use std::time::Instant;

use crate::runtime::envelope::ReplyTx;
use crate::state::name::StreamId;

/// Identifies one parked reader on its core.
pub type WaiterId = u64;

/// One parked reader.
#[derive(Debug)]
pub struct Waiter {
    pub group: u32,
    pub stream: StreamId,
    pub offset: u64,
    pub max_len: usize,
    /// A record read ([`crate::state::api::Read::records`]).
    pub records: bool,
    pub reply: ReplyTx,
    pub sent_at: Instant,
    /// The task that enforces the timeout and notices cancellation.
    pub watcher: Option<glommio::task::JoinHandle<()>>,
}

/// All parked readers of a core, by id and by stream.
#[derive(Debug, Default)]
pub struct Waiters {
    next_id: WaiterId,
    by_id: HashMap<WaiterId, Waiter>,
    by_stream: HashMap<StreamId, Vec<WaiterId>>,
}

impl Waiters {
    pub fn len(&self) -> usize {
        self.by_id.len()
    }

    #[cfg(any(test, feature = "internals"))]
    pub fn is_empty(&self) -> bool {
        self.by_id.is_empty()
    }

    pub fn insert(&mut self, waiter: Waiter) -> WaiterId {
        self.next_id += 1;
        let id = self.next_id;
        self.by_stream.entry(waiter.stream.clone()).or_default().push(id);
        self.by_id.insert(id, waiter);
        id
    }

    pub fn get_mut(&mut self, id: WaiterId) -> Option<&mut Waiter> {
        self.by_id.get_mut(&id)
    }

    /// Removes one waiter (if still parked).
    pub fn remove(&mut self, id: WaiterId) -> Option<Waiter> {
        let waiter = self.by_id.remove(&id)?;
        if let Some(ids) = self.by_stream.get_mut(&waiter.stream) {
            ids.retain(|w| *w != id);
            if ids.is_empty() {
                self.by_stream.remove(&waiter.stream);
            }
        }
        Some(waiter)
    }

    /// Ids of a stream's waiters, oldest first.
    pub fn ids_of(&self, stream: &StreamId) -> Vec<WaiterId> {
        self.by_stream.get(stream).cloned().unwrap_or_default()
    }

    /// Offset, length and kind (records or bytes) a waiter asked for.
    pub fn position(&self, id: WaiterId) -> Option<(u64, usize, bool)> {
        self.by_id.get(&id).map(|w| (w.offset, w.max_len, w.records))
    }

    /// Removes and returns every waiter of a stream.
    pub fn take_stream(&mut self, stream: &StreamId) -> Vec<Waiter> {
        let ids = self.by_stream.remove(stream).unwrap_or_default();
        ids.into_iter().filter_map(|id| self.by_id.remove(&id)).collect()
    }

    /// Streams of one group that have waiters.
    pub fn streams_of_group(&self, group: u32) -> Vec<StreamId> {
        let mut streams: Vec<StreamId> = self
            .by_stream
            .iter()
            .filter(|(_, ids)| ids.iter().any(|id| self.by_id.get(id).is_some_and(|w| w.group == group)))
            .map(|(s, _)| s.clone())
            .collect();
        streams.sort();
        streams
    }

    /// Removes every waiter (core shutdown).
    pub fn drain_all(&mut self) -> Vec<Waiter> {
        self.by_stream.clear();
        self.by_id.drain().map(|(_, w)| w).collect()
    }

    /// Registry consistency: both indexes name the same waiters.
    #[cfg(any(test, feature = "internals"))]
    pub fn check_invariants(&self) {
        let indexed: usize = self.by_stream.values().map(Vec::len).sum();
        assert_eq!(indexed, self.by_id.len(), "waiter indexes disagree");
        for (stream, ids) in &self.by_stream {
            assert!(!ids.is_empty(), "empty waiter list kept for {stream}");
            for id in ids {
                assert_eq!(&self.by_id[id].stream, stream, "waiter filed under the wrong stream");
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use futures::channel::oneshot;

    fn waiter(stream: &str, group: u32) -> Waiter {
        Waiter {
            group,
            stream: StreamId::new("b", stream).unwrap(),
            offset: 0,
            max_len: 10,
            records: false,
            reply: ReplyTx::One(oneshot::channel().0),
            sent_at: Instant::now(),
            watcher: None,
        }
    }

    #[test]
    fn insert_remove_take_keep_indexes_consistent() {
        let mut w = Waiters::default();
        let a1 = w.insert(waiter("a", 1));
        let _a2 = w.insert(waiter("a", 1));
        let b = w.insert(waiter("b", 2));
        w.check_invariants();
        assert_eq!(w.len(), 3);
        assert!(w.remove(a1).is_some());
        assert!(w.remove(a1).is_none(), "a waiter leaves exactly once");
        w.check_invariants();
        assert_eq!(w.streams_of_group(2), vec![StreamId::new("b", "b").unwrap()]);
        assert_eq!(w.take_stream(&StreamId::new("b", "a").unwrap()).len(), 1);
        w.check_invariants();
        assert!(w.remove(b).is_some());
        assert!(w.is_empty());
        w.check_invariants();
    }
}
