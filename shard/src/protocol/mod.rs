//! The runtime's protocols as sans-IO step machines: what a core does, in
//! which order, with every side effect named as a step the caller performs.
//!
//! * [`mutation`]: admission, then apply, then what must be logged (the
//!   front half of every mutation a group serves).
//! * [`checkpoint`]: a checkpoint run (wait for durability, write each
//!   changed group's snapshot, sync the directory, retire the log).
//! * [`pins`]: which log records each group still needs (no durable
//!   checkpoint of it holds them), so groups checkpoint one at a time and
//!   the log retires below the lowest pin.
//! * [`cold`]: a cold-tier job on one group (plan, write, commit; a
//!   durability barrier before any file is removed).
//!
//! The glommio tasks in `runtime/` are thin drivers of these machines, and
//! the simulation (`fuzz/src/sim`) steps the same machines with simulated
//! devices, crashes in between: a bug in the order of these protocols is a
//! bug the simulation can see. Nothing here performs I/O or reads a clock.

pub mod checkpoint;
pub mod cold;
pub mod mutation;
pub mod pins;
