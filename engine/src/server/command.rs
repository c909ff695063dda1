//! Request to command: the pure function that reads a whole HTTP request
//! (method, URI, headers, collected body) and says what the engine must do.
//!
//! [`map_request`] performs no I/O, reads no clock and never panics on any
//! input (the fuzz target `http_request` holds it to that). Everything the
//! protocol lets a server refuse without looking at the stream is refused
//! here with a [`Failure`] naming the broken rule: malformed offsets,
//! TTLs, timestamps and producer headers, a partial producer triple, an
//! empty append, a missing or malformed `Content-Type` on append, a body
//! that is not JSON on a JSON append, live modes without an offset, fork
//! headers without a source. Rules that depend on the stream's state
//! (content type matches, producer order, closed) are the engine's.
//!
//! Content types are compared by media type: `Content-Type` is reduced to
//! its lowercased `type/subtype` (parameters dropped) before it reaches the
//! engine, so `TEXT/PLAIN` and `text/plain; charset=utf-8` name one type.

use bytes::Bytes;
use http::{HeaderMap, Method, Uri};

use super::headers::{self as h, text};
use super::json;
use super::path::{self, PathError, Route};
use super::protocol::{parse_offset, parse_rfc3339_ms, parse_strict_u64, parse_ttl, OffsetSpec};
use super::status::Failure;
use crate::{Append, Close, Create, ProducerArgs, StreamId, DEFAULT_CONTENT_TYPE};

/// What a request asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Command {
    /// `GET /health`.
    Health,
    /// `GET /metrics`.
    Metrics,
    /// A CORS preflight (`OPTIONS`).
    Preflight,
    /// `PUT`: create or fork.
    Create(CreateCmd),
    /// `POST` with a body.
    Append(AppendCmd),
    /// A close-only `POST` (empty body, `Stream-Closed: true`).
    Close(Close),
    /// `GET` of a stream.
    Read(ReadCmd),
    /// `HEAD`.
    Head {
        /// The stream.
        id: StreamId,
        /// `Rill-Allow-Stale: true`.
        stale: bool,
    },
    /// `DELETE`.
    Delete(StreamId),
    /// `GET /v1/cluster`.
    ClusterShow,
    /// `POST /v1/cluster/members`.
    ClusterChange {
        /// The change.
        change: crate::MemberChange,
        /// How long each group may take.
        wait: std::time::Duration,
    },
}

/// `PUT`: create (or fork) a stream.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CreateCmd {
    /// The engine request.
    pub create: Create,
    /// The fork headers, if any.
    pub fork: Option<ForkSpec>,
    /// The content type is JSON (JSON mode).
    pub json: bool,
    /// The request named a `Content-Type` (a fork without one inherits
    /// its source's).
    pub content_type_named: bool,
}

/// The fork headers of a `PUT`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForkSpec {
    /// `Stream-Forked-From`.
    pub source: StreamId,
    /// `Stream-Fork-Offset`; `None` forks at the source's tail.
    pub offset: Option<OffsetSpec>,
    /// `Stream-Fork-Sub-Offset`: bytes (or JSON messages) into the message
    /// at `offset`.
    pub sub_offset: u64,
}

/// `POST` with a body: append (and maybe close).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppendCmd {
    /// The engine request.
    pub append: Append,
    /// The stream is in JSON mode.
    pub json: bool,
}

/// How a `GET` waits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Live {
    /// Catch-up: answer with what is there.
    No,
    /// `live=long-poll`: wait for data at the offset, up to the timeout.
    LongPoll,
    /// `live=sse`: a server-sent event stream.
    Sse,
}

/// `GET`: read.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadCmd {
    /// The stream.
    pub id: StreamId,
    /// `offset=`.
    pub offset: OffsetSpec,
    /// `live=`.
    pub live: Live,
    /// `cursor=`, the client's last cursor.
    pub cursor: Option<u64>,
    /// `If-None-Match`.
    pub if_none_match: Option<String>,
    /// `Rill-Allow-Stale: true`: read this node's replica as it stands.
    pub stale: bool,
}

