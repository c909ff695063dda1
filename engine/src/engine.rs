//! The `Engine` handle: open, route, call, shut down.
//!
//! A handle is an `Arc` around the engine's shared parts, so it is `Clone +
//! Send + Sync` and cheap to pass around. Each call validates what can be
//! validated without the stream's state (names are already valid by type;
//! empty appends, payload sizes and batch sizes are checked here, before
//! anything is routed or counted), computes the placement from the fixed
//! hash, sends an envelope into the owner core's mailbox and awaits the
//! oneshot reply. The futures are runtime-agnostic: they only use
//! cross-thread channels and wakers, so any executor (tokio, a plain
//! `block_on`, a glommio task) can await them.

use std::borrow::Borrow;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

use bytes::Bytes;
use futures::channel::oneshot;
use rill_shard::api::{
    AcquireLease, Append, AppendBatch, AppendReply, BatchReply, BootstrapReply, Close, CloseReply, Create,
    CreateReply, HeadReply, Heartbeat, Lease, Membership, PublishSnapshot, Read, ReadReply, RecordsReply,
    SnapshotReply, WaitRead,
};
use rill_shard::log::{LogFactory, LogStore};
use rill_shard::node::calls::{self, output, Call};
use rill_shard::node::{mailbox, MailboxSender};
use rill_shard::node::{recovery, WalLog};
use rill_shard::node::{system_clock, CoreSpec};
use rill_shard::node::{CoreTask, Letter, LetterBatch, Mail, Request};
use rill_shard::node::{FsPackDir, PackDir};
use rill_shard::GroupState;
use rill_shard::{CoreMetrics, GroupMetrics};
use rill_shard::{Error, ErrorKind, Placement, Result, StreamId};

use crate::config::Config;
use crate::runtime::Executors;
use crate::shape;

/// How long dropping the last handle waits for the cores to stop.
const DROP_STOP_TIMEOUT: Duration = Duration::from_secs(10);

/// The items of an [`Engine::append_many`] that go to one core: their
/// places in the call and their requests, in order.
#[derive(Default)]
struct CoreShare {
    indexes: Vec<usize>,
    requests: Vec<(u32, Request)>,
}

/// A handle to an open engine.
#[derive(Clone, Debug)]
pub struct Engine {
    pub(crate) inner: Arc<Inner>,
}

#[derive(Debug)]
pub(crate) struct Inner {
    pub(crate) config: Config,
    pub(crate) mailboxes: Vec<MailboxSender>,
    pub(crate) core_metrics: Vec<Arc<CoreMetrics>>,
    pub(crate) group_metrics: Vec<Arc<GroupMetrics>>,
    pub(crate) executors: Executors,
    pub(crate) closed: AtomicBool,
    /// The data directory's lock, released once the cores have stopped.
    pub(crate) lock: parking_lot::Mutex<Option<std::fs::File>>,
    /// The clock the cores stamp commands with.
    pub(crate) clock: EngineClock,
    /// The core the next [`Engine::sleep`] is timed on (taken in turn).
    pub(crate) next_timer_core: std::sync::atomic::AtomicUsize,
    /// Wakes the fork keeper (`fork_keeper.rs`), set right after open.
    pub(crate) fork_keeper: std::sync::OnceLock<crate::kick::Kicker>,
    /// Held while a fork's pin is delivered (by `Engine::fork` or the
    /// keeper), so an unpin never overtakes its pin (`fork.rs`).
    pub(crate) fork_pins: futures::lock::Mutex<()>,
    /// A replicated node's raft address (None on a single node); held
    /// for as long as the engine lives, its accept thread stops on drop.
    #[allow(dead_code)]
    pub(crate) acceptor: Option<rill_shard::cluster::Acceptor>,
    /// A replicated node's view of every member's addresses.
    pub(crate) book: Option<rill_shard::cluster::AddressBook>,
}

