//! Consumption-driven retention in the simulation (SPEC §2
//! "Consumption-driven retention"): a policy is set through the real
//! admission check (a refused one is still logged raw, so the apply step's
//! own check is judged too), and a reclaim is prepared against the real
//! group's state the way the runtime prepares it (the age cutoff found hot
//! or in the simulated packs), its cutoff checked against the model's
//! `offset_at`, then applied, judged and logged like every other command.
//!
//! What this proves rides on the world's checks: the retained start, the
//! hot bytes, the chunks released to the removal queue and every queue
//! group's messages are compared with the model after every step and,
//! after every crash, with the model of what was acknowledged. So a
//! reclaim never drops what some consumer group has not consumed (unless
//! the age rule says so), and what a durable reclaim dropped stays dropped.

use std::time::Duration;

use rill_shard::state::api::RetentionPolicy;
use rill_shard::state::command::{Op, RetentionSet};
use rill_shard::StreamId;

use super::kit::{ensure, guard, Fail};
use super::world::Sim;
use crate::observe::Fault;

impl Sim {
    /// Sets `id`'s policy: the consumed rule when `consumed`, an age rule
    /// of `age_ms` when given (0 and above ten years are refused).
    pub(super) fn set_retention(
        &mut self,
        id: StreamId,
        consumed: bool,
        age_ms: Option<u64>,
    ) -> Result<(), Fail> {
        let g = self.group_of(&id);
        let mut policy = RetentionPolicy::new().consumed(consumed);
        if let Some(ms) = age_ms {
            policy = policy.max_age(Duration::from_millis(ms));
        }
        let group = &self.groups[g as usize];
        let prepared = guard("prepare retention", || group.live.prepare_retention(&id, policy, self.now))?;
        let raw = RetentionSet { id: id.clone(), consumed, max_age_ms: age_ms };
        if let Ok(cmd) = &prepared {
            ensure(*cmd == raw, "retention command", || format!("{id}: prepared {cmd:?}, asked {raw:?}"))?;
        }
        // Admitted or not, the apply step judges the raw command as well.
        self.command_in(g, Op::SetRetention(raw), None)
    }

    /// Reclaims `id` by its policy, as the runtime's reclaim request does.
    pub(super) fn reclaim(&mut self, id: StreamId) -> Result<(), Fail> {
        let g = self.group_of(&id);
        let group = &self.groups[g as usize];
        let prepared = guard("prepare reclaim", || group.live.prepare_reclaim(&id, self.now, &self.store))?;
        let cmd = match prepared {
            Ok(cmd) => cmd,
            // A damaged pack may refuse the cutoff's lookup.
            Err(e) if self.refused_on_damage(&e) => return Ok(()),
            Err(e) => {
                // Refused only for the stream or a missing policy.
                let model = group.model_live.find(&id, self.now).and_then(|st| match st.retention {
                    Some(_) => Ok(()),
                    None => Err(Fault::new(rill_shard::error::ErrorCode::BadRequest)),
                });
                let real = Err(Fault::of(&e));
                return ensure(real == model, "reclaim admission", || {
                    format!("{id}: real {real:?}, model {model:?}")
                });
            }
        };
        let model = &group.model_live;
        if let Some((_, Some(age))) = model.find(&id, self.now).ok().and_then(|st| st.retention) {
            let cutoff = model.offset_at(&id, self.now.saturating_sub(age), self.now);
            ensure(cutoff == Ok(cmd.aged_to), "reclaim cutoff", || {
                format!("{id} age {age} at {}: prepared {}, model {cutoff:?}", self.now, cmd.aged_to)
            })?;
        }
        let before = model.streams.get(&id).map_or(0, |st| st.retained);
        self.command_in(g, Op::Reclaim(cmd), None)?;
        let after = self.groups[g as usize].model_live.streams.get(&id).map_or(0, |st| st.retained);
        if after > before {
            self.stats.reclaims += 1;
            self.stats.reclaimed_bytes += after - before;
        }
        Ok(())
    }
}
