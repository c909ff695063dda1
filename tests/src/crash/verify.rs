//! The verifier: reads streams back from an engine (head plus every byte
//! from offset 0) and checks each against the model: the committed state,
//! or that state plus the op that was in flight. Both the kill -9 crash
//! test and the power-loss test use it. Invariant: a stream passes only if
//! it equals exactly one state a prefix of its sent ops leads to.

use rill::{Engine, Read, SetSum};

use super::ops::StreamKey;
use super::script::{Live, StreamState};
use super::transcript::{Model, Planned, Track};
use super::NOT_FOUND;

/// A stream as read back from an engine.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Observed {
    /// `head` answered not found.
    Absent,
    Present(PresentStream),
}

/// What `head` and a full read of a stream return.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PresentStream {
    pub content_type: String,
    pub closed: bool,
    pub tail_offset: u64,
    pub append_count: u64,
    pub live: SetSum,
    /// The bytes read from offset 0 to the end.
    pub content: Vec<u8>,
}

impl Observed {
    /// What an engine holding exactly `state` would answer.
    pub fn of_state(state: &StreamState) -> Observed {
        match &state.live {
            None => Observed::Absent,
            Some(live) => Observed::Present(PresentStream {
                content_type: live.content_type.clone(),
                closed: live.closed,
                tail_offset: live.tail(),
                append_count: live.append_count,
                live: live.live_sum(),
                content: live.content(),
            }),
        }
    }

    fn bytes(&self) -> u64 {
        match self {
            Observed::Absent => 0,
            Observed::Present(p) => p.content.len() as u64,
        }
    }
}

/// Reads a stream back: `head`, then every byte from offset 0.
pub async fn observe(engine: &Engine, key: StreamKey) -> Result<Observed, String> {
    let id = key.id();
    let head = match engine.head(&id).await {
        Ok(head) => head,
        Err(e) if NOT_FOUND.contains(&e.code()) => return Ok(Observed::Absent),
        Err(e) => return Err(format!("head failed: {e} ({})", e.code().as_str())),
    };
    let mut content = Vec::with_capacity(head.tail_offset as usize);
    loop {
        let offset = content.len() as u64;
        let r = engine
            .read(Read::new(id.clone()).offset(offset))
            .await
            .map_err(|e| format!("read at {offset} failed: {e} ({})", e.code().as_str()))?;
        if r.offset != offset || r.next_offset != offset + r.payload.len() as u64 {
            return Err(format!(
                "read at {offset} answered offset {} next {} with {} bytes",
                r.offset,
                r.next_offset,
                r.payload.len()
            ));
        }
        content.extend_from_slice(&r.payload);
        if r.up_to_date {
            break;
        }
        if r.payload.is_empty() {
            return Err(format!("read at {offset} returned nothing and is not up to date"));
        }
    }
    Ok(Observed::Present(PresentStream {
        content_type: head.content_type,
        closed: head.closed,
        tail_offset: head.tail_offset,
        append_count: head.append_count,
        live: head.integrity.live,
        content,
    }))
}

/// Checks an observed stream against one expected state; the error says
/// what differs first, naming the op whose data is missing or altered.
pub fn compare(expected: &StreamState, observed: &Observed) -> Result<(), String> {
    let (live, p) = match (&expected.live, observed) {
        (None, Observed::Absent) => return Ok(()),
        (None, Observed::Present(p)) => {
            let why = if expected.incarnations > 0 {
                "its delete was acknowledged"
            } else {
                "it was never created"
            };
            return Err(format!(
                "the stream exists ({} bytes, closed {}) but should not: {why}",
                p.content.len(),
                p.closed
            ));
        }
        (Some(live), Observed::Absent) => {
            return Err(format!(
                "the stream is not found, but incarnation {} should exist with {} bytes in {} records{}",
                live.incarnation,
                live.tail(),
                live.records.len(),
                live.records.last().map_or(String::new(), |r| format!(" (last written by op {})", r.opno)),
            ));
        }
        (Some(live), Observed::Present(p)) => (live, p),
    };
    if p.tail_offset != p.content.len() as u64 {
        return Err(format!(
            "head says the tail is {} but reading from 0 gave {} bytes",
            p.tail_offset,
            p.content.len()
        ));
    }
    if let Some(problem) = content_problem(live, &p.content) {
        return Err(problem);
    }
    if p.closed != live.closed {
        return Err(format!("closed is {}, expected {}", p.closed, live.closed));
    }
    if p.content_type != live.content_type {
        return Err(format!("content type is {:?}, expected {:?}", p.content_type, live.content_type));
    }
    if p.append_count != live.append_count {
        return Err(format!("append count is {}, expected {}", p.append_count, live.append_count));
    }
    let sum = live.live_sum();
    if p.live != sum {
        return Err(format!(
            "the integrity sum over {} records differs from the one over the expected {} records",
            p.live.records, sum.records
        ));
    }
    Ok(())
}

/// Which expected record is missing or altered in `content`, or what extra
/// bytes follow them; `None` when the bytes are exactly the records'.
fn content_problem(live: &Live, content: &[u8]) -> Option<String> {
    let have = content.len() as u64;
    for r in &live.records {
        let what = format!("op {} item {} at [{}, {})", r.opno, r.item, r.start, r.end());
        if have < r.end() {
            let held = &content[(r.start.min(have) as usize)..];
            return Some(if have <= r.start {
                format!("{what} is missing: the stream ends at {have}")
            } else if held == &r.payload[..held.len()] {
                format!("{what} is cut short: the stream ends at {have}")
            } else {
                format!("{what} holds other bytes{}", identify(live, held))
            });
        }
        let held = &content[r.start as usize..r.end() as usize];
        if held != &r.payload[..] {
            let first = held.iter().zip(r.payload.iter()).position(|(a, b)| a != b).unwrap_or(0);
            return Some(format!(
                "{what} holds other bytes from offset {}{}",
                r.start + first as u64,
                identify(live, &content[r.start as usize..])
            ));
        }
    }
    let tail = live.tail();
    (have > tail).then(|| {
        format!(
            "{} bytes follow the last expected byte at {tail}{}",
            have - tail,
            identify(live, &content[tail as usize..])
        )
    })
}

