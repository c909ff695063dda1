//! The dispatcher's adaptive idle spin: when to keep the executor awake
//! instead of parking it on an empty mailbox.
//!
//! Parking costs a round of sleeping-thread wakes: the next sender writes
//! the executor's eventfd, and the kernel wakes a halted vCPU (tens of
//! microseconds on a VM). When more mail is likely soon, the dispatcher
//! wakes itself instead (`wake_by_ref` and `Pending`): glommio then keeps
//! polling its ring and runs the dispatcher again, senders see no parked
//! flag and pay no wake, and I/O completions (a WAL write or sync) are
//! reaped without a sleep. Mail is "likely soon" when some came within
//! [`SpinPolicy::idle_spin`], or while replies of the core wait for the log
//! (a flush is in flight and its completion will release them).
//!
//! Spinning takes CPU that other threads (the callers, on a machine with
//! few cores) may need, so it is gated twice per accounting period:
//! * **utilisation**: no spin while the previous period was busy for at
//!   least [`BUSY_CUTOFF_PERCENT`] of its time (at saturation mail arrives
//!   anyway and a spin only steals CPU);
//! * **budget**: spinning in one period stops at
//!   [`SpinPolicy::budget_percent`] of the period.
//!
//! Invariants: the policy only decides between parking and waking itself;
//! either way the dispatcher is polled again (by a sender's wake or by its
//! own), so no mail is ever left unseen. Time is read from the monotonic
//! clock; a period's busy share counts only time the dispatcher was neither
//! parked nor spinning.

use std::cell::Cell;
use std::time::{Duration, Instant};

pub use crate::limits::SpinPolicy;

/// A period whose busy share reaches this disables spinning in the next.
pub const BUSY_CUTOFF_PERCENT: u64 = 50;

/// How long an accounting period lasts.
pub const PERIOD: Duration = Duration::from_millis(2);

/// What the dispatcher was doing since its last poll.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Since {
    Busy,
    Parked(Instant),
    Spinning(Instant),
}

/// The policy's state: one per mailbox receiver, single-threaded.
#[derive(Debug)]
pub struct IdleSpin {
    policy: SpinPolicy,
    last_mail: Cell<Option<Instant>>,
    since: Cell<Since>,
    period_start: Cell<Instant>,
    idle_in_period: Cell<Duration>,
    spun_in_period: Cell<Duration>,
    busy_percent_before: Cell<u64>,
}

/// What [`IdleSpin::idle`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Idle {
    /// Park until a sender wakes the dispatcher.
    Park,
    /// Wake itself and look again.
    Spin,
}

impl IdleSpin {
    /// A fresh state for `policy`.
    pub fn new(policy: SpinPolicy) -> Self {
        let now = Instant::now();
        IdleSpin {
            policy,
            last_mail: Cell::new(None),
            since: Cell::new(Since::Busy),
            period_start: Cell::new(now),
            idle_in_period: Cell::new(Duration::ZERO),
            spun_in_period: Cell::new(Duration::ZERO),
            busy_percent_before: Cell::new(0),
        }
    }

    /// Called at the start of every poll: accounts the time since the last
    /// one and rolls the period over. Returns how long the dispatcher spun
    /// since its previous poll (zero unless it was spinning).
    pub fn resume(&self, now: Instant) -> Duration {
        let mut spun = Duration::ZERO;
        match self.since.replace(Since::Busy) {
            Since::Busy => {}
            Since::Parked(at) => self.add_idle(now.saturating_duration_since(at)),
            Since::Spinning(at) => {
                spun = now.saturating_duration_since(at);
                self.add_idle(spun);
                self.spun_in_period.set(self.spun_in_period.get() + spun);
            }
        }
        let elapsed = now.saturating_duration_since(self.period_start.get());
        if elapsed >= PERIOD {
            let idle = self.idle_in_period.get().min(elapsed);
            let busy = elapsed - idle;
            self.busy_percent_before.set((busy.as_nanos() * 100 / elapsed.as_nanos().max(1)) as u64);
            self.period_start.set(now);
            self.idle_in_period.set(Duration::ZERO);
            self.spun_in_period.set(Duration::ZERO);
        }
        spun
    }

