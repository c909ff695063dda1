//! One core's write-ahead log: group commit over segment files.
//!
//! `submit` encodes a record into the current in-memory batch, gives it the
//! next LSN and returns at once (it only waits when the batch already holds
//! `max_buffer_bytes`). A single flusher task per core takes the whole batch
//! whenever it is idle, pads it to the block size, writes it at the end of
//! the active segment, and `fdatasync`s; then everything in the batch is
//! durable. Appends that arrive while a write and sync are in flight wait in
//! the next batch, so a lone append is written at once and a burst shares
//! one sync.
//!
//! In [`Durability::Interval`] mode the flusher does not sync: a batch
//! counts as durable once written, and a timer syncs the active segment
//! every interval (`sync_loop`). There the segments are page-cache files
//! ([`super::WalConfig::segment_io`]: a buffered `pwrite` on the core by
//! default, or a shared mapping), so "written" means copied into the page
//! cache: the write's future is ready when the copy is done, with no I/O
//! and no thread hop, which a process crash does not undo; the interval
//! sync (`fdatasync` or `msync` on the blocking pool, skipped when nothing
//! was written since the last) bounds what a power cut can take. Rotation
//! still syncs the segment it closes and the new segment's header, so a
//! segment behind the last one is always whole on the disk.
//!
//! The next segment is prepared once the active one is half full
//! ([`super::device::WalDir::create_zeroed`]): zero-filled and synced for
//! DMA, so that `fdatasync` need not update sizes and extents; only
//! allocated (`fallocate`) for the page-cache files, which read as zeros.
//!
//! Invariants: LSNs are assigned in submission order and written in that
//! order; `durable_lsn` only grows and never passes the last LSN whose batch
//! was written (and, in `Fsync` mode, synced); segments are rotated only
//! between batches; a segment is removed only by `retire_through(cut)` once
//! every record in it has an LSN at or below `cut`. After an I/O error the
//! log is failed: every later call returns that error.

use std::cell::RefCell;
use std::rc::Rc;
use std::task::{Poll, Waker};
use std::time::Duration;

use super::config::{Durability, WalConfig};
use super::device::{SegmentFile, WalDir};
use super::format::{encode_record, pad_to_block, RecordKind, SegmentHeader, BLOCK};
use crate::error::{Error, Result};
use crate::local::LocalSignal;
use crate::wal::log::{EntryBody, LocalFuture, LogEntry, LogStore, Lsn};
use crate::metrics::LogStats;

struct Active {
    name: String,
    file: Rc<dyn SegmentFile>,
    offset: u64,
    last_lsn: Lsn,
}

struct Closed {
    name: String,
    last_lsn: Lsn,
    bytes: u64,
}

#[derive(Default)]
struct State {
    next_lsn: Lsn,
    durable_lsn: Lsn,
    buf: Vec<u8>,
    buf_first_lsn: Lsn,
    active: Option<Active>,
    closed: Vec<Closed>,
    next_seq: u64,
    live_bytes: u64,
    failed: Option<Error>,
    retire_request: Option<Lsn>,
    retired_through: Lsn,
    /// The next segment, created ahead of time (reading as zeros).
    spare: Spare,
    /// What the writer has done (batches, records, syncs, bytes).
    stats: LogStats,
}

/// The preallocated next segment. For DMA, writing into zeros already on
/// disk lets `fdatasync` skip the file-size and extent updates an appending
/// write needs (about a third of the sync's latency on ext4); the
/// page-cache files are only allocated, their syncs run once an interval.
#[derive(Default)]
enum Spare {
    #[default]
    None,
    /// Being created with this sequence number.
    Preparing,
    Ready {
        seq: u64,
        name: String,
        file: Rc<dyn SegmentFile>,
    },
}

struct Inner {
    core: u32,
    config: WalConfig,
    dir: Rc<dyn WalDir>,
    state: RefCell<State>,
    flusher: LocalSignal,
    preparer: LocalSignal,
    waiters: RefCell<Vec<Waker>>,
    scratch: RefCell<Vec<u8>>,
}

/// A core's WAL; a [`LogStore`].
pub struct WalLog {
    inner: Rc<Inner>,
    tasks: Vec<glommio::task::JoinHandle<()>>,
}