/// Maps one request (see the module docs).
pub fn map_request(method: &Method, uri: &Uri, headers: &HeaderMap, body: Bytes) -> Result<Command, Failure> {
    let route = path::route(uri.path()).map_err(|e| match e {
        PathError::NotFound(m) => Failure::not_found(m),
        PathError::BadName(m) => Failure::bad_request(m),
    })?;
    if *method == Method::OPTIONS {
        return Ok(Command::Preflight);
    }
    let id = match route {
        Route::Health | Route::Metrics if *method != Method::GET && *method != Method::HEAD => {
            return Err(Failure::method_not_allowed(format!("{} serves GET and HEAD only", uri.path())));
        }
        Route::Health => return Ok(Command::Health),
        Route::Metrics => return Ok(Command::Metrics),
        Route::Cluster if *method == Method::GET => return Ok(Command::ClusterShow),
        Route::ClusterMembers if *method == Method::POST => {
            let (change, wait) = super::cluster_admin::parse_change(&body).map_err(Failure::bad_request)?;
            return Ok(Command::ClusterChange { change, wait });
        }
        Route::Cluster | Route::ClusterMembers => {
            return Err(Failure::method_not_allowed(format!(
                "{} serves {} only",
                uri.path(),
                if route == Route::Cluster { "GET" } else { "POST" }
            )));
        }
        Route::Stream(id) => id,
    };
    match *method {
        Method::PUT => map_put(id, headers, body).map(Command::Create),
        Method::POST => map_post(id, headers, body),
        Method::GET => map_get(id, uri.query().unwrap_or(""), headers).map(Command::Read),
        Method::HEAD => Ok(Command::Head { id, stale: allow_stale(headers)? }),
        Method::DELETE => Ok(Command::Delete(id)),
        _ => Err(Failure::method_not_allowed(format!(
            "method {method} is not served on streams (allowed: {})",
            h::ALLOWED_METHODS
        ))),
    }
}

fn header<'a>(headers: &'a HeaderMap, name: &str) -> Result<Option<&'a str>, Failure> {
    text(headers, name).map_err(Failure::bad_request)
}

/// The media type of `Content-Type`, lowercased, parameters dropped.
pub(crate) fn media_type(value: &str) -> Result<String, Failure> {
    let media = value.split(';').next().unwrap_or("").trim().to_ascii_lowercase();
    let token =
        |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b"!#$&-^_.+".contains(&b));
    match media.split_once('/') {
        Some((t, s)) if token(t) && token(s) => Ok(media),
        _ => Err(Failure::bad_request(format!("Content-Type {value:?} is not a media type (type/subtype)"))),
    }
}

fn content_type(headers: &HeaderMap) -> Result<Option<String>, Failure> {
    match header(headers, http::header::CONTENT_TYPE.as_str())? {
        None => Ok(None),
        Some(v) if v.trim().is_empty() => Ok(None),
        Some(v) => media_type(v).map(Some),
    }
}

/// A `true`/`false` header (either case; absent: `false`), named `shown`
/// in the refusal of any other value.
fn flag(headers: &HeaderMap, name: &str, shown: &str) -> Result<bool, Failure> {
    match header(headers, name)? {
        None => Ok(false),
        Some(v) if v.eq_ignore_ascii_case("true") => Ok(true),
        Some(v) if v.eq_ignore_ascii_case("false") => Ok(false),
        Some(v) => Err(Failure::bad_request(format!("{shown} must be true or false, got {v:?}"))),
    }
}

/// `Rill-Allow-Stale`.
fn allow_stale(headers: &HeaderMap) -> Result<bool, Failure> {
    flag(headers, h::RILL_ALLOW_STALE, "Rill-Allow-Stale")
}

fn closed_flag(headers: &HeaderMap) -> Result<bool, Failure> {
    flag(headers, h::STREAM_CLOSED, "Stream-Closed")
}

