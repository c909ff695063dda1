//! `rill cluster status|add|remove|replace`: the operator's side of the
//! cluster admin endpoints (`cluster_admin.rs`), as one HTTP request to any
//! member.
//!
//! The request is built from the subcommand by a pure function
//! ([`request_of`], tested here) and sent with hyper's client on a
//! one-thread glommio executor, the same stack the server forwards with.
//! The server's JSON answer is printed as it came; anything but a 2xx is
//! an error carrying the server's status and message.

use std::time::Duration;

use bytes::Bytes;
use http::{Method, Request, StatusCode};
use http_body_util::{BodyExt, Full};
use serde_json::{json, Value};

use super::cli::ClusterCommand;
use super::io::Io;

/// How long the whole request may take beyond the change's own wait.
const SLACK: Duration = Duration::from_secs(10);

/// One admin request: where to, and what.
#[derive(Debug, PartialEq, Eq)]
pub(crate) struct AdminRequest {
    pub server: String,
    pub method: Method,
    pub path: &'static str,
    pub body: Option<Value>,
    pub timeout: Duration,
}

/// `ID=RAFT_ADDR@HTTP_ADDR` as the body's fields.
fn member_fields(entry: &str) -> Result<(u64, String, String), String> {
    let config = crate::ClusterConfig::new(1).parse_members(entry).map_err(|e| e.to_string())?;
    let (id, member) = match config.members().iter().collect::<Vec<_>>().as_slice() {
        [(id, member)] => (**id, (*member).clone()),
        _ => return Err(format!("expected one ID=RAFT_ADDR@HTTP_ADDR, got `{entry}`")),
    };
    if member.http_addr.is_empty() {
        return Err(format!("`{entry}`: give the new node's HTTP address too (ID=RAFT_ADDR@HTTP_ADDR)"));
    }
    Ok((id, member.raft_addr.to_string(), member.http_addr))
}

/// The request a subcommand sends.
pub(crate) fn request_of(command: &ClusterCommand) -> Result<AdminRequest, String> {
    let change = |server: &str, body: Value, wait_ms: u64| AdminRequest {
        server: server.to_string(),
        method: Method::POST,
        path: "/v1/cluster/members",
        body: Some(body),
        timeout: Duration::from_millis(wait_ms) + SLACK,
    };
    Ok(match command {
        ClusterCommand::Status { server } => AdminRequest {
            server: server.clone(),
            method: Method::GET,
            path: "/v1/cluster",
            body: None,
            timeout: SLACK,
        },
        ClusterCommand::Add { server, member, wait_ms } => {
            let (id, raft, http) = member_fields(member)?;
            change(
                server,
                json!({"op": "add", "id": id, "raft": raft, "http": http, "wait_ms": wait_ms}),
                *wait_ms,
            )
        }
        ClusterCommand::Remove { server, id, wait_ms } => {
            change(server, json!({"op": "remove", "id": id, "wait_ms": wait_ms}), *wait_ms)
        }
        ClusterCommand::Replace { server, old, member, wait_ms } => {
            let (id, raft, http) = member_fields(member)?;
            let body = json!({"op": "replace", "old": old, "id": id, "raft": raft, "http": http, "wait_ms": wait_ms});
            change(server, body, *wait_ms)
        }
    })
}

/// Runs `rill cluster ...`: returns the server's JSON answer, or what went
/// wrong.
pub fn run(command: &ClusterCommand) -> Result<String, String> {
    let request = request_of(command)?;
    let executor = glommio::LocalExecutorBuilder::default()
        .make()
        .map_err(|e| format!("cannot start an executor: {e}"))?;
    executor.run(async move {
        let timeout = request.timeout;
        match glommio::timer::timeout(timeout, async { Ok(send(request).await) }).await {
            Ok(result) => result,
            Err(_) => Err(format!("no answer within {timeout:?}")),
        }
    })
}

async fn send(request: AdminRequest) -> Result<String, String> {
    let server = request.server.clone();
    let failed = |what: &str, e: &dyn std::fmt::Display| format!("{what} {server}: {e}");
    let stream =
        glommio::net::TcpStream::connect(server.as_str()).await.map_err(|e| failed("cannot reach", &e))?;
    let (mut sender, conn) = hyper::client::conn::http1::handshake(Io::new(stream))
        .await
        .map_err(|e| failed("cannot talk to", &e))?;
    glommio::spawn_local(async move {
        let _ = conn.await;
    })
    .detach();
    let body = request.body.map(|b| Bytes::from(b.to_string())).unwrap_or_default();
    let outgoing = Request::builder()
        .method(request.method)
        .uri(request.path)
        .header(http::header::HOST, server.as_str())
        .header(http::header::CONTENT_TYPE, "application/json")
        .body(Full::new(body))
        .map_err(|e| failed("cannot build a request for", &e))?;
    let response = sender.send_request(outgoing).await.map_err(|e| failed("no answer from", &e))?;
    let status = response.status();
    let bytes = response.into_body().collect().await.map_err(|e| failed("a cut answer from", &e))?.to_bytes();
    let text = String::from_utf8_lossy(&bytes).into_owned();
    if status != StatusCode::OK {
        return Err(format!("{server} answered {status}: {}", text.trim()));
    }
    let value: Value =
        serde_json::from_str(&text).map_err(|e| failed("an answer that is not JSON from", &e))?;
    Ok(serde_json::to_string_pretty(&value).unwrap_or(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn subcommands_become_requests() {
        let status = request_of(&ClusterCommand::Status { server: "127.0.0.1:8001".into() }).unwrap();
        assert_eq!((status.method, status.path, status.body), (Method::GET, "/v1/cluster", None));
        let add = request_of(&ClusterCommand::Add {
            server: "127.0.0.1:8001".into(),
            member: "4=127.0.0.1:7004@127.0.0.1:8004".into(),
            wait_ms: 1000,
        })
        .unwrap();
        assert_eq!(add.path, "/v1/cluster/members");
        assert_eq!(
            add.body,
            Some(
                json!({"op": "add", "id": 4, "raft": "127.0.0.1:7004", "http": "127.0.0.1:8004", "wait_ms": 1000})
            )
        );
        assert_eq!(add.timeout, Duration::from_millis(1000) + SLACK);
        let replace = request_of(&ClusterCommand::Replace {
            server: "s:1".into(),
            old: 3,
            member: "4=127.0.0.1:7004@127.0.0.1:8004".into(),
            wait_ms: 5,
        })
        .unwrap();
        assert_eq!(replace.body.unwrap()["old"], json!(3));
        let remove = request_of(&ClusterCommand::Remove { server: "s:1".into(), id: 2, wait_ms: 5 }).unwrap();
        assert_eq!(remove.body, Some(json!({"op": "remove", "id": 2, "wait_ms": 5})));
    }

    #[test]
    fn bad_members_are_refused_before_sending() {
        for bad in ["4", "4=nowhere@h:1", "4=127.0.0.1:7004", "4=127.0.0.1:1@h:1,5=127.0.0.1:2@h:2"] {
            let err =
                request_of(&ClusterCommand::Add { server: "s:1".into(), member: bad.into(), wait_ms: 1 })
                    .unwrap_err();
            assert!(!err.is_empty(), "{bad}");
        }
    }
}
