//! The workloads. Each module documents exactly what it measures; the
//! suite ([`crate::suite`]) decides which cells run, in what order, against
//! which peers.
//!
//! * [`ingest`]: A (one stream) and B (many streams), closed loop; rill's
//!   requests are made and checked by [`calls`].
//! * [`openloop`]: C, latency at fixed offered rates.
//! * [`tail`]: D, live readers following one stream.
//! * [`cold`]: E, reads of data that was flushed to packs, cache dropped.
//! * [`idem`]: F, idempotent producers with duplicate retries.
//! * [`recovery`]: G, kill -9 a writer process, reopen, check.
//! * [`consume`]: H, coordinated readers delivering and acking records.
//! * [`queue`]: I, competing queue workers receiving and acking, and
//!   fan-out to several queue groups.

pub mod calls;
pub mod cold;
pub mod consume;
pub mod idem;
pub mod ingest;
pub mod openloop;
pub mod queue;
pub mod recovery;
pub mod tail;