/// All three producer headers, or none.
fn producer(headers: &HeaderMap) -> Result<Option<ProducerArgs>, Failure> {
    let id = header(headers, h::PRODUCER_ID)?;
    let epoch = header(headers, h::PRODUCER_EPOCH)?;
    let seq = header(headers, h::PRODUCER_SEQ)?;
    match (id, epoch, seq) {
        (None, None, None) => Ok(None),
        (Some(id), Some(epoch), Some(seq)) => {
            if id.is_empty() {
                return Err(Failure::bad_request("Producer-Id must not be empty"));
            }
            let epoch = parse_strict_u64("Producer-Epoch", epoch).map_err(Failure::bad_request)?;
            let seq = parse_strict_u64("Producer-Seq", seq).map_err(Failure::bad_request)?;
            Ok(Some(ProducerArgs { id: id.to_string(), epoch, seq }))
        }
        _ => Err(Failure::bad_request(
            "Producer-Id, Producer-Epoch and Producer-Seq must be sent together, or none of them",
        )),
    }
}

fn stream_seq(headers: &HeaderMap) -> Result<Option<String>, Failure> {
    match header(headers, h::STREAM_SEQ)? {
        None => Ok(None),
        Some("") => Err(Failure::bad_request("Stream-Seq must not be empty")),
        Some(v) => Ok(Some(v.to_string())),
    }
}

fn map_put(id: StreamId, headers: &HeaderMap, body: Bytes) -> Result<CreateCmd, Failure> {
    let named = content_type(headers)?;
    let content_type_named = named.is_some();
    let ct = named.unwrap_or_else(|| DEFAULT_CONTENT_TYPE.to_string());
    let ttl = header(headers, h::STREAM_TTL)?;
    let expires = header(headers, h::STREAM_EXPIRES_AT)?;
    if ttl.is_some() && expires.is_some() {
        return Err(Failure::bad_request("Stream-TTL and Stream-Expires-At cannot both be set"));
    }
    let fork = fork_spec(headers)?;
    let json = json::is_json(&ct);
    let mut create = Create::new(id).content_type(ct).closed(closed_flag(headers)?);
    if let Some(ttl) = ttl {
        create = create.ttl_s(parse_ttl(ttl).map_err(Failure::bad_request)?);
    }
    if let Some(at) = expires {
        create = create.expires_at_ms(
            parse_rfc3339_ms(at).map_err(|m| Failure::bad_request(format!("Stream-Expires-At: {m}")))?,
        );
    }
    create.producer = producer(headers)?;
    create.stream_seq = stream_seq(headers)?;
    if !body.is_empty() {
        // JSON mode stores each message as its own record.
        let records =
            if json { json::split_messages(&body, true).map_err(Failure::bad_request)? } else { vec![body] };
        create = create.initial_records(records);
    }
    Ok(CreateCmd { create, fork, json, content_type_named })
}

fn fork_spec(headers: &HeaderMap) -> Result<Option<ForkSpec>, Failure> {
    let from = header(headers, h::STREAM_FORKED_FROM)?;
    let offset = header(headers, h::STREAM_FORK_OFFSET)?;
    let sub = header(headers, h::STREAM_FORK_SUB_OFFSET)?;
    let Some(from) = from else {
        if offset.is_some() || sub.is_some() {
            return Err(Failure::bad_request(
                "Stream-Fork-Offset and Stream-Fork-Sub-Offset need Stream-Forked-From",
            ));
        }
        return Ok(None);
    };
    let source = path::stream_id_of_reference(from)
        .map_err(|e| Failure::bad_request(format!("Stream-Forked-From: {}", e.message())))?;
    let offset = match offset {
        None => None,
        Some(text) => {
            match parse_offset(text).map_err(|m| Failure::bad_request(format!("Stream-Fork-Offset: {m}")))? {
                OffsetSpec::Now => None,
                spec => Some(spec),
            }
        }
    };
    let sub_offset = match sub {
        None => 0,
        Some(text) => parse_strict_u64("Stream-Fork-Sub-Offset", text).map_err(Failure::bad_request)?,
    };
    if sub_offset > 0 && offset.is_none() {
        return Err(Failure::bad_request("Stream-Fork-Sub-Offset above 0 needs Stream-Fork-Offset"));
    }
    Ok(Some(ForkSpec { source, offset, sub_offset }))
}

