//! The harness: the real `GroupState` and the reference `Model` side by
//! side. Each step is resolved to a concrete command or query, applied to
//! both, and every observable answer is compared (SPEC §2); after every
//! step the real state's invariants are checked and all views compared.

use bytes::Bytes;
use proptest::prelude::*;
use rill_fuzz::{observe, Fault, Model};
use rill_shard::error::ErrorCode;
use rill_shard::state::api::{Append, AppendBatch, Close, Create, ProducerArgs, PublishSnapshot, Read};
use rill_shard::state::command::{
    self, Command, ForkCreate, LeaseAcquire, LeaseRelease, LeaseRenew, MemberHeartbeat, MemberLeave,
    OffsetCommit, Op,
};
use rill_shard::state::group::GroupState;
use rill_shard::StreamId;

use crate::steps::{
    id, limits, At, Digest, EpochPick, ForkAction, LeaseAction, Life, PointPick, Prod, QueueAction, SeqPick,
    SourcePick, Step, ATTRS, BUCKETS, CONTENT_TYPES, IDS, LEASE_NAMES, OWNERS, PRODUCERS, QUEUE_NAMES,
};

/// The real machine and the model, side by side.
pub(crate) struct Run {
    real: GroupState,
    model: Model,
    now: u64,
    counter: u64,
    /// The last fork request, for a client's retry.
    last_fork: Option<ForkCreate>,
}

impl Run {
    pub(crate) fn new() -> Self {
        Run {
            real: GroupState::new(0, 1, limits()),
            model: Model::new(limits()),
            now: 1_000_000,
            counter: 0,
            last_fork: None,
        }
    }

    /// A fresh payload; distinct bytes make misplaced data visible.
    fn payload(&mut self, len: usize) -> Bytes {
        self.counter += 1;
        let seed = self.counter;
        (0..len).map(|i| (seed.wrapping_mul(31).wrapping_add(i as u64 * 7)) as u8).collect::<Vec<u8>>().into()
    }

    /// Resolves a stream pick: below `IDS` it names a stream directly (which
    /// may not exist), above it picks one of the stored streams, so most
    /// commands reach a stream that exists.
    fn target(&self, pick: usize) -> usize {
        if pick < IDS || self.model.streams.is_empty() {
            return pick % IDS;
        }
        let stored = self.model.streams.keys().nth(pick % self.model.streams.len()).unwrap();
        (0..IDS).find(|i| id(*i) == *stored).unwrap()
    }

    fn producer(&self, s: usize, prod: &Option<Prod>) -> Option<ProducerArgs> {
        let prod = prod.as_ref()?;
        let name = PRODUCERS[prod.p];
        let known = self.model.producer(&id(s), name);
        let current_epoch = known.map_or(0, |(epoch, _)| epoch);
        let next = known.map_or(0, |(_, last)| last + 1);
        let epoch = match prod.epoch {
            EpochPick::Same => current_epoch,
            EpochPick::Bump => current_epoch + 1,
            EpochPick::Lower => current_epoch.saturating_sub(1),
        };
        let seq = match (&prod.epoch, &prod.seq) {
            (EpochPick::Bump, SeqPick::Next) | (_, SeqPick::Zero) => 0,
            (_, SeqPick::Next) => next,
            (_, SeqPick::Back(k)) => next.saturating_sub(1 + k),
            (_, SeqPick::Ahead(k)) => next + k,
        };
        Some(ProducerArgs { id: name.to_string(), epoch, seq })
    }

    fn offset(&self, s: usize, at: &At) -> u64 {
        let stream = self.model.streams.get(&id(s));
        let (tail, retained) = stream.map_or((0, 0), |st| (st.tail(), st.retained));
        let snapshot = stream.and_then(|st| st.snapshots.keys().next_back().copied()).unwrap_or(tail);
        match at {
            At::Abs(n) => *n,
            At::FromTail(k) => tail.saturating_sub(*k),
            At::FromRetained(k) => retained + k,
            At::Beyond(k) => tail + k,
            At::BelowSnapshot(k) => snapshot.saturating_sub(*k),
        }
    }

