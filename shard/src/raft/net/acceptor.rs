//! [`Acceptor`]: a node's one raft address, shared by all its cores.
//!
//! A group lives on the same core index of every node, so a connection
//! belongs to one core pair. The acceptor is a small thread that accepts
//! on the node's raft address, reads each peer's hello (bounded by a read
//! timeout, on a thread of its own so a silent peer never stalls the
//! accept loop), and hands the stream with its hello to the core the hello
//! names; the core answers the handshake and serves the connection on its
//! executor (`TcpNet::serve_accepted`). A hello that does not decode or
//! names a core this node does not have closes the connection. A node
//! that is joining a cluster and has no cluster id yet adopts the id of the
//! first hello that otherwise matches it (`identity.rs`), durably, before
//! the core sees the connection. Invariant:
//! the acceptor never reads past the hello, so the core sees the stream
//! exactly at its first frame.

use std::io::Read;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Duration;

use futures::channel::mpsc;

use super::handshake::{Hello, HELLO_LEN};
use super::super::identity::ClusterIdentity;
use crate::error::{Error, Result};

/// Where a core receives the connections its peers dialled.
pub type Incoming = mpsc::UnboundedReceiver<(TcpStream, Hello)>;

/// How long a peer may take to send its hello.
const HELLO_TIMEOUT: Duration = Duration::from_secs(2);

/// The accept thread of a node's raft address; stops when dropped.
#[derive(Debug)]
pub struct Acceptor {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl Acceptor {
    /// Binds `addr` and starts accepting for `cores` cores of the node
    /// `ours` introduces (its cluster id is `identity`'s); returns the
    /// acceptor and each core's receiving end.
    pub fn start(
        addr: SocketAddr,
        cores: usize,
        ours: Hello,
        identity: Arc<ClusterIdentity>,
    ) -> Result<(Acceptor, Vec<Incoming>)> {
        let listener = TcpListener::bind(addr)
            .map_err(|e| Error::io("bind the raft address", std::io::Error::new(e.kind(), format!("{addr}: {e}"))))?;
        listener.set_nonblocking(true).map_err(|e| Error::io("set the raft listener nonblocking", e))?;
        let addr = listener.local_addr().map_err(|e| Error::io("read the raft listener's address", e))?;
        let (senders, receivers): (Vec<_>, Vec<_>) = (0..cores).map(|_| mpsc::unbounded()).unzip();
        let stop = Arc::new(AtomicBool::new(false));
        let stopping = stop.clone();
        let thread = std::thread::Builder::new()
            .name("rill-raft-accept".into())
            .spawn(move || accept_loop(listener, senders, stopping, Joining { ours, identity }))
            .map_err(|e| Error::io("start the raft accept thread", e))?;
        Ok((Acceptor { addr, stop, thread: Some(thread) }, receivers))
    }

    /// The address it listens on (the bound port when asked for port 0).
    pub fn addr(&self) -> SocketAddr {
        self.addr
    }
}

impl Drop for Acceptor {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Release);
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// What adopting a cluster id needs: this node's hello and identity.
#[derive(Clone)]
struct Joining {
    ours: Hello,
    identity: Arc<ClusterIdentity>,
}

impl Joining {
    /// Adopts `peer`'s cluster id when this node has none and `peer`
    /// otherwise belongs with it.
    fn adopt(&self, peer: &Hello) -> Result<()> {
        if self.identity.id() != 0 {
            return Ok(());
        }
        Hello { cluster: peer.cluster, core: peer.core, ..self.ours }.accept(peer, None)?;
        self.identity.adopt(peer.cluster).map(|_| ())
    }
}

fn accept_loop(
    listener: TcpListener,
    cores: Vec<mpsc::UnboundedSender<(TcpStream, Hello)>>,
    stop: Arc<AtomicBool>,
    joining: Joining,
) {
    let cores = Arc::new(cores);
    while !stop.load(Ordering::Acquire) {
        match listener.accept() {
            Ok((stream, peer)) => {
                let (cores, joining) = (cores.clone(), joining.clone());
                let routed = std::thread::Builder::new()
                    .name("rill-raft-hello".into())
                    .spawn(move || route(stream, peer, &cores, &joining));
                if let Err(err) = routed {
                    tracing::warn!(error = %err, "could not start a thread to read a replica's hello");
                }
            }
            Err(err) if err.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(20));
            }
            Err(err) => {
                tracing::warn!(error = %err, "accepting a replica connection failed");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }
}

/// Reads one connection's hello and hands it to its core.
fn route(
    mut stream: TcpStream,
    peer: SocketAddr,
    cores: &[mpsc::UnboundedSender<(TcpStream, Hello)>],
    joining: &Joining,
) {
    let read = (|| -> std::io::Result<[u8; HELLO_LEN]> {
        stream.set_nonblocking(false)?;
        stream.set_read_timeout(Some(HELLO_TIMEOUT))?;
        let mut hello = [0u8; HELLO_LEN];
        stream.read_exact(&mut hello)?;
        stream.set_read_timeout(None)?;
        Ok(hello)
    })();
    let hello = read
        .map_err(|e| Error::io("read replication handshake", e))
        .and_then(|b| Hello::decode(&b))
        .and_then(|hello| joining.adopt(&hello).map(|()| hello));
    let hello = match hello {
        Ok(hello) => hello,
        Err(err) => {
            tracing::debug!(%peer, error = %err, "refused a replica connection");
            return;
        }
    };
    match cores.get(usize::from(hello.core)) {
        Some(core) => {
            let _ = core.unbounded_send((stream, hello));
        }
        None => tracing::warn!(%peer, core = hello.core, "a peer dialled a core this node does not have"),
    }
}
