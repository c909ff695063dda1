//! Smoke test of `rill-bench scale` at tiny sizes: two history stages and
//! an idle cell run through the real measuring child, and every figure
//! is there and consistent (the history grows, the group state and the
//! checkpoints are not empty, the append windows acknowledged records, the
//! child measured an open). No figure is judged.

use std::time::Duration;

use rill_bench::scale::{self, ScaleOptions};
use rill_bench::window::Timing;

#[test]
fn the_scale_cells_run_and_report() {
    let dir = tempfile::tempdir().expect("temp dir");
    let opts = ScaleOptions {
        dir: dir.path().to_path_buf(),
        streams: 200,
        history: vec![1 << 20, 4 << 20],
        record_bytes: 1024,
        idle_streams: 2_000,
        timing: Timing { warmup: Duration::from_millis(50), measure: Duration::from_millis(150) },
        exe: env!("CARGO_BIN_EXE_rill-bench").into(),
    };
    let result = scale::run(&opts).expect("scale runs");
    assert_eq!(result.stages.len(), 2);
    let (a, b) = (&result.stages[0], &result.stages[1]);
    assert!(a.payload_bytes >= 1 << 20 && b.payload_bytes >= 4 << 20, "{a:?} {b:?}");
    for s in &result.stages {
        assert!(s.group_state_bytes > 0 && s.checkpoint_bytes > 0, "{s:?}");
        assert!(s.pack_bytes >= s.payload_bytes, "the payload is in packs: {s:?}");
        assert!(s.dir_bytes >= s.pack_bytes + s.wal_bytes + s.checkpoint_bytes, "{s:?}");
        assert!(s.open.seconds > 0.0 && s.append_per_s > 0.0, "{s:?}");
    }
    let idle = result.idle.as_ref().expect("the idle cell ran");
    assert_eq!(idle.streams, 2_000);
    assert!(idle.group_state_bytes > 0 && idle.open.seconds > 0.0, "{idle:?}");
    assert!(result.markdown.contains("| history MiB |") && result.markdown.contains("RSS B per idle stream"));
}
