//! [`TcpNet`]: a node's replica connections over TCP, on its glommio
//! executor.
//!
//! Each node listens on its raft address; to reach a peer it dials once
//! and keeps the connection, sending requests on it and reading the
//! replies back from it (the peer does the same the other way, so a pair of
//! nodes has two connections). Both sides first exchange a [`Hello`] and
//! refuse a peer of another cluster or shape. A writer task per connection
//! takes everything queued and sends it as one frame, so concurrent
//! requests (appends of many groups, heartbeats) coalesce while a write is
//! in flight, and a lone request goes at once. An incoming request is
//! handed to its group's `Raft` in its own task, so a slow group never
//! stalls the connection. A failed connection fails every request waiting
//! on it (openraft sees `Unreachable` and retries) and the next request
//! dials again.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, HashMap};
use std::rc::Rc;
use std::sync::Arc;
use std::time::Duration;

use futures::channel::{mpsc, oneshot};
use futures::io::{AsyncReadExt, AsyncWriteExt, ReadHalf};
use futures::StreamExt;
use glommio::net::{TcpListener, TcpStream};
use openraft::AsyncRuntime;

use super::frame::{self, Kind, Message, FRAME_HEADER_LEN};
use super::handshake::{Hello, HELLO_LEN};
use super::messages::{peer_error, to_append, to_snapshot, NetReply, NetRequest, Refusal};
use super::super::address_book::AddressBook;
use super::super::identity::ClusterIdentity;
use super::super::membership::change_here;
use super::super::state_machine::GroupRaft;
use super::super::rt::{GlommioRt, RtInstant};
use super::super::types::NodeId;
use crate::error::{Error, Result};

/// How long a dial may take before the request fails.
const DIAL_TIMEOUT: Duration = Duration::from_secs(1);

type Pending = RefCell<HashMap<u64, oneshot::Sender<Result<Vec<u8>>>>>;

#[derive(Debug)]
struct Conn {
    outbox: mpsc::UnboundedSender<Message>,
    pending: Pending,
    /// When a frame last arrived on it (or it was dialled).
    heard: Cell<RtInstant>,
    /// Ends its reader when the connection is given up.
    stop: RefCell<Option<oneshot::Sender<()>>>,
}

/// What a node's connections have sent.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct NetStats {
    /// Frames written, on every connection.
    pub frames: u64,
    /// Messages those frames carried (requests and replies).
    pub messages: u64,
    /// Full snapshots sent to followers.
    pub snapshots: u64,
}

#[derive(Debug)]
struct Inner {
    stats: Rc<Cell<NetStats>>,
    hello: Hello,
    identity: Arc<ClusterIdentity>,
    book: AddressBook,
    groups: RefCell<BTreeMap<u32, GroupRaft>>,
    heard: RefCell<BTreeMap<u32, Heard>>,
    conns: RefCell<BTreeMap<NodeId, Rc<Conn>>>,
    next_id: Cell<u64>,
}

/// When a group's replica here last accepted an append (or heartbeat)
/// from a leader: `None` until the first.
pub type Heard = Rc<Cell<Option<RtInstant>>>;

/// One node's transport. Clones share it.
#[derive(Debug, Clone)]
pub struct TcpNet {
    inner: Rc<Inner>,
}

fn io(op: &'static str, err: impl Into<std::io::Error>) -> Error {
    Error::io(op, err.into())
}

async fn read_frame(reader: &mut ReadHalf<TcpStream>) -> Result<Vec<Message>> {
    let mut header = [0u8; FRAME_HEADER_LEN];
    reader.read_exact(&mut header).await.map_err(|e| io("read replication frame", e))?;
    let len = frame::payload_len(&header)?;
    let mut payload = vec![0u8; len];
    reader.read_exact(&mut payload).await.map_err(|e| io("read replication frame", e))?;
    frame::decode(&header, &payload)
}

/// Sends everything queued as frames until the queue closes or a write
/// fails.
async fn write_loop(
    mut writer: futures::io::WriteHalf<TcpStream>,
    mut outbox: mpsc::UnboundedReceiver<Message>,
    stats: Rc<Cell<NetStats>>,
) -> Result<()> {
    let mut buf = Vec::new();
    while let Some(first) = outbox.next().await {
        let mut batch = vec![first];
        while batch.len() < usize::from(u16::MAX) {
            match outbox.try_recv() {
                Ok(more) => batch.push(more),
                Err(_) => break,
            }
        }
        buf.clear();
        frame::encode(&batch, &mut buf)?;
        writer.write_all(&buf).await.map_err(|e| io("write replication frame", e))?;
        let sent = stats.get();
        stats.set(NetStats { frames: sent.frames + 1, messages: sent.messages + batch.len() as u64, ..sent });
    }
    Ok(())
}

