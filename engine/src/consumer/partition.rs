//! One stream a coordinated reader owns: its lease, the records fetched
//! and not yet delivered, the delivered ones waiting for an ack, and the
//! commit the flush policy holds back. Pure bookkeeping: the reader does
//! the calls.
//!
//! Invariants:
//! - records are delivered in offset order, and a record is delivered
//!   again by the same owner only after a nack of it or of an earlier
//!   record of the stream (the fetch position never moves back otherwise,
//!   and fetched records below it are dropped);
//! - the pending commit is the end of the longest prefix of delivered
//!   records that are all acked, so a commit never passes an unacked
//!   record; it only grows;
//! - a nack rewinds the stream to the nacked record: it and everything
//!   delivered after it are forgotten (their acks become stale) and will
//!   be delivered again, in order; deliveries before it stay ackable.

use std::collections::VecDeque;
use std::time::Instant;

use crate::{Lease, Record};

use super::config::FlushPolicy;

/// A delivered record waiting for its ack.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct InFlight {
    offset: u64,
    end: u64,
    epoch: u64,
    acked: bool,
}

/// What an ack did.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Acked {
    /// Not a delivery of this partition as it stands (another generation,
    /// rewound by a nack, or acked already): nothing changed.
    Stale,
    /// Recorded; the flush policy does not ask for a commit yet.
    Held,
    /// Recorded, and the flush policy's count is reached.
    FlushDue,
}

/// One owned stream (see the module docs).
#[derive(Debug)]
pub(crate) struct Partition {
    /// The lease the reader holds.
    pub(crate) lease: Lease,
    /// The next offset to fetch from.
    fetch_at: u64,
    /// Fetched, not yet delivered, in order.
    buffer: VecDeque<Record>,
    /// Delivered, in order, until the acked prefix is dropped.
    in_flight: VecDeque<InFlight>,
    /// The offset the group stores (as last answered).
    committed: Option<u64>,
    /// Where the acked prefix reaches, when above `committed`.
    pending: Option<u64>,
    /// Acks since the last commit.
    pending_acks: u32,
    /// When the first of those acks came.
    pending_since: Option<Instant>,
    /// Raised by each nack, so deliveries it forgot cannot be acked.
    epoch: u64,
    /// The stream is closed and read to its end.
    closed_at_tail: bool,
}

impl Partition {
    /// A partition just claimed, reading from `start`.
    pub(crate) fn new(lease: Lease, start: u64) -> Self {
        let committed = lease.committed;
        Partition {
            lease,
            fetch_at: start,
            buffer: VecDeque::new(),
            in_flight: VecDeque::new(),
            committed,
            pending: None,
            pending_acks: 0,
            pending_since: None,
            epoch: 0,
            closed_at_tail: false,
        }
    }

    /// The offset the next fetch reads from.
    pub(crate) fn fetch_at(&self) -> u64 {
        self.fetch_at
    }

    /// True when a fetch could bring something: nothing buffered and the
    /// stream not known to be closed at its end.
    pub(crate) fn wants_fetch(&self) -> bool {
        self.buffer.is_empty() && !self.closed_at_tail
    }

    /// True when records wait to be delivered.
    pub(crate) fn has_ready(&self) -> bool {
        !self.buffer.is_empty()
    }

    /// Takes a fetch's records. Records below the fetch position (which a
    /// fetch from it never returns, but a fetch raced by a nack could) are
    /// dropped: nothing is delivered twice.
    pub(crate) fn fill(&mut self, records: Vec<Record>, next_offset: u64, closed: bool) {
        let before = self.fetch_at;
        let got = !records.is_empty();
        self.buffer.extend(records.into_iter().filter(|r| r.offset >= before));
        self.fetch_at = self.fetch_at.max(next_offset);
        self.closed_at_tail = closed && !got;
    }

    /// Retention dropped the bytes at the fetch position: read on from the
    /// first retained offset (the records below it are gone for everyone).
    pub(crate) fn skip_to(&mut self, retained: u64) {
        self.fetch_at = self.fetch_at.max(retained);
    }

    /// Hands out the next buffered record, with the epoch its ack must
    /// name.
    pub(crate) fn deliver(&mut self) -> Option<(Record, u64)> {
        let record = self.buffer.pop_front()?;
        let end = record.offset + record.payload.len() as u64;
        self.in_flight.push_back(InFlight { offset: record.offset, end, epoch: self.epoch, acked: false });
        Some((record, self.epoch))
    }

