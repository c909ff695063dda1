//! A progress line on standard error: step `i` of `n`, what runs, elapsed
//! time and an estimate of what is left. On a terminal the line is
//! rewritten in place; otherwise one line per step.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

#[derive(Debug)]
pub struct Progress {
    total: usize,
    done: usize,
    started: Instant,
    enabled: bool,
    terminal: bool,
}

fn clock(d: Duration) -> String {
    let s = d.as_secs();
    if s >= 60 {
        format!("{}m{:02}s", s / 60, s % 60)
    } else {
        format!("{s}s")
    }
}

impl Progress {
    pub fn new(total: usize, enabled: bool) -> Progress {
        Progress {
            total,
            done: 0,
            started: Instant::now(),
            enabled,
            terminal: std::io::stderr().is_terminal(),
        }
    }

    /// Announces the next step.
    pub fn step(&mut self, what: &str) {
        if !self.enabled {
            return;
        }
        let elapsed = self.started.elapsed();
        let eta = if self.done == 0 {
            "?".to_string()
        } else {
            clock(elapsed.mul_f64((self.total - self.done) as f64 / self.done as f64))
        };
        let width = self.total.to_string().len();
        let bar_len = 20;
        let filled = (self.done * bar_len) / self.total.max(1);
        let bar: String = "#".repeat(filled) + &".".repeat(bar_len - filled);
        let line = format!(
            "[{bar}] {:>width$}/{} {} elapsed, ~{eta} left | {what}",
            self.done + 1,
            self.total,
            clock(elapsed)
        );
        let mut err = std::io::stderr().lock();
        if self.terminal {
            let _ = write!(err, "\r\x1b[2K{line}");
        } else {
            let _ = writeln!(err, "{line}");
        }
        let _ = err.flush();
        self.done += 1;
    }

    /// Ends the line (on a terminal).
    pub fn finish(&self) {
        if self.enabled && self.terminal {
            let mut err = std::io::stderr().lock();
            let _ = writeln!(err, "\r\x1b[2Kdone: {} steps in {}", self.total, clock(self.started.elapsed()));
        }
    }

    /// Prints a message without breaking the progress line.
    pub fn note(&self, message: &str) {
        let mut err = std::io::stderr().lock();
        if self.enabled && self.terminal {
            let _ = writeln!(err, "\r\x1b[2K{message}");
        } else {
            let _ = writeln!(err, "{message}");
        }
    }
}