fn map_post(id: StreamId, headers: &HeaderMap, body: Bytes) -> Result<Command, Failure> {
    let closed = closed_flag(headers)?;
    let producer = producer(headers)?;
    let stream_seq = stream_seq(headers)?;
    if body.is_empty() {
        if !closed {
            return Err(Failure::bad_request(
                "an append needs a non-empty body (or Stream-Closed: true to close)",
            ));
        }
        return Ok(Command::Close(Close { id, producer, stream_seq }));
    }
    let Some(ct) = content_type(headers)? else {
        return Err(Failure::bad_request("an append needs a Content-Type"));
    };
    let json = json::is_json(&ct);
    let records =
        if json { json::split_messages(&body, false).map_err(Failure::bad_request)? } else { vec![body] };
    let mut append = Append::records(id, records).content_type(ct).close_after(closed);
    append.producer = producer;
    append.stream_seq = stream_seq;
    Ok(Command::Append(AppendCmd { append, json }))
}

/// One query parameter's values, percent-decoded.
fn query_values(query: &str, key: &str) -> Result<Vec<String>, Failure> {
    let mut values = Vec::new();
    for pair in query.split('&').filter(|p| !p.is_empty()) {
        let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
        if k != key {
            continue;
        }
        let bytes = path::percent_decode(v)
            .ok_or_else(|| Failure::bad_request(format!("query parameter {key} has a malformed %-escape")))?;
        let text = String::from_utf8(bytes)
            .map_err(|_| Failure::bad_request(format!("query parameter {key} is not UTF-8")))?;
        values.push(text);
    }
    Ok(values)
}

fn single(query: &str, key: &str) -> Result<Option<String>, Failure> {
    let mut values = query_values(query, key)?;
    match values.len() {
        0 => Ok(None),
        1 => Ok(values.pop()),
        n => Err(Failure::bad_request(format!("query parameter {key} is given {n} times"))),
    }
}

fn map_get(id: StreamId, query: &str, headers: &HeaderMap) -> Result<ReadCmd, Failure> {
    let offset_text = single(query, "offset")?;
    let offset = match &offset_text {
        None => OffsetSpec::Start,
        Some(t) => parse_offset(t).map_err(Failure::bad_request)?,
    };
    let live = match single(query, "live")?.as_deref() {
        None => Live::No,
        Some("long-poll") => Live::LongPoll,
        Some("sse") => Live::Sse,
        Some(other) => {
            return Err(Failure::bad_request(format!("live must be long-poll or sse, got {other:?}")));
        }
    };
    if live != Live::No && offset_text.is_none() {
        return Err(Failure::bad_request(
            "live reads need an offset (use offset=-1 for the start or offset=now)",
        ));
    }
    let cursor = single(query, "cursor")?.and_then(|c| c.parse::<u64>().ok());
    let if_none_match = header(headers, http::header::IF_NONE_MATCH.as_str())?.map(str::to_string);
    let stale = allow_stale(headers)?;
    Ok(ReadCmd { id, offset, live, cursor, if_none_match, stale })
}

#[cfg(test)]
mod tests {
    use super::*;
    use http::HeaderValue;

    fn req(method: &str, uri: &str, hdrs: &[(&str, &str)], body: &[u8]) -> Result<Command, Failure> {
        let mut map = HeaderMap::new();
        for (k, v) in hdrs {
            map.append(
                http::HeaderName::from_bytes(k.as_bytes()).unwrap(),
                HeaderValue::from_str(v).unwrap(),
            );
        }
        map_request(&method.parse().unwrap(), &uri.parse().unwrap(), &map, Bytes::copy_from_slice(body))
    }

    fn status(r: Result<Command, Failure>) -> u16 {
        r.err().map_or(0, |f| f.status.as_u16())
    }