impl Engine {
    /// Opens (or creates) the engine in `config.data_dir` and starts one
    /// pinned executor per core.
    pub fn open(config: Config) -> Result<Engine> {
        config.check()?;
        let lock = shape::lock(&config.data_dir)?;
        shape::check_or_record(&config.data_dir, config.groups, config.cores)?;
        let (states, seeds, next_lsn) = recover_states(&config)?;
        let log_factory = config.log_factory.clone().unwrap_or_else(|| wal_factory(&config, next_lsn));
        let (acceptor, cluster, book) = match (&config.cluster, seeds) {
            (Some(cluster), Some(seeds)) => {
                let identity = Arc::new(rill_shard::cluster::ClusterIdentity::open(
                    &config.data_dir,
                    cluster.node(),
                    cluster.cluster_id(),
                    cluster.join,
                )?);
                let book = rill_shard::cluster::AddressBook::new(cluster.raft_members());
                let spec = cluster.spec(config.groups, config.cores, identity.clone(), book.clone())?;
                let hello =
                    rill_shard::cluster::Hello::new(identity.id(), spec.node, spec.groups, spec.cores);
                let (acceptor, incoming) = rill_shard::cluster::Acceptor::start(
                    cluster.raft_bind()?,
                    config.cores,
                    hello,
                    identity,
                )?;
                (Some(acceptor), Some((spec, seeds, incoming)), Some(book))
            }
            _ => (None, None, None),
        };
        let core_metrics: Vec<Arc<CoreMetrics>> =
            (0..config.cores).map(|_| Arc::new(CoreMetrics::default())).collect();
        let group_metrics: Vec<Arc<GroupMetrics>> =
            (0..config.groups).map(|_| Arc::new(GroupMetrics::default())).collect();
        let packs = Arc::new(FsPackDir::open(rill_shard::node::cold_dir(&config.data_dir))?);
        let clock = config.clock.clone().unwrap_or_else(system_clock);
        let (mailboxes, specs) =
            core_specs(&config, packs, states, cluster, (&core_metrics, &group_metrics), &clock, log_factory);
        let executors = Executors::start(specs, config.pin_threads, config.io_memory_bytes)?;
        tracing::info!(cores = config.cores, groups = config.groups, dir = %config.data_dir.display(), "engine open");
        let engine = Engine {
            inner: Arc::new(Inner {
                config,
                mailboxes,
                core_metrics,
                group_metrics,
                executors,
                closed: AtomicBool::new(false),
                lock: parking_lot::Mutex::new(Some(lock)),
                clock: EngineClock(clock),
                next_timer_core: std::sync::atomic::AtomicUsize::new(0),
                fork_keeper: std::sync::OnceLock::new(),
                fork_pins: futures::lock::Mutex::new(()),
                acceptor,
                book,
            }),
        };
        start_fork_keeper(&engine.inner);
        Ok(engine)
    }

    /// The configuration the engine was opened with.
    pub fn config(&self) -> &Config {
        &self.inner.config
    }

    /// Cores (executors) the engine runs.
    pub fn cores(&self) -> usize {
        self.inner.config.cores
    }

    /// Groups the engine holds (fixed for its data directory).
    pub fn groups(&self) -> u32 {
        self.inner.config.groups
    }

    /// Where a stream lives (SPEC §1).
    pub fn locate(&self, id: &StreamId) -> Placement {
        id.placement(self.inner.config.groups, self.inner.config.cores)
    }

    /// The core a group is homed on.
    pub fn core_of_group(&self, group: u32) -> usize {
        group as usize % self.inner.config.cores
    }

    pub(crate) fn core_metrics(&self) -> &[Arc<CoreMetrics>] {
        &self.inner.core_metrics
    }

    pub(crate) fn group_metrics(&self) -> &[Arc<GroupMetrics>] {
        &self.inner.group_metrics
    }

    pub(crate) fn mailbox_senders(&self) -> &[MailboxSender] {
        &self.inner.mailboxes
    }

    /// Sends a typed call to the group of `placement` and awaits its answer.
    pub(crate) async fn call<C: Call>(&self, placement: Placement, call: C) -> Result<C::Output> {
        let inner = &self.inner;
        if inner.closed.load(Ordering::Acquire) {
            return Err(Error::new(ErrorKind::ShuttingDown).with_placement(placement));
        }
        let (tx, rx) = oneshot::channel();
        let request = call.into_request();
        let letter = Letter { group: placement.group, request, reply: tx, sent_at: Instant::now() };
        inner.mailboxes[placement.core]
            .send(Mail::Request(Box::new(letter)))
            .await
            .map_err(|e| e.with_placement(placement))?;
        match reply(rx, inner.config.reply_spin).await {
            Ok(result) => result.and_then(output::<C>).map_err(|e| e.with_placement(placement)),
            Err(_) => Err(Error::new(ErrorKind::ShuttingDown).with_placement(placement)),
        }
    }

