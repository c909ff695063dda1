//! The fork keeper: delivers what groups owe each other for forks (the
//! outbox of ARCHITECTURE.md "Forks across groups").
//!
//! A group's outbox holds a pin request from a fork's creation until the
//! source answered, and an unpin from a fork's removal (delete, expiry,
//! purge, or a soft-deleted fork's last pin going) until the source logged
//! it. [`Engine::fork`] delivers its own pin; everything else, and anything
//! a crash or shutdown interrupted, is the keeper's: one thread per engine
//! (`kick.rs`) that wakes on a kick (after a delete) or every 200 ms,
//! looks at each group's outbox gauge, and for a group that owes something
//! reads the outbox, waits until the group's log is durable up to it (so
//! nothing is sent for a removal a crash could still undo), and delivers
//! each entry: the source's group logs the pin or unpin, then the fork's
//! group logs the answer. Every step is idempotent by the fork's token, so
//! delivering twice is harmless.
//!
//! The keeper holds the engine weakly: it never keeps an engine open, and
//! it stops when the engine is shut down or dropped.

use std::sync::atomic::Ordering;

use rill_shard::api::ForkOwed;
use rill_shard::node::calls;
use rill_shard::{Placement, Result};

use crate::engine::Engine;

impl Engine {
    /// One keeper round: every group whose outbox gauge is above zero.
    pub(crate) async fn keep_forks(&self) -> Result<()> {
        let owing: Vec<u32> = self
            .group_metrics()
            .iter()
            .enumerate()
            .filter(|(_, m)| m.fork_outbox.load(Ordering::Relaxed) > 0)
            .map(|(group, _)| group as u32)
            .collect();
        for group in owing {
            let placement = Placement { core: self.core_of_group(group), group };
            // The outbox is read and delivered under the pin lock (see
            // `Engine::fork`): an unpin read here was owed after any pin
            // a fork call could still send.
            let _held = self.inner.fork_pins.lock().await;
            let owed = self.call(placement, calls::ForkOutbox).await?;
            if owed.is_empty() {
                continue;
            }
            self.call(placement, calls::Barrier).await?;
            for entry in owed {
                self.deliver(entry).await?;
            }
        }
        Ok(())
    }

    /// Delivers one outbox entry and logs its answer on the fork's group.
    pub(crate) async fn deliver(&self, entry: ForkOwed) -> Result<()> {
        match entry {
            ForkOwed::Pin { fork, token, source, source_incarnation } => {
                let pin =
                    calls::ForkPin { source: source.clone(), source_incarnation, token, fork: fork.clone() };
                let pinned = self.call(self.locate(&source), pin).await?;
                self.call(self.locate(&fork), calls::ForkPinAck { fork, token, pinned }).await?;
            }
            ForkOwed::Unpin { fork, token, source } => {
                let unpin = calls::ForkUnpin { source: source.clone(), token, fork: fork.clone() };
                self.call(self.locate(&source), unpin).await?;
                self.call(self.locate(&fork), calls::ForkOutboxDone { fork, token }).await?;
            }
        }
        Ok(())
    }

    /// Wakes the keeper (a removal may have left an unpin to deliver).
    pub(crate) fn kick_fork_keeper(&self) {
        if let Some(kicker) = self.inner.fork_keeper.get() {
            kicker.kick();
        }
    }
}

#[cfg(test)]
mod tests {
    //! The keeper's half of a fork, driven by hand: a fork whose creation
    //! stopped after its own group logged it (as a crash between the steps
    //! of [`Engine::fork`] leaves it) is pinned by the keeper, or removed
    //! when its source refuses the pin, across a restart too.

    use std::time::{Duration, Instant};

    use bytes::Bytes;
    use futures::executor::block_on;
    use rill_shard::api::{Append, Create, ForkPoint};
    use rill_shard::node::calls;
    use rill_shard::{ErrorCode, StreamId};

    use crate::{Config, Engine};

    fn id(name: &str) -> StreamId {
        StreamId::new("k", name).unwrap()
    }

    /// Logs step 3 of a fork (the fork with its copy) and nothing else.
    async fn half_fork(e: &Engine, fork: &str, source: &str, incarnation: u64) {
        let made = calls::ForkCreate {
            create: Create::new(id(fork)).content_type("text/plain"),
            start: 0,
            inherited: vec![Bytes::from_static(b"abc")],
            source: id(source),
            source_incarnation: incarnation,
            token: 42,
            point: ForkPoint::Tail,
            end: 3,
        };
        e.call(e.locate(&id(fork)), made).await.unwrap();
    }

    fn until(what: &str, mut done: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !done() {
            assert!(Instant::now() < deadline, "{what} never happened");
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// Entries owed by every group, asked of the groups themselves (the
    /// gauges are set only once a core has started its groups).
    fn owed(e: &Engine) -> usize {
        block_on(async {
            let mut owed = 0;
            for group in 0..e.groups() {
                let placement = rill_shard::Placement { core: e.core_of_group(group), group };
                owed += e.call(placement, calls::ForkOutbox).await.unwrap().len();
            }
            owed
        })
    }

    #[test]
    fn an_interrupted_fork_is_pinned_after_a_restart() {
        let dir = tempfile::tempdir().unwrap();
        let config = || Config::new(dir.path()).cores(2).groups(4);
        let e = Engine::open(config()).unwrap();
        let incarnation = block_on(async {
            e.create(Create::new(id("src")).content_type("text/plain")).await.unwrap();
            e.append(Append::new(id("src"), &b"abc"[..])).await.unwrap();
            let info = e.call(e.locate(&id("src")), calls::ForkSource(id("src"))).await.unwrap();
            half_fork(&e, "fork", "src", info.incarnation).await;
            info.incarnation
        });
        assert!(incarnation > 0);
        // Whether or not the keeper delivered the pin before the shutdown,
        // the reopened engine must end with the source pinned.
        block_on(e.shutdown()).unwrap();
        drop(e);
        let e = Engine::open(config()).unwrap();
        until("the pin's delivery", || owed(&e) == 0);
        block_on(async {
            e.delete(&id("src")).await.unwrap();
            assert_eq!(e.head(&id("src")).await.unwrap_err().code(), ErrorCode::StreamGone);
            let read = e.read(rill_shard::api::Read::new(id("fork"))).await.unwrap();
            assert_eq!(&read.payload[..], b"abc");
            e.delete(&id("fork")).await.unwrap();
        });
        until("the source's release", || {
            block_on(e.head(&id("src"))).err().map(|e| e.code()) == Some(ErrorCode::StreamNotFound)
        });
    }

    #[test]
    fn a_refused_pin_removes_the_fork() {
        let dir = tempfile::tempdir().unwrap();
        let e = Engine::open(Config::new(dir.path()).cores(2).groups(4)).unwrap();
        block_on(async {
            e.create(Create::new(id("src")).content_type("text/plain")).await.unwrap();
            // An incarnation the source never had: as if it was re-created
            // while the fork copied it.
            half_fork(&e, "fork", "src", 999_999).await;
        });
        until("the fork's removal", || {
            block_on(e.head(&id("fork"))).err().map(|e| e.code()) == Some(ErrorCode::StreamNotFound)
        });
        assert_eq!(owed(&e), 0);
        block_on(async {
            e.delete(&id("src")).await.unwrap();
            assert_eq!(e.head(&id("src")).await.unwrap_err().code(), ErrorCode::StreamNotFound);
        });
    }
}
