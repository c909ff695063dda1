//! The servers the `http` profile measures, each a child process on
//! 127.0.0.1 with a fresh data directory: `rill serve` and the official
//! Durable Streams Rust server (`durable-streams-server` 0.1.5, installed
//! by `bench/scripts/install-ds-server.sh`) in its default durable mode.
//! Both get `--long-poll-timeout-ms 500`. A server is killed and its
//! directory removed when its handle is dropped.

use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::util::Result;

/// Environment variable naming the `rill` binary (default: next to
/// `rill-bench`, i.e. `cargo build --release -p rill --features server`).
pub const RILL_ENV: &str = "RILL_BENCH_RILL_SERVER";
/// Environment variable naming the official server's binary.
pub const DS_ENV: &str = "RILL_BENCH_DS_SERVER";
/// Where `install-ds-server.sh` puts it by default.
pub const DS_DEFAULT: &str = ".cache/rill-bench/durable-streams-0.1.5/bin/durable-streams-server";

/// Which server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    Rill,
    Official,
}

impl Kind {
    pub fn name(self) -> &'static str {
        match self {
            Kind::Rill => "rill",
            Kind::Official => "official",
        }
    }
}

/// Finds the binary of a server.
pub fn binary(kind: Kind) -> Result<PathBuf> {
    let (env, fallback) = match kind {
        Kind::Rill => (RILL_ENV, std::env::current_exe()?.with_file_name("rill")),
        Kind::Official => {
            (DS_ENV, PathBuf::from(std::env::var_os("HOME").unwrap_or_default()).join(DS_DEFAULT))
        }
    };
    let path = std::env::var_os(env).map(PathBuf::from).unwrap_or(fallback);
    if path.is_file() {
        return Ok(path);
    }
    Err(match kind {
        Kind::Rill => format!(
            "no rill binary at {}: run `cargo build --release -p rill --features server` or set {RILL_ENV}",
            path.display()
        ),
        Kind::Official => format!(
            "no official server at {}: run bench/scripts/install-ds-server.sh or set {DS_ENV}",
            path.display()
        ),
    }
    .into())
}

/// A running server.
#[derive(Debug)]
pub struct Server {
    pub kind: Kind,
    pub addr: SocketAddr,
    child: Child,
    dir: PathBuf,
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl Server {
    /// Starts `kind` with a fresh directory under `scratch`.
    pub fn start(kind: Kind, scratch: &Path, cores: usize) -> Result<Server> {
        let bin = binary(kind)?;
        let port = free_port()?;
        let dir = scratch.join(format!("{}-{port}", kind.name()));
        std::fs::create_dir_all(&dir)?;
        let mut cmd = Command::new(&bin);
        match kind {
            Kind::Rill => {
                cmd.arg("serve")
                    .arg("--dir")
                    .arg(dir.join("data"))
                    .args(["--listen", &format!("127.0.0.1:{port}"), "--long-poll-timeout-ms", "500"])
                    .args(["--cores", &cores.to_string()]);
            }
            Kind::Official => {
                cmd.args(["--host", "127.0.0.1", "--port", &port.to_string(), "--data-dir"])
                    .arg(dir.join("data"))
                    .args(["--long-poll-timeout-ms", "500"]);
            }
        }
        let log = std::fs::File::create(dir.join("server.log"))?;
        let child = cmd.stdin(Stdio::null()).stdout(log.try_clone()?).stderr(log).spawn()?;
        let addr: SocketAddr = format!("127.0.0.1:{port}").parse()?;
        let mut server = Server { kind, addr, child, dir };
        let deadline = Instant::now() + Duration::from_secs(30);
        while TcpStream::connect(addr).is_err() {
            if let Some(status) = server.child.try_wait()? {
                let log = std::fs::read_to_string(server.dir.join("server.log")).unwrap_or_default();
                return Err(format!("{} exited with {status} while starting: {log}", kind.name()).into());
            }
            if Instant::now() > deadline {
                return Err(format!("{} did not start listening in 30 s", kind.name()).into());
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        Ok(server)
    }

    /// Bytes the server's data directory holds.
    pub fn data_bytes(&self) -> u64 {
        crate::util::dir_bytes(&self.dir.join("data"))
    }
}
