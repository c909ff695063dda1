//! Live subscribe (SPEC §2 "Live subscribe"): an async stream of a
//! stream's records from a start position, catching up on what is stored,
//! then following the tail as records arrive, for push consumers and the
//! HTTP server's event streams.
//!
//! A [`Subscription`] owns no state on the engine: it is a loop of record
//! reads that park at the tail ([`Engine::wait_read_records`]), so it costs
//! nothing while idle but one parked waiter on the stream's core, and
//! dropping it at any point is clean.
//!
//! Invariants it keeps:
//! - Records come out in stream order, each exactly once, with no gap: the
//!   next read starts where the previous reply ended, and a reply that
//!   does not start there (retention passed the subscription) ends it with
//!   `OffsetGone` instead of skipping.
//! - A temporary refusal (`Overloaded`, `LiveReadBackpressure`, ...) is
//!   retried after a backoff on the engine's timer (10 ms doubling to 1 s);
//!   any other error is yielded once, and the subscription ends.
//! - The subscription ends (yields `None`) at the tail of a closed stream,
//!   or after [`Subscribe::idle_timeout`] with no record; once it has
//!   ended it stays ended.

use std::borrow::Borrow;
use std::collections::VecDeque;
use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll};
use std::time::{Duration, Instant};

use futures::Stream;
use rill_shard::api::{Read, Record, RecordsReply, Start, DEFAULT_READ_MAX_LEN};
use rill_shard::{Error, ErrorClass, ErrorKind, Result, StreamId};

use crate::Engine;

/// The longest one read parks at the tail before it asks again.
const PARK: Duration = Duration::from_secs(30);
/// Backoff after a temporary refusal: first, and at most.
const BACKOFF_FIRST: Duration = Duration::from_millis(10);
const BACKOFF_MAX: Duration = Duration::from_secs(1);

/// A request to follow a stream's records (see [`Engine::subscribe`]).
#[derive(Clone, Debug)]
pub struct Subscribe {
    id: StreamId,
    start: Start,
    max_batch_bytes: usize,
    idle_timeout: Option<Duration>,
}

impl Subscribe {
    /// Follows `id` from its oldest retained record ([`Start::Earliest`]).
    pub fn new(id: impl Borrow<StreamId>) -> Self {
        Subscribe {
            id: id.borrow().clone(),
            start: Start::Earliest,
            max_batch_bytes: DEFAULT_READ_MAX_LEN,
            idle_timeout: None,
        }
    }
    /// Where to start: [`Start::Earliest`] (the default), [`Start::Latest`]
    /// (only records appended from now on), [`Start::Timestamp`] or
    /// [`Start::After`], resolved once, when the subscription first polls
    /// (a position below the retained start starts there, as everywhere).
    pub fn start(mut self, start: Start) -> Self {
        self.start = start;
        self
    }
    /// Resumes after the record at `offset`, the id of the last event a
    /// client handled (an SSE `Last-Event-ID`): [`Start::After`].
    pub fn last_event_id(self, offset: u64) -> Self {
        self.start(Start::After(offset))
    }
    /// The most bytes one read fetches (clamped by the engine's
    /// `max_read_bytes`; a record larger than this still comes whole).
    pub fn max_batch_bytes(mut self, bytes: usize) -> Self {
        self.max_batch_bytes = bytes.max(1);
        self
    }
    /// Ends the subscription (it yields `None`) once no record has arrived
    /// for this long; by default it follows the tail until the stream is
    /// closed or the subscription is dropped.
    pub fn idle_timeout(mut self, timeout: Duration) -> Self {
        self.idle_timeout = Some(timeout);
        self
    }
}

/// Where the next read starts.
#[derive(Clone, Copy, Debug)]
enum Position {
    Unresolved(Start),
    At(u64),
}

type Fetch = Pin<Box<dyn Future<Output = Result<(u64, RecordsReply)>> + Send>>;

/// Records of one stream, in order, caught up and then live (see
/// [`Engine::subscribe`]). A [`futures::Stream`] of `Result<Record>`;
/// [`Subscription::next`] needs no trait in scope.
pub struct Subscription {
    engine: Engine,
    req: Subscribe,
    position: Position,
    ready: VecDeque<Record>,
    fetch: Option<Fetch>,
    last_record: Instant,
    closed: bool,
    ended: bool,
}

impl std::fmt::Debug for Subscription {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Subscription")
            .field("id", &self.req.id)
            .field("position", &self.position)
            .field("buffered", &self.ready.len())
            .field("closed", &self.closed)
            .field("ended", &self.ended)
            .finish()
    }
}

