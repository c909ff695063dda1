//! Smoke test of the load generator: every workload runs once, for a
//! fraction of a second at tiny scale (the `tiny` profile, durable mode,
//! every compiled-in peer, G with the bench binary itself as the child
//! writer), and produces well-formed results: a sample per cell with
//! positive figures, JSON lines that parse and carry the machine
//! fingerprint, a markdown table (the targets of issue 13 included) and an
//! SVG; A, B and C carry their window's cost per record, H and I the same
//! run's append figure. No figure is judged.

use std::collections::BTreeSet;

use rill_bench::sample::Workload;
use rill_bench::suite::{all_workloads, Profile, SuiteOptions};
use rill_bench::util::Mode;

#[test]
fn every_workload_runs_and_reports() {
    let dir = tempfile::tempdir().expect("temp dir");
    let opts = SuiteOptions {
        profile: Profile::tiny(),
        dir: dir.path().to_path_buf(),
        modes: vec![Mode::Durable],
        peers: rill_bench::peers::compiled().into_iter().map(String::from).collect(),
        workloads: all_workloads(),
        exe: Some(env!("CARGO_BIN_EXE_rill-bench").into()),
        progress: false,
    };
    let report = rill_bench::run_and_report(&opts, "smoke test").expect("suite runs");
    assert!(report.failures.is_empty(), "peer failures: {:?}", report.failures);

    let seen: BTreeSet<Workload> = report.samples.iter().map(|s| s.workload).collect();
    assert_eq!(seen, all_workloads().into_iter().collect(), "every workload produced a row");
    for s in &report.samples {
        let o = &s.outcome;
        assert!(o.ops > 0, "{s:?} completed nothing");
        assert!(o.seconds > 0.0 && o.seconds.is_finite(), "{s:?}");
        assert!(!o.latency.is_empty(), "{s:?} recorded no latency");
        assert!(!s.cell.is_empty() && !s.peer.is_empty());
    }
    for peer in &opts.peers {
        assert!(report.samples.iter().any(|s| &s.peer == peer && s.workload == Workload::A), "{peer} ran A");
    }

    let jsonl = std::fs::read_to_string(&report.written.jsonl).expect("json lines written");
    let mut kinds = BTreeSet::new();
    for line in jsonl.lines() {
        let v: serde_json::Value = serde_json::from_str(line).expect("each line is JSON");
        assert!(v["machine"]["cpu_model"].is_string() && v["machine"]["kernel"].is_string(), "{line}");
        kinds.insert(v["type"].as_str().expect("typed line").to_string());
    }
    assert_eq!(kinds, ["run", "sample", "summary", "target"].map(String::from).into_iter().collect());
    assert!(
        report.samples.iter().any(|s| s.workload == Workload::B && s.cell.ends_with("append_many ×64")),
        "B ran its append_many cell"
    );
    let md = std::fs::read_to_string(&report.written.markdown).expect("markdown written");
    assert!(md.contains("| workload | cell | record | rill window | rill rec/s"), "{md}");
    assert!(md.contains("### Cost per acknowledged record (measured window only)"), "{md}");
    // Every closed- and open-loop run carries its window's cost; rill's
    // also its engine counters, its steady-state label and its paired floor.
    for s in report.samples.iter().filter(|s| matches!(s.workload, Workload::A | Workload::B | Workload::C)) {
        let o = &s.outcome;
        assert!(o.extra("cpu_us_per_rec").is_some_and(|c| c > 0.0), "{s:?}");
        assert!(o.extra("ctx_switches_per_rec").is_some(), "{s:?}");
        if s.peer == "rill" {
            assert!(o.extra("steady").is_some() && o.extra("eng_accepted_per_rec").is_some(), "{s:?}");
            let paired = if s.workload == Workload::C { "pair_floor_p99_us" } else { "pair_floor_mib_per_s" };
            assert!(o.extra(paired).is_some_and(|f| f > 0.0), "{s:?}");
        }
    }
    // H and I carry the same run's append figure and their ratio to it.
    for s in report.samples.iter().filter(|s| matches!(s.workload, Workload::H | Workload::I)) {
        let o = &s.outcome;
        assert!(o.extra("append_per_s").is_some_and(|a| a > 0.0), "{s:?}");
        assert!(o.extra("per_append").is_some_and(|r| r > 0.0), "{s:?}");
    }
    assert!(
        report.samples.iter().any(|s| s.workload == Workload::I && s.cell.contains("fan-out")),
        "I fan-out"
    );
    assert!(md.contains(Workload::H.title()) && md.contains(Workload::I.title()), "{md}");
    assert!(md.contains("machine:"));
    assert!(md.contains("## Targets of issue 13"), "{md}");
    let svg = std::fs::read_to_string(&report.written.plot).expect("plot written");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
}
