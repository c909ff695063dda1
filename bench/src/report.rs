//! What a run prints and keeps: the machine it ran on, a markdown table of
//! the durable cells next to the device floor, and the same rows as JSON
//! lines appended to `<data dir>/bench-results.jsonl`.
//!
//! Latencies are recorded in nanoseconds and shown in microseconds. The
//! ratio columns divide a cell's p50 and p99 by the floor's, so the cost
//! rill adds above one durable device write is visible in every row.

use std::fs::OpenOptions;
use std::io::{self, Write};
use std::path::{Path, PathBuf};

use hdrhistogram::Histogram;
use serde_json::json;

/// Name of the results file inside the data directory.
pub const RESULTS_FILE: &str = "bench-results.jsonl";

/// An empty latency histogram: nanoseconds, 1 ns to 100 s, 3 significant
/// digits.
pub fn latency_histogram() -> Histogram<u64> {
    Histogram::new_with_bounds(1, 100_000_000_000, 3).expect("valid histogram bounds")
}

/// The machine a run measured.
#[derive(Clone, Debug)]
pub struct Machine {
    pub cpu_model: String,
    pub online_cpus: usize,
    pub kernel: String,
    pub fs_type: String,
    pub mount_point: String,
    pub device: String,
}

impl Machine {
    /// Reads the CPU model, the CPU count, the kernel release and the file
    /// system holding `dir` from `/proc`.
    pub fn probe(dir: &Path) -> Machine {
        let cpuinfo = std::fs::read_to_string("/proc/cpuinfo").unwrap_or_default();
        let kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease")
            .map(|s| s.trim().to_string())
            .unwrap_or_else(|_| "unknown".into());
        let mounts = std::fs::read_to_string("/proc/mounts").unwrap_or_default();
        let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
        let (device, mount_point, fs_type) =
            mount_of(&mounts, &dir).unwrap_or_else(|| ("unknown".into(), "unknown".into(), "unknown".into()));
        Machine {
            cpu_model: cpu_model(&cpuinfo),
            online_cpus: rill::online_cpus(),
            kernel,
            fs_type,
            mount_point,
            device,
        }
    }

    pub fn print(&self, dir: &Path) {
        println!("  machine: {}, {} CPUs online, kernel {}", self.cpu_model, self.online_cpus, self.kernel);
        println!(
            "  data dir {} on {} ({} mounted at {})",
            dir.display(),
            self.fs_type,
            self.device,
            self.mount_point
        );
    }
}

/// The first CPU model name in `/proc/cpuinfo` text (x86 says `model
/// name`; some other architectures only name the hardware or processor).
fn cpu_model(cpuinfo: &str) -> String {
    for key in ["model name", "Hardware", "Processor", "cpu model", "cpu"] {
        for line in cpuinfo.lines() {
            if let Some((k, v)) = line.split_once(':') {
                if k.trim() == key && !v.trim().is_empty() {
                    return v.trim().to_string();
                }
            }
        }
    }
    "unknown".into()
}

