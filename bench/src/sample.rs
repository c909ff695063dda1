//! What one measured run produced ([`Outcome`]), where it belongs
//! ([`Sample`]: workload, mode, cell, record size, peer, repetition), and
//! the repetitions of one cell and peer folded into a median and a range
//! ([`Summary`]).

use std::collections::BTreeMap;

use hdrhistogram::Histogram;

use crate::util::{latency_histogram, Mode};

/// The workloads, plus the floor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Workload {
    Floor,
    /// Single-stream append throughput, closed loop.
    A,
    /// Many-stream fan-in.
    B,
    /// Append latency under open-loop load.
    C,
    /// Tail-read fan-out.
    D,
    /// Cold reads.
    E,
    /// Idempotent producers on and off.
    F,
    /// Recovery after a kill.
    G,
    /// Consumers: the coordinated reader over many streams.
    H,
    /// Queues: competing workers, and fan-out.
    I,
}

impl Workload {
    pub const ALL: [Workload; 10] = [
        Workload::Floor,
        Workload::A,
        Workload::B,
        Workload::C,
        Workload::D,
        Workload::E,
        Workload::F,
        Workload::G,
        Workload::H,
        Workload::I,
    ];

    pub fn letter(self) -> &'static str {
        match self {
            Workload::Floor => "floor",
            Workload::A => "A",
            Workload::B => "B",
            Workload::C => "C",
            Workload::D => "D",
            Workload::E => "E",
            Workload::F => "F",
            Workload::G => "G",
            Workload::H => "H",
            Workload::I => "I",
        }
    }

    pub fn title(self) -> &'static str {
        match self {
            Workload::Floor => "Floor: the device and memory alone",
            Workload::A => "A. Single-stream append throughput (closed loop)",
            Workload::B => "B. Many-stream fan-in (closed loop)",
            Workload::C => "C. Append latency under open-loop load (coordinated-omission corrected)",
            Workload::D => "D. Tail-read fan-out: publish-to-delivery latency",
            Workload::E => "E. Cold reads after the page cache was dropped",
            Workload::F => "F. Idempotent producers on and off, with duplicate retries",
            Workload::G => "G. Recovery after kill -9",
            Workload::H => "H. Consumers: records delivered and acked through the coordinated reader",
            Workload::I => "I. Queues: receive and ack by competing workers, and fan-out to queue groups",
        }
    }

    pub fn parse(s: &str) -> Option<Workload> {
        Workload::ALL.into_iter().find(|w| w.letter().eq_ignore_ascii_case(s))
    }
}

/// What one run measured.
#[derive(Debug, Clone)]
pub struct Outcome {
    /// Operations completed inside the measured time (records, reads,
    /// writes, copies: the workload says which).
    pub ops: u64,
    /// Payload bytes those operations carried.
    pub bytes: u64,
    /// Length of the measured time.
    pub seconds: f64,
    /// Per-operation latency in nanoseconds.
    pub latency: Histogram<u64>,
    /// Other figures of the workload (named, in the units their names say).
    pub extra: Vec<(&'static str, f64)>,
}

impl Default for Outcome {
    fn default() -> Self {
        Outcome { ops: 0, bytes: 0, seconds: 0.0, latency: latency_histogram(), extra: Vec::new() }
    }
}

impl Outcome {
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.seconds.max(f64::EPSILON)
    }

    pub fn mib_per_sec(&self) -> f64 {
        self.bytes as f64 / self.seconds.max(f64::EPSILON) / f64::from(1u32 << 20)
    }

    /// Latency at quantile `q`, in microseconds (0 with no samples).
    pub fn us(&self, q: f64) -> f64 {
        if self.latency.is_empty() {
            return 0.0;
        }
        self.latency.value_at_quantile(q) as f64 / 1000.0
    }

    pub fn max_us(&self) -> f64 {
        self.latency.max() as f64 / 1000.0
    }

    pub fn extra(&self, name: &str) -> Option<f64> {
        self.extra.iter().find(|(n, _)| *n == name).map(|(_, v)| *v)
    }
}

/// One run, placed in the matrix.
#[derive(Debug, Clone)]
pub struct Sample {
    pub workload: Workload,
    /// `None` for what does not depend on the durability mode (the floor,
    /// cold reads).
    pub mode: Option<Mode>,
    /// The cell within the workload (`"1k streams, zipf"`, `"5000/s"`...).
    pub cell: String,
    pub record_bytes: usize,
    /// `rill`, a peer's name, or `floor`.
    pub peer: String,
    /// Repetition, from 0.
    pub rep: usize,
    pub outcome: Outcome,
}

/// Median and range of one figure over the repetitions.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Stat {
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

impl Stat {
    pub fn of(values: &[f64]) -> Stat {
        if values.is_empty() {
            return Stat::default();
        }
        let mut v = values.to_vec();
        v.sort_by(f64::total_cmp);
        let n = v.len();
        let median = if n % 2 == 1 { v[n / 2] } else { (v[n / 2 - 1] + v[n / 2]) / 2.0 };
        Stat { median, min: v[0], max: v[n - 1] }
    }
}

/// Identity of a summary: everything of a sample but the repetition.
#[derive(Debug, Clone, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct Key {
    pub workload: Workload,
    pub mode: Option<Mode>,
    pub cell: String,
    pub record_bytes: usize,
    pub peer: String,
}

impl Sample {
    pub fn key(&self) -> Key {
        Key {
            workload: self.workload,
            mode: self.mode,
            cell: self.cell.clone(),
            record_bytes: self.record_bytes,
            peer: self.peer.clone(),
        }
    }
}

