//! The HTTP server's status codes and headers, rule by rule (the
//! conformance suite is a second opinion; these are the first).

mod http_support;

use std::time::Duration;

use http_support::{call, options, start, start_with};
use rill::server::format_offset;

const TEXT: (&str, &str) = ("content-type", "text/plain");

#[test]
fn create_is_201_then_idempotent_200_then_409_on_mismatch() {
    let s = start();
    let r = s.put("/v1/stream/c1", &[TEXT], b"hello");
    assert_eq!(r.status, 201);
    assert_eq!(r.header("location"), Some(s.url("/v1/stream/c1").as_str()));
    assert_eq!(r.header("content-type"), Some("text/plain"));
    assert_eq!(r.offset(), format_offset(5));
    assert_eq!(r.header("x-content-type-options"), Some("nosniff"));
    let again = s.put("/v1/stream/c1", &[("content-type", "TEXT/PLAIN")], b"");
    assert_eq!(again.status, 200);
    assert_eq!(again.header("location"), None);
    let other = s.put("/v1/stream/c1", &[("content-type", "application/json")], b"");
    assert_eq!(other.status, 409);
    assert!(other.text().starts_with("stream_conflict: "), "{}", other.text());
    let ttl = s.put("/v1/stream/c1", &[TEXT, ("stream-ttl", "60")], b"");
    assert_eq!(ttl.status, 409);
}

#[test]
fn create_refuses_bad_ttl_and_expiry() {
    let s = start();
    for ttl in ["abc", "-1", "0", "00060", "+60", "1.5", "1e3"] {
        let r = s.put("/v1/stream/ttl", &[TEXT, ("stream-ttl", ttl)], b"");
        assert_eq!(r.status, 400, "{ttl}");
        assert!(r.text().contains("Stream-TTL"), "{}", r.text());
    }
    let both = s.put(
        "/v1/stream/ttl",
        &[TEXT, ("stream-ttl", "60"), ("stream-expires-at", "2099-01-01T00:00:00Z")],
        b"",
    );
    assert_eq!(both.status, 400);
    assert_eq!(s.put("/v1/stream/ttl", &[("stream-expires-at", "tomorrow")], b"").status, 400);
    let ok = s.put("/v1/stream/ttl", &[TEXT, ("stream-expires-at", "2099-01-01T00:00:00+01:00")], b"");
    assert_eq!(ok.status, 201);
    let head = s.head("/v1/stream/ttl");
    assert_eq!(head.header("stream-expires-at"), Some("2098-12-31T23:00:00.000Z"));
}

#[test]
fn head_reports_metadata_without_body_and_never_a_closed_header_when_open() {
    let s = start();
    assert_eq!(s.head("/v1/stream/nope").status, 404);
    s.put("/v1/stream/h", &[TEXT, ("stream-ttl", "3600")], b"abc");
    let h = s.head("/v1/stream/h");
    assert_eq!(h.status, 200);
    assert_eq!(h.offset(), format_offset(3));
    assert_eq!(h.header("stream-ttl"), Some("3600"));
    assert_eq!(h.header("cache-control"), Some("no-store"));
    assert_eq!(h.header("stream-closed"), None);
    assert!(h.body.is_empty());
}

#[test]
fn append_statuses() {
    let s = start();
    assert_eq!(s.post("/v1/stream/missing", &[TEXT], b"x").status, 404);
    s.create_text("/v1/stream/a", b"");
    let r = s.append_text("/v1/stream/a", b"one");
    assert_eq!(r.offset(), format_offset(3));
    assert_eq!(s.post("/v1/stream/a", &[("content-type", "application/json")], b"{}").status, 409);
    let empty = s.post("/v1/stream/a", &[TEXT], b"");
    assert_eq!(empty.status, 400);
    assert!(empty.text().contains("non-empty body"));
    assert_eq!(s.post("/v1/stream/a", &[], b"x").status, 400);
    assert_eq!(s.get("/v1/stream/a").text(), "one");
}

#[test]
fn stream_seq_must_grow_bytewise() {
    let s = start();
    s.create_text("/v1/stream/seq", b"");
    let seq = |v: &str| s.post("/v1/stream/seq", &[TEXT, ("stream-seq", v)], b"x").status;
    assert_eq!(seq("09"), 204);
    assert_eq!(seq("10"), 204);
    assert_eq!(seq("10"), 409);
    assert_eq!(seq("2"), 204);
    assert_eq!(seq("10"), 409);
}

