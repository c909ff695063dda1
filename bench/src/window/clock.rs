//! The measured phase of a cell: a warm-up, then a window of fixed length.
//! Every workload stamps its completions against one [`Clock`] so that only
//! work finished inside the window counts, and the window's own counters
//! ([`crate::window`]) are read at the same two instants.

use std::time::{Duration, Instant};

/// Warm-up and measured time of a run.
#[derive(Clone, Copy, Debug)]
pub struct Timing {
    pub warmup: Duration,
    pub measure: Duration,
}

/// The measured phase, as instants.
#[derive(Clone, Copy, Debug)]
pub struct Clock {
    pub from: Instant,
    pub stop: Instant,
}

impl Clock {
    pub fn start(t: Timing) -> Clock {
        let from = Instant::now() + t.warmup;
        Clock { from, stop: from + t.measure }
    }

    pub fn inside(&self, at: Instant) -> bool {
        at >= self.from && at <= self.stop
    }
}