/// Names the record of `live` whose payload `bytes` start with, if any (a
/// duplicate or a misplaced record).
fn identify(live: &Live, bytes: &[u8]) -> String {
    let probe = &bytes[..bytes.len().min(16)];
    live.records
        .iter()
        .find(|r| {
            let n = probe.len().min(r.payload.len());
            n >= 8 && r.payload[..n] == probe[..n]
        })
        .map_or(String::from(" (not the start of any expected record)"), |r| {
            format!(" (they start like op {} item {}, stored at {})", r.opno, r.item, r.start)
        })
}

/// Counts of one verification.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct VerifyReport {
    pub streams: u64,
    pub bytes: u64,
    /// In-flight ops found in the stream / not found.
    pub in_flight_landed: u64,
    pub in_flight_absent: u64,
    /// One entry per stream that does not match.
    pub failures: Vec<String>,
}

impl Model {
    /// Reads every known stream from `engine` (opened on the data directory
    /// after the kill of the child of `cycle`) and checks it with
    /// [`Model::check_stream`].
    pub async fn verify(&mut self, engine: &Engine, cycle: u32) -> VerifyReport {
        let mut report = VerifyReport::default();
        let keys: Vec<StreamKey> = self.tracks.keys().copied().collect();
        for key in keys {
            let result = match observe(engine, key).await {
                Ok(observed) => self.check_stream(cycle, key, &observed, &mut report),
                Err(e) => Err(format!("{key}: {e}")),
            };
            if let Err(e) = result {
                report.failures.push(e);
            }
        }
        if let Err(e) = self.verify_lease(engine).await {
            report.failures.push(e);
        }
        if let Err(e) = self.queue.drain(engine).await {
            report.failures.push(format!("queue stream: {e}"));
        }
        report
    }

    /// The lease writer's committed offset after a recovery: at least the
    /// last acknowledged commit, at most the highest offset sent, within the
    /// stream; it becomes the floor for later cycles.
    async fn verify_lease(&mut self, engine: &Engine) -> Result<(), String> {
        if self.lease.generation == 0 {
            return Ok(()); // no acquire was acknowledged yet
        }
        let id = super::lease::lease_stream();
        let committed = engine
            .committed_offset(&id, super::lease::LEASE_GROUP)
            .await
            .map_err(|e| format!("lease stream: committed_offset failed: {e}"))?
            .unwrap_or(0);
        let tail = engine.head(&id).await.map_err(|e| format!("lease stream: head failed: {e}"))?.tail_offset;
        let log = self.lease;
        if committed < log.committed || committed > log.sent || committed > tail {
            return Err(format!(
                "lease stream: committed offset {committed} after recovery; acknowledged {}, highest sent {}, \
                 tail {tail}",
                log.committed, log.sent
            ));
        }
        self.lease.committed = committed;
        Ok(())
    }

    /// Checks one stream after the kill of the child of `cycle`: it must be
    /// the committed state, or (with an op in flight) that state plus the
    /// op. Resolves the in-flight op by what was seen and plans its resend
    /// when it is a producer op; other streams are left as they are and
    /// checked again after every later cycle.
    pub fn check_stream(
        &mut self,
        cycle: u32,
        key: StreamKey,
        observed: &Observed,
        report: &mut VerifyReport,
    ) -> Result<(), String> {
        let track = self.tracks.get_mut(&key).ok_or_else(|| format!("{key}: not in the model"))?;
        let without = compare(track.committed.state(), observed);
        let landed = match (&track.pending, without) {
            (None, Ok(())) => None,
            (None, Err(e)) => {
                return Err(format!("{key}: {e} ({})", ack_summary(track)));
            }
            (Some((op, after)), without) => match (without, compare(after.state(), observed)) {
                (Ok(()), _) => Some(false),
                (Err(_), Ok(())) => Some(true),
                (Err(a), Err(b)) => {
                    let ack = ack_summary(track);
                    let op = op.describe();
                    return Err(if a == b {
                        format!("{key}: {a}, whether or not the op in flight ({op}) landed ({ack})")
                    } else {
                        format!("{key}: without the op in flight ({op}): {a}; with it: {b} ({ack})")
                    });
                }
            },
        };
        report.streams += 1;
        report.bytes += observed.bytes();
        if let (Some(landed), Some((op, after))) = (landed, track.pending.take()) {
            if landed {
                report.in_flight_landed += 1;
                track.committed = after.clone();
                track.seen_unacked.insert(op.opno);
            } else {
                report.in_flight_absent += 1;
            }
            if op.producer().is_some() {
                track.resend = Some(Planned { op, after, landed });
            }
        }
        if track.resend.is_some() {
            track.active_cycle = cycle + 1;
        }
        Ok(())
    }
}

/// Which ops a stream's committed state rests on, for failure messages.
fn ack_summary(track: &Track) -> String {
    let n = track.committed.generated();
    if n == 0 {
        return "no op of the stream is committed".to_string();
    }
    if track.seen_unacked.is_empty() {
        format!("ops 0..={} were acknowledged", n - 1)
    } else {
        format!(
            "ops 0..={} were acknowledged, or seen after an earlier crash: {:?}",
            n - 1,
            track.seen_unacked
        )
    }
}
