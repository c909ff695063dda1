//! Where requests run: one accept loop per engine core, each with its own
//! `SO_REUSEPORT` listener, and the graceful shutdown.
//!
//! [`Server::start`] first binds the address once without `SO_REUSEPORT`
//! (so an address held by any other socket, a second rill included, is a
//! clear "in use" error, and port 0 is resolved to one concrete port),
//! releases it, then asks every engine core (through
//! [`Engine::spawn_on_cores`]) to bind its own glommio listener on that
//! port and accept on it. The kernel spreads new connections over the
//! cores' listeners; each connection is served by hyper's HTTP/1.1
//! (keep-alive) state machine on the core that accepted it, and each
//! request it carries is routed from there to the stream's owner core
//! through the engine's mailboxes. Per core, at most
//! `max_connections_per_core` connections are open; more are closed as
//! soon as accepted (a connection flood costs an accept and a close).
//! Request headers must arrive within `header_read_timeout` (hyper's
//! timer, see [`super::timer`]) and a client that stops reading is cut off
//! by the socket's write timeout, so no client can hold a core's
//! resources forever.
//!
//! Shutdown: [`Server::shutdown`] trips the latch; accept loops stop,
//! idle connections close, open requests finish (long-polls answer at
//! once, SSE bodies end), then, once no connection is open (or the drain
//! timeout passed), the engine is shut down cleanly.

use std::cell::Cell;
use std::convert::Infallible;
use std::net::SocketAddr;
use std::pin::pin;
use std::rc::Rc;
use std::sync::atomic::Ordering;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::future::{select, Either};
use glommio::net::{TcpListener, TcpStream};
use hyper::server::conn::http1;
use hyper::service::service_fn;

use super::handler::handle;
use super::io::Io;
use super::state::Ctx;
use super::state::{ServeOptions, Shared};
use super::timer::CoreTimer;
use crate::Engine;

/// A client that does not read what it is sent for this long is cut off.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(30);

/// A running HTTP server on an engine's cores.
#[derive(Debug)]
pub struct Server {
    engine: Engine,
    shared: Arc<Shared>,
    addr: SocketAddr,
}

impl Server {
    /// Binds `addr` on every core of `engine` and starts serving.
    pub fn start(engine: Engine, addr: SocketAddr, options: ServeOptions) -> Result<Server, String> {
        let probe = std::net::TcpListener::bind(addr).map_err(|e| match e.kind() {
            std::io::ErrorKind::AddrInUse => format!("address {addr} is already in use"),
            _ => format!("cannot listen on {addr}: {e}"),
        })?;
        let addr = probe.local_addr().map_err(|e| format!("cannot read the bound address: {e}"))?;
        drop(probe);
        let shared = Arc::new(Shared { options, ..Shared::default() });
        let (ready_tx, ready_rx) = crossbeam_channel::bounded::<Result<usize, String>>(engine.cores());
        let (e, s) = (engine.clone(), shared.clone());
        let spawned = futures::executor::block_on(engine.spawn_on_cores(move |core| {
            let (engine, shared, ready) = (e.clone(), s.clone(), ready_tx.clone());
            Box::pin(accept_loop(core, addr, engine, shared, ready))
        }));
        if let Err(err) = spawned {
            shared.shutdown.trip();
            return Err(format!("cannot start the accept loops: {err}"));
        }
        for _ in 0..engine.cores() {
            let outcome = ready_rx
                .recv_timeout(Duration::from_secs(10))
                .unwrap_or_else(|_| Err("a core did not start its listener in time".into()));
            if let Err(err) = outcome {
                shared.shutdown.trip();
                return Err(err);
            }
        }
        tracing::info!(%addr, cores = engine.cores(), "http server listening");
        Ok(Server { engine, shared, addr })
    }

    /// The address the server listens on (port 0 resolved).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// The state every connection shares (options, shutdown latch, counters).
    pub fn shared(&self) -> &Arc<Shared> {
        &self.shared
    }

    /// Stops accepting, lets open requests finish (within the drain
    /// timeout), then shuts the engine down cleanly.
    pub fn shutdown(&self) -> crate::Result<()> {
        self.shared.shutdown.trip();
        let deadline = Instant::now() + self.shared.options.drain_timeout;
        while self.shared.stats.connections_active.load(Ordering::Acquire) > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(5));
        }
        let left = self.shared.stats.connections_active.load(Ordering::Acquire);
        if left > 0 {
            tracing::warn!(connections = left, "drain timeout passed; closing the rest with the engine");
        }
        futures::executor::block_on(self.engine.shutdown())
    }
}

