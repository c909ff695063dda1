//! Executing commands: one request in, one engine call (or two), one
//! response out.
//!
//! [`handle`] collects the body (at most `max_body_bytes`, else 413),
//! maps the request with the pure [`map_request`], runs the command on the
//! engine (whose futures complete on whichever core owns the stream; this
//! task stays on the core that accepted the connection) and writes the
//! protocol's answer. No response says 2xx before the engine acknowledged
//! the write, and the engine acknowledges only once it is durable (under
//! the default durability). Reads ask `head` first for the stream's
//! content type and tail (a read reply carries neither), then read.

use std::pin::pin;
use std::rc::Rc;

use bytes::Bytes;
use futures::future::{select, Either};
use http::header::{CACHE_CONTROL, ETAG, HOST, LOCATION};
use http::{Request, Response, StatusCode};
use http_body_util::{BodyExt, Limited};
use hyper::body::Incoming;

use super::command::{map_request, AppendCmd, Command, CreateCmd, ForkSpec, Live, ReadCmd};
use super::forward::{forward, Replayable, FORWARDED};
use super::headers as h;
use super::json;
use super::observe;
use super::protocol::{format_offset, format_rfc3339_ms, next_cursor, now_ms, OffsetSpec};
use super::respond::{failure, Body, Reply};
use super::sse;
use super::state::Ctx;
use super::status::Failure;
use crate::{Close, Fork, ForkPoint, HeadReply, Read, StreamId};

/// Serves one request.
pub(crate) async fn handle(ctx: Rc<Ctx>, req: Request<Incoming>) -> Response<Body> {
    let response = match serve(&ctx, req).await {
        Ok(r) => r,
        Err(f) => failure(&f),
    };
    ctx.shared.stats.count_response(response.status().as_u16());
    response
}