    pub(crate) fn step(&mut self, step: &Step) -> Result<(), TestCaseError> {
        let step = &self.resolve(step);
        match step {
            Step::Advance(ms) => self.now += ms,
            Step::Create { s, ct, payload, closed, life, attrs, producer, seq, more } => {
                let mut req = Create::new(id(*s));
                req.content_type = ct.map(|c| CONTENT_TYPES[c].to_string());
                req.initial_payload = payload.map(|len| self.payload(len));
                req.more_records = more.iter().map(|len| self.payload(*len)).collect();
                req.closed = *closed;
                (req.ttl_s, req.expires_at_ms) = match life {
                    Life::Forever => (None, None),
                    Life::Ttl(ttl) => (Some(*ttl), None),
                    Life::ExpiresIn(delta) => (None, Some(self.now.saturating_add_signed(*delta))),
                    Life::Both => (Some(2), Some(self.now + 5_000)),
                    Life::ZeroTtl => (Some(0), None),
                };
                req.attrs = attrs.map(|a| ATTRS[a].to_string());
                req.producer = self.producer(*s, producer);
                req.stream_seq = seq.map(|n| format!("{n:02}"));
                self.command(Op::from(req))?;
            }
            Step::Append { s, len, more, ct, close_after, seq, producer } => {
                let mut req = Append::new(id(*s), self.payload(*len)).close_after(*close_after);
                req.more_records = more.iter().map(|len| self.payload(*len)).collect();
                req.content_type = ct.map(|c| CONTENT_TYPES[c].to_string());
                req.stream_seq = seq.map(|n| format!("{n:02}"));
                req.producer = self.producer(*s, producer);
                self.command(Op::from(req))?;
            }
            Step::Batch { s, lens, ct, producer } => {
                let payloads = lens.iter().map(|len| self.payload(*len)).collect();
                let mut req = AppendBatch::new(id(*s), payloads);
                req.content_type = ct.map(|c| CONTENT_TYPES[c].to_string());
                req.producer = self.producer(*s, producer);
                self.command(Op::from(req))?;
            }
            Step::Close { s, seq, producer } => {
                let mut req = Close::new(id(*s));
                req.stream_seq = seq.map(|n| format!("{n:02}"));
                req.producer = self.producer(*s, producer);
                self.command(Op::from(req))?;
            }
            Step::Delete(s) => self.command(Op::Delete(id(*s)))?,
            Step::SetAttrs { s, attrs } => {
                self.command(Op::SetAttrs { id: id(*s), attrs: attrs.map(|a| ATTRS[a].to_string()) })?
            }
            Step::Touch(s) => self.command(Op::Touch(id(*s)))?,
            Step::Publish { s, at, variant, ct, digest } => {
                let payload = Bytes::from(vec![*variant; 3]);
                let mut req = PublishSnapshot::new(id(*s), self.offset(*s, at), payload.clone())
                    .content_type(CONTENT_TYPES[*ct]);
                req.expected_digest = match digest {
                    Digest::Absent => None,
                    Digest::Right => Some(*blake3::hash(&payload).as_bytes()),
                    Digest::Wrong => Some([9; 32]),
                };
                self.command(Op::from(req))?;
            }
            Step::Retain { s, at } => {
                self.command(Op::AdvanceRetention { id: id(*s), offset: self.offset(*s, at) })?
            }
            Step::ExpireDue => self.command(Op::ExpireDue)?,
            Step::Read { s, at, max_len } => {
                self.compare_read(*s, self.offset(*s, at), *max_len)?;
            }
            Step::ReadAll(s) => {
                let mut offset = self.offset(*s, &At::FromRetained(0));
                for _ in 0..10_000 {
                    match self.compare_read(*s, offset, 24)? {
                        Some((next, false)) => offset = next,
                        _ => break,
                    }
                }
            }
            Step::ReadRecords { s, at, max_len } => {
                self.compare_records(*s, self.offset(*s, at), *max_len)?;
            }
            Step::ReadAllRecords(s) => {
                let mut offset = self.offset(*s, &At::FromRetained(0));
                for _ in 0..10_000 {
                    match self.compare_records(*s, offset, 24)? {
                        Some((next, false)) => offset = next,
                        _ => break,
                    }
                }
            }
            Step::Lease { s, g, o, action, ttl_ms, stale, at } => {
                let (group, owner) = (LEASE_NAMES[*g].to_string(), OWNERS[*o].to_string());
                let current = self
                    .model
                    .streams
                    .get(&id(*s))
                    .and_then(|st| st.leases.get(&group))
                    .map_or(0, |l| l.generation);
                let generation = if *stale { current.saturating_sub(1) } else { current };
                let sid = id(*s);
                let op = match action {
                    LeaseAction::Acquire => {
                        Op::AcquireLease(LeaseAcquire { id: sid, group, owner, ttl_ms: *ttl_ms })
                    }
                    LeaseAction::Renew => {
                        Op::RenewLease(LeaseRenew { id: sid, group, owner, generation, ttl_ms: *ttl_ms })
                    }
                    LeaseAction::Release => {
                        Op::ReleaseLease(LeaseRelease { id: sid, group, owner, generation })
                    }
                    LeaseAction::Commit => {
                        let offset = self.offset(*s, at);
                        Op::CommitOffset(OffsetCommit { id: sid, group, owner, generation, offset })
                    }
                    LeaseAction::Heartbeat => Op::Heartbeat(MemberHeartbeat {
                        bucket: sid.bucket().to_string(),
                        group,
                        consumer: owner,
                        ttl_ms: *ttl_ms,
                    }),
                    LeaseAction::Leave => {
                        Op::Leave(MemberLeave { bucket: sid.bucket().to_string(), group, consumer: owner })
                    }
                    LeaseAction::Committed => {
                        let real =
                            self.real.committed_offset(&sid, &group, self.now).map_err(|e| Fault::of(&e));
                        let model = self.model.committed_offset(&sid, &group, self.now);
                        prop_assert_eq!(real, model, "committed offset of {} {}", sid, group);
                        return Ok(());
                    }
                };
                self.command(op)?;
            }
            Step::Queue { s, g, action, n, ms } => self.queue(*s, QUEUE_NAMES[*g], action, *n, *ms)?,
            Step::OffsetAt { s, back_ms } => {
                let at_ms = self.now.saturating_sub(*back_ms);
                let real = self
                    .real
                    .offset_at(&id(*s), at_ms, self.now, &rill_shard::state::group::HotOnly)
                    .map_err(|e| Fault::of(&e));
                prop_assert_eq!(real, self.model.offset_at(&id(*s), at_ms, self.now), "offset_at {}", at_ms);
            }
            Step::Bootstrap { s, max_len } => {
                let real =
                    self.real.bootstrap(&id(*s), *max_len, self.now).map_err(|e| Fault::of(&e)).map(|b| {
                        let snapshot = b.snapshot.map(|s| (s.offset, s.content_type, s.payload.to_vec()));
                        (
                            snapshot,
                            b.updates.payload.to_vec(),
                            b.updates.next_offset,
                            b.updates.up_to_date,
                            b.updates.closed,
                        )
                    });
                let model = self
                    .model
                    .bootstrap(&id(*s), *max_len, self.now)
                    .map(|(snapshot, r)| (snapshot, r.bytes, r.next_offset, r.up_to_date, r.closed));
                prop_assert_eq!(real, model, "bootstrap of {}", id(*s));
            }
            Step::Roundtrip { cut } => {
                let bytes = self.real.encode_snapshot();
                let decoded = GroupState::decode_snapshot(&bytes, limits());
                prop_assert!(decoded.is_ok(), "decode failed: {:?}", decoded.err());
                let decoded = decoded.unwrap();
                prop_assert_eq!(&decoded, &self.real);
                prop_assert_eq!(decoded.encode_snapshot(), bytes.clone());
                let truncated = GroupState::decode_snapshot(&bytes[..cut % bytes.len()], limits());
                prop_assert_eq!(truncated.map(|_| ()).unwrap_err().code(), ErrorCode::Corrupted);
                self.real = decoded;
            }
            Step::Fork { src, dst, point, source, life, initial, broken, again } => {
                self.fork(*src, *dst, point, source, life, *initial, *broken, *again)?
            }
            Step::ForkOp { s, action, n } => self.fork_op(*s, action, *n)?,
            Step::Purge(b) => self.command(Op::PurgeBucket { bucket: BUCKETS[*b].to_string() })?,
        }
        self.compare_views()
    }