fn producer<'a>(id: &'a str, epoch: &'a str, seq: &'a str) -> [(&'a str, &'a str); 4] {
    [TEXT, ("producer-id", id), ("producer-epoch", epoch), ("producer-seq", seq)]
}

#[test]
fn producer_statuses_follow_the_protocol() {
    let s = start();
    s.create_text("/v1/stream/p", b"");
    let first = s.post("/v1/stream/p", &producer("w", "0", "0"), b"a");
    assert_eq!(first.status, 200);
    assert_eq!((first.header("producer-epoch"), first.header("producer-seq")), (Some("0"), Some("0")));
    let dup = s.post("/v1/stream/p", &producer("w", "0", "0"), b"a");
    assert_eq!(dup.status, 204);
    assert_eq!(dup.offset(), first.offset());
    let gap = s.post("/v1/stream/p", &producer("w", "0", "5"), b"b");
    assert_eq!(gap.status, 409);
    assert_eq!(
        (gap.header("producer-expected-seq"), gap.header("producer-received-seq")),
        (Some("1"), Some("5"))
    );
    assert_eq!(s.post("/v1/stream/p", &producer("w", "2", "0"), b"c").status, 200);
    let fenced = s.post("/v1/stream/p", &producer("w", "1", "0"), b"d");
    assert_eq!(fenced.status, 403);
    assert_eq!(fenced.header("producer-epoch"), Some("2"));
    assert_eq!(s.post("/v1/stream/p", &producer("w", "3", "1"), b"e").status, 400);
    assert_eq!(s.post("/v1/stream/p", &producer("w", "x", "0"), b"e").status, 400);
    assert_eq!(s.post("/v1/stream/p", &[TEXT, ("producer-id", "w")], b"e").status, 400);
    assert_eq!(s.get("/v1/stream/p").text(), "ac");
}

#[test]
fn producer_is_checked_before_stream_seq() {
    let s = start();
    s.create_text("/v1/stream/ps", b"");
    let h = |seq| {
        [TEXT, ("producer-id", "w"), ("producer-epoch", "0"), ("producer-seq", seq), ("stream-seq", "5")]
    };
    assert_eq!(s.post("/v1/stream/ps", &h("0"), b"a").status, 200);
    // A retry carries the same Stream-Seq, which alone would conflict.
    assert_eq!(s.post("/v1/stream/ps", &h("0"), b"a").status, 204);
}

#[test]
fn catch_up_reads_with_etag_and_offsets() {
    let s = start();
    s.create_text("/v1/stream/r", b"first");
    let r = s.get("/v1/stream/r");
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "first");
    assert_eq!(r.header("stream-up-to-date"), Some("true"));
    let etag = r.header("etag").expect("etag").to_string();
    let same = s.get_with("/v1/stream/r", &[("if-none-match", &etag)]);
    assert_eq!(same.status, 304);
    assert!(same.body.is_empty());
    s.append_text("/v1/stream/r", b"second");
    let changed = s.get_with("/v1/stream/r", &[("if-none-match", &etag)]);
    assert_eq!(changed.status, 200);
    assert_ne!(changed.header("etag"), Some(etag.as_str()));
    let from = s.get(&format!("/v1/stream/r?offset={}", r.offset()));
    assert_eq!(from.text(), "second");
    let now = s.get("/v1/stream/r?offset=now");
    assert_eq!((now.status, now.text().as_str()), (200, ""));
    assert_eq!(now.header("cache-control"), Some("no-store"));
    assert_eq!(now.offset(), format_offset(11));
    assert_eq!(s.get("/v1/stream/r?offset=-1").text(), "firstsecond");
}

#[test]
fn malformed_offsets_are_400() {
    let s = start();
    s.create_text("/v1/stream/o", b"x");
    for q in [
        "offset=",
        "offset=0,1",
        "offset=0%201",
        "offset=abc",
        "offset=a&offset=b",
        "offset=..%2Fx",
        "offset=0000000000000000_000000000000000",
        "offset=9999999999999999_9999999999999999",
        "offset=-1%00",
    ] {
        let r = s.get(&format!("/v1/stream/o?{q}"));
        assert_eq!(r.status, 400, "{q}: {}", r.text());
        assert!(r.text().starts_with("bad_request: "), "{}", r.text());
    }
    // Right shape, past the tail.
    let r = s.get(&format!("/v1/stream/o?offset={}", format_offset(99)));
    assert_eq!(r.status, 400);
    assert!(r.text().contains("beyond the tail"), "{}", r.text());
}

