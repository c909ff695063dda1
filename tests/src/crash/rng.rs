//! Deterministic randomness for the crash and power-loss workloads: the
//! project's one generator (`rill_shard::rng`, SplitMix64, fully specified
//! there) and its tuple hash. Invariant: every random choice of the
//! workload (scripts, payloads, the parent's delays) is a pure function of
//! the seed and of the domain tag and numbers it is mixed with.

pub use rill_shard::rng::{mix, Rng};
