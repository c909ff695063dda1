//! The machine fingerprint written into every result file: CPU model and
//! count, memory, kernel, and the file system holding the data directory.

use std::path::Path;

use serde_json::{json, Value};

/// The machine a run measured.
#[derive(Clone, Debug)]
pub struct Machine {
    pub cpu_model: String,
    pub online_cpus: usize,
    pub kernel: String,
    pub fs_type: String,
    pub mount_point: String,
    pub device: String,
    pub mem_total_gib: f64,
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
            mem_total_gib: mem_total_gib(),
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

impl Machine {
    /// One line for tables and plots.
    pub fn summary(&self) -> String {
        format!(
            "{}, {} CPUs, {:.0} GiB, Linux {}, {} on {}",
            self.cpu_model, self.online_cpus, self.mem_total_gib, self.kernel, self.fs_type, self.device
        )
    }

    /// The fingerprint as JSON fields.
    pub fn json(&self) -> Value {
        json!({
            "cpu_model": self.cpu_model,
            "online_cpus": self.online_cpus,
            "mem_total_gib": (self.mem_total_gib * 10.0).round() / 10.0,
            "kernel": self.kernel,
            "fs_type": self.fs_type,
            "device": self.device,
            "mount_point": self.mount_point,
        })
    }
}

/// `MemTotal` of `/proc/meminfo`, in GiB (0 if unreadable).
fn mem_total_gib() -> f64 {
    let info = std::fs::read_to_string("/proc/meminfo").unwrap_or_default();
    info.lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|kib| kib.parse::<f64>().ok())
        .map_or(0.0, |kib| kib / f64::from(1u32 << 20))
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
}