impl std::fmt::Debug for WalLog {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let st = self.inner.state.borrow();
        f.debug_struct("WalLog")
            .field("core", &self.inner.core)
            .field("next_lsn", &st.next_lsn)
            .field("durable_lsn", &st.durable_lsn)
            .finish_non_exhaustive()
    }
}

impl Drop for WalLog {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.cancel();
        }
    }
}

impl WalLog {
    /// Starts a WAL in an empty directory, its first record at LSN 1.
    /// Must run inside the core's executor (it spawns the flusher task).
    pub fn start(dir: Rc<dyn WalDir>, core: u32, config: WalConfig) -> WalLog {
        WalLog::start_at(dir, core, config, 1)
    }

    /// [`WalLog::start`] with the first record at LSN `first_lsn` (at least
    /// 1): a run continues the LSNs of the one before, which raft log files
    /// refer to (`wal/raft_file.rs`).
    pub fn start_at(dir: Rc<dyn WalDir>, core: u32, config: WalConfig, first_lsn: Lsn) -> WalLog {
        let first_lsn = first_lsn.max(1);
        let state = State {
            next_lsn: first_lsn,
            durable_lsn: first_lsn - 1,
            retired_through: first_lsn - 1,
            next_seq: 1,
            ..State::default()
        };
        let inner = Rc::new(Inner {
            core,
            config,
            dir,
            state: RefCell::new(state),
            flusher: LocalSignal::default(),
            preparer: LocalSignal::default(),
            waiters: RefCell::new(Vec::new()),
            scratch: RefCell::new(Vec::new()),
        });
        let mut tasks = Vec::new();
        let flusher = inner.clone();
        tasks.push(glommio::spawn_local(async move { flusher.flush_loop().await }).detach());
        let preparer = inner.clone();
        tasks.push(glommio::spawn_local(async move { preparer.spare_loop().await }).detach());
        if let Durability::Interval(every) = inner.config.durability {
            let syncer = inner.clone();
            tasks.push(glommio::spawn_local(async move { syncer.sync_loop(every).await }).detach());
        }
        WalLog { inner, tasks }
    }
}

impl Inner {
    fn wake_all(&self) {
        for w in self.waiters.borrow_mut().drain(..) {
            w.wake();
        }
    }

    fn fail(&self, err: Error) {
        tracing::error!(core = self.core, error = %err, "write-ahead log failed");
        self.state.borrow_mut().failed.get_or_insert(err);
        self.wake_all();
    }

    /// Waits until `ready` says so, re-checking whenever the log moves.
    async fn wait(&self, mut ready: impl FnMut(&State) -> Option<Result<()>>) -> Result<()> {
        std::future::poll_fn(|cx| {
            let st = self.state.borrow();
            if let Some(err) = &st.failed {
                return Poll::Ready(Err(err.clone()));
            }
            match ready(&st) {
                Some(r) => Poll::Ready(r),
                None => {
                    self.waiters.borrow_mut().push(cx.waker().clone());
                    Poll::Pending
                }
            }
        })
        .await
    }

    async fn flush_loop(self: Rc<Self>) {
        loop {
            self.flusher
                .wait_until(|| {
                    let st = self.state.borrow();
                    (!st.buf.is_empty() || st.retire_request.is_some()).then_some(())
                })
                .await;
            if self.state.borrow().failed.is_some() {
                return;
            }
            let has_batch = !self.state.borrow().buf.is_empty();
            if has_batch {
                if let Err(err) = self.flush_batch().await {
                    return self.fail(err);
                }
            }
            let request = self.state.borrow_mut().retire_request.take();
            if let Some(cut) = request {
                if let Err(err) = self.retire(cut).await {
                    return self.fail(err);
                }
            }
        }
    }