    fn check_payload(&self, len: u64) -> Result<()> {
        let limit = self.inner.config.limits.max_payload_bytes;
        if len > limit {
            return Err(Error::new(ErrorKind::PayloadTooLarge { len, limit }));
        }
        Ok(())
    }

    /// The records of a multi-record create or append: at most
    /// `max_batch_items` of them, `max_payload_bytes` in all.
    pub(crate) fn check_records(&self, first: Option<&Bytes>, more: &[Bytes]) -> Result<()> {
        let limit = self.inner.config.limits.max_batch_items;
        let count = usize::from(first.is_some()) + more.len();
        if count > limit {
            return Err(Error::bad_request(format!(
                "one create or append holds at most {limit} records, got {count}"
            )));
        }
        self.check_payload(first.iter().copied().chain(more).map(|p| p.len() as u64).sum())
    }

    /// Creates a stream; idempotent when the settings match.
    pub async fn create(&self, req: Create) -> Result<CreateReply> {
        if let Some(attrs) = &req.attrs {
            rill_shard::api::validate_attrs(attrs)?;
        }
        self.check_records(req.initial_payload.as_ref(), &req.more_records)?;
        let placement = self.locate(&req.id);
        self.call(placement, req).await
    }

    /// Appends one payload (or the several records of
    /// [`Append::records`], as one append).
    pub async fn append(&self, req: Append) -> Result<AppendReply> {
        if req.payload.is_empty() && !req.close_after {
            return Err(Error::new(ErrorKind::EmptyAppend).with_placement(self.locate(&req.id)));
        }
        self.check_records(Some(&req.payload), &req.more_records)?;
        let placement = self.locate(&req.id);
        self.call(placement, req).await
    }

    /// Appends many payloads to one stream in one routed request.
    pub async fn append_batch(&self, req: AppendBatch) -> Result<BatchReply> {
        if req.payloads.is_empty() {
            return Err(Error::bad_request("an append batch needs at least one payload"));
        }
        let limit = self.inner.config.limits.max_batch_items;
        if req.payloads.len() > limit {
            return Err(Error::bad_request(format!(
                "an append batch holds at most {limit} payloads, got {}",
                req.payloads.len()
            )));
        }
        self.check_payload(req.payloads.iter().map(|p| p.len() as u64).sum())?;
        let placement = self.locate(&req.id);
        self.call(placement, req).await
    }

    /// Appends to any streams in one call: the items are split by core and
    /// each core gets them in one mailbox message, so a call costs one
    /// send and one wake per core it touches rather than per item.
    ///
    /// Item `i`'s result is at index `i`, exactly as if the items had been
    /// issued one by one in order: items for one stream are applied in
    /// their order here; items for different streams are independent (one
    /// failing does not stop the others). An item that fails on its own
    /// (an empty or oversized payload, a missing or closed stream, a
    /// producer fence, an `Overloaded` group or mailbox) gets its error in
    /// its place. Every `Ok` is durable, like [`Engine::append`]'s. The
    /// call itself fails only when the engine is shut down or when it
    /// holds more than `max_batch_items` items; an empty list answers an
    /// empty list.
    pub async fn append_many(&self, items: Vec<Append>) -> Result<Vec<Result<AppendReply>>> {
        let inner = &self.inner;
        if inner.closed.load(Ordering::Acquire) {
            return Err(Error::new(ErrorKind::ShuttingDown));
        }
        let limit = inner.config.limits.max_batch_items;
        if items.len() > limit {
            return Err(Error::bad_request(format!(
                "append_many takes at most {limit} items, got {}",
                items.len()
            )));
        }
        let mut results: Vec<Option<Result<AppendReply>>> = (0..items.len()).map(|_| None).collect();
        let mut placements = Vec::with_capacity(items.len());
        let mut per_core: Vec<CoreShare> = (0..inner.mailboxes.len()).map(|_| CoreShare::default()).collect();
        for (index, item) in items.into_iter().enumerate() {
            let placement = self.locate(&item.id);
            placements.push(placement);
            if item.payload.is_empty() && !item.close_after {
                results[index] = Some(Err(Error::new(ErrorKind::EmptyAppend).with_placement(placement)));
                continue;
            }
            if let Err(err) = self.check_records(Some(&item.payload), &item.more_records) {
                results[index] = Some(Err(err.with_placement(placement)));
                continue;
            }
            let share = &mut per_core[placement.core];
            share.indexes.push(index);
            share.requests.push((placement.group, item.into_request()));
        }
        let sent_at = Instant::now();
        let mut waiting = Vec::new();
        for (core, CoreShare { indexes, requests }) in per_core.into_iter().enumerate() {
            if indexes.is_empty() {
                continue;
            }
            let (tx, rx) = oneshot::channel();
            let batch = LetterBatch { items: requests, reply: tx, sent_at };
            match inner.mailboxes[core].send(Mail::Batch(Box::new(batch))).await {
                Ok(()) => waiting.push((indexes, rx)),
                Err(err) => {
                    for index in indexes {
                        results[index] = Some(Err(err.clone().with_placement(placements[index])));
                    }
                }
            }
        }
        for (indexes, rx) in waiting {
            let replies = reply(rx, self.inner.config.reply_spin).await.ok();
            let mut replies = replies.into_iter().flatten();
            for index in indexes {
                let placement = placements[index];
                let result = match replies.next() {
                    Some(reply) => reply.and_then(output::<Append>),
                    None => Err(Error::new(ErrorKind::ShuttingDown)),
                };
                results[index] = Some(result.map_err(|e| e.with_placement(placement)));
            }
        }
        Ok(results
            .into_iter()
            .map(|r| r.unwrap_or_else(|| Err(Error::new(ErrorKind::Internal { what: "append_many" }))))
            .collect())
    }