#[test]
fn reads_are_paginated_by_max_read_bytes() {
    let s = start();
    let big: Vec<u8> = (0..200_000u32).map(|i| (i % 251) as u8).collect();
    assert_eq!(s.put("/v1/stream/big", &[("content-type", "application/octet-stream")], &big).status, 201);
    let mut got = Vec::new();
    let mut offset = "-1".to_string();
    let mut pages = 0;
    loop {
        let r = s.get(&format!("/v1/stream/big?offset={offset}"));
        assert_eq!(r.status, 200);
        assert!(r.body.len() <= options().max_read_bytes);
        got.extend_from_slice(&r.body);
        pages += 1;
        offset = r.offset();
        if r.header("stream-up-to-date") == Some("true") {
            break;
        }
        assert!(pages < 100);
    }
    assert!(pages > 1);
    assert_eq!(got, big);
}

#[test]
fn close_then_append_is_409_with_the_final_offset() {
    let s = start();
    s.create_text("/v1/stream/cl", b"data");
    let close = s.post("/v1/stream/cl", &[("stream-closed", "true")], b"");
    assert_eq!(close.status, 204);
    assert_eq!(close.header("stream-closed"), Some("true"));
    let again = s.post("/v1/stream/cl", &[("stream-closed", "true")], b"");
    assert_eq!(again.status, 204);
    let late = s.post("/v1/stream/cl", &[TEXT], b"more");
    assert_eq!(late.status, 409);
    assert_eq!(late.header("stream-closed"), Some("true"));
    assert_eq!(late.offset(), close.offset());
    let read = s.get("/v1/stream/cl");
    assert_eq!(read.header("stream-closed"), Some("true"));
    assert_eq!(read.text(), "data");
    assert_eq!(s.head("/v1/stream/cl").header("stream-closed"), Some("true"));
    let live = s.get(&format!("/v1/stream/cl?offset={}&live=long-poll", close.offset()));
    assert_eq!(live.status, 204);
    assert_eq!(live.header("stream-closed"), Some("true"));
}

#[test]
fn append_and_close_in_one_request() {
    let s = start();
    s.create_text("/v1/stream/ac", b"");
    let r = s.post("/v1/stream/ac", &[TEXT, ("stream-closed", "true")], b"last");
    assert_eq!(r.status, 204);
    assert_eq!(r.header("stream-closed"), Some("true"));
    assert_eq!(s.get("/v1/stream/ac").text(), "last");
    let created_closed = s.put("/v1/stream/ac2", &[TEXT, ("stream-closed", "true")], b"x");
    assert_eq!(created_closed.status, 201);
    assert_eq!(created_closed.header("stream-closed"), Some("true"));
}

#[test]
fn long_poll_times_out_with_204_and_a_cursor() {
    let s = start();
    let c = s.create_text("/v1/stream/lp", b"x");
    let r = s.get(&format!("/v1/stream/lp?offset={}&live=long-poll", c.offset()));
    assert_eq!(r.status, 204);
    assert_eq!(r.header("stream-up-to-date"), Some("true"));
    let cursor: u64 = r.header("stream-cursor").expect("cursor").parse().unwrap();
    let again = s.get(&format!("/v1/stream/lp?offset={}&live=long-poll&cursor={cursor}", c.offset()));
    let next: u64 = again.header("stream-cursor").unwrap().parse().unwrap();
    assert!(next > cursor);
    assert_eq!(s.get("/v1/stream/lp?live=long-poll").status, 400);
}

#[test]
fn long_poll_answers_with_data_appended_while_it_waits() {
    let s = start_with(
        rill::server::ServeOptions { long_poll_timeout: Duration::from_secs(20), ..options() },
        |c| c,
    );
    let c = s.create_text("/v1/stream/lpd", b"");
    let url = s.url(&format!("/v1/stream/lpd?offset={}&live=long-poll", c.offset()));
    let waiter = std::thread::spawn(move || call("GET", &url, &[], b""));
    // Wait until the long-poll is parked on the engine, then append.
    while s.engine.metrics().live_waiters == 0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    s.append_text("/v1/stream/lpd", b"news");
    let r = waiter.join().unwrap();
    assert_eq!(r.status, 200);
    assert_eq!(r.text(), "news");
    assert_eq!(r.offset(), format_offset(4));
}

