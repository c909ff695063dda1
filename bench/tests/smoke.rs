//! Smoke test of the load generator: every workload runs once, for a
//! fraction of a second at tiny scale (the `tiny` profile, durable mode,
//! every compiled-in peer, G with the bench binary itself as the child
//! writer), and produces well-formed results: a sample per cell with
//! positive figures, JSON lines that parse and carry the machine
//! fingerprint, a markdown table and an SVG. No figure is judged.

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
    assert_eq!(kinds, ["run", "sample", "summary"].map(String::from).into_iter().collect());
    let md = std::fs::read_to_string(&report.written.markdown).expect("markdown written");
    assert!(md.contains("| workload | cell | record | rill rec/s"), "{md}");
    assert!(md.contains("machine:"));
    let svg = std::fs::read_to_string(&report.written.plot).expect("plot written");
    assert!(svg.starts_with("<svg") && svg.trim_end().ends_with("</svg>"));
}