    /// Acks the delivery of the record at `offset` made in `epoch`.
    pub(crate) fn ack(&mut self, offset: u64, epoch: u64, policy: &FlushPolicy, now: Instant) -> Acked {
        let Some(entry) = self.in_flight.iter_mut().find(|e| e.offset == offset && e.epoch == epoch) else {
            return Acked::Stale;
        };
        if entry.acked {
            return Acked::Stale;
        }
        entry.acked = true;
        while let Some(front) = self.in_flight.front().copied().filter(|e| e.acked) {
            self.in_flight.pop_front();
            if self.committed.is_none_or(|c| front.end > c) {
                self.pending = Some(self.pending.map_or(front.end, |p| p.max(front.end)));
            }
        }
        self.pending_acks += 1;
        self.pending_since.get_or_insert(now);
        if self.pending.is_some() && self.pending_acks >= policy.max_pending_acks {
            Acked::FlushDue
        } else {
            Acked::Held
        }
    }

    /// Nacks the delivery of the record at `offset` made in `epoch`:
    /// rewinds to it (see the module docs). False when stale.
    pub(crate) fn nack(&mut self, offset: u64, epoch: u64) -> bool {
        let Some(at) = self.in_flight.iter().position(|e| e.offset == offset && e.epoch == epoch && !e.acked)
        else {
            return false;
        };
        self.in_flight.truncate(at);
        self.buffer.clear();
        self.fetch_at = offset;
        self.closed_at_tail = false;
        self.epoch += 1;
        true
    }

    /// The offset to commit now: the pending one when the policy's
    /// interval has passed since the first ack it holds.
    pub(crate) fn interval_due(&self, policy: &FlushPolicy, now: Instant) -> Option<u64> {
        let since = self.pending_since?;
        (now.duration_since(since) >= policy.max_pending_interval).then_some(self.pending?)
    }

    /// When the policy's interval makes the pending commit due.
    pub(crate) fn flush_deadline(&self, policy: &FlushPolicy) -> Option<Instant> {
        self.pending?;
        Some(self.pending_since? + policy.max_pending_interval)
    }

    /// The pending commit, whatever the policy says (release, shutdown,
    /// an explicit flush).
    pub(crate) fn pending(&self) -> Option<u64> {
        self.pending
    }

    /// The group stored `committed` (what a commit answered).
    pub(crate) fn committed(&mut self, committed: u64) {
        self.committed = Some(self.committed.map_or(committed, |c| c.max(committed)));
        if self.pending.is_some_and(|p| p <= committed) {
            self.pending = None;
            self.pending_acks = 0;
            self.pending_since = None;
        }
    }

