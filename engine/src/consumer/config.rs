//! What a coordinated reader is told: who it is, which streams it shares
//! with its consumer group, how long its claims last, where it starts and
//! when it commits. [`ReaderConfig::check`] refuses settings a reader
//! could never run (a lease that would lapse between two renewals, an
//! empty name, a stream listed twice) with a `BadRequest` naming the
//! setting.

use std::time::Duration;

use crate::{Error, Result, StreamId, MAX_CONSUMER_NAME_LEN, MAX_LEASE_TTL};

use super::Start;

/// When acked records become a committed offset: after `max_pending_acks`
/// acks of a stream, or once `max_pending_interval` has passed since the
/// first ack not yet committed, whichever comes first. The commit carries
/// the highest offset the acks reach; whatever is pending is committed when
/// a stream is released and when the reader shuts down. After a crash, the
/// acks not yet committed are delivered again (at least once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FlushPolicy {
    /// Commit after this many acks of a stream (1: after every ack).
    pub max_pending_acks: u32,
    /// Commit once the oldest uncommitted ack is this old.
    pub max_pending_interval: Duration,
}

impl FlushPolicy {
    /// A policy of `max_pending_acks` acks or `max_pending_interval`.
    pub fn new(max_pending_acks: u32, max_pending_interval: Duration) -> Self {
        FlushPolicy { max_pending_acks, max_pending_interval }
    }

    /// Commit after every ack (the default: the fewest redeliveries after a
    /// crash, one logged command per ack).
    pub fn every_ack() -> Self {
        FlushPolicy::new(1, Duration::from_secs(1))
    }
}

impl Default for FlushPolicy {
    fn default() -> Self {
        FlushPolicy::every_ack()
    }
}

/// The settings of a [`Reader`](super::Reader).
#[derive(Clone, Debug)]
pub struct ReaderConfig {
    pub(crate) bucket: String,
    pub(crate) consumer_group: String,
    pub(crate) consumer: String,
    pub(crate) streams: Vec<StreamId>,
    pub(crate) lease_ttl: Duration,
    pub(crate) member_ttl: Option<Duration>,
    pub(crate) rebalance_interval: Option<Duration>,
    pub(crate) slack: usize,
    pub(crate) start: Start,
    pub(crate) flush: FlushPolicy,
    pub(crate) fetch_bytes: usize,
}

/// The default lease TTL of a reader's claims.
pub const DEFAULT_READER_LEASE_TTL: Duration = Duration::from_secs(10);

/// The default bytes one fetch of a stream asks for.
pub const DEFAULT_FETCH_BYTES: usize = 256 << 10;

impl ReaderConfig {
    /// Consumer `consumer` of consumer group `consumer_group` sharing
    /// `streams`; its membership is kept under `bucket` (SPEC §2
    /// "Membership"). Defaults: 10 s leases, membership TTL equal to the
    /// lease TTL, a rebalance (heartbeat, renewals, claims and releases)
    /// every third of the lease TTL (+0–20% jitter), no slack, start at
    /// [`Start::Earliest`] where nothing is committed, a commit after
    /// every ack, 256 KiB fetches.
    pub fn new(bucket: &str, consumer_group: &str, consumer: &str, streams: Vec<StreamId>) -> Self {
        ReaderConfig {
            bucket: bucket.to_string(),
            consumer_group: consumer_group.to_string(),
            consumer: consumer.to_string(),
            streams,
            lease_ttl: DEFAULT_READER_LEASE_TTL,
            member_ttl: None,
            rebalance_interval: None,
            slack: 0,
            start: Start::Earliest,
            flush: FlushPolicy::default(),
            fetch_bytes: DEFAULT_FETCH_BYTES,
        }
    }

    /// How long a claim lasts without a renewal.
    pub fn lease_ttl(mut self, ttl: Duration) -> Self {
        self.lease_ttl = ttl;
        self
    }

    /// How long the reader counts as a live member without a heartbeat
    /// (default: the lease TTL).
    pub fn member_ttl(mut self, ttl: Duration) -> Self {
        self.member_ttl = Some(ttl);
        self
    }

    /// How often the reader heartbeats, renews, claims and releases
    /// (default: a third of the lease TTL); each wait is jittered by
    /// +0–20% so readers started together drift apart. With the jitter it
    /// must stay below the lease TTL.
    pub fn rebalance_interval(mut self, every: Duration) -> Self {
        self.rebalance_interval = Some(every);
        self
    }

    /// Streams a reader may hold beyond its even share
    /// ([`target_partition_count`](super::target_partition_count)).
    pub fn slack(mut self, slack: usize) -> Self {
        self.slack = slack;
        self
    }

