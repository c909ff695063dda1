//! Every decoder fuzz target (`rill_fuzz::targets`) on stable Rust: over
//! every file of its committed corpus (`fuzz/corpus/<target>/`, generated
//! seeds plus any input ever found to crash it), then over inputs mutated
//! from the corpus and pure random ones by a seeded generator, so the same
//! inputs run on every submission.
//!
//! The targets themselves hold the assertions (FORMAT.md, DESIGN principle
//! 5, SPEC §2 "Integrity", §6): arbitrary bytes give a typed `Corrupted`
//! error or decode, never panic; what decodes re-encodes exactly; damage
//! to a valid encoding is detected. This file adds a bound on the time of
//! each input (no decoder may loop for long on anything).

use std::time::{Duration, Instant};

use rill_fuzz::corpus::{corpus_dir, load, mutate, seeds};
use rill_fuzz::rng::Rng;
use rill_fuzz::targets::{Target, TARGETS};

/// Inputs tried per target beyond its corpus; targets that touch files or
/// start an engine get fewer.
fn budget(target: &str) -> usize {
    match target {
        "shape_file" => 300,
        "recovery" => 1_500,
        _ => 4_000,
    }
}

/// No single input may take longer than this (debug build, shared machine).
const SLOW_INPUT: Duration = Duration::from_secs(3);

fn run_one(name: &str, target: Target, input: &[u8], label: &str) {
    let started = Instant::now();
    let outcome = std::panic::catch_unwind(|| target(input));
    if let Err(panic) = outcome {
        let why = panic
            .downcast_ref::<String>()
            .cloned()
            .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
            .unwrap_or_default();
        panic!("target {name} failed on {label} ({} bytes: {:02x?}): {why}", input.len(), input);
    }
    let took = started.elapsed();
    assert!(took < SLOW_INPUT, "target {name} took {took:?} on {label}");
}

// The committed corpus is exactly what the generator makes (plus any
// crash inputs added by hand); `RILL_FUZZ_WRITE_CORPUS=1` rewrites it.
#[test]
fn committed_corpus_is_current() {
    let write = std::env::var_os("RILL_FUZZ_WRITE_CORPUS").is_some();
    let mut stale = Vec::new();
    for seed in seeds() {
        let path = corpus_dir().join(seed.target).join(&seed.name);
        if write {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &seed.bytes).unwrap();
        } else if std::fs::read(&path).ok().as_deref() != Some(&seed.bytes[..]) {
            stale.push(path.display().to_string());
        }
    }
    assert!(stale.is_empty(), "stale corpus files (run with RILL_FUZZ_WRITE_CORPUS=1): {stale:?}");
}

// DESIGN principle 5: every target holds on its whole corpus and on
// thousands of inputs derived from it.
#[test]
fn every_target_survives_its_corpus_and_mutations() {
    let mut rng = Rng::new(0xdec0de);
    for (name, target) in TARGETS {
        let corpus = load(name);
        assert!(corpus.len() >= 10, "target {name} has only {} corpus files", corpus.len());
        let started = Instant::now();
        for (file, bytes) in &corpus {
            run_one(name, *target, bytes, &format!("corpus file {file}"));
        }
        let corpus_time = started.elapsed();
        for i in 0..budget(name) {
            let input = match i % 10 {
                0 => {
                    let len = rng.index(600);
                    rng.bytes(len)
                }
                _ => {
                    let (_, a) = &corpus[rng.index(corpus.len())];
                    let (_, b) = &corpus[rng.index(corpus.len())];
                    mutate(&mut rng, a, b)
                }
            };
            run_one(name, *target, &input, &format!("generated input {i}"));
        }
        eprintln!(
            "{name}: {} corpus files in {corpus_time:?}, {} generated in {:?}",
            corpus.len(),
            budget(name),
            started.elapsed() - corpus_time
        );
    }
}