    /// The committed offset as last answered.
    pub(crate) fn committed_offset(&self) -> Option<u64> {
        self.committed
    }
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, Instant};

    use bytes::Bytes;

    use super::{Acked, Partition};
    use crate::consumer::FlushPolicy;
    use crate::{Lease, Record, StreamId};

    fn lease(committed: Option<u64>) -> Lease {
        Lease {
            id: StreamId::new("b", "s").unwrap(),
            consumer_group: "g".into(),
            owner: "o".into(),
            generation: 1,
            expires_at_ms: 0,
            committed,
        }
    }

    fn records(offsets: &[u64]) -> Vec<Record> {
        offsets
            .iter()
            .map(|&o| Record { offset: o, payload: Bytes::from_static(b"0123456789"), timestamp_ms: 0 })
            .collect()
    }

    fn every(n: u32) -> FlushPolicy {
        FlushPolicy::new(n, Duration::from_secs(3600))
    }

    #[test]
    fn the_commit_follows_the_acked_prefix_only() {
        let now = Instant::now();
        let mut p = Partition::new(lease(None), 0);
        p.fill(records(&[0, 10, 20]), 30, false);
        let (a, ea) = p.deliver().unwrap();
        let (b, eb) = p.deliver().unwrap();
        let (c, ec) = p.deliver().unwrap();
        assert_eq!(p.ack(b.offset, eb, &every(100), now), Acked::Held);
        assert_eq!(p.pending(), None, "an ack past an unacked record commits nothing");
        assert_eq!(p.ack(a.offset, ea, &every(100), now), Acked::Held);
        assert_eq!(p.pending(), Some(20), "the prefix 0..20 is acked");
        assert_eq!(p.ack(c.offset, ec, &every(100), now), Acked::Held);
        assert_eq!(p.pending(), Some(30), "the highest end is kept");
        assert_eq!(p.ack(c.offset, ec, &every(100), now), Acked::Stale, "twice is stale");
    }

    #[test]
    fn the_count_policy_asks_on_the_nth_ack() {
        let now = Instant::now();
        let mut p = Partition::new(lease(None), 0);
        p.fill(records(&[0, 10, 20]), 30, false);
        let d: Vec<_> = (0..3).map(|_| p.deliver().unwrap()).collect();
        assert_eq!(p.ack(d[0].0.offset, d[0].1, &every(3), now), Acked::Held);
        assert_eq!(p.ack(d[1].0.offset, d[1].1, &every(3), now), Acked::Held);
        assert_eq!(p.ack(d[2].0.offset, d[2].1, &every(3), now), Acked::FlushDue);
        p.committed(30);
        assert_eq!(p.pending(), None);
        assert_eq!(p.committed_offset(), Some(30));
    }

    #[test]
    fn the_interval_policy_is_due_after_the_first_held_ack() {
        let t0 = Instant::now();
        let policy = FlushPolicy::new(1000, Duration::from_millis(50));
        let mut p = Partition::new(lease(None), 0);
        p.fill(records(&[0]), 10, false);
        let (r, e) = p.deliver().unwrap();
        assert_eq!(p.flush_deadline(&policy), None, "nothing pending, no deadline");
        p.ack(r.offset, e, &policy, t0);
        assert_eq!(p.interval_due(&policy, t0), None);
        assert_eq!(p.flush_deadline(&policy), Some(t0 + Duration::from_millis(50)));
        assert_eq!(p.interval_due(&policy, t0 + Duration::from_millis(50)), Some(10));
    }

    #[test]
    fn a_nack_rewinds_to_the_record_and_forgets_later_deliveries() {
        let now = Instant::now();
        let mut p = Partition::new(lease(None), 0);
        p.fill(records(&[0, 10, 20]), 30, false);
        let a = p.deliver().unwrap();
        let b = p.deliver().unwrap();
        let c = p.deliver().unwrap();
        assert!(p.nack(b.0.offset, b.1));
        assert_eq!(p.fetch_at(), 10);
        assert!(p.wants_fetch());
        assert_eq!(p.ack(c.0.offset, c.1, &every(1), now), Acked::Stale, "forgotten by the rewind");
        assert_eq!(p.ack(a.0.offset, a.1, &every(1), now), Acked::FlushDue, "earlier ones stay ackable");
        assert_eq!(p.pending(), Some(10));
        assert!(!p.nack(b.0.offset, b.1), "a nack of a forgotten delivery is stale");
        p.fill(records(&[10, 20]), 30, false);
        let again = p.deliver().unwrap();
        assert_eq!(again.0.offset, 10);
        assert_ne!(again.1, b.1, "the new delivery has a new epoch");
    }

    #[test]
    fn nothing_below_the_fetch_position_is_delivered() {
        let mut p = Partition::new(lease(Some(20)), 20);
        p.fill(records(&[10, 20]), 30, false);
        assert_eq!(p.deliver().unwrap().0.offset, 20);
        assert!(p.deliver().is_none());
        assert_eq!(p.committed_offset(), Some(20));
    }

    #[test]
    fn acks_at_or_below_the_committed_offset_leave_nothing_pending() {
        let now = Instant::now();
        let mut p = Partition::new(lease(Some(30)), 0);
        p.fill(records(&[0, 10]), 20, false);
        let a = p.deliver().unwrap();
        assert_eq!(p.ack(a.0.offset, a.1, &every(1), now), Acked::Held);
        assert_eq!(p.pending(), None);
    }

    #[test]
    fn a_closed_stream_read_to_its_end_wants_no_fetch() {
        let mut p = Partition::new(lease(None), 0);
        p.fill(records(&[0]), 10, true);
        assert!(!p.wants_fetch());
        p.deliver().unwrap();
        assert!(p.wants_fetch(), "the close is only known once a fetch comes back empty");
        p.fill(Vec::new(), 10, true);
        assert!(!p.wants_fetch());
        p.skip_to(5);
        assert_eq!(p.fetch_at(), 10, "never backwards");
    }
}
