//! The coordinated reader (SPEC §2 "Coordinated reader"): one member of a
//! consumer group sharing a set of streams with the group's other live
//! members, over the engine's leases, committed offsets and membership.
//!
//! It has no runtime of its own. The caller's task drives it through
//! [`Reader::next`] (or [`Reader::next_timeout`]), and each call first does
//! whatever is due. A rebalance runs every `rebalance_interval` (+0–20%
//! jitter, timed by [`Engine::sleep`] while idle): a heartbeat that counts
//! the live members, a renewal of every held lease, then claims up to
//! [`target_partition_count`] or releases the surplus, highest stream ids
//! first. Acks past the flush policy's count, and flush intervals that have
//! passed, become commits. After that the call hands out a fetched record,
//! or fetches, or waits at the streams' tails until a record comes or the
//! next deadline.
//!
//! Invariants:
//! - a stream is read only under a lease the reader holds, from the
//!   group's committed offset (or the configured [`Start`] when nothing is
//!   committed);
//! - within one generation of a lease a record is delivered once, unless a
//!   nack asks for it again ([`Partition`]'s rules); acks of deliveries
//!   from a lost generation change nothing;
//! - `OwnershipLost` (from a renewal or a commit) drops that stream's
//!   buffered, delivered and pending state; a later claim starts over from
//!   whatever the group has committed;
//! - [`Reader::shutdown`] commits what is pending, releases every lease and
//!   leaves the group. Dropping a reader without it is a crash: its leases
//!   and membership lapse after their TTLs and its uncommitted acks are
//!   delivered again to the next owner.

use std::collections::BTreeMap;
use std::ops::Bound::{Excluded, Unbounded};
use std::time::{Duration, Instant};

use futures::stream::{FuturesUnordered, StreamExt};

use crate::{
    AcquireLease, Engine, Error, ErrorCode, ErrorKind, Heartbeat, Read, Record, RecordsReply, Result,
};
use crate::{Lease, StreamId};

use super::config::ReaderConfig;
use super::partition::{Acked, Partition};
use super::target_partition_count;

/// Calls a reader keeps in flight at once (fetches, renewals, claims).
const CONCURRENCY: usize = 64;

/// Streams a reader parks live waits on at once; beyond it the waits
/// rotate, each shorter, so no core's live-reader limit is reached.
const MAX_PARKED: usize = 64;

/// The longest one wait lasts when more streams than [`MAX_PARKED`] are
/// idle, so the ones not parked on are fetched again soon.
const ROTATING_WAIT: Duration = Duration::from_millis(50);

/// A record handed out by a [`Reader`], to be acked (or nacked) back.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Message {
    /// The stream it belongs to.
    pub stream: StreamId,
    /// The record: offset, bytes, time.
    pub record: Record,
    /// The generation of the lease it was read under.
    pub generation: u64,
    /// The rewind count of the stream when it was delivered.
    epoch: u64,
}

impl Message {
    /// The offset just past the record (what acking it lets the consumer
    /// group commit, once every earlier record is acked too).
    pub fn end_offset(&self) -> u64 {
        self.record.offset + self.record.payload.len() as u64
    }
}

/// What a reader has done since it joined.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ReaderStats {
    /// Records handed out.
    pub delivered: u64,
    /// Acks that counted (stale ones do not).
    pub acked: u64,
    /// Nacks that rewound a stream.
    pub nacked: u64,
    /// Offsets committed.
    pub commits: u64,
    /// Leases acquired.
    pub claimed: u64,
    /// Leases given up (surplus or shutdown).
    pub released: u64,
    /// Streams lost to another owner or generation, or deleted.
    pub lost: u64,
    /// Live members of the consumer group at the last heartbeat.
    pub live_consumers: u32,
    /// Bytes skipped because retention dropped them before they were read.
    pub skipped_bytes: u64,
}

/// One member of a consumer group (see the module docs).
#[derive(Debug)]
pub struct Reader {
    engine: Engine,
    config: ReaderConfig,
    owned: BTreeMap<StreamId, Partition>,
    next_rebalance: Instant,
    last_delivered: Option<StreamId>,
    /// Where this member's claims start in the stream list, so members
    /// started together try different streams first.
    claim_from: usize,
    /// Where the next rotating wait starts among idle streams.
    park_from: usize,
    rng: u64,
    stats: ReaderStats,
}

