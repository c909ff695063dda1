//! URL paths to routes: which stream (or endpoint) a request names.
//!
//! The mapping is fixed and documented in `README.md` and
//! `ARCHITECTURE.md`:
//!
//! ```text
//! /health                         -> Route::Health
//! /metrics                        -> Route::Metrics
//! /v1/cluster                     -> Route::Cluster
//! /v1/cluster/members             -> Route::ClusterMembers
//! /v1/stream/<stream>             -> (bucket "default", <stream>)
//! /v1/stream/<bucket>/<stream>    -> (<bucket>, <stream>)
//! ```
//!
//! Each segment is percent-decoded (`%2F` gives a `/`, which no name may
//! hold, so it is refused rather than read as a separator) and must then
//! be a valid rill name (SPEC §1: non-empty UTF-8, at most 255 bytes, no
//! `/`, NUL or control characters). Anything else is a [`PathError`] that
//! the caller turns into a 400 (a bad name) or a 404 (no such endpoint),
//! with a message saying which rule was broken. The function is pure, so
//! the fuzz target and the unit tests drive it directly.

use crate::StreamId;

/// Where stream URLs live.
pub(crate) const STREAM_PREFIX: &str = "/v1/stream/";
/// The bucket of a one-segment stream path.
pub(crate) const DEFAULT_BUCKET: &str = "default";

/// What a path names.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Route {
    Health,
    Metrics,
    /// A replicated server's members (`cluster_admin.rs`).
    Cluster,
    /// Changes of a replicated server's members.
    ClusterMembers,
    Stream(StreamId),
}

/// Why a path names nothing rill can serve.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum PathError {
    /// Outside `/v1/stream/`, `/health` and `/metrics`.
    NotFound(String),
    /// Under `/v1/stream/` but not a storable name.
    BadName(String),
}

impl PathError {
    pub(crate) fn message(&self) -> &str {
        match self {
            PathError::NotFound(m) | PathError::BadName(m) => m,
        }
    }
}

/// Maps a request path (without the query) to a route.
pub(crate) fn route(path: &str) -> Result<Route, PathError> {
    match path {
        "/health" => return Ok(Route::Health),
        "/metrics" => return Ok(Route::Metrics),
        "/v1/cluster" => return Ok(Route::Cluster),
        "/v1/cluster/members" => return Ok(Route::ClusterMembers),
        _ => {}
    }
    let Some(rest) = path.strip_prefix(STREAM_PREFIX) else {
        return Err(PathError::NotFound(format!(
            "no such endpoint {path:?}: streams live under {STREAM_PREFIX}<stream> or {STREAM_PREFIX}<bucket>/<stream>"
        )));
    };
    stream_id(rest).map(Route::Stream)
}

/// Maps the part after `/v1/stream/` to a stream id.
pub(crate) fn stream_id(rest: &str) -> Result<StreamId, PathError> {
    let segments: Vec<&str> = rest.split('/').collect();
    let (bucket, stream) = match segments.as_slice() {
        [stream] => (DEFAULT_BUCKET.to_string(), decode_segment("stream", stream)?),
        [bucket, stream] => (decode_segment("bucket", bucket)?, decode_segment("stream", stream)?),
        _ => {
            return Err(PathError::BadName(format!(
                "a stream path has one or two segments after {STREAM_PREFIX} (<stream> or <bucket>/<stream>), got {}",
                segments.len()
            )))
        }
    };
    StreamId::new(bucket, stream)
        .map_err(|e| PathError::BadName(format!("cannot store this stream name: {e}")))
}

/// Maps a path given in a header (`Stream-Forked-From`) to a stream id: a
/// full stream path, optionally with scheme and host.
pub(crate) fn stream_id_of_reference(value: &str) -> Result<StreamId, PathError> {
    let path = match value.find("://") {
        Some(i) => {
            let after = &value[i + 3..];
            after.find('/').map_or("/", |j| &after[j..])
        }
        None => value,
    };
    let path = path.split('?').next().unwrap_or(path);
    match route(path) {
        Ok(Route::Stream(id)) => Ok(id),
        Ok(_) | Err(PathError::NotFound(_)) => Err(PathError::BadName(format!(
            "{value:?} is not a stream path ({STREAM_PREFIX}<stream> or {STREAM_PREFIX}<bucket>/<stream>)"
        ))),
        Err(e) => Err(e),
    }
}