    /// The step with its stream pick resolved by [`Self::target`].
    fn resolve(&self, step: &Step) -> Step {
        let mut step = step.clone();
        match &mut step {
            // Creates name any stream half the time, to reach new names.
            Step::Create { s, .. } if *s < 2 * IDS => *s %= IDS,
            Step::Create { s, .. }
            | Step::Append { s, .. }
            | Step::Batch { s, .. }
            | Step::Close { s, .. }
            | Step::Delete(s)
            | Step::SetAttrs { s, .. }
            | Step::Touch(s)
            | Step::Publish { s, .. }
            | Step::Retain { s, .. }
            | Step::Read { s, .. }
            | Step::ReadAll(s)
            | Step::ReadRecords { s, .. }
            | Step::ReadAllRecords(s)
            | Step::OffsetAt { s, .. }
            | Step::Lease { s, .. }
            | Step::Queue { s, .. }
            | Step::Bootstrap { s, .. }
            | Step::ForkOp { s, .. } => *s = self.target(*s),
            Step::Fork { src, dst, .. } => {
                *src = self.target(*src);
                *dst = self.fresh(*dst);
            }
            Step::Advance(_) | Step::ExpireDue | Step::Roundtrip { .. } | Step::Purge(_) => {}
        }
        step
    }

    /// Resolves a fork's name: below `IDS` that stream (which may exist,
    /// or be a tombstone), above it one that is neither when there is one.
    fn fresh(&self, pick: usize) -> usize {
        let free: Vec<usize> = (0..IDS)
            .filter(|i| !self.model.streams.contains_key(&id(*i)) && !self.model.forks.is_tombstone(&id(*i)))
            .collect();
        match free.len() {
            _ if pick < IDS => pick,
            0 => pick % IDS,
            n => free[pick % n],
        }
    }

