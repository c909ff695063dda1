//! Command-line arguments of `rill-bench`.
//!
//! ```text
//! rill-bench [quick] [options] [load options]   # the main job: load + verify, then the quick profile
//! rill-bench full    [options]                  # the whole matrix (about 15 minutes on 2 cores)
//! rill-bench durable [options]                  # the full profile's durable floor, A, B and C only
//!
//! options:      --dir D            data directory (default ./rill-data)
//!               --reps N           repetitions (default 3)
//!               --seconds S        measured time of each run (profile default otherwise)
//!               --warmup S         warm-up of each run
//!               --scale X          multiply every time of the profile by X
//!               --only W,...       workloads among floor,A,B,C,D,E,F,G,H,I
//!               --modes M,...      durable, relaxed (default both)
//!               --peers P,...|none peers besides rill (default: every compiled-in peer)
//!               --wal-io IO        dma, std, buffered or mapped: how rill writes its WAL (std without O_DIRECT)
//!               --spin on|off      the engine's idle spin (default on: its default policy; off: SpinPolicy::OFF)
//!               --no-progress      no progress line on stderr
//!               --no-events        no kernel tracepoint counters in the windows (they cost a little per syscall)
//! load options: --streams N --records N --record-bytes N --clients N --window N, --skip-load
//! ```

use std::path::PathBuf;
use std::time::Duration;

use rill::{SpinPolicy, WalIo};

use crate::peers;
use crate::sample::Workload;
use crate::suite::{Profile, SuiteOptions};
use crate::util::Mode;

/// Which profile to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// Load, read back and verify, then the quick profile.
    Quick,
    /// The full matrix.
    Full,
    /// The full profile's durable floor, A, B and C.
    Durable,
}

impl Command {
    pub fn name(self) -> &'static str {
        match self {
            Command::Quick => "quick",
            Command::Full => "full",
            Command::Durable => "durable",
        }
    }
}

/// The bulk load that `quick` verifies.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    pub skip: bool,
    pub streams: usize,
    pub records: usize,
    pub record_bytes: usize,
    pub clients: usize,
    pub window: usize,
}

/// Everything one invocation needs.
#[derive(Clone, Debug)]
pub struct Options {
    pub command: Command,
    pub dir: PathBuf,
    pub load: LoadOptions,
    pub reps: Option<usize>,
    pub seconds: Option<Duration>,
    pub warmup: Option<Duration>,
    pub scale: f64,
    pub only: Option<Vec<Workload>>,
    pub modes: Vec<Mode>,
    pub peers: Option<Vec<String>>,
    pub wal_io: WalIo,
    /// The engine's idle-spin policy.
    pub spin: SpinPolicy,
    pub progress: bool,
    /// Kernel event counters in every measured window.
    pub events: bool,
}

pub const USAGE: &str = "usage:
  rill-bench [quick] [options] [--streams N] [--records N] [--record-bytes N] [--clients N] [--window N] [--skip-load]
  rill-bench full    [options]
  rill-bench durable [options]
options: [--dir D] [--reps N] [--seconds S] [--warmup S] [--scale X] [--only floor,A,B,C,D,E,F,G,H,I]
         [--modes durable,relaxed] [--peers P,...|none] [--wal-io dma|std|buffered|mapped] [--spin on|off] [--no-progress] [--no-events]";

fn number<T: std::str::FromStr>(name: &str, raw: String) -> Result<T, String>
where
    T::Err: std::fmt::Display,
{
    raw.parse().map_err(|e| format!("{name} {raw:?}: {e}"))
}

fn seconds(name: &str, raw: String) -> Result<Duration, String> {
    let s: f64 = number(name, raw)?;
    if !s.is_finite() || !(0.0..=86_400.0).contains(&s) {
        return Err(format!("{name} must be between 0 and 86400 seconds"));
    }
    Ok(Duration::from_secs_f64(s))
}

/// Parses `std::env::args()`.
pub fn parse() -> Result<Options, String> {
    parse_from(std::env::args().skip(1))
}