#[test]
fn live_waiter_cap_is_503_with_retry_after() {
    let s = start_with(
        rill::server::ServeOptions { long_poll_timeout: Duration::from_secs(20), ..options() },
        |c| c.live_waiters_per_core(1),
    );
    let c = s.create_text("/v1/stream/cap", b"");
    let url = s.url(&format!("/v1/stream/cap?offset={}&live=long-poll", c.offset()));
    let first = {
        let url = url.clone();
        std::thread::spawn(move || call("GET", &url, &[], b""))
    };
    while s.engine.metrics().live_waiters == 0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    let second = call("GET", &url, &[], b"");
    assert_eq!(second.status, 503);
    assert_eq!(second.header("retry-after"), Some("1"));
    assert!(second.text().starts_with("live_read_backpressure: "), "{}", second.text());
    s.append_text("/v1/stream/cap", b"x");
    assert_eq!(first.join().unwrap().status, 200);
}

#[test]
fn body_over_the_limit_is_413() {
    let s = start_with(rill::server::ServeOptions { max_body_bytes: 1000, ..options() }, |c| c);
    s.create_text("/v1/stream/big", b"");
    let r = s.post("/v1/stream/big", &[TEXT], &vec![b'x'; 1001]);
    assert_eq!(r.status, 413);
    assert!(r.text().starts_with("payload_too_large: "), "{}", r.text());
    assert_eq!(s.post("/v1/stream/big", &[TEXT], &vec![b'x'; 1000]).status, 204);
}

