//! Durability over HTTP: a `rill serve` child is killed with SIGKILL in
//! the middle of a load of idempotent-producer appends; after a restart on
//! the same directory every append that got a 2xx is readable exactly
//! once, in order, and the producers' dedup state is intact (a retry of
//! the last acknowledged append is a 204 duplicate; a retry of the one in
//! flight at the kill lands exactly once, whether or not it had landed).

mod http_support;

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

use http_support::{try_call, Child};

const BIN: &str = env!("CARGO_BIN_EXE_rill_serve");
const WRITERS: usize = 4;

fn producer_headers(writer: usize, seq: u64) -> Vec<(String, String)> {
    vec![
        ("content-type".into(), "text/plain".into()),
        ("producer-id".into(), format!("w{writer}")),
        ("producer-epoch".into(), "0".into()),
        ("producer-seq".into(), seq.to_string()),
    ]
}

fn append(base: &str, writer: usize, seq: u64) -> Result<u16, String> {
    let h = producer_headers(writer, seq);
    let h: Vec<(&str, &str)> = h.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
    try_call("POST", &format!("{base}/v1/stream/crash-{writer}"), &h, format!("w{writer}:{seq};").as_bytes())
        .map(|r| r.status)
}

/// The seqs a writer's stream holds, in order.
fn stored_seqs(base: &str, writer: usize) -> Vec<u64> {
    let mut text = String::new();
    let mut offset = "-1".to_string();
    loop {
        let r = try_call("GET", &format!("{base}/v1/stream/crash-{writer}?offset={offset}"), &[], b"")
            .expect("read");
        assert_eq!(r.status, 200, "{}", r.text());
        text.push_str(&r.text());
        offset = r.offset();
        if r.header("stream-up-to-date") == Some("true") {
            break;
        }
    }
    text.split_terminator(';')
        .map(|token| {
            let (w, seq) = token.split_once(':').expect("token");
            assert_eq!(w, format!("w{writer}"));
            seq.parse().expect("seq")
        })
        .collect()
}

#[test]
fn every_acknowledged_append_survives_sigkill_with_dedup_intact() {
    let dir = tempfile::tempdir().unwrap();
    let data = dir.path().join("data");
    let mut child = Child::start(BIN, &data, &[]).expect("start");
    for w in 0..WRITERS {
        let r = try_call(
            "PUT",
            &child.url(&format!("/v1/stream/crash-{w}")),
            &[("content-type", "text/plain")],
            b"",
        )
        .unwrap();
        assert_eq!(r.status, 201);
    }
    let acked_total = Arc::new(AtomicU64::new(0));
    let writers: Vec<_> = (0..WRITERS)
        .map(|w| {
            let (base, acked_total) = (child.base.clone(), acked_total.clone());
            std::thread::spawn(move || {
                // Appends until the kill cuts it off; returns the last
                // acknowledged seq.
                let mut last_acked = None;
                for seq in 0..100_000u64 {
                    match append(&base, w, seq) {
                        Ok(200) => {
                            last_acked = Some(seq);
                            acked_total.fetch_add(1, Ordering::Relaxed);
                        }
                        Ok(status) => panic!("writer {w} seq {seq}: unexpected status {status}"),
                        Err(_) => break,
                    }
                }
                last_acked
            })
        })
        .collect();
    while acked_total.load(Ordering::Relaxed) < 400 {
        std::thread::sleep(Duration::from_millis(2));
    }
    child.kill();
    let last: Vec<Option<u64>> = writers.into_iter().map(|t| t.join().unwrap()).collect();
    drop(child);

    let child = Child::start(BIN, &data, &[]).expect("restart");
    for (w, last_acked) in last.iter().enumerate() {
        let stored = stored_seqs(&child.base, w);
        let acked = last_acked.map_or(0, |s| s + 1) as usize;
        // Every acknowledged append is there, once, in order; at most the
        // one in flight at the kill landed beyond it.
        assert!(
            stored.len() == acked || stored.len() == acked + 1,
            "writer {w}: {} stored, {acked} acked",
            stored.len()
        );
        assert_eq!(stored, (0..stored.len() as u64).collect::<Vec<_>>(), "writer {w}");
        if let Some(seq) = last_acked {
            assert_eq!(append(&child.base, w, *seq).unwrap(), 204, "writer {w}: retry of the last ack");
        }
        let in_flight = acked as u64;
        let expect = if stored.len() == acked + 1 { 204 } else { 200 };
        assert_eq!(
            append(&child.base, w, in_flight).unwrap(),
            expect,
            "writer {w}: retry of the in-flight append"
        );
        let after = stored_seqs(&child.base, w);
        assert_eq!(after, (0..=in_flight).collect::<Vec<_>>(), "writer {w}: after the retries");
    }
}