    /// A fork of `src` into `dst` as `Engine::fork` makes it: the prefix
    /// copied from the model (or made up for an unknown source), the
    /// content type and life inherited unless named, a fresh token.
    #[allow(clippy::too_many_arguments)]
    fn fork(
        &mut self,
        src: usize,
        dst: usize,
        point: &PointPick,
        source: &SourcePick,
        life: &Option<Life>,
        initial: Option<usize>,
        broken: u8,
        again: bool,
    ) -> Result<(), TestCaseError> {
        use rill_shard::state::api::ForkPoint;
        self.counter += 1;
        let token = self.counter;
        if again {
            if let Some(mut req) = self.last_fork.clone() {
                req.origin.token = token;
                return self.command(Op::ForkCreate(Box::new(req)));
            }
        }
        let (sid, fid) = (id(src), id(if broken == 3 { src } else { dst }));
        let found = self.model.find(&sid, self.now).ok().filter(|_| !matches!(source, SourcePick::Unknown));
        let mut create = command::Create::from(Create::new(fid));
        let (start, inherited, end, point, incarnation) = match found {
            Some(st) => {
                let records: Vec<(u64, u64)> =
                    st.live_records().map(|(s, e)| (s.max(st.retained), e)).collect();
                let nth = |r: usize| records.get(r % records.len().max(1)).copied();
                let point = match point {
                    PointPick::Tail => ForkPoint::Tail,
                    PointPick::Offset(k) => ForkPoint::Offset(st.retained + k),
                    PointPick::IntoRecord { r, bytes } => match nth(*r) {
                        Some((offset, _)) => ForkPoint::IntoRecord { offset, bytes: *bytes },
                        None => ForkPoint::IntoRecord { offset: st.tail(), bytes: *bytes },
                    },
                    PointPick::Records { r, count } => match nth(*r) {
                        Some((offset, _)) => ForkPoint::Records { offset, count: *count },
                        None => ForkPoint::Records { offset: st.tail(), count: *count },
                    },
                };
                create.content_type = Some(st.content_type.clone());
                (create.ttl_s, create.expires_at_ms) = (st.ttl_s, st.expires_at_ms);
                let incarnation = match source {
                    SourcePick::WrongIncarnation => st.incarnation + 1,
                    _ => st.incarnation,
                };
                match self.model.fork_prefix(&sid, point, self.now) {
                    Ok((start, copy, end)) => (
                        start,
                        copy.into_iter().map(Bytes::from).collect::<Vec<_>>(),
                        end,
                        point,
                        incarnation,
                    ),
                    // Refused by the engine before anything is logged.
                    Err(_) => return Ok(()),
                }
            }
            None => {
                // A copy of nothing the pin will find: the name's tombstone
                // incarnation, or none.
                let incarnation = self.model.forks.sources.get(&sid).map_or(0, |p| p.incarnation);
                create.content_type = Some(CONTENT_TYPES[token as usize % 2].to_string());
                let copy = vec![self.payload(3), self.payload(2)];
                (4, copy, 9, ForkPoint::Tail, incarnation)
            }
        };
        if let Some(life) = life {
            (create.ttl_s, create.expires_at_ms) = match life {
                Life::Forever => (None, None),
                Life::Ttl(ttl) => (Some(*ttl), None),
                Life::ExpiresIn(delta) => (None, Some(self.now.saturating_add_signed(*delta))),
                Life::Both => (Some(2), Some(self.now + 5_000)),
                Life::ZeroTtl => (Some(0), None),
            };
        }
        create.initial_payload = initial.map(|len| self.payload(len));
        // Some forks start with records of their own (a JSON body of
        // several messages), some of them empty (refused).
        let more = match (initial, token % 3) {
            (Some(_), 0) => vec![self.payload(2), self.payload(token as usize % 4)],
            _ => Vec::new(),
        };
        let mut req = ForkCreate {
            create,
            more,
            start,
            inherited,
            origin: command::ForkOrigin { source: sid, source_incarnation: incarnation, token, point, end },
        };
        match broken {
            1 => req.origin.end += 1,
            2 => req.inherited.push(Bytes::new()),
            _ => {}
        }
        self.last_fork = Some(req.clone());
        self.command(Op::ForkCreate(Box::new(req)))
    }