impl Reader {
    /// Joins the consumer group: checks the configuration, heartbeats and
    /// claims a first share of the streams.
    pub async fn join(engine: &Engine, config: ReaderConfig) -> Result<Reader> {
        config.check()?;
        let seed = seed_of(&config.consumer);
        let claim_from = if config.streams.is_empty() { 0 } else { (seed as usize) % config.streams.len() };
        let mut reader = Reader {
            engine: engine.clone(),
            config,
            owned: BTreeMap::new(),
            next_rebalance: Instant::now(),
            last_delivered: None,
            claim_from,
            park_from: 0,
            rng: seed | 1,
            stats: ReaderStats::default(),
        };
        reader.rebalance().await?;
        Ok(reader)
    }

    /// The streams held now, in order.
    pub fn owned(&self) -> Vec<StreamId> {
        self.owned.keys().cloned().collect()
    }

    /// The lease held on `id`, if any.
    pub fn lease(&self, id: &StreamId) -> Option<&Lease> {
        self.owned.get(id).map(|p| &p.lease)
    }

    /// The committed offset of held stream `id`, as the group last
    /// answered it (`None` when not held or nothing committed yet).
    pub fn committed(&self, id: &StreamId) -> Option<u64> {
        self.owned.get(id).and_then(Partition::committed_offset)
    }

    /// What the reader has done so far.
    pub fn stats(&self) -> ReaderStats {
        self.stats
    }

    /// This member's name (its consumer, and its leases' owner).
    pub fn member(&self) -> &str {
        &self.config.consumer
    }

    /// The configuration it runs with.
    pub fn config(&self) -> &ReaderConfig {
        &self.config
    }

    /// The next record of any held stream, waiting as long as it takes
    /// (rebalancing and committing on the way).
    pub async fn next(&mut self) -> Result<Message> {
        loop {
            if let Some(d) = self.step(None).await? {
                return Ok(d);
            }
        }
    }

    /// [`Reader::next`], giving up after `timeout` with `None`.
    pub async fn next_timeout(&mut self, timeout: Duration) -> Result<Option<Message>> {
        let until = Instant::now() + timeout;
        loop {
            if let Some(d) = self.step(Some(until)).await? {
                return Ok(Some(d));
            }
            if Instant::now() >= until {
                return Ok(None);
            }
        }
    }

    /// Acks a delivery: once every earlier record of its stream is acked
    /// too, the group may commit past it, when the flush policy says.
    /// A delivery of a lost or rewound generation changes nothing.
    pub async fn ack(&mut self, delivery: &Message) -> Result<()> {
        let policy = self.config.flush;
        let Some(p) = self.current(delivery) else { return Ok(()) };
        match p.ack(delivery.record.offset, delivery.epoch, &policy, Instant::now()) {
            Acked::Stale => Ok(()),
            Acked::Held => {
                self.stats.acked += 1;
                Ok(())
            }
            Acked::FlushDue => {
                self.stats.acked += 1;
                self.commit_or_drop(&delivery.stream).await
            }
        }
    }

    /// Nacks a delivery: the record and every later one of its stream are
    /// delivered again, in order. False for a stale delivery.
    pub fn nack(&mut self, delivery: &Message) -> bool {
        let Some(p) = self.current(delivery) else { return false };
        let rewound = p.nack(delivery.record.offset, delivery.epoch);
        if rewound {
            self.stats.nacked += 1;
        }
        rewound
    }

    /// Commits every held stream's pending acks now.
    pub async fn flush(&mut self) -> Result<()> {
        let ids: Vec<StreamId> =
            self.owned.iter().filter(|(_, p)| p.pending().is_some()).map(|(id, _)| id.clone()).collect();
        for id in ids {
            self.commit_or_drop(&id).await?;
        }
        Ok(())
    }

    /// Leaves cleanly: commits what is pending, releases every lease (at
    /// once) and leaves the consumer group, so the other members take the
    /// streams over at their next rebalance. Returns the first failure,
    /// after trying every step.
    pub async fn shutdown(mut self) -> Result<()> {
        let mut first: Option<Error> = None;
        let ids: Vec<StreamId> = self.owned.keys().cloned().collect();
        for id in &ids {
            if let Err(err) = self.commit_pending(id).await {
                if !is_lost(&err) {
                    first.get_or_insert(err);
                }
            }
        }
        let leases: Vec<Lease> = self.owned.values().map(|p| p.lease.clone()).collect();
        let released = futures::stream::iter(leases.into_iter().map(|l| {
            let engine = self.engine.clone();
            async move { engine.release_lease(&l).await }
        }))
        .buffer_unordered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
        for result in released {
            match result {
                Ok(()) => self.stats.released += 1,
                Err(err) if is_lost(&err) => {}
                Err(err) => {
                    first.get_or_insert(err);
                }
            }
        }
        self.owned.clear();
        let c = &self.config;
        if let Err(err) = self.engine.leave(&c.bucket, &c.consumer_group, &c.consumer).await {
            first.get_or_insert(err);
        }
        first.map_or(Ok(()), Err)
    }

