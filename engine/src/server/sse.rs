//! Live reads as server-sent events (`live=sse`).
//!
//! The body is a stream of events: each read that returns bytes gives one
//! `event: data` followed by one `event: control` whose data is a flat JSON
//! object `{"streamNextOffset", "streamCursor", "upToDate"}` (plus
//! `"streamClosed": true`, without a cursor, once the stream is closed at
//! the tail, after which the body ends). The first read answers at once
//! (so a client at the tail learns it is up to date); later ones wait on
//! the engine's live read for up to the long-poll timeout, sending a
//! comment line (`:`) as a keep-alive when nothing came. Text and JSON
//! payloads are sent as `data:` lines split at every CR, LF or CRLF, so a
//! payload can never end an event or forge one; any other content type is
//! sent base64-encoded on one `data:` line, announced by
//! `Stream-SSE-Data-Encoding: base64`. The stream ends on shutdown, on an
//! engine error, and when the client goes away (hyper drops the body,
//! which drops the parked read, which the owner core then forgets).

use std::pin::pin;
use std::rc::Rc;
use std::sync::atomic::Ordering;

use base64::Engine as _;
use bytes::{Bytes, BytesMut};
use futures::future::{select, Either};
use http::header::CACHE_CONTROL;
use http::{Response, StatusCode};

use super::command::ReadCmd;
use super::headers as h;
use super::json;
use super::protocol::{format_offset, next_cursor, now_ms};
use super::respond::{Body, Reply};
use super::state::Ctx;
use crate::{HeadReply, Read, ReadReply, StreamId};

/// How data events carry bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Encoding {
    /// `data:` lines of the payload's own text.
    Text,
    /// One `data:` line of base64.
    Base64,
}

/// The encoding for a stream's content type.
pub(crate) fn encoding_for(content_type: &str) -> Encoding {
    let textual = content_type.starts_with("text/")
        || json::is_json(content_type)
        || content_type.ends_with("+json")
        || content_type == "application/x-ndjson";
    if textual {
        Encoding::Text
    } else {
        Encoding::Base64
    }
}

/// Appends `data:` lines for `payload`, split at CR, LF and CRLF.
pub(crate) fn push_data_lines(out: &mut BytesMut, payload: &[u8]) {
    let mut rest = payload;
    loop {
        let cut = rest.iter().position(|b| *b == b'\n' || *b == b'\r');
        out.extend_from_slice(b"data:");
        match cut {
            None => {
                out.extend_from_slice(rest);
                out.extend_from_slice(b"\n");
                return;
            }
            Some(i) => {
                out.extend_from_slice(&rest[..i]);
                out.extend_from_slice(b"\n");
                let skip = if rest[i] == b'\r' && rest.get(i + 1) == Some(&b'\n') { 2 } else { 1 };
                rest = &rest[i + skip..];
            }
        }
    }
}

/// One `event: data` for a payload.
pub(crate) fn data_event(out: &mut BytesMut, payload: &[u8], encoding: Encoding) {
    out.extend_from_slice(b"event: data\n");
    match encoding {
        Encoding::Text => push_data_lines(out, payload),
        Encoding::Base64 => {
            out.extend_from_slice(b"data:");
            out.extend_from_slice(base64::engine::general_purpose::STANDARD.encode(payload).as_bytes());
            out.extend_from_slice(b"\n");
        }
    }
    out.extend_from_slice(b"\n");
}

