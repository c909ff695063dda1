//! Bad input against the HTTP server: malformed requests, headers and
//! bodies, oversized bodies, slowloris clients and connection floods get a
//! clear error or are cut off; the server keeps serving everyone else.

mod http_support;

use std::io::{Read, Write};
use std::net::TcpStream;
use std::sync::atomic::Ordering;
use std::time::Duration;

use http_support::{options, raw_exchange, start, start_with};
use rill::server::ServeOptions;

/// Reads until the server closes the connection; `Err` if the client's
/// own read timeout (20 s) ran out first.
fn read_until_closed(stream: &mut TcpStream) -> std::io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        match stream.read(&mut buf) {
            Ok(0) => return Ok(out),
            Ok(n) => out.extend_from_slice(&buf[..n]),
            Err(e) if e.kind() == std::io::ErrorKind::ConnectionReset => return Ok(out),
            Err(e) => return Err(e),
        }
    }
}

#[test]
fn garbage_requests_get_400_and_the_server_stays_up() {
    let s = start();
    for junk in [
        &b"GARBAGE\r\n\r\n"[..],
        b"GET / HTTP/9.9\r\n\r\n",
        b"\x00\x01\x02\r\n\r\n",
        b"GET /health HTTP/1.1\r\nBad Header\r\n\r\n",
    ] {
        let mut c = s.raw();
        let answer = raw_exchange(&mut c, junk);
        assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 400"), "{junk:?} -> {answer}");
    }
    assert!(s.healthy());
}

#[test]
fn header_values_that_are_not_text_are_400() {
    let s = start();
    s.create_text("/v1/stream/h", b"");
    let mut c = s.raw();
    let req =
        b"POST /v1/stream/h HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nProducer-Id: \xff\xfe\r\n\
Producer-Epoch: 0\r\nProducer-Seq: 0\r\nContent-Length: 1\r\nConnection: close\r\n\r\nx";
    let answer = raw_exchange(&mut c, req);
    assert!(answer.starts_with("HTTP/1.1 400"), "{answer}");
    assert!(answer.contains("not visible ASCII"), "{answer}");
    let twice = s.get_with("/v1/stream/h", &[]);
    assert_eq!(twice.status, 200);
}

#[test]
fn oversized_headers_and_bodies_are_refused() {
    let s = start_with(ServeOptions { max_body_bytes: 64 << 10, ..options() }, |c| c);
    s.create_text("/v1/stream/o", b"");
    // A declared length over the limit: refused before the body is read.
    let mut c = s.raw();
    let answer = raw_exchange(
        &mut c,
        b"POST /v1/stream/o HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nContent-Length: 99999999\r\nConnection: close\r\n\r\nxx",
    );
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    // A chunked body that grows past the limit.
    let mut c = s.raw();
    c.write_all(b"POST /v1/stream/o HTTP/1.1\r\nHost: x\r\nContent-Type: text/plain\r\nTransfer-Encoding: chunked\r\nConnection: close\r\n\r\n").unwrap();
    let chunk = vec![b'a'; 16 << 10];
    let mut answer = String::new();
    for _ in 0..8 {
        if c.write_all(format!("{:x}\r\n", chunk.len()).as_bytes()).is_err()
            || c.write_all(&chunk).is_err()
            || c.write_all(b"\r\n").is_err()
        {
            break;
        }
    }
    let _ = c.write_all(b"0\r\n\r\n");
    if let Ok(bytes) = read_until_closed(&mut c) {
        answer = String::from_utf8_lossy(&bytes).into_owned();
    }
    assert!(answer.starts_with("HTTP/1.1 413"), "{answer}");
    // Headers far beyond any sane size.
    let mut c = s.raw();
    let huge = format!("GET /health HTTP/1.1\r\nHost: x\r\nX-Big: {}\r\n\r\n", "h".repeat(1 << 20));
    let _ = c.write_all(huge.as_bytes());
    let answer =
        read_until_closed(&mut c).map(|b| String::from_utf8_lossy(&b).into_owned()).unwrap_or_default();
    assert!(answer.is_empty() || answer.starts_with("HTTP/1.1 431"), "{answer}");
    assert_eq!(s.get("/v1/stream/o").status, 200);
}

#[test]
fn malformed_json_bodies_are_400() {
    let s = start();
    let json = ("content-type", "application/json");
    assert_eq!(s.put("/v1/stream/j", &[json], b"").status, 201);
    for body in [&b"{"[..], b"[1,]", b"nul", b"\"unterminated", b"\xff\xfe", b"{} {}", b"[]"] {
        let r = s.post("/v1/stream/j", &[json], body);
        assert_eq!(r.status, 400, "{body:?}: {}", r.text());
    }
    assert_eq!(s.put("/v1/stream/j2", &[json], b"{").status, 400);
    assert_eq!(s.get("/v1/stream/j").text(), "[]");
}

#[test]
fn a_slowloris_client_is_cut_off_while_others_are_served() {
    let s = start_with(ServeOptions { header_read_timeout: Duration::from_millis(300), ..options() }, |c| c);
    // Headers trickle in a byte at a time and never end (for at most 25 s,
    // far beyond the 300 ms the server allows).
    let mut slow = s.raw();
    let trickle = std::thread::spawn(move || {
        let bytes = b"GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: ".iter().chain(std::iter::repeat(&b'a'));
        for b in bytes.take(1250) {
            if slow.write_all(&[*b]).is_err() {
                return true;
            }
            std::thread::sleep(Duration::from_millis(20));
            slow.set_nonblocking(true).unwrap();
            let mut probe = [0u8; 64];
            let closed = match slow.read(&mut probe) {
                Ok(_) => true,
                Err(e) => e.kind() != std::io::ErrorKind::WouldBlock,
            };
            slow.set_nonblocking(false).unwrap();
            if closed {
                return true;
            }
        }
        false
    });
    // A stalled client that sent part of its headers and then nothing.
    let mut stalled = s.raw();
    stalled.write_all(b"GET /health HTTP/1.1\r\nHost: x\r\n").unwrap();
    // Meanwhile the core serves others.
    for _ in 0..20 {
        assert!(s.healthy());
    }
    assert!(read_until_closed(&mut stalled).is_ok(), "the stalled client was never cut off");
    assert!(trickle.join().unwrap(), "the trickling client was never cut off");
    assert!(s.healthy());
}

#[test]
fn a_connection_flood_is_capped_and_the_server_recovers() {
    let cap = 16;
    let s = start_with(ServeOptions { max_connections_per_core: cap, ..options() }, |c| c);
    let stats = &s.server.shared().stats;
    let flood: Vec<TcpStream> = (0..200).map(|_| s.raw()).collect();
    // Every connection is either held (up to the cap) or closed at once.
    while stats.connections_accepted.load(Ordering::Relaxed)
        + stats.connections_refused.load(Ordering::Relaxed)
        < 200
    {
        std::thread::sleep(Duration::from_millis(5));
    }
    assert!(stats.connections_refused.load(Ordering::Relaxed) >= 200 - cap as u64);
    assert!(stats.connections_active.load(Ordering::Relaxed) <= cap as u64);
    drop(flood);
    while stats.connections_active.load(Ordering::Relaxed) > 0 {
        std::thread::sleep(Duration::from_millis(5));
    }
    // Finished connections leave nothing behind: only the accept loop
    // waits on the shutdown latch.
    assert_eq!(s.server.shared().shutdown.waiters(), 1);
    assert!(s.healthy());
    s.create_text("/v1/stream/after-flood", b"ok");
    assert_eq!(s.get("/v1/stream/after-flood").text(), "ok");
}