    /// Reads bytes at an offset.
    pub async fn read(&self, req: Read) -> Result<ReadReply> {
        let placement = self.locate(&req.id);
        self.call(placement, req).await
    }

    /// Reads whole records from an offset (the request is read as
    /// [`Read::records`]): each with its offset, bytes and time. A read
    /// starting inside a record starts at the next one.
    pub async fn read_records(&self, req: Read) -> Result<RecordsReply> {
        Ok(self.read(req.records(true)).await?.into())
    }

    /// [`Engine::read_records`] that waits up to `timeout` at the tail for
    /// a record to arrive (an empty reply with `up_to_date` on timeout).
    pub async fn wait_read_records(&self, req: Read, timeout: Duration) -> Result<RecordsReply> {
        Ok(self.wait_read(req.records(true), timeout).await?.into())
    }

    /// Reads bytes at an offset, waiting up to `timeout` for them to exist.
    /// On timeout the reply is empty with `up_to_date = true`.
    pub async fn wait_read(&self, req: Read, timeout: Duration) -> Result<ReadReply> {
        let placement = self.locate(&req.id);
        self.call(placement, WaitRead { read: req, timeout }).await
    }

    /// The offset of a stream's first retained record stamped at or after
    /// `at_ms` (Unix milliseconds), or its tail when there is none; a
    /// record read from there starts at that record. Never renews a TTL.
    pub async fn offset_at(&self, id: impl Borrow<StreamId>, at_ms: u64) -> Result<u64> {
        let id = id.borrow().clone();
        let placement = self.locate(&id);
        self.call(placement, calls::OffsetAt { id, at_ms }).await
    }

    /// Acquires a consumer group's lease on a stream (SPEC §2 "Leases and
    /// committed offsets"): granted when the group is new, released,
    /// expired or already this owner's, each time at a new generation.
    /// Held by another live owner: `LeaseHeld` (temporary), naming the
    /// holder and when its lease lapses.
    pub async fn acquire_lease(&self, req: AcquireLease) -> Result<Lease> {
        rill_shard::api::lease_ttl_ms(req.ttl)?;
        let placement = self.locate(&req.id);
        let (id, consumer_group, owner) = (req.id.clone(), req.consumer_group.clone(), req.owner.clone());
        let reply = self.call(placement, req).await?;
        Ok(Lease {
            id,
            consumer_group,
            owner,
            generation: reply.generation,
            expires_at_ms: reply.expires_at_ms,
            committed: reply.committed,
        })
    }

    /// Renews a held lease for `ttl` from now (same generation). A lease
    /// that is no longer the group's current one: `OwnershipLost`.
    pub async fn renew_lease(&self, lease: &Lease, ttl: Duration) -> Result<Lease> {
        rill_shard::api::lease_ttl_ms(ttl)?;
        let placement = self.locate(&lease.id);
        let reply = self.call(placement, calls::RenewLease { lease: lease.clone(), ttl }).await?;
        Ok(Lease {
            generation: reply.generation,
            expires_at_ms: reply.expires_at_ms,
            committed: reply.committed,
            ..lease.clone()
        })
    }