    fn add_idle(&self, d: Duration) {
        self.idle_in_period.set(self.idle_in_period.get() + d);
    }

    /// Records that mail was taken at `now`.
    pub fn mail(&self, now: Instant) {
        self.last_mail.set(Some(now));
    }

    /// The mailbox is empty at `now`: park or spin? `waiting` says whether
    /// replies of the core wait for the log.
    pub fn idle(&self, now: Instant, waiting: bool) -> Idle {
        let decision = self.decide(now, waiting);
        self.since.set(match decision {
            Idle::Park => Since::Parked(now),
            Idle::Spin => Since::Spinning(now),
        });
        decision
    }

    fn decide(&self, now: Instant, waiting: bool) -> Idle {
        if !self.policy.enabled() {
            return Idle::Park;
        }
        let recent = self.last_mail.get().is_some_and(|at| now.saturating_duration_since(at) < self.policy.idle_spin);
        if !(recent || waiting) {
            return Idle::Park;
        }
        if self.busy_percent_before.get() >= BUSY_CUTOFF_PERCENT {
            return Idle::Park;
        }
        let budget = PERIOD * self.policy.budget_percent.min(100) / 100;
        if self.spun_in_period.get() >= budget {
            return Idle::Park;
        }
        Idle::Spin
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ON: SpinPolicy = SpinPolicy { idle_spin: Duration::from_micros(50), budget_percent: 25 };

    fn us(n: u64) -> Duration {
        Duration::from_micros(n)
    }

    #[test]
    fn off_never_spins() {
        let s = IdleSpin::new(SpinPolicy::OFF);
        let t = Instant::now();
        s.resume(t);
        s.mail(t);
        assert_eq!(s.idle(t, true), Idle::Park);
    }

    #[test]
    fn spins_only_after_recent_mail_or_while_replies_wait() {
        let s = IdleSpin::new(ON);
        let t = s.period_start.get();
        s.resume(t);
        assert_eq!(s.idle(t, false), Idle::Park, "no mail yet");
        s.resume(t + us(1));
        s.mail(t + us(1));
        assert_eq!(s.idle(t + us(2), false), Idle::Spin);
        s.resume(t + us(10));
        assert_eq!(s.idle(t + us(60), false), Idle::Park, "mail is 59 µs old");
        s.resume(t + us(70));
        assert_eq!(s.idle(t + us(70), true), Idle::Spin, "a flush is in flight");
    }

    #[test]
    fn the_budget_caps_spinning_in_a_period() {
        let s = IdleSpin::new(ON);
        let t = s.period_start.get();
        let mut now = t;
        let mut spun = Duration::ZERO;
        // Spin in 10 µs steps with replies waiting: 25% of 2 ms is 500 µs.
        loop {
            spun += s.resume(now);
            if s.idle(now, true) == Idle::Park {
                break;
            }
            now += us(10);
            assert!(now < t + PERIOD, "the budget never ran out");
        }
        assert!(spun >= us(500) && spun < us(520), "spun {spun:?}");
        // The next period starts with a fresh budget.
        s.resume(t + PERIOD + us(1));
        assert_eq!(s.idle(t + PERIOD + us(1), true), Idle::Spin);
    }

    #[test]
    fn a_busy_period_turns_spinning_off_for_the_next() {
        let s = IdleSpin::new(ON);
        let t = s.period_start.get();
        // Busy all period long, with mail.
        s.resume(t);
        s.mail(t + PERIOD);
        s.resume(t + PERIOD);
        assert_eq!(s.busy_percent_before.get(), 100);
        assert_eq!(s.idle(t + PERIOD, true), Idle::Park);
        // A parked period brings spinning back.
        s.resume(t + PERIOD * 2 + us(5));
        s.mail(t + PERIOD * 2 + us(5));
        assert_eq!(s.busy_percent_before.get(), 0);
        assert_eq!(s.idle(t + PERIOD * 2 + us(6), false), Idle::Spin);
    }
}
