//! `/health` and `/metrics`.
//!
//! `/health` answers `200 {"status":"ok",...}` while the engine takes
//! requests. `/metrics` renders [`Engine::metrics`] and the HTTP counters
//! in the Prometheus text format (version 0.0.4): engine totals as
//! `rill_*`, per-core series with a `core` label, latency summaries as
//! `rill_*_latency_us{quantile=...}`, and HTTP counters as `rill_http_*`.
//! Names and labels are fixed strings, so the output needs no escaping.

use std::fmt::Write as _;
use std::sync::atomic::Ordering;

use bytes::Bytes;
use http::{Response, StatusCode};

use super::respond::{Body, Reply};
use super::state::HttpStats;
use crate::{Engine, LatencySummary};

/// The `/health` answer.
pub(crate) fn health(engine: &Engine) -> Response<Body> {
    let body = format!(r#"{{"status":"ok","cores":{},"groups":{}}}"#, engine.cores(), engine.groups());
    Reply::new(StatusCode::OK).content_type("application/json").bytes(Bytes::from(body)).build()
}

fn counter(out: &mut String, name: &str, help: &str, kind: &str, value: u64) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}\n{name} {value}");
}

fn latency(out: &mut String, name: &str, help: &str, l: &LatencySummary) {
    let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} summary");
    for (q, v) in [("0.5", l.p50_us), ("0.99", l.p99_us), ("0.999", l.p999_us), ("1", l.max_us)] {
        let _ = writeln!(out, "{name}{{quantile=\"{q}\"}} {v}");
    }
    let _ = writeln!(out, "{name}_count {}", l.count);
}

/// The metrics text.
pub(crate) fn render(engine: &Engine, stats: &HttpStats) -> String {
    let m = engine.metrics();
    let mut out = String::with_capacity(4096);
    counter(
        &mut out,
        "rill_routed_requests_total",
        "Requests routed to a core.",
        "counter",
        m.routed_requests,
    );
    counter(&mut out, "rill_accepted_appends_total", "Appends accepted.", "counter", m.accepted_appends);
    counter(&mut out, "rill_applied_mutations_total", "Mutations applied.", "counter", m.applied_mutations);
    counter(
        &mut out,
        "rill_mailbox_full_events_total",
        "Sends that found a mailbox full.",
        "counter",
        m.mailbox_full_events,
    );
    counter(&mut out, "rill_live_waiters", "Parked live readers.", "gauge", m.live_waiters);
    counter(
        &mut out,
        "rill_live_read_backpressure_events_total",
        "Live reads refused at the waiter cap.",
        "counter",
        m.live_read_backpressure_events,
    );
    counter(
        &mut out,
        "rill_uncommitted_backpressure_events_total",
        "Writes refused for uncommitted bytes.",
        "counter",
        m.uncommitted_backpressure_events,
    );
    counter(
        &mut out,
        "rill_overloaded_events_total",
        "Requests refused by a full core queue.",
        "counter",
        m.overloaded_events,
    );
    counter(&mut out, "rill_hot_bytes", "Bytes not yet flushed to cold packs.", "gauge", m.hot_bytes);
    counter(&mut out, "rill_streams", "Streams stored.", "gauge", m.streams);
    counter(
        &mut out,
        "rill_fork_outbox",
        "Fork pins and unpins owed between groups, not yet delivered.",
        "gauge",
        m.groups.iter().map(|g| g.fork_outbox).sum(),
    );
    if engine.config().cluster_config().is_some() {
        raft_lines(&mut out, &m.groups);
        raft_core_lines(&mut out, &m.cores);
    }
    let _ = writeln!(out, "# HELP rill_core_routed_requests_total Requests routed, per core.\n# TYPE rill_core_routed_requests_total counter");
    for c in &m.cores {
        let _ = writeln!(out, "rill_core_routed_requests_total{{core=\"{}\"}} {}", c.core, c.routed_requests);
    }
    let _ = writeln!(
        out,
        "# HELP rill_core_mailbox_depth Mail queued, per core.\n# TYPE rill_core_mailbox_depth gauge"
    );
    for c in &m.cores {
        let _ = writeln!(out, "rill_core_mailbox_depth{{core=\"{}\"}} {}", c.core, c.mailbox_depth);
    }
    type CoreCounter = fn(&crate::CoreMetricsSnapshot) -> u64;
    let per_core: [(&str, &str, CoreCounter); 10] = [
        ("rill_core_wal_batches_total", "WAL batches written, per core.", |c| c.wal_batches),
        ("rill_core_wal_records_total", "Records in those batches, per core.", |c| c.wal_records),
        ("rill_core_wal_syncs_total", "WAL syncs completed, per core.", |c| c.wal_syncs),
        ("rill_core_wal_bytes_written_total", "WAL bytes written (padding included), per core.", |c| {
            c.wal_bytes_written
        }),
        (
            "rill_core_dispatcher_parks_total",
            "Times the dispatcher slept on an empty mailbox, per core.",
            |c| c.dispatcher_parks,
        ),
        ("rill_core_dispatcher_wakes_total", "Cross-thread wakes of a parked dispatcher, per core.", |c| {
            c.dispatcher_wakes
        }),
        (
            "rill_core_dispatcher_spin_ns_total",
            "Nanoseconds the dispatcher spun instead of parking, per core.",
            |c| c.dispatcher_spin_ns,
        ),
        (
            "rill_core_dispatcher_spin_catches_total",
            "Times a spinning dispatcher found mail, per core.",
            |c| c.dispatcher_spin_catches,
        ),
        ("rill_core_checkpoints_total", "Checkpoint runs that wrote a snapshot, per core.", |c| {
            c.checkpoints
        }),
        ("rill_core_checkpoint_bytes_total", "Bytes of group snapshots checkpoints wrote, per core.", |c| {
            c.checkpoint_bytes
        }),
    ];
    for (name, help, value) in per_core {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for c in &m.cores {
            let _ = writeln!(out, "{name}{{core=\"{}\"}} {}", c.core, value(c));
        }
    }
    latency(&mut out, "rill_append_latency_us", "Append commit latency, microseconds.", &m.append_latency);
    latency(&mut out, "rill_read_latency_us", "Read latency, microseconds.", &m.read_latency);
    let _ = writeln!(out, "# HELP rill_http_responses_total HTTP responses by status class.\n# TYPE rill_http_responses_total counter");
    for (i, c) in stats.responses.iter().enumerate() {
        let _ =
            writeln!(out, "rill_http_responses_total{{class=\"{}xx\"}} {}", i + 1, c.load(Ordering::Relaxed));
    }
    let load = |a: &std::sync::atomic::AtomicU64| a.load(Ordering::Relaxed);
    counter(
        &mut out,
        "rill_http_connections_accepted_total",
        "Connections accepted.",
        "counter",
        load(&stats.connections_accepted),
    );
    counter(
        &mut out,
        "rill_http_connections_refused_total",
        "Connections closed at once for the per-core connection cap.",
        "counter",
        load(&stats.connections_refused),
    );
    counter(
        &mut out,
        "rill_http_connections_active",
        "Open connections.",
        "gauge",
        load(&stats.connections_active),
    );
    counter(
        &mut out,
        "rill_http_sse_streams_active",
        "Open SSE streams.",
        "gauge",
        load(&stats.sse_streams_active),
    );
    out
}