async fn accept_loop(
    core: usize,
    addr: SocketAddr,
    engine: Engine,
    shared: Arc<Shared>,
    ready: crossbeam_channel::Sender<Result<usize, String>>,
) {
    let listener = match bind_reusable(addr) {
        Ok(l) => {
            let _ = ready.send(Ok(core));
            l
        }
        Err(e) => {
            let _ = ready.send(Err(format!("core {core} cannot listen on {addr}: {e}")));
            return;
        }
    };
    drop(ready);
    let ctx = Rc::new(Ctx { engine, shared: shared.clone() });
    let open_here = Rc::new(Cell::new(0usize));
    loop {
        let accept = pin!(listener.accept());
        let stop = pin!(shared.shutdown.wait());
        match select(accept, stop).await {
            Either::Right(_) => break,
            Either::Left((Err(e), _)) => {
                // Out of file descriptors and the like: back off a little
                // rather than spin on the error.
                tracing::warn!(core, error = %e, "accept failed");
                glommio::timer::sleep(Duration::from_millis(10)).await;
            }
            Either::Left((Ok(stream), _)) => {
                if open_here.get() >= shared.options.max_connections_per_core {
                    shared.stats.connections_refused.fetch_add(1, Ordering::Relaxed);
                    drop(stream);
                    continue;
                }
                glommio::spawn_local(serve_connection(ctx.clone(), stream, open_here.clone())).detach();
            }
        }
    }
    tracing::debug!(core, "accept loop stopped");
}

/// Counts an open connection, on its core and in the stats.
struct Open {
    here: Rc<Cell<usize>>,
    shared: Arc<Shared>,
}

impl Open {
    fn new(here: Rc<Cell<usize>>, shared: Arc<Shared>) -> Self {
        here.set(here.get() + 1);
        shared.stats.connections_accepted.fetch_add(1, Ordering::Relaxed);
        shared.stats.connections_active.fetch_add(1, Ordering::AcqRel);
        Open { here, shared }
    }
}

impl Drop for Open {
    fn drop(&mut self) {
        self.here.set(self.here.get() - 1);
        self.shared.stats.connections_active.fetch_sub(1, Ordering::AcqRel);
    }
}

async fn serve_connection(ctx: Rc<Ctx>, stream: TcpStream, here: Rc<Cell<usize>>) {
    let shared = ctx.shared.clone();
    let _open = Open::new(here, shared.clone());
    let _ = stream.set_nodelay(true);
    if let Err(e) = stream.set_write_timeout(Some(WRITE_TIMEOUT)) {
        tracing::debug!(error = %e, "cannot set the write timeout");
    }
    let service = service_fn(move |req| {
        let ctx = ctx.clone();
        async move { Ok::<_, Infallible>(handle(ctx, req).await) }
    });
    let mut builder = http1::Builder::new();
    builder
        .timer(CoreTimer)
        .header_read_timeout(shared.options.header_read_timeout)
        .keep_alive(true)
        .writev(false);
    let mut conn = pin!(builder.serve_connection(Io::new(stream), service));
    let stop = pin!(shared.shutdown.wait());
    match select(conn.as_mut(), stop).await {
        Either::Left((result, _)) => {
            if let Err(e) = result {
                tracing::debug!(error = %e, "connection ended with an error");
            }
        }
        Either::Right(_) => {
            conn.as_mut().graceful_shutdown();
            let _ = conn.await;
        }
    }
}

/// A listener for one core: `SO_REUSEPORT` (one per core on one port) and
/// `SO_REUSEADDR`, which the connections it accepts inherit; without it a
/// server killed with connections open leaves sockets that keep a
/// restarted server from binding its own port for minutes.
#[allow(unsafe_code)]
fn bind_reusable(addr: SocketAddr) -> std::io::Result<TcpListener> {
    use std::os::fd::IntoRawFd;
    let socket = socket2::Socket::new(socket2::Domain::for_address(addr), socket2::Type::STREAM, None)?;
    socket.set_reuse_address(true)?;
    socket.set_reuse_port(true)?;
    socket.bind(&addr.into())?;
    socket.listen(1024)?;
    let fd = socket.into_raw_fd();
    // SAFETY: `fd` is the listening socket just created above; `into_raw_fd`
    // gave up its ownership, so the listener becomes its only owner and
    // closes it once.
    Ok(unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) })
}