/// Removes a request's waiter when the request stops waiting.
struct Forget<'a> {
    conn: &'a Conn,
    id: u64,
}

impl Drop for Forget<'_> {
    fn drop(&mut self) {
        self.conn.pending.borrow_mut().remove(&self.id);
    }
}

impl TcpNet {
    /// The transport of `hello.node` of cluster `hello.cluster`, which
    /// finds its peers' raft addresses in `book`.
    pub fn new(hello: Hello, book: AddressBook) -> Self {
        Self::with_identity(hello, book, Arc::new(ClusterIdentity::fixed(hello.cluster, hello.node)))
    }

    /// The same, for a node whose cluster id is `identity`'s (a joining
    /// node has none until it adopts one).
    pub fn with_identity(hello: Hello, book: AddressBook, identity: Arc<ClusterIdentity>) -> Self {
        let inner = Inner {
            stats: Rc::new(Cell::new(NetStats::default())),
            hello,
            identity,
            book,
            groups: RefCell::new(BTreeMap::new()),
            heard: RefCell::new(BTreeMap::new()),
            conns: RefCell::new(BTreeMap::new()),
            next_id: Cell::new(1),
        };
        Self { inner: Rc::new(inner) }
    }

    /// This core's hello, with the cluster id in force now.
    fn hello(&self) -> Hello {
        Hello { cluster: self.inner.identity.id(), ..self.inner.hello }
    }

    /// Where this node finds its peers.
    pub fn book(&self) -> &AddressBook {
        &self.inner.book
    }

    /// This node's id.
    pub fn node(&self) -> NodeId {
        self.inner.hello.node
    }

    /// Counts one full snapshot sent to a follower.
    pub fn count_snapshot(&self) {
        let sent = self.inner.stats.get();
        self.inner.stats.set(NetStats { snapshots: sent.snapshots + 1, ..sent });
    }

    /// What this node's connections have sent so far.
    pub fn stats(&self) -> NetStats {
        self.inner.stats.get()
    }

    /// Serves `group`'s incoming requests with `raft`.
    pub fn serve_group(&self, group: u32, raft: GroupRaft) {
        self.inner.groups.borrow_mut().insert(group, raft);
    }

    /// When `group`'s replica here last accepted an append from a leader
    /// (the pacer lets a follower that hears its leader skip openraft's
    /// election tick).
    pub fn heard(&self, group: u32) -> Heard {
        self.inner.heard.borrow_mut().entry(group).or_default().clone()
    }

    /// Stops serving `group` (its replica stopped).
    pub fn unserve_group(&self, group: u32) {
        self.inner.groups.borrow_mut().remove(&group);
    }

    /// Accepts peers on `listener` until the executor ends.
    pub fn listen(&self, listener: TcpListener) {
        let net = self.clone();
        drop(GlommioRt::spawn(async move {
            loop {
                match listener.accept().await {
                    Ok(stream) => {
                        let net = net.clone();
                        drop(GlommioRt::spawn(async move {
                            if let Err(err) = net.serve(stream).await {
                                tracing::debug!(error = %err, "replica connection closed");
                            }
                        }));
                    }
                    Err(err) => {
                        tracing::warn!(error = %err, "accepting a replica connection failed");
                        GlommioRt::sleep(Duration::from_millis(50)).await;
                    }
                }
            }
        }));
    }

    /// Serves a connection whose hello the node's acceptor already read
    /// (`acceptor.rs`), until it closes.
    pub fn serve_accepted(&self, stream: TcpStream, peer: Hello) {
        let net = self.clone();
        drop(GlommioRt::spawn(async move {
            if let Err(err) = net.serve_after_hello(stream, Some(peer)).await {
                tracing::debug!(error = %err, "replica connection closed");
            }
        }));
    }

    /// One accepted connection: handshake, then answer its requests.
    async fn serve(&self, stream: TcpStream) -> Result<()> {
        self.serve_after_hello(stream, None).await
    }

    /// [`Self::serve`], with the peer's hello already read when `peer` is
    /// set.
    async fn serve_after_hello(&self, stream: TcpStream, peer: Option<Hello>) -> Result<()> {
        stream.set_nodelay(true).map_err(|e| io("set TCP_NODELAY", e))?;
        let (mut reader, mut writer) = stream.split();
        let peer = match peer {
            Some(peer) => peer,
            None => {
                let mut theirs = [0u8; HELLO_LEN];
                reader.read_exact(&mut theirs).await.map_err(|e| io("read replication handshake", e))?;
                Hello::decode(&theirs)?
            }
        };
        let ours = self.hello();
        writer.write_all(&ours.encode()).await.map_err(|e| io("write replication handshake", e))?;
        ours.accept(&peer, None)?;
        let (replies, outbox) = mpsc::unbounded();
        let writing = GlommioRt::spawn(write_loop(writer, outbox, self.inner.stats.clone()));
        let result = loop {
            let messages = match read_frame(&mut reader).await {
                Ok(messages) => messages,
                Err(err) => break Err(err),
            };
            for message in messages {
                if message.kind != Kind::Request {
                    continue;
                }
                let (net, replies) = (self.clone(), replies.clone());
                drop(GlommioRt::spawn(async move {
                    let reply = net.answer(message.group, &message.body).await;
                    let body = postcard::to_stdvec(&reply).expect("a reply always encodes");
                    let _ = replies.unbounded_send(Message { group: message.group, id: message.id, kind: Kind::Reply, body });
                }));
            }
        };
        drop(replies);
        drop(writing);
        result
    }