    /// Releases a held lease (the next acquire by anyone succeeds at once).
    /// A lease that is no longer current: `OwnershipLost`.
    pub async fn release_lease(&self, lease: &Lease) -> Result<()> {
        let placement = self.locate(&lease.id);
        self.call(placement, calls::ReleaseLease(lease.clone())).await
    }

    /// Commits the consumer group's next offset to read under `lease`, and
    /// returns the committed offset after the call: the stored one when
    /// `offset` is not above it (offsets never go back). Past the tail:
    /// `OffsetOutOfRange`; a lease that is no longer current:
    /// `OwnershipLost`, and nothing changes.
    pub async fn commit_offset(&self, lease: &Lease, offset: u64) -> Result<u64> {
        let placement = self.locate(&lease.id);
        self.call(placement, calls::CommitOffset { lease: lease.clone(), offset }).await
    }

    /// A consumer group's committed offset (`None` before its first commit).
    pub async fn committed_offset(
        &self,
        id: impl Borrow<StreamId>,
        consumer_group: &str,
    ) -> Result<Option<u64>> {
        let id = id.borrow().clone();
        let placement = self.locate(&id);
        self.call(placement, calls::CommittedOffset { id, group: consumer_group.to_string() }).await
    }

    /// Where a consumer group's membership lives: the group that owns
    /// `placement_hash(bucket, consumer_group)`.
    fn locate_membership(&self, bucket: &str, consumer_group: &str) -> Placement {
        let hash = rill_shard::placement_hash(bucket, consumer_group);
        rill_shard::placement_of(hash, self.inner.config.groups, self.inner.config.cores)
    }

    /// A consumer's heartbeat in a consumer group (SPEC §2 "Membership"):
    /// the consumer counts as live until `ttl` from now; the reply counts
    /// the live consumers, this one included. Beyond
    /// `max_consumers_per_group` live consumers: `TooManyConsumers`.
    pub async fn heartbeat(&self, req: Heartbeat) -> Result<Membership> {
        rill_shard::api::lease_ttl_ms(req.ttl)?;
        let placement = self.locate_membership(&req.bucket, &req.consumer_group);
        self.call(placement, req).await
    }

    /// A consumer leaves a consumer group (idempotent: leaving twice, or
    /// without ever joining, is fine).
    pub async fn leave(&self, bucket: &str, consumer_group: &str, consumer: &str) -> Result<()> {
        let placement = self.locate_membership(bucket, consumer_group);
        let call = calls::Leave {
            bucket: bucket.to_string(),
            group: consumer_group.to_string(),
            consumer: consumer.to_string(),
        };
        self.call(placement, call).await
    }

    /// The offset a reader starting at `start` reads from: the retained
    /// start, the tail, the first record at or after a time, or the first
    /// record that starts after an offset (the tail when there is none).
    /// Never renews a TTL.
    pub async fn start_offset(
        &self,
        id: impl Borrow<StreamId>,
        start: crate::consumer::Start,
    ) -> Result<u64> {
        use crate::consumer::Start;
        let id = id.borrow();
        match start {
            Start::Earliest => Ok(self.head(id).await?.retained_offset),
            Start::Latest => Ok(self.head(id).await?.tail_offset),
            Start::Timestamp(ms) => self.offset_at(id, ms).await,
            Start::After(offset) => {
                let head = self.head(id).await?;
                let from = offset.saturating_add(1).max(head.retained_offset);
                if from >= head.tail_offset {
                    return Ok(head.tail_offset);
                }
                let first = self.read(Read::new(id.clone()).offset(from).max_len(1).records(true)).await?;
                Ok(first.offset)
            }
        }
    }

    /// A stream's metadata; never renews a TTL.
    pub async fn head(&self, id: impl Borrow<StreamId>) -> Result<HeadReply> {
        let id = id.borrow().clone();
        let placement = self.locate(&id);
        self.call(placement, calls::Head { id, stale: false }).await
    }

    /// A stream's metadata as this node's replica holds it, without a
    /// quorum round: on a replicated node, leader or follower, possibly
    /// behind the leader (never ahead of what was committed), the
    /// counterpart of [`Read::allow_stale`]. On a single node it is
    /// [`Engine::head`].
    pub async fn head_stale(&self, id: impl Borrow<StreamId>) -> Result<HeadReply> {
        let id = id.borrow().clone();
        let placement = self.locate(&id);
        self.call(placement, calls::Head { id, stale: true }).await
    }

    /// Closes a stream (idempotent).
    pub async fn close(&self, id: impl Borrow<StreamId>) -> Result<CloseReply> {
        self.close_with(Close::new(id.borrow().clone())).await
    }

