//! Command-line arguments of `rill-bench`.
//!
//! ```text
//! rill-bench [quick] [--dir D] [--streams N] [--records N] [--record-bytes N]
//!                    [--clients N] [--window N] [durable options]
//! rill-bench durable [--dir D] [durable options]
//!
//! durable options: [--seconds S] [--warmup S] [--floor-writes N] [--wal-io dma|std]
//! ```
//!
//! `quick` is the default command. The durable options set the durable
//! workload's cells: `durable` runs them for 3 s each by default, `quick`
//! runs a short version of 1.5 s each.

use std::path::PathBuf;
use std::time::Duration;

use rill::WalIo;

/// Which workload to run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Command {
    /// Load, read back and verify, then the short durable workload.
    Quick,
    /// The durable workload alone.
    Durable,
}

impl Command {
    pub fn name(self) -> &'static str {
        match self {
            Command::Quick => "quick",
            Command::Durable => "durable",
        }
    }
}

/// The bulk load of `quick`.
#[derive(Clone, Debug)]
pub struct LoadOptions {
    pub streams: usize,
    pub records: usize,
    pub record_bytes: usize,
    pub clients: usize,
    pub window: usize,
}

/// The durable workload: timed cells plus the device floor.
#[derive(Clone, Debug)]
pub struct DurableOptions {
    /// Measured time of each cell.
    pub cell: Duration,
    /// Unmeasured time before each cell's measurement starts.
    pub warmup: Duration,
    /// Recorded 4 KiB writes of the device floor.
    pub floor_writes: usize,
    pub wal_io: WalIo,
}

/// Everything one invocation needs.
#[derive(Clone, Debug)]
pub struct Options {
    pub command: Command,
    pub dir: PathBuf,
    pub load: LoadOptions,
    pub durable: DurableOptions,
}

pub const USAGE: &str = "usage:
  rill-bench [quick] [--dir D] [--streams N] [--records N] [--record-bytes N] [--clients N] [--window N]
                     [--seconds S] [--warmup S] [--floor-writes N] [--wal-io dma|std]
  rill-bench durable [--dir D] [--seconds S] [--warmup S] [--floor-writes N] [--wal-io dma|std]";

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
        Some("durable") => Command::Durable,
        Some("-h" | "--help" | "help") => return Err(USAGE.into()),
        Some(other) if !other.starts_with("--") => {
            return Err(format!("unknown command {other:?}\n{USAGE}"));
        }
        _ => Command::Quick,
    };
    if matches!(args.peek().map(String::as_str), Some("quick" | "durable")) {
        args.next();
    }
    let mut opts = Options {
        command,
        dir: PathBuf::from("./rill-data"),
        load: LoadOptions { streams: 1024, records: 400_000, record_bytes: 256, clients: 4, window: 64 },
        durable: DurableOptions {
            cell: Duration::from_secs_f64(if command == Command::Quick { 1.5 } else { 3.0 }),
            warmup: Duration::from_secs_f64(if command == Command::Quick { 0.3 } else { 0.5 }),
            floor_writes: 1000,
            wal_io: WalIo::Dma,
        },
    };
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
            "--seconds" => opts.durable.cell = seconds("--seconds", value("--seconds")?)?,
            "--warmup" => opts.durable.warmup = seconds("--warmup", value("--warmup")?)?,
            "--floor-writes" => {
                opts.durable.floor_writes = number("--floor-writes", value("--floor-writes")?)?
            }
            "--wal-io" => {
                opts.durable.wal_io = match value("--wal-io")?.as_str() {
                    "dma" => WalIo::Dma,
                    "std" => WalIo::Std,
                    other => return Err(format!("--wal-io is dma or std, not {other:?}")),
                }
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
    if opts.durable.cell.is_zero() {
        return Err("--seconds must be positive".into());
    }
    if opts.durable.floor_writes == 0 {
        return Err("--floor-writes must be positive".into());
    }
    Ok(opts)
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
        assert_eq!(o.durable.cell, Duration::from_millis(1500));
        let o = parse(&["--dir", "/tmp/x"]).unwrap();
        assert_eq!(o.command, Command::Quick);
        assert_eq!(o.dir, PathBuf::from("/tmp/x"));
    }

    #[test]
    fn durable_takes_seconds_and_rejects_load_flags() {
        let o = parse(&["durable", "--seconds", "1", "--wal-io", "std"]).unwrap();
        assert_eq!(o.command, Command::Durable);
        assert_eq!(o.durable.cell, Duration::from_secs(1));
        assert_eq!(o.durable.wal_io, WalIo::Std);
        assert!(parse(&["durable", "--records", "5"]).is_err());
        assert!(parse(&["durable", "--seconds", "0"]).is_err());
        assert!(parse(&["nonsense"]).is_err());
    }
}