    /// A fork command resolved against the model's fork book (see
    /// [`ForkAction`]), or a comparison of `fork_source`.
    fn fork_op(&mut self, s: usize, action: &ForkAction, n: usize) -> Result<(), TestCaseError> {
        use rill_shard::state::api::ForkOwed;
        use rill_shard::state::command::{ForkOutboxDone, ForkPin, ForkPinAck, ForkUnpin};
        let owed = self.model.fork_outbox();
        let pins: Vec<&ForkOwed> = owed.iter().filter(|o| matches!(o, ForkOwed::Pin { .. })).collect();
        let unpins: Vec<&ForkOwed> = owed.iter().filter(|o| matches!(o, ForkOwed::Unpin { .. })).collect();
        let pick = |list: &[&ForkOwed]| list.get(n % list.len().max(1)).map(|o| (*o).clone());
        // With nothing owed, commands of unknown forks and tokens.
        let (sid, other) = (id(s), id((s + 1) % IDS));
        let op = match action {
            ForkAction::Pin { wrong } => match pick(&pins) {
                Some(ForkOwed::Pin { fork, token, source, source_incarnation }) => Op::ForkPin(ForkPin {
                    source,
                    source_incarnation: source_incarnation + u64::from(*wrong),
                    token,
                    fork,
                }),
                _ => Op::ForkPin(ForkPin {
                    source: sid,
                    source_incarnation: n as u64,
                    token: n as u64,
                    fork: other,
                }),
            },
            ForkAction::PinAck { pinned } => match pick(&pins) {
                Some(ForkOwed::Pin { fork, token, .. }) => {
                    Op::ForkPinAck(ForkPinAck { fork, token, pinned: *pinned })
                }
                _ => Op::ForkPinAck(ForkPinAck { fork: sid, token: n as u64, pinned: *pinned }),
            },
            ForkAction::Unpin { held: true } => {
                let held: Vec<(StreamId, u64, StreamId)> = self
                    .model
                    .forks
                    .sources
                    .iter()
                    .flat_map(|(source, p)| p.pins.iter().map(|(t, f)| (source.clone(), *t, f.clone())))
                    .collect();
                match held.get(n % held.len().max(1)) {
                    Some((source, token, fork)) => {
                        Op::ForkUnpin(ForkUnpin { source: source.clone(), token: *token, fork: fork.clone() })
                    }
                    None => Op::ForkUnpin(ForkUnpin { source: sid, token: n as u64, fork: other }),
                }
            }
            ForkAction::Unpin { held: false } => match pick(&unpins) {
                Some(ForkOwed::Unpin { fork, token, source }) => {
                    Op::ForkUnpin(ForkUnpin { source, token, fork })
                }
                _ => Op::ForkUnpin(ForkUnpin { source: sid, token: n as u64, fork: other }),
            },
            ForkAction::Done => match owed.get(n % owed.len().max(1)) {
                Some(ForkOwed::Pin { fork, token, .. } | ForkOwed::Unpin { fork, token, .. }) => {
                    Op::ForkOutboxDone(ForkOutboxDone { fork: fork.clone(), token: *token })
                }
                None => Op::ForkOutboxDone(ForkOutboxDone { fork: sid, token: n as u64 }),
            },
            ForkAction::Deliver => match owed.get(n % owed.len().max(1)).cloned() {
                Some(ForkOwed::Pin { fork, token, source, source_incarnation }) => {
                    let pin = ForkPin { source, source_incarnation, token, fork: fork.clone() };
                    let answer = self.command_observed(Op::ForkPin(pin))?;
                    let pinned =
                        matches!(answer.result, Ok(rill_fuzz::Outcome::ForkPinned { pinned: true, .. }));
                    Op::ForkPinAck(ForkPinAck { fork, token, pinned })
                }
                Some(ForkOwed::Unpin { fork, token, source }) => {
                    self.command(Op::ForkUnpin(ForkUnpin { source, token, fork: fork.clone() }))?;
                    Op::ForkOutboxDone(ForkOutboxDone { fork, token })
                }
                None => return Ok(()),
            },
            ForkAction::Delete { source } => {
                let names: Vec<StreamId> = match source {
                    true => self.model.forks.sources.keys().cloned().collect(),
                    false => self.model.forks.origins.keys().cloned().collect(),
                };
                Op::Delete(names.get(n % names.len().max(1)).cloned().unwrap_or(sid))
            }
            ForkAction::Source => {
                let real = self.real.fork_source(&sid, self.now).map(|f| (f.head, f.incarnation));
                let real = real.map_err(|e| Fault::of(&e));
                prop_assert_eq!(real, self.model.fork_source(&sid, self.now), "fork source of {}", sid);
                return Ok(());
            }
        };
        self.command(op)
    }