    /// Writes (and in `Fsync` mode syncs) the current batch.
    async fn flush_batch(&self) -> Result<()> {
        let (mut batch, first_lsn, last_lsn) = {
            let mut st = self.state.borrow_mut();
            let batch = std::mem::take(&mut st.buf);
            (batch, st.buf_first_lsn, st.next_lsn - 1)
        };
        self.wake_all(); // submitters waiting for buffer space
        pad_to_block(&mut batch);
        let len = batch.len() as u64;
        let rotate = match &self.state.borrow().active {
            None => true,
            Some(a) => a.offset + len > self.config.segment_bytes && a.offset > BLOCK as u64,
        };
        if rotate {
            self.rotate(first_lsn).await?;
        }
        let (file, offset) = {
            let st = self.state.borrow();
            let active = st.active.as_ref().expect("a segment is active after rotation");
            (active.file.clone(), active.offset)
        };
        file.write_at(batch, offset).await?;
        if crate::planted::active(crate::planted::Bug::DurableBeforeSync) {
            self.state.borrow_mut().durable_lsn = last_lsn;
            self.wake_all();
        }
        if self.config.durability == Durability::Fsync {
            let synced = file.sync().await;
            if synced.is_err() && crate::planted::active(crate::planted::Bug::AckAfterFailedFsync) {
                self.state.borrow_mut().durable_lsn = last_lsn;
                self.wake_all();
            }
            synced?;
        }
        let mut st = self.state.borrow_mut();
        if let Some(active) = st.active.as_mut() {
            active.offset += len;
            active.last_lsn = last_lsn;
        }
        st.live_bytes += len;
        st.stats.batches += 1;
        st.stats.records += last_lsn + 1 - first_lsn;
        st.stats.bytes_written += len;
        if self.config.durability == Durability::Fsync {
            st.stats.syncs += 1;
        }
        st.durable_lsn = last_lsn;
        drop(st);
        self.wake_all();
        self.want_spare();
        Ok(())
    }

    /// Closes the active segment (synced) and opens a new one whose records
    /// start at `first_lsn`.
    async fn rotate(&self, first_lsn: Lsn) -> Result<()> {
        let old = self.state.borrow_mut().active.take();
        if let Some(old) = old {
            old.file.sync().await?;
            let closed = Closed { name: old.name, last_lsn: old.last_lsn, bytes: old.offset };
            self.state.borrow_mut().closed.push(closed);
        }
        // Take the preallocated spare (waiting for it if it is being made:
        // a spare must never end up older than the active segment).
        self.wait(|st| (!matches!(st.spare, Spare::Preparing)).then_some(Ok(()))).await?;
        let spare = std::mem::take(&mut self.state.borrow_mut().spare);
        let (seq, name, file) = match spare {
            Spare::Ready { seq, name, file } => (seq, name, file),
            _ => {
                let seq = {
                    let mut st = self.state.borrow_mut();
                    st.next_seq += 1;
                    st.next_seq - 1
                };
                let name = segment_name(seq);
                let file = self.dir.create(&name).await?;
                (seq, name, file)
            }
        };
        let header = SegmentHeader::new(self.core, seq, first_lsn).encode();
        file.write_at(header, 0).await?;
        // The header must be durable before any record of the segment can
        // be: records behind a missing header would read as corruption.
        file.sync().await?;
        let mut st = self.state.borrow_mut();
        st.live_bytes += BLOCK as u64;
        st.active = Some(Active { name, file, offset: BLOCK as u64, last_lsn: first_lsn.saturating_sub(1) });
        Ok(())
    }

    /// Starts preparing the spare once the active segment is half full (a
    /// log that never fills a segment never pays for one).
    fn want_spare(&self) {
        let mut st = self.state.borrow_mut();
        let half_full = st.active.as_ref().is_some_and(|a| a.offset >= self.config.segment_bytes / 2);
        if half_full && matches!(st.spare, Spare::None) {
            st.spare = Spare::Preparing;
            drop(st);
            self.preparer.notify();
        }
    }

    /// Prepares the next segment when asked (see `want_spare`): creates
    /// it under the next sequence number, reading as zeros up to the
    /// segment size (`WalDir::create_zeroed`). A segment of zeros without a
    /// header reads back as a torn header, which recovery accepts for a
    /// core's last segment, and a spare is always the last: rotation waits
    /// for one being prepared.
    async fn spare_loop(self: Rc<Self>) {
        loop {
            self.preparer
                .wait_until(|| matches!(self.state.borrow().spare, Spare::Preparing).then_some(()))
                .await;
            let seq = {
                let mut st = self.state.borrow_mut();
                st.next_seq += 1;
                st.next_seq - 1
            };
            let name = segment_name(seq);
            match self.prepare(&name).await {
                Ok(file) => self.state.borrow_mut().spare = Spare::Ready { seq, name, file },
                Err(err) => {
                    tracing::warn!(core = self.core, error = %err, "could not preallocate a WAL segment");
                    let _ = self.dir.remove(&name).await;
                    self.state.borrow_mut().spare = Spare::None;
                }
            }
            self.wake_all();
        }
    }

