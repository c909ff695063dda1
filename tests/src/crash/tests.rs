//! Unit tests of the workload and its verifier: scripts are deterministic
//! and well formed, the verifier accepts exactly the prefixes and rejects
//! holes, duplicates and lost acknowledgements, and the whole harness
//! agrees with a live engine on cut transcripts.

use std::sync::Arc;

use bytes::Bytes;
use parking_lot::Mutex;
use rill::SetSum;

use super::*;

const SEED: u64 = 0x5EED_CAFE;

/// A script of cycle 0 whose first `acked` ops keep one incarnation
/// with at least three records and whose next op is a producer append
/// (so it can be left in flight and resent).
fn suitable_script(acked: u64) -> (StreamKey, Vec<Op>) {
    for index in 0..10_000 {
        let key = StreamKey { cycle: 0, index };
        let mut script = Script::new(SEED, key);
        let ops: Vec<Op> = (0..=acked).map_while(|_| script.next_op()).collect();
        let one_incarnation = ops.iter().skip(1).all(|op| {
            !matches!(op.kind, OpKind::Delete | OpKind::Close | OpKind::Append { close_after: true, .. })
        });
        let last_is_producer_append =
            matches!(&ops.last().unwrap().kind, OpKind::Append { len, producer: Some(_), .. } if *len > 0);
        let mut before = Script::new(SEED, key);
        before.skip_to(acked);
        let records = before.state().live.as_ref().map_or(0, |l| l.records.len());
        if ops.len() as u64 == acked + 1 && one_incarnation && last_is_producer_append && records >= 3 {
            return (key, ops);
        }
    }
    panic!("no suitable script");
}

fn transcript(ops: &[Op], acked: usize) -> Vec<String> {
    let mut lines = vec!["O".to_string()];
    for op in &ops[..acked] {
        lines.push(format!("S {} {}", op.key, op.opno));
        let Expect::Applied { start, next, noop } = op.expect else { panic!("an error op") };
        lines.push(Outcome::Applied { start, next, noop }.line(op.key, op.opno));
    }
    let last = &ops[acked];
    lines.push(format!("S {} {}", last.key, last.opno));
    lines
}

/// What an engine would report for a stream made of `records` (each
/// landed once, in this order), whatever the model says.
fn engine_with(live: &Live, payloads: &[Bytes]) -> Observed {
    let mut present = match Observed::of_state(&StreamState { live: Some(live.clone()), incarnations: 1 }) {
        Observed::Present(p) => p,
        Observed::Absent => unreachable!(),
    };
    present.content.clear();
    present.live = SetSum::default();
    for p in payloads {
        present.live.add_record(present.content.len() as u64, p);
        present.content.extend_from_slice(p);
    }
    present.tail_offset = present.content.len() as u64;
    present.append_count = payloads.len() as u64;
    Observed::Present(present)
}

fn check(model: &Model, key: StreamKey, observed: &Observed) -> Result<(Model, VerifyReport), String> {
    let mut model = model.clone();
    let mut report = VerifyReport::default();
    model.check_stream(0, key, observed, &mut report).map(|()| (model, report))
}

// The verifier accepts the committed state and the committed state plus
// the op in flight, and rejects a hole, a duplicate and a lost ack.
#[test]
fn verifier_accepts_prefixes_and_rejects_holes_duplicates_and_lost_acks() {
    let acked = 6;
    let (key, ops) = suitable_script(acked as u64);
    let mut model = Model::new(SEED);
    let report = model.apply_transcript(0, &transcript(&ops, acked)).unwrap();
    assert_eq!((report.sent, report.acked, report.in_flight_at_kill), (7, 6, 1));

    let mut script = Script::new(SEED, key);
    script.skip_to(acked as u64);
    let without = script.state().clone();
    script.next_op();
    let with = script.state().clone();
    let live = without.live.clone().unwrap();
    let payloads: Vec<Bytes> = live.records.iter().map(|r| r.payload.clone()).collect();
    let in_flight = with.live.as_ref().unwrap().records.last().unwrap().payload.clone();
    // The model-derived states and an engine built from the payloads agree.
    assert_eq!(engine_with(&live, &payloads), Observed::of_state(&without));

    // Correct: without the in-flight op (it did not land) ...
    let (after, r) = check(&model, key, &Observed::of_state(&without)).unwrap();
    assert_eq!((r.in_flight_absent, r.in_flight_landed), (1, 0));
    let resend = after.resends();
    assert_eq!(resend.len(), 1);
    assert_eq!(resend[0].opno, acked as u64);
    // ... and with it (it landed).
    let (landed, r) = check(&model, key, &Observed::of_state(&with)).unwrap();
    assert_eq!((r.in_flight_absent, r.in_flight_landed), (0, 1));

    // A hole: an acknowledged record in the middle is gone.
    let mut hole = payloads.clone();
    hole.remove(1);
    let err = check(&model, key, &engine_with(&live, &hole)).unwrap_err();
    assert!(err.contains("holds other bytes"), "{err}");
    // A duplicate: a record applied twice.
    let mut dup = payloads.clone();
    dup.insert(2, payloads[1].clone());
    let err = check(&model, key, &engine_with(&live, &dup)).unwrap_err();
    assert!(err.contains("start like op"), "{err}");
    // A duplicate of the in-flight op.
    let mut twice = payloads.clone();
    twice.push(in_flight.clone());
    twice.push(in_flight.clone());
    check(&model, key, &engine_with(&live, &twice)).unwrap_err();
    // A lost ack: the last acknowledged record is gone.
    let lost = &payloads[..payloads.len() - 1];
    let err = check(&model, key, &engine_with(&live, lost)).unwrap_err();
    assert!(err.contains("is missing"), "{err}");
    // The whole stream lost.
    let err = check(&model, key, &Observed::Absent).unwrap_err();
    assert!(err.contains("not found"), "{err}");
    // Bytes that were never sent after the last acknowledged record.
    let mut extra = payloads.clone();
    extra.push(Bytes::from_static(b"never sent by anybody"));
    check(&model, key, &engine_with(&live, &extra)).unwrap_err();

    // The resend of a landed producer op must come back deduplicated
    // with its original offsets; applied again it is a failure.
    let Expect::Applied { start, next, .. } = ops[acked].expect else { panic!() };
    let resend_lines = |flag: &str| {
        vec!["O".to_string(), format!("S {key} {acked}"), format!("A {key} {acked} {start} {next}{flag}")]
    };
    landed.clone().apply_transcript(1, &resend_lines(" dedup")).unwrap();
    let err = landed.clone().apply_transcript(1, &resend_lines("")).unwrap_err();
    assert!(err.contains("applied a second time"), "{err}");
    // The resend of an op that had not landed is applied fresh.
    after.clone().apply_transcript(1, &resend_lines("")).unwrap();
    let err = after.clone().apply_transcript(1, &resend_lines(" dedup")).unwrap_err();
    assert!(err.contains("not in the stream"), "{err}");
    // A reply at other offsets than the script's is refused.
    let mut wrong = transcript(&ops, acked);
    wrong[4] = format!("A {key} 1 {} {}", 7, 9);
    Model::new(SEED).apply_transcript(0, &wrong).unwrap_err();
}

