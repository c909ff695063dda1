//! Running the child process of a crash test: start it on a data
//! directory, wait for its `O` line, let it run, kill it with `SIGKILL` and
//! collect its transcript from its stdout pipe. Shared by the kill -9
//! crash test and the power-loss test. Invariants: the child is always
//! killed and reaped, even when the test panics; only whole lines count
//! (a line the kill cut short is dropped and reported).

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use super::child::Resend;

/// How long a child may take to open the engine (recovery included).
const OPEN_TIMEOUT: Duration = Duration::from_secs(60);

/// What every child of one test run gets.
#[derive(Clone, Copy, Debug)]
pub struct ChildSpec<'a> {
    /// The child binary (`crash_child`).
    pub exe: &'a Path,
    pub data: &'a Path,
    /// Where resend files and the children's stderr go.
    pub work: &'a Path,
    pub seed: u64,
    /// Extra arguments after the four positional ones.
    pub args: &'a [&'a str],
}

/// Parses a number from the environment (decimal or `0x` hex).
pub fn env_number(name: &str) -> Option<u64> {
    let text = std::env::var(name).ok()?;
    let text = text.trim();
    let parsed = match text.strip_prefix("0x") {
        Some(hex) => u64::from_str_radix(hex, 16),
        None => text.parse(),
    };
    Some(parsed.unwrap_or_else(|_| panic!("{name}={text} is not a number")))
}

/// A child that is killed if the test panics while it runs.
struct Running(Child);

impl Drop for Running {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// What one child left behind.
#[derive(Debug)]
pub struct ChildRun {
    pub lines: Vec<String>,
    /// A last line cut short by the kill (ignored).
    pub partial: bool,
    pub ran_for: Duration,
}

fn stderr_of(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_default()
}

/// Starts the child of `cycle`, waits for it to open the engine, lets it
/// run for `run_for` (calling `midway`'s action once its time has come),
/// kills it with SIGKILL and returns its transcript.
pub fn run_child(
    spec: &ChildSpec<'_>,
    cycle: u32,
    resends: &[Resend],
    run_for: Duration,
    mut midway: Option<(Duration, &mut dyn FnMut())>,
) -> ChildRun {
    let ChildSpec { exe, data, work, seed, args } = *spec;
    let ctx = format!("seed {seed} cycle {cycle}");
    let resend_path = work.join(format!("resend-{cycle}.txt"));
    std::fs::write(&resend_path, Resend::file(resends)).expect("write the resend file");
    let stderr_path = work.join(format!("child-{cycle}.stderr"));
    let stderr = std::fs::File::create(&stderr_path).expect("create the child's stderr file");
    let mut child = Running(
        Command::new(exe)
            .arg(data)
            .arg(seed.to_string())
            .arg(cycle.to_string())
            .arg(&resend_path)
            .args(args)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .expect("spawn crash_child"),
    );
    let stdout = child.0.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel::<Result<String, String>>();
    let reader = thread::spawn(move || {
        let mut reader = BufReader::new(stdout);
        loop {
            let mut line = String::new();
            match reader.read_line(&mut line) {
                Ok(0) => return false,
                Ok(_) if line.ends_with('\n') => {
                    line.pop();
                    if tx.send(Ok(line)).is_err() {
                        return false;
                    }
                }
                Ok(_) => return true,
                Err(e) => {
                    let _ = tx.send(Err(format!("reading the transcript: {e}")));
                    return false;
                }
            }
        }
    });

    match rx.recv_timeout(OPEN_TIMEOUT) {
        Ok(Ok(line)) if line == "O" => {}
        other => {
            let status = child.0.try_wait();
            panic!(
                "{ctx}: the child did not report an open engine ({other:?}, status {status:?}); its stderr:\n{}",
                stderr_of(&stderr_path)
            );
        }
    }
    let opened = Instant::now();
    if let Some((at, action)) = midway.as_mut() {
        thread::sleep(*at);
        action();
    }
    thread::sleep(run_for.saturating_sub(opened.elapsed()));
    if let Ok(Some(status)) = child.0.try_wait() {
        panic!(
            "{ctx}: the child exited by itself ({status}) before the kill; its stderr:\n{}",
            stderr_of(&stderr_path)
        );
    }
    child.0.kill().expect("kill the child");
    let ran_for = opened.elapsed();
    child.0.wait().expect("reap the child");
    let partial = reader.join().expect("transcript reader");
    let mut lines = vec!["O".to_string()];
    for line in rx.try_iter() {
        lines.push(line.unwrap_or_else(|e| panic!("{ctx}: {e}")));
    }
    ChildRun { lines, partial, ran_for }
}
