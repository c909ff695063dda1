//! The `http_request` fuzz target: the HTTP server's request-to-command
//! mapping (`rill::server::map_request`) on arbitrary requests.
//!
//! Input layout (every part optional; bytes that do not make a valid
//! method, URI or header are dropped, as hyper would refuse them before
//! the mapping sees them):
//!
//! ```text
//! METHOD \n PATH?QUERY \n (NAME: VALUE \n)* \n BODY
//! ```
//!
//! Contract: the mapping never panics; a refusal is a 4xx with a message;
//! an accepted request is internally consistent (an append has a body and
//! a media type, a live read names an offset, names are valid rill names).

use bytes::Bytes;
use http::{HeaderMap, HeaderName, HeaderValue, Method, Uri};
use rill::server::{HttpCommand as Command, Live};

/// Splits the input into a request; `None` when method or URI is invalid.
pub fn request_of(data: &[u8]) -> Option<(Method, Uri, HeaderMap, Bytes)> {
    let (head, body) = match data.windows(2).position(|w| w == b"\n\n") {
        Some(i) => (&data[..i], &data[i + 2..]),
        None => (data, &[][..]),
    };
    let mut lines = head.split(|b| *b == b'\n');
    let method = Method::from_bytes(lines.next()?).ok()?;
    let uri = Uri::try_from(lines.next()?).ok()?;
    let mut headers = HeaderMap::new();
    for line in lines {
        let Some(colon) = line.iter().position(|b| *b == b':') else { continue };
        let name = HeaderName::from_bytes(&line[..colon]);
        let value = line[colon + 1..].strip_prefix(b" ").unwrap_or(&line[colon + 1..]);
        if let (Ok(name), Ok(value)) = (name, HeaderValue::from_bytes(value)) {
            headers.append(name, value);
        }
    }
    Some((method, uri, headers, Bytes::copy_from_slice(body)))
}

/// The target.
pub fn http_request(data: &[u8]) {
    let Some((method, uri, headers, body)) = request_of(data) else { return };
    match rill::server::map_request(&method, &uri, &headers, body.clone()) {
        Err(failure) => {
            let status = failure.status.as_u16();
            assert!((400..500).contains(&status), "refusal with status {status}: {failure:?}");
            assert!(!failure.message.is_empty(), "a refusal without a message");
            assert!(failure.body().starts_with(failure.code));
        }
        Ok(Command::Append(a)) => {
            assert_eq!(method, Method::POST);
            assert!(!a.append.payload.is_empty(), "an append without payload");
            let ct = a.append.content_type.as_deref().expect("an append has a media type");
            assert_eq!(ct, ct.to_ascii_lowercase());
            assert!(ct.contains('/') && !ct.contains(';'));
        }
        Ok(Command::Close(c)) => {
            assert_eq!(method, Method::POST);
            assert!(body.is_empty());
            assert!(!c.id.stream().is_empty());
        }
        Ok(Command::Create(c)) => {
            assert_eq!(method, Method::PUT);
            assert!(!(c.create.ttl_s.is_some() && c.create.expires_at_ms.is_some()));
            if let Some(fork) = &c.fork {
                assert!(fork.sub_offset == 0 || fork.offset.is_some());
            }
        }
        Ok(Command::Read(r)) => {
            assert_eq!(method, Method::GET);
            if r.live != Live::No {
                let query = uri.query().unwrap_or("");
                assert!(query.split('&').any(|p| p.starts_with("offset=")), "a live read without an offset");
            }
        }
        Ok(
            Command::Head { .. }
            | Command::Delete(_)
            | Command::Preflight
            | Command::Health
            | Command::Metrics
            | Command::ClusterShow,
        ) => {}
        Ok(Command::ClusterChange { change, wait }) => {
            assert_eq!(method, Method::POST);
            assert!(!wait.is_zero(), "a membership change without time");
            if let Some((_, member)) = change.joiner() {
                assert!(!member.raft_addr.is_empty(), "a joining node without a raft address");
            }
        }
    }
}

/// Seed inputs for the corpus.
pub fn seeds() -> Vec<(&'static str, Vec<u8>)> {
    let s = |t: &str| t.as_bytes().to_vec();
    vec![
        ("put-text", s("PUT\n/v1/stream/a\ncontent-type: text/plain\nstream-ttl: 60\n\nhello")),
        ("put-json-empty", s("PUT\n/v1/stream/b/j\ncontent-type: application/json\n\n[]")),
        ("put-fork", s("PUT\n/v1/stream/f\nstream-forked-from: /v1/stream/a\nstream-fork-offset: 0000000000000000_0000000000000003\nstream-fork-sub-offset: 2\n\n")),
        ("put-expires", s("PUT\n/v1/stream/e\nstream-expires-at: 2030-01-01T00:00:00.5+02:00\n\n")),
        ("post-producer", s("POST\n/v1/stream/a\ncontent-type: Text/Plain; charset=utf-8\nproducer-id: p\nproducer-epoch: 1\nproducer-seq: 7\nstream-seq: 009\n\nx")),
        ("post-close", s("POST\n/v1/stream/a\nstream-closed: true\n\n")),
        ("post-json", s("POST\n/v1/stream/j\ncontent-type: application/json\n\n[1,[2],{\"a\":3}]")),
        ("post-bad-json", s("POST\n/v1/stream/j\ncontent-type: application/json\n\n{ invalid json }")),
        ("get-live", s("GET\n/v1/stream/a?offset=now&live=long-poll&cursor=3\nif-none-match: \"x\"\n\n")),
        ("cluster-show", s("GET\n/v1/cluster\n\n")),
        ("cluster-replace", s("POST\n/v1/cluster/members\n\n{\"op\":\"replace\",\"old\":3,\"id\":4,\"raft\":\"127.0.0.1:7004\",\"http\":\"127.0.0.1:8004\",\"wait_ms\":500}")),
        ("get-sse", s("GET\n/v1/stream/a?offset=0000000000000000_0000000000000001&live=sse\n\n")),
        ("get-bad-offset", s("GET\n/v1/stream/a?offset=0%2C1&offset=-1\n\n")),
        ("bad-names", s("DELETE\n/v1/stream/a%2Fb/c%00\n\n")),
        ("options", s("OPTIONS\n/v1/stream/a\naccess-control-request-headers: if-none-match\n\n")),
        ("health", s("GET\n/health\n\n")),
        ("junk", vec![0xff, b'\n', 0, 1, 2, b'\n', b'\n']),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_parse_into_requests() {
        for (name, bytes) in seeds() {
            if name != "junk" {
                assert!(request_of(&bytes).is_some(), "{name}");
            }
            http_request(&bytes);
        }
    }
}