fn decode_segment(field: &str, segment: &str) -> Result<String, PathError> {
    if segment.is_empty() {
        return Err(PathError::BadName(format!("the {field} segment of the path is empty")));
    }
    let bytes = percent_decode(segment).ok_or_else(|| {
        PathError::BadName(format!("the {field} segment {segment:?} has a malformed %-escape"))
    })?;
    String::from_utf8(bytes)
        .map_err(|_| PathError::BadName(format!("the {field} segment is not UTF-8 once decoded")))
}

/// Decodes `%XX` escapes; `None` for a truncated or non-hex escape.
pub(crate) fn percent_decode(text: &str) -> Option<Vec<u8>> {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        if bytes[i] == b'%' {
            let hi = hex(*bytes.get(i + 1)?)?;
            let lo = hex(*bytes.get(i + 2)?)?;
            out.push(hi << 4 | lo);
            i += 3;
        } else {
            out.push(bytes[i]);
            i += 1;
        }
    }
    Some(out)
}

fn hex(b: u8) -> Option<u8> {
    match b {
        b'0'..=b'9' => Some(b - b'0'),
        b'a'..=b'f' => Some(b - b'a' + 10),
        b'A'..=b'F' => Some(b - b'A' + 10),
        _ => None,
    }
}

/// Encodes a name as a path segment (the inverse of [`decode_segment`]).
#[cfg(test)]
pub(crate) fn percent_encode_segment(name: &str) -> String {
    let mut out = String::with_capacity(name.len());
    for b in name.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_segment_goes_to_the_default_bucket() {
        let Route::Stream(id) = route("/v1/stream/orders-1").unwrap() else { panic!() };
        assert_eq!((id.bucket(), id.stream()), ("default", "orders-1"));
    }

    #[test]
    fn two_segments_name_bucket_and_stream() {
        let Route::Stream(id) = route("/v1/stream/tenant/orders").unwrap() else { panic!() };
        assert_eq!((id.bucket(), id.stream()), ("tenant", "orders"));
    }

    #[test]
    fn segments_are_percent_decoded() {
        let Route::Stream(id) = route("/v1/stream/a%20b").unwrap() else { panic!() };
        assert_eq!(id.stream(), "a b");
    }

    #[test]
    fn unstorable_names_are_bad_names() {
        for path in [
            "/v1/stream/",
            "/v1/stream/a/b/c",
            "/v1/stream/a%2Fb/c",
            "/v1/stream/%00x",
            "/v1/stream/%ZZ",
            "/v1/stream/%FF",
            "/v1/stream//x",
        ] {
            assert!(matches!(route(path), Err(PathError::BadName(_))), "{path}");
        }
        let long = format!("/v1/stream/{}", "x".repeat(256));
        assert!(matches!(route(&long), Err(PathError::BadName(m)) if m.contains("255")));
    }

    #[test]
    fn other_paths_are_not_found() {
        assert!(matches!(route("/"), Err(PathError::NotFound(_))));
        assert!(matches!(route("/v1/streams/x"), Err(PathError::NotFound(_))));
        assert_eq!(route("/health").unwrap(), Route::Health);
        assert_eq!(route("/metrics").unwrap(), Route::Metrics);
    }

    #[test]
    fn references_accept_paths_and_urls() {
        let id = stream_id_of_reference("/v1/stream/src").unwrap();
        assert_eq!(id.stream(), "src");
        let id = stream_id_of_reference("http://h:1/v1/stream/b/s").unwrap();
        assert_eq!((id.bucket(), id.stream()), ("b", "s"));
        assert!(stream_id_of_reference("/health").is_err());
        assert!(stream_id_of_reference("nonsense").is_err());
    }

    #[test]
    fn encoding_round_trips() {
        for name in ["plain", "a b", "ü/x", "100%"] {
            let enc = percent_encode_segment(name);
            assert_eq!(percent_decode(&enc).unwrap(), name.as_bytes());
        }
    }
}