    /// Closes a stream as a producer or with a `stream_seq`.
    pub async fn close_with(&self, req: Close) -> Result<CloseReply> {
        let placement = self.locate(&req.id);
        self.call(placement, req).await
    }

    /// Deletes a stream.
    pub async fn delete(&self, id: impl Borrow<StreamId>) -> Result<()> {
        let id = id.borrow().clone();
        let placement = self.locate(&id);
        self.call(placement, calls::Delete(id)).await?;
        // A deleted fork owes its source an unpin.
        self.kick_fork_keeper();
        Ok(())
    }

    /// Replaces a stream's attributes (a JSON object of at most 16 KiB).
    pub async fn set_attrs(&self, id: impl Borrow<StreamId>, json: impl Into<String>) -> Result<()> {
        let json = json.into();
        rill_shard::api::validate_attrs(&json)?;
        self.put_attrs(id.borrow().clone(), Some(json)).await
    }

    /// Removes a stream's attributes.
    pub async fn clear_attrs(&self, id: impl Borrow<StreamId>) -> Result<()> {
        self.put_attrs(id.borrow().clone(), None).await
    }

    async fn put_attrs(&self, id: StreamId, attrs: Option<String>) -> Result<()> {
        let placement = self.locate(&id);
        self.call(placement, calls::SetAttrs { id, attrs }).await
    }

    /// A stream's attributes, if any.
    pub async fn get_attrs(&self, id: impl Borrow<StreamId>) -> Result<Option<String>> {
        let id = id.borrow().clone();
        let placement = self.locate(&id);
        self.call(placement, calls::GetAttrs(id)).await
    }

    /// Stores an application snapshot of a stream at an offset.
    pub async fn publish_snapshot(&self, req: PublishSnapshot) -> Result<SnapshotReply> {
        self.check_payload(req.payload.len() as u64)?;
        let placement = self.locate(&req.id);
        self.call(placement, req).await
    }

    /// Drops history before `offset` (at most the latest snapshot's offset).
    /// Returns the retained offset.
    pub async fn advance_retention(&self, id: impl Borrow<StreamId>, offset: u64) -> Result<u64> {
        let id = id.borrow().clone();
        let placement = self.locate(&id);
        self.call(placement, calls::AdvanceRetention { id, offset }).await
    }

    /// The latest snapshot plus the bytes after it (up to the read limit;
    /// continue with `read` from `updates.next_offset`).
    pub async fn bootstrap(&self, id: impl Borrow<StreamId>) -> Result<BootstrapReply> {
        let id = id.borrow().clone();
        let placement = self.locate(&id);
        let max_len = self.inner.config.limits.group.max_read_bytes;
        self.call(placement, calls::Bootstrap { id, max_len }).await
    }

    /// Runs `make(core)` on every core's own thread and spawns the future it
    /// returns on that core's executor, detached: the hook that lets a front
    /// end (the HTTP server) run one task per core next to the groups. The
    /// tasks must end by themselves before [`Engine::shutdown`]; a core
    /// that stops drops whatever is left of them.
    pub async fn spawn_on_cores<F>(&self, make: F) -> Result<()>
    where
        F: Fn(usize) -> std::pin::Pin<Box<dyn std::future::Future<Output = ()>>> + Send + Sync + 'static,
    {
        let make = Arc::new(make);
        for (core, mailbox) in self.inner.mailboxes.iter().enumerate() {
            let make = make.clone();
            let task = CoreTask(Box::new(move || make(core)));
            mailbox.send_waiting(Mail::Spawn(task)).await?;
        }
        Ok(())
    }

    /// Stops every core cleanly: queued requests and parked readers fail
    /// with `ShuttingDown`, replies already waiting on the log are given a
    /// bounded time to complete. Later calls fail with `ShuttingDown`.
    pub async fn shutdown(&self) -> Result<()> {
        if self.inner.closed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        let mut acks = Vec::new();
        for mailbox in &self.inner.mailboxes {
            let (tx, rx) = oneshot::channel();
            if mailbox.send_waiting(Mail::Shutdown(tx)).await.is_ok() {
                acks.push(rx);
            }
        }
        for ack in acks {
            let _ = ack.await;
        }
        if !self.inner.executors.wait_stopped(DROP_STOP_TIMEOUT) {
            let late = std::io::Error::new(std::io::ErrorKind::TimedOut, "a core did not stop in time");
            return Err(Error::io("shutdown", late));
        }
        self.inner.lock.lock().take();
        Ok(())
    }
}

