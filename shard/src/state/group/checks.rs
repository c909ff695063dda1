//! Argument checks and errors shared by the three kinds of consumer
//! state (lease groups, membership, queue groups): a leaf of `group/`, so
//! that none of those files reaches into another.

use crate::error::{Error, ErrorKind, Result};
use crate::state::api::{MAX_CONSUMER_NAME_LEN, MAX_LEASE_TTL};

/// Checks a consumer group, owner or consumer name (also membership's).
pub(super) fn check_name(what: &str, name: &str) -> Result<()> {
    if name.is_empty() || name.len() > MAX_CONSUMER_NAME_LEN {
        return Err(Error::bad_request(format!(
            "a {what} name has 1 to {MAX_CONSUMER_NAME_LEN} bytes, not {}",
            name.len()
        )));
    }
    Ok(())
}

/// Checks a lease's or heartbeat's TTL (also membership's).
pub(super) fn check_ttl(ttl_ms: u64) -> Result<()> {
    let max = MAX_LEASE_TTL.as_millis() as u64;
    if ttl_ms == 0 || ttl_ms > max {
        return Err(Error::bad_request(format!("a lease lasts from 1 to {max} ms, not {ttl_ms}")));
    }
    Ok(())
}

/// The error for a consumer group name used as the other kind: `wanted`
/// is "lease" or "queue" (SPEC §2, one namespace per stream).
pub(super) fn kind_mismatch(group: &str, wanted: &'static str) -> Error {
    let is = if wanted == "queue" { "lease" } else { "queue" };
    ErrorKind::ConsumerGroupKindMismatch { consumer_group: group.to_string(), is, wanted }.into()
}