    #[test]
    fn put_maps_to_create() {
        let Command::Create(c) = req(
            "PUT",
            "/v1/stream/s",
            &[("content-type", "Text/Plain; charset=utf-8"), ("stream-ttl", "60")],
            b"hi",
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(c.create.content_type.as_deref(), Some("text/plain"));
        assert_eq!(c.create.ttl_s, Some(60));
        assert_eq!(c.create.initial_payload.as_deref(), Some(&b"hi"[..]));
        assert!(c.fork.is_none() && !c.json);
        let Command::Create(c) = req("PUT", "/v1/stream/s", &[], b"").unwrap() else { panic!() };
        assert_eq!(c.create.content_type.as_deref(), Some(DEFAULT_CONTENT_TYPE));
    }

    #[test]
    fn rill_allow_stale_marks_reads_and_heads() {
        let Command::Read(r) =
            req("GET", "/v1/stream/s?offset=-1", &[("rill-allow-stale", "TRUE")], b"").unwrap()
        else {
            panic!()
        };
        assert!(r.stale);
        let Command::Read(r) = req("GET", "/v1/stream/s", &[], b"").unwrap() else { panic!() };
        assert!(!r.stale, "a read is linearizable unless it asks");
        let Command::Head { stale, .. } =
            req("HEAD", "/v1/stream/s", &[("rill-allow-stale", "true")], b"").unwrap()
        else {
            panic!()
        };
        assert!(stale);
        let Command::Head { stale, .. } =
            req("HEAD", "/v1/stream/s", &[("rill-allow-stale", "false")], b"").unwrap()
        else {
            panic!()
        };
        assert!(!stale);
        assert_eq!(status(req("GET", "/v1/stream/s", &[("rill-allow-stale", "yes")], b"")), 400);
        assert_eq!(status(req("HEAD", "/v1/stream/s", &[("rill-allow-stale", "1")], b"")), 400);
    }

    #[test]
    fn put_refusals() {
        assert_eq!(
            status(req(
                "PUT",
                "/v1/stream/s",
                &[("stream-ttl", "60"), ("stream-expires-at", "2030-01-01T00:00:00Z")],
                b""
            )),
            400
        );
        for ttl in ["abc", "-1", "00060", "+60", "60.5", "1e3"] {
            assert_eq!(status(req("PUT", "/v1/stream/s", &[("stream-ttl", ttl)], b"")), 400, "{ttl}");
        }
        assert_eq!(status(req("PUT", "/v1/stream/s", &[("stream-expires-at", "not-a-timestamp")], b"")), 400);
        assert_eq!(status(req("PUT", "/v1/stream/s", &[("content-type", "application/json")], b"{bad")), 400);
        assert_eq!(status(req("PUT", "/v1/stream/s", &[("stream-fork-sub-offset", "0")], b"")), 400);
        assert_eq!(
            status(req(
                "PUT",
                "/v1/stream/s",
                &[("stream-forked-from", "/v1/stream/a"), ("stream-fork-sub-offset", "2")],
                b""
            )),
            400
        );
        assert_eq!(
            status(req(
                "PUT",
                "/v1/stream/s",
                &[("stream-forked-from", "/v1/stream/a"), ("stream-fork-offset", "x")],
                b""
            )),
            400
        );
        assert_eq!(status(req("PUT", "/v1/stream/s", &[("content-type", "nonsense")], b"")), 400);
    }

    #[test]
    fn json_put_allows_an_empty_array_and_post_does_not() {
        let ct = [("content-type", "application/json")];
        let Command::Create(c) = req("PUT", "/v1/stream/s", &ct, b"[]").unwrap() else { panic!() };
        assert!(c.json && c.create.initial_payload.is_none());
        assert_eq!(status(req("POST", "/v1/stream/s", &ct, b"[]")), 400);
        let Command::Append(a) = req("POST", "/v1/stream/s", &ct, b"[1,2]").unwrap() else { panic!() };
        // Each message is its own record of one append.
        assert_eq!(&a.append.payload[..], b"1");
        assert_eq!(a.append.more_records, vec![bytes::Bytes::from_static(b"2")]);
    }

    #[test]
    fn fork_headers() {
        let hdrs = [
            ("stream-forked-from", "/v1/stream/src"),
            ("stream-fork-offset", "0000000000000000_0000000000000004"),
            ("stream-fork-sub-offset", "3"),
        ];
        let Command::Create(c) = req("PUT", "/v1/stream/f", &hdrs, b"").unwrap() else { panic!() };
        let fork = c.fork.unwrap();
        assert_eq!(fork.source.stream(), "src");
        assert_eq!(fork.offset, Some(OffsetSpec::At(4)));
        assert_eq!(fork.sub_offset, 3);
    }

    #[test]
    fn post_maps_to_append_or_close() {
        let Command::Append(a) = req(
            "POST",
            "/v1/stream/s",
            &[
                ("content-type", "text/plain"),
                ("producer-id", "p"),
                ("producer-epoch", "1"),
                ("producer-seq", "2"),
                ("stream-seq", "007"),
                ("stream-closed", "true"),
            ],
            b"x",
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!(a.append.producer, Some(ProducerArgs { id: "p".into(), epoch: 1, seq: 2 }));
        assert_eq!(a.append.stream_seq.as_deref(), Some("007"));
        assert!(a.append.close_after);
        let Command::Close(c) = req(
            "POST",
            "/v1/stream/s",
            &[("stream-closed", "true"), ("content-type", "application/json")],
            b"",
        )
        .unwrap() else {
            panic!()
        };
        assert!(c.producer.is_none());
    }

    #[test]
    fn post_refusals() {
        let ct = ("content-type", "text/plain");
        assert_eq!(status(req("POST", "/v1/stream/s", &[ct], b"")), 400);
        assert_eq!(status(req("POST", "/v1/stream/s", &[], b"data")), 400);
        assert_eq!(status(req("POST", "/v1/stream/s", &[ct, ("producer-id", "p")], b"d")), 400);
        assert_eq!(status(req("POST", "/v1/stream/s", &[ct, ("producer-epoch", "0")], b"d")), 400);
        assert_eq!(
            status(req("POST", "/v1/stream/s", &[ct, ("producer-id", "p"), ("producer-epoch", "0")], b"d")),
            400
        );
        for (e, s) in [("0", "1abc"), ("0xyz", "0"), ("1e3", "0"), ("-1", "0")] {
            assert_eq!(
                status(req(
                    "POST",
                    "/v1/stream/s",
                    &[ct, ("producer-id", "p"), ("producer-epoch", e), ("producer-seq", s)],
                    b"d"
                )),
                400
            );
        }
        assert_eq!(
            status(req(
                "POST",
                "/v1/stream/s",
                &[ct, ("producer-id", ""), ("producer-epoch", "0"), ("producer-seq", "0")],
                b"d"
            )),
            400
        );
        assert_eq!(status(req("POST", "/v1/stream/s", &[ct, ("stream-closed", "maybe")], b"d")), 400);
        assert_eq!(
            status(req("POST", "/v1/stream/s", &[("content-type", "application/json")], b"{ invalid json }")),
            400
        );
    }

    #[test]
    fn get_maps_to_read() {
        let Command::Read(r) = req(
            "GET",
            "/v1/stream/s?offset=now&live=long-poll&cursor=7&foo=bar",
            &[("if-none-match", "\"e\"")],
            b"",
        )
        .unwrap() else {
            panic!()
        };
        assert_eq!((r.offset, r.live, r.cursor), (OffsetSpec::Now, Live::LongPoll, Some(7)));
        assert_eq!(r.if_none_match.as_deref(), Some("\"e\""));
        let Command::Read(r) = req("GET", "/v1/stream/s", &[], b"").unwrap() else { panic!() };
        assert_eq!((r.offset, r.live), (OffsetSpec::Start, Live::No));
    }

    #[test]
    fn get_refusals() {
        for q in [
            "offset=",
            "offset=a&offset=b",
            "offset=0,1",
            "offset=0%201",
            "live=long-poll",
            "live=sse",
            "offset=-1&live=ws",
            "offset=%zz",
        ] {
            assert_eq!(status(req("GET", &format!("/v1/stream/s?{q}"), &[], b"")), 400, "{q}");
        }
    }

    #[test]
    fn routes_and_methods() {
        assert_eq!(req("GET", "/health", &[], b"").unwrap(), Command::Health);
        assert_eq!(req("OPTIONS", "/v1/stream/x", &[], b"").unwrap(), Command::Preflight);
        assert_eq!(status(req("PATCH", "/v1/stream/x", &[], b"")), 405);
        assert_eq!(status(req("POST", "/health", &[], b"")), 405);
        assert_eq!(status(req("GET", "/nope", &[], b"")), 404);
        assert_eq!(status(req("GET", "/v1/stream/a/b/c", &[], b"")), 400);
        assert!(
            matches!(req("DELETE", "/v1/stream/b/s", &[], b"").unwrap(), Command::Delete(id) if id.bucket() == "b")
        );
    }
}