    /// The partition a delivery belongs to, when it is of the generation
    /// held now.
    fn current(&mut self, delivery: &Message) -> Option<&mut Partition> {
        self.owned.get_mut(&delivery.stream).filter(|p| p.lease.generation == delivery.generation)
    }

    /// One turn: whatever is due, then a delivery if one can be had before
    /// the next deadline (or `until`).
    async fn step(&mut self, until: Option<Instant>) -> Result<Option<Message>> {
        if Instant::now() >= self.next_rebalance {
            self.rebalance().await?;
        }
        self.flush_due().await?;
        if let Some(d) = self.deliver() {
            return Ok(Some(d));
        }
        self.fetch().await?;
        if let Some(d) = self.deliver() {
            return Ok(Some(d));
        }
        let mut deadline = self.next_rebalance;
        for p in self.owned.values() {
            if let Some(at) = p.flush_deadline(&self.config.flush) {
                deadline = deadline.min(at);
            }
        }
        if let Some(until) = until {
            deadline = deadline.min(until);
        }
        self.wait(deadline).await?;
        Ok(self.deliver())
    }

    /// Hands out a buffered record, taking the held streams in turn.
    fn deliver(&mut self) -> Option<Message> {
        let ready = |(_, p): &(&StreamId, &Partition)| p.has_ready();
        let key = match &self.last_delivered {
            Some(last) => self
                .owned
                .range::<StreamId, _>((Excluded(last), Unbounded))
                .chain(self.owned.range::<StreamId, _>(..=last))
                .find(ready),
            None => self.owned.iter().find(ready),
        }
        .map(|(id, _)| id.clone())?;
        let p = self.owned.get_mut(&key)?;
        let (record, epoch) = p.deliver()?;
        let generation = p.lease.generation;
        self.stats.delivered += 1;
        self.last_delivered = Some(key.clone());
        Some(Message { stream: key, record, generation, epoch })
    }

    /// Reads every held stream that has nothing buffered, without waiting.
    async fn fetch(&mut self) -> Result<()> {
        let wanted: Vec<(StreamId, u64)> = self
            .owned
            .iter()
            .filter(|(_, p)| p.wants_fetch())
            .map(|(id, p)| (id.clone(), p.fetch_at()))
            .collect();
        if wanted.is_empty() {
            return Ok(());
        }
        let bytes = self.config.fetch_bytes;
        let replies = futures::stream::iter(wanted.clone().into_iter().map(|(id, at)| {
            let (engine, read) = (self.engine.clone(), Read::new(id).offset(at).max_len(bytes));
            async move { engine.read_records(read).await }
        }))
        .buffered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
        for ((id, at), reply) in wanted.into_iter().zip(replies) {
            self.take(&id, at, reply)?;
        }
        Ok(())
    }

    /// Waits at the tails of idle streams until one has a record, or the
    /// deadline.
    async fn wait(&mut self, deadline: Instant) -> Result<()> {
        let left = deadline.saturating_duration_since(Instant::now()).max(Duration::from_millis(1));
        let idle: Vec<(StreamId, u64)> = self
            .owned
            .iter()
            .filter(|(_, p)| p.wants_fetch())
            .map(|(id, p)| (id.clone(), p.fetch_at()))
            .collect();
        if idle.is_empty() {
            return self.engine.sleep(left).await;
        }
        let (parked, timeout) = if idle.len() > MAX_PARKED {
            let from = self.park_from % idle.len();
            self.park_from = from + MAX_PARKED;
            let turn: Vec<_> = idle.iter().cycle().skip(from).take(MAX_PARKED).cloned().collect();
            (turn, left.min(ROTATING_WAIT))
        } else {
            (idle, left)
        };
        let bytes = self.config.fetch_bytes;
        let mut waits: FuturesUnordered<_> = parked
            .into_iter()
            .map(|(id, at)| {
                let (engine, read) = (self.engine.clone(), Read::new(id.clone()).offset(at).max_len(bytes));
                async move { (id, at, engine.wait_read_records(read, timeout).await) }
            })
            .collect();
        let first = waits.next().await;
        drop(waits); // the other parked reads are cancelled
        let Some((id, at, reply)) = first else { return Ok(()) };
        let temporary = matches!(&reply, Err(err) if err.is_temporary());
        self.take(&id, at, reply)?;
        if temporary {
            // Do not spin on a refusal: let the deadline (or a moment) pass.
            self.engine.sleep(left.min(Duration::from_millis(10))).await?;
        }
        Ok(())
    }

