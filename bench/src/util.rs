//! Small pieces every workload uses: the error type, the durability mode of
//! a table, a deterministic random generator and a Zipf sampler, latency
//! histograms, payloads, and what the process can learn about itself and
//! its files from `/proc` and the kernel (major faults, dropping a file's
//! pages from the page cache, bytes under a directory).

use std::io;
use std::path::Path;
use std::time::{Duration, Instant};

use bytes::Bytes;
use hdrhistogram::Histogram;
use rill::Durability;

/// Errors of a benchmark run.
pub type BoxError = Box<dyn std::error::Error + Send + Sync>;
/// Results of a benchmark run.
pub type Result<T> = std::result::Result<T, BoxError>;

/// How often the relaxed mode syncs (rill's `Durability::Interval`, fjall's
/// `fsync_ms`).
pub const RELAXED_SYNC: Duration = Duration::from_millis(100);

/// The durability a table is measured with.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Mode {
    /// Acknowledged only after `fdatasync` (rill's default).
    Durable,
    /// Acknowledged after the write reached the OS (or the device, for
    /// rill's `O_DIRECT` WAL); synced every [`RELAXED_SYNC`].
    Relaxed,
}

impl Mode {
    pub fn name(self) -> &'static str {
        match self {
            Mode::Durable => "durable",
            Mode::Relaxed => "relaxed",
        }
    }

    pub fn durability(self) -> Durability {
        match self {
            Mode::Durable => Durability::Fsync,
            Mode::Relaxed => Durability::Interval(RELAXED_SYNC),
        }
    }
}

/// The project's one deterministic generator (SplitMix64), shared with the
/// tests and the simulation.
pub use rill_shard::rng::Rng;

/// Zipf-distributed ranks over `0..n` with exponent `s`: rank `k` is drawn
/// with probability proportional to `1 / (k + 1)^s`. Sampling is a binary
/// search over the precomputed cumulative distribution.
#[derive(Clone, Debug)]
pub struct Zipf {
    cdf: Vec<f64>,
}

impl Zipf {
    pub fn new(n: usize, s: f64) -> Zipf {
        let mut cdf = Vec::with_capacity(n);
        let mut total = 0.0;
        for k in 0..n {
            total += 1.0 / ((k + 1) as f64).powf(s);
            cdf.push(total);
        }
        for c in &mut cdf {
            *c /= total;
        }
        Zipf { cdf }
    }

    pub fn sample(&self, rng: &mut Rng) -> usize {
        let u = rng.unit();
        self.cdf.partition_point(|c| *c < u).min(self.cdf.len() - 1)
    }

    /// Probability of rank 0.
    pub fn top_share(&self) -> f64 {
        self.cdf.first().copied().unwrap_or(0.0)
    }
}

/// How a workload picks streams.
#[derive(Clone, Debug)]
pub enum Picker {
    Uniform(usize),
    Zipf(std::sync::Arc<Zipf>),
}

impl Picker {
    pub fn new(streams: usize, zipf: bool) -> Picker {
        if zipf {
            Picker::Zipf(std::sync::Arc::new(Zipf::new(streams, ZIPF_EXPONENT)))
        } else {
            Picker::Uniform(streams)
        }
    }

    pub fn pick(&self, rng: &mut Rng) -> usize {
        match self {
            Picker::Uniform(n) => rng.below(*n as u64) as usize,
            Picker::Zipf(z) => z.sample(rng),
        }
    }
}

/// Exponent of the skewed stream choice (the YCSB constant).
pub const ZIPF_EXPONENT: f64 = 0.99;

/// An empty latency histogram: nanoseconds, 1 ns to 100 s, 3 significant
/// digits.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

/// Records `to - from` in nanoseconds (0 if `to` is earlier).
pub fn record_since(h: &mut Histogram<u64>, from: Instant, to: Instant) {
    h.saturating_record(to.saturating_duration_since(from).as_nanos().max(1) as u64);
}

/// A payload of `len` bytes that is not all one value.
pub fn filler(len: usize, seed: u64) -> Bytes {
    let mut rng = Rng::new(seed);
    let mut v = Vec::with_capacity(len);
    while v.len() < len {
        v.extend_from_slice(&rng.next_u64().to_le_bytes());
    }
    v.truncate(len);
    Bytes::from(v)
}