fn parse_from(args: impl IntoIterator<Item = String>) -> Result<Options, String> {
    let mut args = args.into_iter().peekable();
    let command = match args.peek().map(String::as_str) {
        Some("quick") => Command::Quick,
        Some("full") => Command::Full,
        Some("durable") => Command::Durable,
        Some("-h" | "--help" | "help") => return Err(USAGE.into()),
        Some(other) if !other.starts_with("--") => return Err(format!("unknown command {other:?}\n{USAGE}")),
        _ => Command::Quick,
    };
    if matches!(args.peek().map(String::as_str), Some("quick" | "full" | "durable")) {
        args.next();
    }
    let mut opts = Options {
        command,
        dir: PathBuf::from("./rill-data"),
        load: LoadOptions {
            skip: false,
            streams: 1024,
            records: 400_000,
            record_bytes: 256,
            clients: 4,
            window: 64,
        },
        reps: None,
        seconds: None,
        warmup: None,
        scale: 1.0,
        only: None,
        modes: if command == Command::Durable {
            vec![Mode::Durable]
        } else {
            vec![Mode::Durable, Mode::Relaxed]
        },
        peers: None,
        wal_io: WalIo::Dma,
        spin: SpinPolicy::default(),
        progress: true,
        events: true,
    };
    if command == Command::Durable {
        opts.only = Some(vec![Workload::Floor, Workload::A, Workload::B, Workload::C]);
    }
    while let Some(arg) = args.next() {
        let mut value = |name: &str| args.next().ok_or(format!("{name} needs a value"));
        let load_only = |name: &str| {
            if command == Command::Quick {
                Ok(())
            } else {
                Err(format!("{name} applies to quick only\n{USAGE}"))
            }
        };
        match arg.as_str() {
            "--dir" => opts.dir = PathBuf::from(value("--dir")?),
            "--reps" => opts.reps = Some(number("--reps", value("--reps")?)?),
            "--seconds" => opts.seconds = Some(seconds("--seconds", value("--seconds")?)?),
            "--warmup" => opts.warmup = Some(seconds("--warmup", value("--warmup")?)?),
            "--scale" => opts.scale = number("--scale", value("--scale")?)?,
            "--only" => {
                let list = value("--only")?;
                let ws = list
                    .split(',')
                    .map(|w| Workload::parse(w.trim()).ok_or(format!("unknown workload {w:?} (floor, A..I)")))
                    .collect::<Result<Vec<_>, _>>()?;
                opts.only = Some(ws);
            }
            "--modes" => {
                opts.modes = value("--modes")?
                    .split(',')
                    .map(|m| match m.trim() {
                        "durable" => Ok(Mode::Durable),
                        "relaxed" => Ok(Mode::Relaxed),
                        other => Err(format!("unknown mode {other:?} (durable, relaxed)")),
                    })
                    .collect::<Result<_, _>>()?;
            }
            "--peers" => {
                let list = value("--peers")?;
                let compiled = peers::compiled();
                let wanted: Vec<String> = if list == "none" {
                    Vec::new()
                } else {
                    list.split(',').map(|p| p.trim().to_string()).collect()
                };
                if let Some(p) = wanted.iter().find(|p| !compiled.contains(&p.as_str())) {
                    return Err(format!("peer {p:?} is not compiled in; compiled: {compiled:?}"));
                }
                opts.peers = Some(wanted);
            }
            "--wal-io" => {
                opts.wal_io = match value("--wal-io")?.as_str() {
                    "dma" => WalIo::Dma,
                    "std" => WalIo::Std,
                    "buffered" => WalIo::Buffered,
                    "mapped" => WalIo::Mapped,
                    other => return Err(format!("--wal-io is dma, std, buffered or mapped, not {other:?}")),
                }
            }
            "--spin" => {
                opts.spin = match value("--spin")?.as_str() {
                    "on" => SpinPolicy::default(),
                    "off" => SpinPolicy::OFF,
                    other => return Err(format!("--spin is on or off, not {other:?}")),
                }
            }
            "--no-progress" => opts.progress = false,
            "--no-events" => opts.events = false,
            "--skip-load" => {
                load_only("--skip-load")?;
                opts.load.skip = true;
            }
            "--streams" => {
                load_only("--streams")?;
                opts.load.streams = number("--streams", value("--streams")?)?;
            }
            "--records" => {
                load_only("--records")?;
                opts.load.records = number("--records", value("--records")?)?;
            }
            "--record-bytes" => {
                load_only("--record-bytes")?;
                opts.load.record_bytes = number("--record-bytes", value("--record-bytes")?)?;
            }
            "--clients" => {
                load_only("--clients")?;
                opts.load.clients = number("--clients", value("--clients")?)?;
            }
            "--window" => {
                load_only("--window")?;
                opts.load.window = number("--window", value("--window")?)?;
            }
            "-h" | "--help" => return Err(USAGE.into()),
            other => return Err(format!("unknown argument {other:?}\n{USAGE}")),
        }
    }
    let l = &opts.load;
    if l.streams == 0 || l.clients == 0 || l.window == 0 || l.record_bytes == 0 {
        return Err("streams, clients, window and record-bytes must be positive".into());
    }
    if opts.reps == Some(0) || opts.seconds.is_some_and(|s| s.is_zero()) {
        return Err("--reps and --seconds must be positive".into());
    }
    if !(opts.scale > 0.0 && opts.scale.is_finite()) {
        return Err("--scale must be positive".into());
    }
    if opts.modes.is_empty() {
        return Err("--modes needs at least one mode".into());
    }
    Ok(opts)
}