    /// Hands one request to its group's raft.
    async fn answer(&self, group: u32, body: &[u8]) -> NetReply {
        let Some(raft) = self.inner.groups.borrow().get(&group).cloned() else {
            return NetReply::Failed(format!("group {group} is not served here"));
        };
        let request: NetRequest = match postcard::from_bytes(body) {
            Ok(request) => request,
            Err(e) => return NetReply::Failed(format!("undecodable request: {e}")),
        };
        let failed = |e: &dyn std::fmt::Display| NetReply::Failed(e.to_string());
        match request {
            NetRequest::Append { vote, prev, entries, commit } => match to_append(vote, prev, &entries, commit) {
                Ok(rpc) => match raft.append_entries(rpc).await {
                    Ok(reply) => {
                        if !matches!(reply, openraft::raft::AppendEntriesResponse::HigherVote(_)) {
                            if let Some(heard) = self.inner.heard.borrow().get(&group) {
                                heard.set(Some(RtInstant::now()));
                            }
                        }
                        NetReply::append(&reply)
                    }
                    Err(e) => failed(&e),
                },
                Err(e) => failed(&e),
            },
            NetRequest::Vote { vote, last } => raft
                .vote(openraft::raft::VoteRequest::new(vote.to_vote(), last.map(|l| l.to_log_id())))
                .await
                .map(|r| NetReply::vote(&r))
                .unwrap_or_else(|e| failed(&e)),
            NetRequest::PreVote { vote, last } => raft
                .pre_vote(openraft::raft::VoteRequest::new(vote.to_vote(), last.map(|l| l.to_log_id())))
                .await
                .map(|r| NetReply::vote(&r))
                .unwrap_or_else(|e| failed(&e)),
            NetRequest::TransferLeader { from, to, last } => {
                let request = openraft::raft::TransferLeaderRequest::new(
                    from.to_vote(),
                    to,
                    last.map(super::super::wire::WireLogId::to_log_id),
                );
                raft.handle_transfer_leader(request)
                    .await
                    .map(|r| NetReply::transfer(&r))
                    .unwrap_or_else(|e| failed(&e))
            }
            NetRequest::ChangeMembers { change, wait_ms } => {
                let wait = Duration::from_millis(wait_ms);
                match change_here(&raft, group, self.node(), &change, wait).await {
                    Ok(members) => NetReply::Members(members),
                    Err(err) => NetReply::MembersRefused(Refusal::of(&err)),
                }
            }
            NetRequest::Snapshot { vote, last, membership_at, membership, data } => {
                match to_snapshot(last, membership_at, &membership, data) {
                    Ok(snapshot) => raft
                        .install_full_snapshot(vote.to_vote(), snapshot)
                        .await
                        .map(|r| NetReply::Snapshot { vote: super::super::wire::WireVote::of(&r.vote) })
                        .unwrap_or_else(|e| failed(&e)),
                    Err(e) => failed(&e),
                }
            }
        }
    }

