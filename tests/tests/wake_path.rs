//! The wake path under the dispatcher's adaptive idle spin: round trips
//! whose gaps straddle the spin window must never lose a wake, and both
//! ways of waiting (spinning, parking) must really happen.
//!
//! A lost wake shows as a round trip that never completes; each run has a
//! watchdog that fails the test instead of hanging it.

use std::sync::mpsc;
use std::thread;
use std::time::{Duration, Instant};

use rill::{Append, Config, Create, Engine, SpinPolicy};
use rill_tests::sid;

/// Gaps between round trips: none, inside the 50 µs spin window, at its
/// edge, and long enough for the dispatcher to park.
fn gap(i: u64) -> Duration {
    let r = i.wrapping_mul(0x9E37_79B9_7F4A_7C15) >> 40;
    match r % 10 {
        0..=3 => Duration::ZERO,
        4..=6 => Duration::from_micros(r % 40),
        7..=8 => Duration::from_micros(40 + r % 40),
        _ => Duration::from_micros(300 + r % 2000),
    }
}

fn pause(d: Duration) {
    if d >= Duration::from_micros(200) {
        thread::sleep(d);
    } else {
        let until = Instant::now() + d;
        while Instant::now() < until {
            std::hint::spin_loop();
        }
    }
}

/// Runs `rounds` appends one at a time from a plain thread, with a
/// watchdog; returns the core's counters afterwards.
fn round_trips(cfg: Config, rounds: u64) -> rill::CoreMetricsSnapshot {
    let engine = Engine::open(cfg).unwrap();
    let id = sid("wake", "path");
    futures::executor::block_on(engine.create(Create::new(id.clone()))).unwrap();
    let (progress, watch) = mpsc::channel();
    let worker = {
        let engine = engine.clone();
        thread::spawn(move || {
            for i in 0..rounds {
                pause(gap(i));
                let r = futures::executor::block_on(
                    engine.append(Append::new(id.clone(), i.to_le_bytes().to_vec())),
                )
                .unwrap();
                assert_eq!(r.start_offset, i * 8);
                progress.send(i).unwrap();
            }
        })
    };
    let mut done = 0;
    while done < rounds {
        match watch.recv_timeout(Duration::from_secs(10)) {
            Ok(_) => done += 1,
            Err(mpsc::RecvTimeoutError::Timeout) => {
                panic!("round trip {done} of {rounds} never completed: a lost wake")
            }
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
    }
    worker.join().unwrap();
    assert_eq!(done, rounds);
    let core = engine.metrics().cores[0].clone();
    futures::executor::block_on(engine.shutdown()).unwrap();
    core
}

#[test]
fn spinning_and_parking_dispatchers_never_lose_a_wake() {
    let dir = tempfile::tempdir().unwrap();
    let core = round_trips(Config::new(dir.path()).cores(1).groups(2).in_memory_log(), 20_000);
    assert!(core.dispatcher_spin_catches > 0, "the spin never found mail: {core:?}");
    assert!(core.dispatcher_parks > 0, "the dispatcher never parked: {core:?}");
    assert!(core.dispatcher_spin_ns > 0);
}

#[test]
fn a_durable_log_with_spinning_and_reply_spin_never_loses_a_wake() {
    let dir = tempfile::tempdir().unwrap();
    let cfg = Config::new(dir.path()).cores(1).groups(2).reply_spin(Duration::from_micros(30));
    let core = round_trips(cfg, 2_000);
    assert!(core.dispatcher_parks > 0, "the dispatcher never parked: {core:?}");
    assert_eq!(core.wal_records, 2_001, "a create and every append");
}

#[test]
fn spin_off_parks_on_every_empty_mailbox_and_never_spins() {
    let dir = tempfile::tempdir().unwrap();
    let core =
        round_trips(Config::new(dir.path()).cores(1).groups(2).in_memory_log().spin(SpinPolicy::OFF), 3_000);
    assert_eq!(core.dispatcher_spin_ns, 0);
    assert_eq!(core.dispatcher_spin_catches, 0);
    assert!(core.dispatcher_parks > 0 && core.dispatcher_wakes > 0, "{core:?}");
}

#[test]
fn a_spin_budget_above_the_whole_is_refused() {
    let dir = tempfile::tempdir().unwrap();
    let policy = SpinPolicy { idle_spin: Duration::from_micros(10), budget_percent: 101 };
    let err = Engine::open(Config::new(dir.path()).cores(1).spin(policy)).unwrap_err();
    assert_eq!(err.code(), rill::ErrorCode::BadRequest);
    assert!(err.to_string().contains("budget_percent"), "{err}");
}
