//! What a create must carry and match, shared by plain creates (`ops.rs`)
//! and fork creates (`forks.rs`): a leaf of `group/`, so neither file
//! reaches into the other.

use bytes::Bytes;

use crate::error::{ErrorKind, Result};
use crate::state::command::Create;
use crate::state::group::stream::StreamState;

/// A fork's inherited records and where they start
/// (`GroupState::create_with` in `ops.rs`).
pub(crate) struct Prefix<'a> {
    pub(crate) start: u64,
    pub(crate) records: &'a [Bytes],
}

/// An idempotent create must match the stored settings (SPEC §2 Create).
pub(crate) fn settings_match(existing: &StreamState, req: &Create) -> Result<()> {
    let field = if existing.content_type != req.effective_content_type() {
        "content_type"
    } else if existing.ttl_s != req.ttl_s {
        "ttl_s"
    } else if existing.expires_at_ms != req.expires_at_ms {
        "expires_at_ms"
    } else if existing.closed != req.closed {
        "closed"
    } else {
        return Ok(());
    };
    Err(ErrorKind::StreamConflict { field }.into())
}

