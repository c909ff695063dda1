//! Header names of the Durable Streams protocol and the headers every
//! response carries.
//!
//! Every response, errors included, gets the protocol's browser security
//! headers (`X-Content-Type-Options: nosniff`,
//! `Cross-Origin-Resource-Policy: cross-origin`) and permissive CORS
//! (`Access-Control-Allow-Origin: *` with the protocol headers exposed),
//! so a browser client on another origin can read what it is sent.
//! Preflights allow every method the server serves and every request
//! header the protocol defines, `If-None-Match` included.

use http::header::{HeaderMap, HeaderName, HeaderValue};

pub(crate) const STREAM_NEXT_OFFSET: &str = "stream-next-offset";
pub(crate) const STREAM_UP_TO_DATE: &str = "stream-up-to-date";
pub(crate) const STREAM_CLOSED: &str = "stream-closed";
pub(crate) const STREAM_CURSOR: &str = "stream-cursor";
pub(crate) const STREAM_SEQ: &str = "stream-seq";
pub(crate) const STREAM_TTL: &str = "stream-ttl";
pub(crate) const STREAM_EXPIRES_AT: &str = "stream-expires-at";
pub(crate) const STREAM_FORKED_FROM: &str = "stream-forked-from";
pub(crate) const STREAM_FORK_OFFSET: &str = "stream-fork-offset";
pub(crate) const STREAM_FORK_SUB_OFFSET: &str = "stream-fork-sub-offset";
pub(crate) const STREAM_SSE_DATA_ENCODING: &str = "stream-sse-data-encoding";
pub(crate) const PRODUCER_ID: &str = "producer-id";
pub(crate) const PRODUCER_EPOCH: &str = "producer-epoch";
pub(crate) const PRODUCER_SEQ: &str = "producer-seq";
pub(crate) const PRODUCER_EXPECTED_SEQ: &str = "producer-expected-seq";
pub(crate) const PRODUCER_RECEIVED_SEQ: &str = "producer-received-seq";
pub(crate) const RETRY_AFTER: &str = "retry-after";
/// `Rill-Allow-Stale: true` on a `GET` or `HEAD`: on a replicated node,
/// serve this node's replica as it stands (no quorum round, no forwarding
/// to the leader). rill's own header, not the protocol's.
pub(crate) const RILL_ALLOW_STALE: &str = "rill-allow-stale";

/// Request headers a browser may send (preflight allow list).
pub(crate) const ALLOWED_REQUEST_HEADERS: &str = "content-type, if-none-match, stream-seq, stream-ttl, \
stream-expires-at, stream-closed, stream-forked-from, stream-fork-offset, stream-fork-sub-offset, \
producer-id, producer-epoch, producer-seq, last-event-id, cache-control, rill-allow-stale";

/// Response headers a browser may read.
pub(crate) const EXPOSED_HEADERS: &str =
    "stream-next-offset, stream-up-to-date, stream-closed, stream-cursor, \
stream-ttl, stream-expires-at, stream-sse-data-encoding, producer-epoch, producer-seq, \
producer-expected-seq, producer-received-seq, etag, location, retry-after";

/// Methods served on stream paths.
pub(crate) const ALLOWED_METHODS: &str = "GET, HEAD, PUT, POST, DELETE, OPTIONS";

/// Adds the headers every response carries.
pub(crate) fn add_common(headers: &mut HeaderMap) {
    headers.insert(http::header::X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff"));
    headers.insert(
        HeaderName::from_static("cross-origin-resource-policy"),
        HeaderValue::from_static("cross-origin"),
    );
    headers.insert(http::header::ACCESS_CONTROL_ALLOW_ORIGIN, HeaderValue::from_static("*"));
    headers.insert(http::header::ACCESS_CONTROL_EXPOSE_HEADERS, HeaderValue::from_static(EXPOSED_HEADERS));
}

/// Adds the preflight answer's headers.
pub(crate) fn add_preflight(headers: &mut HeaderMap) {
    headers.insert(http::header::ACCESS_CONTROL_ALLOW_METHODS, HeaderValue::from_static(ALLOWED_METHODS));
    headers.insert(
        http::header::ACCESS_CONTROL_ALLOW_HEADERS,
        HeaderValue::from_static(ALLOWED_REQUEST_HEADERS),
    );
    headers.insert(http::header::ACCESS_CONTROL_MAX_AGE, HeaderValue::from_static("86400"));
}

/// The value of a header as text, if present. A value that is not visible
/// ASCII is an error naming the header.
pub(crate) fn text<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, String> {
    let mut values = headers.get_all(name).iter();
    let Some(first) = values.next() else { return Ok(None) };
    if values.next().is_some() {
        return Err(format!("header {name} is given more than once"));
    }
    first.to_str().map(Some).map_err(|_| format!("header {name} is not visible ASCII"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn common_headers_are_set() {
        let mut map = HeaderMap::new();
        add_common(&mut map);
        assert_eq!(map["x-content-type-options"], "nosniff");
        assert_eq!(map["cross-origin-resource-policy"], "cross-origin");
        let mut map = HeaderMap::new();
        add_preflight(&mut map);
        assert!(map["access-control-allow-headers"].to_str().unwrap().contains("if-none-match"));
    }

    #[test]
    fn text_refuses_duplicates_and_binary() {
        let mut map = HeaderMap::new();
        assert_eq!(text(&map, "a").unwrap(), None);
        map.append("a", HeaderValue::from_static("1"));
        assert_eq!(text(&map, "a").unwrap(), Some("1"));
        map.append("a", HeaderValue::from_static("2"));
        assert!(text(&map, "a").is_err());
        map.insert("b", HeaderValue::from_bytes(&[0xff]).unwrap());
        assert!(text(&map, "b").is_err());
    }
}
