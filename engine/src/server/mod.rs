//! The HTTP front end (feature `server`): the Durable Streams protocol
//! served by hyper's HTTP/1.1 on the engine's own cores.
//!
//! Layout, one idea per file (the modules are private; the face is the
//! re-exports below): `cli` (flags), `path` (URL paths to
//! stream ids), `protocol` (offsets, integers, timestamps, cursor),
//! `headers` (names and the headers every response carries), `json`
//! (JSON mode's body rules), `command` (the pure request-to-command
//! mapping), `status` (failures and engine errors to statuses),
//! `respond` (response building), `handler` (running commands on the
//! engine, long-poll), `sse` (server-sent events), `observe`
//! (`/health`, `/metrics`), `io` and `timer` (glommio under hyper),
//! `state` (options, shutdown latch, counters, the handlers' `Ctx`),
//! `cluster_admin` (`/v1/cluster`: members and membership changes),
//! `cluster_cli` (`rill cluster`, the operator's client of it),
//! `forward` (a follower's requests to its group's leader) and `listen`
//! (accept loops per core, graceful shutdown). [`run`] is `rill serve`.
//!
//! Invariants: no request gets a 2xx for a write before the engine
//! acknowledged it; no input reaches a panic (every refusal is a typed
//! [`Failure`] with a message); no tokio: everything runs on the
//! engine's glommio executors.

mod cli;
mod cluster_admin;
mod cluster_cli;
mod command;
mod forward;
mod handler;
mod headers;
mod io;
mod json;
mod listen;
mod observe;
mod path;
mod protocol;
mod respond;
mod sse;
mod state;
mod status;
mod timer;

pub use cli::{Cli, ClusterCommand, Command as Subcommand, DurabilityArg, ServeArgs, WalIoArg};
pub use cluster_cli::run as run_cluster;
pub use command::{map_request, AppendCmd, Command as HttpCommand, CreateCmd, ForkSpec, Live, ReadCmd};
pub use listen::Server;
pub use protocol::{format_offset, OffsetSpec};
pub use state::{HttpStats, ServeOptions, Shared, Shutdown, ShutdownWait};
pub use status::Failure;

use crate::Engine;

/// `rill serve`: opens the engine, serves until SIGINT or SIGTERM, then
/// shuts down gracefully. Prints `rill listening on http://ADDR` on stdout
/// once every core accepts connections.
pub fn run(args: &ServeArgs) -> Result<(), String> {
    use std::io::Write as _;
    let resolved = args.resolve()?;
    let dir = resolved.config.data_dir().display().to_string();
    // Signals first, so one that arrives while starting is not lost.
    let mut signals =
        signal_hook::iterator::Signals::new([signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM])
            .map_err(|e| format!("cannot install signal handlers: {e}"))?;
    let engine =
        Engine::open(resolved.config).map_err(|e| format!("cannot open the data directory {dir}: {e}"))?;
    let server = match Server::start(engine.clone(), resolved.addr, resolved.options) {
        Ok(s) => s,
        Err(e) => {
            let _ = futures::executor::block_on(engine.shutdown());
            return Err(e);
        }
    };
    println!("rill listening on http://{}", server.local_addr());
    let _ = std::io::stdout().flush();
    let signal = signals.forever().next();
    tracing::info!(?signal, "shutting down");
    eprintln!("rill: shutting down");
    server.shutdown().map_err(|e| format!("the engine did not shut down cleanly: {e}"))
}