/// Undoes the octal escapes `/proc/mounts` uses for space, tab, newline
/// and backslash.
fn unescape_mount_field(field: &str) -> String {
    let bytes = field.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'\\'
            && i + 3 < bytes.len()
            && bytes[i + 1..i + 4].iter().all(|b| (b'0'..=b'7').contains(b))
        {
            let code = bytes[i + 1..i + 4].iter().fold(0u32, |acc, b| acc * 8 + u32::from(b - b'0'));
            if let Ok(byte) = u8::try_from(code) {
                out.push(byte);
                i += 4;
                continue;
            }
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The `(device, mount point, fs type)` of the mount holding `path`: the
/// longest mount point that is a prefix of it, the last one listed winning
/// among equals (it is mounted over the earlier ones).
fn mount_of(mounts: &str, path: &Path) -> Option<(String, String, String)> {
    let mut best: Option<(usize, (String, String, String))> = None;
    for line in mounts.lines() {
        let mut fields = line.split_whitespace();
        let (Some(device), Some(point), Some(fs)) = (fields.next(), fields.next(), fields.next()) else {
            continue;
        };
        let point = unescape_mount_field(point);
        if !path.starts_with(&point) {
            continue;
        }
        let depth = Path::new(&point).components().count();
        if best.as_ref().is_none_or(|(d, _)| depth >= *d) {
            best = Some((depth, (unescape_mount_field(device), point, fs.to_string())));
        }
    }
    best.map(|(_, m)| m)
}

/// One row of the results: a durable cell or the floor.
#[derive(Clone, Debug)]
pub struct Row {
    /// `"rill"` or `"floor"`.
    pub kind: &'static str,
    /// Shown in the table's first column.
    pub label: String,
    pub payload_bytes: usize,
    /// 0 for the floor.
    pub streams: usize,
    pub clients: usize,
    /// In-flight requests per client.
    pub window: usize,
    pub seconds: f64,
    pub ops: u64,
    pub latency: Histogram<u64>,
}

impl Row {
    pub fn ops_per_sec(&self) -> f64 {
        self.ops as f64 / self.seconds.max(f64::EPSILON)
    }

    pub fn mib_per_sec(&self) -> f64 {
        self.ops_per_sec() * self.payload_bytes as f64 / f64::from(1u32 << 20)
    }

    /// Latency at `q`, in microseconds.
    pub fn us(&self, q: f64) -> f64 {
        self.latency.value_at_quantile(q) as f64 / 1000.0
    }

    pub fn max_us(&self) -> f64 {
        self.latency.max() as f64 / 1000.0
    }

    pub fn mean_us(&self) -> f64 {
        self.latency.mean() / 1000.0
    }

    /// This row's latency at `q` over the floor's.
    pub fn ratio(&self, floor: &Row, q: f64) -> f64 {
        self.us(q) / floor.us(q).max(f64::EPSILON)
    }
}

/// How a run was set up, written into every JSON line.
#[derive(Clone, Debug)]
pub struct RunInfo {
    pub profile: &'static str,
    pub tag: String,
    pub unix_ms: u64,
    pub engine_cores: usize,
    pub groups: u32,
    pub durability: String,
    pub wal_io: String,
    pub floor_mode: &'static str,
    pub warmup_s: f64,
}

fn bytes_label(n: usize) -> String {
    if n >= 1024 && n.is_multiple_of(1024) {
        format!("{} KiB", n / 1024)
    } else {
        format!("{n} B")
    }
}

/// Microseconds with a precision that suits their size.
fn us_label(us: f64) -> String {
    if us >= 100.0 {
        format!("{us:.0}")
    } else {
        format!("{us:.1}")
    }
}

/// Prints the cells and the floor as a markdown table.
pub fn print_table(cells: &[Row], floor: &Row) {
    println!();
    println!(
        "| cell | payload | streams | in flight | appends/s | MiB/s | p50 µs | p99 µs | p999 µs | p50 / floor | p99 / floor |"
    );
    println!("|---|---|---:|---|---:|---:|---:|---:|---:|---:|---:|");
    for row in cells.iter().chain(std::iter::once(floor)) {
        let streams = if row.streams == 0 { "-".to_string() } else { row.streams.to_string() };
        println!(
            "| {} | {} | {} | {}×{} | {:.0} | {:.1} | {} | {} | {} | {:.2} | {:.2} |",
            row.label,
            bytes_label(row.payload_bytes),
            streams,
            row.clients,
            row.window,
            row.ops_per_sec(),
            row.mib_per_sec(),
            us_label(row.us(0.5)),
            us_label(row.us(0.99)),
            us_label(row.us(0.999)),
            row.ratio(floor, 0.5),
            row.ratio(floor, 0.99),
        );
    }
    println!();
}

fn round1(x: f64) -> f64 {
    (x * 10.0).round() / 10.0
}

fn round3(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

/// Appends one JSON line per row to `<dir>/bench-results.jsonl` and returns
/// its path.
pub fn write_jsonl(
    dir: &Path,
    run: &RunInfo,
    machine: &Machine,
    cells: &[Row],
    floor: &Row,
) -> io::Result<PathBuf> {
    let path = dir.join(RESULTS_FILE);
    let mut text = String::new();
    for row in cells.iter().chain(std::iter::once(floor)) {
        let line = json!({
            "profile": run.profile,
            "run": run.tag,
            "unix_ms": run.unix_ms,
            "kind": row.kind,
            "label": row.label,
            "payload_bytes": row.payload_bytes,
            "streams": row.streams,
            "clients": row.clients,
            "window": row.window,
            "seconds": round3(row.seconds),
            "warmup_s": run.warmup_s,
            "ops": row.ops,
            "ops_per_s": round1(row.ops_per_sec()),
            "mib_per_s": round3(row.mib_per_sec()),
            "samples": row.latency.len(),
            "p50_us": round1(row.us(0.5)),
            "p99_us": round1(row.us(0.99)),
            "p999_us": round1(row.us(0.999)),
            "max_us": round1(row.max_us()),
            "mean_us": round1(row.mean_us()),
            "p50_ratio_to_floor": round3(row.ratio(floor, 0.5)),
            "p99_ratio_to_floor": round3(row.ratio(floor, 0.99)),
            "durability": run.durability,
            "wal_io": run.wal_io,
            "floor_mode": run.floor_mode,
            "engine_cores": run.engine_cores,
            "groups": run.groups,
            "cpu_model": machine.cpu_model,
            "online_cpus": machine.online_cpus,
            "kernel": machine.kernel,
            "fs_type": machine.fs_type,
        });
        text.push_str(&line.to_string());
        text.push('\n');
    }
    let mut file = OpenOptions::new().create(true).append(true).open(&path)?;
    file.write_all(text.as_bytes())?;
    Ok(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn longest_mount_point_wins_and_escapes_are_undone() {
        let mounts = "/dev/vda / ext4 rw 0 0\n\
                      tmpfs /tmp tmpfs rw 0 0\n\
                      /dev/vdb /tmp/my\\040disk xfs rw 0 0\n\
                      tmpfs /tmpx tmpfs rw 0 0\n";
        let m = |p: &str| mount_of(mounts, Path::new(p)).map(|(_, point, fs)| (point, fs));
        assert_eq!(m("/work/main"), Some(("/".into(), "ext4".into())));
        assert_eq!(m("/tmp/a"), Some(("/tmp".into(), "tmpfs".into())));
        assert_eq!(m("/tmp/my disk/x"), Some(("/tmp/my disk".into(), "xfs".into())));
        assert_eq!(m("/tmpy"), Some(("/".into(), "ext4".into())));
        let over = "/dev/vda / ext4 rw 0 0\noverlay / overlay rw 0 0\n";
        assert_eq!(mount_of(over, Path::new("/x")).map(|m| m.2), Some("overlay".into()));
    }

    #[test]
    fn cpu_model_falls_back() {
        assert_eq!(cpu_model("processor\t: 0\nmodel name\t: Some CPU\n"), "Some CPU");
        assert_eq!(cpu_model("Hardware\t: Board\n"), "Board");
        assert_eq!(cpu_model(""), "unknown");
    }

    #[test]
    fn labels() {
        assert_eq!(bytes_label(256), "256 B");
        assert_eq!(bytes_label(4096), "4 KiB");
        assert_eq!(us_label(42.24), "42.2");
        assert_eq!(us_label(1234.4), "1234");
    }
}
