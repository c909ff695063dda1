//! A group's queue requests on its core (SPEC §2 "Queues"): a receive is
//! admitted against the group's state (its start resolved, the records
//! from the group's high-water mark found hot or cold), applied and logged
//! as one [`Op::QueueReceive`], and answered with each delivery's bytes
//! once that entry is durable; dead letters are listed with their bytes.
//! A retention reclaim is admitted the same way (its age cutoff found hot
//! or cold) and logged as one [`Op::Reclaim`].
//!
//! Invariants: the bytes of a delivery are read in the same step that
//! applied the receive, so retention cannot take them in between; a
//! receive that fails after it was applied (a pack read error) has still
//! handed its messages out, and they come back after their visibility
//! timeout (at least once, never lost).

use std::rc::Rc;
use std::time::Instant;

use bytes::{Bytes, BytesMut};

use super::commit::LatencyKind;
use super::envelope::{Reply, ReplyTx};
use super::group_task::Group;
use super::Core;
use crate::error::{Error, ErrorKind, Result};
use crate::state::api::{Delivery, DeliveryMeta, Read, Receive};
use crate::state::command::{Op, Response};
use crate::state::name::StreamId;

impl Group {
    /// Serves one receive (see the module docs).
    pub(super) async fn receive(&self, core: &Rc<Core>, now: u64, req: Receive, tx: ReplyTx, sent_at: Instant) {
        let kind = LatencyKind::Other;
        let prepared = self.state.borrow().prepare_receive(&req, now, core.as_ref());
        let cmd = match prepared {
            Ok(cmd) => cmd,
            Err(err) => return self.answer(core, Err(err), tx, sent_at, kind),
        };
        let id = req.id;
        let finish = |result: Result<Response>| match result? {
            Response::Received { deliveries, .. } => self.with_bytes(core, &id, &deliveries, now).map(Reply::Deliveries),
            _ => Err(Error::new(ErrorKind::Internal { what: "receive" })),
        };
        self.mutate_then(core, now, Op::QueueReceive(cmd), tx, sent_at, kind, finish).await
    }

    /// Serves one reclaim: the age cutoff is found against the group's
    /// state (hot times or the cold record index), then the reclaim is
    /// applied and logged; what it took is counted in the core's metrics.
    pub(super) async fn reclaim(&self, core: &Rc<Core>, now: u64, id: StreamId, tx: ReplyTx, sent_at: Instant) {
        let kind = LatencyKind::Other;
        let prepared = self.state.borrow().prepare_reclaim(&id, now, core.as_ref());
        let cmd = match prepared {
            Ok(cmd) => cmd,
            Err(err) => return self.answer(core, Err(err), tx, sent_at, kind),
        };
        let finish = |result: Result<Response>| {
            let response = result?;
            if let Response::Reclaimed { reclaimed, .. } = &response {
                use std::sync::atomic::Ordering::Relaxed;
                core.metrics.reclaimed_consumed_bytes.fetch_add(reclaimed.consumed_bytes, Relaxed);
                core.metrics.reclaimed_aged_bytes.fetch_add(reclaimed.aged_bytes, Relaxed);
            }
            Ok(Reply::Applied(response))
        };
        self.mutate_then(core, now, Op::Reclaim(cmd), tx, sent_at, kind, finish).await
    }

    /// Up to `max` dead letters of a queue group, with their bytes.
    pub(super) fn dead_letters(
        &self,
        core: &Core,
        id: &StreamId,
        group: &str,
        max: usize,
        now: u64,
    ) -> Result<Vec<Delivery>> {
        let listed = self.state.borrow().dead_letter_list(id, group, max, now)?;
        self.with_bytes(core, id, &listed, now)
    }

    /// The deliveries with each record's bytes, hot or cold.
    fn with_bytes(&self, core: &Core, id: &StreamId, metas: &[DeliveryMeta], now: u64) -> Result<Vec<Delivery>> {
        metas
            .iter()
            .map(|m| {
                Ok(Delivery {
                    offset: m.offset,
                    payload: self.record_bytes(core, id, m.offset, m.len, now)?,
                    attempts: m.attempts,
                    receipt: m.receipt,
                    timestamp_ms: m.timestamp_ms,
                })
            })
            .collect()
    }

    /// The bytes `[offset, offset + len)` of a stream, in as many reads as
    /// the group's read limit needs.
    fn record_bytes(&self, core: &Core, id: &StreamId, offset: u64, len: u64, now: u64) -> Result<Bytes> {
        let mut at = offset;
        let end = offset + len;
        let mut out = BytesMut::new();
        while at < end {
            let want = usize::try_from(end - at).unwrap_or(usize::MAX);
            let read = self.read_now(core, &Read::new(id.clone()).offset(at).max_len(want), now)?;
            if read.payload.is_empty() {
                return Err(Error::corrupted(format!(
                    "the record at {offset} of {id} ({len} bytes) ends at {at}, before its length"
                )));
            }
            if at == offset && read.payload.len() as u64 == len {
                return Ok(read.payload);
            }
            at += read.payload.len() as u64;
            out.extend_from_slice(&read.payload);
        }
        Ok(out.freeze())
    }
}