#[test]
fn sse_streams_data_and_control_events_and_ends_on_close() {
    let s = start();
    s.create_text("/v1/stream/sse", b"line1\nline2");
    s.post("/v1/stream/sse", &[("stream-closed", "true")], b"");
    let r = s.get("/v1/stream/sse?offset=-1&live=sse");
    assert_eq!(r.status, 200);
    assert_eq!(r.header("content-type"), Some("text/event-stream"));
    assert_eq!(r.header("stream-sse-data-encoding"), None);
    let text = r.text();
    assert!(text.starts_with("event: data\ndata:line1\ndata:line2\n\nevent: control\ndata:{"), "{text}");
    assert!(text.contains(r#""streamClosed":true"#), "{text}");
    assert!(!text.contains("streamCursor"), "{text}");
}

#[test]
fn sse_base64_for_binary_streams() {
    let s = start();
    s.put("/v1/stream/bin", &[("content-type", "application/octet-stream")], b"Hello");
    s.post("/v1/stream/bin", &[("stream-closed", "true")], b"");
    let r = s.get("/v1/stream/bin?offset=-1&live=sse");
    assert_eq!(r.header("stream-sse-data-encoding"), Some("base64"));
    assert!(r.text().starts_with("event: data\ndata:SGVsbG8=\n\n"), "{}", r.text());
    assert_eq!(s.get("/v1/stream/bin?live=sse").status, 400);
}

#[test]
fn delete_then_404_and_recreate() {
    let s = start();
    assert_eq!(s.delete("/v1/stream/d").status, 404);
    s.create_text("/v1/stream/d", b"old");
    assert_eq!(s.delete("/v1/stream/d").status, 204);
    assert_eq!(s.get("/v1/stream/d").status, 404);
    s.create_text("/v1/stream/d", b"new");
    assert_eq!(s.get("/v1/stream/d").text(), "new");
}

#[test]
fn json_mode_validates_bodies() {
    let s = start();
    let json = ("content-type", "application/json");
    assert_eq!(s.put("/v1/stream/j", &[json], b"[]").status, 201);
    assert_eq!(s.get("/v1/stream/j").text(), "[]");
    assert_eq!(s.post("/v1/stream/j", &[json], b"[]").status, 400);
    let bad = s.post("/v1/stream/j", &[json], b"{ invalid json }");
    assert_eq!(bad.status, 400);
    assert!(bad.text().contains("not one JSON value"), "{}", bad.text());
    assert_eq!(s.post("/v1/stream/j", &[json], br#"{"a":1}"#).status, 204);
    assert_eq!(s.get("/v1/stream/j").text(), r#"[{"a":1}]"#);
    assert_eq!(s.get("/v1/stream/j?offset=now").text(), "[]");
}

#[test]
fn names_paths_and_methods() {
    let s = start();
    assert_eq!(s.put("/v1/stream/tenant/orders", &[TEXT], b"t").status, 201);
    assert_eq!(s.get("/v1/stream/tenant/orders").text(), "t");
    assert_eq!(s.get("/v1/stream/orders").status, 404);
    let deep = s.put("/v1/stream/a/b/c", &[TEXT], b"");
    assert_eq!(deep.status, 400);
    assert!(deep.text().contains("one or two segments"), "{}", deep.text());
    assert_eq!(s.put("/v1/stream/a%2Fb", &[TEXT], b"").status, 400);
    assert_eq!(s.put(&format!("/v1/stream/{}", "n".repeat(300)), &[TEXT], b"").status, 400);
    assert_eq!(s.get("/elsewhere").status, 404);
    assert_eq!(call("PATCH", &s.url("/v1/stream/x"), &[], b"").status, 405);
    let pre =
        call("OPTIONS", &s.url("/v1/stream/x"), &[("access-control-request-headers", "if-none-match")], b"");
    assert_eq!(pre.status, 204);
    assert!(pre.header("access-control-allow-headers").unwrap().contains("if-none-match"));
    assert_eq!(pre.header("access-control-allow-origin"), Some("*"));
    let missing = s.get("/v1/stream/nothing-here");
    assert_eq!(missing.status, 404);
    assert_eq!(missing.header("x-content-type-options"), Some("nosniff"));
    assert!(missing.text().contains("not found"), "{}", missing.text());
}

#[test]
fn health_and_metrics() {
    let s = start();
    let h = s.get("/health");
    assert_eq!(h.status, 200);
    assert!(h.text().contains(r#""status":"ok""#));
    s.create_text("/v1/stream/m", b"x");
    let m = s.get("/metrics");
    assert_eq!(m.status, 200);
    let text = m.text();
    assert!(text.contains("rill_streams 1"), "{text}");
    assert!(text.contains("rill_http_responses_total{class=\"2xx\"}"), "{text}");
    assert!(text.contains("rill_append_latency_us{quantile=\"0.99\"}"), "{text}");
}

#[test]
fn a_full_group_is_507() {
    let s = start_with(options(), |c| c.max_streams_per_group(1));
    // Eight groups of one stream each: by the ninth create some group is full.
    let statuses: Vec<u16> =
        (0..9).map(|i| s.put(&format!("/v1/stream/full-{i}"), &[TEXT], b"").status).collect();
    assert!(statuses.iter().all(|st| *st == 201 || *st == 507), "{statuses:?}");
    let refused = (0..9).find(|i| statuses[*i] == 507).expect("some group must be full");
    let r = s.put(&format!("/v1/stream/full-{refused}"), &[TEXT], b"");
    assert_eq!(r.status, 507);
    assert!(r.text().starts_with("too_many_streams: "), "{}", r.text());
}

#[test]
fn sse_delivers_appends_made_while_subscribed() {
    use std::io::Read as _;
    let s = start_with(
        rill::server::ServeOptions { long_poll_timeout: Duration::from_secs(20), ..options() },
        |c| c,
    );
    s.create_text("/v1/stream/live", b"");
    let url = s.url("/v1/stream/live?offset=now&live=sse");
    let reader = std::thread::spawn(move || {
        let response = http_support::agent().get(&url).call().expect("sse");
        let mut stream = response.into_reader();
        let mut seen = Vec::new();
        let mut buf = [0u8; 1024];
        while !String::from_utf8_lossy(&seen).contains("data:fresh") {
            let n = stream.read(&mut buf).expect("read");
            assert!(n > 0, "the stream ended before the append arrived");
            seen.extend_from_slice(&buf[..n]);
        }
        String::from_utf8_lossy(&seen).into_owned()
    });
    while s.engine.metrics().live_waiters == 0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    s.append_text("/v1/stream/live", b"fresh");
    let text = reader.join().unwrap();
    assert!(text.starts_with("event: control\ndata:{"), "the first event reports the position: {text}");
    assert!(text.contains("event: data\ndata:fresh\n"), "{text}");
}