impl Options {
    /// The suite this invocation runs.
    pub fn suite(&self, exe: Option<PathBuf>) -> SuiteOptions {
        let mut profile = match self.command {
            Command::Quick => Profile::quick(),
            Command::Full | Command::Durable => Profile::full(),
        }
        .scaled(self.scale);
        if let Some(reps) = self.reps {
            profile.reps = reps;
        }
        if let Some(s) = self.seconds {
            profile.timing.measure = s;
        }
        if let Some(w) = self.warmup {
            profile.timing.warmup = w;
        }
        SuiteOptions {
            profile,
            dir: self.dir.clone(),
            modes: self.modes.clone(),
            peers: self
                .peers
                .clone()
                .unwrap_or_else(|| peers::compiled().into_iter().map(String::from).collect()),
            workloads: self.only.clone().unwrap_or_else(crate::suite::all_workloads),
            exe,
            progress: self.progress,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(args: &[&str]) -> Result<Options, String> {
        parse_from(args.iter().map(|s| s.to_string()))
    }

    #[test]
    fn quick_is_the_default() {
        let o = parse(&[]).unwrap();
        assert_eq!(o.command, Command::Quick);
        assert_eq!(o.dir, PathBuf::from("./rill-data"));
        assert_eq!(o.modes, vec![Mode::Durable, Mode::Relaxed]);
        let s = o.suite(None);
        assert_eq!(s.profile.name, "quick");
        assert_eq!(s.workloads.len(), Workload::ALL.len());
        let o = parse(&["--dir", "/tmp/x"]).unwrap();
        assert_eq!(o.command, Command::Quick);
        assert_eq!(o.dir, PathBuf::from("/tmp/x"));
    }

    #[test]
    fn options_shape_the_suite() {
        let o =
            parse(&["full", "--reps", "1", "--only", "a,B,floor", "--modes", "relaxed", "--peers", "none"])
                .unwrap();
        let s = o.suite(None);
        assert_eq!(s.profile.name, "full");
        assert_eq!(s.profile.reps, 1);
        assert_eq!(s.workloads, vec![Workload::A, Workload::B, Workload::Floor]);
        assert_eq!(s.modes, vec![Mode::Relaxed]);
        assert!(s.peers.is_empty());
        let o = parse(&["durable", "--seconds", "1", "--wal-io", "std"]).unwrap();
        assert_eq!(o.suite(None).profile.timing.measure, Duration::from_secs(1));
        assert_eq!(o.modes, vec![Mode::Durable]);
        assert_eq!(o.wal_io, WalIo::Std);
        assert_eq!(o.spin, SpinPolicy::default());
        assert_eq!(parse(&["durable", "--spin", "off"]).unwrap().spin, SpinPolicy::OFF);
        assert!(parse(&["durable", "--spin", "maybe"]).is_err());
        assert!(o.events);
        assert!(!parse(&["--no-events"]).unwrap().events);
        assert!(parse(&["full", "--records", "5"]).is_err());
        assert!(parse(&["--seconds", "0"]).is_err());
        assert!(parse(&["--only", "Z"]).is_err());
        assert!(parse(&["--peers", "nonexistent"]).is_err());
        assert!(parse(&["nonsense"]).is_err());
    }
}
