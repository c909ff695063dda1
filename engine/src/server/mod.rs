//! The HTTP front end (feature `server`): the Durable Streams protocol
//! served by hyper's HTTP/1.1 on the engine's own cores.
//!
//! Layout, one idea per file: [`cli`] (flags), [`path`] (URL paths to
//! stream ids), [`protocol`] (offsets, integers, timestamps, cursor),
//! [`headers`] (names and the headers every response carries), [`json`]
//! (JSON mode's body rules), [`command`] (the pure request-to-command
//! mapping), [`status`] (failures and engine errors to statuses),
//! [`respond`] (response building), [`handler`] (running commands on the
//! engine, long-poll), [`sse`] (server-sent events), [`observe`]
//! (`/health`, `/metrics`), [`io`] and [`timer`] (glommio under hyper),
//! [`state`] (options, shutdown latch, counters) and [`listen`] (accept
//! loops per core, graceful shutdown). [`run`] is `rill serve`.
//!
//! Invariants: no request gets a 2xx for a write before the engine
//! acknowledged it; no input reaches a panic (every refusal is a typed
//! [`status::Failure`] with a message); no tokio: everything runs on the
//! engine's glommio executors.

pub mod cli;
pub mod command;
pub mod handler;
pub mod headers;
pub mod io;
pub mod json;
pub mod listen;
pub mod observe;
pub mod path;
pub mod protocol;
pub mod respond;
pub mod sse;
pub mod state;
pub mod status;
pub mod timer;

pub use cli::{Cli, ServeArgs};
pub use command::{map_request, Command};
pub use listen::Server;
pub use state::ServeOptions;

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