    /// Files a fetch's reply for stream `id` read at `at`.
    fn take(&mut self, id: &StreamId, at: u64, reply: Result<RecordsReply>) -> Result<()> {
        match reply {
            Ok(r) => {
                if let Some(p) = self.owned.get_mut(id).filter(|p| p.fetch_at() == at) {
                    p.fill(r.records, r.next_offset, r.closed);
                }
                Ok(())
            }
            Err(err) => {
                if let ErrorKind::OffsetGone { retained, .. } = err.kind() {
                    if let Some(p) = self.owned.get_mut(id).filter(|p| p.fetch_at() == at) {
                        self.stats.skipped_bytes += retained.saturating_sub(at);
                        p.skip_to(*retained);
                    }
                    return Ok(());
                }
                self.drop_or(id, err)
            }
        }
    }

    /// Commits the interval-due pending offsets.
    async fn flush_due(&mut self) -> Result<()> {
        let now = Instant::now();
        let due: Vec<StreamId> = self
            .owned
            .iter()
            .filter(|(_, p)| p.interval_due(&self.config.flush, now).is_some())
            .map(|(id, _)| id.clone())
            .collect();
        for id in due {
            self.commit_or_drop(&id).await?;
        }
        Ok(())
    }

    /// Commits `id`'s pending offset; a lost stream is dropped, a
    /// temporary refusal waits for the next chance.
    async fn commit_or_drop(&mut self, id: &StreamId) -> Result<()> {
        match self.commit_pending(id).await {
            Ok(()) => Ok(()),
            Err(err) => self.drop_or(id, err),
        }
    }

    /// Commits `id`'s pending offset, if any, returning the engine's error.
    async fn commit_pending(&mut self, id: &StreamId) -> Result<()> {
        let Some((lease, offset)) = self.owned.get(id).and_then(|p| Some((p.lease.clone(), p.pending()?)))
        else {
            return Ok(());
        };
        let committed = self.engine.commit_offset(&lease, offset).await?;
        if let Some(p) = self.owned.get_mut(id).filter(|p| p.lease.generation == lease.generation) {
            p.committed(committed);
        }
        self.stats.commits += 1;
        Ok(())
    }

    /// What a failed call on stream `id` means: lost or deleted, the stream
    /// is dropped; temporary, it is retried at the next turn; anything else
    /// is the caller's.
    fn drop_or(&mut self, id: &StreamId, err: Error) -> Result<()> {
        if is_lost(&err) {
            if self.owned.remove(id).is_some() {
                self.stats.lost += 1;
                tracing::debug!(stream = %id, error = %err, "coordinated reader lost a stream");
            }
            return Ok(());
        }
        if err.is_temporary() {
            tracing::debug!(stream = %id, error = %err, "coordinated reader retries later");
            return Ok(());
        }
        Err(err)
    }

    /// Heartbeat, renewals, then claims or releases toward the target.
    async fn rebalance(&mut self) -> Result<()> {
        let c = &self.config;
        let beat = Heartbeat::new(&c.bucket, &c.consumer_group, &c.consumer).ttl(c.effective_member_ttl());
        match self.engine.heartbeat(beat).await {
            Ok(m) => self.stats.live_consumers = m.live_consumers,
            Err(err) if err.is_temporary() => {
                tracing::debug!(error = %err, "heartbeat refused; retried next rebalance")
            }
            Err(err) => return Err(err),
        }
        self.renew_all().await?;
        let target = target_partition_count(
            self.config.streams.len(),
            self.stats.live_consumers as usize,
            self.config.slack,
        );
        if self.owned.len() > target {
            self.release_surplus(target).await?;
        } else if self.owned.len() < target {
            self.claim(target).await?;
        }
        let every = self.config.effective_rebalance_interval();
        self.next_rebalance = Instant::now() + jittered(&mut self.rng, every);
        Ok(())
    }

    async fn renew_all(&mut self) -> Result<()> {
        let leases: Vec<Lease> = self.owned.values().map(|p| p.lease.clone()).collect();
        let ttl = self.config.lease_ttl;
        let renewed = futures::stream::iter(leases.clone().into_iter().map(|l| {
            let engine = self.engine.clone();
            async move { engine.renew_lease(&l, ttl).await }
        }))
        .buffered(CONCURRENCY)
        .collect::<Vec<_>>()
        .await;
        for (old, result) in leases.iter().zip(renewed) {
            match result {
                Ok(lease) => {
                    if let Some(p) =
                        self.owned.get_mut(&old.id).filter(|p| p.lease.generation == lease.generation)
                    {
                        p.lease = lease;
                    }
                }
                Err(err) => self.drop_or(&old.id, err)?,
            }
        }
        Ok(())
    }