impl Drop for Inner {
    fn drop(&mut self) {
        if self.closed.swap(true, Ordering::AcqRel) {
            return;
        }
        for mailbox in &self.mailboxes {
            let (tx, _rx) = oneshot::channel();
            // A full mailbox is fine: the core also stops once every sender
            // is gone, right after this.
            let _ = mailbox.try_send(Mail::Shutdown(tx));
        }
        if self.executors.is_core_thread() || !self.executors.wait_stopped(DROP_STOP_TIMEOUT) {
            // A core may still write: keep the directory locked for the
            // rest of the process rather than let another engine in.
            tracing::warn!("engine dropped while a core was still running; its thread is detached");
            std::mem::forget(self.lock.lock().take());
        }
    }
}

/// Starts the fork keeper (`fork_keeper.rs`) of a freshly opened engine.
/// It holds the engine weakly: a round upgrades, runs and lets go, so the
/// keeper never keeps an engine open.
fn start_fork_keeper(inner: &Arc<Inner>) {
    let weak = Arc::downgrade(inner);
    let round = move || {
        let Some(inner) = weak.upgrade() else { return false };
        if inner.closed.load(Ordering::Acquire) {
            return false;
        }
        let engine = Engine { inner };
        if let Err(e) = futures::executor::block_on(engine.keep_forks()) {
            tracing::debug!(error = %e, "fork keeper round failed; the next round retries");
        }
        true
    };
    match crate::kick::start(round) {
        Ok(kicker) => {
            let _ = inner.fork_keeper.set(kicker);
        }
        Err(e) => {
            tracing::warn!(error = %e, "could not start the fork keeper; fork pins wait for the next open")
        }
    }
}

type Seeds = Option<Vec<rill_shard::cluster::GroupSeed>>;

/// Recovers every group's state from the data directory (checkpoints plus
/// WAL replay), consolidates the WAL into fresh checkpoints and sweeps
/// orphan pack files (SPEC §6). A replicated node's groups come from their
/// raft checkpoints and logs instead, with their seeds. Also returns the
/// first LSN the run's logs take (past every earlier one).
fn recover_states(config: &Config) -> Result<(Vec<GroupState>, Seeds, u64)> {
    let started = Instant::now();
    let mut recovered = recovery::recover(&config.data_dir, config.groups, &config.limits.group)?;
    if config.cluster.is_some() {
        let single_node = recovered.states.iter().filter(|s| s.commit_index() > 0).count();
        if single_node > 0 && !recovered.has_raft_records() {
            // A single node's data: it is in no raft log, so no replica
            // would ever learn of it.
            return Err(rill_shard::Error::new(rill_shard::ErrorKind::ShapeMismatch {
                field: "replicated groups",
                recorded: 0,
                requested: u64::from(config.groups),
            }));
        }
        let seeded =
            rill_shard::cluster::seed_groups(&config.data_dir, &mut recovered, &config.limits.group)?;
        recovery::consolidate(&config.data_dir, &recovered, config.cores)?;
        tracing::info!(elapsed_ms = started.elapsed().as_millis() as u64, "replicated recovery done");
        let (states, seeds) = seeded.into_iter().unzip();
        return Ok((states, Some(seeds), recovered.next_lsn));
    }
    if recovered.has_raft_records() {
        // A replicated node's directory: its groups' state lives in their
        // raft logs, which a single-node engine would neither apply nor keep
        // in step with the other replicas.
        let replicated = recovered.raft.iter().filter(|records| !records.is_empty()).count();
        return Err(rill_shard::Error::new(rill_shard::ErrorKind::ShapeMismatch {
            field: "replicated groups",
            recorded: replicated as u64,
            requested: 0,
        }));
    }
    recovery::consolidate(&config.data_dir, &recovered, config.cores)?;
    tracing::info!(
        replayed = recovered.replayed_records,
        torn_tails = recovered.torn_tails.len(),
        elapsed_ms = started.elapsed().as_millis() as u64,
        "recovery done"
    );
    let packs = FsPackDir::open(rill_shard::node::cold_dir(&config.data_dir))?;
    let orphans = rill_shard::node::remove_orphan_packs(&packs, &recovered.states)?;
    if orphans > 0 {
        tracing::info!(count = orphans, "removed orphan pack files");
    }
    Ok((recovered.states, None, recovered.next_lsn))
}

