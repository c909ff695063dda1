//! Forks over HTTP, status by status (the conformance suite's fork tests
//! are a second opinion): `PUT` with `Stream-Forked-From`, the fork offset
//! and sub-offset in bytes and in JSON messages, inheritance, 409 and 404
//! and 400 refusals, 410 for a soft-deleted source and 409 for its re-create
//! or a fork of it, and the source's release once its fork is deleted.

mod http_support;

use std::time::{Duration, Instant};

use http_support::start;
use rill::server::format_offset;

const TEXT: (&str, &str) = ("content-type", "text/plain");
const JSON: (&str, &str) = ("content-type", "application/json");
const FROM: &str = "stream-forked-from";
const OFFSET: &str = "stream-fork-offset";
const SUB: &str = "stream-fork-sub-offset";

#[test]
fn forks_copy_the_prefix_and_inherit_the_settings() {
    let s = start();
    assert_eq!(s.put("/v1/stream/src", &[TEXT, ("stream-ttl", "600")], b"hello").status, 201);
    let zero = format_offset(0);
    let r = s.put("/v1/stream/f1", &[(FROM, "/v1/stream/src"), (OFFSET, &zero), (SUB, "3")], b"XY");
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("text/plain"), "inherited");
    assert!(r.header("location").is_some());
    assert_eq!(r.offset(), format_offset(5));
    assert_eq!(s.get("/v1/stream/f1?offset=-1").text(), "helXY");
    assert_eq!(s.head("/v1/stream/f1").header("stream-ttl"), Some("600"), "inherited");
    // The same request again: 200; another sub-offset: 409.
    let again = s.put("/v1/stream/f1", &[(FROM, "/v1/stream/src"), (OFFSET, &zero), (SUB, "3")], b"");
    assert_eq!(again.status, 200);
    let other = s.put("/v1/stream/f1", &[(FROM, "/v1/stream/src"), (OFFSET, &zero), (SUB, "2")], b"");
    assert_eq!(other.status, 409);
    // Forking at the tail, then appending to either side independently.
    assert_eq!(s.put("/v1/stream/f2", &[TEXT, (FROM, "/v1/stream/src")], b"").status, 201);
    assert_eq!(s.post("/v1/stream/src", &[TEXT], b"-src").status, 204);
    assert_eq!(s.post("/v1/stream/f2", &[TEXT], b"-fork").status, 204);
    assert_eq!(s.get("/v1/stream/f2?offset=-1").text(), "hello-fork");
    assert_eq!(s.get("/v1/stream/src?offset=-1").text(), "hello-src");
}

#[test]
fn json_sub_offsets_count_messages() {
    let s = start();
    assert_eq!(s.put("/v1/stream/j", &[JSON], br#"[{"a":1},{"b":2},{"c":3}]"#).status, 201);
    let zero = format_offset(0);
    let r = s.put("/v1/stream/jf", &[(FROM, "/v1/stream/j"), (OFFSET, &zero), (SUB, "2")], br#"[{"d":4}]"#);
    assert_eq!(r.status, 201, "{}", r.text());
    assert_eq!(r.header("content-type"), Some("application/json"));
    assert_eq!(s.get("/v1/stream/jf?offset=-1").text(), r#"[{"a":1},{"b":2},{"d":4}]"#);
    let over = s.put("/v1/stream/jg", &[(FROM, "/v1/stream/j"), (OFFSET, &zero), (SUB, "4")], b"");
    assert_eq!(over.status, 400);
}

#[test]
fn bad_forks_are_refused_with_what_went_wrong() {
    let s = start();
    s.put("/v1/stream/src", &[TEXT], b"hi");
    let zero = format_offset(0);
    assert_eq!(s.put("/v1/stream/a", &[TEXT, (FROM, "/v1/stream/missing")], b"").status, 404);
    let past = format_offset(99);
    let r = s.put("/v1/stream/a", &[TEXT, (FROM, "/v1/stream/src"), (OFFSET, &past)], b"");
    assert_eq!(r.status, 400);
    assert!(r.text().contains("past the source's tail"), "{}", r.text());
    let over = s.put("/v1/stream/a", &[TEXT, (FROM, "/v1/stream/src"), (OFFSET, &zero), (SUB, "5")], b"");
    assert_eq!(over.status, 400);
    let typed = s.put("/v1/stream/a", &[JSON, (FROM, "/v1/stream/src")], b"");
    assert_eq!(typed.status, 409);
    assert!(typed.text().starts_with("content_type_mismatch: "), "{}", typed.text());
    s.put("/v1/stream/plain", &[TEXT], b"");
    assert_eq!(s.put("/v1/stream/plain", &[TEXT, (FROM, "/v1/stream/src")], b"").status, 409);
    assert_eq!(s.put("/v1/stream/a", &[TEXT, (SUB, "0")], b"").status, 400, "a sub-offset needs a source");
    // Nothing was pinned by the refusals: the source deletes outright.
    assert_eq!(s.delete("/v1/stream/src").status, 204);
    assert_eq!(s.head("/v1/stream/src").status, 404);
}

#[test]
fn a_source_with_a_fork_soft_deletes_until_the_fork_goes() {
    let s = start();
    s.put("/v1/stream/src", &[TEXT], b"data");
    assert_eq!(s.put("/v1/stream/fork", &[TEXT, (FROM, "/v1/stream/src")], b"").status, 201);
    assert_eq!(s.delete("/v1/stream/src").status, 204);
    assert_eq!(s.head("/v1/stream/src").status, 410);
    let gone = s.get("/v1/stream/src?offset=-1");
    assert_eq!(gone.status, 410);
    assert!(gone.text().starts_with("stream_gone: "), "{}", gone.text());
    assert_eq!(s.post("/v1/stream/src", &[TEXT], b"x").status, 410);
    assert_eq!(s.delete("/v1/stream/src").status, 410);
    assert_eq!(s.put("/v1/stream/src", &[TEXT], b"").status, 409);
    assert_eq!(s.put("/v1/stream/again", &[TEXT, (FROM, "/v1/stream/src")], b"").status, 409);
    assert_eq!(s.get("/v1/stream/fork?offset=-1").text(), "data");
    assert_eq!(s.delete("/v1/stream/fork").status, 204);
    let deadline = Instant::now() + Duration::from_secs(20);
    while s.head("/v1/stream/src").status != 404 {
        assert!(Instant::now() < deadline, "the source was never released");
        std::thread::sleep(Duration::from_millis(20));
    }
    assert_eq!(s.put("/v1/stream/src", &[TEXT], b"").status, 201);
}