    /// A queue group step: a command resolved against the model's state
    /// (receipts of messages in flight, or stale ones), or a comparison of
    /// backlogs and dead letters.
    fn queue(
        &mut self,
        s: usize,
        group: &str,
        action: &QueueAction,
        n: usize,
        ms: u64,
    ) -> Result<(), TestCaseError> {
        use rill_shard::state::api::{Receive, Start};
        use rill_shard::state::command::{QueueDeadLetters, QueuePolicySet, QueueSettle};
        use rill_shard::state::group::HotOnly;
        let sid = id(s);
        let group_s = group.to_string();
        let receipt = |stale: bool| {
            let q = self.model.queue_view(&sid, group);
            let live: Vec<u64> =
                q.map(|q| q.in_flight.iter().map(|m| m.receipt).collect()).unwrap_or_default();
            match (stale, live.is_empty()) {
                (false, false) => live[n % live.len()],
                (true, _) => q.map_or(0, |q| q.last_receipt.saturating_sub(n as u64)),
                (false, true) => n as u64,
            }
        };
        let op = match action {
            QueueAction::Receive { latest } => {
                let start = if *latest { Start::Latest } else { Start::Earliest };
                let visibility = std::time::Duration::from_millis(ms.min(1 << 40));
                let req = Receive::new(&sid, group).max_messages(n).visibility(visibility).start(start);
                match self.real.prepare_receive(&req, self.now, &HotOnly) {
                    Ok(cmd) => Op::QueueReceive(cmd),
                    Err(e) => {
                        // Admission refuses only what the command would: the
                        // stream, or a lease group of that name.
                        let model =
                            self.model.find(&sid, self.now).and_then(|st| st.queue(group).map(|_| ()));
                        prop_assert_eq!(Err(Fault::of(&e)), model, "receive admission of {} {}", sid, group);
                        return Ok(());
                    }
                }
            }
            QueueAction::Ack { stale } => Op::QueueAck(QueueSettle {
                id: sid.clone(),
                group: group_s,
                receipt: receipt(*stale),
                delay_ms: 0,
            }),
            QueueAction::Nack { stale } => Op::QueueNack(QueueSettle {
                id: sid.clone(),
                group: group_s,
                receipt: receipt(*stale),
                delay_ms: ms,
            }),
            QueueAction::Policy => Op::SetQueuePolicy(QueuePolicySet {
                id: sid.clone(),
                group: group_s,
                max_attempts: n as u32,
                max_in_flight: (ms % 4) as u32,
                start_offset: self.model.streams.get(&sid).map_or(0, |st| st.retained),
            }),
            QueueAction::Purge => Op::PurgeDeadLetters(QueueDeadLetters { id: sid.clone(), group: group_s }),
            QueueAction::Redrive => {
                Op::RedriveDeadLetters(QueueDeadLetters { id: sid.clone(), group: group_s })
            }
            QueueAction::Look => {
                let real = self
                    .real
                    .backlog(&sid, group, self.now, &HotOnly)
                    .map(|b| (b.ready, b.in_flight, b.dead, b.oldest_ready_age_ms))
                    .map_err(|e| Fault::of(&e));
                prop_assert_eq!(
                    real,
                    self.model.backlog(&sid, group, self.now),
                    "backlog of {} {}",
                    sid,
                    group
                );
                let real = self
                    .real
                    .dead_letter_list(&sid, group, n, self.now)
                    .map(|l| {
                        l.iter().map(|d| (d.offset, d.len, d.attempts, d.timestamp_ms)).collect::<Vec<_>>()
                    })
                    .map_err(|e| Fault::of(&e));
                prop_assert_eq!(real, self.model.dead_letters(&sid, group, n, self.now), "dead letters");
                return Ok(());
            }
            QueueAction::Retention { consumed, age } => {
                use rill_shard::state::api::RetentionPolicy;
                use rill_shard::state::command::RetentionSet;
                let age_ms = age.then_some(ms);
                let mut policy = RetentionPolicy::new().consumed(*consumed);
                if let Some(ms) = age_ms {
                    policy = policy.max_age(std::time::Duration::from_millis(ms.min(u64::MAX / 2)));
                }
                let raw = RetentionSet { id: sid.clone(), consumed: *consumed, max_age_ms: age_ms };
                if let Ok(cmd) = self.real.prepare_retention(&sid, policy, self.now) {
                    prop_assert_eq!(&cmd, &raw, "prepared retention");
                }
                // Admitted or not, the apply step judges it too.
                Op::SetRetention(raw)
            }
            QueueAction::Reclaim => match self.real.prepare_reclaim(&sid, self.now, &HotOnly) {
                Ok(cmd) => {
                    let age =
                        self.model.find(&sid, self.now).ok().and_then(|st| st.retention).and_then(|r| r.1);
                    if let Some(age) = age {
                        let cutoff = self.model.offset_at(&sid, self.now.saturating_sub(age), self.now);
                        prop_assert_eq!(cutoff, Ok(cmd.aged_to), "reclaim cutoff of {}", sid);
                    }
                    Op::Reclaim(cmd)
                }
                Err(e) => {
                    let model = self.model.find(&sid, self.now).and_then(|st| match st.retention {
                        Some(_) => Ok(()),
                        None => Err(Fault::new(rill_shard::error::ErrorCode::BadRequest)),
                    });
                    prop_assert_eq!(Err(Fault::of(&e)), model, "reclaim admission of {}", sid);
                    return Ok(());
                }
            },
        };
        self.command(op)
    }