// The corpus keeps valid encodings that decode, so mutations start from
// inputs that reach deep into each decoder.
#[test]
fn valid_seeds_decode() {
    use rill_fuzz::targets::{unbounded_limits, wrap_snapshot_body};
    use rill_shard::state::group::GroupState;
    let file = |target: &str, name: &str| {
        load(target).into_iter().find(|(n, _)| n == name).map(|(_, b)| b).expect("seed exists")
    };
    let mut streams = 0;
    for i in 0..5 {
        let state =
            GroupState::decode_snapshot(&file("group_snapshot", &format!("state{i}")), unbounded_limits())
                .unwrap();
        streams += state.streams().count();
        let input = file("group_snapshot_body", &format!("state{i}"));
        let index = u64::from(u16::from_le_bytes([input[2], input[3]]));
        GroupState::decode_snapshot(&wrap_snapshot_body(0, 1, index, &input[4..]), unbounded_limits())
            .unwrap();
    }
    assert!(streams > 0, "the snapshot seeds hold no stream");
    // The fork seed holds a fork book of every kind of entry: an owed pin,
    // an owed unpin, and the tombstone of a deleted source still pinned.
    let forked = GroupState::decode_snapshot(&file("group_snapshot", "forks"), unbounded_limits()).unwrap();
    let body = file("group_snapshot_body", "forks");
    let index = u64::from(u16::from_le_bytes([body[2], body[3]]));
    let again = GroupState::decode_snapshot(&wrap_snapshot_body(0, 1, index, &body[4..]), unbounded_limits());
    assert_eq!(again.unwrap(), forked);
    check_fork_book(&forked);
    // The sample commands hold every fork command, and replayed as
    // `command_apply` replays them they leave the same kind of book.
    let commands = rill_fuzz::corpus::sample_commands();
    let fork_ops: std::collections::BTreeSet<&str> = commands.iter().filter_map(|c| fork_op(&c.op)).collect();
    assert_eq!(fork_ops.len(), 5, "{fork_ops:?}");
    let mut replayed = GroupState::new(0, 1, rill_fuzz::targets::apply_limits());
    for cmd in &commands {
        replayed.apply(cmd, &mut Vec::new());
    }
    check_fork_book(&replayed);
    for (prefix, version) in [("pack", 3), ("v1-pack", 1)] {
        for i in 0..4 {
            let reader =
                rill_cold::PackReader::from_bytes(file("cold_pack", &format!("{prefix}{i}")).into()).unwrap();
            reader.verify_all().unwrap();
            assert_eq!(reader.format_version(), version);
            for slice in 0..reader.slice_count() {
                let records = reader.slice_records(slice).unwrap();
                assert_eq!(records.is_some(), version == 3);
                if let Some(records) = records {
                    assert!(records.run_count() >= 2 || records.len() < 4, "{prefix}{i} slice {slice}");
                }
            }
        }
    }
    let segment = file("wal_segment", "segment1");
    let scan = rill_shard::wal::scan::scan_segment(&segment).unwrap();
    assert_eq!(scan.records.len(), rill_fuzz::corpus::sample_commands().len());
    for (i, _) in rill_fuzz::corpus::sample_commands().iter().enumerate() {
        postcard::from_bytes::<rill_shard::state::command::Command>(&file("command", &format!("op{i}")))
            .unwrap();
    }
}

/// The name of a fork command (`None` for any other).
fn fork_op(op: &rill_shard::state::command::Op) -> Option<&'static str> {
    use rill_shard::state::command::Op;
    match op {
        Op::ForkCreate(_) => Some("create"),
        Op::ForkPin(_) => Some("pin"),
        Op::ForkPinAck(_) => Some("ack"),
        Op::ForkUnpin(_) => Some("unpin"),
        Op::ForkOutboxDone(_) => Some("outbox done"),
        _ => None,
    }
}

/// What `rill_fuzz::corpus::fork_commands` leaves: c/src a tombstone still
/// pinned by c/f1, whose unpin is owed, and c/f3's pin owed.
fn check_fork_book(state: &rill_shard::state::group::GroupState) {
    use rill_shard::state::api::ForkOwed;
    use rill_shard::{ErrorCode, StreamId};
    let c = |name: &str| StreamId::new("c", name).unwrap();
    let owed = state.fork_outbox();
    assert_eq!(owed.len(), 2, "{owed:?}");
    assert_eq!(owed[0], ForkOwed::Unpin { fork: c("f1"), token: 1, source: c("src") });
    let ForkOwed::Pin { fork, token, source, .. } = &owed[1] else { panic!("{owed:?}") };
    assert_eq!((fork, *token, source), (&c("f3"), 3, &c("src")));
    let now = 1_000_000;
    assert_eq!(state.head_view(&c("src"), now).unwrap_err().code(), ErrorCode::StreamGone);
    for gone in ["f1", "f2", "f4"] {
        assert_eq!(state.head_view(&c(gone), now).unwrap_err().code(), ErrorCode::StreamNotFound, "{gone}");
    }
    assert_eq!(state.head_view(&c("f3"), now).unwrap().tail_offset, 6);
}
