//! Shrinking a failing run: delta debugging (ddmin) over its operations.
//!
//! The operations after the failing step are dropped first; then chunks of
//! the rest are removed, halving the chunk size whenever no chunk can go,
//! as long as the run still fails the same check. Operations are abstract
//! and carry their own random choices (see [`super::plan`]), so a reduced
//! list replays deterministically through [`super::SimConfig::keep`].

use super::{run, Failure, SimConfig};

/// The shrunk operation list (indexes into the generated list) and the
/// failure it still shows.
#[derive(Clone, Debug)]
pub struct Shrunk {
    pub keep: Vec<usize>,
    pub failure: Failure,
    pub runs: usize,
}

/// Shrinks `config`'s failing run; `max_runs` bounds the work. Returns
/// `None` when the run does not fail.
pub fn shrink(config: &SimConfig, max_runs: usize) -> Option<Shrunk> {
    let first = run(config).failure?;
    let check = first.check;
    let keep: Vec<usize> = match &config.keep {
        Some(keep) => keep.iter().copied().take(first.step + 1).collect(),
        None => (0..=first.index.min(config.ops.saturating_sub(1))).collect(),
    };
    let mut runs = 1;
    let fails = |candidate: &[usize]| -> Option<Failure> {
        let mut cfg = config.clone();
        cfg.keep = Some(candidate.to_vec());
        run(&cfg).failure.filter(|f| f.check == check)
    };
    let cut =
        |candidate: Vec<usize>, failure: &Failure| candidate.into_iter().take(failure.step + 1).collect();
    let (keep, failure) = ddmin(keep, first, 2, max_runs, &mut runs, fails, cut);
    Some(Shrunk { keep, failure, runs })
}

/// Delta debugging over a list of operation indexes, for both simulations'
/// shrinkers: while `keep` has at least `min_len` operations and fewer than
/// `max_runs` runs were made (`runs` counts them, the first included),
/// try `keep` without one of its chunks; a candidate that still fails
/// (`fails` answers its failure) becomes `keep`, cut by `cut` to what the
/// failure needs, and the chunks grow one fewer; when no chunk can go, the
/// chunks halve in size, down to single operations. Returns the shortest
/// failing list and its failure (`best` if nothing could go).
pub fn ddmin<F>(
    mut keep: Vec<usize>,
    mut best: F,
    min_len: usize,
    max_runs: usize,
    runs: &mut usize,
    mut fails: impl FnMut(&[usize]) -> Option<F>,
    cut: impl Fn(Vec<usize>, &F) -> Vec<usize>,
) -> (Vec<usize>, F) {
    let mut chunks = 2usize;
    while keep.len() >= min_len && !keep.is_empty() && *runs < max_runs {
        let size = keep.len().div_ceil(chunks);
        let mut reduced = false;
        let mut start = 0;
        while start < keep.len() && *runs < max_runs {
            let candidate: Vec<usize> =
                keep[..start].iter().chain(keep[(start + size).min(keep.len())..].iter()).copied().collect();
            *runs += 1;
            if let Some(failure) = fails(&candidate) {
                keep = cut(candidate, &failure);
                best = failure;
                reduced = true;
                chunks = (chunks - 1).max(2);
                break;
            }
            start += size;
        }
        if !reduced {
            if size == 1 {
                break;
            }
            chunks = (chunks * 2).min(keep.len());
        }
    }
    (keep, best)
}

/// `keep` as a compact list of ranges ("0-5,9,12-20").
pub fn format_keep(keep: &[usize]) -> String {
    let mut parts = Vec::new();
    let mut i = 0;
    while i < keep.len() {
        let mut j = i;
        while j + 1 < keep.len() && keep[j + 1] == keep[j] + 1 {
            j += 1;
        }
        parts.push(if i == j { keep[i].to_string() } else { format!("{}-{}", keep[i], keep[j]) });
        i = j + 1;
    }
    parts.join(",")
}

/// Parses what [`format_keep`] writes.
pub fn parse_keep(text: &str) -> Result<Vec<usize>, String> {
    let mut out = Vec::new();
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let bad = || format!("bad --keep part {part:?}");
        match part.split_once('-') {
            Some((a, b)) => {
                let (a, b): (usize, usize) = (a.parse().map_err(|_| bad())?, b.parse().map_err(|_| bad())?);
                out.extend(a..=b);
            }
            None => out.push(part.parse().map_err(|_| bad())?),
        }
    }
    Ok(out)
}