/// One `event: control` after a read.
pub(crate) fn control_event(out: &mut BytesMut, r: &ReadReply, cursor: u64) {
    let mut obj = format!(r#"{{"streamNextOffset":"{}""#, format_offset(r.next_offset));
    if r.closed {
        obj.push_str(r#","upToDate":true,"streamClosed":true}"#);
    } else {
        obj.push_str(&format!(r#","streamCursor":"{cursor}","upToDate":{}}}"#, r.up_to_date));
    }
    out.extend_from_slice(b"event: control\ndata:");
    out.extend_from_slice(obj.as_bytes());
    out.extend_from_slice(b"\n\n");
}

struct State {
    ctx: Rc<Ctx>,
    id: StreamId,
    offset: u64,
    cursor: Option<u64>,
    encoding: Encoding,
    json: bool,
    stale: bool,
    first: bool,
    done: bool,
    _live: LiveGuard,
}

/// Counts open SSE bodies in the HTTP stats.
struct LiveGuard(std::sync::Arc<super::state::Shared>);

impl Drop for LiveGuard {
    fn drop(&mut self) {
        self.0.stats.sse_streams_active.fetch_sub(1, Ordering::Relaxed);
    }
}

/// Takes the next chunk of events, or `None` when the body ends.
async fn step(mut s: State) -> Option<(Bytes, State)> {
    if s.done || s.ctx.shared.shutdown.is_tripped() {
        return None;
    }
    let options = &s.ctx.shared.options;
    let read = Read::new(s.id.clone())
        .offset(s.offset)
        .max_len(options.max_read_bytes)
        .records(s.json)
        .allow_stale(s.stale);
    let first = std::mem::replace(&mut s.first, false);
    let result = if first {
        s.ctx.engine.read(read).await
    } else {
        let wait = pin!(s.ctx.engine.wait_read(read, options.long_poll_timeout));
        let stop = pin!(s.ctx.shared.shutdown.wait());
        match select(wait, stop).await {
            Either::Left((r, _)) => r,
            Either::Right(_) => return None,
        }
    };
    let r = match result {
        Ok(r) => r,
        Err(err) => {
            tracing::debug!(error = %err, "sse stream ends on an engine error");
            return None;
        }
    };
    let mut out = BytesMut::new();
    let had_data = !r.payload.is_empty();
    if had_data {
        let payload = json::read_body(&r, s.json);
        data_event(&mut out, &payload, s.encoding);
    }
    let cursor = next_cursor(now_ms(), s.cursor);
    if had_data || r.closed || first {
        control_event(&mut out, &r, cursor);
    } else {
        out.extend_from_slice(b":\n\n");
    }
    s.offset = r.next_offset;
    s.done = r.closed;
    Some((out.freeze(), s))
}

/// The SSE response for a read command.
pub(crate) fn response(ctx: Rc<Ctx>, cmd: ReadCmd, head: &HeadReply, offset: u64) -> Response<Body> {
    let encoding = encoding_for(&head.content_type);
    ctx.shared.stats.sse_streams_active.fetch_add(1, Ordering::Relaxed);
    let state = State {
        _live: LiveGuard(ctx.shared.clone()),
        ctx,
        id: cmd.id,
        offset,
        cursor: cmd.cursor,
        encoding,
        json: json::is_json(&head.content_type),
        stale: cmd.stale,
        first: true,
        done: false,
    };
    let events = futures::stream::unfold(state, step);
    Reply::new(StatusCode::OK)
        .content_type("text/event-stream")
        .header(CACHE_CONTROL.as_str(), "no-cache")
        .header_if(encoding == Encoding::Base64, h::STREAM_SSE_DATA_ENCODING, "base64")
        .body(Body::Stream(Box::pin(events)))
        .build()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lines_split_at_every_line_break() {
        let mut out = BytesMut::new();
        push_data_lines(&mut out, b"a\r\n\r\nevent: control\rb\nc");
        assert_eq!(&out[..], b"data:a\ndata:\ndata:event: control\ndata:b\ndata:c\n");
    }

    #[test]
    fn events_are_framed() {
        let mut out = BytesMut::new();
        data_event(&mut out, b"Hello", Encoding::Base64);
        assert_eq!(&out[..], b"event: data\ndata:SGVsbG8=\n\n");
        let r = ReadReply {
            payload: Bytes::new(),
            offset: 0,
            next_offset: 5,
            up_to_date: true,
            closed: false,
            records: Vec::new(),
        };
        let mut out = BytesMut::new();
        control_event(&mut out, &r, 9);
        let text = String::from_utf8(out.to_vec()).unwrap();
        assert!(text.starts_with("event: control\ndata:{"));
        let json: serde_json::Value =
            serde_json::from_str(text.trim_end().strip_prefix("event: control\ndata:").unwrap()).unwrap();
        assert_eq!(json["streamNextOffset"], format_offset(5));
        assert_eq!(json["streamCursor"], "9");
        assert_eq!(json["upToDate"], true);
        let closed = ReadReply { closed: true, ..r };
        let mut out = BytesMut::new();
        control_event(&mut out, &closed, 9);
        let text = String::from_utf8(out.to_vec()).unwrap();
        assert!(text.contains(r#""streamClosed":true"#) && !text.contains("streamCursor"));
    }

    #[test]
    fn encodings_by_content_type() {
        assert_eq!(encoding_for("text/plain"), Encoding::Text);
        assert_eq!(encoding_for("application/json"), Encoding::Text);
        assert_eq!(encoding_for("application/octet-stream"), Encoding::Base64);
        assert_eq!(encoding_for("image/png"), Encoding::Base64);
    }
}