/// The repetitions of one cell and peer.
#[derive(Debug, Clone)]
pub struct Summary {
    pub key: Key,
    pub reps: usize,
    pub ops_per_s: Stat,
    pub mib_per_s: Stat,
    pub p50_us: Stat,
    pub p99_us: Stat,
    pub p999_us: Stat,
    pub max_us: Stat,
    pub extra: BTreeMap<&'static str, Stat>,
    /// Every repetition's latencies together (for the plot).
    pub merged: Histogram<u64>,
}

impl Summary {
    pub fn extra(&self, name: &str) -> Option<Stat> {
        self.extra.get(name).copied()
    }
}

/// Folds samples into summaries, in the order their keys first appear.
pub fn summarize(samples: &[Sample]) -> Vec<Summary> {
    let mut order: Vec<Key> = Vec::new();
    let mut groups: BTreeMap<Key, Vec<&Sample>> = BTreeMap::new();
    for s in samples {
        let key = s.key();
        if !groups.contains_key(&key) {
            order.push(key.clone());
        }
        groups.entry(key).or_default().push(s);
    }
    order
        .into_iter()
        .map(|key| {
            let group = &groups[&key];
            let stat = |f: &dyn Fn(&Outcome) -> f64| {
                Stat::of(&group.iter().map(|s| f(&s.outcome)).collect::<Vec<_>>())
            };
            let mut merged = latency_histogram();
            for s in group {
                merged.add(&s.outcome.latency).expect("histograms with the same bounds");
            }
            let mut names: Vec<&'static str> = Vec::new();
            for s in group {
                for (name, _) in &s.outcome.extra {
                    if !names.contains(name) {
                        names.push(name);
                    }
                }
            }
            let extra = names
                .into_iter()
                .map(|name| {
                    let values: Vec<f64> = group.iter().filter_map(|s| s.outcome.extra(name)).collect();
                    (name, Stat::of(&values))
                })
                .collect();
            Summary {
                reps: group.len(),
                ops_per_s: stat(&|o| o.ops_per_sec()),
                mib_per_s: stat(&|o| o.mib_per_sec()),
                p50_us: stat(&|o| o.us(0.5)),
                p99_us: stat(&|o| o.us(0.99)),
                p999_us: stat(&|o| o.us(0.999)),
                max_us: stat(&|o| o.max_us()),
                extra,
                merged,
                key,
            }
        })
        .collect()
}

/// The summary of `(workload, mode, cell, record_bytes, peer)`, if measured.
pub fn find<'a>(
    summaries: &'a [Summary],
    workload: Workload,
    mode: Option<Mode>,
    cell: &str,
    record_bytes: usize,
    peer: &str,
) -> Option<&'a Summary> {
    summaries.iter().find(|s| {
        s.key.workload == workload
            && s.key.mode == mode
            && s.key.cell == cell
            && s.key.record_bytes == record_bytes
            && s.key.peer == peer
    })
}

/// `f(rill) / f(other)` per repetition, over the repetitions where both
/// `key`'s sample and `other`'s sample of the same cell ran, folded into a
/// median and a range: a paired ratio, so drift between repetitions
/// cancels instead of widening the ratio of two separate medians.
pub fn paired_ratio(samples: &[Sample], key: &Key, other: &str, f: fn(&Outcome) -> f64) -> Option<Stat> {
    let mut ratios = Vec::new();
    for s in samples.iter().filter(|s| &s.key() == key) {
        let partner = samples.iter().find(|o| {
            o.peer == other
                && o.rep == s.rep
                && o.workload == s.workload
                && o.mode == s.mode
                && o.cell == s.cell
                && o.record_bytes == s.record_bytes
        });
        if let Some(o) = partner {
            let d = f(&o.outcome);
            if d > 0.0 {
                ratios.push(f(&s.outcome) / d);
            }
        }
    }
    (!ratios.is_empty()).then(|| Stat::of(&ratios))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_range() {
        assert_eq!(Stat::of(&[3.0, 1.0, 2.0]), Stat { median: 2.0, min: 1.0, max: 3.0 });
        assert_eq!(Stat::of(&[4.0, 1.0]), Stat { median: 2.5, min: 1.0, max: 4.0 });
        assert_eq!(Stat::of(&[]), Stat::default());
    }

    #[test]
    fn summaries_group_repetitions_in_order() {
        let sample = |peer: &str, rep, ops| Sample {
            workload: Workload::A,
            mode: Some(Mode::Durable),
            cell: "1 stream".into(),
            record_bytes: 100,
            peer: peer.into(),
            rep,
            outcome: Outcome {
                ops,
                bytes: ops * 100,
                seconds: 1.0,
                extra: vec![("x", ops as f64)],
                ..Outcome::default()
            },
        };
        let samples =
            vec![sample("rill", 0, 10), sample("fjall", 0, 5), sample("rill", 1, 30), sample("rill", 2, 20)];
        let s = summarize(&samples);
        assert_eq!(s.len(), 2);
        assert_eq!(s[0].key.peer, "rill");
        assert_eq!(s[0].reps, 3);
        assert_eq!(s[0].ops_per_s, Stat { median: 20.0, min: 10.0, max: 30.0 });
        assert_eq!(s[0].extra("x").map(|x| x.median), Some(20.0));
        assert!(find(&s, Workload::A, Some(Mode::Durable), "1 stream", 100, "fjall").is_some());
        // Only repetition 0 has both: 10 / 5.
        let r = paired_ratio(&samples, &s[0].key, "fjall", Outcome::ops_per_sec);
        assert_eq!(r, Some(Stat { median: 2.0, min: 2.0, max: 2.0 }));
        assert_eq!(paired_ratio(&samples, &s[0].key, "redb", Outcome::ops_per_sec), None);
    }
}