/// One mailbox and one core spec per core, each core holding the groups
/// homed on it (`group % cores`, SPEC §1).
fn core_specs(
    config: &Config,
    packs: Arc<dyn PackDir>,
    states: Vec<GroupState>,
    cluster: Option<(
        rill_shard::cluster::ClusterSpec,
        Vec<rill_shard::cluster::GroupSeed>,
        Vec<rill_shard::cluster::Incoming>,
    )>,
    (core_metrics, group_metrics): (&[Arc<CoreMetrics>], &[Arc<GroupMetrics>]),
    clock: &rill_shard::node::Clock,
    log_factory: LogFactory,
) -> (Vec<MailboxSender>, Vec<CoreSpec>) {
    let mut homed: Vec<Vec<(GroupState, Arc<GroupMetrics>)>> =
        (0..config.cores).map(|_| Vec::new()).collect();
    for state in states {
        let g = state.group();
        homed[g as usize % config.cores].push((state, group_metrics[g as usize].clone()));
    }
    // A replicated core keeps every byte hot and checkpoints as raft
    // snapshots: the single-node checkpoint and cold flush are off.
    let replicated = cluster.is_some();
    let mut per_core: Vec<Option<rill_shard::cluster::CoreCluster>> =
        (0..config.cores).map(|_| None).collect();
    if let Some((spec, seeds, incoming)) = cluster {
        let mut seeds_of: Vec<Vec<rill_shard::cluster::GroupSeed>> =
            (0..config.cores).map(|_| Vec::new()).collect();
        for seed in seeds {
            seeds_of[seed.group as usize % config.cores].push(seed);
        }
        for ((slot, seeds), incoming) in per_core.iter_mut().zip(seeds_of).zip(incoming) {
            *slot = Some(rill_shard::cluster::CoreCluster {
                spec: spec.clone(),
                seeds,
                incoming,
                checkpoint_dir: recovery::checkpoint_dir(&config.data_dir),
                wal_bytes: config.checkpoint.wal_bytes,
            });
        }
    }
    let mut mailboxes = Vec::with_capacity(config.cores);
    let mut specs = Vec::with_capacity(config.cores);
    for (((core, metrics), groups), cluster) in core_metrics.iter().enumerate().zip(homed).zip(per_core) {
        let (tx, rx) =
            mailbox(core, config.limits.mailbox_capacity, config.limits.mailbox_full, metrics.clone());
        mailboxes.push(tx);
        specs.push(CoreSpec {
            core,
            groups,
            checkpoint: (!replicated).then(|| config.checkpoint.clone()),
            checkpoint_dir: recovery::checkpoint_dir(&config.data_dir),
            cold: (!replicated).then(|| config.cold.clone()),
            pack_dir: packs.clone(),
            metrics: metrics.clone(),
            limits: config.limits.clone(),
            log_factory: log_factory.clone(),
            mailbox: rx,
            clock: clock.clone(),
            cluster,
        });
    }
    (mailboxes, specs)
}

/// The default log: one WAL per core under `<data>/wal/core-<n>/`, its
/// LSNs starting at `first_lsn`.
fn wal_factory(config: &Config, first_lsn: u64) -> LogFactory {
    let data_dir = config.data_dir.clone();
    let wal = config.wal.clone();
    Arc::new(move |core| {
        let dir = wal.open_dir(&recovery::wal_dir(&data_dir, core));
        Box::new(WalLog::start_at(dir, core as u32, wal.clone(), first_lsn)) as Box<dyn LogStore>
    })
}

/// Waits for a reply, first spinning on it for up to `spin` (see
/// [`Config::reply_spin`]) so a fast reply needs no thread wake.
async fn reply<T>(mut rx: oneshot::Receiver<T>, spin: Duration) -> std::result::Result<T, oneshot::Canceled> {
    if !spin.is_zero() {
        let until = Instant::now() + spin;
        loop {
            match rx.try_recv() {
                Ok(Some(value)) => return Ok(value),
                Err(canceled) => return Err(canceled),
                Ok(None) if Instant::now() >= until => break,
                Ok(None) => std::hint::spin_loop(),
            }
        }
    }
    rx.await
}

/// The cores' clock, kept by the handle for [`Engine::now_ms`].
#[derive(Clone)]
pub(crate) struct EngineClock(pub(crate) rill_shard::node::Clock);

impl std::fmt::Debug for EngineClock {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "EngineClock({} ms)", (self.0)())
    }
}