/// `100 B`, `1 KiB`, `16 KiB`, `1 MiB`.
pub fn bytes_label(n: usize) -> String {
    if n >= 1 << 20 && n & ((1 << 20) - 1) == 0 {
        format!("{} MiB", n >> 20)
    } else if n >= 1024 && n & 1023 == 0 {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} B")
    }
}

/// `1k`, `10k`, `100k` for round thousands.
pub fn count_label(n: usize) -> String {
    if n >= 1000 && n / 1000 * 1000 == n {
        format!("{}k", n / 1000)
    } else {
        n.to_string()
    }
}

/// Major page faults of this process so far (`/proc/self/stat`, field 12).
pub fn major_faults() -> u64 {
    let Ok(stat) = std::fs::read_to_string("/proc/self/stat") else { return 0 };
    // The command name (field 2) is in parentheses and may hold spaces.
    let Some(rest) = stat.rfind(')').map(|i| &stat[i + 1..]) else { return 0 };
    // Fields from 3 on: state is field 3, so majflt (12) is the 10th here.
    rest.split_whitespace().nth(9).and_then(|f| f.parse().ok()).unwrap_or(0)
}

/// Asks the kernel to drop the cached pages of every file under `dir`
/// (`POSIX_FADV_DONTNEED`). Dirty pages are written first, since the advice
/// skips them. Pages still mapped by a process stay cached; callers close
/// the engine first. Returns the number of files advised.
pub fn drop_cached_pages(dir: &Path) -> io::Result<u64> {
    let mut files = 0;
    for entry in std::fs::read_dir(dir)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        if kind.is_dir() {
            files += drop_cached_pages(&entry.path())?;
        } else if kind.is_file() {
            let file = std::fs::File::open(entry.path())?;
            file.sync_data()?;
            rustix::fs::fadvise(&file, 0, None, rustix::fs::Advice::DontNeed)?;
            files += 1;
        }
    }
    Ok(files)
}

/// Bytes of the regular files under `dir` (0 if it does not exist).
pub fn dir_bytes(dir: &Path) -> u64 {
    let Ok(entries) = std::fs::read_dir(dir) else { return 0 };
    entries
        .flatten()
        .map(|e| match e.file_type() {
            Ok(t) if t.is_dir() => dir_bytes(&e.path()),
            Ok(t) if t.is_file() => e.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

/// A directory removed (with everything in it) when dropped.
#[derive(Debug)]
pub struct Scratch(pub std::path::PathBuf);

impl Scratch {
    /// Creates `path` afresh, removing whatever was there.
    pub fn fresh(path: std::path::PathBuf) -> io::Result<Scratch> {
        let _ = std::fs::remove_dir_all(&path);
        std::fs::create_dir_all(&path)?;
        Ok(Scratch(path))
    }

    pub fn path(&self) -> &Path {
        &self.0
    }
}

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn zipf_is_skewed_and_in_range() {
        let z = Zipf::new(1000, ZIPF_EXPONENT);
        let mut rng = Rng::new(7);
        let mut top = 0;
        for _ in 0..10_000 {
            let k = z.sample(&mut rng);
            assert!(k < 1000);
            top += usize::from(k == 0);
        }
        let share = top as f64 / 10_000.0;
        assert!((share - z.top_share()).abs() < 0.03, "rank 0 drawn {share}, expected {}", z.top_share());
    }

    #[test]
    fn rng_below_stays_below() {
        let mut rng = Rng::new(1);
        assert!((0..1000).all(|_| rng.below(3) < 3));
        assert!((0..1000).all(|_| (0.0..1.0).contains(&rng.unit())));
    }

    #[test]
    fn labels_and_faults() {
        assert_eq!(bytes_label(100), "100 B");
        assert_eq!(bytes_label(16 << 10), "16 KiB");
        assert_eq!(bytes_label(1 << 20), "1 MiB");
        assert_eq!(count_label(10_000), "10k");
        assert_eq!(count_label(16), "16");
        // Readable on Linux; the value itself only grows.
        let a = major_faults();
        assert!(major_faults() >= a);
    }
}
