//! `rill-shard`: one core's world.
//!
//! The crate is three layers, each a folder, with a few leaves below them
//! (imports only ever point down):
//!
//! * [`runtime`]: the glommio side of a core: mailbox, dispatcher, group
//!   tasks, the commit queue, checkpoints and the cold worker.
//! * [`packs`]: the cold tier's synchronous file work (writing, reading,
//!   removing and checking pack files).
//! * [`wal`]: the log seam and the write-ahead log: record format, devices,
//!   writer, recovery.
//! * [`protocol`]: the runtime's protocols (mutation admission, checkpoint
//!   runs, cold jobs) as sans-IO step machines the runtime and the
//!   simulation both drive.
//! * [`state`]: the pure group state machine and its vocabulary (API
//!   values, logged commands, names, integrity set-sums).
//! * leaves: [`error`], [`placement`], [`local`] (the single-threaded
//!   primitives every task uses), [`limits`], [`metrics`].
//!
//! Nothing here knows about other cores; the `rill` crate wires cores
//! together.

pub mod error;
pub mod limits;
pub mod local;
pub mod metrics;
pub mod packs;
pub mod placement;
#[doc(hidden)]
pub mod planted;
pub mod protocol;
pub mod runtime;
pub mod state;
pub mod wal;

pub use error::{Error, ErrorClass, ErrorCode, ErrorKind, Result};
pub use placement::Placement;
pub use state::name::StreamId;