async fn serve(ctx: &Rc<Ctx>, req: Request<Incoming>) -> Result<Response<Body>, Failure> {
    let (parts, body) = req.into_parts();
    let limit = ctx.shared.options.max_body_bytes;
    if let Some(len) = parts
        .headers
        .get(http::header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
    {
        if len > limit as u64 {
            return Err(Failure::payload_too_large(len, limit as u64));
        }
    }
    let body = match Limited::new(body, limit).collect().await {
        Ok(collected) => own_small(collected.to_bytes()),
        Err(e) if e.is::<http_body_util::LengthLimitError>() => {
            return Err(Failure::payload_too_large(limit as u64 + 1, limit as u64));
        }
        Err(e) => return Err(Failure::bad_request(format!("could not read the request body: {e}"))),
    };
    let cluster = ctx.engine.config().cluster_config();
    let replay = (cluster.is_some() && !parts.headers.contains_key(FORWARDED)).then(|| Replayable {
        method: parts.method.clone(),
        uri: parts.uri.clone(),
        headers: parts.headers.clone(),
        body: body.clone(),
    });
    let result = execute(ctx, &parts, body).await;
    match (result, replay, cluster) {
        (Err(failure), Some(replay), Some(cluster)) => {
            // A follower of the stream's group: on to its leader.
            let leader = failure.leader.filter(|n| *n != cluster.node());
            match leader.and_then(|n| ctx.engine.cluster_member(n)).filter(|m| !m.http_addr.is_empty()) {
                Some(member) => forward(&member.http_addr, replay).await,
                None => Err(failure),
            }
        }
        (result, _, _) => result,
    }
}

/// Runs one mapped request on this node's engine.
async fn execute(
    ctx: &Rc<Ctx>,
    parts: &http::request::Parts,
    body: Bytes,
) -> Result<Response<Body>, Failure> {
    let command = map_request(&parts.method, &parts.uri, &parts.headers, body)?;
    match command {
        Command::Health => Ok(observe::health(&ctx.engine)),
        Command::Metrics => Ok(observe::metrics(&ctx.engine, &ctx.shared.stats)),
        Command::Preflight => {
            let mut response = Reply::new(StatusCode::NO_CONTENT).build();
            h::add_preflight(response.headers_mut());
            Ok(response)
        }
        Command::Create(cmd) => {
            let host = parts.headers.get(HOST).and_then(|v| v.to_str().ok()).unwrap_or("localhost");
            let location = format!("http://{host}{}", parts.uri.path());
            create(ctx, cmd, &location).await
        }
        Command::Append(cmd) => append(ctx, cmd).await,
        Command::Close(cmd) => close(ctx, cmd).await,
        Command::Head { id, stale } => head(ctx, id, stale).await,
        Command::Delete(id) => {
            ctx.engine.delete(&id).await?;
            Ok(Reply::new(StatusCode::NO_CONTENT).build())
        }
        Command::Read(cmd) => read(ctx, cmd).await,
        Command::ClusterShow => cluster_json(ctx.engine.cluster_members().await?),
        Command::ClusterChange { change, wait } => {
            cluster_json(ctx.engine.change_members(change, wait).await?)
        }
    }
}

/// A cluster view as the admin endpoints answer it.
fn cluster_json(view: crate::ClusterView) -> Result<Response<Body>, Failure> {
    let body = super::cluster_admin::render(&view).to_string();
    Ok(Reply::new(StatusCode::OK).content_type("application/json").bytes(Bytes::from(body)).build())
}

/// Bodies below this are copied into their own allocation.
pub(crate) const OWN_BELOW_BYTES: usize = 64 << 10;

/// A small body arrives as a slice of hyper's read buffer; the engine keeps
/// payloads (hot buffer, WAL batch) until they are flushed, and a slice
/// would keep the whole buffer alive with it. So small bodies get their
/// own allocation (large ones are mostly their own buffer already).
fn own_small(body: Bytes) -> Bytes {
    if body.len() < OWN_BELOW_BYTES {
        Bytes::copy_from_slice(&body)
    } else {
        body
    }
}

async fn create(ctx: &Ctx, cmd: CreateCmd, location: &str) -> Result<Response<Body>, Failure> {
    let closed = cmd.create.closed;
    let (reply, content_type) = match cmd.fork {
        Some(spec) => fork(ctx, cmd.create, spec, cmd.content_type_named).await?,
        None => {
            let content_type = cmd.create.effective_content_type().to_string();
            (ctx.engine.create(cmd.create).await.map_err(put_failure)?, content_type)
        }
    };
    let status = if reply.already_exists { StatusCode::OK } else { StatusCode::CREATED };
    Ok(Reply::new(status)
        .content_type(&content_type)
        .header(h::STREAM_NEXT_OFFSET, format_offset(reply.next_offset))
        .header_if(!reply.already_exists, LOCATION.as_str(), location)
        .header_if(closed, h::STREAM_CLOSED, "true")
        .build())
}

/// A `PUT` answers 409 for a soft-deleted name (the protocol's "in use"),
/// where other methods answer 410.
fn put_failure(err: crate::Error) -> Failure {
    let mut failure = Failure::from(&err);
    if err.code() == crate::ErrorCode::StreamGone {
        failure.status = StatusCode::CONFLICT;
    }
    failure
}

/// A `PUT` with `Stream-Forked-From` (SPEC §2 "Forks"). The sub-offset
/// counts bytes into the message at the fork offset, or messages from it
/// in JSON mode; a fork that names no content type takes its source's, and
/// its initial body is split into messages when that type is JSON.
async fn fork(
    ctx: &Ctx,
    mut create: crate::Create,
    spec: ForkSpec,
    content_type_named: bool,
) -> Result<(crate::CreateReply, String), Failure> {
    let source = ctx.engine.head(&spec.source).await.map_err(put_failure)?;
    if !content_type_named {
        create.content_type = None;
        if json::is_json(&source.content_type) {
            if let Some(body) = create.initial_payload.take() {
                let records = json::split_messages(&body, true).map_err(Failure::bad_request)?;
                create = create.initial_records(records);
            }
        }
    }
    let json_mode = json::is_json(create.content_type.as_deref().unwrap_or(&source.content_type));
    let point = match spec.offset {
        None => ForkPoint::Tail,
        Some(offset) => {
            let offset = resolve(offset, &source);
            match spec.sub_offset {
                0 => ForkPoint::Offset(offset),
                n if json_mode => ForkPoint::Records { offset, count: n },
                n => ForkPoint::IntoRecord { offset, bytes: n },
            }
        }
    };
    let content_type = create.content_type.clone().unwrap_or_else(|| source.content_type.clone());
    let reply = ctx.engine.fork(Fork::new(create, spec.source).at(point)).await.map_err(put_failure)?;
    Ok((reply, content_type))
}

async fn append(ctx: &Ctx, cmd: AppendCmd) -> Result<Response<Body>, Failure> {
    let producer = cmd.append.producer.clone();
    let reply = ctx.engine.append(cmd.append).await?;
    let status =
        if producer.is_some() && !reply.deduplicated { StatusCode::OK } else { StatusCode::NO_CONTENT };
    let mut out = Reply::new(status)
        .header(h::STREAM_NEXT_OFFSET, format_offset(reply.next_offset))
        .header_if(reply.closed, h::STREAM_CLOSED, "true");
    if let Some(p) = producer {
        // The highest seq accepted from this producer, so a retry of an
        // older seq learns where the producer really is.
        let seq = reply.producer_seq.unwrap_or(p.seq);
        out = out.header(h::PRODUCER_EPOCH, p.epoch.to_string()).header(h::PRODUCER_SEQ, seq.to_string());
    }
    Ok(out.build())
}

async fn close(ctx: &Ctx, cmd: Close) -> Result<Response<Body>, Failure> {
    let producer = cmd.producer.clone();
    let reply = ctx.engine.close_with(cmd).await?;
    let mut out = Reply::new(StatusCode::NO_CONTENT)
        .header(h::STREAM_NEXT_OFFSET, format_offset(reply.next_offset))
        .header(h::STREAM_CLOSED, "true");
    if let Some(p) = producer {
        out = out.header(h::PRODUCER_EPOCH, p.epoch.to_string()).header(h::PRODUCER_SEQ, p.seq.to_string());
    }
    Ok(out.build())
}

/// The metadata headers shared by HEAD and reads.
fn with_metadata(reply: Reply, head: &HeadReply) -> Reply {
    reply
        .content_type(&head.content_type)
        .header_if(head.ttl_s.is_some(), h::STREAM_TTL, head.ttl_s.unwrap_or(0).to_string())
        .header_if(
            head.expires_at_ms.is_some(),
            h::STREAM_EXPIRES_AT,
            format_rfc3339_ms(head.expires_at_ms.unwrap_or(0)),
        )
}

async fn head(ctx: &Ctx, id: StreamId, stale: bool) -> Result<Response<Body>, Failure> {
    let head = stream_head(ctx, &id, stale).await?;
    Ok(with_metadata(Reply::new(StatusCode::OK), &head)
        .header(h::STREAM_NEXT_OFFSET, format_offset(head.tail_offset))
        .header_if(head.closed, h::STREAM_CLOSED, "true")
        .header(CACHE_CONTROL.as_str(), "no-store")
        .build())
}

/// The stream's metadata: as this replica holds it when the request allows
/// a stale answer, else confirmed by the group's leader.
async fn stream_head(ctx: &Ctx, id: &StreamId, stale: bool) -> crate::Result<HeadReply> {
    if stale {
        ctx.engine.head_stale(id).await
    } else {
        ctx.engine.head(id).await
    }
}

/// The byte offset a read starts at.
fn resolve(spec: OffsetSpec, head: &HeadReply) -> u64 {
    match spec {
        OffsetSpec::Start => head.retained_offset,
        OffsetSpec::Now => head.tail_offset,
        OffsetSpec::At(o) => o,
    }
}

async fn read(ctx: &Rc<Ctx>, cmd: ReadCmd) -> Result<Response<Body>, Failure> {
    let head = stream_head(ctx, &cmd.id, cmd.stale).await?;
    let offset = resolve(cmd.offset, &head);
    let max_len = ctx.shared.options.max_read_bytes;
    match cmd.live {
        Live::Sse => Ok(sse::response(ctx.clone(), cmd, &head, offset)),
        Live::LongPoll => long_poll(ctx, cmd, &head, offset).await,
        Live::No => {
            let json_mode = json::is_json(&head.content_type);
            let read =
                Read::new(cmd.id).offset(offset).max_len(max_len).records(json_mode).allow_stale(cmd.stale);
            let r = ctx.engine.read(read).await?;
            let etag = format!("\"{}-{}-{}\"", offset, r.next_offset, if r.closed { "c" } else { "o" });
            let cache = if cmd.offset == OffsetSpec::Now {
                "no-store"
            } else if r.up_to_date {
                "no-cache"
            } else {
                "public, max-age=60, stale-while-revalidate=300"
            };
            let reply = |status| {
                with_metadata(Reply::new(status), &head)
                    .header(h::STREAM_NEXT_OFFSET, format_offset(r.next_offset))
                    .header(ETAG.as_str(), &etag)
                    .header(CACHE_CONTROL.as_str(), cache)
                    .header_if(r.up_to_date, h::STREAM_UP_TO_DATE, "true")
                    .header_if(r.closed, h::STREAM_CLOSED, "true")
            };
            if cmd.if_none_match.as_deref().is_some_and(|inm| etag_matches(inm, &etag)) {
                return Ok(reply(StatusCode::NOT_MODIFIED).build());
            }
            let body = json::read_body(&r, json_mode);
            Ok(reply(StatusCode::OK).bytes(body).build())
        }
    }
}

/// `If-None-Match` against our (strong) ETag: a list of tags, weak ones
/// compared weakly, or `*`.
pub(crate) fn etag_matches(if_none_match: &str, etag: &str) -> bool {
    if_none_match
        .split(',')
        .map(str::trim)
        .any(|tag| tag == "*" || tag.strip_prefix("W/").unwrap_or(tag) == etag)
}

async fn long_poll(
    ctx: &Ctx,
    cmd: ReadCmd,
    head: &HeadReply,
    offset: u64,
) -> Result<Response<Body>, Failure> {
    let options = &ctx.shared.options;
    let json_mode = json::is_json(&head.content_type);
    let read = Read::new(cmd.id)
        .offset(offset)
        .max_len(options.max_read_bytes)
        .records(json_mode)
        .allow_stale(cmd.stale);
    let wait = pin!(ctx.engine.wait_read(read, options.long_poll_timeout));
    let stop = pin!(ctx.shared.shutdown.wait());
    let r = match select(wait, stop).await {
        Either::Left((result, _)) => result?,
        // Shutting down: answer like a timeout so the client comes back.
        Either::Right(_) => {
            return Ok(Reply::new(StatusCode::NO_CONTENT)
                .header(h::STREAM_NEXT_OFFSET, format_offset(offset))
                .header(h::STREAM_UP_TO_DATE, "true")
                .header(h::STREAM_CURSOR, next_cursor(now_ms(), cmd.cursor).to_string())
                .build());
        }
    };
    let status = if r.payload.is_empty() { StatusCode::NO_CONTENT } else { StatusCode::OK };
    let mut out = with_metadata(Reply::new(status), head)
        .header(h::STREAM_NEXT_OFFSET, format_offset(r.next_offset))
        .header_if(r.up_to_date, h::STREAM_UP_TO_DATE, "true")
        .header_if(r.closed, h::STREAM_CLOSED, "true")
        .header_if(!r.closed, h::STREAM_CURSOR, next_cursor(now_ms(), cmd.cursor).to_string())
        .header(CACHE_CONTROL.as_str(), "no-cache");
    if !r.payload.is_empty() {
        out = out.bytes(json::read_body(&r, json_mode));
    }
    Ok(out.build())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn etags_match_lists_weak_tags_and_star() {
        let tag = "\"0-5-o\"";
        assert!(etag_matches(tag, tag));
        assert!(etag_matches("\"x\", W/\"0-5-o\"", tag));
        assert!(etag_matches("*", tag));
        assert!(!etag_matches("\"0-5-c\"", tag));
        assert!(!etag_matches("", tag));
    }

    #[test]
    fn small_bodies_get_their_own_allocation() {
        let buffer = Bytes::from(vec![7u8; 1 << 20]);
        let small = buffer.slice(10..110);
        let owned = own_small(small.clone());
        assert_eq!(owned, small);
        assert_ne!(owned.as_ptr(), small.as_ptr());
        let large = buffer.slice(0..OWN_BELOW_BYTES);
        assert_eq!(own_small(large.clone()).as_ptr(), large.as_ptr());
    }
}
