//! The reference model of a group, for property tests and simulation.