/// The `/metrics` answer.
pub(crate) fn metrics(engine: &Engine, stats: &HttpStats) -> Response<Body> {
    Reply::new(StatusCode::OK)
        .content_type("text/plain; version=0.0.4")
        .bytes(Bytes::from(render(engine, stats)))
        .build()
}

/// A replicated node's per-group consensus state (leader, term, lags,
/// elections), one line per group and metric.
fn raft_lines(out: &mut String, groups: &[crate::GroupMetricsSnapshot]) {
    type GroupValue = fn(&crate::GroupMetricsSnapshot) -> u64;
    let per_group: [(&str, &str, &str, GroupValue); 9] = [
        ("rill_group_raft_term", "The group's raft term on this node.", "gauge", |g| g.raft_term),
        ("rill_group_raft_leader", "The node this replica follows (0: none known).", "gauge", |g| {
            g.raft_leader
        }),
        ("rill_group_raft_leading", "1 while this node leads the group.", "gauge", |g| {
            u64::from(g.raft_leading)
        }),
        ("rill_group_raft_commit_lag", "Log entries not yet applied on this node.", "gauge", |g| {
            g.raft_commit_lag
        }),
        (
            "rill_group_raft_follower_lag",
            "On the leader: the most entries a follower is behind.",
            "gauge",
            |g| g.raft_follower_lag,
        ),
        ("rill_group_raft_elections_total", "Terms this replica saw begin.", "counter", |g| g.raft_elections),
        ("rill_group_raft_voters", "Voters of the group's latest membership.", "gauge", |g| g.raft_voters),
        ("rill_group_raft_joint", "1 while a membership change is half made (joint).", "gauge", |g| {
            u64::from(g.raft_joint)
        }),
        (
            "rill_group_raft_snapshots_installed_total",
            "Snapshots this replica installed from its leader.",
            "counter",
            |g| g.raft_snapshots_installed,
        ),
    ];
    for (name, help, kind, value) in per_group {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
        for g in groups {
            let _ = writeln!(out, "{name}{{group=\"{}\"}} {}", g.group, value(g));
        }
    }
}

/// A replicated node's per-core transport counters: frames its raft
/// connections wrote and the messages they carried (heartbeats of many
/// groups share a frame, so messages per frame shows the coalescing).
fn raft_core_lines(out: &mut String, cores: &[crate::CoreMetricsSnapshot]) {
    type CoreValue = fn(&crate::CoreMetricsSnapshot) -> u64;
    let per_core: [(&str, &str, CoreValue); 3] = [
        ("rill_core_raft_frames_sent_total", "Frames the core's raft connections wrote.", |c| {
            c.raft_frames_sent
        }),
        ("rill_core_raft_messages_sent_total", "Raft messages those frames carried.", |c| {
            c.raft_messages_sent
        }),
        ("rill_core_raft_snapshots_sent_total", "Snapshots the core's leaders sent to followers.", |c| {
            c.raft_snapshots_sent
        }),
    ];
    for (name, help, value) in per_core {
        let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
        for c in cores {
            let _ = writeln!(out, "{name}{{core=\"{}\"}} {}", c.core, value(c));
        }
    }
}