    /// Applies one command to both sides and compares what they show.
    fn command(&mut self, op: Op) -> Result<(), TestCaseError> {
        self.command_observed(op).map(|_| ())
    }

    /// [`Self::command`], answering what both sides showed.
    fn command_observed(&mut self, op: Op) -> Result<rill_fuzz::Observed, TestCaseError> {
        let cmd = Command { now_ms: self.now, op };
        let before = self.real.clone();
        let mut effects = Vec::new();
        let applied = self.real.apply(&cmd, &mut effects);
        self.real.check_invariants();
        let real = observe(&applied, effects);
        let model = self.model.apply(&cmd);
        prop_assert_eq!(&real, &model, "command {:?} at {}", cmd.op, self.now);
        if !real.mutated {
            prop_assert!(self.real == before, "{:?} changed state without mutating", cmd.op);
        }
        Ok(real)
    }

    /// Reads on both sides; returns `(next_offset, up_to_date)` on success.
    fn compare_read(
        &self,
        s: usize,
        offset: u64,
        max_len: usize,
    ) -> Result<Option<(u64, bool)>, TestCaseError> {
        let req = Read::new(id(s)).offset(offset).max_len(max_len);
        let real = self.real.read(&req, self.now).map_err(|e| Fault::of(&e));
        let model = self.model.read(&id(s), offset, max_len, self.now);
        match (&real, &model) {
            (Ok(r), Ok(m)) => {
                prop_assert_eq!(r.offset, offset);
                prop_assert_eq!(&r.payload[..], &m.bytes[..], "bytes of {} at {}", id(s), offset);
                prop_assert_eq!(
                    (r.next_offset, r.up_to_date, r.closed),
                    (m.next_offset, m.up_to_date, m.closed)
                );
                Ok(Some((r.next_offset, r.up_to_date)))
            }
            (Err(r), Err(m)) => {
                prop_assert_eq!(r, m, "read of {} at {}", id(s), offset);
                Ok(None)
            }
            _ => Err(TestCaseError::fail(format!(
                "read of {} at {offset}: real {real:?}, model {model:?}",
                id(s)
            ))),
        }
    }

