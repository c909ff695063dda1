//! NATS JetStream as a peer (feature `nats`): a real streaming server on
//! the same machine, reached through the `async-nats` client.
//!
//! Each measured run starts its own `nats-server` (found through
//! `RILL_BENCH_NATS_SERVER`, then `PATH`; `bench/scripts/install-nats.sh`
//! installs the pinned version) listening on 127.0.0.1 only, with
//! JetStream storing files in the run's scratch directory, and stops it
//! when the run is closed. One JetStream stream `BENCH` takes subjects
//! `s.>`; record `(stream, seq)` is published to subject `s.<stream>`.
//! Durable mode sets `sync_interval: always` (the server fsyncs before it
//! acknowledges); relaxed mode leaves the server's default (acknowledged
//! once written, synced every two minutes). A write publishes every record
//! of the group and waits for every acknowledgement.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use async_nats::jetstream::{self, stream};
use bytes::Bytes;

use super::SyncStore;
use crate::util::{Mode, Result};

/// Environment variable naming the server binary.
pub const SERVER_ENV: &str = "RILL_BENCH_NATS_SERVER";

/// The server binary to run.
pub fn server_binary() -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(SERVER_ENV) {
        return Some(PathBuf::from(p));
    }
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path).map(|d| d.join("nats-server")).find(|p| p.is_file())
}

/// A running `nats-server`, killed (and reaped) when dropped, whatever
/// path leaves the function that started it.
#[derive(Debug)]
struct Server(Child);

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[derive(Debug)]
pub struct NatsStore {
    runtime: tokio::runtime::Runtime,
    js: jetstream::Context,
    // Declared last: dropped after the client.
    _server: Server,
}

fn free_port() -> Result<u16> {
    Ok(TcpListener::bind("127.0.0.1:0")?.local_addr()?.port())
}

impl NatsStore {
    pub fn open(dir: &Path, mode: Mode) -> Result<NatsStore> {
        let bin = server_binary().ok_or_else(|| {
            format!("no nats-server: run bench/scripts/install-nats.sh and export {SERVER_ENV} as it prints")
        })?;
        let port = free_port()?;
        let store = dir.join("jetstream");
        let sync = match mode {
            Mode::Durable => "  sync_interval: always\n",
            Mode::Relaxed => "",
        };
        let conf = format!(
            "listen: 127.0.0.1:{port}\nhttp_port: -1\njetstream {{\n  store_dir: \"{}\"\n{sync}}}\n",
            store.display()
        );
        let conf_path = dir.join("nats.conf");
        std::fs::write(&conf_path, conf)?;
        let server = Command::new(&bin)
            .arg("-c")
            .arg(&conf_path)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("starting {}: {e}", bin.display()))?;
        let server = Server(server);
        let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
        let started = Instant::now();
        let client = loop {
            match runtime.block_on(async_nats::connect(format!("127.0.0.1:{port}"))) {
                Ok(c) => break c,
                Err(e) if started.elapsed() > Duration::from_secs(10) => {
                    return Err(format!("nats-server on port {port} did not accept connections: {e}").into());
                }
                Err(_) => std::thread::sleep(Duration::from_millis(50)),
            }
        };
        let js = {
            let _inside = runtime.enter(); // the context starts a task
            jetstream::new(client)
        };
        let created = runtime.block_on(js.get_or_create_stream(stream::Config {
            name: "BENCH".into(),
            subjects: vec!["s.>".into()],
            storage: stream::StorageType::File,
            ..Default::default()
        }));
        if let Err(e) = created {
            return Err(format!("creating the JetStream stream: {e}").into());
        }
        Ok(NatsStore { runtime, js, _server: server })
    }
}

impl SyncStore for NatsStore {
    fn write(&self, keys: &[(u64, u64)], payload: &[u8]) -> Result<()> {
        let payload = Bytes::copy_from_slice(payload);
        self.runtime.block_on(async {
            let mut acks = Vec::with_capacity(keys.len());
            for (stream, _) in keys {
                acks.push(self.js.publish(format!("s.{stream}"), payload.clone()).await?);
            }
            for ack in acks {
                ack.await?;
            }
            Ok::<(), crate::util::BoxError>(())
        })
    }

    fn close(self: Box<Self>) -> Result<()> {
        drop(self); // the server is stopped with it
        Ok(())
    }
}
