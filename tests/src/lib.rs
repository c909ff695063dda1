//! Shared helpers for the integration tests: engines in temporary
//! directories, a controllable clock, and a log store whose submissions for
//! one chosen group block until the test opens a gate (the "slow
//! operation" of a single group).

pub mod crash;
pub mod lazyfs;

use std::sync::atomic::{AtomicBool, AtomicU32, AtomicU64, Ordering::SeqCst};
use std::sync::Arc;
use std::task::{Poll, Waker};

use parking_lot::Mutex;
use rill::seams::{Clock, LocalFuture, LogEntry, LogFactory, LogStore, Lsn};
use rill::{Config, Engine, StreamId};

/// An engine in a fresh temporary directory (kept alive with the engine).
#[derive(Debug)]
pub struct TestEngine {
    pub engine: Engine,
    pub dir: tempfile::TempDir,
}

impl std::ops::Deref for TestEngine {
    type Target = Engine;
    fn deref(&self) -> &Engine {
        &self.engine
    }
}

/// A config on a fresh temporary directory with `cores` cores and `groups`
/// groups; threads are pinned as in production.
pub fn config(cores: usize, groups: u32) -> (Config, tempfile::TempDir) {
    let dir = tempfile::tempdir().expect("temp dir");
    let config = Config::new(dir.path()).cores(cores).groups(groups);
    (config, dir)
}

/// Opens an engine on a fresh temporary directory.
pub fn open(cores: usize, groups: u32) -> TestEngine {
    open_with(cores, groups, |c| c)
}

/// Opens an engine after letting the caller adjust the config.
pub fn open_with(cores: usize, groups: u32, adjust: impl FnOnce(Config) -> Config) -> TestEngine {
    let (config, dir) = config(cores, groups);
    let engine = Engine::open(adjust(config)).expect("engine opens");
    TestEngine { engine, dir }
}

/// A stream id that is known to be valid.
pub fn sid(bucket: &str, stream: &str) -> StreamId {
    StreamId::new(bucket, stream).expect("valid test name")
}

/// Finds a stream name in `bucket` whose placement satisfies `want`.
pub fn find_stream(engine: &Engine, bucket: &str, want: impl Fn(rill::Placement) -> bool) -> StreamId {
    (0..100_000)
        .map(|i| sid(bucket, &format!("s{i}")))
        .find(|id| want(engine.locate(id)))
        .expect("some name lands where wanted")
}

/// A clock the test moves by hand (Unix milliseconds).
#[derive(Clone, Debug)]
pub struct ManualClock(pub Arc<AtomicU64>);

impl ManualClock {
    pub fn new(start_ms: u64) -> Self {
        ManualClock(Arc::new(AtomicU64::new(start_ms)))
    }
    pub fn advance_ms(&self, ms: u64) {
        self.0.fetch_add(ms, SeqCst);
    }
    pub fn now_ms(&self) -> u64 {
        self.0.load(SeqCst)
    }
    pub fn as_clock(&self) -> Clock {
        let inner = self.0.clone();
        Arc::new(move || inner.load(SeqCst))
    }
}

/// A gate shared by the test and every core's [`GatedLog`]: while closed,
/// submissions of `blocked_group` wait.
#[derive(Debug, Default)]
pub struct Gate {
    /// When true, the gate holds durability of every entry (submissions go
    /// through) instead of submissions of one group.
    hold_durability: bool,
    blocked_group: AtomicU32,
    open: AtomicBool,
    waiting: AtomicU64,
    wakers: Mutex<Vec<Waker>>,
}

impl Gate {
    /// A closed gate in front of `group`.
    pub fn closed_for(group: u32) -> Arc<Gate> {
        Arc::new(Gate { blocked_group: AtomicU32::new(group), ..Gate::default() })
    }

    /// A closed gate that lets every submission through but keeps all of
    /// them from becoming durable.
    pub fn holding_durability() -> Arc<Gate> {
        Arc::new(Gate { hold_durability: true, blocked_group: AtomicU32::new(u32::MAX), ..Gate::default() })
    }

    async fn pass(&self) {
        if self.open.load(SeqCst) {
            return;
        }
        self.waiting.fetch_add(1, SeqCst);
        std::future::poll_fn(|cx| {
            if self.open.load(SeqCst) {
                return Poll::Ready(());
            }
            self.wakers.lock().push(cx.waker().clone());
            if self.open.load(SeqCst) {
                Poll::Ready(())
            } else {
                Poll::Pending
            }
        })
        .await;
        self.waiting.fetch_sub(1, SeqCst);
    }

    pub fn open(&self) {
        self.open.store(true, SeqCst);
        for w in self.wakers.lock().drain(..) {
            w.wake();
        }
    }

    /// Closes an opened gate again: what was durable stays durable.
    pub fn close(&self) {
        self.open.store(false, SeqCst);
    }

    /// Submissions currently held at the gate.
    pub fn waiting(&self) -> u64 {
        self.waiting.load(SeqCst)
    }

    /// A log factory whose stores stop at this gate.
    pub fn log_factory(self: &Arc<Self>) -> LogFactory {
        let gate = self.clone();
        Arc::new(move |_core| {
            Box::new(GatedLog { gate: gate.clone(), next: Default::default(), durable: Default::default() })
                as Box<dyn LogStore>
        })
    }
}

/// An in-memory log whose submissions for the gate's group wait for the
/// gate to open; everything else is durable at once.
#[derive(Debug)]
pub struct GatedLog {
    gate: Arc<Gate>,
    next: std::cell::Cell<Lsn>,
    /// Last entry submitted while the gate was open (durable for good).
    durable: std::cell::Cell<Lsn>,
}

impl LogStore for GatedLog {
    fn submit<'a>(&'a self, entry: LogEntry<'a>) -> LocalFuture<'a, rill::Result<Lsn>> {
        let gate = self.gate.clone();
        let blocked = entry.group == gate.blocked_group.load(SeqCst);
        Box::pin(async move {
            if blocked {
                gate.pass().await;
            }
            let lsn = self.next.get() + 1;
            self.next.set(lsn);
            if gate.open.load(SeqCst) {
                self.durable.set(lsn);
            }
            Ok(lsn)
        })
    }

    fn last_lsn(&self) -> Lsn {
        self.next.get()
    }

    fn durable_lsn(&self) -> Lsn {
        if self.gate.hold_durability && !self.gate.open.load(SeqCst) {
            self.durable.get()
        } else {
            self.durable.set(self.next.get());
            self.next.get()
        }
    }

    fn wait_durable(&self, lsn: Lsn) -> LocalFuture<'_, rill::Result<()>> {
        let gate = self.gate.clone();
        Box::pin(async move {
            if gate.hold_durability && lsn > self.durable.get() {
                gate.pass().await;
                self.durable.set(self.next.get());
            }
            Ok(())
        })
    }
}