    /// The connection to `target`, dialled if there is none.
    async fn conn(&self, target: NodeId) -> Result<Rc<Conn>> {
        if let Some(conn) = self.inner.conns.borrow().get(&target) {
            return Ok(conn.clone());
        }
        let addr = self
            .inner
            .book
            .raft_addr(target)
            .ok_or_else(|| peer_error(format!("node {target} has no known raft address")))?;
        let ours = self.hello();
        if ours.cluster == 0 {
            return Err(peer_error("this node has not joined a cluster yet".into()));
        }
        let stream = TcpStream::connect_timeout(addr, DIAL_TIMEOUT).await.map_err(|e| io("dial a replica", e))?;
        stream.set_nodelay(true).map_err(|e| io("set TCP_NODELAY", e))?;
        let (mut reader, mut writer) = stream.split();
        writer.write_all(&ours.encode()).await.map_err(|e| io("write replication handshake", e))?;
        let mut theirs = [0u8; HELLO_LEN];
        reader.read_exact(&mut theirs).await.map_err(|e| io("read replication handshake", e))?;
        ours.accept(&Hello::decode(&theirs)?, Some(target))?;
        // Another request may have dialled meanwhile: keep the first.
        if let Some(conn) = self.inner.conns.borrow().get(&target) {
            return Ok(conn.clone());
        }
        let (outbox, queued) = mpsc::unbounded();
        let (stop, mut stopped) = oneshot::channel();
        let conn = Rc::new(Conn {
            outbox,
            pending: RefCell::new(HashMap::new()),
            heard: Cell::new(RtInstant::now()),
            stop: RefCell::new(Some(stop)),
        });
        self.inner.conns.borrow_mut().insert(target, conn.clone());
        drop(GlommioRt::spawn(write_loop(writer, queued, self.inner.stats.clone())));
        let (net, reading) = (self.clone(), conn.clone());
        drop(GlommioRt::spawn(async move {
            let err = loop {
                let next = futures::future::select(Box::pin(read_frame(&mut reader)), &mut stopped).await;
                let read = match next {
                    futures::future::Either::Left((read, _)) => read,
                    // Given up (`drop_conn`): whatever the socket holds is
                    // no longer waited for.
                    futures::future::Either::Right(_) => return,
                };
                match read {
                    Ok(messages) => {
                        reading.heard.set(RtInstant::now());
                        for m in messages.into_iter().filter(|m| m.kind == Kind::Reply) {
                            if let Some(waiter) = reading.pending.borrow_mut().remove(&m.id) {
                                let _ = waiter.send(Ok(m.body));
                            }
                        }
                    }
                    Err(err) => break err,
                }
            };
            net.drop_conn(target, &reading, err);
        }));
        Ok(conn)
    }

    /// Closes every connection this node dialled (at shutdown); requests
    /// waiting on them fail.
    pub fn close_all(&self) {
        let conns: Vec<(NodeId, Rc<Conn>)> =
            self.inner.conns.borrow().iter().map(|(id, c)| (*id, c.clone())).collect();
        for (target, conn) in conns {
            self.drop_conn(target, &conn, peer_error("this node is shutting down".into()));
        }
    }

    /// Forgets a broken connection and fails what waited on it.
    fn drop_conn(&self, target: NodeId, conn: &Rc<Conn>, err: Error) {
        let mut conns = self.inner.conns.borrow_mut();
        if conns.get(&target).is_some_and(|c| Rc::ptr_eq(c, conn)) {
            conns.remove(&target);
        }
        drop(conns);
        conn.outbox.close_channel();
        if let Some(stop) = conn.stop.borrow_mut().take() {
            let _ = stop.send(());
        }
        let waiting: Vec<_> = conn.pending.borrow_mut().drain().collect();
        for (_, waiter) in waiting {
            let _ = waiter.send(Err(peer_error(format!("connection to node {target} lost: {err}"))));
        }
    }

    /// Sends `request` for `group` to `target` and waits for the reply, at
    /// most `ttl`. When a request times out and nothing at all arrived on
    /// its connection while it waited, the connection is given up (the
    /// peer may be stopped, or have restarted behind a connection that
    /// still looks open: a half-open TCP connection never fails a write),
    /// so the next request dials again.
    pub async fn call(&self, target: NodeId, group: u32, request: &NetRequest, ttl: Duration) -> Result<NetReply> {
        let started = RtInstant::now();
        let timed_out = || peer_error(format!("node {target} did not answer within {ttl:?}"));
        let conn = match GlommioRt::timeout(ttl, self.conn(target)).await {
            Ok(conn) => conn?,
            Err(_) => return Err(timed_out()),
        };
        let sent = RtInstant::now();
        let attempt = async {
            let id = self.inner.next_id.get();
            self.inner.next_id.set(id + 1);
            let body = postcard::to_stdvec(request).expect("a request always encodes");
            let (tx, rx) = oneshot::channel();
            conn.pending.borrow_mut().insert(id, tx);
            // A request that times out or is dropped stops waiting for good.
            let _forget = Forget { conn: &conn, id };
            if conn.outbox.unbounded_send(Message { group, id, kind: Kind::Request, body }).is_err() {
                return Err(peer_error(format!("connection to node {target} is closing")));
            }
            let answer = rx.await.map_err(|_| peer_error(format!("connection to node {target} dropped")));
            let reply = answer??;
            postcard::from_bytes(&reply).map_err(|e| peer_error(format!("undecodable reply from node {target}: {e}")))
        };
        let left = ttl.saturating_sub(RtInstant::now() - started);
        match GlommioRt::timeout(left, attempt).await {
            Ok(result) => result,
            Err(_) => {
                if conn.heard.get() <= sent {
                    let silent = peer_error(format!("nothing arrived from node {target} within {ttl:?}"));
                    self.drop_conn(target, &conn, silent);
                }
                Err(timed_out())
            }
        }
    }
}