#[test]
fn scripts_are_deterministic_and_well_formed() {
    for index in 0..64 {
        let key = StreamKey { cycle: 3, index };
        let mut a = Script::new(SEED, key);
        let mut b = Script::new(SEED, key);
        let mut n = 0;
        while let Some(op) = a.next_op() {
            assert_eq!(Some(&op), b.next_op().as_ref());
            if let OpKind::Append { len: 0, close_after, .. } = op.kind {
                assert!(close_after, "{op:?}");
            }
            n += 1;
        }
        assert!((SCRIPT_OPS.0..=SCRIPT_OPS.1).contains(&n));
    }
    assert_eq!("c12s7".parse::<StreamKey>().unwrap(), StreamKey { cycle: 12, index: 7 });
    let r = Resend { key: StreamKey { cycle: 1, index: 2 }, opno: 5, producer_id: "w2".into(), seq: 3 };
    assert_eq!(Resend::parse_file(&Resend::file(&[r.clone(), r.clone()])).unwrap(), vec![r.clone(), r]);
}

/// A sink that stops recording after `limit` lines, as if the process
/// died there; an `S` line that is the last one recorded is not sent.
#[derive(Debug)]
struct CutSink {
    lines: Mutex<(Vec<String>, bool)>,
    limit: usize,
}

impl Sink for CutSink {
    fn emit(&self, line: &str) -> bool {
        let mut state = self.lines.lock();
        if state.1 {
            return false;
        }
        state.0.push(line.to_string());
        state.1 = state.0.len() >= self.limit;
        true
    }
    fn alive(&self) -> bool {
        !self.lines.lock().1
    }
}

// The whole harness against the real engine, without a crash: the
// transcript is cut at a random line, as a kill would cut it (ops in
// flight complete but go unrecorded, so they land unacknowledged), and
// the verifier must accept the live engine's state; the next cycle's
// resends must be deduplicated or applied fresh as the model says.
#[test]
fn cut_transcripts_verify_against_a_live_engine() {
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(4).enable_all().build().unwrap();
    let e = crate::open(CORES, GROUPS);
    let mut model = Model::new(SEED);
    let mut rng = Rng::new(SEED);
    let (mut dedup, mut fresh, mut landed) = (0, 0, 0);
    for cycle in 0..6 {
        let sink = Arc::new(CutSink {
            lines: Mutex::new((Vec::new(), false)),
            limit: rng.range(300, 4000) as usize,
        });
        let resends = model.resends();
        rt.block_on(run_workload(e.engine.clone(), SEED, cycle, resends, sink.clone())).unwrap();
        let lines = std::mem::take(&mut sink.lines.lock().0);
        let t = model.apply_transcript(cycle, &lines).unwrap();
        let v = rt.block_on(model.verify(&e.engine, cycle));
        assert!(v.failures.is_empty(), "cycle {cycle}: {:#?}", v.failures);
        dedup += t.resends_deduplicated;
        fresh += t.resends_applied;
        landed += v.in_flight_landed;
    }
    assert!(landed > 0 && dedup > 0, "landed {landed}, resends deduplicated {dedup}, applied {fresh}");
}