    async fn prepare(&self, name: &str) -> Result<Rc<dyn SegmentFile>> {
        let size = self.config.segment_bytes.div_ceil(BLOCK as u64) * BLOCK as u64;
        self.dir.create_zeroed(name, size).await
    }

    /// Removes every segment whose records all have LSNs at or below `cut`.
    async fn retire(&self, cut: Lsn) -> Result<()> {
        let mut doomed = Vec::new();
        {
            let mut st = self.state.borrow_mut();
            let mut freed = 0;
            st.closed.retain(|c| {
                let gone = c.last_lsn <= cut;
                if gone {
                    doomed.push(c.name.clone());
                    freed += c.bytes;
                }
                !gone
            });
            let active_covered = st.active.as_ref().is_some_and(|a| a.last_lsn <= cut);
            if active_covered {
                let a = st.active.take().expect("checked above");
                doomed.push(a.name);
                freed += a.offset;
            }
            st.live_bytes -= freed;
        }
        for name in doomed {
            self.dir.remove(&name).await?;
        }
        self.state.borrow_mut().retired_through = cut;
        self.wake_all();
        Ok(())
    }

    async fn sync_loop(self: Rc<Self>, every: Duration) {
        loop {
            glommio::timer::sleep(every).await;
            let file = self.state.borrow().active.as_ref().map(|a| a.file.clone());
            if let Some(file) = file {
                if let Err(err) = file.sync().await {
                    return self.fail(err);
                }
                self.state.borrow_mut().stats.syncs += 1;
            }
        }
    }
}

/// File name of segment `seq`.
pub fn segment_name(seq: u64) -> String {
    format!("{seq:016x}.wal")
}

impl LogStore for WalLog {
    fn submit<'a>(&'a self, entry: LogEntry<'a>) -> LocalFuture<'a, Result<Lsn>> {
        Box::pin(async move {
            let inner = &self.inner;
            let limit = inner.config.buffer_bytes;
            inner.wait(|st| (st.buf.len() < limit).then_some(Ok(()))).await?;
            let mut scratch = inner.scratch.borrow_mut();
            let (kind, body): (RecordKind, &[u8]) = match entry.body {
                EntryBody::Command(cmd) => {
                    scratch.clear();
                    let encoded = postcard::to_io(cmd, &mut *scratch);
                    encoded.map_err(|e| Error::corrupted(format!("command does not encode: {e}")))?;
                    (RecordKind::Command, &scratch[..])
                }
                EntryBody::InstallRef(ref digest) => (RecordKind::InstallRef, &digest[..]),
                EntryBody::Raft(body) => (RecordKind::Raft, body),
            };
            let mut st = inner.state.borrow_mut();
            let lsn = st.next_lsn;
            let first_in_batch = st.buf.is_empty();
            // A body the format cannot frame is refused before it takes an
            // LSN: the log stays as it was.
            encode_record(&mut st.buf, lsn, entry.group, entry.index, kind, body)?;
            st.next_lsn += 1;
            if first_in_batch {
                st.buf_first_lsn = lsn;
            }
            drop(st);
            inner.flusher.notify();
            Ok(lsn)
        })
    }

    fn durable_lsn(&self) -> Lsn {
        self.inner.state.borrow().durable_lsn
    }

    fn wait_durable(&self, lsn: Lsn) -> LocalFuture<'_, Result<()>> {
        Box::pin(self.inner.wait(move |st| (st.durable_lsn >= lsn).then_some(Ok(()))))
    }

    fn last_lsn(&self) -> Lsn {
        self.inner.state.borrow().next_lsn - 1
    }

    fn retire_through(&self, cut: Lsn) -> LocalFuture<'_, Result<()>> {
        Box::pin(async move {
            {
                let mut st = self.inner.state.borrow_mut();
                let merged = st.retire_request.map_or(cut, |c| c.max(cut));
                st.retire_request = Some(merged);
            }
            self.inner.flusher.notify();
            self.inner.wait(move |st| (st.retired_through >= cut).then_some(Ok(()))).await
        })
    }

    fn live_bytes(&self) -> u64 {
        self.inner.state.borrow().live_bytes
    }

    fn stats(&self) -> LogStats {
        self.inner.state.borrow().stats
    }
}