impl Engine {
    /// Follows a stream's records (SPEC §2 "Live subscribe"): every record
    /// from the start position in order, then each new one as it is
    /// appended, until the stream is closed at its tail (the subscription
    /// ends), deleted or passed by retention (a typed error, then the end).
    /// Nothing is read before the first poll.
    ///
    /// ```no_run
    /// # async fn demo(engine: rill::Engine, id: rill::StreamId) -> Result<(), rill::Error> {
    /// use rill::Subscribe;
    /// let mut live = engine.subscribe(Subscribe::new(&id).last_event_id(41));
    /// while let Some(record) = live.next().await {
    ///     let record = record?;
    ///     println!("{} at {}: {} bytes", record.offset, record.timestamp_ms, record.payload.len());
    /// }
    /// # Ok(()) }
    /// ```
    pub fn subscribe(&self, req: Subscribe) -> Subscription {
        Subscription {
            engine: self.clone(),
            position: Position::Unresolved(req.start),
            req,
            ready: VecDeque::new(),
            fetch: None,
            last_record: Instant::now(),
            closed: false,
            ended: false,
        }
    }
}

impl Subscription {
    /// The next record, or `None` once the subscription has ended.
    pub async fn next(&mut self) -> Option<Result<Record>> {
        std::future::poll_fn(|cx| Pin::new(&mut *self).poll_next(cx)).await
    }

    /// The offset the next read starts at, once resolved: where a new
    /// subscription would pick up after the records handed out so far
    /// (records already fetched but not yet handed out are not counted).
    pub fn position(&self) -> Option<u64> {
        let fetched = match self.position {
            Position::At(offset) => offset,
            Position::Unresolved(_) => return None,
        };
        Some(self.ready.front().map_or(fetched, |r| r.offset))
    }

    /// True once the subscription has reached the tail of a closed stream.
    pub fn is_closed(&self) -> bool {
        self.closed
    }

    /// A read from the current position, retrying temporary refusals.
    fn start_fetch(&self) -> Fetch {
        let engine = self.engine.clone();
        let id = self.req.id.clone();
        let max = self.req.max_batch_bytes;
        let park = match self.req.idle_timeout {
            Some(idle) => idle.saturating_sub(self.last_record.elapsed()).min(PARK),
            None => PARK,
        };
        let position = self.position;
        Box::pin(async move {
            let mut backoff = BACKOFF_FIRST;
            loop {
                let attempt = async {
                    let offset = match position {
                        Position::At(offset) => offset,
                        Position::Unresolved(start) => engine.start_offset(&id, start).await?,
                    };
                    let read = Read::new(id.clone()).offset(offset).max_len(max);
                    let reply = engine.wait_read_records(read, park).await?;
                    Ok::<_, Error>((offset, reply))
                };
                match attempt.await {
                    Err(e) if e.class() == ErrorClass::Temporary => {
                        engine.sleep(backoff).await?;
                        backoff = (backoff * 2).min(BACKOFF_MAX);
                    }
                    other => return other,
                }
            }
        })
    }

    /// Takes a reply read at `offset` in; false when the subscription ends.
    fn take(&mut self, offset: u64, reply: RecordsReply) -> Result<bool> {
        if let Some(first) = reply.records.first() {
            // Reads start where the last reply ended, at a record boundary,
            // so a first record elsewhere means retention passed us.
            if first.offset != offset && matches!(self.position, Position::At(_)) {
                let kind = ErrorKind::OffsetGone { offset, retained: first.offset };
                return Err(Error::new(kind));
            }
            self.last_record = Instant::now();
        }
        self.position = Position::At(reply.next_offset);
        let empty = reply.records.is_empty();
        self.ready.extend(reply.records);
        if empty && reply.closed {
            self.closed = true;
            return Ok(false);
        }
        let idle = self.req.idle_timeout.is_some_and(|idle| self.last_record.elapsed() >= idle);
        Ok(!(empty && reply.up_to_date && idle))
    }
}

impl Stream for Subscription {
    type Item = Result<Record>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        let this = &mut *self;
        loop {
            if let Some(record) = this.ready.pop_front() {
                return Poll::Ready(Some(Ok(record)));
            }
            if this.ended {
                return Poll::Ready(None);
            }
            if this.fetch.is_none() {
                this.fetch = Some(this.start_fetch());
            }
            let fetch = this.fetch.as_mut().expect("a fetch was just set");
            let done = match fetch.as_mut().poll(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(done) => done,
            };
            this.fetch = None;
            match done.and_then(|(offset, reply)| this.take(offset, reply)) {
                Ok(true) => {}
                Ok(false) => this.ended = true,
                Err(e) => {
                    this.ended = true;
                    this.ready.clear();
                    return Poll::Ready(Some(Err(e)));
                }
            }
        }
    }
}
