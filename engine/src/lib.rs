//! rill
pub use rill_shard::{Error, ErrorClass, ErrorCode, ErrorKind, Placement, StreamId};
