//! Forwarding to a group's leader: on a replicated node, a request that
//! reached a follower of its stream's group is sent on to the leader's
//! HTTP address and the leader's response is relayed as it streams.
//!
//! The forwarded request carries the `rill-forwarded` header; a node never
//! forwards a request that has it, so a request travels at most one hop
//! (a leader that changed meanwhile answers 503 with Retry-After, which the
//! client retries). A leader that cannot be reached answers 503 too:
//! forwarding never turns into a 2xx that the leader did not send.

use bytes::Bytes;
use futures::StreamExt;
use http::{HeaderMap, HeaderValue, Method, Request, Response, StatusCode, Uri};
use http_body_util::{BodyDataStream, Full};

use super::io::Io;
use super::respond::Body;
use super::status::Failure;

/// The header a forwarded request carries.
pub(crate) const FORWARDED: &str = "rill-forwarded";

/// What is kept of a request so it can be forwarded after the engine
/// refused it.
#[derive(Debug)]
pub(crate) struct Replayable {
    pub method: Method,
    pub uri: Uri,
    pub headers: HeaderMap,
    pub body: Bytes,
}

fn unreachable(addr: &str, what: impl std::fmt::Display) -> Failure {
    Failure::new(
        StatusCode::SERVICE_UNAVAILABLE,
        "not_leader",
        format!("the group's leader at {addr} could not be reached: {what}"),
    )
    .with_header(super::headers::RETRY_AFTER, "1")
}

/// Sends `req` to the leader at `addr` (`host:port`) and relays its answer.
pub(crate) async fn forward(addr: &str, req: Replayable) -> Result<Response<Body>, Failure> {
    let stream = glommio::net::TcpStream::connect(addr).await.map_err(|e| unreachable(addr, e))?;
    let _ = stream.set_nodelay(true);
    let (mut sender, conn) =
        hyper::client::conn::http1::handshake(Io::new(stream)).await.map_err(|e| unreachable(addr, e))?;
    glommio::spawn_local(async move {
        let _ = conn.await;
    })
    .detach();
    let path = req.uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
    let mut outgoing = Request::builder()
        .method(req.method)
        .uri(path)
        .body(Full::new(req.body))
        .map_err(|e| Failure::bad_request(format!("the request cannot be forwarded: {e}")))?;
    *outgoing.headers_mut() = req.headers;
    outgoing.headers_mut().insert(FORWARDED, HeaderValue::from_static("1"));
    let response = sender.send_request(outgoing).await.map_err(|e| unreachable(addr, e))?;
    let (parts, incoming) = response.into_parts();
    // Relay the body as it arrives (long polls and SSE included); a broken
    // upstream ends the body early, which the client sees as a cut
    // response, never as more bytes than the leader sent.
    let data = BodyDataStream::new(incoming).take_while(|chunk| std::future::ready(chunk.is_ok()));
    let body = data.filter_map(|chunk| std::future::ready(chunk.ok()));
    Ok(Response::from_parts(parts, Body::Stream(Box::pin(body))))
}
