//! `rill serve` as a process: flags, clear errors and exit codes for a bad
//! flag, an address in use and a data directory held by another process,
//! and a graceful shutdown on SIGTERM that answers open requests and keeps
//! every write.

mod http_support;

use std::process::Command;

use http_support::{try_call, Child};

const BIN: &str = env!("CARGO_BIN_EXE_rill_serve");

#[test]
fn help_documents_every_flag_and_bad_flags_fail_clearly() {
    let help = Command::new(BIN).args(["serve", "--help"]).output().unwrap();
    assert!(help.status.success());
    let text = String::from_utf8_lossy(&help.stdout);
    for flag in [
        "--dir",
        "--listen",
        "--long-poll-timeout-ms",
        "--cores",
        "--groups",
        "--durability",
        "--wal-io",
        "--max-body-bytes",
        "--max-connections-per-core",
        "--header-read-timeout-ms",
        "--drain-timeout-ms",
        "--live-waiters-per-core",
    ] {
        assert!(text.contains(flag), "--help lacks {flag}:\n{text}");
    }
    let bad = Command::new(BIN).args(["serve", "--dir", "/nonexistent/x", "--bogus"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--bogus"));
    let bad =
        Command::new(BIN).args(["serve", "--dir", "d", "--long-poll-timeout-ms", "soon"]).output().unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("soon"));
}

#[test]
fn an_address_in_use_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let holder = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = holder.local_addr().unwrap().to_string();
    let out = Command::new(BIN)
        .args(["serve", "--dir"])
        .arg(dir.path().join("data"))
        .args(["--listen", &addr, "--cores", "1"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("already in use"), "{err}");
}

#[test]
fn a_data_directory_held_by_another_server_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let _first = Child::start(BIN, &data, &[]).expect("first server");
    let second = Child::start(BIN, &data, &[]).err().expect("second server must fail");
    assert!(second.starts_with("exit Some(1)"), "{second}");
    assert!(second.contains("open in another engine"), "{second}");
}

#[test]
fn sigterm_finishes_open_requests_and_keeps_writes() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut child = Child::start(BIN, &data, &["--long-poll-timeout-ms", "60000"]).expect("start");
    let url = child.url("/v1/stream/g");
    assert_eq!(try_call("PUT", &url, &[("content-type", "text/plain")], b"kept").unwrap().status, 201);
    let tail = try_call("HEAD", &url, &[], b"").unwrap().offset();
    let poll_url = format!("{url}?offset={tail}&live=long-poll");
    let poll = std::thread::spawn(move || try_call("GET", &poll_url, &[], b""));
    // Wait until the long-poll is parked (it shows in the live waiters).
    let metrics = child.url("/metrics");
    while !try_call("GET", &metrics, &[], b"").unwrap().text().contains("rill_live_waiters 1") {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let status = child.terminate();
    assert!(status.success(), "exit status {status:?}");
    let answered = poll.join().unwrap().expect("the open long-poll was answered");
    assert_eq!(answered.status, 204);
    drop(child);
    let child = Child::start(BIN, &data, &[]).expect("restart");
    assert_eq!(try_call("GET", &child.url("/v1/stream/g"), &[], b"").unwrap().text(), "kept");
}