    /// Where a stream without a committed offset is read from.
    pub fn start(mut self, start: Start) -> Self {
        self.start = start;
        self
    }

    /// When acks become commits.
    pub fn flush(mut self, policy: FlushPolicy) -> Self {
        self.flush = policy;
        self
    }

    /// Bytes one fetch of a stream asks for (at least one whole record
    /// comes back, however large).
    pub fn fetch_bytes(mut self, bytes: usize) -> Self {
        self.fetch_bytes = bytes;
        self
    }

    /// The membership TTL in effect.
    pub fn effective_member_ttl(&self) -> Duration {
        self.member_ttl.unwrap_or(self.lease_ttl)
    }

    /// The rebalance interval in effect (before jitter).
    pub fn effective_rebalance_interval(&self) -> Duration {
        self.rebalance_interval.unwrap_or(self.lease_ttl / 3)
    }

    /// Refuses settings a reader could never run.
    pub fn check(&self) -> Result<()> {
        for (what, name) in
            [("bucket", &self.bucket), ("consumer group", &self.consumer_group), ("consumer", &self.consumer)]
        {
            if name.is_empty() || name.len() > MAX_CONSUMER_NAME_LEN {
                return Err(Error::bad_request(format!(
                    "a reader's {what} name has 1 to {MAX_CONSUMER_NAME_LEN} bytes, not {}",
                    name.len()
                )));
            }
        }
        for ttl in [self.lease_ttl, self.effective_member_ttl()] {
            if ttl.as_millis() == 0 || ttl > MAX_LEASE_TTL {
                return Err(Error::bad_request(format!(
                    "a reader's lease and membership TTLs last from 1 ms to {} ms, not {} ms",
                    MAX_LEASE_TTL.as_millis(),
                    ttl.as_millis()
                )));
            }
        }
        let every = self.effective_rebalance_interval();
        let longest = every + every / 5;
        if every.is_zero() || longest >= self.lease_ttl || longest >= self.effective_member_ttl() {
            return Err(Error::bad_request(format!(
                "a reader's rebalance interval ({} ms, up to {} ms with jitter) must be positive and below \
                 its lease and membership TTLs ({} ms, {} ms)",
                every.as_millis(),
                longest.as_millis(),
                self.lease_ttl.as_millis(),
                self.effective_member_ttl().as_millis()
            )));
        }
        if self.flush.max_pending_acks == 0 || self.flush.max_pending_interval.is_zero() {
            return Err(Error::bad_request("a flush policy needs at least one ack and a positive interval"));
        }
        if self.fetch_bytes == 0 {
            return Err(Error::bad_request("a reader fetches at least one byte"));
        }
        let mut sorted: Vec<&StreamId> = self.streams.iter().collect();
        sorted.sort();
        if let Some(w) = sorted.windows(2).find(|w| w[0] == w[1]) {
            return Err(Error::bad_request(format!("stream {} is listed twice for one reader", w[0])));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::ReaderConfig;
    use crate::{ErrorCode, StreamId};

    fn base() -> ReaderConfig {
        ReaderConfig::new(
            "b",
            "g",
            "c",
            vec![StreamId::new("b", "s1").unwrap(), StreamId::new("b", "s2").unwrap()],
        )
    }

    #[test]
    fn defaults_are_runnable() {
        base().check().unwrap();
        assert_eq!(base().effective_rebalance_interval(), Duration::from_secs(10) / 3);
    }

    #[test]
    fn settings_that_cannot_run_are_refused_with_the_setting_named() {
        let bad = |c: ReaderConfig, needle: &str| {
            let err = c.check().unwrap_err();
            assert_eq!(err.code(), ErrorCode::BadRequest);
            assert!(err.to_string().contains(needle), "{err} should name {needle}");
        };
        bad(ReaderConfig::new("", "g", "c", vec![]), "bucket");
        bad(ReaderConfig::new("b", "g", "", vec![]), "consumer name");
        bad(base().lease_ttl(Duration::ZERO), "TTL");
        bad(
            base().lease_ttl(Duration::from_secs(1)).rebalance_interval(Duration::from_millis(900)),
            "rebalance",
        );
        bad(base().member_ttl(Duration::from_secs(1)), "rebalance");
        bad(base().flush(super::FlushPolicy::new(0, Duration::from_secs(1))), "flush");
        bad(base().fetch_bytes(0), "byte");
        let s = StreamId::new("b", "s").unwrap();
        bad(ReaderConfig::new("b", "g", "c", vec![s.clone(), s]), "twice");
    }
}