    /// Gives up the streams beyond `target`, highest ids first, each with
    /// its pending acks committed first.
    async fn release_surplus(&mut self, target: usize) -> Result<()> {
        let surplus: Vec<StreamId> =
            self.owned.keys().rev().take(self.owned.len() - target).cloned().collect();
        for id in surplus {
            self.commit_or_drop(&id).await?;
            let Some(p) = self.owned.remove(&id) else { continue };
            match self.engine.release_lease(&p.lease).await {
                Ok(()) => self.stats.released += 1,
                Err(err) if is_lost(&err) => self.stats.lost += 1,
                Err(err) if err.is_temporary() => {
                    // The lease lapses by itself; nothing is read under it.
                    tracing::debug!(stream = %id, error = %err, "release refused; the lease will lapse");
                }
                Err(err) => return Err(err),
            }
        }
        Ok(())
    }

    /// Claims free streams until `target` are held (a few at once, never
    /// more than the shortfall).
    async fn claim(&mut self, target: usize) -> Result<()> {
        let n = self.config.streams.len();
        let candidates: Vec<StreamId> = (0..n)
            .map(|i| &self.config.streams[(self.claim_from + i) % n])
            .filter(|id| !self.owned.contains_key(*id))
            .cloned()
            .collect();
        let mut next = 0;
        while self.owned.len() < target && next < candidates.len() {
            let take = (target - self.owned.len()).min(CONCURRENCY).min(candidates.len() - next);
            let batch = &candidates[next..next + take];
            next += take;
            let c = &self.config;
            let acquired = futures::future::join_all(batch.iter().cloned().map(|id| {
                let engine = self.engine.clone();
                let req = AcquireLease::new(id, &c.consumer_group, &c.consumer).ttl(c.lease_ttl);
                async move { engine.acquire_lease(req).await }
            }))
            .await;
            for result in acquired {
                match result {
                    Ok(lease) => self.start(lease).await?,
                    Err(err) if err.code() == ErrorCode::LeaseHeld || is_lost(&err) || err.is_temporary() => {
                    }
                    Err(err) => return Err(err),
                }
            }
        }
        Ok(())
    }

    /// Starts reading a freshly claimed stream at its committed offset or
    /// the configured start.
    async fn start(&mut self, lease: Lease) -> Result<()> {
        let from = match lease.committed {
            Some(committed) => Ok(committed),
            None => self.engine.start_offset(&lease.id, self.config.start).await,
        };
        match from {
            Ok(from) => {
                self.stats.claimed += 1;
                self.owned.insert(lease.id.clone(), Partition::new(lease, from));
                Ok(())
            }
            Err(err) => {
                let _ = self.engine.release_lease(&lease).await;
                if is_lost(&err) || err.is_temporary() {
                    Ok(())
                } else {
                    Err(err)
                }
            }
        }
    }
}

/// `every` plus 0–20%, drawn from `rng` (xorshift64*: enough to spread
/// timers, no dependency).
fn jittered(rng: &mut u64, every: Duration) -> Duration {
    *rng ^= *rng >> 12;
    *rng ^= *rng << 25;
    *rng ^= *rng >> 27;
    let r = rng.wrapping_mul(0x2545_F491_4F6C_DD1D);
    every + every.mul_f64((r % 201) as f64 / 1000.0)
}

/// A lost lease or a stream gone: the stream is simply not ours.
fn is_lost(err: &Error) -> bool {
    matches!(err.code(), ErrorCode::OwnershipLost | ErrorCode::StreamNotFound | ErrorCode::BucketNotFound)
}

/// A seed for the jitter and the claim order, distinct per consumer and
/// per run.
fn seed_of(consumer: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    for b in consumer.bytes() {
        h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
    }
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.subsec_nanos());
    h ^ u64::from(nanos)
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    #[test]
    fn jitter_stays_within_zero_to_twenty_percent() {
        let mut rng = super::seed_of("c") | 1;
        let every = Duration::from_millis(100);
        let mut seen = std::collections::BTreeSet::new();
        for _ in 0..1000 {
            let d = super::jittered(&mut rng, every);
            assert!(d >= every && d <= every + every / 5, "{d:?}");
            seen.insert(d.as_millis());
        }
        assert!(seen.len() > 10, "spread out: {seen:?}");
    }
}