    /// Record reads on both sides; returns `(next_offset, up_to_date)` on
    /// success.
    fn compare_records(
        &self,
        s: usize,
        offset: u64,
        max_len: usize,
    ) -> Result<Option<(u64, bool)>, TestCaseError> {
        let req = Read::new(id(s)).offset(offset).max_len(max_len).records(true);
        let real = self.real.read(&req, self.now).map_err(|e| Fault::of(&e));
        let model = self.model.read_records(&id(s), offset, max_len, self.now);
        match (&real, &model) {
            (Ok(r), Ok((m, records))) => {
                prop_assert_eq!(&r.payload[..], &m.bytes[..], "records of {} at {}", id(s), offset);
                prop_assert_eq!(
                    (r.next_offset, r.up_to_date, r.closed),
                    (m.next_offset, m.up_to_date, m.closed)
                );
                let real_records: Vec<(u64, u64)> = r.records.iter().map(|m| (m.offset, m.at_ms)).collect();
                prop_assert_eq!(&real_records, records, "record metas of {} at {}", id(s), offset);
                prop_assert_eq!(r.offset, records.first().map_or(r.next_offset, |m| m.0));
                Ok(Some((r.next_offset, r.up_to_date)))
            }
            (Err(r), Err(m)) => {
                prop_assert_eq!(r, m, "record read of {} at {}", id(s), offset);
                Ok(None)
            }
            _ => Err(TestCaseError::fail(format!(
                "record read of {} at {offset}: real {real:?}, model {model:?}",
                id(s)
            ))),
        }
    }

    /// Compares everything queryable without a command.
    fn compare_views(&self) -> Result<(), TestCaseError> {
        self.real.check_invariants();
        prop_assert_eq!(self.real.commit_index(), self.model.commit_index);
        prop_assert_eq!(self.real.hot_bytes(), self.model.hot_bytes());
        prop_assert_eq!(self.real.stream_count(), self.model.streams.len() as u64);
        prop_assert_eq!(self.real.next_expiry_ms(), self.model.next_expiry_ms());
        let members: std::collections::BTreeMap<(String, String), _> = self
            .real
            .members()
            .iter()
            .flat_map(|(b, groups)| groups.iter().map(move |(g, m)| ((b.clone(), g.clone()), m.clone())))
            .collect();
        prop_assert_eq!(&members, &self.model.members, "membership");
        prop_assert_eq!(self.real.fork_outbox(), self.model.fork_outbox(), "fork outbox");
        let book = postcard::to_allocvec(self.real.forks()).unwrap();
        prop_assert!(
            book == self.model.forks.encoded(),
            "fork book: real {:?}, model {:?}",
            self.real.forks(),
            self.model.forks
        );
        for s in 0..IDS {
            let real = self.real.head_view(&id(s), self.now).map_err(|e| Fault::of(&e));
            prop_assert_eq!(real, self.model.head(&id(s), self.now), "head of {}", id(s));
            let real = self.real.get_attrs(&id(s), self.now).map_err(|e| Fault::of(&e));
            prop_assert_eq!(real, self.model.get_attrs(&id(s), self.now), "attrs of {}", id(s));
            prop_assert_eq!(
                self.real.renewal_due(&id(s), self.now),
                self.model.renewal_due(&id(s), self.now)
            );
        }
        Ok(())
    }
}
