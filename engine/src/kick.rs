//! The fork keeper's thread (`fork_keeper.rs` says what a round does): it
//! runs a round on every kick and at least every [`KEEPER_INTERVAL`], and
//! stops when the round says the engine is gone or when the kicker (kept
//! by the engine) is dropped. A leaf: it knows nothing of the engine but
//! the round it is handed.

use std::sync::mpsc::{self, RecvTimeoutError, SyncSender};
use std::time::Duration;

/// How often the keeper runs a round without a kick.
pub(crate) const KEEPER_INTERVAL: Duration = Duration::from_millis(200);

/// Wakes the keeper thread.
#[derive(Debug)]
pub(crate) struct Kicker(SyncSender<()>);

impl Kicker {
    /// Asks for a round now (a full kick queue already asks).
    pub(crate) fn kick(&self) {
        let _ = self.0.try_send(());
    }
}

/// Starts the keeper thread; `round` runs one round and returns false once
/// the engine is gone (the thread then ends).
pub(crate) fn start(mut round: impl FnMut() -> bool + Send + 'static) -> std::io::Result<Kicker> {
    let (tx, rx) = mpsc::sync_channel(1);
    std::thread::Builder::new().name("rill-fork-keeper".into()).spawn(move || loop {
        match rx.recv_timeout(KEEPER_INTERVAL) {
            Ok(()) | Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => return,
        }
        if !round() {
            return;
        }
    })?;
    Ok(Kicker(tx))
}
