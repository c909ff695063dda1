//! The front half of a mutation: admission, then apply, then the decision
//! of what must be logged (SPEC §2, §4).
//!
//! Admission comes first and reveals nothing of the group's state: a
//! command whose payload would take the group's uncommitted bytes past
//! `max_uncommitted_bytes_per_group`, or that could not fit one log record
//! (its [`Command::body_len_bound`] beyond the WAL's largest body), is
//! refused before it is applied, so a refused command changes nothing and
//! nothing the state machine applied can then fail to be logged. An applied command either left the
//! state as it was (a duplicate, an idempotent re-create, a rejection): its
//! answer waits only for the group's earlier entries; or it changed the
//! state, advancing the commit index by exactly one: then it must be logged
//! at that index before anyone hears of it.

use crate::error::{Error, ErrorKind, Result};
use crate::state::command::{Command, Effect, Response};
use crate::state::group::GroupState;
use crate::wal::format::MAX_BODY_LEN;

/// What a group must do with a command after [`admit_and_apply`].
#[derive(Debug)]
pub enum Mutation {
    /// Refused at admission; nothing was applied. Answer at once.
    Refused(Error),
    /// Applied without changing the state. Answer once the group's earlier
    /// entries are durable.
    Unchanged(Result<Response>),
    /// Applied and changed the state: log the command at `index`, answer
    /// once that entry is durable, then release the effects.
    Logged {
        /// The group's commit index after the command (the entry's index).
        index: u64,
        /// What applying returned.
        result: Result<Response>,
        /// Live readers to wake or fail once the entry is durable.
        effects: Vec<Effect>,
        /// Payload bytes the entry holds uncommitted until it is durable.
        payload_bytes: u64,
    },
}

/// Admission alone: `cmd` of group `group` fits one log record and its
/// payload fits the group's uncommitted bytes; returns the payload bytes it
/// adds. A replicated group admits with this before it proposes.
pub fn admit(cmd: &Command, group: u32, uncommitted_bytes: u64, max_uncommitted_bytes: u64) -> Result<u64> {
    let bound = cmd.body_len_bound();
    if bound > MAX_BODY_LEN as u64 {
        return Err(Error::new(ErrorKind::PayloadTooLarge { len: bound, limit: MAX_BODY_LEN as u64 }));
    }
    let added = cmd.payload_len();
    if added > 0 && uncommitted_bytes.saturating_add(added) > max_uncommitted_bytes {
        return Err(Error::new(ErrorKind::UncommittedBackpressure {
            group,
            before: uncommitted_bytes,
            after: uncommitted_bytes.saturating_add(added),
            limit: max_uncommitted_bytes,
        }));
    }
    Ok(added)
}

/// Admits `cmd` against the group's uncommitted bytes and applies it.
pub fn admit_and_apply(
    state: &mut GroupState,
    cmd: &Command,
    uncommitted_bytes: u64,
    max_uncommitted_bytes: u64,
) -> Mutation {
    let added = match admit(cmd, state.group(), uncommitted_bytes, max_uncommitted_bytes) {
        Ok(added) => added,
        Err(err) => return Mutation::Refused(err),
    };
    let mut effects = Vec::new();
    let applied = state.apply(cmd, &mut effects);
    if !applied.mutated {
        return Mutation::Unchanged(applied.result);
    }
    Mutation::Logged { index: state.commit_index(), result: applied.result, effects, payload_bytes: added }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::ErrorCode;
    use crate::state::api::{Append, Create};
    use crate::state::command::Op;
    use crate::state::group::GroupLimits;
    use crate::state::name::StreamId;

    fn group() -> (GroupState, StreamId) {
        let mut state = GroupState::new(0, 1, GroupLimits::default());
        let id = StreamId::new("b", "s").unwrap();
        let create = Command { now_ms: 1, op: Op::from(Create::new(id.clone())) };
        assert!(matches!(admit_and_apply(&mut state, &create, 0, 100), Mutation::Logged { index: 1, .. }));
        (state, id)
    }

    // SPEC §4: a command over the uncommitted-bytes limit is refused whole,
    // before it is applied: nothing changes.
    #[test]
    fn admission_refuses_before_applying() {
        let (mut state, id) = group();
        let before = state.encode_snapshot();
        let append = Command { now_ms: 2, op: Op::from(Append::new(id, vec![7u8; 10])) };
        match admit_and_apply(&mut state, &append, 95, 100) {
            Mutation::Refused(e) => assert_eq!(e.code(), ErrorCode::UncommittedBackpressure),
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(state.encode_snapshot(), before);
    }

    // SPEC §4: a command that could not fit one log record is refused
    // before it is applied (here: attributes past the record limit), so
    // nothing applied can fail to be logged.
    #[test]
    fn a_command_beyond_the_record_limit_is_refused() {
        let (mut state, id) = group();
        let before = state.encode_snapshot();
        let huge = Command {
            now_ms: 2,
            op: Op::Append(crate::state::command::Append {
                content_type: Some("x".repeat(MAX_BODY_LEN)),
                ..crate::state::command::Append::from(Append::new(id, vec![1u8]))
            }),
        };
        match admit_and_apply(&mut state, &huge, 0, u64::MAX) {
            Mutation::Refused(e) => assert_eq!(e.code(), ErrorCode::PayloadTooLarge),
            other => panic!("expected a refusal, got {other:?}"),
        }
        assert_eq!(state.encode_snapshot(), before);
    }

    // The bound is an upper bound of the real encoding.
    #[test]
    fn the_body_bound_covers_the_encoding() {
        let id = StreamId::new("bucket", "stream").unwrap();
        let commands = [
            Command { now_ms: u64::MAX, op: Op::from(Create::new(id.clone()).content_type("text/plain")) },
            Command { now_ms: 7, op: Op::from(Append::new(id.clone(), vec![9u8; 300]).producer("p", 3, 9)) },
            Command { now_ms: 7, op: Op::Delete(id) },
            Command { now_ms: 7, op: Op::GcAck { seqs: vec![u64::MAX; 5] } },
        ];
        for cmd in commands {
            let encoded = postcard::to_stdvec(&cmd).unwrap().len() as u64;
            assert!(encoded <= cmd.body_len_bound(), "{cmd:?}: {encoded} > {}", cmd.body_len_bound());
        }
    }

    // SPEC §2: an applied mutation is logged at the next commit index; a
    // command that changes nothing is not.
    #[test]
    fn only_state_changes_are_logged() {
        let (mut state, id) = group();
        let append = Command { now_ms: 2, op: Op::from(Append::new(id.clone(), vec![7u8; 10])) };
        match admit_and_apply(&mut state, &append, 0, 100) {
            Mutation::Logged { index, payload_bytes, result, .. } => {
                assert_eq!((index, payload_bytes), (2, 10));
                assert!(result.is_ok());
            }
            other => panic!("expected a logged append, got {other:?}"),
        }
        let again = Command { now_ms: 3, op: Op::from(Create::new(id)) };
        assert!(matches!(admit_and_apply(&mut state, &again, 0, 100), Mutation::Unchanged(Ok(_))));
        assert_eq!(state.commit_index(), 2);
    }
}
